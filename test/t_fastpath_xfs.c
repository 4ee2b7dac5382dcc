/* The kernel fast path for real: RWF_ATOMIC on XFS (reflink, so the kernel
 * does atomic writes in software without device support) on a loop device,
 * forced on.  A child writes 16 KiB pages and is SIGKILLed at a random
 * moment; after recovery every page holds the state after all acknowledged
 * writes, or after one more (the write in flight), whole.  Pure single-page
 * runs must write no log byte at all; mixed runs add two-page groups (logged)
 * over the same pages, so the hazard guard is exercised against real
 * recovery.  Both engines.  Skips where a loop device with XFS cannot be set
 * up (not root, no losetup/mkfs.xfs, no loop or XFS support). */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "workload.h"

#define PAGE 16384
#define NPAGES 32

static char img[4300], mnt[4300], loopdev[256];
static pid_t owner;

static void teardown(void)
{
	char cmd[9000];
	if (getpid() != owner)
		return; /* a child's exit must not unmount the parent's filesystem */
	if (mnt[0]) {
		snprintf(cmd, sizeof(cmd), "umount '%s' 2>/dev/null || umount -l '%s' 2>/dev/null", mnt, mnt);
		if (system(cmd))
			fprintf(stderr, "warning: could not unmount %s\n", mnt);
		mnt[0] = 0;
	}
	if (loopdev[0]) {
		snprintf(cmd, sizeof(cmd), "losetup -d '%s' 2>/dev/null", loopdev);
		if (system(cmd))
			fprintf(stderr, "warning: could not detach %s\n", loopdev);
		loopdev[0] = 0;
	}
}

static void setup(void)
{
	if (geteuid() != 0)
		t_skip("needs root for a loop device");
	if (system("command -v losetup >/dev/null && command -v mkfs.xfs >/dev/null && command -v mount >/dev/null"))
		t_skip("losetup, mkfs.xfs or mount missing");
	owner = getpid();
	snprintf(img, sizeof(img), "%s", t_path("xfs.img"));
	snprintf(mnt, sizeof(mnt), "%s", t_path("mnt"));
	CHECK(mkdir(mnt, 0700) == 0);
	int fd = open(img, O_RDWR | O_CREAT, 0600);
	CHECK(fd >= 0 && ftruncate(fd, 320 << 20) == 0); /* sparse; mkfs.xfs wants >= 300 MiB */
	close(fd);
	char cmd[9000];
	snprintf(cmd, sizeof(cmd), "losetup -f --show '%s' 2>/dev/null", img);
	FILE *p = popen(cmd, "r");
	if (!p || !fgets(loopdev, sizeof(loopdev), p)) {
		loopdev[0] = 0;
		if (p)
			pclose(p);
		mnt[0] = 0;
		t_skip("no loop device");
	}
	pclose(p);
	loopdev[strcspn(loopdev, "\n")] = 0;
	atexit(teardown);
	char m[sizeof(mnt)];
	snprintf(m, sizeof(m), "%s", mnt);
	mnt[0] = 0; /* not mounted yet */
	snprintf(cmd, sizeof(cmd), "mkfs.xfs -q -f -m reflink=1 '%s' >/dev/null 2>&1", loopdev);
	if (system(cmd))
		t_skip("mkfs.xfs -m reflink=1 failed on %s", loopdev);
	snprintf(cmd, sizeof(cmd), "mount -t xfs '%s' '%s' 2>/dev/null", loopdev, m);
	if (system(cmd))
		t_skip("cannot mount XFS from %s", loopdev);
	snprintf(mnt, sizeof(mnt), "%s", m);
}

#define XP 4400
static void xpath(char *out, const char *name)
{
	if (snprintf(out, XP, "%s/%s", mnt, name) >= XP)
		abort();
}

/* Operation k of a run: a single page (fast path), or in mixed runs every
 * fourth one a group of two pages (logged). */
