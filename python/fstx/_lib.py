# SPDX-License-Identifier: MIT
"""Loading libfstx and declaring the C prototypes (ctypes, ABI only).

The library is looked up, in order, at the path named by the FSTX_LIBRARY
environment variable, then by its soname through the dynamic loader
(LD_LIBRARY_PATH, the ld.so cache, the default directories), then by
ctypes.util.find_library("fstx").  Functions newer than the oldest library
the package supports are optional: a missing one is None here and the
Python side degrades (see has()).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any, Callable, List, Optional

SONAME = "libfstx.so.0"

# Widths of the C types in <fstx.h>.  The library is built without
# _FILE_OFFSET_BITS, so off_t is a long: 64 bits on every LP64 Linux.
c_off_t = ctypes.c_int64 if ctypes.sizeof(ctypes.c_long) == 8 else ctypes.c_long
c_mode_t = ctypes.c_uint32
c_size_t = ctypes.c_size_t
c_ssize_t = ctypes.c_ssize_t
c_p = ctypes.c_void_p
c_pp = ctypes.POINTER(ctypes.c_void_p)
c_str = ctypes.c_char_p


class StatusStruct(ctypes.Structure):
    """struct fstx_status."""

    _fields_ = [
        ("hot", ctypes.c_int),
        ("wedged", ctypes.c_int),
        ("journal_bytes", ctypes.c_uint64),
        ("reflink", ctypes.c_int),
        ("xattr_user", ctypes.c_int),
        ("block_size", ctypes.c_uint32),
        ("fs_type", ctypes.c_char * 16),
        ("dir_fsync", ctypes.c_int),
    ]


class StatusExStruct(ctypes.Structure):
    """struct fstx_status_ex (size says how much the library filled)."""

    _fields_ = [
        ("size", ctypes.c_uint32),
        ("hot", ctypes.c_int),
        ("wedged", ctypes.c_int),
        ("reflink", ctypes.c_int),
        ("xattr_user", ctypes.c_int),
        ("dir_fsync", ctypes.c_int),
        ("block_size", ctypes.c_uint32),
        ("fs_type", ctypes.c_char * 16),
        ("journal_bytes", ctypes.c_uint64),
        ("wal_bytes", ctypes.c_uint64),
        ("latched", ctypes.c_int),
        ("unsynced", ctypes.c_int),
    ]


def _load() -> ctypes.CDLL:
    tried: List[str] = []
    env = os.environ.get("FSTX_LIBRARY")
    if env:
        try:
            return ctypes.CDLL(env)
        except OSError as e:
            raise ImportError(
                f"fstx: FSTX_LIBRARY={env!r} cannot be loaded: {e}") from e
    for name in (SONAME, ctypes.util.find_library("fstx")):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            tried.append(f"{name}: {e}")
    raise ImportError(
        "fstx: libfstx.so.0 not found; install the library (make install), "
        "add its directory to LD_LIBRARY_PATH, or set FSTX_LIBRARY to its "
        "path (" + "; ".join(tried or ["find_library('fstx') found nothing"])
        + ")")


lib = _load()


def _fn(name: str, restype: Any, argtypes: List[Any],
        required: bool = True) -> Any:
    f = getattr(lib, name, None)
    if f is None:
        if required:
            raise ImportError(f"fstx: {name} missing from the loaded libfstx")
        return None
    f.restype = restype
    f.argtypes = argtypes
    return f


i = ctypes.c_int
u64 = ctypes.c_uint64
i64 = ctypes.c_int64

domain_open: Callable[..., int] = _fn("fstx_domain_open", i, [c_str, c_pp])
domain_close: Callable[..., None] = _fn("fstx_domain_close", None, [c_p])
recover: Callable[..., int] = _fn("fstx_recover", i, [c_p])
sync: Callable[..., int] = _fn("fstx_sync", i, [c_p])
status: Callable[..., int] = _fn("fstx_status", i,
                                 [c_p, ctypes.POINTER(StatusStruct)])
read_begin: Callable[..., int] = _fn("fstx_read_begin", i, [c_p])
read_end: Callable[..., None] = _fn("fstx_read_end", None, [c_p])

tx_new: Callable[..., int] = _fn("fstx_tx_new", i, [c_p, c_pp])
tx_free: Callable[..., None] = _fn("fstx_tx_free", None, [c_p])
tx_open: Callable[..., int] = _fn("fstx_tx_open", i, [c_p, c_str, i, c_mode_t])
tx_close: Callable[..., int] = _fn("fstx_tx_close", i, [c_p, i])
tx_pwrite: Callable[..., int] = _fn("fstx_tx_pwrite", i,
                                    [c_p, i, c_p, c_size_t, c_off_t])
tx_unlink: Callable[..., int] = _fn("fstx_tx_unlink", i, [c_p, c_str])
tx_link: Callable[..., int] = _fn("fstx_tx_link", i, [c_p, c_str, c_str])
tx_mkdir: Callable[..., int] = _fn("fstx_tx_mkdir", i, [c_p, c_str, c_mode_t])
tx_rmdir: Callable[..., int] = _fn("fstx_tx_rmdir", i, [c_p, c_str])
tx_truncate: Callable[..., int] = _fn("fstx_tx_truncate", i,
                                      [c_p, c_str, c_off_t])
tx_setxattr: Callable[..., int] = _fn("fstx_tx_setxattr", i,
                                      [c_p, c_str, c_str, c_p, c_size_t, i])
tx_removexattr: Callable[..., int] = _fn("fstx_tx_removexattr", i,
                                         [c_p, c_str, c_str])
tx_clonerange: Callable[..., int] = _fn("fstx_tx_clonerange", i,
                                        [c_p, i, i, c_off_t, c_off_t, c_off_t])
tx_rename: Callable[..., int] = _fn("fstx_tx_rename", i,
                                    [c_p, c_str, c_str, ctypes.c_uint])
tx_symlink: Callable[..., int] = _fn("fstx_tx_symlink", i, [c_p, c_str, c_str])
tx_assert_absent: Callable[..., int] = _fn("fstx_tx_assert_absent", i,
                                           [c_p, c_str])
tx_assert_exists: Callable[..., int] = _fn("fstx_tx_assert_exists", i,
                                           [c_p, c_str])
tx_assert_data: Callable[..., int] = _fn("fstx_tx_assert_data", i,
                                         [c_p, c_str, c_p, c_size_t])
tx_assert_xattr: Callable[..., int] = _fn("fstx_tx_assert_xattr", i,
                                          [c_p, c_str, c_str, c_p, c_size_t])
tx_expect: Callable[..., int] = _fn("fstx_tx_expect", i, [c_p, u64, i64])
tx_set_flags: Callable[..., int] = _fn("fstx_tx_set_flags", i, [c_p, u64])
tx_reserve: Callable[..., int] = _fn("fstx_tx_reserve", i, [c_p, u64, u64])
tx_commit: Callable[..., int] = _fn("fstx_tx_commit", i, [c_p])
tx_num_ops: Callable[..., int] = _fn("fstx_tx_num_ops", c_size_t, [c_p])
tx_result: Callable[..., int] = _fn("fstx_tx_result", i64, [c_p, c_size_t])
tx_failed_op: Callable[..., int] = _fn("fstx_tx_failed_op", ctypes.c_long,
                                       [c_p])
op_name: Callable[..., Optional[bytes]] = _fn("fstx_op_name", c_str, [u64])

begin: Callable[..., int] = _fn("fstx_begin", i, [c_p, ctypes.c_uint, c_pp])
read: Callable[..., int] = _fn("fstx_read", c_ssize_t,
                               [c_p, c_str, c_p, c_size_t, c_off_t])
stat: Callable[..., int] = _fn("fstx_stat", i, [c_p, c_str, c_p])
commit: Callable[..., int] = _fn("fstx_commit", i, [c_p])
abort: Callable[..., int] = _fn("fstx_abort", i, [c_p])

# Newer entry points: None when the loaded library predates them.
version: Optional[Callable[..., Optional[bytes]]] = _fn(
    "fstx_version", c_str, [], required=False)
status_ex: Optional[Callable[..., int]] = _fn(
    "fstx_status_ex", i, [c_p, ctypes.POINTER(StatusExStruct)],
    required=False)
tx_strerror: Optional[Callable[..., Optional[bytes]]] = _fn(
    "fstx_tx_strerror", c_str, [c_p], required=False)
tx_write: Optional[Callable[..., int]] = _fn(
    "fstx_tx_write", i, [c_p, c_str, c_p, c_size_t, c_mode_t], required=False)
tx_replace: Optional[Callable[..., int]] = _fn(
    "fstx_tx_replace", i, [c_p, c_str, c_p, c_size_t, c_mode_t],
    required=False)
tx_symlink_replace: Optional[Callable[..., int]] = _fn(
    "fstx_tx_symlink_replace", i, [c_p, c_str, c_str], required=False)
tx_copy_in: Optional[Callable[..., int]] = _fn(
    "fstx_tx_copy_in", i, [c_p, c_str, c_str], required=False)
tx_import: Optional[Callable[..., int]] = _fn(
    "fstx_tx_import", i, [c_p, c_str, c_str], required=False)
