/* A log without O_DIRECT (tmpfs, some FUSE filesystems) is written through
 * the page cache: a commit's RWF_DSYNC write and the lazy zeroing's write +
 * fdatasync (logfile.c) share the log's open file description, and a write-back
 * error is reported once per description (errseq), to whichever sync looks
 * first.  So an error the zeroing's fdatasync sees may be a commit's, whose own
 * sync then saw none and acknowledged a group that is not durable: the store
 * must fail, not just stop zeroing.  An ops table refuses O_DIRECT on the log
 * and fails the zeroing's first fdatasync with EIO; the next commit must fail
 * (ATOMIO_EFAILED). */
#include <stdbool.h>
#include <sys/stat.h>

#include "sys.h"
#include "t.h"

extern uint64_t atomio_log_zero_create;

static struct atomio_sysops ops;
static char log_path[4200];
static ino_t log_ino;
static __thread int zero_write_seen;
static int injected;

static int no_direct_log(const char *path, int flags, mode_t mode)
{
	if ((flags & O_DIRECT) && !strcmp(path, log_path))
		return -EINVAL;
	return atomio_sys_linux.open(path, flags, mode);
}

static bool is_log(int fd)
{
	struct stat sb;
	return log_ino && atomio_sys_linux.fstat(fd, &sb) == 0 && sb.st_ino == log_ino;
}

static ssize_t see_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	/* the zeroing writes without RWF_DSYNC, then syncs (logfile.c) */
	if (!rwf && off >= (off_t)(2 * 4096 + 2 * (1u << 20)) && is_log(fd))
		zero_write_seen = 1;
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
}

static int fail_fdatasync(int fd)
{
	if (zero_write_seen && !__atomic_load_n(&injected, __ATOMIC_ACQUIRE) && is_log(fd)) {
		zero_write_seen = 0;
		__atomic_store_n(&injected, 1, __ATOMIC_RELEASE);
		return -EIO;
	}
	return atomio_sys_linux.fdatasync(fd);
}

int main(void)
{
	ops = atomio_sys_linux;
	ops.name = "buffered-log";
	ops.open = no_direct_log;
	ops.pwritev = see_pwritev;
	ops.fdatasync = fail_fdatasync;
	atomio_sys_set(&ops);
	atomio_log_zero_create = 0; /* the area's rest is zeroed lazily */
	t_dir();
	snprintf(log_path, sizeof(log_path), "%s", t_path("log"));
	struct atomio_options o = t_opts(16u << 20);
	atomio *st;
	CHECK_OK(atomio_open(log_path, &o, &st));
	struct stat sb;
	CHECK_OK(stat(log_path, &sb));
	log_ino = sb.st_ino;
	int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
	CHECK(f >= 0);
	char page[4096];
	memset(page, 'z', sizeof(page));
	/* commits until the checkpointer's zeroing has met the error (a
	 * commit's home stage wakes it), then one more */
	int n = 0;
	ssize_t r = 0;
	for (; n < 20000 && !__atomic_load_n(&injected, __ATOMIC_ACQUIRE); n++) {
		r = atomio_pwrite(st, f, page, sizeof(page), (off_t)(n % 64) * 4096);
		/* A commit under way when the sync fails ends ATOMIO_EUNKNOWN if
		 * its record was issued, ATOMIO_EFAILED if it was still queued
		 * (nothing written: fail_queue_locked): both only after the
		 * injection (seen 4 in 40 runs under ASan, as EFAILED) */
		CHECK(r == (ssize_t)sizeof(page) || ((r == ATOMIO_EUNKNOWN || r == ATOMIO_EFAILED) && injected));
	}
	if (!__atomic_load_n(&injected, __ATOMIC_ACQUIRE))
		t_skip("the lazy zeroing never ran in %d commits", n);
	/* the zeroing thread publishes its outcome under the mutex after its
	 * sync: a few more commits at most before it shows (those in flight
	 * then end ATOMIO_EUNKNOWN) */
	for (int i = 0; i < 2000 && r != ATOMIO_EFAILED; i++) {
		r = atomio_pwrite(st, f, page, sizeof(page), 0);
		CHECK(r == (ssize_t)sizeof(page) || r == ATOMIO_EUNKNOWN || r == ATOMIO_EFAILED);
		if (r == (ssize_t)sizeof(page))
			usleep(1000);
	}
	printf("%d commits before the zeroing's sync failed; then a commit returned %zd\n", n, r);
	CHECK_EQ(r, ATOMIO_EFAILED);
	(void)atomio_close(st);
	atomio_sys_set(NULL);
	printf("ok: a write-back error the buffered log's zeroing sync sees fails the store\n");
	return 0;
}