struct op {
	int n;
	int page[2];
	uint32_t tag[2];
};

static void op_of(uint64_t seed, int mixed, int k, struct op *o)
{
	struct rng r = {seed * 1000003ull + (uint64_t)k};
	o->n = mixed && k % 4 == 3 ? 2 : 1;
	o->page[0] = (int)rng_below(&r, NPAGES);
	o->page[1] = (o->page[0] + 1 + (int)rng_below(&r, NPAGES - 1)) % NPAGES;
	o->tag[0] = (uint32_t)(k * 2 + 1);
	o->tag[1] = (uint32_t)(k * 2 + 2);
}

static void apply(struct mfile *m, const struct op *o, char *buf)
{
	for (int i = 0; i < o->n; i++) {
		t_fill(buf, PAGE, o->tag[i], 0);
		m_write(m, buf, PAGE, (uint64_t)o->page[i] * PAGE);
	}
}

struct ack {
	int k;
	uint64_t bytes_logged, fast_writes;
};

static void child(uint32_t flags, uint64_t seed, int mixed, int wfd)
{
	struct atomio_options o = t_opts(8 << 20);
	o.flags |= flags | ATOMIO_FAST_PATH_FORCE;
	char lp[XP], dp[XP];
	xpath(lp, "store.log");
	xpath(dp, "data");
	atomio *st;
	CHECK_OK(atomio_open(lp, &o, &st));
	int f = atomio_file_open(st, dp, O_DIRECT, 0);
	CHECK(f >= 0);
	char *buf = aligned_alloc(4096, PAGE);
	for (int k = 0;; k++) {
		struct op op;
		op_of(seed, mixed, k, &op);
		atomio_tx *tx;
		CHECK_OK(atomio_tx_begin(st, &tx));
		for (int i = 0; i < op.n; i++) {
			t_fill(buf, PAGE, op.tag[i], 0);
			CHECK_OK(atomio_tx_write(tx, f, buf, PAGE, (off_t)op.page[i] * PAGE));
		}
		CHECK_OK(atomio_tx_commit(tx));
		struct atomio_stats s;
		CHECK_OK(atomio_stats(st, &s));
		struct ack a = {.k = k, .bytes_logged = s.bytes_logged, .fast_writes = s.fast_writes};
		CHECK(write(wfd, &a, sizeof(a)) == sizeof(a));
	}
}

static void round_(uint32_t flags, uint64_t seed, int mixed, struct mfile *base)
{
	int pfd[2];
	CHECK_OK(pipe(pfd));
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		child(flags, seed, mixed, pfd[1]);
		_exit(0);
	}
	close(pfd[1]);
	struct timespec ts = {0, (long)(60 + seed % 200) * 1000000L};
	nanosleep(&ts, NULL);
	kill(pid, SIGKILL);
	struct ack a, last = {.k = -1};
	while (read(pfd[0], &a, sizeof(a)) == sizeof(a)) {
		if (!mixed)
			CHECK_EQ(a.bytes_logged, 0); /* the fast path never touches the log */
		last = a;
	}
	close(pfd[0]);
	int ws;
	CHECK(waitpid(pid, &ws, 0) == pid);

	/* recover (plain engine, fast path automatic: no matter) and compare */
	char lp[XP], dp[XP];
	xpath(lp, "store.log");
	xpath(dp, "data");
	atomio *st;
	struct atomio_options o = {0};
	CHECK_OK(atomio_open(lp, &o, &st)); /* right away: the library waits out a dead ring */
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_OK(atomio_close(st));
	if (!mixed)
		CHECK_EQ(s.groups_recovered, 0);
	char *buf = malloc(PAGE);
	struct mfile m = m_copy(base);
	for (int k = 0; k <= last.k; k++) {
		struct op op;
		op_of(seed, mixed, k, &op);
		apply(&m, &op, buf);
	}
	struct mfile m1 = m_copy(&m);
	struct op op;
	op_of(seed, mixed, last.k + 1, &op);
	apply(&m1, &op, buf);
	int same0 = m_compare(&m, dp, 1) == 0, same1 = m_compare(&m1, dp, 1) == 0;
	if (!same0 && !same1) {
		m_compare(&m, dp, 0);
		fprintf(stderr, "%s run, seed %llu: %d writes acknowledged; the file is neither the "
				"state after them nor after one more\n",
			mixed ? "mixed" : "fast", (unsigned long long)seed, last.k + 1);
		exit(1);
	}
	printf("%s %s seed %llu: %d acknowledged (%llu fast), recovered %llu groups, %s\n",
	       flags & ATOMIO_ENGINE_URING ? "uring" : "plain", mixed ? "mixed" : "fast ",
	       (unsigned long long)seed, last.k + 1, (unsigned long long)last.fast_writes,
	       (unsigned long long)s.groups_recovered, same0 ? "in-flight write absent" : "in-flight write whole");
	/* the next round starts from this state */
	free(base->b);
	*base = same0 ? m : m1;
	free(same0 ? m1.b : m.b);
	free(buf);
}

