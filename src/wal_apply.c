/* SPDX-License-Identifier: MIT */
/*
 * wal_apply.c - the write-ahead log's changes in place (rule W4 of wal.c):
 * a committed transaction's ops, applied by their writer; the help pass,
 * which applies every open record in log order (W4, W5, W10, W12), and
 * APPLIED, which moves past the records no longer open.
 */
#define _GNU_SOURCE
#include "syncset.h"
#include "wal_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Apply op i in place (W4); a staged pwrite is cloned in (W13). */
static int64_t apply_op(const struct plan *P, size_t i, const int *fds,
			const int *tgt, const struct wclone *cl)
{
	const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];

	if (fx_pop_dead(P, i))
		return 0; /* predicted to fail: nothing runs */
	switch (op->op) {
	case BTRFS_IOC_UT_OP_OPEN:
		return op->args[1] & O_TRUNC ? fx_os.ftruncate(fds[i], 0) : 0;
	case BTRFS_IOC_UT_OP_PWRITE:
		if (!op->args[2])
			return 0;
		if (cl && cl[i].fd >= 0)
			return fx_clone_copy(fds[tgt[i]], cl[i].fd, (uint64_t)op->args[3],
					     (uint64_t)op->args[2], (uint64_t)op->args[3]);
		return fx_w_write_all(fds[tgt[i]], ARGP(op, 1),
				      (size_t)op->args[2], (uint64_t)op->args[3]);
	case BTRFS_IOC_UT_OP_CLONERANGE: /* from its staged copy (W19) */
		if (!cl)
			return -EAGAIN; /* before the barrier: after it, then */
		if (cl[i].fd < 0 || !cl[i].spec[0])
			return 0;
		return fx_clone_copy(fds[tgt[i]], cl[i].fd, (uint64_t)op->args[4],
				     cl[i].spec[0], (uint64_t)op->args[4]);
	case BTRFS_IOC_UT_OP_TRUNCATE:
		return fx_os.ftruncate(fds[tgt[i]], (off_t)op->args[1]);
	case BTRFS_IOC_UT_OP_SETXATTR:
		return fx_os.fsetxattr(fds[tgt[i]], ARGP(op, 1), ARGP(op, 2),
					 (size_t)op->args[3], 0);
	case BTRFS_IOC_UT_OP_REMOVEXATTR:
		return fx_w_rmx(fds[tgt[i]], ARGP(op, 1));
	default:
		return 0;
	}
}

/* 1 if op i changes a new file (staged before the record, W2). */
static int on_new(const struct plan *P, size_t i, const int *tgt)
{
	return P->pops[tgt[i]].create;
}

/*
 * W3: before the barrier, the changes to new files, which no name shows
 * until their staged names move after it (W2), so that writing them
 * overlaps the record's write-out.  1 if all were made, 0 if one failed
 * (fx_w_apply_all() makes them all again after the barrier, where a
 * failure rolls forward as any other).
 */
int fx_w_apply_new(const struct plan *P, const int *fds, const int *tgt,
		   const struct wclone *cl)
{
	for (size_t i = 0; i < P->nops; i++)
		if (on_new(P, i, tgt) && !cl[i].whole && apply_op(P, i, fds, tgt, NULL) < 0)
			return 0;
	return 1;
}

/*
 * W22: the new files that fx_wal_logged() finds whole get every change
 * of the transaction now, in op order, before the record: then they
 * (their data, size and xattrs), the staged directories they were made
 * in and .fstx/wnew/ are fsynced as one set, so that the record can
 * never be durable without them (as W13).  Their ops get no entry and are not
 * applied again (cl[i].whole).  0, or -errno (nothing appended yet: the
 * undo way meets the error).
 */
int fx_w_apply_whole(struct fstx_domain *d, const struct plan *P, const int *fds,
		     const int *tgt, struct wname *nm, size_t nnm, uint64_t flags,
		     struct wclone *cl)
{
	uint8_t *whole = fx_calloc(P->nops ? P->nops : 1, 1);
	struct fx_syncset ss;
	int r = 0, n = 0;
	size_t i;

