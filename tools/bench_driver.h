/*
 * bench_driver.h: what the pieces of `atomio bench`'s driver share: the
 * options (bench_opts.c), the results of each configuration, the slices that
 * fill them (bench_slice.c), the report (bench_report.c) and the run
 * (bench.c).  The modes and the histogram are bench.h.
 */
#ifndef ATOMIO_BENCH_DRIVER_H
#define ATOMIO_BENCH_DRIVER_H

#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bench.h"
#include "cli.h"

#define MAX_REPS 99
#define MAX_CFG_VALUES 8
#define MAX_MODES 8

struct opts {
	const char *dir;
	uint64_t pages[MAX_CFG_VALUES], ranges[MAX_CFG_VALUES], threads[MAX_CFG_VALUES];
	unsigned npages, nranges, nthreads;
	double thetas[MAX_CFG_VALUES]; /* page popularity: 0 = uniform, else zipfian theta */
	uint64_t comps[MAX_CFG_VALUES]; /* percent compressible */
	unsigned nthetas, ncomps;
	unsigned files;
	uint64_t file_size, log_size;
	uint32_t ckpt_percent;
	unsigned min_ckpts; /* a log mode's slice runs on until this many checkpoints */
	bool direct;
	unsigned reps;
	double duration;
	const char *json, *plot;
	bool keep, quiet;
	uint64_t seed;
	const struct bench_mode *modes[MAX_MODES];
	bool mprocs[MAX_MODES];          /* that mode's writers are processes */
	char mlabel[MAX_MODES][32];      /* "atomio", "atomio:procs" */
	unsigned nmodes;
	bool procs;                      /* --procs: the default for --modes entries */
};

struct result {
	const struct bench_mode *mode;
	const char *label; /* the mode's name, ":procs" after it for writer processes */
	bool procs;
	bool skipped;
	char skip[256];
	unsigned nrep;
	double rate[MAX_REPS], secs_rep[MAX_REPS];
	uint64_t ops_rep[MAX_REPS];
	uint64_t ops, user_bytes;
	double secs;
	struct hist lat;
	uint64_t waits, log_bytes, home_bytes, checkpoints, ckpt_bytes, log_syncs;
	uint64_t batches, log_full_waits;
	double cpu; /* seconds of CPU, this process and its writer processes */
	uint64_t ckpt_slice_min; /* fewest checkpoints in one slice (UINT64_MAX: none yet) */
	double ckpt_secs;  /* time with a checkpoint running while the writers wrote (sampled) */
	uint64_t ckpt_ends; /* checkpoints that ended while the writers wrote */
	struct hist probe; /* the device's own durable writes of its mean log write (bench_probe.c) */
	uint64_t probe_bytes; /* their bytes, all slices */
	bool dev_ok, proc_ok;
	uint64_t dev_bytes, dev_ios, dev_flushes, proc_bytes;
	double ops_median;
};

struct config {
	unsigned threads, ranges;
	size_t page;
	double theta;       /* 0 = uniform */
	unsigned comp;      /* percent compressible */
	double *cdf;        /* zipfian: by rank, file_size/page entries */
	double slice;
	struct result res[MAX_MODES];
};

/* What the writers share with this process, threads or processes: in
 * shared memory mapped once, before any writer process is forked. */
struct ctl {
	_Atomic int stop;       /* the slice is over, a writer failed, or a signal came */
	_Atomic unsigned ready; /* writer processes attached, waiting for go */
	_Atomic uint32_t go;    /* they start (a futex word) */
};

/* bench_slice.c: the writers and their slices, the machine */
extern struct ctl *bench_ctl;
extern volatile sig_atomic_t bench_interrupted;
extern bool bench_run_dir_made;  /* bench_run_dir exists: remove it at exit */
extern bool bench_progress_tty;
extern char bench_probe_err[300]; /* why there is no device probe, when there is none */
extern long bench_cpus_online;
extern char bench_cpu_model[128];
void on_signal(int sig);
uint64_t bench_rnd(uint64_t *s);
double *zipf_cdf(uint64_t n, double theta);
void release_writers(void);
void progress_clear(const struct opts *o);
void cpu_info(void);
size_t log_write_blocks(uint64_t log_bytes, uint64_t batches);
void bench_probe_done(void);
double probe_mean_us(const struct result *r);
void run_slice(const struct opts *o, struct config *cfg, struct result *res, void *state,
	       const struct bench_env *env, const struct blk_info *blk, unsigned rep, unsigned step,
	       unsigned nsteps);
double bench_median(const double *v, unsigned n);
double bench_minv(const double *v, unsigned n);
double bench_maxv(const double *v, unsigned n);

/* bench_report.c: the table and the JSON */
extern FILE *bench_json_stdout;
extern double bench_load_start[3]; /* load average when the run began */
extern bool bench_load_ok;
extern int bench_argc;
extern char **bench_argv;
void print_table(const struct opts *o, const struct config *c);
void write_json(const struct opts *o, const char *path, const struct config *cfgs, unsigned ncfg,
		const struct mount_info *m, const struct blk_info *b, double slice_total);

/* bench_opts.c */
void bench_parse(int argc, char **argv, struct opts *o);

/* bench.c: the run's directory */
extern char bench_run_dir[PATH_MAX];

#endif
