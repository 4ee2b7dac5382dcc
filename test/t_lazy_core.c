/* Lazy groups, the write side (issue 36: commit.c, LAZY GROUPS): tickets in
 * commit order; no log write until a sync, a durable commit, pressure or the
 * delay; a sync with nothing pending makes no syscall; the delay flushes
 * (the flusher thread, or without it the committer that finds it expired);
 * a durable commit flushes the lazy groups before it (prefix); 5x the arena
 * committed lazily without a sync does not deadlock (pressure); the groups
 * of a child killed after its lazy commits are made durable by the parent's
 * sync; close makes a handle's groups durable.  Durable = in the file after
 * every handle is closed (and after a reopen that recovers).
 *
 * The re-log (commit.c, ADOPTION): a process leading a flush of a lazy
 * group L1 dies inside its log write while a later batch (L2 over the same
 * bytes, L3) is already logged; the adopter must write L1's record again at
 * its place (same seq), not pad it and commit it again after L2 -- which
 * would leave L1's bytes, the older group's, in the file (and after a crash
 * could keep L2 without L1). */
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "support/faultsys.h"
#include "sys.h"
#include "t.h"

#define SMALL 100
#define NLAZY 1000

static struct atomio_lazy_stats lstats(atomio *st)
{
	struct atomio_lazy_stats s;
	CHECK_OK(atomio_lazy_stats(st, &s));
	return s;
}

static uint64_t log_syncs(atomio *st)
{
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	return s.log_syncs;
}

static uint64_t lazy_write(atomio *st, int f, uint32_t tag, uint64_t off, size_t len)
{
	char buf[65536];
	CHECK(len <= sizeof(buf));
	t_fill(buf, len, tag, off);
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, f, buf, len, (off_t)off));
	uint64_t t = 0;
	CHECK_OK(atomio_tx_commit_lazy(tx, &t));
	return t;
}

