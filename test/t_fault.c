/* Fault injection at every I/O call (issue 3, item 4).
 *
 * Two representative workloads run under the fault backend (support/faultsys):
 *   W1  create a store, register two new files, commit groups (with sizes
 *       changed, an explicit checkpoint, and enough data to fill the log
 *       once), close;
 *   W2  open a store a crashed process left with groups in its log (so
 *       recovery replays them), register the files, the same groups, close;
 *   W3  W1 where the record area refuses RWF_DSYNC (a record is written,
 *       then fdatasync'ed: the fallback path);
 *   W4  W1 with compressible data: the records are stored LZ4-compressed
 *       (every second call index, to keep the time).
 * Each ends with an explicit checkpoint and one plain write, so that close
 * syncs a file whose size did not change (fdatasync).
 * A fault-free run counts the calls of each kind; then, for every kind of call,
 * every call index and every way that call can fail (EIO, ENOSPC, an error
 * reported after the call took effect, EINTR, a short transfer), the workload
 * runs again with that one call failing.  Checked every time:
 *   - EINTR and short transfers are absorbed: the run succeeds as if clean;
 *   - an error reaches the caller as a negative return, never a success after
 *     a failed sync (fsync, fdatasync or an RWF_DSYNC write);
 *   - after a commit or checkpoint fails, the store refuses every later
 *     commit with ATOMIO_EFAILED until it is reopened;
 *   - reopening without faults recovers the files to the state after groups
 *     1..k, where k covers every acknowledged group and at most the one
 *     whose commit failed (the oracle), and the reopened store commits again.
 * A sample of faults is also made persistent (a disk that died). */
#include <ftw.h>

#include "workload.h"
#include "support/faultsys.h"
#include "support/logpatch.h"

#define NFILES 2
#define SEED_PRE 11
#define NPRE 3
#define SEED 23
#define NGROUPS 9
#define MAXB 14000

static const char *fname[NFILES] = {"a", "b"};
static struct mfile states[3][NGROUPS + 2][NFILES]; /* [start / data][k committed][file] */
static uint64_t last_compressed; /* records stored compressed in the last workload */
static int ncommit; /* groups that commit: those of SEED not aborted, + the final write */
static char dir[4200];
static unsigned long runs, fired_runs, absorbed, refused_after, reopen_checks;

