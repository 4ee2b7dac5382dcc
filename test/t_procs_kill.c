/* Many processes, one store, killed at random moments.  Round after round,
 * each of NS slots runs in a process of its own (or two slots share one, as
 * threads), opens the log itself and commits groups (workload.h: 1..8 ranges
 * over the slot's own files, overlapping, size changes, aborts; a small log,
 * so it wraps and checkpoints often), and every group also writes its stamp
 * (slot, group) over the same bytes of one file all slots share.  The parent
 * kills ONE process while the others go on -- leading a batch, between its
 * log and home writes, half-way through a checkpoint, holding the shared
 * mutex, wherever the moment falls -- checks that the survivors go on
 * committing (their stall is reported), and now and then has another
 * process join and leave the store meanwhile; then it kills them all and
 * opens the store alone (recovery).  Checks: each slot's files hold its groups
 * 1..k, k at least the acknowledged count (a group of a dead process may
 * have been committed by a survivor, never half of one); the shared stamp
 * names a group that is in its slot's files (a group is whole: its stamp
 * never without its other ranges), and the last one of its slot or an
 * earlier one that a later group of another slot overwrote.
 *
 *   t_procs_kill [--rounds N] [--seed S]
 *
 * timeout: 600 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "workload.h"

#define NS 4 /* slots: a group sequence and 2 files each */
#define NF 2
#define LOG_SIZE (512u << 10)
#define STAMP_OFF 4096u

struct share {
	_Atomic uint64_t started[NS]; /* group g is being committed: started = g + 1 */
	_Atomic uint64_t acked[NS];   /* groups 0..acked-1 are acknowledged (or aborted) */
	_Atomic int ready[NS];
	_Atomic int churns;           /* opens and closes of the churning process */
};

static struct share *sh;
static uint64_t seed0;
static uint64_t start[NS];
static size_t max_bytes;
static char paths[NS][NF][64];
static char shared_path[64];

static uint64_t tseed(int t) { return seed0 * 16 + (uint64_t)t; }

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct stamp {
	uint32_t magic, slot;
	uint64_t group;
	uint64_t check; /* of the two above: a torn stamp never passes */
};
#define STAMP_MAGIC 0x5354414du

static uint64_t stamp_check(const struct stamp *s)
{
	return (s->slot * 0x9E3779B97F4A7C15ull) ^ (s->group * 0xBF58476D1CE4E5B9ull) ^ 0x1234567ull;
}

struct targ {
	atomio *st;
	int t;
	int ids[NF + 1]; /* the slot's files, then the shared one */
};

static void *slot_thread(void *arg)
{
	struct targ *a = arg;
	for (uint64_t g = start[a->t];; g++) {
		struct wgroup wg;
		w_group(tseed(a->t), (int)g, NF, max_bytes, &wg);
		atomic_store(&sh->started[a->t], g + 1);
		atomio_tx *tx;
		if (atomio_tx_begin(a->st, &tx) < 0 || w_build(&wg, tx, a->ids) < 0)
			_exit(3);
		struct stamp s = {.magic = STAMP_MAGIC, .slot = (uint32_t)a->t, .group = g};
		s.check = stamp_check(&s);
		if (atomio_tx_write(tx, a->ids[NF], &s, sizeof(s), STAMP_OFF) < 0)
			_exit(3);
		if (wg.abort) {
			atomio_tx_abort(tx);
		} else {
			int r = atomio_tx_commit(tx);
			if (r < 0) {
				fprintf(stderr, "slot %d: commit of group %" PRIu64 ": %s\n", a->t, g, atomio_strerror(r));
				_exit(3);
			}
		}
		atomic_store(&sh->acked[a->t], g + 1);
		if (g % 13 == 7 && atomio_checkpoint(a->st) < 0)
			_exit(3);
	}
	return NULL;
}

/* A child goes when the test does, whatever ends it (a failed check aborts
 * it, a harness's timeout kills it): no writer is left looping behind it.
 * (The parent may be gone before the call: then at once.) */
static void die_with(pid_t parent)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(1);
}

/* A process of slots [t0, t1), each a thread. */
static void proc_main(int t0, int t1, uint32_t flags)
{
	struct atomio_options o = t_opts(LOG_SIZE);
	char err[512] = "";
	o.flags |= flags;
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	atomio *st;
	int r = atomio_open(t_path("log"), &o, &st);
	if (r < 0) {
		fprintf(stderr, "slot %d: open: %s: %s\n", t0, atomio_strerror(r), err);
		_exit(3);
	}
	struct targ a[NS];
	for (int t = t0; t < t1; t++) {
		a[t].st = st;
		a[t].t = t;
		for (int i = 0; i < NF; i++)
			if ((a[t].ids[i] = atomio_file_open(st, paths[t][i], O_CREAT, 0644)) < 0)
				_exit(3);
		if ((a[t].ids[NF] = atomio_file_open(st, shared_path, O_CREAT, 0644)) < 0)
			_exit(3);
	}
	for (int t = t0; t < t1; t++)
		atomic_store(&sh->ready[t], 1);
	pthread_t th[NS];
	for (int t = t0 + 1; t < t1; t++)
		pthread_create(&th[t], NULL, slot_thread, &a[t]);
	slot_thread(&a[t0]);
	_exit(0);
}

