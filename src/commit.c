/*
 * commit.c: group commit, as a two-stage pipeline.
 *
 * Committing threads queue their groups; the queue order is the commit
 * order.  Two roles move them on:
 *
 *  - the LOG role.  A thread whose group is queued and finds the role free
 *    takes it, takes every queued group that fits as one batch, numbers the
 *    batch, writes the batch's records as ONE log write made durable (one
 *    device wait for all of them), and gives the role up at once, so that
 *    the next batch's log write can start while this batch goes home;
 *  - the HOME stage.  The same thread then waits until every earlier batch
 *    is home (home_next == its number), performs its batch's home writes in
 *    group order, advances home_next, and marks the groups done.
 *
 * Hence: a home write is issued only after the record that can redo it is
 * durable; home writes land in commit order (batches in number order, groups
 * in queue order within a batch); and a commit returns only after its home
 * writes were issued (to the page cache) or completed (O_DIRECT), so any
 * read of the file sees the group.  Throughput grows with threads: while one
 * log write is in flight the next batch gathers in the queue, and while one
 * batch is applied home the next one's log write runs.
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
 * them, at most a quarter of a log write (fill_wait_locked): waiting that
 * long to share a write costs a latecomer less than the whole write it
 * would otherwise wait for.  A second write in flight (a second slot)
 * starts only when a full batch is queued.  A lone committer never waits:
 * it is the whole population.  (Measured in the README, "Speed at the
 * defaults": from 8 threads, 2.6 groups per log write before, 6-7 after,
 * at the same rate.)
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
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "internal.h"

#define MAX_BATCH (8u << 20)   /* bytes of records per log write */
#define STAGE_KEEP (16u << 20) /* staging kept between batches */
/* The fill wait's bounds (fill_wait_locked): a quarter of a log write, but
 * never so short that no thread could be woken in time, nor longer than a
 * slow disk's write would justify. */
#define FILL_WAIT_MIN_NS 10000u
#define FILL_WAIT_MAX_NS 1000000u

/* May a thread start leading a batch now?  The log role is free, no
 * role_acquire is waiting, and no log write is in flight -- or a slot is free
 * and a full batch waits (at least two groups, and fill_want): a second
 * write in flight overlaps device waits, but a small batch while another
 * write runs would only spend a device wait where waiting for that write and
 * sharing the next is cheaper.  Lock held. */
bool can_lead_locked(const atomio *st)
{
	return !st->log_busy && !st->role_waiters &&
	       (!st->log_inflight ||
		(st->log_inflight < LOG_SLOTS && st->q_len >= 2 && st->q_len >= st->fill_want));
}

/* Let whoever should lead next know: the waiter of the queue's head -- or,
 * when that is an asynchronous group and the worker is busy elsewhere, the
 * first committing thread behind it (it leads the whole queue from the head)
 * -- and anyone waiting in role_acquire (or for writes in flight to drain). */
static void wake_next_locked(atomio *st)
{
	if (can_lead_locked(st)) {
		unsigned looked = 0;
		for (atomio_tx *t = st->q_head; t && looked < 64; t = t->qnext, looked++) {
			if (t->wake != &st->worker_cv) {
				pthread_cond_signal(t->wake);
				break;
			}
			if (st->worker_idle) {
				pthread_cond_signal(&st->worker_cv);
				break;
			}
		}
	}
	pthread_cond_broadcast(&st->role_cv);
}

/* Wait until every batch logged so far is durable (no log write in flight)
 * and home.  Lock held; the log role too, so no new batch starts. */
static void drain_locked(atomio *st)
{
	while (st->log_inflight)
		pthread_cond_wait(&st->role_cv, &st->lock);
	while (st->home_next != st->batch_next)
		pthread_cond_wait(&st->home_cv, &st->lock);
}

int role_acquire(atomio *st)
{
	pthread_mutex_lock(&st->lock);
	st->role_waiters++;
	pthread_cond_signal(&st->fill_cv); /* a leader's fill wait ends at once */
	while (st->log_busy)
		pthread_cond_wait(&st->role_cv, &st->lock);
	st->role_waiters--;
	st->log_busy = true;
	/* Every batch logged so far must be durable and home: a checkpoint
	 * syncs the data files and then gives up the records that could redo
	 * them. */
	drain_locked(st);
	/* ... and no early write-back in flight (writeback.c): atomio_close
	 * takes the role before it closes the files that call uses. */
	while (st->wb.busy)
		pthread_cond_wait(&st->role_cv, &st->lock);
	pthread_mutex_unlock(&st->lock);
	return 0;
}

