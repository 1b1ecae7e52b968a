/* SPDX-License-Identifier: MIT */
/*
 * trans.c - run one transaction: validate, lock, recover, plan, journal,
 * execute, then commit or roll back.
 *
 *   validate   every op checked up front; -EINVAL, nothing touched
 *   lock       flock(.fstx/lock); a hot journal is recovered first
 *   plan       plan.c: canonical paths, name steps, before-images
 *   preflight  statvfs: journal + data bytes and inodes, else -ENOSPC
 *   journal    journal.c rule 2, barrier 1
 *   execute    ops in order; results into ops[i].rval; FAIL_ON checks
 *   commit     fsync of every object the transaction changed (barrier 2,
 *              syncset.h), COMMIT record (barrier 3),
 *              truncate journal, empty trash
 *   rollback   on a failed op: journal.c undo, the same code as recovery
 */
#define _GNU_SOURCE
#include "plan.h"
#include "syncset.h"
#include "wal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#define ARGP(op, i) ((const char *)(intptr_t)(op)->args[i])

#define FAIL_FLAGS                                                          \
	(BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE | BTRFS_IOC_UT_OP_FLAG_FAIL_ON_EQ |  \
	 BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT | BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GT |  \
	 BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LTE | BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GTE)

#define OPEN_FLAGS                                                          \
	(O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_APPEND | O_NOFOLLOW |     \
	 O_DIRECTORY | O_CLOEXEC | O_NONBLOCK | O_NOATIME | O_DSYNC | O_SYNC | \
	 O_LARGEFILE | O_NOCTTY)

/* ---- validation --------------------------------------------------------- */

static int bad_off_len(int64_t off, int64_t len)
{
	return off < 0 || len < 0 || off > INT64_MAX - len;
}

static const char *check_fd(const uint8_t *live, uint64_t nfds, int64_t idx)
{
	if (idx < 0 || (uint64_t)idx >= nfds)
		return "fd index outside the fd table";
	return live[idx] ? NULL : "fd index not opened by an earlier open (or closed)";
}

#define NEED(cond, why) do { if (!(cond)) return why; } while (0)

/* NULL if op is valid, else why not.  Tracks which fd slots are open. */
static const char *validate_op(const struct btrfs_ioctl_usertrans_op *op,
			       uint8_t *live, uint64_t nfds)
{
	const __s64 *a = op->args;
	const char *why;

	NEED(!(op->flags & ~(uint64_t)FAIL_FLAGS), "unknown op flag bits");
	switch (op->op) {
	case BTRFS_IOC_UT_OP_OPEN:
		NEED(a[0], "NULL path");
		NEED(a[3] >= 0 && (uint64_t)a[3] < nfds, "fd index outside the fd table");
		NEED(!live[a[3]], "fd index already open");
		NEED(!(a[1] & ~(int64_t)OPEN_FLAGS) && (a[1] & O_ACCMODE) != 3,
		     "unsupported open flags");
		NEED(a[2] >= 0 && a[2] <= 07777, "mode outside 0..07777");
		live[a[3]] = 1;
		return NULL;
	case BTRFS_IOC_UT_OP_CLOSE:
		if ((why = check_fd(live, nfds, a[0])))
			return why;
		live[a[0]] = 0;
		return NULL;
	case BTRFS_IOC_UT_OP_PWRITE:
		if ((why = check_fd(live, nfds, a[0])))
			return why;
		NEED(a[1] || !a[2], "NULL data");
		NEED(!bad_off_len(a[3], a[2]), "negative or overflowing offset/length");
		return NULL;
	case BTRFS_IOC_UT_OP_UNLINK:
	case BTRFS_IOC_UT_OP_RMDIR:
		NEED(a[0], "NULL path");
		return NULL;
	case BTRFS_IOC_UT_OP_LINK:
	case FSTX_OP_SYMLINK:
		NEED(a[0] && a[1], "NULL path");
		return NULL;
	case BTRFS_IOC_UT_OP_MKDIR:
		NEED(a[0], "NULL path");
		NEED(a[1] >= 0 && a[1] <= 07777, "mode outside 0..07777");
		return NULL;
	case BTRFS_IOC_UT_OP_TRUNCATE:
		NEED(a[0], "NULL path");
		NEED(a[1] >= 0, "negative size");
		return NULL;
	case BTRFS_IOC_UT_OP_SETXATTR:
		NEED(a[0] && a[1], "NULL path or name");
		NEED(a[2] || !a[3], "NULL value");
		NEED(a[3] >= 0 && a[3] <= FSTX_MAX_XATTR, "value length outside 0..65536");
		NEED(a[4] == 0 || a[4] == XATTR_CREATE || a[4] == XATTR_REPLACE,
		     "bad xattr flags");
		return NULL;
	case BTRFS_IOC_UT_OP_REMOVEXATTR:
		NEED(a[0] && a[1], "NULL path or name");
		return NULL;
	case BTRFS_IOC_UT_OP_CLONERANGE:
		if ((why = check_fd(live, nfds, a[0])) || (why = check_fd(live, nfds, a[1])))
			return why;
		NEED(!bad_off_len(a[2], a[3]) && !bad_off_len(a[4], a[3]),
		     "negative or overflowing offset/length");
		return NULL;
	case FSTX_OP_RENAME:
		NEED(a[0] && a[1], "NULL path");
		NEED(a[2] == 0 || a[2] == RENAME_NOREPLACE || a[2] == RENAME_EXCHANGE,
		     "bad rename flags");
		return NULL;
	case FSTX_OP_ASSERT_ABSENT:
	case FSTX_OP_ASSERT_EXISTS:
		NEED(a[0], "NULL path");
		return NULL;
	case FSTX_OP_ASSERT_DATA:
		NEED(a[0], "NULL path");
		NEED(a[1] || !a[2], "NULL data");
		NEED(a[2] >= 0, "negative length");
		return NULL;
	case FSTX_OP_ASSERT_XATTR:
		NEED(a[0] && a[1], "NULL path or name");
		NEED(a[2] || !a[3], "NULL value");
		NEED(a[3] >= 0 && a[3] <= FSTX_MAX_XATTR, "value length outside 0..65536");
		return NULL;
	default:
		return "unknown op";
	}
}

