# SPDX-License-Identifier: MIT
"""The first ```python block of the repository's README.md, run verbatim
(only its domain, /srv/app, becomes a prepared temporary directory), then
its effects checked op by op."""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from conftest import xattrs_work

README = Path(__file__).resolve().parent.parent.parent / "README.md"


def first_python_block() -> Optional[str]:
    if not README.exists():
        return None
    m = re.search(r"^```python\n(.*?)^```", README.read_text(),
                  re.S | re.M)
    return m.group(1) if m else None


def prepare(root: Path) -> None:
    """What the example's ops need to find."""
    (root / "conf").mkdir()
    (root / "conf/a.conf").write_bytes(b"a=1\n")
    (root / "conf/b.conf").write_bytes(b"b=1\n")
    (root / "new").mkdir()
    (root / "new/marker").write_bytes(b"new")
    (root / "cur").mkdir()
    (root / "cur/marker").write_bytes(b"cur")
    (root / "releases/v1").mkdir(parents=True)
    (root / "releases/v2").mkdir()
    os.symlink("releases/v1", root / "current")
    (root / "VERSION").write_bytes(b"1\n")


def tx_calls(code: str) -> List[Dict[str, Any]]:
    """The example's tx.op(...) calls whose arguments are literals."""
    calls = []
    for node in ast.walk(ast.parse(code)):
        if not (isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)):
            continue
        try:
            args = [ast.literal_eval(a) for a in node.args]
            kw = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        except ValueError:
            continue
        calls.append({"op": node.func.attr, "args": args, "kw": kw})
    return calls


def test_readme_python_example(root: Path) -> None:
    code = first_python_block()
    if code is None:
        pytest.skip(f"{README} has no ```python block yet")
    assert "/srv/app" in code
    prepare(root)
    calls = tx_calls(code)
    if any(c["op"] == "setxattr" for c in calls) and not xattrs_work(root):
        pytest.skip("the example sets a user.* xattr; this filesystem "
                    "has none")
    # Names the example uses without defining them.
    env: Dict[str, Any] = {"__name__": "__readme__", "data": b"b=2\n",
                           "digest": b"\x00" * 32}
    exec(compile(code.replace("/srv/app", str(root)), str(README), "exec"),
         env)
    checked = 0
    for c in calls:
        op, a, kw = c["op"], c["args"], c["kw"]
        if op in ("write", "replace") and len(a) >= 2:
            want = a[1].encode() if isinstance(a[1], str) else a[1]
            assert (root / a[0]).read_bytes() == want
            if "mode" in kw:
                mask = os.umask(0)
                os.umask(mask)
                assert os.stat(root / a[0]).st_mode & 0o777 == \
                    kw["mode"] & ~mask
        elif op == "setxattr" and len(a) == 3:
            want = a[2].encode() if isinstance(a[2], str) else a[2]
            assert os.getxattr(root / a[0], a[1]) == want
        elif op == "rename" and kw.get("exchange"):
            assert (root / a[1] / "marker").read_bytes() == b"new"
            assert (root / a[0] / "marker").read_bytes() == b"cur"
        elif op == "symlink":
            assert os.readlink(root / a[1]) == a[0]
        elif op == "assert_data":
            assert (root / a[0]).read_bytes() == a[1]
        else:
            continue
        checked += 1
    assert checked >= 1, "no op of the example could be checked"
