#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# bench.bats - the benchmark tool works and counts what it says: a tiny run
# of fstxbench (no timing is checked, only the counted figures), then
# report.sh on its output.
bats_require_minimum_version 1.5.0

setup() {
	BENCH="${FSTX_BENCH_BIN:-$BATS_TEST_DIRNAME/../build/fstxbench}"
	D="$(mktemp -d "${FSTX_TEST_DIR:-/tmp}/fstx-bench-XXXXXX")"
}

teardown() {
	rm -rf "$D"
}

# field N of the line for workload W, method M
field() {
	awk -F'\t' -v w="$1" -v m="$2" -v n="$3" '$2 == w && $3 == m { print $n }' "$D/out.tsv"
}

@test "fstxbench: barriers counted per method, in libsqlite3 too" {
	mkdir -p "$D/work"
	"$BENCH" -s 0.05 -r 1 -w a,c -t t "$D/work" >"$D/out.tsv"
	[ "$(wc -l <"$D/out.tsv")" -eq 20 ]
	awk -F'\t' 'NF != 14 { exit 1 }' "$D/out.tsv"
	# CPU time per transaction: measured (from /proc/stat), not -1; the
	# device's busy time: measured where the directory is on a block
	# device with a stat file, else -1
	awk -F'\t' '!($13 >= 0) { exit 1 }' "$D/out.tsv"
	awk -F'\t' '!($14 >= 0 || $14 == -1) { exit 1 }' "$D/out.tsv"
	# (a): 4 files, each fsynced; the rename pattern adds one directory
	[ "$(field a raw 8)" = 0.00 ]
	[ "$(field a raw-fsync 8)" = 4.00 ]
	[ "$(field a rename 8)" = 5.00 ]
	# durable fstx, default flags: both take the write-ahead log, one
	# fdatasync per transaction; the run ends with a checkpoint (wal.c
	# W6), counted: one fsync of each file the log names, of each
	# directory holding a new name and of .fstx/wnew/, where the new
	# names came from ((a): 4 files, their directory and .fstx/wnew/ over
	# 5 transactions; (c), one transaction: 100 files, their new
	# directory, its parent, .fstx/wnew/) and the new header's fdatasync;
	# never syncfs
	[ "$(field a fstx 8)" = 1.20 ]
	[ "$(field a fstx 9)" = 1.20 ]
	[ "$(field a fstx 10)" = 0.00 ]
	[ "$(field c fstx 8)" = 103.00 ]
	[ "$(field c fstx 9)" = 2.00 ]
	[ "$(field c fstx 10)" = 0.00 ]
	for w in a c; do
		[ "$(field $w fstx-crash 9)" = 0.00 ]
		[ "$(field $w fstx-crash 10)" = 0.00 ]
		[ "$(field $w fstx-wal-crash 9)" = 0.00 ]
		[ "$(field $w fstx-wal-crash 10)" = 0.00 ]
	done
	# FSTX_UT_WAL changes nothing: the same figures
	[ "$(field a fstx-wal 8)" = 1.20 ]
	[ "$(field a fstx-wal 9)" = 1.20 ]
	[ "$(field a fstx-wal 10)" = 0.00 ]
	[ "$(field c fstx-wal 9)" = 2.00 ]
	[ "$(field c fstx-wal 10)" = 0.00 ]
	# lazy: (a) commits with no barrier; the run's flush (fstx_sync) and
	# its checkpoint are its only fdatasyncs; (c) makes names, which are
	# never queued: durable, like fstx
	awk -F'\t' '$2 == "a" && $3 == "fstx-lazy" && !($9 > 0 && $9 < 1 && $10 == 0) { exit 1 }' "$D/out.tsv"
	[ "$(field c fstx-lazy 9)" = 2.00 ]
	[ "$(field c fstx-lazy 10)" = 0.00 ]
	# (c) rename pattern: 100 files + the new directory + its parent
	[ "$(field c rename 8)" = 102.00 ]
	# SQLite's own syncs are seen (interposed across the shared library)
	awk -F'\t' '$3 ~ /^sqlite/ && $8 + $9 < 1 { exit 1 }' "$D/out.tsv"
	# nothing left behind
	[ -z "$(ls -A "$D/work")" ]
}

