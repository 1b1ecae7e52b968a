/* SPDX-License-Identifier: MIT */
/*
 * corpus.h - transactions used by the rollback, error-injection and crash
 * tests.  Each runs on a tree made by t_populate(): files a, b (hard link
 * "hard"), big (20000 bytes), old, d/c, d/e/f, directory empty, symlink
 * ln -> d/c, xattr user.k on a.  "@SRC@" in a transaction stands for a
 * directory outside every domain (made by corpus_load()) holding one,
 * src/x, src/sub/y and the symlink src/sub/l -> ../x.
 */
#ifndef FSTX_TEST_CORPUS_H
#define FSTX_TEST_CORPUS_H

static const char *const corpus[] = {
	/* 0: everything at once */
	"open 0 a O_RDWR\n"
	"pwrite 0 \"ALPHA\" 0\n"
	"pwrite 0 \"grown\" 50\n"
	"open 1 n O_WRONLY|O_CREAT|O_EXCL 0600\n"
	"pwrite 1 \"new file\" 0\n"
	"close 1\n"
	"setxattr n user.s \"sum\"\n"
	"setxattr a user.k \"v2\" replace\n"
	"removexattr a user.k\n"
	"mkdir m 0700\n"
	"symlink ../a m/l\n"
	"link b m/b2\n"
	"rename n m/n\n"
	"truncate big 100\n"
	"truncate d/c 20\n"
	"unlink old\n"
	"rmdir empty\n"
	"rename d d2\n"
	"open 2 d2/e/f O_RDWR|O_TRUNC\n"
	"pwrite 2 \"F\" 0\n"
	"open 3 big O_RDONLY\n"
	"open 4 m/clone O_RDWR|O_CREAT\n"
	"clonerange 4 3 0 50 0\n"
	"rename a b\n"
	"rename m d2/e exchange\n",
	/* 1: replace an object: write new, rename into place, unlink old */
	"open 0 obj.tmp O_WRONLY|O_CREAT|O_EXCL\n"
	"pwrite 0 \"version two\" 0\n"
	"close 0\n"
	"rename obj.tmp a\n"
	"unlink old\n",
	/* 2: overwrite in place, several files, xattrs */
	"open 0 a O_WRONLY\npwrite 0 \"A\" 0\nsetxattr a user.v \"1\"\n"
	"open 1 b O_WRONLY\npwrite 1 \"B\" 3\nsetxattr b user.v \"2\"\n"
	"open 2 d/c O_WRONLY\npwrite 2 \"C\" 1\nsetxattr d/c user.v \"3\"\n"
	"open 3 big O_WRONLY\npwrite 3 \"BIG\" 10000\nsetxattr big user.v \"4\"\n",
	/* 3: directory churn */
	"mkdir x\nmkdir x/y\nopen 0 x/y/z O_WRONLY|O_CREAT\npwrite 0 \"z\" 0\n"
	"rename d x/y/d\nrmdir empty\nmkdir empty 0711\nrename x/y/d/e e\n"
	"unlink e/f\nrmdir e\n",
	/* 4: truncate down and up, append */
	"truncate big 10\ntruncate big 5000\nopen 0 big O_WRONLY|O_APPEND\n"
	"pwrite 0 \"appended\" 0\ntruncate a 0\nopen 1 a O_WRONLY|O_APPEND\npwrite 1 \"x\" 0\n",
	/* 5: exchange and hard links */
	"rename a b exchange\nlink b b3\nunlink hard\nopen 0 b3 O_RDWR\npwrite 0 \"LINKED\" 0\n"
	"rename ln ln2\nsymlink b ln\n",
	/* 6: a transaction whose last op fails when it runs, not in the plan
	 * (a pwrite through a slot opened read-only: EBADF), after changes:
	 * the undo way rolls back all (one predicted to fail runs nothing,
	 * as 9 and 11) */
	"unlink a\nmkdir q\nopen 0 q/r O_WRONLY|O_CREAT\npwrite 0 \"r\" 0\n"
	"open 1 b O_RDONLY\npwrite 1 \"x\" 0\n",
	/* 7: O_TRUNC of a hard-linked file, then rename over it */
	"open 0 hard O_WRONLY|O_TRUNC\npwrite 0 \"hardtrunc\" 0\nclose 0\n"
	"open 1 t O_WRONLY|O_CREAT\npwrite 1 \"t\" 0\nclose 1\nrename t b\n",
	/* 8: compare ops that hold, then changes (one undoes what one asserts) */
	"assert-data a \"alpha\\n\"\nassert-xattr a user.k \"v1\"\nassert-absent n\n"
	"assert-exists ln\nassert-data d/e/f \"foxtrot\\n\"\nopen 0 a O_RDWR\n"
	"pwrite 0 \"ALPHA\" 0\nunlink old\nassert-exists old\nassert-absent d/e/g\n",
	/* 9: a compare op that fails after ops that would change the tree */
	"open 0 a O_RDWR\npwrite 0 \"X\" 0\nunlink old\nassert-data b \"wrong\"\n",
	/* 10: task ops: write (new and over an existing file), replace (over
	 * a file with an xattr, another with a mode), symlink switches */
	"write n1 \"new one\" 0600\nwrite big \"short\"\n"
	"replace a \"replaced alpha\"\nreplace d/c \"see\" 0640\n"
	"symlink d/e ln replace\nsymlink b fresh replace\nwrite hard \"via link\"\n",
	/* 11: task ops between explicit opens; the last op fails (rolls back) */
	"open 0 b O_RDWR\nwrite d/new \"x\"\npwrite 0 \"B\" 0\nreplace old \"o2\"\n"
	"close 0\nopen 1 big O_RDWR\nsymlink a ln replace\npwrite 1 \"G\" 7\n"
	"unlink missing\n",
	/* 12: copy-in and import from outside the domain (@SRC@: the tree
	 * corpus_load() makes), then a link switched to the imported tree */
	"copy-in \"@SRC@/one\" d/one\nimport \"@SRC@/src\" imp\n"
	"symlink imp ln replace\nreplace imp/x \"ex2\"\n",
	/* 13: an object put: new directory, new file with data past a hole
	 * and an xattr, an index overwritten in place (the log's names) */
	"mkdir objs 0750\nopen 0 objs/o1 O_WRONLY|O_CREAT|O_EXCL 0640\n"
	"pwrite 0 \"object one\" 0\npwrite 0 \"!\" 100\nclose 0\n"
	"setxattr objs/o1 user.v \"x1\"\nopen 1 a O_WRONLY\npwrite 1 \"idx\" 0\n",
	/* 14: new files in new nested directories and in an old one: O_TRUNC,
	 * truncate through the path, an empty one, a write past the end */
	"mkdir p\nmkdir p/q 0700\nopen 0 p/q/f1 O_WRONLY|O_CREAT|O_TRUNC\n"
	"pwrite 0 \"one\" 0\ntruncate p/q/f1 2\nopen 1 p/f2 O_RDWR|O_CREAT 0600\n"
	"pwrite 1 \"two\" 4\nopen 2 d/n4 O_WRONLY|O_CREAT|O_EXCL\nclose 2\n"
	"setxattr p/f2 user.w \"2\"\n",
	/* 15: a directory emptied and removed, a new symlink, an overwrite
	 * (the log's removals of directories and its symlinks) */
	"unlink d/e/f\nrmdir d/e\nsymlink c d/sl\nopen 0 a O_WRONLY\n"
	"pwrite 0 \"A\" 0\n",
	/* 16: a symlink switched, an empty directory removed, new files in a
	 * new directory (staged whole) */
	"symlink d/e ln replace\nrmdir empty\nmkdir nd 0750\n"
	"open 0 nd/x O_WRONLY|O_CREAT\npwrite 0 \"x\" 0\nclose 0\n"
	"open 1 nd/y O_WRONLY|O_CREAT\nclose 1\nsymlink x nd/l\n",
	/* 17: a directory built under a temporary name and published, a
	 * name of a hard-linked file removed, a directory of the tree moved,
	 * two files exchanged (the log's W18, W17, W20, W21) */
	"mkdir tmp 0755\nopen 0 tmp/x O_WRONLY|O_CREAT\npwrite 0 \"x\" 0\nclose 0\n"
	"mkdir tmp/s\nrename tmp pub\nunlink hard\nrename d/e e9\nrename a old exchange\n",
	/* 18: two directories exchanged, alone (the log's W21 on W20's
	 * terms), and a file written beside them */
	"rename d empty exchange\nopen 0 b O_WRONLY\npwrite 0 \"BESIDE\" 2\n",
	/* 19: a file made under a temporary name, linked to two names, the
	 * temporary one dropped (the log's W16 for a new file) */
	"open 0 tmpf O_WRONLY|O_CREAT\npwrite 0 \"obj\" 0\nclose 0\nlink tmpf d/o1\n"
	"link tmpf d/e/o2\nunlink tmpf\nsetxattr d/o1 user.h \"h\"\n",
	/* 20: a directory of the tree renamed, its files written before and
	 * after by either name (the log's W20 with data under it) */
	"open 0 d/e/f O_RDWR\npwrite 0 \"W\" 0\nrename d dd\nsetxattr dd/c user.x \"1\"\n"
	"truncate dd/e/f 5\nopen 1 dd/c O_WRONLY\npwrite 1 \"C\" 1\n",
	/* 21: a package manager's switch (a new directory takes d's place,
	 * the old one removed with what it holds) and a rotation (the log's
	 * W24 and W15's chains) */
	"mkdir n\nopen 0 n/c O_WRONLY|O_CREAT\npwrite 0 \"C2\" 0\nclose 0\nmkdir n/e\n"
	"open 1 n/e/f O_WRONLY|O_CREAT\npwrite 1 \"F2\" 0\nclose 1\nrename d d.old\n"
	"rename n d\nunlink d.old/c\nunlink d.old/e/f\nrmdir d.old/e\nrmdir d.old\n"
	"rename b old\nrename a b\n",
	/* 22: the switch by exchange, with a new directory (W24) */
	"mkdir n\nopen 0 n/x O_WRONLY|O_CREAT\npwrite 0 \"X\" 0\nclose 0\n"
	"rename n d exchange\nunlink n/c\nunlink n/e/f\nrmdir n/e\nrmdir n\n",
	/* 23: a directory kept aside while a new one is built at its name,
	 * and one renamed, then added to (W20 with new objects after it) */
	"rename d d.old\nmkdir d\nopen 0 d/c O_WRONLY|O_CREAT\npwrite 0 \"C2\" 0\nclose 0\n"
	"mkdir d/e\nsymlink ../c d/e/l\nrename empty e2\nopen 1 e2/n O_WRONLY|O_CREAT\n"
	"pwrite 1 \"N\" 0\n",
	/* 24: what a directory holds moved out of it, then the directory
	 * removed (W25) */
	"mkdir n\nrename d/c n/c\nrename d/e/f n/f\nrmdir d/e\nrmdir d\nrename ln n/ln\n",
};

