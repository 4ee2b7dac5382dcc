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
};

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

void cs_stats_add(struct cs_stats *to, const struct cs_stats *from);
void cs_stats_print(const char *label, const struct cs_stats *s);

#endif
