/* SPDX-License-Identifier: MIT */
/*
 * test_journal.c - damaged journals (journal.c rule 3).  A transaction is
 * killed after it began changing the tree, leaving a hot journal and a
 * progress mark.  Copies of that state are then damaged: the journal cut
 * at many lengths, one bit flipped at many offsets, its format version
 * changed.  Recovery of each copy must either refuse (-EUCLEAN) and write
 * nothing, or (where the damage hit bytes no record covers) roll back to
 * exactly the initial tree.  Never anything else.
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

static const char TX[] =
	"open 0 big O_RDWR\npwrite 0 \"overwritten in place\" 100\nclose 0\n"
	"setxattr a user.k \"v\"\nrename d/e empty exchange\nopen 1 n O_WRONLY|O_CREAT 0600\n"
	"pwrite 1 \"new\" 0\nclose 1\ntruncate d/c 3\n";

static char *jpath(const char *d)
{
	char *p;

	assert_true(asprintf(&p, "%s/.fstx/journal", d) > 0);
	return p;
}

static long jsize(const char *d)
{
	struct stat st;
	char *p = jpath(d);
	long n = stat(p, &st) == 0 ? (long)st.st_size : -1;

	free(p);
	return n;
}

static int has_mark(const char *d)
{
	char *cmd;
	int r;

	assert_true(asprintf(&cmd, "ls '%s/.fstx' | grep -q '^step\\.'", d) > 0);
	r = system(cmd) == 0;
	free(cmd);
	return r;
}

/* Kill the transaction before OS call k; 0 if it had not finished. */
static int crash_at(const char *d, long k)
{
	int st;
	pid_t p = fork();

	assert_true(p >= 0);
	if (p == 0) {
		fo_install(FO_KILL_BEFORE, k, 0);
		_exit(tx_text(d, TX, NULL) == 0 ? 0 : 1);
	}
	assert_int_equal(waitpid(p, &st, 0), p);
	return WIFEXITED(st) ? 1 : 0;
}

/* A fresh crash state in a new directory (records name inode numbers, so
 * a copy of a state would not be the same state). */
static char *make_hot(long k)
{
	char *d = t_mkdomain();

	t_populate(d);
	crash_at(d, k);
	return d;
}

/* Find the first crash point with changes made, a hot journal and a mark. */
static long hot_point(char **before)
{
	char *base = t_mkdomain();
	long total;

	t_populate(base);
	*before = t_snapshot(base);
	fo_install(FO_COUNT, 0, 0);
	assert_int_equal(tx_text(base, TX, NULL), 0);
	total = fo.calls;
	fo_remove();
	t_rmtree(base);
	free(base);
	for (long k = 1; k <= total; k++) {
		char *d = make_hot(k), *now = t_snapshot(d);
		int ok = jsize(d) > 0 && has_mark(d) && strcmp(now, *before);

		free(now);
		t_rmtree(d);
		free(d);
		if (ok)
			return k;
	}
	fail_msg("no crash point left a hot journal with changes");
	return -1;
}

struct tally { long refused, restored; };

/* Recover a damaged copy and check the outcome. */
static void check_copy(const char *copy, const char *before, struct tally *t,
		       const char *what, long where)
{
	char *pre = t_snapshot(copy), *post;
	int r = domain_recover(copy);

	post = t_snapshot(copy);
	if (r == -EUCLEAN) {
		if (strcmp(pre, post))
			fail_msg("%s at %ld: refused, but the tree changed", what, where);
		t->refused++;
	} else if (r >= 0) {
		if (strcmp(post, before))
			fail_msg("%s at %ld: recovered to a wrong tree", what, where);
		t->restored++;
	} else {
		fail_msg("%s at %ld: recovery failed with %d", what, where, r);
	}
	free(pre);
	free(post);
}

static void damaged_journals(void **state)
{
	char *before, *copy, *jp;
	long k = hot_point(&before), n, cases = 0;
	struct tally t = { 0, 0 };
	int fd;

	(void)state;
	/* undamaged: recovery restores the initial tree */
	copy = make_hot(k);
	n = jsize(copy);
	assert_true(domain_recover(copy) >= 0);
	{
		char *s = t_snapshot(copy);

		assert_string_equal(s, before);
		free(s);
	}
	t_rmtree(copy);
	free(copy);
	for (int kind = 0; kind < 3; kind++) {
		long step = kind == 0 ? 29 : 7;

		for (long off = 0; off < (kind == 2 ? 1 : n); off += step) {
			unsigned char c;
			unsigned v = 2;

			copy = make_hot(k);
			jp = jpath(copy);
			if (kind == 0) {          /* cut short */
				assert_int_equal(truncate(jp, off), 0);
			} else if (kind == 1) {   /* one bit flipped */
				fd = open(jp, O_RDWR);
				assert_true(fd >= 0);
				assert_int_equal(pread(fd, &c, 1, off), 1);
				c ^= (unsigned char)(1u << (off % 8));
				assert_int_equal(pwrite(fd, &c, 1, off), 1);
				close(fd);
			} else {                  /* a future format version */
				fd = open(jp, O_RDWR);
				assert_true(fd >= 0);
				assert_int_equal(pwrite(fd, &v, 4, 32 + 8), 4);
				close(fd);
			}
			check_copy(copy, before, &t,
				   kind == 0 ? "truncated" : kind == 1 ? "bit flip" : "version",
				   off);
			cases++;
			free(jp);
			t_rmtree(copy);
			free(copy);
		}
	}
	printf("journal damage: %ld cases on a %ld-byte journal, %ld refused, "
	       "%ld harmless (restored)\n", cases, n, t.refused, t.restored);
	assert_true(t.refused > cases / 2);
	free(before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(damaged_journals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
