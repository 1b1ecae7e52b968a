/* SPDX-License-Identifier: MIT */
/*
 * faultos.c - wraps every entry of fx_os: counts calls, fails call k with
 * an errno, or kills the process (SIGKILL, no cleanup) before or after it;
 * counts allocations apart and fails allocation k.
 */
#define _GNU_SOURCE
#include "faultos.h"
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <unistd.h>

struct fo_state fo;

static int gate_n(const char *name)
{
	fo.calls++;
	if (fo.trace)
		fprintf(stderr, "[%ld %s]\n", fo.calls, name);
	if (fo.mode == FO_KILL_BEFORE && fo.calls == fo.at)
		kill(getpid(), SIGKILL);
	if (fo.mode == FO_HOOK && fo.calls == fo.at && fo.hook)
		fo.hook(fo.hook_arg);
	if (fo.mode == FO_FAIL && (fo.calls == fo.at || (fo.sticky && fo.calls > fo.at)))
		return -fo.err;
	return 0;
}

static void after(void)
{
	if (fo.mode == FO_KILL_AFTER && fo.calls == fo.at)
		kill(getpid(), SIGKILL);
}

#define W(name, ret, params, args)                                          \
	static ret w_##name params                                          \
	{                                                                   \
		int g = gate_n(#name);                                      \
		ret r;                                                      \
		if (g)                                                      \
			return g;                                           \
		r = fx_os_libc.name args;                                 \
		after();                                                    \
		return r;                                                   \
	}

W(openat2, int, (int d, const char *p, int f, mode_t m, uint64_t rs), (d, p, f, m, rs))
W(read, ssize_t, (int fd, void *b, size_t n), (fd, b, n))
W(pread, ssize_t, (int fd, void *b, size_t n, off_t o), (fd, b, n, o))
W(pwrite, ssize_t, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o))
W(ftruncate, int, (int fd, off_t l), (fd, l))
W(fstat, int, (int fd, struct stat *s), (fd, s))
W(fstatat, int, (int d, const char *n, struct stat *s, int f), (d, n, s, f))
W(fstatvfs, int, (int fd, struct statvfs *s), (fd, s))
W(fstatfs, int, (int fd, struct statfs *s), (fd, s))
static int w_renameat2(int a, const char *b, int c, const char *d, unsigned f)
{
	int g, r;

	fo.renames++;
	if ((g = gate_n("renameat2")))
		return g;
	r = fx_os_libc.renameat2(a, b, c, d, f);
	after();
	return r;
}
W(unlinkat, int, (int d, const char *n, int f), (d, n, f))
W(mkdirat, int, (int d, const char *n, mode_t m), (d, n, m))
W(symlinkat, int, (const char *t, int d, const char *n), (t, d, n))
W(linkat, int, (int a, const char *b, int c, const char *d, int f), (a, b, c, d, f))
W(readlinkat, ssize_t, (int d, const char *n, char *b, size_t l), (d, n, b, l))
W(fgetxattr, ssize_t, (int fd, const char *n, void *v, size_t l), (fd, n, v, l))
W(fsetxattr, int, (int fd, const char *n, const void *v, size_t l, int f), (fd, n, v, l, f))
W(fremovexattr, int, (int fd, const char *n), (fd, n))
W(fchmodat, int, (int d, const char *n, mode_t m), (d, n, m))
W(faccessat, int, (int d, const char *p, int m), (d, p, m))
W(fchgrpat, int, (int d, const char *n, gid_t gid), (d, n, gid))
W(statx, int, (int d, const char *p, unsigned m, struct statx *x), (d, p, m, x))
W(flistxattr, ssize_t, (int fd, char *l, size_t n), (fd, l, n))
W(ficlonerange, int, (int a, int b, uint64_t c, uint64_t d, uint64_t e), (a, b, c, d, e))
W(copy_file_range, ssize_t, (int a, off_t *b, int c, off_t *d, size_t e), (a, b, c, d, e))
/* An unlock releases the lock even when it reports an error, as close(2)
 * releases the fd: a lock left behind by a test is not a state a process
 * can reach (its locks die with it). */
