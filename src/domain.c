/* SPDX-License-Identifier: MIT */
/*
 * domain.c - the domain directory and its DIR/.fstx/ metadata:
 *
 *   .fstx/lock     flock()ed exclusively for each transaction or recovery
 *   .fstx/journal  empty when clean; see journal.c for its rules
 *   .fstx/new/     staging: objects a transaction creates are made here,
 *                  then renamed into place
 *   .fstx/trash/   names a transaction removes are renamed here and
 *                  deleted only after commit
 *   .fstx/wnew/    the write-ahead log's staging of new files (wal.c W2,
 *                  W6), emptied by each checkpoint
 *   .fstx/wedged   present while the domain is wedged (WEDGEONFAIL)
 *   .fstx/step.N   progress mark: name steps 0..N-1 are done, N may be
 *                  (journal.c rule 5); a name, so that it is ordered with
 *                  the name steps themselves
 */
#define _GNU_SOURCE
#include "internal.h"
#include "wal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static int ensure_dir(int dirfd, const char *name, int *created)
{
	int r = fx_os.mkdirat(dirfd, name, 0700);

	if (r == 0)
		*created = 1;
	return r == -EEXIST ? 0 : r;
}

/* Open .fstx/name read-write, creating it (and saying so) if absent. */
static int open_file(struct fstx_domain *d, const char *name, int *created)
{
	int fd = fx_os.openat2(d->meta, name, O_RDWR, 0, FX_RESOLVE);

	if (fd == -ENOENT) {
		fd = fx_os.openat2(d->meta, name, O_RDWR | O_CREAT, 0600, FX_RESOLVE);
		*created = 1;
	}
	return fd;
}

int fx_domain_init(struct fstx_domain *d, int dirfd)
{
	int created = 0, r;

	memset(d, 0, sizeof(*d)); /* every field not set below starts at 0 */
	d->root = d->meta = d->lockfd = d->jfd = d->wal = d->walsync = -1;
	fx_ss_init(&d->debt);
	d->failed_op = -1;
	d->mark = -1;
	d->lock_wait = -1;
	for (size_t i = 0; i < FX_FDC; i++)
		d->fdc[i] = (struct fx_fdc){ .fd = -1 };
	r = fx_os.openat2(dirfd, ".", O_RDONLY | O_DIRECTORY, 0, 0);
	if (r < 0)
		return r;
	d->root = r;
	r = ensure_dir(d->root, FX_META, &created);
	if (r < 0)
		goto fail;
	r = fx_os.openat2(d->root, FX_META, O_RDONLY | O_DIRECTORY, 0,
			    FX_RESOLVE);
	if (r < 0)
		goto fail;
	d->meta = r;
	if ((r = ensure_dir(d->meta, "new", &created)) < 0 ||
	    (r = ensure_dir(d->meta, "trash", &created)) < 0 ||
	    (r = ensure_dir(d->meta, "wnew", &created)) < 0)
		goto fail;
	r = fx_os.openat2(d->meta, "lock", O_RDWR | O_CREAT, 0600, FX_RESOLVE);
	if (r < 0)
		goto fail;
	d->lockfd = r;
	/* the journal and the write-ahead log (wal.c), names durable below */
	if ((r = d->jfd = open_file(d, "journal", &created)) < 0 ||
	    (r = d->wal = open_file(d, "wal", &created)) < 0)
		goto fail;
	fx_fs_detect(d);
	if (created) {
		/* New names must be durable before a journal relies on them. */
		if ((r = fx_os.fsync(d->meta)) < 0 ||
		    (r = fx_os.fsync(d->root)) < 0)
			goto fail;
	}
	return 0;
fail:
	fx_domain_fini(d);
	return r;
}

void fx_domain_fini(struct fstx_domain *d)
{
	int *fds[] = { &d->walsync, &d->wal, &d->jfd, &d->lockfd, &d->meta,
		       &d->root };

	fx_ss_drop(&d->debt); /* crash-only: a close makes nothing durable */
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			fx_os.close(*fds[i]);
		*fds[i] = -1;
	}
	for (size_t i = 0; i < FX_FDC; i++) {
		if (d->fdc[i].fd >= 0)
			fx_os.close(d->fdc[i].fd);
		d->fdc[i].fd = -1;
	}
	free(d->wbuf);
	d->wbuf = NULL;
	free(d->win);
	d->win = NULL;
	free(d->wal_remap);
	d->wal_remap = NULL;
	d->wal_nremap = 0;
	free(d->wal_gone);
	d->wal_gone = NULL;
	d->wal_ngone = 0;
	d->win_cap = 0;
	if (d->walmap)
		fx_os.unmap((void *)(uintptr_t)d->walmap, FX_WALMAP);
	d->walmap = NULL;
}

