/* Many groups through a small log: it fills and is checkpointed again and
 * again.  Each round a child runs the workload to a random point and dies;
 * the parent puts the data files back to their state at the last checkpoint
 * (all that was promised durable there), reopens, and recovery must replay
 * exactly the groups committed since. */
#include <sys/wait.h>

#include "workload.h"

#define NF 3
static const char *names[NF] = {"a", "b", "c"};

struct report {
	int committed;  /* groups committed */
	int durable_at; /* groups whose home writes a checkpoint made durable */
	uint64_t checkpoints, full_waits;
};

static void child(uint64_t seed, int ngroups, int fd)
{
	struct atomio_options o = t_opts(65536);
	/* The model below learns what a checkpoint made durable from the
	 * counter changing during a commit: that needs checkpoints inside
	 * commits, not in the background (t_ring covers those). */
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int ids[NF];
	for (int i = 0; i < NF; i++)
		CHECK((ids[i] = atomio_file_open(st, t_path(names[i]), O_CREAT, 0644)) >= 0);
	struct atomio_caps caps;
	CHECK_OK(atomio_caps(st, -1, &caps));
	struct report rep = {0};
	struct atomio_stats s0, s1;
	for (int g = 0; g < ngroups; g++) {
		struct wgroup wg;
		w_group(seed, g, NF, caps.max_group_bytes - 64 * W_MAXOPS, &wg);
		atomio_tx *tx;
		CHECK_OK(atomio_tx_begin(st, &tx));
		CHECK_OK(w_build(&wg, tx, ids));
		if (wg.abort) {
			atomio_tx_abort(tx);
			continue;
		}
		CHECK_OK(atomio_stats(st, &s0));
		CHECK_OK(atomio_tx_commit(tx));
		CHECK_OK(atomio_stats(st, &s1));
		if (s1.checkpoints != s0.checkpoints)
			rep.durable_at = g; /* groups 0..g-1 were synced home */
		rep.committed = g + 1;
		if (g % 7 == 3 && rng_below(&(struct rng){seed + (uint64_t)g}, 5) == 0) {
			CHECK_OK(atomio_checkpoint(st));
			rep.durable_at = g + 1;
		}
	}
	rep.checkpoints = s1.checkpoints;
	rep.full_waits = s1.log_full_waits;
	CHECK(write(fd, &rep, sizeof(rep)) == sizeof(rep));
	_exit(0);
}

int main(int argc, char **argv)
{
	uint64_t seed0 = argc > 1 ? strtoull(argv[1], NULL, 0) : t_seed_env(1);
	printf("seed %llu (ATOMIO_SEED=%llu to repeat)\n", (unsigned long long)seed0, (unsigned long long)seed0);
	int rounds = argc > 2 ? atoi(argv[2]) : 12;
	t_dir();
	uint64_t total_cp = 0;
	for (int round = 0; round < rounds; round++) {
		uint64_t seed = seed0 * 7777 + (uint64_t)round;
		char cmd[9000];
		snprintf(cmd, sizeof(cmd), "rm -f %s/*", t_dir());
		CHECK_EQ(system(cmd), 0);
		int ngroups = 20 + (int)rng_below(&(struct rng){seed}, 120);
		int pfd[2];
		CHECK_OK(pipe(pfd));
		pid_t p = fork();
		if (p == 0)
			child(seed, ngroups, pfd[1]);
		int ws;
		CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
		struct report rep;
		CHECK(read(pfd[0], &rep, sizeof(rep)) == sizeof(rep));
		close(pfd[0]);
		close(pfd[1]);
		total_cp += rep.checkpoints;

		/* the models at the last checkpoint and at the end */
		struct mfile at_cp[NF] = {{0}}, end[NF] = {{0}};
		for (int g = 0; g < rep.committed; g++) {
			struct wgroup wg;
			w_group(seed, g, NF, 65536 - 64 - 32 - 64 * W_MAXOPS, &wg);
			if (g < rep.durable_at)
				w_model(&wg, at_cp);
			w_model(&wg, end);
		}
		for (int i = 0; i < NF; i++) {
			CHECK_OK(m_compare(&end[i], t_path(names[i]), 0));
			/* lose every home write since the checkpoint */
			int fd = open(t_path(names[i]), O_RDWR | O_TRUNC);
			CHECK(fd >= 0);
			if (at_cp[i].size)
				CHECK(pwrite(fd, at_cp[i].b, at_cp[i].size, 0) == (ssize_t)at_cp[i].size);
			close(fd);
		}
		atomio *st;
		char err[512];
		struct atomio_options o = {.errbuf = err, .errbuf_size = sizeof(err)};
		int r = atomio_open(t_path("log"), &o, &st);
		if (r < 0)
			fprintf(stderr, "open: %s\n", err);
		CHECK_OK(r);
		struct atomio_stats s;
		CHECK_OK(atomio_stats(st, &s));
		CHECK_OK(atomio_close(st));
		for (int i = 0; i < NF; i++)
			if (m_compare(&end[i], t_path(names[i]), 0)) {
				fprintf(stderr, "seed %llu round %d: %d groups, durable at %d, recovered %llu\n",
					(unsigned long long)seed0, round, rep.committed, rep.durable_at,
					(unsigned long long)s.groups_recovered);
				return 1;
			}
		for (int i = 0; i < NF; i++) {
			free(at_cp[i].b);
			free(end[i].b);
		}
	}
	printf("%d rounds, %llu checkpoints (log wraps)\n", rounds, (unsigned long long)total_cp);
	CHECK(total_cp > (uint64_t)rounds); /* the log really did wrap */
	return 0;
}
