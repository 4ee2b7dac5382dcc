/*
 * crashsim.c: atomio's crash-consistency harness (see crashsim.h).
 */
#include "crashsim.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <lz4.h>

#include "atomio.h"
#define CS_TRACE(...) do { if (getenv("CS_TRACE")) fprintf(stderr, __VA_ARGS__); } while (0)
#include "codec.h"
#include "format.h"
#include "simfs.h"
#include "sys.h"

#define LOG_PATH "/d/log"
#define MAXF 3

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --- random numbers ------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

struct rng {
	uint64_t s;
};

static uint64_t rnd(struct rng *r) { return mix64(r->s++ * 0xD1B54A32D192ED03ull); }
static uint64_t below(struct rng *r, uint64_t n) { return n ? rnd(r) % n : 0; }

/* Runs of equal bytes (cs_cfg.compress) for the run in progress. */
static uint32_t fill_run;

/* Bytes of range 'tag' at file offset x: a function of (tag, x) only, so a
 * byte in a file tells which write put it there.  Random, or in runs of
 * fill_run equal bytes (each run's value still a function of tag and x):
 * then LZ4 compresses them and the records are stored compressed. */
static void fill(uint64_t tag, uint64_t off, uint8_t *buf, uint64_t len)
{
	uint64_t i = 0;
	if (fill_run >= 2) {
		for (; i < len; i++)
			buf[i] = (uint8_t)mix64(tag * 0x100000001B3ull ^ ((off + i) / fill_run));
		return;
	}
	while (i < len) {
		uint64_t x = off + i;
		uint64_t w = mix64(tag * 0x100000001B3ull ^ (x >> 3));
		for (unsigned s = x & 7; s < 8 && i < len; s++)
			buf[i++] = (uint8_t)(w >> (8 * s));
	}
}

/* --- the model ------------------------------------------------------------------ */

struct mf {
	uint8_t *b;
	uint64_t size, cap;
};

static void mf_reserve(struct mf *m, uint64_t n)
{
	if (n <= m->cap)
		return;
	uint64_t c = m->cap ? m->cap : 65536;
	while (c < n)
		c *= 2;
	uint8_t *b = realloc(m->b, c);
	if (!b)
		abort();
	memset(b + m->cap, 0, c - m->cap);
	m->b = b;
	m->cap = c;
}

static void mf_setsize(struct mf *m, uint64_t size)
{
	mf_reserve(m, size);
	if (size < m->size)
		memset(m->b + size, 0, m->size - size);
	m->size = size;
}

static void mf_copy(struct mf *dst, const struct mf *src)
{
	mf_reserve(dst, src->size ? src->size : 1);
	if (dst->size > src->size)
		memset(dst->b + src->size, 0, dst->size - src->size);
	if (src->size)
		memcpy(dst->b, src->b, src->size);
	dst->size = src->size;
}

static void mf_free(struct mf *m)
{
	free(m->b);
	memset(m, 0, sizeof(*m));
}

/* --- groups ------------------------------------------------------------------------ */

enum { OP_WRITE, OP_SIZE };

struct gop {
	uint8_t kind, file;
	uint64_t off, len, tag;
};

struct grp {
	uint64_t gid;
	int nops;
	struct gop *ops;
	bool abort, pwrite;
};

/* Bytes op i of g writes at [x0, x0+n): the first range of every group
 * starts with the group id (so that a log write tells which groups it
 * carries), the rest is fill(). */
static void op_bytes(const struct grp *g, int i, uint64_t x0, uint8_t *out, uint64_t n)
{
	const struct gop *o = &g->ops[i];
	fill(o->tag, x0, out, n);
	if (i == 0)
		for (uint64_t k = 0; k < n; k++) {
			uint64_t x = x0 + k;
			if (x >= o->off && x < o->off + 8)
				out[k] = (uint8_t)(g->gid >> (8 * (x - o->off)));
		}
}

static void grp_apply(const struct grp *g, struct mf *m)
{
	if (g->abort)
		return;
	for (int i = 0; i < g->nops; i++) {
		const struct gop *o = &g->ops[i];
		if (o->kind == OP_SIZE) {
			mf_setsize(&m[o->file], o->off);
			continue;
		}
		mf_reserve(&m[o->file], o->off + o->len);
		op_bytes(g, i, o->off, m[o->file].b + o->off, o->len);
		if (o->off + o->len > m[o->file].size)
			m[o->file].size = o->off + o->len;
	}
}

/* RWF_ATOMIC limit of the simulated disk with cfg.fast */
#define ATOMIC_MAX 16384u

struct genparams {
	uint64_t area;     /* record area of the log */
	uint32_t dio;      /* O_DIRECT alignment */
};

static uint64_t align_dn(uint64_t v, uint64_t a) { return v / a * a; }

static uint64_t pick_len(struct rng *r, uint64_t budget, uint64_t cls_max)
{
	uint64_t k = below(r, 20), len;
	if (k < 5)
		len = 1 + below(r, 16);
	else if (k < 9)
		len = 512 * (1 + below(r, 8));
	else if (k < 12)
		len = 4096;
	else
		len = 1 + below(r, cls_max);
	if (len > budget)
		len = budget;
	return len ? len : 1;
}

static void gen_group(const struct cs_cfg *c, const struct genparams *gp, uint64_t gid, struct grp *g)
{
	struct rng r = {mix64(c->seed) ^ (gid * 0x9E3779B97F4A7C15ull)};
	/* uniform groups take their shape (ranges, files, lengths) from u,
	 * the same for every group, and only their offsets from r */
	struct rng u = {mix64(c->seed + 0x5eed)};
	struct rng *sr = c->uniform ? &u : &r;
	memset(g, 0, sizeof(*g));
	g->gid = gid;
	g->abort = (int)below(&r, 100) < c->abort_pct;
	if (c->blockrec) {
		/* one range, a record of exactly 4096 bytes: records of every
		 * epoch and lap then sit at the same offsets */
		g->nops = 1;
		g->ops = calloc(1, sizeof(*g->ops));
		if (!g->ops)
			abort();
		g->ops[0] = (struct gop){.kind = OP_WRITE, .file = 0, .len = 4096 - REC_HDR - REC_DESC,
					 .off = below(&r, c->span ? c->span : 262144),
					 .tag = mix64(gid * 131 + 1)};
		g->pwrite = !g->abort && (int)below(&r, 100) < c->pwrite_pct;
		return;
	}
	if (c->fast && (c->direct & 1u) && !c->uniform && below(&r, 3) == 0) {
		/* the shape the kernel fast path takes: one write to O_DIRECT
		 * file 0, a power-of-two length from the O_DIRECT alignment up
		 * to the atomic write limit, naturally aligned */
		uint64_t len = gp->dio;
		while (len < ATOMIC_MAX && below(&r, 2))
			len *= 2;
		uint64_t span = c->span > len ? c->span : len;
		g->nops = 1;
		g->ops = calloc(1, sizeof(*g->ops));
		if (!g->ops)
			abort();
		g->ops[0] = (struct gop){.kind = OP_WRITE, .file = 0, .len = len,
					 .off = below(&r, span / len) * len, .tag = mix64(gid * 131 + 1)};
		g->pwrite = !g->abort && (int)below(&r, 100) < c->pwrite_pct;
		return;
	}
	if (!(c->direct & 1u) && !c->uniform && (int)below(&r, 100) < c->full_pct) {
		/* one range whose record is exactly the record area: the
		 * largest group atomio accepts (atomio_caps max_group_bytes) */
		g->nops = 1;
		g->ops = calloc(1, sizeof(*g->ops));
		if (!g->ops)
			abort();
		g->ops[0] = (struct gop){.kind = OP_WRITE, .file = 0, .len = gp->area - REC_HDR - REC_DESC,
					 .off = below(&r, c->span ? c->span : 262144),
					 .tag = mix64(gid * 131 + 1)};
		g->pwrite = !g->abort && below(&r, 2);
		return;
	}
	int maxr = c->ranges < 1 ? 1 : c->ranges;
	int nops;
	uint64_t k = below(sr, 10);
	if (c->uniform)
		nops = 1 + (int)(k % (maxr < 3 ? (uint64_t)maxr : 3));
	else
		nops = k < 4 || maxr == 1 ? 1 : k < 8 ? 2 + (int)below(&r, maxr < 4 ? (uint64_t)maxr - 1 : 3)
						  : 1 + (int)below(&r, (uint64_t)maxr);
	g->ops = calloc((size_t)nops, sizeof(*g->ops));
	if (!g->ops)
		abort();
	/* the record must fit the log: data <= area - header - descriptors */
	uint64_t room = gp->area - REC_HDR - REC_DESC * (uint64_t)nops - 8;
	uint64_t maxb = c->bytes ? c->bytes : gp->area / 10 * 9;
	if (maxb > room)
		maxb = room;
	uint64_t cls = below(sr, 10);
	uint64_t budget = cls < 5 ? 600 : cls < 8 ? 24576 : maxb;
	if (budget > maxb)
		budget = maxb;
	uint64_t span = c->span ? c->span : 262144, used = 0;
	int n = 0;
	for (int i = 0; i < nops; i++) {
		struct gop *o = &g->ops[n];
		o->tag = mix64(gid * 131 + (uint64_t)i + 1);
		o->file = i == 0 ? 0 : (uint8_t)below(sr, (uint64_t)c->files);
		if (i > 0 && !c->uniform && (int)below(&r, 100) < c->trunc_pct) {
			o->kind = OP_SIZE;
			o->off = below(&r, span + span / 2);
			n++;
			continue;
		}
		o->kind = OP_WRITE;
		uint64_t left = budget > used ? budget - used : 1;
		uint64_t len = pick_len(sr, left, left > 40000 ? left : 40000);
		if (len < 8 && i == 0)
			len = 8;
		/* overlap an earlier range now and then */
		if (i > 0 && !c->uniform && below(&r, 10) < 3) {
			const struct gop *p = &g->ops[below(&r, (uint64_t)n)];
			o->file = p->file;
			uint64_t lo = p->off > len / 2 ? p->off - len / 2 : 0;
			o->off = lo + below(&r, p->len + 1);
		} else {
			o->off = below(&r, span);
		}
		if (c->direct & (1u << o->file)) {
			o->off = align_dn(o->off, gp->dio);
			len = (len + gp->dio - 1) / gp->dio * gp->dio;
		}
		if (used + len > room) {
			if ((c->direct & (1u << o->file)) || room <= used)
				break; /* no room for this range: the group ends here */
			len = room - used;
		}
		o->len = len;
		used += len;
		n++;
	}
	g->nops = n;
	g->pwrite = n == 1 && !g->abort && (int)below(&r, 100) < c->pwrite_pct;
}

/* --- configuration ------------------------------------------------------------------ */

void cs_cfg_default(struct cs_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->seed = 1;
	c->files = 3;
	c->groups = 30;
	c->threads = 1;
	c->log = 65536;
	c->ranges = 8;
	c->span = 262144;
	c->abort_pct = 6;
	c->ckpt_pct = 5;
	c->reopen_pct = 3;
	c->crash_pct = 4;
	c->trunc_pct = 8;
	c->pwrite_pct = 50;
	c->setup = true;
	c->unit = 512;
	c->dio = 512;
	c->cap = 64;
	c->samples = 8;
	c->points_pct = 100;
	c->nest_pct = 5;
	c->nest_max = 3;
	c->ncap = 4;
	c->nsamples = 3;
	c->npoints = 12;
	c->bg = true;
}

#define U64(f) {#f, 0, offsetof(struct cs_cfg, f)}
#define INT(f) {#f, 1, offsetof(struct cs_cfg, f)}
#define BOOL(f) {#f, 2, offsetof(struct cs_cfg, f)}
#define U32(f) {#f, 3, offsetof(struct cs_cfg, f)}
static const struct {
	const char *name;
	int type;
	size_t off;
} fields[] = {
	U64(seed), INT(files), INT(groups), INT(threads), U64(log), INT(ranges), U64(bytes),
	U64(span), INT(abort_pct), INT(ckpt_pct), INT(reopen_pct), INT(crash_pct), INT(trunc_pct),
	INT(pwrite_pct), INT(full_pct), U32(direct), BOOL(uniform), BOOL(blockrec), BOOL(setup), BOOL(appfiles), BOOL(lazy), U32(unit), U32(dio), U32(phys),
	U32(compress), INT(lazy_pct), INT(sync_pct), BOOL(reader), U64(lazy_delay_us),
	BOOL(nodirect), BOOL(nodsync), U64(cap), U64(samples), INT(points_pct), INT(nest_pct), INT(nest_max),
	U64(ncap), U64(nsamples), INT(npoints), BOOL(bg), BOOL(fast), BOOL(dhome), BOOL(noproc),
	BOOL(procs), INT(kill_pct), U32(kill_at), U32(kill_role), INT(kill_step), BOOL(kill_sb),
};

char *cs_cfg_format(const struct cs_cfg *c)
{
	size_t cap = 1024, at = 0;
	char *s = malloc(cap);
	if (!s)
		abort();
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const char *p = (const char *)c + fields[i].off;
		unsigned long long v = fields[i].type == 0   ? *(const uint64_t *)p
				       : fields[i].type == 1 ? (unsigned long long)*(const int *)p
				       : fields[i].type == 2 ? *(const bool *)p
							     : *(const uint32_t *)p;
		at += (size_t)snprintf(s + at, cap - at, "%s%s=%llu", i ? "," : "", fields[i].name, v);
	}
	return s;
}

int cs_cfg_parse(const char *s, struct cs_cfg *c)
{
	cs_cfg_default(c);
	return cs_cfg_apply(s, c);
}

int cs_cfg_apply(const char *s, struct cs_cfg *c)
{
	char *dup = strdup(s), *save = NULL;
	if (!dup)
		return -1;
	int r = 0;
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		if (!eq) {
			r = -1;
			break;
		}
		*eq = 0;
		unsigned long long v = strtoull(eq + 1, NULL, 0);
		size_t i;
		for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
			if (!strcmp(fields[i].name, t))
				break;
		if (i == sizeof(fields) / sizeof(fields[0])) {
			fprintf(stderr, "crashsim: unknown config key '%s'\n", t);
			r = -1;
			break;
		}
		char *p = (char *)c + fields[i].off;
		switch (fields[i].type) {
		case 0: *(uint64_t *)p = v; break;
		case 1: *(int *)p = (int)v; break;
		case 2: *(bool *)p = v != 0; break;
		default: *(uint32_t *)p = (uint32_t)v; break;
		}
	}
	free(dup);
	return r;
}

void cs_stats_add(struct cs_stats *to, const struct cs_stats *f)
{
	const uint64_t *s = (const uint64_t *)f;
	uint64_t *d = (uint64_t *)to;
	for (size_t i = 0; i < sizeof(*f) / sizeof(uint64_t); i++) {
		if (&d[i] == &to->max_batch)
			d[i] = d[i] > s[i] ? d[i] : s[i];
		else
			d[i] += s[i];
	}
}

