/*
 * commit.c: group commit, as a two-stage pipeline shared by every process of
 * the store.
 *
 * A committing thread puts its group into a shared entry, its data into the
 * shared arena (shm.h), and queues it; the queue order is the commit order,
 * whichever process a group comes from.  Two roles move the groups on, each
 * held by one thread of one process at a time:
 *
 *  - the LOG role.  A thread whose group is queued and finds the role free
 *    takes it, takes every queued group that fits as one batch (groups of any
 *    process: their data is in the arena), numbers the batch, gives its
 *    groups their seqs and the batch its place in the log, lays the records
 *    out and gives the role up; then writes them as ONE log write made
 *    durable (one device wait for all of them), while the next batch forms;
 *  - the HOME stage.  The same thread then waits until every earlier batch is
 *    home (home_next == its number), performs its batch's home writes in
 *    group order (opening files other processes registered, files.c),
 *    advances home_next, and hands each group back to its owner thread,
 *    whichever process that is.
 *
 * Hence: a home write is issued only after the record that can redo it is
 * durable; home writes land in commit order (batches in number order, groups
 * in queue order within a batch) whichever processes made them, so the
 * newest write to a range wins; and a commit returns only after its home
 * writes were issued (to the page cache) or completed (O_DIRECT), so any read
 * of the file, from any process, sees the group.  While one log write is in
 * flight the next batch gathers in the queue, and while one batch is applied
 * home the next one's log write runs.
 *
 * BATCHES THAT FILL.  Committing threads come back in cohorts: the groups of
 * one batch return together once its log write is durable and its home
 * writes are done, and commit again.  Were the next batch to start as soon
 * as the log is free, it would carry only the groups queued while the last
 * write ran, and the returning cohort would make the batch after it: two
 * half batches taking turns, each paying a device wait.  So a leader that
 * finds fewer groups queued than the store recently had committing
 * (fill_want: the groups queued plus those in batches not yet handed back,
 * seen at each batch; it drops by one a batch when fewer show up) waits for
 * them, at most a quarter of a log write (fill_wait_locked_drops): waiting that
 * long to share a write costs a latecomer less than the whole write it would
 * otherwise wait for.  A second write in flight starts only when a full batch
 * is queued.  A lone committer never waits: it is the whole population.
 *
 * PRIVATE GROUPS.  A group larger than an eighth of the arena (shm.h) is
 * not copied into the arena: it is a batch of its own, led by a thread of its own process
 * from the group's own memory.
 *
 * A group that takes the kernel fast path (fastpath.c) is a batch of its own,
 * written in place durably in the log stage instead of a log write, with no
 * home stage work; its place in the commit order is that of its batch.
 *
 * A group that does not fit the log's free space makes the log role holder
 * wait for the home stage to drain and checkpoint (checkpoint.c); it waits
 * only on home stages, which wait on nothing but earlier home stages, so that
 * cannot deadlock.  atomio_checkpoint and atomio_close take the log role the
 * same way (role_acquire), ahead of queued commits.
 *
 * ADOPTION.  A process may die anywhere: with the log role, between a batch's
 * log write and its home writes, half-way through them.  Its batches outlive
 * it in the shared state; a survivor that waits for one (shm_reap_locked)
 * finds its leader gone, orphans them, and adopts each, lowest number first
 * (adopt_locked_drops):
 *  - home writes not begun (formed, logging, logged): the space it had in the
 *    log is given up with a pad record (format.h), written durably over its
 *    start, so the log goes on past it whatever the dead leader's write left
 *    there; its groups go back to the head of the queue (their data is still
 *    in the arena) and are committed again by whoever leads next -- their
 *    owners never learn of it.  Nothing of them reached a data file: no home
 *    write begins before its batch is logged AND its home turn is taken.
 *    A fast-path batch is queued again the same way (its atomic write
 *    happened or not; the next commit writes it anyway);
 *  - home writes begun (homing): they are done again, all of them, in order,
 *    from the arena (or, for a private group, read back from the log:
 *    replay_record); writes are idempotent and later batches wait for this
 *    one's turn;
 *  - home done: its groups are handed back.
 * A thread that holds a batch not yet home (its leader, or its adopter)
 * adopts only earlier ones (adopt_below_locked_drops): a later batch's pad waits
 * for that batch's home turn, which its own must give first.
 * A pad waits for nothing: while it is written no later batch can take its
 * home turn, so no later group is acknowledged before the pad is durable --
 * and a later group can only be acknowledged once recovery would walk past
 * the pad to its record.
 * A batch holding a visible (lazy) group is RE-LOGGED instead of padded
 * (adopt_relog_locked_drops): its records written again, byte for byte, at
 * its place, durably, then its home turn.  Its groups were readable by
 * every process from their commit on; queued again they would be logged
 * after later batches that may be durable already, and a crash could keep
 * a later group without an earlier one (or, live, write them home in the
 * wrong order).
 *
 * LAZY GROUPS (atomio_tx_commit_lazy, issue 36).  A lazy group is queued
 * like any other -- its ticket (S->tk_next) is its place in the one commit
 * order -- and indexed for reads in every process (lazy.c), and its
 * committer returns at once: nobody waits for it, so whoever finishes it
 * frees it (finish_ent_locked).  Its bytes stay in the arena until it is
 * home; it is never private (its bytes must outlive its process: a
 * survivor commits it) and never takes the fast path.  A batch whose head
 * is lazy starts only when due (flush_due_locked): an eager group queued
 * after it (a durable or asynchronous commit: it may only be logged after
 * every group before it, so it flushes them -- the prefix), a sync that
 * wants it (commit_sync: S->sync_want), shared memory filling (lz_press:
 * without it a full arena would wait for the delay), a failed store, or the
 * lazy delay since its enqueue.  Why not at once: one device wait for many
 * groups, and none for a group overwritten before the flush is still one
 * record each, but the committer pays no device wait at all.  The flusher
 * (one worker of the store: S->lz_flusher) sleeps until the head is due;
 * with ATOMIO_NO_BG_CHECKPOINT there is none, and a committer that finds
 * the delay expired leads.  A sync waits until every visible group up to
 * its target is done -- durable AND home, so the kernel's own reads of the
 * file (mmap, sendfile) see it after a sync -- leading the flush itself when
 * it can.  Durability follows commit order: groups are logged in ticket
 * order (I1), home only after their record is durable (I2), so a crash
 * loses a suffix of the commit order, never a part of a group.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "internal.h"
#include "shm.h"

#define MAX_BATCH (8u << 20)   /* bytes of records per log write */
#define STAGE_KEEP (16u << 20) /* staging kept between batches */
/* The fill wait's bounds (fill_wait_locked_drops): a quarter of a log write, but
 * never so short that no thread could be woken in time, nor longer than a
 * slow disk's write would justify. */
#define FILL_WAIT_MIN_NS 10000u
#define FILL_WAIT_MAX_NS 1000000u

#define ENT(idx1) shm_ent(st->sh, (idx1))

static bool role_wanted(const struct shm_state *S)
{
	for (unsigned i = 0; i < SHM_PROCS / 64; i++)
		if (S->role_wait[i])
			return true;
	return false;
}

/* The log role is free and a batch may start, for any process: no
 * role_acquire is waiting, and no log write is in flight -- or a slot is free
 * and a full batch waits (at least two groups, and fill_want): a second write
 * in flight overlaps device waits, but a small batch while another write runs
 * would only spend a device wait where waiting for that write and sharing the
 * next is cheaper. */
/* Why a batch may start with a lazy group at the queue's head (see LAZY
 * GROUPS above), or DUE_NOT: it may not yet. */
enum { DUE_NOT, DUE_NOW, DUE_SYNC, DUE_PRESS, DUE_DELAY };

static uint64_t lz_delay_ns(const atomio *st)
{
	return st->sh->lz_delay_ns ? st->sh->lz_delay_ns : LAZY_DELAY_DEFAULT_US * 1000ull;
}

/* The queue's head may be batched now: it is not lazy; or an eager group
 * waits behind it (whose owner wants it durable now, and it may only be
 * logged after every group before it: the prefix); or a sync wants it;
 * or shared memory fills; or the store failed (the leader fails the
 * queue); or it waited the lazy delay.  Mutex held, queue not empty. */
static int flush_due_locked(const atomio *st)
{
	ASSERT_LOCKED(st);
	const struct shm_state *S = st->S;
	const struct shm_ent *h = ENT(S->q_head);
	if (!(atomic_load(&h->flags) & ENT_LAZY) || S->failed)
		return DUE_NOW;
	if (S->q_eager || S->sync_want >= h->ticket)
		return DUE_SYNC;
	if (S->lz_press)
		return DUE_PRESS;
	/* (CLOCK_MONOTONIC is one clock for every process of the machine) */
	if (mono_ns() - h->t_ns >= lz_delay_ns(st))
		return DUE_DELAY;
	return DUE_NOT;
}

static bool may_start_locked(const atomio *st)
{
	ASSERT_LOCKED(st);
	const struct shm_state *S = st->S;
	return !S->log_owner && !role_wanted(S) && S->q_head &&
	       (!S->log_inflight ||
		(S->log_inflight < LOG_SLOTS && S->q_len >= 2 && S->q_len >= S->fill_want)) &&
	       flush_due_locked(st) != DUE_NOT;
}

/* ... and this thread may lead it: the queue's head is not a private group of
 * another process (whose data only that process has).  Mutex held. */
bool can_lead_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	if (!may_start_locked(st))
		return false;
	const struct shm_ent *h = ENT(st->S->q_head);
	return !(atomic_load(&h->flags) & ENT_PRIVATE) || atomic_load(&h->owner) == st->me;
}

/* Wake the flusher (LAZY GROUPS).  Mutex held. */
static void lz_wake_flusher_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	uint32_t f = st->S->lz_flusher;
	if (f && f <= SHM_PROCS)
		shm_wake(st, &shm_procs(st->sh)[f - 1].wake);
}

/* Let whoever should lead next know: the owner thread of the first group at
 * the queue's head that has one (a synchronous group), or the worker of the
 * first asynchronous group's process while that worker is idle (it leads the
 * whole queue from the head; groups of dead processes have no one) -- and
 * anyone waiting for the role or for log writes to end.  Mutex held. */
