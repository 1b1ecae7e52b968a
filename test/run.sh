#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh BUILD_DIR - run every test suite on every filesystem of the matrix
# (ext4, xfs, btrfs loop images and tmpfs when root; the scratch directory's
# own filesystem always) and print per-filesystem and total summaries.
# Images and mounts are always removed, also on failure or interrupt.
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fstx-check-XXXXXX")
chmod 711 "$WORK" # cli.bats runs some tests as an unprivileged user beneath it
total_pass=0 total_fail=0 total_skip=0
summary=()

# mkfs_mount runs in a subshell ($(...)), so mounts are listed in a file.
cleanup() {
	local m
	if [ -f "$WORK/mounts" ]; then
		while read -r m; do
			umount "$m" 2>/dev/null || { sleep 1; umount "$m" 2>/dev/null; } ||
				umount -l "$m" 2>/dev/null
		done < "$WORK/mounts"
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# mkfs_mount FS: prints the mount point, or a skip reason on stderr.
mkfs_mount() {
	local fs=$1 img="$WORK/$1.img" mnt="$WORK/$1"
	mkdir -p "$mnt"
	if [ "$fs" = tmpfs ]; then
		mount -t tmpfs -o size=4g tmpfs "$mnt" 2>/dev/null || { echo "cannot mount tmpfs" >&2; return 1; }
	else
		grep -qw "$fs" /proc/filesystems || modprobe "$fs" 2>/dev/null
		grep -qw "$fs" /proc/filesystems || { echo "kernel lacks $fs" >&2; return 1; }
		command -v "mkfs.$fs" >/dev/null || { echo "mkfs.$fs missing" >&2; return 1; }
		truncate -s 4G "$img" # sparse: room for test_large
		case $fs in
		ext4) mkfs.ext4 -q -F "$img" ;;
		xfs) mkfs.xfs -q -f "$img" ;;
		btrfs) mkfs.btrfs -q -f "$img" >/dev/null ;;
		esac || { echo "mkfs.$fs failed" >&2; return 1; }
		mount -o loop "$img" "$mnt" 2>/dev/null || { echo "cannot loop-mount $fs" >&2; return 1; }
	fi
	echo "$mnt" >> "$WORK/mounts"
	echo "$mnt"
}

# count a suite's test results from its output
tally() {
	local out=$1 p f k
	if grep -q '^1\.\.' "$out"; then # TAP (bats)
		k=$(grep -c '^ok .* # skip' "$out")
		p=$(($(grep -c '^ok ' "$out") - k))
		f=$(grep -c '^not ok ' "$out")
	elif grep -qE '^=+ .* in [0-9.]+s' "$out"; then # pytest's last line
		read -r p f k < <(grep -E '^=+ .* in [0-9.]+s' "$out" | tail -1 | awk '{
			for (i = 2; i < NF; i++) {
				w = $(i + 1); sub(/,$/, "", w)
				if (w == "passed") p = $i
				else if (w == "failed" || w == "error" || w == "errors") f += $i
				else if (w == "skipped") k = $i
			}
		} END { print p + 0, f + 0, k + 0 }')
	else # cmocka
		p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
		f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
		k=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
	fi
	echo "${p:-0} ${f:-0} ${k:-0}"
}

# ", N skipped" where N > 0
skipped() {
	[ "$1" -gt 0 ] && echo ", $1 skipped"
}

# The whole corpus on the first filesystem, FSTX_CORPUS_OTHERS (default
# 12) transactions on the others, and there every FSTX_CALL_STRIDE_OTHERS-th
# OS call (default 3) of test_wal's kill and error sweeps, and
# FSTX_NAMES_FIRST / FSTX_NAMES_OTHERS (default all) of the generated name
# changes (test/names.tx, or FSTX_NAMES_TX): the bounded run of make check.
run_fs() {
	local name=$1 dir=$2 pass=0 fail=0 skip=0 out rc p f k
	export FSTX_CORPUS=${FSTX_CORPUS_FIRST:-}
	export FSTX_BANK_TX=${FSTX_BANK_TX_FIRST:-1000}
	export FSTX_CALL_STRIDE=${FSTX_CALL_STRIDE_FIRST:-1}
	export FSTX_NAMES=${FSTX_NAMES_FIRST:-}
	[ -n "${FIRST_DONE:-}" ] && export FSTX_CORPUS=${FSTX_CORPUS_OTHERS:-12} \
		FSTX_NAMES=${FSTX_NAMES_OTHERS:-} \
		FSTX_BANK_TX=${FSTX_BANK_TX_OTHERS:-100} \
		FSTX_CALL_STRIDE=${FSTX_CALL_STRIDE_OTHERS:-3}
	FIRST_DONE=1
	# Where reflink works, clone every before-image of 4 KiB or more, so
	# the crash and power-loss harness covers journal.c rule 8.
	case $name in btrfs|xfs) export FSTX_CLONE_MIN=4096 ;; *) unset FSTX_CLONE_MIN ;; esac
	echo "=== $name ($dir)"
	# The suites that do not depend on the filesystem (the text parser,
	# path confinement, the benchmark's own checks, the examples) run on
	# the first filesystem only, unless FSTX_SUITES names them.
	local all="test_abi test_ops test_txtext test_rollback test_crash test_powerloss test_large test_journal test_race test_bank test_wal test_itx test_lazy cli.bats confine.bats bench.bats examples python"
	local others="test_abi test_ops test_rollback test_crash test_powerloss test_large test_journal test_race test_bank test_wal test_itx test_lazy cli.bats"
	# the Python package wraps the library: the first filesystem and
	# btrfs (reflink, the other commit ways) are its sample
	[ "$name" = btrfs ] && others="$others python"
	[ -n "${OTHERS_NOW:-}" ] && all=$others
	# tmpfs has no power loss to survive and no device: the crash, error
	# and log suites and the API, not the power-loss or large-file ones
	[ "$name" = tmpfs ] && all="test_abi test_ops test_rollback test_crash test_wal test_itx test_lazy cli.bats"
	OTHERS_NOW=1
	for t in ${FSTX_SUITES:-$all}; do
		out="$WORK/$name.$t.log"
		t0=$SECONDS
		if [ "$t" = examples ]; then
			(cd "$ROOT" && FSTX_TEST_DIR=$dir bash examples/run.sh "$B") >"$out" 2>&1
		elif [ "$t" = python ]; then
			FSTX_TEST_DIR=$dir bash "$ROOT/python/run-tests.sh" "$ROOT/$B/libfstx.so.0" >"$out" 2>&1
		elif [ "${t%.bats}" != "$t" ]; then
			FSTX_TEST_DIR=$dir FSTX_BIN="$ROOT/$B/fstx" FSTX_BENCH_BIN="$ROOT/$B/fstxbench" bats "$ROOT/test/$t" >"$out" 2>&1
		else
			FSTX_TEST_DIR=$dir "$ROOT/$B/$t" >"$out" 2>&1
		fi
		rc=$?
		read -r p f k < <(tally "$out")
		[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
		pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + k))
		grep -E '^(kill|random kill|errors|rollback|power-loss|large|journal damage|race|bank|read_begin|power-loss wal|wal[a-z -]*|itx[a-z -]*|oom[a-z ]*|open):' "$out" | sed "s/^/  $name: /"
		if [ "$rc" -ne 0 ]; then
			echo "  $t FAILED on $name:"
			grep -E 'ERROR|FAILED|not ok|^#' "$out" | head -20 | sed 's/^/    /'
		else
			echo "  $t: $p passed$(skipped "$k") ($((SECONDS - t0)) s)"
		fi
	done
	summary+=("$name: $pass passed, $fail failed$(skipped "$skip")")
	total_pass=$((total_pass + pass)) total_fail=$((total_fail + fail))
	total_skip=$((total_skip + skip))
}

