/* SPDX-License-Identifier: MIT */
/*
 * fstxbench.c - fstx against raw writes, the temp+rename pattern and SQLite,
 * on the same work, in the same run.
 *
 *   fstxbench [-w WORKLOADS] [-m METHODS] [-r ROUNDS] [-s SCALE] [-t TAG] DIR
 *
 * Workloads (one transaction each):
 *   a   4 files x 4 KiB overwrite + 1 xattr each
 *   b   1 new 1 MiB file, renamed into place over the current one, plus the
 *       unlink of an old file
 *   c   100 small files (512 bytes) created in a new directory
 *   d   64 MiB overwrite of an existing file (4 x 16 MiB writes)
 *   e1  like (a) on 1 file, 1 process; e8: 8 processes at once, each on its
 *       own file of one domain (one database for SQLite)
 *   f   10000 small files in a new directory (barriers and memory against
 *       transaction size; fstx and raw only)
 *   g   object put: a new 4 KiB object (objs/o<i>, a fresh name each
 *       transaction) with one user xattr, plus an in-place overwrite of a
 *       256-byte index file
 *   n   (g) while a neighbour process keeps about 256 MiB dirty in a file of
 *       the same filesystem (1 MiB pwrites sweeping a 256 MiB file in a
 *       loop, never synced): what a barrier that flushes more than its own
 *       files costs on a shared filesystem.  The neighbour runs in DIR from
 *       after the setup until the measurement ends, is killed, and its file
 *       removed; its CPU and the device bytes it has written count in n's
 *       cpu_us and dev B/B, it makes no barriers.
 * Methods:
 *   raw          the same writes, no atomicity, no fsync
 *   raw-fsync    the same, fsync of each file written
 *   rename       each file to a temp name, fsync, rename; then fsync of each
 *                touched directory (the correct form of the pattern)
 *   sqlite-wal   the bytes as BLOBs in one SQLite transaction, WAL,
 *                synchronous=FULL
 *   sqlite-del   the same, rollback journal (DELETE), synchronous=FULL
 *   fstx         one fstx transaction, durable (the default); the run
 *                ends with a checkpoint (fstx_recover(), timed and counted)
 *   fstx-crash   one fstx transaction, crash-only (FSTX_UT_NOSYNC)
 *   fstx-wal     the same with FSTX_UT_WAL, which changes nothing now
 *                (data-only transactions take the write-ahead log by
 *                default); kept so that older result tables compare
 *   fstx-wal-crash  the same, crash-only (FSTX_UT_WAL | FSTX_UT_NOSYNC)
 *   fstx-lazy    one fstx transaction, lazy (FSTX_UT_LAZY: atomic across
 *                power loss, durable at the next flush; the run ends with
 *                fstx_sync(), timed and counted)
 *
 * Each (workload, method, round) runs in a fresh child process in a fresh
 * subdirectory of DIR; rounds interleave the methods so that all see the
 * same machine.  Barriers are counted by interposing fsync, fdatasync and
 * syncfs in this executable (libsqlite3 and libfstx both call them here);
 * device bytes come from /sys/class/block/DEV/stat around a syncfs that is
 * not counted; peak RSS from wait4().
 *
 * With -f USEC every barrier, after its call, also waits for a modelled
 * device's cache flush of USEC (one at a time; requests made during a
 * flush share the next): a device whose flush costs what an SSD's or a
 * disk's does, where a loop device's is a fraction of a millisecond of
 * the host's CPU.
 *
 * Output: one tab-separated line per (workload, method):
 *   tag workload method ntx median_ms p99_ms tx_per_s fsync fdatasync syncfs
 *   dev_bytes_per_payload_byte rss_mib cpu_us dev_us
 * (per-transaction counts; -1 where not measurable).  cpu_us is the CPU
 * time of the whole machine (every process, kernel threads such as a loop
 * device's, interrupts; not steal) per transaction while the work ran,
 * from /proc/stat: with the number of CPUs it bounds the throughput that
 * more processes could reach.  dev_us is the time the device had I/O in
 * flight (io_ticks of /sys/class/block/DEV/stat, in ms) per transaction
 * while the work ran: a device kept always busy at that cost per
 * transaction bounds throughput too.  bench/report.sh turns
 * these into tables and plots.  No thresholds here: figures only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "fstx.h"

/* ---- barrier counting ------------------------------------------------- */

struct counts { long fsync, fdatasync, syncfs; };
static struct counts cnt;
static long flush_us; /* -f: a device cache flush of this many us */

/*
 * The device of -f: one cache flush at a time, each flush_us long; a
 * barrier waits for a flush that begins after it asked, and every barrier
 * that asked during one flush is served by the next (as the block layer
 * merges flush requests).  Shared by every process of the run.
 */
struct flushdev {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	long started, done;
	int busy;
};
static struct flushdev *fdev;