void fx_domain_set_wait(struct fstx_domain *d, long ms,
			void (*notice)(void *arg), void *arg)
{
	d->lock_wait = ms < 0 ? -1 : ms;
	d->lock_notice = notice;
	d->lock_arg = arg;
}

/*
 * The default (wait forever, nobody to tell) is one blocking flock.  A
 * bounded wait or a notice polls with LOCK_NB, backing off to 20 ms naps;
 * once the notice is given an unbounded wait blocks again.
 */
int fx_lock(struct fstx_domain *d)
{
	long waited = 0;
	unsigned nap = 1;
	int told = 0, r;

	if (d->lock_wait < 0 && !d->lock_notice)
		return fx_os.flock(d->lockfd, LOCK_EX);
	for (;;) {
		r = fx_os.flock(d->lockfd, LOCK_EX | LOCK_NB);
		if (r != -EWOULDBLOCK)
			return r;
		if (d->lock_wait == 0)
			return -EWOULDBLOCK;
		if (d->lock_wait > 0 && waited >= d->lock_wait)
			return -ETIMEDOUT;
		if (!told && waited >= 1000 && d->lock_notice) {
			d->lock_notice(d->lock_arg);
			told = 1;
			if (d->lock_wait < 0)
				return fx_os.flock(d->lockfd, LOCK_EX);
		}
		if ((r = fx_os.nap(nap)) < 0 && r != -EINTR)
			return r;
		waited += nap;
		nap = nap < 20 ? nap * 2 : 20;
	}
}

void fx_unlock(struct fstx_domain *d)
{
	fx_os.flock(d->lockfd, LOCK_UN);
}

int fx_is_wedged(struct fstx_domain *d)
{
	struct stat st;
	int r = fx_os.fstatat(d->meta, "wedged", &st, AT_SYMLINK_NOFOLLOW);

	if (r == -ENOENT)
		return 0;
	return r < 0 ? r : 1;
}

int fx_wedge(struct fstx_domain *d)
{
	int fd, r = fx_wal_set_dirty(d);

	if (r < 0)
		return r;
	fd = fx_os.openat2(d->meta, "wedged", O_WRONLY | O_CREAT, 0600,
			     FX_RESOLVE);
	if (fd < 0)
		return fd;
	r = fx_os.fsync(fd);
	fx_os.close(fd);
	return r < 0 ? r : fx_os.fsync(d->meta);
}

int fx_unwedge(struct fstx_domain *d)
{
	int r = fx_os.unlinkat(d->meta, "wedged", 0);

	if (r == -ENOENT)
		return 0;
	return r < 0 ? r : fx_os.fsync(d->meta);
}

