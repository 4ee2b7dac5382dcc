/*
 * shm.h: the state the processes of one store share (shm.c).
 *
 * Every process that opens a log (atomio_open without ATOMIO_EXCLUSIVE) maps
 * one shared-memory file: /dev/shm/atomio-STOREID-INODE where /dev/shm is a
 * tmpfs (memory: its pages are never written to a device), else "LOG-shm"
 * beside the log (shm.c, shm_where_of).  It holds the store's live
 * state: the commit queue and the groups in it, the batches on their way to
 * the log and home, the log's ring pointers, the roles and who holds them,
 * the checkpoint's dirty sets, the fast path's guard, the counters, and
 * the application's own bytes (atomio_shared_area).  An
 * exclusive store keeps the same state in anonymous memory of its own: one
 * code path for both.  docs/INTERNALS.md, "Processes", is the model in
 * words; this header is its layout.
 *
 * NEVER TRUSTED BY RECOVERY.  The file is rebuilt from the log by the first
 * process that opens the store while no other has it open (shm_build, after
 * recovery); nothing in it is read back after a crash.  It is created 0600
 * and refused like the log (ATOMIO_EUNSAFE) when another user could write
 * it.  A process that joins checks what it maps (magic, sizes, the log's
 * identity and epoch) and refuses a file that does not add up.
 *
 * WHO OPENS, WHO JOINS: lock bytes on the log file (open-file-description
 * locks, which go with the process that holds them):
 *   LK_INIT   write-locked while a process decides whether it is first, and
 *             for the whole of a first process's recovery and rebuild: one
 *             at a time;
 *   LK_DMS    read-locked by every attached process for as long as it is
 *             attached; a process that can write-lock it is alone;
 *   LK_CAT    write-locked while a process writes the file catalog,
 *             read-locked while one reads it beside live others (files.c);
 *   LK_PROC+i write-locked by the process in slot i for as long as it is
 *             attached: free means that process is gone (shm_alive).
 * And flock(LOCK_SH) on the log for every attached process, so that an
 * ATOMIO_EXCLUSIVE opener (LOCK_EX), or a library that predates shared
 * stores, finds it busy.
 *
 * THE MUTEX AND THE STATE.  One robust, process-shared mutex (mu) guards
 * struct shm_state.  The state is kept in two copies: the holder works on a
 * copy of the current one (shm_lock) and makes it current with one store as
 * it unlocks (shm_unlock).  A process killed while it holds the mutex --
 * anywhere in between -- leaves the last published state whole: the next
 * locker gets EOWNERDEAD, marks the mutex consistent, and reaps the dead
 * process (shm_reap_locked).  Whatever a holder writes outside the state
 * (an entry's fields, a batch's descriptor, a block's header) goes where the
 * published state does not yet point, or is one word that is right on its
 * own; each such write says so at its site.
 *
 * ROLES held while the mutex is not (the log role, a batch's log write and
 * home stage, a checkpoint, a chunk of the log's zeroing) name their holder
 * by slot.  A waiter that waits long (SHM_REAP_NS) checks the holders'
 * liveness (shm_alive: one fcntl per attached process) and takes over what
 * the dead held: roles are released, a batch whose leader died is adopted
 * (commit.c, ADOPTION), a dead checkpoint is redone.
 */
#ifndef ATOMIO_SHM_H
#define ATOMIO_SHM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "atomio.h"
#include "format.h"
#include "internal.h"

#define SHM_MAGIC 0x4d48534f494d4f54ull /* "TOMIOSHM" */
#define SHM_VERSION 5u

#define SHM_PROCS 128u     /* processes attached at once */
#define SHM_ENTRIES 4096u  /* groups between their commit call and its return, at once */
#define SHM_BATCHES 64u    /* batches between being formed and finished, at once */
#define SHM_GUARD 32768u   /* fast-path guard slots per table (two tables) */
/* The arena holds the groups' data from their commit call to their home
 * writes: a 32nd of the record area, within these bounds.  A group larger
 * than an eighth of it is not copied: its own process leads it, from its
 * own memory (a private batch, commit.c). */
