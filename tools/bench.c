/*
 * bench.c: `atomio bench [DIR]` -- a fio-like benchmark of atomic page
 * writes, every mode interleaved in one run so that they are comparable.
 *
 * For each configuration (threads x page size x ranges per group), each
 * repetition runs every mode for the same time slice, in an order rotated by
 * one mode per repetition, so that drift on a shared machine hits all modes
 * alike.  A slice is bracketed by counters: the device's own (/sys/.../stat:
 * sectors written, write requests, flushes), the process's (/proc/self/io
 * write_bytes) and the mode's durability waits.  ops/s is the median over
 * repetitions; latency percentiles are over every op of every repetition.
 *
 * A mode's writers are threads of this process, or with --procs (or
 * MODE:procs in --modes) processes of one writer each: forked for each
 * slice from this process, after the mode's setup; each makes its own state
 * (the mode's attach: its own descriptors, its own store handle joining the
 * store) before the slice starts, and writes its ops and latency histogram
 * to shared memory mapped before the fork.  The device's counters are the
 * device's; /proc/self/io counts the writer processes too once they are
 * reaped (the kernel adds a reaped child's I/O to its parent's), which
 * happens before a slice's closing sample; CPU time is this process's plus
 * each writer process's own while it wrote (getrusage in it).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/futex.h>
#include <time.h>
#include <unistd.h>

#include "atomio.h"
#include "bench.h"
#include "cli.h"
#include "format.h" /* DEFAULT_LOG_SIZE */

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

/* --- the run ---------------------------------------------------------------- */

/* What the writers share with this process, threads or processes: in
 * shared memory mapped once, before any writer process is forked. */
struct ctl {
	_Atomic int stop;       /* the slice is over, a writer failed, or a signal came */
	_Atomic unsigned ready; /* writer processes attached, waiting for go */
	_Atomic uint32_t go;    /* they start (a futex word) */
};
static struct ctl *ctl;
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
	atomic_store(&ctl->stop, 1);
}

/* One writer's results, written by it (a thread, or a process through
 * shared memory), read here after it is done. */
struct wout {
	_Alignas(64) _Atomic uint64_t ops; /* (each writer's on lines of its own) */
	double cpu; /* a writer process: CPU seconds of its ops (all its threads) */
	int err;
	char why[512];
	struct hist lat;
};

struct worker {
	pthread_t tid;
	pid_t pid; /* a writer process (--procs) until it is reaped, else 0 */
	unsigned id;
	const struct bench_mode *mode;
	void *state;
	const struct bench_env *env;
	pthread_barrier_t *start;
	uint64_t rng;
	struct bench_range *r;
	void **bufs;
	struct wout *out;
};

