/* SPDX-License-Identifier: MIT */
/*
 * wal.c - the write-ahead (redo) log of data-only transactions,
 * DIR/.fstx/wal (FSTX_UT_WAL).
 *
 * Rules.  Each is relied on by recovery; a change to one is a format change.
 *
 *  W1. A transaction takes this path only when trans.c finds it eligible:
 *      no name step, every op predicted to succeed (no FAIL_ON fires), at
 *      most fx_wal_large bytes of data (more is cheaper the undo way),
 *      nothing past FX_WAL_MAX_OFF (replay refuses entries that are), and
 *      its changes are pwrites at fixed offsets into existing regular files,
 *      truncates of them (also by O_TRUNC), and setxattr (flags 0) of
 *      small user.* xattrs.
 *      Each such change is a "set": the bytes, the size or the xattr value
 *      it leaves do not depend on what was there before.
 *  W2. Layout: sector 0 holds the header (magic "FSTXWAL1", version, salt,
 *      CRC-32C); records start at byte 1024.  The hint (W4, W5) and the
 *      records' state words live in .fstx/walsync, notes for this boot that
 *      are never synced, so a record's barrier writes the record's pages
 *      only, and no page of the log is written again after its barrier.  A
 *      state word carries the salt of its log: a word of another salt, or
 *      none, says PENDING (open), so appending a record writes no word;
 *      only APPLIED and CANCELLED are written.
 *      A record is a 32-byte header (magic "FXW1", entry count, payload
 *      length, the header's salt, CRC-32C over the header with crc 0 and
 *      the payload), then its entries, each 8-byte aligned: a 40-byte entry
 *      header (kind, path length, inode number, two arguments, name length),
 *      the canonical path, the xattr name, the data.  The log is the run of
 *      valid records from byte 1024 up to the first invalid one; a record
 *      with another salt is invalid.  The file is never shortened: it grows
 *      in steps of W_GROW bytes of written zeros beyond the last record, so
 *      that most records overwrite allocated blocks and their fdatasync
 *      flushes data only, not the file's size.
 *  W3. Commit: under the lock the record is written whole at the log's
 *      end (open: no state word, W2) and the hint's END moves past it;
 *      then the lock is dropped for fdatasync(wal), the commit point and
 *      the transaction's one barrier.  Writers meet for it at the head
 *      of .fstx/walsync (byte locks), and one fdatasync serves every
 *      record written before it began; a writer that finds a barrier
 *      under way waits for that barrier only, and a syncer that saw
 *      several writers waits (a bounded time) for them to come back with
 *      their next records (group commit, see group_sync()).  Nothing
 *      changes in place before the record's barrier has returned (to its
 *      writer or to a helper, W4), so power loss never finds an in-place
 *      change without its record.  A record that cannot be written gets its
 *      header zeroed (it is the last; the log ends before it).  A record
 *      whose barrier fails is marked CANCELLED and never applied during
 *      this boot, and the handle latches the error: after a failed barrier
 *      the disk's state is unknown, and a recovery after power loss applies
 *      the record if it is there.
 *  W4. Under the lock again, the writer applies its record in place,
 *      unless a helper did (its record lies below APPLIED then): the hint's
 *      busy word set, the changes, then APPLIED moves past the record if it
 *      was the first open one (else its state word says APPLIED) and busy
 *      is cleared, in one hint write.  Appliers hold the lock exclusively,
 *      so a hint found busy by the next lock holder (writer or reader) was
 *      left by a dead or failed applier, and that holder helps before
 *      anything else.  Help: fdatasync(wal), then every open record (PENDING
 *      or LAZY) from APPLIED on, in log order, under the busy word; then
 *      APPLIED = END and busy cleared.  A help pass skips a change that a
 *      later record of the pass overwrites whole (coalescing, see
 *      wal_help()).  A transaction that would touch (change or assert on)
 *      an inode that an open record changes first helps, and plans again
 *      (the check reads the records from APPLIED to END, and their state
 *      words, in two reads when they span at most fx_wal_window bytes).
 *      So records that share an inode are applied in log order, and records
 *      on disjoint inodes commute.  Should an in-place change fail, busy
 *      stays set, the handle latches the error and the next lock holder
 *      applies the record again.
 *  W5. Within one mount of one boot the page cache holds every applied
 *      change, and the hint (END, APPLIED, the boot id and the mount's
 *      unique id, epoch_id()) is the truth: a PENDING record
 *      whose writer was killed is applied by the next helper (a
 *      conflicting transaction, a checkpoint, fstx_recover(), a flush).  When the
 *      hint is invalid or names another boot or mount (a disk that lost
 *      its cache without a reboot comes back as a new mount), power loss
 *      may have lost applied changes: recovery fdatasyncs the log (a
 *      writer on another mount of the filesystem may be at its barrier),
 *      replays every valid record from byte 1024
 *      in order, whatever its state word (not durable), and sets END and
 *      APPLIED after the last.  Replay is idempotent: a set applied twice,
 *      or over a partly applied or partly lost state, leaves the state
 *      after it, and replaying the records in order leaves the state after
 *      the last.  An entry names its file by canonical path (opened
 *      beneath the domain, no symlinks) and inode number; another inode
 *      there is -ESTALE, and a malformed entry in a record whose CRC holds
 *      -EUCLEAN: recovery stops before changing anything of that entry.
 *  W6. Checkpoint (the log holds more than fx_wal_max bytes of records
 *      (without barriers when W11 allows); or
 *      before a transaction that takes the undo way of journal.c, which
 *      must not be replayed over; or fstx_recover()): help (W4), one
 *      fsync of each file a record of the log names (every applied change
 *      durable in place; syncset.h: not syncfs, which would wait for every
 *      other process's dirty pages too), then a new header with a
 *      new salt and a hint with END = APPLIED = 1024 in one write,
 *      fdatasync(wal).  A writer that finds the salt changed when it takes
 *      the lock back knows its record was applied.  The old records that
 *      remain carry the old salt; a torn header empties the log; either
 *      way their changes were durable already.  The first header of a new
 *      log is written the same way, without its fdatasync (the first
 *      record's barrier covers the whole file); the log's name was made
 *      durable by the domain's first open (domain.c: .fstx/ fsynced).
 *  W7. Crash-only transactions (FSTX_UT_NOSYNC) skip the barrier of W3 and
 *      keep the lock throughout, so the hint that moves END past their
 *      record already says busy.  Checkpoints and helpers keep their
 *      barriers: they may apply records of durable transactions.  Nothing
 *      reads state words below APPLIED (APPLYING, 3, and LAZY, 4, are
 *      words of older versions of these rules; read as open).
 *  W8. The hint carries a clean word: 1 says that no wedge mark, no hot
 *      journal and no progress mark exists.  A lock holder that finds the
 *      hint of this boot saying clean skips looking for them (three system
 *      calls); one that looked and found none sets the word.  Whoever is
 *      about to make one of them (the undo way, before its checkpoint and
 *      journal; a wedge) first writes the hint with the word 0, and a lock
 *      holder that reloads the hint takes the word from it, so a later
 *      hint never says clean over them.  The word lives in the page cache
 *      of this boot like the rest of the hint; after a reboot the hint is
 *      not trusted and the checks run.  A wedge mark or journal made by
 *      hand in .fstx/ is not seen while the hint says clean.
 *  W9. The header's salt is read again only when the hint's salt is not
 *      the one this handle last read there: a checkpoint writes the hint
 *      invalid before it writes a new header (W6), so a valid hint with
 *      the old salt means the header has not changed.
 * W10. Lazy transactions (FSTX_UT_LAZY) end at W3's append: the hint's
 *      LAZY set to the record's end, no barrier, nothing
 *      applied; their commit point is the append itself (they are promised
 *      atomic, not durable).  A lazy transaction without compare ops reads
 *      nothing, so it is appended behind open records without helping;
 *      every other transaction, a lazy one with compare ops, a reader
 *      (LAZY above APPLIED makes it help), fstx_sync(), the close of a
 *      handle that appended lazy records, and the queue passing
 *      fx_lazy_max bytes flush them: help (W4).  At a transaction's start
 *      they stay queued.  Power loss keeps a prefix of the log's records
 *      (replay stops at the first invalid one, W2, W5), so what survives
 *      of the queue is whole transactions in commit order.
 * W11. The hint's kept word says that a record of a transaction that is
 *      not crash-only was appended since the last checkpoint (set by the
 *      append's hint write; without a hint of this boot it is assumed).
 *      A checkpoint because the log is full, while kept is 0, has no
 *      barrier: no syncfs, no fdatasync of the new header.  Nothing in
 *      the log was promised across power loss, and W6's order holds in
 *      the page cache.  It sets the hint's loose word: changes it dropped
 *      from the log are not durable in place.  While loose is set, the
 *      next durable transaction of the log syncs the filesystem (syncfs,
 *      under the lock, no group commit) in place of its record's
 *      fdatasync, which also makes the new header durable, and clears it;
 *      any other checkpoint (the undo way's, fstx_recover()) runs, with
 *      its barriers, even on an empty log.  So a durable commit still
 *      makes every earlier crash-only record of the log durable (fstx(7);
 *      crash-only transactions of the undo way: trans.c crash_only_debt()).
 * W12. A crash-only writer that finds the hint as it last wrote it (no
 *      other lock holder came between) and whose record is the first
 *      open one may leave the hint saying busy over its record after
 *      applying it: it remembers (salt, APPLIED, END) of that hint, and
 *      at its next lock, finding the hint still so, takes the record as
 *      applied (the next hint it writes says so).  Any other lock holder
 *      finds busy and helps (W4): applying the record again changes
 *      nothing, as nothing after it changed the same bytes (it is the
 *      last), and a help pass over a log of crash-only records only
 *      (kept 0, W11) needs no fdatasync first.  So two crash-only
 *      transactions in a row on one handle cost one hint write, not two.
 *      The handle's close writes the hint it owes (fx_wal_settle()).
 *
 * The undo journal and this log are never both live: a transaction of the
 * undo way checkpoints the log first, and the log is only appended to
 * after the undo journal has been recovered.
 */
