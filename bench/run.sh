#!/usr/bin/env bash
# run.sh BUILD_DIR - workload (d) on each filesystem of the matrix: a 64 MiB
# overwrite as pwrite+fsync and as an fstx transaction, side by side.
set -u
B=${1:-build}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fstx-bench-XXXXXX")
cleanup() {
	for m in "$WORK"/mnt-*; do
		[ -d "$m" ] && umount "$m" 2>/dev/null
	done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$WORK/scratch"
echo "scratch ($(stat -f -c %T "$WORK")): $("$B/bench_overwrite" "$WORK/scratch")"
[ "$(id -u)" -eq 0 ] || exit 0
for fs in ext4 xfs btrfs tmpfs; do
	m="$WORK/mnt-$fs"
	mkdir -p "$m"
	if [ $fs = tmpfs ]; then
		mount -t tmpfs -o size=1g tmpfs "$m" || continue
	else
		truncate -s 2G "$WORK/$fs.img"
		case $fs in
		ext4) mkfs.ext4 -q -F "$WORK/$fs.img" ;;
		xfs) mkfs.xfs -q -f "$WORK/$fs.img" ;;
		btrfs) mkfs.btrfs -q -f "$WORK/$fs.img" >/dev/null ;;
		esac || continue
		mount -o loop "$WORK/$fs.img" "$m" || continue
	fi
	echo "$fs: $("$B/bench_overwrite" "$m")"
done
