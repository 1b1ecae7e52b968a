#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# confine.bats - hostile paths: every attack is refused with the documented
# errno, the transaction rolls back, and a watched tree beside the domain
# stays byte for byte as it was.

setup() {
	FSTX="${FSTX_BIN:-$BATS_TEST_DIRNAME/../build/fstx}"
	T="$(mktemp -d "${FSTX_TEST_DIR:-/tmp}/fstx-confine-XXXXXX")"
	D="$T/dom"
	mkdir -p "$D/sub" "$T/outside/dir"
	printf 'secret\n' > "$T/outside/secret"
	printf 'more\n' > "$T/outside/dir/f"
	printf 'alpha\n' > "$D/a"
	ln -s ../outside "$D/out"
	ln -s "$T/outside/secret" "$D/abs"
	ln -s /proc/self/fd/3 "$D/magic"
	ln -s ../../outside "$D/sub/up"
	"$FSTX" run -q "$D" - </dev/null # an empty transaction creates .fstx/ before the snapshots
	outside_before=$(watch_outside)
}

teardown() {
	rm -rf "$T"
}

watch_outside() {
	(cd "$T/outside" && find . -print0 | sort -z | xargs -0 stat -c '%n %f %s %h' &&
		find . -type f -print0 | sort -z | xargs -0 cat | md5sum &&
		getfattr -R -d . 2>/dev/null)
}

snap() {
	(cd "$D" && find . -path ./.fstx -prune -o -print0 | sort -z | xargs -0 stat -c '%n %f %s %h' &&
		find . -path ./.fstx -prune -o -type f -print0 | sort -z | xargs -0 cat | md5sum)
}

# refuse ERRNO TX: the transaction fails with ERRNO (JSON errno), exit 1,
# and neither the domain nor the outside tree changed.
refuse() {
	local want=$1 tx=$2 before
	before=$(snap)
	run "$FSTX" run "$D" - --json <<<"$tx"
	[ "$status" -eq 1 ] || { echo "exit $status for: $tx: $output"; return 1; }
	[[ "$output" == *"\"errno\":\"$want\""* ]] || { echo "want $want for: $tx: $output"; return 1; }
	[ "$(snap)" = "$before" ] || { echo "domain changed by: $tx"; return 1; }
	[ "$(watch_outside)" = "$outside_before" ] || { echo "OUTSIDE changed by: $tx"; return 1; }
}

@test "dot-dot escapes are refused for every op" {
	refuse EXDEV 'open 0 ../outside/secret O_RDWR'
	refuse EXDEV 'open 0 sub/../../outside/secret O_RDWR|O_TRUNC'
	refuse EXDEV 'open 0 ../outside/new O_WRONLY|O_CREAT'
	refuse EXDEV 'unlink ../outside/secret'
	refuse EXDEV 'mkdir ../outside/d'
	refuse EXDEV 'rmdir ../outside/dir'
	refuse EXDEV 'truncate ../outside/secret 0'
	refuse EXDEV 'setxattr ../outside/secret user.x "v"'
	refuse EXDEV 'removexattr ../outside/secret user.x'
	refuse EXDEV 'link ../outside/secret stolen'
	refuse EXDEV 'link a ../outside/planted'
	refuse EXDEV 'rename a ../outside/planted'
	refuse EXDEV 'rename ../outside/secret stolen'
	refuse EXDEV 'rename a ../outside/secret exchange'
	refuse EXDEV 'symlink x ../outside/planted'
}

@test "absolute paths are refused" {
	refuse EXDEV "open 0 $T/outside/secret O_RDWR"
	refuse EXDEV 'open 0 /a O_RDWR'
	refuse EXDEV "unlink $T/outside/secret"
	refuse EXDEV "rename a $T/outside/planted"
}