static void wake_next_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	struct shm *sh = st->sh;
	const struct shm_state *S = st->S;
	if (may_start_locked(st)) {
		unsigned looked = 0;
		uint32_t steps = 0;
		bool lazy_head = atomic_load(&ENT(S->q_head)->flags) & ENT_LAZY;
		if (lazy_head) {
			/* Nobody waits for a lazy group: the flusher leads it, or
			 * a sync waiting on ev_done, or an eager group's owner
			 * further on (below: lazy groups are passed over
			 * uncounted, and only while an eager one is queued). */
			lz_wake_flusher_locked(st);
			shm_wake(st, &sh->ev_done);
		}
		for (uint32_t i = S->q_head; i && i <= SHM_ENTRIES && looked < 64 && steps < S->q_len &&
					     (!lazy_head || S->q_eager);
		     steps++) {
			struct shm_ent *e = ENT(i);
			uint32_t fl = atomic_load(&e->flags);
			looked += !(fl & ENT_LAZY);
			if (fl & ENT_ASYNC) {
				uint32_t o = atomic_load(&e->owner);
				struct shm_proc *p = o && o <= SHM_PROCS ? &shm_procs(sh)[o - 1] : NULL;
				if (p && atomic_load(&p->worker_idle)) {
					shm_wake(st, &p->wake);
					break;
				}
			} else if (!(fl & (ENT_ORPHAN | ENT_LAZY))) {
				shm_wake_ent(e);
				break;
			}
			if ((fl & ENT_PRIVATE) || i == S->q_tail)
				break; /* only its owner can lead past it */
			i = e->next;
		}
	}
	shm_wake(st, &sh->ev_role);
}

/* Wait until every batch logged so far is durable and home (adopting those
 * whose leader died).  Mutex held; the log role too, so no new batch
 * starts. */
static void drain_locked_drops(atomio *st)
{
	ASSERT_LOCKED_DROPS(st);
	ASSERT_ROLE_HELD(st);
	while (st->S->home_next != st->S->batch_next) {
		if (st->S->orphans) {
			adopt_locked_drops(st);
			continue;
		}
		shm_wait_locked_drops(st, &st->sh->ev_home);
	}
}

/* The log role taken, given up, by this thread (its holder, for the lock
 * checks, with it). */
static void role_take_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	st->S->log_owner = st->me;
	HOLD_SET(st->role_holder);
}

static void role_give_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	ASSERT_ROLE_HELD(st);
	HOLD_CLEAR(st->role_holder);
	st->S->log_owner = 0;
}

static void role_wait_bit_locked(atomio *st, bool on)
{
	ASSERT_LOCKED(st);
	uint64_t bit = 1ull << ((st->me - 1) % 64);
	uint64_t *w = &st->S->role_wait[(st->me - 1) / 64];
	*w = on ? *w | bit : *w & ~bit;
}

int role_acquire(atomio *st)
{
	shm_lock(st);
	/* This process's threads waiting for the role go before queued
	 * commits: its bit in role_wait says so to every leader. */
	if (st->role_wait_local++ == 0)
		role_wait_bit_locked(st, true);
	shm_wake(st, &st->sh->ev_fill); /* a leader's fill wait ends at once */
	while (st->S->log_owner) {
		if (st->S->orphans) {
			adopt_locked_drops(st);
			continue;
		}
		shm_wait_locked_drops(st, &st->sh->ev_role);
	}
	if (--st->role_wait_local == 0)
		role_wait_bit_locked(st, false);
	role_take_locked(st);
	/* Every batch logged so far must be durable and home: a checkpoint
	 * syncs the data files and then gives up the records that could redo
	 * them. */
	drain_locked_drops(st);
	shm_unlock(st);
	/* ... and no early write-back of this process in flight (writeback.c):
	 * atomio_close takes the role before it closes the files that call
	 * uses. */
	own_lock(st);
	while (st->wb.busy)
		own_wait(st, &st->wb_cv);
	own_unlock(st);
	return 0;
}

void role_release(atomio *st)
{
	shm_lock(st);
	role_give_locked(st);
	wake_next_locked(st);
	shm_unlock(st);
}

/* --- a batch's groups, as its leader sees them ------------------------------------------- */

struct view {
	struct grp *g;
	struct seg *segs;
	uint32_t n;
};

static void view_free(struct view *v)
{
	free(v->g);
	free(v->segs);
	memset(v, 0, sizeof(*v));
}

/* The group of entry idx1 into *g, its ranges at *segs (room for its
 * nsegs): from the arena, or from the owner's tx (a private group of this
 * process).  0, or ATOMIO_ECORRUPT when the entry does not add up. */
static int grp_of(atomio *st, uint32_t idx1, struct grp *g, struct seg *segs)
{
	struct shm_ent *e = ENT(idx1);
	*g = (struct grp){.ent = idx1, .nsegs = e->nsegs, .data_len = e->data_len, .rec_len = e->rec_len,
			  .seq = e->seq};
	if (atomic_load(&e->flags) & ENT_PRIVATE) {
		/* Only this process leads it (can_lead_locked), so the pointer
		 * is one of ours. */
		const atomio_tx *tx = (const atomio_tx *)(uintptr_t)e->tx;
		g->segs = tx->segs;
		g->cdata = tx->cdata;
		g->clen = tx->clen;
		return 0;
	}
	g->segs = segs;
	if (!e->nsegs)
		return 0;
	if (e->blk >= st->sh->arena_size || e->nsegs > MAX_SEGMENTS)
		return ATOMIO_ECORRUPT;
	const struct arena_blk *b = shm_blk(st->sh, e->blk);
	if (b->entry != idx1 || b->size > st->sh->arena_size - e->blk ||
	    sizeof(*b) + (uint64_t)e->nsegs * sizeof(struct shm_seg) > b->size)
		return ATOMIO_ECORRUPT;
	const struct shm_seg *d = (const struct shm_seg *)(b + 1);
	uint64_t sum = 0;
	for (uint32_t j = 0; j < e->nsegs; j++) {
		if (d[j].kind == SEG_WRITE &&
		    (d[j].data > b->size || d[j].len > b->size - d[j].data || d[j].len == 0))
			return ATOMIO_ECORRUPT;
		if (d[j].kind != SEG_WRITE && d[j].kind != SEG_SETSIZE)
			return ATOMIO_ECORRUPT;
		segs[j] = (struct seg){.file = d[j].file, .kind = d[j].kind, .off = d[j].off, .len = d[j].len,
				       .src = (const char *)b + d[j].data};
		sum += d[j].kind == SEG_WRITE ? d[j].len : 0;
	}
	if (sum != e->data_len || e->rec_len != (e->clen ? rec_len_for(e->nsegs, e->clen)
							  : rec_len_for(e->nsegs, e->data_len)))
		return ATOMIO_ECORRUPT;
	if (e->clen) {
		if (b->cdata > b->size || e->clen > b->size - b->cdata || !b->cdata)
			return ATOMIO_ECORRUPT;
		g->cdata = (const char *)b + b->cdata;
		g->clen = e->clen;
	}
	return 0;
}

/* The view of n groups, entries listed in idx (batch order).  0, -ENOMEM or
 * ATOMIO_ECORRUPT. */
static int view_build(atomio *st, const uint32_t *idx, uint32_t n, struct view *v)
{
	uint64_t segs = 0;
	for (uint32_t i = 0; i < n; i++)
		segs += ENT(idx[i])->nsegs;
	v->g = malloc((n ? n : 1) * sizeof(*v->g));
	v->segs = malloc((segs ? segs : 1) * sizeof(*v->segs));
	v->n = n;
	if (!v->g || !v->segs)
		return -ENOMEM;
	uint64_t at = 0;
	for (uint32_t i = 0; i < n; i++) {
		int r = grp_of(st, idx[i], &v->g[i], v->segs + at);
		if (r < 0)
			return r;
		at += v->g[i].nsegs;
	}
	return 0;
}

/* --- the stages ----------------------------------------------------------------------- */

static int stage_reserve(struct logslot *ls, size_t len)
{
	if (ls->cap >= len)
		return 0;
	size_t cap = ls->cap ? ls->cap : 65536;
	while (cap < len)
		cap *= 2;
	void *p = NULL;
	if (posix_memalign(&p, 4096, cap))
		return -ENOMEM;
	free(ls->stage);
	ls->stage = p;
	ls->cap = cap;
	return 0;
}

/* Where a log write of len bytes can go now (area offset), and how many
 * bytes fit there (*room); UINT64_MAX if nowhere until a checkpoint frees
 * space.  Live records run from head to tail around the ring (checkpoint.c);
 * a write never wraps inside itself: it goes at the tail, or at the area's
 * start when the tail is too close to the end.  Mutex held. */
static uint64_t log_place_locked(const atomio *st, uint64_t len, uint64_t *room)
{
	ASSERT_LOCKED(st);
	const struct shm_state *S = st->S;
	if (S->used == 0 || S->tail > S->head) {
		if (S->tail + len <= st->area_size) {
			*room = st->area_size - S->tail;
			return S->tail;
		}
		if (len <= S->head) {
			*room = S->head;
			return 0;
		}
		return UINT64_MAX;
	}
	if (S->tail + len <= S->head) { /* wrapped: free space is [tail, head) */
		*room = S->head - S->tail;
		return S->tail;
	}
	return UINT64_MAX;
}

/* Lay the records of v's groups out at out (bytes of them, then zeros to
 * the block); guard: add them to the fast path's guard (the log role's,
 * held then).  0, or ATOMIO_ECORRUPT when they do not add up to bytes. */
static int build_records(atomio *st, char *out, const struct view *v, uint64_t bytes, bool guard,
			 uint64_t live_seq)
{
	uint64_t len = align_up(bytes, st->block), sum = 0;
	for (uint32_t i = 0; i < v->n; i++)
		sum += v->g[i].nsegs ? v->g[i].rec_len : 0;
	if (sum != bytes)
		return ATOMIO_ECORRUPT;
	char *p = out;
	for (uint32_t i = 0; i < v->n; i++) {
		const struct grp *g = &v->g[i];
		if (!g->nsegs)
			continue; /* an empty group has no record */
		struct rec_src rs = {.segs = g->segs, .nsegs = g->nsegs, .data_len = g->data_len,
				     .rec_len = g->rec_len, .cdata = g->cdata, .clen = g->clen};
		bool last = (uint64_t)(p - out) + g->rec_len == bytes;
		codec_rec_build(p, &rs, g->seq, st->rec_epoch, last, st->store_id);
		if (guard)
			guard_add_role(st, g, live_seq);
		p += g->rec_len;
	}
	memset(p, 0, len - bytes);
	return 0;
}

