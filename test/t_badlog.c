/* Bad logs: foreign files, zeros, another format version, damaged
 * superblocks and catalog, and records that pass their checksum but say
 * something impossible.  atomio_open answers with the documented error and
 * writes nothing into any data file. */
#include <sys/wait.h>

#include "format.h"
#include "model.h"

static uint8_t *load(const char *p, size_t *n) { return t_slurp(p, n); }

static void store(const char *p, const uint8_t *b, size_t n)
{
	int fd = open(p, O_WRONLY | O_TRUNC | O_CREAT, 0600);
	CHECK(fd >= 0 && write(fd, b, n) == (ssize_t)n);
	close(fd);
}

static int try_open(const char *log)
{
	atomio *st;
	char err[512] = "";
	struct atomio_options o = {.errbuf = err, .errbuf_size = sizeof(err)};
	int r = atomio_open(log, &o, &st);
	if (r == 0)
		CHECK_OK(atomio_close(st));
	else
		printf("open: %d (%s): %s\n", r, atomio_strerror(r), err);
	return r;
}

/* A log with one committed, not yet checkpointed group over file "f". */
static void make_log(void)
{
	t_unlink_log(t_path("log")); /* the last make_log's child ended with it open */
	unlink(t_path("f"));
	pid_t p = fork();
	if (p == 0) {
		struct atomio_options o = t_opts(65536);
		o.flags |= ATOMIO_NO_BG_CHECKPOINT; /* the parent wipes the file */
		atomio *st;
		CHECK_OK(atomio_open(t_path("log"), &o, &st));
		int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
		CHECK_EQ(atomio_pwrite(st, f, "committed", 9, 0), 9);
		_exit(0);
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	t_wipe(t_path("f"));
}

static struct sb_disk cur_sb(const uint8_t *b)
{
	struct sb_disk s0, s1;
	memcpy(&s0, b, sizeof(s0));
	memcpy(&s1, b + SB_SLOT, sizeof(s1));
	return s0.generation > s1.generation ? s0 : s1;
}

/* Change the first record's first descriptor and re-seal its checksum. */
static void forge(void (*edit)(struct seg_disk *))
{
	make_log();
	size_t n;
	uint8_t *b = load(t_path("log"), &n);
	struct sb_disk sb = cur_sb(b);
	uint8_t *rec = b + sb.area_off + sb.head_off;
	struct rec_hdr_disk h;
	memcpy(&h, rec, sizeof(h));
	CHECK_EQ(h.magic, REC_MAGIC);
	struct seg_disk d;
	memcpy(&d, rec + REC_HDR, sizeof(d));
	edit(&d);
	memcpy(rec + REC_HDR, &d, sizeof(d));
	h.csum = fmt_csum(rec, h.rec_len, sb.store_id, offsetof(struct rec_hdr_disk, csum));
	memcpy(rec, &h, sizeof(h));
	store(t_path("log"), b, n);
	free(b);
}

static void ed_file(struct seg_disk *d) { d->file = 7; }
static void ed_far(struct seg_disk *d) { d->off = (1ull << 62) + 5; }
static void ed_kind(struct seg_disk *d) { d->kind = 9; }
static void ed_dataoff(struct seg_disk *d) { d->data_off = 1ull << 40; }

int main(void)
{
	t_dir();
	size_t n;
	/* not a log */
	store(t_path("log"), (const uint8_t *)"hello world", 11);
	CHECK_EQ(try_open(t_path("log")), ATOMIO_ENOTLOG);
	uint8_t *z = calloc(1, 1 << 20);
	store(t_path("log"), z, 1 << 20);
	CHECK_EQ(try_open(t_path("log")), ATOMIO_ENOTLOG);
	for (size_t i = 0; i < (1 << 20); i++)
		z[i] = (uint8_t)rand();
	store(t_path("log"), z, 1 << 20);
	CHECK_EQ(try_open(t_path("log")), ATOMIO_ENOTLOG);
	store(t_path("log"), z, 0);
	CHECK_EQ(try_open(t_path("log")), ATOMIO_ENOTLOG);

	/* a sound log replays its group */
	make_log();
	CHECK_OK(try_open(t_path("log")));
	uint8_t *d = load(t_path("f"), &n);
	CHECK(n == 9 && !memcmp(d, "committed", 9));
	free(d);

	/* one damaged superblock slot: the other one serves */
	make_log();
	uint8_t *b = load(t_path("log"), &n);
	struct sb_disk sb = cur_sb(b);
	b[(sb.generation % 2) * SB_SLOT + 40] ^= 1;
	store(t_path("log"), b, n);
	free(b);
	int r = try_open(t_path("log"));
	CHECK_OK(r);

	/* both damaged: corrupt, nothing replayed */
	make_log();
	b = load(t_path("log"), &n);
	b[40] ^= 1;
	b[SB_SLOT + 40] ^= 1;
	store(t_path("log"), b, n);
	CHECK_EQ(try_open(t_path("log")), ATOMIO_ECORRUPT);
	free(b);
	d = load(t_path("f"), &n);
	CHECK_EQ(n, 0);
	free(d);

	/* another format version (checksum right): a later one, and 0 */
	for (int v = 0; v < 2; v++) {
		make_log();
		b = load(t_path("log"), &n);
		for (int s = 0; s < 2; s++) {
			struct sb_disk x;
			memcpy(&x, b + s * SB_SLOT, sizeof(x));
			x.version = v ? FMT_VERSION + 1 : 0;
			x.csum = fmt_csum(&x, SB_SIZE, SB_SEED, SB_CSUM_OFF);
			memcpy(b + s * SB_SLOT, &x, sizeof(x));
		}
		store(t_path("log"), b, n);
		free(b);
		CHECK_EQ(try_open(t_path("log")), ATOMIO_EVERSION);
	}

	/* both slots at the generation limit (checksum right): their successor
	 * could wrap to 0, so recovery refuses them -- and atomio dump, which
	 * checks with the library's own rules (codec.c), says the same */
	make_log();
	b = load(t_path("log"), &n);
	for (int s = 0; s < 2; s++) {
		struct sb_disk x;
		memcpy(&x, b + s * SB_SLOT, sizeof(x));
		x.generation = MAX_GENERATION + (uint64_t)s;
		x.csum = fmt_csum(&x, SB_SIZE, SB_SEED, SB_CSUM_OFF);
		memcpy(b + s * SB_SLOT, &x, sizeof(x));
	}
	store(t_path("log"), b, n);
	free(b);
	CHECK_EQ(try_open(t_path("log")), ATOMIO_ECORRUPT);
	if (access("build/atomio", X_OK) == 0) {
		char cmd[8192];
		snprintf(cmd, sizeof(cmd), "build/atomio dump %s | grep -q 'generation at the limit'",
			 t_path("log"));
		CHECK_EQ(system(cmd), 0);
		snprintf(cmd, sizeof(cmd), "build/atomio dump %s > /dev/null", t_path("log"));
		int ws = system(cmd);
		CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 1); /* damaged: recovery would refuse it */
	} else {
		printf("(no build/atomio: the dump's verdict is not checked)\n");
	}

	/* truncated log: geometry no longer fits the file */
	make_log();
	CHECK_OK(truncate(t_path("log"), 20000));
	CHECK_EQ(try_open(t_path("log")), ATOMIO_ECORRUPT);

	/* catalog damaged in both copies */
	make_log();
	b = load(t_path("log"), &n);
	sb = cur_sb(b);
	b[sb.cat_off + 20] ^= 0xff; /* generation: inside every copy's checksum */
	b[sb.cat_off + sb.cat_size + 20] ^= 0xff;
	store(t_path("log"), b, n);
	free(b);
	CHECK_EQ(try_open(t_path("log")), ATOMIO_ECORRUPT);

	/* a catalog in the first entry layout (32-byte entry headers, no birth
	 * time, entry_hdr 0) is still read, and its group replayed */
	make_log();
	b = load(t_path("log"), &n);
	sb = cur_sb(b);
	for (int cp = 0; cp < 2; cp++) {
		uint8_t *c = b + sb.cat_off + (uint64_t)cp * sb.cat_size;
		struct cat_hdr_disk ch;
		memcpy(&ch, c, sizeof(ch));
		if (ch.magic != CAT_MAGIC || ch.count == 0)
			continue;
		CHECK_EQ(ch.entry_hdr, CAT_ENTRY_HDR);
		uint8_t *out = calloc(1, ch.used), *o = out + CAT_HDR;
		uint64_t pos = CAT_HDR;
		for (uint32_t i = 0; i < ch.count; i++) {
			struct cat_entry_disk e;
			memcpy(&e, c + pos, sizeof(e));
			memcpy(o, &e, CAT_ENTRY_HDR_V1);
			memcpy(o + CAT_ENTRY_HDR_V1, c + pos + CAT_ENTRY_HDR, e.path_len);
			o += align_up(CAT_ENTRY_HDR_V1 + e.path_len, 8);
			pos += align_up(CAT_ENTRY_HDR + e.path_len, 8);
		}
		ch.entry_hdr = 0;
		ch.used = (uint64_t)(o - out);
		memcpy(out, &ch, sizeof(ch));
		ch.csum = fmt_csum(out, ch.used, sb.store_id, offsetof(struct cat_hdr_disk, csum));
		memcpy(out, &ch, sizeof(ch));
		memset(c, 0, sb.cat_size);
		memcpy(c, out, ch.used);
		free(out);
	}
	store(t_path("log"), b, n);
	free(b);
	CHECK_OK(try_open(t_path("log")));
	d = load(t_path("f"), &n);
	CHECK(n == 9 && !memcmp(d, "committed", 9));
	free(d);

	/* a torn record (checksum wrong) is the end of the log, not an error */
	make_log();
	b = load(t_path("log"), &n);
	sb = cur_sb(b);
	b[sb.area_off + sb.head_off + REC_HDR + REC_DESC + 2] ^= 1;
	store(t_path("log"), b, n);
	free(b);
	CHECK_OK(try_open(t_path("log")));
	d = load(t_path("f"), &n);
	CHECK_EQ(n, 0); /* nothing replayed */
	free(d);

	/* checksummed records that make no sense: refused, nothing written */
	void (*edits[])(struct seg_disk *) = {ed_file, ed_far, ed_kind, ed_dataoff};
	for (unsigned i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		forge(edits[i]);
		CHECK_EQ(try_open(t_path("log")), ATOMIO_ECORRUPT);
		d = load(t_path("f"), &n);
		CHECK_EQ(n, 0);
		free(d);
	}
	free(z);
	return 0;
}
