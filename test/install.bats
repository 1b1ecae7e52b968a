#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# install.bats - make install into a DESTDIR: the files, the shared
# library's SONAME and exports, pkg-config, a program built against the
# installed copy, the man pages, and make uninstall.
# FSTX_BUILD names the build directory (default build).

setup_file() {
	export ROOT="$(cd "$BATS_TEST_DIRNAME/.." && pwd)"
	export B="${FSTX_BUILD:-build}"
	export DEST="$(mktemp -d /tmp/fstx-destdir-XXXXXX)"
	export P="$DEST/usr"
	make -C "$ROOT" --no-print-directory -s B="$B" PREFIX=/usr DESTDIR="$DEST" install >&3 2>&1
}

teardown_file() {
	rm -rf "$DEST"
}

setup() {
	W="$(mktemp -d /tmp/fstx-inst-XXXXXX)"
}

teardown() {
	rm -rf "$W"
}

# pkg-config against the DESTDIR copy: paths are prefixed with DEST.
pc() {
	PKG_CONFIG_LIBDIR="$P/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$DEST" \
		PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 pkg-config "$@"
}

@test "install puts every file under PREFIX in DESTDIR" {
	for f in bin/fstx lib/libfstx.a lib/libfstx.so lib/libfstx.so.0 lib/libfstx.so.0.1.0 \
		lib/pkgconfig/fstx.pc include/fstx.h include/fstx/btrfs_usertrans.h \
		share/man/man1/fstx.1 share/man/man5/fstx-tx.5 share/man/man7/fstx.7 \
		share/man/man3/fstx.3 share/man/man3/fstx_usertrans.3 \
		share/man/man3/fstx_tx_commit.3; do
		[ -e "$P/$f" ] || { echo "missing $f"; return 1; }
	done
	[ "$(readlink "$P/lib/libfstx.so")" = libfstx.so.0 ]
	[ -x "$P/bin/fstx" ]
	run "$P/bin/fstx" --version
	[ "$status" -eq 0 ]
	[ "$output" = "fstx 0.1.0" ]
	# nothing outside PREFIX
	[ "$(ls "$DEST")" = usr ]
}

@test "the shared library has SONAME libfstx.so.0 and exports only fstx_ symbols" {
	run readelf -d "$P/lib/libfstx.so.0.1.0"
	[[ "$output" == *"Library soname: [libfstx.so.0]"* ]]
	output=$(nm -D --defined-only "$P/lib/libfstx.so.0.1.0" |
		awk '$2 ~ /^[TDBRW]$/ { sub(/@.*/, "", $3); print $3 }')
	[ -n "$output" ]
	bad=$(printf '%s\n' "$output" | grep -v '^fstx_' || true)
	[ -z "$bad" ] || { echo "exported: $bad"; return 1; }
	# every public function of the header is exported
	for fn in $(sed -n 's/^[a-z].* \**\(fstx_[a-z_]*\)(.*/\1/p' "$ROOT/include/fstx.h"); do
		printf '%s\n' "$output" | grep -qx "$fn" || { echo "not exported: $fn"; return 1; }
	done
}

@test "pkg-config reports the installed paths and version" {
	run pc --modversion fstx
	[ "$status" -eq 0 ]
	[ "$output" = 0.1.0 ]
	run pc --cflags fstx
	[ "$(echo $output)" = "-I$P/include" ]
	run pc --libs fstx
	[ "$(echo $output)" = "-L$P/lib -lfstx" ]
}

@test "a program built with pkg-config against the install runs a transaction" {
	cc -Wall -Werror -o "$W/ergonomic" "$ROOT/examples/ergonomic.c" $(pc --cflags --libs fstx)
	run ldd "$W/ergonomic"
	[[ "$output" == *"libfstx.so.0 => not found"* || "$output" == *"libfstx.so.0 => $P/lib"* ]]
	mkdir "$W/d"
	printf 'version 1\n' > "$W/d/obj"
	LD_LIBRARY_PATH="$P/lib" run "$W/ergonomic" "$W/d"
	[ "$status" -eq 0 ]
	[ "$(cat "$W/d/obj")" = "object contents, version 2" ]
	[ ! -e "$W/d/obj.new" ]
}

