/* SPDX-License-Identifier: MIT */
/* plan.h - the planner's view of a transaction (plan.c), used by trans.c. */
#ifndef FSTX_PLAN_H
#define FSTX_PLAN_H

#include "internal.h"
#include "fstx/btrfs_usertrans.h"

#include <limits.h>

enum { N_ABSENT = 0, N_INIT, N_NEW };
enum { K_NONE = 0, K_FILE, K_DIR, K_LINK, K_OTHER };

/* What a path names at some point of the transaction. */
struct node {
	int state;       /* N_ABSENT, N_INIT (from the initial tree), N_NEW */
	int kind;        /* K_* */
	int newid;       /* N_NEW: identity of the created object */
	char *ipath;     /* N_INIT: path in the initial tree */
	uint64_t ino;    /* N_INIT */
	uint64_t dev;    /* N_INIT: st_dev */
	uint64_t size;   /* N_INIT files */
	uint64_t nlink;  /* N_INIT: names of the inode (st_nlink) */
	char *target;    /* K_LINK */
	uint32_t mode;   /* N_NEW: the mode asked for */
};

struct ent { char *path; struct node n; };

/* A remembered lookup in the initial tree (plan.c real_lookup). */
struct memo { char *ip; struct node n; };
#define PLAN_MEMO 256     /* at most; fewer for small transactions */

/* Per op: what the executor does. */
struct pop {
	int pred;          /* <0: predicted result, nothing is executed */
	char *cpath;       /* canonical first path */
	char *cpath2;      /* canonical second path (link, rename) */
	size_t step0, nsteps;
	int create;        /* open: staged creation (steps: MKFILE, MOVE) */
	int check_ino;     /* open: the file must have inode ino */
	uint64_t dev;      /* check_ino: and be on device dev */
	uint64_t ino;
	int64_t obj;       /* the object whose data the op may change: its
			      inode (initial objects) or -newid (new ones) */
	int append;        /* pwrite: the slot was opened O_APPEND */
};

struct pslot { int live, kind, cap, append; int64_t obj; };

struct plan {
	struct fstx_domain *d;
	const struct btrfs_ioctl_usertrans_op *ops;
	size_t nops;
	size_t nfds;       /* fd slots the ops use (validated); 0: FSTX_MAX_FDS */
	struct ent *ents;
	size_t nents, cents;
	size_t *hidx;      /* open-addressing index of ents by path: i + 1, 0 free */
	size_t hcap;       /* a power of two, at least 2 * nents; 0: none yet */
	struct fx_step *steps;
	size_t nsteps, csteps;
	struct fx_capture *caps;
	size_t ncaps, ccaps;
	struct pop *pops;
	struct pslot *slots;
	int newid;
	uint64_t est_bytes, est_inodes;
	long failed_op;    /* planning stopped here on an I/O error */
	struct memo *memo; /* nmemo entries, or NULL */
	size_t nmemo;      /* a power of two, at most PLAN_MEMO */
	uint64_t lk_ino, lk_dev; /* the object flags_refuse() last looked at, */
	int lk_attr;       /* ... its immutable and append-only flags */
};

int fx_plan_build(struct plan *P);
/* Op i is predicted to fail (its result pops[i].pred): nothing of it is
 * executed, by the undo way or the log. */
static inline int fx_pop_dead(const struct plan *P, size_t i)
{
	return P->pops[i].pred < 0;
}
/* After fx_plan_build: what path names once every op has run (symlinks
 * followed as the kernel would); *cpath gets its canonical path. */
int fx_plan_lookup(struct plan *P, const char *path, struct node *n,
		   char **cpath);
void fx_node_free(struct node *n);
void fx_plan_free(struct plan *P);

/*
 * The parent of the name step k's new object gets first (the MOVE after
 * it out of .fstx/new/), into buf; NULL if it gets none.
 */
const char *fx_new_parent(const struct plan *P, size_t k, char buf[PATH_MAX]);
/*
 * The group a setgid directory passes on to step k's new object, made in
 * fx_new_parent(): of the tree, where the steps before it had put that
 * directory, or of a new directory made before it (gids[], per new
 * object's newid, filled in step order; -1 none).  The undo way
 * (trans.c) and the log (wal_stage.c) alike.
 */
long fx_new_group(struct fstx_domain *d, const struct plan *P, size_t k, const long *gids);
/*
 * The group a setgid directory of the tree passes on at path par once
 * steps 0..k-1 ran (looked up where it was before they moved it); -1 none.
 */
long fx_tree_group(struct fstx_domain *d, const struct plan *P, size_t k, const char *par);
/*
 * Directory par, as steps 0..k-1 left it, by the path it had before they
 * moved it (in the initial tree, or .fstx/new/ for a new one); into buf.
 */
const char *fx_dir_before(const struct plan *P, size_t k, const char *par, char buf[PATH_MAX]);

#endif
