/* SPDX-License-Identifier: MIT */
/* test_abi.c - the ABI of the 2009 btrfs USERTRANS RFC: layout, validation, FAIL_ON flags, results. */
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
#include <sys/statvfs.h>
#include <unistd.h>
#include <cmocka.h>

#include "fstx/btrfs_usertrans.h"
#include "helpers.h"

static int setup(void **state)
{
	char *d = t_mkdomain();

	t_populate(d);
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	t_rmtree(*state);
	free(*state);
	return 0;
}

static void layout(void **state)
{
	(void)state;
	assert_int_equal(sizeof(struct btrfs_ioctl_usertrans_op), 64);
	assert_int_equal(sizeof(struct btrfs_ioctl_usertrans), 56);
	assert_int_equal(offsetof(struct btrfs_ioctl_usertrans_op, args), 8);
	assert_int_equal(offsetof(struct btrfs_ioctl_usertrans_op, rval), 48);
	assert_int_equal(offsetof(struct btrfs_ioctl_usertrans_op, flags), 56);
	assert_int_equal(offsetof(struct btrfs_ioctl_usertrans, ops_completed), 48);
	assert_int_equal(BTRFS_IOC_UT_OP_OPEN, 1);
	assert_int_equal(BTRFS_IOC_UT_OP_CLONERANGE, 11);
	assert_int_equal(FSTX_OP_RENAME, 12);
	assert_int_equal(FSTX_OP_SYMLINK, 13);
	assert_int_equal(BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE, 2);
	assert_int_equal(BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GTE, 64);
	assert_int_equal(BTRFS_IOC_UT_FLAG_WEDGEONFAIL, 8192);
	assert_true((FSTX_UT_STRICT & (BTRFS_IOC_UT_FLAG_WEDGEONFAIL | 0x7e)) == 0);
}

/* The RFC's calling sequence, with the one-line port. */
static void seed_example(void **state)
{
	const char *d = *state;
	const char data[] = "object payload";
	struct btrfs_ioctl_usertrans_op ops[] = {
		{ .op = BTRFS_IOC_UT_OP_OPEN,
		  .args = { P("obj.tmp"), O_WRONLY | O_CREAT | O_EXCL, 0644, 0 },
		  .flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT, .rval = 0 },
		{ .op = BTRFS_IOC_UT_OP_PWRITE,
		  .args = { 0, P(data), sizeof(data) - 1, 0 },
		  .flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE, .rval = sizeof(data) - 1 },
		{ .op = BTRFS_IOC_UT_OP_SETXATTR,
		  .args = { P("obj.tmp"), P("user.ver"), P("7"), 1, 0 },
		  .flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE, .rval = 0 },
		{ .op = BTRFS_IOC_UT_OP_CLOSE, .args = { 0 } },
		{ .op = BTRFS_IOC_UT_OP_LINK, .args = { P("obj.tmp"), P("obj") },
		  .flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE, .rval = 0 },
		{ .op = BTRFS_IOC_UT_OP_UNLINK, .args = { P("obj.tmp") },
		  .flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE, .rval = 0 },
	};
	struct btrfs_ioctl_usertrans ut = {
		.num_ops = 6, .ops_ptr = (__u64)(intptr_t)ops, .num_fds = 1,
		.flags = BTRFS_IOC_UT_FLAG_WEDGEONFAIL,
	};
	int fd = t_dirfd(d);
	char *got;

	assert_int_equal(fstx_usertrans(fd, &ut), 0);
	close(fd);
	assert_int_equal(ut.ops_completed, 6);
	assert_int_equal(ops[0].rval, 0);
	assert_int_equal(ops[1].rval, sizeof(data) - 1);
	got = t_read(d, "obj", NULL);
	assert_string_equal(got, data);
	free(got);
	assert_null(t_read(d, "obj.tmp", NULL));
}

static void expect_invalid(const char *d, struct btrfs_ioctl_usertrans_op *ops,
			   size_t n, uint64_t nfds, uint64_t want_bad)
{
	char *before = t_snapshot(d), *after;
	uint64_t done = 99;

	assert_int_equal(t_run(d, ops, n, nfds, 0, &done), -EINVAL);
	assert_int_equal(done, want_bad);
	after = t_snapshot(d);
	assert_string_equal(before, after);
	free(before);
	free(after);
}

