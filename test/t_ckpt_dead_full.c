/* A full checkpoint's holder dies after its superblock is durable and before
 * it moves the ring (checkpoint.c): the superblock says the log starts at 0,
 * the shared state still has the old tail, and log_write_sb has already
 * published its copy of the superblock (sh->sb), so the generation read back
 * is the one the state knows.  The survivor must read the superblock back and
 * follow it (checkpoint_reconcile_locked_drops) before any record is placed:
 * else its records go at the old tail, where recovery, starting at 0 with
 * the superblock's seq, never looks, and a power cut loses them though they
 * were acknowledged.
 *
 * Real processes, stopped at named steps: process A commits 50 groups;
 * process B joins and runs atomio_checkpoint; B's ops table holds its
 * superblock write until A holds the shared mutex, so that B, its write done
 * and its copy published, blocks before it can move the ring; A sees the new
 * generation, B is SIGKILLed, A reaps it.  Then, by mode:
 *   full  A commits one more group (its leader reads the superblock back);
 *   bg    A's checkpointer runs a background checkpoint first (it reads the
 *         superblock back as it begins, and must take its cut after), then A
 *         commits;
 *   race  A's checkpointer begins a background checkpoint and is held in its
 *         read of the superblock; meanwhile A commits (its leader must read
 *         it too, not go on because a checkpoint runs).
 * Then A is SIGKILLed and the power is cut: each data file is put back to
 * what it held at its last successful sync (A's and B's ops tables keep a
 * copy then; the log's writes are all durable, RWF_DSYNC); recovery must
 * give every acknowledged group back. */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "shm.h"
#include "sys.h"
#include "t.h"

#define GROUPS 50  /* committed before the checkpoint */
#define GLEN 512u  /* each group: GLEN bytes at g * GLEN */
#define SNAP_MAX (64u << 10)

struct share {
	_Atomic int at_sb;    /* B is at its superblock write */
	_Atomic int held;     /* A holds the shared mutex: B may write it */
	_Atomic int blocking; /* race: hold A's checkpointer in its superblock read */
	_Atomic int blocked;  /* ... it is held there */
	_Atomic int acked;    /* groups A had acknowledged when it died */
	_Atomic int snap_lock;
	_Atomic uint64_t snaps;
	uint64_t snap_len;    /* the data file at its last successful sync */
	uint8_t snap[SNAP_MAX];
};

static struct share *sh;
static char log_path[PATH_MAX + 8], data_path[PATH_MAX + 8];
static struct atomio_sysops ops;
static pid_t main_tid;
static bool is_b;

static void pause_ms(void) { nanosleep(&(struct timespec){0, 1000000}, NULL); }

/* Which file a descriptor is: 1 the log, 2 the data file, 0 another. */
static int which(int fd)
{
	char p[64], target[4200];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(p, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = 0;
	return !strcmp(target, log_path) ? 1 : !strcmp(target, data_path) ? 2 : 0;
}

/* A successful sync of the data file: what a power cut keeps of it from now
 * on (at least). */
static void snapshot(int fd)
{
	struct stat sb;
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size > SNAP_MAX)
		abort();
	while (atomic_exchange(&sh->snap_lock, 1))
		pause_ms();
	ssize_t n = pread(fd, sh->snap, (size_t)sb.st_size, 0);
	if (n != sb.st_size)
		abort();
	sh->snap_len = (uint64_t)n;
	atomic_fetch_add(&sh->snaps, 1);
	atomic_store(&sh->snap_lock, 0);
}

static int w_fsync(int fd)
{
	int r = atomio_sys_linux.fsync(fd);
	if (r == 0 && which(fd) == 2)
		snapshot(fd);
	return r;
}

static int w_fdatasync(int fd)
{
	int r = atomio_sys_linux.fdatasync(fd);
	if (r == 0 && which(fd) == 2)
		snapshot(fd);
	return r;
}

