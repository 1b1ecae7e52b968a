/* SPDX-License-Identifier: MIT */
/*
 * blkrec: a FUSE filesystem exposing one disk image, recording every write
 * and every flush it receives.
 *
 *   blkrec IMAGE LOG MOUNTPOINT
 *
 * MOUNTPOINT shows two files: "disk.img", the image (reads and writes go to
 * IMAGE), and "ctl", a control file: each line written to it is logged as a
 * named mark.  A loop device attached to MOUNTPOINT/disk.img passes the
 * block I/O of the filesystem on it through here: a write reaches us as a
 * write, a cache flush as fsync (FUA becomes write + flush, as loop
 * advertises no FUA).  The daemon runs single-threaded, so the order of the
 * log is the order in which the requests were served: a write logged
 * before a flush had completed before that flush was served.
 *
 * LOG is a sequence of records, each a struct blkrec_hdr and len bytes of
 * payload (the data of a write, the text of a mark, nothing for a flush).
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLKREC_MAGIC 0x43455242u /* "BREC" */

enum { REC_WRITE = 1, REC_FLUSH = 2, REC_MARK = 3 };

struct blkrec_hdr {
	uint32_t magic;
	uint32_t type;
	uint64_t seq;
	uint64_t off;
	uint64_t len;
};

static int img_fd = -1;
static int log_fd = -1;
static uint64_t seq;

static const char IMG_NAME[] = "/disk.img";
static const char CTL_NAME[] = "/ctl";

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A record the log cannot take would make every crash state wrong: stop. */
static void log_record(uint32_t type, uint64_t off, const void *buf,
		       uint64_t len)
{
	struct blkrec_hdr h = {
		.magic = BLKREC_MAGIC, .type = type, .seq = seq,
		.off = off, .len = len,
	};

	seq++;
	if (write_all(log_fd, &h, sizeof(h)) < 0 ||
	    (len && write_all(log_fd, buf, len) < 0)) {
		perror("blkrec: log");
		abort();
	}
}

static int br_getattr(const char *path, struct stat *st,
		      struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (strcmp(path, "/") == 0) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (strcmp(path, IMG_NAME) == 0) {
		struct stat ist;

		if (fstat(img_fd, &ist) < 0)
			return -errno;
		st->st_mode = S_IFREG | 0600;
		st->st_nlink = 1;
		st->st_size = ist.st_size;
		st->st_blocks = ist.st_blocks;
		st->st_blksize = 4096;
		return 0;
	}
	if (strcmp(path, CTL_NAME) == 0) {
		st->st_mode = S_IFREG | 0600;
		st->st_nlink = 1;
		return 0;
	}
	return -ENOENT;
}

static int br_readdir(const char *path, void *buf, fuse_fill_dir_t fill,
		      off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	if (strcmp(path, "/") != 0)
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, IMG_NAME + 1, NULL, 0, 0);
	fill(buf, CTL_NAME + 1, NULL, 0, 0);
	return 0;
}

static int br_open(const char *path, struct fuse_file_info *fi)
{
	if (strcmp(path, IMG_NAME) != 0 && strcmp(path, CTL_NAME) != 0)
		return -ENOENT;
	/* No page cache on this side either: every write is seen here. */
	fi->direct_io = 1;
	return 0;
}

static int br_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	(void)fi;
	(void)size;
	/* "echo mark > ctl" truncates first; the image keeps its size. */
	if (strcmp(path, CTL_NAME) == 0)
		return 0;
	return strcmp(path, IMG_NAME) == 0 ? -EPERM : -ENOENT;
}

static int br_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	ssize_t n;

	(void)fi;
	if (strcmp(path, CTL_NAME) == 0)
		return 0;
	n = pread(img_fd, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int br_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	size_t done = 0;

	(void)fi;
	if (strcmp(path, CTL_NAME) == 0) {
		size_t len = size;

		while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
			len--;
		log_record(REC_MARK, 0, buf, len);
		return (int)size;
	}
	while (done < size) {
		ssize_t n = pwrite(img_fd, buf + done, size - done,
				   off + (off_t)done);

		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	log_record(REC_WRITE, (uint64_t)off, buf, size);
	return (int)size;
}

/*
 * The device's cache flush.  The image itself needs no fsync: the crash
 * states are built from the log, and the log only has to be complete
 * when the daemon exits.
 */
static int br_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	(void)fi;
	if (strcmp(path, IMG_NAME) == 0)
		log_record(REC_FLUSH, 0, NULL, 0);
	return 0;
}

static void br_destroy(void *priv)
{
	(void)priv;
	if (log_fd >= 0 && fsync(log_fd) < 0)
		perror("blkrec: fsync log");
}

static const struct fuse_operations br_ops = {
	.getattr = br_getattr,
	.readdir = br_readdir,
	.open = br_open,
	.truncate = br_truncate,
	.read = br_read,
	.write = br_write,
	.fsync = br_fsync,
	.destroy = br_destroy,
};

int main(int argc, char **argv)
{
	char *fargv[] = { argv[0], NULL, "-s", "-f", "-o",
			  "default_permissions", NULL };

	if (argc != 4) {
		fprintf(stderr, "usage: blkrec IMAGE LOG MOUNTPOINT\n");
		return 2;
	}
	img_fd = open(argv[1], O_RDWR | O_CLOEXEC);
	if (img_fd < 0) {
		perror(argv[1]);
		return 1;
	}
	log_fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC,
		      0600);
	if (log_fd < 0) {
		perror(argv[2]);
		return 1;
	}
	fargv[1] = argv[3];
	return fuse_main(6, fargv, &br_ops, NULL);
}