static void validation(void **state)
{
	const char *d = *state;
	struct btrfs_ioctl_usertrans_op ops[4];
	char buf[4] = "xyz";

	/* unknown op after a valid one that would change the tree */
	ops[0] = t_op(BTRFS_IOC_UT_OP_UNLINK, P("a"), 0, 0, 0, 0);
	ops[1] = t_op(99, 0, 0, 0, 0, 0);
	expect_invalid(d, ops, 2, 0, 1);
	/* fd index outside the table */
	ops[1] = t_op(BTRFS_IOC_UT_OP_OPEN, P("x"), O_WRONLY | O_CREAT, 0644, 1, 0);
	expect_invalid(d, ops, 2, 1, 1);
	/* use of an fd that no OPEN filled */
	ops[1] = t_op(BTRFS_IOC_UT_OP_PWRITE, 0, P(buf), 3, 0, 0);
	expect_invalid(d, ops, 2, 1, 1);
	/* use after close */
	ops[1] = t_op(BTRFS_IOC_UT_OP_OPEN, P("x"), O_WRONLY | O_CREAT, 0644, 0, 0);
	ops[2] = t_op(BTRFS_IOC_UT_OP_CLOSE, 0, 0, 0, 0, 0);
	ops[3] = t_op(BTRFS_IOC_UT_OP_PWRITE, 0, P(buf), 3, 0, 0);
	expect_invalid(d, ops, 4, 1, 3);
	/* NULL pointer */
	ops[1] = t_op(BTRFS_IOC_UT_OP_MKDIR, 0, 0755, 0, 0, 0);
	expect_invalid(d, ops, 2, 0, 1);
	/* negative length, negative offset, negative size */
	ops[2] = t_op(BTRFS_IOC_UT_OP_PWRITE, 0, P(buf), -1, 0, 0);
	ops[1] = t_op(BTRFS_IOC_UT_OP_OPEN, P("x"), O_WRONLY | O_CREAT, 0644, 0, 0);
	expect_invalid(d, ops, 3, 1, 2);
	ops[2] = t_op(BTRFS_IOC_UT_OP_PWRITE, 0, P(buf), 3, -5, 0);
	expect_invalid(d, ops, 3, 1, 2);
	ops[1] = t_op(BTRFS_IOC_UT_OP_TRUNCATE, P("a"), -1, 0, 0, 0);
	expect_invalid(d, ops, 2, 0, 1);
	/* offset + length overflow */
	ops[2] = t_op(BTRFS_IOC_UT_OP_PWRITE, 0, P(buf), 3, INT64_MAX - 1, 0);
	ops[1] = t_op(BTRFS_IOC_UT_OP_OPEN, P("x"), O_WRONLY | O_CREAT, 0644, 0, 0);
	expect_invalid(d, ops, 3, 1, 2);
	/* bad rename flags, unknown op flag bits */
	ops[1] = t_op(FSTX_OP_RENAME, P("a"), P("z"), 77, 0, 0);
	expect_invalid(d, ops, 2, 0, 1);
	ops[1] = t_op(BTRFS_IOC_UT_OP_UNLINK, P("b"), 0, 0, 0, 0);
	ops[1].flags = 1 << 9;
	expect_invalid(d, ops, 2, 0, 1);
	/* limits */
	expect_invalid(d, ops, FSTX_MAX_OPS + 1, 0, 0);
	expect_invalid(d, ops, 1, FSTX_MAX_FDS + 1, 0);
}

