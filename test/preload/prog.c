/*
 * prog.c: a plain POSIX program (no atomio in it) for the preload crash
 * tests: it writes the workload of rec.h into one file with pwrite, write,
 * pwritev, writev and pwritev2, syncs with fsync and fdatasync, and after
 * every sync prints "synced K" (K writes are durable) on stdout.
 *
 *   prog write PATH SEED N              run writes 0..N-1
 *   prog check PATH SEED ISSUED SYNCED  the oracle (rec_check); exit 1 if it fails
 *
 *   prog checkg PATH SEED N ISSUED SYNCED  the same for group mode (rec_check_group)
 *
 * ISSUED -1: as many as a run killed after printing "synced SYNCED" can have
 * issued, up to and including the write whose sync comes next.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rec.h"

static int die(const char *what)
{
	fprintf(stderr, "prog: %s: %s\n", what, strerror(errno));
	exit(2);
}

static int run(const char *path, uint64_t seed, int n)
{
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0)
		die("open");
	if (ftruncate(fd, (off_t)NSLOT * REC) < 0)
		die("ftruncate");
	uint32_t ver[NSLOT] = {0};
	uint8_t b[REC];
	for (int i = 0; i < n; i++) {
		struct rec_op o = rec_op(seed, i);
		rec_fill(b, seed, o.slot, ++ver[o.slot]);
		off_t off = (off_t)o.slot * REC;
		size_t cut = 1 + (size_t)(i * 977) % (REC - 1);
		struct iovec v[2] = {{b, cut}, {b + cut, REC - cut}};
		ssize_t w;
		switch (o.call) {
		case 0: w = pwrite(fd, b, REC, off); break;
		case 1: w = lseek(fd, off, SEEK_SET) == off ? write(fd, b, REC) : -1; break;
		case 2: w = pwritev(fd, v, 2, off); break;
		case 3: w = lseek(fd, off, SEEK_SET) == off ? writev(fd, v, 2) : -1; break;
		default: w = pwritev2(fd, v, 2, off, 0); break;
		}
		if (w != REC)
			die("write");
		if (o.sync && (o.sync == 1 ? fsync(fd) : fdatasync(fd)) < 0)
			die("sync");
		if (o.sync) {
			printf("synced %d\n", i + 1);
			fflush(stdout);
		}
	}
	if (fsync(fd) < 0)
		die("fsync");
	printf("synced %d\ndone\n", n);
	fflush(stdout);
	return close(fd) < 0 ? die("close") : 0;
}

static int check(const char *path, uint64_t seed, int n, int issued, int synced)
{
	static uint8_t file[NSLOT * REC];
	size_t len = 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0 && errno != ENOENT)
		die("open");
	if (fd >= 0) {
		ssize_t r;
		while (len < sizeof(file) && (r = read(fd, file + len, sizeof(file) - len)) > 0)
			len += (size_t)r;
		close(fd);
	}
	if (issued < 0) {
		issued = synced;
		while (!rec_op(seed, issued++).sync)
			;
	}
	char why[256];
	if ((n ? rec_check_group(file, len, seed, n, issued, synced, why)
	       : rec_check(file, len, seed, issued, synced, why)) < 0) {
		fprintf(stderr, "prog check: %s: %s\n", path, why);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "write"))
		return run(argv[2], strtoull(argv[3], NULL, 0), atoi(argv[4]));
	if (argc == 6 && !strcmp(argv[1], "check"))
		return check(argv[2], strtoull(argv[3], NULL, 0), 0, atoi(argv[4]), atoi(argv[5]));
	if (argc == 7 && !strcmp(argv[1], "checkg"))
		return check(argv[2], strtoull(argv[3], NULL, 0), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
	fprintf(stderr, "usage: prog write PATH SEED N | prog check PATH SEED ISSUED SYNCED | "
			"prog checkg PATH SEED N ISSUED SYNCED\n");
	return 2;
}
