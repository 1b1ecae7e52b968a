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
 *   symlink TARGET LINKPATH [replace]
 *   assert-absent PATH
 *   assert-exists PATH
 *   assert-data PATH DATA
 *   assert-xattr PATH NAME DATA
 *   write PATH DATA [MODE]            task ops: each expands into the
 *   replace PATH DATA [MODE]          primitive ops above, in the same
 *   copy-in SRC DST [MODE]            transaction
 *   import SRCDIR DSTDIR
 *
 * Every op is strict (fails the transaction on an error or a short write)
 * unless it carries trailing RFC conditions (!ne N, !eq N, !lt N, !gt N,
 * !le N, !ge N) or a leading '-' (result ignored).  Task ops are always
 * strict.
 *
 * Task ops open their files in one fd slot: the one above the highest slot
 * an explicit op of the text names (0 if none), and close it before their
 * line ends, so they never meet an explicit open.  Their slot is known
 * only once the whole text is read: they are emitted with slot TASK_FD and
 * patched at the end.
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
#ifndef FSTX_MAX_COPY
#define FSTX_MAX_COPY (1ULL << 30)
#endif
#define MAX_DEPTH 128      /* import: directory levels */
#define TASK_FD (-1)       /* placeholder slot of task ops (see above) */
#define STDIN_FD 0

/* Op codes of task ops: never reach the op vector. */
enum {
	TASK_WRITE = 1 << 20,
	TASK_REPLACE,
	TASK_COPYIN,
	TASK_IMPORT,
};

/* off, end: where the word starts and ends in the line as written */
struct tok { char *s; size_t len; int quoted; size_t off, end; };

struct ps {
	struct fx_txt *t;
	int basedir;
	const char *name;   /* the text's name in messages */
	const char *line_s; /* the current line as written (not tokenized) */
	size_t line_len;
	unsigned line;
	struct tok tok[MAX_TOK];
	int ntok;
	const char *opname;
	int maxfd;          /* highest slot an explicit op names, -1 */
	unsigned task_line; /* line of the first task op using a slot, 0 */
	const char *task_s; /* and that line, for an error about the slot */
	size_t task_len;
	char shown[2][160]; /* show(): two values for one message */
	int nshown;
};

/* v as it may appear inside a one-line message: control bytes escaped. */
static const char *show(struct ps *p, const char *v, size_t len)
{
	char *o = p->shown[p->nshown++ & 1];
	size_t k = 0, cap = sizeof(p->shown[0]), i;

	for (i = 0; i < len && k + 8 < cap; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c < 0x20 || c == 0x7f || c == '"' || c == '\\')
			k += (size_t)snprintf(o + k, cap - k, c == '"' ? "\\\"" :
					      c == '\\' ? "\\\\" : "\\x%02x", c);
		else
			o[k++] = (char)c;
	}
	if (i < len)
		k += (size_t)snprintf(o + k, cap - k, "...");
	o[k] = 0;
	return o;
}

static const char *showtok(struct ps *p, int i)
{
	return show(p, p->tok[i].s, p->tok[i].len);
}

/* Characters (UTF-8 lead bytes) in s[0..n). */
static size_t chars(const char *s, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xc0) != 0x80;
	return c;
}

/*
 * The source line and a caret line under byte offset off (width wide
 * characters), appended to the message; tabs are kept so the caret lines
 * up in a terminal.  A long line is shown around off.
 */
static void source_lines(struct ps *p, size_t off, size_t width)
{
	struct fx_txt *t = p->t;
	size_t n = strlen(t->err), cap = sizeof(t->err), from = 0, to;
	const char *l = p->line_s;
	size_t ll = p->line_len;

	while (ll && (l[ll - 1] == '\r'))
		ll--;
	if (off > ll)
		off = ll;
	if (off > 200)
		from = off - 200;
	while (from > 0 && ((unsigned char)l[from] & 0xc0) == 0x80)
		from--;
	to = ll - from > 400 ? from + 400 : ll;
	if (to < off)
		to = off;
	n += (size_t)snprintf(t->err + n, n < cap ? cap - n : 0, "\n%s%.*s\n%s",
			      from ? "..." : "", (int)(to - from), l + from,
			      from ? "   " : "");
	for (size_t i = from; i < off && n + 2 < cap; i++)
		if (((unsigned char)l[i] & 0xc0) != 0x80)
			t->err[n++] = l[i] == '\t' ? '\t' : ' ';
	for (size_t i = 0; i < (width ? width : 1) && i < 200 && n + 2 < cap; i++)
		t->err[n++] = i ? '~' : '^';
	if (n < cap)
		t->err[n] = 0;
	else
		t->err[cap - 1] = 0;
}

/*
 * Report an error at byte offset off of the current line, width
 * characters wide: "NAME:LINE:COL: error: [OP: ]MESSAGE", the source line,
 * a caret line and, with a hint, "hint: did you mean ...".  -EINVAL.
 */
static int vperr(struct ps *p, size_t off, size_t width, const char *hint,
		 const char *fmt, va_list ap)
{
	struct fx_txt *t = p->t;
	size_t cap = sizeof(t->err), n;
	int k;

	if (!p->line_s)
		off = 0;
	if (off > p->line_len)
		off = p->line_len;
	t->errline = p->line;
	t->errcol = p->line_s ? (unsigned)chars(p->line_s, off) + 1 : 1;
	k = snprintf(t->err, cap, "%s:%u:%u: error: ", p->name, t->errline,
		     t->errcol);
	n = k < 0 ? 0 : (size_t)k >= cap ? cap - 1 : (size_t)k;
	if (p->opname) {
		k = snprintf(t->err + n, cap - n, "%s: ", p->opname);
		n = k < 0 ? n : n + (size_t)k >= cap ? cap - 1 : n + (size_t)k;
	}
	vsnprintf(t->err + n, cap - n, fmt, ap);
	if (p->line_s)
		source_lines(p, off, width);
	n = strlen(t->err);
	if (hint && n < cap)
		snprintf(t->err + n, cap - n, "\nhint: did you mean \"%s\"?", hint);
	return -EINVAL;
}

