/* SPDX-License-Identifier: MIT */
/*
 * plan.c - plan a whole transaction before anything changes.
 *
 * The planner walks the op vector against an overlay of the initial tree:
 * each path the transaction creates, removes or renames gets an entry that
 * says what now lives there (absent, an object of the initial tree, or a
 * new object).  Paths without an entry are looked up in the initial tree,
 * through the nearest renamed ancestor.  From this it derives
 *   - the canonical path of every op (symlinks resolved beneath the domain,
 *     so the executor never follows one and a swapped-in link is refused),
 *   - the result of every name op that cannot succeed (ENOENT, EEXIST, ...)
 *     which the executor reports without making the call,
 *   - the exact list of name steps (journal.c rule 4) of those that can,
 *   - the before-images to save: data ranges, sizes and xattrs of every
 *     initial object that the ops may change.
 * All of it goes into the journal before the first change (rule 2).
 */
#define _GNU_SOURCE
#include "plan.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_HOPS 40

static void node_free(struct node *n)
{
	free(n->ipath);
	free(n->target);
	n->ipath = n->target = NULL;
}

static int node_dup(struct node *dst, const struct node *src)
{
	*dst = *src;
	dst->ipath = src->ipath ? fx_strdup(src->ipath) : NULL;
	dst->target = src->target ? fx_strdup(src->target) : NULL;
	if ((src->ipath && !dst->ipath) || (src->target && !dst->target)) {
		node_free(dst);
		return -ENOMEM;
	}
	return 0;
}

static char *join(const char *a, const char *b)
{
	char *s;

	if (!*a)
		return fx_strdup(b);
	if (fx_asprintf(&s, "%s/%s", a, b) < 0)
		return NULL;
	return s;
}

/* Is p equal to or beneath dir? */
static int under(const char *p, const char *dir, int or_equal)
{
	size_t n = strlen(dir);

	if (!*dir)
		return *p || or_equal;
	if (strncmp(p, dir, n))
		return 0;
	return p[n] == '/' || (or_equal && !p[n]);
}

/* ---- the initial tree ---------------------------------------------- */

static size_t path_hash(const char *p, size_t len);
static int real_lookup_fs(struct plan *P, const char *ip, struct node *out);

/*
 * The initial tree does not change while a transaction is planned, so
 * lookups in it are remembered (a direct-mapped cache, bounded memory):
 * each path component is looked up by canon() and the path again by
 * lookup(), and many ops name the same files.
 */
static int real_lookup(struct plan *P, const char *ip, struct node *out)
{
	struct memo *m;
	int r;

	if (!P->memo) { /* about two slots per op: small transactions are common */
		for (P->nmemo = 16; P->nmemo < PLAN_MEMO && P->nmemo < 2 * P->nops;)
			P->nmemo *= 2;
		if (!(P->memo = fx_calloc(P->nmemo, sizeof(*P->memo))))
			return -ENOMEM;
	}
	m = &P->memo[path_hash(ip, strlen(ip)) & (P->nmemo - 1)];
	if (m->ip && !strcmp(m->ip, ip))
		return node_dup(out, &m->n);
	if ((r = real_lookup_fs(P, ip, out)) < 0)
		return r;
	free(m->ip);
	node_free(&m->n);
	m->ip = fx_strdup(ip);
	if (!m->ip || node_dup(&m->n, out) < 0) {
		free(m->ip);
		m->ip = NULL;
		memset(&m->n, 0, sizeof(m->n));
	}
	return 0;
}

static int real_lookup_fs(struct plan *P, const char *ip, struct node *out)
{
	struct stat st;
	int r = fx_lstat(P->d, ip, &st);

	memset(out, 0, sizeof(*out));
	if (r == -ENOENT || r == -ENOTDIR)
		return 0; /* N_ABSENT */
	if (r < 0)
		return r;
	out->state = N_INIT;
	out->ino = (uint64_t)st.st_ino;
	out->dev = (uint64_t)st.st_dev;
	out->size = (uint64_t)st.st_size;
	out->nlink = (uint64_t)st.st_nlink;
	out->kind = S_ISREG(st.st_mode) ? K_FILE : S_ISDIR(st.st_mode) ? K_DIR
		  : S_ISLNK(st.st_mode) ? K_LINK : K_OTHER;
	out->ipath = fx_strdup(ip);
	if (!out->ipath)
		return -ENOMEM;
	if (out->kind == K_LINK) {
		char buf[PATH_MAX];
		const char *name;
		int dfd = fx_parent(P->d, ip, &name);
		ssize_t n = dfd;

		if (dfd >= 0) {
			n = fx_os.readlinkat(dfd, name, buf, sizeof(buf) - 1);
			fx_os.close(dfd);
		}
		if (n >= 0) {
			buf[n] = 0;
			out->target = fx_strdup(buf);
			n = out->target ? 0 : -ENOMEM;
		}
		if (n < 0) {
			node_free(out);
			return (int)n;
		}
	}
	return 0;
}

/* ---- the overlay ----------------------------------------------------- */

/*
 * Paths are unique in ents; a hash index keeps find() O(1), so planning a
 * transaction of n ops is not O(n^2).  Removals and renames of whole
 * subtrees (drop_under, move_under) are O(n) anyway and rebuild it.
 */
static size_t path_hash(const char *p, size_t len)
{
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
	return (size_t)(h ^ (h >> 29));
}

static void index_put(struct plan *P, size_t i)
{
	size_t m = P->hcap - 1, h = path_hash(P->ents[i].path, strlen(P->ents[i].path)) & m;

	while (P->hidx[h])
		h = (h + 1) & m;
	P->hidx[h] = i + 1;
}

/* Index every entry again (after entries moved or were removed). */
static void index_refill(struct plan *P)
{
	memset(P->hidx, 0, P->hcap * sizeof(*P->hidx));
	for (size_t i = 0; i < P->nents; i++)
		index_put(P, i);
}

