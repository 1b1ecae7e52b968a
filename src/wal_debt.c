/* SPDX-License-Identifier: MIT */
/*
 * wal_debt.c - W11: what a checkpoint without barriers leaves unsynced.
 *
 * A checkpoint because the log is full, when every record since the last
 * one is crash-only (the hint's kept word 0), drops the records without
 * fsyncing the objects they name.  It lists those objects instead, in
 * .fstx/wdebt, and sets the hint's loose word; whoever next needs them
 * durable (a durable commit of the log, a checkpoint with barriers, which
 * every transaction of the undo way and fstx_sync() run first) fsyncs each
 * object listed (fx_w_debt_pay()) and empties the list.
 *
 * .fstx/wdebt: canonical paths beneath the domain ("." for its root), each
 * ended by a NUL byte: each file a record writes, the directory holding
 * each name a record makes or removes, each directory a record makes, in
 * record order (a path repeated next to itself is listed once), and
 * .fstx/wnew last when a record moved a name to or from it (W6).  A loose
 * checkpoint appends to it while loose is set and writes it from its start
 * when loose is clear; it never holds more than W_CHUNK bytes (a loose
 * checkpoint that would pass that has its barriers instead).  Never synced:
 * like the hint, it serves one boot (power loss ends every debt).
 *
 * Paying by path is sound because nothing moves an object a record named
 * before the debt is paid: a durable record that renames objects (W15)
 * pays it at its barrier, before its renames are applied, and the undo
 * way, which moves them too, checkpoints the log with its barriers first.  A path removed since needs nothing (the
 * removal's directory is listed or was synced by a durable commit's
 * checkpoint); another object now at a listed path is fsynced too, which
 * costs a barrier and changes nothing.
 */
#define _GNU_SOURCE
#include "syncset.h"
#include "wal_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define W_DEBT ".fstx/wdebt"

struct debt_out {
	char *buf;
	size_t n, last, cap; /* bytes listed; where the last path starts */
	int full, staged;    /* staged: a name moved to or from .fstx/wnew/ */
};

/* List path (its first len bytes), unless it was the last one listed. */
static void list_path(struct debt_out *o, const char *path, size_t len)
{
	if (!len) {
		path = ".";
		len = 1;
	}
	if (o->n && o->n - o->last - 1 == len && !memcmp(o->buf + o->last, path, len))
		return;
	if (o->n + len + 1 > o->cap) {
		o->full = 1;
		return;
	}
	o->last = o->n;
	memcpy(o->buf + o->n, path, len);
	o->buf[o->n + len] = 0;
	o->n += len + 1;
}

/* What w_objects() says entry e names, by path. */
static int note_entry(struct fstx_domain *d, const struct went *e,
		      const char *path, const char *name, uint64_t data,
		      struct wvisit *v)
{
	unsigned obj = w_objects(e->kind, e->nlen, e->a);
	struct debt_out *o = v->arg;
	const char *slash = strrchr(path, '/'), *ns = strrchr(name, '/');

	(void)d;
	(void)data;
	if (obj & W_OBJ_WNEW)
		o->staged = 1;
	if (obj & W_OBJ_SRC)
		list_path(o, name, ns ? (size_t)(ns - name) : 0);
	if (obj & W_OBJ_PARENT)
		list_path(o, path, slash ? (size_t)(slash - path) : 0);
	if (obj & W_OBJ_FILE)
		list_path(o, path, strlen(path));
	return o->full ? 1 : 0;
}

/*
 * List what the log's records name (a loose checkpoint, W11).  0 listed;
 * 1 too much to list (the checkpoint has its barriers instead); -errno.
 */
int fx_w_debt_note(struct fstx_domain *d)
{
	struct debt_out o = { 0 };
	struct wvisit v = { .fn = note_entry, .arg = &o };
	struct stat st;
	struct wrec h;
	uint64_t at = 0;
	int fd, r = 0;

	if ((fd = fx_open(d, W_DEBT, O_RDWR | O_CREAT | O_NOFOLLOW, 0600)) < 0)
		return fd;
	if (d->wal_loose && (r = fx_os.fstat(fd, &st)) == 0)
		at = (uint64_t)st.st_size;
	if (r == 0 && at >= W_CHUNK)
		r = 1;
	o.cap = at < W_CHUNK ? W_CHUNK - at : 0;
	if (r == 0 && !(o.buf = fx_malloc(o.cap)))
		r = -ENOMEM;
	for (uint64_t off = W_START; r == 0 && off < d->wal_end;
	     off = rec_next(off, &h)) {
		if ((r = fx_w_rec_head(d, off, &h)) == 0)
			r = fx_w_rec_walk(d, off, &h, &v);
	}
	if (r == 0 && o.staged)
		list_path(&o, W_WNEW, strlen(W_WNEW) - 1);
	if (r == 0 && o.full)
		r = 1;
	if (r == 0)
		r = fx_w_write_all(fd, o.buf, o.n, at);
	if (r == 0 && !d->wal_loose)
		r = fx_os.ftruncate(fd, (off_t)o.n); /* a list of a debt paid */
	free(o.buf);
	fx_os.close(fd);
	return r == -ENODATA ? -EUCLEAN : r;
}

/* Take the object at path into ss: a file or directory still there. */
static void pay_path(struct fstx_domain *d, const char *path,
		     struct fx_syncset *ss)
{
	int fd = fx_open_owned(d, path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW);

	if (fd >= 0)
		fx_ss_take(ss, fd);
	else if (!w_gone(fd))
		fx_ss_take(ss, fd); /* the error: the debt stays */
}

/*
 * W11: fsync every object .fstx/wdebt lists, then empty it.  0 or -errno
 * (the list stays for the next one to try).
 */
int fx_w_debt_pay(struct fstx_domain *d)
{
	struct fx_syncset ss;
	struct stat st;
	char *buf = NULL;
	size_t len;
	int fd, r;

	if ((fd = fx_open(d, W_DEBT, O_RDWR | O_NOFOLLOW, 0)) < 0)
		return fd == -ENOENT ? 0 : fd;
	if ((r = fx_os.fstat(fd, &st)) < 0)
		goto out;
	len = st.st_size < W_CHUNK ? (size_t)st.st_size : W_CHUNK;
	r = -ENOMEM;
	if (!(buf = fx_malloc(len + 1)))
		goto out;
	if ((r = fx_w_read_all(fd, buf, len, 0)) < 0)
		goto out;
	buf[len] = 0;
	fx_ss_init(&ss);
	for (size_t k = 0; k < len; k += strlen(buf + k) + 1)
		if (buf[k])
			pay_path(d, buf + k, &ss);
	if ((r = fx_ss_flush(&ss)) == 0)
		r = fx_os.ftruncate(fd, 0);
out:
	free(buf);
	fx_os.close(fd);
	return r;
}