/* Lay a batch's records out in the slot's staging buffer.  Log role held
 * (the guard is the role's), mutex not held. */
static int build_batch_role(atomio *st, struct logslot *ls, const struct view *v, uint64_t bytes,
			    uint64_t live_seq)
{
	ASSERT_ROLE(st);
	int r = stage_reserve(ls, align_up(bytes, st->block));
	return r < 0 ? r : build_records(st, ls->stage, v, bytes, true, live_seq);
}

/* Write the built batch at area offset off, durably.  A write slot held,
 * mutex not held: up to LOG_SLOTS of these run at once, store-wide. */
static int write_batch(atomio *st, struct logslot *ls, uint64_t bytes, uint64_t off, uint64_t *took)
{
	uint64_t len = align_up(bytes, st->block);
	uint64_t t0 = mono_ns();
	/* The commit point: one sequential write made durable before it
	 * returns (engine.h).  No separate commit block: the checksum tells a
	 * whole record from a torn one.  Writes in flight together cover
	 * disjoint whole blocks, so a torn one cannot damage another; if one
	 * is torn and a later one is whole, recovery stops at the torn one and
	 * the later groups, never acknowledged (the home stage goes in order),
	 * are not replayed either. */
	int r = engine_log_write(st, ls, ls->stage, len, st->area_off + off);
	if (r < 0)
		st_err(st, "writing the log %s: %s", st->log_path, strerror(-r));
	if (ls->cap > STAGE_KEEP) {
		free(ls->stage);
		ls->stage = NULL;
		ls->cap = 0;
	}
	*took = mono_ns() - t0;
	if (r == 0) {
		atomic_fetch_add(&st->sh->stats.log_syncs, 1);
		atomic_fetch_add(&st->sh->stats.batches, 1);
		atomic_fetch_add(&st->sh->stats.bytes_logged, len);
	}
	return r;
}

/* Recompute the pressure flag: lazy groups hold half the arena, half the
 * entries or half the index's seg pool (see LAZY GROUPS).  A committer that
 * finds no room sets it too (lz_room_wait_locked_drops); the next group done
 * recomputes it, and that committer sets it again if it still finds none.
 * Mutex held. */
static void lazy_pressure_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	struct shm_state *S = st->S;
	const struct shm *sh = st->sh;
	bool p = S->lz_bytes >= sh->arena_size / 2 || S->lz_n >= SHM_ENTRIES / 2 ||
		 (sh->lzf_off && sh->lz.used >= SHM_LZSEGS / 2);
	if (p && !S->lz_press)
		lz_wake_flusher_locked(st);
	S->lz_press = p;
}

/* A visible group is done (durable and home) or failed: out of the read
 * index before its arena block goes (from here on reads go to the file,
 * which holds its home writes -- or, failed, what a failed write-back
 * leaves, as Linux does with dropped dirty pages), out of the FIFO, and a
 * sync waiting for it woken.  Mutex held. */
static void lz_done_locked(atomio *st, uint32_t idx1, int result)
{
	ASSERT_LOCKED(st);
	struct shm_state *S = st->S;
	struct shm_ent *e = ENT(idx1);
	lz_unindex_locked(st, idx1);
	/* normally the FIFO's head: groups are done in ticket order */
	uint32_t prev = 0, steps = 0;
	for (uint32_t i = S->lz_head; i && i <= SHM_ENTRIES && steps < S->lz_n; steps++) {
		if (i == idx1) {
			uint32_t next = i == S->lz_tail ? 0 : e->lz_next;
			if (prev)
				ENT(prev)->lz_next = next;
			else
				S->lz_head = next;
			if (S->lz_tail == i)
				S->lz_tail = prev;
			S->lz_n--;
			if (!S->lz_n)
				S->lz_head = S->lz_tail = 0;
			break;
		}
		if (i == S->lz_tail)
			break;
		prev = i;
		i = ENT(i)->lz_next;
	}
	if (e->blk != UINT64_MAX) {
		uint64_t b = shm_blk(st->sh, e->blk)->size;
		S->lz_bytes -= S->lz_bytes >= b ? b : S->lz_bytes;
	}
	/* Its record write was issued before the failure: a sync covering it
	 * cannot say "not written" (ATOMIO_EUNKNOWN). */
	if (result == ATOMIO_EUNKNOWN && (!S->lz_unk_min || e->ticket < S->lz_unk_min))
		S->lz_unk_min = e->ticket;
	lazy_pressure_locked(st);
	shm_wake(st, &st->sh->ev_done);
}

/* Hand a group back: its result, then its owner thread (or its process's
 * worker) is woken -- or, its owner dead or the group lazy (nobody waits
 * for it), it is freed.  Its arena block is no longer needed.  Mutex
 * held. */
static void finish_ent_locked(atomio *st, uint32_t idx1, int result)
{
	ASSERT_LOCKED(st);
	struct shm_ent *e = ENT(idx1);
	if (atomic_load(&e->flags) & ENT_VISIBLE)
		lz_done_locked(st, idx1, result < 0 && (atomic_load(&e->flags) & ENT_MAYBE) ? ATOMIO_EUNKNOWN
											: result);
	if (e->blk != UINT64_MAX) {
		shm_arena_free(st, e->blk);
		e->blk = UINT64_MAX;
	}
	uint32_t fl = atomic_load(&e->flags);
	/* A group a dead leader's fast-path write may have made durable
	 * (adopt_pad_locked_drops) can fail now only as "outcome unknown":
	 * recovery may find it in the file (API: a commit never says "not
	 * written" of a group that may be durable). */
	if (result < 0 && (fl & ENT_MAYBE))
		result = ATOMIO_EUNKNOWN;
	e->result = result;
	atomic_store(&e->state, ENT_DONE); /* the owner may free it from here on */
	if (fl & (ENT_ORPHAN | ENT_LAZY)) {
		shm_ent_free(st, idx1);
	} else if (fl & ENT_ASYNC) {
		uint32_t o = atomic_load(&e->owner);
		if (o && o <= SHM_PROCS)
			shm_wake(st, &shm_procs(st->sh)[o - 1].wake);
	} else {
		shm_wake_ent(e);
	}
}

/* q_eager follows the queue: a group not lazy queued (in) or taken off it.
 * Mutex held. */
static void q_count_locked(atomio *st, uint32_t idx1, bool in)
{
	ASSERT_LOCKED(st);
	if (atomic_load(&ENT(idx1)->flags) & ENT_LAZY)
		return;
	struct shm_state *S = st->S;
	if (in)
		S->q_eager++;
	else if (S->q_eager)
		S->q_eager--;
}

static void fail_queue_locked(atomio *st, int err)
{
	ASSERT_LOCKED(st);
	struct shm_state *S = st->S;
	uint32_t i = S->q_head, n = S->q_len;
	S->q_head = S->q_tail = 0;
	S->q_len = 0;
	S->q_eager = 0;
	for (uint32_t k = 0; i && k < n; k++) {
		uint32_t next = ENT(i)->next;
		/* Never in a batch: its place in the commit order is after every
		 * batched group, in queue order (async.c hands groups back
		 * sorted by these; the entry's own are stale). */
		ENT(i)->batch = UINT64_MAX;
		ENT(i)->ord = k;
		finish_ent_locked(st, i, err);
		i = next;
	}
	shm_arena_advance_locked(st);
}

/* One batch on its way through the pipeline (lead_locked_drops). */
struct batch {
	uint32_t first, last; /* its groups: entry index + 1, linked by next */
	uint32_t n, nrec;
	bool fast;         /* one group, written by the kernel fast path */
	bool priv;         /* one private group of this process */
	uint64_t bytes;    /* of records (0: only empty groups) */
	uint64_t off;      /* area offset of its log write */
	uint64_t room;     /* bytes free at off */
	uint64_t k;        /* its number: home stages run in this order */
	unsigned slot;     /* its log write slot (this process's) */
	struct view v;
	/* Its record (or fast-path) write was issued: from then on a failure
	 * leaves its groups' fate to recovery (ATOMIO_EUNKNOWN), never "not
	 * written". */
	bool issued;
};

#define REQUEUED 1 /* fast_stage_locked_drops: the kernel refused; the group is queued again */

/* The one group at the head may take the fast path now (one range, a file
 * this process has with a fast-path limit). */
static bool head_fast_locked(atomio *st, uint32_t idx1)
{
	ASSERT_LOCKED(st);
	struct shm_ent *e = ENT(idx1);
	/* Not a lazy group: a flush of many would become as many device
	 * waits, and a fast batch holds one group. */
	if (e->nsegs != 1 || (atomic_load(&e->flags) & (ENT_PRIVATE | ENT_LAZY)))
		return false;
	struct grp g;
	struct seg s;
	return grp_of(st, idx1, &g, &s) == 0 && fast_eligible_locked(st, &g);
}

/* The batch that would be taken now from the head: its groups, records,
 * bytes and last entry, nothing changed.  Mutex held. */
static void batch_extent_locked(atomio *st, struct batch *b)
{
	ASSERT_LOCKED(st);
	ASSERT_ROLE_HELD(st);
	const struct shm_state *S = st->S;
	b->n = b->nrec = 0;
	b->bytes = 0;
	b->first = b->last = S->q_head;
	struct shm_ent *h = ENT(S->q_head);
	b->priv = atomic_load(&h->flags) & ENT_PRIVATE;
	if (b->fast || b->priv) {
		b->n = 1;
		b->nrec = h->nsegs ? 1 : 0;
		b->bytes = b->fast ? 0 : h->rec_len;
		return;
	}
	uint32_t i = S->q_head;
	for (uint32_t k = 0; i && k < S->q_len; k++) {
		struct shm_ent *e = ENT(i);
		uint64_t nb = b->bytes + e->rec_len;
		if (b->n && ((atomic_load(&e->flags) & ENT_PRIVATE) ||
			     align_up(nb, st->block) > b->room || nb > MAX_BATCH || head_fast_locked(st, i)))
			break;
		b->bytes = nb;
		b->nrec += e->nsegs ? 1 : 0;
		b->n++;
		b->last = i;
		if (i == S->q_tail)
			break;
		i = e->next;
	}
}

