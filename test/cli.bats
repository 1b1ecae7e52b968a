#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# cli.bats - the fstx command: grammar, exit codes, JSON, messages.
bats_require_minimum_version 1.5.0

setup() {
	FSTX="${FSTX_BIN:-$BATS_TEST_DIRNAME/../build/fstx}"
	D="$(mktemp -d "${FSTX_TEST_DIR:-/tmp}/fstx-cli-XXXXXX")"
	printf 'alpha\n' > "$D/a"
	printf 'old\n' > "$D/old"
	TX="$(mktemp -d /tmp/fstx-tx-XXXXXX)"
}

teardown() {
	rm -rf "$D" "$TX"
}

snap() {
	(cd "$D" && find . -mindepth 1 -path ./.fstx -prune -o -print0 | sort -z |
		xargs -0 stat -c '%n %f %s %h' && find . -path ./.fstx -prune -o -type f -print0 |
		sort -z | xargs -0 cat | md5sum)
}

@test "--help and --version" {
	run "$FSTX" --help
	[ "$status" -eq 0 ]
	[[ "$output" == *"fstx run DIR"* ]]
	run "$FSTX" --version
	[ "$status" -eq 0 ]
	[[ "$output" == "fstx 0.1.0" ]]
	run "$FSTX" frob
	[ "$status" -eq 2 ]
	run "$FSTX" --bogus
	[ "$status" -eq 2 ]
}

@test "run commits and prints JSON" {
	cat > "$TX/t.tx" <<'T'
mkdir obj
open 0 obj/new O_WRONLY|O_CREAT|O_EXCL
pwrite 0 "payload" 0
close 0
rename obj/new obj/cur
unlink old
T
	run "$FSTX" run "$D" "$TX/t.tx" --json
	[ "$status" -eq 0 ]
	[[ "$output" == '{"status":"committed","ops_completed":6,"failed_op":null,"line":null,"errno":null,"results":[0,0,7,0,0,0]}' ]]
	[ "$(cat "$D/obj/cur")" = "payload" ]
	[ ! -e "$D/old" ]
}

@test "a failing op rolls back: exit 1, line, op, path, errno" {
	before="$(snap)"
	printf 'unlink old\nmkdir m\nrmdir nothere\n' > "$TX/t.tx"
	run "$FSTX" run "$D" "$TX/t.tx"
	[ "$status" -eq 1 ]
	[[ "$output" == *"line 3: rmdir \"nothere\": No such file or directory (ENOENT)"* ]]
	[[ "$output" == *"nothing changed"* ]]
	[ "$(snap)" = "$before" ]
	run "$FSTX" run "$D" "$TX/t.tx" --json
	[ "$status" -eq 1 ]
	[[ "$output" == *'"status":"rolled_back","ops_completed":2,"failed_op":2,"line":3,"errno":"ENOENT","results":[0,0,-2]'* ]]
}

@test "conditions and '-' change strictness" {
	printf -- '-unlink nothere\nunlink nothere2 !ne -2\nunlink old\n' > "$TX/t.tx"
	run "$FSTX" run "$D" "$TX/t.tx" --json
	[ "$status" -eq 0 ]
	[[ "$output" == *'"results":[-2,-2,0]'* ]]
	printf 'unlink a !eq 0\n' > "$TX/t.tx"
	run "$FSTX" run "$D" "$TX/t.tx" --json
	[ "$status" -eq 1 ]
	[[ "$output" == *'"errno":"ECANCELED"'* ]]
	[ -e "$D/a" ]
}

@test "parse errors exit 2 and change nothing" {
	before="$(snap)"
	printf 'unlink old\nfrobnicate x\n' > "$TX/t.tx"
	run "$FSTX" run "$D" "$TX/t.tx"
	[ "$status" -eq 2 ]
	[[ "$output" == *"line 2: unknown op"* ]]
	run "$FSTX" run "$D" "$TX/t.tx" --json
	[ "$status" -eq 2 ]
	[[ "$output" == *'"status":"invalid"'* ]]
	[[ "$output" == *'"line":2'* ]]
	[ "$(snap)" = "$before" ]
}

