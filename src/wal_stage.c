/* SPDX-License-Identifier: MIT */
/*
 * wal_stage.c - the names a record makes, staged before it (rules W1, W2
 * of wal.c): which new files, symlinks and directories and which removals
 * a transaction's plan holds, at which final names; the staged objects in
 * .fstx/wnew/ that let the record name their inodes (a new directory with
 * the files made right in it staged whole); and their removal when the
 * transaction does not reach its record.  And the large overwrites staged
 * in files of their own (W13), and which large new files are written whole
 * before the record (W22).  wal.c calls these from its commit;
 * wal_apply.c moves the staged objects after the barrier, and wal_rec.c
 * replays the name and clone entries (W5).
 */
#define _GNU_SOURCE
#include "wal_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where name entry w of step k keeps its object: unique in the log
 * (salt, offset, step). */
static void stage_name(struct fstx_domain *d, struct wname *w, size_t k)
{
	w->stage = w->sbuf;
	snprintf(w->sbuf, sizeof(w->sbuf), W_WNEW "%016llx-%llx-%zu",
		 (unsigned long long)d->wal_salt, (unsigned long long)d->wal_end, k);
}

/*
 * What fx_w_names_of() finds in the plan's steps, once (a search of the
 * steps per name would make a transaction of n new files O(n^2)).
 *   moves  the steps that move a new object on from a name it had (W18's
 *          renames of new directories, renames of new files), in order
 *   first  per new object: the step of the first name it keeps to the
 *          end (a move of it out of .fstx/ that no later step moves it
 *          from, by rename or by removal into the trash), SIZE_MAX none;
 *   next   per step: the next such step of the same object.  A new file
 *          has one per name it ends with: its first, then each hard link
 *          (W16); a directory or symlink at most one.
 */
struct nix {
	size_t *moves, nmoves;
	size_t *first, *next;
	size_t *tmv, ntmv; /* the steps that move a name on (first_path()) */
	size_t nrm;        /* the removal entries, nm[0..nrm) */
};

static void nix_free(struct nix *X)
{
	free(X->moves);
	free(X->first);
	free(X->next);
	free(X->tmv);
}

int fx_w_moves_name(const struct fx_step *s)
{
	return s->kind == FX_ST_MOVE && !fx_under(s->dst, FX_TRASH) &&
	       ((!s->newid && s->ino) ||
		(s->newid > 0 && *s->src && !fx_under(s->src, FX_META)));
}

/* Path p (at or under move s's destination) as it was before s: under its
 * source, into buf; p itself where s does not touch it; NULL past
 * PATH_MAX. */
static const char *unmoved(const struct fx_step *s, const char *p, char buf[PATH_MAX])
{
	size_t n = strlen(s->dst), a, b;

	if (strncmp(p, s->dst, n) || (p[n] && p[n] != '/'))
		return p;
	if ((a = strlen(s->src)) + (b = strlen(p + n)) >= PATH_MAX)
		return NULL;
	memmove(buf + a, p + n, b + 1); /* p may be buf */
	memcpy(buf, s->src, a);
	return buf;
}

/*
 * W24: where path p, as step k finds it, was when the transaction began:
 * the moves before step k undone, the latest first (renames of objects
 * of the tree, the three steps of an exchange, moves of new objects on
 * from a name); into buf.  NULL past PATH_MAX; a path in .fstx/ means
 * the object was not in the tree.
 */
static const char *first_path(const struct plan *P, const struct nix *X, size_t k,
			      const char *p, char buf[PATH_MAX])
{
	for (size_t m = X->ntmv; p && m-- > 0;)
		if (X->tmv[m] < k)
			p = unmoved(&P->steps[X->tmv[m]], p, buf);
	return p;
}

/*
 * The name step c gave its object, as it is just before step j: under
 * the new names of the new directories that the moves between them
 * renamed (W18), into buf; NULL past PATH_MAX.
 */
static const char *name_before(const struct plan *P, const struct nix *X, size_t c, size_t j,
			       char buf[PATH_MAX])
{
	const char *p = P->steps[c].dst;

	for (size_t m = 0; m < X->nmoves && X->moves[m] < j; m++) {
		const struct fx_step *s = &P->steps[X->moves[m]];
		size_t n = strlen(s->src), a = strlen(s->dst), b;

		if (X->moves[m] <= c || strncmp(p, s->src, n) || p[n] != '/')
			continue;
		if (a + (b = strlen(p + n)) >= PATH_MAX)
			return NULL;
		memmove(buf + a, p + n, b + 1); /* p may be buf */
		memcpy(buf, s->dst, a);
		p = buf;
	}
	return p;
}

static int nix_build(const struct plan *P, struct nix *X)
{
	size_t nid = P->newid > 0 ? (size_t)P->newid + 1 : 1;
	char buf[PATH_MAX];

	X->nmoves = 0;
	X->moves = fx_malloc((P->nsteps ? P->nsteps : 1) * sizeof(size_t));
	X->next = fx_malloc((P->nsteps ? P->nsteps : 1) * sizeof(size_t));
	X->first = fx_malloc(nid * sizeof(size_t));
	X->tmv = fx_malloc((P->nsteps ? P->nsteps : 1) * sizeof(size_t));
	if (!X->moves || !X->next || !X->first || !X->tmv)
		return -ENOMEM;
	X->ntmv = 0;
	for (size_t k = 0; k < P->nsteps; k++)
		if (fx_w_moves_name(&P->steps[k]))
			X->tmv[X->ntmv++] = k;
	for (size_t i = 0; i < nid; i++)
		X->first[i] = SIZE_MAX;
	for (size_t k = 0; k < P->nsteps; k++) {
		const struct fx_step *s = &P->steps[k];
		size_t *c;

		X->next[k] = SIZE_MAX;
		if (s->kind != FX_ST_MOVE || s->newid <= 0)
			continue;
		if ((size_t)s->newid >= nid)
			return -EINVAL; /* not the planner's: the undo way */
		/* the name it leaves, as the moves before it left it */
		for (c = &X->first[s->newid]; *c != SIZE_MAX; c = &X->next[*c]) {
			const char *now = name_before(P, X, *c, k, buf);

			if (!now)
				return -ENAMETOOLONG; /* the undo way */
			if (!strcmp(now, s->src)) {
				*c = X->next[*c];
				break;
			}
		}
		/* from a name, or on from .fstx/new/ where an exchange put
		 * it (W24) */
		if ((*s->src && !fx_under(s->src, FX_NEW)) ||
		    (fx_under(s->src, FX_NEW) && X->nmoves &&
		     P->steps[X->moves[X->nmoves - 1]].newid == s->newid &&
		     !strcmp(P->steps[X->moves[X->nmoves - 1]].dst, s->src)))
			X->moves[X->nmoves++] = k;
		if (fx_under(s->dst, FX_META))
			continue;
		for (c = &X->first[s->newid]; *c != SIZE_MAX; c = &X->next[*c])
			;
		*c = k;
	}
	return 0;
}

/*
 * Where the object that step k moves to is when the transaction
 * ends: under the name of a new directory it lies in that a later step
 * renames (W18).  A path for w->path, allocated into w->pown when it
 * changed; NULL when memory runs out or it would reach PATH_MAX (the
 * transaction then takes the undo way): name_before() to the end.
 */
static const char *rebased(const struct plan *P, const struct nix *X, size_t k,
			   struct wname *w)
{
	char buf[PATH_MAX];
	const char *p = name_before(P, X, k, SIZE_MAX, buf);

	if (p == P->steps[k].dst)
		return p;
	free(w->pown);
	return w->pown = p ? fx_strdup(p) : NULL;
}

/* After nm[0..n): the new objects that steps of kind (MKDIR, MKFILE,
 * SYMLINK) make, at their final names; the new count. */
static size_t names_made(struct fstx_domain *d, const struct plan *P, const struct nix *X,
			 uint32_t kind, struct wname *nm, size_t n)
{
	for (size_t k = 0; k < P->nsteps; k++) {
		const struct fx_step *s = &P->steps[k];

		if (s->kind != kind)
			continue;
		size_t last = s->newid > 0 && s->newid <= P->newid ? X->first[s->newid] : SIZE_MAX;

		if (last == SIZE_MAX && kind != FX_ST_MKDIR && s->newid > 0)
			continue; /* W27: left with no name, nothing to name */
		nm[n] = (struct wname){ .kind = kind == FX_ST_MKDIR ? W_MKDIR :
						kind == FX_ST_SYMLINK ? W_SYMLINK : W_NEWF,
					.mode = s->mode, .op = s->op, .dir = -1,
					.target = s->aux };
		if (last != SIZE_MAX) /* NULL (a directory, no name) declines, wal.c */
			nm[n].path = rebased(P, X, last, &nm[n]);
		nm[n].stage = nm[n].sbuf; /* "" for a directory made in place */
		nm[n].sfd = -1;
		if (kind != FX_ST_MKDIR)
			stage_name(d, &nm[n], k);
		nm[n].step = k;
		n++;
	}
	return n;
}

/*
 * After nm[0..n): the renames (W15) and links (W16: a LINK step into
 * .fstx/new/, then its MOVE to the new name) of initial objects, in step
 * order; the new count, or SIZE_MAX when memory runs out.
 */
/* Are steps k, k+1, k+2 the planner's exchange of two names (the first
 * object through .fstx/new/ to the second's name, the second to the
 * first's), whatever the objects? */
static int swap_shape(const struct plan *P, size_t k)
{
	const struct fx_step *s = &P->steps[k];
	const struct btrfs_ioctl_usertrans_op *op = &P->ops[s->op];

	if (k + 2 >= P->nsteps || op->op != FSTX_OP_RENAME || op->args[2] != RENAME_EXCHANGE)
		return 0;
	for (int j = 0; j < 3; j++)
		if (s[j].kind != FX_ST_MOVE || s[j].op != s->op)
			return 0;
	return fx_under(s[0].dst, FX_NEW) && !fx_under(s[0].src, FX_META) &&
	       !strcmp(s[1].dst, s[0].src) && !fx_under(s[1].src, FX_META) &&
	       !strcmp(s[2].src, s[0].dst) && !strcmp(s[2].dst, s[1].src);
}

