/* SPDX-License-Identifier: MIT */
/*
 * wal_int.h - what the files of the write-ahead log share.  Included only
 * by src/wal*.c: the rest of the library goes through wal.h alone.  The
 * rules W1-W16 are at the top of wal.c; each file names those it keeps.
 *
 *   wal.c        the rules; commit (W1, W3, W7, W10), conflicts (W4),
 *                checkpoint (W6, W11), recovery (W5), the fx_wal_* calls
 *   wal_rec.c    the log's format (W2): file header, records, entries,
 *                CRC; reading, checking, replaying and writing records
 *   wal_apply.c  changes in place (W4): a transaction's ops, the help
 *                pass, APPLIED
 *   wal_note.c   the notes of .fstx/walsync: the hint and the state words
 *                (W2, W4, W5, W8, W9, W11, W12)
 *   wal_group.c  group commit (W3): one barrier for many writers
 *   wal_stage.c  the names a record makes, staged before it (W1, W2)
 *   wal_debt.c   what a checkpoint without barriers leaves unsynced (W11)
 */
#ifndef FSTX_WAL_INT_H
#define FSTX_WAL_INT_H

#include "plan.h"
#include "wal.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>

#define W_REC_MAGIC 0x31575846u /* "FXW1" little-endian */
#define W_START 1024            /* the first record (W2) */
#define W_CHUNK (1u << 20)      /* records read whole up to this */
#define W_REWRITE (64u << 10)   /* a failed barrier's range rewritten in these */
#define W_NAME_MAX 255

/* .fstx/walsync: page-cache notes of this boot, never synced (W2) */
#define S_GROUP 0      /* group commit: (salt, end) durable, the barrier */
#define S_HINT 64      /* the hint */
#define S_STATE 4096   /* state words: 16 bytes per 32 bytes of log */

#define ARGP(op, i) ((const char *)(intptr_t)(op)->args[i])

/* Entry kinds (byte layout: wal_rec.c).  The name entries of a record
 * (W_MKDIR, W_NEWF, W_UNLINK, W_SYMLINK) come before its other entries. */
enum { W_PWRITE = 1, W_TRUNC = 2, W_SETX = 3, W_MKDIR = 4, W_NEWF = 5,
       W_UNLINK = 6, W_SYMLINK = 7, W_CLONE = 8, W_RMX = 9, W_MOVE = 10,
       W_LINK = 11, W_SWAP = 12 };
#define W_IS_NAME(k) (((k) >= W_MKDIR && (k) <= W_SYMLINK) || (k) == W_MOVE || \
		      (k) == W_LINK || (k) == W_SWAP)
/* A name entry whose name field is the path of an object of the tree */
#define W_FROM_TREE(k) ((k) == W_MOVE || (k) == W_LINK)
/* A new object staged in .fstx/wnew/ before its record (W2) */
#define W_IS_STAGED(k) ((k) == W_NEWF || (k) == W_SYMLINK)
#define W_WNEW FX_META "/wnew/" /* staging of new files (W2) */

/*
 * W6: the objects an entry names, which a checkpoint makes durable (wal.c
 * wal_sync_named()) or lists when it has no barriers (wal_debt.c, W11).
 * One answer for both, so the two cannot drift apart.
 *   W_OBJ_FILE    the object at the entry's path (a data entry's file, a
 *                 new or renamed directory; inode-checked where the entry
 *                 names one)
 *   W_OBJ_PARENT  the directory holding the entry's path (a name made or
 *                 removed there)
 *   W_OBJ_WNEW    .fstx/wnew/: a name moved to or from it (a rename
 *                 between two directories is durable once both are)
 *   W_OBJ_SRC     the directory holding the entry's name, the path an
 *                 object moved from (W_MOVE)
 */
enum { W_OBJ_FILE = 1, W_OBJ_PARENT = 2, W_OBJ_WNEW = 4, W_OBJ_SRC = 8 };
static inline unsigned w_objects(uint32_t kind, uint32_t nlen, uint64_t a)
{
	if (!W_IS_NAME(kind))
		return W_OBJ_FILE;
	if (kind == W_MOVE) /* a directory too: its ".." changes (W20) */
		return W_OBJ_PARENT | W_OBJ_SRC | (a == S_IFDIR ? W_OBJ_FILE : 0);
	if (kind == W_LINK) /* a name in one directory */
		return W_OBJ_PARENT;
	if (kind == W_SWAP) /* names in one directory or two (W21) */
		return W_OBJ_PARENT | W_OBJ_SRC;
	return W_OBJ_PARENT | (kind == W_MKDIR ? W_OBJ_FILE : 0) |
	       (nlen ? W_OBJ_WNEW : 0);
}

