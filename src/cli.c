/* SPDX-License-Identifier: MIT */
/*
 * cli.c - the fstx command:
 *
 *   fstx run DIR [FILE|-]            apply a transaction file atomically
 *   fstx recover DIR                 roll back a hot journal, clear a wedge
 *   fstx status DIR                  journal state and filesystem facts
 *   fstx read DIR -- CMD [ARGS...]   run CMD while no transaction runs
 *
 * Options anywhere before "--": --json -q --wait SECONDS --no-wait
 * --input text|json -h -V.  Exit: 0 committed / ok; 1 an op failed,
 * rolled back; 2 usage, parse, validation, or a DIR that cannot be opened
 * (nothing attempted); 3 wedged or recovery failed; 4 a compare op failed
 * (a conflict: retry); 5 the domain lock was not obtained (--wait,
 * --no-wait).  With --json every path prints one JSON object, the
 * envelope of fstx(1).
 */
#define _GNU_SOURCE
#include "internal.h"
#include "fstx/btrfs_usertrans.h"
#include "cli_json.h"
#include "wal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
	EX_OK = 0, EX_ROLLED = 1, EX_USAGE = 2, EX_WEDGED = 3, EX_CONFLICT = 4,
	EX_BUSY = 5,
	EX_NOSTART = 126, /* read: CMD could not be started (as shells say) */
};

#define JSON_SCHEMA 1

static const char usage_all[] =
	"usage: fstx run DIR [FILE|-] [--input text|json]\n"
	"       fstx recover DIR\n"
	"       fstx status DIR\n"
	"       fstx read DIR -- CMD [ARGS...]\n"
	"       fstx --help | --version\n"
	"options: --json (one JSON object on stdout), -q (quiet), --wait SECONDS,\n"
	"         --no-wait, -- (ends options); 'fstx COMMAND --help' for more\n"
	"\n"
	"Apply a transaction (one op per line, see fstx-tx(5)) to the directory\n"
	"tree DIR all or nothing: on any failure, kill or power loss DIR is left\n"
	"exactly as before.\n"
	"\n"
	"Exit status: 0 committed, 1 an op failed and the transaction was rolled\n"
	"back, 2 usage, parse or validation error or DIR cannot be opened\n"
	"(nothing attempted), 3 domain wedged or recovery failed (run 'fstx\n"
	"recover DIR'), 4 a compare op failed (a conflict: retry), 5 the domain\n"
	"lock was not obtained (--wait, --no-wait).\n";

static const char usage_run[] =
	"usage: fstx run DIR [FILE|-] [--input text|json] [--json] [-q]\n"
	"                [--wait SECONDS | --no-wait]\n"
	"\n"
	"Apply the transaction in FILE (standard input if none or '-') to DIR,\n"
	"all or nothing.  --input text (the default) reads fstx-tx(5) text;\n"
	"--input json a JSON array of op objects or JSON lines, e.g.\n"
	"  {\"op\":\"write\",\"path\":\"conf/a\",\"data\":\"...\",\"encoding\":\"base64\"}\n"
	"(see fstx(1), JSON INPUT).\n"
	"\n"
	"Ops: open close pwrite unlink link mkdir rmdir truncate setxattr\n"
	"     removexattr clonerange rename symlink; compare ops assert-absent,\n"
	"     assert-exists, assert-data, assert-xattr; task ops write, replace,\n"
	"     copy-in, import.  Options: 'option wedge-on-fail', 'option\n"
	"     crash-only', 'option wal', 'option lazy', 'option reserve BYTES\n"
	"     OPS'.  Ops are strict unless marked with '!ne N' ... '!ge N'\n"
	"     conditions or a leading '-'.\n"
	"\n"
	"The domain lock is waited for (--wait SECONDS: at most that long,\n"
	"--no-wait: not at all); after a second of waiting fstx says so.\n"
	"Exit: 0 committed, 1 an op failed (rolled back), 2 usage, parse or\n"
	"validation error or DIR cannot be opened, 3 wedged, 4 a compare op\n"
	"failed (a conflict: retry), 5 the lock was not obtained.\n";

static const char usage_recover[] =
	"usage: fstx recover DIR [--json] [-q] [--wait SECONDS | --no-wait]\n"
	"\n"
	"Roll back a journal left hot by a crash or a failed rollback, apply and\n"
	"empty the write-ahead log, clear a wedge.  A directory without .fstx/\n"
	"is clean and left as it is.\n"
	"Exit: 0 clean or recovered, 2 DIR cannot be opened, 3 recovery failed,\n"
	"5 the lock was not obtained.\n";

