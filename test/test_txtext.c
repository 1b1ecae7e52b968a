/* SPDX-License-Identifier: MIT */
/* test_txtext.c - the transaction text grammar (fstx-tx(5)). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "internal.h"
#include "fstx/btrfs_usertrans.h"
#include "helpers.h"
#include "faultos.h"
#include "txrun.h"

static int parse(const char *s, struct fx_txt *t)
{
	return fx_txt_parse(s, strlen(s), AT_FDCWD, t);
}

#define ARG_S(t, i, a) ((const char *)(intptr_t)(t).ops[i].args[a])

static void every_op(void **state)
{
	struct fx_txt t;
	const char *text =
		"# a comment\n"
		"\n"
		"option wedge-on-fail\n"
		"option reserve 4096 7\n"
		"open 3 \"dir/with space\" O_WRONLY|O_CREAT|O_EXCL 0600\n"
		"close 3\n"
		"pwrite 0 \"a\\\\b\\\"c\\n\\t\\r\\0\\x41\" 0x10\n"
		"unlink old   # trailing comment\n"
		"link a b\n"
		"mkdir m\n"
		"mkdir m2 0700\n"
		"rmdir m\n"
		"truncate f 123\n"
		"setxattr f user.k x:6869 create\n"
		"setxattr f user.k \"v\" replace\n"
		"removexattr f user.k\n"
		"clonerange 1 2 3 4 5\n"
		"rename a b\n"
		"rename a b noreplace\n"
		"rename a b exchange\n"
		"symlink target link\n"
		"open 1 f O_RDWR\n";

	(void)state;
	assert_int_equal(parse(text, &t), 0);
	assert_int_equal(t.nops, 18);
	assert_int_equal(t.flags, BTRFS_IOC_UT_FLAG_WEDGEONFAIL);
	assert_int_equal(t.data_bytes, 4096);
	assert_int_equal(t.metadata_ops, 7);
	assert_int_equal(t.num_fds, 4);
	assert_int_equal(t.ops[0].op, BTRFS_IOC_UT_OP_OPEN);
	assert_string_equal(ARG_S(t, 0, 0), "dir/with space");
	assert_int_equal(t.ops[0].args[1], O_WRONLY | O_CREAT | O_EXCL);
	assert_int_equal(t.ops[0].args[2], 0600);
	assert_int_equal(t.ops[0].args[3], 3);
	assert_int_equal(t.lines[0], 5);
	assert_int_equal(t.ops[2].args[2], 10);
	assert_memory_equal(ARG_S(t, 2, 1), "a\\b\"c\n\t\r\0A", 10);
	assert_int_equal(t.ops[2].args[3], 16);
	/* strict by default: pwrite must write everything, others >= 0 */
	assert_int_equal(t.ops[2].flags, BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE);
	assert_int_equal(t.ops[2].rval, 10);
	assert_int_equal(t.ops[3].flags, BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT);
	assert_int_equal(t.ops[3].rval, 0);
	assert_int_equal(t.ops[5].args[1], 0755);
	assert_int_equal(t.ops[6].args[1], 0700);
	assert_int_equal(t.ops[8].args[1], 123);
	assert_memory_equal(ARG_S(t, 9, 2), "hi", 2);
	assert_int_equal(t.ops[9].args[3], 2);
	assert_int_equal(t.ops[9].args[4], XATTR_CREATE);
	assert_int_equal(t.ops[10].args[4], XATTR_REPLACE);
	assert_int_equal(t.ops[12].args[4], 5);
	assert_int_equal(t.ops[13].args[2], 0);
	assert_int_equal(t.ops[14].args[2], RENAME_NOREPLACE);
	assert_int_equal(t.ops[15].args[2], RENAME_EXCHANGE);
	assert_int_equal(t.ops[16].op, FSTX_OP_SYMLINK);
	assert_int_equal(t.ops[17].args[2], 0644);
	fx_txt_free(&t);
}

static void conditions(void **state)
{
	struct fx_txt t;

	(void)state;
	assert_int_equal(parse("unlink a !ne -2\n-unlink b\nunlink c !gt 0 !lt 0\n"
			       "pwrite 0 \"xy\" 0 !le 1\nunlink d !eq 0\nunlink e !ge 5\n",
			       &t), 0);
	assert_int_equal(t.ops[0].flags, BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE);
	assert_int_equal(t.ops[0].rval, -2);
	assert_int_equal(t.ops[1].flags, 0);
	assert_int_equal(t.ops[2].flags,
			 BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GT | BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT);
	assert_int_equal(t.ops[3].flags, BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LTE);
	assert_int_equal(t.ops[3].rval, 1);
	assert_int_equal(t.ops[4].flags, BTRFS_IOC_UT_OP_FLAG_FAIL_ON_EQ);
	assert_int_equal(t.ops[5].flags, BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GTE);
	fx_txt_free(&t);
}

static void datafile(void **state)
{
	char *d = t_mkdomain();
	struct fx_txt t;
	int fd;

	(void)state;
	t_write(d, "payload.bin", "PAYLOAD", 7);
	fd = t_dirfd(d);
	assert_int_equal(fx_txt_parse("pwrite 0 @payload.bin 0\n", 24, fd, &t), 0);
	assert_int_equal(t.ops[0].args[2], 7);
	assert_memory_equal(ARG_S(t, 0, 1), "PAYLOAD", 7);
	fx_txt_free(&t);
	assert_int_equal(fx_txt_parse("pwrite 0 @missing 0\n", 20, fd, &t), -EINVAL);
	assert_non_null(strstr(t.err, "missing"));
	fx_txt_free(&t);
	close(fd);
	t_rmtree(d);
	free(d);
}

