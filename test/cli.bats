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
	touch "$TX/go" # releases a reader a failed test left waiting
	wait
	chattr -R -i -a "$D" 2>/dev/null || true # a failed test's flags
	rm -rf "$D" "$TX"
}

# an empty transaction: DIR becomes a domain (DIR/.fstx/)
mkdomain() {
	"$FSTX" run -q "$D" - </dev/null
}

# Tests that run fstx as an unprivileged user (65534): nobody_can skips
# where that cannot be; nobody_setup, once the test gave it $D, makes $TX
# and a copy of $FSTX (wherever the tree was checked out) its to use;
# nobody CMD runs CMD as that user.
nobody_can() {
	command -v setpriv >/dev/null || skip "setpriv missing"
	[ "$(id -u)" -eq 0 ] || skip "needs root to switch to an unprivileged user"
}

nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all "$@"; }

nobody_setup() {
	chmod 755 "$D" "$TX"
	cp "$FSTX" "$TX/fstx"
	chmod 755 "$TX/fstx"
	nobody test -x "$D" || skip "$D is out of an unprivileged user's reach (a 0700 parent)"
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
	run --separate-stderr "$FSTX" run "$D" "$TX/t.tx" --json
	[ "$status" -eq 0 ]
	[[ "$output" == '{"schema":1,"command":"run","status":"committed","message":"committed 6 ops","errno":null,"ops_completed":6,"failed_op":null,"line":null,"column":null,"element":null,"op":null,"path":null,"paths":null,"results":[0,0,7,0,0,0]}' ]]
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
	[[ "$output" == *'"status":"rolled_back","message":"line 3: rmdir \"nothere\": No such file or directory (ENOENT); transaction rolled back, nothing changed","errno":"ENOENT","ops_completed":2,"failed_op":2,"line":3,"column":null,"element":null,"op":{"index":2,"name":"rmdir"},"path":"nothere","paths":["nothere"],"results":[0,0,-2]}'* ]]
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
	[[ "$output" == *"t.tx:2:1: error: unknown op"* ]]
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
	[[ "$output" == *'"status":"invalid","message":"line 2: close: invalid: '*'","errno":"EINVAL","ops_completed":1,"failed_op":1,"line":2,'* ]]
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
	[[ "$output" == *'"status":"invalid","message":"cannot read the transaction file '"$TX"': Is a directory","errno":"EISDIR","ops_completed":0,"failed_op":null,"line":null,'* ]]
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
	mkdomain
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
	mkdomain
	# a BEGIN header with a wrong checksum, and a progress mark: changes
	# had begun, so this cannot be a write torn before barrier 1
	printf 'FXJ1\001\000\000\000\030\000\000\000' > "$D/.fstx/journal"
	head -c 44 /dev/zero >> "$D/.fstx/journal"
	ln -s fstx "$D/.fstx/step.0123456789abcdef.0"
	before="$(snap)"
	run "$FSTX" recover "$D"
	[ "$status" -eq 3 ]
	[[ "$output" == *"corrupt"* ]]
	# it names the file and says what a person can do
	[[ "$output" == *"$D/.fstx/journal"* ]]
	[[ "$output" == *"remove .fstx/journal and .fstx/step.* and run fstx recover again"* ]]
	printf 'unlink old\n' > "$TX/t.tx"
	run "$FSTX" run "$D" "$TX/t.tx"
	[ "$status" -eq 3 ]
	[ "$(snap)" = "$before" ]
}

@test "a torn journal without a progress mark is discarded" {
	mkdomain
	printf 'FXJ1\001\000\000\000\030\000\000\000' > "$D/.fstx/journal"
	head -c 44 /dev/zero >> "$D/.fstx/journal"
	before="$(snap)"
	run "$FSTX" recover "$D"
	[ "$status" -eq 0 ]
	[ "$(snap)" = "$before" ]
	[ ! -s "$D/.fstx/journal" ]
}

