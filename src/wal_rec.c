/* SPDX-License-Identifier: MIT */
/*
 * wal_rec.c - the write-ahead log's format, DIR/.fstx/wal (rule W2 of
 * wal.c): its header, its records and their entries, the CRC; reading and
 * checking records, parsing their entries, replaying one record (W5) and
 * writing one (W3).  Every other file of the log reaches the bytes of
 * .fstx/wal through here.  Integers are little-endian (the host's).
 *
 * The file:
 *     0  header, 32 bytes (struct wfile):
 *          0 magic "FSTXWAL1"   8 u32 version (1)   12 u32 0
 *         16 u64 salt (never 0) 24 u32 CRC-32C of the 32 bytes, crc 0
 *         28 u32 0
 *    32  zeros
 *  1024  (W_START) the records, end to end, up to the first invalid one;
 *        then zeros, in steps of W_GROW (fx_w_grow())
 *
 * A record, at an 8-byte aligned offset (struct wrec):
 *     0 u32 magic "FXW1"   4 u32 entries   8 u64 payload length
 *    16 u64 salt: the header's, else the record is invalid
 *    24 u32 CRC-32C of the 32 bytes (crc and state 0) and the payload
 *    28 u32 0, or 2 once the record's barrier failed (cancelled, W3;
 *       fx_w_rec_cancel()); not covered by the CRC, so a cancelled record
 *       stays valid and the log goes on past it (in memory: the state
 *       word, which lives in .fstx/walsync, wal_note.c)
 *    32 the payload: the entries, each 8-byte aligned
 *
 * An entry (struct went, 40 bytes, then its names and data):
 *     0 u32 kind: 1 pwrite, 2 truncate, 3 setxattr, 4 mkdir, 5 new file,
 *       6 remove, 7 new symlink, 8 clone from a staged file (W13),
 *       9 removexattr, 10 rename of an object of the tree (W15), 11 a
 *       new name (hard link) of an object of the tree (W16), 12 an
 *       exchange of two names in one directory (W21)
 *     4 u32 path length     8 u64 inode number the file must have (mkdir:
 *       its staged directory's, 0 for one made in place; W24)
 *    16 u64 a: pwrite offset, truncate size, setxattr 0, mode (4, 5), 0 (6, 7),
 *       the offset in the file and in the staged file (8), 0 (9, 11),
 *       0 or S_IFDIR (0x4000: a directory, W20) (10), the inode that
 *       ends at the path (12; the entry's inode ends at the name)
 *    24 u64 b: pwrite length, truncate 0, setxattr value length, 0 (4-6),
 *       the target's length (7: 1 to PATH_MAX - 1), 16 (8), 0 (9-11)
 *    32 u32 name length: the xattr name (setxattr, removexattr), the staged object
 *       (new file, new symlink: .fstx/wnew/NAME, or .fstx/wnew/DIR/NAME in
 *       a staged directory; a staged new directory: .fstx/wnew/NAME; the
 *       staged data of a clone: .fstx/wnew/NAME) or where the removed
 *       object waits for the checkpoint (remove): .fstx/wnew/NAME; the
 *       canonical path a rename moves the object from (10), or a link
 *       gives it a new name after (11), or an exchange swaps with (12); else 0
 *       (at most W_NAME_MAX)                                   36 u32 0
 *    40 the canonical path (no NUL), the name (no NUL), b bytes of data
 *       (none for a truncate; a new symlink's target, no NUL; a clone's
 *       u64 length, 1 to FX_WAL_MAX_OFF - a, and u64 inode number of the
 *       staged file), zeros to the next multiple of 8
 *
 * Name entries come first in a record: removals (at the paths their
 * objects had when the transaction began, deepest first: W24), then new directories,
 * then renames and links of objects of the tree (W15, W16, together in
 * step order), then new files, then new
 * symlinks (each at the name the transaction leaves it at), each kind in
 * the order of the transaction's steps; its
 * other entries follow, in op order.  A new file's entries name it by its final path and the
 * inode of its staged file (fx_w_name_apply(): what replay does when
 * that inode is gone).
 */
#define _GNU_SOURCE
#include "wal_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <stdio.h> /* RENAME_EXCHANGE */
#include <sys/stat.h>

#define W_FILE_MAGIC "FSTXWAL1"
#define W_VERSION 1
#define W_BUF (64u << 10)
#define W_GROW (1u << 20)

struct wfile {
	char magic[8];
	uint32_t version, rsv;
	uint64_t salt;
	uint32_t crc, pad;
};

_Static_assert(sizeof(struct wfile) == 32, "wal header");

int fx_w_write_all(int fd, const void *buf, size_t len, uint64_t off)
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

int fx_w_read_all(int fd, void *buf, size_t len, uint64_t off)
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

/* The first W_START bytes of a new, empty log (W6), in b. */
int fx_w_head_new(uint64_t old, unsigned char b[W_START], uint64_t *salt)
{
	struct wfile f = { .magic = W_FILE_MAGIC, .version = W_VERSION };

	do {
		if (getrandom(&f.salt, sizeof(f.salt), 0) != sizeof(f.salt))
			return -EIO;
	} while (!f.salt || f.salt == old);
	f.crc = fx_crc32c(0, &f, sizeof(f));
	memset(b, 0, W_START);
	memcpy(b, &f, sizeof(f));
	*salt = f.salt;
	return 0;
}