/* An error at token i (at the end of the line if i is past the last). */
__attribute__((format(printf, 4, 5)))
static int perr_hint(struct ps *p, int i, const char *hint, const char *fmt, ...)
{
	va_list ap;
	size_t off = p->line_len, w = 1;
	int r;

	if (i >= 0 && i < p->ntok && p->line_s) {
		off = p->tok[i].off;
		w = chars(p->line_s + off, p->tok[i].end - off);
	}
	va_start(ap, fmt);
	r = vperr(p, off, w, hint, fmt, ap);
	va_end(ap);
	return r;
}

#define perr(p, i, ...) perr_hint(p, i, NULL, __VA_ARGS__)

/* An error at byte offset off of the line (the tokenizer's). */
__attribute__((format(printf, 3, 4)))
static int perr_off(struct ps *p, size_t off, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vperr(p, off, 1, NULL, fmt, ap);
	va_end(ap);
	return r;
}

/* Levenshtein distance of a and b, capped at 9 (both short words). */
static unsigned distance(const char *a, const char *b)
{
	unsigned row[40], la = (unsigned)strlen(a), lb = (unsigned)strlen(b);

	if (la >= 39 || lb >= 39)
		return 9;
	for (unsigned j = 0; j <= lb; j++)
		row[j] = j;
	for (unsigned i = 1; i <= la; i++) {
		unsigned diag = row[0], tmp;

		row[0] = i;
		for (unsigned j = 1; j <= lb; j++) {
			unsigned best = diag + (a[i - 1] != b[j - 1]);

			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			tmp = row[j];
			row[j] = best;
			diag = tmp;
		}
	}
	return row[lb] > 9 ? 9 : row[lb];
}

/* The candidate nearest w: equal but for case, or at most 2 edits (1 for
 * words of 3 characters or fewer); NULL if none. */
static const char *nearest(const char *w, const char *const *cand, size_t n)
{
	const char *best = NULL;
	unsigned bd = strlen(w) <= 3 ? 2 : 3;

	for (size_t k = 0; k < n; k++) {
		unsigned dd = strcasecmp(w, cand[k]) ? distance(w, cand[k]) : 0;

		if (dd < bd) {
			bd = dd;
			best = cand[k];
		}
	}
	return best;
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

int fx_hexval(int c)
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
static int tokenize(struct ps *p, char *line, const char *end)
{
	char *s = line;

	p->ntok = 0;
	while (s < end) {
		struct tok *tk;
		char *o;

		while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
			s++;
		if (s >= end || *s == '#')
			break;
		if (p->ntok == MAX_TOK)
			return perr_off(p, (size_t)(s - line),
					"too many words (at most %d)", MAX_TOK);
		tk = &p->tok[p->ntok++];
		tk->off = (size_t)(s - line);
		if (*s != '"') {
			tk->s = s;
			while (s < end && *s != ' ' && *s != '\t' && *s != '\r')
				s++;
			tk->len = (size_t)(s - tk->s);
			tk->end = (size_t)(s - line);
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
				return perr_off(p, tk->off, "unterminated quoted string");
			if (*s == '"')
				break;
			if (*s != '\\') {
				*o++ = *s++;
				continue;
			}
			if (++s >= end)
				return perr_off(p, (size_t)(s - 1 - line),
						"unterminated escape");
			switch (*s++) {
			case '\\': *o++ = '\\'; break;
			case '"': *o++ = '"'; break;
			case 'n': *o++ = '\n'; break;
			case 't': *o++ = '\t'; break;
			case 'r': *o++ = '\r'; break;
			case '0': *o++ = '\0'; break;
			case 'x':
				if (end - s < 2 || (a = fx_hexval(s[0])) < 0 ||
				    (b = fx_hexval(s[1])) < 0)
					return perr_off(p, (size_t)(s - 2 - line),
							"bad \\x escape (want \\xHH)");
				*o++ = (char)(a << 4 | b);
				s += 2;
				break;
			default:
				return perr_off(p, (size_t)(s - 2 - line),
						"unknown escape \\%s (\\\\ \\\" \\n \\t "
						"\\r \\0 \\xHH)", show(p, s - 1, 1));
			}
		}
		tk->len = (size_t)(o - tk->s);
		s++; /* closing quote */
		tk->end = (size_t)(s - line);
		if (s < end && *s != ' ' && *s != '\t' && *s != '\r')
			return perr_off(p, (size_t)(s - line),
					"text after closing quote (a space must follow it)");
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
		return perr(p, i, "%s: expected a number, got \"%s\"", what,
			    showtok(p, i));
	v = strtoll(tk->s, &e, 0);
	if (*e || errno)
		return perr(p, i, "%s: bad number \"%s\"", what, showtok(p, i));
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
		return perr(p, i, "MODE: expected octal 0..7777, got \"%s\"",
			    showtok(p, i));
	*out = v;
	return 0;
}

static int path(struct ps *p, int i, const char *what, __s64 *out)
{
	const struct tok *tk = &p->tok[i];

	if (memchr(tk->s, 0, tk->len))
		return perr(p, i, "%s: NUL byte in name", what);
	if (!tk->len)
		return perr(p, i, "%s: empty path", what);
	*out = (__s64)(intptr_t)tk->s;
	return 0;
}

static const struct { const char *name; int flag; } oflags[] = {
	{ "O_RDONLY", O_RDONLY }, { "O_WRONLY", O_WRONLY }, { "O_RDWR", O_RDWR },
	{ "O_CREAT", O_CREAT }, { "O_EXCL", O_EXCL }, { "O_TRUNC", O_TRUNC },
	{ "O_APPEND", O_APPEND }, { "O_NOFOLLOW", O_NOFOLLOW },
	{ "O_DIRECTORY", O_DIRECTORY },
};
#define NOFLAGS (sizeof(oflags) / sizeof(oflags[0]))

static int openflags(struct ps *p, int i, __s64 *out)
{
	const char *names[NOFLAGS];
	char *s = p->tok[i].s, *save = NULL, *w;
	char buf[256];
	__s64 f = 0;

	if (p->tok[i].len >= sizeof(buf))
		return perr(p, i, "FLAGS too long");
	for (size_t k = 0; k < NOFLAGS; k++)
		names[k] = oflags[k].name;
	memcpy(buf, s, p->tok[i].len + 1);
	for (w = strtok_r(buf, "|", &save); w; w = strtok_r(NULL, "|", &save)) {
		size_t k;

		for (k = 0; k < NOFLAGS; k++)
			if (!strcmp(w, oflags[k].name))
				break;
		if (k == NOFLAGS) {
			struct tok whole = p->tok[i];
			int r;

			/* point at the flag itself, not the whole word */
			p->tok[i].off += (size_t)(w - buf) + p->tok[i].quoted;
			p->tok[i].len = strlen(w);
			p->tok[i].end = p->tok[i].off + p->tok[i].len;
			p->tok[i].quoted = 0;
			r = perr_hint(p, i, nearest(w, names, NOFLAGS),
				      "unknown open flag \"%s\" (O_RDONLY, O_WRONLY, "
				      "O_RDWR, O_CREAT, O_EXCL, O_TRUNC, O_APPEND, "
				      "O_NOFOLLOW, O_DIRECTORY, joined by |)",
				      show(p, w, strlen(w)));
			p->tok[i] = whole;
			return r;
		}
		f |= oflags[k].flag;
	}
	*out = f;
	return 0;
}

/*
 * read(2) fd to its end, the buffer doubling from 64 KiB: 0, -EFBIG past
 * max bytes, or the -errno of the read or allocation that failed (a read
 * cut by a signal is retried).  *out is freed with free(3).
 */
static int read_to_end(int fd, size_t max, char **out, size_t *len)
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
		if (got == -EINTR)
			continue;
		if (got < 0) {
			free(buf);
			return (int)got;
		}
		if (got == 0)
			break;
		n += (size_t)got;
		if (n > max) {
			free(buf);
			return -EFBIG;
		}
	}
	*out = buf;
	*len = n;
	return 0;
}

