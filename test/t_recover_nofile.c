/* Recovery and the open-file limit (issue 12, item 12).  Recovery holds one
 * descriptor per data file with live records.  A crashed writer leaves NF
 * files with live records; with the soft RLIMIT_NOFILE below NF (the hard
 * limit above it):
 *   - atomio_open refuses with -EMFILE, replays nothing, and its message
 *     says how many descriptors recovery needs and what the limit is (the
 *     bound is documented in docs/API.md, atomio_open);
 *   - `atomio recover` raises its own soft limit to the hard one and
 *     recovers every group. */
#include <sys/resource.h>
#include <sys/wait.h>

#include "t.h"

#define NF 80
#define SOFT 40

static void writer(void)
{
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	char buf[512];
	for (int i = 0; i < NF; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%03d", i);
		int id = atomio_file_open(st, t_path(name), O_CREAT, 0644);
		CHECK(id >= 0);
		memset(buf, 'a' + i % 26, sizeof(buf));
		CHECK_EQ(atomio_pwrite(st, id, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	}
	_exit(0); /* a crash: every record stays live */
}

int main(int argc, char **argv)
{
	(void)argc;
	struct rlimit rl;
	CHECK_OK(getrlimit(RLIMIT_NOFILE, &rl));
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < NF + 64)
		t_skip("hard open-file limit %llu is too low for this test",
		       (unsigned long long)rl.rlim_max);
	const char *cmd = strstr(argv[0], "/san/") ? "build/san/atomio" : "build/atomio";
	if (access(cmd, X_OK) != 0)
		t_skip("%s is not built", cmd);
	t_dir();
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0)
		writer();
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);

	struct rlimit low = {.rlim_cur = SOFT, .rlim_max = rl.rlim_max};
	CHECK_OK(setrlimit(RLIMIT_NOFILE, &low));
	char err[512] = "";
	struct atomio_options o = {.errbuf = err, .errbuf_size = sizeof(err)};
	atomio *st;
	CHECK_EQ(atomio_open(t_path("s.log"), &o, &st), -EMFILE);
	fprintf(stderr, "atomio_open at a soft limit of %d: %s\n", SOFT, err);
	CHECK(strstr(err, "open-file limit") != NULL);
	CHECK(strstr(err, "40") != NULL);

	/* the command raises its soft limit (inherited: SOFT) to the hard one */
	char line[8192];
	snprintf(line, sizeof(line), "%s recover --json %s > %s 2>&1", cmd, t_path("s.log"),
		 t_path("out"));
	int rc = system(line);
	FILE *f = fopen(t_path("out"), "r");
	CHECK(f != NULL);
	size_t n = fread(line, 1, sizeof(line) - 1, f);
	line[n] = 0;
	fclose(f);
	fprintf(stderr, "atomio recover: %s", line);
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
	CHECK(strstr(line, "\"recovered_groups\": 80") || strstr(line, "\"recovered_groups\":80"));
	CHECK_OK(setrlimit(RLIMIT_NOFILE, &rl));

	/* every file holds its group */
	for (int i = 0; i < NF; i += 7) {
		char name[32], got[512];
		snprintf(name, sizeof(name), "f%03d", i);
		int fd = open(t_path(name), O_RDONLY);
		CHECK(fd >= 0);
		CHECK_EQ(pread(fd, got, sizeof(got), 0), (ssize_t)sizeof(got));
		CHECK(got[0] == 'a' + i % 26 && got[511] == 'a' + i % 26);
		close(fd);
	}
	printf("ok: recovery's descriptor bound is reported; atomio recover raises its limit\n");
	return 0;
}
