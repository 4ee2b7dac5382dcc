/* atomio_log_remove: the log of a store whose last process was SIGKILLed
 * goes, and with it the shared-state file that process left in /dev/shm
 * (t_shm_name); refused with -EBUSY while a handle has the store open (both
 * files stay); a file that is not a log is refused and left in place; a
 * missing path is -ENOENT. */
#include <signal.h>
#include <stdbool.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <sys/wait.h>

#include "t.h"

static bool exists(const char *p) { return access(p, F_OK) == 0; }

/* The state file's name of the log at path. */
static void shm_of(const char *path, char *name, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_OK(t_shm_name(fd, name, n));
	close(fd);
}

/* A child opens the store at path, commits a group and is SIGKILLed with
 * the store open: it leaves the log and the state file. */
static void killed_writer(const char *path, const struct atomio_options *o)
{
	int pfd[2];
	CHECK_OK(pipe(pfd));
	fflush(NULL);
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		atomio *st;
		char ok = 0;
		if (atomio_open(path, o, &st) == 0) {
			int f = atomio_file_open(st, t_path("data"), O_CREAT, 0644);
			ok = f >= 0 && atomio_pwrite(st, f, "abcd", 4, 0) == 4;
		}
		(void)!write(pfd[1], &ok, 1);
		pause();
		_exit(1);
	}
	close(pfd[1]);
	char ok = 0;
	CHECK_EQ(read(pfd[0], &ok, 1), 1);
	close(pfd[0]);
	CHECK(ok);
	CHECK_OK(kill(p, SIGKILL));
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFSIGNALED(ws));
}

int main(void)
{
	struct statfs sfs;
	if (statfs("/dev/shm", &sfs) < 0 || sfs.f_type != TMPFS_MAGIC)
		t_skip("/dev/shm is not a tmpfs: the state file is beside the log");
	struct atomio_options o = t_opts(256 << 10);
	char log[4200]; /* t_path's buffers are reused */
	snprintf(log, sizeof(log), "%s", t_path("log"));
	char shm[64];

	/* a killed writer's store: the state file stays, the removal takes both */
	killed_writer(log, &o);
	shm_of(log, shm, sizeof(shm));
	CHECK(exists(shm));
	CHECK_OK(atomio_log_remove(log));
	CHECK(!exists(shm));
	CHECK(!exists(log));
	CHECK_EQ(atomio_log_remove(log), -ENOENT);

	/* busy while a handle has the store open (this process's own too):
	 * both files stay; removed once it is closed */
	atomio *st;
	CHECK_OK(atomio_open(log, &o, &st));
	shm_of(log, shm, sizeof(shm));
	CHECK(exists(shm));
	CHECK_EQ(atomio_log_remove(log), -EBUSY);
	CHECK(exists(log));
	CHECK(exists(shm));
	int f = atomio_file_open(st, t_path("data"), 0, 0);
	CHECK(f >= 0);
	CHECK_EQ(atomio_pwrite(st, f, "efgh", 4, 0), 4); /* the store still works */
	CHECK_OK(atomio_close(st));
	CHECK(!exists(shm)); /* the last close removed it */
	CHECK_OK(atomio_log_remove(log));
	CHECK(!exists(log));

	/* what is not a log is left in place: a data file, an empty file, a
	 * directory, a symlink to a log (the entry is not the log) */
	CHECK_EQ(atomio_log_remove(t_path("data")), ATOMIO_ENOTLOG);
	CHECK(exists(t_path("data")));
	int fd = open(t_path("empty"), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ(atomio_log_remove(t_path("empty")), ATOMIO_ENOTLOG);
	CHECK(exists(t_path("empty")));
	CHECK_OK(mkdir(t_path("dir"), 0700));
	CHECK_EQ(atomio_log_remove(t_path("dir")), ATOMIO_ENOTLOG);
	CHECK(exists(t_path("dir")));
	CHECK_OK(atomio_open(log, &o, &st));
	CHECK_OK(atomio_close(st));
	CHECK_OK(symlink(log, t_path("link")));
	CHECK_EQ(atomio_log_remove(t_path("link")), ATOMIO_ENOTLOG);
	CHECK(exists(log));

	CHECK_EQ(atomio_log_remove(t_path("none")), -ENOENT);
	CHECK_EQ(atomio_log_remove(NULL), -EINVAL);
	CHECK_EQ(atomio_log_remove(""), -EINVAL);
	printf("log remove ok\n");
	return 0;
}