/* A record's header (wal_rec.c). */
struct wrec {
	uint32_t magic, nent;
	uint64_t len, salt;
	uint32_t crc;
	uint32_t state; /* W3, W4; not covered by the CRC */
};

enum { WS_PENDING = 0, WS_APPLIED = 1, WS_CANCELLED = 2, WS_APPLYING = 3,
       WS_LAZY = 4 };
#define WS_OPEN(s) ((s) == WS_PENDING || (s) == WS_APPLYING || (s) == WS_LAZY)

/* An entry's header (wal_rec.c). */
struct went {
	uint32_t kind, plen;
	uint64_t ino, a, b;
	uint32_t nlen, rsv;
};

_Static_assert(sizeof(struct wrec) == 32, "wal record header");
_Static_assert(sizeof(struct went) == 40, "wal entry header");

/* Is what a path the log names gave (-errno) "nothing there"?  ENOTDIR
 * and ELOOP too: a component is now a file or a symlink (no path of the
 * domain follows one), made at the name of a directory removed since. */
static inline int w_gone(int r)
{
	return r == -ENOENT || r == -ENOTDIR || r == -ELOOP;
}

/* W5: is an entry of this kind moot when a later record removes its
 * inode?  Not a removal or a rename (the removal would find the object
 * elsewhere), nor a directory made in place (known by its name only;
 * a staged one names its inode, W24). */
static inline int w_moot_if_gone(uint32_t kind, uint64_t ino)
{
	return kind != W_UNLINK && (kind != W_MKDIR || ino) && kind != W_MOVE &&
	       kind != W_SWAP;
}

static inline uint64_t pad8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

/* The record after the one at off. */
static inline uint64_t rec_next(uint64_t off, const struct wrec *h)
{
	return off + sizeof(*h) + pad8(h->len);
}

struct fx_syncset;

/* A name entry of the record being written (wal.c names_of()). */
struct wname {
	uint32_t kind, mode;    /* W_MKDIR, W_NEWF, W_UNLINK, W_SYMLINK,
				 * W_MOVE, W_LINK; the mode asked for */
	const char *target;     /* W_SYMLINK: its target */
	const char *path;       /* the new name (the name removed), canonical */
	char *pown;             /* path, when allocated (W18) */
	char *stage;            /* W_NEWF, W_SYMLINK: the staged object,
				 * W_UNLINK: where the removed object waits
				 * for the checkpoint, W_MOVE: the path it
				 * moves from, W_LINK: the path it links,
				 * W_MKDIR: the staged
				 * directory or "": W_WNEW...; sbuf, or
				 * allocated (wal.c free_stages()) */
	char sbuf[72];
	long dir;               /* W_NEWF, W_SYMLINK: made in the staged
				 * directory of entry dir, else -1 */
	size_t step;            /* the plan's step that makes it */
	int keeps;              /* W_UNLINK: the object keeps a name (W17):
				 * unlinked, not kept in .fstx/wnew/ */
	int made;               /* W_MKDIR: its staged directory is made, */
	int sfd;                /* ... and open here (O_PATH), else -1 */
	uint64_t ino;           /* W_NEWF, W_SYMLINK: its inode; W_UNLINK: the
				 * one removed; W_MOVE: the one moved; W_SWAP:
				 * the one at path before, at stage after */
	uint64_t ino2;          /* W_SWAP: the one at stage before, at path after */
	size_t op;              /* the op that creates it */
	size_t link_of;         /* W_LINK of a new file (W16): 1 + the index
				 * of its W_NEWF entry, else 0 */
	long ggid;              /* W_MKDIR, W_NEWF, W_SYMLINK: the group its
				 * setgid parent passes on, else -1 */
	char *from0;            /* W_MOVE, W_LINK of an object of the tree:
				 * the path it had when the transaction
				 * began, where that is not stage (W24) */
	const char *via;        /* W_UNLINK: the name a rename of the same
				 * transaction gave it before (W24), else NULL */
	size_t mop;             /* W_UNLINK with via: 1 + that rename's op */
	int late;               /* W_UNLINK of an rmdir: after every other
				 * entry, as renames empty it (W25); W_MKDIR
				 * at or under a name a rename left or gave:
				 * right after the renames (W20) */
};

