/* SPDX-License-Identifier: MIT */
/*
 * test_rollback.c - a failure at every position of every corpus transaction
 * rolls the whole tree back byte for byte; and EIO / ENOSPC injected at every
 * OS call gives committed, rolled back, or a hot journal that recovery
 * restores -- never a partial state.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "corpus.h"
#include "faultos.h"
#include "txrun.h"
#include "wal.h"

static int fail_datasync(int fd)
{
	(void)fd;
	return -EIO;
}

static char *fresh(char **snap)
{
	char *d = t_mkdomain();

	t_populate(d);
	if (snap)
		*snap = t_snapshot(d);
	return d;
}

static void drop(char *d)
{
	t_rmtree(d);
	free(d);
}

/* Keep the first k op lines of text, then add a failing op. */
static char *prefix_fail(const char *text, size_t k, size_t *nlines)
{
	size_t n = 0, len = 0;
	char *out;

	for (const char *c = text; *c; c++)
		if (*c == '\n') {
			if (n == k)
				break;
			n++;
			len = (size_t)(c - text) + 1;
		}
	if (nlines) {
		*nlines = 0;
		for (const char *c = text; *c; c++)
			*nlines += *c == '\n';
	}
	if (asprintf(&out, "%.*sunlink no-such-name\n", (int)len, text) < 0)
		abort();
	return out;
}

static void rollback_every_position(void **state)
{
	size_t total = 0;

	(void)state;
	for (size_t c = 0; c < ncx; c++) {
		size_t nlines = 0;

		free(prefix_fail(cx[c], 0, &nlines));
		for (size_t k = 0; k <= nlines; k++) {
			char *before, *after, *d = fresh(&before);
			char *text = prefix_fail(cx[c], k, NULL);
			uint64_t done;
			long r = tx_text(d, text, &done);

			if (r >= 0)
				fail_msg("corpus %zu prefix %zu: committed", c, k);
			after = t_snapshot(d);
			if (strcmp(before, after))
				fail_msg("corpus %zu prefix %zu: tree changed\n%s---\n%s", c,
					 k, before, after);
			assert_true(journal_empty(d));
			free(before);
			free(after);
			free(text);
			drop(d);
			total++;
		}
	}
	printf("rollback: %zu positions, all restored\n", total);
}

/* The after-state of corpus c, from a clean run, and its op results. */
static char *after_state(size_t c, long *calls, __s64 *res)
{
	char *d = fresh(NULL), *s;
	long r;

	fo_install(FO_COUNT, 0, 0);
	r = tx_run_pinned(d, cx[c], NULL, NULL, res);
	*calls = fo.calls;
	fo_remove();
	s = r == 0 ? t_snapshot(d) : NULL;
	drop(d);
	return s;
}

struct tally { long points, committed, rolled, recovered, forward; };

/*
 * Does the log hold a record not yet applied in place (a writer cut short
 * after its append: recovery's checkpoint applies it)?  Read-only.
 */
static int log_open(const char *dir)
{
	fstx_domain *d;
	int r = fstx_domain_open(dir, &d);

	if (r == 0) {
		r = fx_wal_pending(d); /* loads the hint: END and APPLIED */
		if (r == 0)
			r = d->wal_salt && d->wal_applied < d->wal_end;
		fstx_domain_close(d);
	}
	return r;
}

/*
 * One fault point, after the transaction returned r on tree d: recovery
 * (which also empties trash a failed cleanup left behind), then the tree
 * is the state after where r is 0, else before, or after where recovery
 * completed a journal left hot, or applied a record of the log left
 * open: a transaction of the log that failed after its commit point (its
 * record durable, an in-place change or a note failed) rolls forward,
 * never back.  Tallied in t.
 */
static void judge(const char *what, long k, long r, const char *d,
		  const char *before, const char *after_s, struct tally *t)
{
	int hot = !journal_empty(d), logged = log_open(d), r2;
	char *now;

	if (logged < 0)
		fail_msg("%s %ld: reading the log failed %d", what, k, logged);
	if ((r2 = domain_recover(d)) < 0)
		fail_msg("%s %ld: recovery failed %d", what, k, r2);
	now = t_snapshot(d);
	t->points++;
	t->recovered += hot;
	if (r == 0) {
		/* a journal left after commit holds COMMIT: cleanup only */
		if (!after_s || strcmp(now, after_s))
			fail_msg("%s %ld: returned 0, not after\n%s---\n%s", what, k,
				 after_s ? after_s : "(none)", now);
		t->committed++;
	} else {
		if (strcmp(now, before) &&
		    !((hot || logged) && after_s && !strcmp(now, after_s)))
			fail_msg("%s %ld: r=%ld torn\n%s---\n%s", what, k, r, before, now);
		t->rolled += !hot && !logged;
		t->forward += logged && strcmp(now, before);
	}
	free(now);
}

