/* SPDX-License-Identifier: MIT */
/* helpers.c - see helpers.h.  Test code calls libc directly on purpose. */
#define _GNU_SOURCE
#include "helpers.h"

#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/ioctl.h>

#ifndef T_SRCDIR
#define T_SRCDIR "." /* the source tree (test/names.tx): the Makefile says */
#endif

extern uint64_t fx_clone_min; /* journal.c (internal) */
extern uint64_t fx_wal_stage_min; /* wal.c (internal) */
extern uint64_t fx_wal_large; /* wal.c (internal) */

/* FSTX_CLONE_MIN=N: clone before-images of N bytes or more (where reflink
 * works), so the crash harness covers the clone path with small tx;
 * FSTX_WAL_STAGE_MIN=N: stage pwrites of N bytes or more (wal.c W13);
 * FSTX_WAL_LARGE=N: log at most N bytes of data (more: new files of
 * FSTX_WAL_STAGE_MIN bytes or more written whole, W22, else the undo way). */
__attribute__((constructor)) static void t_clone_min(void)
{
	const char *v = getenv("FSTX_CLONE_MIN");

	if (v && *v)
		fx_clone_min = strtoull(v, NULL, 0);
	v = getenv("FSTX_WAL_STAGE_MIN");
	if (v && *v)
		fx_wal_stage_min = strtoull(v, NULL, 0);
	v = getenv("FSTX_WAL_LARGE");
	if (v && *v)
		fx_wal_large = strtoull(v, NULL, 0);
}

__attribute__((noreturn)) static void die(const char *what)
{
	perror(what);
	abort();
}

long t_env_long(const char *name, long dflt)
{
	const char *v = getenv(name);
	long n = v && *v ? strtol(v, NULL, 0) : dflt;

	return n > 0 ? n : dflt;
}

char *t_mkdomain(void)
{
	const char *base = getenv("FSTX_TEST_DIR");
	char *p;

	if (asprintf(&p, "%s/fstx-test-XXXXXX", base && *base ? base : "/tmp") < 0)
		die("asprintf");
	if (!mkdtemp(p))
		die("mkdtemp");
	return p;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p) < 0 && errno != ENOENT ? -1 : 0;
}

/* Give directories their owner's bits first (without privilege, a test
 * may leave one its owner may not list or enter). */
static int unlock_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	if (flag == FTW_D || flag == FTW_DNR)
		chmod(p, (st->st_mode & 07777) | S_IRWXU);
	return 0;
}

void t_rmtree(const char *path)
{
	if (geteuid() != 0)
		for (int k = 0; k < 8; k++) /* each pass reaches one level deeper */
			nftw(path, unlock_one, 64, FTW_PHYS);
	nftw(path, rm_one, 64, FTW_DEPTH | FTW_PHYS);
}

static void mkparents(const char *path)
{
	char *c = strdup(path);

	for (char *s = c + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		mkdir(c, 0755);
		*s = '/';
	}
	free(c);
}

void t_write(const char *dir, const char *rel, const char *data, size_t len)
{
	char *p;
	int fd;

	if (asprintf(&p, "%s/%s", dir, rel) < 0)
		die("asprintf");
	mkparents(p);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len)
		die(p);
	close(fd);
	free(p);
}

char *t_read(const char *dir, const char *rel, size_t *len)
{
	char *p, *buf;
	struct stat st;
	int fd;

	if (asprintf(&p, "%s/%s", dir, rel) < 0)
		die("asprintf");
	fd = open(p, O_RDONLY);
	free(p);
	if (fd < 0)
		return NULL;
	fstat(fd, &st);
	buf = calloc(1, (size_t)st.st_size + 1);
	if (read(fd, buf, (size_t)st.st_size) != st.st_size)
		die("read");
	close(fd);
	if (len)
		*len = (size_t)st.st_size;
	return buf;
}

/* the text so far, and the names of files with more than one link */
struct sb {
	char *s;
	size_t len, cap;
	struct { uint64_t ino; char *name; } *ln;
	size_t nln, cln;
};

static void sb_add(struct sb *b, const char *fmt, ...)
{
	va_list ap;
	char *t;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&t, fmt, ap);
	va_end(ap);
	if (n < 0)
		die("vasprintf");
	if (b->len + (size_t)n + 1 > b->cap) {
		b->cap = (b->len + (size_t)n + 1) * 2;
		b->s = realloc(b->s, b->cap);
	}
	memcpy(b->s + b->len, t, (size_t)n + 1);
	b->len += (size_t)n;
	free(t);
}

