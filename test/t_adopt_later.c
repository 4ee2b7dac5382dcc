/* A leader that waits for its batch's home turn must not adopt a LATER
 * batch whose leader died before its home writes: the pad path of the
 * adoption waits for that batch's home turn, which comes only after the
 * adopter's own batch has gone home -- it would wait for itself, and every
 * process with it.  Under the simulator, three handles of one store in one
 * test process (three simulated processes):
 *
 *   1. process 1 commits group A and is held at its home write (batch k);
 *   2. process 2 commits group B: logged (batch k + 1), it waits for its
 *      home turn;
 *   3. process 3 commits group C (batch k + 2) and dies before its log
 *      write: space reserved, never written;
 *   4. process 2's wait reaps process 3 (the orphan is k + 2, after its own);
 *   5. process 1 goes on: its home writes, then process 2's, must follow,
 *      and a later commit adopts k + 2 (a pad); A, B and D survive a power
 *      cut.
 *
 * Found by t_crash's several-processes runs (procs=1,kill_pct=70,kill_at=1,
 * seed 2: a leader in home_stage_locked adopted a later orphan and waited
 * for its home turn for good). */
#include <pthread.h>
#include <time.h>

#include "internal.h"
#include "shm.h"
#include "support/simfs.h"
#include "sys.h"
#include "t.h"

#define LOG "/d/log"
#define GLEN 3000

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int held;         /* process 1 is held at its home write */
static int release;      /* ... until this is set */
static int log_writes[4]; /* log writes issued, by process */
static int died;         /* process 3 died */
static int done[4];      /* the commit of each process returned */
static int log_fd[4];    /* each process's log descriptor */
static uint64_t area_off; /* where the record area starts in the log */

static void step(int *v)
{
	pthread_mutex_lock(&mu);
	(*v)++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

/* Wait for *v, for at most about 30 s: a deadlock is a failure. */
static bool wait_for(int *v)
{
	pthread_mutex_lock(&mu);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 30;
	int r = 0;
	while (!*v && r != ETIMEDOUT)
		r = pthread_cond_timedwait(&cv, &mu, &ts);
	bool ok = *v != 0;
	pthread_mutex_unlock(&mu);
	return ok;
}

/* The simulator's pwritev, with process 1's home write held, and the log
 * writes counted. */
static ssize_t gated_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	int p = simfs_proc_get();
	size_t len = 0;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (p == 1 && len == GLEN) {
		pthread_mutex_lock(&mu);
		if (!held) {
			held = 1;
			pthread_cond_broadcast(&cv);
			while (!release)
				pthread_cond_wait(&cv, &mu);
		}
		pthread_mutex_unlock(&mu);
	}
	ssize_t r = simfs_ops.pwritev(fd, iov, iovcnt, off, rwf);
	if (p >= 1 && p <= 3 && fd == log_fd[p] && (uint64_t)off >= area_off)
		step(&log_writes[p]);
	return r;
}

