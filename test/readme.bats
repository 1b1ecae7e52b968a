#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# readme.bats - the README's examples run verbatim, and the project's text
# checks (README length, wording, links).
#
# Convention: the README's FIRST fenced block opened with ```sh, ```shell
# or ```bash is its shell example, and its FIRST block opened with ```c is
# its C example.  Both are extracted byte for byte and run in an empty
# directory; keep them self-contained (the shell example may call `fstx`
# from PATH, the C example includes <fstx.h>).  Other shell or C snippets
# in the README go in plain ``` blocks or after these.
#
# FSTX_BIN: the fstx binary (default build/fstx); FSTX_BUILD: the build
# directory holding libfstx.a (default build); both relative to the
# source tree unless absolute.
bats_require_minimum_version 1.5.0

setup() {
	ROOT="$(cd "$BATS_TEST_DIRNAME/.." && pwd)"
	FSTX="${FSTX_BIN:-build/fstx}"
	[[ "$FSTX" == /* ]] || FSTX="$ROOT/$FSTX"
	BUILD="${FSTX_BUILD:-build}"
	[[ "$BUILD" == /* ]] || BUILD="$ROOT/$BUILD"
	W="$(mktemp -d "${FSTX_TEST_DIR:-/tmp}/fstx-readme-XXXXXX")"
	X="$(mktemp -d /tmp/fstx-readme-src-XXXXXX)"
}

teardown() {
	rm -rf "$W" "$X"
}

# block LANGS...: the first fenced block of README.md whose opening fence
# names one of LANGS, without its fences.
block() {
	awk -v langs=" $* " '
	!inb && /^```/ { lang = substr($0, 4); sub(/[ \t]+$/, "", lang)
	                 if (lang != "" && index(langs, " " lang " ")) { inb = 1; next } }
	inb && /^```[ \t]*$/ { exit }
	inb { print }' "$ROOT/README.md"
}

# xattr PATH NAME: the value of a user xattr, or nothing
xattr() {
	getfattr --only-values -n "$2" "$1" 2>/dev/null
}

@test "the README's shell example runs in an empty directory" {
	block sh shell bash > "$X/example.sh"
	[ -s "$X/example.sh" ]
	[ -x "$FSTX" ]
	mkdir "$X/bin"
	ln -s "$FSTX" "$X/bin/fstx"
	[ -z "$(ls -A "$W")" ]
	cd "$W"
	run -0 env PATH="$X/bin:$PATH" bash -eu "$X/example.sh"
	echo "$output"
	# the first transaction committed whole
	[ "$(readlink app/current)" = "releases/v1" ]
	[ "$(cat app/releases/v1/index.html)" = "<h1>hello</h1>" ]
	[ "$(cat app/current/app.conf)" = "port=8080" ]
	[ "$(stat -c %a app/releases/v1/app.conf)" = "600" ]
	[ "$(xattr app/releases/v1/app.conf user.sha256)" = "0123" ]
	# the second one failed with exit 1 and changed nothing
	[[ "$output" == *"exit 1: rolled back"* ]]
	[ "$(printf '%s\n' "$output" | grep -c '^port=8080$')" -ge 1 ]
	[ "$(ls -A app | sort | tr '\n' ' ')" = ".fstx current releases " ]
	[ "$(ls -A app/releases/v1 | sort | tr '\n' ' ')" = "app.conf index.html " ]
	run -0 "$FSTX" status app
}

@test "the README's C example builds and commits in an empty directory" {
	block c > "$X/example.c"
	[ -s "$X/example.c" ]
	[ -f "$BUILD/libfstx.a" ]
	cc -std=gnu11 -Wall -Werror -I"$ROOT/include" -o "$X/example" "$X/example.c" \
		"$BUILD/libfstx.a"
	[ -z "$(ls -A "$W")" ]
	cd "$W"
	run -0 "$X/example"
	[ "$(cat conf/app.conf)" = "port=8080" ]
	[ "$(stat -c %a conf/app.conf)" = "644" ]
	[ "$(xattr conf/app.conf user.version)" = "2" ]
	[ ! -e conf.new ]
	[ "$(ls -A | sort | tr '\n' ' ')" = ".fstx conf " ]
	# run again: conf exists, so the rename fails and nothing changes
	run -1 "$X/example"
	[ ! -e conf.new ]
	[ "$(ls -A conf)" = "app.conf" ]
	[ "$(cat conf/app.conf)" = "port=8080" ]
}

@test "the README is under 250 lines" {
	[ "$(wc -l < "$ROOT/README.md")" -lt 250 ]
}

# The project's text files: tracked, or new and not ignored; not the
# benchmark's data.
project_files() {
	local f
	git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do
			case $f in bench/results/*.tsv | bench/results/*.png) continue ;; esac
			[ -f "$f" ] && printf '%s\0' "$f"
		done
}

@test "no project text speaks of the development process or nicknames the RFC" {
	command -v git >/dev/null && git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 ||
		skip "not a git checkout"
	cd "$ROOT"
	# spelt so that this file does not match itself
	local words="this[ ]session|this[ ]machine|the[ ]seed|seed['’]s"
	[ -n "$(project_files | tr -d '\0' | head -c 1)" ]
	# grep exits 1 in every batch when nothing matches: xargs says 123
	run xargs -0 grep -InHiE "$words" < <(project_files)
	echo "$output"
	[ -z "$output" ]
	[ "$status" -eq 123 ]
}

@test "every local link of the README, docs/ and the changelog leads to a file" {
	cd "$ROOT"
	local missing=0 n=0 f l
	for f in README.md CHANGELOG.md docs/*.md; do
		[ -f "$f" ] || continue
		while read -r l; do
			l="${l%%#*}"
			[ -n "$l" ] || continue
			n=$((n + 1))
			[ -e "$(dirname "$f")/$l" ] || { echo "$f: missing $l"; missing=1; }
		done < <(grep -oE '\]\([^)]+\)' "$f" | sed 's/^](//; s/)$//' | grep -vE '^[a-z]+:')
	done
	[ "$n" -gt 0 ]
	[ "$missing" -eq 0 ]
}