int fx_dir_each(int fd, int (*cb)(int fd, const char *name, void *arg),
		void *arg)
{
	char buf[4096];
	ssize_t n;

	while ((n = fx_os.getdents(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t off = 0; off < n;) {
			struct { uint64_t ino; int64_t off; unsigned short reclen;
				 unsigned char type; char name[]; } *e = (void *)(buf + off);
			int r;

			off += e->reclen;
			if (!strcmp(e->name, ".") || !strcmp(e->name, ".."))
				continue;
			if ((r = cb(fd, e->name, arg)) != 0)
				return r;
		}
	}
	return n < 0 ? (int)n : 0;
}

/* An entry of new/ or trash/: a file, or a directory that must be empty
 * (the undo way removes only empty ones; what another process put in one
 * since stays). */
static int remove_entry(int fd, const char *name, void *arg)
{
	int r = fx_os.unlinkat(fd, name, 0);

	(void)arg;
	if (r == -EISDIR || r == -EPERM)
		r = fx_os.unlinkat(fd, name, AT_REMOVEDIR);
	return r == -ENOENT ? 0 : r;
}

static int remove_tree(int fd, const char *name, void *arg)
{
	size_t n = strlen(name), k = sizeof(FX_WNEW_KEEP) - 1;

	if (n > k && !strcmp(name + n - k, FX_WNEW_KEEP)) {
		int r = remove_entry(fd, name, arg);

		return r == -ENOTEMPTY || r == -EEXIST ? 0 : r; /* stays */
	}
	return fx_clean_tree(fd, name);
}

/*
 * Remove entry name of directory dfd, and what it holds: scratch of fstx
 * only (.fstx/wnew/'s staged directories hold files, wal.c W2).
 */
int fx_clean_tree(int dfd, const char *name)
{
	int r = fx_os.unlinkat(dfd, name, 0), fd;

	if (r == -EISDIR || r == -EPERM)
		r = fx_os.unlinkat(dfd, name, AT_REMOVEDIR);
	if (r == -ENOTEMPTY || r == -EEXIST) {
		fd = fx_os.openat2(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0,
				   FX_RESOLVE);
		if (fd < 0)
			return fd;
		r = fx_dir_each(fd, remove_tree, NULL);
		fx_os.close(fd);
		if (r == 0)
			r = fx_os.unlinkat(dfd, name, AT_REMOVEDIR);
	}
	return r == -ENOENT ? 0 : r;
}

/* Remove every entry of an fstx scratch directory (new/ or trash/; wnew/,
 * whose staged directories are removed with what they hold). */
static int clean_dir(struct fstx_domain *d, const char *dir,
		     int (*rm)(int fd, const char *name, void *arg))
{
	int fd = fx_os.openat2(d->meta, dir, O_RDONLY | O_DIRECTORY, 0, FX_RESOLVE);
	int r;

	if (fd < 0)
		return fd;
	r = fx_dir_each(fd, rm, NULL);
	fx_os.close(fd);
	return r;
}

/* Set the progress mark to step i (create it, or rename the old one). */
int fx_mark_set(struct fstx_domain *d, long i)
{
	char old[48], new[48];
	int r;

	if (i == d->mark)
		return 0;
	snprintf(new, sizeof(new), "step.%016llx.%ld", (unsigned long long)d->txid, i);
	if (d->mark < 0) {
		r = fx_os.symlinkat("fstx", d->meta, new);
	} else {
		snprintf(old, sizeof(old), "step.%016llx.%ld",
			 (unsigned long long)d->txid, d->mark);
		r = fx_os.renameat2(d->meta, old, d->meta, new, RENAME_NOREPLACE);
	}
	if (r == 0)
		d->mark = i;
	return r;
}

struct mark_scan {
	struct fstx_domain *d;
	char want[32];
	long best;
	int unlink_all;
};

static int mark_entry(int fd, const char *name, void *arg)
{
	struct mark_scan *m = arg;
	size_t wl = strlen(m->want);
	char *end;
	long v;

	if (strncmp(name, "step.", 5))
		return 0;
	if (m->unlink_all) {
		int r = fx_os.unlinkat(fd, name, 0);

		return r == -ENOENT ? 0 : r;
	}
	if (strncmp(name, m->want, wl))
		return 0;
	v = strtol(name + wl, &end, 10);
	if (!*end && v >= 0 && v > m->best && v < INT32_MAX)
		m->best = v;
	return 0;
}

/*
 * Find the progress mark of transaction d->txid: its step number, -1 if
 * none, or -errno.  With unlink_all, remove every mark instead.
 */
static int mark_scan(struct fstx_domain *d, int unlink_all)
{
	struct mark_scan m = { .d = d, .best = -1, .unlink_all = unlink_all };
	int fd = fx_os.openat2(d->root, FX_META, O_RDONLY | O_DIRECTORY, 0,
				 FX_RESOLVE);
	int r;

	if (fd < 0)
		return fd;
	snprintf(m.want, sizeof(m.want), "step.%016llx.", (unsigned long long)d->txid);
	r = fx_dir_each(fd, mark_entry, &m);
	fx_os.close(fd);
	if (r < 0)
		return r;
	d->mark = m.best;
	return (int)m.best;
}

int fx_mark_get(struct fstx_domain *d)
{
	return mark_scan(d, 0);
}

static int any_mark(int fd, const char *name, void *arg)
{
	(void)fd;
	(void)arg;
	return strncmp(name, "step.", 5) ? 0 : 1;
}

int fx_mark_any(struct fstx_domain *d)
{
	int fd = fx_os.openat2(d->root, FX_META, O_RDONLY | O_DIRECTORY, 0,
				 FX_RESOLVE), r;

	if (fd < 0)
		return fd;
	r = fx_dir_each(fd, any_mark, NULL);
	fx_os.close(fd);
	return r;
}

int fx_parent(struct fstx_domain *d, const char *p, const char **name)
{
	const char *slash = strrchr(p, '/');
	char *dir;
	int fd;

	if (!slash) {
		*name = p;
		return fx_os.dup(d->root);
	}
	*name = slash + 1;
	dir = fx_strndup(p, (size_t)(slash - p));
	if (!dir)
		return -ENOMEM;
	fd = fx_os.openat2(d->root, dir, O_PATH | O_DIRECTORY, 0, FX_RESOLVE);
	free(dir);
	return fd;
}

int fx_lstat(struct fstx_domain *d, const char *p, struct stat *st)
{
	const char *name;
	int dfd, r;

	if (!*p)
		return fx_os.fstat(d->root, st);
	if (!strchr(p, '/')) /* in the root: no parent to open */
		return fx_os.fstatat(d->root, p, st, AT_SYMLINK_NOFOLLOW);
	dfd = fx_parent(d, p, &name);
	if (dfd < 0)
		return dfd;
	r = fx_os.fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW);
	fx_os.close(dfd);
	return r;
}