@test "the interactive example builds against the install and runs (read-your-writes)" {
	cc -Wall -Werror -o "$W/interactive" "$ROOT/examples/interactive.c" $(pc --cflags --libs fstx)
	mkdir "$W/d"
	printf 'version 1\n' > "$W/d/obj"
	LD_LIBRARY_PATH="$P/lib" run "$W/interactive" "$W/d"
	[ "$status" -eq 0 ]
	[[ "$output" == "committed after 0 retries" ]]
	[ "$(cat "$W/d/obj")" = "object contents, version 2" ]
	# run again: it reads version 2 and changes nothing
	LD_LIBRARY_PATH="$P/lib" run "$W/interactive" "$W/d"
	[ "$status" -eq 0 ]
	[ "$(cat "$W/d/obj")" = "object contents, version 2" ]
}

@test "the RFC-ABI example builds against the installed header and static library" {
	cc -Wall -Werror -static-libgcc -o "$W/seed" "$ROOT/examples/seed_usertrans.c" \
		$(pc --cflags fstx) "$P/lib/libfstx.a"
	run ldd "$W/seed"
	[[ "$output" != *libfstx* ]]
	mkdir "$W/d"
	printf 'version 1\n' > "$W/d/obj"
	run "$W/seed" "$W/d"
	[ "$status" -eq 0 ]
	[ "$(cat "$W/d/obj")" = "object contents, version 2" ]
}

@test "every installed man page is lint-clean and every function has a page" {
	cd "$P/share/man"
	for m in man*/*; do
		run mandoc -Tlint -W warning "$m"
		[ "$status" -eq 0 ] || { echo "$m: $output"; return 1; }
		[ -z "$output" ] || { echo "$m: $output"; return 1; }
	done
	for fn in $(sed -n 's/^[a-z].* \**\(fstx_[a-z_]*\)(.*/\1/p' "$ROOT/include/fstx.h"); do
		[ -e "man3/$fn.3" ] || { echo "no page for $fn"; return 1; }
		run mandoc -Tascii "man3/$fn.3"
		[[ "$output" == *"$fn"* ]] || { echo "$fn.3 does not describe $fn"; return 1; }
	done
}

@test "make uninstall removes everything install put there" {
	make -C "$ROOT" --no-print-directory -s B="$B" PREFIX=/usr DESTDIR="$DEST" uninstall
	run find "$DEST" -not -type d
	[ "$status" -eq 0 ]
	[ -z "$output" ] || { echo "left: $output"; return 1; }
	# and install again works (for the other tests' teardown order)
	make -C "$ROOT" --no-print-directory -s B="$B" PREFIX=/usr DESTDIR="$DEST" install
}

@test "make install PREFIX=\$HOME/.local works for a user without root" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to act as another user"
	command -v setpriv >/dev/null || skip "setpriv missing"
	git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 || skip "not a git checkout"
	chmod 755 "$W"
	mkdir -p "$W/src" "$W/home"
	git -C "$ROOT" ls-files -z | tar -C "$ROOT" --null -T - -cf - | tar -C "$W/src" -xf -
	chown -R 65534:65534 "$W/src" "$W/home"
	run setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$W/home" \
		make -C "$W/src" -s -j2 install PREFIX="$W/home/.local"
	[ "$status" -eq 0 ]
	[ "$(stat -c %u "$W/home/.local/bin/fstx")" -eq 65534 ]
	run env LD_LIBRARY_PATH="$W/home/.local/lib" "$W/home/.local/bin/fstx" --version
	[ "$status" -eq 0 ]
	[[ "$output" == *"$(sed -n 's/^#define FSTX_VERSION_STRING "\(.*\)"/\1/p' "$ROOT/include/fstx.h")"* ]]
	[ -f "$W/home/.local/lib/pkgconfig/fstx.pc" ]
	[ -f "$W/home/.local/share/man/man1/fstx.1" ]
}
