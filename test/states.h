/* SPDX-License-Identifier: MIT */
/* states.h - checks against a sequence's expected trees (tests only;
 * include after <cmocka.h>). */
#ifndef FSTX_TEST_STATES_H
#define FSTX_TEST_STATES_H
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "faultos.h"
#include "txrun.h"

/* The tree at d must be st[j] for some j in [lo, hi]. */
static inline void in_range(const char *d, char **st, int lo, int hi,
			    const char *what, long k)
{
	char *now = t_snapshot(d);

	for (int j = lo; j <= hi; j++)
		if (!strcmp(now, st[j])) {
			free(now);
			return;
		}
	fail_msg("%s %ld: state is none of %d..%d\n%s", what, k, lo, hi, now);
}

/* The trees at d1 and d2 are the same (both shown if not). */
static inline void same_trees(const char *d1, const char *d2, const char *what,
			      long k)
{
	char *s1 = t_snapshot(d1), *s2 = t_snapshot(d2);

	if (strcmp(s1, s2))
		fail_msg("%s %ld: the trees differ\n%s---\n%s", what, k, s1, s2);
	free(s1);
	free(s2);
}

/* Recover as a reader does: fstx_read_begin() on a new handle. */
static inline int reader_recover(const char *dir)
{
	fstx_domain *d;
	int r = fstx_domain_open(dir, &d);

	if (r == 0) {
		r = fstx_read_begin(d);
		if (r == 0)
			fstx_read_end(d);
		fstx_domain_close(d);
	}
	return r;
}

/* A sequence of transaction texts, as a killed child runs it. */
struct seq {
	const char *const *tx;
	int n;
	int one;          /* on one handle throughout (kept fds, hint) */
	int close;        /* and close it at the end (its flush counts) */
	void (*prep)(void); /* in the child, first (small log limits) */
};

/*
 * Run the sequence in a child with faults installed (a kill at call `at`);
 * *ok is how many transactions returned 0 before it died.
 */
static inline int seq_killed(const char *d, const struct seq *q,
			     enum fo_mode mode, long at, int *ok)
{
	int fds[2], st, n = 0;
	char c;
	pid_t p;

	assert_int_equal(pipe(fds), 0);
	p = fork();
	if (p == 0) {
		fstx_domain *h = NULL;

		close(fds[0]);
		if (q->prep)
			q->prep();
		if (q->one && fstx_domain_open(d, &h) != 0)
			_exit(4);
		fo_install(mode, at, 0);
		for (int k = 0; k < q->n; k++) {
			if ((h ? tx_text_h(h, q->tx[k]) : tx_text(d, q->tx[k], NULL)) != 0)
				_exit(1);
			if (write(fds[1], "", 1) != 1)
				_exit(3);
		}
		if (h && q->close)
			fstx_domain_close(h);
		_exit(0);
	}
	close(fds[1]);
	while (read(fds[0], &c, 1) == 1)
		n++;
	close(fds[0]);
	waitpid(p, &st, 0);
	*ok = n;
	return st;
}

/* Recover after a kill, one of three ways by k: fstx_recover, a reader,
 * or the next transaction (one that changes nothing). */
static inline int recover_by(const char *d, long k)
{
	return k % 3 == 0 ? domain_recover(d) : k % 3 == 1 ? reader_recover(d) :
	       (int)tx_text(d, "option wal\nassert-exists a\n", NULL);
}

/*
 * One kill point: the sequence killed before (after) OS call k, recovered
 * one of three ways; the tree must be the state after the transactions
 * that returned 0, or after one more.  what names the case in failures.
 */
static inline void kill_point(const char *d, const struct seq *q, int after,
			      long k, char **st, const char *what)
{
	int ok, r;

	seq_killed(d, q, after ? FO_KILL_AFTER : FO_KILL_BEFORE, k, &ok);
	r = recover_by(d, k);
	if (r < 0)
		fail_msg("%s %ld: recovery %d", what, k, r);
	in_range(d, st, ok, ok + 1 > q->n ? q->n : ok + 1, what, k);
}

/* The file at path in domain d starts with the n bytes of want. */
static inline void expect_prefix(const char *d, const char *path,
				 const char *want, size_t n)
{
	char *got = t_read(d, path, NULL);

	assert_non_null(got);
	assert_memory_equal(got, want, n);
	free(got);
}
#endif
