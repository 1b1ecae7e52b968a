/* SPDX-License-Identifier: MIT */
/*
 * common.h - shared set-up of the fuzz targets: a scratch area on tmpfs
 * (/dev/shm, or $FSTX_FUZZ_DIR) holding the domain and a watched sibling
 * tree "outside" that no input may change, and the all-or-nothing oracle.
 * Fuzz code calls libc directly, like the tests.
 */
#ifndef FSTX_FUZZ_COMMON_H
#define FSTX_FUZZ_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "os.h"
#include "helpers.h"

static char *fz_base, *fz_dom, *fz_out;
static char *fz_out_snap;

/* Die loudly: libFuzzer records the input that made us abort. */
#define FZ_CHECK(cond, ...)                                                  \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "fuzz oracle: " __VA_ARGS__);        \
			fprintf(stderr, "\n");                               \
			abort();                                             \
		}                                                            \
	} while (0)

static void fz_rmtree_at_exit(void)
{
	if (fz_base)
		t_rmtree(fz_base);
}

/* Once per process: the scratch area and the outside tree. */
static void fz_setup(void)
{
	const char *b = getenv("FSTX_FUZZ_DIR");

	if (fz_base)
		return;
	if (!b || !*b)
		b = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	if (asprintf(&fz_base, "%s/fstx-fuzz-XXXXXX", b) < 0 ||
	    !mkdtemp(fz_base))
		abort();
	atexit(fz_rmtree_at_exit);
	if (asprintf(&fz_dom, "%s/dom", fz_base) < 0 ||
	    asprintf(&fz_out, "%s/outside", fz_base) < 0)
		abort();
	t_write(fz_out, "secret", "outside data\n", 13);
	t_write(fz_out, "dir/file", "more outside data\n", 18);
	fz_out_snap = t_snapshot(fz_out);
}

/* A fresh populated domain (test/corpus.h's tree); returns its snapshot. */
static char *fz_fresh_domain(void)
{
	t_rmtree(fz_dom);
	mkdir(fz_dom, 0755);
	t_populate(fz_dom);
	/* A name that leads outside, for inputs to try. */
	char p[4096];

	snprintf(p, sizeof(p), "%s/out", fz_dom);
	symlink("../outside", p);
	return t_snapshot(fz_dom);
}

/* @FILE, copy-in and import may only read beneath the outside tree while
 * parsing (fz_parse_text()). */
static int fz_in_parse;

static inline int fz_beneath_openat2(int dirfd, const char *p, int flags, mode_t mode,
				     uint64_t resolve)
{
	if (fz_in_parse)
		resolve |= 0x08 | 0x02; /* RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS */
	return fx_os_libc.openat2(dirfd, p, flags, mode, resolve);
}

/* Parse an input as transaction text, its files read beneath the outside
 * tree: fx_txt_parse_named()'s result, t to be freed either way. */
static inline int fz_parse_text(const unsigned char *data, size_t size, struct fx_txt *t)
{
	int basefd, r;

	fx_os.openat2 = fz_beneath_openat2;
	basefd = open(fz_out, O_RDONLY | O_DIRECTORY); /* @FILE reads here */
	fz_in_parse = 1;
	memset(t, 0, sizeof(*t));
	t->stdin_taken = 1; /* "@-" must not wait on the fuzzer's stdin */
	r = fx_txt_parse_named((const char *)data, size, basefd, "fuzz", t);
	fz_in_parse = 0;
	close(basefd);
	return r;
}

/* Parse text (it must parse) and run it on the fuzzed domain. */
static inline long fz_run_text(const char *text)
{
	struct btrfs_ioctl_usertrans ut = { 0 };
	struct fx_txt t;
	int fd;
	long r;

	if (fx_txt_parse(text, strlen(text), AT_FDCWD, &t) < 0)
		abort();
	fx_txt_ut(&t, &ut);
	fd = open(fz_dom, O_RDONLY | O_DIRECTORY);
	r = fstx_usertrans(fd, &ut);
	close(fd);
	fx_txt_free(&t);
	return r;
}

