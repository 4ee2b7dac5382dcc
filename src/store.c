/*
 * store.c: the public store API: opening (with creation and recovery) and
 * closing a store, its limits and its counters.  The top layer: the log file
 * is logfile.c's, the catalog files.c's, replay recover.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* --- open / close ---------------------------------------------------------- */

static void st_free(atomio *st)
{
	if (!st)
		return;
	fork_untrack(st);
	async_stop(st); /* the worker thread, if asynchronous commits started it */
	checkpoint_stop(st); /* the checkpointer, if the policy started it */
	engine_close(st);
	files_close_all(st);
	if (st->log_fd >= 0)
		atomio_sys->close(st->log_fd); /* also drops the flock */
	tx_pool_free(st);
	wb_free(st);
	free(st->zero_buf);
	free(st->files);
	free(st->log_path);
	free(st->log_dir);
	pthread_mutex_destroy(&st->lock);
	pthread_mutex_destroy(&st->cat_lock);
	pthread_cond_destroy(&st->home_cv);
	pthread_cond_destroy(&st->role_cv);
	pthread_cond_destroy(&st->fill_cv);
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
			    ATOMIO_NO_COMPRESS | ATOMIO_ACCEPT_COPIES))
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
	if (opts->log_size && (opts->log_size < 65536 || opts->log_size > (1ull << 48)))
		return -EINVAL;
	return 0;
}

/* The log open as fd may be the store's: a regular file, writable by its
 * owner alone (unless ATOMIO_ALLOW_SHARED_LOG), and locked by no one else
 * -- then this store holds its lock. */
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
	/* One process (one open store) at a time: flock locks belong to the
	 * open file description, so a second atomio_open in this very process
	 * is refused too. */
	r = atomio_sys->flock(fd, LOCK_EX | LOCK_NB);
	/* A process killed while its io_uring requests were in flight keeps
	 * its files (and so this lock) until the kernel has finished them,
	 * a few milliseconds after it is gone: a restart right after a crash
	 * must not be told the store is busy.  So wait up to 250 ms first.
	 * (A sleep is no I/O: it does not go through the ops table.) */
	for (int i = 0; r == -EWOULDBLOCK && i < 50; i++) {
		struct timespec ts = {0, 5000000L};
		nanosleep(&ts, NULL);
		r = atomio_sys->flock(fd, LOCK_EX | LOCK_NB);
	}
	if (r == -EWOULDBLOCK) {
		st_err(st, "%s: the store is open elsewhere", log_path);
		return -EBUSY;
	}
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
	st->log_fd = -1;
	st->fork_slot = -1;
	st->fork_gen = fork_init();
	st->flags = opts->flags;
	st->errbuf = opts->errbuf;
	st->errbuf_size = opts->errbuf_size;
	pthread_mutex_init(&st->lock, NULL);
	pthread_mutex_init(&st->cat_lock, NULL);
	pthread_cond_init(&st->home_cv, NULL);
	pthread_cond_init(&st->role_cv, NULL);
	cond_init_monotonic(&st->fill_cv); /* the fill wait's bound (commit.c) */
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
	r = cat_load(st);
	if (r < 0)
		goto fail;
	r = recover(st);
	if (r < 0)
		goto fail;
	commit_init(st);
	log_zero_init(st, created_lo);
	checkpoint_policy_init(st, opts->ckpt_percent, opts->dirty_limit);
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

int atomio_close(atomio *st)
{
	if (!st)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM; /* releases nothing (internal.h, FORK) */
	pthread_mutex_lock(&st->lock);
	if (st->open_txs) {
		pthread_mutex_unlock(&st->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&st->lock);
	int r = role_acquire(st);
	if (r == 0) {
		pthread_mutex_lock(&st->lock);
		int failed = st->failed;
		pthread_mutex_unlock(&st->lock);
		/* A failed store is left for recovery: checkpointing it could
		 * declare durable what a failed fsync dropped.  Say so. */
		if (failed)
			st_err(st, "%s: closed without a checkpoint: the store had failed (%s); "
				   "reopening it recovers", st->log_path, atomio_strerror(failed));
		r = failed ? ATOMIO_EFAILED : checkpoint_full_role(st);
		role_release(st);
	}
	st_free(st);
	return r;
}

int atomio_checkpoint(atomio *st)
{
	if (!st)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	role_acquire(st);
	int r = checkpoint_full_role(st);
	role_release(st);
	return r;
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
		f = file_get(st, file);
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
	s->commits = atomic_load(&st->stats.commits);
	s->bytes_logged = atomic_load(&st->stats.bytes_logged);
	s->bytes_home = atomic_load(&st->stats.bytes_home);
	s->log_syncs = atomic_load(&st->stats.log_syncs);
	s->data_syncs = atomic_load(&st->stats.data_syncs);
	s->checkpoints = atomic_load(&st->stats.checkpoints);
	s->groups_recovered = atomic_load(&st->stats.groups_recovered);
	s->batches = atomic_load(&st->stats.batches);
	s->log_full_waits = atomic_load(&st->stats.log_full_waits);
	s->fast_writes = atomic_load(&st->stats.fast_writes);
	s->bytes_raw = atomic_load(&st->stats.bytes_raw);
	s->records_compressed = atomic_load(&st->stats.records_compressed);
	s->bytes_checkpointed = atomic_load(&st->stats.bytes_checkpointed);
	s->records_beyond_tail = atomic_load(&st->stats.records_beyond_tail);
	s->bytes_written_back = atomic_load(&st->stats.bytes_written_back);
	pthread_mutex_lock(&st->lock);
	s->dirty_bytes = st->dirty.used * 4096;
	pthread_mutex_unlock(&st->lock);
	return 0;
}

