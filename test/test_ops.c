/* SPDX-License-Identifier: MIT */
/*
 * test_ops.c - every op, differentially: each scenario runs once through
 * fstx and once as plain syscalls on a twin tree; the per-op results and
 * the whole trees must be identical.  Results are ignored ('-' prefix) so
 * that failing ops (ENOENT, EEXIST, ENOTEMPTY, ...) are compared too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "internal.h"
#include "fstx/btrfs_usertrans.h"
#include "faultos.h"
#include "helpers.h"
#include "txrun.h"
#include "wal.h"

static const char *const scenarios[] = {
	/* open / pwrite / close */
	"open 0 n O_WRONLY|O_CREAT|O_EXCL 0600\npwrite 0 \"hello\" 0\npwrite 0 \"XY\" 10\nclose 0",
	"open 0 a O_RDWR\npwrite 0 \"AL\" 0\npwrite 0 \"tail\" 100\nclose 0",
	"open 0 a O_WRONLY|O_TRUNC\npwrite 0 \"t\" 0",
	"open 0 a O_WRONLY|O_APPEND\npwrite 0 \"++\" 0",
	"open 0 a O_WRONLY|O_CREAT|O_EXCL\nopen 1 nope O_RDONLY\nopen 2 d O_WRONLY\nopen 3 d O_RDONLY\nclose 3",
	"open 0 ln O_RDWR\npwrite 0 \"via link\" 0",
	"open 0 ln O_RDWR|O_NOFOLLOW",
	"open 0 big O_RDWR\npwrite 0 \"zz\" 5000\npwrite 0 \"end\" 19999",
	"open 0 d/e O_RDWR|O_CREAT\nopen 1 d/e/g O_RDWR|O_CREAT\npwrite 1 \"g\" 0",
	"open 0 hard O_RDWR\npwrite 0 \"HARD\" 0",
	"open 0 a O_RDONLY\npwrite 0 \"no\" 0",
	/* unlink / rmdir */
	"unlink a\nunlink a\nunlink d\nunlink ln\nunlink hard",
	"rmdir empty\nrmdir empty\nrmdir d\nrmdir a\nrmdir nothere",
	"unlink d/e/f\nrmdir d/e\nunlink d/c\nrmdir d",
	/* link */
	"link a a2\nlink a a2\nlink d dd\nlink missing x\nlink ln ln2\nlink b d/e/b",
	/* mkdir */
	"mkdir m\nmkdir m\nmkdir m/n 0700\nmkdir x/y\nmkdir a/z\nmkdir ln",
	/* truncate */
	"truncate a 2\ntruncate big 100\ntruncate big 30000\ntruncate d 0\ntruncate nope 1\ntruncate ln 3",
	/* xattrs */
	"setxattr a user.k \"v2\"\nsetxattr a user.new \"n\" create\nsetxattr a user.new \"m\" create\n"
	"setxattr b user.r \"r\" replace\nremovexattr a user.k\nremovexattr a user.k\nsetxattr d user.dir \"D\"",
	"setxattr ln user.via \"l\"\nremovexattr nope user.x",
	/* clonerange */
	"open 0 a O_RDONLY\nopen 1 cl O_RDWR|O_CREAT\nclonerange 1 0 0 0 0\nclose 1",
	"open 0 big O_RDONLY\nopen 1 b O_RDWR\nclonerange 1 0 100 50 3\nclonerange 1 0 0 0 20",
	/* rename */
	"rename a a1\nrename a a1\nrename b a1\nrename d dd\nrename dd/c c2",
	"rename a b noreplace\nrename a b exchange\nrename d empty\nrename empty d\nrename a d",
	"rename d d/e/x\nrename b hard\nrename d empty exchange\nrename old n noreplace",
	"rename empty d\nmkdir e2\nrename d e2\nrename d/e e2",
	/* symlink */
	"symlink a s1\nsymlink a s1\nsymlink nowhere s2\nsymlink d/e s3\nopen 0 s3/f O_RDWR\npwrite 0 \"thru\" 0",
	"symlink s5 s4\nsymlink s4 s5\nopen 0 s4 O_RDONLY",
	/* mixtures: paths through renamed and new directories */
	"mkdir n\nopen 0 n/f O_WRONLY|O_CREAT\npwrite 0 \"nf\" 0\nrename n m\nopen 1 m/f O_RDWR\npwrite 1 \"M\" 0\nunlink m/f\nrmdir m",
	"rename d x\nopen 0 x/c O_RDWR\npwrite 0 \"C\" 0\nrename x/e x/e2\nunlink x/e2/f\nmkdir d\nrename x d/x",
	"unlink a\nopen 0 a O_WRONLY|O_CREAT\npwrite 0 \"new a\" 0\nlink a a3\nunlink a\nrename a3 a",
	"rename a tmp\nrename b a\nrename tmp b\nsetxattr a user.k \"swap\"",
	"rmdir empty\nmkdir empty 0700\nsymlink ../a empty/l\nopen 0 empty/l O_RDWR\npwrite 0 \"UP\" 0",
};

/* ---- the same ops as plain syscalls ------------------------------------ */

static char *at(const char *root, __s64 p)
{
	char *s;

	if (asprintf(&s, "%s/%s", root, (const char *)(intptr_t)p) < 0)
		abort();
	return s;
}

static __s64 neg(long r) { return r < 0 ? -errno : r; }

static __s64 direct_clone(int dst, int src, const __s64 *a)
{
	struct file_clone_range r = { .src_fd = src, .src_offset = (uint64_t)a[2],
				      .src_length = (uint64_t)a[3],
				      .dest_offset = (uint64_t)a[4] };
	off_t so = a[2], dof = a[4];
	size_t len = (size_t)a[3];
	struct stat st;

	if (ioctl(dst, FICLONERANGE, &r) == 0)
		return 0;
	if (!len) {
		fstat(src, &st);
		len = (size_t)st.st_size - (size_t)a[2];
	}
	while (len) {
		ssize_t n = copy_file_range(src, &so, dst, &dof, len, 0);

		if (n <= 0)
			return n < 0 ? -errno : 0;
		len -= (size_t)n;
	}
	return 0;
}

static __s64 direct(const char *root, const struct btrfs_ioctl_usertrans_op *op,
		    int *fds)
{
	const __s64 *a = op->args;
	char *p = NULL, *q = NULL;
	__s64 r;

	switch (op->op) {
	case BTRFS_IOC_UT_OP_OPEN:
		p = at(root, a[0]);
		r = neg(open(p, (int)a[1], (mode_t)a[2]));
		if (r >= 0) {
			fds[a[3]] = (int)r;
			r = a[3];
		}
		break;
	case BTRFS_IOC_UT_OP_CLOSE:
		r = fds[a[0]] < 0 ? -EBADF : neg(close(fds[a[0]]));
		fds[a[0]] = -1;
		break;
	case BTRFS_IOC_UT_OP_PWRITE:
		r = fds[a[0]] < 0 ? -EBADF
			: neg(pwrite(fds[a[0]], (void *)(intptr_t)a[1], (size_t)a[2], a[3]));
		break;
	case BTRFS_IOC_UT_OP_UNLINK:
		r = neg(unlink(p = at(root, a[0])));
		break;
	case BTRFS_IOC_UT_OP_LINK:
		r = neg(link(p = at(root, a[0]), q = at(root, a[1])));
		break;
	case BTRFS_IOC_UT_OP_MKDIR:
		r = neg(mkdir(p = at(root, a[0]), (mode_t)a[1]));
		break;
	case BTRFS_IOC_UT_OP_RMDIR:
		r = neg(rmdir(p = at(root, a[0])));
		break;
	case BTRFS_IOC_UT_OP_TRUNCATE:
		r = neg(truncate(p = at(root, a[0]), a[1]));
		break;
	case BTRFS_IOC_UT_OP_SETXATTR:
		r = neg(setxattr(p = at(root, a[0]), (char *)(intptr_t)a[1],
				 (void *)(intptr_t)a[2], (size_t)a[3], (int)a[4]));
		break;
	case BTRFS_IOC_UT_OP_REMOVEXATTR:
		r = neg(removexattr(p = at(root, a[0]), (char *)(intptr_t)a[1]));
		break;
	case BTRFS_IOC_UT_OP_CLONERANGE:
		r = fds[a[0]] < 0 || fds[a[1]] < 0 ? -EBADF
			: direct_clone(fds[a[0]], fds[a[1]], a);
		break;
	case FSTX_OP_RENAME:
		r = neg(renameat2(AT_FDCWD, p = at(root, a[0]), AT_FDCWD,
				  q = at(root, a[1]), (unsigned)a[2]));
		break;
	case FSTX_OP_SYMLINK:
		r = neg(symlink((char *)(intptr_t)a[0], q = at(root, a[1])));
		break;
	default:
		r = -EINVAL;
	}
	free(p);
	free(q);
	return r;
}

