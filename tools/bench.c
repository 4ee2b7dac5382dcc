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
#include <sys/stat.h>
#include <sys/statvfs.h>
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
	unsigned nmodes;
};

struct result {
	const struct bench_mode *mode;
	bool skipped;
	char skip[256];
	unsigned nrep;
	double rate[MAX_REPS], secs_rep[MAX_REPS];
	uint64_t ops_rep[MAX_REPS];
	uint64_t ops, user_bytes;
	double secs;
	struct hist lat;
	uint64_t waits, log_bytes, home_bytes, checkpoints, ckpt_bytes, log_syncs;
	uint64_t ckpt_slice_min; /* fewest checkpoints in one slice (UINT64_MAX: none yet) */
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

static atomic_int stop_flag;
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
	atomic_store(&stop_flag, 1);
}

struct worker {
	pthread_t tid;
	unsigned id;
	const struct bench_mode *mode;
	void *state;
	const struct bench_env *env;
	pthread_barrier_t *start;
	uint64_t rng;
	struct bench_range *r;
	void **bufs;
	struct hist lat;
	_Atomic uint64_t ops;
	int err;
	char why[512];
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

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	pthread_barrier_wait(w->start);
	struct bench_group g;
	uint64_t n = 0;
	while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
		next_group(w, &g, n);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int r = w->mode->op(w->state, w->id, &g, w->why, sizeof(w->why));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (r < 0) {
			w->err = r;
			atomic_store(&stop_flag, 1);
			break;
		}
		int64_t ns = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
		hist_add(&w->lat, ns > 0 ? (uint64_t)ns : 0);
		atomic_store_explicit(&w->ops, ++n, memory_order_relaxed);
	}
	return NULL;
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

