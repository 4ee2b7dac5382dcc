/*
 * verify_selftest.c: `atomio verify selftest` -- proof that the checker
 * catches what it claims, and does not cry wolf.
 *
 *   1. A writer of atomio groups is killed with SIGKILL mid-run: the check
 *      must find nothing (recovery makes every group whole).
 *   2. A "lying device": a child writer installs a backend in atomio's ops
 *      table (sys.h) that acknowledges log writes without writing them and
 *      drops or tears home writes, then dies: the check must report torn
 *      blocks, lost acknowledged writes and half-applied groups.
 *   3. Damage done by hand to a clean run's data file: one torn block, one
 *      reverted block, the in-flight group applied whole or in part, a
 *      misdirected block, a zeroed block, a torn state-file tail.  Each must
 *      give exactly the expected counts.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "sys.h" /* the ops table: the lying backend */
#include "verify.h"

/* --- the lying backend (child process only) ---------------------------------- */

static int lie_fd = -1;
static unsigned lie_n;
static struct atomio_sysops lying;

static ssize_t lie_pwritev(int fd, const struct iovec *iov, int cnt, off_t off, int rwf)
{
	size_t total = 0;
	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	/* A durable write (log record, superblock): "done", and nothing written,
	 * as a device with a lying write cache does at a power cut. */
	if (rwf & RWF_DSYNC)
		return (ssize_t)total;
	if (fd == lie_fd) {
		switch (lie_n++ % 3) {
		case 0: /* written */
			break;
		case 1: /* lost */
			return (ssize_t)total;
		default: { /* torn: only the first half reaches the file */
			struct iovec h = {iov[0].iov_base, iov[0].iov_len / 2 / 512 * 512};
			ssize_t n = atomio_sys_linux.pwritev(fd, &h, 1, off, rwf);
			return n < 0 ? n : (ssize_t)total;
		}
		}
	}
	return atomio_sys_linux.pwritev(fd, iov, cnt, off, rwf);
}

struct lie_plan {
	uint64_t start, die;
};

static void lie_hook(uint64_t g, atomio *st, int data_fd, void *arg)
{
	const struct lie_plan *p = arg;
	(void)st;
	if (g == p->start) {
		lying = atomio_sys_linux;
		lying.name = "lying";
		lying.pwritev = lie_pwritev;
		lie_fd = data_fd;
		atomio_sys_set(&lying);
	}
	if (g == p->die)
		raise(SIGKILL); /* the power cut: nothing more reaches the files */
}

/* --- helpers --------------------------------------------------------------------- */

static int rm_cb(const char *p, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(p);
}

static unsigned passed, failed;
static bool quiet;

