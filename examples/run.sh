#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh BUILD_DIR - build and run the examples; TAP output for run.sh.
set -u
B=$1
n=0 fail=0
echo "1..4"
for ex in seed_usertrans ergonomic interactive cli; do
	n=$((n + 1))
	D=$(mktemp -d "${FSTX_TEST_DIR:-/tmp}/fstx-ex-XXXXXX")
	printf 'version 1\n' > "$D/obj"
	if [ "$ex" = cli ]; then
		out=$(bash examples/cli.sh "$B/fstx" "$D" 2>&1)
	else
		out=$("$B/$ex" "$D" 2>&1)
	fi
	rc=$?
	got=$(cat "$D/obj")
	xattr=$(getfattr --only-values -n user.version "$D/obj" 2>/dev/null)
	if [ $rc -eq 0 ] && [ "$got" = "object contents, version 2" ] && [ "$xattr" = 2 ] &&
		[ ! -e "$D/obj.new" ]; then
		echo "ok $n $ex"
	else
		echo "not ok $n $ex: rc=$rc obj='$got' xattr='$xattr' $out"
		fail=1
	fi
	rm -rf "$D"
done
exit $fail
