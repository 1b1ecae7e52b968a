/* SPDX-License-Identifier: MIT */
/* internal.h - shared between libfstx's source files; not installed. */
#ifndef FSTX_INTERNAL_H
#define FSTX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "fstx.h"
#include "os.h"
#include "syncset.h"

#define FX_META ".fstx"
#define FX_NEW ".fstx/new"
#define FX_TRASH ".fstx/trash"

/* 1 if path p lies in area (FX_META, FX_NEW, FX_TRASH), at any depth. */
static inline int fx_under(const char *p, const char *area)
{
	size_t n = strlen(area);

	return !strncmp(p, area, n) && p[n] == '/';
}

/* openat2 resolution for canonical paths: no symlinks, no escape. */
#define FX_RESOLVE 0x0eULL /* BENEATH | NO_SYMLINKS | NO_MAGICLINKS */

#define FX_FDC 32 /* files a handle keeps open for the log (wal.c) */
#define FX_WALMAP 4096 /* bytes of .fstx/walsync mapped (wal_note.c fx_w_side_fd) */

struct fstx_domain {
	int root;     /* the domain directory */
	int meta;     /* DIR/.fstx */
	int lockfd;   /* DIR/.fstx/lock, flock()ed per transaction */
	int jfd;      /* DIR/.fstx/journal */
	int latched;  /* -errno of a failed barrier; sticks until recovery */
	int nosync;   /* this transaction is crash-only: skip its barriers */
	long failed_op; /* last transaction: index of the op that failed, or -1 */
	uint64_t txid;
	long lock_wait;   /* fx_domain_set_wait(): ms, -1 forever */
	void (*lock_notice)(void *arg);
	void *lock_arg;
	uint64_t jend;  /* journal: end of the planned segment */
	uint32_t jseq;  /* journal: sequence number after END */
	long mark;      /* progress mark step number, -1: none */
	int wal;        /* DIR/.fstx/wal (wal.c) */
	int walsync;    /* DIR/.fstx/walsync: group commit (wal.c W3); -1 until used */
	const unsigned char *walmap; /* its first page, mapped; NULL: pread it */
	uint64_t wal_end;  /* wal: append point, read under the lock; 0: no log */
	uint64_t wal_applied; /* wal: records below are applied in place */
	uint64_t wal_salt; /* wal: salt of the current header */
	uint64_t wal_size; /* wal: the file was this long at least (a hint: a
			    * checkpoint may cut it, W2; records then extend it) */
	int wal_clean;     /* wal: the hint's clean word (W8) */
	int wal_busy;      /* wal: the hint's busy word (W4) */
	uint64_t wal_lazy; /* wal: end of the last lazy record (W10) */
	int wal_kept;      /* wal: the hint's kept word (W11) */
	int wal_loose;     /* wal: the hint's loose word (W11) */
	int wal_owed;      /* wal: fx_wal_owed() */
	uint64_t mnt_id;   /* wal: the root's mount id (W5), once known */
	int mnt_known;     /* 1 known, -1 not to be had (boot id alone) */
	/* wal W12: the hint this handle last wrote (salt, applied, end), and
	 * whether it then applied that record without saying so */
	uint64_t wal_said[3];
	int wal_unsaid;
	int wal_mine;      /* the hint at this lock was the one this handle wrote */
	int lazy;          /* this transaction is lazy (FSTX_UT_LAZY) */
	int lazy_wrote;    /* this handle appended lazy records (flushed at close) */
	int nosync_wrote;  /* this handle committed crash-only transactions */
	int nosync_undo;   /* ... of the undo way: the next durable commit
			    * fsyncs their objects (trans.c fx_crash_only_pay()) */
	struct fx_syncset debt; /* trans.c: those objects, held open */
	int marks_clean;   /* no progress mark was there beside an empty journal */
	uint32_t space_tx; /* preflight: transactions since the last statvfs */
	uint64_t space_free; /* preflight: free bytes then, less what they used */
	/* wal.c: files of recent log transactions, kept open (see fdc_get) */
	struct fx_fdc { uint64_t ino; int fd, flags; } fdc[FX_FDC];
	unsigned fdc_next;
	unsigned char *wbuf; /* wal_rec.c: the record buffer, kept between commits */
	unsigned char *win;  /* wal.c: the open records and their state words */
	/* wal_rec.c: new files a replay made again under another inode
	 * number (W5): record inode -> the one now at its names */
	struct fx_remap { uint64_t from, to; } *wal_remap;
	size_t wal_nremap;
	/* wal_rec.c: inodes the records of a replay remove, and where (W5) */
	struct fx_remap *wal_gone;
	size_t wal_ngone;
	size_t win_cap;
	struct fx_fsfacts {  /* fsfacts.c: detected once per handle */
		long magic;          /* statfs f_type */
		uint32_t block_size; /* a power of two >= 512 */
		int enotempty;       /* rename over a non-empty dir: xfs EEXIST */
		int probed;          /* the three below are known */
		int reflink, xattr_user, dir_fsync;
		uint64_t dev;        /* st_dev of the domain directory */
		int ino_unique;      /* live inodes have distinct numbers (wal.c fd cache) */
	} fs;
};

