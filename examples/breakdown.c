/*
 * breakdown: where a one-thread commit's time goes (issue 11, item 1),
 * against pwrite + fdatasync of the same page, in one run.
 *
 * N operations alternate between the two: an atomio_pwrite of a PAGE-byte
 * incompressible page to a random page of an O_DIRECT file in a store with
 * the default options, and an unsafe pwrite + fdatasync of a page of another
 * O_DIRECT file.  The store runs on a wrapping ops table (src/sys.h) that
 * times, in the committing thread, each system call the commit makes: the
 * log write (RWF_DSYNC), the home write (into the page cache of the file's
 * buffered twin), and any other; the rest of a commit's time is the
 * library's own CPU (record layout, LZ4 attempt, XXH3, copies) and its
 * locks.  Calls from the store's checkpointer thread are counted apart.
 * Medians and means, in microseconds.
 *
 * usage: breakdown [-d DIR] [-n OPS] [-p PAGE] [-s FILE_BYTES]
 * (make breakdown [BENCH_DIR=/var/tmp] [BREAKDOWN_ARGS=...])
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "atomio.h"
#include "sys.h"

static const char *dir = "/var/tmp";
static int nops = 4000;
static size_t page = 16384;
static uint64_t fsize = 128ull << 20;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The committing thread's system-call time in this operation. */
static __thread uint64_t t_log, t_home, t_other;
static __thread int in_commit;
static uint64_t bg_calls, bg_ns; /* other threads (the checkpointer) */
static struct atomio_sysops ops;

static ssize_t w_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	uint64_t t0 = now_ns();
	ssize_t n = atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
	uint64_t dt = now_ns() - t0;
	if (!in_commit) {
		__atomic_fetch_add(&bg_calls, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&bg_ns, dt, __ATOMIC_RELAXED);
	} else if (rwf & RWF_DSYNC) {
		t_log += dt;
	} else {
		t_home += dt;
	}
	return n;
}

#define TIMED(name, proto, args)                                          \
	static int w_##name proto                                         \
	{                                                                 \
		uint64_t t0 = now_ns();                                   \
		int r = atomio_sys_linux.name args;                       \
		uint64_t dt = now_ns() - t0;                              \
		if (in_commit)                                            \
			t_other += dt;                                    \
		else {                                                    \
			__atomic_fetch_add(&bg_calls, 1, __ATOMIC_RELAXED); \
			__atomic_fetch_add(&bg_ns, dt, __ATOMIC_RELAXED);   \
		}                                                         \
		return r;                                                 \
	}
TIMED(fsync, (int fd), (fd))
TIMED(fdatasync, (int fd), (fd))
TIMED(sync_file_range, (int fd, off_t off, off_t len, unsigned flags), (fd, off, len, flags))
TIMED(fadvise, (int fd, off_t off, off_t len, int advice), (fd, off, len, advice))

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void row(const char *name, uint64_t *v, int n, double ref_p50)
{
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += (double)v[i];
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	double p50 = (double)v[n / 2] / 1000, p99 = (double)v[n * 99 / 100] / 1000;
	printf("| %-44s | %8.1f | %8.1f | %8.1f |", name, p50, sum / n / 1000, p99);
	if (ref_p50 > 0)
		printf(" %5.2fx |\n", p50 / ref_p50);
	else
		printf("        |\n");
}

