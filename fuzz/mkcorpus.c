/*
 * mkcorpus.c: write the seed corpus of fuzz_recover (fuzz/corpus/).
 *
 * Each seed is a real log written by the library -- stores created, files
 * registered (a, b, c, sub/d below the log's directory, as in the fuzz
 * sandbox), groups committed, then a crash (the process exits without
 * closing) -- made compact: catalogs of 4096 bytes, 512-byte log blocks, the
 * records laid again from the area's start, trailing zeros dropped (the
 * harness pads to the declared geometry), and one control byte appended.
 * Run by `make fuzz-corpus`; the files it writes are checked in.
 */
#include <pthread.h>

#include "workload.h"
#include "support/logpatch.h"

#define BLOCK 512u
#define CAT_SIZE 4096u

static const char *outdir;
static int nseeds;

static void child_empty(void *arg)
{
	(void)arg;
	struct atomio_options o = t_opts(65536);
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
}

static void child_one(void *arg)
{
	(void)arg;
	struct atomio_options o = t_opts(65536);
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int a = atomio_file_open(st, t_path("a"), O_CREAT, 0644);
	CHECK_EQ(atomio_pwrite(st, a, "hello, atomio", 13, 4090), 13);
}

/* Random groups over nfiles (the workload generator of the crash tests). */
static void groups(atomio *st, const int *ids, int nfiles, uint64_t seed, int n, size_t maxb)
{
	for (int g = 0; g < n; g++) {
		struct wgroup wg;
		w_group(seed, g, nfiles, maxb, &wg);
		atomio_tx *tx;
		CHECK_OK(atomio_tx_begin(st, &tx));
		CHECK_OK(w_build(&wg, tx, ids));
		if (wg.abort)
			atomio_tx_abort(tx);
		else
			CHECK_OK(atomio_tx_commit(tx));
	}
}

static void child_groups(void *arg)
{
	int nfiles = *(int *)arg;
	static const char *names[] = {"a", "b", "c", "sub/d"};
	struct atomio_options o = t_opts(65536);
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int ids[4];
	for (int i = 0; i < nfiles; i++)
		ids[i] = atomio_file_open(st, t_path(names[i]), O_CREAT, 0644);
	groups(st, ids, nfiles, 1000 + (uint64_t)nfiles, nfiles == 4 ? 4 : 6, 1500);
}

/* Checkpoint, close, reopen, more groups: epoch, seq and catalog generation
 * past their first values. */
static void child_later(void *arg)
{
	(void)arg;
	struct atomio_options o = t_opts(65536);
	atomio *st;
	int ids[2];
	for (int round = 0; round < 2; round++) {
		CHECK_OK(atomio_open(t_path("log"), &o, &st));
		ids[0] = atomio_file_open(st, t_path("a"), O_CREAT, 0644);
		ids[1] = atomio_file_open(st, t_path("b"), O_CREAT, 0644);
		groups(st, ids, 2, 77 + (uint64_t)round, 3, 1000);
		if (round == 0)
			CHECK_OK(atomio_close(st));
	}
}

static atomio *tstore;
static int tfile;
static void *thread_main(void *arg)
{
	long t = (long)arg;
	char buf[300];
	for (int i = 0; i < 6; i++) {
		t_fill(buf, sizeof(buf), (uint32_t)(t * 100 + i), (uint64_t)(t * 300));
		CHECK_EQ(atomio_pwrite(tstore, tfile, buf, sizeof(buf), (off_t)(t * 300)), (ssize_t)sizeof(buf));
	}
	return NULL;
}

/* Concurrent commits: several records per log write (group commit). */
static void child_threads(void *arg)
{
	(void)arg;
	struct atomio_options o = t_opts(65536);
	CHECK_OK(atomio_open(t_path("log"), &o, &tstore));
	tfile = atomio_file_open(tstore, t_path("a"), O_CREAT, 0644);
	pthread_t th[4];
	for (long t = 0; t < 4; t++)
		CHECK_OK(pthread_create(&th[t], NULL, thread_main, (void *)t));
	for (int t = 0; t < 4; t++)
		CHECK_OK(pthread_join(th[t], NULL));
}

/* A file outside the log's directory: recorded with an absolute path. */
static void child_abs(void *arg)
{
	(void)arg;
	struct atomio_options o = t_opts(65536);
	atomio *st;
	CHECK_OK(atomio_open(t_path("sub/log"), &o, &st));
	int a = atomio_file_open(st, t_path("a"), O_CREAT, 0644);
	int d = atomio_file_open(st, t_path("sub/d"), O_CREAT, 0644);
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, a, "abs", 3, 0));
	CHECK_OK(atomio_tx_write(tx, d, "rel", 3, 0));
	CHECK_OK(atomio_tx_truncate(tx, d, 100));
	CHECK_OK(atomio_tx_commit(tx));
}

/* Compressible groups (workload.h's runs of equal bytes): LZ4 records, of
 * one and of several ranges, among raw ones (issue 7). */
static void child_compressed(void *arg)
{
	(void)arg;
	struct atomio_options o = t_opts(65536);
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int ids[2];
	ids[0] = atomio_file_open(st, t_path("a"), O_CREAT, 0644);
	ids[1] = atomio_file_open(st, t_path("b"), O_CREAT, 0644);
	w_fill_run = 16;
	groups(st, ids, 2, 4242, 5, 3000);
	w_fill_run = 0;
	groups(st, ids, 2, 4243, 1, 600);
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK(s.records_compressed > 0);
}

static int version1; /* emit: write the superblocks as format version 1 */

/* Write the compact form of the log at path as seeds; wrap_first: lay the
 * first record at the end of the area and the others from its start. */