/*
 * The header's salt in *salt; 0 there when no header is valid (the log is
 * empty).  0, -errno; -EUCLEAN for a header of a future version.
 */
int fx_w_head_read(struct fstx_domain *d, uint64_t *salt)
{
	struct wfile f;
	uint32_t crc;
	int r = fx_w_read_all(d->wal, &f, sizeof(f), 0);

	*salt = 0;
	if (r == -ENODATA)
		return 0; /* never completed: no record can be committed */
	if (r < 0)
		return r;
	crc = f.crc;
	f.crc = 0;
	if (memcmp(f.magic, W_FILE_MAGIC, 8) || fx_crc32c(0, &f, sizeof(f)) != crc ||
	    !f.salt)
		return 0; /* torn by power loss during a checkpoint: empty */
	if (f.version != W_VERSION)
		return -EUCLEAN;
	*salt = f.salt;
	return 0;
}

/* Is there a valid record at off?  1 (header in *h), 0 no, -errno. */
int fx_w_rec_check(struct fstx_domain *d, uint64_t off, uint64_t size,
		   struct wrec *h, unsigned char *buf)
{
	uint64_t p, end;
	uint32_t crc;
	struct wrec z;
	int r;

	if (off + sizeof(*h) > size)
		return 0;
	if ((r = fx_w_read_all(d->wal, h, sizeof(*h), off)) < 0)
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

		if ((r = fx_w_read_all(d->wal, buf, n, p)) < 0)
			return r == -ENODATA ? 0 : r;
		crc = fx_crc32c(crc, buf, n);
		p += n;
	}
	return crc == h->crc;
}

/*
 * The record's header at off (no CRC check) with its state word; 0, or
 * -EUCLEAN where the hint says a record is and none is.
 */
int fx_w_rec_head(struct fstx_domain *d, uint64_t off, struct wrec *h)
{
	int r = fx_w_read_all(d->wal, h, sizeof(*h), off);

	if (r == -ENODATA || (!r && (h->magic != W_REC_MAGIC || h->salt != d->wal_salt)))
		return -EUCLEAN; /* the hint points at no record: damage */
	return r < 0 ? r : fx_w_rec_state_of(d, off, h);
}

/* h->state: cancelled in the log (W3), else its word in .fstx/walsync. */
int fx_w_rec_state_of(struct fstx_domain *d, uint64_t off, struct wrec *h)
{
	if (h->state == WS_CANCELLED)
		return 0;
	return fx_w_rec_state(d, off, &h->state);
}

/*
 * W3: the record at off, whose barrier failed, cancelled in the log
 * itself: WS_CANCELLED in its header's state field, which its CRC does
 * not cover; the caller's barrier (wal.c cancel(): fx_w_mend()) makes
 * it durable, and replay after another boot then skips it where it would
 * otherwise apply a transaction that returned an error.  0 or -errno.
 */
int fx_w_rec_cancel(struct fstx_domain *d, uint64_t off)
{
	uint32_t s = WS_CANCELLED;

	return fx_w_write_all(d->wal, &s, sizeof(s), off + offsetof(struct wrec, state));
}

/*
 * W3: the log's bytes [lo, hi) written again as the page cache holds them,
 * so that the next barrier writes the pages a failed one may have left
 * clean but not on the disk (wal_group.c fx_w_mend(), under the domain
 * lock: nothing else writes below the log's end meanwhile).  0 or -errno.
 */
int fx_w_rec_rewrite(struct fstx_domain *d, uint64_t lo, uint64_t hi)
{
	size_t cap = hi - lo > W_REWRITE ? W_REWRITE : (size_t)(hi - lo);
	unsigned char *buf = fx_malloc(cap);
	int r = 0;

	if (!buf)
		return -ENOMEM;
	while (lo < hi && r == 0) {
		size_t n = hi - lo > cap ? cap : (size_t)(hi - lo);

		if ((r = fx_w_read_all(d->wal, buf, n, lo)) == 0)
			r = fx_w_write_all(d->wal, buf, n, lo);
		lo += n;
	}
	free(buf);
	return r == -ENODATA ? -EIO : r;
}