/* Run one mode for one slice; add to res.  Dies on a mode error. */
static void run_slice(const struct opts *o, struct config *cfg, struct result *res, void *state,
		      const struct bench_env *env, const struct blk_info *blk, unsigned rep,
		      unsigned step, unsigned nsteps)
{
	unsigned T = cfg->threads;
	struct worker *ws = calloc(T, sizeof(*ws));
	if (!ws)
		cli_die(EX_ERROR, "out of memory");
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, T + 1);
	atomic_store(&stop_flag, interrupted ? 1 : 0);
	for (unsigned t = 0; t < T; t++) {
		struct worker *w = &ws[t];
		w->id = t;
		w->mode = res->mode;
		w->state = state;
		w->env = env;
		w->start = &start;
		w->rng = o->seed ^ ((uint64_t)(t + 1) << 40) ^ ((uint64_t)rep << 20) ^ step;
		hist_reset(&w->lat);
		w->r = calloc(cfg->ranges, sizeof(*w->r));
		w->bufs = calloc(cfg->ranges, sizeof(void *));
		if (!w->r || !w->bufs)
			cli_die(EX_ERROR, "out of memory");
		for (unsigned i = 0; i < cfg->ranges; i++) {
			if (posix_memalign(&w->bufs[i], 4096, cfg->page))
				cli_die(EX_ERROR, "out of memory");
			/* page bytes: random, then in every 512 bytes the last
			 * comp% zeros (as fio's buffer_compress_percentage):
			 * lz4 and zstd keep 1 - comp/100 of them, plus a little */
			uint64_t s = w->rng ^ i;
			for (size_t k = 0; k + 8 <= cfg->page; k += 8) {
				uint64_t v = rnd(&s);
				memcpy((char *)w->bufs[i] + k, &v, 8);
			}
			size_t z = 512 * cfg->comp / 100;
			for (size_t k = 0; z && k + 512 <= cfg->page; k += 512)
				memset((char *)w->bufs[i] + k + 512 - z, 0, z);
		}
		int e = pthread_create(&w->tid, NULL, worker_main, w);
		if (e)
			cli_die(EX_ERROR, "creating a thread: %s", strerror(e));
	}
	struct dev_counters d0, d1;
	struct mode_counters m0, m1;
	bool p0ok, p1ok;
	uint64_t p0 = 0, p1 = 0;
	sample(blk, &d0, &p0ok, &p0);
	res->mode->counters(state, &m0);
	pthread_barrier_wait(&start);
	double t0 = now_sec(), t;
	/* A mode that checkpoints (atomio) runs on past the slice until it has
	 * checkpointed min_ckpts times, up to 10 slices: a slice without its
	 * checkpoints would leave out the stalls they cause.  ops/s is per
	 * second of the slice, so a longer one compares the same. */
	double until = cfg->slice;
	for (;;) {
		t = now_sec();
		if (atomic_load(&stop_flag))
			break;
		if (t - t0 >= until) {
			struct mode_counters mc;
			res->mode->counters(state, &mc);
			if (!res->mode->finish || mc.checkpoints - m0.checkpoints >= o->min_ckpts ||
			    t - t0 >= 10 * cfg->slice)
				break;
			until = t - t0 + 0.05;
		}
		double left = until - (t - t0);
		struct timespec ts = {0, (long)((left < 0.25 ? left : 0.25) * 1e9)};
		nanosleep(&ts, NULL);
		if (progress_tty && !o->quiet) {
			uint64_t ops = 0;
			for (unsigned k = 0; k < T; k++)
				ops += atomic_load(&ws[k].ops);
			char line[128];
			snprintf(line, sizeof(line), "[%u/%u] rep %u/%u  %-11s %5.1f/%.1f s  %8.0f ops/s",
				 step, nsteps, rep + 1, o->reps, res->mode->name, now_sec() - t0,
				 cfg->slice, (double)ops / (now_sec() - t0));
			progress(o, line);
		}
	}
	atomic_store(&stop_flag, 1);
	for (unsigned k = 0; k < T; k++)
		pthread_join(ws[k].tid, NULL);
	for (unsigned k = 0; k < T; k++)
		if (ws[k].err)
			cli_die(EX_ERROR, "%s mode: %s", res->mode->name, ws[k].why);
	if (res->mode->finish) {
		char why[512];
		if (res->mode->finish(state, why, sizeof(why)) < 0)
			cli_die(EX_ERROR, "%s mode: %s", res->mode->name, why);
	}
	double secs = now_sec() - t0;
	res->mode->counters(state, &m1);
	sample(blk, &d1, &p1ok, &p1);

	uint64_t ops = 0;
	for (unsigned k = 0; k < T; k++) {
		ops += atomic_load(&ws[k].ops);
		hist_merge(&res->lat, &ws[k].lat);
		for (unsigned i = 0; i < cfg->ranges; i++)
			free(ws[k].bufs[i]);
		free(ws[k].bufs);
		free(ws[k].r);
	}
	free(ws);
	pthread_barrier_destroy(&start);
	if (interrupted)
		return;
	unsigned i = res->nrep++;
	res->ops_rep[i] = ops;
	res->secs_rep[i] = secs;
	res->rate[i] = (double)ops / secs;
	res->ops += ops;
	res->secs += secs;
	res->user_bytes += ops * cfg->ranges * cfg->page;
	res->waits += m1.waits - m0.waits;
	res->log_bytes += m1.log_bytes - m0.log_bytes;
	res->home_bytes += m1.home_bytes - m0.home_bytes;
	res->checkpoints += m1.checkpoints - m0.checkpoints;
	res->ckpt_bytes += m1.ckpt_bytes - m0.ckpt_bytes;
	res->log_syncs += m1.log_syncs - m0.log_syncs;
	if (res->mode->finish) {
		/* the checkpoints the ops ran with (the slice's final one not counted) */
		uint64_t ck = m1.checkpoints - m0.checkpoints;
		ck = ck ? ck - 1 : 0;
		if (i == 0 || ck < res->ckpt_slice_min)
			res->ckpt_slice_min = ck;
	}
	res->dev_ok = d0.ok && d1.ok && (i == 0 || res->dev_ok);
	res->dev_bytes += (d1.write_sectors - d0.write_sectors) * 512;
	res->dev_ios += d1.write_ios - d0.write_ios;
	res->dev_flushes += d1.flushes - d0.flushes;
	res->proc_ok = p0ok && p1ok && (i == 0 || res->proc_ok);
	res->proc_bytes += p1 - p0;
	char line[160];
	snprintf(line, sizeof(line), "[%u/%u] rep %u/%u  %-11s %8.0f ops/s", step, nsteps, rep + 1,
		 o->reps, res->mode->name, res->rate[i]);
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
static bool run_dir_made, keep_dir;

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

