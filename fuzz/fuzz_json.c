/* SPDX-License-Identifier: MIT */
/*
 * fuzz_json.c - the JSON input of the fstx command (src/cli_json.c) and
 * the text parser behind it.  Each input is converted; the oracle checks
 * that a conversion gives exactly one text line per element, with no NUL
 * byte and no '@' data outside quotes (no value may end its token or line
 * early or turn into a file reference), and that the text parser places
 * every op, and any error, on one of those lines: every message maps back
 * to an element.  Running transactions is fuzz_txtext's job.
 */
#include "common.h"
#include "cli_json.h"

/* copy-in and import may only read beneath the base directory. */
static int beneath_openat2(int dirfd, const char *p, int flags, mode_t mode,
			   uint64_t resolve)
{
	resolve |= 0x08 | 0x02; /* RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS */
	return fx_os_libc.openat2(dirfd, p, flags, mode, resolve);
}

/* Outside quotes a line holds only an op name, numbers and words. */
static void check_line(const char *s, size_t n)
{
	int q = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"' && (!q || s[i - 1] != '\\'))
			q = !q;
		else if (!q)
			FZ_CHECK(s[i] != '@' && s[i] != '#', "bare '%c' in \"%.*s\"",
				 s[i], (int)n, s);
		else
			FZ_CHECK((unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x7f,
				 "raw byte 0x%02x in a quoted token", (unsigned char)s[i]);
	}
	FZ_CHECK(!q, "unterminated quote in \"%.*s\"", (int)n, s);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct fx_json j;
	struct fx_txt t;
	size_t lines = 0, start = 0;
	int basefd, r;

	fz_setup();
	r = fx_json_convert((const char *)data, size, &j);
	if (r < 0) {
		FZ_CHECK(j.err[0], "conversion error without a message");
		fx_json_free(&j);
		return 0;
	}
	FZ_CHECK(!memchr(j.text, 0, j.len), "NUL byte in the text");
	for (size_t i = 0; i < j.len; i++)
		if (j.text[i] == '\n') {
			check_line(j.text + start, i - start);
			start = i + 1;
			lines++;
		}
	FZ_CHECK(lines == j.nelem && start == j.len, "%zu lines for %zu elements",
		 lines, j.nelem);
	fx_os.openat2 = beneath_openat2;
	basefd = open(fz_out, O_RDONLY | O_DIRECTORY);
	memset(&t, 0, sizeof(t));
	t.stdin_taken = 1;
	r = fx_txt_parse_named(j.text, j.len, basefd, "<json>", &t);
	fx_os.openat2 = fx_os_libc.openat2;
	close(basefd);
	if (r < 0) {
		FZ_CHECK(t.err[0], "parse error without a message");
		FZ_CHECK(r == -ENOMEM || r == -EFBIG || (t.errline >= 1 && t.errline <= j.nelem),
			 "error on line %u of %zu", t.errline, j.nelem);
	} else {
		for (size_t i = 0; i < t.nops; i++)
			FZ_CHECK(t.lines[i] >= 1 && t.lines[i] <= j.nelem,
				 "op %zu on line %u of %zu", i, t.lines[i], j.nelem);
	}
	fx_txt_free(&t);
	fx_json_free(&j);
	return 0;
}
