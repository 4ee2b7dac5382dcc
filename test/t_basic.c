/* Basic life cycle: create, register, commit groups over two files, read back,
 * close, reopen, and the counters. */
#include "t.h"

int main(void)
{
	struct atomio_options o = t_opts(1 << 20);
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int a = atomio_file_open(st, t_path("a"), O_CREAT, 0644);
	int b = atomio_file_open(st, t_path("b"), O_CREAT, 0644);
	CHECK(a >= 0 && b >= 0 && a != b);
	CHECK_EQ(atomio_file_open(st, t_path("a"), 0, 0), a); /* same file, same id */

	char buf[8192];
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	t_fill(buf, 5000, 1, 100);
	CHECK_OK(atomio_tx_write(tx, a, buf, 5000, 100));
	t_fill(buf, 3000, 2, 0);
	CHECK_OK(atomio_tx_write(tx, b, buf, 3000, 0));
	CHECK_OK(atomio_tx_commit(tx));

	/* visible at once through the descriptor */
	char rd[8192];
	CHECK_EQ(pread(atomio_file_fd(st, a), rd, 5000, 100), 5000);
	t_fill(buf, 5000, 1, 100);
	CHECK(!memcmp(rd, buf, 5000));
	struct stat sb;
	CHECK_OK(fstat(atomio_file_fd(st, a), &sb));
	CHECK_EQ(sb.st_size, 5100);

	CHECK_EQ(atomio_pwrite(st, b, "hello", 5, 3000), 5);
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.commits, 2);
	CHECK_EQ(s.log_syncs, 2);
	CHECK_EQ(s.bytes_home, 8005);
	CHECK(s.bytes_logged >= 8005);

	struct atomio_caps c;
	CHECK_OK(atomio_caps(st, a, &c));
	CHECK(c.max_group_bytes > 900000 && c.max_group_bytes < (1 << 20));
	CHECK(c.max_segments > 1);
	CHECK_OK(atomio_close(st));

	/* reopen: registered files keep their ids; the data is there */
	o.flags = 0;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.groups_recovered, 0); /* closed cleanly: nothing to replay */
	CHECK_EQ(atomio_file_open(st, t_path("b"), 0, 0), b);
	CHECK_EQ(atomio_file_open(st, t_path("a"), 0, 0), a);
	size_t len;
	uint8_t *d = t_slurp(t_path("b"), &len);
	CHECK_EQ(len, 3005);
	CHECK(!memcmp(d + 3000, "hello", 5));
	free(d);
	CHECK_OK(atomio_close(st));

	/* the log is private */
	CHECK_OK(stat(t_path("log"), &sb));
	CHECK_EQ(sb.st_mode & 077, 0);
	return 0;
}
