/* SPDX-License-Identifier: MIT */
/*
 * wal_group.c - group commit (rule W3 of wal.c): the record's barrier,
 * outside the domain lock, one for many writers.  The syncers of a
 * domain meet at the head of .fstx/walsync, which holds
 * page-cache notes of this boot, written only under the byte lock G_Q,
 * with a CRC-32C (a note that fails it is no note): (salt, end), every
 * record below end is durable; the barrier under way (its generation,
 * while active); how many writers are in here, not yet covered,
 * and how many were when the last barrier ended.  A syncer whose record a
 * barrier covered returns at once: it reads the notes without the lock
 * first, and takes their (salt, end) where the CRC holds (a note being
 * written fails it, and an older note that says covered said the truth);
 * one that finds a barrier under way waits for it on that barrier's byte
 * (held by its syncer throughout, so a shared lock there is granted when
 * it ends, with G_Q free meanwhile: a writer covered by one barrier never
 * waits out the next), then looks again; else it becomes the syncer: it
 * may gather (gather()), then reads the log's end from the hint and
 * syncs, so its barrier covers every record written before it began.  A
 * syncer ends its barrier with the notes written and G_Q free before it
 * frees the barrier's byte, so the writers it wakes find themselves
 * covered without a lock.  Generations alternate between two bytes, so
 * the next barrier never holds the byte a late waiter wants.  A syncer's
 * locks die with it: an active note whose byte is free (a trial lock
 * succeeds under G_Q) was left by a dead syncer.  The counts only tune
 * gathering: a covered writer leaves without counting itself out; a
 * barrier's end takes out the writers counted when it began (their
 * records were written first, so it covered them), and writers counted
 * during it stay until the next barrier ends, as do those that die in
 * here.
 *
 * A barrier that fails (W3) publishes the range of the log it was to make
 * durable, [flo, fhi): its pages may now be clean in the page cache but not
 * on the disk (the kernel reports a failed write-back once per open file and
 * does not write those pages again), and a later barrier, on a descriptor
 * that sees no error, would leave them so: the log on the disk would end at
 * the first record they held, and every record after it, acknowledged or
 * not, would be lost to replay.  So before anyone applies a record in
 * place, fx_w_mend() (under the domain lock) writes that range again from
 * the page cache and syncs it, and only then clears it.
 *
 * The notes, at S_GROUP (0) of .fstx/walsync (struct gnote; the rest of
 * the file: wal_note.c), native byte order:
 *     0 u64 salt   8 u64 end: the records of that log below end are durable
 *    16 u32 gen    20 u32 active: the barrier under way, while active
 *    24 u32 waiting   28 u32 peak   32 u32 bar_us   36 u32 covering
 *    40 u64 flo   48 u64 fhi: a failed barrier's range of that log, not yet
 *                             written again (none when fhi <= flo)
 *    56 u32 CRC-32C of bytes 0-55
 * Byte locks on the file: G_Q (0) the notes, G_BAR + gen % 2 (1, 2) the
 * barrier of generation gen, held by its syncer.
 */
#define _GNU_SOURCE
#include "wal_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <string.h>
#include <time.h>

#define G_Q 0        /* byte lock: the notes */
#define G_BAR 1      /* + gen % 2: the barrier of that generation */
#define G_GATHER 3   /* fewer writers in sight make no gathering */
#define G_GATHER_MAX 2000 /* us */
/*
 * No gathering after a barrier shorter than this: a nap costs its syncer
 * a trip through the scheduler and leaves the device idle, which a short
 * barrier does not pay back.  Measured with 8 writers on loop devices:
 * ext4's and xfs' barriers (about 300 us) commit 3-7% more without it;
 * btrfs' (about 700 us) and a 1 ms device flush share less without it.
 */
#define G_GATHER_MIN 500 /* us */

