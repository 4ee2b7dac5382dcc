/*
 * engine.c: how a batch's bytes reach the files.  Two engines do the same
 * writes, with the same durability, through the ops table:
 *
 *  - plain: one pwritev2 per write (the log write with RWF_DSYNC);
 *  - io_uring (liburing): the log write, the kernel fast path's atomic write,
 *    and the O_DIRECT home writes of a batch are queued on a ring and
 *    submitted with one io_uring_enter per stage; a batch's O_DIRECT home
 *    writes then run in parallel on the device instead of one after another.
 *    Writes that overlap inside a batch are split into successive waves, so
 *    the later one always lands last.  Each log write slot (commit.c) and
 *    the home stage have a ring of their own, so a ring needs no lock.
 *
 * ATOMIO_ENGINE_URING puts every write through rings.  The default (AUTO)
 * uses a ring only where it pays: the parallel O_DIRECT home writes of
 * ATOMIO_DIRECT_HOME stores, with the default ops table (engine_open says
 * why not the log write).  Anything that fails in a ring (setup refused with
 * EPERM or ENOSYS, a submission refused, a request the kernel cannot do
 * asynchronously) makes that write go the plain way instead, so io_uring can
 * never cost a store its durability or availability.
 *
 * HOME WRITES OF O_DIRECT FILES.  A home write needs no flush (the record is
 * durable and a checkpoint syncs the files), but an O_DIRECT write still waits
 * for the device, and a commit must not return before its home write is
 * issued: "after atomio_tx_commit returns 0, any read of the file returns the
 * new data".  Measured on ext4/virtio (examples/bench-engine.c), that wait
 * made an O_DIRECT atomio_pwrite cost a log write plus a device write.  So by
 * default an O_DIRECT file's home writes go through a second, buffered
 * descriptor of the same file (its "twin"): the commit returns once the data
 * is in the page cache.  Reads stay coherent: Linux writes dirty page-cache
 * pages of a range back before an O_DIRECT read of that range returns
 * (filemap_write_and_wait_range in the generic and iomap direct-I/O paths),
 * so a direct reader sees the new data, and a buffered or mmap reader reads
 * the page cache itself.  An O_DIRECT write (the fast path) invalidates the
 * range's cached pages after writing them back.  The checkpoint fdatasyncs
 * the file and drops its now clean pages (POSIX_FADV_DONTNEED), so the page
 * cache holds at most one log's worth of an O_DIRECT file.  ATOMIO_DIRECT_HOME
 * keeps the old behaviour: home writes with O_DIRECT, on the commit's path.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

#define RING_LOG 8u
#define RING_HOME 64u   /* most O_DIRECT home writes in flight at once */
#define NOT_RUN INT_MIN /* a ring request never submitted */

struct home_op {
	int fd;
	const void *buf;
	size_t len;
	uint64_t off;
};

/* --- rings ------------------------------------------------------------------ */

static struct io_uring *ring_new(unsigned entries)
{
	struct io_uring *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	if (sys_uring_init(entries, r) < 0) {
		free(r);
		return NULL;
	}
	return r;
}

static void ring_free(struct io_uring **rp)
{
	if (*rp) {
		sys_uring_exit(*rp);
		free(*rp);
		*rp = NULL;
	}
}

int engine_open(atomio *st, uint32_t flags)
{
	st->engine = ATOMIO_ENGINE_PLAIN;
	bool uring = flags & ATOMIO_ENGINE_URING;
	/* AUTO: rings only with the real system calls (under a test backend a
	 * ring would write past its pwritev, unseen by a crash simulator), and
	 * only where they pay: a batch's O_DIRECT home writes, run in parallel.
	 * Not for the log write, which the commit waits for anyway: measured
	 * here, an O_DIRECT + RWF_DSYNC write through the ring was no faster
	 * alone and slower from 8 threads (its completion, which must sync,
	 * is handed to a kernel worker), and a process killed with a log write
	 * in flight keeps the store's lock for some milliseconds while the
	 * kernel tears its ring down. */
	bool home = uring || (!(flags & ATOMIO_ENGINE_PLAIN) && atomio_sys == &atomio_sys_linux);
	if (uring) {
		for (unsigned i = 0; i < LOG_SLOTS; i++) {
			st->slots[i].ring = ring_new(RING_LOG);
			if (!st->slots[i].ring) {
				/* EPERM (disabled by sysctl or seccomp), ENOSYS, ...: plain */
				for (unsigned j = 0; j < i; j++)
					ring_free(&st->slots[j].ring);
				return 0;
			}
		}
		st->engine = ATOMIO_ENGINE_URING;
	}
	if (home && (flags & ATOMIO_DIRECT_HOME)) {
		st->ring_home = ring_new(RING_HOME);
		st->hops = calloc(RING_HOME, sizeof(*st->hops));
		if (!st->ring_home || !st->hops) {
			/* the home stage writes the plain way */
			ring_free(&st->ring_home);
			free(st->hops);
			st->hops = NULL;
		} else {
			st->engine = ATOMIO_ENGINE_URING;
		}
	}
	return 0;
}