/* One failing unlink with each FAIL_ON flag: fails or not as the RFC says. */
static void fail_on_flags(void **state)
{
	const char *d = *state;
	static const struct { uint64_t flag; int64_t want; int fails; } c[] = {
		{ BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE, -ENOENT, 0 },
		{ BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE, 0, 1 },
		{ BTRFS_IOC_UT_OP_FLAG_FAIL_ON_EQ, -ENOENT, 1 },
		{ BTRFS_IOC_UT_OP_FLAG_FAIL_ON_EQ, 0, 0 },
		{ BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT, 0, 1 },
		{ BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT, -ENOENT, 0 },
		{ BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GT, -100, 1 },
		{ BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GT, 0, 0 },
		{ BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LTE, -ENOENT, 1 },
		{ BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LTE, -ENOENT - 1, 0 },
		{ BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GTE, -ENOENT, 1 },
		{ BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GTE, -ENOENT + 1, 0 },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct btrfs_ioctl_usertrans_op ops[2];
		char *before = t_snapshot(d), *after;
		uint64_t done;
		long r;

		ops[0] = t_op(BTRFS_IOC_UT_OP_MKDIR, P("flagdir"), 0700, 0, 0, 0);
		ops[1] = t_op(BTRFS_IOC_UT_OP_UNLINK, P("no-such-file"), 0, 0, 0, 0);
		ops[1].flags = c[i].flag;
		ops[1].rval = c[i].want;
		r = t_run(d, ops, 2, 0, 0, &done);
		assert_int_equal(ops[1].rval, -ENOENT); /* result replaces want */
		after = t_snapshot(d);
		if (c[i].fails) {
			assert_int_equal(r, -ENOENT);
			assert_int_equal(done, 1);
			assert_string_equal(before, after);
		} else {
			assert_int_equal(r, 0);
			assert_int_equal(done, 2);
			assert_string_not_equal(before, after);
			ops[0] = t_op(BTRFS_IOC_UT_OP_RMDIR, P("flagdir"), 0, 0, 0, 0);
			assert_int_equal(t_run(d, ops, 1, 0, 0, NULL), 0);
		}
		free(before);
		free(after);
	}
}

/* A positive result that fails its condition gives -ECANCELED. */
static void canceled(void **state)
{
	const char *d = *state;
	char buf[] = "12345";
	struct btrfs_ioctl_usertrans_op ops[2] = {
		t_op(BTRFS_IOC_UT_OP_OPEN, P("a"), O_RDWR, 0, 0, 0),
		t_op(BTRFS_IOC_UT_OP_PWRITE, 0, P(buf), 5, 0, 0),
	};
	char *before = t_snapshot(d), *after;
	uint64_t done;

	ops[1].flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_EQ;
	ops[1].rval = 5;
	assert_int_equal(t_run(d, ops, 2, 1, 0, &done), -ECANCELED);
	assert_int_equal(done, 1);
	assert_int_equal(ops[1].rval, 5);
	after = t_snapshot(d);
	assert_string_equal(before, after);
	free(before);
	free(after);
}

/* No flags: a failing op does not fail the transaction (the RFC's behaviour). */
static void no_flags_continue(void **state)
{
	const char *d = *state;
	struct btrfs_ioctl_usertrans_op ops[2] = {
		t_op(BTRFS_IOC_UT_OP_UNLINK, P("missing"), 0, 0, 0, 0),
		t_op(BTRFS_IOC_UT_OP_UNLINK, P("old"), 0, 0, 0, 0),
	};
	uint64_t done;

	assert_int_equal(t_run(d, ops, 2, 0, 0, &done), 0);
	assert_int_equal(done, 2);
	assert_int_equal(ops[0].rval, -ENOENT);
	assert_int_equal(ops[1].rval, 0);
	assert_null(t_read(d, "old", NULL));
}

static void strict_flag(void **state)
{
	const char *d = *state;
	struct btrfs_ioctl_usertrans_op ops[2] = {
		t_op(BTRFS_IOC_UT_OP_UNLINK, P("old"), 0, 0, 0, 0),
		t_op(BTRFS_IOC_UT_OP_UNLINK, P("missing"), 0, 0, 0, 0),
	};
	char *before = t_snapshot(d), *after;
	uint64_t done;

	assert_int_equal(t_run(d, ops, 2, 0, FSTX_UT_STRICT, &done), -ENOENT);
	assert_int_equal(done, 1);
	after = t_snapshot(d);
	assert_string_equal(before, after);
	free(before);
	free(after);
}

