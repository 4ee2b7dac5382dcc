/* A group of this process led down the kernel fast path by another process's
 * leader that dies inside that write (commit.c, adopt_pad_locked_drops):
 * the write was issued, so the group may be durable in its file.  Adopted,
 * it is queued again and committed anew; should that fail before anything
 * is written (here: the store failed meanwhile, so the queue is failed), its
 * owner must hear ATOMIO_EUNKNOWN ("outcome unknown"), never ATOMIO_EFAILED
 * ("not written"): the file holds the group's bytes.
 *
 * How the other process D comes to lead P's group on demand: D takes the log
 * role by hand (as the library's internals would), P's thread commits (its
 * group is queued, it waits for the role), D gives the role up and leads at
 * once under the same hold of the mutex (lead_locked_drops).  D's ops table
 * reports atomic-write limits (as t_fastpath's) and, at the RWF_ATOMIC
 * write, writes the bytes, fails the store (as any failed write of another
 * thread would) and dies:
 *   issued    inside the write, its batch BAT_LOGGING;
 *   returned  after it, waiting for an earlier batch's home turn (P's other
 *             thread's logged group to another file, whose home write P's
 *             ops table holds on a pipe): its batch BAT_LOGGED, published.
 * P's waiting thread reaps D, adopts its batch and fails the queue. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "shm.h"
#include "sys.h"
#include "t.h"

static struct atomio_sysops ops;
static atomio *dst;      /* D's store: its write hook fails it (and dies, or arms die_wait) */
static bool returned;    /* the mode: D dies after its write returned */
static bool die_wait;    /* D: die at the next futex wait (its home turn's) */
static int hold_fd = -1; /* P: the home write to this descriptor waits for a byte on hold[0] */
static int hold[2], held[2];

static int fake_statx(int dirfd, const char *path, int flags, unsigned mask, struct atomio_statx *stx)
{
	int r = atomio_sys_linux.statx(dirfd, path, flags, mask, stx);
	if (r == 0 && (mask & ATOMIO_STATX_WRITE_ATOMIC)) {
		stx->stx_mask |= ATOMIO_STATX_WRITE_ATOMIC;
		stx->stx_attributes |= ATOMIO_STATX_ATTR_WRITE_ATOMIC;
		stx->stx_atomic_write_unit_min = 4096;
		stx->stx_atomic_write_unit_max = 65536;
		stx->stx_atomic_write_segments_max = 1;
	}
	return r;
}

static ssize_t fake_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	if (!(rwf & RWF_ATOMIC))
		return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
	ssize_t n = atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf & ~RWF_ATOMIC);
	if (dst) {
		/* D: the bytes are in the file; the store fails; D dies
		 * before its write returns (its batch stays BAT_LOGGING). */
		shm_lock(dst);
		st_fail_locked(dst, -EIO);
		shm_unlock(dst);
		if (!returned)
			kill(getpid(), SIGKILL);
		die_wait = true;
	}
	return n;
}

static ssize_t hold_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	if (fd == hold_fd && !(rwf & RWF_ATOMIC)) {
		char c = 0;
		hold_fd = -1;
		if (write(held[1], &c, 1) != 1 || read(hold[0], &c, 1) != 1)
			abort();
	}
	return fake_pwritev(fd, iov, iovcnt, off, rwf);
}

static int die_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t timeout_ns)
{
	if (die_wait)
		kill(getpid(), SIGKILL); /* the mutex dropped: BAT_LOGGED is published */
	return atomio_sys_linux.futex_wait(word, val, timeout_ns);
}

static atomio *pst;
static int pf, pg;
static char page[4096] __attribute__((aligned(4096)));
static int presult = 1;

static void *p_commit(void *arg)
{
	(void)arg;
	presult = (int)atomio_pwrite(pst, pf, page, sizeof(page), 0);
	return NULL;
}

static void *p_other(void *arg)
{
	(void)arg;
	(void)atomio_pwrite(pst, pg, "other", 5, 0); /* its home write held (hold_pwritev) */
	return NULL;
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "t_fast_maybe: stuck for 60 s\n";
	(void)!write(2, m, sizeof(m) - 1);
	_exit(1);
}

