/*
 * engine_uring.c: the io_uring backend (engine.h, liburing).  The log write,
 * the kernel fast path's atomic write, and the O_DIRECT home writes of a
 * batch are queued on a ring and submitted with one io_uring_enter per
 * stage; a batch's O_DIRECT home writes then run in parallel on the device
 * instead of one after another.  Writes that overlap inside a batch are
 * split into successive waves, so the later one always lands last.  Each log
 * write slot (commit.c) and the home stage have a ring of their own, so a
 * ring needs no lock.  Anything that fails in a ring (setup refused, a
 * submission refused, a request the kernel cannot do asynchronously) makes
 * that write go the plain way instead (engine_plain.c).
 */
#include <errno.h>
#include <liburing.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "shm.h"

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

/* A ring, and its descriptor's slot in the fork handler's list. */
struct ring_box {
	struct io_uring ring;
	int fork_slot;
};

/* A new ring, holding the log's open file description.  WHY: the lock
 * bytes that say this process is alive (shm.h, LK_PROC+i; LK_DMS; the
 * flock) are the log description's, and go when its last reference does.
 * A process that is killed has its descriptors closed (exit_files) while
 * its rings' requests may still be in flight: do_exit waits only for
 * requests on io_uring files themselves, and the rest are waited for by
 * each ring's teardown (io_ring_exit_work), in a kernel worker, after the
 * ring's descriptor is closed with the others.  A home or fast-path write
 * from the shared arena could then land after a survivor, finding the
 * bytes free, adopted its batch -- after a later group rewrote the range,
 * maybe with another group's bytes from the reused arena block.  A file
 * registered in the ring is put only when the ring is freed, after its
 * last request (io_ring_ctx_free): so the bytes outlive every write the
 * process had in flight.  A ring that cannot hold it is not used (the
 * plain way's writes end with the process).  The ring's descriptor is
 * closed in a forked child, which must not keep the parent's bytes alive
 * (internal.h, FORK). */
static struct io_uring *ring_new(atomio *st, unsigned entries)
{
	struct ring_box *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	if (sys_uring_init(entries, &b->ring) < 0) {
		free(b);
		return NULL;
	}
	if (sys_uring_register_files(&b->ring, &st->log_fd, 1) < 0) {
		sys_uring_exit(&b->ring);
		free(b);
		return NULL;
	}
	b->fork_slot = fork_track_fd(b->ring.ring_fd);
	return &b->ring;
}

static void ring_free(struct io_uring **rp)
{
	if (*rp) {
		struct ring_box *b = (struct ring_box *)*rp; /* ring is its first member */
		fork_untrack_fd(b->fork_slot);
		sys_uring_exit(&b->ring);
		free(b);
		*rp = NULL;
	}
}

bool engine_uring_open(atomio *st, uint32_t flags, bool home)
{
	bool any = false;
	if (flags & ATOMIO_ENGINE_URING) {
		for (unsigned i = 0; i < LOG_SLOTS; i++) {
			st->slots[i].ring = ring_new(st, RING_LOG);
			if (!st->slots[i].ring) {
				/* EPERM (disabled by sysctl or seccomp), ENOSYS, ...: plain */
				for (unsigned j = 0; j < i; j++)
					ring_free(&st->slots[j].ring);
				return false;
			}
		}
		any = true;
	}
	if (home && (flags & ATOMIO_DIRECT_HOME)) {
		st->ring_home = ring_new(st, RING_HOME);
		st->hops = calloc(RING_HOME, sizeof(*st->hops));
		if (!st->ring_home || !st->hops) {
			/* the home stage writes the plain way */
			ring_free(&st->ring_home);
			free(st->hops);
			st->hops = NULL;
		} else {
			any = true;
		}
	}
	return any;
}

