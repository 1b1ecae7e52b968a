# SPDX-License-Identifier: MIT
"""A failed transaction leaves the tree byte-identical: names, bytes,
modes, xattrs, symlinks, link counts."""
from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Optional

import pytest

import fstx
from conftest import snapshot, xattrs_work


def make_tree(root: Path) -> None:
    (root / "etc/app").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "empty").mkdir(mode=0o700)
    (root / "etc/app/main.conf").write_bytes(b"port=80\n" * 100)
    (root / "etc/app/secret").write_bytes(b"\x00\x01secret")
    os.chmod(root / "etc/app/secret", 0o600)
    (root / "data/big").write_bytes(os.urandom(256 * 1024))
    (root / "data/old").write_bytes(b"old")
    os.link(root / "data/old", root / "data/old.hard")
    os.symlink("etc/app", root / "current")
    if xattrs_work(root):
        os.setxattr(root / "etc/app/main.conf", "user.sum", b"abc")
        os.setxattr(root / "data/big", "user.gone", b"x" * 100)


def record(tx: fstx.Transaction, xattrs: bool,
           fail_at: Optional[int]) -> None:
    """Ops of every kind; with fail_at, the fail_at'th step carries a
    condition that holds once it has run, so the transaction fails there,
    after the steps before it changed the tree."""
    steps = []

    def conf(i: int) -> Optional[fstx.ConditionLike]:
        return (">=", 0) if i == fail_at else None

    def w(i: int) -> None:
        f = tx.open("etc/app/main.conf", os.O_WRONLY, fail_if=conf(i))
        f.pwrite(b"port=8080\n", 0)
        f.close()
    steps.append(w)
    steps.append(lambda i: tx.truncate("data/big", 1000, fail_if=conf(i)))
    steps.append(lambda i: tx.unlink("data/old", fail_if=conf(i)))
    steps.append(lambda i: tx.rename("etc/app/secret", "data/secret",
                                     fail_if=conf(i)))
    steps.append(lambda i: tx.mkdir("etc/new", 0o711, fail_if=conf(i)))
    steps.append(lambda i: tx.rmdir("empty", fail_if=conf(i)))
    steps.append(lambda i: tx.link("data/old.hard", "etc/new/hard",
                                   fail_if=conf(i)))
    steps.append(lambda i: tx.unlink("current", fail_if=conf(i)))
    steps.append(lambda i: tx.symlink("etc/new", "current", fail_if=conf(i)))

    def create(i: int) -> None:
        f = tx.open("etc/new/file", os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                    0o640)
        f.write(os.urandom(70000))
        f.pwrite(b"tail", 100000, fail_if=conf(i))
        f.close()
    steps.append(create)
    if xattrs:
        steps.append(lambda i: tx.setxattr("etc/app/main.conf", "user.sum",
                                           b"def", fail_if=conf(i)))
        steps.append(lambda i: tx.removexattr("data/big", "user.gone",
                                              fail_if=conf(i)))
        steps.append(lambda i: tx.setxattr("data/secret", "user.new", b"1",
                                           fail_if=conf(i)))
    steps.append(lambda i: tx.rename("etc/app", "etc/app.old",
                                     fail_if=conf(i)))
    for i, s in enumerate(steps):
        s(i)
    assert fail_at is None or fail_at < len(steps)


def test_commit_changes_the_snapshot(dom: fstx.Domain, root: Path) -> None:
    """The same ops without a failure do change what snapshot() sees."""
    make_tree(root)
    before = snapshot(root)
    with dom.transaction() as tx:
        record(tx, xattrs_work(root), None)
    after = snapshot(root)
    assert after != before
    assert after["current"][2] == b"etc/new"
    assert after["etc/new/file"][2][100000:] == b"tail"
    assert "data/old" not in after and "empty" not in after


@pytest.mark.parametrize("fail_at", [0, 3, 6, 9, 13])
def test_rollback_byte_identical(dom: fstx.Domain, root: Path,
                                 fail_at: int) -> None:
    make_tree(root)
    xattrs = xattrs_work(root)
    if not xattrs and fail_at > 10:
        fail_at = 10
    before = snapshot(root)
    with pytest.raises(fstx.Error) as e:
        with dom.transaction() as tx:
            record(tx, xattrs, fail_at)
    assert e.value.op_index is not None
    assert snapshot(root) == before
    assert not dom.status().hot


def test_rollback_lazy_and_crash_only(dom: fstx.Domain, root: Path) -> None:
    make_tree(root)
    before = snapshot(root)
    for kw in ({"crash_only": True}, {"lazy": True}, {"wal": True}):
        with pytest.raises(fstx.Error):
            with dom.transaction(**kw) as tx:
                record(tx, xattrs_work(root), 9)
        assert snapshot(root) == before


@pytest.mark.parametrize("copy", [True, False])
def test_buffers_need_not_live(dom: fstx.Domain, root: Path,
                               monkeypatch: pytest.MonkeyPatch,
                               copy: bool) -> None:
    """With FSTX_UT_COPY the library copies builder buffers and Python keeps
    none; without it (copy=False: as with an older library) the transaction
    keeps them.  Either way what is written is what was passed, though
    Python dropped its own references and reused the memory."""
    if not copy:
        monkeypatch.setattr(fstx._domain, "_copy_ok", False)
    tx = dom.transaction()
    if copy and not tx._copy:
        pytest.skip("library without FSTX_UT_COPY")
    f = tx.open("f")
    for i in range(64):
        f.write(bytes([i]) * 4096)
    xattrs = xattrs_work(root)
    if xattrs:
        tx.setxattr("f", "user.v", bytearray(b"value"))
    tx.assert_data("g", b"whatever")
    assert len(tx._keep) == (0 if copy else 64 + xattrs + 1)
    gc.collect()
    junk = [os.urandom(4096) for _ in range(256)]
    with pytest.raises(fstx.Conflict):  # g does not exist
        tx.commit()
    assert not (root / "f").exists()
    (root / "g").write_bytes(b"whatever")
    tx = dom.transaction()
    f = tx.open("f")
    for i in range(64):
        f.write(bytes([i]) * 4096)
    if xattrs:
        tx.setxattr("f", "user.v", bytearray(b"value"))
    tx.assert_data("g", b"whatever")
    gc.collect()
    junk += [os.urandom(4096) for _ in range(256)]
    tx.commit()
    want = b"".join(bytes([i]) * 4096 for i in range(64))
    assert (root / "f").read_bytes() == want
    if xattrs:
        assert os.getxattr(root / "f", "user.v") == b"value"
    del junk