struct gnote {
	uint64_t salt, end;       /* durable below end */
	uint32_t gen, active;     /* the barrier under way, while active */
	uint32_t waiting;         /* writers in here, not yet covered */
	uint32_t peak;            /* waiting when the last barrier ended */
	uint32_t bar_us;          /* its length */
	uint32_t covering;        /* waiting when the barrier under way began */
	uint64_t flo, fhi;        /* a failed barrier's range, not yet mended */
	uint32_t crc;             /* CRC-32C of the fields above */
};

_Static_assert(offsetof(struct gnote, crc) == 56, "group notes: CRC at 56");

_Static_assert(S_GROUP + sizeof(struct gnote) <= S_HINT, "group notes before the hint");

static int glock(struct fstx_domain *d, int type, off_t at, int wait)
{
	return fx_os.lock_range(d->walsync, type, at, 1, wait);
}

static uint64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static int note_write(struct fstx_domain *d, struct gnote *g)
{
	g->crc = fx_crc32c(0, g, offsetof(struct gnote, crc));
	return fx_w_write_all(d->walsync, g, sizeof(*g), S_GROUP);
}

static int note_whole(const struct gnote *g)
{
	return g->crc == fx_crc32c(0, g, offsetof(struct gnote, crc));
}

/* Without the lock: 1 if a whole note says the record below end durable. */
static int covered(struct fstx_domain *d, uint64_t salt, uint64_t end)
{
	struct gnote g;

	if (fx_w_side_read(d, &g, sizeof(g), S_GROUP) < 0 || !note_whole(&g))
		return 0;
	return g.salt == salt && g.end >= end;
}

/*
 * A new syncer that saw several writers at the last barrier's end waits,
 * up to half that barrier's length, for those it covered to come back with
 * their next records (commit_delay with siblings, measured): else each
 * barrier would start while they are away and cover half of them.  The
 * count is read without the lock: a hint only.
 */
static void gather(struct fstx_domain *d, uint32_t peak, uint32_t bar_us)
{
	uint64_t t0 = now_us(), lim = bar_us / 2 < G_GATHER_MAX ? bar_us / 2 : G_GATHER_MAX;
	struct timespec nap = { 0, 20000 };
	struct gnote g;

	while (now_us() - t0 < lim) {
		nanosleep(&nap, NULL);
		if (fx_w_side_read(d, &g, sizeof(g), S_GROUP) < 0 || g.waiting >= peak)
			break;
	}
}

/*
 * A failed barrier: every record of the log of salt from the last one
 * known durable on (to the log's end, whatever was appended meanwhile: the
 * failed write-back may have held its pages too), joined to g's range.
 */
static void fail_add(struct gnote *g, uint64_t salt, uint64_t from)
{
	uint64_t lo;

	if (g->salt != salt) { /* nothing of this log known durable */
		g->salt = salt;
		g->end = W_START;
		g->flo = g->fhi = 0;
	}
	lo = g->end < W_START ? W_START : g->end;
	if (g->fhi > g->flo && g->flo < lo)
		lo = g->flo;
	g->flo = from < lo ? from : lo;
	g->fhi = UINT64_MAX;
}

/* The notes read under G_Q: 0, or -errno; a note not whole reads as none. */
static int note_locked(struct fstx_domain *d, struct gnote *g)
{
	int r = fx_w_side_read(d, g, sizeof(*g), S_GROUP);

	if (r == -ENODATA || (r == 0 && !note_whole(g))) {
		memset(g, 0, sizeof(*g));
		r = 0;
	}
	return r;
}

/* Under G_Q: the notes read, changed by fn(g, salt, from), written. */
static int note_change(struct fstx_domain *d,
		       void (*fn)(struct gnote *g, uint64_t salt, uint64_t from),
		       uint64_t salt, uint64_t from)
{
	struct gnote g;
	int r;

	if ((r = fx_w_side_fd(d)) < 0)
		return r;
	if ((r = glock(d, F_WRLCK, G_Q, 1)) < 0)
		return r;
	if ((r = note_locked(d, &g)) == 0) {
		fn(&g, salt, from);
		r = note_write(d, &g);
	}
	glock(d, F_UNLCK, G_Q, 0);
	return r;
}

