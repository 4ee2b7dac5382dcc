/* A store belongs to the process that opened it (docs/API.md, Fork): in a
 * child after fork() every function on the parent's store answers -EPERM and
 * changes nothing, atomio_close there releases nothing, and the child's own
 * atomio_open of the log is -EBUSY while the parent has it open.  The
 * parent's store goes on as if there had been no child; after the parent
 * closes, the child's own open of the log works, also for a child forked
 * while the parent held the store (its copy of the log's descriptor, which
 * would keep the parent's flock, was closed at the fork).  (Before: a child's commit
 * through the copy wrote its record where the parent's next record went, so
 * a crash before the next checkpoint could lose an acknowledged group.) */
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
		CHECK_EQ(atomio_close(st), -EPERM); /* releases nothing */
		/* its own open: another open file description, refused while the
		 * parent holds the log */
		atomio *mine;
		struct atomio_options oc = t_opts(0);
		CHECK_EQ(atomio_open(t_path("log"), &oc, &mine), -EBUSY);
		CHECK(access(t_path("g"), F_OK) != 0); /* not created */
		CHECK_EQ(write(pipefd[1], "k", 1), 1);
		_exit(0);
	}
	close(pipefd[1]);
	char c;
	CHECK_EQ(read(pipefd[0], &c, 1), 1);
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	close(pipefd[0]);

	/* the parent goes on: its tx commits, its store is as before */
	struct atomio_stats s1;
	CHECK_OK(atomio_stats(st, &s1));
	CHECK_EQ(s1.commits, s0.commits);
	CHECK_EQ(s1.bytes_logged, s0.bytes_logged);
	CHECK_OK(atomio_tx_commit(ptx));
	CHECK_EQ(atomio_pwrite(st, f, "parent3", 7, 200), 7);
	CHECK_OK(atomio_close(st));
	size_t n;
	uint8_t *d = t_slurp(t_path("f"), &n);
	CHECK(n == 207 && !memcmp(d, "parent1", 7) && !memcmp(d + 100, "parent2", 7) && !memcmp(d + 200, "parent3", 7));
	free(d);

	/* a child forked while the parent holds the store outlives the store:
	 * once the parent closed it, the child opens the log itself (the
	 * child's copy of the log descriptor was closed at the fork, so it
	 * does not keep the parent's flock) */
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
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
	printf("fork: every call on the parent's store refused in the child (-EPERM), the child's own open "
	       "-EBUSY while the parent held the log, then its own store worked\n");
	return 0;
}