void role_release(atomio *st)
{
	pthread_mutex_lock(&st->lock);
	st->log_busy = false;
	wake_next_locked(st);
	pthread_mutex_unlock(&st->lock);
}

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

/* Lay one group out as a record at buf (format.h). */
static void build_record(atomio *st, const atomio_tx *tx, char *buf, bool last)
{
	struct rec_src r = {.segs = tx->segs, .nsegs = tx->nsegs, .data_len = tx->data_len,
			    .rec_len = tx->rec_len, .cdata = tx->cdata, .clen = tx->clen};
	codec_rec_build(buf, &r, tx->seq, st->rec_epoch, last, st->store_id);
}

/* Where a log write of len bytes can go now (area offset), and how many
 * bytes fit there (*room); UINT64_MAX if nowhere until a checkpoint frees
 * space.  Live records run from head to tail around the ring (checkpoint.c);
 * a write never wraps inside itself: it goes at the tail, or at the area's
 * start when the tail is too close to the end.  Lock held. */
static uint64_t log_place_locked(const atomio *st, uint64_t len, uint64_t *room)
{
	if (st->used == 0 || st->tail > st->head) {
		if (st->tail + len <= st->area_size) {
			*room = st->area_size - st->tail;
			return st->tail;
		}
		if (len <= st->head) {
			*room = st->head;
			return 0;
		}
		return UINT64_MAX;
	}
	if (st->tail + len <= st->head) { /* wrapped: free space is [tail, head) */
		*room = st->head - st->tail;
		return st->tail;
	}
	return UINT64_MAX;
}

void commit_init(atomio *st)
{
	/* after recovery: an empty log at the superblock's head */
	st->rec_epoch = st->sb.epoch;
	st->head = st->tail = st->sb.head_off;
	st->head_seq = st->home_seq = st->sb.head_seq;
	st->home_off = st->tail;
	st->used = 0;
}

/* Lay a batch's records (txs linked by qnext, n of them, 'bytes' of records)
 * out in the slot's staging buffer.  Log role held (the guard is the role's),
 * lock not held. */
static int build_batch_role(atomio *st, struct logslot *ls, atomio_tx *first, uint32_t n, uint64_t bytes,
		       uint64_t live_seq)
{
	uint64_t len = align_up(bytes, st->block);
	int r = stage_reserve(ls, len);
	if (r < 0)
		return r;
	char *p = ls->stage;
	uint32_t i = 0;
	for (atomio_tx *t = first; i < n; t = t->qnext, i++) {
		if (!t->nsegs)
			continue; /* an empty group has no record */
		build_record(st, t, p, (uint64_t)(p - (char *)ls->stage) + t->rec_len == bytes);
		guard_add_role(st, t, live_seq);
		p += t->rec_len;
	}
	memset(p, 0, len - bytes);
	return 0;
}

/* Write the built batch at area offset off, durably.  A write slot held, lock
 * not held: up to LOG_SLOTS of these run at once. */
static int write_batch(atomio *st, struct logslot *ls, uint64_t bytes, uint64_t off)
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
	if (r == 0) {
		uint64_t took = mono_ns() - t0;
		pthread_mutex_lock(&st->lock);
		st->log_write_ns = st->log_write_ns ? (st->log_write_ns * 7 + took) / 8 : took;
		pthread_mutex_unlock(&st->lock);
		atomic_fetch_add(&st->stats.log_syncs, 1);
		atomic_fetch_add(&st->stats.batches, 1);
		atomic_fetch_add(&st->stats.bytes_logged, len);
	}
	return r;
}

/* An asynchronous group is finished: onto the completion list that
 * atomio_poll empties (async.c).  Lock held. */
