/*
 * internal.h: the store's in-memory state, shared by the modules of src/.
 *
 * Threads, locks, roles and condition variables, the lock order, who owns
 * which field, and what the names' suffixes promise are in docs/INTERNALS.md:
 *   _locked        called with sh->mu (the shared mutex, shm.h) held, returns
 *                  with it held, never lets it go
 *   _locked_drops  the same, but lets it go part-way (a wait, I/O): on return
 *                  the state may have changed and st->S is another copy
 *   _role          called with the log role held, sh->mu not held
 *   _own           called with st->lock (this process's own lock) held
 * Debug builds check each at the function's entry (LOCK CHECKS below).
 * The modules' layers (each calls only those below it): docs/LAYOUT.md.
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

/* The shared state (shm.h) is a layer above this handle: here only its name. */
struct shm;
struct shm_state;

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

/* LOCK CHECKS (docs/INTERNALS.md, "Checks").  In a debug build (ATOMIO_DEBUG:
 * the ASan/UBSan build, the fuzzer) every lock and role records which thread
 * holds it, beside it in the handle (st->*_holder), and every function whose
 * name says it needs one asserts so at its entry -- SQLite's
 * assert(sqlite3_mutex_held()).  A thread is named by the address of a
 * thread-local byte (dbg_self: unique among live threads, no system call).
 * Only the holder writes the field: after it takes the lock, and clears it
 * before it lets go; so a thread that finds its own name there holds the
 * lock, and one that does not, does not (whatever another thread is doing).
 * A _locked function also opens a no-drop scope (NODROP_SCOPE): shm_unlock
 * inside it fails the check, so a function that lets the mutex go part-way
 * must be named _locked_drops.  Release builds compile all of it out; the
 * fields stay in every build, because test programs built with ATOMIO_DEBUG
 * link the release library and read this struct. */
uintptr_t dbg_self(void);
int dbg_nodrop_enter(void);
void dbg_nodrop_leave(int *scope);
bool dbg_nodrop(void);
/* 1 when the library was built with the checks (t_lock_checks). */
extern const int atomio_lock_checks;
#ifdef ATOMIO_DEBUG
#define HOLD_SET(w) atomic_store_explicit(&(w), dbg_self(), memory_order_relaxed)
#define HOLD_CLEAR(w) atomic_store_explicit(&(w), (uintptr_t)0, memory_order_relaxed)
#define HOLDS(w) (atomic_load_explicit(&(w), memory_order_relaxed) == dbg_self())
#define NODROP_SCOPE                                                                       \
	__attribute__((cleanup(dbg_nodrop_leave), unused)) int dbg_nodrop_scope = dbg_nodrop_enter()
#define ASSERT_HELD(c, what)                                                               \
	do {                                                                               \
		if (!(c)) {                                                                \
			fprintf(stderr, "atomio: %s:%d: %s: lock check failed: %s\n",      \
				__FILE__, __LINE__, __func__, what);                       \
			abort();                                                           \
		}                                                                          \
	} while (0)
#else
#define HOLD_SET(w) ((void)0)
#define HOLD_CLEAR(w) ((void)0)
#define HOLDS(w) true
#define NODROP_SCOPE ((void)0)
#define ASSERT_HELD(c, what) ((void)0)
#endif
/* _locked: sh->mu held by this thread (and not let go until it returns). */
#define ASSERT_LOCKED(st)                                                                  \
	ASSERT_HELD((st)->S && HOLDS((st)->mu_holder), "sh->mu (the shared mutex) not held"); \
	NODROP_SCOPE
/* _locked_drops: sh->mu held by this thread (it may let go part-way). */
#define ASSERT_LOCKED_DROPS(st)                                                            \
	ASSERT_HELD((st)->S && HOLDS((st)->mu_holder), "sh->mu (the shared mutex) not held")
