/*
 * checkpoint.c: checkpointing, all of it: the policy (when), the dirty set
 * (what the page cache holds), the checkpointer thread, and the checkpoint
 * itself (make the home writes durable, then free log space).
 *
 * ORDER (format.h, SYNC ORDER): every data file written since the last
 * checkpoint is synced first; only then does the superblock move the head past
 * the records that could redo those writes.  Were the superblock first, a
 * crash could leave a home write in the page cache only, with the record that
 * repairs it already given up.
 *
 * The record area is a ring.  Two kinds of checkpoint free it:
 *
 *  - BACKGROUND, while commits go on: when the policy says so, the home stage
 *    (commit.c) calls checkpoint_after_home_locked, which wakes the
 *    checkpointer thread (started then).  It cuts after the newest batch whose
 *    home writes are done (home_seq/home_off), syncs the files, and writes the
 *    superblock with head = the cut.  Commits keep appending after the cut
 *    meanwhile: their home writes may or may not be caught by the sync, which
 *    does not matter, since their records stay live; a file they dirty keeps
 *    its flag for the next checkpoint.  The log wraps to the area's start
 *    when a batch does not fit before its end (recovery looks there,
 *    format.h).
 *  - FULL, with the log role held and every batch home: when a batch does
 *    not fit the free space, on atomio_checkpoint and at close.  It frees the
 *    whole log (head = tail = 0).
 *
 * One checkpoint at a time (ckpt_busy): they write the superblock.
 *
 * THE POLICY.  A background checkpoint runs when the log is more than
 * ckpt_percent full, or the dirty set holds more than dirty_limit bytes; a
 * commit waits for a checkpoint when the log has no room or the dirty set
 * holds twice dirty_limit (checkpoint_must_wait_locked).  The log's size is
 * the lever: the more commits between two checkpoints, the fewer times a hot
 * page is written home.
 *
 * THE DIRTY SET: home writes coalesced by the page cache.  A home write goes
 * to the page cache (buffered files, and the buffered twin of an O_DIRECT
 * file, files.c) and stays there, dirty, until a checkpoint syncs the file: a
 * page committed a thousand times between two checkpoints reaches the device
 * once, and the sync hands the kernel every dirty page of a file at once,
 * which it writes in file order, merged into large requests.  atomio keeps no
 * copy of its own: the twin already holds the newest committed bytes of every
 * range, every read path sees them (docs/API.md, "Which reads see what"), and
 * a second copy would double the memory.  What atomio adds is a bound: the
 * dirty set counts the distinct 4 KiB blocks written home since the last
 * checkpoint began (st->dirty, under lock), and those the running checkpoint
 * syncs (st->ckpt_set, the checkpoint's own).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define DBLOCK 4096u /* granularity of the dirty set: the page cache's page */

struct dkey {
	uint64_t blk1; /* block index + 1; 0 = empty slot */
	uint32_t file;
};

/* --- policy -------------------------------------------------------------------- */

void checkpoint_policy_init(atomio *st, uint32_t ckpt_percent, uint64_t dirty_limit)
{
	uint32_t pct = ckpt_percent ? ckpt_percent : 50;
	st->ckpt_at = st->area_size / 100 * pct;
	st->dirty_limit = dirty_limit ? dirty_limit : st->area_size;
	if (st->dirty_limit < DBLOCK)
		st->dirty_limit = DBLOCK;
}

/* At the store's allocation, before anything can fail. */
void checkpoint_setup(atomio *st)
{
	pthread_cond_init(&st->ckpt_cv, NULL);
	pthread_cond_init(&st->ckpter_cv, NULL);
}

static void dset_free(struct dset *d)
{
	free(d->slot);
	memset(d, 0, sizeof(*d));
}

void checkpoint_destroy(atomio *st)
{
	dset_free(&st->dirty);
	dset_free(&st->ckpt_set);
	pthread_cond_destroy(&st->ckpt_cv);
	pthread_cond_destroy(&st->ckpter_cv);
}