static void die(const char *what, int r)
{
	fprintf(stderr, "breakdown: %s: %s\n", what, r < 0 ? atomio_strerror(r) : strerror(errno));
	exit(1);
}

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "d:n:p:s:")) != -1) {
		if (c == 'd')
			dir = optarg;
		else if (c == 'n')
			nops = atoi(optarg);
		else if (c == 'p')
			page = strtoull(optarg, NULL, 0);
		else if (c == 's')
			fsize = strtoull(optarg, NULL, 0) << 20;
		else {
			fprintf(stderr, "usage: breakdown [-d DIR] [-n OPS] [-p PAGE] [-s FILE_MIB]\n");
			return 2;
		}
	}
	if (nops < 100 || page < 4096 || page % 4096 || fsize < 16 * page) {
		fprintf(stderr, "breakdown: need -n >= 100, -p a multiple of 4096, -s >= 16 pages\n");
		return 2;
	}
	char tmpl[4096];
	snprintf(tmpl, sizeof(tmpl), "%s/atomio-breakdown-XXXXXX", dir);
	if (!mkdtemp(tmpl))
		die("mkdtemp", 0);
	char logp[4200], ap[4200], up[4200];
	snprintf(logp, sizeof(logp), "%s/log", tmpl);
	snprintf(ap, sizeof(ap), "%s/a.dat", tmpl);
	snprintf(up, sizeof(up), "%s/u.dat", tmpl);

	ops = atomio_sys_linux;
	ops.name = "timed";
	ops.pwritev = w_pwritev;
	ops.fsync = w_fsync;
	ops.fdatasync = w_fdatasync;
	ops.sync_file_range = w_sync_file_range;
	ops.fadvise = w_fadvise;
	atomio_sys_set(&ops);

	/* Both files preallocated with data: overwrites, as in a database. */
	char *buf;
	if (posix_memalign((void **)&buf, 4096, page))
		die("memory", 0);
	srand(1);
	for (int k = 0; k < 2; k++) {
		int fd = open(k ? up : ap, O_CREAT | O_WRONLY | O_TRUNC, 0644);
		if (fd < 0)
			die(k ? up : ap, 0);
		for (uint64_t off = 0; off < fsize; off += page) {
			for (size_t i = 0; i < page; i++)
				buf[i] = (char)rand();
			if (pwrite(fd, buf, page, (off_t)off) != (ssize_t)page)
				die("prefill", 0);
		}
		if (fsync(fd) < 0)
			die("fsync", 0);
		close(fd);
	}
	atomio *st;
	struct atomio_options o = {.flags = ATOMIO_CREATE}; /* the defaults */
	int r = atomio_open(logp, &o, &st);
	if (r < 0)
		die("atomio_open", r);
	int af = atomio_file_open(st, ap, O_DIRECT, 0);
	if (af < 0)
		die("atomio_file_open", af);
	int uf = open(up, O_WRONLY | O_DIRECT);
	if (uf < 0)
		die(up, 0);

	uint64_t *tot = calloc((size_t)nops, 8), *lw = calloc((size_t)nops, 8), *hw = calloc((size_t)nops, 8),
		 *oth = calloc((size_t)nops, 8), *cpu = calloc((size_t)nops, 8), *ut = calloc((size_t)nops, 8),
		 *uw = calloc((size_t)nops, 8), *us = calloc((size_t)nops, 8);
	if (!tot || !lw || !hw || !oth || !cpu || !ut || !uw || !us)
		die("memory", 0);
	uint64_t pages = fsize / page;
	for (int i = 0; i < nops; i++) {
		for (size_t j = 0; j < page; j += 8) {
			uint64_t x = ((uint64_t)rand() << 32) ^ (uint64_t)rand();
			memcpy(buf + j, &x, 8);
		}
		uint64_t off = ((uint64_t)rand() % pages) * page;
		t_log = t_home = t_other = 0;
		in_commit = 1;
		uint64_t t0 = now_ns();
		ssize_t n = atomio_pwrite(st, af, buf, page, off);
		uint64_t t1 = now_ns();
		in_commit = 0;
		if (n != (ssize_t)page)
			die("atomio_pwrite", (int)n);
		tot[i] = t1 - t0;
		lw[i] = t_log;
		hw[i] = t_home;
		oth[i] = t_other;
		cpu[i] = tot[i] - t_log - t_home - t_other;

		off = ((uint64_t)rand() % pages) * page;
		t0 = now_ns();
		if (pwrite(uf, buf, page, (off_t)off) != (ssize_t)page)
			die("pwrite", 0);
		t1 = now_ns();
		if (fdatasync(uf) < 0)
			die("fdatasync", 0);
		uint64_t t2 = now_ns();
		ut[i] = t2 - t0;
		uw[i] = t1 - t0;
		us[i] = t2 - t1;
	}
	struct atomio_stats s;
	atomio_stats(st, &s);
	r = atomio_close(st);
	if (r < 0)
		die("atomio_close", r);
	close(uf);

	printf("breakdown: %d x %zu-byte incompressible pages, 1 thread, uniform over a %llu MiB O_DIRECT file, "
	       "default options; atomio and unsafe interleaved op by op\n",
	       nops, page, (unsigned long long)(fsize >> 20));
	qsort(ut, (size_t)nops, 8, cmp_u64);
	double ref = (double)ut[nops / 2] / 1000;
	printf("| %-44s | %8s | %8s | %8s | %6s |\n", "step (us)", "p50", "mean", "p99", "/unsafe");
	printf("|---|---|---|---|---|\n");
	row("atomio_pwrite, whole commit", tot, nops, ref);
	row("  log write (O_DIRECT, RWF_DSYNC)", lw, nops, 0);
	row("  home write (page cache of the twin)", hw, nops, 0);
	row("  other system calls in the commit", oth, nops, 0);
	row("  the library's CPU and locks (the rest)", cpu, nops, 0);
	row("unsafe pwrite + fdatasync", ut, nops, 0);
	row("  pwrite (O_DIRECT)", uw, nops, 0);
	row("  fdatasync", us, nops, 0);
	printf("store: %llu commits, %llu log writes, %llu checkpoints, %.2f log bytes per user byte; "
	       "checkpointer thread: %llu calls, %.1f ms in them\n",
	       (unsigned long long)s.commits, (unsigned long long)s.log_syncs, (unsigned long long)s.checkpoints,
	       (double)s.bytes_logged / ((double)s.commits * (double)page), (unsigned long long)bg_calls,
	       (double)bg_ns / 1e6);
	unlink(logp);
	unlink(ap);
	unlink(up);
	rmdir(tmpl);
	return 0;
}
