/*
 * lazy.c: two processes and the preload's lazy groups (test/t_preload_lazy.sh).
 * A plain POSIX program: it gets atomio only by running under the preload.
 *
 *   lazy write DIR N      writes N records of 4 KiB to DIR/a.p (each a pwrite
 *                         that extends the file, no sync), prints "written",
 *                         then waits for a signal (the script kills it)
 *   lazy read DIR N SYNC  opens DIR/a.p read-only, checks the N records at
 *                         once (pread, read at the position, fstat, stat by
 *                         path, lseek(SEEK_END)), then with SYNC=1 fsyncs its
 *                         descriptor (every process's groups of the file
 *                         durable) and prints "synced"; then, at each line of
 *                         its standard input, checks again and prints
 *                         "reread ok"; exits at the end of its input
 *   lazy check DIR N      the records after recovery: exit 0 when all N are
 *                         there, else prints how many are and exits 1
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REC 4096

static char path[4096];

static void fill(char *b, int i)
{
	for (int k = 0; k < REC; k++)
		b[k] = (char)(i * 31 + k * 7 + 1);
	memcpy(b, &i, sizeof(i));
}

/* The number of leading records of fd that are whole and right (pread). */
static int good_records(int fd, int n)
{
	char want[REC], got[REC];
	for (int i = 0; i < n; i++) {
		fill(want, i);
		if (pread(fd, got, REC, (off_t)i * REC) != REC || memcmp(want, got, REC))
			return i;
	}
	return n;
}

/* Every view of the file a reader has: 0 when each shows the n records. */
static int check_views(int fd, int n)
{
	int g = good_records(fd, n);
	if (g != n) {
		fprintf(stderr, "lazy: pread: %d of %d records\n", g, n);
		return 1;
	}
	char want[REC], got[REC];
	if (lseek(fd, 0, SEEK_SET) != 0)
		return 2;
	for (int i = 0; i < n; i++) {
		fill(want, i);
		if (read(fd, got, REC) != REC || memcmp(want, got, REC)) {
			fprintf(stderr, "lazy: read at the position: record %d wrong\n", i);
			return 3;
		}
	}
	struct stat a, b;
	off_t end = lseek(fd, 0, SEEK_END);
	if (fstat(fd, &a) != 0 || stat(path, &b) != 0 || a.st_size != (off_t)n * REC || b.st_size != a.st_size ||
	    end != a.st_size) {
		fprintf(stderr, "lazy: sizes: fstat %lld, stat %lld, SEEK_END %lld, want %lld\n", (long long)a.st_size,
			(long long)b.st_size, (long long)end, (long long)n * REC);
		return 4;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	snprintf(path, sizeof(path), "%s/a.p", argv[2]);
	int n = atoi(argv[3]);
	if (!strcmp(argv[1], "write")) {
		int fd = open(path, O_RDWR | O_CREAT, 0600);
		char b[REC];
		for (int i = 0; fd >= 0 && i < n; i++) {
			fill(b, i);
			if (pwrite(fd, b, REC, (off_t)i * REC) != REC) {
				perror("lazy: pwrite");
				return 1;
			}
		}
		if (fd < 0)
			return 1;
		printf("written\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	if (!strcmp(argv[1], "read") && argc >= 5) {
		int fd = open(path, O_RDONLY);
		if (fd < 0 || check_views(fd, n))
			return 1;
		printf("read ok\n");
		if (atoi(argv[4])) {
			if (fsync(fd) != 0) {
				perror("lazy: fsync");
				return 1;
			}
			printf("synced\n");
		}
		fflush(stdout);
		char line[64];
		while (fgets(line, sizeof(line), stdin)) {
			if (check_views(fd, n))
				return 1;
			printf("reread ok\n");
			fflush(stdout);
		}
		return 0;
	}
	if (!strcmp(argv[1], "check")) {
		int fd = open(path, O_RDONLY);
		int g = fd < 0 ? 0 : good_records(fd, n);
		if (g == n)
			return 0;
		printf("%d of %d records\n", g, n);
		return 1;
	}
	return 2;
}