static void errors(void **state)
{
	static const struct { const char *text; unsigned line; const char *msg; } c[] = {
		{ "frobnicate x\n", 1, "unknown op" },
		{ "\nunlink\n", 2, "expected 1" },
		{ "unlink a b\n", 1, "expected 1" },
		{ "open 0 a O_BOGUS\n", 1, "unknown open flag" },
		{ "open x a O_RDONLY\n", 1, "IDX" },
		{ "open 99999 a O_RDONLY\n", 1, "out of range" },
		{ "mkdir a 999\n", 1, "MODE" },
		{ "pwrite 0 plain 0\n", 1, "DATA must be" },
		{ "pwrite 0 x:abc 0\n", 1, "odd number" },
		{ "pwrite 0 x:zz 0\n", 1, "bad hex" },
		{ "unlink \"open\n", 1, "unterminated" },
		{ "unlink \"a\\q\"\n", 1, "unknown escape" },
		{ "unlink \"a\\x4\"\n", 1, "\\x" },
		{ "unlink \"a\\0b\"\n", 1, "NUL" },
		{ "unlink \"\"\n", 1, "empty path" },
		{ "unlink \"a\"b\n", 1, "after closing quote" },
		{ "unlink a !zz 1\n", 1, "unknown condition" },
		{ "unlink a !ne 1 !eq 2\n", 1, "share one value" },
		{ "-unlink a !ne 1\n", 1, "exclude" },
		{ "truncate a big\n", 1, "bad number" },
		{ "rename a b sideways\n", 1, "noreplace or exchange" },
		{ "setxattr a n \"v\" maybe\n", 1, "create or replace" },
		{ "option frob\n", 1, "option" },
		{ "option reserve -1 2\n", 1, "negative" },
		{ "\"unlink\" a\n", 1, "quoted" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct fx_txt t;

		if (parse(c[i].text, &t) != -EINVAL)
			fail_msg("case %zu parsed: %s", i, c[i].text);
		assert_int_equal(t.errline, c[i].line);
		if (!strstr(t.err, c[i].msg))
			fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, t.err, c[i].msg);
		fx_txt_free(&t);
	}
}

/* fd rewound to its start, read with fx_txt_read(): its return. */
static int read_from(int fd, char **out, size_t *len)
{
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fx_txt_read(fd, out, len);
}

/*
 * The CLI's transaction text, read to the end through fx_os: a text of
 * 200 KiB (the buffer doubles twice) comes back whole; EIO at each read
 * and a failure of each allocation return that error with nothing
 * returned (ASan: nothing leaked); a pipe reads like a file.
 */
static void read_text(void **state)
{
	const size_t size = 200 * 1024;
	char *d = t_mkdomain(), *text = malloc(size), *out, path[4096];
	size_t len;
	long calls, allocs;
	int fd, p[2];

	(void)state;
	assert_non_null(text);
	for (size_t i = 0; i < size; i++)
		text[i] = i % 64 == 63 ? '\n' : '#';
	t_write(d, "tx", text, size);
	snprintf(path, sizeof(path), "%s/tx", d);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);

	fo_install(FO_COUNT, 0, 0);
	assert_int_equal(read_from(fd, &out, &len), 0);
	calls = fo.calls;
	allocs = fo.allocs;
	fo_remove();
	assert_int_equal(len, size);
	assert_memory_equal(out, text, size);
	free(out);
	assert_true(calls >= 4);  /* 64 + 64 + 128 KiB at least, then EOF */
	assert_int_equal(allocs, 3); /* 64 KiB, 128, 256 */

	for (long k = 1; k <= calls; k++) {
		out = NULL;
		fo_install(FO_FAIL, k, EIO);
		assert_int_equal(read_from(fd, &out, &len), -EIO);
		fo_remove();
		assert_null(out);
	}
	for (long k = 1; k <= allocs; k++) {
		out = NULL;
		fo_install(FO_COUNT, 0, 0);
		fo.alloc_at = k;
		assert_int_equal(read_from(fd, &out, &len), -ENOMEM);
		fo_remove();
		assert_null(out);
	}
	close(fd);

	assert_int_equal(pipe(p), 0);
	assert_int_equal(write(p[1], text, 4096), 4096);
	close(p[1]);
	assert_int_equal(fx_txt_read(p[0], &out, &len), 0);
	assert_int_equal(len, 4096);
	assert_memory_equal(out, text, 4096);
	free(out);
	close(p[0]);
	free(text);
	t_rmtree(d);
	free(d);
}

/* ---- compiler-style errors ---- */

static void expect_err(const char *text, const char *name, const char *want,
		       unsigned line, unsigned col)
{
	struct fx_txt t;

	memset(&t, 0, sizeof(t));
	if (fx_txt_parse_named(text, strlen(text), AT_FDCWD, name, &t) != -EINVAL)
		fail_msg("parsed: %s", text);
	if (strcmp(t.err, want))
		fail_msg("for\n%s\ngot\n%s\n--- want\n%s", text, t.err, want);
	assert_int_equal(t.errline, line);
	assert_int_equal(t.errcol, col);
	fx_txt_free(&t);
}

