# SPDX-License-Identifier: MIT
"""Every op of the C API through the Python binding, conditions, durability
modes, interactive transactions, read sections, status and version."""
from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

import fstx
from conftest import snapshot, xattrs_work


def test_version() -> None:
    try:
        v = fstx.version()
    except NotImplementedError:
        pytest.skip("library without fstx_version()")
    assert v.split(".")[0].isdigit() and v.count(".") == 2
    assert fstx.__version__.count(".") == 2


def test_status_fields(dom: fstx.Domain, root: Path) -> None:
    st = dom.status()
    assert isinstance(st, fstx.Status)
    assert st.hot is False and st.wedged is False
    assert st.journal_bytes == 0
    assert st.block_size > 0 and st.block_size % 512 == 0
    assert st.fs_type and st.fs_type.isprintable()
    assert st.xattr_user == xattrs_work(root)


def test_open_pwrite_close_explicit(dom: fstx.Domain, root: Path) -> None:
    with dom.transaction() as tx:
        f = tx.open("a", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        tx.pwrite(f.fd, b"hello", 0)
        tx.pwrite(f.fd, bytearray(b"XY"), 10)
        tx.close(f.fd)
    assert (root / "a").read_bytes() == b"hello" + b"\0" * 5 + b"XY"
    assert os.stat(root / "a").st_mode & 0o777 == 0o600
    assert tx.committed
    assert tx.results == [0, 5, 2, 0]


def test_file_handle(dom: fstx.Domain, root: Path) -> None:
    (root / "b").write_bytes(b"0123456789")
    with dom.transaction() as tx:
        with tx.open("b", os.O_WRONLY) as f:
            assert f.write(b"ab") == 2
            assert f.tell() == 2
            f.seek(3, os.SEEK_CUR)
            f.write(memoryview(b"cd"))
            f.pwrite(b"Z", 9)
        assert f.closed
    assert (root / "b").read_bytes() == b"ab234cd78Z"


def test_unlink_link_mkdir_rmdir(dom: fstx.Domain, root: Path) -> None:
    (root / "old").write_bytes(b"x")
    (root / "gone").mkdir()
    with dom.transaction() as tx:
        tx.mkdir("d", 0o750)
        tx.link("old", "d/hard")
        tx.unlink("old")
        tx.rmdir("gone")
    assert not (root / "old").exists() and not (root / "gone").exists()
    assert (root / "d/hard").read_bytes() == b"x"
    assert os.stat(root / "d").st_mode & 0o777 == 0o750


def test_truncate(dom: fstx.Domain, root: Path) -> None:
    (root / "t").write_bytes(b"abcdef")
    with dom.transaction() as tx:
        tx.truncate("t", 2)
    assert (root / "t").read_bytes() == b"ab"


def test_xattrs(dom: fstx.Domain, root: Path) -> None:
    if not xattrs_work(root):
        pytest.skip("no user.* xattrs on this filesystem")
    (root / "x").write_bytes(b"")
    os.setxattr(root / "x", "user.old", b"1")
    with dom.transaction() as tx:
        tx.setxattr("x", "user.new", b"v\0bin")
        tx.setxattr("x", "user.text", "naïve")
        tx.removexattr("x", "user.old")
    assert os.getxattr(root / "x", "user.new") == b"v\0bin"
    assert os.getxattr(root / "x", "user.text") == "naïve".encode()
    assert "user.old" not in os.listxattr(root / "x")
    with pytest.raises(fstx.Error) as e:
        with dom.transaction() as tx:
            tx.setxattr("x", "user.new", b"w", os.XATTR_CREATE)
    assert e.value.errno == errno.EEXIST
    with dom.transaction() as tx:
        tx.assert_xattr("x", "user.new", b"v\0bin")
        tx.setxattr("x", "user.new", b"w", os.XATTR_REPLACE)
    assert os.getxattr(root / "x", "user.new") == b"w"


def test_rename_flags(dom: fstx.Domain, root: Path) -> None:
    (root / "new").mkdir()
    (root / "new/f").write_bytes(b"n")
    (root / "cur").mkdir()
    (root / "cur/f").write_bytes(b"c")
    (root / "a").write_bytes(b"a")
    (root / "b").write_bytes(b"b")
    with dom.transaction() as tx:
        tx.rename("new", "cur", exchange=True)
    assert (root / "cur/f").read_bytes() == b"n"
    assert (root / "new/f").read_bytes() == b"c"
    with pytest.raises(fstx.Error) as e:
        with dom.transaction() as tx:
            tx.rename("a", "b", noreplace=True)
    assert e.value.errno == errno.EEXIST
    assert e.value.filename == "a" and e.value.filename2 == "b"
    with dom.transaction() as tx:
        tx.rename("a", "b")
    assert (root / "b").read_bytes() == b"a" and not (root / "a").exists()


def test_symlink(dom: fstx.Domain, root: Path) -> None:
    with dom.transaction() as tx:
        tx.symlink("releases/v1", "current")
    assert os.readlink(root / "current") == "releases/v1"
    try:
        with dom.transaction() as tx:
            tx.symlink("releases/v2", "current", replace=True)
    except NotImplementedError:
        pytest.skip("library without fstx_tx_symlink_replace()")
    assert os.readlink(root / "current") == "releases/v2"
    with pytest.raises(fstx.Error) as e:
        with dom.transaction() as tx:
            tx.symlink("x", "current")
    assert e.value.errno == errno.EEXIST


def test_clonerange(dom: fstx.Domain, root: Path) -> None:
    (root / "src").write_bytes(b"s" * 8192)
    (root / "dst").write_bytes(b"d" * 8192)
    tx = dom.transaction()
    dst = tx.open("dst", os.O_WRONLY)
    src = tx.open("src", os.O_RDONLY)
    tx.clonerange(dst, src, 0, 4096, 4096)
    tx.close(src)
    tx.close(dst)
    tx.commit()  # FICLONERANGE, or a copy where the filesystem cannot
    assert (root / "dst").read_bytes() == b"d" * 4096 + b"s" * 4096
    assert tx.results is not None and tx.results[2] >= 0


def test_asserts_pass(dom: fstx.Domain, root: Path) -> None:
    (root / "VERSION").write_bytes(b"1\n")
    with dom.transaction() as tx:
        tx.assert_exists("VERSION")
        tx.assert_absent("nothing")
        tx.assert_data("VERSION", b"1\n")
        tx.pwrite(tx.open("VERSION", os.O_WRONLY | os.O_TRUNC), b"2\n")
    assert (root / "VERSION").read_bytes() == b"2\n"


def test_write_and_replace(dom: fstx.Domain, root: Path) -> None:
    (root / "conf").mkdir()
    (root / "conf/b.conf").write_bytes(b"old")
    os.chmod(root / "conf/b.conf", 0o600)
    ino = os.stat(root / "conf/b.conf").st_ino
    try:
        with dom.transaction() as tx:
            tx.write("conf/a.conf", b"a=2\n")
            tx.replace("conf/b.conf", b"b=2\n", mode=0o644)
    except NotImplementedError as e:
        pytest.skip(str(e))
    assert (root / "conf/a.conf").read_bytes() == b"a=2\n"
    assert (root / "conf/b.conf").read_bytes() == b"b=2\n"
    st = os.stat(root / "conf/b.conf")
    assert st.st_mode & 0o777 == 0o644
    assert st.st_ino != ino  # a new file took the name
    with dom.transaction() as tx:
        tx.write("conf/a.conf", b"x")  # whole content: shorter
        tx.replace("conf/b.conf", "b=3\n")  # mode=None: keeps 0o644
    assert (root / "conf/a.conf").read_bytes() == b"x"
    assert (root / "conf/b.conf").read_bytes() == b"b=3\n"
    assert os.stat(root / "conf/b.conf").st_mode & 0o777 == 0o644


def test_copy_in_and_import(dom: fstx.Domain, root: Path,
                            tmp_path: Path) -> None:
    src = tmp_path / "outside"
    (src / "sub").mkdir(parents=True)
    (src / "one").write_bytes(b"1")
    (src / "sub/two").write_bytes(b"22")
    try:
        with dom.transaction() as tx:
            tx.copy_in(src / "one", "copied")
            tx.import_tree(src, "imported")
    except NotImplementedError as e:
        pytest.skip(str(e))
    assert (root / "copied").read_bytes() == b"1"
    assert (root / "imported/one").read_bytes() == b"1"
    assert (root / "imported/sub/two").read_bytes() == b"22"
    assert (src / "one").read_bytes() == b"1"  # the source is untouched


def test_conditions(dom: fstx.Domain, root: Path) -> None:
    (root / "f").write_bytes(b"")
    # fail_if=NEVER: the op's failure is ignored, the rest commits
    with dom.transaction() as tx:
        tx.unlink("missing", fail_if=fstx.NEVER)
        fd = tx.open("f", os.O_WRONLY, fail_if=("<", 0))
        tx.pwrite(fd, b"abc", 0, fail_if=("!=", 3))
        tx.close(fd)
    assert tx.results is not None
    assert tx.results[0] == -errno.ENOENT and tx.results[2] == 3
    assert (root / "f").read_bytes() == b"abc"
    # a condition that holds fails the transaction at that op
    before = snapshot(root)
    with pytest.raises(fstx.Error) as e:
        with dom.transaction() as tx:
            tx.mkdir("newdir")
            fd = tx.open("f", os.O_WRONLY)
            tx.pwrite(fd, b"zz", 0, fail_if=fstx.Condition(fstx.FAIL_ON_EQ,
                                                              2))
    assert e.value.op_index == 2 and e.value.op_name == "pwrite"
    assert snapshot(root) == before


def test_strict_unless_conditioned(dom: fstx.Domain, root: Path) -> None:
    """A condition on one op leaves every other op strict."""
    before = snapshot(root)
    with pytest.raises(fstx.Error) as e:
        with dom.transaction() as tx:
            tx.unlink("missing1", fail_if=fstx.NEVER)
            tx.mkdir("d")
            tx.unlink("missing2")
    assert e.value.errno == errno.ENOENT and e.value.op_index == 2
    assert snapshot(root) == before


@pytest.mark.parametrize("mode", ["durable", "crash_only", "lazy", "wal"])
def test_durability_modes(dom: fstx.Domain, root: Path, mode: str) -> None:
    (root / "f").write_bytes(b"aaaa")
    with dom.transaction(**{mode: True}) as tx:
        f = tx.open("f", os.O_WRONLY)
        f.write(b"bb")
        f.close()
    with dom.read_section() as r:  # flushes a lazy one
        assert r == root
        assert (root / "f").read_bytes() == b"bbaa"
    dom.sync()
    assert (root / "f").read_bytes() == b"bbaa"


def test_lazy_then_sync(dom: fstx.Domain, root: Path) -> None:
    (root / "f").write_bytes(b"1")
    with dom.transaction(lazy=True) as tx:
        tx.pwrite(tx.open("f", os.O_WRONLY), b"2")
    dom.sync()
    assert (root / "f").read_bytes() == b"2"


def test_bad_durability_combinations(dom: fstx.Domain) -> None:
    with pytest.raises(fstx.Invalid):
        dom.transaction(crash_only=True, lazy=True)
    with pytest.raises(fstx.Invalid):
        dom.transaction(durable=True, crash_only=True)
    with pytest.raises(fstx.Invalid):
        dom.begin(durable=False)


def test_reserve_and_num_ops(dom: fstx.Domain, root: Path) -> None:
    tx = dom.transaction()
    tx.reserve(1 << 20, 10)
    tx.mkdir("a")
    tx.mkdir("a/b")
    assert tx.num_ops == 2
    tx.commit()
    assert (root / "a/b").is_dir()
    with pytest.raises(ValueError):
        tx.mkdir("c")  # finished


def test_exception_commits_nothing(dom: fstx.Domain, root: Path) -> None:
    before = snapshot(root)
    with pytest.raises(KeyError):
        with dom.transaction() as tx:
            tx.mkdir("a")
            tx.pwrite(tx.open("b"), b"x")
            raise KeyError("boom")
    assert tx.finished and not tx.committed
    assert snapshot(root) == before


def test_interactive_read_your_writes(dom: fstx.Domain, root: Path) -> None:
    (root / "obj").write_bytes(b"version 1\n")
    with dom.begin(lease=60) as tx:
        assert tx.read("obj") == b"version 1\n"
        assert tx.read("obj", 4, 3) == b"sion"
        assert tx.stat("obj").size == 10 and tx.stat("obj").is_file()
        with tx.open("obj.new", os.O_WRONLY | os.O_CREAT | os.O_EXCL) as f:
            f.write(b"version 2\n" * 10000)
        tx.rename("obj.new", "obj")
        assert tx.read("obj") == b"version 2\n" * 10000
        assert tx.stat("obj").size == 100000
        with pytest.raises(fstx.Error) as e:
            tx.stat("obj.new")
        assert e.value.errno == errno.ENOENT
        tx.mkdir("dir")
        assert tx.stat("dir").is_dir()
        assert (root / "obj").read_bytes() == b"version 1\n"  # not yet
    assert (root / "obj").read_bytes() == b"version 2\n" * 10000


def test_interactive_abort_and_conflict(dom: fstx.Domain, root: Path) -> None:
    (root / "obj").write_bytes(b"1")
    before = snapshot(root)
    tx = dom.begin()
    tx.read("obj")
    tx.unlink("obj")
    tx.abort()
    assert tx.finished and snapshot(root) == before
    tx = dom.begin()
    assert tx.read("obj") == b"1"
    tx.truncate("obj", 0)
    with fstx.Domain(root) as other, other.transaction() as o:
        o.truncate("obj", 0)
        o.pwrite(o.open("obj", os.O_WRONLY), b"other")
    with pytest.raises(fstx.Conflict):
        tx.commit()
    assert (root / "obj").read_bytes() == b"other"


def test_interactive_lease(dom: fstx.Domain) -> None:
    tx = dom.begin(lease=0.001)
    time.sleep(0.05)  # longer than the lease: no timing threshold asserted
    with pytest.raises(fstx.Error) as e:
        tx.commit()
    assert e.value.errno == errno.ETIMEDOUT


def test_run_retries_on_conflict(dom: fstx.Domain, root: Path) -> None:
    (root / "n").write_bytes(b"0")
    calls = []

    def incr(tx: fstx.InteractiveTransaction) -> int:
        n = int(tx.read("n"))
        calls.append(n)
        if len(calls) == 1:  # another writer gets in between
            with fstx.Domain(root) as other, other.transaction() as o:
                o.pwrite(o.open("n", os.O_WRONLY), b"5")
        tx.truncate("n", 0)
        tx.pwrite(tx.open("n", os.O_WRONLY), str(n + 1).encode())
        return n + 1

    assert dom.run(incr) == 6
    assert calls == [0, 5]
    assert (root / "n").read_bytes() == b"6"

    def always(tx: fstx.InteractiveTransaction) -> None:
        tx.assert_data("n", b"never")

    with pytest.raises(fstx.Conflict):
        dom.run(always, retries=2)


def test_run_abort(dom: fstx.Domain, root: Path) -> None:
    before = snapshot(root)

    def fn(tx: fstx.InteractiveTransaction) -> str:
        tx.mkdir("x")
        tx.abort()
        return "aborted"

    assert dom.run(fn) == "aborted"
    assert snapshot(root) == before


def test_recover_clean(dom: fstx.Domain) -> None:
    assert dom.recover() is False


def test_closed_domain(root: Path) -> None:
    d = fstx.Domain(root)
    tx = d.transaction()
    d.close()
    with pytest.raises(ValueError):
        d.status()
    with pytest.raises(ValueError):
        tx.mkdir("a")
    tx.abort()
    d.close()  # twice is fine