static int index_rebuild(struct plan *P, size_t need)
{
	size_t cap = 64;

	while (cap < 2 * need)
		cap *= 2;
	if (cap != P->hcap) {
		size_t *n = fx_realloc(P->hidx, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		P->hidx = n;
		P->hcap = cap;
	}
	index_refill(P);
	return 0;
}

static struct ent *find(struct plan *P, const char *p, size_t len)
{
	size_t m = P->hcap - 1, h;

	if (!P->hcap)
		return NULL;
	for (h = path_hash(p, len) & m; P->hidx[h]; h = (h + 1) & m) {
		struct ent *e = &P->ents[P->hidx[h] - 1];

		if (!strncmp(e->path, p, len) && !e->path[len])
			return e;
	}
	return NULL;
}

/* What lives at canonical path p now (caller frees with node_free). */
static int lookup(struct plan *P, const char *p, struct node *out)
{
	struct ent *e = find(P, p, strlen(p));
	char *ip;
	int r;

	if (e)
		return node_dup(out, &e->n);
	for (size_t len = strlen(p); len-- > 0;) {
		if (p[len] != '/')
			continue;
		e = find(P, p, len);
		if (!e)
			continue;
		memset(out, 0, sizeof(*out));
		if (e->n.state != N_INIT || e->n.kind != K_DIR)
			return 0; /* beneath a new or absent dir: only entries exist */
		if (fx_asprintf(&ip, "%s%s", e->n.ipath, p + len) < 0)
			return -ENOMEM;
		r = real_lookup(P, ip, out);
		free(ip);
		return r;
	}
	return real_lookup(P, p, out);
}

/*
 * Record that p now names n.  It takes over n's strings, also when it
 * fails (it frees them then, and n's pointers read NULL after).
 */
static int set_ent(struct plan *P, const char *p, struct node *n)
{
	struct ent *e = find(P, p, strlen(p));
	int r;

	if (e) {
		node_free(&e->n);
		e->n = *n;
		return 0;
	}
	r = fx_grow((void **)&P->ents, &P->cents, P->nents + 1, sizeof(*P->ents));
	if (r == 0 && 2 * (P->nents + 1) > P->hcap)
		r = index_rebuild(P, P->nents + 1);
	if (r == 0 && !(P->ents[P->nents].path = fx_strdup(p)))
		r = -ENOMEM;
	if (r < 0) {
		node_free(n);
		return r;
	}
	e = &P->ents[P->nents];
	e->n = *n;
	index_put(P, P->nents++);
	return 0;
}

static int set_absent(struct plan *P, const char *p)
{
	struct node n = { 0 };

	return set_ent(P, p, &n);
}

static void drop_under(struct plan *P, const char *dir)
{
	size_t j = 0;

	for (size_t i = 0; i < P->nents; i++) {
		if (under(P->ents[i].path, dir, 0)) {
			free(P->ents[i].path);
			node_free(&P->ents[i].n);
		} else {
			P->ents[j++] = P->ents[i];
		}
	}
	P->nents = j;
	if (P->hcap) /* fewer entries: the index keeps its size */
		index_refill(P);
}

/* Entries beneath from/ now live beneath to/. */
static int move_under(struct plan *P, const char *from, const char *to)
{
	size_t fl = strlen(from);

	for (size_t i = 0; i < P->nents; i++) {
		char *np;

		if (!under(P->ents[i].path, from, 0))
			continue;
		if (fx_asprintf(&np, "%s%s", to, P->ents[i].path + fl) < 0)
			return -ENOMEM;
		free(P->ents[i].path);
		P->ents[i].path = np;
	}
	return index_rebuild(P, P->nents);
}

struct empty_scan { struct plan *P; const char *dir; };

/* 0: child absent now, 1: present (stop), <0: error. */
static int child_present(int fd, const char *name, void *arg)
{
	struct empty_scan *e = arg;
	struct node c;
	char *cp = join(e->dir, name);
	int r;

	(void)fd;
	if (!cp)
		return -ENOMEM;
	r = lookup(e->P, cp, &c);
	free(cp);
	if (r == 0)
		r = c.state != N_ABSENT;
	node_free(&c);
	return r;
}

/* Is directory p (node n) empty at this point of the transaction? */
static int dir_empty(struct plan *P, const char *p, const struct node *n)
{
	struct empty_scan e = { P, p };
	int fd, r;

	for (size_t i = 0; i < P->nents; i++)
		if (P->ents[i].n.state != N_ABSENT && under(P->ents[i].path, p, 0))
			return 0;
	if (n->state != N_INIT)
		return 1;
	fd = fx_open_owned(P->d, n->ipath, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return fd;
	r = fx_dir_each(fd, child_present, &e);
	fx_os.close(fd);
	return r < 0 ? r : !r;
}

/* ---- canonical paths --------------------------------------------------- */

/*
 * Resolve path beneath the domain as the kernel would, using the overlay:
 * "." and ".." are folded, symlinks expanded (the last component only if
 * follow).  Absolute paths and escapes give -EXDEV, .fstx -EPERM.
 */
static int canon(struct plan *P, const char *path, int follow, char **out)
{
	char *work = NULL, *cur = NULL, *next;
	int hops = 0, r;

	*out = NULL;
	if (!*path)
		return -ENOENT;
	if (path[0] == '/')
		return -EXDEV;
	if (strnlen(path, PATH_MAX) >= PATH_MAX)
		return -ENAMETOOLONG;
	work = fx_strdup(path);
	cur = fx_strdup("");
	if (!work || !cur) {
		r = -ENOMEM;
		goto fail;
	}
	for (char *w = work; w;) {
		char *c = w, *cand;
		struct node n;
		int last;

		next = strchr(w, '/');
		if (next)
			*next++ = 0;
		while (next && *next == '/')
			next++;
		last = !next || !*next;
		w = last ? NULL : next;
		if (!*c || !strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			char *s = strrchr(cur, '/');

			if (!*cur) {
				r = -EXDEV;
				goto fail;
			}
			if (s)
				*s = 0;
			else
				*cur = 0;
			continue;
		}
		if (strlen(c) > NAME_MAX) {
			r = -ENAMETOOLONG;
			goto fail;
		}
		cand = join(cur, c);
		if (!cand) {
			r = -ENOMEM;
			goto fail;
		}
		if (!*cur && !strcmp(c, FX_META)) {
			free(cand);
			r = -EPERM;
			goto fail;
		}
		if (last && !follow) {
			free(cur);
			cur = cand;
			break;
		}
		r = lookup(P, cand, &n);
		if (r < 0) {
			free(cand);
			goto fail;
		}
		if (n.kind == K_LINK) {
			char *nw;

			free(cand);
			if (++hops > MAX_HOPS || n.target[0] == '/' || !n.target[0]) {
				r = hops > MAX_HOPS ? -ELOOP : n.target[0] ? -EXDEV : -ENOENT;
				node_free(&n);
				goto fail;
			}
			if (fx_asprintf(&nw, "%s%s%s", n.target, w ? "/" : "",
					w ? w : "") < 0) {
				node_free(&n);
				r = -ENOMEM;
				goto fail;
			}
			node_free(&n);
			free(work);
			work = nw;
			w = work;
			continue;
		}
		if (!last && n.state == N_ABSENT)
			r = -ENOENT;
		else if (!last && n.kind != K_DIR)
			r = -ENOTDIR;
		else if (!last && n.state == N_NEW && !(n.mode & S_IXUSR) && geteuid() != 0)
			r = -EACCES; /* a directory it made that its owner may not
				      * search: as the kernel (nothing runs in
				      * it, nor looks in it to roll back) */
		else
			r = 0;
		node_free(&n);
		free(cur);
		cur = cand;
		if (r < 0)
			goto fail;
	}
	if (strlen(cur) >= PATH_MAX) {
		r = -ENAMETOOLONG;
		goto fail;
	}
	free(work);
	*out = cur;
	return 0;
fail:
	free(work);
	free(cur);
	return r;
}

/* ---- steps and captures ---------------------------------------------- */

/*
 * The directory p is in, as the plan has it now: its inode (an initial
 * one) or its new id, for journal.c rule 5a.  None for a name in the root
 * or a staging area (they never move) or where it cannot be known.
 */
static int dir_id(struct plan *P, const char *p, uint64_t *ino, int *newid)
{
	char dir[PATH_MAX];
	struct node n;
	int r;

	*ino = 0;
	*newid = 0;
	if (!p || !strchr(p, '/') || !strncmp(p, FX_META "/", sizeof(FX_META)))
		return 0;
	r = lookup(P, fx_dirname(p, dir), &n);
	if (r < 0)
		return r == -ENOENT || r == -ENOTDIR || r == -ELOOP ? 0 : r;
	if (n.state == N_INIT && n.kind == K_DIR)
		*ino = n.ino;
	else if (n.state == N_NEW && n.kind == K_DIR)
		*newid = n.newid;
	node_free(&n);
	return 0;
}

static int add_step(struct plan *P, size_t op, uint32_t kind, uint32_t mode,
		    const char *src, const char *dst, const char *aux)
{
	struct fx_step *s;
	uint64_t sdir = 0, ddir = 0;
	int sdir_new = 0, ddir_new = 0;
	int r = fx_grow((void **)&P->steps, &P->csteps, P->nsteps + 1,
		     sizeof(*P->steps));

	if (r < 0)
		return r;
	if (kind == FX_ST_MOVE && ((r = dir_id(P, src, &sdir, &sdir_new)) < 0 ||
				   (r = dir_id(P, dst, &ddir, &ddir_new)) < 0))
		return r;
	s = &P->steps[P->nsteps];
	*s = (struct fx_step){ .kind = kind, .mode = mode, .op = (uint32_t)op,
			       .sdir = sdir, .ddir = ddir,
			       .sdir_new = sdir_new, .ddir_new = ddir_new };
	s->src = src ? fx_strdup(src) : NULL;
	s->dst = fx_strdup(dst);
	s->aux = aux ? fx_strdup(aux) : NULL;
	if ((src && !s->src) || !s->dst || (aux && !s->aux)) {
		free(s->src);
		free(s->dst);
		free(s->aux);
		return -ENOMEM;
	}
	P->nsteps++;
	if (kind != FX_ST_MOVE && kind != FX_ST_LINK)
		P->est_inodes++;
	return 0;
}

/* The last step moves (or creates) the object node n describes. */
static void step_id(struct plan *P, const struct node *n)
{
	struct fx_step *s = &P->steps[P->nsteps - 1];

	if (n->state == N_INIT)
		s->ino = n->ino;
	else if (n->state == N_NEW)
		s->newid = n->newid;
}

static void scratch(char *buf, size_t n, const char *area, size_t op)
{
	snprintf(buf, n, "%s/%zu", area, op);
}

/* The capture of initial object n, created on first use. */
static int cap_of(struct plan *P, const struct node *n)
{
	struct fx_capture *c;
	int r;

	for (size_t i = 0; i < P->ncaps; i++)
		if (P->caps[i].ino == n->ino)
			return (int)i;
	r = fx_grow((void **)&P->caps, &P->ccaps, P->ncaps + 1, sizeof(*P->caps));
	if (r < 0)
		return r;
	c = &P->caps[P->ncaps];
	memset(c, 0, sizeof(*c));
	c->ipath = fx_strdup(n->ipath);
	if (!c->ipath)
		return -ENOMEM;
	c->ino = n->ino;
	c->is_file = n->kind == K_FILE;
	c->size = c->min_size = n->size;
	return (int)P->ncaps++;
}

/*
 * Save [off, off+len) of the initial data (len UINT64_MAX: to the end).
 * Ranges are appended, merged with the last one when they touch it (the
 * common sequential case), and sorted and merged once the plan is built
 * (sort_ranges), so a million small writes plan in O(n log n).
 */
static int cap_range(struct plan *P, int ci, uint64_t off, uint64_t len)
{
	struct fx_capture *c = &P->caps[ci];
	uint64_t end = len > c->size - (off < c->size ? off : c->size)
			       ? c->size : off + len;
	struct fx_range *last;
	int r;

	c->want_size = 1;
	if (off >= c->size || end <= off)
		return 0;
	last = c->nranges ? &c->ranges[c->nranges - 1] : NULL;
	if (last && off <= last->off + last->len && end >= last->off) {
		uint64_t e = last->off + last->len;

		if (off < last->off)
			last->off = off;
		last->len = (end > e ? end : e) - last->off;
		return 0;
	}
	if (last && off < last->off)
		c->unsorted = 1;
	r = fx_grow((void **)&c->ranges, &c->cranges, c->nranges + 1,
		 sizeof(*c->ranges));
	if (r < 0)
		return r;
	c->ranges[c->nranges++] = (struct fx_range){ off, end - off };
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	const struct fx_range *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Make every capture's ranges sorted and disjoint (journal.c needs it). */
static void sort_ranges(struct plan *P)
{
	for (size_t i = 0; i < P->ncaps; i++) {
		struct fx_capture *c = &P->caps[i];
		size_t n = 0;

		if (!c->unsorted)
			continue;
		qsort(c->ranges, c->nranges, sizeof(*c->ranges), range_cmp);
		for (size_t j = 1; j < c->nranges; j++) {
			struct fx_range *a = &c->ranges[n], *b = &c->ranges[j];

			if (b->off <= a->off + a->len) {
				uint64_t e = b->off + b->len;

				if (e > a->off + a->len)
					a->len = e - a->off;
			} else {
				c->ranges[++n] = *b;
			}
		}
		c->nranges = c->nranges ? n + 1 : 0;
		c->unsorted = 0;
	}
}

static int cap_xattr(struct plan *P, int ci, const char *name)
{
	struct fx_capture *c = &P->caps[ci];
	int r;

	for (size_t i = 0; i < c->nxnames; i++)
		if (!strcmp(c->xnames[i], name))
			return 0;
	r = fx_grow((void **)&c->xnames, &c->cxnames, c->nxnames + 1,
		 sizeof(*c->xnames));
	if (r < 0)
		return r;
	c->xnames[c->nxnames] = fx_strdup(name);
	if (!c->xnames[c->nxnames])
		return -ENOMEM;
	c->nxnames++;
	return 0;
}

/* ---- hard links ------------------------------------------------------ */

/*
 * A file with several names may have one outside the domain; changing its
 * data or xattrs in place would change that file too.  Before the first
 * change to a multiply-linked initial file, count its names beneath the
 * domain (not crossing mount points, not in .fstx) and refuse with EXDEV
 * unless they are all there.  The walk costs a stat per entry of the
 * domain, paid only for files whose st_nlink is above 1.
 */
#define LINK_SCAN_DEPTH 256

struct link_scan {
	uint64_t dev, ino, want, found;
	int depth;
};

static int count_link(int fd, const char *name, void *arg)
{
	struct link_scan *s = arg;
	struct stat st;
	int r, dfd;

	if (s->depth == 0 && !strcmp(name, FX_META))
		return 0;
	r = fx_os.fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if ((uint64_t)st.st_dev != s->dev)
		return 0; /* a mount point: not part of the domain */
	if (!S_ISDIR(st.st_mode))
		return (uint64_t)st.st_ino == s->ino && ++s->found >= s->want;
	if (s->depth >= LINK_SCAN_DEPTH)
		return -EXDEV; /* cannot prove the names are all inside */
	dfd = fx_os.openat2(fd, name, O_RDONLY | O_DIRECTORY, 0, FX_RESOLVE);
	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return dfd;
	s->depth++;
	r = fx_dir_each(dfd, count_link, s);
	s->depth--;
	fx_os.close(dfd);
	return r;
}

/* 0 if every name of capture ci's inode is in the domain, else -EXDEV. */
static int links_inside(struct plan *P, int ci, const struct node *n)
{
	struct fx_capture *c = &P->caps[ci];
	struct link_scan s = { 0, n->ino, n->nlink, 0, 0 };
	struct stat st;
	int fd, r;

	if (c->links_ok || n->kind == K_DIR || n->nlink <= 1)
		return 0;
	fd = fx_os.openat2(P->d->root, ".", O_RDONLY | O_DIRECTORY, 0, FX_RESOLVE);
	if (fd < 0)
		return fd;
	r = fx_os.fstat(fd, &st);
	if (r == 0) {
		s.dev = (uint64_t)st.st_dev;
		r = fx_dir_each(fd, count_link, &s);
	}
	fx_os.close(fd);
	if (r < 0)
		return r;
	if (s.found < s.want)
		return -EXDEV;
	c->links_ok = 1;
	return 0;
}

/* ---- per-op planning --------------------------------------------------- */

#define ARGP(op, i) ((const char *)(intptr_t)(op)->args[i])

/* Resolve the op's path and look it up.  <0: the op's predicted result. */
static int resolve(struct plan *P, struct pop *po, const char *path,
		   int follow, struct node *n, int second)
{
	char **out = second ? &po->cpath2 : &po->cpath;
	int r = canon(P, path, follow, out);

	memset(n, 0, sizeof(*n));
	return r < 0 ? r : lookup(P, *out, n);
}

/* The identity of n's object for pop.obj. */
static int64_t node_obj(const struct node *n)
{
	return n->state == N_INIT ? (int64_t)n->ino :
	       n->state == N_NEW ? -(int64_t)n->newid : 0;
}

int fx_plan_lookup(struct plan *P, const char *path, struct node *n,
		   char **cpath)
{
	int r = canon(P, path, 1, cpath);

	memset(n, 0, sizeof(*n));
	return r < 0 ? r : lookup(P, *cpath, n);
}

void fx_node_free(struct node *n)
{
	node_free(n);
}

/* The immutable and append-only flags (STATX_ATTR_*) of object n of the
 * tree (one remembered: most names change in one directory); -errno. */
static int flags_of(struct plan *P, const struct node *n)
{
	struct statx x;
	int r;

	if (P->lk_ino && P->lk_ino == n->ino && P->lk_dev == n->dev)
		return P->lk_attr;
	if ((r = fx_os.statx(P->d->root, *n->ipath ? n->ipath : ".", 0, &x)) < 0)
		return r == -ENOENT ? 0 : r;
	P->lk_ino = n->ino;
	P->lk_dev = n->dev;
	P->lk_attr = (int)(x.stx_attributes & x.stx_attributes_mask &
			   (STATX_ATTR_IMMUTABLE | STATX_ATTR_APPEND));
	return P->lk_attr;
}

/*
 * The kernel's EPERM where object n's flags refuse a change of its data,
 * size or xattrs, or of its names: immutable; append-only but for what
 * only adds (appends: an O_APPEND open; a new name in a directory).  A
 * new object has none.  0, -EPERM, -errno.
 */
static int data_refused(struct plan *P, const struct node *n, int appends)
{
	int a = n->state == N_INIT ? flags_of(P, n) : 0;

	if (a < 0)
		return a;
	return (a & STATX_ATTR_IMMUTABLE) || (!appends && (a & STATX_ATTR_APPEND)) ? -EPERM : 0;
}

/*
 * The kernel's EPERM where flags refuse a name change (chattr +i, +a; to
 * root too): object n (NULL: none) renamed, removed or replaced while
 * immutable or append-only; a name added in an immutable directory
 * (add), or removed from one that is immutable or append-only.  The
 * undo way could not take back a name it put in an append-only
 * directory, and the log must not meet the refusal after its barrier
 * (wal.c W23), so no transaction runs into it.  0, -EPERM, -errno.
 */
static int flags_refuse(struct plan *P, const char *p, const struct node *n, int add)
{
	char dir[PATH_MAX];
	struct node pn;
	int r;

	if (n && (r = data_refused(P, n, 0)) < 0)
		return r;
	if ((r = lookup(P, fx_dirname(p, dir), &pn)) < 0)
		return r;
	r = data_refused(P, &pn, add);
	node_free(&pn);
	return r;
}

/* Make p a new object of kind made in staging by step kind. *//* Make p a new object of kind made in staging by step kind. */
static int plan_create(struct plan *P, size_t i, const char *p, int kind,
		       uint32_t stkind, uint32_t mode, const char *src,
		       const char *aux)
{
	struct node n = { .state = N_NEW, .kind = kind, .newid = ++P->newid, .mode = mode };
	char tmp[64];
	int r;

	if ((r = flags_refuse(P, p, NULL, 1)) < 0)
		return r;
	scratch(tmp, sizeof(tmp), FX_NEW, i);
	if ((r = add_step(P, i, stkind, mode, src, tmp, aux)) < 0)
		return r;
	step_id(P, &n);
	if ((r = add_step(P, i, FX_ST_MOVE, 0, tmp, p, NULL)) < 0)
		return r;
	step_id(P, &n);
	if (aux) {
		n.target = fx_strdup(aux);
		if (!n.target)
			return -ENOMEM;
	}
	return set_ent(P, p, &n);
}

static int plan_trash(struct plan *P, size_t i, const char *p,
		      const struct node *n)
{
	char tmp[64];
	int r;

	scratch(tmp, sizeof(tmp), FX_TRASH, i);
	if ((r = add_step(P, i, FX_ST_MOVE, 0, p, tmp, NULL)) < 0)
		return r;
	step_id(P, n);
	drop_under(P, p);
	return set_absent(P, p);
}

static int plan_open(struct plan *P, size_t i, struct pop *po)
{
	const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];
	int flags = (int)op->args[1], acc = flags & O_ACCMODE, r, ci;
	struct pslot *s = &P->slots[op->args[3]];
	struct node n;

	s->live = 0;
	r = resolve(P, po, ARGP(op, 0), !(flags & O_NOFOLLOW), &n, 0);
	if (r < 0)
		goto out;
	if (n.state == N_ABSENT) {
		r = -ENOENT;
		if (flags & O_CREAT) {
			po->create = 1;
			r = plan_create(P, i, po->cpath, K_FILE, FX_ST_MKFILE,
					(uint32_t)op->args[2] & 07777, NULL, NULL);
			po->obj = -(int64_t)P->newid;
			*s = (struct pslot){ .live = 1, .kind = K_FILE, .cap = -1,
					     .append = !!(flags & O_APPEND),
					     .obj = po->obj };
		}
		goto out;
	}
	r = -EEXIST;
	if ((flags & O_CREAT) && (flags & O_EXCL))
		goto out;
	r = n.kind == K_LINK ? -ELOOP : n.kind == K_OTHER ? -EPERM : 0;
	if (!r && n.kind == K_DIR && (acc != O_RDONLY || (flags & (O_TRUNC | O_CREAT))))
		r = -EISDIR;
	if (!r && (flags & O_DIRECTORY) && n.kind != K_DIR)
		r = -ENOTDIR;
	if (!r && (acc != O_RDONLY || (flags & O_TRUNC)))
		r = data_refused(P, &n, (flags & O_APPEND) && !(flags & O_TRUNC));
	if (r)
		goto out;
	po->obj = node_obj(&n);
	*s = (struct pslot){ .live = 1, .kind = n.kind, .cap = -1,
			     .append = !!(flags & O_APPEND), .obj = po->obj };
	if (n.state == N_INIT) {
		po->check_ino = 1;
		po->ino = n.ino;
		po->dev = n.dev;
		if ((ci = cap_of(P, &n)) < 0) {
			r = ci;
			goto out;
		}
		s->cap = ci;
		if ((acc != O_RDONLY || (flags & O_TRUNC)) &&
		    (r = links_inside(P, ci, &n)) < 0)
			goto out;
		if ((flags & O_TRUNC) && n.kind == K_FILE) {
			r = cap_range(P, ci, 0, UINT64_MAX);
			P->caps[ci].min_size = 0;
		}
	}
out:
	node_free(&n);
	return r;
}

/* Data of the file in slot idx may change in [off, off+len). */
static int plan_write(struct plan *P, int64_t idx, uint64_t off, uint64_t len)
{
	struct pslot *s = &P->slots[idx];
	struct fx_capture *c;

	P->est_bytes += len == UINT64_MAX ? 0 : len;
	if (!s->live || s->cap < 0 || s->kind != K_FILE)
		return 0;
	c = &P->caps[s->cap];
	if (s->append) /* lands at the current end, which may be below size */
		return cap_range(P, s->cap, c->min_size, UINT64_MAX);
	return cap_range(P, s->cap, off, len);
}

/*
 * The kernel's refusal of an xattr name (fs/xattr.c): an empty name or one
 * longer than XATTR_NAME_MAX is ERANGE, whatever the file; a namespace's
 * prefix with nothing after it is refused by every handler, but only
 * after the permission checks, so the caller gets EPERM (trusted. or
 * security. without CAP_SYS_ADMIN, an immutable file) or EACCES (user. on
 * a file it may not write) before EINVAL.  The kernel is asked: a removal
 * of that same bare name, which no handler can carry out, from the file
 * of the tree (for a new object, trusted. and security. from the domain's
 * root, whose answer depends on the caller's capability only).  Predicted,
 * so that the undo way does not read a before-image under it (which
 * failed the whole transaction, also for an op allowed to fail) and the
 * log agrees.  user. on a new object is not predicted (0): the answer
 * depends on the mode it is made with (EACCES without the owner's write
 * bit); nothing is read before it, and it runs the undo way (trans.c
 * wal_fit()).  cli.bats "run without privilege".
 */
static int xattr_name_error(struct plan *P, const char *name, const struct node *n)
{
	static const char *const ns[] = { "user.", "trusted.", "security." };
	size_t len = strlen(name), k;
	int fd, r = -EINVAL;

	if (len == 0 || len > 255)
		return -ERANGE;
	for (k = 0; k < sizeof(ns) / sizeof(ns[0]) && strcmp(name, ns[k]); k++)
		;
	if (k == sizeof(ns) / sizeof(ns[0]))
		return 0;
	if (n->state == N_INIT)
		fd = fx_open(P->d, n->ipath, O_RDONLY | O_NONBLOCK | O_NOFOLLOW, 0);
	else if (k > 0)
		fd = fx_open(P->d, "", O_RDONLY | O_DIRECTORY, 0);
	else
		return 0;
	if (fd >= 0) {
		r = fx_os.fremovexattr(fd, name);
		fx_os.close(fd);
	}
	return r == -EPERM || r == -EACCES ? r : -EINVAL;
}

/* Path ops on data or xattrs: truncate, setxattr, removexattr. */
static int plan_pathdata(struct plan *P, size_t i, struct pop *po)
{
	const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];
	struct node n;
	int r = resolve(P, po, ARGP(op, 0), 1, &n, 0), ci;

	if (r < 0)
		goto out;
	r = n.state == N_ABSENT ? -ENOENT : n.kind == K_OTHER ? -EPERM : 0;
	if (!r && op->op == BTRFS_IOC_UT_OP_TRUNCATE && n.kind == K_DIR)
		r = -EISDIR;
	if (!r && op->op != BTRFS_IOC_UT_OP_TRUNCATE)
		r = xattr_name_error(P, ARGP(op, 1), &n);
	if (!r)
		r = data_refused(P, &n, 0);
	if (!r)
		po->obj = node_obj(&n);
	if (r || n.state != N_INIT)
		goto out;
	if ((ci = cap_of(P, &n)) < 0) {
		r = ci;
		goto out;
	}
	if ((r = links_inside(P, ci, &n)) < 0)
		goto out;
	if (op->op == BTRFS_IOC_UT_OP_TRUNCATE) {
		struct fx_capture *c = &P->caps[ci];
		uint64_t size = (uint64_t)op->args[1];

		r = cap_range(P, ci, size, UINT64_MAX);
		if (size < c->min_size)
			c->min_size = size;
	} else {
		r = cap_xattr(P, ci, ARGP(op, 1));
	}
out:
	node_free(&n);
	return r;
}

static int plan_remove(struct plan *P, size_t i, struct pop *po, int dir)
{
	struct node n;
	int r = resolve(P, po, ARGP(&P->ops[i], 0), 0, &n, 0);

	if (r < 0)
		goto out;
	if (!*po->cpath)
		r = dir ? -EBUSY : -EISDIR;
	else if (n.state == N_ABSENT)
		r = -ENOENT;
	else if (dir && n.kind != K_DIR)
		r = -ENOTDIR;
	else if (!dir && n.kind == K_DIR)
		r = -EISDIR;
	else if (dir && (r = dir_empty(P, po->cpath, &n)) <= 0)
		r = r < 0 ? r : -ENOTEMPTY;
	else if ((r = flags_refuse(P, po->cpath, &n, 0)) == 0)
		r = plan_trash(P, i, po->cpath, &n);
out:
	node_free(&n);
	return r;
}

/* mkdir, symlink, link: a new name that must not exist. */
static int plan_newname(struct plan *P, size_t i, struct pop *po)
{
	const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];
	int patharg = op->op == BTRFS_IOC_UT_OP_MKDIR ? 0 : 1;
	struct node n, old = { 0 };
	int r;

	if (op->op == BTRFS_IOC_UT_OP_LINK) {
		r = resolve(P, po, ARGP(op, 0), 0, &old, 1);
		if (r < 0)
			goto out0;
		r = old.state == N_ABSENT ? -ENOENT : old.kind == K_DIR ? -EPERM : 0;
		if (r < 0)
			goto out0;
	}
	r = resolve(P, po, ARGP(op, patharg), 0, &n, 0);
	if (r < 0)
		goto out;
	r = -EEXIST;
	if (!*po->cpath || n.state != N_ABSENT)
		goto out;
	if (op->op == BTRFS_IOC_UT_OP_MKDIR) {
		r = plan_create(P, i, po->cpath, K_DIR, FX_ST_MKDIR,
				(uint32_t)op->args[1] & 07777, NULL, NULL);
	} else if (op->op == FSTX_OP_SYMLINK) {
		const char *t = ARGP(op, 0);

		r = !*t ? -ENOENT : strlen(t) >= PATH_MAX ? -ENAMETOOLONG
			: plan_create(P, i, po->cpath, K_LINK, FX_ST_SYMLINK, 0,
				      NULL, t);
	} else {
		char tmp[64];

		scratch(tmp, sizeof(tmp), FX_NEW, i);
		if ((r = data_refused(P, &old, 0)) < 0 || /* vfs_link(): its own flags */
		    (r = flags_refuse(P, po->cpath, NULL, 1)) < 0 ||
		    (r = add_step(P, i, FX_ST_LINK, 0, po->cpath2, tmp, NULL)) < 0 ||
		    (r = add_step(P, i, FX_ST_MOVE, 0, tmp, po->cpath, NULL)) < 0)
			goto out;
		step_id(P, &old);
		r = set_ent(P, po->cpath, &old);
		memset(&old, 0, sizeof(old));
	}
out:
	node_free(&n);
out0:
	node_free(&old);
	return r;
}

