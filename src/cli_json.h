/* SPDX-License-Identifier: MIT */
/*
 * cli_json.h - JSON input of the fstx command (fstx(1), JSON INPUT): a
 * JSON array of op objects, or JSON lines (one object per line), turned
 * into the transaction text of fstx-tx(5), one text line per element, so
 * the text parser checks and expands it like any transaction.
 */
#ifndef FSTX_CLI_JSON_H
#define FSTX_CLI_JSON_H

#include <stddef.h>

struct fx_json {
	char *text;          /* the transaction text; element i is line i + 1 */
	size_t len;
	size_t nelem;
	unsigned *elem_line; /* input line where element i starts, 0 unknown */
	char **elem_op;      /* element i's "op" as written, or NULL */
	long err_elem;       /* the element an error is in, or -1 */
	unsigned err_line;   /* the input line of an error, or 0 */
	unsigned err_col;    /* a JSON syntax error's column, or 0 */
	char err[1024];      /* "element N ("op":"X"): ..." or "line L: ..." */
};

/* Convert JSON input to text.  0, -EINVAL (see j->err) or -ENOMEM. */
int fx_json_convert(const char *in, size_t len, struct fx_json *j);
void fx_json_free(struct fx_json *j);

#endif
