/*
 * commit.c: group commit.
 *
 * Committing threads queue their groups; whichever thread finds no leader
 * becomes the leader, takes every queued group that fits (in queue order:
 * this is the commit order), writes them as ONE log write with RWF_DSYNC (one
 * device wait for the whole batch), then performs their home writes in the
 * same order, and wakes the others.  The leader keeps leading until its own
 * group is done, then hands the role to the next waiter.  Only the role holder
 * ever writes the log, writes home data or checkpoints, so those need no
 * further locking, and home writes of overlapping groups land in commit order.
 *
 * A group that does not fit the log's free space makes the leader checkpoint
 * first; the leader waits on nobody while it holds the role, so that wait
 * cannot deadlock.  A group that could never fit was refused with -E2BIG
 * before it was queued.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>


#include "internal.h"

#define MAX_BATCH (8u << 20)   /* bytes of records per log write */
#define STAGE_KEEP (16u << 20) /* staging kept between batches */

int role_acquire(atomio *st)
{
	pthread_mutex_lock(&st->lock);
	while (st->leader)
		pthread_cond_wait(&st->cond, &st->lock);
	st->leader = true;
	pthread_mutex_unlock(&st->lock);
	return 0;
}

void role_release(atomio *st)
{
	pthread_mutex_lock(&st->lock);
	st->leader = false;
	pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->lock);
}

static int stage_reserve(atomio *st, size_t len)
{
	if (st->stage_cap >= len)
		return 0;
	size_t cap = st->stage_cap ? st->stage_cap : 65536;
	while (cap < len)
		cap *= 2;
	void *p = NULL;
	if (posix_memalign(&p, 4096, cap))
		return -ENOMEM;
	free(st->stage);
	st->stage = p;
	st->stage_cap = cap;
	return 0;
}

/* Lay one group out as a record at buf (format.h). */
static void build_record(atomio *st, const atomio_tx *tx, char *buf, bool last)
{
	struct rec_hdr_disk h = {
		.magic = REC_MAGIC,
		.type = REC_TYPE_GROUP,
		.flags = last ? REC_F_LAST : 0,
		.seq = tx->seq,
		.epoch = st->sb.epoch,
		.rec_len = tx->rec_len,
		.data_len = tx->data_len,
		.nsegs = tx->nsegs,
		.raw_len = tx->data_len,
	};
	char *desc = buf + REC_HDR;
	char *data = desc + (size_t)REC_DESC * tx->nsegs;
	uint64_t doff = 0;
	for (uint32_t i = 0; i < tx->nsegs; i++) {
		const struct seg *s = &tx->segs[i];
		struct seg_disk d = {.file = s->file, .kind = s->kind, .off = s->off};
		if (s->kind == SEG_WRITE) {
			d.len = s->len;
			d.data_off = doff;
			memcpy(data + doff, s->src, s->len);
			doff += s->len;
		}
		memcpy(desc + (size_t)REC_DESC * i, &d, sizeof(d));
	}
	size_t used = REC_HDR + (size_t)REC_DESC * tx->nsegs + doff;
	memset(buf + used, 0, tx->rec_len - used);
	memcpy(buf, &h, sizeof(h));
	h.csum = fmt_csum(buf, tx->rec_len, st->store_id, offsetof(struct rec_hdr_disk, csum));
	memcpy(buf, &h, sizeof(h));
}

static int apply_home(atomio *st, const atomio_tx *tx)
{
	for (uint32_t i = 0; i < tx->nsegs; i++) {
		const struct seg *s = &tx->segs[i];
		struct afile *f = file_get(st, (int)s->file);
		int r;
		if (!f)
			return -EBADF;
		if (s->kind == SEG_WRITE) {
			r = sys_pwrite_full(f->fd, s->src, s->len, (off_t)s->off, 0);
			if (r == 0)
				atomic_fetch_add(&st->stats.bytes_home, s->len);
			f->dirty = true;
		} else {
			do
				r = atomio_sys->ftruncate(f->fd, (off_t)s->off);
			while (r == -EINTR);
			f->dirty = f->resized = true;
		}
		if (r < 0) {
			st_err(st, "writing home data of file %u: %s", s->file, strerror(-r));
			return r;
		}
	}
	return 0;
}

/* Write a batch (txs linked by qnext, n of them, 'bytes' of records) at area
 * offset 'off', then apply it home.  Sets each tx->result.  Role held, lock
 * not held. */
