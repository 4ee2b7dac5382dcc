/* Bad input, field by field (issue 3 item 6): a log with committed groups
 * over two files has each field of the superblock, the catalog (header and
 * entries) and the records (header and descriptors) set in turn to hostile
 * values, once with its checksum re-sealed (a crafted log) and once without
 * (damage); it is also truncated at many points, zero-filled and filled with
 * random bytes region by region, and given another store's superblock or
 * records.  Each time atomio_open must:
 *  - return 0 or a documented error (ENOTLOG, EVERSION, ECORRUPT, EIDENTITY,
 *    EBADPATH); never crash (ASan/UBSan build too);
 *  - leave the data files in the state after groups 1..k for some k (a valid
 *    prefix), and after nothing at all when it fails;
 *  - never replay a record whose checksum fails (damage to record j without
 *    re-sealing: k < j);
 *  - write no file but the registered ones (a decoy is untouched, no file
 *    appears). */
#include <dirent.h>

#include "workload.h"
#include "support/logpatch.h"

/* The sanitizer build tries every other value (it runs 3x slower). */
#ifdef ATOMIO_SAN
#define VSTEP 2
#else
#define VSTEP 1
#endif

#define NFILES 2
#define NGROUPS 8
#define SEED 77

static const char *fname[NFILES] = {"a", "b"};
static struct mfile states[NGROUPS + 1][NFILES]; /* after k committed groups */
static int ngroups;                              /* committed (logged) groups */
static struct lp pristine;
static unsigned long cases, refused, opened;

static void child(void *arg)
{
	(void)arg;
	struct atomio_options o = t_opts(65536);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT; /* the files are wiped later: nothing may be checkpointed */
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int ids[NFILES];
	for (int i = 0; i < NFILES; i++)
		CHECK_EQ(ids[i] = atomio_file_open(st, t_path(fname[i]), O_CREAT, 0644), i);
	for (int g = 0; g < NGROUPS; g++) {
		struct wgroup wg;
		w_group(SEED, g, NFILES, 3000, &wg);
		atomio_tx *tx;
		CHECK_OK(atomio_tx_begin(st, &tx));
		CHECK_OK(w_build(&wg, tx, ids));
		if (wg.abort)
			atomio_tx_abort(tx);
		else
			CHECK_OK(atomio_tx_commit(tx));
	}
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.checkpoints, 0); /* every group is still in the log */
}

static struct mfile copy(const struct mfile *m)
{
	struct mfile c = {0};
	m_reserve(&c, m->size ? m->size : 1);
	if (m->size)
		memcpy(c.b, m->b, m->size);
	c.size = m->size;
	return c;
}

static void build_states(void)
{
	struct mfile cur[NFILES] = {{0}};
	for (int i = 0; i < NFILES; i++)
		states[0][i] = copy(&cur[i]);
	for (int g = 0; g < NGROUPS; g++) {
		struct wgroup wg;
		w_group(SEED, g, NFILES, 3000, &wg);
		if (wg.abort)
			continue;
		w_model(&wg, cur);
		ngroups++;
		for (int i = 0; i < NFILES; i++)
			states[ngroups][i] = copy(&cur[i]);
	}
	for (int i = 0; i < NFILES; i++)
		free(cur[i].b);
}

/* Which prefix state the files are in, or -1. */
static int which_state(void)
{
	for (int i = 0; i < NFILES; i++) {
		struct stat sb;
		if (stat(t_path(fname[i]), &sb) == 0 && sb.st_size > (16 << 20))
			return -1; /* no state of the workload is that large */
	}
	for (int k = 0; k <= ngroups; k++) {
		int same = 1;
		for (int i = 0; i < NFILES && same; i++)
			same = m_compare(&states[k][i], t_path(fname[i]), 1) == 0;
		if (same)
			return k;
	}
	return -1;
}

