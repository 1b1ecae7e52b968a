# SPDX-License-Identifier: MIT
"""The exceptions fstx raises."""
from __future__ import annotations

import errno as _errno
import os
from typing import Optional


class Error(OSError):
    """A failed fstx call.  An OSError: ``errno``, ``strerror``, ``filename``
    and ``filename2`` (the op's paths) as usual, plus:

    ``op_index``
        index of the op that failed in the transaction's vector (as
        fstx_tx_failed_op() gives it), or None when no single op failed;
    ``op_name``
        that op's name ("open", "pwrite", "assert-data", ...; a task such as
        "write" when the op was one of the several a task builder adds), or
        the failed call ("commit", "read", "recover", ...);
    ``detail``
        the library's own explanation (fstx_tx_strerror()), when it has one.

    A failed transaction changed nothing: the tree is exactly as before.
    """

    op_index: Optional[int]
    op_name: Optional[str]
    detail: Optional[str]

    def __init__(self, code: int, message: Optional[str] = None,
                 filename: Optional[str] = None,
                 filename2: Optional[str] = None, *,
                 op_index: Optional[int] = None,
                 op_name: Optional[str] = None,
                 detail: Optional[str] = None) -> None:
        super().__init__(code, message or os.strerror(code), filename, None,
                         filename2)
        self.op_index = op_index
        self.op_name = op_name
        self.detail = detail

    def __str__(self) -> str:
        s = f"[Errno {self.errno}] "
        if self.detail:  # names the op and its paths itself
            return s + self.detail
        if self.op_name:
            s += self.op_name
            if self.op_index is not None:
                s += f" (op {self.op_index})"
            s += ": "
        s += str(self.strerror)
        if self.filename is not None:
            s += f": {self.filename!r}"
        if self.filename2 is not None:
            s += f" -> {self.filename2!r}"
        return s


class Conflict(Error):
    """A compare op (assert_*, or a read of an interactive transaction) did
    not hold: another writer changed what the transaction relied on
    (ECANCELED).  Nothing changed; read again and retry (see Domain.run)."""


class Wedged(Error):
    """The domain is wedged (EROFS): a rollback failed, and transactions and
    readers are refused until Domain.recover() succeeds."""


class Corrupt(Error):
    """The journal is damaged (EUCLEAN): recovery refused to apply it and
    changed nothing.  See fstx(7)."""


class Invalid(Error):
    """A bad argument refused when the op was added or the transaction was
    set up (EINVAL at build time): nothing ran."""


_BY_ERRNO = {
    _errno.ECANCELED: Conflict,
    _errno.EROFS: Wedged,
    _errno.EUCLEAN: Corrupt,
}


def error_for(code: int, *, build: bool = False, message: Optional[str] = None,
              filename: Optional[str] = None,
              filename2: Optional[str] = None,
              op_index: Optional[int] = None, op_name: Optional[str] = None,
              detail: Optional[str] = None) -> Error:
    """The exception for a negative or positive errno ``code``."""
    code = abs(code)
    cls = _BY_ERRNO.get(code, Error)
    if build and code == _errno.EINVAL:
        cls = Invalid
    return cls(code, message, filename, filename2, op_index=op_index,
               op_name=op_name, detail=detail)
