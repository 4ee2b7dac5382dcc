/*
 * posix.c: POSIX's promises for O_APPEND and for a shared file offset,
 * kept with several processes (test/t_preload_posix.sh runs it with and
 * without libatomio_preload.so).  A plain POSIX program: it knows nothing
 * of atomio.
 *
 *   posix append DIR NPROC NREC   NPROC forked processes each write NREC
 *                                 records (NREC even) to DIR/append.p from
 *                                 two threads, each through a description
 *                                 of its own opened with O_APPEND
 *   posix offset DIR NREC         a parent opens DIR/offset.p, forks, and
 *                                 both write NREC records through the one
 *                                 inherited description (one file offset;
 *                                 the child through a dup of it)
 *   posix scm DIR NREC            as offset, but the child was forked before
 *                                 the open and gets the descriptor over a
 *                                 UNIX socket (SCM_RIGHTS)
 *   posix readers DIR NREC        as offset, but the child reads NREC
 *                                 records' worth through it meanwhile
 *
 * A record is 64 bytes: its writer, its number and a checksum.  The writers
 * start together (a pipe they wait on) so that their writes interleave.
 * Every write must return 64: O_APPEND puts each at the end of the file
 * whoever else appends, and writes through one open file description
 * advance its one offset, so the file must end up holding every record
 * exactly once, whole, at a multiple of 64.  The parent created the file
 * (and so, under the preload library's default mode, holds its store: the
 * children's writes are refused, and counted as errors).
 *
 * Prints "KIND intact: N / TOTAL, errors reported: E, size S (want W)";
 * exit 0 when every record is intact and no write failed, 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define REC 64
#define MAXP 16

static _Atomic int *g_err; /* failed or short writes, shared by the processes */

static uint32_t fnv(const unsigned char *p, size_t n)
{
	uint32_t h = 2166136261u;
	while (n--)
		h = (h ^ *p++) * 16777619u;
	return h;
}

static void rec_make(char *b, int who, int n)
{
	char text[REC];
	snprintf(text, sizeof(text), "w%02d r%06d ", who, n);
	size_t k = strlen(text);
	for (size_t i = k; i < 55; i++)
		text[i] = (char)('a' + (who * 7 + n + (int)i) % 26);
	memcpy(b, text, 55);
	snprintf(b + 55, 10, "%08x", fnv((unsigned char *)b, 55));
	b[REC - 1] = '\n';
}

/* The record at b, or -1 when it is not one whole record. */
static int rec_parse(const char *b, int *who, int *n)
{
	char want[REC + 1];
	if (sscanf(b, "w%2d r%6d ", who, n) != 2 || *who < 0 || *who >= MAXP || *n < 0)
		return -1;
	rec_make(want, *who, *n);
	return memcmp(b, want, REC) ? -1 : 0;
}

static void die(const char *what)
{
	fprintf(stderr, "posix: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void writer(int fd, int who, int nrec, int gate)
{
	char c, b[REC];
	if (gate >= 0 && read(gate, &c, 1) < 0) /* returns 0 once the parent closes its end */
		die("gate");
	for (int i = 0; i < nrec; i++) {
		rec_make(b, who, i);
		ssize_t w = write(fd, b, REC);
		if (w != REC) {
			if (atomic_fetch_add(g_err, 1) == 0)
				fprintf(stderr, "posix: writer %d, record %d: write returned %zd: %s\n", who, i, w,
					w < 0 ? strerror(errno) : "short");
			return; /* refused (the preload's default mode: a second process) */
		}
	}
}

/* Count the distinct whole records of path; 0 when all are there (and the
 * file is want_size bytes, or only records when want_size < 0). */
static int check_size(const char *kind, const char *path, int nwriters, int nrec, long want_size);
static int check(const char *kind, const char *path, int nwriters, int nrec)
{
	return check_size(kind, path, nwriters, nrec, -1);
}

static int check_size(const char *kind, const char *path, int nwriters, int nrec, long want_size)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		die("fstat");
	long want = (long)nwriters * nrec;
	char *seen = calloc((size_t)want, 1);
	char b[REC];
	long intact = 0;
	for (off_t off = 0; off + REC <= sb.st_size; off += REC) {
		if (pread(fd, b, REC, off) != REC)
			die("pread");
		int who, n;
		if (rec_parse(b, &who, &n) == 0 && who < nwriters && n < nrec && !seen[(long)who * nrec + n]) {
			seen[(long)who * nrec + n] = 1;
			intact++;
		}
	}
	close(fd);
	free(seen);
	int err = atomic_load(g_err);
	if (want_size < 0)
		want_size = want * REC;
	printf("%s intact: %ld / %ld, errors reported: %d, size %lld (want %ld)\n", kind, intact, want, err,
	       (long long)sb.st_size, want_size);
	return intact == want && err == 0 && sb.st_size == want_size ? 0 : 1;
}

static int reap(int n)
{
	int bad = 0, status;
	for (int i = 0; i < n; i++)
		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			bad = 1;
	return bad;
}

struct twriter {
	int fd, who, nrec, gate;
};

static void *twriter_main(void *arg)
{
	struct twriter *w = arg;
	writer(w->fd, w->who, w->nrec, w->gate);
	return NULL;
}

/* Each process appends from two threads, each through a description of its
 * own (NREC/2 records each): other processes, other descriptors and other
 * threads append meanwhile. */
static int run_append(const char *dir, int nproc, int nrec)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/append.p", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die(path);
	close(fd);
	int gate[2];
	if (pipe(gate) < 0)
		die("pipe");
	for (int p = 0; p < nproc; p++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			close(gate[1]);
			struct twriter w[2];
			pthread_t t;
			for (int i = 0; i < 2; i++) {
				w[i] = (struct twriter){open(path, O_WRONLY | O_APPEND), p * 2 + i, nrec / 2, gate[0]};
				if (w[i].fd < 0) {
					fprintf(stderr, "posix: writer %d: open: %s\n", p * 2 + i, strerror(errno));
					atomic_fetch_add(g_err, 1);
					_exit(0);
				}
			}
			if (pthread_create(&t, NULL, twriter_main, &w[1]) != 0)
				die("pthread_create");
			twriter_main(&w[0]);
			pthread_join(t, NULL);
			_exit(0);
		}
	}
	close(gate[0]);
	close(gate[1]);
	if (reap(nproc))
		fprintf(stderr, "posix: a writer failed\n");
	return check("appends", path, nproc * 2, nrec / 2);
}