static int w_flock(int fd, int op)
{
	int g = gate_n("flock"), r;

	if (g && !(op & LOCK_UN))
		return g;
	r = fx_os_libc.flock(fd, op);
	after();
	return g ? g : r;
}

static int w_lock_range(int fd, int t, off_t s, off_t l, int w)
{
	int g = gate_n("lock_range"), r;

	if (g && t != F_UNLCK)
		return g;
	r = fx_os_libc.lock_range(fd, t, s, l, w);
	after();
	return g ? g : r;
}
W(getdents, ssize_t, (int fd, void *b, size_t l), (fd, b, l))
W(dup, int, (int fd), (fd))
W(map_ro, int, (int fd, size_t n, void **a), (fd, n, a))
/* munmap(2) releases the mapping (and the file it holds) even when it
 * reports an error. */
static int w_unmap(void *a, size_t n)
{
	int g = gate_n("unmap"), r = fx_os_libc.unmap(a, n);

	after();
	return g ? g : r;
}
W(boot_id, int, (char id[37]), (id))
W(mount_id, int, (int fd, uint64_t *id), (fd, id))

static void *w_realloc(void *p, size_t len)
{
	fo.allocs++;
	if (fo.trace)
		fprintf(stderr, "[alloc %ld: %zu]\n", fo.allocs, len);
	if (fo.alloc_at && (fo.allocs == fo.alloc_at ||
			    (fo.alloc_sticky && fo.allocs > fo.alloc_at)))
		return NULL;
	return fx_os_libc.realloc(p, len);
}

/* close(2) releases the fd even when it reports an error. */
static int w_close(int fd)
{
	int g = gate_n("close"), r = fx_os_libc.close(fd);

	after();
	return g ? g : r;
}

static int w_fsync(int fd)
{
	struct stat st;
	int g, r;

	fo.barriers++;
	fo.fsyncs++;
	if ((g = gate_n("fsync")))
		return g;
	if (fo.nsynced < 64 && fx_os_libc.fstat(fd, &st) == 0)
		fo.synced[fo.nsynced++] = st.st_ino;
	r = fx_os_libc.fsync(fd);
	after();
	return r;
}

int fo_synced(unsigned long long ino)
{
	for (long k = 0; k < fo.nsynced; k++)
		if (fo.synced[k] == ino)
			return 1;
	return 0;
}
static int w_fdatasync(int fd) { fo.barriers++; fo.fdatasyncs++; int g = gate_n("fdatasync"); if (g) return g; int r = fx_os_libc.fdatasync(fd); after(); return r; }
static int w_writeback(int fd) { int g = gate_n("writeback"); if (g) return g; int r = fx_os_libc.writeback(fd); after(); return r; }
static int w_syncfs(int fd) { fo.barriers++; fo.syncfses++; int g = gate_n("syncfs"); if (g) return g; int r = fx_os_libc.syncfs(fd); after(); return r; }

void fo_install(enum fo_mode mode, long at, int err)
{
	fo = (struct fo_state){ .mode = mode, .at = at, .err = err,
				.trace = getenv("FO_TRACE") != NULL };
#define S(n) fx_os.n = w_##n
	S(openat2); S(close); S(read); S(pread); S(pwrite); S(fsync);
	S(fdatasync); S(syncfs); S(writeback); S(ftruncate); S(fstat); S(fstatat); S(fstatvfs); S(fstatfs);
	S(renameat2); S(unlinkat); S(mkdirat); S(symlinkat); S(linkat);
	S(readlinkat); S(fgetxattr); S(fsetxattr); S(fremovexattr); S(fchmodat); S(faccessat); S(statx); S(fchgrpat);
	S(flistxattr); S(ficlonerange); S(copy_file_range); S(flock);
	S(lock_range);
	S(getdents); S(dup); S(boot_id); S(mount_id); S(map_ro); S(unmap); S(realloc);
#undef S
}

void fo_remove(void)
{
	fx_os = fx_os_libc;
	fo.mode = FO_COUNT;
}
