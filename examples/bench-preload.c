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
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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