static const char usage_status[] =
	"usage: fstx status DIR [--json] [--wait SECONDS | --no-wait]\n"
	"\n"
	"Report whether the journal is hot, whether the domain is wedged, the\n"
	"write-ahead log's size and the filesystem's facts.  Changes nothing on\n"
	"disk: a directory without .fstx/ is reported as not a domain.\n"
	"Exit: 0 clean or not a domain, 2 DIR cannot be opened, 3 hot or wedged.\n";

static const char usage_read[] =
	"usage: fstx read DIR [--json] -- CMD [ARGS...]\n"
	"\n"
	"Run CMD holding the domain's lock shared, so CMD sees no half-applied\n"
	"transaction of fstx writers; exit with CMD's status (128+N for signal\n"
	"N, 127 if it cannot be run, 126 if it cannot be started).  With --json\n"
	"the envelope is printed on stdout after CMD ends.\n"
	"Exit (before CMD runs): 2 DIR cannot be opened, 3 wedged or recovery\n"
	"failed.\n";

struct opts {
	int json, quiet, input_json;
	long wait_ms;           /* -1: forever */
	const char *cmd;        /* run, recover, status, read */
	const char *pos[2];     /* DIR, FILE */
	int npos;
	char **argv_cmd;        /* read: CMD [ARGS...] */
};

/* ---- JSON output ---------------------------------------------------- */