static void inject(size_t c, int err, int sticky, struct tally *t)
{
	char *before = NULL, *after_s, what[64];
	__s64 res[64];
	long calls;

	after_s = after_state(c, &calls, res);
	snprintf(what, sizeof(what), "corpus %zu err %d call", c, err);
	for (long k = 1; k <= calls; k++) {
		char *d = fresh(before ? NULL : &before);
		long r;

		fo_install(FO_FAIL, k, err);
		fo.sticky = sticky;
		r = tx_run_pinned(d, cx[c], NULL, after_s ? res : NULL, NULL);
		fo_remove();
		judge(what, k, r, d, before, after_s, t);
		drop(d);
	}
	free(before);
	free(after_s);
}

static void error_injection(void **state)
{
	static const int errs[] = { EIO, ENOSPC };

	(void)state;
	for (size_t e = 0; e < 2; e++) {
		for (int sticky = 0; sticky <= 1; sticky++) {
			struct tally t = { 0 };

			for (size_t c = 0; c < ncx; c++)
				inject(c, errs[e], sticky, &t);
			printf("errors: %s%s: %zu tx, %ld fault points, %ld committed, "
			       "%ld rolled back (%ld left a hot journal, recovered), "
			       "%ld rolled forward from the log, 0 torn\n",
			       errs[e] == EIO ? "EIO" : "ENOSPC", sticky ? " (sticky)" : "",
			       ncx, t.points, t.committed, t.rolled, t.recovered, t.forward);
		}
	}
}

/*
 * Allocation k of a corpus transaction fails (NULL), once or from k on, in
 * each way the text can ask for: the transaction is committed, or
 * returns -ENOMEM (or the error it returns without the fault) with the
 * tree as before (or a hot journal that recovery
 * rolls back or forward), never torn; under ASan, nothing leaks.  The text
 * is parsed inside the count, so the parser's failures are met too.
 */
static const char *const oom_ways[] = { "", "option wal\n", "option lazy\n",
					"option crash-only\n" };
static const char *const oom_names[] = { "default", "wal", "lazy", "crash-only" };

static void oom_one(size_t c, size_t way, int sticky, struct tally *t)
{
	char *before = NULL, *after_s, *text, *d, what[64];
	__s64 res[64];
	long allocs, r, r0;

	if (asprintf(&text, "%s%s", oom_ways[way], cx[c]) < 0)
		abort();
	d = fresh(NULL);
	fo_install(FO_COUNT, 0, 0);
	r0 = tx_run_pinned(d, text, NULL, NULL, res);
	allocs = fo.allocs;
	fo_remove();
	/* a lazy one waits in the queue: the state after is after a flush */
	assert_true(domain_recover(d) >= 0);
	after_s = r0 == 0 ? t_snapshot(d) : NULL;
	drop(d);
	assert_true(allocs > 0);
	snprintf(what, sizeof(what), "corpus %zu way %zu alloc", c, way);
	for (long k = 1; k <= allocs; k++) {
		d = fresh(before ? NULL : &before);
		fo_install(FO_COUNT, 0, 0);
		fo.alloc_at = k;
		fo.alloc_sticky = sticky;
		r = tx_run_pinned(d, text, NULL, after_s ? res : NULL, NULL);
		fo_remove();
		if (r != r0 && r != -ENOMEM && r != -1000 - ENOMEM)
			fail_msg("%s %ld: r=%ld, not %ld or -ENOMEM", what, k, r, r0);
		judge(what, k, r, d, before, after_s, t);
		drop(d);
	}
	free(before);
	free(after_s);
	free(text);
}

static void oom_injection(void **state)
{
	(void)state;
	for (size_t way = 0; way < sizeof(oom_ways) / sizeof(*oom_ways); way++)
		for (int sticky = 0; sticky <= 1; sticky++) {
			struct tally t = { 0 };

			for (size_t c = 0; c < ncx; c++)
				oom_one(c, way, sticky, &t);
			printf("oom: %s%s: %zu tx, %ld failed allocations, %ld committed, "
			       "%ld rolled back (%ld left a hot journal, recovered), "
			       "%ld rolled forward from the log, 0 torn\n",
			       oom_names[way], sticky ? " (sticky)" : "",
			       ncx, t.points, t.committed, t.rolled, t.recovered, t.forward);
		}
}

