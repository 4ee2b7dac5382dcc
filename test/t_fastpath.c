/* The kernel fast path, on any filesystem: a test backend reports atomic-write
 * limits in statx and performs RWF_ATOMIC writes as plain RWF_DSYNC ones (the
 * real thing is t_fastpath_xfs).  Checks which groups take the fast path (the
 * limits, RWF_ATOMIC's rules, the options), that its groups skip the log, the
 * hazard guard (a range logged since the last checkpoint is never written by
 * the fast path, so recovery cannot put an older record over it), and the
 * fallback when the kernel refuses. */
#include <pthread.h>
#include <sys/wait.h>

#include "sys.h"
#include "model.h"

static struct atomio_sysops fake;
static uint32_t fake_opt;      /* reported atomic_write_unit_max_opt */
static int refuse;             /* RWF_ATOMIC fails with -EOPNOTSUPP */
static int atomic_writes;      /* RWF_ATOMIC writes performed */

static int fake_statx(int dirfd, const char *path, int flags, unsigned mask, struct atomio_statx *stx)
{
	int r = atomio_sys_linux.statx(dirfd, path, flags, mask, stx);
	if (r == 0 && (mask & ATOMIO_STATX_WRITE_ATOMIC)) {
		stx->stx_mask |= ATOMIO_STATX_WRITE_ATOMIC;
		stx->stx_attributes |= ATOMIO_STATX_ATTR_WRITE_ATOMIC;
		stx->stx_atomic_write_unit_min = 4096;
		stx->stx_atomic_write_unit_max = 65536;
		stx->stx_atomic_write_unit_max_opt = fake_opt;
		stx->stx_atomic_write_segments_max = 1;
	}
	return r;
}

static ssize_t fake_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	if (rwf & RWF_ATOMIC) {
		if (refuse)
			return -EOPNOTSUPP;
		__atomic_add_fetch(&atomic_writes, 1, __ATOMIC_RELAXED);
		rwf &= ~RWF_ATOMIC;
	}
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
}

static atomio *open_store(const char *name, uint32_t flags)
{
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= flags;
	atomio *st;
	CHECK_OK(atomio_open(t_path(name), &o, &st));
	return st;
}

static int open_direct(atomio *st, const char *name)
{
	int f = atomio_file_open(st, t_path(name), O_CREAT | O_DIRECT, 0644);
	if (f == -EINVAL)
		t_skip("O_DIRECT not supported on %s", t_dir());
	CHECK(f >= 0);
	return f;
}

static struct atomio_stats stats(atomio *st)
{
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	return s;
}

/* Did this write take the fast path?  (It did iff no log byte was written.) */
static int wrote_fast(atomio *st, int f, const void *buf, size_t len, off_t off)
{
	struct atomio_stats a = stats(st);
	CHECK_EQ(atomio_pwrite(st, f, buf, len, off), (long)len);
	struct atomio_stats b = stats(st);
	int fast = b.fast_writes - a.fast_writes == 1;
	CHECK_EQ(fast, b.bytes_logged == a.bytes_logged);
	return fast;
}

