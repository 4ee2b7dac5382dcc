/*
 * bench-engine: the engine's targets, side by side in one run.
 *
 * Three sections, each interleaving its modes (every repetition runs every
 * mode for the same time, in rotating order, so that drift on a shared
 * machine hits all alike), reporting medians over repetitions, and ratios two
 * ways: of the medians, and the median of each repetition's own ratio (modes
 * minutes apart on a shared machine see different loads; within a repetition
 * they are seconds apart):
 *
 *   single   one thread, one PAGE-byte page per operation:
 *              unsafe       pwrite + fdatasync (no torn-write protection)
 *              doublewrite  InnoDB's protocol: page to a scratch area +
 *                           fdatasync, then home + fdatasync
 *              plain        atomio_pwrite, plain engine
 *              uring        atomio_pwrite, io_uring engine
 *              direct-home  atomio_pwrite, io_uring, ATOMIO_DIRECT_HOME
 *   threads  atomio_pwrite from 1 and from T threads (each engine): commits/s
 *            and log syncs per commit
 *   groups   8 x 4 KiB pages across 2 files per operation:
 *              doublewrite  the 8 pages to the scratch area (one write) +
 *                           fdatasync, then home + fdatasync of each file
 *              plain/uring  one atomio group of the 8 ranges
 *
 * Every data file is preallocated (overwrites, as in a database) and O_DIRECT
 * unless -b.  Stores have a 64 MiB log, so checkpoints happen and count.
 *
 * usage: bench-engine [-d DIR] [-s SECONDS] [-r REPS] [-p PAGE] [-t THREADS]
 *                     [-b] [-x single,threads,groups]
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "atomio.h"

#define FILE_BYTES (64u << 20)
#define DW_SLOTS 64
#define GROUP 8
#define GPAGE 4096
#define MAXT 64

static const char *dir = "/var/tmp";
static double secs = 2;
static int reps = 3, direct = 1, nthreads = 8;
static size_t page = 16384;
static char base[4096];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmpd);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void fail(const char *what, long r)
{
	fprintf(stderr, "bench-engine: %s: %s\n", what, r < 0 ? atomio_strerror((int)r) : strerror(errno));
	exit(1);
}

static uint64_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

static void *page_buf(size_t len, int v)
{
	void *b;
	if (posix_memalign(&b, 4096, len))
		fail("memory", 0);
	memset(b, v, len);
	return b;
}

/* A plain file of FILE_BYTES, written (allocated) and synced. */
static int mkfile(const char *name)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s", base, name);
	int fd = open(p, O_RDWR | O_CREAT | (direct ? O_DIRECT : 0), 0644);
	if (fd < 0)
		fail(p, 0);
	char *b = page_buf(1 << 20, 0x5a);
	for (uint32_t off = 0; off < FILE_BYTES; off += 1 << 20)
		if (pwrite(fd, b, 1 << 20, off) != 1 << 20)
			fail("prefill", 0);
	if (fsync(fd))
		fail("fsync", 0);
	free(b);
	return fd;
}

struct store {
	const char *name;
	uint32_t flags;
	atomio *st;
	int f[2];
};

static void store_open(struct store *s)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s.log", base, s->name);
	struct atomio_options o = {.log_size = 64 << 20, .flags = ATOMIO_CREATE | s->flags};
	long r = atomio_open(p, &o, &s->st);
	if (r < 0)
		fail("atomio_open", r);
	for (int i = 0; i < 2; i++) {
		char n[64];
		snprintf(n, sizeof(n), "%s.%d.dat", s->name, i);
		close(mkfile(n));
		snprintf(p, sizeof(p), "%s/%s", base, n);
		s->f[i] = atomio_file_open(s->st, p, direct ? O_DIRECT : 0, 0);
		if (s->f[i] < 0)
			fail("atomio_file_open", s->f[i]);
	}
}

/* --- one operation of each kind ------------------------------------------------ */

struct plainfiles {
	int data[2], scratch;
	uint64_t slot;
};

