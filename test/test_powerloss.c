/* SPDX-License-Identifier: MIT */
/*
 * test_powerloss.c - simulated power loss (in the manner of SQLite's
 * test6.c).  A layer over the ops table records, since the last barrier,
 *   - every data change (pwrite, ftruncate, clone/copy) with the bytes and
 *     size it replaced, per inode;
 *   - every name change (create, link, symlink, mkdir, rename, exchange,
 *     unlink, rmdir) and xattr change, with how to undo it.
 * Barriers make durable only what they name; no order between objects is
 * assumed (btrfs's fsync log persists what an fsync covers, not what came
 * before it):
 *   - fsync of a regular file: its data, size and xattrs; fdatasync: its
 *     data and size.  Not its names: those need their directory's fsync
 *     (odd states keep them too, as btrfs's fsync log may);
 *   - fsync (or fdatasync) of a directory: the name changes inside it, and
 *     (fsync) its xattrs; a rename or exchange between two directories
 *     once both are synced (one alone may keep both names, or neither);
 *   - syncfs: everything.
 * At a crash point (right before each barrier of a transaction, and after
 * it returned) the child turns the tree into STATES crash states
 * (FSTX_PL_STATES to change it), each from its own fixed seed:
 *   - each name or xattr change no barrier covered is kept or lost on its
 *     own: any subset survives (state 0 keeps none, state 1 all, the
 *     others each with a chance of 1/8 to 7/8 drawn per state), except
 *     that a kept change carries what it needs (needs(): the creation and
 *     earlier moves of its inode, the directory it went into, the move of
 *     what had its name; the earlier values of an xattr) and the removal
 *     of a directory whose change was kept;
 *   - each data write no barrier covered is kept, lost, or torn at
 *     512-byte sectors (a truncation is kept or lost whole);
 * then runs recovery and checks the tree is exactly before or after (after
 * if the transaction had returned 0).  Every torn state is printed with
 * its corpus transaction, barrier (-1: after return) and state; PL_DEBUG
 * adds each change and whether it was kept.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "corpus.h"
#include "faultos.h"
#include "txrun.h"
#include "wal.h"

#define STATES 20
#define DIE(what) do { fprintf(stderr, "powerloss: %s: %s (line %d)\n", what, strerror(errno), __LINE__); abort(); } while (0)
#define SECTOR 512

enum { M_RENAME, M_EXCHANGE, M_CREATE, M_MKDIR, M_UNLINK, M_RMDIR, M_XATTR };

struct meta {          /* one unsynced namespace/xattr change */
	int kind;
	char *a, *b;       /* paths relative to the domain */
	mode_t mode;
	uint64_t ino;      /* M_XATTR */
	char *name;
	char *val;
	ssize_t vlen;      /* -1: was absent */
	uint64_t obj, obj2; /* inodes the change names (obj2: exchange) */
	uint64_t pa, pb;   /* inodes of the directories of a and b (0: not known) */
	int synced;        /* a barrier covered it (see barrier()) */
	int objsync;       /* its object was fsynced since (btrfs's log) */
	int sa, sb;        /* the directory of a (of b) was fsynced since */
};

struct data {          /* one unsynced data change of inode ino */
	uint64_t ino;
	uint64_t off, len; /* range overwritten */
	char *old;         /* its old bytes (within old size) */
	uint64_t oldsize;
	int whole;         /* a truncation: lost or kept whole, never torn */
};

static struct {
	const char *root;  /* absolute domain path */
	struct meta *m;
	size_t nm, cm;
	struct data *dt;
	size_t nd, cd;
	long crash_at;     /* barrier number to crash before; 0: at the end */
	long barriers;
	const char *before, *after;
	int committed;
	unsigned seed;
	int state;         /* which crash state of this point (choose_kept) */
	long states, bad;
	int stash;
} pl;

/* ---- recording --------------------------------------------------------- */

static char *relpath(int dirfd, const char *name)
{
	char link[64], dir[4096], *out;
	ssize_t n;
	size_t rl = strlen(pl.root);

	snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
	n = readlink(link, dir, sizeof(dir) - 1);
	if (n < 0)
		DIE("fatal");
	dir[n] = 0;
	if (strncmp(dir, pl.root, rl))
		return NULL; /* outside the domain (test scaffolding) */
	if (asprintf(&out, "%s%s%s", dir + rl + (dir[rl] == '/'),
		     dir[rl] ? "/" : "", name) < 0)
		DIE("fatal");
	return out;
}

static uint64_t ino_at(int dirfd, const char *name)
{
	struct stat st;

	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) ? 0 : st.st_ino;
}

/* The inode of the directory that holds name (relative to dfd). */
static uint64_t dir_ino(int dfd, const char *name)
{
	const char *slash = strrchr(name, '/');
	char dir[4096];
	struct stat st;

	if (!slash)
		return fstat(dfd, &st) ? 0 : st.st_ino;
	if ((size_t)(slash - name) >= sizeof(dir))
		return 0;
	memcpy(dir, name, (size_t)(slash - name));
	dir[slash - name] = 0;
	return fstatat(dfd, *dir ? dir : "/", &st, 0) ? 0 : st.st_ino;
}

static void add_meta(struct meta m)
{
	if (pl.nm == pl.cm)
		pl.m = realloc(pl.m, (pl.cm = pl.cm ? 2 * pl.cm : 64) * sizeof(*pl.m));
	pl.m[pl.nm++] = m;
}

