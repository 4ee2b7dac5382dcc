/* The commit pipeline under SIGKILL: threads commit groups concurrently (two
 * log writes in flight, home stages overlapping the next log write, background
 * checkpoints on a small log), the child is killed at a random moment, the
 * parent recovers.  Each thread owns a region of both files, so its own model
 * is exact: the region must hold the state after exactly the groups it saw
 * acknowledged, or after one more (the one in flight), whole.  Every engine
 * and home mode, on O_DIRECT and buffered files. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "workload.h"

#define NT 4
#define REGION (256u << 10)

struct ack {
	int t, g;
};

static atomio *cst;
static int cids[2];
static int cpipe, cdirect;
static uint64_t cseed;

/* group g of thread t: 1-3 writes, 4 KiB-aligned when the files are O_DIRECT */
static void group_of(uint64_t seed, int t, int g, int direct, struct wgroup *wg)
{
	struct rng r = {seed * 1000003ull + (uint64_t)t * 7777 + (uint64_t)g};
	memset(wg, 0, sizeof(*wg));
	wg->nops = 1 + (int)rng_below(&r, 3);
	for (int i = 0; i < wg->nops; i++) {
		struct wop *o = &wg->op[i];
		o->file = (int)rng_below(&r, 2);
		o->tag = (uint32_t)(t * 1000000 + g * W_MAXOPS + i + 1);
		if (direct) {
			o->len = 4096 * (1 + rng_below(&r, 4));
			o->off = (uint64_t)t * REGION + 4096 * rng_below(&r, REGION / 4096 - 4);
		} else {
			o->len = 1 + rng_below(&r, 12000);
			o->off = (uint64_t)t * REGION + rng_below(&r, REGION - 12000);
		}
	}
}

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (int g = 0;; g++) {
		struct wgroup wg;
		group_of(cseed, t, g, cdirect, &wg);
		atomio_tx *tx;
		CHECK_OK(atomio_tx_begin(cst, &tx));
		CHECK_OK(w_build(&wg, tx, cids));
		CHECK_OK(atomio_tx_commit(tx));
		struct ack a = {t, g};
		CHECK(write(cpipe, &a, sizeof(a)) == sizeof(a)); /* atomic: < PIPE_BUF */
	}
	return NULL;
}

static void child(uint32_t flags)
{
	struct atomio_options o = t_opts(512 << 10);
	o.flags |= flags;
	CHECK_OK(atomio_open(t_path("log"), &o, &cst));
	for (int i = 0; i < 2; i++) {
		cids[i] = atomio_file_open(cst, t_path(i ? "b" : "a"), O_CREAT | (cdirect ? O_DIRECT : 0), 0644);
		CHECK(cids[i] >= 0);
	}
	struct ack ready = {-1, -1};
	CHECK(write(cpipe, &ready, sizeof(ready)) == sizeof(ready));
	pthread_t th[NT];
	for (int t = 0; t < NT; t++)
		CHECK_OK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t));
	for (;;)
		pause();
}

/* the region of thread t in both files, from the models */
static int region_matches(struct mfile *m, int t)
{
	for (int i = 0; i < 2; i++) {
		size_t len;
		uint8_t *d = t_slurp(t_path(i ? "b" : "a"), &len);
		uint64_t lo = (uint64_t)t * REGION, hi = lo + REGION;
		for (uint64_t x = lo; x < hi; x++) {
			uint8_t want = x < m[i].size ? m[i].b[x] : 0, have = x < len ? d[x] : 0;
			if (want != have) {
				free(d);
				return 0;
			}
		}
		free(d);
	}
	return 1;
}

int main(int argc, char **argv)
{
	uint64_t seed0 = argc > 1 ? strtoull(argv[1], NULL, 0) : t_seed_env(1);
	int rounds = argc > 2 ? atoi(argv[2]) : T_SCALE(6);
	printf("seed %llu (ATOMIO_SEED=%llu to repeat)\n", (unsigned long long)seed0, (unsigned long long)seed0);
	t_dir();
	static const uint32_t modes[] = {0, ATOMIO_ENGINE_PLAIN, ATOMIO_ENGINE_URING | ATOMIO_DIRECT_HOME};
	for (int round = 0; round < rounds; round++) {
		uint64_t seed = seed0 * 31 + (uint64_t)round;
		uint32_t flags = modes[round % 3];
		cdirect = round % 2 == 0 || (flags & ATOMIO_DIRECT_HOME);
		cseed = seed;
		char cmd[9000];
		snprintf(cmd, sizeof(cmd), "rm -f %s/*", t_dir());
		CHECK_EQ(system(cmd), 0);
		int pfd[2];
		CHECK_OK(pipe(pfd));
		pid_t pid = fork();
		if (pid == 0) {
			close(pfd[0]);
			cpipe = pfd[1];
			child(flags);
		}
		close(pfd[1]);
		struct ack a;
		CHECK(read(pfd[0], &a, sizeof(a)) == sizeof(a) && a.t == -1); /* store open */
		struct timespec ts = {0, (long)(20 + seed % 100) * 1000000L};
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		int acked[NT] = {0};
		while (read(pfd[0], &a, sizeof(a)) == sizeof(a)) {
			CHECK(a.t >= 0 && a.t < NT && a.g == acked[a.t]); /* in order per thread */
			acked[a.t]++;
		}
		close(pfd[0]);
		int ws;
		CHECK(waitpid(pid, &ws, 0) == pid);

		atomio *st;
		struct atomio_options o = {0};
		char err[512];
		o.errbuf = err;
		o.errbuf_size = sizeof(err);
		int r = atomio_open(t_path("log"), &o, &st);
		if (r < 0)
			fprintf(stderr, "recovery: %s\n", err);
		CHECK_OK(r);
		struct atomio_stats s;
		CHECK_OK(atomio_stats(st, &s));
		CHECK_OK(atomio_close(st));
		int total = 0, extra = 0;
		for (int t = 0; t < NT; t++) {
			struct mfile m[2] = {{0}, {0}};
			for (int g = 0; g < acked[t]; g++) {
				struct wgroup wg;
				group_of(seed, t, g, cdirect, &wg);
				w_model(&wg, m);
			}
			total += acked[t];
			int ok = region_matches(m, t);
			if (!ok) {
				struct wgroup wg;
				group_of(seed, t, acked[t], cdirect, &wg);
				w_model(&wg, m);
				ok = region_matches(m, t);
				extra += ok;
			}
			if (!ok) {
				fprintf(stderr, "seed %llu round %d (flags 0x%x, %s): thread %d saw %d groups "
						"acknowledged; its region is neither that state nor one more\n",
					(unsigned long long)seed0, round, flags, cdirect ? "O_DIRECT" : "buffered",
					t, acked[t]);
				return 1;
			}
			free(m[0].b);
			free(m[1].b);
		}
		printf("round %d (flags 0x%x, %s): %d groups acknowledged, %d in flight landed, %llu "
		       "replayed\n",
		       round, flags, cdirect ? "O_DIRECT" : "buffered", total, extra,
		       (unsigned long long)s.groups_recovered);
	}
	return 0;
}
