/* SPDX-License-Identifier: MIT */
/*
 * txtext.c - parser for the transaction text format, fstx-tx(5):
 *
 *   # comment; blank lines ignored
 *   option wedge-on-fail | crash-only | wal | lazy
 *   option reserve DATA_BYTES METADATA_OPS
 *   open IDX PATH FLAGS [MODE]
 *   close IDX
 *   pwrite IDX DATA OFFSET
 *   unlink PATH
 *   link OLDPATH NEWPATH
 *   mkdir PATH [MODE]
 *   rmdir PATH
 *   truncate PATH SIZE
 *   setxattr PATH NAME DATA [create|replace]
 *   removexattr PATH NAME
 *   clonerange DSTIDX SRCIDX SRCOFF LEN DSTOFF
 *   rename OLDPATH NEWPATH [noreplace|exchange]
 *   symlink TARGET LINKPATH
 *   assert-absent PATH
 *   assert-exists PATH
 *   assert-data PATH DATA
 *   assert-xattr PATH NAME DATA
 *
 * Every op is strict (fails the transaction on an error or a short write)
 * unless it carries trailing seed conditions (!ne N, !eq N, !lt N, !gt N,
 * !le N, !ge N) or a leading '-' (result ignored).
 */
#define _GNU_SOURCE
#include "internal.h"
#include "fstx/btrfs_usertrans.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#define MAX_TOK 16
#define MAX_DATA_FILE (1ULL << 32)

struct tok { char *s; size_t len; int quoted; };

struct ps {
	struct fx_txt *t;
	int basedir;
	unsigned line;
	struct tok tok[MAX_TOK];
	int ntok;
	const char *opname;
};