static void send_fd(int sock, int fd)
{
	char c = 'f';
	struct iovec v = {&c, 1};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
	struct cmsghdr *c0 = CMSG_FIRSTHDR(&m);
	c0->cmsg_level = SOL_SOCKET;
	c0->cmsg_type = SCM_RIGHTS;
	c0->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c0), &fd, sizeof(int));
	if (sendmsg(sock, &m, 0) != 1)
		die("sendmsg");
}

static int recv_fd(int sock)
{
	char c;
	struct iovec v = {&c, 1};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
	if (recvmsg(sock, &m, 0) != 1)
		die("recvmsg");
	struct cmsghdr *c0 = CMSG_FIRSTHDR(&m);
	if (!c0 || c0->cmsg_type != SCM_RIGHTS)
		die("no descriptor received");
	int fd;
	memcpy(&fd, CMSG_DATA(c0), sizeof(int));
	return fd;
}

/* Parent and child write through one open file description: inherited
 * (fork after the open) or received over a socket (fork before it). */
static int run_offset(const char *dir, int nrec, bool scm)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s.p", dir, scm ? "scm" : "offset");
	int gate[2], sv[2];
	if (pipe(gate) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		die("pipe");
	int fd = -1;
	if (!scm && (fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
		die(path);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(gate[1]);
		/* The child writes through a dup of the descriptor: one
		 * description still. */
		fd = scm ? recv_fd(sv[1]) : dup(fd);
		if (fd < 0)
			die("dup");
		writer(fd, 1, nrec, gate[0]);
		_exit(0);
	}
	if (scm) {
		if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
			die(path);
		send_fd(sv[0], fd);
	}
	close(gate[0]);
	close(gate[1]);
	writer(fd, 0, nrec, -1);
	if (reap(1))
		fprintf(stderr, "posix: the child failed\n");
	close(fd);
	return check(scm ? "SCM_RIGHTS offset" : "shared offset", path, 2, nrec);
}

/* A parent writes NREC records through a descriptor its child reads NREC
 * records through at once (read(2) at the position): every call moves the
 * one offset by 64 bytes, so it ends at 2 * NREC * 64 and the parent's
 * records are all in the file (the file is that long from the start, so
 * that no read meets its end). */
static int run_readers(const char *dir, int nrec)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/readers.p", dir);
	long size = 2L * nrec * REC;
	int gate[2];
	if (pipe(gate) < 0)
		die("pipe");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, size) < 0)
		die(path);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		char c, b[REC];
		close(gate[1]);
		if (read(gate[0], &c, 1) < 0)
			die("gate");
		for (int i = 0; i < nrec; i++) {
			ssize_t n = read(fd, b, REC);
			if (n != REC) {
				if (atomic_fetch_add(g_err, 1) == 0)
					fprintf(stderr, "posix: reader, read %d: returned %zd: %s\n", i, n,
						n < 0 ? strerror(errno) : "short");
				break;
			}
		}
		_exit(0);
	}
	close(gate[0]);
	close(gate[1]);
	writer(fd, 0, nrec, -1);
	if (reap(1))
		fprintf(stderr, "posix: the child failed\n");
	off_t end = lseek(fd, 0, SEEK_CUR);
	close(fd);
	printf("readers: offset at the end %lld (want %ld)\n", (long long)end, size);
	int r = check_size("readers", path, 1, nrec, size);
	return r || end != size;
}

int main(int argc, char **argv)
{
	g_err = mmap(NULL, sizeof(*g_err), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (g_err == MAP_FAILED)
		die("mmap");
	if (argc == 5 && !strcmp(argv[1], "append") && atoi(argv[3]) > 0 && atoi(argv[3]) <= MAXP / 2 &&
	    atoi(argv[4]) % 2 == 0)
		return run_append(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc == 4 && (!strcmp(argv[1], "offset") || !strcmp(argv[1], "scm")))
		return run_offset(argv[2], atoi(argv[3]), !strcmp(argv[1], "scm"));
	if (argc == 4 && !strcmp(argv[1], "readers"))
		return run_readers(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: posix append DIR NPROC NREC | posix offset|scm|readers DIR NREC\n");
	return 2;
}