static void op_unsafe(struct plainfiles *p, void *buf, uint64_t *seed)
{
	off_t off = (off_t)(rnd(seed) % (FILE_BYTES / page)) * (off_t)page;
	if (pwrite(p->data[0], buf, page, off) != (ssize_t)page || fdatasync(p->data[0]))
		fail("unsafe", 0);
}

static void op_dw(struct plainfiles *p, void *buf, uint64_t *seed)
{
	off_t off = (off_t)(rnd(seed) % (FILE_BYTES / page)) * (off_t)page;
	off_t so = (off_t)(p->slot++ % DW_SLOTS) * (off_t)page;
	if (pwrite(p->scratch, buf, page, so) != (ssize_t)page || fdatasync(p->scratch) ||
	    pwrite(p->data[1], buf, page, off) != (ssize_t)page || fdatasync(p->data[1]))
		fail("doublewrite", 0);
}

static void op_atomio(struct store *s, void *buf, uint64_t *seed)
{
	off_t off = (off_t)(rnd(seed) % (FILE_BYTES / page)) * (off_t)page;
	long r = atomio_pwrite(s->st, s->f[0], buf, page, off);
	if (r != (long)page)
		fail("atomio_pwrite", r);
}

static void pick_group(uint64_t *seed, off_t *offs)
{
	for (int i = 0; i < GROUP; i++)
		offs[i] = (off_t)(rnd(seed) % (FILE_BYTES / GPAGE)) * GPAGE;
}

static void op_dw_group(struct plainfiles *p, void *buf, uint64_t *seed)
{
	off_t offs[GROUP];
	pick_group(seed, offs);
	/* the 8 pages side by side in the scratch area: one write */
	off_t so = (off_t)(p->slot++ % (DW_SLOTS / 2)) * GROUP * GPAGE;
	if (pwrite(p->scratch, buf, GROUP * GPAGE, so) != GROUP * GPAGE || fdatasync(p->scratch))
		fail("doublewrite", 0);
	for (int i = 0; i < GROUP; i++)
		if (pwrite(p->data[i % 2], (char *)buf + i * GPAGE, GPAGE, offs[i]) != GPAGE)
			fail("doublewrite", 0);
	if (fdatasync(p->data[0]) || fdatasync(p->data[1]))
		fail("doublewrite", 0);
}

static void op_atomio_group(struct store *s, void *buf, uint64_t *seed)
{
	off_t offs[GROUP];
	pick_group(seed, offs);
	atomio_tx *tx;
	long r = atomio_tx_begin(s->st, &tx);
	for (int i = 0; i < GROUP && r == 0; i++)
		r = atomio_tx_write(tx, s->f[i % 2], (char *)buf + i * GPAGE, GPAGE, offs[i]);
	if (r == 0)
		r = atomio_tx_commit(tx);
	if (r < 0)
		fail("atomio group", r);
}

/* --- threads ------------------------------------------------------------------- */

struct worker {
	pthread_t th;
	struct store *s;
	uint64_t seed, ops;
	volatile int *stop;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	void *buf = page_buf(page, (int)(w->seed & 0xff));
	while (!*w->stop) {
		op_atomio(w->s, buf, &w->seed);
		w->ops++;
	}
	free(buf);
	return NULL;
}

static double run_threads(struct store *s, int nt, double *syncs_per_commit)
{
	struct worker w[MAXT];
	volatile int stop = 0;
	struct atomio_stats s0, s1;
	atomio_stats(s->st, &s0);
	double t0 = now();
	for (int i = 0; i < nt; i++) {
		w[i] = (struct worker){.s = s, .seed = (uint64_t)(i + 1) * 7919, .stop = &stop};
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]))
			fail("pthread_create", 0);
	}
	usleep((useconds_t)(secs * 1e6));
	stop = 1;
	uint64_t ops = 0;
	for (int i = 0; i < nt; i++) {
		pthread_join(w[i].th, NULL);
		ops += w[i].ops;
	}
	double dt = now() - t0;
	atomio_stats(s->st, &s1);
	uint64_t c = s1.commits - s0.commits;
	*syncs_per_commit = c ? (double)(s1.log_syncs - s0.log_syncs) / (double)c : 0;
	return (double)ops / dt;
}