static void flushdev_init(void)
{
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;

	fdev = mmap(NULL, sizeof(*fdev), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (fdev == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&fdev->mu, &ma);
	pthread_cond_init(&fdev->cv, &ca);
}

static long flushed(long r)
{
	long ticket;

	if (flush_us <= 0 || !fdev)
		return r;
	pthread_mutex_lock(&fdev->mu);
	ticket = fdev->started + 1;
	while (fdev->done < ticket) {
		if (!fdev->busy) {
			struct timespec ts = { flush_us / 1000000, flush_us % 1000000 * 1000 };
			long gen = ++fdev->started;

			fdev->busy = 1;
			pthread_mutex_unlock(&fdev->mu);
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
			pthread_mutex_lock(&fdev->mu);
			fdev->done = gen;
			fdev->busy = 0;
			pthread_cond_broadcast(&fdev->cv);
		} else {
			pthread_cond_wait(&fdev->cv, &fdev->mu);
		}
	}
	pthread_mutex_unlock(&fdev->mu);
	return r;
}

int fsync(int fd)
{
	__atomic_fetch_add(&cnt.fsync, 1, __ATOMIC_RELAXED); /* fsync_each's threads too */
	return (int)flushed(syscall(SYS_fsync, fd));
}

int fdatasync(int fd)
{
	__atomic_fetch_add(&cnt.fdatasync, 1, __ATOMIC_RELAXED); /* fsync_each's threads too */
	return (int)flushed(syscall(SYS_fdatasync, fd));
}

int syncfs(int fd)
{
	__atomic_fetch_add(&cnt.syncfs, 1, __ATOMIC_RELAXED); /* fsync_each's threads too */
	return (int)flushed(syscall(SYS_syncfs, fd));
}

/* An uncounted syncfs, for measuring device bytes. */
static void quiet_syncfs(int fd)
{
	syscall(SYS_syncfs, fd);
}

/* ---- helpers ------------------------------------------------------------ */

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "fstxbench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	_exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st; (void)flag; (void)f;
	return remove(p) < 0 && errno != ENOENT ? -1 : 0;
}

static void rmtree(const char *p)
{
	nftw(p, rm_one, 64, FTW_DEPTH | FTW_PHYS);
}

/* Sectors written by the block device holding dir, or -1 (tmpfs, ...). */
static char devstat[PATH_MAX];

static void find_device(const char *dir)
{
	char real[PATH_MAX], line[4096], best[PATH_MAX] = "";
	size_t bestlen = 0;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	devstat[0] = 0;
	if (!f || !realpath(dir, real)) {
		if (f)
			fclose(f);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX], src[PATH_MAX], *dash = strstr(line, " - ");
		size_t n;

		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(dash + 3, "%*s %4095s", src) != 1)
			continue;
		n = strlen(mnt);
		if (strncmp(real, mnt, n) || (real[n] && real[n] != '/' && n > 1))
			continue;
		if (n >= bestlen) {
			bestlen = n;
			snprintf(best, sizeof(best), "%s", src);
		}
	}
	fclose(f);
	if (!strncmp(best, "/dev/", 5))
		snprintf(devstat, sizeof(devstat), "/sys/class/block/%s/stat",
			 strrchr(best, '/') + 1);
	if (devstat[0] && access(devstat, R_OK))
		devstat[0] = 0;
}

/* Busy clock ticks of all CPUs so far (user, nice, system, irq, softirq). */
static long long cpu_busy(void)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
		   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	return n < 7 ? -1 : (long long)(v[0] + v[1] + v[2] + v[5] + v[6]);
}

/*
 * Field i (0-based) of the device's stat line: 6 sectors written, 9 the
 * time in ms with I/O in flight (io_ticks); -1 where unknown.
 */
static long long dev_stat(int i)
{
	long long v[10];
	FILE *f;
	int n;

	if (!devstat[0] || !(f = fopen(devstat, "r")))
		return -1;
	n = fscanf(f, "%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", &v[0],
		   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
	fclose(f);
	return n > i ? v[i] : -1;
}

static long long dev_sectors(void)
{
	return dev_stat(6);
}

static long long dev_busy_ms(void)
{
	return dev_stat(9);
}

/* ---- the work, described once --------------------------------------------- */

enum kind { PUT, PUTNEW, RENAME, DEL, MKDIR, RMDIR };

struct op {
	enum kind k;
	char path[64], path2[64];
	const char *buf;
	size_t len;
	int nwrites;       /* PUT: len bytes written nwrites times, consecutively */
	const char *xattr; /* 8 bytes, or NULL */
};

struct txn { struct op *ops; size_t n, cap; };

static void add(struct txn *t, enum kind k, const char *p, const char *p2,
		const char *buf, size_t len, int nwrites, const char *xattr)
{
	struct op *o;

	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 16;
		t->ops = realloc(t->ops, t->cap * sizeof(*t->ops));
		if (!t->ops)
			die("out of memory");
	}
	o = &t->ops[t->n++];
	o->k = k;
	snprintf(o->path, sizeof(o->path), "%s", p);
	snprintf(o->path2, sizeof(o->path2), "%s", p2 ? p2 : "");
	o->buf = buf;
	o->len = len;
	o->nwrites = nwrites;
	o->xattr = xattr;
}