static void run_batch(atomio *st, atomio_tx *first, uint32_t n, uint64_t bytes, uint64_t off)
{
	uint64_t len = align_up(bytes, st->block);
	int r = stage_reserve(st, len);
	if (r == 0) {
		char *p = st->stage;
		uint32_t i = 0;
		for (atomio_tx *t = first; i < n; t = t->qnext, i++) {
			build_record(st, t, p, i == n - 1);
			p += t->rec_len;
		}
		memset(p, 0, len - bytes);
		/* The commit point: one sequential write made durable before it
		 * returns (O_DIRECT + RWF_DSYNC: a FUA write, or write + flush,
		 * with no journal commit since the blocks are preallocated).  No
		 * separate commit block: the checksum tells a whole record from a
		 * torn one. */
		r = sys_pwrite_durable(st->log_fd, st->stage, len, (off_t)(st->area_off + off));
		if (r < 0)
			st_err(st, "writing the log %s: %s", st->log_path, strerror(-r));
	}
	if (st->stage_cap > STAGE_KEEP) {
		free(st->stage);
		st->stage = NULL;
		st->stage_cap = 0;
	}
	if (r < 0) {
		/* Unknown whether any of it reached the media: refuse further
		 * commits; reopening replays whatever did, whole. */
		st_fail(st, r);
		uint32_t i = 0;
		for (atomio_tx *t = first; i < n; t = t->qnext, i++)
			t->result = r;
		return;
	}
	atomic_fetch_add(&st->stats.log_syncs, 1);
	atomic_fetch_add(&st->stats.batches, 1);
	atomic_fetch_add(&st->stats.bytes_logged, len);

	/* Home writes, no flush: the records are durable, so a crash from here
	 * on is repaired by replay.  The checkpoint syncs them later. */
	int err = 0;
	uint32_t i = 0;
	for (atomio_tx *t = first; i < n; t = t->qnext, i++) {
		if (!err) {
			err = apply_home(st, t);
			if (err)
				st_fail(st, err);
		}
		t->result = err;
		if (!err)
			atomic_fetch_add(&st->stats.commits, 1);
	}
}

static void fail_queue_locked(atomio *st, int err)
{
	for (atomio_tx *t = st->q_head; t; t = t->qnext) {
		t->result = err;
		t->state = TX_DONE;
	}
	st->q_head = st->q_tail = NULL;
}

/* Lead batches until 'me' is done.  Called and returns with st->lock held. */
static void lead_locked(atomio *st, atomio_tx *me)
{
	while (me->state != TX_DONE) {
		if (st->failed) {
			fail_queue_locked(st, ATOMIO_EFAILED);
			break;
		}
		atomio_tx *first = st->q_head;
		ASSERT(first);
		uint64_t room = st->area_size - st->tail;
		if (align_up(first->rec_len, st->block) > room) {
			/* Log full: free it.  Only the role holder writes, so
			 * every earlier group is already home. */
			atomic_fetch_add(&st->stats.log_full_waits, 1);
			pthread_mutex_unlock(&st->lock);
			checkpoint_locked(st);
			pthread_mutex_lock(&st->lock);
			continue;
		}
		uint64_t bytes = 0;
		uint32_t n = 0;
		atomio_tx *t = first, *last = NULL;
		for (; t; t = t->qnext) {
			uint64_t nb = bytes + t->rec_len;
			if (n && (align_up(nb, st->block) > room || nb > MAX_BATCH))
				break;
			t->seq = st->next_seq++;
			bytes = nb;
			n++;
			last = t;
		}
		st->q_head = last->qnext;
		if (!st->q_head)
			st->q_tail = NULL;
		uint64_t off = st->tail;
		st->tail = off + align_up(bytes, st->block);
		pthread_mutex_unlock(&st->lock);

		run_batch(st, first, n, bytes, off);

		pthread_mutex_lock(&st->lock);
		uint32_t i = 0;
		for (t = first; i < n; i++) {
			atomio_tx *next = t->qnext;
			t->state = TX_DONE; /* the owner may free it from here on */
			t = next;
		}
		pthread_cond_broadcast(&st->cond);
	}
}

int commit_tx(atomio_tx *tx)
{
	atomio *st = tx->st;
	if (tx->nsegs == 0)
		return 0; /* an empty group is trivially atomic */
	tx->rec_len = rec_len_for(tx->nsegs, tx->data_len);
	if (align_up(tx->rec_len, st->block) > st->area_size)
		return -E2BIG;
	pthread_mutex_lock(&st->lock);
	if (st->failed) {
		pthread_mutex_unlock(&st->lock);
		return ATOMIO_EFAILED;
	}
	tx->state = TX_QUEUED;
	tx->qnext = NULL;
	if (st->q_tail)
		st->q_tail->qnext = tx;
	else
		st->q_head = tx;
	st->q_tail = tx;
	while (tx->state != TX_DONE) {
		if (!st->leader) {
			st->leader = true;
			lead_locked(st, tx);
			st->leader = false;
			pthread_cond_broadcast(&st->cond);
		} else {
			pthread_cond_wait(&st->cond, &st->lock);
		}
	}
	int r = tx->result;
	pthread_mutex_unlock(&st->lock);
	return r;
}
