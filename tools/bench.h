/*
 * bench.h: `atomio bench`'s pieces.
 *
 * A MODE is one way of making page writes durable and (for all but `unsafe`)
 * atomic: a table of functions (bench_modes.c).  The driver (bench.c) makes
 * the data files, generates the groups (which pages, what bytes), runs every
 * mode for the same time slice in rotating order, repeats, measures (latency
 * histogram, device and process counters, the mode's own waits) and reports.
 * A new mode -- the engine's io_uring or async commits, a kernel fast path --
 * is one more table entry; a new workload knob (page popularity, data
 * compressibility) changes only the group generator, not the modes.
 */
#ifndef ATOMIO_BENCH_H
#define ATOMIO_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* --- latency histogram (log-linear: < 1.6% error, 1 ns .. 68 s) --------- */

#define HIST_SUB_BITS 6
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_MAX_EXP 36
#define HIST_N ((HIST_MAX_EXP - HIST_SUB_BITS + 1) * HIST_SUB)

struct hist {
	uint64_t count;
	uint64_t min, max; /* ns */
	double sum;        /* ns */
	uint64_t b[HIST_N];
};

void hist_reset(struct hist *h);
void hist_add(struct hist *h, uint64_t ns);
void hist_merge(struct hist *dst, const struct hist *src);
double hist_quantile(const struct hist *h, double q); /* ns; NAN when empty */
/* Bucket i covers [lo, lo + width). */
void hist_bucket(unsigned i, uint64_t *lo, uint64_t *width);

/* --- modes ------------------------------------------------------------------ */

/* What a mode is given; shared by all threads, read-only during a run. */
struct bench_env {
	const char *dir;     /* the mode's own directory (for logs, scratch files) */
	char **paths;        /* nfiles data files, prefilled with real blocks */
	unsigned nfiles;
	uint64_t file_size;  /* bytes per data file, a multiple of page */
	size_t page;         /* bytes per range */
	unsigned ranges;     /* ranges per group */
	unsigned threads;    /* writers: threads, or processes when procs */
	bool procs;          /* writers are processes (--procs): setup's state is
				shared with them (counters in shared memory) */
	bool direct;         /* O_DIRECT data files (else buffered) */
	uint64_t log_size;   /* atomio's log */
	const char *fs_desc; /* "ext4 on vda", for skip reasons */
	/* the workload (bench.c): page popularity and data compressibility */
	double theta;        /* 0 = uniform, else zipfian with this parameter */
	const double *cdf;   /* zipfian: cumulative probability by rank (file_size/page entries) */
	unsigned compressible; /* percent of each page's bytes that compress away (0..99) */
	uint32_t ckpt_percent; /* atomio: atomio_options.ckpt_percent (0 = default) */
};

/* One range of a group: page-aligned offset in one data file. */
struct bench_range {
	unsigned file;
	uint64_t off;
	const void *buf; /* page bytes, 4096-aligned */
};

struct bench_group {
	unsigned n;
	const struct bench_range *r;
};

/* Durability waits the mode has spent so far (monotonic). */
struct mode_counters {
	uint64_t waits; /* fsync/fdatasync calls and RWF_DSYNC writes */
	/* modes with a log (atomio): its own accounting, else 0 */
	uint64_t log_bytes, home_bytes, checkpoints;
	uint64_t ckpt_bytes; /* distinct home bytes its checkpoints made durable */
	uint64_t log_syncs;  /* of waits: the durable log writes of commits */
	uint64_t batches;    /* log writes that carried groups (atomio_stats) */
	uint64_t log_full_waits; /* commits that waited for log space (atomio_stats) */
};

#define BENCH_SKIP 1

struct bench_mode {
	const char *name;
	const char *what; /* one line for --help and the man page */
	/* 0 = ready, BENCH_SKIP = cannot run here (why says why, shown to the
	 * user), < 0 = -errno (why says what failed). */
	int (*setup)(const struct bench_env *env, void **state, char *why, size_t whylen);
	/* Write one group durably; called from many threads at once (thread
	 * is 0..threads-1), or, with --procs, from each writer process with
	 * the state its attach made.  0 or -errno (why: what failed). */
	int (*op)(void *state, unsigned thread, const struct bench_group *g, char *why, size_t whylen);
	/* --procs: in a writer process, forked (for each slice) from the
	 * process that ran setup, make the process's own state from setup's:
	 * descriptors of its own, its own store handle (atomio_open of the
	 * same log: it joins the store).  0 or -errno.  NULL: the mode cannot
	 * run in processes (its setup skips it when env->procs). */
	int (*attach)(const struct bench_env *env, void *state, void **own, char *why, size_t whylen);
	/* The writer process's end: what it deferred done (asynchronous
	 * groups reaped), what attach opened closed.  0 or -errno. */
	int (*detach)(void *own, char *why, size_t whylen);
	/* End of a time slice: make durable whatever the mode deferred (atomio's
	 * checkpoint), so that the slice's device bytes are the whole cost.
	 * Called with setup's state, after every writer is done (and every
	 * writer process has detached).  NULL = nothing deferred. */
	int (*finish)(void *state, char *why, size_t whylen);
	/* The counts of every writer, threads or processes (setup's state). */
	void (*counters)(void *state, struct mode_counters *c);
	void (*teardown)(void *state);
	bool optional; /* run only when named in --modes */
	/* Before each slice, before its counters and clock start (NULL: nothing).
	 * A mode that has one measures a new store's first lap: its slice runs
	 * until its log has been written once over (or 10 times its time), not
	 * until min_ckpts checkpoints. */
	int (*begin)(void *state, char *why, size_t whylen);
};

extern const struct bench_mode *const bench_modes[];
extern const unsigned bench_nmodes;

/* --- the device probe (bench_probe.c) -------------------------------------------- */

/* Durable O_DIRECT writes as a commit's log write, one at a time, into a
 * file of its own whose blocks were written first. */
struct bench_probe {
	int fd;
	char path[4200];
	void *buf;      /* span bytes, incompressible */
	size_t span;    /* the file's size; writes wrap there */
	uint64_t off;   /* the next write's offset */
	bool no_dsync;  /* RWF_DSYNC refused: pwrite + fdatasync */
};

/* The probe's file in dir, span bytes (at least 1 MiB), written and synced. */
int bench_probe_open(struct bench_probe *p, const char *dir, size_t span, char *why, size_t n);
/* count writes of size bytes (a multiple of 4096), or fewer when secs pass;
 * each one's latency added to lat. */
int bench_probe_run(struct bench_probe *p, size_t size, unsigned count, double secs, struct hist *lat,
		    char *why, size_t n);
void bench_probe_close(struct bench_probe *p);

/* --- plot ---------------------------------------------------------------------- */

struct plot_mode {
	const char *name;
	const char *skipped; /* reason, or NULL */
	const struct hist *lat;
	double ops_median, ops_min, ops_max;
	double dev_bpb, proc_bpb; /* device / process bytes per user byte; NAN unknown */
};

struct plot_panel {
	char title[160];
	unsigned nmodes;
	struct plot_mode m[8];
};

/* Write an SVG: per panel, latency CDFs, throughput bars, bytes per user byte. */
int bench_plot(const char *path, const char *title, const char *subtitle,
	       const struct plot_panel *p, unsigned npanels);

#endif