static void complete_async_locked(atomio *st, atomio_tx *tx)
{
	bool was_empty = !st->cq_head;
	tx->cnext = NULL;
	if (st->cq_tail)
		st->cq_tail->cnext = tx;
	else
		st->cq_head = tx;
	st->cq_tail = tx;
	st->async_busy--;
	if (was_empty && st->efd >= 0) {
		uint64_t one = 1;
		/* Cannot fail but with a full counter, which is readable anyway. */
		(void)sys_write(st->efd, &one, sizeof(one));
	}
	pthread_cond_broadcast(&st->cq_cv);
}

/* A group is finished: hand it to its owner.  Lock held. */
static void finish_locked(atomio *st, atomio_tx *t, int result)
{
	t->result = result;
	t->state = TX_DONE; /* the owner may free it from here on */
	if (t->done)
		complete_async_locked(st, t);
	else
		pthread_cond_signal(t->wake);
}

static void fail_queue_locked(atomio *st, int err)
{
	atomio_tx *t = st->q_head;
	st->q_head = st->q_tail = NULL;
	st->q_len = 0;
	while (t) {
		atomio_tx *next = t->qnext;
		finish_locked(st, t, err);
		t = next;
	}
}

/* One batch on its way through the pipeline (lead_locked). */
struct batch {
	atomio_tx *first, *last; /* its groups, linked by qnext */
	uint32_t n;
	bool fast;         /* one group, written by the kernel fast path */
	uint64_t bytes;    /* of records (0: only empty groups) */
	uint64_t off;      /* area offset of its log write */
	uint64_t room;     /* bytes free at off */
	uint64_t live_seq; /* the head seq when it was formed (the guard's) */
	uint64_t end_seq, end_off; /* where a checkpoint may cut once it is home */
	uint64_t k;        /* its number: home stages run in this order */
	unsigned slot;     /* its log write slot */
	/* Its record (or fast-path) write was issued: from then on a failure
	 * leaves its groups' fate to recovery (ATOMIO_EUNKNOWN), never "not
	 * written". */
	bool issued;
};

#define REQUEUED 1 /* fast_stage: the kernel refused; the group is queued again */

/* Stage 1: wait until the queue's head can go -- a fast-path group once no
 * log write is in flight, a logged one once the log has room -- freeing
 * space when the log is full.  false: nothing to lead (queue empty or store
 * failed); the role is given up.  Lock and log role held; the lock is
 * dropped while a full checkpoint runs. */
static bool wait_for_room_locked(atomio *st, struct batch *b)
{
	for (;;) {
		b->first = st->q_head;
		if (st->failed || !b->first) {
			/* Nothing may be written after an error whose effect on
			 * the media is unknown. */
			if (st->failed)
				fail_queue_locked(st, ATOMIO_EFAILED);
			st->log_busy = false;
			wake_next_locked(st);
			return false;
		}
		b->fast = fast_eligible_locked(st, b->first);
		if (b->fast && st->log_inflight) {
			/* A fast-path write is durable the moment it lands: every
			 * earlier log write must be durable first (commit order). */
			pthread_cond_wait(&st->role_cv, &st->lock);
			continue;
		}
		if (b->fast)
			return true;
		b->off = log_place_locked(st, align_up(b->first->rec_len, st->block), &b->room);
		/* Also wait when the page cache holds twice the dirty limit
		 * (checkpoint.c): the checkpoint bounds it. */
		if (b->off != UINT64_MAX && !checkpoint_must_wait_locked(st))
			return true;
		/* Log full.  A background checkpoint is freeing space: wait for
		 * it.  Else free it all: that needs every logged batch home
		 * first; it runs with the role held, unlocked. */
		atomic_fetch_add(&st->stats.log_full_waits, 1);
		if (st->ckpt_busy) {
			pthread_cond_wait(&st->ckpt_cv, &st->lock);
			continue;
		}
		drain_locked(st);
		pthread_mutex_unlock(&st->lock);
		checkpoint_full_role(st);
		pthread_mutex_lock(&st->lock);
	}
}

/* Stage 2: take the batch off the head of the queue, give its groups their
 * seqs and its log write its place in the ring, number it.  Lock and log
 * role held. */