int fx_validate_why(const struct btrfs_ioctl_usertrans *ut, uint64_t *bad,
		    const char **why)
{
	const struct btrfs_ioctl_usertrans_op *ops = (const void *)(intptr_t)ut->ops_ptr;
	uint8_t *live;

	*bad = 0;
	*why = "num_ops or num_fds above the limit, NULL ops_ptr or unknown flags";
	if (ut->num_ops > FSTX_MAX_OPS || ut->num_fds > FSTX_MAX_FDS ||
	    (ut->num_ops && !ops) ||
	    (ut->flags & ~(uint64_t)FSTX_UT_FLAGS))
		return -EINVAL;
	*why = "FSTX_UT_LAZY with FSTX_UT_NOSYNC: they promise different things";
	if ((ut->flags & FSTX_UT_LAZY) && (ut->flags & FSTX_UT_NOSYNC))
		return -EINVAL;
	*why = NULL;
	live = fx_calloc(ut->num_fds ? ut->num_fds : 1, 1);
	if (!live)
		return -ENOMEM;
	for (uint64_t i = 0; i < ut->num_ops; i++) {
		if ((*why = validate_op(&ops[i], live, ut->num_fds))) {
			*bad = i;
			free(live);
			return -EINVAL;
		}
	}
	free(live);
	return 0;
}

int fx_validate(const struct btrfs_ioctl_usertrans *ut, uint64_t *bad)
{
	const char *why;

	return fx_validate_why(ut, bad, &why);
}

/* ---- execution ---------------------------------------------------------- */

/*
 * Barrier 2 makes durable exactly what the transaction changed, not the
 * whole filesystem (another process's dirty pages are not ours to wait
 * for): every file it wrote, truncated or gave xattrs, and both parent
 * directories of every name step, one fsync each (syncset.h).
 */
struct exec {
	struct fstx_domain *d;
	struct plan *P;
	int *fds;
	int diverged; /* a planned name step failed: the plan no longer holds */
	struct fx_syncset *ss; /* NULL: crash-only or not journaled */
};

static int do_step(struct exec *X, const struct fx_step *s)
{
	const char *name, *sname;
	int dfd, sfd, r;

	if (s->kind == FX_ST_MOVE)
		return fx_move(X->d, s->src, s->dst, X->ss);
	dfd = fx_parent(X->d, s->dst, &name);
	if (dfd < 0)
		return dfd;
	switch (s->kind) {
	case FX_ST_MKDIR:
	case FX_ST_SYMLINK:
		r = 0; /* made in staging before the journal (prestage) */
		break;
	case FX_ST_LINK:
		sfd = fx_parent(X->d, s->src, &sname);
		r = sfd;
		if (sfd >= 0) {
			r = fx_os.linkat(sfd, sname, dfd, name, 0);
			fx_os.close(sfd);
		}
		if (r == 0)
			fx_ss_dir(X->ss, dfd);
		break;
	default:
		r = -EINVAL; /* MKFILE is made by exec_open */
	}
	fx_os.close(dfd);
	return r;
}

/*
 * Make every new object of the plan in staging (.fstx/new/N) before the
 * journal is written, and give each step the inode it creates or moves,
 * so the journal names every object a step moves by its inode (journal.c
 * rule 5a).  Staging is outside the tree: nothing visible changes, and a
 * crash leaves garbage the next transaction's fx_clean_scratch() removes.
 */
static int prestage_one(struct fstx_domain *d, const struct fx_step *s,
			uint64_t *ino)
{
	const char *name;
	struct stat st;
	int dfd, fd, r;

	if (s->kind == FX_ST_MKFILE) {
		fd = fx_open(d, s->dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
			     s->mode);
		if (fd < 0)
			return fd;
		r = fx_os.fstat(fd, &st);
		fx_os.close(fd);
	} else {
		if ((dfd = fx_parent(d, s->dst, &name)) < 0)
			return dfd;
		r = s->kind == FX_ST_MKDIR ? fx_os.mkdirat(dfd, name, s->mode)
					   : fx_os.symlinkat(s->aux, dfd, name);
		if (r == 0)
			r = fx_os.fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW);
		fx_os.close(dfd);
	}
	if (r == 0)
		*ino = (uint64_t)st.st_ino;
	return r;
}

static int prestage(struct fstx_domain *d, struct plan *P)
{
	uint64_t *ids = fx_calloc((size_t)P->newid + 1, sizeof(*ids));
	long *gids = fx_calloc((size_t)P->newid + 1, sizeof(*gids));
	int r = 0, sg = -1; /* is .fstx/new/ setgid?  (-1: not looked) */

	if (!ids || !gids) {
		free(ids);
		free(gids);
		return -ENOMEM;
	}
	for (size_t k = 0; k < P->nsteps && r == 0; k++) {
		struct fx_step *s = &P->steps[k];
		const char *name;
		int dfd;

		if (!(s->kind == FX_ST_MKFILE || s->kind == FX_ST_MKDIR ||
		      s->kind == FX_ST_SYMLINK) || s->newid <= 0 || s->newid > P->newid)
			continue;
		if ((r = prestage_one(d, s, &ids[s->newid])) < 0)
			break;
		/* made in .fstx/new/: the group its directory would give it */
		if (sg < 0)
			sg = fx_setgid_group(d, FX_NEW) >= 0;
		if (((gids[s->newid] = fx_new_group(d, P, k, gids)) >= 0 || sg) &&
		    (dfd = fx_parent(d, s->dst, &name)) >= 0) {
			fx_take_group(dfd, name, gids[s->newid], s->kind == FX_ST_MKDIR);
			fx_os.close(dfd);
		}
	}
	free(gids);
	for (size_t k = 0; k < P->nsteps && r == 0; k++) {
		struct fx_step *s = &P->steps[k];

		if (s->newid > 0 && s->newid <= P->newid)
			s->ino = ids[s->newid];
		if (s->sdir_new > 0 && s->sdir_new <= P->newid)
			s->sdir = ids[s->sdir_new];
		if (s->ddir_new > 0 && s->ddir_new <= P->newid)
			s->ddir = ids[s->ddir_new];
	}
	free(ids);
	return r;
}

static int run_steps(struct exec *X, const struct pop *po, size_t from)
{
	for (size_t k = po->step0 + from; k < po->step0 + po->nsteps; k++) {
		int r = fx_mark_set(X->d, (long)k);

		if (r == 0)
			r = do_step(X, &X->P->steps[k]);
		if (r < 0) {
			X->diverged = 1;
			return r;
		}
	}
	return 0;
}

