#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Power-loss check of fstx on the real block I/O of ext4, xfs and btrfs.

For each filesystem and workload: make the filesystem on a small sparse
image, build the workload's initial tree, then record (tools/blkrec, a
FUSE filesystem under a direct-I/O loop device) every write and flush the
filesystem issues while `fstx run` executes; build crash states from the
log, mount each (the filesystem replays its journal), run `fstx recover`
as after a reboot (a fresh boot id in a private mount namespace) and
compare the tree with the legal ones.  See docs/powerloss-block.md.

    blockcrash.py run --fstx PATH [--blkrec PATH] [--fs ext4,xfs,btrfs]
                      [--workload NAME,...] [--variant plain,bgsync,recover]
                      [--max-states N] [--seed N] [--work DIR]
    blockcrash.py replay --fstx PATH --fs FS IMAGE

Workload "standin" is the non-atomic stand-in: it must be found torn.
Exit status of run: 0 when every state of every fstx workload was legal and
the stand-in (if run) was found torn on each filesystem, 1 otherwise, 77
when the kernel lacks FUSE, loop devices or every filesystem asked for.
"""
import argparse
import concurrent.futures
import fcntl
import hashlib
import itertools
import json
import mmap
import os
import queue
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

REC_WRITE, REC_FLUSH, REC_MARK = 1, 2, 3
HDR = struct.Struct("<IIQQQ")
MAGIC = 0x43455242
SECTOR = 4096
LOCK = "/run/fstx-blockcrash-loop.lock"
SKIP = 77

# Image sizes: as small as each mkfs allows.
SIZES = {"ext4": 64 << 20, "xfs": 300 << 20, "btrfs": 128 << 20}
MKFS = {"ext4": ["mkfs.ext4", "-q", "-F"], "xfs": ["mkfs.xfs", "-q", "-f"],
        "btrfs": ["mkfs.btrfs", "-q", "-f"]}

VERBOSE = False


def log(*a):
    if VERBOSE:
        print(*a, file=sys.stderr, flush=True)


def sh(*cmd, check=True, **kw):
    log("+", " ".join(cmd))
    return subprocess.run(cmd, check=check, **kw)


class Cleanup:
    """Every mount, loop device and FUSE daemon, undone in reverse order."""

    def __init__(self):
        self.items = []

    def push(self, kind, arg):
        self.items.append((kind, arg))

    def pop(self, kind, arg):
        self.items.remove((kind, arg))

    def run(self):
        while self.items:
            kind, arg = self.items.pop()
            if kind == "mount":
                try:
                    umount(arg)
                except RuntimeError:
                    subprocess.run(["umount", "-l", arg])
            elif kind == "loop":
                with loop_lock():
                    subprocess.run(["losetup", "-d", arg],
                                   stderr=subprocess.DEVNULL)
            elif kind == "fuse":
                try:
                    fuse_umount(arg)
                except RuntimeError:
                    subprocess.run(["fusermount3", "-uz", arg])
            elif kind == "proc":
                try:
                    arg.kill()
                    arg.wait()
                except OSError:
                    pass


CLEAN = Cleanup()
SAME_FSID = threading.Lock()


def shared_root(path):
    """Make path a shared mount.  Each `fstx recover` runs in a new mount
    namespace, which gets a copy of every mount of the system at that
    moment; as a slave of path, its copies of the mounts below path go
    away when they are unmounted here.  A private copy would keep the
    filesystem alive: its unmount, and the last writes of its setup,
    would come only when that namespace ended, after the image was read."""
    sh("mount", "--bind", path, path)
    CLEAN.push("mount", path)
    sh("mount", "--make-shared", path)


def fuse_umount(mnt):
    """A detached loop device lets go of its backing file only when the
    last opener (udev's probe, say) closes it: retry while busy."""
    for _ in range(100):
        if subprocess.run(["fusermount3", "-u", mnt],
                          stderr=subprocess.DEVNULL).returncode == 0:
            return
        time.sleep(0.1)
    raise RuntimeError("cannot unmount %s" % mnt)


class loop_lock:
    """Loop attach and detach are serialised across processes."""

    def __enter__(self):
        self.fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *a):
        os.close(self.fd)


def data_extents(fd):
    """(offset, length) of the data (non-hole) ranges of a file."""
    size = os.fstat(fd).st_size
    off = 0
    while off < size:
        try:
            start = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:
            return
        end = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, end - start
        off = end


