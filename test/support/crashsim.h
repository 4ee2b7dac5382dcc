/*
 * crashsim.h: atomio's crash-consistency harness on top of simfs (simfs.h).
 *
 * cs_run() builds a simulated disk, runs a random workload of atomic groups
 * on it through atomio, and at every crash point (every write, truncate,
 * sync, create, rename, unlink) builds crash images (simfs_enum_*) and checks
 * each one with the ORACLE:
 *
 *   - atomio_open (recovery) on the image succeeds;
 *   - every data file then equals the model after groups 1..k, in commit
 *     order, for some k between the last group acknowledged before the crash
 *     and the last group whose record had been issued (initial bytes and
 *     bytes outside all groups included: the files start with random
 *     content);
 *   - for a share of the images, recovery is itself crashed at each of its
 *     I/O points (with enumerated images of those points), recovered again,
 *     and must give the same k.
 *
 * The workload: groups of 1 to many ranges over 1 to 3 files (one may sit in
 * another directory, some opened O_DIRECT), overlapping or not, from 1 byte to
 * most of the log (so that groups force log wraps), with size changes,
 * aborted groups, single-call atomio_pwrite, explicit checkpoints, clean
 * reopens, and "crash and continue": the run's disk is replaced by a crash
 * image from an earlier point and the workload goes on after recovery, so
 * that later logs hold records of earlier epochs and laps.  With threads > 1
 * several threads commit at once (group commit batches their records in one
 * log write); the commit order is then read from the log writes themselves
 * (every group's first range starts with its group id).
 *
 * The harness also watches for the classic bugs and counts the scenarios it
 * produced (see struct cs_stats): a home write issued while a log write was
 * not yet durable is a failure at once.
 *
 * SEVERAL PROCESSES (procs=1).  Each worker thread is a process of its own:
 * its own atomio_open of the log and atomio_file_open of the files (a store
 * shared through simfs's shm_map and OFD locks, simfs.h), so that groups of
 * several processes share batches and the one commit order; the first
 * handle opened recovers, the others join.  A process may close its handle
 * and open it again among its groups (reopen_pct: it leaves and joins while
 * the others go on).  With kill_pct, a process's thread may reach a crash
 * point where its process DIES (simfs_proc_die): its descriptors close, so
 * its lock bytes go, and its thread blocks for good; the others go on and
 * take over what it held (atomio's ADOPTION, src/commit.c), and every one of
 * their crash points -- pads, home writes redone, checkpoints read back --
 * is checked like any other.  The first process never dies (it checkpoints
 * between phases); a dead one is opened anew at the next phase (a process
 * that joins).  The dead one's group in flight may or may not be committed;
 * its acknowledged ones must survive.  A process dies at a crash point
 * (its write issued, pending: the power cut there is checked first) or just
 * before a write (simfs_set_before_hook: never issued -- log space reserved
 * and never written, a home stage between two of its writes).  Whichever
 * process acknowledges a group, its record must have been issued (a place
 * in the order no pad took away).
 *
 * THE PAD RULE.  A pad record (format.h) gives up the log space and the seqs
 * [seq, seq + count) of a batch whose leader died before its home writes:
 * its groups were never acknowledged, and those of live processes are
 * logged again later, with new seqs.  So when the harness sees a pad
 * written, the groups whose records carry those seqs (of this session) leave
 * the commit order, and take their place again when logged again (a group
 * may be logged twice: once in the padded batch, once later).  While the
 * pad's write is pending (not durable: at its own crash point, or until its
 * fdatasync where RWF_DSYNC is refused), a crash image may hold it or not:
 * without it, recovery may replay the padded batch's records where its
 * leader's write landed.  So every image is checked against the order
 * without those groups and, failing that, against the order with them back
 * at their seqs (every subset, for several pads pending at once): 1..k of
 * either, with k at least past the last acknowledged group of that order.
 * Once the pad is durable only the order without them holds.  A pad over a
 * group that an acknowledged group follows is itself a failure: atomio
 * acknowledges no later group before the pad is durable.
 *
 * LAZY GROUPS (lazy_pct, issue 36).  A share of the groups is committed
 * with atomio_tx_commit_lazy: it returns once every process reads the group,
 * and its durability is reported later.  The oracle acknowledges a lazy
 * group only when a call that covers it returned 0 after its commit
 * returned: atomio_sync of the store (-1) or of a file it touched (and then
 * every lazy group of a smaller ticket too), a durable commit, or a clean
 * close.  Until then a crash may lose it, but the survivors stay a prefix of
 * the commit order (the image oracle: groups 1..k by record seq), and
 * visible groups are logged in ticket order (checked as each record is
 * seen).  No group's range is written home before its record was issued.
 * With reader=1 one more store handle, a simulated process of its own that
 * only reads, atomio_preads every range of the newest lazy groups not yet
 * acknowledged, after each lazy commit and (one thread) at every log write:
 * each byte must be that group's, or one of a group not committed before it
 * began (a later or concurrent one).  sync_pct calls atomio_sync (of the
 * store or of one file; a quarter with ATOMIO_SYNC_NOWAIT) before a group.
 * Runs without background checkpoints get a lazy delay of 60 s (nothing is
 * flushed behind the run's back) unless lazy_delay_us says otherwise.
 *
 * CS_TRACE=1 in the environment prints to stderr what the oracle learns as
 * the run goes (records and pads seen, deaths, acknowledgements, the
 * crash-and-continue snapshot): for runs of several processes, which no
 * seed replays.
 *
 * Single-threaded runs without background checkpoints (bg=0) are
 * deterministic in the config string (seed included): a failure prints a
 * command line that replays just that image (t_crash --cfg ... --point P
 * --pick ...).  Runs with several threads, or with atomio's default
 * background checkpointer thread, are not: their failures dump the crash
 * image to a directory (and print the same line, which replays the run
 * with another interleaving).
 */
