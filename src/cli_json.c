/* SPDX-License-Identifier: MIT */
/*
 * cli_json.c - JSON input to transaction text (fstx(1), JSON INPUT).
 *
 * Each element becomes exactly one line of fstx-tx(5) text, so a text
 * parser error or a failed op maps back to its element by line.  Strings
 * are written quoted, every byte other than printable ASCII (and " \ #)
 * as \xHH: no value can end a token or a line early or read as anything
 * but itself.  Numbers are written in decimal; open flags, modes and
 * keywords are checked against their small alphabets before they are
 * written bare.  The text parser then checks and expands the ops exactly
 * as it does for a text transaction: one grammar, one set of checks.
 */
#define _GNU_SOURCE
#include "cli_json.h"
#include "internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { K_IDX, K_PATH, K_DATA, K_NUM, K_MODE, K_FLAGS, K_KEY };

struct field {
	const char *name;
	enum kind k;
	int optional;
	const char *const *keys; /* K_KEY: the words allowed */
};

#define MAXF 5
struct jop {
	const char *op;
	struct field f[MAXF];
};

static const char *const xattr_keys[] = { "create", "replace", NULL };
static const char *const rename_keys[] = { "noreplace", "exchange", NULL };
static const char *const symlink_keys[] = { "replace", NULL };

/* Field names: the argument names of fstx-tx(5), in lower case. */
static const struct jop jops[] = {
	{ "open", { { "idx", K_IDX, 0, NULL }, { "path", K_PATH, 0, NULL },
		    { "flags", K_FLAGS, 0, NULL }, { "mode", K_MODE, 1, NULL } } },
	{ "close", { { "idx", K_IDX, 0, NULL } } },
	{ "pwrite", { { "idx", K_IDX, 0, NULL }, { "data", K_DATA, 0, NULL },
		      { "offset", K_NUM, 0, NULL } } },
	{ "unlink", { { "path", K_PATH, 0, NULL } } },
	{ "link", { { "oldpath", K_PATH, 0, NULL }, { "newpath", K_PATH, 0, NULL } } },
	{ "mkdir", { { "path", K_PATH, 0, NULL }, { "mode", K_MODE, 1, NULL } } },
	{ "rmdir", { { "path", K_PATH, 0, NULL } } },
	{ "truncate", { { "path", K_PATH, 0, NULL }, { "size", K_NUM, 0, NULL } } },
	{ "setxattr", { { "path", K_PATH, 0, NULL }, { "name", K_PATH, 0, NULL },
			{ "data", K_DATA, 0, NULL }, { "flag", K_KEY, 1, xattr_keys } } },
	{ "removexattr", { { "path", K_PATH, 0, NULL }, { "name", K_PATH, 0, NULL } } },
	{ "clonerange", { { "dstidx", K_IDX, 0, NULL }, { "srcidx", K_IDX, 0, NULL },
			  { "srcoff", K_NUM, 0, NULL }, { "len", K_NUM, 0, NULL },
			  { "dstoff", K_NUM, 0, NULL } } },
	{ "rename", { { "oldpath", K_PATH, 0, NULL }, { "newpath", K_PATH, 0, NULL },
		      { "flag", K_KEY, 1, rename_keys } } },
	{ "symlink", { { "target", K_PATH, 0, NULL }, { "linkpath", K_PATH, 0, NULL },
		       { "flag", K_KEY, 1, symlink_keys } } },
	{ "assert-absent", { { "path", K_PATH, 0, NULL } } },
	{ "assert-exists", { { "path", K_PATH, 0, NULL } } },
	{ "assert-data", { { "path", K_PATH, 0, NULL }, { "data", K_DATA, 0, NULL } } },
	{ "assert-xattr", { { "path", K_PATH, 0, NULL }, { "name", K_PATH, 0, NULL },
			    { "data", K_DATA, 0, NULL } } },
	{ "write", { { "path", K_PATH, 0, NULL }, { "data", K_DATA, 0, NULL },
		     { "mode", K_MODE, 1, NULL } } },
	{ "replace", { { "path", K_PATH, 0, NULL }, { "data", K_DATA, 0, NULL },
		       { "mode", K_MODE, 1, NULL } } },
	{ "copy-in", { { "src", K_PATH, 0, NULL }, { "dst", K_PATH, 0, NULL },
		       { "mode", K_MODE, 1, NULL } } },
	{ "import", { { "srcdir", K_PATH, 0, NULL }, { "dstdir", K_PATH, 0, NULL } } },
};
#define NJOPS (sizeof(jops) / sizeof(jops[0]))

