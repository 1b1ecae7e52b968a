/* SPDX-License-Identifier: MIT */
/*
 * ergonomic.c - the same transaction as seed_usertrans.c, with the
 * ergonomic API: every op strict, a failed builder call poisons the
 * transaction, so only the commit's result needs checking.  (The first
 * four ops and the rename are what fstx_tx_replace() records in one call;
 * see interactive.c.)  Usage: ergonomic DIR
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include <fstx.h>

int main(int argc, char **argv)
{
	static const char data[] = "object contents, version 2\n";
	fstx_domain *d;
	fstx_tx *tx;
	int r, fd;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	if ((r = fstx_domain_open(argv[1], &d)) < 0) {
		fprintf(stderr, "%s: %s\n", argv[1], strerror(-r));
		return 2;
	}
	if ((r = fstx_tx_new(d, &tx)) < 0) {
		fprintf(stderr, "fstx_tx_new: %s\n", strerror(-r));
		return 2;
	}
	fd = fstx_tx_open(tx, "obj.new", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	fstx_tx_pwrite(tx, fd, data, sizeof(data) - 1, 0);
	fstx_tx_close(tx, fd);
	fstx_tx_setxattr(tx, "obj.new", "user.version", "2", 1, 0);
	fstx_tx_rename(tx, "obj.new", "obj", 0); /* replaces obj atomically */
	r = fstx_tx_commit(tx);
	if (r < 0) /* e.g. op 4 (rename "obj.new" to "obj"): ... (EISDIR) */
		fprintf(stderr, "%s; nothing changed\n", fstx_tx_strerror(tx));
	else
		printf("committed %zu ops\n", fstx_tx_num_ops(tx));
	fstx_tx_free(tx);
	fstx_domain_close(d);
	return r < 0;
}
