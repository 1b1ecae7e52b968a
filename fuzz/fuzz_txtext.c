/* SPDX-License-Identifier: MIT */
/*
 * fuzz_txtext.c - the transaction text parser (txtext.c), validation and
 * the engine behind them.  Each input is parsed; a transaction that parses
 * is run on a fresh domain, and the oracle checks all or nothing: a failed
 * transaction leaves the tree exactly as before and no journal hot; no
 * input changes the watched tree beside the domain.  A parse error has
 * the compiler form "fuzz:LINE:COL: error: ...".  copy-in and import read
 * the watched tree (reading it is allowed; changing it is not).
 */
#include "common.h"

/* @FILE may only read beneath the (empty) base directory while parsing. */
static int in_parse;

static int beneath_openat2(int dirfd, const char *p, int flags, mode_t mode,
			   uint64_t resolve)
{
	if (in_parse)
		resolve |= 0x08 | 0x02; /* RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS */
	return fx_os_libc.openat2(dirfd, p, flags, mode, resolve);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct btrfs_ioctl_usertrans ut = { 0 };
	struct fx_txt t;
	uint64_t bad;
	int basefd, r;

	fz_setup();
	fx_os.openat2 = beneath_openat2;
	basefd = open(fz_out, O_RDONLY | O_DIRECTORY); /* @FILE reads here */
	in_parse = 1;
	memset(&t, 0, sizeof(t));
	t.stdin_taken = 1; /* "@-" must not wait on the fuzzer's stdin */
	r = fx_txt_parse_named((const char *)data, size, basefd, "fuzz", &t);
	in_parse = 0;
	close(basefd);
	if (r < 0) {
		char head[64];

		FZ_CHECK(t.err[0], "parse error without a message");
		/* compiler style: "fuzz:LINE:COL: error: " on the first line */
		snprintf(head, sizeof(head), "fuzz:%u:%u: error: ", t.errline, t.errcol);
		FZ_CHECK(r != -EINVAL || (!strncmp(t.err, head, strlen(head)) &&
					 t.errline >= 1 && t.errcol >= 1),
			 "parse error not in compiler form: %s", t.err);
		FZ_CHECK(memchr(t.err, 0, sizeof(t.err)), "message not terminated");
		fx_txt_free(&t);
		return 0;
	}
	fx_txt_ut(&t, &ut);
	if (fx_validate(&ut, &bad) < 0 || t.nops > 64) {
		fx_txt_free(&t);
		return 0;
	}
	fz_run_checked(&ut);
	fx_txt_free(&t);
	return 0;
}
