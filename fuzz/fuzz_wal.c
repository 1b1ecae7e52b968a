/* SPDX-License-Identifier: MIT */
/*
 * fuzz_wal.c - the write-ahead log's reader and replay (wal.c rule W5).
 *
 * Each input runs five write-ahead transactions on a fresh corpus tree
 * (records of pwrites, an append, truncates, O_TRUNC, xattrs set and
 * removed, and name entries: renames of a file and a directory, an
 * exchange, a new directory, a new file, a removal, a symlink), then
 * replaces their
 * log with one built from it:
 *   byte 0 mode 0  raw: the log's first 1024 bytes (header and hint) and
 *                  then the input as the records;
 *          mode 1  damage: the real log with the input's (offset, xor)
 *                  patches, 5 bytes each, and byte 1 bit 1 a cut;
 *          mode 2  forge: as 1, then every record's CRC recomputed, so the
 *                  checks after the CRC (entry lengths, kinds, paths,
 *                  inode numbers, sizes) are reached, and a record's
 *                  state field as patched (2: cancelled, W3).
 * Recovery then runs as after a reboot (another boot id: every record is
 * replayed), or, when byte 0 / 3 is odd, in the same boot with a hint that
 * says an applier was cut short: the help pass (wal_apply.c, W4) reads every
 * record into memory, parses its entries (fx_w_entry_mem), coalesces and
 * applies them.  Oracle: nothing outside the domain changes; nothing under
 * .fstx/ but the log changes; the undamaged log leaves the committed tree
 * exactly; no crash, leak or UB.
 */
#include "common.h"
#include "faultos.h"
#include <signal.h>
#include <sys/resource.h>

static const char *const wal_tx[] = {
	/* renames of a file and of a directory of the tree (W15, W20), an
	 * exchange (W21), an append (W14), a removexattr: before any record
	 * names their inodes */
	"rename hard hard2\nrename empty empty2\nrename old ln exchange\n"
	"open 3 d/e/f O_WRONLY|O_APPEND\npwrite 3 \"app\" 0\nremovexattr a user.k\n",
	"option wal\nopen 0 a O_RDWR\npwrite 0 \"ALPHA\" 0\nsetxattr a user.w \"1\"\n"
	"open 1 big O_WRONLY\npwrite 1 \"BIG\" 7000\n",
	"option wal\ntruncate big 300\nopen 0 d/c O_WRONLY|O_TRUNC\npwrite 0 \"cee\" 0\n"
	"close 0\nopen 0 b O_WRONLY\npwrite 0 \"bee\" 2\n",
	"option wal\nsetxattr d/e/f user.x \"xattr value\"\ntruncate a 2\n",
	/* name entries: a new directory, a new file, a removal, a new
	 * symlink renamed over an old one */
	"mkdir nd 0750\nopen 2 nd/f O_WRONLY|O_CREAT|O_EXCL 0600\npwrite 2 \"new\" 0\n"
	"close 2\nunlink old\nsymlink nd/f ln replace\n",
};
#define NWAL (sizeof(wal_tx) / sizeof(wal_tx[0]))

static int made;             /* the three were tried once */
static char *committed;      /* the tree after the three */

static int other_boot(char id[37])
{
	memcpy(id, "fffffff0-0000-0000-0000-00000000f022", 37);
	return 0;
}

/* The committed tree and its log, once. */
static void make_log(void)
{
	char *p, *init = fz_fresh_domain();
	size_t n;

	for (size_t i = 0; i < NWAL; i++)
		if (fz_run_text(wal_tx[i]) != 0)
			abort();
	committed = t_snapshot(fz_dom);
	p = fz_path_in("wal");
	free(fz_read_file(p, &n));
	if (n < 1100)
		abort(); /* the three took the undo way: nothing to fuzz */
	made = 1;
	free(p);
	free(init);
	/* FSTX_FUZZ_SEED=FILE: the real log as a mode-1 input (a seed) */
	if (getenv("FSTX_FUZZ_SEED"))
		fz_write_file(getenv("FSTX_FUZZ_SEED"), (const unsigned char *)"\1\0", 2);
}

