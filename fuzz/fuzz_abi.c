/* SPDX-License-Identifier: MIT */
/*
 * fuzz_abi.c - ABI validation and the engine, from raw op records.
 *
 * Input: 8 bytes of header (num_fds, flags selector, data_bytes and
 * metadata_ops selectors), then 64-byte struct btrfs_ioctl_usertrans_op
 * records taken as they are, except that pointer arguments are replaced by
 * pointers into a fixed pool (a caller's bad pointer is the caller's bug,
 * not fstx's): the fuzzed value picks the string, and buffer lengths that
 * are not negative are kept within the pool buffer.  A vector that
 * validates is run on a fresh domain under the all-or-nothing oracle.
 */
#include "common.h"

static const char *const pool[] = {
	"a", "b", "big", "old", "hard", "ln", "d", "d/c", "d/e", "d/e/f", "empty",
	"n", "m", "m/n", "new/x", "out", "out/secret", "../outside/secret",
	"/etc/passwd", ".fstx", ".fstx/journal", "d/../../outside", "", ".", "..",
	"user.k", "user.x", "trusted.x", "security.x", "user.", "ln/x", "a/",
	"/proc/self/fd/3", "d/e/f/g", "empty/..", "./a",
};
#define NPOOL (sizeof(pool) / sizeof(pool[0]))
static char buf[65536];

static int64_t str(int64_t v)
{
	if (v == 0)
		return 0; /* NULL stays NULL: validation must refuse it */
	return (int64_t)(intptr_t)pool[(uint64_t)v % NPOOL];
}

static int64_t len_in_buf(int64_t v)
{
	return v < 0 ? v : v % (int64_t)(sizeof(buf) + 1);
}

static void fix_pointers(struct btrfs_ioctl_usertrans_op *op)
{
	switch (op->op) {
	case BTRFS_IOC_UT_OP_OPEN: case BTRFS_IOC_UT_OP_UNLINK:
	case BTRFS_IOC_UT_OP_MKDIR: case BTRFS_IOC_UT_OP_RMDIR:
	case BTRFS_IOC_UT_OP_TRUNCATE: case FSTX_OP_ASSERT_ABSENT:
	case FSTX_OP_ASSERT_EXISTS:
		op->args[0] = str(op->args[0]);
		break;
	case FSTX_OP_ASSERT_DATA:
		op->args[0] = str(op->args[0]);
		op->args[1] = op->args[1] ? (int64_t)(intptr_t)buf : 0;
		op->args[2] = len_in_buf(op->args[2]);
		break;
	case BTRFS_IOC_UT_OP_LINK: case FSTX_OP_RENAME: case FSTX_OP_SYMLINK:
	case BTRFS_IOC_UT_OP_REMOVEXATTR:
		op->args[0] = str(op->args[0]);
		op->args[1] = str(op->args[1]);
		break;
	case BTRFS_IOC_UT_OP_PWRITE:
		op->args[1] = op->args[1] ? (int64_t)(intptr_t)buf : 0;
		op->args[2] = len_in_buf(op->args[2]);
		break;
	case BTRFS_IOC_UT_OP_SETXATTR: case FSTX_OP_ASSERT_XATTR:
		op->args[0] = str(op->args[0]);
		op->args[1] = str(op->args[1]);
		op->args[2] = op->args[2] ? (int64_t)(intptr_t)buf : 0;
		op->args[3] = len_in_buf(op->args[3]);
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct btrfs_ioctl_usertrans_op ops[32];
	struct btrfs_ioctl_usertrans ut = { 0 };
	uint64_t bad, flagsel[] = { 0, FSTX_UT_STRICT, BTRFS_IOC_UT_FLAG_WEDGEONFAIL,
				    FSTX_UT_STRICT | BTRFS_IOC_UT_FLAG_WEDGEONFAIL, 1ULL << 40 };
	size_t n;

	if (size < 8)
		return 0;
	fz_setup();
	n = (size - 8) / sizeof(ops[0]);
	if (n > 32)
		n = 32;
	memcpy(ops, data + 8, n * sizeof(ops[0]));
	for (size_t i = 0; i < n; i++)
		fix_pointers(&ops[i]);
	ut.num_ops = n;
	ut.ops_ptr = n ? (uint64_t)(uintptr_t)ops : (data[1] & 1 ? 0 : (uint64_t)(uintptr_t)ops);
	ut.num_fds = data[0] == 0xff ? FSTX_MAX_FDS + 1 : data[0] % 16;
	ut.flags = flagsel[data[1] % 5];
	ut.data_bytes = data[2] == 0xff ? UINT64_MAX : (uint64_t)data[2] << 10;
	ut.metadata_ops = data[3] == 0xff ? UINT64_MAX : data[3];
	if (fx_validate(&ut, &bad) < 0) {
		FZ_CHECK(bad <= n, "bad op index %llu of %zu", (unsigned long long)bad, n);
		return 0;
	}
	fz_run_checked(&ut);
	return 0;
}
