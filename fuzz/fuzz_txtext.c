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

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct btrfs_ioctl_usertrans ut = { 0 };
	struct fx_txt t;
	uint64_t bad;
	int r;

	fz_setup();
	r = fz_parse_text(data, size, &t);
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