static const struct result *find(const struct config *c, unsigned nm, const char *name)
{
	for (unsigned i = 0; i < nm; i++)
		if (!strcmp(c->res[i].mode->name, name) && !c->res[i].skipped && c->res[i].nrep)
			return &c->res[i];
	return NULL;
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
	printf("\n%zu-byte pages (%s), %u range%s per group, %u thread%s, %u file%s of %s per mode; "
	       "%s pages, %u%% compressible; %u x %.2f s per mode, interleaved\n",
	       c->page, fmt_bytes(a, sizeof(a), c->page), c->ranges, c->ranges == 1 ? "" : "s",
	       c->threads, c->threads == 1 ? "" : "s", o->files, o->files == 1 ? "" : "s",
	       fmt_bytes((char[32]){0}, 32, o->file_size), pop, c->comp, o->reps, c->slice);
	printf("%-11s %9s %8s %8s %8s %9s %8s %8s %7s %7s %8s %9s\n", "mode", "ops/s", "MB/s",
	       "p50 us", "p99 us", "p99.9 us", "max us", "waits/op", "dev B/B", "own B/B", "vs dblwr",
	       "vs unsafe");
	const struct result *dw = find(c, o->nmodes, "doublewrite"), *un = find(c, o->nmodes, "unsafe");
	for (unsigned i = 0; i < o->nmodes; i++) {
		const struct result *r = &c->res[i];
		if (r->skipped || !r->nrep) {
			printf("%-11s skipped: %s\n", r->mode->name, r->skipped ? r->skip : "no time");
			continue;
		}
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
		printf("%-11s %9s %8s %8s %8s %9s %8s %8s %7s %7s %8s %9s\n", r->mode->name, s[0], s[1],
		       s[2], s[3], s[4], s[10], s[5], s[6], s[7], s[8], s[9]);
	}
	for (unsigned i = 0; i < o->nmodes; i++) {
		const struct result *r = &c->res[i];
		if (r->skipped || !r->nrep || !r->mode->finish || !r->ops)
			continue;
		printf("%s: %.3f log syncs per commit (%.1f commits per log write); "
		       "%.0f s of slices with at least %" PRIu64 " checkpoints each\n",
		       r->mode->name, (double)r->log_syncs / (double)r->ops,
		       r->log_syncs ? (double)r->ops / (double)r->log_syncs : 0.0, r->secs,
		       r->ckpt_slice_min);
	}
}

/* With --json -, standard output carries the JSON alone: the table goes to
 * standard error (cmd_bench points stdout there and keeps this for the JSON). */