/* Stage 1: wait until the queue's head can go -- a fast-path group once no
 * log write is in flight, a logged one once the log has room and the new
 * log's zeroing is past where it goes -- freeing space when the log is full.
 * Leaves b's extent computed.  false: nothing to lead (queue empty, its head
 * another process's private group, or store failed); the role is given up.
 * Mutex and log role held; the mutex is dropped while waiting and while a
 * full checkpoint runs. */
static bool wait_for_room_locked_drops(atomio *st, struct batch *b)
{
	ASSERT_LOCKED_DROPS(st);
	ASSERT_ROLE_HELD(st);
	struct shm *sh = st->sh;
	for (;;) {
		struct shm_state *S = st->S;
		if (S->orphans) {
			adopt_locked_drops(st);
			continue;
		}
		if (S->sb_stale) {
			/* Where the log starts may have moved (checkpoint.c):
			 * read it back before a record is placed, even while a
			 * new checkpoint runs -- it reads it too, as it begins,
			 * with the mutex dropped, and a batch placed meanwhile
			 * would go where the ring no longer is. */
			(void)checkpoint_reconcile_locked_drops(st);
			continue;
		}
		const uint32_t head = S->q_head;
		if (S->failed || !head ||
		    ((atomic_load(&ENT(head)->flags) & ENT_PRIVATE) && atomic_load(&ENT(head)->owner) != st->me)) {
			/* Nothing may be written after an error whose effect on
			 * the media is unknown. */
			if (S->failed)
				fail_queue_locked(st, ATOMIO_EFAILED);
			role_give_locked(st);
			wake_next_locked(st);
			return false;
		}
		if (S->bstate[S->batch_next % SHM_BATCHES] != BAT_FREE) {
			/* the batch numbered SHM_BATCHES earlier is still being handed back */
			shm_wait_locked_drops(st, &sh->ev_home);
			continue;
		}
		b->fast = head_fast_locked(st, head);
		if (b->fast && S->log_inflight) {
			/* A fast-path write is durable the moment it lands: every
			 * earlier log write must be durable first (commit order). */
			shm_wait_locked_drops(st, &sh->ev_role);
			continue;
		}
		if (b->fast) {
			batch_extent_locked(st, b);
			return true;
		}
		b->off = log_place_locked(st, align_up(ENT(head)->rec_len, st->block), &b->room);
		/* Also wait when the page cache holds twice the dirty limit
		 * (checkpoint.c): the checkpoint bounds it. */
		if (b->off != UINT64_MAX && !checkpoint_must_wait_locked(st)) {
			batch_extent_locked(st, b);
			uint64_t len = align_up(b->bytes, st->block);
			/* Never where the log's lazy zeroing writes (logfile.c):
			 * wait for its chunk; take_batch_locked keeps it above. */
			if (S->zero_owner && b->off + len > S->zero_lo) {
				shm_wait_locked_drops(st, &sh->ev_role);
				continue;
			}
			return true;
		}
		/* Log full.  A background checkpoint is freeing space: wait for
		 * it.  Else free it all: that needs every logged batch home
		 * first; it runs with the role held, the mutex not. */
		atomic_fetch_add(&sh->stats.log_full_waits, 1);
		if (S->ckpt_owner) {
			shm_wait_locked_drops(st, &sh->ev_ckpt);
			continue;
		}
		drain_locked_drops(st);
		shm_unlock(st);
		checkpoint_full_role(st);
		shm_lock(st);
	}
}

/* Stage 2: take the batch (its extent computed) off the head of the queue,
 * give its groups their seqs and its log write its place in the ring, number
 * it.  No wait: the state changes all at once.  Mutex and log role held. */
static void take_batch_locked(atomio *st, struct batch *b)
{
	ASSERT_LOCKED(st);
	ASSERT_ROLE_HELD(st);
	struct shm *sh = st->sh;
	struct shm_state *S = st->S;
	const uint64_t k = S->batch_next;
	struct shm_bat *B = shm_bat(sh, k);
	uint64_t seq0 = S->next_seq;
	uint32_t i = b->first;
	for (uint32_t c = 0; c < b->n; c++) {
		struct shm_ent *e = ENT(i);
		/* An empty group gets the seq of the record after it: its
		 * place in the order, not a seq of its own. */
		e->seq = S->next_seq;
		if (e->nsegs && !b->fast)
			S->next_seq++;
		e->batch = k;
		e->ord = c;
		e->fast = b->fast;
		atomic_store(&e->state, ENT_BATCHED);
		q_count_locked(st, i, false);
		i = e->next;
	}
	if (!b->fast) {
		uint64_t len = align_up(b->bytes, st->block);
		if (b->off + len > S->zero_lo)
			S->zero_lo = b->off + len;
		if (b->off != S->tail)
			S->used += st->area_size - S->tail; /* a wrap skips the end */
		S->used += len;
		S->tail = b->off + len;
		/* the ring's invariant: head + used lands on the tail */
		ASSERT(S->used <= st->area_size);
		ASSERT((S->head + S->used) % st->area_size == S->tail % st->area_size);
	}
	/* The descriptor first (its slot is free: nothing reads it until
	 * batch_next is published), then the state that makes it live. */
	*B = (struct shm_bat){.k = k, .first = b->first, .n = b->n, .nrec = b->nrec, .fast = b->fast,
			     .priv = b->priv, .off = b->fast ? 0 : b->off, .bytes = b->bytes, .seq0 = seq0,
			     .end_seq = S->next_seq, .end_off = S->tail % st->area_size,
			     .live_seq = S->head_seq};
	S->bstate[k % SHM_BATCHES] = BAT_TAKEN;
	S->bowner[k % SHM_BATCHES] = (uint8_t)st->me;
	b->k = k;
	S->batch_next = k + 1;
	S->q_len -= b->n;
	S->pipe_groups += b->n;
	if (b->last == S->q_tail) {
		S->q_head = S->q_tail = 0;
		ASSERT(S->q_len == 0);
	} else {
		S->q_head = ENT(b->last)->next;
	}
	/* a free write slot of this process: there is one, since at most
	 * LOG_SLOTS writes are in flight store-wide and none starts without
	 * the role */
	b->slot = 0;
	while (st->slot_busy & (1u << b->slot))
		b->slot++;
	ASSERT(b->slot < LOG_SLOTS);
	st->slot_busy |= 1u << b->slot;
}