int main(int argc, char **argv)
{
	uint64_t seed0 = argc > 1 ? strtoull(argv[1], NULL, 0) : t_seed_env(1);
	setup();
	char lp[XP], dp[XP];
	xpath(lp, "store.log");
	xpath(dp, "data");

	/* Capabilities: XFS reports software atomic writes; a loop device has
	 * no hardware ones, so AUTO keeps the fast path off. */
	struct atomio_options o = t_opts(8 << 20);
	atomio *st;
	CHECK_OK(atomio_open(lp, &o, &st));
	int f = atomio_file_open(st, dp, O_CREAT | O_DIRECT, 0644);
	CHECK(f >= 0);
	struct atomio_caps c;
	CHECK_OK(atomio_caps(st, f, &c));
	printf("XFS on %s: atomic write unit min %u max %u max_opt %u segments %u, device max %u, "
	       "dio align %u\n",
	       loopdev, c.atomic_write_unit_min, c.atomic_write_unit_max, c.atomic_write_unit_max_opt,
	       c.atomic_write_segments_max, c.bdev_atomic_write_unit_max_bytes, c.dio_offset_align);
	if (!(c.flags & ATOMIO_CAP_ATOMIC_WRITE) || c.atomic_write_unit_max < PAGE ||
	    c.atomic_write_unit_min > PAGE) {
		CHECK_OK(atomio_close(st));
		t_skip("this kernel's XFS takes no %d-byte RWF_ATOMIC writes (Linux 6.16+ needed)", PAGE);
	}
	if (!(c.flags & ATOMIO_CAP_HW_ATOMIC))
		CHECK_EQ(c.fast_path_max, 0);
	/* the data file: all pages written once, synced */
	char *buf = aligned_alloc(4096, PAGE);
	struct mfile base = {0};
	for (int p = 0; p < NPAGES; p++) {
		t_fill(buf, PAGE, 0, (uint64_t)p * PAGE);
		CHECK_EQ(atomio_pwrite(st, f, buf, PAGE, (off_t)p * PAGE), PAGE);
		m_write(&base, buf, PAGE, (uint64_t)p * PAGE);
	}
	CHECK_OK(atomio_close(st));
	free(buf);

	printf("seed %llu (ATOMIO_SEED=%llu to repeat)\n", (unsigned long long)seed0, (unsigned long long)seed0);
	int rounds = T_SCALE(8);
	for (int r = 0; r < rounds; r++) {
		uint32_t flags = r % 2 ? ATOMIO_ENGINE_URING : ATOMIO_ENGINE_PLAIN;
		round_(flags, seed0 + (uint64_t)r, r % 4 >= 2, &base);
	}
	free(base.b);
	return 0;
}