@test "validation errors exit 2 naming the op" {
	printf 'unlink old\nclose 4\n' > "$TX/t.tx"
	run "$FSTX" run "$D" "$TX/t.tx" --json
	[ "$status" -eq 2 ]
	[[ "$output" == *'"status":"invalid","ops_completed":1,"failed_op":1,"line":2,"errno":"EINVAL"'* ]]
	[ -e "$D/old" ]
}

@test "stdin and @FILE relative to the transaction file" {
	printf 'FROMFILE' > "$TX/data.bin"
	printf 'open 0 f O_WRONLY|O_CREAT\npwrite 0 @data.bin 0\n' > "$TX/t.tx"
	run "$FSTX" run "$D" "$TX/t.tx"
	[ "$status" -eq 0 ]
	[ "$(cat "$D/f")" = "FROMFILE" ]
	run bash -c "printf 'unlink f\n' | '$FSTX' run '$D' -"
	[ "$status" -eq 0 ]
	[ ! -e "$D/f" ]
	run "$FSTX" run "$D" "$TX/nonexistent.tx"
	[ "$status" -eq 2 ]
}

@test "a transaction file that cannot be read: exit 2 naming it and the errno, nothing changed" {
	before="$(snap)"
	run "$FSTX" run "$D" "$TX/nonexistent.tx"
	[ "$status" -eq 2 ]
	[[ "$output" == *"$TX/nonexistent.tx: No such file or directory"* ]]
	run --separate-stderr "$FSTX" run --json "$D" "$TX"
	[ "$status" -eq 2 ]
	[[ "$output" == *'"status":"invalid","ops_completed":0,"failed_op":null,"line":null,"errno":"EISDIR","message":"cannot read the transaction file"'* ]]
	[[ "$stderr" == *"$TX: Is a directory"* ]]
	run bash -c "'$FSTX' run '$D' < '$TX'"
	[ "$status" -eq 2 ]
	[[ "$output" == *"fstx: -: Is a directory"* ]]
	# a text longer than the first 64 KiB read commits whole
	{ for i in $(seq 4000); do printf '# padding line %05d of a long transaction\n' "$i"; done
	  printf 'unlink old\n'; } > "$TX/long.tx"
	[ "$(stat -c %s "$TX/long.tx")" -gt 131072 ]
	[ "$(snap)" = "$before" ]
	run "$FSTX" run "$D" "$TX/long.tx"
	[ "$status" -eq 0 ]
	[ ! -e "$D/old" ]
}

@test "escaping paths and .fstx are refused" {
	printf 'unlink ../x\n' > "$TX/t.tx"
	run "$FSTX" run "$D" "$TX/t.tx" --json
	[ "$status" -eq 1 ]
	[[ "$output" == *'"errno":"EXDEV"'* ]]
	printf 'unlink .fstx/lock\n' > "$TX/t.tx"
	run "$FSTX" run "$D" "$TX/t.tx" --json
	[ "$status" -eq 1 ]
	[[ "$output" == *'"errno":"EPERM"'* ]]
}

@test "wedged domain: exit 3 until recover" {
	"$FSTX" status "$D" >/dev/null
	touch "$D/.fstx/wedged"
	printf 'unlink old\n' > "$TX/t.tx"
	run "$FSTX" run "$D" "$TX/t.tx" --json
	[ "$status" -eq 3 ]
	[[ "$output" == *'"status":"wedged"'* ]]
	[[ "$output" == *'"errno":"EROFS"'* ]]
	run "$FSTX" status "$D" --json
	[ "$status" -eq 3 ]
	[[ "$output" == *'"wedged":true'* ]]
	run "$FSTX" recover "$D" --json
	[ "$status" -eq 0 ]
	[[ "$output" == *'"status":"recovered"'* ]]
	run "$FSTX" run "$D" "$TX/t.tx"
	[ "$status" -eq 0 ]
}