static void take_batch_locked(atomio *st, struct batch *b)
{
	b->n = 0;
	b->bytes = 0;
	if (b->fast) {
		b->n = 1;
		b->last = b->first;
	} else {
		for (atomio_tx *t = b->first; t; t = t->qnext) {
			uint64_t nb = b->bytes + t->rec_len;
			if (b->n && (align_up(nb, st->block) > b->room || nb > MAX_BATCH ||
				     fast_eligible_locked(st, t)))
				break;
			if (t->nsegs)
				t->seq = st->next_seq++;
			b->bytes = nb;
			b->n++;
			b->last = t;
		}
		uint64_t len = align_up(b->bytes, st->block);
		/* Never where the log's lazy zeroing writes (logfile.c): wait
		 * for its chunk, then keep it above this batch. */
		while (st->zero_busy && b->off + len > st->zero_lo)
			pthread_cond_wait(&st->role_cv, &st->lock);
		if (b->off + len > st->zero_lo)
			st->zero_lo = b->off + len;
		if (b->off != st->tail)
			st->used += st->area_size - st->tail; /* a wrap skips the end */
		st->used += len;
		st->tail = b->off + len;
		/* the ring's invariant: head + used lands on the tail */
		ASSERT(st->used <= st->area_size);
		ASSERT((st->head + st->used) % st->area_size == st->tail % st->area_size);
	}
	b->live_seq = st->head_seq;
	b->end_seq = st->next_seq;
	b->end_off = st->tail % st->area_size;
	b->k = st->batch_next++;
	st->q_len -= b->n;
	st->pipe_groups += b->n;
	st->q_head = b->last->qnext;
	if (!st->q_head)
		st->q_tail = NULL;
	uint32_t i = 0;
	for (atomio_tx *t = b->first; i < b->n; t = t->qnext, i++) {
		t->state = TX_BATCHED;
		t->batch = b->k;
		t->fast = b->fast;
	}
	/* a free write slot: there is one, since can_lead_locked held on entry
	 * and writes in flight only finish meanwhile */
	b->slot = 0;
	while (st->slot_busy & (1u << b->slot))
		b->slot++;
	ASSERT(b->slot < LOG_SLOTS);
}

/* Stage 3, fast path: the group's one write in place, durably, instead of a
 * log write.  Called with the lock held, which it drops while writing; gives
 * the role up.  0, a negative errno, or REQUEUED (role still held). */
static int fast_stage_locked(atomio *st, struct batch *b)
{
	pthread_mutex_unlock(&st->lock);
	atomio_tx *first = b->first;
	const struct seg *s = &first->segs[0];
	struct afile *f = file_get(st, (int)s->file);
	int r = f ? engine_fast_write(st, f, s->src, s->len, s->off) : -EBADF;
	if (r == -EOPNOTSUPP || r == -EINVAL) {
		/* The kernel refused RWF_ATOMIC before writing anything (limits
		 * it did not report, or a filesystem change): no fast path for
		 * this file from now on; the group goes back to the head of the
		 * queue and takes the log.  Only the role holder numbers
		 * batches, so k is still the last number given out. */
		f->caps.fast_max = 0;
		pthread_mutex_lock(&st->lock);
		st->batch_next--;
		st->q_len++;
		first->state = TX_QUEUED;
		first->fast = false;
		if (!st->q_head)
			st->q_tail = first;
		first->qnext = st->q_head;
		st->q_head = first;
		return REQUEUED;
	}
	b->issued = f != NULL;
	if (r < 0 && f) {
		char path[PATH_MAX];
		st_err(st, "atomic write to data file %s: %s",
		       file_resolve_path(st, f, path, sizeof(path)) == 0 ? path : f->path,
		       strerror(-r));
	} else if (r == 0) {
		atomic_fetch_add(&st->stats.fast_writes, 1);
	}
	pthread_mutex_lock(&st->lock);
	if (r < 0)
		st_fail_locked(st, r);
	st->log_busy = false;
	wake_next_locked(st);
	return r;
}

/* Stage 3, logged: lay the records out (role held), give the role up (the
 * next batch is formed while this one is written), write them in a slot.
 * Called and returns with the lock held, dropped while building and writing.
 * 0 or a negative errno. */