/* Records are 8-aligned: 32-byte header, CRC over it (crc, state 0) + payload. */
static void fix_crcs(unsigned char *j, size_t n)
{
	size_t off = 1024;

	while (off + 32 <= n) {
		uint32_t magic, zero = 0, crc, state;
		uint64_t len;

		memcpy(&magic, j + off, 4);
		memcpy(&len, j + off + 8, 8);
		if (magic != 0x31575846u || len > n - off - 32)
			break;
		/* the state field (2: cancelled, W3) stays as patched: the
		 * CRC does not cover it */
		memcpy(&state, j + off + 28, 4);
		memcpy(j + off + 24, &zero, 4);
		memcpy(j + off + 28, &zero, 4);
		crc = fx_crc32c(fx_crc32c(0, j + off, 32), j + off + 32, (size_t)len);
		memcpy(j + off + 24, &crc, 4);
		memcpy(j + off + 28, &state, 4);
		off += 32 + ((len + 7) & ~(uint64_t)7);
	}
}

/*
 * A hint of this boot (wal.c struct whint) over the log's records, busy:
 * the next lock holder runs a help pass from byte 1024.
 */
static void busy_hint(const unsigned char *log, size_t n)
{
	unsigned char h[88]; /* kept, loose (W11): 0 */
	uint64_t end = 1024, start = 1024;
	uint32_t crc, one = 1;
	char *p = fz_path_in("walsync");
	int fd;

	while (end + 32 <= n) { /* END: after the last record with a header */
		uint32_t magic;
		uint64_t len;

		memcpy(&magic, log + end, 4);
		memcpy(&len, log + end + 8, 8);
		if (magic != 0x31575846u || len > n - end - 32)
			break;
		end += 32 + ((len + 7) & ~(uint64_t)7);
	}

	memset(h, 0, sizeof(h));
	if (n >= 32)
		memcpy(h, log + 16, 8); /* the header's salt */
	memcpy(h + 8, &end, 8);
	memcpy(h + 16, &start, 8);
	if (fx_os_libc.boot_id((char *)h + 24) < 0)
		abort();
	h[60] = 0; /* boot id: 36 bytes, no NUL kept */
	crc = fx_crc32c(0, h, 64);
	memcpy(h + 60, &crc, 4);
	memcpy(h + 64, &one, 4); /* clean */
	memcpy(h + 68, &one, 4); /* busy */
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	if (fd < 0 || pwrite(fd, h, sizeof(h), 64) != (ssize_t)sizeof(h))
		abort();
	close(fd);
	free(p);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	unsigned mode, opt;
	unsigned char *j, *base;
	size_t n, blen;
	char *wp, *pre, *post, *m0, *m1;
	fstx_domain *d;
	int r, damaged = 0, same_boot;

	if (size < 2)
		return 0;
	fz_setup();
	if (!made) {
		/* forged entries may size a file up to 1 TiB (sparse): keep the
		 * files this harness reads whole small; EFBIG instead of SIGXFSZ */
		struct rlimit rl = { 64u << 20, 64u << 20 };

		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &rl);
		make_log();
	}
	mode = data[0] % 3;
	same_boot = data[0] / 3 % 2;
	opt = data[1];
	data += 2;
	size -= 2;
	/* the committed tree, as after a crash that lost nothing */
	free(fz_fresh_domain());
	for (size_t i = 0; i < NWAL; i++)
		if (fz_run_text(wal_tx[i]) != 0)
			abort();
	wp = fz_path_in("wal");
	base = fz_read_file(wp, &blen); /* this tree's log: its inode numbers */
	if (mode == 0) {
		n = 1024 + size;
		j = malloc(n);
		if (!j)
			abort();
		memcpy(j, base, 1024);
		memcpy(j + 1024, data, size);
		damaged = 1;
	} else {
		n = blen;
		j = malloc(n);
		if (!j)
			abort();
		memcpy(j, base, n);
		damaged = fz_damage(j, &n, data, size, opt);
		if (mode == 2)
			fix_crcs(j, n);
	}
	fz_write_file(wp, j, n);
	if (same_boot)
		busy_hint(j, n);
	free(j);
	free(base);
	pre = t_snapshot(fz_dom);
	m0 = fz_meta_snap();
	if (!same_boot)
		fx_os.boot_id = other_boot;
	FZ_CHECK(fstx_domain_open(fz_dom, &d) == 0, "open");
	r = fstx_recover(d);
	fstx_domain_close(d);
	fx_os = fx_os_libc;
	post = t_snapshot(fz_dom);
	m1 = fz_meta_snap();
	FZ_CHECK(!strcmp(m0, m1), "recovery of a log changed .fstx/ beyond the log");
	if (!damaged)
		FZ_CHECK(r >= 0 && !strcmp(post, committed),
			 "an intact log did not leave the committed tree (%d)", r);
	(void)pre;
	fz_check_outside();
	free(pre);
	free(post);
	free(m0);
	free(m1);
	free(wp);
	return 0;
}
