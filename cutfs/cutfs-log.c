/*
 * cutfs-log: an atomio workload with an oracle, for power cuts on cutfs.
 *
 *   cutfs-log write DIR N      commit groups 1..N to DIR/data through the
 *                              store DIR/log, printing each group's number
 *                              on stdout once its commit has returned
 *   cutfs-log check DIR ACKED  open the store (recovery) and check that
 *                              DIR/data holds exactly groups 1..k, for k =
 *                              ACKED or ACKED + 1 (one commit may have been
 *                              durable and not yet acknowledged)
 *
 * Group g writes three ranges of a 256 KiB file: an unaligned one of
 * 1..9 KiB, a whole 4 KiB block and a 16 KiB run, every byte a function of
 * (g, offset), so that a torn or half-applied group shows.  The log is small
 * (256 KiB of records) so that it wraps and checkpoints write the file home
 * while the power may go.  Exit 0 on success, 1 on a mismatch or error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomio.h"

#define FILE_SIZE (256u << 10)
#define MAXR 3

struct range {
	uint64_t off;
	size_t len;
};

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static unsigned char byte_of(uint64_t g, uint64_t off) { return (unsigned char)mix(g * 0x100000001b3ull + off); }

static void group_ranges(uint64_t g, struct range r[MAXR])
{
	uint64_t h = mix(g);
	r[0].len = 1024 + h % 8192;
	r[0].off = (h >> 16) % (FILE_SIZE - r[0].len);
	r[1].len = 4096;
	r[1].off = ((h >> 32) % (FILE_SIZE / 4096)) * 4096;
	r[2].len = 16384;
	r[2].off = ((h >> 40) % (FILE_SIZE / 4096 - 3)) * 4096;
}

static void apply(unsigned char *img, uint64_t *size, uint64_t g)
{
	struct range r[MAXR];
	group_ranges(g, r);
	for (int i = 0; i < MAXR; i++) {
		for (size_t j = 0; j < r[i].len; j++)
			img[r[i].off + j] = byte_of(g, r[i].off + j);
		if (r[i].off + r[i].len > *size)
			*size = r[i].off + r[i].len;
	}
}

static int open_store(const char *dir, atomio **st, int *file)
{
	char log[4096], data[4096], err[256] = "";
	snprintf(log, sizeof(log), "%s/log", dir);
	snprintf(data, sizeof(data), "%s/data", dir);
	/* ATOMIO_FORCE_PATHS: a FUSE filesystem has no f_fsid and gets a new
	 * device number at a mount when another mount took the last one, so
	 * the identity check would call the (same) data file replaced */
	struct atomio_options o = {.log_size = 256u << 10, .flags = ATOMIO_CREATE | ATOMIO_FORCE_PATHS, .errbuf = err,
				   .errbuf_size = sizeof(err)};
	int r = atomio_open(log, &o, st);
	if (r < 0) {
		fprintf(stderr, "cutfs-log: atomio_open %s: %s %s\n", log, atomio_strerror(r), err);
		return r;
	}
	*file = atomio_file_open(*st, data, O_CREAT, 0644);
	if (*file < 0) {
		fprintf(stderr, "cutfs-log: atomio_file_open %s: %s\n", data, atomio_strerror(*file));
		return *file;
	}
	return 0;
}

static int do_write(const char *dir, uint64_t n)
{
	atomio *st;
	int f;
	if (open_store(dir, &st, &f))
		return 1;
	unsigned char *buf = malloc(16384);
	if (!buf)
		return 1;
	for (uint64_t g = 1; g <= n; g++) {
		struct range r[MAXR];
		atomio_tx *tx;
		group_ranges(g, r);
		int e = atomio_tx_begin(st, &tx);
		for (int i = 0; i < MAXR && !e; i++) {
			for (size_t j = 0; j < r[i].len; j++)
				buf[j] = byte_of(g, r[i].off + j);
			e = atomio_tx_write(tx, f, buf, r[i].len, (off_t)r[i].off);
		}
		if (!e)
			e = atomio_tx_commit(tx);
		if (e) {
			fprintf(stderr, "cutfs-log: group %" PRIu64 ": %s\n", g, atomio_strerror(e));
			return 1;
		}
		printf("%" PRIu64 "\n", g);
		fflush(stdout);
	}
	free(buf);
	return atomio_close(st) ? 1 : 0;
}

static int do_check(const char *dir, uint64_t acked)
{
	atomio *st;
	int f;
	if (open_store(dir, &st, &f))
		return 1;
	unsigned char *got = calloc(1, FILE_SIZE), *img = calloc(1, FILE_SIZE);
	if (!got || !img)
		return 1;
	ssize_t n = atomio_pread(st, f, got, FILE_SIZE, 0);
	if (n < 0) {
		fprintf(stderr, "cutfs-log: atomio_pread: %s\n", atomio_strerror((int)n));
		return 1;
	}
	uint64_t size = 0;
	for (uint64_t g = 1; g <= acked; g++)
		apply(img, &size, g);
	for (int extra = 0; extra < 2; extra++) {
		if ((uint64_t)n == size && !memcmp(got, img, size)) {
			printf("ok: groups 1..%" PRIu64 " (acknowledged %" PRIu64 ")\n", acked + (uint64_t)extra, acked);
			return atomio_close(st) ? 1 : 0;
		}
		apply(img, &size, acked + 1);
	}
	/* say where it differs from the acknowledged state */
	memset(img, 0, FILE_SIZE);
	size = 0;
	for (uint64_t g = 1; g <= acked; g++)
		apply(img, &size, g);
	size_t i = 0;
	while (i < (size_t)n && i < size && got[i] == img[i])
		i++;
	fprintf(stderr, "cutfs-log: MISMATCH: %zd bytes read, %" PRIu64 " expected after %" PRIu64
		" groups; first difference at %zu\n", n, size, acked, i);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "write"))
		return do_write(argv[2], strtoull(argv[3], NULL, 0));
	if (argc == 4 && !strcmp(argv[1], "check"))
		return do_check(argv[2], strtoull(argv[3], NULL, 0));
	fprintf(stderr, "usage: cutfs-log write DIR N | check DIR ACKED\n");
	return 2;
}
