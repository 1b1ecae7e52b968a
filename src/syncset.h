/* SPDX-License-Identifier: MIT */
/*
 * syncset.h - a set of objects made durable together, one fsync each,
 * never the whole filesystem.
 *
 * Barrier 2 of the undo way (trans.c), the end of an undo (journal.c rule
 * 6) and a checkpoint of the log (wal.c W6) each make durable exactly the
 * files and directories they changed or name: another process's dirty
 * pages are not theirs to wait for (syncfs(2) would).  The caller adds
 * objects as it changes them; a set that fills is flushed early and starts
 * again, which is sound because an object changed after that flush is
 * added again.  Calling sequence:
 *
 *     struct fx_syncset ss;
 *     fx_ss_init(&ss);
 *     fx_ss_file(&ss, fd);  fx_ss_dir(&ss, parent_fd);  ...
 *     r = fx_ss_flush(&ss);    (or fx_ss_drop(&ss): close, no barrier)
 *
 * Every function takes NULL for "no set" (a crash-only transaction).
 * The fields are syncset.c's own.
 */
#ifndef FSTX_SYNCSET_H
#define FSTX_SYNCSET_H

#include <stdint.h>

#define FX_SYNC_BATCH 64 /* descriptors held at once, well under RLIMIT_NOFILE */

struct fx_syncset {
	int fd[FX_SYNC_BATCH];
	uint64_t ino[FX_SYNC_BATCH], dev[FX_SYNC_BATCH]; /* once per inode */
	unsigned n;
	int err;          /* the first failure; sticks until fx_ss_flush */
	unsigned long flushed; /* objects fsynced so far (tests, benches) */
};

void fx_ss_init(struct fx_syncset *ss);
/* Take fd (owned from here on: closed by the set), once per (dev, inode). */
void fx_ss_take(struct fx_syncset *ss, int fd);
/* 1 if inode ino is in the set now (a caller may skip reopening it). */
int fx_ss_has(const struct fx_syncset *ss, uint64_t ino);
/* A copy of fd (fd stays the caller's). */
void fx_ss_file(struct fx_syncset *ss, int fd);
/* The directory dfd (an O_PATH handle, which fsync refuses) itself. */
void fx_ss_dir(struct fx_syncset *ss, int dfd);
/* Barrier: start writeback of every member, then fsync each; closes them.
 * 0, or the first -errno of this set (also of an early flush). */
int fx_ss_flush(struct fx_syncset *ss);
/* Close every member without a barrier. */
void fx_ss_drop(struct fx_syncset *ss);

#endif