#define NFIXED (sizeof(corpus) / sizeof(corpus[0]))
#define NGEN 44

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "helpers.h"

/*
 * Generated transactions: NGEN random mixes of all 13 ops over the
 * populated tree (fixed seed, so every run checks the same ones).  About
 * half the ops ignore their result ('-'), so a transaction goes on past
 * failures; the rest are strict and may force a rollback part way.
 */
static const char *gen_op(unsigned *seed, char *buf, size_t n, int *fds)
{
	static const char *const paths[] = {
		"a", "b", "big", "old", "hard", "ln", "d", "d/c", "d/e", "d/e/f",
		"empty", "n1", "n2", "m", "m/x", "d/n3", "empty/y",
	};
	const size_t np = sizeof(paths) / sizeof(paths[0]);
	const char *p = paths[rand_r(seed) % np], *q = paths[rand_r(seed) % np];
	int k = rand_r(seed) % 13, fd = rand_r(seed) % 3;

	switch (k) {
	case 0:
	case 1:
		if (fds[fd])
			snprintf(buf, n, "pwrite %d \"w%u\" %u", fd, rand_r(seed) % 100,
				 rand_r(seed) % 30000);
		else {
			static const char *const fl[] = { "O_RDWR", "O_WRONLY|O_CREAT",
				"O_RDWR|O_TRUNC", "O_WRONLY|O_APPEND", "O_RDWR|O_CREAT|O_EXCL" };
			snprintf(buf, n, "open %d %s %s", fd, p, fl[rand_r(seed) % 5]);
			fds[fd] = 1;
		}
		break;
	case 2:
		if (fds[fd]) {
			snprintf(buf, n, "close %d", fd);
			fds[fd] = 0;
		} else
			snprintf(buf, n, "unlink %s", p);
		break;
	case 3: snprintf(buf, n, "unlink %s", p); break;
	case 4: snprintf(buf, n, "link %s %s", p, q); break;
	case 5: snprintf(buf, n, "mkdir %s", p); break;
	case 6: snprintf(buf, n, "rmdir %s", p); break;
	case 7: snprintf(buf, n, "truncate %s %u", p, rand_r(seed) % 25000); break;
	case 8: snprintf(buf, n, "setxattr %s user.g \"%u\"", p, rand_r(seed) % 9); break;
	case 9: snprintf(buf, n, "removexattr %s user.k", p); break;
	case 10:
		if (fds[0] && fds[1])
			snprintf(buf, n, "clonerange 0 1 %u %u %u", rand_r(seed) % 100,
				 rand_r(seed) % 5000, rand_r(seed) % 100);
		else
			snprintf(buf, n, "rename %s %s", p, q);
		break;
	case 11: {
		static const char *const fl[] = { "", " noreplace", " exchange" };
		snprintf(buf, n, "rename %s %s%s", p, q, fl[rand_r(seed) % 3]);
		break;
	}
	default: snprintf(buf, n, "symlink %s %s", q, p); break;
	}
	return buf;
}