void cs_stats_print(const char *label, const struct cs_stats *s)
{
	printf("%s: %" PRIu64 " runs, %" PRIu64 " crash states checked (%" PRIu64
	       " at recovery crash points), %" PRIu64 " crash points (%" PRIu64 " enumerated, %" PRIu64
	       " exhaustively; %" PRIu64 " inside recoveries)\n",
	       label, s->runs, s->images + s->nested_images, s->nested_images, s->points,
	       s->points_enum, s->points_exhaustive, s->nested_points);
	printf("%s: %" PRIu64 " groups committed, %" PRIu64 " aborted, %" PRIu64
	       " replayed by recoveries; %" PRIu64 " checkpoints, %" PRIu64 " reopens, %" PRIu64
	       " crash-and-continue; %" PRIu64 " log writes with several groups (max %" PRIu64 ")\n",
	       label, s->groups, s->aborted, s->replayed, s->checkpoints, s->reopens, s->continued,
	       s->batches_multi, s->max_batch);
	printf("%s: engine paths: %" PRIu64 " background checkpoints, %" PRIu64
	       " fast-path (RWF_ATOMIC) groups, %" PRIu64 " buffered writes to O_DIRECT files (twin, replay); "
	       "%" PRIu64 " log writes in flight together reached the disk out of order\n",
	       label, s->bg_checkpoints, s->fast_writes, s->twin_writes, s->reordered);
	printf("%s: classic bugs ruled out in: %" PRIu64 " images ending at a stale checksummed record, "
	       "%" PRIu64 " with a torn record followed by a checksummed one, %" PRIu64
	       " with a data file's size change lost, %" PRIu64 " home writes checked to follow a durable record\n",
	       label, s->stale_end, s->torn_valid, s->size_lost, s->home_checked);
	printf("%s: %" PRIu64 " LZ4-compressed records written; %" PRIu64
	       " early write-backs started (sync_file_range: nothing durable)\n",
	       label, s->compressed, s->early_writebacks);
	if (s->handles)
		printf("%s: several processes: %" PRIu64 " handles opened; %" PRIu64 " processes died (%" PRIu64
		       " at a log write, %" PRIu64 " at a home write, %" PRIu64 " in a checkpoint; %" PRIu64
		       " before their write was issued; %" PRIu64 " deaths put off: shared mutex held); %" PRIu64
		       " pads over %" PRIu64 " groups, %" PRIu64
		       " images matched only with a pending pad not landed\n",
		       label, s->handles, s->kills, s->kills_log, s->kills_home, s->kills_ckpt, s->kills_before,
		       s->kills_held, s->pads, s->pad_groups, s->pad_images);
	if (s->lazy_groups)
		printf("%s: lazy groups: %" PRIu64 " committed, %" PRIu64 " acknowledged by a later sync, "
		       "durable commit or close; %" PRIu64 " syncs; %" PRIu64 " ranges read back by the reader\n",
		       label, s->lazy_groups, s->lazy_acked, s->syncs, s->reader_checks);
	if (s->role_steps)
		printf("%s: kill points: %" PRIu64 " steps of the chosen roles reached, %" PRIu64
		       " deaths at the kill point; %" PRIu64 " acknowledged groups kept by the checked images (summed)\n",
		       label, s->role_steps, s->role_kills, s->acked_checks);
}

/* --- the run ---------------------------------------------------------------------------- */

struct cand {
	uint64_t k;
	struct mf m[MAXF];
};

/* A store handle: the run's one, or (procs) one simulated process's. */
#define MAXP 64
struct proc {
	atomio *st;
	int ids[MAXF];
	int tag;        /* its simfs process (a new one each time it opens) */
	bool dead;      /* died at a crash point of its thread: its handle is abandoned */
	int countdown;  /* crash points of its thread before it dies; -1: it lives */
	bool running;   /* procs: its worker thread runs the phase (under wmu) */
	char errbuf[512]; /* its store reports here */
};

/* A pad seen in a log write while its groups were in the commit order (THE
 * PAD RULE, crashsim.h). */
#define MAXPADS 8
struct pad {
	bool live;      /* its write may still be pending */
	uint64_t off;   /* file offset of its write */
	uint64_t point; /* the crash point of its newest write (an adopter that died
			   writing it leaves that write pending for good; the
			   next adopter writes it again) */
	uint8_t hdr[REC_HDR];
	size_t ng;
	uint64_t *gid, *gseq; /* the groups it took out of the order, their records' seqs */
};

/* The commit order with some pending pads' groups back in (check_point). */
#define MAXALTS 7
struct alt {
	uint64_t *order;
	size_t n;
	uint64_t lo, hi;
};

struct ctx {
	struct cs_cfg c;
	const struct cs_replay *rp;
	struct cs_stats s;
	const char *argv0;
	char *cfgstr;
	struct simfs *fs;
	struct genparams gp;
	struct proc p[MAXP]; /* p[0]: the run's handle (every thread's, unless procs) */
	/* kill points (crashsim.h, KILL POINTS): the batches the dead led (an
	 * adopter leads them next), process 1's steps so far, whether it died
	 * at its kill point, files it registered of its own */
	uint64_t orph[64];
	int norph;
	int role_steps;
	bool role_killed;
	int extra_files;
	int np;              /* handles: threads with procs, else 1 */
	_Atomic int next_tag;
	int ids[MAXF];       /* the ids of the first registration (every handle's) */
	bool registered[MAXF];
	bool appfile[MAXF]; /* written by the application before the store opened */
	const char *paths[MAXF];
	bool checking;

	/* the oracle: groups in commit order, models */
	struct grp *grps; /* by gid, 1..ngids-1 */
	size_t ngids;
	atomic_uchar *acked;
	uint64_t *order;
	uint64_t *oseq;  /* the record seq of each (log writes in flight together may
			    reach the hook out of commit order) */
	size_t norder;
	size_t sort_from; /* entries before it are in their final order */
	uint64_t floor; /* groups 1..floor must survive any crash from now on */
	uint64_t lo;
	struct mf base[MAXF];
	uint64_t base_k;
	struct cand cache[80];
	int ncache;

	uint64_t last_pver;
	bool stopped; /* past the deadline: no more checking */
	int nested_here; /* nested checks at the current crash point */
	uint64_t committing; /* single thread: gid being committed */
	int failed;

	/* crash and continue */
	bool armed;
	int countdown;
	struct {
		bool taken;
		struct simfs *img;
		char *pick;
		uint64_t point;
		uint64_t lo, hi;
		uint64_t *order, *oseq; /* the commit order then (later log writes may
					   still be sorted in before its end) */
		struct mf base[MAXF];
	} snap;
	int last_nrec;
	uint64_t last_rec0_len;
	uint64_t area_off; /* file offset of the record area (the first record write) */

	/* the pad rule */
	struct pad pads[MAXPADS];
	uint8_t *relog;    /* by gid: a pad took it out of the order; it may be logged again */
	uint64_t *inplace; /* by gid: crash point of the newest write of its record again, same
			      seq (an adopter's re-log in place, commit.c), 0 none */
	struct alt alts[MAXALTS];
	int nalt;          /* alternative orders at the crash point being checked */
	int matched_alt;   /* the last match: -1 the order, else alts[i] */

	/* lazy groups (crashsim.h, LAZY GROUPS), by gid, under the simfs lock */
	uint8_t *lzg;       /* 1: committed lazily (or being), not yet acknowledged or lost */
	uint64_t *ticket;   /* its ticket (0: not known yet) */
	size_t tk_from;     /* the order from here on is this session's (tickets start again) */
	uint64_t *gbeg, *gend; /* happens-before: clock before its commit began, after it returned */
	_Atomic uint64_t clock;
	struct proc rd;     /* the reader's handle (reader=1) */

	/* workers of a phase: finished (or dead) */
	pthread_mutex_t wmu;
	pthread_cond_t wcv;
	int wdone;
};

static struct mf *model_at(struct ctx *x, uint64_t k);

static void cache_clear(struct ctx *x)
{
	for (int i = 0; i < x->ncache; i++)
		for (int f = 0; f < MAXF; f++)
			mf_free(&x->cache[i].m[f]);
	x->ncache = 0;
}

static const struct grp *grp_of(struct ctx *x, uint64_t pos) { return &x->grps[x->order[pos]]; }

/* Lower and upper bounds of the groups a crash now may keep. */
static void update_bounds(struct ctx *x)
{
	uint64_t lo = x->lo > x->floor ? x->lo : x->floor;
	for (uint64_t p = lo; p < x->norder; p++)
		if (atomic_load(&x->acked[x->order[p]]))
			lo = p + 1;
	x->lo = lo;
	if (lo > x->base_k) {
		for (; x->base_k < lo; x->base_k++)
			grp_apply(grp_of(x, x->base_k), x->base);
		cache_clear(x);
	}
}

static struct mf *model_at(struct ctx *x, uint64_t k)
{
	if (k == x->base_k)
		return x->base;
	if (k < x->base_k || k > x->norder || k - x->base_k >= sizeof(x->cache) / sizeof(x->cache[0])) {
		fprintf(stderr, "crashsim: model of %llu groups asked, base %llu, %zu issued\n",
			(unsigned long long)k, (unsigned long long)x->base_k, x->norder);
		abort();
	}
	for (int i = 0; i < x->ncache; i++)
		if (x->cache[i].k == k)
			return x->cache[i].m;
	if (x->ncache == (int)(sizeof(x->cache) / sizeof(x->cache[0])))
		cache_clear(x);
	const struct mf *prev = model_at(x, k - 1);
	struct cand *c = &x->cache[x->ncache];
	memset(c, 0, sizeof(*c));
	for (int f = 0; f < x->c.files; f++)
		mf_copy(&c->m[f], &prev[f]);
	grp_apply(grp_of(x, k - 1), c->m);
	c->k = k;
	x->ncache++;
	return c->m;
}

/* Does fs hold model m?  Else describe the first difference. */
static bool files_equal(struct ctx *x, struct simfs *fs, const struct mf *m, char *why, size_t wsz)
{
	for (int f = 0; f < x->c.files; f++) {
		uint64_t where = 0;
		int r = simfs_cmp(fs, x->paths[f], m[f].b, m[f].size, &where);
		if (r == 0 || (r == -ENOENT && m[f].size == 0))
			continue;
		if (why) {
			int64_t sz = simfs_size(fs, x->paths[f]);
			uint8_t got = 0;
			if (r == 1 && (uint64_t)sz > where)
				simfs_read(fs, x->paths[f], where, &got, 1);
			snprintf(why, wsz, "%s: size %lld (model %llu), first difference at %llu: %02x, model %02x",
				 x->paths[f], (long long)sz, (unsigned long long)m[f].size,
				 (unsigned long long)where, got, where < m[f].size ? m[f].b[where] : 0);
		}
		return false;
	}
	return true;
}

static uint32_t store_flags(const struct cs_cfg *c)
{
	return ATOMIO_CREATE | (c->bg ? 0 : ATOMIO_NO_BG_CHECKPOINT) |
	       (c->fast ? ATOMIO_FAST_PATH_FORCE : 0) | (c->dhome ? ATOMIO_DIRECT_HOME : 0);
}

/* Without background checkpoints nothing may flush behind the run's back
 * (determinism): a lazy delay of 60 s, the largest there is. */
static uint64_t lazy_delay(const struct cs_cfg *c)
{
	return c->lazy_delay_us ? c->lazy_delay_us : c->bg ? 0 : 60000000;
}

/* Replayable by seed: one committing thread and no checkpointer thread. */
static bool replayable(const struct ctx *x) { return x->c.threads == 1 && !x->c.bg && !x->c.procs; }

/* The first k in [a->lo, a->hi] whose model in the alternative order a the
 * files of img equal, or -1.  Its models grow from the base (base_k is
 * below every group a puts back: check_point). */
static int64_t match_alt(struct ctx *x, struct simfs *img, const struct alt *a, uint64_t lo, uint64_t hi)
{
	struct mf m[MAXF];
	memset(m, 0, sizeof(m));
	for (int f = 0; f < x->c.files; f++)
		mf_copy(&m[f], &x->base[f]);
	int64_t k = -1;
	for (uint64_t kk = x->base_k; kk <= hi && kk <= a->n; kk++) {
		if (kk > x->base_k)
			grp_apply(&x->grps[a->order[kk - 1]], m);
		if (kk >= lo && files_equal(x, img, m, NULL, 0)) {
			k = (int64_t)kk;
			break;
		}
	}
	for (int f = 0; f < MAXF; f++)
		mf_free(&m[f]);
	return k;
}

#define ANY_ORDER -2  /* recover_match: the order, else any alternative */
#define MAIN_ORDER -1 /* the order only */

/* Recover fs (atomio_open with recovery) and find the k in [lo, hi] whose
 * model it equals -- in the commit order, or (want ANY_ORDER, or an
 * alternative's index) in an alternative order (THE PAD RULE): then lo and
 * hi are that order's own unless want names it.  x->matched_alt says which
 * matched.  -1 with why on failure. */
static int64_t recover_match(struct ctx *x, struct simfs *img, uint64_t lo, uint64_t hi, char *why,
			     size_t wsz, int want)
{
	x->matched_alt = MAIN_ORDER;
	if (x->rp && x->rp->stop_at > 0 && now() > x->rp->stop_at)
		x->stopped = true;
	if (x->rp && x->rp->stop_states > 0 && x->s.images + x->s.nested_images >= x->rp->stop_states)
		x->stopped = true;
	struct simfs *prev = simfs_enter(img);
	char err[512] = "";
	struct atomio_options o = {.log_size = x->c.log, .flags = store_flags(&x->c), .errbuf = err,
				   .errbuf_size = sizeof(err)};
	atomio *st = NULL;
	int64_t k = -1;
	int r = atomio_open(LOG_PATH, &o, &st);
	if (r < 0) {
		snprintf(why, wsz, "recovery (atomio_open) failed: %d %s: %s", r, atomio_strerror(r), err);
		goto out;
	}
	struct atomio_stats as;
	atomio_stats(st, &as);
	x->s.replayed += as.groups_recovered;
	char w1[400] = "", w2[400] = "";
	for (uint64_t kk = lo; kk <= hi && want < 0; kk++)
		if (files_equal(x, img, model_at(x, kk), kk == lo ? w1 : kk == hi ? w2 : NULL, 400)) {
			k = (int64_t)kk;
			break;
		}
	for (int i = 0; i < x->nalt && k < 0 && want != MAIN_ORDER; i++) {
		if (want >= 0 && i != want)
			continue;
		k = match_alt(x, img, &x->alts[i], want >= 0 ? lo : x->alts[i].lo, want >= 0 ? hi : x->alts[i].hi);
		if (k >= 0)
			x->matched_alt = i;
	}
	if (k < 0 && want >= 0)
		snprintf(why, wsz, "after recovery (%llu groups replayed) the files match no state "
			 "between groups 1..%llu and 1..%llu of the order with a pending pad's groups back",
			 (unsigned long long)as.groups_recovered, (unsigned long long)lo, (unsigned long long)hi);
	else if (k < 0)
		snprintf(why, wsz, "after recovery (%llu groups replayed) the files match no state "
			 "between groups 1..%llu and 1..%llu; vs %llu: %s%s%s",
			 (unsigned long long)as.groups_recovered, (unsigned long long)lo,
			 (unsigned long long)hi, (unsigned long long)lo, w1, hi != lo ? "; vs hi: " : "", w2);
	r = atomio_close(st);
	if (r < 0 && k >= 0) {
		snprintf(why, wsz, "atomio_close after recovery failed: %d %s", r, atomio_strerror(r));
		k = -1;
	}
out:
	simfs_enter(prev);
	return k;
}

/* --- classic-bug scenario counters ------------------------------------------------- */

/* Is there a record at area offset at whose checksum is right (any seq or
 * epoch)?  The codec's rules (src/codec.c), as recovery's. */
static bool rec_checksummed(struct simfs *img, const struct sb_disk *sb, uint64_t at, struct rec_hdr_disk *h)
{
	if (!codec_rec_fits(at, sb->area_size) ||
	    simfs_read(img, LOG_PATH, sb->area_off + at, h, sizeof(*h)) != (int64_t)sizeof(*h) ||
	    h->magic != REC_MAGIC || h->rec_len < REC_HDR || h->rec_len > sb->area_size - at ||
	    h->rec_len > (8u << 20) || h->rec_len % 8)
		return false;
	uint8_t *b = malloc(h->rec_len);
	if (!b)
		return false;
	bool ok = simfs_read(img, LOG_PATH, sb->area_off + at, b, h->rec_len) == (int64_t)h->rec_len &&
		  codec_rec_sum_ok(b, h, sb->store_id);
	free(b);
	return ok;
}

