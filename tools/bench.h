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
	unsigned threads;
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
};

#define BENCH_SKIP 1

struct bench_mode {
	const char *name;
	const char *what; /* one line for --help and the man page */
	/* 0 = ready, BENCH_SKIP = cannot run here (why says why, shown to the
	 * user), < 0 = -errno (why says what failed). */
	int (*setup)(const struct bench_env *env, void **state, char *why, size_t whylen);
	/* Write one group durably; called from many threads at once (thread
	 * is 0..threads-1).  0 or -errno (why: what failed). */
	int (*op)(void *state, unsigned thread, const struct bench_group *g, char *why, size_t whylen);
	/* End of a time slice: make durable whatever the mode deferred (atomio's
	 * checkpoint), so that the slice's device bytes are the whole cost.
	 * NULL = nothing deferred. */
	int (*finish)(void *state, char *why, size_t whylen);
	void (*counters)(void *state, struct mode_counters *c);
	void (*teardown)(void *state);
	bool optional; /* run only when named in --modes */
};

extern const struct bench_mode *const bench_modes[];
extern const unsigned bench_nmodes;

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