static void differential(void **state)
{
	(void)state;
	umask(022);
	for (size_t s = 0; s < sizeof(scenarios) / sizeof(scenarios[0]); s++) {
		char *A = t_mkdomain(), *B = t_mkdomain(), *text, *sa, *sb;
		struct fx_txt t;
		struct btrfs_ioctl_usertrans ut = { 0 };
		__s64 want[64];
		int fds[16], dfd;
		size_t n = 0;

		/* every op with its result ignored */
		for (const char *c = scenarios[s]; *c; c++)
			n += *c == '\n';
		text = calloc(1, strlen(scenarios[s]) + n + 3);
		char *o = text;
		*o++ = '-';
		for (const char *c = scenarios[s]; *c; c++) {
			*o++ = *c;
			if (*c == '\n')
				*o++ = '-';
		}
		t_populate(A);
		t_populate(B);
		assert_int_equal(fx_txt_parse(text, strlen(text), AT_FDCWD, &t), 0);
		for (int i = 0; i < 16; i++)
			fds[i] = -1;
		for (size_t i = 0; i < t.nops; i++)
			want[i] = direct(B, &t.ops[i], fds);
		for (int i = 0; i < 16; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		ut.num_ops = t.nops;
		ut.ops_ptr = (uint64_t)(uintptr_t)t.ops;
		ut.num_fds = t.num_fds;
		dfd = t_dirfd(A);
		assert_int_equal(fstx_usertrans(dfd, &ut), 0);
		close(dfd);
		for (size_t i = 0; i < t.nops; i++) {
			if (t.ops[i].rval != want[i])
				fail_msg("scenario %zu op %zu (%s): fstx %lld, kernel %lld\n%s",
					 s, i, fstx_op_name(t.ops[i].op),
					 (long long)t.ops[i].rval, (long long)want[i],
					 scenarios[s]);
		}
		sa = t_snapshot(A);
		sb = t_snapshot(B);
		if (strcmp(sa, sb))
			fail_msg("scenario %zu trees differ\n%s\n--- fstx:\n%s--- kernel:\n%s",
				 s, scenarios[s], sa, sb);
		free(sa);
		free(sb);
		fx_txt_free(&t);
		free(text);
		t_rmtree(A);
		t_rmtree(B);
		free(A);
		free(B);
	}
}

/* The ergonomic API: strict by default, results, failed op. */
static void ergonomic(void **state)
{
	char *d = t_mkdomain(), *got;
	fstx_domain *dom;
	fstx_tx *tx;
	int fd;

	(void)state;
	t_populate(d);
	assert_int_equal(fstx_domain_open(d, &dom), 0);
	assert_int_equal(fstx_tx_new(dom, &tx), 0);
	fd = fstx_tx_open(tx, "obj.new", O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_int_equal(fd, 0);
	assert_int_equal(fstx_tx_pwrite(tx, fd, "payload", 7, 0), 0);
	assert_int_equal(fstx_tx_close(tx, fd), 0);
	assert_int_equal(fstx_tx_setxattr(tx, "obj.new", "user.v", "1", 1, 0), 0);
	assert_int_equal(fstx_tx_rename(tx, "obj.new", "a", 0), 0);
	assert_int_equal(fstx_tx_unlink(tx, "old"), 0);
	assert_int_equal(fstx_tx_mkdir(tx, "m", 0700), 0);
	assert_int_equal(fstx_tx_symlink(tx, "a", "m/l"), 0);
	assert_int_equal(fstx_tx_link(tx, "b", "m/b"), 0);
	assert_int_equal(fstx_tx_truncate(tx, "big", 10), 0);
	assert_int_equal(fstx_tx_removexattr(tx, "a", "user.v"), 0);
	assert_int_equal(fstx_tx_commit(tx), 0);
	assert_int_equal(fstx_tx_num_ops(tx), 11);
	assert_int_equal(fstx_tx_result(tx, 1), 7);
	assert_int_equal(fstx_tx_failed_op(tx), -1);
	assert_int_equal(fstx_tx_commit(tx), -EALREADY);
	fstx_tx_free(tx);
	got = t_read(d, "a", NULL);
	assert_string_equal(got, "payload");
	free(got);

	/* strict: the second op fails, the first is rolled back */
	assert_int_equal(fstx_tx_new(dom, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, "b"), 0);
	assert_int_equal(fstx_tx_rmdir(tx, "m"), 0);
	assert_int_equal(fstx_tx_commit(tx), -ENOTEMPTY);
	assert_int_equal(fstx_tx_failed_op(tx), 1);
	assert_int_equal(fstx_tx_result(tx, 1), -ENOTEMPTY);
	fstx_tx_free(tx);
	got = t_read(d, "b", NULL);
	assert_non_null(got);
	free(got);

	/* expect(): the RFC's condition replaces strictness */
	assert_int_equal(fstx_tx_new(dom, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, "nothing"), 0);
	assert_int_equal(fstx_tx_expect(tx, BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE, -ENOENT), 0);
	assert_int_equal(fstx_tx_unlink(tx, "b"), 0);
	assert_int_equal(fstx_tx_commit(tx), 0);
	fstx_tx_free(tx);
	assert_null(t_read(d, "b", NULL));

	/* clonerange by fd index: big (10 bytes now) into a new file */
	assert_int_equal(fstx_tx_new(dom, &tx), 0);
	assert_int_equal(fstx_tx_open(tx, "big", O_RDONLY, 0), 0);
	assert_int_equal(fstx_tx_open(tx, "cl", O_RDWR | O_CREAT, 0644), 1);
	assert_int_equal(fstx_tx_clonerange(tx, 1, 0, 0, 10, 0), 0);
	assert_int_equal(fstx_tx_commit(tx), 0);
	assert_int_equal(fstx_tx_result(tx, 2), 0);
	fstx_tx_free(tx);
	{
		char *src = t_read(d, "big", NULL), *cl;
		size_t len;

		cl = t_read(d, "cl", &len);
		assert_int_equal(len, 10);
		assert_memory_equal(cl, src, 10);
		free(cl);
		free(src);
	}

	/* reserve(): the preflight takes the hint over its estimate */
	assert_int_equal(fstx_tx_new(dom, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, "cl"), 0);
	assert_int_equal(fstx_tx_reserve(tx, 1ull << 62, 0), 0);
	assert_int_equal(fstx_tx_commit(tx), -ENOSPC);
	fstx_tx_free(tx);
	got = t_read(d, "cl", NULL);
	assert_non_null(got); /* nothing changed */
	free(got);
	assert_int_equal(fstx_tx_new(dom, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, "cl"), 0);
	assert_int_equal(fstx_tx_reserve(tx, 4096, 1), 0);
	assert_int_equal(fstx_tx_commit(tx), 0);
	fstx_tx_free(tx);
	assert_null(t_read(d, "cl", NULL));
	assert_int_equal(fstx_tx_reserve(NULL, 1, 1), -EINVAL);

	/* argument errors */
	assert_int_equal(fstx_tx_new(dom, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, NULL), -EINVAL);
	assert_int_equal(fstx_tx_link(tx, "a", NULL), -EINVAL);
	assert_int_equal(fstx_tx_set_flags(tx, 1ULL << 40), -EINVAL);
	fstx_tx_free(tx);
	assert_int_equal(fstx_tx_new(NULL, &tx), -EINVAL);
	fstx_domain_close(dom);
	t_rmtree(d);
	free(d);
}

static void status(void **state)
{
	char *d = t_mkdomain();
	struct fstx_status st;
	fstx_domain *dom;

	(void)state;
	assert_int_equal(fstx_domain_open(d, &dom), 0);
	assert_int_equal(fstx_status(dom, &st), 0);
	assert_false(st.hot);
	assert_false(st.wedged);
	assert_true(st.block_size > 0);
	assert_true(st.fs_type[0] != 0);
	assert_int_equal(fstx_recover(dom), 0);
	fstx_domain_close(dom);
	assert_int_equal(fstx_domain_open("/nonexistent/dir", &dom), -ENOENT);
	assert_string_equal(fstx_op_name(12), "rename");
	assert_string_equal(fstx_op_name(99), "?");
	t_rmtree(d);
	free(d);
}

/*
 * Transactions of several processes never interleave: each one creates and
 * removes the same directory, so any overlap would fail one with EEXIST.
 */
static void serialised(void **state)
{
	char *d = t_mkdomain();
	enum { PROCS = 4, TXS = 40 };
	pid_t pids[PROCS];

	(void)state;
	for (int p = 0; p < PROCS; p++) {
		pids[p] = fork();
		if (pids[p] == 0) {
			fstx_domain *dom;
			int bad = 0;

			if (fstx_domain_open(d, &dom) < 0)
				_exit(2);
			for (int i = 0; i < TXS; i++) {
				char name[64];
				fstx_tx *tx;
				int fd;

				snprintf(name, sizeof(name), "L/p%d-%d", p, i);
				fstx_tx_new(dom, &tx);
				fstx_tx_mkdir(tx, "L", 0755);
				fd = fstx_tx_open(tx, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
				fstx_tx_pwrite(tx, fd, "x", 1, 0);
				fstx_tx_close(tx, fd);
				fstx_tx_unlink(tx, name);
				fstx_tx_rmdir(tx, "L");
				if (fstx_tx_commit(tx) != 0)
					bad++;
				fstx_tx_free(tx);
			}
			fstx_domain_close(dom);
			_exit(bad ? 1 : 0);
		}
	}
	for (int p = 0; p < PROCS; p++) {
		int st;

		assert_int_equal(waitpid(pids[p], &st, 0), pids[p]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	{
		char *l;

		assert_true(asprintf(&l, "%s/L", d) > 0);
		assert_int_equal(access(l, F_OK), -1);
		free(l);
	}
	t_rmtree(d);
	free(d);
}

static int no_clone(int a, int b, uint64_t c, uint64_t d, uint64_t e)
{
	(void)a; (void)b; (void)c; (void)d; (void)e;
	return -EOPNOTSUPP;
}

static ssize_t no_cfr(int a, off_t *b, int c, off_t *d, size_t e)
{
	(void)a; (void)b; (void)c; (void)d; (void)e;
	return -EXDEV;
}

/*
 * clonerange gives the same bytes by FICLONERANGE (where the filesystem
 * has it), by copy_file_range, and by read/write.
 */
static void clonerange_paths(void **state)
{
	char *want = NULL;

	(void)state;
	for (int mode = 0; mode < 3; mode++) {
		char *d = t_mkdomain(), *got;
		size_t len;

		t_populate(d);
		if (mode >= 1)
			fx_os.ficlonerange = no_clone;
		if (mode == 2)
			fx_os.copy_file_range = no_cfr;
		/* whole-file clone (len 0) into a new file, then a range */
		assert_int_equal(tx_text(d, "open 0 big O_RDONLY\n"
					"open 1 c O_RDWR|O_CREAT\n"
					"clonerange 1 0 0 0 0\n"
					"open 2 b O_RDWR\n"
					"clonerange 2 0 4096 4096 0\n", NULL), 0);
		fx_os = fx_os_libc;
		got = t_read(d, "c", &len);
		assert_int_equal(len, 20000);
		free(got);
		got = t_read(d, "b", &len);
		assert_int_equal(len, 4096);
		if (!want)
			want = got;
		else {
			assert_memory_equal(got, want, 4096);
			free(got);
		}
		t_rmtree(d);
		free(d);
	}
	free(want);
}

/*
 * Compare ops through the builder: each holds or fails with -ECANCELED
 * naming its index, against the tree as it was before the transaction
 * (whatever its position), and a failing one changes nothing.
 */
/*
 * A durable commit makes the handle's earlier crash-only transactions of
 * the undo way durable too (fstx(7)): it fsyncs the objects they changed,
 * held open since (trans.c fx_crash_only_pay()), never the whole
 * filesystem; the one after it has nothing left to pay.  The log's commit
 * and the undo way's pay the same debt.
 */
static long fsyncs_of(fstx_domain *h, const char *text, unsigned long long ino,
		      int *synced)
{
	long n;

	fo_install(FO_COUNT, 0, 0);
	assert_int_equal(tx_text_h(h, text), 0);
	fo_remove();
	assert_int_equal(fo.syncfses, 0);
	*synced = fo_synced(ino);
	n = fo.fsyncs;
	return n;
}

static unsigned long long ino_of(const char *dir, const char *name)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	assert_int_equal(lstat(p, &st), 0);
	return st.st_ino;
}

static void crash_only_then_durable(void **state)
{
	char *dir = t_mkdomain();
	unsigned long long c;
	fstx_domain *h;
	int synced;

	(void)state;
	t_populate(dir);
	assert_int_equal(fstx_domain_open(dir, &h), 0);
	/* an exchange: the undo way (wal.c W1) */
	assert_int_equal(fsyncs_of(h, "option crash-only\nmkdir d/c1 0755\n"
				      "rename d/c1 d/e exchange\n", 0, &synced), 0);
	c = ino_of(dir, "d"); /* what it changed: the names in d */
	/* the log's commit: d, then its record */
	assert_true(fsyncs_of(h, "mkdir d1 0755\n", c, &synced) >= 1);
	assert_true(synced);
	assert_int_equal(fsyncs_of(h, "mkdir d2 0755\n", c, &synced), 0);
	assert_false(synced);
	/* (its checkpoint of the log fsyncs what the log names, not d) */
	fsyncs_of(h, "option crash-only\nmkdir d/c2 0755\nrename d/c2 d/e exchange\n",
		  c, &synced);
	assert_false(synced);
	/* the undo way's commit pays it too */
	assert_true(fsyncs_of(h, "rename d2 d2b\n", c, &synced) >= 2);
	assert_true(synced);
	assert_true(fsyncs_of(h, "option wal\nopen 0 a O_WRONLY\n"
				 "pwrite 0 \"v\" 0\n", c, &synced) >= 0);
	assert_false(synced);
	/* crash-only through the log: its records ride the log's barrier */
	assert_int_equal(fsyncs_of(h, "option crash-only\noption wal\n"
				      "open 0 a O_WRONLY\npwrite 0 \"u\" 0\n",
				   0, &synced), 0);
	assert_int_equal(fsyncs_of(h, "mkdir d3 0755\n", 0, &synced), 0);
	fstx_domain_close(h);
	t_rmtree(dir);
	free(dir);
}

/*
 * Barriers are counted, not guessed: a durable transaction of the undo way
 * issues exactly the journal's two fdatasyncs and one fsync per object
 * changed, one of the log a single fdatasync, whatever its size (never
 * syncfs); a crash-only one none, and both leave the same tree.
 */
static void barriers(void **state)
{
	static const char *const text[] = {
		"rename a empty exchange\n", /* a file and a directory exchanged: the undo way */
		"open 0 a O_RDWR\npwrite 0 \"x\" 0\nsetxattr a user.k \"v9\"\n"
		"rename d/e d/c exchange\n", /* an exchange: the undo way */
		NULL, /* 1000 files in a new directory: 3001 ops */
	};
	char *big = malloc(1000 * 80 + 32), *p = big;

	(void)state;
	assert_non_null(big);
	p += sprintf(p, "mkdir many 0755\n");
	for (int i = 0; i < 1000; i++)
		p += sprintf(p, "open 0 many/f%d O_WRONLY|O_CREAT\npwrite 0 \"%d\" 0\n"
			     "close 0\n", i, i);
	for (size_t t = 0; t < 3; t++) {
		char *snap[2];

		for (int nosync = 0; nosync < 2; nosync++) {
			char *dir = t_mkdomain(), *src = (char *)(t == 2 ? big : text[t]);
			char *txt = malloc(strlen(src) + 32);

			assert_non_null(txt);
			sprintf(txt, "%s%s", nosync ? "option crash-only\n" : "", src);
			t_populate(dir);
			/* the undo way: nothing left in the log to checkpoint */
			assert_int_equal(tx_text(dir, "mkdir warm 0700\n"
						 "rename warm empty exchange\n", NULL), 0);
			fo_install(FO_COUNT, 0, 0);
			assert_int_equal(tx_text(dir, txt, NULL), 0);
			fo_remove();
			if (nosync) {
				assert_int_equal(fo.barriers, 0);
			} else if (t < 2) {
				/* barrier 2 fsyncs what changed (the first:
				 * the directory and .fstx/new/, which the
				 * exchange went through; the second: the file
				 * a, the directory d and .fstx/new/); after
				 * COMMIT, .fstx/ once, the marks' removal
				 * (journal.c rule 1) */
				assert_int_equal(fo.fdatasyncs, 2);
				assert_int_equal(fo.syncfses, 0);
				assert_int_equal(fo.fsyncs, t == 0 ? 3 : 4);
			} else {
				/* 1000 new files in a new directory: through
				 * the log, one fdatasync of its record (wal.c
				 * W1-W3); their fsyncs wait for a checkpoint */
				assert_int_equal(fo.fdatasyncs, 1);
				assert_int_equal(fo.syncfses, 0);
				assert_int_equal(fo.fsyncs, 0);
			}
			snap[nosync] = t_snapshot(dir);
			t_rmtree(dir);
			free(dir);
			free(txt);
		}
		assert_string_equal(snap[0], snap[1]);
		free(snap[0]);
		free(snap[1]);
	}
	free(big);
}

/* 1 if nobody holds dir's domain lock (tried from a child, LOCK_NB). */
static int lock_free(const char *dir)
{
	char path[512];
	int st;
	pid_t p;

	snprintf(path, sizeof(path), "%s/.fstx/lock", dir);
	p = fork();
	if (p == 0) {
		int fd = open(path, O_RDWR);

		_exit(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : 1);
	}
	assert_int_equal(waitpid(p, &st, 0), p);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/*
 * syncset.c S4, os.h fsync_each: the fsyncs of a set are issued together
 * (threads, with libc's fsync in the table): every descriptor is synced
 * and gets its own result (a bad one EBADF, the others 0); with the
 * table's fsync wrapped (a test's), each goes through the wrapper, one by
 * one, in order.
 */
static void fsync_each(void **state)
{
	char *dir = t_mkdomain(), *p;
	int fd[21], res[21];

	(void)state;
	for (int k = 0; k < 20; k++) {
		assert_true(asprintf(&p, "%s/f%d", dir, k) > 0);
		fd[k] = open(p, O_RDWR | O_CREAT, 0644);
		assert_true(fd[k] >= 0);
		assert_int_equal(write(fd[k], "x", 1), 1);
		free(p);
	}
	fd[20] = -1;
	memset(res, 1, sizeof(res));
	fx_os.fsync_each(fd, res, 21);
	for (int k = 0; k < 20; k++)
		assert_int_equal(res[k], 0);
	assert_int_equal(res[20], -EBADF);
	fo_install(FO_COUNT, 0, 0);
	memset(res, 1, sizeof(res));
	fx_os.fsync_each(fd, res, 21);
	fo_remove();
	assert_int_equal(fo.fsyncs, 21);
	for (int k = 0; k < 20; k++) {
		assert_int_equal(res[k], 0);
		close(fd[k]);
	}
	assert_int_equal(res[20], -EBADF);
	t_rmtree(dir);
	free(dir);
}

/*
 * Opening a handle (the first open makes .fstx/ and its files): EIO at
 * each of its OS calls, and each of its allocations failing, returns that
 * error or a handle, leaks nothing (ASan), and the next open, with no
 * fault, gives a handle that commits.
 */
static void open_faults(void **state)
{
	long calls, allocs, points = 0, failed = 0;
	fstx_domain *dom;
	fstx_tx *tx;
	char *d;

	(void)state;
	d = t_mkdomain();
	fo_install(FO_COUNT, 0, 0);
	assert_int_equal(fstx_domain_open(d, &dom), 0);
	fstx_domain_close(dom);
	calls = fo.calls;
	allocs = fo.allocs;
	fo_remove();
	t_rmtree(d);
	free(d);
	assert_true(calls > 0 && allocs > 0);
	for (long k = 1; k <= calls + allocs; k++) {
		int r;

		d = t_mkdomain();
		fo_install(k <= calls ? FO_FAIL : FO_COUNT, k, EIO);
		if (k > calls)
			fo.alloc_at = k - calls;
		r = fstx_domain_open(d, &dom);
		if (r == 0)
			fstx_domain_close(dom);
		fo_remove();
		if (r != 0 && r != (k <= calls ? -EIO : -ENOMEM))
			fail_msg("open with fault %ld: %d", k, r);
		failed += r != 0;
		points++;
		assert_int_equal(fstx_domain_open(d, &dom), 0);
		assert_int_equal(fstx_tx_new(dom, &tx), 0);
		assert_int_equal(fstx_tx_mkdir(tx, "m", 0755), 0);
		assert_int_equal(fstx_tx_commit(tx), 0);
		fstx_tx_free(tx);
		fstx_domain_close(dom);
		t_rmtree(d);
		free(d);
	}
	printf("open: EIO at each of %ld calls, each of %ld allocations failing: "
	       "%ld points, %ld failed, then a handle that commits\n",
	       calls, allocs, points, failed);
	assert_true(failed > 0);
}

/* A domain left with a hot journal: its rollback failed (sticky EIO).
 * The first fault point that leaves one is searched once, then reused. */
static char *hot_domain(char **before)
{
	static const char text[] = "open 0 a O_RDWR\npwrite 0 \"ALPHA\" 0\n"
				   "unlink old\nrename d/e empty exchange\nmkdir m\n";
	static long first = 1; /* the search's answer does not change */
	char *dir;

	for (long k = first; k < 200; k++) {
		dir = t_mkdomain();
		t_populate(dir);
		assert_int_equal(tx_text(dir, "mkdir warm\n", NULL), 0);
		*before = t_snapshot(dir);
		fo_install(FO_FAIL, k, EIO);
		fo.sticky = 1;
		tx_text(dir, text, NULL);
		fo_remove();
		if (!journal_empty(dir)) {
			first = k;
			return dir;
		}
		free(*before);
		t_rmtree(dir);
		free(dir);
	}
	fail_msg("no hot journal");
	return NULL;
}

/*
 * fstx_read_begin's error paths: an EIO at each OS call it makes (taking
 * the lock, reading the wedge mark and journal, rolling back the hot
 * journal) returns -EIO or succeeds, never leaves the lock held, and the
 * next recovery still restores the state before the torn transaction.
 */
static void read_begin_faults(void **state)
{
	long k, fails = 0, oks = 0;
	fstx_domain *d;
	char *dir, *before = NULL, *now;
	int r;

	(void)state;
	for (k = 1;; k++) {
		long calls;

		dir = hot_domain(&before);
		assert_int_equal(fstx_domain_open(dir, &d), 0);
		fo_install(FO_FAIL, k, EIO);
		r = fstx_read_begin(d);
		calls = fo.calls;
		fo_remove();
		if (r == 0) {
			assert_false(lock_free(dir));
			fstx_read_end(d);
			oks++;
		} else {
			assert_int_equal(r, -EIO);
			fails++;
		}
		assert_true(lock_free(dir));
		fstx_domain_close(d);
		assert_true(domain_recover(dir) >= 0);
		now = t_snapshot(dir);
		assert_string_equal(now, before);
		free(now);
		free(before);
		t_rmtree(dir);
		free(dir);
		if (calls < k) /* the fault was past the last call: done */
			break;
	}
	assert_true(fails > 10);
	/* wedged: refused, lock released */
	dir = t_mkdomain();
	assert_int_equal(fstx_domain_open(dir, &d), 0);
	{
		char w[512];
		int fd;

		snprintf(w, sizeof(w), "%s/.fstx/wedged", dir);
		fd = open(w, O_WRONLY | O_CREAT, 0600);
		assert_true(fd >= 0);
		close(fd);
	}
	assert_int_equal(fstx_read_begin(d), -EROFS);
	assert_true(lock_free(dir));
	fstx_domain_close(d);
	t_rmtree(dir);
	free(dir);
	printf("read_begin: %ld fault points, %ld -EIO, %ld consistent reads\n",
	       k, fails, oks);
}

/* Closed fd slots are reused: 10000 files one after another fit. */
static void fd_slots(void **state)
{
	char *dir = t_mkdomain(), name[32];
	fstx_domain *d;
	fstx_tx *tx;
	size_t len;
	char *got;
	int fd;

	(void)state;
	assert_int_equal(fstx_domain_open(dir, &d), 0);
	assert_int_equal(fstx_tx_new(d, &tx), 0);
	for (int i = 0; i < 10000; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		fd = fstx_tx_open(tx, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
		assert_true(fd >= 0 && fd < FSTX_MAX_FDS);
		assert_int_equal(fstx_tx_pwrite(tx, fd, name, strlen(name), 0), 0);
		assert_int_equal(fstx_tx_close(tx, fd), 0);
	}
	assert_int_equal(fstx_tx_commit(tx), 0);
	fstx_tx_free(tx);
	got = t_read(dir, "f9999", &len);
	assert_non_null(got);
	assert_int_equal(len, 5);
	assert_memory_equal(got, "f9999", 5);
	free(got);
	/* but no more than FSTX_MAX_FDS at once */
	assert_int_equal(fstx_tx_new(d, &tx), 0);
	for (int i = 0; i < FSTX_MAX_FDS; i++)
		assert_int_equal(fstx_tx_open(tx, "f1", O_RDONLY, 0), i);
	assert_int_equal(fstx_tx_close(tx, 7), 0);
	assert_int_equal(fstx_tx_open(tx, "f2", O_RDONLY, 0), 7);
	assert_int_equal(fstx_tx_commit(tx), 0);
	fstx_tx_free(tx);
	/* one more is refused, and poisons the transaction */
	assert_int_equal(fstx_tx_new(d, &tx), 0);
	for (int i = 0; i < FSTX_MAX_FDS; i++)
		assert_int_equal(fstx_tx_open(tx, "f1", O_RDONLY, 0), i);
	assert_int_equal(fstx_tx_open(tx, "f1", O_RDONLY, 0), -EMFILE);
	assert_int_equal(fstx_tx_close(tx, 7), 0);
	assert_int_equal(fstx_tx_open(tx, "f2", O_RDONLY, 0), 7);
	assert_int_equal(fstx_tx_commit(tx), -EMFILE);
	fstx_tx_free(tx);
	fstx_domain_close(d);
	t_rmtree(dir);
	free(dir);
}

static void assertions(void **state)
{
	char *dir = t_mkdomain(), *before, *now;
	fstx_domain *d;
	fstx_tx *tx;
	struct { int kind; const char *path, *a; int holds; } cases[] = {
		{ 0, "n", NULL, 1 }, { 0, "a", NULL, 0 }, { 0, "d/x/y", NULL, 1 },
		{ 1, "ln", NULL, 1 }, { 1, "empty", NULL, 1 }, { 1, "nope", NULL, 0 },
		{ 2, "a", "alpha\n", 1 }, { 2, "a", "alpha", 0 }, { 2, "a", "alpha\n\n", 0 },
		{ 2, "ln", "charlie\n", 1 }, { 2, "empty", "", 0 }, { 2, "nope", "", 0 },
		{ 3, "a", "v1", 1 }, { 3, "a", "v2", 0 }, { 3, "b", "v1", 0 },
	};

	(void)state;
	t_populate(dir);
	before = t_snapshot(dir);
	assert_int_equal(fstx_domain_open(dir, &d), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r, fd;

		assert_int_equal(fstx_tx_new(d, &tx), 0);
		fd = fstx_tx_open(tx, "a", O_RDWR, 0);
		assert_int_equal(fstx_tx_pwrite(tx, fd, "CHANGED", 7, 0), 0);
		assert_int_equal(fstx_tx_unlink(tx, "old"), 0);
		switch (cases[i].kind) {
		case 0: r = fstx_tx_assert_absent(tx, cases[i].path); break;
		case 1: r = fstx_tx_assert_exists(tx, cases[i].path); break;
		case 2: r = fstx_tx_assert_data(tx, cases[i].path, cases[i].a,
						strlen(cases[i].a)); break;
		default: r = fstx_tx_assert_xattr(tx, cases[i].path, "user.k", cases[i].a,
						  strlen(cases[i].a)); break;
		}
		assert_int_equal(r, 0);
		r = fstx_tx_commit(tx);
		now = t_snapshot(dir);
		if (cases[i].holds) {
			if (r != 0)
				fail_msg("case %zu: %s", i, strerror(-r));
			assert_string_not_equal(now, before);
			fstx_tx_free(tx);
			free(now);
			/* back to the initial tree */
			t_rmtree(dir);
			t_populate(dir);
			fstx_domain_close(d);
			assert_int_equal(fstx_domain_open(dir, &d), 0);
			continue;
		}
		if (r != -ECANCELED)
			fail_msg("case %zu: %d, not -ECANCELED", i, r);
		assert_int_equal(fstx_tx_failed_op(tx), 3);
		assert_int_equal(fstx_tx_result(tx, 3), -ECANCELED);
		assert_string_equal(now, before);
		free(now);
		fstx_tx_free(tx);
	}
	/* "unlink a" then "assert-exists a": the tree before the transaction */
	assert_int_equal(fstx_tx_new(d, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, "a"), 0);
	assert_int_equal(fstx_tx_assert_exists(tx, "a"), 0);
	assert_int_equal(fstx_tx_assert_absent(tx, "../a"), 0);
	assert_int_equal(fstx_tx_commit(tx), -EXDEV);
	fstx_tx_free(tx);
	assert_int_equal(fstx_tx_new(d, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, "a"), 0);
	assert_int_equal(fstx_tx_assert_exists(tx, "a"), 0);
	assert_int_equal(fstx_tx_commit(tx), 0);
	fstx_tx_free(tx);
	assert_int_equal(fstx_tx_new(d, &tx), 0);
	assert_int_equal(fstx_tx_assert_data(tx, "b", NULL, 1), -EINVAL);
	assert_int_equal(fstx_tx_assert_xattr(tx, "b", "user.k", "v", FSTX_MAX_XATTR + 1),
			 -EINVAL);
	fstx_tx_free(tx);
	fstx_domain_close(d);
	free(before);
	t_rmtree(dir);
	free(dir);
}

/*
 * Every public entry refuses a NULL handle or argument, and the builder a
 * bad one, with -EINVAL, before it changes anything; the free and close
 * functions take NULL.  A refused op is not added, and its transaction
 * is poisoned: its commit fails with that error, changing nothing.
 */
static void bad_arguments(void **state)
{
	static char big[FSTX_MAX_XATTR + 1];
	char *d = t_mkdomain(), *before, *after;
	struct fstx_status st;
	fstx_domain *dom;
	fstx_tx *tx;
	struct stat sb;
	char buf[4];
	int dfd;

	(void)state;
	t_populate(d);
	before = t_snapshot(d);
	dfd = t_dirfd(d);
	assert_int_equal(fstx_domain_open(NULL, &dom), -EINVAL);
	assert_int_equal(fstx_domain_open(d, NULL), -EINVAL);
	assert_int_equal(fstx_domain_openfd(dfd, NULL), -EINVAL);
	assert_int_equal(fstx_usertrans(dfd, NULL), -EINVAL);
	assert_int_equal(fstx_sync(NULL), -EINVAL);
	assert_int_equal(fstx_recover(NULL), -EINVAL);
	assert_int_equal(fstx_read_begin(NULL), -EINVAL);
	fstx_read_end(NULL);
	assert_int_equal(fstx_status(NULL, &st), -EINVAL);
	assert_int_equal(fstx_tx_new(NULL, &tx), -EINVAL);
	assert_int_equal(fstx_begin(NULL, 0, &tx), -EINVAL);
	fstx_tx_free(NULL);
	fstx_domain_close(NULL);
	assert_int_equal(fstx_tx_open(NULL, "a", O_RDONLY, 0), -EINVAL);
	assert_int_equal(fstx_tx_close(NULL, 0), -EINVAL);
	assert_int_equal(fstx_tx_unlink(NULL, "a"), -EINVAL);
	assert_int_equal(fstx_tx_expect(NULL, 0, 0), -EINVAL);
	assert_int_equal(fstx_tx_set_flags(NULL, 0), -EINVAL);
	assert_int_equal(fstx_tx_reserve(NULL, 0, 0), -EINVAL);
	assert_int_equal(fstx_tx_commit(NULL), -EINVAL);
	assert_int_equal(fstx_tx_num_ops(NULL), 0);
	assert_int_equal(fstx_tx_result(NULL, 0), -EINVAL);
	assert_int_equal(fstx_tx_failed_op(NULL), -1);
	assert_int_equal(fstx_read(NULL, "a", buf, sizeof(buf), 0), -EINVAL);
	assert_int_equal(fstx_stat(NULL, "a", &sb), -EINVAL);
	assert_int_equal(fstx_commit(NULL), -EINVAL);
	assert_int_equal(fstx_abort(NULL), -EINVAL);

	assert_int_equal(fstx_domain_open(d, &dom), 0);
	assert_int_equal(fstx_status(dom, NULL), -EINVAL);
	assert_int_equal(fstx_tx_new(dom, NULL), -EINVAL);
	/* each refused call poisons its transaction: the commit fails */
	for (int k = 0; k < 6; k++) {
		assert_int_equal(fstx_tx_new(dom, &tx), 0);
		switch (k) {
		case 5: /* a negative size was reported as -ENOMEM */
			assert_int_equal(fstx_tx_truncate(tx, "a", -5), -EINVAL);
			break;
		case 0:
			assert_int_equal(fstx_tx_expect(tx, BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE, 0),
					 -EINVAL);
			break;
		case 1:
			assert_int_equal(fstx_tx_unlink(tx, NULL), -EINVAL);
			break;
		case 2:
			assert_int_equal(fstx_tx_link(tx, "a", NULL), -EINVAL);
			break;
		case 3:
			assert_int_equal(fstx_tx_setxattr(tx, "a", "user.v", big, sizeof(big), 0),
					 -EINVAL);
			break;
		default:
			assert_int_equal(fstx_tx_set_flags(tx, FSTX_UT_LAZY | FSTX_UT_NOSYNC),
					 -EINVAL);
		}
		assert_int_equal(fstx_tx_num_ops(tx), 0);
		assert_int_equal(fstx_tx_unlink(tx, "old"), 0);
		assert_int_equal(fstx_tx_commit(tx), -EINVAL);
		assert_int_equal(fstx_tx_failed_op(tx), -1);
		assert_string_not_equal(fstx_tx_strerror(tx), "");
		fstx_tx_free(tx);
	}
	assert_int_equal(fstx_tx_new(dom, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, "old"), 0);
	assert_int_equal(fstx_tx_commit(tx), 0);
	assert_int_equal(fstx_tx_result(tx, 0), 0);
	assert_int_equal(fstx_tx_result(tx, 1), -EINVAL);
	fstx_tx_free(tx);
	fstx_domain_close(dom);
	/* only the one valid transaction changed the tree */
	t_write(d, "old", "old\n", 4);
	after = t_snapshot(d);
	assert_string_equal(after, before);
	free(after);
	free(before);
	close(dfd);
	t_rmtree(d);
	free(d);
}

/*
 * Issue 26's three footguns of the ergonomic API.  Each transaction has
 * an op that fails (or a builder call that failed): the commit must fail
 * and the tree stay as it was.
 */
struct fg { char *dir, *before; fstx_domain *d; };

static void fg_open(struct fg *f)
{
	f->dir = t_mkdomain();
	t_populate(f->dir);
	f->before = t_snapshot(f->dir);
	assert_int_equal(fstx_domain_open(f->dir, &f->d), 0);
}

/* The tree is as it was before. */
static void fg_same(const struct fg *f)
{
	char *now = t_snapshot(f->dir);

	assert_string_equal(now, f->before);
	free(now);
}

static void fg_close(struct fg *f)
{
	fstx_domain_close(f->d);
	free(f->before);
	t_rmtree(f->dir);
	free(f->dir);
}

static void footgun_set_flags(void **state)
{
	struct fg f;
	fstx_tx *tx;
	int fd;

	(void)state;
	fg_open(&f);
	/* 1: fstx_tx_set_flags(WAL) does not drop strictness */
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, "a"), 0);
	assert_int_equal(fstx_tx_unlink(tx, "no-such-file"), 0);
	assert_int_equal(fstx_tx_unlink(tx, "b"), 0);
	assert_int_equal(fstx_tx_set_flags(tx, FSTX_UT_WAL), 0);
	assert_int_equal(fstx_tx_commit(tx), -ENOENT);
	assert_int_equal(fstx_tx_failed_op(tx), 1);
	fstx_tx_free(tx);
	fg_same(&f);
	/* nor do flags 0, nor a short pwrite pass (O_RDONLY: -EBADF) */
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, "a"), 0);
	fd = fstx_tx_open(tx, "b", O_RDONLY, 0);
	assert_int_equal(fstx_tx_pwrite(tx, fd, "x", 1, 0), 0);
	assert_int_equal(fstx_tx_set_flags(tx, 0), 0);
	assert_int_equal(fstx_tx_commit(tx), -EBADF);
	assert_int_equal(fstx_tx_failed_op(tx), 2);
	fstx_tx_free(tx);
	fg_same(&f);
	fg_close(&f);
}

static void footgun_expect(void **state)
{
	struct fg f;
	fstx_tx *tx;

	(void)state;
	fg_open(&f);
	/* 2: expect() on one op leaves the others strict */
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, "a"), 0);
	assert_int_equal(fstx_tx_expect(tx, BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT, 0), 0);
	assert_int_equal(fstx_tx_unlink(tx, "missing"), 0);
	assert_int_equal(fstx_tx_unlink(tx, "b"), 0);
	assert_int_equal(fstx_tx_commit(tx), -ENOENT);
	assert_int_equal(fstx_tx_failed_op(tx), 1);
	fstx_tx_free(tx);
	fg_same(&f);
	/* but that op's own condition replaces its strictness */
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, "missing"), 0);
	assert_int_equal(fstx_tx_expect(tx, 0, 0), 0);
	assert_int_equal(fstx_tx_unlink(tx, "missing2"), 0);
	assert_int_equal(fstx_tx_commit(tx), -ENOENT);
	assert_int_equal(fstx_tx_failed_op(tx), 1);
	fstx_tx_free(tx);
	fg_close(&f);
}

