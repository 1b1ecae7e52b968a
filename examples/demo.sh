#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# demo.sh FSTX - apply an example transaction to a scratch tree and show
# the tree before and after; then a failing one, rolled back.
set -euo pipefail
FSTX=${1:-build/fstx}
D=$(mktemp -d /tmp/fstx-demo-XXXXXX)
trap 'rm -rf "$D" "$D.tx"' EXIT

show() {
	(cd "$D" && find . -mindepth 1 -path ./.fstx -prune -o -type f -print | sort |
		while read -r f; do printf '  %-18s %s\n' "$f" "$(tr '\n' ' ' < "$f")"; done)
}

mkdir -p "$D/objects"
printf 'version 1\n' > "$D/objects/current"
printf 'stale\n' > "$D/objects/old"
echo "before:"
show

cat > "$D.tx" <<'T'
# replace objects/current atomically, keep a link to the old one, drop old
open 0 objects/current.new O_WRONLY|O_CREAT|O_EXCL 0644
pwrite 0 "version 2\n" 0
close 0
setxattr objects/current.new user.version "2"
link objects/current objects/previous
rename objects/current.new objects/current
unlink objects/old
T
echo
echo "transaction:"
sed 's/^/  /' "$D.tx"
echo
"$FSTX" run "$D" "$D.tx" --json
echo "after:"
show

printf 'unlink objects/previous\nunlink objects/no-such-object\n' > "$D.tx"
echo
echo "a failing transaction (its second op fails):"
sed 's/^/  /' "$D.tx"
"$FSTX" run "$D" "$D.tx" || echo "(exit $?)"
echo "after the failure, unchanged:"
show
