/*
 * store.c: the public store API: opening (with creation and recovery) and
 * closing a store, its limits and its counters.  The top layer: the log file
 * is logfile.c's, the catalog files.c's, replay recover.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "shm.h"

/* --- open / close ---------------------------------------------------------- */

static void st_free(atomio *st)
{
	if (!st)
		return;
	fork_pending_end(st->fork_pending); /* a failed open */
	fork_untrack(st);
	if (st->sh) {
		async_stop(st); /* the worker thread, if asynchronous commits started it */
		checkpoint_stop(st); /* the checkpointer, if the policy started it */
	}
	engine_close(st);
	shm_detach(st);
	files_close_all(st);
	if (st->wb.max || st->wb.ring)
		wb_free(st);
	shm_unmap_state(st);
	if (st->shm_fd >= 0)
		atomio_sys->close(st->shm_fd);
	if (st->log_fd >= 0)
		atomio_sys->close(st->log_fd); /* also drops the flock and the lock bytes */
	tx_pool_free(st);
	free(st->zero_buf);
	free(st->pad_buf);
	free(st->files);
	free(st->log_path);
	free(st->log_dir);
	free(st->shm_path);
	pthread_mutex_destroy(&st->lock);
	pthread_mutex_destroy(&st->cat_lock);
	async_destroy(st);
	checkpoint_destroy(st);
	free(st);
}

/* The options atomio_open refuses (-EINVAL), before anything is done. */
static int options_check(const struct atomio_options *opts)
{
	if (opts->flags & ~(ATOMIO_CREATE | ATOMIO_ALLOW_SHARED_LOG | ATOMIO_FORCE_PATHS |
			    ATOMIO_ENGINE_PLAIN | ATOMIO_ENGINE_URING | ATOMIO_FAST_PATH_OFF |
			    ATOMIO_FAST_PATH_FORCE | ATOMIO_DIRECT_HOME | ATOMIO_NO_BG_CHECKPOINT |
			    ATOMIO_NO_COMPRESS | ATOMIO_ACCEPT_COPIES | ATOMIO_EXCLUSIVE))
		return -EINVAL;
	if ((opts->flags & ATOMIO_ENGINE_PLAIN) && (opts->flags & ATOMIO_ENGINE_URING))
		return -EINVAL;
	if ((opts->flags & ATOMIO_FAST_PATH_OFF) && (opts->flags & ATOMIO_FAST_PATH_FORCE))
		return -EINVAL;
	for (unsigned i = 0; i < sizeof(opts->reserved) / sizeof(opts->reserved[0]); i++)
		if (opts->reserved[i])
			return -EINVAL;
	if (opts->ckpt_percent > 99)
		return -EINVAL;
	if (opts->lazy_delay_us > LAZY_DELAY_MAX_US)
		return -EINVAL;
	if (opts->log_size && (opts->log_size < 65536 || opts->log_size > (1ull << 48)))
		return -EINVAL;
	return 0;
}

/* flock(fd, op), op with LOCK_NB.  A process killed while its io_uring
 * requests were in flight keeps its files (and so this lock) until the
 * kernel has finished them, a few milliseconds after it is gone: a restart
 * (or a removal: atomio_log_remove) right after a crash must not be told the
 * store is busy.  So it waits up to 250 ms first.  (A sleep is no I/O: it
 * does not go through the ops table.) */
static int flock_patient(int fd, int op)
{
	int r = atomio_sys->flock(fd, op);
	for (int i = 0; r == -EWOULDBLOCK && i < 50; i++) {
		struct timespec ts = {0, 5000000L};
		nanosleep(&ts, NULL);
		r = atomio_sys->flock(fd, op);
	}
	return r;
}

/* The log open as fd may be the store's: a regular file, writable by its
 * owner alone (unless ATOMIO_ALLOW_SHARED_LOG), and not held by a process
 * that wants it alone: flock LOCK_SH for a shared store (every process of it
 * holds one), LOCK_EX for an exclusive one (and a library that predates
 * shared stores, which takes LOCK_EX too). */