/* Another process joins the store and leaves it, again and again. */
static void churn_main(void)
{
	for (;;) {
		struct atomio_options o = {0};
		atomio *st;
		if (atomio_open(t_path("log"), &o, &st) < 0)
			_exit(3);
		struct atomio_stats s;
		if (atomio_stats(st, &s) < 0 || atomio_close(st) < 0)
			_exit(3);
		atomic_fetch_add(&sh->churns, 1);
	}
}

/* Model of slot t after groups 0..k-1 (from the initial contents). */
static void model_upto(int t, uint64_t k, struct mfile *base, uint64_t *base_k, struct mfile *out)
{
	for (; *base_k < k; (*base_k)++) {
		struct wgroup wg;
		w_group(tseed(t), (int)*base_k, NF, max_bytes, &wg);
		w_model(&wg, base);
	}
	for (int i = 0; i < NF; i++) {
		free(out[i].b);
		out[i] = m_copy(&base[i]);
	}
}

static bool alive(pid_t p)
{
	int ws;
	return waitpid(p, &ws, WNOHANG) == 0;
}

int main(int argc, char **argv)
{
	int rounds = T_SCALE(24);
	bool have_seed = false;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--seed"))
			seed0 = strtoull(argv[i + 1], NULL, 0), have_seed = true;
		else if (!strcmp(argv[i], "--rounds"))
			rounds = atoi(argv[i + 1]);
	}
	if (!have_seed)
		seed0 = t_seed_env(1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	const pid_t parent = getpid();
	printf("processes kill test: seed %" PRIu64 " (ATOMIO_SEED=%" PRIu64 " to repeat)\n", seed0, seed0);

	t_dir();
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	struct mfile base[NS][NF];
	uint64_t base_k[NS] = {0};
	memset(base, 0, sizeof(base));
	for (int t = 0; t < NS; t++)
		for (int i = 0; i < NF; i++) {
			snprintf(paths[t][i], sizeof(paths[t][i]), "%s", t_path(""));
			size_t l = strlen(paths[t][i]);
			snprintf(paths[t][i] + l, sizeof(paths[t][i]) - l, "%d%c", t, 'a' + i);
		}
	snprintf(shared_path, sizeof(shared_path), "%s", t_path("shared"));
	{
		struct atomio_options o = t_opts(LOG_SIZE);
		atomio *st;
		CHECK_OK(atomio_open(t_path("log"), &o, &st));
		struct atomio_caps caps;
		CHECK_OK(atomio_caps(st, -1, &caps));
		max_bytes = (caps.max_group_bytes - 64 * W_MAXOPS) / 4;
		CHECK_OK(atomio_close(st));
	}
	struct rng r = {seed0};
	double t0 = now(), worst_stall = 0;
	uint64_t kills = 0, lone_kills = 0, shared_rounds = 0, churn_rounds = 0, groups = 0, recovered = 0,
		 adopted_in_flight = 0;
	struct mfile cand[NF] = {{0}};
	for (int round = 0; round < rounds; round++) {
		for (int t = 0; t < NS; t++) {
			atomic_store(&sh->started[t], start[t]);
			atomic_store(&sh->acked[t], start[t]);
			atomic_store(&sh->ready[t], 0);
		}
		uint64_t fk = rng_below(&r, 8);
		uint32_t flags = fk == 0 ? ATOMIO_NO_BG_CHECKPOINT : fk == 1 ? ATOMIO_NO_COMPRESS : 0;
		/* slots 0 and 1 in one process (threads) now and then */
		bool pair = rng_below(&r, 4) == 0;
		shared_rounds += pair;
		pid_t pid[NS];
		int np = 0;
		int owner[NS];
		for (int t = 0; t < NS; t++) {
			if (pair && t == 1) {
				owner[t] = owner[0];
				continue;
			}
			pid_t p = fork();
			CHECK(p >= 0);
			if (p == 0) {
				die_with(parent);
				proc_main(t, pair && t == 0 ? 2 : t + 1, flags);
			}
			owner[t] = np;
			pid[np++] = p;
		}
		pid_t churn = -1;
		if (rng_below(&r, 3) == 0) {
			churn_rounds++;
			churn = fork();
			CHECK(churn >= 0);
			if (churn == 0) {
				die_with(parent);
				churn_main();
			}
		}
		for (int t = 0; t < NS; t++)
			while (!atomic_load(&sh->ready[t])) {
				for (int k = 0; k < np; k++)
					if (!alive(pid[k])) {
						fprintf(stderr, "round %d: a process died before its store was open\n", round);
						return 1;
					}
				usleep(200);
			}
		usleep((useconds_t)rng_below(&r, 20000));
		/* one process dies; the others must go on */
		int victim = (int)rng_below(&r, (uint64_t)np);
		CHECK_OK(kill(pid[victim], SIGKILL));
		int ws;
		CHECK(waitpid(pid[victim], &ws, 0) == pid[victim]);
		lone_kills++;
		kills++;
		uint64_t before[NS];
		for (int t = 0; t < NS; t++)
			before[t] = atomic_load(&sh->acked[t]);
		double k0 = now();
		for (int t = 0; t < NS; t++) {
			if (owner[t] == victim)
				continue;
			/* two more groups of every survivor: it went on */
			while (atomic_load(&sh->acked[t]) < before[t] + 2) {
				if (!alive(pid[owner[t]])) {
					fprintf(stderr, "round %d (seed %" PRIu64 "): slot %d's process died after "
							"another was killed\n", round, seed0, t);
					return 1;
				}
				if (now() - k0 > 30) {
					fprintf(stderr, "round %d (seed %" PRIu64 "): slot %d made no progress for 30 s "
							"after another process was killed\n", round, seed0, t);
					return 1;
				}
				usleep(100);
			}
		}
		double stall = now() - k0;
		if (stall > worst_stall)
			worst_stall = stall;
		usleep((useconds_t)rng_below(&r, 10000));
		for (int k = 0; k < np; k++)
			if (k != victim) {
				CHECK_OK(kill(pid[k], SIGKILL));
				CHECK(waitpid(pid[k], &ws, 0) == pid[k]);
				kills++;
			}
		if (churn > 0) {
			CHECK_OK(kill(churn, SIGKILL));
			CHECK(waitpid(churn, &ws, 0) == churn);
		}

		/* Alone: recovery, then the oracle. */
		if (w_recover(t_path("log"), round, seed0, &recovered))
			return 1;
		int64_t k[NS];
		for (int t = 0; t < NS; t++) {
			uint64_t lo = atomic_load(&sh->acked[t]), hi = atomic_load(&sh->started[t]);
			k[t] = -1;
			for (uint64_t kk = hi + 1; kk-- > lo;) {
				model_upto(t, lo, base[t], &base_k[t], cand);
				for (uint64_t g = lo; g < kk; g++) {
					struct wgroup wg;
					w_group(tseed(t), (int)g, NF, max_bytes, &wg);
					w_model(&wg, cand);
				}
				bool ok = true;
				for (int i = 0; i < NF && ok; i++)
					ok = m_compare(&cand[i], paths[t][i], 1) == 0;
				if (ok) {
					k[t] = (int64_t)kk;
					break;
				}
			}
			if (k[t] < 0) {
				fprintf(stderr, "round %d (seed %" PRIu64 "): slot %d holds no state between groups "
						"0..%" PRIu64 " and 0..%" PRIu64 "; against the acknowledged one:\n",
					round, seed0, t, lo, hi);
				model_upto(t, lo, base[t], &base_k[t], cand);
				for (int i = 0; i < NF; i++)
					m_compare(&cand[i], paths[t][i], 0);
				return 1;
			}
			if (owner[t] == victim && (uint64_t)k[t] == hi && hi > lo)
				adopted_in_flight++;
		}
		/* the shared stamp: of a group that is in its slot's files */
		int fd = open(shared_path, O_RDONLY);
		struct stamp sp;
		if (fd >= 0 && pread(fd, &sp, sizeof(sp), STAMP_OFF) == (ssize_t)sizeof(sp) && sp.magic) {
			if (sp.magic != STAMP_MAGIC || sp.slot >= NS || sp.check != stamp_check(&sp) ||
			    (int64_t)sp.group >= k[sp.slot]) {
				fprintf(stderr, "round %d (seed %" PRIu64 "): the shared stamp names slot %u group %"
						PRIu64 ", which is not in that slot's files (groups 0..%" PRId64 "): "
						"half a group\n", round, seed0, sp.slot, sp.group,
					sp.slot < NS ? k[sp.slot] : -1);
				return 1;
			}
		}
		if (fd >= 0)
			close(fd);
		for (int t = 0; t < NS; t++) {
			groups += (uint64_t)k[t] - start[t];
			start[t] = (uint64_t)k[t];
		}
	}
	for (int t = 0; t < NS; t++)
		for (int i = 0; i < NF; i++)
			free(base[t][i].b);
	for (int i = 0; i < NF; i++)
		free(cand[i].b);
	printf("processes kill test: seed %" PRIu64 ", %d rounds, %" PRIu64 " kills (%" PRIu64
	       " of one process while the others went on; survivors' longest wait for two more groups "
	       "%.2f s), %" PRIu64 " rounds with two slots in one process, %" PRIu64
	       " with a process joining and leaving (%d times), %" PRIu64
	       " groups of a killed process committed after all, %" PRIu64 " groups kept, %" PRIu64
	       " replayed by recovery, %.1f s: passed\n",
	       seed0, rounds, kills, lone_kills, worst_stall, shared_rounds, churn_rounds, atomic_load(&sh->churns),
	       adopted_in_flight, groups, recovered, now() - t0);
	CHECK(groups > 0);
	return 0;
}