/*
 * Read a stream (pipe, FIFO, standard input) to its end: at most
 * fx_txt_stream_max bytes, more is an error.  The buffer is kept.
 */
static int readstream(struct ps *p, int i, int fd, const char *what,
		      char **buf, size_t *len)
{
	size_t max = fx_txt_stream_max;
	char *b;
	int r = read_to_end(fd, max, &b, len);

	if (r == -EFBIG)
		return perr(p, i, "%s: more than %zu bytes (the limit of "
			    "@- and of pipes)", what, max);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return perr(p, i, "%s: %s", what, strerror(-r));
	*buf = keep(p, b);
	return *buf ? 0 : -ENOMEM;
}

/* A regular file of st_size bytes (at most max), read with pread; the
 * buffer is kept. */
static int readreg(struct ps *p, int i, int fd, const struct stat *st,
		   uint64_t max, const char *what, char **buf, size_t *len)
{
	size_t done = 0, size = (size_t)st->st_size;

	if ((uint64_t)st->st_size > max)
		return perr(p, i, "%s: larger than %llu MiB", what,
			    (unsigned long long)(max >> 20));
	*buf = keep(p, fx_malloc(size + 1));
	if (!*buf)
		return -ENOMEM;
	while (done < size) {
		ssize_t n = fx_os.pread(fd, *buf + done, size - done, (off_t)done);

		if (n == -EINTR)
			continue;
		if (n <= 0)
			return perr(p, i, "%s: %s", what, n < 0 ? strerror((int)-n)
				    : "file shrank while read");
		done += (size_t)n;
	}
	*len = done;
	return 0;
}

/* st is the stream standard input reads (/dev/stdin, /proc/self/fd/0). */
static int same_as_stdin(const struct stat *st)
{
	struct stat in;

	return fx_os.fstat(STDIN_FD, &in) == 0 && in.st_dev == st->st_dev &&
	       in.st_ino == st->st_ino;
}

/*
 * Data from file name, relative to the base directory: a regular file
 * (up to 4 GiB), or a pipe or FIFO read to its end.  *st gets its stat.
 */
static int readfile(struct ps *p, int i, const char *name, uint64_t max,
		    const char *what, char **buf, size_t *len, struct stat *st)
{
	int fd, r;

	fd = fx_os.openat2(p->basedir, name, O_RDONLY, 0, 0);
	if (fd < 0)
		return perr(p, i, "%s: %s", what, strerror(-fd));
	r = fx_os.fstat(fd, st);
	if (r < 0)
		r = perr(p, i, "%s: %s", what, strerror(-r));
	else if (p->t->stdin_taken && !S_ISREG(st->st_mode) && same_as_stdin(st))
		r = perr(p, i, "%s: is standard input, which holds the transaction "
			 "text itself; put the data in a file", what);
	else if (S_ISREG(st->st_mode))
		r = readreg(p, i, fd, st, max, what, buf, len);
	else if (S_ISFIFO(st->st_mode) || S_ISSOCK(st->st_mode))
		r = readstream(p, i, fd, what, buf, len);
	else
		r = perr(p, i, "%s: not a regular file or a pipe", what);
	fx_os.close(fd);
	return r;
}

