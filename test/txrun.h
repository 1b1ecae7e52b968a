/* SPDX-License-Identifier: MIT */
/* txrun.h - run transaction text in-process (tests only). */
#ifndef FSTX_TEST_TXRUN_H
#define FSTX_TEST_TXRUN_H
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"
#include "helpers.h"

/*
 * Parse and run text on dir; returns the fstx_usertrans result.  With pin,
 * every op fails the transaction unless its result equals pin[i] (so an
 * injected error in an op whose result the text ignores still rolls back);
 * with out, the results are stored there (at most 64).
 */
static inline long tx_run_pinned(const char *dir, const char *text,
				 uint64_t *done, const __s64 *pin, __s64 *out)
{
	struct fx_txt t;
	struct btrfs_ioctl_usertrans ut = { 0 };
	long r = fx_txt_parse(text, strlen(text), AT_FDCWD, &t);
	int fd;

	if (r < 0) {
		fx_txt_free(&t);
		return -1000 + r; /* distinguishable from any errno */
	}
	for (size_t i = 0; pin && i < t.nops && i < 64; i++) {
		t.ops[i].flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE;
		t.ops[i].rval = pin[i];
	}
	fx_txt_ut(&t, &ut);
	fd = t_dirfd(dir);
	r = fstx_usertrans(fd, &ut);
	close(fd);
	if (done)
		*done = ut.ops_completed;
	for (size_t i = 0; out && i < t.nops && i < 64; i++)
		out[i] = t.ops[i].rval;
	fx_txt_free(&t);
	return r;
}

static inline long tx_text(const char *dir, const char *text, uint64_t *done)
{
	return tx_run_pinned(dir, text, done, NULL, NULL);
}

/* Parse and run text on an open handle (its caches live across calls). */
static inline long tx_text_h(struct fstx_domain *h, const char *text)
{
	struct fx_txt t;
	struct btrfs_ioctl_usertrans ut = { 0 };
	long r = fx_txt_parse(text, strlen(text), AT_FDCWD, &t);

	if (r < 0) {
		fx_txt_free(&t);
		return -1000 + r;
	}
	fx_txt_ut(&t, &ut);
	r = fx_usertrans(h, &ut);
	fx_txt_free(&t);
	return r;
}

static inline int domain_recover(const char *dir)
{
	fstx_domain *d;
	int r = fstx_domain_open(dir, &d);

	if (r == 0) {
		r = fstx_recover(d);
		fstx_domain_close(d);
	}
	return r;
}

static inline int journal_empty(const char *dir)
{
	char *p;
	size_t len = 1;
	char *c;

	if (asprintf(&p, "%s/.fstx", dir) < 0)
		return 0;
	c = t_read(p, "journal", &len);
	free(c);
	free(p);
	return len == 0;
}
#endif