static void add_data(int fd, uint64_t off, uint64_t len)
{
	struct stat st;
	struct data d = { .off = off, .len = len };

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	d.ino = st.st_ino;
	d.oldsize = (uint64_t)st.st_size;
	if (off < d.oldsize) {
		uint64_t n = d.oldsize - off < len ? d.oldsize - off : len;

		char proc[64];
		int rfd;

		/* fd may be write-only: read the old bytes through another */
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		rfd = open(proc, O_RDONLY);
		d.old = malloc(n ? n : 1);
		if (rfd < 0 || pread(rfd, d.old, n, (off_t)off) != (ssize_t)n)
			DIE("read old bytes");
		close(rfd);
	}
	if (pl.nd == pl.cd)
		pl.dt = realloc(pl.dt, (pl.cd = pl.cd ? 2 * pl.cd : 64) * sizeof(*pl.dt));
	pl.dt[pl.nd++] = d;
}

static void synced_data(uint64_t ino)
{
	size_t j = 0;

	for (size_t i = 0; i < pl.nd; i++)
		if (ino && pl.dt[i].ino != ino)
			pl.dt[j++] = pl.dt[i];
		else
			free(pl.dt[i].old);
	pl.nd = j;
}

static void synced_meta(void)
{
	pl.nm = 0; /* (strings leak until the child exits) */
}

static int parent_is(const char *path, const char *dir)
{
	const char *slash = path ? strrchr(path, '/') : NULL;
	size_t n = slash ? (size_t)(slash - path) : 0;

	return path && strlen(dir) == n && !strncmp(path, dir, n);
}

/*
 * fsync(2)/fdatasync(2) of one object: no journal order is assumed.
 * A file's fsync makes durable its data and size (synced_data) and its
 * xattrs; fdatasync its data and size only (ext4 does not count an xattr
 * change as one fdatasync must persist).  Neither persists the file's
 * name: that takes an fsync of the directory the name is in (btrfs's
 * fsync log may persist it anyway: objsync, kept in odd states).  A
 * directory's fsync (or fdatasync: its entries are its data) makes
 * durable the name changes inside it, and fsync its own xattrs; its own
 * name again needs its parent's.  A rename or exchange between two
 * directories is durable once both are synced: one alone may keep both
 * names, or neither.  Everything else stays pending, kept or lost
 * independently at the crash (one_state).
 */
static void synced_object(int fd, const struct stat *st, int datasync)
{
	char *dir = NULL;

	if (S_ISDIR(st->st_mode)) {
		dir = relpath(fd, "");
		if (dir && *dir && dir[strlen(dir) - 1] == '/')
			dir[strlen(dir) - 1] = 0;
	}
	for (size_t i = 0; i < pl.nm; i++) {
		struct meta *m = &pl.m[i];
		int two = m->kind == M_RENAME || m->kind == M_EXCHANGE;

		if (m->kind == M_XATTR) {
			m->synced |= !datasync && m->obj == st->st_ino;
			continue;
		}
		if (m->obj == st->st_ino || m->obj2 == st->st_ino)
			m->objsync = 1;
		if (!dir)
			continue;
		/* the directory by its inode where known: it may have moved
		 * since (b of an unlink or rmdir names its stash link, no
		 * entry) */
		m->sa |= m->pa ? m->pa == st->st_ino : parent_is(m->a, dir);
		m->sb |= two && (m->pb ? m->pb == st->st_ino : parent_is(m->b, dir));
		if (two ? m->sa && m->sb : m->sa)
			m->synced = 1;
	}
	free(dir);
}

static void crash_now(void);

static void barrier(int fd, int all, int datasync)
{
	struct stat st;

	if (++pl.barriers == pl.crash_at)
		crash_now();
	if (all) {
		synced_data(0);
		synced_meta();
	} else if (fstat(fd, &st) == 0) {
		synced_data(st.st_ino);
		synced_object(fd, &st, datasync);
	}
}

static int r_fsync(int fd) { barrier(fd, 0, 0); return fx_os_libc.fsync(fd); }
static int r_fdatasync(int fd) { barrier(fd, 0, 1); return fx_os_libc.fdatasync(fd); }
static int r_syncfs(int fd) { barrier(fd, 1, 0); return fx_os_libc.syncfs(fd); }

static ssize_t r_pwrite(int fd, const void *b, size_t n, off_t o)
{
	add_data(fd, (uint64_t)o, n);
	return fx_os_libc.pwrite(fd, b, n, o);
}

static int r_ftruncate(int fd, off_t len)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && st.st_size > len)
		add_data(fd, (uint64_t)len, (uint64_t)(st.st_size - len));
	else
		add_data(fd, (uint64_t)len, 0);
	if (pl.nd)
		pl.dt[pl.nd - 1].whole = 1;
	return fx_os_libc.ftruncate(fd, len);
}

static int r_ficlonerange(int a, int b, uint64_t c, uint64_t d, uint64_t e)
{
	struct stat st;

	/* len 0 clones to the source's end: record that many bytes, not an
	 * unbounded range (a torn state would write zeros up to it) */
	if (!d && fstat(b, &st) == 0)
		d = (uint64_t)st.st_size > c ? (uint64_t)st.st_size - c : 0;
	add_data(a, e, d);
	return fx_os_libc.ficlonerange(a, b, c, d, e);
}

static ssize_t r_copy_file_range(int a, off_t *b, int c, off_t *d, size_t e)
{
	add_data(c, (uint64_t)*d, e);
	return fx_os_libc.copy_file_range(a, b, c, d, e);
}

static int r_openat2(int dfd, const char *p, int f, mode_t m, uint64_t res)
{
	struct stat st;
	char *rp = NULL;
	int fd, existed = 1;

	if (f & O_CREAT) {
		existed = fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
		if (!existed)
			rp = relpath(dfd, p);
	}
	if ((f & O_TRUNC) && existed) {
		int t = openat(dfd, p, O_RDONLY | O_NOFOLLOW);

		if (t >= 0) {
			fstat(t, &st);
			add_data(t, 0, (uint64_t)st.st_size);
			close(t);
		}
	}
	fd = fx_os_libc.openat2(dfd, p, f, m, res);
	if (fd >= 0 && rp) {
		fstat(fd, &st);
		add_meta((struct meta){ .kind = M_CREATE, .a = rp, .obj = st.st_ino,
					.pa = dir_ino(dfd, p) });
	}
	else
		free(rp);
	return fd;
}

