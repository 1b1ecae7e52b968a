/* SPDX-License-Identifier: MIT */
/*
 * api.c - the ergonomic API: domain handles and a transaction builder over
 * the seed ABI.  Builder calls only record ops; fstx_tx_commit runs them.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "fstx/btrfs_usertrans.h"

#include <errno.h>
#include <fcntl.h>
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
		fx_wal_flush(d); /* FSTX_UT_LAZY: durable by close */
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
	r = fx_wal_flush(d);
	if (r >= 0 && d->nosync_wrote) {
		if ((r = fx_os.syncfs(d->root)) < 0)
			d->latched = r;
		else
			d->nosync_wrote = 0;
	}
	fx_unlock(d);
	return r < 0 ? r : 0;
}

int fstx_recover(fstx_domain *d)
{
	int r, w;

	if (!d)
		return -EINVAL;
	if ((r = fx_lock(d)) < 0)
		return r;
	w = fx_is_wedged(d);
	r = fx_recover_locked(d);
	if (r >= 0) { /* then the log: replayed and checkpointed */
		int rw = fx_wal_recover(d), c = rw < 0 ? rw : fx_wal_checkpoint(d);

		r = c < 0 ? c : r || rw || c == 2;
	}
	if (r == 0)
		r = fx_clean_scratch(d); /* garbage of a committed transaction */
	if (r >= 0 && w > 0) {
		int u = fx_unwedge(d);

		r = u < 0 ? u : 1;
	}
	if (r >= 0)
		d->latched = 0;
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
	if ((r = fx_is_wedged(d)) > 0)
		r = -EROFS;
	if (r == 0)
		r = fx_recover_locked(d);
	if (r >= 0)
		r = fx_wal_recover(d);
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

int fstx_status(fstx_domain *d, struct fstx_status *st)
{
	struct stat js;
	int r;

	if (!d || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	if ((r = fx_os.fstat(d->jfd, &js)) < 0)
		return r;
	st->hot = js.st_size > 0;
	st->journal_bytes = (uint64_t)js.st_size;
	r = fx_is_wedged(d);
	if (r < 0)
		return r;
	st->wedged = r;
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
	free(tx);
}

/* A copy of n bytes (and a NUL) owned by tx; its address, or -1. */
int64_t fx_tx_keep(fstx_tx *tx, const void *p, size_t n)
{
	char *c;

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
	memcpy(c, p, n);
	c[n] = 0;
	tx->strs[tx->nstrs++] = c;
	return (int64_t)(intptr_t)c;
}

static int64_t keep(fstx_tx *tx, const char *s)
{
	return s ? fx_tx_keep(tx, s, strlen(s)) : 0;
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
	tx->nops++;
	return 0;
}

int fstx_tx_open(fstx_tx *tx, const char *path, int flags, mode_t mode)
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
	tx->ops[tx->nops - 1].args[3] = fd;
	tx->live[fd] = 1;
	if (fd + 1 > tx->maxfd)
		tx->maxfd = fd + 1;
	return fd;
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
	tx->nops++;
	return 0;
}

int fstx_tx_close(fstx_tx *tx, int fd)
{
	int r = add_args(tx, BTRFS_IOC_UT_OP_CLOSE, fd, 0, 0, 0, 0);

	if (r == 0 && tx->live && fd >= 0 && fd < tx->maxfd && tx->live[fd]) {
		tx->live[fd] = 0;
		tx->freefds[tx->nfree++] = fd;
	}
	return r;
}

int fstx_tx_pwrite(fstx_tx *tx, int fd, const void *buf, size_t len, off_t off)
{
	if (len > INT64_MAX || off < 0 || off > (off_t)(INT64_MAX - (int64_t)len))
		return -EINVAL;
	return add_args(tx, BTRFS_IOC_UT_OP_PWRITE, fd, (int64_t)(intptr_t)buf,
			(int64_t)len, off, 0);
}

int fstx_tx_unlink(fstx_tx *tx, const char *path)
{
	return add_paths(tx, BTRFS_IOC_UT_OP_UNLINK, path, NULL, 0, 0);
}

int fstx_tx_link(fstx_tx *tx, const char *oldpath, const char *newpath)
{
	return add_paths(tx, BTRFS_IOC_UT_OP_LINK, oldpath, newpath, -1, 0);
}

int fstx_tx_mkdir(fstx_tx *tx, const char *path, mode_t mode)
{
	return add_paths(tx, BTRFS_IOC_UT_OP_MKDIR, path, NULL, mode, 0);
}

int fstx_tx_rmdir(fstx_tx *tx, const char *path)
{
	return add_paths(tx, BTRFS_IOC_UT_OP_RMDIR, path, NULL, 0, 0);
}

int fstx_tx_truncate(fstx_tx *tx, const char *path, off_t size)
{
	return add_paths(tx, BTRFS_IOC_UT_OP_TRUNCATE, path, NULL, size, 0);
}

int fstx_tx_setxattr(fstx_tx *tx, const char *path, const char *name,
		     const void *value, size_t len, int flags)
{
	int r;

	if (len > FSTX_MAX_XATTR)
		return -EINVAL;
	r = add_paths(tx, BTRFS_IOC_UT_OP_SETXATTR, path, name, -1,
		      (int64_t)(intptr_t)value);
	if (r == 0) {
		tx->ops[tx->nops - 1].args[3] = (int64_t)len;
		tx->ops[tx->nops - 1].args[4] = flags;
	}
	return r;
}

int fstx_tx_removexattr(fstx_tx *tx, const char *path, const char *name)
{
	return add_paths(tx, BTRFS_IOC_UT_OP_REMOVEXATTR, path, name, -1, 0);
}

int fstx_tx_clonerange(fstx_tx *tx, int dstfd, int srcfd, off_t srcoff,
		       off_t len, off_t dstoff)
{
	return add_args(tx, BTRFS_IOC_UT_OP_CLONERANGE, dstfd, srcfd, srcoff, len,
			dstoff);
}

int fstx_tx_rename(fstx_tx *tx, const char *oldpath, const char *newpath,
		   unsigned int flags)
{
	return add_paths(tx, FSTX_OP_RENAME, oldpath, newpath, -1, flags);
}

int fstx_tx_symlink(fstx_tx *tx, const char *target, const char *linkpath)
{
	return add_paths(tx, FSTX_OP_SYMLINK, target, linkpath, -1, 0);
}

int fstx_tx_assert_absent(fstx_tx *tx, const char *path)
{
	return add_paths(tx, FSTX_OP_ASSERT_ABSENT, path, NULL, 0, 0);
}

int fstx_tx_assert_exists(fstx_tx *tx, const char *path)
{
	return add_paths(tx, FSTX_OP_ASSERT_EXISTS, path, NULL, 0, 0);
}

int fstx_tx_assert_data(fstx_tx *tx, const char *path, const void *data,
			size_t len)
{
	if (len > INT64_MAX || (!data && len))
		return -EINVAL;
	return add_paths(tx, FSTX_OP_ASSERT_DATA, path, NULL,
			 (int64_t)(intptr_t)data, (int64_t)len);
}

int fstx_tx_assert_xattr(fstx_tx *tx, const char *path, const char *name,
			 const void *value, size_t len)
{
	int r;

	if (len > FSTX_MAX_XATTR || (!value && len))
		return -EINVAL;
	r = add_paths(tx, FSTX_OP_ASSERT_XATTR, path, name, -1,
		      (int64_t)(intptr_t)value);
	if (r == 0)
		tx->ops[tx->nops - 1].args[3] = (int64_t)len;
	return r;
}

int fstx_tx_expect(fstx_tx *tx, uint64_t fail_flags, int64_t value)
{
	if (!tx || !tx->nops)
		return -EINVAL;
	tx->ops[tx->nops - 1].flags = fail_flags;
	tx->ops[tx->nops - 1].rval = value;
	/* A condition set per op replaces strictness for the whole tx. */
	tx->flags &= ~(uint64_t)FSTX_UT_STRICT;
	return 0;
}

int fstx_tx_set_flags(fstx_tx *tx, uint64_t flags)
{
	if (!tx || (flags & ~(uint64_t)FSTX_UT_FLAGS) ||
	    ((flags & FSTX_UT_LAZY) && (flags & FSTX_UT_NOSYNC)))
		return -EINVAL;
	tx->flags = flags;
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

int fstx_tx_commit(fstx_tx *tx)
{
	struct btrfs_ioctl_usertrans ut;
	long r;

	if (!tx)
		return -EINVAL;
	if (tx->committed)
		return -EALREADY;
	ut = (struct btrfs_ioctl_usertrans){
		.num_ops = tx->nops,
		.ops_ptr = (uint64_t)(uintptr_t)tx->ops,
		.num_fds = (uint64_t)tx->maxfd,
		.data_bytes = tx->data_bytes,
		.metadata_ops = tx->metadata_ops,
		.flags = tx->flags,
	};
	r = fx_usertrans(tx->d, &ut);
	tx->committed = 1;
	tx->failed = r < 0 ? tx->d->failed_op : -1;
	return (int)r;
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