	if (!whole || fx_wal_logged(d, P, flags, whole) == UINT64_MAX) {
		free(whole);
		return -ENOMEM;
	}
	for (i = 0; i < P->nops && r >= 0; i++) {
		int64_t got = whole[i] ? apply_op(P, i, fds, tgt, NULL) : 0;

		cl[i].whole = whole[i];
		r = got < 0 ? (int)got : 0;
	}
	/* one set (syncset.h: written out, then fsynced together; each
	 * object once): the files, the staged directories they were made
	 * in, .fstx/wnew/ */
	fx_ss_init(&ss);
	for (i = 0; i < P->nops && r >= 0; i++) {
		const struct wname *w;

		if (!whole[i] || P->ops[i].op != BTRFS_IOC_UT_OP_OPEN)
			continue;
		n++;
		fx_ss_file(&ss, fds[i]);
		if ((w = fx_w_name_of_op(nm, nnm, i)) && w->dir >= 0)
			fx_ss_take(&ss, fx_open_owned(d, nm[w->dir].stage, O_RDONLY | O_DIRECTORY));
	}
	if (n)
		fx_ss_take(&ss, fx_open(d, W_WNEW, O_RDONLY | O_DIRECTORY, 0));
	if (r < 0)
		fx_ss_drop(&ss);
	else
		r = fx_ss_flush(&ss);
	free(whole);
	return r < 0 ? r : 0;
}

/*
 * The directories a writer's names go into, kept open across its names
 * (most land in one directory): .fstx/wnew/ and the last parent.
 */
struct ndirs {
	int wnew, par;
	char pdir[PATH_MAX]; /* the parent par is, "" for the root */
};

static void ndirs_close(struct ndirs *D)
{
	if (D->wnew >= 0)
		fx_os.close(D->wnew);
	if (D->par >= 0)
		fx_os.close(D->par);
}

/* The parent of path, from the cache; its last component in *name. */
static int ndirs_parent(struct fstx_domain *d, struct ndirs *D, const char *path,
			const char **name)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	*name = slash ? slash + 1 : path;
	if (D->par >= 0 && strlen(D->pdir) == n && !memcmp(D->pdir, path, n))
		return D->par;
	if (D->par >= 0)
		fx_os.close(D->par);
	D->par = fx_parent(d, path, name);
	if (D->par >= 0) {
		memcpy(D->pdir, path, n);
		D->pdir[n] = 0;
	}
	return D->par;
}

/*
 * A writer's own name, right after its barrier: the staged file is where
 * it made it and the name was free when it planned, so one rename (or
 * mkdir) does it; anything else goes the way of replay (W5).
 */
static int name_first(struct fstx_domain *d, struct ndirs *D, const struct wname *w)
{
	const char *dn, *sn = w->stage + sizeof(W_WNEW) - 1;
	int dfd, r;

	if (w->dir >= 0)
		return 0; /* made in its staged directory, in place with it */
	if (w->kind == W_LINK) /* W16 */
		return fx_w_name_apply(d, w->kind, w->path, w->stage, w->ino, 0, NULL,
				       UINT64_MAX);
	if (w->kind == W_SWAP) /* W21 */
		return fx_w_name_apply(d, w->kind, w->path, w->stage, w->ino, w->ino2, NULL,
				       UINT64_MAX);
	dfd = ndirs_parent(d, D, w->path, &dn);
	if (dfd < 0)
		r = dfd;
	else if (w->kind == W_MKDIR && !*w->stage)
		r = fx_os.mkdirat(dfd, dn, w->mode);
	else if (w->kind == W_MOVE) /* from its old name (W15) */
		r = fx_move(d, w->stage, w->path, NULL);
	else if (w->kind == W_UNLINK && w->keeps) /* its other names keep it (W17) */
		r = fx_os.unlinkat(dfd, dn, 0);
	else if (D->wnew < 0 && (D->wnew = fx_os.openat2(d->meta, "wnew", O_PATH | O_DIRECTORY,
							   0, FX_RESOLVE)) < 0)
		r = D->wnew;
	else if (w->kind == W_UNLINK) /* kept alive there until the checkpoint */
		r = fx_os.renameat2(dfd, dn, D->wnew, sn, RENAME_NOREPLACE);
	else
		r = fx_os.renameat2(D->wnew, sn, dfd, dn, RENAME_NOREPLACE);
	if (r == 0)
		return 0;
	return fx_w_name_apply(d, w->kind, w->path, w->stage, w->ino, w->mode,
			       w->target, UINT64_MAX);
}

/* Apply the record's names, then its ops in place (W4); ops' results
 * from res.  0 or -errno. */
