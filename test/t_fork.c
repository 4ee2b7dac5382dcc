/* A store handle belongs to the process that opened it (docs/API.md, Fork):
 * in a child after fork() every function on the parent's handle answers
 * -EPERM and changes nothing, atomio_close there releases nothing.  The child
 * opens the log itself and joins the store as a process of its own: the same
 * file ids, its groups in the one commit order, seen by the parent at once;
 * an ATOMIO_EXCLUSIVE open of the child's is -EBUSY while the parent has it
 * open.  The parent's handle goes on; after the parent closes, the child's
 * own open of the log works, also for a child forked while the parent held
 * the store (its copies of the parent's descriptors, which would keep the
 * parent's locks, were closed at the fork).  (Before the handle was refused
 * in a child: a child's commit through the copy wrote its record where the
 * parent's next record went, so a crash before the next checkpoint could
 * lose an acknowledged group.)  atomio_shared_area: the bytes are shared
 * between the processes of the store, -EPERM on the copy, zero again once
 * every process has closed it. */
#include <sys/wait.h>

#include "model.h"

static void done_cb(void *arg, int res)
{
	(void)arg, (void)res;
}

/* In a child: its own store of the log, 5 bytes of what at off, and exit. */
static void own_store_writes(const char *what, off_t off)
{
	atomio *mine;
	struct atomio_options oc = t_opts(0);
	CHECK_OK(atomio_open(t_path("log"), &oc, &mine));
	int cf = atomio_file_open(mine, t_path("f"), 0, 0);
	CHECK(cf >= 0);
	CHECK_EQ(atomio_pwrite(mine, cf, what, 5, off), 5);
	CHECK_OK(atomio_close(mine));
	_exit(0);
}