int fx_wal_swap_at(const struct plan *P, size_t k)
{
	const struct fx_step *s = &P->steps[k];

	if (!swap_shape(P, k))
		return 0;
	for (int j = 0; j < 3; j++)
		if (s[j].newid || !s[j].ino)
			return 0;
	return s[2].ino == s[0].ino;
}

int fx_wal_swap_new_at(const struct plan *P, size_t k)
{
	const struct fx_step *s = &P->steps[k];

	if (!swap_shape(P, k))
		return 0;
	if (s[0].newid > 0 && s[2].newid == s[0].newid && !s[1].newid && s[1].ino)
		return 1; /* the new one first, to the tree's object's name */
	if (!s[0].newid && s[0].ino && !s[2].newid && s[2].ino == s[0].ino && s[1].newid > 0)
		return 2;
	return 0;
}

/*
 * W24: did a step before k give a new object a name at or under p (a
 * directory of the tree, as step k finds it)?  Then the object moved
 * with the directory, which struct nix, knowing moves of new objects
 * only, does not follow: its entry would name it where it was made.
 */
static int new_under(const struct plan *P, size_t k, const char *p)
{
	size_t n = strlen(p);

	for (size_t j = 0; j < k; j++) {
		const struct fx_step *s = &P->steps[j];

		if (s->kind == FX_ST_MOVE && s->newid > 0 && !strncmp(s->dst, p, n) &&
		    (!s->dst[n] || s->dst[n] == '/'))
			return 1;
	}
	return 0;
}

/*
 * W24: is step k's rename of an object of the tree, from the name it had
 * when the transaction began (f0), followed by the removal of that name
 * (a removal entry of nm[0..X->nrm) at f0, of the same inode)?  Then the
 * rename makes no entry: the removal takes the object at f0, and notes
 * the rename (via, mop) for fx_w_move_declined().
 */
/* The removal of nm[0..X->nrm) of inode ino at f0 after step after, not
 * yet taking over a rename: now it takes over op's, which gave the name
 * via.  1 found, else 0. */
static int take_over(const struct nix *X, struct wname *nm, uint64_t ino, size_t after,
		     const char *f0, size_t op, const char *via)
{
	for (size_t j = 0; j < X->nrm; j++) {
		struct wname *w = &nm[j];

		if (w->ino == ino && w->step > after && !w->mop && !strcmp(w->path, f0)) {
			w->mop = op + 1;
			w->via = via;
			return 1;
		}
	}
	return 0;
}

static int collapsed(const struct plan *P, const struct nix *X, struct wname *nm, size_t k,
		     const char *f0)
{
	const struct fx_step *s = &P->steps[k];
	char buf[PATH_MAX];

	/* the name it gives, in a directory W23 can look at as it is; and
	 * nothing new in it, which would move with it */
	return first_path(P, X, k, s->dst, buf) == s->dst && !new_under(P, k, s->src) &&
	       take_over(X, nm, s->ino, k, f0, s->op, s->dst);
}

/*
 * W24: does the transaction remove one of the two objects that the
 * exchange at step k swaps (the steps: k moves the first into .fstx/new/,
 * k + 1 the second to the first's name, k + 2 the first to the second's),
 * by the name the exchange gave it?  Then the exchange is that removal
 * (noted as collapsed()'s) and a rename of the other object: 0 the first
 * is removed, 1 the second, -1 neither, -2 a path past PATH_MAX.
 */
static int swap_collapsed(const struct plan *P, const struct nix *X, struct wname *nm,
			  size_t k)
{
	const struct fx_step *s = &P->steps[k];
	char buf[PATH_MAX], buf2[PATH_MAX];

	for (int side = 0; side < 2; side++) {
		const char *f0 = first_path(P, X, k, s[side].src, buf);

		if (!f0)
			return -2;
		if (first_path(P, X, k, s[1 - side].src, buf2) != s[1 - side].src ||
		    (!s[0].newid && new_under(P, k, s[0].src)) ||
		    (!s[1].newid && new_under(P, k, s[1].src)))
			continue; /* as collapsed(); a new object's own name
				   * and what it holds struct nix follows */
		if (take_over(X, nm, s[side].ino, k + 2, f0, s->op, side ? s[1].dst : s[2].dst))
			return side;
	}
	return -1;
}

static size_t names_moved(const struct plan *P, const struct nix *X, struct wname *nm,
			  size_t n)
{
	char buf[PATH_MAX];

	for (size_t k = 0; k < P->nsteps; k++) {
		const struct fx_step *s = &P->steps[k];
		const char *from = s->src, *f0;
		uint32_t kind = W_MOVE;

		int swap = fx_wal_swap_at(P, k);
		int side = swap ? swap_collapsed(P, X, nm, k) : -1;
		int sn = fx_wal_swap_new_at(P, k);

		if (sn) { /* W24: a new object exchanged with one removed after */
			if (swap_collapsed(P, X, nm, k) != 2 - sn)
				return SIZE_MAX; /* kept: its entry would follow
						  * the new one's at its name */
			k += 2; /* the new one: at its last name (struct nix) */
			continue;
		}

		if (side >= 0) { /* W24: the other object renamed, alone */
			const struct fx_step *m = side ? &s[2] : &s[1];

			nm[n] = (struct wname){ .kind = W_MOVE, .ino = m->ino, .op = s->op,
						.step = k + 2 - !side, .dir = -1, .sfd = -1,
						.stage = fx_strdup(side ? s->src : s[1].src) };
			nm[n].path = rebased(P, X, nm[n].step, &nm[n]);
			if (!nm[n].stage || !nm[n].path)
				return SIZE_MAX;
			if ((f0 = first_path(P, X, k, nm[n].stage, buf)) != nm[n].stage &&
			    !(nm[n].from0 = fx_strdup(f0 && !fx_under(f0, FX_META) ? f0 : FX_META)))
				return SIZE_MAX;
			n++;
			k += 2;
			continue;
		}
		if (side < -1)
			return SIZE_MAX;
		if (swap) { /* W21: one entry for the three steps */
			nm[n] = (struct wname){ .kind = W_SWAP, .path = s->src, .ino = s->ino,
						.ino2 = s[1].ino, .op = s->op, .step = k,
						.dir = -1, .sfd = -1, .stage = fx_strdup(s[1].src) };
			if (!nm[n++].stage)
				return SIZE_MAX;
			k += 2;
			continue;
		}
		if (s->kind != FX_ST_MOVE || s->newid || fx_under(s->dst, FX_TRASH))
			continue;
		if (fx_under(s->src, FX_NEW)) { /* the link's first name */
			if (!k || P->steps[k - 1].kind != FX_ST_LINK ||
			    strcmp(P->steps[k - 1].dst, s->src))
				return SIZE_MAX;
			from = P->steps[k - 1].src;
			kind = W_LINK;
		}
		if ((f0 = first_path(P, X, k, from, buf)) && fx_under(f0, FX_META))
			f0 = NULL; /* not known: no rmdir beside it (W24) */
		if (kind == W_MOVE && f0 && collapsed(P, X, nm, k, f0))
			continue; /* renamed, then removed: a removal (W24) */
		nm[n] = (struct wname){ .kind = kind, .ino = s->ino,
					.op = s->op, .step = k, .dir = -1, .sfd = -1,
					.stage = fx_strdup(from) };
		nm[n].path = rebased(P, X, k, &nm[n]);
		if (!nm[n].stage || !nm[n].path)
			return SIZE_MAX;
		if (f0 != from && !(nm[n].from0 = fx_strdup(f0 ? f0 : FX_META)))
			return SIZE_MAX;
		n++;
	}
	return n;
}

/* The number of components of path p (NULL: none known, last). */
static size_t depth(const char *p)
{
	size_t n = 1;

	if (!p)
		return SIZE_MAX;
	while ((p = strchr(p, '/')))
		p++, n++;
	return n;
}

/*
 * New directories in step order may end nested the other way (mkdir u,
 * mkdir v, rename u v/u): their entries are made in order, by the writer
 * and by replay, so a parent's entry must come first.  A stable sort by
 * depth (insertion: few directories, mostly in order already).
 */
static void parents_first(struct wname *nm, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct wname w = nm[i];
		size_t j = i, dw = depth(w.path);

		for (; j > 0 && depth(nm[j - 1].path) > dw; j--)
			nm[j] = nm[j - 1];
		nm[j] = w;
	}
	for (size_t i = 0; i < n; i++)
		nm[i].stage = nm[i].sbuf; /* its own (names_made()), moved with it */
}

/*
 * After nm[0..n): the other names of the new files of nm (W16: hard links
 * the transaction gives them), each a W_LINK entry from the file's first
 * name, in step order; the new count, or SIZE_MAX when memory runs out.
 * A new file's two steps (made, moved to its first name) and each link's
 * two (linked into .fstx/new/, moved to its name) make one entry each, so
 * nm (P->nsteps entries) holds them.
 */
static size_t names_linked(const struct plan *P, const struct nix *X, struct wname *nm,
			   size_t n)
{
	for (size_t f = 0, nf = n; f < nf; f++) {
		if (nm[f].kind != W_NEWF || !nm[f].path)
			continue;
		for (size_t k = X->next[X->first[P->steps[nm[f].step].newid]]; k != SIZE_MAX;
		     k = X->next[k]) {
			nm[n] = (struct wname){ .kind = W_LINK, .op = P->steps[k].op,
						.step = k, .dir = -1, .sfd = -1,
						.link_of = f + 1,
						.stage = fx_strdup(nm[f].path) };
			nm[n].path = rebased(P, X, k, &nm[n]);
			if (!nm[n].stage || !nm[n].path)
				return SIZE_MAX;
			n++;
		}
	}
	return n;
}