/* The batch's groups in order, for its view. */
static int batch_view(atomio *st, struct batch *b)
{
	uint32_t stackidx[64] = {0}, *idx = b->n <= 64 ? stackidx : malloc(b->n * sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	uint32_t i = b->first;
	for (uint32_t c = 0; c < b->n; c++) {
		idx[c] = i;
		i = ENT(i)->next;
	}
	int r = view_build(st, idx, b->n, &b->v);
	if (idx != stackidx)
		free(idx);
	return r;
}

/* Stage 3, fast path: the group's one write in place, durably, instead of a
 * log write.  Called with the mutex held, which it drops while writing;
 * gives the role up.  0, a negative errno, or REQUEUED (role still held). */
static int fast_stage_locked_drops(atomio *st, struct batch *b)
{
	ASSERT_LOCKED_DROPS(st);
	ASSERT_ROLE_HELD(st);
	struct shm_state *S = st->S;
	unsigned bs = b->k % SHM_BATCHES;
	S->bstate[bs] = BAT_LOGGING;
	shm_unlock(st);
	int r = batch_view(st, b);
	const struct seg *s = r == 0 ? &b->v.g[0].segs[0] : NULL;
	struct afile *f = s ? file_get(st, (int)s->file) : NULL;
	if (s)
		r = f ? engine_fast_write(st, f, s->src, s->len, s->off) : -EBADF;
	if ((r == -EOPNOTSUPP || r == -EINVAL) && f) {
		/* The kernel refused RWF_ATOMIC before writing anything (limits
		 * it did not report, or a filesystem change): no fast path for
		 * this file from now on in this process; the group goes back to
		 * the head of the queue and takes the log.  Only the role holder
		 * numbers batches, so k is still the last number given out. */
		f->caps.fast_max = 0;
		view_free(&b->v);
		shm_lock(st);
		S = st->S;
		struct shm_ent *e = ENT(b->first);
		S->bstate[bs] = BAT_FREE;
		S->bowner[bs] = 0;
		S->batch_next--;
		S->q_len++;
		q_count_locked(st, b->first, true);
		S->pipe_groups--;
		st->slot_busy &= ~(1u << b->slot);
		atomic_store(&e->state, ENT_QUEUED);
		e->fast = 0;
		e->next = S->q_head;
		if (!S->q_head)
			S->q_tail = b->first;
		S->q_head = b->first;
		return REQUEUED;
	}
	b->issued = f != NULL;
	char name[PATH_MAX];
	if (r < 0 && f)
		st_err(st, "atomic write to data file %s: %s", file_name(st, f, name, sizeof(name)),
		       strerror(-r));
	else if (r == 0)
		atomic_fetch_add(&st->sh->stats.fast_writes, 1);
	shm_lock(st);
	S = st->S;
	if (r < 0)
		st_fail_locked(st, r);
	S->bstate[bs] = BAT_LOGGED;
	st->slot_busy &= ~(1u << b->slot);
	role_give_locked(st);
	wake_next_locked(st);
	return r;
}

/* Stage 3, logged: lay the records out (role held), give the role up (the
 * next batch is formed while this one is written), write them in a slot.
 * Called and returns with the mutex held, dropped while building and
 * writing.  0 or a negative errno. */
static int log_stage_locked_drops(atomio *st, struct batch *b)
{
	ASSERT_LOCKED_DROPS(st);
	ASSERT_ROLE_HELD(st);
	struct logslot *ls = &st->slots[b->slot];
	unsigned bs = b->k % SHM_BATCHES;
	uint64_t live_seq = shm_bat(st->sh, b->k)->live_seq;
	shm_unlock(st);
	int r = batch_view(st, b);
	if (r == 0 && b->bytes)
		r = build_batch_role(st, ls, &b->v, b->bytes, live_seq);
	shm_lock(st);
	struct shm_state *S = st->S;
	role_give_locked(st);
	if (r == ATOMIO_ECORRUPT)
		shm_damaged_locked(st, "a group's entry");
	else if (r < 0)
		st_fail_locked(st, r);
	else if (b->bytes) {
		S->log_inflight++;
		S->bstate[bs] = BAT_LOGGING;
		wake_next_locked(st);
		shm_unlock(st);
		b->issued = true;
		uint64_t took;
		r = write_batch(st, ls, b->bytes, b->off, &took);
		shm_lock(st);
		S = st->S;
		S->log_inflight--;
		if (r == 0)
			S->log_write_ns = S->log_write_ns ? (S->log_write_ns * 7 + took) / 8 : took;
		else
			st_fail_locked(st, r); /* unknown whether any of it reached the media:
						  refuse further commits; reopening replays
						  whatever did, whole */
	}
	S->bstate[bs] = BAT_LOGGED;
	st->slot_busy &= ~(1u << b->slot);
	wake_next_locked(st);
	return r;
}

/* A batch's home writes failed: name the files they went to (the engine
 * reports the first error, not which write had it). */
static void home_err(atomio *st, const struct view *v, int err)
{
	char names[2 * PATH_MAX + 64] = "";
	size_t used = 0;
	uint32_t shown = 0, last = UINT32_MAX;
	for (uint32_t i = 0; i < v->n; i++)
		for (uint32_t j = 0; j < v->g[i].nsegs && shown < 3; j++) {
			uint32_t id = v->g[i].segs[j].file;
			if (id == last)
				continue;
			last = id;
			struct afile *f = id < MAX_FILES ? atomic_load(&st->files[id]) : NULL;
			char path[PATH_MAX];
			if (!f)
				continue;
			int k = snprintf(names + used, sizeof(names) - used, "%s%s", shown ? ", " : "",
					 file_name(st, f, path, sizeof(path)));
			if (k < 0 || (size_t)k >= sizeof(names) - used)
				break;
			used += (size_t)k;
			shown++;
		}
	st_err(st, "writing home data to %s%s: %s", names, shown == 3 ? ", ..." : "", strerror(-err));
}

/* A batch's home writes are done (r: their result): the dirty set, the
 * paced write-back's notes, home_next, and the cut a checkpoint may make.
 * Mutex held. */
static void home_done_locked(atomio *st, uint64_t k, const struct view *v, int r, bool fast)
{
	ASSERT_LOCKED(st);
	HOLD_CLEAR(st->home_holder); /* (the home stage, if this thread had it) */
	struct shm_state *S = st->S;
	struct shm_bat *B = shm_bat(st->sh, k);
	B->result = r; /* for an adopter, should this process die before handing the groups back */
	if (r < 0)
		st_fail_locked(st, r);
	else if (!fast && v->n) {
		dirty_note_locked(st, v->g, v->n);
		wb_note(st, v->g, v->n);
	}
	S->home_next = k + 1;
	if (atomic_load(&st->sh->homed) < k + 1)
		atomic_store(&st->sh->homed, k + 1); /* (mutex held: the only writer) */
	S->bstate[k % SHM_BATCHES] = BAT_HOMED;
	shm_wake(st, &st->sh->ev_home);
	if (r == 0 && !fast && B->bytes) {
		S->home_seq = B->end_seq;
		S->home_off = B->end_off;
		checkpoint_after_home_locked(st); /* the policy may want one now */
	}
}

static bool adopt_below_locked_drops(atomio *st, uint64_t below);

/* Stage 4: the home writes, once every earlier batch is home (commit
 * order).  Called and returns with the mutex held, dropped while writing.
 * Returns the batch's result. */
static int home_stage_locked_drops(atomio *st, struct batch *b, int r)
{
	ASSERT_LOCKED_DROPS(st);
	while (st->S->home_next != b->k) {
		/* only batches before this one: see adopt_below_locked_drops */
		if (st->S->orphans && adopt_below_locked_drops(st, b->k))
			continue;
		shm_wait_locked_drops(st, &st->sh->ev_home);
	}
	if (r == 0 && st->S->failed) {
		/* The store failed while this batch's write was in flight (an
		 * earlier batch's log or home write, a checkpoint's sync, in any
		 * process): this batch is durable in the log but must not be
		 * applied out of order.  Reopening replays it -- unless an
		 * earlier record it follows is torn: recovery decides. */
		r = ATOMIO_EUNKNOWN;
	}
	st->S->bstate[b->k % SHM_BATCHES] = BAT_HOMING;
	HOLD_SET(st->home_holder);
	if (r == 0 && !b->fast)
		ckpt_home_begin_locked(st, b->k, b->v.g, b->v.n);
	shm_unlock(st);
	if (r == 0 && !b->fast) {
		r = engine_home(st, b->v.g, b->v.n);
		if (r < 0)
			home_err(st, &b->v, r);
	}
	shm_lock(st);
	home_done_locked(st, b->k, &b->v, r, b->fast);
	return r;
}

/* Stage 5: count the groups and hand each back; the batch's slot is free
 * again.  Mutex held. */
static void finish_batch_locked(atomio *st, const struct batch *b, int r)
{
	ASSERT_LOCKED(st);
	struct shm_state *S = st->S;
	struct shm *sh = st->sh;
	S->pipe_groups -= b->n;
	uint32_t i = b->first;
	for (uint32_t c = 0; c < b->n; c++) {
		uint32_t next = ENT(i)->next;
		if (r == 0) {
			const struct grp *g = c < b->v.n ? &b->v.g[c] : NULL;
			atomic_fetch_add(&sh->stats.commits, 1);
			if (g && !b->fast && g->nsegs) {
				atomic_fetch_add(&sh->stats.bytes_raw, g->data_len);
				if (g->cdata)
					atomic_fetch_add(&sh->stats.records_compressed, 1);
			}
		}
		finish_ent_locked(st, i, r);
		i = next;
	}
	shm_arena_advance_locked(st);
	S->bstate[b->k % SHM_BATCHES] = BAT_FREE;
	S->bowner[b->k % SHM_BATCHES] = 0;
	shm_wake(st, &sh->ev_home);
}

/* Before a batch is formed with no log write in flight: wait, a bounded
 * time, for the groups of the recent population that are not queued yet
 * (see BATCHES THAT FILL above).  Mutex and log role held; the mutex is
 * dropped while waiting. */
static void fill_wait_locked_drops(atomio *st)
{
	ASSERT_LOCKED_DROPS(st);
	ASSERT_ROLE_HELD(st);
	struct shm_state *S = st->S;
	/* A lazy flush is as full as it gets (no wait), and its groups are no
	 * cohort that comes back: fill_want learns from eager groups only. */
	if (S->lz_n)
		return;
	uint32_t pop = S->q_len + S->pipe_groups;
	if (pop >= S->fill_want)
		S->fill_want = pop;
	else
		S->fill_want--;
	/* (A fast-path group is a batch of its own: nothing to wait for.) */
	if (S->q_len >= S->fill_want || S->log_inflight || !S->q_head || head_fast_locked(st, S->q_head))
		return;
	uint64_t ns = S->log_write_ns / 4;
	ns = ns < FILL_WAIT_MIN_NS ? FILL_WAIT_MIN_NS : ns > FILL_WAIT_MAX_NS ? FILL_WAIT_MAX_NS : ns;
	uint64_t until = mono_ns() + ns;
	S->fill_waiting = 1;
	/* A checkpoint or close waiting for the role, or a failure, ends the
	 * wait: the batch goes as it is. */
	for (;;) {
		S = st->S;
		uint64_t now = mono_ns();
		if (S->q_len >= S->fill_want || S->failed || role_wanted(S) || now >= until)
			break;
		if (shm_wait_ns_locked_drops(st, &st->sh->ev_fill, until - now))
			break;
	}
	st->S->fill_waiting = 0;
}

/* A batch with a lazy group at its head is about to start: say why. */
static void count_flush_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	struct shm_stats *x = &st->sh->stats;
	switch (flush_due_locked(st)) {
	case DUE_SYNC: atomic_fetch_add(&x->flush_sync, 1); break;
	case DUE_PRESS: atomic_fetch_add(&x->flush_press, 1); break;
	case DUE_DELAY: atomic_fetch_add(&x->flush_delay, 1); break;
	default: break;
	}
}

void lead_locked_drops(atomio *st)
{
	ASSERT_LOCKED_DROPS(st);
	struct batch b;
	int r;
	memset(&b, 0, sizeof(b));
	role_take_locked(st);
	fill_wait_locked_drops(st);
	do {
		if (!wait_for_room_locked_drops(st, &b))
			return;
		count_flush_locked(st);
		take_batch_locked(st, &b);
		b.issued = false;
		r = b.fast ? fast_stage_locked_drops(st, &b) : log_stage_locked_drops(st, &b);
	} while (r == REQUEUED);
	r = home_stage_locked_drops(st, &b, r);
	/* What the owners are told: 0, or "not written" (nothing of the batch
	 * reached the log: the error itself), or "unknown" once its write was
	 * issued; the cause is in the error buffer and in S->failed. */
	if (r < 0 && b.issued)
		r = ATOMIO_EUNKNOWN;
	finish_batch_locked(st, &b, r);
	view_free(&b.v);
	/* Without a checkpointer thread, the paced write-back's due batch is
	 * started here, once the groups are handed back (writeback.c). */
	if (st->flags & ATOMIO_NO_BG_CHECKPOINT) {
		shm_unlock(st);
		wb_issue(st);
		shm_lock(st);
	}
}

/* --- adoption (see ADOPTION at the top) ------------------------------------------------ */

/* The entries of batch k still in it, in commit order (seq, then index):
 * found by their state and batch number, not by the links of a leader that
 * may have handed some back.  *n of them, malloc'd. */
static int batch_members_locked(atomio *st, uint64_t k, uint32_t **out, uint32_t *n)
{
	ASSERT_LOCKED(st);
	uint32_t cap = 64, c = 0, *v = malloc(cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 1; i <= SHM_ENTRIES; i++) {
		struct shm_ent *e = ENT(i);
		if (atomic_load(&e->state) != ENT_BATCHED || e->batch != k || !atomic_load(&e->owner))
			continue;
		if (c == cap) {
			uint32_t *w = realloc(v, 2 * cap * sizeof(*v));
			if (!w) {
				free(v);
				return -ENOMEM;
			}
			v = w;
			cap *= 2;
		}
		uint32_t j = c++;
		while (j && (ENT(v[j - 1])->seq > e->seq || (ENT(v[j - 1])->seq == e->seq && v[j - 1] > i))) {
			v[j] = v[j - 1];
			j--;
		}
		v[j] = i;
	}
	*out = v;
	*n = c;
	return 0;
}

/* Give batch k's space up with a pad and queue its groups again at the head
 * of the queue (private ones, and those of dead processes, are dropped).
 * Mutex held, dropped while writing the pad.  0, or the pad's error. */
