/* SPDX-License-Identifier: MIT */
/*
 * syncset.c - make a set of objects durable, one fsync each (syncset.h).
 *
 * Rules.
 *  S1. A member is fsynced (data, size, xattrs, its names in a directory
 *      member) before fx_ss_flush returns 0; an error of any member is
 *      returned and the others are still synced, so a caller that latches
 *      the error knows the set's state is unknown, never half-reported.
 *  S2. Before the fsyncs, writeback of every member is started (a hint,
 *      its failure ignored): the device then writes the members' data in
 *      one run while the fsyncs wait in turn, instead of one file's data
 *      per wait (100 new 512-byte files on ext4: about 10 ms against 55).
 *  S3. A full set is flushed at once (S1) and emptied: an object changed
 *      after that flush is added again by its next change, so at the final
 *      flush every change is covered (test_ops: barriers).
 *  S4. The fsyncs are issued at once (os.h fsync_each: from several
 *      threads), so that the filesystem's journal commits and the device's
 *      cache flushes they wait for are shared, not paid one member after
 *      another; their order among themselves does not matter (S1 speaks of
 *      all of them).
 */
#define _GNU_SOURCE
#include "internal.h"
#include "syncset.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

void fx_ss_init(struct fx_syncset *ss)
{
	ss->n = 0;
	ss->err = 0;
	ss->flushed = 0;
}

static void ss_note(struct fx_syncset *ss, int r)
{
	if (r < 0 && !ss->err)
		ss->err = r;
}

static void ss_barrier(struct fx_syncset *ss)
{
	int res[FX_SYNC_BATCH];
	unsigned k;

	for (k = 0; k < ss->n; k++)
		(void)fx_os.writeback(ss->fd[k]); /* S2 */
	fx_os.fsync_each(ss->fd, res, ss->n); /* S4 */
	for (k = 0; k < ss->n; k++) {
		ss_note(ss, res[k]);
		fx_os.close(ss->fd[k]);
	}
	ss->flushed += ss->n;
	ss->n = 0;
}

void fx_ss_take(struct fx_syncset *ss, int fd)
{
	struct stat st;
	unsigned k;
	int r;

	if (fd < 0 || !ss) {
		if (fd >= 0)
			fx_os.close(fd);
		else if (ss)
			ss_note(ss, fd); /* an object we could not reopen */
		return;
	}
	if ((r = fx_os.fstat(fd, &st)) < 0) {
		ss_note(ss, r);
		fx_os.close(fd);
		return;
	}
	for (k = 0; k < ss->n; k++)
		if (ss->ino[k] == (uint64_t)st.st_ino &&
		    ss->dev[k] == (uint64_t)st.st_dev) {
			fx_os.close(fd);
			return;
		}
	if (ss->n == FX_SYNC_BATCH)
		ss_barrier(ss); /* S3 */
	ss->fd[ss->n] = fd;
	ss->dev[ss->n] = (uint64_t)st.st_dev;
	ss->ino[ss->n++] = (uint64_t)st.st_ino;
}

int fx_ss_has(const struct fx_syncset *ss, uint64_t ino)
{
	/* the log names files of the domain's own filesystem only */
	for (unsigned k = 0; ss && k < ss->n; k++)
		if (ss->ino[k] == ino && ss->dev[k] == ss->dev[0])
			return 1;
	return 0;
}

void fx_ss_file(struct fx_syncset *ss, int fd)
{
	if (ss)
		fx_ss_take(ss, fx_os.dup(fd));
}

void fx_ss_dir(struct fx_syncset *ss, int dfd)
{
	if (ss)
		fx_ss_take(ss, fx_openat_owned(dfd, ".", O_RDONLY | O_DIRECTORY, FX_RESOLVE));
}

int fx_ss_flush(struct fx_syncset *ss)
{
	int r;

	if (!ss)
		return 0;
	ss_barrier(ss);
	r = ss->err;
	ss->err = 0;
	return r;
}

void fx_ss_drop(struct fx_syncset *ss)
{
	if (!ss)
		return;
	for (unsigned k = 0; k < ss->n; k++)
		fx_os.close(ss->fd[k]);
	ss->n = 0;
	ss->err = 0;
}
