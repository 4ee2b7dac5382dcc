/* A checkpoint must not trust an fsync through a descriptor opened after the
 * home writes it covers (checkpoint.c, TRUSTED DESCRIPTORS).  Linux reports a
 * write-back error once to each open file description that was open when it
 * happened, and to a later one only if nobody has seen it yet: when the
 * application's own fsync of its own descriptor took it, a descriptor the
 * checkpoint opens afterwards syncs "successfully" pages the kernel dropped,
 * and the checkpoint gives up the records that could redo them.
 *
 * Process A commits a range of f; its ops table plays the lost write-back
 * (the home write returns its count and writes nothing: the pages written,
 * their write-back failed, the error taken by another descriptor, the pages
 * dropped).  Process B joins, never having opened f, and runs a full
 * checkpoint: it opens f on demand.  Then both close.  f must hold the
 * committed bytes: B's checkpoint writes the live records through its new
 * descriptor before it trusts its sync.  Before the fix, f was empty. */
#include <sys/wait.h>

#include "sys.h"
#include "t.h"

static struct atomio_sysops ops;
static int drop_fd = -1; /* A: home writes to this descriptor are "lost" */

static ssize_t lossy_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	if (fd == drop_fd) {
		ssize_t n = 0;
		for (int i = 0; i < iovcnt; i++)
			n += (ssize_t)iov[i].iov_len;
		return n;
	}
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
}

int main(void)
{
	ops = atomio_sys_linux;
	ops.name = "t_errseq_lazy";
	ops.pwritev = lossy_pwritev;
	ops.uring_init = NULL; /* the plain engine: home writes through pwritev */
	ops.uring_enter = NULL;
	ops.uring_exit = NULL;
	atomio_sys_set(&ops);
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT | ATOMIO_ENGINE_PLAIN;
	const char *log = t_path("log"), *fpath = t_path("f");
	atomio *st;
	CHECK_OK(atomio_open(log, &o, &st));
	int f = atomio_file_open(st, fpath, O_CREAT, 0644);
	CHECK(f >= 0);
	drop_fd = atomio_file_fd(st, f);
	CHECK(drop_fd >= 0);
	char data[8192];
	t_fill(data, sizeof(data), 3, 0);
	CHECK_EQ(atomio_pwrite(st, f, data, sizeof(data), 0), (long)sizeof(data));
	drop_fd = -1;

	pid_t b = fork();
	CHECK(b >= 0);
	if (b == 0) {
		atomio *mine;
		KCHECK(atomio_open(log, &o, &mine) == 0);
		KCHECK(atomio_checkpoint(mine) == 0); /* opens f on demand */
		KCHECK(atomio_close(mine) == 0);
		_exit(0);
	}
	int ws;
	CHECK(waitpid(b, &ws, 0) == b && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK_OK(atomio_close(st));
	size_t n;
	uint8_t *got = t_slurp(fpath, &n);
	int whole = got && n == sizeof(data) && !memcmp(got, data, n);
	printf("f after the checkpoint of a process that opened it after the lost home write: %zu of %zu "
	       "bytes, %s\n", n, sizeof(data), whole ? "the committed ones" : "NOT the committed ones");
	free(got);
	if (!whole) {
		fprintf(stderr, "FAIL: the checkpoint trusted the sync of a descriptor opened after the home "
				"write it covered, and gave up its record\n");
		return 1;
	}
	printf("ok: a checkpoint writes the live records through a descriptor opened after them before it "
	       "trusts its sync\n");
	return 0;
}