/* ---- fsfacts.c ---- */
void fx_fs_detect(struct fstx_domain *d);
int fx_fs_probe(struct fstx_domain *d); /* under the lock; once */
int fx_fs_probe_dir_fsync(struct fstx_domain *d);
const char *fx_fs_name(long magic);

/* ---- crc32c.c ---- */
uint32_t fx_crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t fx_crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* ---- domain.c ---- */
int fx_domain_init(struct fstx_domain *d, int dirfd);
void fx_domain_fini(struct fstx_domain *d);
int fx_lock(struct fstx_domain *d);
/*
 * How fx_lock() waits for the domain lock: ms -1 forever (the default),
 * 0 not at all (-EWOULDBLOCK), else up to ms milliseconds (-ETIMEDOUT).
 * notice(arg), if set, is called once after about a second of waiting.
 */
void fx_domain_set_wait(struct fstx_domain *d, long ms,
			void (*notice)(void *arg), void *arg);
void fx_unlock(struct fstx_domain *d);
int fx_is_wedged(struct fstx_domain *d);
/* api.c: the journal hot, the domain wedged, or the log's last commit of
 * this handle owed (wal.h fx_wal_owed()): 1, else 0 or -errno.  No lock,
 * no probe: the CLI's report of a failure. */
int fx_needs_recover(struct fstx_domain *d);
int fx_wedge(struct fstx_domain *d);
int fx_unwedge(struct fstx_domain *d);
int fx_clean_scratch(struct fstx_domain *d);
/* Empty .fstx/wnew/, the log's staging of new files (wal.c W6). */
int fx_clean_wnew(struct fstx_domain *d);
/* The end of a name in .fstx/wnew/ that fx_clean_wnew() removes alone,
 * not with what it holds: a directory the log removed (wal.c W2), which
 * another process may have written into meanwhile */
#define FX_WNEW_KEEP "-x"
/* Remove entry name of dfd, a directory with what it holds too. */
int fx_clean_tree(int dfd, const char *name);
/* Call cb for each entry of directory fd but . and ..; stops at non-0. */
int fx_dir_each(int fd, int (*cb)(int fd, const char *name, void *arg),
		void *arg);
int fx_mark_set(struct fstx_domain *d, long step);
int fx_mark_get(struct fstx_domain *d);
/* 1 if a progress mark of any transaction exists, 0 if none, -errno. */
int fx_mark_any(struct fstx_domain *d);
/* Open the parent directory of canonical path p (O_PATH); *name = last part. */
int fx_parent(struct fstx_domain *d, const char *p, const char **name);
int fx_lstat(struct fstx_domain *d, const char *p, struct stat *st);
/* The parent directory of canonical path p, into buf ("" the root). */
const char *fx_dirname(const char *p, char *buf); /* buf: PATH_MAX bytes */
int fx_open(struct fstx_domain *d, const char *p, int flags, mode_t mode);
/* fx_open() (openat2()) of a regular file or directory, also where its
 * mode refuses its owner that access (a new file made read-only, a
 * directory made 0311); -errno. */