void engine_close(atomio *st)
{
	for (unsigned i = 0; i < LOG_SLOTS; i++) {
		ring_free(&st->slots[i].ring);
		free(st->slots[i].stage);
		st->slots[i].stage = NULL;
		st->slots[i].cap = 0;
	}
	ring_free(&st->ring_home);
	free(st->hops);
	st->hops = NULL;
}

static void ring_reap(struct io_uring *ring, int *res, unsigned n, unsigned *got)
{
	struct io_uring_cqe *cqe;
	unsigned head, cnt = 0;
	io_uring_for_each_cqe(ring, head, cqe)
	{
		if (cqe->user_data < n && res[cqe->user_data] == NOT_RUN) {
			res[cqe->user_data] = cqe->res;
			(*got)++;
		}
		cnt++;
	}
	io_uring_cq_advance(ring, cnt);
}

/* Submit the n prepared requests (user_data 0..n-1; res[] preset to NOT_RUN)
 * and wait for all that were submitted.  When the ring fails with nothing in
 * flight, it is torn down (*ringp = NULL: this role continues the plain way)
 * and the requests left NOT_RUN are the caller's to do. */
static void ring_run(atomio *st, struct io_uring **ringp, unsigned n, int *res)
{
	struct io_uring *ring = *ringp;
	unsigned submitted = 0, got = 0, idle = 0;
	for (;;) {
		ring_reap(ring, res, n, &got);
		if (got == n)
			return;
		int r = sys_uring_enter(ring, n - got);
		if (r > 0) {
			submitted += (unsigned)r;
			idle = 0;
			continue;
		}
		if (r == 0 || r == -EINTR || r == -EAGAIN || r == -EBUSY) {
			/* Interrupted, or short of resources until completions
			 * are reaped: try again, but not forever with nothing
			 * in flight. */
			if (submitted > got || ++idle < 1000)
				continue;
		}
		if (submitted > got) {
			/* Requests in flight own their buffers: keep waiting. */
			continue;
		}
		/* Nothing in flight: unsubmitted entries die with the ring. */
		ring_free(ringp);
		__atomic_store_n(&st->engine, ATOMIO_ENGINE_PLAIN, __ATOMIC_RELAXED);
		return;
	}
}

/* --- the log write ---------------------------------------------------------- */

static int plain_log_write(atomio *st, const void *buf, size_t len, uint64_t off)
{
	/* RWF_DSYNC, or write + fdatasync where it is refused (sys.c) */
	return sys_pwrite_durable(st->log_fd, buf, len, (off_t)off);
}

/* Write len bytes at off of the log, durable on return: O_DIRECT +
 * RWF_DSYNC is one device wait (a FUA write, or write + cache flush) and,
 * since the log's blocks are preallocated and written, no journal commit. */
int engine_log_write(atomio *st, struct logslot *ls, const void *buf, size_t len, uint64_t off)
{
	if (!ls->ring)
		return plain_log_write(st, buf, len, off);
	struct io_uring_sqe *sqe = io_uring_get_sqe(ls->ring);
	if (!sqe)
		return plain_log_write(st, buf, len, off);
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	io_uring_prep_writev2(sqe, st->log_fd, &iov, 1, off, RWF_DSYNC);
	sqe->user_data = 0;
	int res = NOT_RUN;
	ring_run(st, &ls->ring, 1, &res);
	if (res == (int)len)
		return 0;
	if (res >= 0) {
		/* Short: the part written is durable (RWF_DSYNC); finish it. */
		return plain_log_write(st, (const char *)buf + res, len - (size_t)res, off + (uint64_t)res);
	}
	if (res == NOT_RUN || res == -EAGAIN || res == -EINTR || res == -EOPNOTSUPP)
		return plain_log_write(st, buf, len, off);
	return res;
}

/* --- the kernel fast path ------------------------------------------------------ */

/* One RWF_ATOMIC | RWF_DSYNC write: all of it reaches the media or none of
 * it, and it is durable on return.  -EOPNOTSUPP / -EINVAL: refused before
 * anything was written (the caller logs the group instead). */
int engine_fast_write(atomio *st, struct afile *f, const void *buf, size_t len, uint64_t off)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	ssize_t n = NOT_RUN;
	/* No log write is in flight (commit.c waits for them): slot 0's ring
	 * is free. */
	struct logslot *ls = &st->slots[0];
	struct io_uring_sqe *sqe = ls->ring ? io_uring_get_sqe(ls->ring) : NULL;
	if (sqe) {
		io_uring_prep_writev2(sqe, f->fd, &iov, 1, off, RWF_ATOMIC | RWF_DSYNC);
		sqe->user_data = 0;
		int res = NOT_RUN;
		ring_run(st, &ls->ring, 1, &res);
		n = res;
	}
	/* Not split, not retried after a partial write: an atomic write is
	 * whole or refused. */
	while (n == NOT_RUN || n == -EINTR || n == -EAGAIN)
		n = atomio_sys->pwritev(f->fd, &iov, 1, (off_t)off, RWF_ATOMIC | RWF_DSYNC);
	if (n < 0)
		return (int)n;
	if ((size_t)n != len)
		return -EIO;
	atomic_fetch_add(&st->stats.bytes_home, len);
	return 0;
}