static char *bufs[8];   /* fill patterns, 1 MiB (+ slack) each */
static char xv[8][8];   /* xattr values */
#define BIG (16u << 20)
#define SMALL ((1u << 20) + 16384)

/* The 16 MiB write buffer of workload d, made only where it is used. */
static char *big_buf(int fillc)
{
	static char *big;

	if (!big && !(big = malloc(BIG)))
		die("out of memory");
	memset(big, fillc, BIG);
	return big;
}

struct workload {
	const char *name;
	int ntx;            /* transactions per round, before scaling */
	int procs;          /* concurrent processes */
	int fstx_only;      /* methods: raw, fstx, fstx-crash only */
	uint64_t payload;   /* bytes per transaction */
};

static const struct workload wls[] = {
	{ "a", 100, 1, 0, 4 * (4096 + 8) },
	{ "b", 30, 1, 0, 1 << 20 },
	{ "c", 10, 1, 0, 100 * 512 },
	{ "d", 3, 1, 0, 64u << 20 },
	{ "e1", 100, 1, 0, 4096 + 8 },
	{ "e8", 100, 8, 0, 4096 + 8 },
	{ "f", 2, 1, 1, 10000 * 512 },
	{ "g", 100, 1, 0, 4096 + 8 + 256 },
	{ "n", 50, 1, 0, 4096 + 8 + 256 },
	{ "h", 10, 1, 0, 20 * 4096 },
};
#define NWL (sizeof(wls) / sizeof(wls[0]))

/* The setup transaction of workload w (worker p of procs). */
static void setup_txn(const struct workload *w, int p, int ntx, struct txn *t)
{
	char name[64];

	switch (w->name[0]) {
	case 'a':
		for (int i = 0; i < 4; i++) {
			snprintf(name, sizeof(name), "f%d", i);
			add(t, PUTNEW, name, NULL, bufs[7], 4096, 1, xv[7]);
		}
		break;
	case 'b':
		add(t, PUTNEW, "obj", NULL, bufs[7], 1 << 20, 1, NULL);
		for (int i = 0; i < ntx; i++) {
			snprintf(name, sizeof(name), "prev.%d", i);
			add(t, PUTNEW, name, NULL, bufs[7], 1024, 1, NULL);
		}
		break;
	case 'd':
		add(t, PUTNEW, "big", NULL, big_buf('Z'), BIG, 4, NULL);
		break;
	case 'e':
		snprintf(name, sizeof(name), "p%d", p);
		add(t, PUTNEW, name, NULL, bufs[7], 4096, 1, xv[7]);
		break;
	case 'g':
	case 'n':
		add(t, MKDIR, "objs", NULL, NULL, 0, 0, NULL);
		add(t, PUTNEW, "index", NULL, bufs[7], 256, 1, NULL);
		break;
	case 'h':
		add(t, MKDIR, "pkg", NULL, NULL, 0, 0, NULL);
		for (int k = 0; k < 20; k++) {
			snprintf(name, sizeof(name), "pkg/f%d", k);
			add(t, PUTNEW, name, NULL, bufs[7] + k, 4096, 1, NULL);
		}
		break;
	default:
		break;
	}
}

/* Transaction i of workload w (worker p). */
static void work_txn(const struct workload *w, int p, int i, struct txn *t)
{
	const char *b = bufs[i % 7];
	char name[64], dir[32];
	int nfiles;

	switch (w->name[0]) {
	case 'a':
		for (int k = 0; k < 4; k++) {
			snprintf(name, sizeof(name), "f%d", k);
			add(t, PUT, name, NULL, b, 4096, 1, xv[i % 7]);
		}
		break;
	case 'b':
		add(t, PUTNEW, "obj.new", NULL, b, 1 << 20, 1, NULL);
		add(t, RENAME, "obj.new", "obj", NULL, 0, 0, NULL);
		snprintf(name, sizeof(name), "prev.%d", i);
		add(t, DEL, name, NULL, NULL, 0, 0, NULL);
		break;
	case 'c':
	case 'f':
		nfiles = w->name[0] == 'c' ? 100 : 10000;
		snprintf(dir, sizeof(dir), "d%d", i);
		add(t, MKDIR, dir, NULL, NULL, 0, 0, NULL);
		for (int k = 0; k < nfiles; k++) {
			snprintf(name, sizeof(name), "%s/f%d", dir, k);
			add(t, PUTNEW, name, NULL, b + k, 512, 1, NULL);
		}
		break;
	case 'd':
		add(t, PUT, "big", NULL, big_buf('A' + i % 7), BIG, 4, NULL);
		break;
	case 'e':
		snprintf(name, sizeof(name), "p%d", p);
		add(t, PUT, name, NULL, b, 4096, 1, xv[i % 7]);
		break;
	case 'g':
	case 'n':
		snprintf(name, sizeof(name), "objs/o%d", i);
		add(t, PUTNEW, name, NULL, b, 4096, 1, xv[i % 7]);
		add(t, PUT, "index", NULL, b + 1, 256, 1, NULL);
		break;
	case 'h': /* a package manager's switch: the new tree in, the old out */
		add(t, MKDIR, "pkg.new", NULL, NULL, 0, 0, NULL);
		for (int k = 0; k < 20; k++) {
			snprintf(name, sizeof(name), "pkg.new/f%d", k);
			add(t, PUTNEW, name, NULL, b + k, 4096, 1, NULL);
		}
		add(t, RENAME, "pkg", "pkg.old", NULL, 0, 0, NULL);
		add(t, RENAME, "pkg.new", "pkg", NULL, 0, 0, NULL);
		for (int k = 0; k < 20; k++) {
			snprintf(name, sizeof(name), "pkg.old/f%d", k);
			add(t, DEL, name, NULL, NULL, 0, 0, NULL);
		}
		add(t, RMDIR, "pkg.old", NULL, NULL, 0, 0, NULL);
		break;
	}
}

