#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh BUILD_DIR SECONDS TARGET... - replay each target's regression
# inputs (fuzz/regress/TARGET), then fuzz it for SECONDS on a working copy of
# its seed corpus (fuzz/corpus/TARGET).  A crash fails the run and leaves
# the input in BUILD_DIR/crash-*; copy it into fuzz/regress/TARGET/.
set -u
B=$1 T=$2
shift 2
fail=0
for t in "$@"; do
	work="$B/corpus-$t"
	mkdir -p "$work"
	reg=(fuzz/regress/"$t"/*)
	if [ -e "${reg[0]}" ]; then
		if "$B/$t" "${reg[@]}" >"$B/$t.regress.log" 2>&1; then
			echo "$t: ${#reg[@]} regression inputs pass"
		else
			echo "$t: regression input FAILED:"; grep -E 'oracle|ERROR|Running' "$B/$t.regress.log" | tail -5
			fail=1
			continue
		fi
	fi
	"$B/$t" -max_total_time="$T" -rss_limit_mb=2048 -timeout=20 \
		-artifact_prefix="$B/crash-$t-" "$work" "fuzz/corpus/$t" >"$B/$t.log" 2>&1
	rc=$?
	runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' "$B/$t.log")
	if [ $rc -eq 0 ]; then
		echo "$t: ${runs:-?}, no crash"
	else
		echo "$t: CRASH (rc $rc):"; grep -E 'oracle|ERROR|SUMMARY|Test unit' "$B/$t.log" | head -5
		fail=1
	fi
done
exit $fail
