/* Compressed log records (issue 7): the writer compresses only what gets
 * shorter, recovery replays compressed and raw records alike (mixed in one
 * log, several ranges and size changes per group), a version 1 log is read
 * and upgraded, and recovery refuses hostile compressed records -- a raw_len
 * past COMP_MAX or one the data does not decompress to -- without writing
 * anything or allocating by what the record claims. */
#include <stdbool.h>
#include <sys/wait.h>

#include "format.h"
#include "model.h"
#include "support/logpatch.h"

#define NGROUPS 24
#define SPAN (256u * 1024u)

/* Page bytes: random, then in every 512 bytes the last pct% zeros. */
static void fill_comp(uint8_t *b, size_t len, uint32_t tag, uint64_t off, int pct)
{
	t_fill(b, len, tag, off);
	size_t z = 512 * (size_t)pct / 100;
	for (size_t i = 0; i < len; i++)
		if ((off + i) % 512 >= 512 - z)
			b[i] = 0;
}

struct gspec {
	int nr;
	uint64_t off[3], len[3];
	int pct;
	bool trunc;
	uint64_t size;
};

static void spec(int g, struct gspec *s)
{
	memset(s, 0, sizeof(*s));
	s->nr = 1 + g % 3;
	s->pct = g % 4 == 0 ? 0 : g % 4 == 1 ? 50 : g % 4 == 2 ? 75 : 99;
	for (int i = 0; i < s->nr; i++) {
		s->off[i] = (uint64_t)((g * 7919 + i * 104729) % (SPAN / 512)) * 512;
		s->len[i] = 512 * (1 + (uint64_t)((g * 31 + i * 17) % 40));
	}
	s->trunc = g % 7 == 5;
	s->size = SPAN + 4096 * (uint64_t)g;
}

static void apply_model(struct mfile *m, int g)
{
	struct gspec s;
	spec(g, &s);
	for (int i = 0; i < s.nr; i++) {
		uint8_t *b = malloc(s.len[i]);
		fill_comp(b, s.len[i], (uint32_t)(g * 10 + i), s.off[i], s.pct);
		m_write(m, b, s.len[i], s.off[i]);
		free(b);
	}
	if (s.trunc)
		m_setsize(m, s.size);
}

static int commit_group(atomio *st, int f, int g)
{
	struct gspec s;
	spec(g, &s);
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	for (int i = 0; i < s.nr; i++) {
		uint8_t *b = malloc(s.len[i]);
		fill_comp(b, s.len[i], (uint32_t)(g * 10 + i), s.off[i], s.pct);
		CHECK_OK(atomio_tx_write(tx, f, b, s.len[i], (off_t)s.off[i]));
		free(b);
	}
	if (s.trunc)
		CHECK_OK(atomio_tx_truncate(tx, f, (off_t)s.size));
	return atomio_tx_commit(tx);
}

static uint32_t child_flags;

/* Commit NGROUPS groups and "crash" (exit without closing). */
static void child(void *arg)
{
	(void)arg;
	struct atomio_options o = t_opts(4u << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT | child_flags; /* the parent wipes the file */
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
	CHECK(f >= 0);
	for (int g = 0; g < NGROUPS; g++)
		CHECK_OK(commit_group(st, f, g));
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	if (child_flags & ATOMIO_NO_COMPRESS)
		CHECK_EQ(s.records_compressed, 0);
	else
		CHECK(s.records_compressed > 0 && s.records_compressed < NGROUPS);
	CHECK_EQ(s.commits, NGROUPS);
}

static void make_log(uint32_t flags)
{
	unlink(t_path("log"));
	unlink(t_path("f"));
	child_flags = flags;
	CHECK_EQ(lp_crash_child(child, NULL), 0);
	t_wipe(t_path("f"));
}

static int open_log(atomio **st)
{
	char err[512] = "";
	struct atomio_options o = {.errbuf = err, .errbuf_size = sizeof(err)};
	int r = atomio_open(t_path("log"), &o, st);
	if (r < 0)
		printf("open: %s: %s\n", atomio_strerror(r), err);
	return r;
}

static void expect_all_replayed(void)
{
	struct mfile m = {0};
	for (int g = 0; g < NGROUPS; g++)
		apply_model(&m, g);
	atomio *st;
	CHECK_OK(open_log(&st));
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.groups_recovered, NGROUPS);
	CHECK_OK(atomio_close(st));
	CHECK_OK(m_compare(&m, t_path("f"), 0));
	free(m.b);
}

