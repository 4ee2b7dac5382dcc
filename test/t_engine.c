/* The engines: which one a store runs (options, test backends, fallback when
 * io_uring cannot be set up or fails), and that every engine and home-write
 * mode gives the same files, with an O_DIRECT reader seeing each group as
 * soon as its commit returns. */
#include <pthread.h>

#include "sys.h"
#include "workload.h"

#define NF 2
#define NT 4

static struct atomio_sysops fake;
static int enter_fail; /* uring_enter calls left to fail with -EIO */
static int enter_calls;

static int fake_uring_init(unsigned entries, struct io_uring *ring)
{
	(void)entries;
	(void)ring;
	return -ENOSYS;
}

static int failing_enter(struct io_uring *ring, unsigned wait_nr)
{
	__atomic_add_fetch(&enter_calls, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&enter_fail, __ATOMIC_RELAXED) > 0) {
		__atomic_sub_fetch(&enter_fail, 1, __ATOMIC_RELAXED);
		return -EIO; /* before submitting anything */
	}
	return atomio_sys_linux.uring_enter(ring, wait_nr);
}

static unsigned engine_of(atomio *st)
{
	struct atomio_caps c;
	CHECK_OK(atomio_caps(st, -1, &c));
	return c.engine;
}

static atomio *open_store(const char *name, uint32_t flags)
{
	struct atomio_options o = t_opts(256 << 10);
	o.flags |= flags;
	atomio *st;
	CHECK_OK(atomio_open(t_path(name), &o, &st));
	return st;
}

/* --- selection ------------------------------------------------------------- */

static void selection(void)
{
	struct atomio_options o = t_opts(1 << 20);
	atomio *st;
	o.flags |= ATOMIO_ENGINE_PLAIN | ATOMIO_ENGINE_URING;
	CHECK_EQ(atomio_open(t_path("x.log"), &o, &st), -EINVAL);
	o.flags = ATOMIO_CREATE | ATOMIO_FAST_PATH_OFF | ATOMIO_FAST_PATH_FORCE;
	CHECK_EQ(atomio_open(t_path("x.log"), &o, &st), -EINVAL);

	st = open_store("plain.log", ATOMIO_ENGINE_PLAIN);
	CHECK_EQ(engine_of(st), ATOMIO_ENGINE_PLAIN);
	CHECK_OK(atomio_close(st));

	/* AUTO: plain log writes; io_uring for the home writes of a
	 * DIRECT_HOME store where the kernel allows it */
	st = open_store("auto.log", 0);
	CHECK_EQ(engine_of(st), ATOMIO_ENGINE_PLAIN);
	CHECK_OK(atomio_close(st));
	st = open_store("auto.log", ATOMIO_DIRECT_HOME);
	unsigned e = engine_of(st);
	CHECK(e == ATOMIO_ENGINE_PLAIN || e == ATOMIO_ENGINE_URING);
	if (e == ATOMIO_ENGINE_PLAIN)
		fprintf(stderr, "note: io_uring unavailable here; AUTO fell back to plain\n");
	CHECK_OK(atomio_close(st));

	/* Under a test backend AUTO is plain (a ring would bypass it) ... */
	fake = atomio_sys_linux;
	fake.name = "fake";
	atomio_sys_set(&fake);
	st = open_store("auto.log", ATOMIO_DIRECT_HOME);
	CHECK_EQ(engine_of(st), ATOMIO_ENGINE_PLAIN);
	CHECK_OK(atomio_close(st));
	/* ... unless asked; and a refused setup (ENOSYS, EPERM) falls back. */
	fake.uring_init = fake_uring_init;
	st = open_store("auto.log", ATOMIO_ENGINE_URING);
	CHECK_EQ(engine_of(st), ATOMIO_ENGINE_PLAIN);
	int f = atomio_file_open(st, t_path("sel.dat"), O_CREAT, 0644);
	CHECK(f >= 0);
	CHECK_EQ(atomio_pwrite(st, f, "abc", 3, 0), 3);
	CHECK_OK(atomio_close(st));
	/* A backend written before the engine existed leaves the entries NULL. */
	fake.uring_init = NULL;
	fake.uring_enter = NULL;
	fake.uring_exit = NULL;
	fake.eventfd = NULL;
	st = open_store("auto.log", ATOMIO_ENGINE_URING);
	CHECK_EQ(engine_of(st), ATOMIO_ENGINE_PLAIN);
	CHECK_EQ(atomio_event_fd(st), -ENOSYS);
	CHECK_OK(atomio_close(st));
	atomio_sys_set(NULL);
}