/*
 * FILE:LINE:COL: error: MESSAGE, the source line, a caret (with ~ under
 * the rest of the word) and a hint for a near op, flag, condition or
 * option word; a condition without its number; a byte-order mark.
 */
static void error_shapes(void **state)
{
	struct fx_txt t;

	(void)state;
	expect_err("unlink a\npwrit 0 \"x\" 0\n", "conf.tx",
		   "conf.tx:2:1: error: unknown op \"pwrit\"\n"
		   "pwrit 0 \"x\" 0\n"
		   "^~~~~\n"
		   "hint: did you mean \"pwrite\"?", 2, 1);
	expect_err("unlink x !eq\n", NULL,
		   "<input>:1:10: error: unlink: condition \"!eq\" needs a number, "
		   "e.g. \"!eq 0\"\n"
		   "unlink x !eq\n"
		   "         ^~~", 1, 10);
	expect_err("open 0 a O_WRONLY|O_CREATE 0600\n", "-",
		   "-:1:19: error: open: unknown open flag \"O_CREATE\" (O_RDONLY, "
		   "O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_NOFOLLOW, "
		   "O_DIRECTORY, joined by |)\n"
		   "open 0 a O_WRONLY|O_CREATE 0600\n"
		   "                  ^~~~~~~~\n"
		   "hint: did you mean \"O_CREAT\"?", 1, 19);
	/* a tab is kept so the caret lines up; columns count characters */
	expect_err("\tunlink \"\xc3\xa9t\xc3\xa9\" !eqq 1\n", "f",
		   "f:1:15: error: unlink: unknown condition \"!eqq\" (!ne !eq !lt !gt "
		   "!le !ge, each with a number)\n"
		   "\tunlink \"\xc3\xa9t\xc3\xa9\" !eqq 1\n"
		   "\t             ^~~~\n"
		   "hint: did you mean \"!eq\"?", 1, 15);
	expect_err("unlink a b\n", "f",
		   "f:1:10: error: unlink: expected 1 argument, got 2; usage: "
		   "unlink PATH\n"
		   "unlink a b\n"
		   "         ^", 1, 10);
	expect_err("rename a b noreplac\n", "f",
		   "f:1:12: error: rename: expected noreplace or exchange, got "
		   "\"noreplac\"\n"
		   "rename a b noreplac\n"
		   "           ^~~~~~~~\n"
		   "hint: did you mean \"noreplace\"?", 1, 12);
	expect_err("option crash-onyl\n", "f",
		   "f:1:8: error: option: expected 'option wedge-on-fail', 'option "
		   "crash-only', 'option wal', 'option lazy' or 'option reserve "
		   "DATA_BYTES METADATA_OPS'\n"
		   "option crash-onyl\n"
		   "       ^~~~~~~~~~\n"
		   "hint: did you mean \"crash-only\"?", 1, 8);
	/* too few arguments: the caret is at the end of the line */
	expect_err("link a\n", "f",
		   "f:1:7: error: link: expected 2 arguments, got 1; usage: link "
		   "OLDPATH NEWPATH\n"
		   "link a\n"
		   "      ^", 1, 7);
	/* nothing near: no hint */
	expect_err("frobnicate x\n", "f",
		   "f:1:1: error: unknown op \"frobnicate\"\n"
		   "frobnicate x\n"
		   "^~~~~~~~~~", 1, 1);
	/* a quoted value with a newline stays on the first line, escaped */
	expect_err("pwrite 0 \"a\" \"1\\n2\"\n", "f",
		   "f:1:14: error: pwrite: OFFSET: expected a number, got \"1\\x0a2\"\n"
		   "pwrite 0 \"a\" \"1\\n2\"\n"
		   "             ^~~~~~", 1, 14);
	/* a byte-order mark at the start is skipped, elsewhere named */
	memset(&t, 0, sizeof(t));
	assert_int_equal(fx_txt_parse("\xef\xbb\xbfunlink a\n", 12, AT_FDCWD, &t), 0);
	assert_int_equal(t.nops, 1);
	assert_string_equal(ARG_S(t, 0, 0), "a");
	fx_txt_free(&t);
	memset(&t, 0, sizeof(t));
	assert_int_equal(parse("unlink a\n\xef\xbb\xbfunlink b\n", &t), -EINVAL);
	assert_non_null(strstr(t.err, "<input>:2:1: error: a UTF-8 byte-order mark "
				      "(U+FEFF) before the op name"));
	fx_txt_free(&t);
}

/* ---- task ops ---- */

static void op_is(const struct fx_txt *t, size_t i, uint64_t code, __s64 a0,
		  __s64 a1, __s64 a2, __s64 a3)
{
	const struct btrfs_ioctl_usertrans_op *op = &t->ops[i];

	if (op->op != code || op->args[0] != a0 || op->args[1] != a1 ||
	    op->args[2] != a2 || op->args[3] != a3)
		fail_msg("op %zu: %s %lld %lld %lld %lld, want %s %lld %lld %lld %lld",
			 i, fstx_op_name(op->op), (long long)op->args[0],
			 (long long)op->args[1], (long long)op->args[2],
			 (long long)op->args[3], fstx_op_name(code), (long long)a0,
			 (long long)a1, (long long)a2, (long long)a3);
	/* task ops are strict: pwrite must write all, the rest succeed */
	if (code == BTRFS_IOC_UT_OP_PWRITE)
		assert_true(op->flags == BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE &&
			    op->rval == op->args[2]);
	else
		assert_true(op->flags == BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT &&
			    op->rval == 0);
}