static int same_object(const struct node *a, const struct node *b)
{
	if (a->state != b->state || a->state == N_ABSENT)
		return 0;
	return a->state == N_INIT ? a->ino == b->ino : a->newid == b->newid;
}

/* The overlay after a rename of old to new (new absent or trashed). */
static int move_node(struct plan *P, const char *old, const char *new,
		     struct node *n)
{
	int r;

	drop_under(P, new);
	if ((r = move_under(P, old, new)) < 0)
		return r;
	if ((r = set_ent(P, new, n)) < 0)
		return r;
	memset(n, 0, sizeof(*n));
	return set_absent(P, old);
}

static int plan_exchange(struct plan *P, size_t i, const char *a,
			 const char *b, struct node *na, struct node *nb)
{
	char tmp[64];
	int r;

	scratch(tmp, sizeof(tmp), FX_NEW, i);
	if ((r = add_step(P, i, FX_ST_MOVE, 0, a, tmp, NULL)) < 0)
		return r;
	step_id(P, na);
	if ((r = add_step(P, i, FX_ST_MOVE, 0, b, a, NULL)) < 0)
		return r;
	step_id(P, nb);
	if ((r = add_step(P, i, FX_ST_MOVE, 0, tmp, b, NULL)) < 0)
		return r;
	step_id(P, na);
	if ((r = move_under(P, a, "\x01")) < 0 || (r = move_under(P, b, a)) < 0 ||
	    (r = move_under(P, "\x01", b)) < 0 || (r = set_ent(P, a, nb)) < 0)
		return r;
	memset(nb, 0, sizeof(*nb));
	r = set_ent(P, b, na);
	memset(na, 0, sizeof(*na));
	return r;
}