static const char *const options[] = { "wedge-on-fail", "crash-only", "wal", "lazy", NULL };
static const char *const conds[] = { "ne", "eq", "lt", "gt", "le", "ge", NULL };

struct out {
	struct fx_json *j;
	char *buf;
	size_t len, cap;
	int nomem;
	size_t elem;     /* the element being converted */
	const char *op;  /* its op, once known to be valid */
};

static void put(struct out *o, const void *s, size_t n)
{
	if (o->nomem)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t c = o->cap ? o->cap : 4096;
		char *nb;

		while (c < o->len + n + 1)
			c *= 2;
		nb = realloc(o->buf, c);
		if (!nb) {
			o->nomem = 1;
			return;
		}
		o->buf = nb;
		o->cap = c;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = 0;
}

static void puts_(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

/* One quoted token: printable ASCII as is, every other byte \xHH. */
static void quoted(struct out *o, const unsigned char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";

	put(o, " \"", 2);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		char e[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '#')
			put(o, &c, 1);
		else
			put(o, e, 4);
	}
	put(o, "\"", 1);
}

/* s with bytes outside printable ASCII as \xHH, for messages. */
static void clean(char *dst, size_t n, const char *s)
{
	size_t k = 0;

	for (; *s && k + 5 < n; s++) {
		unsigned char c = (unsigned char)*s;

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
			dst[k++] = (char)c;
		else
			k += (size_t)snprintf(dst + k, n - k, "\\x%02x", c);
	}
	dst[k] = 0;
}