/* --- main -------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	const char *sections = "single,threads,groups";
	int c;
	while ((c = getopt(argc, argv, "d:s:r:p:t:bx:")) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 's': secs = atof(optarg); break;
		case 'r': reps = atoi(optarg); break;
		case 'p': page = (size_t)atol(optarg); break;
		case 't': nthreads = atoi(optarg); break;
		case 'b': direct = 0; break;
		case 'x': sections = optarg; break;
		default:
			fprintf(stderr, "usage: bench-engine [-d DIR] [-s SECONDS] [-r REPS] [-p PAGE] "
					"[-t THREADS] [-b] [-x single,threads,groups]\n");
			return 2;
		}
	}
	if (reps < 1 || nthreads < 1 || nthreads > MAXT || page < 4096 || page % 4096 || page > (1 << 20))
		fail("bad arguments", -EINVAL);
	snprintf(base, sizeof(base), "%s/atomio-bench-engine-XXXXXX", dir);
	if (!mkdtemp(base))
		fail("mkdtemp", 0);

	struct plainfiles pf = {.data = {mkfile("plain.0"), mkfile("plain.1")}, .scratch = mkfile("scratch")};
	struct store stores[3] = {{.name = "plain", .flags = ATOMIO_ENGINE_PLAIN},
				  {.name = "uring", .flags = ATOMIO_ENGINE_URING},
				  {.name = "direct-home", .flags = ATOMIO_ENGINE_URING | ATOMIO_DIRECT_HOME}};
	for (int i = 0; i < 3; i++)
		store_open(&stores[i]);
	struct atomio_caps caps;
	atomio_caps(stores[1].st, stores[1].f[0], &caps);
	struct statfs sfs;
	fstatfs(pf.scratch, &sfs);
	printf("bench-engine: %s (fs magic 0x%lx), %s data files, %d reps x %.1f s per mode, "
	       "uring store runs the %s engine\n",
	       base, (unsigned long)sfs.f_type, direct ? "O_DIRECT" : "buffered", reps, secs,
	       caps.engine == ATOMIO_ENGINE_URING ? "io_uring" : "plain (io_uring unavailable)");

	void *buf = page_buf(GROUP * GPAGE > page ? GROUP * GPAGE : page, 0xa5);
	uint64_t seed = 12345;

	if (strstr(sections, "single")) {
		enum { NM = 5 };
		const char *names[NM] = {"unsafe", "doublewrite", "plain", "uring", "direct-home"};
		double rate[NM][64];
		printf("\n[single] %zu-byte atomio_pwrite, 1 thread\n", page);
		for (int rep = 0; rep < reps && rep < 64; rep++)
			for (int k = 0; k < NM; k++) {
				int m = (k + rep) % NM;
				uint64_t ops = 0;
				double t0 = now(), t1;
				do {
					((uint64_t *)buf)[0] = seed;
					if (m == 0)
						op_unsafe(&pf, buf, &seed);
					else if (m == 1)
						op_dw(&pf, buf, &seed);
					else
						op_atomio(&stores[m - 2], buf, &seed);
					ops++;
					t1 = now();
				} while (t1 - t0 < secs);
				rate[m][rep] = (double)ops / (t1 - t0);
				printf("  rep %d %-12s %8.0f ops/s\n", rep + 1, names[m], rate[m][rep]);
				fflush(stdout);
			}
		double med[NM], ru[NM][64], rd[NM][64];
		for (int m = 0; m < NM; m++)
			for (int rep = 0; rep < reps && rep < 64; rep++) {
				ru[m][rep] = rate[m][rep] / rate[0][rep];
				rd[m][rep] = rate[m][rep] / rate[1][rep];
			}
		for (int m = 0; m < NM; m++)
			med[m] = median(rate[m], reps);
		printf("%-12s %12s %10s %10s %14s %14s\n", "mode", "median op/s", "vs unsafe", "vs dblwr",
		       "per-rep unsafe", "per-rep dblwr");
		for (int m = 0; m < NM; m++)
			printf("%-12s %12.0f %9.2fx %9.2fx %13.2fx %13.2fx\n", names[m], med[m], med[m] / med[0],
			       med[m] / med[1], median(ru[m], reps), median(rd[m], reps));
	}

	if (strstr(sections, "threads")) {
		printf("\n[threads] %zu-byte atomio_pwrite from 1 and %d threads\n", page, nthreads);
		double rate[2][2][64], spc[2][2][64];
		for (int rep = 0; rep < reps && rep < 64; rep++)
			for (int k = 0; k < 4; k++) {
				int m = (k + rep) % 4, e = m / 2, t = m % 2;
				rate[e][t][rep] = run_threads(&stores[e], t ? nthreads : 1, &spc[e][t][rep]);
				printf("  rep %d %-6s %2d threads %8.0f commits/s %6.3f log syncs/commit\n", rep + 1,
				       stores[e].name, t ? nthreads : 1, rate[e][t][rep], spc[e][t][rep]);
				fflush(stdout);
			}
		printf("%-8s %14s %14s %8s %9s %18s\n", "engine", "1 thread c/s", "T threads c/s", "ratio",
		       "per-rep", "syncs/commit (T)");
		for (int e = 0; e < 2; e++) {
			double one = median(rate[e][0], reps), many = median(rate[e][1], reps), pr[64];
			for (int rep = 0; rep < reps && rep < 64; rep++)
				pr[rep] = rate[e][1][rep] / rate[e][0][rep];
			printf("%-8s %14.0f %14.0f %7.2fx %8.2fx %18.3f\n", stores[e].name, one, many, many / one,
			       median(pr, reps), median(spc[e][1], reps));
		}
	}

	if (strstr(sections, "groups")) {
		enum { NM = 3 };
		const char *names[NM] = {"doublewrite", "plain", "uring"};
		double rate[NM][64];
		printf("\n[groups] %d x %d-byte pages across 2 files per group, 1 thread\n", GROUP, GPAGE);
		for (int rep = 0; rep < reps && rep < 64; rep++)
			for (int k = 0; k < NM; k++) {
				int m = (k + rep) % NM;
				uint64_t ops = 0;
				double t0 = now(), t1;
				do {
					if (m == 0)
						op_dw_group(&pf, buf, &seed);
					else
						op_atomio_group(&stores[m - 1], buf, &seed);
					ops++;
					t1 = now();
				} while (t1 - t0 < secs);
				rate[m][rep] = (double)ops / (t1 - t0);
				printf("  rep %d %-12s %8.0f groups/s\n", rep + 1, names[m], rate[m][rep]);
				fflush(stdout);
			}
		double med[NM], rd[NM][64];
		for (int m = 0; m < NM; m++) {
			med[m] = median(rate[m], reps);
			for (int rep = 0; rep < reps && rep < 64; rep++)
				rd[m][rep] = rate[m][rep] / rate[0][rep];
		}
		printf("%-12s %14s %10s %14s\n", "mode", "median grp/s", "vs dblwr", "per-rep dblwr");
		for (int m = 0; m < NM; m++)
			printf("%-12s %14.0f %9.2fx %13.2fx\n", names[m], med[m], med[m] / med[0], median(rd[m], reps));
	}

	for (int i = 0; i < 3; i++) {
		struct atomio_stats s;
		atomio_stats(stores[i].st, &s);
		printf("%s store: %llu commits, %llu log syncs, %llu checkpoints, %.2f log bytes per home byte\n",
		       stores[i].name, (unsigned long long)s.commits, (unsigned long long)s.log_syncs,
		       (unsigned long long)s.checkpoints,
		       s.bytes_home ? (double)s.bytes_logged / (double)s.bytes_home : 0.0);
		long r = atomio_close(stores[i].st);
		if (r < 0)
			fail("atomio_close", r);
	}
	char cmd[4300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) ? 1 : 0;
}