/* So much is dirty that the next commit waits for a checkpoint. */
bool checkpoint_must_wait_locked(const atomio *st)
{
	return st->dirty.used * DBLOCK > 2 * st->dirty_limit;
}

/* A batch's home writes are done (home_seq/home_off moved): the log more
 * than ckpt_percent full, or the page cache holding more than the dirty
 * limit, has the checkpointer free what is home, while commits go on.  (If
 * no thread can be started, a full log is checkpointed in the commit path.) */
void checkpoint_after_home_locked(atomio *st)
{
	bool over = st->dirty.overflow || st->dirty.used * DBLOCK > st->dirty_limit;
	if ((st->used > st->ckpt_at || over) && !st->ckpt_busy && !st->ckpt_wanted &&
	    !(st->flags & ATOMIO_NO_BG_CHECKPOINT))
		(void)checkpoint_request_locked(st);
	/* The paced write-back has a batch due (writeback.c): the checkpointer
	 * starts it, off the commits' path.  (No thread: the checkpoint will
	 * write those pages, as without the write-back.) */
	else if ((wb_due_locked(st) || log_zero_due_locked(st)) && !(st->flags & ATOMIO_NO_BG_CHECKPOINT))
		(void)checkpoint_wake_locked(st);
}

/* --- the dirty set ------------------------------------------------------------- */