static uint64_t fnv(const unsigned char *p, size_t n, uint64_t h)
{
	/* (p NULL: a file its caller may not read, without privilege) */
	for (size_t i = 0; p && i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

static void snap_xattrs(struct sb *b, const char *p)
{
	char list[4096], val[65536];
	ssize_t n = llistxattr(p, list, sizeof(list));
	char *names[64];
	int nn = 0;

	for (ssize_t o = 0; o < n && nn < 64; o += (ssize_t)strlen(list + o) + 1)
		names[nn++] = list + o;
	/* order independent */
	for (int i = 0; i < nn; i++)
		for (int j = i + 1; j < nn; j++)
			if (strcmp(names[i], names[j]) > 0) {
				char *t = names[i];
				names[i] = names[j];
				names[j] = t;
			}
	for (int i = 0; i < nn; i++) {
		ssize_t v = lgetxattr(p, names[i], val, sizeof(val));

		sb_add(b, " x:%s=%016llx/%zd", names[i],
		       (unsigned long long)fnv((unsigned char *)val, v > 0 ? (size_t)v : 0,
					       0xcbf29ce484222325ULL), v);
	}
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void snap(struct sb *b, const char *root, const char *rel)
{
	char *p, **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d;

	if (asprintf(&p, "%s%s%s", root, *rel ? "/" : "", rel) < 0)
		die("asprintf");
	d = opendir(p);
	if (!d && errno == EACCES) { /* without privilege: listed as empty */
		free(p);
		return;
	}
	if (!d)
		die(p);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!*rel && !strcmp(e->d_name, ".fstx"))
			continue;
		if (n == cap)
			names = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof(*names));
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp);
	for (size_t i = 0; i < n; i++) {
		char *r, *full;
		struct stat st;

		if (asprintf(&r, "%s%s%s", rel, *rel ? "/" : "", names[i]) < 0 ||
		    asprintf(&full, "%s/%s", root, r) < 0)
			die("asprintf");
		if (lstat(full, &st) < 0)
			die(full);
		sb_add(b, "%s mode=%o nlink=%lu", r, st.st_mode,
		       S_ISDIR(st.st_mode) ? 0ul : (unsigned long)st.st_nlink);
		if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
			if (b->nln == b->cln)
				b->ln = realloc(b->ln, (b->cln = b->cln ? 2 * b->cln : 8) *
						       sizeof(*b->ln));
			b->ln[b->nln].ino = st.st_ino;
			b->ln[b->nln++].name = strdup(r);
		}
		if (S_ISREG(st.st_mode)) {
			size_t len;
			char *data = t_read(root, r, &len);

			sb_add(b, " size=%zu data=%016llx", len,
			       (unsigned long long)fnv((unsigned char *)data, len,
						       0xcbf29ce484222325ULL));
			free(data);
		} else if (S_ISLNK(st.st_mode)) {
			char t[4096];
			ssize_t l = readlink(full, t, sizeof(t) - 1);

			t[l > 0 ? l : 0] = 0;
			sb_add(b, " -> %s", t);
		}
		if (!S_ISLNK(st.st_mode))
			snap_xattrs(b, full);
		sb_add(b, "\n");
		if (S_ISDIR(st.st_mode))
			snap(b, root, r);
		free(r);
		free(full);
		free(names[i]);
	}
	free(names);
	free(p);
}

char *t_snapshot(const char *dir)
{
	struct sb b = { 0 };

	sb_add(&b, "");
	snap(&b, dir, "");
	/* which names are one file: each with the first name of its inode
	 * (names come in sorted order), so a file copied back where a link
	 * was differs from the tree that had the link */
	for (size_t i = 0; i < b.nln; i++) {
		size_t j = 0;

		while (b.ln[j].ino != b.ln[i].ino)
			j++;
		sb_add(&b, "link %s = %s\n", b.ln[i].name, b.ln[j].name);
	}
	for (size_t i = 0; i < b.nln; i++)
		free(b.ln[i].name);
	free(b.ln);
	return b.s;
}