static FILE *json_stdout;
static int bench_argc;
static char **bench_argv;

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
	/* What reproduces the run: the version, the command line, the seed. */
	char ver[32], when[32];
	snprintf(ver, sizeof(ver), "%d.%d.%d", ATOMIO_VERSION_MAJOR, ATOMIO_VERSION_MINOR, ATOMIO_VERSION_PATCH);
	json_str(&j, "atomio_version", ver);
	json_arr(&j, "argv");
	for (int i = 0; i < bench_argc; i++)
		json_str(&j, NULL, bench_argv[i]);
	json_end_arr(&j);
	json_uint(&j, "seed", o->seed);
	time_t t = time(NULL);
	struct tm tm;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	json_str(&j, "timestamp", when);
	json_str(&j, "filesystem", m->found ? m->fstype : "unknown");
	json_bool(&j, "direct", o->direct);
	json_str(&j, "device", b->found ? b->name : NULL);
	json_str(&j, "device_backing_file", b->backing[0] ? b->backing : NULL);
	json_str(&j, "dir", o->dir);
	char k[128];
	json_str(&j, "kernel", host_kernel(k, sizeof(k)));
	json_uint(&j, "files", o->files);
	json_uint(&j, "file_size", o->file_size);
	json_uint(&j, "log_size", o->log_size);
	json_uint(&j, "ckpt_percent", o->ckpt_percent ? o->ckpt_percent : 50);
	json_uint(&j, "repetitions", o->reps);
	json_num(&j, "duration", slice_total);
	json_arr(&j, "runs");
	for (unsigned c = 0; c < ncfg; c++) {
		const struct config *cf = &cfgs[c];
		const struct result *dw = find(cf, o->nmodes, "doublewrite"), *un = find(cf, o->nmodes, "unsafe");
		for (unsigned i = 0; i < o->nmodes; i++) {
			const struct result *r = &cf->res[i];
			if (r->skipped || !r->nrep)
				continue;
			double ub = (double)r->user_bytes;
			json_obj(&j, NULL);
			json_str(&j, "mode", r->mode->name);
			json_uint(&j, "threads", cf->threads);
			json_uint(&j, "page_size", cf->page);
			json_uint(&j, "ranges_per_group", cf->ranges);
			json_str(&j, "popularity", cf->theta > 0 ? "zipfian" : "uniform");
			json_num(&j, "zipf_theta", cf->theta);
			json_uint(&j, "compressible_pct", cf->comp);
			json_num(&j, "ops_per_sec", r->ops_median);
			/* bytes, not MB or MiB: the table's MB/s is this / 10^6 */
			json_num(&j, "bytes_per_sec", r->ops_median * cf->ranges * (double)cf->page);
			json_num(&j, "p50_us", hist_quantile(&r->lat, 0.50) / 1e3);
			json_num(&j, "p99_us", hist_quantile(&r->lat, 0.99) / 1e3);
			json_num(&j, "p999_us", hist_quantile(&r->lat, 0.999) / 1e3);
			json_num(&j, "mean_us", r->lat.count ? r->lat.sum / (double)r->lat.count / 1e3 : NAN);
			json_num(&j, "max_us", r->lat.count ? (double)r->lat.max / 1e3 : NAN);
			json_num(&j, "syncs_per_op", r->ops ? (double)r->waits / (double)r->ops : NAN);
			if (r->mode->finish) {
				json_num(&j, "log_syncs_per_op",
					 r->ops ? (double)r->log_syncs / (double)r->ops : NAN);
				json_uint(&j, "checkpoints_per_slice_min", r->ckpt_slice_min);
			}
			json_num(&j, "device_bytes_per_user_byte",
				 r->dev_ok && ub > 0 ? (double)r->dev_bytes / ub : NAN);
			json_num(&j, "process_bytes_per_user_byte",
				 r->proc_ok && ub > 0 ? (double)r->proc_bytes / ub : NAN);
			json_num(&j, "device_flushes_per_op",
				 r->dev_ok && r->ops ? (double)r->dev_flushes / (double)r->ops : NAN);
			json_num(&j, "device_writes_per_op",
				 r->dev_ok && r->ops ? (double)r->dev_ios / (double)r->ops : NAN);
			json_num(&j, "ops_vs_doublewrite", ratio(r->ops_median, dw));
			json_num(&j, "ops_vs_unsafe", ratio(r->ops_median, un));
			json_uint(&j, "ops", r->ops);
			json_num(&j, "seconds", r->secs);
			json_uint(&j, "user_bytes", r->user_bytes);
			json_uint(&j, "syncs", r->waits);
			if (r->log_bytes || r->home_bytes) {
				json_uint(&j, "log_bytes", r->log_bytes);
				json_uint(&j, "home_bytes", r->home_bytes);
				json_uint(&j, "checkpoints", r->checkpoints);
				json_uint(&j, "checkpointed_bytes", r->ckpt_bytes);
				json_num(&j, "log_bytes_per_user_byte", ub > 0 ? (double)r->log_bytes / ub : NAN);
				json_num(&j, "checkpointed_bytes_per_user_byte",
					 ub > 0 ? (double)r->ckpt_bytes / ub : NAN);
			}
			if (r->dev_ok) {
				json_uint(&j, "device_bytes", r->dev_bytes);
				json_uint(&j, "device_writes", r->dev_ios);
				json_uint(&j, "device_flushes", r->dev_flushes);
			} else {
				json_null(&j, "device_bytes");
				json_null(&j, "device_writes");
				json_null(&j, "device_flushes");
			}
			if (r->proc_ok)
				json_uint(&j, "process_bytes", r->proc_bytes);
			else
				json_null(&j, "process_bytes");
			json_arr(&j, "rep_ops");
			for (unsigned q = 0; q < r->nrep; q++)
				json_uint(&j, NULL, r->ops_rep[q]);
			json_end_arr(&j);
			json_arr(&j, "rep_seconds");
			for (unsigned q = 0; q < r->nrep; q++)
				json_num(&j, NULL, r->secs_rep[q]);
			json_end_arr(&j);
			json_arr(&j, "rep_ops_per_sec");
			for (unsigned q = 0; q < r->nrep; q++)
				json_num(&j, NULL, r->rate[q]);
			json_end_arr(&j);
			json_end_obj(&j);
		}
	}
	json_end_arr(&j);
	json_arr(&j, "skipped");
	for (unsigned c = 0; c < ncfg; c++)
		for (unsigned i = 0; i < o->nmodes; i++) {
			const struct result *r = &cfgs[c].res[i];
			if (!r->skipped)
				continue;
			json_obj(&j, NULL);
			json_str(&j, "mode", r->mode->name);
			json_uint(&j, "threads", cfgs[c].threads);
			json_uint(&j, "page_size", cfgs[c].page);
			json_uint(&j, "ranges_per_group", cfgs[c].ranges);
			json_num(&j, "zipf_theta", cfgs[c].theta);
			json_uint(&j, "compressible_pct", cfgs[c].comp);
			json_str(&j, "reason", r->skip);
			json_end_obj(&j);
		}
	json_end_arr(&j);
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
	       "  -t, --threads LIST     threads writing at once (default 1)\n"
	       "  -f, --files N          data files per mode; ranges spread over them (default 1)\n"
	       "  -z, --zipf LIST        page popularity: 0 = uniform (default), else zipfian with\n"
	       "                         this theta (0.99: YCSB's); a list runs each\n"
	       "  -c, --compressible LIST  percent of each page that compresses away (default 0;\n"
	       "                         e.g. 0,50,75); a list runs each\n"
	       "  -s, --file-size SIZE   bytes per data file (default 64M)\n"
	       "  -d, --duration SECS    total measured time, split evenly (default 20)\n"
	       "  -n, --repetitions N    repetitions of every mode (default 3)\n"
	       "  -m, --modes LIST       modes to run (default: all)\n"
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
	       "doublewrite and unsafe.  atomio's slices end with a checkpoint, counted; before\n"
	       "the first, a new log's first lap is written (uncounted: a new log is zeroed as\n"
	       "its records first reach each part, once in its life).  A line\n"
	       "under the table gives atomio's log syncs per commit (group commit) and the fewest\n"
	       "checkpoints a slice ran with.  The JSON adds atomio's log and checkpointed bytes\n"
	       "per user byte.\n\n"
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