int fx_open_owned(struct fstx_domain *d, const char *p, int flags);
int fx_openat_owned(int dfd, const char *name, int flags, int resolve);
/* May the caller give the owner's bits need to object st by chmod (its
 * owner, and in its group where S_ISGID is set, so it stays)? */
int fx_owner_may_add(const struct stat *st, mode_t need);
/* May the caller open directory dir to fsync it (fx_openat_owned()), and a
 * directory of mode it makes in parent?  0 or -EACCES (root: 0). */
int fx_dir_syncable(struct fstx_domain *d, const char *dir);
int fx_new_dir_syncable(struct fstx_domain *d, const char *parent, mode_t mode);
/*
 * New objects are made in staging (.fstx/new/, .fstx/wnew/), not in the
 * directory that shows them, so they do not take what mkdir(2), open(2)
 * and symlink(2) give an object made in a setgid directory: its group,
 * and to a directory S_ISGID too.  fx_setgid_group(): the group directory
 * dir passes on (-1 none); fx_take_group(): give it to the staged object
 * name in dfd (best effort: a caller outside that group may not).  And
 * the reverse: where the staging directory is setgid itself (in a setgid
 * domain), gid -1 gives the object the caller's group and no S_ISGID,
 * as a directory that is not setgid would have.
 */
long fx_setgid_group(struct fstx_domain *d, const char *dir);
/* The epoch (boot id and mount id) of d's filesystem, 36 chars + NUL. */
int fx_epoch_id(struct fstx_domain *d, char id[37]);
void fx_take_group(int dfd, const char *name, long gid, int isdir);

/* ---- journal.c ---- */
enum fx_step_kind {
	FX_ST_MKFILE = 1, /* create empty file dst (mode)           */
	FX_ST_MKDIR = 2,  /* create directory dst (mode)            */
	FX_ST_SYMLINK = 3,/* create symlink dst -> aux              */
	FX_ST_LINK = 4,   /* hard link src at dst                   */
	FX_ST_MOVE = 5,   /* rename src to dst; dst absent before   */
};

struct fx_step {
	uint32_t kind;
	uint32_t mode;
	uint32_t op;      /* index of the op that needs it */
	char *src, *dst, *aux;
	/* MOVE: the inode it moves (journal.c rule 5a); 0 unknown.  newid:
	 * the planner's new object it moves or creates, resolved to ino once
	 * trans.c has made the new objects in staging (0: none) */
	uint64_t ino;
	int newid;
	/* MOVE: the directories it takes its object from (sdir) and puts it
	 * in (ddir) as they are when it runs (journal.c rule 5a); 0 the
	 * root, a staging area or unknown.  *_new: the planner's new
	 * directory, resolved as newid is */
	uint64_t sdir, ddir;
	int sdir_new, ddir_new;
};

/* Before-image of one object of the initial tree. */
struct fx_range { uint64_t off, len; };
struct fx_capture {
	char *ipath;       /* path in the initial tree */
	uint64_t dev, ino;
	int is_file;
	uint64_t size;     /* initial size (files) */
	uint64_t min_size; /* planner: lowest size the tx may cut it to */
	struct fx_range *ranges;
	size_t nranges, cranges;
	char **xnames;
	size_t nxnames, cxnames;
	int want_size;     /* data may change: record and restore size */
	int links_ok;      /* planner: every name of the inode is inside */
	int unsorted;      /* planner: ranges still need sorting and merging */
};

struct fx_plan;

/* Write the journal for the planned transaction and make it durable. */
int fx_journal_write(struct fstx_domain *d, const struct fx_step *steps,
		     size_t nsteps, const struct fx_capture *caps, size_t ncaps,
		     uint64_t nops);