void t_populate(const char *dir)
{
	char big[20000];
	char *p;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + i % 26);
	t_write(dir, "a", "alpha\n", 6);
	t_write(dir, "b", "bravo bravo\n", 12);
	t_write(dir, "big", big, sizeof(big));
	t_write(dir, "d/c", "charlie\n", 8);
	t_write(dir, "d/e/f", "foxtrot\n", 8);
	t_write(dir, "old", "old\n", 4);
	if (asprintf(&p, "%s/empty", dir) < 0)
		die("asprintf");
	mkdir(p, 0750);
	free(p);
	if (asprintf(&p, "%s/a", dir) < 0)
		die("asprintf");
	setxattr(p, "user.k", "v1", 2, 0);
	free(p);
	if (asprintf(&p, "%s/ln", dir) < 0)
		die("asprintf");
	symlink("d/c", p);
	free(p);
	if (asprintf(&p, "%s/hard", dir) < 0)
		die("asprintf");
	{
		char *src;

		if (asprintf(&src, "%s/b", dir) < 0)
			die("asprintf");
		link(src, p);
		free(src);
	}
	free(p);
}

void t_link(const char *dir, const char *from, const char *to)
{
	char *a, *b;

	if (asprintf(&a, "%s/%s", dir, from) < 0 || asprintf(&b, "%s/%s", dir, to) < 0)
		die("asprintf");
	if (link(a, b) < 0)
		die(b);
	free(a);
	free(b);
}

void t_names_tree(const char *dir)
{
	t_write(dir, "p/q/z", "zz\n", 3);
	t_link(dir, "b", "d/h");
	t_link(dir, "a", "d/e/g");
	t_link(dir, "p/q/z", "y");
}

size_t t_names_tx(char ***tx)
{
	const char *e = getenv("FSTX_NAMES_TX");
	const char *path = e && *e ? e : T_SRCDIR "/test/names.tx";
	long max = t_env_long("FSTX_NAMES", -1);
	FILE *f = fopen(path, "r");
	char line[4096], *buf = NULL;
	size_t n = 0, len = 0;

	if (!f)
		die(path);
	*tx = NULL;
	while (fgets(line, sizeof(line), f) && (max < 0 || (long)n < max)) {
		size_t l = strlen(line);

		if (strcmp(line, "%%\n")) {
			buf = realloc(buf, len + l + 1);
			memcpy(buf + len, line, l + 1);
			len += l;
			continue;
		}
		if (!len)
			continue;
		*tx = realloc(*tx, (n + 1) * sizeof(**tx));
		(*tx)[n++] = buf;
		buf = NULL;
		len = 0;
	}
	free(buf); /* a last transaction without its "%%" is not one */
	fclose(f);
	return n;
}

struct btrfs_ioctl_usertrans_op t_op(uint64_t op, __s64 a0, __s64 a1, __s64 a2,
				     __s64 a3, __s64 a4)
{
	struct btrfs_ioctl_usertrans_op o = { .op = op, .args = { a0, a1, a2, a3, a4 } };

	return o;
}

int t_dirfd(const char *dir)
{
	return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

long t_run(const char *dir, struct btrfs_ioctl_usertrans_op *ops, size_t n,
	   uint64_t nfds, uint64_t flags, uint64_t *completed)
{
	struct btrfs_ioctl_usertrans ut = {
		.num_ops = n, .ops_ptr = (uint64_t)(uintptr_t)ops, .num_fds = nfds,
		.flags = flags,
	};
	int fd = t_dirfd(dir);
	long r = fstx_usertrans(fd, &ut);

	close(fd);
	if (completed)
		*completed = ut.ops_completed;
	return r;
}

char *t_fresh(void)
{
	char *d = t_mkdomain();

	t_populate(d);
	return d;
}

void t_drop(char *dir)
{
	t_rmtree(dir);
	free(dir);
}

int t_reflink(const char *dir)
{
	char *a, *b;
	int fa, fb, ok;

	if (asprintf(&a, "%s/.rl-a", dir) < 0 || asprintf(&b, "%s/.rl-b", dir) < 0)
		die("asprintf");
	fa = open(a, O_RDWR | O_CREAT, 0600);
	fb = open(b, O_RDWR | O_CREAT, 0600);
	ok = fa >= 0 && fb >= 0 &&
	     ioctl(fb, FICLONERANGE, &(struct file_clone_range){ .src_fd = fa }) == 0;
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	unlink(a);
	unlink(b);
	free(a);
	free(b);
	return ok;
}