def sparse_copy(src, dst):
    """Copy src's data ranges only: the copy stays as sparse as src."""
    with open(src, "rb") as i, open(dst, "wb") as o:
        o.truncate(os.fstat(i.fileno()).st_size)
        for off, ln in list(data_extents(i.fileno())):
            while ln > 0:
                n = os.copy_file_range(i.fileno(), o.fileno(), ln, off, off)
                if n <= 0:
                    raise OSError("copy_file_range: short copy")
                off += n
                ln -= n


def verify_loop(dev, image):
    """The loop device serves the image's bytes, not blocks cached from an
    earlier binding of the same device number."""
    with open(image, "rb") as img, open(dev, "rb") as d:
        for off, ln in data_extents(img.fileno()):
            pos = off
            while pos < off + ln:
                n = min(1 << 20, off + ln - pos)
                if os.pread(img.fileno(), n, pos) != os.pread(d.fileno(), n,
                                                              pos):
                    return False
                pos += n
    return True


def loop_attach(image, direct=False, backing=None):
    """A loop device on image, checked against backing (default: image),
    the plain file whose bytes it must serve."""
    for _ in range(5):
        with loop_lock():
            cmd = ["losetup", "-f", "--show"]
            if direct:
                cmd.append("--direct-io=on")
            dev = subprocess.run(cmd + [image], check=True,
                                 capture_output=True,
                                 text=True).stdout.strip()
            CLEAN.push("loop", dev)
            subprocess.run(["blockdev", "--flushbufs", dev], check=True)
            if verify_loop(dev, backing or image):
                return dev
            print("blockcrash: %s served stale blocks; retrying" % dev,
                  file=sys.stderr)
            subprocess.run(["losetup", "-d", dev])
            CLEAN.pop("loop", dev)
    raise RuntimeError("no loop device serves %s correctly" % image)


def loop_detach(dev):
    with loop_lock():
        for _ in range(50):
            if subprocess.run(["losetup", "-d", dev],
                              stderr=subprocess.DEVNULL).returncode == 0:
                break
            time.sleep(0.1)
    CLEAN.pop("loop", dev)


def mount(dev, mnt, fs):
    sh("mount", "-t", fs, dev, mnt)
    CLEAN.push("mount", mnt)


def umount(mnt):
    """A namespace of a `fstx recover` that has just exited can still hold
    its copy of the mount for a moment: retry while busy."""
    for _ in range(100):
        r = subprocess.run(["umount", mnt], capture_output=True, text=True)
        if r.returncode == 0:
            if ("mount", mnt) in CLEAN.items:
                CLEAN.pop("mount", mnt)
            return
        time.sleep(0.1)
    raise RuntimeError("umount %s: %s" % (mnt, r.stderr.strip()))


# ---------------------------------------------------------------- trees

def dump_tree(root):
    """Everything the check compares, as a JSON-able dict; .fstx ignored."""
    out = {}

    def xattrs(p):
        try:
            names = os.listxattr(p, follow_symlinks=False)
        except OSError:
            return {}
        return {n: os.getxattr(p, n, follow_symlinks=False).hex()
                for n in sorted(names) if n.startswith("user.")}

    def walk(rel):
        p = os.path.join(root, rel) if rel else root
        st = os.lstat(p)
        mode = st.st_mode
        ent = {"mode": oct(mode & 0o7777), "xattrs": xattrs(p)}
        if os.path.islink(p):
            ent["type"] = "symlink"
            ent["target"] = os.readlink(p)
            ent.pop("xattrs")
        elif os.path.isdir(p):
            ent["type"] = "dir"
            for name in sorted(os.listdir(p)):
                if not rel and name == ".fstx":
                    continue
                walk(os.path.join(rel, name))
        elif os.path.isfile(p):
            ent["type"] = "file"
            ent["size"] = st.st_size
            ent["nlink"] = st.st_nlink
            with open(p, "rb") as f:
                ent["sha256"] = hashlib.sha256(f.read()).hexdigest()
        else:
            ent["type"] = "other"
        out[rel or "."] = ent

    walk("")
    return out


