/*
 * checkpoint.c: checkpointing, all of it: the policy (when), the dirty set
 * (what the page cache holds), the checkpointer threads, and the checkpoint
 * itself (make the home writes durable, then free log space).
 *
 * ORDER (format.h, SYNC ORDER): every data file written since the last
 * checkpoint is synced first; only then does the superblock move the head past
 * the records that could redo those writes.  Were the superblock first, a
 * crash could leave a home write in the page cache only, with the record that
 * repairs it already given up.  Whichever process made a home write, its
 * bytes are in the file's page cache (one per inode), and an fdatasync of any
 * descriptor of the file, in any process, writes them: so any process may
 * checkpoint for all (it opens files others registered: file_get_any).
 *
 * The record area is a ring.  Two kinds of checkpoint free it:
 *
 *  - BACKGROUND, while commits go on: when the policy says so, the home stage
 *    (commit.c) calls checkpoint_after_home_locked, which wakes its own
 *    process's checkpointer thread (started then).  It cuts after the newest
 *    batch whose home writes are done (home_seq/home_off), syncs the files,
 *    and writes the superblock with head = the cut.  Commits keep appending
 *    after the cut meanwhile: their home writes may or may not be caught by
 *    the sync, which does not matter, since their records stay live; a file
 *    they dirty keeps its flag for the next checkpoint.  The log wraps to the
 *    area's start when a batch does not fit before its end (recovery looks
 *    there, format.h).
 *  - FULL, with the log role held and every batch home: when a batch does
 *    not fit the free space, on atomio_checkpoint and when the last process
 *    closes the store.  It frees the whole log (head = tail = 0).
 *
 * One checkpoint at a time, store-wide (S->ckpt_owner): they write the
 * superblock.  A holder that dies may have taken files' dirty flags without
 * syncing them, and may have written a superblock: the next checkpoint syncs
 * every registered file and reads the superblock back first (ckpt_lost).
 *
 * THE POLICY.  A background checkpoint runs when the log is more than
 * ckpt_percent full, or the dirty set holds more than dirty_limit bytes; a
 * commit waits for a checkpoint when the log has no room or the dirty set
 * holds twice dirty_limit (checkpoint_must_wait_locked).  The log's size is
 * the lever: the more commits between two checkpoints, the fewer times a hot
 * page is written home.  The first process to open the store sets it for all
 * (shm.h).
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
 * checkpoint began (the shared table S->dset_cur, written by the home stage
 * under the mutex), and those the running checkpoint syncs (the other table,
 * the checkpoint's own).  It is a count and a hint (which pages to drop after
 * a sync), never a durability decision: the files' flags are.
 *
 * TRUSTED DESCRIPTORS.  A write-back error of a home write is reported (Linux's
 * errseq) once to each open file description that was open when it
 * happened, and to one opened later only if no description has reported it
 * yet: the application's own fsync of its own descriptor of the file may take
 * it.  So a checkpoint trusts an fdatasync only through a descriptor that was
 * open before every home write it must cover: its hfd_wrote (the newest
 * batch that began writing the file when it was opened, sh->fwrote) is at
 * most sh->fsynced (batches known home when a trusted sync that succeeded
 * began).  A descriptor opened later -- on demand (file_get_any) for a file
 * other processes wrote, or for a file registered anew -- is not trusted
 * until: a full checkpoint (every batch home, the role held, no home write
 * in flight) first writes the file's live records from the log through it
 * (replay_files: each byte's last value, each byte once, so that the file
 * never changes on the way -- its process may die anywhere in it, and the
 * others read the file and sync it through their trusted descriptors), so
 * that its sync covers their bytes, whatever the page cache lost; a background checkpoint, with home writes going on, cannot
 * (an older record replayed over a newer home write), so it gives its cut
 * up, the file's flags kept, and the next full one (the log full, or
 * atomio_checkpoint, or the last close) does it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "shm.h"

#define DBLOCK SHM_DBLOCK /* granularity of the dirty set (shm.h) */

/* --- policy -------------------------------------------------------------------- */

void checkpoint_policy(uint64_t area_size, uint32_t ckpt_percent, uint64_t dirty_limit, uint64_t *ckpt_at,
		       uint64_t *limit)
{
	uint32_t pct = ckpt_percent ? ckpt_percent : 50;
	*ckpt_at = area_size / 100 * pct;
	*limit = dirty_limit ? dirty_limit : area_size;
	if (*limit < DBLOCK)
		*limit = DBLOCK;
}