/* ---- methods ---------------------------------------------------------------- */

enum method { RAW, RAWSYNC, RENAMEP, SQLWAL, SQLDEL, FSTX, FSTXCRASH, FSTXWAL,
	      FSTXWALCRASH, FSTXLAZY, NMETHOD };
static const char *const mnames[] = {
	"raw", "raw-fsync", "rename", "sqlite-wal", "sqlite-del", "fstx", "fstx-crash",
	"fstx-wal", "fstx-wal-crash", "fstx-lazy",
};

static int is_fstx(enum method m)
{
	return m == FSTX || m == FSTXCRASH || m == FSTXWAL || m == FSTXWALCRASH ||
	       m == FSTXLAZY;
}

struct ctx {
	enum method m;
	int dfd;             /* the run directory */
	sqlite3 *db;
	sqlite3_stmt *put, *del, *ren;
	fstx_domain *dom;
};

static void must(int ok, const char *what, const char *path)
{
	if (!ok)
		die("%s %s: %s", what, path, strerror(errno));
}

static void write_all(int fd, const struct op *o, const char *path)
{
	for (int k = 0; k < o->nwrites; k++)
		must(pwrite(fd, o->buf, o->len, (off_t)o->len * k) == (ssize_t)o->len,
		     "pwrite", path);
}

