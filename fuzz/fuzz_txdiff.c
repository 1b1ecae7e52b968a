/* SPDX-License-Identifier: MIT */
/*
 * fuzz_txdiff.c - the write-ahead log (and a transaction that fails
 * before anything runs, trans.c fail_fast()) against the undo way, on the
 * same transaction text.  Each input that parses and validates runs twice
 * on a fresh domain: offered to the undo way only (fx_wal_auto 0, without
 * FSTX_UT_WAL and FSTX_UT_LAZY), then by default.  The oracle: the same
 * result, the same ops_completed, the same result of every op up to it,
 * and after a commit the same tree.  Inputs that write past 1 MiB are
 * skipped (the trees are compared as text).
 */
#include "common.h"

/* Run ut on a fresh domain (rvals reset to rv first); the tree after. */
static char *run_way(struct btrfs_ioctl_usertrans *ut, const __s64 *rv, int wal,
		     long *r, uint64_t *done, __s64 *out)
{
	struct btrfs_ioctl_usertrans_op *ops = (void *)(intptr_t)ut->ops_ptr;
	int fd;

	free(fz_fresh_domain());
	fd = open(fz_dom, O_RDONLY | O_DIRECTORY);
	for (size_t i = 0; i < ut->num_ops; i++)
		ops[i].rval = rv[i];
	ut->ops_completed = 0;
	fx_wal_auto = wal;
	*r = fstx_usertrans(fd, ut);
	fx_wal_auto = 1;
	close(fd);
	*done = ut->ops_completed;
	for (size_t i = 0; i < ut->num_ops; i++)
		out[i] = ops[i].rval;
	return t_snapshot(fz_dom);
}

/* Does op write past 1 MiB (a tree too large to compare as text)? */
static int far(const struct btrfs_ioctl_usertrans_op *op)
{
	const __s64 lim = 1 << 20;

	return (op->op == BTRFS_IOC_UT_OP_TRUNCATE && op->args[1] > lim) ||
	       (op->op == BTRFS_IOC_UT_OP_PWRITE && op->args[3] > lim) ||
	       (op->op == BTRFS_IOC_UT_OP_CLONERANGE && op->args[4] > lim);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct btrfs_ioctl_usertrans ut = { 0 };
	struct fx_txt t;
	uint64_t bad, d1, d2;
	__s64 rv[64], o1[64], o2[64];
	char *s1, *s2;
	long r1, r2;

	fz_setup();
	if (fz_parse_text(data, size, &t) < 0)
		goto out;
	fx_txt_ut(&t, &ut);
	if (fx_validate(&ut, &bad) < 0 || t.nops > 64)
		goto out;
	for (size_t i = 0; i < t.nops; i++) {
		if (far(&t.ops[i]))
			goto out;
		rv[i] = t.ops[i].rval;
	}
	ut.flags &= ~(uint64_t)(FSTX_UT_WAL | FSTX_UT_LAZY);
	s1 = run_way(&ut, rv, 0, &r1, &d1, o1);
	s2 = run_way(&ut, rv, 1, &r2, &d2, o2);
	/* (documented, fstx(7): a transaction predicted to fail reports the
	 * predicted failure where an earlier op would fail when run for want
	 * of permission, which no prediction covers; nothing changed either
	 * way: met without privilege) */
	if ((r1 == -EACCES || r1 == -EPERM) && r2 < 0 && d1 < d2 &&
	    !strcmp(s1, s2))
		goto same;
	FZ_CHECK(r1 == r2, "result: the undo way %ld, the log %ld", r1, r2);
	FZ_CHECK(d1 == d2, "ops_completed: the undo way %llu, the log %llu",
		 (unsigned long long)d1, (unsigned long long)d2);
	for (size_t i = 0; i <= d1 && i < t.nops; i++)
		FZ_CHECK(o1[i] == o2[i], "op %zu: the undo way %lld, the log %lld", i,
			 (long long)o1[i], (long long)o2[i]);
	FZ_CHECK(r1 < 0 || !strcmp(s1, s2), "the trees differ:\n%s---\n%s", s1, s2);
same:
	free(s1);
	free(s2);
out:
	fx_txt_free(&t);
	return 0;
}