/* W16: a new file's links, their inode: the staged file's, once made. */
void fx_w_link_inodes(struct wname *nm, size_t nnm)
{
	for (size_t k = 0; k < nnm; k++)
		if (nm[k].link_of)
			nm[k].ino = nm[nm[k].link_of - 1].ino;
}

/*
 * W24: the path the object of step k had when the transaction began, for
 * one who has no struct nix (wal.c moves_first()): first_path() over the
 * steps before k that move a name on.  NULL past PATH_MAX.
 */
const char *fx_w_first_path(const struct plan *P, size_t k, char buf[PATH_MAX])
{
	const char *p = P->steps[k].src;

	for (size_t j = k; p && j-- > 0;)
		if (fx_w_moves_name(&P->steps[j]))
			p = unmoved(&P->steps[j], p, buf);
	return p;
}

/*
 * The removals of objects of the tree (unlink, rmdir, the old file a
 * rename replaces), in step order, into nm; each at the path its object
 * had when the transaction began (W24: the record removes them before
 * any other name changes), *moved set where that is not the path the
 * step found it at.  Their number, SIZE_MAX for the undo way (memory, or
 * an object not found in the tree).
 */
static size_t names_removed(struct fstx_domain *d, const struct plan *P, const struct nix *X,
			    struct wname *nm, int *moved)
{
	char buf[PATH_MAX];
	size_t n = 0;

	for (size_t k = 0; k < P->nsteps; k++) {
		const struct fx_step *s = &P->steps[k];
		const char *p;

		if (s->kind != FX_ST_MOVE || s->newid || !fx_under(s->dst, FX_TRASH))
			continue;
		if (!(p = first_path(P, X, k, s->src, buf)) || fx_under(p, FX_META) ||
		    !strcmp(p, FX_META))
			return SIZE_MAX;
		nm[n] = (struct wname){ .kind = W_UNLINK, .path = s->src, .step = k,
					.ino = s->ino, .op = s->op, .dir = -1, .sfd = -1 };
		if (p != s->src) {
			if (!(nm[n].pown = fx_strdup(p)))
				return SIZE_MAX;
			nm[n].path = nm[n].pown;
			*moved = 1;
		}
		stage_name(d, &nm[n], k);
		if (P->ops[s->op].op == BTRFS_IOC_UT_OP_RMDIR) /* emptied alone */
			strcat(nm[n].sbuf, FX_WNEW_KEEP);
		n++;
	}
	return n;
}

/* W24: removals by the depth of their paths, deepest first, then in step
 * order: a directory goes after what it held, which the steps may have
 * moved out of it before its rmdir and removed after. */
static int deeper_first(const void *a, const void *b)
{
	const struct wname *x = a, *y = b;
	size_t dx = depth(x->path), dy = depth(y->path);

	if (dx != dy)
		return dx > dy ? -1 : 1;
	return (x->step > y->step) - (x->step < y->step);
}

static int is_rmdir(const struct wname *w);
static int at_or_under(const char *p, const char *dir);
static int in_meta(const char *p);

/* W25: does a rename of nm take an object of the tree out from under
 * the directory that removal m removes? */
static int emptied_by_moves(const struct wname *nm, size_t n, const struct wname *m)
{
	for (size_t j = 0; j < n; j++) {
		const char *from = nm[j].from0 ? nm[j].from0 : nm[j].stage;

		if (nm[j].kind == W_MOVE && !in_meta(from) && at_or_under(from, m->path))
			return 1;
	}
	return 0;
}

/* W20: is new directory w made, after a rename, at or under the name it
 * left or gave? */
static int made_after_move(const struct wname *nm, size_t n, const struct wname *w)
{
	for (size_t j = 0; j < n; j++)
		if (nm[j].kind == W_MOVE && nm[j].step < w->step && w->path &&
		    (at_or_under(w->path, nm[j].path) || at_or_under(w->path, nm[j].stage)))
			return 1;
	return 0;
}

static int moves_one(const struct wname *w)
{
	return w->kind == W_MOVE || w->kind == W_SWAP || (w->kind == W_LINK && !w->link_of);
}

/* names_late(): entry k of nm is t[*j] next (own: its stage is its sbuf;
 * at: its new index). */
static void put_at(struct wname *t, size_t *j, char *own, size_t *at,
		   const struct wname *nm, size_t k)
{
	own[*j] = nm[k].stage == nm[k].sbuf;
	at[k] = *j;
	t[(*j)++] = nm[k];
}

/*
 * The entries that go later than their kind's place (the record applies
 * its entries in order): a new directory made at or under a name a
 * rename of the tree left or gave, right after the renames (W20); an
 * rmdir of a directory that renames empty, last, in the order the
 * removals had (deepest first: W25).  The others keep their order; a
 * link's index of its new file follows it.  -ENOMEM, else 0.
 */
static int names_late(struct wname *nm, size_t n)
{
	size_t late = 0, j = 0, *at, lastmv = SIZE_MAX;
	struct wname *t;
	char *own;

	for (size_t k = 0; k < n; k++) {
		if (moves_one(&nm[k]))
			lastmv = k;
		if ((nm[k].kind == W_UNLINK && is_rmdir(&nm[k]) &&
		     emptied_by_moves(nm, n, &nm[k])) ||
		    (nm[k].kind == W_MKDIR && made_after_move(nm, n, &nm[k]))) {
			nm[k].late = 1;
			late++;
		}
	}
	if (!late)
		return 0;
	t = fx_calloc(n, sizeof(*t));
	at = fx_calloc(n, sizeof(*at));
	own = fx_calloc(n, 1);
	if (!t || !at || !own) {
		free(t);
		free(at);
		free(own);
		return -ENOMEM;
	}
	for (size_t k = 0; k < n; k++) {
		if (!nm[k].late)
			put_at(t, &j, own, at, nm, k);
		for (size_t m = 0; k == lastmv && m < n; m++) /* W20 */
			if (nm[m].late && nm[m].kind == W_MKDIR)
				put_at(t, &j, own, at, nm, m);
	}
	for (size_t k = 0; k < n; k++) /* W25 */
		if (nm[k].late && nm[k].kind == W_UNLINK)
			put_at(t, &j, own, at, nm, k);
	memcpy(nm, t, n * sizeof(*nm));
	for (size_t k = 0; k < n; k++) {
		if (own[k])
			nm[k].stage = nm[k].sbuf; /* its own, moved with it */
		if (nm[k].link_of)
			nm[k].link_of = 1 + at[nm[k].link_of - 1];
	}
	free(t);
	free(at);
	free(own);
	return 0;
}

/*
 * The name entries of plan P (W1: removals of initial objects, new
 * directories, renames and links of initial objects (W15, W16), new
 * files, new symlinks at their final names, then the links of new files
 * (W16)), in that order and each kind in step order, but for what
 * names_late() moves (W20, W25), into nm (at most
 * P->nsteps); their number.
 */
size_t fx_w_names_of(struct fstx_domain *d, const struct plan *P,
		     struct wname *nm)
{
	struct nix X = { 0 };
	size_t n = 0, k0;
	int moved = 0;

	if (nix_build(P, &X) < 0 || (n = names_removed(d, P, &X, nm, &moved)) == SIZE_MAX) {
		nix_free(&X);
		fx_w_free_stages(nm, P->nsteps + 1);
		memset(nm, 0, (P->nsteps + 1) * sizeof(*nm));
		return 0; /* steps and no names: the undo way */
	}
	if (moved) /* W24: children first, wherever the steps took them */
		qsort(nm, n, sizeof(*nm), deeper_first);
	for (size_t k = 0; k < n; k++)
		nm[k].stage = nm[k].sbuf; /* its own, moved with it */
	X.nrm = n;
	k0 = n;
	n = names_made(d, P, &X, FX_ST_MKDIR, nm, n);
	parents_first(nm + k0, n - k0);
	if ((n = names_moved(P, &X, nm, n)) != SIZE_MAX) {
		n = names_made(d, P, &X, FX_ST_MKFILE, nm, n);
		n = names_made(d, P, &X, FX_ST_SYMLINK, nm, n);
		n = names_linked(P, &X, nm, n);
	}
	nix_free(&X);
	if (n != SIZE_MAX && names_late(nm, n) < 0) {
		fx_w_free_stages(nm, P->nsteps + 1);
		memset(nm, 0, (P->nsteps + 1) * sizeof(*nm));
		return 0; /* no memory: the undo way */
	}
	return n == SIZE_MAX ? 0 : n;
}

/* 1 if path p lies in directory dir (any depth). */
static int is_under(const char *p, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(p, dir, n) && p[n] == '/';
}

/* 1 if path p's parent is dir. */
static int parent_is(const char *p, const char *dir)
{
	return is_under(p, dir) && !strchr(p + strlen(dir) + 1, '/');
}

/*
 * W2: a new directory that holds no other new directory is made staged,
 * .fstx/wnew/SALT-OFFSET-STEP, and the new files and symlinks made right
 * in it are made in the staged directory under their names, so that one
 * rename after the barrier puts them all in place.  -ENOMEM, else 0.
 */
int fx_w_batch_dirs(struct fstx_domain *d, struct wname *nm, size_t nnm)
{
	for (size_t k = 0; k < nnm; k++) {
		struct wname *w = &nm[k];
		size_t j, kids = 0;

		if (w->kind != W_MKDIR || !w->path)
			continue;
		for (j = 0; j < nnm; j++)
			if (nm[j].path && nm[j].kind == W_MKDIR && is_under(nm[j].path, w->path))
				break;
		if (j < nnm)
			continue; /* a new directory in it: made in place */
		for (j = 0; j < nnm; j++)
			kids += W_IS_STAGED(nm[j].kind) && nm[j].path &&
				parent_is(nm[j].path, w->path);
		if (!kids)
			continue;
		stage_name(d, w, w->step);
		for (j = 0; j < nnm; j++) {
			const char *leaf;

			if (!W_IS_STAGED(nm[j].kind) || !nm[j].path ||
			    !parent_is(nm[j].path, w->path))
				continue;
			leaf = nm[j].path + strlen(w->path) + 1;
			if (strlen(w->stage) + 1 + strlen(leaf) > W_NAME_MAX)
				continue; /* staged alone, renamed after it */
			if (asprintf(&nm[j].stage, "%s/%s", w->stage, leaf) < 0) {
				nm[j].stage = nm[j].sbuf;
				return -ENOMEM;
			}
			nm[j].dir = (long)k;
		}
	}
	return 0;
}

