# SPDX-License-Identifier: MIT
"""kill -9 of a process in the middle of a transaction, or inside a read
section: afterwards recover() and the next transaction see the tree exactly
as before or exactly as after, never torn, and nobody waits for the dead."""
from __future__ import annotations

import fcntl
import os
import shutil
import signal
from pathlib import Path
from typing import Dict

import pytest

import fstx
from conftest import Entry, run_py, snapshot

BIG = 32 << 20

CHILD = r"""
import os, sys
import fstx
root = sys.argv[1]
with fstx.Domain(root) as d:
    tx = d.transaction()
    with tx.open("big", os.O_WRONLY) as f:      # a huge pwrite over old data
        f.write(b"N" * (32 << 20))
    with tx.open("small", os.O_WRONLY | os.O_TRUNC) as f:
        f.write(b"after\n")
    tx.mkdir("dir/new")
    tx.rename("dir/a", "dir/new/a")
    tx.unlink("dir/b")
    tx.rename("dir/new", "dir/newer")
    tx.rename("x", "y", exchange=True)  # an exchange: the undo way
    tx.symlink("dir/newer", "link")
    sys.stdout.write("committing\n")
    sys.stdout.flush()
    tx.commit()
    sys.stdout.write("committed\n")
    sys.stdout.flush()
"""


def make_tree(root: Path) -> None:
    (root / "dir").mkdir()
    (root / "big").write_bytes(b"O" * BIG)
    (root / "small").write_bytes(b"before\n")
    (root / "dir/a").write_bytes(b"a")
    (root / "dir/b").write_bytes(b"b")
    (root / "x").write_bytes(b"x")
    (root / "y").mkdir()


def journal_size(root: Path) -> int:
    try:
        return os.stat(root / ".fstx/journal").st_size
    except FileNotFoundError:
        return 0


def has_mark(root: Path) -> bool:
    try:
        return any(n.startswith("step.") for n in os.listdir(root / ".fstx"))
    except FileNotFoundError:
        return False


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, object]:
    """The tree before the transaction, and after it has run whole."""
    base = os.environ.get("FSTX_TEST_DIR")
    ref = Path(base) / f"ref-{os.getpid()}" if base else \
        tmp_path_factory.mktemp("ref")
    ref.mkdir(exist_ok=True)
    make_tree(ref)
    with fstx.Domain(ref):
        pass
    before = snapshot(ref)
    p = run_py(CHILD, str(ref))
    out, _ = p.communicate()
    assert p.returncode == 0 and out == b"committing\ncommitted\n"
    after = snapshot(ref)
    shutil.rmtree(ref)
    assert before != after
    return {"before": before, "after": after}


def same(a: Dict[str, Entry], b: object) -> bool:
    return a == b


@pytest.mark.parametrize("point", ["at-commit-call", "journal-hot",
                                   "progress-mark", "journal-cleared",
                                   "at-commit-call-next", "journal-hot-next",
                                   "progress-mark-next"])
def test_kill_mid_commit(root: Path, states: Dict[str, object],
                         point: str) -> None:
    make_tree(root)
    with fstx.Domain(root):
        pass
    assert same(snapshot(root), states["before"])
    p = run_py(CHILD, str(root))
    assert p.stdout is not None
    assert p.stdout.readline() == b"committing\n"
    # Wait (without a time limit) for the chosen moment, or for the child
    # to finish first: either way the kill lands in or after the commit.
    seen_hot = False
    while p.poll() is None:
        if point.startswith("journal-cleared"):
            if journal_size(root) > 0:
                seen_hot = True
            elif seen_hot:
                break
        if point.startswith("at-commit-call"):
            break
        if point.startswith("journal-hot") and journal_size(root) > 0:
            break
        if point.startswith("progress-mark") and has_mark(root):
            break
    if p.poll() is None:  # else it finished first: the kill lands after
        os.kill(p.pid, signal.SIGKILL)
    p.wait()
    hot = journal_size(root) > 0
    with fstx.Domain(root) as d:
        if point.endswith("-next"):
            # the next transaction rolls a hot journal back first
            with d.transaction() as tx:
                tx.assert_exists("small")
        else:
            recovered = d.recover()
            assert isinstance(recovered, bool)
            if hot:
                assert recovered
        st = d.status()
        assert not st.hot and not st.wedged
        now = snapshot(root)
        assert same(now, states["before"]) or same(now, states["after"]), \
            "torn: neither before nor after"
        assert d.recover() is False  # nothing left to do


READER = r"""
import sys
import fstx
with fstx.Domain(sys.argv[1]) as d, d.read_section():
    sys.stdout.write("reading\n")
    sys.stdout.flush()
    sys.stdin.read()   # until killed
"""


def test_kill_inside_read_section(root: Path) -> None:
    (root / "f").write_bytes(b"1")
    with fstx.Domain(root):
        pass
    p = run_py(READER, str(root))
    assert p.stdout is not None
    assert p.stdout.readline() == b"reading\n"
    with open(root / ".fstx/lock", "rb") as lk:
        # the reader's shared lock keeps writers out ...
        with pytest.raises(BlockingIOError):
            fcntl.flock(lk, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.kill(p.pid, signal.SIGSTOP)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        # ... and dies with it
        fcntl.flock(lk, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(lk, fcntl.LOCK_UN)
    with fstx.Domain(root) as d:
        with d.transaction() as tx:
            tx.assert_data("f", b"1")
            tx.truncate("f", 0)
        assert d.recover() is False
    assert (root / "f").read_bytes() == b""
