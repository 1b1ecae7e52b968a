/* SPDX-License-Identifier: MIT */
/*
 * interactive.c - the same change as ergonomic.c, as an interactive
 * transaction: read the current object, decide, write the new one, read
 * it back before commit, and retry if another writer got there first.
 * Usage: interactive DIR
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <fstx.h>

static int replace(fstx_domain *d)
{
	static const char data[] = "object contents, version 2\n";
	char cur[64], back[64];
	fstx_tx *tx;
	ssize_t n;
	int r;

	if ((r = fstx_begin(d, 5000, &tx)) < 0) /* a 5 s lease */
		return r;
	n = fstx_read(tx, "obj", cur, sizeof(cur) - 1, 0);
	if (n < 0) {
		r = (int)n;
		goto out;
	}
	cur[n] = 0;
	if (strstr(cur, "version 2")) { /* somebody did it already */
		r = fstx_abort(tx);
		goto out;
	}
	/* a new file renamed over obj, then its xattr: one transaction */
	fstx_tx_replace(tx, "obj", data, sizeof(data) - 1, 0644);
	fstx_tx_setxattr(tx, "obj", "user.version", "2", 1, 0);
	/* read-your-writes: the transaction sees obj as it will be */
	n = fstx_read(tx, "obj", back, sizeof(back), 0);
	if (n != (ssize_t)sizeof(data) - 1 || memcmp(back, data, (size_t)n)) {
		r = n < 0 ? (int)n : -EIO;
		goto out;
	}
	r = fstx_commit(tx); /* all or nothing; -ECANCELED if obj changed */
out:
	fstx_tx_free(tx);
	return r;
}

int main(int argc, char **argv)
{
	fstx_domain *d;
	int r, tries = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	if ((r = fstx_domain_open(argv[1], &d)) < 0) {
		fprintf(stderr, "%s: %s\n", argv[1], strerror(-r));
		return 2;
	}
	while ((r = replace(d)) == -ECANCELED && ++tries < 10)
		; /* another writer changed obj: read it again */
	if (r < 0)
		fprintf(stderr, "interactive: %s; nothing changed\n", strerror(-r));
	else
		printf("committed after %d retries\n", tries);
	fstx_domain_close(d);
	return r < 0;
}
