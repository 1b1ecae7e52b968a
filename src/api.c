/* SPDX-License-Identifier: MIT */
/*
 * api.c - the ergonomic API: domain handles and a transaction builder over
 * the RFC's ABI.  Builder calls only record ops; fstx_tx_commit runs them.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "fstx/btrfs_usertrans.h"
#include "wal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdio.h>


int fstx_domain_openfd(int dirfd, fstx_domain **out)
{
	fstx_domain *d;
	int r;

	if (!out)
		return -EINVAL;
	if (!(d = fx_calloc(1, sizeof(*d))))
		return -ENOMEM;
	r = fx_domain_init(d, dirfd);
	if (r < 0) {
		free(d);
		return r;
	}
	*out = d;
	return 0;
}

int fstx_domain_open(const char *path, fstx_domain **out)
{
	int fd, r;

	if (!path || !out)
		return -EINVAL;
	fd = fx_os.openat2(AT_FDCWD, path, O_RDONLY | O_DIRECTORY, 0, 0);
	if (fd < 0)
		return fd;
	r = fstx_domain_openfd(fd, out);
	fx_os.close(fd);
	return r;
}

void fstx_domain_close(fstx_domain *d)
{
	if (!d)
		return;
	if (d->lazy_wrote && !d->latched && fx_lock(d) == 0) {
		fx_recover(d, FX_REC_FLUSH); /* FSTX_UT_LAZY: durable by close */
		fx_unlock(d);
	}
	if (d->wal_unsaid && !d->latched && fx_lock(d) == 0) {
		fx_wal_settle(d); /* wal.c W12: say what this handle applied */
		fx_unlock(d);
	}
	fx_domain_fini(d);
	free(d);
}

int fstx_sync(fstx_domain *d)
{
	int r;

	if (!d)
		return -EINVAL;
	if (d->latched)
		return d->latched;
	if ((r = fx_lock(d)) < 0)
		return r;
	r = fx_recover(d, FX_REC_FLUSH);
	/* crash-only transactions: the undo way's objects (trans.c), then
	 * a checkpoint with barriers for the log's (wal.c W6, W11) */
	if (r >= 0 && d->nosync_wrote &&
	    ((r = fx_crash_only_pay(d)) < 0 || (r = fx_wal_checkpoint(d)) < 0))
		d->latched = r;
	else if (r >= 0)
		d->nosync_wrote = 0;
	fx_unlock(d);
	return r < 0 ? r : 0;
}

int fstx_recover(fstx_domain *d)
{
	int r;

	if (!d)
		return -EINVAL;
	if ((r = fx_lock(d)) < 0)
		return r;
	r = fx_recover(d, FX_REC_FULL);
	fx_unlock(d);
	return r;
}

/*
 * A shared lock excludes every writer's transaction (writers hold it
 * exclusively from planning to the end of commit or rollback), so between
 * begin and end the tree is a committed state.  A hot journal is rolled
 * back first, which needs the lock exclusively: drop, take it exclusively,
 * recover, and read under that.
 */
int fstx_read_begin(fstx_domain *d)
{
	int r, wedged;

	if (!d)
		return -EINVAL;
	if ((r = fx_os.flock(d->lockfd, LOCK_SH)) < 0)
		return r;
	wedged = fx_is_wedged(d);
	r = wedged ? wedged : fx_journal_hot(d);
	if (r == 0)
		r = fx_wal_pending(d); /* a writer died applying it */
	if (r == 0)
		return 0; /* hold it */
	fx_unlock(d);
	if (r < 0)
		return r;
	if (wedged)
		return -EROFS; /* the tree may be torn: fstx_recover() */
	if ((r = fx_lock(d)) < 0)
		return r;
	r = fx_recover(d, FX_REC_READER);
	if (r >= 0)
		return 0; /* recovered: read under the exclusive lock (no
			   * writer can queue more lazy records meanwhile) */
	fx_unlock(d);
	return r;
}

void fstx_read_end(fstx_domain *d)
{
	if (d)
		fx_unlock(d);
}

/* The journal's size and the wedge mark, read without the lock. */
static int journal_state(fstx_domain *d, struct fstx_status *st)
{
	struct stat js;
	int r;

	if ((r = fx_os.fstat(d->jfd, &js)) < 0)
		return r;
	st->hot = js.st_size > 0;
	st->journal_bytes = (uint64_t)js.st_size;
	r = fx_is_wedged(d);
	if (r < 0)
		return r;
	st->wedged = r;
	return 0;
}

int fx_needs_recover(fstx_domain *d)
{
	struct fstx_status st = { 0 };
	int r = journal_state(d, &st);

	return r < 0 ? r : st.hot || st.wedged || fx_wal_owed(d);
}