/* Bytes the journal will take (for the space preflight). */
uint64_t fx_journal_size(struct fstx_domain *d, const struct fx_step *steps,
			 size_t nsteps, const struct fx_capture *caps, size_t ncaps);
/* Commit point: append COMMIT and make it durable (rule 6). */
int fx_journal_commit(struct fstx_domain *d);
/* Truncate the journal to 0; durable: and fdatasync it. */
int fx_journal_clear(struct fstx_domain *d, int durable);
/* Rule 1: the marks' removal durable (fsync .fstx/; none when crash-only). */
int fx_marks_gone(struct fstx_domain *d);
/* 1 if the journal holds a transaction, 0 if clean, -errno. */
int fx_journal_hot(struct fstx_domain *d);
/* Undo whatever the journal describes; 1 done, 0 nothing, <0 error. */
int fx_recover_locked(struct fstx_domain *d);
/* trans.c: fsync the objects of this handle's crash-only transactions of
 * the undo way (d->debt); 0 or -errno */
int fx_crash_only_pay(struct fstx_domain *d);

/* ---- recover.c: the one recovery entry point (rules R1-R4) ---- */
enum fx_recover_mode {
	FX_REC_TX,     /* a transaction's start: hint trusted, lazy queued */
	FX_REC_READER, /* fstx_read_begin(): everything; -EROFS if wedged */
	FX_REC_FLUSH,  /* fstx_sync(), close: everything, lazy too */
	FX_REC_FULL,   /* fstx_recover(): and checkpoint, scratch, unwedge */
};
/* Under the exclusive lock: 1 recovered, 0 nothing to do, -errno. */
int fx_recover(struct fstx_domain *d, enum fx_recover_mode mode);
/* ignore_commit: undo even a committed journal (its barrier failed). */
int fx_recover_mode(struct fstx_domain *d, int ignore_commit);

/* Rename src to dst (RENAME_NOREPLACE); both parents into ss (may be
 * NULL) when it happened. */
struct fx_syncset;
int fx_move(struct fstx_domain *d, const char *src, const char *dst,
	    struct fx_syncset *ss);
/* Unlink p (rmdir when dir); its parent into ss when it happened; 0 when
 * p or its parent is absent. */
int fx_remove(struct fstx_domain *d, const char *p, int dir, struct fx_syncset *ss);
/* FICLONERANGE of len bytes (0: to src's end), else a copy: 0 or -errno. */
int64_t fx_clone_copy(int dst, int src, uint64_t soff, uint64_t len,
		      uint64_t doff);
/* Before-image ranges this long are cloned where reflink works. */
extern uint64_t fx_clone_min;
extern int fx_wal_auto; /* trans.c: 1 every transaction tries the log first */

/* ---- api.c: the transaction handle (itx.c reads it too) ---- */
struct fstx_tx {
	fstx_domain *d;
	struct btrfs_ioctl_usertrans_op *ops;
	size_t nops, cops;
	char **strs; /* copies of paths and names, freed with the tx */
	size_t nstrs, cstrs;
	int nextfd, maxfd;
	uint8_t *live;   /* live[i]: slot i opened and not yet closed */
	int *freefds;    /* closed slots, reused by the next open (LIFO) */
	int nfree;
	uint64_t flags, data_bytes, metadata_ops;
	long failed;
	int committed;
	int interactive;     /* made by fstx_begin() (itx.c) */
	uint64_t deadline;   /* interactive: CLOCK_MONOTONIC ns of the lease's end */
	int poisoned;        /* -errno of the first failed builder call, or 0 */
	unsigned ntmp;       /* temporary names made by the task builders */
	char *errmsg;        /* fstx_tx_strerror(): why it failed, or NULL */
};

int64_t fx_tx_keep(fstx_tx *tx, const void *p, size_t n);
/*
 * A failed builder call poisons tx (the first error sticks, with what
 * call and args say about it); returns r.  fstx_tx_commit() then returns
 * that error and changes nothing.
 */
int fx_tx_poison(fstx_tx *tx, int r, const char *call, const char *a,
		 const char *b);
