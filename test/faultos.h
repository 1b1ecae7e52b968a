/* SPDX-License-Identifier: MIT */
/* faultos.h - fault injection over the fx_os table (SQLite test6-style). */
#ifndef FSTX_FAULTOS_H
#define FSTX_FAULTOS_H

enum fo_mode {
	FO_COUNT,       /* only count calls */
	FO_FAIL,        /* call number `at` fails with -err (and every later
			   barrier, like a dead disk if sticky) */
	FO_KILL_BEFORE, /* _exit-like death right before call `at` */
	FO_KILL_AFTER,  /* ... right after call `at` returned */
	FO_HOOK,        /* call hook(hook_arg) once, right before call `at`
			   (another process's change, at a chosen point) */
};

struct fo_state {
	enum fo_mode mode;
	long at;        /* 1-based call number */
	int err;        /* errno for FO_FAIL */
	int sticky;     /* FO_FAIL: every call from `at` on fails */
	long calls;     /* calls seen */
	long barriers;  /* fsync + fdatasync + syncfs calls seen */
	long fsyncs, fdatasyncs, syncfses;
	long renames;   /* renameat2 calls seen */
	unsigned long long synced[64]; /* inodes of the first fsyncs */
	long nsynced;
	int trace;      /* FO_TRACE set: print every call */
	void (*hook)(void *arg);
	void *hook_arg;
	/* allocations, counted apart from the calls (whose numbers the
	 * tests rely on): allocation number alloc_at fails (NULL), and with
	 * alloc_sticky every later one too; 0 fails none */
	long allocs;
	long alloc_at;
	int alloc_sticky;
};

extern struct fo_state fo;
void fo_install(enum fo_mode mode, long at, int err);
void fo_remove(void);
/* 1 if an fsync since fo_install() was of inode ino (among the first 64). */
int fo_synced(unsigned long long ino);

#endif
