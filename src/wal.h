/* SPDX-License-Identifier: MIT */
/*
 * wal.h - the write-ahead log (wal.c, rules W1-W23, and wal_*.c): the
 * only way into it.  The log's state lives in the domain handle (fields
 * marked "wal" in internal.h), which only the log's files read.
 */
#ifndef FSTX_WAL_H
#define FSTX_WAL_H

#include <stdint.h>

struct fstx_domain;
struct plan;
struct btrfs_ioctl_usertrans;

/* Replay records not yet applied in place (rule W5); 1 replayed, 0 none. */
int fx_wal_recover(struct fstx_domain *d);
/* lazy_too 0: leave lazy records queued (a transaction's start, W10). */
int fx_wal_recover_mode(struct fstx_domain *d, int lazy_too);
/* W8: 1 the hint says the domain is clean (log recovered), 0 check it. */
int fx_wal_enter(struct fstx_domain *d);
int fx_wal_set_clean(struct fstx_domain *d);
int fx_wal_set_dirty(struct fstx_domain *d);
int fx_wal_settle(struct fstx_domain *d); /* W12: at close, under the lock */
/* 1 if fx_wal_recover would replay something, 0 if not, -errno. */
int fx_wal_pending(struct fstx_domain *d);
/* Apply open records, make everything durable in place and empty the log
 * (rule W6); 0 empty, 1 done, 2 done after applying open records. */
int fx_wal_checkpoint(struct fstx_domain *d);
/*
 * 1 if the last fx_wal_commit() of this handle failed after its record
 * was written: the transaction may be committed (after its barrier it is,
 * W3), and recovery settles it; 0 if it failed before, or succeeded.
 */
int fx_wal_owed(struct fstx_domain *d);
/* Bytes of records the log holds (0 after a checkpoint). */
uint64_t fx_wal_bytes(struct fstx_domain *d);
/* The same, read without the lock and changing nothing; 0 or -errno. */
int fx_wal_peek(struct fstx_domain *d, uint64_t *bytes);
/* The log is checkpointed once its records pass this many bytes. */
extern uint64_t fx_wal_max;
/* Past this many bytes of data to log, large new files are written whole
 * (W22); past fx_wal_big bytes still to log, a transaction takes the undo
 * way. */
extern uint64_t fx_wal_large;
extern uint64_t fx_wal_big;
/* W2: a checkpoint cuts a log longer than this back to it. */
extern uint64_t fx_wal_keep;
/* W21: do steps k, k+1, k+2 of P exchange two names (the planner's way,
 * through .fstx/new/)? */
int fx_wal_swap_at(const struct plan *P, size_t k);
/* W24: do they exchange a new object with one of the tree?  1 the new one
 * moves first, 2 the tree's; else 0. */
int fx_wal_swap_new_at(const struct plan *P, size_t k);
/*
 * W13: is a pwrite of len bytes (into a file the transaction makes: newf)
 * staged in a file of its own and cloned into place, not logged?  Only
 * durable transactions (flags without FSTX_UT_NOSYNC or FSTX_UT_LAZY) on
 * a filesystem with reflink, for pwrites of fx_wal_stage_min bytes or
 * more into existing files.  Probes the filesystem (under the lock).
 */
int fx_wal_stages(struct fstx_domain *d, uint64_t flags, uint64_t len, int newf);
extern uint64_t fx_wal_stage_min;
/*
 * The bytes of data transaction P (of flags) logs: its pwrites, but those
 * W13 stages and, when they pass fx_wal_large in a durable transaction,
 * those into new files of fx_wal_stage_min bytes or more that W22 writes
 * whole before the record (marked in whole[], per op, unless NULL: every
 * op on such a file).  UINT64_MAX when memory runs out.
 */
uint64_t fx_wal_logged(struct fstx_domain *d, const struct plan *P, uint64_t flags,
		       uint8_t *whole);
/* W10: lazy records open past this many bytes are flushed. */
extern uint64_t fx_lazy_max;
extern uint64_t fx_wal_window; /* wal.c: open records read in one go up to this */
/* No log entry reaches past this offset (below every supported
 * filesystem's limit); recovery refuses one that does. */
#define FX_WAL_MAX_OFF (1ULL << 40)

/*
 * wal.c: commit an eligible transaction through the log (rules W1-W4);
 * res holds every op's predicted result.  0 committed, 1 declined (nothing
 * written: take the undo way), 2 records of other writers on the same
 * inodes were applied first (plan again), or -errno.  Drops and retakes
 * the domain lock around the record's barrier (group commit).
 */
long fx_wal_commit(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut,
		   const struct plan *P, const int64_t *res);

#endif