/* "@-": standard input, once per text, and not when it holds the text. */
static int readstdin(struct ps *p, int i, char **buf, size_t *len)
{
	if (p->t->stdin_taken)
		return perr(p, i, "@-: standard input holds the transaction text "
			    "itself; put the data in a file and name it @FILE");
	if (p->t->stdin_used)
		return perr(p, i, "@-: standard input was read already; it can be "
			    "read once per transaction");
	p->t->stdin_used = 1;
	return readstream(p, i, STDIN_FD, "@- (standard input)", buf, len);
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
		struct stat st;
		char what[PATH_MAX + 2];

		if (!tk->s[1])
			return perr(p, i, "DATA: @ needs a file name (or @- for "
				    "standard input)");
		snprintf(what, sizeof(what), "@%s", show(p, tk->s + 1, tk->len - 1));
		if (!strcmp(tk->s, "@-"))
			r = readstdin(p, i, &buf, &n);
		else
			r = readfile(p, i, tk->s + 1, MAX_DATA_FILE, what, &buf, &n,
				     &st);
		if (r < 0)
			return r;
		*ptr = (__s64)(intptr_t)buf;
		*len = (__s64)n;
		return 0;
	}
	if (!strncmp(tk->s, "x:", 2)) {
		const char *h = tk->s + 2;
		size_t hl = tk->len - 2;

		if (hl % 2)
			return perr(p, i, "DATA: odd number of hex digits");
		buf = keep(p, fx_malloc(hl / 2 + 1));
		if (!buf)
			return -ENOMEM;
		for (n = 0; n < hl / 2; n++) {
			int a = fx_hexval(h[2 * n]), b = fx_hexval(h[2 * n + 1]);

			if (a < 0 || b < 0)
				return perr(p, i, "DATA: bad hex digit");
			buf[n] = (char)(a << 4 | b);
		}
		*ptr = (__s64)(intptr_t)buf;
		*len = (__s64)n;
		return 0;
	}
	return perr(p, i, "DATA must be a \"quoted string\", @FILE, @- or x:HEX, "
		    "got %s", showtok(p, i));
}

static const struct { const char *w; uint64_t f; } conds[] = {
	{ "!ne", BTRFS_IOC_UT_OP_FLAG_FAIL_ON_NE },
	{ "!eq", BTRFS_IOC_UT_OP_FLAG_FAIL_ON_EQ },
	{ "!lt", BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LT },
	{ "!gt", BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GT },
	{ "!le", BTRFS_IOC_UT_OP_FLAG_FAIL_ON_LTE },
	{ "!ge", BTRFS_IOC_UT_OP_FLAG_FAIL_ON_GTE },
};
#define NCONDS (sizeof(conds) / sizeof(conds[0]))

static int cond_index(const char *w)
{
	for (size_t k = 0; k < NCONDS; k++)
		if (!strcmp(w, conds[k].w))
			return (int)k;
	return -1;
}

