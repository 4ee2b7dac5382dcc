/* A damaged catalog copy is named (issue 12, item 8).  A file registered
 * last lives only in the current catalog copy; with that copy's bytes
 * damaged, the older copy lacks the file that live records name.  atomio_open
 * refuses (ATOMIO_ECORRUPT, nothing replayed) and says which catalog copy
 * failed its checksum (it said "record seq 1 range 1 names a file the store
 * never registered"); atomio dump says it too, and exits 1.
 *
 * The same for a re-registration: a data file replaced between two sessions
 * gets its new identity recorded in the newer catalog copy only.  With that
 * copy damaged, recovery refuses the file as replaced (ATOMIO_EIDENTITY, as
 * the older copy has it) -- and must say that the damaged copy may have
 * held the newer registration (it said only "replaced since it was
 * registered"); dump too.  ATOMIO_FORCE_PATHS then replays the group. */
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

/* A later session that registers r again (replaced meanwhile) and commits. */
static void resession(void *arg)
{
	(void)arg;
	struct atomio_options o = {0};
	o.flags = ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(t_path("r.log"), &o, &st));
	int r = atomio_file_open(st, t_path("r"), 0, 0);
	CHECK(r >= 0);
	char buf[4096];
	memset(buf, 'r', sizeof(buf));
	CHECK_EQ(atomio_pwrite(st, r, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
}

/* Flip a byte of the first entry of the current catalog copy: which copy. */
static int damage_cat(const char *log)
{
	struct lp l;
	CHECK_OK(lp_load(&l, t_path(log)));
	struct sb_disk *sb = lp_sb(&l);
	CHECK(sb != NULL);
	struct cat_hdr_disk *c = lp_cat_cur(&l, sb);
	CHECK(c != NULL);
	int copy = (int)(((uint8_t *)c - l.b - sb->cat_off) / sb->cat_size);
	((uint8_t *)c)[CAT_HDR + 20] ^= 0x01; /* the checksum fails */
	CHECK_OK(lp_store(&l, t_path(log)));
	lp_free(&l);
	return copy;
}

static void reregistered(const char *cmd)
{
	struct atomio_options o = t_opts(1 << 20);
	char err[1024];
	atomio *st;
	CHECK_OK(atomio_open(t_path("r.log"), &o, &st));
	CHECK(atomio_file_open(st, t_path("r"), O_CREAT, 0644) >= 0);
	CHECK_OK(atomio_close(st));
	/* r replaced: the next session records its new identity */
	CHECK_OK(rename(t_path("r"), t_path("r.old")));
	int fd = open(t_path("r"), O_CREAT | O_EXCL | O_WRONLY, 0644);
	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ(lp_crash_child(resession, NULL), 0);
	int copy = damage_cat("r.log");

	o.flags = 0;
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	err[0] = 0;
	int r = atomio_open(t_path("r.log"), &o, &st);
	fprintf(stderr, "re-registration, open: %s: %s\n", atomio_strerror(r), err);
	CHECK_EQ(r, ATOMIO_EIDENTITY);
	char want[64];
	snprintf(want, sizeof(want), "catalog copy %d fails its checksum", copy);
	CHECK(strstr(err, want) != NULL);
	if (access(cmd, X_OK) == 0) {
		char line[8192];
		snprintf(line, sizeof(line), "%s dump %s > %s 2>&1", cmd, t_path("r.log"), t_path("out"));
		int rc = system(line);
		CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
		snprintf(line, sizeof(line), "grep -q 'recovery    would fail: .*catalog copy %d fails' %s",
			 copy, t_path("out"));
		CHECK_EQ(system(line), 0);
	}
	/* the file at the path is the right one: forced, the group replays */
	o.flags = ATOMIO_FORCE_PATHS;
	CHECK_OK(atomio_open(t_path("r.log"), &o, &st));
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.groups_recovered, 1);
	CHECK_OK(atomio_close(st));
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
	reregistered(cmd);
	printf("ok: the damaged catalog copy is named\n");
	return 0;
}