static char *P(const char *name)
{
	static char bufs[4][4400];
	static int i;
	char *b = bufs[i++ % 4];
	snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
	return b;
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

/* The last group: a plain write after a checkpoint, so that close syncs a
 * file whose size did not change (fdatasync). */
static uint8_t final_buf[5000];
static void final_write(struct mfile *m)
{
	t_fill(final_buf, sizeof(final_buf), 999999, 1000);
	if (m)
		m_write(&m[0], final_buf, sizeof(final_buf), 1000);
}

static void build_states(void)
{
	for (int w = 0; w < 3; w++) {
		w_fill_run = w == 2 ? 16 : 0;
		struct mfile cur[NFILES] = {{0}};
		if (w == 1)
			for (int g = 0; g < NPRE; g++) {
				struct wgroup wg;
				w_group(SEED_PRE, g, NFILES, MAXB, &wg);
				w_model(&wg, cur);
			}
		int k = 0;
		for (int i = 0; i < NFILES; i++)
			states[w][0][i] = copy(&cur[i]);
		for (int g = 0; g < NGROUPS; g++) {
			struct wgroup wg;
			w_group(SEED, g, NFILES, MAXB, &wg);
			if (wg.abort)
				continue;
			w_model(&wg, cur);
			k++;
			for (int i = 0; i < NFILES; i++)
				states[w][k][i] = copy(&cur[i]);
		}
		final_write(cur);
		k++;
		for (int i = 0; i < NFILES; i++)
			states[w][k][i] = copy(&cur[i]);
		ncommit = k;
		for (int i = 0; i < NFILES; i++)
			free(cur[i].b);
	}
	w_fill_run = 0;
}

/* W2's starting point: groups of SEED_PRE committed, then a crash. */
static void pre_child(void *arg)
{
	(void)arg;
	struct atomio_options o = t_opts(65536);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT; /* the parent wipes the files: nothing may be checkpointed */
	atomio *st;
	CHECK_OK(atomio_open(P("log"), &o, &st));
	int ids[NFILES];
	for (int i = 0; i < NFILES; i++)
		CHECK_EQ(ids[i] = atomio_file_open(st, P(fname[i]), O_CREAT, 0644), i);
	for (int g = 0; g < NPRE; g++) {
		struct wgroup wg;
		w_group(SEED_PRE, g, NFILES, MAXB, &wg);
		atomio_tx *tx;
		CHECK_OK(atomio_tx_begin(st, &tx));
		CHECK_OK(w_build(&wg, tx, ids));
		CHECK_OK(atomio_tx_commit(tx));
	}
}

struct res {
	int acked;      /* groups whose commit returned 0 */
	int attempted;  /* groups whose commit was tried and may be in the log */
	int errors;     /* API calls that failed */
	bool poisoned;  /* a commit or checkpoint failed */
};

static const char *cur_call;
static uint64_t last_calls[FOP_COUNT]; /* calls of each kind in the last workload */

/* Check one API call's result against the rules; returns r. */
static int api(int r, bool fired_before, const char *what)
{
	cur_call = what;
	if (r < 0)
		/* errors are negative errnos or atomio's own codes, with a name */
		CHECK(r > -4096 || (r <= -ATOMIO_EBASE - 1 && r >= -ATOMIO_ELAST));
	if (!fired_before && fault_fired() && fault_sync_error() && r >= 0) {
		fprintf(stderr, "%s returned %d after a failed sync\n", what, r);
		exit(1);
	}
	return r;
}

#define API(res_, call, what)                                      \
	do {                                                       \
		bool f0_ = fault_fired();                          \
		res_ = api((int)(call), f0_, what);                \
	} while (0)

static void workload(int w, struct res *res)
{
	memset(res, 0, sizeof(*res));
	atomio *st = NULL;
	struct atomio_options o = w != 1 ? t_opts(65536) : (struct atomio_options){0};
	/* Checkpoints inside the calls that need them, not on the store's own
	 * thread: the runs must make the same calls in the same order for
	 * "the Nth call" to mean one thing, and "no success after a failed
	 * sync" is about the calling thread's own syncs.  (A background
	 * checkpoint's failure is seen by the next call; groups committed
	 * meanwhile stay in the log and are replayed.) */
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	int r;
	API(r, atomio_open(P("log"), &o, &st), "atomio_open");
	if (r < 0) {
		res->errors++;
		return;
	}
	int ids[NFILES];
	for (int i = 0; i < NFILES; i++) {
		API(r, atomio_file_open(st, P(fname[i]), w != 1 ? O_CREAT : 0, 0644), "atomio_file_open");
		if (r < 0) {
			res->errors++;
			atomio_close(st);
			return;
		}
		ids[i] = r;
	}
	for (int g = 0; g < NGROUPS; g++) {
		struct wgroup wg;
		w_group(SEED, g, NFILES, MAXB, &wg);
		atomio_tx *tx;
		API(r, atomio_tx_begin(st, &tx), "atomio_tx_begin");
		if (r < 0) {
			CHECK(res->poisoned);
			CHECK_EQ(r, ATOMIO_EFAILED);
			refused_after++;
			continue;
		}
		CHECK_OK(w_build(&wg, tx, ids));
		if (wg.abort) {
			atomio_tx_abort(tx);
			continue;
		}
		API(r, atomio_tx_commit(tx), "atomio_tx_commit");
		if (r == 0) {
			CHECK(!res->poisoned);
			res->acked++;
			res->attempted++;
		} else if (res->poisoned) {
			CHECK_EQ(r, ATOMIO_EFAILED); /* refused: nothing was logged */
			refused_after++;
		} else {
			res->errors++;
			res->poisoned = true;
			/* ATOMIO_EUNKNOWN: this group may be in the log; any
			 * other error means nothing of it was written */
			if (r == ATOMIO_EUNKNOWN)
				res->attempted++;
		}
		if (g == 2) {
			API(r, atomio_checkpoint(st), "atomio_checkpoint");
			if (r < 0) {
				if (res->poisoned) {
					CHECK_EQ(r, ATOMIO_EFAILED);
				} else {
					res->errors++;
					res->poisoned = true;
				}
			}
		}
	}
	API(r, atomio_checkpoint(st), "atomio_checkpoint");
	if (r < 0) {
		if (res->poisoned) {
			CHECK_EQ(r, ATOMIO_EFAILED);
		} else {
			res->errors++;
			res->poisoned = true;
		}
	}
	final_write(NULL);
	API(r, atomio_pwrite(st, ids[0], final_buf, sizeof(final_buf), 1000), "atomio_pwrite");
	if (r == (int)sizeof(final_buf)) {
		CHECK(!res->poisoned);
		res->acked++;
		res->attempted++;
	} else if (res->poisoned) {
		CHECK_EQ(r, ATOMIO_EFAILED);
		refused_after++;
	} else {
		CHECK(r < 0);
		res->errors++;
		res->poisoned = true;
		if (r == ATOMIO_EUNKNOWN)
			res->attempted++; /* else not written: never applied */
	}
	struct atomio_stats as;
	last_compressed = atomio_stats(st, &as) == 0 ? as.records_compressed : 0;
	API(r, atomio_close(st), "atomio_close");
	if (r < 0)
		res->errors++;
}

static int rm_cb(const char *p, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb; (void)type; (void)ftw;
	return remove(p);
}

/* Reopen without faults; check the oracle; commit once more. */
static void verify(int w, const struct res *res, const char *what)
{
	reopen_checks++;
	const int s = w == 3 ? 2 : w == 1; /* W2 starts from the crashed store's groups */
	atomio *st;
	char err[512] = "";
	struct atomio_options o = {.errbuf = err, .errbuf_size = sizeof(err)};
	int r = atomio_open(P("log"), &o, &st);
	if (r == -ENOENT && w != 1) {
		/* the log was never created: nothing may have been acknowledged */
		CHECK_EQ(res->acked, 0);
		for (int i = 0; i < NFILES; i++)
			CHECK_OK(m_compare(&states[s][0][i], P(fname[i]), 0));
		return;
	}
	if (r < 0) {
		fprintf(stderr, "%s: reopen failed: %s: %s\n", what, atomio_strerror(r), err);
		exit(1);
	}
	int k = -1;
	for (int c = res->acked; c <= res->attempted && k < 0; c++) {
		int same = 1;
		for (int i = 0; i < NFILES && same; i++)
			same = m_compare(&states[s][c][i], P(fname[i]), 1) == 0;
		if (same)
			k = c;
	}
	if (k < 0) {
		fprintf(stderr, "%s: after reopen the files match no state after %d..%d groups\n", what,
			res->acked, res->attempted);
		for (int i = 0; i < NFILES; i++)
			m_compare(&states[s][res->acked][i], P(fname[i]), 0);
		exit(1);
	}
	/* the reopened store works */
	int id = atomio_file_open(st, P(fname[0]), O_CREAT, 0644);
	CHECK(id >= 0);
	CHECK_EQ(atomio_pwrite(st, id, "ok", 2, 0), 2);
	CHECK_OK(atomio_close(st));
}

static void one_run(int w, const struct fault_plan *plan, const char *what)
{
	runs++;
	snprintf(dir, sizeof(dir), "%s/run", t_dir());
	CHECK_OK(mkdir(dir, 0700));
	if (w == 1) {
		fault_disarm();
		CHECK_EQ(lp_crash_child(pre_child, NULL), 0);
		for (int i = 0; i < NFILES; i++)
			t_wipe(P(fname[i])); /* no home write reached the disk */
	}
	/* W3: W1 where the record area refuses RWF_DSYNC (records are then
	 * written, then fdatasync'ed) */
	fault_refuse_dsync_from(w == 2 ? align_up(CAT_OFF + 2ull * CAT_DEFAULT_SIZE, 4096) : 0);
	w_fill_run = w == 3 ? 16 : 0;
	fault_arm(plan);
	struct res res;
	workload(w, &res);
	w_fill_run = 0;
	for (int op = 0; op < FOP_COUNT; op++)
		last_calls[op] = fault_calls((enum fault_op)op);
	bool fired = fault_fired();
	fault_disarm();
	if (fired)
		fired_runs++;
	bool absorbable = plan->kind == FK_EINTR || plan->kind == FK_SHORT || plan->kind == FK_NONE;
	if (!fired || absorbable) {
		if (res.errors || res.acked != ncommit) {
			fprintf(stderr, "%s: %s (last call %s): %d errors, %d of %d groups acknowledged\n", what,
				fired ? "a fault that must be absorbed failed the run" : "clean run failed",
				cur_call, res.errors, res.acked, ncommit);
			exit(1);
		}
		if (fired)
			absorbed++;
	}
	verify(w, &res, what);
	fault_refuse_dsync_from(0);
	CHECK_OK(nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS));
}

