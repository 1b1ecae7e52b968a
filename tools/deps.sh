#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# deps.sh - make sure the build and test dependencies are installed.
# As root, installs what is missing with apt-get (idempotent); otherwise
# prints the exact command to run.
set -euo pipefail

pkgs=(build-essential libcmocka-dev bats attr e2fsprogs xfsprogs btrfs-progs
      util-linux strace mandoc pkgconf clang libclang-rt-14-dev cppcheck
      libsqlite3-dev gnuplot-nox libjansson-dev jq fuse3 libfuse3-dev
      python3-pytest mypy python3-venv python3-setuptools python3-pip)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
	echo "deps: installing ${missing[*]}"
	if [ -z "${FSTX_APT_UPDATED:-}" ]; then
		apt-get update -qq
		export FSTX_APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
else
	echo "deps: missing ${missing[*]}; run:" >&2
	echo "  sudo apt-get install -y ${missing[*]}" >&2
	exit 1
fi
