/* SPDX-License-Identifier: MIT */
/*
 * test_race.c - a process that does not cooperate swaps symlinks leading
 * out of the domain in and out of place while transactions run.  fstx
 * resolves every path itself and opens with RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS, so whatever the interleaving, nothing outside the
 * domain may change: each transaction commits, or fails and rolls back,
 * or (if the swap hit its rollback) leaves a journal that recovery rolls
 * back once the swapper has stopped.
 *
 * The swapper exchanges (renameat2 RENAME_EXCHANGE) a directory with a
 * symlink to a sibling tree ("race" <-> "race.lnk") and, inside it, a file
 * with a symlink to an outside file ("race/f" <-> "race/f.lnk"), for
 * FSTX_RACE_MS milliseconds (default 2000), always an even number of
 * times, so the tree ends as it began.
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
#include "faultos.h"

static long race_ms(void)
{
	return t_env_long("FSTX_RACE_MS", 2000);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Child: swap pairs until the deadline; exit with the number of rounds. */
static void swapper(const char *dom, long ms)
{
	int fd = open(dom, O_RDONLY | O_DIRECTORY);
	double end = now_ms() + (double)ms;
	long rounds = 0;

	if (fd < 0)
		_exit(255);
	while (now_ms() < end) {
		/*
		 * f becomes a link out, then the whole directory does.  A
		 * transaction may have moved f away for a moment (its rename
		 * steps), so the file swaps are best effort.
		 */
		int fs = renameat2(fd, "race/f", fd, "race/f.lnk", RENAME_EXCHANGE) == 0;

		usleep(rounds % 50);
		if (renameat2(fd, "race", fd, "race.lnk", RENAME_EXCHANGE) < 0)
			_exit(254);
		usleep(rounds % 200); /* hold the hostile state a while */
		if (renameat2(fd, "race", fd, "race.lnk", RENAME_EXCHANGE) < 0)
			_exit(254);
		for (int k = 0; fs && k < 10000; k++)
			if (renameat2(fd, "race/f", fd, "race/f.lnk", RENAME_EXCHANGE) == 0)
				fs = 0;
			else
				usleep(100);
		if (fs)
			_exit(252);
		rounds++;
		usleep(rounds % 100);
	}
	_exit(rounds > 0 ? 0 : 253);
}

/*
 * The domain dom and its sibling out: race/ holds f and g, race.lnk points
 * at out, race/f.lnk at out/f; out holds every name a followed link would
 * reach.
 */
static void make_trees(const char *dom, const char *out)
{
	char *l;

	t_write(out, "f", "outside f\n", 10);
	t_write(out, "g", "outside g\n", 10);
	t_write(out, "c", "outside c\n", 10);
	t_write(out, "f.lnk", "outside f.lnk\n", 14);
	t_write(dom, "race/f", "inside f\n", 9);
	t_write(dom, "race/g", "inside g\n", 9);
	t_write(dom, "keep", "keep\n", 5);
	assert_true(asprintf(&l, "%s/race.lnk", dom) > 0);
	assert_int_equal(symlink("../outside", l), 0);
	free(l);
	assert_true(asprintf(&l, "%s/race/f.lnk", dom) > 0);
	assert_int_equal(symlink("../../outside/f", l), 0);
	free(l);
	assert_int_equal(domain_recover(dom), 0); /* creates .fstx/ */
}

static const char *const txs[] = {
	"open 0 race/f O_RDWR\npwrite 0 \"CHANGED\" 0\nclose 0\n",
	"truncate race/f 1\n",
	"setxattr race/f user.x \"evil\"\n",
	"open 0 race/f O_WRONLY|O_TRUNC\npwrite 0 \"T\" 0\n",
	"unlink race/g\nopen 0 race/g O_WRONLY|O_CREAT\npwrite 0 \"g\" 0\n",
	"mkdir race/m\nrename race/m race/n\nrmdir race/n\n",
	"rename race/f race/h\nrename race/h race/f\n",
	"open 0 race/k O_WRONLY|O_CREAT\npwrite 0 \"k\" 0\nclose 0\nrename race/k race/g\n",
	"link race/f race/f2\nunlink race/f2\n",
	"open 0 race/f O_RDONLY\nopen 1 race/c O_RDWR|O_CREAT\nclonerange 1 0 0 0 0\n",
	"symlink x race/s\nunlink race/s\nsetxattr race/f user.y \"1\"\nremovexattr race/f user.y\n",
};
#define NTXS (sizeof(txs) / sizeof(txs[0]))

