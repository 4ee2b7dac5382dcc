/*
 * engine.h: the interface between the commit pipeline (commit.c) and the
 * code that moves a batch's bytes to the files: one table of operations per
 * backend.  engine_plain.c does each write with one system call;
 * engine_uring.c queues them on io_uring rings and falls back to the plain
 * operations wherever a ring cannot serve.  engine_pick.c picks the backend at
 * open (and says why, at the top of that file).
 *
 * Every operation has the durability its comment promises whatever the
 * backend: a new backend must keep those promises (format.h, SYNC ORDER).
 */
#ifndef ATOMIO_ENGINE_H
#define ATOMIO_ENGINE_H

#include "internal.h"

struct engine_ops {
	const char *name;
	/* Write len bytes at offset off of the log, durable on return (the
	 * commit point).  ls: the batch's write slot. */
	int (*log_write)(atomio *st, struct logslot *ls, const void *buf, size_t len, uint64_t off);
	/* One RWF_ATOMIC | RWF_DSYNC write to a data file: all of it reaches
	 * the media or none of it, durable on return.  -EOPNOTSUPP / -EINVAL:
	 * refused before anything was written (the group is logged instead). */
	int (*atomic_write)(atomio *st, struct afile *f, const void *buf, size_t len, uint64_t off);
	/* A batch's home writes (its n groups), in group order, no flush; the
	 * written files are marked for the checkpoint.  Home stage held, mutex
	 * not held. */
	int (*home)(atomio *st, const struct grp *g, uint32_t n);
	/* Free what the backend set up. */
	void (*close)(atomio *st);
};

extern const struct engine_ops engine_plain, engine_uring;

/* engine_uring.c: set up the rings ATOMIO_ENGINE_URING or ATOMIO_DIRECT_HOME
 * ask for (engine_pick.c says when); true when any ring serves. */
bool engine_uring_open(atomio *st, uint32_t flags, bool home);

/* engine_plain.c, for every backend: one home range the plain way; mark the
 * files a batch wrote (AFTER the writes: checkpoint.c takes the marks before
 * it syncs); the result of an atomic write's pwritev. */
int engine_plain_seg(atomio *st, struct afile *f, const struct seg *s);
/* s's data is aligned for f's home descriptor (engine_plain.c) */
bool engine_seg_aligned(const struct afile *f, const struct seg *s);
void engine_mark_written(atomio *st, const struct grp *g, uint32_t n);
int engine_atomic_result(atomio *st, ssize_t n, size_t len);

/* The commit pipeline's calls, through the store's backend. */
static inline int engine_log_write(atomio *st, struct logslot *ls, const void *buf, size_t len,
				   uint64_t off)
{
	return st->eng->log_write(st, ls, buf, len, off);
}
static inline int engine_fast_write(atomio *st, struct afile *f, const void *buf, size_t len,
				    uint64_t off)
{
	return st->eng->atomic_write(st, f, buf, len, off);
}
static inline int engine_home(atomio *st, const struct grp *g, uint32_t n)
{
	fd_use_begin(st);
	int r = st->eng->home(st, g, n);
	fd_use_end(st);
	return r;
}

#endif