/* The first record with the LZ4 flag, or UINT64_MAX. */
static uint64_t first_lz4(const struct lp *l, const struct sb_disk *sb)
{
	uint64_t pos = sb->head_off;
	for (unsigned i = 0; i < NGROUPS; i++) {
		struct rec_hdr_disk *h = lp_rec(l, sb, pos);
		CHECK(h && h->magic == REC_MAGIC);
		if (h->flags & REC_F_LZ4)
			return pos;
		pos = lp_rec_next(sb, h, pos);
	}
	return UINT64_MAX;
}

/* Edit the first compressed record with fn, re-seal it, and open: expect
 * result, and the data file untouched (empty) when refused. */
static void hostile(const char *what, void (*fn)(struct rec_hdr_disk *), int result, bool sb_v1)
{
	make_log(0);
	struct lp l;
	CHECK_OK(lp_load(&l, t_path("log")));
	struct sb_disk *sb = lp_sb(&l);
	CHECK(sb);
	uint64_t pos = first_lz4(&l, sb);
	CHECK(pos != UINT64_MAX);
	struct rec_hdr_disk *h = lp_rec(&l, sb, pos);
	fn(h);
	CHECK_OK(lp_rec_seal(&l, sb, pos));
	if (sb_v1)
		for (int s = 0; s < 2; s++) {
			struct sb_disk *x = lp_slot(&l, s);
			x->version = 1;
			lp_sb_seal(x);
		}
	CHECK_OK(lp_store(&l, t_path("log")));
	lp_free(&l);
	atomio *st;
	int r = open_log(&st);
	printf("%-52s -> %s\n", what, r < 0 ? atomio_strerror(r) : "opened");
	if (result == 0) {
		CHECK_OK(r);
		struct atomio_stats s;
		CHECK_OK(atomio_stats(st, &s));
		CHECK_EQ(s.groups_recovered, NGROUPS);
		CHECK_OK(atomio_close(st));
	} else if (result == 1) {
		/* the record is not a valid one: the log ends before it */
		CHECK_OK(r);
		struct atomio_stats s;
		CHECK_OK(atomio_stats(st, &s));
		CHECK(s.groups_recovered < NGROUPS);
		CHECK_OK(atomio_close(st));
	} else {
		CHECK_EQ(r, result);
		size_t n;
		uint8_t *d = t_slurp(t_path("f"), &n);
		CHECK_EQ(n, 0); /* nothing replayed */
		free(d);
	}
}

static void raw_huge(struct rec_hdr_disk *h) { h->raw_len = 1ull << 62; }
static void raw_over(struct rec_hdr_disk *h) { h->raw_len = COMP_MAX + 1; }
static void raw_plus(struct rec_hdr_disk *h) { h->raw_len += 1; }
static void raw_minus(struct rec_hdr_disk *h) { h->raw_len -= 1; }
static void raw_eq(struct rec_hdr_disk *h) { h->raw_len = h->data_len; }
static void nothing(struct rec_hdr_disk *h) { (void)h; }

