/* A registered file unlinked and created again (PostgreSQL drops and makes
 * relation files so) by a process that had it open only on demand -- its
 * checkpoint opened it to sync it, as it opens every file another process
 * registered.  Registering the path again must send that process's writes
 * to the new file: its on-demand descriptor names the old inode, which the
 * write would reach while its read (through the new descriptor... or the
 * page cache of the old one) says the write is there.  Checked by the path,
 * while both processes have the store open and after both closed. */
#include <sys/wait.h>

#include "t.h"

static int expect_file(const char *path, const char *want)
{
	size_t n;
	uint8_t *d = t_slurp(path, &n);
	int ok = d && n == strlen(want) && !memcmp(d, want, n);
	if (!ok)
		fprintf(stderr, "%s holds %zu bytes '%.*s', expected '%s'\n", path, n, (int)(d ? n : 0),
			d ? (char *)d : "", want);
	free(d);
	return ok;
}

int main(void)
{
	t_dir();
	const char *log = t_path("log"), *f = t_path("f.dat");
	struct atomio_options o = t_opts(1 << 20);
	atomio *a;
	int id = t_open_written(log, &o, f, "old", &a);

	int done[2], go[2];
	CHECK_OK(pipe(done));
	CHECK_OK(pipe(go));
	pid_t p = fork();
	if (p == 0) {
		atomio *b;
		char c, got[8] = {0};
		close(done[0]);
		close(go[1]);
		CHECK_OK(atomio_open(log, &o, &b));
		/* its checkpoint opens the file A registered, on demand */
		CHECK_OK(atomio_checkpoint(b));
		CHECK_OK(unlink(f));
		CHECK_EQ(atomio_file_open(b, f, O_CREAT | O_EXCL, 0644), id);
		CHECK_EQ(atomio_pwrite(b, id, "new", 3, 0), 3);
		CHECK_EQ(atomio_pread(b, id, got, 3, 0), 3);
		CHECK(!memcmp(got, "new", 3));
		/* by the path, with both processes open */
		CHECK(expect_file(f, "new"));
		/* a checkpoint syncs the new file, not the old one */
		CHECK_OK(atomio_checkpoint(b));
		CHECK(expect_file(f, "new"));
		CHECK(write(done[1], "d", 1) == 1 && read(go[0], &c, 1) == 1);
		CHECK_OK(atomio_close(b));
		_exit(0);
	}
	char c;
	close(done[1]);
	close(go[0]);
	CHECK(read(done[0], &c, 1) == 1);
	/* this process's groups go to the new file too */
	CHECK_EQ(atomio_pwrite(a, id, "A", 1, 3), 1);
	CHECK(expect_file(f, "newA"));
	CHECK(write(go[1], "g", 1) == 1);
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK_OK(atomio_close(a));
	CHECK(expect_file(f, "newA"));
	CHECK_OK(atomio_open(log, &o, &a));
	CHECK_OK(atomio_close(a));
	CHECK(expect_file(f, "newA"));
	printf("ok: a file created again under its path by a process that had it open on demand: "
	       "its writes and the other process's land in the new file\n");
	return 0;
}