/* A pwrite staged in a file of its own (W13), per op: fd -1 if not. */
struct wclone {
	int fd;                 /* the staged file, open */
	int own;                /* 0: another op's staged file (the same open) */
	char name[72];          /* W_WNEW "SALT-OFFSET-cOP" */
	uint64_t spec[2];       /* the entry's data: length, staged inode */
	int whole;              /* W22: op on a new file made whole before
				 * the record: no entry, not applied after */
};
#define W_CLONE_SPEC 16         /* bytes of a clone entry's data */

/* One entry of a record read from the log (fx_w_rec_walk()). */
struct wvisit {
	int (*fn)(struct fstx_domain *d, const struct went *e, const char *path,
		  const char *name, uint64_t data, struct wvisit *v);
	int fd;                   /* the open file of path cur */
	char cur[PATH_MAX];
	unsigned char *buf;       /* W_CHUNK bytes */
	struct fx_syncset *ss;    /* wal.c wal_sync_named() */
	uint64_t off;             /* the record's offset (fx_w_rec_walk()) */
	void *arg;                /* the visitor's own (wal_debt.c) */
};

/* ---- wal_rec.c: the format ------------------------------------------- */
int fx_w_write_all(int fd, const void *buf, size_t len, uint64_t off);
/* -ENODATA where the file ends first */
int fx_w_read_all(int fd, void *buf, size_t len, uint64_t off);
/* A new header with a salt that is neither 0 nor old, in b. */
int fx_w_head_new(uint64_t old, unsigned char b[W_START], uint64_t *salt);
int fx_w_head_read(struct fstx_domain *d, uint64_t *salt);
int fx_w_rec_check(struct fstx_domain *d, uint64_t off, uint64_t size,
		   struct wrec *h, unsigned char *buf);
int fx_w_rec_head(struct fstx_domain *d, uint64_t off, struct wrec *h);
int fx_w_rec_state_of(struct fstx_domain *d, uint64_t off, struct wrec *h);
int fx_w_rec_cancel(struct fstx_domain *d, uint64_t off);
int fx_w_rec_rewrite(struct fstx_domain *d, uint64_t lo, uint64_t hi);
int fx_w_entry_fd(struct fstx_domain *d, const char *path, uint64_t ino);
int fx_w_entry_mem(const unsigned char *pl, uint64_t len, uint64_t *p,
		   struct went *e, char *path, char *name,
		   const unsigned char **data);
uint64_t fx_w_ent_next(uint64_t p, uint64_t end, const struct went *e);
int fx_w_rec_walk(struct fstx_domain *d, uint64_t off, const struct wrec *h,
		  struct wvisit *v);
int fx_w_rec_replay(struct fstx_domain *d, uint64_t off, const struct wrec *h,
		    unsigned char *buf);
/* The number of entries a record of P would hold (0: nothing to log). */
size_t fx_w_rec_entries(const struct plan *P, const int *tgt, const uint64_t *ino,
			const char *const *fpath, size_t nnm);
int fx_w_write_record(struct fstx_domain *d, const struct plan *P,
		      const int *tgt, const uint64_t *ino, const char *const *fpath,
		      const struct wname *nm, size_t nnm,
		      const struct wclone *cl, uint64_t *end);
/* Remove an xattr; 0 when it is gone already (idempotent, W5). */
int fx_w_rmx(int fd, const char *name);
/* W13: apply a clone entry (data: its W_CLONE_SPEC bytes) to fd. */
int fx_w_clone_in(struct fstx_domain *d, int fd, const struct went *e,
		  const char *name, const unsigned char *data);
/* Make a name entry's new name hold its object (W5), for the record at
 * off (UINT64_MAX: the writer's own); a: the entry's (the mode asked for,
 * or W_SWAP's other inode).  0 or -errno. */
