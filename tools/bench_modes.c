/*
 * bench_modes.c: the ways `atomio bench` writes a group of pages durably.
 *
 *   unsafe       pwrite each page + fdatasync each file: durable, no torn-page
 *                protection (the baseline of what the device costs)
 *   doublewrite  InnoDB's protocol: all pages to a scratch area + fdatasync,
 *                then each page home + fdatasync each file
 *   atomio       one atomio group (atomio_pwrite for one range); only the
 *                public API (atomio.h)
 *   atomio-raw   the same with ATOMIO_NO_COMPRESS (only when asked for)
 *   atomio-excl  the same with ATOMIO_EXCLUSIVE: the one-process store, no
 *                shared memory (only when asked for; not with --procs)
 *   atomio-async atomio_tx_commit_async with 32 groups in flight per thread,
 *                reaped with atomio_poll (only when asked for)
 *   atomio-new   atomio on a store created just before each slice, the slice
 *                running until its log is written once over: a new store's
 *                first lap, against atomio's steady state (only when asked for)
 *   kernel       pwritev2(RWF_ATOMIC | RWF_DSYNC): one range, O_DIRECT, where
 *                the filesystem accepts it; skipped with the reason elsewhere
 *   atomio-lazy16, atomio-lazy256
 *                atomio_tx_commit_lazy, and atomio_sync of the store every
 *                16 (256) groups of a writer: atomic at once, durable at the
 *                sync (only when asked for)
 *   unsafe-sync16, unsafe-sync256
 *                their baseline: pwrite each page, fdatasync the files a
 *                writer touched every 16 (256) groups (only when asked for)
 *
 * To add a mode: write its functions (and a begin, if it needs one before
 * each slice) and list it in bench_modes[]; attach and detach make it run
 * in writer processes (--procs), each opening what it writes through itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "atomio.h"
#include "bench.h"
#include "cli.h"
#include "sys.h" /* RWF_ATOMIC, RWF_DSYNC, struct atomio_statx for old headers */

#define MAX_FILES_OPEN 256u
#define DW_SLOTS 64 /* doublewrite groups per thread in the scratch area */

