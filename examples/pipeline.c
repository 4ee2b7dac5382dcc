/*
 * pipeline: where many writers' time goes (docs/PERFORMANCE.md, "Where the
 * time goes at 8 writers"), beside unsafe pwrite + fdatasync from as many
 * writers, in one run.
 *
 * T writers (threads, or with -P processes that each atomio_open the same
 * log and join the store) commit PAGE-byte incompressible pages at random
 * places of one O_DIRECT file, in a store with the default options whose
 * log's first lap was written first (the steady state).  Slices of atomio
 * and of unsafe (T writers of pwrite + fdatasync on a file of their own)
 * alternate, R repetitions of S seconds.  The store runs on a wrapping ops
 * table (src/sys.h), installed before any writer process is forked, that
 * records every log write (RWF_DSYNC), home write, data sync, write-back
 * request and futex wait and wake with its thread, start and end, into
 * shared memory.  From them, per atomio slice:
 *
 *  - the log: writes/s, mean size, duration, the share of the time with one
 *    (or two) in flight, the gaps between them;
 *  - each commit's share of the writers' time: in the log write (the
 *    leader's), in home writes, waiting on futexes (for the batch to fill:
 *    the short timed waits; for the log role, the home turn, or the leader
 *    to hand the group back: the others), waking others, and the rest
 *    (CPU: record layout, checksum, compression attempt, copies; the
 *    mutex; other calls);
 *  - each writer's running and run-queue time (/proc/thread-self/schedstat)
 *    and context switches, per commit; CPU per commit (getrusage);
 *  - the checkpoints: data syncs' share of the time, and log writes that
 *    overlapped one against those that did not.
 *
 * With -g G, each commit is a group of G pages over two files (alternating,
 * as `atomio bench -r G -f 2`), and unsafe writes them with G pwrites and a
 * fdatasync of each file.
 *
 * usage: pipeline [-d DIR] [-t WRITERS] [-P] [-u] [-M] [-N] [-g PAGES] [-r REPS] [-s SECONDS] [-p PAGE] [-f FILE_MIB]
 * (-u: atomio's slices only, to profile them; -M: the store's shared state
 * mapped with its page tables filled at once, MADV_POPULATE_WRITE, instead
 * of a page fault at each page's first touch in each process; -N: a null
 * device under atomio once the log is warm -- its log writes (RWF_DSYNC),
 * data syncs and write-back requests return at once without reaching the
 * disk, the home writes still go to the page cache -- so that atomio's
 * slices show what its commit path alone allows on this CPU, beside unsafe
 * on the real disk; a measurement, never a way to run: nothing is durable)
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "atomio.h"
#include "sys.h"

static const char *dir = "/var/tmp";
static unsigned nw = 8, reps = 3;
static double secs = 5;
static size_t page = 16384;
static uint64_t fsize = 128ull << 20;
static int procs, no_unsafe, populate, null_dev;
static unsigned gpages = 1; /* -g: pages per commit, over two files when more than one */
static _Atomic int nulling; /* -N, from the first slice on (inherited by writer processes) */

/* The next value of a xorshift64 sequence (page bytes and places). */
static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
	return *s;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- events, in shared memory ------------------------------------------------ */

enum { EV_LOG, EV_HOME, EV_SYNC, EV_WB, EV_FILLWAIT, EV_WAIT, EV_WAKE, EV_LOCK, EV_MAP, EV_FADV, EV_N };
#define EV_COMMIT EV_N /* a writer's whole atomio commit (not a call: the tail's analysis) */
static const char *ev_name[EV_N] = {"log write", "home write", "data sync", "write-back", "fill wait",
				    "other wait", "wake", "byte lock (liveness)", "shared map/unmap",
				    "fadvise"};
struct ev {
	uint64_t t0, t1, bytes;
	int16_t writer; /* -1: not a writer (the checkpointer, the setup) */
	uint8_t type;
};
#define MAX_EV (4u << 20)
struct shared {
	_Atomic uint64_t nev;
	_Atomic int recording;
	_Atomic int stop;
	_Atomic uint64_t ops[64];
	uint64_t run_ns[64], rq_ns[64]; /* schedstat deltas of each writer */
	double cpu[64];                 /* a writer process's CPU seconds */
	long nvcsw[64], nivcsw[64], minflt[64];
	struct ev ev[MAX_EV];
};
static struct shared *sh;
static __thread int my_writer = -1;

