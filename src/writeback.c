/*
 * writeback.c: paced write-back of home writes.
 *
 * Home writes go to a page cache (buffered files, and the buffered twin of an
 * O_DIRECT file, engine_pick.c) and stay dirty until a checkpoint syncs the file.
 * Left alone, a background checkpoint hands the device the dirty pages of
 * half a log at once, and a log write's flush issued meanwhile queues behind
 * that write-back (docs/PERFORMANCE.md, "Figures behind choices in the
 * code").  So atomio starts the write-back itself, early and in small pieces:
 * sync_file_range(SYNC_FILE_RANGE_WRITE) over ranges written home some time
 * ago, up to WB_BATCH bytes at a time, so that the device takes the home data
 * in step with the log and the checkpoint's fdatasync finds little left to
 * write.  (The idea of PostgreSQL's checkpoint_flush_after and of
 * InnoDB's adaptive flushing.)
 *
 * DURABILITY: none is claimed.  SYNC_FILE_RANGE_WRITE only starts write-back
 * of dirty pages; it waits for nothing, flushes no device cache and writes no
 * metadata, so a checkpoint still fdatasyncs every dirty file before the
 * superblock moves the head (checkpoint.c, format.h SYNC ORDER).  A page
 * written back early is, for a crash, what the kernel's own flusher may do
 * to any dirty page at any time: its record stays live until that fdatasync,
 * and replay rewrites it.  The crash simulator models the call as making
 * nothing durable (test/support/simfs.c), and a mutant that trusts it
 * (test/crash/mutate.sh, "sfrtrust") is caught.
 *
 * THE CHECKPOINT'S DRAIN.  What was written home in the last half interval is
 * still dirty when a background checkpoint begins (up to a quarter of the
 * log), and an fdatasync would hand it to the device at once, the log's
 * flushes queueing behind it (the commits' p99.9: docs/PERFORMANCE.md, "What
 * changed to get there").  So the background checkpoint first writes those
 * ranges back itself, a piece at a time, each piece waited for before the
 * next starts (wb_drain): at most a piece of home data is ever ahead of a
 * log write.  On a disk without FUA a durable log write is a write and a
 * flush of the whole cache, the piece in flight included, so the piece is
 * the log write's tail: WB_DRAIN (32 KiB) while the checkpoint has time;
 * WB_DRAIN_HURRIED (128 KiB, about four times the drain's speed) once the
 * log or the dirty set runs short of room (drain_hurried_locked), where
 * a slower drain would leave more to the fdatasync, or end in commits
 * waiting for the checkpoint (docs/PERFORMANCE.md, "The checkpoint's drain
 * in pieces": one writer's p99.9 1.5-1.8x unsafe's with 128 KiB pieces
 * throughout, 1.4x with these; 8 writers' groups, which fill the log fast,
 * within 2% at p99, 6-10% at p99.9).  The fdatasync that follows finds
 * little left, and it is still what makes the data durable.  The waits use
 * a descriptor of their own: sync_file_range's wait reports a write-back
 * error to its file description and consumes it there
 * (file_check_and_advance_wb_err), and the checkpoint's fdatasync must still
 * see it on the file's own descriptor.  No extra wear: the fdatasync would
 * have written those pages.
 *
 * WEAR.  A page written back early and written again before the checkpoint
 * reaches the device twice.  So a range is written back only once it is
 * half a checkpoint interval old (wb.delay, in home bytes written since) and
 * only if it was not written again meanwhile (the newer write is written back
 * in its own time): a page that stays hot is left to the checkpoint, where it
 * costs one write.
 *
 * Threading: the notes are the process's own, of the home writes its
 * leaders did, under st->lock (taken inside the shared mutex when the home
 * stage notes them: the one order of the two locks); the sync_file_range
 * calls run unlocked, by the process's checkpointer thread, which the home
 * stage wakes when a batch is due (checkpoint_after_home_locked), so that no
 * commit waits for them (a batch's calls take a commit's worth of time:
 * docs/PERFORMANCE.md, "Figures behind choices in the code"); with
 * ATOMIO_NO_BG_CHECKPOINT, which runs no such thread, by the committing
 * thread that finished a batch (commit.c).  Several
 * processes: each writes back what its own leaders wrote home, and a
 * checkpoint drains what its own process noted; the rest the fdatasync
 * writes, as without the write-back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "shm.h"

#define WB_BATCH (512u << 10)  /* most bytes started per call of wb_issue */
#define WB_PAGE 4096u          /* granularity of "written again" */
#ifndef WB_DRAIN
#define WB_DRAIN (32u << 10)   /* bytes a checkpoint's drain has in flight (see above) */
#endif
#define WB_DRAIN_HURRIED (128u << 10) /* ... when it runs short of room */

