/* SPDX-License-Identifier: MIT */
/*
 * fstx.h - atomic multi-file transactions on ordinary Linux filesystems.
 *
 * A *domain* is a directory tree.  A *transaction* is a vector of ops
 * (open, close, pwrite, unlink, link, mkdir, rmdir, truncate, setxattr,
 * removexattr, clonerange, rename, symlink) applied to paths beneath the
 * domain, all or nothing: on success every change is durable; on failure,
 * kill -9 or power loss the tree is exactly as before (or, once commit has
 * returned 0, exactly as after).  fstx keeps its journal and lock in
 * DIR/.fstx/; ops may not name anything in it.
 *
 * Calling sequence (the ergonomic API):
 *
 *     fstx_domain *d;
 *     fstx_tx *tx;
 *     int r, fd;
 *
 *     r = fstx_domain_open("/srv/store", &d);        // creates DIR/.fstx/ once
 *     r = fstx_tx_new(d, &tx);                      // every op strict
 *     fd = fstx_tx_open(tx, "obj/new", O_WRONLY|O_CREAT|O_EXCL, 0644);
 *     fstx_tx_pwrite(tx, fd, buf, len, 0);          // buf must live until commit
 *     fstx_tx_setxattr(tx, "obj/new", "user.sum", sum, 8, 0);
 *     fstx_tx_rename(tx, "obj/new", "obj/current", 0);
 *     fstx_tx_unlink(tx, "obj/old");
 *     r = fstx_tx_commit(tx);                       // 0, or -errno: rolled back
 *     if (r < 0) fprintf(stderr, "%s\n", fstx_tx_strerror(tx));
 *     fstx_tx_free(tx);
 *     fstx_domain_close(d);
 *
 * The builder calls (fstx_tx_open, ...) only record ops; nothing touches
 * the tree before fstx_tx_commit().  They return the new op's fd index
 * (open) or 0, or -errno (-ENOMEM, -EINVAL for a bad argument).  A builder
 * call that fails *poisons* the transaction: the op it stood for is not
 * there, so fstx_tx_commit() returns that call's -errno and changes
 * nothing (later calls are still checked and recorded, but only the first
 * error is kept).  Checking each call's result is therefore optional; the
 * commit's is not.  fstx_tx_strerror() names the call that failed.
 *
 * Every op of the ergonomic API is strict: a negative result (or a pwrite
 * writing fewer bytes than asked) fails the whole transaction, which is
 * rolled back.  Only fstx_tx_expect() changes that, for the one op it
 * follows; no transaction flag turns strictness off.
 *
 * Task-level builders (fstx_tx_write, fstx_tx_replace,
 * fstx_tx_symlink_replace, fstx_tx_copy_in, fstx_tx_import) record the
 * primitive ops an everyday job stands for, inside the same transaction,
 * and copy their data, so every guarantee holds for them too.
 *
 * The RFC's ABI: fstx_usertrans(dirfd, &ut) runs a struct btrfs_ioctl_usertrans
 * (see <fstx/btrfs_usertrans.h>) with the RFC's semantics plus rollback.
 *
 * All functions return 0 or a positive value on success and -errno on failure.
 *
 * A hot journal left by a crash is rolled back, under the lock, before the
 * next transaction runs (or by fstx_recover()).
 *
 * Caveats (see fstx(7)):
 *  - Cooperating processes only: a process that changes the domain without
 *    fstx while a transaction runs can make fstx abort it (-ESTALE).
 *  - One filesystem per domain; no mount points beneath it; not NFS.
 *  - Power-loss atomicity assumes the filesystem and the disk honour
 *    fsync and fdatasync (what they sync is durable when they return);
 *    it does not assume that changes nobody synced persist in any order
 *    (recovery finds what persisted by inode number).
 *  - Paths are resolved by fstx itself, beneath the domain; symlinks
 *    inside the domain are followed as the kernel would, but a symlink or
 *    ".." that leaves the domain fails the op with -EXDEV, and so does a
 *    change to the data or xattrs of a file hard-linked from outside.
 *  - A handle keeps the files of its recent write-ahead transactions open
 *    (at most 32, on ext4, xfs, btrfs and tmpfs), so a file unlinked by
 *    another process may keep its space until the handle moves on or is
 *    closed, and a write it allowed when opened is not checked again.
 *  - The state of .fstx/ is trusted within one boot: a wedge mark or a
 *    journal put there by hand is seen after a reboot or by
 *    fstx_recover(), not necessarily by the next transaction.
 *  - A commit or checkpoint that fsyncs several files starts up to 7
 *    short-lived threads for them (not on btrfs), with every signal
 *    blocked, and joins them before it returns; do not cancel a thread
 *    (pthread_cancel) while it is in an fstx call.
 */