static int claim_log(atomio *st, int fd, const char *log_path)
{
	struct stat ls;
	int r = atomio_sys->fstat(fd, &ls);
	if (r < 0)
		return r;
	if (!S_ISREG(ls.st_mode)) {
		st_err(st, "%s: not a regular file", log_path);
		return ATOMIO_ENOTLOG;
	}
	if (!(st->flags & ATOMIO_ALLOW_SHARED_LOG) &&
	    ((ls.st_mode & (S_IWGRP | S_IWOTH)) || ls.st_uid != geteuid())) {
		st_err(st, "%s: the log is writable by users other than its owner, or not owned by "
			   "this user (mode %04o, uid %u); chmod 600 it or pass ATOMIO_ALLOW_SHARED_LOG",
		       log_path, (unsigned)(ls.st_mode & 07777), (unsigned)ls.st_uid);
		return ATOMIO_EUNSAFE;
	}
	r = flock_patient(fd, (st->exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB);
	if (r == -EWOULDBLOCK) {
		st_err(st, st->exclusive ? "%s: the store is open elsewhere (ATOMIO_EXCLUSIVE wants it alone)"
					 : "%s: the store is open elsewhere with ATOMIO_EXCLUSIVE, or by an "
					   "atomio that predates shared stores",
		       log_path);
		return -EBUSY;
	}
	return r;
}

/* This process is the store's first: the catalog, recovery, a new shared
 * state.  0 or an error. */
static int first_open(atomio *st, const struct atomio_options *opts, uint64_t created_lo)
{
	int r = cat_load(st);
	uint64_t next_seq = 0;
	if (r == 0)
		r = recover(st, &next_seq);
	if (r < 0)
		return r;
	st->rec_epoch = st->sb_local.epoch;
	struct shm_start in = {.next_seq = next_seq, .zero_lo = log_zero_start(st, created_lo),
			       .lz_delay_ns = opts->lazy_delay_us * 1000ull};
	checkpoint_policy(st->area_size, opts->ckpt_percent, opts->dirty_limit, &in.ckpt_at, &in.dirty_limit);
	return shm_build(st, &in);
}

/* A later process: the state the first one built.  Its checkpoint policy is
 * the store's; asking for another is an error. */
static int join_open(atomio *st, const struct atomio_options *opts)
{
	/* The superblock read before LK_INIT may predate the first process's
	 * recovery (a new epoch): read it again. */
	int r = log_load_sb(st);
	if (r == 0)
		r = cat_load_joining(st);
	if (r == 0)
		r = shm_join(st);
	if (r < 0)
		return r;
	uint64_t ckpt_at, limit;
	checkpoint_policy(st->area_size, opts->ckpt_percent, opts->dirty_limit, &ckpt_at, &limit);
	if ((opts->ckpt_percent && ckpt_at != st->sh->ckpt_at) ||
	    (opts->dirty_limit && limit != st->sh->dirty_limit)) {
		st_err(st, "%s: the store is open with another checkpoint policy (%s): the first process "
			   "to open it sets it; pass 0 for the store's",
		       st->log_path, opts->ckpt_percent && ckpt_at != st->sh->ckpt_at ? "ckpt_percent"
										 : "dirty_limit");
		return -EINVAL;
	}
	/* The lazy delay is the store's too: the flusher of any process flushes
	 * every process's groups (commit.c, LAZY GROUPS). */
	if (opts->lazy_delay_us && opts->lazy_delay_us * 1000ull != st->sh->lz_delay_ns) {
		st_err(st, "%s: the store is open with another lazy delay (lazy_delay_us %llu, not %llu): "
			   "the first process to open it sets it; pass 0 for the store's",
		       st->log_path, (unsigned long long)(st->sh->lz_delay_ns / 1000),
		       (unsigned long long)opts->lazy_delay_us);
		return -EINVAL;
	}
	return 0;
}

/* Shared store: first or later (shm.h, WHO OPENS, WHO JOINS).  *first: this
 * process recovered the log and built the state. */
static int shared_open(atomio *st, const struct atomio_options *opts, uint64_t created_lo, bool *first)
{
	/* One process at a time decides: while this one holds LK_INIT, no
	 * other is half-way through recovery or the state's rebuild, nor
	 * removing the state's file as the last to leave (shared_close). */
	int r = sys_ofd_lock(st->log_fd, SYS_LK_WAIT, F_WRLCK, LK_INIT, 1);
	if (r < 0)
		return r;
	r = shm_open_file(st, st->log_path);
	if (r == 0)
		r = sys_ofd_lock(st->log_fd, SYS_LK_SET, F_WRLCK, LK_DMS, 1);
	/* The processes that hold LK_DMS may all be gone already: killed with
	 * io_uring requests in flight, a process keeps its files (and so its
	 * locks) until the kernel has finished them, a few milliseconds after
	 * it is gone.  A restart right after a crash must recover the log, not
	 * join the state of the dead: so while every process the state lists
	 * is gone, wait up to 250 ms for their locks to go too.  (A sleep is
	 * no I/O: it does not go through the ops table.) */
	for (int i = 0; r == -EAGAIN && i < 50; i++) {
		/* a look, not the join: its complaints are not the caller's
		 * (the superblock read before LK_INIT may be a recovery old,
		 * which join_open reads again) */
		char *eb = st->errbuf;
		st->errbuf = NULL;
		bool gone = shm_join(st) == 0 && shm_all_gone(st);
		st->errbuf = eb;
		shm_unmap_state(st);
		st->sbp = &st->sb_local; /* shm_join pointed it at the state */
		if (!gone)
			break;
		struct timespec ts = {0, 5000000L};
		nanosleep(&ts, NULL);
		r = sys_ofd_lock(st->log_fd, SYS_LK_SET, F_WRLCK, LK_DMS, 1);
	}
	*first = r == 0;
	if (*first) {
		/* No process has the store open: recover, build the state (in a
		 * file of its own: shm_file_fresh), then stay as one of its
		 * processes (the write lock becomes a read lock, at once). */
		r = shm_file_fresh(st);
		if (r == 0)
			r = first_open(st, opts, created_lo);
		if (r == 0)
			r = sys_ofd_lock(st->log_fd, SYS_LK_SET, F_RDLCK, LK_DMS, 1);
		else
			shm_file_unlink(st); /* no process uses it: none is left behind */
	} else if (r == -EAGAIN) {
		/* Others have it open, and finished building its state before
		 * they released LK_INIT. */
		r = sys_ofd_lock(st->log_fd, SYS_LK_SET, F_RDLCK, LK_DMS, 1);
		if (r == 0)
			r = join_open(st, opts);
	}
	if (r == 0)
		r = shm_attach(st);
	(void)sys_ofd_lock(st->log_fd, SYS_LK_SET, F_UNLCK, LK_INIT, 1);
	return r;
}

int atomio_open(const char *log_path, const struct atomio_options *opts, atomio **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!log_path || !*log_path)
		return -EINVAL;
	struct atomio_options def = {0};
	if (!opts)
		opts = &def;
	int r = options_check(opts);
	if (r < 0)
		return r;
	if (opts->errbuf && opts->errbuf_size)
		opts->errbuf[0] = 0;

	atomio *st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->log_fd = st->shm_fd = -1;
	st->rebuild_locked = lz_rebuild_locked;
	st->fork_slot = st->fork_slot2 = st->fork_pending = -1;
	st->fork_gen = fork_init();
	st->flags = opts->flags;
	/* Without the shared-memory calls (a test's ops table that predates
	 * them), a store is one process's. */
	st->exclusive = (opts->flags & ATOMIO_EXCLUSIVE) || !atomio_sys->shm_map || !atomio_sys->ofd_lock;
	st->errbuf = opts->errbuf;
	st->errbuf_size = opts->errbuf_size;
	pthread_mutex_init(&st->lock, NULL);
	pthread_mutex_init(&st->cat_lock, NULL);
	async_init(st);
	checkpoint_setup(st);
	r = -ENOMEM;
	st->log_path = strdup(log_path);
	st->files = calloc(MAX_FILES, sizeof(*st->files));
	if (!st->log_path || !st->files)
		goto fail;

	/* Temporary files of this log left by creators that were killed
	 * (logfile.c): gone before anything else looks at the directory. */
	log_sweep_tmp(st, log_path);
	/* A fork by another thread between the log's open and fork_track would
	 * leave a child a copy of its open file description that no handler
	 * closes, and every lock taken on it later -- the flock, the lock bytes
	 * that say this process lives -- alive after this process is killed:
	 * the others would never take over what it held.  So the child handler
	 * also closes descriptors of a log being opened (util.c). */
	st->fork_pending = fork_pending_begin();
	int fd = log_open_fd(st, log_path);
	uint64_t created_lo = UINT64_MAX;
	if (fd == -ENOENT && (opts->flags & ATOMIO_CREATE)) {
		r = log_create(st, log_path, opts->log_size, &created_lo);
		if (r < 0)
			goto fail;
		fd = log_open_fd(st, log_path);
	}
	if (fd < 0) {
		r = fd;
		if (r != ATOMIO_ENOTLOG) /* that one has said why */
			st_err(st, "opening %s: %s", log_path, strerror(-r));
		goto fail;
	}
	st->log_fd = fd;
	fork_track(st); /* from here a fork closes the child's copy of fd */
	fork_pending_end(st->fork_pending);
	st->fork_pending = -1;
	r = claim_log(st, fd, log_path);
	if (r < 0)
		goto fail;

	char canon[PATH_MAX];
	r = atomio_sys->realpath(log_path, canon);
	if (r < 0)
		goto fail;
	st->log_dir = dir_of(canon);
	if (!st->log_dir) {
		r = -ENOMEM;
		goto fail;
	}
	r = log_load_sb(st);
	if (r < 0)
		goto fail;
	if (st->log_direct && st->block < 512) {
		r = ATOMIO_ECORRUPT;
		goto fail;
	}
	bool first = true;
	if (st->exclusive) {
		r = first_open(st, opts, created_lo);
		if (r == 0)
			r = shm_attach(st);
	} else {
		r = shared_open(st, opts, created_lo, &first);
		fork_track(st); /* the shared-memory file's descriptor too */
	}
	if (r < 0)
		goto fail;
	wb_init(st);
	r = engine_open(st, opts->flags);
	if (r < 0)
		goto fail;
	*out = st;
	return 0;
fail:
	st_free(st);
	return r;
}

