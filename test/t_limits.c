/* Limits and bad input: -E2BIG with nothing written, -EBUSY for a second
 * opener, -EINVAL for every kind of bad argument, and a tx used after it
 * ended. */
#include <limits.h>
#include <sys/wait.h>

#include "t.h"

int main(void)
{
	struct atomio_options o = t_opts(256 << 10);
	/* No checkpointer thread: the second largest group below must find the
	 * log full and wait (log_full_waits == 1); a background checkpoint
	 * could free the log first on a loaded machine. */
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st, *st2;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
	CHECK(f >= 0);
	struct atomio_caps c;
	CHECK_OK(atomio_caps(st, f, &c));
	CHECK_EQ(c.log_size, 256 << 10);
	CHECK_EQ(c.max_group_bytes, c.log_size - 96);

	/* the largest group fits, one byte more does not */
	size_t max = c.max_group_bytes;
	char *big = malloc(max + 1);
	t_fill(big, max + 1, 7, 0);
	CHECK_EQ(atomio_pwrite(st, f, big, max + 1, 0), -E2BIG);
	CHECK_EQ(atomio_pwrite(st, f, big, max, 0), (ssize_t)max);
	CHECK_EQ(atomio_pwrite(st, f, big, max, 0), (ssize_t)max); /* needs a checkpoint first */
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.log_full_waits, 1);

	/* E2BIG in a tx: the write is refused, the tx stays usable and whole */
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, f, "abc", 3, 0));
	CHECK_EQ(atomio_tx_write(tx, f, big, max, 10), -E2BIG);
	CHECK_OK(atomio_tx_write(tx, f, "def", 3, 3));
	CHECK_OK(atomio_tx_commit(tx));
	char rd[8];
	CHECK_EQ(pread(atomio_file_fd(st, f), rd, 6, 0), 6);
	CHECK(!memcmp(rd, "abcdef", 6));
	CHECK_EQ(pread(atomio_file_fd(st, f), rd, 4, 6), 4);
	CHECK(!memcmp(rd, big + 6, 4)); /* the refused write left no trace */

	/* many segments: the per-range overhead counts */
	CHECK_OK(atomio_tx_begin(st, &tx));
	int added = 0, r;
	while ((r = atomio_tx_write(tx, f, "x", 1, (off_t)added * 2)) == 0)
		added++;
	CHECK_EQ(r, -E2BIG);
	CHECK(added > 100 && (uint32_t)added <= c.max_segments);
	CHECK_OK(atomio_tx_commit(tx));

	/* bad input */
	CHECK_EQ(atomio_open(NULL, &o, &st2), -EINVAL);
	CHECK_EQ(atomio_open(t_path("log"), &o, NULL), -EINVAL);
	struct atomio_options bad = o;
	bad.flags = 0x100;
	CHECK_EQ(atomio_open(t_path("x"), &bad, &st2), -EINVAL);
	bad = o;
	bad.reserved[0] = 1;
	CHECK_EQ(atomio_open(t_path("x"), &bad, &st2), -EINVAL);
	CHECK_EQ(atomio_open(t_path("nope"), NULL, &st2), -ENOENT);
	CHECK_EQ(atomio_file_open(st, t_path("f"), O_TRUNC, 0), -EINVAL);
	CHECK_EQ(atomio_file_open(st, t_path("f"), O_APPEND, 0), -EINVAL);
	CHECK_EQ(atomio_file_open(st, t_dir(), 0, 0), -EISDIR); /* open(2)'s own error */
	CHECK_EQ(atomio_file_open(st, t_path("missing"), 0, 0), -ENOENT);
	CHECK_EQ(atomio_file_open(st, NULL, 0, 0), -EINVAL);
	CHECK_EQ(atomio_file_fd(st, 99), -EINVAL);
	CHECK_EQ(atomio_file_fd(st, -1), -EINVAL);
	CHECK_EQ(atomio_pwrite(st, 99, "x", 1, 0), -EINVAL);
	CHECK_EQ(atomio_pwrite(st, f, NULL, 1, 0), -EINVAL);
	CHECK_EQ(atomio_pwrite(st, f, "x", 1, -1), -EINVAL);
	CHECK_EQ(atomio_pwrite(st, f, "x", 1, (off_t)1 << 62), -EFBIG);
	CHECK_EQ(atomio_pwrite(st, f, "x", 0, 0), 0);
	struct iovec iov[2] = {{"ab", 2}, {NULL, 1}};
	CHECK_EQ(atomio_pwritev(st, f, iov, 2, 0), -EINVAL);
	CHECK_EQ(atomio_pwritev(st, f, iov, -1, 0), -EINVAL);
	CHECK_EQ(atomio_pwritev(st, f, iov, IOV_MAX + 1, 0), -EINVAL);
	CHECK_EQ(atomio_pwritev(st, f, iov, 1, 0), 2);
	CHECK_EQ(atomio_tx_begin(st, NULL), -EINVAL);
	CHECK_EQ(atomio_tx_begin(NULL, &tx), -EINVAL);
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_EQ(atomio_tx_write(tx, 42, "x", 1, 0), -EINVAL);
	CHECK_EQ(atomio_tx_write(tx, f, NULL, 1, 0), -EINVAL);
	CHECK_EQ(atomio_tx_write(tx, f, "x", 1, -5), -EINVAL);
	CHECK_EQ(atomio_tx_truncate(tx, f, -1), -EINVAL);
	CHECK_EQ(atomio_tx_truncate(tx, 42, 0), -EINVAL);
	CHECK_EQ(atomio_tx_writev(tx, f, NULL, 1, 0), -EINVAL);
	CHECK_EQ(atomio_tx_commit(NULL), -EINVAL);
	CHECK_OK(atomio_tx_commit(tx)); /* empty group: nothing to do */
	/* used after commit / abort */
	CHECK_EQ(atomio_tx_write(tx, f, "x", 1, 0), -EINVAL);
	CHECK_EQ(atomio_tx_commit(tx), -EINVAL);
	atomio_tx_abort(tx); /* harmless */
	CHECK_OK(atomio_tx_begin(st, &tx));
	atomio_tx_abort(tx);
	CHECK_EQ(atomio_tx_truncate(tx, f, 0), -EINVAL);
	CHECK_EQ(atomio_caps(st, 99, &c), -EINVAL);
	CHECK_EQ(atomio_caps(NULL, f, &c), -EINVAL);
	CHECK_EQ(atomio_stats(st, NULL), -EINVAL);

	/* a tx still open blocks close */
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_EQ(atomio_close(st), -EBUSY);
	atomio_tx_abort(tx);

	/* any number of openers share the store; an exclusive one wants it
	 * alone: refused while another has it open, in this process and in
	 * another, and others are refused while it has it */
	struct atomio_options ox = o;
	ox.flags |= ATOMIO_EXCLUSIVE;
	CHECK_EQ(atomio_open(t_path("log"), &ox, &st2), -EBUSY);
	pid_t p = fork();
	if (p == 0) {
		atomio *s3;
		if (atomio_open(t_path("log"), &ox, &s3) != -EBUSY)
			_exit(1);
		_exit(atomio_open(t_path("log"), &o, &s3) == 0 && atomio_close(s3) == 0 ? 0 : 2);
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK_OK(atomio_open(t_path("log"), &o, &st2)); /* a second handle in this process */
	CHECK_OK(atomio_close(st2));
	CHECK_OK(atomio_close(st));
	CHECK_OK(atomio_open(t_path("log"), &ox, &st2));
	CHECK_EQ(atomio_open(t_path("log"), &o, &st), -EBUSY);
	CHECK_OK(atomio_close(st2));

	/* error names */
	CHECK(strstr(atomio_strerror(ATOMIO_ECORRUPT), "corrupt"));
	CHECK(strstr(atomio_strerror(-EBUSY), "busy"));
	CHECK(strcmp(atomio_strerror(-99999), ""));
	free(big);
	return 0;
}