/* A ring that fails (nothing in flight) costs nothing: the write goes plain. */
static void ring_failure(void)
{
	fake = atomio_sys_linux;
	fake.uring_enter = failing_enter;
	atomio_sys_set(&fake);
	atomio *st = open_store("fail.log", ATOMIO_ENGINE_URING | ATOMIO_DIRECT_HOME);
	if (engine_of(st) != ATOMIO_ENGINE_URING) {
		CHECK_OK(atomio_close(st));
		atomio_sys_set(NULL);
		return;
	}
	int f = atomio_file_open(st, t_path("fail.dat"), O_CREAT, 0644);
	CHECK(f >= 0);
	char buf[4096];
	t_fill(buf, sizeof(buf), 1, 0);
	CHECK_EQ(atomio_pwrite(st, f, buf, sizeof(buf), 0), (long)sizeof(buf));
	CHECK(enter_calls > 0);
	__atomic_store_n(&enter_fail, 1000000, __ATOMIC_RELAXED);
	t_fill(buf, sizeof(buf), 2, 4096);
	CHECK_EQ(atomio_pwrite(st, f, buf, sizeof(buf), 4096), (long)sizeof(buf));
	CHECK_EQ(engine_of(st), ATOMIO_ENGINE_PLAIN);
	__atomic_store_n(&enter_fail, 0, __ATOMIC_RELAXED);
	CHECK_OK(atomio_close(st));
	atomio_sys_set(NULL);
	struct mfile m = {0};
	t_fill(buf, sizeof(buf), 1, 0);
	m_write(&m, buf, sizeof(buf), 0);
	t_fill(buf, sizeof(buf), 2, 4096);
	m_write(&m, buf, sizeof(buf), 4096);
	CHECK_OK(m_compare(&m, t_path("fail.dat"), 0));
	free(m.b);
}

/* --- the same workload through every engine and home mode ------------------------ */

struct run {
	atomio *st;
	int ids[NF];
	int direct;
	uint64_t seed;
	int t, ngroups;
	struct mfile *m; /* per thread: each thread owns its own region */
};

/* Each thread writes groups into its own 1 MiB region of both files, so that
 * its model is exact whatever the interleaving, and after every commit reads
 * its last range back through the file's own descriptor (O_DIRECT for direct
 * files): a commit that returned is visible to any reader. */
static void *runner(void *arg)
{
	struct run *r = arg;
	uint64_t base = (uint64_t)r->t << 20;
	void *rb;
	CHECK_OK(posix_memalign(&rb, 4096, 65536));
	for (int g = 0; g < r->ngroups; g++) {
		struct rng rg = {r->seed * 7 + (uint64_t)g * 131 + (uint64_t)r->t};
		atomio_tx *tx;
		CHECK_OK(atomio_tx_begin(r->st, &tx));
		int nops = 1 + (int)rng_below(&rg, 6);
		int lastf = 0;
		uint64_t lasto = 0, lastl = 0;
		for (int i = 0; i < nops; i++) {
			int f = (int)rng_below(&rg, NF);
			uint64_t len = 4096 * (1 + rng_below(&rg, 8));
			uint64_t off = base + 4096 * rng_below(&rg, 200);
			if (!r->direct && rng_below(&rg, 3) == 0) {
				len = 1 + rng_below(&rg, 9000);
				off = base + rng_below(&rg, 800000);
			}
			uint8_t *b = malloc(len);
			uint32_t tag = (uint32_t)(r->t * 100000 + g * 10 + i + 1);
			t_fill(b, len, tag, off);
			CHECK_OK(atomio_tx_write(tx, r->ids[f], b, len, (off_t)off));
			m_write(&r->m[f], b, len, off);
			free(b);
			lastf = f;
			lasto = off;
			lastl = len;
		}
		CHECK_OK(atomio_tx_commit(tx));
		/* visible at once, also to an O_DIRECT reader (the twin's dirty
		 * pages are written back before a direct read returns) */
		if (r->direct && lastl <= 65536) {
			int fd = atomio_file_fd(r->st, r->ids[lastf]);
			CHECK_EQ(pread(fd, rb, lastl, (off_t)lasto), (long)lastl);
			CHECK(!memcmp(rb, r->m[lastf].b + lasto, lastl));
		}
	}
	free(rb);
	return NULL;
}