/* At the store's allocation, before anything can fail. */
void checkpoint_setup(atomio *st) { pthread_cond_init(&st->ckpter_cv, NULL); }

void checkpoint_destroy(atomio *st) { pthread_cond_destroy(&st->ckpter_cv); }

static struct dtab *dt_cur_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	return &st->sh->dt[st->S->dset_cur];
}

/* So much is dirty that the next commit waits for a checkpoint. */
bool checkpoint_must_wait_locked(const atomio *st)
{
	ASSERT_LOCKED(st);
	const struct dtab *d = &st->sh->dt[st->S->dset_cur];
	return d->used * DBLOCK > 2 * st->sh->dirty_limit;
}

/* A batch's home writes are done (home_seq/home_off moved): the log more
 * than ckpt_percent full, or the page cache holding more than the dirty
 * limit, has this process's checkpointer free what is home, while commits go
 * on.  (If no thread can be started, a full log is checkpointed in the
 * commit path.) */
void checkpoint_after_home_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	const struct shm_state *S = st->S;
	const struct dtab *d = dt_cur_locked(st);
	bool over = d->overflow || d->used * DBLOCK > st->sh->dirty_limit;
	if (st->flags & ATOMIO_NO_BG_CHECKPOINT)
		return;
	if ((S->used > st->sh->ckpt_at || over) && !S->ckpt_owner && !S->ckpt_wanted)
		(void)checkpoint_request_locked(st);
	/* The paced write-back has a batch due (writeback.c), or the new log's
	 * zeroing a chunk: this process's checkpointer starts it, off the
	 * commits' path. */
	else if (wb_due(st) || log_zero_due_locked(st))
		(void)checkpoint_wake(st);
}

/* --- the dirty set ------------------------------------------------------------- */

/* A block's first slot: the blocks of one 1 MiB piece of a file (SHM_DPAGE
 * of them) share one 4 KiB page of the table, in block order, the pieces
 * spread by the hash.  A process then touches about a page of the table
 * per piece of the files written, not one per block: each page is a page
 * fault at its first touch in each process (15 us here: shm.c,
 * shm_arena_alloc_locked), and with one slot per block anywhere in the 16
 * MiB table, a new process faulted on nearly every block its home stages
 * counted (docs/PERFORMANCE.md, "Processes as cheap as threads").  Probes
 * stay short: a piece that meets another's slots goes on into the next
 * ones, and the table is at most half full (dset_add). */
static uint64_t dslot(uint64_t cap, uint32_t file, uint64_t blk)
{
	return (file_blk_hash(file, blk / SHM_DPAGE) * SHM_DPAGE + blk % SHM_DPAGE) & (cap - 1);
}

static bool dset_has(const struct dkey *slot, uint64_t cap, uint32_t file, uint64_t blk)
{
	for (uint64_t i = dslot(cap, file, blk), n = 0; n < cap; i = (i + 1) & (cap - 1), n++) {
		const struct dkey *k = &slot[i];
		if (!k->blk1)
			return false;
		if (k->blk1 == blk + 1 && k->file == file)
			return true;
	}
	return false;
}

/* Add one block; false when the table is too full (half: probes stay short). */
static bool dset_add(struct dtab *d, struct dkey *slot, uint64_t cap, uint32_t file, uint64_t blk)
{
	uint64_t i = dslot(cap, file, blk);
	for (uint64_t n = 0; n < cap; i = (i + 1) & (cap - 1), n++) {
		if (slot[i].blk1 == blk + 1 && slot[i].file == file)
			return true;
		if (!slot[i].blk1)
			break;
	}
	if ((d->used + 1) * 2 > cap)
		return false;
	/* its page marked first: a holder that dies in between leaves a mark
	 * on an empty page, never a key that dirty_ckpt_end would not clear */
	d->pages[i / SHM_DPAGE / 64] |= 1ull << (i / SHM_DPAGE % 64);
	slot[i] = (struct dkey){.blk1 = blk + 1, .file = file};
	d->used++;
	return true;
}

/* A batch's home writes are done: count their blocks (those that went to a
 * page cache).  Mutex held (the home stage's table is S->dset_cur's). */
