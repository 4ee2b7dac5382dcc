/* A registered file replaced under its path (a new inode renamed over it)
 * while several processes have the store open: registering it again takes
 * a full checkpoint under the log role (no live record may name the old
 * file, or recovery would write it into the new one), and every process's
 * home writes go to the new file from then on (its descriptors of the old
 * one are stale: the file's generation moved on).  Recovery then replays
 * into the new file. */
#include <sys/wait.h>

#include "t.h"

int main(void)
{
	t_dir();
	const char *log = t_path("log"), *f = t_path("f");
	struct atomio_options o = t_opts(1 << 20);
	atomio *a;
	int id = t_open_written(log, &o, f, "old-file", &a);

	/* another file renamed over the path */
	int fd = open(t_path("new"), O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0 && write(fd, "........", 8) == 8 && fsync(fd) == 0);
	close(fd);
	CHECK_OK(rename(t_path("new"), f));

	/* another process registers the path again: the same id, the new file */
	pid_t p = fork();
	if (p == 0) {
		atomio *b;
		CHECK_OK(atomio_open(log, &o, &b));
		CHECK_EQ(atomio_file_open(b, f, 0, 0), id);
		CHECK_EQ(atomio_pwrite(b, id, "B", 1, 8), 1);
		CHECK_OK(atomio_close(b));
		_exit(0);
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);

	/* this process's groups go home to the new file too */
	CHECK_EQ(atomio_pwrite(a, id, "A", 1, 9), 1);
	size_t n;
	uint8_t *d = t_slurp(f, &n);
	CHECK(d && n == 10 && !memcmp(d, "........BA", 10));
	free(d);

	/* and a crash now replays into the new file */
	p = fork();
	if (p == 0) {
		atomio *c;
		CHECK_OK(atomio_open(log, &o, &c));
		CHECK_EQ(atomio_pwrite(c, id, "C", 1, 10), 1);
		_exit(0); /* no close */
	}
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK_OK(atomio_close(a)); /* the last: checkpoints */
	CHECK_OK(atomio_open(log, &o, &a));
	CHECK_OK(atomio_close(a));
	d = t_slurp(f, &n);
	CHECK(d && n == 11 && !memcmp(d, "........BAC", 11));
	free(d);

	/* A registered file unlinked, and its path created again with
	 * O_CREAT|O_EXCL by a process whose handle never had it open, while
	 * another process has the store open (PostgreSQL makes every relation
	 * file so; a relfilenode can come back): registered again, not -EEXIST
	 * because the first attempt, before the log role, had created it. */
	CHECK_OK(atomio_open(log, &o, &a));
	CHECK_OK(unlink(f));
	p = fork();
	if (p == 0) {
		atomio *b;
		CHECK_OK(atomio_open(log, &o, &b));
		CHECK_EQ(atomio_file_open(b, f, O_CREAT | O_EXCL, 0600), id);
		CHECK_EQ(atomio_pwrite(b, id, "new", 3, 0), 3);
		CHECK_EQ(atomio_file_open(b, f, O_CREAT | O_EXCL, 0600), -EEXIST);
		CHECK_OK(atomio_close(b));
		_exit(0);
	}
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK_OK(atomio_close(a));
	d = t_slurp(f, &n);
	CHECK(d && n == 3 && !memcmp(d, "new", 3));
	free(d);
	/* A process that loaded the catalog before the path was registered
	 * again, and never opened the file: its first use of the id (a write,
	 * a checkpoint's sync, a home write of another process's group it
	 * leads) must take the new identity from the catalog, not open the
	 * path and find it is not the file its old copy names (the write
	 * failed with EINVAL, a checkpoint passed the file by unsynced). */
	int go[2], ready[2];
	CHECK_OK(pipe(go));
	CHECK_OK(pipe(ready));
	CHECK_OK(atomio_open(log, &o, &a));
	p = fork();
	if (p == 0) {
		atomio *b;
		char c;
		CHECK_OK(atomio_open(log, &o, &b));
		CHECK(write(ready[1], "r", 1) == 1 && read(go[0], &c, 1) == 1);
		CHECK_EQ(atomio_pwrite(b, id, "B", 1, 3), 1);
		CHECK_OK(atomio_checkpoint(b));
		CHECK_OK(atomio_close(b));
		_exit(0);
	}
	char c;
	CHECK(read(ready[0], &c, 1) == 1);
	CHECK_OK(unlink(f));
	pid_t q = fork();
	if (q == 0) {
		atomio *b;
		CHECK_OK(atomio_open(log, &o, &b));
		CHECK_EQ(atomio_file_open(b, f, O_CREAT | O_EXCL, 0600), id);
		CHECK_EQ(atomio_pwrite(b, id, "nwr", 3, 0), 3);
		CHECK_OK(atomio_close(b));
		_exit(0);
	}
	CHECK(waitpid(q, &ws, 0) == q && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK(write(go[1], "g", 1) == 1);
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK_OK(atomio_close(a));
	d = t_slurp(f, &n);
	CHECK(d && n == 4 && !memcmp(d, "nwrB", 4));
	free(d);
	printf("ok: a file replaced under its path, registered again by another process: its groups, "
	       "and this process's, go to the new file; an unlinked file created again with O_EXCL; "
	       "a process that never opened it takes the new identity\n");
	return 0;
}