/* raw, raw-fsync and the rename pattern. */
static void run_files(struct ctx *c, const struct txn *t)
{
	char dirty[64][64];
	int ndirty = 0, fd;

	for (size_t i = 0; i < t->n; i++) {
		const struct op *o = &t->ops[i];
		char tmp[80], dn[64], *s;

		switch (o->k) {
		case PUT:
		case PUTNEW:
			if (c->m == RENAMEP) {
				snprintf(tmp, sizeof(tmp), "%s.tmp", o->path);
				fd = openat(c->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			} else {
				fd = openat(c->dfd, o->path, O_WRONLY |
					    (o->k == PUTNEW ? O_CREAT | O_EXCL : 0), 0644);
			}
			must(fd >= 0, "open", o->path);
			write_all(fd, o, o->path);
			if (o->xattr)
				must(fsetxattr(fd, "user.v", o->xattr, 8, 0) == 0,
				     "fsetxattr", o->path);
			if (c->m != RAW)
				must(fsync(fd) == 0, "fsync", o->path);
			close(fd);
			if (c->m == RENAMEP)
				must(renameat(c->dfd, tmp, c->dfd, o->path) == 0,
				     "rename", o->path);
			break;
		case RENAME:
			must(renameat(c->dfd, o->path, c->dfd, o->path2) == 0, "rename",
			     o->path);
			for (int k = 0; c->m == RENAMEP && k < ndirty; k++) {
				size_t l = strlen(o->path);

				/* a dirty directory moved: fsynced where it ends */
				if (!strncmp(dirty[k], o->path, l) &&
				    (!dirty[k][l] || dirty[k][l] == '/')) {
					snprintf(tmp, sizeof(tmp), "%s%s", o->path2, dirty[k] + l);
					memcpy(dirty[k], tmp, 63);
					dirty[k][63] = 0;
				}
			}
			break;
		case DEL:
			must(unlinkat(c->dfd, o->path, 0) == 0, "unlink", o->path);
			break;
		case MKDIR:
			must(mkdirat(c->dfd, o->path, 0755) == 0, "mkdir", o->path);
			break;
		case RMDIR:
			must(unlinkat(c->dfd, o->path, AT_REMOVEDIR) == 0, "rmdir", o->path);
			break;
		}
		if (c->m != RENAMEP)
			continue;
		/* every directory whose entries changed, and each new one's parent */
		snprintf(dn, sizeof(dn), "%s", o->path);
		s = strrchr(dn, '/');
		if (s)
			*s = 0;
		else
			snprintf(dn, sizeof(dn), ".");
		for (int pass = 0; pass < 2; pass++) {
			int seen = 0;

			for (int k = 0; k < ndirty; k++)
				seen |= !strcmp(dirty[k], dn);
			if (!seen && ndirty < 64)
				snprintf(dirty[ndirty++], 64, "%s", dn);
			if (o->k != MKDIR || pass)
				break;
			snprintf(dn, sizeof(dn), "%s", o->path);
		}
	}
	for (int k = 0; k < ndirty; k++) {
		fd = openat(c->dfd, dirty[k], O_RDONLY | O_DIRECTORY);
		if (fd < 0 && errno == ENOENT)
			continue; /* removed: its parent's fsync covers that */
		must(fd >= 0 && fsync(fd) == 0, "fsync dir", dirty[k]);
		close(fd);
	}
}

static void sql(sqlite3 *db, const char *s)
{
	char *err = NULL;

	if (sqlite3_exec(db, s, NULL, NULL, &err) != SQLITE_OK)
		die("sqlite: %s: %s", s, err ? err : "?");
}

static void step(sqlite3 *db, sqlite3_stmt *st)
{
	int r = sqlite3_step(st);

	if (r != SQLITE_DONE)
		die("sqlite step: %s", sqlite3_errmsg(db));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

static void sql_open(struct ctx *c, const char *dir)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/db.sqlite", dir);
	if (sqlite3_open(path, &c->db) != SQLITE_OK)
		die("sqlite open %s", path);
	sqlite3_busy_timeout(c->db, 60000);
	sql(c->db, c->m == SQLWAL ? "PRAGMA journal_mode=WAL" : "PRAGMA journal_mode=DELETE");
	sql(c->db, "PRAGMA synchronous=FULL");
	sql(c->db, "CREATE TABLE IF NOT EXISTS t(name TEXT PRIMARY KEY, data BLOB, x BLOB)");
	if (sqlite3_prepare_v2(c->db, "INSERT OR REPLACE INTO t VALUES(?,?,?)", -1,
			       &c->put, NULL) ||
	    sqlite3_prepare_v2(c->db, "DELETE FROM t WHERE name=?", -1, &c->del, NULL) ||
	    sqlite3_prepare_v2(c->db, "UPDATE t SET name=?2 WHERE name=?1", -1,
			       &c->ren, NULL))
		die("sqlite prepare: %s", sqlite3_errmsg(c->db));
}

static void put_row(struct ctx *c, const char *name, const char *buf, size_t len,
		    const char *x)
{
	sqlite3_bind_text(c->put, 1, name, -1, SQLITE_TRANSIENT);
	if (buf)
		sqlite3_bind_blob64(c->put, 2, buf, len, SQLITE_STATIC);
	if (x)
		sqlite3_bind_blob(c->put, 3, x, 8, SQLITE_STATIC);
	step(c->db, c->put);
}

static void run_sqlite(struct ctx *c, const struct txn *t)
{
	sql(c->db, "BEGIN IMMEDIATE");
	for (size_t i = 0; i < t->n; i++) {
		const struct op *o = &t->ops[i];
		char name[80];

		switch (o->k) {
		case PUT:
		case PUTNEW:
			for (int k = 0; k < o->nwrites; k++) {
				snprintf(name, sizeof(name), o->nwrites > 1 ? "%s.%d" : "%s",
					 o->path, k);
				put_row(c, name, o->buf, o->len, o->xattr);
			}
			break;
		case RENAME:
			sqlite3_bind_text(c->del, 1, o->path2, -1, SQLITE_STATIC);
			step(c->db, c->del);
			sqlite3_bind_text(c->ren, 1, o->path, -1, SQLITE_STATIC);
			sqlite3_bind_text(c->ren, 2, o->path2, -1, SQLITE_STATIC);
			step(c->db, c->ren);
			break;
		case DEL:
		case RMDIR:
			sqlite3_bind_text(c->del, 1, o->path, -1, SQLITE_STATIC);
			step(c->db, c->del);
			break;
		case MKDIR:
			put_row(c, o->path, NULL, 0, NULL);
			break;
		}
	}
	sql(c->db, "COMMIT");
}

static void run_fstx(struct ctx *c, const struct txn *t)
{
	fstx_tx *tx;
	int r;

	if (fstx_tx_new(c->dom, &tx) < 0)
		die("fstx_tx_new");
	if (c->m == FSTXCRASH)
		fstx_tx_set_flags(tx, FSTX_UT_STRICT | FSTX_UT_NOSYNC);
	if (c->m == FSTXWAL)
		fstx_tx_set_flags(tx, FSTX_UT_STRICT | FSTX_UT_WAL);
	if (c->m == FSTXWALCRASH)
		fstx_tx_set_flags(tx, FSTX_UT_STRICT | FSTX_UT_WAL | FSTX_UT_NOSYNC);
	if (c->m == FSTXLAZY)
		fstx_tx_set_flags(tx, FSTX_UT_STRICT | FSTX_UT_LAZY);
	for (size_t i = 0; i < t->n; i++) {
		const struct op *o = &t->ops[i];
		int fd;

		switch (o->k) {
		case PUT:
		case PUTNEW:
			fd = fstx_tx_open(tx, o->path, O_WRONLY |
					  (o->k == PUTNEW ? O_CREAT | O_EXCL : 0), 0644);
			for (int k = 0; k < o->nwrites; k++)
				fstx_tx_pwrite(tx, fd, o->buf, o->len, (off_t)o->len * k);
			fstx_tx_close(tx, fd);
			if (o->xattr)
				fstx_tx_setxattr(tx, o->path, "user.v", o->xattr, 8, 0);
			break;
		case RENAME:
			fstx_tx_rename(tx, o->path, o->path2, 0);
			break;
		case DEL:
			fstx_tx_unlink(tx, o->path);
			break;
		case MKDIR:
			fstx_tx_mkdir(tx, o->path, 0755);
			break;
		case RMDIR:
			fstx_tx_rmdir(tx, o->path);
			break;
		}
	}
	r = fstx_tx_commit(tx);
	if (r < 0)
		die("fstx commit: op %ld: %s", fstx_tx_failed_op(tx), strerror(-r));
	fstx_tx_free(tx);
}

static void run_txn(struct ctx *c, const struct txn *t)
{
	if (c->m == SQLWAL || c->m == SQLDEL)
		run_sqlite(c, t);
	else if (is_fstx(c->m))
		run_fstx(c, t);
	else
		run_files(c, t);
}

static void ctx_open(struct ctx *c, enum method m, const char *dir)
{
	memset(c, 0, sizeof(*c));
	c->m = m;
	c->dfd = open(dir, O_RDONLY | O_DIRECTORY);
	must(c->dfd >= 0, "open", dir);
	if (m == SQLWAL || m == SQLDEL)
		sql_open(c, dir);
	if (is_fstx(m) && fstx_domain_open(dir, &c->dom) < 0)
		die("fstx_domain_open %s", dir);
}

static void ctx_close(struct ctx *c)
{
	if (c->db) {
		sqlite3_finalize(c->put);
		sqlite3_finalize(c->del);
		sqlite3_finalize(c->ren);
		sqlite3_close(c->db);
	}
	if (c->dom)
		fstx_domain_close(c->dom);
	close(c->dfd);
}

/* ---- one measured run -------------------------------------------------------- */

#define MAXLAT 4096
struct shared {            /* MAP_SHARED between a run's processes */
	struct counts c[8];
	int nlat[8];
	double lat[8][MAXLAT / 8];
};

struct result {
	int n;
	double wall;
	struct counts c;
	long long sectors;
	long long cpu_ticks; /* busy clock ticks, all CPUs; -1: unknown */
	long long dev_ms;    /* ms the device had I/O in flight; -1: unknown */
	long rss_kib;
	double lat[MAXLAT];
};

static void worker(const struct workload *w, enum method m, const char *dir,
		   int p, int ntx, int gate, struct shared *sh)
{
	struct ctx c;
	char g;

	ctx_open(&c, m, dir);
	if (gate >= 0 && read(gate, &g, 1) < 0)
		die("gate");
	cnt = (struct counts){ 0 };
	for (int i = 0; i < ntx && i < MAXLAT / 8; i++) {
		struct txn t = { 0 };
		double t0;

		work_txn(w, p, i, &t);
		t0 = now();
		run_txn(&c, &t);
		sh->lat[p][i] = now() - t0;
		sh->nlat[p] = i + 1;
		free(t.ops);
	}
	/* lazy: the last flush is part of the work (and of its barriers) */
	if (m == FSTXLAZY && fstx_sync(c.dom) < 0)
		die("fstx_sync");
	/* durable fstx: so is the checkpoint that makes the log's changes
	 * durable in place and empties it (wal.c W6), amortised over the
	 * run's transactions in the counts and tx_per_s, not in the median */
	if ((m == FSTX || m == FSTXWAL || m == FSTXLAZY) && fstx_recover(c.dom) < 0)
		die("fstx_recover");
	sh->c[p] = cnt;
	ctx_close(&c);
}

/*
 * The neighbour of workload n: another writer of the same filesystem that
 * keeps about NB_BYTES dirty.  It rewrites its file in 1 MiB pwrites, sweep
 * after sweep, never syncing, so whatever a barrier cleans is dirty again
 * moments later.  At low priority, so that on a small machine it takes the
 * CPU the measured process leaves.  Ready once its first sweep is written.
 */
#define NB_BYTES (256u << 20)
#define NB_CHUNK (1u << 20)

static void neighbour_loop(const char *path, int ready)
{
	struct timespec pause = { 0, 20 * 1000 * 1000 };
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	must(fd >= 0, "open", path);
	for (long sweep = 0;; sweep++) {
		for (off_t off = 0; off < NB_BYTES; off += NB_CHUNK)
			must(pwrite(fd, bufs[sweep % 7], NB_CHUNK, off) == NB_CHUNK,
			     "pwrite", path);
		if (sweep == 0) {
			must(write(ready, "", 1) == 1, "write", "ready pipe");
			close(ready);
		}
		nanosleep(&pause, NULL);
	}
}

static pid_t neighbour_start(const char *path)
{
	int ready[2];
	pid_t pid;
	char g;

	must(pipe(ready) == 0, "pipe", "");
	pid = fork();
	must(pid >= 0, "fork", "neighbour");
	if (pid == 0) {
		close(ready[0]);
		/* never outlive the measurement, even when it dies */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(0);
		if (setpriority(PRIO_PROCESS, 0, 19) < 0)
			perror("fstxbench: neighbour setpriority");
		neighbour_loop(path, ready[1]);
	}
	close(ready[1]);
	if (read(ready[0], &g, 1) != 1)
		die("neighbour failed");
	close(ready[0]);
	return pid;
}

static void neighbour_stop(pid_t pid, const char *path)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* unlinked, its dirty pages are dropped, not written */
	must(unlink(path) == 0, "unlink", path);
}

