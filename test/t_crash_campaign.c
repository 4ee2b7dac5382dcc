/* The multi-process fault campaign (issue 33): simulated processes sharing
 * one store on the crash simulator, one of them killed (SIGKILL: its
 * descriptors and lock bytes go, its thread stops for good) at every step of
 * every role it plays, each kill followed by power cuts -- the one at the
 * step itself (its write issued, pending) and those at every later crash
 * point of the survivors, which adopt what it held -- over many seeds.
 * Every crash image must recover to a prefix of the commit order that keeps
 * every acknowledged group whole (crashsim.h, the oracle).
 *
 * A KILL POINT is a role and a step count (crashsim.h, KILL POINTS):
 * process 1 of 3 dies at the step'th step it reaches in that role: before,
 * at (its crash point) or after one of its writes or syncs, or running on
 * from it to its next pthread_mutex_lock (this program wraps it: a death
 * between two system calls).  Each point sweeps its steps from
 * 0 until a round in which process 1 never reached the step.  Which
 * instruction a step is depends on how the processes interleave (they are
 * threads), so a seed gives the workload, not the schedule.
 *
 *   t_crash_campaign                   the slice run by make check: the points
 *                                      that pass (points[] below), one seed
 *                                      ($ATOMIO_SEED or 1), steps 0-1 (under
 *                                      the sanitizers step 0)
 *   t_crash_campaign --seeds N --steps M [--seed S] [--points a,b,...|all]
 *                    [--groups G] [--samples N]   the campaign (make crash-procs)
 *   t_crash_campaign --cfg K=V,...     one round
 *
 * Each round runs in a child process (a dead simulated process's thread
 * stays blocked till its test process ends, and a deadlock ends the child,
 * not the campaign).  A failure prints its point, seed, step and a line that
 * runs that round again (t_crash_campaign --cfg ...; with another
 * interleaving).
 * The figures: rounds, kills (at the kill point, and the earlier deaths the
 * adopters take over), power cuts (crash images checked), acknowledged
 * groups, and the acknowledged groups the checked images had to keep.
 * timeout: 900
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/crashsim.h"

/* Linked with -Wl,--wrap=pthread_mutex_lock (mk/procs.mk): the library's and
 * the harness's locks come here first, where a process marked to die at its
 * next lock dies (cs_lock_steps, crashsim.h). */
int __real_pthread_mutex_lock(pthread_mutex_t *m);
int __wrap_pthread_mutex_lock(pthread_mutex_t *m);
int __wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
	cs_mutex_lock_hook();
	return __real_pthread_mutex_lock(m);
}

/* The kill points.  bug: a known defect this point hits (issue 33), not in
 * the default set until it is fixed: run it with --points NAME.  steps,
 * seeds: the slice's (0: 2 steps, 1 seed). */
static const struct point {
	const char *name, *cfg, *bug;
	int steps, seeds;
} points[] = {
	{"leader", "kill_role=32,nodsync=1", NULL, 0, 0},
	{"log", "kill_role=1", NULL, 0, 0},
	{"log-nodsync", "kill_role=1,nodsync=1", NULL, 0, 0},
	{"home", "kill_role=2", NULL, 0, 0},
	{"ckpt-full", "kill_role=4,ckpt_pct=40", NULL, 0, 0},
	/* its superblock writes only: before, at, after, and run on to the
	 * next lock (step 3, seeds 2 and 3: issue 33 item 1, the holder dead
	 * after its superblock was published and before the ring's reset; later
	 * records went where recovery never looks, until the reconcile followed
	 * the superblock on disk) */
	{"ckpt-full-sb", "kill_role=4,kill_sb=1,ckpt_pct=40", NULL, 4, 3},
	{"ckpt-bg", "kill_role=64,ckpt_pct=0", NULL, 0, 0},
	{"adopt", "kill_role=8,kill_pct=100,kill_at=3", NULL, 0, 0},
	{"register", "kill_role=16", NULL, 0, 0},
};
#define NPOINTS (sizeof(points) / sizeof(points[0]))

/* The campaign's base: 3 processes, 2 data files, a small log (wraps and
 * full-log checkpoints), sampled images at every crash point. */
#define BASE "threads=3,procs=1,files=2,ckpt_pct=15"

struct tally {
	uint64_t rounds, fails, unreached;
	struct cs_stats s;
};

/* Is name one of the comma-separated names of list? */
static bool listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
			return true;
	return false;
}