/*
 * W3: a barrier of the log that failed outside fx_w_group_sync() (under
 * the domain lock), publishing the records of salt as in doubt, and the
 * log's bytes from `from` on (0: its header too, W6).
 */
int fx_w_group_fail(struct fstx_domain *d, uint64_t salt, uint64_t from)
{
	return note_change(d, fail_add, salt, from);
}

static int group_sync(struct fstx_domain *d, uint64_t salt, uint64_t end, int gather_ok);

/*
 * W3: the barrier of a lock holder about to apply records it did not
 * just sync itself (a help pass, a commit paying debts): shared with the
 * group, so that it waits for a barrier under way, whose failure is
 * then published for fx_w_mend(), and skips its own where a barrier
 * covered every record already.  On tmpfs (no device) a plain one.
 */
int fx_w_barrier(struct fstx_domain *d)
{
	if (d->fs.magic == TMPFS_MAGIC)
		return fx_w_log_sync(d);
	return group_sync(d, d->wal_salt, d->wal_end, 0);
}

/* W3: every other barrier of the log (under the domain lock): one that
 * fails is published like a group barrier's. */
int fx_w_log_sync(struct fstx_domain *d)
{
	int r = fx_os.fdatasync(d->wal);

	if (r < 0 && d->wal_salt)
		(void)fx_w_group_fail(d, d->wal_salt, W_START);
	return r;
}

/*
 * W5: the notes of another boot or mount are no notes (walsync is never
 * synced, but what the kernel wrote back of it lasts): a recovery that does
 * not trust the hint forgets their (salt, end) and range, so that no later
 * barrier is skipped by an end the disk may not hold.  The barrier counts
 * stay (a writer on another mount of the filesystem may be at one).
 */
static void forget(struct gnote *g, uint64_t salt, uint64_t from)
{
	(void)salt;
	(void)from;
	g->salt = g->end = 0;
	g->flo = g->fhi = 0;
}

int fx_w_group_forget(struct fstx_domain *d)
{
	return note_change(d, forget, 0, 0);
}

/*
 * W3, under the domain lock, before any record is applied in place: a
 * failed barrier's range of this log, as the notes publish it, written
 * again from the page cache (fx_w_rec_rewrite()) and synced; then cleared,
 * unless another failure joined it meanwhile.  0 (none, or mended) or
 * -errno (the range stays published).
 */
int fx_w_mend(struct fstx_domain *d)
{
	struct gnote g, now;
	uint64_t lo, hi;
	int r;

	if ((r = fx_w_side_fd(d)) < 0)
		return r;
	/* whole without the lock, or read under it: a publication came
	 * before this holder's barrier began, so no older note is read */
	if (fx_w_side_read(d, &g, sizeof(g), S_GROUP) < 0 || !note_whole(&g)) {
		if ((r = glock(d, F_WRLCK, G_Q, 1)) < 0)
			return r;
		r = note_locked(d, &g);
		glock(d, F_UNLCK, G_Q, 0);
		if (r < 0)
			return r;
	}
	if (g.fhi <= g.flo || g.salt != d->wal_salt)
		return 0; /* none, or another log's (the next barrier drops it) */
	lo = g.flo; /* 0: the header too (a checkpoint's, W6) */
	hi = g.fhi > d->wal_end ? d->wal_end : g.fhi;
	if ((lo < hi && (r = fx_w_rec_rewrite(d, lo, hi)) < 0) ||
	    (r = fx_w_log_sync(d)) < 0)
		return r;
	if ((r = glock(d, F_WRLCK, G_Q, 1)) < 0)
		return r;
	if ((r = note_locked(d, &now)) == 0 && now.salt == g.salt &&
	    now.flo == g.flo && now.fhi == g.fhi) {
		now.flo = now.fhi = 0;
		r = note_write(d, &now);
	}
	glock(d, F_UNLCK, G_Q, 0);
	return r;
}

/* The barrier that makes the record below end (of the log of salt)
 * durable, shared (W3), gathering others' records first where gather_ok
 * (not for a holder of the domain lock: no one could append); 0 or
 * -errno. */