@test "fstxbench: a directory switch in a row commits with one fdatasync each" {
	mkdir -p "$D/work"
	"$BENCH" -s 0.3 -r 1 -w h -m rename,fstx,fstx-crash -t t "$D/work" >"$D/out.tsv"
	[ "$(wc -l <"$D/out.tsv")" -eq 3 ]
	# (h), 3 transactions: a new directory of 20 files takes pkg's place
	# and the old one goes.  fstx: one fdatasync each and no checkpoint
	# between them (wal.c W24), then the run's checkpoint: the new
	# header's fdatasync, an fsync of each of the 20 files, their
	# directory, the root and .fstx/wnew/ (23 / 3); crash-only: none.
	# The rename pattern: each file, the new directory, the root.
	[ "$(field h fstx 9)" = 1.33 ]
	[ "$(field h fstx 8)" = 7.67 ]
	[ "$(field h fstx 10)" = 0.00 ]
	[ "$(field h fstx-crash 8)" = 0.00 ]
	[ "$(field h fstx-crash 9)" = 0.00 ]
	[ "$(field h rename 8)" = 22.00 ]
	[ -z "$(ls -A "$D/work")" ]
}

@test "fstxbench: 8 concurrent writers all commit" {
	mkdir -p "$D/work"
	"$BENCH" -s 0.1 -r 1 -w e8 -m fstx,fstx-crash,sqlite-wal,fstx-wal,fstx-lazy -t t "$D/work" >"$D/out.tsv"
	[ "$(field e8 fstx 4)" -eq 80 ]
	[ "$(field e8 fstx-wal 4)" -eq 80 ]
	# group commit, by default as with FSTX_UT_WAL: never more than one
	# fdatasync per transaction (80), and at most one for each writer's
	# checkpoint at its end (8; one that finds the log empty has none);
	# never syncfs
	awk -F'\t' '($3 == "fstx-wal" || $3 == "fstx") && ($9 > 1.10 || $10 != 0) { exit 1 }' "$D/out.tsv"
	[ "$(field e8 fstx-crash 4)" -eq 80 ]
	[ "$(field e8 fstx-lazy 4)" -eq 80 ]
	[ "$(field e8 sqlite-wal 4)" -eq 80 ]
}

@test "fstxbench -f: a modelled device flush per barrier, counts unchanged" {
	mkdir -p "$D/work"
	"$BENCH" -s 0.05 -r 1 -w e1 -m raw,raw-fsync,fstx-wal -f 20000 -t t "$D/work" >"$D/out.tsv"
	[ "$(field e1 raw-fsync 8)" = 1.00 ]
	# one fdatasync per transaction, and the checkpoint's at the end of
	# the 5 (with one fsync of the file, one of its directory and one of
	# .fstx/wnew/, where it was made)
	[ "$(field e1 fstx-wal 9)" = 1.20 ]
	[ "$(field e1 fstx-wal 8)" = 0.60 ]
	# a transaction with a barrier lasts at least the flush (20 ms); one
	# without none of it
	awk -F'\t' '$3 == "raw-fsync" && $5 < 20 { exit 1 }' "$D/out.tsv"
	awk -F'\t' '$3 == "fstx-wal" && $5 < 20 { exit 1 }' "$D/out.tsv"
	awk -F'\t' '$3 == "raw" && $5 >= 20 { exit 1 }' "$D/out.tsv"
}

@test "fstxbench: usage errors" {
	run -2 "$BENCH"
	[[ "$output" == *"usage: fstxbench"* ]]
	run -2 "$BENCH" -r 0 "$D"
	run -0 "$BENCH" -h
	[[ "$output" == *"methods:"* ]]
}

