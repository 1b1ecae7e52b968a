/* SPDX-License-Identifier: MIT */
/*
 * os.c - the only source file of libfstx and of the fstx command that calls
 * libc for file and directory I/O, and for memory (the command prints with
 * stdio).  Each wrapper converts the -1/errno convention into -errno and
 * retries EINTR where the call is restartable.
 */
#define _GNU_SOURCE
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RET(expr)                                                           \
	do {                                                                \
		long r_;                                                    \
		do                                                          \
			r_ = (long)(expr);                                  \
		while (r_ < 0 && errno == EINTR);                           \
		return r_ < 0 ? -errno : r_;                                \
	} while (0)

static int os_openat2(int dirfd, const char *path, int flags, mode_t mode,
		      uint64_t resolve)
{
	struct open_how how = {
		.flags = (uint64_t)flags | O_CLOEXEC,
		.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
		.resolve = resolve,
	};
	RET(syscall(SYS_openat2, dirfd, path, &how, sizeof(how)));
}

static int os_close(int fd)
{
	/* close(2) must not be retried on EINTR (the fd is gone). */
	return close(fd) < 0 && errno != EINTR ? -errno : 0;
}

static ssize_t os_read(int fd, void *buf, size_t len)
{
	RET(read(fd, buf, len));
}

static ssize_t os_pread(int fd, void *buf, size_t len, off_t off)
{
	RET(pread(fd, buf, len, off));
}

static ssize_t os_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	RET(pwrite(fd, buf, len, off));
}

/* A failed barrier is reported once and never retried: no EINTR loop. */
static int os_fsync(int fd) { return fsync(fd) < 0 ? -errno : 0; }

/* fsync_each: the calling thread and up to FX_FSYNC_THREADS - 1 more
 * take the next descriptor until none is left. */
#define FX_FSYNC_THREADS 8
struct fsync_job {
	const int *fd;
	int *res;
	unsigned n, next;
};

static void *fsync_worker(void *arg)
{
	struct fsync_job *j = arg;
	unsigned k;

	while ((k = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->n)
		j->res[k] = os_fsync(j->fd[k]);
	return NULL;
}

static int on_btrfs(int fd)
{
	struct statfs sf;

	return fstatfs(fd, &sf) == 0 && sf.f_type == BTRFS_SUPER_MAGIC;
}

static void os_fsync_each(const int *fd, int *res, unsigned n)
{
	struct fsync_job j = { .fd = fd, .res = res, .n = n };
	pthread_t t[FX_FSYNC_THREADS - 1];
	sigset_t all, old;
	unsigned nt = 0;

	/* not on btrfs, whose fsyncs of one subvolume share its log tree
	 * and wait for each other: 100 new files there took 200-220 ms
	 * from 8 threads against 75-83 ms one after another (ext4 and xfs:
	 * 5-6 ms against 10-12) */
	if (fx_os.fsync != os_fsync || n < 2 || on_btrfs(fd[0])) {
		for (unsigned k = 0; k < n; k++)
			res[k] = fx_os.fsync(fd[k]);
		return;
	}
	/* the helpers take no signal: the caller's handlers run where the
	 * caller expects them; a helper that cannot start leaves its share
	 * to the others */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	while (nt < FX_FSYNC_THREADS - 1 && nt + 1 < n &&
	       pthread_create(&t[nt], NULL, fsync_worker, &j) == 0)
		nt++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	fsync_worker(&j);
	while (nt)
		pthread_join(t[--nt], NULL);
}
static int os_fdatasync(int fd) { return fdatasync(fd) < 0 ? -errno : 0; }
static int os_syncfs(int fd) { return syncfs(fd) < 0 ? -errno : 0; }

static int os_writeback(int fd)
{
	RET(sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE));
}

static int os_ftruncate(int fd, off_t len) { RET(ftruncate(fd, len)); }
static int os_fstat(int fd, struct stat *st) { RET(fstat(fd, st)); }

