#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# demo.sh FSTX - apply an example transaction to a scratch tree and show
# the tree (with its user xattrs) before and after, and the JSON result;
# then a failing one, rolled back, and the same change given as JSON.
set -euo pipefail
FSTX=${1:-build/fstx}
D=$(mktemp -d /tmp/fstx-demo-XXXXXX)
trap 'rm -rf "$D" "$D.tx"' EXIT

show() {
	(cd "$D" && find . -mindepth 1 -path ./.fstx -prune -o -type f -print | sort |
		while read -r f; do
			x=$(getfattr --absolute-names -d "$f" 2>/dev/null | sed -n 's/^user\./user./p' |
				tr '\n' ' ')
			printf '  %-20s %-14s %s\n' "${f#./}" "$(tr '\n' ' ' < "$f")" "$x"
		done)
}

mkdir -p "$D/objects"
printf 'version 1\n' > "$D/objects/current"
printf 'stale\n' > "$D/objects/old"
echo "before:"
show

cat > "$D.tx" <<'T'
# replace objects/current atomically, keep a link to the old one, drop old
write objects/current.new "version 2\n"
setxattr objects/current.new user.version "2"
link objects/current objects/previous
rename objects/current.new objects/current
unlink objects/old
T
echo
echo "transaction:"
sed 's/^/  /' "$D.tx"
echo
echo "fstx run --json prints:"
"$FSTX" run "$D" "$D.tx" --json | sed 's/^/  /'
echo "after:"
show

printf 'unlink objects/previous\nunlink objects/no-such-object\n' > "$D.tx"
echo
echo "a failing transaction (its second op fails):"
sed 's/^/  /' "$D.tx"
"$FSTX" run "$D" "$D.tx" 2>&1 | sed 's/^/  /' || true
echo "after the failure, unchanged:"
show

echo
echo "the same kind of change as JSON input (fstx run --input json):"
json='[{"op":"replace","path":"objects/current","data":"version 3\n"},
 {"op":"setxattr","path":"objects/current","name":"user.version","data":"3"}]'
printf '%s\n' "$json" | sed 's/^/  /'
printf '%s\n' "$json" | "$FSTX" run "$D" --input json -q
echo "after:"
show