/* DIR/.fstx/rel of the fuzzed domain (malloc'd). */
static inline char *fz_path_in(const char *rel)
{
	char *p;

	if (asprintf(&p, "%s/.fstx/%s", fz_dom, rel) < 0)
		abort();
	return p;
}

/* Everything under the domain's .fstx/ but the log and its notes, as text. */
static inline char *fz_meta_snap(void)
{
	char *m = fz_path_in(""), *s, *o, *w;

	s = t_snapshot(m);
	free(m);
	for (o = w = s; *o;) { /* drop the lines of wal, walsync, wnew/ */
		char *e = strchr(o, '\n');
		size_t l = e ? (size_t)(e - o + 1) : strlen(o);

		if (strncmp(o, "wal ", 4) && strncmp(o, "walsync ", 8) &&
		    strncmp(o, "wnew/", 5)) {
			memmove(w, o, l);
			w += l;
		}
		o += l;
	}
	*w = 0;
	return s;
}

static inline void fz_write_file(const char *p, const unsigned char *b, size_t n)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, b, n) != (ssize_t)n)
		abort();
	close(fd);
}

static inline unsigned char *fz_read_file(const char *p, size_t *n)
{
	struct stat st;
	unsigned char *b;
	int fd = open(p, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) < 0)
		abort();
	b = malloc((size_t)st.st_size + 1);
	if (!b || read(fd, b, (size_t)st.st_size) != st.st_size)
		abort();
	close(fd);
	*n = (size_t)st.st_size;
	return b;
}

/*
 * Damage j (*n bytes) as the input says: (offset, xor) patches of 5 bytes
 * each, and with opt bit 1 a cut to (opt >> 2)/64 of it.  1 if anything
 * changed.
 */
static inline int fz_damage(unsigned char *j, size_t *n, const unsigned char *data,
			    size_t size, unsigned opt)
{
	int damaged = 0;

	for (size_t i = 0; *n && i + 5 <= size; i += 5) {
		uint32_t off;

		memcpy(&off, data + i, 4);
		j[off % *n] ^= data[i + 4];
		damaged |= data[i + 4] != 0;
	}
	if (opt & 2) {
		size_t keep = *n * (opt >> 2) / 64;

		damaged |= keep < *n;
		*n = keep;
	}
	return damaged;
}

static void fz_check_outside(void)
{
	char *s = t_snapshot(fz_out);

	FZ_CHECK(strcmp(s, fz_out_snap) == 0, "a file outside the domain changed");
	free(s);
}

/*
 * Run ut on a fresh domain under the all-or-nothing oracle: ops_completed
 * within the vector (all of it on success), a failure leaves the tree as
 * before, no journal stays hot or wedged, nothing outside changes.
 */
static inline void fz_run_checked(struct btrfs_ioctl_usertrans *ut)
{
	char *before = fz_fresh_domain(), *after;
	int dirfd = open(fz_dom, O_RDONLY | O_DIRECTORY), r;
	struct fstx_status st;
	fstx_domain *d;

	r = (int)fstx_usertrans(dirfd, ut);
	FZ_CHECK(ut->ops_completed <= ut->num_ops, "ops_completed %llu > %llu",
		 (unsigned long long)ut->ops_completed, (unsigned long long)ut->num_ops);
	if (r < 0) {
		after = t_snapshot(fz_dom);
		FZ_CHECK(strcmp(before, after) == 0,
			 "transaction failed (%d, op %llu) but the tree changed", r,
			 (unsigned long long)ut->ops_completed);
		free(after);
	} else {
		FZ_CHECK(ut->ops_completed == ut->num_ops, "committed after %llu of %llu ops",
			 (unsigned long long)ut->ops_completed, (unsigned long long)ut->num_ops);
	}
	FZ_CHECK(fstx_domain_openfd(dirfd, &d) == 0, "reopen");
	FZ_CHECK(fstx_status(d, &st) == 0 && !st.hot && !st.wedged,
		 "journal left hot or wedged after %d", r);
	fstx_domain_close(d);
	close(dirfd);
	fz_check_outside();
	free(before);
}

#endif
