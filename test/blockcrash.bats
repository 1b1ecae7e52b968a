#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# blockcrash.bats - power loss on the real block I/O of ext4, xfs and btrfs:
# the bounded sample of test/blockcrash (make crashtest runs all of it).
# Crash states are built from the writes and flushes each filesystem
# issued, mounted, recovered as after a reboot and compared with the trees
# before and after the transaction; see docs/powerloss-block.md.
bats_require_minimum_version 1.5.0

setup() {
	FSTX="${FSTX_BIN:-$BATS_TEST_DIRNAME/../build/fstx}"
	DRIVER="$BATS_TEST_DIRNAME/blockcrash/blockcrash.py"
	OUT="$(mktemp -d "${TMPDIR:-/tmp}/fstx-blockcrash-XXXXXX")"
	[ "$(id -u)" -eq 0 ] || skip "needs root: loop devices and mounts"
	[ -c /dev/fuse ] || skip "kernel lacks FUSE"
	[ -c /dev/loop-control ] || skip "kernel lacks loop devices"
	pkg-config --exists fuse3 || skip "libfuse3 development files missing"
}

teardown() {
	rm -rf "$OUT"
}

# sample FS WORKLOAD VARIANT STATES [--expect-torn]: run the driver, skip
# where the kernel lacks FS; leaves the counts in $OUT/r.jsonl.
sample() {
	local fs=$1 wl=$2 v=$3 n=$4
	shift 4
	run python3 "$DRIVER" run --fstx "$FSTX" --fs "$fs" --workload "$wl" \
		--variant "$v" --max-states "$n" --json "$OUT/r.jsonl" --keep 1 "$@"
	echo "$output"
	# The figures, also when the test passes (TAP comments).
	grep -E '^[a-z0-9]+-[a-z]+-[a-z]+ +points' <<<"$output" | sed 's/^/# /' >&3 || true
	[ "$status" -ne 77 ] || skip "kernel lacks $fs, FUSE or loop devices"
}

# field FIELD: the sum of FIELD over the runs in $OUT/r.jsonl
field() {
	jq -s "map(.$1) | add" "$OUT/r.jsonl"
}

# A transaction fstx rolls back (its last op fails) leaves only the
# before tree: no torn state, no state recovery refuses.
check_failing() {
	sample "$1" failing plain 60
	[ "$(field states)" -gt 0 ]
	[ "$(field unmountable)" -eq 0 ]
	[ "$(field recovery_failed)" -eq 0 ]
	[ "$(field torn)" -eq 0 ]
	[ "$status" -eq 0 ]
}

# 100 new files in a new directory while another process fsyncs the
# domain's files and directories and the transaction runs slowed down.
check_many_bgsync() {
	sample "$1" many bgsync 60
	[ "$(field states)" -gt 0 ]
	[ "$(field after)" -gt 0 ]
	[ "$(field unmountable)" -eq 0 ]
	[ "$(field recovery_failed)" -eq 0 ]
	[ "$(field torn)" -eq 0 ]
	[ "$status" -eq 0 ]
}

# The check can fail: plain syscalls in order, each made durable, tear.
check_standin() {
	sample "$1" standin plain 20
	[ "$(field torn)" -gt 0 ]
	[ "$status" -eq 0 ]
}

@test "ext4: a non-atomic stand-in is found torn" {
	check_standin ext4
}

@test "ext4: failing transaction, every state before, recovery succeeds" {
	check_failing ext4
}

@test "ext4: 100 new files under background fsync, no torn state" {
	check_many_bgsync ext4
}

@test "xfs: a non-atomic stand-in is found torn" {
	check_standin xfs
}

@test "xfs: failing transaction, every state before, recovery succeeds" {
	check_failing xfs
}

@test "xfs: 100 new files under background fsync, no torn state" {
	check_many_bgsync xfs
}

@test "btrfs: a non-atomic stand-in is found torn" {
	check_standin btrfs
}

@test "btrfs: failing transaction, every state before, recovery succeeds" {
	check_failing btrfs
}

@test "btrfs: 100 new files under background fsync, no torn state" {
	check_many_bgsync btrfs
}