/* The staged names' memory and the staged directories' descriptors. */
void fx_w_free_stages(struct wname *nm, size_t cap)
{
	for (size_t k = 0; nm && k < cap; k++) {
		if (nm[k].stage && nm[k].stage != nm[k].sbuf)
			free(nm[k].stage);
		free(nm[k].pown);
		free(nm[k].from0);
		if (nm[k].kind == W_MKDIR && nm[k].sfd >= 0)
			fx_os.close(nm[k].sfd);
	}
}

/*
 * The staged directories (W2), before the files made in them.  One there
 * already is garbage of a transaction cut short at this offset.
 */
int fx_w_stage_dirs(struct fstx_domain *d, struct wname *nm, size_t nnm)
{
	for (size_t k = 0; k < nnm; k++) {
		struct wname *w = &nm[k];
		const char *n;
		struct stat st;
		int dfd, r;

		if (w->kind != W_MKDIR || !*w->stage)
			continue;
		if ((dfd = fx_parent(d, w->stage, &n)) < 0)
			return dfd;
		r = fx_os.mkdirat(dfd, n, w->mode);
		if (r == -EEXIST && (r = fx_clean_tree(dfd, n)) == 0)
			r = fx_os.mkdirat(dfd, n, w->mode);
		if (r == 0) {
			w->made = 1;
			r = w->sfd = fx_os.openat2(dfd, n, O_PATH | O_DIRECTORY | O_NOFOLLOW,
						   0, FX_RESOLVE);
		}
		fx_os.close(dfd);
		if (r >= 0 && (r = fx_os.fstat(w->sfd, &st)) == 0)
			w->ino = (uint64_t)st.st_ino; /* its entry names it (W24) */
		if (r < 0)
			return r;
	}
	return 0;
}

/* Does a step between steps a and b (either order) move a directory of
 * the tree, or a new object on from the name it got first?  A parent path
 * then may name another directory at one than at the other. */
static int moves_between(const struct plan *P, size_t a, size_t b)
{
	for (size_t j = (a < b ? a : b) + 1; j < (a < b ? b : a); j++)
		if (P->steps[j].kind == FX_ST_MOVE && !fx_under(P->steps[j].src, FX_NEW))
			return 1;
	return 0;
}

/*
 * W26: new directory nm[k], made in place at its last name, takes the
 * group of the directory there, not of par, where it was made (its ggid):
 * 1 where the two may differ.  A new directory there gives the group it
 * took (every W_MKDIR entry has its ggid), one of the tree its own if
 * setgid.
 */
static int group_moves(struct fstx_domain *d, const struct plan *P, const char *par,
		       const struct wname *nm, size_t nnm, size_t k)
{
	char end[PATH_MAX];

	fx_dirname(nm[k].path, end);
	if (!strcmp(par, end))
		return 0;
	for (size_t j = 0; j < nnm; j++)
		if (nm[j].kind == W_MKDIR && nm[j].path && !strcmp(nm[j].path, end))
			return nm[j].ggid != nm[k].ggid;
	return fx_tree_group(d, P, P->nsteps, end) != nm[k].ggid;
}

/*
 * W2: an object staged in .fstx/wnew/ takes, as mkdir(2), open(2) and
 * symlink(2) would have given it in the directory it was made in, the
 * group of a setgid directory there (a directory S_ISGID too): that of
 * the tree, where the steps before had put it (a directory the
 * transaction renamed, W20), or of a new directory that took one, as the
 * undo way finds it (plan.c fx_new_group(); W_MKDIR entries come first,
 * parents first).  Where it was made, not where it ends: one made in a
 * setgid directory and renamed out keeps the group.  Best effort.
 * A new directory made in place (not staged) gets the group its last
 * name's directory gives: W26 declines where that may not be the one.
 */
int fx_w_inherit_groups(struct fstx_domain *d, const struct plan *P, struct wname *nm,
			size_t nnm)
{
	char par[PATH_MAX], last[PATH_MAX] = "";
	long *gids = fx_calloc((size_t)P->newid + 1, sizeof(*gids)), lastgid = -1;
	size_t lastk = SIZE_MAX;
	int declined = 0, sg = -1; /* is .fstx/wnew/ setgid?  (-1: not looked) */

	/* the new directories' groups in step order, where each one's parent
	 * has its group before it (nm holds them parents last-name first) */
	for (size_t k = 0; gids && k <= (size_t)P->newid; k++)
		gids[k] = -1;
	for (size_t k = 0; gids && k < P->nsteps; k++)
		if (P->steps[k].kind == FX_ST_MKDIR && P->steps[k].newid > 0 &&
		    P->steps[k].newid <= P->newid)
			gids[P->steps[k].newid] = fx_new_group(d, P, k, gids);
	for (size_t k = 0; k < nnm; k++)
		nm[k].ggid = gids && nm[k].kind == W_MKDIR && nm[k].path ?
			     gids[P->steps[nm[k].step].newid] : -1;
	for (size_t k = 0; k < nnm; k++) {
		struct wname *w = &nm[k];
		const char *n;
		int dfd;

		if ((w->kind != W_NEWF && w->kind != W_SYMLINK && w->kind != W_MKDIR) ||
		    !w->path || !fx_new_parent(P, w->step, par))
			continue;
		if (!gids) {
			declined |= w->kind == W_MKDIR && !*w->stage; /* unknown: W26 */
			continue;
		}
		if (w->kind == W_MKDIR && !*w->stage) {
			declined |= group_moves(d, P, par, nm, nnm, k);
			continue; /* made in place: the kernel's */
		}
		if (w->kind != W_MKDIR) { /* a directory's: the pass above */
			if (lastk != SIZE_MAX && !strcmp(par, last) &&
			    !moves_between(P, lastk, w->step)) {
				w->ggid = lastgid; /* a hundred files in one directory */
			} else {
				w->ggid = lastgid = fx_new_group(d, P, w->step, gids);
				memcpy(last, par, strlen(par) + 1);
				lastk = w->step;
			}
		}
		if (sg < 0)
			sg = fx_setgid_group(d, FX_META "/wnew") >= 0;
		if ((w->ggid < 0 && !sg) || (dfd = fx_parent(d, w->stage, &n)) < 0)
			continue;
		fx_take_group(dfd, n, w->ggid, w->kind == W_MKDIR);
		fx_os.close(dfd);
	}
	free(gids);
	return declined;
}

/* An open for reading (of a clone's source, W19: staged before the
 * record, so the removal after the barrier does not touch what it read). */
static int reads_only(const struct btrfs_ioctl_usertrans_op *op)
{
	return op->op == BTRFS_IOC_UT_OP_OPEN && (op->args[1] & O_ACCMODE) == O_RDONLY;
}

/*
 * May op i, which changes the object that removal nm[k] takes a name of,
 * do so by another name (W17)?  Only where the object keeps a name, the
 * op names it by a path it had when the transaction began that no
 * removal of the transaction takes, and nothing of the tree is renamed
 * or exchanged (the entries would name it under a new path; W20, W24).
 */
static int writes_kept_name(struct fstx_domain *d, const struct plan *P, size_t i,
			    const struct wname *nm, size_t nnm, size_t k)
{
	const char *p = P->pops[i].cpath;
	struct stat st;

	/* a name of the tree as the transaction began (W24: not one a
	 * rename gave, of the file or of a directory above it) */
	if (!nm[k].keeps || !p || fx_lstat(d, p, &st) < 0 || (uint64_t)st.st_ino != nm[k].ino)
		return 0;
	for (size_t j = 0; j < nnm; j++)
		if ((nm[j].kind == W_UNLINK && !strcmp(nm[j].path, p)) ||
		    (nm[j].kind == W_UNLINK && nm[j].via) || nm[j].kind == W_MOVE ||
		    nm[j].kind == W_SWAP)
			return 0;
	return 1;
}

/*
 * Removals the log does not take (W1): of an object the transaction also
 * writes (reading it, as a clone's source, is fine), unless by a name it
 * keeps (writes_kept_name()); a directory other than by rmdir (the plan
 * found it empty, or emptied by the transaction's earlier removals).
 * 1: take the undo way.
 * A file or symlink that keeps a name the transaction does not remove
 * is unlinked after the barrier, not kept in .fstx/wnew/ (its link count
 * is then the undo way's; moves_first() made sure no earlier record
 * names it, W17); the entries of its changes name it by the name it keeps.
 */
int fx_w_removal_declined(struct fstx_domain *d, const struct plan *P,
			   const uint64_t *ino, struct wname *nm, size_t nnm)
{
	for (size_t k = 0; k < nnm; k++) {
		struct stat st;
		nlink_t gone = 0;

		if (nm[k].kind != W_UNLINK)
			continue;
		if (fx_lstat(d, nm[k].path, &st) < 0 || (uint64_t)st.st_ino != nm[k].ino ||
		    (P->ops[nm[k].op].op == BTRFS_IOC_UT_OP_RMDIR) != !!S_ISDIR(st.st_mode))
			return 1;
		for (size_t j = 0; j < nnm; j++) /* W17: names it removes */
			gone += nm[j].kind == W_UNLINK && nm[j].ino == nm[k].ino;
		nm[k].keeps = !S_ISDIR(st.st_mode) && st.st_nlink > gone;
		for (size_t i = 0; i < P->nops; i++)
			if (ino[i] == nm[k].ino && !reads_only(&P->ops[i]) &&
			    !writes_kept_name(d, P, i, nm, nnm, k))
				return 1;
	}
	return 0;
}

