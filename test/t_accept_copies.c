/* ATOMIO_ACCEPT_COPIES: a data file replaced by a copy of itself (a copy of
 * the file and of its log, taken while groups were still in the log, put
 * back in their place: SQLite's test harness does so, and so does a backup
 * made with cp) is accepted when replaying the log's live groups would leave
 * it exactly as it is, and is then never written; anything else is refused
 * with ATOMIO_EIDENTITY, naming the file and the first byte that differs,
 * and nothing is replayed.  Without the flag a copy is always refused.
 *
 * The groups: G1 8 KiB of 'A' at 0; G2 4 KiB of 'B' at 20000 (zeros fill
 * 8192..20000); G3 truncates to 16384, writes 100 bytes of 'C' at 30000
 * (zeros fill 16384..30000, over what G2 wrote) and 100 bytes of 'D' at 0
 * (over G1); G4 1.5 MiB of random bytes at 65536 (longer than the buffer
 * recovery checks a record in, so compared from the log).  File g is
 * registered too and stays the original file. */
#include <sys/wait.h>

#include "model.h"
#include "sys.h"

#define G4_OFF 65536
#define G4_LEN (3u << 19)
#define F_SIZE (G4_OFF + G4_LEN)

static uint8_t g4[G4_LEN];

/* A record of the calls that write or sync: "fsync PATH", "write PATH". */
static char calls[256][4200];
static int ncalls;
static struct atomio_sysops rec_ops;

static void note(const char *what, int fd)
{
	char link[64], path[4096];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	path[n > 0 ? n : 0] = 0;
	if (ncalls < 256)
		snprintf(calls[ncalls++], sizeof(calls[0]), "%s %s", what, path);
}
static ssize_t r_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	note("write", fd);
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
}
static int r_fsync(int fd)
{
	note("fsync", fd);
	return atomio_sys_linux.fsync(fd);
}
static int r_fdatasync(int fd)
{
	note("fsync", fd);
	return atomio_sys_linux.fdatasync(fd);
}

/* The first call that is `what` on path, or -1. */
static int call_at(const char *what, const char *path)
{
	char want[4200];
	snprintf(want, sizeof(want), "%s %s", what, path);
	for (int i = 0; i < ncalls; i++)
		if (!strcmp(calls[i], want))
			return i;
	return -1;
}

static void put(const char *path, const void *d, size_t n)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, d, n), (ssize_t)n);
	CHECK_OK(close(fd));
}

/* Copy from to a new inode, put in place at to. */
static void copy_to(const char *from, const char *to)
{
	size_t n;
	uint8_t *d = t_slurp(from, &n);
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp", to);
	put(tmp, d, n);
	CHECK_OK(rename(tmp, to));
	free(d);
}

/* A writer that dies with its three groups of f, and one of g, in the log. */
static void crash_with_groups(void)
{
	unlink(t_path("log"));
	unlink(t_path("f"));
	unlink(t_path("g"));
	pid_t p = fork();
	if (p == 0) {
		struct atomio_options o = t_opts(8 << 20);
		o.flags |= ATOMIO_NO_BG_CHECKPOINT; /* the groups must still be in the log */
		atomio *st;
		CHECK_OK(atomio_open(t_path("log"), &o, &st));
		int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
		int g = atomio_file_open(st, t_path("g"), O_CREAT, 0644);
		CHECK(f >= 0 && g >= 0);
		char buf[8192];
		memset(buf, 'A', sizeof(buf));
		CHECK_EQ(atomio_pwrite(st, f, buf, 8192, 0), 8192);
		memset(buf, 'B', sizeof(buf));
		CHECK_EQ(atomio_pwrite(st, f, buf, 4096, 20000), 4096);
		atomio_tx *tx;
		CHECK_OK(atomio_tx_begin(st, &tx));
		CHECK_OK(atomio_tx_truncate(tx, f, 16384));
		memset(buf, 'C', 100);
		CHECK_OK(atomio_tx_write(tx, f, buf, 100, 30000));
		memset(buf, 'D', 100);
		CHECK_OK(atomio_tx_write(tx, f, buf, 100, 0));
		CHECK_EQ(atomio_pwrite(st, g, "g's group", 9, 0), 9);
		CHECK_OK(atomio_tx_commit(tx));
		CHECK_EQ(atomio_pwrite(st, f, g4, G4_LEN, G4_OFF), (ssize_t)G4_LEN);
		_exit(0); /* a crash: nothing checkpointed */
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

/* The expected content of f after the three groups. */
static uint8_t *expected(size_t *n)
{
	*n = F_SIZE;
	uint8_t *d = calloc(1, *n);
	memcpy(d + G4_OFF, g4, G4_LEN);
	memset(d, 'A', 8192);
	memset(d, 'D', 100);
	memset(d + 30000, 'C', 100);
	return d;
}

static int open_flags(unsigned flags, char *err, size_t errlen, atomio **st)
{
	err[0] = 0;
	struct atomio_options o = {.flags = flags, .errbuf = err, .errbuf_size = errlen};
	return atomio_open(t_path("log"), &o, st);
}

/* f replaced by a copy whose byte at `at` (if any) is set to v, and whose
 * size is grown by `extra` bytes: refused, with and without the flag, the
 * message naming f and `bad`; nothing written to f or g. */
static void refused(const char *what, long at, uint8_t v, size_t extra, uint64_t bad)
{
	crash_with_groups();
	size_t n;
	uint8_t *d = t_slurp(t_path("f"), &n);
	d = realloc(d, n + extra);
	memset(d + n, 0, extra);
	n += extra;
	if (at >= 0)
		d[at] = v;
	CHECK_OK(unlink(t_path("f")));
	put(t_path("f"), d, n);
	/* g is the original file, but stale: had anything been replayed, it
	 * would hold its group again. */
	int fd = open(t_path("g"), O_WRONLY);
	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, "stale!!!!", 9, 0), 9);
	CHECK_OK(close(fd));
	char err[1024];
	atomio *st;
	CHECK_EQ(open_flags(0, err, sizeof(err), &st), ATOMIO_EIDENTITY);
	CHECK_EQ(open_flags(ATOMIO_ACCEPT_COPIES, err, sizeof(err), &st), ATOMIO_EIDENTITY);
	printf("%s: %s\n", what, err);
	CHECK(strstr(err, "/f "));
	char want[64];
	snprintf(want, sizeof(want), "from byte %llu on", (unsigned long long)bad);
	CHECK(strstr(err, want));
	size_t m;
	uint8_t *now = t_slurp(t_path("f"), &m);
	CHECK(m == n && !memcmp(now, d, n));
	free(now);
	now = t_slurp(t_path("g"), &m);
	CHECK(m == 9 && !memcmp(now, "stale!!!!", 9));
	free(now);
	free(d);
}