@test "status --json reports filesystem facts" {
	mkdomain
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
	[ "$status" -eq 4 ]
	[[ "$output" == *'line 4: assert-absent "a": assertion does not hold (ECANCELED); a conflict: the tree is not as the transaction expects, nothing changed'* ]]
	[ "$(snap)" = "$before" ]
	run --separate-stderr "$FSTX" run "$D" - --json <<<$'assert-xattr a user.v "8"'
	[ "$status" -eq 4 ]
	[[ "$output" == *'"errno":"ECANCELED","ops_completed":0,"failed_op":0,"line":1,'*'"results":[-125]}' ]]
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

@test "run: a transaction predicted to fail runs nothing: exit 1, no barrier, no write" {
	command -v strace >/dev/null || skip "strace missing"
	"$FSTX" run "$D" - <<<'assert-exists a' # .fstx/ made
	before=$(cd "$D" && find . -path ./.fstx -prune -o -printf '%p %s\n' | sort)
	printf 'write n "new"\nunlink nothere\n' > "$TX/f.tx"
	run --separate-stderr env ASAN_OPTIONS=detect_leaks=0 strace -f -y -o "$TX/f.trace" \
		-e trace=fsync,fdatasync,syncfs,pwrite64,renameat2 "$FSTX" run "$D" "$TX/f.tx" --json
	[ "$status" -eq 1 ]
	[[ "$output" == *'"status":"rolled_back"'* ]]
	[[ "$output" == *'"errno":"ENOENT"'* ]]
	# (the lock holder's side notes, .fstx/walsync, are not the tree)
	run grep -v -e '+++ exited' -e '\.fstx/walsync>' "$TX/f.trace"
	[ "$status" -eq 1 ]
	[ ! -e "$D/n" ]
	[ "$before" = "$(cd "$D" && find . -path ./.fstx -prune -o -printf '%p %s\n' | sort)" ]
}

@test "run without privilege: a bare xattr namespace fails as the kernel says (EPERM, EACCES, EINVAL)" {
	nobody_can
	printf 'ro\n' > "$D/ro"
	chown -R 65534:65534 "$D"
	chown 0:0 "$D/ro"
	nobody_setup
	printf -- '-setxattr a trusted. "x"\n-removexattr a security.\n-setxattr ro user. "x"\n' > "$TX/x.tx"
	printf -- '-removexattr a user.\nwrite n "new"\n-setxattr n trusted. "x"\n-removexattr n user.\n' >> "$TX/x.tx"
	printf -- 'open 0 r O_WRONLY|O_CREAT 0444\n-setxattr r user. "x"\n' >> "$TX/x.tx"
	chmod 644 "$TX/x.tx"
	run nobody "$TX/fstx" run "$D" "$TX/x.tx" --json
	[ "$status" -eq 0 ]
	[[ "$output" == *'"status":"committed"'*'"results":[-1,-1,-13,-22,1,3,0,-1,-22,0,-13]}' ]]
	[ "$(cat "$D/n")" = "new" ]
	printf 'write a "changed"\nsetxattr a trusted. "x"\n' > "$TX/s.tx"
	chmod 644 "$TX/s.tx"
	run nobody "$TX/fstx" run "$D" "$TX/s.tx" --json
	[ "$status" -eq 1 ]
	[[ "$output" == *'"errno":"EPERM"'* ]]
	[ "$(cat "$D/a")" = "alpha" ]
	# with the privilege, the kernel's EINVAL
	run "$FSTX" run "$D" "$TX/s.tx" --json
	[ "$status" -eq 1 ]
	[[ "$output" == *'"errno":"EINVAL"'* ]]
}

@test "run without privilege: a new read-only file is written, the undo way and in a replay after a kill" {
	nobody_can
	command -v strace >/dev/null || skip "strace missing"
	mkdir "$D/cur" "$D/new"
	chown -R 65534:65534 "$D"
	nobody_setup
	# two directory renames: the undo way, which opens its staged file again
	printf 'open 0 obj O_WRONLY|O_CREAT 0444\npwrite 0 "object" 0\nrename cur prev\nrename new cur\n' > "$TX/u.tx"
	printf 'open 1 obj3 O_WRONLY|O_CREAT 0060\npwrite 1 "three" 0\n' >> "$TX/u.tx"
	# the log: killed at its barrier, the record replayed by recover
	printf 'open 0 obj2 O_WRONLY|O_CREAT 0444\npwrite 0 "object two" 0\n' > "$TX/k.tx"
	chmod 644 "$TX/u.tx" "$TX/k.tx"
	run nobody "$TX/fstx" run "$D" "$TX/u.tx"
	[ "$status" -eq 0 ]
	[ "$(cat "$D/obj")" = "object" ]
	[ "$(stat -c %a "$D/obj")" = "$(printf %o $((0444 & ~$(umask))))" ]
	[ "$(cat "$D/obj3")" = "three" ]
	[ "$(stat -c %a "$D/obj3")" = "$(printf %o $((0060 & ~$(umask))))" ]
	[ -d "$D/prev" ]
	run nobody env ASAN_OPTIONS=detect_leaks=0 strace -f -o /dev/null -e trace=fdatasync \
		-e inject=fdatasync:signal=KILL "$TX/fstx" run "$D" "$TX/k.tx"
	[ "$status" -ne 0 ]
	[ ! -s "$D/obj2" ]
	run nobody "$TX/fstx" recover "$D"
	[ "$status" -eq 0 ]
	[ "$(cat "$D/obj2")" = "object two" ]
	[ "$(stat -c %a "$D/obj2")" = "$(printf %o $((0444 & ~$(umask))))" ]
}

@test "run without privilege: a name made under a directory an exchange brought there" {
	nobody_can
	mkdir -p "$D/u" "$D/p/q/s"
	printf 'x\n' > "$D/u/f4"
	chown -R 65534:65534 "$D"
	nobody_setup
	# after the exchange u/f4 is the directory p/q was: the kernel makes both
	printf 'rename u/f4 p/q exchange\nmkdir u/f4/n4\nmkdir u/f4/s/n5\nwrite u/f4/s/x "hi"\n' > "$TX/x.tx"
	chmod 644 "$TX/x.tx"
	run nobody "$TX/fstx" run "$D" "$TX/x.tx"
	[ "$status" -eq 0 ]
	[ -d "$D/u/f4/n4" ] && [ -d "$D/u/f4/s/n5" ]
	[ "$(cat "$D/u/f4/s/x")" = "hi" ]
	[ "$(cat "$D/p/q")" = "x" ]
}

@test "run without privilege: new objects their owner may not read are synced and removed" {
	nobody_can
	mkdir -m 555 "$D/ro5"
	chown -R 65534:65534 "$D"
	nobody_setup
	printf 'mkdir e2 0355\nopen 0 e2/f O_WRONLY|O_CREAT\npwrite 0 "x" 0\nmkdir e3 0311\n' > "$TX/m.tx"
	printf 'open 1 w O_WRONLY|O_CREAT 0200\npwrite 1 "w" 0\n' >> "$TX/m.tx"
	printf 'rmdir e3\nrmdir ro5\n' > "$TX/r.tx"
	chmod 644 "$TX/m.tx" "$TX/r.tx"
	run nobody "$TX/fstx" run "$D" "$TX/m.tx"
	[ "$status" -eq 0 ]
	# the checkpoint fsyncs them
	run nobody "$TX/fstx" recover "$D"
	[ "$status" -eq 0 ]
	[ "$(cat "$D/e2/f")" = "x" ]
	[ "$(cat "$D/w")" = "w" ]
	[ "$(stat -c %a "$D/e3")" = "$(printf %o $((0311 & ~$(umask))))" ]
	# the planner lists it to predict the rmdir
	run nobody "$TX/fstx" run "$D" "$TX/r.tx"
	[ "$status" -eq 0 ]
	[ ! -e "$D/e3" ]
	[ ! -e "$D/ro5" ]
}

@test "run without privilege: what the kernel refuses fails alone, and the domain goes on" {
	nobody_can
	mkdir "$D/rod" "$D/w"
	printf 'f\n' > "$D/rod/f"
	printf 'g2\n' > "$D/w/g2"
	printf 'ro\n' > "$D/ro"
	chmod 444 "$D/ro"
	chmod 555 "$D/rod"
	chown -R 65534:65534 "$D"
	# another user's: a file (protected_hardlinks), a directory it may
	# write and search but not read (fsyncs need it open)
	printf 'r\n' > "$D/rootf"
	mkdir -m 733 "$D/drop"
	nobody_setup
	before=$(snap)
	for t in 'unlink rod/f' 'rename rod/f w/f' 'open 0 rod/new O_WRONLY|O_CREAT' \
		 'setxattr ro user.x "1"' 'open 0 n O_WRONLY|O_CREAT 0444\nsetxattr n user.x "1"' \
		 'truncate ro 0' 'open 0 drop/f O_WRONLY|O_CREAT\npwrite 0 "x" 0' \
		 'link rootf w/l' 'mkdir m 0600\nsymlink ../a m/l' \
		 'rename w/g2 rod/g2\nunlink rod/g2'; do
		printf "write w/g \"x\"\n$t\n" > "$TX/p.tx"
		chmod 644 "$TX/p.tx"
		run nobody "$TX/fstx" run "$D" "$TX/p.tx" --json
		[ "$status" -eq 1 ]
		[[ "$output" == *'"status":"rolled_back"'*'"errno":"'E[AP][CE][CR]* ]]
		[ "$(snap)" = "$before" ]
	done
	printf 'write w/g "ok"\n' > "$TX/ok.tx"
	chmod 644 "$TX/ok.tx"
	run nobody "$TX/fstx" run "$D" "$TX/ok.tx"
	[ "$status" -eq 0 ]
	[ "$(cat "$D/w/g")" = "ok" ]
}

@test "run: an immutable or append-only object fails its op with EPERM, and the domain goes on" {
	command -v chattr >/dev/null || skip "chattr missing"
	mkdir "$D/ad" "$D/im"
	printf 'h\n' > "$D/ad/h"
	printf 'm\n' > "$D/m"
	printf 'x\n' > "$D/im/x"
	printf 'ap\n' > "$D/ap"
	printf 'l\n' > "$D/l1"
	ln "$D/l1" "$D/l2"
	mkdomain
	chattr +i "$D/a" 2>/dev/null || skip "no immutable flag on this filesystem"
	chattr +a "$D/ad" 2>/dev/null || { chattr -i "$D/a"; skip "no append-only flag"; }
	chattr +i "$D/im" "$D/l1"
	chattr +a "$D/ap"
	before=$(snap)
	res=()
	# (then: a rename into an immutable directory and the removal of the
	# name it gave, which the log would take as one removal; a new file in
	# the append-only directory before a removal there, a write, truncate,
	# open to write or xattr of an immutable or append-only file, which the
	# undo way could not take back)
	for t in 'unlink a' 'rename a a2' 'setxattr a user.k "v"' 'link a a3' 'unlink ad/h' \
		 'rename m im/m2\nunlink im/m2' 'write ad/n2 "n"\nunlink ad/h' \
		 'write ad/n2 "n"\nwrite a "z"' 'write ad/n2 "n"\ntruncate a 0' \
		 'write ad/n2 "n"\nopen 0 ap O_WRONLY' 'write ad/n2 "n"\nsetxattr ap user.q "1"'; do
		printf "write old \"x\"\n$t\n" > "$TX/p.tx"
		rc=0
		"$FSTX" run "$D" "$TX/p.tx" --json > "$TX/out" 2>&1 || rc=$?
		res+=("$rc $(grep -o '"errno":"[A-Z]*"' "$TX/out") $([ "$(snap)" = "$before" ] && echo same)")
	done
	# what the kernel allows: new names in an append-only directory, a link
	# out of an immutable one, appends to an append-only file, and an
	# exchange of two names of one file
	printf 'write ad/new "n"\nlink im/x x2\nopen 0 ap O_WRONLY|O_APPEND\npwrite 0 "+" 0\nrename l1 l2 exchange\n' > "$TX/ok.tx"
	ok=0
	"$FSTX" run "$D" "$TX/ok.tx" || ok=$?
	chattr -i "$D/a" "$D/im" "$D/l1"
	chattr -a "$D/ad" "$D/ap"
	for r in "${res[@]}"; do
		[ "$r" = '1 "errno":"EPERM" same' ]
	done
	[ "$ok" -eq 0 ]
	[ "$(cat "$D/ad/new")" = "n" ]
	[ "$(cat "$D/x2")" = "x" ]
	[ "$(cat "$D/ap")" = "$(printf 'ap\n+')" ]
}

@test "run: hard links exchanged, then a failure: rolled back whole" {
	# the undo way (a trusted.* xattr), a failure before the exchanges run:
	# the rollback must not take b, a name hard's inode always had, for
	# the second exchange's half-made rename (journal.c rule 5a)
	[ "$(id -u)" -eq 0 ] || skip "trusted.* xattrs need root"
	printf 'B\n' > "$D/b"
	ln "$D/b" "$D/hard"
	mkdomain
	setfattr -n trusted.t -v 1 "$D/a" 2>/dev/null || skip "no trusted.* xattrs here"
	setfattr -x trusted.t "$D/a"
	before=$(cd "$D" && stat -c '%i %h %n' a b hard old)
	printf 'setxattr a trusted.x "v"\nrename nothere ln\nrename b old exchange\nrename hard b exchange\n' > "$TX/h.tx"
	run "$FSTX" run "$D" "$TX/h.tx"
	[ "$status" -eq 1 ]
	[ "$(cd "$D" && stat -c '%i %h %n' a b hard old)" = "$before" ]
	[ "$(cat "$D/b")" = B ]
}

@test "run: a hard link under a directory moved away, then a failure: rolled back whole" {
	# the undo way (a trusted.* xattr), a failure before the renames run:
	# the rollback must not take d/h, a name x's inode always had, for the
	# last rename's, which never ran (journal.c rules 5a, 5c)
	[ "$(id -u)" -eq 0 ] || skip "trusted.* xattrs need root"
	mkdir "$D/d"
	printf 'H\n' > "$D/d/h"
	ln "$D/d/h" "$D/x"
	mkdomain
	setfattr -n trusted.t -v 1 "$D/a" 2>/dev/null || skip "no trusted.* xattrs here"
	setfattr -x trusted.t "$D/a"
	before=$(cd "$D" && stat -c '%i %h %n' a d d/h x)
	printf 'setxattr a trusted.x "v"\nrename nothere ln\nrename d d2\nmkdir d\nrename x d/h\n' > "$TX/h.tx"
	run "$FSTX" run "$D" "$TX/h.tx"
	[ "$status" -eq 1 ]
	[ "$(cd "$D" && stat -c '%i %h %n' a d d/h x)" = "$before" ]
	[ ! -e "$D/d2" ]
}

@test "run: a file renamed under a directory moved away and back, then a failure: rolled back whole" {
	# the undo way (a trusted.* xattr), a failure after the renames ran:
	# p/q/z was a name of y's inode until "rename n/z n/z2", whose path
	# names no directory once n moved back to p/q; the rollback must give
	# y back all the same (journal.c rule 5c: the step ran)
	[ "$(id -u)" -eq 0 ] || skip "trusted.* xattrs need root"
	mkdir -p "$D/p/q"
	printf 'Z\n' > "$D/p/q/z"
	ln "$D/p/q/z" "$D/y"
	mkdomain
	setfattr -n trusted.t -v 1 "$D/a" 2>/dev/null || skip "no trusted.* xattrs here"
	setfattr -x trusted.t "$D/a"
	before=$(cd "$D" && stat -c '%i %h %n' a p p/q p/q/z y)
	printf 'setxattr a trusted.x "v"\nrename p/q n\nrename n/z n/z2\nrename n p/q\nrename y p/q/z\nrename nothere ln\n' > "$TX/h.tx"
	run "$FSTX" run "$D" "$TX/h.tx"
	[ "$status" -eq 1 ]
	[ "$(cd "$D" && stat -c '%i %h %n' a p p/q p/q/z y)" = "$before" ]
	[ ! -e "$D/n" ]
	[ ! -e "$D/p/q/z2" ]
}

@test "run: new objects in a setgid directory take its group, both ways" {
	getent group nogroup >/dev/null || skip "no group nogroup"
	mkdir "$D/g"
	chgrp nogroup "$D/g"
	chmod 2775 "$D/g"
	mkdomain
	# the log (new file, symlink, directories made in place and staged)
	printf 'write g/f "x"\nmkdir g/d\nmkdir g/e\nwrite g/e/x "1"\nsymlink f g/l\n' > "$TX/a.tx"
	# the undo way (a directory renamed beside names under it)
	printf 'write g/f3 "x"\nmkdir g/d3\nwrite g/d3/y "y"\nrename g/d g/dd\nrename g g2\nwrite g2/f4 "x"\nmkdir g2/d4\n' > "$TX/b.tx"
	run "$FSTX" run "$D" "$TX/a.tx"
	[ "$status" -eq 0 ]
	run "$FSTX" run "$D" "$TX/b.tx"
	[ "$status" -eq 0 ]
	for p in f l e e/x dd d3 d3/y f3 f4 d4; do
		[ "$(stat -c %G "$D/g2/$p")" = nogroup ]
	done
	for p in e dd d3 d4; do
		[ -g "$D/g2/$p" ]
	done
	# the log again: new objects in a directory the transaction renames
	printf 'rename g2 g3\nwrite g3/n "n"\nmkdir g3/m\nwrite g3/m/z "z"\nsymlink n g3/ln\n' > "$TX/c.tx"
	run "$FSTX" run "$D" "$TX/c.tx"
	[ "$status" -eq 0 ]
	for p in n m m/z ln; do
		[ "$(stat -c %G "$D/g3/$p")" = nogroup ]
	done
	[ -g "$D/g3/m" ]
	# where an object is made, not where it ends, gives its group
	printf 'write g3/o "o"\nrename g3/o o\nsymlink o g3/ol\nrename g3/ol ol\nwrite i "i"\nrename i g3/i\n' > "$TX/d.tx"
	run "$FSTX" run "$D" "$TX/d.tx"
	[ "$status" -eq 0 ]
	[ "$(stat -c %G "$D/o")" = nogroup ]
	[ "$(stat -c %G "$D/ol")" = nogroup ]
	[ "$(stat -c %G "$D/g3/i")" != nogroup ]
	# a new directory renamed across a setgid directory's edge keeps the
	# group it was made with, also one made in place (no new file in it)
	mkdir "$D/od"
	for t in 'mkdir g3/e1\nrename g3/e1 od/e1\n' 'mkdir g3/e3\nmkdir g3/e3/s\nrename g3/e3 od/e3\n' \
		 'mkdir od/e2\nrename od/e2 g3/e2\n' 'mkdir od/e4\nmkdir od/e4/s\nrename od/e4 g3/e4\n'; do
		printf "$t" > "$TX/e.tx"
		run "$FSTX" run "$D" "$TX/e.tx"
		[ "$status" -eq 0 ]
	done
	for p in od/e1 od/e3 od/e3/s; do
		[ "$(stat -c %G "$D/$p")" = nogroup ]
		[ -g "$D/$p" ]
	done
	for p in g3/e2 g3/e4 g3/e4/s; do
		[ "$(stat -c %G "$D/$p")" != nogroup ]
		[ ! -g "$D/$p" ]
	done
	# made in a new directory after its rename; where another directory
	# took the name a new one left; a new directory made in another,
	# moved up (no setgid on its way)
	printf 'mkdir g3/n1\nrename g3/n1 g3/n2\nsymlink tgt g3/n2/n3\nwrite g3/n2/n4 "x"\n' > "$TX/f.tx"
	printf 'mkdir m1\nrename m1 od/x\nrename g3 m1\nwrite m1/f5 "x"\n' > "$TX/g.tx"
	printf 'mkdir od/q1\nmkdir od/q1/q2\nwrite od/q1/q2/f "x"\nrename od/q1/q2 od/q3\n' > "$TX/h.tx"
	for t in f g h; do
		run "$FSTX" run "$D" "$TX/$t.tx"
		[ "$status" -eq 0 ]
	done
	for p in m1/n2/n3 m1/n2/n4 m1/f5; do
		[ "$(stat -c %G "$D/$p")" = nogroup ]
	done
	[ "$(stat -c %G "$D/od/q3")" != nogroup ]
	[ ! -g "$D/od/q3" ]
}

@test "run: in a setgid domain, new objects in a directory that is not setgid take the caller's group, both ways" {
	getent group nogroup >/dev/null || skip "no group nogroup"
	chgrp nogroup "$D"
	chmod 2775 "$D"
	mkdir "$D/o"
	chmod g-s "$D/o"
	mkdomain # .fstx/ and its staging directories setgid, as the root
	# the log (a new file, a directory with a file, an empty directory)
	printf 'write o/f "x"\nmkdir o/d\nwrite o/d/x "1"\nmkdir o/e\nsymlink f o/l\n' > "$TX/a.tx"
	# the undo way (a trusted.* xattr)
	printf 'write o/f2 "x"\nmkdir o/d2\nwrite o/d2/y "y"\nmkdir o/e2\nsetxattr o/f2 trusted.t "v"\n' > "$TX/b.tx"
	run "$FSTX" run "$D" "$TX/a.tx"
	[ "$status" -eq 0 ]
	run "$FSTX" run "$D" "$TX/b.tx"
	[ "$status" -eq 0 ]
	for p in f d d/x e l f2 d2 d2/y e2; do
		[ "$(stat -c %g "$D/o/$p")" = "$(id -g)" ]
	done
	for p in d e d2 e2; do
		[ ! -g "$D/o/$p" ]
	done
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

# ---- exit codes, the JSON envelope, messages -------------------

# envelope FILE-OR-STRING STATUS: one JSON object, valid UTF-8, schema 1,
# the status given, a message string, an errno that is a name or null.
envelope() {
	printf '%s\n' "$1" | jq -e --arg s "$2" '.schema == 1 and .status == $s and
		(.message | type == "string" and length > 0) and
		(.command | type == "string") and
		(.errno == null or (.errno | test("^E[A-Z0-9]+$")))' >/dev/null
}

@test "finding 4: a DIR that cannot be opened is exit 2 naming the reason, with a JSON envelope" {
	printf 'unlink x\n' > "$TX/t.tx"
	run --separate-stderr "$FSTX" run /nonexistent/dir "$TX/t.tx" --json
	[ "$status" -eq 2 ]
	envelope "$output" cannot_open
	[ "$(jq -r .errno <<<"$output")" = ENOENT ]
	[[ "$stderr" == *"/nonexistent/dir"*"No such file or directory"* ]]
	[[ "$stderr" != *recover* ]]
	run --separate-stderr "$FSTX" run "$D/a" "$TX/t.tx" --json
	[ "$status" -eq 2 ]
	envelope "$output" cannot_open
	[ "$(jq -r .errno <<<"$output")" = ENOTDIR ]
	if [ "$(id -u)" != 0 ]; then
		mkdir "$D/locked" && chmod 000 "$D/locked"
		run --separate-stderr "$FSTX" run "$D/locked" "$TX/t.tx" --json
		chmod 755 "$D/locked"
		[ "$status" -eq 2 ]
		[ "$(jq -r .errno <<<"$output")" = EACCES ]
	fi
	run --separate-stderr "$FSTX" status /nonexistent/dir --json
	[ "$status" -eq 2 ]
	envelope "$output" cannot_open
	run --separate-stderr "$FSTX" recover /nonexistent/dir --json
	[ "$status" -eq 2 ]
	envelope "$output" cannot_open
}

@test "finding 4: results of ops that never ran are null; a failure names the op and its path" {
	run --separate-stderr "$FSTX" run "$D" --json - <<<$'unlink nothere\nopen 0 f O_WRONLY|O_CREAT\npwrite 0 "abc" 0\nclose 0'
	[ "$status" -eq 1 ]
	envelope "$output" rolled_back
	jq -e '.results == [-2,null,null,null] and .op.index == 0 and .op.name == "unlink"
		and .path == "nothere" and .paths == ["nothere"] and .failed_op == 0
		and .line == 1 and .errno == "ENOENT"' <<<"$output"
	jq -e '.message | test("unlink \"nothere\": No such file or directory")' <<<"$output"
	run --separate-stderr "$FSTX" run "$D" --json - <<<$'mkdir m\nrename a m/b\nlink nope m/c'
	[ "$status" -eq 1 ]
	jq -e '.results == [0,0,-2] and .op.name == "link" and .paths == ["nope","m/c"]' <<<"$output"
	[ ! -e "$D/m" ]
}

@test "finding 4: a name that is not UTF-8 still gives valid JSON (bytes as \\u00XX)" {
	run --separate-stderr "$FSTX" run "$D" --json - <<<$'unlink "bad\\xffname\\xc3"'
	[ "$status" -eq 1 ]
	envelope "$output" rolled_back
	[ "$(jq -r .path <<<"$output")" = $'bad\u00ffname\u00c3' ]
	printf '%s' "$output" | iconv -f UTF-8 -t UTF-8 >/dev/null
}

@test "finding 4: run, status, recover and read print one envelope on every path" {
	run --separate-stderr "$FSTX" run "$D" --json - <<<'unlink old'
	[ "$status" -eq 0 ]
	envelope "$output" committed
	jq -e '.command == "run" and .results == [0] and .failed_op == null and .op == null' <<<"$output"
	run --separate-stderr "$FSTX" status "$D" --json
	[ "$status" -eq 0 ]
	envelope "$output" clean
	jq -e '.hot == false and .wedged == false and (.fs_type|type=="string")' <<<"$output"
	run --separate-stderr "$FSTX" recover "$D" --json
	[ "$status" -eq 0 ]
	envelope "$output" clean
	run --separate-stderr "$FSTX" read "$D" --json -- true
	[ "$status" -eq 0 ]
	envelope "$output" ok
	jq -e '.exit_status == 0' <<<"$output"
	run --separate-stderr "$FSTX" read "$D" --json -- sh -c 'exit 3'
	[ "$status" -eq 3 ]
	envelope "$output" ok
	jq -e '.exit_status == 3' <<<"$output"
	run --separate-stderr "$FSTX" frob --json
	[ "$status" -eq 2 ]
	envelope "$output" usage
	run --separate-stderr "$FSTX" run --json
	[ "$status" -eq 2 ]
	envelope "$output" usage
	run --separate-stderr "$FSTX" run "$D" --json - <<<'pwrit 0 "x" 0'
	[ "$status" -eq 2 ]
	envelope "$output" invalid
	jq -e '.line == 1 and .column == 1' <<<"$output"
	run --separate-stderr "$FSTX" run "$D" --json - <<<$'unlink old\nclose 4'
	[ "$status" -eq 2 ]
	envelope "$output" invalid
	jq -e '.failed_op == 1 and .op.name == "close" and .results == [null,null]' <<<"$output"
}

@test "finding 4: wedged, hot and recovery failures: exit 3 with documented statuses" {
	mkdomain
	touch "$D/.fstx/wedged"
	run --separate-stderr "$FSTX" run "$D" --json - <<<'unlink old'
	[ "$status" -eq 3 ]
	envelope "$output" wedged
	run --separate-stderr "$FSTX" status "$D" --json
	[ "$status" -eq 3 ]
	envelope "$output" wedged
	run --separate-stderr "$FSTX" recover "$D" --json
	[ "$status" -eq 0 ]
	envelope "$output" recovered
	# a corrupt journal: recovery fails
	printf 'FXJ1\001\000\000\000\030\000\000\000' > "$D/.fstx/journal"
	head -c 44 /dev/zero >> "$D/.fstx/journal"
	ln -s fstx "$D/.fstx/step.0123456789abcdef.0"
	run --separate-stderr "$FSTX" status "$D" --json
	[ "$status" -eq 3 ]
	envelope "$output" hot
	run --separate-stderr "$FSTX" recover "$D" --json
	[ "$status" -eq 3 ]
	envelope "$output" wedged
	[ "$(jq -r .errno <<<"$output")" = EUCLEAN ]
	run --separate-stderr "$FSTX" read "$D" --json -- true
	[ "$status" -eq 3 ]
	envelope "$output" wedged
}

@test "finding 5: a compare op that fails is a conflict, exit 4" {
	before=$(snap)
	run --separate-stderr "$FSTX" run "$D" --json - <<<$'assert-data a "beta\\n"\nunlink old'
	[ "$status" -eq 4 ]
	envelope "$output" conflict
	jq -e '.op.name == "assert-data" and .path == "a" and .errno == "ECANCELED"
		and .results == [-125,null]' <<<"$output"
	run "$FSTX" run "$D" - <<<'assert-absent a'
	[ "$status" -eq 4 ]
	[[ "$output" == *"conflict"* ]]
	[ "$(snap)" = "$before" ]
	# a condition that fails is an op failure, not a conflict
	run --separate-stderr "$FSTX" run "$D" - <<<'unlink a !eq 0'
	[ "$status" -eq 1 ]
}

@test "finding 5: --no-wait and --wait on a domain held by a reader; the wait is announced" {
	"$FSTX" read "$D" -- sh -c "touch '$TX/held'; while [ ! -e '$TX/go' ]; do sleep 0.05; done" &
	reader=$!
	while [ ! -e "$TX/held" ]; do sleep 0.05; done
	run --separate-stderr "$FSTX" run "$D" --no-wait --json - <<<'unlink old'
	[ "$status" -eq 5 ]
	envelope "$output" busy
	[ "$(jq -r .errno <<<"$output")" = EWOULDBLOCK ] || [ "$(jq -r .errno <<<"$output")" = EAGAIN ]
	run --separate-stderr "$FSTX" run "$D" --wait 0.2 --json - <<<'unlink old'
	[ "$status" -eq 5 ]
	envelope "$output" busy
	[ "$(jq -r .errno <<<"$output")" = ETIMEDOUT ]
	[ -e "$D/old" ]
	# the default waits, and says so on stderr while it does
	printf 'unlink old\n' > "$TX/t.tx"
	"$FSTX" run "$D" "$TX/t.tx" 2> "$TX/err" &
	writer=$!
	# (a bound only so that a missing notice fails instead of hanging)
	for i in $(seq 1200); do
		grep -q 'waiting for the domain lock' "$TX/err" && break
		sleep 0.05
	done
	touch "$TX/go"
	wait "$reader"
	wait "$writer"
	[ ! -e "$D/old" ]
	grep -q "waiting for the domain lock of $D" "$TX/err"
	run --separate-stderr "$FSTX" run "$D" --wait x - <<<'unlink a'
	[ "$status" -eq 2 ]
}

@test "finding 6: a parse error names the file, line and column, shows the line and a caret" {
	printf 'unlink old\npwrit 0 "x" 0\n' > "$TX/t.tx"
	run "$FSTX" run "$D" "$TX/t.tx"
	[ "$status" -eq 2 ]
	[[ "${lines[0]}" == *"$TX/t.tx:2:1: error: "*'unknown op'* ]]
	[[ "$output" == *'pwrit 0 "x" 0'* ]]
	[[ "$output" == *'^'* ]]
	run "$FSTX" run "$D" - <<<'pwrit 0 "x" 0'
	[[ "${lines[0]}" == *"<stdin>:1:1: error: "* ]]
	run --separate-stderr "$FSTX" run "$D" "$TX/t.tx" --json
	jq -e '.line == 2 and .column == 1 and (.message | startswith("'"$TX"'/t.tx:2:1: error: "))
		and (.message | contains("\n") | not)' <<<"$output"
}

@test "finding 6: usage errors are one line pointing to --help; -q, -V, run --help, --" {
	run --separate-stderr "$FSTX" frob
	[ "$status" -eq 2 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"unknown command"*"frob"*"--help"* ]]
	run --separate-stderr "$FSTX" run
	[ "$status" -eq 2 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"run"*"DIR"*"--help"* ]]
	run --separate-stderr "$FSTX" run "$D" --bogus
	[ "$status" -eq 2 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"--bogus"*"--help"* ]]
	run --separate-stderr "$FSTX" -V
	[ "$status" -eq 0 ]
	[[ "$output" == "fstx 0.1.0" ]]
	run --separate-stderr "$FSTX" run --help
	[ "$status" -eq 0 ]
	[[ "$output" == *"fstx run"*"--input"* ]]
	[[ "$output" != *"fstx recover DIR"* ]]
	run --separate-stderr "$FSTX" run -q "$D" - <<<'unlink old'
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[ -z "$stderr" ]
	# -- ends options: a transaction file named like an option
	printf 'unlink a\n' > "$TX/-q"
	(cd "$TX" && "$FSTX" run "$D" -- -q)
	[ ! -e "$D/a" ]
}

