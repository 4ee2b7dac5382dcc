/*
 * workload.h: a deterministic random workload of groups over up to 3 files
 * (writes of 1 byte to tens of KiB, overlapping or not, size changes), so
 * that a child process and the parent's model produce the same groups from
 * the same seed.
 */
#ifndef ATOMIO_WORKLOAD_H
#define ATOMIO_WORKLOAD_H

#include "model.h"

struct rng {
	uint64_t s;
};

static inline uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static inline uint64_t rng_below(struct rng *r, uint64_t n) { return n ? rng_next(r) % n : 0; }

#define W_MAXOPS 8
struct wop {
	int file;      /* index 0..nfiles-1 */
	int truncate;  /* 1 = size change */
	uint64_t off;  /* write offset or new size */
	size_t len;
	uint32_t tag;
};

struct wgroup {
	int nops;
	struct wop op[W_MAXOPS];
	int abort; /* built, then aborted */
};

/* The groups' bytes: t_fill's (incompressible), or with w_fill_run >= 2 in
 * runs of that many equal bytes, still a function of (tag, offset), which
 * LZ4 compresses (records stored compressed, issue 7). */
static __thread unsigned w_fill_run; /* per thread: t_crash_kill's threads differ */

static inline void w_fill(void *buf, size_t len, uint32_t tag, uint64_t off)
{
	if (w_fill_run < 2) {
		t_fill(buf, len, tag, off);
		return;
	}
	uint8_t *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = t_byte(tag, (off + i) / w_fill_run);
}

/* Group g of the workload 'seed'; max_bytes bounds its data. */
static inline void w_group(uint64_t seed, int g, int nfiles, size_t max_bytes, struct wgroup *wg)
{
	struct rng r = {seed * 1000003ull + (uint64_t)g};
	memset(wg, 0, sizeof(*wg));
	wg->nops = 1 + (int)rng_below(&r, W_MAXOPS);
	wg->abort = rng_below(&r, 16) == 0;
	size_t budget = max_bytes;
	for (int i = 0; i < wg->nops; i++) {
		struct wop *o = &wg->op[i];
		o->file = (int)rng_below(&r, (uint64_t)nfiles);
		o->tag = (uint32_t)(g * W_MAXOPS + i + 1);
		if (rng_below(&r, 12) == 0) {
			o->truncate = 1;
			o->off = rng_below(&r, 300000);
			continue;
		}
		uint64_t kind = rng_below(&r, 4);
		size_t len = kind == 0 ? 1 + rng_below(&r, 16) : kind == 1 ? 4096 : 1 + rng_below(&r, 40000);
		if (len > budget)
			len = budget ? budget : 1;
		budget -= len < budget ? len : budget;
		o->len = len;
		o->off = rng_below(&r, 4) == 0 ? rng_below(&r, 64) * 4096 : rng_below(&r, 260000);
	}
}

static inline void w_model(const struct wgroup *wg, struct mfile *m)
{
	if (wg->abort)
		return;
	for (int i = 0; i < wg->nops; i++) {
		const struct wop *o = &wg->op[i];
		if (o->truncate) {
			m_setsize(&m[o->file], o->off);
		} else {
			uint8_t *b = malloc(o->len);
			w_fill(b, o->len, o->tag, o->off);
			m_write(&m[o->file], b, o->len, o->off);
			free(b);
		}
	}
}

/* Build the group in tx (data from t_fill).  Returns 0 or the first error. */
static inline int w_build(const struct wgroup *wg, atomio_tx *tx, const int *ids)
{
	for (int i = 0; i < wg->nops; i++) {
		const struct wop *o = &wg->op[i];
		int r;
		if (o->truncate) {
			r = atomio_tx_truncate(tx, ids[o->file], (off_t)o->off);
		} else {
			uint8_t *b = malloc(o->len);
			w_fill(b, o->len, o->tag, o->off);
			r = atomio_tx_write(tx, ids[o->file], b, o->len, (off_t)o->off);
			free(b);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* After a crash: the log opened alone (recovery), the groups it replayed
 * added to *recovered, closed.  0, or 1 with why on stderr (the round and
 * its seed, to repeat it). */
static inline int w_recover(const char *log, int round, uint64_t seed, uint64_t *recovered)
{
	char err[512] = "";
	struct atomio_options o = {.errbuf = err, .errbuf_size = sizeof(err)};
	atomio *st;
	int r = atomio_open(log, &o, &st);
	if (r < 0) {
		fprintf(stderr, "round %d (seed %" PRIu64 "): recovery failed: %s: %s\n", round, seed,
			atomio_strerror(r), err);
		return 1;
	}
	struct atomio_stats s;
	atomio_stats(st, &s);
	*recovered += s.groups_recovered;
	CHECK_OK(atomio_close(st));
	return 0;
}

#endif