/* B: its superblock write waits until A holds the mutex. */
static ssize_t w_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	if (is_b && off < 2 * SB_SLOT && which(fd) == 1) {
		atomic_store(&sh->at_sb, 1);
		while (!atomic_load(&sh->held))
			pause_ms();
	}
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
}

/* A, race: its checkpointer's read of the superblock waits for good (A dies
 * meanwhile); its leaders' reads go on. */
static ssize_t w_pread(int fd, void *buf, size_t len, off_t off)
{
	if (!is_b && off == 0 && atomic_load(&sh->blocking) && (pid_t)syscall(SYS_gettid) != main_tid &&
	    which(fd) == 1) {
		atomic_store(&sh->blocked, 1);
		for (;;)
			pause();
	}
	return atomio_sys_linux.pread(fd, buf, len, off);
}

static void die_with(pid_t parent)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(1);
}

/* In a child: fail without running the parent's exit handlers (which remove
 * the test's directory). */
static struct atomio_options opts(void)
{
	struct atomio_options o = t_opts(1 << 20);
	/* no checkpoint but those this test starts */
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	return o;
}

static void commit(atomio *st, int id, int g)
{
	uint8_t b[GLEN];
	t_fill(b, GLEN, (uint32_t)g, 0);
	ssize_t n = atomio_pwrite(st, id, b, GLEN, (off_t)g * GLEN);
	if (n != GLEN)
		fprintf(stderr, "group %d: %s\n", g, n < 0 ? atomio_strerror((int)n) : "short");
	KCHECK(n == GLEN);
	atomic_store(&sh->acked, g + 1);
}

static void proc_b(pid_t a)
{
	die_with(a);
	is_b = true;
	struct atomio_options o = opts();
	atomio *st;
	KCHECK(atomio_open(log_path, &o, &st) == 0);
	KCHECK(atomio_file_open(st, data_path, 0, 0) >= 0);
	atomio_checkpoint(st); /* killed in it */
	fprintf(stderr, "B: survived its checkpoint\n");
	_exit(1);
}

/* Wait until A's own checkpointer has run the background checkpoint asked of
 * it (ckpt_lost: it syncs every file, as after any dead checkpoint's). */
static void wait_bg(atomio *st)
{
	for (;;) {
		shm_lock(st);
		bool done = !st->S->ckpt_lost || st->S->failed;
		shm_unlock(st);
		if (done)
			return;
		pause_ms();
	}
}

static void proc_a(pid_t parent, const char *mode)
{
	die_with(parent);
	main_tid = (pid_t)syscall(SYS_gettid);
	struct atomio_options o = opts();
	atomio *st;
	KCHECK(atomio_open(log_path, &o, &st) == 0);
	int id = atomio_file_open(st, data_path, O_CREAT, 0644);
	KCHECK(id >= 0);
	for (int g = 0; g < GROUPS; g++)
		commit(st, id, g);
	uint64_t gen0 = st->sh->sb.generation;

	pid_t b = fork();
	KCHECK(b >= 0);
	if (b == 0)
		proc_b(getppid());
	while (!atomic_load(&sh->at_sb))
		pause_ms();
	/* B's superblock write goes now; B cannot move the ring while A holds
	 * the mutex.  Its copy published is the sign that its write is done
	 * (durable). */
	shm_lock(st);
	atomic_store(&sh->held, 1);
	while (__atomic_load_n(&st->sh->sb.generation, __ATOMIC_ACQUIRE) == gen0)
		pause_ms();
	KCHECK(st->sh->sb.head_off == 0);
	kill(b, SIGKILL);
	int ws;
	KCHECK(waitpid(b, &ws, 0) == b && WIFSIGNALED(ws));
	/* Its lock byte went with it: reap it now (a wait would, later). */
	int tries = 0;
	while (!shm_reap_locked(st, true)) {
		KCHECK(++tries < 5000);
		shm_unlock(st);
		pause_ms();
		shm_lock(st);
	}
	KCHECK(st->S->sb_stale && !st->S->ckpt_owner && !st->S->log_owner);
	if (!strcmp(mode, "bg") || !strcmp(mode, "race")) {
		atomic_store(&sh->blocking, !strcmp(mode, "race"));
		KCHECK(checkpoint_request_locked(st) == 0);
	}
	shm_unlock(st);

	if (!strcmp(mode, "bg"))
		wait_bg(st);
	if (!strcmp(mode, "race"))
		while (!atomic_load(&sh->blocked))
			pause_ms();
	commit(st, id, GROUPS);
	/* the power goes now */
	kill(getpid(), SIGKILL);
	for (;;)
		pause();
}