static int adopt_pad_locked_drops(atomio *st, uint64_t k, int state)
{
	ASSERT_LOCKED_DROPS(st);
	const struct shm_bat *B = shm_bat(st->sh, k);
	int r = 0;
	if (!B->fast && B->bytes) {
		uint64_t off = B->off, len = align_up(B->bytes, st->block), seq0 = B->seq0;
		uint32_t nrec = B->nrec;
		shm_unlock(st);
		r = nrec ? log_write_pad(st, off, len, seq0, nrec) : 0;
		shm_lock(st);
	}
	struct shm_state *S = st->S;
	if (state == BAT_LOGGING && !B->fast)
		S->log_inflight--; /* its leader's write ended with its process */
	if (r < 0)
		return r;
	uint32_t *v, n;
	if (batch_members_locked(st, k, &v, &n) < 0)
		return -ENOMEM;
	S->pipe_groups -= B->n;
	for (uint32_t c = n; c-- > 0;) {
		struct shm_ent *e = ENT(v[c]);
		uint32_t fl = atomic_load(&e->flags);
		/* (a dead process's lazy group stays: it was visible, and its
		 * sync waits for it -- adopt_one_locked_drops re-logs such a
		 * batch anyway) */
		if ((fl & ENT_PRIVATE) || ((fl & ENT_ORPHAN) && !(fl & ENT_LAZY))) {
			shm_ent_free(st, v[c]);
			continue;
		}
		/* A fast-path write issued by the dead leader may have landed
		 * (BAT_LOGGING: in flight when it died; BAT_LOGGED: returned,
		 * the leader died waiting for its home turn -- durable unless
		 * it failed): the group is committed again, and whatever
		 * becomes of it, it is no longer "not written" (ENT_MAYBE). */
		if (B->fast && (state == BAT_LOGGING || state == BAT_LOGGED))
			atomic_fetch_or(&e->flags, ENT_MAYBE);
		e->fast = 0;
		atomic_store(&e->state, ENT_QUEUED);
		e->next = S->q_head;
		if (!S->q_head)
			S->q_tail = v[c];
		S->q_head = v[c];
		S->q_len++;
		q_count_locked(st, v[c], true);
	}
	free(v);
	shm_arena_advance_locked(st);
	return 0;
}

/* Redo batch k's home writes, all of them, in order.  Mutex held, dropped
 * while writing.  0 or an error. */
static int adopt_home_locked_drops(atomio *st, uint64_t k, struct view *vw)
{
	ASSERT_LOCKED_DROPS(st);
	HOLD_SET(st->home_holder); /* its home stage is this thread's now (adopt_locked_drops) */
	const struct shm_bat *B = shm_bat(st->sh, k);
	uint32_t *v, n;
	int r = batch_members_locked(st, k, &v, &n);
	if (r < 0)
		return r;
	if (B->fast) {
		/* Its atomic write returned before the home turn: nothing to redo. */
		free(v);
		return 0;
	}
	bool priv = B->priv;
	uint64_t off = B->off, seq0 = B->seq0;
	ckpt_home_begin_locked(st, k, NULL, 0); /* its files not known yet: all of them */
	shm_unlock(st);
	if (priv) {
		/* Its data was in the dead process: read it back from the log,
		 * where it is durable (home writes begin only after that). */
		r = replay_record(st, off, seq0);
	} else {
		r = view_build(st, v, n, vw);
		if (r == 0)
			r = engine_home(st, vw->g, vw->n);
		if (r < 0 && r != ATOMIO_ECORRUPT)
			home_err(st, vw, r);
	}
	free(v);
	shm_lock(st);
	if (r == ATOMIO_ECORRUPT)
		shm_damaged_locked(st, "a group's entry");
	return r;
}

/* Hand back what is left of batch k (its leader may have handed some back
 * before it died) and free its slot; counted: its groups still count in
 * pipe_groups.  Mutex held. */
static void adopt_finish_locked(atomio *st, uint64_t k, int r, bool counted)
{
	ASSERT_LOCKED(st);
	struct shm_state *S = st->S;
	const struct shm_bat *B = shm_bat(st->sh, k);
	uint32_t *v, n;
	if (batch_members_locked(st, k, &v, &n) == 0) {
		for (uint32_t c = 0; c < n; c++) {
			if (r == 0)
				atomic_fetch_add(&st->sh->stats.commits, 1);
			finish_ent_locked(st, v[c], r);
		}
		free(v);
	}
	if (counted)
		S->pipe_groups -= S->pipe_groups >= B->n ? B->n : S->pipe_groups;
	shm_arena_advance_locked(st);
	S->bstate[k % SHM_BATCHES] = BAT_FREE;
	S->bowner[k % SHM_BATCHES] = 0;
	shm_wake(st, &st->sh->ev_home);
}

/* Batch k holds a visible group (a lazy one: its owner returned, and every
 * process may have read it).  Mutex held. */
static bool bat_visible_locked(atomio *st, uint64_t k)
{
	ASSERT_LOCKED(st);
	uint32_t *v, n;
	if (batch_members_locked(st, k, &v, &n) < 0)
		return true; /* (the re-log is right for any batch; the pad only is faster) */
	bool vis = false;
	for (uint32_t c = 0; c < n && !vis; c++)
		vis = atomic_load(&ENT(v[c])->flags) & ENT_VISIBLE;
	free(v);
	return vis;
}

/* Write batch k's records again, byte for byte, at its place, durably: the
 * same groups (from the arena) with the same seqs.  Mutex held, dropped
 * while writing.  0, or an error (ATOMIO_ECORRUPT: its entries do not add
 * up to its records). */
static int adopt_relog_write_locked_drops(atomio *st, uint64_t k, struct view *vw)
{
	ASSERT_LOCKED_DROPS(st);
	const struct shm_bat *B = shm_bat(st->sh, k);
	const uint64_t off = B->off, bytes = B->bytes, len = align_up(bytes, st->block);
	uint32_t *v, n;
	int r = batch_members_locked(st, k, &v, &n);
	if (r < 0)
		return r;
	shm_unlock(st);
	/* The arena blocks stay: the groups are the batch's (this thread's now). */
	r = view_build(st, v, n, vw);
	free(v);
	void *buf = NULL;
	if (r == 0 && bytes && posix_memalign(&buf, 4096, len))
		r = -ENOMEM;
	if (r == 0 && bytes)
		r = build_records(st, buf, vw, bytes, false, 0);
	if (r == 0 && bytes)
		r = log_write_at(st, buf, len, off);
	free(buf);
	shm_lock(st);
	return r;
}

/* Adopt batch k (taken, logging or logged: no home write begun) holding a
 * visible group: RE-LOG instead of pad (see ADOPTION at the top).  A pad
 * would queue its groups again behind later batches that may be logged
 * already, and a crash then could keep a later lazy group and lose an
 * earlier one, which every process may have read (I1).  Its records are
 * rewritten at the same place with the same seqs; then its home turn, as
 * its leader would have taken it.  No guard_add_role: a leader that died
 * with the role held set guard_bad (reap_one_locked), and one that gave it
 * up had added them.  The dead leader's write, if any, ended with its
 * process (its lock byte goes after its descriptors), so nothing races the
 * rewrite.  Mutex held, dropped while writing. */
static void adopt_relog_locked_drops(atomio *st, uint64_t k, int state)
{
	ASSERT_LOCKED_DROPS(st);
	struct view vw = {0};
	int r = adopt_relog_write_locked_drops(st, k, &vw);
	struct shm_state *S = st->S;
	/* (counted until the rewrite is durable: an adopter that dies during
	 * it leaves the batch as it found it, for the next) */
	if (state == BAT_LOGGING)
		S->log_inflight--; /* its leader's write ended with its process */
	S->bstate[k % SHM_BATCHES] = BAT_LOGGED;
	if (r == ATOMIO_ECORRUPT)
		shm_damaged_locked(st, "a dead leader's batch");
	else if (r < 0)
		st_fail_locked(st, r); /* its records whole or torn: recovery decides */
	wake_next_locked(st);
	while (st->S->home_next != k) {
		if (st->S->orphans && adopt_below_locked_drops(st, k))
			continue;
		shm_wait_locked_drops(st, &st->sh->ev_home);
	}
	S = st->S;
	if (r == 0 && S->failed)
		r = ATOMIO_EUNKNOWN; /* durable, but not to be applied out of order (home_stage_locked_drops) */
	S->bstate[k % SHM_BATCHES] = BAT_HOMING;
	HOLD_SET(st->home_holder);
	if (r == 0)
		ckpt_home_begin_locked(st, k, vw.g, vw.n);
	shm_unlock(st);
	if (r == 0) {
		r = engine_home(st, vw.g, vw.n);
		if (r < 0)
			home_err(st, &vw, r);
	}
	shm_lock(st);
	home_done_locked(st, k, &vw, r, false);
	/* the records were written (by the dead leader, or here): a failure
	 * leaves the groups' fate to recovery */
	adopt_finish_locked(st, k, r < 0 ? ATOMIO_EUNKNOWN : 0, true);
	view_free(&vw);
}

static void adopt_one_locked_drops(atomio *st, uint64_t k)
{
	ASSERT_LOCKED_DROPS(st);
	int state = st->S->bstate[k % SHM_BATCHES];
	int r = 0;
	struct view vw = {0};
	/* Visible groups keep their place in the log (I1): re-logged.  The
	 * others are padded and committed again later (nobody saw them). */
	if ((state == BAT_TAKEN || state == BAT_LOGGING || state == BAT_LOGGED) && !shm_bat(st->sh, k)->fast &&
	    bat_visible_locked(st, k)) {
		adopt_relog_locked_drops(st, k, state);
		atomic_fetch_add(&st->sh->stats.adoptions, 1);
		return;
	}
	if (state == BAT_TAKEN || state == BAT_LOGGING || state == BAT_LOGGED) {
		r = adopt_pad_locked_drops(st, k, state);
		if (r < 0) {
			/* The pad did not land: the dead leader's records may be
			 * whole or torn; the store fails and recovery decides. */
			st_err(st, "%s: giving up the log space of a process that died: %s", st->log_path,
			       strerror(-r));
			st_fail_locked(st, r);
		}
		/* Its home turn passes with nothing to write (no later batch's
		 * home stage may begin before the pad is durable). */
		while (st->S->home_next != k) {
			/* an earlier batch's leader died too */
			if (st->S->orphans && adopt_below_locked_drops(st, k))
				continue;
			shm_wait_locked_drops(st, &st->sh->ev_home);
		}
		home_done_locked(st, k, &vw, r < 0 ? r : 0, true);
		/* a failed pad leaves the groups' fate to recovery (those not
		 * queued again: none, unless the pad failed) */
		adopt_finish_locked(st, k, r < 0 ? ATOMIO_EUNKNOWN : 0, r < 0);
	} else if (state == BAT_HOMING) {
		r = adopt_home_locked_drops(st, k, &vw);
		home_done_locked(st, k, &vw, r, shm_bat(st->sh, k)->fast);
		adopt_finish_locked(st, k, r < 0 ? ATOMIO_EUNKNOWN : 0, true);
	} else if (state == BAT_HOMED) {
		adopt_finish_locked(st, k, shm_bat(st->sh, k)->result, true);
	}
	view_free(&vw);
	atomic_fetch_add(&st->sh->stats.adoptions, 1);
}

