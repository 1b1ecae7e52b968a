/* SPDX-License-Identifier: MIT */
/*
 * test_crash.c - kill -9 at every OS call.  For every corpus transaction,
 * a child runs it and is killed (SIGKILL, no cleanup) right before call k,
 * and in another run right after it, for every k; the parent then recovers
 * and checks the whole tree is exactly the before- or the after-state (and
 * after, if the child had seen a 0 return).  Recovery itself is killed at
 * every call too, then rerun.  The same again with each transaction in
 * crash-only mode (option crash-only: no barriers, same promise across a
 * kill).  Finally children are killed at random times.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "corpus.h"
#include "faultos.h"
#include "txrun.h"

struct tally { long tx, points, before, after; };

/* What a test adds to the fresh tree, and whether the final recovery
 * runs as after a reboot (journal.c rule 5c: rule 5a then judges). */
static void (*tree_extra)(const char *d);
static int rebooted;

static char *fresh(void)
{
	char *d = t_fresh();

	if (tree_extra)
		tree_extra(d);
	return d;
}

static int other_boot(char id[37])
{
	memcpy(id, "00000000-0000-0000-0000-000000000002", 37);
	return 0;
}

/* Run f in a child with the fault table set; returns the child's status. */
static int child(const char *d, const char *text, enum fo_mode mode, long at,
		 int recover_only)
{
	int st;
	pid_t p = fork();

	if (p == 0) {
		long r;

		fo_install(mode, at, 0);
		r = recover_only ? domain_recover(d) : tx_text(d, text, NULL);
		_exit(r == 0 ? 0 : r < 0 ? 1 : 2);
	}
	assert_true(p > 0);
	assert_int_equal(waitpid(p, &st, 0), p);
	return st;
}

/* How many OS calls corpus text makes on a fresh tree (in a child). */
static long count_calls(const char *text)
{
	char *d = fresh();
	int st, fds[2];
	long n = 0;
	pid_t p;

	assert_int_equal(pipe(fds), 0);
	p = fork();
	if (p == 0) {
		fo_install(FO_COUNT, 0, 0);
		tx_text(d, text, NULL);
		n = fo.calls;
		if (write(fds[1], &n, sizeof(n)) != sizeof(n))
			_exit(3);
		_exit(0);
	}
	waitpid(p, &st, 0);
	assert_int_equal(read(fds[0], &n, sizeof(n)), sizeof(n));
	close(fds[0]);
	close(fds[1]);
	t_drop(d);
	return n;
}

static void check(const char *d, const char *before, const char *after,
		  int committed, const char *what, size_t c, long k)
{
	char *now;
	int r;

	if (rebooted)
		fx_os.boot_id = other_boot;
	r = domain_recover(d);
	fx_os.boot_id = fx_os_libc.boot_id;

	if (r < 0)
		fail_msg("%s corpus %zu call %ld: recovery failed %d", what, c, k, r);
	now = t_snapshot(d);
	if (strcmp(now, before) && strcmp(now, after))
		fail_msg("%s corpus %zu call %ld%s: torn state\n%s--- before:\n%s"
			 "--- after:\n%s", what, c, k, rebooted ? " (rebooted)" : "",
			 now, before, after);
	if (committed && strcmp(now, after))
		fail_msg("%s corpus %zu call %ld: returned 0 but not after", what, c, k);
	free(now);
}

static void states_of(const char *tx, char **before, char **after)
{
	char *d = fresh();

	*before = t_snapshot(d);
	tx_text(d, tx, NULL);
	*after = t_snapshot(d);
	t_drop(d);
}

static void states(size_t c, char **before, char **after)
{
	states_of(cx[c], before, after);
}

/* Transaction tx (corpus c, for messages) killed before and after each of
 * its OS calls, and crash-only before each (modes: 3, or 1 for kills
 * before each call only); recovered, some recoveries killed too: before
 * or after. */
static void sweep_modes(const char *tx, size_t c, struct tally *tl, long *rec, int modes,
			long stride)
{
	struct tally t = *tl;
	long rec_points = *rec;

	{
		char *before, *after;
		char *nosync = malloc(strlen(tx) + 32);

		assert_non_null(nosync);
		sprintf(nosync, "option crash-only\n%s", tx);
		states_of(tx, &before, &after);
		t.tx++;
		for (int m = 0; m < modes; m++) {
			enum fo_mode mode = m == 1 ? FO_KILL_AFTER : FO_KILL_BEFORE;
			const char *text = m == 2 ? nosync : tx;
			long n = count_calls(text);

			for (long k = 1; k <= n; k += stride) {
				char *d = fresh();
				int st = child(d, text, mode, k, 0);
				int committed = WIFEXITED(st) && WEXITSTATUS(st) == 0;

				t.points++;
				/* kill the recovery of every few crash points, too */
				if (!journal_empty(d) && k % 3 == 0) {
					for (long j = 1; j <= 40; j++) {
						int rs = child(d, NULL, FO_KILL_BEFORE, j, 1);

						rec_points++;
						if (WIFEXITED(rs))
							break;
					}
				}
				check(d, before, after, committed,
				      m == 2 ? "crash-only kill-before" :
				      m ? "kill-after" : "kill-before", c, k);
				{
					char *now = t_snapshot(d);

					if (!strcmp(now, after))
						t.after++;
					else
						t.before++;
					free(now);
				}
				t_drop(d);
			}
		}
		free(before);
		free(after);
		free(nosync);
	}
	*tl = t;
	*rec = rec_points;
}