/* --- home writes -------------------------------------------------------------- */

struct wave {
	unsigned n;
	int res[RING_HOME];
};

/* Run the queued O_DIRECT home writes; finish whatever the ring did not. */
static int wave_flush(atomio *st, struct wave *w)
{
	if (!w->n)
		return 0;
	if (st->ring_home)
		ring_run(st, &st->ring_home, w->n, w->res);
	int err = 0;
	for (unsigned i = 0; i < w->n; i++) {
		const struct home_op *op = &st->hops[i];
		int res = w->res[i];
		int r = 0;
		if (res == (int)op->len)
			;
		else if (res >= 0)
			r = sys_pwrite_full(op->fd, (const char *)op->buf + res, op->len - (size_t)res,
					    (off_t)(op->off + (uint64_t)res), 0);
		else if (res == NOT_RUN || res == -EAGAIN || res == -EINTR)
			r = sys_pwrite_full(op->fd, op->buf, op->len, (off_t)op->off, 0);
		else
			r = res;
		if (r == 0)
			atomic_fetch_add(&st->stats.bytes_home, op->len);
		else if (!err)
			err = r;
	}
	w->n = 0;
	return err;
}

static bool wave_conflicts(atomio *st, const struct wave *w, int fd, uint64_t off, uint64_t len)
{
	for (unsigned i = 0; i < w->n; i++) {
		const struct home_op *op = &st->hops[i];
		if (op->fd == fd && off < op->off + op->len && op->off < off + len)
			return true;
	}
	return false;
}

/* Queue one O_DIRECT home write on the home ring (a new wave first when it
 * overlaps a queued one, so that the later write lands last). */
static int wave_add(atomio *st, struct wave *w, int fd, const void *buf, size_t len, uint64_t off)
{
	int r = 0;
	if (w->n == RING_HOME || wave_conflicts(st, w, fd, off, len))
		r = wave_flush(st, w);
	if (!st->ring_home) {
		/* The ring is gone: plain from here on. */
		int r2 = sys_pwrite_full(fd, buf, len, (off_t)off, 0);
		if (r2 == 0)
			atomic_fetch_add(&st->stats.bytes_home, len);
		return r ? r : r2;
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(st->ring_home);
	if (!sqe) {
		/* cannot happen: the wave is flushed at the ring's size */
		int r2 = wave_flush(st, w);
		return r ? r : r2 ? r2 : wave_add(st, w, fd, buf, len, off);
	}
	io_uring_prep_write(sqe, fd, buf, (unsigned)len, off);
	sqe->user_data = w->n;
	st->hops[w->n] = (struct home_op){.fd = fd, .buf = buf, .len = len, .off = off};
	w->res[w->n] = NOT_RUN;
	w->n++;
	return r;
}

/* Apply a batch's groups in place, in order: txs linked by qnext, n of them.
 * Home stage held, lock not held.  No flush: the records are durable, a crash
 * from here on is repaired by replay, and the checkpoint syncs the files. */
int engine_home(atomio *st, atomio_tx *first, uint32_t n)
{
	struct wave w;
	w.n = 0;
	int err = 0;
	uint32_t i = 0;
	for (atomio_tx *t = first; i < n && !err; t = t->qnext, i++) {
		for (uint32_t j = 0; j < t->nsegs && !err; j++) {
			const struct seg *s = &t->segs[j];
			struct afile *f = file_get(st, (int)s->file);
			if (!f) {
				err = -EBADF;
				break;
			}
			if (s->kind == SEG_WRITE) {
				/* io_uring takes a write only when its length fits
				 * the SQE (anything larger goes plain). */
				if (st->ring_home && f->direct_home && s->len <= UINT_MAX / 2) {
					err = wave_add(st, &w, f->hfd, s->src, s->len, s->off);
				} else {
					err = sys_pwrite_full(f->hfd, s->src, s->len, (off_t)s->off, 0);
					if (err == 0)
						atomic_fetch_add(&st->stats.bytes_home, s->len);
				}
			} else {
				/* A size change orders against the file's writes
				 * still in flight. */
				err = wave_flush(st, &w);
				if (err == 0)
					err = sys_ftruncate_full(f->hfd, (off_t)s->off);
			}
		}
	}
	/* Always drain: requests in flight use the groups' buffers. */
	int r = wave_flush(st, &w);
	/* Mark the files for the checkpoint AFTER their writes (checkpoint.c
	 * takes the flags before it syncs), also after a failure: some of the
	 * writes may have been done. */
	i = 0;
	for (atomio_tx *t = first; i < n; t = t->qnext, i++)
		for (uint32_t j = 0; j < t->nsegs; j++) {
			struct afile *f = file_get(st, (int)t->segs[j].file);
			if (!f)
				continue;
			if (t->segs[j].kind != SEG_WRITE)
				__atomic_store_n(&f->resized, true, __ATOMIC_RELEASE);
			__atomic_store_n(&f->dirty, true, __ATOMIC_RELEASE);
		}
	return err ? err : r;
}
