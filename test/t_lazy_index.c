/*
 * The read index of lazy groups (src/lazy.c), white-box: groups are built by
 * hand in the shared arena and indexed as commit.c indexes a visible group
 * (no log write, no home write: the test makes them "home" itself, range by
 * range, with writes to the file behind atomio's back).  At every step,
 * atomio_pread and atomio_file_size must return the file as it is once every
 * indexed group is home, whichever prefix of their home writes is in the
 * file, before and after their unindexing and after a rebuild of the index
 * (lz_rebuild_locked, as after a holder's death).  Random groups against a
 * model, fixed seed (ATOMIO_SEED overrides); a buffered file, then an
 * O_DIRECT one (the overlay reads it as atomio_pread does).
 */
#include "t.h"
#include "workload.h"

#include "internal.h"
#include "shm.h"

#define SPAN (600u * 1024u) /* more than two of the overlay's pieces */
#define MAXG 8
#define MAXS 3

struct tseg {
	uint16_t kind;
	uint64_t off, len; /* SEG_SETSIZE: off = the size */
	uint8_t tag;
};
struct tgrp {
	uint32_t idx1;
	int n, homed; /* segs, segs written home */
	struct tseg s[MAXS];
};

static atomio *st;
static int fid, hfd;
static uint64_t ticket;

static void seg_bytes(const struct tseg *s, uint8_t *out) { t_fill(out, s->len, s->tag, s->off); }

/* Queue nothing: build group g's block and index it (as enqueue does). */
static void grp_index(struct tgrp *g)
{
	uint64_t size = sizeof(struct arena_blk) + (uint64_t)g->n * sizeof(struct shm_seg);
	for (int j = 0; j < g->n; j++)
		size += g->s[j].len + 16;
	shm_lock(st);
	uint32_t idx1;
	CHECK_OK(shm_ent_alloc(st, &idx1));
	uint64_t off;
	CHECK_OK(shm_arena_alloc_locked(st, size, idx1, &off));
	struct shm_ent *e = shm_ent(st->sh, idx1);
	struct arena_blk *b = shm_blk(st->sh, off);
	struct shm_seg *d = (struct shm_seg *)(b + 1);
	uint64_t at = sizeof(*b) + (uint64_t)g->n * sizeof(*d);
	for (int j = 0; j < g->n; j++) {
		const struct tseg *s = &g->s[j];
		d[j] = (struct shm_seg){.file = (uint32_t)fid, .kind = s->kind, .off = s->off, .len = s->len};
		if (s->kind == SEG_WRITE) {
			d[j].data = at;
			seg_bytes(s, (uint8_t *)b + at);
			at += s->len;
		}
	}
	e->blk = off;
	e->nsegs = (uint32_t)g->n;
	e->ticket = ++ticket;
	atomic_store(&e->flags, ENT_VISIBLE | ENT_LAZY);
	CHECK_OK(lz_index_locked(st, idx1));
	shm_unlock(st);
	g->idx1 = idx1;
}

static void grp_unindex(struct tgrp *g)
{
	shm_lock(st);
	lz_unindex_locked(st, g->idx1);
	shm_ent_free(st, g->idx1);
	shm_arena_advance_locked(st);
	shm_unlock(st);
}

/* One more of g's segs home, behind atomio's back. */
static void grp_home_step(struct tgrp *g)
{
	const struct tseg *s = &g->s[g->homed++];
	if (s->kind == SEG_SETSIZE) {
		CHECK_OK(ftruncate(hfd, (off_t)s->off));
		return;
	}
	uint8_t *buf = malloc(s->len);
	seg_bytes(s, buf);
	CHECK_EQ(pwrite(hfd, buf, s->len, (off_t)s->off), (ssize_t)s->len);
	free(buf);
}

/* The model: the file once every group so far is home. */
static uint8_t model[SPAN + 4096];
static uint64_t msize;

static void model_apply(const struct tgrp *g)
{
	for (int j = 0; j < g->n; j++) {
		const struct tseg *s = &g->s[j];
		if (s->kind == SEG_SETSIZE) {
			if (s->off < msize)
				memset(model + s->off, 0, msize - s->off);
			msize = s->off;
		} else {
			seg_bytes(s, model + s->off);
			if (s->off + s->len > msize)
				msize = s->off + s->len;
		}
	}
}