/* The file at path holds tag's bytes at [off, off + len). */
static void check_bytes(const char *path, uint32_t tag, uint64_t off, size_t len)
{
	size_t n;
	uint8_t *b = t_slurp(path, &n);
	CHECK(b && n >= off + len);
	for (size_t i = 0; i < len; i++)
		CHECK_EQ(b[off + i], t_byte(tag, off + i));
	free(b);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* 1000 lazy commits: tickets increasing, no log write; the sync writes
 * them (one log write: they fit one batch), then a sync with nothing
 * pending makes no syscall at all. */
static void t_many_then_sync(void)
{
	struct atomio_options o = t_opts(16 << 20);
	o.lazy_delay_us = 60000000; /* no delay flush during the test */
	atomio *st;
	CHECK_OK(atomio_open(t_path("log1"), &o, &st));
	int f = atomio_file_open(st, t_path("f1"), O_CREAT, 0644);
	CHECK(f >= 0);
	uint64_t s0 = log_syncs(st), prev = 0;
	for (uint32_t i = 0; i < NLAZY; i++) {
		uint64_t t = lazy_write(st, f, 1, (uint64_t)i * SMALL, SMALL);
		CHECK(t > prev);
		prev = t;
	}
	struct atomio_lazy_stats l = lstats(st);
	CHECK_EQ(l.lazy_commits, NLAZY);
	CHECK_EQ(l.lazy_pending, NLAZY);
	CHECK(log_syncs(st) - s0 <= 1);
	CHECK_OK(atomio_sync(st, f, 0));
	l = lstats(st);
	CHECK_EQ(l.lazy_pending, 0);
	CHECK(l.flush_sync >= 1);
	CHECK(l.syncs_waited >= 1);
	CHECK(log_syncs(st) - s0 >= 1);
	/* home already: the file holds them while the store is open */
	check_bytes(t_path("f1"), 1, 0, (size_t)NLAZY * SMALL);

	fault_install();
	struct fault_plan p = {.kind = FK_NONE};
	fault_arm(&p);
	CHECK_OK(atomio_sync(st, -1, 0));
	CHECK_OK(atomio_sync(st, f, 0));
	CHECK_OK(atomio_sync_ticket(st, prev, 0));
	uint64_t calls = 0;
	for (int op = 0; op < FOP_COUNT; op++)
		calls += fault_calls((enum fault_op)op);
	CHECK_EQ(calls, 0);
	fault_disarm();
	fault_uninstall();
	CHECK_OK(atomio_close(st));
	check_bytes(t_path("f1"), 1, 0, (size_t)NLAZY * SMALL);
}

/* The delay: the flusher thread flushes a lone group within the delay
 * plus a flush (bounded by polls, not by a clock assertion). */
static void t_delay(void)
{
	struct atomio_options o = t_opts(16 << 20);
	o.lazy_delay_us = 20000;
	atomio *st;
	CHECK_OK(atomio_open(t_path("log2"), &o, &st));
	int f = atomio_file_open(st, t_path("f2"), O_CREAT, 0644);
	CHECK(f >= 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	(void)lazy_write(st, f, 2, 0, SMALL);
	int polls = 0;
	while (lstats(st).lazy_pending && polls < 5000) {
		sleep_ms(1);
		polls++;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("delay: flushed after %d polls, %.1f ms (delay 20 ms)\n", polls,
	       (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	CHECK_EQ(lstats(st).lazy_pending, 0);
	CHECK(lstats(st).flush_delay >= 1);
	check_bytes(t_path("f2"), 2, 0, SMALL);
	/* ATOMIO_SYNC_NOWAIT starts the flush (the flusher leads) and returns */
	CHECK_OK(atomio_sync(st, -1, ATOMIO_SYNC_NOWAIT)); /* nothing pending */
	(void)lazy_write(st, f, 2, SMALL, SMALL);
	uint64_t fs = lstats(st).flush_sync;
	CHECK_OK(atomio_sync(st, -1, ATOMIO_SYNC_NOWAIT));
	for (polls = 0; lstats(st).lazy_pending && polls < 5000; polls++)
		sleep_ms(1);
	CHECK_EQ(lstats(st).lazy_pending, 0);
	CHECK(lstats(st).flush_sync > fs || lstats(st).flush_delay > 1);
	check_bytes(t_path("f2"), 2, SMALL, SMALL);
	/* another process asking for another delay is refused, naming it */
	char err[256] = "";
	struct atomio_options o2 = t_opts(16 << 20);
	o2.lazy_delay_us = 30000;
	o2.errbuf = err;
	o2.errbuf_size = sizeof(err);
	atomio *st2 = NULL;
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int r = atomio_open(t_path("log2"), &o2, &st2);
		_exit(r == -EINVAL && strstr(err, "lazy_delay_us") ? 0 : 1);
	}
	int ws;
	CHECK_EQ(waitpid(pid, &ws, 0), pid);
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK_OK(atomio_close(st));
}

/* ATOMIO_NO_BG_CHECKPOINT: no flusher thread; a committer that finds the
 * delay expired leads the flush itself. */
static void t_no_thread(void)
{
	struct atomio_options o = t_opts(16 << 20);
	o.lazy_delay_us = 20000;
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(t_path("log3"), &o, &st));
	int f = atomio_file_open(st, t_path("f3"), O_CREAT, 0644);
	CHECK(f >= 0);
	(void)lazy_write(st, f, 3, 0, SMALL);
	sleep_ms(40);
	CHECK_EQ(lstats(st).lazy_pending, 1); /* no thread flushed it */
	(void)lazy_write(st, f, 3, SMALL, SMALL);
	CHECK_EQ(lstats(st).lazy_pending, 0); /* the committer led both */
	CHECK_EQ(lstats(st).flush_delay, 1);
	check_bytes(t_path("f3"), 3, 0, 2 * SMALL);
	/* a durable commit flushes the lazy groups before it (prefix) */
	for (uint32_t i = 0; i < 10; i++)
		(void)lazy_write(st, f, 4, 4096 + (uint64_t)i * SMALL, SMALL);
	CHECK_EQ(lstats(st).lazy_pending, 10);
	char b[SMALL];
	t_fill(b, SMALL, 5, 8192);
	CHECK_EQ(atomio_pwrite(st, f, b, SMALL, 8192), SMALL);
	CHECK_EQ(lstats(st).lazy_pending, 0);
	CHECK(lstats(st).flush_sync >= 1);
	check_bytes(t_path("f3"), 4, 4096, 10 * SMALL);
	CHECK_OK(atomio_close(st));
}

/* Five times the arena committed lazily, never synced: pressure flushes
 * (no deadlock); close makes the rest durable. */
static void t_pressure(bool thread)
{
	struct atomio_options o = t_opts(16 << 20); /* arena: 1 MiB */
	o.lazy_delay_us = 60000000;
	if (!thread)
		o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(t_path("log4"), &o, &st));
	int f = atomio_file_open(st, t_path("f4"), O_CREAT, 0644);
	CHECK(f >= 0);
	const size_t len = 32768;
	const uint32_t n = 5 * (1u << 20) / len;
	for (uint32_t i = 0; i < n; i++)
		(void)lazy_write(st, f, 6, (uint64_t)i * len, len);
	struct atomio_lazy_stats l = lstats(st);
	printf("pressure (%s): flush_press %llu, lazy_waits %llu\n", thread ? "flusher" : "no thread",
	       (unsigned long long)l.flush_press, (unsigned long long)l.lazy_waits);
	CHECK(l.flush_press > 0);
	CHECK_EQ(l.lazy_eager, 0);
	CHECK_OK(atomio_close(st));
	check_bytes(t_path("f4"), 6, 0, (size_t)n * len);
	unlink(t_path("log4"));
	unlink(t_path("f4"));
}

/* Processes: a child with its own handle commits 1000 groups lazily (no
 * log write), then is killed; the parent's sync commits them (the dead
 * process's groups stay queued); closing and reopening finds them. */
static void t_killed_child(void)
{
	struct atomio_options o = t_opts(16 << 20);
	o.lazy_delay_us = 60000000;
	atomio *st;
	CHECK_OK(atomio_open(t_path("log5"), &o, &st));
	int f = atomio_file_open(st, t_path("f5"), O_CREAT, 0644);
	CHECK(f >= 0);
	uint64_t s0 = log_syncs(st);
	int pp[2];
	CHECK_OK(pipe(pp));
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(pp[0]);
		atomio *c;
		CHECK_OK(atomio_open(t_path("log5"), &o, &c));
		int cf = atomio_file_open(c, t_path("f5"), 0, 0);
		CHECK(cf >= 0);
		for (uint32_t i = 0; i < NLAZY; i++)
			(void)lazy_write(c, cf, 7, (uint64_t)i * SMALL, SMALL);
		CHECK_EQ(write(pp[1], "x", 1), 1);
		for (;;)
			pause();
	}
	close(pp[1]);
	char x;
	CHECK_EQ(read(pp[0], &x, 1), 1);
	close(pp[0]);
	CHECK_EQ(lstats(st).lazy_pending, NLAZY);
	CHECK(log_syncs(st) - s0 <= 1);
	/* this process reads them already (lazy.c's overlay) */
	char rb[SMALL], want[SMALL];
	t_fill(want, SMALL, 7, 500 * SMALL);
	CHECK_EQ(atomio_pread(st, f, rb, SMALL, 500 * SMALL), SMALL);
	CHECK(!memcmp(rb, want, SMALL));
	CHECK_OK(kill(pid, SIGKILL));
	/* ... and still once their process is gone */
	CHECK_EQ(atomio_pread(st, f, rb, SMALL, 500 * SMALL), SMALL);
	CHECK(!memcmp(rb, want, SMALL));
	int ws;
	CHECK_EQ(waitpid(pid, &ws, 0), pid);
	CHECK_OK(atomio_sync(st, -1, 0));
	CHECK_EQ(lstats(st).lazy_pending, 0);
	check_bytes(t_path("f5"), 7, 0, (size_t)NLAZY * SMALL);
	/* a later commit of this process's own, lazy, then close: durable */
	(void)lazy_write(st, f, 8, 200000, SMALL);
	CHECK_OK(atomio_close(st));
	o.flags = 0;
	CHECK_OK(atomio_open(t_path("log5"), &o, &st));
	CHECK_OK(atomio_close(st));
	check_bytes(t_path("f5"), 7, 0, (size_t)NLAZY * SMALL);
	check_bytes(t_path("f5"), 8, 200000, SMALL);
}

/* --- the re-log ------------------------------------------------------------ */

static ino_t relog_ino;
static uint8_t relog_mark[32]; /* L1's first bytes: its record holds them (no compression) */
static int relog_note = -1;    /* the leader tells the test it is in its write */

static ssize_t block_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	struct stat sb;
	if (atomio_sys_linux.fstat(fd, &sb) == 0 && sb.st_ino == relog_ino)
		for (int i = 0; i < iovcnt; i++)
			if (iov[i].iov_len >= sizeof(relog_mark) &&
			    memmem(iov[i].iov_base, iov[i].iov_len, relog_mark, sizeof(relog_mark))) {
				CHECK_EQ(write(relog_note, "w", 1), 1);
				for (;;)
					pause(); /* killed here: before its write */
			}
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
}

