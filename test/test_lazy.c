/* SPDX-License-Identifier: MIT */
/*
 * test_lazy.c - lazy transactions (FSTX_UT_LAZY, src/wal.c W10).
 *
 *  - a lazy commit issues no barrier and changes no file in place; a
 *    reader, a transaction of another kind, fstx_sync() and
 *    fstx_domain_close() flush: one fdatasync, then the queued records in
 *    order;
 *  - differential: random sequences of overlapping overwrites, truncates
 *    and xattrs committed lazily (flushed, with coalescing) leave the tree
 *    that committing them one by one leaves; so do lazy transactions
 *    followed by every other kind (log, crash-only, undo way);
 *  - killed before and after every OS call, and EIO/ENOSPC at every call:
 *    recovery (fstx_recover, a reader, or the next transaction) leaves the
 *    state after a prefix that includes every transaction that returned 0;
 *  - power loss: a lost page of the log loses the record in it and every
 *    later one, never an earlier one (a prefix survives, whole records).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "faultos.h"
#include "txrun.h"
#include "states.h"
#include "wal.h"

#define NL 6
/* Lazy transactions on the t_populate() tree (a, b, big, d/c, old, ...). */
static const char *const lseq[NL] = {
	"option lazy\nopen 0 a O_WRONLY\npwrite 0 \"ONE\" 0\nsetxattr a user.n \"1\"\n",
	"option lazy\nopen 0 big O_RDWR\npwrite 0 \"two\" 19999\ntruncate d/c 3\n",
	"option lazy\nopen 0 a O_WRONLY\npwrite 0 \"THREE\" 2\nopen 1 b O_WRONLY\n"
	"pwrite 1 \"3\" 0\nopen 2 old O_WRONLY|O_APPEND\npwrite 2 \"ap\" 0\n", /* W14 */
	"option lazy\ntruncate a 4\nsetxattr a user.n \"4\"\nopen 0 d/c O_WRONLY\n"
	"pwrite 0 \"four\" 10\n",
	"option lazy\nopen 0 a O_WRONLY\npwrite 0 \"ONE\" 0\nopen 1 big O_WRONLY\n"
	"pwrite 1 \"5\" 0\n",
	"option lazy\nopen 0 a O_WRONLY|O_TRUNC\npwrite 0 \"six\" 0\nsetxattr b user.n \"6\"\n",
};

static const char *plain(const char *t)
{
	return t + strlen("option lazy\n");
}

/* st[0] before, st[k] after the first k (committed one by one, plain). */
static void lseq_states(char **st)
{
	char *d = t_fresh();

	st[0] = t_snapshot(d);
	for (int k = 0; k < NL; k++) {
		assert_int_equal(tx_text(d, plain(lseq[k]), NULL), 0);
		st[k + 1] = t_snapshot(d);
	}
	t_drop(d);
}

static void free_states(char **st)
{
	for (int k = 0; k <= NL; k++)
		free(st[k]);
}

/* ---- what a lazy commit does, and what flushes ---------------------------- */

static void queued_until_flush(void **state)
{
	char *st[NL + 1], *d = t_fresh(), *s;
	fstx_domain *h;

	(void)state;
	lseq_states(st);
	assert_int_equal(fstx_domain_open(d, &h), 0);
	fo_install(FO_COUNT, 0, 0);
	for (int k = 0; k < 3; k++)
		assert_int_equal(tx_text_h(h, lseq[k]), 0);
	/* committed, no barrier, nothing in place yet */
	assert_int_equal(fo.barriers, 0);
	in_range(d, st, 0, 0, "queued", 3);
	/* a reader flushes: one fdatasync, then the tree after all three */
	fo_install(FO_COUNT, 0, 0);
	assert_int_equal(fstx_read_begin(h), 0);
	fstx_read_end(h);
	assert_int_equal(fo.fdatasyncs, 1);
	assert_int_equal(fo.syncfses, 0);
	in_range(d, st, 3, 3, "reader", 3);
	/* fstx_sync() flushes */
	assert_int_equal(tx_text_h(h, lseq[3]), 0);
	in_range(d, st, 3, 3, "queued", 4);
	fo_install(FO_COUNT, 0, 0);
	assert_int_equal(fstx_sync(h), 0);
	assert_int_equal(fo.fdatasyncs, 1);
	in_range(d, st, 4, 4, "fstx_sync", 4);
	fo_install(FO_COUNT, 0, 0);
	assert_int_equal(fstx_sync(h), 0); /* nothing queued: no barrier */
	assert_int_equal(fo.barriers, 0);
	/* a transaction of another kind flushes first */
	assert_int_equal(tx_text_h(h, lseq[4]), 0);
	assert_int_equal(tx_text_h(h, "option wal\nassert-exists a\n"), 0);
	in_range(d, st, 5, 5, "other kind", 5);
	/* close flushes */
	assert_int_equal(tx_text_h(h, lseq[5]), 0);
	in_range(d, st, 5, 5, "queued", 6);
	fo_remove();
	fstx_domain_close(h);
	in_range(d, st, 6, 6, "close", 6);
	/* lazy with crash-only promises nothing coherent: refused */
	s = NULL;
	assert_true(asprintf(&s, "option crash-only\n%s", lseq[0]) > 0);
	assert_int_equal(tx_text(d, s, NULL), -EINVAL);
	free(s);
	{
		fstx_tx *tx;

		assert_int_equal(fstx_domain_open(d, &h), 0);
		assert_int_equal(fstx_tx_new(h, &tx), 0);
		assert_int_equal(fstx_tx_set_flags(tx, FSTX_UT_LAZY | FSTX_UT_NOSYNC),
				 -EINVAL);
		fstx_tx_free(tx);
		fstx_domain_close(h);
	}
	free_states(st);
	t_drop(d);
}

