/* Valid records after the stop point (issue 12, item 10).  One corrupted
 * byte in record 10 of 20 ends the valid log there, although records 11-20
 * of the same epoch follow, valid.  A torn write that was in flight at a
 * crash leaves the same picture (later writes may have completed), so
 * recovery cannot tell damage from a torn tail and keeps the torn-tail rule
 * (replays 1-9), but it no longer does so silently: atomio_open fills the
 * error buffer with a line naming the stop point and the valid records
 * after it, and atomio_stats().records_beyond_tail counts them; atomio dump
 * reports them and exits 1.  The same when the damaged byte is in record
 * 10's header -- its magic, its epoch, its seq made lower -- so that the
 * header no longer says it was due: the records after it do (they were
 * dropped silently, dump exit 0).  A plain torn tail (the last record) stays
 * silent: nothing valid follows it. */
#include <stdbool.h>
#include <stddef.h>
#include <sys/wait.h>

#include "support/logpatch.h"
#include "t.h"

#define NG 20

static void session(void *arg)
{
	(void)arg;
	struct atomio_options o = {0};
	o.flags = ATOMIO_NO_BG_CHECKPOINT | ATOMIO_NO_COMPRESS;
	atomio *st;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	int id = atomio_file_open(st, t_path("d"), 0, 0);
	CHECK(id >= 0);
	char buf[4096];
	for (int g = 1; g <= NG; g++) {
		memset(buf, 'a' + g, sizeof(buf));
		CHECK_EQ(atomio_pwrite(st, id, buf, sizeof(buf), (off_t)g * 4096), (ssize_t)sizeof(buf));
	}
}

/* Flip bits (mask) of the byte at offset off of the n-th live record
 * (1-based); mask 0: the lowest set bit of that byte. */
static void damage(int n, size_t off, uint8_t mask)
{
	struct lp l;
	CHECK_OK(lp_load(&l, t_path("s.log")));
	struct sb_disk *sb = lp_sb(&l);
	CHECK(sb != NULL);
	uint64_t pos = sb->head_off;
	for (int i = 1; i < n; i++) {
		struct rec_hdr_disk *h = lp_rec(&l, sb, pos);
		CHECK(h && h->magic == REC_MAGIC);
		pos = lp_rec_next(sb, h, pos);
	}
	struct rec_hdr_disk *h = lp_rec(&l, sb, pos);
	CHECK(h && h->magic == REC_MAGIC && h->rec_len > REC_HDR + REC_DESC + 100);
	uint8_t *b = &l.b[sb->area_off + pos + off];
	CHECK(mask || *b);
	*b ^= mask ? mask : (uint8_t)(*b & -*b);
	CHECK_OK(lp_store(&l, t_path("s.log")));
	lp_free(&l);
}

static int dump(const char *cmd)
{
	char line[8192];
	snprintf(line, sizeof(line), "%s dump %s > %s 2>&1", cmd, t_path("s.log"), t_path("out"));
	int rc = system(line);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int main(int argc, char **argv)
{
	(void)argc;
	const char *cmd = strstr(argv[0], "/san/") ? "build/san/atomio" : "build/atomio";
	bool have_dump = access(cmd, X_OK) == 0;
	char err[512];
	struct atomio_options o = t_opts(1 << 20);
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	atomio *st;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	CHECK(atomio_file_open(st, t_path("d"), O_CREAT, 0644) >= 0);
	CHECK_OK(atomio_close(st));
	o.flags = 0;

	/* damage in the middle: a data byte, then header bytes (the seq's
	 * lowest set bit cleared: it reads as an earlier lap's record) */
	static const struct {
		const char *what;
		size_t off;
		uint8_t mask;
	} dm[] = {
		{"a data byte", REC_HDR + REC_DESC + 100, 0x40},
		{"the magic", offsetof(struct rec_hdr_disk, magic), 0x40},
		{"the epoch", offsetof(struct rec_hdr_disk, epoch), 0x40},
		{"the seq, made lower,", offsetof(struct rec_hdr_disk, seq), 0},
	};
	struct atomio_stats s;
	for (size_t k = 0; k < sizeof(dm) / sizeof(dm[0]); k++) {
		CHECK_EQ(lp_crash_child(session, NULL), 0);
		damage(10, dm[k].off, dm[k].mask);
		fprintf(stderr, "record 10 of %d, %s damaged\n", NG, dm[k].what);
		if (have_dump) {
			CHECK_EQ(dump(cmd), 1);
			char line[8192];
			snprintf(line, sizeof(line), "grep -q '10 valid records' %s", t_path("out"));
			CHECK_EQ(system(line), 0);
		}
		err[0] = 0;
		CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
		fprintf(stderr, "open: %s\n", err);
		CHECK_OK(atomio_stats(st, &s));
		CHECK_EQ(s.groups_recovered, 9);
		CHECK_EQ(s.records_beyond_tail, NG - 10);
		CHECK(strstr(err, "seq") != NULL && strstr(err, "10 valid records") != NULL);
		CHECK_OK(atomio_close(st));
	}

	/* a torn last record: the normal end, silent */
	CHECK_EQ(lp_crash_child(session, NULL), 0);
	damage(NG, REC_HDR + REC_DESC + 100, 0x40);
	if (have_dump)
		CHECK_EQ(dump(cmd), 0);
	err[0] = 0;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.groups_recovered, NG - 1);
	CHECK_EQ(s.records_beyond_tail, 0);
	CHECK_EQ(err[0], 0);
	CHECK_OK(atomio_close(st));
	printf("ok: valid records after the stop point are reported\n");
	return 0;
}