int main(void)
{
	t_dir();
	uint64_t x = 88172645463325252ull; /* xorshift: incompressible */
	for (size_t i = 0; i < G4_LEN; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		g4[i] = (uint8_t)x;
	}
	char err[1024];
	atomio *st;

	/* 1. A whole copy: refused without the flag, accepted with it. */
	crash_with_groups();
	size_t n, m;
	uint8_t *want = expected(&n);
	uint8_t *d = t_slurp(t_path("f"), &m);
	CHECK(m == n && !memcmp(d, want, n)); /* the writer's groups reached the page cache */
	free(d);
	copy_to(t_path("f"), t_path("f"));
	struct stat before, after;
	CHECK_OK(stat(t_path("f"), &before));
	int fd = open(t_path("g"), O_WRONLY);
	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, "stale!!!!", 9, 0), 9);
	CHECK_OK(close(fd));
	CHECK_EQ(open_flags(0, err, sizeof(err), &st), ATOMIO_EIDENTITY);
	printf("without the flag: %s\n", err);
	/* recorded: the copy is never written, but it is synced, then its
	 * directory, before the log's superblock gives the groups up (cp did
	 * not sync the copy, nor its rename the directory) */
	rec_ops = atomio_sys_linux;
	rec_ops.name = "record";
	rec_ops.pwritev = r_pwritev;
	rec_ops.fsync = r_fsync;
	rec_ops.fdatasync = r_fdatasync;
	rec_ops.uring_init = NULL;
	rec_ops.uring_enter = NULL;
	rec_ops.uring_exit = NULL;
	atomio_sys_set(&rec_ops);
	CHECK_OK(open_flags(ATOMIO_ACCEPT_COPIES, err, sizeof(err), &st));
	atomio_sys_set(NULL);
	char dir[4096], fpath[4096], lpath[4096];
	CHECK(realpath(t_dir(), dir) && realpath(t_path("f"), fpath) && realpath(t_path("log"), lpath));
	for (int i = 0; i < ncalls; i++)
		printf("  recovery call %d: %s\n", i, calls[i]);
	int fsync_f = call_at("fsync", fpath), fsync_d = call_at("fsync", dir), sb = call_at("write", lpath);
	CHECK(call_at("write", fpath) < 0);
	CHECK(fsync_f >= 0 && fsync_d > fsync_f && sb > fsync_d);
	CHECK_OK(stat(t_path("f"), &after));
	/* never written: same content, same mtime */
	CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
	d = t_slurp(t_path("f"), &m);
	CHECK(m == n && !memcmp(d, want, n));
	free(d);
	d = t_slurp(t_path("g"), &m);
	CHECK(m == 9 && !memcmp(d, "g's group", 9)); /* the original file was replayed into */
	free(d);
	CHECK_OK(atomio_close(st));
	/* The copy is the file from now on: registered again by a writer that
	 * opens the log without the flag, written, and a crash replays into it
	 * without the flag. */
	pid_t p = fork();
	if (p == 0) {
		struct atomio_options o = t_opts(1 << 20);
		o.flags |= ATOMIO_NO_BG_CHECKPOINT;
		CHECK_OK(atomio_open(t_path("log"), &o, &st));
		int f = atomio_file_open(st, t_path("f"), 0, 0);
		CHECK(f >= 0);
		CHECK_EQ(atomio_pwrite(st, f, "after", 5, F_SIZE), 5);
		_exit(0);
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	fd = open(t_path("f"), O_WRONLY);
	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, "xxxxx", 5, F_SIZE), 5); /* stale again */
	CHECK_OK(close(fd));
	CHECK_OK(open_flags(0, err, sizeof(err), &st));
	CHECK_OK(atomio_close(st));
	d = t_slurp(t_path("f"), &m);
	CHECK(m == F_SIZE + 5 && !memcmp(d + F_SIZE, "after", 5) && !memcmp(d, want, n));
	free(d);

	/* 2. Copies that do not hold the groups as the log leaves them. */
	refused("a byte of G3's data differs", 30050, 'x', 0, 30050);
	refused("a byte G3's zero fill clears", 20000, 'B', 0, 20000);
	refused("a byte of G1 that G3 left", 5000, 'x', 0, 5000);
	refused("a byte of G4 past the first MiB", G4_OFF + 1200000, 0x5a ^ g4[1200000], 0, G4_OFF + 1200000);
	refused("one byte longer", -1, 0, 1, F_SIZE);
	free(want);
	return 0;
}
