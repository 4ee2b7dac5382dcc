/* The log as a ring with background checkpoints: many small groups through a
 * small log, checkpointed by the store's thread while commits go on, so that
 * the live records wrap around the record area's end.  A child commits and
 * dies at a random point (maybe in the middle of a background checkpoint);
 * the parent reads the durable superblock to learn which records a
 * checkpoint gave up (their groups' home writes were synced), puts the files
 * back to exactly that state -- losing every later home write -- and reopens:
 * recovery must replay the rest, across the wrap, to the final state. */
#include <sys/wait.h>

#include "format.h"
#include "support/logpatch.h"
#include "workload.h"

#define NF 3
static const char *names[NF] = {"a", "b", "c"};

struct report {
	int committed;
	struct atomio_stats s;
};

/* small groups: up to 3 writes of up to 6 KiB (and a rare size change) */
static void group_of(uint64_t seed, int g, struct wgroup *wg)
{
	struct rng r = {seed * 1000003ull + (uint64_t)g};
	memset(wg, 0, sizeof(*wg));
	wg->nops = 1 + (int)rng_below(&r, 3);
	for (int i = 0; i < wg->nops; i++) {
		struct wop *o = &wg->op[i];
		o->file = (int)rng_below(&r, NF);
		o->tag = (uint32_t)(g * W_MAXOPS + i + 1);
		if (rng_below(&r, 40) == 0) {
			o->truncate = 1;
			o->off = 20000 + rng_below(&r, 100000);
			continue;
		}
		o->len = 1 + rng_below(&r, 6000);
		o->off = rng_below(&r, 120000);
	}
}

static void child(uint64_t seed, int ngroups, uint32_t flags, int fd)
{
	struct atomio_options o = t_opts(256 << 10);
	o.flags |= flags;
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int ids[NF];
	for (int i = 0; i < NF; i++)
		CHECK((ids[i] = atomio_file_open(st, t_path(names[i]), O_CREAT, 0644)) >= 0);
	struct report rep = {0};
	for (int g = 0; g < ngroups; g++) {
		struct wgroup wg;
		group_of(seed, g, &wg);
		atomio_tx *tx;
		CHECK_OK(atomio_tx_begin(st, &tx));
		CHECK_OK(w_build(&wg, tx, ids));
		CHECK_OK(atomio_tx_commit(tx));
		rep.committed = g + 1;
	}
	CHECK_OK(atomio_stats(st, &rep.s));
	CHECK(write(fd, &rep, sizeof(rep)) == sizeof(rep));
	_exit(0); /* no close, no final checkpoint; the worker dies wherever it is */
}

/* head seq of the current superblock of the log at path (recovery's
 * choice: codec.h, through logpatch.h) */
static uint64_t durable_head_seq(const char *path, uint64_t *head_off)
{
	struct lp l;
	CHECK_OK(lp_load(&l, path));
	const struct sb_disk *sb = lp_sb(&l);
	CHECK(sb);
	*head_off = sb->head_off;
	uint64_t seq = sb->head_seq;
	lp_free(&l);
	return seq;
}

int main(int argc, char **argv)
{
	uint64_t seed0 = argc > 1 ? strtoull(argv[1], NULL, 0) : t_seed_env(1);
	printf("seed %llu (ATOMIO_SEED=%llu to repeat)\n", (unsigned long long)seed0, (unsigned long long)seed0);
	int rounds = argc > 2 ? atoi(argv[2]) : T_SCALE(6);
	t_dir();
	uint64_t wrapped_heads = 0, bg = 0;
	for (int round = 0; round < rounds; round++) {
		uint64_t seed = seed0 * 7919 + (uint64_t)round;
		char cmd[9000];
		snprintf(cmd, sizeof(cmd), "rm -f %s/*", t_dir());
		CHECK_EQ(system(cmd), 0);
		int ngroups = 120 + (int)rng_below(&(struct rng){seed}, 240);
		uint32_t flags = round % 2 ? ATOMIO_ENGINE_PLAIN : 0;
		int pfd[2];
		CHECK_OK(pipe(pfd));
		pid_t p = fork();
		if (p == 0)
			child(seed, ngroups, flags, pfd[1]);
		int ws;
		CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
		struct report rep;
		CHECK(read(pfd[0], &rep, sizeof(rep)) == sizeof(rep));
		close(pfd[0]);
		close(pfd[1]);

		/* Group g has seq g + 1 (a new log starts at seq 1, one record
		 * per group, one thread).  Records below the head seq are dead:
		 * their groups are durable in the files. */
		uint64_t head_off, head_seq = durable_head_seq(t_path("log"), &head_off);
		int durable = (int)head_seq - 1;
		CHECK(durable >= 0 && durable <= rep.committed);
		bg += rep.s.checkpoints;
		wrapped_heads += head_off != 0;

		struct mfile at_cut[NF] = {{0}}, end[NF] = {{0}};
		for (int g = 0; g < rep.committed; g++) {
			struct wgroup wg;
			group_of(seed, g, &wg);
			if (g < durable)
				w_model(&wg, at_cut);
			w_model(&wg, end);
		}
		for (int i = 0; i < NF; i++) {
			CHECK_OK(m_compare(&end[i], t_path(names[i]), 0));
			int fd = open(t_path(names[i]), O_RDWR | O_TRUNC);
			CHECK(fd >= 0);
			if (at_cut[i].size)
				CHECK(pwrite(fd, at_cut[i].b, at_cut[i].size, 0) == (ssize_t)at_cut[i].size);
			close(fd);
		}
		atomio *st;
		struct atomio_options o = {0};
		CHECK_OK(atomio_open(t_path("log"), &o, &st));
		struct atomio_stats s;
		CHECK_OK(atomio_stats(st, &s));
		CHECK_OK(atomio_close(st));
		CHECK_EQ(s.groups_recovered, (uint64_t)(rep.committed - durable));
		for (int i = 0; i < NF; i++)
			if (m_compare(&end[i], t_path(names[i]), 0)) {
				fprintf(stderr, "seed %llu round %d: %d groups, durable %d (head at %llu)\n",
					(unsigned long long)seed0, round, rep.committed, durable,
					(unsigned long long)head_off);
				return 1;
			}
		printf("round %d: %d groups, %llu checkpoints (%llu stop-the-world), head at %llu seq "
		       "%llu, %llu replayed\n",
		       round, rep.committed, (unsigned long long)rep.s.checkpoints,
		       (unsigned long long)rep.s.log_full_waits, (unsigned long long)head_off,
		       (unsigned long long)head_seq, (unsigned long long)s.groups_recovered);
		for (int i = 0; i < NF; i++) {
			free(at_cut[i].b);
			free(end[i].b);
		}
	}
	/* the ring really turned: background checkpoints cut in mid-log */
	CHECK(bg > (uint64_t)rounds);
	CHECK(wrapped_heads > 0);
	return 0;
}
