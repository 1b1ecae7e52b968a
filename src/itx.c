/* SPDX-License-Identifier: MIT */
/*
 * itx.c - interactive transactions: fstx_begin(), fstx_read(), fstx_stat(),
 * fstx_commit(), fstx_abort().
 *
 * An interactive transaction is an ordinary fstx_tx whose ops are added one
 * call at a time with the usual builders, and read back as they go:
 * fstx_read() and fstx_stat() answer with the tree as it will be once the
 * ops so far have run.  The ops reach the tree only at fstx_commit(), as one
 * transaction of the engine, all or nothing; a process that dies before
 * has changed nothing, so there is nothing to roll back.
 *
 * Isolation is optimistic.  Every read adds a compare op for what it read
 * of the tree as it was (assert-data of the whole file, assert-exists,
 * assert-absent); compare ops are evaluated against the tree before the
 * transaction, whatever their position, so the commit fails with
 * -ECANCELED, changing nothing, if another writer changed anything the
 * transaction read.  The committed transaction is then serialisable: it
 * reads and writes as if alone at its commit point.  A later read fails
 * with -ECANCELED as soon as an earlier one no longer holds.
 *
 * Nothing is locked between calls (each read holds the domain lock shared
 * for its duration), so an open transaction blocks nobody.  Its lease bounds
 * its life: after lease_ms, reads and commit fail with -ETIMEDOUT.
 *
 * How a read works: the planner (plan.c) plans the ops so far against the
 * tree, under the shared lock, and looks the path up in its overlay of
 * names: absent, an object of the initial tree (with its initial path), or
 * one the transaction creates.  The bytes are the initial file's (or none)
 * with every data op on that object replayed in order: pwrite (at the end
 * for O_APPEND), truncate, O_TRUNC.  A file a clonerange writes into cannot
 * be read (-EOPNOTSUPP) before commit.
 */
#define _GNU_SOURCE
#include "plan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define ARGP(op, i) ((const void *)(intptr_t)(op)->args[i])
#define ITX_LEASE_MS 30000u

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 0 while the transaction may go on, else why not. */
static int usable(const fstx_tx *tx)
{
	if (!tx || !tx->interactive)
		return -EINVAL;
	if (tx->committed)
		return -EALREADY;
	return now_ns() > tx->deadline ? -ETIMEDOUT : 0;
}

int fstx_begin(fstx_domain *d, unsigned lease_ms, fstx_tx **out)
{
	int r = fstx_tx_new(d, out);

	if (r < 0)
		return r;
	(*out)->interactive = 1;
	(*out)->deadline = now_ns() +
		(uint64_t)(lease_ms ? lease_ms : ITX_LEASE_MS) * 1000000u;
	return 0;
}

int fstx_commit(fstx_tx *tx)
{
	int r = usable(tx);

	if (r == -ETIMEDOUT)
		tx->committed = 1; /* over: the lease ran out */
	return r < 0 ? r : fstx_tx_commit(tx);
}

int fstx_abort(fstx_tx *tx)
{
	int r = usable(tx);

	if (r == -EINVAL || r == -EALREADY)
		return r;
	tx->committed = 1;
	return 0;
}

/* What a read found, to be asserted at commit. */
struct seen {
	int kind;          /* K_NONE: absent in the initial tree; K_FILE; K_DIR... */
	char *ipath;       /* initial path (for the assertion) */
	unsigned char *base;
	size_t blen;
};

