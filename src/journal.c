/* SPDX-License-Identifier: MIT */
/*
 * journal.c - the undo journal, DIR/.fstx/journal, and recovery.
 *
 * Rules.  Each is relied on by recovery; a change to one is a format change.
 *
 *  1. The journal is clean when it is empty (size 0) and no progress mark
 *     exists (an empty journal beside a mark was cut: corrupt; cleanup
 *     therefore removes marks before it empties the journal, and first
 *     fsyncs .fstx/ so the marks' removal is durable before the journal's
 *     new size can be (fx_marks_gone(), also after a commit, where the
 *     emptying itself is not synced: power loss may persist the new size
 *     alone); a handle looks for such marks once,
 *     wal.c W8 says when not at all).  Proved by test_powerloss
 *     power_loss_rollback and blockcrash.bats (btrfs, failing workload).  Any other
 *     content is a hot journal, and no transaction starts on the domain until recovery
 *     has rolled it back (or refused it as corrupt).
 *  2. Before a transaction changes anything, fstx plans it completely and
 *     writes one segment: BEGIN, the STEP records of every name change it
 *     will make (in order), SIZE/DATA/XATTR before-images of every object of
 *     the initial tree whose data, size or xattrs it may change, and END.
 *     Then fdatasync(journal) (barrier 1).  Only after that barrier returns
 *     does the first change happen, so power loss never finds a change
 *     without its undo information on disk.
 *  3. Every record has a 32-byte header: magic "FXJ1", type, length,
 *     sequence number, transaction id and CRC-32C over header and payload.
 *     A segment is complete when every record from BEGIN to END is there
 *     with matching magic, txid, sequence and CRC (and every CLONE's bytes
 *     match their CRC, rule 8).  An incomplete segment is either torn (power
 *     loss or a kill before barrier 1 completed) or damaged; the progress
 *     mark tells which: right after barrier 1 and before the first change,
 *     the mark .fstx/step.TXID.0 is created (rule 5).  Without a mark no
 *     change can have happened and recovery discards the segment; with one
 *     (or with a BEGIN from an unknown format version, or an unknown record
 *     type) the journal is corrupt: recovery refuses (-EUCLEAN) and writes
 *     nothing.  Power loss cannot produce a mark with an incomplete
 *     segment: barrier 1 made every byte of the segment durable first.
 *  4. Name changes are made only as the planned steps, each a single
 *     create-in-staging (.fstx/new/N) or rename with RENAME_NOREPLACE into an
 *     absent name.  Removed names are renamed into .fstx/trash/N, never
 *     deleted before commit.  Nothing is ever overwritten, so every step can
 *     be undone and the undo of a step that did not happen is a no-op.
 *  5. Before step N runs, the progress mark .fstx/step.TXID.N replaces
 *     step.TXID.N-1 (step.TXID.0 exists from barrier 1 on, rule 3) (a
 *     rename; power loss may persist steps without the mark that preceded
 *     them: rule 5a undoes those by identity).  Undo starts at the mark and runs
 *     the steps backwards, moving the mark down before each: every step
 *     below the mark is then known done and every one above known undone,
 *     so each check is exact: a MOVE src->dst is reversed if dst exists and
 *     src does not; a staged creation is removed if present.
 *  5a. Steps above the mark are undone too, but only by identity: the
 *     journal names the inode every MOVE moves (trans.c makes the new
 *     objects in staging before it writes the journal, so new objects
 *     have inodes then too), and such a step is reversed exactly when
 *     that inode is at its destination, in the directory the step puts
 *     it in: the journal names the inodes of the directories a MOVE
 *     takes its object from and puts it in, as they are when it runs
 *     (plan.c dir_id()), and paths alone cannot tell a directory moved
 *     away and back from one that stayed (test_crash
 *     kill_dir_round_trip).  A filesystem may persist a step
 *     ahead of the mark: btrfs's fsync log makes an object's new name
 *     durable when any process fsyncs it, and nothing orders the mark's
 *     rename with it.  Proved by test_powerloss power_loss_fsync and
 *     blockcrash.bats (bgsync variants).  Not where a step before it
 *     moves that inode away from its destination (its source holding the
 *     inode too, or nothing): the destination is then a name a
 *     hard-linked object had, which that step, not run either, was to
 *     move; had this step run, that one would have too (test_crash
 *     kill_hard_names; cli.bats "hard links exchanged", where the
 *     rollback of a failed op took such a name away).  Nor where a
 *     directory on the way to its destination is not the one the steps
 *     before it put at that path (way_kept()): the object found there is
 *     in another directory (test_crash kill_link_under_moved).  Names
 *     are compared as a directory's inode and a name where both steps
 *     know it: "d2/c" before the move back of d2 to d is "d/c".  A way
 *     through a symlink (an exchange of a directory with a symlink to it)
 *     is no way: nothing there (test_crash kill_through_symlink).
 *  5c. Rule 5a is for power loss alone.  BEGIN names the epoch the
 *     journal was written in (boot id and mount id, domain.c
 *     fx_epoch_id()); an undo in that same epoch (a rollback in the
 *     process that ran the steps, or a recovery after kill -9) finds the
 *     page cache whole, where every step that ran is below the mark
 *     (rule 5), and undoes no step above it.  5a's judgement by identity
 *     cannot tell a step that ran from a name the object had before
 *     (a hard link under a directory a step moved away and one made
 *     again at its name: cli.bats "hard link under a directory moved
 *     away"), so where nothing was lost it is not made.
 *  5b. Below the mark, a MOVE is not reversed when its destination holds
 *     the object of another MOVE of the journal: an undo cut short by
 *     power loss may have made some of its own reversals durable and not
 *     others (its end fsyncs each object it changed, rule 6, not the whole
 *     filesystem), so a name may already hold the object that was there
 *     before, put back by that other step's undo.  Proved by test_powerloss
 *     power_loss (corpus 11: replace, then a failing op).  Any other
 *     object there (one that another process swapped in at the source
 *     before the step ran) is moved back, so the names come back as they
 *     were (test_race).
 *  5d. Below the mark too, power loss may have kept the marks and not the
 *     steps (they are renames in other directories).  A MOVE whose own
 *     object is still at its source, another at its destination, did not
 *     run.  Where both names hold its object (the rename half persisted,
 *     or a hard link), the destination is dropped only if it is not a
 *     name the object had: a step before it moved the inode away from
 *     that name (one directory inode and name, rule 5a) and neither the
 *     last such step nor a later one before this one holds the inode at
 *     its destination, other than that name (name_it_had(): "rename b
 *     m; link hard b; unlink b; link hard b"), at its path then or at
 *     any path the later steps' moves of the directories on its way give
 *     it, each of which may have persisted without the others
 *     (held_after(): "rename d/e/g p/q/e; rename p b exchange; rename a
 *     d/e/g", the exchange's last rename lost), and not where that
 *     destination is itself a name the inode had, by the same test
 *     (name_had(): "rename d/e/g d/c; rename a d/e/g; link d/c a", a
 *     and d/e/g one file).  The steps asked are those that move that
 *     name's link on; a move of another name of the file counts only
 *     where this step's source is empty (moved_on(): "rename a b
 *     exchange; rename d/e/g n; rename a b exchange", b holding the
 *     other file again).  Where its destination
 *     alone holds it, such a name is left too: a link made there (its
 *     source in .fstx/new/) leaves that name of the initial tree
 *     whether it persisted or not ("rename hard h2; link b hard").  Its
 *     own object at such a name and another at its source: the step
 *     did not persist either ("rename d/e/f d/c; rename d/c d/e/f", d/c
 *     replaced; -EUCLEAN before; a directory too: "rename p n; rename n
 *     p" while the directory n had is back).  These last two are for
 *     power loss alone (rule 5c: in the epoch that ran them, every step
 *     below the mark ran).  A directory, which has one name, is moved
 *     back whatever its earlier steps where nothing is at its source:
 *     reversing a move away and one back is a no-op where neither ran.
 *     test_powerloss power_loss_names (hard-link renames, a link made at
 *     a name moved away, directories moved away and back: torn before).
 *  5e. A MOVE's object not at its destination's path may be in the
 *     directory the step put it in at another path, where the step
 *     persisted and a step before it that moved that directory (or one
 *     above) did not: the paths the directory had before the earlier
 *     steps are tried (locate()), and the object moved back from there,
 *     unless that is a name it had (rule 5d's test, directories too: a
 *     directory moved away and back by steps that did not persist is
 *     where it was).  A way to the destination through a symlink (an
 *     exchange with one undone before the steps that went through it) is
 *     no way after power loss: nothing there (-ELOOP before; in the
 *     epoch that ran the steps a symlink there is another process's,
 *     test_race, and the error stands).  A MOVE is reversed into
 *     the directory it took its object from, wherever that is: its
 *     source's earlier paths are
 *     tried the same way where the directory at the source's path is
 *     another or none (src_now()).  Below the mark, its object at dst's
 *     path in another directory is another name of it (a hard link)
 *     where the step did not persist: left there, unless the step's is
 *     found so.  test_powerloss power_loss_names (a directory moved
 *     away and back inside one that moved, a file removed under a
 *     directory that moved: torn before).
 *     Then sizes, data ranges and xattrs of initial objects are restored at
 *     their initial paths (checked by inode number).  Undo is idempotent, so
 *     a crash during recovery is recovered by running it again.
 *  6. Commit: after the changes, barrier 2 makes every change durable:
 *     one fsync of each object the transaction changed (the files it
 *     wrote, truncated or gave xattrs, both parent directories of every
 *     step), never the whole filesystem (syncset.h; test_powerloss models
 *     per-object durability and fails without the source directories);
 *     then a COMMIT record
 *     is written at the next 512-byte boundary after END (so one sector
 *     holds it whole) and fdatasync()ed (barrier 3): that is the commit
 *     point.  A journal with a valid COMMIT needs no undo.  Afterwards
 *     the marks are removed and trash emptied, .fstx/ fsynced (rule 1:
 *     the marks' removal durable first; not when crash-only), and the
 *     journal truncated to 0 without a barrier: if that is lost, recovery
 *     finds the COMMIT and only cleans up.
 *     If barrier 3 fails, the transaction is rolled back from the intact
 *     journal, ignoring its COMMIT.  An undo ends with one fsync of each
 *     object it changed back (the files it restored, both parent
 *     directories of every step it reversed or removed, and the
 *     directories every step below the mark names now: a reversal left
 *     out leaves the page cache's names, step_dirs()), then the marks'
 *     removal, fsync of .fstx/ (also when crash-only: the journal's new
 *     size is synced next), truncate, fdatasync.
 *  7. A failed barrier is never retried as if it had succeeded: the
 *     transaction is rolled back and the handle latches the error.
 *  8. On a filesystem with reflink (fsfacts.c), a before-image range of at
 *     least fx_clone_min bytes is saved as a CLONE record instead of DATA:
 *     the range, widened to whole blocks (or to the file's end), is cloned
 *     with FICLONERANGE into the journal file itself at the first
 *     block-aligned offset after the record, and the record carries the
 *     CRC-32C of those bytes; the next record follows the cloned bytes.
 *     Barrier 1 covers the clone like any journal write.  Recovery checks
 *     every clone's CRC once END is found, before it changes anything,
 *     then restores the range by cloning it back (or copying).
 *
 *  9. Crash-only transactions (FSTX_UT_NOSYNC) follow every rule above in
 *     the same order but skip barriers 1, 2 and 3.  The page cache keeps
 *     the order of everything written while the kernel runs, so a killed
 *     process leaves exactly what rules 2-6 describe and recovery is the
 *     same; power loss may lose or tear any of it.
 *
 * On-disk records (host byte order, little-endian on every platform fstx
 * builds for; records start at 8-byte boundaries):
 *
 *   header (32 bytes)          STEP payload
 *   off len field              off   len  field
 *     0   4 magic "FXJ1"         0     4  kind (enum fx_step_kind)
 *     4   2 type (J_*)           4     4  mode
 *     6   2 reserved             8     4  op index
 *     8   4 payload length      12     4  n1, then n1 bytes: src path
 *    12   4 sequence number      .     4  n2, then n2 bytes: dst path
 *    16   8 transaction id       .     4  n3, then n3 bytes: aux (target)
 *    24   4 CRC-32C              .     8  inode it moves (rule 5a; journals
 *    28   4 padding                       written before it lack the field)
 *                                  .     8  inode of src's directory, then
 *                                  .     8  of dst's (rule 5a; 0 unknown;
 *                                         older journals lack both)
 *
 *   BEGIN payload
 *   off len field
 *     0   8 magic "FSTXJRNL"    16   8 number of ops
 *     8   4 format version (1)  24  36 epoch (rule 5c; zeros: unknown;
 *    12   4 0                          journals written before it lack it)
 *
 * Power-loss model: file data not covered by a barrier may be lost or torn;
 * any subset of the name changes no barrier covered may persist (a
 * barrier on one object makes only that object durable: btrfs's fsync
 * log), which rules 1, 5a and 5b allow for (test_powerloss).
 */