static int plan_rename(struct plan *P, size_t i, struct pop *po)
{
	const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];
	unsigned int flags = (unsigned int)op->args[2];
	struct node no = { 0 }, nn = { 0 };
	const char *o, *nw;
	int r;

	/* cpath2 = old, cpath = new (the name the op produces). */
	if ((r = resolve(P, po, ARGP(op, 0), 0, &no, 1)) < 0 ||
	    (r = resolve(P, po, ARGP(op, 1), 0, &nn, 0)) < 0)
		goto out;
	o = po->cpath2;
	nw = po->cpath;
	if (!*o || !*nw)
		r = -EBUSY;
	else if (no.state == N_ABSENT)
		r = -ENOENT;
	else if (!strcmp(o, nw))
		r = 0;
	else if (under(nw, o, 0) || ((flags & RENAME_EXCHANGE) && under(o, nw, 0)))
		r = -EINVAL;
	else if ((flags & RENAME_EXCHANGE) && nn.state != N_ABSENT && same_object(&no, &nn))
		r = 0; /* two names of one object: vfs_rename() does nothing */
	else if (flags & RENAME_EXCHANGE)
		r = nn.state == N_ABSENT ? -ENOENT :
		    (r = flags_refuse(P, o, &no, 0)) < 0 || (r = flags_refuse(P, nw, &nn, 0)) < 0 ?
		    r : plan_exchange(P, i, o, nw, &no, &nn);
	else if (nn.state != N_ABSENT && (flags & RENAME_NOREPLACE))
		r = -EEXIST;
	else if (nn.state != N_ABSENT && same_object(&no, &nn))
		r = 0;
	else if (nn.state != N_ABSENT && no.kind == K_DIR && nn.kind != K_DIR)
		r = -ENOTDIR;
	else if (nn.state != N_ABSENT && no.kind != K_DIR && nn.kind == K_DIR)
		r = -EISDIR;
	else if (nn.state != N_ABSENT && nn.kind == K_DIR &&
		 (r = dir_empty(P, nw, &nn)) <= 0)
		r = r < 0 ? r : -P->d->fs.enotempty;
	else if ((r = flags_refuse(P, o, &no, 0)) < 0 ||
		 (r = flags_refuse(P, nw, nn.state != N_ABSENT ? &nn : NULL,
				   nn.state == N_ABSENT)) < 0)
		; /* EPERM: the flags of an object or a directory refuse it */
	else {
		if (nn.state != N_ABSENT && (r = plan_trash(P, i, nw, &nn)) < 0)
			goto out;
		r = add_step(P, i, FX_ST_MOVE, 0, o, nw, NULL);
		if (r == 0)
			step_id(P, &no);
		if (r == 0)
			r = move_node(P, o, nw, &no);
	}