static int exec_open(struct exec *X, const struct btrfs_ioctl_usertrans_op *op,
		     const struct pop *po)
{
	int flags = (int)op->args[1], fd, r;
	struct stat st;

	if (po->create) {
		const struct fx_step *mk = &X->P->steps[po->step0];

		/* made in staging before the journal (prestage) */
		flags = (flags & ~(O_TRUNC | O_CREAT | O_EXCL)) | O_NOFOLLOW;
		fd = fx_mark_set(X->d, (long)po->step0);
		if (fd == 0)
			fd = fx_open_owned(X->d, mk->dst, flags);
		if (fd < 0) {
			X->diverged = 1;
			return fd;
		}
		r = fx_os.fstat(fd, &st);
		if (r == 0 && mk->ino && (uint64_t)st.st_ino != mk->ino)
			r = -ESTALE; /* replaced behind our back */
		if (r == 0)
			r = run_steps(X, po, 1);
		else
			X->diverged = 1;
	} else {
		fd = fx_open(X->d, po->cpath, flags & ~(O_CREAT | O_EXCL), 0);
		if (fd < 0)
			return fd;
		r = 0;
		if (po->check_ino) {
			r = fx_os.fstat(fd, &st);
			if (r == 0 && (uint64_t)st.st_ino != po->ino) {
				X->diverged = 1; /* changed behind our back */
				r = -ESTALE;
			}
		}
	}
	if (r < 0) {
		fx_os.close(fd);
		return r;
	}
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC) || po->create)
		fx_ss_file(X->ss, fd); /* its data and size: barrier 2 */
	X->fds[op->args[3]] = fd;
	return (int)op->args[3];
}

static int with_path_fd(struct exec *X, const struct btrfs_ioctl_usertrans_op *op,
			const struct pop *po)
{
	int wr = op->op == BTRFS_IOC_UT_OP_TRUNCATE;
	/* (an xattr op needs no read access, as setxattr(2) by path) */
	int fd = wr ? fx_open(X->d, po->cpath, O_WRONLY | O_NONBLOCK, 0) :
		      fx_open_owned(X->d, po->cpath, O_RDONLY | O_NONBLOCK);
	int r;

	if (fd < 0)
		return fd;
	if (wr)
		r = fx_os.ftruncate(fd, (off_t)op->args[1]);
	else if (op->op == BTRFS_IOC_UT_OP_SETXATTR)
		r = fx_os.fsetxattr(fd, ARGP(op, 1), ARGP(op, 2),
				      (size_t)op->args[3], (int)op->args[4]);
	else
		r = fx_os.fremovexattr(fd, ARGP(op, 1));
	if (r >= 0)
		fx_ss_file(X->ss, fd);
	fx_os.close(fd);
	return r;
}