static void footgun_poison(void **state)
{
	static char big[70000];
	struct fg f;
	fstx_tx *tx;
	int fd;

	(void)state;
	fg_open(&f);
	/* 3: a failed builder call poisons the transaction */
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	fd = fstx_tx_open(tx, "obj.new", O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_int_equal(fstx_tx_pwrite(tx, fd, "payload", 7, 0), 0);
	assert_int_equal(fstx_tx_close(tx, fd), 0);
	assert_int_equal(fstx_tx_setxattr(tx, "obj.new", "user.sum", big, sizeof(big), 0),
			 -EINVAL);
	assert_int_equal(fstx_tx_rename(tx, "obj.new", "a", 0), 0);
	assert_int_equal(fstx_tx_commit(tx), -EINVAL);
	fstx_tx_free(tx);
	fg_same(&f);
	fg_close(&f);
}

static void version(void **state)
{
	char want[32];

	(void)state;
	snprintf(want, sizeof(want), "%d.%d.%d", FSTX_VERSION_MAJOR, FSTX_VERSION_MINOR,
		 FSTX_VERSION_PATCH);
	assert_string_equal(fstx_version(), want);
	assert_string_equal(fstx_version(), FSTX_VERSION_STRING);
}

/* fstx_tx_strerror(): the failed op as written, and why; "" if none. */
static void tx_strerror(void **state)
{
	struct fg f;
	fstx_tx *tx;
	int fd;

	(void)state;
	fg_open(&f);
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_string_equal(fstx_tx_strerror(tx), "");
	assert_int_equal(fstx_tx_unlink(tx, "a"), 0);
	assert_int_equal(fstx_tx_mkdir(tx, "m", 0755), 0);
	assert_int_equal(fstx_tx_unlink(tx, "no-such-file"), 0);
	assert_int_equal(fstx_tx_commit(tx), -ENOENT);
	assert_string_equal(fstx_tx_strerror(tx),
			    "op 2 (unlink \"no-such-file\"): No such file or directory (ENOENT)");
	fstx_tx_free(tx);

	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	fd = fstx_tx_open(tx, "b", O_RDONLY, 0);
	assert_int_equal(fstx_tx_pwrite(tx, fd, "x", 1, 0), 0);
	assert_int_equal(fstx_tx_commit(tx), -EBADF);
	assert_string_equal(fstx_tx_strerror(tx),
			    "op 1 (pwrite fd 0 (\"b\")): Bad file descriptor (EBADF)");
	fstx_tx_free(tx);

	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_rename(tx, "a", "zz", 0), 0);
	assert_int_equal(fstx_tx_assert_absent(tx, "b"), 0);
	assert_int_equal(fstx_tx_commit(tx), -ECANCELED);
	assert_string_equal(fstx_tx_strerror(tx),
			    "op 1 (assert-absent \"b\"): assertion does not hold (ECANCELED)");
	fstx_tx_free(tx);

	/* an op the engine refuses before running anything: why */
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, "a"), 0);
	assert_int_equal(fstx_tx_pwrite(tx, 5, "x", 1, 0), 0);
	assert_int_equal(fstx_tx_commit(tx), -EINVAL);
	assert_string_equal(fstx_tx_strerror(tx), "op 1 (pwrite fd 5 (\"?\")): "
			    "fd index outside the fd table (EINVAL)");
	fstx_tx_free(tx);

	/* a poisoned transaction names the call */
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_setxattr(tx, "a", "user.sum", "v", FSTX_MAX_XATTR + 1, 0),
			 -EINVAL);
	assert_int_equal(fstx_tx_commit(tx), -EINVAL);
	assert_non_null(strstr(fstx_tx_strerror(tx), "fstx_tx_setxattr(\"a\", \"user.sum\")"));
	assert_non_null(strstr(fstx_tx_strerror(tx), "(EINVAL)"));
	fstx_tx_free(tx);

	/* a committed one says nothing */
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_unlink(tx, "old"), 0);
	assert_int_equal(fstx_tx_commit(tx), 0);
	assert_string_equal(fstx_tx_strerror(tx), "");
	fstx_tx_free(tx);
	assert_string_equal(fstx_tx_strerror(NULL), "");
	fg_close(&f);
}