/* In a child: set up, run, measure; the figures go to out. */
static void run_child(const struct workload *w, enum method m, const char *dir,
		      int ntx, struct result *out)
{
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct ctx c;
	int gate[2], dfd;
	long long s0, c0, c1, b0, b1;
	double t0;
	pid_t kids[8], nb = -1;
	struct rusage ru;
	char nbpath[PATH_MAX + 16];

	if (sh == MAP_FAILED)
		die("mmap");
	memset(sh, 0, sizeof(*sh));
	ctx_open(&c, m, dir);
	for (int p = 0; p < w->procs; p++) {
		struct txn t = { 0 };

		setup_txn(w, p, ntx, &t);
		if (t.n)
			run_txn(&c, &t);
		free(t.ops);
	}
	ctx_close(&c);
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	quiet_syncfs(dfd);
	/* beside the run directory, in DIR: not in the fstx domain */
	snprintf(nbpath, sizeof(nbpath), "%s.neighbour", dir);
	if (w->name[0] == 'n')
		nb = neighbour_start(nbpath);
	s0 = dev_sectors();
	if (w->procs == 1) {
		b0 = dev_busy_ms();
		c0 = cpu_busy();
		t0 = now();
		worker(w, m, dir, 0, ntx, -1, sh);
		out->wall = now() - t0;
	} else {
		must(pipe(gate) == 0, "pipe", "");
		for (int p = 0; p < w->procs; p++) {
			kids[p] = fork();
			if (kids[p] == 0) {
				close(gate[1]);
				worker(w, m, dir, p, ntx, gate[0], sh);
				_exit(0);
			}
		}
		close(gate[0]);
		usleep(100000); /* let every worker open its handle */
		b0 = dev_busy_ms();
		c0 = cpu_busy();
		t0 = now();
		close(gate[1]);  /* go */
		for (int p = 0; p < w->procs; p++) {
			int st;

			waitpid(kids[p], &st, 0);
			if (!WIFEXITED(st) || WEXITSTATUS(st))
				die("worker %d failed", p);
		}
		out->wall = now() - t0;
	}
	c1 = cpu_busy();
	b1 = dev_busy_ms();
	/* peak RSS of the workers (e8), before the neighbour is reaped */
	getrusage(RUSAGE_CHILDREN, &ru);
	if (nb > 0)
		neighbour_stop(nb, nbpath);
	out->cpu_ticks = c0 < 0 || c1 < 0 ? -1 : c1 - c0;
	out->dev_ms = b0 < 0 || b1 < 0 ? -1 : b1 - b0;
	quiet_syncfs(dfd);
	out->sectors = s0 < 0 ? -1 : dev_sectors() - s0;
	close(dfd);
	out->n = 0;
	out->c = (struct counts){ 0 };
	for (int p = 0; p < w->procs; p++) {
		for (int i = 0; i < sh->nlat[p]; i++)
			out->lat[out->n++] = sh->lat[p][i];
		out->c.fsync += sh->c[p].fsync;
		out->c.fdatasync += sh->c[p].fdatasync;
		out->c.syncfs += sh->c[p].syncfs;
	}
	out->rss_kib = ru.ru_maxrss;
	munmap(sh, sizeof(*sh));
}

