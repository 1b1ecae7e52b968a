/* SPDX-License-Identifier: MIT */
/*
 * recover.c - the one recovery entry point: every state a crash, a kill or
 * a failed barrier can leave in a domain is brought back to a committed
 * state here, and only here, under the exclusive lock.
 *
 * Rules.
 *  R1. Order: the wedge mark first (a wedged domain may be torn: only
 *      fstx_recover() goes on, and lifts it at the end); then the undo
 *      journal (journal.c: a hot journal is undone, or cleaned up after its
 *      COMMIT); then the write-ahead log (wal.c W4, W5: open records
 *      applied, or all replayed after a reboot or remount).  The journal
 *      comes first because the log is appended to only after the journal
 *      was recovered, and a transaction of the undo way checkpoints the log
 *      before it writes its journal (wal.c W6): the two are never both
 *      live, and recovering them in this order restores the last committed
 *      state whichever was live.
 *  R2. A transaction's start (FX_REC_TX) trusts the log's hint when it says
 *      the domain is clean (wal.c W8), leaves lazy records queued (W10),
 *      and otherwise looks, recovers, and says clean.
 *  R3. A reader (FX_REC_READER) and a flush (FX_REC_FLUSH: fstx_sync(),
 *      a handle's close) recover everything, lazy records too; a flush does
 *      not stop at a wedge mark (it only makes durable what was committed).
 *  R4. fstx_recover() (FX_REC_FULL) also checkpoints the log (W6), removes
 *      the garbage of a committed transaction (staging, trash, marks), lifts
 *      the wedge mark and clears the handle's latched error.
 * Returns 1 if something was recovered, 0 if nothing needed it, -errno
 * (-EROFS: wedged).  Proved by test_crash, test_wal (kill, reboot,
 * remount), test_powerloss and test_rollback, which recover through it.
 */
#include "internal.h"
#include "wal.h"

#include <errno.h>

static int wedged(struct fstx_domain *d)
{
	int r = fx_is_wedged(d);

	return r > 0 ? -EROFS : r;
}

/* R1 without the wedge mark: the journal, then the log. */
static int journal_then_log(struct fstx_domain *d, int lazy_too)
{
	int r = fx_recover_locked(d), w;

	if (r < 0)
		return r;
	w = fx_wal_recover_mode(d, lazy_too);
	return w < 0 ? w : (r || w);
}

static int recover_full(struct fstx_domain *d)
{
	int w = fx_is_wedged(d), r, c;

	r = journal_then_log(d, 1);
	if (r >= 0) {
		c = fx_wal_checkpoint(d);
		r = c < 0 ? c : r || c == 2;
	}
	if (r == 0)
		r = fx_clean_scratch(d); /* garbage of a committed transaction */
	if (r >= 0 && w > 0) {
		int u = fx_unwedge(d);

		r = u < 0 ? u : 1;
	}
	if (r >= 0)
		d->latched = 0;
	return r;
}

int fx_recover(struct fstx_domain *d, enum fx_recover_mode mode)
{
	int r;

	switch (mode) {
	case FX_REC_TX: /* R2 */
		if ((r = fx_wal_enter(d)) != 0)
			return r < 0 ? r : 0;
		if ((r = wedged(d)) < 0 || (r = journal_then_log(d, 0)) < 0)
			return r;
		{
			int c = fx_wal_set_clean(d);

			return c < 0 ? c : r;
		}
	case FX_REC_READER: /* R3 */
		if ((r = wedged(d)) < 0)
			return r;
		return journal_then_log(d, 1);
	case FX_REC_FLUSH: /* R3 */
		r = journal_then_log(d, 1);
		if (r >= 0)
			d->lazy_wrote = 0;
		return r;
	case FX_REC_FULL: /* R4 */
		return recover_full(d);
	}
	return -EINVAL;
}