long fx_w_apply_all(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut,
		    const struct plan *P, const int64_t *res, const int *fds,
		    const int *tgt, const struct wname *nm, size_t nnm,
		    const struct wclone *cl, int pre)
{
	struct btrfs_ioctl_usertrans_op *ops = (void *)(intptr_t)ut->ops_ptr;
	struct ndirs D = { .wnew = -1, .par = -1 };

	for (size_t k = 0; k < nnm; k++) {
		int r = name_first(d, &D, &nm[k]);

		if (r < 0) {
			ndirs_close(&D);
			ops[nm[k].op].rval = r;
			ut->ops_completed = nm[k].op;
			d->failed_op = (long)nm[k].op;
			d->latched = r;
			return r;
		}
	}
	ndirs_close(&D);
	for (size_t i = 0; i < P->nops; i++) {
		int64_t got = (pre && on_new(P, i, tgt)) || cl[i].whole ? 0 :
			      apply_op(P, i, fds, tgt, cl);

		if (got < 0) {
			ops[i].rval = got;
			ut->ops_completed = i;
			d->failed_op = (long)i;
			d->latched = (int)got;
			return got;
		}
		ops[i].rval = res[i];
	}
	ut->ops_completed = P->nops;
	return 0;
}

/* Move APPLIED past records no longer PENDING, and write the hint (W4). */
int fx_w_advance(struct fstx_domain *d)
{
	struct wrec h;
	int r;

	while (d->wal_applied < d->wal_end) {
		if ((r = fx_w_rec_head(d, d->wal_applied, &h)) < 0)
			return r;
		if (WS_OPEN(h.state))
			break;
		d->wal_applied = rec_next(d->wal_applied, &h);
	}
	return fx_w_hint_write(d);
}

/*
 * Help (W4, W10).  One pass applies every open record in log order after
 * one barrier; a change that a later record of the pass overwrites whole
 * is skipped (coalescing, as a checkpoint of SQLite writes each page once):
 * a pwrite inside a later pwrite's range of the same inode, a setxattr of
 * a name the same inode sets again later.  The final bytes of a range, and
 * the size (a pwrite extends a file at most to its end, which the later
 * one reaches too), are those the later set leaves, whatever ran between;
 * so the pass leaves what applying every entry would.  Truncates are never
 * skipped.  The pass sets the hint's busy word first and moves APPLIED to
 * the end after, without state words: a pass cut short is done again
 * whole by the next lock holder (W5: replay in order is idempotent).
 */
#define H_IV 4       /* later pwrite ranges remembered per inode */
#define H_FDS 16     /* files a pass keeps open */

struct hent {        /* an entry of a record in the pass */
	uint64_t ino, a, b;
	uint32_t kind, skip;
	char *name;      /* W_SETX */
	uint64_t off;    /* its record's */
};

struct hslot {       /* inode -> its later changes (open addressing) */
	uint64_t ino;
	int used, niv;
	uint64_t iv[H_IV][2];
	char **names;    /* xattr names set later */
	size_t nnames, capnames;
};

struct hpass {
	struct hent *e;
	size_t n, cap;
	struct hslot *t;
	size_t tsize;
	struct { uint64_t ino; int fd; } fds[H_FDS];
	unsigned nfd;
	unsigned char *buf; /* W_CHUNK: a record's payload */
};

static struct hslot *hslot_of(struct hpass *H, uint64_t ino)
{
	size_t i = (size_t)(ino * 0x9e3779b97f4a7c15ull) & (H->tsize - 1);

	while (H->t[i].used && H->t[i].ino != ino)
		i = (i + 1) & (H->tsize - 1);
	H->t[i].used = 1;
	H->t[i].ino = ino;
	return &H->t[i];
}

/* Is entry x overwritten whole later?  Then skip it; else remember it. */
static int hent_later(struct hslot *sl, const struct hent *x)
{
	if (x->kind == W_PWRITE) {
		for (int k = 0; k < sl->niv; k++)
			if (sl->iv[k][0] <= x->a && x->a + x->b <= sl->iv[k][1])
				return 1;
		if (sl->niv < H_IV) {
			sl->iv[sl->niv][0] = x->a;
			sl->iv[sl->niv++][1] = x->a + x->b;
		}
		return 0;
	}
	if (x->kind != W_SETX)
		return 0;
	for (size_t k = 0; k < sl->nnames; k++)
		if (!strcmp(sl->names[k], x->name))
			return 1;
	if (sl->nnames == sl->capnames) {
		size_t c = sl->capnames ? 2 * sl->capnames : 4;
		char **nn = fx_realloc(sl->names, c * sizeof(*nn));

		if (!nn)
			return 0; /* not skipping is always right */
		sl->names = nn;
		sl->capnames = c;
	}
	sl->names[sl->nnames++] = x->name;
	return 0;
}