/* Adopt the orphaned batches numbered below `below`, lowest first; true if
 * it adopted any.  A thread that holds a batch of its own not yet home (a
 * leader waiting for its home turn, an adopter waiting for the turn of the
 * batch it pads) passes its own number: a later batch's pad waits for that
 * batch's home turn, which comes only after its own -- adopting it there
 * would wait for itself.  Later orphans are left to the threads that wait
 * behind them. */
static bool adopt_below_locked_drops(atomio *st, uint64_t below)
{
	ASSERT_LOCKED_DROPS(st);
	bool any = false;
	while (st->S->orphans) {
		struct shm_state *S = st->S;
		uint64_t k = UINT64_MAX;
		for (unsigned b = 0; b < SHM_BATCHES; b++)
			if (S->bstate[b] != BAT_FREE && !S->bowner[b] && shm_bat(st->sh, b)->k < k)
				k = shm_bat(st->sh, b)->k;
		if (k == UINT64_MAX) {
			S->orphans = 0; /* none left after all */
			break;
		}
		if (k >= below)
			break;
		S->bowner[k % SHM_BATCHES] = (uint8_t)st->me;
		S->orphans--;
		adopt_one_locked_drops(st, k);
		any = true;
	}
	return any;
}

void adopt_locked_drops(atomio *st) { (void)adopt_below_locked_drops(st, UINT64_MAX); }

/* atomio_settle: until nothing but lazy groups is queued and every batch
 * numbered so far is home (or padded), lead what is queued -- groups of a process that died
 * while they waited are committed all the same, and must be home before the
 * caller reads -- adopt what dead leaders held, else wait (a wait that runs
 * out reaps the dead: shm_wait_locked_drops; it holds no batch of its own, so it
 * may adopt any).  A private group of another live
 * process at the queue's head is led by its owner only: wait for it.  While
 * other processes keep committing this may wait for their groups too; the
 * caller that needs it (the SQLite VFS) holds a lock that keeps every live
 * writer of the files it reads out.  0, or ATOMIO_EFAILED. */
int commit_settle(atomio *st)
{
	shm_lock(st);
	int r = 0;
	for (;;) {
		struct shm_state *S = st->S;
		if (S->failed) {
			r = ATOMIO_EFAILED;
			break;
		}
		/* Queued lazy groups are not waited for: reads overlay them (a
		 * reader needs no group home, only none half home unseen), and
		 * flushing them here would make every reader a sync, i.e. every
		 * SQLite transaction at synchronous=NORMAL through the VFS a
		 * device flush.  Batches in flight are waited for as before:
		 * one may hold a group that is not visible. */
		/* Every queued group is visible (lazy: indexed, so that every
		 * read atomio serves overlays it, in any process, whether its
		 * owner lives or not), or none is queued: none queued is not
		 * lazy (a group is made lazy and visible together, at its
		 * submit), which q_eager counts. */
		bool vis = S->q_eager == 0;
		if (vis && S->home_next == S->batch_next)
			break;
		/* A group that is not visible is queued: lead it, and the lazy
		 * groups before it with it (commit order). */
		if (!vis && S->sync_want < S->tk_next - 1)
			S->sync_want = S->tk_next - 1;
		if (!vis && can_lead_locked(st))
			lead_locked_drops(st);
		else if (S->orphans)
			adopt_locked_drops(st);
		else
			shm_wait_locked_drops(st, &st->sh->ev_home);
	}
	shm_unlock(st);
	return r;
}

/* --- the owner's side ------------------------------------------------------------------ */

/* Checks done before a group is queued.  0 or -E2BIG. */
int commit_prepare(atomio_tx *tx)
{
	atomio *st = tx->st;
	/* An empty group (only asynchronous ones are queued) has no record but
	 * keeps its place in the commit order. */
	tx->rec_len = tx->nsegs ? rec_len_for(tx->nsegs, tx->data_len) : 0;
	if (align_up(tx->rec_len, st->block) > st->area_size)
		return -E2BIG;
	/* Here, in the committing thread, so that threads compress at once
	 * (docs/API.md, "Wear"; LZ4 and why: docs/PERFORMANCE.md, "Wear"). */
	tx->cdata = NULL;
	tx->clen = 0;
	if (tx->nsegs && !(st->flags & ATOMIO_NO_COMPRESS)) {
		struct rec_src r = {.segs = tx->segs, .nsegs = tx->nsegs, .data_len = tx->data_len,
				    .rec_len = tx->rec_len};
		(void)codec_rec_compress(&r, &tx->cdata, &tx->clen, &tx->rec_len);
	}
	return 0;
}

/* The alignment a range's data needs in the arena: an O_DIRECT file's
 * memory alignment (its fast-path and ATOMIO_DIRECT_HOME writes go straight
 * from there), else 16. */
static uint64_t data_align(atomio *st, const struct seg *s)
{
	const struct afile *f = file_get(st, (int)s->file);
	uint64_t a = f && f->direct && f->dio_mem_align > 16 ? f->dio_mem_align : 16;
	return a > 4096 ? 4096 : a;
}

/* Bytes of the arena block tx's group needs, at most (alignment included). */
static uint64_t block_size(atomio *st, const atomio_tx *tx)
{
	uint64_t n = sizeof(struct arena_blk) + (uint64_t)tx->nsegs * sizeof(struct shm_seg);
	for (uint32_t j = 0; j < tx->nsegs; j++)
		if (tx->segs[j].kind == SEG_WRITE)
			n += tx->segs[j].len + data_align(st, &tx->segs[j]) - 1;
	return n + (tx->cdata ? tx->clen + 16 : 0);
}

/* Copy tx's group into its block at off (taken, not yet queued). */
static void block_fill(atomio *st, const atomio_tx *tx, uint64_t off)
{
	struct arena_blk *b = shm_blk(st->sh, off);
	struct shm_seg *d = (struct shm_seg *)(b + 1);
	uintptr_t base = (uintptr_t)b;
	uint64_t at = sizeof(*b) + (uint64_t)tx->nsegs * sizeof(*d);
	for (uint32_t j = 0; j < tx->nsegs; j++) {
		const struct seg *s = &tx->segs[j];
		d[j] = (struct shm_seg){.file = s->file, .kind = s->kind, .off = s->off, .len = s->len};
		if (s->kind != SEG_WRITE)
			continue;
		at = align_up(base + at, data_align(st, s)) - base;
		memcpy((char *)b + at, s->src, s->len);
		d[j].data = at;
		at += s->len;
	}
	if (tx->cdata) {
		at = align_up(at, 16);
		memcpy((char *)b + at, tx->cdata, tx->clen);
		b->cdata = at;
	}
}

/* Queue entry idx1: its ticket (its place in the commit order) and, a
 * visible group, its place in the read index and the FIFO -- all in the
 * one critical section that publishes it, so a reader sees it with the
 * commit's return.  -EAGAIN: the index has no room (nothing changed).
 * Mutex held. */
static int enqueue_locked(atomio *st, uint32_t idx1)
{
	ASSERT_LOCKED(st);
	struct shm_state *S = st->S;
	struct shm_ent *e = ENT(idx1);
	e->ticket = S->tk_next;
	e->t_ns = mono_ns();
	if (atomic_load(&e->flags) & ENT_VISIBLE) {
		int r = lz_index_locked(st, idx1);
		if (r < 0)
			return r;
		e->lz_next = 0;
		if (S->lz_tail)
			ENT(S->lz_tail)->lz_next = idx1;
		else
			S->lz_head = idx1;
		S->lz_tail = idx1;
		S->lz_n++;
		if (e->blk != UINT64_MAX)
			S->lz_bytes += shm_blk(st->sh, e->blk)->size;
		lazy_pressure_locked(st);
	} else {
		S->q_eager++;
	}
	S->tk_next++;
	e->next = 0;
	atomic_store(&e->state, ENT_QUEUED);
	if (S->q_tail)
		ENT(S->q_tail)->next = idx1;
	else
		S->q_head = idx1;
	S->q_tail = idx1;
	S->q_len++;
	if (S->fill_waiting && S->q_len >= S->fill_want)
		shm_wake(st, &st->sh->ev_fill);
	return 0;
}

/* No room for a group (an entry, arena space, the index's segs): while lazy
 * groups hold shared memory, say so (lz_press makes them due) and lead the
 * flush if this thread can -- else the room comes only when the delay runs
 * out, or never if the flusher is this thread; otherwise wait on ev (a
 * bounded wait, which reaps the dead).  A full arena therefore always
 * drains.  Mutex held, dropped. */
static void room_wait_locked_drops(atomio *st, struct shm_ev *ev, bool lazy)
{
	ASSERT_LOCKED_DROPS(st);
	if (st->S->lz_n) {
		st->S->lz_press = 1;
		if (lazy)
			atomic_fetch_add(&st->sh->stats.lazy_waits, 1);
		if (can_lead_locked(st)) {
			lead_locked_drops(st);
			return;
		}
		if (st->S->orphans) {
			adopt_locked_drops(st);
			return;
		}
		wake_next_locked(st);
	}
	shm_wait_locked_drops(st, ev);
}

