/* A new log's area is written with zeros at creation up to
 * atomio_log_zero_create bytes (all of a default log); a larger log's rest
 * is zeroed lazily (logfile.c): fallocated, and the checkpointer zeroes it
 * ahead of the records.  Checked here on the real filesystem:
 *
 *  0. at the defaults, a new log has no unwritten block: the first lap's
 *     records are overwrites, as in steady state (FIEMAP);
 *  1. with atomio_log_zero_create = 0 (the lazy zeroing of a log larger
 *     than it, in a small log), creation writes one unit of the area, not
 *     the whole log (FIEMAP);
 *  2. with the zeroing slowed down (20 ms a chunk, through the ops table)
 *     and four threads committing 64 KiB groups, the records catch up with
 *     the zeroed part; an ops-table checker sees every log write and fails
 *     if a zeroing write covers a record written before it, or a record
 *     lands where a zeroing write is in flight (the crash simulator's
 *     mutant zeroover covers the same rule with crashes);
 *  3. the process ends without closing the store (as a crash would, for
 *     the log): recovery replays to the end with no valid record left
 *     beyond it, and every file holds its last group.
 *
 * Where the filesystem has no fallocate or FIEMAP the test says so and
 * checks only 3. */
#include <pthread.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <time.h>

#include "sys.h"
#include "t.h"

#define NT 4
#define GROUP (64u << 10)
#define PER 300
#define LOG_AREA (64u << 20)

static struct atomio_sysops ops;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static ino_t log_ino; /* the log's inode once it exists under its name */
struct range {
	uint64_t lo, hi;
};
static struct range *recs;
static size_t nrecs, caprecs;
static struct range zeroing; /* in flight, or empty */
static uint64_t zero_hi, zero_writes, overtakes, bad;

static bool overlaps(struct range a, uint64_t lo, uint64_t hi) { return a.lo < hi && lo < a.hi; }

/* Is fd the log?  (The store opens it more than once, and through
 * /proc/self/fd: compare inodes.) */
static bool is_log(int fd)
{
	struct stat a, b;
	if (!log_ino) {
		if (stat(t_path("log"), &b) < 0)
			return false; /* still being created under a temporary name */
		log_ino = b.st_ino;
	}
	return fstat(fd, &a) == 0 && a.st_ino == log_ino;
}

static bool all_zero(const struct iovec *iov, int n)
{
	for (int i = 0; i < n; i++)
		for (size_t j = 0; j < iov[i].iov_len; j += 512)
			if (((const char *)iov[i].iov_base)[j])
				return false;
	return true;
}

static ssize_t w_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	size_t len = 0;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	uint64_t lo = (uint64_t)off, hi = lo + len;
	pthread_mutex_lock(&mu);
	bool mine = is_log(fd);
	bool zero = mine && !(rwf & RWF_DSYNC) && len >= 65536 && all_zero(iov, iovcnt);
	if (mine && (rwf & RWF_DSYNC)) {
		/* a record (or superblock, catalog) write */
		if (overlaps(zeroing, lo, hi)) {
			fprintf(stderr, "log write [%llu, %llu) while zeroing [%llu, %llu)\n",
				(unsigned long long)lo, (unsigned long long)hi,
				(unsigned long long)zeroing.lo, (unsigned long long)zeroing.hi);
			bad++;
		}
		if (hi > zero_hi && zero_writes)
			overtakes++;
		if (nrecs == caprecs) {
			caprecs = caprecs ? caprecs * 2 : 4096;
			recs = realloc(recs, caprecs * sizeof(*recs));
			CHECK(recs != NULL);
		}
		recs[nrecs++] = (struct range){lo, hi};
	}
	if (zero) {
		for (size_t i = 0; i < nrecs; i++)
			if (overlaps(recs[i], lo, hi)) {
				fprintf(stderr, "zeroing [%llu, %llu) covers a log write [%llu, %llu)\n",
					(unsigned long long)lo, (unsigned long long)hi,
					(unsigned long long)recs[i].lo, (unsigned long long)recs[i].hi);
				bad++;
				break;
			}
		zeroing = (struct range){lo, hi};
		zero_writes++;
	}
	pthread_mutex_unlock(&mu);
	if (zero) {
		struct timespec ts = {0, 20000000L};
		while (nanosleep(&ts, &ts) != 0)
			;
	}
	ssize_t n = atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
	if (zero) {
		pthread_mutex_lock(&mu);
		zeroing = (struct range){0, 0};
		if (hi > zero_hi)
			zero_hi = hi;
		pthread_mutex_unlock(&mu);
	}
	return n;
}

static atomio *st;
static int fds[NT];

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	char *buf = malloc(GROUP);
	CHECK(buf != NULL);
	for (int g = 0; g < PER; g++) {
		t_fill(buf, GROUP, (uint32_t)(t * 1000 + g + 1), 0);
		CHECK_EQ(atomio_pwrite(st, fds[t], buf, GROUP, (uint64_t)(g % 4) * GROUP), (ssize_t)GROUP);
	}
	free(buf);
	return NULL;
}