static int log_stage_locked(atomio *st, struct batch *b)
{
	struct logslot *ls = &st->slots[b->slot];
	pthread_mutex_unlock(&st->lock);
	int r = b->bytes ? build_batch_role(st, ls, b->first, b->n, b->bytes, b->live_seq) : 0;
	pthread_mutex_lock(&st->lock);
	st->log_busy = false;
	if (r < 0) {
		st_fail_locked(st, r);
	} else if (b->bytes) {
		st->log_inflight++;
		st->slot_busy |= 1u << b->slot;
		wake_next_locked(st);
		pthread_mutex_unlock(&st->lock);
		b->issued = true;
		r = write_batch(st, ls, b->bytes, b->off);
		pthread_mutex_lock(&st->lock);
		st->log_inflight--;
		st->slot_busy &= ~(1u << b->slot);
		if (r < 0) {
			/* Unknown whether any of it reached the media: refuse
			 * further commits; reopening replays whatever did, whole. */
			st_fail_locked(st, r);
		}
	}
	wake_next_locked(st);
	return r;
}

/* A batch's home writes failed: name the files they went to (the engine
 * reports the first error, not which write had it). */
static void home_err(atomio *st, atomio_tx *first, uint32_t n, int err)
{
	char names[2 * PATH_MAX + 64] = "";
	size_t used = 0;
	uint32_t shown = 0, last = UINT32_MAX, i = 0;
	for (atomio_tx *t = first; i < n; t = t->qnext, i++)
		for (uint32_t j = 0; j < t->nsegs && shown < 3; j++) {
			uint32_t id = t->segs[j].file;
			if (id == last)
				continue;
			last = id;
			struct afile *f = atomic_load(&st->files[id]);
			char path[PATH_MAX];
			if (!f)
				continue;
			int k = snprintf(names + used, sizeof(names) - used, "%s%s", shown ? ", " : "",
					 file_resolve_path(st, f, path, sizeof(path)) == 0 ? path : f->path);
			if (k < 0 || (size_t)k >= sizeof(names) - used)
				break;
			used += (size_t)k;
			shown++;
		}
	st_err(st, "writing home data to %s%s: %s", names, shown == 3 ? ", ..." : "", strerror(-err));
}

/* Stage 4: the home writes, once every earlier batch is home (commit
 * order).  Called and returns with the lock held, dropped while writing.
 * Returns the batch's result. */
static int home_stage_locked(atomio *st, struct batch *b, int r)
{
	while (st->home_next != b->k)
		pthread_cond_wait(&st->home_cv, &st->lock);
	if (r == 0 && st->failed) {
		/* The store failed while this batch's write was in flight (an
		 * earlier batch's log or home write, a background checkpoint's
		 * sync): this batch is durable in the log but must not be
		 * applied out of order.  Reopening replays it -- unless an
		 * earlier record it follows is torn: recovery decides. */
		r = ATOMIO_EUNKNOWN;
	}
	pthread_mutex_unlock(&st->lock);
	if (r == 0 && !b->fast) {
		r = engine_home(st, b->first, b->n);
		if (r < 0)
			home_err(st, b->first, b->n, r);
	}
	pthread_mutex_lock(&st->lock);
	if (r < 0)
		st_fail_locked(st, r);
	else if (!b->fast) {
		dirty_note_locked(st, b->first, b->n);
		wb_note_locked(st, b->first, b->n);
	}
	st->home_next = b->k + 1;
	pthread_cond_broadcast(&st->home_cv);
	if (r == 0 && !b->fast && b->bytes) {
		st->home_seq = b->end_seq;
		st->home_off = b->end_off;
		checkpoint_after_home_locked(st); /* the policy may want one now */
	}
	return r;
}

/* Stage 5: count the groups and hand each to its owner.  Lock held. */
static void finish_batch_locked(atomio *st, const struct batch *b, int r)
{
	st->pipe_groups -= b->n;
	uint32_t i = 0;
	for (atomio_tx *t = b->first, *next; i < b->n; t = next, i++) {
		next = t->qnext;
		if (r == 0) {
			atomic_fetch_add(&st->stats.commits, 1);
			if (!b->fast && t->nsegs) {
				atomic_fetch_add(&st->stats.bytes_raw, t->data_len);
				if (t->cdata)
					atomic_fetch_add(&st->stats.records_compressed, 1);
			}
		}
		finish_locked(st, t, r);
	}
	/* Without a checkpointer thread, the paced write-back's due batch is
	 * started here, once the groups are handed back (writeback.c). */
	if (st->flags & ATOMIO_NO_BG_CHECKPOINT)
		wb_issue_locked(st);
}

