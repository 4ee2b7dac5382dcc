/* A process dies during a checkpoint's superblock write: the superblock it
 * wrote may be in a cache only (its RWF_DSYNC write cut short with it).  The
 * survivor reads it back (checkpoint_reconcile_locked) and starts the log
 * where it says -- so it must make it durable first: else a power cut that
 * loses it leaves recovery starting from the older superblock, which does
 * not lead to the records written since, and an acknowledged group is lost
 * (and a later one's home writes half applied).  Under the simulator, two
 * handles of one store in one test process (two simulated processes): the
 * second dies at its superblock write, the first commits, the power is cut
 * with nothing pending landed, recovery must keep the group.  Found by
 * t_crash's several-processes runs (procs=1,kill_pct). */
#include <pthread.h>
#include <time.h>

#include "support/simfs.h"
#include "sys.h"
#include "t.h"

#define LOG "/d/log"

static _Atomic int died;

/* Kill process 2 at its superblock write. */
static void hook(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
{
	(void)arg;
	if (simfs_proc_get() == 2 && op->kind == SIMFS_OP_WRITE && !strcmp(op->path, LOG) &&
	    op->off < 2 * 4096) {
		atomic_store(&died, 1);
		simfs_proc_die(fs); /* never returns */
	}
}

static void *checkpointer(void *arg)
{
	simfs_proc_set(2);
	atomio_checkpoint(arg); /* dies in it */
	CHECK(!"process 2 survived its superblock write");
	return NULL;
}

static void commit(atomio *st, int id, uint8_t v, uint64_t off)
{
	uint8_t b[3000];
	memset(b, v, sizeof(b));
	CHECK_EQ(atomio_pwrite(st, id, b, sizeof(b), (off_t)off), (ssize_t)sizeof(b));
}

int main(void)
{
	struct simfs *fs = simfs_new(&(struct simfs_config){.seed = 7, .proc_fd = true});
	CHECK_OK(simfs_mkdir(fs, "/d"));
	simfs_install(fs);
	struct atomio_options o = t_opts(65536);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *a, *b;
	simfs_proc_set(1);
	CHECK_OK(atomio_open(LOG, &o, &a));
	int ida = atomio_file_open(a, "/d/f", O_CREAT, 0644);
	CHECK(ida >= 0);
	simfs_proc_set(2);
	CHECK_OK(atomio_open(LOG, &o, &b)); /* joins */
	CHECK_EQ(atomio_file_open(b, "/d/f", 0, 0), ida);
	simfs_proc_set(1);

	commit(a, ida, 'A', 0); /* its record at the area's start */
	simfs_set_hook(fs, hook, NULL);
	pthread_t th;
	CHECK_OK(pthread_create(&th, NULL, checkpointer, b));
	CHECK_OK(pthread_detach(th));
	while (!atomic_load(&died))
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	simfs_set_hook(fs, NULL, NULL);
	/* process 1 goes on: it finds process 2 gone, reads its superblock
	 * back, and logs from the area's start again */
	commit(a, ida, 'B', 4096); /* acknowledged */

	/* power cut: nothing that was not made durable landed */
	simfs_reset(fs, simfs_crash(fs, NULL));
	atomio_close(a); /* its descriptors died with the "machine" */
	simfs_proc_set(3);
	char err[512] = "";
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	int r = atomio_open(LOG, &o, &a);
	if (r < 0)
		fprintf(stderr, "recovery: %s: %s\n", atomio_strerror(r), err);
	CHECK_OK(r);
	CHECK_OK(atomio_close(a));
	uint8_t got[3000];
	CHECK_EQ(simfs_read(fs, "/d/f", 0, got, sizeof(got)), (int64_t)sizeof(got));
	CHECK_EQ(got[0], 'A');
	CHECK_EQ(simfs_read(fs, "/d/f", 4096, got, sizeof(got)), (int64_t)sizeof(got));
	CHECK_EQ(got[0], 'B'); /* the acknowledged group survived */
	CHECK_EQ(got[sizeof(got) - 1], 'B');
	simfs_uninstall();
	/* (fs is not freed: process 2's thread stays blocked in it) */
	printf("reconcile: a dead checkpointer's superblock made durable before it is counted on\n");
	return 0;
}
