/*
 * overwrite.c - workload (d): overwrite 64 MiB of an existing file, as a
 * plain pwrite + fsync (the baseline) and as one fstx transaction, run
 * alternately in the same process so both see the same machine state.
 *
 *   overwrite DIR [MIB [ROUNDS]]
 *
 * Prints the median time of each and their ratio.  Not a test: no
 * thresholds, just figures.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fstx.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void fill(const char *path, const char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || pwrite(fd, buf, len, 0) != (ssize_t)len || fsync(fd)) {
		perror(path);
		exit(1);
	}
	close(fd);
}

static double plain(const char *path, const char *buf, size_t len)
{
	double t = now();
	int fd = open(path, O_WRONLY);

	if (fd < 0 || pwrite(fd, buf, len, 0) != (ssize_t)len || fsync(fd)) {
		perror("plain");
		exit(1);
	}
	close(fd);
	return now() - t;
}

static double txn(fstx_domain *d, const char *buf, size_t len)
{
	double t = now();
	fstx_tx *tx;
	int fd, r;

	if ((r = fstx_tx_new(d, &tx)) < 0)
		goto fail;
	fd = fstx_tx_open(tx, "fstx.dat", O_WRONLY, 0);
	for (size_t off = 0; off < len; off += 16u << 20)
		fstx_tx_pwrite(tx, fd, buf + off,
			       len - off < (16u << 20) ? len - off : 16u << 20,
			       (off_t)off);
	fstx_tx_close(tx, fd);
	r = fstx_tx_commit(tx);
	fstx_tx_free(tx);
	if (r == 0)
		return now() - t;
fail:
	fprintf(stderr, "fstx: %s\n", strerror(-r));
	exit(1);
}

int main(int argc, char **argv)
{
	size_t mib = argc > 2 ? strtoul(argv[2], NULL, 0) : 64, len = mib << 20;
	int rounds = argc > 3 ? atoi(argv[3]) : 7;
	double *a, *b;
	char *buf, path[4096];
	fstx_domain *d;
	int r;

	if (argc < 2 || rounds < 1) {
		fprintf(stderr, "usage: overwrite DIR [MIB [ROUNDS]]\n");
		return 2;
	}
	buf = malloc(len);
	a = calloc((size_t)rounds, sizeof(*a));
	b = calloc((size_t)rounds, sizeof(*b));
	if (!buf || !a || !b)
		return 1;
	memset(buf, 'x', len);
	snprintf(path, sizeof(path), "%s/plain.dat", argv[1]);
	fill(path, buf, len);
	snprintf(path, sizeof(path), "%s/fstx.dat", argv[1]);
	fill(path, buf, len);
	snprintf(path, sizeof(path), "%s/plain.dat", argv[1]);
	if ((r = fstx_domain_open(argv[1], &d)) < 0) {
		fprintf(stderr, "fstx_domain_open %s: %s\n", argv[1], strerror(-r));
		return 1;
	}
	for (int i = 0; i < rounds; i++) {
		buf[0] = (char)('a' + i % 26);
		a[i] = plain(path, buf, len);
		b[i] = txn(d, buf, len);
	}
	fstx_domain_close(d);
	qsort(a, (size_t)rounds, sizeof(*a), cmp);
	qsort(b, (size_t)rounds, sizeof(*b), cmp);
	printf("overwrite %zu MiB: pwrite+fsync %.1f ms, fstx %.1f ms, ratio %.2fx\n",
	       mib, a[rounds / 2] * 1e3, b[rounds / 2] * 1e3, b[rounds / 2] / a[rounds / 2]);
	free(a);
	free(b);
	free(buf);
	return 0;
}