/* Fork a child for one run; wait4() gives its peak RSS. */
static void run_one(const struct workload *w, enum method m, const char *base,
		    int round, int ntx, struct result *acc)
{
	struct result *res = mmap(NULL, sizeof(*res), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char dir[PATH_MAX];
	struct rusage ru;
	int st;
	pid_t p;

	if (res == MAP_FAILED)
		die("mmap");
	snprintf(dir, sizeof(dir), "%s/run-%s-%s-%d", base, w->name, mnames[m], round);
	rmtree(dir);
	must(mkdir(dir, 0755) == 0, "mkdir", dir);
	p = fork();
	if (p == 0) {
		run_child(w, m, dir, ntx, res);
		_exit(0);
	}
	if (wait4(p, &st, 0, &ru) != p || !WIFEXITED(st) || WEXITSTATUS(st))
		die("%s/%s round %d failed", w->name, mnames[m], round);
	for (int i = 0; i < res->n && acc->n < MAXLAT; i++)
		acc->lat[acc->n++] = res->lat[i];
	acc->wall += res->wall;
	acc->c.fsync += res->c.fsync;
	acc->c.fdatasync += res->c.fdatasync;
	acc->c.syncfs += res->c.syncfs;
	if (acc->sectors >= 0)
		acc->sectors = res->sectors < 0 ? -1 : acc->sectors + res->sectors;
	if (acc->cpu_ticks >= 0)
		acc->cpu_ticks = res->cpu_ticks < 0 ? -1 : acc->cpu_ticks + res->cpu_ticks;
	if (acc->dev_ms >= 0)
		acc->dev_ms = res->dev_ms < 0 ? -1 : acc->dev_ms + res->dev_ms;
	if (ru.ru_maxrss > acc->rss_kib)
		acc->rss_kib = ru.ru_maxrss;
	if (res->rss_kib > acc->rss_kib)
		acc->rss_kib = res->rss_kib;
	munmap(res, sizeof(*res));
	rmtree(dir);
}

static void report(const char *tag, const struct workload *w, enum method m,
		   struct result *r)
{
	double med, p99, n = r->n, tick = (double)sysconf(_SC_CLK_TCK);
	int i99;

	qsort(r->lat, (size_t)r->n, sizeof(double), cmpd);
	med = r->n % 2 ? r->lat[r->n / 2]
		       : (r->lat[r->n / 2 - 1] + r->lat[r->n / 2]) / 2;
	i99 = (int)(0.99 * (r->n - 1) + 0.5);
	p99 = r->lat[i99];
	printf("%s\t%s\t%s\t%d\t%.3f\t%.3f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\n",
	       tag, w->name, mnames[m], r->n, med * 1e3, p99 * 1e3, n / r->wall,
	       r->c.fsync / n, r->c.fdatasync / n, r->c.syncfs / n,
	       r->sectors < 0 ? -1.0 : r->sectors * 512.0 / (n * (double)w->payload),
	       r->rss_kib / 1024.0,
	       r->cpu_ticks < 0 || tick <= 0 ? -1.0 : r->cpu_ticks * 1e6 / tick / n,
	       r->dev_ms < 0 ? -1.0 : r->dev_ms * 1e3 / n);
	fflush(stdout);
}

static int listed(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; (p = strstr(p, name)); p += n)
		if ((p == list || p[-1] == ',') && (!p[n] || p[n] == ','))
			return 1;
	return 0;
}

