/* A file's identity is its device and inode (issue 12, item 3): the same file
 * registered through a hard link gets the id it already has in the store, as
 * it does through the same path spelt otherwise or a symlink.  Two ids for one
 * inode would give it two fast-path guards, so that an older logged record of
 * one id could be replayed over an acknowledged fast-path write of the other.
 * A different file (a copy) still gets its own id. */
#include "t.h"

int main(void)
{
	struct atomio_options o = t_opts(1 << 20);
	atomio *st;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	int a = atomio_file_open(st, t_path("a"), O_CREAT, 0644);
	CHECK(a >= 0);
	CHECK_OK(link(t_path("a"), t_path("a-link")));
	CHECK_EQ(atomio_file_open(st, t_path("a-link"), 0, 0), a);
	CHECK_EQ(atomio_file_open(st, t_path("./a"), 0, 0), a);
	CHECK_OK(symlink(t_path("a-link"), t_path("a-sym")));
	CHECK_EQ(atomio_file_open(st, t_path("a-sym"), 0, 0), a);
	/* the O_DIRECT choice must agree, as for the same path */
	CHECK_EQ(atomio_file_open(st, t_path("a-link"), O_DIRECT, 0), -EINVAL);
	/* a copy is another file */
	int b = atomio_file_open(st, t_path("b"), O_CREAT, 0644);
	CHECK(b >= 0 && b != a);

	/* writes through either name land in the one file, in commit order */
	char x[4096], y[4096], got[4096];
	memset(x, 'x', sizeof(x));
	memset(y, 'y', sizeof(y));
	int l = atomio_file_open(st, t_path("a-link"), 0, 0);
	CHECK_EQ(atomio_pwrite(st, a, x, sizeof(x), 0), (ssize_t)sizeof(x));
	CHECK_EQ(atomio_pwrite(st, l, y, sizeof(y), 0), (ssize_t)sizeof(y));
	CHECK_OK(atomio_close(st));

	/* reopened: the link first this time; the store still gives one id */
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	int l2 = atomio_file_open(st, t_path("a-link"), 0, 0);
	int a2 = atomio_file_open(st, t_path("a"), 0, 0);
	CHECK(l2 >= 0);
	CHECK_EQ(a2, l2);
	CHECK_EQ(atomio_pread(st, a2, got, sizeof(got), 0), (ssize_t)sizeof(got));
	CHECK(!memcmp(got, y, sizeof(got)));
	CHECK_OK(atomio_close(st));
	printf("ok: a hard link maps to the id its file already has\n");
	return 0;
}
