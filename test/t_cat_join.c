/* A process joining a live store reads the file catalog while another
 * process registers files (files.c, cat_parse_shared): the reader holds
 * LK_CAT read-locked, so no registration rewrites a catalog copy while it
 * reads.  Unlocked, two registrations in a row rewrite both copies, and the
 * joiner found the store "corrupt" (t_procs_kill, loaded).
 *
 * Scenario: process A has the store open with one file.  Process B joins;
 * its ops table pauses its catalog reading just before the last read (the
 * chosen copy, read again whole after both copies were checked), tells A to
 * register two more files, and waits for A to say they are done, at most
 * PAUSE_MS.  With the lock, A's registrations wait for B's read to end, so
 * B's wait runs out, B reads what it checked, and its open succeeds; A's
 * registrations then go through.  Without the lock they land in B's pause,
 * and B's last read finds the catalog changed: its open fails. */
#include <poll.h>
#include <sys/wait.h>

#include "format.h"
#include "sys.h"
#include "t.h"

#define PAUSE_MS 1000

static struct atomio_sysops ops;
static int go_w = -1, done_r = -1, cat_reads;
static uint64_t cat_off, area_off; /* the catalog copies lie between (format.h) */

static ssize_t w_pread(int fd, void *buf, size_t len, off_t off)
{
	if ((uint64_t)off >= cat_off && (uint64_t)off < area_off && ++cat_reads == 5) {
		/* each copy's header and body checked; next: the chosen copy again */
		char c = 'g';
		CHECK_EQ(write(go_w, &c, 1), 1);
		struct pollfd p = {.fd = done_r, .events = POLLIN};
		(void)poll(&p, 1, PAUSE_MS);
	}
	return atomio_sys_linux.pread(fd, buf, len, off);
}

int main(void)
{
	t_dir();
	const char *log = t_path("log");
	struct atomio_options o = t_opts(1 << 20);
	atomio *a;
	CHECK_OK(atomio_open(log, &o, &a));
	CHECK(atomio_file_open(a, t_path("f0"), O_CREAT, 0644) >= 0);
	int lfd = open(log, O_RDONLY);
	struct sb_disk sb;
	CHECK(lfd >= 0 && pread(lfd, &sb, sizeof(sb), 0) == (ssize_t)sizeof(sb));
	close(lfd);
	cat_off = sb.cat_off;
	area_off = sb.area_off;

	int go[2], done[2];
	CHECK(pipe(go) == 0 && pipe(done) == 0);
	pid_t p = fork();
	if (p == 0) {
		go_w = go[1];
		done_r = done[0];
		ops = atomio_sys_linux;
		ops.name = "cat-join";
		ops.pread = w_pread;
		atomio_sys_set(&ops);
		char err[512] = "";
		struct atomio_options ob = {.errbuf = err, .errbuf_size = sizeof(err)};
		atomio *b;
		int r = atomio_open(log, &ob, &b);
		if (r < 0) {
			fprintf(stderr, "joining: %s (%s)\n", atomio_strerror(r), err);
			_exit(1);
		}
		printf("joined after %d catalog reads\n", cat_reads);
		fflush(stdout);
		CHECK(cat_reads >= 5);
		CHECK_OK(atomio_close(b));
		_exit(0);
	}
	char c;
	CHECK_EQ(read(go[0], &c, 1), 1); /* B is in its catalog read */
	CHECK(atomio_file_open(a, t_path("f1"), O_CREAT, 0644) >= 0);
	CHECK(atomio_file_open(a, t_path("f2"), O_CREAT, 0644) >= 0);
	CHECK_EQ(write(done[1], "d", 1), 1);
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws));
	CHECK_EQ(WEXITSTATUS(ws), 0);
	CHECK_OK(atomio_close(a));
	printf("ok: a process joining while another registers files reads a whole catalog\n");
	return 0;
}
