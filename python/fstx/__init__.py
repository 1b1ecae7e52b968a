# SPDX-License-Identifier: MIT
"""fstx: atomic multi-file transactions on ordinary Linux filesystems.

    import fstx
    with fstx.Domain("/srv/app") as d:
        with d.transaction() as tx:         # commits on exit, nothing on exception
            tx.write("conf/a.conf", b"a=2\\n")
            tx.rename("new", "cur", exchange=True)
            tx.assert_data("VERSION", b"1\\n")

A pure-Python binding (ctypes) of libfstx.so.0; see python/README.md.
"""
from ._domain import (FAIL_ON_EQ, FAIL_ON_GT, FAIL_ON_GTE, FAIL_ON_LT,
                      FAIL_ON_LTE, FAIL_ON_NE, NEVER, Condition,
                      ConditionLike, Data, Domain, InteractiveTransaction,
                      StatResult, Status, Transaction, TxFile, version)
from ._errors import Conflict, Corrupt, Error, Invalid, Wedged

__version__ = "0.1.0"

__all__ = [
    "Domain", "Transaction", "InteractiveTransaction", "TxFile", "Status",
    "StatResult", "Condition", "ConditionLike", "Data", "NEVER",
    "FAIL_ON_NE", "FAIL_ON_EQ", "FAIL_ON_LT", "FAIL_ON_GT", "FAIL_ON_LTE",
    "FAIL_ON_GTE", "Error", "Conflict", "Wedged", "Corrupt", "Invalid",
    "version", "__version__",
]