/* Before a batch is formed with no log write in flight: wait, a bounded
 * time, for the groups of the recent population that are not queued yet
 * (see BATCHES THAT FILL above).  Lock and log role held; the lock is
 * dropped while waiting. */
static void fill_wait_locked(atomio *st)
{
	uint32_t pop = st->q_len + st->pipe_groups;
	if (pop >= st->fill_want)
		st->fill_want = pop;
	else
		st->fill_want--;
	/* (A fast-path group is a batch of its own: nothing to wait for.) */
	if (st->q_len >= st->fill_want || st->log_inflight || fast_eligible_locked(st, st->q_head))
		return;
	uint64_t ns = st->log_write_ns / 4;
	ns = ns < FILL_WAIT_MIN_NS ? FILL_WAIT_MIN_NS : ns > FILL_WAIT_MAX_NS ? FILL_WAIT_MAX_NS : ns;
	struct timespec dl = mono_deadline(ns);
	st->fill_waiting = true;
	/* A checkpoint or close waiting for the role, or a failure, ends the
	 * wait: the batch goes as it is. */
	while (st->q_len < st->fill_want && !st->failed && !st->role_waiters)
		if (pthread_cond_timedwait(&st->fill_cv, &st->lock, &dl) == ETIMEDOUT)
			break;
	st->fill_waiting = false;
}

/* Take the log role and move one batch from the head of the queue through
 * the stages above.  Called and returns with the lock held, which the
 * stages drop for their I/O and wait on; the caller checked can_lead_locked
 * and that the queue is not empty. */
void lead_locked(atomio *st)
{
	struct batch b;
	int r;
	st->log_busy = true;
	fill_wait_locked(st);
	do {
		if (!wait_for_room_locked(st, &b))
			return;
		take_batch_locked(st, &b);
		b.issued = false;
		r = b.fast ? fast_stage_locked(st, &b) : log_stage_locked(st, &b);
	} while (r == REQUEUED);
	r = home_stage_locked(st, &b, r);
	/* What the owners are told: 0, or "not written" (nothing of the batch
	 * reached the log: the error itself), or "unknown" once its write was
	 * issued; the cause is in the error buffer and in st->failed. */
	if (r < 0 && b.issued)
		r = ATOMIO_EUNKNOWN;
	finish_batch_locked(st, &b, r);
}

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
	 * (README, "Wear": LZ4 and why). */
	tx->cdata = NULL;
	tx->clen = 0;
	if (tx->nsegs && !(st->flags & ATOMIO_NO_COMPRESS)) {
		struct rec_src r = {.segs = tx->segs, .nsegs = tx->nsegs, .data_len = tx->data_len,
				    .rec_len = tx->rec_len};
		(void)codec_rec_compress(&r, &tx->cdata, &tx->clen, &tx->rec_len);
	}
	return 0;
}

void commit_enqueue_locked(atomio *st, atomio_tx *tx)
{
	st->q_len++;
	tx->state = TX_QUEUED;
	tx->qnext = NULL;
	if (st->q_tail)
		st->q_tail->qnext = tx;
	else
		st->q_head = tx;
	st->q_tail = tx;
	if (st->fill_waiting && st->q_len >= st->fill_want)
		pthread_cond_signal(&st->fill_cv);
}

int commit_tx(atomio_tx *tx)
{
	atomio *st = tx->st;
	if (tx->nsegs == 0)
		return 0; /* an empty group is trivially atomic */
	int r = commit_prepare(tx);
	if (r < 0)
		return r;
	pthread_cond_t cv;
	pthread_cond_init(&cv, NULL);
	tx->wake = &cv;
	tx->done = NULL;
	pthread_mutex_lock(&st->lock);
	if (st->failed) {
		pthread_mutex_unlock(&st->lock);
		pthread_cond_destroy(&cv);
		return ATOMIO_EFAILED;
	}
	commit_enqueue_locked(st, tx);
	while (tx->state != TX_DONE) {
		if (tx->state == TX_QUEUED && can_lead_locked(st))
			lead_locked(st);
		else
			pthread_cond_wait(&cv, &st->lock);
	}
	r = tx->result;
	pthread_mutex_unlock(&st->lock);
	pthread_cond_destroy(&cv);
	return r;
}
