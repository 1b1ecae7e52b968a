/* SPDX-License-Identifier: MIT */
/*
 * test_large.c - large overwrites keep memory bounded and work on every
 * filesystem.  A child process overwrites FSTX_LARGE_MB (default 1024) MiB
 * of an existing file in one transaction, from one 16 MiB caller buffer
 * passed to many pwrite ops, and reports its peak RSS beyond what it had
 * with the buffer touched; the same overwrite ending in a failing op must
 * restore every byte.  The before-images take the copy path, or the clone
 * path where the filesystem has reflink (journal.c rule 8).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "internal.h"
#include "helpers.h"

#define BUF (16u << 20)
#define RSS_LIMIT_KB (16u << 10)

static uint64_t large_bytes(void)
{
	const char *v = getenv("FSTX_LARGE_MB");
	uint64_t mb = v && *v ? strtoull(v, NULL, 0) : 1024;

	return (mb ? mb : 1) << 20;
}

/* Fill path with size bytes of a pattern that differs per MiB. */
static void make_file(const char *path, uint64_t size)
{
	char *b = malloc(1 << 20);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_non_null(b);
	assert_true(fd >= 0);
	for (uint64_t off = 0; off < size; off += 1 << 20) {
		memset(b, (int)('a' + (off >> 20) % 26), 1 << 20);
		snprintf(b, 32, "MiB %llu", (unsigned long long)(off >> 20));
		assert_int_equal(pwrite(fd, b, 1 << 20, (off_t)off), 1 << 20);
	}
	assert_int_equal(fsync(fd), 0);
	close(fd);
	free(b);
}

static uint32_t file_crc(const char *path, uint64_t *size)
{
	char *b = malloc(1 << 20);
	int fd = open(path, O_RDONLY);
	uint32_t crc = 0;
	ssize_t n;

	assert_non_null(b);
	assert_true(fd >= 0);
	*size = 0;
	while ((n = read(fd, b, 1 << 20)) > 0) {
		crc = fx_crc32c(crc, b, (size_t)n);
		*size += (uint64_t)n;
	}
	close(fd);
	free(b);
	return crc;
}

/* The CRC-32C of size bytes of c, as size/BUF buffers of it. */
static uint32_t pattern_crc(char c, uint64_t size)
{
	char *z = malloc(BUF);
	uint32_t crc = 0;

	assert_non_null(z);
	memset(z, c, BUF);
	for (uint64_t off = 0; off < size; off += BUF)
		crc = fx_crc32c(crc, z, BUF);
	free(z);
	return crc;
}

/*
 * In a child: one transaction of size/BUF pwrites from one buffer into
 * big (newf 0), or into a new file new.tmp then renamed to new (newf 1);
 * then (fail) an unlink of a missing name.  Writes the result and the RSS
 * growth (KiB) to the pipe.
 */
static void writes_child(const char *dir, uint64_t size, int fail, int out, int newf)
{
	struct rusage ru;
	long res[2] = { 0, 0 }, base;
	char *buf = malloc(BUF);
	fstx_domain *d;
	fstx_tx *tx;
	int fd;

	memset(buf, newf ? 'N' : 'Z', BUF);
	getrusage(RUSAGE_SELF, &ru);
	base = ru.ru_maxrss;
	res[0] = fstx_domain_open(dir, &d);
	if (!res[0])
		res[0] = fstx_tx_new(d, &tx);
	if (!res[0]) {
		fd = newf ? fstx_tx_open(tx, "new.tmp", O_WRONLY | O_CREAT | O_EXCL, 0644)
			  : fstx_tx_open(tx, "big", O_WRONLY, 0);
		for (uint64_t off = 0; off < size; off += BUF)
			fstx_tx_pwrite(tx, fd, buf, BUF, (off_t)off);
		fstx_tx_close(tx, fd);
		if (newf)
			fstx_tx_rename(tx, "new.tmp", "new", 0);
		if (fail)
			fstx_tx_unlink(tx, "missing");
		res[0] = fstx_tx_commit(tx);
		fstx_tx_free(tx);
		fstx_domain_close(d);
	}
	getrusage(RUSAGE_SELF, &ru);
	res[1] = ru.ru_maxrss - base;
	if (write(out, res, sizeof(res)) != sizeof(res))
		_exit(2);
	_exit(0);
}

static void child(const char *dir, uint64_t size, int fail, int out)
{
	writes_child(dir, size, fail, out, 0);
}

static void new_child(const char *dir, uint64_t size, int fail, int out)
{
	writes_child(dir, size, fail, out, 1);
}

typedef void child_fn(const char *dir, uint64_t size, int fail, int out);