/* fstx_status_ex(): everything fstx_status() says, the log, and a size. */
static void status_ex(void **state)
{
	struct fstx_status_ex ex;
	struct fstx_status st;
	unsigned char raw[sizeof(ex) + 16];
	size_t v1 = offsetof(struct fstx_status_ex, latched);
	uint64_t wal;
	struct fg f;
	fstx_tx *tx;
	int fd;

	(void)state;
	fg_open(&f);
	/* a write-ahead transaction leaves a record in the log */
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	fd = fstx_tx_open(tx, "a", O_RDWR, 0);
	assert_int_equal(fstx_tx_pwrite(tx, fd, "ALPHA", 5, 0), 0);
	assert_int_equal(fstx_tx_set_flags(tx, FSTX_UT_WAL), 0);
	assert_int_equal(fstx_tx_commit(tx), 0);
	fstx_tx_free(tx);

	memset(&ex, 0, sizeof(ex));
	ex.size = 4;
	assert_int_equal(fstx_status_ex(f.d, &ex), -EINVAL);
	ex.size = (uint32_t)v1 - 1;
	assert_int_equal(fstx_status_ex(f.d, &ex), -EINVAL);
	assert_int_equal(fstx_status_ex(NULL, &ex), -EINVAL);
	assert_int_equal(fstx_status_ex(f.d, NULL), -EINVAL);

	ex.size = sizeof(ex);
	assert_int_equal(fstx_status_ex(f.d, &ex), 0);
	assert_int_equal(fstx_status(f.d, &st), 0);
	assert_int_equal(ex.size, sizeof(ex));
	assert_int_equal(ex.hot, st.hot);
	assert_int_equal(ex.wedged, st.wedged);
	assert_int_equal(ex.reflink, st.reflink);
	assert_int_equal(ex.xattr_user, st.xattr_user);
	assert_int_equal(ex.dir_fsync, st.dir_fsync);
	assert_int_equal(ex.block_size, st.block_size);
	assert_string_equal(ex.fs_type, st.fs_type);
	assert_int_equal(ex.journal_bytes, st.journal_bytes);
	assert_int_equal(fx_wal_peek(f.d, &wal), 0);
	assert_int_equal(ex.wal_bytes, wal);
	assert_true(ex.wal_bytes > 0);
	assert_int_equal(ex.latched, 0);

	/* an older caller's shorter struct: nothing written past its size */
	memset(raw, 0xa5, sizeof(raw));
	((struct fstx_status_ex *)(void *)raw)->size = (uint32_t)v1;
	assert_int_equal(fstx_status_ex(f.d, (struct fstx_status_ex *)(void *)raw), 0);
	assert_int_equal(((struct fstx_status_ex *)(void *)raw)->size, v1);
	assert_int_equal(((struct fstx_status_ex *)(void *)raw)->wal_bytes, wal);
	for (size_t i = v1; i < sizeof(raw); i++)
		assert_int_equal(raw[i], 0xa5);
	/* a newer caller's longer one: filled up to what the library knows */
	((struct fstx_status_ex *)(void *)raw)->size = (uint32_t)sizeof(raw);
	assert_int_equal(fstx_status_ex(f.d, (struct fstx_status_ex *)(void *)raw), 0);
	assert_int_equal(((struct fstx_status_ex *)(void *)raw)->size, sizeof(ex));
	for (size_t i = sizeof(ex); i < sizeof(raw); i++)
		assert_int_equal(raw[i], 0xa5);
	fg_close(&f);
}