int fx_w_name_apply(struct fstx_domain *d, uint32_t kind, const char *path,
		    const char *stage, uint64_t ino, uint64_t a,
		    const char *target, uint64_t off);
/* The inode a record's entry of inode ino finds now (d->wal_remap). */
uint64_t fx_w_ino(const struct fstx_domain *d, uint64_t ino);
void fx_w_remap_clear(struct fstx_domain *d);
/* fn(arg, record offset, entry header) for each entry of the valid records
 * in [from, to) (with states, not of cancelled ones) until non-zero:
 * that value, else 0; -EUCLEAN for what does not parse. */
int fx_w_each_entry(struct fstx_domain *d, uint64_t from, uint64_t to, int states,
		    int (*fn)(void *arg, uint64_t off, const struct went *e), void *arg);
/* W5: the inodes that records in [from, to) remove (d->wal_gone); with
 * states, not those of cancelled records (W3: never applied this boot). */
int fx_w_gone_scan(struct fstx_domain *d, uint64_t from, uint64_t to, int states);
/* Does a record after the one at off remove inode ino?  Its entries on
 * ino are then skipped by a replay. */
int fx_w_gone_later(const struct fstx_domain *d, uint64_t ino, uint64_t off);
int fx_w_rec_unwrite(struct fstx_domain *d, uint64_t off);
int fx_w_grow(struct fstx_domain *d, uint64_t end);

/* ---- wal_note.c: .fstx/walsync ---------------------------------------- */
int fx_w_side_fd(struct fstx_domain *d);
int fx_w_side_read(struct fstx_domain *d, void *buf, size_t len, uint64_t off);
int fx_w_load(struct fstx_domain *d, int *fresh);
int fx_w_hint_write(struct fstx_domain *d);
int fx_w_hint_drop(struct fstx_domain *d);
void fx_w_hint_end(struct fstx_domain *d, uint64_t salt, uint64_t *end);
uint64_t fx_w_hint_salt(struct fstx_domain *d);
int fx_w_rec_state(struct fstx_domain *d, uint64_t off, uint32_t *state);
int fx_w_set_state(struct fstx_domain *d, uint64_t off, uint32_t state);
uint64_t fx_w_states_len(uint64_t from, uint64_t to);
int fx_w_states_read(struct fstx_domain *d, uint64_t from, uint64_t to,
		     unsigned char *buf);
uint32_t fx_w_state_in(const struct fstx_domain *d, const unsigned char *buf,
		       uint64_t from, uint64_t off);

/* ---- wal_apply.c: in place -------------------------------------------- */
int fx_w_help(struct fstx_domain *d);
int fx_w_advance(struct fstx_domain *d);
/* pre: fx_w_apply_new() made the changes to new files already */
long fx_w_apply_all(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut,
		    const struct plan *P, const int64_t *res, const int *fds,
		    const int *tgt, const struct wname *nm, size_t nnm,
		    const struct wclone *cl, int pre);
int fx_w_apply_new(const struct plan *P, const int *fds, const int *tgt,
		   const struct wclone *cl);
/* W22: make the new files fx_wal_logged() finds whole, durable with their
 * staged names, before the record; sets cl[i].whole.  0 or -errno. */
int fx_w_apply_whole(struct fstx_domain *d, const struct plan *P, const int *fds,
		     const int *tgt, struct wname *nm, size_t nnm, uint64_t flags,
		     struct wclone *cl);

/* ---- wal_group.c: group commit ---------------------------------------- */
int fx_w_group_sync(struct fstx_domain *d, uint64_t salt, uint64_t end);
/* W3: a failed barrier of the log under the domain lock, published. */
int fx_w_group_fail(struct fstx_domain *d, uint64_t salt, uint64_t from);
/* W3: fdatasync of the log under the domain lock; a failure published. */
int fx_w_log_sync(struct fstx_domain *d);
/* W3: a lock holder's barrier before it applies others' records, shared
 * with the group commit. */
int fx_w_barrier(struct fstx_domain *d);
/* W5: the group notes of another boot or mount forgotten. */
int fx_w_group_forget(struct fstx_domain *d);
/* W3: a published failed range written again and synced, under the
 * domain lock, before any record is applied in place; 0 or -errno. */
int fx_w_mend(struct fstx_domain *d);

