/* A process killed between the catalog write that registers a replaced file
 * anew (same id, the new inode) and the move of the file's generation
 * (files.c, reregister): the other processes must not go on writing home
 * through their descriptors of the old inode while the catalog, and
 * recovery, name the new one.  So the generation moves first.
 *
 * Process A registers f, writes and stays; f is replaced (a new file
 * renamed over it); process B joins and registers f again, and its ops table
 * kills it the moment its catalog write returns.  A then writes f: its group
 * must reach the new file, by path. */
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "format.h"
#include "sys.h"
#include "t.h"

static char log_path[PATH_MAX + 8];
static struct atomio_sysops ops;
static volatile int armed;

static bool is_log(int fd)
{
	char p[64], target[PATH_MAX + 8];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(p, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = 0;
	return !strcmp(target, log_path);
}

/* The catalog's copies lie between the superblocks and the record area. */
static ssize_t w_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	ssize_t r = atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
	if (armed && r > 0 && off >= (off_t)CAT_OFF && off < (off_t)(CAT_OFF + 2 * CAT_DEFAULT_SIZE) &&
	    is_log(fd))
		raise(SIGKILL); /* the catalog names the new file; nothing after it ran */
	return r;
}

int main(void)
{
	t_dir();
	const char *f = t_path("f");
	snprintf(log_path, sizeof(log_path), "%s", t_path("log"));
	struct atomio_options o = t_opts(1 << 20);
	atomio *a;
	int id = t_open_written(log_path, &o, f, "old-file", &a);

	int fd = open(t_path("new"), O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0 && write(fd, "........", 8) == 8 && fsync(fd) == 0);
	close(fd);
	CHECK_OK(rename(t_path("new"), f));

	pid_t p = fork();
	if (p == 0) {
		ops = atomio_sys_linux;
		ops.name = "t_reregister_killed";
		ops.pwritev = w_pwritev;
		atomio_sys_set(&ops);
		atomio *b;
		CHECK_OK(atomio_open(log_path, &o, &b));
		armed = 1;
		atomio_file_open(b, f, 0, 0);
		_exit(3); /* not killed: the catalog was not written */
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p);
	CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);

	/* A's group: to the file the path names now, whatever A had open */
	CHECK_EQ(atomio_pwrite(a, id, "A", 1, 8), 1);
	CHECK_OK(atomio_checkpoint(a));
	size_t n;
	uint8_t *d = t_slurp(f, &n);
	CHECK(d);
	if (n != 9 || memcmp(d, "........A", 9)) {
		fprintf(stderr, "FAIL: %s holds %zu bytes \"%.*s\", want \"........A\" (A wrote home to the old inode)\n",
			f, n, (int)n, d);
		return 1;
	}
	free(d);
	CHECK_OK(atomio_close(a));
	printf("ok: a process killed after registering a replaced file anew leaves the others writing the new one\n");
	return 0;
}