#define SHM_ARENA_MIN (1u << 20)
#define SHM_ARENA_MAX (32u << 20)

/* How long waits go before a waiter checks whether the holders still live
 * (shm_reap_locked: at most one check per this time, store-wide).  The
 * survivors' stall after a death is about this, plus the time to redo what
 * the dead held. */
#define SHM_REAP_NS (100u * 1000000u)

/* Lock bytes on the log file, far beyond any log's end. */
#define LK_BASE (1ull << 62)
#define LK_INIT (LK_BASE + 0)
#define LK_DMS (LK_BASE + 1)
#define LK_CAT (LK_BASE + 2)
#define LK_PROC (LK_BASE + 64)

/* --- a process attached ------------------------------------------------------ */

/* A futex word bumped on each event, and how many wait on it (0: a wake
 * needs no system call).  Outside the state: a hint only. */
struct shm_ev {
	_Atomic uint32_t seq;
	_Atomic uint32_t waiters;
};

struct shm_proc {
	_Atomic uint32_t state; /* 0 free, 1 attached */
	uint32_t pid;           /* for people reading a dump of the file */
	struct shm_ev wake;     /* its worker thread should look (async groups) */
	_Atomic uint32_t worker_idle; /* its worker waits on wake */
	uint32_t pad0;
	uint64_t attached_ns;   /* CLOCK_REALTIME, for people */
	uint8_t pad[32];
};
_Static_assert(sizeof(struct shm_proc) == 64, "proc slot size");

/* --- a group ----------------------------------------------------------------- */

enum ent_state {
	ENT_FREE = 0,
	ENT_FILLING, /* its owner copies its data into the arena */
	ENT_QUEUED,  /* in the commit queue */
	ENT_BATCHED, /* in a batch */
	ENT_DONE,    /* result set; its owner frees it */
};
#define ENT_ASYNC 0x1u   /* committed with atomio_tx_commit_async: its process's worker collects it */
#define ENT_PRIVATE 0x2u /* data in its owner's memory (tx), not the arena: its owner leads it */
#define ENT_ORPHAN 0x4u  /* its owner died: whoever finishes it frees it */
#define ENT_VISIBLE 0x10u /* indexed for reads (lazy.c) from its enqueue until its home writes end */
#define ENT_LAZY 0x20u    /* committed lazily: nobody waits for it; whoever finishes it frees it */
#define ENT_MAYBE 0x8u   /* queued again after its dead leader's fast-path write was issued: it may be
			    durable, so it never fails as "not written" (ATOMIO_EUNKNOWN instead) */

struct shm_ent {
	_Atomic uint32_t owner;   /* slot + 1 of its process; 0 = free (taken by compare-and-swap) */
	_Atomic uint32_t state;   /* enum ent_state */
	_Atomic uint32_t wake;    /* futex: bumped when its owner thread should look */
	_Atomic uint32_t waiting; /* owner threads waiting on wake */
	_Atomic uint32_t flags;   /* ENT_* */
	int32_t result;           /* ENT_DONE: 0 or the commit's error */
	uint32_t next;            /* queue and batch link: index + 1, 0 = none */
	uint32_t nsegs;
	uint64_t blk;             /* arena offset of its block (not ENT_PRIVATE) */
	uint64_t data_len;        /* raw data bytes */
	uint64_t clen;            /* compressed data bytes in the block, 0 = raw */
	uint64_t rec_len;         /* its record's bytes */
	uint64_t seq;             /* given when batched */
	uint64_t batch;           /* its batch's number */
	uint64_t tx;              /* the owner's atomio_tx (meaningful in the owner only) */
	uint32_t fast;            /* 1: written by the kernel fast path */
	uint32_t ord;             /* its place in its batch (async.c hands groups back in order) */
	uint32_t lz_next;         /* the FIFO of visible groups not done (S->lz_head): index + 1 */
	uint64_t ticket;          /* its place in the commit order (S->tk_next at enqueue) */
	uint64_t t_ns;            /* CLOCK_MONOTONIC at enqueue (the lazy delay counts from it) */
};