def tree_diff(a, b):
    """A short description of how tree a differs from tree b."""
    d = []
    for k in sorted(set(a) | set(b)):
        if k not in a:
            d.append("-" + k)
        elif k not in b:
            d.append("+%s(%s%s)" % (k, a[k]["type"],
                                    ",%dB" % a[k]["size"] if "size" in a[k]
                                    else ""))
        elif a[k] != b[k]:
            d.append("~%s(%s)" % (k, ",".join(
                f for f in a[k] if a[k].get(f) != b[k].get(f))))
    return " ".join(d)


# ------------------------------------------------------------ recording

def parse_log(path):
    """[(type, off, len, payload offset in the log)], and the mmap."""
    f = open(path, "rb")
    size = os.fstat(f.fileno()).st_size
    mm = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) if size else b""
    recs = []
    pos = 0
    while pos < size:
        magic, typ, _seq, off, ln = HDR.unpack_from(mm, pos)
        if magic != MAGIC:
            raise RuntimeError("%s: bad record at %d" % (path, pos))
        pos += HDR.size
        recs.append((typ, off, ln, pos))
        pos += ln
    return recs, mm


def bg_fsync(root, stop):
    """Another process's fsync of every file and directory of the domain
    (not .fstx), and sync -f, in a loop until stop is set."""
    while not stop.is_set():
        for dirpath, dirs, files in os.walk(root):
            if dirpath == root and ".fstx" in dirs:
                dirs.remove(".fstx")
            for n in [dirpath] + [os.path.join(dirpath, f) for f in files]:
                try:
                    fd = os.open(n, os.O_RDONLY | os.O_NOFOLLOW)
                except OSError:
                    continue
                try:
                    os.fsync(fd)
                except OSError:
                    pass
                os.close(fd)
        subprocess.run(["sync", "-f", root], stderr=subprocess.DEVNULL)
        time.sleep(0.005)


def slow(cmd, delay_us):
    """cmd under strace, every syscall delayed: the filesystem then commits
    intermediate states (its own timers, the background fsync)."""
    return ["strace", "-f", "-qq", "-o", "/dev/null", "-e",
            "inject=all:delay_enter=%d" % delay_us] + cmd


def record(a, fs, wl, variant, wdir):
    """Make the filesystem and initial tree, record the run; returns the
    trees [T0 set, T1, ...] and the step results."""
    img = os.path.join(wdir, "disk.img")
    base = os.path.join(wdir, "base.img")
    mnt = os.path.join(wdir, "mnt")
    fmnt = os.path.join(wdir, "fuse")
    for d in (mnt, fmnt):
        os.makedirs(d, exist_ok=True)
    with open(img, "wb") as f:
        f.truncate(SIZES[fs])
    sh(*MKFS[fs], img, stdout=subprocess.DEVNULL)
    dom = os.path.join(mnt, "d")
    standin = wl == "standin"
    init = "twice" if standin else wl
    txs = [] if standin else workloads.write_tx(wdir, wl)
    expect = [0] if standin else workloads.WORKLOADS[wl][2]

    # The initial tree, not recorded.
    dev = loop_attach(img)
    mount(dev, mnt, fs)
    os.mkdir(dom)
    workloads.build_tree(dom, init)
    t0 = [dump_tree(dom)]
    if variant == "recover":
        # The transaction completed on a twin gives the other legal tree;
        # then it is killed part way on the domain, and the recorded
        # step is the recovery.
        twin = os.path.join(mnt, "twin")
        os.mkdir(twin)
        workloads.build_tree(twin, init)
        for tx in txs[:1]:
            subprocess.run([a.fstx, "run", twin, tx],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        t0.append(dump_tree(twin))
        shutil.rmtree(twin)
        sysc, nth = workloads.KILL_AT[wl]
        r = subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-e",
                            "inject=%s:signal=SIGKILL:when=%d" % (sysc, nth),
                            a.fstx, "run", dom, txs[0]],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode not in (-signal.SIGKILL, 128 + signal.SIGKILL):
            raise RuntimeError("the run to kill at %s #%d exited %d" %
                               (sysc, nth, r.returncode))
        cmds = [[a.fstx, "recover", dom]]
        expect = [0]
    elif standin:
        cmds = [[sys.executable, os.path.abspath(__file__), "_standin",
                 dom]]
    else:
        cmds = [[a.fstx, "run", dom, tx] for tx in txs]
    umount(mnt)
    loop_detach(dev)
    sparse_copy(img, base)

    # Recording.
    logf = os.path.join(wdir, "log")
    rec = subprocess.Popen([a.blkrec, img, logf, fmnt])
    CLEAN.push("proc", rec)
    for _ in range(100):
        if os.path.exists(os.path.join(fmnt, "ctl")):
            break
        time.sleep(0.05)
    else:
        raise RuntimeError("blkrec did not mount")
    CLEAN.push("fuse", fmnt)
    ctl = os.path.join(fmnt, "ctl")

    def mark(text):
        with open(ctl, "w") as f:
            f.write(text + "\n")

    dev = loop_attach(os.path.join(fmnt, "disk.img"), direct=True,
                      backing=img)
    mount(dev, mnt, fs)
    trees = [t0]
    statuses = []
    for i, cmd in enumerate(cmds):
        stop = threading.Event()
        th = None
        if variant == "bgsync":
            cmd = slow(cmd, a.delay_us)
            th = threading.Thread(target=bg_fsync, args=(dom, stop))
        mark("start %d" % i)
        if th:
            th.start()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        stop.set()
        if th:
            th.join()
        mark("ret %d %d" % (i, r.returncode))
        statuses.append(r.returncode)
        trees.append(dump_tree(dom))
        if (r.returncode == 0) != (expect[i] == 0):
            raise RuntimeError("step %d exited %d (expected %d): %s" %
                               (i, r.returncode, expect[i], r.stderr))
    umount(mnt)
    loop_detach(dev)
    fuse_umount(fmnt)
    CLEAN.pop("fuse", fmnt)
    rec.wait()
    CLEAN.pop("proc", rec)
    return trees, statuses