static void rec(int type, uint64_t t0, uint64_t t1, uint64_t bytes)
{
	if (!atomic_load_explicit(&sh->recording, memory_order_relaxed))
		return;
	uint64_t i = atomic_fetch_add(&sh->nev, 1);
	if (i < MAX_EV)
		sh->ev[i] = (struct ev){.t0 = t0, .t1 = t1, .bytes = bytes, .writer = (int16_t)my_writer,
					.type = (uint8_t)type};
}

static struct atomio_sysops ops;
static ssize_t w_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	uint64_t t0 = now_ns();
	ssize_t n = 0;
	if ((rwf & RWF_DSYNC) && atomic_load_explicit(&nulling, memory_order_relaxed))
		for (int i = 0; i < iovcnt; i++)
			n += (ssize_t)iov[i].iov_len; /* -N: the log write "done" */
	else
		n = atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
	rec(rwf & RWF_DSYNC ? EV_LOG : EV_HOME, t0, now_ns(), n > 0 ? (uint64_t)n : 0);
	return n;
}
static int w_fdatasync(int fd)
{
	uint64_t t0 = now_ns();
	int r = atomic_load_explicit(&nulling, memory_order_relaxed) ? 0 : atomio_sys_linux.fdatasync(fd);
	rec(EV_SYNC, t0, now_ns(), 0);
	return r;
}
static int w_fsync(int fd)
{
	uint64_t t0 = now_ns();
	int r = atomic_load_explicit(&nulling, memory_order_relaxed) ? 0 : atomio_sys_linux.fsync(fd);
	rec(EV_SYNC, t0, now_ns(), 0);
	return r;
}
static int w_sfr(int fd, off_t off, off_t len, unsigned flags)
{
	uint64_t t0 = now_ns();
	int r = atomic_load_explicit(&nulling, memory_order_relaxed) ? 0
									: atomio_sys_linux.sync_file_range(fd, off, len, flags);
	rec(EV_WB, t0, now_ns(), (uint64_t)len);
	return r;
}
static int w_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t ns)
{
	uint64_t t0 = now_ns();
	int r = atomio_sys_linux.futex_wait(word, val, ns);
	/* the fill wait is bounded by a quarter of a log write, at most 1 ms;
	 * the others by the liveness check's period */
	rec(ns && ns <= 1000000u ? EV_FILLWAIT : EV_WAIT, t0, now_ns(), 0);
	return r;
}
static int w_futex_wake(_Atomic uint32_t *word, int n)
{
	uint64_t t0 = now_ns();
	int r = atomio_sys_linux.futex_wake(word, n);
	rec(EV_WAKE, t0, now_ns(), 0);
	return r;
}

static int w_ofd_lock(int fd, int cmd, int type, uint64_t start, uint64_t len)
{
	uint64_t t0 = now_ns();
	int r = atomio_sys_linux.ofd_lock(fd, cmd, type, start, len);
	rec(EV_LOCK, t0, now_ns(), 0);
	return r;
}
static int w_shm_map(int fd, size_t len, void **out)
{
	uint64_t t0 = now_ns();
	int r = atomio_sys_linux.shm_map(fd, len, out);
	/* -M: the whole mapping's page tables filled at once, not page by page
	 * as a new process first touches each page (MAP_POPULATE's effect) */
	if (r == 0 && populate)
		(void)madvise(*out, len, MADV_POPULATE_WRITE);
	rec(EV_MAP, t0, now_ns(), len);
	return r;
}
static int w_shm_unmap(void *p, size_t len)
{
	uint64_t t0 = now_ns();
	int r = atomio_sys_linux.shm_unmap(p, len);
	rec(EV_MAP, t0, now_ns(), len);
	return r;
}
static int w_fadvise(int fd, off_t off, off_t len, int advice)
{
	uint64_t t0 = now_ns();
	int r = atomio_sys_linux.fadvise(fd, off, len, advice);
	rec(EV_FADV, t0, now_ns(), (uint64_t)len);
	return r;
}

/* --- writers ------------------------------------------------------------------- */

static char logp[4200], ap[4200], up[4200], bp[4200], vp[4200];
static atomio *st0;
static int af0, bf0;

static void die(const char *what, int r)
{
	fprintf(stderr, "pipeline: %s: %s\n", what, r < 0 ? atomio_strerror(r) : strerror(errno));
	exit(1);
}

static void schedstat(uint64_t *run, uint64_t *rq)
{
	unsigned long long a = 0, b = 0;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");
	if (f && fscanf(f, "%llu %llu", &a, &b) != 2)
		a = b = 0;
	if (f)
		fclose(f);
	*run = a;
	*rq = b;
}