static int elem_err(struct out *o, const char *fmt, ...)
{
	struct fx_json *j = o->j;
	va_list ap;
	int n;

	j->err_elem = (long)o->elem;
	if (j->elem_line)
		j->err_line = j->elem_line[o->elem];
	if (o->op)
		n = snprintf(j->err, sizeof(j->err), "element %zu (\"op\":\"%s\"): ",
			     o->elem, o->op);
	else
		n = snprintf(j->err, sizeof(j->err), "element %zu: ", o->elem);
	if (n < 0 || (size_t)n >= sizeof(j->err))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(j->err + n, sizeof(j->err) - (size_t)n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int b64val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/* Base64 (standard or URL alphabet, padding optional): bytes, or -1. */
static long unbase64(const char *s, size_t n, unsigned char *dst)
{
	unsigned acc = 0, bits = 0;
	size_t k = 0, i;

	while (n && s[n - 1] == '=')
		n--;
	for (i = 0; i < n; i++) {
		int v = b64val((unsigned char)s[i]);

		if (v < 0)
			return -1;
		acc = acc << 6 | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			dst[k++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	if (bits >= 6 || acc) /* a lone sixth, or nonzero spare bits */
		return -1;
	return (long)k;
}

static long unhex(const char *s, size_t n, unsigned char *dst)
{
	if (n % 2)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		int a = fx_hexval((unsigned char)s[2 * i]), b = fx_hexval((unsigned char)s[2 * i + 1]);

		if (a < 0 || b < 0)
			return -1;
		dst[i] = (unsigned char)(a << 4 | b);
	}
	return (long)(n / 2);
}

static int data(struct out *o, json_t *v, json_t *enc)
{
	const char *e = enc ? json_string_value(enc) : "utf8";
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	unsigned char *buf;
	long got;

	if (!e)
		return elem_err(o, "\"encoding\" must be a string (utf8, base64 or hex)");
	if (!strcmp(e, "utf8") || !strcmp(e, "utf-8")) {
		quoted(o, (const unsigned char *)s, n);
		return 0;
	}
	buf = malloc(n + 1);
	if (!buf)
		return -ENOMEM;
	if (!strcmp(e, "base64"))
		got = unbase64(s, n, buf);
	else if (!strcmp(e, "hex"))
		got = unhex(s, n, buf);
	else {
		char w[64];

		free(buf);
		clean(w, sizeof(w), e);
		return elem_err(o, "unknown encoding \"%s\" (utf8, base64 or hex)", w);
	}
	if (got >= 0)
		quoted(o, buf, (size_t)got);
	free(buf);
	if (got < 0)
		return elem_err(o, "\"data\" is not valid %s", e);
	return 0;
}

static int in_words(const char *s, const char *const *w)
{
	for (; *w; w++)
		if (!strcmp(s, *w))
			return 1;
	return 0;
}

static int only(const char *s, const char *alphabet)
{
	return *s && strspn(s, alphabet) == strlen(s);
}

static int number(struct out *o, const char *name, json_t *v)
{
	char b[32];

	if (!json_is_integer(v))
		return elem_err(o, "\"%s\" must be an integer", name);
	snprintf(b, sizeof(b), " %lld", (long long)json_integer_value(v));
	puts_(o, b);
	return 0;
}

/* Open flags: "O_WRONLY|O_CREAT" or ["O_WRONLY","O_CREAT"]. */
static int flags(struct out *o, json_t *v)
{
	static const char up[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ_";
	const char *s = json_string_value(v);
	size_t i;
	json_t *w;

	if (s) {
		if (!only(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_|") || strlen(s) > 200)
			return elem_err(o, "\"flags\": expected names like \"O_WRONLY|O_CREAT\"");
		puts_(o, " ");
		puts_(o, s);
		return 0;
	}
	if (!json_is_array(v) || !json_array_size(v) || json_array_size(v) > 16)
		return elem_err(o, "\"flags\" must be a string or a list of flag names");
	json_array_foreach(v, i, w) {
		s = json_string_value(w);
		if (!s || !only(s, up) || strlen(s) > 32)
			return elem_err(o, "\"flags\"[%zu]: expected a name like \"O_CREAT\"", i);
		puts_(o, i ? "|" : " ");
		puts_(o, s);
	}
	return 0;
}

/* MODE: an octal string ("0644") or an integer (420 is 0644). */
static int mode(struct out *o, json_t *v)
{
	const char *s = json_string_value(v);
	char b[32];

	if (s) {
		if (!only(s, "01234567") || strlen(s) > 8)
			return elem_err(o, "\"mode\": expected an octal string such as \"0644\"");
		puts_(o, " ");
		puts_(o, s);
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 07777)
		return elem_err(o, "\"mode\" must be an octal string such as \"0644\" "
				"or an integer 0..4095");
	snprintf(b, sizeof(b), " 0%llo", (unsigned long long)json_integer_value(v));
	puts_(o, b);
	return 0;
}

static int arg(struct out *o, const struct field *f, json_t *v, json_t *enc)
{
	const char *s;

	switch (f->k) {
	case K_IDX:
	case K_NUM:
		return number(o, f->name, v);
	case K_PATH:
		if (!json_is_string(v))
			return elem_err(o, "\"%s\" must be a string", f->name);
		quoted(o, (const unsigned char *)json_string_value(v), json_string_length(v));
		return 0;
	case K_DATA:
		if (!json_is_string(v))
			return elem_err(o, "\"%s\" must be a string", f->name);
		return data(o, v, enc);
	case K_MODE:
		return mode(o, v);
	case K_FLAGS:
		return flags(o, v);
	case K_KEY:
		s = json_string_value(v);
		if (!s || !in_words(s, f->keys)) {
			char w[256] = "";

			for (const char *const *k = f->keys; *k; k++)
				snprintf(w + strlen(w), sizeof(w) - strlen(w), "%s\"%s\"",
					 k == f->keys ? "" : " or ", *k);
			return elem_err(o, "\"%s\" must be %s", f->name, w);
		}
		puts_(o, " ");
		puts_(o, s);
		return 0;
	}
	return elem_err(o, "internal: no converter");
}

/* "fail_on": "ne" or ["ne","lt"], with "value": N -> " !ne N !lt N". */
static int fail_on(struct out *o, json_t *f, json_t *v)
{
	json_t *w;
	size_t i, n = json_is_array(f) ? json_array_size(f) : 1;
	char b[48];

	if (!v || !json_is_integer(v))
		return elem_err(o, "\"fail_on\" needs an integer \"value\"");
	for (i = 0; i < n; i++) {
		const char *s;

		w = json_is_array(f) ? json_array_get(f, i) : f;
		s = json_string_value(w);
		if (!s || !in_words(s, conds))
			return elem_err(o, "\"fail_on\": expected \"ne\", \"eq\", \"lt\", "
					"\"gt\", \"le\" or \"ge\" (or a list of them)");
		snprintf(b, sizeof(b), " !%s %lld", s, (long long)json_integer_value(v));
		puts_(o, b);
	}
	if (!n)
		return elem_err(o, "\"fail_on\": an empty list");
	return 0;
}

static int option(struct out *o, json_t *e)
{
	json_t *name = json_object_get(e, "name");
	const char *s = json_string_value(name), *k;
	json_t *v;
	int r;

	o->op = "option";
	json_object_foreach(e, k, v)
		if (strcmp(k, "op") && strcmp(k, "name") && strcmp(k, "data_bytes") &&
		    strcmp(k, "metadata_ops")) {
			char w[64];

			clean(w, sizeof(w), k);
			return elem_err(o, "unknown field \"%s\" (an option has \"name\", "
					"and for reserve \"data_bytes\" and \"metadata_ops\")", w);
		}
	if (s && in_words(s, options)) {
		if (json_object_get(e, "data_bytes") || json_object_get(e, "metadata_ops"))
			return elem_err(o, "\"data_bytes\" and \"metadata_ops\" belong to reserve");
		puts_(o, "option ");
		puts_(o, s);
		return 0;
	}
	if (s && !strcmp(s, "reserve")) {
		json_t *a = json_object_get(e, "data_bytes"), *b = json_object_get(e, "metadata_ops");

		if (!a || !b)
			return elem_err(o, "reserve needs \"data_bytes\" and \"metadata_ops\"");
		puts_(o, "option reserve");
		if ((r = number(o, "data_bytes", a)) < 0 || (r = number(o, "metadata_ops", b)) < 0)
			return r;
		return 0;
	}
	return elem_err(o, "\"name\" must be \"wedge-on-fail\", \"crash-only\", \"wal\", "
			"\"lazy\" or \"reserve\"");
}

static const struct jop *find_op(const char *s)
{
	for (size_t k = 0; k < NJOPS; k++)
		if (!strcmp(s, jops[k].op))
			return &jops[k];
	return NULL;
}

static int known_field(const struct jop *d, const char *k)
{
	if (!strcmp(k, "op") || !strcmp(k, "ignore") || !strcmp(k, "fail_on") ||
	    !strcmp(k, "value"))
		return 1;
	for (int i = 0; i < MAXF && d->f[i].name; i++) {
		if (!strcmp(k, d->f[i].name))
			return 1;
		if (d->f[i].k == K_DATA && !strcmp(k, "encoding"))
			return 1;
	}
	return 0;
}

static int fields_of(const struct jop *d, char *w, size_t n)
{
	w[0] = 0;
	for (int i = 0; i < MAXF && d->f[i].name; i++)
		snprintf(w + strlen(w), n - strlen(w), "%s%s%s%s", i ? ", " : "",
			 d->f[i].optional ? "[" : "", d->f[i].name,
			 d->f[i].optional ? "]" : "");
	return 0;
}

static int element(struct out *o, json_t *e)
{
	const char *s, *k;
	const struct jop *d;
	json_t *v, *ig, *fo;
	char w[256];
	int r;

	o->op = NULL;
	if (!json_is_object(e))
		return elem_err(o, "expected an object such as {\"op\":\"unlink\",\"path\":\"x\"}");
	s = json_string_value(json_object_get(e, "op"));
	if (!s)
		return elem_err(o, "no \"op\" (a string such as \"write\")");
	if (!strcmp(s, "option"))
		return option(o, e);
	if (!(d = find_op(s))) {
		clean(w, sizeof(w), s);
		return elem_err(o, "unknown op \"%s\"", w);
	}
	o->op = d->op;
	json_object_foreach(e, k, v)
		if (!known_field(d, k)) {
			char f[200];

			clean(w, sizeof(w), k);
			fields_of(d, f, sizeof(f));
			return elem_err(o, "unknown field \"%s\" (%s takes %s)", w, d->op, f);
		}
	ig = json_object_get(e, "ignore");
	fo = json_object_get(e, "fail_on");
	if (ig && !json_is_boolean(ig))
		return elem_err(o, "\"ignore\" must be true or false");
	if (json_object_get(e, "value") && !fo)
		return elem_err(o, "\"value\" belongs to \"fail_on\"");
	if (json_is_true(ig))
		puts_(o, "-");
	puts_(o, d->op);
	for (int i = 0; i < MAXF && d->f[i].name; i++) {
		v = json_object_get(e, d->f[i].name);
		if (!v || json_is_null(v)) {
			if (d->f[i].optional)
				continue;
			fields_of(d, w, sizeof(w));
			return elem_err(o, "missing \"%s\" (%s takes %s)", d->f[i].name,
					d->op, w);
		}
		if ((r = arg(o, &d->f[i], v, json_object_get(e, "encoding"))) < 0)
			return r;
	}
	if (fo && (r = fail_on(o, fo, json_object_get(e, "value"))) < 0)
		return r;
	return 0;
}

static int add(struct out *o, json_t *e, unsigned line)
{
	struct fx_json *j = o->j;
	void *nl, *no;
	const char *s;
	int r;

	nl = realloc(j->elem_line, (j->nelem + 1) * sizeof(*j->elem_line));
	if (nl)
		j->elem_line = nl;
	no = realloc(j->elem_op, (j->nelem + 1) * sizeof(*j->elem_op));
	if (no)
		j->elem_op = no;
	if (!nl || !no)
		return -ENOMEM;
	o->elem = j->nelem++;
	j->elem_line[o->elem] = line;
	j->elem_op[o->elem] = NULL;
	if ((r = element(o, e)) < 0)
		return r;
	s = json_string_value(json_object_get(e, "op"));
	if (s && !(j->elem_op[o->elem] = strdup(s)))
		return -ENOMEM;
	put(o, "\n", 1);
	return o->nomem ? -ENOMEM : 0;
}

static int syntax(struct fx_json *j, const json_error_t *e, unsigned line)
{
	char w[200];

	clean(w, sizeof(w), e->text);
	j->err_line = line ? line : (unsigned)e->line;
	j->err_col = e->column > 0 ? (unsigned)e->column : 0;
	snprintf(j->err, sizeof(j->err), "line %u, column %d: %s", j->err_line,
		 e->column, w);
	return -EINVAL;
}

/* One object per line; blank lines skipped. */
static int lines(struct out *o, const char *in, size_t len)
{
	size_t pos = 0;
	unsigned line = 0;
	int r = 0;

	while (pos < len && r == 0) {
		const char *s = in + pos, *nl = memchr(s, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - s) : len - pos;
		json_error_t e;
		json_t *v;
		size_t b = 0;

		line++;
		pos += n + 1;
		while (b < n && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r'))
			b++;
		if (b == n)
			continue;
		v = json_loadb(s, n, JSON_ALLOW_NUL, &e);
		if (!v)
			return syntax(o->j, &e, line);
		r = add(o, v, line);
		json_decref(v);
	}
	return r;
}

int fx_json_convert(const char *in, size_t len, struct fx_json *j)
{
	struct out o = { .j = j };
	size_t skip = 0;
	int r = 0;

	memset(j, 0, sizeof(*j));
	j->err_elem = -1;
	if (len >= 3 && !memcmp(in, "\xef\xbb\xbf", 3)) /* a byte-order mark */
		skip = 3;
	while (skip < len && strchr(" \t\r\n", in[skip]) && in[skip])
		skip++;
	if (skip < len && in[skip] == '[') {
		json_error_t e;
		json_t *a = json_loadb(in + skip, len - skip, JSON_ALLOW_NUL, &e), *v;
		size_t i;

		if (!a) {
			/* e.line counts from the '[': count the lines skipped */
			unsigned before = 0;

			for (size_t k = 0; k < skip; k++)
				before += in[k] == '\n';
			return syntax(j, &e, (unsigned)e.line + before);
		}
		json_array_foreach(a, i, v)
			if ((r = add(&o, v, 0)) < 0)
				break;
		json_decref(a);
	} else {
		r = lines(&o, in, len);
	}
	if (r == 0 && o.nomem)
		r = -ENOMEM;
	if (r == -ENOMEM && !j->err[0])
		snprintf(j->err, sizeof(j->err), "out of memory");
	if (r == 0 && !o.buf)
		o.buf = calloc(1, 1);
	if (r == 0 && !o.buf)
		r = -ENOMEM;
	j->text = o.buf;
	j->len = o.len;
	return r;
}

void fx_json_free(struct fx_json *j)
{
	for (size_t i = 0; i < j->nelem && j->elem_op; i++)
		free(j->elem_op[i]);
	free(j->elem_op);
	free(j->elem_line);
	free(j->text);
	memset(j, 0, sizeof(*j));
}
