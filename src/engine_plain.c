/*
 * engine_plain.c: the plain backend (engine.h): one pwritev2 per write, the
 * log write with RWF_DSYNC.  The io_uring backend falls back to these.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* Write len bytes at off of the log, durable on return: O_DIRECT +
 * RWF_DSYNC is one device wait (a FUA write, or write + cache flush) and,
 * since the log's blocks are preallocated and written, no journal commit. */
static int plain_log_write(atomio *st, struct logslot *ls, const void *buf, size_t len, uint64_t off)
{
	/* RWF_DSYNC, or write + fdatasync where it is refused (sys.c) */
	return sys_pwrite_durable(st->log_fd, buf, len, (off_t)off);
}

int engine_atomic_result(atomio *st, ssize_t n, size_t len)
{
	if (n < 0)
		return (int)n;
	if ((size_t)n != len)
		return -EIO;
	atomic_fetch_add(&st->stats.bytes_home, len);
	return 0;
}

static int plain_atomic_write(atomio *st, struct afile *f, const void *buf, size_t len, uint64_t off)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	/* Not split, not retried after a partial write: an atomic write is
	 * whole or refused. */
	ssize_t n;
	do
		n = atomio_sys->pwritev(f->fd, &iov, 1, (off_t)off, RWF_ATOMIC | RWF_DSYNC);
	while (n == -EINTR || n == -EAGAIN);
	return engine_atomic_result(st, n, len);
}

int engine_plain_seg(atomio *st, struct afile *f, const struct seg *s)
{
	if (s->kind != SEG_WRITE)
		return sys_ftruncate_full(f->hfd, (off_t)s->off);
	int r = sys_pwrite_full(f->hfd, s->src, s->len, (off_t)s->off, 0);
	if (r == 0)
		atomic_fetch_add(&st->stats.bytes_home, s->len);
	return r;
}

void engine_mark_written(atomio *st, atomio_tx *first, uint32_t n)
{
	/* Also after a failure: some of the writes may have been done. */
	uint32_t i = 0;
	for (atomio_tx *t = first; i < n; t = t->qnext, i++)
		for (uint32_t j = 0; j < t->nsegs; j++) {
			struct afile *f = file_get(st, (int)t->segs[j].file);
			if (!f)
				continue;
			if (t->segs[j].kind != SEG_WRITE)
				__atomic_store_n(&f->resized, true, __ATOMIC_RELEASE);
			__atomic_store_n(&f->dirty, true, __ATOMIC_RELEASE);
		}
}

/* Apply a batch's groups in place, in order.  Home stage held, lock not
 * held.  No flush: the records are durable, a crash from here on is
 * repaired by replay, and the checkpoint syncs the files. */
static int plain_home(atomio *st, atomio_tx *first, uint32_t n)
{
	int err = 0;
	uint32_t i = 0;
	for (atomio_tx *t = first; i < n && !err; t = t->qnext, i++)
		for (uint32_t j = 0; j < t->nsegs && !err; j++) {
			struct afile *f = file_get(st, (int)t->segs[j].file);
			err = f ? engine_plain_seg(st, f, &t->segs[j]) : -EBADF;
		}
	engine_mark_written(st, first, n);
	return err;
}

static void plain_close(atomio *st) {}

const struct engine_ops engine_plain = {
	.name = "plain",
	.log_write = plain_log_write,
	.atomic_write = plain_atomic_write,
	.home = plain_home,
	.close = plain_close,
};