struct wbent {
	uint32_t file;
	uint64_t off, len;
	uint64_t at; /* st->wb.pos when noted */
};

/* newest note of a 4 KiB block: open addressing, key blk + 1 */
struct wbkey {
	uint64_t blk1;
	uint32_t file;
	uint64_t at;
};

void wb_init(atomio *st)
{
	memset(&st->wb, 0, sizeof(st->wb));
	pthread_cond_init(&st->wb_cv, NULL);
	/* Batches of 1/16 of the interval between two background checkpoints
	 * (ckpt_at bytes of log), WB_BATCH at most; a range waits half that
	 * interval.  Positions count log bytes (wb_note: a group's home bytes
	 * weighed by its record's share of them), not home bytes: with
	 * compressed records a checkpoint interval is several times its log
	 * bytes in home bytes, and a delay in home bytes would write a page
	 * back that many times sooner -- and again each time the program
	 * writes it again before the checkpoint (a database's pages under
	 * PostgreSQL: records 3.6x smaller than their pages, home pages
	 * reaching the device twice as often as without the write-back). */
	const uint64_t ckpt_at = st->sh->ckpt_at;
	st->wb.batch = ckpt_at / 16;
	if (st->wb.batch > WB_BATCH)
		st->wb.batch = WB_BATCH;
	if (st->wb.batch < WB_PAGE)
		st->wb.batch = WB_PAGE;
	st->wb.delay = ckpt_at / 2;
	/* entries of at least a page, for records down to a quarter of their home bytes */
	st->wb.max = (uint32_t)(st->wb.delay / WB_PAGE * 8 + 64);
	if (st->wb.max > (1u << 20))
		st->wb.max = 1u << 20;
	/* No early write-back where the backend cannot do it. */
	st->wb.off = !atomio_sys->sync_file_range;
}

void wb_free(atomio *st)
{
	free(st->wb.ring);
	free(st->wb.keys);
	memset(&st->wb, 0, sizeof(st->wb));
	pthread_cond_destroy(&st->wb_cv);
}

static uint64_t wb_hash(uint32_t file, uint64_t blk)
{
	uint64_t x = (blk + 1) * 0x9E3779B97F4A7C15ull ^ file;
	return x ^ (x >> 29);
}

static struct wbkey *wb_slot(struct wbstate *w, uint32_t file, uint64_t blk)
{
	for (uint64_t i = wb_hash(file, blk) & (w->kcap - 1);; i = (i + 1) & (w->kcap - 1))
		if (!w->keys[i].blk1 || (w->keys[i].blk1 == blk + 1 && w->keys[i].file == file))
			return &w->keys[i];
}

/* Forget every pending range (a checkpoint's sync writes them all, or memory
 * ran out).  st->lock held. */
static void wb_reset_own(atomio *st)
{
	ASSERT_OWN(st);
	struct wbstate *w = &st->wb;
	w->head = w->n = 0;
	w->kused = 0;
	if (w->keys)
		memset(w->keys, 0, sizeof(*w->keys) * w->kcap);
}

/* The notes start small and double as they fill, up to max entries (16
 * MiB with the hash at the default log): every process of a store has its
 * own, and most write far less than a checkpoint interval's worth of pages
 * between two checkpoints.  false: no memory (the notes as they were stay). */