/* fstx_sync's barriers: counted, and a failed one returned and latched. */
static int fail_eio(int fd)
{
	(void)fd;
	return -EIO;
}

static void sync_barriers_fail(void **state)
{
	char *st[NL + 1], *d = t_fresh(), *c;
	fstx_domain *h;

	(void)state;
	lseq_states(st);
	/* crash-only commits: fstx_sync fsyncs what their records name (a
	 * checkpoint, wal.c W6), never the whole filesystem; once */
	assert_int_equal(fstx_domain_open(d, &h), 0);
	assert_true(asprintf(&c, "option crash-only\n%s", plain(lseq[0])) > 0);
	assert_int_equal(tx_text_h(h, c), 0);
	free(c);
	fo_install(FO_COUNT, 0, 0);
	assert_int_equal(fstx_sync(h), 0);
	assert_int_equal(fo.syncfses, 0);
	assert_true(fo.fsyncs >= 1);
	fo_install(FO_COUNT, 0, 0);
	assert_int_equal(fstx_sync(h), 0); /* nothing new: no barrier */
	assert_int_equal(fo.barriers, 0);
	fo_remove();
	/* a failing fsync: returned, and the handle latches it */
	assert_true(asprintf(&c, "option crash-only\n%s", plain(lseq[1])) > 0);
	assert_int_equal(tx_text_h(h, c), 0);
	free(c);
	fx_os.fsync = fail_eio;
	assert_int_equal(fstx_sync(h), -EIO);
	fx_os = fx_os_libc;
	assert_int_equal(fstx_sync(h), -EIO);
	assert_int_equal(tx_text_h(h, lseq[2]), -EIO);
	fstx_domain_close(h);
	assert_true(domain_recover(d) >= 0);
	in_range(d, st, 2, 2, "after a failed fsync", 0);
	/* a failing flush: the queue stays committed, recovery applies it */
	assert_int_equal(fstx_domain_open(d, &h), 0);
	assert_int_equal(tx_text_h(h, lseq[2]), 0);
	fx_os.fdatasync = fail_eio;
	assert_int_equal(fstx_sync(h), -EIO);
	fx_os = fx_os_libc;
	assert_int_equal(fstx_sync(h), -EIO); /* latched */
	in_range(d, st, 2, 2, "after a failed flush", 0);
	fstx_domain_close(h); /* latched: it does not flush */
	assert_true(domain_recover(d) >= 0);
	in_range(d, st, 3, 3, "recovered", 0);
	free_states(st);
	t_drop(d);
}

/* A flush applies the queue in order, skipping overwritten changes. */
static long data_pwrites, setxattrs;

static ssize_t count_pwrite(int fd, const void *b, size_t n, off_t o)
{
	data_pwrites += n == 3 && ((const char *)b)[0] == 'v';
	return fx_os_libc.pwrite(fd, b, n, o);
}

static int count_fsetxattr(int fd, const char *name, const void *v, size_t n,
			   int flags)
{
	setxattrs++;
	return fx_os_libc.fsetxattr(fd, name, v, n, flags);
}

