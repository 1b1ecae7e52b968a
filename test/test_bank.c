/* SPDX-License-Identifier: MIT */
/*
 * test_bank.c - many processes, one domain: compare ops make optimistic
 * transfers safe, readers see only committed states, kill -9 loses
 * nothing.
 *
 * 16 account files hold decimal balances (1000 each).  W writer processes
 * each make FSTX_BANK_TX (default 1000) transfers: read two balances with
 * plain reads (no lock), then one transaction that asserts both contents
 * are still what was read (assert-data) and writes both new balances.  A
 * failed assertion (-ECANCELED) means another writer got there first: the
 * transfer is read again and retried.  Readers sum all accounts between
 * fstx_read_begin() and fstx_read_end(); the total must never differ.
 * A second round kills writers with SIGKILL part way and recovers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "txrun.h"

#define NACCT 16
#define START 1000
#define MAXW 8

struct tally { long commits, retries, aborts, errors, reads, bad_sums; };

/* Transaction flags of the round: the undo way, or the write-ahead log. */
static uint64_t bank_flags = FSTX_UT_STRICT;
static const char *mode(void)
{
	return bank_flags & FSTX_UT_LAZY ? " (lazy)" : bank_flags & FSTX_UT_WAL ? " (wal)" : "";
}

static long bank_tx(void)
{
	return t_env_long("FSTX_BANK_TX", 1000);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void acct_name(char *buf, size_t n, int i)
{
	snprintf(buf, n, "acct/%02d", i);
}

/* Read a balance without any lock: may be torn; the assertion decides. */
static int read_bal(int dfd, int i, char *buf, size_t n)
{
	char name[32];
	int fd;
	ssize_t got;

	acct_name(name, sizeof(name), i);
	fd = openat(dfd, name, O_RDONLY);
	if (fd < 0)
		return -1;
	got = read(fd, buf, n - 1);
	close(fd);
	if (got < 0)
		return -1;
	buf[got] = 0;
	return (int)got;
}

static void writer(const char *dir, long ntx, unsigned seed, int out)
{
	struct tally t = { 0 };
	fstx_domain *d;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);

	if (dfd < 0 || fstx_domain_open(dir, &d) < 0)
		_exit(2);
	for (long k = 0; k < ntx; k++) {
		int a = rand_r(&seed) % NACCT, b = (a + 1 + rand_r(&seed) % (NACCT - 1)) % NACCT;
		long amount = rand_r(&seed) % 50;
		int tries;

		for (tries = 0; tries < 1000; tries++) {
			char oa[32], ob[32], na[32], nb[32], pa[32], pb[32];
			int la = read_bal(dfd, a, oa, sizeof(oa)), lb = read_bal(dfd, b, ob, sizeof(ob));
			long va = atol(oa), vb = atol(ob), m = amount < va ? amount : va;
			fstx_tx *tx;
			int fa, fb, r;

			if (la < 0 || lb < 0)
				_exit(3);
			acct_name(pa, sizeof(pa), a);
			acct_name(pb, sizeof(pb), b);
			snprintf(na, sizeof(na), "%ld", va - m);
			snprintf(nb, sizeof(nb), "%ld", vb + m);
			if (fstx_tx_new(d, &tx) < 0 || fstx_tx_set_flags(tx, bank_flags) < 0)
				_exit(4);
			fstx_tx_assert_data(tx, pa, oa, (size_t)la);
			fstx_tx_assert_data(tx, pb, ob, (size_t)lb);
			fa = fstx_tx_open(tx, pa, O_WRONLY | O_TRUNC, 0);
			fstx_tx_pwrite(tx, fa, na, strlen(na), 0);
			fb = fstx_tx_open(tx, pb, O_WRONLY | O_TRUNC, 0);
			fstx_tx_pwrite(tx, fb, nb, strlen(nb), 0);
			r = fstx_tx_commit(tx);
			fstx_tx_free(tx);
			if (r == 0) {
				t.commits++;
				break;
			}
			if (r != -ECANCELED) {
				fprintf(stderr, "bank: commit failed: %s\n", strerror(-r));
				t.errors++;
				break;
			}
			t.retries++;
		}
		if (tries == 1000)
			t.aborts++;
		if (out >= 0 && k % 16 == 15 && write(out, &t, sizeof(t)) != sizeof(t))
			_exit(5);
	}
	fstx_domain_close(d);
	close(dfd);
	if (out >= 0 && write(out, &t, sizeof(t)) != sizeof(t))
		_exit(5);
	_exit(0);
}

