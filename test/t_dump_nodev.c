/* atomio dump never opens a device node at the log's path (issue 12, item
 * 4): it looks with O_PATH first, as the library and atomio recover do, and
 * refuses what is not a regular file before any open that could act (a
 * tape rewinds, a watchdog arms).  test/t_cli_dump_special.sh sees the
 * refusal and that a FIFO no longer blocks; it cannot see whether a device
 * was opened before being refused (the old dump opened it, then said "not a
 * regular file" all the same).  inotify can: an open(2) of the node raises
 * IN_OPEN on it, an O_PATH look does not.  The node is made here (mknod: a
 * privileged process; skipped otherwise), a copy of /dev/null's numbers. */
#include <sys/inotify.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "t.h"

/* IN_OPEN events waiting on the watch descriptor. */
static int opens(int in)
{
	char buf[4096] __attribute__((aligned(8)));
	int n = 0;
	ssize_t k;
	while ((k = read(in, buf, sizeof(buf))) > 0)
		for (char *p = buf; p < buf + k;) {
			const struct inotify_event *e = (const void *)p;
			if (e->mask & IN_OPEN)
				n++;
			p += sizeof(*e) + e->len;
		}
	return n;
}

int main(int argc, char **argv)
{
	(void)argc;
	const char *cmd = strstr(argv[0], "/san/") ? "build/san/atomio" : "build/atomio";
	if (access(cmd, X_OK) != 0)
		t_skip("%s is not built", cmd);
	struct stat null;
	CHECK_OK(stat("/dev/null", &null));
	if (mknod(t_path("dev.log"), S_IFCHR | 0600, null.st_rdev) != 0)
		t_skip("mknod: %s (needs CAP_MKNOD)", strerror(errno));
	CHECK_OK(symlink(t_path("dev.log"), t_path("link.log")));
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	CHECK(in >= 0);
	CHECK(inotify_add_watch(in, t_path("dev.log"), IN_OPEN) >= 0);
	/* the watch sees an open of the node (not so on a nodev mount) */
	int fd = open(t_path("dev.log"), O_RDONLY);
	if (fd < 0)
		t_skip("opening the device node: %s (a nodev mount?)", strerror(errno));
	close(fd);
	CHECK_EQ(opens(in), 1);

	static const char *logs[] = {"dev.log", "link.log"};
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++) {
			char line[8192];
			snprintf(line, sizeof(line), "%s dump %s %s > %s 2>&1", cmd, j ? "--json" : "",
				 t_path(logs[i]), t_path("out"));
			int rc = system(line);
			size_t n;
			uint8_t *out = t_slurp(t_path("out"), &n);
			CHECK(out != NULL);
			fprintf(stderr, "dump %s%s: exit %d: %.*s", j ? "--json " : "", logs[i],
				WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, (int)n, (char *)out);
			CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 3);
			CHECK(memmem(out, n, "not a regular file", 18) != NULL);
			free(out);
			CHECK_EQ(opens(in), 0); /* looked at, never opened */
		}
	close(in);
	printf("ok: dump refuses a device node without opening it\n");
	return 0;
}
