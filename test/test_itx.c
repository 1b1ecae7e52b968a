/* SPDX-License-Identifier: MIT */
/*
 * test_itx.c - interactive transactions (fstx_begin, src/itx.c).
 *
 *  - read-your-writes: after each builder call fstx_read()/fstx_stat() see
 *    the tree as the ops so far leave it (new files, overwrites, O_APPEND,
 *    truncates, renames of files and directories), while the tree on disk
 *    does not change until commit; after commit the disk says the same;
 *  - differential: for every committed corpus transaction, fstx_read() of
 *    every file before commit equals the file after commit, and names
 *    gone after commit read as ENOENT;
 *  - abort, and a process killed with a transaction open (or killed before
 *    every OS call of its commit): the tree is before (or after);
 *  - optimistic isolation: a read whose file another writer changes fails
 *    the next read and the commit with ECANCELED, changing nothing;
 *  - the lease: an open transaction blocks no reader or writer; after its
 *    lease, reads and commit fail with ETIMEDOUT and nothing changes.
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

#include "corpus.h"
#include "faultos.h"
#include "txrun.h"

/* fstx_read of the whole of path, NUL-terminated; NULL and *err if none. */
static char *rd(fstx_tx *tx, const char *path, ssize_t *got)
{
	char *b = calloc(1, 65536);
	ssize_t n;

	assert_non_null(b);
	n = fstx_read(tx, path, b, 65535, 0);
	*got = n;
	if (n < 0) {
		free(b);
		return NULL;
	}
	return b;
}

static void expect(fstx_tx *tx, const char *path, const char *want, size_t len)
{
	ssize_t n;
	char *b = rd(tx, path, &n);

	if (n != (ssize_t)len || memcmp(b, want, len))
		fail_msg("fstx_read(%s): %zd bytes, want %zu", path, n, len);
	free(b);
}

static void expect_err(fstx_tx *tx, const char *path, int err)
{
	ssize_t n;
	char *b = rd(tx, path, &n);

	free(b);
	if (n != -err)
		fail_msg("fstx_read(%s): %zd, want -%d", path, n, err);
}

