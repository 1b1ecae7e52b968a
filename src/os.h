/* SPDX-License-Identifier: MIT */
/*
 * os.h - the one table of OS calls.
 *
 * Every call fstx makes to the kernel for files and directories goes through
 * fx_os (only os.c calls libc for them), so a test can wrap the table to
 * count calls, kill the process before call k, fail call k with EIO or
 * ENOSPC, or record writes for power-loss simulation.  Every entry returns
 * a non-negative value on success and -errno on failure (but realloc, which
 * returns NULL).
 */
#ifndef FSTX_OS_H
#define FSTX_OS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>

struct statx;

struct fx_os {
	/* resolve: RESOLVE_* bits for openat2(2) */
	int (*openat2)(int dirfd, const char *path, int flags, mode_t mode,
		       uint64_t resolve);
	int (*close)(int fd);
	/* read(2) at the file position: a stream (the CLI's stdin) has none
	 * to pread at. */
	ssize_t (*read)(int fd, void *buf, size_t len);
	ssize_t (*pread)(int fd, void *buf, size_t len, off_t off);
	ssize_t (*pwrite)(int fd, const void *buf, size_t len, off_t off);
	int (*fsync)(int fd);
	/* fsync each of fd[0..n), res[k] its result: all at once (up to
	 * FX_FSYNC_THREADS threads, so that their flushes are shared) while
	 * fsync is this table's own; else one by one, in order, through the
	 * table's fsync (a test that wraps it sees every call). */
	void (*fsync_each)(const int *fd, int *res, unsigned n);
	int (*fdatasync)(int fd);
	int (*syncfs)(int fd);
	/* Start writeback of fd's dirty pages, not waiting (a hint before
	 * fsync, syncset.c S2; -ESPIPE for a directory). */
	int (*writeback)(int fd);
	int (*ftruncate)(int fd, off_t len);
	/* chmod of name in dirfd (which may be O_PATH), not following a
	 * symlink's target's name: the caller has seen a regular file */
	int (*fchmodat)(int dirfd, const char *name, mode_t mode);
	/* lchown(2) of name in dirfd: the group only */
	int (*fchgrpat)(int dirfd, const char *name, gid_t gid);
	/* access(2) of path in dirfd with the effective ids (AT_EACCESS) */
	int (*faccessat)(int dirfd, const char *path, int mode);
	/* statx(2) of path in dirfd, not following a last symlink */
	int (*statx)(int dirfd, const char *path, unsigned mask, struct statx *stx);
	int (*fstat)(int fd, struct stat *st);
	int (*fstatat)(int dirfd, const char *name, struct stat *st, int flags);
	int (*fstatvfs)(int fd, struct statvfs *st);
	int (*fstatfs)(int fd, struct statfs *st);
	int (*renameat2)(int olddirfd, const char *oldname, int newdirfd,
			 const char *newname, unsigned int flags);
	int (*unlinkat)(int dirfd, const char *name, int flags);
	int (*mkdirat)(int dirfd, const char *name, mode_t mode);
	int (*symlinkat)(const char *target, int dirfd, const char *name);
	int (*linkat)(int olddirfd, const char *oldname, int newdirfd,
		      const char *newname, int flags);
	ssize_t (*readlinkat)(int dirfd, const char *name, char *buf, size_t len);
	ssize_t (*fgetxattr)(int fd, const char *name, void *val, size_t len);
	int (*fsetxattr)(int fd, const char *name, const void *val, size_t len,
			 int flags);
	int (*fremovexattr)(int fd, const char *name);
	ssize_t (*flistxattr)(int fd, char *list, size_t len);
	int (*ficlonerange)(int dstfd, int srcfd, uint64_t srcoff, uint64_t len,
			    uint64_t dstoff);
	ssize_t (*copy_file_range)(int srcfd, off_t *srcoff, int dstfd,
				   off_t *dstoff, size_t len);
	int (*flock)(int fd, int op);
	/* An open-file-description lock (F_OFD_SETLK, or F_OFD_SETLKW when
	 * wait) of type F_RDLCK, F_WRLCK or F_UNLCK on len bytes at start. */
	int (*lock_range)(int fd, int type, off_t start, off_t len, int wait);
	ssize_t (*getdents)(int fd, void *buf, size_t len);
	int (*dup)(int fd);
	/* A shared read-only mapping of the first len bytes of fd, which
	 * the caller keeps at least that long (wal_note.c: the hint's page). */
	int (*map_ro)(int fd, size_t len, void **addr);
	int (*unmap)(void *addr, size_t len);
	/* This boot's id (/proc/sys/kernel/random/boot_id, 36 chars + NUL):
	 * the page cache is the truth only within one boot (wal.c W5). */
	int (*boot_id)(char id[37]);
	/* The unique id of the mount fd is on (statx STATX_MNT_ID_UNIQUE;
	 * else the reusable STATX_MNT_ID): a remount gets another one, so
	 * the page cache is the truth only within one mount (wal.c W5). */
	int (*mount_id)(int fd, uint64_t *id);
	/* Sleep about ms milliseconds (a lock's bounded wait, domain.c). */
	int (*nap)(unsigned ms);
	/* Memory: realloc(3), through which every allocation of the library
	 * goes (fx_malloc() and its kin below), so that a test fails the k-th
	 * allocation as it fails the k-th call.  NULL on failure. */
	void *(*realloc)(void *p, size_t len);
};

/* The library's allocators: libc's contract, served by fx_os.realloc;
 * what they return is freed with free(3).  fx_asprintf() returns -1 on
 * failure and leaves *out unset. */
void *fx_malloc(size_t len);
void *fx_calloc(size_t n, size_t size);
void *fx_realloc(void *p, size_t len);
char *fx_strdup(const char *s);
char *fx_strndup(const char *s, size_t len);
/* Room for need elements of size bytes in the array *p of capacity *cap
 * (doubling from 16): 0, or -ENOMEM with *p as it was. */
int fx_grow(void **p, size_t *cap, size_t need, size_t size);
int fx_asprintf(char **out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The live table; tests may replace entries (see test/faultos.c). */
extern struct fx_os fx_os;
/* The libc-backed defaults, for wrappers to call through. */
extern const struct fx_os fx_os_libc;

#endif