/* Trailing !cond N modifiers; returns the number of tokens they use. */
static int conditions(struct ps *p, struct btrfs_ioctl_usertrans_op *op,
		      int *nargs)
{
	const char *names[NCONDS];
	const struct tok *last = &p->tok[*nargs - 1];
	int have = 0, r;

	for (size_t k = 0; k < NCONDS; k++)
		names[k] = conds[k].w;
	/* "unlink x !eq": a condition word that lost its number */
	if (*nargs >= 2 && !last->quoted && cond_index(last->s) >= 0)
		return perr(p, *nargs - 1, "condition \"%s\" needs a number, "
			    "e.g. \"%s 0\"", last->s, last->s);
	while (*nargs >= 3 && !p->tok[*nargs - 2].quoted &&
	       p->tok[*nargs - 2].s[0] == '!') {
		const char *w = p->tok[*nargs - 2].s;
		__s64 v;
		int k = cond_index(w);

		if (k < 0)
			return perr_hint(p, *nargs - 2, nearest(w, names, NCONDS),
					 "unknown condition \"%s\" (!ne !eq !lt "
					 "!gt !le !ge, each with a number)",
					 showtok(p, *nargs - 2));
		if ((r = num(p, *nargs - 1, w, &v)) < 0)
			return r;
		if (have && v != op->rval)
			return perr(p, *nargs - 1, "conditions of one op must "
				    "share one value");
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
		return perr(p, i, "IDX %lld out of range 0..%d", (long long)*out,
			    FSTX_MAX_FDS - 1);
	if (r == 0 && (uint64_t)*out + 1 > p->t->num_fds)
		p->t->num_fds = (uint64_t)*out + 1;
	if (r == 0 && *out > p->maxfd)
		p->maxfd = (int)*out;
	return r;
}

struct opdef {
	const char *name;
	uint64_t op;
	int min, max;
	const char *usage;
};

static const struct opdef opdefs[] = {
	{ "open", BTRFS_IOC_UT_OP_OPEN, 3, 4, "open IDX PATH FLAGS [MODE]" },
	{ "close", BTRFS_IOC_UT_OP_CLOSE, 1, 1, "close IDX" },
	{ "pwrite", BTRFS_IOC_UT_OP_PWRITE, 3, 3, "pwrite IDX DATA OFFSET" },
	{ "unlink", BTRFS_IOC_UT_OP_UNLINK, 1, 1, "unlink PATH" },
	{ "link", BTRFS_IOC_UT_OP_LINK, 2, 2, "link OLDPATH NEWPATH" },
	{ "mkdir", BTRFS_IOC_UT_OP_MKDIR, 1, 2, "mkdir PATH [MODE]" },
	{ "rmdir", BTRFS_IOC_UT_OP_RMDIR, 1, 1, "rmdir PATH" },
	{ "truncate", BTRFS_IOC_UT_OP_TRUNCATE, 2, 2, "truncate PATH SIZE" },
	{ "setxattr", BTRFS_IOC_UT_OP_SETXATTR, 3, 4,
	  "setxattr PATH NAME DATA [create|replace]" },
	{ "removexattr", BTRFS_IOC_UT_OP_REMOVEXATTR, 2, 2, "removexattr PATH NAME" },
	{ "clonerange", BTRFS_IOC_UT_OP_CLONERANGE, 5, 5,
	  "clonerange DSTIDX SRCIDX SRCOFF LEN DSTOFF" },
	{ "rename", FSTX_OP_RENAME, 2, 3, "rename OLDPATH NEWPATH [noreplace|exchange]" },
	{ "symlink", FSTX_OP_SYMLINK, 2, 3, "symlink TARGET LINKPATH [replace]" },
	{ "assert-absent", FSTX_OP_ASSERT_ABSENT, 1, 1, "assert-absent PATH" },
	{ "assert-exists", FSTX_OP_ASSERT_EXISTS, 1, 1, "assert-exists PATH" },
	{ "assert-data", FSTX_OP_ASSERT_DATA, 2, 2, "assert-data PATH DATA" },
	{ "assert-xattr", FSTX_OP_ASSERT_XATTR, 3, 3, "assert-xattr PATH NAME DATA" },
	{ "write", TASK_WRITE, 2, 3, "write PATH DATA [MODE]" },
	{ "replace", TASK_REPLACE, 2, 3, "replace PATH DATA [MODE]" },
	{ "copy-in", TASK_COPYIN, 2, 3, "copy-in SRC DST [MODE]" },
	{ "import", TASK_IMPORT, 2, 2, "import SRCDIR DSTDIR" },
};
#define NOPDEFS (sizeof(opdefs) / sizeof(opdefs[0]))

/* Append an op of code to the vector, from the current line; NULL: error
 * (-ENOMEM or too many ops, in *err). */
static struct btrfs_ioctl_usertrans_op *emit(struct ps *p, uint64_t code, int *err)
{
	struct fx_txt *t = p->t;
	struct btrfs_ioctl_usertrans_op *op;

	if (t->nops >= FSTX_MAX_OPS) {
		*err = perr(p, 0, "more than %u ops in one transaction", FSTX_MAX_OPS);
		return NULL;
	}
	if (t->nops == t->cops) {
		size_t c = t->cops ? 2 * t->cops : 64;
		void *no = fx_realloc(t->ops, c * sizeof(*t->ops));
		void *nl;

		*err = -ENOMEM;
		if (!no)
			return NULL;
		t->ops = no;
		nl = fx_realloc(t->lines, c * sizeof(*t->lines));
		if (!nl)
			return NULL;
		t->lines = nl;
		t->cops = c;
	}
	op = &t->ops[t->nops];
	memset(op, 0, sizeof(*op));
	op->op = code;
	t->lines[t->nops++] = p->line;
	return op;
}

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
			static const char *const w[] = { "noreplace", "exchange" };

			if (!strcmp(p->tok[3].s, "noreplace"))
				a[2] = RENAME_NOREPLACE;
			else if (!strcmp(p->tok[3].s, "exchange"))
				a[2] = RENAME_EXCHANGE;
			else
				return perr_hint(p, 3, nearest(p->tok[3].s, w, 2),
						 "expected noreplace or exchange, got "
						 "\"%s\"", showtok(p, 3));
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
			static const char *const w[] = { "create", "replace" };

			if (!strcmp(p->tok[4].s, "create"))
				a[4] = XATTR_CREATE;
			else if (!strcmp(p->tok[4].s, "replace"))
				a[4] = XATTR_REPLACE;
			else
				return perr_hint(p, 4, nearest(p->tok[4].s, w, 2),
						 "expected create or replace, got \"%s\"",
						 showtok(p, 4));
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
	return perr(p, 0, "internal: no argument parser");
}

/* ---- task ops: each expands into primitive ops of the same transaction ---- */

__attribute__((format(printf, 2, 3)))
static char *kstr(struct ps *p, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !(s = keep(p, fx_malloc((size_t)n + 1))))
		return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

/* Append a strict primitive op with arguments a0..a4. */
static int t_emit(struct ps *p, uint64_t code, __s64 a0, __s64 a1, __s64 a2,
		  __s64 a3)
{
	struct btrfs_ioctl_usertrans_op *op;
	int err = 0;

	if (!(op = emit(p, code, &err)))
		return err;
	op->args[0] = a0;
	op->args[1] = a1;
	op->args[2] = a2;
	op->args[3] = a3;
	fx_op_strict(op);
	return 0;
}

#define PTR(s) ((__s64)(intptr_t)(s))

/* open PATH in the task slot, write the data (if any), close. */
static int t_put(struct ps *p, const char *dst, int flags, __s64 mode,
		 const char *buf, size_t len)
{
	int r;

	if (!p->task_line) {
		p->task_line = p->line;
		p->task_s = p->line_s;
		p->task_len = p->line_len;
	}
	if ((r = t_emit(p, BTRFS_IOC_UT_OP_OPEN, PTR(dst), flags, mode, TASK_FD)) ||
	    (len && (r = t_emit(p, BTRFS_IOC_UT_OP_PWRITE, TASK_FD, PTR(buf),
				(__s64)len, 0))))
		return r;
	return t_emit(p, BTRFS_IOC_UT_OP_CLOSE, TASK_FD, 0, 0, 0);
}

/*
 * A name beside dst for its new version: ".fstx-tmp-N" in the same
 * directory (so the rename stays in one directory and one filesystem), N
 * counting the temporary names of the text, as the C API's task builders
 * name theirs.  Only the transaction makes it and it is renamed away before
 * the commit; a stale one made by hand fails the transaction (EEXIST),
 * which then changes nothing.
 */