static int perr(struct ps *p, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	p->t->errline = p->line;
	if (p->opname)
		n = snprintf(p->t->err, sizeof(p->t->err), "line %u: %s: ",
			     p->line, p->opname);
	else
		n = snprintf(p->t->err, sizeof(p->t->err), "line %u: ", p->line);
	if (n < 0 || (size_t)n >= sizeof(p->t->err))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(p->t->err + n, sizeof(p->t->err) - (size_t)n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static void *keep(struct ps *p, void *buf)
{
	struct fx_txt *t = p->t;

	if (!buf)
		return NULL;
	if (t->nbufs == t->cbufs) {
		size_t n = t->cbufs ? 2 * t->cbufs : 64;
		void **nb = fx_realloc(t->bufs, n * sizeof(*nb));

		if (!nb) {
			free(buf);
			return NULL;
		}
		t->bufs = nb;
		t->cbufs = n;
	}
	t->bufs[t->nbufs++] = buf;
	return buf;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Split one line into tokens (in place for bare words). */
static int tokenize(struct ps *p, char *s, const char *end)
{
	p->ntok = 0;
	while (s < end) {
		struct tok *tk;
		char *o;

		while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
			s++;
		if (s >= end || *s == '#')
			break;
		if (p->ntok == MAX_TOK)
			return perr(p, "too many tokens (at most %d)", MAX_TOK);
		tk = &p->tok[p->ntok++];
		if (*s != '"') {
			tk->s = s;
			while (s < end && *s != ' ' && *s != '\t' && *s != '\r')
				s++;
			tk->len = (size_t)(s - tk->s);
			tk->quoted = 0;
			if (s < end)
				*s++ = 0;
			continue;
		}
		tk->quoted = 1;
		tk->s = o = ++s;
		for (;;) {
			int a, b;

			if (s >= end)
				return perr(p, "unterminated quoted string");
			if (*s == '"')
				break;
			if (*s != '\\') {
				*o++ = *s++;
				continue;
			}
			if (++s >= end)
				return perr(p, "unterminated escape");
			switch (*s++) {
			case '\\': *o++ = '\\'; break;
			case '"': *o++ = '"'; break;
			case 'n': *o++ = '\n'; break;
			case 't': *o++ = '\t'; break;
			case 'r': *o++ = '\r'; break;
			case '0': *o++ = '\0'; break;
			case 'x':
				if (end - s < 2 || (a = hexval(s[0])) < 0 ||
				    (b = hexval(s[1])) < 0)
					return perr(p, "bad \\x escape (want \\xHH)");
				*o++ = (char)(a << 4 | b);
				s += 2;
				break;
			default:
				return perr(p, "unknown escape \\%c", s[-1]);
			}
		}
		tk->len = (size_t)(o - tk->s);
		s++; /* closing quote */
		if (s < end && *s != ' ' && *s != '\t' && *s != '\r')
			return perr(p, "text after closing quote");
		*o = 0; /* o < s: room for a terminator */
	}
	return 0;
}

static int num(struct ps *p, int i, const char *what, __s64 *out)
{
	const struct tok *tk = &p->tok[i];
	char *e;
	long long v;

	errno = 0;
	if (tk->quoted || !tk->len)
		return perr(p, "%s: expected a number, got \"%s\"", what, tk->s);
	v = strtoll(tk->s, &e, 0);
	if (*e || errno)
		return perr(p, "%s: bad number \"%s\"", what, tk->s);
	*out = v;
	return 0;
}

static int mode(struct ps *p, int i, __s64 *out)
{
	const struct tok *tk = &p->tok[i];
	char *e;
	long v;

	errno = 0;
	v = strtol(tk->s, &e, 8);
	if (tk->quoted || !tk->len || *e || errno || v < 0 || v > 07777)
		return perr(p, "MODE: expected octal 0..7777, got \"%s\"", tk->s);
	*out = v;
	return 0;
}

static int path(struct ps *p, int i, const char *what, __s64 *out)
{
	const struct tok *tk = &p->tok[i];

	if (memchr(tk->s, 0, tk->len))
		return perr(p, "%s: NUL byte in name", what);
	if (!tk->len)
		return perr(p, "%s: empty path", what);
	*out = (__s64)(intptr_t)tk->s;
	return 0;
}

static const struct { const char *name; int flag; } oflags[] = {
	{ "O_RDONLY", O_RDONLY }, { "O_WRONLY", O_WRONLY }, { "O_RDWR", O_RDWR },
	{ "O_CREAT", O_CREAT }, { "O_EXCL", O_EXCL }, { "O_TRUNC", O_TRUNC },
	{ "O_APPEND", O_APPEND }, { "O_NOFOLLOW", O_NOFOLLOW },
	{ "O_DIRECTORY", O_DIRECTORY },
};

static int openflags(struct ps *p, int i, __s64 *out)
{
	char *s = p->tok[i].s, *save = NULL, *w;
	char buf[256];
	__s64 f = 0;

	if (p->tok[i].len >= sizeof(buf))
		return perr(p, "FLAGS too long");
	memcpy(buf, s, p->tok[i].len + 1);
	for (w = strtok_r(buf, "|", &save); w; w = strtok_r(NULL, "|", &save)) {
		size_t k;

		for (k = 0; k < sizeof(oflags) / sizeof(oflags[0]); k++)
			if (!strcmp(w, oflags[k].name))
				break;
		if (k == sizeof(oflags) / sizeof(oflags[0]))
			return perr(p, "unknown open flag \"%s\" (O_RDONLY|O_WRONLY|"
				    "O_RDWR|O_CREAT|O_EXCL|O_TRUNC|O_APPEND)", w);
		f |= oflags[k].flag;
	}
	*out = f;
	return 0;
}

static int readfile(struct ps *p, const char *name, char **buf, size_t *len)
{
	struct stat st;
	size_t done = 0;
	int fd, r;

	fd = fx_os.openat2(p->basedir, name, O_RDONLY, 0, 0);
	if (fd < 0)
		return perr(p, "@%s: %s", name, strerror(-fd));
	r = fx_os.fstat(fd, &st);
	if (r < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_DATA_FILE) {
		fx_os.close(fd);
		return perr(p, "@%s: %s", name, r < 0 ? strerror(-r)
				   : "not a regular file of at most 4 GiB");
	}
	*buf = keep(p, fx_malloc((size_t)st.st_size + 1));
	if (!*buf) {
		fx_os.close(fd);
		return -ENOMEM;
	}
	while (done < (size_t)st.st_size) {
		ssize_t n = fx_os.pread(fd, *buf + done, (size_t)st.st_size - done,
					  (off_t)done);
		if (n <= 0) {
			fx_os.close(fd);
			return perr(p, "@%s: %s", name, n < 0 ? strerror((int)-n)
								: "file shrank while read");
		}
		done += (size_t)n;
	}
	fx_os.close(fd);
	*len = done;
	return 0;
}

static int data(struct ps *p, int i, __s64 *ptr, __s64 *len)
{
	struct tok *tk = &p->tok[i];
	char *buf = NULL;
	size_t n = 0;
	int r;

	if (tk->quoted) {
		*ptr = (__s64)(intptr_t)tk->s;
		*len = (__s64)tk->len;
		return 0;
	}
	if (tk->s[0] == '@') {
		if (!tk->s[1])
			return perr(p, "DATA: @ needs a file name");
		if ((r = readfile(p, tk->s + 1, &buf, &n)) < 0)
			return r;
		*ptr = (__s64)(intptr_t)buf;
		*len = (__s64)n;
		return 0;
	}
	if (!strncmp(tk->s, "x:", 2)) {
		const char *h = tk->s + 2;
		size_t hl = tk->len - 2;

		if (hl % 2)
			return perr(p, "DATA: odd number of hex digits");
		buf = keep(p, fx_malloc(hl / 2 + 1));
		if (!buf)
			return -ENOMEM;
		for (n = 0; n < hl / 2; n++) {
			int a = hexval(h[2 * n]), b = hexval(h[2 * n + 1]);

			if (a < 0 || b < 0)
				return perr(p, "DATA: bad hex digit");
			buf[n] = (char)(a << 4 | b);
		}
		*ptr = (__s64)(intptr_t)buf;
		*len = (__s64)n;
		return 0;
	}
	return perr(p, "DATA must be a \"quoted string\", @FILE or x:HEX, got %s",
		    tk->s);
}

/* Trailing !cond N modifiers; returns the number of tokens they use. */
static int conditions(struct ps *p, struct btrfs_ioctl_usertrans_op *op,
		      int *nargs)
{
	static const struct { const char *w; uint64_t f; } conds[] = {
		{ "!ne", BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE },
		{ "!eq", BTRFS_IOC_UT_OP_FLAG_FAIL_ON_EQ },
		{ "!lt", BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT },
		{ "!gt", BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GT },
		{ "!le", BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LTE },
		{ "!ge", BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GTE },
	};
	int have = 0, r;

	while (*nargs >= 3 && !p->tok[*nargs - 2].quoted &&
	       p->tok[*nargs - 2].s[0] == '!') {
		const char *w = p->tok[*nargs - 2].s;
		__s64 v;
		size_t k;

		for (k = 0; k < sizeof(conds) / sizeof(conds[0]); k++)
			if (!strcmp(w, conds[k].w))
				break;
		if (k == sizeof(conds) / sizeof(conds[0]))
			return perr(p, "unknown condition %s (!ne !eq !lt !gt !le !ge)", w);
		if ((r = num(p, *nargs - 1, w, &v)) < 0)
			return r;
		if (have && v != op->rval)
			return perr(p, "conditions of one op must share one value");
		op->flags |= conds[k].f;
		op->rval = v;
		have = 1;
		*nargs -= 2;
	}
	return have;
}

static int fdidx(struct ps *p, int i, __s64 *out)
{
	int r = num(p, i, "IDX", out);

	if (r == 0 && (*out < 0 || *out >= FSTX_MAX_FDS))
		return perr(p, "IDX %lld out of range 0..%d", (long long)*out,
			    FSTX_MAX_FDS - 1);
	if (r == 0 && (uint64_t)*out + 1 > p->t->num_fds)
		p->t->num_fds = (uint64_t)*out + 1;
	return r;
}

struct opdef { const char *name; uint64_t op; int min, max; };

static const struct opdef opdefs[] = {
	{ "open", BTRFS_IOC_UT_OP_OPEN, 3, 4 },
	{ "close", BTRFS_IOC_UT_OP_CLOSE, 1, 1 },
	{ "pwrite", BTRFS_IOC_UT_OP_PWRITE, 3, 3 },
	{ "unlink", BTRFS_IOC_UT_OP_UNLINK, 1, 1 },
	{ "link", BTRFS_IOC_UT_OP_LINK, 2, 2 },
	{ "mkdir", BTRFS_IOC_UT_OP_MKDIR, 1, 2 },
	{ "rmdir", BTRFS_IOC_UT_OP_RMDIR, 1, 1 },
	{ "truncate", BTRFS_IOC_UT_OP_TRUNCATE, 2, 2 },
	{ "setxattr", BTRFS_IOC_UT_OP_SETXATTR, 3, 4 },
	{ "removexattr", BTRFS_IOC_UT_OP_REMOVEXATTR, 2, 2 },
	{ "clonerange", BTRFS_IOC_UT_OP_CLONERANGE, 5, 5 },
	{ "rename", FSTX_OP_RENAME, 2, 3 },
	{ "symlink", FSTX_OP_SYMLINK, 2, 2 },
	{ "assert-absent", FSTX_OP_ASSERT_ABSENT, 1, 1 },
	{ "assert-exists", FSTX_OP_ASSERT_EXISTS, 1, 1 },
	{ "assert-data", FSTX_OP_ASSERT_DATA, 2, 2 },
	{ "assert-xattr", FSTX_OP_ASSERT_XATTR, 3, 3 },
};

static int args(struct ps *p, const struct opdef *d,
		struct btrfs_ioctl_usertrans_op *op, int n)
{
	__s64 *a = op->args;
	int r = 0;

	switch (d->op) {
	case BTRFS_IOC_UT_OP_OPEN:
		a[2] = 0644;
		if ((r = fdidx(p, 1, &a[3])) || (r = path(p, 2, "PATH", &a[0])) ||
		    (r = openflags(p, 3, &a[1])) || (n == 4 && (r = mode(p, 4, &a[2]))))
			return r;
		return 0;
	case BTRFS_IOC_UT_OP_CLOSE:
		return fdidx(p, 1, &a[0]);
	case BTRFS_IOC_UT_OP_PWRITE:
		if ((r = fdidx(p, 1, &a[0])) || (r = data(p, 2, &a[1], &a[2])) ||
		    (r = num(p, 3, "OFFSET", &a[3])))
			return r;
		return 0;
	case BTRFS_IOC_UT_OP_UNLINK:
	case BTRFS_IOC_UT_OP_RMDIR:
		return path(p, 1, "PATH", &a[0]);
	case BTRFS_IOC_UT_OP_LINK:
	case FSTX_OP_RENAME:
		if ((r = path(p, 1, "OLDPATH", &a[0])) || (r = path(p, 2, "NEWPATH", &a[1])))
			return r;
		if (d->op == FSTX_OP_RENAME && n == 3) {
			if (!strcmp(p->tok[3].s, "noreplace"))
				a[2] = RENAME_NOREPLACE;
			else if (!strcmp(p->tok[3].s, "exchange"))
				a[2] = RENAME_EXCHANGE;
			else
				return perr(p, "expected noreplace or exchange, got %s",
					    p->tok[3].s);
		}
		return 0;
	case BTRFS_IOC_UT_OP_MKDIR:
		a[1] = 0755;
		if ((r = path(p, 1, "PATH", &a[0])) || (n == 2 && (r = mode(p, 2, &a[1]))))
			return r;
		return 0;
	case BTRFS_IOC_UT_OP_TRUNCATE:
		if ((r = path(p, 1, "PATH", &a[0])) || (r = num(p, 2, "SIZE", &a[1])))
			return r;
		return 0;
	case BTRFS_IOC_UT_OP_SETXATTR:
		if ((r = path(p, 1, "PATH", &a[0])) || (r = path(p, 2, "NAME", &a[1])) ||
		    (r = data(p, 3, &a[2], &a[3])))
			return r;
		if (n == 4) {
			if (!strcmp(p->tok[4].s, "create"))
				a[4] = XATTR_CREATE;
			else if (!strcmp(p->tok[4].s, "replace"))
				a[4] = XATTR_REPLACE;
			else
				return perr(p, "expected create or replace, got %s",
					    p->tok[4].s);
		}
		return 0;
	case BTRFS_IOC_UT_OP_REMOVEXATTR:
		if ((r = path(p, 1, "PATH", &a[0])) || (r = path(p, 2, "NAME", &a[1])))
			return r;
		return 0;
	case BTRFS_IOC_UT_OP_CLONERANGE:
		if ((r = fdidx(p, 1, &a[0])) || (r = fdidx(p, 2, &a[1])) ||
		    (r = num(p, 3, "SRCOFF", &a[2])) || (r = num(p, 4, "LEN", &a[3])) ||
		    (r = num(p, 5, "DSTOFF", &a[4])))
			return r;
		return 0;
	case FSTX_OP_SYMLINK:
		if ((r = path(p, 1, "TARGET", &a[0])) || (r = path(p, 2, "LINKPATH", &a[1])))
			return r;
		return 0;
	case FSTX_OP_ASSERT_ABSENT:
	case FSTX_OP_ASSERT_EXISTS:
		return path(p, 1, "PATH", &a[0]);
	case FSTX_OP_ASSERT_DATA:
		if ((r = path(p, 1, "PATH", &a[0])) || (r = data(p, 2, &a[1], &a[2])))
			return r;
		return 0;
	case FSTX_OP_ASSERT_XATTR:
		if ((r = path(p, 1, "PATH", &a[0])) || (r = path(p, 2, "NAME", &a[1])) ||
		    (r = data(p, 3, &a[2], &a[3])))
			return r;
		return 0;
	}
	return perr(p, "internal: no argument parser");
}

static int option(struct ps *p)
{
	__s64 a, b;
	int r;

	p->opname = "option";
	if (p->ntok == 2 && !strcmp(p->tok[1].s, "wedge-on-fail")) {
		p->t->flags |= BTRFS_IOC_UT_FLAG_WEDGEONFAIL;
		return 0;
	}
	if (p->ntok == 2 && !strcmp(p->tok[1].s, "crash-only")) {
		p->t->flags |= FSTX_UT_NOSYNC;
		return 0;
	}
	if (p->ntok == 2 && !strcmp(p->tok[1].s, "wal")) {
		p->t->flags |= FSTX_UT_WAL;
		return 0;
	}
	if (p->ntok == 2 && !strcmp(p->tok[1].s, "lazy")) {
		p->t->flags |= FSTX_UT_LAZY;
		return 0;
	}
	if (p->ntok == 4 && !strcmp(p->tok[1].s, "reserve")) {
		if ((r = num(p, 2, "DATA_BYTES", &a)) || (r = num(p, 3, "METADATA_OPS", &b)))
			return r;
		if (a < 0 || b < 0)
			return perr(p, "reserve: negative value");
		p->t->data_bytes = (uint64_t)a;
		p->t->metadata_ops = (uint64_t)b;
		return 0;
	}
	return perr(p, "expected 'option wedge-on-fail', 'option crash-only', 'option wal', "
		    "'option lazy' or 'option reserve DATA_BYTES METADATA_OPS'");
}

static int line(struct ps *p)
{
	struct fx_txt *t = p->t;
	struct btrfs_ioctl_usertrans_op *op;
	const struct opdef *d = NULL;
	const char *w = p->tok[0].s;
	int ignore = 0, n, r;

	if (p->tok[0].quoted)
		return perr(p, "an op name cannot be quoted");
	if (!strcmp(w, "option"))
		return option(p);
	if (*w == '-') {
		ignore = 1;
		w++;
	}
	for (size_t k = 0; k < sizeof(opdefs) / sizeof(opdefs[0]); k++)
		if (!strcmp(w, opdefs[k].name))
			d = &opdefs[k];
	if (!d)
		return perr(p, "unknown op \"%s\"", p->tok[0].s);
	p->opname = d->name;
	if (t->nops >= FSTX_MAX_OPS)
		return perr(p, "more than %u ops", FSTX_MAX_OPS);
	if (t->nops == t->cops) {
		size_t c = t->cops ? 2 * t->cops : 64;
		void *no = fx_realloc(t->ops, c * sizeof(*t->ops));
		void *nl;

		if (!no)
			return -ENOMEM;
		t->ops = no;
		nl = fx_realloc(t->lines, c * sizeof(*t->lines));
		if (!nl)
			return -ENOMEM;
		t->lines = nl;
		t->cops = c;
	}
	op = &t->ops[t->nops];
	memset(op, 0, sizeof(*op));
	op->op = d->op;
	n = p->ntok;
	if ((r = conditions(p, op, &n)) < 0)
		return r;
	if (r && ignore)
		return perr(p, "'-' and conditions exclude each other");
	n--; /* arguments after the op name */
	if (n < d->min || n > d->max)
		return perr(p, "expected %d%s argument%s, got %d", d->min,
			    d->max > d->min ? " or more" : "", d->max > 1 ? "s" : "", n);
	if ((r = args(p, d, op, n)) < 0)
		return r;
	if (!r && !op->flags && !ignore) {
		/* strict: any error, or a short write, fails the transaction */
		if (d->op == BTRFS_IOC_UT_OP_PWRITE) {
			op->flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE;
			op->rval = op->args[2];
		} else {
			op->flags = BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT;
			op->rval = 0;
		}
	}
	t->lines[t->nops++] = p->line;
	return 0;
}

/*
 * The transaction text of the CLI, from a file or a pipe: read(2) to the
 * end, the buffer doubling from 64 KiB.  Through fx_os like all I/O, so
 * a test fails each read and each allocation.
 */
int fx_txt_read(int fd, char **out, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = fx_malloc(cap), *nb;
	ssize_t got;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			nb = cap <= SIZE_MAX / 2 ? fx_realloc(buf, cap * 2) : NULL;
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		got = fx_os.read(fd, buf + n, cap - n);
		if (got < 0) {
			free(buf);
			return (int)got;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	*out = buf;
	*len = n;
	return 0;
}

int fx_txt_parse(const char *text, size_t len, int basedir, struct fx_txt *t)
{
	struct ps p = { .t = t, .basedir = basedir };
	char *copy;
	size_t pos = 0;
	int r = 0;

	memset(t, 0, sizeof(*t));
	copy = keep(&p, fx_malloc(len + 1));
	if (!copy)
		return -ENOMEM;
	memcpy(copy, text, len);
	copy[len] = 0;
	while (pos < len && r == 0) {
		char *s = copy + pos, *nl = memchr(s, '\n', len - pos);
		char *end = nl ? nl : copy + len;

		p.line++;
		p.opname = NULL;
		pos = (size_t)(end - copy) + 1;
		*end = 0;
		if ((r = tokenize(&p, s, end)) < 0)
			break;
		if (p.ntok)
			r = line(&p);
	}
	if (r == -ENOMEM && !t->err[0])
		snprintf(t->err, sizeof(t->err), "line %u: out of memory", p.line);
	return r;
}

void fx_txt_free(struct fx_txt *t)
{
	for (size_t i = 0; i < t->nbufs; i++)
		free(t->bufs[i]);
	free(t->bufs);
	free(t->ops);
	free(t->lines);
	memset(t, 0, sizeof(*t));
}

void fx_txt_ut(const struct fx_txt *t, struct btrfs_ioctl_usertrans *ut)
{
	*ut = (struct btrfs_ioctl_usertrans){
		.num_ops = t->nops,
		.ops_ptr = (uint64_t)(uintptr_t)t->ops,
		.num_fds = t->num_fds,
		.data_bytes = t->data_bytes,
		.metadata_ops = t->metadata_ops,
		.flags = t->flags,
	};
}
