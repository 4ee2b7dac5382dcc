/* One damaged superblock slot never loses an acknowledged group silently
 * (issue 12, item 2).
 *
 * A store is closed once (both slots written), then a crashed session leaves
 * NG acknowledged groups in the log: the slot written at that open (epoch E)
 * is current, the other one is older (epoch E-1).  With one byte of the
 * current slot flipped -- at each of several checksummed offsets -- opening
 * must either replay all NG groups (recover exactly) or refuse with
 * ATOMIO_ECORRUPT and a message naming the damaged slot.  It used to return 0,
 * replay nothing, and reuse epoch E, so that the dropped records became valid
 * again and a later recovery replayed them over a newer acknowledged group:
 * that second stage is checked too.  A flipped byte in the older slot changes
 * nothing.  atomio dump must not call such a log sound. */
#include <sys/wait.h>

#include <stdbool.h>
#include <stddef.h>

#include "support/logpatch.h"
#include "t.h"

#define NG 20
#define BS 4096

static char val(int g, int i) { return (char)('A' + (g * 7 + i) % 26); }

static void put(atomio *st, int id, int g)
{
	char b[BS];
	memset(b, val(g, 0), BS);
	/* block 0 carries the newest group; block g is group g's own */
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, id, b, BS, 0));
	memset(b, val(g, 1), BS);
	CHECK_OK(atomio_tx_write(tx, id, b, BS, (off_t)g * BS));
	CHECK_OK(atomio_tx_commit(tx));
}

static atomio *open_st(uint32_t flags, char *err, size_t n, int *r)
{
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= flags | ATOMIO_NO_BG_CHECKPOINT;
	o.errbuf = err;
	o.errbuf_size = n;
	atomio *st = NULL;
	*r = atomio_open(t_path("s.log"), &o, &st);
	return st;
}

static void crashed_session(void *arg)
{
	int first = *(int *)arg, r;
	char err[256];
	atomio *st = open_st(0, err, sizeof(err), &r);
	CHECK_OK(r);
	int id = atomio_file_open(st, t_path("d"), 0, 0);
	CHECK(id >= 0);
	for (int g = first; g < first + NG; g++)
		put(st, id, g);
	/* _exit: no checkpoint, every group stays live */
}

static char block0(void)
{
	int fd = open(t_path("d"), O_RDONLY);
	CHECK(fd >= 0);
	char c = 0;
	CHECK_EQ(pread(fd, &c, 1, 0), 1);
	close(fd);
	return c;
}

static int dump_rc(void)
{
	static const char *cmd;
	if (!cmd)
		cmd = getenv("T_ATOMIO");
	char line[8192];
	snprintf(line, sizeof(line), "%s dump %s >/dev/null 2>&1", cmd, t_path("s.log"));
	int rc = system(line);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int main(int argc, char **argv)
{
	(void)argc;
	setenv("T_ATOMIO", strstr(argv[0], "/san/") ? "build/san/atomio" : "build/atomio", 0);
	bool have_dump = access(getenv("T_ATOMIO"), X_OK) == 0;
	char err[512];
	int r;
	atomio *st = open_st(ATOMIO_CREATE, err, sizeof(err), &r);
	CHECK_OK(r);
	int id = atomio_file_open(st, t_path("d"), O_CREAT, 0644);
	CHECK(id >= 0);
	put(st, id, 0);
	CHECK_OK(atomio_close(st));
	int first = 1;
	CHECK_EQ(lp_crash_child(crashed_session, &first), 0);

	struct lp img, data;
	CHECK_OK(lp_load(&img, t_path("s.log")));
	CHECK_OK(lp_load(&data, t_path("d")));
	struct sb_disk *cur = lp_sb(&img);
	CHECK(cur != NULL);
	int cs = (int)(((uint8_t *)cur - img.b) / SB_SLOT);
	fprintf(stderr, "current slot %d: generation %llu, epoch %llu\n", cs,
		(unsigned long long)cur->generation, (unsigned long long)cur->epoch);

	static const unsigned offs[] = {16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 248};
	unsigned exact = 0, refused = 0;
	for (unsigned k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
		struct lp l;
		CHECK_OK(lp_load(&l, t_path("s.log")));
		memcpy(l.b, img.b, img.n);
		l.b[(size_t)cs * SB_SLOT + offs[k]] ^= 0x10;
		CHECK_OK(lp_store(&l, t_path("s.log")));
		lp_free(&l);
		CHECK_OK(lp_store(&data, t_path("d")));
		if (have_dump && k == 0)
			CHECK_EQ(dump_rc(), 1); /* not "sound" */
		err[0] = 0;
		st = open_st(0, err, sizeof(err), &r);
		if (r < 0) {
			fprintf(stderr, "byte %u of slot %d flipped: refused: %s\n", offs[k], cs, err);
			CHECK_EQ(r, ATOMIO_ECORRUPT);
			char want[32];
			snprintf(want, sizeof(want), "superblock slot %d", cs);
			CHECK(strstr(err, want) != NULL);
			refused++;
			continue;
		}
		struct atomio_stats s;
		CHECK_OK(atomio_stats(st, &s));
		fprintf(stderr, "byte %u of slot %d flipped: opened, %llu groups replayed\n", offs[k], cs,
			(unsigned long long)s.groups_recovered);
		CHECK_EQ(s.groups_recovered, NG);
		CHECK_EQ(block0(), val(NG, 0)); /* the newest group */
		/* a newer acknowledged group, a crash, a recovery: still the newest */
		CHECK_OK(atomio_close(st));
		first = 100;
		CHECK_EQ(lp_crash_child(crashed_session, &first), 0);
		st = open_st(0, err, sizeof(err), &r);
		CHECK_OK(r);
		CHECK_OK(atomio_close(st));
		CHECK_EQ(block0(), val(100 + NG - 1, 0));
		exact++;
	}
	fprintf(stderr, "%u recovered exactly, %u refused naming the slot\n", exact, refused);

	/* the older slot damaged: the current one stands, everything replays */
	CHECK_OK(lp_store(&data, t_path("d")));
	img.b[(size_t)(1 - cs) * SB_SLOT + 40] ^= 0x10;
	CHECK_OK(lp_store(&img, t_path("s.log")));
	st = open_st(0, err, sizeof(err), &r);
	CHECK_OK(r);
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.groups_recovered, NG);
	CHECK_OK(atomio_close(st));
	CHECK_EQ(block0(), val(NG, 0));
	lp_free(&img);
	lp_free(&data);
	printf("ok: a damaged superblock slot loses no acknowledged group silently\n");
	return 0;
}