/*
 * The record at off, checked, its payload in H->buf (whole up to W_CHUNK):
 * 1 open, 0 applied or cancelled, -errno (-EUCLEAN: none where the hint
 * says one is).
 */
static int help_rec(struct fstx_domain *d, struct hpass *H, uint64_t size,
		    uint64_t off, struct wrec *h)
{
	int r = fx_w_rec_check(d, off, size, h, H->buf);

	if (r <= 0)
		return r < 0 ? r : -EUCLEAN;
	if ((r = fx_w_rec_state_of(d, off, h)) < 0)
		return r;
	return WS_OPEN(h->state);
}

/* One entry of an open record that fits W_CHUNK: its pass index i. */
struct hent_in {
	size_t i;
	uint64_t off;    /* the record's offset */
	const struct went *e;
	const char *path, *name;
	const unsigned char *data;
};

/*
 * Both passes of a help: walk the open records in [applied, end), in log
 * order; hand each entry of a record that fits W_CHUNK to ent (its index
 * counts those entries), and each larger record to big (NULL: skip it).
 */
static int help_walk(struct fstx_domain *d, struct hpass *H, uint64_t size,
		     int (*big)(struct fstx_domain *, struct hpass *, uint64_t,
				const struct wrec *),
		     int (*ent)(struct fstx_domain *, struct hpass *,
				const struct hent_in *))
{
	char path[PATH_MAX], name[W_NAME_MAX + 1];
	struct hent_in in = { .path = path, .name = name };
	struct wrec h;
	int r;

	for (uint64_t off = d->wal_applied; off < d->wal_end; off = rec_next(off, &h)) {
		uint64_t p = 0;
		struct went e;

		if ((r = help_rec(d, H, size, off, &h)) < 0)
			return r;
		if (!r)
			continue;
		if (h.len > W_CHUNK) { /* applied whole, not coalesced */
			if (big && (r = big(d, H, off, &h)) < 0)
				return r;
			continue;
		}
		in.e = &e;
		in.off = off;
		for (uint32_t k = 0; k < h.nent; k++, in.i++) {
			if ((r = fx_w_entry_mem(H->buf, h.len, &p, &e, path, name, &in.data)) < 0 ||
			    (r = ent(d, H, &in)) < 0)
				return r;
		}
	}
	return 0;
}

/* Pass 1, per entry: note it. */
static int collect_ent(struct fstx_domain *d, struct hpass *H,
		       const struct hent_in *in)
{
	const struct went *e = in->e;
	struct hent *x;

	(void)d;
	if (fx_grow((void **)&H->e, &H->cap, H->n + 1, sizeof(*H->e)) < 0)
		return -ENOMEM;
	x = &H->e[H->n++];
	*x = (struct hent){ .ino = e->ino, .a = e->a, .b = e->b, .kind = e->kind,
			    .off = in->off };
	if (e->kind == W_SETX && !(x->name = fx_strdup(in->name)))
		return -ENOMEM;
	return 0;
}

/* Pass 1: the entries of the open records in [applied, end), marked. */
static int help_collect(struct fstx_domain *d, struct hpass *H, uint64_t size)
{
	int r = help_walk(d, H, size, NULL, collect_ent);

	if (r < 0)
		return r;
	for (H->tsize = 16; H->tsize < 2 * H->n; H->tsize *= 2)
		;
	if (!(H->t = fx_calloc(H->tsize, sizeof(*H->t))))
		return -ENOMEM;
	for (size_t i = H->n; i-- > 0;) {
		struct hent *x = &H->e[i];

		/* an inode a later record removes: its changes are moot (W5);
		 * not its rename, or the removal would find it elsewhere */
		if (w_moot_if_gone(x->kind, x->ino) && fx_w_gone_later(d, x->ino, x->off))
			x->skip = 1;
		else
			x->skip = (uint32_t)hent_later(hslot_of(H, x->ino), x);
	}
	return 0;
}

