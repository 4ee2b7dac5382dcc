/* Group commit fills its batches (commit.c, BATCHES THAT FILL): with 8
 * threads committing in a loop, a log write carries most of them, not the
 * half that was queued when the last write ended.
 *
 * The log write is made slow (3 ms, through the ops table) so that every
 * thread is back long before the write ends and the count of groups per log
 * write depends on the batching rule, not on this machine's speed.  Before
 * batches waited for the returning threads, two half batches took turns
 * (about 4 groups per write here); the target is <= 0.2 log writes
 * per commit, at least 5 groups per write. */
#include <pthread.h>
#include <time.h>

#include "sys.h"
#include "t.h"

#define NT 8
#define PER 60
#define PAGE 4096
#define SLOW_NS 3000000L

static atomio *st;
static int fa;
static struct atomio_sysops slow;

/* Durable writes are the log's (home writes carry no flag): 3 ms each. */
static ssize_t slow_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	if (rwf & RWF_DSYNC) {
		struct timespec ts = {0, SLOW_NS};
		while (nanosleep(&ts, &ts) != 0)
			;
	}
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
}

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	char page[PAGE];
	for (int g = 0; g < PER; g++) {
		t_fill(page, PAGE, (uint32_t)(t * 1000 + g + 1), 0);
		CHECK_EQ(atomio_pwrite(st, fa, page, PAGE, (uint64_t)t * PAGE), PAGE);
	}
	return NULL;
}

int main(void)
{
	slow = atomio_sys_linux;
	slow.name = "slow log writes";
	slow.pwritev = slow_pwritev;
	atomio_sys_set(&slow);
	/* A large log: no checkpoint holds a batch up. */
	struct atomio_options o = t_opts(64 << 20);
	o.flags |= ATOMIO_ENGINE_PLAIN;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	fa = atomio_file_open(st, t_path("a"), O_CREAT, 0644);
	CHECK(fa >= 0);
	pthread_t th[NT];
	for (int t = 0; t < NT; t++)
		CHECK_OK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t));
	for (int t = 0; t < NT; t++)
		CHECK_OK(pthread_join(th[t], NULL));
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	double per = (double)s.commits / (double)s.batches;
	printf("%d threads: %llu commits in %llu log writes, %.2f groups per write (%.3f writes per commit)\n",
	       NT, (unsigned long long)s.commits, (unsigned long long)s.batches, per,
	       (double)s.batches / (double)s.commits);
	CHECK_EQ(s.commits, NT * PER);
	CHECK(per >= 5.0);

	/* A lone committer afterwards: every commit still completes (the fill
	 * wait is bounded, and the population it waits for shrinks). */
	worker((void *)(intptr_t)0);
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.commits, (NT + 1) * PER);
	CHECK_OK(atomio_close(st));
	atomio_sys_set(NULL);

	size_t len;
	uint8_t *a = t_slurp(t_path("a"), &len);
	CHECK_EQ(len, (size_t)NT * PAGE);
	for (int t = 0; t < NT; t++) {
		uint8_t ref[PAGE];
		t_fill(ref, PAGE, (uint32_t)(t * 1000 + PER), 0);
		CHECK(memcmp(a + (size_t)t * PAGE, ref, PAGE) == 0);
	}
	free(a);
	return 0;
}