/* ---- wal_stage.c: the names a record makes (W1, W2) -------------------- */
/* The name entries of plan P into nm (P->nsteps + 1 of them): their count. */
/* W24: does step s move a name on (a rename of an object of the tree, an
 * exchange's steps, a move of a new object on from a name it had)? */
int fx_w_moves_name(const struct fx_step *s);
const char *fx_w_first_path(const struct plan *P, size_t k, char buf[PATH_MAX]);
size_t fx_w_names_of(struct fstx_domain *d, const struct plan *P,
		     struct wname *nm);
/* Which new directories are staged whole, with the files made in them. */
int fx_w_batch_dirs(struct fstx_domain *d, struct wname *nm, size_t nnm);
int fx_w_stage_dirs(struct fstx_domain *d, struct wname *nm, size_t nnm);
/* A new file's staged file, open for writing (its inode in w->ino). */
int fx_w_stage_file(struct fstx_domain *d, const struct wname *nm, struct wname *w);
int fx_w_stage_links(struct fstx_domain *d, struct wname *nm, size_t nnm);
/* 1: a removal the log does not take (the undo way instead); else 0,
 * and each removal's keeps set (W17). */
int fx_w_removal_declined(struct fstx_domain *d, const struct plan *P,
			  const uint64_t *ino, struct wname *nm, size_t nnm);
/* W15: 1 a rename of an existing object the log does not take, else 0. */
int fx_w_move_declined(struct fstx_domain *d, const struct plan *P, struct wname *nm,
		       size_t nnm);
/* W15, W16: where the object an op finds at path (its first step: step)
 * is before the record is applied: the old name of a file renamed there,
 * the first name of one linked there; under a directory renamed (W20),
 * under its old name (in buf). */
const char *fx_w_now_at(const struct wname *nm, size_t nnm, const char *path,
			size_t step, char buf[PATH_MAX]);
/* The final path of each op's object (fpath[i], NULL: the path it names;
 * fx_w_nowhere: a new file left with no name, W27, whose ops get no entry). */
extern const char fx_w_nowhere[];
int fx_w_final_paths(const struct plan *P, const int *tgt, const uint64_t *ino,
		     const struct wname *nm, size_t nnm, const char **fpath, char **own);
/* W15: the final path of moved inode ino, or NULL. */
const char *fx_w_moved_to(const struct wname *nm, size_t nnm, uint64_t ino);
/* Before the commit point: what was staged goes again. */
void fx_w_unstage(struct fstx_domain *d, struct wname *nm, size_t nnm);
void fx_w_free_stages(struct wname *nm, size_t cap);
struct wname *fx_w_name_of_op(struct wname *nm, size_t nnm, size_t op);
int fx_w_stage_tmp(struct fstx_domain *d, uint64_t *ino);
/* W2: the staged objects take the group of their setgid parents; 1 where
 * a new directory made in place would not (W26: the undo way), else 0. */
int fx_w_inherit_groups(struct fstx_domain *d, const struct plan *P, struct wname *nm,
			size_t nnm);
/* W23: would the caller's permissions fail the record after its barrier? */
int fx_w_perm_declined(struct fstx_domain *d, const struct plan *P,
		       const struct wname *nm, size_t nnm);
void fx_w_link_inodes(struct wname *nm, size_t nnm);
/* W13, W19: stage the pwrites fx_wal_stages() takes and every clone range
 * into cl (P->nops of them, fd -1 each), durable with their names: the
 * count staged, or -errno.  fds: the ops' open files (a clone's source). */
int fx_w_stage_writes(struct fstx_domain *d, const struct plan *P,
		      const int *tgt, const int *fds, uint64_t flags, struct wclone *cl);
/* W19: is open op i's slot the source of a clone range before it is
 * closed or opened again? */
int fx_w_clone_source(const struct plan *P, size_t i);
/* Close the staged files; unlink them too when not appended (unstage). */
void fx_w_drop_writes(struct fstx_domain *d, struct wclone *cl, size_t n,
		      int unstage);

/* ---- wal_debt.c: W11 -------------------------------------------------- */
/* List the objects the records name: 0, 1 too many (sync them), -errno. */
int fx_w_debt_note(struct fstx_domain *d);
/* Fsync the objects listed, then empty the list: 0 or -errno. */
int fx_w_debt_pay(struct fstx_domain *d);

#endif
