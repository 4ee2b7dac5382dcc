/* Adoption (src/commit.c, ADOPTION): a process of the store dies at a chosen
 * step of a batch it leads, or of a checkpoint it runs, and another process
 * of the store takes over.  Deterministic: the dying process runs one group
 * (two ranges over two files) through an ops table that SIGKILLs it at the
 * chosen call; the survivor then commits three groups of its own (each must
 * succeed: the dead one's roles and batch are taken over), reads the files,
 * and ends without closing (a crash without a power cut); the test then
 * opens the store alone and recovers it.
 *
 *   before its log write      the space is given up with a pad record: the
 *   after its log write       group is in no file, and recovery, which walks
 *                             past the pad, replays the others
 *   before its 1st home write the survivor does its home writes: the group
 *   before its 2nd home write is whole in both files
 *   in a checkpoint's sync    the survivor's checkpoint syncs every file
 *   after a full checkpoint's the survivor reads the superblock back and
 *   superblock write          writes its records where recovery finds them
 */
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "sys.h"
#include "t.h"

enum step { BEFORE_LOG, AFTER_LOG, BEFORE_HOME1, BEFORE_HOME2, IN_SYNC, AFTER_SB, NSTEPS };
static const char *step_name[NSTEPS] = {"before its log write", "after its log write",
					"before its first home write", "before its second home write",
					"in a checkpoint's data sync", "after a full checkpoint's superblock write"};

static enum step target;
static ino_t log_ino, data_ino[2];
static int home_writes;

static int ino_of(int fd, ino_t *ino)
{
	struct stat sb;
	int r = atomio_sys_linux.fstat(fd, &sb);
	*ino = sb.st_ino;
	return r;
}

static void die(void)
{
	kill(getpid(), SIGKILL);
	for (;;)
		pause();
}

/* The area starts after two superblock slots and two 1 MiB catalog copies. */
#define AREA_MIN (2 * 4096 + 2 * (1u << 20))

static ssize_t k_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	ino_t ino;
	ino_of(fd, &ino);
	bool rec = ino == log_ino && off >= AREA_MIN, sb = ino == log_ino && off < 2 * 4096;
	bool home = ino == data_ino[0] || ino == data_ino[1];
	if ((rec && target == BEFORE_LOG) || (home && target == BEFORE_HOME1 && home_writes == 0) ||
	    (home && target == BEFORE_HOME2 && home_writes == 1))
		die();
	home_writes += home;
	ssize_t n = atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
	if ((rec && target == AFTER_LOG) || (sb && target == AFTER_SB))
		die();
	return n;
}

static int k_sync(int fd, bool data)
{
	ino_t ino;
	ino_of(fd, &ino);
	if (target == IN_SYNC && (ino == data_ino[0] || ino == data_ino[1]))
		die();
	return data ? atomio_sys_linux.fdatasync(fd) : atomio_sys_linux.fsync(fd);
}
static int k_fsync(int fd) { return k_sync(fd, false); }
static int k_fdatasync(int fd) { return k_sync(fd, true); }

static struct atomio_sysops killer;

static const char child_data[2][8] = {"child-a", "child-b"};
#define PARENT_OFF 65536

static atomio *open_store(const char *log)
{
	struct atomio_options o = t_opts(8 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT; /* one process's checkpoint at a time: the test's */
	atomio *st;
	CHECK_OK(atomio_open(log, &o, &st));
	return st;
}

/* The process that dies: its group (and a checkpoint), killed at the step. */
static void dying(const char *log, const char *a, const char *b)
{
	killer = atomio_sys_linux;
	killer.name = "killer";
	killer.pwritev = k_pwritev;
	killer.fsync = k_fsync;
	killer.fdatasync = k_fdatasync;
	killer.uring_init = NULL; /* every write through pwritev */
	atomio_sys_set(&killer);
	atomio *st = open_store(log);
	int fa = atomio_file_open(st, a, 0, 0), fb = atomio_file_open(st, b, 0, 0);
	CHECK(fa >= 0 && fb >= 0);
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, fa, child_data[0], 8, 0));
	CHECK_OK(atomio_tx_write(tx, fb, child_data[1], 8, 0));
	CHECK_OK(atomio_tx_commit(tx));
	CHECK_OK(atomio_checkpoint(st));
	_exit(9); /* the step was never reached */
}

/* The survivor: the dead one's group in or out of the files, its own three
 * groups committed and read back; then it ends without closing. */
