/* The preload library in the crash simulator.  A plain POSIX program
 * (test/preload/prog.c) writes its workload to a protected file under
 * build/libatomio_preload.so with ATOMIO_PRELOAD_TRACE set: the library
 * records every mutating system call its store makes, with the data, and
 * markers of what the program was told (a write returned, a sync returned).
 * The trace is then replayed into simfs (test/support/simfs.h), and at every
 * one of its crash points, crash images are built (pending writes dropped,
 * kept or torn at 512-byte sectors), recovered with atomio_open, and the
 * program's file checked with the workload's oracle (test/preload/rec.h):
 * every write whose sync had returned is there, no slot is torn, none is
 * newer than the writes the program had issued.  The log is small (128 KiB)
 * so the run wraps it and checkpoints.
 *
 * Then the same in group mode (ATOMIO_GROUP=1), where the file after
 * recovery must be exactly as one group boundary (a sync) left it.
 *
 * The run is real (the store's worker thread decides how writes batch), so
 * two runs' traces may differ; the workload, the images (seeded per crash
 * point) and the oracle do not.
 *
 *   t_preload_sim [--seed S] [--writes N] [--images K] [--mode write|group]
 *   env PRELOAD_SIM_SEED, PRELOAD_SIM_WRITES
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "preload/rec.h"
#include "support/simfs.h"
#include "support/trace_replay.h"
#include "sys.h"
#include "t.h"

static char dir[PATH_MAX], log_path[PATH_MAX + 16], data_path[PATH_MAX + 16];
static uint64_t seed = 1;
static int nwrites = 200, nimages = 6;
static int returned, synced; /* markers replayed so far */
static bool group;
static uint64_t points, images, recovered;