@test "a corrupt journal is refused with exit 3" {
	"$FSTX" status "$D" >/dev/null
	# a BEGIN header with a wrong checksum, and a progress mark: changes
	# had begun, so this cannot be a write torn before barrier 1
	printf 'FXJ1\001\000\000\000\030\000\000\000' > "$D/.fstx/journal"
	head -c 44 /dev/zero >> "$D/.fstx/journal"
	ln -s fstx "$D/.fstx/step.0123456789abcdef.0"
	before="$(snap)"
	run "$FSTX" recover "$D"
	[ "$status" -eq 3 ]
	[[ "$output" == *"corrupt"* ]]
	printf 'unlink old\n' > "$TX/t.tx"
	run "$FSTX" run "$D" "$TX/t.tx"
	[ "$status" -eq 3 ]
	[ "$(snap)" = "$before" ]
}

@test "a torn journal without a progress mark is discarded" {
	"$FSTX" status "$D" >/dev/null
	printf 'FXJ1\001\000\000\000\030\000\000\000' > "$D/.fstx/journal"
	head -c 44 /dev/zero >> "$D/.fstx/journal"
	before="$(snap)"
	run "$FSTX" recover "$D"
	[ "$status" -eq 0 ]
	[ "$(snap)" = "$before" ]
	[ ! -s "$D/.fstx/journal" ]
}

@test "status --json reports filesystem facts" {
	run "$FSTX" status "$D" --json
	[ "$status" -eq 0 ]
	[[ "$output" == *'"hot":false'* ]]
	[[ "$output" == *'"fs_type":"'* ]]
	[[ "$output" == *'"block_size":'* ]]
	[[ "$output" == *'"reflink":'* ]]
}

@test "a removexattr whose name the kernel refuses rolls back and leaves the journal clean" {
	mkdir -p "$D/d/e"
	before=$(snap)
	run "$FSTX" run "$D" - <<<'removexattr d/e /not-a-namespace.k'
	[ "$status" -eq 1 ]
	[ "$(snap)" = "$before" ]
	run "$FSTX" status "$D" --json
	[ "$status" -eq 0 ]
	[[ "$output" == *'"hot":false'* ]]
}

@test "a name that begins with two dots (d/..f) is a plain name, also for recovery" {
	mkdir -p "$D/d"
	before=$(snap)
	run "$FSTX" run "$D" - <<<$'rename a d/..f\nunlink nothere'
	[ "$status" -eq 1 ]
	[ "$(snap)" = "$before" ]
	run "$FSTX" run "$D" - <<<'rename a d/..f'
	[ "$status" -eq 0 ]
	[ "$(cat "$D/d/..f")" = alpha ]
}

@test "a failing transaction that plans an absolute symlink target rolls back cleanly" {
	before=$(snap)
	run "$FSTX" run "$D" - <<<$'unlink nothere\nsymlink /etc/passwd s'
	[ "$status" -eq 1 ]
	[ "$(snap)" = "$before" ]
	run "$FSTX" status "$D" --json
	[[ "$output" == *'"hot":false'* ]]
}

@test "refusal messages name the op, the line, every path and the reason" {
	ln -s .. "$D/up"
	run "$FSTX" run "$D" - <<<$'link a b\nlink a b'
	[ "$status" -eq 1 ]
	[[ "$output" == *'line 2: link "a" to "b": File exists (EEXIST); transaction rolled back, nothing changed'* ]]
	run "$FSTX" run "$D" - <<<'rename nope b'
	[[ "$output" == *'line 1: rename "nope" to "b": No such file or directory (ENOENT)'* ]]
	run "$FSTX" run "$D" - <<<$'open 0 a O_RDONLY\npwrite 0 "x" 0'
	[[ "$output" == *'line 2: pwrite fd 0 ("a"): Bad file descriptor (EBADF)'* ]]
	run "$FSTX" run "$D" - <<<'open 3 up/x O_RDWR'
	[[ "$output" == *'line 1: open "up/x": the path leaves the domain'*'(EXDEV); transaction rolled back, nothing changed'* ]]
	run "$FSTX" run "$D" - <<<'setxattr nope user.x "v"'
	[[ "$output" == *'line 1: setxattr "nope" user.x: No such file or directory (ENOENT)'* ]]
	run "$FSTX" run "$D" - <<<'symlink t a'
	[[ "$output" == *'line 1: symlink "a" (to "t"): File exists (EEXIST)'* ]]
	[ "$(cat "$D/a")" = alpha ]
	[ ! -e "$D/b" ]
}

