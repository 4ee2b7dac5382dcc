/*
 * engine_plain.c: the plain backend (engine.h): one pwritev2 per write, the
 * log write with RWF_DSYNC.  The io_uring backend falls back to these.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "shm.h"

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
	atomic_fetch_add(&st->sh->stats.bytes_home, len);
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

/* Is s's data where this process's O_DIRECT home descriptor of f can write
 * it from?  The committing process aligned it in the arena for the file as
 * IT opened it (commit.c, data_align): one that writes by the catalog's id,
 * the file opened buffered for it, aligns it for buffered I/O only. */
bool engine_seg_aligned(const struct afile *f, const struct seg *s)
{
	return !f->direct_home || !f->dio_mem_align || !((uintptr_t)s->src % f->dio_mem_align);
}

int engine_plain_seg(atomio *st, struct afile *f, const struct seg *s)
{
	if (s->kind != SEG_WRITE)
		return sys_ftruncate_full(f->hfd, (off_t)s->off);
	int r;
	if (engine_seg_aligned(f, s)) {
		r = sys_pwrite_full(f->hfd, s->src, s->len, (off_t)s->off, 0);
	} else {
		/* through an aligned copy (rare: see engine_seg_aligned) */
		void *b = NULL;
		r = posix_memalign(&b, f->dio_mem_align > 4096 ? f->dio_mem_align : 4096,
				   s->len ? s->len : 1) ? -ENOMEM : 0;
		if (r == 0) {
			memcpy(b, s->src, s->len);
			r = sys_pwrite_full(f->hfd, b, s->len, (off_t)s->off, 0);
		}
		free(b);
	}
	if (r == 0)
		atomic_fetch_add(&st->sh->stats.bytes_home, s->len);
	return r;
}

void engine_mark_written(atomio *st, const struct grp *g, uint32_t n)
{
	/* Also after a failure: some of the writes may have been done.  The
	 * flags are the store's (shm.h): a checkpoint in any process syncs. */
	struct shm *sh = st->sh;
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < g[i].nsegs; j++) {
			uint32_t id = g[i].segs[j].file;
			if (id >= MAX_FILES)
				continue;
			if (g[i].segs[j].kind != SEG_WRITE)
				atomic_fetch_or(&sh->fresized[id / 64], 1ull << (id % 64));
			atomic_fetch_or(&sh->fdirty[id / 64], 1ull << (id % 64));
		}
}

/* Apply a batch's groups in place, in order.  Home stage held, mutex not
 * held.  No flush: the records are durable, a crash from here on is
 * repaired by replay, and the checkpoint syncs the files. */
static int plain_home(atomio *st, const struct grp *g, uint32_t n)
{
	ASSERT_HOME(st);
	int err = 0;
	for (uint32_t i = 0; i < n && !err; i++)
		for (uint32_t j = 0; j < g[i].nsegs && !err; j++) {
			struct afile *f = file_get_any(st, g[i].segs[j].file, &err);
			if (f)
				err = engine_plain_seg(st, f, &g[i].segs[j]);
		}
	engine_mark_written(st, g, n);
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