out:
	node_free(&no);
	node_free(&nn);
	return r;
}

/* Errors that are an op's own result, as the kernel would give it. */
static int semantic(int r)
{
	switch (-r) {
	case ENOENT: case ENOTDIR: case EEXIST: case EISDIR: case ENOTEMPTY:
	case EBUSY: case EINVAL: case EXDEV: case EPERM: case ELOOP:
	case ENAMETOOLONG: case EACCES: case EBADF: /* a slot not open */
	case ERANGE: /* an xattr name */
		return 1;
	}
	return 0;
}

static int plan_op(struct plan *P, size_t i)
{
	const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];
	struct pop *po = &P->pops[i];
	int r = 0;

	po->step0 = P->nsteps;
	switch (op->op) {
	case BTRFS_IOC_UT_OP_OPEN:
		r = plan_open(P, i, po);
		break;
	case BTRFS_IOC_UT_OP_CLOSE:
		r = P->slots[op->args[0]].live ? 0 : -EBADF;
		P->slots[op->args[0]].live = 0;
		break;
	case BTRFS_IOC_UT_OP_PWRITE:
		if (!P->slots[op->args[0]].live) { /* its open failed, or closed */
			r = -EBADF;
			break;
		}
		po->obj = P->slots[op->args[0]].obj;
		po->append = P->slots[op->args[0]].append;
		r = plan_write(P, op->args[0], (uint64_t)op->args[3],
			       (uint64_t)op->args[2]);
		break;
	case BTRFS_IOC_UT_OP_CLONERANGE:
		if (!P->slots[op->args[0]].live || !P->slots[op->args[1]].live) {
			r = -EBADF;
			break;
		}
		po->obj = P->slots[op->args[0]].obj;
		r = plan_write(P, op->args[0], (uint64_t)op->args[4],
			       op->args[3] ? (uint64_t)op->args[3] : UINT64_MAX);
		break;
	case BTRFS_IOC_UT_OP_UNLINK:
	case BTRFS_IOC_UT_OP_RMDIR:
		r = plan_remove(P, i, po, op->op == BTRFS_IOC_UT_OP_RMDIR);
		break;
	case BTRFS_IOC_UT_OP_LINK:
	case BTRFS_IOC_UT_OP_MKDIR:
	case FSTX_OP_SYMLINK:
		r = plan_newname(P, i, po);
		break;
	case BTRFS_IOC_UT_OP_TRUNCATE:
	case BTRFS_IOC_UT_OP_SETXATTR:
	case BTRFS_IOC_UT_OP_REMOVEXATTR:
		r = plan_pathdata(P, i, po);
		break;
	case FSTX_OP_RENAME:
		r = plan_rename(P, i, po);
		break;
	}
	po->nsteps = P->nsteps - po->step0;
	if (r < 0 && !semantic(r))
		return r; /* EIO, ENOMEM, ...: the plan cannot be trusted */
	po->pred = r < 0 ? r : 0;
	return 0;
}

