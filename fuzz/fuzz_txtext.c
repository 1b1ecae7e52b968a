/*
 * fuzz_txtext.c - the transaction text parser (txtext.c), validation and
 * the engine behind them.  Each input is parsed; a transaction that parses
 * is run on a fresh domain, and the oracle checks all or nothing: a failed
 * transaction leaves the tree exactly as before and no journal hot; no
 * input changes the watched tree beside the domain.
 */
#include "common.h"

/* @FILE may only read beneath the (empty) base directory while parsing. */
static int in_parse;

static int beneath_openat2(int dirfd, const char *p, int flags, mode_t mode,
			   uint64_t resolve)
{
	if (in_parse)
		resolve |= 0x08 | 0x02; /* RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS */
	return fstx_os_libc.openat2(dirfd, p, flags, mode, resolve);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct btrfs_ioctl_usertrans ut = { 0 };
	struct fx_txt t;
	char *before, *after;
	uint64_t bad;
	int basefd, dirfd, r;
	struct fstx_domain *d;
	struct fstx_status st;

	fz_setup();
	fstx_os.openat2 = beneath_openat2;
	basefd = open(fz_out, O_RDONLY | O_DIRECTORY); /* @FILE reads here */
	in_parse = 1;
	r = fx_txt_parse((const char *)data, size, basefd, &t);
	in_parse = 0;
	close(basefd);
	if (r < 0) {
		FZ_CHECK(t.err[0], "parse error without a message");
		fx_txt_free(&t);
		return 0;
	}
	ut.num_ops = t.nops;
	ut.ops_ptr = (uint64_t)(uintptr_t)t.ops;
	ut.num_fds = t.num_fds;
	ut.flags = t.flags;
	ut.data_bytes = t.data_bytes;
	ut.metadata_ops = t.metadata_ops;
	if (fx_validate(&ut, &bad) < 0 || t.nops > 64) {
		fx_txt_free(&t);
		return 0;
	}
	before = fz_fresh_domain();
	dirfd = open(fz_dom, O_RDONLY | O_DIRECTORY);
	r = (int)fstx_usertrans(dirfd, &ut);
	if (r < 0) {
		after = t_snapshot(fz_dom);
		FZ_CHECK(strcmp(before, after) == 0,
			 "transaction failed (%d, op %llu) but the tree changed", r,
			 (unsigned long long)ut.ops_completed);
		free(after);
	}
	FZ_CHECK(fstx_domain_openfd(dirfd, &d) == 0, "reopen");
	FZ_CHECK(fstx_status(d, &st) == 0 && !st.hot && !st.wedged,
		 "journal left hot after %d", r);
	fstx_domain_close(d);
	close(dirfd);
	fz_check_outside();
	free(before);
	fx_txt_free(&t);
	return 0;
}