struct way {
	enum fault_op op;
	enum fault_kind kind;
	int err;
};

static const struct way ways[] = {
	{FOP_OPEN, FK_ERROR, EIO},          {FOP_OPEN, FK_ERROR, ENOSPC},
	{FOP_OPEN, FK_ERROR_AFTER, EIO},    {FOP_CLOSE, FK_ERROR_AFTER, EIO},
	{FOP_PREAD, FK_ERROR, EIO},         {FOP_PREAD, FK_EINTR, 0},
	{FOP_PREAD, FK_SHORT, 0},           {FOP_PWRITEV, FK_ERROR, EIO},
	{FOP_PWRITEV, FK_ERROR, ENOSPC},    {FOP_PWRITEV, FK_ERROR_AFTER, EIO},
	{FOP_PWRITEV, FK_EINTR, 0},         {FOP_PWRITEV, FK_SHORT, 0},
	{FOP_FSYNC, FK_ERROR, EIO},         {FOP_FSYNC, FK_ERROR_AFTER, EIO},
	{FOP_FSYNC, FK_EINTR, 0},           {FOP_FDATASYNC, FK_ERROR, EIO},
	{FOP_FDATASYNC, FK_ERROR_AFTER, EIO}, {FOP_FDATASYNC, FK_EINTR, 0},
	{FOP_FTRUNCATE, FK_ERROR, EIO},     {FOP_FTRUNCATE, FK_ERROR_AFTER, ENOSPC},
	{FOP_FTRUNCATE, FK_EINTR, 0},       {FOP_FSTAT, FK_ERROR, EIO},
	{FOP_LSTAT, FK_ERROR, EIO},         {FOP_FSTATFS, FK_ERROR, EIO},
	{FOP_STATX, FK_ERROR, EIO},         {FOP_FLOCK, FK_ERROR, ENOLCK},
	{FOP_RENAME, FK_ERROR, EIO},        {FOP_RENAME, FK_ERROR_AFTER, EIO},
	{FOP_UNLINK, FK_ERROR, EIO},        {FOP_GETRANDOM, FK_ERROR, ENOSYS},
	{FOP_REALPATH, FK_ERROR, EIO},      {FOP_LSEEK, FK_ERROR, EIO},
};

