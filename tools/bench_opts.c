/*
 * bench_opts.c: `atomio bench`'s options: --help, parsing, modes.
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

void bench_parse(int argc, char **argv, struct opts *o)
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