static bool wb_grow(struct wbstate *w)
{
	uint32_t cap = w->cap ? w->cap * 2 : 256;
	if (cap > w->max)
		cap = w->max;
	uint64_t kcap = 1;
	while (kcap < 2 * (uint64_t)cap)
		kcap *= 2;
	struct wbent *ring = malloc(sizeof(*ring) * cap);
	struct wbkey *keys = calloc(kcap, sizeof(*keys));
	if (!ring || !keys) {
		free(ring);
		free(keys);
		return false;
	}
	for (uint32_t i = 0; i < w->n; i++)
		ring[i] = w->ring[(w->head + i) % w->cap];
	struct wbkey *old = w->keys;
	uint64_t okcap = w->kcap;
	free(w->ring);
	w->ring = ring;
	w->cap = cap;
	w->head = 0;
	w->keys = keys;
	w->kcap = kcap;
	for (uint64_t i = 0; i < okcap; i++)
		if (old[i].blk1)
			*wb_slot(w, old[i].file, old[i].blk1 - 1) = old[i];
	free(old);
	return true;
}

static bool wb_alloc(struct wbstate *w)
{
	if (w->ring)
		return true;
	if (!wb_grow(w)) {
		w->off = true; /* no memory: the checkpoint writes everything, as without the write-back */
		return false;
	}
	return true;
}

void wb_reset(atomio *st)
{
	own_lock(st);
	wb_reset_own(st);
	own_unlock(st);
}

/* A batch's home writes are done: note the ranges that went to a page cache. */
void wb_note(atomio *st, const struct grp *g, uint32_t n)
{
	struct wbstate *w = &st->wb;
	own_lock(st);
	if (w->off || !wb_alloc(w)) {
		own_unlock(st);
		return;
	}
	/* log bytes per home byte of these groups (wb_init says why), in 1/1024 */
	uint64_t rec = 0, data = 0;
	for (uint32_t i = 0; i < n; i++) {
		rec += g[i].rec_len;
		data += g[i].data_len;
	}
	const uint64_t per_k = data && rec < data ? rec * 1024 / data + 1 : 1024;
	struct file_cached fc = {.st = st, .g = g, .n = n};
	for (const struct seg *s; (s = file_cached_next(&fc));) {
		const uint64_t pages = (s->off + s->len - 1) / WB_PAGE - s->off / WB_PAGE + 1;
		/* The hash stays at most half full (its probes end). */
		while (w->n == w->cap || (w->kused + pages) * 2 > w->kcap) {
			if (w->cap < w->max && wb_grow(w))
				continue;
			/* Full: drop the notes (a hint only; the checkpoint
			 * writes what they named). */
			wb_reset_own(st);
			break;
		}
		w->pos += (s->len * per_k + 1023) / 1024;
		if (pages * 2 > w->kcap)
			continue; /* larger than all the notes: the checkpoint writes it */
		w->ring[(w->head + w->n) % w->cap] =
			(struct wbent){.file = s->file, .off = s->off, .len = s->len, .at = w->pos};
		w->n++;
		for (uint64_t b = s->off / WB_PAGE; b <= (s->off + s->len - 1) / WB_PAGE; b++) {
			struct wbkey *k = wb_slot(w, s->file, b);
			if (!k->blk1) {
				k->blk1 = b + 1;
				k->file = s->file;
				w->kused++;
			}
			k->at = w->pos;
		}
	}
	own_unlock(st);
}

/* Was a range noted at 'at' written again since?  st->lock held. */
static bool wb_rewritten_own(atomio *st, const struct wbent *e)
{
	ASSERT_OWN(st);
	struct wbstate *w = &st->wb;
	for (uint64_t b = e->off / WB_PAGE; b <= (e->off + e->len - 1) / WB_PAGE; b++) {
		struct wbkey *k = wb_slot(w, e->file, b);
		if (k->blk1 && k->at != e->at)
			return true;
	}
	return false;
}