struct wctx {
	unsigned id;
	int unsafe_fd, unsafe_fd2; /* >= 0: an unsafe writer (its second file for groups) */
	atomio *st;
	int af, bf;
};

/* One group of gpages pages, alternating between the two files, at random
 * places (the same page data each: incompressible all the same). */
static void group(struct wctx *c, const char *buf, uint64_t *s, uint64_t pages)
{
	atomio_tx *tx = NULL;
	uint64_t t_start = now_ns();
	int r = c->unsafe_fd >= 0 ? 0 : atomio_tx_begin(c->st, &tx);
	for (unsigned i = 0; r == 0 && i < gpages; i++) {
		off_t off = (off_t)((xorshift(s) % pages) * page);
		if (c->unsafe_fd >= 0)
			r = pwrite(i % 2 ? c->unsafe_fd2 : c->unsafe_fd, buf, page, off) == (ssize_t)page ? 0 : -errno;
		else
			r = atomio_tx_write(tx, i % 2 ? c->bf : c->af, buf, page, off);
	}
	if (c->unsafe_fd >= 0) {
		if (r < 0 || fdatasync(c->unsafe_fd) < 0 || fdatasync(c->unsafe_fd2) < 0)
			die("unsafe group", r);
	} else if (r < 0 || (r = atomio_tx_commit(tx)) < 0) {
		die("atomio group", r);
	}
	rec(EV_COMMIT, t_start, now_ns(), 0);
}

static void writer_loop(struct wctx *c)
{
	my_writer = (int)c->id;
	char *buf;
	if (posix_memalign((void **)&buf, 4096, page))
		die("memory", 0);
	uint64_t s = 0x9E3779B97F4A7C15ull * (c->id + 1), pages = fsize / page;
	uint64_t r0, q0, r1, q1;
	struct rusage u0, u1;
	getrusage(RUSAGE_THREAD, &u0);
	schedstat(&r0, &q0);
	while (!atomic_load(&sh->stop)) {
		for (size_t j = 0; j < page; j += 8) {
			uint64_t x = xorshift(&s);
			memcpy(buf + j, &x, 8);
		}
		uint64_t off = (s % pages) * page;
		if (gpages > 1) {
			group(c, buf, &s, pages);
		} else if (c->unsafe_fd >= 0) {
			uint64_t t0 = now_ns();
			if (pwrite(c->unsafe_fd, buf, page, (off_t)off) != (ssize_t)page || fdatasync(c->unsafe_fd) < 0)
				die("unsafe write", 0);
			rec(EV_COMMIT, t0, now_ns(), 0);
		} else {
			uint64_t t0 = now_ns();
			ssize_t n = atomio_pwrite(c->st, c->af, buf, page, (off_t)off);
			if (n != (ssize_t)page)
				die("atomio_pwrite", (int)n);
			rec(EV_COMMIT, t0, now_ns(), 0);
		}
		atomic_fetch_add_explicit(&sh->ops[c->id], 1, memory_order_relaxed);
	}
	schedstat(&r1, &q1);
	getrusage(RUSAGE_THREAD, &u1);
	sh->run_ns[c->id] = r1 - r0;
	sh->rq_ns[c->id] = q1 - q0;
	sh->cpu[c->id] = (double)(u1.ru_utime.tv_sec - u0.ru_utime.tv_sec + u1.ru_stime.tv_sec - u0.ru_stime.tv_sec) +
			 (double)(u1.ru_utime.tv_usec - u0.ru_utime.tv_usec + u1.ru_stime.tv_usec - u0.ru_stime.tv_usec) / 1e6;
	sh->nvcsw[c->id] = u1.ru_nvcsw - u0.ru_nvcsw;
	sh->nivcsw[c->id] = u1.ru_nivcsw - u0.ru_nivcsw;
	sh->minflt[c->id] = u1.ru_minflt - u0.ru_minflt;
	free(buf);
}

static void *writer_thread(void *arg)
{
	writer_loop(arg);
	return NULL;
}

