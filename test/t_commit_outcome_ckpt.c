/* What a commit says when the BACKGROUND CHECKPOINT fails while its record
 * is being written (issue 12, item 1: "when ... the background checkpoint
 * fails (EIO on a data-file sync) while this commit's log write is in
 * flight, the commit returns EFAILED although its record is durable").
 *
 * Scenario, deterministic (a backend orders the two threads):
 *   G1 (file a, 16 KiB) commits; its home write makes the log more than 1%
 *     full, so the checkpointer thread starts a background checkpoint, whose
 *     fdatasync of file a waits until G2's log write has started, then
 *     fails with EIO;
 *   G2 (file b) commits after G1: its log write waits until that fdatasync
 *     has failed, then completes (durable), and returns only once the store
 *     has recorded the failure (atomio_tx_begin says ATOMIO_EFAILED): else
 *     the checkpointer, preempted between its failed sync and recording
 *     it, could let G2 finish first, and G2 would rightly succeed.
 * G2 must be told ATOMIO_EUNKNOWN (recovery decides), not ATOMIO_EFAILED
 * ("nothing written"), and reopening replays it. */
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "format.h"
#include "sys.h"
#include "t.h"

static struct atomio_sysops ops;
static atomio *st;
static int fd_a = -1;
static ino_t log_ino;
static uint64_t area_off = UINT64_MAX;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool armed, g2_logging, sync_failed;
static int log_writes;

/* Wait for flag under mu, at most 10 s (a scenario that does not happen
 * fails the test instead of hanging it). */
static void wait_for(bool *flag)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 10;
	while (!*flag)
		if (pthread_cond_timedwait(&cv, &mu, &dl) != 0) {
			fprintf(stderr, "the scenario did not happen (log writes %d, G2 logging %d, sync failed %d)\n",
				log_writes, g2_logging, sync_failed);
			abort();
		}
}

static int w_open(const char *path, int flags, mode_t mode)
{
	int fd = atomio_sys_linux.open(path, flags, mode);
	size_t n = strlen(path);
	if (fd >= 0 && n > 2 && !strcmp(path + n - 2, "/a") && fd_a < 0)
		fd_a = fd;
	return fd;
}

static ssize_t w_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	pthread_mutex_lock(&mu);
	struct stat sb;
	bool g2 = false;
	if (armed && fstat(fd, &sb) == 0 && sb.st_ino == log_ino && (uint64_t)off >= area_off &&
	    ++log_writes == 2) {
		/* G2's record: wait until the checkpoint's sync has failed */
		g2 = g2_logging = true;
		pthread_cond_broadcast(&cv);
		wait_for(&sync_failed);
	}
	pthread_mutex_unlock(&mu);
	ssize_t n = atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
	/* ... and is still in flight when the store records the failure (a
	 * count of naps, 10 s at most) */
	for (int i = 0; g2; i++) {
		atomio_tx *tx;
		int r = atomio_tx_begin(st, &tx);
		if (r == ATOMIO_EFAILED)
			break;
		if (r == 0)
			atomio_tx_abort(tx);
		if (i == 10000) {
			fprintf(stderr, "the store did not record the failed sync\n");
			abort();
		}
		usleep(1000);
	}
	return n;
}

/* fdatasync or fsync of a data file by the checkpointer: a's fails once G2's
 * log write is under way. */
static int w_sync(int fd, bool data)
{
	pthread_mutex_lock(&mu);
	bool fail = armed && fd == fd_a && !sync_failed;
	if (fail) {
		wait_for(&g2_logging);
		sync_failed = true;
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&mu);
	if (fail)
		return -EIO;
	return data ? atomio_sys_linux.fdatasync(fd) : atomio_sys_linux.fsync(fd);
}
static int w_fdatasync(int fd) { return w_sync(fd, true); }
static int w_fsync(int fd) { return w_sync(fd, false); }

int main(void)
{
	ops = atomio_sys_linux;
	ops.name = "outcome-ckpt";
	ops.open = w_open;
	ops.pwritev = w_pwritev;
	ops.fdatasync = w_fdatasync;
	ops.fsync = w_fsync;
	ops.uring_init = NULL; /* every write through pwritev */
	ops.uring_enter = NULL;
	ops.uring_exit = NULL;
	ops.sync_file_range = NULL; /* no early write-back: the checkpoint alone */
	atomio_sys_set(&ops);

	char err[512] = "";
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_ENGINE_PLAIN | ATOMIO_FAST_PATH_OFF | ATOMIO_NO_COMPRESS;
	o.ckpt_percent = 1; /* the first group home asks for a background checkpoint */
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	int ida = atomio_file_open(st, t_path("a"), O_CREAT, 0644);
	int idb = atomio_file_open(st, t_path("b"), O_CREAT, 0644);
	CHECK(ida >= 0 && idb >= 0 && fd_a >= 0);
	struct stat lsb;
	CHECK_OK(stat(t_path("s.log"), &lsb));
	log_ino = lsb.st_ino;
	struct sb_disk sb0;
	int lfd = open(t_path("s.log"), O_RDONLY);
	CHECK(lfd >= 0 && pread(lfd, &sb0, sizeof(sb0), 0) == (ssize_t)sizeof(sb0));
	close(lfd);
	area_off = sb0.area_off;
	static char pa[16384], pb[4096];
	memset(pa, 'A', sizeof(pa));
	memset(pb, 'B', sizeof(pb));

	pthread_mutex_lock(&mu);
	armed = true;
	pthread_mutex_unlock(&mu);
	ssize_t r1 = atomio_pwrite(st, ida, pa, sizeof(pa), 0);
	ssize_t r2 = atomio_pwrite(st, idb, pb, sizeof(pb), 0);
	fprintf(stderr, "G1: %zd, G2: %zd (%s); errbuf: %s\n", r1, r2, atomio_strerror((int)r2), err);
	CHECK_EQ(r1, (ssize_t)sizeof(pa)); /* done before the checkpoint failed */
	CHECK(sync_failed && g2_logging);
	CHECK(r2 != ATOMIO_EFAILED); /* G2's record is durable */
	CHECK_EQ(r2, ATOMIO_EUNKNOWN);
	CHECK(strstr(err, "syncing data file") != NULL);
	CHECK_EQ(atomio_pwrite(st, idb, pb, sizeof(pb), 4096), ATOMIO_EFAILED);
	CHECK_EQ(atomio_close(st), ATOMIO_EFAILED);

	atomio_sys_set(NULL);
	o.flags = 0;
	o.ckpt_percent = 0;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.groups_recovered, 2); /* G1 (its checkpoint failed) and G2 */
	CHECK_OK(atomio_close(st));
	size_t len;
	uint8_t *b = t_slurp(t_path("b"), &len);
	CHECK_EQ(len, sizeof(pb)); /* G2 whole; the refused group never applied */
	CHECK(!memcmp(b, pb, sizeof(pb)));
	free(b);
	printf("ok: a commit whose record was written while the background checkpoint failed is not reported "
	       "as not written\n");
	return 0;
}
