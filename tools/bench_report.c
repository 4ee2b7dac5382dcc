/*
 * bench_report.c: `atomio bench`'s report: the table, the JSON.
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

void print_table(const struct opts *o, const struct config *c)
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
	       bench_cpus_online);
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
FILE *bench_json_stdout;
double bench_load_start[3]; /* load average when the run began */
bool bench_load_ok;
int bench_argc;
char **bench_argv;

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
		json_num(j, NULL, bench_load_ok ? bench_load_start[i] : NAN);
	json_end_arr(j);
	json_arr(j, "load_average_end");
	for (int i = 0; i < 3; i++)
		json_num(j, NULL, ok ? end[i] : NAN);
	json_end_arr(j);
	json_num(j, "cpus_online", bench_cpus_online > 0 ? (double)bench_cpus_online : NAN);
	json_str(j, "cpu_model", bench_cpu_model[0] ? bench_cpu_model : NULL);
	json_str(j, "device_probe_error", bench_probe_err[0] ? bench_probe_err : NULL);
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

void write_json(const struct opts *o, const char *path, const struct config *cfgs,
		       unsigned ncfg, const struct mount_info *m, const struct blk_info *b,
		       double slice_total)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "w") : bench_json_stdout;
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