static long sum_all(int dfd, int *ok)
{
	long sum = 0;

	*ok = 1;
	for (int i = 0; i < NACCT; i++) {
		char b[32];

		if (read_bal(dfd, i, b, sizeof(b)) <= 0)
			*ok = 0;
		sum += atol(b);
	}
	return sum;
}

/* Reader: sum under the shared lock until *stop file appears. */
static void reader(const char *dir, const char *stop, int out)
{
	struct tally t = { 0 };
	fstx_domain *d;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY), ok;

	if (dfd < 0 || fstx_domain_open(dir, &d) < 0)
		_exit(2);
	while (access(stop, F_OK) != 0) {
		long s;

		if ((s = fstx_read_begin(d)) < 0) {
			fprintf(stderr, "bank: fstx_read_begin failed: %s\n", strerror((int)-s));
			t.errors++;
			continue;
		}
		s = sum_all(dfd, &ok);
		fstx_read_end(d);
		t.reads++;
		if (s != (long)NACCT * START || !ok)
			t.bad_sums++;
		usleep(500);
	}
	fstx_domain_close(d);
	if (write(out, &t, sizeof(t)) != sizeof(t))
		_exit(5);
	_exit(0);
}

static void make_bank(const char *dir)
{
	char name[32], v[16];

	snprintf(v, sizeof(v), "%d", START);
	for (int i = 0; i < NACCT; i++) {
		acct_name(name, sizeof(name), i);
		t_write(dir, name, v, strlen(v));
	}
	assert_int_equal(domain_recover(dir), 0);
}

/* Last complete tally in pipe fd (writers send running totals). */
static struct tally drain(int fd)
{
	struct tally t = { 0 }, x;

	while (read(fd, &x, sizeof(x)) == sizeof(x))
		t = x;
	return t;
}