# ------------------------------------------------------------ crash states

def crash_states(recs, max_states, rng):
    """The states: (crash point p, applied write indices, torn write or
    None with its kept 4 KiB sectors)."""
    n = len(recs)
    points = set([0, n])
    run_start = None
    for i, r in enumerate(recs):
        if r[0] == REC_WRITE:
            if run_start is None:
                run_start = i
        else:
            if run_start is not None:
                points.add((run_start + i) // 2 + 1)  # inside the run
                points.add(i)                         # all issued, unflushed
                run_start = None
            points.add(i + 1)                         # after flush or mark
    if run_start is not None:
        points.add((run_start + n) // 2 + 1)
    first, rest = [], []
    for p in sorted(points):
        last_flush = max([i for i in range(p) if recs[i][0] == REC_FLUSH],
                         default=-1)
        pending = [i for i in range(last_flush + 1, p)
                   if recs[i][0] == REC_WRITE]
        first.append((p, tuple(pending), None))
        first.append((p, (), None))
        subs = []
        if len(pending) <= 4:
            for k in range(1, len(pending)):
                subs += list(itertools.combinations(pending, k))
        else:
            for _ in range(8):
                subs.append(tuple(w for w in pending if rng.random() < 0.5))
        for s in subs:
            rest.append((p, s, None))
        big = [w for w in pending if recs[w][2] > SECTOR]
        for _ in range(2 if big else 0):
            w = rng.choice(big)
            nsec = (recs[w][2] + SECTOR - 1) // SECTOR
            keep = tuple(s for s in range(nsec) if rng.random() < 0.5)
            others = tuple(x for x in pending if x != w and
                           rng.random() < 0.5)
            rest.append((p, others, (w, keep)))
    rng.shuffle(rest)
    seen = set()
    out = []
    for st in first + rest:
        key = (st[0], frozenset(st[1]), st[2])
        if key in seen:
            continue
        seen.add(key)
        out.append(st)
    if max_states and len(out) > max_states:
        # Always keep the states at each mark with no unflushed write;
        # sample the rest.
        marks = [s for s in out if s[1] == () and s[0] > 0 and
                 recs[s[0] - 1][0] == REC_MARK]
        others = [s for s in out if s not in marks]
        rng.shuffle(others)
        out = marks[:max_states] + others[:max(0, max_states - len(marks))]
    return sorted(out, key=lambda s: (s[0], len(s[1])))


def build_state(base, out, recs, mm, p, subset, torn):
    sparse_copy(base, out)
    last_flush = max([i for i in range(p) if recs[i][0] == REC_FLUSH],
                     default=-1)
    with open(out, "r+b") as f:
        fd = f.fileno()
        for i in list(range(last_flush)) + list(subset):
            t, off, ln, pos = recs[i]
            if t == REC_WRITE:
                os.pwrite(fd, mm[pos:pos + ln], off)
        if torn:
            t, off, ln, pos = recs[torn[0]]
            for s in torn[1]:
                a = s * SECTOR
                b = min(ln, a + SECTOR)
                os.pwrite(fd, mm[pos + a:pos + b], off + a)


def marks_in(recs, mm, p):
    out = []
    for t, _o, ln, pos in recs[:p]:
        if t == REC_MARK:
            out.append(bytes(mm[pos:pos + ln]).decode())
    return out


def legal_trees(trees, statuses, marks, atomic_only):
    """The trees a state may recover to: T_k and T_{k+1} where k steps
    returned (T0 may hold several trees: the recovery variant)."""
    flat = lambda t: t if isinstance(t, list) else [t]  # noqa: E731
    if atomic_only:
        return [x for t in trees for x in flat(t)], "any"
    k = sum(1 for m in marks if m.startswith("ret "))
    legal = list(flat(trees[k]))
    if k + 1 < len(trees):
        legal += flat(trees[k + 1])
    return legal, k


def check_state(a, fs, img, boot_id_file):
    """Mount the state, recover as after a reboot, dump.  Returns
    (kind, recover rc, message, tree)."""
    mnt = img + ".mnt"
    os.makedirs(mnt, exist_ok=True)
    dev = loop_attach(img)
    try:
        # The states are copies of one filesystem, with one UUID: xfs
        # refuses a second mount of it unless told; btrfs would take two
        # devices of one fsid for one filesystem, so they take turns.
        opts = ["-o", "nouuid"] if fs == "xfs" else []
        if fs == "btrfs":
            SAME_FSID.acquire()
        r = subprocess.run(["mount", "-t", fs] + opts + [dev, mnt],
                           capture_output=True, text=True)
        if r.returncode != 0:
            if fs == "btrfs":
                SAME_FSID.release()
            return "unmountable", None, r.stderr.strip(), None
        CLEAN.push("mount", mnt)
        try:
            with open(boot_id_file, "w") as f:
                f.write(str(uuid.uuid4()) + "\n")
            dom = os.path.join(mnt, "d")
            r = subprocess.run(
                ["unshare", "-m", "--propagation", "slave", "sh", "-c",
                 'mount --bind "$1" /proc/sys/kernel/random/boot_id && '
                 'exec "$2" recover "$3"', "sh", boot_id_file, a.fstx, dom],
                capture_output=True, text=True)
            tree = dump_tree(dom) if os.path.isdir(dom) else {}
            return ("ok" if r.returncode == 0 else "failed", r.returncode,
                    (r.stdout + r.stderr).strip(), tree)
        finally:
            try:
                umount(mnt)
            finally:
                if fs == "btrfs":
                    SAME_FSID.release()
    finally:
        loop_detach(dev)


def run_one(a, fs, wl, variant, root):
    name = "%s-%s-%s" % (fs, wl, variant)
    wdir = os.path.join(root, name)
    os.makedirs(wdir, exist_ok=True)
    t_start = time.time()
    trees, statuses = record(a, fs, wl, variant, wdir)
    recs, mm = parse_log(os.path.join(wdir, "log"))
    rng = random.Random("%s/%d" % (name, a.seed))
    states = crash_states(recs, a.max_states, rng)
    promise = "durable" if wl == "standin" else workloads.WORKLOADS[wl][3]
    atomic_only = promise != "durable"
    if wl == "standin" and trees[0][0] == trees[1]:
        raise RuntimeError("stand-in changed nothing")
    cnt = dict(points=len(set(s[0] for s in states)), states=len(states),
               before=0, after=0, torn=0, unmountable=0, recovery_failed=0,
               torn_unpromised=0)
    nflush = sum(1 for r in recs if r[0] == REC_FLUSH)
    nwrite = sum(1 for r in recs if r[0] == REC_WRITE)
    base = os.path.join(wdir, "base.img")
    plan = []
    by_key = {}
    for p, subset, torn in states:
        marks = marks_in(recs, mm, p)
        legal, k = legal_trees(trees, statuses, marks, atomic_only)
        last_flush = max([i for i in range(p) if recs[i][0] == REC_FLUSH],
                         default=-1)
        key = (last_flush, frozenset(subset), torn)
        plan.append((p, subset, torn, marks, legal, key))
        by_key.setdefault(key, (p, subset, torn, []))[3].append(legal)

    # Each distinct image is checked once, by one of a.jobs workers; the
    # image of a state that is bad for some crash point is kept.
    slots = queue.Queue()
    for i in range(max(1, a.jobs)):
        slots.put(i)
    kept = []
    lock = threading.Lock()

    def check(key):
        p, subset, torn, legals = by_key[key]
        slot = slots.get()
        img = os.path.join(wdir, "state%d.img" % slot)
        try:
            build_state(base, img, recs, mm, p, subset, torn)
            kind, rc, msg, tree = check_state(
                a, fs, img, os.path.join(wdir, "boot_id%d" % slot))
            keepimg = None
            if kind != "ok" or any(tree not in lg for lg in legals):
                with lock:
                    if len(kept) < a.keep:
                        keepimg = os.path.join(wdir, "bad-%d.img" %
                                               len(kept))
                        kept.append(keepimg)
                if keepimg:
                    sparse_copy(img, keepimg)
            return kind, rc, msg, tree, keepimg
        finally:
            if os.path.exists(img):
                os.unlink(img)
            slots.put(slot)

    ex = concurrent.futures.ThreadPoolExecutor(max(1, a.jobs))
    try:
        cache = dict(zip(by_key, ex.map(check, list(by_key))))
    finally:
        # On an interrupt, the states not started are dropped.
        ex.shutdown(wait=True, cancel_futures=True)

    bad = []
    before = trees[0][:1]
    for p, subset, torn, marks, legal, key in plan:
        kind, rc, msg, tree, keepimg = cache[key]
        verdict = kind
        if kind == "ok":
            if tree not in legal:
                verdict = "torn"
            elif tree in before:
                verdict = "before"
            else:
                verdict = "after"
        if verdict == "torn" and promise == "none":
            verdict = "torn-unpromised"
        cnt[{"failed": "recovery_failed", "torn-unpromised":
             "torn_unpromised"}.get(verdict, verdict)] += 1
        if verdict in ("torn", "failed", "unmountable", "torn-unpromised"):
            desc = "p=%d/%d marks=%s unflushed-kept=%d torn=%s" % (
                p, len(recs), marks, len(subset), bool(torn))
            why = msg if not verdict.startswith("torn") else min(
                (tree_diff(tree, t) for t in legal), key=len)
            line = "%s %s: %s: %s" % (name, verdict, desc, why[:300])
            if keepimg and verdict != "torn-unpromised":
                line += ("\n    replay: %s replay --fstx %s --fs %s %s" %
                         (os.path.abspath(__file__), a.fstx, fs, keepimg))
            bad.append(line)
    cnt["secs"] = int(time.time() - t_start)
    print("%-28s points %4d states %4d before %4d after %4d torn %3d "
          "unmountable %3d recovery-failed %3d  (log: %d writes, %d "
          "flushes; exits %s; %ds)" % (
              name, cnt["points"], cnt["states"], cnt["before"],
              cnt["after"], cnt["torn"], cnt["unmountable"],
              cnt["recovery_failed"], nwrite, nflush, statuses, cnt["secs"]),
          flush=True)
    if cnt["torn_unpromised"]:
        print("  %s: %d torn states, which crash-only transactions do not "
              "promise to avoid across power loss (not counted as torn)" %
              (name, cnt["torn_unpromised"]), flush=True)
    for line in bad[:a.show]:
        print("  " + line, flush=True)
    if len(bad) > a.show:
        print("  ... %d more" % (len(bad) - a.show), flush=True)
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(dict(fs=fs, workload=wl, variant=variant,
                                    **cnt)) + "\n")
    # Only the kept images and the log stay (the work dir is on tmpfs).
    if isinstance(mm, mmap.mmap):
        mm.close()
    if a.keep_work:
        pass
    elif wl == "standin" or not any(cnt[k] for k in
                                    ("torn", "unmountable",
                                     "recovery_failed")):
        shutil.rmtree(wdir, ignore_errors=True)
    else:
        for f in ("base.img", "disk.img"):
            os.unlink(os.path.join(wdir, f))
    return cnt


def have(fs):
    if not os.path.exists("/dev/fuse") or not os.path.exists(
            "/dev/loop-control"):
        return False
    with open("/proc/filesystems") as f:
        known = f.read().split()
    if fs not in known:
        r = subprocess.run(["modprobe", fs], stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            return False
    return shutil.which(MKFS[fs][0]) is not None


def build_blkrec(root):
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                       "..", "tools", "blkrec", "blkrec.c")
    out = os.path.join(root, "blkrec")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"],
                           check=True, capture_output=True,
                           text=True).stdout.split()
    subprocess.run(["cc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-o", out,
                    src] + flags, check=True)
    return out