/* An arena block: header, then nsegs descriptors, then the data. */
struct shm_seg {
	uint32_t file;
	uint16_t kind; /* SEG_WRITE / SEG_SETSIZE */
	uint16_t reserved;
	uint64_t off, len;
	uint64_t data; /* SEG_WRITE: offset of its data from the block's start */
};
struct arena_blk {
	uint64_t size;          /* bytes of the block, header included, a multiple of 64 */
	_Atomic uint32_t freed; /* 1: the head may pass it */
	uint32_t entry;         /* index + 1; 0 = filler to the arena's end (a wrap) */
	uint64_t cdata;         /* compressed data: offset from the block's start, 0 = none */
	uint8_t pad[40];
};
_Static_assert(sizeof(struct arena_blk) == 64, "arena block header");

/* --- a batch --------------------------------------------------------------- */

enum bat_state {
	BAT_FREE = 0,
	BAT_TAKEN,   /* formed: seqs and log space given; its leader lays out the records */
	BAT_LOGGING, /* its log (or fast-path) write was issued */
	BAT_LOGGED,  /* durable in the log; waits for its home turn */
	BAT_HOMING,  /* its home writes run (home_next == k) */
	BAT_HOMED,   /* home done, home_next moved past it; its groups are being handed back */
};

struct shm_bat {
	uint64_t k;             /* its number (state and leader: S->bstate, S->bowner) */
	uint32_t first;         /* its groups: entry index + 1, linked by next ... */
	uint32_t n;             /* ... n of them */
	uint32_t nrec;          /* records (non-empty groups): the seqs it holds */
	uint32_t fast;          /* one group, written by the kernel fast path */
	uint32_t priv;          /* one ENT_PRIVATE group: its leader's process has the data */
	int32_t result;
	uint64_t off, bytes;    /* its log write: area offset, bytes of records */
	uint64_t seq0;          /* first seq */
	uint64_t end_seq, end_off; /* where a checkpoint may cut once it is home */
	uint64_t live_seq;      /* the head seq when it was formed (the guard's) */
	uint64_t logged_ns;     /* when its log write ended (adoption's report) */
};

/* --- the state under the mutex --------------------------------------------------- */