static void limits(void)
{
	char *buf = aligned_alloc(4096, 65536 + 4096);
	memset(buf, 7, 65536 + 4096);
	struct atomio_caps c;

	/* software-only atomic writes (no unit_max_opt, no device limits):
	 * reported, but not taken unless forced */
	fake_opt = 0;
	atomio *st = open_store("a.log", 0);
	int f = open_direct(st, "a.dat");
	int g = atomio_file_open(st, t_path("a.buf"), O_CREAT, 0644);
	CHECK_OK(atomio_caps(st, f, &c));
	CHECK(c.flags & ATOMIO_CAP_ATOMIC_WRITE);
	CHECK(!(c.flags & ATOMIO_CAP_HW_ATOMIC));
	CHECK_EQ(c.atomic_write_unit_min, 4096);
	CHECK_EQ(c.atomic_write_unit_max, 65536);
	CHECK_EQ(c.atomic_write_segments_max, 1);
	CHECK_EQ(c.fast_path_max, 0);
	CHECK(!wrote_fast(st, f, buf, 16384, 0));
	CHECK_OK(atomio_close(st));

	/* hardware-backed up to 16 KiB */
	fake_opt = 16384;
	st = open_store("a.log", 0);
	f = open_direct(st, "a.dat");
	g = atomio_file_open(st, t_path("a.buf"), O_CREAT, 0644);
	CHECK_OK(atomio_caps(st, f, &c));
	CHECK(c.flags & ATOMIO_CAP_HW_ATOMIC);
	CHECK_EQ(c.atomic_write_unit_max_opt, 16384);
	CHECK_EQ(c.fast_path_max, 16384);
	CHECK_OK(atomio_caps(st, g, &c));
	CHECK_EQ(c.fast_path_max, 0); /* buffered file: RWF_ATOMIC is O_DIRECT only */
	int before = atomic_writes;
	CHECK(wrote_fast(st, f, buf, 16384, 16384));
	CHECK(wrote_fast(st, f, buf, 4096, 4096 * 9));
	CHECK_EQ(atomic_writes, before + 2);
	CHECK(!wrote_fast(st, f, buf, 32768, 65536)); /* above the hardware limit */
	CHECK(!wrote_fast(st, g, buf, 16384, 0));
	CHECK_OK(atomio_close(st));

	/* off / force */
	st = open_store("a.log", ATOMIO_FAST_PATH_OFF);
	f = open_direct(st, "a.dat");
	CHECK_OK(atomio_caps(st, f, &c));
	CHECK_EQ(c.fast_path_max, 0);
	CHECK(!wrote_fast(st, f, buf, 16384, 16384 * 8));
	CHECK_OK(atomio_close(st));
	fake_opt = 0;
	st = open_store("a.log", ATOMIO_FAST_PATH_FORCE);
	f = open_direct(st, "a.dat");
	CHECK_OK(atomio_caps(st, f, &c));
	CHECK_EQ(c.fast_path_max, 65536);
	CHECK(wrote_fast(st, f, buf, 65536, 65536 * 4));
	CHECK(wrote_fast(st, f, buf + 1, 8192, 8192 * 3)); /* unaligned buffer: copied, then fast */
	CHECK(!wrote_fast(st, f, buf, 12288, 12288 * 50)); /* not a power of two */
	CHECK(!wrote_fast(st, f, buf, 16384, 8192 * 51)); /* not naturally aligned */
	atomio_tx *tx;
	struct atomio_stats a = stats(st);
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, f, buf, 4096, 4096 * 200));
	CHECK_OK(atomio_tx_write(tx, f, buf, 4096, 4096 * 300)); /* two ranges: logged */
	CHECK_OK(atomio_tx_commit(tx));
	CHECK_EQ(stats(st).fast_writes, a.fast_writes);

	/* the kernel refuses RWF_ATOMIC after all: logged, and no more tries */
	refuse = 1;
	CHECK(!wrote_fast(st, f, buf, 16384, 16384 * 40));
	CHECK_OK(atomio_caps(st, f, &c));
	CHECK_EQ(c.fast_path_max, 0);
	refuse = 0;
	CHECK(!wrote_fast(st, f, buf, 16384, 16384 * 41));
	CHECK_OK(atomio_close(st));
	free(buf);
}

/* The guard: logged ranges stay off the fast path until a checkpoint. */
static void guard(void)
{
	char *buf = aligned_alloc(4096, 65536);
	memset(buf, 3, 65536);
	atomio *st = open_store("g.log", ATOMIO_FAST_PATH_FORCE);
	int f = open_direct(st, "g.dat");
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, f, buf, 4096, 16384 + 4096)); /* inside page 1 */
	CHECK_OK(atomio_tx_write(tx, f, buf, 8192, 65536 * 3));
	CHECK_OK(atomio_tx_commit(tx));
	CHECK(!wrote_fast(st, f, buf, 16384, 16384));     /* overlaps the logged 4 KiB */
	CHECK(!wrote_fast(st, f, buf, 65536, 65536 * 3)); /* overlaps the logged 8 KiB */
	CHECK(wrote_fast(st, f, buf, 16384, 16384 * 2));  /* untouched */
	CHECK(wrote_fast(st, f, buf, 16384, 16384 * 2));  /* fast writes need no guard */
	CHECK_OK(atomio_checkpoint(st));
	CHECK(wrote_fast(st, f, buf, 16384, 16384)); /* the records are dead now */
	CHECK(wrote_fast(st, f, buf, 65536, 65536 * 3));
	/* a logged size change guards the whole file */
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_truncate(tx, f, 65536 * 8));
	CHECK_OK(atomio_tx_commit(tx));
	CHECK(!wrote_fast(st, f, buf, 16384, 65536 * 6));
	CHECK_OK(atomio_checkpoint(st));
	CHECK(wrote_fast(st, f, buf, 16384, 65536 * 6));
	CHECK_OK(atomio_close(st));
	free(buf);
}