static int run(const char *mode)
{
	char dir[PATH_MAX];
	CHECK_OK(mkdir(t_path(mode), 0755));
	/* as /proc/self/fd names it */
	CHECK(realpath(t_path(mode), dir));
	snprintf(log_path, sizeof(log_path), "%s/log", dir);
	snprintf(data_path, sizeof(data_path), "%s/f", dir);
	memset(sh, 0, sizeof(*sh));

	pid_t parent = getpid();
	pid_t a = fork();
	CHECK(a >= 0);
	if (a == 0) {
		ops = atomio_sys_linux;
		ops.name = "t_ckpt_dead_full";
		ops.fsync = w_fsync;
		ops.fdatasync = w_fdatasync;
		ops.pwritev = w_pwritev;
		ops.pread = w_pread;
		atomio_sys_set(&ops);
		proc_a(parent, mode);
	}
	int ws;
	CHECK(waitpid(a, &ws, 0) == a);
	if (!WIFSIGNALED(ws) || WTERMSIG(ws) != SIGKILL) {
		fprintf(stderr, "%s: process A ended with status %#x, not killed\n", mode, ws);
		return 1;
	}
	int acked = atomic_load(&sh->acked);
	CHECK_EQ(acked, GROUPS + 1);
	CHECK(atomic_load(&sh->snaps) > 0);

	/* The power cut: the data file as its last sync left it. */
	int fd = open(data_path, O_WRONLY);
	CHECK(fd >= 0);
	CHECK_OK(ftruncate(fd, (off_t)sh->snap_len));
	CHECK_EQ(pwrite(fd, sh->snap, sh->snap_len, 0), (ssize_t)sh->snap_len);
	CHECK_OK(fsync(fd));
	close(fd);

	struct atomio_options o = opts();
	char err[512] = "";
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	atomio *st;
	int r = atomio_open(log_path, &o, &st);
	if (r < 0)
		fprintf(stderr, "%s: recovery: %s: %s\n", mode, atomio_strerror(r), err);
	CHECK_OK(r);
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_OK(atomio_close(st));

	size_t n;
	uint8_t *d = t_slurp(data_path, &n);
	int lost = 0;
	for (int g = 0; g < acked; g++) {
		uint8_t want[GLEN];
		t_fill(want, GLEN, (uint32_t)g, 0);
		if (!d || n < (size_t)(g + 1) * GLEN || memcmp(d + (size_t)g * GLEN, want, GLEN)) {
			fprintf(stderr, "%s: acknowledged group %d lost after the power cut\n", mode, g);
			lost++;
		}
	}
	free(d);
	printf("%s: %d groups acknowledged, %" PRIu64 " replayed by recovery, %d lost\n", mode, acked,
	       s.groups_recovered, lost);
	return lost ? 1 : 0;
}

int main(void)
{
	t_dir();
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	int fails = 0;
	fails += run("full");
	fails += run("bg");
	fails += run("race");
	if (fails)
		return 1;
	printf("ok: a full checkpoint's holder killed between its superblock and the ring's reset: every "
	       "acknowledged group recovered after a power cut\n");
	return 0;
}