static const char *errname(long e)
{
	return fx_errname(e);
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if none. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

/*
 * A JSON string, always valid UTF-8: a byte that is not part of valid
 * UTF-8 is written \u00XX, the code point of the byte's value (what a
 * Latin-1 reading of it would give), as fstx(1) documents.
 */
static void json_str(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n;

	if (!str) {
		fputs("null", stdout);
		return;
	}
	n = strlen(str);
	putchar('"');
	while (n) {
		size_t k = utf8_seq(s, n);

		if (k == 1 && (*s == '"' || *s == '\\'))
			printf("\\%c", *s);
		else if (k == 1 && *s == '\n')
			fputs("\\n", stdout);
		else if (k == 1 && (*s < 0x20 || *s == 0x7f))
			printf("\\u%04x", *s);
		else if (k == 0)
			printf("\\u%04x", *s);
		else
			fwrite(s, 1, k, stdout);
		k = k ? k : 1;
		s += k;
		n -= k;
	}
	putchar('"');
}

static void jkey(const char *k)
{
	printf(",\"%s\":", k);
}

static void jstr(const char *k, const char *v)
{
	jkey(k);
	json_str(v);
}

static void jnum(const char *k, long long v, int valid)
{
	jkey(k);
	if (valid)
		printf("%lld", v);
	else
		fputs("null", stdout);
}

static void jbool(const char *k, int v)
{
	jkey(k);
	fputs(v ? "true" : "false", stdout);
}

static void jerrno(long e)
{
	jstr("errno", e ? errname(e) : NULL);
}

/* The envelope's head: schema, command, status, message, errno. */
static void jopen(const char *cmd, const char *status, const char *msg, long err)
{
	printf("{\"schema\":%d", JSON_SCHEMA);
	jstr("command", cmd);
	jstr("status", status);
	jstr("message", msg);
	jerrno(err);
}

static void jclose(void)
{
	fputs("}\n", stdout);
	fflush(stdout);
}

/* ---- messages ------------------------------------------------------- */

static void say(const struct opts *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void say(const struct opts *o, const char *fmt, ...)
{
	va_list ap;

	(void)o;
	fputs("fstx: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* A usage error: one line naming the problem and where help is. */
static int usage_error(const struct opts *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int usage_error(const struct opts *o, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "fstx: %s (see 'fstx%s%s --help')\n", msg,
		o->cmd ? " " : "", o->cmd ? o->cmd : "");
	if (o->json) {
		jopen(o->cmd ? o->cmd : "fstx", "usage", msg, 0);
		jclose();
	}
	return EX_USAGE;
}

/* DIR cannot be opened: exit 2, naming DIR and the reason. */
static int cannot_open(const struct opts *o, const char *dir, int r)
{
	char msg[PATH_MAX + 128];
	int fd = fx_os.openat2(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY, 0, 0);

	if (fd >= 0) /* DIR itself opens: its .fstx/ is what failed */
		fx_os.close(fd);
	snprintf(msg, sizeof(msg), "cannot open DIR %s%s: %s (%s)", dir,
		 fd >= 0 ? " (setting up its .fstx/)" : "", strerror(-r), errname(r));
	say(o, "%s", msg);
	if (o->json) {
		jopen(o->cmd, "cannot_open", msg, r);
		jstr("dir", dir);
		jclose();
	}
	return EX_USAGE;
}

/* ---- describing ops ------------------------------------------------- */

#define ARG(op, i) ((const char *)(intptr_t)(op)->args[i])

/* The path the open op of fd index fd before op i named, or NULL. */
static const char *fd_path(const struct fx_txt *t, long i, int64_t fd)
{
	while (--i >= 0)
		if (t->ops[i].op == BTRFS_IOC_UT_OP_OPEN && t->ops[i].args[3] == fd)
			return ARG(&t->ops[i], 0);
	return NULL;
}

/* The names op i involves, in order (at most 2); the count. */
static int op_paths(const struct fx_txt *t, long i, const char *p[2])
{
	const struct btrfs_ioctl_usertrans_op *op = &t->ops[i];

	switch (op->op) {
	case BTRFS_IOC_UT_OP_CLOSE:
	case BTRFS_IOC_UT_OP_PWRITE:
		p[0] = fd_path(t, i, op->args[0]);
		return p[0] ? 1 : 0;
	case BTRFS_IOC_UT_OP_CLONERANGE:
		p[0] = fd_path(t, i, op->args[0]);
		p[1] = fd_path(t, i, op->args[1]);
		return p[0] && p[1] ? 2 : 0;
	case BTRFS_IOC_UT_OP_LINK:
	case FSTX_OP_RENAME:
		p[0] = ARG(op, 0);
		p[1] = ARG(op, 1);
		return 2;
	case FSTX_OP_SYMLINK:
		p[0] = ARG(op, 1);
		return 1;
	default:
		p[0] = ARG(op, 0);
		return 1;
	}
}


/* ---- fstx run ------------------------------------------------------- */

/* The directory @FILE data is read relative to: the transaction file's. */
static int open_basedir(const char *file)
{
	char *copy;
	int fd;

	if (!file || !strcmp(file, "-"))
		return fx_os.openat2(AT_FDCWD, ".", O_RDONLY | O_DIRECTORY, 0, 0);
	copy = fx_strdup(file);
	if (!copy)
		return -ENOMEM;
	fd = fx_os.openat2(AT_FDCWD, dirname(copy), O_RDONLY | O_DIRECTORY, 0, 0);
	free(copy);
	return fd;
}

/* The transaction text: FILE, or stdin for none or "-".  0 or -errno. */
static int read_text(const char *file, char **text, size_t *len)
{
	int fd = 0, r;

	if (file && strcmp(file, "-") &&
	    (fd = fx_os.openat2(AT_FDCWD, file, O_RDONLY, 0, 0)) < 0)
		return fd;
	r = fx_txt_read(fd, text, len);
	if (fd > 0)
		fx_os.close(fd);
	return r;
}

/* What became of a run, for the message and the envelope. */
struct outcome {
	const char *status;
	int ex;
	long err;               /* -errno or 0 */
	long failed;            /* op index or -1 */
	long element;           /* JSON input: element index, or -1 */
	unsigned line, col;     /* 0: none */
	uint64_t completed;
	enum { RES_NONE, RES_UPTO, RES_ALL, RES_FAILED } show_results;
	char msg[PATH_MAX * 2 + 2048];
};

struct run {
	const struct opts *o;
	const char *dir, *file, *name;
	struct fx_txt t;
	struct fx_json j;
	int parsed;
};

static void run_json(const struct run *R, const struct outcome *out)
{
	const struct fx_txt *t = &R->t;
	long f = out->failed;
	int have = R->parsed && f >= 0 && (size_t)f < t->nops;

	jopen("run", out->status, out->msg, out->err);
	jnum("ops_completed", (long long)out->completed, 1);
	jnum("failed_op", f, f >= 0);
	jnum("line", out->line, out->line > 0);
	jnum("column", out->col, out->col > 0);
	jnum("element", out->element, out->element >= 0);
	jkey("op");
	if (have) {
		printf("{\"index\":%ld", f);
		jstr("name", fstx_op_name(t->ops[f].op));
		printf("}");
	} else {
		fputs("null", stdout);
	}
	jkey("path");
	if (have) {
		const char *p[2] = { 0 };
		int n = op_paths(t, f, p);

		json_str(n ? p[0] : NULL);
		jkey("paths");
		putchar('[');
		for (int i = 0; i < n; i++) {
			if (i)
				putchar(',');
			json_str(p[i]);
		}
		putchar(']');
	} else {
		fputs("null,\"paths\":null", stdout);
	}
	jkey("results");
	putchar('[');
	for (size_t i = 0; R->parsed && i < t->nops; i++) {
		int ran = out->show_results == RES_ALL ||
			  (out->show_results == RES_UPTO && (long)i <= f) ||
			  (out->show_results == RES_FAILED && (long)i == f);

		if (i)
			putchar(',');
		if (ran)
			printf("%lld", (long long)t->ops[i].rval);
		else
			fputs("null", stdout);
	}
	putchar(']');
	jclose();
}

/* "line N" or "element N" of op i, for messages. */
static void where(const struct run *R, long i, struct outcome *out, char *buf,
		  size_t n)
{
	out->line = 0;
	if (i < 0 || (size_t)i >= R->t.nops) {
		buf[0] = 0;
		return;
	}
	if (R->o->input_json) {
		out->element = (long)R->t.lines[i] - 1;
		out->line = R->j.elem_line && (size_t)out->element < R->j.nelem ?
			    R->j.elem_line[out->element] : 0;
		snprintf(buf, n, "element %ld: ", out->element);
	} else {
		out->line = R->t.lines[i];
		snprintf(buf, n, "line %u: ", out->line);
	}
}

/* A parse error: the text parser's, or the JSON converter's. */
static int parse_failed(struct run *R, struct outcome *out, int r)
{
	struct fx_txt *t = &R->t;
	char *nl, *m;

	out->status = "invalid";
	out->ex = EX_USAGE;
	out->err = r == -ENOMEM ? r : -EINVAL;
	if (!R->o->input_json) {
		fprintf(stderr, "%s%s", t->err, t->err[0] && t->err[strlen(t->err) - 1]
			== '\n' ? "" : "\n");
		out->line = t->errline;
		out->col = t->errcol;
		snprintf(out->msg, sizeof(out->msg), "%s", t->err);
		if ((nl = strchr(out->msg, '\n')))
			*nl = 0;
		return EX_USAGE;
	}
	/* the text line is the element's: name it, with the parser's words */
	out->element = (long)t->errline - 1;
	m = strstr(t->err, "error: ");
	m = m ? m + 7 : t->err;
	if ((nl = strchr(m, '\n')))
		*nl = 0;
	if (out->element >= 0 && (size_t)out->element < R->j.nelem) {
		const char *op = R->j.elem_op[out->element];

		out->line = R->j.elem_line[out->element];
		snprintf(out->msg, sizeof(out->msg), "%s: element %ld%s%s%s: %s", R->name,
			 out->element, op ? " (\"op\":\"" : "", op ? op : "",
			 op ? "\")" : "", m);
	} else {
		snprintf(out->msg, sizeof(out->msg), "%s: %s", R->name, m);
	}
	say(R->o, "%s; nothing changed", out->msg);
	return EX_USAGE;
}

/* Read FILE, convert JSON input, parse. */
static int run_parse(struct run *R, struct outcome *out)
{
	char *text = NULL;
	size_t len = 0;
	int base, r;

	if ((r = read_text(R->file, &text, &len)) < 0) {
		out->err = r;
		snprintf(out->msg, sizeof(out->msg), "cannot read the transaction file "
			 "%s: %s", R->file ? R->file : "-", strerror(-r));
		say(R->o, "%s: %s", R->file ? R->file : "-", strerror(-r));
		return EX_USAGE;
	}
	if (R->o->input_json) {
		r = fx_json_convert(text, len, &R->j);
		free(text);
		text = NULL;
		if (r < 0) {
			out->err = r == -ENOMEM ? r : -EINVAL;
			out->element = R->j.err_elem;
			out->line = R->j.err_line;
			out->col = R->j.err_col;
			snprintf(out->msg, sizeof(out->msg), "%s: %s", R->name, R->j.err);
			say(R->o, "%s; nothing changed", out->msg);
			return EX_USAGE;
		}
	}
	base = open_basedir(R->file);
	memset(&R->t, 0, sizeof(R->t));
	R->t.stdin_taken = !R->file || !strcmp(R->file, "-");
	if (R->o->input_json)
		r = fx_txt_parse_named(R->j.text, R->j.len, base >= 0 ? base : -1,
				       R->name, &R->t);
	else
		r = fx_txt_parse_named(text, len, base >= 0 ? base : -1, R->name, &R->t);
	if (base >= 0)
		fx_os.close(base);
	free(text);
	if (r < 0)
		return parse_failed(R, out, r);
	R->parsed = 1;
	return EX_OK;
}

static void lock_notice(void *arg)
{
	fprintf(stderr, "fstx: waiting for the domain lock of %s (held by another "
		"transaction or reader)...\n", (const char *)arg);
}

/* Open the domain with the wait the options ask for. */
static int open_domain(const struct opts *o, const char *dir, fstx_domain **d)
{
	int r = fstx_domain_open(dir, d);

	if (r == 0)
		fx_domain_set_wait(*d, o->wait_ms, o->quiet ? NULL : lock_notice,
				   (void *)dir);
	return r;
}

static int is_busy(const struct opts *o, long r)
{
	return o->wait_ms >= 0 && (r == -EWOULDBLOCK || r == -ETIMEDOUT);
}

static void busy_msg(const struct opts *o, const char *dir, char *buf, size_t n)
{
	if (o->wait_ms == 0)
		snprintf(buf, n, "%s: the domain lock is held by another transaction "
			 "or reader (--no-wait); nothing changed", dir);
	else
		snprintf(buf, n, "%s: the domain lock is held by another transaction "
			 "or reader (waited %.3g s); nothing changed", dir,
			 (double)o->wait_ms / 1000);
}

/* After fx_usertrans() failed with ret: which outcome, and its message. */
static void run_failed(struct run *R, fstx_domain *d, long ret, struct outcome *out)
{
	const struct fx_txt *t = &R->t;
	char at[64], what[PATH_MAX * 2 + 64];
	long f = d->failed_op;

	out->err = ret;
	out->failed = f >= 0 && (size_t)f < t->nops ? f : -1;
	f = out->failed;
	where(R, f, out, at, sizeof(at));
	out->show_results = f >= 0 ? RES_UPTO : RES_NONE;
	if (f < 0 && is_busy(R->o, ret)) {
		out->status = "busy";
		out->ex = EX_BUSY;
		busy_msg(R->o, R->dir, out->msg, sizeof(out->msg));
		goto say;
	}
	/* owed: the log's record was written, then its barrier or an
	 * in-place change failed; the transaction may be committed: not
	 * "nothing changed" (recovery finishes it or settles the disk) */
	if (fx_needs_recover(d) > 0) {
		out->status = "wedged";
		out->ex = EX_WEDGED;
		snprintf(out->msg, sizeof(out->msg), "%s: %s (%s); the domain needs "
			 "'fstx recover %s'", R->dir, strerror((int)-ret), errname(ret),
			 R->dir);
		goto say;
	}
	if (f < 0) {
		out->status = "rolled_back";
		out->ex = EX_ROLLED;
		snprintf(out->msg, sizeof(out->msg), "%s: %s (%s); nothing changed",
			 R->dir, strerror((int)-ret), errname(ret));
		goto say;
	}
	fx_describe_op(t->ops, (size_t)f, what, sizeof(what));
	if (ret == -ECANCELED && fx_op_is_assert(t->ops[f].op)) {
		/* compare ops run before any other op: nothing else ran */
		out->status = "conflict";
		out->ex = EX_CONFLICT;
		out->show_results = RES_FAILED;
		snprintf(out->msg, sizeof(out->msg), "%s%s: %s (%s); a conflict: the "
			 "tree is not as the transaction expects, nothing changed",
			 at, what, fx_op_reason(&t->ops[f], ret), errname(ret));
		goto say;
	}
	out->status = "rolled_back";
	out->ex = EX_ROLLED;
	snprintf(out->msg, sizeof(out->msg), "%s%s: %s (%s); transaction rolled "
		 "back, nothing changed", at, what, fx_op_reason(&t->ops[f], ret),
		 errname(ret));
say:
	say(R->o, "%s", out->msg);
}

static int cmd_run(const struct opts *o)
{
	struct run R = { .o = o, .dir = o->pos[0], .file = o->pos[1] };
	struct outcome out = { .status = "invalid", .ex = EX_USAGE, .failed = -1,
			       .element = -1 };
	struct btrfs_ioctl_usertrans ut = { 0 };
	fstx_domain *d = NULL;
	uint64_t bad;
	const char *why;
	long ret;
	int r;

	R.name = !R.file || !strcmp(R.file, "-") ? "<stdin>" : R.file;
	if (run_parse(&R, &out) != EX_OK)
		goto out;
	fx_txt_ut(&R.t, &ut);
	if (fx_validate_why(&ut, &bad, &why) < 0) {
		char at[64];

		out.completed = bad;
		out.failed = bad < R.t.nops ? (long)bad : -1;
		out.err = -EINVAL;
		where(&R, out.failed, &out, at, sizeof(at));
		snprintf(out.msg, sizeof(out.msg), "%s%s: invalid: %s", at,
			 bad < R.t.nops ? fstx_op_name(R.t.ops[bad].op) : "transaction",
			 why ? why : "?");
		say(o, "%s; nothing changed", out.msg);
		goto out;
	}
	r = open_domain(o, R.dir, &d);
	if (r < 0) {
		out.ex = cannot_open(o, R.dir, r);
		fstx_domain_close(d);
		fx_txt_free(&R.t);
		fx_json_free(&R.j);
		return out.ex;
	}
	ret = fx_usertrans(d, &ut);
	out.completed = ut.ops_completed;
	if (ret == 0) {
		out.status = "committed";
		out.ex = EX_OK;
		out.show_results = RES_ALL;
		snprintf(out.msg, sizeof(out.msg), "committed %zu ops", R.t.nops);
		if (!o->json && !o->quiet)
			printf("%s\n", out.msg);
	} else {
		run_failed(&R, d, ret, &out);
	}
out:
	if (o->json)
		run_json(&R, &out);
	fstx_domain_close(d);
	fx_txt_free(&R.t);
	fx_json_free(&R.j);
	return out.ex;
}

/* ---- fstx recover, status, read -------------------------------------- */

/* Does DIR hold a domain?  1 yes, 0 no (no .fstx), -errno: DIR unusable. */
static int has_domain(const char *dir)
{
	struct stat st;
	int fd = fx_os.openat2(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY, 0, 0), r;

	if (fd < 0)
		return fd;
	r = fx_os.fstatat(fd, ".fstx", &st, AT_SYMLINK_NOFOLLOW);
	fx_os.close(fd);
	if (r == -ENOENT)
		return 0;
	return r < 0 ? r : 1;
}

static int cmd_recover(const struct opts *o)
{
	const char *dir = o->pos[0];
	char msg[2 * PATH_MAX + 512];
	fstx_domain *d = NULL;
	const char *status;
	int r = has_domain(dir), ex;

	if (r < 0)
		return cannot_open(o, dir, r);
	if (r > 0) {
		if ((r = open_domain(o, dir, &d)) < 0)
			return cannot_open(o, dir, r);
		r = fstx_recover(d);
		fstx_domain_close(d);
	}
	if (r >= 0) {
		status = r ? "recovered" : "clean";
		ex = EX_OK;
		snprintf(msg, sizeof(msg), "%s", r ? "recovered" : "clean");
		if (!o->json && !o->quiet)
			printf("%s\n", msg);
	} else if (is_busy(o, r)) {
		status = "busy";
		ex = EX_BUSY;
		busy_msg(o, dir, msg, sizeof(msg));
		say(o, "%s", msg);
	} else {
		status = "wedged";
		ex = EX_WEDGED;
		snprintf(msg, sizeof(msg), "recover %s: %s (%s)%s%s%s", dir, strerror(-r),
			 errname(r), r == -EUCLEAN ? ": the journal is corrupt; "
			 "nothing was applied. The journal (" : "",
			 r == -EUCLEAN ? dir : "",
			 r == -EUCLEAN ? "/.fstx/journal) or a progress mark beside it "
			 "(.fstx/step.*) fails its checks, so fstx cannot tell which "
			 "changes of the interrupted transaction reached the tree. Keep "
			 "a copy of .fstx/ for a bug report, check the files that "
			 "transaction touched, then remove .fstx/journal and "
			 ".fstx/step.* and run fstx recover again" : "");
		say(o, "%s", msg);
	}
	if (o->json) {
		jopen("recover", status, msg, r < 0 ? r : 0);
		jclose();
	}
	return ex;
}

/* Run argv under the domain's shared lock; its exit status is ours. */
static int cmd_read(const struct opts *o)
{
	const char *dir = o->pos[0];
	char msg[PATH_MAX + 256];
	fstx_domain *d;
	int r, st, ex;
	pid_t pid;

	r = fstx_domain_open(dir, &d);
	if (r < 0)
		return cannot_open(o, dir, r);
	if ((r = fstx_read_begin(d)) < 0) {
		fstx_domain_close(d);
		snprintf(msg, sizeof(msg), "%s: %s (%s)%s", dir, strerror(-r), errname(r),
			 r == -EROFS ? "; the domain needs 'fstx recover DIR'" :
			 r == -EUCLEAN ? ": the journal is corrupt; nothing was applied" : "");
		say(o, "%s", msg);
		if (o->json) {
			jopen("read", "wedged", msg, r);
			jclose();
		}
		return EX_WEDGED;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		execvp(o->argv_cmd[0], o->argv_cmd);
		fprintf(stderr, "fstx: %s: %s\n", o->argv_cmd[0], strerror(errno));
		_exit(127);
	}
	r = pid < 0 ? -errno : 0;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	fstx_read_end(d);
	fstx_domain_close(d);
	if (r < 0) {
		snprintf(msg, sizeof(msg), "fork: %s", strerror(-r));
		say(o, "%s", msg);
		if (o->json) {
			jopen("read", "error", msg, r);
			jclose();
		}
		return EX_NOSTART;
	}
	ex = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (o->json) {
		snprintf(msg, sizeof(msg), "%s exited with status %d", o->argv_cmd[0], ex);
		jopen("read", "ok", msg, 0);
		jnum("exit_status", ex, 1);
		jclose();
	}
	return ex;
}

static void status_json(const char *status, const char *msg,
			const struct fstx_status *st, uint64_t wal, int domain)
{
	jopen("status", status, msg, 0);
	jbool("hot", st->hot);
	jbool("wedged", st->wedged);
	jnum("journal_bytes", (long long)st->journal_bytes, 1);
	jstr("fs_type", domain ? st->fs_type : NULL);
	jnum("block_size", st->block_size, domain);
	jkey("reflink");
	fputs(!domain ? "null" : st->reflink ? "true" : "false", stdout);
	jkey("xattr_user");
	fputs(!domain ? "null" : st->xattr_user ? "true" : "false", stdout);
	jkey("dir_fsync");
	fputs(!domain ? "null" : st->dir_fsync ? "true" : "false", stdout);
	jnum("wal_bytes", (long long)wal, 1);
	jclose();
}

static int cmd_status(const struct opts *o)
{
	const char *dir = o->pos[0];
	struct fstx_status st = { 0 };
	char msg[PATH_MAX + 128];
	uint64_t wal = 0;
	fstx_domain *d;
	const char *status;
	int r = has_domain(dir);

	if (r < 0)
		return cannot_open(o, dir, r);
	if (r == 0) {
		/* a query: never create .fstx/ */
		snprintf(msg, sizeof(msg), "%s is not an fstx domain (no .fstx/: no "
			 "transaction has run here)", dir);
		if (o->json)
			status_json("not_a_domain", msg, &st, 0, 0);
		else if (!o->quiet)
			printf("%s\n", msg);
		return EX_OK;
	}
	if ((r = open_domain(o, dir, &d)) < 0)
		return cannot_open(o, dir, r);
	r = fstx_status(d, &st);
	if (r == 0)
		r = fx_wal_peek(d, &wal);
	fstx_domain_close(d);
	if (r < 0)
		return cannot_open(o, dir, r);
	status = st.wedged ? "wedged" : st.hot ? "hot" : "clean";
	snprintf(msg, sizeof(msg), "%s", st.wedged ? "the domain is wedged: run "
		 "'fstx recover DIR'" : st.hot ? "the journal is hot: run 'fstx "
		 "recover DIR'" : "clean");
	if (o->json) {
		status_json(status, msg, &st, wal, 1);
	} else if (!o->quiet) {
		printf("journal: %s (%llu bytes)\nwrite-ahead log: %llu bytes of records\n"
		       "wedged: %s\nfilesystem: %s, block "
		       "size %u, reflink %s, user xattrs %s, directory fsync %s\n",
		       st.hot ? "hot" : "clean", (unsigned long long)st.journal_bytes,
		       (unsigned long long)wal,
		       st.wedged ? "yes" : "no", st.fs_type, st.block_size,
		       st.reflink ? "yes" : "no", st.xattr_user ? "yes" : "no",
		       st.dir_fsync ? "yes" : "no");
	}
	return st.wedged || st.hot ? EX_WEDGED : EX_OK;
}

/* ---- the command line ----------------------------------------------- */

static const struct cmd {
	const char *name;
	const char *help;
	int nmin, nmax;         /* positional arguments after the command */
	const char *need;       /* what a missing one is called */
	int (*fn)(const struct opts *o);
} cmds[] = {
	{ "run", usage_run, 1, 2, "DIR", cmd_run },
	{ "recover", usage_recover, 1, 1, "DIR", cmd_recover },
	{ "status", usage_status, 1, 1, "DIR", cmd_status },
	{ "read", usage_read, 1, 1, "DIR", cmd_read },
};

static const struct cmd *find_cmd(const char *name)
{
	for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++)
		if (!strcmp(name, cmds[k].name))
			return &cmds[k];
	return NULL;
}

/* "--wait" SECONDS: non-negative, decimal; ms or -1 if bad. */
static long seconds(const char *s)
{
	char *e;
	double v;

	errno = 0;
	v = strtod(s, &e);
	if (!*s || *e || errno || !(v >= 0) || v > 86400.0 * 365)
		return -1;
	v *= 1000;
	return (long)v + (v > (double)(long)v); /* rounded up */
}

/* An option's value: "--opt=V" or "--opt V".  NULL if missing. */
static const char *optval(char **argv, int argc, int *i, const char *name)
{
	size_t n = strlen(name);

	if (!strncmp(argv[*i], name, n) && argv[*i][n] == '=')
		return argv[*i] + n + 1;
	return *i + 1 < argc ? argv[++*i] : NULL;
}

static int is_opt(const char *a, const char *name)
{
	size_t n = strlen(name);

	return !strncmp(a, name, n) && (a[n] == 0 || a[n] == '=');
}

int main(int argc, char **argv)
{
	struct opts o = { .wait_ms = -1 };
	const struct cmd *c = NULL;
	const char *extra = NULL;
	int help = 0, i;

	/* --json first, so that every usage error is an envelope too */
	for (i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--json"))
			o.json = 1;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v;

		if (!strcmp(a, "--")) {
			if (c && !strcmp(c->name, "read")) {
				o.argv_cmd = argv + i + 1;
				break;
			}
			while (++i < argc) {
				if (!c) {
					if (!(c = find_cmd(argv[i])))
						return usage_error(&o, "unknown command '%s'",
								   argv[i]);
					o.cmd = c->name;
				} else if (o.npos < 2)
					o.pos[o.npos++] = argv[i];
				else if (!extra)
					extra = argv[i];
			}
			break;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			help = 1;
		} else if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			printf("fstx %s\n", fstx_version());
			return EX_OK;
		} else if (!strcmp(a, "--json")) {
			o.json = 1;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			o.quiet = 1;
		} else if (!strcmp(a, "--no-wait")) {
			o.wait_ms = 0;
		} else if (is_opt(a, "--wait")) {
			v = optval(argv, argc, &i, "--wait");
			if (!v)
				return usage_error(&o, "--wait needs SECONDS");
			if ((o.wait_ms = seconds(v)) < 0)
				return usage_error(&o, "--wait: bad number of seconds '%s'", v);
		} else if (is_opt(a, "--input")) {
			v = optval(argv, argc, &i, "--input");
			if (!v || (strcmp(v, "json") && strcmp(v, "text")))
				return usage_error(&o, "--input needs 'text' or 'json'");
			o.input_json = !strcmp(v, "json");
		} else if (a[0] == '-' && a[1]) {
			return usage_error(&o, "unknown option '%s'", a);
		} else if (!c) {
			if (!(c = find_cmd(a)))
				return usage_error(&o, "unknown command '%s'", a);
			o.cmd = c->name;
		} else if (o.npos < 2) {
			o.pos[o.npos++] = a;
		} else if (!extra) {
			extra = a;
		}
	}
	if (help) {
		fputs(c ? c->help : usage_all, stdout);
		return EX_OK;
	}
	if (!c)
		return usage_error(&o, "a command is needed: run, recover, status or read");
	if (o.npos < c->nmin)
		return usage_error(&o, "%s: missing %s", c->name, c->need);
	if (o.npos > c->nmax || extra)
		return usage_error(&o, "%s: unexpected argument '%s'", c->name,
				   extra ? extra : o.pos[o.npos - 1]);
	if (!strcmp(c->name, "read") && (!o.argv_cmd || !o.argv_cmd[0]))
		return usage_error(&o, "read: missing '-- CMD'");
	if (o.input_json && strcmp(c->name, "run"))
		return usage_error(&o, "%s: --input is for run", c->name);
	return c->fn(&o);
}
