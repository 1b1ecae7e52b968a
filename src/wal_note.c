/* SPDX-License-Identifier: MIT */
/*
 * wal_note.c - the write-ahead log's notes in DIR/.fstx/walsync: page-cache
 * notes of this boot and mount, never synced (rule W2 of wal.c), so that a
 * record's barrier writes the record's pages only.  The hint (END, APPLIED
 * and the words of W4, W5, W8, W10-W12), the records' state words (W2, W4),
 * and loading the log's state from the hint and the header (W5, W9, W12).
 * The group-commit notes at the head of the file are wal_group.c's.
 * Integers are little-endian (the host's).
 *
 * The file:
 *     0  (S_GROUP) group commit's notes (wal_group.c struct gnote)
 *    64  (S_HINT) the hint, 88 bytes (struct whint):
 *          0 u64 salt of the log it speaks of    8 u64 END
 *         16 u64 APPLIED
 *         24 36 bytes: the boot id, its last 16 characters the mount's
 *            unique id in hex where the kernel gives one (fx_epoch_id())
 *         60 u32 CRC-32C of bytes 0-63, crc 0
 *         64 u32 clean (W8)   68 u32 busy (W4)   72 u64 LAZY (W10)
 *         80 u32 kept (W11)   84 u32 loose (W11)   (64-87: not covered)
 *  4096  (S_STATE) the state words: the record at log offset off has its
 *        word at 4096 + off / 32 * 16 (struct wstate):
 *          0 u32 state (WS_*)   4 u32 0   8 u64 salt of its log
 *        A word of another salt, or none (a hole), says PENDING.
 * The first FX_WALMAP bytes are mapped, so the hint is read without a
 * system call.
 */
#define _GNU_SOURCE
#include "wal_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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

struct wstate {     /* a state word (W2): valid only with the log's salt */
	uint32_t state, pad;
	uint64_t salt;
};

_Static_assert(sizeof(struct whint) == 88, "wal hint");
_Static_assert(S_HINT + sizeof(struct whint) < FX_WALMAP, "the hint is in the mapped page");
_Static_assert(sizeof(struct wstate) == 16, "wal state word");

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
	     fx_w_write_all(d->walsync, &z, 1, FX_WALMAP - 1) < 0))
		return;
	if (fx_os.map_ro(d->walsync, FX_WALMAP, &p) == 0)
		d->walmap = p;
}

/* .fstx/walsync, opened (and made) when first needed. */
int fx_w_side_fd(struct fstx_domain *d)
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

/* Bytes of walsync at off: from the mapping, or read (0 or -errno). */
int fx_w_side_read(struct fstx_domain *d, void *buf, size_t len, uint64_t off)
{
	if (d->walmap && off + len <= FX_WALMAP) {
		memcpy(buf, d->walmap + off, len);
		return 0;
	}
	return fx_w_read_all(d->walsync, buf, len, off);
}

