/* The preload library's one mode (every process joins the store; before
 * issue 36 the shared mode, ATOMIO_SHARED=1): a pwrite inside the
 * file (P1), a truncate below it (P2) and an append (P3), in three
 * processes, must leave what some serial order of the three leaves.  A write
 * inside the file took no lock between the processes (its look at the size
 * and its commit were apart), so:
 *   P2's truncate to 4 KiB is committed, not yet home;
 *   P1 sees 12 KiB, its 4 KiB at 8 KiB "inside", and commits after it;
 *   P2's truncate goes home; P3 appends, sees 4 KiB (P1's write not home
 *   yet), and commits 6 KiB at 4 KiB after P1's write:
 * P3's bytes land over half of P1's, and no order gives that (P2 P1 P3
 * appends at 12 KiB; P2 P3 P1 leaves P1's bytes on top; P1 P2 P3 ends at
 * 10 KiB).
 *
 * This process is the store's first and leads the groups itself where the
 * interleaving needs it: it takes the log role by hand while a group is
 * queued (lead_locked_drops under the same hold of the mutex), and its ops
 * table holds its home writes (the truncate's ftruncate, P1's pwritev) on
 * pipes.  P1, P2 and P3 are this program exec'd under the preload library
 * ("op" mode: plain POSIX calls).  With the fix P1 waits for P2's lock
 * instead of queueing (seen in /proc/locks), and the run goes the other
 * way; both ways the result is checked against all six orders. */
#include <pthread.h>
#include <sys/wait.h>

#include "shm.h"
#include "sys.h"
#include "t.h"

#define PG 4096
#define APP (PG + PG / 2) /* P3's append: from 4 KiB it covers half of P1's write */

/* --- op mode: one call of a plain program, under the preload --------------- */

static int op_main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	const char *what = argv[2], *path = argv[3];
	static char buf[2 * PG];
	if (!strcmp(what, "pwrite")) { /* P1: 4 KiB of 'p' at 8 KiB */
		int fd = open(path, O_RDWR);
		memset(buf, 'p', PG);
		return fd >= 0 && pwrite(fd, buf, PG, 2 * PG) == PG ? 0 : 1;
	}
	if (!strcmp(what, "truncate")) { /* P2: to 4 KiB */
		int fd = open(path, O_RDWR);
		return fd >= 0 && ftruncate(fd, PG) == 0 ? 0 : 1;
	}
	if (!strcmp(what, "append")) { /* P3: 6 KiB of 'c' */
		int fd = open(path, O_WRONLY | O_APPEND);
		memset(buf, 'c', APP);
		return fd >= 0 && write(fd, buf, APP) == APP ? 0 : 1;
	}
	return 2;
}

/* --- the hooks: this process's home writes held on pipes ---------------------- */

static struct atomio_sysops ops;
static atomio *st;
static int hold1[2], held1[2], hold2[2], held2[2];
static _Atomic int arm1, arm2;

static void hold(int *held, int *hold_p)
{
	char c = 0;
	if (write(held[1], &c, 1) != 1 || read(hold_p[0], &c, 1) != 1)
		abort();
}

static int h_ftruncate(int fd, off_t size)
{
	if (st && fd != st->log_fd && atomic_exchange(&arm1, 0))
		hold(held1, hold1); /* P2's truncate: logged, not home */
	return atomio_sys_linux.ftruncate(fd, size);
}

static ssize_t h_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	if (st && fd != st->log_fd && atomic_exchange(&arm2, 0))
		hold(held2, hold2); /* P1's write: logged, not home */
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
}

/* --- the run ------------------------------------------------------------------ */

static char so[PATH_MAX], self[PATH_MAX], log_path[PATH_MAX + 16], data[PATH_MAX + 16];

static pid_t spawn(const char *what)
{
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		char e1[PATH_MAX + 32], e4[PATH_MAX + 32];
		snprintf(e1, sizeof(e1), "ATOMIO_LOG=%s", log_path);
		snprintf(e4, sizeof(e4), "LD_PRELOAD=%s", so);
		char *env[] = {e1, "ATOMIO_FILES=*.p", "ATOMIO_LOG_SIZE=1M", e4, NULL};
		char *argv[] = {self, "op", (char *)what, data, NULL};
		execve(self, argv, env);
		_exit(3);
	}
	return p;
}

static void wait_ok(pid_t p, const char *what)
{
	int ws;
	CHECK(waitpid(p, &ws, 0) == p);
	if (!WIFEXITED(ws) || WEXITSTATUS(ws)) {
		fprintf(stderr, "%s: status %#x\n", what, ws);
		exit(1);
	}
}

static uint32_t q_len(void)
{
	shm_lock(st);
	uint32_t q = st->S->q_len;
	shm_unlock(st);
	return q;
}

static uint64_t batch_next(void)
{
	shm_lock(st);
	uint64_t k = st->S->batch_next;
	shm_unlock(st);
	return k;
}

static void role_by_hand(void)
{
	shm_lock(st);
	CHECK(!st->S->log_owner);
	st->S->log_owner = st->me;
	shm_unlock(st);
}

static void *lead(void *arg)
{
	(void)arg;
	shm_lock(st);
	st->S->log_owner = 0;
	lead_locked_drops(st);
	shm_unlock(st);
	return NULL;
}