/* The checkpoint of the last closer: every group home and durable, the log
 * emptied.  A failed store is left for recovery: checkpointing it could
 * declare durable what a failed fsync dropped.  Say so. */
static int close_checkpoint(atomio *st)
{
	/* Every lazy group first, of every process (plan 2.6): the drain of
	 * role_acquire drains batches, not the queue, and the log emptied
	 * below must not leave groups that only the arena holds.  Its error
	 * is the store's failure, which the check below reports. */
	(void)commit_sync(st, UINT64_MAX, 0);
	int r = role_acquire(st);
	if (r == 0) {
		int failed = st_failed(st);
		if (failed)
			st_err(st, "%s: closed without a checkpoint: the store had failed (%s); "
				   "reopening it recovers", st->log_path, atomio_strerror(failed));
		r = failed ? ATOMIO_EFAILED : checkpoint_full_role(st);
		role_release(st);
	}
	return r;
}

/* Close a shared store: this process leaves; the last one to leave
 * checkpoints the whole log, as a store of one process does at close. */
static int shared_close(atomio *st)
{
	shm_lock(st);
	checkpoint_leave_locked(st);
	shm_unlock(st);
	/* No process opens or leaves meanwhile (LK_INIT): if no other holds
	 * LK_DMS now, none will until this one is gone. */
	int r = sys_ofd_lock(st->log_fd, SYS_LK_WAIT, F_WRLCK, LK_INIT, 1);
	bool last = r == 0 && sys_ofd_lock(st->log_fd, SYS_LK_TEST, F_WRLCK, LK_DMS, 1) == 0;
	if (last) {
		r = close_checkpoint(st);
		/* Nothing of this state is used again: the next process to open
		 * the store builds its own after recovery, in a file of its own
		 * (none can have this one open: they open it holding LK_INIT). */
		__atomic_store_n(&st->sh->ready, 0, __ATOMIC_RELEASE);
		shm_file_unlink(st); /* unless a log replaced at its path has its own there */
	}
	return r;
}