int main(void)
{
	/* Hundreds of short runs: on tmpfs where available (syncs cost
	 * nothing there; what is tested is the handling of each failure). */
	struct stat shm;
	if (!getenv("ATOMIO_TEST_DIR") && stat("/dev/shm", &shm) == 0 && S_ISDIR(shm.st_mode) &&
	    access("/dev/shm", W_OK) == 0)
		setenv("ATOMIO_TEST_DIR", "/dev/shm", 1);
	t_heap_keep();
	t_dir();
	build_states();
	fault_install();

	uint64_t count[4][FOP_COUNT];
	for (int w = 0; w < 4; w++) {
		struct fault_plan none = {.kind = FK_NONE};
		static const char *const clean[] = {"W1 clean", "W2 clean", "W3 clean", "W4 clean"};
		one_run(w, &none, clean[w]);
		if (w == 3) {
			printf("W4: %llu records stored compressed\n", (unsigned long long)last_compressed);
			CHECK(last_compressed > 0);
		}
		/* one_run disarmed; the counters keep the clean run's calls */
		printf("W%d: %d groups acknowledged; calls:", w + 1, ncommit);
		for (int op = 0; op < FOP_COUNT; op++) {
			count[w][op] = last_calls[op];
			printf(" %s %llu", fault_op_name((enum fault_op)op), (unsigned long long)count[w][op]);
		}
		printf("\n");
	}

	/* Every call index of every kind, every way it can fail.  The
	 * sanitizer build takes every third index (it runs 3x slower). */
#ifdef ATOMIO_SAN
	const uint64_t step = 3;
#else
	const uint64_t step = 1;
#endif
	char what[160];
	for (int w = 0; w < 4; w++)
		for (unsigned wi = 0; wi < sizeof(ways) / sizeof(ways[0]); wi++) {
			const struct way *wy = &ways[wi];
			const uint64_t st = w == 3 ? 2 * step : step;
			for (uint64_t n = wi % st; n < count[w][wy->op]; n += st) {
				struct fault_plan p = {.op = wy->op, .nth = n, .kind = wy->kind, .err = wy->err};
				snprintf(what, sizeof(what), "W%d %s #%llu %s %s", w + 1, fault_op_name(wy->op),
					 (unsigned long long)n, fault_kind_name(wy->kind), wy->err ? strerror(wy->err) : "");
				one_run(w, &p, what);
			}
		}
	/* A disk that died: from one call on, every write (or sync) fails. */
	const enum fault_op dead[] = {FOP_PWRITEV, FOP_FSYNC, FOP_FDATASYNC, FOP_PREAD};
	for (int w = 0; w < 4; w++)
		for (unsigned d = 0; d < sizeof(dead) / sizeof(dead[0]); d++)
			for (uint64_t n = 0; n < count[w][dead[d]]; n += 4 * step) {
				struct fault_plan p = {.op = dead[d], .nth = n, .kind = FK_ERROR, .err = EIO,
						       .persist = true};
				snprintf(what, sizeof(what), "W%d %s dies at #%llu", w + 1, fault_op_name(dead[d]),
					 (unsigned long long)n);
				one_run(w, &p, what);
			}
	fault_uninstall();
	printf("%lu runs, %llu faults injected (%lu runs hit), %lu absorbed (EINTR / short I/O), "
	       "%lu commits refused after a failure (ATOMIO_EFAILED), %lu reopens checked\n",
	       runs, (unsigned long long)fault_total_injected(), fired_runs, absorbed, refused_after,
	       reopen_checks);
	return 0;
}