@test "finding 7: status on a plain directory changes nothing on disk" {
	mkdir "$D/plain"
	run --separate-stderr "$FSTX" status "$D/plain" --json
	[ "$status" -eq 0 ]
	envelope "$output" not_a_domain
	[ ! -e "$D/plain/.fstx" ]
	run "$FSTX" status "$D/plain"
	[ "$status" -eq 0 ]
	[[ "$output" == *"not an fstx domain"* ]]
	[ ! -e "$D/plain/.fstx" ]
	run --separate-stderr "$FSTX" recover "$D/plain" --json
	[ "$status" -eq 0 ]
	envelope "$output" clean
	[ ! -e "$D/plain/.fstx" ]
}

@test "every example in fstx(1) runs as printed" {
	man="$BATS_TEST_DIRNAME/../man/fstx.1"
	# the .nf blocks of EXAMPLES, with the roff escapes they use undone:
	# the text a reader sees and pastes
	awk '/^\.SH EXAMPLES/ {on=1; next} /^\.SH/ {on=0}
	     on && /^\.fi/ {nf=0} on && nf {print} on && /^\.nf/ {nf=1}' "$man" |
		sed -e "s/\\\\(aq/'/g" -e 's/\\-/-/g' -e 's/\\e/\\/g' > "$TX/ex.sh"
	grep -q 'fstx run' "$TX/ex.sh"
	if command -v mandoc >/dev/null; then
		# the same lines as mandoc renders them
		mandoc -T utf8 -O width=200 "$man" | col -b > "$TX/rendered"
		while IFS= read -r l; do
			grep -qF -- "$l" "$TX/rendered"
		done < <(sed 's/^ *//' "$TX/ex.sh")
	fi
	mkdir "$TX/bin"
	ln -s "$FSTX" "$TX/bin/fstx"
	run env PATH="$TX/bin:$PATH" bash -e -o pipefail "$TX/ex.sh"
	[ "$status" -eq 0 ]
	[[ "$output" == *'"status":"committed"'* ]]
}

