/* SPDX-License-Identifier: MIT */
/*
 * fuzz_walsync.c - the page-cache notes of .fstx/walsync (wal.c W2-W12):
 * the group notes, the hint and the records' state words, read back as
 * this boot's.
 *
 * Each input runs two write-ahead transactions on a fresh corpus tree,
 * then rewrites the notes they left:
 *   byte 0 bit 0  the group notes from bytes 1-56 (57-60 unused; CRC-32C
 *                 recomputed; bit 4: with the log's salt), so a writer may
 *                 find itself covered, a barrier under way, counts to
 *                 gather on, a failed barrier's range to write again;
 *          bit 1  the hint from bytes 61-148 (this boot's id, CRC
 *                 recomputed; bit 3: with the log's salt), so END,
 *                 APPLIED, busy, clean, lazy, kept and loose say anything;
 *          then   the rest as (offset, xor) patches of 5 bytes over the
 *                 whole file (state words; a patched hint or note fails
 *                 its CRC).
 * A durable write-ahead transaction then runs (group commit on a disk:
 * the scratch area defaults to /var/tmp here, not /dev/shm, as tmpfs has
 * no group commit), and fstx_recover().  Oracle: no crash, leak, UB or
 * hang; a transaction that returned 0 is read back; nothing under .fstx/
 * but the log and its notes is left; no journal hot, no wedge; nothing
 * outside the domain changes.  These notes are trusted within a boot
 * (fstx(7)); this target checks that trusting any of them stays memory
 * safe and confined.
 */
#include "common.h"
#include <signal.h>
#include <sys/resource.h>

static const char *const pre_tx[] = {
	"option wal\nopen 0 a O_RDWR\npwrite 0 \"ALPHA\" 0\nsetxattr a user.w \"1\"\n",
	"option wal\nopen 0 b O_WRONLY\npwrite 0 \"bee\" 2\n",
};
static const char tx[] = "option wal\nopen 0 a O_RDWR\npwrite 0 \"ZZZZ\" 1\n";
static int once; /* the file size limit set, the scratch area chosen */

/* The salt of the log's header (struct wfile: magic 8, version 4, 4). */
static void log_salt(unsigned char salt[8])
{
	char *p = fz_path_in("wal");
	size_t n;
	unsigned char *b = fz_read_file(p, &n);

	memset(salt, 0, 8);
	if (n >= 24)
		memcpy(salt, b + 16, 8);
	free(b);
	free(p);
}

/* Rewrite walsync as the input says (see the top of this file). */
static void forge(const unsigned char *data, size_t size)
{
	char *p = fz_path_in("walsync");
	unsigned char salt[8], *w, *nw;
	size_t n;
	uint32_t crc;

	log_salt(salt);
	w = fz_read_file(p, &n);
	if (n < 4096 && (nw = realloc(w, 4096))) {
		memset(nw + n, 0, 4096 - n);
		w = nw;
		n = 4096;
	}
	if (n < 4096)
		abort();
	if ((data[0] & 1) && size >= 61) { /* struct gnote: CRC at 56 */
		memcpy(w, data + 1, 56);
		if (data[0] & 16)
			memcpy(w, salt, 8);
		crc = fx_crc32c(0, w, 56);
		memcpy(w + 56, &crc, 4);
	}
	if ((data[0] & 2) && size >= 149) { /* struct whint at 64: CRC at 60 */
		unsigned char *h = w + 64;

		memcpy(h, data + 61, 88);
		if (data[0] & 8)
			memcpy(h, salt, 8);
		if (fx_os_libc.boot_id((char *)h + 24) < 0)
			abort();
		crc = fx_crc32c(0, h, 60);
		memcpy(h + 60, &crc, 4);
	}
	if (size > 149)
		fz_damage(w, &n, data + 149, size - 149, 0);
	fz_write_file(p, w, n);
	free(w);
	free(p);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct fstx_status st;
	char *m0, *m1, *got;
	fstx_domain *d;
	size_t n;
	long r;

	if (size < 1)
		return 0;
	if (!once) {
		/* a forged END may send an append far out: EFBIG, not SIGXFSZ */
		struct rlimit rl = { 64u << 20, 64u << 20 };

		if (!getenv("FSTX_FUZZ_DIR") && access("/var/tmp", W_OK) == 0)
			setenv("FSTX_FUZZ_DIR", "/var/tmp", 0);
		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &rl);
		once = 1;
	}
	fz_setup();
	free(fz_fresh_domain());
	for (size_t i = 0; i < sizeof(pre_tx) / sizeof(pre_tx[0]); i++)
		if (fz_run_text(pre_tx[i]) != 0)
			abort();
	forge(data, size);
	m0 = fz_meta_snap();
	r = fz_run_text(tx);
	if (r == 0) {
		char *p;

		if (asprintf(&p, "%s/a", fz_dom) < 0)
			abort();
		got = (char *)fz_read_file(p, &n);
		FZ_CHECK(n >= 5 && !memcmp(got + 1, "ZZZZ", 4),
			 "a transaction returned 0 and is not read back");
		free(got);
		free(p);
	}
	FZ_CHECK(fstx_domain_open(fz_dom, &d) == 0, "open");
	(void)fstx_recover(d);
	FZ_CHECK(fstx_status(d, &st) == 0 && !st.hot && !st.wedged,
		 "journal left hot or wedged");
	fstx_domain_close(d);
	m1 = fz_meta_snap();
	FZ_CHECK(!strcmp(m0, m1), ".fstx/ changed beyond the log and its notes");
	fz_check_outside();
	free(m0);
	free(m1);
	return 0;
}