/*
 * Op i of ops[0..i] as a person wrote it, with every name it involves
 * (both paths of link and rename, the file behind an fd, the xattr name):
 * `unlink "a"`, `pwrite fd 0 ("obj/new")`.  The CLI says it the same way.
 */
void fx_describe_op(const struct btrfs_ioctl_usertrans_op *ops, size_t i,
		    char *buf, size_t n);
/* Why an op failed with e (-errno), in words; strerror where it says it well. */
const char *fx_op_reason(const struct btrfs_ioctl_usertrans_op *op, long e);
/* "ENOENT" for -ENOENT (or ENOENT); "E?" if unknown. */
const char *fx_errname(long e);
/* Make op strict: it fails the transaction on a negative result, a pwrite
 * also on a short write (the ergonomic API's and the text's default). */
void fx_op_strict(struct btrfs_ioctl_usertrans_op *op);

/* ---- trans.c ---- */
struct btrfs_ioctl_usertrans;
long fx_usertrans(struct fstx_domain *d, struct btrfs_ioctl_usertrans *ut);
int fx_validate(const struct btrfs_ioctl_usertrans *ut, uint64_t *bad);
int fx_validate_why(const struct btrfs_ioctl_usertrans *ut, uint64_t *bad,
		    const char **why);


/* Every transaction flag fstx knows. */
#define FSTX_UT_FLAGS \
	(FSTX_UT_STRICT | FSTX_UT_NOSYNC | FSTX_UT_WAL | FSTX_UT_LAZY | \
	 BTRFS_IOC_UT_FLAG_WEDGEONFAIL)

/* A compare op (FSTX_OP_ASSERT_*): evaluated before the plan, changes nothing. */
static inline int fx_op_is_assert(uint64_t op)
{
	return op >= FSTX_OP_ASSERT_ABSENT && op <= FSTX_OP_ASSERT_XATTR;
}

/* ---- txtext.c: the transaction text format (fstx-tx(5)) ---- */
struct fx_txt {
	struct btrfs_ioctl_usertrans_op *ops;
	size_t nops, cops;
	unsigned *lines;   /* source line of each op */
	uint64_t flags, data_bytes, metadata_ops, num_fds;
	void **bufs;       /* allocations the ops point into */
	size_t nbufs, cbufs;
	/* Set by the caller before parsing (parsing keeps it): the text
	 * itself came from standard input, so "@-" data is refused. */
	int stdin_taken;
	int stdin_used;    /* "@-" was read (once per text) */
	unsigned ntask;    /* task ops so far: numbers their temporary names */
	/* A parse error: where (1-based line and column, in characters) and
	 * "NAME:LINE:COL: error: MESSAGE", then the source line, a caret
	 * under the column and maybe a "hint:" line.  The first line alone
	 * is a complete message. */
	unsigned errline, errcol;
	char err[2048];
};
/* fd read to its end into *out (freed with free(3)), *len bytes: 0 or -errno. */
int fx_txt_read(int fd, char **out, size_t *len);
/* Parse text; @FILE data and copy-in/import sources are read relative to
 * basedir; name names the text in messages (NULL: "<input>").  Keeps
 * t->stdin_taken, clears the rest.  0 or -errno (-EINVAL: see t->err). */
int fx_txt_parse_named(const char *text, size_t len, int basedir,
		       const char *name, struct fx_txt *t);
/* fx_txt_parse_named() with name NULL; t->stdin_taken is cleared. */
int fx_txt_parse(const char *text, size_t len, int basedir, struct fx_txt *t);
/* Most bytes "@-" or a @FILE that is a pipe may give (64 MiB; tests lower it). */
extern size_t fx_txt_stream_max;
/* The value of a hex digit, -1 for any other character. */
int fx_hexval(int c);
void fx_txt_free(struct fx_txt *t);
/* The parsed transaction as an RFC-ABI vector (ops_completed 0). */
void fx_txt_ut(const struct fx_txt *t, struct btrfs_ioctl_usertrans *ut);

#endif
