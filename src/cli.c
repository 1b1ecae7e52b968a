/* SPDX-License-Identifier: MIT */
/*
 * cli.c - the fstx command:
 *
 *   fstx run DIR [FILE|-] [--json]   apply a transaction file atomically
 *   fstx recover DIR [--json]        roll back a hot journal, clear a wedge
 *   fstx status DIR [--json]         journal state and filesystem facts
 *   fstx read DIR -- CMD [ARGS...]   run CMD while no transaction runs
 *
 * Exit: 0 committed / ok; 1 an op failed, rolled back; 2 usage, parse or
 * validation error (nothing attempted); 3 domain wedged or recovery failed.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "fstx/btrfs_usertrans.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { EX_OK = 0, EX_ROLLED = 1, EX_USAGE = 2, EX_WEDGED = 3 };

static const char usage[] =
	"usage: fstx run DIR [FILE|-] [--json]\n"
	"       fstx recover DIR [--json]\n"
	"       fstx status DIR [--json]\n"
	"       fstx read DIR -- CMD [ARGS...]\n"
	"       fstx --help | --version\n"
	"\n"
	"Apply a transaction (one op per line, see fstx-tx(5)) to the directory\n"
	"tree DIR all or nothing: on any failure, kill or power loss DIR is left\n"
	"exactly as before.  FILE defaults to standard input.\n"
	"\n"
	"Ops: open close pwrite unlink link mkdir rmdir truncate setxattr\n"
	"     removexattr clonerange rename symlink; compare ops assert-absent,\n"
	"     assert-exists, assert-data, assert-xattr.  Options: 'option\n"
	"     wedge-on-fail', 'option crash-only' (no barriers: atomic across\n"
	"     kill -9, not power loss), 'option wal' (in-place overwrites commit\n"
	"     with one barrier), 'option lazy' (the same, atomic but durable only\n"
	"     at the next flush; fstx run flushes as it exits), 'option reserve\n"
	"     BYTES OPS'.  Ops are strict unless marked with '!ne N' ... '!ge N'\n"
	"     conditions or a leading '-'.\n"
	"\n"
	"Exit status: 0 committed, 1 an op failed and the transaction was rolled\n"
	"back, 2 usage/parse/validation error (nothing attempted), 3 domain\n"
	"wedged or recovery failed (run 'fstx recover DIR').\n"
	"\n"
	"fstx read runs CMD holding the domain's lock shared, so CMD sees no\n"
	"half-applied transaction of fstx writers; it exits with CMD's status.\n";

static const char *errname(long e)
{
	const char *s = e ? strerrorname_np((int)(e < 0 ? -e : e)) : NULL;

	return s ? s : "E?";
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

struct outcome {
	const char *status;
	long failed;       /* op index or -1 */
	unsigned line;     /* 0: none */
	long err;          /* -errno or 0 */
	const char *msg;   /* parse / usage message */
};

static void report_json(const struct outcome *o, const struct fx_txt *t,
			uint64_t completed)
{
	printf("{\"status\":\"%s\",\"ops_completed\":%llu,\"failed_op\":", o->status,
	       (unsigned long long)completed);
	if (o->failed >= 0)
		printf("%ld", o->failed);
	else
		printf("null");
	printf(",\"line\":");
	if (o->line)
		printf("%u", o->line);
	else
		printf("null");
	printf(",\"errno\":");
	if (o->err)
		json_str(stdout, errname(o->err));
	else
		printf("null");
	if (o->msg) {
		printf(",\"message\":");
		json_str(stdout, o->msg);
	}
	printf(",\"results\":[");
	for (size_t i = 0; t && o->msg == NULL && i < t->nops; i++)
		printf("%s%lld", i ? "," : "", (long long)t->ops[i].rval);
	printf("]}\n");
}

#define ARG(op, i) ((const char *)(intptr_t)(op)->args[i])

/* The path the open op of fd index fd before op i named, or NULL. */
static const char *fd_path(const struct fx_txt *t, long i, int64_t fd)
{
	while (--i >= 0)
		if (t->ops[i].op == BTRFS_IOC_UT_OP_OPEN && t->ops[i].args[3] == fd)
			return ARG(&t->ops[i], 0);
	return NULL;
}

/*
 * The failed op as the user wrote it, with every name it involves: both
 * paths of link and rename, the file behind an fd, the xattr name.
 */