struct shm_state {
	/* the record area's ring (commit.c, checkpoint.c): live records from
	 * head (head_seq, as in the durable superblock) to tail; used counts
	 * their bytes and any end-of-area gap a wrap skipped.  home_seq and
	 * home_off: just after the newest batch whose home writes are done. */
	uint64_t next_seq, tail, head, head_seq, used, home_seq, home_off;
	uint64_t batch_next; /* number of the next batch */
	uint64_t home_next;  /* the batch whose home writes run next */
	uint64_t log_write_ns; /* a log write's duration, smoothed */
	uint64_t zero_lo;    /* the log's lazy zeroing: every area block below is written */
	uint64_t arena_head, arena_tail; /* the arena's ring, in bytes since init */
	uint64_t role_wait[SHM_PROCS / 64]; /* bit per slot: its threads wait in role_acquire */
	uint64_t cat_gen;    /* the catalog's current generation */
	uint32_t files_hi;   /* one past the highest registered file id */
	uint32_t log_owner;  /* slot + 1 holding the log role, 0 free */
	uint32_t log_inflight; /* log writes issued and not ended */
	uint32_t q_head, q_tail, q_len; /* the commit queue: entry index + 1 */
	uint32_t pipe_groups; /* groups in batches not yet handed back */
	uint32_t fill_want;  /* groups a new batch waits for (commit.c, BATCHES THAT FILL) */
	uint32_t fill_waiting; /* the log role's holder waits for its batch to fill */
	uint32_t ckpt_owner; /* slot + 1 running a checkpoint */
	uint32_t ckpt_wanted; /* slot + 1 whose checkpointer should run a background one */
	uint32_t ckpt_lost;  /* a checkpoint's holder died: the next one syncs every file */
	uint32_t sb_stale;   /* ... and may have written a superblock this state does not know:
				read it back before the next batch or checkpoint (checkpoint.c) */
	uint32_t zero_owner; /* slot + 1 zeroing the chunk at zero_lo */
	uint32_t dset_cur;   /* which dirty-set table collects home writes (the other: the checkpoint's) */
	uint32_t guard_bad;  /* the log role's holder died: the guard may be torn */
	uint32_t fast_any;   /* a process has a file with a fast path: batches fill the guard */
	uint64_t guard_floor; /* every chunk of every file counts as covered up to this seq */
	uint32_t orphans;    /* batches whose leader died, not yet adopted (bowner 0) */
	/* lazy groups (commit.c, LAZY GROUPS; lazy.c): the commit order's
	 * tickets; the FIFO of visible groups not yet done, in ticket order
	 * (entry index + 1, linked by lz_next), how many, their arena bytes;
	 * the newest ticket a sync waits for; a flush wanted because shared
	 * memory fills; queued groups whose owner wants them now (not lazy);
	 * the process whose worker flushes lazy groups when the delay runs out */
	uint64_t tk_next;
	uint32_t lz_head, lz_tail, lz_n, lz_press;
	uint64_t lz_bytes;
	uint64_t sync_want;
	uint32_t q_eager;
	uint32_t lz_flusher; /* slot + 1, 0 none */
	uint64_t lz_unk_min; /* the oldest ticket of a visible group failed after its record
				write was issued (atomio_sync's ATOMIO_EUNKNOWN), 0 none */
	int32_t failed;      /* 0, or the error that poisoned the store for every process */
	/* each batch slot's state and leader (k % SHM_BATCHES): here, so that
	 * they change with the state they go with; the rest of a batch's
	 * descriptor is written once, when it is formed, before it is published */
	uint8_t bstate[SHM_BATCHES]; /* enum bat_state */
	uint8_t bowner[SHM_BATCHES]; /* slot + 1 of its leader; 0 = orphaned */
};
_Static_assert(SHM_PROCS < 255, "bowner holds a slot + 1");

/* --- the whole file ------------------------------------------------------------------ */

/* The dirty set (checkpoint.c): distinct 4 KiB blocks written home, in an
 * open-addressing table of cap keys; its block is the page cache's page. */
#define SHM_DBLOCK 4096u
struct dkey {
	uint64_t blk1; /* block index + 1; 0 = empty */
	uint32_t file, pad;
};
#define SHM_DCAP_MAX (1u << 20) /* keys per table, at most */
#define SHM_DPAGE 256u           /* keys per 4 KiB of a table */
struct dtab {
	uint64_t used;
	uint32_t overflow; /* a key found no room: count as over the limit */
	uint32_t pad;
	/* bit per SHM_DPAGE keys of the table that may hold one: the end of a
	 * checkpoint reads and clears only those (checkpoint.c) */
	uint64_t pages[SHM_DCAP_MAX / SHM_DPAGE / 64];
};

/* The fast path's guard (fastpath.c): (file, 4 KiB chunk) -> newest seq of
 * a live record covering it; chunk GUARD_WHOLE stands for a size change. */
struct gkey {
	uint64_t chunk1; /* chunk index + 1; 0 = empty */
	uint32_t file, pad;
	uint64_t seq;
};
struct guard_hdr {
	uint32_t cur;   /* the table in use (the other is the rebuild's) */
	uint32_t used;
	uint32_t all;   /* every chunk of every file up to all_seq */
	uint32_t pad;
	uint64_t all_seq;
};