static void swap_race(void **state)
{
	char *top = t_mkdomain(), *dom, *out, *before, *after;
	long ms = race_ms(), n = 0, ok = 0, failed = 0, hot = 0;
	int st, r;
	pid_t pid;

	(void)state;
	assert_true(asprintf(&dom, "%s/dom", top) > 0);
	assert_true(asprintf(&out, "%s/outside", top) > 0);
	make_trees(dom, out);
	before = t_snapshot(out);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		swapper(dom, ms);
	while (waitpid(pid, &st, WNOHANG) == 0) {
		r = (int)tx_text(dom, txs[n % NTXS], NULL);
		n++;
		if (r == 0)
			ok++;
		else if (r == -EUCLEAN || r == -EROFS)
			hot++;
		else
			failed++;
		assert_true(r > -1000); /* every text parses */
	}
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	r = domain_recover(dom);
	assert_true(r == 0 || r == 1);
	after = t_snapshot(out);
	assert_string_equal(after, before);
	/* The swapped names are back; the domain takes transactions again. */
	assert_int_equal(tx_text(dom, txs[0], NULL), 0);
	after = (free(after), t_snapshot(out));
	assert_string_equal(after, before);
	printf("race: %ld transactions in %ld ms against the swapper: %ld committed, "
	       "%ld failed, %ld met a journal left hot; outside unchanged\n",
	       n, ms, ok, failed, hot);
	assert_true(n > 0);
	free(before);
	free(after);
	t_rmtree(top);
	free(dom);
	free(out);
	free(top);
}


struct swap { int fd; const char *a, *b; int done; };

static void do_swap(void *arg)
{
	struct swap *w = arg;

	w->done = renameat2(w->fd, w->a, w->fd, w->b, RENAME_EXCHANGE) == 0;
}

/*
 * The same attack at every point: for each transaction and each of its OS
 * calls k, the link is swapped in right before call k (the directory, or
 * the file), the transaction runs on, the link is swapped back, and
 * recovery runs.  Outside never changes; inside, the tree is the state
 * before or the state after the transaction.
 */
static void swap_every_call(void **state)
{
	static const char *const pairs[][2] = {
		{ "race", "race.lnk" }, { "race/f", "race/f.lnk" },
	};
	char *top = t_mkdomain(), *dom, *out, *before, *in0, *in1, *now;
	long points = 0, committed = 0, refused = 0;

	(void)state;
	assert_true(asprintf(&dom, "%s/dom", top) > 0);
	assert_true(asprintf(&out, "%s/outside", top) > 0);
	for (size_t t = 0; t < NTXS; t++) {
		long calls;

		/* The before and after states of the undisturbed run. */
		make_trees(dom, out);
		before = t_snapshot(out);
		in0 = t_snapshot(dom);
		fo_install(FO_COUNT, 0, 0);
		assert_int_equal(tx_text(dom, txs[t], NULL), 0);
		calls = fo.calls;
		fo_remove();
		in1 = t_snapshot(dom);
		t_rmtree(top);
		for (size_t p = 0; p < 2; p++)
			for (long k = 1; k <= calls; k++) {
				struct swap w = { -1, pairs[p][0], pairs[p][1], 0 };
				long r;
				int rr;

				make_trees(dom, out);
				w.fd = open(dom, O_RDONLY | O_DIRECTORY);
				assert_true(w.fd >= 0);
				fo_install(FO_HOOK, k, 0);
				fo.hook = do_swap;
				fo.hook_arg = &w;
				r = tx_text(dom, txs[t], NULL);
				fo_remove();
				if (w.done)
					do_swap(&w);
				close(w.fd);
				rr = domain_recover(dom);
				assert_true(rr == 0 || rr == 1);
				now = t_snapshot(out);
				if (strcmp(now, before))
					fail_msg("tx %zu, swap %s at call %ld: outside changed",
						 t, pairs[p][0], k);
				free(now);
				now = t_snapshot(dom);
				if (strcmp(now, in0) && strcmp(now, in1))
					fail_msg("tx %zu, swap %s at call %ld (r %ld): torn",
						 t, pairs[p][0], k, r);
				free(now);
				points++;
				committed += r == 0;
				refused += r != 0;
				t_rmtree(top);
			}
		free(before);
		free(in0);
		free(in1);
	}
	printf("race: link swapped in before each of %ld OS calls of %zu transactions: "
	       "%ld committed, %ld failed and rolled back; outside unchanged, none torn\n",
	       points, NTXS, committed, refused);
	free(dom);
	free(out);
	free(top);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(swap_every_call),
		cmocka_unit_test(swap_race),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