static int os_fstatat(int dirfd, const char *name, struct stat *st, int flags)
{
	RET(fstatat(dirfd, name, st, flags));
}

static int os_fstatvfs(int fd, struct statvfs *st) { RET(fstatvfs(fd, st)); }
static int os_fstatfs(int fd, struct statfs *st) { RET(fstatfs(fd, st)); }

static int os_renameat2(int od, const char *on, int nd, const char *nn,
			unsigned int flags)
{
	RET(renameat2(od, on, nd, nn, flags));
}

static int os_unlinkat(int dirfd, const char *name, int flags)
{
	RET(unlinkat(dirfd, name, flags));
}

static int os_mkdirat(int dirfd, const char *name, mode_t mode)
{
	RET(mkdirat(dirfd, name, mode));
}

static int os_symlinkat(const char *target, int dirfd, const char *name)
{
	RET(symlinkat(target, dirfd, name));
}

static int os_linkat(int od, const char *on, int nd, const char *nn, int flags)
{
	RET(linkat(od, on, nd, nn, flags));
}

static ssize_t os_readlinkat(int dirfd, const char *name, char *buf, size_t len)
{
	RET(readlinkat(dirfd, name, buf, len));
}

static ssize_t os_fgetxattr(int fd, const char *name, void *val, size_t len)
{
	RET(fgetxattr(fd, name, val, len));
}

static int os_fsetxattr(int fd, const char *name, const void *val, size_t len,
			int flags)
{
	RET(fsetxattr(fd, name, val, len, flags));
}

static int os_fremovexattr(int fd, const char *name)
{
	RET(fremovexattr(fd, name));
}

static int os_fchmodat(int dirfd, const char *name, mode_t mode)
{
	RET(fchmodat(dirfd, name, mode, 0));
}

static int os_fchgrpat(int dirfd, const char *name, gid_t gid)
{
	RET(fchownat(dirfd, name, (uid_t)-1, gid, AT_SYMLINK_NOFOLLOW));
}

static int os_faccessat(int dirfd, const char *path, int mode)
{
	RET(faccessat(dirfd, path, mode, AT_EACCESS));
}

static int os_statx(int dirfd, const char *path, unsigned mask, struct statx *stx)
{
	RET(statx(dirfd, path, AT_SYMLINK_NOFOLLOW, mask, stx));
}

static ssize_t os_flistxattr(int fd, char *list, size_t len)
{
	RET(flistxattr(fd, list, len));
}

static int os_ficlonerange(int dstfd, int srcfd, uint64_t srcoff, uint64_t len,
			   uint64_t dstoff)
{
	struct file_clone_range r = {
		.src_fd = srcfd,
		.src_offset = srcoff,
		.src_length = len,
		.dest_offset = dstoff,
	};
	RET(ioctl(dstfd, FICLONERANGE, &r));
}

static ssize_t os_copy_file_range(int srcfd, off_t *srcoff, int dstfd,
				  off_t *dstoff, size_t len)
{
	RET(copy_file_range(srcfd, srcoff, dstfd, dstoff, len, 0));
}

static int os_flock(int fd, int op) { RET(flock(fd, op)); }

static int os_nap(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000L };

	RET(nanosleep(&ts, NULL));
}

static int os_lock_range(int fd, int type, off_t start, off_t len, int wait)
{
	struct flock l = { .l_type = (short)type, .l_whence = SEEK_SET,
			   .l_start = start, .l_len = len };

	RET(fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &l));
}

static ssize_t os_getdents(int fd, void *buf, size_t len)
{
	RET(syscall(SYS_getdents64, fd, buf, len));
}

static int os_dup(int fd) { RET(fcntl(fd, F_DUPFD_CLOEXEC, 0)); }

static int os_map_ro(int fd, size_t len, void **addr)
{
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	*addr = p;
	return 0;
}

static int os_unmap(void *addr, size_t len)
{
	return munmap(addr, len) < 0 ? -errno : 0;
}