static uint64_t dhash(uint32_t file, uint64_t blk)
{
	uint64_t x = blk * 0x9E3779B97F4A7C15ull ^ ((uint64_t)file << 32 | file);
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static bool dset_has(const struct dset *d, uint32_t file, uint64_t blk)
{
	if (!d->cap)
		return false;
	for (uint64_t i = dhash(file, blk) & (d->cap - 1);; i = (i + 1) & (d->cap - 1)) {
		const struct dkey *k = &d->slot[i];
		if (!k->blk1)
			return false;
		if (k->blk1 == blk + 1 && k->file == file)
			return true;
	}
}

static void dset_put(struct dkey *slot, uint64_t cap, uint32_t file, uint64_t blk1)
{
	uint64_t i = dhash(file, blk1 - 1) & (cap - 1);
	while (slot[i].blk1)
		i = (i + 1) & (cap - 1);
	slot[i] = (struct dkey){.blk1 = blk1, .file = file};
}

/* Add one block; false when it needed memory it could not get. */
static bool dset_add(struct dset *d, uint32_t file, uint64_t blk)
{
	if (dset_has(d, file, blk))
		return true;
	if ((d->used + 1) * 2 > d->cap) {
		uint64_t nc = d->cap ? d->cap * 2 : 1024;
		struct dkey *n = calloc(nc, sizeof(*n));
		if (!n)
			return false;
		for (uint64_t i = 0; i < d->cap; i++)
			if (d->slot[i].blk1)
				dset_put(n, nc, d->slot[i].file, d->slot[i].blk1);
		free(d->slot);
		d->slot = n;
		d->cap = nc;
	}
	dset_put(d->slot, d->cap, file, blk + 1);
	d->used++;
	return true;
}

/* A batch's home writes are done: count their blocks (those that went to a
 * page cache).  Lock held. */
void dirty_note_locked(atomio *st, atomio_tx *first, uint32_t n)
{
	struct file_cached w = {.st = st, .t = first, .n = n};
	for (const struct seg *s; (s = file_cached_next(&w));)
		for (uint64_t b = s->off / DBLOCK; b <= (s->off + s->len - 1) / DBLOCK; b++)
			if (!dset_add(&st->dirty, s->file, b)) {
				st->dirty.overflow = true;
				return;
			}
}

/* A checkpoint starts (before it takes the files' dirty flags and syncs):
 * what is dirty now is what it makes durable.  Lock held. */
static void dirty_ckpt_begin_locked(atomio *st, bool drain)
{
	dset_free(&st->ckpt_set);
	st->ckpt_set = st->dirty;
	memset(&st->dirty, 0, sizeof(st->dirty));
	/* The sync writes back every range noted so far; a background
	 * checkpoint writes them back itself first, paced (wb_drain_locked). */
	if (!drain)
		wb_reset_locked(st);
	atomic_fetch_add(&st->stats.bytes_checkpointed, st->ckpt_set.used * DBLOCK);
}

static int cmp_key(const void *a, const void *b)
{
	const struct dkey *x = a, *y = b;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->blk1 < y->blk1 ? -1 : x->blk1 > y->blk1;
}

/* A background checkpoint synced the files (synced: it succeeded): drop
 * from the page cache of the O_DIRECT files' twins the blocks it made
 * durable, except those written again since it began.  (Dropping a whole
 * file, as a full checkpoint does, would also start the write-back of pages
 * dirtied meanwhile -- POSIX_FADV_DONTNEED writes dirty pages first -- and
 * write them twice: once now, once at the next checkpoint.)  Called with
 * the lock held; drops it while advising. */
static void dirty_ckpt_end_locked(atomio *st, bool synced)
{
	struct dset d = st->ckpt_set;
	memset(&st->ckpt_set, 0, sizeof(st->ckpt_set));
	if (!synced || !d.used) {
		free(d.slot);
		return;
	}
	/* Compact and sort the keys (outside the lock: the set is ours). */
	pthread_mutex_unlock(&st->lock);
	uint64_t n = 0;
	for (uint64_t i = 0; i < d.cap; i++)
		if (d.slot[i].blk1)
			d.slot[n++] = d.slot[i];
	qsort(d.slot, n, sizeof(*d.slot), cmp_key);
	pthread_mutex_lock(&st->lock);
	/* Blocks dirtied again meanwhile stay (blk1 = 0 marks them). */
	for (uint64_t i = 0; i < n; i++)
		if (dset_has(&st->dirty, d.slot[i].file, d.slot[i].blk1 - 1))
			d.slot[i].blk1 = 0;
	pthread_mutex_unlock(&st->lock);
	for (uint64_t i = 0; i < n;) {
		if (!d.slot[i].blk1) {
			i++;
			continue;
		}
		uint64_t j = i + 1;
		while (j < n && d.slot[j].file == d.slot[i].file && d.slot[j].blk1 == d.slot[j - 1].blk1 + 1)
			j++;
		struct afile *f = file_get(st, (int)d.slot[i].file);
		if (f && f->hfd >= 0 && f->hfd != f->fd)
			sys_fadvise(f->hfd, (off_t)((d.slot[i].blk1 - 1) * DBLOCK),
				    (off_t)((j - i) * DBLOCK), POSIX_FADV_DONTNEED);
		i = j;
	}
	free(d.slot);
	pthread_mutex_lock(&st->lock);
}

/* After a checkpoint synced f: its twin's pages are clean; drop them so that
 * an O_DIRECT file does not keep page cache between checkpoints. */
static void drop_cache(atomio *st, struct afile *f)
{
	/* A background checkpoint drops only the blocks it synced (dirty_ckpt_end_locked). */
	if (st->ckpt_bg_running)
		return;
	if (f->hfd >= 0 && f->hfd != f->fd)
		sys_fadvise(f->hfd, 0, 0, POSIX_FADV_DONTNEED);
}

/* --- the checkpoint ---------------------------------------------------------------- */

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
	const uint32_t top = atomic_load(&st->files_hi);
	for (uint32_t id = 0; id < top; id++) {
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
			char path[PATH_MAX];
			st_err(st, "syncing data file %s: %s",
			       file_resolve_path(st, f, path, sizeof(path)) == 0 ? path : f->path,
			       strerror(-r));
			return r;
		}
		drop_cache(st, f);
	}
	return 0;
}

