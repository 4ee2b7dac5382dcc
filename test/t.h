/*
 * t.h: the test harness.  One program per concern; exit 0 = pass, 1 = fail,
 * 77 = skipped (the kernel or filesystem lacks a feature).  Failures print
 * file:line and the expression.
 */
#ifndef ATOMIO_T_H
#define ATOMIO_T_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "atomio.h"

#define T_SKIP 77

/* Work scale: the ASan+UBSan build runs the same tests with less work so
 * that `make check` stays within its time. */
#ifdef ATOMIO_SAN
#define T_SCALE(n) (((n) + 3) / 4)
#else
#define T_SCALE(n) (n)
#endif

/* The seed of a randomized test: $ATOMIO_SEED when set, else the test's
 * fixed default, so that `make check` runs the same cases every time and a
 * failure replays with the seed it printed.  t_seed prints it. */
static inline uint64_t t_seed_env(uint64_t dflt)
{
	const char *e = getenv("ATOMIO_SEED");
	return e && *e ? strtoull(e, NULL, 0) : dflt;
}
static inline uint64_t t_seed(uint64_t dflt)
{
	uint64_t s = t_seed_env(dflt);
	printf("seed %" PRIu64 " (ATOMIO_SEED=%" PRIu64 " to repeat)\n", s, s);
	fflush(stdout);
	return s;
}

