/* SPDX-License-Identifier: MIT */
/*
 * seed_usertrans.c - a program written for the 2009 BTRFS_IOC_USERTRANS RFC,
 * ported to fstx.  The port is the include and one line:
 *
 *   -	ret = ioctl(dirfd, BTRFS_IOC_USERTRANS, &ut);
 *   +	ret = fstx_usertrans(dirfd, &ut);
 *
 * It writes a new object and its xattr, then switches names: the Ceph OSD
 * pattern the RFC was written for.  Usage: seed_usertrans DIR
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <fstx/btrfs_usertrans.h>

int main(int argc, char **argv)
{
	static const char data[] = "object contents, version 2\n";
	static const char ver[] = "2";
	struct btrfs_ioctl_usertrans_op ops[] = {
		{ .op = BTRFS_IOC_UT_OP_OPEN,
		  .args = { (int64_t)(intptr_t)"obj.new", O_WRONLY | O_CREAT | O_TRUNC, 0644, 0 },
		  .flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT, .rval = 0 },
		{ .op = BTRFS_IOC_UT_OP_PWRITE,
		  .args = { 0, (int64_t)(intptr_t)data, sizeof(data) - 1, 0 },
		  .flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE, .rval = sizeof(data) - 1 },
		{ .op = BTRFS_IOC_UT_OP_CLOSE, .args = { 0 } },
		{ .op = BTRFS_IOC_UT_OP_SETXATTR,
		  .args = { (int64_t)(intptr_t)"obj.new", (int64_t)(intptr_t)"user.version",
			    (int64_t)(intptr_t)ver, 1, 0 },
		  .flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE, .rval = 0 },
		{ .op = BTRFS_IOC_UT_OP_UNLINK, .args = { (int64_t)(intptr_t)"obj" } },
		{ .op = BTRFS_IOC_UT_OP_LINK,
		  .args = { (int64_t)(intptr_t)"obj.new", (int64_t)(intptr_t)"obj" },
		  .flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE, .rval = 0 },
		{ .op = BTRFS_IOC_UT_OP_UNLINK, .args = { (int64_t)(intptr_t)"obj.new" },
		  .flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE, .rval = 0 },
	};
	struct btrfs_ioctl_usertrans ut = {
		.num_ops = sizeof(ops) / sizeof(ops[0]),
		.ops_ptr = (uint64_t)(uintptr_t)ops,
		.num_fds = 1,
		.flags = BTRFS_IOC_UT_FLAG_WEDGEONFAIL,
	};
	long ret;
	int dirfd;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	dirfd = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (dirfd < 0) {
		perror(argv[1]);
		return 2;
	}
	ret = fstx_usertrans(dirfd, &ut);
	close(dirfd);
	printf("usertrans: ret %ld, ops_completed %llu\n", ret,
	       (unsigned long long)ut.ops_completed);
	if (ret < 0) {
		fprintf(stderr, "op %llu failed: %s\n",
			(unsigned long long)ut.ops_completed, strerror((int)-ret));
		return 1;
	}
	return 0;
}