int fx_open(struct fstx_domain *d, const char *p, int flags, mode_t mode)
{
	return fx_os.openat2(d->root, *p ? p : ".", flags, mode, FX_RESOLVE);
}

/*
 * open(2) with O_CREAT gives its caller a descriptor of a new file with
 * the access it asks whatever the mode it makes it with (git makes its
 * objects 0444), and mkdir(2) makes a directory its owner may not list
 * (0311).  fstx makes new objects before it writes them (staged, trans.c
 * prestage(), wal.c W2) and opens them again by name: to write them, on
 * the undo way and in a log's replay or help pass, and to fsync them, at
 * a barrier or a checkpoint.  There the mode may refuse its owner.  The
 * owner may change the mode, so the owner's bits the open needs are
 * added for it and the mode put back after it, the open descriptor
 * keeping its access (the object's ctime changes).  A crash between the
 * two leaves the object with those bits, nothing else.
 */
/* Is the caller in group gid (a chmod by it keeps S_ISGID)? */
static int in_group(gid_t gid)
{
	gid_t g[64];
	int n = getgroups(64, g);

	if (gid == getegid())
		return 1;
	for (int i = 0; i < n; i++)
		if (g[i] == gid)
			return 1;
	return 0;
}

/* May the caller give its owner the bits `need` on object st (a chmod that
 * keeps S_ISGID: the caller is in its group)? */
int fx_owner_may_add(const struct stat *st, mode_t need)
{
	mode_t m = st->st_mode & 07777;

	return (m & need) != need && st->st_uid == geteuid() &&
	       (!(m & S_ISGID) || in_group(st->st_gid));
}

int fx_dir_syncable(struct fstx_domain *d, const char *dir)
{
	struct stat st;
	int r;

	if (geteuid() == 0 || fx_os.faccessat(d->root, *dir ? dir : ".", R_OK) == 0)
		return 0;
	if ((r = fx_lstat(d, dir, &st)) < 0)
		return r;
	return S_ISDIR(st.st_mode) && fx_owner_may_add(&st, S_IRUSR) ? 0 : -EACCES;
}

int fx_new_dir_syncable(struct fstx_domain *d, const char *parent, mode_t mode)
{
	struct stat st;
	int r;

	if (geteuid() == 0 || (mode & S_IRUSR))
		return 0;
	if ((r = fx_lstat(d, parent, &st)) < 0)
		return r == -ENOENT ? 0 : r; /* a new one: its own mode, looked at */
	return (st.st_mode & S_ISGID) && !in_group(st.st_gid) ? -EACCES : 0;
}