/* One slice of T writers (atomio or unsafe); returns its seconds. */
static double slice(int unsafe)
{
	atomic_store(&sh->stop, 0);
	for (unsigned k = 0; k < nw; k++)
		sh->ops[k] = 0;
	pthread_t tid[64];
	pid_t pid[64];
	struct wctx c[64];
	int ufd = -1, vfd = -1;
	if (unsafe && (ufd = open(up, O_WRONLY | O_DIRECT)) < 0)
		die(up, 0);
	if (unsafe && gpages > 1 && (vfd = open(vp, O_WRONLY | O_DIRECT)) < 0)
		die(vp, 0);
	for (unsigned k = 0; k < nw; k++)
		c[k] = (struct wctx){.id = k, .unsafe_fd = ufd, .unsafe_fd2 = vfd, .st = st0, .af = af0, .bf = bf0};
	atomic_store(&sh->nev, 0);
	atomic_store(&sh->recording, 1); /* unsafe's: its commits only (it makes no calls through the ops table) */
	uint64_t t0 = now_ns();
	for (unsigned k = 0; k < nw; k++) {
		if (!procs) {
			if (pthread_create(&tid[k], NULL, writer_thread, &c[k]))
				die("pthread_create", 0);
			continue;
		}
		pid[k] = fork();
		if (pid[k] < 0)
			die("fork", 0);
		if (pid[k] == 0) {
			if (!unsafe) {
				/* a process of its own joins the store */
				struct atomio_options o = {0};
				int r = atomio_open(logp, &o, &c[k].st);
				if (r < 0)
					die("atomio_open (joining)", r);
				if ((c[k].af = atomio_file_open(c[k].st, ap, O_DIRECT, 0)) < 0)
					die("atomio_file_open", c[k].af);
				if (gpages > 1 && (c[k].bf = atomio_file_open(c[k].st, bp, O_DIRECT, 0)) < 0)
					die("atomio_file_open", c[k].bf);
			}
			writer_loop(&c[k]);
			if (!unsafe)
				atomio_close(c[k].st);
			_exit(0);
		}
	}
	struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
	nanosleep(&ts, NULL);
	atomic_store(&sh->stop, 1);
	for (unsigned k = 0; k < nw; k++) {
		if (!procs) {
			pthread_join(tid[k], NULL);
			continue;
		}
		int stt;
		if (waitpid(pid[k], &stt, 0) < 0 || !WIFEXITED(stt) || WEXITSTATUS(stt))
			die("writer process", 0);
	}
	double d = (double)(now_ns() - t0) / 1e9;
	atomic_store(&sh->recording, 0);
	if (ufd >= 0)
		close(ufd);
	if (vfd >= 0)
		close(vfd);
	return d;
}

/* --- analysis ---------------------------------------------------------------------- */

