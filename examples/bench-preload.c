/*
 * bench-preload.c: a plain POSIX program for `make bench-preload`
 * (scripts/bench-preload.sh), which runs it without the preload library, with
 * it on a file that does not match ATOMIO_FILES (the pass-through cost) and
 * on a protected file, interleaved.
 *
 *   bench-preload PATH BLOCK COUNT SYNC_EVERY   pwrite COUNT blocks of BLOCK
 *       bytes at random block offsets of a 64 MiB file, fdatasync every
 *       SYNC_EVERY writes (0: only at the end); prints "writes/s N"
 *   bench-preload PATH small COUNT              COUNT 64-byte write() calls
 *       (no sync): the per-call cost; prints "calls/s N"
 *   bench-preload PATH mix P COUNT SYNC_EVERY   P processes, each with the
 *       file opened on its own, COUNT times: pread an 8 KiB page at a random page of a 64 MiB file and
 *       pwrite it back changed, fdatasync every SYNC_EVERY writes (a
 *       database's backends evicting pages); prints "ops/s N cpu_us/op N"
 *       (the children's user+system CPU per read+write pair)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* One process of mode mix: count read-change-write pairs. */
static int mix_child(const char *path, int k, long count, long every)
{
	enum { PAGE = 8192 };
	int fd = open(path, O_RDWR); /* its own, as a database's backends open theirs */
	if (fd < 0) {
		perror("open");
		return 1;
	}
	static char b[PAGE];
	uint64_t s = 88172645463325252ull + (uint64_t)k * 7919;
	long npages = (64l << 20) / PAGE;
	for (long i = 0; i < count; i++) {
		off_t off = (off_t)(next(&s) % (uint64_t)npages) * PAGE;
		if (pread(fd, b, PAGE, off) != PAGE) {
			perror("pread");
			return 1;
		}
		/* Half the page changed, half left as read (often zeros). */
		for (int j = 0; j < PAGE / 2; j += 8)
			memcpy(b + j, &s, 8), next(&s);
		if (pwrite(fd, b, PAGE, off) != PAGE) {
			perror("pwrite");
			return 1;
		}
		if (every && (i + 1) % every == 0 && fdatasync(fd) < 0) {
			perror("fdatasync");
			return 1;
		}
	}
	return close(fd) < 0;
}

static int mix(const char *path, int fd, int procs, long count, long every)
{
	if (ftruncate(fd, 64l << 20) < 0) {
		perror("ftruncate");
		return 1;
	}
	double t0 = now();
	for (int k = 0; k < procs; k++) {
		pid_t p = fork();
		if (p < 0) {
			perror("fork");
			return 1;
		}
		if (p == 0)
			_exit(mix_child(path, k, count, every));
	}
	int bad = 0, w;
	for (int k = 0; k < procs; k++)
		if (wait(&w) < 0 || !WIFEXITED(w) || WEXITSTATUS(w))
			bad = 1;
	double t = now() - t0;
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
	printf("ops/s %.0f cpu_us/op %.1f\n", (double)procs * (double)count / t, cpu / ((double)procs * (double)count));
	return bad;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: bench-preload PATH BLOCK COUNT SYNC_EVERY | PATH small COUNT\n");
		return 2;
	}
	int fd = open(argv[1], O_RDWR | O_CREAT, 0644);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	if (!strcmp(argv[2], "mix") && argc > 5)
		return mix(argv[1], fd, atoi(argv[3]), atol(argv[4]), atol(argv[5]));
	long count = atol(argv[3]);
	if (!strcmp(argv[2], "small")) {
		char b[64];
		memset(b, 'x', sizeof(b));
		double t0 = now();
		for (long i = 0; i < count; i++)
			if (write(fd, b, sizeof(b)) != (ssize_t)sizeof(b)) {
				perror("write");
				return 1;
			}
		printf("calls/s %.0f\n", (double)count / (now() - t0));
		return 0;
	}
	size_t block = (size_t)atol(argv[2]);
	long every = argc > 4 ? atol(argv[4]) : 0;
	long nblocks = (64l << 20) / (long)block;
	char *b = malloc(block);
	/* Half compressible, as database pages often are. */
	for (size_t i = 0; i < block; i++)
		b[i] = i < block / 2 ? (char)(rand() & 0xff) : 0;
	uint64_t s = 88172645463325252ull;
	double t0 = now();
	for (long i = 0; i < count; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		off_t off = (off_t)(s % (uint64_t)nblocks) * (off_t)block;
		if (pwrite(fd, b, block, off) != (ssize_t)block) {
			perror("pwrite");
			return 1;
		}
		if (every && (i + 1) % every == 0 && fdatasync(fd) < 0) {
			perror("fdatasync");
			return 1;
		}
	}
	if (fdatasync(fd) < 0) {
		perror("fdatasync");
		return 1;
	}
	printf("writes/s %.0f\n", (double)count / (now() - t0));
	return close(fd) < 0;
}