/*
 * FSTX_UT_COPY: buffers are copied at the call, so the caller may reuse
 * them at once; without it the op points to the caller's buffer.
 */
static void copy_mode(void **state)
{
	char *data = strdup("original"), *val = strdup("v-orig"), *exp = strdup("alpha\n");
	char *got, xv[16];
	struct fg f;
	fstx_tx *tx;
	size_t len;
	ssize_t n;
	int fd;

	(void)state;
	fg_open(&f);
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_set_flags(tx, FSTX_UT_COPY), 0);
	assert_int_equal(fstx_tx_assert_data(tx, "a", exp, 6), 0);
	fd = fstx_tx_open(tx, "n", O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_int_equal(fstx_tx_pwrite(tx, fd, data, 8, 0), 0);
	assert_int_equal(fstx_tx_close(tx, fd), 0);
	assert_int_equal(fstx_tx_setxattr(tx, "n", "user.v", val, 6, 0), 0);
	memset(data, 'X', 8);
	memset(val, 'Y', 6);
	memset(exp, 'Z', 6);
	assert_int_equal(fstx_tx_commit(tx), 0);
	fstx_tx_free(tx);
	got = t_read(f.dir, "n", &len);
	assert_int_equal(len, 8);
	assert_memory_equal(got, "original", 8);
	free(got);
	{
		char *p;

		assert_true(asprintf(&p, "%s/n", f.dir) > 0);
		n = getxattr(p, "user.v", xv, sizeof(xv));
		free(p);
	}
	assert_int_equal(n, 6);
	assert_memory_equal(xv, "v-orig", 6);

	/* without it: zero-copy, the bytes at commit time are written */
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	strcpy(data, "original");
	fd = fstx_tx_open(tx, "n", O_WRONLY, 0);
	assert_int_equal(fstx_tx_pwrite(tx, fd, data, 8, 0), 0);
	memcpy(data, "CHANGED!", 8);
	assert_int_equal(fstx_tx_commit(tx), 0);
	fstx_tx_free(tx);
	got = t_read(f.dir, "n", &len);
	assert_memory_equal(got, "CHANGED!", 8);
	free(got);

	/* an interactive transaction's reads still guard its commit */
	{
		fstx_tx *w;
		char buf[16];

		assert_int_equal(fstx_begin(f.d, 0, &tx), 0);
		assert_int_equal(fstx_tx_set_flags(tx, FSTX_UT_COPY), 0);
		assert_int_equal(fstx_read(tx, "n", buf, sizeof(buf), 0), 8);
		assert_int_equal(fstx_tx_write(tx, "m", buf, 8, 0644), 0);
		assert_int_equal(fstx_tx_new(f.d, &w), 0);
		assert_int_equal(fstx_tx_write(w, "n", "other", 5, 0644), 0);
		assert_int_equal(fstx_tx_commit(w), 0);
		fstx_tx_free(w);
		assert_int_equal(fstx_commit(tx), -ECANCELED);
		fstx_tx_free(tx);
		assert_null(t_read(f.dir, "m", NULL));
	}
	free(data);
	free(val);
	free(exp);
	fg_close(&f);
}

