/*
 * hist.c: a log-linear latency histogram (as HdrHistogram): 64 linear
 * sub-buckets per power of two, so any value is kept within 1/64 of itself,
 * in fixed memory whatever the run length.
 */
#include <math.h>
#include <string.h>

#include "bench.h"

void hist_reset(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

static unsigned bucket_of(uint64_t v)
{
	if (v >= (1ull << HIST_MAX_EXP))
		v = (1ull << HIST_MAX_EXP) - 1;
	if (v < HIST_SUB)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= HIST_SUB_BITS */
	unsigned sub = (unsigned)(v >> (e - HIST_SUB_BITS)) - HIST_SUB;
	return (e - HIST_SUB_BITS + 1) * HIST_SUB + sub;
}

void hist_bucket(unsigned i, uint64_t *lo, uint64_t *width)
{
	if (i < HIST_SUB) {
		*lo = i;
		*width = 1;
		return;
	}
	unsigned g = i / HIST_SUB, s = i % HIST_SUB;
	unsigned e = g + HIST_SUB_BITS - 1;
	*width = 1ull << (e - HIST_SUB_BITS);
	*lo = (uint64_t)(HIST_SUB + s) << (e - HIST_SUB_BITS);
}

void hist_add(struct hist *h, uint64_t ns)
{
	h->b[bucket_of(ns)]++;
	h->count++;
	h->sum += (double)ns;
	if (ns < h->min)
		h->min = ns;
	if (ns > h->max)
		h->max = ns;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	for (unsigned i = 0; i < HIST_N; i++)
		dst->b[i] += src->b[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->count && src->min < dst->min)
		dst->min = src->min;
	if (src->count && src->max > dst->max)
		dst->max = src->max;
}

double hist_quantile(const struct hist *h, double q)
{
	if (!h->count)
		return NAN;
	/* The smallest value v with at least q of the samples <= v (nearest
	 * rank); reported as its bucket's midpoint, clamped to the seen range. */
	uint64_t rank = (uint64_t)ceil(q * (double)h->count);
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < HIST_N; i++) {
		seen += h->b[i];
		if (seen >= rank) {
			uint64_t lo, w;
			hist_bucket(i, &lo, &w);
			double v = (double)lo + (double)(w - 1) / 2.0;
			if (v < (double)h->min)
				v = (double)h->min;
			if (v > (double)h->max)
				v = (double)h->max;
			return v;
		}
	}
	return (double)h->max;
}