/* The entry's file, opened (writable where it can be) and checked. */
int fx_w_entry_fd(struct fstx_domain *d, const char *path, uint64_t ino)
{
	struct stat st;
	int fd = fx_open_owned(d, path, O_RDWR), r;

	if (fd == -EISDIR)
		fd = fx_open(d, path, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	r = fx_os.fstat(fd, &st);
	if (r == 0 && (uint64_t)st.st_ino != fx_w_ino(d, ino))
		r = -ESTALE;
	if (r < 0) {
		fx_os.close(fd);
		return r;
	}
	return fd;
}

/* ---- new names (W5) ---------------------------------------------------- */

uint64_t fx_w_ino(const struct fstx_domain *d, uint64_t ino)
{
	for (size_t i = 0; i < d->wal_nremap; i++)
		if (d->wal_remap[i].from == ino)
			return d->wal_remap[i].to;
	return ino;
}

void fx_w_remap_clear(struct fstx_domain *d)
{
	free(d->wal_remap);
	d->wal_remap = NULL;
	d->wal_nremap = 0;
}

/* Append (from, to) to the array *a of *n pairs (d->wal_remap, wal_gone). */
static int pair_add(struct fx_remap **a, size_t *n, uint64_t from, uint64_t to)
{
	struct fx_remap *m = fx_realloc(*a, (*n + 1) * sizeof(*m));

	if (!m)
		return -ENOMEM;
	*a = m;
	m[(*n)++] = (struct fx_remap){ .from = from, .to = to };
	return 0;
}

int fx_w_gone_later(const struct fstx_domain *d, uint64_t ino, uint64_t off)
{
	for (size_t i = 0; i < d->wal_ngone; i++)
		if (d->wal_gone[i].from == ino && d->wal_gone[i].to > off)
			return 1;
	return 0;
}

/*
 * The entry headers of the valid records in [from, to), with states not
 * those of cancelled records, each given to fn(arg, record's offset,
 * entry) until one returns non-zero.  That value, else 0; -EUCLEAN where
 * a record or entry does not parse.
 */
int fx_w_each_entry(struct fstx_domain *d, uint64_t from, uint64_t to, int states,
		    int (*fn)(void *arg, uint64_t off, const struct went *e), void *arg)
{
	struct wrec h;
	int r = 0;

	for (uint64_t off = from; off < to && r == 0; off = rec_next(off, &h)) {
		uint64_t p = off + sizeof(h), end;

		if ((r = fx_w_read_all(d->wal, &h, sizeof(h), off)) < 0)
			return r == -ENODATA ? -EUCLEAN : r;
		if (h.magic != W_REC_MAGIC || h.salt != d->wal_salt)
			return -EUCLEAN;
		if (states && (r = fx_w_rec_state_of(d, off, &h)) < 0)
			return r;
		if (h.state == WS_CANCELLED) /* in the log, or its word */
			continue;
		end = p + h.len;
		for (uint32_t k = 0; k < h.nent && r == 0; k++) {
			struct went e;

			if (end - p < sizeof(e))
				return -EUCLEAN;
			if ((r = fx_w_read_all(d->wal, &e, sizeof(e), p)) < 0)
				return r == -ENODATA ? -EUCLEAN : r; /* EIO is not damage */
			r = fn(arg, off, &e);
			if ((p = fx_w_ent_next(p, end, &e)) > end)
				return -EUCLEAN;
		}
	}
	return r;
}

static int gone_add(void *arg, uint64_t off, const struct went *e)
{
	struct fstx_domain *d = arg;

	return e->kind == W_UNLINK ? pair_add(&d->wal_gone, &d->wal_ngone, e->ino, off) : 0;
}

/* The entry headers of the valid records from `from` on (up to `to`):
 * their removals, into d->wal_gone. */
int fx_w_gone_scan(struct fstx_domain *d, uint64_t from, uint64_t to, int states)
{
	d->wal_ngone = 0;
	return fx_w_each_entry(d, from, to, states, gone_add, d);
}

static int remap(struct fstx_domain *d, uint64_t from, uint64_t to)
{
	if (fx_w_ino(d, from) == to)
		return 0;
	for (size_t i = 0; i < d->wal_nremap; i++)
		if (d->wal_remap[i].from == from) {
			d->wal_remap[i].to = to;
			return 0;
		}
	return pair_add(&d->wal_remap, &d->wal_nremap, from, to);
}

static int link_at(struct fstx_domain *d, const char *src, const char *dst)
{
	const char *sn, *dn;
	int sfd = fx_parent(d, src, &sn), dfd, r;

	if (sfd < 0)
		return sfd;
	if ((dfd = fx_parent(d, dst, &dn)) < 0) {
		fx_os.close(sfd);
		return dfd;
	}
	r = fx_os.linkat(sfd, sn, dfd, dn, 0);
	fx_os.close(sfd);
	fx_os.close(dfd);
	return r;
}

static int mkdir_at(struct fstx_domain *d, const char *path, uint32_t mode)
{
	const char *n;
	int dfd = fx_parent(d, path, &n), r;

	if (dfd < 0)
		return dfd;
	r = fx_os.mkdirat(dfd, n, mode);
	fx_os.close(dfd);
	return r;
}

/*
 * A new file's staged file is gone (power loss took its name before it
 * was durable): make it again, empty; the record's other entries give it
 * its data.  Its inode number is another: the staged name keeps a link
 * to it (no rename) while the log holds the record, so that a replay
 * after this one knows the file at the new name for the record's own.
 */
static int restage(struct fstx_domain *d, const char *stage, uint64_t ino,
		   uint32_t mode, const char *target, const char *path)
{
	struct stat st;
	const char *slash = strchr(stage + sizeof(W_WNEW) - 1, '/');
	int fd, r;

	if (slash) { /* in a staged directory that power loss took (W2) */
		char dir[W_NAME_MAX + 1];

		memcpy(dir, stage, (size_t)(slash - stage));
		dir[slash - stage] = 0;
		if ((r = mkdir_at(d, dir, 0700)) < 0 && r != -EEXIST)
			return r;
	}
	if (target) { /* a symlink: the record holds its target */
		const char *n;
		int dfd = fx_parent(d, stage, &n);

		if (dfd < 0)
			return dfd;
		r = fx_os.symlinkat(target, dfd, n);
		fx_os.close(dfd);
		r = r < 0 ? r : fx_lstat(d, stage, &st);
	} else {
		fd = fx_open(d, stage, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
		if (fd < 0)
			return fd;
		r = fx_os.fstat(fd, &st);
		fx_os.close(fd);
	}
	if (r == 0)
		r = remap(d, ino, (uint64_t)st.st_ino);
	return r < 0 ? r : link_at(d, stage, path);
}

/* What a name entry finds at path: -ENOENT too where a component of it
 * is no longer a directory (a later entry made a file or symlink at the
 * name of a directory removed: ENOTDIR, or ELOOP, since no path of the
 * domain follows a symlink), so nothing of this entry's is there. */
static int name_stat(struct fstx_domain *d, const char *path, struct stat *st)
{
	int r = fx_lstat(d, path, st);

	return w_gone(r) ? -ENOENT : r;
}

/*
 * W15: object ino moves from src to path.  Done when path holds it (a
 * second name left at src by a rename half persisted, btrfs, goes); else
 * moved when src holds it; else done when a later record removes it (it
 * waits in .fstx/wnew/, W5).  Another object at path is -ESTALE, as is the
 * object at neither name (no record before this one names it, W15).
 * rd: lstat(path)'s result, in *st.
 */
static int move_apply(struct fstx_domain *d, const char *path, const char *src,
		      uint64_t ino, uint64_t off, int rd, const struct stat *st)
{
	struct stat sst;
	int rs = name_stat(d, src, &sst);

	if (rs < 0 && rs != -ENOENT)
		return rs;
	if (rd < 0 && rd != -ENOENT)
		return rd;
	if (rd == 0 && (uint64_t)st->st_ino == ino)
		return rs == 0 && (uint64_t)sst.st_ino == ino ? fx_remove(d, src, 0, NULL) : 0;
	if (rs == 0 && (uint64_t)sst.st_ino == ino)
		return rd == 0 ? -ESTALE : fx_move(d, src, path, NULL);
	return fx_w_gone_later(d, ino, off) ? 0 : -ESTALE;
}

/*
 * W21: objects ino (at path before) and ino2 (at other before) exchange
 * their names (in one directory, or two for files).  Exchanged when path holds ino and other
 * ino2; else done when each name holds the object it gets, or that object
 * is gone (a later record removes it, and may have put another there);
 * else -ESTALE.  rd: lstat(path)'s result, in *st.
 */
static int swap_apply(struct fstx_domain *d, const char *path, const char *other,
		      uint64_t ino, uint64_t ino2, uint64_t off, int rd, const struct stat *st)
{
	struct stat ost;
	int ro = name_stat(d, other, &ost), pdir, odir, r;
	const char *pn, *on;

	if (rd < 0 && rd != -ENOENT)
		return rd;
	if (ro < 0 && ro != -ENOENT)
		return ro;
	if (rd || ro || (uint64_t)st->st_ino != ino || (uint64_t)ost.st_ino != ino2) {
		/* done: each name holds its object, or the object is gone */
		if (((rd == 0 && (uint64_t)st->st_ino == ino2) || fx_w_gone_later(d, ino2, off)) &&
		    ((ro == 0 && (uint64_t)ost.st_ino == ino) || fx_w_gone_later(d, ino, off)))
			return 0;
		return -ESTALE;
	}
	if ((pdir = fx_parent(d, path, &pn)) < 0)
		return pdir;
	if ((odir = fx_parent(d, other, &on)) < 0) {
		fx_os.close(pdir);
		return odir;
	}
	r = fx_os.renameat2(pdir, pn, odir, on, RENAME_EXCHANGE);
	fx_os.close(pdir);
	fx_os.close(odir);
	return r;
}

/*
 * W16: a second name, path, for object ino, first named src.  Done when
 * path holds it; else linked when src holds it; anything else is -ESTALE
 * (no later record removes a name of it, W17).  A new file that replay
 * made again (its staged name and first name lost, fx_w_name_apply()) may
 * have kept this name, the record's own, on its lost inode: that name is
 * linked again to the file made.  rd: lstat(path)'s result, in *st.
 */
static int link_apply(struct fstx_domain *d, const char *path, const char *src,
		      uint64_t ino, int rd, const struct stat *st)
{
	uint64_t now = fx_w_ino(d, ino);
	struct stat sst;
	int rs;

	if (rd < 0 && rd != -ENOENT)
		return rd;
	if (rd == 0 && (uint64_t)st->st_ino == now)
		return 0;
	if (rd == 0 && (now == ino || (uint64_t)st->st_ino != ino))
		return -ESTALE;
	if (rd == 0 && (rs = fx_remove(d, path, 0, NULL)) < 0)
		return rs;
	if ((rs = name_stat(d, src, &sst)) < 0)
		return rs == -ENOENT ? -ESTALE : rs;
	return (uint64_t)sst.st_ino == now ? link_at(d, src, path) : -ESTALE;
}

/*
 * Make the new name of a name entry hold its object, whatever part of the
 * record is already done or durable (W5).  A directory is known by its
 * name and kind: the log makes directories only at names that no object
 * held when it was planned, and replay runs the records in order (a
 * directory one of them renames, W20, is the first record's).  A new file is known by
 * its inode: the staged file's, or the one its staged name links to.
 */
int fx_w_name_apply(struct fstx_domain *d, uint32_t kind, const char *path,
		    const char *stage, uint64_t ino, uint64_t a,
		    const char *target, uint64_t off)
{
	uint32_t mode = (uint32_t)a;
	struct stat st, sst;
	int r = name_stat(d, path, &st), rs;

	if (kind == W_MOVE)
		return move_apply(d, path, stage, ino, off, r < 0 ? r : 0, &st);
	if (kind == W_SWAP)
		return swap_apply(d, path, stage, ino, a, off, r < 0 ? r : 0, &st);
	if (kind == W_LINK)
		return link_apply(d, path, stage, ino, r < 0 ? r : 0, &st);

	if (kind == W_UNLINK) {
		/* done, or the name went on to another object (a later
		 * record's; the removed inode lives in .fstx/wnew/ until the
		 * checkpoint, so its number names no other object) */
		if (r < 0)
			return r == -ENOENT ? 0 : r;
		if ((uint64_t)st.st_ino != fx_w_ino(d, ino))
			return 0;
		if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) /* another name keeps it (W17) */
			return fx_remove(d, path, 0, NULL);
		r = fx_move(d, path, stage, NULL);
		return r == -EEXIST ? fx_remove(d, path, S_ISDIR(st.st_mode), NULL) : r;
	}
	if (kind == W_MKDIR) {
		if (r == 0)
			return S_ISDIR(st.st_mode) ? 0 : -ESTALE;
		if (r != -ENOENT)
			return r;
		/* staged (W2): its rename, if power loss left it undone */
		if (*stage && (rs = fx_lstat(d, stage, &sst)) != -ENOENT)
			return rs < 0 ? rs : !S_ISDIR(sst.st_mode) ? -EUCLEAN :
			       fx_move(d, stage, path, NULL);
		if ((r = mkdir_at(d, path, mode)) < 0 || !ino)
			return r;
		/* made again: later records know it by the staged one's
		 * inode (W24), this one now */
		return (r = fx_lstat(d, path, &st)) < 0 ? r : remap(d, ino, (uint64_t)st.st_ino);
	}
	if (r < 0 && r != -ENOENT)
		return r;
	rs = fx_lstat(d, stage, &sst);
	if (rs < 0 && rs != -ENOENT)
		return rs;
	if (rs == 0 && (kind == W_SYMLINK ? !S_ISLNK(sst.st_mode) : !S_ISREG(sst.st_mode)))
		return -EUCLEAN;
	if (r == 0) {
		if ((uint64_t)st.st_ino == fx_w_ino(d, ino))
			return 0;
		if (rs == 0 && sst.st_ino == st.st_ino) /* made again before */
			return remap(d, ino, (uint64_t)st.st_ino);
		return -ESTALE; /* another object took the name */
	}
	if (rs == -ENOENT)
		return restage(d, stage, ino, mode, kind == W_SYMLINK ? target : NULL, path);
	if ((uint64_t)sst.st_ino == ino)
		return fx_move(d, stage, path, NULL);
	if ((r = remap(d, ino, (uint64_t)sst.st_ino)) < 0)
		return r;
	return link_at(d, stage, path);
}

/* A path the log may name: relative, no NUL, not into .fstx/. */
static int path_ok(const char *p, uint32_t len);
static int path_ok(const char *p, uint32_t len)
{
	if (!len || len >= PATH_MAX || memchr(p, 0, len) || p[0] == '/')
		return 0;
	return !(len >= 5 && !memcmp(p, FX_META, 5) && (len == 5 || p[5] == '/'));
}

/* One component of a path: not empty, ".", "..", nor holding '/'. */
static int component_ok(const char *c, size_t len)
{
	return len && !memchr(c, '/', len) && !(len == 1 && c[0] == '.') &&
	       !(len == 2 && c[0] == '.' && c[1] == '.');
}

/* A name entry's staged object: W_WNEW and one more component (W_UNLINK,
 * a staged directory of W_MKDIR, else none), or two (a W_NEWF or W_SYMLINK
 * made in a staged directory, W2). */
static int stage_ok(uint32_t kind, const char *name, uint32_t len)
{
	size_t w = sizeof(W_WNEW) - 1;
	const char *c = name + w, *slash;

	if (kind == W_MKDIR && len == 0)
		return 1;
	if (len <= w || memcmp(name, W_WNEW, w))
		return 0;
	slash = memchr(c, '/', len - w);
	if (!slash || kind == W_MKDIR || kind == W_UNLINK || kind == W_CLONE)
		return component_ok(c, len - w);
	return component_ok(c, (size_t)(slash - c)) &&
	       component_ok(slash + 1, len - w - (size_t)(slash - c) - 1);
}

static int copy_in(struct fstx_domain *d, int fd, uint64_t src, uint64_t len,
		   uint64_t dst, unsigned char *buf)
{
	while (len) {
		size_t n = len > W_CHUNK ? W_CHUNK : (size_t)len;
		int r = fx_w_read_all(d->wal, buf, n, src);

		if (r == 0)
			r = fx_w_write_all(fd, buf, n, dst);
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
	if (e->kind == W_SYMLINK) /* b: its target's length */
		return !e->b || e->b >= PATH_MAX || room < e->b || e->a ||
		       !stage_ok(e->kind, name, e->nlen) ? -EUCLEAN : 0;
	if (e->kind == W_SWAP) /* name: the other path; a: the other inode */
		return e->b || !e->a || !e->ino || !path_ok(name, e->nlen) ? -EUCLEAN : 0;
	if (W_FROM_TREE(e->kind)) /* name: the path it moves from, or links;
				   * a: S_IFDIR for a directory's rename */
		return e->b || (e->a && (e->kind != W_MOVE || e->a != S_IFDIR)) ||
		       !path_ok(name, e->nlen) ? -EUCLEAN : 0;
	if (W_IS_NAME(e->kind))
		return e->b || e->a > 07777 || !stage_ok(e->kind, name, e->nlen) ?
		       -EUCLEAN : 0;
	if (e->kind == W_CLONE) /* its length: fx_w_clone_in() */
		return e->b != W_CLONE_SPEC || room < e->b || e->a > FX_WAL_MAX_OFF ||
		       !stage_ok(e->kind, name, e->nlen) ? -EUCLEAN : 0;
	if (e->kind == W_RMX) /* the xattr's name only */
		return e->a || e->b || !e->nlen ? -EUCLEAN : 0;
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
int fx_w_entry_mem(const unsigned char *pl, uint64_t len, uint64_t *p,
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

/* The entry after e at p, or UINT64_MAX where e does not fit before end
 * (the caller has checked that its header does). */
uint64_t fx_w_ent_next(uint64_t p, uint64_t end, const struct went *e)
{
	uint64_t room = end - p - sizeof(*e), data = e->kind == W_TRUNC ? 0 : e->b;

	if (e->plen > room || e->nlen > room - e->plen ||
	    data > room - e->plen - e->nlen)
		return UINT64_MAX;
	return pad8(p + sizeof(*e) + e->plen + e->nlen + data);
}

/* The file of entry e, kept open while entries name the same path. */
static int visit_fd(struct fstx_domain *d, const struct went *e,
		    const char *path, struct wvisit *v)
{
	if (v->fd >= 0 && !strcmp(v->cur, path))
		return v->fd;
	if (v->fd >= 0)
		fx_os.close(v->fd);
	v->cur[0] = 0;
	if ((v->fd = fx_w_entry_fd(d, path, e->ino)) < 0)
		return v->fd;
	memcpy(v->cur, path, e->plen + 1);
	return v->fd;
}

/* Read n bytes of the log at `at`: 0, -EUCLEAN short of them (damage),
 * else the read's error (EIO is not damage). */
static int rd_log(struct fstx_domain *d, void *b, size_t n, uint64_t at)
{
	int r = fx_w_read_all(d->wal, b, n, at);

	return r == -ENODATA ? -EUCLEAN : r;
}

/* Call v->fn for each entry of the valid record at off, read from the
 * log (any size); stops at the first error, -EUCLEAN for a bad entry. */
int fx_w_rec_walk(struct fstx_domain *d, uint64_t off, const struct wrec *h,
		  struct wvisit *v)
{
	char path[PATH_MAX], name[W_NAME_MAX + 1];
	uint64_t p = off + sizeof(*h), end = p + h->len;
	int r = 0;

	v->fd = -1;
	v->off = off;
	for (uint32_t k = 0; k < h->nent && r == 0; k++) {
		struct went e;
		uint64_t data;

		r = -EUCLEAN;
		if (end - p < sizeof(e) || (r = rd_log(d, &e, sizeof(e), p)) < 0)
			break;
		r = -EUCLEAN;
		p += sizeof(e);
		if (e.plen >= PATH_MAX || e.nlen > W_NAME_MAX ||
		    end - p < (uint64_t)e.plen + e.nlen)
			break;
		if ((r = rd_log(d, path, e.plen, p)) < 0 ||
		    (r = rd_log(d, name, e.nlen, p + e.plen)) < 0)
			break;
		r = -EUCLEAN;
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

/* Remove xattr name of fd: done when it is gone already (W5). */
int fx_w_rmx(int fd, const char *name)
{
	int r = fx_os.fremovexattr(fd, name);

	return r == -ENODATA ? 0 : r;
}

/*
 * W13: the staged file's range [a, a + length) into fd at a, cloned or
 * copied.  The staged file was durable before the record, and stays until
 * the checkpoint: one missing, of another inode or too short is -EUCLEAN.
 */
int fx_w_clone_in(struct fstx_domain *d, int fd, const struct went *e,
		  const char *name, const unsigned char *data)
{
	uint64_t spec[2];
	struct stat st;
	int sfd, r;

	memcpy(spec, data, sizeof(spec));
	if (!spec[0] || spec[0] > FX_WAL_MAX_OFF - e->a)
		return -EUCLEAN;
	if ((sfd = fx_open(d, name, O_RDONLY | O_NOFOLLOW, 0)) < 0)
		return sfd == -ENOENT ? -EUCLEAN : sfd;
	if ((r = fx_os.fstat(sfd, &st)) == 0 &&
	    ((uint64_t)st.st_ino != spec[1] || !S_ISREG(st.st_mode) ||
	     (uint64_t)st.st_size < e->a + spec[0]))
		r = -EUCLEAN;
	if (r == 0)
		r = (int)fx_clone_copy(fd, sfd, e->a, spec[0], e->a);
	fx_os.close(sfd);
	return r;
}

static int replay_entry(struct fstx_domain *d, const struct went *e,
			const char *path, const char *name, uint64_t data,
			struct wvisit *v)
{
	int fd, r;

	if (w_moot_if_gone(e->kind, e->ino) && fx_w_gone_later(d, e->ino, v->off))
		return 0; /* a later record removes it: its state is moot (a
			   * directory too, known by its staged inode: W24) */
	if (e->kind == W_SYMLINK) {
		char t[PATH_MAX];

		if ((r = fx_w_read_all(d->wal, t, (size_t)e->b, data)) < 0)
			return r == -ENODATA ? -EUCLEAN : r;
		if (memchr(t, 0, (size_t)e->b))
			return -EUCLEAN;
		t[e->b] = 0;
		return fx_w_name_apply(d, e->kind, path, name, e->ino, 0, t, v->off);
	}
	if (W_IS_NAME(e->kind))
		return fx_w_name_apply(d, e->kind, path, name, e->ino, e->a, NULL, v->off);
	if ((fd = visit_fd(d, e, path, v)) < 0)
		return fd;
	switch (e->kind) {
	case W_PWRITE:
		return copy_in(d, fd, data, e->b, e->a, v->buf);
	case W_CLONE:
		if ((r = fx_w_read_all(d->wal, v->buf, W_CLONE_SPEC, data)) < 0)
			return r == -ENODATA ? -EUCLEAN : r;
		return fx_w_clone_in(d, fd, e, name, v->buf);
	case W_TRUNC:
		return fx_os.ftruncate(fd, (off_t)e->a);
	case W_RMX:
		return fx_w_rmx(fd, name);
	default:
		r = fx_w_read_all(d->wal, v->buf, (size_t)e->b, data);
		return r < 0 ? r : fx_os.fsetxattr(fd, name, v->buf, (size_t)e->b, 0);
	}
}

/* Apply one valid record again (W5), reading it from the log. */
int fx_w_rec_replay(struct fstx_domain *d, uint64_t off, const struct wrec *h,
		    unsigned char *buf)
{
	struct wvisit v = { .fn = replay_entry, .buf = buf };

	if (h->state == WS_CANCELLED) /* in the log (W3) */
		return 0;
	return fx_w_rec_walk(d, off, h, &v);
}

/* ---- writing a record (W3) --------------------------------------------- */

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
		w->err = fx_w_write_all(w->fd, w->buf, w->used, w->off);
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
			w->err = fx_w_write_all(w->fd, p, n, w->off);
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
		    const uint64_t *ino, const char *const *fpath,
		    const struct wclone *cl, struct went *e, const char **path,
		    const char **name, const void **data)
{
	const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];

	memset(e, 0, sizeof(*e));
	*name = NULL;
	if ((cl && cl[i].whole) || fx_pop_dead(P, i) || fpath[i] == fx_w_nowhere)
		return 0; /* W22: made whole before the record; or predicted
			   * to fail: nothing runs */
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
		if (cl && cl[i].fd >= 0) { /* staged (W13) */
			e->kind = W_CLONE;
			e->b = W_CLONE_SPEC;
			*data = cl[i].spec;
			*name = cl[i].name;
		}
		break;
	case BTRFS_IOC_UT_OP_CLONERANGE: /* always staged (W19) */
		if (cl && (cl[i].fd < 0 || !cl[i].spec[0]))
			return 0; /* nothing in the source's range */
		*path = P->pops[tgt[i]].cpath;
		e->ino = ino[tgt[i]];
		e->kind = W_CLONE;
		e->a = (uint64_t)op->args[4];
		e->b = W_CLONE_SPEC;
		*data = cl ? cl[i].spec : NULL;
		*name = cl ? cl[i].name : "";
		break;
	case BTRFS_IOC_UT_OP_TRUNCATE:
		*path = P->pops[i].cpath;
		e->ino = ino[i];
		e->kind = W_TRUNC;
		e->a = (uint64_t)op->args[1];
		*data = NULL;
		break;
	case BTRFS_IOC_UT_OP_REMOVEXATTR:
		*path = P->pops[i].cpath;
		e->ino = ino[i];
		e->kind = W_RMX;
		*name = ARGP(op, 1);
		*data = NULL;
		break;
	case BTRFS_IOC_UT_OP_SETXATTR:
		*path = P->pops[i].cpath;
		e->ino = ino[i];
		e->kind = W_SETX;
		*name = ARGP(op, 1);
		e->b = (uint64_t)op->args[3];
		*data = ARGP(op, 2);
		break;
	default:
		return 0;
	}
	if (fpath[i]) /* a new file: named as it is when the record is done */
		*path = fpath[i];
	e->plen = (uint32_t)strlen(*path);
	e->nlen = *name ? (uint32_t)strlen(*name) : 0;
	return 1;
}

static uint64_t entry_size(const struct went *e)
{
	return pad8(sizeof(*e) + e->plen + e->nlen + e->b);
}

/*
 * Write the record at d->wal_end (W2, W3); its end in *end.  A record that
 * fits the buffer goes in one write, its header first in it.
 */
size_t fx_w_rec_entries(const struct plan *P, const int *tgt, const uint64_t *ino,
			const char *const *fpath, size_t nnm)
{
	const char *path, *name;
	const void *data;
	struct went e;
	size_t n = nnm;

	for (size_t i = 0; i < P->nops; i++)
		n += entry_of(P, i, tgt, ino, fpath, NULL, &e, &path, &name, &data) != 0;
	return n;
}

/* The entry of name entry nm. */
static void name_entry(const struct wname *nm, struct went *e)
{
	*e = (struct went){ .kind = nm->kind, .plen = (uint32_t)strlen(nm->path),
			    .ino = nm->ino,
			    .a = nm->kind == W_SWAP ? nm->ino2 :
				 nm->kind == W_UNLINK || nm->kind == W_SYMLINK ? 0 : nm->mode,
			    .b = nm->kind == W_SYMLINK ? strlen(nm->target) : 0,
			    .nlen = (uint32_t)strlen(nm->stage) };
}

int fx_w_write_record(struct fstx_domain *d, const struct plan *P,
		      const int *tgt, const uint64_t *ino, const char *const *fpath,
		      const struct wname *nm, size_t nnm,
		      const struct wclone *cl, uint64_t *end)
{
	struct wrec h = { .magic = W_REC_MAGIC, .salt = d->wal_salt };
	struct wbuf w = { .fd = d->wal, .off = d->wal_end };
	struct went e;
	const char *path, *name;
	const void *data;
	int r, one;

	for (size_t k = 0; k < nnm; k++) {
		name_entry(&nm[k], &e);
		h.nent++;
		h.len += entry_size(&e);
	}
	for (size_t i = 0; i < P->nops; i++)
		if (entry_of(P, i, tgt, ino, fpath, cl, &e, &path, &name, &data)) {
			h.nent++;
			h.len += entry_size(&e);
		}
	w.crc = fx_crc32c(0, &h, sizeof(h));
	if (!d->wbuf && !(d->wbuf = fx_malloc(W_BUF)))
		return -ENOMEM;
	w.buf = d->wbuf;
	memset(w.buf, 0, sizeof(h)); /* the header's place; not in the CRC */
	w.used = sizeof(h);
	for (size_t k = 0; k < nnm && !w.err; k++) {
		name_entry(&nm[k], &e);
		wb_put(&w, &e, sizeof(e));
		wb_put(&w, nm[k].path, e.plen);
		wb_put(&w, nm[k].stage, e.nlen);
		if (e.b)
			wb_put(&w, nm[k].target, (size_t)e.b);
		wb_pad(&w);
	}
	for (size_t i = 0; i < P->nops && !w.err; i++) {
		if (!entry_of(P, i, tgt, ino, fpath, cl, &e, &path, &name, &data))
			continue;
		wb_put(&w, &e, sizeof(e));
		wb_put(&w, path, e.plen);
		wb_put(&w, name, e.nlen);
		if (e.b)
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
	if (!one && (r = fx_w_write_all(d->wal, &h, sizeof(h), d->wal_end)) < 0)
		return r;
	*end = d->wal_end + sizeof(h) + h.len;
	return 0;
}

/* A record that cannot be written whole gets its header zeroed: it is the
 * last, and the log ends before it (W3). */
int fx_w_rec_unwrite(struct fstx_domain *d, uint64_t off)
{
	static const unsigned char zero_hdr[sizeof(struct wrec)];

	return fx_w_write_all(d->wal, zero_hdr, sizeof(zero_hdr), off);
}

/*
 * Zeros from the end of the record to the next W_GROW boundary, where the
 * file ends before that (W2): later records then change no file size.
 */
int fx_w_grow(struct fstx_domain *d, uint64_t end)
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
		r = fx_w_write_all(d->wal, z, (size_t)(to - at < W_BUF ? to - at : W_BUF), at);
	if (r == 0)
		d->wal_size = (uint64_t)st.st_size > to ? (uint64_t)st.st_size : to;
	return r;
}