#define ASSERT_UNLOCKED(st) ASSERT_HELD(!HOLDS((st)->mu_holder), "sh->mu (the shared mutex) held")
/* _own: st->lock held by this thread. */
#define ASSERT_OWN(st) ASSERT_HELD(HOLDS((st)->own_holder), "st->lock (the process's own lock) not held")
/* cat_lock held by this thread (files.c's registration steps). */
#define ASSERT_CAT(st) ASSERT_HELD(HOLDS((st)->cat_holder), "st->cat_lock not held")
/* (The roles' checks need the shared state: shm.h.) */

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
	uint64_t max_size;          /* largest size its filesystem allows (<= MAX_OFFSET) */
	/* Opened by this process only because another one registered it: for
	 * the home writes of batches this process leads, and for checkpoints
	 * (file_get_any).  Buffered; atomio_file_open opens it for real. */
	bool lazy;
	uint32_t gen;               /* its registration's generation when opened here (shm.h, fgen) */
	uint32_t fd_gen;            /* ... when fd was (atomio_file_open; hfd may be newer) */
	uint32_t fd_file_gen;       /* ... of the file fd names now (atomio_file_fd may move it on) */
	/* sh->fwrote of its file when hfd was opened (checkpoint.c, TRUSTED
	 * DESCRIPTORS): batches up to this one may have written it before. */
	uint64_t hfd_wrote;
};

struct arena_chunk {
	struct arena_chunk *next;
	size_t size, used;
	/* data follows, 4096-aligned */
};

/* A log write in flight.  Concurrent RWF_DSYNC writes overlap (the block
 * layer merges their flushes, the device overlaps them), so up to LOG_SLOTS
 * run at once; two gave more commits per second than three or four
 * (docs/PERFORMANCE.md, "Figures behind choices in the code"). */
#define LOG_SLOTS 2u
struct logslot {
	void *stage;           /* the batch's records, block-aligned */
	size_t cap;
	struct io_uring *ring; /* io_uring engine, or NULL */
};

/* One group of a batch, as its leader sees it: in the arena (any process's)
 * or in its own process's memory (a private group).  The engines, the
 * checkpoint's notes and the records are built from these. */
struct grp {
	const struct seg *segs; /* src pointers into the arena or the owner's tx */
	uint32_t nsegs;
	uint32_t ent;           /* entry index + 1 */
	uint64_t data_len, rec_len, seq;
	const void *cdata;      /* compressed data (in the arena), or NULL */
	uint64_t clen;
};

#define TX_MAGIC 0x61746f6d74785f31ull /* "atomtx_1" */
#define TX_DEAD 0x646561645f74785full

enum tx_state { TX_OPEN, TX_COMMITTING, TX_DONE };

struct atomio_tx {
	uint64_t magic;
	atomio *st;
	struct seg *segs;
	uint32_t nsegs, cap;
	uint64_t data_len;         /* sum of write lengths */
	struct arena_chunk *arena; /* newest first */
	enum tx_state state;
	int result;
	uint64_t rec_len;
	uint32_t ent;              /* its shared entry (index + 1) while committing */
	atomio_done_fn done;       /* asynchronous commit: callback, or NULL */
	void *done_arg;
	struct atomio_tx *anext;   /* this process's asynchronous groups in flight (async.c) */
	struct atomio_tx *cnext;   /* completion list (async.c) */
	struct atomio_tx *pool_next; /* free list of the store's tx pool */
	/* compressed record data (commit_prepare), or NULL: the record stores these
	 * clen bytes (flag LZ4) instead of the data_len raw ones */
	void *cdata;
	uint64_t clen;
};

/* A store as one process sees it.  What its processes share is in sh
 * (shm.h); the rest is this process's own.  docs/INTERNALS.md says who
 * owns which field. */
struct atomio {
	int log_fd;
	unsigned fork_gen;   /* atomio_fork_gen when opened (st_forked) */
	int fork_slot;       /* its log descriptor's slot for fork_child (util.c), -1 none */
	int fork_slot2;      /* the same for the shared-memory file's descriptor */
	int fork_pending;    /* while the log opens: its fork_pending_begin slot, else -1 */
	char *log_path;
	char *log_dir;       /* canonical directory of the log */
	char *shm_path;      /* the shared state's file (shm.c, shm_where_of), or NULL (exclusive) */
	bool log_direct;     /* log opened with O_DIRECT */
	bool exclusive;      /* ATOMIO_EXCLUSIVE, or no shared memory to be had */
	uint32_t flags;      /* options flags */
	char *errbuf;
	size_t errbuf_size;

