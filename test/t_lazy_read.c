/*
 * Lazy groups, the read side (issue 36: src/lazy.c), across processes: a
 * forked child with its own handle commits lazily (lazy delay 60 s, no
 * background thread: nothing flushes until a sync), and the parent's
 * atomio_pread / atomio_file_size return its groups at once, while the file
 * itself still holds the old bytes (the overlay); a truncation then an
 * extension; overlapping groups, the newest wins.  Then the race: the child
 * commits rounds of groups and syncs them (their home writes run) while the
 * parent reads without pause; every read must return the state once all of
 * them are home (each group whole: its ranges lie across two of the
 * overlay's 256 KiB pieces).  Random ranges from a fixed seed (ATOMIO_SEED).
 */
#include <poll.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "t.h"
#include "workload.h"

#define SPAN (640u * 1024u)
#define NGRP 12 /* groups per round */
#define NR 3    /* ranges per group */

static struct atomio_options opts(void)
{
	struct atomio_options o = t_opts(64u << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	o.lazy_delay_us = 60000000; /* 60 s: only syncs flush */
	return o;
}

/* Group g of round r: NR ranges, one always at the same place across the
 * piece boundary at 256 KiB, the others random; its bytes t_fill's tag. */
struct grange {
	uint64_t off, len;
};
static uint32_t tag_of(int r, int g) { return (uint32_t)(1000 + r * NGRP + g); }
static void group_ranges(struct rng *rng, struct grange *gr)
{
	gr[0] = (struct grange){256u * 1024u - 3000, 7000};
	for (int i = 1; i < NR; i++) {
		gr[i].len = 1 + rng_below(rng, 20000);
		gr[i].off = rng_below(rng, SPAN - gr[i].len);
	}
}

static void lazy_tx(atomio *st, int f, const struct grange *gr, int n, uint32_t tag, int64_t trunc)
{
	atomio_tx *tx;
	KCHECK(atomio_tx_begin(st, &tx) == 0);
	if (trunc >= 0)
		KCHECK(atomio_tx_truncate(tx, f, (off_t)trunc) == 0);
	for (int i = 0; i < n; i++) {
		uint8_t *b = malloc(gr[i].len);
		t_fill(b, gr[i].len, tag, gr[i].off);
		KCHECK(atomio_tx_write(tx, f, b, gr[i].len, (off_t)gr[i].off) == 0);
		free(b);
	}
	KCHECK(atomio_tx_commit_lazy(tx, NULL) == 0);
}

static void say(int fd, char c) { KCHECK(write(fd, &c, 1) == 1); }
static char hear(int fd)
{
	char c = 0;
	KCHECK(read(fd, &c, 1) == 1);
	return c;
}

/* The child: its own handle; each step once the parent says so. */
static void child(int in, int out, uint64_t seed, int rounds)
{
	struct atomio_options o = opts();
	atomio *st;
	KCHECK(atomio_open(t_path("log"), &o, &st) == 0);
	int f = atomio_file_open(st, t_path("f"), 0, 0);
	KCHECK(f >= 0);
	/* 1: one group in the middle; 2: a truncation then an extension;
	 * 3: two overlapping groups */
	hear(in);
	lazy_tx(st, f, &(struct grange){2, 3}, 1, 1, -1);
	say(out, '1');
	hear(in);
	lazy_tx(st, f, &(struct grange){10, 2}, 1, 2, 5);
	say(out, '2');
	hear(in);
	lazy_tx(st, f, &(struct grange){0, 4}, 1, 3, -1);
	lazy_tx(st, f, &(struct grange){1, 2}, 1, 4, -1);
	say(out, '3');
	hear(in);
	KCHECK(atomio_sync(st, f, 0) == 0);
	say(out, 's');
	/* the race */
	struct rng rng = {seed};
	for (int r = 0; r < rounds; r++) {
		hear(in);
		for (int g = 0; g < NGRP; g++) {
			struct grange gr[NR];
			group_ranges(&rng, gr);
			lazy_tx(st, f, gr, NR, tag_of(r, g), -1);
		}
		say(out, 'c');
		KCHECK(atomio_sync(st, -1, 0) == 0); /* home writes while the parent reads */
		say(out, 's');
	}
	KCHECK(atomio_close(st) == 0);
	_exit(0);
}

static uint8_t model[SPAN];
static uint64_t msize;

static void model_write(const struct grange *gr, int n, uint32_t tag)
{
	for (int i = 0; i < n; i++) {
		t_fill(model + gr[i].off, gr[i].len, tag, gr[i].off);
		if (gr[i].off + gr[i].len > msize)
			msize = gr[i].off + gr[i].len;
	}
}

/* atomio's reads agree with the model. */
static void check_atomio(atomio *st, int f, const char *when)
{
	static uint8_t got[SPAN + 1];
	ssize_t n = atomio_pread(st, f, got, sizeof(got), 0);
	if (n != (ssize_t)msize || memcmp(got, model, msize)) {
		uint64_t i = 0;
		while (n > 0 && i < (uint64_t)n && i < msize && got[i] == model[i])
			i++;
		fprintf(stderr, "%s: read %zd bytes, want %llu; first difference at %llu\n", when, n,
			(unsigned long long)msize, (unsigned long long)i);
		exit(1);
	}
	uint64_t size;
	CHECK_OK(atomio_file_size(st, f, &size));
	CHECK_EQ(size, msize);
}

static bool heard(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) == 1;
}

