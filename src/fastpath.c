/*
 * fastpath.c: the kernel fast path.  A group of one write to an O_DIRECT
 * file that meets RWF_ATOMIC's rules (a power-of-two length from the file's
 * atomic_write_unit_min up to its fast-path limit, naturally aligned, one
 * segment, a buffer at the file's memory alignment) is written in place with
 * RWF_ATOMIC | RWF_DSYNC instead of through the log: one write, half the
 * bytes, the device's own all-or-nothing.  caps.c decides the limit: where
 * the device backs atomic writes in hardware, or everywhere the kernel takes
 * them with ATOMIO_FAST_PATH_FORCE.
 *
 * THE HAZARD.  Recovery replays every record written since the last
 * checkpoint.  If such a record wrote a range and a later fast-path write
 * rewrote it, a crash would make recovery put the older record's bytes over
 * the newer, acknowledged ones.  So the store keeps, per file, the set of
 * 4 KiB chunks that records since the last checkpoint cover (the guard); a
 * group touching any of them is logged instead, and a record's own later
 * replay then keeps the commit order.  The checkpoint, which makes those
 * records dead, empties the guard.  A logged size change covers the whole
 * file (replaying it could cut off a later fast-path write).  The guard is
 * memory only: recovery needs no new rule and the format does not change.
 * Only the log role reads or changes it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CHUNK_SHIFT 12
#define GUARD_MAX (1u << 18) /* chunks per file (1 GiB) before the guard says "all"; its table: <= 4 MiB */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static bool guard_has(const struct guard *g, uint64_t c)
{
	if (!g->used)
		return false;
	uint64_t key = c + 1;
	for (uint32_t i = (uint32_t)mix(key) & (g->cap - 1);; i = (i + 1) & (g->cap - 1)) {
		if (g->slot[i] == key)
			return true;
		if (!g->slot[i])
			return false;
	}
}

static void guard_put(struct guard *g, uint64_t c)
{
	if (g->all)
		return;
	if ((g->used + 1) * 2 > g->cap) {
		uint32_t ncap = g->cap ? g->cap * 2 : 1024;
		uint64_t *ns = ncap <= 2 * GUARD_MAX ? calloc(ncap, sizeof(*ns)) : NULL;
		if (!ns) {
			/* Out of memory or too many chunks: be conservative. */
			g->all = true;
			return;
		}
		for (uint32_t i = 0; i < g->cap; i++) {
			uint64_t key = g->slot[i];
			if (!key)
				continue;
			uint32_t j = (uint32_t)mix(key) & (ncap - 1);
			while (ns[j])
				j = (j + 1) & (ncap - 1);
			ns[j] = key;
		}
		free(g->slot);
		g->slot = ns;
		g->cap = ncap;
	}
	uint64_t key = c + 1;
	uint32_t i = (uint32_t)mix(key) & (g->cap - 1);
	while (g->slot[i] && g->slot[i] != key)
		i = (i + 1) & (g->cap - 1);
	if (!g->slot[i]) {
		g->slot[i] = key;
		g->used++;
	}
}

static bool guard_overlaps(const struct guard *g, uint64_t off, uint64_t len)
{
	if (g->all)
		return true;
	for (uint64_t c = off >> CHUNK_SHIFT; c <= (off + len - 1) >> CHUNK_SHIFT; c++)
		if (guard_has(g, c))
			return true;
	return false;
}

/* Record the ranges of a group about to be logged.  Log role held. */
void guard_add(atomio *st, const atomio_tx *tx)
{
	for (uint32_t i = 0; i < tx->nsegs; i++) {
		const struct seg *s = &tx->segs[i];
		struct afile *f = file_get(st, (int)s->file);
		if (!f || !f->caps.fast_max)
			continue; /* no fast path for this file: nothing to guard */
		struct guard *g = &f->guard;
		if (s->kind != SEG_WRITE) {
			g->all = true;
			continue;
		}
		uint64_t c0 = s->off >> CHUNK_SHIFT, c1 = (s->off + s->len - 1) >> CHUNK_SHIFT;
		if (c1 - c0 >= GUARD_MAX) {
			g->all = true;
			continue;
		}
		for (uint64_t c = c0; c <= c1 && !g->all; c++)
			guard_put(g, c);
	}
}

void guard_free(struct guard *g)
{
	free(g->slot);
	memset(g, 0, sizeof(*g));
}

/* The checkpoint made every record dead.  Log role held. */
void guard_clear_all(atomio *st)
{
	for (uint32_t id = 0; id < MAX_FILES; id++) {
		struct afile *f = atomic_load(&st->files[id]);
		if (!f)
			continue;
		struct guard *g = &f->guard;
		if (g->cap > 65536) {
			guard_free(g); /* a burst made it big: start small again */
		} else {
			if (g->used)
				memset(g->slot, 0, sizeof(*g->slot) * g->cap);
			g->used = 0;
			g->all = false;
		}
	}
}

/* May this queued group take the fast path now?  Log role held (lock too). */
bool fast_eligible(atomio *st, const atomio_tx *tx)
{
	if (tx->nsegs != 1 || tx->segs[0].kind != SEG_WRITE)
		return false;
	const struct seg *s = &tx->segs[0];
	struct afile *f = file_get(st, (int)s->file);
	if (!f || !f->caps.fast_max)
		return false;
	uint64_t len = s->len;
	if (len < f->caps.awu_min || len > f->caps.fast_max || (len & (len - 1)) || s->off % len)
		return false;
	if ((uintptr_t)s->src % (f->dio_mem_align ? f->dio_mem_align : 1))
		return false;
	return !guard_overlaps(&f->guard, s->off, len);
}
