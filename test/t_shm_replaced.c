/* The store's shared-state file, when it lives beside the log (LOG-shm:
 * /dev/shm is no tmpfs here -- a test backend says so), is named by the log's
 * path.  A log replaced at that path (another store renamed over it) while a
 * process has the old one open: a process that opens the new log is its
 * first, and must build its state in a file of its own -- not truncate and
 * rebuild the file the old log's process has mapped.  And a state file that
 * users who cannot write the log could write is refused, also with
 * ATOMIO_ALLOW_SHARED_LOG (which lets the log itself be shared). */
#include <signal.h>
#include <sys/wait.h>

#include "sys.h"
#include "t.h"

static struct atomio_sysops ops;

static int no_devshm(const char *path, int flags, mode_t mode)
{
	if (!strcmp(path, "/dev/shm"))
		return -ENOENT;
	return atomio_sys_linux.open(path, flags, mode);
}

static int file_is(const char *path, const char *want)
{
	size_t n;
	uint8_t *d = t_slurp(path, &n);
	int ok = d && n == strlen(want) && !memcmp(d, want, n);
	if (!ok)
		fprintf(stderr, "%s: '%.*s', expected '%s'\n", path, (int)(d ? n : 0), d ? (char *)d : "", want);
	free(d);
	return ok;
}

int main(void)
{
	ops = atomio_sys_linux;
	ops.name = "no-devshm";
	ops.open = no_devshm;
	atomio_sys_set(&ops);
	t_dir();
	char log[256], shm[300], err[1024];
	snprintf(log, sizeof(log), "%s", t_path("log"));
	snprintf(shm, sizeof(shm), "%s-shm", log);
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	o.errbuf = err;
	o.errbuf_size = sizeof(err);

	/* the old log's process */
	int ready[2], go[2];
	CHECK_OK(pipe(ready));
	CHECK_OK(pipe(go));
	pid_t p = fork();
	if (p == 0) {
		close(ready[0]);
		close(go[1]);
		alarm(60); /* a state rebuilt under it can leave it waiting */
		atomio *a;
		CHECK_OK(atomio_open(log, &o, &a));
		int id = atomio_file_open(a, t_path("a"), O_CREAT, 0644);
		CHECK(id >= 0);
		CHECK_EQ(atomio_pwrite(a, id, "a1", 2, 0), 2);
		char c;
		CHECK(write(ready[1], "r", 1) == 1 && read(go[0], &c, 1) == 1);
		CHECK_EQ(atomio_pwrite(a, id, "a2", 2, 2), 2);
		CHECK_OK(atomio_close(a));
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	char c;
	CHECK(read(ready[0], &c, 1) == 1);
	struct stat s0, s1;
	CHECK_OK(stat(shm, &s0));

	/* another store's log renamed over the path */
	atomio *b;
	CHECK_OK(atomio_open(t_path("log2"), &o, &b));
	CHECK_OK(atomio_close(b));
	CHECK_OK(rename(t_path("log2"), log));
	CHECK_OK(atomio_open(log, &o, &b));
	int id = atomio_file_open(b, t_path("b"), O_CREAT, 0644);
	CHECK(id >= 0);
	CHECK_EQ(atomio_pwrite(b, id, "b1", 2, 0), 2);
	CHECK_OK(stat(shm, &s1));
	if (s1.st_ino == s0.st_ino)
		fprintf(stderr, "the new log's process took the old log's state file (inode %llu)\n",
			(unsigned long long)s0.st_ino);
	CHECK(s1.st_ino != s0.st_ino);

	/* the old log's process goes on, and leaves the new one's file */
	CHECK(write(go[1], "g", 1) == 1);
	int ws;
	CHECK(waitpid(p, &ws, 0) == p);
	if (!WIFEXITED(ws) || WEXITSTATUS(ws))
		fprintf(stderr, "the old log's process ended with status %#x\n", ws);
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK(file_is(t_path("a"), "a1a2"));
	CHECK_OK(stat(shm, &s1)); /* not removed by the old log's last close */
	CHECK_EQ(atomio_pwrite(b, id, "b2", 2, 2), 2);

	/* a state file others could write is refused when a process joins,
	 * with ATOMIO_ALLOW_SHARED_LOG too (the log is 0600) */
	CHECK_OK(chmod(log, 0600));
	CHECK_OK(chmod(shm, 0666));
	atomio *j;
	o.flags |= ATOMIO_ALLOW_SHARED_LOG;
	int r = atomio_open(log, &o, &j);
	if (r == 0)
		atomio_close(j);
	printf("joining with a state file of mode 0666: %d %s\n", r, err);
	CHECK_EQ(r, ATOMIO_EUNSAFE);
	CHECK(strstr(err, shm) != NULL);
	CHECK_OK(chmod(shm, 0600));
	CHECK_OK(atomio_close(b));
	CHECK(file_is(t_path("b"), "b1b2"));
	CHECK(access(shm, F_OK) != 0); /* the last close removed it */
	atomio_sys_set(NULL);
	printf("ok: a log replaced at its path gets a state file of its own; a state file others could "
	       "write is refused\n");
	return 0;
}
