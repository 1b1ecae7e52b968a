#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gen_names.py SEED N [any] - N random transactions of name changes, in
the transaction text format (fstx-tx(5)), each ended by a line "%%".

They run on the tree of test_crash.c and test_powerloss.c (t_populate())
with more names of one file (names_tree(): d/h and hard are names of b,
d/e/g of a, y of p/q/z), and favour what an undo is hard to get right:
names given back to the file that had them, links made at names a file
had, directories moved away and back around a change under them,
exchanges, objects replaced.  Each op is tried on a scratch copy and kept
only if it succeeds, so a transaction fails only where it means to: half
of them hold "rename nothere ln" at a random place.  Every transaction
starts with a trusted.* xattr, which keeps it on the undo journal's way;
with "any", none does, and each takes the way fstx chooses (the
write-ahead log's name entries where it can).
The same SEED gives the same transactions on any filesystem."""
import ctypes
import os
import random
import shutil
import sys
import tempfile

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_EXCHANGE = 2

# new names: at the top, or under an existing directory
TOP = ["d2", "e", "n", "m", "d", "p", "x"]
KID = ["h", "c", "n", "z", "g", "q", "e", "x"]


def exchange(a, b):
    if libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def build(root):
    """The test tree: t_populate() plus names_tree() (contents aside)."""
    def w(p, s):
        full = os.path.join(root, p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(s)
    w("a", "alpha\n")
    w("b", "bravo bravo\n")
    w("big", "x" * 100)
    w("d/c", "charlie\n")
    w("d/e/f", "foxtrot\n")
    w("old", "old\n")
    w("p/q/z", "zz\n")
    os.mkdir(os.path.join(root, "empty"), 0o750)
    os.symlink("d/c", os.path.join(root, "ln"))
    for src, dst in (("b", "hard"), ("b", "d/h"), ("a", "d/e/g"), ("p/q/z", "y")):
        os.link(os.path.join(root, src), os.path.join(root, dst))


def listing(root):
    out = []
    for dp, dns, fns in os.walk(root):
        rel = os.path.relpath(dp, root)
        out += [n if rel == "." else rel + "/" + n for n in dns + fns]
    return sorted(out)


class Tx:
    def __init__(self, rng, root):
        self.rng, self.root = rng, root
        self.ops = []
        self.gone = []      # names something had, now absent
        self.goneino = {}   # name -> the inode it had
        self.dirs_gone = []
        self.snap = {}      # name -> the inode it had when last seen

    def j(self, p):
        return os.path.join(self.root, p)

    def isdir(self, p):
        return os.path.isdir(self.j(p)) and not os.path.islink(self.j(p))

    def newname(self, dirs):
        c = self.rng.random()
        if self.gone and c < 0.45:
            return self.rng.choice(self.gone)
        if c < 0.7 and dirs:
            return self.rng.choice(dirs) + "/" + self.rng.choice(KID)
        return self.rng.choice(TOP)

    def give_back(self, kind, names):
        """A name an inode had, given back to it (rename or link)."""
        by_ino = {}
        for g in self.gone:
            if g in self.goneino:
                by_ino.setdefault(self.goneino[g], []).append(g)
        same = []
        for p in names:
            tl = by_ino.get(os.lstat(self.j(p)).st_ino)
            if tl and not os.path.lexists(self.j(tl[0])):
                same.append((p, tl))
        if not same or self.rng.random() >= 0.7:
            return None
        s, tl = self.rng.choice(same)
        t = self.rng.choice(tl)
        if os.path.lexists(self.j(t)) or (kind == "link" and self.isdir(s)):
            return ""
        if kind == "link":
            os.link(self.j(s), self.j(t), follow_symlinks=False)
            return f"link {s} {t}"
        os.rename(self.j(s), self.j(t))
        self.gone.append(s)
        return f"rename {s} {t}"

    def dance(self, dirs):
        """A directory moved away, a name in it changed, moved back."""
        rng = self.rng
        if not dirs:
            return ""
        D, T = rng.choice(dirs), rng.choice(["d2", "e", "n"])
        if os.path.lexists(self.j(T)) or T.startswith(D + "/"):
            return ""
        kids = sorted(os.listdir(self.j(D)))
        if not kids:
            return ""
        k = rng.choice(kids)
        how = rng.choice(["unlink", "rename"])
        if how == "unlink" and self.isdir(D + "/" + k):
            return ""
        os.rename(self.j(D), self.j(T))
        try:
            if how == "unlink":
                os.unlink(self.j(T + "/" + k))
                inner = f"unlink {T}/{k}"
            else:
                os.rename(self.j(T + "/" + k), self.j(T + "/" + k + "2"))
                inner = f"rename {T}/{k} {T}/{k}2"
        finally:
            os.rename(self.j(T), self.j(D))
        self.gone.append(D + "/" + k)
        return f"rename {D} {T}\n{inner}\nrename {T} {D}"

    def one(self, kind, names):
        rng, j = self.rng, self.j
        dirs = [p for p in names if self.isdir(p)]
        nondirs = [p for p in names if not self.isdir(p)]
        files = [p for p in nondirs if os.path.isfile(j(p)) and not os.path.islink(j(p))]
        if kind in ("rename", "link"):
            line = self.give_back(kind, names)
            if line is not None:
                return line
        if kind == "rename":
            s, t = rng.choice(names), self.newname(dirs)
            if os.path.lexists(j(t)):
                return ""
            os.rename(j(s), j(t))
            self.gone.append(s)
            if self.isdir(t):
                self.dirs_gone.append(s)
            return f"rename {s} {t}"
        if kind in ("replace_name", "exchange"):  # two names the tree has
            s, t = rng.choice(names), rng.choice(names)
            if s == t:
                return ""
            if kind == "exchange":
                exchange(j(s), j(t))
                return f"rename {s} {t} exchange"
            os.rename(j(s), j(t))
            self.gone.append(s)
            return f"rename {s} {t}"
        if kind == "link":
            if not files:
                return ""
            s, t = rng.choice(files), self.newname(dirs)
            os.link(j(s), j(t), follow_symlinks=False)
            return f"link {s} {t}"
        if kind == "unlink":
            if not nondirs:
                return ""
            s = rng.choice(nondirs)
            os.unlink(j(s))
            self.gone.append(s)
            return f"unlink {s}"
        if kind == "mkdir":
            t = (rng.choice(self.dirs_gone) if self.dirs_gone and rng.random() < 0.6
                 else self.newname(dirs))
            os.mkdir(j(t))
            return f"mkdir {t}"
        if kind == "rmdir":
            s = rng.choice(dirs)
            os.rmdir(j(s))
            self.gone.append(s)
            self.dirs_gone.append(s)
            return f"rmdir {s}"
        if kind == "symlink":
            t = self.newname(dirs)
            os.symlink("d/c", j(t))
            return f"symlink d/c {t}"
        if kind == "write":
            t = rng.choice(files) if files and rng.random() < 0.5 else self.newname(dirs)
            with open(j(t), "w") as f:
                f.write("W\n")
            return 'write %s "W\\n"' % t
        if kind == "replace":
            t = rng.choice(files) if files and rng.random() < 0.7 else self.newname(dirs)
            if self.isdir(t):
                return ""
            tmp = j(".tmpnew")
            with open(tmp, "w") as f:
                f.write("R\n")
            os.chmod(tmp, 0o644)
            try:
                os.rename(tmp, j(t))
            except OSError:
                os.unlink(tmp)
                raise
            return 'replace %s "R\\n"' % t
        return self.dance(dirs)


KINDS = ["rename", "replace_name", "exchange", "link", "unlink", "mkdir", "rmdir",
         "symlink", "write", "replace", "dance"]
WEIGHTS = [20, 8, 10, 12, 8, 10, 3, 3, 4, 3, 8]


def gen_tx(rng, root):
    shutil.rmtree(root, ignore_errors=True)
    os.mkdir(root)
    build(root)
    tx = Tx(rng, root)
    nops = rng.randint(2, 7)
    for _ in range(200):
        if len(tx.ops) >= nops:
            break
        names = listing(root)
        for p in names:
            tx.snap[p] = os.lstat(os.path.join(root, p)).st_ino
        for g in tx.gone:  # the inode a gone name had, when it left
            if g not in tx.goneino and g in tx.snap:
                tx.goneino[g] = tx.snap[g]
        try:
            line = tx.one(rng.choices(KINDS, WEIGHTS)[0], names)
        except OSError:
            line = ""
        if line:
            tx.ops.append(line)
    return tx.ops


def main():
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] != "any"):
        sys.exit("usage: gen_names.py SEED N [any]")
    seed, n = int(sys.argv[1]), int(sys.argv[2])
    first = "" if len(sys.argv) == 4 else 'setxattr a trusted.x "v"\n'

    rng = random.Random(seed)
    root = tempfile.mkdtemp(prefix="fstx-gen-")
    out = []
    try:
        for _ in range(n):
            lines = "\n".join(gen_tx(rng, root + "/t")).split("\n")
            if rng.random() < 0.5:
                lines.insert(rng.randint(0, len(lines)), "rename nothere ln")
            out.append(first + "\n".join(lines) + "\n%%\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    sys.stdout.write("".join(out))


main()
