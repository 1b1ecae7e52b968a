# SPDX-License-Identifier: MIT
"""Domains, transactions and their ops: the Python face of <fstx.h>."""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import io
import os
import platform
import stat as _stat
import weakref
from pathlib import Path
from types import TracebackType
from typing import (Any, Callable, Iterator, List, Optional, Tuple, Type,
                    TypeVar, Union)

from . import _lib
from ._errors import Conflict, Error, Invalid, error_for

StrPath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
#: Data for a file or an xattr value; a str is encoded as UTF-8.
Data = Union[bytes, bytearray, memoryview, str]
T = TypeVar("T")

# Transaction flags (<fstx.h>, <fstx/btrfs_usertrans.h>).
FLAG_WEDGEONFAIL = 1 << 13
FLAG_STRICT = 1 << 16
FLAG_NOSYNC = 1 << 17
FLAG_WAL = 1 << 18
FLAG_LAZY = 1 << 19
FLAG_COPY = 1 << 20

# The RFC's per-op conditions (BTRFS_IOC_UT_OP_FLAG_FAIL_ON_*).
FAIL_ON_NE = 1 << 1
FAIL_ON_EQ = 1 << 2
FAIL_ON_LT = 1 << 3
FAIL_ON_GT = 1 << 4
FAIL_ON_LTE = 1 << 5
FAIL_ON_GTE = 1 << 6

# Op numbers of the primitive builders, for fstx_op_name().
_OP = {"open": 1, "close": 2, "pwrite": 3, "unlink": 4, "link": 5,
       "mkdir": 6, "rmdir": 7, "truncate": 8, "setxattr": 9,
       "removexattr": 10, "clonerange": 11, "rename": 12, "symlink": 13,
       "assert-absent": 14, "assert-exists": 15, "assert-data": 16,
       "assert-xattr": 17}

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2

# Whether the loaded library copies builder buffers (FSTX_UT_COPY); learnt
# from the first transaction.
_copy_ok: Optional[bool] = None


@dataclasses.dataclass(frozen=True)
class Condition:
    """The RFC's condition on one op's result: the transaction fails (and
    changes nothing) when the result compares to ``value`` as ``flags``
    (FAIL_ON_* bits, OR'ed) say.  ``Condition(0)`` (:data:`NEVER`) ignores
    the result, as the RFC's unflagged ops do."""

    flags: int
    value: int = 0


#: Never fail on this op's result (the RFC's flags 0).
NEVER = Condition(0)

_CMP = {"!=": FAIL_ON_NE, "==": FAIL_ON_EQ, "<": FAIL_ON_LT, ">": FAIL_ON_GT,
        "<=": FAIL_ON_LTE, ">=": FAIL_ON_GTE}

#: A condition: a Condition, or a tuple such as ``("<", 0)`` (fail if the
#: result is below 0) or ``("!=", 5)`` (fail unless the result is 5).
ConditionLike = Union[Condition, Tuple[str, int]]


def _condition(c: ConditionLike) -> Condition:
    if isinstance(c, Condition):
        return c
    if (isinstance(c, tuple) and len(c) == 2 and c[0] in _CMP
            and isinstance(c[1], int)):
        return Condition(_CMP[c[0]], c[1])
    raise Invalid(errno.EINVAL, f"bad condition {c!r}: want e.g. ('<', 0), "
                  "one of " + ", ".join(_CMP))


def _path(p: StrPath) -> bytes:
    if isinstance(p, (str, bytes, os.PathLike)):
        return os.fsencode(p)
    raise TypeError(f"expected a path, not {type(p).__name__}")


def _name(p: StrPath) -> str:
    return os.fsdecode(p)


def _bytes(data: Data) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, (bytearray, memoryview)):
        return memoryview(data).tobytes()
    raise TypeError(f"expected bytes or str, not {type(data).__name__}")


def _cstr(b: bytes) -> str:
    return b.split(b"\0")[0].decode(errors="replace")