#define _GNU_SOURCE
#include "internal.h"
#include "syncset.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define J_MAGIC 0x314a5846u /* "FXJ1" little-endian */
#define J_VERSION 1
#define J_CHUNK (1u << 20)  /* before-image bytes per DATA record */
#define J_MAXREC (J_CHUNK + 3 * PATH_MAX + 256)
#define J_BEGIN_LEN 24 /* BEGIN's payload before the epoch */
#define J_EPOCH 36     /* the epoch's length (domain.c fx_epoch_id()) */

enum { J_BEGIN = 1, J_STEP, J_SIZE, J_DATA, J_XATTR, J_END, J_COMMIT, J_CLONE };

/* Ranges at least this long are cloned where reflink works (rule 8). */
uint64_t fx_clone_min = 256u << 10;

#define J_SECTOR 512

struct jhdr {
	uint32_t magic;
	uint16_t type;
	uint16_t rsv;
	uint32_t len;
	uint32_t seq;
	uint64_t txid;
	uint32_t crc;
	uint32_t pad;
};
_Static_assert(sizeof(struct jhdr) == 32, "journal record header");

static const char begin_magic[8] = "FSTXJRNL";

/* ---- writer ---------------------------------------------------------- */

struct jw {
	struct fstx_domain *d;
	unsigned char *buf;
	size_t used, cap;
	off_t off;      /* file offset of buf[0] */
	uint32_t seq;
	unsigned char *rec; /* record being built */
	size_t rlen, rcap;
	int err;
};

static void rec_put(struct jw *w, const void *p, size_t n)
{
	if (w->err)
		return;
	if (w->rlen + n > w->rcap) {
		size_t cap = w->rcap ? w->rcap : 256;
		unsigned char *nb;

		while (cap < w->rlen + n)
			cap *= 2;
		nb = fx_realloc(w->rec, cap);
		if (!nb) {
			w->err = -ENOMEM;
			return;
		}
		w->rec = nb;
		w->rcap = cap;
	}
	memcpy(w->rec + w->rlen, p, n);
	w->rlen += n;
}

static void put32(struct jw *w, uint32_t v) { rec_put(w, &v, 4); }
static void put64(struct jw *w, uint64_t v) { rec_put(w, &v, 8); }

static void putbytes(struct jw *w, const void *p, size_t n)
{
	put32(w, (uint32_t)n);
	rec_put(w, p, n);
}

static void putstr(struct jw *w, const char *s)
{
	putbytes(w, s ? s : "", s ? strlen(s) : 0);
}