/* Records are at least 32 bytes long: one word per 32 bytes of log. */
static uint64_t state_off(uint64_t rec)
{
	return S_STATE + rec / 32 * 16;
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
 * The epoch the notes are of, in boot: zeros where there is no boot id to
 * read (no /proc, in a chroot): notes of no epoch, which no reader trusts
 * (hint_read()), so that everything is looked at again (W5).  0, -errno.
 */
static int epoch_of(struct fstx_domain *d, char boot[37])
{
	int r = fx_epoch_id(d, boot);

	if (r == -ENOENT)
		memset(boot, 0, 37);
	return r == -ENOENT ? 0 : r;
}

/* The hint from d->wal_end and d->wal_applied (no barrier). */
int fx_w_hint_write(struct fstx_domain *d)
{
	struct whint h;
	char boot[37];
	int r = epoch_of(d, boot), fd = fx_w_side_fd(d);

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
	return fx_w_write_all(fd, &h, sizeof(h), S_HINT);
}

/* An invalid hint, before a checkpoint's new header (W6, W9): a loader
 * trusts a hint's salt without the header. */
int fx_w_hint_drop(struct fstx_domain *d)
{
	static const struct whint z;
	int r = fx_w_side_fd(d);

	return r < 0 ? r : fx_w_write_all(d->walsync, &z, sizeof(z), S_HINT);
}

/* The hint in *h: 1 whole (its CRC holds; a hint being written by a lock
 * holder does not), 0 not whole, -errno (-ENODATA: none yet). */
static int hint_whole(struct fstx_domain *d, struct whint *h)
{
	uint32_t crc;
	int r = fx_w_side_read(d, h, sizeof(*h), S_HINT);

	if (r < 0)
		return r;
	crc = h->crc;
	h->crc = 0;
	return fx_crc32c(0, h, offsetof(struct whint, clean)) == crc;
}

/* 1 a valid hint of this boot in *h, 0 none, -errno. */
static int hint_read(struct fstx_domain *d, struct whint *h)
{
	char boot[37];
	/* under the lock: no hint write is under way */
	int r = hint_whole(d, h), e;

	if (r == -ENODATA)
		return 0;
	if (r < 0)
		return r;
	if ((e = epoch_of(d, boot)) < 0)
		return e;
	return r && boot[0] /* none: no hint is of it */ && h->salt && h->end >= W_START && h->applied >= W_START &&
	       h->applied <= h->end && !memcmp(h->boot, boot, sizeof(h->boot));
}

/*
 * Without the lock (group commit, W3): where a whole hint of the log of
 * this salt says the log ends past *end, that end in *end.
 */
void fx_w_hint_end(struct fstx_domain *d, uint64_t salt, uint64_t *end)
{
	struct whint h;

	if (hint_whole(d, &h) > 0 && h.salt == salt && h.end > *end)
		*end = h.end;
}

/* The salt of the log a whole hint names (read without the lock: the
 * current log, W6), or 0 where the hint is being written or is none. */
uint64_t fx_w_hint_salt(struct fstx_domain *d)
{
	struct whint h;

	return hint_whole(d, &h) > 0 ? h.salt : 0;
}

/*
 * Read header and hint.  Sets d->wal_salt (0: no valid header, the log is
 * empty), and d->wal_end and d->wal_applied from a hint of this boot (W5);
 * *fresh is 0 when there is none (replay everything).  1 (the domain's
 * open made the log, domain.c), -errno; -EUCLEAN for a header of a future
 * version.
 */
int fx_w_load(struct fstx_domain *d, int *fresh)
{
	uint64_t known = d->wal_salt, salt;
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
	if ((fd = fx_w_side_fd(d)) < 0)
		return fd;
	if ((hint = hint_read(d, &h)) < 0)
		return hint;
	if (hint && known && h.salt == known) {
		/* the header this handle read: a new one changes the hint first */
		d->wal_salt = known;
		goto fresh;
	}
	if ((r = fx_w_head_read(d, &salt)) < 0)
		return r;
	if (!salt)
		return 1; /* never completed, or torn: empty */
	d->wal_salt = salt;
	if (!hint || h.salt != salt)
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

/*
 * The state word of the record at off (W2).  A word of another salt (an
 * older log's), or none, is PENDING: a record is open until its word says
 * otherwise, so appending writes no word.
 */
int fx_w_rec_state(struct fstx_domain *d, uint64_t off, uint32_t *state)
{
	struct wstate w;
	int fd = fx_w_side_fd(d), r;

	if (fd < 0)
		return fd;
	r = fx_w_read_all(fd, &w, sizeof(w), state_off(off));
	*state = WS_PENDING;
	if (r == -ENODATA) /* never written: a hole */
		return 0;
	if (r == 0 && w.salt == d->wal_salt)
		*state = w.state;
	return r;
}

int fx_w_set_state(struct fstx_domain *d, uint64_t off, uint32_t state)
{
	struct wstate w = { .state = state, .salt = d->wal_salt };
	int fd = fx_w_side_fd(d);

	return fd < 0 ? fd : fx_w_write_all(fd, &w, sizeof(w), state_off(off));
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

/* Bytes of the state words of the records in [from, to), to > from. */
uint64_t fx_w_states_len(uint64_t from, uint64_t to)
{
	return state_off(to - 1) + 16 - state_off(from);
}

/* Those words in one read, into buf (fx_w_states_len() bytes). */
int fx_w_states_read(struct fstx_domain *d, uint64_t from, uint64_t to,
		     unsigned char *buf)
{
	int fd = fx_w_side_fd(d);

	if (fd < 0)
		return fd;
	return read_upto(fd, buf, (size_t)fx_w_states_len(from, to), state_off(from));
}

/* The state of the record at off from words read from `from` on. */
uint32_t fx_w_state_in(const struct fstx_domain *d, const unsigned char *buf,
		       uint64_t from, uint64_t off)
{
	struct wstate w;

	memcpy(&w, buf + (state_off(off) - state_off(from)), sizeof(w));
	return w.salt == d->wal_salt ? w.state : WS_PENDING;
}
