/* The log's temporary file (issue 12, items 5 and 6).
 *   5: a process killed while atomio_open(ATOMIO_CREATE) builds the log
 *      leaves its temporary file, as large as the log once the zero-fill
 *      ran.  The next atomio_open removes it -- only a temporary file of
 *      this log, and only when no creator lives (the creator holds a lock on
 *      it): a creator still at work keeps its file and finishes.
 *   6: a log name of 235-255 bytes (legal) can be created: the temporary
 *      name fits NAME_MAX whatever the log's name. */
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "sys.h"
#include "t.h"

static struct atomio_sysops ops;
static int writes, kill_at = -1, block_fd = -1;

static ssize_t w_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	if (++writes == kill_at)
		kill(getpid(), SIGKILL); /* killed in the middle of the zero-fill */
	if (writes == 3 && block_fd >= 0) {
		char c;
		if (read(block_fd, &c, 1) != 1) /* a creator that takes its time */
			_exit(3);
	}
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
}

static char stale[256]; /* the name of a dead creator's file */

/* Entries of the test directory other than the given ones. */
static int others(const char *keep1, const char *keep2)
{
	DIR *d = opendir(t_dir());
	CHECK(d != NULL);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!keep1 && !keep2 && !strncmp(e->d_name, ".atomio-tmp-", 12))
			snprintf(stale, sizeof(stale), "%s", e->d_name);
		/* (a log's shared state, LOG-shm, is the store's, not a leftover) */
		size_t l = strlen(e->d_name);
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    !(l > 4 && !strcmp(e->d_name + l - 4, "-shm")) &&
		    (!keep1 || strcmp(e->d_name, keep1)) && (!keep2 || strcmp(e->d_name, keep2)))
			n++;
	}
	closedir(d);
	return n;
}

static int create(const char *name)
{
	struct atomio_options o = t_opts(4 << 20);
	atomio *st;
	int r = atomio_open(t_path(name), &o, &st);
	if (r == 0)
		CHECK_OK(atomio_close(st));
	return r;
}

int main(void)
{
	ops = atomio_sys_linux;
	ops.name = "tmp";
	ops.pwritev = w_pwritev;
	t_dir(); /* before the children: one directory for all */

	/* 5: killed creators leave temporary files */
	for (int k = 0; k < 3; k++) {
		pid_t p = fork();
		CHECK(p >= 0);
		if (p == 0) {
			kill_at = 3;
			atomio_sys_set(&ops);
			create("s.log");
			_exit(0);
		}
		int ws;
		CHECK(waitpid(p, &ws, 0) == p && WIFSIGNALED(ws));
	}
	/* each creator swept the one killed before it: one is left */
	CHECK_EQ(others(NULL, NULL), 1);
	CHECK(access(t_path("s.log"), F_OK) != 0);
	/* a file that only looks like one is not ours */
	int fd = open(t_path("s.log.tmp-0123456789abcdef"), O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	close(fd);
	/* a creator at work: its file must survive others' opens */
	int pp[2];
	CHECK_OK(pipe(pp));
	pid_t live = fork();
	CHECK(live >= 0);
	if (live == 0) {
		close(pp[1]);
		block_fd = pp[0];
		atomio_sys_set(&ops);
		_exit(create("s.log") == 0 ? 0 : 2);
	}
	close(pp[0]);
	CHECK(stale[0] == '.');
	while (others("s.log.tmp-0123456789abcdef", stale) != 1) /* its file appeared */
		usleep(1000);
	usleep(20000);
	struct atomio_options o = {0};
	atomio *st;
	CHECK_EQ(atomio_open(t_path("s.log"), &o, &st), -ENOENT); /* sweeps the dead ones */
	CHECK_EQ(others("s.log.tmp-0123456789abcdef", NULL), 1); /* the live creator's */
	CHECK_EQ(write(pp[1], "g", 1), 1);
	int ws;
	CHECK(waitpid(live, &ws, 0) == live && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK_EQ(others("s.log", "s.log.tmp-0123456789abcdef"), 0);
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	CHECK_OK(atomio_close(st));

	/* 6: long log names */
	for (size_t len = 230; len <= 255; len += 5) {
		char name[256];
		memset(name, 'n', len);
		name[len] = 0;
		int r = create(name);
		if (r)
			fprintf(stderr, "a log name of %zu bytes: %s\n", len, atomio_strerror(r));
		CHECK_OK(r);
		CHECK_OK(unlink(t_path(name)));
	}
	CHECK_EQ(others("s.log", "s.log.tmp-0123456789abcdef"), 0);
	printf("ok: stale temporary logs are swept, live ones kept; long log names work\n");
	return 0;
}