static int write_all(int fd, const unsigned char *p, size_t n, uint64_t off)
{
	while (n) {
		ssize_t k = fx_os.pwrite(fd, p, n, (off_t)off);

		if (k <= 0)
			return k < 0 ? (int)k : -EIO;
		p += k;
		n -= (size_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

static int jw_flush(struct jw *w)
{
	int r = write_all(w->d->jfd, w->buf, w->used, (uint64_t)w->off);

	if (r < 0)
		return r;
	w->off += (off_t)w->used;
	w->used = 0;
	return 0;
}

static void jw_append(struct jw *w, const void *p, size_t n)
{
	const unsigned char *s = p;

	while (!w->err && n) {
		size_t k = w->cap - w->used;

		if (k > n)
			k = n;
		memcpy(w->buf + w->used, s, k);
		w->used += k;
		s += k;
		n -= k;
		if (w->used == w->cap)
			w->err = jw_flush(w);
	}
}

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Seal the record built in w->rec and append it. */
static void rec_end(struct jw *w, uint16_t type)
{
	static const unsigned char zero[8];
	struct jhdr h = {
		.magic = J_MAGIC, .type = type, .len = (uint32_t)w->rlen,
		.seq = w->seq++, .txid = w->d->txid,
	};

	if (w->err)
		return;
	h.crc = fx_crc32c(fx_crc32c(0, &h, sizeof(h)), w->rec, w->rlen);
	jw_append(w, &h, sizeof(h));
	jw_append(w, w->rec, w->rlen);
	jw_append(w, zero, pad8(w->rlen) - w->rlen);
	w->rlen = 0;
}

static size_t strsz(const char *s) { return 4 + (s ? strlen(s) : 0); }
static size_t recsz(size_t payload) { return sizeof(struct jhdr) + pad8(payload); }

uint64_t fx_journal_size(struct fstx_domain *d, const struct fx_step *steps,
			 size_t nsteps, const struct fx_capture *caps, size_t ncaps)
{
	uint64_t n = recsz(J_BEGIN_LEN + J_EPOCH) + recsz(4);

	for (size_t i = 0; i < nsteps; i++)
		n += recsz(12 + 24 + strsz(steps[i].src) + strsz(steps[i].dst) +
			   strsz(steps[i].aux));
	for (size_t i = 0; i < ncaps; i++) {
		const struct fx_capture *c = &caps[i];

		if (c->want_size)
			n += recsz(24 + strsz(c->ipath));
		for (size_t r = 0; r < c->nranges; r++) {
			uint64_t len = c->ranges[r].len;
			uint64_t nrec = (len + J_CHUNK - 1) / J_CHUNK;

			if (len >= fx_clone_min && !d->fs.probed)
				fx_fs_probe(d);
			if (len >= fx_clone_min && d->fs.reflink) {
				/* rule 8: shared blocks; the overwrite itself
				 * needs the new space, counted as data */
				n += recsz(40 + strsz(c->ipath)) + 2 * d->fs.block_size;
				continue;
			}

			n += nrec * recsz(16 + strsz(c->ipath) + 4) + len + 8 * nrec;
		}
		n += c->nxnames * recsz(12 + strsz(c->ipath) + 64 + 4 + FSTX_MAX_XATTR);
	}
	return n;
}

static int open_capture(struct fstx_domain *d, const struct fx_capture *c,
			int flags)
{
	struct stat st;
	int fd = fx_open(d, c->ipath, flags | O_NOFOLLOW, 0), r;

	if (fd < 0)
		return fd;
	r = fx_os.fstat(fd, &st);
	if (r == 0 && (uint64_t)st.st_ino != c->ino)
		r = -ESTALE;
	if (r < 0) {
		fx_os.close(fd);
		return r;
	}
	return fd;
}

/* CRC-32C of [off, off + len) of fd, read in chunks; -errno on a short file. */
static int64_t crc_range(int fd, uint64_t off, uint64_t len, unsigned char *chunk)
{
	uint32_t crc = 0;

	while (len) {
		size_t want = len > J_CHUNK ? J_CHUNK : (size_t)len;
		ssize_t got = fx_os.pread(fd, chunk, want, (off_t)off);

		if (got < 0)
			return got;
		if (got == 0)
			return -ESTALE; /* changed under us */
		crc = fx_crc32c(crc, chunk, (size_t)got);
		off += (uint64_t)got;
		len -= (uint64_t)got;
	}
	return crc;
}

/*
 * Rule 8: save [off, off + len) of c by cloning it into the journal.
 * 1 saved, 0 not possible here (the caller copies), <0 error.
 */
static int write_clone(struct jw *w, const struct fx_capture *c, int fd,
		       uint64_t off, uint64_t len, unsigned char *chunk)
{
	struct fstx_domain *d = w->d;
	uint64_t bs = d->fs.block_size, a, e, joff;
	int64_t crc;
	int r;

	if (len < fx_clone_min)
		return 0;
	if (!d->fs.probed)
		fx_fs_probe(d); /* a failed probe leaves reflink off */
	if (!d->fs.reflink)
		return 0;
	a = off & ~(bs - 1);
	e = (off + len + bs - 1) & ~(bs - 1);
	if (e > c->size)
		e = c->size; /* the clone may end unaligned at end of file */
	if (e <= a)
		return 0;
	joff = (uint64_t)w->off + w->used + recsz(40 + strsz(c->ipath));
	joff = (joff + bs - 1) & ~(bs - 1);
	r = fx_os.ficlonerange(d->jfd, fd, a, e - a, joff);
	if (r == -EOPNOTSUPP || r == -EXDEV || r == -EINVAL || r == -ETXTBSY)
		return 0;
	if (r < 0)
		return r;
	/* the source's pages are likely cached; the clone's are not */
	crc = crc_range(fd, a, e - a, chunk);
	if (crc < 0)
		return (int)crc;
	put64(w, c->ino);
	put64(w, a);
	put64(w, e - a);
	put64(w, joff);
	put32(w, (uint32_t)crc);
	put32(w, 0);
	putstr(w, c->ipath);
	rec_end(w, J_CLONE);
	if (!w->err)
		w->err = jw_flush(w);
	if (!w->err && (uint64_t)w->off > joff)
		w->err = -EIO; /* cannot happen: joff was computed past the record */
	w->off = (off_t)pad8(joff + (e - a));
	return w->err ? w->err : 1;
}

static void write_data(struct jw *w, const struct fx_capture *c, int fd,
		       unsigned char *chunk)
{
	for (size_t r = 0; r < c->nranges && !w->err; r++) {
		uint64_t off = c->ranges[r].off, end = off + c->ranges[r].len;
		int cl = write_clone(w, c, fd, off, c->ranges[r].len, chunk);

		if (cl < 0)
			w->err = cl;
		if (cl)
			continue;

		while (off < end && !w->err) {
			size_t want = end - off > J_CHUNK ? J_CHUNK : (size_t)(end - off);
			ssize_t got = fx_os.pread(fd, chunk, want, (off_t)off);

			if (got < 0) {
				w->err = (int)got;
				break;
			}
			if (got == 0)
				break; /* file shorter than planned: nothing more to save */
			put64(w, c->ino);
			put64(w, off);
			putstr(w, c->ipath);
			putbytes(w, chunk, (size_t)got);
			rec_end(w, J_DATA);
			off += (uint64_t)got;
		}
	}
}

static void write_xattrs(struct jw *w, const struct fx_capture *c, int fd,
			 unsigned char *val)
{
	for (size_t x = 0; x < c->nxnames && !w->err; x++) {
		ssize_t n = fx_os.fgetxattr(fd, c->xnames[x], val, FSTX_MAX_XATTR);

		if (n < 0 && n != -ENODATA && n != -EOPNOTSUPP) {
			w->err = (int)n;
			break;
		}
		put64(w, c->ino);
		put32(w, n >= 0);
		putstr(w, c->ipath);
		putstr(w, c->xnames[x]);
		putbytes(w, val, n >= 0 ? (size_t)n : 0);
		rec_end(w, J_XATTR);
	}
}

static void write_capture(struct jw *w, struct fstx_domain *d,
			  const struct fx_capture *c, unsigned char *chunk)
{
	int fd;

	if (!c->want_size && !c->nranges && !c->nxnames)
		return;
	fd = open_capture(d, c, O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		w->err = fd;
		return;
	}
	if (c->want_size) {
		put64(w, c->dev);
		put64(w, c->ino);
		put64(w, c->size);
		putstr(w, c->ipath);
		rec_end(w, J_SIZE);
	}
	write_data(w, c, fd, chunk);
	write_xattrs(w, c, fd, chunk);
	fx_os.close(fd);
}

int fx_journal_write(struct fstx_domain *d, const struct fx_step *steps,
		     size_t nsteps, const struct fx_capture *caps, size_t ncaps,
		     uint64_t nops)
{
	struct jw w = { .d = d, .cap = J_CHUNK + 4096 };
	char epoch[37] = "";
	unsigned char *chunk;
	int r;

	if (getrandom(&d->txid, sizeof(d->txid), 0) != sizeof(d->txid))
		d->txid ^= (uint64_t)(uintptr_t)&w ^ (uint64_t)nops;
	w.buf = fx_malloc(w.cap);
	chunk = fx_malloc(J_CHUNK > FSTX_MAX_XATTR ? J_CHUNK : FSTX_MAX_XATTR);
	if (!w.buf || !chunk) {
		r = -ENOMEM;
		goto out;
	}
	rec_put(&w, begin_magic, 8);
	put32(&w, J_VERSION);
	put32(&w, 0);
	put64(&w, nops);
	if (fx_epoch_id(d, epoch) < 0)
		memset(epoch, 0, sizeof(epoch)); /* none: rule 5a always */
	rec_put(&w, epoch, J_EPOCH);
	rec_end(&w, J_BEGIN);
	for (size_t i = 0; i < nsteps; i++) {
		put32(&w, steps[i].kind);
		put32(&w, steps[i].mode);
		put32(&w, steps[i].op);
		putstr(&w, steps[i].src);
		putstr(&w, steps[i].dst);
		putstr(&w, steps[i].aux);
		put64(&w, steps[i].ino); /* rule 5a; absent in older journals */
		put64(&w, steps[i].sdir);
		put64(&w, steps[i].ddir);
		rec_end(&w, J_STEP);
	}
	for (size_t i = 0; i < ncaps && !w.err; i++)
		write_capture(&w, d, &caps[i], chunk);
	put32(&w, w.seq);
	rec_end(&w, J_END);
	r = w.err;
	if (!r)
		r = jw_flush(&w);
	d->jend = (uint64_t)w.off;
	d->jseq = w.seq;
	if (!r && !d->nosync) {
		r = fx_os.fdatasync(d->jfd); /* barrier 1 (rule 2) */
		if (r < 0)
			d->latched = r;
	}
out:
	free(w.buf);
	free(w.rec);
	free(chunk);
	return r;
}

static off_t commit_off(uint64_t end)
{
	return (off_t)((end + J_SECTOR - 1) / J_SECTOR * J_SECTOR);
}

int fx_journal_commit(struct fstx_domain *d)
{
	struct { struct jhdr h; uint32_t seq, pad; } c = {
		.h = { .magic = J_MAGIC, .type = J_COMMIT, .len = 8,
		       .seq = d->jseq, .txid = d->txid },
		.seq = d->jseq,
	};
	ssize_t n;
	int r;

	c.h.crc = fx_crc32c(fx_crc32c(0, &c.h, sizeof(c.h)), &c.seq, 8);
	n = fx_os.pwrite(d->jfd, &c, sizeof(c), commit_off(d->jend));
	if (n != (ssize_t)sizeof(c))
		return n < 0 ? (int)n : -EIO;
	if (d->nosync) /* rule 9 */
		return 0;
	r = fx_os.fdatasync(d->jfd); /* barrier 3: the commit point (rule 6) */
	if (r < 0)
		d->latched = r;
	return r;
}

/*
 * Rule 1: the marks' removal is made durable before the journal's
 * emptiness can be.  An fdatasync of the journal alone may persist its new
 * size and not the unlinks in .fstx/ (btrfs logs only the inode it
 * syncs), which would leave an empty journal beside a mark.
 */
static int marks_sync(struct fstx_domain *d)
{
	int r = fx_os.fsync(d->meta);

	if (r < 0 && r != -EINVAL && r != -EOPNOTSUPP) {
		d->latched = r;
		return r;
	}
	return 0;
}

int fx_marks_gone(struct fstx_domain *d)
{
	return d->nosync ? 0 : marks_sync(d); /* crash-only: no barrier */
}

int fx_journal_clear(struct fstx_domain *d, int durable)
{
	int r;

	/* also when crash-only: the new size is synced below */
	if (durable && (r = marks_sync(d)) < 0)
		return r;
	r = fx_os.ftruncate(d->jfd, 0);
	if (r < 0 || !durable)
		return r;
	r = fx_os.fdatasync(d->jfd);
	if (r < 0)
		d->latched = r;
	return r;
}

int fx_journal_hot(struct fstx_domain *d)
{
	struct stat st;
	int r = fx_os.fstat(d->jfd, &st);

	return r < 0 ? r : st.st_size > 0;
}

/* ---- reader ---------------------------------------------------------- */

struct jrec {
	uint16_t type;
	off_t off;   /* payload offset in the journal */
	uint32_t len;
};

struct jr {
	struct fstx_domain *d;
	struct fx_step *steps;
	size_t nsteps, csteps;
	struct jrec *recs;  /* SIZE / DATA / XATTR, applied after the steps */
	size_t nrecs, crecs;
	unsigned char *buf;
	uint64_t txid;
	int have_begin;
	int committed;
	char epoch[37];        /* its BEGIN's (rule 5c), "" in older journals */
	int same_epoch;        /* undone in that epoch: the page cache whole */
	struct fx_syncset *ss; /* what the undo changed (rule 6) */
};

/* A cursor over a record's payload: bad once it read past the end or found
 * a malformed field; oom (with bad) where a string could not be copied,
 * which says nothing about the journal (-ENOMEM, not -EUCLEAN). */
struct cur { const unsigned char *p; size_t left; int bad, oom; };

static int cur_err(const struct cur *c)
{
	return c->oom ? -ENOMEM : -EUCLEAN;
}

static uint64_t get(struct cur *c, size_t n)
{
	uint64_t v = 0;

	if (c->left < n) {
		c->bad = 1;
		return 0;
	}
	memcpy(&v, c->p, n);
	c->p += n;
	c->left -= n;
	return v;
}

static const unsigned char *getbytes(struct cur *c, uint32_t *len)
{
	const unsigned char *p;

	*len = (uint32_t)get(c, 4);
	if (c->bad || c->left < *len) {
		c->bad = 1;
		return NULL;
	}
	p = c->p;
	c->p += *len;
	c->left -= *len;
	return p;
}

/*
 * A string of the record: no NUL, shorter than PATH_MAX, empty only where
 * allowed.  A path (relative) may not start with '/'; an xattr name or a
 * symlink target (stored, never resolved) may.
 */
static char *getstr(struct cur *c, int may_be_empty, int relative)
{
	uint32_t len;
	const unsigned char *p = getbytes(c, &len);
	char *s;

	if (!p || len >= PATH_MAX || memchr(p, 0, len) ||
	    (!len && !may_be_empty) || (relative && len && p[0] == '/')) {
		c->bad = 1;
		return NULL;
	}
	s = fx_strndup((const char *)p, len);
	if (!s)
		c->bad = c->oom = 1;
	return s;
}

/* A path of the domain (add_step also refuses ".." components). */
static char *getpath(struct cur *c, int may_be_empty)
{
	return getstr(c, may_be_empty, 1);
}

/* Whether path has a ".." component ("a/..b" is a plain name). */
static int dotdot(const char *path)
{
	for (const char *p = path; p && *p;) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return 1;
		p += n;
		p += *p == '/';
	}
	return 0;
}

static int add_step(struct jr *j, struct cur *c)
{
	struct fx_step s = { 0 };

	s.kind = (uint32_t)get(c, 4);
	s.mode = (uint32_t)get(c, 4);
	s.op = (uint32_t)get(c, 4);
	s.src = getpath(c, 1);
	s.dst = getpath(c, 0);
	s.aux = getstr(c, 1, 0);
	if (!c->bad && c->left >= 8)
		s.ino = get(c, 8);
	if (!c->bad && c->left >= 16) { /* rule 5a; absent in older journals */
		s.sdir = get(c, 8);
		s.ddir = get(c, 8);
	}
	if (c->bad || s.kind < FX_ST_MKFILE || s.kind > FX_ST_MOVE ||
	    dotdot(s.dst) || dotdot(s.src)) {
		free(s.src);
		free(s.dst);
		free(s.aux);
		return cur_err(c);
	}
	if (fx_grow((void **)&j->steps, &j->csteps, j->nsteps + 1, sizeof(*j->steps)) < 0) {
		free(s.src);
		free(s.dst);
		free(s.aux);
		return -ENOMEM;
	}
	j->steps[j->nsteps++] = s;
	return 0;
}

static int add_rec(struct jr *j, uint16_t type, off_t off, uint32_t len)
{
	if (fx_grow((void **)&j->recs, &j->crecs, j->nrecs + 1, sizeof(*j->recs)) < 0)
		return -ENOMEM;
	j->recs[j->nrecs++] = (struct jrec){ type, off, len };
	return 0;
}

static int read_full(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = fx_os.pread(fd, (char *)buf + done, len - done,
					  off + (off_t)done);
		if (n < 0)
			return (int)n;
		if (n == 0)
			return 0; /* short */
		done += (size_t)n;
	}
	return 1;
}

/* Read the record at *off into j->buf.  1 ok, 0 torn, <0 error/corrupt. */
static int read_rec(struct jr *j, off_t *off, uint32_t seq, struct jhdr *h)
{
	uint32_t crc;
	int r = read_full(j->d->jfd, h, sizeof(*h), *off);

	if (r <= 0)
		return r;
	if (h->magic != J_MAGIC || h->seq != seq || (seq && h->txid != j->txid))
		return 0;
	if (h->len > J_MAXREC)
		return 0; /* a damaged header: rule 3 decides */
	r = read_full(j->d->jfd, j->buf, h->len, *off + (off_t)sizeof(*h));
	if (r <= 0)
		return r;
	crc = h->crc;
	h->crc = 0;
	if (fx_crc32c(fx_crc32c(0, h, sizeof(*h)), j->buf, h->len) != crc)
		return 0; /* torn or damaged: see rule 3 */
	*off += (off_t)(sizeof(*h) + pad8(h->len));
	return 1;
}

/* A CLONE record's payload (rule 8). */
struct jclone {
	uint64_t ino, off, len, joff;
	uint32_t crc;
	char *ipath;
};

static int parse_clone(const unsigned char *p, uint32_t n, struct jclone *k)
{
	struct cur c = { p, n, 0, 0 };

	k->ino = get(&c, 8);
	k->off = get(&c, 8);
	k->len = get(&c, 8);
	k->joff = get(&c, 8);
	k->crc = (uint32_t)get(&c, 4);
	get(&c, 4);
	k->ipath = getpath(&c, 1);
	if (c.bad || !k->len || k->len > (1ull << 62) || k->joff > (1ull << 62) ||
	    k->off > (1ull << 62) || k->joff % J_SECTOR) {
		free(k->ipath);
		k->ipath = NULL;
		return cur_err(&c);
	}
	return 0;
}

/* Rule 8: once the segment is known complete, check every clone's bytes.
 * 1 all good, 0 torn, <0 corrupt or error. */
static int check_clones(struct jr *j)
{
	for (size_t i = 0; i < j->nrecs; i++) {
		struct jclone k;
		int64_t crc;
		int r;

		if (j->recs[i].type != J_CLONE)
			continue;
		r = read_full(j->d->jfd, j->buf, j->recs[i].len, j->recs[i].off);
		if (r <= 0)
			return r < 0 ? r : -EUCLEAN;
		if ((r = parse_clone(j->buf, j->recs[i].len, &k)) < 0)
			return r;
		free(k.ipath);
		crc = crc_range(j->d->jfd, k.joff, k.len, j->buf);
		if (crc == -ESTALE || (crc >= 0 && (uint32_t)crc != k.crc))
			return 0; /* cut short or changed: see rule 3 */
		if (crc < 0)
			return (int)crc;
	}
	return 1;
}

/* Pass 1: validate every record, load steps.  1 complete, 0 incomplete, <0. */
static int journal_scan(struct jr *j)
{
	struct jhdr h;
	off_t off = 0;
	uint32_t seq = 0;
	int r;

	for (;;) {
		struct cur c;

		r = read_rec(j, &off, seq, &h);
		if (r <= 0)
			return r;
		c = (struct cur){ j->buf, h.len, 0, 0 };
		if (seq == 0) {
			if (h.type != J_BEGIN || h.len < J_BEGIN_LEN ||
			    memcmp(j->buf, begin_magic, 8))
				return 0;
			c.p += 8;
			c.left -= 8;
			if (get(&c, 4) != J_VERSION)
				return -EUCLEAN; /* from a future (or past) format */
			if (h.len >= J_BEGIN_LEN + J_EPOCH) /* rule 5c */
				memcpy(j->epoch, j->buf + J_BEGIN_LEN, J_EPOCH);
			j->txid = h.txid;
			j->have_begin = 1;
		} else if (h.type == J_STEP) {
			if ((r = add_step(j, &c)) < 0)
				return r;
		} else if (h.type == J_SIZE || h.type == J_DATA || h.type == J_XATTR) {
			if ((r = add_rec(j, h.type, off - (off_t)pad8(h.len),
					 h.len)) < 0)
				return r;
		} else if (h.type == J_CLONE) {
			struct jclone k;

			if ((r = parse_clone(j->buf, h.len, &k)) < 0)
				return r;
			free(k.ipath);
			if (k.joff < (uint64_t)off)
				return -EUCLEAN;
			if ((r = add_rec(j, h.type, off - (off_t)pad8(h.len),
					 h.len)) < 0)
				return r;
			off = (off_t)pad8(k.joff + k.len);
		} else if (h.type == J_END) {
			if (get(&c, 4) != seq)
				return -EUCLEAN;
			if ((r = check_clones(j)) <= 0)
				return r;
			off = commit_off((uint64_t)off);
			r = read_rec(j, &off, seq + 1, &h);
			if (r < 0)
				return r;
			j->committed = r == 1 && h.type == J_COMMIT && h.len == 8;
			return 1;
		} else {
			return -EUCLEAN;
		}
		seq++;
	}
}

/* Rule 3: an incomplete segment is torn without a progress mark, else corrupt. */
static int journal_load(struct jr *j)
{
	int r = journal_scan(j), m;

	if (r != 0)
		return r;
	if (j->have_begin) {
		j->d->txid = j->txid;
		m = fx_mark_get(j->d);
		m = m >= 0 ? 1 : m == -1 ? 0 : m;
	} else {
		m = fx_mark_any(j->d);
	}
	if (m < 0)
		return m;
	return m ? -EUCLEAN : 0;
}

int fx_remove(struct fstx_domain *d, const char *p, int dir, struct fx_syncset *ss)
{
	const char *name;
	int dfd = fx_parent(d, p, &name), r;

	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return dfd;
	r = fx_os.unlinkat(dfd, name, dir ? AT_REMOVEDIR : 0);
	if (r == 0)
		fx_ss_dir(ss, dfd);
	fx_os.close(dfd);
	return r == -ENOENT ? 0 : r;
}

/*
 * A directory moved to another parent needs its owner's write bit (its
 * ".." changes), where the rmdir(2) of it and the mkdir(2) of it did not:
 * for fstx's own moves (into and out of .fstx/trash/ and .fstx/new/),
 * the owner's bit is added for the rename and the mode put back at the
 * new name (a crash between leaves the bit set, nothing else).  A rename
 * the transaction asks for keeps the kernel's answer.
 */
static int move_owned(int sfd, const char *sn, int dfd, const char *dn)
{
	struct stat st;
	int r;

	if (fx_os.fstatat(sfd, sn, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
	    !fx_owner_may_add(&st, S_IWUSR))
		return -EACCES; /* (a chmod outside the group drops S_ISGID) */
	if ((r = fx_os.fchmodat(sfd, sn, (st.st_mode & 07777) | S_IWUSR)) < 0)
		return r == -EPERM ? -EACCES : r;
	if ((r = fx_os.renameat2(sfd, sn, dfd, dn, RENAME_NOREPLACE)) < 0) {
		fx_os.fchmodat(sfd, sn, st.st_mode & 07777);
		return r;
	}
	fx_os.fchmodat(dfd, dn, st.st_mode & 07777);
	return 0;
}

int fx_move(struct fstx_domain *d, const char *src, const char *dst,
	    struct fx_syncset *ss)
{
	const char *sn, *dn;
	int sfd, dfd, r;

	sfd = fx_parent(d, src, &sn);
	if (sfd < 0)
		return sfd;
	dfd = fx_parent(d, dst, &dn);
	if (dfd < 0) {
		fx_os.close(sfd);
		return dfd;
	}
	r = fx_os.renameat2(sfd, sn, dfd, dn, RENAME_NOREPLACE);
	if (r == -EACCES && (fx_under(src, FX_META) || fx_under(dst, FX_META)))
		r = move_owned(sfd, sn, dfd, dn);
	if (r == 0) {
		fx_ss_dir(ss, sfd);
		fx_ss_dir(ss, dfd);
	}
	fx_os.close(sfd);
	fx_os.close(dfd);
	return r;
}

/* Is r an error other than "not there" (a missing name, a file or a
 * symlink loop on the way)? */
static int real_err(int r)
{
	return r < 0 && r != -ENOENT && r != -ENOTDIR && r != -ELOOP;
}

/* Rules 5a, 5d: is the directory p is in now the one of inode dir (0: not
 * known, yes)?  1 yes, 0 no, -errno. */
static int in_dir(struct fstx_domain *d, const char *p, uint64_t dir)
{
	char buf[PATH_MAX];
	struct stat st;
	int r;

	if (!dir || !strchr(p, '/'))
		return 1;
	r = fx_lstat(d, fx_dirname(p, buf), &st);
	if (real_err(r))
		return r;
	return r == 0 && (uint64_t)st.st_ino == dir;
}

/* Rules 5a, 5d: are path a, in directory adir when its step ran, and
 * path b, in bdir, one name (one path, or one name in one directory)? */
static int same_name(const char *a, uint64_t adir, const char *b, uint64_t bdir)
{
	const char *x = strrchr(a, '/'), *y = strrchr(b, '/');

	if (adir && bdir && x && y) /* both known: the directory decides */
		return adir == bdir && !strcmp(x, y);
	return !strcmp(a, b);
}

/*
 * Path p (PATH_MAX bytes) with its leading path from replaced by to: 1,
 * 0 where p is not below from (self: or from itself), -1 where the result
 * would not fit.  The walks of the steps forwards and backwards
 * (held_after(), dir_before()) move a path with the directories on its way.
 */
static int rebase(char *p, const char *from, const char *to, int self)
{
	char tmp[PATH_MAX];
	size_t n = strlen(from);

	if (!n || strncmp(p, from, n) || (p[n] != '/' && (!self || p[n])))
		return 0;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s%s", to, p + n) >= sizeof(tmp))
		return -1;
	memcpy(p, tmp, PATH_MAX);
	return 1;
}

/*
 * Is inode ino at path p, named when step i ran, or where any of the
 * steps after it up to k renamed the directories on its way (a move of p
 * itself is not one)?  Each path is tried: any of those moves may have
 * persisted without the others.
 */
static int held_after(const struct jr *j, size_t i, size_t k, const char *p, uint64_t ino)
{
	char buf[PATH_MAX];
	struct stat st;

	if (fx_lstat(j->d, p, &st) == 0 && (uint64_t)st.st_ino == ino)
		return 1;
	if ((size_t)snprintf(buf, sizeof(buf), "%s", p) >= sizeof(buf))
		return 0;
	for (size_t x = i + 1; x < k; x++) {
		const struct fx_step *m = &j->steps[x];

		if (m->kind != FX_ST_MOVE || !m->src || rebase(buf, m->src, m->dst, 0) <= 0)
			continue;
		if (fx_lstat(j->d, buf, &st) == 0 && (uint64_t)st.st_ino == ino)
			return 1;
	}
	return 0;
}

/* How deep name_had() asks about the steps before (a chain of one
 * file's names given back; deeper, a name it holds counts). */
#define J_NAME_DEPTH 8

static int name_had(const struct jr *j, size_t k, int depth);

/* Does a MOVE of steps [i, k) of step k's inode (step i's and those
 * that move on from where the one before put it; the moves of its other
 * names where step k's source is empty) hold it at its destination now
 * (at its path then, or where later steps moved its directory), a name
 * other than step k's destination?  Then step i ran
 * (power loss kept it).  The inode at step k's destination says
 * nothing: that is the name in question.  Nor at a destination that is
 * itself a name the inode had (another name of a hard-linked file):
 * "rename d/e/g d/c; rename a d/e/g; link d/c a", a and d/e/g one file. */
static int moved_on(const struct jr *j, size_t i, size_t k, int depth)
{
	const struct fx_step *s = &j->steps[k];
	const char *at = j->steps[i].src;
	uint64_t atdir = j->steps[i].sdir;
	int other = 0;
	struct stat st;

	for (; i < k; i++) {
		const struct fx_step *m = &j->steps[i];
		int link;

		if (m->kind != FX_ST_MOVE || m->ino != s->ino)
			continue;
		/* this name's link moving on, or another name of the file */
		if ((link = same_name(m->src, m->sdir, at, atdir))) {
			at = m->dst;
			atdir = m->ddir;
		}
		if (same_name(m->dst, m->ddir, s->dst, s->ddir) ||
		    !held_after(j, i, k, m->dst, s->ino) ||
		    (depth < J_NAME_DEPTH && name_had(j, i, depth + 1)))
			continue;
		if (link)
			return 1;
		other = 1;
	}
	/* another name's move says so only where step k's source, where
	 * this link would be had step k not run, is empty: "rename a b
	 * exchange; rename d/e/g n; rename a b exchange", a and d/e/g one
	 * file, b holding the other file again after power loss */
	return other && fx_lstat(j->d, s->src, &st) < 0;
}

/* Rules 5a, 5d: does a step before step k move step k's inode away from
 * step k's destination, and did the last such step not run (its inode at
 * none of the other names it and the later steps before k move it to)?
 * That name is then one the object had. */
static int name_had(const struct jr *j, size_t k, int depth)
{
	const struct fx_step *s = &j->steps[k];

	for (size_t i = k; i-- > 0;)
		if (j->steps[i].kind == FX_ST_MOVE && j->steps[i].ino == s->ino &&
		    same_name(j->steps[i].src, j->steps[i].sdir, s->dst, s->ddir))
			return !moved_on(j, i, k, depth);
	return 0;
}

static int name_it_had(const struct jr *j, size_t k)
{
	return name_had(j, k, 0);
}

/*
 * Rule 5e: where is directory inode dir, which held path p's parent when
 * step k ran, now that a step before k that moved it (or a directory
 * above it) may not have persisted?  The paths p's parent had before the
 * earlier steps are tried (mapped back through them, last first): 1 and
 * the path of dir in par, 0 not found, -errno.
 */
static int dir_before(const struct jr *j, size_t k, const char *p, uint64_t dir,
		      char par[PATH_MAX])
{
	struct stat st;
	int r;

	fx_dirname(p, par);
	for (size_t i = k; i-- > 0;) {
		const struct fx_step *m = &j->steps[i];

		if (m->kind != FX_ST_MOVE || !m->src)
			continue;
		r = rebase(par, m->dst, m->src, 1);
		if (r < 0)
			return 0;
		if (r == 0)
			continue;
		r = fx_lstat(j->d, par, &st);
		if (real_err(r))
			return r;
		if (r == 0 && (uint64_t)st.st_ino == dir)
			return 1;
	}
	return 0;
}

/*
 * Rule 5e: step k's object, not at its destination's path, may be in the
 * directory the step put it in (s->ddir) at another path: the step
 * persisted where a step before it that moved that directory, or one
 * above it, did not (power loss; a new directory made, a file moved into
 * it, its parent's rename lost).  1 and the object's path in buf where
 * that directory (dir_before()) holds the object under dst's name (*st
 * its stat), 0 not found, -errno.
 */
static int locate(const struct jr *j, size_t k, char buf[PATH_MAX], struct stat *st)
{
	const struct fx_step *s = &j->steps[k];
	const char *base = strrchr(s->dst, '/');
	char par[PATH_MAX];
	int r;

	if (!s->ddir || !s->ino || !base)
		return 0;
	if ((r = dir_before(j, k, s->dst, s->ddir, par)) <= 0)
		return r;
	if ((size_t)snprintf(buf, PATH_MAX, "%s%s", par, base) >= PATH_MAX)
		return 0;
	r = fx_lstat(j->d, buf, st);
	if (real_err(r))
		return r;
	/* not a name the object had there (rule 5a's test; a directory
	 * moved away and back, neither move persisted, is where it was) */
	return r == 0 && (uint64_t)st->st_ino == s->ino && !name_it_had(j, k);
}

/*
 * Rule 5e for the source: step k moved its object out of directory
 * s->sdir; where a step before it that moved that directory did not
 * persist, the directory is at an earlier path and the object goes back
 * there.  1 and that path in buf, 0 s->src as it is, -errno.
 */
static int src_now(const struct jr *j, size_t k, char buf[PATH_MAX])
{
	const struct fx_step *s = &j->steps[k];
	const char *base = strrchr(s->src, '/');
	char par[PATH_MAX];
	int r;

	if (!s->sdir || !base || (r = in_dir(j->d, s->src, s->sdir)) > 0)
		return 0;
	if (r < 0 || (r = dir_before(j, k, s->src, s->sdir, par)) <= 0)
		return r;
	return (size_t)snprintf(buf, PATH_MAX, "%s%s", par, base) < PATH_MAX;
}

/*
 * Reverse MOVE k, whose object (*st) is at its destination.  Both names
 * holding the one inode is the rename half persisted (btrfs can replay an
 * fsynced inode's new name and keep the old one): dropping the new name
 * reverses it, unless the destination is a name the object had (rule
 * 5d).  Its object at its source and another at its destination: the
 * step did not run.  Any other two objects there is not a state fstx
 * makes.
 */
static int move_back(const struct jr *j, size_t k, const char *dst,
		     const struct stat *st, struct fx_syncset *ss)
{
	const struct fx_step *s = &j->steps[k];
	struct fstx_domain *d = j->d;
	char buf[PATH_MAX];
	const char *src = s->src;
	struct stat cur;
	int r = src_now(j, k, buf);

	if (r < 0)
		return r;
	if (r > 0)
		src = buf;
	r = fx_lstat(d, src, &cur);
	/* the destination a name the object had (rule 5d): the step that
	 * moved it away from there did not persist, so the name is the
	 * initial tree's, whether this step (a link made there) did or not.
	 * Power loss alone (rule 5c): in the epoch that ran it, the step
	 * ran, and its paths may name other directories now (cli.bats
	 * "a file renamed under a directory moved away and back") */
	if (r == -ENOENT)
		return !j->same_epoch && !S_ISDIR(st->st_mode) && name_it_had(j, k) ? 0 :
		       fx_move(d, dst, src, ss);
	if (r < 0)
		return r;
	if (cur.st_ino == st->st_ino && !S_ISDIR(st->st_mode))
		return name_it_had(j, k) ? 0 : fx_remove(d, dst, 0, ss);
	/* its own object still at its source, another at dst: it did not
	 * run (power loss kept the marks after it, not the step) */
	if (s->ino && (uint64_t)cur.st_ino == s->ino)
		return 0;
	/* another object at its source, its own at a name it had (rule
	 * 5d): neither this step nor the move away from there persisted
	 * ("rename d/e/f d/c; rename d/c d/e/f", d/c replaced; a directory
	 * too: "rename p n; rename n p" while n's old directory is back) */
	if (!j->same_epoch && name_it_had(j, k))
		return 0;
	return -EUCLEAN;
}

/* Rule 5e: step k's object found elsewhere (locate()) and moved back
 * from there: 1, 0 not found, -errno. */
static int move_back_located(const struct jr *j, size_t k, struct fx_syncset *ss)
{
	char at[PATH_MAX];
	struct stat st;
	int r = locate(j, k, at, &st);

	if (r > 0 && (r = move_back(j, k, at, &st, ss)) == 0)
		r = 1;
	return r;
}

/* Does a MOVE of journal j name inode ino? */
static int step_of_ino(const struct jr *j, uint64_t ino)
{
	for (size_t i = 0; i < j->nsteps; i++)
		if (j->steps[i].kind == FX_ST_MOVE && j->steps[i].ino == ino)
			return 1;
	return 0;
}

/*
 * Rule 5 for a MOVE: find its object, at its destination or elsewhere
 * (rule 5e), and reverse the step from there if it ran.
 */
static int undo_move(const struct jr *j, size_t k, struct fx_syncset *ss)
{
	const struct fx_step *s = &j->steps[k];
	struct stat st;
	int r = fx_lstat(j->d, s->dst, &st);

	/* nothing there, or after power loss a file or symlink on the way
	 * (an exchange with a symlink undone before the steps that went
	 * through it); in the epoch that ran the steps the undo retraces
	 * them, and a symlink there is another process's (test_race):
	 * the error stands, and the journal stays hot */
	if (r == -ENOENT || r == -ENOTDIR || (r == -ELOOP && !j->same_epoch))
		goto elsewhere;
	if (r < 0)
		return r;
	if (s->ino && (uint64_t)st.st_ino != s->ino) {
		/* the object of another step there: that step's undo put it
		 * back already (an undo cut short, part of it durable), and
		 * this one's was done too (rule 5b) */
		if (step_of_ino(j, (uint64_t)st.st_ino))
			return 0;
		/* the step's own object elsewhere (rule 5e) */
		if ((r = move_back_located(j, k, ss)) != 0)
			return r < 0 ? r : 0;
	} else if (s->ino) {
		/* its object, but in another directory: another name of it
		 * (a hard link), where the step did not persist; or the
		 * step's elsewhere (rule 5e) */
		if ((r = in_dir(j->d, s->dst, s->ddir)) < 0)
			return r;
		if (r == 0)
			goto elsewhere;
	}
	return move_back(j, k, s->dst, &st, ss);
elsewhere:
	r = move_back_located(j, k, ss);
	return r < 0 ? r : 0;
}

/* Rule 5: undo step k if it happened. */
static int undo_step(const struct jr *j, size_t k, struct fx_syncset *ss)
{
	switch (j->steps[k].kind) {
	case FX_ST_MOVE:
		return undo_move(j, k, ss);
	case FX_ST_MKDIR:
		return fx_remove(j->d, j->steps[k].dst, 1, ss);
	default:
		return fx_remove(j->d, j->steps[k].dst, 0, ss);
	}
}

/* Reopen the object a SIZE/DATA/XATTR record names, checking its inode. */
static int open_ino(struct fstx_domain *d, const char *ipath, uint64_t ino,
		    int flags)
{
	struct fx_capture c = { .ipath = (char *)ipath, .ino = ino };

	return open_capture(d, &c, flags);
}

/* Rule 8: put a cloned before-image back: clone it, else copy it. */
static int apply_clone(struct jr *j, const struct jrec *rec)
{
	struct jclone k;
	uint64_t done = 0;
	int r, fd;

	r = read_full(j->d->jfd, j->buf, rec->len, rec->off);
	if (r <= 0)
		return r < 0 ? r : -EUCLEAN;
	if ((r = parse_clone(j->buf, rec->len, &k)) < 0)
		return r;
	fd = open_ino(j->d, k.ipath, k.ino, O_WRONLY);
	free(k.ipath);
	if (fd < 0)
		return fd;
	r = fx_os.ficlonerange(fd, j->d->jfd, k.joff, k.len, k.off);
	if (r == 0)
		done = k.len;
	else
		r = 0;
	while (!r && done < k.len) {
		size_t want = k.len - done > J_CHUNK ? J_CHUNK : (size_t)(k.len - done);
		ssize_t n = fx_os.pread(j->d->jfd, j->buf, want,
					  (off_t)(k.joff + done));

		if (n <= 0) {
			r = n < 0 ? (int)n : -EUCLEAN;
			break;
		}
		if ((r = write_all(fd, j->buf, (size_t)n, k.off + done)) < 0)
			break;
		done += (uint64_t)n;
	}
	if (r == 0)
		fx_ss_file(j->ss, fd);
	fx_os.close(fd);
	return r;
}

/*
 * Is the object (fd, open read-only) already as rec would leave it?  Then
 * the undo need not write it: an op that failed for want of permission
 * (a setxattr on a file its caller may read but not write) changed
 * nothing, and writing its before-image back would fail the same way and
 * leave the journal hot.  1 yes, 0 no or not known.
 */
static int already_undone(int fd, const struct jrec *rec, uint64_t size, uint64_t off,
			  uint32_t present, const char *name, const unsigned char *data,
			  uint32_t len)
{
	unsigned char *cur = NULL;
	struct stat st;
	ssize_t n;
	int eq;

	if (rec->type == J_SIZE)
		return fx_os.fstat(fd, &st) == 0 && (uint64_t)st.st_size == size;
	if (len && !(cur = fx_malloc(len)))
		return 0;
	if (rec->type == J_DATA)
		n = fx_os.pread(fd, cur, len, (off_t)off);
	else
		n = fx_os.fgetxattr(fd, name, cur, len);
	if (rec->type == J_XATTR && !present)
		eq = n == -ENODATA;
	else
		eq = n == (ssize_t)len && (!len || !memcmp(cur, data, len));
	free(cur);
	return eq;
}

static int apply_rec(struct jr *j, const struct jrec *rec)
{
	struct cur c = { j->buf, rec->len, 0, 0 };
	uint64_t ino, off = 0, size = 0;
	uint32_t present = 0, len = 0;
	const unsigned char *data = NULL;
	char *ipath = NULL, *name = NULL;
	int r, fd, done;

	r = read_full(j->d->jfd, j->buf, rec->len, rec->off);
	if (r <= 0)
		return r < 0 ? r : -EUCLEAN;
	if (rec->type == J_SIZE) {
		get(&c, 8);
		ino = get(&c, 8);
		size = get(&c, 8);
		ipath = getpath(&c, 1);
	} else if (rec->type == J_DATA) {
		ino = get(&c, 8);
		off = get(&c, 8);
		ipath = getpath(&c, 1);
		data = getbytes(&c, &len);
	} else {
		ino = get(&c, 8);
		present = (uint32_t)get(&c, 4);
		ipath = getpath(&c, 1);
		name = getstr(&c, 0, 0);
		data = getbytes(&c, &len);
	}
	r = cur_err(&c);
	if (c.bad)
		goto out;
	fd = open_ino(j->d, ipath, ino, O_RDONLY | O_NONBLOCK);
	done = fd >= 0 && already_undone(fd, rec, size, off, present, name, data, len);
	if (!done && rec->type != J_XATTR) {
		if (fd >= 0)
			fx_os.close(fd);
		fd = open_ino(j->d, ipath, ino, O_WRONLY);
	}
	if (fd < 0) {
		r = fd;
		goto out;
	}
	if (done) {
		r = 0; /* still synced below: the page cache may be ahead */
	} else if (rec->type == J_SIZE) {
		r = fx_os.ftruncate(fd, (off_t)size);
	} else if (rec->type == J_DATA) {
		ssize_t n = len ? fx_os.pwrite(fd, data, len, (off_t)off) : 0;

		r = n < 0 ? (int)n : (uint32_t)n == len ? 0 : -EIO;
	} else if (present) {
		r = fx_os.fsetxattr(fd, name, data, len, 0);
	} else {
		r = fx_os.fremovexattr(fd, name);
		if (r == -ENODATA || r == -EOPNOTSUPP)
			r = 0;
	}
	if (r == 0 && !fx_ss_has(j->ss, ino)) /* once per file, not per record */
		fx_ss_file(j->ss, fd);
	fx_os.close(fd);
out:
	free(ipath);
	free(name);
	return r;
}

/* Is path p a (at) or a directory above it? */
static int at_or_above(const char *p, const char *a)
{
	return !strcmp(a, p) || fx_under(a, p);
}

/*
 * Rule 5a: is every directory on the way to step k's destination that an
 * earlier step put there (the last step to move a name at or above that
 * path put one at it) there now?  1 if so, 0 if another is: the object
 * found at dst is not in the directory step k would have put it in.
 */
static int way_kept(struct fstx_domain *d, const struct jr *j, size_t k)
{
	const char *dst = j->steps[k].dst;
	char a[PATH_MAX];

	for (const char *sl = strchr(dst, '/'); sl; sl = strchr(sl + 1, '/')) {
		size_t n = (size_t)(sl - dst), i;
		struct stat st;
		int r;

		if (n >= sizeof(a))
			break;
		memcpy(a, dst, n);
		a[n] = '\0';
		for (i = k; i-- > 0;)
			if (j->steps[i].kind == FX_ST_MOVE &&
			    (at_or_above(j->steps[i].dst, a) || at_or_above(j->steps[i].src, a)))
				break;
		if (i == SIZE_MAX || strcmp(j->steps[i].dst, a) || !j->steps[i].ino)
			continue; /* the tree's, or moved away last: nothing to say */
		r = fx_lstat(d, a, &st);
		if (real_err(r))
			return r;
		if (r < 0 || (uint64_t)st.st_ino != j->steps[i].ino)
			return 0;
	}
	return 1;
}

/*
 * Rule 5a: undo a step above the mark if, and only if, its object is at
 * its destination.  Such a step can have happened only where the
 * filesystem made it durable out of order with the mark (btrfs's fsync
 * log, when another process fsyncs the object), so only its inode can
 * say; a step whose inode is unknown is left alone.
 */
static int undo_above(const struct jr *j, size_t k, struct fx_syncset *ss)
{
	struct fstx_domain *d = j->d;
	const struct fx_step *s = &j->steps[k];
	struct stat st, cur;
	int r;

	if (s->kind != FX_ST_MOVE)
		return 0; /* a creation in staging: cleanup removes it */
	if (!s->ino)
		return 0;
	r = fx_lstat(d, s->dst, &st);
	/* not there (also through a symlink a name of its way is now), but
	 * perhaps in its directory at another path (rule 5e) */
	if (r == -ENOENT || r == -ENOTDIR || r == -ELOOP ||
	    (r == 0 && (uint64_t)st.st_ino != s->ino))
		return (r = move_back_located(j, k, ss)) < 0 ? r : 0;
	if (r < 0)
		return r;
	/* its inode at dst, another object at src (the later steps undone
	 * already): the step did not run; its object was at dst before the
	 * transaction (an exchange, then a rename back) */
	r = fx_lstat(d, s->src, &cur);
	if (r == 0 && cur.st_ino != st.st_ino)
		return 0;
	if (real_err(r))
		return r;
	/* its inode at dst, but dst in another directory than the one the
	 * step puts it in: a name it had (d/c, where d came back after d2/c
	 * moved away: test_crash kill_dir_round_trip) */
	if ((r = in_dir(d, s->dst, s->ddir)) <= 0)
		return r;
	/* its inode at dst (and at src, or nothing there), where a step
	 * before it moves that inode away from dst: dst is a name the object
	 * had (a hard link: rename b old exchange, rename hard b exchange),
	 * which that step, not run either, was to move; not this step's
	 * rename.  (Had this step run, that one would have too.)  test_crash
	 * kill_hard_names, cli.bats "hard links exchanged".  Not a directory,
	 * which has one name: moved away and back, both steps may have run
	 * with the names changed under it between them, and reversing both
	 * (later steps first) is a no-op where neither did (test_powerloss
	 * power_loss_names) */
	if (!S_ISDIR(st.st_mode) && name_it_had(j, k))
		return 0;
	/* and not where a directory on the way to dst is not the one the
	 * steps before it put there: dst is then a name of another
	 * directory (d/h, a hard link, under the d a step moved away,
	 * where a new d was to take the step's object; test_crash
	 * kill_link_under_moved, rebooted) */
	if ((r = way_kept(d, j, k)) <= 0)
		return r;
	return move_back(j, k, s->dst, &st, ss);
}

/*
 * Rule 5c: was the journal written in this epoch (this boot, this mount)?
 * Then the page cache holds every step that ran and the mark set before
 * it (rule 5): no step above the mark ran.
 */
static int same_epoch(const struct jr *j)
{
	char now[37];

	return j->epoch[0] && fx_epoch_id(j->d, now) == 0 &&
	       !memcmp(now, j->epoch, J_EPOCH);
}

/*
 * Rule 6: the directories step k's names are in now join the undo's
 * barrier, whether or not the step was reversed.  A reversal left out (a
 * name the object had, rule 5d; a move away and back) leaves the names
 * as the page cache has them, the step's own renames among them, and
 * only those directories' fsync makes that so on disk before the journal
 * goes (test_powerloss power_loss_names: "rename old d/e/x; rename d/e/x
 * old", then a failure).  A directory not there now holds none of them.
 */
static int step_dirs(const struct jr *j, size_t k)
{
	const char *p[2] = { j->steps[k].src, j->steps[k].dst }, *name;

	for (int i = 0; i < 2 && j->ss; i++) {
		int dfd = p[i] ? fx_parent(j->d, p[i], &name) : -ENOENT;

		/* one it cannot reach (not there, not searchable) took no
		 * name of the step's: only a failure of the system counts */
		if (dfd == -EIO || dfd == -ENOMEM)
			return dfd;
		if (dfd >= 0) {
			fx_ss_dir(j->ss, dfd);
			fx_os.close(dfd);
		}
	}
	return 0;
}

static int journal_undo(struct jr *j)
{
	int r, mark = fx_mark_get(j->d), live;

	if (mark < 0 && mark != -1)
		return mark;
	j->same_epoch = same_epoch(j);
	live = mark + 1 < (long)j->nsteps && j->same_epoch;
	if (mark > 0 && (size_t)mark >= j->nsteps)
		return -EUCLEAN;
	if (mark == 0 && !j->nsteps)
		mark = -1; /* rule 3: changes began, but there are no steps */
	for (long i = (long)j->nsteps - 1; i > mark && !live; i--)
		if ((r = undo_above(j, (size_t)i, j->ss)) < 0)
			return r;
	for (long i = mark; i >= 0; i--)
		if ((r = fx_mark_set(j->d, i)) < 0 ||
		    (r = undo_step(j, (size_t)i, j->ss)) < 0 ||
		    (r = step_dirs(j, (size_t)i)) < 0)
			return r;
	/* Sizes first, then data inside them, then xattrs (rule 5). */
	for (int pass = J_SIZE; pass <= J_XATTR; pass++)
		for (size_t i = 0; i < j->nrecs; i++) {
			if (pass == J_DATA && j->recs[i].type == J_CLONE)
				r = apply_clone(j, &j->recs[i]);
			else if (j->recs[i].type == pass)
				r = apply_rec(j, &j->recs[i]);
			else
				continue;
			if (r < 0)
				return r;
		}
	return 0;
}

int fx_recover_locked(struct fstx_domain *d)
{
	return fx_recover_mode(d, 0);
}

int fx_recover_mode(struct fstx_domain *d, int ignore_commit)
{
	struct jr j = { .d = d };
	int r = fx_journal_hot(d), complete;

	if (r == 0) {
		/* Rule 1: empty, but a progress mark says changes began.  Marks
		 * exist only beside a hot journal, so an empty journal with one
		 * is damage from outside: looked for once per handle. */
		if (d->marks_clean)
			return 0;
		r = fx_mark_any(d);
		d->marks_clean = r == 0;
		return r < 0 ? r : r ? -EUCLEAN : 0;
	}
	if (r < 0)
		return r;
	j.buf = fx_malloc(J_MAXREC);
	if (!j.buf)
		return -ENOMEM;
	complete = journal_load(&j);
	if (complete < 0) {
		r = complete;
		goto out;
	}
	if (complete)
		d->txid = j.txid; /* names its progress mark */
	if (complete && (!j.committed || ignore_commit)) {
		struct fx_syncset ss;

		fx_ss_init(&ss);
		j.ss = &ss;
		r = journal_undo(&j);
		/* rule 6: what the undo changed, durable before the clear */
		if (r < 0) {
			fx_ss_drop(&ss);
			goto out;
		}
		r = fx_ss_flush(&ss);
		if (r < 0) {
			d->latched = r;
			goto out;
		}
	}
	/* marks first: an empty journal with a mark is damage (rule 1) */
	r = fx_clean_scratch(d);
	if (r < 0)
		goto out;
	r = fx_journal_clear(d, 1);
	if (r == 0)
		r = 1;
out:
	for (size_t i = 0; i < j.nsteps; i++) {
		free(j.steps[i].src);
		free(j.steps[i].dst);
		free(j.steps[i].aux);
	}
	free(j.steps);
	free(j.recs);
	free(j.buf);
	return r;
}
