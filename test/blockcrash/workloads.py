# SPDX-License-Identifier: MIT
"""Workloads of the block-level power-loss check.

Each workload has an initial tree (built before recording starts) and one
or more transactions, written out as fstx-tx(5) text files.  A workload
whose "steps" list has several entries runs them in a row, each as its own
`fstx run`.
"""
import os


def _data(seed, n):
    """Deterministic, incompressible-looking bytes."""
    out = bytearray()
    x = (seed * 2654435761 + 12345) & 0xFFFFFFFF
    while len(out) < n:
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
        out += x.to_bytes(4, "little")
    return bytes(out[:n])


def _file(path, size, seed, xattrs=None, mode=0o644):
    return ("file", path, _data(seed, size), xattrs or {}, mode)


def _dir(path, mode=0o755):
    return ("dir", path, mode)


OVERWRITE_TX = """\
open 0 f1 O_WRONLY
pwrite 0 @new1 0
close 0
open 1 f2 O_WRONLY
pwrite 1 @new2 1000
close 1
setxattr f1 user.a "first"
setxattr f2 user.v "new-value"
"""

OBJPUT_TX = """\
open 0 objs/obj2 O_WRONLY|O_CREAT|O_EXCL 0644
pwrite 0 @obj 0
close 0
setxattr objs/obj2 user.sha "0123456789abcdef"
open 1 index O_WRONLY
pwrite 1 @index 0
close 1
"""

REPLACE_TX = """\
open 0 cur.tmp O_WRONLY|O_CREAT|O_EXCL 0644
pwrite 0 @big 0
close 0
rename cur.tmp cur
unlink other
"""

MIXED_TX = """\
mkdir m
symlink ../b m/s
link b m/b2
removexattr a user.x
rename a p/q exchange
rmdir e
truncate b 100
"""

# The failing transaction of the issue about recovery on btrfs: the last
# op fails, so the whole transaction is rolled back.
FAILING_TX = """\
open 0 f1 O_WRONLY
pwrite 0 @new1 0
close 0
setxattr f2 user.v "changed"
truncate f2 10
mkdir newd
rename f3 newd/f3
open 1 newfile O_WRONLY|O_CREAT|O_EXCL 0600
pwrite 1 "fresh" 0
close 1
unlink does-not-exist
"""


def _many_tx():
    lines = ["mkdir new"]
    for i in range(100):
        lines.append("open 0 new/f%03d O_WRONLY|O_CREAT|O_EXCL 0644" % i)
        lines.append('pwrite 0 "%s" 0' % (("file %03d " % i) * (1 + i % 7)))
        lines.append("close 0")
    return "\n".join(lines) + "\n"


F123 = [_file("f1", 8192, 1), _file("f2", 6000, 2, {"user.v": b"old"}),
        _file("f3", 3000, 3)]

DATA = {
    "new1": _data(11, 4096),
    "new2": _data(12, 2000),
    "obj": _data(13, 65536),
    "index": _data(14, 4096),
    "big": _data(15, 1 << 20),
}

# name -> (initial tree, [tx text, ...], expected exit of each step,
#          promise): "durable" (before or after, after once it returned 0),
#          "atomic" (before or after, whenever) or "none": crash-only
#          transactions promise nothing across power loss (fstx(7)), so
#          their torn states are counted apart and fail nothing.
WORKLOADS = {
    "overwrite": (F123, [OVERWRITE_TX], [0], "durable"),
    "objput": ([_file("index", 4096, 20), _dir("objs"),
                _file("objs/obj1", 65536, 21)], [OBJPUT_TX], [0], "durable"),
    "replace": ([_file("cur", 1 << 20, 30), _file("other", 10000, 31)],
                [REPLACE_TX], [0], "durable"),
    "many": ([_file("f0", 100, 40)], [_many_tx()], [0], "durable"),
    "mixed": ([_file("a", 5000, 50, {"user.x": b"xv", "user.y": b"yv"}),
               _file("b", 3000, 51), _dir("e"), _dir("p"),
               _file("p/q", 700, 52)], [MIXED_TX], [0], "durable"),
    "failing": (F123, [FAILING_TX], [1], "durable"),
    "lazy": (F123, ["option lazy\n" + OVERWRITE_TX.replace(
        'setxattr f1 user.a "first"\nsetxattr f2 user.v "new-value"\n', "")],
        [0], "atomic"),
    "crashonly": ([_file("a", 5000, 50, {"user.x": b"xv", "user.y": b"yv"}),
                   _file("b", 3000, 51), _dir("e"), _dir("p"),
                   _file("p/q", 700, 52)],
                  ["option crash-only\n" + MIXED_TX], [0], "none"),
    "twice": ([_file("cur", 1 << 20, 30), _file("other", 10000, 31),
               _file("f1", 8192, 1), _file("f2", 6000, 2, {"user.v": b"old"})],
              [OVERWRITE_TX, REPLACE_TX], [0, 0], "durable"),
}

ALL = list(WORKLOADS)


def build_tree(root, name):
    """Create the workload's initial tree under root."""
    for ent in WORKLOADS[name][0]:
        path = os.path.join(root, ent[1])
        if ent[0] == "dir":
            os.mkdir(path, ent[2])
            os.chmod(path, ent[2])
            continue
        with open(path, "wb") as f:
            f.write(ent[2])
        os.chmod(path, ent[4])
        for k, v in ent[3].items():
            os.setxattr(path, k, v)


def write_tx(outdir, name):
    """Write the workload's data files and tx files; return the tx paths."""
    for k, v in DATA.items():
        with open(os.path.join(outdir, k), "wb") as f:
            f.write(v)
    paths = []
    for i, text in enumerate(WORKLOADS[name][1]):
        p = os.path.join(outdir, "%s.%d.tx" % (name, i))
        with open(p, "w") as f:
            f.write(text)
        paths.append(p)
    return paths


# The non-atomic stand-in: the replace and overwrite ops done with plain
# syscalls in order, each made durable before the next, as a careful
# program without transactions would.
def standin(root):
    def fsync_path(p, d=False):
        fd = os.open(p, os.O_RDONLY | (os.O_DIRECTORY if d else 0))
        os.fsync(fd)
        os.close(fd)

    fd = os.open(os.path.join(root, "f1"), os.O_WRONLY)
    os.pwrite(fd, DATA["new1"], 0)
    os.fsync(fd)
    os.close(fd)
    os.setxattr(os.path.join(root, "f1"), "user.a", b"first")
    fsync_path(os.path.join(root, "f1"))
    fd = os.open(os.path.join(root, "cur.tmp"),
                 os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.pwrite(fd, DATA["big"], 0)
    os.fsync(fd)
    os.close(fd)
    os.rename(os.path.join(root, "cur.tmp"), os.path.join(root, "cur"))
    fsync_path(root, True)
    os.unlink(os.path.join(root, "other"))
    fsync_path(root, True)


# Where the recover variant kills the first transaction (strace injects
# SIGKILL on entry to the Nth call of the syscall): part way through its
# steps where it has several, else at the first fsync of barrier 2
# (the changes made, no commit record yet).
KILL_AT = {
    "overwrite": ("fsync", 1),
    "objput": ("renameat2", 2),
    "replace": ("renameat2", 4),
    "many": ("renameat2", 150),
    "mixed": ("renameat2", 8),
    "failing": ("renameat2", 7),
    "lazy": ("pwrite64", 13),
    "crashonly": ("renameat2", 8),
    "twice": ("fsync", 1),
}