#ifndef FSTX_H
#define FSTX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FSTX_VERSION_MAJOR 0
#define FSTX_VERSION_MINOR 1
#define FSTX_VERSION_PATCH 0
#define FSTX_VERSION_STRING "0.1.0"

/* Ops beyond the RFC's 1..11 (same record layout). */
#define FSTX_OP_RENAME  12 /* oldpath, newpath, flags (0|RENAME_NOREPLACE|RENAME_EXCHANGE) */
#define FSTX_OP_SYMLINK 13 /* target, linkpath */
/*
 * Compare ops (optimistic concurrency).  All are evaluated under the
 * transaction's lock against the tree as it was before the transaction,
 * whatever their position, before anything changes; one that does not
 * hold fails the whole transaction with -ECANCELED (failed op: it).
 */
#define FSTX_OP_ASSERT_ABSENT 14 /* path: nothing by that name (lstat) */
#define FSTX_OP_ASSERT_EXISTS 15 /* path: something by that name (lstat) */
#define FSTX_OP_ASSERT_DATA   16 /* path, data, len: the whole content */
#define FSTX_OP_ASSERT_XATTR  17 /* path, name, value, len */
#define FSTX_OP_MAX     17

/*
 * Transaction flag (struct btrfs_ioctl_usertrans.flags), a bit the RFC's ABI
 * does not use: every op fails the transaction on a negative result or a
 * short write, as if FAIL_ON_LT 0 were set on each.  The ergonomic API
 * makes each op strict by itself (see fstx_tx_expect()), with or without
 * this flag: fstx_tx_set_flags() accepts it and it changes nothing there.
 */
#define FSTX_UT_STRICT (1ULL << 16)
/*
 * Crash-only durability (transaction flag): all or nothing across a crash
 * or kill -9 of the process, but no barrier is issued (0 fsyncs; the one
 * that leaves more than 64 objects of the undo way unsynced on its handle
 * fsyncs them), so power loss or a kernel crash may leave this transaction
 * torn.  Commit returns once the changes are in the page cache.  The next
 * durable commit of the same handle makes its earlier crash-only
 * transactions durable too (an fsync of each object those of the undo way
 * changed, which the handle holds open); a durable commit of another
 * handle or process makes durable only crash-only transactions that went
 * through the write-ahead log, whose barriers cover their records.  For
 * the rest, call fstx_sync() on the handle that committed them.  Recovery
 * keeps its barriers.  Nothing syncs the whole filesystem.
 */
#define FSTX_UT_NOSYNC (1ULL << 17)
/*
 * Write-ahead durability: the default; the flag is accepted and changes
 * nothing.  A transaction commits by one record in DIR/.fstx/wal and one
 * fdatasync of it (the commit point, however many files it creates), and
 * is then applied in place, when every op is predicted to succeed (or to
 * fail where its failure is allowed) and its changes are among:
 *  - new files (open O_CREAT of an absent name), new symlinks and new
 *    directories, perhaps renamed (also over an old file), new files
 *    perhaps hard-linked (also from a temporary name then unlinked);
 *  - renames of and hard links to files and symlinks of the tree (each
 *    once); renames of directories (no other op under their names but
 *    writes, truncates and xattr ops of their files); exchanges of two
 *    files or symlinks, or of two directories (alone), in one directory;
 *    unlinks of files and rmdir of empty directories;
 *  - pwrites into existing or new files (O_APPEND too), truncates (also
 *    by O_TRUNC), clone ranges from files it reads only, setxattr of
 *    user.* xattrs of at most 1 KiB and removexattr of user.* xattrs,
 *    each finding the xattr as it needs; compare ops;
 * with at most 1 GiB of data logged (large overwrites on reflink
 * filesystems staged instead, and new files of 512 KiB or more written
 * whole before the record past 1 MiB).  A new file or symlink is made in
 * DIR/.fstx/wnew/ before the record and renamed to its name after the
 * barrier; a later checkpoint (one fsync of each file the log names, of
 * each directory holding a new name and of each new directory, then a new
 * log header) makes the changes durable in place and empties the log
 * (fstx(7)).  Any other transaction (an exchange across directories, an
 * xattr op that would fail, more than 1 GiB of data to log besides large
 * new files) runs the undo way.  Same promises as a durable transaction,
 * with one difference: should an in-place change fail after
 * the commit point (EIO, ENOSPC), commit returns that -errno, the handle
 * latches it, and the transaction stays committed: the next transaction
 * of any process, or fstx_recover(), applies it again from the log.
 * With FSTX_UT_NOSYNC too: no barrier at all (crash-only).
 */