int main(void)
{
	t_dir();

	/* Mixed compressed and raw records, replayed after a crash. */
	make_log(0);
	{
		struct lp l;
		CHECK_OK(lp_load(&l, t_path("log")));
		struct sb_disk *sb = lp_sb(&l);
		CHECK_EQ(sb->version, FMT_VERSION);
		unsigned lz4 = 0, raw = 0;
		uint64_t pos = sb->head_off;
		for (unsigned i = 0; i < NGROUPS; i++) {
			struct rec_hdr_disk *h = lp_rec(&l, sb, pos);
			CHECK(h && h->magic == REC_MAGIC);
			if (h->flags & REC_F_LZ4) {
				CHECK(h->data_len < h->raw_len && h->raw_len <= COMP_MAX);
				lz4++;
			} else {
				CHECK_EQ(h->data_len, h->raw_len);
				raw++;
			}
			pos = lp_rec_next(sb, h, pos);
		}
		printf("%u compressed and %u raw records\n", lz4, raw);
		CHECK(lz4 > 0 && raw > 0);
		lp_free(&l);
	}
	expect_all_replayed();

	/* ATOMIO_NO_COMPRESS: raw records only, replayed the same. */
	make_log(ATOMIO_NO_COMPRESS);
	expect_all_replayed();

	/* A version 1 log (raw records) is read, and upgraded at open. */
	make_log(ATOMIO_NO_COMPRESS);
	{
		struct lp l;
		CHECK_OK(lp_load(&l, t_path("log")));
		for (int s = 0; s < 2; s++) {
			struct sb_disk *x = lp_slot(&l, s);
			x->version = 1;
			lp_sb_seal(x);
		}
		CHECK_OK(lp_store(&l, t_path("log")));
		lp_free(&l);
	}
	expect_all_replayed();
	{
		struct lp l;
		CHECK_OK(lp_load(&l, t_path("log")));
		CHECK_EQ(lp_sb(&l)->version, FMT_VERSION);
		lp_free(&l);
	}

	/* Hostile compressed records (re-sealed, so only the checks stand). */
	hostile("unchanged (control)", nothing, 0, false);
	hostile("raw_len 2^62", raw_huge, 1, false);
	hostile("raw_len COMP_MAX + 1", raw_over, 1, false);
	hostile("raw_len = data_len with the LZ4 flag", raw_eq, 1, false);
	hostile("raw_len one more than the data gives", raw_plus, ATOMIO_ECORRUPT, false);
	hostile("raw_len one less than the data gives", raw_minus, ATOMIO_ECORRUPT, false);
	hostile("a compressed record in a version 1 log", nothing, 1, true);

	/* Incompressible data costs no more log than before: same bytes. */
	for (int pass = 0; pass < 2; pass++) {
		unlink(t_path("log"));
		unlink(t_path("g"));
		struct atomio_options o = t_opts(4u << 20);
		o.flags |= pass ? ATOMIO_NO_COMPRESS : 0;
		atomio *st;
		CHECK_OK(atomio_open(t_path("log"), &o, &st));
		int f = atomio_file_open(st, t_path("g"), O_CREAT, 0644);
		uint8_t page[16384];
		static uint64_t logged[2];
		for (int i = 0; i < 20; i++) {
			t_fill(page, sizeof(page), (uint32_t)i, 0);
			CHECK_EQ(atomio_pwrite(st, f, page, sizeof(page), (off_t)i * 16384), 16384);
		}
		struct atomio_stats s;
		CHECK_OK(atomio_stats(st, &s));
		CHECK_EQ(s.records_compressed, 0);
		CHECK_EQ(s.bytes_raw, 20u * 16384);
		logged[pass] = s.bytes_logged;
		if (pass)
			CHECK_EQ(logged[0], logged[1]);
		/* 75% compressible pages: three 4 KiB blocks fewer each */
		for (int i = 0; i < 20; i++) {
			fill_comp(page, sizeof(page), (uint32_t)i, 0, 75);
			CHECK_EQ(atomio_pwrite(st, f, page, sizeof(page), (off_t)i * 16384), 16384);
		}
		CHECK_OK(atomio_stats(st, &s));
		if (!pass) {
			CHECK_EQ(s.records_compressed, 20);
			printf("20 pages 75%% compressible: %llu log bytes (incompressible: %llu)\n",
			       (unsigned long long)(s.bytes_logged - logged[0]),
			       (unsigned long long)logged[0]);
			CHECK(s.bytes_logged - logged[0] < logged[0] / 2);
		}
		/* A database page's layout: records at both ends, free space
		 * (zeros) between.  The sample that spares incompressible pages
		 * the full LZ4 attempt (codec.c) must still find it. */
		uint64_t before = s.records_compressed;
		for (int i = 0; i < 20; i++) {
			t_fill(page, sizeof(page), (uint32_t)(100 + i), 0);
			memset(page + 6144, 0, sizeof(page) - 2 * 6144);
			CHECK_EQ(atomio_pwrite(st, f, page, sizeof(page), (off_t)i * 16384), 16384);
		}
		CHECK_OK(atomio_stats(st, &s));
		CHECK_EQ(s.records_compressed - before, pass ? 0u : 20u);
		CHECK_OK(atomio_close(st));
	}
	return 0;
}