struct shm_stats {
	_Atomic uint64_t commits, bytes_logged, bytes_home, log_syncs, data_syncs, checkpoints,
		groups_recovered, batches, log_full_waits, fast_writes, bytes_raw, records_compressed,
		bytes_checkpointed, records_beyond_tail, bytes_written_back, adoptions;
	/* struct atomio_lazy_stats */
	_Atomic uint64_t lazy_commits, lazy_eager, syncs, syncs_waited, flush_delay, flush_press,
		flush_sync, lazy_reads, lazy_waits;
};

/* The read index of lazy groups (lazy.c): per file id, its indexed ranges
 * in ticket order.  Derived from the FIFO (S->lz_head) and the arena
 * blocks' descriptors: rebuilt after a holder's death (lz_rebuild_locked).
 * Written under sh->mu; n is read without it (atomio_lazy_pending). */
#define SHM_LZSEGS 65536u
/* The read index's chunk filter (lazy.c, THE CHUNK FILTER): counters of
 * indexed writes per (file, 16 KiB chunk), hashed into this many slots. */
#define SHM_LZCHUNKS 65536u
#define LZ_CHUNK_SHIFT 14
struct lz_file {
	_Atomic uint32_t n;     /* indexed segs of this file (0: reads go to the file) */
	_Atomic uint32_t nsize; /* ... of them size changes */
	uint32_t head, tail;    /* its segs, oldest first: index + 1 into the seg pool */
	_Atomic uint64_t max_end; /* the largest end of an indexed write (0 when n is 0) */
	_Atomic uint64_t hi;    /* the newest ticket that touched the file (monotone) */
	_Atomic uint32_t eager; /* > 0: lazy commits to it are made durable at once (mapped) */
	uint32_t pad;
};
struct lz_seg {
	uint32_t ent, next, file; /* its group (index + 1), the file's next seg (index + 1) */
	uint16_t kind, pad;       /* SEG_WRITE / SEG_SETSIZE */
	uint64_t off, len;
	uint64_t data;            /* SEG_WRITE: its bytes' offset in the arena */
	uint64_t ticket;
};
struct lz_hdr {
	uint32_t free;  /* the seg pool's free list: index + 1 */
	uint32_t used;  /* segs in use (indexed) */
	uint32_t hw;    /* segs ever taken from the pool's untouched end (so that a store that
			   never commits lazily never touches the pool's pages) */
	uint32_t pad;
};