static char corpus_src[4096]; /* "@SRC@": see the top */

/* Fixed transaction i with @SRC@ replaced by corpus_src (quote-safe). */
static char *corpus_fixed(size_t i)
{
	const char *s = corpus[i], *at;
	size_t n = strlen(s) + 8 * strlen(corpus_src) + 1, k = 0;
	char *out = malloc(n);

	if (!out)
		abort();
	while ((at = strstr(s, "@SRC@"))) {
		memcpy(out + k, s, (size_t)(at - s));
		k += (size_t)(at - s);
		for (const char *c = corpus_src; *c; c++) {
			if (*c == '"' || *c == '\\')
				out[k++] = '\\';
			out[k++] = *c;
		}
		s = at + 5;
	}
	strcpy(out + k, s);
	return out;
}

/* Transaction i of the corpus (fixed ones first); caller frees. */
static char *corpus_tx(size_t i)
{
	/* generated transactions keep the random seeds they had with 10 fixed ones */
	unsigned seed = (unsigned)((i - NFIXED + 10) * 7919 + 17);
	int fds[3] = { 0 }, nops;
	size_t cap = 4096, len = 0;
	char *out, line[256];

	if (i < NFIXED)
		return corpus_fixed(i);
	out = malloc(cap);
	if (!out)
		abort();
	out[0] = 0;
	nops = 4 + rand_r(&seed) % 10;
	for (int k = 0; k < nops; k++) {
		const char *op = gen_op(&seed, line, sizeof(line), fds);
		int ignore = k < nops - 1 && rand_r(&seed) % 2;

		len += (size_t)snprintf(out + len, cap - len, "%s%s\n", ignore ? "-" : "", op);
	}
	return out;
}