static atomio *relog_open(const char *log)
{
	struct atomio_options o = t_opts(16 << 20);
	o.lazy_delay_us = 60000000;
	o.flags |= ATOMIO_NO_BG_CHECKPOINT | ATOMIO_NO_COMPRESS;
	atomio *st;
	CHECK_OK(atomio_open(log, &o, &st));
	return st;
}

struct killer_arg {
	atomio *st;
	uint64_t syncs0;
	pid_t victim;
};

/* Kill the leader of L1's batch once a later batch's log write is done. */
static void *killer_main(void *p)
{
	struct killer_arg *a = p;
	for (int i = 0; i < 10000 && log_syncs(a->st) == a->syncs0; i++)
		sleep_ms(1);
	CHECK(log_syncs(a->st) > a->syncs0);
	CHECK_OK(kill(a->victim, SIGKILL));
	return NULL;
}

/* The survivor: commits L1; its child leads L1's flush and blocks in the
 * log write; the survivor commits L2 (same bytes) and L3, syncs (its batch
 * is logged while L1's is not), the child is killed, the sync adopts L1's
 * batch.  Then L2's bytes must be in the file, here and after recovery. */
static void relog_survivor(const char *log, const char *path)
{
	atomio *st = relog_open(log);
	int f = atomio_file_open(st, path, 0, 0);
	CHECK(f >= 0);
	t_fill(relog_mark, sizeof(relog_mark), 21, 0);
	(void)lazy_write(st, f, 21, 0, SMALL); /* L1 */
	int pp[2];
	CHECK_OK(pipe(pp));
	pid_t c = fork();
	CHECK(c >= 0);
	if (c == 0) {
		close(pp[0]);
		relog_note = pp[1];
		static struct atomio_sysops blocker;
		blocker = atomio_sys_linux;
		blocker.name = "blocker";
		blocker.pwritev = block_pwritev;
		blocker.uring_init = NULL; /* every write through pwritev */
		atomio_sys_set(&blocker);
		atomio *cs = relog_open(log);
		(void)atomio_sync(cs, -1, 0); /* leads L1's batch */
		_exit(9);                     /* never: it blocks in the write */
	}
	close(pp[1]);
	char x;
	CHECK_EQ(read(pp[0], &x, 1), 1);
	close(pp[0]);
	(void)lazy_write(st, f, 22, 0, SMALL);    /* L2: L1's bytes */
	(void)lazy_write(st, f, 23, 4096, SMALL); /* L3 */
	struct killer_arg ka = {.st = st, .syncs0 = log_syncs(st), .victim = c};
	pthread_t kt;
	CHECK_OK(pthread_create(&kt, NULL, killer_main, &ka));
	alarm(30);
	CHECK_OK(atomio_sync(st, -1, 0));
	CHECK_OK(pthread_join(kt, NULL));
	int ws;
	CHECK_EQ(waitpid(c, &ws, 0), c);
	CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
	CHECK_EQ(lstats(st).lazy_pending, 0);
	check_bytes(path, 22, 0, SMALL);
	check_bytes(path, 23, 4096, SMALL);
	_exit(0); /* no close: recovery replays the log */
}