#define FSTX_UT_WAL (1ULL << 18)
/*
 * Lazy durability (transaction flag; implies FSTX_UT_WAL, not allowed with
 * FSTX_UT_NOSYNC): all or nothing across kill -9 and power loss, but not
 * yet durable on return.  A transaction the log can take that makes no
 * name is committed by appending its record, with no barrier, and is
 * applied in place later, by a flush: one fdatasync of the log, then every
 * queued record in log order (a change a later one overwrites whole is
 * skipped).  A flush runs when
 * the queued records pass 4 MiB, before a reader (fstx_read_begin(),
 * fstx_read()), before any other kind of transaction, in fstx_sync(), and
 * in fstx_domain_close().  Until then the files hold the old contents for
 * anyone reading them directly; power loss may lose queued transactions,
 * always whole and in commit order (a prefix of them survives).
 * One that creates files or directories commits as a durable write-ahead
 * transaction (names are never queued); transactions the log cannot take
 * run the durable undo way.
 */
#define FSTX_UT_LAZY (1ULL << 19)
/*
 * Copy-in mode (builder flag, for fstx_tx_new()'s transactions only: the
 * RFC's ABI refuses it): every builder call made while it is set copies
 * the buffers it is given (pwrite data, xattr values, assert data) at
 * once, so the caller may free or reuse them as soon as the call returns.
 * Set it with fstx_tx_set_flags() before the calls it should cover.
 * Without it, a transaction holds O(1) memory per byte of data (only
 * pointers); with it, the transaction holds a copy of all its data until
 * fstx_tx_free().
 */
#define FSTX_UT_COPY (1ULL << 20)

/* Documented limits; a vector beyond them is refused with -EINVAL. */
#define FSTX_MAX_OPS    (1u << 20) /* 1048576 ops per transaction */
#define FSTX_MAX_FDS    4096       /* slots in the private fd table */
#define FSTX_MAX_XATTR  65536      /* bytes of one xattr value */
/* Bytes one fstx_tx_copy_in() or fstx_tx_import() file may have (-EFBIG). */
#define FSTX_MAX_COPY   (1ULL << 30)

/* The library's version at run time ("0.1.0"); FSTX_VERSION_STRING is the
 * header's. */
const char *fstx_version(void);

struct btrfs_ioctl_usertrans;

/* Run an RFC-ABI transaction (the 2009 btrfs USERTRANS RFC) on the domain
 * whose directory is dirfd, with the RFC's semantics: no op is strict
 * unless its own FAIL_ON_* flags or FSTX_UT_STRICT say so. */
long fstx_usertrans(int dirfd, struct btrfs_ioctl_usertrans *ut);

/* ---- domains ---------------------------------------------------------- */

typedef struct fstx_domain fstx_domain;

int fstx_domain_open(const char *path, fstx_domain **out);
int fstx_domain_openfd(int dirfd, fstx_domain **out); /* dirfd is duplicated */
void fstx_domain_close(fstx_domain *d);

/*
 * Roll back a hot journal (left by a crash or a failed rollback) and clear
 * a wedge.  Returns 1 if something was recovered, 0 if the domain was
 * clean, -EUCLEAN if the journal is corrupt (nothing is applied), or the
 * -errno of the step that failed.
 */
int fstx_recover(fstx_domain *d);

/*
 * Make every transaction this handle committed durable: flush the lazy
 * ones (FSTX_UT_LAZY: one fdatasync of the log, then applied in place) and,
 * if it committed crash-only ones (FSTX_UT_NOSYNC), fsync their objects and
 * checkpoint the log (never syncfs).
 * 0, or the -errno of the step that failed (the handle latches a failed
 * barrier, as a commit does).  fstx_domain_close() flushes lazy ones too.
 */
int fstx_sync(fstx_domain *d);

struct fstx_status {
	int hot;               /* a journal awaits recovery */
	int wedged;            /* transactions fail with -EROFS until recovery */
	uint64_t journal_bytes;
	int reflink;           /* FICLONERANGE works here */
	int xattr_user;        /* user.* xattrs work here */
	uint32_t block_size;
	char fs_type[16];      /* "ext4", "xfs", "btrfs", "tmpfs", ... */
	int dir_fsync;         /* fsync() of a directory works here */
};
int fstx_status(fstx_domain *d, struct fstx_status *st);