def cmd_run(a):
    if os.geteuid() != 0:
        print("blockcrash: needs root (loop devices, mounts)")
        return SKIP
    fss = [f for f in a.fs.split(",") if have(f)]
    if not fss:
        print("blockcrash: no filesystem of %s usable here" % a.fs)
        return SKIP
    root = a.work or tempfile.mkdtemp(prefix="blockcrash.",
                                      dir="/dev/shm" if os.path.isdir(
                                          "/dev/shm") else None)
    os.makedirs(root, exist_ok=True)
    print("blockcrash: work dir %s" % root, flush=True)
    shared_root(root)
    if not a.blkrec:
        a.blkrec = build_blkrec(root)
    wls = []
    for w in a.workload.split(","):
        wls += workloads.ALL if w == "all" else [w]
    total = dict(torn=0, unmountable=0, recovery_failed=0, states=0)
    standin_clean = []
    for fs in fss:
        for wl in wls:
            for v in a.variant.split(","):
                if wl == "standin" and v != "plain":
                    continue
                c = run_one(a, fs, wl, v, root)
                if wl == "standin":
                    # It must be found torn: the check can fail.
                    if c["torn"] == 0:
                        standin_clean.append(fs)
                    continue
                for k in total:
                    total[k] += c[k]
    print("blockcrash: total states %d torn %d unmountable %d "
          "recovery-failed %d" % (total["states"], total["torn"],
                                  total["unmountable"],
                                  total["recovery_failed"]), flush=True)
    for fs in standin_clean:
        print("blockcrash: %s: the non-atomic stand-in was not found torn"
              % fs, flush=True)
    bad = total["torn"] + total["recovery_failed"] + total["unmountable"]
    ok = bad == 0 and not standin_clean
    umount(root)
    if not a.keep_work and ok:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