/* Full checkpoint.  Log role held, every batch home, lock not held. */
int checkpoint_full_role(atomio *st)
{
	pthread_mutex_lock(&st->lock);
	while (st->ckpt_busy)
		pthread_cond_wait(&st->ckpt_cv, &st->lock);
	int failed = st->failed;
	uint64_t seq = st->next_seq, used = st->used, tail = st->tail;
	if (!failed) {
		st->ckpt_busy = true;
		dirty_ckpt_begin_locked(st, false); /* what this sync makes durable */
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
	dirty_ckpt_end_locked(st, false); /* sync_files dropped the files' pages whole */
	pthread_mutex_unlock(&st->lock);
	if (r < 0)
		return r;
	/* Every record is dead now: no replay can overwrite a fast-path write. */
	guard_clear_all_role(st);
	if (any)
		atomic_fetch_add(&st->stats.checkpoints, 1);
	return 0;
}

/* Background checkpoint (the checkpointer thread).  Called and returns with
 * the lock held; drops it while it syncs the files and writes the
 * superblock. */
static void checkpoint_background_locked(atomio *st)
{
	if (st->ckpt_busy || st->failed)
		return;
	uint64_t cut_seq = st->home_seq, cut_off = st->home_off;
	if (cut_seq == st->head_seq)
		return; /* no batch home since the last checkpoint */
	st->ckpt_busy = true;
	dirty_ckpt_begin_locked(st, true);
	st->ckpt_bg_running = true; /* drop_cache: dirty_ckpt_end_locked drops what this syncs */
	wb_drain_locked(st); /* drops the lock around its calls */
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
	dirty_ckpt_end_locked(st, r == 0);
}

/* --- the checkpointer thread ---------------------------------------------------- */

static void *ckpter_main(void *arg)
{
	atomio *st = arg;
	pthread_mutex_lock(&st->lock);
	while (!st->ckpter_stop) {
		/* One batch of the paced write-back (writeback.c) if one is
		 * due, then the checkpoint if one is wanted: a write-back
		 * batch delays a checkpoint by at most one batch's calls, and
		 * the batch noted before the checkpoint is not dropped by it. */
		bool did = false;
		if (wb_due_locked(st)) {
			wb_issue_locked(st);
			did = true;
		}
		if (st->ckpt_wanted && !st->ckpt_busy && !st->ckpter_stop) {
			st->ckpt_wanted = false;
			checkpoint_background_locked(st);
			did = true;
		}
		/* Then a chunk of the new log's zeroing (logfile.c), if the
		 * records come near the unwritten part. */
		if (!did && !st->ckpter_stop && log_zero_due_locked(st)) {
			log_zero_step_locked(st);
			did = true;
		}
		if (!did)
			pthread_cond_wait(&st->ckpter_cv, &st->lock);
	}
	pthread_mutex_unlock(&st->lock);
	return NULL;
}

/* Ask the checkpointer (started if need be) for a background checkpoint.
 * Lock held.  0 or -EAGAIN. */
int checkpoint_request_locked(atomio *st)
{
	int r = checkpoint_wake_locked(st);
	if (r == 0) {
		st->ckpt_wanted = true;
		pthread_cond_signal(&st->ckpter_cv);
	}
	return r;
}

/* Wake the checkpointer (started if need be): it runs a checkpoint wanted,
 * or else the paced write-back's due batch.  Lock held.  0 or -EAGAIN. */
int checkpoint_wake_locked(atomio *st)
{
	if (!st->ckpter_on) {
		st->ckpter_stop = false;
		int r = pthread_create(&st->ckpter, NULL, ckpter_main, st);
		if (r)
			return -r;
		st->ckpter_on = true;
	}
	pthread_cond_signal(&st->ckpter_cv);
	return 0;
}

/* Stop the checkpointer; a background checkpoint in progress is finished
 * first. */
void checkpoint_stop(atomio *st)
{
	pthread_mutex_lock(&st->lock);
	bool on = st->ckpter_on;
	st->ckpter_stop = true;
	pthread_cond_signal(&st->ckpter_cv);
	pthread_mutex_unlock(&st->lock);
	if (on)
		pthread_join(st->ckpter, NULL);
	st->ckpter_on = false;
}
