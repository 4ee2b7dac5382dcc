/* What a failed commit says (issue 12, item 1).  A commit returns exactly one
 * of: 0 (durable and applied), a code that means "not written" (the store had
 * failed before this group's record was written: ATOMIO_EFAILED, or -E2BIG,
 * -ENOMEM, ...), or ATOMIO_EUNKNOWN (the record's write was issued, and the
 * store failed during or after it: reopening decides, whole or not at all).
 * Never "not written" for a group whose record reached the log.
 *
 * Scenario, deterministic (a backend orders the two threads):
 *   thread 1 commits G1 to file a: its log write succeeds, then its home
 *     write waits until thread 2's log write has started, and fails (EIO);
 *   thread 2 commits G2 to file b meanwhile: its log write succeeds (durable)
 *     while the store fails under it.
 * G2's record is durable and follows G1's durable record: reopening replays
 * both.  So G2 must not be told ATOMIO_EFAILED ("nothing written"); both get
 * ATOMIO_EUNKNOWN, and reopening applies both.  Then a third commit on the
 * failed store is refused with ATOMIO_EFAILED and is indeed never applied. */
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "format.h"
#include "sys.h"
#include "t.h"

static struct atomio_sysops ops;
static int fd_a = -1;
static ino_t log_ino;
static uint64_t area_off = UINT64_MAX; /* record writes go at or after it */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool armed, g2_logging;
static int log_writes; /* log record writes since arming */

static int w_open(const char *path, int flags, mode_t mode)
{
	int fd = atomio_sys_linux.open(path, flags, mode);
	size_t n = strlen(path);
	if (fd >= 0 && n > 2 && !strcmp(path + n - 2, "/a"))
		fd_a = fd;
	return fd;
}

static ssize_t w_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	pthread_mutex_lock(&mu);
	bool on = armed;
	struct stat sb;
	if (on && fstat(fd, &sb) == 0 && sb.st_ino == log_ino && (uint64_t)off >= area_off) /* a record write */
		if (++log_writes == 2)
			g2_logging = true;
	pthread_cond_broadcast(&cv);
	if (on && fd == fd_a && rwf == 0) {
		/* G1's home write: fail it once G2's log write is under way */
		while (!g2_logging)
			pthread_cond_wait(&cv, &mu);
		armed = false;
		pthread_mutex_unlock(&mu);
		return -EIO;
	}
	pthread_mutex_unlock(&mu);
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
}

static atomio *st;
static int ida, idb;
static char pa[4096], pb[4096];

static void *g2(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	while (!log_writes) /* G1's record is written: G2 comes after it */
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	/* G2 queues while G1's log write runs (or after it): it leads the next
	 * batch once that write is done, while G1's home write waits */
	return (void *)(intptr_t)atomio_pwrite(st, idb, pb, sizeof(pb), 0);
}

int main(void)
{
	ops = atomio_sys_linux;
	ops.name = "outcome";
	ops.open = w_open;
	ops.pwritev = w_pwritev;
	ops.uring_init = NULL; /* every write through pwritev */
	ops.uring_enter = NULL;
	ops.uring_exit = NULL;
	atomio_sys_set(&ops);

	char err[512] = "";
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT | ATOMIO_ENGINE_PLAIN | ATOMIO_FAST_PATH_OFF |
		   ATOMIO_NO_COMPRESS;
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	ida = atomio_file_open(st, t_path("a"), O_CREAT, 0644);
	idb = atomio_file_open(st, t_path("b"), O_CREAT, 0644);
	CHECK(ida >= 0 && idb >= 0 && fd_a >= 0);
	struct stat lsb;
	CHECK_OK(stat(t_path("s.log"), &lsb));
	log_ino = lsb.st_ino;
	struct sb_disk sb0;
	int lfd = open(t_path("s.log"), O_RDONLY);
	CHECK(lfd >= 0 && pread(lfd, &sb0, sizeof(sb0), 0) == (ssize_t)sizeof(sb0));
	close(lfd);
	area_off = sb0.area_off;
	memset(pa, 'A', sizeof(pa));
	memset(pb, 'B', sizeof(pb));

	pthread_mutex_lock(&mu);
	armed = true;
	pthread_mutex_unlock(&mu);
	pthread_t t;
	CHECK_OK(pthread_create(&t, NULL, g2, NULL));
	ssize_t r1 = atomio_pwrite(st, ida, pa, sizeof(pa), 0);
	void *rv;
	CHECK_OK(pthread_join(t, &rv));
	ssize_t r2 = (ssize_t)(intptr_t)rv;
	fprintf(stderr, "G1: %zd (%s), G2: %zd (%s); errbuf: %s\n", r1,
		atomio_strerror((int)r1), r2, atomio_strerror((int)r2), err);
	CHECK(g2_logging); /* the scenario happened as planned */
	CHECK_EQ(log_writes, 2);
	/* G2's record is durable: "nothing written" would be a lie */
	CHECK(r2 != ATOMIO_EFAILED);
	CHECK_EQ(r1, ATOMIO_EUNKNOWN);
	CHECK_EQ(r2, ATOMIO_EUNKNOWN);
	/* the store is failed: a later commit is refused, and means it */
	char pc[4096];
	memset(pc, 'C', sizeof(pc));
	CHECK_EQ(atomio_pwrite(st, idb, pc, sizeof(pc), 8192), ATOMIO_EFAILED);
	CHECK_EQ(atomio_close(st), ATOMIO_EFAILED);

	atomio_sys_set(NULL);
	o.flags = 0;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.groups_recovered, 2); /* G1 and G2: both were written */
	CHECK_OK(atomio_close(st));
	char got[4096];
	int fd = open(t_path("b"), O_RDONLY);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, got, sizeof(got), 0), (ssize_t)sizeof(got));
	CHECK(!memcmp(got, pb, sizeof(got)));
	struct stat sb;
	CHECK_OK(fstat(fd, &sb));
	CHECK_EQ(sb.st_size, 4096); /* the refused group C was never applied */
	close(fd);
	fd = open(t_path("a"), O_RDONLY);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, got, sizeof(got), 0), (ssize_t)sizeof(got));
	CHECK(!memcmp(got, pa, sizeof(got)));
	close(fd);
	printf("ok: a commit whose record was written is never reported as not written\n");
	return 0;
}