int atomio_close(atomio *st)
{
	if (!st)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM; /* releases nothing (internal.h, FORK) */
	own_lock(st);
	if (st->open_txs) {
		own_unlock(st);
		return -EBUSY;
	}
	own_unlock(st);
	/* This handle's lazy groups durable before it goes (and the worker,
	 * maybe the flusher, with it): a closed handle's groups are no longer
	 * in the window of a lazy commit (API: durable at atomio_close). */
	int rs = st->lz_mine_hi ? commit_sync(st, st->lz_mine_hi, 0) : 0;
	async_stop(st);
	checkpoint_stop(st);
	int r;
	if (!st->exclusive)
		r = shared_close(st);
	else
		r = close_checkpoint(st);
	st_free(st); /* closing the log drops LK_INIT, LK_DMS and the slot's byte */
	return r ? r : rs;
}

int atomio_file_open(atomio *st, const char *path, int open_flags, mode_t mode)
{
	if (st && st_forked(st))
		return -EPERM;
	int r = file_open(st, path, open_flags, mode, false);
	if (r != FILE_OPEN_NEEDS_ROLE)
		return r;
	/* Another file lies under a registered path, with other processes
	 * about (files.c, reregister): the log role first, with no lock of the
	 * catalog held (the drain waits for batches whose leaders may open
	 * files), then a full checkpoint, then the registration again.  Lazy
	 * groups first: queued, they name the file id by its old file. */
	(void)commit_sync(st, UINT64_MAX, 0); /* a failed store: the checkpoint says so */
	r = role_acquire(st);
	if (r == 0)
		r = checkpoint_full_role(st);
	if (r == 0)
		r = file_open(st, path, open_flags, mode, true);
	role_release(st);
	return r;
}

