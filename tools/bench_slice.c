/*
 * bench_slice.c: `atomio bench`'s time slices: the writers (threads or
 * processes), the slice that starts and stops them, the device probe and
 * checkpoint sampling beside it, and the counters it adds to a result.
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
#include "bench_driver.h"

/* --- the run ---------------------------------------------------------------- */

struct ctl *bench_ctl;
volatile sig_atomic_t bench_interrupted;

void on_signal(int sig)
{
	(void)sig;
	bench_interrupted = 1;
	atomic_store(&bench_ctl->stop, 1);
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

uint64_t bench_rnd(uint64_t *s)
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
double *zipf_cdf(uint64_t n, double theta)
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
		return bench_rnd(&w->rng) % pages;
	double u = (double)(bench_rnd(&w->rng) >> 11) * 0x1p-53;
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
			f = env->nfiles > 1 ? (unsigned)(bench_rnd(&w->rng) % env->nfiles) : 0;
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
	while (!atomic_load_explicit(&bench_ctl->stop, memory_order_relaxed)) {
		next_group(w, &g, n);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int r = w->mode->op(w->state, w->id, &g, out->why, sizeof(out->why));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (r < 0) {
			out->err = r;
			atomic_store(&bench_ctl->stop, 1);
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

bool bench_run_dir_made;

/* A writer process (--procs), forked for one slice: its own state made
 * from setup's (the mode's attach), then, once every writer is ready, ops
 * until the slice is over, then its part finished (detach).  It never
 * returns: _exit, so that the parent's exit handlers (the run directory's
 * removal) and stdio buffers stay the parent's. */
static _Noreturn void writer_process(struct worker *w, void *state)
{
	bench_run_dir_made = false; /* not this process's to remove, even on a stray exit() */
	struct wout *out = w->out;
	void *own = NULL;
	int r = w->mode->attach(w->env, state, &own, out->why, sizeof(out->why));
	if (r < 0) {
		out->err = r;
		atomic_store(&bench_ctl->stop, 1);
	}
	atomic_fetch_add(&bench_ctl->ready, 1);
	while (!atomic_load(&bench_ctl->go))
		futex_wait(&bench_ctl->go, 0);
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
			atomic_store(&bench_ctl->stop, 1);
		}
	}
	_exit(0);
}

/* At exit (a usage of cli_die while writer processes wait): let them go;
 * they see the stop flag and end. */
void release_writers(void)
{
	if (!bench_ctl)
		return;
	atomic_store(&bench_ctl->stop, 1);
	atomic_store(&bench_ctl->go, 1);
	futex_wake(&bench_ctl->go);
}

static void sample(const struct blk_info *b, struct dev_counters *d, bool *proc_ok, uint64_t *proc)
{
	host_dev_counters(b, d);
	*proc_ok = host_proc_write_bytes(proc);
}

bool bench_progress_tty;

static void progress(const struct opts *o, const char *line)
{
	if (o->quiet)
		return;
	if (bench_progress_tty)
		fprintf(stderr, "\r%-78.78s", line);
	else
		fprintf(stderr, "%s\n", line);
}

void progress_clear(const struct opts *o)
{
	if (!o->quiet && bench_progress_tty)
		fprintf(stderr, "\r%78s\r", "");
}

/* A page's bytes: random, then in every 512 bytes the last comp% zeros (as
 * fio's buffer_compress_percentage): lz4 and zstd keep 1 - comp/100 of
 * them, plus a little. */
static void fill_page(char *buf, size_t page, unsigned comp, uint64_t seed)
{
	uint64_t s = seed;
	for (size_t k = 0; k + 8 <= page; k += 8) {
		uint64_t v = bench_rnd(&s);
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
	while (atomic_load(&bench_ctl->ready) < sl->n) {
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
	atomic_store(&bench_ctl->stop, bench_interrupted ? 1 : 0);
	atomic_store(&bench_ctl->ready, 0);
	atomic_store(&bench_ctl->go, 0);
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
	atomic_store(&bench_ctl->go, 1);
	futex_wake(&bench_ctl->go);
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
		if (atomic_load(&bench_ctl->stop))
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
		if (bench_progress_tty && !o->quiet) {
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
char bench_probe_err[300]; /* why there is no probe, when there is none */
long bench_cpus_online;
char bench_cpu_model[128];

void cpu_info(void)
{
	bench_cpus_online = sysconf(_SC_NPROCESSORS_ONLN);
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':');
		if (strncmp(line, "model name", 10) || !c)
			continue;
		c += 1 + strspn(c + 1, " \t");
		c[strcspn(c, "\n")] = 0;
		snprintf(bench_cpu_model, sizeof(bench_cpu_model), "%s", c);
		break;
	}
	if (f)
		fclose(f);
}

/* A mean log write, in whole 4 KiB blocks (what a write of it puts on the
 * device), at most PROBE_MAX; 0 when there was none. */
size_t log_write_blocks(uint64_t log_bytes, uint64_t batches)
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
	if (!size || bench_probe_err[0])
		return;
	if (!probe_open) {
		if (bench_probe_open(&probe, bench_run_dir, PROBE_SPAN, bench_probe_err, sizeof(bench_probe_err)) < 0)
			return;
		probe_open = true;
	}
	uint64_t n0 = res->probe.count;
	if (bench_probe_run(&probe, size, 100, 0.1, &res->probe, bench_probe_err, sizeof(bench_probe_err)) < 0) {
		bench_probe_close(&probe);
		probe_open = false;
	}
	res->probe_bytes += (res->probe.count - n0) * size;
}

void bench_probe_done(void)
{
	if (probe_open)
		bench_probe_close(&probe);
	probe_open = false;
}

double probe_mean_us(const struct result *r)
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
	atomic_store(&bench_ctl->stop, 1);
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
void run_slice(const struct opts *o, struct config *cfg, struct result *res, void *state,
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
	if (bench_interrupted)
		return;
	add_slice(res, cfg, ops, secs, &c0, &c1);
	if (res->mode->finish)
		probe_slice(res, log_write_blocks(c1.m.log_bytes - c0.m.log_bytes, c1.m.batches - c0.m.batches));
	char line[160];
	snprintf(line, sizeof(line), "[%u/%u] rep %u/%u  %-12s %8.0f ops/s", step, nsteps, rep + 1,
		 o->reps, res->label, res->rate[res->nrep - 1]);
	if (!bench_progress_tty)
		progress(o, line);
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double bench_median(const double *v, unsigned n)
{
	if (!n)
		return NAN;
	double s[MAX_REPS];
	memcpy(s, v, n * sizeof(double));
	qsort(s, n, sizeof(double), cmpd);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

double bench_minv(const double *v, unsigned n)
{
	double m = INFINITY;
	for (unsigned i = 0; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

double bench_maxv(const double *v, unsigned n)
{
	double m = -INFINITY;
	for (unsigned i = 0; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

