/* states.h - checks against a sequence's expected trees (tests only;
 * include after <cmocka.h>). */
#ifndef FSTX_TEST_STATES_H
#define FSTX_TEST_STATES_H
#include <stdlib.h>
#include <string.h>
#include "helpers.h"

/* The tree at d must be st[j] for some j in [lo, hi]. */
static inline void in_range(const char *d, char **st, int lo, int hi,
			    const char *what, long k)
{
	char *now = t_snapshot(d);

	for (int j = lo; j <= hi; j++)
		if (!strcmp(now, st[j])) {
			free(now);
			return;
		}
	fail_msg("%s %ld: state is none of %d..%d\n%s", what, k, lo, hi, now);
}

/* The trees at d1 and d2 are the same (both shown if not). */
static inline void same_trees(const char *d1, const char *d2, const char *what,
			      long k)
{
	char *s1 = t_snapshot(d1), *s2 = t_snapshot(d2);

	if (strcmp(s1, s2))
		fail_msg("%s %ld: the trees differ\n%s---\n%s", what, k, s1, s2);
	free(s1);
	free(s2);
}

/* Recover as a reader does: fstx_read_begin() on a new handle. */
static inline int reader_recover(const char *dir)
{
	fstx_domain *d;
	int r = fstx_domain_open(dir, &d);

	if (r == 0) {
		r = fstx_read_begin(d);
		if (r == 0)
			fstx_read_end(d);
		fstx_domain_close(d);
	}
	return r;
}
#endif