/* Read once per process: it cannot change while the process lives. */
static int os_boot_id(char id[37])
{
	static char cached[37];
	int fd, n;

	if (!cached[0]) {
		fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		n = (int)read(fd, cached, 36);
		close(fd);
		if (n != 36) {
			cached[0] = 0;
			return -EIO;
		}
		cached[36] = 0;
	}
	memcpy(id, cached, 37);
	return 0;
}

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif

static int os_mount_id(int fd, uint64_t *id)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID_UNIQUE, &sx) < 0)
		return -errno;
	if (!(sx.stx_mask & (STATX_MNT_ID_UNIQUE | STATX_MNT_ID)))
		return -EOPNOTSUPP;
	*id = sx.stx_mnt_id;
	return 0;
}

/* Never 0 bytes: libc may return NULL for them, which reads as failure. */
static void *os_realloc(void *p, size_t len)
{
	return realloc(p, len ? len : 1);
}

void *fx_malloc(size_t len)
{
	return fx_os.realloc(NULL, len);
}

void *fx_calloc(size_t n, size_t size)
{
	void *p;

	if (size && n > SIZE_MAX / size)
		return NULL;
	if ((p = fx_os.realloc(NULL, n * size)))
		memset(p, 0, n * size);
	return p;
}

void *fx_realloc(void *p, size_t len)
{
	return fx_os.realloc(p, len);
}

char *fx_strndup(const char *s, size_t len)
{
	char *p;

	len = strnlen(s, len);
	if ((p = fx_os.realloc(NULL, len + 1))) {
		memcpy(p, s, len);
		p[len] = 0;
	}
	return p;
}

int fx_grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 16;
	void *np;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	np = fx_realloc(*p, n * size);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = n;
	return 0;
}

char *fx_strdup(const char *s)
{
	return fx_strndup(s, SIZE_MAX);
}

int fx_asprintf(char **out, const char *fmt, ...)
{
	va_list ap;
	char *p;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !(p = fx_os.realloc(NULL, (size_t)n + 1)))
		return -1;
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	*out = p;
	return n;
}

/* The libc table; fx_os starts as a copy of it (a macro: C has no
 * constant struct copies in initializers). */
#define OS_LIBC { \
	.openat2 = os_openat2, \
	.close = os_close, \
	.read = os_read, \
	.pread = os_pread, \
	.pwrite = os_pwrite, \
	.fsync = os_fsync, \
	.fsync_each = os_fsync_each, \
	.fdatasync = os_fdatasync, \
	.syncfs = os_syncfs, \
	.writeback = os_writeback, \
	.ftruncate = os_ftruncate, \
	.fchmodat = os_fchmodat, \
	.fchgrpat = os_fchgrpat, \
	.faccessat = os_faccessat, \
	.statx = os_statx, \
	.fstat = os_fstat, \
	.fstatat = os_fstatat, \
	.fstatvfs = os_fstatvfs, \
	.fstatfs = os_fstatfs, \
	.renameat2 = os_renameat2, \
	.unlinkat = os_unlinkat, \
	.mkdirat = os_mkdirat, \
	.symlinkat = os_symlinkat, \
	.linkat = os_linkat, \
	.readlinkat = os_readlinkat, \
	.fgetxattr = os_fgetxattr, \
	.fsetxattr = os_fsetxattr, \
	.fremovexattr = os_fremovexattr, \
	.flistxattr = os_flistxattr, \
	.ficlonerange = os_ficlonerange, \
	.copy_file_range = os_copy_file_range, \
	.flock = os_flock, \
	.lock_range = os_lock_range, \
	.getdents = os_getdents, \
	.dup = os_dup, \
	.map_ro = os_map_ro, \
	.unmap = os_unmap, \
	.boot_id = os_boot_id, \
	.mount_id = os_mount_id, \
	.nap = os_nap, \
	.realloc = os_realloc, \
}

const struct fx_os fx_os_libc = OS_LIBC;

struct fx_os fx_os = OS_LIBC;