	/* geometry (fixed after open) */
	uint64_t store_id;
	uint32_t block;
	uint64_t area_off, area_size;
	uint64_t cat_off, cat_size;
	uint64_t rec_epoch;  /* epoch records carry this session */
	/* the superblock being worked on: st->sb_local during recovery, the
	 * shared copy after (logfile.c) */
	struct sb_disk *sbp;
	struct sb_disk sb_local;

	/* the shared state (shm.h, shm.c) */
	struct shm *sh;
	size_t sh_len;
	bool sh_malloced;    /* no shm_map in the ops table: plain memory */
	int (*sh_unmap)(void *p, size_t len); /* the table's, when it was mapped */
	int shm_fd;          /* -1 exclusive */
	/* What a layer above keeps in the mapping and must derive again after a
	 * holder died inside the mutex (shm.c, normalize_locked): the read index
	 * of lazy groups (lazy.c, lz_rebuild_locked), set at atomio_open.  A hook,
	 * so that shm.c, the bottom of the store's layers, calls nothing above it. */
	void (*rebuild_locked)(atomio *st);
	uint32_t me;         /* this process's slot + 1 */
	struct shm_state *S; /* the writable state while this thread holds sh->mu */
	/* which thread holds sh->mu, st->lock, cat_lock, the log role, the
	 * home stage, the checkpoint (dbg_self, 0 = none): written in debug
	 * builds only (LOCK CHECKS above) */
	_Atomic uintptr_t mu_holder, own_holder, cat_holder, role_holder, home_holder, ckpt_holder;
	bool reaping;        /* this process adopts what dead processes left (commit.c) */

	/* this process's own, under lock */
	pthread_mutex_t lock;
	unsigned role_wait_local; /* its threads in role_acquire (S->role_wait's bit) */
	unsigned open_txs;
	uint64_t rec_groups, rec_beyond; /* this open's recovery: groups replayed, records beyond the tail */
	int cat_damaged;      /* 0, or 1 + the catalog copy that failed its checks at open */
	int sb_damaged;       /* 0, or 1 + the superblock slot that was written but is invalid */

	/* log writes this process has in flight, each with its staging
	 * buffer and, for the io_uring engine, its ring; the bits under lock */
	struct logslot slots[LOG_SLOTS];
	unsigned slot_busy;
	void *zero_buf;       /* the log's lazy zeroing (logfile.c) */
	void *pad_buf;        /* a block for pad records (commit.c, ADOPTION) */

	/* registered files as this process has them: files[id] published with
	 * release/acquire.  files_hi: one past the highest id known here. */
	_Atomic(struct afile *) *files;
	_Atomic uint32_t files_hi;
	uint64_t cat_gen;     /* the catalog generation this process loaded */
	pthread_mutex_t cat_lock; /* this process's registrations (and LK_CAT across processes) */
	/* descriptors of files registered anew since (cat_lock): closed once
	 * no thread of this process may still use one (files_close_stale) */
	int *stale;
	unsigned nstale, stale_cap;
	/* threads between loading a data file's descriptor from its afile and
	 * their last use of it (fd_use_begin / fd_use_end) */
	_Atomic unsigned fd_users;

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

	/* paced write-back (writeback.c), under lock: the home ranges this
	 * process wrote, in order, ring[head..head+n) of cap, and each 4 KiB
	 * block's newest note */
	struct wbstate {
		struct wbent *ring;
		uint32_t cap, head, n; /* cap: the ring's size now, grown up to max */
		uint32_t max;
		struct wbkey *keys;
		uint64_t kcap, kused;
		uint64_t pos;   /* home bytes noted so far */
		uint64_t delay; /* age (in home bytes) before a range is written back */
		uint64_t batch; /* bytes started at once */
		bool off;       /* not used: no sync_file_range, or no memory */
		bool busy;      /* a thread issues a batch */
	} wb;
	pthread_cond_t wb_cv; /* wb.busy cleared */

	/* this process's checkpointer thread (checkpoint.c), under lock */
	pthread_t ckpter;
	bool ckpter_on, ckpter_stop, ckpter_kick;
	pthread_cond_t ckpter_cv;