/* FICLONERANGE, else copy_file_range, else read/write: same bytes. */
int64_t fx_clone_copy(int dst, int src, uint64_t soff, uint64_t len,
		      uint64_t doff)
{
	struct stat st;
	char buf[65536];
	int r = fx_os.ficlonerange(dst, src, soff, len, doff);

	if (r == 0 || (r != -EOPNOTSUPP && r != -EXDEV && r != -EINVAL &&
		       r != -ENOTTY && r != -ETXTBSY && r != -ENOSYS))
		return r;
	if (!len) {
		if ((r = fx_os.fstat(src, &st)) < 0)
			return r;
		len = (uint64_t)st.st_size > soff ? (uint64_t)st.st_size - soff : 0;
	}
	while (len) {
		off_t so = (off_t)soff, dof = (off_t)doff;
		size_t want = len > sizeof(buf) ? sizeof(buf) : (size_t)len;
		ssize_t n = fx_os.copy_file_range(src, &so, dst, &dof, want);

		if (n < 0 && n != -EXDEV && n != -EOPNOTSUPP && n != -EINVAL &&
		    n != -ENOSYS)
			return n;
		if (n < 0) {
			n = fx_os.pread(src, buf, want, (off_t)soff);
			if (n > 0) {
				ssize_t w = fx_os.pwrite(dst, buf, (size_t)n, (off_t)doff);

				if (w < 0)
					return w;
				n = w;
			}
		}
		if (n < 0)
			return n;
		if (n == 0)
			break; /* source ended */
		soff += (uint64_t)n;
		doff += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

static int fdof(struct exec *X, int64_t idx)
{
	return X->fds[idx] >= 0 ? X->fds[idx] : -EBADF;
}

static int64_t exec_op(struct exec *X, size_t i)
{
	const struct btrfs_ioctl_usertrans_op *op = &X->P->ops[i];
	const struct pop *po = &X->P->pops[i];
	int fd, fd2, r;

	if (po->pred < 0)
		return po->pred;
	switch (op->op) {
	case BTRFS_IOC_UT_OP_OPEN:
		return exec_open(X, op, po);
	case BTRFS_IOC_UT_OP_CLOSE:
		if ((fd = fdof(X, op->args[0])) < 0)
			return fd;
		X->fds[op->args[0]] = -1;
		return fx_os.close(fd);
	case BTRFS_IOC_UT_OP_PWRITE:
		if ((fd = fdof(X, op->args[0])) < 0)
			return fd;
		return fx_os.pwrite(fd, ARGP(op, 1), (size_t)op->args[2],
				      (off_t)op->args[3]);
	case BTRFS_IOC_UT_OP_CLONERANGE:
		if ((fd = fdof(X, op->args[0])) < 0 || (fd2 = fdof(X, op->args[1])) < 0)
			return -EBADF;
		return fx_clone_copy(fd, fd2, (uint64_t)op->args[2],
				   (uint64_t)op->args[3], (uint64_t)op->args[4]);
	case BTRFS_IOC_UT_OP_TRUNCATE:
	case BTRFS_IOC_UT_OP_SETXATTR:
	case BTRFS_IOC_UT_OP_REMOVEXATTR:
		return with_path_fd(X, op, po);
	default: /* name ops: exactly the planned steps */
		r = run_steps(X, po, 0);
		return r;
	}
}

/* The RFC's conditions, evaluated against the value read before the op. */
static int seed_fails(uint64_t flags, int64_t ret, int64_t want)
{
	return ((flags & BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE) && ret != want) ||
	       ((flags & BTRFS_IOC_UT_OP_FLAG_FAIL_ON_EQ) && ret == want) ||
	       ((flags & BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT) && ret < want) ||
	       ((flags & BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GT) && ret > want) ||
	       ((flags & BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LTE) && ret <= want) ||
	       ((flags & BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GTE) && ret >= want);
}

static int op_fails(const struct btrfs_ioctl_usertrans_op *op, uint64_t utflags,
		    int64_t ret, int64_t want)
{
	if (seed_fails(op->flags, ret, want))
		return 1;
	if (!(utflags & FSTX_UT_STRICT))
		return 0;
	return ret < 0 || (op->op == BTRFS_IOC_UT_OP_PWRITE && ret < op->args[2]);
}

/*
 * Rule W1 of wal.c: may this transaction go through the log (wal_fit())?
 * Fills res with every op's result, as predicted; or finds it predicted to
 * fail at an op, every op before it one the log would take (fail_fast()).
 */
#define WAL_MAX_XATTR 1024

/* The kind of step that made new object newid (0: none). */
static uint32_t made_by(const struct plan *P, int newid)
{
	for (size_t k = 0; k < P->nsteps; k++)
		if (P->steps[k].newid == newid && P->steps[k].kind != FX_ST_MOVE)
			return P->steps[k].kind;
	return 0;
}


/*
 * W1: the name steps the log takes: new files, symlinks and directories
 * made in staging and moved to a name no object held (each may move on,
 * by rename: a new directory with what it holds, wal.c W18), and initial objects
 * removed (unlink, rmdir, or replaced by a rename): moved to trash;
 * renames and links of objects of the tree, and exchanges (W15-W21).
 */
static int wal_steps_ok(const struct plan *P)
{
	for (size_t k = 0; k < P->nsteps; k++) {
		const struct fx_step *s = &P->steps[k];
		uint32_t op = (uint32_t)P->ops[s->op].op;

		/* an exchange, through .fstx/new/ (W21, W24) */
		if (fx_wal_swap_at(P, k) || fx_wal_swap_new_at(P, k)) {
			k += 2;
			continue;
		}

		switch (s->kind) {
		case FX_ST_MKFILE:
			if (s->newid <= 0 || op != BTRFS_IOC_UT_OP_OPEN || !P->pops[s->op].create)
				return 0;
			break;
		case FX_ST_MKDIR:
			if (s->newid <= 0 || op != BTRFS_IOC_UT_OP_MKDIR)
				return 0;
			break;
		case FX_ST_SYMLINK:
			if (s->newid <= 0 || op != FSTX_OP_SYMLINK || !s->aux)
				return 0;
			break;
		case FX_ST_LINK: /* then moved from staging: W16 */
			if (op != BTRFS_IOC_UT_OP_LINK || s->newid > 0)
				return 0;
			break;
		case FX_ST_MOVE:
			if (s->newid > 0) { /* a new object: from staging, or on */
				uint32_t kind = made_by(P, s->newid);

				/* a link's second name: of a new file only
				 * (W16: a W_LINK entry from its first name) */
				if ((op == BTRFS_IOC_UT_OP_LINK && kind != FX_ST_MKFILE) ||
				    (fx_under(s->dst, FX_META) &&
				     /* a name of a new file dropped: it
				      * keeps the others, or takes the undo
				      * way (wal_stage.c struct nix) */
				     (kind != FX_ST_MKFILE || !fx_under(s->dst, FX_TRASH))) ||
				    (kind != FX_ST_MKFILE && kind != FX_ST_SYMLINK &&
				     kind != FX_ST_MKDIR))
					return 0;
			} else if (!s->ino) {
				return 0;
			} else if (fx_under(s->dst, FX_TRASH)) { /* a removal */
				if (op != BTRFS_IOC_UT_OP_UNLINK && op != FSTX_OP_RENAME &&
				    op != BTRFS_IOC_UT_OP_RMDIR)
					return 0;
			} else if (fx_under(s->dst, FX_META) ||
				   (op != FSTX_OP_RENAME &&
				    (op != BTRFS_IOC_UT_OP_LINK || !fx_under(s->src, FX_NEW)))) {
				return 0; /* else a rename (W15) or a link (W16) */
			}
			break;
		default:
			return 0;
		}
	}
	return 1;
}

static int obj_cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/*
 * What clone ranges need to know of the whole transaction, found once at
 * its first clone: does it open a file O_APPEND (its appends are logged
 * at ends the log follows through pwrites and truncates, wal.c W14, not
 * through clones, and a clone into such a file fails), and which objects
 * do its ops change the data or size of (W19: a clone's source must not
 * change within the transaction), sorted.  0 or -ENOMEM.
 */
struct clone_facts {
	int known, append;
	int64_t *chg;
	size_t nchg;
};

static int clone_facts(const struct plan *P, struct clone_facts *f)
{
	if (f->known)
		return 0;
	if (!(f->chg = fx_calloc(P->nops ? P->nops : 1, sizeof(*f->chg))))
		return -ENOMEM;
	for (size_t i = 0; i < P->nops; i++) {
		const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];
		int open = op->op == BTRFS_IOC_UT_OP_OPEN;

		if (fx_pop_dead(P, i))
			continue; /* predicted to fail: changes nothing */
		f->append |= open && (op->args[1] & O_APPEND);
		if (op->op == BTRFS_IOC_UT_OP_PWRITE || op->op == BTRFS_IOC_UT_OP_TRUNCATE ||
		    op->op == BTRFS_IOC_UT_OP_CLONERANGE ||
		    (open && ((op->args[1] & O_ACCMODE) != O_RDONLY || (op->args[1] & O_TRUNC))))
			f->chg[f->nchg++] = P->pops[i].obj;
	}
	qsort(f->chg, f->nchg, sizeof(*f->chg), obj_cmp);
	f->known = 1;
	return 0;
}

/* May op (a clone range whose source slot op sop opened) take the log? */
static int clone_ok(const struct plan *P, const struct btrfs_ioctl_usertrans_op *op,
		    size_t sop, struct clone_facts *f)
{
	const __s64 *a = op->args;
	int64_t src = P->pops[sop].obj;

	if (!a[3] || (uint64_t)a[4] + (uint64_t)a[3] > FX_WAL_MAX_OFF ||
	    !P->pops[sop].check_ino || clone_facts(P, f) < 0 || f->append)
		return 0;
	return !bsearch(&src, f->chg, f->nchg, sizeof(*f->chg), obj_cmp);
}

/*
 * Does xattr op i (a removexattr, or a setxattr with XATTR_CREATE or
 * XATTR_REPLACE) find its xattr as it needs?  The log applies it as a set
 * or a removal that succeeds either way (wal.c W1), so one that would
 * fail (ENODATA, EEXIST) must not reach it: wal_fit() makes it the
 * transaction's predicted failure, or a dead op where it may fail.
 * The last op of the transaction before it on the same object and name
 * says; else the object in the tree, when it is still at the op's path
 * (a new object has none).  1 as needed, 0 not (the op fails: ENODATA, or
 * EEXIST for a create), -errno not known.
 */
static int xattr_as_needed(struct fstx_domain *d, const struct plan *P, size_t i)
{
	const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];
	const char *name = ARGP(op, 1);
	int64_t obj = P->pops[i].obj;
	int exists = -1, fd;
	struct stat st;
	ssize_t got;

	for (size_t j = i; j-- > 0 && exists < 0;) {
		const struct btrfs_ioctl_usertrans_op *o = &P->ops[j];

		if ((o->op == BTRFS_IOC_UT_OP_SETXATTR || o->op == BTRFS_IOC_UT_OP_REMOVEXATTR) &&
		    !fx_pop_dead(P, j) && P->pops[j].obj == obj && !strcmp(ARGP(o, 1), name))
			exists = o->op == BTRFS_IOC_UT_OP_SETXATTR;
	}
	if (exists < 0 && obj < 0)
		exists = 0; /* made by the transaction, with no such xattr yet */
	if (exists < 0) {
		if ((fd = fx_open(d, P->pops[i].cpath, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0)) < 0)
			return fd; /* ENOENT, ELOOP: another path to it */
		if ((got = fx_os.fstat(fd, &st)) == 0 && (int64_t)st.st_ino == obj)
			got = fx_os.fgetxattr(fd, name, NULL, 0);
		else if (got == 0)
			got = -ESTALE; /* renamed by the transaction: not looked for */
		fx_os.close(fd);
		if (got < 0 && got != -ENODATA)
			return (int)got;
		exists = got >= 0;
	}
	if (op->op == BTRFS_IOC_UT_OP_REMOVEXATTR)
		return exists;
	return op->args[4] == XATTR_CREATE ? !exists : op->args[4] == XATTR_REPLACE ? exists : 0;
}