/*
 * A fresh tree on which text has left work for recovery: a hot journal
 * (the last call that, failing with EIO from there on, leaves one: the
 * whole journal to read back; *at remembers it), or with "option lazy" a
 * queue of lazy records.  NULL where no call leaves a journal hot.
 */
static char *left_for_recovery(const char *text, int lazy, long *at)
{
	long calls;
	char *d;

	if (lazy) {
		d = fresh(NULL);
		assert_int_equal(tx_text(d, text, NULL), 0);
		return d;
	}
	d = fresh(NULL);
	fo_install(FO_COUNT, 0, 0);
	tx_text(d, text, NULL);
	calls = fo.calls;
	fo_remove();
	drop(d);
	for (long k = *at ? *at : calls; k > 0; k--) {
		d = fresh(NULL);
		fo_install(FO_FAIL, k, EIO);
		fo.sticky = 1;
		tx_text(d, text, NULL);
		fo_remove();
		if (!journal_empty(d)) {
			*at = k;
			return d;
		}
		drop(d);
	}
	return NULL;
}

/*
 * Recovery with allocation k failing, once or from k on, over a hot
 * journal and over a queue of lazy records: it returns -ENOMEM or
 * succeeds, and a recovery with memory after it leaves the tree as before
 * the transaction or as after it (after, for the lazy queue), never torn.
 */
static void oom_recovery(void **state)
{
	size_t n = ncx < NFIXED ? ncx : NFIXED;
	long points = 0, nomem = 0;

	(void)state;
	for (size_t c = 0; c < n; c++)
		for (int lazy = 0; lazy <= 1; lazy++) {
			char *text, *before, *after_s, *d = fresh(&before);
			long at = 0, allocs;
			int r;

			if (asprintf(&text, "%s%s", lazy ? "option lazy\n" : "", cx[c]) < 0)
				abort();
			after_s = tx_text(d, text, NULL) == 0 &&
				  domain_recover(d) >= 0 ? t_snapshot(d) : NULL;
			drop(d);
			if ((lazy && !after_s) || !(d = left_for_recovery(text, lazy, &at))) {
				free(text);
				free(before);
				free(after_s);
				continue;
			}
			fo_install(FO_COUNT, 0, 0);
			assert_true(domain_recover(d) >= 0);
			allocs = fo.allocs;
			fo_remove();
			drop(d);
			for (long k = 1; k <= allocs; k++)
				for (int sticky = 0; sticky <= 1; sticky++) {
					char *now;

					d = left_for_recovery(text, lazy, &at);
					assert_non_null(d);
					fo_install(FO_COUNT, 0, 0);
					fo.alloc_at = k;
					fo.alloc_sticky = sticky;
					r = domain_recover(d);
					fo_remove();
					if (r < 0 && r != -ENOMEM)
						fail_msg("corpus %zu%s alloc %ld: recovery %d, not -ENOMEM",
							 c, lazy ? " lazy" : "", k, r);
					nomem += r < 0;
					points++;
					if ((r = domain_recover(d)) < 0)
						fail_msg("corpus %zu%s alloc %ld: then recovery %d",
							 c, lazy ? " lazy" : "", k, r);
					now = t_snapshot(d);
					if (lazy ? strcmp(now, after_s)
						 : strcmp(now, before) && (!after_s || strcmp(now, after_s)))
						fail_msg("corpus %zu%s alloc %ld: torn\n%s", c,
							 lazy ? " lazy" : "", k, now);
					free(now);
					drop(d);
				}
			free(text);
			free(before);
			free(after_s);
		}
	printf("oom recovery: %zu tx, hot journals and lazy queues, %ld failed allocations, "
	       "%ld -ENOMEM, 0 torn\n", n, points, nomem);
	assert_true(points > 0);
}