static void report(bool ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(bool ok, const char *name, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	printf("%-5s %s: %s\n", ok ? "ok" : "FAIL", name, msg);
	fflush(stdout);
	if (ok)
		passed++;
	else
		failed++;
}

static off_t file_size(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0 ? sb.st_size : -1;
}

static void quiet_check(const struct vopts *o, struct vresult *r, int *rc)
{
	/* The checker's own warnings go to stderr; the verdicts are ours. */
	*rc = v_check(o, r);
}

static const char *counts(const struct vresult *r, char *b, size_t n)
{
	snprintf(b, n, "%llu torn, %llu lost, %llu corrupt, %llu half-applied",
		 (unsigned long long)r->torn, (unsigned long long)r->lost, (unsigned long long)r->corrupt,
		 (unsigned long long)r->half);
	return b;
}

/* --- scenarios ------------------------------------------------------------------------ */

static void killed_writer(const char *base)
{
	const char *name = "writer of atomio groups killed with SIGKILL";
	char dir[PATH_MAX], state[PATH_MAX + 16];
	snprintf(dir, sizeof(dir), "%.4000s/kill", base);
	snprintf(state, sizeof(state), "%s.state", dir);
	mkdir(dir, 0700);
	/* A small log: checkpoints and wraps happen during the run. */
	struct vopts o = {.dir = dir, .state = state, .mode = VM_ATOMIO, .bsize = 4096, .ranges = 4,
			  .nblocks = 1024, .direct = true, .log_size = 1 << 20, .seed = 7, .quiet = true};
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		_exit(v_write(&o));
	if (pid < 0) {
		report(false, name, "fork: %s", strerror(errno));
		return;
	}
	off_t want = V_STATE_HDR + 300 * V_STATE_REC;
	double t0 = now_sec();
	int status = 0;
	while (file_size(state) < want && now_sec() - t0 < 20 && waitpid(pid, &status, WNOHANG) == 0) {
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	if (!WIFSIGNALED(status)) {
		report(false, name, "the writer ended by itself (exit %d) before it was killed",
		       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		return;
	}
	struct vresult r;
	int rc;
	quiet_check(&o, &r, &rc);
	char b[160];
	/* (300 acknowledged groups are waited for, at most 20 s: a slow
	 * machine may give fewer; the point is a kill mid-run) */
	report(rc == EX_OK && r.acked > 0,
	       name, "%llu groups acknowledged, recovery replayed %llu: %s (expected none)",
	       (unsigned long long)r.acked, (unsigned long long)r.recovered, counts(&r, b, sizeof(b)));
}

static void lying_device(const char *base)
{
	const char *name = "lying device under atomio (log writes dropped, home writes torn/lost)";
	char dir[PATH_MAX], state[PATH_MAX + 16];
	snprintf(dir, sizeof(dir), "%.4000s/lie", base);
	snprintf(state, sizeof(state), "%s.state", dir);
	mkdir(dir, 0700);
	struct lie_plan plan = {.start = 30, .die = 40};
	struct vopts o = {.dir = dir, .state = state, .mode = VM_ATOMIO, .bsize = 4096, .ranges = 4,
			  .nblocks = 1024, .direct = false, .log_size = 64 << 20, .seed = 11,
			  .quiet = true, .after_ack = lie_hook, .hook_arg = &plan,
			  /* the backend installed mid-run must see every write:
			   * no io_uring ring, no store thread */
			  .store_flags = ATOMIO_ENGINE_PLAIN | ATOMIO_NO_BG_CHECKPOINT};
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		_exit(v_write(&o));
	if (pid < 0) {
		report(false, name, "fork: %s", strerror(errno));
		return;
	}
	int status = 0;
	waitpid(pid, &status, 0);
	if (!WIFSIGNALED(status)) {
		report(false, name, "the writer did not reach its planned death (exit %d)",
		       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		return;
	}
	struct vresult r;
	int rc;
	quiet_check(&o, &r, &rc);
	char b[160];
	report(rc == EX_FOUND && r.torn > 0 && r.lost > 0 && r.half > 0 && r.acked == plan.die, name,
	       "%llu acknowledged, caught: %s (expected torn, lost and half-applied > 0)",
	       (unsigned long long)r.acked, counts(&r, b, sizeof(b)));
}

struct expect {
	const char *name;
	int rc;
	uint64_t torn, lost, corrupt, half, inflight_new;
};

static void check_expect(const struct vopts *o, const struct expect *e, uint64_t acked)
{
	struct vresult r;
	int rc;
	quiet_check(o, &r, &rc);
	char b[160];
	bool ok = rc == e->rc && r.torn == e->torn && r.lost == e->lost && r.corrupt == e->corrupt &&
		  r.half == e->half && r.acked == acked &&
		  (e->inflight_new == UINT64_MAX || r.inflight_new == e->inflight_new);
	report(ok, e->name, "%s%s (expected %llu torn, %llu lost, %llu corrupt, %llu half-applied)",
	       rc == EX_OK ? "no violation: " : rc == EX_FOUND ? "caught: " : "check failed: ",
	       counts(&r, b, sizeof(b)), (unsigned long long)e->torn, (unsigned long long)e->lost,
	       (unsigned long long)e->corrupt, (unsigned long long)e->half);
}

/* The hand-made damage: a clean --raw run of G groups, its data file as
 * written (pristine), and the blocks the scenarios damage. */
struct edit_run {
	struct vopts o;
	char dir[PATH_MAX], state[PATH_MAX + 16], data[PATH_MAX + 64];
	uint64_t G;
	const struct vstate_hdr *h;
	struct vresult r0;
	size_t B, size;
	char *pristine, *blk, *blk2;
	int fd;                   /* the data file, read-write */
	uint64_t gN[V_MAX_RANGES]; /* the blocks of group G + 1 (in flight) */
	uint64_t X, prev;         /* a block of group G, and the last group before G that wrote it */
};

static void restore(const struct edit_run *e) { (void)!pwrite(e->fd, e->pristine, e->size, 0); }

static void put(const struct edit_run *e, uint64_t idx, const char *buf)
{
	(void)!pwrite(e->fd, buf, e->B, (off_t)(idx * e->B));
}

/* The clean run, and what the scenarios need of it.  false: reported. */
static bool edit_setup(struct edit_run *e, const char *base)
{
	snprintf(e->dir, sizeof(e->dir), "%.4000s/edit", base);
	snprintf(e->state, sizeof(e->state), "%s.state", e->dir);
	snprintf(e->data, sizeof(e->data), "%s/%s", e->dir, V_DATA_NAME);
	mkdir(e->dir, 0700);
	e->G = 100;
	e->o = (struct vopts){.dir = e->dir, .state = e->state, .mode = VM_RAW, .bsize = 4096, .ranges = 4,
			      .nblocks = 256, .groups = e->G, .direct = false, .log_size = 1 << 20,
			      .seed = 3, .quiet = true};
	e->fd = -1;
	if (v_write(&e->o) != EX_OK) {
		report(false, "clean --raw run for the edits", "the write run failed");
		return false;
	}
	int rc;
	quiet_check(&e->o, &e->r0, &rc);
	const struct vstate_hdr *h = e->h = &e->r0.hdr;
	e->B = h->bsize;
	e->size = h->nblocks * e->B;
	e->pristine = malloc(e->size);
	e->blk = malloc(e->B);
	e->blk2 = malloc(e->B);
	e->fd = open(e->data, O_RDWR | O_CLOEXEC);
	if (!e->pristine || !e->blk || !e->blk2 || e->fd < 0 ||
	    pread(e->fd, e->pristine, e->size, 0) != (ssize_t)e->size) {
		report(false, "edits", "cannot read %s", e->data);
		return false;
	}
	uint64_t gA[V_MAX_RANGES], tmp[V_MAX_RANGES];
	v_group_blocks(h, e->G, gA);
	v_group_blocks(h, e->G + 1, e->gN);
	e->X = gA[0];
	e->prev = 0;
	for (uint64_t g = e->G - 1; g >= 1 && !e->prev; g--) {
		v_group_blocks(h, g, tmp);
		for (unsigned i = 0; i < h->ranges; i++)
			if (tmp[i] == e->X)
				e->prev = g;
	}
	return true;
}

/* Block X of the last acknowledged group: torn, reverted (lost). */
static void edit_torn_lost(struct edit_run *e)
{
	const uint32_t B = (uint32_t)e->B;
	restore(e);
	v_stamp(e->blk, B, e->h->run_id, e->X, e->G);
	v_stamp(e->blk2, B, e->h->run_id, e->X, e->prev);
	memcpy(e->blk + B / 2, e->blk2 + B / 2, B / 2);
	put(e, e->X, e->blk);
	struct expect x = {"torn block (first half new, second half old)", EX_FOUND, 1, 0, 0, 0, UINT64_MAX};
	check_expect(&e->o, &x, e->G);

	restore(e);
	v_stamp(e->blk, B, e->h->run_id, e->X, e->prev);
	put(e, e->X, e->blk);
	x = (struct expect){"lost acknowledged write (block reverted)", EX_FOUND, 0, 1, 0, 1, UINT64_MAX};
	check_expect(&e->o, &x, e->G);
}

/* The group in flight (G + 1) applied whole, then in part. */
static void edit_inflight(struct edit_run *e)
{
	const uint32_t B = (uint32_t)e->B;
	restore(e);
	for (unsigned i = 0; i < e->h->ranges; i++) {
		v_stamp(e->blk, B, e->h->run_id, e->gN[i], e->G + 1);
		put(e, e->gN[i], e->blk);
	}
	struct expect x = {"in-flight group applied whole", EX_OK, 0, 0, 0, 0, e->h->ranges};
	check_expect(&e->o, &x, e->G);

	restore(e);
	v_stamp(e->blk, B, e->h->run_id, e->gN[0], e->G + 1);
	put(e, e->gN[0], e->blk);
	x = (struct expect){"in-flight group half-applied", EX_FOUND, 0, 0, 0, 1, 1};
	check_expect(&e->o, &x, e->G);
}

/* Block X holding another block's data, then zeros. */
static void edit_corrupt(struct edit_run *e)
{
	restore(e);
	uint64_t Y = (e->X + 1) % e->h->nblocks;
	put(e, e->X, e->pristine + Y * e->B);
	struct expect x = {"misdirected write (another block's data)", EX_FOUND, 0, 0, 1, 0, UINT64_MAX};
	check_expect(&e->o, &x, e->G);

	restore(e);
	memset(e->blk, 0, e->B);
	put(e, e->X, e->blk);
	x = (struct expect){"zeroed block", EX_FOUND, 0, 0, 1, 0, UINT64_MAX};
	check_expect(&e->o, &x, e->G);
}

/* Half a record appended to the state file: ignored, as a torn tail. */
static void edit_state_tail(struct edit_run *e)
{
	restore(e);
	int sfd = open(e->state, O_WRONLY | O_APPEND | O_CLOEXEC);
	off_t ssz = file_size(e->state);
	if (sfd >= 0) {
		(void)!write(sfd, "\x65\x00\x00\x00\x00\x00\x00\x00\x42", 9); /* half of record 101 */
		close(sfd);
	}
	struct expect x = {"torn last record of the state file", EX_OK, 0, 0, 0, 0, UINT64_MAX};
	check_expect(&e->o, &x, e->G);
	if (ssz >= 0)
		(void)!truncate(e->state, ssz);
}

static void edits(const char *base)
{
	static struct edit_run run;
	struct edit_run *e = &run;
	if (edit_setup(e, base)) {
		struct expect x = {"no damage", EX_OK, 0, 0, 0, 0, UINT64_MAX};
		restore(e);
		check_expect(&e->o, &x, e->G);
		edit_torn_lost(e);
		edit_inflight(e);
		edit_corrupt(e);
		edit_state_tail(e);
	}
	if (e->fd >= 0)
		close(e->fd);
	free(e->pristine);
	free(e->blk);
	free(e->blk2);
}

int v_selftest(int argc, char **argv)
{
	static const struct option lo[] = {
		{"dir", required_argument, 0, 'd'}, {"keep", no_argument, 0, 'k'},
		{"quiet", no_argument, 0, 'q'},     {"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *where = getenv("ATOMIO_TEST_DIR") ? getenv("ATOMIO_TEST_DIR") : "/var/tmp";
	bool keep = false;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":qh", lo, NULL)) != -1) {
		switch (c) {
		case 'd': where = optarg; break;
		case 'k': keep = true; break;
		case 'q': quiet = true; break;
		case 'h':
			printf("usage: atomio verify selftest [--dir DIR] [--keep]\n\n"
			       "Prove the checker: a writer killed mid-run must show no violation; a lying\n"
			       "device (atomio's ops table) and hand-made damage must be caught exactly.\n"
			       "Runs in a new directory under DIR (default $ATOMIO_TEST_DIR or /var/tmp).\n"
			       "Exit status: 0 every scenario as expected, 1 one failed, 2 usage, 3 error.\n");
			return EX_OK;
		default: cli_bad_option(argv, c);
		}
	}
	if (optind != argc)
		cli_usage("selftest takes no arguments");
	char base[PATH_MAX];
	snprintf(base, sizeof(base), "%.4000s/atomio-selftest-XXXXXX", where);
	if (!mkdtemp(base))
		cli_die(EX_ERROR, "creating a directory in %s: %s", where, strerror(errno));
	if (!quiet)
		printf("atomio verify selftest in %s\n", base);
	killed_writer(base);
	lying_device(base);
	edits(base);
	if (!keep)
		nftw(base, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	printf("selftest: %u of %u scenarios as expected%s\n", passed, passed + failed,
	       failed ? " -- the checker cannot be trusted here" : "");
	return failed ? EX_FOUND : EX_OK;
}