/* What wal_fit() finds a transaction to be. */
enum wal_fit {
	FIT_UNDO,  /* the undo way */
	FIT_LOG,   /* the log's (W1) */
	FIT_FAILS, /* predicted to fail at op *at, every op before it known */
};

static enum wal_fit wal_fit(struct fstx_domain *d, const struct btrfs_ioctl_usertrans *ut,
			    struct plan *P, int64_t *res, size_t *at)
{
	const struct btrfs_ioctl_usertrans_op *ops = P->ops;
	/* per slot: 1 writable, 2 writable and new (never staged, W13);
	 * live: open (an open predicted to fail leaves it closed) */
	uint8_t *wr = fx_calloc(ut->num_fds ? ut->num_fds : 1, 1);
	uint8_t *live = fx_calloc(ut->num_fds ? ut->num_fds : 1, 1);
	size_t *sop = fx_calloc(ut->num_fds ? ut->num_fds : 1, sizeof(*sop));
	struct clone_facts cf = { 0 };
	enum wal_fit fit = FIT_UNDO;
	size_t i;

	if (!wr || !live || !sop)
		goto out;
	for (i = 0; i < P->nops; i++) {
		const struct btrfs_ioctl_usertrans_op *op = &ops[i];
		const __s64 *a = op->args;

		/* predicted to fail, and allowed to (not strict, no condition
		 * fires): nothing of it runs, and its result is the
		 * prediction (fx_pop_dead(); the undo way's exec_op() alike) */
		if (fx_pop_dead(P, i)) {
			res[i] = P->pops[i].pred;
			if (op->op == BTRFS_IOC_UT_OP_OPEN && live[a[3]])
				goto out; /* an open over a live slot: not followed */
			if (op_fails(op, ut->flags, res[i], op->rval))
				goto fails;
			continue;
		}
		res[i] = 0;
		switch (op->op) {
		case BTRFS_IOC_UT_OP_OPEN:
			/* O_APPEND: at the size the log finds (wal.c W14; a
			 * lazy one applies the queue on its files first) */
			if (!(P->pops[i].create || P->pops[i].check_ino) ||
			    ((a[1] & O_TRUNC) && (a[1] & O_ACCMODE) == O_RDONLY))
				goto out;
			wr[a[3]] = (a[1] & O_ACCMODE) == O_RDONLY ? 0 : P->pops[i].create ? 2 : 1;
			live[a[3]] = 1;
			sop[a[3]] = i;
			res[i] = a[3];
			break;
		case BTRFS_IOC_UT_OP_PWRITE:
			if (live[a[0]] && !wr[a[0]]) {
				/* through a read-only open: the kernel's EBADF,
				 * a dead op where it may fail (as xattrs below) */
				res[i] = -EBADF;
				if (op_fails(op, ut->flags, res[i], op->rval))
					goto fails;
				P->pops[i].pred = (int)res[i];
				continue;
			}
			if (!live[a[0]] || (!P->pops[i].append &&
					    (uint64_t)a[3] + (uint64_t)a[2] > FX_WAL_MAX_OFF))
				goto out;
			res[i] = a[2];
			break;
		case BTRFS_IOC_UT_OP_TRUNCATE:
			if ((uint64_t)a[1] > FX_WAL_MAX_OFF)
				goto out;
			break;
		case BTRFS_IOC_UT_OP_SETXATTR:
		case BTRFS_IOC_UT_OP_REMOVEXATTR:
			/* (a name the kernel refuses, past 255 bytes or a bare
			 * prefix, is predicted to fail, plan.c xattr_name_error(),
			 * but for "user." on a new object, which runs) */
			if (strncmp(ARGP(op, 1), "user.", 5) || !ARGP(op, 1)[5] ||
			    (op->op == BTRFS_IOC_UT_OP_SETXATTR && a[3] > WAL_MAX_XATTR))
				goto out;
			if (fx_fs_probe(d) < 0 || !d->fs.xattr_user)
				goto out;
			/* flags, or a removal: only where it finds what it needs;
			 * where it does not, the op fails with the error found,
			 * as the first failure of a transaction predicted to
			 * fail (fail_fast()) or the undo way's */
			if (op->op == BTRFS_IOC_UT_OP_REMOVEXATTR || a[4]) {
				int as = xattr_as_needed(d, P, i);

				if (as < 0)
					goto out;
				if (as == 0) {
					res[i] = op->op == BTRFS_IOC_UT_OP_SETXATTR &&
						 a[4] == XATTR_CREATE ? -EEXIST : -ENODATA;
					if (op_fails(op, ut->flags, res[i], op->rval))
						goto fails;
					/* allowed to fail: a dead op from here
					 * on (the log and the undo way alike);
					 * a plan made again forgets it */
					P->pops[i].pred = (int)res[i];
					continue;
				}
			}
			break;
		case BTRFS_IOC_UT_OP_CLONERANGE: /* staged from its source (wal.c W19) */
			if (!live[a[0]] || !live[a[1]] || !wr[a[0]] || wr[a[1]] ||
			    (ut->flags & (FSTX_UT_NOSYNC | FSTX_UT_LAZY)) ||
			    !clone_ok(P, op, sop[a[1]], &cf))
				goto out;
			break;
		case BTRFS_IOC_UT_OP_CLOSE: /* of a slot not open: EBADF, as exec_op() */
			res[i] = live[a[0]] ? 0 : -EBADF;
			wr[a[0]] = live[a[0]] = 0;
			break;
		case BTRFS_IOC_UT_OP_MKDIR: /* names: wal_steps_ok() */
		case FSTX_OP_SYMLINK:
		case BTRFS_IOC_UT_OP_UNLINK:
		case BTRFS_IOC_UT_OP_RMDIR:
		case FSTX_OP_RENAME:
		case BTRFS_IOC_UT_OP_LINK:
			break;
		default:
			if (!fx_op_is_assert(op->op))
				goto out;
		}
		if (op_fails(op, ut->flags, res[i], op->rval))
			goto fails;
	}
	/* large data: the undo way writes it once (and clones before-images),
	 * but what W13 stages and W22 writes whole is not logged */
	if (wal_steps_ok(P) && fx_wal_logged(d, P, ut->flags, NULL) <= fx_wal_big)
		fit = FIT_LOG;
	goto out;
fails:
	/* the ops before it as the log would take them, whatever their
	 * name steps: none of them runs (fail_fast()) */
	fit = FIT_FAILS;
	*at = i;
out:
	free(wr);
	free(live);
	free(sop);
	free(cf.chg);
	return fit;
}