#define S(i, a) ((__s64)(intptr_t)ARG_S(t, i, a))
#define OPEN BTRFS_IOC_UT_OP_OPEN
#define PWRITE BTRFS_IOC_UT_OP_PWRITE
#define CLOSE BTRFS_IOC_UT_OP_CLOSE
#define WFLAGS (O_WRONLY | O_CREAT | O_TRUNC)
#define XFLAGS (O_WRONLY | O_CREAT | O_EXCL)

/*
 * Each task op as the primitive ops it stands for, in the slot above
 * every explicit one (explicit opens before and after it), with the
 * line it came from.
 */
static void task_ops(void **state)
{
	struct fx_txt t;

	(void)state;
	assert_int_equal(parse("open 2 x O_RDWR\n"
			       "write conf/a \"hello\"\n"
			       "replace conf/b \"xy\" 0600\n"
			       "symlink releases/v2 current replace\n"
			       "pwrite 2 \"y\" 0\n"
			       "write empty \"\" 0640\n"
			       "open 4 z O_RDWR\n"
			       "close 2\n", &t), 0);
	assert_int_equal(t.nops, 15);
	op_is(&t, 0, OPEN, S(0, 0), O_RDWR, 0644, 2);
	op_is(&t, 1, OPEN, S(1, 0), WFLAGS, 0644, 5);
	assert_string_equal(ARG_S(t, 1, 0), "conf/a");
	op_is(&t, 2, PWRITE, 5, S(2, 1), 5, 0);
	assert_memory_equal(ARG_S(t, 2, 1), "hello", 5);
	op_is(&t, 3, CLOSE, 5, 0, 0, 0);
	op_is(&t, 4, OPEN, S(4, 0), XFLAGS, 0600, 5);
	assert_string_equal(ARG_S(t, 4, 0), "conf/.fstx-tmp-1");
	op_is(&t, 5, PWRITE, 5, S(5, 1), 2, 0);
	op_is(&t, 6, CLOSE, 5, 0, 0, 0);
	op_is(&t, 7, FSTX_OP_RENAME, S(4, 0), S(7, 1), 0, 0);
	assert_string_equal(ARG_S(t, 7, 1), "conf/b");
	op_is(&t, 8, FSTX_OP_SYMLINK, S(8, 0), S(8, 1), 0, 0);
	assert_string_equal(ARG_S(t, 8, 0), "releases/v2");
	assert_string_equal(ARG_S(t, 8, 1), ".fstx-tmp-2");
	op_is(&t, 9, FSTX_OP_RENAME, S(8, 1), S(9, 1), 0, 0);
	assert_string_equal(ARG_S(t, 9, 1), "current");
	op_is(&t, 10, PWRITE, 2, S(10, 1), 1, 0);
	/* no data: no pwrite */
	op_is(&t, 11, OPEN, S(11, 0), WFLAGS, 0640, 5);
	op_is(&t, 12, CLOSE, 5, 0, 0, 0);
	op_is(&t, 13, OPEN, S(13, 0), O_RDWR, 0644, 4);
	op_is(&t, 14, CLOSE, 2, 0, 0, 0);
	assert_int_equal(t.num_fds, 6);
	assert_int_equal(t.lines[1], 2);
	assert_int_equal(t.lines[7], 3);
	assert_int_equal(t.lines[9], 4);
	assert_int_equal(t.lines[12], 6);
	fx_txt_free(&t);

	/* without explicit opens the task slot is 0 */
	assert_int_equal(parse("write a \"1\"\nreplace b \"2\"\n", &t), 0);
	assert_int_equal(t.num_fds, 1);
	op_is(&t, 0, OPEN, S(0, 0), WFLAGS, 0644, 0);
	op_is(&t, 3, OPEN, S(3, 0), XFLAGS, 0644, 0);
	assert_string_equal(ARG_S(t, 3, 0), ".fstx-tmp-1");
	fx_txt_free(&t);
}

static void task_refusals(void **state)
{
	static const struct { const char *text; const char *msg; } c[] = {
		{ "write a \"x\" !lt 0\n", "always strict" },
		{ "-replace a \"x\"\n", "always strict" },
		{ "symlink a b replace !ne 0\n", "always strict" },
		{ "symlink a b replac\n", "did you mean \"replace\"" },
		{ "replace dir/ \"x\"\n", "does not name a file" },
		{ "replace .. \"x\"\n", "does not name a file" },
		{ "write a\n", "usage: write PATH DATA [MODE]" },
		{ "write a \"x\" 9\n", "MODE" },
		{ "open 4095 a O_RDONLY\nwrite b \"x\"\n", "no fd slot left" },
		{ "import a\n", "usage: import SRCDIR DSTDIR" },
		{ "copy-in /nonexistent/x y\n", "No such file" },
		{ "import /nonexistent/x y\n", "No such file" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct fx_txt t;

		if (parse(c[i].text, &t) != -EINVAL)
			fail_msg("case %zu parsed: %s", i, c[i].text);
		if (!strstr(t.err, c[i].msg))
			fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, t.err, c[i].msg);
		fx_txt_free(&t);
	}
}