static void parse(int argc, char **argv, struct opts *o)
{
	enum { O_BUFFERED = 256, O_DIRECT_OPT, O_LOG, O_JSON, O_PLOT, O_SEED, O_KEEP, O_CKPT, O_MINCK };
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
		{"help", no_argument, 0, 'h'},            {0, 0, 0, 0},
	};
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
		case 'q': o->quiet = true; break;
		case 'h': help(); exit(EX_OK);
		default: cli_bad_option(argv, c);
		}
	}
	if (argc - optind > 1)
		cli_usage("one DIR only");
	o->dir = optind < argc ? argv[optind] : ".";
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
	if (!modes) {
		for (unsigned i = 0; i < bench_nmodes && o->nmodes < MAX_MODES; i++)
			if (!bench_modes[i]->optional)
				o->modes[o->nmodes++] = bench_modes[i];
		return;
	}
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", modes);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		const struct bench_mode *m = NULL;
		for (unsigned i = 0; i < bench_nmodes; i++)
			if (!strcmp(bench_modes[i]->name, t))
				m = bench_modes[i];
		if (!m)
			cli_usage("--modes: no mode '%s' (modes: unsafe, doublewrite, atomio, kernel, "
				  "atomio-raw)", t);
		for (unsigned i = 0; i < o->nmodes; i++)
			if (o->modes[i] == m)
				cli_usage("--modes: '%s' twice", t);
		if (o->nmodes == MAX_MODES)
			cli_usage("--modes: too many");
		o->modes[o->nmodes++] = m;
	}
}