static void run_bank(int nkill)
{
	char *dir = t_mkdomain(), *stop;
	int wp[MAXW][2], rp[2][2], dfd, ok, st;
	pid_t w[MAXW], r[2];
	struct tally tot = { 0 }, x;
	long ntx = bank_tx(), killed = 0, recovered;
	double t0 = now_s();

	make_bank(dir);
	assert_true(asprintf(&stop, "%s.stop", dir) > 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pipe(rp[i]), 0);
		if ((r[i] = fork()) == 0) {
			close(rp[i][0]);
			reader(dir, stop, rp[i][1]);
		}
		close(rp[i][1]);
	}
	for (int i = 0; i < MAXW; i++) {
		assert_int_equal(pipe(wp[i]), 0);
		if ((w[i] = fork()) == 0) {
			close(wp[i][0]);
			writer(dir, nkill ? ntx * 100 : ntx, 7919u * (unsigned)i + 1, wp[i][1]);
		}
		close(wp[i][1]);
	}
	if (nkill) {
		/* Let them run, then kill -9 some in the middle of their work. */
		unsigned seed = 42;

		usleep(300 * 1000);
		for (int k = 0; k < MAXW; k++) {
			if (k < nkill || rand_r(&seed) % 4 == 0) {
				kill(w[k], SIGKILL);
				killed++;
			}
			usleep(20 * 1000);
		}
		for (int k = 0; k < MAXW; k++)
			kill(w[k], SIGKILL); /* the rest too: they were given no end */
	}
	for (int i = 0; i < MAXW; i++) {
		assert_int_equal(waitpid(w[i], &st, 0), w[i]);
		if (!nkill && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
			fail_msg("writer %d: status %d", i, st);
		x = drain(wp[i][0]);
		close(wp[i][0]);
		tot.commits += x.commits;
		tot.retries += x.retries;
		tot.aborts += x.aborts;
		tot.errors += x.errors;
	}
	/* Recovery after the kills; then the books must balance. */
	st = domain_recover(dir);
	assert_true(st == 0 || st == 1);
	recovered = st;
	usleep(50 * 1000); /* readers take a few more looks at the end state */
	st = open(stop, O_WRONLY | O_CREAT, 0644);
	assert_true(st >= 0);
	close(st);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(waitpid(r[i], &st, 0), r[i]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		x = drain(rp[i][0]);
		close(rp[i][0]);
		tot.reads += x.reads;
		tot.bad_sums += x.bad_sums;
		tot.errors += x.errors;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	assert_int_equal(sum_all(dfd, &ok), (long)NACCT * START);
	assert_true(ok);
	close(dfd);
	printf("bank: %d writers%s%s, %.1f s: %ld commits, %ld retries (assertion "
	       "failed), %ld aborts, %ld errors; %ld consistent reads, %ld bad "
	       "totals; total %ld unchanged%s\n", MAXW, mode(),
	       nkill ? " (kill -9 part way)" : "", now_s() - t0, tot.commits,
	       tot.retries, tot.aborts, tot.errors, tot.reads, tot.bad_sums,
	       (long)NACCT * START,
	       recovered ? " (recovery had work: a hot journal or an open record)" : "");
	assert_int_equal(tot.bad_sums, 0);
	assert_int_equal(tot.errors, 0);
	assert_true(tot.reads > 0);
	if (!nkill) {
		assert_int_equal(tot.commits, MAXW * ntx);
		assert_int_equal(tot.aborts, 0);
	} else {
		assert_true(killed >= nkill);
	}
	unlink(stop);
	t_rmtree(dir);
	free(stop);
	free(dir);
}

static void bank(void **state)
{
	(void)state;
	run_bank(0);
}

static void bank_kill(void **state)
{
	(void)state;
	run_bank(3);
}

/* Throughput of 1, 2, 4, 8 writers on disjoint files (figures only). */
static void scaling(void **state)
{
	long n = bank_tx() / 4 > 25 ? bank_tx() / 4 : 25;
	double base = 0;

	(void)state;
	for (int w = 1; w <= MAXW; w *= 2) {
		char *dir = t_mkdomain();
		pid_t pid[MAXW];
		double t0;
		int st;

		make_bank(dir);
		t0 = now_s();
		for (int i = 0; i < w; i++)
			if ((pid[i] = fork()) == 0) {
				fstx_domain *d;
				char name[32];

				if (fstx_domain_open(dir, &d) < 0)
					_exit(2);
				acct_name(name, sizeof(name), i);
				for (long k = 0; k < n; k++) {
					fstx_tx *tx;
					int fd;

					if (fstx_tx_new(d, &tx) < 0 ||
					    fstx_tx_set_flags(tx, bank_flags) < 0)
						_exit(3);
					fd = fstx_tx_open(tx, name, O_WRONLY, 0);
					fstx_tx_pwrite(tx, fd, "1000", 4, 0);
					if (fstx_tx_commit(tx) < 0)
						_exit(4);
					fstx_tx_free(tx);
				}
				fstx_domain_close(d);
				_exit(0);
			}
		for (int i = 0; i < w; i++) {
			assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
			assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		}
		{
			double tps = (double)(w * n) / (now_s() - t0);

			if (w == 1)
				base = tps;
			printf("bank: %d writer%s%s on disjoint files: %.0f tx/s (%.2fx one)\n",
			       w, w > 1 ? "s" : "", mode(), tps, tps / base);
		}
		t_rmtree(dir);
		free(dir);
	}
}

/* The same three with the write-ahead log (group commit). */
static int wal_on(void **state)
{
	(void)state;
	bank_flags = FSTX_UT_STRICT | FSTX_UT_WAL;
	return 0;
}

static int wal_off(void **state)
{
	(void)state;
	bank_flags = FSTX_UT_STRICT;
	return 0;
}

/* And lazily: plain reads see the tree after a flush, so transfers read
 * stale balances until one, and their compare ops make them retry. */
static int lazy_on(void **state)
{
	(void)state;
	bank_flags = FSTX_UT_STRICT | FSTX_UT_LAZY;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bank),
		cmocka_unit_test(bank_kill),
		cmocka_unit_test(scaling),
		cmocka_unit_test_setup_teardown(bank, wal_on, wal_off),
		cmocka_unit_test_setup_teardown(bank_kill, wal_on, wal_off),
		cmocka_unit_test_setup_teardown(scaling, wal_on, wal_off),
		cmocka_unit_test_setup_teardown(bank, lazy_on, wal_off),
		cmocka_unit_test_setup_teardown(bank_kill, lazy_on, wal_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