int main(void)
{
	uint64_t seed = t_seed(36);
	int rounds = T_SCALE(200);
	struct atomio_options o = opts();
	atomio *st;
	int f = t_open_written(t_path("log"), &o, t_path("f"), "0123456789", &st);
	memcpy(model, "0123456789", 10);
	msize = 10;
	int rd, wr;
	pid_t pid = t_fork_piped(&rd, &wr);
	if (pid == 0)
		child(rd, wr, seed, rounds);
	int raw = open(t_path("f"), O_RDONLY);
	CHECK(raw >= 0);
	char rb[32];

	/* 1: at once, from the other process; the file still has old bytes */
	say(wr, 'g');
	CHECK_EQ(hear(rd), '1');
	CHECK_EQ(atomio_lazy_pending(st, f), 1);
	model_write(&(struct grange){2, 3}, 1, 1);
	check_atomio(st, f, "one lazy group");
	CHECK_EQ(pread(raw, rb, sizeof(rb), 0), 10);
	CHECK(!memcmp(rb, "0123456789", 10));
	/* 2: truncate to 5, write at 10: 5 zeros between, size 12 */
	say(wr, 'g');
	CHECK_EQ(hear(rd), '2');
	memset(model + 5, 0, msize - 5);
	msize = 5;
	model_write(&(struct grange){10, 2}, 1, 2);
	CHECK_EQ(msize, 12u);
	check_atomio(st, f, "truncated, then extended");
	struct stat sb;
	CHECK_OK(fstat(raw, &sb));
	CHECK_EQ(sb.st_size, 10); /* the file: not yet */
	/* 3: overlapping groups, the newest wins */
	say(wr, 'g');
	CHECK_EQ(hear(rd), '3');
	model_write(&(struct grange){0, 4}, 1, 3);
	model_write(&(struct grange){1, 2}, 1, 4);
	check_atomio(st, f, "overlapping groups");
	/* the child's sync: home, and the file has them */
	say(wr, 'g');
	CHECK_EQ(hear(rd), 's');
	CHECK_EQ(atomio_lazy_pending(st, f), 0);
	check_atomio(st, f, "synced");
	CHECK_EQ(pread(raw, rb, sizeof(rb), 0), (ssize_t)msize);
	CHECK(!memcmp(rb, model, msize));

	/* the race */
	printf("seed %llu: %d rounds of %d groups\n", (unsigned long long)seed, rounds, NGRP);
	struct rng rng = {seed};
	uint64_t reads = 0, overlaid = 0;
	for (int r = 0; r < rounds; r++) {
		for (int g = 0; g < NGRP; g++) {
			struct grange gr[NR];
			group_ranges(&rng, gr);
			model_write(gr, NR, tag_of(r, g));
		}
		say(wr, 'g');
		CHECK_EQ(hear(rd), 'c');
		/* every group of the round committed: each read sees them all */
		do {
			overlaid += atomio_lazy_pending(st, f) == 1;
			check_atomio(st, f, "racing the home writes");
			reads++;
		} while (!heard(rd));
		CHECK_EQ(hear(rd), 's');
		check_atomio(st, f, "round synced");
	}
	printf("%llu reads, %llu of them with groups pending\n", (unsigned long long)reads,
	       (unsigned long long)overlaid);
	CHECK(overlaid > 0);
	t_child_ok(pid);
	struct atomio_lazy_stats ls;
	CHECK_OK(atomio_lazy_stats(st, &ls));
	printf("lazy_commits %llu lazy_reads %llu\n", (unsigned long long)ls.lazy_commits,
	       (unsigned long long)ls.lazy_reads);
	CHECK(ls.lazy_reads > 0);
	CHECK_OK(atomio_close(st));
	/* durable: the file after every handle closed */
	size_t n;
	uint8_t *b = t_slurp(t_path("f"), &n);
	CHECK(b && n == msize && !memcmp(b, model, msize));
	free(b);
	close(raw);
	t_cleanup();
	printf("ok\n");
	return 0;
}