static void flush_coalesces(void **state)
{
	char *d = t_fresh(), *a;
	fstx_domain *h;

	(void)state;
	assert_int_equal(fstx_domain_open(d, &h), 0);
	for (int k = 0; k < 20; k++) {
		char t[128];

		snprintf(t, sizeof(t), "option lazy\nopen 0 a O_WRONLY\npwrite 0 \"v%02d\" 0\n"
			 "setxattr a user.n \"%d\"\n", k, k);
		assert_int_equal(tx_text_h(h, t), 0);
	}
	data_pwrites = setxattrs = 0;
	fx_os.pwrite = count_pwrite;
	fx_os.fsetxattr = count_fsetxattr;
	assert_int_equal(fstx_sync(h), 0);
	fx_os = fx_os_libc;
	/* 20 records of 2 changes each: the last of each is all it takes */
	assert_int_equal(data_pwrites, 1);
	assert_int_equal(setxattrs, 1);
	a = t_read(d, "a", NULL);
	assert_non_null(a);
	assert_memory_equal(a, "v19ha\n", 6);
	free(a);
	fstx_domain_close(h);
	t_drop(d);
}

/* ---- differential --------------------------------------------------------- */

static unsigned rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (*s >> 16) & 0x7fff;
}

/* A random lazy transaction on x0..x2: overwrites, truncates, xattrs. */
static void random_tx(unsigned *s, char *t, size_t cap)
{
	int n = 1 + (int)(rnd(s) % 4), used;

	used = snprintf(t, cap, "option lazy\n");
	for (int i = 0; i < n; i++) {
		int f = (int)(rnd(s) % 3), k = (int)(rnd(s) % 8);

		if (k < 5) {
			int len = 1 + (int)(rnd(s) % 40), off = (int)(rnd(s) % 120);
			char c = (char)('a' + rnd(s) % 26);

			used += snprintf(t + used, cap - used, "open %d x%d O_WRONLY\npwrite %d \"",
					 i, f, i);
			for (int j = 0; j < len; j++)
				t[used++] = c;
			used += snprintf(t + used, cap - used, "\" %d\n", off);
		} else if (k < 6) {
			used += snprintf(t + used, cap - used, "truncate x%d %u\n", f,
					 rnd(s) % 150);
		} else {
			used += snprintf(t + used, cap - used, "setxattr x%d user.k%u \"%u\"\n",
					 f, rnd(s) % 2, rnd(s) % 1000);
		}
	}
}

static void random_differential(void **state)
{
	long seqs = 0, txs = 0;
	uint64_t saved = fx_lazy_max;

	(void)state;
	for (unsigned seed = 1; seed <= 150; seed++) {
		char *d1 = t_fresh(), *d2 = t_fresh(), t[4096];
		unsigned s = seed;
		fstx_domain *h;

		for (int f = 0; f < 3; f++) {
			char name[16];

			snprintf(name, sizeof(name), "x%d", f);
			t_write(d1, name, "0123456789", 10);
			t_write(d2, name, "0123456789", 10);
		}
		/* some runs flush part way (a small queue limit) */
		fx_lazy_max = seed % 3 ? saved : 600;
		assert_int_equal(fstx_domain_open(d2, &h), 0);
		for (int k = 0; k < 12; k++, txs++) {
			random_tx(&s, t, sizeof(t));
			assert_int_equal(tx_text(d1, plain(t), NULL), 0);
			assert_int_equal(tx_text_h(h, t), 0);
		}
		assert_int_equal(fstx_sync(h), 0);
		fstx_domain_close(h);
		same_trees(d1, d2, "lazy, seed", seed);
		t_drop(d1);
		t_drop(d2);
		seqs++;
	}
	fx_lazy_max = saved;
	printf("lazy differential: %ld random sequences, %ld transactions, same trees\n",
	       seqs, txs);
}