static int tmpname(struct ps *p, int i, const char *dst, char **out)
{
	const char *slash = strrchr(dst, '/');
	const char *base = slash ? slash + 1 : dst;

	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return perr(p, i, "\"%s\" does not name a file", show(p, dst, strlen(dst)));
	*out = kstr(p, "%.*s.fstx-tmp-%u", slash ? (int)(slash - dst + 1) : 0,
		    dst, ++p->t->ntask);
	return *out ? 0 : -ENOMEM;
}

static int opt_mode(struct ps *p, int n, int i, __s64 dflt, __s64 *m)
{
	*m = dflt;
	return n >= i ? mode(p, i, m) : 0;
}

/* write PATH DATA [MODE]: create or truncate, write, close. */
static int task_write(struct ps *p, int n)
{
	__s64 dst, buf, len, m;
	int r;

	if ((r = path(p, 1, "PATH", &dst)) || (r = data(p, 2, &buf, &len)) ||
	    (r = opt_mode(p, n, 3, 0644, &m)))
		return r;
	return t_put(p, (const char *)(intptr_t)dst, O_WRONLY | O_CREAT | O_TRUNC,
		     m, (const char *)(intptr_t)buf, (size_t)len);
}

/* replace PATH DATA [MODE]: a new file at a temporary name, renamed over. */
static int task_replace(struct ps *p, int n)
{
	__s64 dst, buf, len, m;
	char *tmp;
	int r;

	if ((r = path(p, 1, "PATH", &dst)) || (r = data(p, 2, &buf, &len)) ||
	    (r = opt_mode(p, n, 3, 0644, &m)) ||
	    (r = tmpname(p, 1, (const char *)(intptr_t)dst, &tmp)) ||
	    (r = t_put(p, tmp, O_WRONLY | O_CREAT | O_EXCL, m,
		       (const char *)(intptr_t)buf, (size_t)len)))
		return r;
	return t_emit(p, FSTX_OP_RENAME, PTR(tmp), dst, 0, 0);
}

/* symlink TARGET LINKPATH replace: a link at a temporary name, renamed over. */
static int task_symlink(struct ps *p)
{
	static const char *const w[] = { "replace" };
	__s64 target, link;
	char *tmp;
	int r;

	if (p->tok[3].quoted || strcmp(p->tok[3].s, "replace"))
		return perr_hint(p, 3, nearest(p->tok[3].s, w, 1),
				 "expected \"replace\" or nothing after LINKPATH, "
				 "got \"%s\"", showtok(p, 3));
	if ((r = path(p, 1, "TARGET", &target)) || (r = path(p, 2, "LINKPATH", &link)) ||
	    (r = tmpname(p, 2, (const char *)(intptr_t)link, &tmp)) ||
	    (r = t_emit(p, FSTX_OP_SYMLINK, target, PTR(tmp), 0, 0)))
		return r;
	return t_emit(p, FSTX_OP_RENAME, PTR(tmp), link, 0, 0);
}

/* copy-in SRC DST [MODE]: a file from outside (SRC's mode unless MODE). */
static int task_copyin(struct ps *p, int n)
{
	__s64 src, dst, m;
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int r;

	if ((r = path(p, 1, "SRC", &src)) || (r = path(p, 2, "DST", &dst)) ||
	    (r = readfile(p, 1, (const char *)(intptr_t)src, FSTX_MAX_COPY,
			  show(p, p->tok[1].s, p->tok[1].len), &buf, &len, &st)) ||
	    (r = opt_mode(p, n, 3, (__s64)(st.st_mode & 0777), &m)))
		return r;
	return t_put(p, (const char *)(intptr_t)dst, O_WRONLY | O_CREAT | O_TRUNC,
		     m, buf, len);
}

struct names { char **v; size_t n, cap; };

