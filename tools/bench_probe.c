/*
 * bench_probe.c: what the device itself does with atomio's log writes,
 * measured in the run (`atomio bench`), so that two machines' results can be
 * told apart: the same ratio to unsafe means something else on a disk whose
 * durable 128 KiB write takes 75 us than on one where it takes 400 us.
 *
 * The probe writes as a commit writes the log: O_DIRECT, sequentially,
 * size bytes at a time, each write durable before the next (RWF_DSYNC, or
 * pwrite + fdatasync where the kernel refuses it, as the library does),
 * into a file of its own beside the log, whose blocks were written (and
 * synced) first: atomio's log is overwritten in place in the steady state,
 * so a write there needs no metadata commit.  One write at a time: the
 * latency of one durable log write of that size with nothing of atomio's
 * around it.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef RWF_DSYNC
#define RWF_DSYNC 0x00000002
#endif

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The probe's file: span bytes, written and synced (buffered: then opened
 * again with O_DIRECT for the probe). */
static int probe_file(const char *path, size_t span, char *why, size_t n)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(why, n, "creating %s: %s", path, strerror(errno));
		return -errno;
	}
	char *buf = calloc(1, 1 << 20);
	int r = buf ? 0 : -ENOMEM;
	for (size_t off = 0; r == 0 && off < span;) {
		size_t len = span - off < (1u << 20) ? span - off : (1u << 20);
		ssize_t w = pwrite(fd, buf, len, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			r = w < 0 ? -errno : -EIO;
			snprintf(why, n, "writing %s: %s", path, strerror(-r));
		} else {
			off += (size_t)w;
		}
	}
	if (r == 0 && fsync(fd) < 0) {
		r = -errno;
		snprintf(why, n, "fsync %s: %s", path, strerror(errno));
	}
	free(buf);
	close(fd);
	if (r < 0)
		return r;
	fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, n, "opening %s with O_DIRECT: %s", path, strerror(errno));
		return -errno;
	}
	return fd;
}

int bench_probe_open(struct bench_probe *p, const char *dir, size_t span, char *why, size_t n)
{
	memset(p, 0, sizeof(*p));
	p->fd = -1;
	snprintf(p->path, sizeof(p->path), "%.4000s/device-probe", dir);
	span = span < (1u << 20) ? (1u << 20) : span / 4096 * 4096;
	if (posix_memalign(&p->buf, 4096, span)) {
		p->buf = NULL;
		snprintf(why, n, "out of memory");
		return -ENOMEM;
	}
	/* incompressible bytes, as the benchmark's records */
	uint64_t s = 0x9E3779B97F4A7C15ull;
	for (size_t k = 0; k + 8 <= span; k += 8) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		memcpy((char *)p->buf + k, &s, 8);
	}
	int fd = probe_file(p->path, span, why, n);
	if (fd < 0) {
		free(p->buf);
		p->buf = NULL;
		unlink(p->path);
		return fd;
	}
	p->fd = fd;
	p->span = span;
	return 0;
}

/* Durable writes of size bytes (a multiple of 4096, at most the span),
 * one at a time, sequentially and wrapping, until count are done or secs
 * have passed; their latencies added to lat.  0 or -errno. */
int bench_probe_run(struct bench_probe *p, size_t size, unsigned count, double secs, struct hist *lat,
		    char *why, size_t n)
{
	if (p->fd < 0 || size == 0 || size > p->span || size % 4096) {
		snprintf(why, n, "device probe: no write of %zu bytes", size);
		return -EINVAL;
	}
	uint64_t t_end = now_ns() + (uint64_t)(secs * 1e9);
	for (unsigned i = 0; i < count && now_ns() < t_end; i++) {
		if (p->off + size > p->span)
			p->off = 0;
		struct iovec iov = {.iov_base = p->buf, .iov_len = size};
		uint64_t t0 = now_ns();
		ssize_t w = -1;
		if (!p->no_dsync) {
			w = pwritev2(p->fd, &iov, 1, (off_t)p->off, RWF_DSYNC);
			if (w < 0 && (errno == EOPNOTSUPP || errno == EINVAL)) {
				p->no_dsync = true;
				t0 = now_ns();
			}
		}
		if (p->no_dsync) {
			w = pwrite(p->fd, p->buf, size, (off_t)p->off);
			if (w == (ssize_t)size && fdatasync(p->fd) < 0)
				w = -1;
		}
		if (w != (ssize_t)size) {
			int e = w < 0 ? errno : EIO;
			snprintf(why, n, "device probe: writing %s: %s", p->path, strerror(e));
			return -e;
		}
		hist_add(lat, now_ns() - t0);
		p->off += size;
	}
	return 0;
}

void bench_probe_close(struct bench_probe *p)
{
	if (p->fd >= 0) {
		close(p->fd);
		unlink(p->path);
	}
	free(p->buf);
	p->fd = -1;
	p->buf = NULL;
}