/* D: joins, takes the role by hand, and once told leads P's queued group. */
static void d_main(const char *log, const char *fpath, const struct atomio_options *o, int ready, int go)
{
	atomio *mine;
	char c = 0;
	KCHECK(atomio_open(log, o, &mine) == 0);
	KCHECK(atomio_file_open(mine, fpath, O_DIRECT, 0) == pf);
	KCHECK(read(go, &c, 1) == 1); /* the role is free (P's other group, if any, is logged) */
	shm_lock(mine);
	KCHECK(!mine->S->log_owner);
	mine->S->log_owner = mine->me; /* the role, by hand */
	shm_unlock(mine);
	KCHECK(write(ready, &c, 1) == 1);
	KCHECK(read(go, &c, 1) == 1); /* P's group is queued */
	dst = mine;
	shm_lock(mine);
	mine->S->log_owner = 0;
	lead_locked_drops(mine); /* leads P's group down the fast path; dies in or after its write */
	_exit(1);
}

static int run(const char *mode)
{
	returned = !strcmp(mode, "returned");
	presult = 1;
	CHECK_OK(mkdir(t_path(mode), 0755));
	char log[4200], fpath[4200], gpath[4200];
	snprintf(log, sizeof(log), "%s/log", t_path(mode));
	snprintf(fpath, sizeof(fpath), "%s/f", t_path(mode));
	snprintf(gpath, sizeof(gpath), "%s/g", t_path(mode));
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT | ATOMIO_FAST_PATH_FORCE | ATOMIO_ENGINE_PLAIN;
	CHECK_OK(atomio_open(log, &o, &pst));
	pf = atomio_file_open(pst, fpath, O_CREAT | O_DIRECT, 0644);
	if (pf == -EINVAL)
		t_skip("O_DIRECT not supported on %s", t_dir());
	CHECK(pf >= 0);
	pg = atomio_file_open(pst, gpath, O_CREAT, 0644);
	CHECK(pg >= 0);
	t_fill(page, sizeof(page), 7, 0);

	int go[2], ready[2];
	CHECK_OK(pipe(go));
	CHECK_OK(pipe(ready));
	pid_t d = fork();
	CHECK(d >= 0);
	if (d == 0)
		d_main(log, fpath, &o, ready[1], go[0]);
	char c = 0;
	pthread_t t, t2;
	if (returned) {
		/* An earlier batch, logged, its home write held: D's batch
		 * waits for its home turn after its write returned. */
		CHECK_OK(pipe(hold));
		CHECK_OK(pipe(held));
		hold_fd = atomio_file_fd(pst, pg);
		CHECK(hold_fd >= 0);
		CHECK_OK(pthread_create(&t2, NULL, p_other, NULL));
		CHECK(read(held[0], &c, 1) == 1);
	}
	CHECK(write(go[1], &c, 1) == 1);
	CHECK(read(ready[0], &c, 1) == 1);
	CHECK_OK(pthread_create(&t, NULL, p_commit, NULL));
	/* Until P's group is queued (an event, not a time). */
	for (;;) {
		shm_lock(pst);
		uint32_t q = pst->S->q_len;
		shm_unlock(pst);
		if (q == 1)
			break;
		sched_yield();
	}
	CHECK(write(go[1], &c, 1) == 1);
	int ws;
	CHECK(waitpid(d, &ws, 0) == d);
	if (!WIFSIGNALED(ws)) {
		fprintf(stderr, "%s: D was not killed at its fast-path write (status %#x)\n", mode, ws);
		return 1;
	}
	if (returned) {
		CHECK(write(hold[1], &c, 1) == 1);
		CHECK_OK(pthread_join(t2, NULL));
	}
	CHECK_OK(pthread_join(t, NULL));
	size_t n;
	uint8_t *b = t_slurp(fpath, &n);
	int landed = n == sizeof(page) && !memcmp(b, page, n);
	free(b);
	printf("%s: P's group: %s; its bytes %s in the file\n", mode,
	       presult >= 0 ? "written" : atomio_strerror(presult), landed ? "are" : "are not");
	CHECK(landed);
	(void)atomio_close(pst);
	if (presult == ATOMIO_EFAILED) {
		fprintf(stderr, "FAIL: %s: a group its dead leader's fast-path write made durable was "
				"reported 'not written' (ATOMIO_EFAILED)\n", mode);
		return 1;
	}
	CHECK_EQ(presult, ATOMIO_EUNKNOWN);
	return 0;
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	alarm(60);
	ops = atomio_sys_linux;
	ops.name = "t_fast_maybe";
	ops.statx = fake_statx;
	ops.pwritev = hold_pwritev;
	ops.futex_wait = die_futex_wait;
	ops.uring_init = NULL; /* the plain engine: writes through pwritev */
	ops.uring_enter = NULL;
	ops.uring_exit = NULL;
	atomio_sys_set(&ops);
	int fails = run("issued");
	fails += run("returned");
	if (fails)
		return 1;
	printf("ok: a group a dead leader's fast-path write may have made durable fails only as "
	       "ATOMIO_EUNKNOWN\n");
	return 0;
}
