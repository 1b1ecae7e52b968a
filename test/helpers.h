/* SPDX-License-Identifier: MIT */
/* helpers.h - test support: scratch domains, whole-tree snapshots. */
#ifndef FSTX_TEST_HELPERS_H
#define FSTX_TEST_HELPERS_H

#include <stddef.h>
#include <stdint.h>
#include "fstx.h"
#include "fstx/btrfs_usertrans.h"

/* The positive number in environment variable name, else dflt. */
long t_env_long(const char *name, long dflt);
/* A fresh empty directory under $FSTX_TEST_DIR (default /tmp); malloc'd. */
char *t_mkdomain(void);
void t_rmtree(const char *path);
/* Write a file (mode 0644) relative to dir, creating parents. */
void t_write(const char *dir, const char *rel, const char *data, size_t len);
char *t_read(const char *dir, const char *rel, size_t *len);
/*
 * A canonical text description of the whole tree under dir (excluding
 * .fstx): every name, type, mode, size, link count, content checksum,
 * xattrs and symlink target.  Two trees are equal iff their snapshots are.
 */
char *t_snapshot(const char *dir);
/* Build a small populated tree used by the rollback and crash tests. */
void t_populate(const char *dir);
/* A fresh domain holding that tree (malloc'd path); t_drop removes it. */
char *t_fresh(void);
void t_drop(char *dir);

/* Name to, another name of from (both relative to dir). */
void t_link(const char *dir, const char *from, const char *to);
/*
 * More names of one file on the tree of t_populate(): d/h (and hard) of
 * b, d/e/g of a, y of p/q/z (test/gen_names.py's tree).
 */
void t_names_tree(const char *dir);
/*
 * The transactions of a file of them (gen_names.py's output: each ended by
 * a line "%%"): $FSTX_NAMES_TX, else test/names.tx of the source tree.
 * At most $FSTX_NAMES of them (default all); *tx and each are malloc'd.
 */
size_t t_names_tx(char ***tx);

/* Seed-ABI helpers. */
#define P(s) ((__s64)(intptr_t)(s))
struct btrfs_ioctl_usertrans_op t_op(uint64_t op, __s64 a0, __s64 a1, __s64 a2,
				     __s64 a3, __s64 a4);
long t_run(const char *dir, struct btrfs_ioctl_usertrans_op *ops, size_t n,
	   uint64_t nfds, uint64_t flags, uint64_t *completed);
int t_dirfd(const char *dir);
/* 1 if FICLONERANGE works between two files of dir (reflink). */
int t_reflink(const char *dir);

#endif