/* ---- the task-level builders ------------------------------------------ */

static void put(const char *path, const char *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

/* A tree outside any domain: files, an empty file, dirs, symlinks. */
static char *outside_tree(char **big, size_t *biglen)
{
	char *o = t_mkdomain(), *p;

	*biglen = (3u << 20) + 123; /* more than one copy chunk */
	*big = malloc(*biglen);
	for (size_t i = 0; i < *biglen; i++)
		(*big)[i] = (char)(i * 7 + i / 4096);
	assert_true(asprintf(&p, "%s/src", o) > 0);
	mkdir(p, 0750);
	free(p);
	assert_true(asprintf(&p, "%s/src/index.html", o) > 0);
	put(p, "<h1>hi</h1>\n", 12, 0644);
	free(p);
	assert_true(asprintf(&p, "%s/src/empty", o) > 0);
	put(p, "", 0, 0600);
	free(p);
	assert_true(asprintf(&p, "%s/src/sub", o) > 0);
	mkdir(p, 0700);
	free(p);
	assert_true(asprintf(&p, "%s/src/sub/deep", o) > 0);
	mkdir(p, 0755);
	free(p);
	assert_true(asprintf(&p, "%s/src/sub/big.bin", o) > 0);
	put(p, *big, *biglen, 0640);
	free(p);
	assert_true(asprintf(&p, "%s/src/sub/up", o) > 0);
	assert_int_equal(symlink("../../../etc/passwd", p), 0); /* never followed */
	free(p);
	assert_true(asprintf(&p, "%s/src/link", o) > 0);
	assert_int_equal(symlink("index.html", p), 0);
	free(p);
	assert_true(asprintf(&p, "%s/one", o) > 0);
	put(p, "copied in\n", 10, 0604);
	free(p);
	return o;
}

static void hand_write(fstx_tx *tx, const char *path, const void *data, size_t len,
		       int flags, mode_t mode)
{
	int fd = fstx_tx_open(tx, path, O_WRONLY | O_CREAT | flags, mode);

	assert_true(fd >= 0);
	if (len)
		assert_int_equal(fstx_tx_pwrite(tx, fd, data, len, 0), 0);
	assert_int_equal(fstx_tx_close(tx, fd), 0);
}

/* The task builders give the same tree as their ops written by hand. */
static void task_builders(void **state)
{
	char *A = t_mkdomain(), *B = t_mkdomain(), *o, *big, *sa, *sb, *p, *q;
	fstx_domain *da, *db;
	fstx_tx *tx;
	size_t biglen;
	char *conf = strdup("conf=1\n");

	(void)state;
	umask(022);
	o = outside_tree(&big, &biglen);
	t_populate(A);
	t_populate(B);
	assert_int_equal(fstx_domain_open(A, &da), 0);
	assert_int_equal(fstx_domain_open(B, &db), 0);
	assert_true(asprintf(&p, "%s/one", o) > 0);
	assert_true(asprintf(&q, "%s/src", o) > 0);

	/* A: the task builders; conf is freed before commit (always copied) */
	assert_int_equal(fstx_tx_new(da, &tx), 0);
	assert_int_equal(fstx_tx_write(tx, "w1", conf, 7, 0600), 0);
	assert_int_equal(fstx_tx_write(tx, "a", "A!", 2, 0600), 0);
	assert_int_equal(fstx_tx_replace(tx, "b", conf, 7, (mode_t)-1), 0);
	assert_int_equal(fstx_tx_replace(tx, "d/c", "C", 1, 0600), 0);
	assert_int_equal(fstx_tx_replace(tx, "fresh", "", 0, (mode_t)-1), 0);
	assert_int_equal(fstx_tx_symlink_replace(tx, "a", "ln"), 0);
	assert_int_equal(fstx_tx_symlink_replace(tx, "releases/v2", "current"), 0);
	assert_int_equal(fstx_tx_copy_in(tx, p, "d/one"), 0);
	assert_int_equal(fstx_tx_import(tx, q, "site"), 0);
	memset(conf, 'X', 7);
	free(conf);
	assert_int_equal(fstx_tx_commit(tx), 0);
	fstx_tx_free(tx);

	/* B: the same by hand */
	assert_int_equal(fstx_tx_new(db, &tx), 0);
	hand_write(tx, "w1", "conf=1\n", 7, O_TRUNC, 0600);
	hand_write(tx, "a", "A!", 2, O_TRUNC, 0600);
	hand_write(tx, "tmp1", "conf=1\n", 7, O_EXCL, 0644);
	assert_int_equal(fstx_tx_rename(tx, "tmp1", "b", 0), 0);
	hand_write(tx, "d/tmp2", "C", 1, O_EXCL, 0600);
	assert_int_equal(fstx_tx_rename(tx, "d/tmp2", "d/c", 0), 0);
	hand_write(tx, "tmp3", "", 0, O_EXCL, 0644);
	assert_int_equal(fstx_tx_rename(tx, "tmp3", "fresh", 0), 0);
	assert_int_equal(fstx_tx_symlink(tx, "a", "tmp4"), 0);
	assert_int_equal(fstx_tx_rename(tx, "tmp4", "ln", 0), 0);
	assert_int_equal(fstx_tx_symlink(tx, "releases/v2", "tmp5"), 0);
	assert_int_equal(fstx_tx_rename(tx, "tmp5", "current", 0), 0);
	hand_write(tx, "d/one", "copied in\n", 10, O_TRUNC, 0604);
	assert_int_equal(fstx_tx_mkdir(tx, "site", 0750), 0);
	hand_write(tx, "site/index.html", "<h1>hi</h1>\n", 12, O_EXCL, 0644);
	hand_write(tx, "site/empty", "", 0, O_EXCL, 0600);
	assert_int_equal(fstx_tx_mkdir(tx, "site/sub", 0700), 0);
	assert_int_equal(fstx_tx_mkdir(tx, "site/sub/deep", 0755), 0);
	hand_write(tx, "site/sub/big.bin", big, biglen, O_EXCL, 0640);
	assert_int_equal(fstx_tx_symlink(tx, "../../../etc/passwd", "site/sub/up"), 0);
	assert_int_equal(fstx_tx_symlink(tx, "index.html", "site/link"), 0);
	assert_int_equal(fstx_tx_commit(tx), 0);
	fstx_tx_free(tx);

	sa = t_snapshot(A);
	sb = t_snapshot(B);
	if (strcmp(sa, sb))
		fail_msg("trees differ\n--- builders:\n%s--- by hand:\n%s", sa, sb);
	/* and they did what they say */
	assert_non_null(strstr(sa, "site/sub/up mode=120777"));
	assert_non_null(strstr(sa, "\nb mode=100644 nlink=1"));
	assert_non_null(strstr(sa, "\nhard mode=100644 nlink=1")); /* b's old inode */
	assert_non_null(strstr(sa, "\nd/c mode=100600"));
	assert_null(strstr(sa, ".fstx-tmp"));
	{
		size_t len;
		char *got = t_read(A, "site/sub/big.bin", &len);

		assert_int_equal(len, biglen);
		assert_memory_equal(got, big, biglen);
		free(got);
	}
	free(sa);
	free(sb);
	free(p);
	free(q);
	free(big);
	fstx_domain_close(da);
	fstx_domain_close(db);
	t_rmtree(A);
	t_rmtree(B);
	t_rmtree(o);
	free(A);
	free(B);
	free(o);
}

/*
 * A transaction of task builders that fails (a later op, or a builder
 * that meets a special file) changes nothing.
 */
static void task_rollback(void **state)
{
	char *o, *big, *p, *q, *fifo;
	struct fg f;
	fstx_tx *tx;
	size_t biglen;

	(void)state;
	fg_open(&f);
	o = outside_tree(&big, &biglen);
	assert_true(asprintf(&p, "%s/one", o) > 0);
	assert_true(asprintf(&q, "%s/src", o) > 0);

	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_write(tx, "w1", "x", 1, 0644), 0);
	assert_int_equal(fstx_tx_write(tx, "a", "A!", 2, 0600), 0);
	assert_int_equal(fstx_tx_replace(tx, "b", "B", 1, (mode_t)-1), 0);
	assert_int_equal(fstx_tx_symlink_replace(tx, "a", "ln"), 0);
	assert_int_equal(fstx_tx_copy_in(tx, p, "d/one"), 0);
	assert_int_equal(fstx_tx_import(tx, q, "site"), 0);
	assert_int_equal(fstx_tx_unlink(tx, "no-such-file"), 0);
	assert_int_equal(fstx_tx_commit(tx), -ENOENT);
	fstx_tx_free(tx);
	fg_same(&f);

	/* import into an existing directory fails at commit (mkdir: EEXIST) */
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_write(tx, "w1", "x", 1, 0644), 0);
	assert_int_equal(fstx_tx_import(tx, q, "d"), 0);
	assert_int_equal(fstx_tx_commit(tx), -EEXIST);
	fstx_tx_free(tx);
	fg_same(&f);

	/* a fifo in the source tree: refused, the transaction poisoned */
	assert_true(asprintf(&fifo, "%s/sub/fifo", q) > 0);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_write(tx, "w1", "x", 1, 0644), 0);
	assert_int_equal(fstx_tx_import(tx, q, "site"), -EINVAL);
	assert_int_equal(fstx_tx_commit(tx), -EINVAL);
	assert_non_null(strstr(fstx_tx_strerror(tx), "fstx_tx_import("));
	fstx_tx_free(tx);
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_copy_in(tx, fifo, "x"), -EINVAL);
	assert_int_equal(fstx_tx_commit(tx), -EINVAL);
	fstx_tx_free(tx);
	fg_same(&f);

	/* bad arguments */
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	assert_int_equal(fstx_tx_replace(tx, "d/", "x", 1, 0644), -EINVAL);
	assert_int_equal(fstx_tx_write(tx, "x", NULL, 1, 0644), -EINVAL);
	assert_int_equal(fstx_tx_write(tx, "x", "x", 1, 010000), -EINVAL);
	assert_int_equal(fstx_tx_symlink_replace(tx, NULL, "l"), -EINVAL);
	assert_int_equal(fstx_tx_copy_in(tx, "/nonexistent/file", "x"), -ENOENT);
	assert_int_equal(fstx_tx_import(tx, "/nonexistent/dir", "x"), -ENOENT);
	assert_int_equal(fstx_tx_commit(tx), -EINVAL); /* the first error */
	fstx_tx_free(tx);
	assert_int_equal(fstx_tx_write(NULL, "x", "x", 1, 0644), -EINVAL);
	fg_same(&f);

	free(fifo);
	free(p);
	free(q);
	free(big);
	t_rmtree(o);
	free(o);
	fg_close(&f);
}