static void check_dir(void)
{
	DIR *d = opendir(t_dir());
	CHECK(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		CHECK(!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, "log") || !strcmp(n, "log-shm") ||
		      !strcmp(n, "a") || !strcmp(n, "b") || !strcmp(n, "decoy"));
	}
	closedir(d);
	size_t n;
	uint8_t *b = t_slurp(t_path("decoy"), &n);
	CHECK(b && n == 5 && !memcmp(b, "decoy", 5));
	free(b);
}

/* Put image l in the log file, writing only the pages that differ from what
 * the file holds (and the superblocks, which every open rewrites). */
static struct lp shadow;
static void put_image(const struct lp *l)
{
	if (shadow.n != l->n) {
		CHECK_OK(lp_store(l, t_path("log")));
		free(shadow.b);
		shadow.b = malloc(l->n + 1);
		memcpy(shadow.b, l->b, l->n);
		shadow.n = l->n;
		return;
	}
	int fd = open(t_path("log"), O_WRONLY);
	CHECK(fd >= 0);
	for (size_t p = 0; p < l->n; p += 4096) {
		size_t k = l->n - p < 4096 ? l->n - p : 4096;
		if (p >= 2 * SB_SLOT && !memcmp(shadow.b + p, l->b + p, k))
			continue;
		CHECK(pwrite(fd, l->b + p, k, (off_t)p) == (ssize_t)k);
		memcpy(shadow.b + p, l->b + p, k);
	}
	close(fd);
}

/* Open the log image l; check the outcome.  max_k: the highest prefix that
 * may be replayed (records from max_k on are damaged); -1: a crafted record
 * may have written anything into the registered files. */
static int run(const struct lp *l, int max_k, const char *what)
{
	cases++;
	put_image(l);
	for (int i = 0; i < NFILES; i++)
		t_wipe(t_path(fname[i]));
	atomio *st;
	char err[512] = "";
	struct atomio_options o = {.errbuf = err, .errbuf_size = sizeof(err)};
	int r = atomio_open(t_path("log"), &o, &st);
	if (r == 0) {
		opened++;
		CHECK_OK(atomio_close(st));
	} else {
		refused++;
	}
	int k = which_state();
	if (!(r == 0 || r == ATOMIO_ENOTLOG || r == ATOMIO_EVERSION || r == ATOMIO_ECORRUPT ||
	      r == ATOMIO_EIDENTITY || r == ATOMIO_EBADPATH) ||
	    (max_k >= 0 && (k < 0 || k > max_k)) || (r < 0 && k != 0)) {
		fprintf(stderr, "%s: atomio_open %d (%s): %s; files in state %d (at most %d)\n", what, r,
			atomio_strerror(r), err, k, max_k);
		exit(1);
	}
	check_dir();
	if (getenv("BADFIELDS_TRACE"))
		printf("%s -> %d k=%d\n", what, r, k);
	return r;
}

static const uint64_t vals[] = {0, 1, 7, 8, 511, 4096, 65536, 1u << 20, 0x7fffffffu, 0xffffffffu,
				1ull << 32, 1ull << 48, (1ull << 62) - 1, 1ull << 62, 1ull << 63,
				UINT64_MAX - 7, UINT64_MAX};

/* Values that make sums wrap around 2^64 (set from the pristine log). */
static uint64_t extra[4];
static int nextra;