/* atomio's reads agree with the model: the whole span through three iovecs,
 * a small read at a random place, and the size. */
static void check_reads(struct rng *rng, const char *when)
{
	static uint8_t got[SPAN + 4096];
	memset(got, 0xee, sizeof(got));
	struct iovec iov[3] = {{got, 1000}, {got + 1000, 300000}, {got + 301000, sizeof(got) - 301000}};
	ssize_t n = atomio_preadv(st, fid, iov, 3, 0);
	if (n != (ssize_t)msize || memcmp(got, model, msize)) {
		uint64_t i = 0;
		while (i < msize && n > 0 && (uint64_t)i < (uint64_t)n && got[i] == model[i])
			i++;
		fprintf(stderr, "%s: read %zd bytes, model %llu; first difference at %llu\n", when, n,
			(unsigned long long)msize, (unsigned long long)i);
		CHECK(0);
	}
	uint64_t size;
	CHECK_OK(atomio_file_size(st, fid, &size));
	CHECK_EQ(size, msize);
	uint64_t off = rng_next(rng) % (SPAN + 100), len = 1 + rng_next(rng) % 5000;
	uint8_t small[5000];
	n = atomio_pread(st, fid, small, len, (off_t)off);
	uint64_t want = off >= msize ? 0 : msize - off < len ? msize - off : len;
	CHECK_EQ(n, (ssize_t)want);
	CHECK(!memcmp(small, model + off, want));
}

static void rand_group(struct rng *rng, struct tgrp *g)
{
	*g = (struct tgrp){.n = 1 + (int)(rng_next(rng) % MAXS)};
	for (int j = 0; j < g->n; j++) {
		struct tseg *s = &g->s[j];
		s->tag = (uint8_t)(1 + rng_next(rng) % 250);
		if (rng_next(rng) % 6 == 0) {
			s->kind = SEG_SETSIZE;
			s->off = rng_next(rng) % SPAN;
			continue;
		}
		s->kind = SEG_WRITE;
		s->len = rng_next(rng) % 4 == 0 ? 1 + rng_next(rng) % 100000 : 1 + rng_next(rng) % 3000;
		s->off = rng_next(rng) % (SPAN - s->len);
	}
}

static void lazy_commit(int file, const char *text, off_t off)
{
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, file, text, strlen(text), off));
	CHECK_OK(atomio_tx_commit_lazy(tx, NULL));
}

/* Rebuild the index from a FIFO of the groups listed, as normalize_locked
 * does after a holder's death; the state's FIFO is put back afterwards (the
 * groups are the test's, queued nowhere). */
static void rebuild(struct tgrp *gs, int lo, int hi)
{
	shm_lock(st);
	struct shm_state *S = st->S, keep = *S;
	S->lz_head = S->lz_tail = 0;
	S->lz_n = 0;
	for (int i = lo; i < hi; i++) {
		if (S->lz_tail)
			shm_ent(st->sh, S->lz_tail)->lz_next = gs[i].idx1;
		else
			S->lz_head = gs[i].idx1;
		S->lz_tail = gs[i].idx1;
		S->lz_n++;
	}
	lz_rebuild_locked(st);
	S->lz_head = keep.lz_head;
	S->lz_tail = keep.lz_tail;
	S->lz_n = keep.lz_n;
	shm_unlock(st);
}

/* Random rounds: up to MAXG groups indexed; then their home writes one seg
 * at a time, in ticket order, each group unindexed at once or some steps
 * later; reads checked after every step. */
static void rounds_run(struct rng *rngp, int rounds)
{
	struct rng rng = *rngp;
	for (int r = 0; r < rounds; r++) {
		struct tgrp gs[MAXG];
		int ng = 1 + (int)(rng_next(&rng) % MAXG);
		for (int i = 0; i < ng; i++) {
			rand_group(&rng, &gs[i]);
			grp_index(&gs[i]);
			model_apply(&gs[i]);
			check_reads(&rng, "indexed");
		}
		if (r % 5 == 0) {
			rebuild(gs, 0, ng);
			check_reads(&rng, "rebuilt");
		}
		int unx = 0; /* groups unindexed so far */
		for (int i = 0; i < ng; i++) {
			while (gs[i].homed < gs[i].n) {
				grp_home_step(&gs[i]);
				check_reads(&rng, "home step");
			}
			while (unx <= i && rng_next(&rng) % 2) {
				grp_unindex(&gs[unx++]);
				check_reads(&rng, "unindexed");
			}
		}
		while (unx < ng) {
			grp_unindex(&gs[unx++]);
			check_reads(&rng, "unindexed at the end");
		}
		CHECK_EQ(atomio_lazy_pending(st, fid), 0);
		CHECK_EQ(st->sh->lz.used, 0u);
	}
	*rngp = rng;
}