int fstx_status(fstx_domain *d, struct fstx_status *st)
{
	int r;

	if (!d || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	if ((r = journal_state(d, st)) < 0)
		return r;
	st->block_size = d->fs.block_size;
	snprintf(st->fs_type, sizeof(st->fs_type), "%s", fx_fs_name(d->fs.magic));
	if (fx_lock(d) == 0) {
		fx_fs_probe(d);
		fx_fs_probe_dir_fsync(d);
		fx_unlock(d);
	}
	st->reflink = d->fs.reflink;
	st->xattr_user = d->fs.xattr_user;
	st->dir_fsync = d->fs.dir_fsync;
	return 0;
}

/* ---- the builder -------------------------------------------------------- */

int fstx_tx_new(fstx_domain *d, fstx_tx **out)
{
	fstx_tx *tx;

	if (!d || !out)
		return -EINVAL;
	tx = fx_calloc(1, sizeof(*tx));
	if (!tx)
		return -ENOMEM;
	tx->d = d;
	tx->flags = FSTX_UT_STRICT;
	tx->failed = -1;
	*out = tx;
	return 0;
}

void fstx_tx_free(fstx_tx *tx)
{
	if (!tx)
		return;
	for (size_t i = 0; i < tx->nstrs; i++)
		free(tx->strs[i]);
	free(tx->strs);
	free(tx->ops);
	free(tx->live);
	free(tx->freefds);
	free(tx->errmsg);
	free(tx);
}

/* A copy of n bytes (and a NUL) owned by tx; its address, or -1. */
int64_t fx_tx_keep(fstx_tx *tx, const void *p, size_t n)
{
	char *c;

	if (n == SIZE_MAX)
		return -1;
	if (tx->nstrs == tx->cstrs) {
		size_t cap = tx->cstrs ? 2 * tx->cstrs : 16;
		char **ns = fx_realloc(tx->strs, cap * sizeof(*ns));

		if (!ns)
			return -1;
		tx->strs = ns;
		tx->cstrs = cap;
	}
	c = fx_malloc(n + 1);
	if (!c)
		return -1;
	if (n)
		memcpy(c, p, n);
	c[n] = 0;
	tx->strs[tx->nstrs++] = c;
	return (int64_t)(intptr_t)c;
}

static int64_t keep(fstx_tx *tx, const char *s)
{
	return s ? fx_tx_keep(tx, s, strlen(s)) : 0;
}

/*
 * Data the op will point to: the caller's buffer, or with FSTX_UT_COPY
 * (and for the task builders, copy 1) a copy owned by tx.  -1: no memory.
 */
static int64_t data_arg(fstx_tx *tx, const void *p, size_t n, int copy)
{
	if (!p || !(copy || (tx->flags & FSTX_UT_COPY)))
		return (int64_t)(intptr_t)p;
	return fx_tx_keep(tx, p, n);
}

const char *fx_errname(long e)
{
	int n = (int)(e < 0 ? -e : e);
	const char *s = NULL;

#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
	s = n ? strerrorname_np(n) : NULL;
#endif
	return s ? s : "E?";
}

/* "fstx_tx_setxattr("obj", "user.k")": the call and its names. */
int fx_tx_poison(fstx_tx *tx, int r, const char *call, const char *a,
		 const char *b)
{
	if (r >= 0 || !tx || tx->poisoned)
		return r;
	tx->poisoned = r;
	free(tx->errmsg);
	tx->errmsg = NULL;
	if (fx_asprintf(&tx->errmsg, "%s(%s%s%s%s%s%s): %s (%s); the transaction "
			"will not commit", call, a ? "\"" : "", a ? a : "",
			a ? "\"" : "", b ? ", \"" : "", b ? b : "", b ? "\"" : "",
			strerror(-r), fx_errname(r)) < 0)
		tx->errmsg = NULL;
	return r;
}

#define POISON(tx, r, a, b) fx_tx_poison(tx, r, __func__, a, b)

/*
 * Strict by default, per op (a transaction flag could be turned
 * off for every op at once): fail on a negative result, and a pwrite
 * also on a short one.  fstx_tx_expect() replaces it for its op only.
 */
void fx_op_strict(struct btrfs_ioctl_usertrans_op *op)
{
	if (op->op == BTRFS_IOC_UT_OP_PWRITE) {
		op->flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE;
		op->rval = op->args[2];
	} else {
		op->flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT;
		op->rval = 0;
	}
}

static struct btrfs_ioctl_usertrans_op *add(fstx_tx *tx, uint64_t opn)
{
	struct btrfs_ioctl_usertrans_op *op;

	if (tx->nops >= FSTX_MAX_OPS)
		return NULL;
	if (tx->nops == tx->cops) {
		size_t n = tx->cops ? 2 * tx->cops : 16;
		void *np = fx_realloc(tx->ops, n * sizeof(*tx->ops));

		if (!np)
			return NULL;
		tx->ops = np;
		tx->cops = n;
	}
	op = &tx->ops[tx->nops];
	memset(op, 0, sizeof(*op));
	op->op = opn;
	return op;
}

/* The op just filled in: made strict and counted. */
static void done(fstx_tx *tx)
{
	fx_op_strict(&tx->ops[tx->nops]);
	tx->nops++;
}

/* Add an op with path arguments p0 (args[0]) and p1 (args[1]). */
static int add_paths(fstx_tx *tx, uint64_t opn, const char *p0, const char *p1,
		     int64_t a1, int64_t a2)
{
	struct btrfs_ioctl_usertrans_op *op;
	int64_t s0, s1 = a1;

	if (!tx || !p0 || (opn != BTRFS_IOC_UT_OP_MKDIR &&
			   opn != BTRFS_IOC_UT_OP_TRUNCATE && !p1 && a1 == -1))
		return -EINVAL;
	s0 = keep(tx, p0);
	if (p1)
		s1 = keep(tx, p1);
	if (s0 < 0 || s1 < 0 || !(op = add(tx, opn)))
		return -ENOMEM;
	op->args[0] = s0;
	op->args[1] = s1;
	op->args[2] = a2;
	return 0; /* the caller fills in the rest, then done() */
}

static int add_paths_done(fstx_tx *tx, uint64_t opn, const char *p0,
			  const char *p1, int64_t a1, int64_t a2)
{
	int r = add_paths(tx, opn, p0, p1, a1, a2);

	if (r == 0)
		done(tx);
	return r;
}

static int tx_open(fstx_tx *tx, const char *path, int flags, mode_t mode)
{
	int r, fd;

	if (!tx)
		return -EINVAL;
	if (!tx->live && (!(tx->live = fx_calloc(FSTX_MAX_FDS, 1)) ||
			  !(tx->freefds = fx_malloc(FSTX_MAX_FDS * sizeof(int))))) {
		free(tx->live);
		tx->live = NULL;
		return -ENOMEM;
	}
	if (!tx->nfree && tx->nextfd >= FSTX_MAX_FDS)
		return -EMFILE;
	r = add_paths(tx, BTRFS_IOC_UT_OP_OPEN, path, NULL, flags, mode);
	if (r < 0)
		return r;
	/* A closed slot is reused, so any number of open/close pairs fit. */
	fd = tx->nfree ? tx->freefds[--tx->nfree] : tx->nextfd++;
	tx->ops[tx->nops].args[3] = fd;
	done(tx);
	tx->live[fd] = 1;
	if (fd + 1 > tx->maxfd)
		tx->maxfd = fd + 1;
	return fd;
}

int fstx_tx_open(fstx_tx *tx, const char *path, int flags, mode_t mode)
{
	return POISON(tx, tx_open(tx, path, flags, mode), path, NULL);
}

static int add_args(fstx_tx *tx, uint64_t opn, int64_t a0, int64_t a1,
		    int64_t a2, int64_t a3, int64_t a4)
{
	struct btrfs_ioctl_usertrans_op *op;

	if (!tx)
		return -EINVAL;
	if (!(op = add(tx, opn)))
		return -ENOMEM;
	op->args[0] = a0;
	op->args[1] = a1;
	op->args[2] = a2;
	op->args[3] = a3;
	op->args[4] = a4;
	done(tx);
	return 0;
}

static int tx_close(fstx_tx *tx, int fd)
{
	int r = add_args(tx, BTRFS_IOC_UT_OP_CLOSE, fd, 0, 0, 0, 0);

	if (r == 0 && tx->live && fd >= 0 && fd < tx->maxfd && tx->live[fd]) {
		tx->live[fd] = 0;
		tx->freefds[tx->nfree++] = fd;
	}
	return r;
}

int fstx_tx_close(fstx_tx *tx, int fd)
{
	return POISON(tx, tx_close(tx, fd), NULL, NULL);
}

static int tx_pwrite(fstx_tx *tx, int fd, const void *buf, size_t len, off_t off,
		     int copy)
{
	int64_t p;

	if (!tx || len > INT64_MAX || off < 0 ||
	    off > (off_t)(INT64_MAX - (int64_t)len) || (!buf && len))
		return -EINVAL;
	if ((p = data_arg(tx, buf, len, copy)) < 0)
		return -ENOMEM;
	return add_args(tx, BTRFS_IOC_UT_OP_PWRITE, fd, p, (int64_t)len, off, 0);
}

int fstx_tx_pwrite(fstx_tx *tx, int fd, const void *buf, size_t len, off_t off)
{
	return POISON(tx, tx_pwrite(tx, fd, buf, len, off, 0), NULL, NULL);
}

int fstx_tx_unlink(fstx_tx *tx, const char *path)
{
	return POISON(tx, add_paths_done(tx, BTRFS_IOC_UT_OP_UNLINK, path, NULL, 0, 0),
		      path, NULL);
}

int fstx_tx_link(fstx_tx *tx, const char *oldpath, const char *newpath)
{
	return POISON(tx, add_paths_done(tx, BTRFS_IOC_UT_OP_LINK, oldpath, newpath,
					 -1, 0), oldpath, newpath);
}

int fstx_tx_mkdir(fstx_tx *tx, const char *path, mode_t mode)
{
	return POISON(tx, add_paths_done(tx, BTRFS_IOC_UT_OP_MKDIR, path, NULL, mode,
					 0), path, NULL);
}

int fstx_tx_rmdir(fstx_tx *tx, const char *path)
{
	return POISON(tx, add_paths_done(tx, BTRFS_IOC_UT_OP_RMDIR, path, NULL, 0, 0),
		      path, NULL);
}

int fstx_tx_truncate(fstx_tx *tx, const char *path, off_t size)
{
	if (size < 0) /* add_paths() reads a negative argument as no memory */
		return POISON(tx, -EINVAL, path, NULL);
	return POISON(tx, add_paths_done(tx, BTRFS_IOC_UT_OP_TRUNCATE, path, NULL,
					 size, 0), path, NULL);
}

/* setxattr and assert-xattr: path, name, value (len at args[3]). */
static int add_xattr(fstx_tx *tx, uint64_t opn, const char *path,
		     const char *name, const void *value, size_t len, int flags)
{
	int64_t v;
	int r;

	if (!tx || len > FSTX_MAX_XATTR || (!value && len))
		return -EINVAL;
	if ((v = data_arg(tx, value, len, 0)) < 0)
		return -ENOMEM;
	r = add_paths(tx, opn, path, name, -1, v);
	if (r == 0) {
		tx->ops[tx->nops].args[3] = (int64_t)len;
		tx->ops[tx->nops].args[4] = flags;
		done(tx);
	}
	return r;
}

int fstx_tx_setxattr(fstx_tx *tx, const char *path, const char *name,
		     const void *value, size_t len, int flags)
{
	return POISON(tx, add_xattr(tx, BTRFS_IOC_UT_OP_SETXATTR, path, name, value,
				    len, flags), path, name);
}

int fstx_tx_removexattr(fstx_tx *tx, const char *path, const char *name)
{
	return POISON(tx, add_paths_done(tx, BTRFS_IOC_UT_OP_REMOVEXATTR, path, name,
					 -1, 0), path, name);
}

int fstx_tx_clonerange(fstx_tx *tx, int dstfd, int srcfd, off_t srcoff,
		       off_t len, off_t dstoff)
{
	return POISON(tx, add_args(tx, BTRFS_IOC_UT_OP_CLONERANGE, dstfd, srcfd,
				   srcoff, len, dstoff), NULL, NULL);
}

int fstx_tx_rename(fstx_tx *tx, const char *oldpath, const char *newpath,
		   unsigned int flags)
{
	return POISON(tx, add_paths_done(tx, FSTX_OP_RENAME, oldpath, newpath, -1,
					 flags), oldpath, newpath);
}

int fstx_tx_symlink(fstx_tx *tx, const char *target, const char *linkpath)
{
	return POISON(tx, add_paths_done(tx, FSTX_OP_SYMLINK, target, linkpath, -1,
					 0), target, linkpath);
}

int fstx_tx_assert_absent(fstx_tx *tx, const char *path)
{
	return POISON(tx, add_paths_done(tx, FSTX_OP_ASSERT_ABSENT, path, NULL, 0, 0),
		      path, NULL);
}

int fstx_tx_assert_exists(fstx_tx *tx, const char *path)
{
	return POISON(tx, add_paths_done(tx, FSTX_OP_ASSERT_EXISTS, path, NULL, 0, 0),
		      path, NULL);
}

static int assert_data(fstx_tx *tx, const char *path, const void *data,
		       size_t len)
{
	int64_t p;

	if (!tx || len > INT64_MAX || (!data && len))
		return -EINVAL;
	if ((p = data_arg(tx, data, len, 0)) < 0)
		return -ENOMEM;
	return add_paths_done(tx, FSTX_OP_ASSERT_DATA, path, NULL, p, (int64_t)len);
}

int fstx_tx_assert_data(fstx_tx *tx, const char *path, const void *data,
			size_t len)
{
	return POISON(tx, assert_data(tx, path, data, len), path, NULL);
}

int fstx_tx_assert_xattr(fstx_tx *tx, const char *path, const char *name,
			 const void *value, size_t len)
{
	return POISON(tx, add_xattr(tx, FSTX_OP_ASSERT_XATTR, path, name, value, len,
				    0), path, name);
}

int fstx_tx_expect(fstx_tx *tx, uint64_t fail_flags, int64_t value)
{
	if (!tx)
		return -EINVAL;
	if (!tx->nops)
		return POISON(tx, -EINVAL, NULL, NULL);
	/* this op's condition only: the others stay strict */
	tx->ops[tx->nops - 1].flags = fail_flags;
	tx->ops[tx->nops - 1].rval = value;
	return 0;
}

/* Flags the builder takes: the engine's, and FSTX_UT_COPY (builder only). */
#define TX_FLAGS ((uint64_t)FSTX_UT_FLAGS | FSTX_UT_COPY)

int fstx_tx_set_flags(fstx_tx *tx, uint64_t flags)
{
	if (!tx)
		return -EINVAL;
	if ((flags & ~TX_FLAGS) ||
	    ((flags & FSTX_UT_LAZY) && (flags & FSTX_UT_NOSYNC)))
		return POISON(tx, -EINVAL, NULL, NULL);
	/* strictness lives in each op (fx_op_strict()): no flag turns it off */
	tx->flags = flags | FSTX_UT_STRICT;
	return 0;
}

int fstx_tx_reserve(fstx_tx *tx, uint64_t data_bytes, uint64_t metadata_ops)
{
	if (!tx)
		return -EINVAL;
	tx->data_bytes = data_bytes;
	tx->metadata_ops = metadata_ops;
	return 0;
}

/* fstx_tx_strerror() of a transaction ut that failed with r. */
static void commit_why(fstx_tx *tx, const struct btrfs_ioctl_usertrans *ut,
		       long r)
{
	char what[PATH_MAX * 2 + 64];
	const char *why = NULL;
	uint64_t bad;

	free(tx->errmsg);
	tx->errmsg = NULL;
	/* an op the engine refused before running anything: say why */
	if (r == -EINVAL && fx_validate_why(ut, &bad, &why) != -EINVAL)
		why = NULL;
	if (tx->failed >= 0 && (size_t)tx->failed < tx->nops) {
		fx_describe_op(tx->ops, (size_t)tx->failed, what, sizeof(what));
		if (fx_asprintf(&tx->errmsg, "op %ld (%s): %s (%s)", tx->failed, what,
				why ? why : fx_op_reason(&tx->ops[tx->failed], r),
				fx_errname(r)) < 0)
			tx->errmsg = NULL;
	} else if (fx_asprintf(&tx->errmsg, "commit: %s (%s)", strerror((int)-r),
			       fx_errname(r)) < 0) {
		tx->errmsg = NULL;
	}
}

int fstx_tx_commit(fstx_tx *tx)
{
	struct btrfs_ioctl_usertrans ut;
	long r;

	if (!tx)
		return -EINVAL;
	if (tx->committed)
		return -EALREADY;
	tx->committed = 1;
	if (tx->poisoned) /* MDB_BAD_TXN: what was built is not what was asked */
		return tx->poisoned;
	ut = (struct btrfs_ioctl_usertrans){
		.num_ops = tx->nops,
		.ops_ptr = (uint64_t)(uintptr_t)tx->ops,
		.num_fds = (uint64_t)tx->maxfd,
		.data_bytes = tx->data_bytes,
		.metadata_ops = tx->metadata_ops,
		/* strictness is in the ops; copying was done at build time */
		.flags = tx->flags & ~(uint64_t)(FSTX_UT_STRICT | FSTX_UT_COPY),
	};
	r = fx_usertrans(tx->d, &ut);
	tx->failed = r < 0 ? tx->d->failed_op : -1;
	if (r < 0)
		commit_why(tx, &ut, r);
	return (int)r;
}

/* ---- task-level builders: primitive ops in the same transaction ---------- */

#define COPY_CHUNK (1u << 20) /* bytes of one pwrite op of a copied file */

/* Create (or with O_EXCL only create) path, write len bytes of data, close. */
static int write_file(fstx_tx *tx, const char *path, const void *data,
		      size_t len, mode_t mode, int excl)
{
	int fd, r;

	if (!tx || !path || (!data && len) || (mode & ~(mode_t)07777))
		return -EINVAL;
	fd = tx_open(tx, path, O_WRONLY | O_CREAT | (excl ? O_EXCL : O_TRUNC), mode);
	if (fd < 0)
		return fd;
	if (len && (r = tx_pwrite(tx, fd, data, len, 0, 1)) < 0)
		return r;
	return tx_close(tx, fd);
}

int fstx_tx_write(fstx_tx *tx, const char *path, const void *data, size_t len,
		  mode_t mode)
{
	return POISON(tx, write_file(tx, path, data, len, mode, 0), path, NULL);
}

/*
 * A name for a temporary beside path (in its directory), unique within
 * the transaction; the op that makes it is exclusive (O_EXCL, symlink),
 * so a name taken already fails the transaction rather than losing data.
 */
static int tmp_beside(fstx_tx *tx, const char *path, char **out)
{
	const char *slash = strrchr(path, '/');
	int dlen = slash ? (int)(slash - path + 1) : 0;

	if (!*path || (slash && !slash[1]))
		return -EINVAL; /* no name to replace */
	if (fx_asprintf(out, "%.*s.fstx-tmp-%u", dlen, path, ++tx->ntmp) < 0)
		return -ENOMEM;
	return 0;
}

/* The mode of the file path names now (symlinks followed beneath the
 * domain), 0644 if there is none. */
static int mode_now(fstx_domain *d, const char *path, mode_t *mode)
{
	struct stat st;
	int fd = fx_os.openat2(d->root, path, O_PATH | O_CLOEXEC, 0, RESOLVE_BENEATH);
	int r;

	*mode = 0644;
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	r = fx_os.fstat(fd, &st);
	fx_os.close(fd);
	if (r == 0 && S_ISREG(st.st_mode))
		*mode = st.st_mode & 07777;
	return r;
}

static int replace_file(fstx_tx *tx, const char *path, const void *data,
			size_t len, mode_t mode)
{
	char *tmp = NULL;
	int r;

	if (!tx || !path || (!data && len))
		return -EINVAL;
	if (mode == (mode_t)-1 && (r = mode_now(tx->d, path, &mode)) < 0)
		return r;
	if ((r = tmp_beside(tx, path, &tmp)) < 0)
		return r;
	r = write_file(tx, tmp, data, len, mode, 1);
	if (r == 0)
		r = add_paths_done(tx, FSTX_OP_RENAME, tmp, path, -1, 0);
	free(tmp);
	return r;
}

int fstx_tx_replace(fstx_tx *tx, const char *path, const void *data, size_t len,
		    mode_t mode)
{
	return POISON(tx, replace_file(tx, path, data, len, mode), path, NULL);
}

static int symlink_over(fstx_tx *tx, const char *target, const char *linkpath)
{
	char *tmp = NULL;
	int r;

	if (!tx || !target || !linkpath)
		return -EINVAL;
	if ((r = tmp_beside(tx, linkpath, &tmp)) < 0)
		return r;
	r = add_paths_done(tx, FSTX_OP_SYMLINK, target, tmp, -1, 0);
	if (r == 0)
		r = add_paths_done(tx, FSTX_OP_RENAME, tmp, linkpath, -1, 0);
	free(tmp);
	return r;
}

int fstx_tx_symlink_replace(fstx_tx *tx, const char *target, const char *linkpath)
{
	return POISON(tx, symlink_over(tx, target, linkpath), target, linkpath);
}

/*
 * The file open at fd (outside the domain) read to its end as dst: one
 * pwrite op per COPY_CHUNK bytes, each a copy the transaction owns.
 */
static int copy_fd(fstx_tx *tx, int fd, const char *dst, mode_t mode, int excl)
{
	uint64_t off = 0;
	char *buf;
	int wfd, r = 0;

	wfd = tx_open(tx, dst, O_WRONLY | O_CREAT | (excl ? O_EXCL : O_TRUNC), mode);
	if (wfd < 0)
		return wfd;
	if (!(buf = fx_malloc(COPY_CHUNK)))
		return -ENOMEM;
	for (;;) {
		ssize_t n = fx_os.read(fd, buf, COPY_CHUNK);

		if (n <= 0) {
			r = (int)n;
			break;
		}
		if (off + (uint64_t)n > FSTX_MAX_COPY) {
			r = -EFBIG;
			break;
		}
		if ((r = tx_pwrite(tx, wfd, buf, (size_t)n, (off_t)off, 1)) < 0)
			break;
		off += (uint64_t)n;
	}
	free(buf);
	return r < 0 ? r : tx_close(tx, wfd);
}

/* A regular file, opened (not following a last symlink if nofollow). */
static int open_regular(int dirfd, const char *name, int nofollow, mode_t *mode)
{
	struct stat st;
	int fd = fx_os.openat2(dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK |
			       (nofollow ? O_NOFOLLOW : 0), 0, 0);
	int r;

	if (fd < 0)
		return fd == -ELOOP && nofollow ? -EINVAL : fd;
	r = fx_os.fstat(fd, &st);
	if (r == 0 && !S_ISREG(st.st_mode))
		r = -EINVAL; /* a device, fifo, socket or directory */
	if (r == 0 && (uint64_t)st.st_size > FSTX_MAX_COPY)
		r = -EFBIG;
	if (r < 0) {
		fx_os.close(fd);
		return r;
	}
	*mode = st.st_mode & 07777;
	return fd;
}

static int copy_in(fstx_tx *tx, const char *src, const char *dst)
{
	mode_t mode;
	int fd, r;

	if (!tx || !src || !dst)
		return -EINVAL;
	if ((fd = open_regular(AT_FDCWD, src, 0, &mode)) < 0)
		return fd;
	r = copy_fd(tx, fd, dst, mode, 0);
	fx_os.close(fd);
	return r;
}

int fstx_tx_copy_in(fstx_tx *tx, const char *src, const char *dst)
{
	return POISON(tx, copy_in(tx, src, dst), src, dst);
}

struct import { fstx_tx *tx; const char *dst; };

static int import_dir(fstx_tx *tx, int fd, const char *dst);

/* One entry of a source directory (dirfd, name) as dst/name. */
static int import_entry(int dirfd, const char *name, void *arg)
{
	const struct import *im = arg;
	char *to, *target;
	struct stat st;
	mode_t mode;
	ssize_t n;
	int fd, r;

	if ((r = fx_os.fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW)) < 0)
		return r;
	if (fx_asprintf(&to, "%s/%s", im->dst, name) < 0)
		return -ENOMEM;
	if (S_ISDIR(st.st_mode)) {
		r = add_paths_done(im->tx, BTRFS_IOC_UT_OP_MKDIR, to, NULL,
				   st.st_mode & 07777, 0);
		fd = r < 0 ? r : fx_os.openat2(dirfd, name, O_RDONLY | O_DIRECTORY |
					       O_NOFOLLOW | O_CLOEXEC, 0, 0);
		r = fd < 0 ? fd : import_dir(im->tx, fd, to);
		if (fd >= 0)
			fx_os.close(fd);
	} else if (S_ISREG(st.st_mode)) {
		r = fd = open_regular(dirfd, name, 1, &mode);
		if (fd >= 0) {
			r = copy_fd(im->tx, fd, to, mode, 1);
			fx_os.close(fd);
		}
	} else if (S_ISLNK(st.st_mode)) { /* copied as a link, never followed */
		r = -ENOMEM; /* on the heap: a deep tree recurses */
		if ((target = fx_malloc(PATH_MAX))) {
			n = fx_os.readlinkat(dirfd, name, target, PATH_MAX);
			r = n < 0 ? (int)n : n >= PATH_MAX ? -ENAMETOOLONG : 0;
			if (r == 0) {
				target[n] = 0;
				r = add_paths_done(im->tx, FSTX_OP_SYMLINK, target, to,
						   -1, 0);
			}
			free(target);
		}
	} else {
		r = -EINVAL; /* special files are refused */
	}
	free(to);
	return r;
}