/*
 * W23: may the caller make the change in directory dir (the parent of a
 * name the record adds or removes), and open it to fsync it?  R_OK, W_OK
 * and X_OK there, by access(2) with the effective ids (a directory made
 * by the transaction: by the mode it asks; fx_openat_owned() opens it).
 * 1: no, or not known.
 */
static int dir_refused(struct fstx_domain *d, const struct wname *nm, size_t nnm,
		       const char *dir)
{
	int r = fx_os.faccessat(d->root, *dir ? dir : ".", W_OK | X_OK);

	if (r != -ENOENT)
		return r != 0 || fx_dir_syncable(d, dir) != 0;
	for (size_t k = 0; k < nnm; k++)
		if (nm[k].kind == W_MKDIR && nm[k].path && !strcmp(nm[k].path, dir))
			return (nm[k].mode & (S_IWUSR | S_IXUSR)) != (S_IWUSR | S_IXUSR);
	return 1; /* under a directory the transaction moves: not looked at */
}

/* W23: the parent of path p refused (dir_refused())?  last: the parent
 * found not refused before, most names land in one ("/" none yet). */
static int parent_refused(struct fstx_domain *d, const struct wname *nm, size_t nnm,
			  const char *p, char last[PATH_MAX])
{
	char dir[PATH_MAX];

	if (!strcmp(fx_dirname(p, dir), last))
		return 0;
	if (dir_refused(d, nm, nnm, dir))
		return 1;
	strcpy(last, dir);
	return 0;
}

/* W23: is the object at p immutable or append-only (chattr +i, +a), which
 * refuse its names and xattrs to root too?  1 yes or not known, 0 no or
 * absent (made by the transaction). */
static int attr_locked_by(struct fstx_domain *d, const char *p, uint64_t flags)
{
	struct statx x;
	int r = fx_os.statx(d->root, *p ? p : ".", 0, &x);

	if (r == -ENOENT)
		return 0;
	return r < 0 || (x.stx_attributes & x.stx_attributes_mask & flags);
}

static int attr_locked(struct fstx_domain *d, const char *p)
{
	return attr_locked_by(d, p, STATX_ATTR_IMMUTABLE | STATX_ATTR_APPEND);
}

/* W23: does a flag of the objects or directories entry w changes refuse it?
 * last: the directory of the new name before it, found not locked ("/"
 * none), which the next new names in it (a hundred new files in one
 * directory) do not look at again. */
static int names_locked(struct fstx_domain *d, const struct wname *w, char last[PATH_MAX])
{
	char buf[PATH_MAX];

	switch (w->kind) {
	case W_UNLINK: /* and where a rename it took over put it (W24) */
		return attr_locked(d, w->path) || attr_locked(d, fx_dirname(w->path, buf)) ||
		       (w->via && attr_locked(d, fx_dirname(w->via, buf)));
	case W_MOVE:
		return attr_locked(d, w->stage) || attr_locked(d, fx_dirname(w->stage, buf)) ||
		       attr_locked(d, fx_dirname(w->path, buf));
	case W_LINK:
		return (!w->link_of && attr_locked(d, w->stage)) ||
		       attr_locked(d, fx_dirname(w->path, buf));
	case W_SWAP:
		return attr_locked(d, w->path) || attr_locked(d, w->stage) ||
		       attr_locked(d, fx_dirname(w->path, buf)) ||
		       attr_locked(d, fx_dirname(w->stage, buf));
	default: /* a new name: an append-only directory takes it */
		if (!w->path || !strcmp(fx_dirname(w->path, buf), last))
			return 0;
		if (attr_locked_by(d, buf, STATX_ATTR_IMMUTABLE))
			return 1;
		memcpy(last, buf, strlen(buf) + 1);
		return 0;
	}
}

/*
 * W23: what the log applies after its barrier must not fail for want of
 * permission, which no prediction covers (it would roll forward for ever,
 * and every later transaction fail): a transaction takes the undo way
 * where an object or directory whose names or xattrs it changes is
 * immutable or append-only (names_locked()); a caller other than root
 * also where a name the record adds or removes lies in a directory it
 * may not write, search or open to fsync, or in a sticky one, where a
 * directory it moves to another or into .fstx/wnew/ (rmdir) refuses it
 * write (its ".." changes), where it links another's file, or where an
 * op changes an object of the tree it may not read and write.  The undo
 * way meets the kernel's error and rolls back.  1: take the undo way.
 */
int fx_w_perm_declined(struct fstx_domain *d, const struct plan *P,
		       const struct wname *nm, size_t nnm)
{
	char last[PATH_MAX] = "/";

	for (size_t k = 0; k < nnm; k++)
		if (names_locked(d, &nm[k], last))
			return 1;
	for (size_t i = 0; i < P->nops; i++)
		if ((P->ops[i].op == BTRFS_IOC_UT_OP_SETXATTR ||
		     P->ops[i].op == BTRFS_IOC_UT_OP_REMOVEXATTR) &&
		    !fx_pop_dead(P, i) && P->pops[i].obj > 0 && P->pops[i].cpath &&
		    attr_locked(d, P->pops[i].cpath))
			return 1;
	if (geteuid() == 0)
		return 0; /* CAP_DAC_OVERRIDE, as a rule */
	strcpy(last, "/");
	for (size_t k = 0; k < nnm; k++) {
		const struct wname *w = &nm[k];
		char buf[PATH_MAX];
		struct stat st;

		if (!w->path || parent_refused(d, nm, nnm, w->path, last))
			return 1;
		if (w->kind == W_MKDIR && /* fsynced at the checkpoint */
		    fx_new_dir_syncable(d, fx_dirname(w->path, buf), w->mode))
			return 1;
		if ((w->kind == W_MOVE || w->kind == W_SWAP) &&
		    parent_refused(d, nm, nnm, w->stage, last))
			return 1;
		if (w->via && parent_refused(d, nm, nnm, w->via, last))
			return 1; /* a rename it took over went there (W24) */
		/* a link to another's file: protected_hardlinks may refuse it */
		if (w->kind == W_LINK && !w->link_of &&
		    (fx_lstat(d, w->stage, &st) < 0 || st.st_uid != geteuid()))
			return 1;
		if (w->kind != W_UNLINK && w->kind != W_MOVE)
			continue;
		if (fx_lstat(d, w->kind == W_MOVE ? w->stage : w->path, &st) < 0 ||
		    (S_ISDIR(st.st_mode) && fx_os.faccessat(d->root, w->kind == W_MOVE ?
							     w->stage : w->path, W_OK)))
			return 1;
	}
	for (size_t k = 0; k < nnm; k++) { /* sticky: the kernel's owner rules */
		struct stat st;
		char dir[PATH_MAX];

		if (nm[k].kind != W_UNLINK && nm[k].kind != W_MOVE && nm[k].kind != W_SWAP)
			continue;
		fx_dirname(nm[k].kind == W_MOVE ? nm[k].stage : nm[k].path, dir);
		if (fx_lstat(d, dir, &st) < 0 || (st.st_mode & S_ISVTX))
			return 1;
		if (nm[k].kind == W_SWAP && (fx_lstat(d, fx_dirname(nm[k].stage, dir), &st) < 0 ||
					     (st.st_mode & S_ISVTX)))
			return 1;
		if (nm[k].via && (fx_lstat(d, fx_dirname(nm[k].via, dir), &st) < 0 ||
				  (st.st_mode & S_ISVTX)))
			return 1;
	}
	for (size_t i = 0; i < P->nops; i++) {
		const __s64 *a = P->ops[i].args;
		uint32_t op = (uint32_t)P->ops[i].op;
		int64_t obj = P->pops[i].obj;
		int x = op == BTRFS_IOC_UT_OP_SETXATTR || op == BTRFS_IOC_UT_OP_REMOVEXATTR;

		if (fx_pop_dead(P, i))
			continue;
		/* an object of the tree it changes: replay opens it to write,
		 * the checkpoint to fsync */
		if (obj > 0 && P->pops[i].cpath &&
		    (x || op == BTRFS_IOC_UT_OP_TRUNCATE ||
		     (op == BTRFS_IOC_UT_OP_OPEN && ((a[1] & O_ACCMODE) != O_RDONLY ||
						     (a[1] & O_TRUNC)))) &&
		    fx_os.faccessat(d->root, P->pops[i].cpath, R_OK | W_OK))
			return 1;
		if (!x)
			continue;
		for (size_t k = 0; obj < 0 && k < nnm; k++) /* new: by its mode */
			if ((nm[k].kind == W_NEWF || nm[k].kind == W_MKDIR) &&
			    P->pops[nm[k].op].obj == obj && !(nm[k].mode & S_IWUSR))
				return 1;
	}
	return 0;
}

/*
 * Make the staged file `name` of the domain (at rel in the staged
 * directory sfd when sfd >= 0).  One there already is garbage of a
 * transaction cut short at this offset (no record is there yet, W6):
 * removed, and made again.  Its fd, and its inode into *ino; or -errno,
 * nothing left behind.
 */
static int stage_open(struct fstx_domain *d, const char *name, int sfd, const char *rel,
		      int fl, mode_t mode, uint64_t *ino)
{
	struct stat st;
	int fd, r;

	fl |= O_CREAT | O_EXCL | O_NOFOLLOW;
	if (sfd >= 0)
		fd = fx_os.openat2(sfd, rel, fl, mode, FX_RESOLVE);
	else
		fd = fx_open(d, name, fl, mode);
	if (fd == -EEXIST && (r = fx_remove(d, name, 0, NULL)) < 0)
		return r;
	if (fd == -EEXIST)
		fd = fx_open(d, name, fl, mode);
	if (fd < 0)
		return fd;
	if ((r = fx_os.fstat(fd, &st)) < 0) {
		fx_os.close(fd);
		fx_remove(d, name, 0, NULL);
		return r;
	}
	*ino = (uint64_t)st.st_ino;
	return fd;
}