#ifndef ATOMIO_CRASHSIM_H
#define ATOMIO_CRASHSIM_H

#include <stdbool.h>
#include <stdint.h>

struct cs_cfg {
	uint64_t seed;
	/* workload */
	int files;          /* 1..3 data files */
	int groups;         /* groups (per thread) */
	int threads;        /* 1 = deterministic */
	uint64_t log;       /* atomio_options.log_size */
	int ranges;         /* most ranges in a group */
	uint64_t bytes;     /* most data bytes in a group (0 = most of the log) */
	uint64_t span;      /* write offsets below this */
	int abort_pct;      /* groups built then aborted */
	int ckpt_pct;       /* explicit checkpoint before a group */
	int reopen_pct;     /* clean close + open before a group */
	int crash_pct;      /* crash-and-continue during a group */
	int trunc_pct;      /* a range is a size change */
	int pwrite_pct;     /* single-range groups through atomio_pwrite(v) */
	int full_pct;       /* groups whose record fills the whole record area */
	unsigned direct;    /* bit i: file i opened O_DIRECT */
	bool uniform;       /* every group has one shape (one record length) */
	bool blockrec;      /* every group is one range whose record is exactly 4 KiB */
	bool setup;         /* also check crash points while creating the store */
	bool appfiles;      /* the initial files were just written by the application,
			       not synced (their creation and bytes pending) */
	bool lazy;          /* one thread: register a file just before its first group
			       (catalog writes among the records) */
	int lazy_pct;       /* groups committed with atomio_tx_commit_lazy (LAZY GROUPS) */
	int sync_pct;       /* atomio_sync before a group */
	bool reader;        /* a read-only handle checks what lazy groups read as */
	uint64_t lazy_delay_us; /* atomio_options.lazy_delay_us (0: 60 s without bg, else
				   the library's default) */
	uint32_t compress;  /* 0: random bytes (incompressible: raw records); N >= 2: the
			       bytes come in runs of N equal ones, so that records are
			       stored LZ4-compressed (issue 7) */
	/* store options */
	bool bg;            /* background checkpoints (atomio's default; 0 =
			       ATOMIO_NO_BG_CHECKPOINT).  The checkpointer is a thread
			       of its own: a run with it is not deterministic */
	bool fast;          /* ATOMIO_FAST_PATH_FORCE, and the disk takes RWF_ATOMIC:
			       single-range groups on an O_DIRECT file 0 may skip the log */
	bool dhome;         /* ATOMIO_DIRECT_HOME: O_DIRECT files' home writes with O_DIRECT
			       (default: through a buffered twin descriptor) */
	bool noproc;        /* no /proc/self/fd (no twin descriptors; recovery and the log
			       open by path) */
	/* several processes (SEVERAL PROCESSES above) */
	bool procs;         /* each worker thread is a process: a store handle of its own */
	int kill_pct;       /* with procs: each process but the first dies, in each phase,
			       with this chance, at one of its thread's crash points
			       (forces bg=0 and fast=0) ... */
	uint32_t kill_at;   /* ... of these kinds: bit 0 its log writes (records, pads),
			       bit 1 its home writes, bit 2 its checkpoints' syncs and
			       superblock writes; 0 = any crash point */
	uint32_t kill_role; /* with procs: a KILL POINT (below): process 1 dies at step
			       kill_step of these roles (CS_ROLE_*); 0 = none */
	int kill_step;      /* ... counted from 0 over the run */
	bool kill_sb;       /* ... counting only its superblock writes */
	/* simulated disk */
	uint32_t unit;      /* tear granularity: 512 or 4096 */
	uint32_t dio;       /* O_DIRECT alignment */
	uint32_t phys;      /* physical sector in /sys (0 = absent) */
	bool nodirect;      /* O_DIRECT refused (log written buffered + RWF_DSYNC) */
	bool nodsync;       /* RWF_DSYNC refused (log written + fdatasync) */
	/* enumeration */
	uint64_t cap;       /* images per crash point when enumerating every combination */
	uint64_t samples;   /* images per crash point otherwise */
	int points_pct;     /* crash points enumerated */
	int nest_pct;       /* images whose recovery is crashed too ... */
	int nest_max;       /* ... at most this many per crash point */
	uint64_t ncap;      /* per recovery crash point: exhaustive up to ... */
	uint64_t nsamples;  /* ... else this many */
	int npoints;        /* recovery crash points checked per recovery (the last 4 always) */
};