static int collect(int fd, const char *name, void *arg)
{
	struct names *ns = arg;

	(void)fd;
	if (ns->n == ns->cap) {
		size_t c = ns->cap ? 2 * ns->cap : 32;
		char **nv = fx_realloc(ns->v, c * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		ns->v = nv;
		ns->cap = c;
	}
	if (!(ns->v[ns->n] = fx_strdup(name)))
		return -ENOMEM;
	ns->n++;
	return 0;
}

static int cmpname(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *kind(mode_t m)
{
	return S_ISFIFO(m) ? "FIFO" : S_ISSOCK(m) ? "socket" : S_ISCHR(m) ?
	       "character device" : S_ISBLK(m) ? "block device" : "special file";
}

static int import_dir(struct ps *p, int dfd, const char *src, const char *dst,
		      int depth);

/* One entry name of the outside directory dfd (shown as src/name). */
static int import_one(struct ps *p, int dfd, const char *src, const char *name,
		      const char *dst, int depth)
{
	char *sp = NULL, *dp, *buf;
	struct stat st;
	size_t len = 0;
	ssize_t ln;
	int fd, r;

	if (!(dp = kstr(p, "%s/%s", dst, name)) || fx_asprintf(&sp, "%s/%s", src, name) < 0)
		return -ENOMEM;
	if ((r = fx_os.fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW)) < 0) {
		r = perr(p, 1, "%s: %s", show(p, sp, strlen(sp)), strerror(-r));
	} else if (S_ISDIR(st.st_mode)) {
		if (depth >= MAX_DEPTH) {
			r = perr(p, 1, "%s: more than %d directory levels",
				 show(p, sp, strlen(sp)), MAX_DEPTH);
		} else if (!(r = t_emit(p, BTRFS_IOC_UT_OP_MKDIR, PTR(dp),
					(__s64)(st.st_mode & 0777), 0, 0))) {
			fd = fx_os.openat2(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, 0);
			if (fd < 0)
				r = perr(p, 1, "%s: %s", show(p, sp, strlen(sp)),
					 strerror(-fd));
			else {
				r = import_dir(p, fd, sp, dp, depth + 1);
				fx_os.close(fd);
			}
		}
	} else if (S_ISREG(st.st_mode)) {
		/* O_NONBLOCK: a FIFO put there since the stat must not hang us */
		fd = fx_os.openat2(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, 0);
		if (fd < 0 || (r = fx_os.fstat(fd, &st)) < 0 || !S_ISREG(st.st_mode))
			r = perr(p, 1, "%s: %s", show(p, sp, strlen(sp)),
				 fd < 0 ? strerror(-fd) : r < 0 ? strerror(-r)
				 : "changed while read");
		else if (!(r = readreg(p, 1, fd, &st, FSTX_MAX_COPY,
				       show(p, sp, strlen(sp)), &buf, &len)))
			r = t_put(p, dp, O_WRONLY | O_CREAT | O_EXCL,
				  (__s64)(st.st_mode & 0777), buf, len);
		if (fd >= 0)
			fx_os.close(fd);
	} else if (S_ISLNK(st.st_mode)) {
		/* copied as a link: its target is never followed */
		if (!(buf = keep(p, fx_malloc(PATH_MAX + 1))))
			r = -ENOMEM;
		else if ((ln = fx_os.readlinkat(dfd, name, buf, PATH_MAX + 1)) < 0 ||
			 ln > PATH_MAX)
			r = perr(p, 1, "%s: %s", show(p, sp, strlen(sp)),
				 ln < 0 ? strerror((int)-ln) : "link target too long");
		else {
			buf[ln] = 0;
			r = t_emit(p, FSTX_OP_SYMLINK, PTR(buf), PTR(dp), 0, 0);
		}
	} else {
		r = perr(p, 1, "%s: a %s is not imported (only regular files, "
			 "directories and symlinks are)", show(p, sp, strlen(sp)),
			 kind(st.st_mode));
	}
	free(sp);
	return r;
}

/* Every entry of the outside directory dfd, in name order (so one tree
 * always gives one op vector), under dst. */
static int import_dir(struct ps *p, int dfd, const char *src, const char *dst,
		      int depth)
{
	struct names ns = { 0 };
	int r = fx_dir_each(dfd, collect, &ns);

	if (r < 0 && r != -ENOMEM)
		r = perr(p, 1, "%s: %s", show(p, src, strlen(src)), strerror(-r));
	if (r == 0 && ns.n) /* qsort() of no array is undefined */
		qsort(ns.v, ns.n, sizeof(*ns.v), cmpname);
	for (size_t k = 0; r == 0 && k < ns.n; k++)
		r = import_one(p, dfd, src, ns.v[k], dst, depth);
	for (size_t k = 0; k < ns.n; k++)
		free(ns.v[k]);
	free(ns.v);
	return r;
}

/* import SRCDIR DSTDIR: mkdir DSTDIR, then the tree beneath SRCDIR. */
static int task_import(struct ps *p)
{
	__s64 src, dst;
	struct stat st;
	char *d;
	size_t dl;
	int fd, r;

	if ((r = path(p, 1, "SRCDIR", &src)) || (r = path(p, 2, "DSTDIR", &dst)))
		return r;
	dl = p->tok[2].len;
	while (dl > 1 && p->tok[2].s[dl - 1] == '/')
		dl--;
	if (!(d = kstr(p, "%.*s", (int)dl, p->tok[2].s)))
		return -ENOMEM;
	fd = fx_os.openat2(p->basedir, (const char *)(intptr_t)src,
			   O_RDONLY | O_DIRECTORY, 0, 0);
	if (fd < 0)
		return perr(p, 1, "%s: %s", showtok(p, 1), strerror(-fd));
	if ((r = fx_os.fstat(fd, &st)) < 0)
		r = perr(p, 1, "%s: %s", showtok(p, 1), strerror(-r));
	else if (!(r = t_emit(p, BTRFS_IOC_UT_OP_MKDIR, PTR(d),
			      (__s64)(st.st_mode & 0777), 0, 0)))
		r = import_dir(p, fd, p->tok[1].s, d, 0);
	fx_os.close(fd);
	return r;
}

static int task(struct ps *p, const struct opdef *d, int n)
{
	switch (d->op) {
	case TASK_WRITE:
		return task_write(p, n);
	case TASK_REPLACE:
		return task_replace(p, n);
	case TASK_COPYIN:
		return task_copyin(p, n);
	case TASK_IMPORT:
		return task_import(p);
	}
	return task_symlink(p);
}

/* Task ops' slot: above every explicit one (see the top of this file). */
static int patch_task_fd(struct ps *p)
{
	struct fx_txt *t = p->t;
	int slot = p->maxfd + 1;

	if (!p->task_line)
		return 0;
	if (slot >= FSTX_MAX_FDS) {
		p->line = p->task_line;
		p->line_s = p->task_s;
		p->line_len = p->task_len;
		p->ntok = 0;
		p->opname = NULL;
		return perr_off(p, 0, "no fd slot left for task ops: explicit "
				"ops use slot %d; use lower slots", FSTX_MAX_FDS - 1);
	}
	for (size_t i = 0; i < t->nops; i++) {
		__s64 *a = t->ops[i].args;

		if (t->ops[i].op == BTRFS_IOC_UT_OP_OPEN && a[3] == TASK_FD)
			a[3] = slot;
		else if ((t->ops[i].op == BTRFS_IOC_UT_OP_PWRITE ||
			  t->ops[i].op == BTRFS_IOC_UT_OP_CLOSE) && a[0] == TASK_FD)
			a[0] = slot;
	}
	if (t->num_fds < (uint64_t)slot + 1)
		t->num_fds = (uint64_t)slot + 1;
	return 0;
}

static int option(struct ps *p)
{
	static const char *const words[] = {
		"wedge-on-fail", "crash-only", "wal", "lazy", "reserve",
	};
	static const uint64_t flags[] = {
		BTRFS_IOC_UT_FLAG_WEDGEONFAIL, FSTX_UT_NOSYNC, FSTX_UT_WAL, FSTX_UT_LAZY,
	};
	__s64 a, b;
	int r;

	p->opname = "option";
	for (size_t k = 0; p->ntok == 2 && k < 4; k++)
		if (!strcmp(p->tok[1].s, words[k])) {
			p->t->flags |= flags[k];
			return 0;
		}
	if (p->ntok == 4 && !strcmp(p->tok[1].s, "reserve")) {
		if ((r = num(p, 2, "DATA_BYTES", &a)) || (r = num(p, 3, "METADATA_OPS", &b)))
			return r;
		if (a < 0 || b < 0)
			return perr(p, a < 0 ? 2 : 3, "reserve: negative value");
		p->t->data_bytes = (uint64_t)a;
		p->t->metadata_ops = (uint64_t)b;
		return 0;
	}
	return perr_hint(p, 1, p->ntok > 1 ? nearest(p->tok[1].s, words, 5) : NULL,
			 "expected 'option wedge-on-fail', 'option crash-only', "
			 "'option wal', 'option lazy' or 'option reserve DATA_BYTES "
			 "METADATA_OPS'");
}

static int line(struct ps *p)
{
	const char *names[NOPDEFS + 1];
	struct btrfs_ioctl_usertrans_op c = { 0 }, *op;
	const struct opdef *d = NULL;
	const char *w = p->tok[0].s;
	int ignore = 0, n, r, have, err = 0;

	if (p->tok[0].quoted)
		return perr(p, 0, "an op name cannot be quoted");
	if (!strncmp(w, "\xef\xbb\xbf", 3))
		return perr(p, 0, "a UTF-8 byte-order mark (U+FEFF) before the op "
			    "name; save the text without it");
	if (!strcmp(w, "option"))
		return option(p);
	if (*w == '-') {
		ignore = 1;
		w++;
	}
	for (size_t k = 0; k < NOPDEFS; k++) {
		names[k] = opdefs[k].name;
		if (!strcmp(w, opdefs[k].name))
			d = &opdefs[k];
	}
	names[NOPDEFS] = "option";
	if (!d)
		return perr_hint(p, 0, nearest(w, names, NOPDEFS + 1),
				 "unknown op \"%s\"", showtok(p, 0));
	p->opname = d->name;
	n = p->ntok;
	if ((have = conditions(p, &c, &n)) < 0)
		return have;
	if (have && ignore)
		return perr(p, 0, "'-' and conditions exclude each other");
	n--; /* arguments after the op name */
	if (n < d->min || n > d->max)
		return d->max > d->min ?
		       perr(p, n < d->min ? p->ntok : 1 + d->max, "expected %d or "
			    "%d arguments, got %d; usage: %s", d->min, d->max, n,
			    d->usage) :
		       perr(p, n < d->min ? p->ntok : 1 + d->max, "expected %d "
			    "argument%s, got %d; usage: %s", d->min,
			    d->min > 1 ? "s" : "", n, d->usage);
	if (d->op >= TASK_WRITE || (d->op == FSTX_OP_SYMLINK && n == 3)) {
		if (have || ignore)
			return perr(p, have ? n + 1 : 0, "a task op is always strict: "
				    "it takes neither '-' nor conditions");
		return task(p, d, n);
	}
	if (!(op = emit(p, d->op, &err)))
		return err;
	op->flags = c.flags;
	op->rval = c.rval;
	if ((r = args(p, d, op, n)) < 0)
		return r;
	if (!have && !ignore)
		fx_op_strict(op);
	return 0;
}

/*
 * The transaction text of the CLI, from a file or a pipe: read(2) to the
 * end, the buffer doubling from 64 KiB.  Through fx_os like all I/O, so
 * a test fails each read and each allocation.
 */
int fx_txt_read(int fd, char **out, size_t *len)
{
	return read_to_end(fd, SIZE_MAX, out, len);
}

size_t fx_txt_stream_max = 64 << 20;

int fx_txt_parse(const char *text, size_t len, int basedir, struct fx_txt *t)
{
	t->stdin_taken = 0;
	return fx_txt_parse_named(text, len, basedir, NULL, t);
}

int fx_txt_parse_named(const char *text, size_t len, int basedir,
		       const char *name, struct fx_txt *t)
{
	struct ps p = { .t = t, .basedir = basedir, .maxfd = -1,
			.name = name ? name : "<input>" };
	int taken = t->stdin_taken;
	char *copy;
	size_t pos = 0;
	int r = 0;

	memset(t, 0, sizeof(*t));
	t->stdin_taken = taken;
	/* a byte-order mark some editors write: not part of the first op */
	if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3)) {
		text += 3;
		len -= 3;
	}
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
		p.ntok = 0;
		p.line_s = text + pos;
		p.line_len = (size_t)(end - s);
		pos = (size_t)(end - copy) + 1;
		*end = 0;
		if ((r = tokenize(&p, s, end)) < 0)
			break;
		if (p.ntok)
			r = line(&p);
	}
	if (r == 0)
		r = patch_task_fd(&p);
	if (r == -ENOMEM && !t->err[0]) {
		t->errline = p.line;
		t->errcol = 1;
		snprintf(t->err, sizeof(t->err), "%s:%u:1: error: out of memory",
			 p.name, p.line);
	}
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
