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
 *
 * SEVERAL PROCESSES.  The guard is in the shared state (shm.h), one table
 * for every file, and only the log role's holder reads or changes it, so it
 * sees the records of every process.  A leader records a batch's ranges only
 * while some process has a fast path (S->fast_any): when the first one
 * opens such a file, everything logged until then counts as covered
 * (S->guard_floor = the newest seq), so no record escapes it.  A holder of
 * the log role that dies may leave the table torn: then every chunk counts
 * as covered (S->guard_bad) until a full checkpoint empties the log.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "shm.h"

#define CHUNK_SHIFT 12
#define GUARD_WHOLE (UINT64_MAX >> 1) /* the chunk key of a size change: the whole file */

static uint64_t mix(uint64_t c, uint32_t file)
{
	uint64_t x = c * 0x9E3779B97F4A7C15ull ^ file;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/* The newest seq covering chunk c of file, or 0. */
static uint64_t guard_seq(atomio *st, uint32_t file, uint64_t c)
{
	struct guard_hdr *h = &st->sh->guard;
	if (!h->used)
		return 0;
	const struct gkey *t = shm_guard(st->sh, h->cur);
	for (uint64_t i = mix(c + 1, file) & (SHM_GUARD - 1), n = 0; n < SHM_GUARD;
	     i = (i + 1) & (SHM_GUARD - 1), n++) {
		if (!t[i].chunk1)
			return 0;
		if (t[i].chunk1 == c + 1 && t[i].file == file)
			return t[i].seq;
	}
	return 0;
}

static void slot_put(struct gkey *t, uint32_t file, uint64_t c1, uint64_t seq, uint32_t *used)
{
	uint64_t i = mix(c1, file) & (SHM_GUARD - 1);
	while (t[i].chunk1 && !(t[i].chunk1 == c1 && t[i].file == file))
		i = (i + 1) & (SHM_GUARD - 1);
	if (!t[i].chunk1) {
		t[i].chunk1 = c1;
		t[i].file = file;
		t[i].seq = 0;
		(*used)++;
	}
	if (seq > t[i].seq)
		t[i].seq = seq;
}

/* live_seq: records below it are dead (checkpointed); their chunks are
 * dropped when the table is rebuilt (into the other one). */
static void guard_put(atomio *st, uint32_t file, uint64_t c, uint64_t seq, uint64_t live_seq)
{
	struct guard_hdr *h = &st->sh->guard;
	if (h->all && h->all_seq == UINT64_MAX)
		return; /* out of table: every chunk, until a full checkpoint */
	if ((h->used + 1) * 2 > SHM_GUARD) {
		struct gkey *old = shm_guard(st->sh, h->cur), *nt = shm_guard(st->sh, h->cur ^ 1);
		memset(nt, 0, SHM_GUARD * sizeof(*nt));
		uint32_t nused = 0;
		for (uint32_t i = 0; i < SHM_GUARD; i++)
			if (old[i].chunk1 && old[i].seq >= live_seq)
				slot_put(nt, old[i].file, old[i].chunk1, old[i].seq, &nused);
		h->cur ^= 1;
		h->used = nused;
		if ((nused + 1) * 4 > SHM_GUARD) {
			/* Too many chunks live: be conservative. */
			h->all = 1;
			h->all_seq = UINT64_MAX;
			return;
		}
	}
	slot_put(shm_guard(st->sh, h->cur), file, c + 1, seq, &h->used);
}

static bool guard_overlaps_locked(atomio *st, uint32_t file, uint64_t off, uint64_t len, uint64_t live_seq)
{
	ASSERT_LOCKED(st);
	const struct shm_state *S = st->S;
	const struct guard_hdr *h = &st->sh->guard;
	if (S->guard_bad || S->guard_floor >= live_seq || (h->all && h->all_seq >= live_seq))
		return true;
	uint64_t q = guard_seq(st, file, GUARD_WHOLE);
	if (q && q >= live_seq)
		return true;
	for (uint64_t c = off >> CHUNK_SHIFT; c <= (off + len - 1) >> CHUNK_SHIFT; c++) {
		q = guard_seq(st, file, c);
		if (q && q >= live_seq)
			return true;
	}
	return false;
}

/* Record the ranges of a group about to be logged with seq g->seq.  Log
 * role held.  live_seq: the head seq when the batch was formed. */
void guard_add_role(atomio *st, const struct grp *g, uint64_t live_seq)
{
	ASSERT_ROLE(st);
	/* S->fast_any is read without the mutex: a batch formed before it was
	 * set is covered by guard_floor (set with it, under the mutex). */
	uint32_t c = atomic_load_explicit(&st->sh->cur, memory_order_acquire);
	if (!st->sh->s[c].fast_any)
		return;
	for (uint32_t i = 0; i < g->nsegs; i++) {
		const struct seg *s = &g->segs[i];
		uint64_t c0 = s->off >> CHUNK_SHIFT, c1 = (s->off + s->len - 1) >> CHUNK_SHIFT;
		if (s->kind != SEG_WRITE || c1 - c0 >= SHM_GUARD / 4) {
			guard_put(st, s->file, GUARD_WHOLE, g->seq, live_seq);
			continue;
		}
		for (uint64_t k = c0; k <= c1; k++)
			guard_put(st, s->file, k, g->seq, live_seq);
	}
}

/* A full checkpoint made every record dead.  Log role held. */
void guard_clear_all_role(atomio *st)
{
	ASSERT_ROLE(st);
	struct guard_hdr *h = &st->sh->guard;
	if (h->used)
		memset(shm_guard(st->sh, h->cur), 0, SHM_GUARD * sizeof(struct gkey));
	h->used = 0;
	h->all = 0;
	h->all_seq = 0;
	shm_lock(st);
	st->S->guard_bad = 0;
	shm_unlock(st);
}

/* May this queued group take the fast path now?  Log role held (mutex too). */
bool fast_eligible_locked(atomio *st, const struct grp *g)
{
	ASSERT_LOCKED(st);
	ASSERT_ROLE_HELD(st);
	if (g->nsegs != 1 || g->segs[0].kind != SEG_WRITE)
		return false;
	const struct seg *s = &g->segs[0];
	struct afile *f = file_get(st, (int)s->file);
	/* The fast path writes through f->fd, the file this process opened:
	 * registered anew since (another file under its path), that is the
	 * old inode; logged, the group goes home through file_get_any, which
	 * opens the new one.  The registration took the log role, held here,
	 * so the generation read is the newest. */
	if (!f || !f->caps.fast_max || file_fd_stale(st, f))
		return false;
	uint64_t len = s->len;
	if (len < f->caps.awu_min || len > f->caps.fast_max || (len & (len - 1)) || s->off % len)
		return false;
	if ((uintptr_t)s->src % (f->dio_mem_align ? f->dio_mem_align : 1))
		return false;
	return !guard_overlaps_locked(st, s->file, s->off, len, st->S->head_seq);
}