/*
 * The same and more, in a struct that can grow: set size to
 * sizeof(struct fstx_status_ex) before the call; fstx fills min(size, its
 * own sizeof) bytes (size then says how many), so a program built against
 * an older header keeps working with a newer library and the other way
 * round.  -EINVAL if size is below the first version's (up to wal_bytes).
 */
struct fstx_status_ex {
	uint32_t size;         /* in: sizeof as the caller knows it; out: filled */
	int hot;               /* as in struct fstx_status */
	int wedged;
	int reflink;
	int xattr_user;
	int dir_fsync;
	uint32_t block_size;
	char fs_type[16];
	uint64_t journal_bytes;
	uint64_t wal_bytes;    /* bytes of records in DIR/.fstx/wal */
	int latched;           /* -errno of a failed barrier this handle holds
				* until fstx_recover(), or 0 */
	int unsynced;          /* this handle committed crash-only or lazy
				* transactions that fstx_sync() would make durable */
};
int fstx_status_ex(fstx_domain *d, struct fstx_status_ex *st);

/*
 * Consistent reads: between fstx_read_begin() and fstx_read_end() no
 * transaction of a cooperating writer is under way (the domain lock is
 * held shared; writers wait), so plain read(2)s see one committed state.
 * begin rolls back a hot journal first; -EROFS if the domain is wedged.
 * Do not commit on the same domain from inside (it would wait forever).
 */
int fstx_read_begin(fstx_domain *d);
void fstx_read_end(fstx_domain *d);

/* ---- transactions ----------------------------------------------------- */

typedef struct fstx_tx fstx_tx;

int fstx_tx_new(fstx_domain *d, fstx_tx **out);
void fstx_tx_free(fstx_tx *tx);

int fstx_tx_open(fstx_tx *tx, const char *path, int flags, mode_t mode);
int fstx_tx_close(fstx_tx *tx, int fd);
int fstx_tx_pwrite(fstx_tx *tx, int fd, const void *buf, size_t len, off_t off);
int fstx_tx_unlink(fstx_tx *tx, const char *path);
int fstx_tx_link(fstx_tx *tx, const char *oldpath, const char *newpath);
int fstx_tx_mkdir(fstx_tx *tx, const char *path, mode_t mode);
int fstx_tx_rmdir(fstx_tx *tx, const char *path);
int fstx_tx_truncate(fstx_tx *tx, const char *path, off_t size);
int fstx_tx_setxattr(fstx_tx *tx, const char *path, const char *name,
		     const void *value, size_t len, int flags);
int fstx_tx_removexattr(fstx_tx *tx, const char *path, const char *name);
int fstx_tx_clonerange(fstx_tx *tx, int dstfd, int srcfd, off_t srcoff,
		       off_t len, off_t dstoff);
int fstx_tx_rename(fstx_tx *tx, const char *oldpath, const char *newpath,
		   unsigned int flags);
int fstx_tx_symlink(fstx_tx *tx, const char *target, const char *linkpath);
int fstx_tx_assert_absent(fstx_tx *tx, const char *path);
int fstx_tx_assert_exists(fstx_tx *tx, const char *path);
/* data must live until commit, like pwrite buffers (or FSTX_UT_COPY) */
int fstx_tx_assert_data(fstx_tx *tx, const char *path, const void *data,
			size_t len);
int fstx_tx_assert_xattr(fstx_tx *tx, const char *path, const char *name,
			 const void *value, size_t len);

/*
 * Task-level builders: each records the primitive ops it stands for, in
 * this transaction, and copies its data (the caller may free it at once).
 * 0 or -errno (and the transaction is poisoned, see above).
 *
 * fstx_tx_write: create or truncate path, write data, close (open with
 *   O_WRONLY|O_CREAT|O_TRUNC: an existing file keeps its inode, mode and
 *   xattrs).
 * fstx_tx_replace: write data to a new file under a temporary name in
 *   path's directory and rename it over path: a new inode, without the old
 *   file's xattrs (set them in the same transaction).  mode is its mode, or
 *   with (mode_t)-1 the existing file's mode, read when the call is made
 *   (0644 if there is none); both are subject to the umask, as in open(2).
 * fstx_tx_symlink_replace: linkpath becomes a symlink to target, whatever
 *   it was (a symlink, a file, absent), atomically for every reader: a
 *   symlink under a temporary name, renamed over linkpath.
 * fstx_tx_copy_in: the regular file src, an ordinary path outside the
 *   domain (read when the call is made, following symlinks as open(2)
 *   does), written as dst like fstx_tx_write with src's mode.  At most
 *   FSTX_MAX_COPY bytes (-EFBIG); it is held in memory until commit.
 * fstx_tx_import: the tree srcdir (outside the domain) as the new
 *   directory dstdir: directories made with their modes, regular files
 *   written as by fstx_tx_copy_in, symlinks copied as symlinks (never
 *   followed); any other file (device, fifo, socket) is -EINVAL.
 *   dstdir must not exist.
 *
 * Temporary names are ".fstx-tmp-N" (N counts per transaction) beside the
 * target; one that exists already fails the transaction with -EEXIST.
 */
