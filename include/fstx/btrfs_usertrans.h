/* SPDX-License-Identifier: MIT */
/*
 * fstx/btrfs_usertrans.h - the BTRFS_IOC_USERTRANS ABI (RFC, 2009), reproduced.
 *
 * Names, types, layout and values are exactly those of the RFC so that code
 * written against it compiles unchanged.  The only difference for a caller is
 * one line:
 *
 *     ioctl(fd, BTRFS_IOC_USERTRANS, &ut)   becomes   fstx_usertrans(fd, &ut)
 *
 * "fd" arguments of ops are indexes into a private table of num_fds slots.
 * Pointer arguments are passed as (__s64)(intptr_t)ptr.
 */
#ifndef FSTX_BTRFS_USERTRANS_H
#define FSTX_BTRFS_USERTRANS_H

#include <linux/types.h>

/* usertrans ops */
/* the 'fd' values are _indices_ into a temporary fd table, see num_fds below */
#define BTRFS_IOC_UT_OP_OPEN         1  /* path, flags, mode, fd */
#define BTRFS_IOC_UT_OP_CLOSE        2  /* fd */
#define BTRFS_IOC_UT_OP_PWRITE       3  /* fd, data, length, offset */
#define BTRFS_IOC_UT_OP_UNLINK       4  /* path */
#define BTRFS_IOC_UT_OP_LINK         5  /* oldpath, newpath */
#define BTRFS_IOC_UT_OP_MKDIR        6  /* path, mode */
#define BTRFS_IOC_UT_OP_RMDIR        7  /* path */
#define BTRFS_IOC_UT_OP_TRUNCATE     8  /* path, size */
#define BTRFS_IOC_UT_OP_SETXATTR     9  /* path, name, data, len, flags */
#define BTRFS_IOC_UT_OP_REMOVEXATTR 10  /* path, name */
#define BTRFS_IOC_UT_OP_CLONERANGE  11  /* dst fd, src fd, off, len, dst off */

/* define what 'failure' entails for each op based on return value */
#define BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE    (1<< 1)
#define BTRFS_IOC_UT_OP_FLAG_FAIL_ON_EQ    (1<< 2)
#define BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT    (1<< 3)
#define BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GT    (1<< 4)
#define BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LTE   (1<< 5)
#define BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GTE   (1<< 6)

struct btrfs_ioctl_usertrans_op {
	__u64 op;
	__s64 args[5];
	__s64 rval;
	__u64 flags;
};

/*
 * If an op fails and we cannot complete the transaction, we may want
 * to lock up the file system (requiring a reboot) to prevent a
 * partial result from committing.  (fstx: the domain is wedged instead,
 * until `fstx recover DIR` succeeds.)
 */
#define BTRFS_IOC_UT_FLAG_WEDGEONFAIL (1<<13)

struct btrfs_ioctl_usertrans {
	__u64 num_ops;                  /* in: # ops */
	__u64 ops_ptr;                  /* in: usertrans_op array */
	__u64 num_fds;	                /* in: size of fd table (max fd + 1) */
	__u64 data_bytes, metadata_ops; /* in: for space reservation */
	__u64 flags;                    /* in: flags */
	__u64 ops_completed;            /* out: # ops completed */
};

#ifdef __cplusplus
static_assert(sizeof(struct btrfs_ioctl_usertrans_op) == 64, "op ABI");
static_assert(sizeof(struct btrfs_ioctl_usertrans) == 56, "ut ABI");
#else
_Static_assert(sizeof(struct btrfs_ioctl_usertrans_op) == 64, "op ABI");
_Static_assert(sizeof(struct btrfs_ioctl_usertrans) == 56, "ut ABI");
#endif

#include <fstx.h>

#endif /* FSTX_BTRFS_USERTRANS_H */