/* Replay / debugging controls for cs_run (all optional). */
struct cs_replay {
	int64_t point;      /* only this crash point (-1: all) */
	int64_t image;      /* only this image index at it (-1: all) */
	const char *pick;   /* or this explicit pick (simfs_pick_format) */
	int64_t npoint;     /* nested: only this recovery crash point */
	int64_t nimage;
	const char *npick;
	const char *dump;   /* materialise the failing (or replayed) image here */
	bool hunt;          /* a mutant hunt, meant to fail: a failure keeps no image (only dump does) */
	bool verbose;
	double stop_at;     /* CLOCK_MONOTONIC time after which crash points are no longer checked */
	uint64_t stop_states; /* or: no more checking once this run has checked this many crash states */
};

struct cs_stats {
	uint64_t runs;
	uint64_t points;            /* crash points passed */
	uint64_t points_enum;       /* crash points whose images were checked */
	uint64_t points_exhaustive; /* ... with every combination */
	uint64_t images;            /* crash states checked (recovered + oracle) */
	uint64_t nested_points;     /* crash points inside recoveries */
	uint64_t nested_images;     /* crash states checked there */
	uint64_t groups;            /* groups committed by workloads */
	uint64_t aborted;
	uint64_t replayed;          /* groups replayed by recoveries of images */
	uint64_t checkpoints, reopens, continued;
	uint64_t batches_multi;     /* log writes carrying several records */
	uint64_t max_batch;
	/* classic bugs: scenarios produced and survived */
	uint64_t stale_end;   /* the log ended at a checksummed record of an earlier lap or epoch */
	uint64_t torn_valid;  /* a torn record followed by a checksummed one */
	uint64_t size_lost;   /* a data file's size was not what the groups left: recovery fixed it */
	uint64_t home_checked; /* home writes checked to follow a durable record */
	uint64_t compressed;  /* LZ4 records among the log writes */
	/* the engine's default paths, exercised */
	uint64_t bg_checkpoints; /* background checkpoints completed (atomio_stats) */
	uint64_t fast_writes;    /* groups written by the kernel fast path (RWF_ATOMIC) */
	uint64_t twin_writes;    /* home writes of O_DIRECT files through a buffered twin */
	uint64_t reordered;      /* log writes in flight together that reached the disk
				    out of commit order */
	uint64_t early_writebacks; /* sync_file_range calls of the paced write-back */
	/* several processes */
	uint64_t handles;     /* store handles opened by processes (procs) */
	uint64_t kills;       /* processes that died at a crash point of their thread ... */
	uint64_t kills_log, kills_home, kills_ckpt; /* ... at a log write, a home write, a
						       checkpoint's sync or superblock write */
	uint64_t kills_before; /* ... of which before their write was issued (reserved log
				  space never written; between two home writes) */
	uint64_t kills_held;  /* deaths put off: the thread held the store's shared mutex */
	uint64_t pads;        /* pad records written (a dead leader's batch given up) */
	uint64_t pad_groups;  /* groups whose records a pad took out of the commit order */
	uint64_t pad_images;  /* crash images that matched only the history where a pad,
				 pending, had not landed */
	/* kill points (kill_role) */
	uint64_t role_steps;  /* steps of the chosen roles process 1 reached */
	uint64_t role_kills;  /* process 1 died at its kill_step */
	uint64_t acked_checks; /* acknowledged groups each checked image had to keep, summed */
	/* lazy groups (LAZY GROUPS) */
	uint64_t lazy_groups;  /* committed lazily */
	uint64_t lazy_acked;   /* ... acknowledged later by a sync, durable commit or close */
	uint64_t syncs;        /* atomio_sync calls that returned 0 */
	uint64_t reader_checks; /* ranges the reader handle read back */
};