int atomio_checkpoint(atomio *st)
{
	if (!st)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	/* Lazy groups first (plan 2.6): the checkpoint drains batches, not
	 * the queue; after it every group committed before the call is
	 * durable, as before lazy groups. */
	(void)commit_sync(st, UINT64_MAX, 0); /* a failed store: the checkpoint says so */
	role_acquire(st);
	int r = checkpoint_full_role(st);
	role_release(st);
	return r;
}

/* Wait until every group any process of the store queued or logged is home
 * (docs/API.md, atomio_settle): for a reader that holds its own lock against
 * live writers and must not read while a dead one's group is half home. */
int atomio_settle(atomio *st)
{
	if (!st)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	return commit_settle(st);
}

/* The application's bytes of the shared state (docs/API.md,
 * atomio_shared_area). */
int atomio_shared_area(atomio *st, void **area, size_t *len)
{
	if (!st || !area)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	*area = (void *)st->sh->app;
	if (len)
		*len = sizeof(st->sh->app);
	return 0;
}

/* --- caps / stats -------------------------------------------------------- */

int atomio_caps(atomio *st, int file, struct atomio_caps *caps)
{
	if (!st || !caps)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	struct afile *f = NULL;
	if (file >= 0) {
		f = file_app(st, file);
		if (!f)
			return -EINVAL;
	} else if (file != -1) {
		return -EINVAL;
	}
	memset(caps, 0, sizeof(*caps));
	caps->max_group_bytes = st->area_size - REC_HDR - REC_DESC;
	uint64_t segs = (st->area_size - REC_HDR) / (REC_DESC + 1);
	caps->max_segments = segs < MAX_SEGMENTS ? (uint32_t)segs : MAX_SEGMENTS;
	caps->segment_overhead = REC_DESC;
	caps->log_size = st->area_size;
	caps->log_block = st->block;
	if (f && f->direct) {
		caps->dio_offset_align = f->dio_off_align;
		caps->dio_mem_align = f->dio_mem_align;
	}
	caps_fill(st, f, caps);
	return 0;
}