/* ---- compare ops ------------------------------------------------------ */

/* Does file fd hold exactly len bytes equal to want? 1, 0 or -errno. */
static int same_data(int fd, const unsigned char *want, uint64_t len)
{
	unsigned char buf[8192];
	struct stat st;
	uint64_t off = 0;
	int r = fx_os.fstat(fd, &st);

	if (r < 0)
		return r;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != len)
		return 0;
	while (off < len) {
		size_t n = len - off > sizeof(buf) ? sizeof(buf) : (size_t)(len - off);
		ssize_t got = fx_os.pread(fd, buf, n, (off_t)off);

		if (got < 0)
			return (int)got;
		if (got == 0 || memcmp(buf, want + off, (size_t)got))
			return 0;
		off += (uint64_t)got;
	}
	return 1;
}

static int same_xattr(int fd, const char *name, const void *want, size_t len)
{
	char *buf = fx_malloc(FSTX_MAX_XATTR + 1);
	ssize_t got;

	if (!buf)
		return -ENOMEM;
	got = fx_os.fgetxattr(fd, name, buf, FSTX_MAX_XATTR + 1);
	if (got >= 0)
		got = (size_t)got == len && !memcmp(buf, want, len);
	else if (got == -ENODATA)
		got = 0;
	free(buf);
	return (int)got;
}