/* Run fn in a child process and read its nres results from the pipe. */
static void run_child(child_fn *fn, const char *dir, uint64_t size, int fail,
		      long *res, size_t nres)
{
	int p[2], st;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		fn(dir, size, fail, p[1]);
	}
	close(p[1]);
	assert_int_equal(read(p[0], res, nres * sizeof(long)), nres * sizeof(long));
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void large_overwrite(void **state)
{
	uint64_t size = large_bytes(), got;
	char *dir = t_mkdomain(), *path;
	uint32_t before, after;
	long res[2];

	(void)state;
	assert_true(asprintf(&path, "%s/big", dir) > 0);
	make_file(path, size);
	before = file_crc(path, &got);
	assert_true(got == size);

	/* rolled back: every byte as before */
	run_child(child, dir, size, 1, res, 2);
	if (res[0] != -ENOENT)
		fail_msg("rollback run: %ld (%s)", res[0], strerror((int)-res[0]));
	printf("large: %llu MiB overwrite rolled back, RSS +%ld KiB\n",
	       (unsigned long long)(size >> 20), res[1]);
	assert_true(res[1] < (long)RSS_LIMIT_KB);
	assert_true(file_crc(path, &got) == before && got == size);

	/* committed: every byte new */
	run_child(child, dir, size, 0, res, 2);
	assert_int_equal(res[0], 0);
	printf("large: %llu MiB overwrite committed, RSS +%ld KiB\n",
	       (unsigned long long)(size >> 20), res[1]);
	assert_true(res[1] < (long)RSS_LIMIT_KB);
	after = file_crc(path, &got);
	assert_true(got == size);
	assert_true(after == pattern_crc('Z', size));
	free(path);
	t_rmtree(dir);
	free(dir);
}

/*
 * A large new file (wal.c W22): rolled back, nothing; committed, every
 * byte, with bounded memory, through the write-ahead log (its record
 * holds the name, not the data: the log is a few KiB, and the new file's
 * data went once to its staged file).
 */
static void large_new(void **state)
{
	uint64_t size = large_bytes(), got;
	char *dir = t_mkdomain(), *path, *wal;
	uint32_t after, want = pattern_crc('N', size);
	struct stat st;
	long res[2];

	(void)state;
	assert_true(asprintf(&path, "%s/new", dir) > 0);
	assert_true(asprintf(&wal, "%s/.fstx/wal", dir) > 0);
	run_child(new_child, dir, size, 1, res, 2);
	assert_int_equal(res[0], -ENOENT);
	assert_int_equal(stat(path, &st), -1);
	run_child(new_child, dir, size, 0, res, 2);
	assert_int_equal(res[0], 0);
	printf("large: %llu MiB new file committed, RSS +%ld KiB\n",
	       (unsigned long long)(size >> 20), res[1]);
	assert_true(res[1] < (long)RSS_LIMIT_KB);
	after = file_crc(path, &got);
	assert_true(got == size);
	assert_true(after == want);
	{
		/* the log's first record (magic, entry count, payload length,
		 * wal_rec.c): there, and a few names long, not the data */
		unsigned char h[16];
		uint64_t len;
		int fd = open(wal, O_RDONLY);

		assert_true(fd >= 0);
		assert_int_equal(pread(fd, h, sizeof(h), 1024), sizeof(h));
		close(fd);
		assert_memory_equal(h, "FXW1", 4);
		memcpy(&len, h + 8, sizeof(len));
		assert_true(len > 0 && len < 4096);
	}
	{
		fstx_domain *d;

		assert_int_equal(fstx_domain_open(dir, &d), 0);
		assert_true(fstx_recover(d) >= 0); /* the log checkpointed */
		fstx_domain_close(d);
	}
	assert_true(file_crc(path, &got) == want && got == size);
	free(wal);
	free(path);
	t_rmtree(dir);
	free(dir);
}

/*
 * 1,000,000 ops in one transaction (open, 999,997 or 999,998 one-byte
 * pwrites over an existing file, close, and for the failing run an unlink
 * of a missing name): in a child, reporting result, RSS growth and time.
 */