# ---- JSON input -----------------------------------------------------------

@test "JSON input: every op, from an array and from JSON lines" {
	setfattr -n user.t -v 1 "$D/a" 2>/dev/null || skip "no user xattrs here"
	mkdir "$TX/src" && printf 'imported\n' > "$TX/src/i" && printf 'copied\n' > "$TX/c"
	cat > "$TX/t.json" <<J
[{"op":"option","name":"reserve","data_bytes":65536,"metadata_ops":64},
 {"op":"mkdir","path":"d","mode":"0700"},
 {"op":"open","idx":0,"path":"d/f","flags":["O_RDWR","O_CREAT"],"mode":420},
 {"op":"pwrite","idx":0,"data":"aGVsbG8gd29ybGQ=","encoding":"base64","offset":0},
 {"op":"open","idx":1,"path":"d/g","flags":"O_RDWR|O_CREAT|O_EXCL"},
 {"op":"clonerange","dstidx":1,"srcidx":0,"srcoff":0,"len":5,"dstoff":0},
 {"op":"close","idx":0},
 {"op":"close","idx":1},
 {"op":"truncate","path":"d/f","size":5},
 {"op":"link","oldpath":"d/f","newpath":"d/f2"},
 {"op":"setxattr","path":"d/f","name":"user.k","data":"00ff","encoding":"hex","flag":"create"},
 {"op":"removexattr","path":"a","name":"user.t"},
 {"op":"rename","oldpath":"old","newpath":"d/old","flag":"noreplace"},
 {"op":"symlink","target":"f","linkpath":"d/l"},
 {"op":"unlink","path":"d/f2"},
 {"op":"mkdir","path":"e"},
 {"op":"rmdir","path":"e"},
 {"op":"assert-absent","path":"nothere"},
 {"op":"assert-exists","path":"a"},
 {"op":"assert-data","path":"a","data":"alpha\n"},
 {"op":"assert-xattr","path":"a","name":"user.t","data":"1"},
 {"op":"write","path":"w","data":"a \"quoted\" # not a comment\nline\u0000nul","mode":"0600"},
 {"op":"replace","path":"a","data":"ALPHA"},
 {"op":"copy-in","src":"c","dst":"d/c"},
 {"op":"import","srcdir":"src","dstdir":"imp"},
 {"op":"unlink","path":"nothere","ignore":true},
 {"op":"unlink","path":"nothere2","fail_on":["ne"],"value":-2}]
J
	run --separate-stderr "$FSTX" run "$D" --input json "$TX/t.json" --json
	[ "$status" -eq 0 ]
	envelope "$output" committed
	[ "$(cat "$D/d/f")" = hello ]
	[ "$(head -c 5 "$D/d/g")" = hello ]
	[ "$(stat -c %a "$D/d")" = 700 ]
	[ "$(getfattr --only-values -n user.k "$D/d/f" | od -An -tx1 | tr -d ' ')" = 00ff ]
	! getfattr -n user.t "$D/a" 2>/dev/null
	[ "$(cat "$D/d/old")" = old ]
	[ "$(readlink "$D/d/l")" = f ]
	[ ! -e "$D/d/f2" ] && [ ! -e "$D/e" ]
	[ "$(od -An -c "$D/w" | tr -s ' ')" = "$(printf 'a "quoted" # not a comment\nline\0nul' | od -An -c | tr -s ' ')" ]
	[ "$(stat -c %a "$D/w")" = 600 ]
	[ "$(cat "$D/a")" = ALPHA ]
	[ "$(cat "$D/d/c")" = copied ]
	[ "$(cat "$D/imp/i")" = imported ]
	# the same as JSON lines, with a blank line, replaces a again
	printf '{"op":"write","path":"a","data":"one"}\n\n{"op":"option","name":"wal"}\n' |
		"$FSTX" run -q "$D" --input json
	[ "$(cat "$D/a")" = one ]
}