int fx_openat_owned(int dfd, const char *name, int flags, int resolve)
{
	int fd = fx_os.openat2(dfd, name, flags, 0, resolve), r;
	int acc = flags & O_ACCMODE;
	mode_t m = 0, need = (acc != O_WRONLY ? S_IRUSR : 0) | (acc != O_RDONLY ? S_IWUSR : 0);
	struct stat st;

	if (fd != -EACCES)
		return fd;
	if ((r = fx_os.fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW)) == 0) {
		m = st.st_mode & 07777;
		/* (a chmod by one outside the group drops S_ISGID for good) */
		if (!(S_ISREG(st.st_mode) || (S_ISDIR(st.st_mode) && acc == O_RDONLY)) ||
		    !fx_owner_may_add(&st, need))
			r = -EACCES; /* not the owner's bits that refuse it */
	}
	if (r == 0 && (r = fx_os.fchmodat(dfd, name, m | need)) == 0) {
		r = fx_os.openat2(dfd, name, flags | O_NOFOLLOW, 0, resolve);
		fd = fx_os.fchmodat(dfd, name, m);
		if (r >= 0 && fd < 0) {
			fx_os.close(r);
			r = fd;
		}
	}
	return r == -EPERM ? -EACCES : r; /* not its owner: the open's error */
}

const char *fx_dirname(const char *p, char *buf)
{
	const char *slash = strrchr(p, '/');

	snprintf(buf, PATH_MAX, "%.*s", slash ? (int)(slash - p) : 0, p);
	return buf;
}

/*
 * The epoch: the boot id with the mount's unique id in its last 16
 * characters.  Within one epoch the page cache holds everything written:
 * a remount (a forced unmount, a removable or network disk that came
 * back) gets another id.  Where the kernel has no mount id the boot id
 * alone is used (fstx(7)).  The log's notes (wal.c W5) and the undo
 * journal (journal.c rule 5c) trust what was written in this epoch.
 */
int fx_epoch_id(struct fstx_domain *d, char id[37])
{
	int r = fx_os.boot_id(id);

	if (r < 0)
		return r;
	if (!d->mnt_known) {
		r = fx_os.mount_id(d->root, &d->mnt_id);
		if (r < 0 && r != -EOPNOTSUPP && r != -EINVAL && r != -ENOSYS)
			return r;
		d->mnt_known = r < 0 ? -1 : 1;
	}
	if (d->mnt_known > 0)
		snprintf(id + 20, 17, "%016llx", (unsigned long long)d->mnt_id);
	return 0;
}

long fx_setgid_group(struct fstx_domain *d, const char *dir)
{
	struct stat st;

	if (fx_lstat(d, dir, &st) < 0 || !S_ISDIR(st.st_mode) || !(st.st_mode & S_ISGID))
		return -1;
	return (long)st.st_gid;
}

void fx_take_group(int dfd, const char *name, long gid, int isdir)
{
	gid_t g = gid < 0 ? getegid() : (gid_t)gid;
	mode_t sgid = gid < 0 ? 0 : S_ISGID;
	struct stat st;

	if (fx_os.fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (st.st_gid != g && fx_os.fchgrpat(dfd, name, g) < 0)
		return; /* not a member of that group: left as it is */
	if (isdir && (st.st_mode & S_ISGID) != sgid)
		fx_os.fchmodat(dfd, name, (st.st_mode & 07777 & ~S_ISGID) | sgid);
}

int fx_open_owned(struct fstx_domain *d, const char *p, int flags)
{
	const char *name;
	int dfd, fd = fx_open(d, p, flags, 0);

	if (fd != -EACCES || (dfd = fx_parent(d, p, &name)) < 0)
		return fd;
	fd = fx_openat_owned(dfd, *name ? name : ".", flags, FX_RESOLVE);
	fx_os.close(dfd);
	return fd;
}

int fx_clean_scratch(struct fstx_domain *d)
{
	int r = mark_scan(d, 1);

	d->mark = -1;
	if (r < -1)
		return r;
	r = clean_dir(d, "trash", remove_entry);

	return r < 0 ? r : clean_dir(d, "new", remove_entry);
}

int fx_clean_wnew(struct fstx_domain *d)
{
	return clean_dir(d, "wnew", remove_tree);
}