static void put(const char *dir, const char *rel, const char *data, mode_t m)
{
	char *p;

	t_write(dir, rel, data, strlen(data));
	assert_true(asprintf(&p, "%s/%s", dir, rel) > 0);
	assert_int_equal(chmod(p, m), 0);
	free(p);
}

static void mkd(const char *dir, const char *rel, mode_t m)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", dir, rel) > 0);
	assert_int_equal(mkdir(p, m), 0);
	assert_int_equal(chmod(p, m), 0);
	free(p);
}

static void lnk(const char *dir, const char *target, const char *rel)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", dir, rel) > 0);
	assert_int_equal(symlink(target, p), 0);
	free(p);
}

/* An outside tree: src/{a (0600), sub/ (0700), sub/b, sub/l -> ../../x} */
static char *outside_tree(void)
{
	char *o = t_mkdomain();

	mkd(o, "src", 0750);
	put(o, "src/a", "AAA", 0600);
	mkd(o, "src/sub", 0700);
	put(o, "src/sub/b", "", 0644);
	lnk(o, "../../x", "src/sub/l");
	put(o, "one", "ONE", 0640);
	return o;
}

/* copy-in and import: files with their modes, links as links, in name
 * order; special files refused with their path. */
static void import_ops(void **state)
{
	char *o = outside_tree(), *p;
	const char *text;
	struct fx_txt t;
	int fd = t_dirfd(o);

	(void)state;
	memset(&t, 0, sizeof(t));
	text = "copy-in one in/one\ncopy-in one two 0600\nimport src dst/\n";
	assert_int_equal(fx_txt_parse(text, strlen(text), fd, &t), 0);
	assert_int_equal(t.nops, 14);
	op_is(&t, 0, OPEN, S(0, 0), WFLAGS, 0640, 0);
	assert_string_equal(ARG_S(t, 0, 0), "in/one");
	op_is(&t, 1, PWRITE, 0, S(1, 1), 3, 0);
	assert_memory_equal(ARG_S(t, 1, 1), "ONE", 3);
	op_is(&t, 2, CLOSE, 0, 0, 0, 0);
	op_is(&t, 3, OPEN, S(3, 0), WFLAGS, 0600, 0);
	op_is(&t, 6, BTRFS_IOC_UT_OP_MKDIR, S(6, 0), 0750, 0, 0);
	assert_string_equal(ARG_S(t, 6, 0), "dst");
	op_is(&t, 7, OPEN, S(7, 0), XFLAGS, 0600, 0);
	assert_string_equal(ARG_S(t, 7, 0), "dst/a");
	op_is(&t, 8, PWRITE, 0, S(8, 1), 3, 0);
	op_is(&t, 9, CLOSE, 0, 0, 0, 0);
	op_is(&t, 10, BTRFS_IOC_UT_OP_MKDIR, S(10, 0), 0700, 0, 0);
	assert_string_equal(ARG_S(t, 10, 0), "dst/sub");
	op_is(&t, 11, OPEN, S(11, 0), XFLAGS, 0644, 0);
	assert_string_equal(ARG_S(t, 11, 0), "dst/sub/b");
	op_is(&t, 12, CLOSE, 0, 0, 0, 0); /* empty: no pwrite */
	op_is(&t, 13, FSTX_OP_SYMLINK, S(13, 0), S(13, 1), 0, 0);
	assert_string_equal(ARG_S(t, 13, 0), "../../x");
	assert_string_equal(ARG_S(t, 13, 1), "dst/sub/l");
	fx_txt_free(&t);

	/* an empty directory: its mkdir alone (no sort of no names) */
	assert_true(asprintf(&p, "%s/hollow", o) > 0);
	assert_int_equal(mkdir(p, 0700), 0);
	free(p);
	assert_int_equal(fx_txt_parse("import hollow h\n", 16, fd, &t), 0);
	assert_int_equal(t.nops, 1);
	op_is(&t, 0, BTRFS_IOC_UT_OP_MKDIR, S(0, 0), 0700, 0, 0);
	fx_txt_free(&t);
	/* a FIFO in the tree is refused, named with its path */
	assert_true(asprintf(&p, "%s/src/sub/fifo", o) > 0);
	assert_int_equal(mkfifo(p, 0600), 0);
	free(p);
	assert_int_equal(fx_txt_parse("import src dst\n", 15, fd, &t), -EINVAL);
	assert_non_null(strstr(t.err, "import: src/sub/fifo: a FIFO is not imported"));
	fx_txt_free(&t);
	/* copy-in of a directory */
	assert_int_equal(fx_txt_parse("copy-in src x\n", 14, fd, &t), -EINVAL);
	assert_non_null(strstr(t.err, "src: not a regular file or a pipe"));
	fx_txt_free(&t);
	close(fd);
	t_rmtree(o);
	free(o);
}

/* ---- @- and pipes ---- */

/* Run text with standard input reading from a pipe fed data (a child
 * writes it, so more than a pipe buffer fits). */
