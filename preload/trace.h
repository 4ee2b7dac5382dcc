/*
 * trace.h: the record format of ATOMIO_PRELOAD_TRACE (real.c writes it,
 * test/sqlite/t_sqlite_sim.c too, with tr_write; test/support/trace_replay.c
 * replays it into the crash simulator).  Native byte
 * order: a trace is read on the machine that wrote it.
 *
 * Each record: struct tr_hdr, then pathlen bytes of path (NUL-terminated;
 * TR_RENAME: "from\0to\0"), then datalen bytes of data (TR_WRITE).
 *   TR_OPEN      fd = the descriptor opened, flags = open flags, a = mode
 *   TR_CLOSE     fd
 *   TR_WRITE     fd, flags = RWF_* flags, a = offset, data
 *   TR_TRUNC     fd, a = new size
 *   TR_FSYNC, TR_FDATASYNC   fd
 *   TR_RENAME    (RENAME_NOREPLACE), TR_UNLINK: path
 *   TR_PWRITE    the program's write returned (a = bytes)
 *   TR_PSYNC     the program's sync returned (or an O_SYNC/O_DSYNC write's)
 *   TR_FALLOC    fd, flags = mode, a = offset, b = length (a new log's blocks)
 *   TR_MARK      what a test program was told, its own meaning in a and b
 *                (test/sqlite/t_sqlite_sim.c: a transaction's COMMIT returned)
 */
#ifndef ATOMIO_PRELOAD_TRACE_H
#define ATOMIO_PRELOAD_TRACE_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/uio.h>

enum { TR_OPEN = 1, TR_CLOSE, TR_WRITE, TR_TRUNC, TR_FSYNC, TR_FDATASYNC, TR_RENAME,
       TR_UNLINK, TR_PWRITE, TR_PSYNC, TR_FALLOC, TR_MARK };

struct tr_hdr {
	uint32_t kind;
	int32_t fd;
	int32_t flags;
	uint32_t pathlen;
	uint64_t a, b;
	uint64_t datalen;
};
_Static_assert(sizeof(struct tr_hdr) == 40, "trace record header");

/* Appends one record to fd through wr (write(2), or the preload's real
 * one); the caller serialises records.  A failed write aborts: a trace with
 * a hole would make the test that replays it lie. */
static inline void tr_write_all(ssize_t (*wr)(int, const void *, size_t), int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = wr(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			abort();
		c += w;
		n -= (size_t)w;
	}
}

static inline void tr_write(ssize_t (*wr)(int, const void *, size_t), int fd, uint32_t kind, int rfd,
			    int flags, uint64_t a, uint64_t b, const char *path, size_t pathlen,
			    const struct iovec *iov, int iovcnt)
{
	struct tr_hdr h = {.kind = kind, .fd = rfd, .flags = flags, .pathlen = (uint32_t)pathlen,
			   .a = a, .b = b};
	for (int i = 0; i < iovcnt; i++)
		h.datalen += iov[i].iov_len;
	tr_write_all(wr, fd, &h, sizeof(h));
	if (pathlen)
		tr_write_all(wr, fd, path, pathlen);
	for (int i = 0; i < iovcnt; i++)
		tr_write_all(wr, fd, iov[i].iov_base, iov[i].iov_len);
}

#endif
