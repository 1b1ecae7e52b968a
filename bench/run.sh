#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh BUILD_DIR [OUT_DIR] - every workload and method of fstxbench on a
# scratch directory and on fresh loop-mounted ext4, xfs and btrfs images and
# a tmpfs, then the report (OUT_DIR/README.md) and plots (OUT_DIR/*.png).
#   FSTX_BENCH_SCALE   transactions per round, as a factor (default 1)
#   FSTX_BENCH_ROUNDS  rounds, methods interleaved in each (default 3)
#   FSTX_BENCH_FS      filesystems (default "ext4 xfs btrfs tmpfs")
#   FSTX_BENCH_ARGS    more fstxbench arguments (e.g. "-w a,e1,e8")
#   FSTX_BENCH_FLUSH_US  then e1 and e8 again, the barrier methods only, on a
#                      modelled device whose cache flush takes this long
#                      (fstxbench -f; default 1000; 0: skip), into
#                      results-flush.tsv
set -u
B=${1:-build}
OUT=${2:-bench/results}
SCALE=${FSTX_BENCH_SCALE:-1}
ROUNDS=${FSTX_BENCH_ROUNDS:-3}
FSLIST=${FSTX_BENCH_FS:-ext4 xfs btrfs tmpfs}
FLUSH_US=${FSTX_BENCH_FLUSH_US:-1000}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fstx-bench-XXXXXX")
cleanup() {
	for m in "$WORK"/mnt-*; do
		[ -d "$m" ] && umount "$m" 2>/dev/null
	done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bash "$(dirname "$0")/setup.sh" || exit 1
mkdir -p "$OUT"
TSV=$OUT/results.tsv
: >"$TSV"
FTSV=$OUT/results-flush.tsv
rm -f "$FTSV"
bench() { # TAG DIR
	echo "== $1 ($(stat -f -c %T "$2"))" >&2
	"$B/fstxbench" -s "$SCALE" -r "$ROUNDS" -t "$1" ${FSTX_BENCH_ARGS:-} "$2" | tee -a "$TSV" >&2 ||
		echo "fstxbench failed on $1" >&2
	[ "$FLUSH_US" -gt 0 ] && [ "$1" != tmpfs ] || return 0
	echo "== $1, device flush ${FLUSH_US} us" >&2
	"$B/fstxbench" -s "$SCALE" -r "$ROUNDS" -t "$1" -f "$FLUSH_US" -w e1,e8 \
		-m raw-fsync,rename,sqlite-wal,sqlite-del,fstx,fstx-wal "$2" | tee -a "$FTSV" >&2 ||
		echo "fstxbench -f failed on $1" >&2
}
if [ "$(id -u)" -ne 0 ]; then
	mkdir -p "$WORK/scratch"
	bench scratch "$WORK/scratch"
fi
if [ "$(id -u)" -eq 0 ]; then
	for fs in $FSLIST; do
		m="$WORK/mnt-$fs"
		mkdir -p "$m"
		if [ "$fs" = tmpfs ]; then
			mount -t tmpfs -o size=3g tmpfs "$m" || continue
		else
			truncate -s 3G "$WORK/$fs.img"
			case $fs in
			ext4) mkfs.ext4 -q -F "$WORK/$fs.img" ;;
			xfs) mkfs.xfs -q -f "$WORK/$fs.img" ;;
			btrfs) mkfs.btrfs -q -f "$WORK/$fs.img" >/dev/null ;;
			esac || continue
			mount -o loop "$WORK/$fs.img" "$m" || continue
		fi
		bench "$fs" "$m"
		umount "$m"
	done
fi
{
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- kernel: $(uname -sr)"
	echo "- cpu: $(nproc) x $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
	echo "- memory: $(free -m | awk '/^Mem:/ {print $2}') MiB"
	echo "- loop images on: $(stat -f -c %T "$WORK") ($(df -P "$WORK" | awk 'NR==2 {print $1}'))"
	echo "- sqlite: $(sqlite3 --version 2>/dev/null | cut -d' ' -f1)"
	echo "- scale $SCALE, rounds $ROUNDS"
	[ "$FLUSH_US" -gt 0 ] && echo "- modelled device flush (results-flush.tsv): $FLUSH_US us"
} >"$OUT/machine.md"
bash "$(dirname "$0")/report.sh" "$OUT"