run_fs "${FSTX_LABEL:-scratch}" "$WORK"

# Packaging: make install into a DESTDIR, pkg-config, man pages (once).
if [ "${FSTX_PACKAGING:-1}" = 1 ]; then
	echo "=== packaging"
	out="$WORK/packaging.log"
	FSTX_BUILD=$B bats "$ROOT/test/install.bats" >"$out" 2>&1
	rc=$?
	read -r p f k < <(tally "$out")
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	if [ "$rc" -ne 0 ]; then
		echo "  install.bats FAILED:"
		grep -E 'not ok|^#' "$out" | head -20 | sed 's/^/    /'
	else
		echo "  install.bats: $p passed"
	fi
	out="$WORK/readme.log"
	FSTX_BIN="$ROOT/$B/fstx" FSTX_BUILD=$B FSTX_TEST_DIR="$WORK" bats "$ROOT/test/readme.bats" >"$out" 2>&1
	rc=$?
	read -r p2 f2 k2 < <(tally "$out")
	[ "$rc" -ne 0 ] && [ "$f2" -eq 0 ] && f2=1
	if [ "$rc" -ne 0 ]; then
		echo "  readme.bats FAILED:"
		grep -E 'not ok|^#' "$out" | head -20 | sed 's/^/    /'
	else
		echo "  readme.bats: $p2 passed"
	fi
	p=$((p + p2)) f=$((f + f2))
	summary+=("packaging: $p passed, $f failed")
	total_pass=$((total_pass + p)) total_fail=$((total_fail + f))
fi
# Power loss on the real block I/O of ext4, xfs and btrfs (once: the check
# makes its own small filesystems); FSTX_BLOCKCRASH=0 skips it.
if [ "${FSTX_BLOCKCRASH:-1}" = 1 ]; then
	echo "=== block-level power loss"
	out="$WORK/blockcrash.log"
	t0=$SECONDS
	FSTX_BIN="$ROOT/$B/fstx" bats "$ROOT/test/blockcrash.bats" >"$out" 2>&1
	rc=$?
	read -r p f k < <(tally "$out")
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	grep -E '^# [a-z0-9]+-[a-z]+-[a-z]+ +points' "$out" | sort -u | sed 's/^# /  /'
	if [ "$rc" -ne 0 ]; then
		echo "  blockcrash.bats FAILED:"
		grep -E 'not ok|replay:|failed:|torn:' "$out" | head -30 | sed 's/^/    /'
	else
		echo "  blockcrash.bats: $p passed$(skipped "$k") ($((SECONDS - t0)) s)"
	fi
	summary+=("block-level power loss: $p passed, $f failed$(skipped "$k")")
	total_pass=$((total_pass + p)) total_fail=$((total_fail + f)) total_skip=$((total_skip + k))
fi

for fs in ${FSTX_MATRIX-ext4 xfs btrfs tmpfs}; do
	if [ "$(id -u)" -ne 0 ]; then
		summary+=("$fs: skipped (not root: cannot mount)")
		total_skip=$((total_skip + 1))
		continue
	fi
	if mnt=$(mkfs_mount "$fs" 2>"$WORK/why"); then
		run_fs "$fs" "$mnt"
	else
		summary+=("$fs: skipped ($(cat "$WORK/why" 2>/dev/null || echo unavailable))")
		total_skip=$((total_skip + 1))
	fi
done

echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
echo "total: $total_pass passed, $total_fail failed, $total_skip skipped (tests, and filesystems the kernel lacks)"
[ "$total_fail" -eq 0 ]