int atomio_stats(atomio *st, struct atomio_stats *s)
{
	if (!st || !s)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	memset(s, 0, sizeof(*s));
	s->commits = atomic_load(&st->sh->stats.commits);
	s->bytes_logged = atomic_load(&st->sh->stats.bytes_logged);
	s->bytes_home = atomic_load(&st->sh->stats.bytes_home);
	s->log_syncs = atomic_load(&st->sh->stats.log_syncs);
	s->data_syncs = atomic_load(&st->sh->stats.data_syncs);
	s->checkpoints = atomic_load(&st->sh->stats.checkpoints);
	s->groups_recovered = atomic_load(&st->sh->stats.groups_recovered);
	s->batches = atomic_load(&st->sh->stats.batches);
	s->log_full_waits = atomic_load(&st->sh->stats.log_full_waits);
	s->fast_writes = atomic_load(&st->sh->stats.fast_writes);
	s->bytes_raw = atomic_load(&st->sh->stats.bytes_raw);
	s->records_compressed = atomic_load(&st->sh->stats.records_compressed);
	s->bytes_checkpointed = atomic_load(&st->sh->stats.bytes_checkpointed);
	s->records_beyond_tail = atomic_load(&st->sh->stats.records_beyond_tail);
	s->bytes_written_back = atomic_load(&st->sh->stats.bytes_written_back);
	shm_lock(st);
	s->dirty_bytes = st->sh->dt[st->S->dset_cur].used * 4096;
	shm_unlock(st);
	return 0;
}

/* --- lazy groups' syncs and counters (commit.c, LAZY GROUPS) -------------------- */

int atomio_sync_ticket(atomio *st, uint64_t ticket, unsigned flags)
{
	if (!st || (flags & ~ATOMIO_SYNC_NOWAIT))
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	atomic_fetch_add(&st->sh->stats.syncs, 1);
	return commit_sync(st, ticket, flags);
}

int atomio_sync(atomio *st, int file, unsigned flags)
{
	if (!st || (flags & ~ATOMIO_SYNC_NOWAIT))
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	if (file >= 0 && !file_app(st, file))
		return -EINVAL;
	atomic_fetch_add(&st->sh->stats.syncs, 1);
	return commit_sync(st, commit_sync_target(st, file), flags);
}

int atomio_lazy_stats(atomio *st, struct atomio_lazy_stats *s)
{
	if (!st || !s)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	memset(s, 0, sizeof(*s));
	const struct shm_stats *x = &st->sh->stats;
	s->lazy_commits = atomic_load(&x->lazy_commits);
	s->lazy_eager = atomic_load(&x->lazy_eager);
	s->syncs = atomic_load(&x->syncs);
	s->syncs_waited = atomic_load(&x->syncs_waited);
	s->flush_delay = atomic_load(&x->flush_delay);
	s->flush_press = atomic_load(&x->flush_press);
	s->flush_sync = atomic_load(&x->flush_sync);
	s->lazy_reads = atomic_load(&x->lazy_reads);
	s->lazy_waits = atomic_load(&x->lazy_waits);
	shm_lock(st);
	s->lazy_pending = st->S->lz_n;
	s->lazy_bytes = st->S->lz_bytes;
	shm_unlock(st);
	return 0;
}

/* --- removing a log ----------------------------------------------------------- */