/* The whole initial file at ipath. */
static int read_base(struct fstx_domain *d, const char *ipath,
		     unsigned char **buf, size_t *len)
{
	struct stat st;
	size_t got = 0;
	int fd = fx_open(d, ipath, O_RDONLY | O_NOFOLLOW, 0), r;

	*buf = NULL;
	*len = 0;
	if (fd < 0)
		return fd;
	if ((r = fx_os.fstat(fd, &st)) < 0)
		goto out;
	r = -ENOMEM;
	if (!(*buf = fx_malloc((size_t)st.st_size + 1)))
		goto out;
	while (got < (size_t)st.st_size) {
		ssize_t n = fx_os.pread(fd, *buf + got, (size_t)st.st_size - got,
					  (off_t)got);

		if (n < 0) {
			r = (int)n;
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	*len = got;
	r = 0;
out:
	fx_os.close(fd);
	return r;
}

/* Replay the data ops on object obj over buf (*len bytes, cap *cap). */
static int replay(const struct plan *P, int64_t obj, unsigned char **buf,
		  size_t *len)
{
	for (size_t i = 0; i < P->nops; i++) {
		const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];
		const struct pop *po = &P->pops[i];
		uint64_t off, n, end;

		if (po->pred < 0 || po->obj != obj)
			continue;
		switch (op->op) {
		case BTRFS_IOC_UT_OP_OPEN:
			if (op->args[1] & O_TRUNC)
				*len = 0;
			continue;
		case BTRFS_IOC_UT_OP_PWRITE:
			off = po->append ? *len : (uint64_t)op->args[3];
			n = (uint64_t)op->args[2];
			break;
		case BTRFS_IOC_UT_OP_TRUNCATE:
			off = (uint64_t)op->args[1];
			n = 0;
			break;
		case BTRFS_IOC_UT_OP_CLONERANGE:
			return -EOPNOTSUPP;
		default:
			continue;
		}
		end = off + n;
		if (end > SIZE_MAX / 2)
			return -EFBIG;
		if (op->op == BTRFS_IOC_UT_OP_TRUNCATE || end > *len) {
			unsigned char *nb = fx_realloc(*buf, (size_t)end + 1);

			if (!nb)
				return -ENOMEM;
			*buf = nb;
			if (end > *len)
				memset(nb + *len, 0, (size_t)(end - *len));
			if (op->op == BTRFS_IOC_UT_OP_TRUNCATE || end > *len)
				*len = (size_t)end;
		}
		if (n)
			memcpy(*buf + off, ARGP(op, 1), (size_t)n);
	}
	return 0;
}

/*
 * The object path names once the ops so far have run: its kind (K_NONE if
 * absent), and for files its bytes; *seen gets what of the initial tree
 * the answer rests on.
 */
static int overlay(fstx_tx *tx, const char *path, int *kind,
		   unsigned char **data, size_t *len, struct seen *seen)
{
	struct plan P = { .d = tx->d, .ops = tx->ops, .nops = tx->nops };
	struct node n;
	char *cpath = NULL;
	struct stat st;
	int r;

	*data = NULL;
	*len = 0;
	memset(seen, 0, sizeof(*seen));
	seen->kind = -1; /* nothing to assert */
	if ((r = fstx_read_begin(tx->d)) < 0)
		return r;
	if ((r = fx_plan_build(&P)) < 0)
		goto out;
	memset(&n, 0, sizeof(n));
	if ((r = fx_plan_lookup(&P, path, &n, &cpath)) == -ENOENT || r == -ENOTDIR) {
		n.state = N_ABSENT;
		r = 0;
	}
	if (r < 0)
		goto out_node;
	*kind = n.state == N_ABSENT ? K_NONE : n.kind;
	if (n.state == N_INIT) {
		seen->kind = n.kind;
		if (!(seen->ipath = fx_strdup(n.ipath))) {
			r = -ENOMEM;
			goto out_node;
		}
		if (n.kind == K_FILE) {
			if ((r = read_base(tx->d, n.ipath, data, len)) < 0)
				goto out_node;
			if (!(seen->base = fx_malloc(*len + 1))) {
				r = -ENOMEM;
				goto out_node;
			}
			memcpy(seen->base, *data, *len);
			seen->blen = *len;
		}
	} else if (n.state == N_ABSENT && cpath &&
		   fx_lstat(tx->d, cpath, &st) == -ENOENT) {
		/* absent from the start, not removed by the transaction */
		seen->kind = K_NONE;
		if (!(seen->ipath = fx_strdup(cpath)))
			r = -ENOMEM;
	}
	if (r == 0 && n.state != N_ABSENT && n.kind == K_FILE)
		r = replay(&P, n.state == N_INIT ? (int64_t)n.ino : -(int64_t)n.newid,
			   data, len);
out_node:
	fx_node_free(&n);
out:
	/* an earlier read no longer holds (its compare op failed, or cannot
	 * be evaluated in the tree as it is now); an I/O error or a failed
	 * allocation is itself, not a conflict to retry */
	if (r < 0 && r != -EIO && r != -ENOMEM && P.failed_op >= 0 &&
	    fx_op_is_assert(tx->ops[P.failed_op].op))
		r = -ECANCELED;
	free(cpath);
	fx_plan_free(&P);
	fstx_read_end(tx->d);
	if (r < 0) {
		free(*data);
		*data = NULL;
		free(seen->ipath);
		free(seen->base);
	}
	return r;
}

/* Whether the tx already asserts something about ipath. */
static int asserted(const fstx_tx *tx, const char *ipath)
{
	for (size_t i = 0; i < tx->nops; i++)
		if (fx_op_is_assert(tx->ops[i].op) &&
		    !strcmp((const char *)(intptr_t)tx->ops[i].args[0], ipath))
			return 1;
	return 0;
}

/* Add the compare op for what a read saw (consumes seen). */
static int remember(fstx_tx *tx, struct seen *seen)
{
	int r = 0;

	if (seen->kind < 0 || asserted(tx, seen->ipath))
		goto out;
	if (seen->kind == K_NONE)
		r = fstx_tx_assert_absent(tx, seen->ipath);
	else if (seen->kind == K_FILE && (tx->flags & FSTX_UT_COPY))
		r = fstx_tx_assert_data(tx, seen->ipath, seen->base, seen->blen);
	else if (seen->kind == K_FILE) { /* a copy the tx owns */
		int64_t keep = fx_tx_keep(tx, seen->base, seen->blen);

		/* a compare op missing would let the commit lose isolation:
		 * a failure poisons the transaction like any builder call */
		r = keep < 0 ? fx_tx_poison(tx, -ENOMEM, "fstx_read", seen->ipath, NULL) :
		    fstx_tx_assert_data(tx, seen->ipath,
					(const void *)(intptr_t)keep, seen->blen);
	} else
		r = fstx_tx_assert_exists(tx, seen->ipath);
out:
	free(seen->ipath);
	free(seen->base);
	return r;
}

ssize_t fstx_read(fstx_tx *tx, const char *path, void *buf, size_t len,
		  off_t off)
{
	struct seen seen;
	unsigned char *data;
	size_t dlen, n = 0;
	int kind, r = usable(tx);

	if (r < 0)
		return r;
	if (!path || off < 0 || (!buf && len))
		return -EINVAL;
	if ((r = overlay(tx, path, &kind, &data, &dlen, &seen)) < 0)
		return r;
	if ((r = remember(tx, &seen)) < 0)
		goto out;
	r = kind == K_NONE ? -ENOENT : kind == K_DIR ? -EISDIR :
	    kind != K_FILE ? -EINVAL : 0;
	if (r == 0 && (uint64_t)off < dlen) {
		n = dlen - (size_t)off < len ? dlen - (size_t)off : len;
		memcpy(buf, data + off, n);
	}
out:
	free(data);
	return r < 0 ? r : (ssize_t)n;
}

int fstx_stat(fstx_tx *tx, const char *path, struct stat *st)
{
	struct seen seen;
	unsigned char *data;
	size_t dlen;
	int kind, r = usable(tx);

	if (r < 0)
		return r;
	if (!path || !st)
		return -EINVAL;
	if ((r = overlay(tx, path, &kind, &data, &dlen, &seen)) < 0)
		return r;
	free(data);
	if ((r = remember(tx, &seen)) < 0)
		return r;
	if (kind == K_NONE)
		return -ENOENT;
	memset(st, 0, sizeof(*st));
	st->st_mode = kind == K_FILE ? S_IFREG : kind == K_DIR ? S_IFDIR :
		      kind == K_LINK ? S_IFLNK : 0;
	st->st_size = kind == K_FILE ? (off_t)dlen : 0;
	return 0;
}
