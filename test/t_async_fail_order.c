/* Callbacks of asynchronous commits run in commit order, failed ones too.  A
 * group whose batch's log write fails, and the groups queued behind it,
 * failed from the queue (ATOMIO_EFAILED) without ever being in a batch: the
 * completion list was sorted by batch number, which a group never batched
 * does not have (its entry's is stale: 0, or an earlier group's), so its
 * callback ran before the earlier group's.  Deterministic: an ops table holds
 * the first record write until two more groups are queued, then fails it. */
#include <semaphore.h>
#include <sys/stat.h>

#include "sys.h"
#include "t.h"

static struct atomio_sysops ops;
static ino_t log_ino;
static int armed;
static sem_t entered, release;
static int order[8], norder, results[8];

/* The area starts after two superblock slots and two 1 MiB catalog copies. */
#define AREA_MIN (2 * 4096 + 2 * (1u << 20))

static ssize_t hold_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	struct stat sb;
	if (__atomic_load_n(&armed, __ATOMIC_ACQUIRE) && atomio_sys_linux.fstat(fd, &sb) == 0 &&
	    sb.st_ino == log_ino && off >= AREA_MIN) {
		__atomic_store_n(&armed, 0, __ATOMIC_RELEASE);
		sem_post(&entered);
		while (sem_wait(&release) != 0)
			;
		return -EIO;
	}
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
}

static void done(void *arg, int result)
{
	int id = (int)(intptr_t)arg;
	results[id] = result;
	order[norder++] = id;
}

static void commit_async(atomio *st, int f, int id)
{
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	char c = (char)('0' + id);
	CHECK_OK(atomio_tx_write(tx, f, &c, 1, id));
	CHECK_OK(atomio_tx_commit_async(tx, done, (void *)(intptr_t)id));
}

int main(void)
{
	ops = atomio_sys_linux;
	ops.name = "hold-log-write";
	ops.pwritev = hold_pwritev;
	atomio_sys_set(&ops);
	CHECK_OK(sem_init(&entered, 0, 0));
	CHECK_OK(sem_init(&release, 0, 0));
	t_dir();
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	struct stat sb;
	CHECK_OK(stat(t_path("log"), &sb));
	log_ino = sb.st_ino;
	int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
	CHECK(f >= 0);
	/* earlier batches: the entries the next groups take have stale numbers */
	for (int i = 0; i < 4; i++)
		CHECK_EQ(atomio_pwrite(st, f, "x", 1, 8 + i), 1);

	__atomic_store_n(&armed, 1, __ATOMIC_RELEASE);
	commit_async(st, f, 1);
	while (sem_wait(&entered) != 0)
		;
	/* group 1's log write is in progress: 2 and 3 queue behind it */
	commit_async(st, f, 2);
	commit_async(st, f, 3);
	sem_post(&release);
	for (int i = 0; i < 1000 && norder < 3; i++)
		CHECK(atomio_poll(st, 100) >= 0);
	CHECK_EQ(norder, 3);
	printf("callbacks: %d (%d) %d (%d) %d (%d)\n", order[0], results[order[0]], order[1], results[order[1]],
	       order[2], results[order[2]]);
	CHECK(order[0] == 1 && order[1] == 2 && order[2] == 3);
	for (int i = 1; i <= 3; i++)
		CHECK(results[i] < 0);
	(void)atomio_close(st);
	atomio_sys_set(NULL);
	printf("ok: the callbacks of failed asynchronous commits run in commit order\n");
	return 0;
}