static void uring_close(atomio *st)
{
	for (unsigned i = 0; i < LOG_SLOTS; i++)
		ring_free(&st->slots[i].ring);
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

static int uring_log_write(atomio *st, struct logslot *ls, const void *buf, size_t len, uint64_t off)
{
	struct io_uring_sqe *sqe = ls->ring ? io_uring_get_sqe(ls->ring) : NULL;
	if (!sqe)
		return engine_plain.log_write(st, ls, buf, len, off);
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	io_uring_prep_writev2(sqe, st->log_fd, &iov, 1, off, RWF_DSYNC);
	sqe->user_data = 0;
	int res = NOT_RUN;
	ring_run(st, &ls->ring, 1, &res);
	if (res == (int)len)
		return 0;
	if (res >= 0) {
		/* Short: the part written is durable (RWF_DSYNC); finish it. */
		return engine_plain.log_write(st, ls, (const char *)buf + res, len - (size_t)res,
					      off + (uint64_t)res);
	}
	if (res == NOT_RUN || res == -EAGAIN || res == -EINTR || res == -EOPNOTSUPP)
		return engine_plain.log_write(st, ls, buf, len, off);
	return res;
}

/* --- the kernel fast path ------------------------------------------------------ */

static int uring_atomic_write(atomio *st, struct afile *f, const void *buf, size_t len, uint64_t off)
{
	/* No log write is in flight (commit.c waits for them): slot 0's ring
	 * is free. */
	struct logslot *ls = &st->slots[0];
	struct io_uring_sqe *sqe = ls->ring ? io_uring_get_sqe(ls->ring) : NULL;
	if (!sqe)
		return engine_plain.atomic_write(st, f, buf, len, off);
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	io_uring_prep_writev2(sqe, f->fd, &iov, 1, off, RWF_ATOMIC | RWF_DSYNC);
	sqe->user_data = 0;
	int res = NOT_RUN;
	ring_run(st, &ls->ring, 1, &res);
	if (res == NOT_RUN || res == -EINTR || res == -EAGAIN)
		return engine_plain.atomic_write(st, f, buf, len, off);
	return engine_atomic_result(st, res, len);
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
			atomic_fetch_add(&st->sh->stats.bytes_home, op->len);
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
			atomic_fetch_add(&st->sh->stats.bytes_home, len);
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

/* The plain backend's home stage, with the O_DIRECT writes of
 * ATOMIO_DIRECT_HOME files queued on the home ring.  Home stage held, lock
 * not held. */
static int uring_home(atomio *st, const struct grp *g, uint32_t n)
{
	ASSERT_HOME(st);
	struct wave w;
	w.n = 0;
	int err = 0;
	for (uint32_t i = 0; i < n && !err; i++) {
		const struct grp *t = &g[i];
		for (uint32_t j = 0; j < t->nsegs && !err; j++) {
			const struct seg *s = &t->segs[j];
			struct afile *f = file_get_any(st, s->file, &err);
			if (!f)
				break;
			/* io_uring takes a write only when its length fits the
			 * SQE (anything larger goes plain). */
			if (s->kind == SEG_WRITE && st->ring_home && f->direct_home && s->len <= UINT_MAX / 2 &&
			    engine_seg_aligned(f, s)) {
				err = wave_add(st, &w, f->hfd, s->src, s->len, s->off);
				continue;
			}
			/* A size change orders against the file's writes still
			 * in flight; a write done here and now, against the
			 * queued writes of its range (earlier groups': they
			 * must land first, the wave is submitted only later). */
			if (s->kind != SEG_WRITE || wave_conflicts(st, &w, f->hfd, s->off, s->len))
				err = wave_flush(st, &w);
			if (err == 0)
				err = engine_plain_seg(st, f, s);
		}
	}
	/* Always drain: requests in flight use the groups' buffers. */
	int r = wave_flush(st, &w);
	engine_mark_written(st, g, n);
	return err ? err : r;
}

const struct engine_ops engine_uring = {
	.name = "io_uring",
	.log_write = uring_log_write,
	.atomic_write = uring_atomic_write,
	.home = uring_home,
	.close = uring_close,
};
