/* SPDX-License-Identifier: MIT */
/*
 * fsfacts.c - what the domain's filesystem can do: the one place where
 * filesystems differ.  Everything else asks d->fs.
 *
 *   statfs facts (at open):    type, block size, errno of rename over a
 *                              non-empty directory (xfs: EEXIST)
 *   probed facts (once, under the domain lock, on first need):
 *     reflink     FICLONERANGE between two files of the domain works
 *                 (btrfs; xfs made with reflink=1): before-images of large
 *                 overwrites are then clones, not copies (journal.c)
 *     xattr_user  user.* xattrs can be set (not on tmpfs of old kernels)
 *   dir_fsync     fsync() of a directory succeeds: probed by fstx_status()
 *                 only (it is a barrier); fstx itself makes names durable
 *                 with syncfs(), so this is reported, not relied on
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>

void fx_fs_detect(struct fstx_domain *d)
{
	struct statfs sf;
	struct stat st;

	d->fs = (struct fx_fsfacts){ 0 };
	if (fx_os.fstat(d->root, &st) == 0)
		d->fs.dev = (uint64_t)st.st_dev;
	if (fx_os.fstatfs(d->root, &sf) == 0) {
		d->fs.magic = (long)sf.f_type;
		d->fs.block_size = (uint32_t)sf.f_bsize;
	}
	if (d->fs.block_size < 512 || (d->fs.block_size & (d->fs.block_size - 1)))
		d->fs.block_size = 4096;
	/*
	 * Inode numbers name one live inode: by where it sits (ext4, xfs), a
	 * per-tree counter (btrfs, st_dev per subvolume), a 64-bit counter
	 * (tmpfs; mounted inode32 it could wrap after 2^32 files).  Not
	 * assumed of others (FUSE, network, overlay).
	 */
	d->fs.ino_unique = d->fs.magic == EXT4_SUPER_MAGIC || d->fs.magic == XFS_SUPER_MAGIC ||
			   d->fs.magic == BTRFS_SUPER_MAGIC || d->fs.magic == TMPFS_MAGIC;
	/* POSIX allows EEXIST or ENOTEMPTY; xfs gives EEXIST for rename. */
	d->fs.enotempty = d->fs.magic == XFS_SUPER_MAGIC ? EEXIST : ENOTEMPTY;
}

/* Probe on two scratch files in .fstx/new, removed again. */
int fx_fs_probe(struct fstx_domain *d)
{
	int a, b, r = 0;

	if (d->fs.probed)
		return 0;
	a = fx_os.openat2(d->meta, "new/probe-a", O_RDWR | O_CREAT | O_TRUNC,
			    0600, FX_RESOLVE);
	b = fx_os.openat2(d->meta, "new/probe-b", O_RDWR | O_CREAT | O_TRUNC,
			    0600, FX_RESOLVE);
	if (a < 0 || b < 0) {
		r = a < 0 ? a : b;
		goto out;
	}
	d->fs.xattr_user = fx_os.fsetxattr(a, "user.fstx.probe", "1", 1, 0) == 0;
	d->fs.reflink = fx_os.ficlonerange(b, a, 0, 0, 0) == 0;
	d->fs.probed = 1;
out:
	if (a >= 0)
		fx_os.close(a);
	if (b >= 0)
		fx_os.close(b);
	fx_os.unlinkat(d->meta, "new/probe-a", 0);
	fx_os.unlinkat(d->meta, "new/probe-b", 0);
	return r;
}

const char *fx_fs_name(long magic)
{
	switch (magic) {
	case EXT4_SUPER_MAGIC: return "ext4";
	case XFS_SUPER_MAGIC: return "xfs";
	case BTRFS_SUPER_MAGIC: return "btrfs";
	case TMPFS_MAGIC: return "tmpfs";
	case OVERLAYFS_SUPER_MAGIC: return "overlay";
	case NFS_SUPER_MAGIC: return "nfs";
	}
	return "other";
}

int fx_fs_probe_dir_fsync(struct fstx_domain *d)
{
	d->fs.dir_fsync = fx_os.fsync(d->meta) == 0;
	return d->fs.dir_fsync;
}