static void mode(const char *name, uint32_t flags, int direct, int expect_direct_home)
{
	char logn[64], fn[NF][64];
	snprintf(logn, sizeof(logn), "%s.log", name);
	atomio *st = open_store(logn, flags);
	struct run r[NT];
	struct mfile m[NT][NF];
	memset(m, 0, sizeof(m));
	int ids[NF];
	for (int i = 0; i < NF; i++) {
		snprintf(fn[i], sizeof(fn[i]), "%s.%d", name, i);
		ids[i] = atomio_file_open(st, t_path(fn[i]), O_CREAT | (direct ? O_DIRECT : 0), 0644);
		if (ids[i] == -EINVAL && direct)
			t_skip("O_DIRECT not supported on %s", t_dir());
		CHECK(ids[i] >= 0);
		struct atomio_caps c;
		CHECK_OK(atomio_caps(st, ids[i], &c));
		CHECK_EQ(!!(c.flags & ATOMIO_CAP_DIRECT_HOME), expect_direct_home);
	}
	pthread_t th[NT];
	for (int t = 0; t < NT; t++) {
		r[t] = (struct run){.st = st, .direct = direct, .seed = 99, .t = t,
				    .ngroups = T_SCALE(60), .m = m[t]};
		memcpy(r[t].ids, ids, sizeof(ids));
		CHECK_OK(pthread_create(&th[t], NULL, runner, &r[t]));
	}
	for (int t = 0; t < NT; t++)
		CHECK_OK(pthread_join(th[t], NULL));
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.commits, NT * T_SCALE(60));
	CHECK(s.checkpoints > 0); /* the 1 MiB log filled: checkpoints under load */
	CHECK_OK(atomio_close(st));
	/* the whole file is the threads' regions side by side */
	for (int i = 0; i < NF; i++) {
		struct mfile all = {0};
		for (int t = 0; t < NT; t++)
			if (m[t][i].size)
				m_write(&all, m[t][i].b + ((uint64_t)t << 20),
					m[t][i].size - ((uint64_t)t << 20), (uint64_t)t << 20);
		CHECK_OK(m_compare(&all, t_path(fn[i]), 0));
		free(all.b);
		for (int t = 0; t < NT; t++)
			free(m[t][i].b);
	}
	printf("%-14s ok: %llu commits, %llu log writes, %llu checkpoints\n", name,
	       (unsigned long long)s.commits, (unsigned long long)s.batches,
	       (unsigned long long)s.checkpoints);
}

/* Overlapping ranges of one group on the io_uring home ring land in order. */
static void overlap_in_group(void)
{
	atomio *st = open_store("ov.log", ATOMIO_ENGINE_URING | ATOMIO_DIRECT_HOME);
	int f = atomio_file_open(st, t_path("ov.dat"), O_CREAT | O_DIRECT, 0644);
	if (f == -EINVAL)
		t_skip("O_DIRECT not supported on %s", t_dir());
	CHECK(f >= 0);
	struct mfile m = {0};
	uint8_t *b = malloc(65536);
	for (int round = 0; round < 20; round++) {
		atomio_tx *tx;
		CHECK_OK(atomio_tx_begin(st, &tx));
		for (int i = 0; i < 12; i++) {
			uint64_t off = 4096 * (uint64_t)((round * 7 + i * 3) % 10);
			uint64_t len = 4096 * (uint64_t)(1 + (i % 4));
			t_fill(b, len, (uint32_t)(round * 100 + i + 1), off);
			CHECK_OK(atomio_tx_write(tx, f, b, len, (off_t)off));
			m_write(&m, b, len, off);
		}
		CHECK_OK(atomio_tx_commit(tx));
	}
	CHECK_OK(atomio_close(st));
	CHECK_OK(m_compare(&m, t_path("ov.dat"), 0));
	free(b);
	free(m.b);
}

int main(void)
{
	selection();
	ring_failure();
	overlap_in_group();
	mode("plain-buf", ATOMIO_ENGINE_PLAIN, 0, 0);
	mode("uring-buf", ATOMIO_ENGINE_URING, 0, 0);
	mode("plain-direct", ATOMIO_ENGINE_PLAIN, 1, 0);
	mode("uring-direct", ATOMIO_ENGINE_URING, 1, 0);
	mode("plain-dhome", ATOMIO_ENGINE_PLAIN | ATOMIO_DIRECT_HOME, 1, 1);
	mode("uring-dhome", ATOMIO_ENGINE_URING | ATOMIO_DIRECT_HOME, 1, 1);
	return 0;
}
