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
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "internal.h"
#include "fstx/btrfs_usertrans.h"
#include "helpers.h"
#include "faultos.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_op),
		cmocka_unit_test(conditions),
		cmocka_unit_test(datafile),
		cmocka_unit_test(errors),
		cmocka_unit_test(read_text),
	};

	return cmocka_run_group_tests_name("txtext", tests, NULL, NULL);
}
