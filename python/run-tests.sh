#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-tests.sh LIBRARY - install the Python package into a fresh venv, offline,
# type-check it (mypy --strict) and run its pytest suite against the installed
# copy, with FSTX_LIBRARY=LIBRARY (e.g. build/libfstx.so.0).  Scratch files go
# to $FSTX_TEST_DIR (default: a new temporary directory, removed at exit);
# the domains the tests make live there too, so it picks the filesystem.
# Exits non-zero if anything fails.
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 LIBRARY   (e.g. $0 build/libfstx.so.0)" >&2
	exit 2
fi
LIB=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${FSTX_PYTHON:-/usr/bin/python3}
[ -e "$LIB" ] || { echo "$0: $LIB: no such library" >&2; exit 2; }

if [ -n "${FSTX_TEST_DIR:-}" ]; then
	mkdir -p "$FSTX_TEST_DIR"
	WORK=$(mktemp -d "$FSTX_TEST_DIR/py-XXXXXX")
else
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/fstx-py-XXXXXX")
fi
trap 'rm -rf "$WORK"' EXIT

# Build from a copy so the source tree gets no build/ or egg-info.
mkdir "$WORK/src"
cp -r "$HERE/pyproject.toml" "$HERE/README.md" "$HERE/fstx" "$WORK/src/"
"$PY" -m venv --system-site-packages "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet --no-index --no-build-isolation \
	--disable-pip-version-check "$WORK/src"

echo "mypy --strict fstx tests:"
MYPYPATH=$HERE mypy --strict --cache-dir "$WORK/mypy-cache" "$HERE/fstx" "$HERE/tests"
SITE=$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

# A library built with ASan (make SAN=1) loads only after its runtime:
# preload it, and leave leak detection to the C suites (the interpreter
# keeps memory until exit on purpose).
PRELOAD=
if grep -q __asan_init "$LIB"; then
	PRELOAD=$(${CC:-cc} -print-file-name=libasan.so)
	export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi

# -P and the cd: nothing from the source tree shadows the installed package.
cd "$WORK"
export FSTX_LIBRARY=$LIB FSTX_TEST_DIR=$WORK FSTX_EXPECT_INSTALLED=$SITE
export PYTHONDONTWRITEBYTECODE=1
LD_PRELOAD=$PRELOAD "$WORK/venv/bin/python" -P -m pytest -p no:cacheprovider -rfEs "$HERE/tests"