#define _GNU_SOURCE
#include "plan.h"
#include "syncset.h"
#include "wal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#define W_FILE_MAGIC "FSTXWAL1"
#define W_REC_MAGIC 0x31575846u /* "FXW1" little-endian */
#define W_VERSION 1
/* .fstx/walsync: page-cache notes of this boot, never synced (W2) */
#define S_GROUP 0      /* group commit: (salt, end) durable, the barrier */
#define S_HINT 64      /* the hint */
#define S_STATE 4096   /* state words: 16 bytes per 32 bytes of log */
#define W_START 1024
#define W_CHUNK (1u << 20)
#define W_BUF (64u << 10)
#define W_GROW (1u << 20)
#define W_NAME_MAX 255

#define ARGP(op, i) ((const char *)(intptr_t)(op)->args[i])

enum { W_PWRITE = 1, W_TRUNC = 2, W_SETX = 3 };

struct wfile {
	char magic[8];
	uint32_t version, rsv;
	uint64_t salt;
	uint32_t crc, pad;
};

struct whint {
	uint64_t salt, end, applied;
	char boot[36];
	uint32_t crc;
	/* later additions, not covered by the CRC (page cache only, W2) */
	uint32_t clean; /* W8 */
	uint32_t busy;  /* W4: an applier was at work */
	uint64_t lazy;  /* W10: the end of the last lazy record */
	uint32_t kept;  /* W11: a record not crash-only since the checkpoint */
	uint32_t loose; /* W11: the last checkpoint had no barrier */
};

struct wrec {
	uint32_t magic, nent;
	uint64_t len, salt;
	uint32_t crc;
	uint32_t state; /* W3, W4; not covered by the CRC */
};

enum { WS_PENDING = 0, WS_APPLIED = 1, WS_CANCELLED = 2, WS_APPLYING = 3,
       WS_LAZY = 4 };
#define WS_OPEN(s) ((s) == WS_PENDING || (s) == WS_APPLYING || (s) == WS_LAZY)

struct went {
	uint32_t kind, plen;
	uint64_t ino, a, b;
	uint32_t nlen, rsv;
};

_Static_assert(sizeof(struct wfile) == 32, "wal header");
_Static_assert(sizeof(struct whint) == 88, "wal hint");
_Static_assert(S_HINT + sizeof(struct whint) < FX_WALMAP, "the hint is in the mapped page");
_Static_assert(sizeof(struct wrec) == 32, "wal record header");
_Static_assert(sizeof(struct went) == 40, "wal entry header");

uint64_t fx_wal_max = 4u << 20;
uint64_t fx_wal_large = 1u << 20;
uint64_t fx_lazy_max = 4u << 20;
uint64_t fx_wal_window = 256u << 10;

static uint64_t pad8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