static int parse_stdin_at(const char *text, const char *data, size_t len,
			  struct fx_txt *t, int taken, int basedir)
{
	int p[2], saved = dup(0), r, st;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		for (size_t done = 0; done < len;) {
			ssize_t n = write(p[1], data + done, len - done);

			if (n <= 0)
				_exit(1);
			done += (size_t)n;
		}
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(dup2(p[0], 0), 0);
	close(p[0]);
	memset(t, 0, sizeof(*t));
	t->stdin_taken = taken;
	r = fx_txt_parse_named(text, strlen(text), basedir, "tx", t);
	assert_int_equal(dup2(saved, 0), 0);
	close(saved);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return r;
}

static int parse_stdin(const char *text, const char *data, size_t len,
		       struct fx_txt *t, int taken)
{
	return parse_stdin_at(text, data, len, t, taken, AT_FDCWD);
}

static void stdin_and_pipes(void **state)
{
	char *d = t_mkdomain(), *path;
	struct fx_txt t;
	int fd, st;
	pid_t pid;

	(void)state;
	assert_int_equal(parse_stdin("write conf \"x\"\npwrite 0 @- 0\n", "from stdin",
				     10, &t, 0), 0);
	assert_int_equal(t.ops[3].args[2], 10);
	assert_memory_equal(ARG_S(t, 3, 1), "from stdin", 10);
	fx_txt_free(&t);
	/* the text came from stdin: @- is refused, and stdin not read */
	assert_int_equal(parse_stdin("write a @-\n", "x", 1, &t, 1), -EINVAL);
	assert_non_null(strstr(t.err, "tx:1:9: error: write: @-: standard input "
				      "holds the transaction text itself"));
	fx_txt_free(&t);
	/* so is /dev/stdin, a pipe then; a file name for it otherwise */
	assert_int_equal(parse_stdin("write a @/dev/stdin\n", "x", 1, &t, 1), -EINVAL);
	assert_non_null(strstr(t.err, "@/dev/stdin: is standard input, which holds"));
	fx_txt_free(&t);
	assert_int_equal(parse_stdin("write a @/dev/stdin\n", "piped", 5, &t, 0), 0);
	assert_memory_equal(ARG_S(t, 1, 1), "piped", 5);
	fx_txt_free(&t);
	/* once per text */
	assert_int_equal(parse_stdin("write a @-\nwrite b @-\n", "x", 1, &t, 0), -EINVAL);
	assert_int_equal(t.errline, 2);
	assert_non_null(strstr(t.err, "standard input was read already"));
	fx_txt_free(&t);

	/* a FIFO named as @FILE is read to its end */
	assert_true(asprintf(&path, "%s/fifo", d) > 0);
	assert_int_equal(mkfifo(path, 0600), 0);
	pid = fork();
	if (pid == 0) {
		int w = open(path, O_WRONLY);

		_exit(w >= 0 && write(w, "through a fifo", 14) == 14 ? 0 : 1);
	}
	fd = t_dirfd(d);
	assert_int_equal(fx_txt_parse("write f @fifo\n", 14, fd, &t), 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(t.ops[1].args[2], 14);
	assert_memory_equal(ARG_S(t, 1, 1), "through a fifo", 14);
	fx_txt_free(&t);
	/* a device is not data */
	assert_int_equal(fx_txt_parse("write f @/dev/null\n", 19, fd, &t), -EINVAL);
	assert_non_null(strstr(t.err, "@/dev/null: not a regular file or a pipe"));
	fx_txt_free(&t);
	close(fd);
	free(path);
	t_rmtree(d);
	free(d);
}

/* At most fx_txt_stream_max bytes from a pipe: the limit itself passes,
 * one more byte is an error; and the default is 64 MiB. */
static void stream_limit(void **state)
{
	size_t big = (64u << 20) + 1;
	char *data = malloc(big);
	struct fx_txt t;

	(void)state;
	assert_non_null(data);
	memset(data, 'q', big);
	assert_int_equal(fx_txt_stream_max, 64u << 20);
	assert_int_equal(parse_stdin("write a @-\n", data, big, &t, 0), -EINVAL);
	assert_non_null(strstr(t.err, "more than 67108864 bytes (the limit of @- "
				      "and of pipes)"));
	fx_txt_free(&t);
	assert_int_equal(parse_stdin("write a @-\n", data, big - 1, &t, 0), 0);
	assert_int_equal(t.ops[1].args[2], (__s64)(big - 1));
	fx_txt_free(&t);

	fx_txt_stream_max = 100000;
	assert_int_equal(parse_stdin("write a @-\n", data, 100001, &t, 0), -EINVAL);
	fx_txt_free(&t);
	assert_int_equal(parse_stdin("write a @-\n", data, 100000, &t, 0), 0);
	assert_int_equal(t.ops[1].args[2], 100000);
	fx_txt_free(&t);
	fx_txt_stream_max = 64u << 20;
	free(data);
}

/* Regular files: @FILE up to 4 GiB, copy-in and import up to 1 GiB a
 * file (sparse files one byte over: refused before a byte is read). */
static void file_limits(void **state)
{
	char *o = t_mkdomain(), *p;
	struct fx_txt t;
	int fd, dfd;

	(void)state;
	mkd(o, "tree", 0755);
	assert_true(asprintf(&p, "%s/tree/huge", o) > 0);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (1LL << 30) + 1), 0);
	dfd = t_dirfd(o);
	assert_int_equal(fx_txt_parse("copy-in tree/huge x\n", 20, dfd, &t), -EINVAL);
	assert_non_null(strstr(t.err, "tree/huge: larger than 1024 MiB"));
	fx_txt_free(&t);
	assert_int_equal(fx_txt_parse("import tree x\n", 14, dfd, &t), -EINVAL);
	assert_non_null(strstr(t.err, "tree/huge: larger than 1024 MiB"));
	fx_txt_free(&t);
	assert_int_equal(ftruncate(fd, (1LL << 32) + 1), 0);
	assert_int_equal(fx_txt_parse("write x @tree/huge\n", 19, dfd, &t), -EINVAL);
	assert_non_null(strstr(t.err, "@tree/huge: larger than 4096 MiB"));
	fx_txt_free(&t);
	close(fd);
	close(dfd);
	free(p);
	t_rmtree(o);
	free(o);
}