struct shm {
	uint64_t magic;
	uint32_t version;
	uint32_t ready;      /* 1 once the first process has built it */
	uint64_t size;       /* bytes mapped */
	uint64_t store_id, epoch; /* of the log, this session */
	uint64_t log_dev, log_ino;
	/* geometry of the parts below (byte offsets from the start) */
	uint64_t ents_off, bats_off, procs_off, arena_off, dtab_off, guard_off;
	uint64_t lzf_off, lzseg_off; /* the lazy read index (lazy.c): MAX_FILES lz_file, SHM_LZSEGS lz_seg */
	uint64_t lzc_off;            /* ... and its chunk filter: SHM_LZCHUNKS _Atomic uint32_t */
	_Atomic uint64_t lzc_gen;    /* odd while lz_rebuild_locked recounts the filter */
	uint64_t lz_delay_ns; /* the lazy delay (atomio_options.lazy_delay_us) of the first process */
	uint64_t dcap;       /* keys per dirty-set table */
	uint64_t arena_size; /* bytes of the arena (a multiple of 4096) */
	/* the checkpoint policy of the first process (checkpoint.c) */
	uint64_t ckpt_at, dirty_limit;
	uint64_t reap_ns;    /* when the last reap ran (CLOCK_MONOTONIC) */
	_Atomic uint32_t cur; /* which of s[] is current */
	_Atomic uint32_t ent_hint; /* where the search for a free entry starts */
	pthread_mutex_t mu;  /* robust, process-shared */
	struct shm_state s[2];
	/* events */
	struct shm_ev ev_role;  /* the log role freed, a log write ended, a zeroing chunk ended */
	struct shm_ev ev_home;  /* home_next moved; a batch finished */
	struct shm_ev ev_ckpt;  /* a checkpoint ended */
	struct shm_ev ev_fill;  /* a group was queued while the log role's holder waits to fill */
	struct shm_ev ev_space; /* an entry or arena space was freed */
	struct shm_ev ev_done;  /* a visible group is done (durable and home): syncs wait on it */
	/* the superblock as last written (logfile.c): written by the checkpoint's holder */
	struct sb_disk sb;
	/* the checkpoint's file flags (checkpoint.c): bit per file id, set by the
	 * home stage after its writes, taken by a checkpoint before its sync */
	_Atomic uint64_t fdirty[MAX_FILES / 64], fresized[MAX_FILES / 64];
	/* each file id's registration generation: + 1 when another file is
	 * registered under its path (files.c, reregister) */
	_Atomic uint32_t fgen[MAX_FILES];
	/* Which descriptor's sync a checkpoint may trust (checkpoint.c, TRUSTED
	 * DESCRIPTORS): by file id, k + 1 of the newest batch whose home stage
	 * began writing it (fwrote; fwrote_all: a batch whose files are not
	 * known, every file), and how many batches were home when a sync
	 * through a trusted descriptor began that then succeeded (fsynced);
	 * homed: k + 1 of the newest batch home; fsynced_all: fsynced of every
	 * file, as a full checkpoint that succeeded leaves it. */
	_Atomic uint64_t fwrote[MAX_FILES], fsynced[MAX_FILES];
	_Atomic uint64_t fwrote_all, homed, fsynced_all;
	struct shm_stats stats;
	struct dtab dt[2];
	struct guard_hdr guard;
	struct lz_hdr lz;
	/* atomio_shared_area: the application's, zero at the state's build */
	_Alignas(64) _Atomic uint32_t app[ATOMIO_SHARED_AREA / 4];
};

/* The parts of the mapping. */
static inline struct shm_ent *shm_ents(struct shm *sh) { return (void *)((char *)sh + sh->ents_off); }
static inline struct shm_bat *shm_bats(struct shm *sh) { return (void *)((char *)sh + sh->bats_off); }
static inline struct shm_proc *shm_procs(struct shm *sh) { return (void *)((char *)sh + sh->procs_off); }
static inline char *shm_arena(struct shm *sh) { return (char *)sh + sh->arena_off; }
static inline struct dkey *shm_dtab(struct shm *sh, unsigned i)
{
	return (struct dkey *)((char *)sh + sh->dtab_off) + (uint64_t)i * sh->dcap;
}
static inline struct gkey *shm_guard(struct shm *sh, unsigned i)
{
	return (struct gkey *)((char *)sh + sh->guard_off) + (uint64_t)i * SHM_GUARD;
}
static inline struct lz_file *shm_lzf(struct shm *sh, uint32_t file)
{
	return (struct lz_file *)((char *)sh + sh->lzf_off) + file;
}
static inline _Atomic uint32_t *shm_lzc(struct shm *sh)
{
	return (_Atomic uint32_t *)((char *)sh + sh->lzc_off);
}
static inline struct lz_seg *shm_lzseg(struct shm *sh, uint32_t idx1)
{
	return (struct lz_seg *)((char *)sh + sh->lzseg_off) + (idx1 - 1);
}
/* k + 1 of the newest batch whose home stage began writing file id, or
 * wrote files not known (fwrote, fwrote_all: checkpoint.c, TRUSTED
 * DESCRIPTORS): what a descriptor opened now must see synced to be trusted. */