#define CHECK(c)                                                                        \
	do {                                                                            \
		if (!(c)) {                                                             \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

/* CHECK in a forked process of a test: names the process, and leaves with
 * _exit (the parent's exit handlers, its directory's removal among them,
 * stay the parent's). */
#define KCHECK(c)                                                                            \
	do {                                                                                 \
		if (!(c)) {                                                                  \
			fprintf(stderr, "%s:%d: CHECK failed in %d: %s\n", __FILE__, __LINE__, \
				(int)getpid(), #c);                                          \
			_exit(1);                                                            \
		}                                                                            \
	} while (0)

#define CHECK_EQ(a, b)                                                                   \
	do {                                                                             \
		long long _a = (long long)(a), _b = (long long)(b);                      \
		if (_a != _b) {                                                          \
			fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld%s%s\n", \
				__FILE__, __LINE__, #a, _a, #b, _b,                      \
				_a < 0 ? " : " : "", _a < 0 ? atomio_strerror((int)_a) : ""); \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

#define CHECK_OK(expr) CHECK_EQ((expr), 0)

static inline void t_skip(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "SKIP: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(T_SKIP);
}

/* For a test that opens stores thousands of times (a crash simulator's
 * recoveries): a store opened through an ops table without shm_map (a
 * single-process store) has its state -- a few MiB, 3.3 for the smallest
 * log -- calloc'd at each open.  With glibc's default, dynamic thresholds,
 * each such block is mmapped (or the heap's top trimmed and grown again),
 * so every open faults every page in afresh: in t_sqlite_sim, 70% of the
 * time, in page faults under memset.  Fixed thresholds keep the block in
 * the heap, reused from one open to the next (calloc clears it: a memset,
 * no fault).  Not under ASan, whose allocator ignores these. */
/* A child process with two pipes: fork; in the child (0 returned) *rd is
 * the read end of the parent's messages and *wr the write end of its
 * answers, in the parent the other two ends; the unused ends closed. */
static inline pid_t t_fork_piped(int *rd, int *wr)
{
	int down[2], up[2];
	CHECK_OK(pipe(down));
	CHECK_OK(pipe(up));
	pid_t pid = fork();
	CHECK(pid >= 0);
	close(pid == 0 ? down[1] : down[0]);
	close(pid == 0 ? up[0] : up[1]);
	*rd = pid == 0 ? down[0] : up[0];
	*wr = pid == 0 ? up[1] : down[1];
	return pid;
}

/* Wait for child pid (of t_fork_piped, say): it must have exited 0. */
static inline void t_child_ok(pid_t pid)
{
	int ws;
	CHECK_EQ(waitpid(pid, &ws, 0), pid);
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

static inline void t_heap_keep(void)
{
	mallopt(M_MMAP_THRESHOLD, 256 << 20);
	mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

static char t_dir_path[4096];

/* The name of the shared-state file that a store whose log is open as fd
 * keeps in /dev/shm where that is a tmpfs (src/shm.c, shm_where_of: the log's
 * store id and inode); -1 where fd is no log.  Read directly, not through
 * atomio_log_mark (atomio's ops table, which a test may have replaced by
 * the time it cleans up): a superblock (format.h, struct sb_disk) starts
 * with "ATOMIOLG", the store id at byte 16, the same in both slots. */
static inline int t_shm_name(int fd, char *out, size_t n)
{
	unsigned char sb[24];
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || pread(fd, sb, sizeof(sb), 0) != (ssize_t)sizeof(sb) ||
	    memcmp(sb, "ATOMIOLG", 8))
		return -1;
	uint64_t id;
	memcpy(&id, sb + 16, sizeof(id));
	snprintf(out, n, "/dev/shm/atomio-%016llx-%llx", (unsigned long long)id, (unsigned long long)st.st_ino);
	return 0;
}

/* Remove the shared-state file of the store whose log is at path.  A store
 * removes it when its last process closes; one whose last process was
 * killed leaves it (the next open rebuilds it), and every test's log is
 * gone after the test: t_cleanup calls this for every file of the test's
 * directory, so that no test leaves /dev/shm/atomio-* behind.  (Where
 * /dev/shm is no tmpfs, the file is beside the log, in that directory.) */
static inline void t_shm_remove(const char *path)
{
	char name[64];
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return;
	int r = t_shm_name(fd, name, sizeof(name));
	close(fd);
	if (r == 0)
		(void)unlink(name);
}

/* unlink(path) of a log that the test deletes before its end, its state
 * file first (t_shm_remove): once the log is gone, t_cleanup can no longer
 * name that file.  For a log whose last process was killed or failed to
 * open it; one closed has none left.  unlink's result. */
static inline int t_unlink_log(const char *path)
{
	t_shm_remove(path);
	return unlink(path);
}

static inline int t_rm_cb(const char *p, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type == FTW_F && S_ISREG(sb->st_mode))
		t_shm_remove(p);
	return remove(p);
}

static inline void t_cleanup(void)
{
	if (t_dir_path[0] && !getenv("ATOMIO_KEEP"))
		nftw(t_dir_path, t_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh temporary directory on a real filesystem ($ATOMIO_TEST_DIR, else
 * /var/tmp), removed at exit unless $ATOMIO_KEEP is set. */
static inline const char *t_dir(void)
{
	if (t_dir_path[0])
		return t_dir_path;
	const char *base = getenv("ATOMIO_TEST_DIR");
	if (!base)
		base = "/var/tmp";
	snprintf(t_dir_path, sizeof(t_dir_path), "%s/atomio-t-XXXXXX", base);
	if (!mkdtemp(t_dir_path)) {
		perror("mkdtemp");
		exit(1);
	}
	atexit(t_cleanup);
	return t_dir_path;
}

static inline char *t_path(const char *name)
{
	static char bufs[8][4200];
	static int i;
	char *b = bufs[i++ % 8];
	if ((size_t)snprintf(b, sizeof(bufs[0]), "%s/%s", t_dir(), name) >= sizeof(bufs[0]))
		abort();
	return b;
}

/* Deterministic bytes for (tag, offset): lets a check tell which write put a byte there. */
static inline uint8_t t_byte(uint32_t tag, uint64_t off)
{
	/* splitmix64's finaliser over (tag, off): distinct tags give distinct pages */
	uint64_t x = off * 0x9E3779B97F4A7C15ull + (uint64_t)tag * 0xD1B54A32D192ED03ull + 1;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return (uint8_t)(x ^ (x >> 31));
}

static inline void t_fill(void *buf, size_t len, uint32_t tag, uint64_t off)
{
	uint8_t *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = t_byte(tag, off + i);
}

/* Read a whole file into a malloc'd buffer; *len its size.  NULL if absent. */
static inline uint8_t *t_slurp(const char *path, size_t *len)
{
	*len = 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	struct stat sb;
	fstat(fd, &sb);
	uint8_t *b = malloc((size_t)sb.st_size + 1);
	size_t done = 0;
	while (done < (size_t)sb.st_size) {
		ssize_t n = pread(fd, b + done, (size_t)sb.st_size - done, (off_t)done);
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	close(fd);
	*len = done;
	return b;
}

static inline struct atomio_options t_opts(uint64_t log_size)
{
	struct atomio_options o = {0};
	o.log_size = log_size;
	o.flags = ATOMIO_CREATE;
	return o;
}

/* atomio_open(log, o) into *a, then f registered (created) and text written
 * at offset 0: where the tests of files registered anew begin.  f's id. */
static inline int t_open_written(const char *log, const struct atomio_options *o, const char *f,
				 const char *text, atomio **a)
{
	CHECK_OK(atomio_open(log, o, a));
	int id = atomio_file_open(*a, f, O_CREAT, 0644);
	CHECK(id >= 0);
	CHECK_EQ(atomio_pwrite(*a, id, text, strlen(text), 0), (ssize_t)strlen(text));
	return id;
}

#endif