static void describe_op(const struct fx_txt *t, long i, char *buf, size_t n)
{
	const struct btrfs_ioctl_usertrans_op *op = &t->ops[i];
	const char *name = fstx_op_name(op->op), *a, *b;

	switch (op->op) {
	case BTRFS_IOC_UT_OP_CLOSE:
	case BTRFS_IOC_UT_OP_PWRITE:
		a = fd_path(t, i, op->args[0]);
		snprintf(buf, n, "%s fd %lld (\"%s\")", name, (long long)op->args[0],
			 a ? a : "?");
		break;
	case BTRFS_IOC_UT_OP_CLONERANGE:
		a = fd_path(t, i, op->args[0]);
		b = fd_path(t, i, op->args[1]);
		snprintf(buf, n, "%s into fd %lld (\"%s\") from fd %lld (\"%s\")", name,
			 (long long)op->args[0], a ? a : "?", (long long)op->args[1],
			 b ? b : "?");
		break;
	case BTRFS_IOC_UT_OP_LINK:
	case FSTX_OP_RENAME:
		snprintf(buf, n, "%s \"%s\" to \"%s\"", name, ARG(op, 0), ARG(op, 1));
		break;
	case FSTX_OP_SYMLINK:
		snprintf(buf, n, "%s \"%s\" (to \"%s\")", name, ARG(op, 1), ARG(op, 0));
		break;
	case BTRFS_IOC_UT_OP_SETXATTR:
	case BTRFS_IOC_UT_OP_REMOVEXATTR:
	case FSTX_OP_ASSERT_XATTR:
		snprintf(buf, n, "%s \"%s\" %s", name, ARG(op, 0), ARG(op, 1));
		break;
	default:
		snprintf(buf, n, "%s \"%s\"", name, ARG(op, 0));
	}
}

/* Why op failed, in words; strerror where it says it well. */
static const char *reason(const struct btrfs_ioctl_usertrans_op *op, long e)
{
	if (e == -ECANCELED && fx_op_is_assert(op->op))
		return "assertion does not hold";
	switch (-e) {
	case EXDEV:
		return "the path leaves the domain, or the file is also linked from outside it";
	case ESTALE:
		return "changed by another process while the transaction ran";
	case ECANCELED:
		return "result failed its condition";
	}
	return strerror((int)-e);
}

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

static int cmd_run(const char *dir, const char *file, int json)
{
	struct fx_txt t;
	struct btrfs_ioctl_usertrans ut = { 0 };
	struct outcome o = { .status = "invalid", .failed = -1 };
	fstx_domain *d = NULL;
	char *text = NULL;
	size_t len = 0;
	int base, r, ex = EX_USAGE;
	uint64_t bad;
	const char *why;
	long ret;

	memset(&t, 0, sizeof(t));
	if ((r = read_text(file, &text, &len)) < 0) {
		fprintf(stderr, "fstx: %s: %s\n", file ? file : "-", strerror(-r));
		if (json) {
			o.err = r;
			o.msg = "cannot read the transaction file";
			report_json(&o, NULL, 0);
		}
		return EX_USAGE;
	}
	base = open_basedir(file);
	r = fx_txt_parse(text, len, base >= 0 ? base : -1, &t);
	if (base >= 0)
		fx_os.close(base);
	free(text);
	if (r < 0) {
		o.line = t.errline;
		o.msg = t.err;
		fprintf(stderr, "fstx: %s; nothing changed\n", t.err);
		goto out;
	}
	fx_txt_ut(&t, &ut);
	if (fx_validate_why(&ut, &bad, &why) < 0) {
		static char msg[600];

		ut.ops_completed = bad;
		o.failed = (long)bad;
		o.line = bad < t.nops ? t.lines[bad] : 0;
		o.err = -EINVAL;
		snprintf(msg, sizeof(msg), "line %u: %s: invalid: %s", o.line,
			 bad < t.nops ? fstx_op_name(t.ops[bad].op) : "transaction",
			 why ? why : "?");
		o.msg = msg;
		fprintf(stderr, "fstx: %s; nothing changed\n", msg);
		goto out;
	}
	r = fstx_domain_open(dir, &d);
	if (r < 0) {
		fprintf(stderr, "fstx: %s: %s\n", dir, strerror(-r));
		o.err = r;
		o.msg = "cannot open the domain";
		ex = EX_WEDGED;
		o.status = "wedged";
		goto out;
	}
	ret = fx_usertrans(d, &ut);
	if (ret == 0) {
		o.status = "committed";
		ex = EX_OK;
		if (!json)
			printf("committed %zu ops\n", t.nops);
		goto out;
	}
	o.err = ret;
	o.failed = d->failed_op;
	if (o.failed >= 0 && (size_t)o.failed < t.nops)
		o.line = t.lines[o.failed];
	{
		struct fstx_status st;

		if (fstx_status(d, &st) == 0 && (st.hot || st.wedged)) {
			o.status = "wedged";
			ex = EX_WEDGED;
			fprintf(stderr, "fstx: %s: %s (%s); the domain needs "
				"'fstx recover %s'\n", dir, strerror((int)-ret),
				errname(ret), dir);
			goto out;
		}
	}
	o.status = "rolled_back";
	ex = EX_ROLLED;
	if (o.failed >= 0 && (size_t)o.failed < t.nops) {
		char what[PATH_MAX * 2 + 64];

		describe_op(&t, o.failed, what, sizeof(what));
		fprintf(stderr, "fstx: line %u: %s: %s (%s); transaction rolled "
			"back, nothing changed\n", o.line, what, reason(&t.ops[o.failed], ret),
			errname(ret));
	} else {
		fprintf(stderr, "fstx: %s: %s (%s); nothing changed\n", dir,
			strerror((int)-ret), errname(ret));
	}
out:
	if (json)
		report_json(&o, o.msg ? NULL : &t, ut.ops_completed);
	fstx_domain_close(d);
	fx_txt_free(&t);
	return ex;
}