int main(void)
{
	uint64_t seed = t_seed(36);
	struct rng rng = {seed};
	struct atomio_options o = t_opts(64u << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	o.lazy_delay_us = 60000000; /* the lazy commits at the end: only a sync flushes */
	fid = t_open_written(t_path("log"), &o, t_path("f"), "0123456789", &st);
	hfd = open(t_path("f"), O_RDWR);
	CHECK(hfd >= 0);
	memcpy(model, "0123456789", 10);
	msize = 10;
	CHECK_EQ(atomio_lazy_pending(st, fid), 0);

	/* By hand first: a write in the middle, seen by atomio's reads and not
	 * in the file. */
	struct tgrp g0 = {.n = 1, .s = {{.kind = SEG_WRITE, .off = 2, .len = 3, .tag = 7}}};
	grp_index(&g0);
	model_apply(&g0);
	CHECK_EQ(atomio_lazy_pending(st, fid), 1);
	check_reads(&rng, "one group");
	char raw[16];
	CHECK_EQ(pread(hfd, raw, sizeof(raw), 0), 10);
	CHECK(!memcmp(raw, "0123456789", 10)); /* the overlay, not the file */
	grp_home_step(&g0);
	check_reads(&rng, "one group home");
	grp_unindex(&g0);
	CHECK_EQ(atomio_lazy_pending(st, fid), 0);
	check_reads(&rng, "one group unindexed");

	int rounds = T_SCALE(60);
	printf("seed %llu, %d rounds\n", (unsigned long long)seed, rounds);
	rounds_run(&rng, rounds);
	close(hfd);
	/* The same through an O_DIRECT file: the overlay reads its buffered twin
	 * or, before there is one, with O_DIRECT through a bounce buffer. */
	fid = atomio_file_open(st, t_path("d"), O_CREAT | O_DIRECT, 0644);
	if (fid >= 0) {
		hfd = open(t_path("d"), O_RDWR);
		CHECK(hfd >= 0);
		memset(model, 0, sizeof(model));
		msize = 0;
		rounds_run(&rng, rounds / 2);
	} else {
		printf("O_DIRECT not supported here: the buffered file only\n");
		hfd = -1;
	}
	/* The eager count (lz_eager, the preload's for a mapped file): while it
	 * is raised, a lazy commit to the file is made durable at once. */
	int e = atomio_file_open(st, t_path("e"), O_CREAT, 0644);
	CHECK(e >= 0);
	CHECK_EQ(lz_eager(st, 9999, true), -EINVAL);
	CHECK_OK(lz_eager(st, e, true));
	CHECK_OK(lz_eager(st, e, true));
	CHECK_OK(lz_eager(st, e, false));
	lazy_commit(e, "eager", 0);
	CHECK_EQ(atomio_lazy_pending(st, e), 0); /* home already */
	CHECK_OK(lz_eager(st, e, false));
	CHECK_OK(lz_eager(st, e, false)); /* stays at 0 */
	CHECK_EQ(atomic_load(&shm_lzf(st->sh, (uint32_t)e)->eager), 0u);
	lazy_commit(e, "lazy!", 0);
	CHECK_EQ(atomio_lazy_pending(st, e), 1);
	char eb[8];
	CHECK_EQ(atomio_pread(st, e, eb, sizeof(eb), 0), 5);
	CHECK(!memcmp(eb, "lazy!", 5));
	struct atomio_lazy_stats ls;
	CHECK_OK(atomio_lazy_stats(st, &ls));
	CHECK_EQ(ls.lazy_eager, 1u);
	CHECK_OK(atomio_sync(st, e, 0));
	CHECK_EQ(atomio_lazy_pending(st, e), 0);
	CHECK(ls.lazy_reads > 0);
	printf("lazy_reads %llu\n", (unsigned long long)ls.lazy_reads);
	if (hfd >= 0)
		close(hfd);
	CHECK_OK(atomio_close(st));
	t_cleanup();
	printf("ok\n");
	return 0;
}