@test "symlinks leading out are refused as a component and as the final name" {
	for l in out sub/up; do
		refuse EXDEV "open 0 $l/secret O_RDWR"
		refuse EXDEV "truncate $l/secret 0"
		refuse EXDEV "setxattr $l/secret user.x \"v\""
		refuse EXDEV "removexattr $l/secret user.x"
		refuse EXDEV "unlink $l/secret"
		refuse EXDEV "mkdir $l/d"
		refuse EXDEV "link $l/secret stolen"
		refuse EXDEV "link a $l/planted"
		refuse EXDEV "rename a $l/planted"
		refuse EXDEV "symlink x $l/planted"
		refuse EXDEV $'open 0 a O_RDWR\nopen 1 '"$l"$'/secret O_RDONLY\nclonerange 0 1 0 4 0'
		refuse EXDEV $'open 0 a O_RDONLY\nopen 1 '"$l"$'/secret O_RDWR\nclonerange 1 0 0 4 0'
	done
	refuse EXDEV 'open 0 abs O_RDWR'
	refuse EXDEV 'truncate abs 0'
	refuse EXDEV 'setxattr abs user.x "v"'
}

@test "a /proc magic link is refused" {
	refuse EXDEV 'open 0 magic O_RDWR'
	refuse EXDEV 'truncate magic 0'
}

@test "paths into .fstx are refused" {
	refuse EPERM 'open 0 .fstx/journal O_RDWR|O_TRUNC'
	refuse EPERM 'unlink .fstx/lock'
	refuse EPERM 'rename a .fstx/journal'
	refuse EPERM 'mkdir .fstx/x'
	refuse EPERM 'rmdir .fstx/trash'
	refuse EPERM 'truncate .fstx/journal 0'
	refuse EPERM 'setxattr .fstx/journal user.x "v"'
	refuse EPERM 'symlink x .fstx/y'
	refuse EPERM 'link a .fstx/new/0'
}

@test "over-long names and paths are refused with ENAMETOOLONG" {
	long=$(printf 'n%.0s' $(seq 1 300))
	refuse ENAMETOOLONG "open 0 $long O_WRONLY|O_CREAT"
	deep=$(printf 'dd/%.0s' $(seq 1 1400))x
	refuse ENAMETOOLONG "open 0 $deep O_WRONLY|O_CREAT"
}

@test "a NUL inside a name is a parse error and nothing is attempted" {
	before=$(snap)
	run "$FSTX" run "$D" - <<<'open 0 "a\0b" O_WRONLY|O_CREAT'
	[ "$status" -eq 2 ]
	[[ "$output" == *"<stdin>:1:"* ]]
	[ "$(snap)" = "$before" ]
	[ "$(watch_outside)" = "$outside_before" ]
}

@test "an attack late in a transaction rolls back the ops before it" {
	refuse EXDEV $'open 0 a O_RDWR\npwrite 0 "CHANGED" 0\nclose 0\nmkdir newdir\nrename a newdir/a\nunlink out/secret'
}

@test "a file hard-linked from outside the domain is not changed in place" {
	ln "$T/outside/secret" "$D/hl"
	mkdir -p "$D/sub/deeper"
	ln "$T/outside/dir/f" "$D/sub/deeper/hl2"
	outside_before=$(watch_outside)
	refuse EXDEV 'open 0 hl O_RDWR'
	refuse EXDEV 'open 0 hl O_WRONLY|O_TRUNC'
	refuse EXDEV 'open 0 hl O_WRONLY|O_APPEND'
	refuse EXDEV 'truncate hl 0'
	refuse EXDEV 'setxattr hl user.x "v"'
	refuse EXDEV 'removexattr hl user.x'
	refuse EXDEV 'open 0 sub/deeper/hl2 O_RDWR'
	refuse EXDEV $'open 0 a O_RDONLY\nopen 1 hl O_RDONLY\nopen 2 hl O_RDWR\nclonerange 2 0 0 0 0'
	refuse EXDEV $'rename hl hl3\nopen 0 hl3 O_RDWR\npwrite 0 "x" 0'
	# Names only change the link count: allowed, and so is reading it.
	run "$FSTX" run "$D" - <<<$'open 0 hl O_RDONLY\nclose 0\nlink hl hl4\nunlink hl4'
	[ "$status" -eq 0 ]
	[ "$(watch_outside)" = "$outside_before" ]
}

@test "a file with every name inside the domain may be changed" {
	ln "$D/a" "$D/sub/a2"
	run "$FSTX" run "$D" - <<<$'open 0 sub/a2 O_RDWR\npwrite 0 "ALPHA" 0\nsetxattr a user.k "v"'
	[ "$status" -eq 0 ]
	[ "$(head -c 5 "$D/a")" = "ALPHA" ]
	[ "$(watch_outside)" = "$outside_before" ]
}