@test "report.sh: tables, targets and plots from results" {
	mkdir -p "$D/work" "$D/res"
	"$BENCH" -s 0.05 -r 1 -w a,e1,e8 -t fsA "$D/work" >"$D/res/results.tsv"
	sed 's/^fsA/fsB/' "$D/res/results.tsv" >>"$D/res/results.tsv"
	echo "- test machine" >"$D/res/machine.md"
	run -0 bash "$BATS_TEST_DIRNAME/../bench/report.sh" "$D/res"
	grep -q '^## Targets' "$D/res/README.md"
	grep -q '^| fsA | ' "$D/res/README.md"
	grep -q '^| fsB | fstx | ' "$D/res/README.md"
	grep -q '^## (e8) ' "$D/res/README.md"
	grep -q 'test machine' "$D/res/README.md"
	! grep -q 'modelled device' "$D/res/README.md"
	grep -q '^| fs | (b) fstx x rename (goal >= 1.3) | ' "$D/res/README.md"
	# the hand-written notes block survives a rewrite, once
	printf '%s\n' '<!-- notes begin: by hand -->' 'kept words' '<!-- notes end -->' \
		>>"$D/res/README.md"
	run -0 bash "$BATS_TEST_DIRNAME/../bench/report.sh" "$D/res"
	run -0 bash "$BATS_TEST_DIRNAME/../bench/report.sh" "$D/res"
	[ "$(grep -c '^kept words$' "$D/res/README.md")" = 1 ]
	# with results-flush.tsv: the table of the modelled device flush
	"$BENCH" -s 0.05 -r 1 -w e1,e8 -m raw-fsync,fstx-wal -f 1000 -t fsA "$D/work" \
		>"$D/res/results-flush.tsv"
	echo "- modelled device flush (results-flush.tsv): 1000 us" >>"$D/res/machine.md"
	run -0 bash "$BATS_TEST_DIRNAME/../bench/report.sh" "$D/res"
	grep -q 'modelled device whose cache flush' "$D/res/README.md"
	grep -Eq '^\| fsA \| fstx-wal \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| ([0-9.]+|n/a) \|$' "$D/res/README.md"
	if command -v gnuplot >/dev/null; then
		for w in a e1 e8; do
			[ "$(head -c 4 "$D/res/$w.png" | od -An -c | tr -d ' ')" = '211PNG' ]
		done
	fi
	run -1 bash "$BATS_TEST_DIRNAME/../bench/report.sh" "$D/empty"
}

@test "report.sh: the CPU and device bounds of e8/e1 from costs per transaction" {
	mkdir -p "$D/res"
	# e8 costs 600 us of CPU per transaction: 2 CPUs run at most 3333 tx/s,
	# 3.33 times e1's 1000; and 250 us of the device's time: a device always
	# busy serves at most 4000 tx/s, 4.00 times e1's
	printf 'fsZ\te1\tfstx-wal\t100\t1.000\t2.000\t1000.0\t0.00\t1.00\t0.00\t1.00\t9.9\t500.0\t700.0\n' >"$D/res/results.tsv"
	printf 'fsZ\te8\tfstx-wal\t800\t2.000\t4.000\t3000.0\t0.00\t0.20\t0.00\t1.00\t9.9\t600.0\t250.0\n' >>"$D/res/results.tsv"
	echo "- cpu: 2 x Test CPU" >"$D/res/machine.md"
	run -0 bash "$BATS_TEST_DIRNAME/../bench/report.sh" "$D/res"
	grep -q '^| fsZ | fstx-wal | 1000.0 | 3000.0 | 3.00 | 500 | 600 | 3.33 | 700 | 250 | 4.00 |$' "$D/res/README.md"
	grep -q '| 3.00 (3.33, 4.00) |' "$D/res/README.md"
	# a device that is not measured (-1): n/a, not a figure
	sed -i 's/\t250\.0$/\t-1.0/' "$D/res/results.tsv"
	run -0 bash "$BATS_TEST_DIRNAME/../bench/report.sh" "$D/res"
	grep -q '^| fsZ | fstx-wal | 1000.0 | 3000.0 | 3.00 | 500 | 600 | 3.33 | 700 | n/a | n/a |$' "$D/res/README.md"
	# results of older fstxbenches (no device column, no CPU column)
	for n in 13 12; do
		cut -f1-$n "$D/res/results.tsv" >"$D/res/r" && mv "$D/res/r" "$D/res/results.tsv"
		run -0 bash "$BATS_TEST_DIRNAME/../bench/report.sh" "$D/res"
		grep -q '| 3.00 (3.33, n/a) |\|| 3.00 (n/a, n/a) |' "$D/res/README.md"
	done
	grep -q '^| fsZ | fstx-wal | 1000.0 | 3000.0 | 3.00 | n/a | n/a | n/a | n/a | n/a | n/a |$' "$D/res/README.md"
}