static int r_renameat2(int od, const char *on, int nd, const char *nn, unsigned fl)
{
	char *a = relpath(od, on), *b = relpath(nd, nn);
	uint64_t pa = dir_ino(od, on), pb = dir_ino(nd, nn);
	int r = fx_os_libc.renameat2(od, on, nd, nn, fl);

	if (r == 0 && a && b)
		add_meta((struct meta){ .kind = fl & RENAME_EXCHANGE ? M_EXCHANGE
								     : M_RENAME,
					.a = a, .b = b, .obj = ino_at(nd, nn),
					.obj2 = fl & RENAME_EXCHANGE ? ino_at(od, on) : 0,
					.pa = pa, .pb = pb });
	return r;
}

static int r_mkdirat(int d, const char *n, mode_t m)
{
	char *a = relpath(d, n);
	int r = fx_os_libc.mkdirat(d, n, m);

	if (r == 0 && a)
		add_meta((struct meta){ .kind = M_MKDIR, .a = a, .obj = ino_at(d, n),
					.pa = dir_ino(d, n) });
	return r;
}

static int r_symlinkat(const char *t, int d, const char *n)
{
	char *a = relpath(d, n);
	int r = fx_os_libc.symlinkat(t, d, n);

	if (r == 0 && a)
		add_meta((struct meta){ .kind = M_CREATE, .a = a, .obj = ino_at(d, n),
					.pa = dir_ino(d, n) });
	return r;
}

static int r_linkat(int od, const char *on, int nd, const char *nn, int f)
{
	char *a = relpath(nd, nn);
	int r = fx_os_libc.linkat(od, on, nd, nn, f);

	if (r == 0 && a)
		add_meta((struct meta){ .kind = M_CREATE, .a = a, .obj = ino_at(nd, nn),
					.pa = dir_ino(nd, nn) });
	return r;
}

/* An unlinked file is kept alive by a link in the stash, to be undone. */
static int r_unlinkat(int d, const char *n, int f)
{
	static long k;
	char *a = relpath(d, n), sname[64];
	struct stat st;
	int r;

	if (!a)
		return fx_os_libc.unlinkat(d, n, f);
	snprintf(sname, sizeof(sname), "s%ld", k++);
	if (!(f & AT_REMOVEDIR) && fstatat(d, n, &st, AT_SYMLINK_NOFOLLOW) == 0)
		linkat(d, n, pl.stash, sname, 0);
	else if (fstatat(d, n, &st, AT_SYMLINK_NOFOLLOW) != 0)
		st.st_mode = 0755;
	r = fx_os_libc.unlinkat(d, n, f);
	if (r == 0)
		add_meta((struct meta){ .kind = f & AT_REMOVEDIR ? M_RMDIR : M_UNLINK,
					.a = a, .b = strdup(sname),
					.mode = st.st_mode & 07777, .obj = st.st_ino,
					.pa = dir_ino(d, n) });
	else
		unlinkat(pl.stash, sname, 0);
	return r;
}

static void xattr_old(int fd, const char *name)
{
	struct meta m = { .kind = M_XATTR, .name = strdup(name) };
	struct stat st;

	fstat(fd, &st);
	m.ino = m.obj = st.st_ino;
	m.val = malloc(65536);
	m.vlen = fgetxattr(fd, name, m.val, 65536);
	add_meta(m);
}

static int r_fsetxattr(int fd, const char *n, const void *v, size_t l, int f)
{
	xattr_old(fd, n);
	return fx_os_libc.fsetxattr(fd, n, v, l, f);
}

static int r_fremovexattr(int fd, const char *n)
{
	xattr_old(fd, n);
	return fx_os_libc.fremovexattr(fd, n);
}

static void install(void)
{
	fx_os = fx_os_libc;
	fx_os.fsync = r_fsync;
	fx_os.fdatasync = r_fdatasync;
	fx_os.syncfs = r_syncfs;
	fx_os.pwrite = r_pwrite;
	fx_os.ftruncate = r_ftruncate;
	fx_os.ficlonerange = r_ficlonerange;
	fx_os.copy_file_range = r_copy_file_range;
	fx_os.openat2 = r_openat2;
	fx_os.renameat2 = r_renameat2;
	fx_os.mkdirat = r_mkdirat;
	fx_os.symlinkat = r_symlinkat;
	fx_os.linkat = r_linkat;
	fx_os.unlinkat = r_unlinkat;
	fx_os.fsetxattr = r_fsetxattr;
	fx_os.fremovexattr = r_fremovexattr;
}

/* ---- crash states ------------------------------------------------------ */

static void find_inodes(const char *root, const char *rel, uint64_t *inos,
			char **paths, size_t n)
{
	char *p;
	int fd;

	if (asprintf(&p, "%s/%s", root, rel) < 0)
		DIE("fatal");
	fd = open(p, O_RDONLY | O_DIRECTORY);
	free(p);
	if (fd < 0)
		return;
	for (;;) {
		char buf[4096];
		long got = syscall(217 /* getdents64 */, fd, buf, sizeof(buf));

		if (got <= 0)
			break;
		for (long off = 0; off < got;) {
			struct { uint64_t ino; int64_t off; unsigned short reclen;
				 unsigned char type; char name[]; } *e = (void *)(buf + off);
			char *r;

			off += e->reclen;
			if (!strcmp(e->name, ".") || !strcmp(e->name, ".."))
				continue;
			if (asprintf(&r, "%s%s%s", rel, *rel ? "/" : "", e->name) < 0)
				DIE("fatal");
			for (size_t i = 0; i < n; i++)
				if (inos[i] == e->ino && !paths[i])
					paths[i] = strdup(r);
			if (e->type == DT_DIR)
				find_inodes(root, r, inos, paths, n);
			free(r);
		}
	}
	close(fd);
}