#define FX_SPACE_TX 64
#define FX_SPACE_SLACK (256ull << 20)

static int preflight(struct fstx_domain *d, const struct btrfs_ioctl_usertrans *ut,
		     const struct plan *P)
{
	struct statvfs sv;
	uint64_t bytes, inodes;
	int r;

	bytes = fx_journal_size(d, P->steps, P->nsteps, P->caps, P->ncaps) +
		(ut->data_bytes ? ut->data_bytes : P->est_bytes);
	inodes = ut->metadata_ops ? ut->metadata_ops : P->est_inodes;
	/*
	 * A hint, not a reservation (others use space too; ENOSPC while
	 * changing rolls back): statvfs is skipped for small transactions
	 * while the last one found plenty, for up to FX_SPACE_TX of them.
	 */
	if (!inodes && d->space_tx < FX_SPACE_TX &&
	    d->space_free > bytes + FX_SPACE_SLACK) {
		d->space_tx++;
		d->space_free -= bytes;
		return 0;
	}
	if ((r = fx_os.fstatvfs(d->root, &sv)) < 0)
		return r;
	if ((uint64_t)sv.f_bavail * sv.f_frsize < bytes)
		return -ENOSPC;
	if (sv.f_files && (uint64_t)sv.f_favail < inodes)
		return -ENOSPC;
	d->space_tx = 0;
	d->space_free = (uint64_t)sv.f_bavail * sv.f_frsize - bytes;
	return 0;
}

static int wants_undo(const struct plan *P)
{
	for (size_t i = 0; i < P->ncaps; i++)
		if (P->caps[i].want_size || P->caps[i].nranges || P->caps[i].nxnames)
			return 1;
	return 0;
}

/*
 * This handle committed crash-only transactions of the undo way: their
 * objects wait in d->debt, held open (a full set is flushed early, by the
 * crash-only transaction that fills it).  The first durable commit after
 * them (either way; the log's: wal.c W11), or fstx_sync(), fsyncs them:
 * fstx(7)'s promise, without syncing the whole filesystem.
 */
int fx_crash_only_pay(struct fstx_domain *d)
{
	int r = fx_ss_flush(&d->debt);

	if (r == 0)
		d->nosync_undo = 0;
	return r;
}

/* Rollback after op failure or a failed barrier; wedge if asked. */
static int rollback(struct fstx_domain *d, const struct btrfs_ioctl_usertrans *ut,
		    int ignore_commit)
{
	int r = fx_recover_mode(d, ignore_commit);

	if (r < 0 && (ut->flags & BTRFS_IOC_UT_FLAG_WEDGEONFAIL))
		fx_wedge(d);
	return r < 0 ? r : 0;
}

static long execute(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut,
		    struct plan *P, int journaled)
{
	struct btrfs_ioctl_usertrans_op *ops = (void *)(intptr_t)ut->ops_ptr;
	struct exec X = { .d = d, .P = P };
	struct fx_syncset sset, *ss = NULL;
	long ret = 0;
	size_t i;
	int r;

	if (journaled && !d->nosync) {
		fx_ss_init(&sset);
		ss = &sset;
	}
	/* crash-only: what it changes joins the handle's debt (fx_crash_only_pay()) */
	X.ss = journaled && d->nosync ? &d->debt : ss;
	if (journaled && d->nosync)
		d->nosync_undo = 1;
	X.fds = fx_malloc((ut->num_fds ? ut->num_fds : 1) * sizeof(int));
	if (!X.fds) {
		fx_ss_drop(ss);
		return -ENOMEM;
	}
	for (uint64_t k = 0; k < ut->num_fds; k++)
		X.fds[k] = -1;
	for (i = 0; i < P->nops; i++) {
		int64_t want = ops[i].rval;
		int64_t got = exec_op(&X, i);

		ops[i].rval = got;
		if (X.diverged || op_fails(&ops[i], ut->flags, got, want)) {
			ret = got < 0 ? got : -ECANCELED;
			d->failed_op = (long)i;
			break;
		}
	}
	for (uint64_t k = 0; k < ut->num_fds; k++)
		if (X.fds[k] >= 0)
			fx_os.close(X.fds[k]);
	free(X.fds);
	ut->ops_completed = i;
	if (ss) {
		/* barrier 2; a failed transaction's undo syncs what it restores */
		r = ret == 0 ? fx_ss_flush(ss) : 0;
		fx_ss_drop(ss);
		if (r == 0 && ret == 0 && d->nosync_undo)
			r = fx_crash_only_pay(d);
		if (r < 0 && ret == 0) {
			d->latched = r;
			ret = r;
		}
	}
	if (ret < 0) {
		r = journaled ? rollback(d, ut, 0) : 0;
		return r < 0 ? r : ret;
	}
	if (journaled) {
		if ((r = fx_journal_commit(d)) < 0) {
			int rr = rollback(d, ut, 1);

			return rr < 0 ? rr : r;
		}
		/* Committed.  Garbage only from here; the next tx retries. */
		/* marks first, and their removal durable before the journal
		 * can be empty: an empty journal with a mark is damage (rule
		 * 1; the journal's new size may persist alone) */
		if (fx_clean_scratch(d) == 0 && fx_marks_gone(d) == 0)
			fx_journal_clear(d, 0);
		/* crash-only: the debt ends with .fstx/ and the journal, in
		 * that order (rule 1 again), so that its payment leaves the
		 * journal as this transaction left it */
		if (d->nosync) {
			fx_ss_dir(&d->debt, d->meta);
			fx_ss_file(&d->debt, d->jfd);
		}
	}
	return 0;
}