static void usage(int st)
{
	fprintf(st ? stderr : stdout,
		"usage: fstxbench [-w a,b,c,d,e1,e8,f,g,h,n] [-m METHODS] [-r ROUNDS] "
		"[-s SCALE] [-t TAG] [-f USEC] DIR\n"
		"methods: raw,raw-fsync,rename,sqlite-wal,sqlite-del,fstx,fstx-crash,\n"
		"         fstx-wal,fstx-wal-crash,fstx-lazy\n"
		"SCALE multiplies the transactions per round (0.1 for a smoke run).\n"
		"-f: every fsync, fdatasync and syncfs also waits for a cache flush of\n"
		"    USEC on a modelled device (one flush at a time, requests merged).\n");
	exit(st);
}

int main(int argc, char **argv)
{
	const char *wlist = "a,b,c,d,e1,e8,f,g,h,n", *mlist = NULL, *tag = "-";
	double scale = 1;
	int rounds = 3, o;

	while ((o = getopt(argc, argv, "w:m:r:s:t:f:h")) != -1) {
		switch (o) {
		case 'w': wlist = optarg; break;
		case 'm': mlist = optarg; break;
		case 'r': rounds = atoi(optarg); break;
		case 's': scale = atof(optarg); break;
		case 't': tag = optarg; break;
		case 'f': flush_us = atol(optarg); flushdev_init(); break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	if (optind != argc - 1 || rounds < 1 || scale <= 0)
		usage(2);
	find_device(argv[optind]);
	for (int i = 0; i < 8; i++) {
		bufs[i] = malloc(SMALL);
		if (!bufs[i])
			die("out of memory");
		memset(bufs[i], 'A' + i, SMALL);
		memset(xv[i], '0' + i, 8);
	}
	for (size_t k = 0; k < NWL; k++) {
		const struct workload *w = &wls[k];
		int ntx = (int)(w->ntx * scale + 0.5);
		struct result *acc[NMETHOD] = { 0 };

		if (!listed(wlist, w->name))
			continue;
		if (ntx < 1)
			ntx = 1;
		if (ntx * w->procs * rounds > MAXLAT)
			ntx = MAXLAT / (w->procs * rounds);
		for (int m = 0; m < NMETHOD; m++) {
			if ((mlist && !listed(mlist, mnames[m])) ||
			    (w->fstx_only && m != RAW && !is_fstx((enum method)m)))
				continue;
			acc[m] = calloc(1, sizeof(struct result));
			if (!acc[m])
				die("out of memory");
		}
		for (int r = 0; r < rounds; r++)
			for (int m = 0; m < NMETHOD; m++)
				if (acc[m])
					run_one(w, (enum method)m, argv[optind], r, ntx, acc[m]);
		for (int m = 0; m < NMETHOD; m++)
			if (acc[m]) {
				report(tag, w, (enum method)m, acc[m]);
				free(acc[m]);
			}
	}
	return 0;
}
