/* SPDX-License-Identifier: MIT */
/* mkseeds.c DIR - write test/corpus.h's transactions as fuzz_txtext seeds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "helpers.h"
#include "corpus.h"

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	corpus_load();
	for (size_t i = 0; i < ncx; i++) {
		char p[4096];
		FILE *f;

		snprintf(p, sizeof(p), "%s/corpus-%02zu.tx", argv[1], i);
		f = fopen(p, "w");
		if (!f || fputs(cx[i], f) < 0 || fclose(f))
			return 1;
	}
	return 0;
}