def cmd_replay(a):
    # On a copy: mounting and recovery change the image.
    work = tempfile.mkdtemp(prefix="blockcrash-replay.")
    try:
        shared_root(work)
        img = os.path.join(work, "state.img")
        sparse_copy(a.image, img)
        kind, rc, msg, tree = check_state(a, a.fs, img,
                                          os.path.join(work, "boot_id"))
        umount(work)
    finally:
        CLEAN.run()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(dict(result=kind, recover_exit=rc, message=msg,
                          tree=tree), indent=1))
    return 0


def main():
    global VERBOSE
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--fstx", required=True)
    r.add_argument("--blkrec", help="default: build tools/blkrec into "
                   "the work dir")
    r.add_argument("--fs", default="ext4,xfs,btrfs")
    r.add_argument("--workload", default="all")
    r.add_argument("--variant", default="plain,bgsync,recover")
    r.add_argument("--max-states", type=int, default=0)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--delay-us", type=int, default=2000)
    r.add_argument("--jobs", type=int, default=2,
                   help="crash states checked at once")
    r.add_argument("--work")
    r.add_argument("--keep", type=int, default=3,
                   help="images of bad states kept per run")
    r.add_argument("--keep-work", action="store_true")
    r.add_argument("--show", type=int, default=10)
    r.add_argument("--json")
    r.add_argument("-v", action="store_true")
    p = sub.add_parser("replay")
    p.add_argument("--fstx", required=True)
    p.add_argument("--fs", required=True)
    p.add_argument("image")
    s = sub.add_parser("_standin")
    s.add_argument("dom")
    a = ap.parse_args()
    if a.cmd == "_standin":
        workloads.standin(a.dom)
        return 0
    VERBOSE = getattr(a, "v", False)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(130))
    try:
        return cmd_run(a) if a.cmd == "run" else cmd_replay(a)
    finally:
        CLEAN.run()


if __name__ == "__main__":
    sys.exit(main())