static uint64_t rnd(uint64_t *s)
{
	/* splitmix64: fast, and good enough to pick pages */
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Zipfian popularity: cdf[k] = P(rank <= k) with P(rank k) proportional to
 * 1/(k+1)^theta, for the n pages of a file.  Exact for any theta (a table
 * and a binary search per draw, not the YCSB approximation, which needs
 * theta < 1). */
static double *zipf_cdf(uint64_t n, double theta)
{
	double *c = malloc(n * sizeof(double));
	if (!c)
		cli_die(EX_ERROR, "out of memory");
	double sum = 0;
	for (uint64_t k = 0; k < n; k++)
		c[k] = sum += pow((double)(k + 1), -theta);
	for (uint64_t k = 0; k < n; k++)
		c[k] /= sum;
	c[n - 1] = 1.0;
	return c;
}

/* A page of the file: uniform, or zipfian by rank.  Ranks are spread over
 * the file (rank * a large prime mod n, a bijection when the prime does not
 * divide n) so that hot pages are not all neighbours. */
static uint64_t pick_page(struct worker *w, uint64_t pages)
{
	const struct bench_env *env = w->env;
	if (!env->cdf)
		return rnd(&w->rng) % pages;
	double u = (double)(rnd(&w->rng) >> 11) * 0x1p-53;
	uint64_t lo = 0, hi = pages - 1;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (env->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	const uint64_t prime = 2654435761ull;
	return pages % prime ? (uint64_t)(((unsigned __int128)lo * prime) % pages) : lo;
}

/* The workload: which pages a group writes and what bytes (page popularity
 * uniform or zipfian; the bytes are made once per slice, compressible as
 * asked, with a fresh stamp at the head of each page per op). */
static void next_group(struct worker *w, struct bench_group *g, uint64_t opno)
{
	const struct bench_env *env = w->env;
	uint64_t pages = env->file_size / env->page;
	for (unsigned i = 0; i < env->ranges; i++) {
		unsigned f;
		uint64_t pg;
		bool dup;
		do {
			f = env->nfiles > 1 ? (unsigned)(rnd(&w->rng) % env->nfiles) : 0;
			pg = pick_page(w, pages);
			dup = false;
			for (unsigned k = 0; k < i && !dup; k++)
				dup = w->r[k].file == f && w->r[k].off == pg * env->page;
		} while (dup && (uint64_t)env->ranges <= pages * env->nfiles / 2);
		w->r[i].file = f;
		w->r[i].off = pg * env->page;
		/* new bytes each time: a stamp at the head of the page */
		uint64_t stamp[2] = {opno, ((uint64_t)w->id << 32) | i};
		memcpy(w->bufs[i], stamp, sizeof(stamp));
		w->r[i].buf = w->bufs[i];
	}
	g->n = env->ranges;
	g->r = w->r;
}

/* A writer's ops until the slice is over. */
static void worker_loop(struct worker *w)
{
	struct wout *out = w->out;
	struct bench_group g;
	uint64_t n = 0;
	while (!atomic_load_explicit(&ctl->stop, memory_order_relaxed)) {
		next_group(w, &g, n);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int r = w->mode->op(w->state, w->id, &g, out->why, sizeof(out->why));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (r < 0) {
			out->err = r;
			atomic_store(&ctl->stop, 1);
			break;
		}
		int64_t ns = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
		hist_add(&out->lat, ns > 0 ? (uint64_t)ns : 0);
		atomic_store_explicit(&out->ops, ++n, memory_order_relaxed);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	pthread_barrier_wait(w->start);
	worker_loop(w);
	return NULL;
}

static void futex_wait(_Atomic uint32_t *word, uint32_t val)
{
	syscall(SYS_futex, word, FUTEX_WAIT, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* CPU seconds (user and system) of this process, every thread (RUSAGE_SELF). */
static double cpu_seconds(int who)
{
	struct rusage u;
	if (getrusage(who, &u) < 0)
		return NAN;
	return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
	       (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static bool run_dir_made;

/* A writer process (--procs), forked for one slice: its own state made
 * from setup's (the mode's attach), then, once every writer is ready, ops
 * until the slice is over, then its part finished (detach).  It never
 * returns: _exit, so that the parent's exit handlers (the run directory's
 * removal) and stdio buffers stay the parent's. */
static _Noreturn void writer_process(struct worker *w, void *state)
{
	run_dir_made = false; /* not this process's to remove, even on a stray exit() */
	struct wout *out = w->out;
	void *own = NULL;
	int r = w->mode->attach(w->env, state, &own, out->why, sizeof(out->why));
	if (r < 0) {
		out->err = r;
		atomic_store(&ctl->stop, 1);
	}
	atomic_fetch_add(&ctl->ready, 1);
	while (!atomic_load(&ctl->go))
		futex_wait(&ctl->go, 0);
	if (r == 0) {
		w->state = own;
		double c0 = cpu_seconds(RUSAGE_SELF);
		worker_loop(w);
		out->cpu = cpu_seconds(RUSAGE_SELF) - c0;
		char why[512];
		r = w->mode->detach(own, why, sizeof(why));
		if (r < 0 && !out->err) {
			out->err = r;
			snprintf(out->why, sizeof(out->why), "%s", why);
			atomic_store(&ctl->stop, 1);
		}
	}
	_exit(0);
}

/* At exit (a usage of cli_die while writer processes wait): let them go;
 * they see the stop flag and end. */
static void release_writers(void)
{
	if (!ctl)
		return;
	atomic_store(&ctl->stop, 1);
	atomic_store(&ctl->go, 1);
	futex_wake(&ctl->go);
}

static void sample(const struct blk_info *b, struct dev_counters *d, bool *proc_ok, uint64_t *proc)
{
	host_dev_counters(b, d);
	*proc_ok = host_proc_write_bytes(proc);
}

static bool progress_tty;

static void progress(const struct opts *o, const char *line)
{
	if (o->quiet)
		return;
	if (progress_tty)
		fprintf(stderr, "\r%-78.78s", line);
	else
		fprintf(stderr, "%s\n", line);
}

static void progress_clear(const struct opts *o)
{
	if (!o->quiet && progress_tty)
		fprintf(stderr, "\r%78s\r", "");
}

/* A page's bytes: random, then in every 512 bytes the last comp% zeros (as
 * fio's buffer_compress_percentage): lz4 and zstd keep 1 - comp/100 of
 * them, plus a little. */
static void fill_page(char *buf, size_t page, unsigned comp, uint64_t seed)
{
	uint64_t s = seed;
	for (size_t k = 0; k + 8 <= page; k += 8) {
		uint64_t v = rnd(&s);
		memcpy(buf + k, &v, 8);
	}
	size_t z = 512 * comp / 100;
	for (size_t k = 0; z && k + 512 <= page; k += 512)
		memset(buf + k + 512 - z, 0, z);
}

/* One slice's writers: threads, or processes (res->procs). */
struct slice {
	struct worker *ws;
	struct wout *outs; /* shared memory: one per writer */
	size_t outs_size;
	unsigned n;
	bool procs;
	pthread_barrier_t start; /* threads */
};

/* Wait until every writer process has attached (or failed to: its error is
 * in its wout); dies if one ended before it got there. */
static void wait_ready(struct slice *sl, const struct result *res)
{
	while (atomic_load(&ctl->ready) < sl->n) {
		for (unsigned k = 0; k < sl->n; k++) {
			int status;
			if (sl->ws[k].pid > 0 && waitpid(sl->ws[k].pid, &status, WNOHANG) == sl->ws[k].pid) {
				sl->ws[k].pid = 0;
				cli_die(EX_ERROR, "%s mode: writer process %u ended before the slice started (%s %d)",
					res->label, k, WIFSIGNALED(status) ? "signal" : "exit status",
					WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			}
		}
		struct timespec ts = {0, 1000000L};
		nanosleep(&ts, NULL);
	}
}

/* The slice's writers, each with its own seed and page buffers: threads
 * waiting at the start barrier, or processes forked now, attached (their
 * own descriptors, their own store handle) and waiting for go. */
static void start_workers(struct slice *sl, const struct opts *o, const struct config *cfg,
			  const struct result *res, void *state, const struct bench_env *env, unsigned rep,
			  unsigned step)
{
	unsigned T = cfg->threads;
	sl->n = T;
	sl->procs = res->procs;
	sl->ws = calloc(T, sizeof(*sl->ws));
	sl->outs_size = T * sizeof(struct wout);
	sl->outs = mmap(NULL, sl->outs_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!sl->ws || sl->outs == MAP_FAILED)
		cli_die(EX_ERROR, "out of memory");
	if (!sl->procs)
		pthread_barrier_init(&sl->start, NULL, T + 1);
	atomic_store(&ctl->stop, interrupted ? 1 : 0);
	atomic_store(&ctl->ready, 0);
	atomic_store(&ctl->go, 0);
	fflush(NULL); /* nothing buffered is written twice by a writer process */
	for (unsigned t = 0; t < T; t++) {
		struct worker *w = &sl->ws[t];
		w->id = t;
		w->mode = res->mode;
		w->state = state;
		w->env = env;
		w->start = &sl->start;
		w->out = &sl->outs[t];
		w->rng = o->seed ^ ((uint64_t)(t + 1) << 40) ^ ((uint64_t)rep << 20) ^ step;
		hist_reset(&w->out->lat);
		w->r = calloc(cfg->ranges, sizeof(*w->r));
		w->bufs = calloc(cfg->ranges, sizeof(void *));
		if (!w->r || !w->bufs)
			cli_die(EX_ERROR, "out of memory");
		for (unsigned i = 0; i < cfg->ranges; i++) {
			if (posix_memalign(&w->bufs[i], 4096, cfg->page))
				cli_die(EX_ERROR, "out of memory");
			fill_page(w->bufs[i], cfg->page, cfg->comp, w->rng ^ i);
		}
		if (sl->procs) {
			w->pid = fork();
			if (w->pid < 0)
				cli_die(EX_ERROR, "fork: %s", strerror(errno));
			if (w->pid == 0)
				writer_process(w, state);
		} else {
			int e = pthread_create(&w->tid, NULL, worker_main, w);
			if (e)
				cli_die(EX_ERROR, "creating a thread: %s", strerror(e));
		}
	}
	if (sl->procs)
		wait_ready(sl, res);
}

/* Every writer starts now. */
static void go(struct slice *sl)
{
	if (!sl->procs) {
		pthread_barrier_wait(&sl->start);
		return;
	}
	atomic_store(&ctl->go, 1);
	futex_wake(&ctl->go);
}

static uint64_t slice_ops(const struct slice *sl)
{
	uint64_t ops = 0;
	for (unsigned k = 0; k < sl->n; k++)
		ops += atomic_load(&sl->outs[k].ops);
	return ops;
}

/* Until the slice is over (or a worker failed, or a signal came), with a
 * progress line on a terminal.  A mode that checkpoints (atomio) runs on
 * past the slice until it has checkpointed min_ckpts times, up to 10
 * slices: a slice without its checkpoints would leave out the stalls they
 * cause.  ops/s is per second of the slice, so a longer one compares the same. */
static void wait_slice(const struct opts *o, const struct config *cfg, const struct result *res, void *state,
		       const struct slice *sl, const struct mode_counters *m0, double t0, unsigned rep,
		       unsigned step, unsigned nsteps)
{
	double until = cfg->slice;
	for (;;) {
		double t = now_sec();
		if (atomic_load(&ctl->stop))
			break;
		if (t - t0 >= until) {
			struct mode_counters mc;
			res->mode->counters(state, &mc);
			bool done = res->mode->begin ? mc.log_bytes - m0->log_bytes >= o->log_size
						     : mc.checkpoints - m0->checkpoints >= o->min_ckpts;
			if (!res->mode->finish || done || t - t0 >= 10 * cfg->slice)
				break;
			until = t - t0 + 0.05;
		}
		double left = until - (t - t0);
		struct timespec ts = {0, (long)((left < 0.25 ? left : 0.25) * 1e9)};
		nanosleep(&ts, NULL);
		if (progress_tty && !o->quiet) {
			char line[128];
			snprintf(line, sizeof(line), "[%u/%u] rep %u/%u  %-12s %5.1f/%.1f s  %8.0f ops/s",
				 step, nsteps, rep + 1, o->reps, res->label, now_sec() - t0,
				 cfg->slice, (double)slice_ops(sl) / (now_sec() - t0));
			progress(o, line);
		}
	}
}

/* --- the machine: the device's own log writes, the CPUs -------------------------- */

/* The device probe (bench_probe.c): after each slice of a log mode, a few
 * durable writes of the slice's mean log write, so that the device's own
 * time for them is measured beside the mode, under the same load. */
#define PROBE_SPAN (32u << 20)
#define PROBE_MAX (4u << 20)
static struct bench_probe probe;
static bool probe_open;
static char run_dir[PATH_MAX]; /* (below: the run's directory) */
static char probe_err[300]; /* why there is no probe, when there is none */
static long cpus_online;
static char cpu_model[128];

static void cpu_info(void)
{
	cpus_online = sysconf(_SC_NPROCESSORS_ONLN);
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':');
		if (strncmp(line, "model name", 10) || !c)
			continue;
		c += 1 + strspn(c + 1, " \t");
		c[strcspn(c, "\n")] = 0;
		snprintf(cpu_model, sizeof(cpu_model), "%s", c);
		break;
	}
	if (f)
		fclose(f);
}

/* A mean log write, in whole 4 KiB blocks (what a write of it puts on the
 * device), at most PROBE_MAX; 0 when there was none. */
static size_t log_write_blocks(uint64_t log_bytes, uint64_t batches)
{
	if (!batches || !log_bytes)
		return 0;
	uint64_t m = (log_bytes + batches - 1) / batches;
	m = (m + 4095) / 4096 * 4096;
	return m > PROBE_MAX ? PROBE_MAX : (size_t)m;
}

/* Up to 100 durable writes of size bytes, or 0.1 s, into res->probe. */
static void probe_slice(struct result *res, size_t size)
{
	if (!size || probe_err[0])
		return;
	if (!probe_open) {
		if (bench_probe_open(&probe, run_dir, PROBE_SPAN, probe_err, sizeof(probe_err)) < 0)
			return;
		probe_open = true;
	}
	uint64_t n0 = res->probe.count;
	if (bench_probe_run(&probe, size, 100, 0.1, &res->probe, probe_err, sizeof(probe_err)) < 0) {
		bench_probe_close(&probe);
		probe_open = false;
	}
	res->probe_bytes += (res->probe.count - n0) * size;
}

static void probe_done(void)
{
	if (probe_open)
		bench_probe_close(&probe);
	probe_open = false;
}

static double probe_mean_us(const struct result *r)
{
	return r->probe.count ? r->probe.sum / (double)r->probe.count / 1e3 : NAN;
}

/* Checkpoint time in the window, from the store's counters (atomio_stats):
 * sampled every CKPT_POLL_NS while the writers write.  A checkpoint begins
 * when bytes_checkpointed grows (it counts what the checkpoint is to make
 * durable as it starts) and ends when checkpoints grows; the time between is
 * counted, to within one poll at each end (a checkpoint that began and
 * ended between two polls counts half a poll). */
#define CKPT_POLL_NS 2000000L
struct ckpt_sampler {
	pthread_t tid;
	bool running;
	_Atomic int stop;
	const struct bench_mode *mode;
	void *state;
	double secs;
	uint64_t ends;
};

static void *ckpt_sample(void *arg)
{
	struct ckpt_sampler *c = arg;
	struct mode_counters m;
	c->mode->counters(c->state, &m);
	uint64_t began = m.ckpt_bytes, ended = m.checkpoints;
	bool in = false;
	double t_prev = now_sec(), t_begin = 0;
	for (bool last = false; !last;) {
		/* a last look once told to stop: what ended since the last poll
		 * is the window's */
		last = atomic_load(&c->stop);
		struct timespec ts = {0, CKPT_POLL_NS};
		if (!last)
			nanosleep(&ts, NULL);
		c->mode->counters(c->state, &m);
		double t = now_sec();
		bool b = m.ckpt_bytes != began, e = m.checkpoints != ended;
		double mid = t - (t - t_prev) / 2; /* a change seen now happened about then */
		if (e) {
			c->ends += m.checkpoints - ended;
			/* one seen beginning ends; or one began and ended within the interval */
			c->secs += in ? mid - t_begin : (t - t_prev) / 2;
			/* one seen running ended, and the next began, within the interval */
			in = in && b;
			t_begin = mid;
		} else if (b && !in) {
			in = true;
			t_begin = mid;
		}
		began = m.ckpt_bytes;
		ended = m.checkpoints;
		t_prev = t;
	}
	if (in)
		c->secs += now_sec() - t_begin;
	return NULL;
}

/* Stop the writers (join the threads, reap the processes, which have
 * detached: closed their store handles, reaped their asynchronous groups);
 * dies on a mode error. */
static void stop_workers(struct slice *sl, const struct result *res)
{
	atomic_store(&ctl->stop, 1);
	for (unsigned k = 0; k < sl->n; k++) {
		struct worker *w = &sl->ws[k];
		if (!sl->procs) {
			pthread_join(w->tid, NULL);
			continue;
		}
		int status;
		pid_t p;
		while ((p = waitpid(w->pid, &status, 0)) < 0 && errno == EINTR)
			;
		if (p < 0)
			cli_die(EX_ERROR, "%s mode: waiting for writer process %u: %s", res->label, k,
				strerror(errno));
		w->pid = 0;
		if (WIFSIGNALED(status))
			cli_die(EX_ERROR, "%s mode: writer process %u killed by signal %d", res->label, k,
				WTERMSIG(status));
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			cli_die(EX_ERROR, "%s mode: writer process %u exited with status %d", res->label, k,
				WEXITSTATUS(status));
	}
	for (unsigned k = 0; k < sl->n; k++)
		if (sl->outs[k].err)
			cli_die(EX_ERROR, "%s mode: %s", res->label, sl->outs[k].why);
}

/* Make durable what the mode deferred (its final checkpoint); dies on a
 * mode error. */
static void finish_mode(const struct result *res, void *state)
{
	if (res->mode->finish) {
		char why[512];
		if (res->mode->finish(state, why, sizeof(why)) < 0)
			cli_die(EX_ERROR, "%s mode: %s", res->label, why);
	}
}

/* The slice's ops, their latencies merged into res; the workers freed. */
static uint64_t free_workers(struct slice *sl, const struct config *cfg, struct result *res)
{
	uint64_t ops = slice_ops(sl);
	for (unsigned k = 0; k < sl->n; k++) {
		hist_merge(&res->lat, &sl->outs[k].lat);
		for (unsigned i = 0; i < cfg->ranges; i++)
			free(sl->ws[k].bufs[i]);
		free(sl->ws[k].bufs);
		free(sl->ws[k].r);
	}
	if (!sl->procs)
		pthread_barrier_destroy(&sl->start);
	munmap(sl->outs, sl->outs_size);
	free(sl->ws);
	return ops;
}

/* The counters around a slice: the device's, the process's, the mode's. */
struct slice_counters {
	struct dev_counters d;
	bool proc_ok;
	uint64_t proc;
	double cpu;
	struct mode_counters m;
};

/* One slice's counts added to res. */
static void add_slice(struct result *res, const struct config *cfg, uint64_t ops, double secs,
		      const struct slice_counters *c0, const struct slice_counters *c1)
{
	const struct mode_counters *m0 = &c0->m, *m1 = &c1->m;
	unsigned i = res->nrep++;
	res->ops_rep[i] = ops;
	res->secs_rep[i] = secs;
	res->rate[i] = (double)ops / secs;
	res->ops += ops;
	res->secs += secs;
	res->user_bytes += ops * cfg->ranges * cfg->page;
	res->waits += m1->waits - m0->waits;
	res->log_bytes += m1->log_bytes - m0->log_bytes;
	res->home_bytes += m1->home_bytes - m0->home_bytes;
	res->checkpoints += m1->checkpoints - m0->checkpoints;
	res->ckpt_bytes += m1->ckpt_bytes - m0->ckpt_bytes;
	res->log_syncs += m1->log_syncs - m0->log_syncs;
	res->batches += m1->batches - m0->batches;
	res->log_full_waits += m1->log_full_waits - m0->log_full_waits;
	res->cpu += c1->cpu - c0->cpu;
	if (res->mode->finish) {
		/* the checkpoints the ops ran with (the slice's final one not counted) */
		uint64_t ck = m1->checkpoints - m0->checkpoints;
		ck = ck ? ck - 1 : 0;
		if (i == 0 || ck < res->ckpt_slice_min)
			res->ckpt_slice_min = ck;
	}
	res->dev_ok = c0->d.ok && c1->d.ok && (i == 0 || res->dev_ok);
	res->dev_bytes += (c1->d.write_sectors - c0->d.write_sectors) * 512;
	res->dev_ios += c1->d.write_ios - c0->d.write_ios;
	res->dev_flushes += c1->d.flushes - c0->d.flushes;
	res->proc_ok = c0->proc_ok && c1->proc_ok && (i == 0 || res->proc_ok);
	res->proc_bytes += c1->proc - c0->proc;
}

/* Run one mode for one slice; add to res.  Dies on a mode error. */
static void run_slice(const struct opts *o, struct config *cfg, struct result *res, void *state,
		      const struct bench_env *env, const struct blk_info *blk, unsigned rep,
		      unsigned step, unsigned nsteps)
{
	char why[512];
	if (res->mode->begin && res->mode->begin(state, why, sizeof(why)) < 0)
		cli_die(EX_ERROR, "%s mode: %s", res->mode->name, why);
	struct slice sl;
	start_workers(&sl, o, cfg, res, state, env, rep, step);
	struct slice_counters c0 = {0}, c1 = {0};
	sample(blk, &c0.d, &c0.proc_ok, &c0.proc);
	res->mode->counters(state, &c0.m);
	c0.cpu = cpu_seconds(RUSAGE_SELF);
	go(&sl);
	double t0 = now_sec();
	struct ckpt_sampler cs = {.mode = res->mode, .state = state};
	if (res->mode->finish)
		cs.running = pthread_create(&cs.tid, NULL, ckpt_sample, &cs) == 0;
	wait_slice(o, cfg, res, state, &sl, &c0.m, t0, rep, step, nsteps);
	stop_workers(&sl, res);
	/* the window ends when the last writer has stopped, before the mode's
	 * final checkpoint: a background checkpoint that ends while the
	 * writers are being joined (slow on a loaded machine) is the window's */
	if (cs.running) {
		atomic_store(&cs.stop, 1);
		pthread_join(cs.tid, NULL);
		res->ckpt_secs += cs.secs;
		res->ckpt_ends += cs.ends;
	}
	finish_mode(res, state);
	double secs = now_sec() - t0;
	res->mode->counters(state, &c1.m);
	sample(blk, &c1.d, &c1.proc_ok, &c1.proc);
	/* CPU: this process's (its threads' ops, the mode's finish) and each
	 * writer process's while it wrote (not its attach and detach) */
	c1.cpu = cpu_seconds(RUSAGE_SELF);
	for (unsigned k = 0; k < sl.n && sl.procs; k++)
		c1.cpu += sl.outs[k].cpu;
	uint64_t ops = free_workers(&sl, cfg, res);
	if (interrupted)
		return;
	add_slice(res, cfg, ops, secs, &c0, &c1);
	if (res->mode->finish)
		probe_slice(res, log_write_blocks(c1.m.log_bytes - c0.m.log_bytes, c1.m.batches - c0.m.batches));
	char line[160];
	snprintf(line, sizeof(line), "[%u/%u] rep %u/%u  %-12s %8.0f ops/s", step, nsteps, rep + 1,
		 o->reps, res->label, res->rate[res->nrep - 1]);
	if (!progress_tty)
		progress(o, line);
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(const double *v, unsigned n)
{
	if (!n)
		return NAN;
	double s[MAX_REPS];
	memcpy(s, v, n * sizeof(double));
	qsort(s, n, sizeof(double), cmpd);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double minv(const double *v, unsigned n)
{
	double m = INFINITY;
	for (unsigned i = 0; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

static double maxv(const double *v, unsigned n)
{
	double m = -INFINITY;
	for (unsigned i = 0; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

/* --- files --------------------------------------------------------------------- */

static int rm_cb(const char *p, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(p);
}

static char run_dir[PATH_MAX];
static bool keep_dir;

static void cleanup(void)
{
	if (run_dir_made && !keep_dir) {
		nftw(run_dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
		run_dir_made = false;
	}
}

/* Create a data file of size bytes, every block written for real (an
 * overwrite then needs no allocation, as in a database), and fsync it.
 * Written one page at a time: the page cache then holds page-sized folios,
 * as for an application that writes pages.  (Written in 1 MiB pieces, the
 * file would sit in large folios, and each buffered page write would dirty,
 * and sometimes read, far more than its page.) */
static void prefill(const char *path, uint64_t size, size_t page)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		cli_die(EX_ERROR, "creating %s: %s", path, strerror(errno));
	size_t chunk = 1 << 20;
	char *buf = malloc(chunk);
	if (!buf)
		cli_die(EX_ERROR, "out of memory");
	uint64_t s = 42;
	for (size_t k = 0; k + 8 <= chunk; k += 8) {
		uint64_t v = rnd(&s);
		memcpy(buf + k, &v, 8);
	}
	if (page < chunk)
		chunk = page;
	for (uint64_t off = 0; off < size;) {
		size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
		ssize_t w = pwrite(fd, buf, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			cli_die(EX_ERROR, "writing %s: %s", path, w < 0 ? strerror(errno) : "no progress");
		off += (uint64_t)w;
	}
	if (fsync(fd) < 0)
		cli_die(EX_ERROR, "fsync %s: %s", path, strerror(errno));
	close(fd);
	free(buf);
}

/* --- output ----------------------------------------------------------------------- */

/* A mode's result in c with writers of the kind asked for (procs), else
 * of the other kind; NULL if it did not run. */
static const struct result *find(const struct config *c, unsigned nm, const char *name, bool procs)
{
	const struct result *other = NULL;
	for (unsigned i = 0; i < nm; i++) {
		const struct result *r = &c->res[i];
		if (strcmp(r->mode->name, name) || r->skipped || !r->nrep)
			continue;
		if (r->procs == procs)
			return r;
		other = other ? other : r;
	}
	return other;
}

/* For writer processes: the same mode's result with threads, if it ran. */
static const struct result *find_threads(const struct config *c, unsigned nm, const struct result *r)
{
	if (!r->procs)
		return NULL;
	const struct result *t = find(c, nm, r->mode->name, false);
	return t && !t->procs ? t : NULL;
}

static double ratio(double a, const struct result *b) { return b ? a / b->ops_median : NAN; }

static void fmt_num(char *buf, size_t n, double v, const char *f)
{
	if (isfinite(v))
		snprintf(buf, n, f, v);
	else
		snprintf(buf, n, "-");
}

static void print_table(const struct opts *o, const struct config *c)
{
	char a[32];
	char pop[48];
	if (c->theta > 0)
		snprintf(pop, sizeof(pop), "zipfian %g", c->theta);
	else
		snprintf(pop, sizeof(pop), "uniform");
	bool any_procs = false, any_threads = false;
	int mw = 11; /* the mode column: as wide as the widest label */
	for (unsigned i = 0; i < o->nmodes; i++) {
		any_procs |= c->res[i].procs;
		any_threads |= !c->res[i].procs;
		mw = (int)strlen(c->res[i].label) > mw ? (int)strlen(c->res[i].label) : mw;
	}
	char who[64];
	if (any_procs && any_threads)
		snprintf(who, sizeof(who), "%u writer%s (threads; MODE:procs: processes)", c->threads,
			 c->threads == 1 ? "" : "s");
	else if (any_procs)
		snprintf(who, sizeof(who), "%u process%s of 1 writer", c->threads, c->threads == 1 ? "" : "es");
	else
		snprintf(who, sizeof(who), "%u thread%s", c->threads, c->threads == 1 ? "" : "s");
	printf("\n%zu-byte pages (%s), %u range%s per group, %s, %u file%s of %s per mode; "
	       "%s pages, %u%% compressible; %u x %.2f s per mode, interleaved\n",
	       c->page, fmt_bytes(a, sizeof(a), c->page), c->ranges, c->ranges == 1 ? "" : "s",
	       who, o->files, o->files == 1 ? "" : "s",
	       fmt_bytes((char[32]){0}, 32, o->file_size), pop, c->comp, o->reps, c->slice);
	printf("%-*s %9s %8s %8s %8s %9s %8s %8s %7s %7s %8s %9s\n", mw, "mode", "ops/s", "MB/s",
	       "p50 us", "p99 us", "p99.9 us", "max us", "waits/op", "dev B/B", "own B/B", "vs dblwr",
	       "vs unsafe");
	for (unsigned i = 0; i < o->nmodes; i++) {
		const struct result *r = &c->res[i];
		if (r->skipped || !r->nrep) {
			printf("%-*s skipped: %s\n", mw, r->label, r->skipped ? r->skip : "no time");
			continue;
		}
		/* against the baselines with writers of the same kind, where they ran */
		const struct result *dw = find(c, o->nmodes, "doublewrite", r->procs),
				    *un = find(c, o->nmodes, "unsafe", r->procs);
		char s[11][32];
		double opsb = (double)c->ranges * (double)c->page;
		fmt_num(s[0], 32, r->ops_median, "%.0f");
		fmt_num(s[1], 32, r->ops_median * opsb / 1e6, "%.1f");
		fmt_num(s[2], 32, hist_quantile(&r->lat, 0.50) / 1e3, "%.0f");
		fmt_num(s[3], 32, hist_quantile(&r->lat, 0.99) / 1e3, "%.0f");
		fmt_num(s[4], 32, hist_quantile(&r->lat, 0.999) / 1e3, "%.0f");
		fmt_num(s[5], 32, r->ops ? (double)r->waits / (double)r->ops : NAN, "%.2f");
		fmt_num(s[6], 32, r->dev_ok && r->user_bytes ? (double)r->dev_bytes / (double)r->user_bytes : NAN,
			"%.2f");
		fmt_num(s[7], 32,
			r->proc_ok && r->user_bytes ? (double)r->proc_bytes / (double)r->user_bytes : NAN,
			"%.2f");
		fmt_num(s[8], 32, ratio(r->ops_median, dw), "%.2fx");
		fmt_num(s[9], 32, ratio(r->ops_median, un), "%.2fx");
		fmt_num(s[10], 32, r->lat.count ? (double)r->lat.max / 1e3 : NAN, "%.0f");
		printf("%-*s %9s %8s %8s %8s %9s %8s %8s %7s %7s %8s %9s\n", mw, r->label, s[0], s[1],
		       s[2], s[3], s[4], s[10], s[5], s[6], s[7], s[8], s[9]);
	}
	for (unsigned i = 0; i < o->nmodes; i++) {
		const struct result *r = &c->res[i];
		if (r->skipped || !r->nrep || !r->mode->finish || !r->ops)
			continue;
		printf("%s: %.3f log syncs per commit (%.1f commits per log write); "
		       "%.0f s of slices with at least %" PRIu64 " checkpoints each\n",
		       r->label, (double)r->log_syncs / (double)r->ops,
		       r->log_syncs ? (double)r->ops / (double)r->log_syncs : 0.0, r->secs,
		       r->ckpt_slice_min);
	}
	for (unsigned i = 0; i < o->nmodes; i++) {
		const struct result *r = &c->res[i], *t;
		if (!r->skipped && r->nrep && (t = find_threads(c, o->nmodes, r)))
			printf("%s: %.2fx %s with %u threads\n", r->label, r->ops_median / t->ops_median,
			       t->label, c->threads);
	}
	/* what tells machines apart: the device's time for the same log
	 * writes, the checkpoints' share of the window, CPU per op */
	for (unsigned i = 0; i < o->nmodes; i++) {
		const struct result *r = &c->res[i];
		if (r->skipped || !r->nrep || !r->mode->finish || !r->batches || !(r->secs > 0))
			continue;
		double wps = (double)r->batches / r->secs;
		printf("%s: %.0f log writes/s of %s (mean)", r->label, wps,
		       fmt_bytes(a, sizeof(a), log_write_blocks(r->log_bytes, r->batches)));
		if (r->probe.count)
			printf("; the device alone (probe): %.0f us each (mean; p50 %.0f, p99 %.0f), %.0f/s "
			       "one at a time; busy %.0f%%",
			       probe_mean_us(r), hist_quantile(&r->probe, 0.5) / 1e3,
			       hist_quantile(&r->probe, 0.99) / 1e3, 1e6 / probe_mean_us(r),
			       100.0 * wps * probe_mean_us(r) / 1e6);
		printf("\n%s: checkpoints: %" PRIu64 " ended in %.1f s of writes, one running %.0f%% of the time"
		       " (%.0f ms each)\n",
		       r->label, r->ckpt_ends, r->secs, 100.0 * r->ckpt_secs / r->secs,
		       r->ckpt_ends ? 1e3 * r->ckpt_secs / (double)r->ckpt_ends : 0.0);
	}
	printf("CPU per op (us of CPU time, this process and its writer processes; %ld CPUs online):",
	       cpus_online);
	unsigned shown = 0;
	for (unsigned i = 0; i < o->nmodes; i++) {
		const struct result *r = &c->res[i];
		if (!r->skipped && r->nrep && r->ops)
			printf("%s %s %.1f", shown++ ? "," : "", r->label, r->cpu / (double)r->ops * 1e6);
	}
	printf("\n");
}

/* With --json -, standard output carries the JSON alone: the table goes to
 * standard error (json_to_stdout points stdout there and keeps this for the JSON). */
static FILE *json_stdout;
static double load_start[3]; /* load average when the run began */
static bool load_ok;
static int bench_argc;
static char **bench_argv;

/* What reproduces the run (the version, the command line, the seed) and
 * where it ran. */
static void json_provenance(struct json *j, const struct opts *o, const struct mount_info *m,
			    const struct blk_info *b, double slice_total)
{
	char ver[32], when[32];
	snprintf(ver, sizeof(ver), "%d.%d.%d", ATOMIO_VERSION_MAJOR, ATOMIO_VERSION_MINOR, ATOMIO_VERSION_PATCH);
	json_str(j, "atomio_version", ver);
	json_arr(j, "argv");
	for (int i = 0; i < bench_argc; i++)
		json_str(j, NULL, bench_argv[i]);
	json_end_arr(j);
	json_uint(j, "seed", o->seed);
	time_t t = time(NULL);
	struct tm tm;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	json_str(j, "timestamp", when);
	json_str(j, "filesystem", m->found ? m->fstype : "unknown");
	json_bool(j, "direct", o->direct);
	json_str(j, "device", b->found ? b->name : NULL);
	json_str(j, "device_backing_file", b->backing[0] ? b->backing : NULL);
	json_str(j, "dir", o->dir);
	char k[128];
	json_str(j, "kernel", host_kernel(k, sizeof(k)));
	json_uint(j, "files", o->files);
	json_uint(j, "file_size", o->file_size);
	json_uint(j, "log_size", o->log_size);
	json_uint(j, "ckpt_percent", o->ckpt_percent ? o->ckpt_percent : 50);
	json_uint(j, "repetitions", o->reps);
	json_num(j, "duration", slice_total);
	json_bool(j, "procs", o->procs);
	/* the machine's load (1, 5, 15 minutes) when the run began and ended */
	double end[3];
	bool ok = getloadavg(end, 3) == 3;
	json_arr(j, "load_average_start");
	for (int i = 0; i < 3; i++)
		json_num(j, NULL, load_ok ? load_start[i] : NAN);
	json_end_arr(j);
	json_arr(j, "load_average_end");
	for (int i = 0; i < 3; i++)
		json_num(j, NULL, ok ? end[i] : NAN);
	json_end_arr(j);
	json_num(j, "cpus_online", cpus_online > 0 ? (double)cpus_online : NAN);
	json_str(j, "cpu_model", cpu_model[0] ? cpu_model : NULL);
	json_str(j, "device_probe_error", probe_err[0] ? probe_err : NULL);
}

/* A run's configuration, rate, latency and waits, and its ratios to the baselines. */
static void json_run_rates(struct json *j, const struct config *cf, const struct result *r,
			   const struct result *dw, const struct result *un, const struct result *thr)
{
	double ub = (double)r->user_bytes;
	json_str(j, "mode", r->mode->name);
	json_str(j, "writers", r->procs ? "processes" : "threads");
	json_uint(j, "threads", cf->threads);
	json_uint(j, "page_size", cf->page);
	json_uint(j, "ranges_per_group", cf->ranges);
	json_str(j, "popularity", cf->theta > 0 ? "zipfian" : "uniform");
	json_num(j, "zipf_theta", cf->theta);
	json_uint(j, "compressible_pct", cf->comp);
	json_num(j, "ops_per_sec", r->ops_median);
	/* bytes, not MB or MiB: the table's MB/s is this / 10^6 */
	json_num(j, "bytes_per_sec", r->ops_median * cf->ranges * (double)cf->page);
	json_num(j, "p50_us", hist_quantile(&r->lat, 0.50) / 1e3);
	json_num(j, "p99_us", hist_quantile(&r->lat, 0.99) / 1e3);
	json_num(j, "p999_us", hist_quantile(&r->lat, 0.999) / 1e3);
	json_num(j, "mean_us", r->lat.count ? r->lat.sum / (double)r->lat.count / 1e3 : NAN);
	json_num(j, "max_us", r->lat.count ? (double)r->lat.max / 1e3 : NAN);
	json_num(j, "syncs_per_op", r->ops ? (double)r->waits / (double)r->ops : NAN);
	json_num(j, "cpu_us_per_op", r->ops ? r->cpu / (double)r->ops * 1e6 : NAN);
	if (r->mode->finish) {
		json_num(j, "log_syncs_per_op", r->ops ? (double)r->log_syncs / (double)r->ops : NAN);
		json_num(j, "groups_per_batch", r->batches ? (double)r->ops / (double)r->batches : NAN);
		json_uint(j, "log_full_waits", r->log_full_waits);
		json_uint(j, "checkpoints_per_slice_min", r->ckpt_slice_min);
		/* the machine: the device's time for the same log writes, the checkpoints' */
		double wps = r->secs > 0 ? (double)r->batches / r->secs : NAN;
		json_num(j, "log_writes_per_sec", wps);
		json_num(j, "log_write_bytes_mean", r->batches ? (double)r->log_bytes / (double)r->batches : NAN);
		json_uint(j, "device_probe_writes", r->probe.count);
		json_num(j, "device_probe_write_bytes",
			 r->probe.count ? (double)r->probe_bytes / (double)r->probe.count : NAN);
		json_num(j, "device_log_write_us", probe_mean_us(r));
		json_num(j, "device_log_write_p50_us", hist_quantile(&r->probe, 0.5) / 1e3);
		json_num(j, "device_log_write_p99_us", hist_quantile(&r->probe, 0.99) / 1e3);
		json_num(j, "device_log_busy_fraction", wps * probe_mean_us(r) / 1e6);
		json_num(j, "checkpoint_seconds", r->ckpt_secs);
		json_uint(j, "checkpoints_in_window", r->ckpt_ends);
		json_num(j, "checkpoint_time_fraction", r->secs > 0 ? r->ckpt_secs / r->secs : NAN);
	}
	json_num(j, "device_bytes_per_user_byte", r->dev_ok && ub > 0 ? (double)r->dev_bytes / ub : NAN);
	json_num(j, "process_bytes_per_user_byte", r->proc_ok && ub > 0 ? (double)r->proc_bytes / ub : NAN);
	json_num(j, "device_flushes_per_op", r->dev_ok && r->ops ? (double)r->dev_flushes / (double)r->ops : NAN);
	json_num(j, "device_writes_per_op", r->dev_ok && r->ops ? (double)r->dev_ios / (double)r->ops : NAN);
	json_num(j, "ops_vs_doublewrite", ratio(r->ops_median, dw));
	json_num(j, "ops_vs_unsafe", ratio(r->ops_median, un));
	if (r->procs)
		json_num(j, "ops_vs_threads", ratio(r->ops_median, thr));
}

/* A run's totals: ops, bytes (the log's and the checkpoints' where the mode
 * has them), device and process counters, and each repetition's. */
static void json_run_totals(struct json *j, const struct result *r)
{
	double ub = (double)r->user_bytes;
	json_uint(j, "ops", r->ops);
	json_num(j, "seconds", r->secs);
	json_uint(j, "user_bytes", r->user_bytes);
	json_uint(j, "syncs", r->waits);
	if (r->log_bytes || r->home_bytes) {
		json_uint(j, "log_bytes", r->log_bytes);
		json_uint(j, "home_bytes", r->home_bytes);
		json_uint(j, "checkpoints", r->checkpoints);
		json_uint(j, "checkpointed_bytes", r->ckpt_bytes);
		json_uint(j, "log_syncs", r->log_syncs);
		json_uint(j, "batches", r->batches);
		json_num(j, "log_bytes_per_user_byte", ub > 0 ? (double)r->log_bytes / ub : NAN);
		json_num(j, "checkpointed_bytes_per_user_byte", ub > 0 ? (double)r->ckpt_bytes / ub : NAN);
	}
	if (r->dev_ok) {
		json_uint(j, "device_bytes", r->dev_bytes);
		json_uint(j, "device_writes", r->dev_ios);
		json_uint(j, "device_flushes", r->dev_flushes);
	} else {
		json_null(j, "device_bytes");
		json_null(j, "device_writes");
		json_null(j, "device_flushes");
	}
	if (r->proc_ok)
		json_uint(j, "process_bytes", r->proc_bytes);
	else
		json_null(j, "process_bytes");
	json_arr(j, "rep_ops");
	for (unsigned q = 0; q < r->nrep; q++)
		json_uint(j, NULL, r->ops_rep[q]);
	json_end_arr(j);
	json_arr(j, "rep_seconds");
	for (unsigned q = 0; q < r->nrep; q++)
		json_num(j, NULL, r->secs_rep[q]);
	json_end_arr(j);
	json_arr(j, "rep_ops_per_sec");
	for (unsigned q = 0; q < r->nrep; q++)
		json_num(j, NULL, r->rate[q]);
	json_end_arr(j);
}

/* The modes that could not run, and why. */
static void json_skipped(struct json *j, const struct opts *o, const struct config *cfgs, unsigned ncfg)
{
	json_arr(j, "skipped");
	for (unsigned c = 0; c < ncfg; c++)
		for (unsigned i = 0; i < o->nmodes; i++) {
			const struct result *r = &cfgs[c].res[i];
			if (!r->skipped)
				continue;
			json_obj(j, NULL);
			json_str(j, "mode", r->mode->name);
			json_str(j, "writers", r->procs ? "processes" : "threads");
			json_uint(j, "threads", cfgs[c].threads);
			json_uint(j, "page_size", cfgs[c].page);
			json_uint(j, "ranges_per_group", cfgs[c].ranges);
			json_num(j, "zipf_theta", cfgs[c].theta);
			json_uint(j, "compressible_pct", cfgs[c].comp);
			json_str(j, "reason", r->skip);
			json_end_obj(j);
		}
	json_end_arr(j);
}

static void write_json(const struct opts *o, const char *path, const struct config *cfgs,
		       unsigned ncfg, const struct mount_info *m, const struct blk_info *b,
		       double slice_total)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "w") : json_stdout;
	if (!f)
		cli_die(EX_ERROR, "--json %s: %s", path, strerror(errno));
	struct json j;
	json_init(&j, f);
	json_obj(&j, NULL);
	json_provenance(&j, o, m, b, slice_total);
	json_arr(&j, "runs");
	for (unsigned c = 0; c < ncfg; c++) {
		const struct config *cf = &cfgs[c];
		for (unsigned i = 0; i < o->nmodes; i++) {
			const struct result *r = &cf->res[i];
			if (r->skipped || !r->nrep)
				continue;
			json_obj(&j, NULL);
			json_run_rates(&j, cf, r, find(cf, o->nmodes, "doublewrite", r->procs),
				       find(cf, o->nmodes, "unsafe", r->procs), find_threads(cf, o->nmodes, r));
			json_run_totals(&j, r);
			json_end_obj(&j);
		}
	}
	json_end_arr(&j);
	json_skipped(&j, o, cfgs, ncfg);
	json_end_obj(&j);
	json_finish(&j);
	if (f != stdout && fclose(f) != 0)
		cli_die(EX_ERROR, "--json %s: %s", path, strerror(errno));
}

/* --- options ------------------------------------------------------------------------ */

static void help(void)
{
	printf("usage: atomio bench [OPTIONS] [DIR]\n\n"
	       "Benchmark atomic page writes in DIR (default: the current directory), in a new\n"
	       "temporary directory there that is removed afterwards.  Every mode runs in the\n"
	       "same run, interleaved, for the same time:\n\n");
	for (unsigned i = 0; i < bench_nmodes; i++)
		printf("  %-12s %s%s\n", bench_modes[i]->name, bench_modes[i]->what,
		       bench_modes[i]->optional ? " (only when named in --modes)" : "");
	printf("\n"
	       "  -p, --page-size LIST   bytes per range (default 16k); a list runs each\n"
	       "  -r, --ranges LIST      ranges (pages) per atomic group (default 1)\n"
	       "  -t, --threads LIST     threads writing at once (default 1); with --procs,\n"
	       "                         processes of one writer each\n"
	       "      --procs            writers are processes, not threads: forked for each\n"
	       "                         slice, each opens what it writes itself (atomio: its\n"
	       "                         own atomio_open of the same log, joining the store;\n"
	       "                         the others: descriptors of their own); MODE:procs in\n"
	       "                         --modes does it for one mode, MODE:threads undoes it\n"
	       "  -f, --files N          data files per mode; ranges spread over them (default 1)\n"
	       "  -z, --zipf LIST        page popularity: 0 = uniform (default), else zipfian with\n"
	       "                         this theta (0.99: YCSB's); a list runs each\n"
	       "  -c, --compressible LIST  percent of each page that compresses away (default 0;\n"
	       "                         e.g. 0,50,75); a list runs each\n"
	       "  -s, --file-size SIZE   bytes per data file (default 64M)\n"
	       "  -d, --duration SECS    total measured time, split evenly (default 20)\n"
	       "  -n, --repetitions N    repetitions of every mode (default 3)\n"
	       "  -m, --modes LIST       modes to run (default: all), each MODE, MODE:procs or\n"
	       "                         MODE:threads; one mode may run both ways\n"
	       "      --buffered         buffered data files (default O_DIRECT)\n"
	       "      --log-size SIZE    atomio's log (default 1G, the library's default)\n"
	       "      --ckpt-percent N   atomio: background checkpoint when the log is N%% full\n"
	       "                         (default 50)\n"
	       "      --min-checkpoints N  atomio: a slice runs on, up to 10 times its time, until\n"
	       "                         the store has checkpointed N times in it (default 3)\n"
	       "      --json FILE        write the results as JSON (- for stdout)\n"
	       "      --plot FILE.svg    draw latency CDFs, throughput and wear bars\n"
	       "      --seed N           random seed for page choice (default 1)\n"
	       "      --keep             keep the temporary directory\n"
	       "  -q, --quiet            no progress lines\n"
	       "  -h, --help             this help\n\n"
	       "Columns: ops/s (median over repetitions), MB/s, latency percentiles and the\n"
	       "largest latency over all ops,\n"
	       "waits/op (fsync, fdatasync and RWF_DSYNC writes per op; atomio: log writes plus\n"
	       "checkpoint syncs), dev B/B (bytes the device wrote per user byte, from\n"
	       "/sys/block/DEV/stat: other processes' writes to DEV count too), own B/B (this\n"
	       "process's write_bytes from /proc/self/io per user byte), and ops/s against\n"
	       "doublewrite and unsafe (those of the same kind of writers, where they ran).\n"
	       "With processes, the latencies and ops come back through shared memory, the\n"
	       "process's counters include the writer processes (reaped before the slice's end),\n"
	       "and atomio's counters are the store's (atomio_stats: every process); a line\n"
	       "under the table compares MODE:procs with MODE when both ran.  atomio's slices\n"
	       "end with a checkpoint, counted; before the first, a new log's first lap is\n"
	       "written (uncounted: the steady state is measured; atomio-new measures a new\n"
	       "store's first lap).  A line\n"
	       "under the table gives atomio's log syncs per commit (group commit) and the fewest\n"
	       "checkpoints a slice ran with.  The JSON adds atomio's log and checkpointed bytes\n"
	       "per user byte, CPU time per op (getrusage, this process and its writer\n"
	       "processes), groups per log write and commits that waited for log space.\n"
	       "To tell machines apart, lines under each table give atomio's log writes/s and\n"
	       "their mean size, the device's own time for such a write (a probe after each\n"
	       "atomio slice: durable O_DIRECT writes of that size, one at a time, in DIR),\n"
	       "the share of the time a checkpoint ran (atomio_stats, sampled every 2 ms)\n"
	       "and every mode's CPU time per op; the footer gives the CPUs and the machine's\n"
	       "load average at the start and end.\n\n"
	       "Exit status: 0 done, 2 usage error, 3 error (a mode failed, no space, ...).\n");
}

static unsigned parse_thetas(const char *arg, double *out)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", arg);
	unsigned n = 0;
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end;
		double v = strtod(t, &end);
		if (*end || !(v >= 0 && v <= 10))
			cli_usage("--zipf: '%s' is not a theta between 0 and 10", t);
		if (n == MAX_CFG_VALUES)
			cli_usage("--zipf: at most %u values", MAX_CFG_VALUES);
		out[n++] = v;
	}
	if (!n)
		cli_usage("--zipf: no value");
	return n;
}

static void defaults(struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->pages[0] = 16384;
	o->ranges[0] = 1;
	o->threads[0] = 1;
	o->npages = o->nranges = o->nthreads = o->nthetas = o->ncomps = 1;
	o->files = 1;
	o->file_size = 64ull << 20;
	o->log_size = DEFAULT_LOG_SIZE; /* the library's default (format.h) */
	o->direct = true;
	o->reps = 3;
	o->duration = 20;
	o->min_ckpts = 3;
	o->seed = 1;
}

/* The options that must agree with each other. */
static void check_opts(const struct opts *o)
{
	if (o->duration <= 0)
		cli_usage("--duration must be more than 0");
	if (o->log_size < 65536 || o->log_size > (1ull << 48))
		cli_usage("--log-size must be 64k..256T");
	for (unsigned i = 0; i < o->npages; i++) {
		if (o->pages[i] % 512)
			cli_usage("--page-size %llu is not a multiple of 512", (unsigned long long)o->pages[i]);
		if (o->file_size < o->pages[i] || o->file_size % o->pages[i])
			cli_usage("--file-size must be a multiple of every page size");
		for (unsigned k = 0; k < o->nranges; k++)
			if (o->ranges[k] > o->file_size / o->pages[i] * o->files)
				cli_usage("%llu ranges do not fit in %u file(s) of %llu pages",
					  (unsigned long long)o->ranges[k], o->files,
					  (unsigned long long)(o->file_size / o->pages[i]));
	}
}

/* A mode to run: its writers' kind, its label. */
static void add_mode(struct opts *o, const struct bench_mode *m, bool procs)
{
	for (unsigned i = 0; i < o->nmodes; i++)
		if (o->modes[i] == m && o->mprocs[i] == procs)
			cli_usage("--modes: '%s%s' twice", m->name, procs ? ":procs" : "");
	if (o->nmodes == MAX_MODES)
		cli_usage("--modes: too many (at most %u)", MAX_MODES);
	o->modes[o->nmodes] = m;
	o->mprocs[o->nmodes] = procs;
	snprintf(o->mlabel[o->nmodes], sizeof(o->mlabel[0]), "%s%s", m->name, procs ? ":procs" : "");
	o->nmodes++;
}

/* --modes LIST (MODE, MODE:procs, MODE:threads), or every mode that is not
 * optional; writers are processes where --procs says so or :procs. */
static void parse_modes(const char *modes, struct opts *o)
{
	if (!modes) {
		for (unsigned i = 0; i < bench_nmodes && o->nmodes < MAX_MODES; i++)
			if (!bench_modes[i]->optional)
				add_mode(o, bench_modes[i], o->procs);
		return;
	}
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", modes);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		bool procs = o->procs;
		char *kind = strchr(t, ':');
		if (kind) {
			*kind++ = 0;
			if (!strcmp(kind, "procs"))
				procs = true;
			else if (!strcmp(kind, "threads"))
				procs = false;
			else
				cli_usage("--modes: '%s:%s': after ':', procs or threads", t, kind);
		}
		const struct bench_mode *m = NULL;
		for (unsigned i = 0; i < bench_nmodes; i++)
			if (!strcmp(bench_modes[i]->name, t))
				m = bench_modes[i];
		if (!m) {
			char names[256];
			size_t n = 0;
			names[0] = 0;
			for (unsigned i = 0; i < bench_nmodes && n < sizeof(names); i++)
				n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s", i ? ", " : "",
						      bench_modes[i]->name);
			cli_usage("--modes: no mode '%s' (modes: %s)", t, names);
		}
		add_mode(o, m, procs);
	}
}

static void parse(int argc, char **argv, struct opts *o)
{
	enum { O_BUFFERED = 256, O_DIRECT_OPT, O_LOG, O_JSON, O_PLOT, O_SEED, O_KEEP, O_CKPT, O_MINCK, O_PROCS };
	static const struct option lo[] = {
		{"page-size", required_argument, 0, 'p'}, {"ranges", required_argument, 0, 'r'},
		{"zipf", required_argument, 0, 'z'},      {"compressible", required_argument, 0, 'c'},
		{"threads", required_argument, 0, 't'},   {"files", required_argument, 0, 'f'},
		{"file-size", required_argument, 0, 's'}, {"duration", required_argument, 0, 'd'},
		{"repetitions", required_argument, 0, 'n'}, {"modes", required_argument, 0, 'm'},
		{"buffered", no_argument, 0, O_BUFFERED}, {"direct", no_argument, 0, O_DIRECT_OPT},
		{"log-size", required_argument, 0, O_LOG}, {"json", required_argument, 0, O_JSON},
		{"ckpt-percent", required_argument, 0, O_CKPT},
		{"min-checkpoints", required_argument, 0, O_MINCK},
		{"plot", required_argument, 0, O_PLOT},   {"seed", required_argument, 0, O_SEED},
		{"keep", no_argument, 0, O_KEEP},         {"quiet", no_argument, 0, 'q'},
		{"procs", no_argument, 0, O_PROCS},
		{"help", no_argument, 0, 'h'},            {0, 0, 0, 0},
	};
	defaults(o);
	const char *modes = NULL;
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:r:t:f:s:d:n:m:z:c:qh", lo, NULL)) != -1) {
		switch (c) {
		case 'p': o->npages = cli_list("--page-size", optarg, o->pages, MAX_CFG_VALUES, true, 512, 64 << 20); break;
		case 'r': o->nranges = cli_list("--ranges", optarg, o->ranges, MAX_CFG_VALUES, false, 1, 4096); break;
		case 't': o->nthreads = cli_list("--threads", optarg, o->threads, MAX_CFG_VALUES, false, 1, 1024); break;
		case 'z': o->nthetas = parse_thetas(optarg, o->thetas); break;
		case 'c': o->ncomps = cli_list("--compressible", optarg, o->comps, MAX_CFG_VALUES, false, 0, 99); break;
		case 'f': o->files = (unsigned)cli_uint("--files", optarg, 1, 256); break;
		case 's': o->file_size = cli_size("--file-size", optarg); break;
		case 'd': o->duration = cli_seconds("--duration", optarg); break;
		case 'n': o->reps = (unsigned)cli_uint("--repetitions", optarg, 1, MAX_REPS); break;
		case 'm': modes = optarg; break;
		case O_BUFFERED: o->direct = false; break;
		case O_DIRECT_OPT: o->direct = true; break;
		case O_LOG: o->log_size = cli_size("--log-size", optarg); break;
		case O_CKPT: o->ckpt_percent = (uint32_t)cli_uint("--ckpt-percent", optarg, 1, 99); break;
		case O_MINCK: o->min_ckpts = (unsigned)cli_uint("--min-checkpoints", optarg, 0, 1000); break;
		case O_JSON: o->json = optarg; break;
		case O_PLOT: o->plot = optarg; break;
		case O_SEED: o->seed = cli_uint("--seed", optarg, 0, UINT64_MAX); break;
		case O_KEEP: o->keep = true; break;
		case O_PROCS: o->procs = true; break;
		case 'q': o->quiet = true; break;
		case 'h': help(); exit(EX_OK);
		default: cli_bad_option(argv, c);
		}
	}
	if (argc - optind > 1)
		cli_usage("one DIR only");
	o->dir = optind < argc ? argv[optind] : ".";
	check_opts(o);
	parse_modes(modes, o);
}

/* --- main ---------------------------------------------------------------------------- */

/* One run: its options, where it writes and what it found there, its
 * configurations (each with every mode's result). */
struct run {
	struct opts o;
	struct mount_info m;
	struct blk_info blk;
	char fs_desc[256];          /* "ext4 on vda" */
	char header[768];           /* the first line of the report */
	char mdir[MAX_MODES][PATH_MAX];
	char *paths[MAX_MODES][256]; /* each mode's data files */
	bool filled[MAX_MODES];     /* written for real yet */
	uint64_t min_page;
	struct config *cfgs;
	unsigned ncfg;
};

/* With --json -, standard output carries the JSON alone: the table goes to
 * standard error. */
static void json_to_stdout(const struct opts *o)
{
	json_stdout = stdout;
	if (o->json && !strcmp(o->json, "-")) {
		int fd = dup(STDOUT_FILENO);
		if (fd < 0 || !(json_stdout = fdopen(fd, "w")) || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
			cli_die(EX_ERROR, "--json -: %s", strerror(errno));
	}
}

/* DIR: its filesystem and block device. */
static void examine_dir(struct run *x)
{
	const char *dir = x->o.dir;
	struct stat sb;
	if (stat(dir, &sb) < 0)
		cli_die(EX_ERROR, "%s: %s", dir, strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		cli_die(EX_ERROR, "%s: not a directory", dir);
	struct stx_info sx;
	int r = host_statx_info(AT_FDCWD, dir, 0, &sx);
	if (r < 0)
		cli_die(EX_ERROR, "%s: statx: %s", dir, strerror(-r));
	host_mount_for(&sx, &x->m);
	host_blk_for(sx.dev, &x->m, &x->blk);
	snprintf(x->fs_desc, sizeof(x->fs_desc), "%s %s%s", x->m.found ? x->m.fstype : "this filesystem",
		 x->blk.found ? "on " : "(no block device)", x->blk.found ? x->blk.name : "");
}

static uint64_t max_of(const uint64_t *v, unsigned n)
{
	uint64_t m = 0;
	for (unsigned i = 0; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

/* Space: every mode's data files, atomio's log, the doublewrite scratch. */
static void check_space(struct run *x)
{
	const struct opts *o = &x->o;
	x->min_page = UINT64_MAX;
	for (unsigned i = 0; i < o->npages; i++)
		x->min_page = o->pages[i] < x->min_page ? o->pages[i] : x->min_page;
	uint64_t need = (uint64_t)o->nmodes * o->files * o->file_size + o->log_size + (3u << 20) +
			max_of(o->threads, o->nthreads) * 64 * max_of(o->ranges, o->nranges) *
				max_of(o->pages, o->npages);
	struct statvfs vfs;
	if (statvfs(o->dir, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < need + need / 10) {
		char a[32], b[32];
		cli_die(EX_ERROR, "%s: needs %s free, has %s (try a smaller --file-size)", o->dir,
			fmt_bytes(a, sizeof(a), need), fmt_bytes(b, sizeof(b), (uint64_t)vfs.f_bavail * vfs.f_frsize));
	}
}

/* The run's directory (removed at exit unless --keep; a signal ends the
 * run), and in it a directory per mode for its data files. */
static void make_dirs(struct run *x)
{
	const struct opts *o = &x->o;
	snprintf(run_dir, sizeof(run_dir), "%s/atomio-bench-XXXXXX", o->dir);
	if (!mkdtemp(run_dir))
		cli_die(EX_ERROR, "creating a directory in %s: %s", o->dir, strerror(errno));
	run_dir_made = true;
	keep_dir = o->keep;
	atexit(cleanup);
	struct sigaction sa = {0};
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (!o->quiet) {
		char a[32];
		fprintf(stderr, "atomio bench: %s, %s; preparing %u x %u data file(s) of %s in %s\n",
			x->fs_desc, o->direct ? "O_DIRECT" : "buffered", o->nmodes, o->files,
			fmt_bytes(a, sizeof(a), o->file_size), run_dir);
	}
	for (unsigned i = 0; i < o->nmodes; i++) {
		snprintf(x->mdir[i], sizeof(x->mdir[i]), "%.4000s/%s%s", run_dir, o->modes[i]->name,
			 o->mprocs[i] ? "-procs" : "");
		if (mkdir(x->mdir[i], 0700) < 0)
			cli_die(EX_ERROR, "mkdir %s: %s", x->mdir[i], strerror(errno));
		for (unsigned f = 0; f < o->files; f++) {
			char p[PATH_MAX + 32];
			snprintf(p, sizeof(p), "%s/data-%u.dat", x->mdir[i], f);
			x->paths[i][f] = strdup(p);
			if (!x->paths[i][f])
				cli_die(EX_ERROR, "out of memory");
		}
	}
}

/* Every combination of threads, page size, ranges, popularity and
 * compressibility, in that nesting order. */
static void make_configs(struct run *x)
{
	const struct opts *o = &x->o;
	x->ncfg = o->nthreads * o->npages * o->nranges * o->nthetas * o->ncomps;
	x->cfgs = calloc(x->ncfg, sizeof(*x->cfgs));
	if (!x->cfgs)
		cli_die(EX_ERROR, "out of memory");
	for (unsigned ci = 0; ci < x->ncfg; ci++) {
		struct config *cf = &x->cfgs[ci];
		unsigned q = ci;
		cf->comp = (unsigned)o->comps[q % o->ncomps];
		q /= o->ncomps;
		cf->theta = o->thetas[q % o->nthetas];
		q /= o->nthetas;
		cf->ranges = (unsigned)o->ranges[q % o->nranges];
		q /= o->nranges;
		cf->page = (size_t)o->pages[q % o->npages];
		q /= o->npages;
		cf->threads = (unsigned)o->threads[q];
		if (cf->theta > 0) {
			uint64_t n = o->file_size / cf->page;
			if (n > (1u << 24))
				cli_usage("--zipf: at most 2^24 pages per file");
			cf->cdf = zipf_cdf(n, cf->theta);
		}
	}
}

/* The report's first line: the filesystem, the device and its cache, the data files. */
static void make_header(struct run *x)
{
	const struct blk_info *blk = &x->blk;
	char *h = x->header;
	size_t n = sizeof(x->header);
	size_t hn = (size_t)snprintf(h, n, "atomio bench: %s", x->fs_desc);
	if (blk->found && hn < n)
		hn += (size_t)snprintf(h + hn, n - hn, " (%s%swrite cache: %s, FUA: %s)", blk->model,
				       blk->model[0] ? ", " : "", blk->write_cache[0] ? blk->write_cache : "unknown",
				       blk->fua < 0 ? "unknown" : blk->fua ? "yes" : "no");
	if (blk->backing[0] && hn < n)
		hn += (size_t)snprintf(h + hn, n - hn, " over %.300s", blk->backing);
	if (hn < n)
		snprintf(h + hn, n - hn, ", %s data files", x->o.direct ? "O_DIRECT" : "buffered");
}

/* Each mode set up for a configuration (its data files written for real
 * first, once); the number that can run here. */
static unsigned setup_modes(struct run *x, struct config *cf, struct bench_env *env, void **state)
{
	const struct opts *o = &x->o;
	unsigned active = 0;
	for (unsigned i = 0; i < o->nmodes && !interrupted; i++) {
		struct result *res = &cf->res[i];
		res->mode = o->modes[i];
		res->procs = o->mprocs[i];
		res->label = o->mlabel[i];
		hist_reset(&res->probe);
		hist_reset(&res->lat);
		if (!x->filled[i]) {
			for (unsigned f = 0; f < o->files; f++)
				prefill(x->paths[i][f], o->file_size, x->min_page);
			x->filled[i] = true;
		}
		env[i] = (struct bench_env){
			.dir = x->mdir[i], .paths = x->paths[i], .nfiles = o->files,
			.file_size = o->file_size, .page = cf->page, .ranges = cf->ranges,
			.threads = cf->threads, .procs = res->procs, .direct = o->direct, .log_size = o->log_size,
			.fs_desc = x->fs_desc, .ckpt_percent = o->ckpt_percent, .theta = cf->theta, .cdf = cf->cdf, .compressible = cf->comp,
		};
		int r = o->modes[i]->setup(&env[i], &state[i], res->skip, sizeof(res->skip));
		if (r == 0 && res->procs && !o->modes[i]->attach) {
			o->modes[i]->teardown(state[i]);
			snprintf(res->skip, sizeof(res->skip), "runs in one process only");
			r = BENCH_SKIP;
		}
		if (r < 0)
			cli_die(EX_ERROR, "%s mode: %s", res->label, res->skip[0] ? res->skip : strerror(-r));
		if (r == BENCH_SKIP) {
			res->skipped = true;
			state[i] = NULL;
			continue;
		}
		active++;
	}
	return active;
}

/* One configuration: every repetition runs every mode for a slice, in an
 * order rotated by one mode per repetition. */
static void run_config(struct run *x, struct config *cf)
{
	const struct opts *o = &x->o;
	struct bench_env env[MAX_MODES];
	void *state[MAX_MODES] = {0};
	unsigned active = setup_modes(x, cf, env, state);
	if (!active)
		return;
	cf->slice = o->duration / x->ncfg / (o->reps * active);
	if (cf->slice < 0.02)
		cf->slice = 0.02;
	unsigned step = 0, nsteps = o->reps * active;
	for (unsigned rep = 0; rep < o->reps && !interrupted; rep++)
		for (unsigned k = 0; k < o->nmodes && !interrupted; k++) {
			unsigned i = (k + rep) % o->nmodes;
			if (cf->res[i].skipped)
				continue;
			run_slice(o, cf, &cf->res[i], state[i], &env[i], &x->blk, rep, ++step, nsteps);
		}
	for (unsigned i = 0; i < o->nmodes; i++)
		if (state[i])
			o->modes[i]->teardown(state[i]);
	for (unsigned i = 0; i < o->nmodes; i++)
		cf->res[i].ops_median = median(cf->res[i].rate, cf->res[i].nrep);
}

static bool any_procs(const struct opts *o)
{
	for (unsigned i = 0; i < o->nmodes; i++)
		if (o->mprocs[i])
			return true;
	return false;
}

/* The tables, and what their columns mean. */
static void print_report(const struct run *x)
{
	const struct opts *o = &x->o;
	printf("%s\n", x->header);
	for (unsigned c = 0; c < x->ncfg; c++)
		print_table(o, &x->cfgs[c]);
	printf("\nops/s: median of %u; latency: all ops; waits/op: fsync/fdatasync/RWF_DSYNC per op;\n"
	       "dev B/B: bytes %s wrote per user byte (whole device: other processes count too);\n"
	       "own B/B: this process's write_bytes (/proc/self/io) per user byte%s.\n",
	       o->reps, x->blk.found ? x->blk.name : "the device",
	       any_procs(o) ? " (writer processes included)" : "");
	if (probe_err[0])
		printf("Device probe: none (%s).\n", probe_err);
	printf("CPUs: %ld online%s%s.\n", cpus_online, cpu_model[0] ? ", " : "", cpu_model);
	double end[3];
	if (load_ok && getloadavg(end, 3) == 3)
		printf("Load average (1, 5, 15 min): %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end.\n",
		       load_start[0], load_start[1], load_start[2], end[0], end[1], end[2]);
	if (!o->direct)
		printf("Buffered: the kernel charges a whole (large) folio to write_bytes when it dirties\n"
		       "part of one, so own B/B overstates buffered writes; dev B/B is what was written.\n");
}

/* --plot: a panel per configuration. */
static void write_plot(const struct run *x)
{
	const struct opts *o = &x->o;
	struct plot_panel *pp = calloc(x->ncfg, sizeof(*pp));
	if (!pp)
		cli_die(EX_ERROR, "out of memory");
	for (unsigned c = 0; c < x->ncfg; c++) {
		const struct config *cf = &x->cfgs[c];
		char a[32];
		snprintf(pp[c].title, sizeof(pp[c].title), "%s pages, %u range%s/group, %u thread%s",
			 fmt_bytes(a, sizeof(a), cf->page), cf->ranges, cf->ranges == 1 ? "" : "s",
			 cf->threads, cf->threads == 1 ? "" : "s");
		for (unsigned i = 0; i < o->nmodes && pp[c].nmodes < 8; i++) {
			const struct result *res = &cf->res[i];
			struct plot_mode *pm = &pp[c].m[pp[c].nmodes++];
			pm->name = res->label;
			pm->skipped = res->skipped ? res->skip : res->nrep ? NULL : "no time";
			pm->lat = &res->lat;
			pm->ops_median = res->ops_median;
			pm->ops_min = minv(res->rate, res->nrep);
			pm->ops_max = maxv(res->rate, res->nrep);
			double ub = (double)res->user_bytes;
			pm->dev_bpb = res->dev_ok && ub > 0 ? (double)res->dev_bytes / ub : NAN;
			pm->proc_bpb = res->proc_ok && ub > 0 ? (double)res->proc_bytes / ub : NAN;
		}
	}
	char sub[1024];
	snprintf(sub, sizeof(sub), "%s; median of %u repetitions, modes interleaved", x->header + 14, o->reps);
	if (bench_plot(o->plot, "atomio bench", sub, pp, x->ncfg) < 0)
		cli_die(EX_ERROR, "--plot %s: %s", o->plot, strerror(errno));
	free(pp);
	if (!o->quiet)
		fprintf(stderr, "atomio bench: wrote %s\n", o->plot);
}

int cmd_bench(int argc, char **argv)
{
	static struct run run;
	struct run *x = &run;
	struct opts *o = &x->o;
	parse(argc, argv, o);
	load_ok = getloadavg(load_start, 3) == 3;
	cpu_info();
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED)
		cli_die(EX_ERROR, "mmap: %s", strerror(errno));
	atexit(release_writers);
	progress_tty = isatty(2);
	bench_argc = argc;
	bench_argv = argv;
	json_to_stdout(o);
	examine_dir(x);
	check_space(x);
	make_dirs(x);
	make_configs(x);
	make_header(x);
	for (unsigned c = 0; c < x->ncfg && !interrupted; c++)
		run_config(x, &x->cfgs[c]);
	probe_done();
	progress_clear(o);
	if (interrupted)
		cli_die(EX_ERROR, "interrupted; nothing reported");
	print_report(x);
	if (o->json)
		write_json(o, o->json, x->cfgs, x->ncfg, &x->m, &x->blk, o->duration);
	if (o->plot)
		write_plot(x);
	for (unsigned i = 0; i < o->nmodes; i++)
		for (unsigned f = 0; f < o->files; f++)
			free(x->paths[i][f]);
	for (unsigned c = 0; c < x->ncfg; c++)
		free(x->cfgs[c].cdf);
	free(x->cfgs);
	return EX_OK;
}