/* Is the record at area offset at the one recovery would take next? */
static bool rec_due(struct simfs *img, const struct sb_disk *sb, uint64_t at, uint64_t seq,
		    struct rec_hdr_disk *h)
{
	const struct rec_expect e = {.seq = seq, .epoch = sb->epoch, .area_size = sb->area_size,
				     .version = sb->version};
	return rec_checksummed(img, sb, at, h) && codec_rec_check(h, at, &e) == REC_OK;
}

static int img_area_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct sb_disk *sb = ((void **)ctx)[1];
	int64_t n = simfs_read(((void **)ctx)[0], LOG_PATH, sb->area_off + off, buf, len);
	return n == (int64_t)len ? 0 : -EIO;
}

/* Statistics of the suite: which classic bugs this image could have shown
 * (the log's end at a stale checksummed record; a torn record followed by a
 * valid one of the same epoch).  The superblock, the walk and the look past
 * its end follow recovery's rules through the codec. */
static void analyze_image(struct ctx *x, struct simfs *img, uint64_t lo, uint64_t hi)
{
	for (int f = 0; f < x->c.files; f++) {
		int64_t sz = simfs_size(img, x->paths[f]);
		if (sz < 0)
			sz = 0;
		if ((uint64_t)sz != model_at(x, lo)[f].size && (uint64_t)sz != model_at(x, hi)[f].size) {
			x->s.size_lost++;
			break;
		}
	}
	uint8_t sbb[2 * SB_SLOT];
	int64_t fsz = simfs_size(img, LOG_PATH);
	if (fsz < 0 || simfs_read(img, LOG_PATH, 0, sbb, sizeof(sbb)) != (int64_t)sizeof(sbb))
		return;
	const struct sb_disk *s0 = (const void *)sbb, *s1 = (const void *)(sbb + SB_SLOT);
	int cur = codec_sb_current(s0, codec_sb_check(s0, (uint64_t)fsz, NULL) == 0, s1,
				   codec_sb_check(s1, (uint64_t)fsz, NULL) == 0);
	if (cur < 0)
		return;
	const struct sb_disk *best = cur ? s1 : s0;
	uint64_t pos = best->head_off, seq = best->head_seq;
	struct rec_hdr_disk h;
	for (int n = 0; n < 100000; n++) {
		bool ok = rec_due(img, best, pos, seq, &h);
		if (!ok && pos % best->block == 0 && pos && (ok = rec_due(img, best, 0, seq, &h)))
			pos = 0;
		if (!ok)
			break;
		pos = codec_rec_next(&h, pos, best->block);
		seq++;
	}
	/* The log ends at pos: what lies there? */
	if (rec_checksummed(img, best, pos, &h)) {
		x->s.stale_end++;
		return;
	}
	/* a torn record followed by a checksummed record of this epoch */
	void *ctx[2] = {img, (void *)best};
	if (codec_stop_suspect(img_area_read, ctx, best->area_size, best->block, best->epoch, pos, seq) == 1)
		x->s.torn_valid++;
}

/* --- failure reports ----------------------------------------------------------------------- */

static const char *opname(enum simfs_opkind k)
{
	static const char *n[] = {"?", "create", "write", "truncate", "fsync", "fdatasync", "rename", "unlink"};
	return (unsigned)k < sizeof(n) / sizeof(n[0]) ? n[k] : "?";
}

struct where {
	const struct simfs_opinfo *op;
	uint64_t point; /* crash point */
	uint64_t idx, n; /* image idx of n */
	bool exhaustive;
	const char *pick;
	/* nested: a crash inside the recovery of that image */
	const struct simfs_opinfo *nop;
	uint64_t nidx, nn;
	const char *npick;
	bool snapshot; /* crash and continue */
};

static void dump_image(struct ctx *x, struct simfs *src, const char *pick, const char *dir)
{
	struct simfs_pick p;
	if (simfs_pick_parse(pick, &p) < 0)
		return;
	struct simfs *img = simfs_crash(src, &p);
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
	if (system(cmd) == 0 && simfs_materialize(img, dir) == 0)
		printf("  crash image (before recovery) written to %s (open it with ATOMIO_FORCE_PATHS)\n", dir);
	simfs_free(img);
	simfs_pick_free(&p);
	(void)x;
}

static void report(struct ctx *x, struct simfs *src, const char *why, const struct where *w)
{
	x->failed = 1;
	printf("CRASH-CHECK FAILED: %s\n", why);
	printf("  seed %llu, config %s\n", (unsigned long long)x->c.seed, x->cfgstr);
	if (w->snapshot)
		printf("  crash-and-continue image from crash point %llu\n", (unsigned long long)w->point);
	else if (w->op)
		printf("  crash point %llu (during %s %s off %llu len %llu%s), image %llu of %llu (%s)\n",
		       (unsigned long long)w->op->index, opname(w->op->kind), w->op->path,
		       (unsigned long long)w->op->off, (unsigned long long)w->op->len,
		       w->op->sync ? ", durable on return" : "", (unsigned long long)w->idx,
		       (unsigned long long)w->n, w->exhaustive ? "exhaustive" : "sampled");
	printf("  pick %s\n", w->pick);
	/* the commit order around the bounds (group:seq, f = kernel fast path) */
	printf("  commit order from group %llu:", (unsigned long long)(x->lo > 6 ? x->lo - 6 : 0));
	for (size_t i = x->lo > 6 ? x->lo - 6 : 0; i < x->norder; i++)
		printf(" %s%llu:%llu%s", i == x->lo ? "[" : "", (unsigned long long)x->order[i],
		       (unsigned long long)x->oseq[i], atomic_load(&x->acked[x->order[i]]) ? "a" : "");
	printf("\n");
	if (src && w->op && !w->snapshot) {
		size_t n = simfs_pending(src, NULL, 0);
		struct simfs_item *v = calloc(n ? n : 1, sizeof(*v));
		if (v) {
			n = simfs_pending(src, v, n);
			printf("  pending items:");
			for (size_t i = 0; i < n; i++)
				printf(" [%s %s %llu+%llu%s]",
				       v[i].kind == SIMFS_DATA ? "data" : v[i].kind == SIMFS_SIZE ? "size" : "dir",
				       v[i].path, (unsigned long long)(v[i].kind == SIMFS_SIZE ? v[i].size : v[i].off),
				       (unsigned long long)v[i].len, v[i].atomic ? " atomic" : "");
			printf("\n");
			free(v);
		}
	}
	if (w->nop)
		printf("  then a crash inside recovery at its point %llu (during %s %s off %llu len %llu), "
		       "image %llu of %llu, pick %s\n",
		       (unsigned long long)w->nop->index, opname(w->nop->kind), w->nop->path,
		       (unsigned long long)w->nop->off, (unsigned long long)w->nop->len,
		       (unsigned long long)w->nidx, (unsigned long long)w->nn, w->npick);
	if (x->c.threads == 1 && !x->c.procs) {
		if (!replayable(x))
			printf("  background checkpointer thread: the run is not deterministic; the line "
			       "below replays it with another interleaving (bg=0 for a deterministic one)\n");
		printf("  reproduce: %s --cfg '%s'", x->argv0, x->cfgstr);
		if (!w->snapshot) {
			printf(" --point %llu", (unsigned long long)w->point);
			if (strcmp(w->pick, "-"))
				printf(" --pick '%s'", w->pick);
			if (w->nop)
				printf(" --npoint %llu --npick '%s'", (unsigned long long)w->nop->index, w->npick);
		}
		printf(" [--dump DIR] [-v]\n");
	} else if (x->c.procs) {
		printf("  several processes: not deterministic; the line below runs this configuration "
		       "again, with another interleaving\n");
		printf("  reproduce: %s --cfg '%s' [--dump DIR] [-v]\n", x->argv0, x->cfgstr);
	} else {
		printf("  multi-threaded run: not replayable by seed\n");
	}
	const char *dir = x->rp && x->rp->dump ? x->rp->dump : NULL;
	char def[256];
	/* A failure that cannot be replayed keeps its image as evidence, and says
	 * where; a mutant hunt's failure is the expected outcome, so it keeps none
	 * (its reproduce line is the evidence) and leaves nothing behind. */
	if (!dir && !replayable(x) && !(x->rp && x->rp->hunt)) {
		snprintf(def, sizeof(def), "/tmp/atomio-crash-fail-%llu", (unsigned long long)x->c.seed);
		dir = def;
	}
	if (dir && src && w->snapshot) {
		/* src is the crash-and-continue image itself */
		char cmd[4200];
		snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
		if (system(cmd) == 0 && simfs_materialize(src, dir) == 0)
			printf("  crash image (before recovery) written to %s (open it with ATOMIO_FORCE_PATHS)\n", dir);
	} else if (dir && src && !w->nop && strcmp(w->pick, "-")) {
		dump_image(x, src, w->pick, dir);
	}
	fflush(stdout);
}

/* Shrink a failing pick: drop what is not needed for the failure, then
 * untear what still fails whole. */
static void minimize(struct ctx *x, struct simfs *fs, struct simfs_pick *p, uint64_t lo, uint64_t hi)
{
	char why[1024];
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < p->n; i++) {
			struct simfs_fate save = p->f[i];
			if (pass == 0 && save.fate != SIMFS_DROP)
				p->f[i].fate = SIMFS_DROP;
			else if (pass == 1 && save.fate == SIMFS_TEAR)
				p->f[i].fate = SIMFS_KEEP;
			else
				continue;
			struct simfs *img = simfs_crash(fs, p);
			int64_t k = recover_match(x, img, lo, hi, why, sizeof(why), ANY_ORDER);
			simfs_free(img);
			if (k >= 0)
				p->f[i] = save; /* needed */
		}
}

/* --- crash points ------------------------------------------------------------------------------ */

struct nest {
	struct ctx *x;
	int64_t k;
	uint64_t npoints; /* crash points of this recovery (from a first, unhooked one) */
	const struct simfs_opinfo *op;
	uint64_t idx, n;
	bool exhaustive;
	const char *pick;
	uint64_t last_pver;
	uint64_t seed;
	int alt;     /* the order k is of (recover_match's want) */
};

