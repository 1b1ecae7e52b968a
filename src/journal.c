/*
 * journal.c - the undo journal, DIR/.fstx/journal, and recovery.
 *
 * Rules.  Each is relied on by recovery; a change to one is a format change.
 *
 *  1. The journal is clean when it is empty (size 0).  Any other content is
 *     a hot journal, and no transaction starts on the domain until recovery
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
 *     A record whose magic, txid or sequence does not match, or that is cut
 *     short, marks a segment that was torn before barrier 1 completed: no
 *     change of it can have happened, so recovery just discards it.  A record
 *     that matches but fails its CRC (or an unknown type or version) is
 *     corruption: recovery refuses (-EUCLEAN) and writes nothing.
 *  4. Name changes are made only as the planned steps, each a single
 *     create-in-staging (.fstx/new/N) or rename with RENAME_NOREPLACE into an
 *     absent name.  Removed names are renamed into .fstx/trash/N, never
 *     deleted before commit.  Nothing is ever overwritten, so every step can
 *     be undone and the undo of a step that did not happen is a no-op.
 *  5. Before step N runs, the progress mark .fstx/step.N replaces
 *     step.N-1 (a rename: namespace operations persist in order, so the
 *     mark never runs behind the steps).  Undo starts at the mark and runs
 *     the steps backwards, moving the mark down before each: every step
 *     below the mark is then known done and every one above known undone,
 *     so each check is exact: a MOVE src->dst is reversed if dst exists and
 *     src does not; a staged creation is removed if present.
 *     Then sizes, data ranges and xattrs of initial objects are restored at
 *     their initial paths (checked by inode number).  Undo is idempotent, so
 *     a crash during recovery is recovered by running it again.
 *  6. Commit: after the changes, syncfs() of the domain's filesystem
 *     (barrier 2) makes every change durable at once; then a COMMIT record
 *     is written at the next 512-byte boundary after END (so one sector
 *     holds it whole) and fdatasync()ed (barrier 3): that is the commit
 *     point.  A journal with a valid COMMIT needs no undo.  Afterwards the
 *     journal is truncated to 0 and trash emptied without a barrier: if
 *     that is lost, recovery finds the COMMIT and only cleans up.
 *     If barrier 3 fails, the transaction is rolled back from the intact
 *     journal, ignoring its COMMIT.  Recovery ends with syncfs, truncate,
 *     fdatasync.
 *  7. A failed barrier is never retried as if it had succeeded: the
 *     transaction is rolled back and the handle latches the error.
 *
 * Power-loss model: file data not covered by a barrier may be lost or torn;
 * namespace operations are assumed to persist in order (a prefix), as the
 * journaling filesystems fstx supports (ext4, xfs, btrfs) provide.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <stdio.h>
#include <sys/stat.h>

#define J_MAGIC 0x314a5846u /* "FXJ1" little-endian */
#define J_VERSION 1
#define J_CHUNK (1u << 20)  /* before-image bytes per DATA record */
#define J_MAXREC (J_CHUNK + 3 * PATH_MAX + 256)

enum { J_BEGIN = 1, J_STEP, J_SIZE, J_DATA, J_XATTR, J_END, J_COMMIT };

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
		nb = realloc(w->rec, cap);
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

