/* SPDX-License-Identifier: MIT */
/*
 * fuzz_journal.c - the journal reader and recovery (journal.c).
 *
 * Input byte 0 picks a mode:
 *   0  raw: the rest of the input is the whole journal; byte 1 bit 0 adds a
 *      progress mark for the txid its first header names;
 *   1  damage: a real hot journal (test/corpus.h transaction 0 stopped by a
 *      sticky EIO after it began changing the tree) gets the input's
 *      (offset, xor) patches, 5 bytes each, and byte 1 bit 1 truncates it;
 *   2  forge: as 1, then every record's CRC is recomputed, so the reader's
 *      checks after the CRC (lengths, types, paths, sizes) are reached.
 * Then fstx_recover().  Oracle: nothing outside the domain changes; a
 * refused journal (-EUCLEAN) writes nothing to the tree; an undamaged
 * journal restores the initial tree exactly; no crash, leak or UB.
 */
#include "common.h"
#include "faultos.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "corpus.h"
#pragma GCC diagnostic pop

static long fail_at; /* call number where the sticky EIO starts */
static char *committed; /* the tree after transaction 0 commits */

static int journal_hot(void)
{
	struct stat st;
	char *p = fz_path_in("journal");
	int r = stat(p, &st) == 0 && st.st_size > 0;

	free(p);
	return r;
}

/* Leave a hot journal behind; returns the initial tree's snapshot. */
static char *make_hot(void)
{
	char *init = fz_fresh_domain();

	fo_install(FO_FAIL, fail_at, EIO);
	fo.sticky = 1;
	fz_run_text(corpus[0]);
	fo_remove();
	return init;
}


/* FSTX_FUZZ_SEED=FILE: write the hot journal as a mode-0 input (seeds). */
static void dump_seed(void)
{
	const char *out = getenv("FSTX_FUZZ_SEED");
	unsigned char *j, *s;
	size_t n;
	char *jp;

	if (!out)
		return;
	jp = fz_path_in("journal");
	j = fz_read_file(jp, &n);
	s = malloc(n + 2);
	if (!s)
		abort();
	s[0] = 0;
	s[1] = 1; /* with the progress mark */
	memcpy(s + 2, j, n);
	fz_write_file(out, s, n + 2);
	free(s);
	free(j);
	free(jp);
}

static void find_fail_at(void)
{
	long calls;

	free(fz_fresh_domain());
	fo_install(FO_COUNT, 0, 0);
	if (fz_run_text(corpus[0]) != 0)
		abort();
	committed = t_snapshot(fz_dom);
	calls = fo.calls;
	fo_remove();
	/* A point about two thirds in that leaves a hot journal. */
	for (fail_at = calls * 2 / 3; fail_at > 0; fail_at--) {
		free(make_hot());
		if (journal_hot())
			break;
	}
	if (!fail_at)
		abort();
	dump_seed();
}

/* journal.c's record header (rule 3): CRC over header (crc 0) + payload. */
static void fix_crcs(unsigned char *j, size_t n)
{
	size_t off = 0;

	while (off + 32 <= n) {
		uint32_t magic, len, zero = 0, crc;

		memcpy(&magic, j + off, 4);
		memcpy(&len, j + off + 8, 4);
		if (magic != 0x314a5846u || len > n - off - 32) {
			off += 512 - off % 512; /* COMMIT sits on a sector boundary */
			continue;
		}
		memcpy(j + off + 24, &zero, 4);
		crc = fx_crc32c(fx_crc32c(0, j + off, 32), j + off + 32, len);
		memcpy(j + off + 24, &crc, 4);
		off += 32 + len;
	}
}

static void raw_mark(const unsigned char *j, size_t n, unsigned step)
{
	uint64_t txid = 0;
	char name[64], *p;

	if (n >= 24)
		memcpy(&txid, j + 16, 8);
	snprintf(name, sizeof(name), "step.%016llx.%u", (unsigned long long)txid, step);
	p = fz_path_in(name);
	fz_write_file(p, (const unsigned char *)"", 0);
	free(p);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	unsigned mode, opt;
	char *init, *pre, *post, *jp;
	fstx_domain *d;
	int r, damaged = 0;

	if (size < 2)
		return 0;
	fz_setup();
	if (!fail_at)
		find_fail_at();
	mode = data[0] % 3;
	opt = data[1];
	data += 2;
	size -= 2;
	jp = fz_path_in("journal");
	if (mode == 0) {
		init = fz_fresh_domain();
		FZ_CHECK(fstx_domain_open(fz_dom, &d) == 0, "open"); /* makes .fstx */
		fstx_domain_close(d);
		fz_write_file(jp, data, size);
		if (opt & 1)
			raw_mark(data, size, opt >> 1);
		damaged = 1;
	} else {
		size_t n;
		unsigned char *j;

		init = make_hot();
		j = fz_read_file(jp, &n);
		damaged = fz_damage(j, &n, data, size, opt);
		if (mode == 2)
			fix_crcs(j, n);
		fz_write_file(jp, j, n);
		free(j);
	}
	pre = t_snapshot(fz_dom);
	FZ_CHECK(fstx_domain_open(fz_dom, &d) == 0, "open");
	r = fstx_recover(d);
	fstx_domain_close(d);
	post = t_snapshot(fz_dom);
	if (r == -EUCLEAN)
		FZ_CHECK(strcmp(pre, post) == 0, "a refused journal changed the tree");
	if (!damaged && mode != 0)
		FZ_CHECK(r == 1 && (!strcmp(init, post) || !strcmp(committed, post)),
			 "an intact journal left neither the old nor the new tree (%d)", r);
	if (r >= 0)
		FZ_CHECK(!journal_hot(), "recovery returned %d with the journal hot", r);
	fz_check_outside();
	free(init);
	free(pre);
	free(post);
	free(jp);
	return 0;
}