static inline uint64_t shm_wrote_mark(struct shm *sh, uint32_t id)
{
	uint64_t a = id < MAX_FILES ? atomic_load(&sh->fwrote[id]) : 0, b = atomic_load(&sh->fwrote_all);
	return a > b ? a : b;
}
static inline struct shm_ent *shm_ent(struct shm *sh, uint32_t idx1) { return &shm_ents(sh)[idx1 - 1]; }
static inline uint64_t shm_private_min(const struct shm *sh) { return sh->arena_size / 8; }
static inline struct shm_bat *shm_bat(struct shm *sh, uint64_t k) { return &shm_bats(sh)[k % SHM_BATCHES]; }
static inline struct arena_blk *shm_blk(struct shm *sh, uint64_t off)
{
	return (struct arena_blk *)(shm_arena(sh) + off);
}

/* --- shm.c ------------------------------------------------------------------------ */
/* The name of the shared state's file of the store whose log, at
 * log_path, is open as log_fd and has store_id (malloc'd; NULL: no memory). */
char *shm_where_of(uint64_t store_id, int log_fd, const char *log_path);
/* The shared state's file (shm_where_of) opened (created 0600 if need be) and checked like the
 * log (ATOMIO_EUNSAFE).  Sets st->shm_fd. */
int shm_open_file(atomio *st, const char *log_path);
/* The first process (LK_DMS write-locked, LK_INIT held): the file at
 * st->shm_path replaced by one it creates itself (O_EXCL), never one another
 * log's processes may have mapped (a log replaced at a path LOG-shm is named
 * by) nor one another user put there.  Sets st->shm_fd. */
int shm_file_fresh(atomio *st);
/* Remove st->shm_path if it still names this process's file. */
void shm_file_unlink(atomio *st);
/* The first process (LK_DMS write-locked): a new shared state, from what
 * recovery left (st->sb_local, the catalog, st->rec_*).  0 or a negative
 * errno. */
struct shm_start {
	uint64_t ckpt_at, dirty_limit; /* the checkpoint policy (checkpoint_policy) */
	uint64_t next_seq; /* after recovery */
	uint64_t zero_lo;  /* the log's lazy zeroing: where the written part ends */
	uint64_t lz_delay_ns; /* the lazy delay (atomio_options.lazy_delay_us, 0 taken as the default) */
};
int shm_build(atomio *st, const struct shm_start *in);
/* A later process: map the state the first one built, and check it. */
int shm_join(atomio *st);
/* Take a process slot (and its lock byte); give it up. */
int shm_attach(atomio *st);
void shm_detach(atomio *st);
void shm_unmap_state(atomio *st);
/* The shared mutex, and the state copy st->S to work on while it is held.
 * A previous holder that died is reaped first (shm_reap_locked). */
void shm_lock(atomio *st);
void shm_unlock(atomio *st);
/* Waits: with the mutex held, give it up, sleep until the event moves on
 * from what it was (read under the mutex), at most SHM_REAP_NS, and take it
 * again; then it reaps (shm_reap_locked) if no reap ran for SHM_REAP_NS,
 * whether its wait ran out or an event woke it.  Wakes: after the
 * state that a waiter checks was changed (mutex held or not). */
void shm_wait_locked_drops(atomio *st, struct shm_ev *ev);
/* The same with a bound of ns and no reap: true when it ran out. */
bool shm_wait_ns_locked_drops(atomio *st, struct shm_ev *ev, uint64_t ns);
/* The same on a group's own word, for its owner thread. */
void shm_wait_ent_locked_drops(atomio *st, struct shm_ent *e);
void shm_wake(atomio *st, struct shm_ev *ev);
void shm_wake_ent(struct shm_ent *e);
/* Every process attached to the state just joined is gone (no such pid),
 * though their lock bytes may still be held (store.c). */