/*
 * The staged file of the new file op i opens (W2): .fstx/wnew/NAME, made
 * before the record that names it, so the record knows its inode.
 */
int fx_w_stage_file(struct fstx_domain *d, const struct wname *nm, struct wname *w)
{
	int sfd = w->dir >= 0 ? nm[w->dir].sfd : -1; /* its staged directory's */
	const char *rel = w->dir >= 0 ? w->stage + strlen(nm[w->dir].stage) + 1 : NULL;

	return stage_open(d, w->stage, sfd, rel, O_WRONLY, w->mode, &w->ino);
}

/* W27: a new file left with no name, made unnamed (O_TMPFILE) in
 * .fstx/wnew/: its ops run on it before the barrier, and go with it. */
int fx_w_stage_tmp(struct fstx_domain *d, uint64_t *ino)
{
	struct stat st;
	int fd = fx_open(d, FX_META "/wnew", O_TMPFILE | O_WRONLY, 0600), r;

	if (fd < 0)
		return fd;
	if ((r = fx_os.fstat(fd, &st)) < 0) {
		fx_os.close(fd);
		return r;
	}
	*ino = (uint64_t)st.st_ino;
	return fd;
}

/*
 * The staged symlinks (W2): made before the record, like new files, so
 * that it knows their inodes.  One left there is garbage, as above.
 */