void dirty_note_locked(atomio *st, const struct grp *g, uint32_t n)
{
	ASSERT_LOCKED(st);
	struct dtab *d = dt_cur_locked(st);
	struct dkey *slot = shm_dtab(st->sh, st->S->dset_cur);
	struct file_cached w = {.st = st, .g = g, .n = n};
	for (const struct seg *s; (s = file_cached_next(&w));)
		for (uint64_t b = s->off / DBLOCK; b <= (s->off + s->len - 1) / DBLOCK; b++)
			if (!dset_add(d, slot, st->sh->dcap, s->file, b)) {
				d->overflow = 1;
				return;
			}
}

/* A checkpoint starts (before it takes the files' dirty flags and syncs):
 * what is dirty now is what it makes durable; the other table, emptied at
 * the last checkpoint's end, collects from now on.  Mutex held. */
static void dirty_ckpt_begin_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	struct shm_state *S = st->S;
	atomic_fetch_add(&st->sh->stats.bytes_checkpointed, st->sh->dt[S->dset_cur].used * DBLOCK);
	S->dset_cur ^= 1;
}

static int cmp_key(const void *a, const void *b)
{
	const struct dkey *x = a, *y = b;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->blk1 < y->blk1 ? -1 : x->blk1 > y->blk1;
}

/* A checkpoint ends (synced: a background one that succeeded): empty its
 * table for the next one, and return the blocks it made durable, except
 * those written again since it began, for dirty_drop (*n of them; NULL when
 * none).  The table is the checkpoint's own only until it gives up
 * S->ckpt_owner -- the next checkpoint's beginning makes it the home
 * stage's -- so this runs with the checkpoint held; read without the mutex.
 * Mutex not held. */
static struct dkey *dirty_ckpt_end(atomio *st, unsigned tab, bool synced, uint64_t *n)
{
	ASSERT_UNLOCKED(st);
	ASSERT_CKPT(st);
	struct shm *sh = st->sh;
	struct dkey *slot = shm_dtab(sh, tab);
	struct dtab *d = &sh->dt[tab];
	uint64_t cap = sh->dcap, used = d->used;
	struct dkey *v = synced && used ? malloc(used * sizeof(*v)) : NULL;
	*n = 0;
	/* Only the pages marked (dset_add): the whole table is 16 MiB at the
	 * default log, all of it read and cleared by every checkpoint before,
	 * in whichever process ran it.  A page's mark goes after it is clear. */
	for (uint64_t p = 0; p < cap / SHM_DPAGE; p++) {
		if (!(d->pages[p / 64] >> (p % 64) & 1))
			continue;
		struct dkey *pg = slot + p * SHM_DPAGE;
		for (uint64_t i = 0; v && i < SHM_DPAGE && *n < used; i++)
			if (pg[i].blk1)
				v[(*n)++] = pg[i];
		memset(pg, 0, SHM_DPAGE * sizeof(*pg));
		d->pages[p / 64] &= ~(1ull << (p % 64));
	}
	d->used = 0;
	d->overflow = 0;
	if (!v)
		return NULL;
	qsort(v, *n, sizeof(*v), cmp_key);
	shm_lock(st);
	/* Blocks dirtied again meanwhile stay (blk1 = 0 marks them). */
	const struct dkey *now = shm_dtab(sh, st->S->dset_cur);
	for (uint64_t i = 0; i < *n; i++)
		if (dset_has(now, cap, v[i].file, v[i].blk1 - 1))
			v[i].blk1 = 0;
	shm_unlock(st);
	return v;
}

/* Drop from the page cache of the O_DIRECT files' twins the blocks a
 * background checkpoint made durable (dirty_ckpt_end's; dropping a whole
 * file, as a full checkpoint does, would also start the write-back of pages
 * dirtied meanwhile -- POSIX_FADV_DONTNEED writes dirty pages first -- and
 * write them twice).  Frees v.  No lock or role needed. */
static void dirty_drop(atomio *st, struct dkey *v, uint64_t n)
{
	fd_use_begin(st);
	for (uint64_t i = 0; i < n;) {
		if (!v[i].blk1) {
			i++;
			continue;
		}
		uint64_t j = i + 1;
		while (j < n && v[j].file == v[i].file && v[j].blk1 == v[j - 1].blk1 + 1)
			j++;
		struct afile *f = v[i].file < MAX_FILES ? atomic_load(&st->files[v[i].file]) : NULL;
		int hfd = f ? __atomic_load_n(&f->hfd, __ATOMIC_ACQUIRE) : -1;
		if (hfd >= 0 && hfd != f->fd)
			sys_fadvise(hfd, (off_t)((v[i].blk1 - 1) * DBLOCK), (off_t)((j - i) * DBLOCK),
				    POSIX_FADV_DONTNEED);
		i = j;
	}
	fd_use_end(st);
	free(v);
	files_close_stale(st); /* a quiet point of the checkpointer */
}