/* WEDGEONFAIL: rollback that cannot finish wedges the domain. */
static void wedge_on_failed_rollback(void **state)
{
	char *before, *d = fresh(&before), *now;
	char text[512];
	long calls = 0, r;

	(void)state;
	snprintf(text, sizeof(text), "option wedge-on-fail\n%s", corpus[6]);
	/* a log whose hint says clean (wal.c W8): the wedge must still count */
	for (int k = 0; k < 3; k++)
		assert_int_equal(tx_text(d, "option wal\nassert-exists a\n", NULL), 0);
	/* the undo way, which runs corpus 6 up to its failing write and
	 * rolls back (the log would fail it with nothing run) */
	fx_wal_auto = 0;
	fo_install(FO_COUNT, 0, 0);
	tx_text(d, text, NULL); /* fails at its last op, rolls back */
	calls = fo.calls;
	fo_remove();
	/* one EIO during the rollback: it cannot finish, the domain wedges */
	for (long k = calls; k > 0; k--) {
		char *w;

		fo_install(FO_FAIL, k, EIO);
		r = tx_text(d, text, NULL);
		fo_remove();
		if (asprintf(&w, "%s/.fstx/wedged", d) < 0)
			abort();
		r = access(w, F_OK);
		free(w);
		if (r == 0)
			break;
		assert_true(domain_recover(d) >= 0);
	}
	fx_wal_auto = 1;
	assert_int_equal(r, 0);
	assert_int_equal(tx_text(d, "unlink b\n", NULL), -EROFS);
	assert_true(domain_recover(d) >= 0);
	now = t_snapshot(d);
	assert_string_equal(now, before);
	assert_int_equal(tx_text(d, "unlink b\n", NULL), 0);
	(void)r;
	free(before);
	free(now);
	drop(d);
}

/*
 * A failed barrier is never retried as if it had succeeded: the handle
 * latches the error and refuses work until fstx_recover().
 */
static void failed_barrier_latches(void **state)
{
	char *before, *d = fresh(&before), *now;
	fstx_domain *dom;
	fstx_tx *tx;

	(void)state;
	assert_int_equal(fstx_domain_open(d, &dom), 0);
	assert_int_equal(fstx_tx_new(dom, &tx), 0);
	fstx_tx_unlink(tx, "old");
	/* EIO from every fdatasync: barrier 1 fails, nothing changes */
	fx_os.fdatasync = fail_datasync;
	assert_int_equal(fstx_tx_commit(tx), -EIO);
	fx_os = fx_os_libc;
	fstx_tx_free(tx);
	now = t_snapshot(d);
	assert_string_equal(now, before);
	free(now);
	/* latched: the same handle refuses until recovery */
	assert_int_equal(fstx_tx_new(dom, &tx), 0);
	fstx_tx_unlink(tx, "old");
	assert_int_equal(fstx_tx_commit(tx), -EIO);
	fstx_tx_free(tx);
	assert_true(fstx_recover(dom) >= 0);
	assert_int_equal(fstx_tx_new(dom, &tx), 0);
	fstx_tx_unlink(tx, "old");
	assert_int_equal(fstx_tx_commit(tx), 0);
	fstx_tx_free(tx);
	fstx_domain_close(dom);
	free(before);
	drop(d);
}

/*
 * journal.c rule 3: a transaction that fails before its first step, whose
 * later steps put an object back at the name it had (an exchange across
 * directories, then a rename back), is rolled back: a step above the
 * progress mark whose inode is at its destination while another object
 * is at its source did not run.  (Found by fuzz_txtext: the rollback
 * took the untouched tree for damage, -EUCLEAN, and left the journal
 * hot.)
 */
static void failed_before_steps_that_return(void **state)
{
	char *before, *d = fresh(&before), *now;
	fstx_domain *dom;
	long r;

	(void)state;
	r = tx_text(d, "symlink hard ln\nrename b d/e/f exchange\n-rename b d/e/f\n", NULL);
	assert_int_equal(r, -EEXIST); /* ln is there */
	now = t_snapshot(d);
	assert_string_equal(now, before);
	free(now);
	assert_int_equal(fstx_domain_open(d, &dom), 0);
	assert_int_equal(fx_journal_hot(dom), 0);
	fstx_domain_close(dom);
	free(before);
	drop(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(failed_barrier_latches),
		cmocka_unit_test(failed_before_steps_that_return),
		cmocka_unit_test(rollback_every_position),
		cmocka_unit_test(error_injection),
		cmocka_unit_test(oom_injection),
		cmocka_unit_test(oom_recovery),
		cmocka_unit_test(wedge_on_failed_rollback),
	};

	corpus_load();
	return cmocka_run_group_tests_name("rollback", tests, NULL, NULL);
}
