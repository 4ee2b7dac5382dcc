/* A damaged catalog copy is named (issue 12, item 8).  A file registered
 * last lives only in the current catalog copy; with that copy's bytes
 * damaged, the older copy lacks the file that live records name.  atomio_open
 * refuses (ATOMIO_ECORRUPT, nothing replayed) and says which catalog copy
 * failed its checksum (it said "record seq 1 range 1 names a file the store
 * never registered"); atomio dump says it too, and exits 1. */
#include <stdbool.h>
#include <stddef.h>
#include <sys/wait.h>

#include "support/logpatch.h"
#include "t.h"

static void session(void *arg)
{
	(void)arg;
	struct atomio_options o = {0};
	o.flags = ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	int a = atomio_file_open(st, t_path("a"), 0, 0);
	int b = atomio_file_open(st, t_path("b"), O_CREAT, 0644); /* newest entry */
	CHECK(a >= 0 && b >= 0);
	char buf[4096];
	memset(buf, 'b', sizeof(buf));
	CHECK_EQ(atomio_pwrite(st, a, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	CHECK_EQ(atomio_pwrite(st, b, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
}

int main(int argc, char **argv)
{
	(void)argc;
	const char *cmd = strstr(argv[0], "/san/") ? "build/san/atomio" : "build/atomio";
	struct atomio_options o = t_opts(1 << 20);
	char err[512];
	atomio *st;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	CHECK(atomio_file_open(st, t_path("a"), O_CREAT, 0644) >= 0);
	CHECK_OK(atomio_close(st));
	CHECK_EQ(lp_crash_child(session, NULL), 0);

	struct lp l;
	CHECK_OK(lp_load(&l, t_path("s.log")));
	struct sb_disk *sb = lp_sb(&l);
	CHECK(sb != NULL);
	struct cat_hdr_disk *c = lp_cat_cur(&l, sb);
	CHECK(c != NULL);
	int copy = (int)(((uint8_t *)c - l.b - sb->cat_off) / sb->cat_size);
	CHECK(c->count == 2);
	((uint8_t *)c)[CAT_HDR + 20] ^= 0x01; /* a byte of the first entry: checksum fails */
	CHECK_OK(lp_store(&l, t_path("s.log")));
	lp_free(&l);

	o.flags = 0;
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	err[0] = 0;
	int r = atomio_open(t_path("s.log"), &o, &st);
	fprintf(stderr, "open: %s: %s\n", atomio_strerror(r), err);
	CHECK_EQ(r, ATOMIO_ECORRUPT);
	char want[64];
	snprintf(want, sizeof(want), "catalog copy %d", copy);
	CHECK(strstr(err, want) != NULL);
	CHECK(strstr(err, "checksum") != NULL);
	if (access(cmd, X_OK) == 0) {
		char line[8192];
		snprintf(line, sizeof(line), "%s dump %s > %s 2>&1", cmd, t_path("s.log"), t_path("out"));
		int rc = system(line);
		CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
		snprintf(line, sizeof(line), "grep -q 'recovery    would fail: .*catalog copy %d' %s",
			 copy, t_path("out"));
		CHECK_EQ(system(line), 0);
	}
	printf("ok: the damaged catalog copy is named\n");
	return 0;
}