int fx_w_stage_links(struct fstx_domain *d, struct wname *nm, size_t nnm)
{
	for (size_t k = 0; k < nnm; k++) {
		struct wname *w = &nm[k];
		struct stat st;
		const char *n;
		int dfd, r;

		if (w->kind != W_SYMLINK)
			continue;
		if ((dfd = fx_parent(d, w->stage, &n)) < 0)
			return dfd;
		r = fx_os.symlinkat(w->target, dfd, n);
		if (r == -EEXIST && (r = fx_os.unlinkat(dfd, n, 0)) == 0)
			r = fx_os.symlinkat(w->target, dfd, n);
		if (r == 0 && (r = fx_os.fstatat(dfd, n, &st, AT_SYMLINK_NOFOLLOW)) == 0)
			w->ino = (uint64_t)st.st_ino;
		else if (r == 0)
			fx_os.unlinkat(dfd, n, 0);
		fx_os.close(dfd);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Before the commit point: the staged files and directories go again. */
void fx_w_unstage(struct fstx_domain *d, struct wname *nm, size_t nnm)
{
	for (size_t k = 0; k < nnm; k++)
		if (W_IS_STAGED(nm[k].kind) && nm[k].ino) {
			fx_remove(d, nm[k].stage, 0, NULL);
			nm[k].ino = 0;
		}
	for (size_t k = 0; k < nnm; k++)
		if (nm[k].kind == W_MKDIR && nm[k].made) {
			const char *n;
			int dfd = fx_parent(d, nm[k].stage, &n);

			if (dfd >= 0) {
				fx_clean_tree(dfd, n);
				fx_os.close(dfd);
			}
			nm[k].made = 0;
		}
}

/* 1 if p is .fstx or lies in it. */
static int in_meta(const char *p)
{
	return !strcmp(p, FX_META) || fx_under(p, FX_META);
}

/* 1 if removal w is an rmdir's (its staged name ends FX_WNEW_KEEP). */
static int is_rmdir(const struct wname *w)
{
	size_t n = strlen(w->stage), k = strlen(FX_WNEW_KEEP);

	return n > k && !strcmp(w->stage + n - k, FX_WNEW_KEEP);
}

/* 1 if path p is dir or lies in it. */
static int at_or_under(const char *p, const char *dir)
{
	return p && (!strcmp(p, dir) || is_under(p, dir));
}

/*
 * W24: does op i only remove objects of the tree (an unlink or rmdir
 * whose removal is an entry of nm, or a rename that a removal took over,
 * with the old file it replaced, if any)?  Removals name the paths their
 * objects had when the transaction began and go before every other name
 * change, so they do not touch the names a directory's move leaves or
 * takes.  nm NULL: no.
 */
static int removes_only(const struct plan *P, size_t i, const struct wname *nm, size_t nnm)
{
	uint32_t op = (uint32_t)P->ops[i].op;
	int found = 0;

	if (!nm || (op != BTRFS_IOC_UT_OP_UNLINK && op != BTRFS_IOC_UT_OP_RMDIR &&
		    op != FSTX_OP_RENAME))
		return 0;
	for (size_t k = 0; k < nnm; k++) {
		if (nm[k].kind == W_UNLINK && nm[k].mop == i + 1)
			found = 1;
		else if (nm[k].op == i && nm[k].kind != W_UNLINK)
			return 0;
		else if (nm[k].op == i && op != FSTX_OP_RENAME)
			found = 1;
	}
	return found;
}

/* 1 if an op of P other than op skip (or one that only removes, with nm)
 * names a path at or under a or b (W20, W21: the renamed names are the
 * op's alone). */
static int ops_name(const struct plan *P, size_t skip, const char *a, const char *b,
		    const struct wname *nm, size_t nnm)
{
	for (size_t i = 0; i < P->nops; i++) {
		const struct pop *po = &P->pops[i];

		if (i != skip && (at_or_under(po->cpath, a) || at_or_under(po->cpath, b) ||
				  at_or_under(po->cpath2, a) || at_or_under(po->cpath2, b)) &&
		    !removes_only(P, i, nm, nnm))
			return 1;
	}
	return 0;
}

/*
 * W15, W20: do renames o and m of objects of the tree chain, one taking
 * the name the other leaves, in step order (rename b c, then rename a b)?
 * The record applies renames in step order, so the name is free when the
 * second comes.  The name they share, else NULL.
 */
static const char *chained(const struct wname *o, const struct wname *m)
{
	if (o->kind != W_MOVE || m->kind != W_MOVE)
		return NULL;
	if (o->step < m->step && !strcmp(o->stage, m->path))
		return m->path; /* o left it first */
	if (o->step > m->step && !strcmp(o->path, m->stage))
		return m->stage; /* o takes it after */
	return NULL;
}

/* W20: does op i make a new object (open O_CREAT of an absent name, mkdir,
 * symlink), or change only the data or xattrs of one?  Its name entry
 * says where (made_after()). */
static int makes_new(const struct plan *P, size_t i)
{
	uint32_t op = (uint32_t)P->ops[i].op;
	const struct pop *po = &P->pops[i];

	if (fx_pop_dead(P, i) || po->cpath2)
		return 0;
	if (op == BTRFS_IOC_UT_OP_MKDIR || op == FSTX_OP_SYMLINK ||
	    (op == BTRFS_IOC_UT_OP_OPEN && po->create))
		return 1;
	return po->obj < 0 && (op == BTRFS_IOC_UT_OP_OPEN || op == BTRFS_IOC_UT_OP_TRUNCATE ||
			       op == BTRFS_IOC_UT_OP_SETXATTR ||
			       op == BTRFS_IOC_UT_OP_REMOVEXATTR);
}

/*
 * W20: does an op other than skip name a path at or under a or b, other
 * than an op on the data, size or xattrs of an object of the tree
 * strictly under one of them (open without making, O_TRUNC, truncate,
 * setxattr, removexattr; their entries name it under the new name,
 * fx_w_final_paths()) or an op that only removes (W24)?
 */
static int ops_name_dir(const struct plan *P, size_t skip, const char *a, const char *b,
			const struct wname *nm, size_t nnm, const char *const ch[2],
			const size_t chop[2])
{
	for (size_t i = 0; i < P->nops; i++) {
		const struct pop *po = &P->pops[i];
		uint32_t op = (uint32_t)P->ops[i].op;
		int data = (op == BTRFS_IOC_UT_OP_OPEN && !po->create) ||
			   op == BTRFS_IOC_UT_OP_TRUNCATE || op == BTRFS_IOC_UT_OP_SETXATTR ||
			   op == BTRFS_IOC_UT_OP_REMOVEXATTR;

		if (i == skip || i == chop[0] || i == chop[1] ||
		    !(at_or_under(po->cpath, a) || at_or_under(po->cpath, b) ||
		      at_or_under(po->cpath2, a) || at_or_under(po->cpath2, b)) ||
		    removes_only(P, i, nm, nnm) || (i > skip && makes_new(P, i)))
			continue;
		/* under a name two renames share, a path names two objects
		 * (fx_w_final_paths() knows one) */
		if (!data || fx_pop_dead(P, i) || !po->obj || po->obj < 0 || !po->cpath ||
		    po->cpath2 || !strcmp(po->cpath, a) || !strcmp(po->cpath, b) ||
		    (ch[0] && at_or_under(po->cpath, ch[0])) ||
		    (ch[1] && at_or_under(po->cpath, ch[1])))
			return 1;
	}
	return 0;
}

/*
 * W20: is o a new file, symlink or directory made after move m (its
 * entry follows the move's in the record: names_late())?
 */
static int made_after(const struct wname *o, const struct wname *m)
{
	return m->kind == W_MOVE && o->step > m->step &&
	       (o->kind == W_NEWF || o->kind == W_SYMLINK || (o->kind == W_MKDIR && o->late));
}

/*
 * W20: a directory of the tree is renamed alone: no other name entry but
 * a removal (W24: at the path the tree had, before any move) names a path
 * at or under its old or its new name, nor does any other op but those
 * on the data of its files and removals (ops_name_dir(); the record knows
 * every object by the path it has when the transaction ends, and replay
 * moves the directory first).
 */
static int dir_move_declined(const struct plan *P, const struct wname *nm, size_t nnm,
			     size_t k)
{
	const struct wname *m = &nm[k];
	const char *ch[2] = { NULL, NULL };
	size_t chop[2] = { SIZE_MAX, SIZE_MAX };

	for (size_t j = 0; j < nnm; j++) {
		const struct wname *o = &nm[j];
		const char *c;

		if (j == k || o->kind == W_UNLINK) /* removals go first (W24) */
			continue;
		if ((c = chained(o, m))) { /* W20: the other's name, in turn */
			int at = c == m->stage;

			/* not into what the other then moves (rename d e/x,
			 * rename e d): replay would look for it at a path the
			 * other's move took away, and find another object at
			 * the name they share */
			if (ch[at] || is_under(m->path, o->stage) || is_under(o->path, m->stage))
				return 1;
			ch[at] = c;
			chop[at] = o->op;
			continue;
		}
		if (made_after(o, m))
			continue;
		if (at_or_under(o->path, m->path) || at_or_under(o->path, m->stage) ||
		    ((W_FROM_TREE(o->kind) || o->kind == W_SWAP) &&
		     (at_or_under(o->stage, m->path) || at_or_under(o->stage, m->stage))))
			return 1;
	}
	if (m->kind == W_SWAP) /* W21: entries know no swapped paths */
		return ops_name(P, m->op, m->path, m->stage, nm, nnm);
	return ops_name_dir(P, m->op, m->path, m->stage, nm, nnm, ch, chop);
}

/* 1 if p and q lie in one directory. */
static int same_dir(const char *p, const char *q)
{
	const char *a = strrchr(p, '/'), *b = strrchr(q, '/');

	return (!a && !b) || (a && b && a - p == b - q && !strncmp(p, q, (size_t)(a - p)));
}

/* 1 if st is of a file or a symlink. */
static int is_file(const struct stat *st)
{
	return S_ISREG(st->st_mode) || S_ISLNK(st->st_mode);
}

/*
 * W21: an exchange the log takes is of two files or symlinks of the tree
 * (in one directory or two: one rename(2), whatever persists), that no
 * other name entry or op of the transaction names by inode or by either
 * name; or of two directories of the tree in one directory, alone as
 * W20's rename is (no other name entry or op at or under either name;
 * moves_first() checkpoints first, as for any directory's move).
 */
static int swap_declined(struct fstx_domain *d, const struct plan *P, const struct wname *nm,
			 size_t nnm, size_t k)
{
	const struct wname *m = &nm[k];
	struct stat a, b;

	if (strlen(m->stage) > W_NAME_MAX || in_meta(m->path) || in_meta(m->stage) ||
	    fx_lstat(d, m->path, &a) < 0 ||
	    fx_lstat(d, m->stage, &b) < 0 || (uint64_t)a.st_ino != m->ino ||
	    (uint64_t)b.st_ino != m->ino2)
		return 1;
	if (S_ISDIR(a.st_mode) && S_ISDIR(b.st_mode)) /* their ".." stays */
		return !same_dir(m->path, m->stage) || dir_move_declined(P, nm, nnm, k);
	if (!is_file(&a) || !is_file(&b))
		return 1; /* a file with a directory: the undo way */
	for (size_t j = 0; j < nnm; j++) {
		const struct wname *o = &nm[j];

		if (j != k && (o->ino == m->ino || o->ino == m->ino2 ||
			       (o->path && (!strcmp(o->path, m->path) || !strcmp(o->path, m->stage))) ||
			       ((W_FROM_TREE(o->kind) || o->kind == W_SWAP) &&
				(!strcmp(o->stage, m->path) || !strcmp(o->stage, m->stage)))))
			return 1;
	}
	return ops_name(P, m->op, m->path, m->stage, NULL, 0);
}

/* W21: does the transaction also remove an object that exchange m swaps? */
static int swaps_removed(const struct wname *nm, size_t nnm, const struct wname *m)
{
	for (size_t j = 0; j < nnm; j++)
		if (nm[j].kind == W_UNLINK && (nm[j].ino == m->ino || nm[j].ino == m->ino2))
			return 1;
	return 0;
}

/*
 * W25: may rmdir m, which renames empty, go after every other entry, at
 * the path its directory had when the transaction began?  Not when it
 * took over a rename (via), when an entry but a removal makes a name at
 * or under that path, or an exchange or the move of a directory is in
 * the record (its path would not be that one then).
 */
static int late_declined(const struct wname *nm, size_t nnm, const struct wname *m)
{
	if (m->via)
		return 1;
	for (size_t j = 0; j < nnm; j++) {
		const struct wname *o = &nm[j];

		if (o->kind == W_UNLINK)
			continue;
		if (o->kind == W_SWAP || (o->kind == W_MOVE && S_ISDIR(o->mode)) ||
		    at_or_under(o->path, m->path))
			return 1;
	}
	return 0;
}

/*
 * W24: may removal nm[k] go first, at the path its object had when the
 * transaction began?  Not an rmdir's, when a link of the record takes an
 * object from under that path (it would still be there), or one of
 * unknown first path; a rename that does goes first, and the rmdir last
 * (W25, late_declined()).  Nor a removal that took over
 * a rename (via), when another entry but a removal names a path at or
 * under the name that rename gave (the record knows no such name).
 */
static int removal_declined(const struct wname *nm, size_t nnm, size_t k)
{
	const struct wname *m = &nm[k];

	for (size_t j = 0; j < nnm; j++) {
		const struct wname *o = &nm[j];
		const char *from = o->from0 ? o->from0 : o->stage;

		if (j == k || o->kind == W_UNLINK)
			continue;
		if (is_rmdir(m) && W_FROM_TREE(o->kind) && !o->link_of &&
		    ((at_or_under(from, m->path) && !m->late) || in_meta(from)))
			return 1;
		if (m->via && o->op + 1 != m->mop && /* not an exchange's other */
		    (at_or_under(o->path, m->via) ||
		     ((W_FROM_TREE(o->kind) || o->kind == W_SWAP) &&
		      at_or_under(o->stage, m->via))))
			return 1;
	}
	return 0;
}

/*
 * W15, W16, W20: the renames and links the log takes are of a file or
 * symlink of the tree (or links of a new file, from its first name of at
 * most W_NAME_MAX bytes), or renames of a directory of the tree (W20), each
 * object renamed or linked once and not removed by the same transaction,
 * from a path of at most W_NAME_MAX bytes (the entry's name), to a name
 * that no other rename or link leaves or uses, unless a rename left it
 * earlier in step order (chained()), from a name no new directory takes;
 * removals as W24 lets them (removal_declined()).  A directory's entry
 * says so in its mode (S_IFDIR).
 */
int fx_w_move_declined(struct fstx_domain *d, const struct plan *P, struct wname *nm,
		       size_t nnm)
{
	for (size_t k = 0; k < nnm; k++) {
		struct wname *m = &nm[k];
		struct stat st;

		if (m->kind == W_SWAP) {
			if (swap_declined(d, P, nm, nnm, k) || swaps_removed(nm, nnm, m))
				return 1;
			continue;
		}
		if (m->kind == W_UNLINK && removal_declined(nm, nnm, k))
			return 1;
		if (!W_FROM_TREE(m->kind))
			continue;
		if (m->link_of) { /* of a new file: its first name, made after */
			if (strlen(m->stage) > W_NAME_MAX || in_meta(m->path) ||
			    in_meta(m->stage))
				return 1;
			continue;
		}
		if (strlen(m->stage) > W_NAME_MAX || in_meta(m->path) || in_meta(m->stage) ||
		    fx_lstat(d, m->stage, &st) < 0 || (uint64_t)st.st_ino != m->ino)
			return 1;
		if (S_ISDIR(st.st_mode)) {
			if (m->kind != W_MOVE || dir_move_declined(P, nm, nnm, k))
				return 1;
			m->mode = S_IFDIR;
		} else if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
			return 1;
		}
		for (size_t j = 0; j < nnm; j++) {
			const struct wname *o = &nm[j];

			if (j == k)
				continue;
			if ((W_FROM_TREE(o->kind) || o->kind == W_UNLINK || o->kind == W_SWAP) &&
			    (o->ino == m->ino || (o->kind == W_SWAP && o->ino2 == m->ino)))
				return 1;
			if (W_FROM_TREE(o->kind) && !strcmp(o->stage, m->path) &&
			    !chained(o, m))
				return 1;
			if (o->kind == W_MKDIR && o->path && !strcmp(o->path, m->stage) &&
			    !(S_ISDIR(st.st_mode) && made_after(o, m)))
				return 1;
		}
	}
	for (size_t k = 0; k < nnm; k++) /* W25: with every mode known */
		if (nm[k].kind == W_UNLINK && nm[k].late && late_declined(nm, nnm, &nm[k]))
			return 1;
	return 0;
}

const char *fx_w_now_at(const struct wname *nm, size_t nnm, const char *path,
			size_t step, char buf[PATH_MAX])
{
	for (size_t k = 0; k < nnm; k++) {
		size_t l = strlen(nm[k].path);

		if (!W_FROM_TREE(nm[k].kind) || nm[k].step >= step)
			continue;
		if (!strcmp(nm[k].path, path))
			return nm[k].stage;
		/* under a directory renamed before it (W20) */
		if (nm[k].kind == W_MOVE && !strncmp(path, nm[k].path, l) && path[l] == '/') {
			size_t a = strlen(nm[k].stage), b = strlen(path + l);

			if (a + b >= PATH_MAX)
				return path; /* no entry takes it: declined later */
			memcpy(buf, nm[k].stage, a);
			memcpy(buf + a, path + l, b + 1);
			return buf;
		}
	}
	return path;
}

/*
 * The path each op's entry names its file by (fpath[i], NULL: the op's
 * own): a new file's first kept name; a renamed file's new name (W15); a
 * file under a directory of the tree that the transaction renames, named
 * under its old name, under the new one (W20: allocated into own[i]).
 * 0, 1 if such a path would reach PATH_MAX (the undo way), -ENOMEM.
 */
const char fx_w_nowhere[] = "";

int fx_w_final_paths(const struct plan *P, const int *tgt, const uint64_t *ino,
		     const struct wname *nm, size_t nnm, const char **fpath, char **own)
{
	for (size_t k = 0; k < nnm; k++)
		if (nm[k].kind == W_NEWF)
			fpath[nm[k].op] = nm[k].path;
	for (size_t i = 0; i < P->nops; i++) /* W27: no name, no entry */
		if (P->pops[i].create && !fpath[i])
			fpath[i] = fx_w_nowhere;
	for (size_t i = 0; i < P->nops; i++) {
		uint32_t op = (uint32_t)P->ops[i].op;
		const char *p;

		if (P->pops[tgt[i]].create) {
			fpath[i] = fpath[tgt[i]];
			continue;
		}
		if ((fpath[i] = fx_w_moved_to(nm, nnm, ino[tgt[i]])))
			continue;
		p = P->pops[op == BTRFS_IOC_UT_OP_PWRITE || op == BTRFS_IOC_UT_OP_CLONERANGE ?
			    (size_t)tgt[i] : i].cpath;
		for (size_t k = 0; p && k < nnm; k++) {
			size_t l = strlen(nm[k].stage);

			if (nm[k].kind != W_MOVE || nm[k].mode != S_IFDIR ||
			    strncmp(p, nm[k].stage, l) || p[l] != '/')
				continue;
			if (strlen(nm[k].path) + strlen(p + l) >= PATH_MAX)
				return 1;
			if (asprintf(&own[i], "%s%s", nm[k].path, p + l) < 0) {
				own[i] = NULL;
				return -ENOMEM;
			}
			fpath[i] = own[i];
			break;
		}
	}
	return 0;
}

const char *fx_w_moved_to(const struct wname *nm, size_t nnm, uint64_t ino)
{
	for (size_t k = 0; ino && k < nnm; k++)
		if (nm[k].kind == W_MOVE && nm[k].ino == ino)
			return nm[k].path;
	return NULL;
}

struct wname *fx_w_name_of_op(struct wname *nm, size_t nnm, size_t op)
{
	for (size_t k = 0; k < nnm; k++)
		if (nm[k].op == op && nm[k].kind == W_NEWF)
			return &nm[k];
	return NULL;
}

/* ---- W13: large overwrites, staged ------------------------------------ */

/* The staged file of op i (W13): cl->name made, cl->fd open. */
static int stage_write(struct fstx_domain *d, size_t i, struct wclone *cl)
{
	snprintf(cl->name, sizeof(cl->name), W_WNEW "%016llx-%llx-c%zu",
		 (unsigned long long)d->wal_salt, (unsigned long long)d->wal_end, i);
	cl->fd = stage_open(d, cl->name, -1, NULL, O_RDWR, 0600, &cl->spec[1]);
	if (cl->fd < 0)
		return cl->fd;
	cl->own = 1;
	return 0;
}

/* The open op before op i that opened slot (its last; SIZE_MAX none). */
static size_t open_of(const struct plan *P, size_t i, int64_t slot)
{
	while (i--)
		if (P->ops[i].op == BTRFS_IOC_UT_OP_OPEN && P->ops[i].args[3] == slot)
			return i;
	return SIZE_MAX;
}

int fx_w_clone_source(const struct plan *P, size_t i)
{
	int64_t slot = P->ops[i].args[3];

	for (size_t j = i + 1; j < P->nops; j++) {
		const struct btrfs_ioctl_usertrans_op *op = &P->ops[j];

		if ((op->op == BTRFS_IOC_UT_OP_OPEN && op->args[3] == slot) ||
		    (op->op == BTRFS_IOC_UT_OP_CLOSE && op->args[0] == slot))
			return 0;
		if (op->op == BTRFS_IOC_UT_OP_CLONERANGE && op->args[1] == slot)
			return 1;
	}
	return 0;
}

/*
 * Op i's data into its staged file cl[i] at its own offset: a pwrite's
 * bytes, or (W19) the source range of a clone, as much of it as the
 * source holds (the op's result: fx_clone_copy() stops at its end).
 */
static int stage_data(const struct plan *P, size_t i, const int *fds, struct wclone *c)
{
	const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];
	uint64_t len = (uint64_t)op->args[2], soff;
	size_t k;
	struct stat st;
	int r;

	if (op->op == BTRFS_IOC_UT_OP_CLONERANGE) {
		soff = (uint64_t)op->args[2];
		if ((k = open_of(P, i, op->args[1])) == SIZE_MAX || fds[k] < 0)
			return -ESTALE;
		if ((r = fx_os.fstat(fds[k], &st)) < 0)
			return r;
		len = (uint64_t)st.st_size > soff ? (uint64_t)st.st_size - soff : 0;
		if (len > (uint64_t)op->args[3])
			len = (uint64_t)op->args[3];
		r = len ? (int)fx_clone_copy(c->fd, fds[k], soff, len, (uint64_t)op->args[4]) : 0;
	} else {
		r = fx_w_write_all(c->fd, ARGP(op, 1), (size_t)len, (uint64_t)op->args[3]);
	}
	c->spec[0] = len;
	return r < 0 ? r : fx_os.writeback(c->fd);
}