/* Candidate hostile values for the size-byte field at p. */
static int field_values(const uint8_t *p, unsigned size, uint64_t *out)
{
	uint64_t old = 0;
	memcpy(&old, p, size);
	int n = 0;
	uint64_t mask = size == 8 ? UINT64_MAX : (1ull << (8 * size)) - 1;
	uint64_t cand[32];
	int nc = 0;
	for (unsigned i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		cand[nc++] = vals[i] & mask;
	cand[nc++] = (old + 1) & mask;
	cand[nc++] = (old - 1) & mask;
	cand[nc++] = (old + 4096) & mask;
	cand[nc++] = (old ^ (1ull << (8 * size - 1))) & mask;
	for (int i = 0; i < nextra; i++)
		cand[nc++] = extra[i] & mask;
	for (int i = 0; i < nc; i++) {
		if (cand[i] == old)
			continue;
		int dup = 0;
		for (int j = 0; j < n; j++)
			dup |= out[j] == cand[i];
		if (!dup)
			out[n++] = cand[i];
	}
	return n;
}

struct field {
	const char *name;
	unsigned off, size;
};

static const struct field sb_fields[] = {
	{"magic", 0, 8},       {"bom", 8, 4},        {"version", 12, 4},   {"store_id", 16, 8},
	{"generation", 24, 8}, {"epoch", 32, 8},     {"head_off", 40, 8},  {"head_seq", 48, 8},
	{"area_off", 56, 8},   {"area_size", 64, 8}, {"block", 72, 4},     {"flags", 76, 4},
	{"cat_off", 80, 8},    {"cat_size", 88, 8},  {"ctime", 96, 8},     {"reserved", 104, 8},
	{"csum", 248, 8},
};
static const struct field cat_fields[] = {
	{"magic", 0, 4},  {"count", 4, 4},     {"store_id", 8, 8}, {"generation", 16, 8},
	{"used", 24, 8},  {"reserved", 32, 8}, {"csum", 56, 8},
};
static const struct field ent_fields[] = {
	{"id", 0, 4},   {"path_len", 4, 2}, {"flags", 6, 2}, {"dev", 8, 8},
	{"ino", 16, 8}, {"fsid", 24, 8},    {"path[0]", 32, 1},
};
static const struct field rec_fields[] = {
	{"magic", 0, 4},     {"type", 4, 2},      {"flags", 6, 2},     {"seq", 8, 8},
	{"epoch", 16, 8},    {"rec_len", 24, 8},  {"data_len", 32, 8}, {"nsegs", 40, 4},
	{"reserved", 44, 4}, {"raw_len", 48, 8},  {"csum", 56, 8},
};
static const struct field seg_fields[] = {
	{"file", 0, 4}, {"kind", 4, 2}, {"reserved", 6, 2}, {"off", 8, 8}, {"len", 16, 8}, {"data_off", 24, 8},
};

static struct lp work;

static void reset_work(void) { memcpy(work.b, pristine.b, pristine.n); }

int main(void)
{
	/* Many opens of a 2 MiB log: on tmpfs, where a sync costs nothing
	 * (what is tested here is parsing, not durability). */
	struct stat shm;
	if (!getenv("ATOMIO_TEST_DIR") && stat("/dev/shm", &shm) == 0 && S_ISDIR(shm.st_mode) &&
	    access("/dev/shm", W_OK) == 0)
		setenv("ATOMIO_TEST_DIR", "/dev/shm", 1);
	t_heap_keep();
	t_dir();
	CHECK_EQ(lp_crash_child(child, NULL), 0);
	build_states();
	CHECK_OK(lp_load(&pristine, t_path("log")));
	work.n = pristine.n;
	work.b = malloc(work.n);
	FILE *f = fopen(t_path("decoy"), "w");
	CHECK(f && fputs("decoy", f) >= 0 && fclose(f) == 0);

	struct sb_disk *psb = lp_sb(&pristine);
	CHECK(psb);
	const int cur_slot = psb->generation % 2;
	const uint64_t area_off = psb->area_off;
	unsigned nrec = lp_count_recs(&pristine, psb);
	CHECK_EQ(nrec, (unsigned)ngroups);
	printf("%d groups in the log, %zu bytes\n", ngroups, pristine.n);

	/* sound log: everything replayed */
	reset_work();
	CHECK_OK(run(&work, ngroups, "pristine"));
	CHECK_EQ(which_state(), ngroups);

	uint64_t v[40];
	char what[256];
	/* offset + size wrapping to a small number that "fits" the file */
	extra[nextra++] = 0 - psb->area_size;
	extra[nextra++] = 0 - psb->area_size + psb->block;
	extra[nextra++] = 0 - psb->area_off;
	extra[nextra++] = 0 - 2 * psb->cat_size;
	/* superblock fields: the current slot, then both slots */
	for (unsigned fi = 0; fi < sizeof(sb_fields) / sizeof(sb_fields[0]); fi++) {
		const struct field *fd = &sb_fields[fi];
		int nv = field_values(pristine.b + cur_slot * SB_SLOT + fd->off, fd->size, v);
		for (int vi = 0; vi < nv; vi += VSTEP)
			for (int both = 0; both < 2; both++)
				for (int seal = 0; seal < 2; seal++) {
					reset_work();
					for (int s = 0; s < 2; s++) {
						if (s != cur_slot && !both)
							continue;
						struct sb_disk *sb = lp_slot(&work, s);
						memcpy((uint8_t *)sb + fd->off, &v[vi], fd->size);
						if (seal && strcmp(fd->name, "csum"))
							lp_sb_seal(sb);
					}
					snprintf(what, sizeof(what), "superblock %s = %#llx (%s, %s)", fd->name,
						 (unsigned long long)v[vi], both ? "both slots" : "current slot",
						 seal ? "re-sealed" : "damaged");
					run(&work, ngroups, what);
				}
	}

	nextra = 0;

	/* catalog: header fields and entry fields of the current copy */
	for (int part = 0; part < 3; part++) {
		const struct field *fl = part == 0 ? cat_fields : ent_fields;
		unsigned nf = part == 0 ? sizeof(cat_fields) / sizeof(cat_fields[0])
					: sizeof(ent_fields) / sizeof(ent_fields[0]);
		for (unsigned fi = 0; fi < nf; fi++) {
			reset_work();
			struct sb_disk *sb = lp_sb(&work);
			struct cat_hdr_disk *c = lp_cat_cur(&work, sb);
			CHECK(c);
			uint8_t *base = part == 0 ? (uint8_t *)c : (uint8_t *)lp_cat_entry(c, (uint32_t)part - 1);
			size_t boff = (size_t)(base - work.b);
			int nv = field_values(base + fl[fi].off, fl[fi].size, v);
			for (int vi = 0; vi < nv; vi += VSTEP)
				for (int seal = 0; seal < 2; seal++) {
					reset_work();
					sb = lp_sb(&work);
					c = lp_cat_cur(&work, sb);
					memcpy(work.b + boff + fl[fi].off, &v[vi], fl[fi].size);
					if (seal && strcmp(fl[fi].name, "csum"))
						lp_cat_seal(sb, c);
					snprintf(what, sizeof(what), "catalog %s%s %s = %#llx (%s)",
						 part ? "entry " : "header", part == 2 ? "1" : part == 1 ? "0" : "",
						 fl[fi].name, (unsigned long long)v[vi], seal ? "re-sealed" : "damaged");
					run(&work, ngroups, what);
				}
		}
	}

	/* records: header and first descriptor of the first, a middle and the
	 * last record */
	int pick[3] = {0, ngroups / 2, ngroups - 1};
	for (int pi = 0; pi < 3; pi++) {
		uint64_t pos = psb->head_off;
		for (int j = 0; j < pick[pi]; j++)
			pos = lp_rec_next(psb, lp_rec(&pristine, psb, pos), pos);
		for (int part = 0; part < 2; part++) {
			const struct field *fl = part == 0 ? rec_fields : seg_fields;
			unsigned nf = part == 0 ? sizeof(rec_fields) / sizeof(rec_fields[0])
						: sizeof(seg_fields) / sizeof(seg_fields[0]);
			size_t boff = (size_t)(area_off + pos + (part ? REC_HDR : 0));
			for (unsigned fi = 0; fi < nf; fi++) {
				int nv = field_values(pristine.b + boff + fl[fi].off, fl[fi].size, v);
				for (int vi = 0; vi < nv; vi += VSTEP)
					for (int seal = 0; seal < 2; seal++) {
						reset_work();
						memcpy(work.b + boff + fl[fi].off, &v[vi], fl[fi].size);
						struct sb_disk *sb = lp_sb(&work);
						if (seal && strcmp(fl[fi].name, "csum"))
							lp_rec_seal(&work, sb, pos);
						snprintf(what, sizeof(what), "record %d %s %s = %#llx (%s)", pick[pi],
							 part ? "descriptor 0" : "header", fl[fi].name,
							 (unsigned long long)v[vi], seal ? "re-sealed" : "damaged");
						/* damaged: record pick[pi] and all after it are not
						 * replayed; a re-sealed header: a valid prefix or a
						 * refusal; a re-sealed descriptor is a valid record
						 * that may write other ranges of the registered files */
						run(&work, !seal ? pick[pi] : part ? -1 : ngroups, what);
					}
			}
		}
		/* one data byte, damaged: the record is the end of the log */
		reset_work();
		struct rec_hdr_disk *h = lp_rec(&work, psb, pos);
		work.b[area_off + pos + h->rec_len - 9] ^= 0x40;
		snprintf(what, sizeof(what), "record %d last data byte damaged", pick[pi]);
		run(&work, pick[pi], what);
	}

	/* truncated at many points (geometry no longer fits: refused) */
	for (size_t cut = 0; cut < pristine.n; cut += cut < 16384 ? 509 : 65537) {
		struct lp t = {pristine.b, cut};
		snprintf(what, sizeof(what), "truncated to %zu bytes", cut);
		run(&t, ngroups, what);
	}
	/* regions zero-filled and random-filled */
	uint64_t regions[][2] = {
		{0, SB_SLOT},
		{SB_SLOT, SB_SLOT},
		{0, 2 * SB_SLOT},
		{psb->cat_off, psb->cat_size},
		{psb->cat_off + psb->cat_size, psb->cat_size},
		{psb->cat_off, 2 * psb->cat_size},
		{area_off, 4096},
		{area_off + 4096, psb->area_size - 4096},
		{0, pristine.n},
	};
	struct rng rg = {SEED};
	for (unsigned ri = 0; ri < sizeof(regions) / sizeof(regions[0]); ri++)
		for (int fill = 0; fill < 2; fill++) {
			reset_work();
			for (uint64_t i = 0; i < regions[ri][1] && regions[ri][0] + i < work.n; i++)
				work.b[regions[ri][0] + i] = fill ? (uint8_t)rng_next(&rg) : 0;
			snprintf(what, sizeof(what), "bytes [%llu, +%llu) %s", (unsigned long long)regions[ri][0],
				 (unsigned long long)regions[ri][1], fill ? "random" : "zeroed");
			/* damage inside the area ends the log where it starts */
			int max_k = ngroups;
			if (regions[ri][0] >= area_off) {
				max_k = 0;
				uint64_t p = psb->head_off;
				while (max_k < ngroups && area_off + lp_rec_next(psb, lp_rec(&pristine, psb, p), p) <= regions[ri][0]) {
					p = lp_rec_next(psb, lp_rec(&pristine, psb, p), p);
					max_k++;
				}
			}
			run(&work, max_k, what);
		}

	/* another store: its superblock over ours (checksums seeded with the
	 * other store id no longer match: refused), its records in our area
	 * (ignored: nothing replayed) */
	CHECK_OK(rename(t_path("log"), t_path("log.ours")));
	CHECK_EQ(lp_crash_child(child, NULL), 0);
	struct lp other;
	CHECK_OK(lp_load(&other, t_path("log")));
	CHECK_OK(t_unlink_log(t_path("log"))); /* the child died with it open */
	CHECK_OK(rename(t_path("log.ours"), t_path("log")));
	reset_work();
	memcpy(work.b, other.b, 2 * SB_SLOT);
	CHECK_EQ(run(&work, 0, "another store's superblock"), ATOMIO_ECORRUPT);
	reset_work();
	memcpy(work.b + area_off, other.b + area_off, psb->area_size);
	CHECK_OK(run(&work, 0, "another store's records"));
	CHECK_EQ(which_state(), 0);
	lp_free(&other);

	printf("%lu bad logs: %lu opened (with a valid prefix replayed), %lu refused\n", cases, opened,
	       refused);
	lp_free(&pristine);
	lp_free(&shadow);
	free(work.b);
	return 0;
}
