# SPDX-License-Identifier: MIT
"""Fixtures and helpers for the fstx Python tests.

Domains are made under $FSTX_TEST_DIR when set (so the suite runs on the
filesystem under test), else under pytest's temporary directory.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Iterator, Tuple

import pytest

import fstx

# run-tests.sh says where the installed package must come from: the suite
# tests what pip installed, never the source tree.
_installed = os.environ.get("FSTX_EXPECT_INSTALLED")
if _installed:
    assert os.path.realpath(fstx.__file__).startswith(
        os.path.realpath(_installed)), \
        f"fstx imported from {fstx.__file__}, not from {_installed}"

Entry = Tuple[str, int, bytes, Tuple[Tuple[str, bytes], ...], int]


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    base = os.environ.get("FSTX_TEST_DIR")
    d = Path(tempfile.mkdtemp(prefix="pyt-", dir=base)) if base else tmp_path
    yield d
    if base:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def dom(root: Path) -> Iterator[fstx.Domain]:
    with fstx.Domain(root) as d:
        yield d


def xattrs_work(root: Path) -> bool:
    p = root / ".xattr-probe"
    p.write_bytes(b"")
    try:
        os.setxattr(p, "user.probe", b"1")
        return True
    except OSError:
        return False
    finally:
        p.unlink()


def _xattrs(p: str, follow: bool) -> Tuple[Tuple[str, bytes], ...]:
    try:
        names = os.listxattr(p, follow_symlinks=follow)
    except OSError:
        return ()
    return tuple(sorted((n, os.getxattr(p, n, follow_symlinks=follow))
                        for n in names))


def snapshot(root: Path) -> Dict[str, Entry]:
    """Every name under root but .fstx/: type and mode, content (a file's
    bytes, a symlink's target), xattrs and link count."""
    snap: Dict[str, Entry] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == str(root) and ".fstx" in dirnames:
            dirnames.remove(".fstx")
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    data = f.read()
            elif stat.S_ISLNK(st.st_mode):
                data = os.fsencode(os.readlink(p))
            else:
                data = b""
            link = stat.S_ISLNK(st.st_mode)
            snap[os.path.relpath(p, root)] = (
                stat.filemode(st.st_mode), st.st_mode, data,
                () if link else _xattrs(p, True),
                st.st_nlink if not stat.S_ISDIR(st.st_mode) else 0)
    return snap


def run_py(code: str, *args: str) -> "subprocess.Popen[bytes]":
    """Start `python -c code args...` with this interpreter and environment
    (FSTX_LIBRARY included), stdout and stdin piped."""
    return subprocess.Popen([sys.executable, "-c", code, *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