static int import_dir(fstx_tx *tx, int fd, const char *dst)
{
	struct import im = { tx, dst };

	return fx_dir_each(fd, import_entry, &im);
}

static int import_tree(fstx_tx *tx, const char *srcdir, const char *dstdir)
{
	struct stat st;
	int fd, r;

	if (!tx || !srcdir || !dstdir)
		return -EINVAL;
	fd = fx_os.openat2(AT_FDCWD, srcdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, 0);
	if (fd < 0)
		return fd;
	r = fx_os.fstat(fd, &st);
	if (r == 0)
		r = add_paths_done(tx, BTRFS_IOC_UT_OP_MKDIR, dstdir, NULL,
				   st.st_mode & 07777, 0);
	if (r == 0)
		r = import_dir(tx, fd, dstdir);
	fx_os.close(fd);
	return r;
}

int fstx_tx_import(fstx_tx *tx, const char *srcdir, const char *dstdir)
{
	return POISON(tx, import_tree(tx, srcdir, dstdir), srcdir, dstdir);
}

const char *fstx_tx_strerror(const fstx_tx *tx)
{
	if (!tx)
		return "";
	if (tx->errmsg)
		return tx->errmsg;
	return tx->poisoned ? strerror(-tx->poisoned) : "";
}

size_t fstx_tx_num_ops(const fstx_tx *tx)
{
	return tx ? tx->nops : 0;
}

