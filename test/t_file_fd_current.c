/* atomio_file_fd of a file another process registered anew (unlinked and
 * created again) after this process opened it: the descriptor must name the
 * file the path names now -- the one atomio reads and writes -- not the old
 * inode, and under the number it gave before (the application may have kept
 * it).  Before, it named the old inode: fstat and reads through it saw a file
 * no path reaches. */
#include <sys/wait.h>

#include "t.h"

int main(void)
{
	t_dir();
	const char *log = t_path("log"), *f = t_path("f.dat");
	struct atomio_options o = t_opts(1 << 20);
	atomio *a;
	int id = t_open_written(log, &o, f, "old", &a);
	int fd0 = atomio_file_fd(a, id);
	CHECK(fd0 >= 0);

	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		atomio *b;
		KCHECK(atomio_open(log, &o, &b) == 0);
		KCHECK(unlink(f) == 0);
		KCHECK(atomio_file_open(b, f, O_CREAT | O_EXCL, 0644) == id);
		KCHECK(atomio_pwrite(b, id, "new", 3, 0) == 3);
		KCHECK(atomio_close(b) == 0);
		_exit(0);
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);

	int fd = atomio_file_fd(a, id);
	struct stat byfd, bypath;
	CHECK_OK(fstat(fd, &byfd));
	CHECK_OK(stat(f, &bypath));
	char got[4] = {0};
	ssize_t n = pread(fd, got, 3, 0);
	int current = byfd.st_dev == bypath.st_dev && byfd.st_ino == bypath.st_ino;
	printf("atomio_file_fd: %d (was %d), names %s inode; reads '%.*s'\n", fd, fd0,
	       current ? "the current" : "the OLD", (int)(n > 0 ? n : 0), got);
	if (!current || n != 3 || memcmp(got, "new", 3)) {
		fprintf(stderr, "FAIL: atomio_file_fd names a file no longer registered\n");
		return 1;
	}
	CHECK_EQ(fd, fd0);
	/* and atomio's own writes and reads go there */
	CHECK_EQ(atomio_pwrite(a, id, "A", 1, 3), 1);
	CHECK_EQ(pread(fd, got, 4, 0), 4);
	CHECK(!memcmp(got, "newA", 4));
	CHECK_OK(atomio_close(a));
	printf("ok: atomio_file_fd follows a file registered anew by another process\n");
	return 0;
}