/* --- the checkpoint ---------------------------------------------------------------- */

/* fsync where the size went down or was set: fdatasync need not carry a
 * shrink on every filesystem.  Growth by writes is data-retrieval metadata,
 * which fdatasync does carry. */
void ckpt_home_begin_locked(atomio *st, uint64_t k, const struct grp *g, uint32_t n)
{
	ASSERT_LOCKED(st);
	struct shm *sh = st->sh;
	if (!g) {
		atomic_store(&sh->fwrote_all, k + 1);
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < g[i].nsegs; j++) {
			uint32_t id = g[i].segs[j].file;
			if (id < MAX_FILES && atomic_load(&sh->fwrote[id]) < k + 1)
				atomic_store(&sh->fwrote[id], k + 1);
		}
}

/* May a sync through f->hfd be trusted (TRUSTED DESCRIPTORS)? */
static bool fd_trusted(atomio *st, const struct afile *f)
{
	uint64_t w = __atomic_load_n(&f->hfd_wrote, __ATOMIC_RELAXED);
	return w <= atomic_load(&st->sh->fsynced[f->id]) || w <= atomic_load(&st->sh->fsynced_all);
}

static void max_store(_Atomic uint64_t *w, uint64_t v)
{
	uint64_t o = atomic_load(w);
	while (o < v && !atomic_compare_exchange_weak(w, &o, v))
		;
}

static int sync_one(atomio *st, struct afile *f, bool resized)
{
	/* Batches home before the sync begins: their bytes are in the page
	 * cache, which it writes; a later one's may not be. */
	uint64_t homed = atomic_load(&st->sh->homed);
	bool trusted = fd_trusted(st, f);
	int r = resized ? sys_fsync_full(f->hfd) : sys_fdatasync_full(f->hfd);
	atomic_fetch_add(&st->sh->stats.data_syncs, 1);
	if (r == 0 && trusted)
		max_store(&st->sh->fsynced[f->id], homed);
	return r;
}

static bool take_bit(_Atomic uint64_t *map, uint32_t id)
{
	uint64_t bit = 1ull << (id % 64);
	return atomic_fetch_and(&map[id / 64], ~bit) & bit;
}

static void put_bit(_Atomic uint64_t *map, uint32_t id)
{
	atomic_fetch_or(&map[id / 64], 1ull << (id % 64));
}

/* A descriptor another attached process holds of the registered file id,
 * found through /proc/PID/fd: opened O_PATH (no open of a device or FIFO
 * planted there acts or blocks), its identity checked, then opened again
 * for reading through this process's own /proc entry. */
struct held {
	atomio *st;
	const struct afile *f;
	char dir[64];
	int fd;
};