/* One round in a child; its stats come back through a pipe.  1 = failed. */
static int round_run(const char *cfgstr, struct cs_stats *out)
{
	int pfd[2];
	if (pipe(pfd))
		abort();
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		abort();
	if (pid == 0) {
		close(pfd[0]);
		struct cs_cfg c;
		if (cs_cfg_parse(cfgstr, &c))
			_exit(2);
		struct cs_stats s = {0};
		int failed = cs_run(&c, NULL, &s, "build/test/t_crash_campaign");
		fflush(stdout);
		if (write(pfd[1], &s, sizeof(s)) != (ssize_t)sizeof(s))
			_exit(2);
		_exit(failed ? 1 : 0);
	}
	close(pfd[1]);
	struct cs_stats s = {0};
	ssize_t n = read(pfd[0], &s, sizeof(s));
	close(pfd[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0)
		;
	if (n == (ssize_t)sizeof(s))
		cs_stats_add(out, &s);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || n != (ssize_t)sizeof(s)) {
		if (!WIFEXITED(st))
			printf("CRASH-CHECK FAILED: the round's process ended by signal %d\n", WTERMSIG(st));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	cs_lock_steps = true;
	if (argc == 3 && !strcmp(argv[1], "--cfg")) {
		/* one round, as the campaign ran it */
		struct cs_cfg c;
		if (cs_cfg_parse(argv[2], &c))
			return 2;
		struct cs_stats s = {0};
		int failed = cs_run(&c, NULL, &s, argv[0]);
		cs_stats_print("round", &s);
		return failed ? 1 : 0;
	}
	const char *env = getenv("ATOMIO_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : 1;
	/* the slice: a small workload, sampled images */
	int seeds = 1, steps = 2, groups = 6, samples = 2;
	const char *want = NULL;
	bool slice = true;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			fprintf(stderr, "usage: t_crash_campaign [--seed S] [--seeds N] [--steps M] "
					"[--points a,b,...|all] [--groups G] [--samples N]\n");
			return 2;
		}
		if (!strcmp(a, "--seed"))
			seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--seeds"))
			seeds = atoi(v), slice = false;
		else if (!strcmp(a, "--steps"))
			steps = atoi(v), slice = false;
		else if (!strcmp(a, "--points"))
			want = v, slice = false;
		else if (!strcmp(a, "--groups"))
			groups = atoi(v);
		else if (!strcmp(a, "--samples"))
			samples = atoi(v);
		else {
			fprintf(stderr, "t_crash_campaign: unknown option %s\n", a);
			return 2;
		}
		i++;
	}
#ifdef ATOMIO_SAN
	/* (each round costs several times more there) */
	if (slice)
		steps = 1, groups = 4, samples = 1;
#endif
	/* the campaign: a longer workload by default */
	if (!slice && groups == 6 && samples == 2)
		groups = 9, samples = 3;
	printf("crash campaign: seeds %" PRIu64 "..%" PRIu64 ", steps 0..%d of each kill point, %d groups per process, "
	       "%d images per crash point\n",
	       seed, seed + (uint64_t)seeds - 1, steps - 1, groups, samples);
	for (size_t i = 0; i < NPOINTS; i++)
		if (points[i].bug && !want)
			printf("  not in the default set: %s (%s)\n", points[i].name, points[i].bug);
	struct tally all = {0};
	int bad = 0;
	for (size_t i = 0; i < NPOINTS; i++) {
		const struct point *pt = &points[i];
		if (want ? strcmp(want, "all") && !listed(want, pt->name) : pt->bug != NULL)
			continue;
		struct tally t = {0};
		/* the slice: a point where no process died yet (its steps
		 * depend on the interleaving) tries the next seeds */
		int nseeds = seeds;
		int nsteps = slice && pt->steps ? pt->steps : steps;
		if (slice && pt->seeds)
			nseeds = pt->seeds;
#ifdef ATOMIO_SAN
		/* the sanitizers' slice: the first step of the first seed that
		 * kills, whatever the point asks for */
		if (slice)
			nsteps = steps, nseeds = seeds;
#endif
		for (int sd = 0; sd < nseeds; sd++) {
			for (int k = 0; k < nsteps; k++) {
				char cfg[512];
				snprintf(cfg, sizeof(cfg), BASE ",groups=%d,samples=%d,%s,seed=%" PRIu64 ",kill_step=%d",
					 groups, samples, pt->cfg, seed + (uint64_t)sd, k);
				struct cs_stats s = {0};
				int f = round_run(cfg, &s);
				t.rounds++;
				cs_stats_add(&t.s, &s);
				if (f) {
					t.fails++;
					printf("CAMPAIGN FAILED: kill point %s, seed %" PRIu64 ", step %d\n  reproduce: "
					       "build/test/t_crash_campaign --cfg '%s'  (processes interleave anew each "
					       "run)\n",
					       pt->name, seed + (uint64_t)sd, k, cfg);
				}
				if (!f && s.role_steps <= (uint64_t)k) {
					/* process 1 never reached step k: the sweep ends */
					t.unreached++;
					break;
				}
			}
			if (slice && !t.s.role_kills && nseeds < seeds + 4)
				nseeds++;
		}
		printf("%-12s %4" PRIu64 " rounds, %4" PRIu64 " kills at the point (+%" PRIu64
		       " earlier deaths), %7" PRIu64 " power cuts, %5" PRIu64 " groups acknowledged, %8" PRIu64
		       " acknowledged kept by the images; %" PRIu64 " failed\n",
		       pt->name, t.rounds, t.s.role_kills, t.s.kills - t.s.role_kills, t.s.images + t.s.nested_images, t.s.groups,
		       t.s.acked_checks, t.fails);
		fflush(stdout);
		/* a point that never killed tested nothing */
		if (slice && t.s.role_kills == 0) {
			printf("CAMPAIGN FAILED: kill point %s: no process died there (seeds %" PRIu64 "..%" PRIu64
			       ")\n", pt->name, seed, seed + (uint64_t)nseeds - 1);
			bad = 1;
		}
		all.rounds += t.rounds;
		all.fails += t.fails;
		cs_stats_add(&all.s, &t.s);
	}
	printf("crash campaign: %" PRIu64 " rounds, %" PRIu64 " kills at kill points, %" PRIu64
	       " other deaths, %" PRIu64 " power cuts (crash images checked), %" PRIu64
	       " groups acknowledged, %" PRIu64 " acknowledged kept by the images, %" PRIu64
	       " pads; %" PRIu64 " rounds failed\n",
	       all.rounds, all.s.role_kills, all.s.kills - all.s.role_kills, all.s.images + all.s.nested_images,
	       all.s.groups, all.s.acked_checks, all.s.pads, all.fails);
	return all.fails || bad ? 1 : 0;
}
