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
 * replay then keeps the commit order.  Each chunk remembers the seq of the
 * newest record covering it: once a checkpoint's superblock has moved the
 * durable head past that seq, recovery can no longer replay it and the chunk
 * is free again (a full checkpoint empties the guard).  A logged size change covers the whole
 * file (replaying it could cut off a later fast-path write).  The guard is
 * memory only: recovery needs no new rule and the format does not change.
 * Only the log role reads or changes it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CHUNK_SHIFT 12
#define GUARD_MAX (1u << 18) /* chunks per file (1 GiB) before the guard says "all"; table <= 16 MiB */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/* The newest seq covering chunk c, or 0. */
static uint64_t guard_seq(const struct guard *g, uint64_t c)
{
	if (!g->used)
		return 0;
	uint64_t key = c + 1;
	for (uint32_t i = (uint32_t)mix(key) & (g->cap - 1);; i = (i + 1) & (g->cap - 1)) {
		if (g->slot[i].key == key)
			return g->slot[i].seq;
		if (!g->slot[i].key)
			return 0;
	}
}

static void slot_put(struct gslot *tab, uint32_t cap, uint64_t key, uint64_t seq, uint32_t *used)
{
	uint32_t i = (uint32_t)mix(key) & (cap - 1);
	while (tab[i].key && tab[i].key != key)
		i = (i + 1) & (cap - 1);
	if (!tab[i].key) {
		tab[i].key = key;
		(*used)++;
	}
	if (seq > tab[i].seq)
		tab[i].seq = seq;
}

/* live_seq: records below it are dead (checkpointed); their chunks are
 * dropped whenever the table is rebuilt. */
static void guard_put(struct guard *g, uint64_t c, uint64_t seq, uint64_t live_seq)
{
	if (g->all && g->all_seq == UINT64_MAX)
		return; /* out of table: every chunk, for good */
	if ((g->used + 1) * 2 > g->cap) {
		uint32_t live = 0;
		for (uint32_t i = 0; i < g->cap; i++)
			live += g->slot[i].key && g->slot[i].seq >= live_seq;
		uint32_t ncap = g->cap ? g->cap : 1024;
		while ((live + 1) * 4 > ncap) /* rebuilt at most a quarter full */
			ncap *= 2;
		struct gslot *ns = ncap <= 4 * GUARD_MAX ? calloc(ncap, sizeof(*ns)) : NULL;
		if (!ns) {
			/* Out of memory or too many chunks: be conservative. */
			g->all = true;
			g->all_seq = UINT64_MAX;
			return;
		}
		uint32_t nused = 0;
		for (uint32_t i = 0; i < g->cap; i++)
			if (g->slot[i].key && g->slot[i].seq >= live_seq)
				slot_put(ns, ncap, g->slot[i].key, g->slot[i].seq, &nused);
		free(g->slot);
		g->slot = ns;
		g->cap = ncap;
		g->used = nused;
	}
	slot_put(g->slot, g->cap, c + 1, seq, &g->used);
}

static bool guard_overlaps(const struct guard *g, uint64_t off, uint64_t len, uint64_t live_seq)
{
	if (g->all && g->all_seq >= live_seq)
		return true;
	for (uint64_t c = off >> CHUNK_SHIFT; c <= (off + len - 1) >> CHUNK_SHIFT; c++) {
		uint64_t q = guard_seq(g, c);
		if (q && q >= live_seq)
			return true;
	}
	return false;
}

/* Record the ranges of a group about to be logged with seq tx->seq.  Log
 * role held.  live_seq: the head seq when the batch was formed. */
void guard_add_role(atomio *st, const atomio_tx *tx, uint64_t live_seq)
{
	for (uint32_t i = 0; i < tx->nsegs; i++) {
		const struct seg *s = &tx->segs[i];
		struct afile *f = file_get(st, (int)s->file);
		if (!f || !f->caps.fast_max)
			continue; /* no fast path for this file: nothing to guard */
		struct guard *g = &f->guard;
		uint64_t c0 = s->off >> CHUNK_SHIFT, c1 = (s->off + s->len - 1) >> CHUNK_SHIFT;
		if (s->kind != SEG_WRITE || c1 - c0 >= GUARD_MAX) {
			if (!g->all || g->all_seq < tx->seq)
				g->all_seq = tx->seq;
			g->all = true;
			continue;
		}
		if (g->all && g->all_seq < live_seq)
			g->all = false; /* that size change is dead now */
		/* Record the chunks even while a live size change covers the
		 * whole file: a background checkpoint can make that record
		 * dead while this one is still live (its cut may fall between
		 * them), and the guard must still know this one's chunks. */
		for (uint64_t c = c0; c <= c1; c++)
			guard_put(g, c, tx->seq, live_seq);
	}
}

/* A full checkpoint made every record dead.  Log role held. */
void guard_clear_all_role(atomio *st)
{
	const uint32_t top = atomic_load(&st->files_hi);
	for (uint32_t id = 0; id < top; id++) {
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
bool fast_eligible_locked(atomio *st, const atomio_tx *tx)
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
	return !guard_overlaps(&f->guard, s->off, len, st->head_seq);
}