static void nested_hook(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
{
	struct nest *ns = arg;
	struct ctx *x = ns->x;
	if (x->failed)
		return;
	x->s.nested_points++;
	const struct cs_replay *rp = x->rp;
	if (rp && rp->npoint >= 0 && (int64_t)op->index != rp->npoint)
		return;
	if (op->pending_version == ns->last_pver && !(rp && rp->npoint >= 0))
		return;
	/* A long recovery has a crash point per replayed write: check a
	 * sample of them, and always its last ones (syncs, superblock). */
	uint64_t want = x->c.npoints > 0 ? (uint64_t)x->c.npoints : 1;
	if (!(rp && rp->npoint >= 0) && op->index + 4 < ns->npoints && ns->npoints > want &&
	    mix64(ns->seed ^ op->index) % ns->npoints >= want)
		return;
	ns->last_pver = op->pending_version;
	struct simfs_enum e = {.unit = x->c.unit, .exhaustive_cap = x->c.ncap,
			       .samples = x->c.nsamples, .seed = mix64(x->c.seed ^ ns->idx) ^ op->index};
	bool ex;
	uint64_t n = simfs_enum_count(fs, &e, &ex);
	if (rp && rp->npick)
		n = 1;
	char why[1024];
	for (uint64_t i = 0; i < n && !x->failed && !x->stopped; i++) {
		if (rp && rp->nimage >= 0 && (int64_t)i != rp->nimage)
			continue;
		struct simfs_pick p;
		if (rp && rp->npick)
			simfs_pick_parse(rp->npick, &p);
		else
			simfs_enum_pick(fs, &e, i, &p);
		struct simfs *img = simfs_crash(fs, &p);
		int64_t k = recover_match(x, img, (uint64_t)ns->k, (uint64_t)ns->k, why, sizeof(why), ns->alt);
		simfs_free(img);
		x->s.nested_images++;
		if (rp && rp->verbose)
			printf("  recovery point %llu image %llu: %s\n", (unsigned long long)op->index,
			       (unsigned long long)i, k >= 0 ? "ok" : why);
		if (k < 0) {
			minimize(x, fs, &p, (uint64_t)ns->k, (uint64_t)ns->k);
			char *ps = simfs_pick_format(&p);
			struct where w = {.op = ns->op, .point = ns->op->index, .idx = ns->idx, .n = ns->n,
					  .exhaustive = ns->exhaustive, .pick = ns->pick, .nop = op,
					  .nidx = i, .nn = n, .npick = ps};
			char why2[1200];
			snprintf(why2, sizeof(why2), "recovery crashed and recovered again gives another "
				 "result than recovery (groups 1..%lld): %s", (long long)ns->k, why);
			report(x, NULL, why2, &w);
			free(ps);
		}
		simfs_pick_free(&p);
	}
}

/* Crash recovery itself: recover the same image again with a hook at every
 * I/O point of the recovery; each of their images must recover to k. */
static void nested_check(struct ctx *x, struct simfs *fs, const struct simfs_pick *p, int64_t k,
			 struct nest *ns)
{
	struct simfs *img = simfs_crash(fs, p);
	ns->x = x;
	ns->k = k;
	ns->last_pver = UINT64_MAX;
	ns->seed = mix64(x->c.seed ^ 0x7e57) ^ ns->op->index ^ (ns->idx << 20);
	simfs_set_hook(img, nested_hook, ns);
	char why[1024];
	int64_t k2 = recover_match(x, img, (uint64_t)k, (uint64_t)k, why, sizeof(why), ns->alt);
	if (k2 < 0 && !x->failed) {
		struct where w = {.op = ns->op, .point = ns->op->index, .idx = ns->idx, .n = ns->n,
				  .exhaustive = ns->exhaustive, .pick = ns->pick};
		report(x, fs, why, &w);
	}
	simfs_free(img);
}

static void check_one(struct ctx *x, struct simfs *fs, const struct simfs_opinfo *op,
		      struct simfs_pick *p, uint64_t i, uint64_t n, bool ex, uint64_t lo, uint64_t hi,
		      struct rng *nr);

/* Classic bug 2, on purpose: where one log write carries several records,
 * an image in which a sector of the first record was lost and the rest
 * (later records, older items) landed. */
static void targeted_torn(struct ctx *x, struct simfs *fs, const struct simfs_opinfo *op, uint64_t lo,
			  uint64_t hi, struct rng *nr)
{
	struct simfs_enum all = {.unit = x->c.unit, .exhaustive_cap = 0, .samples = 2};
	struct simfs_pick p;
	simfs_enum_pick(fs, &all, 1, &p); /* everything landed... */
	if (p.n) {
		struct simfs_fate *f = &p.f[p.n - 1]; /* ...but the newest item: this write */
		/* lose one sector wholly inside the first record (the next
		 * record starts in a later one), else the first sector */
		f->fate = SIMFS_TEAR;
		f->tear = x->last_rec0_len >= x->c.unit ? SIMFS_T_HOLE : SIMFS_T_SUFFIX;
		f->arg = x->last_rec0_len >= x->c.unit ? 0 : 1;
		check_one(x, fs, op, &p, UINT64_MAX, 1, false, lo, hi, nr);
	}
	simfs_pick_free(&p);
}

/* --- the pad rule (crashsim.h) --------------------------------------------------------- */

static void pad_retire(struct pad *pd)
{
	free(pd->gid);
	free(pd->gseq);
	memset(pd, 0, sizeof(*pd));
}

static void pads_retire_all(struct ctx *x)
{
	for (int i = 0; i < MAXPADS; i++)
		pad_retire(&x->pads[i]);
	memset(x->relog, 0, x->ngids);
}

static bool pads_live(const struct ctx *x)
{
	for (int i = 0; i < MAXPADS; i++)
		if (x->pads[i].live)
			return true;
	return false;
}

/* A pad stays live while its write is a pending item of the log. */
static void pads_update(struct ctx *x, struct simfs *fs)
{
	if (!pads_live(x))
		return;
	size_t n = simfs_pending(fs, NULL, 0);
	struct simfs_item *v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		abort();
	n = simfs_pending(fs, v, n);
	for (int i = 0; i < MAXPADS; i++) {
		struct pad *pd = &x->pads[i];
		bool pending = false;
		for (size_t j = 0; j < n && pd->live && !pending; j++)
			pending = v[j].kind == SIMFS_DATA && v[j].point == pd->point && v[j].off == pd->off &&
				  v[j].len >= REC_HDR && v[j].data && !strcmp(v[j].path, LOG_PATH) &&
				  !memcmp(v[j].data, pd->hdr, REC_HDR);
		if (pd->live && !pending)
			pad_retire(pd);
	}
	free(v);
}

static void alts_free(struct ctx *x)
{
	for (int i = 0; i < x->nalt; i++)
		free(x->alts[i].order);
	x->nalt = 0;
}

/* The orders with the groups of some live pads back at their seqs: every
 * non-empty subset of (at most three) live pads. */
static void alts_build(struct ctx *x)
{
	alts_free(x);
	int live[3], nl = 0;
	for (int i = 0; i < MAXPADS && nl < 3; i++)
		if (x->pads[i].live)
			live[nl++] = i;
	for (int mask = 1; mask < (1 << nl); mask++) {
		size_t extra = 0;
		for (int j = 0; j < nl; j++)
			if (mask & (1 << j))
				extra += x->pads[live[j]].ng;
		struct alt *a = &x->alts[x->nalt++];
		uint64_t *seq = malloc((x->norder + extra) * sizeof(*seq));
		a->order = malloc((x->norder + extra) * sizeof(*a->order));
		if (!seq || !a->order)
			abort();
		memcpy(a->order, x->order, x->norder * sizeof(*a->order));
		memcpy(seq, x->oseq, x->norder * sizeof(*seq));
		a->n = x->norder;
		for (int j = 0; j < nl; j++) {
			const struct pad *pd = &x->pads[live[j]];
			for (size_t g = 0; (mask & (1 << j)) && g < pd->ng; g++) {
				size_t q = x->sort_from;
				while (q < a->n && seq[q] < pd->gseq[g])
					q++;
				memmove(&a->order[q + 1], &a->order[q], (a->n - q) * sizeof(*a->order));
				memmove(&seq[q + 1], &seq[q], (a->n - q) * sizeof(*seq));
				a->order[q] = pd->gid[g];
				seq[q] = pd->gseq[g];
				a->n++;
			}
		}
		free(seq);
		uint64_t lo = x->floor > x->base_k ? x->floor : x->base_k;
		for (uint64_t q = lo; q < a->n; q++)
			if (atomic_load(&x->acked[a->order[q]]))
				lo = q + 1;
		a->lo = lo;
		a->hi = a->n;
	}
}

/* A pad (header h) written at file offset off: the groups of this session
 * whose records carry its seqs leave the order (THE PAD RULE). */
static void note_pad(struct ctx *x, const struct simfs_opinfo *op, const struct rec_hdr_disk *h)
{
	update_bounds(x);
	x->s.pads++;
	uint64_t count = h->reserved;
	CS_TRACE("P%llu pad off %llu seq %llu count %llu\n", (unsigned long long)op->index,
		 (unsigned long long)op->off, (unsigned long long)h->seq, (unsigned long long)count);
	for (int i = 0; i < MAXPADS; i++)
		if (x->pads[i].live && x->pads[i].off == op->off && !memcmp(x->pads[i].hdr, h, REC_HDR)) {
			/* the same pad again: its first writer died writing it */
			x->pads[i].point = op->index;
			return;
		}
	struct pad *pd = NULL;
	for (int i = 0; i < MAXPADS && !pd; i++)
		if (!x->pads[i].live)
			pd = &x->pads[i];
	if (!pd) {
		struct where w = {.op = op, .point = op->index, .pick = "-"};
		report(x, NULL, "harness: more pads pending at once than it keeps", &w);
		return;
	}
	pad_retire(pd);
	pd->off = op->off;
	pd->point = op->index;
	memcpy(pd->hdr, h, REC_HDR);
	pd->gid = malloc((x->norder + 1) * sizeof(*pd->gid));
	pd->gseq = malloc((x->norder + 1) * sizeof(*pd->gseq));
	if (!pd->gid || !pd->gseq)
		abort();
	for (size_t i = x->sort_from; i < x->norder && !x->failed;) {
		if (x->oseq[i] < h->seq || x->oseq[i] - h->seq >= count) {
			i++;
			continue;
		}
		if (i < x->lo) {
			char why[300];
			snprintf(why, sizeof(why), "a pad (seqs %llu..%llu) over the record of group %llu, which "
				 "an acknowledged group follows in the commit order",
				 (unsigned long long)h->seq, (unsigned long long)(h->seq + count - 1),
				 (unsigned long long)x->order[i]);
			struct where w = {.op = op, .point = op->index, .pick = "-"};
			report(x, NULL, why, &w);
			break;
		}
		CS_TRACE("  pad takes gid %llu seq %llu\n", (unsigned long long)x->order[i],
			 (unsigned long long)x->oseq[i]);
		pd->gid[pd->ng] = x->order[i];
		pd->gseq[pd->ng++] = x->oseq[i];
		x->relog[x->order[i]] = 1;
		memmove(&x->order[i], &x->order[i + 1], (x->norder - i - 1) * sizeof(*x->order));
		memmove(&x->oseq[i], &x->oseq[i + 1], (x->norder - i - 1) * sizeof(*x->oseq));
		x->norder--;
		cache_clear(x);
	}
	x->s.pad_groups += pd->ng;
	pd->live = pd->ng > 0;
	if (!pd->live)
		pad_retire(pd);
}

static void check_point(struct ctx *x, struct simfs *fs, const struct simfs_opinfo *op)
{
	update_bounds(x);
	alts_build(x);
	for (int i = 0; i < x->nalt && !x->failed; i++) {
		/* every group a pad would put back lies past the acknowledged ones */
		for (uint64_t q = 0; q < x->base_k && q < x->alts[i].n; q++)
			if (x->alts[i].order[q] != x->order[q]) {
				struct where w = {.op = op, .point = op->index, .pick = "-"};
				report(x, NULL, "a group acknowledged while a pad over earlier groups is not "
					 "durable (atomio acknowledges none before it is)", &w);
				break;
			}
	}
	if (x->failed) {
		alts_free(x);
		return;
	}
	uint64_t lo = x->lo, hi = x->norder;
	const struct cs_replay *rp = x->rp;
	struct simfs_enum e = {.unit = x->c.unit, .exhaustive_cap = x->c.cap, .samples = x->c.samples,
			       .seed = mix64(x->c.seed) ^ op->index};
	bool ex;
	uint64_t n = simfs_enum_count(fs, &e, &ex);
	if (rp && rp->pick)
		n = 1;
	x->s.points_enum++;
	x->s.points_exhaustive += ex;
	x->nested_here = 0;
	struct rng nr = {mix64(x->c.seed ^ 0x4e57) ^ op->index};
	for (uint64_t i = 0; i < n && !x->failed && !x->stopped; i++) {
		if (rp && rp->image >= 0 && (int64_t)i != rp->image)
			continue;
		struct simfs_pick p;
		if (rp && rp->pick)
			simfs_pick_parse(rp->pick, &p);
		else
			simfs_enum_pick(fs, &e, i, &p);
		check_one(x, fs, op, &p, i, n, ex, lo, hi, &nr);
		simfs_pick_free(&p);
	}
	if (!x->failed && !x->stopped && !(rp && (rp->pick || rp->image >= 0)) &&
	    op->kind == SIMFS_OP_WRITE && x->last_nrec > 1 && !strcmp(op->path, LOG_PATH))
		targeted_torn(x, fs, op, lo, hi, &nr);
	alts_free(x);
}

static void check_one(struct ctx *x, struct simfs *fs, const struct simfs_opinfo *op,
		      struct simfs_pick *p, uint64_t i, uint64_t n, bool ex, uint64_t lo, uint64_t hi,
		      struct rng *nr)
{
	const struct cs_replay *rp = x->rp;
	char why[1024];
	struct simfs *img = simfs_crash(fs, p);
	analyze_image(x, img, lo, hi);
	int64_t k = recover_match(x, img, lo, hi, why, sizeof(why), ANY_ORDER);
	int alt = x->matched_alt;
	if (k >= 0 && alt >= 0)
		x->s.pad_images++;
	uint64_t rpoints = simfs_points(img);
	simfs_free(img);
	x->s.images++;
	x->s.acked_checks += lo;
	if (rp && rp->verbose)
		printf("point %llu (%s %s) image %llu/%llu [%llu..%llu]: %s\n",
		       (unsigned long long)op->index, opname(op->kind), op->path, (unsigned long long)i,
		       (unsigned long long)n, (unsigned long long)lo, (unsigned long long)hi,
		       k >= 0 ? "ok" : why);
	if (k < 0) {
		minimize(x, fs, p, lo, hi);
		char *ps = simfs_pick_format(p);
		struct where w = {.op = op, .point = op->index, .idx = i, .n = n, .exhaustive = ex,
				  .pick = ps};
		report(x, fs, why, &w);
		free(ps);
		return;
	}
	bool nest = (int)below(nr, 100) < x->c.nest_pct && x->nested_here < x->c.nest_max;
	if (rp && (rp->npoint >= 0 || rp->npick))
		nest = true;
	if (nest) {
		x->nested_here++;
		char *ps = simfs_pick_format(p);
		struct nest ns = {.op = op, .idx = i, .n = n, .exhaustive = ex, .pick = ps,
				  .npoints = rpoints, .alt = alt};
		nested_check(x, fs, p, k, &ns);
		free(ps);
	}
	if (rp && rp->dump && !x->failed) {
		char *ps = simfs_pick_format(p);
		dump_image(x, fs, ps, rp->dump);
		free(ps);
	}
}

/* Invariant I1 of lazy groups (docs/plans/36-lazy-groups.md): visible
 * groups are logged in ticket order, so the order by record seq must list
 * the lazy groups whose tickets are known by rising ticket (a group logged
 * twice -- a re-log in place -- has the same ticket twice).  A later lazy
 * group logged before an earlier one could survive it (mutant lzorder). */
static void check_tickets(struct ctx *x)
{
	uint64_t last = 0, lastg = 0;
	for (size_t j = x->tk_from; j < x->norder && !x->failed; j++) {
		uint64_t g = x->order[j], t = x->ticket[g];
		if (!t)
			continue;
		if (t < last) {
			char why[200];
			snprintf(why, sizeof(why), "lazy group %llu (ticket %llu) logged after group %llu "
				 "(ticket %llu): not in commit order", (unsigned long long)g,
				 (unsigned long long)t, (unsigned long long)lastg, (unsigned long long)last);
			struct where w = {.point = 0, .pick = "-"};
			report(x, NULL, why, &w);
		}
		last = t;
		lastg = g;
	}
}

/* Group gid takes its place in the commit order.  Records: by seq, which is
 * the commit order (two log writes in flight at once may reach their crash
 * points in either order).  A fast-path group (seq 0 here) comes after every
 * group issued before it and before any issued after it: no log write is in
 * flight while it is written (commit.c). */
static void order_add(struct ctx *x, uint64_t gid, uint64_t seq, bool fast)
{
	/* A re-log (commit.c, adopt_relog_locked_drops): a dead leader's
	 * records written again, byte for byte, at their place: the group
	 * keeps the place it has (a padded group logged again has a new seq). */
	for (size_t j = 0; j < x->norder && !fast; j++)
		if (x->order[j] == gid && x->oseq[j] == seq)
			return;
	size_t p = x->norder;
	while (!fast && p > x->sort_from && x->oseq[p - 1] > seq)
		p--;
	if (p < x->lo) {
		/* cannot happen: a group is acknowledged only after every
		 * earlier batch's log write */
		struct where w = {.point = 0, .pick = "-"};
		report(x, NULL, "harness: a record of a group before an acknowledged one "
			 "reached its log write after it", &w);
		return;
	}
	if (p < x->norder) {
		memmove(&x->order[p + 1], &x->order[p], (x->norder - p) * sizeof(*x->order));
		memmove(&x->oseq[p + 1], &x->oseq[p], (x->norder - p) * sizeof(*x->oseq));
		cache_clear(x);
		x->s.reordered++;
	}
	x->order[p] = gid;
	x->oseq[p] = seq;
	x->norder++;
	if (fast)
		x->sort_from = x->norder;
	check_tickets(x);
}

/* A log write: which groups (in which order) does it carry? */
static void parse_log_write(struct ctx *x, const struct simfs_opinfo *op)
{
	x->last_nrec = 0;
	if (op->len < REC_HDR || op->len > (64u << 20))
		return;
	uint8_t *b = malloc(op->len);
	if (!b)
		abort();
	uint64_t at = 0;
	for (int i = 0; i < op->iovcnt; i++) {
		memcpy(b + at, op->iov[i].iov_base, op->iov[i].iov_len);
		at += op->iov[i].iov_len;
	}
	uint64_t p = 0;
	int nrec = 0;
	while (p + REC_HDR <= op->len) {
		struct rec_hdr_disk h;
		memcpy(&h, b + p, sizeof(h));
		if (h.magic == REC_MAGIC && h.type == REC_TYPE_PAD) {
			note_pad(x, op, &h); /* a pad ends its log write */
			break;
		}
		if (h.magic != REC_MAGIC || h.rec_len < REC_HDR + REC_DESC || p + h.rec_len > op->len)
			break;
		struct seg_disk d;
		memcpy(&d, b + p + REC_HDR, sizeof(d));
		uint64_t dp = p + REC_HDR + REC_DESC * (uint64_t)h.nsegs + d.data_off;
		uint64_t gid = 0;
		if (h.flags & REC_F_LZ4) {
			/* compressed: the group id is in the raw data */
			uint64_t cp = p + REC_HDR + REC_DESC * (uint64_t)h.nsegs;
			char *raw = h.raw_len <= COMP_MAX ? malloc(h.raw_len) : NULL;
			if (raw && cp + h.data_len <= op->len && h.data_len < INT32_MAX &&
			    LZ4_decompress_safe((const char *)b + cp, raw, (int)h.data_len, (int)h.raw_len) ==
				    (int)h.raw_len &&
			    d.data_off + 8 <= h.raw_len)
				memcpy(&gid, raw + d.data_off, 8);
			free(raw);
			x->s.compressed++;
		} else if (dp + 8 <= p + h.rec_len) {
			memcpy(&gid, b + dp, 8);
		}
		char why[256] = "";
		if (gid == 0 || gid >= x->ngids)
			snprintf(why, sizeof(why), "a log record carries no group id (%llu)", (unsigned long long)gid);
		else if (x->c.threads == 1 && !x->c.procs && gid != x->committing && !x->lzg[gid])
			/* (lazy groups committed before are flushed with a later one) */
			snprintf(why, sizeof(why), "the log write carries group %llu while group %llu commits",
				 (unsigned long long)gid, (unsigned long long)x->committing);
		else if (x->relog[gid])
			x->relog[gid] = 0; /* logged again after a pad: a new place in the order */
		else if (!x->c.procs)
			for (size_t j = 0; j < x->norder && !why[0]; j++)
				if (x->order[j] == gid)
					snprintf(why, sizeof(why), "group %llu is written to the log twice",
						 (unsigned long long)gid);
		if (why[0]) {
			struct where w = {.op = op, .point = op->index, .pick = "-"};
			report(x, NULL, why, &w);
			break;
		}
		if (nrec == 0)
			x->last_rec0_len = h.rec_len;
		for (size_t j = x->norder; x->c.procs && j-- > 0;)
			if (x->order[j] == gid && x->oseq[j] == h.seq) {
				x->inplace[gid] = op->index; /* the same record again */
				break;
			}
		/* (several processes: a group logged again with no pad before is
		 * not refused here -- both records may be replayed, and the
		 * order has both; what recovery makes of them is checked) */
		CS_TRACE("P%llu log off %llu seq %llu gid %llu\n", (unsigned long long)op->index,
			 (unsigned long long)(op->off + p), (unsigned long long)h.seq, (unsigned long long)gid);
		order_add(x, gid, h.seq, false);
		nrec++;
		if (h.flags & REC_F_LAST)
			break;
		p += h.rec_len;
	}
	free(b);
	x->last_nrec = nrec;
	if (nrec && (!x->area_off || op->off < x->area_off))
		x->area_off = op->off;
	if (nrec > 1)
		x->s.batches_multi++;
	if ((uint64_t)nrec > x->s.max_batch)
		x->s.max_batch = (uint64_t)nrec;
}

/* A superblock write: one with a head inside the record area is a background
 * checkpoint's (full checkpoints and recovery start the log at 0). */
static void count_sb_write(struct ctx *x, const struct simfs_opinfo *op)
{
	struct sb_disk sb;
	if (op->iovcnt < 1 || op->iov[0].iov_len < sizeof(sb))
		return;
	memcpy(&sb, op->iov[0].iov_base, sizeof(sb));
	if (!memcmp(sb.magic, SB_MAGIC, 8) && sb.head_off)
		x->s.bg_checkpoints++;
}

/* A kernel fast-path write (RWF_ATOMIC, in place, no record): the group it
 * carries takes its place in the commit order here.  Its only range starts
 * with the group id. */
static void parse_fast_write(struct ctx *x, const struct simfs_opinfo *op)
{
	uint64_t gid = 0;
	if (op->iovcnt >= 1 && op->iov[0].iov_len >= 8)
		memcpy(&gid, op->iov[0].iov_base, 8);
	char why[256] = "";
	if (gid == 0 || gid >= x->ngids)
		snprintf(why, sizeof(why), "an atomic write carries no group id (%llu)", (unsigned long long)gid);
	else if (x->c.threads == 1 && !x->c.procs && gid != x->committing)
		snprintf(why, sizeof(why), "an atomic write carries group %llu while group %llu commits",
			 (unsigned long long)gid, (unsigned long long)x->committing);
	for (size_t j = 0; j < x->norder && !why[0]; j++)
		if (x->order[j] == gid)
			snprintf(why, sizeof(why), "group %llu is written twice", (unsigned long long)gid);
	if (why[0]) {
		struct where w = {.op = op, .point = op->index, .pick = "-"};
		report(x, NULL, why, &w);
		return;
	}
	order_add(x, gid, 0, true);
	x->s.fast_writes++;
}

/* Is the write op (to data file f) one of group gid's ranges? */
static bool write_of_group(struct ctx *x, uint64_t gid, int f, const struct simfs_opinfo *op)
{
	if (gid == 0 || gid >= x->ngids)
		return false;
	const struct grp *g = &x->grps[gid];
	for (int i = 0; i < g->nops; i++) {
		const struct gop *o = &g->ops[i];
		if (o->kind != OP_WRITE || o->file != f || o->off != op->off || o->len != op->len)
			continue;
		uint8_t *want = malloc(o->len), *got = malloc(o->len);
		if (!want || !got)
			abort();
		op_bytes(g, i, o->off, want, o->len);
		uint64_t at = 0;
		for (int k = 0; k < op->iovcnt && at < o->len; k++) {
			uint64_t n = op->iov[k].iov_len < o->len - at ? op->iov[k].iov_len : o->len - at;
			memcpy(got + at, op->iov[k].iov_base, n);
			at += n;
		}
		bool same = at == o->len && !memcmp(want, got, o->len);
		free(want);
		free(got);
		if (same)
			return true;
	}
	return false;
}

/* Is the record of seq the one that gives group gid its place in the order
 * now?  Not an older one: a padded batch's, whose leader died during its
 * write (never made durable), the group logged again since. */
static bool current_record(const struct ctx *x, uint64_t gid, uint64_t seq)
{
	for (size_t j = x->norder; j-- > 0;)
		if (x->order[j] == gid)
			return x->oseq[j] == seq || !x->c.procs;
	return !x->c.procs;
}

/* Invariant I2: a home write that starts a group's first range (its gid)
 * while the group has no record issued at all (a lazy group written home at
 * its commit, mutant lzhome).  Fast-path writes (RWF_ATOMIC) are their own
 * record and are left out by the caller. */
static void check_home_placed(struct ctx *x, const struct simfs_opinfo *op, int f)
{
	uint64_t gid = 0;
	if (op->len < 8 || op->iovcnt < 1 || op->iov[0].iov_len < 8)
		return;
	memcpy(&gid, op->iov[0].iov_base, 8);
	if (gid == 0 || gid >= x->ngids || !x->grps[gid].nops)
		return;
	const struct gop *o = &x->grps[gid].ops[0];
	if (o->kind != OP_WRITE || o->file != f || o->off != op->off || !write_of_group(x, gid, f, op))
		return;
	for (size_t j = x->norder; j-- > 0;)
		if (x->order[j] == gid)
			return;
	char why[200];
	snprintf(why, sizeof(why), "home write to %s (group %llu) issued before any record of the group",
		 op->path, (unsigned long long)gid);
	struct where w = {.op = op, .point = op->index, .pick = "-"};
	report(x, NULL, why, &w);
}

/* Was pending log write v[i] (group gid's record) written again in place,
 * byte for byte, by a later write that is no longer pending (an adopter's
 * re-log of a dead leader's batch: the dead leader's write stays pending
 * for good, and whichever way it lands it writes the same bytes)? */
static bool rewritten_durably(const struct ctx *x, const struct simfs_item *v, size_t n, size_t i, uint64_t gid)
{
	uint64_t at = x->inplace[gid];
	if (!at || at <= v[i].point)
		return false;
	for (size_t j = 0; j < n; j++)
		if (v[j].point == at && v[j].kind == SIMFS_DATA && !strcmp(v[j].path, LOG_PATH))
			return false; /* the re-log is pending too */
	return true;
}

/* Classic bug 3: a home write must never be issued while the log write
 * carrying its record is not yet durable (it could reach the media first).
 * (Other log writes may be in flight: the next batch's, or a checkpoint's
 * superblock write.) */
static void check_home_order(struct ctx *x, struct simfs *fs, const struct simfs_opinfo *op, int f)
{
	size_t n = simfs_pending(fs, NULL, 0);
	struct simfs_item *v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		abort();
	n = simfs_pending(fs, v, n);
	for (size_t i = 0; i < n && !x->failed; i++) {
		if (v[i].kind != SIMFS_DATA || strcmp(v[i].path, LOG_PATH) || v[i].off < 2 * SB_SLOT ||
		    !v[i].data)
			continue;
		/* the groups whose records that log write carries */
		for (uint64_t p = 0; p + REC_HDR + REC_DESC <= v[i].len;) {
			struct rec_hdr_disk h;
			memcpy(&h, v[i].data + p, sizeof(h));
			if (h.magic != REC_MAGIC || h.type == REC_TYPE_PAD || h.rec_len < REC_HDR + REC_DESC ||
			    h.rec_len > v[i].len - p)
				break;
			struct seg_disk d;
			memcpy(&d, v[i].data + p + REC_HDR, sizeof(d));
			uint64_t dp = p + REC_HDR + REC_DESC * (uint64_t)h.nsegs + d.data_off, gid = 0;
			if (dp + 8 <= p + h.rec_len)
				memcpy(&gid, v[i].data + dp, 8);
			if (write_of_group(x, gid, f, op) && current_record(x, gid, h.seq) &&
			    !rewritten_durably(x, v, n, i, gid)) {
				char why[300];
				snprintf(why, sizeof(why), "home write to %s (group %llu) issued while the log "
					 "write of its record (off %llu len %llu) is not durable", op->path,
					 (unsigned long long)gid, (unsigned long long)v[i].off,
					 (unsigned long long)v[i].len);
				struct where w = {.op = op, .point = op->index, .pick = "-"};
				report(x, NULL, why, &w);
				break;
			}
			if (h.flags & REC_F_LAST)
				break;
			p += h.rec_len;
		}
	}
	x->s.home_checked++;
	free(v);
	if (!x->failed && !(op->rwf & RWF_ATOMIC))
		check_home_placed(x, op, f);
}

static void take_snapshot(struct ctx *x, struct simfs *fs, const struct simfs_opinfo *op)
{
	if (x->snap.img) {
		/* (the hook in two threads at once once did this, leaking an image) */
		struct where w = {.point = 0, .pick = "-"};
		report(x, NULL, "harness: a second crash-and-continue snapshot before the first was used", &w);
		return;
	}
	update_bounds(x);
	struct simfs_pick p;
	uint64_t seed = mix64(x->c.seed ^ 0x5a95) ^ simfs_points(fs);
	simfs_random_pick(fs, x->c.unit, seed, &p);
	/* Bias towards "a torn record followed by a valid one": when this log
	 * write carries several records, lose the first one's sectors only. */
	if (op && op->kind == SIMFS_OP_WRITE && !strcmp(op->path, LOG_PATH) && x->last_nrec > 1 &&
	    p.n && (seed & 3)) {
		struct simfs_fate *f = &p.f[p.n - 1];
		f->fate = SIMFS_TEAR;
		f->tear = SIMFS_T_SUFFIX;
		f->arg = (uint32_t)((x->last_rec0_len + x->c.unit - 1) / x->c.unit);
		f->bits = 0;
	}
	x->snap.img = simfs_crash(fs, &p);
	x->snap.pick = simfs_pick_format(&p);
	x->snap.point = op ? op->index : simfs_points(fs);
	simfs_pick_free(&p);
	x->snap.lo = x->lo;
	x->snap.hi = x->norder;
	CS_TRACE("P%llu snapshot lo %llu hi %zu pick %s\n", (unsigned long long)x->snap.point,
		 (unsigned long long)x->lo, x->norder, x->snap.pick);
	free(x->snap.order);
	free(x->snap.oseq);
	x->snap.order = malloc((x->norder + 1) * sizeof(*x->order));
	x->snap.oseq = malloc((x->norder + 1) * sizeof(*x->oseq));
	if (!x->snap.order || !x->snap.oseq)
		abort();
	memcpy(x->snap.order, x->order, x->norder * sizeof(*x->order));
	memcpy(x->snap.oseq, x->oseq, x->norder * sizeof(*x->oseq));
	for (int f = 0; f < x->c.files; f++)
		mf_copy(&x->snap.base[f], &x->base[f]);
	x->snap.taken = true;
}

static void maybe_die(struct ctx *x, struct simfs *fs, const struct simfs_opinfo *op);
static void maybe_die_ckpter(struct ctx *x, struct simfs *fs, const struct simfs_opinfo *op);
static void worker_finished(struct ctx *x, struct proc *p);
static void reader_check(struct ctx *x, bool in_hook);
/* The process a worker thread is (procs): the hook kills it there. */
static __thread struct proc *tl_me;
/* The worker thread is registering a file new to the catalog (CS_ROLE_REG). */
static __thread bool tl_registering;
/* This thread dies at its next pthread_mutex_lock outside the hooks
 * (cs_mutex_lock_hook); the hooks it runs (tl_in_hook) lock freely. */
static __thread struct ctx *tl_die_at_lock;
static __thread int tl_in_hook;

static void run_hook_in(struct simfs *fs, const struct simfs_opinfo *op, void *arg);

static void run_hook(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
{
	tl_in_hook++;
	run_hook_in(fs, op, arg);
	tl_in_hook--;
}

static void run_hook_in(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
{
	struct ctx *x = arg;
	if (x->failed)
		return;
	x->s.points++;
	if (op->kind == SIMFS_OP_WRITE) {
		if (!strcmp(op->path, LOG_PATH) && op->off < 2 * SB_SLOT)
			count_sb_write(x, op);
		else if (!strcmp(op->path, LOG_PATH)) {
			parse_log_write(x, op);
			/* (one thread, not inside sh->mu: no other thread can
			 * hold what the reader's read waits for) */
			if (x->c.threads == 1 && !x->c.procs && !x->c.bg && !cs_store_holds_mutex(x->p[0].st))
				reader_check(x, true);
		}
		else
			for (int f = 0; f < x->c.files; f++)
				if (!strcmp(op->path, x->paths[f])) {
					check_home_order(x, fs, op, f);
					if (!op->direct && (x->c.direct & (1u << f)))
						x->s.twin_writes++;
					if (op->rwf & RWF_ATOMIC)
						parse_fast_write(x, op);
				}
	}
	if (x->failed)
		return;
	pads_update(x, fs);
	/* Crash and continue: at a random point, or preferably where a log
	 * write at the start of the record area carries several records (its
	 * first one torn, the next ones whole: the records a later epoch must
	 * not take for its own).  Not while a pad is pending: the snapshot
	 * keeps one commit order. */
	bool batch0 = op->kind == SIMFS_OP_WRITE && !strcmp(op->path, LOG_PATH) && x->last_nrec > 1 &&
		      op->off == x->area_off;
	if (x->armed && !x->snap.taken && (x->countdown-- <= 0 || batch0) && !pads_live(x))
		take_snapshot(x, fs, op);
	const struct cs_replay *rp = x->rp;
	if (rp && rp->point >= 0) {
		/* a replay checks its one point, under the same rule as the
		 * run: nothing is promised before the store's setup is done */
		if ((int64_t)op->index == rp->point && x->checking)
			check_point(x, fs, op);
	} else if (x->checking && !x->stopped && op->pending_version != x->last_pver) {
		struct rng r = {mix64(x->c.seed ^ 0x9017) ^ op->index};
		if ((int)below(&r, 100) < x->c.points_pct) {
			x->last_pver = op->pending_version;
			check_point(x, fs, op);
		}
	}
	/* the power cut here is checked; now this thread's process may die
	 * here instead */
	maybe_die(x, fs, op);
	if (!tl_me && (x->c.kill_role & CS_ROLE_BGCKPT))
		maybe_die_ckpter(x, fs, op);
}

/* Before a write is done: this thread's process may die there instead, the
 * write never issued (a leader that reserved log space and died before
 * writing it; a home stage between two of its writes). */
static void before_hook(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
{
	struct ctx *x = arg;
	/* one write in two: many deaths leave their write pending (what
	 * the pad rule is about), some never issue it */
	struct rng r = {mix64(x->c.seed ^ 0xbef0 ^ op->index)};
	tl_in_hook++;
	if (!x->failed && (below(&r, 2) == 0 || (x->c.kill_role && tl_me == &x->p[1])))
		maybe_die(x, fs, op);
	else if (!x->failed && !tl_me && (x->c.kill_role & CS_ROLE_BGCKPT))
		maybe_die_ckpter(x, fs, op);
	tl_in_hook--;
}

/* CS_ROLE_BGCKPT: a thread of no worker may be the checkpointer of a
 * process but the first, running a background checkpoint: the process dies
 * there, its worker stopped first where it holds nothing other processes
 * share. */
static bool may_park(void) { return !tl_me || !cs_store_holds_mutex(tl_me->st); }

static void maybe_die_ckpter(struct ctx *x, struct simfs *fs, const struct simfs_opinfo *op)
{
	struct proc *p = NULL;
	for (int i = 1; i < x->np && !p; i++)
		if (!x->p[i].dead && x->p[i].st && cs_store_is_ckpter(x->p[i].st))
			p = &x->p[i];
	if (x->failed || x->role_killed || !p || !(cs_store_holds(p->st, NULL, 0) & 2))
		return;
	int step = x->role_steps++;
	x->s.role_steps++;
	if (step < x->c.kill_step)
		return;
	pthread_mutex_lock(&x->wmu);
	bool running = p->running;
	pthread_mutex_unlock(&x->wmu);
	if (cs_store_holds_mutex(p->st) || !simfs_proc_stop(p->tag, running ? 1 : 0, may_park)) {
		x->s.kills_held++; /* the next step, then */
		return;
	}
	CS_TRACE("P%llu proc %d dies in its checkpointer%s at %s off %llu (its kill point)\n",
		 (unsigned long long)op->index, p->tag, op->before ? " before" : op->after ? " after" : "",
		 op->path, (unsigned long long)op->off);
	uint64_t ks[16];
	int nk = cs_store_batches(p->st, ks, 16);
	for (int i = 0; i < nk && x->norph < (int)(sizeof(x->orph) / sizeof(x->orph[0])); i++)
		x->orph[x->norph++] = ks[i];
	x->role_killed = true;
	x->s.role_kills++;
	x->s.kills++;
	x->s.kills_ckpt++;
	x->s.kills_before += op->before;
	p->countdown = -1;
	p->dead = true;
	worker_finished(x, p); /* its worker never runs again */
	simfs_proc_die_as(fs, p->tag);
}

/* When a write or sync is done (kill points only): process 1 may die there,
 * the call complete and its caller not told. */
static void after_hook(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
{
	struct ctx *x = arg;
	tl_in_hook++;
	if (!x->failed && tl_me == &x->p[1])
		maybe_die(x, fs, op);
	else if (!x->failed && !tl_me && (x->c.kill_role & CS_ROLE_BGCKPT))
		maybe_die_ckpter(x, fs, op);
	tl_in_hook--;
}

/* --- the workload ---------------------------------------------------------------------------- */

static int register_file(struct ctx *x, struct proc *p, int f)
{
	int fl = O_CREAT | ((x->c.direct & (1u << f)) ? O_DIRECT : 0);
	p->ids[f] = atomio_file_open(p->st, x->paths[f], fl, 0644);
	if (p->ids[f] < 0) {
		printf("CRASH-CHECK FAILED: atomio_file_open %s: %d %s: %s\n", x->paths[f], p->ids[f],
		       atomio_strerror(p->ids[f]), p->errbuf);
		x->failed = 1;
		return p->ids[f];
	}
	if (p == &x->p[0] && !x->registered[f]) {
		x->ids[f] = p->ids[f];
		x->registered[f] = true;
	} else if (p->ids[f] != x->ids[f]) {
		/* a file's id is the catalog's: the same in every handle */
		printf("CRASH-CHECK FAILED: atomio_file_open %s: id %d in one handle, %d in another\n",
		       x->paths[f], x->ids[f], p->ids[f]);
		x->failed = 1;
		return -1;
	}
	return 0;
}

/* Open p's handle of the store, as a process of its own (procs: a new simfs
 * process, whose tag the calling thread keeps), and its files. */
static int proc_open(struct ctx *x, struct proc *p)
{
	/* atomio keeps errbuf for the store's later calls: it lives in ctx */
	char *err = p->errbuf;
	err[0] = 0;
	struct atomio_options o = {.log_size = x->c.log, .flags = store_flags(&x->c), .errbuf = err,
				   .errbuf_size = sizeof(p->errbuf), .lazy_delay_us = lazy_delay(&x->c)};
	if (x->c.procs) {
		p->tag = atomic_fetch_add(&x->next_tag, 1);
		simfs_proc_set(p->tag);
		__atomic_fetch_add(&x->s.handles, 1, __ATOMIC_RELAXED);
	}
	p->dead = false;
	int r = atomio_open(LOG_PATH, &o, &p->st);
	if (r < 0) {
		printf("CRASH-CHECK FAILED: atomio_open in the run: %d %s: %s\n", r, atomio_strerror(r), err);
		x->failed = 1;
		return r;
	}
	for (int f = 0; f < x->c.files; f++) {
		/* Several processes: the first registers every file; another
		 * only every second one (by its tag) and writes the others by
		 * the catalog's id, which atomio opens for it when first used
		 * -- so that a process may checkpoint, or lead a batch, with
		 * files it never opened itself. */
		if (x->c.procs && p != &x->p[0] && (f + p->tag) % 2) {
			p->ids[f] = x->ids[f];
			continue;
		}
		/* lazily only files atomio creates: an application's unsynced
		 * file has no promise until it is registered */
		if ((!x->c.lazy || x->registered[f] || x->appfile[f]) && register_file(x, p, f) < 0)
			return -1;
	}
	return 0;
}

/* The reader (reader=1): a store handle of a simulated process of its own
 * that only reads (no file registration: it reads by the catalog's ids). */
static void reader_open(struct ctx *x)
{
	struct proc *p = &x->rd;
	p->errbuf[0] = 0;
	struct atomio_options o = {.log_size = x->c.log, .flags = store_flags(&x->c), .errbuf = p->errbuf,
				   .errbuf_size = sizeof(p->errbuf), .lazy_delay_us = lazy_delay(&x->c)};
	p->tag = atomic_fetch_add(&x->next_tag, 1);
	int prev = simfs_proc_set(p->tag);
	int r = atomio_open(LOG_PATH, &o, &p->st);
	simfs_proc_set(prev);
	if (r < 0) {
		printf("CRASH-CHECK FAILED: atomio_open of the reader: %d %s: %s\n", r, atomio_strerror(r), p->errbuf);
		p->st = NULL;
		x->failed = 1;
	}
}

static int reader_close(struct ctx *x, bool expect_errors)
{
	struct proc *p = &x->rd;
	if (!p->st)
		return 0;
	int prev = simfs_proc_set(p->tag);
	int r = atomio_close(p->st);
	simfs_proc_set(prev);
	p->st = NULL;
	if (r < 0 && !expect_errors) {
		printf("CRASH-CHECK FAILED: atomio_close of the reader: %d %s: %s\n", r, atomio_strerror(r),
		       p->errbuf);
		x->failed = 1;
	}
	return r;
}

/* Lazy groups not acknowledged are forgotten: a clean close made them
 * durable (the floor covers them), or a crash took what it took. */
static void lazy_forget(struct ctx *x)
{
	simfs_lock(x->fs);
	memset(x->lzg, 0, x->ngids);
	x->tk_from = x->norder;
	simfs_unlock(x->fs);
}

/* Close p's handle (the last one to close checkpoints the whole log). */
static int proc_close(struct ctx *x, struct proc *p)
{
	int r = p->st ? atomio_close(p->st) : 0;
	p->st = NULL;
	if (r < 0) {
		printf("CRASH-CHECK FAILED: atomio_close: %d %s: %s\n", r, atomio_strerror(r), p->errbuf);
		x->failed = 1;
	}
	return r;
}

/* Open every handle (a new session: seqs start again from what recovery
 * found); the first one recovers, the others join. */
static int open_store(struct ctx *x)
{
	x->sort_from = x->norder;
	int r = 0;
	for (int i = 0; i < x->np && r == 0; i++)
		r = proc_open(x, &x->p[i]);
	simfs_proc_set(0);
	lazy_forget(x); /* a new session: tickets start again */
	if (r == 0 && x->c.reader)
		reader_open(x);
	return x->failed ? -1 : r;
}

/* Close every live handle; dead ones stay as they died. */
static int close_store(struct ctx *x)
{
	int r = reader_close(x, false);
	for (int i = x->np; i-- > 0;)
		if (!x->p[i].dead && proc_close(x, &x->p[i]) < 0)
			r = -1;
	return r;
}

/* The run's files must hold exactly groups 1..norder (nothing in flight). */
static void check_run_state(struct ctx *x, const char *when)
{
	char why[600];
	update_bounds(x);
	if (!files_equal(x, x->fs, model_at(x, x->norder), why, sizeof(why))) {
		printf("CRASH-CHECK FAILED: %s: the files do not hold groups 1..%zu: %s\n  seed %llu, config %s\n",
		       when, x->norder, why, (unsigned long long)x->c.seed, x->cfgstr);
		x->failed = 1;
	}
}

static void reopen(struct ctx *x)
{
	if (close_store(x) < 0)
		return;
	pads_retire_all(x); /* durable: the last close checkpointed */
	x->floor = x->norder; /* closed cleanly: all of it is durable */
	check_run_state(x, "after a clean close");
	if (!x->failed)
		open_store(x);
	x->s.reopens++;
}

/* Crash and continue: the disk becomes the snapshot image; the old process
 * is gone; the workload goes on after recovery. */
static void apply_snapshot(struct ctx *x)
{
	/* The hook (in atomio's checkpointer thread too) reads the snapshot
	 * state and the models: change them with the simfs held. */
	simfs_lock(x->fs);
	if (!x->snap.taken) {
		/* none taken in the phase: now -- unless a pad is pending (the
		 * snapshot keeps one commit order, as in run_hook) */
		pads_update(x, x->fs);
		if (pads_live(x)) {
			x->armed = false;
			simfs_unlock(x->fs);
			return;
		}
		take_snapshot(x, x->fs, NULL);
	}
	x->armed = false;
	x->snap.taken = false;
	simfs_unlock(x->fs);
	/* The power cut: the run's disk becomes the image and the old store's
	 * descriptors die with the "machine"; its threads (the background
	 * checkpointer) are stopped before the models change under them. */
	struct simfs *trial = simfs_crash(x->snap.img, NULL);
	simfs_reset(x->fs, x->snap.img);
	x->snap.img = NULL;
	for (int i = 0; i < x->np; i++)
		if (!x->p[i].dead && x->p[i].st) {
			atomio_close(x->p[i].st); /* errors expected */
			x->p[i].st = NULL;
		}
	reader_close(x, true);
	pads_retire_all(x); /* a later history */
	/* forget everything after the snapshot */
	x->norder = x->snap.hi;
	memcpy(x->order, x->snap.order, x->norder * sizeof(*x->order));
	memcpy(x->oseq, x->snap.oseq, x->norder * sizeof(*x->oseq));
	for (int f = 0; f < x->c.files; f++) {
		mf_free(&x->base[f]);
		x->base[f] = x->snap.base[f];
		memset(&x->snap.base[f], 0, sizeof(x->snap.base[f]));
	}
	x->base_k = x->lo = x->snap.lo;
	cache_clear(x);
	char why[1024];
	int64_t k = recover_match(x, trial, x->snap.lo, x->snap.hi, why, sizeof(why), MAIN_ORDER);
	simfs_free(trial);
	if (k < 0) {
		struct where w = {.point = x->snap.point, .pick = x->snap.pick, .snapshot = true};
		report(x, x->fs, why, &w);
		goto out;
	}
	x->norder = (size_t)k;
	x->floor = x->lo = (uint64_t)k;
	update_bounds(x);
	x->s.continued++;
	if (open_store(x) == 0)
		check_run_state(x, "after crash and recovery in the run");
out:
	free(x->snap.pick);
	x->snap.pick = NULL;
	free(x->snap.order);
	free(x->snap.oseq);
	x->snap.order = x->snap.oseq = NULL;
}

/* Is group g committed lazily?  (Its own draw: the groups' shapes stay
 * those of the seed without lazy_pct.) */
static bool grp_lazy(const struct ctx *x, const struct grp *g)
{
	struct rng r = {mix64(x->c.seed ^ (g->gid * 0x51ed27ull) ^ 0x1a2)};
	return !g->pwrite && !g->abort && (int)below(&r, 100) < x->c.lazy_pct;
}

/* Commit (or abort) one group.  0 committed, 1 aborted, else an error.
 * A lazy group's ticket goes to *ticket. */
static int do_group(struct ctx *x, struct proc *p, const struct grp *g, uint64_t *ticket)
{
	int r = 0;
	if (g->pwrite) {
		const struct gop *o = &g->ops[0];
		uint8_t *b = NULL;
		if (posix_memalign((void **)&b, 4096, o->len))
			abort();
		op_bytes(g, 0, o->off, b, o->len);
		ssize_t n;
		if (o->len >= 2 && (o->tag & 1)) {
			struct iovec iov[2] = {{b, o->len / 2}, {b + o->len / 2, o->len - o->len / 2}};
			n = atomio_pwritev(p->st, p->ids[o->file], iov, 2, (off_t)o->off);
		} else {
			n = atomio_pwrite(p->st, p->ids[o->file], b, o->len, (off_t)o->off);
		}
		free(b);
		return n == (ssize_t)o->len ? 0 : n < 0 ? (int)n : -EIO;
	}
	atomio_tx *tx;
	r = atomio_tx_begin(p->st, &tx);
	if (r < 0)
		return r;
	for (int i = 0; i < g->nops && r == 0; i++) {
		const struct gop *o = &g->ops[i];
		if (o->kind == OP_SIZE) {
			r = atomio_tx_truncate(tx, p->ids[o->file], (off_t)o->off);
			continue;
		}
		uint8_t *b = malloc(o->len);
		if (!b)
			abort();
		op_bytes(g, i, o->off, b, o->len);
		if (o->len >= 3 && (o->tag & 3) == 0) {
			/* a gathered write */
			struct iovec iov[3] = {{b, 1}, {b + 1, o->len / 2 - 1}, {b + o->len / 2, o->len - o->len / 2}};
			r = atomio_tx_writev(tx, p->ids[o->file], iov, 3, (off_t)o->off);
		} else {
			r = atomio_tx_write(tx, p->ids[o->file], b, o->len, (off_t)o->off);
		}
		free(b);
	}
	if (r < 0 || g->abort) {
		atomio_tx_abort(tx);
		return r < 0 ? r : 1;
	}
	return grp_lazy(x, g) ? atomio_tx_commit_lazy(tx, ticket) : atomio_tx_commit(tx);
}

/* Group gid's durability was reported: from here on no crash may lose it --
 * so its record (or its atomic write) was issued: it has a place in the
 * order (with several processes, one that a pad did not take away).  Under
 * the simfs lock. */
static void ack_group(struct ctx *x, uint64_t gid)
{
	bool placed = false;
	for (size_t j = x->norder; j-- > 0 && !placed;)
		placed = x->order[j] == gid;
	if (!placed && !x->failed) {
		char why[200];
		snprintf(why, sizeof(why), "group %llu%s acknowledged without a record in the log%s",
			 (unsigned long long)gid, x->lzg[gid] ? " (lazy: by a sync)" : "",
			 x->relog[gid] ? " (a pad took its record back)" : "");
		struct where w = {.pick = "-"};
		report(x, NULL, why, &w);
	}
	if (x->lzg[gid])
		__atomic_fetch_add(&x->s.lazy_acked, 1, __ATOMIC_RELAXED);
	x->lzg[gid] = 0;
	atomic_store(&x->acked[gid], 1);
	CS_TRACE("ack gid %llu\n", (unsigned long long)gid);
}

static bool grp_touches(const struct grp *g, int f)
{
	for (int i = 0; i < g->nops; i++)
		if (g->ops[i].file == f)
			return true;
	return false;
}

/* A call that began at clock c0 returned 0 and reports durable every lazy
 * group whose commit returned before (f < 0), or those that touched file f
 * and every lazy group of a ticket up to theirs.  Under the simfs lock. */
static void ack_lazy_before(struct ctx *x, uint64_t c0, int f)
{
	uint64_t maxt = 0;
	bool any = false;
	for (size_t g = 1; f >= 0 && g < x->ngids; g++)
		if (x->lzg[g] && x->gend[g] && x->gend[g] < c0 && grp_touches(&x->grps[g], f)) {
			any = true;
			maxt = x->ticket[g] > maxt ? x->ticket[g] : maxt;
		}
	for (size_t g = 1; g < x->ngids && !x->failed; g++)
		if (x->lzg[g] && x->gend[g] && x->gend[g] < c0 &&
		    (f < 0 || grp_touches(&x->grps[g], f) || (any && x->ticket[g] <= maxt)))
			ack_group(x, g);
}

/* The clock of the run's happens-before (LAZY GROUPS): every reading is
 * later than every earlier one. */
static uint64_t tick(struct ctx *x) { return atomic_fetch_add(&x->clock, 1) + 1; }

/* Before group gid (sync_pct): atomio_sync of the store or of one file; its
 * 0 acknowledges the lazy groups it covers.  A quarter with NOWAIT, which
 * promises nothing. */
static void maybe_sync(struct ctx *x, struct proc *p, uint64_t gid)
{
	struct rng r = {mix64(x->c.seed ^ (gid * 0x5c5cull) ^ 0x5c)};
	if ((int)below(&r, 100) >= x->c.sync_pct)
		return;
	int f = below(&r, 2) ? -1 : (int)below(&r, (uint64_t)x->c.files);
	if (f >= 0 && !x->registered[f])
		f = -1;
	unsigned fl = below(&r, 4) == 0 ? ATOMIO_SYNC_NOWAIT : 0;
	uint64_t c0 = tick(x);
	int sr = atomio_sync(p->st, f < 0 ? -1 : x->ids[f], fl);
	if (sr < 0) {
		printf("CRASH-CHECK FAILED: atomio_sync(%d, %u): %d %s: %s\n  seed %llu, config %s\n",
		       f < 0 ? -1 : x->ids[f], fl, sr, atomio_strerror(sr), p->errbuf,
		       (unsigned long long)x->c.seed, x->cfgstr);
		x->failed = 1;
		return;
	}
	__atomic_fetch_add(&x->s.syncs, 1, __ATOMIC_RELAXED);
	if (fl & ATOMIO_SYNC_NOWAIT)
		return;
	simfs_lock(x->fs);
	ack_lazy_before(x, c0, f);
	simfs_unlock(x->fs);
}

static void group_done(struct ctx *x, const struct grp *g, int r, uint64_t ticket)
{
	if (r < 0) {
		printf("CRASH-CHECK FAILED: group %llu: commit returned %d %s\n  seed %llu, config %s\n",
		       (unsigned long long)g->gid, r, atomio_strerror(r), (unsigned long long)x->c.seed,
		       x->cfgstr);
		x->failed = 1;
		return;
	}
	if (r == 1) {
		__atomic_fetch_add(&x->s.aborted, 1, __ATOMIC_RELAXED);
		return;
	}
	uint64_t c1 = tick(x);
	simfs_lock(x->fs);
	x->gend[g->gid] = c1;
	if (grp_lazy(x, g)) {
		/* visible, not acknowledged: a crash may still take it */
		x->ticket[g->gid] = ticket;
		x->lzg[g->gid] = 1;
		check_tickets(x);
		__atomic_fetch_add(&x->s.lazy_groups, 1, __ATOMIC_RELAXED);
	} else {
		/* a durable commit: it, and every lazy group committed before
		 * it began (atomio.h: durable at a durable commit after it) */
		ack_lazy_before(x, x->gbeg[g->gid], -1);
		ack_group(x, g->gid);
	}
	simfs_unlock(x->fs);
	__atomic_fetch_add(&x->s.groups, 1, __ATOMIC_RELAXED);
	if (grp_lazy(x, g))
		reader_check(x, false);
}

/* The reader's bytes got[0..n) of range i of group g (len bytes at its
 * offset; past n: the end of the file): each must be g's, or one that a
 * group not committed before g began leaves there (its write, or a size
 * change at or below it: zero or the end).  Marks ok[], which the caller
 * cleared.  Under the simfs lock. */
static void reader_mark(struct ctx *x, const struct grp *g, int i, const uint8_t *got, uint64_t n, uint64_t len,
			uint8_t *ok)
{
	const struct gop *o = &g->ops[i];
	uint8_t *hb = malloc(len);
	if (!hb)
		abort();
	for (size_t h = 1; h < x->ngids; h++) {
		const struct grp *gh = &x->grps[h];
		if (gh->abort || !x->gbeg[h] || (x->gend[h] && x->gend[h] < x->gbeg[g->gid]))
			continue; /* never committed, or committed before g began */
		for (int j = 0; j < gh->nops; j++) {
			const struct gop *q = &gh->ops[j];
			if (q->file != o->file)
				continue;
			uint64_t lo = q->off > o->off ? q->off : o->off;
			uint64_t hi = q->kind == OP_SIZE ? o->off + len : q->off + q->len;
			hi = hi < o->off + len ? hi : o->off + len;
			if (lo >= hi)
				continue;
			if (q->kind == OP_WRITE)
				op_bytes(gh, j, lo, hb, hi - lo);
			for (uint64_t a = lo; a < hi; a++) {
				uint64_t k = a - o->off;
				if (q->kind == OP_SIZE)
					ok[k] |= k >= n || got[k] == 0;
				else
					ok[k] |= k < n && got[k] == hb[a - lo];
			}
		}
	}
	free(hb);
}

/* The reader handle reads back every range of the newest lazy groups not
 * acknowledged (LAZY GROUPS, crashsim.h); a byte no allowed group explains
 * is a failure (a read that missed a lazy group: mutant lzread).  in_hook:
 * at a crash point of the run's only thread (the simfs lock held). */
#define RD_GROUPS 8
#define RD_MAX 65536u
static void reader_check(struct ctx *x, bool in_hook)
{
	if (!x->c.reader || !x->rd.st || x->failed)
		return;
	uint64_t gs[RD_GROUPS];
	int ng = 0;
	simfs_lock(x->fs);
	for (size_t g = x->ngids; g-- > 1 && ng < RD_GROUPS;)
		if (x->lzg[g] && x->gend[g] && !atomic_load(&x->acked[g]))
			gs[ng++] = g;
	simfs_unlock(x->fs);
	for (int gi = 0; gi < ng && !x->failed; gi++) {
		const struct grp *g = &x->grps[gs[gi]];
		for (int i = 0; i < g->nops && !x->failed; i++) {
			const struct gop *o = &g->ops[i];
			if (o->kind != OP_WRITE || !x->registered[o->file] || !o->len)
				continue;
			uint64_t len = o->len < RD_MAX ? o->len : RD_MAX;
			uint8_t *got = malloc(len), *want = malloc(len), *ok = calloc(len, 1);
			if (!got || !want || !ok)
				abort();
			int prev = simfs_proc_set(x->rd.tag);
			ssize_t n = atomio_pread(x->rd.st, x->ids[o->file], got, len, (off_t)o->off);
			simfs_proc_set(prev);
			__atomic_fetch_add(&x->s.reader_checks, 1, __ATOMIC_RELAXED);
			op_bytes(g, i, o->off, want, len);
			uint64_t bad = UINT64_MAX;
			simfs_lock(x->fs);
			if (n >= 0 && ((uint64_t)n < len || memcmp(got, want, len))) {
				reader_mark(x, g, i, got, (uint64_t)n, len, ok);
				for (uint64_t k = 0; k < len && bad == UINT64_MAX; k++)
					bad = ok[k] ? bad : k;
			}
			if (n < 0 || bad != UINT64_MAX) {
				char why[300];
				if (n < 0)
					snprintf(why, sizeof(why), "the reader's atomio_pread of group %llu's range: %zd %s",
						 (unsigned long long)g->gid, n, atomio_strerror((int)n));
				else
					snprintf(why, sizeof(why), "the reader (another process) reads lazy group %llu's "
						 "file %d at %llu: byte %s%d, the group wrote %d, and no later group "
						 "explains it (%zd of %llu bytes read)%s", (unsigned long long)g->gid,
						 o->file, (unsigned long long)(o->off + bad), bad < (uint64_t)n ? "" : "end ",
						 bad < (uint64_t)n ? got[bad] : -1, want[bad], n, (unsigned long long)len,
						 in_hook ? " (at a log write)" : "");
				struct where w = {.point = 0, .pick = "-"};
				report(x, NULL, why, &w);
			}
			simfs_unlock(x->fs);
			free(got);
			free(want);
			free(ok);
		}
	}
}

/* Commit group gid from p's handle, and tell the oracle. */
static void commit_group(struct ctx *x, struct proc *p, uint64_t gid)
{
	struct grp *g = &x->grps[gid];
	uint64_t c0 = tick(x), ticket = 0;
	simfs_lock(x->fs);
	x->gbeg[gid] = c0;
	if (grp_lazy(x, g))
		x->lzg[gid] = 1;
	simfs_unlock(x->fs);
	int gr = do_group(x, p, g, &ticket);
	if (gr < 0 && p->errbuf[0])
		printf("  (process %d's store: %s)\n", p->tag, p->errbuf);
	if (gr != 0 && grp_lazy(x, g)) {
		simfs_lock(x->fs);
		x->lzg[gid] = 0;
		simfs_unlock(x->fs);
	}
	group_done(x, g, gr, ticket);
}

struct worker {
	struct ctx *x;
	struct proc *p; /* its handle: its own (procs), else the run's */
	int t, from, to;
};


static void worker_finished(struct ctx *x, struct proc *p)
{
	pthread_mutex_lock(&x->wmu);
	if (x->c.procs) {
		/* once: the checkpointer that killed its process may have
		 * counted it */
		if (!p->running) {
			pthread_mutex_unlock(&x->wmu);
			return;
		}
		p->running = false;
	}
	x->wdone++;
	pthread_cond_broadcast(&x->wcv);
	pthread_mutex_unlock(&x->wmu);
}

/* CS_ROLE_REG: process 1 registers a file of its own, new to the catalog
 * (no group writes it: the oracle's files are the others). */
static void register_own(struct ctx *x, struct proc *p)
{
	char path[32];
	snprintf(path, sizeof(path), "/d/r%d", x->extra_files++);
	tl_registering = true;
	int id = atomio_file_open(p->st, path, O_CREAT, 0644);
	tl_registering = false;
	if (id < 0) {
		printf("CRASH-CHECK FAILED: atomio_file_open %s: %d %s: %s\n", path, id, atomio_strerror(id),
		       p->errbuf);
		x->failed = 1;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct ctx *x = w->x;
	struct proc *p = w->p;
	if (x->c.procs) {
		simfs_proc_set(p->tag);
		tl_me = p;
	}
	if ((x->c.kill_role & CS_ROLE_REG) && p == &x->p[1] && !x->role_killed && !x->failed)
		register_own(x, p);
	for (int i = w->from; i < w->to && !x->failed; i++) {
		uint64_t gid = 1 + (uint64_t)i * (uint64_t)x->c.threads + (uint64_t)w->t;
		struct rng r = {mix64(x->c.seed ^ gid ^ 0xc4)};
		if ((int)below(&r, 200) < x->c.ckpt_pct) {
			int cr = atomio_checkpoint(p->st);
			if (cr < 0) {
				printf("CRASH-CHECK FAILED: atomio_checkpoint: %d\n", cr);
				x->failed = 1;
			}
			__atomic_fetch_add(&x->s.checkpoints, 1, __ATOMIC_RELAXED);
		}
		if (x->c.procs && (int)below(&r, 200) < x->c.reopen_pct) {
			/* this process leaves the store and joins it again while
			 * the others go on (the last to leave checkpoints, the
			 * first to come back recovers) */
			if (proc_close(x, p) < 0 || proc_open(x, p) < 0)
				break;
		}
		maybe_sync(x, p, gid);
		if (x->failed)
			break;
		commit_group(x, p, gid);
	}
	tl_me = NULL;
	simfs_proc_set(0);
	worker_finished(x, p);
	return NULL;
}

/* At a crash point of its thread, or just before one of its writes (op->
 * before), a process whose countdown ran out dies there (simfs_proc_die: its
 * descriptors close, its thread blocks for good); the others take over what
 * it held.  Not while its thread holds the
 * store's shared mutex, which only the death of a real process releases
 * (robust mutex): then at its next crash point. */
/* The role process 1 plays at this step (crashsim.h, KILL POINTS), 0 none. */
static uint32_t role_of(struct ctx *x, struct proc *p, const struct simfs_opinfo *op, bool log, bool data)
{
	unsigned h = cs_store_holds(p->st, x->orph, x->norph);
	return tl_registering ? CS_ROLE_REG
	       : h & 4	      ? CS_ROLE_ADOPT
	       : h & 2	      ? CS_ROLE_CKPT
	       : op->kind == SIMFS_OP_WRITE && log && x->area_off && op->off >= x->area_off ? CS_ROLE_LOG
	       : op->kind == SIMFS_OP_WRITE && data ? CS_ROLE_HOME
	       : h & (1 | 8)			    ? CS_ROLE_LEAD
						    : 0;
}
/* Process p dies: the batches it leads are orphans (whoever leads them
 * next adopts them), and it is counted dead. */
static void mark_dead(struct ctx *x, struct proc *p)
{
	uint64_t ks[16];
	int nk = cs_store_batches(p->st, ks, 16);
	for (int i = 0; i < nk && x->norph < (int)(sizeof(x->orph) / sizeof(x->orph[0])); i++)
		x->orph[x->norph++] = ks[i];
	p->countdown = -1;
	p->dead = true;
	x->s.kills++;
}

static void maybe_die(struct ctx *x, struct simfs *fs, const struct simfs_opinfo *op)
{
	struct proc *p = tl_me;
	if (!p || x->failed)
		return;
	/* what the crash point is: 1 a log record (or pad) write, 2 a home
	 * write, 4 a checkpoint's data sync or superblock write */
	bool log = !strcmp(op->path, LOG_PATH), data = false;
	for (int f = 0; f < x->c.files; f++)
		data |= !strcmp(op->path, x->paths[f]);
	uint32_t kind = op->kind == SIMFS_OP_WRITE && log && x->area_off && op->off >= x->area_off ? 1u
			: op->kind == SIMFS_OP_WRITE && data ? 2u
			: (op->kind == SIMFS_OP_WRITE && log && op->off < 2 * SB_SLOT) ||
					  ((op->kind == SIMFS_OP_FDATASYNC || op->kind == SIMFS_OP_FSYNC) && data)
				  ? 4u
				  : 0u;
	bool at_point = false;
	if (x->c.kill_role && p == &x->p[1]) {
		/* a kill point: the step'th step of its roles, once a run */
		if (x->role_killed || !(role_of(x, p, op, log, data) & x->c.kill_role))
			return;
		if (x->c.kill_sb && !(op->kind == SIMFS_OP_WRITE && log && op->off < 2 * SB_SLOT))
			return;
		int step = x->role_steps++;
		x->s.role_steps++;
		bool run_on = false;
		if (op->after && cs_lock_steps && step < x->c.kill_step) {
			/* the call's second step after it: the thread runs on to
			 * its next pthread_mutex_lock and dies there */
			step = x->role_steps++;
			x->s.role_steps++;
			run_on = true;
		}
		if (step < x->c.kill_step)
			return;
		if (run_on) {
			x->role_killed = true;
			x->s.role_kills++;
			tl_die_at_lock = x;
			return;
		}
		if (cs_store_holds_mutex(p->st)) {
			x->s.kills_held++; /* the next step of its roles, then */
			return;
		}
		x->role_killed = true;
		x->s.role_kills++;
		at_point = true;
	} else {
		if (p->countdown < 0)
			return;
		if (x->c.kill_at && !(x->c.kill_at & kind))
			return;
		if (p->countdown > 0) {
			p->countdown--;
			return;
		}
		if (cs_store_holds_mutex(p->st)) {
			x->s.kills_held++;
			return;
		}
	}
	/* A dead process's thread stays blocked till the test process ends:
	 * a long run stops killing after this many. */
	static _Atomic unsigned dead_threads;
	unsigned nd = atomic_fetch_add(&dead_threads, 1);
	if (nd >= 1000) {
		if (nd == 1000)
			printf("crashsim: 1000 processes died in this test process: no more deaths\n");
		return;
	}
	CS_TRACE("P%llu proc %d dies%s at %s off %llu%s\n", (unsigned long long)op->index, p->tag,
		 op->before ? " before" : op->after ? " after" : "", op->path, (unsigned long long)op->off,
		 at_point ? " (its kill point)" : "");
	mark_dead(x, p);
	x->s.kills_log += kind == 1;
	x->s.kills_home += kind == 2;
	x->s.kills_ckpt += kind == 4;
	x->s.kills_before += op->before;
	tl_me = NULL;
	worker_finished(x, p);
	simfs_proc_die(fs); /* never returns */
}

bool cs_lock_steps;

void cs_mutex_lock_hook(void)
{
	struct ctx *x = tl_die_at_lock;
	if (!x || tl_in_hook)
		return;
	struct proc *p = tl_me;
	if (!p || x->failed) {
		tl_die_at_lock = NULL;
		return;
	}
	if (cs_store_holds_mutex(p->st))
		return; /* its next lock, then */
	tl_die_at_lock = NULL;
	CS_TRACE("proc %d dies at its next lock after its call (its kill point)\n", p->tag);
	mark_dead(x, p);
	tl_me = NULL;
	worker_finished(x, p);
	simfs_proc_die(x->fs); /* never returns */
}

static void between_groups(struct ctx *x, struct rng *r)
{
	if ((int)below(r, 100) < x->c.ckpt_pct) {
		int cr = atomio_checkpoint(x->p[0].st);
		if (cr < 0) {
			printf("CRASH-CHECK FAILED: atomio_checkpoint: %d %s\n", cr, atomio_strerror(cr));
			x->failed = 1;
		}
		x->s.checkpoints++;
	}
	if (!x->failed && (int)below(r, 100) < x->c.reopen_pct)
		reopen(x);
	if (!x->failed && (int)below(r, 100) < x->c.crash_pct) {
		/* one thread: somewhere in the next group; several: preferably
		 * at a multi-record batch (see run_hook), else late.  (The
		 * hook may run in the store's checkpointer meanwhile.) */
		int cd = (int)below(r, x->c.threads > 1 || x->c.procs ? 400 : 12);
		simfs_lock(x->fs);
		x->countdown = cd;
		x->armed = true;
		simfs_unlock(x->fs);
	}
}

/* One phase of the threads (several, or procs): each commits its share of
 * groups [from, to).  With procs, a process that died in an earlier phase
 * joins again first, and kill_pct picks who dies in this one. */
static void run_phase(struct ctx *x, int ph, int from, int to)
{
	int nt = x->c.threads > MAXP ? MAXP : x->c.threads;
	for (int t = 0; t < x->np && !x->failed; t++) {
		struct proc *p = &x->p[t];
		if (p->dead) {
			/* its handle stays as it died (a process's memory is its own) */
			p->st = NULL;
			proc_open(x, p);
			simfs_proc_set(0);
		}
		struct rng r = {mix64(x->c.seed ^ 0xdead ^ ((uint64_t)ph << 8) ^ (uint64_t)t)};
		/* (with kill points, process 1 dies at its own: kill_pct picks
		 * among the others) */
		p->countdown = t > (x->c.kill_role ? 1 : 0) && (int)below(&r, 100) < x->c.kill_pct
				       ? (int)below(&r, x->c.kill_at ? 6 : 40)
				       : -1;
	}
	if (x->failed)
		return;
	struct worker w[MAXP];
	x->wdone = 0;
	for (int t = 0; t < nt; t++) {
		w[t] = (struct worker){x, x->c.procs ? &x->p[t] : &x->p[0], t, from, to};
		pthread_mutex_lock(&x->wmu);
		w[t].p->running = true;
		pthread_mutex_unlock(&x->wmu);
		pthread_t th;
		/* detached: a thread whose process dies never ends */
		if (pthread_create(&th, NULL, worker_main, &w[t]) || pthread_detach(th))
			abort();
	}
	/* A deadlock among the processes is a failure, not a hang: no crash
	 * point reached and no image checked for a minute ends the test. */
	uint64_t points = simfs_points(x->fs) + __atomic_load_n(&x->s.images, __ATOMIC_RELAXED) +
			  __atomic_load_n(&x->s.nested_images, __ATOMIC_RELAXED);
	int still = 0;
	pthread_mutex_lock(&x->wmu);
	while (x->wdone < nt) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 5;
		if (pthread_cond_timedwait(&x->wcv, &x->wmu, &ts) != ETIMEDOUT)
			continue;
		/* (not holding wmu: a dying thread takes it inside the simfs) */
		pthread_mutex_unlock(&x->wmu);
		uint64_t now_points = simfs_points(x->fs) + __atomic_load_n(&x->s.images, __ATOMIC_RELAXED) +
				      __atomic_load_n(&x->s.nested_images, __ATOMIC_RELAXED);
		pthread_mutex_lock(&x->wmu);
		still = now_points == points ? still + 1 : 0;
		points = now_points;
		if (still == 12) {
			printf("CRASH-CHECK FAILED: no crash point reached, no image checked for a minute: a deadlock "
			       "(%d of %d threads of the phase done)\n  seed %llu, config %s\n", x->wdone, nt,
			       (unsigned long long)x->c.seed, x->cfgstr);
			printf("  several processes: not deterministic; the line below runs this configuration "
			       "again, with another interleaving\n  reproduce: %s --cfg '%s' [--dump DIR] [-v]\n",
			       x->argv0, x->cfgstr);
			fflush(stdout);
			_exit(1); /* the stuck threads cannot be stopped */
		}
	}
	pthread_mutex_unlock(&x->wmu);
}

int cs_run(const struct cs_cfg *c, const struct cs_replay *replay, struct cs_stats *out,
	   const char *argv0)
{
	struct ctx *x = calloc(1, sizeof(*x));
	if (!x)
		abort();
	x->c = *c;
	if (x->c.files < 1)
		x->c.files = 1;
	if (x->c.files > MAXF)
		x->c.files = MAXF;
	if (x->c.threads < 1)
		x->c.threads = 1;
	if (x->c.threads > 1 || x->c.procs)
		x->c.lazy = false;
	if (x->c.threads > MAXP)
		x->c.threads = MAXP;
	if (!x->c.procs) {
		x->c.kill_pct = 0;
		x->c.kill_role = 0;
	}
	if (x->c.kill_role && x->c.threads < 2)
		x->c.threads = 2;
	if (x->c.kill_role & CS_ROLE_BGCKPT) {
		/* a background checkpoint's process dies: its checkpointer
		 * thread runs (the only role counted), and no other dies
		 * (a process of two threads dies only by its checkpointer) */
		x->c.kill_role = CS_ROLE_BGCKPT;
		x->c.bg = true;
		x->c.fast = false;
		x->c.kill_pct = 0;
	} else if (x->c.kill_pct || x->c.kill_role) {
		/* a dead process's only thread is the one that dies; and no
		 * fast path (a dead leader's atomic write may land or not
		 * while its group is written again: not modelled) */
		x->c.bg = false;
		x->c.fast = false;
	}
	if (x->c.nodirect)
		x->c.direct = 0;
	if (x->c.blockrec) {
		x->c.direct &= ~1u;
		x->c.compress = 0; /* its records are exactly 4 KiB: raw */
	}
	fill_run = x->c.compress;
	if (!x->c.unit)
		x->c.unit = 512;
	if (!x->c.dio)
		x->c.dio = 512;
	x->rp = replay;
	x->argv0 = argv0 ? argv0 : "t_crash";
	x->cfgstr = cs_cfg_format(&x->c);
	x->s.runs = 1;
	x->last_pver = UINT64_MAX;

	struct simfs_config sc = {.dio_align = x->c.dio, .phys_block = x->c.phys,
				  .no_direct = x->c.nodirect, .no_rwf_dsync = x->c.nodsync,
				  .atomic_write_max = x->c.fast ? ATOMIC_MAX : 0,
				  .proc_fd = !x->c.noproc, .seed = mix64(x->c.seed ^ 0xd15c)};
	uint64_t sfr0 = atomic_load(&simfs_sfr_calls);
	x->fs = simfs_new(&sc);
	simfs_mkdir(x->fs, "/d");
	simfs_mkdir(x->fs, "/e");
	struct rng r = {mix64(x->c.seed)};
	bool other_dir = below(&r, 2);
	bool exists[MAXF] = {false};
	static const char *names[2][MAXF] = {{"/d/f0", "/d/f1", "/d/f2"}, {"/d/f0", "/d/f1", "/e/f2"}};
	for (int f = 0; f < x->c.files; f++) {
		x->paths[f] = names[other_dir][f];
		uint64_t k = below(&r, 4);
		if (k == 0)
			continue; /* created by atomio_file_open */
		exists[f] = true;
		uint64_t size = k == 1 ? 0 : 1 + below(&r, x->c.span ? x->c.span : 262144);
		mf_setsize(&x->base[f], size);
		fill(0xF11E0000ull + (uint64_t)f, 0, x->base[f].b, size);
		if (!x->c.appfiles)
			simfs_put(x->fs, x->paths[f], x->base[f].b, size, 0644);
	}

	simfs_install(x->fs);
	if (x->c.appfiles) {
		/* the application writes its files just before opening the
		 * store, and syncs nothing */
		for (int f = 0; f < x->c.files; f++) {
			if (!exists[f])
				continue;
			x->appfile[f] = true;
			int fd = simfs_ops.open(x->paths[f], O_RDWR | O_CREAT | O_TRUNC, 0644);
			struct iovec iov = {x->base[f].b, x->base[f].size};
			if (fd < 0 || (x->base[f].size && simfs_ops.pwritev(fd, &iov, 1, 0, 0) != (ssize_t)iov.iov_len)) {
				printf("CRASH-CHECK FAILED: setting up %s\n", x->paths[f]);
				x->failed = 1;
			}
			simfs_ops.close(fd);
		}
	}
	simfs_set_hook(x->fs, run_hook, x);
	if (x->c.kill_pct || x->c.kill_role)
		simfs_set_before_hook(x->fs, before_hook, x);
	if (x->c.kill_role)
		simfs_set_after_hook(x->fs, after_hook, x);
	/* Before registration nothing is promised about files the application
	 * has not synced. */
	x->checking = x->c.setup && !x->c.appfiles;
	x->grps = NULL;
	x->ngids = 1 + (size_t)x->c.threads * (size_t)x->c.groups;
	x->order = calloc(x->ngids, sizeof(*x->order));
	x->oseq = calloc(x->ngids, sizeof(*x->oseq));
	x->acked = calloc(x->ngids, sizeof(*x->acked));
	x->grps = calloc(x->ngids, sizeof(*x->grps));
	x->relog = calloc(x->ngids, 1);
	x->lzg = calloc(x->ngids, 1);
	x->inplace = calloc(x->ngids, sizeof(*x->inplace));
	x->ticket = calloc(x->ngids, sizeof(*x->ticket));
	x->gbeg = calloc(x->ngids, sizeof(*x->gbeg));
	x->gend = calloc(x->ngids, sizeof(*x->gend));
	if (!x->order || !x->oseq || !x->acked || !x->grps || !x->relog || !x->lzg || !x->inplace || !x->ticket || !x->gbeg ||
	    !x->gend)
		abort();
	x->np = x->c.procs ? x->c.threads : 1;
	x->next_tag = 1;
	x->matched_alt = MAIN_ORDER;
	pthread_mutex_init(&x->wmu, NULL);
	pthread_cond_init(&x->wcv, NULL);
	if (open_store(x) == 0) {
		struct atomio_caps caps;
		atomio_caps(x->p[0].st, -1, &caps);
		x->gp.area = caps.log_size;
		x->gp.dio = x->c.dio;
		for (size_t g = 1; g < x->ngids; g++)
			gen_group(&x->c, &x->gp, g, &x->grps[g]);
	}
	x->checking = true;

	if (x->c.threads == 1 && !x->c.procs) {
		for (int g = 1; g <= x->c.groups && !x->failed; g++) {
			between_groups(x, &r);
			if (x->failed)
				break;
			simfs_lock(x->fs);
			x->committing = (uint64_t)g;
			simfs_unlock(x->fs);
			for (int i = 0; i < x->grps[g].nops && !x->failed; i++)
				if (!x->registered[x->grps[g].ops[i].file])
					register_file(x, &x->p[0], x->grps[g].ops[i].file);
			if (x->failed)
				break;
			maybe_sync(x, &x->p[0], (uint64_t)g);
			if (!x->failed)
				commit_group(x, &x->p[0], (uint64_t)g);
			if (x->armed && !x->failed)
				apply_snapshot(x);
		}
	} else {
		int phases = x->c.groups / 3 < 1 ? 1 : x->c.groups / 3 > 6 ? 6 : x->c.groups / 3;
		for (int ph = 0; ph < phases && !x->failed; ph++) {
			if (ph)
				between_groups(x, &r);
			if (x->failed)
				break;
			run_phase(x, ph, x->c.groups * ph / phases, x->c.groups * (ph + 1) / phases);
			if (x->armed && !x->failed)
				apply_snapshot(x);
		}
	}
	if (!x->failed && close_store(x) == 0) {
		x->floor = x->norder;
		check_run_state(x, "at the end");
	}
	bool open = false;
	for (int i = 0; i < x->np; i++)
		open |= !x->p[i].dead && x->p[i].st;
	if (open) {
		/* after a failure: the machine goes down, the handles close */
		simfs_reset(x->fs, simfs_crash(x->fs, NULL));
		for (int i = 0; i < x->np; i++)
			if (!x->p[i].dead && x->p[i].st)
				atomio_close(x->p[i].st);
	}
	reader_close(x, true);
	/* (threads of dead processes stay blocked for good, touching nothing;
	 * their handles are never closed: a dead process closes nothing) */
	simfs_uninstall();
	if (x->snap.img)
		simfs_free(x->snap.img);
	free(x->snap.pick);
	free(x->snap.order);
	free(x->snap.oseq);
	simfs_free(x->fs);
	x->s.early_writebacks += atomic_load(&simfs_sfr_calls) - sfr0;
	cache_clear(x);
	for (int f = 0; f < MAXF; f++) {
		mf_free(&x->base[f]);
		mf_free(&x->snap.base[f]);
	}
	for (size_t g = 0; g < x->ngids; g++)
		free(x->grps[g].ops);
	free(x->grps);
	free(x->order);
	free(x->oseq);
	free((void *)x->acked);
	pads_retire_all(x);
	free(x->relog);
	free(x->lzg);
	free(x->inplace);
	free(x->ticket);
	free(x->gbeg);
	free(x->gend);
	pthread_mutex_destroy(&x->wmu);
	pthread_cond_destroy(&x->wcv);
	free(x->cfgstr);
	int failed = x->failed;
	if (out)
		cs_stats_add(out, &x->s);
	free(x);
	return failed;
}
