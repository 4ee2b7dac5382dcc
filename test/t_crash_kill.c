/* Real processes killed at random moments.  Round after round, a child opens
 * the store (recovering what the last one left), and one to four threads
 * commit groups (workload.h: 1..8 ranges over their own 3 files, overlapping,
 * size changes, aborts; a small log, so it wraps) while the parent sleeps a
 * random time and SIGKILLs it: during open and recovery, between groups, in
 * the middle of a commit.  The child reports, per thread, the group it is
 * committing and the last one acknowledged through shared memory; the parent
 * reopens (recovery) and checks every file against the model: each thread's
 * files must hold its groups 1..k, k at least the acknowledged count, and
 * the initial bytes everywhere else.  Slots 1 and 3 write compressible
 * data (workload.h, w_fill_run), so their records are stored LZ4-compressed.
 *
 *   t_crash_kill [--seconds N] [--seed S] [--rounds N]
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "workload.h"

#define NT 4 /* thread slots, each with its own 3 files and group sequence */
#define NF 3
#define LOG_SIZE (256u << 10)

struct shm {
	_Atomic uint64_t started[NT]; /* group g is being committed: started = g + 1 */
	_Atomic uint64_t acked[NT];   /* groups 0..acked-1 are acknowledged (or aborted) */
	_Atomic int ready;            /* the store is open */
};

static struct shm *shm;
static uint64_t seed0;
static uint64_t start[NT]; /* next group of each slot: groups before it are in the files */
static size_t max_bytes;
static char paths[NT][NF][64];

static uint64_t tseed(int t) { return seed0 * 16 + (uint64_t)t; }

/* The data of slot t: compressible for odd slots (issue 7). */
static unsigned fill_run(int t) { return t % 2 ? 16 : 0; }

/* Slots 2 and 3 open their files O_DIRECT (where the filesystem allows it):
 * by default their home writes go through buffered twin descriptors, with
 * ATOMIO_DIRECT_HOME (some rounds) with O_DIRECT.  Their groups are aligned
 * to 4096 bytes, as O_DIRECT files need. */
#define DIO 4096u
static bool slot_direct(int t) { return t >= 2; }