static void sweep_one(const char *tx, size_t c, struct tally *tl, long *rec)
{
	sweep_modes(tx, c, tl, rec, 3, 1);
}

static void kill_every_call(void **state)
{
	struct tally t = { 0 };
	long rec_points = 0;

	(void)state;
	for (size_t c = 0; c < ncx; c++)
		sweep_one(cx[c], c, &t, &rec_points);
	printf("kill: %ld tx, %ld crash points, %ld before-or-after (%ld before, "
	       "%ld after), 0 torn; %ld kills during recovery\n", t.tx, t.points,
	       t.before + t.after, t.before, t.after, rec_points);
}

/* tx[0..n) on the tree plus extra, in each epoch (sweep_modes()) */
static void sweep_set(const char *const *tx, size_t n, int modes, long stride,
		      void (*extra)(const char *d), const char *what)
{
	struct tally t = { 0 };
	long rec_points = 0;

	tree_extra = extra;
	for (rebooted = 0; rebooted < 2; rebooted++)
		for (size_t c = 0; c < n; c++)
			sweep_modes(tx[c], c, &t, &rec_points, modes, stride > 0 ? stride : 1);
	rebooted = 0;
	tree_extra = NULL;
	printf("kill, %s: %ld tx, %ld crash points, 0 torn\n", what, t.tx, t.points);
}

/* Is the whole corpus running (make crashtest)? */
static int whole_corpus(void)
{
	return corpus_count() == NFIXED + NGEN;
}

/* Kill before every call where the whole corpus runs, else before every
 * FSTX_CALL_STRIDE-th call times thin (make check). */
static long call_stride(long thin)
{
	return whole_corpus() ? 1 : t_env_long("FSTX_CALL_STRIDE", 1) * thin;
}

/*
 * Hand-written transactions tx[0..n) on the tree plus extra (NULL: none),
 * killed before and after each OS call and crash-only (where the whole
 * corpus runs: make crashtest; else tx[0..light), killed before every
 * FSTX_CALL_STRIDE-th call times thin: make check samples the calls on
 * all but its first filesystem), each recovered in the same epoch and
 * then as after a reboot (journal.c rule 5c, then 5a).
 */
static void sweep_hand(const char *const *tx, size_t n, size_t light, long thin,
		       void (*extra)(const char *d), const char *what)
{
	int whole = whole_corpus();

	sweep_set(tx, whole ? n : light, whole ? 3 : 1, call_stride(thin), extra, what);
}

/*
 * Renames among the names of one hard-linked file (b and hard) take the
 * undo way; killed part way, its undo must not take a name the file had
 * before for one a later rename gave it (journal.c rule 5a).
 */
static void kill_hard_names(void **state)
{
	static const char *const tx[] = {
		"rename b t9\nrename hard b\nrename t9 hard\n",
		"rename hard t9\nrename b hard\nrename t9 b\nopen 0 b O_WRONLY\n"
		"pwrite 0 \"w\" 0\n",
	};

	(void)state;
	sweep_hand(tx, 2, 2, 1, NULL, "names of one file");
}

/* d/h, another name of b, in a directory the transaction moves away. */
static void link_in_d(const char *d)
{
	t_link(d, "b", "d/h");
}

/*
 * The undo way: b renamed to d/h, a name its inode had before, under a
 * directory made again at d after the old one moved away.  Killed
 * before the rename ran, the old d/h holds the inode at the step's
 * destination: its undo must leave it (journal.c rule 5a judged it ran,
 * and moved d/h away; after a kill, rule 5c; after a reboot, the
 * directory on the way is not the step's).
 */
static void kill_link_under_moved(void **state)
{
	static const char *const tx[] = {
		"rename d d2\nmkdir d\nrename b d/h\n",
		"rename d d2\nmkdir d\nmkdir d/x\nrename d d3\nmkdir d\nrename hard d/h\n",
	};

	(void)state;
	sweep_hand(tx, 2, 1, 1, link_in_d, "a link under a moved directory");
}

/* ln a symlink to the directory d, not to d/c. */
static void ln_to_d(const char *d)
{
	char *l;

	if (asprintf(&l, "%s/ln", d) < 0)
		abort();
	assert_int_equal(unlink(l), 0);
	assert_int_equal(symlink("d", l), 0);
	free(l);
}

/*
 * The undo way: d exchanged with ln, a symlink to it, then a file moved
 * under the name ln (the directory now).  Killed before the renames
 * ran, the way to the last step's destination passes a symlink: rule 5a
 * finds nothing there (lstat's ELOOP, which wedged recovery after a
 * reboot).
 */