@test "compare ops: assert-absent, assert-exists, assert-data, assert-xattr" {
	setfattr -n user.v -v 7 "$D/a" 2>/dev/null || skip "no user xattrs here"
	before=$(snap)
	run "$FSTX" run "$D" - <<<$'open 0 a O_WRONLY|O_TRUNC\npwrite 0 "beta" 0\nassert-data a "alpha\\n"\nassert-absent a'
	[ "$status" -eq 1 ]
	[[ "$output" == *'line 4: assert-absent "a": assertion does not hold (ECANCELED); transaction rolled back, nothing changed'* ]]
	[ "$(snap)" = "$before" ]
	run "$FSTX" run "$D" - --json <<<$'assert-xattr a user.v "8"'
	[ "$status" -eq 1 ]
	[[ "$output" == *'"failed_op":0,"line":1,"errno":"ECANCELED","results":[-125]'* ]]
	run "$FSTX" run "$D" - <<<$'assert-data a "alpha\\n"\nassert-xattr a user.v "7"\nassert-exists old\nassert-absent new\nopen 0 a O_WRONLY|O_TRUNC\npwrite 0 "beta" 0\nunlink old\nassert-exists old'
	[ "$status" -eq 0 ]
	[ "$(cat "$D/a")" = beta ]
	[ ! -e "$D/old" ]
	run "$FSTX" run "$D" - <<<'assert-data a'
	[ "$status" -eq 2 ]
}

@test "fstx read runs a command under the shared lock and passes its status on" {
	run "$FSTX" read "$D" -- cat "$D/a"
	[ "$status" -eq 0 ]
	[ "$output" = alpha ]
	run "$FSTX" read "$D" -- sh -c 'exit 7'
	[ "$status" -eq 7 ]
	run -127 "$FSTX" read "$D" -- /nonexistent/cmd
	[ "$status" -eq 127 ]
	run "$FSTX" read "$D"
	[ "$status" -eq 2 ]
	# A writer waits for the reader: the reader sees the same bytes twice.
	"$FSTX" read "$D" -- sh -c "cat '$D/a' > '$TX/r1'; sleep 1; cat '$D/a' > '$TX/r2'" &
	sleep 0.3
	run "$FSTX" run "$D" - <<<$'open 0 a O_WRONLY|O_TRUNC\npwrite 0 "changed" 0'
	[ "$status" -eq 0 ]
	wait
	[ "$(cat "$TX/r1")" = alpha ]
	[ "$(cat "$TX/r2")" = alpha ]
	[ "$(cat "$D/a")" = changed ]
}

@test "fstx read rolls back a hot journal before it runs the command" {
	run "$FSTX" run "$D" - <<<$'open 0 a O_WRONLY|O_TRUNC\npwrite 0 "torn" 0'
	[ "$status" -eq 0 ]
	# Leave a hot journal: kill a writer with SIGKILL while it holds the lock
	# (strace stops it right after its journal is durable).
	command -v strace >/dev/null || skip "strace missing"
	printf 'open 0 a O_WRONLY|O_TRUNC\npwrite 0 "NEW" 0\n' > "$TX/t"
	timeout -s KILL 5 strace -f -o /dev/null -e inject=pwrite64:signal=KILL:when=3 \
		"$FSTX" run "$D" "$TX/t" 2>/dev/null || true
	run "$FSTX" status "$D" --json
	if [[ "$output" != *'"hot":true'* ]]; then skip "no hot journal left at this point"; fi
	run "$FSTX" read "$D" -- cat "$D/a"
	[ "$status" -eq 0 ]
	[ "$output" = torn ]
	run "$FSTX" status "$D" --json
	[[ "$output" == *'"hot":false'* ]]
}