static int pwritev_full(int fd, struct iovec *iov, int cnt, off_t off, int rwf)
{
	while (cnt > 0) {
		ssize_t n = pwritev2(fd, iov, cnt, off, rwf);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		off += n;
		while (cnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

static int pwrite_full(int fd, const void *buf, size_t len, off_t off, int rwf)
{
	struct iovec iov = {(void *)buf, len};
	return pwritev_full(fd, &iov, 1, off, rwf);
}

static int datasync(int fd)
{
	int r;
	do
		r = fdatasync(fd);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

static int open_data(const struct bench_env *env, int *fds, char *why, size_t n)
{
	if (env->nfiles > MAX_FILES_OPEN) {
		snprintf(why, n, "at most %u files", MAX_FILES_OPEN);
		return -EINVAL;
	}
	for (unsigned i = 0; i < env->nfiles; i++) {
		fds[i] = open(env->paths[i], O_RDWR | O_CLOEXEC | (env->direct ? O_DIRECT : 0));
		if (fds[i] < 0) {
			int e = errno;
			snprintf(why, n, "opening %s: %s%s", env->paths[i], strerror(e),
				 e == EINVAL && env->direct ? " (no O_DIRECT here? try --buffered)" : "");
			while (i--)
				close(fds[i]);
			return -e;
		}
	}
	return 0;
}

/* --- unsafe and doublewrite ------------------------------------------------ */

/* What every writer of a plain mode counts, threads or processes: in shared
 * memory, mapped by setup before any writer process is forked. */
struct plain_shared {
	_Atomic uint64_t waits;
	uint64_t slot[]; /* doublewrite: each writer's next scratch slot (its own) */
};

struct plain {
	const struct bench_env *env;
	int fds[MAX_FILES_OPEN];
	int scratch; /* doublewrite */
	struct plain_shared *sh;
	size_t sh_size;
	bool own; /* a writer process's (attach): sh is setup's */
};

/* Write the pages home, then fdatasync every file touched. */
static int home_and_sync(struct plain *p, const struct bench_group *g, char *why, size_t n)
{
	bool touched[MAX_FILES_OPEN] = {0};
	for (unsigned i = 0; i < g->n; i++) {
		const struct bench_range *r = &g->r[i];
		int e = pwrite_full(p->fds[r->file], r->buf, p->env->page, (off_t)r->off, 0);
		if (e < 0) {
			snprintf(why, n, "pwrite: %s", strerror(-e));
			return e;
		}
		touched[r->file] = true;
	}
	for (unsigned f = 0; f < p->env->nfiles; f++) {
		if (!touched[f])
			continue;
		int e = datasync(p->fds[f]);
		atomic_fetch_add_explicit(&p->sh->waits, 1, memory_order_relaxed);
		if (e < 0) {
			snprintf(why, n, "fdatasync: %s", strerror(-e));
			return e;
		}
	}
	return 0;
}

static void plain_teardown(void *state)
{
	struct plain *p = state;
	for (unsigned i = 0; i < p->env->nfiles; i++)
		if (p->fds[i] >= 0)
			close(p->fds[i]);
	if (p->scratch >= 0)
		close(p->scratch);
	if (!p->own && p->sh)
		munmap(p->sh, p->sh_size);
	free(p);
}

static int unsafe_setup(const struct bench_env *env, void **state, char *why, size_t n)
{
	struct plain *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->env = env;
	p->scratch = -1;
	p->sh_size = sizeof(struct plain_shared) + env->threads * sizeof(uint64_t);
	p->sh = mmap(NULL, p->sh_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p->sh == MAP_FAILED) {
		int e = -errno;
		snprintf(why, n, "mmap: %s", strerror(-e));
		free(p);
		return e;
	}
	int r = open_data(env, p->fds, why, n);
	if (r < 0) {
		munmap(p->sh, p->sh_size);
		free(p);
		return r;
	}
	*state = p;
	return 0;
}

/* A writer process's own descriptors of the same files (and scratch area). */
static int plain_attach(const struct bench_env *env, void *state, void **own, char *why, size_t n)
{
	const struct plain *s = state;
	struct plain *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	*p = (struct plain){.env = env, .scratch = -1, .sh = s->sh, .sh_size = s->sh_size, .own = true};
	int r = open_data(env, p->fds, why, n);
	if (r < 0) {
		free(p);
		return r;
	}
	if (s->scratch >= 0) {
		char path[4200];
		snprintf(path, sizeof(path), "%s/doublewrite.scratch", env->dir);
		p->scratch = open(path, O_RDWR | O_CLOEXEC | (env->direct ? O_DIRECT : 0));
		if (p->scratch < 0) {
			r = -errno;
			snprintf(why, n, "opening %s: %s", path, strerror(-r));
			plain_teardown(p);
			return r;
		}
	}
	*own = p;
	return 0;
}

static int plain_detach(void *own, char *why, size_t n)
{
	(void)why;
	(void)n;
	plain_teardown(own);
	return 0;
}

static int unsafe_op(void *state, unsigned thread, const struct bench_group *g, char *why, size_t n)
{
	return home_and_sync(state, g, why, n);
}

static void plain_counters(void *state, struct mode_counters *c)
{
	struct plain *p = state;
	memset(c, 0, sizeof(*c));
	c->waits = atomic_load(&p->sh->waits);
}

static int dw_setup(const struct bench_env *env, void **state, char *why, size_t n)
{
	int r = unsafe_setup(env, state, why, n);
	if (r < 0)
		return r;
	struct plain *p = *state;
	char path[4200];
	snprintf(path, sizeof(path), "%s/doublewrite.scratch", env->dir);
	p->scratch = open(path, O_RDWR | O_CREAT | O_CLOEXEC | (env->direct ? O_DIRECT : 0), 0600);
	if (p->scratch < 0) {
		r = -errno;
		snprintf(why, n, "creating %s: %s", path, strerror(-r));
		plain_teardown(p);
		return r;
	}
	/* The scratch area is written for real first, as InnoDB's is: its
	 * writes are then overwrites, like the home writes. */
	uint64_t size = (uint64_t)env->threads * DW_SLOTS * env->ranges * env->page;
	void *z = NULL;
	if (posix_memalign(&z, 4096, 1 << 20)) {
		plain_teardown(p);
		return -ENOMEM;
	}
	memset(z, 0, 1 << 20);
	/* a page at a time: page-sized folios, as for the data files (bench.c) */
	for (uint64_t off = 0; off < size && r == 0; off += env->page)
		r = pwrite_full(p->scratch, z, env->page, (off_t)off, 0);
	free(z);
	if (r == 0)
		r = fsync(p->scratch) < 0 ? -errno : 0;
	if (r < 0) {
		snprintf(why, n, "filling %s: %s", path, strerror(-r));
		plain_teardown(p);
		return r;
	}
	return 0;
}

static int dw_op(void *state, unsigned thread, const struct bench_group *g, char *why, size_t n)
{
	struct plain *p = state;
	const struct bench_env *env = p->env;
	/* 1. every page of the group to this thread's next scratch slot, in
	 *    one sequential write, then one wait */
	struct iovec iov[64];
	uint64_t slot = p->sh->slot[thread]++ % DW_SLOTS;
	off_t off = (off_t)(((uint64_t)thread * DW_SLOTS + slot) * env->ranges * env->page);
	for (unsigned i = 0; i < g->n;) {
		int cnt = 0;
		off_t at = off + (off_t)(i * env->page);
		for (; i < g->n && cnt < 64; i++, cnt++)
			iov[cnt] = (struct iovec){(void *)g->r[i].buf, env->page};
		int e = pwritev_full(p->scratch, iov, cnt, at, 0);
		if (e < 0) {
			snprintf(why, n, "scratch write: %s", strerror(-e));
			return e;
		}
	}
	int e = datasync(p->scratch);
	atomic_fetch_add_explicit(&p->sh->waits, 1, memory_order_relaxed);
	if (e < 0) {
		snprintf(why, n, "scratch fdatasync: %s", strerror(-e));
		return e;
	}
	/* 2. the pages home, and a wait per file */
	return home_and_sync(p, g, why, n);
}

/* --- atomio ------------------------------------------------------------------ */

struct am {
	atomio *st;
	int files[MAX_FILES_OPEN];
	size_t page;
	char err[512];
	/* atomio-new: a new store for every slice */
	const struct bench_env *env;
	uint32_t flags;
	struct mode_counters base; /* the closed stores' counts */
};

/* The benchmark measures the steady state (atomio-new measures a new
 * store), so a new log's first lap is written before any slice: groups of
 * up to 64 pages of the data files' own bytes, until the log has wrapped,
 * then a checkpoint.  (A log up to 1 GiB is zeroed when it is created; a
 * larger one's rest as its first lap's records reach each part: that lap
 * costs those writes too.) */
static int am_warm(struct am *a, const struct bench_env *env, char *why, size_t n)
{
	struct atomio_caps caps;
	int r = atomio_caps(a->st, -1, &caps);
	if (r < 0) {
		snprintf(why, n, "atomio_caps: %s", atomio_strerror(r));
		return r;
	}
	size_t chunk = env->page * 64;
	void *buf = NULL;
	if (posix_memalign(&buf, 4096, chunk))
		return -ENOMEM;
	uint64_t span = env->file_size / chunk * chunk, off = 0;
	unsigned f = 0;
	struct atomio_stats s = {0};
	while (r == 0 && s.bytes_logged <= caps.log_size + chunk) {
		int fd = atomio_file_fd(a->st, a->files[f]);
		ssize_t got = span ? pread(fd, buf, chunk, (off_t)off) : 0;
		if (got != (ssize_t)chunk) {
			snprintf(why, n, "warming the log: reading %s: %s", env->paths[f],
				 got < 0 ? strerror(errno) : "short");
			r = -EIO;
			break;
		}
		ssize_t w = atomio_pwrite(a->st, a->files[f], buf, chunk, off);
		if (w < 0) {
			r = (int)w;
			snprintf(why, n, "warming the log: %s", atomio_strerror(r));
		}
		off += chunk;
		if (off >= span) {
			off = 0;
			f = (f + 1) % env->nfiles;
		}
		atomio_stats(a->st, &s);
	}
	free(buf);
	if (r == 0 && (r = atomio_checkpoint(a->st)) < 0)
		snprintf(why, n, "atomio_checkpoint: %s", atomio_strerror(r));
	return r;
}

/* Open (creating) the mode's store and register its data files: 0, or a
 * negative code with why set and nothing left open. */
static int am_store(struct am *a, const struct bench_env *env, char *why, size_t n, bool *fresh)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/atomio.log", env->dir);
	*fresh = access(path, F_OK) != 0;
	struct atomio_options o = {.log_size = env->log_size, .flags = ATOMIO_CREATE | a->flags,
				   .ckpt_percent = env->ckpt_percent,
				   .errbuf = a->err, .errbuf_size = sizeof(a->err)};
	int r = atomio_open(path, &o, &a->st);
	if (r < 0) {
		snprintf(why, n, "atomio_open %s: %s", path, a->err[0] ? a->err : atomio_strerror(r));
		return r;
	}
	for (unsigned i = 0; i < env->nfiles; i++) {
		r = atomio_file_open(a->st, env->paths[i], env->direct ? O_DIRECT : 0, 0);
		if (r < 0) {
			snprintf(why, n, "atomio_file_open %s: %s", env->paths[i],
				 a->err[0] ? a->err : atomio_strerror(r));
			atomio_close(a->st);
			return r;
		}
		a->files[i] = r;
	}
	return 0;
}

static int am_open(const struct bench_env *env, void **state, char *why, size_t n, uint32_t flags)
{
	struct am *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->page = env->page;
	a->env = env;
	a->flags = flags;
	bool fresh;
	int r = am_store(a, env, why, n, &fresh);
	if (r == 0 && fresh && (r = am_warm(a, env, why, n)) < 0)
		atomio_close(a->st);
	if (r < 0) {
		free(a);
		return r;
	}
	*state = a;
	return 0;
}

static int am_setup(const struct bench_env *env, void **state, char *why, size_t n)
{
	return am_open(env, state, why, n, 0);
}

static int am_raw_setup(const struct bench_env *env, void **state, char *why, size_t n)
{
	return am_open(env, state, why, n, ATOMIO_NO_COMPRESS);
}

/* The one-process store of before the shared one: with --procs, skipped
 * (a second process's atomio_open gets -EBUSY). */
static int am_excl_setup(const struct bench_env *env, void **state, char *why, size_t n)
{
	if (env->procs) {
		snprintf(why, n, "ATOMIO_EXCLUSIVE admits one process at a time (drop --procs)");
		return BENCH_SKIP;
	}
	return am_open(env, state, why, n, ATOMIO_EXCLUSIVE);
}

/* A writer process opens the log itself: it joins the store setup made
 * (and warmed). */
static int am_attach(const struct bench_env *env, void *state, void **own, char *why, size_t n)
{
	(void)state;
	return am_open(env, own, why, n, 0);
}

static int am_raw_attach(const struct bench_env *env, void *state, void **own, char *why, size_t n)
{
	(void)state;
	return am_open(env, own, why, n, ATOMIO_NO_COMPRESS);
}

/* The writer process leaves the store (the last to leave is setup's
 * process: it checkpoints at teardown). */
static int am_detach(void *own, char *why, size_t n)
{
	struct am *a = own;
	int r = atomio_close(a->st);
	if (r < 0)
		snprintf(why, n, "atomio_close: %.400s", a->err[0] ? a->err : atomio_strerror(r));
	free(a);
	return r;
}


/* g as one group of the store's (atomio_tx_begin, a write per range): 0
 * with *tx open, or an error with it aborted. */
static int am_group(struct am *a, const struct bench_group *g, atomio_tx **tx)
{
	int r = atomio_tx_begin(a->st, tx);
	for (unsigned i = 0; r == 0 && i < g->n; i++)
		r = atomio_tx_write(*tx, a->files[g->r[i].file], g->r[i].buf, a->page, (off_t)g->r[i].off);
	if (r < 0)
		atomio_tx_abort(*tx);
	return r;
}

/* A mode's state that wraps a store's (struct am_async, struct am_lazy:
 * struct am *a first): size bytes zeroed, its store opened, or NULL with
 * *r set (BENCH_SKIP for more than max_threads writers). */
static void *am_wrap_open(const struct bench_env *env, size_t size, unsigned max_threads, char *why, size_t n,
			  int *r)
{
	if (env->threads > max_threads) {
		snprintf(why, n, "at most %u threads", max_threads);
		*r = BENCH_SKIP;
		return NULL;
	}
	struct am **x = calloc(1, size);
	if (!x) {
		*r = -ENOMEM;
		return NULL;
	}
	void *a;
	*r = am_open(env, &a, why, n, 0);
	if (*r < 0) {
		free(x);
		return NULL;
	}
	*x = a;
	return x;
}

static int am_op(void *state, unsigned thread, const struct bench_group *g, char *why, size_t n)
{
	struct am *a = state;
	int r;
	if (g->n == 1) {
		ssize_t w = atomio_pwrite(a->st, a->files[g->r[0].file], g->r[0].buf, a->page,
					  (off_t)g->r[0].off);
		r = w < 0 ? (int)w : 0;
		if (r < 0)
			snprintf(why, n, "atomio_pwrite: %s", atomio_strerror(r));
		return r;
	}
	atomio_tx *tx;
	r = am_group(a, g, &tx);
	if (r == 0)
		r = atomio_tx_commit(tx);
	if (r < 0)
		snprintf(why, n, "atomio group: %s", atomio_strerror(r));
	return r;
}

static int am_finish(void *state, char *why, size_t n)
{
	struct am *a = state;
	int r = atomio_checkpoint(a->st);
	if (r < 0)
		snprintf(why, n, "atomio_checkpoint: %s", atomio_strerror(r));
	return r;
}

static void am_counters(void *state, struct mode_counters *c)
{
	struct am *a = state;
	struct atomio_stats s;
	atomio_stats(a->st, &s);
	c->waits = a->base.waits + s.log_syncs + s.data_syncs;
	c->log_bytes = a->base.log_bytes + s.bytes_logged;
	c->home_bytes = a->base.home_bytes + s.bytes_home;
	c->checkpoints = a->base.checkpoints + s.checkpoints;
	c->ckpt_bytes = a->base.ckpt_bytes + s.bytes_checkpointed;
	c->log_syncs = a->base.log_syncs + s.log_syncs;
	c->batches = a->base.batches + s.batches;
	c->log_full_waits = a->base.log_full_waits + s.log_full_waits;
}

/* --- atomio on a new store: its first lap ------------------------------------------ */

/* The same groups as atomio, but every slice starts on a log created just
 * before it (never warmed) and runs until that log has been written once
 * over (bench.c): what a new store's first lap costs, against atomio's
 * steady state. */
static void am_teardown(void *state);

static int am_new_setup(const struct bench_env *env, void **state, char *why, size_t n)
{
	struct am *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->page = env->page;
	a->env = env;
	*state = a;
	return 0;
}

static int am_new_begin(void *state, char *why, size_t n)
{
	struct am *a = state;
	char path[4200];
	snprintf(path, sizeof(path), "%s/atomio.log", a->env->dir);
	if (a->st) {
		am_counters(a, &a->base);
		int r = atomio_close(a->st);
		a->st = NULL;
		if (r < 0) {
			snprintf(why, n, "atomio_close: %s", atomio_strerror(r));
			return r;
		}
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		snprintf(why, n, "removing %s: %s", path, strerror(errno));
		return -errno;
	}
	bool fresh;
	return am_store(a, a->env, why, n, &fresh);
}

static void am_new_teardown(void *state)
{
	struct am *a = state;
	if (a->st)
		am_teardown(a);
	else
		free(a);
}

static void am_teardown(void *state)
{
	struct am *a = state;
	int r = atomio_close(a->st);
	if (r < 0)
		cli_warn("atomio mode: atomio_close: %s", atomio_strerror(r));
	free(a);
}

/* --- atomio, asynchronous ----------------------------------------------------------- */

/* Each thread keeps up to ASYNC_DEPTH groups in flight with
 * atomio_tx_commit_async and reaps them with atomio_poll: an op is a group
 * queued, its latency the time to queue it (and, when the window is full,
 * to reap one).  The slice's finish reaps the rest before its checkpoint. */
#define ASYNC_DEPTH 32
#define ASYNC_MAX_THREADS 1024

struct am_async {
	struct am *a;
	_Atomic unsigned inflight[ASYNC_MAX_THREADS];
	_Atomic int err;
};

struct async_slot {
	struct am_async *x;
	unsigned thread;
};

static void async_cb(void *arg, int result)
{
	struct async_slot *s = arg;
	if (result < 0)
		atomic_store(&s->x->err, result);
	atomic_fetch_sub(&s->x->inflight[s->thread], 1);
	free(s);
}

static int am_async_setup(const struct bench_env *env, void **state, char *why, size_t n)
{
	int r;
	struct am_async *x = am_wrap_open(env, sizeof(*x), ASYNC_MAX_THREADS, why, n, &r);
	if (!x)
		return r;
	*state = x;
	return 0;
}

static int reap(struct am_async *x, unsigned thread, unsigned below, char *why, size_t n)
{
	while (atomic_load(&x->inflight[thread]) > below) {
		int r = atomio_poll(x->a->st, 100);
		if (r < 0) {
			snprintf(why, n, "atomio_poll: %s", atomio_strerror(r));
			return r;
		}
	}
	int e = atomic_load(&x->err);
	if (e < 0)
		snprintf(why, n, "asynchronous commit: %s", atomio_strerror(e));
	return e;
}

static int am_async_op(void *state, unsigned thread, const struct bench_group *g, char *why, size_t n)
{
	struct am_async *x = state;
	atomio_tx *tx;
	int r = am_group(x->a, g, &tx);
	struct async_slot *s = r == 0 ? malloc(sizeof(*s)) : NULL;
	if (r == 0 && !s) {
		atomio_tx_abort(tx);
		r = -ENOMEM;
	}
	if (r < 0) {
		snprintf(why, n, "atomio group: %s", atomio_strerror(r));
		return r;
	}
	*s = (struct async_slot){.x = x, .thread = thread};
	atomic_fetch_add(&x->inflight[thread], 1);
	r = atomio_tx_commit_async(tx, async_cb, s);
	if (r < 0) {
		atomic_fetch_sub(&x->inflight[thread], 1);
		free(s);
		snprintf(why, n, "atomio_tx_commit_async: %s", atomio_strerror(r));
		return r;
	}
	return reap(x, thread, ASYNC_DEPTH - 1, why, n);
}

static int am_async_finish(void *state, char *why, size_t n)
{
	struct am_async *x = state;
	for (unsigned t = 0; t < ASYNC_MAX_THREADS; t++) {
		int r = reap(x, t, 0, why, n);
		if (r < 0)
			return r;
	}
	return am_finish(x->a, why, n);
}

static void am_async_counters(void *state, struct mode_counters *c)
{
	am_counters(((struct am_async *)state)->a, c);
}

static int am_async_attach(const struct bench_env *env, void *state, void **own, char *why, size_t n)
{
	(void)state;
	return am_async_setup(env, own, why, n);
}

static int am_async_detach(void *own, char *why, size_t n)
{
	struct am_async *x = own;
	int r = 0;
	for (unsigned t = 0; t < ASYNC_MAX_THREADS && r == 0; t++)
		r = reap(x, t, 0, why, n);
	char cwhy[512];
	int c = am_detach(x->a, cwhy, sizeof(cwhy));
	if (r == 0 && c < 0) {
		snprintf(why, n, "%s", cwhy);
		r = c;
	}
	free(x);
	return r;
}

static void am_async_teardown(void *state)
{
	struct am_async *x = state;
	char why[256];
	for (unsigned t = 0; t < ASYNC_MAX_THREADS; t++)
		(void)reap(x, t, 0, why, sizeof(why));
	am_teardown(x->a);
	free(x);
}

/* --- lazy groups, a sync every N; and pwrite with an fdatasync every N ------------ */

/* A writer's groups since its last sync: by thread (with --procs each
 * writer process has its own state, and its thread is its own index). */
#define SYNC_MAX_THREADS 1024

struct am_lazy {
	struct am *a;
	unsigned every;
	unsigned n[SYNC_MAX_THREADS];
};

static int am_lazy_open(const struct bench_env *env, void **state, char *why, size_t n, unsigned every)
{
	int r;
	struct am_lazy *x = am_wrap_open(env, sizeof(*x), SYNC_MAX_THREADS, why, n, &r);
	if (!x)
		return r;
	x->every = every;
	*state = x;
	return 0;
}

static int am_lazy16_setup(const struct bench_env *env, void **state, char *why, size_t n)
{
	return am_lazy_open(env, state, why, n, 16);
}

static int am_lazy256_setup(const struct bench_env *env, void **state, char *why, size_t n)
{
	return am_lazy_open(env, state, why, n, 256);
}

static int am_lazy16_attach(const struct bench_env *env, void *state, void **own, char *why, size_t n)
{
	(void)state;
	return am_lazy_open(env, own, why, n, 16);
}

static int am_lazy256_attach(const struct bench_env *env, void *state, void **own, char *why, size_t n)
{
	(void)state;
	return am_lazy_open(env, own, why, n, 256);
}

/* One group committed lazily; every x->every-th of this writer also waits
 * for the store's sync (its latency is that op's). */
static int am_lazy_op(void *state, unsigned thread, const struct bench_group *g, char *why, size_t n)
{
	struct am_lazy *x = state;
	struct am *a = x->a;
	atomio_tx *tx;
	int r = am_group(a, g, &tx);
	if (r < 0) {
		snprintf(why, n, "atomio group: %s", atomio_strerror(r));
		return r;
	}
	r = atomio_tx_commit_lazy(tx, NULL);
	if (r < 0) {
		snprintf(why, n, "atomio_tx_commit_lazy: %s", atomio_strerror(r));
		return r;
	}
	if (++x->n[thread] % x->every)
		return 0;
	r = atomio_sync(a->st, -1, 0);
	if (r < 0)
		snprintf(why, n, "atomio_sync: %s", atomio_strerror(r));
	return r;
}

/* The slice's end: every lazy group durable (the sync), then the log
 * checkpointed as for atomio. */
static int am_lazy_finish(void *state, char *why, size_t n)
{
	struct am_lazy *x = state;
	int r = atomio_sync(x->a->st, -1, 0);
	if (r < 0) {
		snprintf(why, n, "atomio_sync: %s", atomio_strerror(r));
		return r;
	}
	return am_finish(x->a, why, n);
}

static void am_lazy_counters(void *state, struct mode_counters *c)
{
	am_counters(((struct am_lazy *)state)->a, c);
}

/* A writer process leaves: atomio_close makes its lazy groups durable. */
static int am_lazy_detach(void *own, char *why, size_t n)
{
	struct am_lazy *x = own;
	int r = am_detach(x->a, why, n);
	free(x);
	return r;
}

static void am_lazy_teardown(void *state)
{
	struct am_lazy *x = state;
	am_teardown(x->a);
	free(x);
}

struct plain_sync {
	struct plain *p;
	unsigned every;
	unsigned n[SYNC_MAX_THREADS];
	uint8_t *touched; /* [thread][file]: written since the writer's last sync */
};

static int psync_wrap(const struct bench_env *env, struct plain *p, void **state, unsigned every)
{
	struct plain_sync *x = calloc(1, sizeof(*x));
	uint8_t *t = calloc((size_t)env->threads * env->nfiles, 1);
	if (!x || !t) {
		free(x);
		free(t);
		plain_teardown(p);
		return -ENOMEM;
	}
	*x = (struct plain_sync){.p = p, .every = every, .touched = t};
	*state = x;
	return 0;
}

static int psync_open(const struct bench_env *env, void **state, char *why, size_t n, unsigned every)
{
	if (env->threads > SYNC_MAX_THREADS) {
		snprintf(why, n, "at most %u threads", SYNC_MAX_THREADS);
		return BENCH_SKIP;
	}
	void *p;
	int r = unsafe_setup(env, &p, why, n);
	return r < 0 ? r : psync_wrap(env, p, state, every);
}

static int psync16_setup(const struct bench_env *env, void **state, char *why, size_t n)
{
	return psync_open(env, state, why, n, 16);
}

static int psync256_setup(const struct bench_env *env, void **state, char *why, size_t n)
{
	return psync_open(env, state, why, n, 256);
}

static int psync_attach(const struct bench_env *env, void *state, void **own, char *why, size_t n)
{
	const struct plain_sync *s = state;
	void *p;
	int r = plain_attach(env, s->p, &p, why, n);
	return r < 0 ? r : psync_wrap(env, p, own, s->every);
}

/* fdatasync the files this writer wrote since its last sync. */
static int psync_files(struct plain_sync *x, unsigned thread, char *why, size_t n)
{
	const struct bench_env *env = x->p->env;
	uint8_t *t = x->touched + (size_t)thread * env->nfiles;
	for (unsigned f = 0; f < env->nfiles; f++) {
		if (!t[f])
			continue;
		t[f] = 0;
		int e = datasync(x->p->fds[f]);
		atomic_fetch_add_explicit(&x->p->sh->waits, 1, memory_order_relaxed);
		if (e < 0) {
			snprintf(why, n, "fdatasync: %s", strerror(-e));
			return e;
		}
	}
	return 0;
}

static int psync_op(void *state, unsigned thread, const struct bench_group *g, char *why, size_t n)
{
	struct plain_sync *x = state;
	struct plain *p = x->p;
	for (unsigned i = 0; i < g->n; i++) {
		const struct bench_range *r = &g->r[i];
		int e = pwrite_full(p->fds[r->file], r->buf, p->env->page, (off_t)r->off, 0);
		if (e < 0) {
			snprintf(why, n, "pwrite: %s", strerror(-e));
			return e;
		}
		x->touched[(size_t)thread * p->env->nfiles + r->file] = 1;
	}
	return ++x->n[thread] % x->every ? 0 : psync_files(x, thread, why, n);
}

/* Every writer's unsynced pages made durable (the slice's end, or a
 * writer process's). */
static int psync_all(struct plain_sync *x, char *why, size_t n)
{
	int r = 0;
	for (unsigned t = 0; t < x->p->env->threads && r == 0; t++)
		r = psync_files(x, t, why, n);
	return r;
}

static int psync_finish(void *state, char *why, size_t n)
{
	return psync_all(state, why, n);
}

static void psync_counters(void *state, struct mode_counters *c)
{
	plain_counters(((struct plain_sync *)state)->p, c);
}

static void psync_teardown(void *state)
{
	struct plain_sync *x = state;
	plain_teardown(x->p);
	free(x->touched);
	free(x);
}

static int psync_detach(void *own, char *why, size_t n)
{
	int r = psync_all(own, why, n);
	psync_teardown(own);
	return r;
}

/* --- kernel RWF_ATOMIC ----------------------------------------------------------- */

static int kernel_setup(const struct bench_env *env, void **state, char *why, size_t n)
{
	if (env->ranges > 1) {
		snprintf(why, n, "RWF_ATOMIC makes one range atomic, not a group of %u", env->ranges);
		return BENCH_SKIP;
	}
	if (!env->direct) {
		snprintf(why, n, "RWF_ATOMIC needs O_DIRECT (drop --buffered)");
		return BENCH_SKIP;
	}
	struct plain *p;
	int r = unsafe_setup(env, (void **)&p, why, n);
	if (r < 0)
		return r;
	struct stx_info sx;
	r = host_statx_info(p->fds[0], "", AT_EMPTY_PATH, &sx);
	if (r < 0 || !sx.has_atomic || !sx.unit_max) {
		snprintf(why, n, "%s does not accept RWF_ATOMIC (statx: no atomic write limits)",
			 env->fs_desc);
		plain_teardown(p);
		return BENCH_SKIP;
	}
	if (env->page < sx.unit_min || env->page > sx.unit_max || (env->page & (env->page - 1))) {
		snprintf(why, n, "%zu-byte pages are outside RWF_ATOMIC's unit range %u..%u here",
			 env->page, sx.unit_min, sx.unit_max);
		plain_teardown(p);
		return BENCH_SKIP;
	}
	/* One real write: statx can promise what the write path refuses. */
	void *buf = NULL;
	if (posix_memalign(&buf, 4096, env->page)) {
		plain_teardown(p);
		return -ENOMEM;
	}
	memset(buf, 0, env->page);
	r = pwrite_full(p->fds[0], buf, env->page, 0, RWF_ATOMIC | RWF_DSYNC);
	free(buf);
	if (r < 0) {
		snprintf(why, n, "a trial RWF_ATOMIC write failed: %s", strerror(-r));
		plain_teardown(p);
		return r == -EOPNOTSUPP || r == -EINVAL ? BENCH_SKIP : r;
	}
	*state = p;
	return 0;
}

static int kernel_op(void *state, unsigned thread, const struct bench_group *g, char *why, size_t n)
{
	struct plain *p = state;
	const struct bench_range *r = &g->r[0];
	/* One range; one device wait (RWF_DSYNC), all or nothing (RWF_ATOMIC):
	 * no short-write retry, a partial atomic write would be a kernel bug. */
	struct iovec iov = {(void *)r->buf, p->env->page};
	ssize_t w = pwritev2(p->fds[r->file], &iov, 1, (off_t)r->off, RWF_ATOMIC | RWF_DSYNC);
	atomic_fetch_add_explicit(&p->sh->waits, 1, memory_order_relaxed);
	if (w != (ssize_t)p->env->page) {
		int e = w < 0 ? -errno : -EIO;
		snprintf(why, n, "pwritev2(RWF_ATOMIC): %s", w < 0 ? strerror(-e) : "short write");
		return e;
	}
	return 0;
}

/* --- the table ------------------------------------------------------------------ */

static const struct bench_mode m_unsafe = {
	.name = "unsafe", .what = "pwrite + fdatasync per file: durable, no torn-page protection",
	.setup = unsafe_setup, .op = unsafe_op, .attach = plain_attach, .detach = plain_detach,
	.counters = plain_counters, .teardown = plain_teardown,
};
static const struct bench_mode m_doublewrite = {
	.name = "doublewrite", .what = "InnoDB-style: pages to a scratch area + fdatasync, then home + fdatasync",
	.setup = dw_setup, .op = dw_op, .attach = plain_attach, .detach = plain_detach,
	.counters = plain_counters, .teardown = plain_teardown,
};
static const struct bench_mode m_atomio = {
	.name = "atomio", .what = "one atomio group per op (atomio_pwrite for one range)",
	.setup = am_setup, .op = am_op, .attach = am_attach, .detach = am_detach, .finish = am_finish,
	.counters = am_counters, .teardown = am_teardown,
};
static const struct bench_mode m_kernel = {
	.name = "kernel", .what = "pwritev2(RWF_ATOMIC|RWF_DSYNC), one range, O_DIRECT, where the fs accepts it",
	.setup = kernel_setup, .op = kernel_op, .attach = plain_attach, .detach = plain_detach,
	.counters = plain_counters, .teardown = plain_teardown,
};

static const struct bench_mode m_atomio_raw = {
	.name = "atomio-raw", .what = "atomio with ATOMIO_NO_COMPRESS: records never compressed",
	.setup = am_raw_setup, .op = am_op, .attach = am_raw_attach, .detach = am_detach, .finish = am_finish,
	.counters = am_counters, .teardown = am_teardown, .optional = true,
};

static const struct bench_mode m_atomio_excl = {
	.name = "atomio-excl", .what = "atomio with ATOMIO_EXCLUSIVE: the one-process store",
	.setup = am_excl_setup, .op = am_op, .finish = am_finish, .counters = am_counters,
	.teardown = am_teardown, .optional = true,
};

static const struct bench_mode m_atomio_async = {
	.name = "atomio-async", .what = "atomio_tx_commit_async, 32 groups in flight per thread (latency: to queue)",
	.setup = am_async_setup, .op = am_async_op, .attach = am_async_attach, .detach = am_async_detach,
	.finish = am_async_finish, .counters = am_async_counters, .teardown = am_async_teardown,
	.optional = true,
};

static const struct bench_mode m_atomio_new = {
	.name = "atomio-new", .what = "atomio on a new store each slice, until its log is written once over (its first lap)",
	.setup = am_new_setup, .op = am_op, .finish = am_finish, .counters = am_counters,
	.teardown = am_new_teardown, .optional = true, .begin = am_new_begin,
};

static const struct bench_mode m_atomio_lazy16 = {
	.name = "atomio-lazy16", .what = "atomio_tx_commit_lazy, atomio_sync every 16 groups per writer",
	.setup = am_lazy16_setup, .op = am_lazy_op, .attach = am_lazy16_attach, .detach = am_lazy_detach,
	.finish = am_lazy_finish, .counters = am_lazy_counters, .teardown = am_lazy_teardown, .optional = true,
};

static const struct bench_mode m_atomio_lazy256 = {
	.name = "atomio-lazy256", .what = "atomio_tx_commit_lazy, atomio_sync every 256 groups per writer",
	.setup = am_lazy256_setup, .op = am_lazy_op, .attach = am_lazy256_attach, .detach = am_lazy_detach,
	.finish = am_lazy_finish, .counters = am_lazy_counters, .teardown = am_lazy_teardown, .optional = true,
};

static const struct bench_mode m_unsafe_sync16 = {
	.name = "unsafe-sync16", .what = "pwrite, fdatasync of the files written every 16 groups per writer",
	.setup = psync16_setup, .op = psync_op, .attach = psync_attach, .detach = psync_detach,
	.finish = psync_finish, .counters = psync_counters, .teardown = psync_teardown, .optional = true,
};

static const struct bench_mode m_unsafe_sync256 = {
	.name = "unsafe-sync256", .what = "pwrite, fdatasync of the files written every 256 groups per writer",
	.setup = psync256_setup, .op = psync_op, .attach = psync_attach, .detach = psync_detach,
	.finish = psync_finish, .counters = psync_counters, .teardown = psync_teardown, .optional = true,
};

const struct bench_mode *const bench_modes[] = {&m_unsafe, &m_doublewrite, &m_atomio, &m_kernel,
						&m_atomio_raw, &m_atomio_excl, &m_atomio_async,
						&m_atomio_new, &m_atomio_lazy16, &m_atomio_lazy256,
						&m_unsafe_sync16, &m_unsafe_sync256};
const unsigned bench_nmodes = sizeof(bench_modes) / sizeof(bench_modes[0]);