/* The child: create the store, commit, end without atomio_close. */
static int child(void)
{
	ops = atomio_sys_linux;
	ops.name = "log-zero checker";
	ops.pwritev = w_pwritev;
	atomio_sys_set(&ops);
	atomio_log_zero_create = 0;
	struct atomio_options o = t_opts(LOG_AREA);
	o.flags |= ATOMIO_ENGINE_PLAIN;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));

	uint64_t first = 0;
	int lfd = open(t_path("log"), O_RDONLY);
	CHECK(lfd >= 0);
	int r = atomio_sys_linux.unwritten_from(lfd, 0, UINT64_MAX / 2, &first);
	struct stat sb;
	CHECK_OK(fstat(lfd, &sb) < 0 ? -errno : 0);
	close(lfd);
	bool lazy = r == 0 && first < (uint64_t)sb.st_size;
	if (lazy)
		printf("new log of %llu bytes: written up to %llu at creation\n", (unsigned long long)sb.st_size,
		       (unsigned long long)first);
	else
		printf("this filesystem shows no unwritten blocks in a new log (FIEMAP %d): written whole\n", r);
	if (lazy)
		CHECK(first <= (uint64_t)sb.st_size / 8); /* the header and one unit of 1/16 */

	for (int t = 0; t < NT; t++) {
		char name[16];
		snprintf(name, sizeof(name), "f%d", t);
		fds[t] = atomio_file_open(st, t_path(name), O_CREAT, 0644);
		CHECK(fds[t] >= 0);
	}
	pthread_t th[NT];
	for (int t = 0; t < NT; t++)
		CHECK_OK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t));
	for (int t = 0; t < NT; t++)
		CHECK_OK(pthread_join(th[t], NULL));
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	pthread_mutex_lock(&mu);
	printf("%llu groups, %llu checkpoints; %llu zeroing writes, %llu log writes past the zeroed part, %llu "
	       "overlaps\n",
	       (unsigned long long)s.commits, (unsigned long long)s.checkpoints, (unsigned long long)zero_writes,
	       (unsigned long long)overtakes, (unsigned long long)bad);
	CHECK_EQ(bad, 0);
	if (lazy)
		CHECK(zero_writes > 0);
	pthread_mutex_unlock(&mu);
	fflush(stdout);
	_exit(0); /* no atomio_close: recovery replays what the log holds */
}

/* 0: a log created at the defaults has its whole area written. */
static void written_whole(void)
{
	struct atomio_options o = t_opts(LOG_AREA);
	CHECK_OK(atomio_open(t_path("whole"), &o, &st));
	CHECK_OK(atomio_close(st));
	int lfd = open(t_path("whole"), O_RDONLY);
	CHECK(lfd >= 0);
	struct stat sb;
	CHECK_OK(fstat(lfd, &sb) < 0 ? -errno : 0);
	uint64_t first = 0;
	int r = atomio_sys_linux.unwritten_from(lfd, 0, (uint64_t)sb.st_size, &first);
	close(lfd);
	if (r < 0) {
		printf("no FIEMAP here (%d): not checked whether a new log is written whole\n", r);
		fflush(stdout);
		return;
	}
	printf("new log of %llu bytes at the defaults: written up to %llu\n", (unsigned long long)sb.st_size,
	       (unsigned long long)first);
	CHECK_EQ(first, (uint64_t)sb.st_size);
	CHECK_OK(unlink(t_path("whole")) < 0 ? -errno : 0);
	fflush(stdout); /* not again from the child's copy */
}

int main(void)
{
	written_whole();
	(void)t_path("log"); /* the test directory, made before the fork: the child's too */
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		return child();
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	char err[512] = "";
	struct atomio_options o = {.errbuf = err, .errbuf_size = sizeof(err)};
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	printf("recovery: %llu groups replayed, %llu valid records beyond the end%s%s\n",
	       (unsigned long long)s.groups_recovered, (unsigned long long)s.records_beyond_tail, err[0] ? ": " : "",
	       err);
	CHECK(s.groups_recovered > 0);
	CHECK_EQ(s.records_beyond_tail, 0);
	CHECK_OK(atomio_close(st));
	for (int t = 0; t < NT; t++) {
		char name[16];
		snprintf(name, sizeof(name), "f%d", t);
		size_t len;
		uint8_t *d = t_slurp(t_path(name), &len);
		CHECK_EQ(len, 4 * (size_t)GROUP);
		uint8_t *ref = malloc(GROUP);
		for (int k = 0; k < 4; k++) {
			int g = PER - 4 + k; /* the last group of slot k */
			t_fill(ref, GROUP, (uint32_t)(t * 1000 + g + 1), 0);
			CHECK(memcmp(d + (size_t)(g % 4) * GROUP, ref, GROUP) == 0);
		}
		free(ref);
		free(d);
	}
	return 0;
}