/*
 * Every transaction is offered to the log first (wal.c W1), whatever its
 * flags: FSTX_UT_WAL changes nothing.  0 offers only those with
 * FSTX_UT_WAL or FSTX_UT_LAZY, so that tests can hold the log against
 * the undo way (test_wal same_as_undo).
 */
int fx_wal_auto = 1;

/*
 * A transaction predicted to fail at op `at` (a strict op predicted to
 * fail, or a FAIL_ON condition that fires on a predicted result), every op
 * before it one the log would take, changes nothing and costs no barrier:
 * it returns op at's error (-ECANCELED for a condition on a result that
 * is not an error), the ops up to it get their predicted results, and
 * nothing runs.  The undo way would run the ops before it, meet the same
 * prediction (exec_op() returns it) and roll back.
 * Lazy records queued are applied first and the transaction planned again
 * (wal_path()): a compare op or an xattr flag before the failing op read
 * the tree.  Other records not yet applied are of writers at their
 * barrier or killed there, which have not returned: this transaction is
 * ordered before them.
 * Where an op before the failing one would have failed when run, for a
 * reason the planner does not predict (EPERM of an immutable file, EACCES,
 * ENOSPC), the undo way reported that op and its error; this reports the
 * first failure predicted.  Either way nothing changed.
 * test_wal fail_fast; its differential against the undo way.
 */
static long fail_fast(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut,
		      const int64_t *res, size_t at)
{
	struct btrfs_ioctl_usertrans_op *ops = (void *)(intptr_t)ut->ops_ptr;

	for (size_t i = 0; i <= at; i++)
		ops[i].rval = res[i];
	ut->ops_completed = at;
	d->failed_op = (long)at;
	return res[at] < 0 ? res[at] : -ECANCELED;
}

/*
 * The lazy records queued (wal.c W10; recover.c leaves them at a
 * transaction's start) applied, for a plan that read the tree without
 * them: 1 applied (plan again), 0 none queued, -errno.
 */
static int apply_queue(struct fstx_domain *d)
{
	int r = fx_wal_pending(d);

	if (r > 0 && (r = fx_wal_recover_mode(d, 1)) >= 0)
		r = 1;
	return r;
}

/* 1: not for the log; else the result of the log's commit (2: plan
 * again), or of fail_fast() or the queue's application before it (*failed
 * set: nothing of the transaction was written). */
static long wal_path(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut,
		     struct plan *P, int *failed)
{
	int64_t *res = fx_malloc((P->nops ? P->nops : 1) * sizeof(*res));
	size_t at = 0;
	long r = 1;

	if (!res)
		return -ENOMEM;
	switch (wal_fit(d, ut, P, res, &at)) {
	case FIT_LOG:
		r = fx_wal_commit(d, ut, P, res);
		break;
	case FIT_FAILS:
		/* the ops before it may have read the tree (compare ops, xattr
		 * flags): not without the lazy records queued (W10) */
		r = apply_queue(d);
		r = r > 0 ? 2 : r == 0 ? fail_fast(d, ut, res, at) : r;
		*failed = r != 2;
		break;
	case FIT_UNDO:
		break;
	}
	free(res);
	return r;
}

/*
 * The phases of one transaction, each transition named and asserted
 * (tx_go()):
 *
 *   START --lock--> LOCKED --recover.c--> RECOVERED --plan--> PLANNED
 *                                             ^ ^               |  |  |
 *                     the log helped: replan  | +---------------+  |  |
 *     RECOVERED --a compare op failed with lazy records queued:  |  |
 *                 apply them, plan again (once)--> RECOVERED        |  |
 *     PLANNED --log way (wal.c W1-W4: record, barrier, apply)--> LOGGED
 *     PLANNED --predicted to fail (fail_fast())--> FAILED
 *     PLANNED --undo way: checkpoint, stage, journal (barrier 1)--> JOURNALED
 *     JOURNALED --mark 0 (journal.c rule 3)--> CHANGING
 *     PLANNED --nothing to undo (reads, compare ops)--> CHANGING
 *     CHANGING --ops, barrier 2, COMMIT (barrier 3)--> COMMITTED
 *     CHANGING --an op failed or a barrier failed: undo--> UNDONE
 *     START .. JOURNALED --error, nothing changed--> FAILED
 *     LOGGED, COMMITTED, UNDONE, FAILED --unlock--> DONE
 *
 * A crash in any phase leaves what recover.c brings back: before
 * JOURNALED nothing changed (staging is garbage), from JOURNALED to
 * COMMITTED the journal undoes, in LOGGED the log rolls forward.
 */
enum tx_phase {
	TX_START, TX_LOCKED, TX_RECOVERED, TX_PLANNED, TX_LOGGED, TX_JOURNALED,
	TX_CHANGING, TX_COMMITTED, TX_UNDONE, TX_FAILED, TX_DONE,
};
#define TXB(p) (1u << (p))
static const unsigned tx_next[] = {
	[TX_START] = TXB(TX_LOCKED) | TXB(TX_FAILED),
	[TX_LOCKED] = TXB(TX_RECOVERED) | TXB(TX_FAILED),
	[TX_RECOVERED] = TXB(TX_RECOVERED) | TXB(TX_PLANNED) | TXB(TX_FAILED),
	[TX_PLANNED] = TXB(TX_RECOVERED) | TXB(TX_LOGGED) | TXB(TX_JOURNALED) |
		       TXB(TX_CHANGING) | TXB(TX_FAILED),
	[TX_JOURNALED] = TXB(TX_CHANGING) | TXB(TX_FAILED),
	[TX_CHANGING] = TXB(TX_COMMITTED) | TXB(TX_UNDONE),
	[TX_LOGGED] = TXB(TX_DONE),
	[TX_COMMITTED] = TXB(TX_DONE),
	[TX_UNDONE] = TXB(TX_DONE),
	[TX_FAILED] = TXB(TX_DONE),
};

static void tx_go(enum tx_phase *ph, enum tx_phase next)
{
	assert(tx_next[*ph] & TXB(next));
	*ph = next;
}