static void survivor(const char *log, const char *a, const char *b)
{
	atomio *st = open_store(log);
	int fa = atomio_file_open(st, a, 0, 0), fb = atomio_file_open(st, b, 0, 0);
	CHECK(fa >= 0 && fb >= 0);
	CHECK_EQ(atomio_pwrite(st, fa, "base", 4, PARENT_OFF - 4096), 4);
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0)
		dying(log, a, b);
	int ws;
	CHECK(waitpid(p, &ws, 0) == p);
	if (!WIFSIGNALED(ws) || WTERMSIG(ws) != SIGKILL) {
		fprintf(stderr, "%s: the dying process was not killed (status %d)\n", step_name[target], ws);
		_exit(2);
	}
	/* The takeover takes a tenth of a second or so; a survivor still
	 * waiting after 10 s waits for a dead process that no one takes over
	 * (SIGALRM ends it: the test fails). */
	alarm(10);
	for (int i = 0; i < 3; i++) {
		char d[8] = "parent0";
		d[6] = (char)('0' + i);
		CHECK_EQ(atomio_pwrite(st, fa, d, 8, PARENT_OFF + 4096 * i), 8);
	}
	bool in = target >= BEFORE_HOME1;
	char ra[8] = {0}, rb[8] = {0};
	static const char zero[8];
	CHECK_EQ(atomio_pread(st, fa, ra, 8, 0), 8); /* the survivor's groups make it that long */
	CHECK_EQ(atomio_pread(st, fb, rb, 8, 0), in ? 8 : 0);
	CHECK(!memcmp(ra, in ? child_data[0] : zero, 8));
	if (in)
		CHECK(!memcmp(rb, child_data[1], 8));
	_exit(0); /* no close: the log keeps the groups, recovery replays them */
}

int main(void)
{
	t_dir();
	for (target = 0; target < NSTEPS; target++) {
		char log[64], a[64], b[64];
		snprintf(log, sizeof(log), "log%d", target);
		snprintf(log, sizeof(log), "%s", t_path(log));
		snprintf(a, sizeof(a), "a%d", target);
		snprintf(a, sizeof(a), "%s", t_path(a));
		snprintf(b, sizeof(b), "b%d", target);
		snprintf(b, sizeof(b), "%s", t_path(b));
		atomio *st = open_store(log);
		CHECK(atomio_file_open(st, a, O_CREAT, 0644) >= 0);
		CHECK(atomio_file_open(st, b, O_CREAT, 0644) >= 0);
		CHECK_OK(atomio_close(st));
		struct stat sb;
		CHECK_OK(stat(log, &sb));
		log_ino = sb.st_ino;
		CHECK_OK(stat(a, &sb));
		data_ino[0] = sb.st_ino;
		CHECK_OK(stat(b, &sb));
		data_ino[1] = sb.st_ino;
		home_writes = 0;

		pid_t p = fork();
		CHECK(p >= 0);
		if (p == 0)
			survivor(log, a, b);
		int ws;
		CHECK(waitpid(p, &ws, 0) == p);
		if (!WIFEXITED(ws) || WEXITSTATUS(ws)) {
			fprintf(stderr, "%s: the survivor failed (status %d)\n", step_name[target], ws);
			return 1;
		}
		/* alone: recovery */
		char err[512] = "";
		struct atomio_options o = {.errbuf = err, .errbuf_size = sizeof(err)};
		int r = atomio_open(log, &o, &st);
		if (r < 0) {
			fprintf(stderr, "%s: recovery: %s: %s\n", step_name[target], atomio_strerror(r), err);
			return 1;
		}
		struct atomio_stats s;
		CHECK_OK(atomio_stats(st, &s));
		/* live groups: the survivor's first, the dead one's (unless given
		 * up), the survivor's three -- none after a full checkpoint but
		 * the survivor's three */
		uint64_t want = target == AFTER_SB ? 3 : target <= AFTER_LOG ? 4 : 5;
		if (s.groups_recovered != want) {
			fprintf(stderr, "%s: recovery replayed %llu groups, not %llu\n", step_name[target],
				(unsigned long long)s.groups_recovered, (unsigned long long)want);
			return 1;
		}
		CHECK_OK(atomio_close(st));
		size_t n;
		uint8_t *d = t_slurp(a, &n);
		bool in = target >= BEFORE_HOME1;
		CHECK(d && n >= PARENT_OFF + 8192 + 8);
		CHECK(in ? !memcmp(d, child_data[0], 8) : d[0] == 0);
		for (int i = 0; i < 3; i++)
			CHECK(!memcmp(d + PARENT_OFF + 4096 * i, "parent", 6));
		free(d);
		d = t_slurp(b, &n);
		CHECK(in ? n == 8 && !memcmp(d, child_data[1], 8) : n == 0);
		free(d);
		printf("a process killed %s: taken over; the group %s; recovery replayed %llu groups\n",
		       step_name[target], in ? "whole in both files" : "in neither file (a pad)",
		       (unsigned long long)want);
	}
	return 0;
}