/* 1 if compare op i holds in the initial tree, 0 if not, or -errno. */
static int check_assert(struct plan *P, size_t i)
{
	const struct btrfs_ioctl_usertrans_op *op = &P->ops[i];
	int follow = op->op == FSTX_OP_ASSERT_DATA || op->op == FSTX_OP_ASSERT_XATTR;
	struct node n;
	int r = resolve(P, &P->pops[i], ARGP(op, 0), follow, &n, 0), fd;

	if (r == -ENOENT || r == -ENOTDIR) { /* a component is missing */
		r = 0;
		n.state = N_ABSENT;
	}
	if (r < 0)
		goto out;
	switch (op->op) {
	case FSTX_OP_ASSERT_ABSENT:
		r = n.state == N_ABSENT;
		goto out;
	case FSTX_OP_ASSERT_EXISTS:
		r = n.state != N_ABSENT;
		goto out;
	}
	r = 0;
	if (n.state == N_ABSENT || n.kind == K_OTHER || n.kind == K_LINK)
		goto out;
	fd = fx_open(P->d, P->pops[i].cpath, O_RDONLY | O_NOFOLLOW, 0);
	if (fd < 0) {
		r = fd;
		goto out;
	}
	if (op->op == FSTX_OP_ASSERT_DATA)
		r = same_data(fd, (const void *)(intptr_t)op->args[1],
			      (uint64_t)op->args[2]);
	else
		r = same_xattr(fd, ARGP(op, 1), (const void *)(intptr_t)op->args[2],
			       (size_t)op->args[3]);
	fx_os.close(fd);
out:
	node_free(&n);
	return r;
}