static char *in(const char *copy, const char *rel)
{
	char *p;

	if (asprintf(&p, "%s/%s", copy, rel) < 0)
		DIE("fatal");
	return p;
}

/*
 * Path rel of the tree copy, named when its directory was inode pino, as
 * that directory is now: undoing the changes in reverse order puts every
 * directory back where it was only if all the later changes are undone,
 * and kept ones stay (a directory moved away by a kept change, a name
 * changed inside it by a lost one: the lost one is undone there).
 */
static char *at_now(const char *copy, const char *rel, uint64_t pino)
{
	const char *slash = rel ? strrchr(rel, '/') : NULL;
	char *dir, *p, *found = NULL, *out;
	struct stat st;
	int here;

	if (!pino || !slash) /* (an xattr change has no path) */
		return in(copy, rel);
	if (!(dir = strndup(rel, (size_t)(slash - rel))))
		DIE("fatal");
	p = in(copy, dir);
	here = lstat(p, &st) == 0 && st.st_ino == pino;
	free(p);
	free(dir);
	if (here)
		return in(copy, rel);
	find_inodes(copy, "", &pino, &found, 1);
	if (!found)
		return in(copy, rel);
	if (asprintf(&out, "%s/%s%s", copy, found, slash) < 0)
		DIE("fatal");
	free(found);
	return out;
}

static void undo_meta(const char *copy, const struct meta *m, int xfd)
{
	char *a = at_now(copy, m->a, m->pa);
	char *b = m->b && m->kind != M_UNLINK && m->kind != M_RMDIR ?
		  at_now(copy, m->b, m->pb) : NULL;

	switch (m->kind) {
	case M_RENAME: rename(b, a); break;
	case M_EXCHANGE: renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE); break;
	case M_CREATE: unlink(a); break;
	case M_MKDIR: rmdir(a); break;
	case M_RMDIR: mkdir(a, m->mode); break;
	case M_UNLINK:
		free(b);
		if (asprintf(&b, "%s.plstash/%s", copy, m->b) < 0)
			DIE("fatal");
		link(b, a);
		break;
	case M_XATTR:
		if (xfd >= 0) {
			if (m->vlen >= 0)
				fsetxattr(xfd, m->name, m->val, (size_t)m->vlen, 0);
			else
				fremovexattr(xfd, m->name);
		}
		break;
	}
	free(a);
	free(b);
}

static void undo_data(const struct data *d, int fd, int tear)
{
	uint64_t inold = d->old ? (d->oldsize - d->off < d->len ? d->oldsize - d->off
								: d->len) : 0;

	for (uint64_t s = 0; s < inold; s += SECTOR) {
		uint64_t n = inold - s < SECTOR ? inold - s : SECTOR;

		if (!tear || rand_r(&pl.seed) % 2)
			if (pwrite(fd, d->old + s, n, (off_t)(d->off + s)) < 0)
				DIE("fatal");
	}
	/* the grown part torn: some of its sectors read back as a hole */
	if (d->off + d->len > d->oldsize && tear && !d->whole) {
		static const char zero[SECTOR];
		uint64_t s = d->off > d->oldsize ? d->off : d->oldsize;

		for (; s < d->off + d->len; s += SECTOR) {
			uint64_t n = d->off + d->len - s < SECTOR ? d->off + d->len - s : SECTOR;

			if (rand_r(&pl.seed) % 4 == 0 &&
			    pwrite(fd, zero, n, (off_t)s) < 0)
				DIE("fatal");
		}
	}
	/* the grown part: lost as zeros, or the size update lost too */
	if (d->off + d->len > d->oldsize && !tear) {
		struct stat st;

		fstat(fd, &st);
		if (rand_r(&pl.seed) % 2 && (uint64_t)st.st_size == d->off + d->len)
			if (ftruncate(fd, (off_t)d->oldsize) < 0)
				DIE("fatal");
	}
}

static int rebooted(char id[37])
{
	memcpy(id, "00000000-0000-0000-0000-00000000b007", 37);
	return 0;
}

