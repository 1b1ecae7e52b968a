#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli.sh FSTX DIR - the same transaction with the command-line tool.
set -euo pipefail
FSTX=$1 DIR=$2
"$FSTX" run "$DIR" - <<'T'
open 0 obj.new O_WRONLY|O_CREAT|O_TRUNC
pwrite 0 "object contents, version 2\n" 0
close 0
setxattr obj.new user.version "2"
rename obj.new obj
T