static void read_your_writes(void **state)
{
	char *d = t_fresh(), *before = t_snapshot(d), *now, *a0, *c0;
	size_t alen, clen;
	fstx_domain *dom;
	fstx_tx *tx;
	struct stat st;
	int fd;

	(void)state;
	a0 = t_read(d, "a", &alen);
	c0 = t_read(d, "d/c", &clen);
	assert_int_equal(fstx_domain_open(d, &dom), 0);
	assert_int_equal(fstx_begin(dom, 0, &tx), 0);
	/* a new file */
	expect_err(tx, "n", ENOENT);
	fd = fstx_tx_open(tx, "n", O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	assert_int_equal(fstx_tx_pwrite(tx, fd, "hello", 5, 0), 0);
	expect(tx, "n", "hello", 5);
	assert_int_equal(fstx_tx_pwrite(tx, fd, "J", 1, 0), 0);
	expect(tx, "n", "Jello", 5);
	assert_int_equal(fstx_tx_close(tx, fd), 0);
	/* an overwrite in place, then O_APPEND */
	fd = fstx_tx_open(tx, "a", O_WRONLY, 0);
	assert_int_equal(fstx_tx_pwrite(tx, fd, "XY", 2, 1), 0);
	fstx_tx_close(tx, fd);
	{
		char want[64];

		memcpy(want, a0, alen);
		memcpy(want + 1, "XY", 2);
		expect(tx, "a", want, alen);
		fd = fstx_tx_open(tx, "a", O_WRONLY | O_APPEND, 0);
		fstx_tx_pwrite(tx, fd, "Z", 1, 0);
		fstx_tx_close(tx, fd);
		want[alen] = 'Z';
		expect(tx, "a", want, alen + 1);
	}
	/* renames of a file and of directories */
	assert_int_equal(fstx_tx_rename(tx, "n", "d/n2", 0), 0);
	expect_err(tx, "n", ENOENT);
	expect(tx, "d/n2", "Jello", 5);
	assert_int_equal(fstx_tx_mkdir(tx, "m", 0755), 0);
	fd = fstx_tx_open(tx, "m/f", O_WRONLY | O_CREAT, 0600);
	fstx_tx_pwrite(tx, fd, "f", 1, 0);
	fstx_tx_close(tx, fd);
	assert_int_equal(fstx_tx_rename(tx, "m", "m2", 0), 0);
	expect(tx, "m2/f", "f", 1);
	expect_err(tx, "m/f", ENOENT);
	assert_int_equal(fstx_tx_rename(tx, "d", "d3", 0), 0);
	expect(tx, "d3/c", c0, clen);
	expect(tx, "d3/n2", "Jello", 5);
	expect_err(tx, "d/c", ENOENT);
	/* truncate down, up */
	assert_int_equal(fstx_tx_truncate(tx, "big", 10), 0);
	assert_int_equal(fstx_stat(tx, "big", &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_size, 10);
	assert_int_equal(fstx_tx_truncate(tx, "big", 12), 0);
	{
		char b[16];

		assert_int_equal(fstx_read(tx, "big", b, sizeof(b), 8), 4);
		assert_int_equal(b[2], 0);
		assert_int_equal(b[3], 0);
	}
	assert_int_equal(fstx_stat(tx, "m2", &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	expect_err(tx, "m2", EISDIR);
	/* nothing on disk yet */
	now = t_snapshot(d);
	assert_string_equal(now, before);
	free(now);
	/* commit: the disk now says what the reads said */
	assert_int_equal(fstx_commit(tx), 0);
	assert_int_equal(fstx_commit(tx), -EALREADY);
	{
		size_t len;
		char *b = t_read(d, "d3/n2", &len);

		assert_int_equal(len, 5);
		assert_memory_equal(b, "Jello", 5);
		free(b);
		b = t_read(d, "big", &len);
		assert_int_equal(len, 12);
		free(b);
		b = t_read(d, "m2/f", &len);
		assert_int_equal(len, 1);
		free(b);
	}
	fstx_tx_free(tx);
	fstx_domain_close(dom);
	free(a0);
	free(c0);
	free(before);
	t_drop(d);
}

/* Lines "path mode=100..." of a snapshot: the regular files. */
static size_t files_of(const char *snap, char ***out)
{
	size_t n = 0;
	char **v = NULL;

	for (const char *l = snap; *l;) {
		const char *e = strchr(l, '\n'), *sp = strchr(l, ' ');

		if (!e)
			break;
		if (sp && sp < e && !strncmp(sp, " mode=100", 9)) {
			v = realloc(v, (n + 1) * sizeof(*v));
			assert_non_null(v);
			v[n++] = strndup(l, (size_t)(sp - l));
		}
		l = e + 1;
	}
	*out = v;
	return n;
}

/* An interactive transaction holding the ops of a parsed text. */
static fstx_tx *itx_of(fstx_domain *dom, const struct fx_txt *t)
{
	fstx_tx *tx;

	assert_int_equal(fstx_begin(dom, 0, &tx), 0);
	tx->ops = malloc((t->nops ? t->nops : 1) * sizeof(*tx->ops));
	assert_non_null(tx->ops);
	memcpy(tx->ops, t->ops, t->nops * sizeof(*tx->ops));
	tx->nops = tx->cops = t->nops;
	tx->maxfd = (int)t->num_fds;
	tx->flags = t->flags;
	return tx;
}

/*
 * fstx_read() and fstx_stat() with EIO or ENOSPC at each of their OS calls
 * (once, and from there on): each returns the right answer or an error,
 * never a wrong one; the tree is not changed; and once the fault is gone
 * (after fstx_recover() if the handle latched an error) the same reads
 * give the right answer.
 */
static void reads_under_errors(void **state)
{
	static const int errs[] = { EIO, ENOSPC };
	const char *text = "open 0 b O_WRONLY\npwrite 0 \"XY\" 0\nunlink old\n";
	char *d = t_fresh(), *before = t_snapshot(d), *now, buf[64];
	long calls, points = 0, failed = 0;
	struct fx_txt t;
	fstx_domain *dom;
	struct stat st;
	fstx_tx *tx;

	(void)state;
	assert_int_equal(fx_txt_parse(text, strlen(text), AT_FDCWD, &t), 0);
	assert_int_equal(fstx_domain_open(d, &dom), 0);
	tx = itx_of(dom, &t);
	fo_install(FO_COUNT, 0, 0);
	assert_int_equal(fstx_read(tx, "b", buf, sizeof(buf), 0), 12);
	assert_int_equal(fstx_stat(tx, "d/c", &st), 0);
	assert_int_equal(fstx_stat(tx, "old", &st), -ENOENT);
	calls = fo.calls;
	fo_remove();
	fstx_tx_free(tx);
	assert_true(calls > 0);
	for (int e = 0; e < 2; e++)
		for (int sticky = 0; sticky < 2; sticky++)
			for (long k = 1; k <= calls; k++) {
				ssize_t r1;
				int r2, r3;

				tx = itx_of(dom, &t);
				memset(buf, 0, sizeof(buf));
				fo_install(FO_FAIL, k, errs[e]);
				fo.sticky = sticky;
				r1 = fstx_read(tx, "b", buf, sizeof(buf), 0);
				r2 = fstx_stat(tx, "d/c", &st);
				r3 = fstx_stat(tx, "old", &st);
				fo_remove();
				if (r1 >= 0 && (r1 != 12 || memcmp(buf, "XYavo bravo\n", 12)))
					fail_msg("read with a fault at call %ld: wrong data", k);
				if (r2 >= 0 && (!S_ISREG(st.st_mode) || st.st_size != 8))
					fail_msg("stat with a fault at call %ld: wrong answer", k);
				if (r3 != -ENOENT && r3 >= 0)
					fail_msg("stat of a removed file found it (call %ld)", k);
				failed += r1 < 0 || r2 < 0 || r3 != -ENOENT;
				fstx_tx_free(tx);
				now = t_snapshot(d);
				assert_string_equal(now, before);
				free(now);
				/* the fault gone: right again (recovered if latched) */
				tx = itx_of(dom, &t);
				if (fstx_read(tx, "b", buf, sizeof(buf), 0) < 0) {
					assert_true(fstx_recover(dom) >= 0);
					assert_int_equal(fstx_read(tx, "b", buf, sizeof(buf), 0), 12);
				}
				assert_memory_equal(buf, "XYavo bravo\n", 12);
				assert_int_equal(fstx_stat(tx, "d/c", &st), 0);
				assert_int_equal(st.st_size, 8);
				fstx_tx_free(tx);
				points++;
			}
	printf("itx reads: EIO and ENOSPC at each of %ld OS calls, once and "
	       "sticky: %ld points, %ld reads failed, 0 wrong\n", calls, points, failed);
	assert_true(failed > 0);
	fstx_domain_close(dom);
	fx_txt_free(&t);
	free(before);
	t_drop(d);
}

static void same_as_commit(void **state)
{
	long txs = 0, files = 0, gone = 0;

	(void)state;
	for (size_t c = 0; c < ncx; c++) {
		char *d1 = t_fresh(), *d2 = t_fresh(), *after, *before, **fl, **bl;
		struct fx_txt t;
		fstx_domain *dom;
		fstx_tx *tx;
		size_t nf, nb;

		before = t_snapshot(d2);
		if (tx_text(d1, cx[c], NULL) != 0) {
			free(before);
			t_drop(d1);
			t_drop(d2);
			continue; /* a failing transaction shows nothing */
		}
		txs++;
		after = t_snapshot(d1);
		assert_int_equal(fx_txt_parse(cx[c], strlen(cx[c]), AT_FDCWD, &t), 0);
		assert_int_equal(fstx_domain_open(d2, &dom), 0);
		tx = itx_of(dom, &t);
		nf = files_of(after, &fl);
		for (size_t i = 0; i < nf; i++) {
			size_t len;
			char *want = t_read(d1, fl[i], &len), *got;
			ssize_t n;

			got = rd(tx, fl[i], &n);
			if (n == -EOPNOTSUPP) { /* written by a clonerange */
				free(want);
				free(fl[i]);
				continue;
			}
			if (n != (ssize_t)len || memcmp(got, want, len))
				fail_msg("corpus %zu: %s reads %zd bytes, %zu after commit",
					 c, fl[i], n, len);
			files++;
			free(got);
			free(want);
			free(fl[i]);
		}
		free(fl);
		/* files of before that are gone after */
		nb = files_of(before, &bl);
		for (size_t i = 0; i < nb; i++) {
			char *needle;
			size_t l = strlen(bl[i]);

			assert_true(asprintf(&needle, "\n%s ", bl[i]) > 0);
			if (!strstr(after, needle) &&
			    !(!strncmp(after, bl[i], l) && after[l] == ' ')) {
				ssize_t n;
				char *g = rd(tx, bl[i], &n);

				free(g);
				if (n != -ENOENT && n != -EISDIR)
					fail_msg("corpus %zu: %s is gone after commit, reads %zd",
						 c, bl[i], n);
				gone++;
			}
			free(needle);
			free(bl[i]);
		}
		free(bl);
		{
			char *now = t_snapshot(d2);

			assert_string_equal(now, before); /* reads changed nothing */
			free(now);
		}
		/* and the commit leaves what plain commit left */
		assert_int_equal(fstx_commit(tx), 0);
		{
			char *now = t_snapshot(d2);

			assert_string_equal(now, after);
			free(now);
		}
		fstx_tx_free(tx);
		fstx_domain_close(dom);
		fx_txt_free(&t);
		free(before);
		free(after);
		t_drop(d1);
		t_drop(d2);
	}
	printf("itx differential: %ld committed corpus tx, %ld files read before "
	       "commit equal to after, %ld removed names read ENOENT\n", txs, files, gone);
}

static void abort_and_death(void **state)
{
	char *d = t_fresh(), *before = t_snapshot(d), *now;
	fstx_domain *dom;
	fstx_tx *tx;
	int st, fd;
	pid_t p;

	(void)state;
	assert_int_equal(fstx_domain_open(d, &dom), 0);
	assert_int_equal(fstx_begin(dom, 0, &tx), 0);
	fstx_tx_unlink(tx, "a");
	fstx_tx_mkdir(tx, "q", 0700);
	expect_err(tx, "a", ENOENT);
	assert_int_equal(fstx_abort(tx), 0);
	assert_int_equal(fstx_commit(tx), -EALREADY);
	fstx_tx_free(tx);
	now = t_snapshot(d);
	assert_string_equal(now, before);
	free(now);
	/* killed with a transaction open */
	p = fork();
	if (p == 0) {
		fstx_domain *d2;
		fstx_tx *t2;

		if (fstx_domain_open(d, &d2) < 0 || fstx_begin(d2, 0, &t2) < 0)
			_exit(1);
		fstx_tx_unlink(t2, "old");
		fd = fstx_tx_open(t2, "b", O_WRONLY, 0);
		fstx_tx_pwrite(t2, fd, "dead", 4, 0);
		if (fstx_read(t2, "b", (char[8]){ 0 }, 4, 0) != 4)
			_exit(2);
		kill(getpid(), SIGKILL);
		_exit(3);
	}
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFSIGNALED(st));
	now = t_snapshot(d);
	assert_string_equal(now, before);
	free(now);
	/* killed before each OS call of its commit: before or after */
	{
		long calls, k, after_n = 0;
		char *after;
		const char *text = "unlink old\nopen 0 b O_WRONLY\npwrite 0 \"dead\" 0\n";

		{
			char *d3 = t_fresh();

			assert_int_equal(tx_text(d3, text, NULL), 0);
			after = t_snapshot(d3);
			t_drop(d3);
		}
		fo_install(FO_COUNT, 0, 0);
		{
			fstx_tx *t3;
			struct fx_txt t;
			char *d4 = t_fresh();
			fstx_domain *dm;

			assert_int_equal(fx_txt_parse(text, strlen(text), AT_FDCWD, &t), 0);
			assert_int_equal(fstx_domain_open(d4, &dm), 0);
			t3 = itx_of(dm, &t);
			assert_int_equal(fstx_commit(t3), 0);
			fstx_tx_free(t3);
			fstx_domain_close(dm);
			fx_txt_free(&t);
			t_drop(d4);
		}
		calls = fo.calls;
		fo_remove();
		for (k = 1; k <= calls; k++) {
			char *d5 = t_fresh();

			p = fork();
			if (p == 0) {
				struct fx_txt t;
				fstx_domain *dm;
				fstx_tx *t5;

				if (fx_txt_parse(text, strlen(text), AT_FDCWD, &t) < 0 ||
				    fstx_domain_open(d5, &dm) < 0)
					_exit(1);
				t5 = itx_of(dm, &t);
				fo_install(FO_KILL_BEFORE, k, 0);
				_exit(fstx_commit(t5) == 0 ? 0 : 1);
			}
			assert_int_equal(waitpid(p, &st, 0), p);
			assert_true(domain_recover(d5) >= 0);
			now = t_snapshot(d5);
			if (strcmp(now, before) && strcmp(now, after))
				fail_msg("itx commit killed at call %ld: torn", k);
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && strcmp(now, after))
				fail_msg("itx commit returned 0 at call %ld: not after", k);
			after_n += !strcmp(now, after);
			free(now);
			t_drop(d5);
		}
		printf("itx: commit killed before each of %ld OS calls: %ld after, "
		       "%ld before, 0 torn\n", calls, after_n, calls - after_n);
		free(after);
	}
	fstx_domain_close(dom);
	free(before);
	t_drop(d);
}

static void conflicts(void **state)
{
	char *d = t_fresh(), *mid;
	fstx_domain *dom;
	fstx_tx *tx;
	char b[64];
	int fd;

	(void)state;
	assert_int_equal(fstx_domain_open(d, &dom), 0);
	assert_int_equal(fstx_begin(dom, 0, &tx), 0);
	assert_true(fstx_read(tx, "a", b, sizeof(b), 0) > 0);
	expect_err(tx, "nothing", ENOENT);
	fd = fstx_tx_open(tx, "b", O_WRONLY, 0);
	fstx_tx_pwrite(tx, fd, "mine", 4, 0);
	/* another writer changes what was read */
	assert_int_equal(tx_text(d, "open 0 a O_WRONLY\npwrite 0 \"theirs\" 0\n", NULL), 0);
	mid = t_snapshot(d);
	assert_int_equal(fstx_read(tx, "b", b, sizeof(b), 0), -ECANCELED);
	assert_int_equal(fstx_commit(tx), -ECANCELED);
	{
		char *now = t_snapshot(d);

		assert_string_equal(now, mid);
		free(now);
	}
	fstx_tx_free(tx);
	/* a name read as absent, then created by another writer */
	assert_int_equal(fstx_begin(dom, 0, &tx), 0);
	expect_err(tx, "late", ENOENT);
	fd = fstx_tx_open(tx, "other", O_WRONLY | O_CREAT, 0644);
	fstx_tx_pwrite(tx, fd, "x", 1, 0);
	assert_int_equal(tx_text(d, "mkdir late\n", NULL), 0);
	assert_int_equal(fstx_commit(tx), -ECANCELED);
	fstx_tx_free(tx);
	fstx_domain_close(dom);
	free(mid);
	t_drop(d);
}

static void lease(void **state)
{
	char *d = t_fresh(), *before;
	fstx_domain *dom, *other;
	fstx_tx *tx;
	char b[16];
	int fd;

	(void)state;
	assert_int_equal(fstx_domain_open(d, &dom), 0);
	assert_int_equal(fstx_domain_open(d, &other), 0);
	assert_int_equal(fstx_begin(dom, 200, &tx), 0);
	assert_true(fstx_read(tx, "b", b, sizeof(b), 0) > 0);
	fd = fstx_tx_open(tx, "a", O_WRONLY, 0);
	fstx_tx_pwrite(tx, fd, "late", 4, 0);
	/* the open transaction blocks no reader and no writer */
	assert_int_equal(fstx_read_begin(other), 0);
	fstx_read_end(other);
	assert_int_equal(tx_text(d, "unlink old\n", NULL), 0);
	before = t_snapshot(d);
	usleep(300 * 1000);
	assert_int_equal(fstx_read(tx, "a", b, sizeof(b), 0), -ETIMEDOUT);
	assert_int_equal(fstx_commit(tx), -ETIMEDOUT);
	assert_int_equal(fstx_commit(tx), -EALREADY);
	{
		char *now = t_snapshot(d);

		assert_string_equal(now, before);
		free(now);
	}
	fstx_tx_free(tx);
	/* and an ordinary handle is not interactive */
	assert_int_equal(fstx_tx_new(dom, &tx), 0);
	assert_int_equal(fstx_read(tx, "a", b, sizeof(b), 0), -EINVAL);
	assert_int_equal(fstx_commit(tx), -EINVAL);
	fstx_tx_free(tx);
	fstx_domain_close(other);
	fstx_domain_close(dom);
	free(before);
	t_drop(d);
}

/*
 * The API's own path under allocation failure: a handle, a builder
 * transaction of the undo way, an interactive one (reads, a stat), a
 * write-ahead one, a reader's section and a sync, as an application makes
 * them, stopping at the first error.  Allocation k fails (once, or from k
 * on): every call that fails says -ENOMEM, and after recovery the tree is
 * as the transactions that returned 0 left it (or one more, where a commit
 * failed and left a journal that recovery completes).
 */
#define OOM_TXS 3

/* The scenario's first upto transactions; 0, or the first error. */
static int oom_scenario(const char *dir, int upto, int *stage, int *in_commit)
{
	fstx_domain *d;
	fstx_tx *tx;
	struct stat st;
	char b[4] = "";
	int r, fd;

	*stage = *in_commit = 0;
	if ((r = fstx_domain_open(dir, &d)) < 0)
		return r;
	if (upto < 1)
		goto read;
	if ((r = fstx_tx_new(d, &tx)) < 0)
		goto out;
	if ((r = fd = fstx_tx_open(tx, "a", O_RDWR, 0)) < 0 ||
	    (r = fstx_tx_pwrite(tx, fd, "ONE", 3, 0)) < 0 ||
	    (r = fstx_tx_setxattr(tx, "a", "user.o", "1", 1, 0)) < 0 ||
	    (r = fstx_tx_rename(tx, "old", "old2", 0)) < 0 ||
	    (r = fstx_tx_mkdir(tx, "m", 0755)) < 0 || (*in_commit = 1, 0) ||
	    (r = fstx_tx_commit(tx)) < 0)
		goto out_tx;
	fstx_tx_free(tx);
	*stage = 1;
	*in_commit = 0;
	if (upto < 2)
		goto read;
	if ((r = fstx_begin(d, 0, &tx)) < 0)
		goto out;
	if ((r = fd = fstx_tx_open(tx, "b", O_RDWR, 0)) < 0 ||
	    (r = fstx_tx_pwrite(tx, fd, "TWO", 3, 0)) < 0 ||
	    (r = (int)fstx_read(tx, "b", b, 3, 0)) < 0 ||
	    (r = fstx_stat(tx, "old2", &st)) < 0 ||
	    (r = fstx_tx_symlink(tx, "../a", "m/l")) < 0 || (*in_commit = 1, 0) ||
	    (r = fstx_commit(tx)) < 0)
		goto out_tx;
	fstx_tx_free(tx);
	assert_memory_equal(b, "TWO", 3);
	*stage = 2;
	*in_commit = 0;
	if (upto < 3)
		goto read;
	if ((r = fstx_tx_new(d, &tx)) < 0)
		goto out;
	if ((r = fstx_tx_set_flags(tx, FSTX_UT_STRICT | FSTX_UT_WAL)) < 0 ||
	    (r = fd = fstx_tx_open(tx, "d/c", O_WRONLY, 0)) < 0 ||
	    (r = fstx_tx_pwrite(tx, fd, "3", 1, 1)) < 0 || (*in_commit = 1, 0) ||
	    (r = fstx_tx_commit(tx)) < 0)
		goto out_tx;
	fstx_tx_free(tx);
	*stage = 3;
	*in_commit = 0;
read:
	if ((r = fstx_read_begin(d)) < 0)
		goto out;
	fstx_read_end(d);
	r = fstx_sync(d);
	goto out;
out_tx:
	fstx_tx_free(tx);
out:
	fstx_domain_close(d);
	return r;
}

static void out_of_memory(void **state)
{
	char *snap[OOM_TXS + 1], *d;
	long allocs = 0, points = 0, nomem = 0;
	int stage, in_commit;

	(void)state;
	/* the tree after each number of transactions, without faults */
	for (int s = 0; s <= OOM_TXS; s++) {
		d = t_fresh();
		fo_install(FO_COUNT, 0, 0);
		assert_int_equal(oom_scenario(d, s, &stage, &in_commit), 0);
		allocs = fo.allocs; /* the last: the whole scenario */
		fo_remove();
		assert_int_equal(stage, s);
		assert_true(domain_recover(d) >= 0);
		snap[s] = t_snapshot(d);
		t_drop(d);
		if (s)
			assert_string_not_equal(snap[s], snap[s - 1]);
	}
	for (long k = 1; k <= allocs; k++)
		for (int sticky = 0; sticky <= 1; sticky++) {
			char *now;
			int r, r2;

			d = t_fresh();
			fo_install(FO_COUNT, 0, 0);
			fo.alloc_at = k;
			fo.alloc_sticky = sticky;
			r = oom_scenario(d, OOM_TXS, &stage, &in_commit);
			fo_remove();
			points++;
			if (r != 0 && r != -ENOMEM)
				fail_msg("alloc %ld: %d at stage %d, not -ENOMEM", k, r, stage);
			nomem += r != 0;
			if ((r2 = domain_recover(d)) < 0)
				fail_msg("alloc %ld: recovery %d", k, r2);
			now = t_snapshot(d);
			if (strcmp(now, snap[stage]) &&
			    !(in_commit && stage < OOM_TXS && !strcmp(now, snap[stage + 1])))
				fail_msg("alloc %ld (sticky %d): %d committed, torn\n%s---\n%s",
					 k, sticky, stage, snap[stage], now);
			free(now);
			t_drop(d);
		}
	printf("oom: the API's path, %ld allocations failed in turn (once and from "
	       "then on): %ld points, %ld -ENOMEM, the rest committed; 0 torn\n",
	       allocs, points, nomem);
	for (int s = 0; s <= OOM_TXS; s++)
		free(snap[s]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(read_your_writes),
		cmocka_unit_test(same_as_commit),
		cmocka_unit_test(reads_under_errors),
		cmocka_unit_test(abort_and_death),
		cmocka_unit_test(conflicts),
		cmocka_unit_test(lease),
		cmocka_unit_test(out_of_memory),
	};

	corpus_load();
	return cmocka_run_group_tests_name("itx", tests, NULL, NULL);
}