static int cmd_recover(const char *dir, int json)
{
	fstx_domain *d;
	int r = fstx_domain_open(dir, &d);

	if (r == 0) {
		r = fstx_recover(d);
		fstx_domain_close(d);
	}
	if (json)
		printf("{\"status\":\"%s\",\"errno\":%s%s%s}\n",
		       r < 0 ? "failed" : r ? "recovered" : "clean",
		       r < 0 ? "\"" : "", r < 0 ? errname(r) : "null", r < 0 ? "\"" : "");
	if (r < 0) {
		fprintf(stderr, "fstx: recover %s: %s (%s)%s\n", dir, strerror(-r),
			errname(r), r == -EUCLEAN ? ": the journal is corrupt; "
			"nothing was applied" : "");
		return EX_WEDGED;
	}
	if (!json)
		printf("%s\n", r ? "recovered" : "clean");
	return EX_OK;
}

/* Run argv under the domain's shared lock; its exit status is ours. */
static int cmd_read(const char *dir, char **argv)
{
	fstx_domain *d;
	int r, st;
	pid_t pid;

	r = fstx_domain_open(dir, &d);
	if (r == 0 && (r = fstx_read_begin(d)) < 0)
		fstx_domain_close(d);
	if (r < 0) {
		fprintf(stderr, "fstx: %s: %s (%s)%s\n", dir, strerror(-r), errname(r),
			r == -EROFS ? "; the domain needs 'fstx recover DIR'" : "");
		return EX_WEDGED;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, "fstx: %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	r = pid < 0 ? -errno : 0;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	fstx_read_end(d);
	fstx_domain_close(d);
	if (r < 0) {
		fprintf(stderr, "fstx: fork: %s\n", strerror(-r));
		return EX_WEDGED;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int cmd_status(const char *dir, int json)
{
	struct fstx_status st = { 0 };
	uint64_t wal = 0;
	fstx_domain *d;
	int r = fstx_domain_open(dir, &d);

	if (r == 0) {
		r = fstx_status(d, &st);
		if (r == 0)
			r = fx_wal_peek(d, &wal);
		fstx_domain_close(d);
	}
	if (r < 0) {
		fprintf(stderr, "fstx: status %s: %s\n", dir, strerror(-r));
		return EX_WEDGED;
	}
	if (json) {
		printf("{\"hot\":%s,\"wedged\":%s,\"journal_bytes\":%llu,"
		       "\"fs_type\":\"%s\",\"block_size\":%u,\"reflink\":%s,"
		       "\"xattr_user\":%s,\"dir_fsync\":%s,\"wal_bytes\":%llu}\n",
		       st.hot ? "true" : "false",
		       st.wedged ? "true" : "false",
		       (unsigned long long)st.journal_bytes, st.fs_type, st.block_size,
		       st.reflink ? "true" : "false", st.xattr_user ? "true" : "false",
		       st.dir_fsync ? "true" : "false", (unsigned long long)wal);
	} else {
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

int main(int argc, char **argv)
{
	const char *pos[3] = { 0 };
	int npos = 0, json = 0;

	if (argc >= 3 && !strcmp(argv[1], "read")) {
		if (argc >= 5 && !strcmp(argv[3], "--"))
			return cmd_read(argv[2], argv + 4);
		fprintf(stderr, "fstx: read needs DIR -- CMD [ARGS...]\n%s", usage);
		return EX_USAGE;
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return EX_OK;
		} else if (!strcmp(argv[i], "--version")) {
			printf("fstx %s\n", FSTX_VERSION_STRING);
			return EX_OK;
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "fstx: unknown option %s\n%s", argv[i], usage);
			return EX_USAGE;
		} else if (npos < 3) {
			pos[npos++] = argv[i];
		} else {
			fprintf(stderr, "fstx: too many arguments\n%s", usage);
			return EX_USAGE;
		}
	}
	if (npos >= 2 && !strcmp(pos[0], "run"))
		return cmd_run(pos[1], pos[2], json);
	if (npos == 2 && !strcmp(pos[0], "recover"))
		return cmd_recover(pos[1], json);
	if (npos == 2 && !strcmp(pos[0], "status"))
		return cmd_status(pos[1], json);
	fputs(usage, stderr);
	return EX_USAGE;
}
