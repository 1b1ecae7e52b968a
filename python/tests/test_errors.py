# SPDX-License-Identifier: MIT
"""Every error class: what raises it, and what it carries."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

import fstx
from conftest import snapshot


def test_hierarchy() -> None:
    for cls in (fstx.Conflict, fstx.Wedged, fstx.Corrupt, fstx.Invalid):
        assert issubclass(cls, fstx.Error)
    assert issubclass(fstx.Error, OSError)


def test_error_carries_op(dom: fstx.Domain, root: Path) -> None:
    (root / "a").write_bytes(b"a")
    with pytest.raises(fstx.Error) as e:
        with dom.transaction() as tx:
            tx.mkdir("d")
            tx.link("a", "d/a")
            tx.rename("missing", "d/b")
    err = e.value
    assert type(err) is fstx.Error and isinstance(err, OSError)
    assert err.errno == errno.ENOENT
    assert err.op_index == 2 and err.op_name == "rename"
    assert err.filename == "missing" and err.filename2 == "d/b"
    if err.detail is not None:  # fstx_tx_strerror(): names op and path
        assert "rename" in err.detail and "missing" in err.detail
        assert "missing" in str(err)
    assert not (root / "d").exists()


def test_conflict(dom: fstx.Domain, root: Path) -> None:
    (root / "VERSION").write_bytes(b"2\n")
    before = snapshot(root)
    with pytest.raises(fstx.Conflict) as e:
        with dom.transaction() as tx:
            tx.unlink("VERSION")
            tx.assert_data("VERSION", b"1\n")
    assert e.value.errno == errno.ECANCELED
    assert e.value.op_index == 1 and e.value.op_name == "assert-data"
    assert e.value.filename == "VERSION"
    assert snapshot(root) == before
    with pytest.raises(fstx.Conflict):
        with dom.transaction() as tx:
            tx.assert_absent("VERSION")
    with pytest.raises(fstx.Conflict):
        with dom.transaction() as tx:
            tx.assert_exists("nothing")
    assert snapshot(root) == before


def test_wedged(root: Path) -> None:
    with fstx.Domain(root):
        pass  # makes .fstx/
    (root / ".fstx" / "wedged").write_bytes(b"")  # as a failed rollback does
    with fstx.Domain(root) as d:
        assert d.status().wedged
        with pytest.raises(fstx.Wedged) as e:
            with d.read_section():
                pass
        assert e.value.errno == errno.EROFS
        with pytest.raises(fstx.Wedged):
            with d.transaction() as tx:
                tx.mkdir("x")
        assert not (root / "x").exists()
        assert d.recover() is True
        assert not d.status().wedged
        with d.transaction() as tx:
            tx.mkdir("x")
        assert (root / "x").is_dir()


def test_corrupt(root: Path) -> None:
    with fstx.Domain(root):
        pass
    # A journal that is not one, beside a progress mark (journal.c rule 3):
    # damaged, not torn, so recovery must refuse it.
    (root / ".fstx" / "journal").write_bytes(os.urandom(4096))
    (root / ".fstx" / "step.1.0").write_bytes(b"")
    (root / "f").write_bytes(b"kept")
    before = snapshot(root)
    with fstx.Domain(root) as d:
        assert d.status().hot
        with pytest.raises(fstx.Corrupt) as e:
            d.recover()
        assert e.value.errno == errno.EUCLEAN
        assert e.value.op_name == "recover"
    assert snapshot(root) == before


def test_invalid_at_build_time(dom: fstx.Domain) -> None:
    tx = dom.transaction()
    f = tx.open("f")
    with pytest.raises(fstx.Invalid) as e:
        tx.pwrite(f, b"x", -1)
    assert e.value.errno == errno.EINVAL and e.value.op_name == "pwrite"
    assert e.value.op_index == 1
    with pytest.raises(fstx.Invalid):
        tx.setxattr("f", "user.big", b"x" * (65536 + 1))
    with pytest.raises(fstx.Invalid):
        tx.unlink("f", fail_if=("~", 1))
    with pytest.raises(fstx.Invalid):
        f.seek(-1)
    tx.abort()
    with pytest.raises(fstx.Invalid):
        dom.transaction(lazy=True, crash_only=True)


def test_poisoned_transaction_commits_nothing(dom: fstx.Domain,
                                              root: Path) -> None:
    before = snapshot(root)
    tx = dom.transaction()
    tx.mkdir("d")
    f = tx.open("d/f")
    with pytest.raises(fstx.Invalid):
        f.pwrite(b"x", -5)
    tx.mkdir("e")
    with pytest.raises(fstx.Error) as e:  # the first builder error again
        tx.commit()
    assert e.value.errno == errno.EINVAL
    assert snapshot(root) == before


def test_domain_errors(tmp_path: Path) -> None:
    with pytest.raises(fstx.Error) as e:
        fstx.Domain(tmp_path / "no" / "such")
    assert e.value.errno == errno.ENOENT
    assert e.value.filename == str(tmp_path / "no" / "such")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(fstx.Error) as e:
        fstx.Domain(tmp_path / "file")
    assert e.value.errno == errno.ENOTDIR


def test_escape_refused(dom: fstx.Domain, root: Path) -> None:
    with pytest.raises(fstx.Error) as e:
        with dom.transaction() as tx:
            tx.open("../outside")
    assert e.value.errno == errno.EXDEV
    with pytest.raises(fstx.Error) as e:
        with dom.transaction() as tx:
            tx.mkdir(".fstx/mine")
    assert e.value.errno == errno.EPERM


def test_task_builder_errors(dom: fstx.Domain, root: Path,
                             tmp_path: Path) -> None:
    (root / "x").write_bytes(b"x")
    before = snapshot(root)
    with pytest.raises(fstx.Error) as e:
        with dom.transaction() as tx:
            tx.unlink("x")
            tx.write("no/such/dir/f", b"data")
    assert e.value.errno == errno.ENOENT
    assert e.value.op_name == "write" and e.value.op_index == 1
    assert e.value.filename == "no/such/dir/f"
    assert snapshot(root) == before
    tx = dom.transaction()
    with pytest.raises(fstx.Error) as e:  # the source is read at once
        tx.copy_in(tmp_path / "missing", "y")
    assert e.value.errno == errno.ENOENT and e.value.op_name == "copy-in"
    tx.abort()


def test_missing_entry_point_degrades(dom: fstx.Domain,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An older library without a task builder: a clear NotImplementedError,
    not a crash."""
    for name in ("tx_write", "tx_replace", "tx_symlink_replace",
                 "tx_copy_in", "tx_import", "version"):
        monkeypatch.setattr(fstx._lib, name, None)
    tx = dom.transaction()
    with pytest.raises(NotImplementedError, match="fstx_tx_write"):
        tx.write("a", b"")
    with pytest.raises(NotImplementedError, match="fstx_tx_replace"):
        tx.replace("a", b"")
    with pytest.raises(NotImplementedError, match="symlink_replace"):
        tx.symlink("a", "b", replace=True)
    with pytest.raises(NotImplementedError, match="fstx_tx_copy_in"):
        tx.copy_in("a", "b")
    with pytest.raises(NotImplementedError, match="fstx_tx_import"):
        tx.import_tree("a", "b")
    with pytest.raises(NotImplementedError, match="fstx_version"):
        fstx.version()
    tx.abort()


def _import_in_child(env: Dict[str, str]) -> "subprocess.CompletedProcess[str]":
    code = ("import fstx, sys\n"
            "maps = open('/proc/self/maps').read()\n"
            "print([l.split()[-1] for l in maps.splitlines()"
            " if 'libfstx' in l][0])\n")
    return subprocess.run([sys.executable, "-c", code], env=env,
                          capture_output=True, text=True)


def test_library_lookup() -> None:
    lib = os.environ.get("FSTX_LIBRARY")
    if not lib:
        pytest.skip("FSTX_LIBRARY not set: the library is installed")
    env = dict(os.environ, FSTX_LIBRARY="/nonexistent/libfstx.so.0")
    r = _import_in_child(env)
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "FSTX_LIBRARY" in r.stderr
    # without FSTX_LIBRARY: the loader path
    env = {k: v for k, v in os.environ.items() if k != "FSTX_LIBRARY"}
    env["LD_LIBRARY_PATH"] = os.path.dirname(os.path.realpath(lib))
    r = _import_in_child(env)
    assert r.returncode == 0, r.stderr
    assert os.path.realpath(r.stdout.strip()) == os.path.realpath(lib)