static void replan(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut,
		   struct plan *P)
{
	fx_plan_free(P);
	*P = (struct plan){ .d = d, .ops = (void *)(intptr_t)ut->ops_ptr,
			    .nops = ut->num_ops, .nfds = ut->num_fds };
}

/*
 * Every directory whose entries a step changes is fsynced at barrier 2
 * (and by a rollback): one the caller may not open (a directory of
 * another user it may write and search but not read, 0733) fails the
 * transaction here, before anything changed, not at that barrier, where
 * the rollback would fail the same way and leave the journal hot.
 * -EACCES at the op of the first such step, else 0.
 */
static long dirs_syncable(struct fstx_domain *d, const struct plan *P)
{
	char dir[PATH_MAX], buf[PATH_MAX];

	for (size_t k = 0; k < P->nsteps; k++) {
		const char *p[2] = { P->steps[k].src, P->steps[k].dst };

		for (int j = 0; j < 2; j++) {
			int r;

			if (!p[j] || fx_under(p[j], FX_META))
				continue;
			/* the directory step k changes, where it is before the
			 * steps run (an exchange or rename before it may have
			 * put another object at that name) */
			fx_dirname(p[j], dir);
			if ((r = fx_dir_syncable(d, fx_dir_before(P, k, dir, buf))) < 0 &&
			    r != -ENOENT) {
				d->failed_op = (long)P->steps[k].op;
				return r; /* (ENOENT: made by the transaction) */
			}
		}
	}
	return 0;
}

/* PLANNED -> JOURNALED on the undo way; 0, 2 (plan again) or -errno. */
static long undo_way_begin(struct fstx_domain *d, struct plan *P, int *replanned)
{
	long r;

	/* the undo way must never be replayed over (wal.c W6); the hint
	 * stops saying clean before the journal is written (W8) */
	if ((r = fx_wal_set_dirty(d)) < 0 || (r = fx_wal_checkpoint(d)) < 0)
		return r;
	if (r == 2 && (*replanned)++ <= 2)
		return 2; /* it applied open records (lazy ones, or of writers
			   * at their barrier): the plan saw the tree before */
	if ((r = dirs_syncable(d, P)) < 0 || (r = fx_clean_scratch(d)) < 0)
		return r;
	if ((r = prestage(d, P)) < 0) {
		fx_clean_scratch(d);
		return r;
	}
	r = fx_journal_write(d, P->steps, P->nsteps, P->caps, P->ncaps, P->nops);
	if (r < 0) {
		fx_journal_clear(d, 1); /* nothing changed: forget it */
		return r;
	}
	return 0;
}

long fx_usertrans(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut)
{
	struct plan P = { .d = d, .ops = (void *)(intptr_t)ut->ops_ptr,
			  .nops = ut->num_ops, .nfds = ut->num_fds };
	enum tx_phase ph = TX_START;
	uint64_t bad;
	int journaled, replanned = 0, queue_applied = 0, failed = 0;
	long r;

	d->failed_op = -1;
	r = fx_validate(ut, &bad);
	if (r < 0) {
		ut->ops_completed = bad;
		d->failed_op = (long)bad;
		return r;
	}
	ut->ops_completed = 0;
	if (d->latched)
		return d->latched;
	if ((r = fx_lock(d)) < 0)
		return r;
	tx_go(&ph, TX_LOCKED);
	if ((r = fx_recover(d, FX_REC_TX)) < 0)
		goto out;
again:
	tx_go(&ph, TX_RECOVERED);
	if ((r = fx_plan_build(&P)) < 0) {
		/* a compare op judged a tree without the lazy records queued
		 * before it: apply them and judge again */
		if (r == -ECANCELED && !queue_applied && (queue_applied = apply_queue(d)) != 0) {
			if ((r = queue_applied) < 0)
				goto out;
			replan(d, ut, &P);
			goto again;
		}
		d->failed_op = P.failed_op;
		ut->ops_completed = P.failed_op >= 0 ? (uint64_t)P.failed_op : 0;
		if (P.failed_op >= 0) /* an assertion, or an I/O error planning it */
			((struct btrfs_ioctl_usertrans_op *)(intptr_t)ut->ops_ptr)
				[P.failed_op].rval = r;
		goto out;
	}
	tx_go(&ph, TX_PLANNED);
	if ((r = preflight(d, ut, &P)) < 0)
		goto out;
	d->nosync = !!(ut->flags & FSTX_UT_NOSYNC);
	d->lazy = !!(ut->flags & FSTX_UT_LAZY);
	if ((fx_wal_auto || (ut->flags & (FSTX_UT_WAL | FSTX_UT_LAZY))) &&
	    (r = wal_path(d, ut, &P, &failed)) != 1) {
		if (failed)
			goto out; /* predicted to fail: nothing changed */
		if (r != 2) {
			tx_go(&ph, TX_LOGGED);
			goto out;
		}
		if (replanned++ > 2) { /* under the lock, one help empties the log */
			r = -EAGAIN;
			goto out;
		}
		replan(d, ut, &P);
		goto again;
	}
	journaled = P.nsteps || wants_undo(&P);
	if (journaled) {
		if ((r = undo_way_begin(d, &P, &replanned)) == 2) {
			replan(d, ut, &P);
			goto again;
		}
		if (r < 0)
			goto out;
		tx_go(&ph, TX_JOURNALED);
		/* Changes begin: say so first (journal.c rule 3). */
		if ((r = fx_mark_set(d, 0)) < 0) {
			fx_journal_clear(d, 1);
			goto out;
		}
	}
	tx_go(&ph, TX_CHANGING);
	r = execute(d, ut, &P, journaled);
	tx_go(&ph, r == 0 ? TX_COMMITTED : TX_UNDONE);
out:
	if (ph != TX_LOGGED && ph != TX_COMMITTED && ph != TX_UNDONE)
		tx_go(&ph, TX_FAILED);
	if (r == 0 && d->nosync)
		d->nosync_wrote = 1; /* fstx_sync() syncs them */
	d->nosync = d->lazy = 0; /* only this transaction; recovery keeps its barriers */
	fx_plan_free(&P);
	fx_unlock(d);
	tx_go(&ph, TX_DONE);
	return r;
}

long fstx_usertrans(int dirfd, struct btrfs_ioctl_usertrans *ut)
{
	struct fstx_domain d;
	uint64_t bad;
	long r;

	if (!ut)
		return -EINVAL;
	r = fx_validate(ut, &bad);
	if (r < 0) {
		ut->ops_completed = bad;
		return r;
	}
	if ((r = fx_domain_init(&d, dirfd)) < 0)
		return r;
	r = fx_usertrans(&d, ut);
	fx_domain_fini(&d);
	return r;
}