int main(void)
{
	t_dir();
	char err[1024] = "";
	struct atomio_options o = t_opts(1 << 20);
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
	CHECK(f >= 0);
	CHECK_EQ(atomio_pwrite(st, f, "parent1", 7, 0), 7);
	atomio_tx *ptx; /* begun in the parent, still open at the fork */
	CHECK_OK(atomio_tx_begin(st, &ptx));
	CHECK_OK(atomio_tx_write(ptx, f, "parent2", 7, 100));
	struct atomio_stats s0;
	CHECK_OK(atomio_stats(st, &s0));
	/* the application's shared bytes: zero in a new store; the parent's
	 * word is what the child's own handle sees, and the child's what the
	 * parent's sees */
	_Atomic uint32_t *area;
	size_t alen = 0;
	CHECK_EQ(atomio_shared_area(NULL, (void **)&area, &alen), -EINVAL);
	CHECK_EQ(atomio_shared_area(st, NULL, &alen), -EINVAL);
	CHECK_OK(atomio_shared_area(st, (void **)&area, &alen));
	CHECK_EQ(alen, ATOMIO_SHARED_AREA);
	CHECK_EQ((uintptr_t)area % 64, 0);
	for (size_t i = 0; i < alen / 4; i++)
		CHECK_EQ(area[i], 0);
	area[3] = 0x5eed;

	int pipefd[2];
	CHECK_OK(pipe(pipefd));
	pid_t p = fork();
	if (p == 0) {
		close(pipefd[0]);
		char buf[16];
		atomio_tx *tx = NULL;
		struct atomio_caps caps;
		struct atomio_stats s;
		CHECK_EQ(atomio_pwrite(st, f, "child", 5, 0), -EPERM);
		CHECK(strstr(err, "opened by the parent") && strstr(err, "/log"));
		CHECK_EQ(atomio_tx_begin(st, &tx), -EPERM);
		CHECK(tx == NULL);
		CHECK_EQ(atomio_tx_write(ptx, f, "child", 5, 0), -EPERM);
		CHECK_EQ(atomio_tx_truncate(ptx, f, 0), -EPERM);
		CHECK_EQ(atomio_tx_commit(ptx), -EPERM);
		CHECK_EQ(atomio_tx_commit_async(ptx, done_cb, NULL), -EPERM);
		atomio_tx_abort(ptx); /* leaves it */
		CHECK_EQ(atomio_checkpoint(st), -EPERM);
		CHECK_EQ(atomio_file_open(st, t_path("g"), O_CREAT, 0644), -EPERM);
		CHECK_EQ(atomio_file_fd(st, f), -EPERM);
		CHECK_EQ(atomio_pread(st, f, buf, 7, 0), -EPERM);
		CHECK_EQ(atomio_caps(st, f, &caps), -EPERM);
		CHECK_EQ(atomio_stats(st, &s), -EPERM);
		CHECK_EQ(atomio_poll(st, 0), -EPERM);
		CHECK_EQ(atomio_event_fd(st), -EPERM);
		void *a2;
		CHECK_EQ(atomio_shared_area(st, &a2, NULL), -EPERM);
		CHECK_EQ(atomio_close(st), -EPERM); /* releases nothing */
		CHECK(access(t_path("g"), F_OK) != 0); /* not created */
		/* its own open: alone, refused while the parent holds the log;
		 * shared, it joins the parent's store */
		atomio *mine;
		struct atomio_options oc = t_opts(0);
		oc.flags |= ATOMIO_EXCLUSIVE;
		CHECK_EQ(atomio_open(t_path("log"), &oc, &mine), -EBUSY);
		oc.flags &= ~ATOMIO_EXCLUSIVE;
		CHECK_OK(atomio_open(t_path("log"), &oc, &mine));
		CHECK_EQ(atomio_file_open(mine, t_path("f"), 0, 0), f); /* one id per file */
		CHECK_EQ(atomio_pwrite(mine, f, "child", 5, 300), 5);
		CHECK_EQ(atomio_pread(mine, f, buf, 7, 0), 7);
		CHECK(!memcmp(buf, "parent1", 7)); /* the parent's group, as the child reads it */
		_Atomic uint32_t *ca;
		CHECK_OK(atomio_shared_area(mine, (void **)&ca, NULL));
		CHECK_EQ(ca[3], 0x5eed);
		ca[4] = 0xc41d;
		CHECK_OK(atomio_close(mine));
		CHECK_EQ(write(pipefd[1], "k", 1), 1);
		_exit(0);
	}
	close(pipefd[1]);
	char c;
	CHECK_EQ(read(pipefd[0], &c, 1), 1);
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	close(pipefd[0]);

	/* the parent goes on: the child's group is in the store (its counters
	 * are the store's), its tx commits */
	struct atomio_stats s1;
	CHECK_OK(atomio_stats(st, &s1));
	CHECK_EQ(s1.commits, s0.commits + 1);
	CHECK_EQ(area[4], 0xc41d);
	char cb[8];
	CHECK_EQ(atomio_pread(st, f, cb, 5, 300), 5);
	CHECK(!memcmp(cb, "child", 5));
	CHECK_OK(atomio_tx_commit(ptx));
	CHECK_EQ(atomio_pwrite(st, f, "parent3", 7, 200), 7);
	CHECK_OK(atomio_close(st));
	size_t n;
	uint8_t *d = t_slurp(t_path("f"), &n);
	CHECK(n == 305 && !memcmp(d, "parent1", 7) && !memcmp(d + 100, "parent2", 7) &&
	      !memcmp(d + 200, "parent3", 7) && !memcmp(d + 300, "child", 5));
	free(d);

	/* a child forked while the parent holds the store outlives the store:
	 * once the parent closed it, the child opens the log itself (the
	 * child's copy of the log descriptor was closed at the fork, so it
	 * does not keep the parent's flock) */
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	CHECK_OK(atomio_shared_area(st, (void **)&area, NULL));
	CHECK_EQ(area[3], 0); /* every process had closed it: a new state, zeros */
	int go[2];
	CHECK_OK(pipe(go));
	p = fork();
	if (p == 0) {
		char x;
		CHECK_EQ(read(go[0], &x, 1), 1); /* the parent closed its store */
		own_store_writes("later", 400);
	}
	CHECK_OK(atomio_close(st));
	CHECK_EQ(write(go[1], "g", 1), 1);
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	close(go[0]), close(go[1]);
	d = t_slurp(t_path("f"), &n);
	CHECK(n == 405 && !memcmp(d + 400, "later", 5));
	free(d);

	/* once the parent closed, a child opens the log itself and writes */
	p = fork();
	if (p == 0) {
		own_store_writes("child", 300);
	}
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	d = t_slurp(t_path("f"), &n);
	CHECK(n == 405 && !memcmp(d + 300, "child", 5));
	free(d);
	printf("fork: every call on the parent's handle refused in the child (-EPERM), the child's own "
	       "exclusive open -EBUSY while the parent held the log, its own shared open joined the "
	       "store, and worked after the parent closed\n");
	return 0;
}
