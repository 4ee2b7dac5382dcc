/*
 * dropin.c: everyday paths a program takes that the preload library must
 * serve as the file would behave without it (issue 34, "the preload as a
 * drop-in"; test/t_preload_dropin.sh runs each case under the library with
 * ATOMIO_FILES='*.db').  A plain POSIX program: it knows nothing of atomio
 * but the name of the log (ATOMIO_LOG), to find the store's descriptors.
 *
 *   dropin fdclose DIR    fdopen(fd, "r") + fclose, then the number reused
 *   dropin rawclose DIR   the number closed by a raw system call, reused by an eventfd
 *   dropin storefd DIR    close_range and dup2 over the store's descriptors
 *   dropin vfork DIR      a vfork child's dup2/close_range/exec (run with ATOMIO_GROUP=1)
 *   dropin hole DIR       a read of the hole below a pending extending write
 *   dropin stat DIR       stat/lstat/fstatat/statx agree with fstat (ATOMIO_GROUP=1)
 *   dropin mprotect DIR   a read-only shared mapping made writable by mprotect
 *   dropin spawn DIR      system, popen, posix_spawn children read the pending writes (ATOMIO_GROUP=1)
 *   dropin execveat DIR   execveat: pending writes home first (ATOMIO_GROUP=1); execs cat
 *   dropin unseen DIR     FICLONE and POSIX AIO writes into a protected file refused; aio_read sees writes
 *   dropin alias DIR      a second name (hard link) of a protected file (ATOMIO_GROUP=1)
 *   dropin cancel DIR     pthread_cancel of a thread in a protected fsync (ATOMIO_GROUP=1)
 *   dropin estale DIR     ftruncate of a protected file replaced where the library did not see it
 *   dropin emfile DIR     the store reopened with no descriptor to spare (ATOMIO_GROUP=1)
 *   dropin renameshared DIR  a process renames a protected file, writes it
 *                         under its new name and is killed; another recovers its writes
 *   dropin renameother DIR  one process renames a protected file another
 *                         writes through a descriptor opened before; the writer writes
 *                         again, syncs and is killed; the store recovers, b.db has it
 *   dropin unlinkother DIR  the same with an unlink: the write goes to the unlinked file
 *   dropin closerace DIR  close and dup2 of a descriptor while another thread writes it
 *                         (run with ATOMIO_PRELOAD_TEST_WDELAY=300: the write waits there)
 *   dropin falloc DIR     fallocate where the filesystem says EOPNOTSUPP (a seccomp filter
 *                         answers for it); also run without the library: the same results
 *   dropin rwstarve DIR   a rename (the library's lock, exclusive) while threads write and sync
 *                         without a pause (the lock, shared): it must get in while they run
 *   dropin bigwrites DIR  many large writes with no sync: memory stays bounded (no copy
 *                         of a write is kept in the process; the store's arena is the bound)
 *   dropin setfl DIR      another process (a vfork child, one it execs, a posix_spawn child)
 *                         sets O_APPEND on a description this process made: its next
 *                         write appends, as the kernel's would
 *   dropin exitlast DIR   a child, the store's only process, writes and leaves by _exit
 *                         (and by _Exit): its parent reads what it wrote
 *   dropin check DIR CASE the files as the case left them (run without the
 *                         library: what is on disk after the process exited)
 */
#define _GNU_SOURCE
#include <aio.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *dir;

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "dropin.c:%d: CHECK(%s) failed (errno %d %s)\n", __LINE__, #c, \
				errno, strerror(errno));                                           \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static char *P(const char *name)
{
	static char b[4][PATH_MAX];
	static int i;
	char *s = b[i++ % 4];
	snprintf(s, PATH_MAX, "%s/%s", dir, name);
	return s;
}

/* The whole file, NUL-terminated; *n its size. */
static char *slurp(const char *path, size_t *n)
{
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	struct stat sb;
	CHECK(fstat(fd, &sb) == 0);
	char *b = calloc(1, (size_t)sb.st_size + 1);
	CHECK(b);
	CHECK(pread(fd, b, (size_t)sb.st_size, 0) == sb.st_size);
	close(fd);
	*n = (size_t)sb.st_size;
	return b;
}

static void want_file(const char *path, const char *want)
{
	size_t n;
	char *got = slurp(path, &n);
	if (n != strlen(want) || memcmp(got, want, n)) {
		fprintf(stderr, "FAIL: %s holds %zu bytes \"%.40s\", want \"%s\"\n", path, n, got, want);
		exit(1);
	}
	free(got);
}