bool shm_all_gone(atomio *st);
/* Is the process in slot + 1 alive?  (Its lock byte is held.) */
bool shm_alive(atomio *st, uint32_t slot1);
/* Find the attached processes that died and release what they held
 * (shm.h, ROLES): roles freed, their batches orphaned (S->orphans; commit.c
 * adopts them), their groups freed or orphaned.  force: even if a reap ran
 * less than SHM_REAP_NS ago.  true when one was found. */
bool shm_reap_locked(atomio *st, bool force);
/* A group's shared entry: take a free one (0 or -EAGAIN when all are in
 * use), give it back (with its arena block, if any). */
int shm_ent_alloc(atomio *st, uint32_t *idx1);
void shm_ent_free(atomio *st, uint32_t idx1);
/* The arena (mutex held): a block of size bytes (0, or -EAGAIN: no room
 * now); a block freed (mutex held or not); the head moved past freed
 * blocks. */
int shm_arena_alloc_locked(atomio *st, uint64_t size, uint32_t idx1, uint64_t *off);
void shm_arena_free(atomio *st, uint64_t off);
void shm_arena_advance_locked(atomio *st);
/* The shared state does not add up (a bounds check failed): the store
 * fails, naming what (mutex held). */
void shm_damaged_locked(atomio *st, const char *what);

/* Has the store failed, for any process?  A look without the mutex (the
 * current state copy is not written while it is current): a hint for the
 * paths that refuse early; the commit path decides under the mutex. */
static inline int st_failed(const atomio *st)
{
	const struct shm *sh = st->sh;
	return sh->s[atomic_load_explicit(&sh->cur, memory_order_acquire)].failed;
}

/* Poison the store for every process: the first error stays (sh->mu held). */
void st_fail_locked(atomio *st, int err);

/* --- the roles' checks (internal.h, LOCK CHECKS) ------------------------------------ */

#ifdef ATOMIO_DEBUG
/* The state as this thread may look at it: its working copy while it holds
 * sh->mu, else the published one -- which names a role's holder truly to
 * that holder, for only the holder gives a role up (or a survivor, once its
 * process is dead). */
static inline const struct shm_state *shm_seen(const atomio *st)
{
	if (st->S && HOLDS(st->mu_holder))
		return st->S;
	return &st->sh->s[atomic_load_explicit(&st->sh->cur, memory_order_acquire)];
}
#endif
/* This thread holds the log role / the home stage / the checkpoint (shm.h,
 * ROLES; docs/INTERNALS.md, "Roles"). */
#define ROLE_HELD(st) (HOLDS((st)->role_holder) && shm_seen(st)->log_owner == (st)->me)
#define HOME_HELD(st)                                                                      \
	(HOLDS((st)->home_holder) &&                                                       \
	 shm_seen(st)->bstate[shm_seen(st)->home_next % SHM_BATCHES] == BAT_HOMING &&     \
	 shm_seen(st)->bowner[shm_seen(st)->home_next % SHM_BATCHES] == (st)->me)
#define CKPT_HELD(st) (HOLDS((st)->ckpt_holder) && shm_seen(st)->ckpt_owner == (st)->me)
/* _role: the log role held by this thread, sh->mu not held. */
#define ASSERT_ROLE(st)                                                                    \
	do {                                                                               \
		ASSERT_ROLE_HELD(st);                                                      \
		ASSERT_UNLOCKED(st);                                                       \
	} while (0)
/* The log role held by this thread, with sh->mu or not. */
#define ASSERT_ROLE_HELD(st) ASSERT_HELD(ROLE_HELD(st), "the log role not held")
/* The home stage held by this thread (engine.h's home operations). */
#define ASSERT_HOME(st) ASSERT_HELD(HOME_HELD(st), "the home stage not held")
/* The checkpoint held by this thread (S->ckpt_owner). */
#define ASSERT_CKPT(st) ASSERT_HELD(CKPT_HELD(st), "the checkpoint not held")

#endif