#define MILLION 1000000
static void million_child(const char *dir, uint64_t size, int fail, int out)
{
	static const char byte = 'M';
	struct rusage ru;
	long res[3] = { 0, 0, 0 }, base;
	struct timespec t0, t1;

	(void)size;
	fstx_domain *d;
	fstx_tx *tx;
	int fd;

	getrusage(RUSAGE_SELF, &ru);
	base = ru.ru_maxrss;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	res[0] = fstx_domain_open(dir, &d);
	if (!res[0])
		res[0] = fstx_tx_new(d, &tx);
	if (!res[0]) {
		long n = MILLION - 2 - fail;

		fd = fstx_tx_open(tx, "m", O_WRONLY, 0);
		for (long i = 0; i < n && !res[0]; i++)
			res[0] = fstx_tx_pwrite(tx, fd, &byte, 1, (off_t)i * 3);
		fstx_tx_close(tx, fd);
		if (fail)
			fstx_tx_unlink(tx, "missing");
		if (!res[0] && fstx_tx_num_ops(tx) != MILLION)
			res[0] = -EDOM;
		if (!res[0])
			res[0] = fstx_tx_commit(tx);
		fstx_tx_free(tx);
		fstx_domain_close(d);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	getrusage(RUSAGE_SELF, &ru);
	res[1] = ru.ru_maxrss - base;
	res[2] = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	if (write(out, res, sizeof(res)) != sizeof(res))
		_exit(2);
	_exit(0);
}

static void million_ops(void **state)
{
	char *dir = t_mkdomain(), *path, *b;
	uint32_t before, after;
	uint64_t size = 3u << 20, got; /* make_file writes whole MiB */
	long res[3];

	(void)state;
	assert_true(asprintf(&path, "%s/m", dir) > 0);
	make_file(path, size);
	before = file_crc(path, &got);
	for (int fail = 1; fail >= 0; fail--) {
		run_child(million_child, dir, 0, fail, res, 3);
		printf("large: %d ops in one transaction %s in %ld ms, RSS +%ld KiB\n",
		       MILLION, fail ? "rolled back" : "committed", res[2], res[1]);
		/* Memory is O(ops): the ops and the plan, not the data. */
		assert_true(res[1] < 512L << 10);
		if (fail) {
			assert_int_equal(res[0], -ENOENT);
			after = file_crc(path, &got);
			assert_true(after == before && got == size);
		} else {
			assert_int_equal(res[0], 0);
		}
	}
	b = t_read(dir, "m", &got);
	assert_true(got == size);
	for (long i = 0; i < MILLION - 2; i++)
		if (b[i * 3] != 'M')
			fail_msg("byte %ld not written", i * 3);
	free(b);
	free(path);
	t_rmtree(dir);
	free(dir);
}

/* A pwrite past the filesystem's largest file size fails and rolls back. */
static void pwrite_beyond_max(void **state)
{
	char *dir = t_mkdomain();
	fstx_domain *d;
	fstx_tx *tx;
	size_t len;
	char *b;
	int fd;

	(void)state;
	t_write(dir, "f", "before", 6);
	assert_int_equal(fstx_domain_open(dir, &d), 0);
	assert_int_equal(fstx_tx_new(d, &tx), 0);
	fd = fstx_tx_open(tx, "f", O_RDWR, 0);
	assert_int_equal(fstx_tx_pwrite(tx, fd, "x", 1, 0), 0);
	assert_int_equal(fstx_tx_pwrite(tx, fd, "xyz", 3, INT64_MAX - 8), 0);
	assert_int_equal(fstx_tx_unlink(tx, "missing"), 0);
	{
		/*
		 * ext4 refuses the offset (EFBIG at op 2); xfs, btrfs and tmpfs
		 * allow files up to 2^63-1 and the write succeeds, so the unlink
		 * fails (op 3).  Either way the file must be rolled back.
		 */
		int r = fstx_tx_commit(tx);
		long op = fstx_tx_failed_op(tx);

		printf("large: pwrite at offset 2^63-9: %s (op %ld)\n", strerror(-r), op);
		assert_true(((r == -EFBIG || r == -EINVAL) && op == 2) ||
			    (r == -ENOENT && op == 3));
	}
	fstx_tx_free(tx);
	/* offset + length past INT64_MAX is refused when it is recorded */
	assert_int_equal(fstx_tx_new(d, &tx), 0);
	fd = fstx_tx_open(tx, "f", O_RDWR, 0);
	assert_int_equal(fstx_tx_pwrite(tx, fd, "xyz", 3, INT64_MAX - 1), -EINVAL);
	fstx_tx_free(tx);
	fstx_domain_close(d);
	b = t_read(dir, "f", &len);
	assert_true(len == 6 && !memcmp(b, "before", 6));
	free(b);
	t_rmtree(dir);
	free(dir);
}

/* The two CRC-32C implementations agree (and match the standard check). */
static void crc_check(void **state)
{
	static unsigned char b[9001]; /* several rounds of three streams */

	(void)state;
	assert_true(fx_crc32c(0, "123456789", 9) == 0xe3069283u);
	assert_true(fx_crc32c_sw(0, "123456789", 9) == 0xe3069283u);
	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (unsigned char)(i * 131 + 7);
	for (size_t off = 0; off < 9; off++)
		for (size_t n = 0; n + off <= sizeof(b); n += 97 + n / 64)
			assert_true(fx_crc32c(7, b + off, n) == fx_crc32c_sw(7, b + off, n));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(crc_check),
		cmocka_unit_test(large_overwrite),
		cmocka_unit_test(large_new),
		cmocka_unit_test(million_ops),
		cmocka_unit_test(pwrite_beyond_max),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
