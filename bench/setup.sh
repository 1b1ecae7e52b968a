#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# setup.sh - what the benchmark needs beyond the build: SQLite (headers and
# library, the baseline) and gnuplot (the plots).  Idempotent; apt only when
# something is missing.
set -eu
need=()
[ -e /usr/include/sqlite3.h ] || need+=(libsqlite3-dev)
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
for t in mkfs.ext4:e2fsprogs mkfs.xfs:xfsprogs mkfs.btrfs:btrfs-progs; do
	command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "bench/setup.sh: missing ${need[*]}; install them (as root: apt-get install ${need[*]})" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
[ -n "${FSTX_APT_UPDATED:-}" ] || apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