static void confinement(void **state)
{
	const char *d = *state;
	static const char *bad[] = { "/etc/passwd", "../x", "d/../../x" };
	struct btrfs_ioctl_usertrans_op op;

	for (size_t i = 0; i < 3; i++) {
		op = t_op(BTRFS_IOC_UT_OP_UNLINK, P(bad[i]), 0, 0, 0, 0);
		assert_int_equal(t_run(d, &op, 1, 0, FSTX_UT_STRICT, NULL), -EXDEV);
	}
	op = t_op(BTRFS_IOC_UT_OP_UNLINK, P(".fstx/journal"), 0, 0, 0, 0);
	assert_int_equal(t_run(d, &op, 1, 0, FSTX_UT_STRICT, NULL), -EPERM);
	op = t_op(FSTX_OP_SYMLINK, P("/etc"), P("esc"), 0, 0, 0);
	assert_int_equal(t_run(d, &op, 1, 0, FSTX_UT_STRICT, NULL), 0);
	op = t_op(BTRFS_IOC_UT_OP_OPEN, P("esc/passwd"), O_RDONLY, 0, 0, 0);
	assert_int_equal(t_run(d, &op, 1, 1, FSTX_UT_STRICT, NULL), -EXDEV);
	op = t_op(FSTX_OP_SYMLINK, P(".fstx"), P("inner"), 0, 0, 0);
	assert_int_equal(t_run(d, &op, 1, 0, FSTX_UT_STRICT, NULL), 0);
	op = t_op(BTRFS_IOC_UT_OP_UNLINK, P("inner/journal"), 0, 0, 0, 0);
	assert_int_equal(t_run(d, &op, 1, 0, FSTX_UT_STRICT, NULL), -EPERM);
}

static void wedge(void **state)
{
	const char *d = *state;
	struct btrfs_ioctl_usertrans_op op = t_op(BTRFS_IOC_UT_OP_UNLINK, P("old"),
						  0, 0, 0, 0);
	char *p;
	int fd;

	/* A wedge mark refuses every transaction with -EROFS until recover. */
	if (asprintf(&p, "%s/.fstx/wedged", d) < 0)
		abort();
	assert_int_equal(t_run(d, &op, 1, 0, 0, NULL), 0);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	close(fd);
	op = t_op(BTRFS_IOC_UT_OP_UNLINK, P("a"), 0, 0, 0, 0);
	assert_int_equal(t_run(d, &op, 1, 0, 0, NULL), -EROFS);
	assert_int_equal(access(p, F_OK), 0);
	{
		char *a = t_read(d, "a", NULL);

		assert_non_null(a);
		free(a);
	}
	{
		fstx_domain *dom;

		assert_int_equal(fstx_domain_open(d, &dom), 0);
		assert_true(fstx_recover(dom) >= 0);
		fstx_domain_close(dom);
	}
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(t_run(d, &op, 1, 0, 0, NULL), 0);
	free(p);
}

static void enospc_preflight(void **state)
{
	const char *d = *state;
	struct btrfs_ioctl_usertrans ut;
	struct btrfs_ioctl_usertrans_op op = t_op(BTRFS_IOC_UT_OP_UNLINK, P("old"),
						  0, 0, 0, 0);
	char *before = t_snapshot(d), *after;
	int fd = t_dirfd(d);

	ut = (struct btrfs_ioctl_usertrans){ .num_ops = 1,
		.ops_ptr = (__u64)(intptr_t)&op, .data_bytes = UINT64_MAX / 2 };
	assert_int_equal(fstx_usertrans(fd, &ut), -ENOSPC);
	assert_int_equal(ut.ops_completed, 0);
	after = t_snapshot(d);
	assert_string_equal(before, after);
	ut.data_bytes = 0;
	ut.metadata_ops = UINT64_MAX / 2;
	{
		struct statvfs sv;

		assert_int_equal(fstatvfs(fd, &sv), 0);
		/* btrfs has no inode limit (f_files 0): nothing to refuse there */
		assert_int_equal(fstx_usertrans(fd, &ut), sv.f_files ? -ENOSPC : 0);
	}
	close(fd);
	free(before);
	free(after);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(layout),
		cmocka_unit_test_setup_teardown(seed_example, setup, teardown),
		cmocka_unit_test_setup_teardown(validation, setup, teardown),
		cmocka_unit_test_setup_teardown(fail_on_flags, setup, teardown),
		cmocka_unit_test_setup_teardown(canceled, setup, teardown),
		cmocka_unit_test_setup_teardown(no_flags_continue, setup, teardown),
		cmocka_unit_test_setup_teardown(strict_flag, setup, teardown),
		cmocka_unit_test_setup_teardown(confinement, setup, teardown),
		cmocka_unit_test_setup_teardown(wedge, setup, teardown),
		cmocka_unit_test_setup_teardown(enospc_preflight, setup, teardown),
	};

	return cmocka_run_group_tests_name("abi", tests, NULL, NULL);
}