static void run_program(const char *trace)
{
	char so[PATH_MAX], prog[PATH_MAX];
	if (!realpath("build/libatomio_preload.so", so) || !realpath("build/preload-test/prog", prog)) {
		t_skip("build/libatomio_preload.so or build/preload-test/prog is not built");
	}
	char e1[PATH_MAX * 2], e2[64], e3[PATH_MAX * 2], e4[PATH_MAX * 2], e5[64], sd[32], nw[32];
	snprintf(e1, sizeof(e1), "ATOMIO_LOG=%s", log_path);
	snprintf(e2, sizeof(e2), "ATOMIO_FILES=*.p");
	snprintf(e3, sizeof(e3), "ATOMIO_PRELOAD_TRACE=%s", trace);
	snprintf(e4, sizeof(e4), "LD_PRELOAD=%s", so);
	snprintf(e5, sizeof(e5), "ATOMIO_LOG_SIZE=128K");
	snprintf(sd, sizeof(sd), "%llu", (unsigned long long)seed);
	snprintf(nw, sizeof(nw), "%d", nwrites);
	char *env[] = {e1, e2, e3, e4, e5, group ? "ATOMIO_GROUP=1" : NULL, NULL};
	char *argv[] = {prog, "write", data_path, sd, nw, NULL};
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	CHECK_OK(posix_spawn(&pid, prog, &fa, NULL, argv, env));
	posix_spawn_file_actions_destroy(&fa);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Recover an image and check the program's file. */
static int check_image(struct simfs *img, const struct simfs_pick *pick, uint64_t idx, void *arg)
{
	const struct simfs_opinfo *op = arg;
	char err[512] = "", why[1024] = "";
	/* The catalog holds the run's inode numbers, the image simfs's own:
	 * identity is checked by other tests, here the paths are trusted. */
	struct atomio_options o = {.flags = ATOMIO_NO_BG_CHECKPOINT | ATOMIO_FORCE_PATHS, .errbuf = err, .errbuf_size = sizeof(err)};
	atomio *st = NULL;
	int r = atomio_open(log_path, &o, &st);
	if (r == -ENOENT && !simfs_exists(img, log_path)) {
		r = 0; /* before the log was made: the file must be as never written */
	} else if (r < 0) {
		snprintf(why, sizeof(why), "recovery failed: %s: %s", atomio_strerror(r), err);
	} else {
		struct atomio_stats s;
		atomio_stats(st, &s);
		recovered += s.groups_recovered;
		r = atomio_close(st);
		if (r < 0)
			snprintf(why, sizeof(why), "close after recovery: %s", atomio_strerror(r));
	}
	size_t len = 0;
	uint8_t *data = r < 0 ? NULL : simfs_get(img, data_path, &len);
	int issued = returned + 1 < nwrites ? returned + 1 : nwrites;
	if (r == 0)
		r = group ? rec_check_group(data, data ? len : 0, seed, nwrites, issued, synced, why)
			  : rec_check(data, data ? len : 0, seed, issued, synced, why);
	free(data);
	images++;
	if (r < 0) {
		char *p = simfs_pick_format(pick);
		printf("PRELOAD-SIM FAILED at crash point %llu (op %d on %s, image %llu, pick %s): %s\n"
		       "  (%d writes returned, %d synced; reproduce: --seed %llu --writes %d --mode %s)\n",
		       (unsigned long long)op->index, op->kind, op->path ? op->path : "-",
		       (unsigned long long)idx, p ? p : "?", why, returned, synced,
		       (unsigned long long)seed, nwrites, group ? "group" : "write");
		free(p);
		return 1;
	}
	return 0;
}

static void at_point(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
{
	points++;
	struct simfs_enum e = {.unit = 512, .exhaustive_cap = (uint64_t)nimages, .samples = (uint64_t)nimages,
			       .seed = seed * 1000003 + op->index};
	if (simfs_foreach_image(fs, &e, check_image, (void *)op, NULL))
		exit(1);
}

/* What the program was told, in its place in the trace. */
static void mark(const struct tr_hdr *h, void *arg)
{
	(void)arg;
	if (h->kind == TR_PWRITE)
		returned++;
	else if (h->kind == TR_PSYNC)
		synced = returned;
	else
		CHECK(!"unknown trace record");
}

static void replay(const uint8_t *t, size_t len)
{
	struct simfs *fs = simfs_new(&(struct simfs_config){.seed = seed, .proc_fd = true});
	CHECK(fs);
	tr_mkdirs(fs, dir);
	simfs_install(fs);
	simfs_set_hook(fs, at_point, NULL);
	uint64_t ops = tr_replay(t, len, dir, mark, NULL);
	simfs_set_hook(fs, NULL, NULL);
	/* The end: the program synced everything and exited (the store closed). */
	CHECK_EQ(returned, nwrites);
	CHECK_EQ(synced, nwrites);
	struct simfs *img = simfs_crash(fs, NULL);
	struct simfs *prev = simfs_enter(img);
	struct simfs_opinfo end = {.index = points};
	CHECK_OK(check_image(img, &(struct simfs_pick){.unit = 512}, 0, &end));
	simfs_enter(prev);
	simfs_free(img);
	simfs_uninstall();
	simfs_free(fs);
	printf("%llu trace records, %llu crash points, %llu images recovered and checked, %llu groups replayed\n",
	       (unsigned long long)ops, (unsigned long long)points, (unsigned long long)images,
	       (unsigned long long)recovered);
}

static void one_run(void)
{
	returned = synced = 0;
	points = images = recovered = 0;
	printf("%s mode: seed %llu, %d writes, up to %d images per crash point\n",
	       group ? "group" : "write", (unsigned long long)seed, nwrites, nimages);
	char tmpl[] = "/var/tmp/atomio-preload-sim-XXXXXX";
	CHECK(mkdtemp(tmpl));
	CHECK(realpath(tmpl, dir));
	snprintf(log_path, sizeof(log_path), "%s/log", dir);
	snprintf(data_path, sizeof(data_path), "%s/data.p", dir);
	char trace[PATH_MAX + 16];
	snprintf(trace, sizeof(trace), "%s/trace", dir);
	run_program(trace);
	size_t len;
	uint8_t *t = tr_slurp(trace, &len);
	unlink(trace);
	unlink(log_path);
	unlink(data_path);
	rmdir(dir);
	replay(t, len);
	free(t);
}

int main(int argc, char **argv)
{
	const char *v, *mode = NULL;
	if ((v = getenv("PRELOAD_SIM_SEED")))
		seed = strtoull(v, NULL, 0);
	if ((v = getenv("PRELOAD_SIM_WRITES")))
		nwrites = atoi(v);
	nwrites = T_SCALE(nwrites);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--seed"))
			seed = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--writes"))
			nwrites = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--images"))
			nimages = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--mode"))
			mode = argv[i + 1];
	}
	if (!mode || !strcmp(mode, "write")) {
		group = false;
		one_run();
	}
	if (!mode || !strcmp(mode, "group")) {
		group = true;
		one_run();
	}
	printf("ok\n");
	return 0;
}