static void kill_through_symlink(void **state)
{
	static const char *const tx[] = { "rename d ln exchange\nrename a ln/a\n" };

	(void)state;
	sweep_hand(tx, 1, 1, 1, ln_to_d, "a way through a symlink");
}

/* d/h another name of b (link_in_d), y another name of d/e/f. */
static void links_in_d(const char *d)
{
	link_in_d(d);
	t_link(d, "d/e/f", "y");
}

/* p/q/z, and y another name of it. */
static void pq_linked(const char *d)
{
	t_write(d, "p/q/z", "zz\n", 3);
	t_link(d, "p/q/z", "y");
}

/*
 * The undo way (a trusted.* xattr): a directory moved away and back, a
 * file under it renamed between, another name of that file moved to its
 * old name, then a failure.  Killed in the rollback and recovered as
 * after a reboot, rule 5d asks whether the rename under the directory
 * ran, at a path (n/z2) that names no directory once n moved back
 * (journal.c moved_on(): y was lost).
 */
static void kill_rollback_moved_dir(void **state)
{
	static const char *const tx[] = {
		"setxattr a trusted.x \"v\"\nrename p/q n\nrename n/z n/z2\nrename n p/q\n"
		"rename y p/q/z\nrename nothere ln\n",
	};

	(void)state;
	sweep_hand(tx, 1, 1, 4, pq_linked, "a rollback under a directory moved away and back");
}

/*
 * Generated transactions of name changes on the undo way
 * (test/gen_names.py, t_names_tx(): make check runs a few of
 * test/names.tx, make crashtest more, and fresh sets): names given back,
 * links made at names a file had, directories moved away and back, half
 * of them failing at a random op.  Killed at every call, recovered in the
 * same epoch and as after a reboot: before every call (make check: every
 * 8th), not after, nor crash-only (the corpus covers those).
 */
static void kill_generated(void **state)
{
	char **tx;
	size_t n = t_names_tx(&tx);

	(void)state;
	assert_true(n > 0);
	sweep_set((const char *const *)tx, n, 1, call_stride(8), t_names_tree,
		  "generated name changes");
	for (size_t i = 0; i < n; i++)
		free(tx[i]);
	free(tx);
}

/*
 * The undo way: a directory renamed away and back around a change of a
 * name under it.  The last step puts its object at a name that object
 * (or another name of it) had before the transaction, in the same
 * directory: killed before the steps ran, only the directories' inodes
 * tell that the step did not (journal.c rule 5a, after a reboot; by path,
 * d2/c and d/c are different names).  The fourth: a name under a new
 * directory made at the path the old one left.
 */
static void kill_dir_round_trip(void **state)
{
	static const char *const tx[] = {
		"rename d d2\nrename d2/c d2/c2\nrename d2 d\nrename d/c2 d/c\n",
		"rename d e2\nunlink e2/h\nrename e2 d\nrename b d/h\n",
		"rename d e2\nrename e2/c c2\nrename e2 d\nrename c2 d/c\n",
		"rename d d2\nrename d2/e d2/e2\nmkdir d2/e\nrename d2 d\nrename y d/e/f\n",
	};

	(void)state;
	sweep_hand(tx, 4, 4, 4, links_in_d, "a directory moved away and back");
}

/* kill -9 from outside at random moments. */
static void kill_random(void **state)
{
	long points = 0;

	(void)state;
	srand((unsigned)time(NULL));
	for (size_t c = 0; c < ncx; c++) {
		char *before, *after;

		states(c, &before, &after);
		for (int i = 0; i < 25; i++) {
			char *d = fresh();
			int st;
			pid_t p = fork();

			if (p == 0) {
				long r = tx_text(d, cx[c], NULL);

				_exit(r == 0 ? 0 : 1);
			}
			usleep((useconds_t)(rand() % 3000));
			kill(p, SIGKILL);
			waitpid(p, &st, 0);
			check(d, before, after, WIFEXITED(st) && WEXITSTATUS(st) == 0,
			      "random-kill", c, i);
			points++;
			t_drop(d);
		}
		free(before);
		free(after);
	}
	printf("random kill: %zu tx, %ld kills, 0 torn\n", ncx, points);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kill_every_call),
		cmocka_unit_test(kill_hard_names),
		cmocka_unit_test(kill_link_under_moved),
		cmocka_unit_test(kill_through_symlink),
		cmocka_unit_test(kill_dir_round_trip),
		cmocka_unit_test(kill_rollback_moved_dir),
		cmocka_unit_test(kill_generated),
		cmocka_unit_test(kill_random),
	};

	corpus_load();
	if (getenv("FSTX_TEST_ONLY")) /* one test by name (a glob) */
		cmocka_set_test_filter(getenv("FSTX_TEST_ONLY"));
	return cmocka_run_group_tests_name("crash", tests, NULL, NULL);
}