/* Lazy ones, then each other kind: the same tree as committing plainly. */
static void then_other_kinds(void **state)
{
	static const char *const next[] = {
		"option wal\nopen 0 a O_WRONLY\npwrite 0 \"W\" 1\n",
		"option crash-only\nopen 0 a O_WRONLY\npwrite 0 \"C\" 2\n",
		/* the undo way: it plans after the flush (sizes the queue changed) */
		"rename a a2\ntruncate a2 3\n",
		"open 0 n O_WRONLY|O_CREAT|O_EXCL 0600\npwrite 0 \"new\" 0\nclose 0\n",
	};

	(void)state;
	for (size_t k = 0; k < sizeof(next) / sizeof(next[0]); k++) {
		char *d1 = t_fresh(), *d2 = t_fresh();
		fstx_domain *h;

		assert_int_equal(fstx_domain_open(d2, &h), 0);
		for (int j = 0; j < NL; j++) {
			assert_int_equal(tx_text(d1, plain(lseq[j]), NULL), 0);
			assert_int_equal(tx_text_h(h, lseq[j]), 0);
		}
		assert_int_equal(tx_text(d1, next[k], NULL), 0);
		assert_int_equal(tx_text_h(h, next[k]), 0);
		same_trees(d1, d2, "then kind", (long)k); /* before close: it flushed */
		fstx_domain_close(h);
		t_drop(d1);
		t_drop(d2);
	}
}

/*
 * A compare op after queued lazy records judges the tree with them (read
 * your writes): on the handle that queued them and on another one, an
 * assert-data, assert-xattr or assert-absent that holds once they are
 * applied succeeds, one that does not fails with ECANCELED, nothing of its
 * transaction done; the same as without lazy.
 */
static void compare_after_queue(void **state)
{
	static const char *const q[] = {
		"option lazy\nopen 0 a O_WRONLY\npwrite 0 \"ZZ\" 0\n",
		"option lazy\nsetxattr b user.q \"7\"\n",
		"option lazy\nopen 0 old O_WRONLY|O_APPEND\npwrite 0 \"111\" 0\n",
	};
	static const char *const cmp[][2] = { /* holds, does not */
		{ "assert-data a \"ZZpha\\n\"\nopen 0 d/c O_WRONLY\npwrite 0 \"y\" 0\n",
		  "assert-data a \"alpha\\n\"\nopen 0 d/c O_WRONLY\npwrite 0 \"y\" 0\n" },
		{ "assert-xattr b user.q \"7\"\n", "assert-xattr b user.q \"8\"\n" },
		{ "assert-data old \"old\\n111\"\n", "assert-data old \"old\\n\"\n" },
	};

	(void)state;
	for (size_t k = 0; k < 3; k++)
		for (int other = 0; other < 2; other++)
			for (int holds = 0; holds < 2; holds++) {
				char *d = t_fresh(), *before;
				fstx_domain *h, *h2;

				assert_int_equal(fstx_domain_open(d, &h), 0);
				assert_int_equal(fstx_domain_open(d, &h2), 0);
				assert_int_equal(tx_text_h(h, q[k]), 0);
				if (!holds) { /* the tree with the queue applied */
					assert_int_equal(fstx_sync(h), 0);
					before = t_snapshot(d);
				}
				assert_int_equal(tx_text_h(other ? h2 : h, cmp[k][!holds]),
						 holds ? 0 : -ECANCELED);
				if (!holds) {
					char *after = t_snapshot(d);

					assert_string_equal(after, before);
					free(after);
					free(before);
				}
				fstx_domain_close(h2);
				fstx_domain_close(h);
				t_drop(d);
			}
}

/* ---- kill -9 and injected errors ------------------------------------------ */

static long run_lseq(const char *d, fstx_domain *h)
{
	for (int k = 0; k < NL; k++) {
		long r = h ? tx_text_h(h, lseq[k]) : tx_text(d, lseq[k], NULL);

		if (r != 0)
			return k;
	}
	return NL;
}

static long lseq_calls(void)
{
	char *d = t_fresh();
	fstx_domain *h;
	long n;

	assert_int_equal(fstx_domain_open(d, &h), 0);
	fo_install(FO_COUNT, 0, 0);
	assert_int_equal(run_lseq(d, h), NL);
	fstx_domain_close(h); /* its flush counts too */
	n = fo.calls;
	fo_remove();
	t_drop(d);
	return n;
}

static void lazy_prep(void)
{
	fx_lazy_max = 300; /* flushes inside the sequence */
}

static void kill_every_call(void **state)
{
	char *st[NL + 1];
	long n = lseq_calls(), points = 0;

	(void)state;
	lseq_states(st);
	for (int m = 0; m < 2; m++)
		for (long k = 1; k <= n; k++) {
			char *d = t_fresh();
			/* one handle, closed at the end; every committed lazy
			 * transaction is applied by recovery */
			struct seq q = { lseq, NL, 1, 1, lazy_prep };

			kill_point(d, &q, m, k, st,
				   m ? "lazy kill-after call" : "lazy kill-before call");
			points++;
			t_drop(d);
		}
	printf("lazy kill: %d tx in sequence, %ld crash points, 0 torn\n", NL, points);
	free_states(st);
}