/* Every task builder call, each result kept (the first error, or 0). */
static int build_tasks(fstx_tx *tx, const char *one, const char *src)
{
	int r, first = 0;

#define KEEP(call) do { r = (call); if (r < 0 && !first) first = r; } while (0)
	KEEP(fstx_tx_write(tx, "w1", "x", 1, 0644));
	KEEP(fstx_tx_replace(tx, "b", "B", 1, (mode_t)-1));
	KEEP(fstx_tx_symlink_replace(tx, "a", "ln"));
	KEEP(fstx_tx_copy_in(tx, one, "d/one"));
	KEEP(fstx_tx_import(tx, src, "site"));
#undef KEEP
	return first;
}

/*
 * Each OS call and each allocation the task builders make, failing in
 * turn: the call that meets it returns the error, and the commit returns
 * the first such error and changes nothing; with no fault the commit
 * gives the reference tree.
 */
static void task_faults(void **state)
{
	char *o, *big, *one, *src, *ref, *now;
	long calls, allocs, failed = 0;
	size_t biglen;
	struct fg f;
	fstx_tx *tx;

	(void)state;
	o = outside_tree(&big, &biglen);
	assert_true(asprintf(&one, "%s/one", o) > 0);
	assert_true(asprintf(&src, "%s/src", o) > 0);
	fg_open(&f);
	assert_int_equal(fstx_tx_new(f.d, &tx), 0);
	fo_install(FO_COUNT, 0, 0);
	assert_int_equal(build_tasks(tx, one, src), 0);
	calls = fo.calls;
	allocs = fo.allocs;
	fo_remove();
	assert_int_equal(fstx_tx_commit(tx), 0);
	fstx_tx_free(tx);
	ref = t_snapshot(f.dir);
	fg_close(&f);
	assert_true(calls > 10 && allocs > 10);

	for (long k = 1; k <= calls + allocs; k++) {
		int want, r;

		fg_open(&f);
		assert_int_equal(fstx_tx_new(f.d, &tx), 0);
		fo_install(k <= calls ? FO_FAIL : FO_COUNT, k, EIO);
		if (k > calls)
			fo.alloc_at = k - calls;
		want = build_tasks(tx, one, src);
		fo_remove();
		if (want != 0 && want != (k <= calls ? -EIO : -ENOMEM))
			fail_msg("fault %ld: a builder returned %d", k, want);
		r = fstx_tx_commit(tx);
		fstx_tx_free(tx);
		if (r != want)
			fail_msg("fault %ld: builders %d, commit %d", k, want, r);
		now = t_snapshot(f.dir);
		if (strcmp(now, want ? f.before : ref))
			fail_msg("fault %ld (%d): wrong tree\n%s", k, want, now);
		free(now);
		failed += want != 0;
		fg_close(&f);
	}
	printf("task builders: %ld calls, %ld allocations, %ld faults met\n",
	       calls, allocs, failed);
	assert_true(failed > 0);
	free(ref);
	free(one);
	free(src);
	free(big);
	t_rmtree(o);
	free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(serialised),
		cmocka_unit_test(clonerange_paths),
		cmocka_unit_test(differential),
		cmocka_unit_test(ergonomic),
		cmocka_unit_test(status),
		cmocka_unit_test(assertions),
		cmocka_unit_test(barriers),
		cmocka_unit_test(fsync_each),
		cmocka_unit_test(crash_only_then_durable),
		cmocka_unit_test(fd_slots),
		cmocka_unit_test(read_begin_faults),
		cmocka_unit_test(open_faults),
		cmocka_unit_test(bad_arguments),
		cmocka_unit_test(footgun_set_flags),
		cmocka_unit_test(footgun_expect),
		cmocka_unit_test(footgun_poison),
		cmocka_unit_test(version),
		cmocka_unit_test(tx_strerror),
		cmocka_unit_test(status_ex),
		cmocka_unit_test(copy_mode),
		cmocka_unit_test(task_builders),
		cmocka_unit_test(task_rollback),
		cmocka_unit_test(task_faults),
	};

	return cmocka_run_group_tests_name("ops", tests, NULL, NULL);
}