int64_t fstx_tx_result(const fstx_tx *tx, size_t op)
{
	if (!tx || op >= tx->nops)
		return -EINVAL;
	return tx->ops[op].rval;
}

long fstx_tx_failed_op(const fstx_tx *tx)
{
	return tx ? tx->failed : -1;
}

const char *fstx_op_name(uint64_t op)
{
	static const char *const names[] = {
		"?", "open", "close", "pwrite", "unlink", "link", "mkdir", "rmdir",
		"truncate", "setxattr", "removexattr", "clonerange", "rename",
		"symlink", "assert-absent", "assert-exists", "assert-data",
		"assert-xattr",
	};

	return op <= FSTX_OP_MAX ? names[op] : "?";
}

const char *fstx_version(void)
{
	return FSTX_VERSION_STRING;
}

#define ARG(op, i) ((const char *)(intptr_t)(op)->args[i])

/* The path the open op of fd index fd before op i named, or "?". */
static const char *fd_path(const struct btrfs_ioctl_usertrans_op *ops, size_t i,
			   int64_t fd)
{
	while (i-- > 0)
		if (ops[i].op == BTRFS_IOC_UT_OP_OPEN && ops[i].args[3] == fd)
			return ARG(&ops[i], 0);
	return "?";
}

void fx_describe_op(const struct btrfs_ioctl_usertrans_op *ops, size_t i,
		    char *buf, size_t n)
{
	const struct btrfs_ioctl_usertrans_op *op = &ops[i];
	const char *name = fstx_op_name(op->op);

	switch (op->op) {
	case BTRFS_IOC_UT_OP_CLOSE:
	case BTRFS_IOC_UT_OP_PWRITE:
		snprintf(buf, n, "%s fd %lld (\"%s\")", name, (long long)op->args[0],
			 fd_path(ops, i, op->args[0]));
		break;
	case BTRFS_IOC_UT_OP_CLONERANGE:
		snprintf(buf, n, "%s into fd %lld (\"%s\") from fd %lld (\"%s\")", name,
			 (long long)op->args[0], fd_path(ops, i, op->args[0]),
			 (long long)op->args[1], fd_path(ops, i, op->args[1]));
		break;
	case BTRFS_IOC_UT_OP_LINK:
	case FSTX_OP_RENAME:
		snprintf(buf, n, "%s \"%s\" to \"%s\"", name, ARG(op, 0), ARG(op, 1));
		break;
	case FSTX_OP_SYMLINK:
		snprintf(buf, n, "%s \"%s\" (to \"%s\")", name, ARG(op, 1), ARG(op, 0));
		break;
	case BTRFS_IOC_UT_OP_SETXATTR:
	case BTRFS_IOC_UT_OP_REMOVEXATTR:
	case FSTX_OP_ASSERT_XATTR:
		snprintf(buf, n, "%s \"%s\" %s", name, ARG(op, 0), ARG(op, 1));
		break;
	default:
		snprintf(buf, n, "%s \"%s\"", name, op->args[0] ? ARG(op, 0) : "?");
	}
}