static int cmp_ent(const void *a, const void *b)
{
	const struct wbent *x = a, *y = b;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Is a batch of ranges old enough to start?  st->lock held. */
static bool wb_due_own(const atomio *st)
{
	ASSERT_OWN(st);
	const struct wbstate *w = &st->wb;
	return !w->off && !w->busy && w->n && w->pos - w->ring[w->head].at >= w->delay + w->batch;
}

bool wb_due(atomio *st)
{
	own_lock(st);
	bool due = wb_due_own(st);
	own_unlock(st);
	return due;
}

/* Take from the head of the notes up to limit bytes of ranges noted at or
 * before upto into v (ranges written again since are left to their newer
 * note).  st->lock held.  The number taken. */
static unsigned wb_take_own(atomio *st, uint64_t upto, uint64_t limit, struct wbent *v)
{
	ASSERT_OWN(st);
	struct wbstate *w = &st->wb;
	unsigned nv = 0;
	uint64_t bytes = 0;
	while (w->n && nv < WB_BATCH / WB_PAGE && bytes < limit && w->ring[w->head].at <= upto) {
		struct wbent e = w->ring[w->head];
		w->head = (w->head + 1) % w->cap;
		w->n--;
		if (!wb_rewritten_own(st, &e)) {
			v[nv++] = e;
			bytes += e.len;
		}
		/* The blocks' notes go with the newest range that names them. */
		for (uint64_t b = e.off / WB_PAGE; b <= (e.off + e.len - 1) / WB_PAGE; b++) {
			struct wbkey *k = wb_slot(w, e.file, b);
			if (k->blk1 && k->at == e.at) {
				/* delete by re-inserting the cluster after it */
				uint64_t i = (uint64_t)(k - w->keys);
				w->keys[i].blk1 = 0;
				w->kused--;
				for (uint64_t jx = (i + 1) & (w->kcap - 1); w->keys[jx].blk1;
				     jx = (jx + 1) & (w->kcap - 1)) {
					struct wbkey m = w->keys[jx];
					w->keys[jx].blk1 = 0;
					*wb_slot(w, m.file, m.blk1 - 1) = m;
				}
			}
		}
	}
	return nv;
}

/* The drain's descriptors for waiting (see THE CHECKPOINT'S DRAIN): one per
 * file, opened anew through /proc/self/fd. */
struct waitfds {
	uint32_t file[8];
	int fd[8];
	unsigned n;
};

static int wait_fd(struct waitfds *wf, uint32_t file, int hfd)
{
	for (unsigned i = 0; i < wf->n; i++)
		if (wf->file[i] == file)
			return wf->fd[i];
	int fd = proc_reopen(hfd, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && wf->n < 8) {
		wf->file[wf->n] = file;
		wf->fd[wf->n++] = fd;
	} else if (fd >= 0) {
		atomio_sys->close(fd);
		fd = -1;
	}
	return fd;
}

/* Start the write-back of v's ranges (sorted here, neighbours merged); with
 * wf, then wait for it to end, on wf's descriptors.  Lock not held.  false
 * when the backend has no sync_file_range. */
static bool wb_start_fds(atomio *st, struct wbent *v, unsigned nv, struct waitfds *wf);

/* (its descriptors are loaded from the afiles: fd_use_begin) */
static bool wb_start(atomio *st, struct wbent *v, unsigned nv, struct waitfds *wf)
{
	fd_use_begin(st);
	bool r = wb_start_fds(st, v, nv, wf);
	fd_use_end(st);
	return r;
}

static bool wb_start_fds(atomio *st, struct wbent *v, unsigned nv, struct waitfds *wf)
{
	qsort(v, nv, sizeof(*v), cmp_ent);
	for (int pass = 0; pass < (wf ? 2 : 1); pass++)
		for (unsigned i = 0; i < nv;) {
			unsigned j = i + 1;
			uint64_t end = v[i].off + v[i].len;
			while (j < nv && v[j].file == v[i].file && v[j].off <= end) {
				if (v[j].off + v[j].len > end)
					end = v[j].off + v[j].len;
				j++;
			}
			struct afile *f = file_get(st, (int)v[i].file);
			int fd = f ? __atomic_load_n(&f->hfd, __ATOMIC_ACQUIRE) : -1;
			if (fd >= 0 && pass == 0) {
				int r = sys_sync_file_range(fd, (off_t)v[i].off, (off_t)(end - v[i].off),
							    SYNC_FILE_RANGE_WRITE);
				if (r == -ENOSYS || r == -EOPNOTSUPP || r == -ESPIPE)
					return false; /* the checkpoint writes everything */
				/* Any other error is the checkpoint's to meet: its
				 * fdatasync reports a failed write-back.  (The
				 * drain is the checkpoint's own write, not an
				 * early one: atomio_stats does not count it.) */
				if (!wf)
					atomic_fetch_add(&st->sh->stats.bytes_written_back, end - v[i].off);
			} else if (fd >= 0 && (fd = wait_fd(wf, v[i].file, fd)) >= 0) {
				/* The wait's own error (a failed write-back) is the
				 * fdatasync's to report, on the file's descriptor. */
				(void)sys_sync_file_range(fd, (off_t)v[i].off, (off_t)(end - v[i].off),
							  SYNC_FILE_RANGE_WAIT_AFTER);
			}
			i = j;
		}
	return true;
}

/* A running checkpoint should hurry its drain: the log has used a quarter
 * of the room it had left when background checkpoints begin (ckpt_at) --
 * soon after the start when commits come fast, late or never when they come
 * slowly, so a drain that would not end before the log fills speeds up in
 * time -- or what was written home since this checkpoint began is over the
 * dirty limit (at twice it commits wait: checkpoint_must_wait_locked). */
static bool drain_hurried_locked(const atomio *st)
{
	ASSERT_LOCKED(st);
	uint64_t at = st->sh->ckpt_at < st->area_size ? st->sh->ckpt_at : st->area_size;
	const struct dtab *d = &st->sh->dt[st->S->dset_cur];
	return st->S->used > at + (st->area_size - at) / 4 || d->used * SHM_DBLOCK > st->sh->dirty_limit;
}

/* Start the write-back of up to a batch of ranges that are old enough (none
 * if fewer are).  By a thread holding no role nor lock; takes st->lock and
 * drops it around the system calls. */
void wb_issue(atomio *st)
{
	struct wbstate *w = &st->wb;
	own_lock(st);
	struct wbent v[WB_BATCH / WB_PAGE];
	unsigned nv = wb_due_own(st) ? wb_take_own(st, w->pos - w->delay, w->batch, v) : 0;
	if (!nv) {
		own_unlock(st);
		return;
	}
	w->busy = true;
	own_unlock(st);
	bool ok = wb_start(st, v, nv, NULL);
	own_lock(st);
	w->busy = false;
	pthread_cond_broadcast(&st->wb_cv); /* role_acquire waits for this */
	if (!ok)
		w->off = true;
	own_unlock(st);
}

void wb_drain(atomio *st)
{
	struct wbstate *w = &st->wb;
	own_lock(st);
	if (w->off || w->busy) {
		own_unlock(st);
		return;
	}
	uint64_t upto = w->pos;
	own_unlock(st);
	struct waitfds wf = {.n = 0};
	struct wbent v[WB_BATCH / WB_PAGE];
	unsigned nv;
	for (;;) {
		/* the piece's size, under the shared mutex (taken before the
		 * process's own lock, never inside it) */
		shm_lock(st);
		uint32_t piece = drain_hurried_locked(st) ? WB_DRAIN_HURRIED : WB_DRAIN;
		shm_unlock(st);
		own_lock(st);
		while (w->busy && !w->off) /* a paced batch started meanwhile (wb_issue) */
			own_wait(st, &st->wb_cv);
		if (st_failed(st) || w->off || !(nv = wb_take_own(st, upto, piece, v)))
			break;
		w->busy = true;
		own_unlock(st);
		bool ok = wb_start(st, v, nv, &wf);
		own_lock(st);
		w->busy = false;
		pthread_cond_broadcast(&st->wb_cv);
		if (!ok)
			w->off = true;
		own_unlock(st);
	}
	own_unlock(st);
	for (unsigned i = 0; i < wf.n; i++)
		atomio_sys->close(wf.fd[i]);
}