static int held_try(void *arg, const char *name)
{
	struct held *h = arg;
	char p[96];
	snprintf(p, sizeof(p), "%s/%s", h->dir, name);
	int pfd = atomio_sys->open(p, O_PATH | O_CLOEXEC, 0);
	if (pfd < 0)
		return 0;
	struct stat sb;
	struct fid now;
	if (atomio_sys->fstat(pfd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_dev == h->f->idn.dev &&
	    sb.st_ino == h->f->idn.ino && file_identity(pfd, &now) == 0 && codec_fid_same(&h->f->idn, &now)) {
		snprintf(p, sizeof(p), "/proc/self/fd/%d", pfd);
		h->fd = atomio_sys->open(p, O_RDONLY | O_CLOEXEC, 0);
	}
	atomio_sys->close(pfd);
	return h->fd >= 0;
}

/* File id's path names no file now, or another one (renamed or replaced
 * while a process holds it open): its home writes are in the page cache of
 * an inode that no path of the catalog leads to, and the records that
 * would redo them can only go once they are durable.  Sync it through a
 * descriptor a live process of the store holds (the one that wrote it home,
 * or one that has it open: every process keeps its files open until it
 * closes the store).  0 synced; -ENOENT when no process holds it (every one
 * that had it closed the store: nothing can reach it, and recovery could
 * replay nothing into it); else an error naming the file. */
static int sync_held(atomio *st, uint32_t id, bool resized)
{
	const struct afile *f = atomic_load(&st->files[id]);
	if (!f)
		return -ENOENT;
	struct held h = {.st = st, .f = f, .fd = -1};
	const struct shm_proc *pr = shm_procs(st->sh);
	for (uint32_t i = 0; i < SHM_PROCS && h.fd < 0 && !st->exclusive; i++) {
		if (!atomic_load(&pr[i].state) || i + 1 == st->me)
			continue;
		snprintf(h.dir, sizeof(h.dir), "/proc/%u/fd", pr[i].pid);
		(void)sys_listdir(h.dir, held_try, &h);
	}
	if (h.fd < 0)
		return -ENOENT;
	int r = resized ? sys_fsync_full(h.fd) : sys_fdatasync_full(h.fd);
	atomic_fetch_add(&st->sh->stats.data_syncs, 1);
	atomio_sys->close(h.fd);
	if (r < 0)
		st_err(st, "syncing data file %s (no longer at that path; through the descriptor another "
			   "process of the store holds): %s", f->path, strerror(-r));
	return r;
}

/* Sync every data file written since it was last synced (all: every file
 * registered, when a checkpoint's holder died).  The flags are taken before
 * the sync: a home write after that sets them again; a sync that fails puts
 * its flag back (the store fails anyway).  full: drop an O_DIRECT file's
 * twin's pages whole after its sync.  Checkpoint role held. */
#define CKPT_DEFERRED 1 /* sync_files: a background checkpoint met a descriptor it cannot trust */

static int sync_files(atomio *st, uint32_t top, bool all, bool full)
{
	ASSERT_CKPT(st);
	struct shm *sh = st->sh;
	for (uint32_t id = 0; id < top; id++) {
		bool resized = take_bit(sh->fresized, id);
		bool dirty = take_bit(sh->fdirty, id);
		if (!dirty && !resized && !all)
			continue;
		int err = 0;
		struct afile *f = file_get_any(st, id, &err);
		if (!f && (err == -ENOENT || err == ATOMIO_EIDENTITY)) {
			/* Its path names no file now, or another one (renamed,
			 * removed or replaced since a process wrote it): its
			 * flag taken, it is synced here or nowhere. */
			int r = dirty || resized ? sync_held(st, id, resized) : 0;
			if (r < 0 && r != -ENOENT) {
				put_bit(resized ? sh->fresized : sh->fdirty, id);
				return r;
			}
			continue;
		}
		if (!f && err == ATOMIO_EBADPATH && !dirty && !resized)
			continue; /* all: an id never registered */
		if (!f) {
			put_bit(resized ? sh->fresized : sh->fdirty, id);
			return err;
		}
		if (!full && !fd_trusted(st, f)) {
			/* Opened after home writes it must cover: the next full
			 * checkpoint writes them through it first. */
			if (dirty || resized)
				put_bit(resized ? sh->fresized : sh->fdirty, id);
			return CKPT_DEFERRED;
		}
		int r = sync_one(st, f, resized || all);
		if (r < 0) {
			/* The kernel may have dropped the dirty pages with the
			 * error; a retried fsync could then "succeed".  Keep the
			 * log, refuse further work; recovery replays it. */
			char path[PATH_MAX];
			st_err(st, "syncing data file %s: %s", file_name(st, f, path, sizeof(path)),
			       strerror(-r));
			put_bit(resized ? sh->fresized : sh->fdirty, id);
			return r;
		}
		/* After a full checkpoint the twin's pages are clean: drop them,
		 * so that an O_DIRECT file does not keep page cache between
		 * checkpoints (a background one drops only what it synced,
		 * dirty_ckpt_end). */
		if (full && f->hfd >= 0 && f->hfd != f->fd)
			sys_fadvise(f->hfd, 0, 0, POSIX_FADV_DONTNEED);
	}
	return 0;
}

/* A checkpoint's holder died (S->sb_stale): it may have written its
 * superblock -- after its sync, so what it gave up is durable at home --
 * without this state knowing.  Read the superblock back and take what it
 * says: the next one written must have a later generation, and a full
 * checkpoint's (head 0) must move the tail to 0 too, or new records would
 * go where recovery, starting at 0, never looks.  What the superblock says
 * decides, not its generation: log_write_sb publishes the shared copy
 * (sh->sb) as soon as its write is durable, so a holder that died after
 * that and before it moved the ring leaves a superblock of the generation
 * this state already knows, which the ring does not yet follow.  Called by
 * the next checkpoint's holder as it begins and by a leader before it forms
 * a batch (log role held), whichever comes first: no batch forms and no
 * superblock is written while S->sb_stale is set, and the first back here
 * applies it.  Mutex held, dropped to read.  0 or an error (the store
 * fails). */
int checkpoint_reconcile_locked_drops(atomio *st)
{
	ASSERT_LOCKED_DROPS(st);
	struct sb_disk sb;
	uint64_t known = st->sh->sb.generation;
	shm_unlock(st);
	int r = log_reload_sb(st, &sb);
	/* A newer one was written by the holder that died -- which may not
	 * have lived to make it durable (its RWF_DSYNC write cut short: the
	 * page cache or the device's cache may hold it alone).  Make it
	 * durable before anything counts on it: records are about to go where
	 * it says the log starts, and a power cut that lost it would have
	 * recovery start from the older one, which does not lead to them. */
	if (r == 0 && sb.generation > known) {
		r = sys_fdatasync_full(st->log_fd);
		if (r < 0)
			st_err(st, "%s: syncing the superblock a process that died wrote: %s", st->log_path,
			       strerror(-r));
	}
	shm_lock(st);
	struct shm_state *S = st->S;
	if (r < 0) {
		st_fail_locked(st, r);
		return r;
	}
	if (!S->sb_stale)
		return 0; /* another did it meanwhile */
	S->sb_stale = 0;
	/* Each case below is a no-op when the ring already follows the
	 * superblock (the holder died after it moved the ring, or wrote none). */
	if (sb.head_off == 0 && sb.head_seq == S->next_seq && S->home_next == S->batch_next) {
		/* a full checkpoint's: every record is dead, and the next goes
		 * at 0, where recovery starts */
		S->head = S->tail = S->used = 0;
		S->head_seq = S->home_seq = sb.head_seq;
		S->home_off = 0;
	} else if (sb.head_seq > S->head_seq && sb.head_seq <= S->home_seq) {
		/* a background one's cut */
		uint64_t freed = sb.head_off >= S->head ? sb.head_off - S->head
							 : st->area_size - S->head + sb.head_off;
		if (freed == 0 || freed > S->used)
			freed = S->used;
		S->used -= freed;
		S->head = sb.head_off;
		S->head_seq = sb.head_seq;
	}
	st->sh->sb = sb;
	return 0;
}

/* A checkpoint begins: take the role (mutex held).  *all: every file must
 * be synced (a holder died, and may have taken files' flags). */
static int ckpt_begin_locked_drops(atomio *st, bool *all, uint32_t *top, unsigned *tab)
{
	ASSERT_LOCKED_DROPS(st);
	st->S->ckpt_owner = st->me;
	HOLD_SET(st->ckpt_holder);
	int r = st->S->sb_stale ? checkpoint_reconcile_locked_drops(st) : 0;
	struct shm_state *S = st->S;
	*all = S->ckpt_lost;
	*top = S->files_hi;
	dirty_ckpt_begin_locked(st);
	*tab = S->dset_cur ^ 1;
	return r;
}

/* A checkpoint ends: give the role up (mutex held). */
static void ckpt_end_locked(atomio *st, int r, bool all)
{
	ASSERT_LOCKED(st);
	struct shm_state *S = st->S;
	if (r < 0)
		st_fail_locked(st, r);
	else if (all)
		S->ckpt_lost = 0;
	HOLD_CLEAR(st->ckpt_holder);
	S->ckpt_owner = 0;
	shm_wake(st, &st->sh->ev_ckpt);
}

/* A full checkpoint's files to sync through a descriptor it cannot trust
 * (TRUSTED DESCRIPTORS): their live records are written through it first,
 * and it is trusted from then on.  Log role held, every batch home.  0 or an
 * error (left to sync_files when a file cannot be opened). */
static int replay_untrusted(atomio *st, uint32_t top, bool all)
{
	struct shm *sh = st->sh;
	uint8_t *only = NULL;
	for (uint32_t id = 0; id < top; id++) {
		uint64_t bit = 1ull << (id % 64);
		if (!all && !((atomic_load(&sh->fdirty[id / 64]) | atomic_load(&sh->fresized[id / 64])) & bit))
			continue;
		int gerr = 0; /* (an error is sync_files's to meet) */
		struct afile *f = file_get_any(st, id, &gerr);
		if (!f || fd_trusted(st, f))
			continue;
		if (!only && !(only = calloc(MAX_FILES / 8, 1)))
			return -ENOMEM;
		only[id / 8] |= (uint8_t)(1u << (id % 8));
	}
	if (!only)
		return 0;
	int r = replay_files(st, only);
	for (uint32_t id = 0; r == 0 && id < top; id++) {
		struct afile *f = (only[id / 8] & (1u << (id % 8))) ? atomic_load(&st->files[id]) : NULL;
		if (f)
			__atomic_store_n(&f->hfd_wrote, 0, __ATOMIC_RELAXED);
	}
	if (r < 0)
		st_err(st, "%s: writing the live records again through a descriptor opened after them: %s",
		       st->log_path, strerror(-r));
	free(only);
	return r;
}

/* Full checkpoint.  Log role held, every batch home, mutex not held. */
int checkpoint_full_role(atomio *st)
{
	ASSERT_ROLE(st);
	shm_lock(st);
	while (st->S->ckpt_owner)
		shm_wait_locked_drops(st, &st->sh->ev_ckpt);
	struct shm_state *S = st->S;
	int failed = S->failed;
	bool all = false;
	uint32_t top = 0;
	unsigned tab = 0;
	if (failed) {
		shm_unlock(st);
		return ATOMIO_EFAILED;
	}
	int r = ckpt_begin_locked_drops(st, &all, &top, &tab);
	S = st->S;
	uint64_t seq = S->next_seq, used = S->used, tail = S->tail;
	uint64_t homed = atomic_load(&st->sh->homed); /* every batch: the role held, all home */
	shm_unlock(st);

	fd_use_begin(st);
	if (r == 0)
		r = replay_untrusted(st, top, all);
	if (r == 0)
		r = sync_files(st, top, all, true);
	fd_use_end(st);
	/* The log starts over at 0, with a superblock saying so.  With no live
	 * record and the tail at 0 already, the superblock stands as it is.
	 * (Never restart at 0 without it: a record written there could cover
	 * the superblock's head offset, which recovery reads first.) */
	bool any = used != 0 || tail != 0;
	if (r == 0 && any)
		r = log_write_sb(st, 0, seq, st->rec_epoch);
	uint64_t nv;
	(void)dirty_ckpt_end(st, tab, false, &nv); /* sync_files dropped the files' pages whole */
	shm_lock(st);
	S = st->S;
	if (r == 0 && any) {
		S->head = S->tail = S->used = 0;
		S->head_seq = S->home_seq = seq;
		S->home_off = 0;
	}
	S->ckpt_wanted = 0;
	ckpt_end_locked(st, r, all);
	shm_unlock(st);
	if (r < 0)
		return r;
	/* Every home write so far is durable now (TRUSTED DESCRIPTORS): any
	 * descriptor open now sees the errors of those to come. */
	max_store(&st->sh->fsynced_all, homed);
	/* Every record is dead now: no replay can overwrite a fast-path write. */
	guard_clear_all_role(st);
	if (any)
		atomic_fetch_add(&st->sh->stats.checkpoints, 1);
	return 0;
}

/* Background checkpoint (a checkpointer thread).  Mutex not held. */
static void checkpoint_background(atomio *st)
{
	ASSERT_UNLOCKED(st);
	shm_lock(st);
	struct shm_state *S = st->S;
	if (S->ckpt_owner || S->failed || S->home_seq == S->head_seq) {
		/* another runs; or no batch home since the last checkpoint */
		shm_unlock(st);
		return;
	}
	bool all;
	uint32_t top;
	unsigned tab;
	int r = ckpt_begin_locked_drops(st, &all, &top, &tab);
	/* The cut is taken after the beginning, which may have read back the
	 * superblock of a holder that died and moved the ring to follow it (a
	 * full checkpoint's: head and tail at 0): a cut taken before would
	 * point into the ring given up, and its superblock would send recovery
	 * where the records written since never go.  After it the ring may
	 * have nothing home to free: the files are synced all the same (the
	 * dirty set was handed to this checkpoint), no superblock written. */
	S = st->S;
	uint64_t cut_seq = S->home_seq, cut_off = S->home_off;
	bool cut = cut_seq != S->head_seq;
	shm_unlock(st);

	if (r == 0) {
		wb_drain(st);
		fd_use_begin(st);
		r = sync_files(st, top, all, false);
		fd_use_end(st);
	}
	bool deferred = r == CKPT_DEFERRED;
	if (deferred) {
		/* A file it could not trust the sync of: no cut; the next full
		 * checkpoint makes it durable (TRUSTED DESCRIPTORS). */
		r = 0;
		cut = false;
	}
	if (r == 0 && cut)
		r = log_write_sb(st, cut_off, cut_seq, st->rec_epoch);
	uint64_t nv;
	struct dkey *v = dirty_ckpt_end(st, tab, r == 0, &nv);

	shm_lock(st);
	S = st->S;
	if (r == 0 && cut) {
		/* Free what lies between the old head and the cut (a wrap's
		 * skipped end of area included). */
		uint64_t freed = cut_off >= S->head ? cut_off - S->head : st->area_size - S->head + cut_off;
		if (freed == 0 || freed > S->used)
			freed = S->used; /* the cut is a whole lap on: all of it */
		S->used -= freed;
		S->head = cut_off;
		ASSERT((S->head + S->used) % st->area_size == S->tail % st->area_size);
		S->head_seq = cut_seq;
		atomic_fetch_add(&st->sh->stats.checkpoints, 1);
	}
	ckpt_end_locked(st, r, all && !deferred);
	shm_unlock(st);
	if (v)
		dirty_drop(st, v, nv);
}

/* --- the checkpointer thread (one per process, started when first needed) ----------- */

static void *ckpter_main(void *arg)
{
	atomio *st = arg;
	own_lock(st);
	while (!st->ckpter_stop) {
		st->ckpter_kick = false;
		own_unlock(st);
		/* One batch of the paced write-back (writeback.c) if one is
		 * due, then the checkpoint if one is wanted of this process:
		 * a write-back batch delays a checkpoint by at most one batch's
		 * calls. */
		bool did = false;
		if (wb_due(st)) {
			wb_issue(st);
			did = true;
		}
		shm_lock(st);
		bool want = st->S->ckpt_wanted == st->me && !st->S->ckpt_owner;
		if (want)
			st->S->ckpt_wanted = 0;
		shm_unlock(st);
		if (want) {
			checkpoint_background(st);
			did = true;
		}
		/* Then a chunk of the new log's zeroing (logfile.c), if the
		 * records come near the unwritten part. */
		shm_lock(st);
		if (!did && log_zero_due_locked(st)) {
			log_zero_step_locked_drops(st);
			did = true;
		}
		shm_unlock(st);
		own_lock(st);
		if (!did && !st->ckpter_kick && !st->ckpter_stop)
			own_wait(st, &st->ckpter_cv);
	}
	own_unlock(st);
	return NULL;
}

/* Ask this process's checkpointer for a background checkpoint.  Mutex held.
 * 0 or -EAGAIN. */
int checkpoint_request_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	int r = checkpoint_wake(st);
	if (r == 0)
		st->S->ckpt_wanted = st->me;
	return r;
}

/* Wake this process's checkpointer (started if need be): it runs a
 * checkpoint wanted of it, the paced write-back's due batch, a chunk of the
 * log's zeroing.  0 or -EAGAIN. */
int checkpoint_wake(atomio *st)
{
	own_lock(st);
	int r = 0;
	if (!st->ckpter_on && !st->ckpter_stop) {
		r = thread_start(&st->ckpter, ckpter_main, st);
		if (r == 0)
			st->ckpter_on = true;
	}
	st->ckpter_kick = true;
	pthread_cond_signal(&st->ckpter_cv);
	own_unlock(st);
	return st->ckpter_stop ? -EAGAIN : r;
}

void checkpoint_leave_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	if (st->S->ckpt_wanted == st->me)
		st->S->ckpt_wanted = 0;
}

/* Stop the checkpointer; a background checkpoint in progress is finished
 * first. */
void checkpoint_stop(atomio *st)
{
	own_lock(st);
	bool on = st->ckpter_on;
	st->ckpter_stop = true;
	pthread_cond_signal(&st->ckpter_cv);
	own_unlock(st);
	if (on)
		pthread_join(st->ckpter, NULL);
	st->ckpter_on = false;
}