	/* asynchronous commits (async.c), under lock */
	pthread_t worker;
	bool worker_on, worker_stop;
	pthread_cond_t cq_cv;
	struct atomio_tx *async_head; /* its groups in flight (anext) */
	struct atomio_tx *cq_head, *cq_tail; /* done, callback not yet run */
	unsigned async_busy; /* async groups queued or in a batch */
	int efd;             /* eventfd, or -1 */

	/* lazy groups (commit.c, LAZY GROUPS): the newest ticket this handle
	 * committed lazily (atomio_close makes it durable); under sh->mu */
	uint64_t lz_mine_hi;
};

#define POOL_KEEP 64u

/* st->lock and st->cat_lock: every lock, unlock and condition wait of them
 * goes through these, so that debug builds know the holder (LOCK CHECKS).
 * The lock order (docs/INTERNALS.md, "Locks"): sh->mu before st->lock;
 * cat_lock with neither held. */
/* A well-mixed hash of a (file, block) key: the dirty set's slots
 * (checkpoint.c) and the read index's chunk filter (lazy.c). */
static inline uint64_t file_blk_hash(uint32_t file, uint64_t blk)
{
	uint64_t x = blk * 0x9E3779B97F4A7C15ull ^ ((uint64_t)file << 32 | file);
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static inline void own_lock(atomio *st)
{
	ASSERT_HELD(!HOLDS(st->own_holder), "st->lock taken twice");
	pthread_mutex_lock(&st->lock);
	HOLD_SET(st->own_holder);
}
static inline void own_unlock(atomio *st)
{
	ASSERT_OWN(st);
	HOLD_CLEAR(st->own_holder);
	pthread_mutex_unlock(&st->lock);
}
static inline void own_wait(atomio *st, pthread_cond_t *cv)
{
	ASSERT_OWN(st);
	HOLD_CLEAR(st->own_holder);
	pthread_cond_wait(cv, &st->lock);
	HOLD_SET(st->own_holder);
}
/* pthread_cond_timedwait's result */
static inline int own_timedwait(atomio *st, pthread_cond_t *cv, const struct timespec *deadline)
{
	ASSERT_OWN(st);
	HOLD_CLEAR(st->own_holder);
	int r = pthread_cond_timedwait(cv, &st->lock, deadline);
	HOLD_SET(st->own_holder);
	return r;
}
static inline void cat_mutex_lock(atomio *st)
{
	ASSERT_HELD(!HOLDS(st->cat_holder) && !HOLDS(st->mu_holder) && !HOLDS(st->own_holder),
		    "cat_lock taken with cat_lock, sh->mu or st->lock held");
	pthread_mutex_lock(&st->cat_lock);
	HOLD_SET(st->cat_holder);
}
static inline void cat_mutex_unlock(atomio *st)
{
	ASSERT_CAT(st);
	HOLD_CLEAR(st->cat_holder);
	pthread_mutex_unlock(&st->cat_lock);
}

/* util.c */
void st_err(atomio *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* FORK.  A store handle belongs to the process that opened it.  A child
 * after fork() holds a copy of its memory and its descriptors, but not its
 * threads (the checkpointer, the async worker), nor its shared state (the
 * mapping is not inherited: MADV_DONTFORK), and any lock a parent thread
 * held at the fork stays locked forever in it.  So every public function
 * on a store returns -EPERM in a child, before taking any lock, and
 * atomio_close there releases nothing (the child's copies of the
 * descriptors are O_CLOEXEC and close at exit or exec) -- but the log's and
 * the shared-memory file's: the child handler closes the child's copies at
 * once, for they share the parent's open file descriptions and so its
 * locks (the flock, and the lock bytes that say the parent is alive): a
 * child that outlived a parent killed with SIGKILL would keep the parent
 * "alive" to the other processes of the store, and their wait for what it
 * held would never end.  The child may open the log itself and join the
 * store as a process of its own (ATOMIO_EXCLUSIVE stores: -EBUSY while the
 * parent has it open).  Counted by a pthread_atfork child handler (util.c),
 * so the check costs no system call; a vfork child, which runs no handler,
 * may only exec or _exit. */
extern _Atomic unsigned atomio_fork_gen;
/* -EPERM (with a message) in a forked child, else 0. */
int st_forked(atomio *st);
/* Registers the handler (once); the generation a new store records. */
unsigned fork_init(void);
/* The store's log (and shared-memory) descriptors are closed in a child /
 * no longer (before they are closed). */
void fork_track(atomio *st);
void fork_untrack(atomio *st);
/* Any other descriptor closed in a child (an io_uring ring's, which holds
 * the log's description: engine_uring.c): its slot, or -1; then no longer. */
int fork_track_fd(int fd);
void fork_untrack_fd(int slot);
/* An open of the log under way, from before its descriptor exists until
 * fork_track names it: a fork in between copies a descriptor no slot names.
 * fork_pending_begin gives a slot (or -1: more opens at once than slots);
 * fork_pending_file says which file it opens, before the descriptor that
 * takes locks exists (logfile.c, log_open_fd); a fork meanwhile closes the
 * child's descriptors of that file (the first FORK_SCAN numbers). */
int fork_pending_begin(void);
void fork_pending_file(int slot, dev_t dev, ino_t ino);
void fork_pending_end(int slot);
void *aligned_alloc_zero(size_t align, size_t size);
/* A store thread (the checkpointer, the async worker), with every signal
 * blocked.  0 or a negative errno. */
int thread_start(pthread_t *t, void *(*fn)(void *), void *arg);
/* A condition variable whose timed waits use CLOCK_MONOTONIC; that clock now
 * in ns, and the deadline ns from now for pthread_cond_timedwait. */
void cond_init_monotonic(pthread_cond_t *cv);
uint64_t mono_ns(void);
struct timespec mono_deadline(uint64_t ns_from_now);
char *dir_of(const char *path);
/* *(T **)arr grown to twice *cap entries of elem bytes (64 at first):
 * 0, or -ENOMEM with the array as it was. */
int array_grow(void *arr, size_t *cap, size_t elem);
/* The bytes of iov[0..iovcnt) in *total: 0, or -EINVAL for a count out of
 * 0..IOV_MAX, a NULL array or base with bytes, or a total past SSIZE_MAX. */
int iov_total(const struct iovec *iov, int iovcnt, size_t *total);
/* Open what fd refers to again, through /proc/self/fd (the same inode even if
 * its path was swapped meanwhile): the new fd, -ENOENT without /proc, or
 * another negative errno. */
int proc_reopen(int fd, int flags);
/* A sysfs queue attribute (/sys/dev/block/MAJ:MIN/queue/NAME, or the parent
 * disk's for a partition) of the device dev; 0 when unreadable. */
uint32_t sysfs_queue_u32(dev_t dev, const char *name);

/* logfile.c */
/* Zeroing of a new log's record area (logfile.c, log_create): the area is
 * allocated whole (fallocate), then written with zeros by the device where
 * it can (FALLOC_FL_WRITE_ZEROES), else by log_create up to
 * atomio_log_zero_create bytes (default LOG_ZERO_CREATE: all of a log of
 * the default size) -- at least one unit.  The rest, in a larger log, is
 * zeroed lazily: a checkpointer zeroes a unit at a time while zero_lo (the
 * area offset below which every block is written) is less than
 * LOG_ZERO_AHEAD units ahead of the tail, and all of the rest once a log's
 * worth of records was written.  A unit is 1/16 of the area, at least a
 * block, at most LOG_ZERO_MAX. */
#define LOG_ZERO_CREATE DEFAULT_LOG_SIZE
#define LOG_ZERO_MAX (4u << 20)
#define LOG_ZERO_AHEAD 8u
#define LOG_ZERO_BUF (1u << 20)
static inline uint64_t log_zero_unit(uint64_t area_size, uint32_t block)
{
	uint64_t u = area_size / 16 / block * block;
	return u < block ? block : u > LOG_ZERO_MAX ? LOG_ZERO_MAX : u;
}
/* At open (first process): where the written part of the area ends, from
 * the filesystem (FIEMAP), else what this open's log_create wrote
 * (created_lo; UINT64_MAX: the log existed), else the whole area. */
uint64_t log_zero_start(atomio *st, uint64_t created_lo);
bool log_zero_due_locked(const atomio *st);
/* Zero one chunk at zero_lo (a checkpointer).  Mutex held; dropped while
 * writing. */
void log_zero_step_locked_drops(atomio *st);
int log_create(atomio *st, const char *path, uint64_t log_size, uint64_t *written_lo);
void log_sweep_tmp(atomio *st, const char *path);
int log_open_fd(atomio *st, const char *path);
/* The current superblock into st->sb_local and the geometry. */
int log_load_sb(atomio *st);
/* Read both superblock slots again; the current one into *sb (a
 * checkpoint's holder died, shm.h). */
int log_reload_sb(atomio *st, struct sb_disk *sb);
int log_read(atomio *st, uint64_t off, void *buf, size_t len);
/* Write *st->sbp with a new head and epoch to its older slot, durably. */
int log_write_sb(atomio *st, uint64_t head_off, uint64_t head_seq, uint64_t epoch);
/* A pad record over the area space [off, off + len) standing for count seqs
 * from seq (format.h, PAD RECORD), durably. */
int log_write_pad(atomio *st, uint64_t off, uint64_t len, uint64_t seq, uint32_t count);
/* Write len bytes (buf aligned, len a multiple of the block) at area offset
 * off, durably: an adopter's re-log of a dead leader's batch (commit.c,
 * ADOPTION).  0 or a negative errno. */
int log_write_at(atomio *st, const void *buf, uint64_t len, uint64_t off);

/* files.c */
/* atomio_file_open (store.c) but for the log role: its id, an error, or
 * FILE_OPEN_NEEDS_ROLE -- another file lies under a path registered while
 * other processes have the store open, and registering it again needs the
 * log role and a full checkpoint first (role_held: the caller has them). */
#define FILE_OPEN_NEEDS_ROLE INT_MIN
int file_open(atomio *st, const char *path, int open_flags, mode_t mode, bool role_held);
int cat_load(atomio *st);
int cat_load_joining(atomio *st);
/* Another process registered files since this one loaded the catalog: load
 * it again (cat_lock held). */
int cat_reload(atomio *st);
/* ... the same without LK_CAT held (cat_lock held): read-locks it, so that no
 * other process's registration rewrites the catalog meanwhile. */
int cat_reload_shared(atomio *st);
/* A file open in this process for the application (atomio_file_open), or
 * NULL. */
struct afile *file_get(atomio *st, int id);
/* A registered file the application names by id: open in this process, or
 * (registered by another process) opened now.  NULL: no such file. */
struct afile *file_app(atomio *st, int id);
/* A registered file for home writes and syncs: open in this process, or
 * opened now from the catalog (a file another process registered), its
 * identity checked.  NULL with *err. */
struct afile *file_get_any(atomio *st, uint32_t id, int *err);
/* Was f's path registered anew (another file under it) by any process since
 * this one opened it?  Then its descriptors name the old file (shm.h, fgen).
 * file_get_any opens the home descriptor anew; f->fd stays the old file's
 * while file_fd_stale says so. */
bool file_stale(atomio *st, const struct afile *f);
bool file_fd_stale(atomio *st, const struct afile *f);
/* The home writes of a batch that went to a page cache (bytes written, to a
 * file whose home writes are not O_DIRECT), one at a time: what the
 * checkpoint's dirty set and the paced write-back count.
 *   struct file_cached w = {.st = st, .g = grps, .n = n};
 *   for (const struct seg *s; (s = file_cached_next(&w));) ... */
struct file_cached {
	atomio *st;
	const struct grp *g; /* the batch's groups: n of them */
	uint32_t n, j;
};
const struct seg *file_cached_next(struct file_cached *w);
int file_resolve_path(atomio *st, const struct afile *f, char *out, size_t outsz);
const char *file_name(atomio *st, const struct afile *f, char *buf, size_t bufsz);
int file_check_path(const char *path, uint16_t flags);
int file_identity(int fd, struct fid *id);
uint64_t file_max_size(int fd);
/* A thread about to load a data file's descriptor (hfd, or fd of a file
 * opened on demand) from its afile, and done with it: a descriptor retired
 * meanwhile (file_retire) is closed only when none is between the two
 * (files_close_stale), so never under a read or write in flight.  The
 * increment is a full barrier: the descriptor is loaded after it. */
static inline void fd_use_begin(atomio *st) { atomic_fetch_add(&st->fd_users, 1); }
static inline void fd_use_end(atomio *st) { atomic_fetch_sub(&st->fd_users, 1); }
void files_close_stale(atomio *st);
/* Tests only (t_async_stop): called by the async worker with the mutex held,
 * after its look at the stop flag and before its wait.  NULL. */
extern void (*async_idle_hook)(atomio *st);
void files_close_all(atomio *st);

/* caps.c */
void file_probe_caps(atomio *st, struct afile *f, int fd);
void caps_fill(atomio *st, const struct afile *f, struct atomio_caps *caps);

/* fastpath.c (the guard is the log role's, shm.h) */
bool fast_eligible_locked(atomio *st, const struct grp *g);
void guard_add_role(atomio *st, const struct grp *g, uint64_t live_seq);
void guard_clear_all_role(atomio *st);

/* engine_pick.c (the backends' interface is engine.h) */
int engine_open(atomio *st, uint32_t flags);
void engine_close(atomio *st);

/* checkpoint.c */
void checkpoint_setup(atomio *st);
/* The policy's thresholds for a new shared state. */
void checkpoint_policy(uint64_t area_size, uint32_t ckpt_percent, uint64_t dirty_limit, uint64_t *ckpt_at,
		       uint64_t *limit);
void checkpoint_destroy(atomio *st);
bool checkpoint_must_wait_locked(const atomio *st);
/* A batch's home writes are done: note its files and blocks (mutex held). */
void dirty_note_locked(atomio *st, const struct grp *g, uint32_t n);
void ckpt_home_begin_locked(atomio *st, uint64_t k, const struct grp *g, uint32_t n);
int replay_files(atomio *st, const uint8_t *only);
void checkpoint_after_home_locked(atomio *st);
int checkpoint_request_locked(atomio *st);
int checkpoint_wake(atomio *st);
int checkpoint_full_role(atomio *st);
void checkpoint_stop(atomio *st);
/* The process leaves: a background checkpoint it was asked for goes to
 * whoever asks next (mutex held). */
void checkpoint_leave_locked(atomio *st);
/* A checkpoint's holder died: take what its superblock says (S->sb_stale). */
int checkpoint_reconcile_locked_drops(atomio *st);

/* commit.c */
int commit_tx(atomio_tx *tx);
int commit_prepare(atomio_tx *tx);
/* Put tx's group into a shared entry and queue it (async: its worker
 * collects it).  Called without sh->mu; 0 with it held (the caller lets it
 * go), or an error: nothing queued, sh->mu not held. */
/* commit_submit_and_lock's modes: a synchronous group (its thread waits),
 * an asynchronous one (its process's worker collects it), a lazy one
 * (nobody waits: whoever finishes it frees it) */
#define SUBMIT_SYNC 0u
#define SUBMIT_ASYNC 1u
#define SUBMIT_LAZY 2u
int commit_submit_and_lock(atomio_tx *tx, unsigned mode);
void lead_locked_drops(atomio *st);
bool can_lead_locked(atomio *st);
/* Adopt the batches of dead processes (commit.c, ADOPTION), if any.
 * Mutex held; dropped for their I/O. */
void adopt_locked_drops(atomio *st);
/* atomio_settle's work (commit.c). */
int commit_settle(atomio *st);
int role_acquire(atomio *st);
void role_release(atomio *st);
/* Lazy groups (commit.c, LAZY GROUPS).  commit_lazy: queue tx's group with
 * its ticket (*ticket), indexed for reads, and return without waiting; a
 * group that cannot stay in the arena is committed durably (commit_tx).
 * commit_sync: wait until every visible group with a ticket <= target is
 * done (durable and home), leading the flush if need be; flags
 * ATOMIO_SYNC_NOWAIT.  0, ATOMIO_EFAILED or ATOMIO_EUNKNOWN. */
enum lz_flusher {
	LZ_WORKER,    /* the process's worker thread runs (async.c): it flushes when due */
	LZ_COMMITTER, /* no thread wanted (ATOMIO_NO_BG_CHECKPOINT): committers lead a due flush */
	LZ_NO_THREAD, /* the worker could not be started: the group is made durable now */
};
int commit_lazy(atomio_tx *tx, uint64_t *ticket, enum lz_flusher fl);
int commit_sync(atomio *st, uint64_t target, unsigned flags);
/* The target of atomio_sync(st, file): the newest ticket that touched
 * file (file < 0: the newest ticket handed out). */
uint64_t commit_sync_target(atomio *st, int file);
/* The worker's sleep, in ns, before it looks at the queue again: the
 * flusher role's holder (taken here when free) sleeps until the queue's
 * head is due.  Mutex held. */
uint64_t lz_flusher_wait_ns_locked(atomio *st);
/* This process gives the flusher role up (its worker stops). */
void lz_flusher_leave(atomio *st);

/* lazy.c: the read index of visible groups (shm.h, struct lz_file).
 * lz_index_locked: index entry idx1's segs (at enqueue, before the commit
 * returns); -EAGAIN when the seg pool is full (nothing indexed).
 * lz_unindex_locked: remove them (after its home writes, or when it failed).
 * lz_rebuild_locked: rebuild the index from the FIFO (after a holder died).
 * lz_preadv: atomio_preadv of a file with indexed segs (the overlay).
 * lz_file_size: the size reads see. */
int lz_index_locked(atomio *st, uint32_t idx1);
void lz_unindex_locked(atomio *st, uint32_t idx1);
void lz_rebuild_locked(atomio *st);
ssize_t lz_preadv(atomio *st, int file, const struct iovec *iov, int iovcnt, off_t off);
int lz_file_size(atomio *st, int file, uint64_t *size);
/* The eager count of file (shm.h, struct lz_file): raised (on) while the file
 * is read by the kernel behind atomio's back (a mapping, a stdio stream: the
 * preload), lazy commits to it are made durable at once (commit_lazy).
 * Internal: the preload links libatomio in.  0 or -EINVAL. */
int lz_eager(atomio *st, int file, bool on);
/* read.c: len bytes of f's home at off through the descriptor reads use
 * (the buffered twin of an O_DIRECT file, else the file's own, aligned);
 * short at the end of the file. */
ssize_t file_read_home(atomio *st, struct afile *f, void *buf, size_t len, off_t off);

/* The lazy delay's bounds (atomio_options.lazy_delay_us). */
#define LAZY_DELAY_DEFAULT_US 200000u
#define LAZY_DELAY_MAX_US 60000000u

/* writeback.c (its state is this process's, under st->lock) */
void wb_init(atomio *st);
void wb_free(atomio *st);
void wb_note(atomio *st, const struct grp *g, uint32_t n);
void wb_reset(atomio *st);
bool wb_due(atomio *st);
void wb_issue(atomio *st);
/* A background checkpoint begins: write back, a batch at a time and each
 * waited for, every range this process noted so far (writeback.c, THE
 * CHECKPOINT'S DRAIN).  Takes st->lock itself. */
void wb_drain(atomio *st);

/* tx.c */
void tx_release(atomio_tx *tx);
void tx_pool_free(atomio *st);

/* async.c */
void async_init(atomio *st);
void async_stop(atomio *st);
/* Start this process's worker if it is not running (it also flushes lazy
 * groups: commit.c, LAZY GROUPS).  0 or -EAGAIN. */
int async_worker(atomio *st);
void async_destroy(atomio *st);
/* This process's asynchronous group of entry idx1 is done (its worker, or
 * the thread that finished it in this process): onto the completion list. */
void async_collect(atomio *st);

/* recover.c */
int recover(atomio *st, uint64_t *next_seq);
/* Apply a group record at area offset pos of this session's log whose seq
 * is seq to the files (the home writes of a private batch whose leader
 * died, commit.c): 0, or an error (the record is not there whole, or a
 * write failed). */
int replay_record(atomio *st, uint64_t pos, uint64_t seq);

#endif