/* The log at path opened for reading, as log_open_fd looks before it opens:
 * O_PATH first, so that no device or FIFO found there is opened for real;
 * O_NOFOLLOW, since it is the entry at path that is removed (a symlink
 * there is not the log).  Then the same inode opened O_RDONLY (what flock
 * and pread need).  The fd, or ATOMIO_ENOTLOG or the open's error. */
static int remove_open(const char *path)
{
	int pfd = atomio_sys->open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
	if (pfd < 0)
		return pfd;
	struct stat a, b;
	int r = atomio_sys->fstat(pfd, &a);
	atomio_sys->close(pfd);
	if (r < 0)
		return r;
	if (!S_ISREG(a.st_mode))
		return ATOMIO_ENOTLOG;
	int fd = atomio_sys->open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	r = atomio_sys->fstat(fd, &b);
	if (r == 0 && (a.st_dev != b.st_dev || a.st_ino != b.st_ino))
		r = -EAGAIN; /* replaced between the two opens */
	if (r < 0) {
		atomio_sys->close(fd);
		return r;
	}
	return fd;
}

/* Is path still the file open as fd (not renamed away or replaced since
 * it was opened)?  0 or -EAGAIN, or lstat's error. */
static int remove_same(const char *path, int fd)
{
	struct stat a, b;
	int r = atomio_sys->fstat(fd, &a);
	if (r == 0)
		r = atomio_sys->lstat(path, &b);
	if (r == 0 && (a.st_dev != b.st_dev || a.st_ino != b.st_ino))
		r = -EAGAIN;
	return r;
}

int atomio_log_remove(const char *log_path)
{
	if (!log_path || !*log_path)
		return -EINVAL;
	int fd = remove_open(log_path);
	if (fd < 0)
		return fd;
	/* Every process of a store holds the log's flock (shared, or exclusive
	 * for an exclusive store) as long as it has the store open: taken
	 * exclusive here, no process has it open, and none can open it until
	 * the lock is dropped, at the close below (its claim_log fails with
	 * -EBUSY meanwhile). */
	int r = flock_patient(fd, LOCK_EX | LOCK_NB);
	if (r == -EWOULDBLOCK)
		r = -EBUSY;
	/* A log's superblock, read by atomio_open's rules, names the state
	 * file (its store id) and says that the file is a log: what is not one
	 * is never removed. */
	struct atomio_log_mark m;
	if (r == 0)
		r = atomio_log_mark(fd, &m);
	if (r == 0)
		r = remove_same(log_path, fd);
	char *shm = NULL;
	if (r == 0) {
		shm = shm_where_of(m.store_id, fd, log_path);
		r = shm ? 0 : -ENOMEM;
	}
	/* The state file first: a failure or a crash between the two leaves
	 * the log, which names the state file and can be removed again (or
	 * opened: the state is rebuilt); the log removed first would leave a
	 * state file nothing names any more.  Where /dev/shm is a tmpfs, no
	 * process has the file mapped (none has the store open) and it
	 * belongs to this log alone (named by its store id and inode); beside
	 * the log (LOG-shm), it is this path's. */
	if (r == 0) {
		r = atomio_sys->unlink(shm);
		if (r == -ENOENT)
			r = 0;
	}
	if (r == 0)
		r = atomio_sys->unlink(log_path);
	free(shm);
	atomio_sys->close(fd); /* drops the flock: the log is gone from its path */
	if (r < 0)
		return r;
	/* The removal is durable before the function returns: a power cut
	 * must not bring back a log its caller was told is gone, whose groups
	 * a later atomio_open at that path would replay over data files that
	 * have changed since (the SQLite VFS removes the log of a database
	 * going to WAL mode, which then writes the database without it).  The
	 * state file in /dev/shm needs nothing (memory: gone at a reboot);
	 * LOG-shm is in the same directory, made durable by the same fsync. */
	char *dir = dir_of(log_path);
	if (!dir)
		return -ENOMEM;
	r = sys_fsync_dir(dir);
	free(dir);
	return r;
}