/* Recovery after a crash keeps the commit order across logged and fast-path
 * writes of the same pages: threads (disjoint pages each) alternate one-page
 * groups (fast unless guarded) and two-page groups (logged), the child dies
 * without closing, the parent recovers and compares with the model. */
#define NT 4
#define PAGES 8 /* per thread */
#define PG 8192
#define ROUNDS 40

static atomio *cst;
static int cf;

/* Two-page groups (logged); the last round's is, so that every thread leaves a
 * record after thread 0's checkpoint. */
static int logged(int r) { return r % 3 == 2 || r == T_SCALE(ROUNDS) - 1; }

static void page_of(int t, int r, int i, char *b) { t_fill(b, PG, (uint32_t)(t * 10000 + r * 10 + i + 1), 0); }

static void *crash_worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	char *b = aligned_alloc(4096, PG);
	for (int r = 0; r < T_SCALE(ROUNDS); r++) {
		int p = (r * 3) % PAGES, q = (r * 5 + 1) % PAGES;
		off_t po = (off_t)(t * PAGES + p) * PG, qo = (off_t)(t * PAGES + q) * PG;
		if (logged(r)) {
			atomio_tx *tx;
			CHECK_OK(atomio_tx_begin(cst, &tx));
			page_of(t, r, 0, b);
			CHECK_OK(atomio_tx_write(tx, cf, b, PG, po));
			page_of(t, r, 1, b);
			CHECK_OK(atomio_tx_write(tx, cf, b, PG, qo));
			CHECK_OK(atomio_tx_commit(tx));
		} else {
			page_of(t, r, 0, b);
			CHECK_EQ(atomio_pwrite(cst, cf, b, PG, po), PG);
		}
		if (t == 0 && r == T_SCALE(ROUNDS) / 2)
			CHECK_OK(atomio_checkpoint(cst));
	}
	free(b);
	return NULL;
}

static void crash_order(void)
{
	int pfd[2];
	CHECK_OK(pipe(pfd));
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		cst = open_store("c.log", ATOMIO_FAST_PATH_FORCE);
		cf = open_direct(cst, "c.dat");
		pthread_t th[NT];
		for (int t = 0; t < NT; t++)
			CHECK_OK(pthread_create(&th[t], NULL, crash_worker, (void *)(intptr_t)t));
		for (int t = 0; t < NT; t++)
			CHECK_OK(pthread_join(th[t], NULL));
		struct atomio_stats s = stats(cst);
		CHECK(write(pfd[1], &s, sizeof(s)) == sizeof(s));
		_exit(0); /* no close: the log still holds records */
	}
	close(pfd[1]);
	struct atomio_stats s;
	CHECK(read(pfd[0], &s, sizeof(s)) == sizeof(s));
	int ws;
	CHECK(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	printf("crash run: %llu commits, %llu fast, %llu log writes\n", (unsigned long long)s.commits,
	       (unsigned long long)s.fast_writes, (unsigned long long)s.batches);
	CHECK(s.fast_writes > 0 && s.batches > 0);

	atomio_sys_set(NULL); /* recover with the real system calls */
	struct atomio_options o = {0};
	atomio *st;
	CHECK_OK(atomio_open(t_path("c.log"), &o, &st));
	CHECK(stats(st).groups_recovered > 0);
	CHECK_OK(atomio_close(st));
	atomio_sys_set(&fake);

	struct mfile m = {0};
	char *b = malloc(PG);
	for (int t = 0; t < NT; t++)
		for (int r = 0; r < T_SCALE(ROUNDS); r++) {
			int p = (r * 3) % PAGES, q = (r * 5 + 1) % PAGES;
			page_of(t, r, 0, b);
			m_write(&m, b, PG, (uint64_t)(t * PAGES + p) * PG);
			if (logged(r)) {
				page_of(t, r, 1, b);
				m_write(&m, b, PG, (uint64_t)(t * PAGES + q) * PG);
			}
		}
	CHECK_OK(m_compare(&m, t_path("c.dat"), 0));
	free(b);
	free(m.b);
}

int main(void)
{
	fake = atomio_sys_linux;
	fake.name = "fake-atomic";
	fake.statx = fake_statx;
	fake.pwritev = fake_pwritev;
	atomio_sys_set(&fake);
	limits();
	guard();
	crash_order();
	atomio_sys_set(NULL);
	return 0;
}
