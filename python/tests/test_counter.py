# SPDX-License-Identifier: MIT
"""Two processes increment one counter file, each read-modify-write
guarded by assert_data (or an interactive read) and retried on Conflict by
Domain.run(): no increment is lost."""
from __future__ import annotations

import os
from pathlib import Path

import fstx
from conftest import run_py

N = int(os.environ.get("FSTX_PY_COUNTER", "100"))

WORKER = r"""
import os, sys
import fstx
root, style, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
attempts = 0

def incr(tx):
    global attempts
    attempts += 1
    if style == "assert":
        with d.read_section():             # one committed state
            with open(os.path.join(root, "counter"), "rb") as f:
                old = f.read()
        tx.assert_data("counter", old)     # still so at commit, or Conflict
    else:
        old = tx.read("counter")           # adds the same compare op
    with tx.open("counter", os.O_WRONLY | os.O_TRUNC) as f:
        f.write(b"%d\n" % (int(old) + 1))

with fstx.Domain(root) as d:
    sys.stdin.readline()                   # start together
    for _ in range(n):
        d.run(incr, retries=None)
print(attempts)
"""


def test_two_processes_increment(root: Path) -> None:
    (root / "counter").write_bytes(b"0\n")
    with fstx.Domain(root):
        pass
    procs = [run_py(WORKER, str(root), style, str(N))
             for style in ("assert", "read")]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(b"go\n")
        p.stdin.flush()
    attempts = []
    for p in procs:
        out, _ = p.communicate()
        assert p.returncode == 0
        attempts.append(int(out))
    assert (root / "counter").read_bytes() == b"%d\n" % (2 * N)
    assert all(a >= N for a in attempts)