const char *fx_op_reason(const struct btrfs_ioctl_usertrans_op *op, long e)
{
	if (e == -ECANCELED && fx_op_is_assert(op->op))
		return "assertion does not hold";
	switch (-e) {
	case EXDEV:
		return "the path leaves the domain, or the file is also linked from outside it";
	case ESTALE:
		return "changed by another process while the transaction ran";
	case ECANCELED:
		return "result failed its condition";
	}
	return strerror((int)-e);
}

/* The first version of struct fstx_status_ex ends with wal_bytes. */
#define STATUS_EX_V1 (offsetof(struct fstx_status_ex, wal_bytes) + \
		      sizeof(((struct fstx_status_ex *)0)->wal_bytes))

int fstx_status_ex(fstx_domain *d, struct fstx_status_ex *st)
{
	struct fstx_status_ex ex;
	struct fstx_status s;
	uint32_t size;
	int r;

	if (!d || !st || st->size < STATUS_EX_V1)
		return -EINVAL;
	size = st->size < sizeof(ex) ? st->size : (uint32_t)sizeof(ex);
	if ((r = fstx_status(d, &s)) < 0)
		return r;
	memset(&ex, 0, sizeof(ex));
	ex.size = size;
	ex.hot = s.hot;
	ex.wedged = s.wedged;
	ex.journal_bytes = s.journal_bytes;
	ex.reflink = s.reflink;
	ex.xattr_user = s.xattr_user;
	ex.block_size = s.block_size;
	memcpy(ex.fs_type, s.fs_type, sizeof(ex.fs_type));
	ex.dir_fsync = s.dir_fsync;
	if ((r = fx_wal_peek(d, &ex.wal_bytes)) < 0)
		return r;
	ex.latched = d->latched;
	ex.unsynced = d->nosync_wrote || d->lazy_wrote;
	memcpy(st, &ex, size);
	return 0;
}