static int jw_flush(struct jw *w)
{
	size_t done = 0;

	while (done < w->used) {
		ssize_t n = fstx_os.pwrite(w->d->jfd, w->buf + done,
					   w->used - done, w->off + (off_t)done);
		if (n < 0)
			return (int)n;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
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

uint64_t fx_journal_size(const struct fx_step *steps, size_t nsteps,
			 const struct fx_capture *caps, size_t ncaps)
{
	uint64_t n = recsz(24) + recsz(4);

	for (size_t i = 0; i < nsteps; i++)
		n += recsz(12 + strsz(steps[i].src) + strsz(steps[i].dst) +
			   strsz(steps[i].aux));
	for (size_t i = 0; i < ncaps; i++) {
		const struct fx_capture *c = &caps[i];

		if (c->want_size)
			n += recsz(24 + strsz(c->ipath));
		for (size_t r = 0; r < c->nranges; r++) {
			uint64_t len = c->ranges[r].len;
			uint64_t nrec = (len + J_CHUNK - 1) / J_CHUNK;

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
	r = fstx_os.fstat(fd, &st);
	if (r == 0 && (uint64_t)st.st_ino != c->ino)
		r = -ESTALE;
	if (r < 0) {
		fstx_os.close(fd);
		return r;
	}
	return fd;
}

static void write_data(struct jw *w, const struct fx_capture *c, int fd,
		       unsigned char *chunk)
{
	for (size_t r = 0; r < c->nranges && !w->err; r++) {
		uint64_t off = c->ranges[r].off, end = off + c->ranges[r].len;

		while (off < end && !w->err) {
			size_t want = end - off > J_CHUNK ? J_CHUNK : (size_t)(end - off);
			ssize_t got = fstx_os.pread(fd, chunk, want, (off_t)off);

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
		ssize_t n = fstx_os.fgetxattr(fd, c->xnames[x], val, FSTX_MAX_XATTR);

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
	fstx_os.close(fd);
}

int fx_journal_write(struct fstx_domain *d, const struct fx_step *steps,
		     size_t nsteps, const struct fx_capture *caps, size_t ncaps,
		     uint64_t nops)
{
	struct jw w = { .d = d, .cap = J_CHUNK + 4096 };
	unsigned char *chunk;
	int r;

	if (getrandom(&d->txid, sizeof(d->txid), 0) != sizeof(d->txid))
		d->txid ^= (uint64_t)(uintptr_t)&w ^ (uint64_t)nops;
	w.buf = malloc(w.cap);
	chunk = malloc(J_CHUNK > FSTX_MAX_XATTR ? J_CHUNK : FSTX_MAX_XATTR);
	if (!w.buf || !chunk) {
		r = -ENOMEM;
		goto out;
	}
	rec_put(&w, begin_magic, 8);
	put32(&w, J_VERSION);
	put32(&w, 0);
	put64(&w, nops);
	rec_end(&w, J_BEGIN);
	for (size_t i = 0; i < nsteps; i++) {
		put32(&w, steps[i].kind);
		put32(&w, steps[i].mode);
		put32(&w, steps[i].op);
		putstr(&w, steps[i].src);
		putstr(&w, steps[i].dst);
		putstr(&w, steps[i].aux);
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
	if (!r) {
		r = fstx_os.fdatasync(d->jfd); /* barrier 1 (rule 2) */
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
	n = fstx_os.pwrite(d->jfd, &c, sizeof(c), commit_off(d->jend));
	if (n != (ssize_t)sizeof(c))
		return n < 0 ? (int)n : -EIO;
	r = fstx_os.fdatasync(d->jfd); /* barrier 3: the commit point (rule 6) */
	if (r < 0)
		d->latched = r;
	return r;
}

int fx_journal_clear(struct fstx_domain *d, int durable)
{
	int r = fstx_os.ftruncate(d->jfd, 0);

	if (r < 0 || !durable)
		return r;
	r = fstx_os.fdatasync(d->jfd);
	if (r < 0)
		d->latched = r;
	return r;
}

int fx_journal_hot(struct fstx_domain *d)
{
	struct stat st;
	int r = fstx_os.fstat(d->jfd, &st);

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
	int committed;
};

struct cur { const unsigned char *p; size_t left; int bad; };

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

/* A path from the journal: non-empty, no NUL, relative, not "..". */
static char *getpath(struct cur *c, int may_be_empty)
{
	uint32_t len;
	const unsigned char *p = getbytes(c, &len);
	char *s;

	if (!p || len >= PATH_MAX || memchr(p, 0, len) ||
	    (!len && !may_be_empty) || (len && p[0] == '/')) {
		c->bad = 1;
		return NULL;
	}
	s = strndup((const char *)p, len);
	if (!s)
		c->bad = 1;
	return s;
}

static int add_step(struct jr *j, struct cur *c)
{
	struct fx_step s = { 0 };

	s.kind = (uint32_t)get(c, 4);
	s.mode = (uint32_t)get(c, 4);
	s.op = (uint32_t)get(c, 4);
	s.src = getpath(c, 1);
	s.dst = getpath(c, 0);
	s.aux = getpath(c, 1);
	if (c->bad || s.kind < FX_ST_MKFILE || s.kind > FX_ST_MOVE ||
	    strstr(s.dst, "..") || (s.src && strstr(s.src, ".."))) {
		free(s.src);
		free(s.dst);
		free(s.aux);
		return -EUCLEAN;
	}
	if (j->nsteps == j->csteps) {
		size_t cap = j->csteps ? 2 * j->csteps : 16;
		struct fx_step *ns = realloc(j->steps, cap * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		j->steps = ns;
		j->csteps = cap;
	}
	j->steps[j->nsteps++] = s;
	return 0;
}

static int add_rec(struct jr *j, uint16_t type, off_t off, uint32_t len)
{
	if (j->nrecs == j->crecs) {
		size_t cap = j->crecs ? 2 * j->crecs : 16;
		struct jrec *nr = realloc(j->recs, cap * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		j->recs = nr;
		j->crecs = cap;
	}
	j->recs[j->nrecs++] = (struct jrec){ type, off, len };
	return 0;
}

static int read_full(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = fstx_os.pread(fd, (char *)buf + done, len - done,
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
		return -EUCLEAN;
	r = read_full(j->d->jfd, j->buf, h->len, *off + (off_t)sizeof(*h));
	if (r <= 0)
		return r;
	crc = h->crc;
	h->crc = 0;
	if (fx_crc32c(fx_crc32c(0, h, sizeof(*h)), j->buf, h->len) != crc)
		return -EUCLEAN;
	*off += (off_t)(sizeof(*h) + pad8(h->len));
	return 1;
}

/* Pass 1: validate every record, load steps.  1 complete, 0 torn, <0. */
static int journal_load(struct jr *j)
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
		c = (struct cur){ j->buf, h.len, 0 };
		if (seq == 0) {
			if (h.type != J_BEGIN || h.len < 24 ||
			    memcmp(j->buf, begin_magic, 8))
				return 0;
			c.p += 8;
			c.left -= 8;
			if (get(&c, 4) != J_VERSION)
				return -EUCLEAN; /* from a future (or past) format */
			j->txid = h.txid;
		} else if (h.type == J_STEP) {
			if ((r = add_step(j, &c)) < 0)
				return r;
		} else if (h.type == J_SIZE || h.type == J_DATA || h.type == J_XATTR) {
			if ((r = add_rec(j, h.type, off - (off_t)pad8(h.len),
					 h.len)) < 0)
				return r;
		} else if (h.type == J_END) {
			if (get(&c, 4) != seq)
				return -EUCLEAN;
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

static int exists(struct fstx_domain *d, const char *p)
{
	struct stat st;
	int r = fx_lstat(d, p, &st);

	if (r == -ENOENT)
		return 0;
	return r < 0 ? r : 1;
}

static int remove_path(struct fstx_domain *d, const char *p, int dir)
{
	const char *name;
	int dfd = fx_parent(d, p, &name), r;

	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return dfd;
	r = fstx_os.unlinkat(dfd, name, dir ? AT_REMOVEDIR : 0);
	fstx_os.close(dfd);
	return r == -ENOENT ? 0 : r;
}

int fx_move(struct fstx_domain *d, const char *src, const char *dst)
{
	const char *sn, *dn;
	int sfd, dfd, r;

	sfd = fx_parent(d, src, &sn);
	if (sfd < 0)
		return sfd;
	dfd = fx_parent(d, dst, &dn);
	if (dfd < 0) {
		fstx_os.close(sfd);
		return dfd;
	}
	r = fstx_os.renameat2(sfd, sn, dfd, dn, RENAME_NOREPLACE);
	fstx_os.close(sfd);
	fstx_os.close(dfd);
	return r;
}

/* Rule 5: undo one step if it happened. */
static int undo_step(struct fstx_domain *d, const struct fx_step *s)
{
	int a, b;

	switch (s->kind) {
	case FX_ST_MOVE:
		if ((b = exists(d, s->dst)) <= 0)
			return b;
		if ((a = exists(d, s->src)) < 0)
			return a;
		if (a)
			return -EUCLEAN; /* both names exist: not our state */
		return fx_move(d, s->dst, s->src);
	case FX_ST_MKDIR:
		return remove_path(d, s->dst, 1);
	default:
		return remove_path(d, s->dst, 0);
	}
}

/* Reopen the object a SIZE/DATA/XATTR record names, checking its inode. */
static int open_ino(struct fstx_domain *d, const char *ipath, uint64_t ino,
		    int flags)
{
	struct fx_capture c = { .ipath = (char *)ipath, .ino = ino };

	return open_capture(d, &c, flags);
}

static int apply_rec(struct jr *j, const struct jrec *rec)
{
	struct cur c = { j->buf, rec->len, 0 };
	uint64_t ino, off = 0, size = 0;
	uint32_t present = 0, len = 0;
	const unsigned char *data = NULL;
	char *ipath = NULL, *name = NULL;
	int r, fd;

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
		name = getpath(&c, 0);
		data = getbytes(&c, &len);
	}
	r = -EUCLEAN;
	if (c.bad)
		goto out;
	fd = open_ino(j->d, ipath, ino,
		      rec->type == J_XATTR ? O_RDONLY | O_NONBLOCK : O_WRONLY);
	if (fd < 0) {
		r = fd;
		goto out;
	}
	if (rec->type == J_SIZE) {
		r = fstx_os.ftruncate(fd, (off_t)size);
	} else if (rec->type == J_DATA) {
		ssize_t n = len ? fstx_os.pwrite(fd, data, len, (off_t)off) : 0;

		r = n < 0 ? (int)n : (uint32_t)n == len ? 0 : -EIO;
	} else if (present) {
		r = fstx_os.fsetxattr(fd, name, data, len, 0);
	} else {
		r = fstx_os.fremovexattr(fd, name);
		if (r == -ENODATA || r == -EOPNOTSUPP)
			r = 0;
	}
	fstx_os.close(fd);
out:
	free(ipath);
	free(name);
	return r;
}

static int journal_undo(struct jr *j)
{
	int r, mark = fx_mark_get(j->d);

	if (mark < 0 && mark != -1)
		return mark;
	if (mark >= 0 && (size_t)mark >= j->nsteps)
		return -EUCLEAN;
	for (long i = mark; i >= 0; i--)
		if ((r = fx_mark_set(j->d, i)) < 0 ||
		    (r = undo_step(j->d, &j->steps[i])) < 0)
			return r;
	/* Sizes first, then data inside them, then xattrs (rule 5). */
	for (int pass = J_SIZE; pass <= J_XATTR; pass++)
		for (size_t i = 0; i < j->nrecs; i++)
			if (j->recs[i].type == pass &&
			    (r = apply_rec(j, &j->recs[i])) < 0)
				return r;
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

	if (r <= 0)
		return r;
	j.buf = malloc(J_MAXREC);
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
		r = journal_undo(&j);
		if (r < 0)
			goto out;
		r = fstx_os.syncfs(d->root); /* rule 6 */
		if (r < 0) {
			d->latched = r;
			goto out;
		}
	}
	r = fx_journal_clear(d, 1);
	if (r < 0)
		goto out;
	r = fx_clean_scratch(d);
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