/* The pass's fd for the entry's file (opened once per pass). */
static int help_fd(struct fstx_domain *d, struct hpass *H, const char *path,
		   uint64_t ino)
{
	unsigned k;
	int fd;

	for (k = 0; k < H->nfd && k < H_FDS; k++)
		if (H->fds[k].ino == ino)
			return H->fds[k].fd;
	if ((fd = fx_w_entry_fd(d, path, ino)) < 0)
		return fd;
	k = H->nfd++ % H_FDS;
	if (H->nfd > H_FDS)
		fx_os.close(H->fds[k].fd);
	H->fds[k].ino = ino;
	H->fds[k].fd = fd;
	return fd;
}

/* Pass 2, a record too large to coalesce: replayed whole. */
static int apply_big(struct fstx_domain *d, struct hpass *H, uint64_t off,
		     const struct wrec *h)
{
	return fx_w_rec_replay(d, off, h, H->buf);
}

/* Pass 2, per entry: applied unless a later one overwrites it whole. */
static int apply_ent(struct fstx_domain *d, struct hpass *H,
		     const struct hent_in *in)
{
	const struct went *e = in->e;
	int fd;

	if (in->i >= H->n)
		return -EUCLEAN; /* the log changed under the lock */
	if (H->e[in->i].skip)
		return 0;
	if (e->kind == W_SYMLINK) {
		char t[PATH_MAX];

		if (memchr(in->data, 0, (size_t)e->b))
			return -EUCLEAN;
		memcpy(t, in->data, (size_t)e->b); /* entry_check(): < PATH_MAX */
		t[e->b] = 0;
		return fx_w_name_apply(d, e->kind, in->path, in->name, e->ino, 0, t, in->off);
	}
	if (W_IS_NAME(e->kind))
		return fx_w_name_apply(d, e->kind, in->path, in->name, e->ino, e->a, NULL,
				       in->off);
	if ((fd = help_fd(d, H, in->path, e->ino)) < 0)
		return fd;
	if (e->kind == W_PWRITE)
		return fx_w_write_all(fd, in->data, (size_t)e->b, e->a);
	if (e->kind == W_CLONE)
		return fx_w_clone_in(d, fd, e, in->name, in->data);
	if (e->kind == W_TRUNC)
		return fx_os.ftruncate(fd, (off_t)e->a);
	if (e->kind == W_RMX)
		return fx_w_rmx(fd, in->name);
	return fx_os.fsetxattr(fd, in->name, in->data, (size_t)e->b, 0);
}

/* Pass 2: apply the entries not skipped, record by record, in log order. */
static int help_apply(struct fstx_domain *d, struct hpass *H, uint64_t size)
{
	return help_walk(d, H, size, apply_big, apply_ent);
}

static void help_free(struct hpass *H)
{
	for (size_t i = 0; i < H->n; i++)
		free(H->e[i].name);
	for (size_t i = 0; H->t && i < H->tsize; i++)
		free(H->t[i].names);
	for (unsigned k = 0; k < H->nfd && k < H_FDS; k++)
		fx_os.close(H->fds[k].fd);
	free(H->e);
	free(H->t);
	free(H->buf);
}

/* Help: make every open record durable and apply it.  1 done, 0 none. */
int fx_w_help(struct fstx_domain *d)
{
	struct hpass H = { 0 };
	struct stat st;
	int r;

	if (d->wal_applied >= d->wal_end) { /* the first past APPLIED is open */
		if (!d->wal_busy)
			return 0;
		d->wal_busy = 0;
		return fx_w_hint_write(d);
	}
	/* crash-only records only (W11, W12): no promise needs the barrier */
	if ((d->wal_kept && (r = fx_w_barrier(d)) < 0) ||
	    (r = fx_w_mend(d)) < 0) { /* W3: a failed barrier's range */
		d->latched = r;
		return r;
	}
	if ((r = fx_os.fstat(d->wal, &st)) < 0)
		return r;
	if (!(H.buf = fx_malloc(W_CHUNK)))
		return -ENOMEM;
	d->wal_busy = 1;
	if ((r = fx_w_hint_write(d)) < 0 ||
	    (r = fx_w_gone_scan(d, d->wal_applied, d->wal_end, 1)) < 0 ||
	    (r = help_collect(d, &H, (uint64_t)st.st_size)) < 0 ||
	    (r = help_apply(d, &H, (uint64_t)st.st_size)) < 0)
		goto out;
	d->wal_applied = d->wal_end;
	d->wal_busy = 0;
	r = fx_w_hint_write(d);
out:
	d->wal_ngone = 0;
	help_free(&H);
	return r < 0 ? r : 1;
}
