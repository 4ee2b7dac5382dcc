/*
 * pend.c: the pending group of one connection (see pend.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pend.h"

static size_t slot_of(int64_t off, size_t hcap)
{
	uint64_t x = (uint64_t)off * 0x9E3779B97F4A7C15ull;
	return (size_t)(x >> 20) & (hcap - 1);
}

/* Uniform mode: the entry at exactly off, or -1. */
static long hash_find(const struct pend *p, int64_t off)
{
	if (!p->hcap)
		return -1;
	for (size_t s = slot_of(off, p->hcap);; s = (s + 1) & (p->hcap - 1)) {
		size_t h = p->hash[s];
		if (!h)
			return -1;
		if (p->v[h - 1].off == off)
			return (long)(h - 1);
	}
}

static int hash_rebuild(struct pend *p, size_t hcap)
{
	size_t *h = calloc(hcap, sizeof(*h));
	if (!h)
		return -ENOMEM;
	free(p->hash);
	p->hash = h;
	p->hcap = hcap;
	for (size_t i = 0; i < p->n; i++) {
		size_t s = slot_of(p->v[i].off, hcap);
		while (h[s])
			s = (s + 1) & (hcap - 1);
		h[s] = i + 1;
	}
	return 0;
}

void pend_begin(struct pend *p, int64_t base)
{
	if (p->active)
		return;
	p->active = true;
	p->uniform = true;
	p->truncated = false;
	p->plen = 0;
	p->base_size = base;
	p->min_trunc = base;
	p->lsize = base;
	p->bytes = 0;
}

int pend_write(struct pend *p, const void *buf, int64_t len, int64_t off)
{
	if (len <= 0)
		return 0;
	if (p->uniform) {
		if (!p->plen && off % len == 0)
			p->plen = len;
		if (len == p->plen && off % len == 0) {
			long i = hash_find(p, off);
			if (i >= 0) {
				memcpy(p->v[i].data, buf, (size_t)len);
				goto done;
			}
		} else {
			p->uniform = false; /* general mode from here on */
		}
	}
	if (p->n == p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 64;
		struct pent *nv = realloc(p->v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		p->v = nv;
		p->cap = nc;
	}
	unsigned char *d = malloc((size_t)len);
	if (!d)
		return -ENOMEM;
	memcpy(d, buf, (size_t)len);
	p->v[p->n++] = (struct pent){.off = off, .len = len, .data = d};
	p->bytes += len;
	if (p->uniform) {
		if (p->n * 2 > p->hcap) {
			if (hash_rebuild(p, p->hcap ? p->hcap * 2 : 256) < 0) {
				free(d);
				p->n--;
				p->bytes -= len;
				return -ENOMEM;
			}
		} else {
			size_t s = slot_of(off, p->hcap);
			while (p->hash[s])
				s = (s + 1) & (p->hcap - 1);
			p->hash[s] = p->n;
		}
	}
done:
	if (off + len > p->lsize)
		p->lsize = off + len;
	return 0;
}

void pend_truncate(struct pend *p, int64_t size)
{
	size_t k = 0;
	for (size_t i = 0; i < p->n; i++) {
		struct pent *e = &p->v[i];
		if (e->off >= size) {
			p->bytes -= e->len;
			free(e->data);
			continue;
		}
		if (e->off + e->len > size) {
			p->bytes -= e->off + e->len - size;
			e->len = size - e->off;
			p->uniform = false;
		}
		p->v[k++] = *e;
	}
	p->n = k;
	/* Indices moved: rebuild the hash, or fall back to general mode. */
	if (p->uniform && p->hcap && hash_rebuild(p, p->hcap) < 0)
		p->uniform = false;
	if (!p->uniform) {
		free(p->hash);
		p->hash = NULL;
		p->hcap = 0;
	}
	p->truncated = true;
	if (size < p->min_trunc)
		p->min_trunc = size;
	p->lsize = size;
}

int64_t pend_read(const struct pend *p, void *buf, int64_t len, int64_t off,
		  int64_t (*base_read)(void *ctx, void *buf, int64_t n, int64_t off), void *ctx)
{
	unsigned char *b = buf;
	/* Below the group: the file up to its size, or up to the smallest size
	 * the group truncated to (past that, truncation left zeros). */
	int64_t base_end = p->truncated && p->min_trunc < p->base_size ? p->min_trunc : p->base_size;
	int64_t got = 0;
	if (off < base_end) {
		int64_t n = base_end - off < len ? base_end - off : len;
		got = base_read(ctx, b, n, off);
		if (got < 0)
			return got;
	}
	memset(b + got, 0, (size_t)(len - got));
	if (p->uniform && p->plen == len && off % len == 0) {
		long i = hash_find(p, off);
		if (i >= 0)
			memcpy(b, p->v[i].data, (size_t)len);
	} else {
		for (size_t i = 0; i < p->n; i++) {
			const struct pent *e = &p->v[i];
			int64_t lo = e->off > off ? e->off : off;
			int64_t hi = e->off + e->len < off + len ? e->off + e->len : off + len;
			if (lo < hi)
				memcpy(b + (lo - off), e->data + (lo - e->off), (size_t)(hi - lo));
		}
	}
	int64_t valid = p->lsize - off;
	return valid < 0 ? 0 : valid < len ? valid : len;
}

const unsigned char *pend_page(const struct pend *p, int64_t off)
{
	long i = p->uniform ? hash_find(p, off) : -1;
	return i >= 0 ? p->v[i].data : NULL;
}

struct okey {
	int64_t off;
	size_t i;
};

static int cmp_okey(const void *a, const void *b)
{
	int64_t x = ((const struct okey *)a)->off, y = ((const struct okey *)b)->off;
	return x < y ? -1 : x > y;
}

size_t *pend_order(const struct pend *p)
{
	size_t *o = malloc((p->n ? p->n : 1) * sizeof(*o));
	if (!o)
		return NULL;
	for (size_t i = 0; i < p->n; i++)
		o[i] = i;
	if (!p->uniform || p->n < 2)
		return o; /* general mode: write order, so that a later write wins */
	/* Uniform mode has no overlaps: offset order gives sequential home
	 * writes and lets adjacent pages merge into one range. */
	struct okey *t = malloc(p->n * sizeof(*t));
	if (!t) {
		free(o);
		return NULL;
	}
	for (size_t i = 0; i < p->n; i++)
		t[i] = (struct okey){.off = p->v[i].off, .i = i};
	qsort(t, p->n, sizeof(*t), cmp_okey);
	for (size_t i = 0; i < p->n; i++)
		o[i] = t[i].i;
	free(t);
	return o;
}

void pend_clear(struct pend *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i].data);
	free(p->v);
	free(p->hash);
	memset(p, 0, sizeof(*p));
}