static void errors_every_call(void **state)
{
	static const int errs[] = { EIO, ENOSPC };
	char *st[NL + 1];
	long n = lseq_calls(), points = 0, failed = 0;
	uint64_t saved = fx_lazy_max;

	(void)state;
	lseq_states(st);
	fx_lazy_max = 300;
	for (int e = 0; e < 2; e++)
		for (long k = 1; k <= n; k++) {
			char *d = t_fresh();
			fstx_domain *h;
			long ok;
			int r;

			assert_int_equal(fstx_domain_open(d, &h), 0);
			fo_install(FO_FAIL, k, errs[e]);
			ok = run_lseq(d, h);
			fstx_domain_close(h);
			fo_remove();
			failed += ok < NL;
			if ((r = domain_recover(d)) < 0)
				fail_msg("err %d call %ld: recovery %d", errs[e], k, r);
			in_range(d, st, (int)ok, ok + 1 > NL ? NL : (int)ok + 1, "lazy error call", k);
			points++;
			t_drop(d);
		}
	fx_lazy_max = saved;
	printf("lazy errors: EIO and ENOSPC: %ld fault points, %ld sequences cut short, "
	       "0 torn\n", points, failed);
	free_states(st);
}

/* ---- power loss ----------------------------------------------------------- */

static int other_boot(char id[37])
{
	memcpy(id, "00000000-0000-0000-0000-000000000002", 37);
	return 0;
}

/*
 * The queue's records reach the log's pages, which power loss may lose in
 * any order: overwrite 4 KiB of the log from each 8-byte offset with
 * other bytes, then recover as after a reboot.  The records before the page survive, the one in it and every
 * later one are lost (replay stops at the first invalid record).
 */
static void power_loss_keeps_prefix(void **state)
{
	char *st[NL + 1];
	uint64_t ends[NL];
	long points = 0;

	(void)state;
	lseq_states(st);
	for (uint64_t page = 0; ; page++) {
		char *d = t_fresh(), *p;
		int fds[2], ws, fd, lost;
		uint64_t cut = 1024 + page * 8;
		char junk[4096];
		pid_t c;

		assert_int_equal(pipe(fds), 0);
		c = fork();
		if (c == 0) { /* queue them all and vanish: no flush */
			fstx_domain *h;

			if (fstx_domain_open(d, &h) != 0)
				_exit(4);
			for (int k = 0; k < NL; k++) {
				if (tx_text_h(h, lseq[k]) != 0)
					_exit(1);
				ends[k] = h->wal_end;
			}
			if (write(fds[1], ends, sizeof(ends)) != sizeof(ends))
				_exit(3);
			_exit(0);
		}
		close(fds[1]);
		assert_int_equal(read(fds[0], ends, sizeof(ends)), sizeof(ends));
		close(fds[0]);
		waitpid(c, &ws, 0);
		assert_int_equal(WEXITSTATUS(ws), 0);
		if (cut >= ends[NL - 1]) {
			t_drop(d);
			break;
		}
		in_range(d, st, 0, 0, "queued, not applied", (long)page);
		assert_true(asprintf(&p, "%s/.fstx/wal", d) > 0);
		fd = open(p, O_WRONLY);
		assert_true(fd >= 0);
		memset(junk, 0x5a, sizeof(junk)); /* what the page held before */
		assert_int_equal(pwrite(fd, junk, sizeof(junk), (off_t)cut), (ssize_t)sizeof(junk));
		close(fd);
		free(p);
		for (lost = 0; lost < NL && ends[lost] <= cut; lost++)
			;
		fx_os.boot_id = other_boot;
		assert_true(domain_recover(d) >= 0);
		fx_os = fx_os_libc;
		in_range(d, st, lost, lost, "lost page at", (long)cut);
		points++;
		t_drop(d);
	}
	printf("lazy power loss: %ld lost pages, a prefix of whole records each time\n",
	       points);
	assert_true(points > 10);
	free_states(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(queued_until_flush),
		cmocka_unit_test(sync_barriers_fail),
		cmocka_unit_test(flush_coalesces),
		cmocka_unit_test(random_differential),
		cmocka_unit_test(then_other_kinds),
		cmocka_unit_test(compare_after_queue),
		cmocka_unit_test(kill_every_call),
		cmocka_unit_test(errors_every_call),
		cmocka_unit_test(power_loss_keeps_prefix),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