/* Process 3 dies before its log write (space reserved, never written). */
static void before(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
{
	(void)arg;
	if (simfs_proc_get() == 3 && !strcmp(op->path, LOG) && op->off >= area_off) {
		pthread_mutex_lock(&mu);
		died = 1;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
		simfs_proc_die(fs); /* never returns */
	}
}

struct job {
	atomio *st;
	int id, proc;
	uint8_t v;
	uint64_t off;
};

static void *committer(void *arg)
{
	struct job *j = arg;
	simfs_proc_set(j->proc);
	uint8_t b[GLEN];
	memset(b, j->v, sizeof(b));
	ssize_t n = atomio_pwrite(j->st, j->id, b, sizeof(b), (off_t)j->off);
	CHECK_EQ(n, (ssize_t)sizeof(b));
	step(&done[j->proc]);
	return NULL;
}

static uint32_t orphans(atomio *st)
{
	struct shm *sh = st->sh;
	return __atomic_load_n(&sh->s[atomic_load(&sh->cur)].orphans, __ATOMIC_RELAXED);
}

int main(void)
{
	struct simfs *fs = simfs_new(&(struct simfs_config){.seed = 11, .proc_fd = true});
	CHECK_OK(simfs_mkdir(fs, "/d"));
	simfs_install(fs);
	static struct atomio_sysops ops;
	ops = simfs_ops;
	ops.pwritev = gated_pwritev;
	atomio_sys_set(&ops);
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st[4];
	int id = -1;
	for (int p = 1; p <= 3; p++) {
		simfs_proc_set(p);
		CHECK_OK(atomio_open(LOG, &o, &st[p])); /* the first creates, the others join */
		log_fd[p] = st[p]->log_fd;
		int i = atomio_file_open(st[p], "/d/f", O_CREAT, 0644);
		CHECK(i >= 0);
		CHECK(id < 0 || i == id);
		id = i;
	}
	area_off = st[1]->area_off;
	memset(log_writes, 0, sizeof(log_writes));
	simfs_set_before_hook(fs, before, NULL);

	struct job j1 = {st[1], id, 1, 'A', 0}, j2 = {st[2], id, 2, 'B', 4096}, j3 = {st[3], id, 3, 'C', 8192};
	pthread_t t1, t2, t3;
	CHECK_OK(pthread_create(&t1, NULL, committer, &j1));
	CHECK(wait_for(&held)); /* 1: A logged, held at its home write */
	CHECK_OK(pthread_create(&t2, NULL, committer, &j2));
	CHECK(wait_for(&log_writes[2])); /* 2: B logged, waits for its home turn */
	CHECK_OK(pthread_create(&t3, NULL, committer, &j3));
	CHECK_OK(pthread_detach(t3));
	CHECK(wait_for(&died)); /* 3: C's leader died before its log write */
	/* 4: process 2 finds process 3 gone (within SHM_REAP_NS of waiting):
	 * the orphan is there, or process 2 took it (it writes the pad) */
	for (int i = 0; i < 3000 && !orphans(st[1]); i++) {
		pthread_mutex_lock(&mu);
		bool padded = log_writes[2] > 1;
		pthread_mutex_unlock(&mu);
		if (padded)
			break;
		nanosleep(&(struct timespec){0, 10 * 1000000}, NULL);
	}
	/* 5: process 1 goes on */
	pthread_mutex_lock(&mu);
	release = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	if (!wait_for(&done[1]) || !wait_for(&done[2])) {
		printf("FAIL: deadlock: process 2 adopted a batch after its own and waits for its home turn "
		       "(committed: process 1 %d, process 2 %d)\n", done[1], done[2]);
		fflush(stdout);
		_exit(1); /* the processes' threads are stuck in the store */
	}
	CHECK_OK(pthread_join(t1, NULL));
	CHECK_OK(pthread_join(t2, NULL));
	/* a later commit adopts the orphan (pad) and goes on */
	simfs_proc_set(1);
	uint8_t b[GLEN];
	memset(b, 'D', sizeof(b));
	CHECK_EQ(atomio_pwrite(st[1], id, b, sizeof(b), 12288), (ssize_t)sizeof(b));
	uint64_t adoptions = atomic_load(&st[1]->sh->stats.adoptions);

	/* power cut: nothing that was not made durable landed */
	simfs_set_before_hook(fs, NULL, NULL);
	simfs_reset(fs, simfs_crash(fs, NULL));
	atomio_close(st[1]);
	atomio_close(st[2]);
	simfs_proc_set(4);
	atomio *r;
	CHECK_OK(atomio_open(LOG, &o, &r));
	CHECK_OK(atomio_close(r));
	const char want[] = "AB D";
	for (int i = 0; i < 4; i++) {
		if (want[i] == ' ')
			continue;
		uint8_t got[GLEN];
		CHECK_EQ(simfs_read(fs, "/d/f", (uint64_t)i * 4096, got, sizeof(got)), (int64_t)sizeof(got));
		CHECK_EQ(got[0], (uint8_t)want[i]);
		CHECK_EQ(got[GLEN - 1], (uint8_t)want[i]);
	}
	simfs_uninstall();
	/* (fs is not freed: process 3's thread stays blocked in it) */
	printf("adopt later: a leader waiting for its home turn leaves a later orphan to those behind it "
	       "(%llu adoptions)\n", (unsigned long long)adoptions);
	return 0;
}