static void t_relog(void)
{
	const char *log = t_path("log6"), *path = t_path("f6");
	atomio *st = relog_open(log);
	CHECK(atomio_file_open(st, path, O_CREAT, 0644) >= 0);
	CHECK_OK(atomio_close(st));
	struct stat sb;
	CHECK_OK(stat(log, &sb));
	relog_ino = sb.st_ino;
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0)
		relog_survivor(log, path);
	int ws;
	CHECK_EQ(waitpid(p, &ws, 0), p);
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	st = relog_open(log); /* alone: recovery */
	CHECK_OK(atomio_close(st));
	check_bytes(path, 22, 0, SMALL);
	check_bytes(path, 23, 4096, SMALL);
	printf("re-log: the later group's bytes are in the file\n");
}

/* The store fails at the flush's log write: the sync says the groups'
 * fate is unknown (the write was issued), later lazy commits fail. */
static void t_failure(void)
{
	struct atomio_options o = t_opts(16 << 20);
	o.lazy_delay_us = 60000000;
	o.flags |= ATOMIO_NO_BG_CHECKPOINT | ATOMIO_ENGINE_PLAIN;
	atomio *st;
	CHECK_OK(atomio_open(t_path("log7"), &o, &st));
	int f = atomio_file_open(st, t_path("f7"), O_CREAT, 0644);
	CHECK(f >= 0);
	for (uint32_t i = 0; i < 10; i++)
		(void)lazy_write(st, f, 9, (uint64_t)i * SMALL, SMALL);
	fault_install();
	struct fault_plan p = {.op = FOP_PWRITEV, .nth = 0, .kind = FK_ERROR, .err = EIO};
	fault_arm(&p);
	CHECK_EQ(atomio_sync(st, -1, 0), ATOMIO_EUNKNOWN);
	CHECK(fault_fired());
	fault_disarm();
	fault_uninstall();
	CHECK_EQ(lstats(st).lazy_pending, 0);
	CHECK_EQ(atomio_sync(st, -1, 0), ATOMIO_EUNKNOWN);
	CHECK_EQ(atomio_sync(st, -1, ATOMIO_SYNC_NOWAIT), ATOMIO_EUNKNOWN);
	(void)atomio_close(st);
}

int main(void)
{
	t_many_then_sync();
	t_delay();
	t_no_thread();
	t_pressure(true);
	t_pressure(false);
	t_killed_child();
	t_relog();
	t_failure();
	t_cleanup();
	printf("t_lazy_core: ok\n");
	return 0;
}
