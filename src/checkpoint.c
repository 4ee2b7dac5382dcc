/*
 * checkpoint.c: make the home writes durable, then free log space.
 *
 * Order (format.h, SYNC ORDER): every data file written since the last
 * checkpoint is synced first; only then does the superblock move the head past
 * the records that could redo those writes.  Were the superblock first, a
 * crash could leave a home write in the page cache only, with the record that
 * repairs it already given up.
 *
 * The record area is a ring.  Two kinds of checkpoint free it:
 *
 *  - BACKGROUND, while commits go on: when the log is more than half full,
 *    the home stage asks the store's worker thread (async.c) for one.  It cuts
 *    after the newest batch whose home writes are done (home_seq/home_off),
 *    syncs the files, and writes the superblock with head = the cut.  Commits
 *    keep appending after the cut meanwhile: their home writes may or may not
 *    be caught by the sync, which does not matter, since their records stay
 *    live; a file they dirty keeps its flag for the next checkpoint.  The log
 *    wraps to the area's start when a batch does not fit before its end
 *    (recovery looks there, format.h).
 *  - FULL, with the log role held and every batch home: when a batch does
 *    not fit the free space, on atomio_checkpoint and at close.  It frees the
 *    whole log (head = tail = 0), as before.
 *
 * One checkpoint at a time (ckpt_busy): they write the superblock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* fsync where the size went down or was set: fdatasync need not carry a
 * shrink on every filesystem.  Growth by writes is data-retrieval metadata,
 * which fdatasync does carry. */
static int sync_one(atomio *st, struct afile *f, bool resized)
{
	int r = resized ? sys_fsync_full(f->fd) : sys_fdatasync_full(f->fd);
	atomic_fetch_add(&st->stats.data_syncs, 1);
	return r;
}

/* Sync every data file written since it was last synced.  The flags are taken
 * before the sync: a home write after that sets them again. */
static int sync_files(atomio *st)
{
	for (uint32_t id = 0; id < MAX_FILES; id++) {
		struct afile *f = atomic_load(&st->files[id]);
		if (!f || __atomic_load_n(&f->fd, __ATOMIC_ACQUIRE) < 0)
			continue;
		bool resized = __atomic_exchange_n(&f->resized, false, __ATOMIC_ACQ_REL);
		bool dirty = __atomic_exchange_n(&f->dirty, false, __ATOMIC_ACQ_REL);
		if (!dirty && !resized)
			continue;
		int r = sync_one(st, f, resized);
		if (r < 0) {
			/* The kernel may have dropped the dirty pages with the
			 * error; a retried fsync could then "succeed".  Keep the
			 * log, refuse further work; recovery replays it. */
			st_err(st, "syncing data file %u: %s", id, strerror(-r));
			return r;
		}
		file_drop_cache(st, f);
	}
	return 0;
}

/* Full checkpoint.  Log role held, every batch home, lock not held. */
int checkpoint_locked(atomio *st)
{
	pthread_mutex_lock(&st->lock);
	while (st->ckpt_busy)
		pthread_cond_wait(&st->ckpt_cv, &st->lock);
	int failed = st->failed;
	uint64_t seq = st->next_seq, used = st->used, tail = st->tail;
	if (!failed) {
		st->ckpt_busy = true;
		dirty_ckpt_begin_locked(st); /* wear.c: what this sync makes durable */
	}
	pthread_mutex_unlock(&st->lock);
	if (failed)
		return ATOMIO_EFAILED;

	int r = sync_files(st);
	/* The log starts over at 0, with a superblock saying so.  With no live
	 * record and the tail at 0 already, the superblock stands as it is.
	 * (Never restart at 0 without it: a record written there could cover
	 * the superblock's head offset, which recovery reads first.) */
	bool any = used != 0 || tail != 0;
	if (r == 0 && any)
		r = log_write_sb(st, 0, seq, st->rec_epoch);
	pthread_mutex_lock(&st->lock);
	if (r < 0) {
		st_fail_locked(st, r);
	} else if (any) {
		st->head = st->tail = st->used = 0;
		st->head_seq = st->home_seq = seq;
		st->home_off = 0;
	}
	st->ckpt_wanted = false;
	st->ckpt_busy = false;
	pthread_cond_broadcast(&st->ckpt_cv);
	dirty_ckpt_end(st, false); /* sync_files dropped the files' pages whole */
	pthread_mutex_unlock(&st->lock);
	if (r < 0)
		return r;
	/* Every record is dead now: no replay can overwrite a fast-path write. */
	guard_clear_all(st);
	if (any)
		atomic_fetch_add(&st->stats.checkpoints, 1);
	return 0;
}

/* Background checkpoint (the worker thread).  Lock held on entry and exit. */
void checkpoint_background_locked(atomio *st)
{
	if (st->ckpt_busy || st->failed)
		return;
	uint64_t cut_seq = st->home_seq, cut_off = st->home_off;
	if (cut_seq == st->head_seq)
		return; /* no batch home since the last checkpoint */
	st->ckpt_busy = true;
	dirty_ckpt_begin_locked(st);
	st->ckpt_bg_running = true; /* file_drop_cache: wear.c drops what this syncs */
	pthread_mutex_unlock(&st->lock);

	int r = sync_files(st);
	if (r == 0)
		r = log_write_sb(st, cut_off, cut_seq, st->rec_epoch);

	pthread_mutex_lock(&st->lock);
	if (r < 0) {
		st_fail_locked(st, r);
	} else {
		/* Free what lies between the old head and the cut (a wrap's
		 * skipped end of area included). */
		uint64_t freed = cut_off >= st->head ? cut_off - st->head
						       : st->area_size - st->head + cut_off;
		if (freed == 0 || freed > st->used)
			freed = st->used; /* the cut is a whole lap on: all of it */
		st->used -= freed;
		st->head = cut_off;
		ASSERT((st->head + st->used) % st->area_size == st->tail % st->area_size);
		st->head_seq = cut_seq;
		atomic_fetch_add(&st->stats.checkpoints, 1);
	}
	st->ckpt_bg_running = false;
	st->ckpt_busy = false;
	pthread_cond_broadcast(&st->ckpt_cv);
	dirty_ckpt_end(st, r == 0);
}

int atomio_checkpoint(atomio *st)
{
	if (!st)
		return -EINVAL;
	role_acquire(st);
	int r = checkpoint_locked(st);
	role_release(st);
	return r;
}