/* How many corpus transactions a suite runs: FSTX_CORPUS (default all). */
static size_t corpus_count(void)
{
	const char *e = getenv("FSTX_CORPUS");
	size_t n = e && *e ? strtoul(e, NULL, 10) : NFIXED + NGEN;

	return n && n < NFIXED + NGEN ? n : NFIXED + NGEN;
}

static char *cx[NFIXED + NGEN];
static size_t ncx;

static void corpus_src_drop(void)
{
	if (corpus_src[0])
		t_rmtree(corpus_src);
}

/* The outside tree of "@SRC@" (once per process; removed at exit). */
static void corpus_src_make(void)
{
	char *o = t_mkdomain(), *p;

	snprintf(corpus_src, sizeof(corpus_src), "%s", o);
	free(o);
	t_write(corpus_src, "one", "one\n", 4);
	t_write(corpus_src, "src/x", "ex\n", 3);
	t_write(corpus_src, "src/sub/y", "why\n", 4);
	if (asprintf(&p, "%s/src/sub/l", corpus_src) < 0)
		abort();
	if (symlink("../x", p) < 0)
		abort();
	free(p);
	atexit(corpus_src_drop);
}

static void corpus_load(void)
{
	if (!corpus_src[0])
		corpus_src_make();
	ncx = corpus_count();
	for (size_t i = 0; i < ncx; i++)
		cx[i] = corpus_tx(i);
}

#endif