def _check(r: int, what: str, filename: Optional[str] = None) -> int:
    if r < 0:
        raise error_for(r, op_name=what, filename=filename)
    return r


def _flags(durable: Optional[bool], crash_only: bool, lazy: bool, wal: bool,
           wedge_on_fail: bool) -> int:
    if durable is not None and not durable and not (crash_only or lazy):
        raise Invalid(errno.EINVAL, "durable=False: say crash_only=True or "
                      "lazy=True")
    if sum((bool(durable), crash_only, lazy)) > 1:
        raise Invalid(errno.EINVAL, "choose one of durable, crash_only, lazy")
    f = FLAG_STRICT
    if crash_only:
        f |= FLAG_NOSYNC
    if lazy:
        f |= FLAG_LAZY
    if wal:
        f |= FLAG_WAL
    if wedge_on_fail:
        f |= FLAG_WEDGEONFAIL
    return f


def version() -> str:
    """The loaded library's version ("0.1.0"); fstx_version()."""
    if _lib.version is None:
        raise NotImplementedError("the loaded libfstx has no fstx_version()")
    v = _lib.version()
    return v.decode() if v else ""


@dataclasses.dataclass(frozen=True)
class Status:
    """A domain's state and its filesystem's facts (struct fstx_status)."""

    hot: bool            #: a journal awaits recovery
    wedged: bool         #: transactions fail (Wedged) until recover()
    journal_bytes: int
    reflink: bool        #: FICLONERANGE works here
    xattr_user: bool     #: user.* xattrs work here
    block_size: int
    fs_type: str         #: "ext4", "xfs", "btrfs", "tmpfs", ...
    dir_fsync: bool      #: fsync() of a directory works here
    #: bytes of records in DIR/.fstx/wal (None: library without
    #: fstx_status_ex, as for the two below)
    wal_bytes: Optional[int] = None
    #: -errno of a failed barrier this handle holds until recover(), or 0
    latched: Optional[int] = None
    #: this handle committed crash-only or lazy transactions that sync()
    #: would make durable
    unsynced: Optional[bool] = None


@dataclasses.dataclass(frozen=True)
class StatResult:
    """What an interactive transaction's stat() tells: the type bits of
    st_mode and st_size, as the transaction's ops so far leave the path."""

    mode: int
    size: int

    def is_file(self) -> bool:
        return _stat.S_ISREG(self.mode)

    def is_dir(self) -> bool:
        return _stat.S_ISDIR(self.mode)

    def is_symlink(self) -> bool:
        return _stat.S_ISLNK(self.mode)


# Offsets of st_mode and st_size in the C library's struct stat.
_STAT_LAYOUT = {"x86_64": (24, 48), "aarch64": (16, 48),
                "riscv64": (16, 48), "loongarch64": (16, 48)}