/* Is a process waiting for an OFD lock on the log (the preload's lock bytes)? */
static bool lock_waiter(void)
{
	struct stat sb;
	CHECK_OK(stat(log_path, &sb));
	char want[64], line[256];
	snprintf(want, sizeof(want), ":%llu ", (unsigned long long)sb.st_ino);
	FILE *fp = fopen("/proc/locks", "r");
	CHECK(fp != NULL);
	bool found = false;
	while (!found && fgets(line, sizeof(line), fp))
		found = strstr(line, "->") && strstr(line, "OFDLCK") && strstr(line, want);
	fclose(fp);
	return found;
}

/* The file each serial order of P1 (write 'p' at 8K), P2 (truncate 4K), P3
 * (append 6K of 'c') leaves, from 12 KiB of 'o'. */
static bool some_order(const uint8_t *got, size_t n)
{
	static const char *orders[] = {"123", "132", "213", "231", "312", "321"};
	for (int i = 0; i < 6; i++) {
		uint8_t m[8 * PG];
		size_t len = 3 * PG;
		memset(m, 'o', len);
		for (const char *c = orders[i]; *c; c++) {
			if (*c == '1') {
				if (len < 2 * PG)
					memset(m + len, 0, 2 * PG - len);
				memset(m + 2 * PG, 'p', PG);
				len = len > 3 * PG ? len : 3 * PG;
			} else if (*c == '2') {
				len = PG;
			} else {
				memset(m + len, 'c', APP);
				len += APP;
			}
		}
		if (n == len && !memcmp(got, m, n)) {
			printf("the file is what the order P%c P%c P%c leaves\n", orders[i][0], orders[i][1],
			       orders[i][2]);
			return true;
		}
	}
	return false;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "op"))
		return op_main(argc, argv);
#ifdef ATOMIO_SAN
	t_skip("the preload library is not built with the sanitizers (LD_PRELOAD under ASan)");
#endif
	if (!realpath("build/libatomio_preload.so", so) || !realpath("/proc/self/exe", self))
		t_skip("build/libatomio_preload.so is not built");
	alarm(60);
	snprintf(log_path, sizeof(log_path), "%s/log", t_dir());
	snprintf(data, sizeof(data), "%s/f.p", t_dir());
	uint8_t init[3 * PG];
	memset(init, 'o', sizeof(init));
	int fd = open(data, O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0 && pwrite(fd, init, sizeof(init), 0) == (ssize_t)sizeof(init) && fsync(fd) == 0);
	close(fd);

	ops = atomio_sys_linux;
	ops.name = "t_preload_inside";
	ops.ftruncate = h_ftruncate;
	ops.pwritev = h_pwritev;
	ops.uring_init = NULL;
	ops.uring_enter = NULL;
	ops.uring_exit = NULL;
	atomio_sys_set(&ops);
	CHECK_OK(pipe(hold1) || pipe(held1) || pipe(hold2) || pipe(held2));
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT | ATOMIO_ENGINE_PLAIN;
	CHECK_OK(atomio_open(log_path, &o, &st));
	char c = 0;

	/* P2's truncate, queued while this process holds the role, then led
	 * here: logged, its home write held. */
	role_by_hand();
	pid_t p2 = spawn("truncate");
	while (q_len() != 1)
		sched_yield();
	atomic_store(&arm1, 1);
	pthread_t l1, l2;
	CHECK_OK(pthread_create(&l1, NULL, lead, NULL));
	CHECK(read(held1[0], &c, 1) == 1);

	/* P1's write inside the file (as it was), while the truncate is not home. */
	role_by_hand();
	pid_t p1 = spawn("pwrite");
	bool queued;
	for (;;) {
		if ((queued = q_len() == 1) || lock_waiter())
			break;
		sched_yield();
	}
	printf("P1's write %s\n", queued ? "queued without a lock, behind the truncate"
					 : "waits for the truncate's lock");
	uint64_t k = batch_next();
	if (queued) {
		atomic_store(&arm2, 1);
		CHECK_OK(pthread_create(&l2, NULL, lead, NULL));
		while (batch_next() == k)
			sched_yield();
	} else {
		shm_lock(st);
		st->S->log_owner = 0; /* P1 leads its own group when it gets the lock */
		shm_wake(st, &st->sh->ev_role);
		shm_unlock(st);
	}
	CHECK(write(hold1[1], &c, 1) == 1); /* the truncate goes home */
	CHECK_OK(pthread_join(l1, NULL));
	wait_ok(p2, "P2 (truncate)");
	if (queued)
		CHECK(read(held2[0], &c, 1) == 1); /* P1's write logged, its home write held */
	else
		wait_ok(p1, "P1 (pwrite)");

	/* P3 appends. */
	pid_t p3 = spawn("append");
	if (queued) {
		k = batch_next();
		while (batch_next() == k)
			sched_yield(); /* P3's group taken (after P1's) */
		CHECK(write(hold2[1], &c, 1) == 1);
		CHECK_OK(pthread_join(l2, NULL));
		wait_ok(p1, "P1 (pwrite)");
	}
	wait_ok(p3, "P3 (append)");
	CHECK_OK(atomio_close(st));

	size_t n;
	uint8_t *got = t_slurp(data, &n);
	CHECK(got != NULL);
	bool ok = some_order(got, n);
	if (!ok) {
		fprintf(stderr, "FAIL: %zu bytes, [8K,12K) holds '%c...%c': P3's append landed over part of P1's "
				"write, which no serial order gives\n", n, n >= 3 * PG ? got[2 * PG] : '?',
			n >= 3 * PG ? got[3 * PG - 1] : '?');
		return 1;
	}
	free(got);
	printf("ok: a write inside the file, a truncate below it and an append leave what a serial order "
	       "leaves\n");
	return 0;
}
