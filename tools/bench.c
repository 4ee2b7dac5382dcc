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
#include "bench_driver.h"

/* --- files --------------------------------------------------------------------- */

static int rm_cb(const char *p, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(p);
}

char bench_run_dir[PATH_MAX];
static bool keep_dir;

static void cleanup(void)
{
	if (bench_run_dir_made && !keep_dir) {
		nftw(bench_run_dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
		bench_run_dir_made = false;
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
		uint64_t v = bench_rnd(&s);
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
	bench_json_stdout = stdout;
	if (o->json && !strcmp(o->json, "-")) {
		int fd = dup(STDOUT_FILENO);
		if (fd < 0 || !(bench_json_stdout = fdopen(fd, "w")) || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
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
	snprintf(bench_run_dir, sizeof(bench_run_dir), "%s/atomio-bench-XXXXXX", o->dir);
	if (!mkdtemp(bench_run_dir))
		cli_die(EX_ERROR, "creating a directory in %s: %s", o->dir, strerror(errno));
	bench_run_dir_made = true;
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
			fmt_bytes(a, sizeof(a), o->file_size), bench_run_dir);
	}
	for (unsigned i = 0; i < o->nmodes; i++) {
		snprintf(x->mdir[i], sizeof(x->mdir[i]), "%.4000s/%s%s", bench_run_dir, o->modes[i]->name,
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
	for (unsigned i = 0; i < o->nmodes && !bench_interrupted; i++) {
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
	for (unsigned rep = 0; rep < o->reps && !bench_interrupted; rep++)
		for (unsigned k = 0; k < o->nmodes && !bench_interrupted; k++) {
			unsigned i = (k + rep) % o->nmodes;
			if (cf->res[i].skipped)
				continue;
			run_slice(o, cf, &cf->res[i], state[i], &env[i], &x->blk, rep, ++step, nsteps);
		}
	for (unsigned i = 0; i < o->nmodes; i++)
		if (state[i])
			o->modes[i]->teardown(state[i]);
	for (unsigned i = 0; i < o->nmodes; i++)
		cf->res[i].ops_median = bench_median(cf->res[i].rate, cf->res[i].nrep);
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
	if (bench_probe_err[0])
		printf("Device probe: none (%s).\n", bench_probe_err);
	printf("CPUs: %ld online%s%s.\n", bench_cpus_online, bench_cpu_model[0] ? ", " : "", bench_cpu_model);
	double end[3];
	if (bench_load_ok && getloadavg(end, 3) == 3)
		printf("Load average (1, 5, 15 min): %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end.\n",
		       bench_load_start[0], bench_load_start[1], bench_load_start[2], end[0], end[1], end[2]);
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
			pm->ops_min = bench_minv(res->rate, res->nrep);
			pm->ops_max = bench_maxv(res->rate, res->nrep);
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
	bench_parse(argc, argv, o);
	bench_load_ok = getloadavg(bench_load_start, 3) == 3;
	cpu_info();
	bench_ctl = mmap(NULL, sizeof(*bench_ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (bench_ctl == MAP_FAILED)
		cli_die(EX_ERROR, "mmap: %s", strerror(errno));
	atexit(release_writers);
	bench_progress_tty = isatty(2);
	bench_argc = argc;
	bench_argv = argv;
	json_to_stdout(o);
	examine_dir(x);
	check_space(x);
	make_dirs(x);
	make_configs(x);
	make_header(x);
	for (unsigned c = 0; c < x->ncfg && !bench_interrupted; c++)
		run_config(x, &x->cfgs[c]);
	bench_probe_done();
	progress_clear(o);
	if (bench_interrupted)
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