class TxFile:
    """A file opened inside a transaction (fstx_tx_open): ``fd`` is its slot
    in the transaction's fd table.  write() records a pwrite at the current
    position and moves it; nothing reaches the file before commit."""

    def __init__(self, tx: "Transaction", fd: int, path: str) -> None:
        self.tx = tx
        self.fd = fd
        self.path = path
        self.closed = False
        self._pos = 0

    def write(self, data: Data) -> int:
        """Record a pwrite of ``data`` at the current position; its length."""
        b = _bytes(data)
        self.tx.pwrite(self, b, self._pos)
        self._pos += len(b)
        return len(b)

    def pwrite(self, data: Data, offset: int, *,
               fail_if: Optional[ConditionLike] = None) -> None:
        """Record a pwrite of ``data`` at ``offset``."""
        self.tx.pwrite(self, data, offset, fail_if=fail_if)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Move the position write() uses (SEEK_SET or SEEK_CUR)."""
        if whence == os.SEEK_SET:
            pos = offset
        elif whence == os.SEEK_CUR:
            pos = self._pos + offset
        else:
            raise io.UnsupportedOperation("only SEEK_SET and SEEK_CUR")
        if pos < 0:
            raise Invalid(errno.EINVAL, "negative position")
        self._pos = pos
        return pos

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        """Record the close op (once)."""
        if not self.closed:
            self.tx.close(self)

    def __enter__(self) -> "TxFile":
        return self

    def __exit__(self, et: Optional[Type[BaseException]],
                 ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if not self.tx.finished:
            self.close()


FdLike = Union[int, TxFile]


def _fd(f: FdLike) -> int:
    return f.fd if isinstance(f, TxFile) else int(f)


class Transaction:
    """A vector of ops, applied all or nothing by commit().

    Made by Domain.transaction(); as a context manager it commits when the
    block ends normally and drops everything when it raises.  The builder
    methods only record ops: nothing touches the tree before commit().  A
    failed builder call raises at once (Invalid for a bad argument).  Every
    op is strict (its failure fails the transaction) unless its
    ``fail_if=`` argument gives the RFC's condition instead.
    """

    def __init__(self, domain: "Domain", handle: int, flags: int) -> None:
        global _copy_ok
        self.domain = domain
        self._h: Optional[int] = handle
        self._fin = weakref.finalize(self, _lib.tx_free, handle)
        self._calls: List[Tuple[int, int, str, Tuple[str, ...]]] = []
        self._keep: List[bytes] = []
        #: each op's result (fstx_tx_result), once committed
        self.results: Optional[List[int]] = None
        self.committed = False
        r = -errno.EINVAL
        if _copy_ok is not False:
            r = _lib.tx_set_flags(handle, flags | FLAG_COPY)
        self._copy = r == 0
        if r < 0:
            # A library without copy-in mode refuses the flag: keep the
            # buffers alive on the Python side instead (_data()).
            r = _lib.tx_set_flags(handle, flags)
        if _copy_ok is None and r == 0:
            _copy_ok = self._copy
        if r < 0:
            self._free()
            raise error_for(r, build=True, op_name="set_flags")

    # -- life --------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """True once committed, aborted or failed."""
        return self._h is None

    def _handle(self) -> int:
        if self._h is None:
            raise ValueError("the transaction is finished")
        self.domain._handle()
        return self._h

    def _free(self) -> None:
        self._h = None
        self._keep.clear()
        self._fin()

    def _commit_call(self, h: int) -> int:
        return _lib.tx_commit(h)

    def commit(self) -> None:
        """Run every op, all or nothing.  On success the changes are in
        the tree (durable unless the transaction is crash_only or lazy) and
        ``results`` holds each op's result; on failure the tree is as
        before and an Error (Conflict, Wedged, ...) says which op failed."""
        h = self._handle()
        r = self._commit_call(h)
        if r < 0:
            err = self._failure(h, r)
            self._free()
            raise err
        self.results = [_lib.tx_result(h, i)
                        for i in range(_lib.tx_num_ops(h))]
        self.committed = True
        self._free()

    def abort(self) -> None:
        """Drop the transaction: nothing ran, nothing will."""
        if self._h is not None:
            self._free()

    def __enter__(self: "TxT") -> "TxT":
        self._handle()
        return self

    def __exit__(self, et: Optional[Type[BaseException]],
                 ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if self._h is None:
            return
        if et is None:
            self.commit()
        else:
            self.abort()

    def _failure(self, h: int, r: int) -> Error:
        idx = _lib.tx_failed_op(h)
        name: Optional[str] = "commit"
        paths: Tuple[str, ...] = ()
        if idx >= 0:
            name = None
            for start, end, n, p in self._calls:
                if start <= idx < end:
                    name, paths = n, p
                    break
            if name in _OP:  # a primitive op: the library's name for it
                c = _lib.op_name(_OP[name])
                name = c.decode() if c else name
        detail = None
        if _lib.tx_strerror is not None:
            s = _lib.tx_strerror(h)
            detail = s.decode(errors="replace") if s else None
        return error_for(r, op_index=idx if idx >= 0 else None,
                         op_name=name,
                         filename=paths[0] if paths else None,
                         filename2=paths[1] if len(paths) > 1 else None,
                         detail=detail)

    # -- recording ops -----------------------------------------------------

    def _data(self, data: Data) -> bytes:
        b = _bytes(data)
        if not self._copy:  # the library keeps the pointer until commit
            self._keep.append(b)
        return b

    def _add(self, name: str, paths: Tuple[str, ...], fn: Callable[..., int],
             *args: Any, fail_if: Optional[ConditionLike] = None) -> int:
        h = self._handle()
        start = _lib.tx_num_ops(h)
        r = fn(h, *args)
        if r < 0:
            raise error_for(r, build=True, op_index=start, op_name=name,
                            filename=paths[0] if paths else None,
                            filename2=paths[1] if len(paths) > 1 else None)
        self._calls.append((start, _lib.tx_num_ops(h), name, paths))
        if fail_if is not None:
            c = _condition(fail_if)
            e = _lib.tx_expect(h, c.flags, c.value)
            if e < 0:
                raise error_for(e, build=True, op_index=start, op_name=name)
        return r

    def open(self, path: StrPath,
             flags: int = os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
             mode: int = 0o644, *,
             fail_if: Optional[ConditionLike] = None) -> TxFile:
        """Record an open (fstx_tx_open) and return its handle; write with
        it, then close it (or use it as a context manager)."""
        fd = self._add("open", (_name(path),), _lib.tx_open, _path(path),
                       flags, mode, fail_if=fail_if)
        return TxFile(self, fd, _name(path))

    def close(self, fd: FdLike, *,
              fail_if: Optional[ConditionLike] = None) -> None:
        """Record the close of an opened file (fstx_tx_close)."""
        self._add("close", (), _lib.tx_close, _fd(fd), fail_if=fail_if)
        if isinstance(fd, TxFile):
            fd.closed = True

    def pwrite(self, fd: FdLike, data: Data, offset: int = 0, *,
               fail_if: Optional[ConditionLike] = None) -> None:
        """Record a pwrite of ``data`` at ``offset`` (fstx_tx_pwrite)."""
        b = self._data(data)
        self._add("pwrite", (fd.path,) if isinstance(fd, TxFile) else (),
                  _lib.tx_pwrite, _fd(fd), b, len(b), offset,
                  fail_if=fail_if)

    def clonerange(self, dst: FdLike, src: FdLike, src_offset: int,
                   length: int, dst_offset: int, *,
                   fail_if: Optional[ConditionLike] = None) -> None:
        """Record a FICLONERANGE of ``length`` bytes from ``src`` at
        ``src_offset`` into ``dst`` at ``dst_offset`` (both opened here)."""
        self._add("clonerange", (), _lib.tx_clonerange, _fd(dst), _fd(src),
                  src_offset, length, dst_offset, fail_if=fail_if)

    def unlink(self, path: StrPath, *,
               fail_if: Optional[ConditionLike] = None) -> None:
        """Record an unlink."""
        self._add("unlink", (_name(path),), _lib.tx_unlink, _path(path),
                  fail_if=fail_if)

    def link(self, oldpath: StrPath, newpath: StrPath, *,
             fail_if: Optional[ConditionLike] = None) -> None:
        """Record a hard link of ``oldpath`` as ``newpath``."""
        self._add("link", (_name(oldpath), _name(newpath)), _lib.tx_link,
                  _path(oldpath), _path(newpath), fail_if=fail_if)

    def mkdir(self, path: StrPath, mode: int = 0o755, *,
              fail_if: Optional[ConditionLike] = None) -> None:
        """Record a mkdir."""
        self._add("mkdir", (_name(path),), _lib.tx_mkdir, _path(path), mode,
                  fail_if=fail_if)

    def rmdir(self, path: StrPath, *,
              fail_if: Optional[ConditionLike] = None) -> None:
        """Record an rmdir."""
        self._add("rmdir", (_name(path),), _lib.tx_rmdir, _path(path),
                  fail_if=fail_if)

    def truncate(self, path: StrPath, size: int, *,
                 fail_if: Optional[ConditionLike] = None) -> None:
        """Record a truncate of ``path`` to ``size`` bytes."""
        self._add("truncate", (_name(path),), _lib.tx_truncate, _path(path),
                  size, fail_if=fail_if)

    def setxattr(self, path: StrPath, name: str, value: Data,
                 flags: int = 0, *,
                 fail_if: Optional[ConditionLike] = None) -> None:
        """Record a setxattr (flags: 0, os.XATTR_CREATE, os.XATTR_REPLACE)."""
        b = self._data(value)
        self._add("setxattr", (_name(path),), _lib.tx_setxattr, _path(path),
                  name.encode(), b, len(b), flags, fail_if=fail_if)

    def removexattr(self, path: StrPath, name: str, *,
                    fail_if: Optional[ConditionLike] = None) -> None:
        """Record a removexattr."""
        self._add("removexattr", (_name(path),), _lib.tx_removexattr,
                  _path(path), name.encode(), fail_if=fail_if)

    def rename(self, oldpath: StrPath, newpath: StrPath, *,
               exchange: bool = False, noreplace: bool = False,
               fail_if: Optional[ConditionLike] = None) -> None:
        """Record a rename; ``exchange=True`` swaps the two names
        (RENAME_EXCHANGE), ``noreplace=True`` fails if ``newpath`` exists
        (RENAME_NOREPLACE)."""
        flags = (RENAME_EXCHANGE if exchange else 0) | \
            (RENAME_NOREPLACE if noreplace else 0)
        self._add("rename", (_name(oldpath), _name(newpath)), _lib.tx_rename,
                  _path(oldpath), _path(newpath), flags, fail_if=fail_if)

    def symlink(self, target: StrPath, linkpath: StrPath, *,
                replace: bool = False,
                fail_if: Optional[ConditionLike] = None) -> None:
        """Record a symlink ``linkpath`` -> ``target``; with
        ``replace=True`` an existing ``linkpath`` is replaced atomically
        (fstx_tx_symlink_replace)."""
        names = (_name(target), _name(linkpath))
        if not replace:
            self._add("symlink", names, _lib.tx_symlink, _path(target),
                      _path(linkpath), fail_if=fail_if)
            return
        if fail_if is not None:
            raise Invalid(errno.EINVAL, "fail_if applies to one op; "
                          "symlink(replace=True) may add several")
        if _lib.tx_symlink_replace is None:
            raise NotImplementedError(
                "the loaded libfstx has no fstx_tx_symlink_replace()")
        self._add("symlink-replace", names, _lib.tx_symlink_replace,
                  _path(target), _path(linkpath))

    def write(self, path: StrPath, data: Data, mode: int = 0o644) -> None:
        """Record writing ``data`` as the whole content of ``path``
        (fstx_tx_write: open with O_WRONLY|O_CREAT|O_TRUNC, pwrite, close);
        an existing file keeps its inode, mode and xattrs, a new one gets
        ``mode`` (subject to the umask)."""
        if _lib.tx_write is None:
            raise NotImplementedError(
                "the loaded libfstx has no fstx_tx_write()")
        b = _bytes(data)  # the task builders copy it
        self._add("write", (_name(path),), _lib.tx_write, _path(path), b,
                  len(b), mode)

    def replace(self, path: StrPath, data: Data,
                mode: Optional[int] = None) -> None:
        """Record replacing ``path`` by a new file (a new inode, renamed
        over it; the old file's xattrs are not kept) holding ``data``, with
        ``mode``, or with None the existing file's mode (0o644 if there is
        none), read now (fstx_tx_replace).  Modes are subject to the umask.
        """
        if _lib.tx_replace is None:
            raise NotImplementedError(
                "the loaded libfstx has no fstx_tx_replace()")
        b = _bytes(data)
        self._add("replace", (_name(path),), _lib.tx_replace, _path(path), b,
                  len(b), 0xFFFFFFFF if mode is None else mode)

    def copy_in(self, src: StrPath, dst: StrPath) -> None:
        """Record copying the file ``src`` (any path outside the domain)
        to ``dst`` in the domain (fstx_tx_copy_in)."""
        if _lib.tx_copy_in is None:
            raise NotImplementedError(
                "the loaded libfstx has no fstx_tx_copy_in()")
        self._add("copy-in", (_name(src), _name(dst)), _lib.tx_copy_in,
                  _path(src), _path(dst))

    def import_tree(self, srcdir: StrPath, dstdir: StrPath) -> None:
        """Record importing the directory tree ``srcdir`` (outside the
        domain) as ``dstdir`` in the domain (fstx_tx_import)."""
        if _lib.tx_import is None:
            raise NotImplementedError(
                "the loaded libfstx has no fstx_tx_import()")
        self._add("import", (_name(srcdir), _name(dstdir)), _lib.tx_import,
                  _path(srcdir), _path(dstdir))

    def assert_absent(self, path: StrPath) -> None:
        """Fail the transaction (Conflict) unless nothing is at ``path``."""
        self._add("assert-absent", (_name(path),), _lib.tx_assert_absent,
                  _path(path))

    def assert_exists(self, path: StrPath) -> None:
        """Fail the transaction (Conflict) unless something is at ``path``."""
        self._add("assert-exists", (_name(path),), _lib.tx_assert_exists,
                  _path(path))

    def assert_data(self, path: StrPath, data: Data) -> None:
        """Fail the transaction (Conflict) unless ``path`` holds exactly
        ``data`` (the tree before the transaction, whatever the op's
        position)."""
        b = self._data(data)
        self._add("assert-data", (_name(path),), _lib.tx_assert_data,
                  _path(path), b, len(b))

    def assert_xattr(self, path: StrPath, name: str, value: Data) -> None:
        """Fail the transaction (Conflict) unless xattr ``name`` of ``path``
        is exactly ``value``."""
        b = self._data(value)
        self._add("assert-xattr", (_name(path),), _lib.tx_assert_xattr,
                  _path(path), name.encode(), b, len(b))

    def reserve(self, data_bytes: int, metadata_ops: int) -> None:
        """Space the transaction will need (the RFC's reservation hint)."""
        _check(_lib.tx_reserve(self._handle(), data_bytes, metadata_ops),
               "reserve")

    @property
    def num_ops(self) -> int:
        """Ops recorded so far."""
        return int(_lib.tx_num_ops(self._handle()))


TxT = TypeVar("TxT", bound=Transaction)


class InteractiveTransaction(Transaction):
    """A transaction that reads as it goes (fstx_begin): read() and stat()
    see the tree as the ops so far will leave it, and every read adds a
    compare op, so commit() raises Conflict, changing nothing, if another
    writer changed what was read.  Nothing is locked between calls.  As a
    context manager it commits on normal exit and aborts on an exception.
    """

    def _commit_call(self, h: int) -> int:
        return _lib.commit(h)

    def abort(self) -> None:
        """Drop the transaction (fstx_abort)."""
        if self._h is not None:
            _lib.abort(self._h)
            self._free()

    def read(self, path: StrPath, size: int = -1, offset: int = 0) -> bytes:
        """``size`` bytes of ``path`` at ``offset`` (all of it from
        ``offset`` when size is negative), as the transaction sees it."""
        h = self._handle()
        p = _path(path)
        if size >= 0:
            buf = ctypes.create_string_buffer(max(size, 1))
            n = _lib.read(h, p, buf, size, offset)
            if n < 0:
                raise error_for(n, op_name="read", filename=_name(path))
            return buf.raw[:n]
        # One byte more than stat() says, so one call normally sees the end.
        chunk = max(self.stat(path).size - offset, 0) + 1
        parts: List[bytes] = []
        while True:
            buf = ctypes.create_string_buffer(chunk)
            n = _lib.read(h, p, buf, chunk, offset)
            if n < 0:
                raise error_for(n, op_name="read", filename=_name(path))
            parts.append(buf.raw[:n])
            offset += n
            if n < chunk:
                return b"".join(parts)
            chunk = max(chunk, 65536)

    def stat(self, path: StrPath) -> StatResult:
        """The type bits of st_mode and st_size of ``path`` as the
        transaction sees it; Error (ENOENT) if absent."""
        layout = _STAT_LAYOUT.get(platform.machine())
        if layout is None:
            raise NotImplementedError(
                f"struct stat layout of {platform.machine()} unknown")
        h = self._handle()
        buf = ctypes.create_string_buffer(256)
        _check(_lib.stat(h, _path(path), buf), "stat", _name(path))
        mode = int.from_bytes(buf.raw[layout[0]:layout[0] + 4], "little")
        size = int.from_bytes(buf.raw[layout[1]:layout[1] + 8], "little",
                              signed=True)
        return StatResult(mode, size)


class Domain:
    """A directory tree whose changes fstx makes all or nothing
    (fstx_domain_open; DIR/.fstx/ is made the first time).  A context
    manager: the handle is closed on exit (lazy transactions are flushed).
    A handle serves one thread at a time: open one per thread.
    """

    def __init__(self, path: StrPath) -> None:
        self.path = Path(os.fsdecode(path))
        out = ctypes.c_void_p()
        _check(_lib.domain_open(_path(path), ctypes.byref(out)),
               "domain_open", _name(path))
        assert out.value is not None
        self._d: Optional[int] = out.value
        self._fin = weakref.finalize(self, _lib.domain_close, out.value)

    def _handle(self) -> int:
        if self._d is None:
            raise ValueError("the domain is closed")
        return self._d

    def close(self) -> None:
        """Close the handle (fstx_domain_close; flushes lazy transactions).
        Transactions of the handle not yet committed are dropped."""
        if self._d is not None:
            self._d = None
            self._fin()

    def __enter__(self) -> "Domain":
        self._handle()
        return self

    def __exit__(self, et: Optional[Type[BaseException]],
                 ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"fstx.Domain({str(self.path)!r})"

    def transaction(self, *, durable: Optional[bool] = None,
                    crash_only: bool = False, lazy: bool = False,
                    wal: bool = False,
                    wedge_on_fail: bool = False) -> Transaction:
        """A new transaction (fstx_tx_new).  Durability, one of:

        ``durable`` (the default)
            durable when commit() returns;
        ``crash_only=True`` (FSTX_UT_NOSYNC)
            all or nothing across kill -9, no barrier: power loss may
            lose or tear it until a later durable commit or sync();
        ``lazy=True`` (FSTX_UT_LAZY)
            all or nothing across kill -9 and power loss, durable at the
            next flush (sync(), close(), a reader, 4 MiB queued).

        ``wal=True`` (FSTX_UT_WAL) is accepted and changes nothing: a
        transaction that overwrites files, creates files and directories,
        unlinks files or renames a new file over an old one is committed by
        one log record by default; ``wedge_on_fail=True``
        (the RFC's WEDGEONFAIL) wedges the domain if a rollback fails.
        """
        flags = _flags(durable, crash_only, lazy, wal, wedge_on_fail)
        out = ctypes.c_void_p()
        _check(_lib.tx_new(self._handle(), ctypes.byref(out)), "tx_new")
        assert out.value is not None
        return Transaction(self, out.value, flags)

    def begin(self, *, lease: Optional[float] = None,
              durable: Optional[bool] = None, crash_only: bool = False,
              lazy: bool = False, wal: bool = False,
              wedge_on_fail: bool = False) -> InteractiveTransaction:
        """A new interactive transaction (fstx_begin) that lives ``lease``
        seconds (default 30); durability keywords as for transaction()."""
        flags = _flags(durable, crash_only, lazy, wal, wedge_on_fail)
        ms = 0 if lease is None else max(1, int(lease * 1000))
        out = ctypes.c_void_p()
        _check(_lib.begin(self._handle(), ms, ctypes.byref(out)), "begin")
        assert out.value is not None
        return InteractiveTransaction(self, out.value, flags)

    def run(self, fn: Callable[[InteractiveTransaction], T],
            retries: Optional[int] = 10, *, lease: Optional[float] = None,
            durable: Optional[bool] = None, crash_only: bool = False,
            lazy: bool = False, wal: bool = False) -> T:
        """Call ``fn(tx)`` in a fresh interactive transaction and commit
        it; on Conflict (something it read or asserted changed) do it all
        again, at most ``retries`` more times (None: until it commits).
        Returns what ``fn`` returned; raises the last Conflict when the
        retries run out.  ``fn`` may call tx.abort() to commit nothing."""
        attempt = 0
        while True:
            tx = self.begin(lease=lease, durable=durable,
                            crash_only=crash_only, lazy=lazy, wal=wal)
            try:
                with tx:
                    result = fn(tx)
                return result
            except Conflict:
                if retries is not None and attempt >= retries:
                    raise
                attempt += 1

    @contextlib.contextmanager
    def read_section(self) -> Iterator[Path]:
        """Hold off writers for a block of plain reads (fstx_read_begin /
        fstx_read_end): inside, the tree is one committed state.  Yields
        the domain's path.  Do not commit on this domain inside."""
        _check(_lib.read_begin(self._handle()), "read_begin")
        try:
            yield self.path
        finally:
            if self._d is not None:
                _lib.read_end(self._d)

    def recover(self) -> bool:
        """Roll back a hot journal and clear a wedge (fstx_recover): True
        if something was recovered, False if the domain was clean; Corrupt
        if the journal is damaged (nothing applied)."""
        return _check(_lib.recover(self._handle()), "recover") == 1

    def sync(self) -> None:
        """Make every transaction this handle committed durable
        (fstx_sync): flush lazy ones, sync crash-only ones."""
        _check(_lib.sync(self._handle()), "sync")

    def status(self) -> Status:
        """The domain's state and its filesystem's facts (fstx_status)."""
        if _lib.status_ex is not None:
            ex = _lib.StatusExStruct()
            ex.size = ctypes.sizeof(ex)
            _check(_lib.status_ex(self._handle(), ctypes.byref(ex)),
                   "status")

            def has(field: str) -> bool:
                f = getattr(_lib.StatusExStruct, field)
                return int(ex.size) >= int(f.offset) + int(f.size)

            return Status(hot=bool(ex.hot), wedged=bool(ex.wedged),
                          journal_bytes=int(ex.journal_bytes),
                          reflink=bool(ex.reflink),
                          xattr_user=bool(ex.xattr_user),
                          block_size=int(ex.block_size),
                          fs_type=_cstr(bytes(ex.fs_type)),
                          dir_fsync=bool(ex.dir_fsync),
                          wal_bytes=int(ex.wal_bytes)
                          if has("wal_bytes") else None,
                          latched=int(ex.latched)
                          if has("latched") else None,
                          unsynced=bool(ex.unsynced)
                          if has("unsynced") else None)
        st = _lib.StatusStruct()
        _check(_lib.status(self._handle(), ctypes.byref(st)), "status")
        return Status(hot=bool(st.hot), wedged=bool(st.wedged),
                      journal_bytes=int(st.journal_bytes),
                      reflink=bool(st.reflink),
                      xattr_user=bool(st.xattr_user),
                      block_size=int(st.block_size),
                      fs_type=_cstr(bytes(st.fs_type)),
                      dir_fsync=bool(st.dir_fsync))