int fstx_tx_write(fstx_tx *tx, const char *path, const void *data, size_t len,
		  mode_t mode);
int fstx_tx_replace(fstx_tx *tx, const char *path, const void *data, size_t len,
		    mode_t mode);
int fstx_tx_symlink_replace(fstx_tx *tx, const char *target,
			    const char *linkpath);
int fstx_tx_copy_in(fstx_tx *tx, const char *src, const char *dst);
int fstx_tx_import(fstx_tx *tx, const char *srcdir, const char *dstdir);

/*
 * Replace the last op's strictness with the RFC's condition: fail the
 * transaction when that op's result compares to value as flags say
 * (BTRFS_IOC_UT_OP_FLAG_FAIL_ON_*); flags 0 ignores its result.  Every
 * other op stays strict.
 */
int fstx_tx_expect(fstx_tx *tx, uint64_t fail_flags, int64_t value);
/*
 * Transaction flags, replacing those set before: BTRFS_IOC_UT_FLAG_WEDGEONFAIL,
 * FSTX_UT_NOSYNC, FSTX_UT_WAL, FSTX_UT_LAZY, FSTX_UT_COPY (FSTX_UT_STRICT is
 * accepted and changes nothing: ops stay strict with or without it).
 */
int fstx_tx_set_flags(fstx_tx *tx, uint64_t flags);
int fstx_tx_reserve(fstx_tx *tx, uint64_t data_bytes, uint64_t metadata_ops);

/* Run it: 0 committed (durable), else -errno and the tree is as before. */
int fstx_tx_commit(fstx_tx *tx);

size_t fstx_tx_num_ops(const fstx_tx *tx);
int64_t fstx_tx_result(const fstx_tx *tx, size_t op); /* rval after commit */
long fstx_tx_failed_op(const fstx_tx *tx);           /* index, or -1 */
/*
 * Why the last commit failed, in words, as fstx(1) says it:
 * `op 3 (unlink "no-such-file"): No such file or directory (ENOENT)`; for
 * a poisoned transaction the builder call that failed; "" if nothing
 * failed.  Valid until the next call on tx.
 */
const char *fstx_tx_strerror(const fstx_tx *tx);

/*
 * Interactive transactions.  fstx_begin() makes a transaction whose ops are
 * added with the builders above, one call at a time, and read back at once
 * by the same transaction: fstx_read() and fstx_stat() answer with the tree
 * as the ops so far will leave it (read-your-writes).  fstx_commit() runs
 * them all or nothing, like fstx_tx_commit(); fstx_abort() drops them.  The
 * tree changes only at commit, so a process that dies first has changed
 * nothing.  Every read adds a compare op for what it read of the tree
 * before the transaction, so commit fails with -ECANCELED, changing
 * nothing, if another writer changed it (optimistic, serialisable; a later
 * read fails with -ECANCELED as soon as an earlier one no longer holds).
 * Nothing is locked between calls: an open transaction blocks nobody.  It
 * lives lease_ms milliseconds (0: 30000); after that every call but
 * fstx_tx_free() fails with -ETIMEDOUT.  fstx_read() copies len bytes at
 * off (returns how many; 0 past the end); fstx_stat() fills st_mode's type
 * and st_size only.  Free the handle with fstx_tx_free().
 */
int fstx_begin(fstx_domain *d, unsigned lease_ms, fstx_tx **out);
ssize_t fstx_read(fstx_tx *tx, const char *path, void *buf, size_t len,
		  off_t off);
struct stat;
int fstx_stat(fstx_tx *tx, const char *path, struct stat *st);
int fstx_commit(fstx_tx *tx);
int fstx_abort(fstx_tx *tx);

/* "open", "pwrite", ... for an op number; "?" if unknown. */
const char *fstx_op_name(uint64_t op);

#ifdef __cplusplus
}
#endif
#endif /* FSTX_H */