@test "option wal: an in-place overwrite commits with one fdatasync; recover checkpoints" {
	command -v strace >/dev/null || skip "strace missing"
	printf 'option wal\nopen 0 a O_RDWR\npwrite 0 "ALPHA" 0\ntruncate old 2\n' > "$TX/w.tx"
	run "$FSTX" run "$D" "$TX/w.tx" --json
	[ "$status" -eq 0 ]
	[[ "$output" == *'"status":"committed"'* ]]
	[[ "$output" == *'"results":[0,5,0]'* ]]
	[ "$(cat "$D/a")" = "ALPHA" ]
	[ "$(cat "$D/old")" = "ol" ]
	# the log exists now: the next one is one barrier, no syncfs
	printf 'option wal\nopen 0 a O_RDWR\npwrite 0 "BETA" 0\n' > "$TX/w2.tx"
	# (no leak check under strace: LeakSanitizer cannot run while traced)
	run env ASAN_OPTIONS=detect_leaks=0 strace -f -c -e trace=fsync,fdatasync,syncfs \
		"$FSTX" run "$D" "$TX/w2.tx"
	[ "$status" -eq 0 ]
	[[ "$output" =~ [[:space:]]1[[:space:]]+total ]]
	[[ "$output" =~ [[:space:]]1[[:space:]]+fdatasync ]]
	[ "$(cat "$D/a")" = "BETAA" ]
	# a transaction of the undo way checkpoints the log first
	printf 'unlink old\n' > "$TX/u.tx"
	run "$FSTX" run "$D" "$TX/u.tx"
	[ "$status" -eq 0 ]
	[ "$(cat "$D/a")" = "BETAA" ]
	[ ! -e "$D/old" ]
	# status reports the log: records after the commit, none after a checkpoint
	run "$FSTX" run "$D" "$TX/w2.tx"
	run "$FSTX" status "$D" --json
	[[ "$output" =~ \"wal_bytes\":[1-9] ]]
	"$FSTX" recover "$D"
	run "$FSTX" status "$D" --json
	[[ "$output" == *'"wal_bytes":0}'* ]]
	# an unknown option names the choices
	printf 'option walk\n' > "$TX/bad.tx"
	run "$FSTX" run "$D" "$TX/bad.tx"
	[ "$status" -eq 2 ]
	[[ "$output" == *"'option wal'"* ]]
}

@test "option lazy: committed and applied by the time fstx run exits; with crash-only refused" {
	printf 'option lazy\nopen 0 a O_RDWR\npwrite 0 "LAZY" 0\nsetxattr a user.z "1"\n' > "$TX/l.tx"
	run "$FSTX" run "$D" "$TX/l.tx" --json
	[ "$status" -eq 0 ]
	[[ "$output" == *'"status":"committed"'* ]]
	# the close flushed the queue: in place, and the log says all applied
	[ "$(head -c 4 "$D/a")" = "LAZY" ]
	[ "$(getfattr --only-values -n user.z "$D/a" 2>/dev/null)" = 1 ]
	run "$FSTX" read "$D" -- cat "$D/a"
	[[ "$output" == LAZY* ]]
	printf 'option lazy\noption crash-only\nopen 0 a O_RDWR\npwrite 0 "X" 0\n' > "$TX/lc.tx"
	run "$FSTX" run "$D" "$TX/lc.tx"
	[ "$status" -eq 2 ]
	[ "$(head -c 4 "$D/a")" = "LAZY" ]
}