/* ---- task ops run: the same tree as the primitive ops by hand ---- */

static char *fmt(const char *f, const char *o)
{
	char *s;
	size_t n = strlen(f) + 8 * strlen(o) + 1;

	size_t k = 0;

	s = malloc(n);
	assert_non_null(s);
	for (const char *c = f; *c; c++)
		if (*c == '%') {
			memcpy(s + k, o, strlen(o));
			k += strlen(o);
		} else {
			s[k++] = *c;
		}
	s[k] = 0;
	return s;
}

static void differential(void **state)
{
	/* % is the outside tree's directory */
	static const char task[] =
		"write w \"hello\" 0600\n"
		"write big \"short\"\n"
		"replace a \"new alpha\"\n"
		"replace d/c \"see\" 0640\n"
		"symlink d/e ln replace\n"
		"symlink a fresh replace\n"
		"copy-in \"%/one\" cf\n"
		"import \"%/src\" imp\n";
	static const char hand[] =
		"open 0 w O_WRONLY|O_CREAT|O_TRUNC 0600\npwrite 0 \"hello\" 0\nclose 0\n"
		"open 0 big O_WRONLY|O_CREAT|O_TRUNC\npwrite 0 \"short\" 0\nclose 0\n"
		"open 0 t1 O_WRONLY|O_CREAT|O_EXCL\npwrite 0 \"new alpha\" 0\nclose 0\n"
		"rename t1 a\n"
		"open 0 d/t2 O_WRONLY|O_CREAT|O_EXCL 0640\npwrite 0 \"see\" 0\nclose 0\n"
		"rename d/t2 d/c\n"
		"symlink d/e t3\nrename t3 ln\n"
		"symlink a t4\nrename t4 fresh\n"
		"open 0 cf O_WRONLY|O_CREAT|O_TRUNC 0640\npwrite 0 \"ONE\" 0\nclose 0\n"
		"mkdir imp 0750\n"
		"open 0 imp/a O_WRONLY|O_CREAT|O_EXCL 0600\npwrite 0 \"AAA\" 0\nclose 0\n"
		"mkdir imp/sub 0700\n"
		"open 0 imp/sub/b O_WRONLY|O_CREAT|O_EXCL 0644\nclose 0\n"
		"symlink ../../x imp/sub/l\n";
	char *o = outside_tree(), *d1 = t_fresh(), *d2 = t_fresh();
	char *text = fmt(task, o), *s1, *s2, *before = t_snapshot(d1);

	(void)state;
	assert_int_equal(tx_text(d1, text, NULL), 0);
	assert_int_equal(tx_text(d2, hand, NULL), 0);
	s1 = t_snapshot(d1);
	s2 = t_snapshot(d2);
	assert_string_equal(s1, s2);
	assert_string_not_equal(s1, before);
	/* replace made a new file: the xattr of the old a is gone */
	assert_null(strstr(s1, "user.k"));
	assert_non_null(strstr(before, "user.k"));
	free(s1);
	free(s2);
	/* a failing task op rolls back the whole text: nothing changed */
	s1 = t_snapshot(d1);
	assert_int_not_equal(tx_text(d1, "write n \"x\"\nimport \"/proc/self/fd\" "
				     "nowhere/x\n", NULL), 0);
	assert_int_not_equal(tx_text(d1, "write n \"x\"\nreplace no/dir \"x\"\n",
				     NULL), 0);
	s2 = t_snapshot(d1);
	assert_string_equal(s1, s2);
	free(s1);
	free(s2);
	free(before);
	free(text);
	t_drop(d1);
	t_drop(d2);
	t_rmtree(o);
	free(o);
}

/*
 * The site-publish task: 500 files in a new release directory and the
 * "current" link switched to it, in two lines of text, one transaction.
 */