int commit_submit_and_lock(atomio_tx *tx, unsigned mode)
{
	atomio *st = tx->st;
	ASSERT_UNLOCKED(st);
	uint64_t size = tx->nsegs ? block_size(st, tx) : 0;
	bool priv = size > shm_private_min(st->sh);
	uint32_t idx1;
	shm_lock(st);
	/* an entry: wait while every one is in use (reaping the dead's) */
	while (shm_ent_alloc(st, &idx1) < 0) {
		if (st->S->failed)
			break;
		room_wait_locked_drops(st, &st->sh->ev_space, mode == SUBMIT_LAZY);
	}
	if (st->S->failed) {
		shm_unlock(st);
		return ATOMIO_EFAILED;
	}
	struct shm_ent *e = ENT(idx1);
	e->nsegs = tx->nsegs;
	e->data_len = tx->data_len;
	e->rec_len = tx->rec_len;
	e->clen = tx->cdata ? tx->clen : 0;
	e->tx = (uint64_t)(uintptr_t)tx;
	/* A lazy group is never private (commit_lazy): its bytes must outlive
	 * its process (ENT_VISIBLE: reads of every process, survivors commit it). */
	atomic_store(&e->flags, mode == SUBMIT_ASYNC  ? ENT_ASYNC | (priv ? ENT_PRIVATE : 0u)
				: mode == SUBMIT_LAZY ? ENT_LAZY | ENT_VISIBLE
						      : (priv ? ENT_PRIVATE : 0u));
	tx->ent = idx1;
	uint64_t off = UINT64_MAX;
	while (size && !priv && !st->S->failed) {
		int r = shm_arena_alloc_locked(st, size, idx1, &off);
		if (r == 0)
			break;
		shm_arena_advance_locked(st);
		room_wait_locked_drops(st, &st->sh->ev_space, mode == SUBMIT_LAZY);
	}
	e->blk = off;
	if (st->S->failed) {
		shm_ent_free(st, idx1);
		shm_unlock(st);
		return ATOMIO_EFAILED;
	}
	shm_unlock(st);
	if (off != UINT64_MAX)
		block_fill(st, tx, off); /* outside the mutex: the block is ours */
	shm_lock(st);
	if (st->S->failed) {
		shm_ent_free(st, idx1);
		shm_arena_advance_locked(st);
		shm_unlock(st);
		return ATOMIO_EFAILED;
	}
	while (enqueue_locked(st, idx1) < 0) {
		/* the index's seg pool is full: it drains as groups are done */
		room_wait_locked_drops(st, &st->sh->ev_done, true);
		if (st->S->failed) {
			shm_ent_free(st, idx1);
			shm_arena_advance_locked(st);
			shm_unlock(st);
			return ATOMIO_EFAILED;
		}
	}
	return 0; /* the mutex stays held */
}

/* commit_tx once commit_prepare passed. */
static int commit_prepared(atomio_tx *tx)
{
	atomio *st = tx->st;
	int r = commit_submit_and_lock(tx, SUBMIT_SYNC);
	if (r < 0)
		return r;
	struct shm_ent *e = ENT(tx->ent);
	for (;;) {
		uint32_t es = atomic_load(&e->state);
		if (es == ENT_DONE)
			break;
		if (es == ENT_QUEUED && can_lead_locked(st))
			lead_locked_drops(st);
		else if (st->S->orphans)
			adopt_locked_drops(st);
		else
			shm_wait_ent_locked_drops(st, e);
	}
	r = e->result;
	shm_ent_free(st, tx->ent);
	tx->ent = 0;
	shm_unlock(st);
	files_close_stale(st); /* a quiet point of this thread: it holds no descriptor */
	return r;
}

int commit_tx(atomio_tx *tx)
{
	if (tx->nsegs == 0)
		return 0; /* an empty group is trivially atomic */
	int r = commit_prepare(tx);
	return r < 0 ? r : commit_prepared(tx);
}


/* --- lazy groups (see LAZY GROUPS at the top) ------------------------------------------- */

/* tx's group may stay lazy: small enough for the arena (never private: I4,
 * its bytes must outlive its process), few enough segs for the index, and
 * no file of it eager (mapped: a kernel reader must see it at once). */
static bool lazy_fits(atomio *st, const atomio_tx *tx)
{
	struct shm *sh = st->sh;
	if (block_size(st, tx) > shm_private_min(sh) || tx->nsegs > SHM_LZSEGS / 4)
		return false;
	if (!sh->lzf_off)
		return true;
	for (uint32_t j = 0; j < tx->nsegs; j++)
		if (tx->segs[j].file < MAX_FILES && atomic_load(&shm_lzf(sh, tx->segs[j].file)->eager) > 0)
			return false;
	return true;
}

int commit_lazy(atomio_tx *tx, uint64_t *ticket, enum lz_flusher fl)
{
	atomio *st = tx->st;
	*ticket = 0; /* an empty group: nothing to wait for (a sync of ticket 0 returns at once) */
	if (tx->nsegs == 0)
		return st_failed(st) ? ATOMIO_EFAILED : 0;
	int r = commit_prepare(tx);
	if (r < 0)
		return r;
	/* The flusher: this process's worker (async.c started it), or, with
	 * ATOMIO_NO_BG_CHECKPOINT, the committers, which lead a due flush
	 * below.  A worker that could not be started: no lazy group, it is
	 * made durable now. */
	bool thread = fl == LZ_WORKER;
	if (!lazy_fits(st, tx) || fl == LZ_NO_THREAD) {
		atomic_fetch_add(&st->sh->stats.lazy_eager, 1);
		return commit_prepared(tx);
	}
	r = commit_submit_and_lock(tx, SUBMIT_LAZY);
	if (r < 0)
		return r;
	struct shm_state *S = st->S;
	uint32_t idx1 = tx->ent;
	*ticket = ENT(idx1)->ticket;
	if (st->lz_mine_hi < *ticket)
		st->lz_mine_hi = *ticket;
	/* From here on the entry is the queue's: whoever finishes it frees it. */
	tx->ent = 0;
	atomic_fetch_add(&st->sh->stats.lazy_commits, 1);
	if (thread && !S->lz_flusher)
		shm_wake(st, &shm_procs(st->sh)[st->me - 1].wake); /* our worker takes the role */
	else if (S->q_head == idx1)
		lz_wake_flusher_locked(st); /* a new deadline: the flusher's sleep was unbounded by one */
	if (!thread && can_lead_locked(st))
		lead_locked_drops(st); /* due (the delay ran out, shared memory fills) */
	shm_unlock(st);
	return 0;
}

uint64_t commit_sync_target(atomio *st, int file)
{
	struct shm *sh = st->sh;
	if (file >= 0 && sh->lzf_off)
		return atomic_load(&shm_lzf(sh, (uint32_t)file)->hi);
	/* store-wide, or no index to say which groups touched the file: every
	 * ticket handed out so far (stronger) */
	shm_lock(st);
	uint64_t t = st->S->tk_next ? st->S->tk_next - 1 : 0;
	shm_unlock(st);
	return t;
}

/* A visible group with a ticket <= target is not done.  Mutex held. */
static bool lz_pending_locked(atomio *st, uint64_t target)
{
	ASSERT_LOCKED(st);
	const struct shm_state *S = st->S;
	return S->lz_n && S->lz_head && ENT(S->lz_head)->ticket <= target;
}

/* A failed store's answer to a sync up to target: ATOMIO_EUNKNOWN when a
 * visible group in the range failed after its record write was issued
 * (recovery may find it), else ATOMIO_EFAILED.  Mutex held. */
static int lz_sync_err_locked(atomio *st, uint64_t target)
{
	ASSERT_LOCKED(st);
	uint64_t u = st->S->lz_unk_min;
	return u && u <= target ? ATOMIO_EUNKNOWN : ATOMIO_EFAILED;
}

int commit_sync(atomio *st, uint64_t target, unsigned flags)
{
	shm_lock(st);
	struct shm_state *S = st->S;
	int r = 0;
	if (target >= S->tk_next)
		target = S->tk_next - 1; /* (sync_want never names a ticket not yet handed out) */
	/* The common case (the 2nd..Nth fsync of a checkpointer): nothing to
	 * wait for, no syscall.  A failed store still says so: its failure
	 * took the pending groups out of the FIFO, so an empty one proves
	 * nothing then. */
	if (!lz_pending_locked(st, target)) {
		r = S->failed ? lz_sync_err_locked(st, target) : 0;
		shm_unlock(st);
		return r;
	}
	if (S->sync_want < target)
		S->sync_want = target;
	wake_next_locked(st); /* the flusher, or whoever may lead now */
	if (flags & ATOMIO_SYNC_NOWAIT) {
		r = S->failed ? lz_sync_err_locked(st, target) : 0;
		shm_unlock(st);
		return r;
	}
	atomic_fetch_add(&st->sh->stats.syncs_waited, 1);
	/* Done (durable AND home: a sync, then the kernel reading the file, is
	 * correct) in ticket order: batches are handed back in number order,
	 * so waiting for the groups also waits for every earlier log write. */
	for (;;) {
		S = st->S;
		if (!lz_pending_locked(st, target)) {
			r = S->failed ? lz_sync_err_locked(st, target) : 0;
			break;
		}
		if (S->failed && !can_lead_locked(st)) {
			r = lz_sync_err_locked(st, target);
			break;
		}
		if (can_lead_locked(st))
			lead_locked_drops(st); /* (a failed store: the leader fails the queue) */
		else if (S->orphans)
			adopt_locked_drops(st);
		else
			shm_wait_locked_drops(st, &st->sh->ev_done);
	}
	shm_unlock(st);
	files_close_stale(st); /* a quiet point of this thread: it holds no descriptor */
	return r;
}

uint64_t lz_flusher_wait_ns_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	struct shm_state *S = st->S;
	/* The role is free (nobody took it, or its holder died or left: the
	 * reap clears it): this worker takes it. */
	if (!S->lz_flusher)
		S->lz_flusher = st->me;
	if (S->lz_flusher != st->me || !S->q_head || !(atomic_load(&ENT(S->q_head)->flags) & ENT_LAZY))
		return SHM_REAP_NS;
	uint64_t due = ENT(S->q_head)->t_ns + lz_delay_ns(st), now = mono_ns();
	/* Past due but not led: a batch or a checkpoint is in the way; whoever
	 * ends it wakes this worker (wake_next_locked). */
	if (due <= now)
		return SHM_REAP_NS;
	return due - now < SHM_REAP_NS ? due - now : SHM_REAP_NS;
}

void lz_flusher_leave(atomio *st)
{
	shm_lock(st);
	if (st->S->lz_flusher == st->me)
		st->S->lz_flusher = 0; /* another worker takes it at its next look */
	shm_unlock(st);
}