@test "JSON input: errors name the element; nothing changed" {
	before=$(snap)
	jerr() {
		run --separate-stderr "$FSTX" run "$D" --input json --json - <<<"$1"
		[ "$status" -eq 2 ] && envelope "$output" invalid &&
			jq -e --arg m "$2" '.message | contains($m)' <<<"$output" >/dev/null
	}
	jerr '[{"op":"unlink","path":"old"},{"op":"pwrit","idx":0}]' 'element 1: unknown op "pwrit"'
	jerr '[{"op":"unlink","path":"old"},{"op":"pwrite","idx":0,"data":"x"}]' 'element 1 ("op":"pwrite"): missing "offset"'
	jerr '[{"op":"unlink","path":"old","paht":"x"}]' 'element 0 ("op":"unlink"): unknown field "paht"'
	jerr '[{"op":"unlink","path":1}]' '"path" must be a string'
	jerr '[{"op":"write","path":"x","data":"!!","encoding":"base64"}]' 'not valid base64'
	jerr '[{"op":"write","path":"x","data":"abc","encoding":"hex"}]' 'not valid hex'
	jerr '[{"op":"write","path":"x","data":"a","encoding":"rot13"}]' 'unknown encoding "rot13"'
	jerr '[{"op":"open","idx":0,"path":"f","flags":"O_WRONLY|O_CRAT"}]' 'element 0 ("op":"open"): '
	jerr '[{"op":"open","idx":0,"path":"f","flags":"O_WRONLY; rm"}]' '"flags"'
	jerr '[{"op":"mkdir","path":"f","mode":"0x9"}]' '"mode"'
	jerr '[{"op":"rename","oldpath":"a","newpath":"b","flag":"sideways"}]' '"flag" must be'
	jerr '[{"op":"unlink","path":"a","fail_on":"ne"}]' 'needs an integer "value"'
	jerr '[{"op":"option","name":"fast"}]' '"name" must be'
	jerr '[{"path":"a"}]' 'no "op"'
	jerr '[17]' 'expected an object'
	jerr $'{"op":"unlink","path":"old"}\n{"op":"frob"}' 'element 1: unknown op "frob"'
	jq -e '.element == 1 and .line == 2' <<<"$output"
	jerr $'[{"op":"unlink",\n "path":"old" x}]' 'line 2, column'
	jq -e '.line == 2 and (.column|type=="number")' <<<"$output"
	jerr '[{"op":"unlink","path":"a\nb"},{"op":"bad"}]' 'element 1'
	[ "$(snap)" = "$before" ]
	# a failing op names its element
	run --separate-stderr "$FSTX" run "$D" --input json --json - <<<'[{"op":"unlink","path":"old"},{"op":"rmdir","path":"nothere"}]'
	[ "$status" -eq 1 ]
	envelope "$output" rolled_back
	jq -e '.element == 1 and .op.name == "rmdir" and .results == [0,-2]
		and (.message | startswith("element 1: rmdir"))' <<<"$output"
	[ "$(snap)" = "$before" ]
}