int fx_w_stage_writes(struct fstx_domain *d, const struct plan *P,
		      const int *tgt, const int *fds, uint64_t flags, struct wclone *cl)
{
	size_t n = 0;
	int r = 0, dfd;

	for (size_t i = 0; i < P->nops && r == 0; i++) {
		const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];
		size_t j;

		if (fx_pop_dead(P, i) || (op->op != BTRFS_IOC_UT_OP_CLONERANGE &&
		    (op->op != BTRFS_IOC_UT_OP_PWRITE ||
		     !fx_wal_stages(d, flags, (uint64_t)op->args[2], P->pops[tgt[i]].create))))
			continue;
		/*
		 * The pwrites through one open share a staged file: each
		 * clone entry, applied in op order, copies its range of the
		 * final bytes, and whatever comes after it in the record
		 * writes its own range again, so the result is the ops'.
		 */
		for (j = 0; j < i; j++)
			if (cl[j].fd >= 0 && tgt[j] == tgt[i])
				break;
		if (j < i) {
			cl[i] = cl[j];
			cl[i].own = 0;
		} else if ((r = stage_write(d, i, &cl[i])) < 0) {
			break;
		} else {
			n++;
		}
		r = stage_data(P, i, fds, &cl[i]);
	}
	/* their data, then their names: durable before the record (W13);
	 * the write-out of each began as it was written */
	for (size_t i = 0; i < P->nops && r == 0; i++)
		if (cl[i].fd >= 0 && cl[i].own)
			r = fx_os.fdatasync(cl[i].fd);
	if (r == 0 && n) {
		if ((dfd = fx_open(d, W_WNEW, O_RDONLY | O_DIRECTORY, 0)) < 0)
			return dfd;
		r = fx_os.fsync(dfd);
		fx_os.close(dfd);
	}
	return r < 0 ? r : (int)n;
}

void fx_w_drop_writes(struct fstx_domain *d, struct wclone *cl, size_t n,
		      int unstage)
{
	for (size_t i = 0; i < n; i++) {
		if (cl[i].fd < 0 || !cl[i].own)
			continue;
		fx_os.close(cl[i].fd);
		cl[i].fd = -1;
		if (unstage)
			fx_remove(d, cl[i].name, 0, NULL);
	}
}

/* ---- W22: large new files, written whole before the record ----------- */

/* May op (whose object is a new file) leave that file whole-able (W22)? */
static int whole_kind(const struct plan *P, size_t i)
{
	switch (P->ops[i].op) {
	case BTRFS_IOC_UT_OP_OPEN:
		return P->pops[i].create; /* the one that makes it, no other */
	case BTRFS_IOC_UT_OP_PWRITE:
	case BTRFS_IOC_UT_OP_TRUNCATE:
	case BTRFS_IOC_UT_OP_SETXATTR:
	case BTRFS_IOC_UT_OP_REMOVEXATTR:
	case BTRFS_IOC_UT_OP_CLOSE:
	case FSTX_OP_RENAME: /* names: entries of their own */
	case BTRFS_IOC_UT_OP_LINK:
		return 1;
	default:
		return 0;
	}
}

uint64_t fx_wal_logged(struct fstx_domain *d, const struct plan *P, uint64_t flags,
		       uint8_t *whole)
{
	uint64_t logged = 0, *nb = NULL;
	uint8_t *bad = NULL;
	size_t nn = (size_t)P->newid + 1, i;

	for (i = 0; i < P->nops; i++) {
		const __s64 *a = P->ops[i].args;

		if (P->ops[i].op == BTRFS_IOC_UT_OP_PWRITE && !fx_pop_dead(P, i) &&
		    !fx_wal_stages(d, flags, (uint64_t)a[2], P->pops[i].obj < 0))
			logged += (uint64_t)a[2]; /* else staged: W13 */
	}
	if (logged <= fx_wal_large || (flags & (FSTX_UT_NOSYNC | FSTX_UT_LAZY)))
		return logged;
	if (!(nb = fx_calloc(nn, sizeof(*nb))) || !(bad = fx_calloc(nn, 1))) {
		logged = UINT64_MAX; /* the undo way meets the same shortage */
		goto out;
	}
	for (i = 0; i < P->nops; i++) {
		int64_t obj = P->pops[i].obj;

		if (obj >= 0 || (uint64_t)-obj >= nn || fx_pop_dead(P, i))
			continue;
		if (!whole_kind(P, i))
			bad[-obj] = 1;
		else if (P->ops[i].op == BTRFS_IOC_UT_OP_PWRITE)
			nb[-obj] += (uint64_t)P->ops[i].args[2];
	}
	for (i = 0; i < P->nops; i++) {
		int64_t obj = P->pops[i].obj;

		if (obj >= 0 || (uint64_t)-obj >= nn || bad[-obj] || nb[-obj] < fx_wal_stage_min ||
		    fx_pop_dead(P, i))
			continue;
		if (P->ops[i].op == BTRFS_IOC_UT_OP_PWRITE)
			logged -= (uint64_t)P->ops[i].args[2];
		if (whole)
			whole[i] = 1;
	}
out:
	free(nb);
	free(bad);
	return logged;
}