static void emit(const char *name, const char *path, int wrap_first)
{
	struct lp l;
	CHECK_OK(lp_load(&l, path));
	struct sb_disk *osb = lp_sb(&l);
	CHECK(osb);
	struct cat_hdr_disk *oc = lp_cat_cur(&l, osb);
	CHECK(oc && oc->used <= CAT_SIZE);

	size_t cap = 1u << 20;
	uint8_t *area = calloc(1, cap);
	uint64_t pos = 0, seq = osb->head_seq, opos = osb->head_off, head = 0;
	unsigned n = lp_count_recs(&l, osb);
	uint64_t first_len = 0;
	for (unsigned i = 0; i < n; i++) {
		struct rec_hdr_disk *h = lp_rec_live(&l, osb, opos, seq);
		if (!h && opos % osb->block == 0 && opos)
			h = lp_rec_live(&l, osb, opos = 0, seq); /* the log wrapped (a background checkpoint) */
		CHECK(h);
		uint64_t next = lp_rec_next(osb, h, opos);
		if (wrap_first && i == 0) {
			first_len = h->rec_len;
			opos = next;
			seq++;
			continue; /* placed at the end below */
		}
		CHECK(pos + h->rec_len <= cap);
		memcpy(area + pos, h, h->rec_len);
		pos = h->flags & REC_F_LAST ? align_up(pos + h->rec_len, BLOCK) : pos + h->rec_len;
		opos = next;
		seq++;
	}
	uint64_t area_size = align_up(pos, BLOCK);
	if (wrap_first) {
		CHECK(n >= 2);
		uint64_t slot = align_up(first_len, BLOCK);
		area_size = align_up(pos, BLOCK) + slot + BLOCK; /* a gap: nothing at the end */
		head = area_size - slot;
		struct rec_hdr_disk *h = lp_rec(&l, osb, osb->head_off);
		memcpy(area + head, h, h->rec_len);
		struct rec_hdr_disk *nh = (struct rec_hdr_disk *)(area + head);
		nh->flags |= REC_F_LAST;
		nh->csum = fmt_csum(nh, nh->rec_len, osb->store_id, offsetof(struct rec_hdr_disk, csum));
	}
	if (area_size < MIN_LOG_BLOCKS * BLOCK)
		area_size = MIN_LOG_BLOCKS * BLOCK;

	const uint64_t area_off = CAT_OFF + 2 * CAT_SIZE;
	size_t total = (size_t)(area_off + area_size);
	uint8_t *img = calloc(1, total + 1);
	struct sb_disk sb = *osb;
	sb.block = BLOCK;
	sb.cat_size = CAT_SIZE;
	sb.area_off = area_off;
	sb.area_size = area_size;
	sb.head_off = head;
	if (version1)
		sb.version = 1; /* a log of the first format (no compressed record) */
	lp_sb_seal(&sb);
	memcpy(img + (sb.generation % 2) * SB_SLOT, &sb, sizeof(sb));
	struct sb_disk old = sb;
	old.generation--;
	old.epoch--;
	lp_sb_seal(&old);
	memcpy(img + (old.generation % 2) * SB_SLOT, &old, sizeof(old));
	for (int c = 0; c < 2; c++)
		memcpy(img + CAT_OFF + (size_t)c * CAT_SIZE, oc, oc->used);
	memcpy(img + area_off, area, area_size);
	size_t len = total;
	while (len > area_off && !img[len - 1])
		len--;

	static const uint8_t ctls[] = {0x17, 0x3f};
	for (unsigned i = 0; i < sizeof(ctls); i++) {
		char out[4096];
		snprintf(out, sizeof(out), "%s/%02d-%s-%02x", outdir, nseeds, name, ctls[i]);
		img[len] = ctls[i];
		FILE *f = fopen(out, "wb");
		CHECK(f && fwrite(img, 1, len + 1, f) == len + 1 && fclose(f) == 0);
		printf("%s: %u records, %zu bytes\n", out, n, len + 1);
	}
	nseeds++;
	free(img);
	free(area);
	lp_free(&l);
}

static void fresh(void)
{
	char cmd[8400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'/* && mkdir -p '%s/sub'", t_dir(), t_dir());
	CHECK_EQ(system(cmd), 0);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: mkcorpus OUTDIR\n");
		return 2;
	}
	outdir = argv[1];
	t_dir();
	int nf;

	fresh();
	CHECK_EQ(lp_crash_child(child_empty, NULL), 0);
	emit("empty", t_path("log"), 0);

	fresh();
	CHECK_EQ(lp_crash_child(child_one, NULL), 0);
	emit("one", t_path("log"), 0);

	fresh();
	nf = 2;
	CHECK_EQ(lp_crash_child(child_groups, &nf), 0);
	emit("groups2", t_path("log"), 0);
	emit("wrapped", t_path("log"), 1);

	fresh();
	nf = 4;
	CHECK_EQ(lp_crash_child(child_groups, &nf), 0);
	emit("groups4", t_path("log"), 0);

	fresh();
	CHECK_EQ(lp_crash_child(child_later, NULL), 0);
	emit("later", t_path("log"), 0);

	fresh();
	CHECK_EQ(lp_crash_child(child_threads, NULL), 0);
	emit("threads", t_path("log"), 0);

	fresh();
	CHECK_EQ(lp_crash_child(child_abs, NULL), 0);
	emit("abspath", t_path("sub/log"), 0);

	fresh();
	CHECK_EQ(lp_crash_child(child_compressed, NULL), 0);
	emit("compressed", t_path("log"), 0);
	emit("compressed-wrapped", t_path("log"), 1);

	fresh();
	nf = 2;
	CHECK_EQ(lp_crash_child(child_groups, &nf), 0);
	version1 = 1;
	emit("version1", t_path("log"), 0);
	version1 = 0;
	return 0;
}