/*
 * Every compare op, against the initial tree (the overlay is still empty),
 * before anything else is planned: the first that fails stops the plan
 * with -ECANCELED, one that cannot be evaluated with its errno.
 */
static int check_asserts(struct plan *P)
{
	for (size_t i = 0; i < P->nops; i++) {
		int r;

		if (!fx_op_is_assert(P->ops[i].op))
			continue;
		r = check_assert(P, i);
		if (r <= 0) {
			P->failed_op = (long)i;
			return r < 0 ? r : -ECANCELED;
		}
	}
	return 0;
}

int fx_plan_build(struct plan *P)
{
	int r;

	P->pops = fx_calloc(P->nops ? P->nops : 1, sizeof(*P->pops));
	P->slots = fx_calloc(P->nfds ? P->nfds : FSTX_MAX_FDS, sizeof(*P->slots));
	if (!P->pops || !P->slots)
		return -ENOMEM;
	P->failed_op = -1;
	if ((r = check_asserts(P)) < 0)
		return r;
	for (size_t i = 0; i < P->nops; i++)
		if ((r = plan_op(P, i)) < 0) {
			P->failed_op = (long)i;
			return r;
		}
	sort_ranges(P);
	return 0;
}

void fx_plan_free(struct plan *P)
{
	for (size_t i = 0; P->memo && i < P->nmemo; i++) {
		free(P->memo[i].ip);
		node_free(&P->memo[i].n);
	}
	free(P->memo);
	P->memo = NULL;
	for (size_t i = 0; i < P->nents; i++) {
		free(P->ents[i].path);
		node_free(&P->ents[i].n);
	}
	for (size_t i = 0; i < P->nsteps; i++) {
		free(P->steps[i].src);
		free(P->steps[i].dst);
		free(P->steps[i].aux);
	}
	for (size_t i = 0; i < P->ncaps; i++) {
		free(P->caps[i].ipath);
		free(P->caps[i].ranges);
		for (size_t x = 0; x < P->caps[i].nxnames; x++)
			free(P->caps[i].xnames[x]);
		free(P->caps[i].xnames);
	}
	if (P->pops)
		for (size_t i = 0; i < P->nops; i++) {
			free(P->pops[i].cpath);
			free(P->pops[i].cpath2);
		}
	free(P->ents);
	free(P->hidx);
	free(P->steps);
	free(P->caps);
	free(P->pops);
	free(P->slots);
}

/*
 * Directory par as it was before the steps up to k moved it (one of the
 * tree renamed, or a new one renamed on from its staged name): the kernel
 * gives the group of the directory, wherever it was.  Into buf; par
 * itself past PATH_MAX.
 */
static const char *par_before(const struct plan *P, size_t k, const char *par,
			      char buf[PATH_MAX])
{
	for (size_t j = k; j-- > 0;) {
		const struct fx_step *s = &P->steps[j];
		size_t n = strlen(s->dst), a, b;

		if (s->kind != FX_ST_MOVE || strncmp(par, s->dst, n) || (par[n] && par[n] != '/'))
			continue;
		a = strlen(s->src);
		b = strlen(par + n);
		if (a + b >= PATH_MAX)
			return par;
		memmove(buf + a, par + n, b + 1); /* par may be buf */
		memcpy(buf, s->src, a);
		par = buf;
	}
	return par;
}

const char *fx_new_parent(const struct plan *P, size_t k, char buf[PATH_MAX])
{
	const struct fx_step *mv = k + 1 < P->nsteps ? &P->steps[k + 1] : NULL;

	if (!mv || mv->kind != FX_ST_MOVE || strcmp(mv->src, P->steps[k].dst))
		return NULL;
	return fx_dirname(mv->dst, buf);
}

long fx_new_group(struct fstx_domain *d, const struct plan *P, size_t k, const long *gids)
{
	char par[PATH_MAX], buf[PATH_MAX];
	const char *p;

	if (!fx_new_parent(P, k, par))
		return -1;
	/* the directory there then: of the tree, or a new one by the name
	 * it was made under in .fstx/new/ (whatever renamed it since, and
	 * not one that has left that name for another to take) */
	p = par_before(P, k, par, buf);
	for (size_t j = 0; j < k; j++)
		if (P->steps[j].kind == FX_ST_MKDIR && !strcmp(P->steps[j].dst, p))
			return P->steps[j].newid > 0 && P->steps[j].newid <= P->newid ?
			       gids[P->steps[j].newid] : -1;
	return fx_setgid_group(d, p);
}

const char *fx_dir_before(const struct plan *P, size_t k, const char *par, char buf[PATH_MAX])
{
	return par_before(P, k, par, buf);
}

long fx_tree_group(struct fstx_domain *d, const struct plan *P, size_t k, const char *par)
{
	char buf[PATH_MAX];

	return fx_setgid_group(d, par_before(P, k, par, buf));
}