/* The stash links are no part of the state: they would count in st_nlink. */
static void drop_stash(void)
{
	char *s;
	DIR *dir;
	struct dirent *e;

	if (asprintf(&s, "%s.plstash", pl.root) < 0 || !(dir = opendir(s)))
		DIE("stash");
	while ((e = readdir(dir)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(dir), e->d_name, 0);
	closedir(dir);
	free(s);
}

/* Does kept change m (later) need the earlier change o to persist too? */
static int needs(const struct meta *m, const struct meta *o)
{
	/* an xattr change needs only the earlier values of that xattr (its
	 * undo goes through the inode, whatever its name) and nothing needs
	 * it: a name may persist without the xattrs, and they without it */
	if (m->kind == M_XATTR || o->kind == M_XATTR)
		return m->kind == o->kind && m->ino == o->ino &&
		       !strcmp(m->name, o->name);
	/* the same inode: its creation, its earlier moves */
	return (o->obj && (o->obj == m->obj || o->obj == m->obj2)) ||
	       (o->obj2 && (o->obj2 == m->obj || o->obj2 == m->obj2)) ||
	       /* the directory it went into */
	       (o->kind == M_MKDIR &&
		(parent_is(m->a, o->a) || parent_is(m->b, o->a))) ||
	       (o->kind == M_RENAME &&
		(parent_is(m->a, o->b) || parent_is(m->b, o->b))) ||
	       /* a name taken carries the move of what had it (btrfs logs
		* the conflicting inode too) */
	       ((o->kind == M_RENAME || o->kind == M_UNLINK ||
		 o->kind == M_RMDIR) && o->a &&
		((m->kind == M_RENAME && m->b && !strcmp(o->a, m->b)) ||
		 ((m->kind == M_CREATE || m->kind == M_MKDIR) &&
		  m->a && !strcmp(o->a, m->a)))) ||
	       /* a directory's move carries what left it before */
	       (m->kind == M_RENAME && o->kind == M_RENAME && parent_is(o->a, m->a));
}

/*
 * Which pending name and xattr changes survive: every one a barrier
 * covered, and any subset of the others, each kept on its own with a
 * chance this state draws (state 0: none kept, state 1: all, then 1/8
 * to 7/8), closed under needs() and the rmdir rule below.  Odd states
 * also keep the name changes of every object fsynced since (btrfs's
 * fsync log makes them durable; even states lose them at will, as
 * ext4 and xfs may): a fixed share of states with them, not a rare draw.
 */
static char *choose_kept(void)
{
	char *kept = calloc(pl.nm + 1, 1);
	unsigned q = pl.state == 0 ? 0 : pl.state == 1 ? 8
				  : 1 + (unsigned)rand_r(&pl.seed) % 7;

	for (size_t i = 0; i < pl.nm; i++) {
		int lucky = (unsigned)rand_r(&pl.seed) % 8 < q;

		kept[i] = lucky || pl.m[i].synced ||
			  (pl.state % 2 && pl.m[i].objsync);
	}
	for (int changed = 1; changed;) {
		changed = 0;
		/* an rmdir cannot be undone with the inode it removed: once any
		 * change of a directory is kept, so is its later removal */
		for (size_t i = 0; i < pl.nm; i++)
			for (size_t k = i + 1; kept[i] && pl.m[i].obj && k < pl.nm; k++)
				if (pl.m[k].kind == M_RMDIR && pl.m[k].obj == pl.m[i].obj)
					changed |= !kept[k], kept[k] = 1;
		for (size_t i = pl.nm; i-- > 0;)
			for (size_t j = 0; kept[i] && j < i; j++)
				if (!kept[j] && needs(&pl.m[i], &pl.m[j]))
					changed = kept[j] = 1;
	}
	if (getenv("PL_DEBUG"))
		for (size_t i = 0; i < pl.nm; i++)
			fprintf(stderr, "barrier %ld state %d meta %zu kind %d %s %s "
				"synced %d kept %d\n", pl.crash_at, pl.state, i,
				pl.m[i].kind, pl.m[i].a ? pl.m[i].a : "-",
				pl.m[i].b ? pl.m[i].b : "-", pl.m[i].synced, kept[i]);
	return kept;
}

/* What recovery will find in .fstx/ (PL_DEBUG). */
static void show_meta_dir(void)
{
	char *p = in(pl.root, ".fstx");
	DIR *dir = opendir(p);
	struct dirent *e;
	struct stat st;

	while (dir && (e = readdir(dir)))
		if (e->d_name[0] != '.' &&
		    fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			fprintf(stderr, "barrier %ld state %d .fstx/%s size %lld\n",
				pl.crash_at, pl.state, e->d_name, (long long)st.st_size);
	if (dir)
		closedir(dir);
	free(p);
}

/* Turn the live tree into one random crash state, in place (inodes kept). */
static void one_state(void)
{
	const char *root = pl.root;
	size_t n = pl.nd + pl.nm, keep = 0;
	uint64_t *inos = calloc(n + 1, sizeof(*inos));
	char **paths = calloc(n + 1, sizeof(*paths));
	int *fds = calloc(n + 1, sizeof(*fds));
	char *now, *kept;
	int r;

	fx_os = fx_os_libc;
	fx_os.boot_id = rebooted; /* the page cache is gone */
	for (size_t i = 0; i < pl.nd; i++)
		inos[i] = pl.dt[i].ino;
	for (size_t i = 0; i < pl.nm; i++)
		inos[pl.nd + i] = pl.m[i].kind == M_XATTR ? pl.m[i].ino : 0;
	find_inodes(root, "", inos, paths, n);
	for (size_t i = 0; i < n; i++) {
		char *p = paths[i] ? in(root, paths[i]) : NULL;

		fds[i] = p ? open(p, O_RDWR | O_NOFOLLOW | O_NONBLOCK) : -1;
		if (fds[i] < 0 && p)
			fds[i] = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
		free(p);
	}
	kept = choose_kept();
	for (size_t i = 0; i < pl.nm; i++)
		keep += kept[i];
	for (size_t i = pl.nm; i-- > 0;)
		if (!kept[i])
			undo_meta(root, &pl.m[i], fds[pl.nd + i]);
	free(kept);
	drop_stash();
	/* each data write: kept, lost, or torn at sector granularity */
	for (size_t i = pl.nd; i-- > 0;) {
		int c = rand_r(&pl.seed) % 3;

		if (c && fds[i] >= 0)
			undo_data(&pl.dt[i], fds[i], c == 2 && !pl.dt[i].whole);
	}
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (getenv("PL_DEBUG"))
		show_meta_dir();
	r = domain_recover(root);
	now = t_snapshot(root);
	pl.states++;
	if (r < 0 || (strcmp(now, pl.before) && strcmp(now, pl.after)) ||
	    (pl.committed && strcmp(now, pl.after))) {
		fprintf(stderr, "power loss: barrier %ld state %d: recover %d, %s "
			"kept %zu/%zu names\n%s", pl.crash_at, pl.state, r,
			pl.committed ? "committed," : "", keep, pl.nm, now);
		if (getenv("PL_DEBUG"))
			fprintf(stderr, "before:\n%s", pl.before);
		pl.bad++;
	}
}

static int result_fd = -1;

static void crash_now(void)
{
	long out[2];

	/* the "power" is gone: drop every fd (and the domain lock) */
	for (int fd = 3; fd < 1024; fd++)
		if (fd != result_fd)
			close(fd);
	one_state();
	out[0] = pl.states;
	out[1] = pl.bad;
	if (write(result_fd, out, sizeof(out)) != sizeof(out))
		_exit(3);
	_exit(0);
}

/*
 * Run tx on one handle of d: transactions separated by a line "---"; a
 * part that starts with "#loose" runs with a log that every record fills
 * (its checkpoints without barriers, wal.c W11); a part "#checkpoint" is
 * fstx_recover(), which checkpoints the log (W6).  0 when every one
 * committed.
 */
static long run_parts(const char *d, const char *tx)
{
	char *all = strdup(tx), *part = all, *next;
	uint64_t saved = fx_wal_max;
	fstx_domain *h;
	long r;

	if (!all)
		DIE("fatal");
	if (!strstr(tx, "---\n")) {
		free(all);
		return tx_text(d, tx, NULL);
	}
	if ((r = fstx_domain_open(d, &h)) < 0) {
		free(all);
		return r;
	}
	for (; part && r == 0; part = next) {
		if ((next = strstr(part, "---\n"))) {
			*next = 0;
			next += 4;
		}
		if (!strncmp(part, "#loose\n", 7))
			fx_wal_max = 1;
		if (!strcmp(part, "#checkpoint\n"))
			r = fstx_recover(h) < 0 ? -1 : 0;
		else
			r = tx_text_h(h, part);
		fx_wal_max = saved;
	}
	fstx_domain_close(h);
	free(all);
	return r;
}

/* Child: run tx, crash before barrier b (-1: after it returned). */
static void crash_child(const char *d, const char *tx, long b, int fd, int st)
{
	char *s;

	pl.root = d;
	pl.crash_at = b;
	pl.seed = (unsigned)(b * 131 + st * 7 + 1);
	pl.state = st;
	result_fd = fd;
	/* beside the domain, on its filesystem: .fstx/ is not made yet */
	if (asprintf(&s, "%s.plstash", d) < 0)
		DIE("fatal");
	if (mkdir(s, 0700) < 0 ||
	    (pl.stash = open(s, O_RDONLY | O_DIRECTORY)) < 0)
		DIE("stash");
	free(s);
	install();
	pl.committed = run_parts(d, tx) == 0;
	crash_now();
}

/* Crash states per crash point: FSTX_PL_STATES, default STATES. */
static int states_per_point(void)
{
	const char *e = getenv("FSTX_PL_STATES");
	long n = e && *e ? strtol(e, NULL, 10) : STATES;

	return n > 0 && n < 1000000 ? (int)n : STATES;
}

/* What a test adds to t_populate()'s tree (NULL: nothing); crash states
 * per point where a test sets its own (0: states_per_point()). */
static int states_over;
static void (*tree_extra)(const char *d);

static void populate(const char *d)
{
	t_populate(d);
	if (tree_extra)
		tree_extra(d);
}

/* after_only: crash only once the transactions returned (every state
 * must then be the after state) */
static void pl_run_at(char *const *cx_, size_t ntx, const char *label,
		      int after_only)
{
	long points = 0, states = 0, bad = 0;
	int nstates = states_over ? states_over : states_per_point();

	for (size_t c = 0; c < ntx; c++) {
		char *d = t_mkdomain(), *before, *after;
		long nb;

		populate(d);
		{
			char *m = in(d, ".fstx");

			mkdir(m, 0700);
			free(m);
		}
		before = t_snapshot(d);
		fo_install(FO_COUNT, 0, 0);
		{
			char *d2 = t_mkdomain();

			populate(d2);
			run_parts(d2, cx_[c]);
			nb = fo.barriers;
			fo_remove();
			after = t_snapshot(d2);
			t_rmtree(d2);
			free(d2);
		}
		pl.before = before;
		pl.after = after;
		for (long b = after_only ? nb + 1 : 1; b <= nb + 1; b++) {
			points++;
			for (int k = 0; k < nstates; k++) {
				int fds[2], st;
				long out[2] = { 0, 1 };
				char *dd = t_mkdomain(), *stash;
				pid_t p;

				populate(dd);
				assert_int_equal(pipe(fds), 0);
				p = fork();
				if (p == 0)
					crash_child(dd, cx_[c], b > nb ? -1 : b, fds[1], k);
				close(fds[1]);
				waitpid(p, &st, 0);
				if (read(fds[0], out, sizeof(out)) != sizeof(out))
					fail_msg("corpus %zu barrier %ld: child died (%d)", c, b, st);
				close(fds[0]);
				states += out[0];
				bad += out[1];
				if (out[1]) /* go on: the summary counts them all */
					fprintf(stderr, "%s: corpus %zu barrier %ld "
						"state %d: torn\n%s", label, c,
						b > nb ? -1 : b, k, cx_[c]);
				t_rmtree(dd);
				if (asprintf(&stash, "%s.plstash", dd) < 0)
					DIE("fatal");
				t_rmtree(stash);
				free(stash);
				free(dd);
			}
		}
		free(before);
		free(after);
		t_rmtree(d);
		free(d);
	}
	printf("%s: %zu tx, %ld crash points, %ld crash states, "
	       "%ld before-or-after, %ld torn\n", label, ntx, points, states,
	       states - bad, bad);
	assert_int_equal(bad, 0);
}

static void pl_run(char *const *cx_, size_t ntx, const char *label)
{
	pl_run_at(cx_, ntx, label, 0);
}

static void power_loss(void **state)
{
	(void)state;
	pl_run(cx, ncx, "power-loss");
}

/*
 * The write-ahead log (option wal): the record's barrier is the commit
 * point; in-place changes after it may be lost or torn, and recovery after
 * the "reboot" (another boot id) replays every record.  The third
 * exchanges two files across directories (W21), which the checkpoint
 * makes durable by both directories.
 */
static const char *const wal_tx[] = {
	"option wal\nopen 0 a O_WRONLY\npwrite 0 \"A\" 0\nsetxattr a user.v \"1\"\n"
	"open 1 b O_WRONLY\npwrite 1 \"B\" 3\nsetxattr b user.v \"2\"\n"
	"open 2 d/c O_WRONLY\npwrite 2 \"C\" 1\nsetxattr d/c user.v \"3\"\n"
	"open 3 big O_WRONLY\npwrite 3 \"BIG\" 10000\nsetxattr big user.v \"4\"\n",
	"option wal\ntruncate big 600\nopen 0 big O_RDWR\npwrite 0 \"tail\" 900\n"
	"truncate a 2\nopen 1 a O_WRONLY\npwrite 1 \"xyz\" 7\nassert-exists d/c\n",
	"rename a d/c exchange\nopen 0 b O_WRONLY\npwrite 0 \"X\" 0\n",
};

static void power_loss_wal(void **state)
{
	char *tx[3];

	(void)state;
	for (int i = 0; i < 3; i++)
		tx[i] = (char *)wal_tx[i];
	pl_run(tx, 3, "power-loss wal");
}

/*
 * The same with every pwrite staged in a file of its own and cloned into
 * place (wal.c W13, where the filesystem has reflink): the staged data
 * and its name are durable before the record, or power loss after the
 * record's barrier finds nothing to clone.
 */
static void power_loss_staged(void **state)
{
	uint64_t saved = fx_wal_stage_min;
	char *d = t_fresh();
	int rl = t_reflink(d);

	(void)state;
	t_drop(d);
	if (!rl)
		skip(); /* the filesystem has no reflink: nothing is staged */
	fx_wal_stage_min = 1;
	pl_run((char **)wal_tx, 2, "power-loss staged");
	fx_wal_stage_min = saved;
}

/*
 * Large new files written whole before the record (wal.c W22; every new
 * file here, with the log's data limit at 0): each file, its staged
 * directory and .fstx/wnew/ are durable before the record, so power loss
 * after the record's barrier finds every staged file whole and in place
 * to be renamed; one replaces a file of the tree, others are made in a
 * new directory (staged whole) or beside it.
 */
static const char *const whole_tx[] = {
	"open 0 cur.tmp O_WRONLY|O_CREAT|O_EXCL 0644\npwrite 0 \"new current\" 0\n"
	"close 0\nrename cur.tmp a\nunlink old\n",
	"mkdir nd\nopen 0 nd/x O_WRONLY|O_CREAT\npwrite 0 \"xx\" 0\n"
	"setxattr nd/x user.k \"v\"\nopen 1 nd/y O_WRONLY|O_CREAT\npwrite 1 \"yyy\" 4\n"
	"open 2 top O_WRONLY|O_CREAT\npwrite 2 \"top\" 0\nopen 3 b O_WRONLY\n",
};

static void power_loss_whole(void **state)
{
	uint64_t large = fx_wal_large, smin = fx_wal_stage_min;

	(void)state;
	fx_wal_large = 0;
	fx_wal_stage_min = 1;
	pl_run((char **)whole_tx, 2, "power-loss whole new files");
	fx_wal_large = large;
	fx_wal_stage_min = smin;
}

/*
 * A transaction that fails at its last op and is rolled back (the
 * before state is the only legal one), and the same shapes as name
 * changes another process may make durable early (an fsync(2) of its
 * object by a backup tool): the model already keeps any pending change,
 * out of order with fstx's own progress marks, so these run under it.
 */
static const char *const fsync_tx[] = {
	"open 0 big O_WRONLY\npwrite 0 \"new bytes over the old\" 0\nclose 0\n"
	"setxattr b user.v \"changed\"\ntruncate b 10\nmkdir newd\n"
	"rename d/c newd/c\nopen 1 newfile O_WRONLY|O_CREAT|O_EXCL 0600\n"
	"pwrite 1 \"fresh\" 0\nclose 1\nunlink does-not-exist !lt 0\n",
	"open 0 cur.tmp O_WRONLY|O_CREAT|O_EXCL 0644\npwrite 0 \"new current\" 0\n"
	"close 0\nrename cur.tmp a\nunlink old\n",
	"mkdir m\nsymlink d/c m/sl\nlink b m/hl\nrename a big RENAME_EXCHANGE\n"
	"rmdir empty\ntruncate d/e/f 3\nremovexattr big user.k\n",
};

static void power_loss_rollback(void **state)
{
	(void)state;
	pl_run((char **)fsync_tx, 1, "power-loss rollback");
}

static void power_loss_fsync(void **state)
{
	(void)state;
	pl_run((char **)fsync_tx, sizeof(fsync_tx) / sizeof(fsync_tx[0]),
	       "power-loss fsync");
}

/*
 * Renames among the names of one hard-linked file (b and hard), a
 * directory moved away and back around a change of a name under it, a
 * name given back at its path under another directory, and a link made
 * at a name the file had: the progress marks may persist without the
 * steps they precede (any subset of the unsynced name changes), and an
 * undo below the mark that finds a step's object at its destination
 * (at its source too, or not) must not take away a name the object had
 * before (journal.c move_back()).  A directory moved away and back
 * inside one that moved, and a file removed under a directory that
 * moved: an object goes back into the directory it came from, wherever
 * that is (rule 5e, src_now()), and a directory moved away and back by
 * steps that did not persist stays where it was.
 */
static const char *const names_tx[] = {
	"rename b t9\nrename hard b\nrename t9 hard\n",
	"rename hard t9\nrename b hard\nrename t9 b\nopen 0 b O_WRONLY\n"
	"pwrite 0 \"w\" 0\n",
	"rename d d2\nrename d2/c d2/c2\nrename d2 d\nrename d/c2 d/c\n"
	"setxattr a user.u \"1\"\n",
	"rename d e2\nrename e2/c c2\nrename e2 d\nrename c2 d/c\nsetxattr a user.u \"1\"\n",
	"rename d d2\nrename d2/e d2/e2\nmkdir d2/e\nrename d2 d\nrename a d/e/f\n"
	"setxattr b user.u \"1\"\n",
	/* one path, another directory: d/c before and after d's exchange */
	"rename d/c x\nrename d empty exchange\nrename x d/c\nsetxattr a user.u \"1\"\n",
	"rename d/c x\nrename d d2\nmkdir d\nrename x d/c\nsetxattr a user.u \"1\"\n",
	/* a link made at a name the file had, its move away lost */
	"rename hard h2\nlink b hard\nsetxattr a user.u \"1\"\n",
	/* a directory moved out of one that moved, and back */
	"rename old o2\nrename d old\nrename old/e e2\nrename e2 old/e\n"
	"setxattr a user.u \"1\"\n",
	/* a file removed from under a directory that moved */
	"rename d d2\nunlink d2/e/f\nmkdir d\nrename d2 x\nsetxattr a user.u \"1\"\n",
	/* the undo way (a trusted.* xattr): a round trip, then a failure;
	 * nothing to reverse, and the directories still to fsync */
	"setxattr a trusted.x \"1\"\nrename old d/e/x\nrename d/e/x old\nrename nothere ln\n",
	/* a name left, linked again, left, linked again: the last move away
	 * decides whether the name is one the file had */
	"setxattr a trusted.x \"1\"\nrename b m\nlink hard b\nunlink b\nlink hard b\n",
	/* a file over another and back, its directory's parent away and
	 * back: another object at the source, the file at a name it had */
	"rename d/e/f d/c\nrename d/c d/e/f\nrename d n\nrename n/e n/e2\nrename n d\n"
	"setxattr a user.u \"1\"\n",
};

static void power_loss_names(void **state)
{
	(void)state;
	pl_run((char **)names_tx, sizeof(names_tx) / sizeof(names_tx[0]),
	       "power-loss names of one file");
}

/*
 * Crash-only transactions, then a durable one on the same handle: once it
 * returned, power loss keeps every crash-only change too (fstx(7)).  The
 * undo way's objects are fsynced from the handle's debt (trans.c
 * fx_crash_only_pay()); the log's crash-only records ride its barrier, or,
 * dropped by checkpoints without barriers, are listed and fsynced (wal.c
 * W11).  Never syncfs.  And what a checkpoint leaves in place stays.
 */
static const char *const debt_tx[] = {
	/* the undo way, then a durable commit of the log */
	"option crash-only\nmkdir d/n\nrename d/n d/n2\n"
	"open 0 d/n2/f O_WRONLY|O_CREAT\npwrite 0 \"x\" 0\nclose 0\n"
	"rename b b2\nsetxattr big user.k \"crash\"\n---\n"
	"open 0 a O_WRONLY\npwrite 0 \"durable\" 0\n",
	/* the log's crash-only records, recycled without barriers */
	"#loose\noption crash-only\nopen 0 a O_WRONLY\npwrite 0 \"one\" 0\n"
	"open 1 d/c O_WRONLY\npwrite 1 \"c1\" 0\n---\n"
	"#loose\noption crash-only\nopen 0 d/new O_WRONLY|O_CREAT\n"
	"pwrite 0 \"nn\" 0\nmkdir d/e/nd\nunlink old\n---\n"
	"open 0 big O_WRONLY\npwrite 0 \"D\" 0\n",
	/* a durable commit of the log, then its checkpoint (wal.c W6): the
	 * names it moved to and from .fstx/wnew/ stay */
	"open 0 d/new2 O_WRONLY|O_CREAT\npwrite 0 \"q\" 0\nunlink old\n"
	"---\n#checkpoint\n",
	/* the same with an exchange across two directories (W21): the
	 * checkpoint makes both durable */
	"rename a d/c exchange\n---\n#checkpoint\n",
	/* both, then a durable commit of the undo way (an exchange takes
	 * it) */
	"option crash-only\nrename d/e empty exchange\n---\n"
	"#loose\noption crash-only\nopen 0 b O_WRONLY\npwrite 0 \"bb\" 2\n---\n"
	"rename empty d/e exchange\n",
};

static void power_loss_debt(void **state)
{
	(void)state;
	pl_run_at((char **)debt_tx, sizeof(debt_tx) / sizeof(debt_tx[0]),
		  "power-loss crash-only debt", 1);
}

/*
 * Generated transactions of name changes on the undo way
 * (test/gen_names.py; t_names_tx(): make check runs a few of
 * test/names.tx, make crashtest more, and fresh sets) on a tree with more
 * names of one file: any subset of the unsynced name changes survives,
 * progress marks without the steps they precede included
 * (FSTX_NAMES_STATES crash states per point, if set).
 */
static void power_loss_generated(void **state)
{
	char **tx;
	size_t n = t_names_tx(&tx);

	(void)state;
	assert_true(n > 0);
	tree_extra = t_names_tree;
	states_over = (int)t_env_long("FSTX_NAMES_STATES", 0);
	pl_run(tx, n, "power-loss generated");
	states_over = 0;
	tree_extra = NULL;
	for (size_t i = 0; i < n; i++)
		free(tx[i]);
	free(tx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(power_loss),
		cmocka_unit_test(power_loss_wal),
		cmocka_unit_test(power_loss_staged),
		cmocka_unit_test(power_loss_whole),
		cmocka_unit_test(power_loss_rollback),
		cmocka_unit_test(power_loss_fsync),
		cmocka_unit_test(power_loss_debt),
		cmocka_unit_test(power_loss_names),
		cmocka_unit_test(power_loss_generated),
	};

	corpus_load();
	if (getenv("FSTX_TEST_ONLY")) /* one test by name (a glob) */
		cmocka_set_test_filter(getenv("FSTX_TEST_ONLY"));
	return cmocka_run_group_tests_name("powerloss", tests, NULL, NULL);
}