static int cmp_ev(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;
	return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Time covered by at least k of the events of type t (sorted by t0). */
static double covered(const struct ev *e, uint64_t n, int type, int k)
{
	/* sweep: +1 at t0, -1 at t1 */
	uint64_t m = 0;
	for (uint64_t i = 0; i < n; i++)
		m += e[i].type == type;
	if (!m)
		return 0;
	uint64_t *pts = malloc(2 * m * sizeof(uint64_t));
	uint64_t j = 0;
	for (uint64_t i = 0; i < n; i++)
		if (e[i].type == type) {
			pts[j++] = e[i].t0 << 1 | 1;
			pts[j++] = e[i].t1 << 1;
		}
	qsort(pts, j, sizeof(uint64_t), cmp_u64);
	int depth = 0;
	uint64_t last = 0, tot = 0;
	for (uint64_t i = 0; i < j; i++) {
		uint64_t t = pts[i] >> 1;
		if (depth >= k)
			tot += t - last;
		depth += (pts[i] & 1) ? 1 : -1;
		last = t;
	}
	free(pts);
	return (double)tot / 1e9;
}

struct totals {
	double secs, ops, uops, usecs;
	double per[EV_N];   /* writers' seconds in each kind of call */
	uint64_t cnt[EV_N]; /* all calls, writers' and not */
	double bg_sync, log_busy, log_busy2, log_bytes, nlog;
	double run, rq, cpu, nvcsw, nivcsw, minflt;
	double log_ovl_sum, log_ovl_n, log_free_sum, log_free_n;
	uint64_t *logd;
	uint64_t nlogd, logd_cap;
	double gap_sum, ngap;
	/* the slowest 0.1% of commits: how many, their time, and within it
	 * the time covered by a log write, by the writer's own home writes, by
	 * a write-back request or a data sync (anyone's) */
	double slow_n, slow_sum, slow_log, slow_home, slow_wb, slow_sync;
	double lat[2][3], nlat[2]; /* commits' p50, p99, p99.9 per slice, summed: [0] atomio, [1] unsafe */
};

/* Time of [a0, a1) covered by events of type t with t0 in [a0 - back, a1)
 * (writer w only, unless w < 0); e sorted by t0. */
static double overlap(const struct ev *e, uint64_t n, uint64_t a0, uint64_t a1, int t, int w)
{
	const uint64_t back = 50000000u; /* no call of interest lasts 50 ms */
	uint64_t lo = 0, hi = n;
	while (lo < hi) { /* first event with t0 >= a0 - back */
		uint64_t mid = (lo + hi) / 2;
		if (e[mid].t0 + back < a0)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint64_t cov = 0, end = a0; /* covered up to end (events by t0) */
	for (uint64_t i = lo; i < n && e[i].t0 < a1; i++) {
		if (e[i].type != t || (w >= 0 && e[i].writer != w))
			continue;
		uint64_t s0 = e[i].t0 > end ? e[i].t0 : end, s1 = e[i].t1 < a1 ? e[i].t1 : a1;
		if (s1 > s0) {
			cov += s1 - s0;
			end = s1;
		}
	}
	return (double)cov / 1e9;
}

/* A copy of the events of one type (*m of them), in their order; malloc'd. */
static struct ev *of_type(const struct ev *e, uint64_t n, int type, uint64_t *m)
{
	uint64_t k = 0;
	for (uint64_t i = 0; i < n; i++)
		k += e[i].type == type;
	struct ev *v = malloc((k + 1) * sizeof(*v));
	if (!v)
		die("memory", 0);
	k = 0;
	for (uint64_t i = 0; i < n; i++)
		if (e[i].type == type)
			v[k++] = e[i];
	*m = k;
	return v;
}

static int cmp_dur(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;
	uint64_t dx = x->t1 - x->t0, dy = y->t1 - y->t0;
	return dx < dy ? -1 : dx > dy;
}

/* The slice's events recorded (at most MAX_EV). */
static uint64_t nevents(void)
{
	uint64_t n = atomic_load(&sh->nev);
	if (n > MAX_EV) {
		fprintf(stderr, "pipeline: more than %u events: shorten -s\n", MAX_EV);
		n = MAX_EV;
	}
	return n;
}

/* A slice's commits (its EV_COMMIT events), by duration (*k of them),
 * malloc'd; their p50, p99 and p99.9 into T->lat[m] ([0] atomio, [1]
 * unsafe) when there are enough. */
static struct ev *commits(struct totals *T, int m, const struct ev *e, uint64_t n, uint64_t *k)
{
	struct ev *c = of_type(e, n, EV_COMMIT, k);
	qsort(c, *k, sizeof(*c), cmp_dur);
	if (*k >= 1000) {
		const uint64_t at[3] = {*k / 2, *k * 99 / 100, *k * 999 / 1000};
		for (int i = 0; i < 3; i++)
			T->lat[m][i] += (double)(c[at[i]].t1 - c[at[i]].t0) / 1e3;
		T->nlat[m]++;
	}
	return c;
}

static void analyse(struct totals *T, double d)
{
	uint64_t n = nevents();
	struct ev *e = sh->ev;
	qsort(e, n, sizeof(*e), cmp_ev);
	T->secs += d;
	for (unsigned k = 0; k < nw; k++) {
		T->ops += (double)sh->ops[k];
		T->run += (double)sh->run_ns[k] / 1e9;
		T->rq += (double)sh->rq_ns[k] / 1e9;
		T->cpu += sh->cpu[k];
		T->nvcsw += (double)sh->nvcsw[k];
		T->nivcsw += (double)sh->nivcsw[k];
		T->minflt += (double)sh->minflt[k];
	}
	/* the data syncs (checkpoints'), few */
	uint64_t nsync, ncom;
	struct ev *syncs = of_type(e, n, EV_SYNC, &nsync);
	/* the slowest 0.1% of commits, against what ran meanwhile */
	struct ev *com = commits(T, 0, e, n, &ncom);
	if (ncom >= 1000) {
		for (uint64_t j = ncom * 999 / 1000; j < ncom; j++) {
			const struct ev *c = &com[j];
			T->slow_n++;
			T->slow_sum += (double)(c->t1 - c->t0) / 1e9;
			T->slow_log += overlap(e, n, c->t0, c->t1, EV_LOG, -1);
			T->slow_home += overlap(e, n, c->t0, c->t1, EV_HOME, c->writer);
			T->slow_wb += overlap(e, n, c->t0, c->t1, EV_WB, -1);
			T->slow_sync += overlap(e, n, c->t0, c->t1, EV_SYNC, -1);
		}
	}
	free(com);
	uint64_t prev_end = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (e[i].type == EV_COMMIT)
			continue;
		double dt = (double)(e[i].t1 - e[i].t0) / 1e9;
		T->cnt[e[i].type]++;
		if (e[i].writer >= 0)
			T->per[e[i].type] += dt;
		else if (e[i].type == EV_SYNC)
			T->bg_sync += dt;
		if (e[i].type == EV_LOG) {
			T->log_bytes += (double)e[i].bytes;
			T->nlog++;
			if (T->nlogd == T->logd_cap) {
				T->logd_cap = T->logd_cap ? 2 * T->logd_cap : 65536;
				T->logd = realloc(T->logd, T->logd_cap * sizeof(uint64_t));
			}
			T->logd[T->nlogd++] = e[i].t1 - e[i].t0;
			if (prev_end && e[i].t0 > prev_end) {
				T->gap_sum += (double)(e[i].t0 - prev_end) / 1e9;
				T->ngap++;
			} else if (prev_end) {
				T->ngap++;
			}
			prev_end = e[i].t1 > prev_end ? e[i].t1 : prev_end;
			/* did a data sync (a checkpoint's) run at the same time? */
			int ovl = 0;
			for (uint64_t q = 0; q < nsync && !ovl; q++)
				ovl = syncs[q].t0 < e[i].t1 && syncs[q].t1 > e[i].t0;
			if (ovl) {
				T->log_ovl_sum += dt;
				T->log_ovl_n++;
			} else {
				T->log_free_sum += dt;
				T->log_free_n++;
			}
		}
	}
	free(syncs);
	T->log_busy += covered(e, n, EV_LOG, 1);
	T->log_busy2 += covered(e, n, EV_LOG, 2);
}

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "d:t:PuMNg:r:s:p:f:")) != -1) {
		if (c == 'd')
			dir = optarg;
		else if (c == 't')
			nw = (unsigned)atoi(optarg);
		else if (c == 'P')
			procs = 1;
		else if (c == 'M')
			populate = 1; /* the shared state mapped whole at open (MADV_POPULATE_WRITE) */
		else if (c == 'g')
			gpages = (unsigned)atoi(optarg);
		else if (c == 'N')
			null_dev = 1; /* atomio on a null device (see the top) */
		else if (c == 'u')
			no_unsafe = 1; /* atomio's slices only (to profile them) */
		else if (c == 'r')
			reps = (unsigned)atoi(optarg);
		else if (c == 's')
			secs = atof(optarg);
		else if (c == 'p')
			page = strtoull(optarg, NULL, 0);
		else if (c == 'f')
			fsize = strtoull(optarg, NULL, 0) << 20;
		else {
			fprintf(stderr, "usage: pipeline [-d DIR] [-t WRITERS] [-P] [-u] [-M] [-N] [-g PAGES] [-r REPS] [-s SECONDS] [-p PAGE] [-f FILE_MIB]\n");
			return 2;
		}
	}
	if (nw < 1 || nw > 64 || reps < 1 || secs <= 0 || page < 4096 || page % 4096 || fsize < 16 * page ||
	    gpages < 1 || gpages > 256) {
		fprintf(stderr, "pipeline: need 1-64 writers, -p a multiple of 4096, -f >= 16 pages, -g 1-256\n");
		return 2;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap", 0);
	char tmpl[4096];
	snprintf(tmpl, sizeof(tmpl), "%s/atomio-pipeline-XXXXXX", dir);
	if (!mkdtemp(tmpl))
		die("mkdtemp", 0);
	snprintf(logp, sizeof(logp), "%s/log", tmpl);
	snprintf(ap, sizeof(ap), "%s/a.dat", tmpl);
	snprintf(up, sizeof(up), "%s/u.dat", tmpl);
	snprintf(bp, sizeof(bp), "%s/b.dat", tmpl);
	snprintf(vp, sizeof(vp), "%s/v.dat", tmpl);

	ops = atomio_sys_linux;
	ops.name = "recording";
	ops.pwritev = w_pwritev;
	ops.fsync = w_fsync;
	ops.fdatasync = w_fdatasync;
	ops.sync_file_range = w_sfr;
	ops.futex_wait = w_futex_wait;
	ops.futex_wake = w_futex_wake;
	ops.ofd_lock = w_ofd_lock;
	ops.shm_map = w_shm_map;
	ops.shm_unmap = w_shm_unmap;
	ops.fadvise = w_fadvise;
	atomio_sys_set(&ops);

	char *buf;
	size_t chunk = 1 << 20;
	if (posix_memalign((void **)&buf, 4096, chunk))
		die("memory", 0);
	uint64_t s = 42;
	for (size_t j = 0; j < chunk; j += 8) {
		uint64_t x = xorshift(&s);
		memcpy(buf + j, &x, 8);
	}
	const char *files[4] = {ap, up, bp, vp};
	for (int k = 0; k < (gpages > 1 ? 4 : 2); k++) {
		int fd = open(files[k], O_CREAT | O_WRONLY | O_TRUNC, 0644);
		if (fd < 0)
			die(files[k], 0);
		for (uint64_t off = 0; off < fsize; off += page)
			if (pwrite(fd, buf + (off % chunk), page, (off_t)off) != (ssize_t)page)
				die("prefill", 0);
		if (fsync(fd) < 0)
			die("fsync", 0);
		close(fd);
	}
	struct atomio_options o = {.flags = ATOMIO_CREATE}; /* the defaults */
	int r = atomio_open(logp, &o, &st0);
	if (r < 0)
		die("atomio_open", r);
	if ((af0 = atomio_file_open(st0, ap, O_DIRECT, 0)) < 0)
		die("atomio_file_open", af0);
	if (gpages > 1 && (bf0 = atomio_file_open(st0, bp, O_DIRECT, 0)) < 0)
		die("atomio_file_open", bf0);
	/* the log's first lap, written before measuring (as atomio bench does) */
	struct atomio_caps caps;
	atomio_caps(st0, -1, &caps);
	struct atomio_stats stt = {0};
	for (uint64_t off = 0; stt.bytes_logged <= caps.log_size + chunk; off = (off + chunk) % fsize) {
		if (atomio_pwrite(st0, af0, buf, chunk, (off_t)off) != (ssize_t)chunk)
			die("warming the log", 0);
		atomio_stats(st0, &stt);
	}
	if ((r = atomio_checkpoint(st0)) < 0)
		die("atomio_checkpoint", r);

	atomic_store(&nulling, null_dev);
	struct totals T = {0};
	struct atomio_stats s0, s1;
	atomio_stats(st0, &s0);
	double ucpu = 0, acpu_self = 0;
	for (unsigned rep = 0; rep < reps; rep++) {
		/* unsafe, then atomio (the order alternates) */
		for (int k = 0; k < 2; k++) {
			int unsafe = (k + (int)rep) % 2 == 0;
			if (unsafe && no_unsafe)
				continue;
			struct rusage a0, a1;
			getrusage(RUSAGE_SELF, &a0);
			double d = slice(unsafe);
			getrusage(RUSAGE_SELF, &a1);
			double cs = (double)(a1.ru_utime.tv_sec - a0.ru_utime.tv_sec + a1.ru_stime.tv_sec - a0.ru_stime.tv_sec) +
				    (double)(a1.ru_utime.tv_usec - a0.ru_utime.tv_usec + a1.ru_stime.tv_usec - a0.ru_stime.tv_usec) / 1e6;
			if (unsafe) {
				for (unsigned q = 0; q < nw; q++)
					T.uops += (double)sh->ops[q];
				uint64_t nc;
				free(commits(&T, 1, sh->ev, nevents(), &nc));
				T.usecs += d;
				if (procs)
					for (unsigned q = 0; q < nw; q++)
						cs += sh->cpu[q];
				ucpu += cs;
			} else {
				analyse(&T, d);
				acpu_self += cs;
			}
		}
	}
	atomio_stats(st0, &s1);
	double commits = (double)(s1.commits - s0.commits);
	/* atomio's CPU: this process's during its slices (threads, the
	 * checkpointer), plus writer processes' own */
	double acpu = acpu_self + (procs ? T.cpu : 0);

	qsort(T.logd, T.nlogd, sizeof(uint64_t), cmp_u64);
	char what[64] = "";
	if (gpages > 1)
		snprintf(what, sizeof(what), " in groups of %u over 2 files", gpages);
	printf("pipeline%s%s: %u writer %s, %zu-byte incompressible pages%s, uniform over a %llu MiB O_DIRECT file, "
	       "default options, steady state; %u x %.1f s per mode, alternating\n",
	       populate ? " -M" : "", null_dev ? " -N (atomio on a null device: its log writes and syncs return at once)" : "",
	       nw, procs ? "processes" : "threads", page, what, (unsigned long long)(fsize >> 20), reps, secs);
	double ops_s = T.ops / T.secs, u_s = T.usecs > 0 ? T.uops / T.usecs : NAN;
	printf("atomio %.0f commits/s, unsafe %.0f/s: %.2fx; CPU per op: atomio %.1f us, unsafe %.1f us\n", ops_s, u_s,
	       ops_s / u_s, acpu / T.ops * 1e6, ucpu / T.uops * 1e6);
	printf("log: %.0f writes/s of %.1f KiB (%.2f groups each); duration p50 %.0f us, mean %.0f, p99 %.0f, p99.9 %.0f;\n"
	       "     one in flight %.0f%% of the time, two %.0f%%; gap from one's end to the next's start %.0f us mean\n",
	       T.nlog / T.secs, T.log_bytes / T.nlog / 1024, commits / (double)(s1.log_syncs - s0.log_syncs),
	       (double)T.logd[T.nlogd / 2] / 1e3, (T.log_ovl_sum + T.log_free_sum) / T.nlog * 1e6,
	       (double)T.logd[T.nlogd * 99 / 100] / 1e3, (double)T.logd[T.nlogd * 999 / 1000] / 1e3, 100 * T.log_busy / T.secs, 100 * T.log_busy2 / T.secs,
	       T.ngap ? T.gap_sum / T.ngap * 1e6 : 0);
	printf("checkpoints: %llu in %.1f s; data syncs (not in writers) %.0f%% of the time; log writes during one "
	       "%.0f us mean (%.0f of them), otherwise %.0f us (%.0f)\n",
	       (unsigned long long)(s1.checkpoints - s0.checkpoints), T.secs, 100 * T.bg_sync / T.secs,
	       T.log_ovl_n ? T.log_ovl_sum / T.log_ovl_n * 1e6 : 0, T.log_ovl_n,
	       T.log_free_n ? T.log_free_sum / T.log_free_n * 1e6 : 0, T.log_free_n);
	for (int m = 0; m < 2; m++)
		if (T.nlat[m])
			printf("%s commits' latency (mean of the slices' percentiles): p50 %.0f us, p99 %.0f, p99.9 %.0f\n",
			       m ? "unsafe" : "atomio", T.lat[m][0] / T.nlat[m], T.lat[m][1] / T.nlat[m],
			       T.lat[m][2] / T.nlat[m]);
	if (T.slow_n)
		printf("slowest 0.1%% of commits (p99.9 %.0f us): %.0f us mean, of it %.0f us with a log write in flight, "
		       "%.0f in its writer's home writes, %.0f beside a write-back request, %.0f beside a data sync\n",
		       T.lat[0][2] / T.nlat[0], T.slow_sum / T.slow_n * 1e6, T.slow_log / T.slow_n * 1e6,
		       T.slow_home / T.slow_n * 1e6, T.slow_wb / T.slow_n * 1e6, T.slow_sync / T.slow_n * 1e6);
	double wall = nw * T.secs; /* writers' time */
	printf("| per commit, us (writers' time / commits) | us | share |\n|---|---|---|\n");
	printf("| all (%u writers x time / commits) | %.1f | 100%% |\n", nw, wall / T.ops * 1e6);
	double named = 0;
	for (int k = 0; k < EV_N; k++) {
		if (k == EV_SYNC && !T.per[k])
			continue;
		named += T.per[k];
		printf("| %s (%.2f calls per commit) | %.1f | %.0f%% |\n", ev_name[k], (double)T.cnt[k] / T.ops,
		       T.per[k] / T.ops * 1e6, 100 * T.per[k] / wall);
	}
	printf("| the rest: CPU, the mutex, scheduling | %.1f | %.0f%% |\n", (wall - named) / T.ops * 1e6,
	       100 * (wall - named) / wall);
	printf("(calls per commit by everyone, writers or not:");
	for (int k = 0; k < EV_N; k++)
		printf(" %s %.3f%s", ev_name[k], (double)T.cnt[k] / T.ops, k + 1 < EV_N ? "," : ")\n");
	printf("writers: running %.1f us per commit, waiting for a CPU (run queue) %.1f us; "
	       "%.2f voluntary + %.2f involuntary context switches, %.2f page faults per commit\n",
	       T.run / T.ops * 1e6, T.rq / T.ops * 1e6, T.nvcsw / T.ops, T.nivcsw / T.ops, T.minflt / T.ops);
	double la[3];
	if (getloadavg(la, 3) == 3)
		printf("load average at the end: %.2f %.2f %.2f\n", la[0], la[1], la[2]);
	atomio_close(st0);
	unlink(logp);
	unlink(ap);
	unlink(up);
	unlink(bp);
	unlink(vp);
	rmdir(tmpl);
	return 0;
}