static int group_sync(struct fstx_domain *d, uint64_t salt, uint64_t end, int gather_ok)
{
	struct gnote g;
	uint64_t target = end, t0;
	off_t bar;
	int r, rs, in = 0, came, gathering;

	if ((r = fx_w_side_fd(d)) < 0)
		return r;
	for (;;) {
		if (covered(d, salt, end))
			return 0;
		if ((r = glock(d, F_WRLCK, G_Q, 1)) < 0)
			return r;
		if ((r = note_locked(d, &g)) < 0) /* none yet, or not whole: none */
			goto out_q;
		if (g.salt == salt && g.end >= end)
			goto out_q; /* covered by an earlier barrier */
		came = !in; /* counted once, on the first look */
		if (came) {
			in = 1;
			g.waiting++;
		}
		if (!g.active)
			break;
		bar = G_BAR + g.gen % 2;
		if ((r = glock(d, F_WRLCK, bar, 0)) == 0) {
			glock(d, F_UNLCK, bar, 0); /* its syncer died */
			break;
		}
		if (r != -EAGAIN && r != -EACCES)
			goto out_q;
		if (came && (r = note_write(d, &g)) < 0)
			goto out_q;
		glock(d, F_UNLCK, G_Q, 0);
		/* wait for the barrier under way, then look again */
		if ((r = glock(d, F_RDLCK, bar, 1)) < 0)
			return r;
		glock(d, F_UNLCK, bar, 0);
	}
	g.gen++;
	bar = G_BAR + g.gen % 2;
	if ((r = glock(d, F_WRLCK, bar, 1)) < 0)
		goto out_q;
	g.active = 1; /* those who come meanwhile wait for it */
	g.covering = g.waiting;
	gathering = gather_ok && g.peak >= G_GATHER && g.waiting < g.peak &&
		    g.bar_us >= G_GATHER_MIN;
	if ((r = note_write(d, &g)) < 0)
		goto out_bar;
	glock(d, F_UNLCK, G_Q, 0);
	if (gathering)
		gather(d, g.peak, g.bar_us);
	fx_w_hint_end(d, salt, &target); /* every record written before */
	t0 = now_us();
	rs = fx_os.fdatasync(d->wal);
	if ((r = glock(d, F_WRLCK, G_Q, 1)) < 0)
		goto out_bar; /* the note stays active: the next syncer sees
				 it dead once this byte is free */
	if ((r = fx_w_side_read(d, &g, sizeof(g), S_GROUP)) == 0) {
		/* a checkpoint may have replaced the log meanwhile (then its
		 * records are durable in place, W6): a barrier of an older log
		 * leaves the notes of the current one as they are, but one that
		 * failed may have held the current log's pages too */
		uint64_t cur = fx_w_hint_salt(d);

		cur = cur ? cur : salt;
		if (rs == 0 && cur == salt && g.salt != salt)
			g.flo = g.fhi = 0; /* an older log's failure: moot */
		if (rs == 0 && cur == salt && (g.salt != salt || g.end < target)) {
			g.salt = salt;
			g.end = target;
		}
		if (rs < 0)
			fail_add(&g, cur, W_START);
		g.active = 0;
		g.peak = g.waiting;
		g.bar_us = (uint32_t)(now_us() - t0);
		g.waiting -= g.covering < g.waiting ? g.covering : g.waiting;
		g.covering = 0;
		r = note_write(d, &g);
	}
	r = rs < 0 ? rs : r;
	glock(d, F_UNLCK, G_Q, 0); /* first: the waiters it wakes find it free */
	glock(d, F_UNLCK, bar, 0);
	return r;
out_bar:
	glock(d, F_UNLCK, bar, 0);
out_q:
	glock(d, F_UNLCK, G_Q, 0);
	return r;
}

int fx_w_group_sync(struct fstx_domain *d, uint64_t salt, uint64_t end)
{
	return group_sync(d, salt, end, 1);
}
