/* One file, one id, across processes: a process that opens through a hard
 * link a file another process registered under its other name gets the id
 * the file has (t_hardlink checks it inside one handle).  Two ids for one
 * inode would give it two fast-path guards (fastpath.c): a record logged
 * under one id would not keep the fast path off its range under the other,
 * and recovery would replay the older record over an acknowledged fast-path
 * write. */
#include <sys/wait.h>

#include "t.h"

int main(void)
{
	t_dir();
	const char *log = t_path("log");
	struct atomio_options o = t_opts(1 << 20);
	atomio *a;
	CHECK_OK(atomio_open(log, &o, &a));
	int id = atomio_file_open(a, t_path("a"), O_CREAT, 0644);
	CHECK(id >= 0);
	CHECK_EQ(atomio_pwrite(a, id, "xxxx", 4, 0), 4);
	CHECK_OK(link(t_path("a"), t_path("a-link")));

	pid_t p = fork();
	if (p == 0) {
		atomio *b;
		CHECK_OK(atomio_open(log, &o, &b));
		CHECK_EQ(atomio_file_open(b, t_path("a-link"), 0, 0), id);
		CHECK_EQ(atomio_pwrite(b, id, "B", 1, 1), 1);
		/* and the other name gives the same id in this process too */
		CHECK_EQ(atomio_file_open(b, t_path("a"), 0, 0), id);
		CHECK_OK(atomio_close(b));
		_exit(0);
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	char got[4];
	CHECK_EQ(atomio_pread(a, id, got, 4, 0), 4);
	CHECK(!memcmp(got, "xBxx", 4));
	CHECK_OK(atomio_close(a));

	/* A second session: the link's name first, in one process while
	 * another has the file open under its first name. */
	CHECK_OK(atomio_open(log, &o, &a));
	CHECK_EQ(atomio_file_open(a, t_path("a"), 0, 0), id);
	p = fork();
	if (p == 0) {
		atomio *b;
		CHECK_OK(atomio_open(log, &o, &b));
		CHECK_EQ(atomio_file_open(b, t_path("a-link"), 0, 0), id);
		CHECK_OK(atomio_close(b));
		_exit(0);
	}
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK_OK(atomio_close(a));
	printf("ok: a hard link opened by another process maps to the id its file has\n");
	return 0;
}
