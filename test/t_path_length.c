/* A moved store whose data file's resolved path passes PATH_MAX (issue 12,
 * item 9): the recorded relative path is fine, but under the store's new
 * directory it is too long to open.  atomio_open refuses with -ENAMETOOLONG
 * and says the length (it said ATOMIO_EBADPATH, "breaks atomio's path
 * rules"); moved back, the store recovers. */
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/wait.h>

#include "support/logpatch.h"
#include "t.h"

#define SEG 200
static char seg[SEG + 1];

static void session(void *arg)
{
	(void)arg;
	struct atomio_options o = {0};
	o.flags = ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open("s.log", &o, &st));
	char rel[4096] = "";
	for (int i = 0; i < 14; i++) {
		strcat(rel, seg);
		strcat(rel, "/");
	}
	strcat(rel, "f");
	int id = atomio_file_open(st, rel, 0, 0);
	CHECK(id >= 0);
	char buf[512];
	memset(buf, 'p', sizeof(buf));
	CHECK_EQ(atomio_pwrite(st, id, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
}

int main(void)
{
	memset(seg, 'd', SEG);
	CHECK_OK(chdir(t_dir()));
	/* store/ holds the log and a data file 14 directories deep (~2.8 KB) */
	CHECK_OK(mkdir("store", 0755));
	CHECK_OK(chdir("store"));
	for (int i = 0; i < 14; i++) {
		CHECK_OK(mkdir(seg, 0755));
		CHECK_OK(chdir(seg));
	}
	int fd = open("f", O_CREAT | O_WRONLY, 0644);
	CHECK(fd >= 0);
	close(fd);
	for (int i = 0; i < 14; i++)
		CHECK_OK(chdir(".."));
	struct atomio_options o = t_opts(1 << 20);
	atomio *st;
	CHECK_OK(atomio_open("s.log", &o, &st));
	CHECK_OK(atomio_close(st));
	CHECK_EQ(lp_crash_child(session, NULL), 0);
	CHECK_OK(chdir(".."));

	/* move it 8 directories deep (~1.6 KB more): the data file's full path
	 * passes PATH_MAX, the log's does not */
	for (int i = 0; i < 8; i++) {
		CHECK_OK(mkdir(seg, 0755));
		CHECK_OK(chdir(seg));
	}
	char deep[PATH_MAX];
	CHECK(getcwd(deep, sizeof(deep)) != NULL);
	for (int i = 0; i < 8; i++)
		CHECK_OK(chdir(".."));
	char to[PATH_MAX + 16];
	snprintf(to, sizeof(to), "%s/store", deep);
	CHECK_OK(rename("store", to));
	char log[PATH_MAX + 32];
	snprintf(log, sizeof(log), "%s/s.log", to);

	char err[8192] = "";
	o.flags = 0;
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	int r = atomio_open(log, &o, &st);
	fprintf(stderr, "open: %s: %s\n", atomio_strerror(r), err);
	CHECK_EQ(r, -ENAMETOOLONG);
	CHECK(strstr(err, "PATH_MAX") != NULL);
	CHECK(strstr(err, "bytes") != NULL);

	CHECK_OK(rename(to, "store")); /* back: recovers */
	CHECK_OK(atomio_open("store/s.log", &o, &st));
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.groups_recovered, 1);
	CHECK_OK(atomio_close(st));
	printf("ok: a resolved path past PATH_MAX is reported as too long\n");
	return 0;
}