/* --- main ---------------------------------------------------------------------------- */

int cmd_bench(int argc, char **argv)
{
	struct opts o;
	parse(argc, argv, &o);
	progress_tty = isatty(2);
	bench_argc = argc;
	bench_argv = argv;
	json_stdout = stdout;
	if (o.json && !strcmp(o.json, "-")) {
		int fd = dup(STDOUT_FILENO);
		if (fd < 0 || !(json_stdout = fdopen(fd, "w")) || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
			cli_die(EX_ERROR, "--json -: %s", strerror(errno));
	}

	struct stat sb;
	if (stat(o.dir, &sb) < 0)
		cli_die(EX_ERROR, "%s: %s", o.dir, strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		cli_die(EX_ERROR, "%s: not a directory", o.dir);
	struct stx_info sx;
	int r = host_statx_info(AT_FDCWD, o.dir, 0, &sx);
	if (r < 0)
		cli_die(EX_ERROR, "%s: statx: %s", o.dir, strerror(-r));
	struct mount_info m;
	struct blk_info blk;
	host_mount_for(&sx, &m);
	host_blk_for(sx.dev, &m, &blk);
	char fs_desc[256];
	snprintf(fs_desc, sizeof(fs_desc), "%s %s%s", m.found ? m.fstype : "this filesystem",
		 blk.found ? "on " : "(no block device)", blk.found ? blk.name : "");

	/* Space: every mode's data files, atomio's log, the doublewrite scratch. */
	uint64_t max_page = 0, max_r = 0, max_t = 0, min_page = UINT64_MAX;
	for (unsigned i = 0; i < o.npages; i++) {
		max_page = o.pages[i] > max_page ? o.pages[i] : max_page;
		min_page = o.pages[i] < min_page ? o.pages[i] : min_page;
	}
	for (unsigned i = 0; i < o.nranges; i++)
		max_r = o.ranges[i] > max_r ? o.ranges[i] : max_r;
	for (unsigned i = 0; i < o.nthreads; i++)
		max_t = o.threads[i] > max_t ? o.threads[i] : max_t;
	uint64_t need = (uint64_t)o.nmodes * o.files * o.file_size + o.log_size + (3u << 20) +
			max_t * 64 * max_r * max_page;
	struct statvfs vfs;
	if (statvfs(o.dir, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < need + need / 10) {
		char a[32], b[32];
		cli_die(EX_ERROR, "%s: needs %s free, has %s (try a smaller --file-size)", o.dir,
			fmt_bytes(a, sizeof(a), need), fmt_bytes(b, sizeof(b), (uint64_t)vfs.f_bavail * vfs.f_frsize));
	}

	snprintf(run_dir, sizeof(run_dir), "%s/atomio-bench-XXXXXX", o.dir);
	if (!mkdtemp(run_dir))
		cli_die(EX_ERROR, "creating a directory in %s: %s", o.dir, strerror(errno));
	run_dir_made = true;
	keep_dir = o.keep;
	atexit(cleanup);
	struct sigaction sa = {0};
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	/* Data files, per mode. */
	char *paths[MAX_MODES][256];
	char mdir[MAX_MODES][PATH_MAX];
	if (!o.quiet) {
		char a[32];
		fprintf(stderr, "atomio bench: %s, %s; preparing %u x %u data file(s) of %s in %s\n",
			fs_desc, o.direct ? "O_DIRECT" : "buffered", o.nmodes, o.files,
			fmt_bytes(a, sizeof(a), o.file_size), run_dir);
	}
	for (unsigned i = 0; i < o.nmodes; i++) {
		snprintf(mdir[i], sizeof(mdir[i]), "%.4000s/%s", run_dir, o.modes[i]->name);
		if (mkdir(mdir[i], 0700) < 0)
			cli_die(EX_ERROR, "mkdir %s: %s", mdir[i], strerror(errno));
		for (unsigned f = 0; f < o.files; f++) {
			char p[PATH_MAX + 32];
			snprintf(p, sizeof(p), "%s/data-%u.dat", mdir[i], f);
			paths[i][f] = strdup(p);
			if (!paths[i][f])
				cli_die(EX_ERROR, "out of memory");
		}
	}
	bool filled[MAX_MODES] = {0};

	unsigned ncfg = o.nthreads * o.npages * o.nranges * o.nthetas * o.ncomps;
	struct config *cfgs = calloc(ncfg, sizeof(*cfgs));
	if (!cfgs)
		cli_die(EX_ERROR, "out of memory");
	unsigned ci = 0;
	for (unsigned a = 0; a < o.nthreads; a++)
		for (unsigned b = 0; b < o.npages; b++)
			for (unsigned c = 0; c < o.nranges; c++)
				for (unsigned z = 0; z < o.nthetas; z++)
					for (unsigned k = 0; k < o.ncomps; k++) {
						struct config *cf = &cfgs[ci++];
						cf->threads = (unsigned)o.threads[a];
						cf->page = (size_t)o.pages[b];
						cf->ranges = (unsigned)o.ranges[c];
						cf->theta = o.thetas[z];
						cf->comp = (unsigned)o.comps[k];
						if (cf->theta > 0) {
							uint64_t n = o.file_size / cf->page;
							if (n > (1u << 24))
								cli_usage("--zipf: at most 2^24 pages per file");
							cf->cdf = zipf_cdf(n, cf->theta);
						}
					}

	char header[768];
	size_t hn = (size_t)snprintf(header, sizeof(header), "atomio bench: %s", fs_desc);
	if (blk.found && hn < sizeof(header))
		hn += (size_t)snprintf(header + hn, sizeof(header) - hn, " (%s%swrite cache: %s, FUA: %s)",
				       blk.model, blk.model[0] ? ", " : "",
				       blk.write_cache[0] ? blk.write_cache : "unknown",
				       blk.fua < 0 ? "unknown" : blk.fua ? "yes" : "no");
	if (blk.backing[0] && hn < sizeof(header))
		hn += (size_t)snprintf(header + hn, sizeof(header) - hn, " over %.300s", blk.backing);
	if (hn < sizeof(header))
		snprintf(header + hn, sizeof(header) - hn, ", %s data files",
			 o.direct ? "O_DIRECT" : "buffered");

	for (unsigned c = 0; c < ncfg && !interrupted; c++) {
		struct config *cf = &cfgs[c];
		struct bench_env env[MAX_MODES];
		void *state[MAX_MODES] = {0};
		unsigned active = 0;
		for (unsigned i = 0; i < o.nmodes && !interrupted; i++) {
			struct result *res = &cf->res[i];
			res->mode = o.modes[i];
			hist_reset(&res->lat);
			if (!filled[i]) {
				for (unsigned f = 0; f < o.files; f++)
					prefill(paths[i][f], o.file_size, min_page);
				filled[i] = true;
			}
			env[i] = (struct bench_env){
				.dir = mdir[i], .paths = paths[i], .nfiles = o.files,
				.file_size = o.file_size, .page = cf->page, .ranges = cf->ranges,
				.threads = cf->threads, .direct = o.direct, .log_size = o.log_size,
				.fs_desc = fs_desc, .ckpt_percent = o.ckpt_percent, .theta = cf->theta, .cdf = cf->cdf, .compressible = cf->comp,
			};
			r = o.modes[i]->setup(&env[i], &state[i], res->skip, sizeof(res->skip));
			if (r < 0)
				cli_die(EX_ERROR, "%s mode: %s", o.modes[i]->name,
					res->skip[0] ? res->skip : strerror(-r));
			if (r == BENCH_SKIP) {
				res->skipped = true;
				state[i] = NULL;
				continue;
			}
			active++;
		}
		if (!active)
			continue;
		cf->slice = o.duration / ncfg / (o.reps * active);
		if (cf->slice < 0.02)
			cf->slice = 0.02;
		unsigned step = 0, nsteps = o.reps * active;
		for (unsigned rep = 0; rep < o.reps && !interrupted; rep++)
			for (unsigned k = 0; k < o.nmodes && !interrupted; k++) {
				unsigned i = (k + rep) % o.nmodes;
				if (cf->res[i].skipped)
					continue;
				run_slice(&o, cf, &cf->res[i], state[i], &env[i], &blk, rep, ++step, nsteps);
			}
		for (unsigned i = 0; i < o.nmodes; i++)
			if (state[i])
				o.modes[i]->teardown(state[i]);
		for (unsigned i = 0; i < o.nmodes; i++)
			cf->res[i].ops_median = median(cf->res[i].rate, cf->res[i].nrep);
	}
	progress_clear(&o);
	if (interrupted)
		cli_die(EX_ERROR, "interrupted; nothing reported");

	printf("%s\n", header);
	for (unsigned c = 0; c < ncfg; c++)
		print_table(&o, &cfgs[c]);
	printf("\nops/s: median of %u; latency: all ops; waits/op: fsync/fdatasync/RWF_DSYNC per op;\n"
	       "dev B/B: bytes %s wrote per user byte (whole device: other processes count too);\n"
	       "own B/B: this process's write_bytes (/proc/self/io) per user byte.\n",
	       o.reps, blk.found ? blk.name : "the device");
	if (!o.direct)
		printf("Buffered: the kernel charges a whole (large) folio to write_bytes when it dirties\n"
		       "part of one, so own B/B overstates buffered writes; dev B/B is what was written.\n");

	if (o.json)
		write_json(&o, o.json, cfgs, ncfg, &m, &blk, o.duration);
	if (o.plot) {
		struct plot_panel *pp = calloc(ncfg, sizeof(*pp));
		if (!pp)
			cli_die(EX_ERROR, "out of memory");
		for (unsigned c = 0; c < ncfg; c++) {
			const struct config *cf = &cfgs[c];
			char a[32];
			snprintf(pp[c].title, sizeof(pp[c].title), "%s pages, %u range%s/group, %u thread%s",
				 fmt_bytes(a, sizeof(a), cf->page), cf->ranges, cf->ranges == 1 ? "" : "s",
				 cf->threads, cf->threads == 1 ? "" : "s");
			for (unsigned i = 0; i < o.nmodes && pp[c].nmodes < 8; i++) {
				const struct result *res = &cf->res[i];
				struct plot_mode *pm = &pp[c].m[pp[c].nmodes++];
				pm->name = res->mode->name;
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
		snprintf(sub, sizeof(sub), "%s; median of %u repetitions, modes interleaved", header + 14,
			 o.reps);
		if (bench_plot(o.plot, "atomio bench", sub, pp, ncfg) < 0)
			cli_die(EX_ERROR, "--plot %s: %s", o.plot, strerror(errno));
		free(pp);
		if (!o.quiet)
			fprintf(stderr, "atomio bench: wrote %s\n", o.plot);
	}
	for (unsigned i = 0; i < o.nmodes; i++)
		for (unsigned f = 0; f < o.files; f++)
			free(paths[i][f]);
	for (unsigned c = 0; c < ncfg; c++)
		free(cfgs[c].cdf);
	free(cfgs);
	return EX_OK;
}