@test "JSON input: a string cannot break out of its token or line" {
	# every byte 1..255 in a name and in data: one op each, written as is
	name=$(python3 -c 'import json; print(json.dumps({"op":"write","path":"n" + "".join(chr(c) for c in range(1,128) if chr(c) not in "/") + "\u00e9","data":"".join(chr(c) for c in range(0,256))}))')
	run --separate-stderr "$FSTX" run "$D" --input json --json - <<<"[$name]"
	[ "$status" -eq 0 ]
	envelope "$output" committed
	[ "$(ls "$D" | grep -c '^n')" -eq 1 ]
}

@test "read: a CMD that cannot be started is status error, exit 126" {
	command -v strace >/dev/null || skip "strace missing"
	# no process can be made: clone fails (clone3 says ENOSYS, so glibc
	# falls back to clone)
	run --separate-stderr env ASAN_OPTIONS=detect_leaks=0 strace -f -o /dev/null \
		-e trace=clone,clone3 -e inject=clone:error=EAGAIN -e inject=clone3:error=ENOSYS \
		"$FSTX" read "$D" --json -- true
	[ "$status" -eq 126 ]
	envelope "$output" error
	[ "$(jq -r .errno <<<"$output")" = EAGAIN ]
}

@test "every status value fstx(1) documents is produced and checked by a test here" {
	man="$BATS_TEST_DIRNAME/../man/fstx.1"
	statuses=$(awk '/^\.SH JSON OUTPUT/ {on=1; next} /^\.SH/ {on=0}
		on && /^\.BR [a-z_]+ " \(/ {print $2}' "$man")
	[ "$(wc -w <<<"$statuses")" -ge 14 ]
	for s in $statuses; do
		grep -q "envelope \"\$output\" $s\$" "$BATS_TEST_FILENAME" ||
			{ echo "status $s: no test"; return 1; }
	done
}

# ---- task-level ops ---------------------------------------------------------

@test "run: task-level ops write, replace, copy-in and a site publish in two lines" {
	mkdir -p "$BATS_TEST_TMPDIR/site/css" "$D/releases"
	echo hi > "$BATS_TEST_TMPDIR/site/index.html"
	echo 'body{}' > "$BATS_TEST_TMPDIR/site/css/a.css"
	ln -s index.html "$BATS_TEST_TMPDIR/site/home.html"
	printf 'import site releases/v2\nsymlink releases/v2 current replace\n' > "$BATS_TEST_TMPDIR/pub.tx"
	run "$FSTX" run "$D" "$BATS_TEST_TMPDIR/pub.tx"
	[ "$status" -eq 0 ]
	[ "$(readlink "$D/current")" = releases/v2 ]
	[ "$(cat "$D/current/css/a.css")" = 'body{}' ]
	[ "$(readlink "$D/releases/v2/home.html")" = index.html ]
	echo conf > "$BATS_TEST_TMPDIR/src.conf"
	printf 'write a.conf "a=1\\n" 0600\nreplace b.conf "b=2\\n"\ncopy-in src.conf c.conf\n' > "$BATS_TEST_TMPDIR/t.tx"
	run "$FSTX" run "$D" "$BATS_TEST_TMPDIR/t.tx"
	[ "$status" -eq 0 ]
	[ "$(cat "$D/a.conf")" = a=1 ]
	[ "$(stat -c %a "$D/a.conf")" = 600 ]
	[ "$(cat "$D/b.conf")" = b=2 ]
	[ "$(cat "$D/c.conf")" = conf ]
	# a later failing op rolls the task ops back too
	printf 'replace a.conf "changed\\n"\nunlink no-such-file\n' > "$BATS_TEST_TMPDIR/f.tx"
	run "$FSTX" run "$D" "$BATS_TEST_TMPDIR/f.tx"
	[ "$status" -eq 1 ]
	[ "$(cat "$D/a.conf")" = a=1 ]
	[ -z "$(ls -A "$D" | grep fstx-tmp)" ]
}