static void site_publish(void **state)
{
	char *o = t_mkdomain(), *d = t_mkdomain(), *text, rel[64], want[64], *got;
	char target[64];
	ssize_t n;
	size_t len;
	long r;

	(void)state;
	mkd(o, "site", 0755);
	mkd(o, "v1", 0755);
	put(o, "v1/index.html", "v1", 0644);
	for (int i = 0; i < 500; i++) {
		if (i % 50 == 0) {
			snprintf(rel, sizeof(rel), "site/d%02d", i / 50);
			mkd(o, rel, 0755);
		}
		snprintf(rel, sizeof(rel), "site/d%02d/page%03d.html", i / 50, i);
		snprintf(want, sizeof(want), "<p>page %d</p>\n", i);
		put(o, rel, want, 0644);
	}
	lnk(o, "d00/page000.html", "site/index.html");
	assert_true(asprintf(&text, "mkdir releases\nimport \"%s/v1\" releases/v1\n"
			     "symlink releases/v1 current\n", o) > 0);
	assert_int_equal(tx_text(d, text, NULL), 0);
	free(text);

	assert_true(asprintf(&text, "import \"%s/site\" releases/v2\n"
			     "symlink releases/v2 current replace\n", o) > 0);
	r = tx_text(d, text, NULL);
	assert_int_equal(r, 0);
	free(text);
	assert_true(asprintf(&text, "%s/current", d) > 0);
	n = readlink(text, target, sizeof(target) - 1);
	assert_true(n > 0);
	target[n] = 0;
	assert_string_equal(target, "releases/v2");
	free(text);
	for (int i = 0; i < 500; i++) {
		snprintf(rel, sizeof(rel), "current/d%02d/page%03d.html", i / 50, i);
		snprintf(want, sizeof(want), "<p>page %d</p>\n", i);
		got = t_read(d, rel, &len);
		assert_int_equal(len, strlen(want));
		assert_memory_equal(got, want, len);
		free(got);
	}
	got = t_read(d, "current/index.html", &len);
	assert_memory_equal(got, "<p>page 0</p>\n", len);
	free(got);
	got = t_snapshot(d);
	assert_null(strstr(got, "fstx-tmp")); /* the temporary link is gone */
	assert_non_null(strstr(got, "current mode=120777 nlink=1 -> releases/v2"));
	assert_non_null(strstr(got, "releases/v1/index.html"));
	free(got);
	t_rmtree(o);
	t_rmtree(d);
	free(o);
	free(d);
}

/* ---- every EXAMPLE of fstx-tx(5) parses and commits ---- */

/* man/fstx-tx.5 in the working directory or a directory above the test
 * binary (the source tree holding its build directory). */
static char *man_page(size_t *len)
{
	char exe[4096], *p, *text;
	ssize_t n;

	text = t_read(".", "man/fstx-tx.5", len);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = 0;
	while (!text && (p = strrchr(exe, '/')) && p != exe) {
		*p = 0;
		text = t_read(exe, "man/fstx-tx.5", len);
	}
	return text;
}

/* The body of roff between .EX and .EE, with \e and \- undone. */
static char *unroff(const char *s, const char *end)
{
	char *o = malloc((size_t)(end - s) + 1), *w = o;

	assert_non_null(o);
	while (s < end) {
		if (s[0] == '\\' && s + 1 < end && (s[1] == 'e' || s[1] == '-')) {
			*w++ = s[1] == 'e' ? '\\' : '-';
			s += 2;
		} else {
			*w++ = *s++;
		}
	}
	*w = 0;
	return o;
}

static void man_examples(void **state)
{
	size_t len, nex = 0;
	char *man = man_page(&len), *o = t_mkdomain(), *s;
	int fd;

	(void)state;
	assert_non_null(man);
	/* the outside files the examples name */
	mkd(o, "site", 0755);
	put(o, "site/index.html", "<h1>hi</h1>\n", 0644);
	mkd(o, "site/css", 0755);
	put(o, "site/css/main.css", "h1 { }\n", 0644);
	lnk(o, "index.html", "site/home.html");
	put(o, "logo.png", "\x89PNG", 0644);
	put(o, "app.conf", "port = 80\n", 0640);
	fd = t_dirfd(o);
	s = strstr(man, "\n.SH EXAMPLES");
	assert_non_null(s);
	while ((s = strstr(s, "\n.EX\n"))) {
		char *e = strstr(s + 5, "\n.EE"), *text, *d = t_mkdomain();
		struct fx_txt t;
		struct btrfs_ioctl_usertrans ut;
		int dfd = t_dirfd(d);

		assert_non_null(e);
		mkd(d, "conf", 0755);
		mkd(d, "releases", 0755);
		text = unroff(s + 5, e + 1);
		/* standard input is a pipe, for @- */
		if (parse_stdin_at(text, "generated\n", 10, &t, 0, fd) < 0)
			fail_msg("example %zu:\n%s\n%s", nex, text, t.err);
		fx_txt_ut(&t, &ut);
		if (fstx_usertrans(dfd, &ut) != 0)
			fail_msg("example %zu did not commit (op %llu):\n%s", nex,
				 (unsigned long long)ut.ops_completed, text);
		fx_txt_free(&t);
		free(text);
		close(dfd);
		t_rmtree(d);
		free(d);
		nex++;
		s = e;
	}
	assert_true(nex >= 5);
	close(fd);
	free(man);
	t_rmtree(o);
	free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_op),
		cmocka_unit_test(conditions),
		cmocka_unit_test(datafile),
		cmocka_unit_test(errors),
		cmocka_unit_test(read_text),
		cmocka_unit_test(error_shapes),
		cmocka_unit_test(task_ops),
		cmocka_unit_test(task_refusals),
		cmocka_unit_test(import_ops),
		cmocka_unit_test(stdin_and_pipes),
		cmocka_unit_test(stream_limit),
		cmocka_unit_test(file_limits),
		cmocka_unit_test(differential),
		cmocka_unit_test(site_publish),
		cmocka_unit_test(man_examples),
	};

	return cmocka_run_group_tests_name("txtext", tests, NULL, NULL);
}