static int protected_with(const char *name, const char *text)
{
	int fd = open(P(name), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	return fd;
}

/* fdopen(fd, "r") + fclose: libc closes the descriptor itself; the next
 * open gets the number and its writes and ftruncate must reach that file. */
static void c_fdclose(void)
{
	int fd = protected_with("a.db", "PROTECTED");
	CHECK(fsync(fd) == 0);
	CHECK(lseek(fd, 0, SEEK_SET) == 0);
	FILE *f = fdopen(fd, "r");
	CHECK(f);
	char line[64];
	CHECK(fgets(line, sizeof(line), f) && !strcmp(line, "PROTECTED"));
	CHECK(fclose(f) == 0);
	int o = open(P("other.txt"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(o == fd); /* the lowest free number: the case this is about */
	CHECK(write(o, "XXXX", 4) == 4);
	CHECK(ftruncate(o, 2) == 0);
	CHECK(fsync(o) == 0);
	CHECK(close(o) == 0);
	/* ... and a stream opened by fopen at a number fclose freed */
	fd = open(P("a.db"), O_RDONLY);
	CHECK(fd >= 0);
	f = fdopen(fd, "r");
	CHECK(f && fclose(f) == 0);
	FILE *w = fopen(P("other2.txt"), "w");
	CHECK(w && fileno(w) == fd);
	CHECK(ftruncate(fileno(w), 5) == 0);
	CHECK(fclose(w) == 0);
	want_file(P("a.db"), "PROTECTED");
	want_file(P("other.txt"), "XX");
	struct stat sb;
	CHECK(stat(P("other2.txt"), &sb) == 0 && sb.st_size == 5);
}

/* The number closed where no wrapper sees it (a raw system call), then
 * reused by an eventfd: a write of the eventfd must reach the eventfd. */
static void c_rawclose(void)
{
	int fd = protected_with("a.db", "PROTECTED");
	CHECK(fsync(fd) == 0);
	CHECK(syscall(SYS_close, fd) == 0);
	int e = eventfd(0, EFD_NONBLOCK);
	CHECK(e == fd);
	uint64_t one = 1, got = 0;
	CHECK(write(e, &one, 8) == 8);
	CHECK(read(e, &got, 8) == 8 && got == 1);
	CHECK(close(e) == 0);
	want_file(P("a.db"), "PROTECTED");
}

/* The descriptors whose link names the log or the store's shared state. */
static int store_fds(int *out, int max)
{
	const char *log = getenv("ATOMIO_LOG");
	char canon[PATH_MAX];
	CHECK(log && realpath(log, canon));
	DIR *d = opendir("/proc/self/fd");
	CHECK(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		char link[300], path[PATH_MAX];
		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(link, path, sizeof(path) - 1);
		if (k <= 0)
			continue;
		path[k] = 0;
		if (!strcmp(path, canon) || !strncmp(path, "/dev/shm/atomio-", 16))
			out[n++] = atoi(e->d_name);
	}
	closedir(d);
	return n;
}

/* close_range over the store's descriptors, then the program's own files at
 * the lowest numbers; dup2 onto the log's number: each number is the
 * program's, the store goes on, and no byte of the log reaches the
 * program's files. */
static void c_storefd(void)
{
	int fd = protected_with("a.db", "one");
	CHECK(fsync(fd) == 0);
	int sfd[8];
	int n = store_fds(sfd, 8);
	CHECK(n >= 1);
	int lo = sfd[0];
	for (int i = 1; i < n; i++)
		lo = sfd[i] < lo ? sfd[i] : lo;
	/* Every number from the store's first but the protected file's: the
	 * store's descriptors are not the program's, so none of their numbers
	 * may come back to it. */
	CHECK(lo != fd);
	if (lo < fd)
		CHECK(close_range((unsigned)lo, (unsigned)fd - 1, 0) == 0);
	CHECK(close_range((unsigned)fd + 1, ~0U, 0) == 0);
	int m = open(P("mine.txt"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(m >= 0);
	CHECK(pwrite(fd, "two", 3, 0) == 3);
	CHECK(fsync(fd) == 0);
	CHECK(write(m, "mine", 4) == 4);
	/* dup2 onto the log's number: the number becomes the program's */
	n = store_fds(sfd, 8);
	CHECK(n >= 1);
	int d = dup2(m, sfd[0]);
	CHECK(d == sfd[0]);
	CHECK(write(d, "+dup", 4) == 4);
	CHECK(pwrite(fd, "three", 5, 0) == 5);
	CHECK(fsync(fd) == 0);
	/* ... and dup3 onto the (reopened) store's log */
	CHECK(store_fds(sfd, 8) >= 1);
	int d3 = sfd[0];
	CHECK(dup3(m, d3, O_CLOEXEC) == d3);
	CHECK(write(d3, "+dup3", 5) == 5);
	CHECK(pwrite(fd, "four!", 5, 0) == 5);
	CHECK(fsync(fd) == 0);
	want_file(P("a.db"), "four!");
	want_file(P("mine.txt"), "mine+dup+dup3");
}

/* A vfork child (as Python's subprocess) moves and closes descriptors and
 * execs: the parent's pending group must be whole afterwards. */
static void c_vfork(void)
{
	int fd = open(P("a.db"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	char a[4096], b[4096], got[8192];
	memset(a, 'A', sizeof(a));
	memset(b, 'B', sizeof(b));
	CHECK(write(fd, a, sizeof(a)) == (ssize_t)sizeof(a));
	pid_t pid = vfork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (dup2(fd, 100) != 100 || close_range(3, ~0U, 0) != 0)
			_exit(2);
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(write(fd, b, sizeof(b)) == (ssize_t)sizeof(b));
	CHECK(fsync(fd) == 0);
	CHECK(pread(fd, got, sizeof(got), 0) == (ssize_t)sizeof(got));
	CHECK(!memcmp(got, a, 4096) && !memcmp(got + 4096, b, 4096));
	CHECK(close(fd) == 0);
}

/* pwrite of one byte at 1 MiB into a new file, then a read at 0: 4096 zeros. */
static void c_hole(void)
{
	for (int i = 0; i < 20; i++) {
		char name[32];
		snprintf(name, sizeof(name), "h%d.db", i);
		int fd = open(P(name), O_RDWR | O_CREAT | O_EXCL, 0644);
		CHECK(fd >= 0);
		CHECK(pwrite(fd, "x", 1, 1 << 20) == 1);
		char buf[4096], zero[4096] = {0};
		memset(buf, 1, sizeof(buf));
		ssize_t n = pread(fd, buf, sizeof(buf), 0);
		if (n != (ssize_t)sizeof(buf) || memcmp(buf, zero, sizeof(buf))) {
			fprintf(stderr, "FAIL: try %d: pread at 0 below a write at 1 MiB returned %zd\n", i, n);
			exit(1);
		}
		CHECK(pread(fd, buf, 2, (1 << 20) - 1) == 2 && buf[0] == 0 && buf[1] == 'x');
		CHECK(close(fd) == 0);
	}
}

/* stat, lstat, fstatat, statx by path agree with fstat. */
static void c_stat(void)
{
	int fd = open(P("s.db"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	char b[4096];
	memset(b, 's', sizeof(b));
	CHECK(write(fd, b, sizeof(b)) == (ssize_t)sizeof(b));
	struct stat f, s, l, a;
	struct statx x;
	CHECK(fstat(fd, &f) == 0);
	CHECK(stat(P("s.db"), &s) == 0);
	CHECK(lstat(P("s.db"), &l) == 0);
	CHECK(fstatat(AT_FDCWD, P("s.db"), &a, 0) == 0);
	CHECK(statx(AT_FDCWD, P("s.db"), 0, STATX_SIZE | STATX_TYPE, &x) == 0);
	printf("sizes: fstat %lld stat %lld lstat %lld fstatat %lld statx %llu\n", (long long)f.st_size,
	       (long long)s.st_size, (long long)l.st_size, (long long)a.st_size, (unsigned long long)x.stx_size);
	CHECK(f.st_size == 4096 && s.st_size == 4096 && l.st_size == 4096 && a.st_size == 4096 &&
	      x.stx_size == 4096);
	CHECK(fsync(fd) == 0);
	CHECK(close(fd) == 0);
}

/* mprotect(PROT_WRITE) of a read-only shared mapping of a protected file
 * opened read-write: its stores would bypass the log. */
static void c_mprotect(void)
{
	int fd = protected_with("m.db", "MAPPED");
	char *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED);
	CHECK(!memcmp(p, "MAPPED", 6));
	errno = 0;
	if (mprotect(p, 4096, PROT_READ | PROT_WRITE) == 0) {
		fprintf(stderr, "FAIL: mprotect made a shared mapping of a protected file writable\n");
		exit(1);
	}
	CHECK(errno == EACCES);
	CHECK(munmap(p, 4096) == 0);
	/* a private mapping may be made writable: its stores are its own */
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	CHECK(p != MAP_FAILED && mprotect(p, 4096, PROT_READ | PROT_WRITE) == 0);
	p[0] = 'X';
	CHECK(munmap(p, 4096) == 0);
	CHECK(close(fd) == 0);
	want_file(P("m.db"), "MAPPED");
}

static void want_out(const char *name, const char *want)
{
	want_file(P(name), want);
}

/* Children started by system, popen and posix_spawn (glibc clones and execs
 * inside libc) read the file: they must see the writes made before. */
static void c_spawn(void)
{
	int fd = protected_with("s.db", "SPAWN1");
	char cmd[PATH_MAX * 3];
	snprintf(cmd, sizeof(cmd), "cat '%s' > '%s'", P("s.db"), P("out1"));
	CHECK(system(cmd) == 0);
	want_out("out1", "SPAWN1");
	CHECK(pwrite(fd, "SPAWN2", 6, 0) == 6);
	snprintf(cmd, sizeof(cmd), "cat '%s'", P("s.db"));
	FILE *f = popen(cmd, "r");
	CHECK(f);
	char b[64] = {0};
	CHECK(fread(b, 1, sizeof(b) - 1, f) == 6);
	CHECK(pclose(f) == 0);
	CHECK(!strcmp(b, "SPAWN2"));
	CHECK(pwrite(fd, "SPAWN3", 6, 0) == 6);
	posix_spawn_file_actions_t fa;
	CHECK(posix_spawn_file_actions_init(&fa) == 0);
	CHECK(posix_spawn_file_actions_addopen(&fa, 1, P("out3"), O_WRONLY | O_CREAT | O_TRUNC, 0644) == 0);
	char *argv[] = {"cat", P("s.db"), NULL};
	extern char **environ;
	pid_t pid;
	CHECK(posix_spawn(&pid, "/bin/cat", &fa, NULL, argv, environ) == 0);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	posix_spawn_file_actions_destroy(&fa);
	want_out("out3", "SPAWN3");
	CHECK(close(fd) == 0);
}

/* F_SETFL O_APPEND on descriptor fd, by another process: "dropin
 * setflchild DIR FD" (exec'd or spawned by c_setfl). */
static int setfl_child(const char *fd)
{
	return fcntl(atoi(fd), F_SETFL, O_APPEND) == 0 ? 0 : 3;
}

/* A vfork child sets O_APPEND on fd itself (in its parent's memory), or
 * execs "dropin setflchild" to. */
static pid_t vfork_setfl(int fd, int exec, const char *self, const char *fds)
{
	pid_t pid = vfork();
	if (pid == 0) {
		if (!exec)
			_exit(fcntl(fd, F_SETFL, O_APPEND) == 0 ? 0 : 3);
		execl(self, "dropin", "setflchild", dir, fds, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* A description this process made is its alone -- until a child holds it
 * too: then another process may set O_APPEND on it (the preload looks at
 * the description's flags again at each write: wrap.c, shared_append), and
 * the next write appends. */
static void c_setfl(const char *self)
{
	for (int way = 0; way < 3; way++) {
		char name[16], fds[16], want[16] = "0123456789XY", got[32] = {0};
		snprintf(name, sizeof(name), "f%d.db", way);
		int fd = open(P(name), O_RDWR | O_CREAT | O_TRUNC, 0644);
		CHECK(fd >= 0);
		CHECK(write(fd, "0123456789", 10) == 10);
		CHECK(lseek(fd, 0, SEEK_SET) == 0);
		snprintf(fds, sizeof(fds), "%d", fd);
		pid_t pid;
		if (way == 2) {
			char *argv[] = {"dropin", "setflchild", (char *)dir, fds, NULL};
			extern char **environ;
			CHECK(posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0);
		} else {
			pid = vfork_setfl(fd, way == 1, self, fds);
		}
		int st;
		CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
		CHECK(write(fd, "XY", 2) == 2);
		if (pread(fd, got, sizeof(got), 0) != 12 || strcmp(got, want)) {
			fprintf(stderr, "FAIL: way %d (%s): the file holds \"%s\", not \"%s\"\n", way,
				way == 0 ? "vfork" : way == 1 ? "vfork + exec" : "posix_spawn", got, want);
			exit(1);
		}
		CHECK(close(fd) == 0);
	}
}

/* A child writes a protected file and leaves by _exit (or _Exit), which
 * runs no destructor, while no other process has the store open (the
 * parent's closed at a failed exec): its write is a lazy group of a store no process
 * has open.  The parent, opening the store next, must read it. */
static void c_exitlast(void)
{
	for (int way = 0; way < 2; way++) {
		char name[16], got[16] = {0};
		snprintf(name, sizeof(name), "x%d.db", way);
		int fd = open(P(name), O_RDWR | O_CREAT | O_TRUNC, 0644);
		CHECK(fd >= 0);
		/* An exec closes the store first (the new image opens its own);
		 * one that fails leaves it closed until the next write. */
		CHECK(execl(P("no-such-program"), "none", (char *)NULL) < 0 && errno == ENOENT);
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			if (pwrite(fd, "CHILD", 5, 0) != 5)
				_exit(3);
			if (way)
				_Exit(0);
			_exit(0);
		}
		int st;
		CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
		if (pread(fd, got, sizeof(got), 0) != 5 || strcmp(got, "CHILD")) {
			fprintf(stderr, "FAIL: after the child's %s the file holds \"%s\", not \"CHILD\"\n",
				way ? "_Exit" : "_exit", got);
			exit(1);
		}
		CHECK(close(fd) == 0);
	}
}

/* execveat replaces the image: the writes made before must be in the file
 * (group mode: they are still pending when it is called).  Execs cat of the
 * file with its output in out; the script checks both. */
static void c_execveat(void)
{
	int fd = protected_with("e.db", "EXECVEAT");
	int out = open(P("out"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(out >= 0 && dup2(out, 1) == 1);
	char *argv[] = {"cat", P("e.db"), NULL};
	extern char **environ;
	execveat(AT_FDCWD, "/bin/cat", argv, environ, 0);
	fprintf(stderr, "execveat: %s\n", strerror(errno));
	(void)fd;
	exit(1);
}

/* Writers inside the kernel or glibc's threads: FICLONE and POSIX AIO
 * writes into a protected file are refused; an aio_read sees the writes. */
static void c_unseen(void)
{
	int src = open(P("src.txt"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(src >= 0);
	char blk[4096];
	memset(blk, 'c', sizeof(blk));
	CHECK(write(src, blk, sizeof(blk)) == (ssize_t)sizeof(blk));
	CHECK(fsync(src) == 0);
	int fd = protected_with("u.db", "UNSEEN");
	errno = 0;
	CHECK(ioctl(fd, FICLONE, src) < 0 && errno == EXDEV);
	struct aiocb cb;
	memset(&cb, 0, sizeof(cb));
	cb.aio_fildes = fd;
	cb.aio_buf = blk;
	cb.aio_nbytes = 8;
	cb.aio_offset = 0;
	errno = 0;
	CHECK(aio_write(&cb) < 0 && errno == EINVAL);
	char got[16] = {0};
	memset(&cb, 0, sizeof(cb));
	cb.aio_fildes = fd;
	cb.aio_buf = got;
	cb.aio_nbytes = 6;
	CHECK(aio_read(&cb) == 0);
	const struct aiocb *l[1] = {&cb};
	while (aio_error(&cb) == EINPROGRESS)
		CHECK(aio_suspend(l, 1, NULL) == 0 || errno == EINTR);
	CHECK(aio_return(&cb) == 6 && !memcmp(got, "UNSEEN", 6));
	CHECK(close(fd) == 0);
	CHECK(close(src) == 0);
	want_file(P("u.db"), "UNSEEN");
}

/* A hard link outside ATOMIO_FILES to a file the process protects: a write
 * through it must not be overwritten by the file's pending group. */
static void c_alias(void)
{
	int fd = protected_with("a.db", "ALIAS1");
	CHECK(link(P("a.db"), P("b.txt")) == 0);
	int b = open(P("b.txt"), O_RDWR);
	CHECK(b >= 0);
	char got[8] = {0};
	CHECK(pread(b, got, 6, 0) == 6 && !memcmp(got, "ALIAS1", 6));
	CHECK(pwrite(b, "XY", 2, 0) == 2);
	CHECK(fsync(fd) == 0);
	CHECK(fsync(b) == 0);
	CHECK(close(b) == 0);
	CHECK(close(fd) == 0);
	want_file(P("a.db"), "XYIAS1");
}

static int cancel_pipe[2][2];

static void *cancel_thread(void *arg)
{
	int fd = *(int *)arg, old;
	char c;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	CHECK(pwrite(fd, "CANCEL", 6, 0) == 6);
	CHECK(write(cancel_pipe[0][1], "r", 1) == 1);
	CHECK(read(cancel_pipe[1][0], &c, 1) == 1);
	/* The cancel is pending: it acts at the first cancellation point the
	 * thread reaches with cancellation on, inside fsync. */
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
	fsync(fd);
	return NULL;
}

/* pthread_cancel of a thread in a protected fsync: the thread goes (at or
 * after the sync), and the library stays usable: a rename of a protected
 * file (which takes the library's lock exclusive) and a fork return. */
static void c_cancel(void)
{
	int fd = protected_with("c.db", "xxxxxx");
	CHECK(pipe(cancel_pipe[0]) == 0 && pipe(cancel_pipe[1]) == 0);
	pthread_t t;
	char c;
	CHECK(pthread_create(&t, NULL, cancel_thread, &fd) == 0);
	CHECK(read(cancel_pipe[0][0], &c, 1) == 1);
	CHECK(pthread_cancel(t) == 0);
	CHECK(write(cancel_pipe[1][1], "g", 1) == 1);
	void *ret;
	CHECK(pthread_join(t, &ret) == 0 && ret == PTHREAD_CANCELED);
	alarm(20); /* a wedged library: SIGALRM fails the test */
	int o = open(P("d.db"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(o >= 0 && write(o, "D", 1) == 1 && close(o) == 0);
	CHECK(rename(P("d.db"), P("e.db")) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(0);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(fsync(fd) == 0);
	CHECK(close(fd) == 0);
	alarm(0);
	want_file(P("c.db"), "CANCEL");
}

static void *race_writer(void *arg)
{
	int fd = *(int *)arg;
	ssize_t r = write(fd, "RACE", 4);
	/* The close came while the write was under way: either order is one
	 * the program could see without the library. */
	CHECK(r == 4 || (r < 0 && errno == EBADF));
	return NULL;
}

/* A close, then a dup2 over the number, while another thread's write of the
 * same descriptor is in the library (ATOMIO_PRELOAD_TEST_WDELAY holds it
 * there after it found its entry): the entry must outlive the call.  Freed
 * under it (MALLOC_PERTURB_ fills freed memory), the write used a garbage
 * file pointer and the process died. */
static void c_closerace(void)
{
	for (int i = 0; i < 2; i++) {
		int fd = protected_with("r.db", "xxxx");
		pthread_t t;
		CHECK(pthread_create(&t, NULL, race_writer, &fd) == 0);
		usleep(100 * 1000);
		if (i == 0) {
			CHECK(close(fd) == 0);
		} else {
			int o = open(P("plain.txt"), O_RDWR | O_CREAT, 0644);
			CHECK(o >= 0 && dup2(o, fd) == fd && close(o) == 0);
		}
		/* Memory reused meanwhile, as a busy program would. */
		for (int k = 0; k < 64; k++)
			free(malloc(64));
		CHECK(pthread_join(t, NULL) == 0);
		if (i == 1)
			CHECK(close(fd) == 0);
	}
}

/* Every fallocate system call of this process fails with EOPNOTSUPP, as on
 * a filesystem without it (NFSv3, ext4's indirect-block files, FUSE without
 * the call). */
static void no_fallocate(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fallocate, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EOPNOTSUPP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {(unsigned short)(sizeof(f) / sizeof(f[0])), f};
	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0);
}

static void want_size(int fd, const char *path, off_t size)
{
	struct stat a, b;
	CHECK(fstat(fd, &a) == 0 && stat(path, &b) == 0);
	if (a.st_size != size || b.st_size != size) {
		fprintf(stderr, "FAIL: %s: fstat says %lld, stat %lld, want %lld\n", path, (long long)a.st_size,
			(long long)b.st_size, (long long)size);
		exit(1);
	}
}

/* fallocate where the filesystem has none: the file's own answer
 * (EOPNOTSUPP, the size unchanged), as without the library, not a
 * success with the size changed; posix_fallocate, which glibc emulates
 * then, succeeds and extends the file with zeros. */
static void c_falloc(void)
{
	int fd = protected_with("f.db", "abcd");
	no_fallocate();
	errno = 0;
	CHECK(fallocate(fd, 0, 0, 8192) == -1 && errno == EOPNOTSUPP);
	want_size(fd, P("f.db"), 4);
	errno = 0;
	CHECK(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 8192) == -1 && errno == EOPNOTSUPP);
	want_size(fd, P("f.db"), 4);
	CHECK(posix_fallocate(fd, 0, 6) == 0);
	want_size(fd, P("f.db"), 6);
	CHECK(fsync(fd) == 0 && close(fd) == 0);
	size_t n;
	char *got = slurp(P("f.db"), &n);
	CHECK(n == 6 && !memcmp(got, "abcd\0\0", 6));
	free(got);
}

#define RW_THREADS 6
#define RW_ITERS 300
static _Atomic long rw_done;
static _Atomic int rw_started;

static void *rw_streamer(void *arg)
{
	int fd = *(int *)arg;
	rw_started++;
	for (int i = 0; i < RW_ITERS; i++) {
		CHECK(pwrite(fd, "0123456789", 10, (off_t)(i % 64) * 10) == 10);
		CHECK(fdatasync(fd) == 0);
		rw_done++;
	}
	return NULL;
}

/* Threads that write and sync protected files without a pause hold the
 * library's lock shared, one or another at every moment; a rename of a
 * protected file takes it exclusive.  A lock that lets readers in while an
 * exclusive caller waits has it wait until they all stop (count-bounded:
 * RW_THREADS x RW_ITERS syncs); it must get in while they run. */
static void c_rwstarve(void)
{
	int fds[RW_THREADS];
	pthread_t t[RW_THREADS];
	for (int i = 0; i < RW_THREADS; i++) {
		char name[32];
		snprintf(name, sizeof(name), "s%d.db", i);
		fds[i] = protected_with(name, "x");
	}
	int o = protected_with("m.db", "M");
	CHECK(fsync(o) == 0 && close(o) == 0);
	for (int i = 0; i < RW_THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, rw_streamer, &fds[i]) == 0);
	while (rw_started < RW_THREADS || rw_done < RW_THREADS * 5)
		usleep(1000);
	long before = rw_done;
	CHECK(rename(P("m.db"), P("n.db")) == 0);
	long at = rw_done;
	for (int i = 0; i < RW_THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	printf("rename: in after %ld of %d syncs (asked after %ld)\n", at, RW_THREADS * RW_ITERS, before);
	if (at >= RW_THREADS * RW_ITERS - RW_THREADS) {
		fprintf(stderr, "FAIL: the rename got the lock only once the writers were done (%ld of %d syncs)\n",
			at, RW_THREADS * RW_ITERS);
		exit(1);
	}
	for (int i = 0; i < RW_THREADS; i++)
		CHECK(close(fds[i]) == 0);
	want_file(P("n.db"), "M");
}

static long maxrss_kib(void)
{
	struct rusage ru;
	CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
	return ru.ru_maxrss;
}

/* 256 writes of 1 MiB with no sync, the program outrunning the store.
 * Before issue 36 each group held a copy of its data in the process until
 * it was complete (a bound on the bytes in flight kept the peak near
 * 8 MiB); now no copy stays in the process (a lazy group's data is in the
 * store's shared arena, and a group too large for it is committed
 * durably), so the peak must not grow with what is written. */
static void c_bigwrites(void)
{
	int fd = protected_with("big.db", "");
	size_t n = 1 << 20;
	char *b = malloc(n);
	CHECK(b);
	memset(b, 'B', n);
	CHECK(pwrite(fd, b, n, 0) == (ssize_t)n && fsync(fd) == 0);
	long before = maxrss_kib();
	for (int i = 0; i < 256; i++) {
		b[0] = (char)i;
		CHECK(pwrite(fd, b, n, (off_t)(i % 4) * (off_t)n) == (ssize_t)n);
	}
	long peak = maxrss_kib();
	CHECK(fsync(fd) == 0 && close(fd) == 0);
	printf("bigwrites: peak RSS grew by %ld KiB over 256 MiB written\n", peak - before);
	if (peak - before > 64 * 1024) {
		fprintf(stderr, "FAIL: 256 writes of 1 MiB grew the peak RSS by %ld KiB (bound: 64 MiB; the process keeps no copy of a write)\n",
			peak - before);
		exit(1);
	}
	free(b);
}

/* The protected file is replaced by a rename the library does not see (a
 * raw system call: as another process would), and the store is reopened
 * (a rename of another protected file closes it): the old file's
 * descriptor is an ordinary one, and ftruncate of it works as it would. */
static void c_estale(void)
{
	int fd = protected_with("a.db", "OLDFILE");
	CHECK(fsync(fd) == 0);
	int n = open(P("new.txt"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(n >= 0 && write(n, "NEW", 3) == 3 && close(n) == 0);
	CHECK(syscall(SYS_rename, P("new.txt"), P("a.db")) == 0);
	int o = open(P("b.db"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(o >= 0 && write(o, "B", 1) == 1 && close(o) == 0);
	CHECK(rename(P("b.db"), P("c.db")) == 0);
	errno = 0;
	if (ftruncate(fd, 3) != 0) {
		fprintf(stderr, "FAIL: ftruncate of the replaced file's descriptor: %s\n", strerror(errno));
		exit(1);
	}
	char b[8] = {0};
	CHECK(pread(fd, b, sizeof(b), 0) == 3 && !memcmp(b, "OLD", 3));
	CHECK(close(fd) == 0);
	want_file(P("a.db"), "NEW");
}

/* The store is closed (a rename of a protected file) and reopened by the
 * next write while the process has no descriptors to spare: with 0, 1, 2,
 * ... free, each write either fails or is protected, never goes straight
 * to the file (group mode: a protected write stays out of the file until a
 * sync, so the file's own size shows where it went). */
static void c_emfile(void)
{
	struct rlimit rl = {64, 64};
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	int fd = protected_with("a.db", "0123");
	CHECK(fsync(fd) == 0);
	int o = open(P("b.db"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(o >= 0 && write(o, "0123", 4) == 4 && fsync(o) == 0);
	CHECK(rename(P("b.db"), P("c.db")) == 0);
	int fill[64], n = 0, failed = 0;
	while (n < 64 && (fill[n] = dup(0)) >= 0)
		n++;
	CHECK(errno == EMFILE);
	/* both files' descriptors written, one more descriptor free each round,
	 * until both writes are taken */
	for (int done = 0; done != 3;) {
		if (!(done & 1) && pwrite(fd, "Q", 1, 100) == 1)
			done |= 1;
		else if (!(done & 2) && pwrite(o, "Q", 1, 100) == 1)
			done |= 2;
		else {
			CHECK(errno == EMFILE || errno == EIO || errno == ENFILE);
			failed++;
			CHECK(n > 0);
			close(fill[--n]);
		}
	}
	while (n > 0)
		close(fill[--n]);
	const char *names[2] = {"a.db", "c.db"};
	int raw[2];
	struct stat sb;
	for (int i = 0; i < 2; i++) {
		raw[i] = (int)syscall(SYS_open, P(names[i]), O_RDONLY);
		CHECK(raw[i] >= 0 && syscall(SYS_fstat, raw[i], &sb) == 0);
		printf("%s: the file's size before the sync: %lld\n", names[i], (long long)sb.st_size);
		if (sb.st_size != 4) {
			fprintf(stderr, "FAIL: %s: a write after the store's reopen went straight to the file\n",
				names[i]);
			exit(1);
		}
	}
	printf("writes refused for want of a descriptor: %d\n", failed);
	CHECK(fsync(fd) == 0 && fsync(o) == 0);
	for (int i = 0; i < 2; i++) {
		CHECK(syscall(SYS_fstat, raw[i], &sb) == 0 && sb.st_size == 101);
		syscall(SYS_close, raw[i]);
	}
	CHECK(close(fd) == 0 && close(o) == 0);
}

/* A rename or unlink of a protected path closes the store until the next
 * write; a child forked meanwhile joins the store at its write (one mode:
 * the file then has the child's bytes, and the parent's fsync makes them
 * durable).  Group mode keeps one writing process: the child is still not
 * the store's owner, its writes are refused (EPERM), as they are while the
 * store is open, and the file keeps the parent's bytes. */
static void c_forkrename(void)
{
	const char *g = getenv("ATOMIO_GROUP");
	bool group = g && !strcmp(g, "1");
	int fd = protected_with("a.db", "PARENT");
	close(protected_with("b.db", "B"));
	CHECK(unlink(P("b.db")) == 0);
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		ssize_t r = pwrite(fd, "child!", 6, 0);
		if (!group)
			_exit(r == 6 ? 0 : 3);
		_exit(r == -1 && errno == EPERM ? 0 : 3);
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK(fsync(fd) == 0);
	close(fd);
	want_file(P("a.db"), group ? "PARENT" : "child!");
}

/* A rename of a protected file by one process, then its
 * writes to the file under the new name; the process is killed after its
 * last sync, and the parent, joining the store at its first write, recovers
 * the dead one's records.  Those of the writes after the rename must name
 * the file by its new name: named by the old one (a.db, gone), the store
 * could not be opened at all ("data file a.db is gone"), and a live
 * process's home write of them fails the store (every write EIO: pfsx's
 * shared rounds) or lands in whatever file has that name by then. */
static void c_renameshared(void)
{
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		int fd = protected_with("a.db", "one");
		CHECK(fsync(fd) == 0);
		CHECK(rename(P("a.db"), P("b.db")) == 0);
		CHECK(pwrite(fd, "two", 3, 0) == 3);
		CHECK(fsync(fd) == 0);
		kill(getpid(), SIGKILL);
		_exit(3);
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
	int c = protected_with("c.db", "C");
	CHECK(fsync(c) == 0);
	CHECK(close(c) == 0);
	want_file(P("b.db"), "two");
}

/* Shared mode: W opens a.db (protected) and writes it; another process R
 * renames a.db to b.db (op 'r') or unlinks it (op 'u') and exits; W writes
 * again through the descriptor it opened before, syncs, and is killed.
 * Then this process opens the store first (recovery).  A record W logged
 * after R's call under its file id, whose catalog path is a.db, made the
 * store impossible to open ("data file a.db is gone"), and a live
 * process's home write of it failed the store (ENOENT).  POSIX: W's write
 * lands in the renamed file (b.db holds it), or in the unlinked one. */
static void moved_by_other(char op)
{
	int p1[2], p2[2];
	CHECK(pipe(p1) == 0 && pipe(p2) == 0);
	pid_t w = fork();
	CHECK(w >= 0);
	if (w == 0) {
		char c;
		int fd = protected_with("a.db", "one");
		CHECK(fsync(fd) == 0);
		CHECK(write(p1[1], "w", 1) == 1 && read(p2[0], &c, 1) == 1);
		CHECK(pwrite(fd, "two", 3, 0) == 3);
		CHECK(fsync(fd) == 0);
		char b[4] = {0};
		CHECK(pread(fd, b, 3, 0) == 3 && !memcmp(b, "two", 3));
		kill(getpid(), SIGKILL);
		_exit(3);
	}
	char c;
	CHECK(read(p1[0], &c, 1) == 1);
	pid_t r = fork();
	CHECK(r >= 0);
	if (r == 0) {
		CHECK(op == 'r' ? rename(P("a.db"), P("b.db")) == 0 : unlink(P("a.db")) == 0);
		exit(0); /* its handle closed: W is the store's last process */
	}
	int ws;
	CHECK(waitpid(r, &ws, 0) == r && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK(write(p2[1], "g", 1) == 1);
	CHECK(waitpid(w, &ws, 0) == w && WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
	int fd = protected_with("c.db", "C");
	CHECK(fsync(fd) == 0);
	CHECK(close(fd) == 0);
	CHECK(access(P("a.db"), F_OK) < 0 && errno == ENOENT);
	if (op == 'r')
		want_file(P("b.db"), "two");
}

static void check(const char *c)
{
	if (!strcmp(c, "fdclose")) {
		want_file(P("a.db"), "PROTECTED");
		want_file(P("other.txt"), "XX");
	} else if (!strcmp(c, "rawclose")) {
		want_file(P("a.db"), "PROTECTED");
	} else if (!strcmp(c, "storefd")) {
		want_file(P("a.db"), "four!");
		want_file(P("mine.txt"), "mine+dup+dup3");
	} else if (!strcmp(c, "vfork")) {
		size_t n;
		char *g = slurp(P("a.db"), &n);
		CHECK(n == 8192);
		for (size_t i = 0; i < n; i++)
			CHECK(g[i] == (i < 4096 ? 'A' : 'B'));
		free(g);
	} else if (!strcmp(c, "alias")) {
		want_file(P("a.db"), "XYIAS1");
	} else if (!strcmp(c, "renameother")) {
		CHECK(access(P("a.db"), F_OK) < 0 && errno == ENOENT);
		want_file(P("b.db"), "two");
		want_file(P("c.db"), "C");
	} else if (!strcmp(c, "unlinkother")) {
		CHECK(access(P("a.db"), F_OK) < 0 && errno == ENOENT);
		want_file(P("c.db"), "C");
	} else if (!strcmp(c, "renameshared")) {
		CHECK(access(P("a.db"), F_OK) < 0 && errno == ENOENT);
		want_file(P("b.db"), "two");
		want_file(P("c.db"), "C");
	} else if (!strcmp(c, "execveat")) {
		want_file(P("e.db"), "EXECVEAT");
		want_file(P("out"), "EXECVEAT");
	} else {
		CHECK(!"no such case");
	}
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: dropin CASE DIR | dropin check DIR CASE\n");
		return 2;
	}
	dir = argv[2];
	const char *c = argv[1];
	if (!strcmp(c, "check") && argc > 3)
		check(argv[3]);
	else if (!strcmp(c, "fdclose"))
		c_fdclose();
	else if (!strcmp(c, "rawclose"))
		c_rawclose();
	else if (!strcmp(c, "storefd"))
		c_storefd();
	else if (!strcmp(c, "vfork"))
		c_vfork();
	else if (!strcmp(c, "exitlast"))
		c_exitlast();
	else if (!strcmp(c, "setfl"))
		c_setfl(realpath("/proc/self/exe", NULL));
	else if (!strcmp(c, "setflchild") && argc > 3)
		return setfl_child(argv[3]);
	else if (!strcmp(c, "hole"))
		c_hole();
	else if (!strcmp(c, "stat"))
		c_stat();
	else if (!strcmp(c, "mprotect"))
		c_mprotect();
	else if (!strcmp(c, "spawn"))
		c_spawn();
	else if (!strcmp(c, "execveat"))
		c_execveat();
	else if (!strcmp(c, "unseen"))
		c_unseen();
	else if (!strcmp(c, "alias"))
		c_alias();
	else if (!strcmp(c, "cancel"))
		c_cancel();
	else if (!strcmp(c, "estale"))
		c_estale();
	else if (!strcmp(c, "emfile"))
		c_emfile();
	else if (!strcmp(c, "forkrename"))
		c_forkrename();
	else if (!strcmp(c, "renameshared"))
		c_renameshared();
	else if (!strcmp(c, "renameother"))
		moved_by_other('r');
	else if (!strcmp(c, "unlinkother"))
		moved_by_other('u');
	else if (!strcmp(c, "closerace"))
		c_closerace();
	else if (!strcmp(c, "falloc"))
		c_falloc();
	else if (!strcmp(c, "rwstarve"))
		c_rwstarve();
	else if (!strcmp(c, "bigwrites"))
		c_bigwrites();
	else
		return 2;
	printf("%s: ok\n", c);
	return 0;
}