/* KILL POINTS (kill_role, kill_step): every crash point of process 1's thread
 * (its write issued, pending), every moment just before one of its writes
 * (never issued) and just after one of its writes or syncs (done, durable if
 * it says so, its caller not told: simfs_set_after_hook) is a STEP of the
 * role it plays there, the first that holds:
 *   CS_ROLE_REG    inside atomio_file_open of a file new to the catalog (the
 *                  process registers one file of its own at its first group)
 *   CS_ROLE_ADOPT  while it leads a batch whose leader died (pad, home
 *                  writes redone: the reaper's and adopter's work)
 *   CS_ROLE_CKPT   while it holds the checkpoint (full: atomio_checkpoint or a
 *                  full log; its syncs, superblock write, read-backs)
 *   CS_ROLE_LOG    its writes to the record area (records, pads)
 *   CS_ROLE_HOME   its writes to the data files (home writes)
 *   CS_ROLE_LEAD   anything else while it holds the log role or leads a
 *                  batch (the log's syncs, its zeroing)
 *   CS_ROLE_BGCKPT (alone, bg=1) its checkpointer thread while it holds the
 *                  checkpoint: a background checkpoint's syncs and superblock
 *                  write; the process dies there, its worker thread stopped
 *                  first where it holds nothing other processes share
 *                  (simfs_proc_stop); no other process dies in such a run.
 *                  The steps are those of every process but the first
 *                  (whichever's checkpointer the home stage asks)
 * Process 1 dies at step kill_step of the roles in kill_role (simfs_proc_die:
 * SIGKILL; its locks go, the others adopt), the power cut there is checked
 * first (at a crash point), and so is every crash point of the others after
 * it.  kill_pct then picks among processes 2 and up only (an earlier death
 * for process 1 to adopt).  Which step is which depends on the interleaving:
 * a kill point is a role and a count, not one instruction. */
#define CS_ROLE_LOG 1u
#define CS_ROLE_HOME 2u
#define CS_ROLE_CKPT 4u
#define CS_ROLE_ADOPT 8u
#define CS_ROLE_REG 16u
#define CS_ROLE_LEAD 32u
#define CS_ROLE_BGCKPT 64u
/* A test program linked with -Wl,--wrap=pthread_mutex_lock, whose wrapper
 * calls cs_mutex_lock_hook() first, sets cs_lock_steps: then each write or
 * sync of process 1 has a fourth step, after "after": the thread runs on
 * from the call and dies at its next pthread_mutex_lock (the store's mutex
 * or its own; not inside the harness's hooks) -- a death between two
 * system calls, such as between a superblock write and the ring's reset. */
extern bool cs_lock_steps;
void cs_mutex_lock_hook(void);

/* Defaults for a small sampled run. */
void cs_cfg_default(struct cs_cfg *c);
/* "seed=1,files=3,..." (malloc'd) and back; parse starts from the defaults
 * and returns -1 on an unknown key. */
char *cs_cfg_format(const struct cs_cfg *c);
int cs_cfg_parse(const char *s, struct cs_cfg *c);
/* Set the keys s names, keep the others. */
int cs_cfg_apply(const char *s, struct cs_cfg *c);

/* One run.  0 = every image passed; 1 = a failure (printed, with its
 * reproducer).  st accumulates (may be NULL); replay may be NULL.  argv0 is
 * used in the reproducer line. */
int cs_run(const struct cs_cfg *c, const struct cs_replay *replay, struct cs_stats *st,
	   const char *argv0);

/* (storepeek.c, for crashsim.c: does the calling thread hold st's shared
 * mutex?  The harness does not kill a process there, see maybe_die.) */
struct atomio;
bool cs_store_holds_mutex(struct atomio *st);
/* What the process of st holds, in the published shared state: bit 0 the log
 * role, bit 1 the checkpoint, bit 2 a batch numbered in orph[0..norph) (the
 * batches of a process that died, so: it adopts), bit 3 a batch (it leads). */
unsigned cs_store_holds(struct atomio *st, const uint64_t *orph, int norph);
/* Is the calling thread st's checkpointer thread? */
bool cs_store_is_ckpter(struct atomio *st);
/* The batches the process of st leads (not free), at most max of them. */
int cs_store_batches(struct atomio *st, uint64_t *ks, int max);

void cs_stats_add(struct cs_stats *to, const struct cs_stats *from);
void cs_stats_print(const char *label, const struct cs_stats *s);

#endif
