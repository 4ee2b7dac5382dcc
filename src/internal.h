/*
 * internal.h: the store's in-memory state, shared by the modules of src/.
 *
 * Threads, locks, roles and condition variables, the lock order, who owns
 * which field, and what the names' suffixes promise are in docs/INTERNALS.md:
 *   _locked  called with st->lock held, returns with it held
 *   _role    called with the log role held, st->lock not held
 * The modules' layers (each calls only those below it): README, "Layout".
 */
#ifndef ATOMIO_INTERNAL_H
#define ATOMIO_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <time.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomio.h"
#include "codec.h"
#include "format.h"
#include "sys.h"

#ifdef ATOMIO_DEBUG
#define ASSERT(c)                                                                          \
	do {                                                                               \
		if (!(c)) {                                                                \
			fprintf(stderr, "atomio: %s:%d: %s: assertion '%s' failed\n",      \
				__FILE__, __LINE__, __func__, #c);                         \
			abort();                                                           \
		}                                                                          \
	} while (0)
#else
#define ASSERT(c) ((void)0)
#endif

/* Fast-path hazard guard (fastpath.c): the 4 KiB chunks of a file that log
 * records written since the last checkpoint cover.  Recovery replays those
 * records; a fast-path write to any of these chunks could be overwritten by
 * an older record at replay, so such a group takes the log instead. */
struct gslot {
	uint64_t key; /* 0 = empty, else chunk index + 1 */
	uint64_t seq; /* seq of the newest record covering the chunk */
};
struct guard {
	struct gslot *slot; /* open addressing */
	uint32_t cap, used;
	bool all;           /* every chunk, up to all_seq (a logged size change, or too many) */
	uint64_t all_seq;
};
static inline void guard_free(struct guard *g)
{
	free(g->slot);
	memset(g, 0, sizeof(*g));
}

/* What the kernel says a file and its device can do (caps.c). */
struct fcaps {
	uint32_t awu_min, awu_max, awu_max_opt, awu_segs; /* statx STATX_WRITE_ATOMIC */
	uint32_t bdev_max, bdev_unit_min, bdev_unit_max, bdev_boundary; /* sysfs queue */
	uint32_t flags;    /* ATOMIO_CAP_* */
	uint32_t fast_max; /* fast-path limit for this file and store, 0 = none */
};

/* A registered data file. */
struct afile {
	uint32_t id;
	uint16_t cat_flags;         /* CAT_F_RELATIVE */
	char *path;                 /* as recorded in the catalog */
	struct fid idn;             /* identity recorded at registration */
	int fd;                     /* open in this session, or -1 */
	int open_flags;             /* as given to atomio_file_open */
	bool direct;                /* O_DIRECT */
	uint32_t dio_mem_align;     /* for O_DIRECT files */
	uint32_t dio_off_align;
	/* Descriptor for home writes: fd itself, or for an O_DIRECT file a
	 * buffered twin of it (engine_pick.c explains why), or -1 when closed. */
	int hfd;
	bool direct_home;           /* home writes go through fd with O_DIRECT */
	struct fcaps caps;
	struct guard guard;         /* log role only */
	uint64_t max_size;          /* largest size its filesystem allows (<= MAX_OFFSET) */
	/* Written since the last checkpoint: needs fdatasync (dirty) or fsync
	 * (resized) before the log space that can redo it is reused.  Set by the
	 * home stage AFTER the writes, taken (exchanged to false) by a checkpoint
	 * BEFORE its sync, with __atomic builtins: a write the sync may miss
	 * always leaves the flag set for the next checkpoint. */
	bool dirty;
	bool resized;
};

struct arena_chunk {
	struct arena_chunk *next;
	size_t size, used;
	/* data follows, 4096-aligned */
};

/* A log write in flight.  Measured on ext4/virtio, concurrent RWF_DSYNC
 * writes scale (the block layer merges their flushes, the device overlaps
 * them): two in flight doubled the rate of 20-40 KiB writes.  With 8
 * committing threads, 2 slots gave more commits/s than 3 or 4 and kept
 * batches near 3 groups (bench-engine, threads). */
#define LOG_SLOTS 2u
struct logslot {
	void *stage;           /* the batch's records, block-aligned */
	size_t cap;
	struct io_uring *ring; /* io_uring engine, or NULL */
};

#define TX_MAGIC 0x61746f6d74785f31ull /* "atomtx_1" */
#define TX_DEAD 0x646561645f74785full

enum tx_state { TX_OPEN, TX_QUEUED, TX_BATCHED, TX_DONE };

struct atomio_tx {
	uint64_t magic;
	atomio *st;
	struct seg *segs;
	uint32_t nsegs, cap;
	uint64_t data_len;         /* sum of write lengths */
	struct arena_chunk *arena; /* newest first */
	/* commit queue */
	struct atomio_tx *qnext;
	enum tx_state state;
	int result;
	uint64_t seq;
	uint64_t rec_len;
	uint64_t batch;            /* pipeline batch it was written in */
	bool fast;                 /* written in place by the kernel fast path */
	pthread_cond_t *wake;      /* signalled when it may lead, and when done */
	atomio_done_fn done;       /* asynchronous commit: callback, or NULL */
	void *done_arg;
	struct atomio_tx *cnext;   /* completion list (commit.c fills it, async.c empties it) */
	struct atomio_tx *pool_next; /* free list of the store's tx pool */
	/* compressed record data (commit_prepare), or NULL: the record stores these
	 * clen bytes (flag LZ4) instead of the data_len raw ones */
	void *cdata;
	uint64_t clen;
};

struct atomio {
	int log_fd;
	unsigned fork_gen;   /* atomio_fork_gen when opened (st_forked) */
	int fork_slot;       /* its log descriptor's slot for fork_child (store.c), -1 none */
	char *log_path;
	char *log_dir;       /* canonical directory of the log */
	bool log_direct;     /* log opened with O_DIRECT */
	uint32_t flags;      /* options flags */
	char *errbuf;
	size_t errbuf_size;

	/* geometry and persistent state (from the current superblock) */
	struct sb_disk sb;
	uint64_t store_id;
	uint32_t block;
	uint64_t area_off, area_size;
	uint64_t cat_off, cat_size;

	pthread_mutex_t lock;

	/* commit pipeline (commit.c), under lock */
	struct atomio_tx *q_head, *q_tail;
	uint32_t q_len;      /* groups queued */
	bool log_busy;       /* someone holds the log role (writes the log or checkpoints) */
	unsigned role_waiters; /* threads in role_acquire: they go before queued commits */
	uint64_t batch_next; /* number of the next batch */
	uint64_t home_next;  /* the batch whose home writes run next (commit order) */
	pthread_cond_t home_cv, role_cv;
	uint64_t next_seq;   /* seq of the next record written */
	uint64_t tail;       /* area offset of the next log write (block-aligned) */
	/* The record area is a ring (checkpoint.c): live records run from head
	 * (head_seq, as in the durable superblock) to tail, wrapping at the
	 * area's end; used counts their bytes and any end-of-area gap skipped by
	 * a wrap.  home_seq/home_off: the seq and area offset just after the
	 * newest batch whose home writes are done (a checkpoint may cut there). */
	uint64_t head, head_seq, used;
	uint64_t home_seq, home_off;
	bool ckpt_busy;      /* a checkpoint runs */
	bool ckpt_wanted;    /* the checkpointer thread should run a background checkpoint */
	pthread_cond_t ckpt_cv;
	uint64_t rec_epoch;  /* epoch records carry (fixed after recovery) */
	int failed;          /* 0, or the error that poisoned the store */
	unsigned open_txs;

	/* log writes in flight at once (commit.c), each with its staging buffer
	 * and, for the io_uring engine, its ring */
	struct logslot slots[LOG_SLOTS];
	unsigned slot_busy;   /* bit per slot, under lock */
	unsigned log_inflight;
	/* the log's lazy zeroing (logfile.c), under lock: every block of the
	 * record area below zero_lo is written (zeros or records); zero_busy
	 * while the checkpointer zeroes the chunk at zero_lo; zero_buf is its */
	uint64_t zero_lo;
	bool zero_busy;
	void *zero_buf;
	/* batch filling (commit.c, fill_wait_locked), under lock */
	uint32_t pipe_groups; /* groups in batches not yet handed back */
	uint32_t fill_want;   /* groups a new batch waits for: the recent population */
	bool fill_waiting;    /* a leader waits on fill_cv */
	pthread_cond_t fill_cv;
	uint64_t log_write_ns; /* a log write's duration, smoothed */

	/* registered files: files[id] published with release/acquire */
	_Atomic(struct afile *) *files;
	uint32_t nfiles_cat;  /* entries in the catalog */
	/* one past the highest id in files[]: at recovery, of the catalog
	 * loaded at open; raised by each registration before it publishes the
	 * file, so that loops over the files in use stop there */
	_Atomic uint32_t files_hi;
	uint64_t cat_gen;
	int cat_damaged;      /* 0, or 1 + the catalog copy that failed its checks at open */
	int sb_damaged;       /* 0, or 1 + the superblock slot that was written but is invalid */
	pthread_mutex_t cat_lock; /* serialises registrations */

	/* tx pool: recently ended txs are not reused at once, so that a use
	 * after commit finds TX_DEAD and gets -EINVAL instead of corrupting
	 * another group. */
	struct atomio_tx *pool_head, *pool_tail;
	unsigned pool_len;

	/* engine (engine_pick.c, engine.h) */
	const struct engine_ops *eng; /* the backend */
	unsigned engine;     /* ATOMIO_ENGINE_PLAIN or ATOMIO_ENGINE_URING (reported) */
	struct io_uring *ring_home; /* the home stage's (slots[] have the log's) */
	struct home_op *hops; /* io_uring home writes in flight (home role) */

	/* checkpointing (checkpoint.c): the policy's thresholds, and the
	 * distinct 4 KiB blocks of home writes since the last checkpoint began
	 * (dirty, under lock) and those the running checkpoint syncs (ckpt_set,
	 * the checkpoint's own) */
	uint64_t ckpt_at;     /* background checkpoint when used passes this */
	uint64_t dirty_limit; /* ... or dirty holds more bytes than this */
	struct dset {
		struct dkey *slot;
		uint64_t cap, used;
		bool overflow; /* an insert found no memory: count as over the limit */
	} dirty, ckpt_set;
	bool ckpt_bg_running; /* a background checkpoint syncs: drop only what it synced */

	/* paced write-back (writeback.c), under lock: home ranges noted in
	 * order, ring[head..head+n) of cap, and each 4 KiB block's newest note */
	struct wbstate {
		struct wbent *ring;
		uint32_t cap, head, n;
		struct wbkey *keys;
		uint64_t kcap, kused;
		uint64_t pos;   /* home bytes noted so far */
		uint64_t delay; /* age (in home bytes) before a range is written back */
		uint64_t batch; /* bytes started at once */
		bool off;       /* not used: no sync_file_range, or no memory */
		bool busy;      /* a thread issues a batch */
	} wb;

	/* the checkpointer thread (checkpoint.c), under lock */
	pthread_t ckpter;
	bool ckpter_on, ckpter_stop;
	pthread_cond_t ckpter_cv;

	/* asynchronous commits (async.c), under lock */
	pthread_t worker;
	bool worker_on, worker_stop, worker_idle;
	pthread_cond_t worker_cv, cq_cv;
	struct atomio_tx *cq_head, *cq_tail; /* done, callback not yet run */
	unsigned async_busy; /* async groups queued or in a batch */
	int efd;             /* eventfd, or -1 */

	struct {
		_Atomic uint64_t commits, bytes_logged, bytes_home, log_syncs, data_syncs,
			checkpoints, groups_recovered, batches, log_full_waits, fast_writes,
			bytes_raw, records_compressed, bytes_checkpointed, records_beyond_tail,
			bytes_written_back;
	} stats;
};

#define POOL_KEEP 64u

/* util.c */
void st_err(atomio *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* FORK.  A store belongs to the process that opened it.  A child after
 * fork() holds a copy of its memory and its descriptors, but not its
 * threads (the checkpointer, the async worker), and any of its locks a
 * parent thread held at the fork stay locked forever; its log writes
 * would land where the parent's next ones go (the parent's tail does not
 * move), and the log's flock, held by an open file description the child
 * shares, does not keep it out.  So every public function on a store
 * returns -EPERM in a child, before taking any lock, and atomio_close
 * there releases nothing (the child's copies of the descriptors are
 * O_CLOEXEC and close at exit or exec) -- but the log's: the child handler
 * closes the child's copy of each store's log descriptor at once, for that
 * copy would hold the parent's flock for as long as the child lives, after
 * the parent closed its store (a child that then opened the log itself
 * would find it locked, by itself).  The child may open the log itself:
 * that is another open file description, and the parent's flock answers
 * -EBUSY while the parent has it open.  Counted by a pthread_atfork child
 * handler (store.c), so the check costs no system call; a vfork child,
 * which runs no handler, may only exec or _exit. */
extern _Atomic unsigned atomio_fork_gen;
/* -EPERM (with a message) in a forked child, else 0. */
int st_forked(atomio *st);
/* Registers the handler (once); the generation a new store records. */
unsigned fork_init(void);
/* The store's log descriptor is closed in a child / no longer (before it
 * is closed). */
void fork_track(atomio *st);
void fork_untrack(atomio *st);
void st_fail_locked(atomio *st, int err); /* poison the store: the first error stays */
void *aligned_alloc_zero(size_t align, size_t size);
/* A condition variable whose timed waits use CLOCK_MONOTONIC; that clock now
 * in ns, and the deadline ns from now for pthread_cond_timedwait. */
void cond_init_monotonic(pthread_cond_t *cv);
uint64_t mono_ns(void);
struct timespec mono_deadline(uint64_t ns_from_now);
char *dir_of(const char *path);
/* *(T **)arr grown to twice *cap entries of elem bytes (64 at first):
 * 0, or -ENOMEM with the array as it was. */
int array_grow(void *arr, size_t *cap, size_t elem);
/* Open what fd refers to again, through /proc/self/fd (the same inode even if
 * its path was swapped meanwhile): the new fd, -ENOENT without /proc, or
 * another negative errno. */
int proc_reopen(int fd, int flags);
/* A sysfs queue attribute (/sys/dev/block/MAJ:MIN/queue/NAME, or the parent
 * disk's for a partition) of the device dev; 0 when unreadable. */
uint32_t sysfs_queue_u32(dev_t dev, const char *name);

/* logfile.c */
/* Lazy zeroing of a new log's record area: a new log is written only up to
 * one unit of its area (the rest fallocated); the checkpointer zeroes a
 * unit at a time while zero_lo (the area offset below which every block is
 * written) is less than LOG_ZERO_AHEAD units ahead of the tail, and all of
 * the rest once a log's worth of records was written.  A unit is 1/16 of
 * the area, at least a block, at most LOG_ZERO_MAX. */
#define LOG_ZERO_MAX (4u << 20)
#define LOG_ZERO_AHEAD 8u
#define LOG_ZERO_BUF (1u << 20)
static inline uint64_t log_zero_unit(uint64_t area_size, uint32_t block)
{
	uint64_t u = area_size / 16 / block * block;
	return u < block ? block : u > LOG_ZERO_MAX ? LOG_ZERO_MAX : u;
}
/* At open: zero_lo from the filesystem (FIEMAP), else what this open's
 * log_create wrote (created_lo; UINT64_MAX: the log existed), else the
 * whole area. */
void log_zero_init(atomio *st, uint64_t created_lo);
bool log_zero_due_locked(const atomio *st);
/* Zero one chunk at zero_lo (the checkpointer).  Lock held; dropped while
 * writing. */
void log_zero_step_locked(atomio *st);
int log_create(atomio *st, const char *path, uint64_t log_size, uint64_t *written_lo);
void log_sweep_tmp(atomio *st, const char *path);
int log_open_fd(atomio *st, const char *path);
int log_load_sb(atomio *st);
int log_read(atomio *st, uint64_t off, void *buf, size_t len);
int log_write_sb(atomio *st, uint64_t head_off, uint64_t head_seq, uint64_t epoch);

/* files.c */
int cat_load(atomio *st);
struct afile *file_get(atomio *st, int id);
/* The home writes of a batch that went to a page cache (bytes written, to a
 * file whose home writes are not O_DIRECT), one at a time: what the
 * checkpoint's dirty set and the paced write-back count.
 *   struct file_cached w = {.st = st, .t = first, .n = n};
 *   for (const struct seg *s; (s = file_cached_next(&w));) ... */
struct file_cached {
	atomio *st;
	atomio_tx *t; /* the batch's groups, linked by qnext: n of them */
	uint32_t n, j;
};
const struct seg *file_cached_next(struct file_cached *w);
int file_resolve_path(atomio *st, const struct afile *f, char *out, size_t outsz);
int file_check_path(const char *path, uint16_t flags);
int file_identity(int fd, struct fid *id);
uint64_t file_max_size(int fd);
void files_close_all(atomio *st);

/* caps.c */
void file_probe_caps(atomio *st, struct afile *f, int fd);
void caps_fill(atomio *st, const struct afile *f, struct atomio_caps *caps);

/* fastpath.c */
bool fast_eligible_locked(atomio *st, const atomio_tx *tx);
void guard_add_role(atomio *st, const atomio_tx *tx, uint64_t live_seq);
void guard_clear_all_role(atomio *st);

/* engine_pick.c (the backends' interface is engine.h) */
int engine_open(atomio *st, uint32_t flags);
void engine_close(atomio *st);

/* checkpoint.c */
void checkpoint_setup(atomio *st);
void checkpoint_policy_init(atomio *st, uint32_t ckpt_percent, uint64_t dirty_limit);
void checkpoint_destroy(atomio *st);
bool checkpoint_must_wait_locked(const atomio *st);
void dirty_note_locked(atomio *st, atomio_tx *first, uint32_t n);
void checkpoint_after_home_locked(atomio *st);
int checkpoint_request_locked(atomio *st);
int checkpoint_wake_locked(atomio *st);
int checkpoint_full_role(atomio *st);
void checkpoint_stop(atomio *st);

/* commit.c */
void commit_init(atomio *st);
int commit_tx(atomio_tx *tx);
int commit_prepare(atomio_tx *tx);
void commit_enqueue_locked(atomio *st, atomio_tx *tx);
void lead_locked(atomio *st);
bool can_lead_locked(const atomio *st);
int role_acquire(atomio *st);
void role_release(atomio *st);

/* writeback.c */
void wb_init(atomio *st);
void wb_free(atomio *st);
void wb_note_locked(atomio *st, atomio_tx *first, uint32_t n);
void wb_reset_locked(atomio *st);
bool wb_due_locked(const atomio *st);
void wb_issue_locked(atomio *st);
/* A background checkpoint begins: write back, a batch at a time and each
 * waited for, every range noted so far (writeback.c, THE CHECKPOINT'S
 * DRAIN).  Lock held; dropped around the system calls. */
void wb_drain_locked(atomio *st);

/* tx.c */
void tx_release(atomio_tx *tx);
void tx_pool_free(atomio *st);

/* async.c */
void async_init(atomio *st);
void async_stop(atomio *st);
void async_destroy(atomio *st);

/* recover.c */
int recover(atomio *st);

#endif
