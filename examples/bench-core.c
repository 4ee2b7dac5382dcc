/*
 * bench-core: 16 KiB atomic page writes, side by side in one run.
 *
 *   unsafe       pwrite + fdatasync of the page (no torn-write protection)
 *   doublewrite  InnoDB's protocol: page to a scratch area + fdatasync,
 *                then the page home + fdatasync
 *   atomio       atomio_pwrite (one durable log write, then the home write)
 *
 * Modes are interleaved: each repetition runs every mode for the same time,
 * in rotating order, so that drift on a shared machine hits all alike; the
 * report gives medians over repetitions and ratios.  The `atomio bench`
 * command (tools/) is the full benchmark; this is the core's own check.
 *
 * usage: bench-core [-d DIR] [-s SECONDS] [-r REPS] [-p PAGE] [-b] (buffered; default O_DIRECT)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "atomio.h"

#define FILE_PAGES 4096 /* data file: 4096 pages */
#define DW_SLOTS 64

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

static void fail(const char *what, long r)
{
	fprintf(stderr, "bench-core: %s: %s\n", what, r < 0 ? atomio_strerror((int)r) : strerror(errno));
	exit(1);
}

int main(int argc, char **argv)
{
	const char *dir = "/var/tmp";
	double secs = 2;
	int reps = 3, direct = 1;
	size_t page = 16384;
	int c;
	while ((c = getopt(argc, argv, "d:s:r:p:b")) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 's': secs = atof(optarg); break;
		case 'r': reps = atoi(optarg); break;
		case 'p': page = (size_t)atol(optarg); break;
		case 'b': direct = 0; break;
		default:
			fprintf(stderr, "usage: bench-core [-d DIR] [-s SECONDS] [-r REPS] [-p PAGE] [-b]\n");
			return 2;
		}
	}
	char base[4096], path[4200];
	snprintf(base, sizeof(base), "%s/atomio-bench-XXXXXX", dir);
	if (!mkdtemp(base))
		fail("mkdtemp", 0);
	int oflag = O_RDWR | O_CREAT | (direct ? O_DIRECT : 0);
	void *buf;
	if (posix_memalign(&buf, 4096, page))
		return 1;
	memset(buf, 0xA5, page);

	/* the unprotected and doublewrite data files, and the scratch area */
	snprintf(path, sizeof(path), "%s/plain.dat", base);
	int fplain = open(path, oflag, 0644);
	snprintf(path, sizeof(path), "%s/dw.dat", base);
	int fdw = open(path, oflag, 0644);
	snprintf(path, sizeof(path), "%s/dw.scratch", base);
	int fscr = open(path, oflag, 0644);
	if (fplain < 0 || fdw < 0 || fscr < 0)
		fail("open", 0);
	/* atomio's data file and log */
	atomio *st;
	struct atomio_options o = {.log_size = 64 << 20, .flags = ATOMIO_CREATE};
	snprintf(path, sizeof(path), "%s/atomio.log", base);
	long r = atomio_open(path, &o, &st);
	if (r < 0)
		fail("atomio_open", r);
	snprintf(path, sizeof(path), "%s/atomio.dat", base);
	int fa = atomio_file_open(st, path, O_CREAT | (direct ? O_DIRECT : 0), 0644);
	if (fa < 0)
		fail("atomio_file_open", fa);
	/* preallocate every file with real blocks: overwrites, as in a database */
	for (int i = 0; i < FILE_PAGES; i++) {
		off_t off = (off_t)i * (off_t)page;
		if (pwrite(fplain, buf, page, off) != (ssize_t)page || pwrite(fdw, buf, page, off) != (ssize_t)page ||
		    pwrite(atomio_file_fd(st, fa), buf, page, off) != (ssize_t)page)
			fail("prefill", 0);
		if (i < DW_SLOTS && pwrite(fscr, buf, page, off) != (ssize_t)page)
			fail("prefill", 0);
	}
	fsync(fplain);
	fsync(fdw);
	fsync(fscr);
	fsync(atomio_file_fd(st, fa));

	const char *names[3] = {"unsafe", "doublewrite", "atomio"};
	double *rate[3];
	for (int m = 0; m < 3; m++)
		rate[m] = calloc((size_t)reps, sizeof(double));
	uint64_t seed = 12345;
	struct atomio_stats s0, s1;
	uint64_t at_commits = 0, at_syncs = 0;
	struct statfs sfs;
	fstatfs(fplain, &sfs);
	printf("bench-core: %zu-byte pages, %s, %s (fs magic 0x%lx), %d reps x %.1f s per mode\n", page,
	       direct ? "O_DIRECT" : "buffered", base, (unsigned long)sfs.f_type, reps, secs);
	for (int rep = 0; rep < reps; rep++) {
		for (int k = 0; k < 3; k++) {
			int m = (k + rep) % 3;
			uint64_t ops = 0, dwslot = 0;
			atomio_stats(st, &s0);
			double t0 = now(), t1;
			do {
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				off_t off = (off_t)((seed >> 33) % FILE_PAGES) * (off_t)page;
				((uint64_t *)buf)[0] = seed;
				if (m == 0) {
					if (pwrite(fplain, buf, page, off) != (ssize_t)page || fdatasync(fplain))
						fail("unsafe", 0);
				} else if (m == 1) {
					off_t so = (off_t)(dwslot++ % DW_SLOTS) * (off_t)page;
					if (pwrite(fscr, buf, page, so) != (ssize_t)page || fdatasync(fscr) ||
					    pwrite(fdw, buf, page, off) != (ssize_t)page || fdatasync(fdw))
						fail("doublewrite", 0);
				} else {
					r = atomio_pwrite(st, fa, buf, page, off);
					if (r != (long)page)
						fail("atomio_pwrite", r);
				}
				ops++;
				t1 = now();
			} while (t1 - t0 < secs);
			rate[m][rep] = (double)ops / (t1 - t0);
			if (m == 2) {
				atomio_stats(st, &s1);
				at_commits += s1.commits - s0.commits;
				at_syncs += s1.log_syncs - s0.log_syncs;
			}
			printf("  rep %d %-12s %8.0f ops/s\n", rep + 1, names[m], rate[m][rep]);
			fflush(stdout);
		}
	}
	double med[3];
	for (int m = 0; m < 3; m++) {
		qsort(rate[m], (size_t)reps, sizeof(double), cmpd);
		med[m] = reps % 2 ? rate[m][reps / 2] : (rate[m][reps / 2 - 1] + rate[m][reps / 2]) / 2;
	}
	atomio_stats(st, &s1);
	printf("\n%-12s %12s %12s %12s\n", "mode", "median ops/s", "vs unsafe", "vs dblwrite");
	for (int m = 0; m < 3; m++)
		printf("%-12s %12.0f %11.2fx %11.2fx\n", names[m], med[m], med[m] / med[0], med[m] / med[1]);
	printf("atomio: %.3f log syncs per commit, %llu checkpoints, %.2f log bytes per user byte\n",
	       at_commits ? (double)at_syncs / (double)at_commits : 0.0, (unsigned long long)s1.checkpoints,
	       s1.bytes_home ? (double)s1.bytes_logged / (double)s1.bytes_home : 0.0);
	atomio_close(st);
	char cmd[4300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd))
		return 1;
	return 0;
}