static void slot_group(int t, uint64_t g, struct wgroup *wg)
{
	w_group(tseed(t), (int)g, NF, max_bytes, wg);
	if (!slot_direct(t))
		return;
	size_t total = 0;
	int n = 0;
	for (int i = 0; i < wg->nops; i++) {
		struct wop *o = &wg->op[i];
		if (!o->truncate) {
			o->off = o->off / DIO * DIO;
			o->len = (o->len + DIO - 1) / DIO * DIO;
			if (total + o->len > max_bytes)
				break; /* the group ends here */
			total += o->len;
		}
		n++;
	}
	wg->nops = n ? n : 1;
	if (!wg->op[0].truncate && wg->op[0].len > max_bytes)
		wg->op[0].len = max_bytes / DIO * DIO;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct targ {
	atomio *st;
	int t;
	int ids[NF];
};

static void *child_thread(void *arg)
{
	struct targ *a = arg;
	w_fill_run = fill_run(a->t);
	for (uint64_t g = start[a->t];; g++) {
		struct wgroup wg;
		slot_group(a->t, g, &wg);
		atomic_store(&shm->started[a->t], g + 1);
		atomio_tx *tx;
		if (atomio_tx_begin(a->st, &tx) < 0 || w_build(&wg, tx, a->ids) < 0)
			_exit(3);
		if (wg.abort) {
			atomio_tx_abort(tx);
		} else {
			int r = atomio_tx_commit(tx);
			if (r < 0) {
				fprintf(stderr, "child: commit of group %" PRIu64 " of slot %d: %s\n", g, a->t,
					atomio_strerror(r));
				_exit(3);
			}
		}
		atomic_store(&shm->acked[a->t], g + 1);
		if (g % 11 == 5 && atomio_checkpoint(a->st) < 0)
			_exit(3);
	}
	return NULL;
}

static void child(int nthreads, uint32_t flags)
{
	struct atomio_options o = t_opts(LOG_SIZE);
	o.flags |= flags;
	atomio *st;
	int r = atomio_open(t_path("log"), &o, &st);
	if (r < 0) {
		fprintf(stderr, "child: open: %s\n", atomio_strerror(r));
		_exit(3);
	}
	struct targ a[NT];
	for (int t = 0; t < NT; t++) {
		a[t].st = st;
		a[t].t = t;
		for (int i = 0; i < NF; i++) {
			a[t].ids[i] = -EINVAL;
			if (slot_direct(t))
				a[t].ids[i] = atomio_file_open(st, paths[t][i], O_CREAT | O_DIRECT, 0644);
			if (a[t].ids[i] == -EINVAL) /* no O_DIRECT here (tmpfs) */
				a[t].ids[i] = atomio_file_open(st, paths[t][i], O_CREAT, 0644);
			if (a[t].ids[i] < 0)
				_exit(3);
		}
	}
	atomic_store(&shm->ready, 1);
	pthread_t th[NT];
	for (int t = 1; t < nthreads; t++)
		pthread_create(&th[t], NULL, child_thread, &a[t]);
	child_thread(&a[0]);
	_exit(0);
}

/* Model of slot t after groups 0..k-1 (from the initial contents). */
static void model_upto(int t, uint64_t k, struct mfile *base, uint64_t *base_k, struct mfile *out)
{
	w_fill_run = fill_run(t);
	for (; *base_k < k; (*base_k)++) {
		struct wgroup wg;
		slot_group(t, *base_k, &wg);
		w_model(&wg, base);
	}
	for (int i = 0; i < NF; i++) {
		free(out[i].b);
		out[i] = m_copy(&base[i]);
	}
}

int main(int argc, char **argv)
{
	double seconds = 0;
	int rounds = T_SCALE(400);
	bool have_seed = false;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--seed"))
			seed0 = strtoull(argv[i + 1], NULL, 0), have_seed = true;
		else if (!strcmp(argv[i], "--rounds"))
			rounds = atoi(argv[i + 1]);
	}
	if (!have_seed)
		seed0 = t_seed_env(1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("kill test: seed %" PRIu64 " (ATOMIO_SEED=%" PRIu64 " to repeat)\n", seed0, seed0);

	t_dir();
	CHECK_OK(mkdir(t_path("sub"), 0755));
	shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(shm != MAP_FAILED);

	/* Initial contents: some files absent, some empty, some with bytes. */
	struct mfile base[NT][NF];
	uint64_t base_k[NT] = {0};
	memset(base, 0, sizeof(base));
	struct rng r = {seed0};
	for (int t = 0; t < NT; t++)
		for (int i = 0; i < NF; i++) {
			snprintf(paths[t][i], sizeof(paths[t][i]), "%s%d%c", t == 1 && i == 2 ? "sub/" : "", t,
				 'a' + i);
			strcpy(paths[t][i], t_path(paths[t][i]));
			uint64_t k = rng_below(&r, 4);
			if (k == 0)
				continue;
			size_t size = k == 1 ? 0 : 1 + (size_t)rng_below(&r, 200000);
			uint8_t *b = malloc(size + 1);
			t_fill(b, size, 0xF00 + (uint32_t)(t * NF + i), 0);
			if (size)
				m_write(&base[t][i], b, size, 0);
			int fd = open(paths[t][i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
			CHECK(fd >= 0 && write(fd, b, size) == (ssize_t)size);
			fsync(fd);
			close(fd);
			free(b);
		}
	{
		struct atomio_options o = t_opts(LOG_SIZE);
		atomio *st;
		CHECK_OK(atomio_open(t_path("log"), &o, &st));
		struct atomio_caps caps;
		CHECK_OK(atomio_caps(st, -1, &caps));
		max_bytes = caps.max_group_bytes - 64 * W_MAXOPS;
		CHECK_OK(atomio_close(st));
	}

	double t0 = now();
	uint64_t kills = 0, during_open = 0, in_flight = 0, mt_rounds = 0, groups = 0, recovered = 0,
		 dhome_rounds = 0;
	struct mfile cand[NF] = {{0}};
	for (int round = 0; seconds > 0 ? now() - t0 < seconds : round < rounds; round++) {
		int nthreads = rng_below(&r, 5) < 3 ? 1 : 2 + (int)rng_below(&r, NT - 1);
		mt_rounds += nthreads > 1;
		for (int t = 0; t < NT; t++) {
			atomic_store(&shm->started[t], start[t]);
			atomic_store(&shm->acked[t], start[t]);
		}
		atomic_store(&shm->ready, 0);
		/* the engine's defaults (background checkpoints, twins) mostly;
		 * DIRECT_HOME or no background checkpoints now and then */
		uint64_t fk = rng_below(&r, 8);
		uint32_t flags = fk == 0 ? ATOMIO_DIRECT_HOME : fk == 1 ? ATOMIO_NO_BG_CHECKPOINT : 0;
		dhome_rounds += fk == 0;
		pid_t p = fork();
		CHECK(p >= 0);
		if (p == 0)
			child(nthreads, flags);
		/* kill during open/recovery now and then, else while committing */
		bool early = rng_below(&r, 6) == 0;
		if (!early)
			while (!atomic_load(&shm->ready)) {
				int ws;
				if (waitpid(p, &ws, WNOHANG) == p) {
					fprintf(stderr, "round %d: the child died before the store was open (status %d)\n",
						round, ws);
					return 1;
				}
				usleep(100);
			}
		usleep((useconds_t)(early ? rng_below(&r, 3000) : rng_below(&r, 25000)));
		CHECK_OK(kill(p, SIGKILL));
		int ws;
		CHECK(waitpid(p, &ws, 0) == p);
		if (!WIFSIGNALED(ws)) {
			fprintf(stderr, "round %d: the child exited with %d before the kill\n", round,
				WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
			return 1;
		}
		kills++;
		during_open += !atomic_load(&shm->ready);

		/* Reopen: recovery, then the oracle. */
		if (w_recover(t_path("log"), round, seed0, &recovered))
			return 1;
		for (int t = 0; t < NT; t++) {
			uint64_t lo = atomic_load(&shm->acked[t]), hi = atomic_load(&shm->started[t]);
			in_flight += hi > lo;
			int64_t k = -1;
			for (uint64_t kk = hi + 1; kk-- > lo;) { /* the largest match: progress */
				model_upto(t, lo, base[t], &base_k[t], cand);
				for (uint64_t g = lo; g < kk; g++) {
					struct wgroup wg;
					slot_group(t, g, &wg);
					w_model(&wg, cand);
				}
				bool ok = true;
				for (int i = 0; i < NF && ok; i++)
					ok = m_compare(&cand[i], paths[t][i], 1) == 0;
				if (ok) {
					k = (int64_t)kk;
					break;
				}
			}
			if (k < 0) {
				fprintf(stderr, "round %d (seed %" PRIu64 ", %d threads): slot %d holds no state between "
						"groups 0..%" PRIu64 " and 0..%" PRIu64 "; against the acknowledged one:\n",
					round, seed0, nthreads, t, lo, hi);
				model_upto(t, lo, base[t], &base_k[t], cand);
				for (int i = 0; i < NF; i++)
					m_compare(&cand[i], paths[t][i], 0);
				return 1;
			}
			groups += (uint64_t)k - start[t];
			start[t] = (uint64_t)k;
		}
		if (seconds > 0 && round % 500 == 499)
			printf("  %.0f s: %" PRIu64 " kills\n", now() - t0, kills);
	}
	for (int t = 0; t < NT; t++)
		for (int i = 0; i < NF; i++)
			free(base[t][i].b);
	for (int i = 0; i < NF; i++)
		free(cand[i].b);
	printf("kill test: seed %" PRIu64 ", %" PRIu64 " kills (%" PRIu64 " during open or recovery, %" PRIu64
	       " with several threads, %" PRIu64 " with a group in flight, %" PRIu64 " with ATOMIO_DIRECT_HOME), %" PRIu64
	       " groups kept, %" PRIu64 " replayed by recovery, %.1f s: passed\n",
	       seed0, kills, during_open, mt_rounds, in_flight, dhome_rounds, groups, recovered, now() - t0);
	CHECK(groups > 0 && recovered > 0);
	return 0;
}