static int write_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const unsigned char *p = buf;

	while (len) {
		ssize_t n = fx_os.pwrite(fd, p, len, (off_t)off);

		if (n < 0)
			return (int)n;
		if (n == 0)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t len, uint64_t off)
{
	unsigned char *p = buf;

	while (len) {
		ssize_t n = fx_os.pread(fd, p, len, (off_t)off);

		if (n < 0)
			return (int)n;
		if (n == 0)
			return -ENODATA; /* the file ends first */
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

static void hint_fill(struct whint *h, uint64_t salt, uint64_t end,
		      uint64_t applied, const char *boot)
{
	memset(h, 0, sizeof(*h));
	h->salt = salt;
	h->end = end;
	h->applied = applied;
	memcpy(h->boot, boot, sizeof(h->boot));
	h->crc = fx_crc32c(0, h, offsetof(struct whint, clean));
}

/*
 * The hint is read at every lock: from a shared mapping of walsync's first
 * page, a memory read, not a system call.  The file is made at least that
 * long first (a zero byte at its end, where nothing lives; it never
 * shrinks, so the mapping cannot fault).  Without the mapping the hint is
 * read with pread.
 */
static void walsync_map(struct fstx_domain *d)
{
	static const char z;
	struct stat st;
	void *p;

	if (fx_os.fstat(d->walsync, &st) < 0 ||
	    (st.st_size < FX_WALMAP &&
	     write_all(d->walsync, &z, 1, FX_WALMAP - 1) < 0))
		return;
	if (fx_os.map_ro(d->walsync, FX_WALMAP, &p) == 0)
		d->walmap = p;
}

/* .fstx/walsync, opened (and made) when first needed. */
static int side_fd(struct fstx_domain *d)
{
	int r;

	if (d->walsync < 0) {
		r = fx_os.openat2(d->meta, "walsync", O_RDWR | O_CREAT, 0600,
				    FX_RESOLVE);
		if (r < 0)
			return r;
		d->walsync = r;
		walsync_map(d);
	}
	return d->walsync;
}

/* Records are at least 32 bytes long: one word per 32 bytes of log. */
static uint64_t state_off(uint64_t rec)
{
	return S_STATE + rec / 32 * 16;
}

struct wstate {     /* a state word (W2): valid only with the log's salt */
	uint32_t state, pad;
	uint64_t salt;
};

/*
 * W5: the notes are the truth within one mount of one boot.  Their boot
 * field holds the boot id with the mount's unique id in its last 16
 * characters: a remount (a forced unmount, a removable or network disk
 * that came back) gets another id, and the hint is not trusted.  Where
 * the kernel has no mount id the boot id alone is used (fstx(7)).
 */
static int epoch_id(struct fstx_domain *d, char id[37])
{
	int r = fx_os.boot_id(id);

	if (r < 0)
		return r;
	if (!d->mnt_known) {
		r = fx_os.mount_id(d->root, &d->mnt_id);
		if (r < 0 && r != -EOPNOTSUPP && r != -EINVAL && r != -ENOSYS)
			return r;
		d->mnt_known = r < 0 ? -1 : 1;
	}
	if (d->mnt_known > 0)
		snprintf(id + 20, 17, "%016llx", (unsigned long long)d->mnt_id);
	return 0;
}

/* The hint from d->wal_end and d->wal_applied (no barrier). */
static int hint_write(struct fstx_domain *d)
{
	struct whint h;
	char boot[37];
	int r = epoch_id(d, boot), fd = side_fd(d);

	if (r < 0 || fd < 0)
		return r < 0 ? r : fd;
	hint_fill(&h, d->wal_salt, d->wal_end, d->wal_applied, boot);
	d->wal_said[0] = d->wal_salt; /* W12 */
	d->wal_said[1] = d->wal_applied;
	d->wal_said[2] = d->wal_end;
	d->wal_unsaid = 0;
	h.clean = d->wal_clean;
	h.busy = d->wal_busy;
	h.lazy = d->wal_lazy;
	h.kept = (uint32_t)d->wal_kept;
	h.loose = (uint32_t)d->wal_loose;
	return write_all(fd, &h, sizeof(h), S_HINT);
}

/* Bytes of walsync at off: from the mapping, or read (0 or -errno). */
static int side_read(struct fstx_domain *d, void *buf, size_t len, uint64_t off)
{
	if (d->walmap && off + len <= FX_WALMAP) {
		memcpy(buf, d->walmap + off, len);
		return 0;
	}
	return read_all(d->walsync, buf, len, off);
}

/* 1 a valid hint of this boot in *h, 0 none, -errno. */
static int hint_read(struct fstx_domain *d, struct whint *h)
{
	char boot[37];
	uint32_t crc;
	/* under the lock: no hint write is under way */
	int r = side_read(d, h, sizeof(*h), S_HINT);

	if (r == -ENODATA)
		return 0;
	if (r < 0)
		return r;
	if ((r = epoch_id(d, boot)) < 0)
		return r;
	crc = h->crc;
	h->crc = 0;
	return fx_crc32c(0, h, offsetof(struct whint, clean)) == crc && h->salt &&
	       h->end >= W_START && h->applied >= W_START && h->applied <= h->end &&
	       !memcmp(h->boot, boot, sizeof(h->boot));
}

/*
 * A new, empty log with a new salt (W6).  A checkpoint's header is made
 * durable at once: old records must not be replayed over later changes.
 * The first header of a log (none valid before: no old records) is made
 * durable by the first record's barrier, which covers the whole file.
 */
static int wal_reset(struct fstx_domain *d, int loose)
{
	unsigned char b[W_START];
	struct wfile f = { .magic = W_FILE_MAGIC, .version = W_VERSION };
	uint64_t old = d->wal_salt;
	int r;

	do {
		if (getrandom(&f.salt, sizeof(f.salt), 0) != sizeof(f.salt))
			return -EIO;
	} while (!f.salt || f.salt == d->wal_salt);
	f.crc = fx_crc32c(0, &f, sizeof(f));
	memset(b, 0, sizeof(b));
	memcpy(b, &f, sizeof(f));
	/* the hint goes first: a loader trusts its salt without the header */
	if ((r = side_fd(d)) < 0 ||
	    (r = write_all(d->walsync, b + 64, sizeof(struct whint), S_HINT)) < 0 ||
	    (r = write_all(d->wal, b, sizeof(b), 0)) < 0)
		return r;
	if (old && !loose && (r = fx_os.fdatasync(d->wal)) < 0) {
		d->latched = r;
		return r;
	}
	d->wal_salt = f.salt;
	d->wal_end = d->wal_applied = W_START;
	d->wal_kept = 0;
	d->wal_loose = loose;
	return hint_write(d);
}

/*
 * Read header and hint.  Sets d->wal_salt (0: no valid header, the log is
 * empty), and d->wal_end and d->wal_applied from a hint of this boot (W5);
 * *fresh is 0 when there is none (replay everything).  1 (the domain's
 * open made the log, domain.c), -errno; -EUCLEAN for a header of a future
 * version.
 */
static int wal_load(struct fstx_domain *d, int *fresh)
{
	uint64_t known = d->wal_salt;
	struct wfile f;
	struct whint h;
	int r, fd, hint, unsaid = d->wal_unsaid;

	d->wal_salt = 0;
	d->wal_end = d->wal_applied = 0;
	d->wal_clean = d->wal_busy = 0;
	d->wal_lazy = 0;
	d->wal_kept = 1; /* W11: without a hint of this boot, assume the worst */
	d->wal_loose = 0;
	d->wal_mine = d->wal_unsaid = 0;
	*fresh = 0;
	if ((fd = side_fd(d)) < 0)
		return fd;
	if ((hint = hint_read(d, &h)) < 0)
		return hint;
	if (hint && known && h.salt == known) {
		/* the header this handle read: a new one changes the hint first */
		d->wal_salt = known;
		goto fresh;
	}
	if ((r = read_all(d->wal, &f, sizeof(f), 0)) == -ENODATA)
		return 1; /* never completed: no record can be committed */
	if (r < 0)
		return r;
	uint32_t crc = f.crc;

	f.crc = 0;
	if (memcmp(f.magic, W_FILE_MAGIC, 8) || fx_crc32c(0, &f, sizeof(f)) != crc ||
	    !f.salt)
		return 1; /* torn by power loss during a checkpoint: empty */
	if (f.version != W_VERSION)
		return -EUCLEAN;
	d->wal_salt = f.salt;
	if (!hint || h.salt != f.salt)
		return 1; /* no hint of this boot: replay everything */
fresh:
	*fresh = 1;
	d->wal_end = h.end;
	d->wal_applied = h.applied;
	d->wal_clean = h.clean == 1;
	d->wal_busy = h.busy != 0;
	d->wal_lazy = h.lazy;
	d->wal_kept = h.kept != 0;
	d->wal_loose = h.loose != 0;
	d->wal_mine = h.salt == d->wal_said[0] && h.applied == d->wal_said[1] &&
		      h.end == d->wal_said[2];
	if (d->wal_mine && unsaid && d->wal_busy) {
		d->wal_applied = h.end; /* W12: this handle applied it */
		d->wal_busy = 0;
		d->wal_unsaid = 1; /* still owed: a reader writes no hint */
	}
	return 1;
}

/* Is there a valid record at off?  1 (header in *h), 0 no, -errno. */
static int rec_check(struct fstx_domain *d, uint64_t off, uint64_t size,
		     struct wrec *h, unsigned char *buf)
{
	uint64_t p, end;
	uint32_t crc;
	struct wrec z;
	int r;

	if (off + sizeof(*h) > size)
		return 0;
	if ((r = read_all(d->wal, h, sizeof(*h), off)) < 0)
		return r == -ENODATA ? 0 : r;
	if (h->magic != W_REC_MAGIC || h->salt != d->wal_salt ||
	    h->len > size - off - sizeof(*h))
		return 0;
	z = *h;
	z.crc = 0;
	z.state = 0;
	crc = fx_crc32c(0, &z, sizeof(z));
	p = off + sizeof(*h);
	end = p + h->len;
	while (p < end) {
		size_t n = end - p > W_CHUNK ? W_CHUNK : (size_t)(end - p);

		if ((r = read_all(d->wal, buf, n, p)) < 0)
			return r == -ENODATA ? 0 : r;
		crc = fx_crc32c(crc, buf, n);
		p += n;
	}
	return crc == h->crc;
}

/* The entry's file, opened (writable where it can be) and checked. */
static int entry_fd(struct fstx_domain *d, const char *path, uint64_t ino)
{
	struct stat st;
	int fd = fx_open(d, path, O_RDWR, 0), r;

	if (fd == -EISDIR)
		fd = fx_open(d, path, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	r = fx_os.fstat(fd, &st);
	if (r == 0 && (uint64_t)st.st_ino != ino)
		r = -ESTALE;
	if (r < 0) {
		fx_os.close(fd);
		return r;
	}
	return fd;
}

/* A path the log may name: relative, no NUL, not into .fstx/. */
static int path_ok(const char *p, uint32_t len)
{
	if (!len || len >= PATH_MAX || memchr(p, 0, len) || p[0] == '/')
		return 0;
	return !(len >= 5 && !memcmp(p, FX_META, 5) && (len == 5 || p[5] == '/'));
}

static int copy_in(struct fstx_domain *d, int fd, uint64_t src, uint64_t len,
		   uint64_t dst, unsigned char *buf)
{
	while (len) {
		size_t n = len > W_CHUNK ? W_CHUNK : (size_t)len;
		int r = read_all(d->wal, buf, n, src);

		if (r == 0)
			r = write_all(fd, buf, n, dst);
		if (r < 0)
			return r == -ENODATA ? -EUCLEAN : r;
		src += n;
		dst += n;
		len -= n;
	}
	return 0;
}

/*
 * Is entry e, with its path and xattr name (NUL-terminated here), sound,
 * with room bytes of the record after the names?  A malformed entry in a
 * record whose CRC holds is -EUCLEAN (W5).
 */
static int entry_check(const struct went *e, const char *path, const char *name,
		       uint64_t room)
{
	if (!path_ok(path, e->plen) || memchr(name, 0, e->nlen) ||
	    strlen(path) != e->plen)
		return -EUCLEAN;
	if (e->kind == W_TRUNC ? e->b != 0 : room < e->b)
		return -EUCLEAN;
	if (e->kind == W_SETX ? (e->b > FSTX_MAX_XATTR || !e->nlen) : e->nlen)
		return -EUCLEAN;
	if (e->a > FX_WAL_MAX_OFF || e->b > FX_WAL_MAX_OFF - e->a)
		return -EUCLEAN; /* no commit writes such an entry (W1) */
	if (e->kind < W_PWRITE || e->kind > W_SETX)
		return -EUCLEAN;
	return 0;
}

/* The entry at *p of a payload held in memory (len bytes); 0 or -EUCLEAN. */
static int entry_mem(const unsigned char *pl, uint64_t len, uint64_t *p,
		     struct went *e, char *path, char *name,
		     const unsigned char **data)
{
	uint64_t q = *p;

	if (len - q < sizeof(*e))
		return -EUCLEAN;
	memcpy(e, pl + q, sizeof(*e));
	q += sizeof(*e);
	if (e->plen >= PATH_MAX || e->nlen > W_NAME_MAX ||
	    len - q < (uint64_t)e->plen + e->nlen)
		return -EUCLEAN;
	memcpy(path, pl + q, e->plen);
	path[e->plen] = 0;
	memcpy(name, pl + q + e->plen, e->nlen);
	name[e->nlen] = 0;
	q += e->plen + e->nlen;
	if (entry_check(e, path, name, len - q) < 0)
		return -EUCLEAN;
	*data = pl + q;
	q = pad8(q + (e->kind == W_TRUNC ? 0 : e->b));
	*p = q > len ? len : q;
	return 0;
}

/* One entry of a record read from the log (rec_walk()). */
struct wvisit {
	int (*fn)(struct fstx_domain *d, const struct went *e, const char *path,
		  const char *name, uint64_t data, struct wvisit *v);
	int fd;                   /* the open file of path cur */
	char cur[PATH_MAX];
	unsigned char *buf;       /* W_CHUNK bytes */
	struct fx_syncset *ss;    /* wal_sync_named() */
};

/* The file of entry e, kept open while entries name the same path. */
static int visit_fd(struct fstx_domain *d, const struct went *e,
		    const char *path, struct wvisit *v)
{
	if (v->fd >= 0 && !strcmp(v->cur, path))
		return v->fd;
	if (v->fd >= 0)
		fx_os.close(v->fd);
	v->cur[0] = 0;
	if ((v->fd = entry_fd(d, path, e->ino)) < 0)
		return v->fd;
	memcpy(v->cur, path, e->plen + 1);
	return v->fd;
}

/* Call v->fn for each entry of the valid record at off, read from the
 * log (any size); stops at the first error, -EUCLEAN for a bad entry. */
static int rec_walk(struct fstx_domain *d, uint64_t off, const struct wrec *h,
		    struct wvisit *v)
{
	char path[PATH_MAX], name[W_NAME_MAX + 1];
	uint64_t p = off + sizeof(*h), end = p + h->len;
	int r = 0;

	v->fd = -1;
	for (uint32_t k = 0; k < h->nent && r == 0; k++) {
		struct went e;
		uint64_t data;

		r = -EUCLEAN;
		if (end - p < sizeof(e) ||
		    read_all(d->wal, &e, sizeof(e), p) < 0)
			break;
		p += sizeof(e);
		if (e.plen >= PATH_MAX || e.nlen > W_NAME_MAX ||
		    end - p < (uint64_t)e.plen + e.nlen)
			break;
		if (read_all(d->wal, path, e.plen, p) < 0 ||
		    read_all(d->wal, name, e.nlen, p + e.plen) < 0)
			break;
		if (memchr(path, 0, e.plen))
			break;
		path[e.plen] = 0;
		name[e.nlen] = 0;
		data = p + e.plen + e.nlen;
		if (entry_check(&e, path, name, end - data) < 0)
			break;
		p = pad8(data + e.b);
		if (p > end)
			p = end;
		r = v->fn(d, &e, path, name, data, v);
	}
	if (v->fd >= 0)
		fx_os.close(v->fd);
	v->fd = -1;
	return r;
}

static int replay_entry(struct fstx_domain *d, const struct went *e,
			const char *path, const char *name, uint64_t data,
			struct wvisit *v)
{
	int fd = visit_fd(d, e, path, v), r;

	if (fd < 0)
		return fd;
	switch (e->kind) {
	case W_PWRITE:
		return copy_in(d, fd, data, e->b, e->a, v->buf);
	case W_TRUNC:
		return fx_os.ftruncate(fd, (off_t)e->a);
	default:
		r = read_all(d->wal, v->buf, (size_t)e->b, data);
		return r < 0 ? r : fx_os.fsetxattr(fd, name, v->buf, (size_t)e->b, 0);
	}
}

/* Apply one valid record again (W5), reading it from the log. */
static int rec_replay(struct fstx_domain *d, uint64_t off, const struct wrec *h,
		      unsigned char *buf)
{
	struct wvisit v = { .fn = replay_entry, .buf = buf };

	return rec_walk(d, off, h, &v);
}

/*
 * The state word of the record at off, from .fstx/walsync (W2).  A word
 * of another salt (an older log's), or none, is PENDING: a record is open
 * until its word says otherwise, so appending writes no word.
 */
static int rec_state(struct fstx_domain *d, uint64_t off, uint32_t *state)
{
	struct wstate w;
	int fd = side_fd(d), r;

	if (fd < 0)
		return fd;
	r = read_all(fd, &w, sizeof(w), state_off(off));
	*state = WS_PENDING;
	if (r == -ENODATA) /* never written: a hole */
		return 0;
	if (r == 0 && w.salt == d->wal_salt)
		*state = w.state;
	return r;
}

/*
 * The record's header at off (no CRC check) with its state word; 0, or
 * -EUCLEAN where the hint says a record is and none is.
 */
static int rec_head(struct fstx_domain *d, uint64_t off, struct wrec *h)
{
	int r = read_all(d->wal, h, sizeof(*h), off);

	if (r == -ENODATA || (!r && (h->magic != W_REC_MAGIC || h->salt != d->wal_salt)))
		return -EUCLEAN; /* the hint points at no record: damage */
	return r < 0 ? r : rec_state(d, off, &h->state);
}

static uint64_t rec_next(uint64_t off, const struct wrec *h)
{
	return off + sizeof(*h) + pad8(h->len);
}

static int set_state(struct fstx_domain *d, uint64_t off, uint32_t state)
{
	struct wstate w = { .state = state, .salt = d->wal_salt };
	int fd = side_fd(d);

	return fd < 0 ? fd : write_all(fd, &w, sizeof(w), state_off(off));
}

/* Move APPLIED past records no longer PENDING, and write the hint (W4). */
static int advance(struct fstx_domain *d)
{
	struct wrec h;
	int r;

	while (d->wal_applied < d->wal_end) {
		if ((r = rec_head(d, d->wal_applied, &h)) < 0)
			return r;
		if (WS_OPEN(h.state))
			break;
		d->wal_applied = rec_next(d->wal_applied, &h);
	}
	return hint_write(d);
}

/*
 * Help (W4, W10).  One pass applies every open record in log order after
 * one barrier; a change that a later record of the pass overwrites whole
 * is skipped (coalescing, as a checkpoint of SQLite writes each page once):
 * a pwrite inside a later pwrite's range of the same inode, a setxattr of
 * a name the same inode sets again later.  The final bytes of a range, and
 * the size (a pwrite extends a file at most to its end, which the later
 * one reaches too), are those the later set leaves, whatever ran between;
 * so the pass leaves what applying every entry would.  Truncates are never
 * skipped.  The pass sets the hint's busy word first and moves APPLIED to
 * the end after, without state words: a pass cut short is done again
 * whole by the next lock holder (W5: replay in order is idempotent).
 */
#define H_IV 4       /* later pwrite ranges remembered per inode */
#define H_FDS 16     /* files a pass keeps open */

struct hent {        /* an entry of a record in the pass */
	uint64_t ino, a, b;
	uint32_t kind, skip;
	char *name;      /* W_SETX */
};

struct hslot {       /* inode -> its later changes (open addressing) */
	uint64_t ino;
	int used, niv;
	uint64_t iv[H_IV][2];
	char **names;    /* xattr names set later */
	size_t nnames, capnames;
};

struct hpass {
	struct hent *e;
	size_t n, cap;
	struct hslot *t;
	size_t tsize;
	struct { uint64_t ino; int fd; } fds[H_FDS];
	unsigned nfd;
	unsigned char *buf; /* W_CHUNK: a record's payload */
};

static struct hslot *hslot_of(struct hpass *H, uint64_t ino)
{
	size_t i = (size_t)(ino * 0x9e3779b97f4a7c15ull) & (H->tsize - 1);

	while (H->t[i].used && H->t[i].ino != ino)
		i = (i + 1) & (H->tsize - 1);
	H->t[i].used = 1;
	H->t[i].ino = ino;
	return &H->t[i];
}

/* Is entry x overwritten whole later?  Then skip it; else remember it. */
static int hent_later(struct hslot *sl, const struct hent *x)
{
	if (x->kind == W_PWRITE) {
		for (int k = 0; k < sl->niv; k++)
			if (sl->iv[k][0] <= x->a && x->a + x->b <= sl->iv[k][1])
				return 1;
		if (sl->niv < H_IV) {
			sl->iv[sl->niv][0] = x->a;
			sl->iv[sl->niv++][1] = x->a + x->b;
		}
		return 0;
	}
	if (x->kind != W_SETX)
		return 0;
	for (size_t k = 0; k < sl->nnames; k++)
		if (!strcmp(sl->names[k], x->name))
			return 1;
	if (sl->nnames == sl->capnames) {
		size_t c = sl->capnames ? 2 * sl->capnames : 4;
		char **nn = fx_realloc(sl->names, c * sizeof(*nn));

		if (!nn)
			return 0; /* not skipping is always right */
		sl->names = nn;
		sl->capnames = c;
	}
	sl->names[sl->nnames++] = x->name;
	return 0;
}

/*
 * The record at off, checked, its payload in H->buf (whole up to W_CHUNK):
 * 1 open, 0 applied or cancelled, -errno (-EUCLEAN: none where the hint
 * says one is).
 */
static int help_rec(struct fstx_domain *d, struct hpass *H, uint64_t size,
		    uint64_t off, struct wrec *h)
{
	int r = rec_check(d, off, size, h, H->buf);

	if (r <= 0)
		return r < 0 ? r : -EUCLEAN;
	if ((r = rec_state(d, off, &h->state)) < 0)
		return r;
	return WS_OPEN(h->state);
}

/* Pass 1: the entries of the open records in [applied, end), marked. */
static int help_collect(struct fstx_domain *d, struct hpass *H, uint64_t size)
{
	char path[PATH_MAX], name[W_NAME_MAX + 1];
	struct wrec h;
	int r;

	for (uint64_t off = d->wal_applied; off < d->wal_end; off = rec_next(off, &h)) {
		const unsigned char *data;
		uint64_t p = 0;
		struct went e;

		if ((r = help_rec(d, H, size, off, &h)) < 0)
			return r;
		if (!r || h.len > W_CHUNK)
			continue; /* large records: applied whole, not coalesced */
		for (uint32_t k = 0; k < h.nent; k++) {
			struct hent *x;

			if ((r = entry_mem(H->buf, h.len, &p, &e, path, name, &data)) < 0)
				return r;
			if (H->n == H->cap) {
				size_t c = H->cap ? 2 * H->cap : 64;
				struct hent *ne = fx_realloc(H->e, c * sizeof(*ne));

				if (!ne)
					return -ENOMEM;
				H->e = ne;
				H->cap = c;
			}
			x = &H->e[H->n++];
			*x = (struct hent){ .ino = e.ino, .a = e.a, .b = e.b,
					    .kind = e.kind };
			if (e.kind == W_SETX && !(x->name = fx_strdup(name)))
				return -ENOMEM;
		}
	}
	for (H->tsize = 16; H->tsize < 2 * H->n; H->tsize *= 2)
		;
	if (!(H->t = fx_calloc(H->tsize, sizeof(*H->t))))
		return -ENOMEM;
	for (size_t i = H->n; i-- > 0;)
		H->e[i].skip = (uint32_t)hent_later(hslot_of(H, H->e[i].ino), &H->e[i]);
	return 0;
}

/* The pass's fd for the entry's file (opened once per pass). */
static int help_fd(struct fstx_domain *d, struct hpass *H, const char *path,
		   uint64_t ino)
{
	unsigned k;
	int fd;

	for (k = 0; k < H->nfd && k < H_FDS; k++)
		if (H->fds[k].ino == ino)
			return H->fds[k].fd;
	if ((fd = entry_fd(d, path, ino)) < 0)
		return fd;
	k = H->nfd++ % H_FDS;
	if (H->nfd > H_FDS)
		fx_os.close(H->fds[k].fd);
	H->fds[k].ino = ino;
	H->fds[k].fd = fd;
	return fd;
}

/* Pass 2: apply the entries not skipped, record by record, in log order. */
static int help_apply(struct fstx_domain *d, struct hpass *H, uint64_t size)
{
	char path[PATH_MAX], name[W_NAME_MAX + 1];
	size_t i = 0;
	struct wrec h;
	int r;

	for (uint64_t off = d->wal_applied; off < d->wal_end; off = rec_next(off, &h)) {
		const unsigned char *data;
		uint64_t p = 0;
		struct went e;

		if ((r = help_rec(d, H, size, off, &h)) < 0)
			return r;
		if (!r)
			continue;
		if (h.len > W_CHUNK) {
			if ((r = rec_replay(d, off, &h, H->buf)) < 0)
				return r;
			continue;
		}
		for (uint32_t k = 0; k < h.nent; k++, i++) {
			int fd;

			if ((r = entry_mem(H->buf, h.len, &p, &e, path, name, &data)) < 0)
				return r;
			if (i >= H->n)
				return -EUCLEAN; /* the log changed under the lock */
			if (H->e[i].skip)
				continue;
			if ((fd = help_fd(d, H, path, e.ino)) < 0)
				return fd;
			if (e.kind == W_PWRITE)
				r = write_all(fd, data, (size_t)e.b, e.a);
			else if (e.kind == W_TRUNC)
				r = fx_os.ftruncate(fd, (off_t)e.a);
			else
				r = fx_os.fsetxattr(fd, name, data, (size_t)e.b, 0);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static void help_free(struct hpass *H)
{
	for (size_t i = 0; i < H->n; i++)
		free(H->e[i].name);
	for (size_t i = 0; H->t && i < H->tsize; i++)
		free(H->t[i].names);
	for (unsigned k = 0; k < H->nfd && k < H_FDS; k++)
		fx_os.close(H->fds[k].fd);
	free(H->e);
	free(H->t);
	free(H->buf);
}

/* Help: make every open record durable and apply it.  1 done, 0 none. */
static int wal_help(struct fstx_domain *d)
{
	struct hpass H = { 0 };
	struct stat st;
	int r;

	if (d->wal_applied >= d->wal_end) { /* the first past APPLIED is open */
		if (!d->wal_busy)
			return 0;
		d->wal_busy = 0;
		return hint_write(d);
	}
	/* crash-only records only (W11, W12): no promise needs the barrier */
	if (d->wal_kept && (r = fx_os.fdatasync(d->wal)) < 0) {
		d->latched = r;
		return r;
	}
	if ((r = fx_os.fstat(d->wal, &st)) < 0)
		return r;
	if (!(H.buf = fx_malloc(W_CHUNK)))
		return -ENOMEM;
	d->wal_busy = 1;
	if ((r = hint_write(d)) < 0 ||
	    (r = help_collect(d, &H, (uint64_t)st.st_size)) < 0 ||
	    (r = help_apply(d, &H, (uint64_t)st.st_size)) < 0)
		goto out;
	d->wal_applied = d->wal_end;
	d->wal_busy = 0;
	r = hint_write(d);
out:
	help_free(&H);
	return r < 0 ? r : 1;
}

static int recover_loaded(struct fstx_domain *d, int fresh, int all);

/*
 * Replay every valid record from the start (W5), when no hint of this
 * boot says what was applied.  1 replayed something, 0 nothing, -errno.
 */
int fx_wal_recover(struct fstx_domain *d)
{
	return fx_wal_recover_mode(d, 1);
}

int fx_wal_recover_mode(struct fstx_domain *d, int lazy_too)
{
	int fresh, r = wal_load(d, &fresh);

	if (r < 0 || !d->wal_salt)
		return r < 0 ? r : 0;
	return recover_loaded(d, fresh, lazy_too);
}

/*
 * W8: at the start of a transaction, a hint of this boot that says clean
 * stands for the checks of the wedge mark, the journal and the progress
 * marks.  1 clean (and the log recovered as fx_wal_recover() does), 0 the
 * caller must check (and then fx_wal_recover()), -errno.
 */
int fx_wal_enter(struct fstx_domain *d)
{
	int fresh, r = wal_load(d, &fresh);

	if (r < 0 || !d->wal_salt || !fresh || !d->wal_clean)
		return r < 0 ? r : 0;
	r = recover_loaded(d, fresh, 0);
	return r < 0 ? r : 1;
}

/* W12, at close: the hint says the handle's last record is applied. */
int fx_wal_settle(struct fstx_domain *d)
{
	int fresh, r = wal_load(d, &fresh);

	if (r < 0 || !fresh || !d->wal_mine)
		return r < 0 ? r : 0;
	return hint_write(d);
}

/* The checks of W8 found the domain clean: say so in the hint. */
int fx_wal_set_clean(struct fstx_domain *d)
{
	if (!d->wal_salt || d->wal_clean)
		return 0;
	d->wal_clean = 1;
	return hint_write(d);
}

/* Before the journal, a progress mark or the wedge mark is made (W8). */
int fx_wal_set_dirty(struct fstx_domain *d)
{
	if (!d->wal_clean)
		return 0;
	d->wal_clean = 0;
	return d->wal_salt ? hint_write(d) : 0;
}

static int recover_loaded(struct fstx_domain *d, int fresh, int all)
{
	uint64_t off, size;
	unsigned char *buf = NULL;
	struct stat st;
	struct wrec h;
	long n = 0;
	int r, v;

	if (fresh) /* this boot: only an applier cut short needs work */
		return d->wal_busy || (all && d->wal_lazy > d->wal_applied) ?
		       wal_help(d) : 0;
	/* a writer on another mount of this filesystem (a bind mount) may
	 * be at its barrier now: nothing is replayed in place before its
	 * record is durable (W3) */
	if ((r = fx_os.fdatasync(d->wal)) < 0)
		return r;
	if ((r = fx_os.fstat(d->wal, &st)) < 0)
		return r;
	size = (uint64_t)st.st_size;
	buf = fx_malloc(W_CHUNK);
	if (!buf)
		return -ENOMEM;
	off = W_START;
	while ((v = rec_check(d, off, size, &h, buf)) == 1) {
		if ((r = rec_replay(d, off, &h, buf)) < 0)
			goto out;
		off = rec_next(off, &h);
		if (off > size)
			off = size;
		n++;
	}
	if ((r = v) < 0)
		goto out;
	d->wal_end = d->wal_applied = off;
	if ((r = hint_write(d)) < 0)
		goto out;
	r = n > 0;
out:
	free(buf);
	return r;
}

int fx_wal_pending(struct fstx_domain *d)
{
	struct stat st;
	struct wrec h;
	unsigned char *buf;
	int r, fresh;

	if ((r = wal_load(d, &fresh)) < 0 || !d->wal_salt)
		return r < 0 ? r : 0;
	if (fresh) /* an applier cut short, or lazy records (W10) */
		return d->wal_busy || d->wal_lazy > d->wal_applied;
	if ((r = fx_os.fstat(d->wal, &st)) < 0)
		return r;
	if (!(buf = fx_malloc(W_CHUNK)))
		return -ENOMEM;
	r = rec_check(d, W_START, (uint64_t)st.st_size, &h, buf);
	free(buf);
	return r;
}

uint64_t fx_wal_bytes(struct fstx_domain *d)
{
	return d->wal_end > W_START ? d->wal_end - W_START : 0;
}

int fx_wal_peek(struct fstx_domain *d, uint64_t *bytes)
{
	unsigned char *buf;
	struct stat st;
	struct wrec h;
	uint64_t off = W_START;
	int r, fresh;

	*bytes = 0;
	if ((r = wal_load(d, &fresh)) < 0 || !d->wal_salt)
		return r < 0 ? r : 0;
	if (fresh) {
		*bytes = fx_wal_bytes(d);
		return 0;
	}
	if ((r = fx_os.fstat(d->wal, &st)) < 0)
		return r;
	if (!(buf = fx_malloc(W_CHUNK)))
		return -ENOMEM;
	while ((r = rec_check(d, off, (uint64_t)st.st_size, &h, buf)) == 1)
		off = rec_next(off, &h);
	free(buf);
	*bytes = off - W_START;
	return r < 0 ? r : 0;
}

static int sync_entry(struct fstx_domain *d, const struct went *e,
		      const char *path, const char *name, uint64_t data,
		      struct wvisit *v)
{
	struct stat st;
	int fd, r;

	(void)name;
	(void)data;
	if (fx_ss_has(v->ss, e->ino))
		return 0;
	/* read-only is enough to fsync, and works on a file made read-only
	 * since its record (entry_fd() wants to write) */
	fd = fx_open(d, path, O_RDONLY | O_NONBLOCK, 0);
	if (fd == -ENOENT)
		return 0; /* removed since: nothing of the log's there */
	if (fd < 0)
		return fd;
	if ((r = fx_os.fstat(fd, &st)) < 0 || (uint64_t)st.st_ino != e->ino) {
		fx_os.close(fd);
		return r < 0 ? r : 0; /* another file there now: not the log's */
	}
	fx_ss_take(v->ss, fd);
	return 0;
}

/*
 * W6: make durable in place every file a record of the log names, one
 * fsync each (syncset.h), never the whole filesystem.
 */
static int wal_sync_named(struct fstx_domain *d)
{
	struct fx_syncset ss;
	struct wvisit v = { .fn = sync_entry, .ss = &ss };
	struct wrec h;
	int r = 0;

	fx_ss_init(&ss);
	for (uint64_t off = W_START; off < d->wal_end && r == 0;
	     off = rec_next(off, &h)) {
		if ((r = rec_head(d, off, &h)) < 0)
			break;
		r = rec_walk(d, off, &h, &v);
	}
	if (r < 0) {
		fx_ss_drop(&ss);
		return r == -ENODATA ? -EUCLEAN : r;
	}
	return fx_ss_flush(&ss);
}

/*
 * W6, W11: loose_ok for a checkpoint because the log is full; it has no
 * barrier when every record since the last one is crash-only.
 */
static int checkpoint(struct fstx_domain *d, int loose_ok)
{
	int r, loose;

	if (d->wal < 0 || (d->wal_end <= W_START && !d->wal_loose))
		return 0;
	int helped = wal_help(d);

	if (helped < 0)
		return helped;
	loose = loose_ok && !d->wal_kept;
	if (!loose && (r = d->wal_loose ? fx_os.syncfs(d->root) /* W11 */
				       : wal_sync_named(d)) < 0) {
		d->latched = r;
		return r;
	}
	r = wal_reset(d, loose);
	return r < 0 ? r : 1 + helped;
}

int fx_wal_checkpoint(struct fstx_domain *d)
{
	return checkpoint(d, 0);
}

/* ---- commit ------------------------------------------------------------ */

/* The record being written: buffered, checksummed as it goes. */
struct wbuf {
	int fd;
	unsigned char *buf;
	size_t used;
	uint64_t off;  /* file offset of buf[0] */
	uint32_t crc;
	int err;
};

static void wb_flush(struct wbuf *w)
{
	if (!w->err && w->used)
		w->err = write_all(w->fd, w->buf, w->used, w->off);
	w->off += w->used;
	w->used = 0;
}

static void wb_put(struct wbuf *w, const void *p, size_t n)
{
	if (w->err || !n)
		return;
	w->crc = fx_crc32c(w->crc, p, n);
	if (n >= W_BUF / 4) { /* large data goes straight from the caller */
		wb_flush(w);
		if (!w->err)
			w->err = write_all(w->fd, p, n, w->off);
		w->off += n;
		return;
	}
	if (w->used + n > W_BUF)
		wb_flush(w);
	memcpy(w->buf + w->used, p, n);
	w->used += n;
}

static void wb_pad(struct wbuf *w)
{
	static const unsigned char z[8];
	uint64_t at = w->off + w->used;

	wb_put(w, z, (size_t)(pad8(at) - at));
}

/* The change op i makes, as an entry (0 if none); sizes in *e. */
static int entry_of(const struct plan *P, size_t i, const int *tgt,
		    const uint64_t *ino, struct went *e, const char **path,
		    const void **data)
{
	const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];

	memset(e, 0, sizeof(*e));
	switch (op->op) {
	case BTRFS_IOC_UT_OP_OPEN: /* O_TRUNC: a truncate to 0 */
		if (!(op->args[1] & O_TRUNC))
			return 0;
		*path = P->pops[i].cpath;
		e->ino = ino[i];
		e->kind = W_TRUNC;
		*data = NULL;
		break;
	case BTRFS_IOC_UT_OP_PWRITE:
		if (!op->args[2])
			return 0;
		*path = P->pops[tgt[i]].cpath;
		e->ino = ino[tgt[i]];
		e->kind = W_PWRITE;
		e->a = (uint64_t)op->args[3];
		e->b = (uint64_t)op->args[2];
		*data = ARGP(op, 1);
		break;
	case BTRFS_IOC_UT_OP_TRUNCATE:
		*path = P->pops[i].cpath;
		e->ino = ino[i];
		e->kind = W_TRUNC;
		e->a = (uint64_t)op->args[1];
		*data = NULL;
		break;
	case BTRFS_IOC_UT_OP_SETXATTR:
		*path = P->pops[i].cpath;
		e->ino = ino[i];
		e->kind = W_SETX;
		e->nlen = (uint32_t)strlen(ARGP(op, 1));
		e->b = (uint64_t)op->args[3];
		*data = ARGP(op, 2);
		break;
	default:
		return 0;
	}
	e->plen = (uint32_t)strlen(*path);
	return 1;
}

static uint64_t entry_size(const struct went *e)
{
	return pad8(sizeof(*e) + e->plen + e->nlen + e->b);
}

/*
 * The handle keeps the files of its recent log transactions open (FX_FDC
 * of them), so that a transaction on the same files opens nothing.  An fd
 * is reused only for the inode that the planner's lstat found at the path
 * just now: same device (the domain's), same inode number, and the same
 * open flags.  No fstat is needed: while the fd is open its inode lives
 * (even if unlinked), and no two live inodes of a device share a number,
 * so the path names the fd's inode.  A rename or unlink by anyone since
 * makes the entry miss.  Entries are added after the transaction, never
 * while its fds are in use.
 */
static int fdc_get(struct fstx_domain *d, uint64_t ino, int flags)
{
	for (size_t k = 0; k < FX_FDC; k++) {
		struct fx_fdc *c = &d->fdc[k];

		if (c->fd >= 0 && c->ino == ino && c->flags == flags)
			return c->fd;
	}
	return -1;
}

/* Keep fd (of inode ino, opened with flags) in the cache, or close it. */
static void fdc_put(struct fstx_domain *d, uint64_t ino, int flags, int fd)
{
	struct fx_fdc *c;

	for (size_t k = 0; k < FX_FDC; k++)
		if (d->fdc[k].fd >= 0 && d->fdc[k].ino == ino &&
		    d->fdc[k].flags == flags) {
			fx_os.close(fd); /* opened twice in one transaction */
			return;
		}
	c = &d->fdc[d->fdc_next++ % FX_FDC];
	if (c->fd >= 0)
		fx_os.close(c->fd);
	*c = (struct fx_fdc){ .ino = ino, .fd = fd, .flags = flags };
}

/* The fds of one log transaction: own[i] 1 opened here, 2 from the cache. */
struct tfds {
	int *fd;
	int *flags;
	unsigned char *own;
};

/*
 * Open the files the ops change (before the commit point).  tgt[i] is the
 * op whose fd op i uses: a pwrite its open's, a truncate or setxattr of the
 * file the last writable open opened that one's, else its own.
 */
static int open_targets(struct fstx_domain *d, const struct plan *P,
			struct tfds *F, uint64_t *ino, int *slot_op, int *tgt)
{
	long last = -1; /* the last writable open */

	for (size_t i = 0; i < P->nops; i++) {
		const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];
		const struct pop *po = &P->pops[i];
		int flags, fd, r;
		struct stat st;

		tgt[i] = (int)i;
		if ((op->op == BTRFS_IOC_UT_OP_TRUNCATE || op->op == BTRFS_IOC_UT_OP_SETXATTR) &&
		    last >= 0 && !strcmp(P->pops[last].cpath, po->cpath)) {
			tgt[i] = (int)last;
			ino[i] = ino[last];
			continue;
		}
		switch (op->op) {
		case BTRFS_IOC_UT_OP_PWRITE: /* slots are reused: map it now */
			tgt[i] = slot_op[op->args[0]];
			continue;
		case BTRFS_IOC_UT_OP_OPEN:
			slot_op[op->args[3]] = (int)i;
			if ((op->args[1] & O_ACCMODE) == O_RDONLY)
				continue; /* changes nothing */
			flags = O_WRONLY;
			last = (long)i;
			break;
		case BTRFS_IOC_UT_OP_TRUNCATE:
			flags = O_WRONLY;
			break;
		case BTRFS_IOC_UT_OP_SETXATTR:
			flags = O_RDONLY;
			break;
		default:
			continue;
		}
		if (po->check_ino && d->fs.ino_unique && d->fs.dev && po->dev == d->fs.dev &&
		    (fd = fdc_get(d, po->ino, flags)) >= 0) {
			F->fd[i] = fd;
			F->own[i] = 2;
			ino[i] = po->ino;
			continue;
		}
		fd = fx_open(d, po->cpath, flags | O_NONBLOCK, 0);
		if (fd < 0)
			return fd;
		F->fd[i] = fd;
		F->flags[i] = flags;
		F->own[i] = 1;
		if ((r = fx_os.fstat(fd, &st)) < 0)
			return r;
		if (!S_ISREG(st.st_mode) || (po->check_ino && po->ino != (uint64_t)st.st_ino))
			return -ESTALE;
		ino[i] = (uint64_t)st.st_ino;
		if ((uint64_t)st.st_dev != d->fs.dev)
			F->flags[i] = -1; /* another device: not for the cache */
	}
	return 0;
}

/* After the transaction: keep what it opened, or close it. */
static void close_targets(struct fstx_domain *d, struct tfds *F,
			  const uint64_t *ino, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (F->own[i] != 1)
			continue;
		if (F->flags[i] >= 0 && d->fs.ino_unique && d->fs.dev && ino[i])
			fdc_put(d, ino[i], F->flags[i], F->fd[i]);
		else
			fx_os.close(F->fd[i]);
	}
}

/*
 * Write the record at d->wal_end (W2, W3); its end in *end.  A record that
 * fits the buffer goes in one write, its header first in it.
 */
static int write_record(struct fstx_domain *d, const struct plan *P,
			const int *tgt, const uint64_t *ino, uint64_t *end)
{
	struct wrec h = { .magic = W_REC_MAGIC, .salt = d->wal_salt };
	struct wbuf w = { .fd = d->wal, .off = d->wal_end };
	struct went e;
	const char *path;
	const void *data;
	int r, one;

	for (size_t i = 0; i < P->nops; i++)
		if (entry_of(P, i, tgt, ino, &e, &path, &data)) {
			h.nent++;
			h.len += entry_size(&e);
		}
	w.crc = fx_crc32c(0, &h, sizeof(h));
	if (!d->wbuf && !(d->wbuf = fx_malloc(W_BUF)))
		return -ENOMEM;
	w.buf = d->wbuf;
	memset(w.buf, 0, sizeof(h)); /* the header's place; not in the CRC */
	w.used = sizeof(h);
	for (size_t i = 0; i < P->nops && !w.err; i++) {
		if (!entry_of(P, i, tgt, ino, &e, &path, &data))
			continue;
		wb_put(&w, &e, sizeof(e));
		wb_put(&w, path, e.plen);
		if (e.kind == W_SETX)
			wb_put(&w, ARGP(&P->ops[i], 1), e.nlen);
		if (e.kind != W_TRUNC)
			wb_put(&w, data, (size_t)e.b);
		wb_pad(&w);
	}
	h.crc = w.crc;
	one = w.off == d->wal_end; /* nothing written yet: all in one */
	if (one)
		memcpy(w.buf, &h, sizeof(h));
	wb_flush(&w);
	if (w.err)
		return w.err;
	if (!one && (r = write_all(d->wal, &h, sizeof(h), d->wal_end)) < 0)
		return r;
	*end = d->wal_end + sizeof(h) + h.len;
	return 0;
}

/* Apply op i in place (W4). */
static int64_t apply_op(const struct plan *P, size_t i, const int *fds,
			const int *tgt)
{
	const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];

	switch (op->op) {
	case BTRFS_IOC_UT_OP_OPEN:
		return op->args[1] & O_TRUNC ? fx_os.ftruncate(fds[i], 0) : 0;
	case BTRFS_IOC_UT_OP_PWRITE:
		if (!op->args[2])
			return 0;
		return write_all(fds[tgt[i]], ARGP(op, 1),
				 (size_t)op->args[2], (uint64_t)op->args[3]);
	case BTRFS_IOC_UT_OP_TRUNCATE:
		return fx_os.ftruncate(fds[tgt[i]], (off_t)op->args[1]);
	case BTRFS_IOC_UT_OP_SETXATTR:
		return fx_os.fsetxattr(fds[tgt[i]], ARGP(op, 1), ARGP(op, 2),
					 (size_t)op->args[3], 0);
	default:
		return 0;
	}
}

static const unsigned char zero_hdr[sizeof(struct wrec)];

/*
 * Group commit (W3): the record's barrier, outside the domain lock.  The
 * syncers of a domain meet at the head of .fstx/walsync, which holds
 * page-cache notes of this boot, written only under the byte lock G_Q,
 * with a CRC-32C (a note that fails it is no note): (salt, end), every
 * record below end is durable; the barrier under way (its generation,
 * while active); how many writers are in here, not yet covered,
 * and how many were when the last barrier ended.  A syncer whose record a
 * barrier covered returns at once: it reads the notes without the lock
 * first, and takes their (salt, end) where the CRC holds (a note being
 * written fails it, and an older note that says covered said the truth);
 * one that finds a barrier under way waits for it on that barrier's byte
 * (held by its syncer throughout, so a shared lock there is granted when
 * it ends, with G_Q free meanwhile: a writer covered by one barrier never
 * waits out the next), then looks again; else it becomes the syncer: it
 * may gather (gather()), then reads the log's end from the hint and
 * syncs, so its barrier covers every record written before it began.  A
 * syncer ends its barrier with the notes written and G_Q free before it
 * frees the barrier's byte, so the writers it wakes find themselves
 * covered without a lock.  Generations alternate between two bytes, so
 * the next barrier never holds the byte a late waiter wants.  A syncer's
 * locks die with it: an active note whose byte is free (a trial lock
 * succeeds under G_Q) was left by a dead syncer.  The counts only tune
 * gathering: a covered writer leaves without counting itself out; a
 * barrier's end takes out the writers counted when it began (their
 * records were written first, so it covered them), and writers counted
 * during it stay until the next barrier ends, as do those that die in
 * here.
 */
#define G_Q 0        /* byte lock: the notes */
#define G_BAR 1      /* + gen % 2: the barrier of that generation */
#define G_GATHER 3   /* fewer writers in sight make no gathering */
#define G_GATHER_MAX 2000 /* us */
/*
 * No gathering after a barrier shorter than this: a nap costs its syncer
 * a trip through the scheduler and leaves the device idle, which a short
 * barrier does not pay back.  Measured with 8 writers on loop devices:
 * ext4's and xfs' barriers (about 300 us) commit 3-7% more without it;
 * btrfs' (about 700 us) and a 1 ms device flush share less without it.
 */
#define G_GATHER_MIN 500 /* us */

struct gnote {
	uint64_t salt, end;       /* durable below end */
	uint32_t gen, active;     /* the barrier under way, while active */
	uint32_t waiting;         /* writers in group_sync, not yet covered */
	uint32_t peak;            /* waiting when the last barrier ended */
	uint32_t bar_us;          /* its length */
	uint32_t covering;        /* waiting when the barrier under way began */
	uint32_t crc;             /* CRC-32C of the fields above */
};

_Static_assert(S_GROUP + sizeof(struct gnote) <= S_HINT, "group notes before the hint");

static int glock(struct fstx_domain *d, int type, off_t at, int wait)
{
	return fx_os.lock_range(d->walsync, type, at, 1, wait);
}

static uint64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static int note_write(struct fstx_domain *d, struct gnote *g)
{
	g->crc = fx_crc32c(0, g, offsetof(struct gnote, crc));
	return write_all(d->walsync, g, sizeof(*g), S_GROUP);
}

static int note_whole(const struct gnote *g)
{
	return g->crc == fx_crc32c(0, g, offsetof(struct gnote, crc));
}

/* Without the lock: 1 if a whole note says the record below end durable. */
static int covered(struct fstx_domain *d, uint64_t salt, uint64_t end)
{
	struct gnote g;

	if (side_read(d, &g, sizeof(g), S_GROUP) < 0 || !note_whole(&g))
		return 0;
	return g.salt == salt && g.end >= end;
}

/*
 * A new syncer that saw several writers at the last barrier's end waits,
 * up to half that barrier's length, for those it covered to come back with
 * their next records (commit_delay with siblings, measured): else each
 * barrier would start while they are away and cover half of them.  The
 * count is read without the lock: a hint only.
 */
static void gather(struct fstx_domain *d, uint32_t peak, uint32_t bar_us)
{
	uint64_t t0 = now_us(), lim = bar_us / 2 < G_GATHER_MAX ? bar_us / 2 : G_GATHER_MAX;
	struct timespec nap = { 0, 20000 };
	struct gnote g;

	while (now_us() - t0 < lim) {
		nanosleep(&nap, NULL);
		if (side_read(d, &g, sizeof(g), S_GROUP) < 0 || g.waiting >= peak)
			break;
	}
}

static int group_sync(struct fstx_domain *d, uint64_t salt, uint64_t end)
{
	struct gnote g;
	struct whint h;
	uint64_t target = end, t0;
	uint32_t crc;
	off_t bar;
	int r, rs, in = 0, came, gathering;

	if ((r = side_fd(d)) < 0)
		return r;
	for (;;) {
		if (covered(d, salt, end))
			return 0;
		if ((r = glock(d, F_WRLCK, G_Q, 1)) < 0)
			return r;
		r = side_read(d, &g, sizeof(g), S_GROUP);
		if (r == -ENODATA || (r == 0 && !note_whole(&g))) {
			memset(&g, 0, sizeof(g)); /* none yet, or not whole: none */
			r = 0;
		}
		if (r < 0)
			goto out_q;
		if (g.salt == salt && g.end >= end)
			goto out_q; /* covered by an earlier barrier */
		came = !in; /* counted once, on the first look */
		if (came) {
			in = 1;
			g.waiting++;
		}
		if (!g.active)
			break;
		bar = G_BAR + g.gen % 2;
		if ((r = glock(d, F_WRLCK, bar, 0)) == 0) {
			glock(d, F_UNLCK, bar, 0); /* its syncer died */
			break;
		}
		if (r != -EAGAIN && r != -EACCES)
			goto out_q;
		if (came && (r = note_write(d, &g)) < 0)
			goto out_q;
		glock(d, F_UNLCK, G_Q, 0);
		/* wait for the barrier under way, then look again */
		if ((r = glock(d, F_RDLCK, bar, 1)) < 0)
			return r;
		glock(d, F_UNLCK, bar, 0);
	}
	g.gen++;
	bar = G_BAR + g.gen % 2;
	if ((r = glock(d, F_WRLCK, bar, 1)) < 0)
		goto out_q;
	g.active = 1; /* those who come meanwhile wait for it */
	g.covering = g.waiting;
	gathering = g.peak >= G_GATHER && g.waiting < g.peak && g.bar_us >= G_GATHER_MIN;
	if ((r = note_write(d, &g)) < 0)
		goto out_bar;
	glock(d, F_UNLCK, G_Q, 0);
	if (gathering)
		gather(d, g.peak, g.bar_us);
	/* the hint may be being written (by a lock holder): its CRC says */
	if (side_read(d, &h, sizeof(h), S_HINT) == 0) {
		crc = h.crc;
		h.crc = 0;
		if (crc == fx_crc32c(0, &h, offsetof(struct whint, clean)) &&
		    h.salt == salt && h.end > end)
			target = h.end;
	}
	t0 = now_us();
	rs = fx_os.fdatasync(d->wal);
	if ((r = glock(d, F_WRLCK, G_Q, 1)) < 0)
		goto out_bar; /* the note stays active: the next syncer sees
				 it dead once this byte is free */
	if ((r = side_read(d, &g, sizeof(g), S_GROUP)) == 0) {
		if (rs == 0 && (g.salt != salt || g.end < target)) {
			g.salt = salt;
			g.end = target;
		}
		g.active = 0;
		g.peak = g.waiting;
		g.bar_us = (uint32_t)(now_us() - t0);
		g.waiting -= g.covering < g.waiting ? g.covering : g.waiting;
		g.covering = 0;
		r = note_write(d, &g);
	}
	r = rs < 0 ? rs : r;
	glock(d, F_UNLCK, G_Q, 0); /* first: the waiters it wakes find it free */
	glock(d, F_UNLCK, bar, 0);
	return r;
out_bar:
	glock(d, F_UNLCK, bar, 0);
out_q:
	glock(d, F_UNLCK, G_Q, 0);
	return r;
}

/*
 * Zeros from the end of the record to the next W_GROW boundary, where the
 * file ends before that (W2): later records then change no file size.
 */
static int grow(struct fstx_domain *d, uint64_t end)
{
	static const unsigned char z[W_BUF];
	struct stat st;
	uint64_t to = (end + W_GROW - 1) / W_GROW * W_GROW;
	int r;

	if (d->wal_size >= to) /* the file only grows: still true */
		return 0;
	if ((r = fx_os.fstat(d->wal, &st)) < 0)
		return r;
	for (uint64_t at = (uint64_t)st.st_size > end ? (uint64_t)st.st_size : end;
	     at < to && r == 0; at += W_BUF)
		r = write_all(d->wal, z, (size_t)(to - at < W_BUF ? to - at : W_BUF), at);
	if (r == 0)
		d->wal_size = (uint64_t)st.st_size > to ? (uint64_t)st.st_size : to;
	return r;
}

/* Does entry e change an inode of set? */
static int ent_in(const struct went *e, const uint64_t *set, size_t n)
{
	for (size_t j = 0; j < n; j++)
		if (set[j] && set[j] == e->ino)
			return 1;
	return 0;
}

/* The entry after e at p, or UINT64_MAX where e does not fit before end
 * (the caller has checked that its header does). */
static uint64_t ent_next(uint64_t p, uint64_t end, const struct went *e)
{
	uint64_t room = end - p - sizeof(*e), data = e->kind == W_TRUNC ? 0 : e->b;

	if (e->plen > room || e->nlen > room - e->plen ||
	    data > room - e->plen - e->nlen)
		return UINT64_MAX;
	return pad8(p + sizeof(*e) + e->plen + e->nlen + data);
}

/* The same, reading each record's header, state word and entry headers. */
static int conflicts_read(struct fstx_domain *d, const uint64_t *set, size_t n)
{
	struct wrec h;
	struct went e;
	int r;

	for (uint64_t off = d->wal_applied; off < d->wal_end; off = rec_next(off, &h)) {
		uint64_t p = off + sizeof(h), end;

		if ((r = rec_head(d, off, &h)) < 0)
			return r;
		if (!WS_OPEN(h.state))
			continue;
		end = p + h.len;
		for (uint32_t k = 0; k < h.nent; k++) {
			if (end - p < sizeof(e) || read_all(d->wal, &e, sizeof(e), p) < 0)
				return -EUCLEAN;
			if (ent_in(&e, set, n))
				return 1;
			if ((p = ent_next(p, end, &e)) > end)
				return -EUCLEAN;
		}
	}
	return 0;
}

/* Bytes of fd at off into buf, zeros past its end (a state word never
 * written reads PENDING, W2).  0 or -errno. */
static int read_upto(int fd, unsigned char *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t k = fx_os.pread(fd, buf, len, (off_t)off);

		if (k < 0)
			return (int)k;
		if (k == 0) {
			memset(buf, 0, len);
			break;
		}
		buf += k;
		off += (uint64_t)k;
		len -= (size_t)k;
	}
	return 0;
}

/*
 * The same from memory: the open records lie end to end in [APPLIED, END),
 * and their state words in one range of walsync, so two reads fetch them
 * all (with several writers at their barriers, reading record by record
 * cost four reads per record under the lock).  Windows larger than
 * fx_wal_window are read record by record.
 */
static int conflicts_mem(struct fstx_domain *d, const uint64_t *set, size_t n)
{
	uint64_t a = d->wal_applied, len = d->wal_end - a;
	uint64_t s0 = state_off(a), slen = state_off(d->wal_end - 1) + 16 - s0;
	unsigned char *b, *st;
	int r, fd = side_fd(d);

	if (fd < 0)
		return fd;
	if (d->win_cap < len + slen) {
		if (!(b = fx_realloc(d->win, len + slen)))
			return -ENOMEM;
		d->win = b;
		d->win_cap = len + slen;
	}
	b = d->win;
	st = b + len;
	if ((r = read_all(d->wal, b, len, a)) < 0)
		return r == -ENODATA ? -EUCLEAN : r;
	if ((r = read_upto(fd, st, slen, s0)) < 0)
		return r;
	for (uint64_t off = a; off < d->wal_end;) {
		struct wrec h;
		struct wstate w;
		struct went e;
		uint64_t p, end;

		if (d->wal_end - off < sizeof(h))
			return -EUCLEAN;
		memcpy(&h, b + (off - a), sizeof(h));
		if (h.magic != W_REC_MAGIC || h.salt != d->wal_salt ||
		    h.len > d->wal_end - off - sizeof(h))
			return -EUCLEAN; /* the hint points at no record: damage */
		memcpy(&w, st + (state_off(off) - s0), sizeof(w));
		p = off + sizeof(h);
		end = p + h.len;
		off = rec_next(off, &h);
		if (w.salt == d->wal_salt && !WS_OPEN(w.state))
			continue;
		for (uint32_t k = 0; k < h.nent; k++) {
			if (end - p < sizeof(e))
				return -EUCLEAN;
			memcpy(&e, b + (p - a), sizeof(e));
			if (ent_in(&e, set, n))
				return 1;
			if ((p = ent_next(p, end, &e)) > end)
				return -EUCLEAN;
		}
	}
	return 0;
}

/* Does an open record change an inode of set?  1, 0, -errno (W4). */
static int wal_conflicts(struct fstx_domain *d, const uint64_t *set, size_t n)
{
	if (d->wal_applied >= d->wal_end)
		return 0;
	if (d->wal_end - d->wal_applied > fx_wal_window)
		return conflicts_read(d, set, n);
	return conflicts_mem(d, set, n);
}

/* The inodes the transaction changes or asserts on, into ino[] (W4). */
static void assert_inodes(struct fstx_domain *d, const struct plan *P,
			  uint64_t *ino)
{
	for (size_t i = 0; i < P->nops; i++) {
		uint32_t op = (uint32_t)P->ops[i].op;
		struct stat st;

		if ((op == FSTX_OP_ASSERT_DATA || op == FSTX_OP_ASSERT_XATTR) &&
		    P->pops[i].cpath && fx_lstat(d, P->pops[i].cpath, &st) == 0)
			ino[i] = (uint64_t)st.st_ino;
	}
}

/*
 * Append the record at the log's end under the lock (W3), with its state
 * word implied (PENDING: no word of this salt).  0 appended
 * (its offset in *at), or -errno with nothing appended.
 */
static int append(struct fstx_domain *d, const struct plan *P,
		  const int *tgt, const uint64_t *ino, uint64_t *at, int lazy_rec)
{
	uint64_t end = 0;
	int r;

	*at = d->wal_end;
	if ((r = write_record(d, P, tgt, ino, &end)) < 0 ||
	    (r = grow(d, end)) < 0)
		goto undo;
	uint64_t lazy = d->wal_lazy;

	d->wal_end = end;
	if (lazy_rec)
		d->wal_lazy = end;
	if (!d->nosync)
		d->wal_kept = 1; /* W11 */
	if ((r = hint_write(d)) < 0) {
		d->wal_end = *at;
		d->wal_lazy = lazy;
		goto undo;
	}
	return 0;
undo:
	if (write_all(d->wal, zero_hdr, sizeof(zero_hdr), *at) < 0)
		d->latched = d->latched ? d->latched : -EIO;
	return r;
}

/* Apply the ops in place (W4); ops' results from res.  0 or -errno. */
static long apply_all(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut,
		      const struct plan *P, const int64_t *res, const int *fds,
		      const int *tgt)
{
	struct btrfs_ioctl_usertrans_op *ops = (void *)(intptr_t)ut->ops_ptr;

	for (size_t i = 0; i < P->nops; i++) {
		int64_t got = apply_op(P, i, fds, tgt);

		if (got < 0) {
			ops[i].rval = got;
			ut->ops_completed = i;
			d->failed_op = (long)i;
			d->latched = (int)got;
			return got;
		}
		ops[i].rval = res[i];
	}
	ut->ops_completed = P->nops;
	return 0;
}

/* The results of a transaction a helper applied. */
static void results(struct btrfs_ioctl_usertrans *ut, const struct plan *P,
		    const int64_t *res)
{
	struct btrfs_ioctl_usertrans_op *ops = (void *)(intptr_t)ut->ops_ptr;

	for (size_t i = 0; i < P->nops; i++)
		ops[i].rval = res[i];
	ut->ops_completed = P->nops;
}

/*
 * After the barrier, under the lock again: was the record at `at` (salt
 * `salt`) applied by a helper?  1 yes, 0 no (it is PENDING), -errno.
 */
static int applied_meanwhile(struct fstx_domain *d, uint64_t at, uint64_t salt)
{
	int fresh, r = wal_load(d, &fresh);

	if (r < 0)
		return r;
	if (d->wal_salt != salt)
		return 1; /* checkpointed: every record was applied first (W6) */
	if (!fresh || at < W_START || at >= d->wal_end)
		return -EUCLEAN;
	if (d->wal_busy && (r = wal_help(d)) < 0) /* an applier cut short */
		return r;
	/* a help pass moves APPLIED past every record it applies; only the
	 * record's own writer writes its state word */
	return at < d->wal_applied;
}

static int has_asserts(const struct plan *P)
{
	for (size_t i = 0; i < P->nops; i++)
		if (fx_op_is_assert(P->ops[i].op))
			return 1;
	return 0;
}

/*
 * W10: a lazy record is committed once appended: its results are the
 * predicted ones; a flush makes it durable and applies it when the open
 * records pass fx_lazy_max bytes (or a reader, another kind of
 * transaction, fstx_sync() or the handle's close comes first).
 */
static long lazy_done(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut,
		      const struct plan *P, const int64_t *res)
{
	int r = 0;

	results(ut, P, res);
	d->lazy_wrote = 1;
	if (d->wal_end - d->wal_applied > fx_lazy_max)
		r = wal_help(d);
	if (r >= 0 && d->wal_end - W_START > fx_wal_max)
		r = checkpoint(d, 1);
	if (r < 0 && !d->latched)
		d->latched = r; /* committed: a later call sees the error */
	return 0;
}

long fx_wal_commit(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut,
		   const struct plan *P, const int64_t *res)
{
	size_t n = P->nops ? P->nops : 1;
	int *fds = fx_malloc(2 * n * sizeof(int));
	struct tfds F = { .fd = fds, .flags = fds ? fds + n : NULL,
			  .own = fx_calloc(n, 1) };
	int *slot_op = fx_calloc(ut->num_fds ? ut->num_fds : 1, sizeof(int));
	int *tgt = fx_calloc(n, sizeof(int)); /* pwrite: index of its open */
	uint64_t *ino = fx_calloc(n, sizeof(uint64_t)), at, salt, rec_end;
	int rs = 0;
	long r;
	size_t i;

	r = -ENOMEM;
	if (!fds || !F.own || !slot_op || !tgt || !ino)
		goto out;
	for (i = 0; i < n; i++)
		fds[i] = -1;
	/* Anything unexpected before the commit point: decline (undo way). */
	if (open_targets(d, P, &F, ino, slot_op, tgt) < 0) {
		r = 1;
		goto out;
	}
	if (!d->wal_salt && (r = wal_reset(d, 0)) < 0)
		goto out;
	assert_inodes(d, P, ino);
	/*
	 * W4, W10: open lazy records are flushed before anything but a lazy
	 * transaction without compare ops (which reads nothing, so it may
	 * queue behind them); else a transaction helps only when it shares
	 * an inode with an open record.
	 */
	if (d->lazy && !has_asserts(P))
		r = 0;
	else if (d->wal_lazy > d->wal_applied || (d->lazy && d->wal_applied < d->wal_end))
		r = 1;
	else
		r = wal_conflicts(d, ino, n);
	if (r != 0) {
		if (r > 0 && (r = wal_help(d)) >= 0)
			r = 2; /* the tree moved on: plan again */
		goto out;
	}
	if (d->nosync)
		d->wal_busy = 1; /* W7: applied at once, under the lock */
	if ((r = append(d, P, tgt, ino, &at, d->lazy)) < 0) {
		d->wal_busy = 0;
		goto out;
	}
	salt = d->wal_salt;
	rec_end = d->wal_end;
	if (d->lazy) {
		r = lazy_done(d, ut, P, res);
		goto out;
	}
	if (!d->nosync) {
		/* W3: sync with the lock dropped, so others append meanwhile
		 * (not on tmpfs: there is no device flush to share) */
		int debt = d->wal_loose || d->nosync_undo;
		int share = d->fs.magic != TMPFS_MAGIC && !debt;

		/* W11: and what the last checkpoint left; or this handle's
		 * crash-only transactions of the undo way (trans.c) */
		if (debt)
			rs = fx_os.syncfs(d->root);
		else if (!share)
			rs = fx_os.fdatasync(d->wal);
		else {
			fx_unlock(d);
			rs = group_sync(d, salt, d->wal_end);
			if ((r = fx_lock(d)) < 0) {
				d->latched = (int)r; /* stays PENDING for a helper */
				goto out;
			}
			if ((r = applied_meanwhile(d, at, salt)) != 0) {
				if (r > 0)
					results(ut, P, res);
				r = r > 0 ? 0 : r;
				goto out;
			}
		}
		if (rs < 0) {
			d->latched = rs;
			r = set_state(d, at, WS_CANCELLED);
			r = r < 0 ? r : advance(d);
			r = rs;
			goto out;
		}
	}
	/* Committed (W3).  Apply in place (W4), busy in the hint. */
	if (!d->nosync) {
		d->wal_busy = 1;
		d->wal_loose = 0;
		d->nosync_undo = 0;
		if ((r = hint_write(d)) < 0) {
			d->latched = (int)r; /* still PENDING: a helper applies it */
			goto out;
		}
	}
	if ((r = apply_all(d, ut, P, res, fds, tgt)) < 0)
		goto out; /* busy stays: the next lock holder applies it */
	/* the first open record: APPLIED moves past it, no state word needed */
	int first = at == d->wal_applied, full = d->wal_end - W_START > fx_wal_max;

	if (first)
		d->wal_applied = rec_end;
	else
		r = set_state(d, at, WS_APPLIED);
	d->wal_busy = 0;
	if (first && d->nosync && d->wal_mine && !full)
		d->wal_unsaid = 1; /* W12: the hint still says busy over it */
	else if (r == 0)
		r = advance(d);
	if (r == 0 && full)
		r = checkpoint(d, 1);
	if (r < 0 && !d->latched)
		d->latched = (int)r;
	r = 0; /* committed and applied; a later call sees the latched error */
out:
	if (fds && F.own)
		close_targets(d, &F, ino, n);
	free(fds);
	free(F.own);
	free(slot_op);
	free(tgt);
	free(ino);
	return r;
}
