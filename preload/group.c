/*
 * group.c: group mode (ATOMIO_GROUP=1), a failure-atomic sync.
 *
 * Every write and size change of a protected file between two syncs joins
 * one pending group (sqlite/pend.c holds it: the same structure the SQLite
 * VFS keeps its transaction in); the sync commits the group durably
 * (atomio_tx_commit: durable and home when it returns).  After a crash the file is as one of its syncs
 * left it (or a later group boundary): never a part of the writes between
 * two.  The file itself does not change until the group is committed, so
 * reads go through the pending group (grp_read), and fstat and lseek use the
 * size it leaves.
 *
 * A group also ends, without a wait, when the file's last descriptor is
 * closed, at exit, at exec, at fork, and before rename or unlink of a
 * protected file (the store closes around those); and with a wait where a
 * reader outside the wrappers' sight must see the data (mmap, copies from
 * the file, stdio reads, SEEK_DATA/SEEK_HOLE).  A group must fit in the log:
 * a write that would make it larger fails with ENOSPC and a message.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pend.h"
#include "preload.h"

bool grp_pending(const struct pfile *f) { return f->pend && f->pend->active; }

int grp_add(atomio *st, struct pfile *f, const struct iovec *iov, int iovcnt, off_t off)
{
	if (!f->pend && !(f->pend = calloc(1, sizeof(*f->pend))))
		return -ENOMEM;
	struct pend *p = f->pend;
	pend_begin(p, f->size);
	int64_t len = 0;
	for (int i = 0; iov && i < iovcnt; i++)
		len += (int64_t)iov[i].iov_len;
	/* What the record costs: the data, 32 bytes a range, and the two size
	 * changes a commit may add (atomio_caps: segment_overhead). */
	if (iov && (uint64_t)(p->bytes + len) + 32 * (p->n + (size_t)iovcnt + 2) > g_max_group) {
		pl_msg(f->path, "the writes since the last sync would not fit in one group of the log "
				"(%llu bytes; ATOMIO_LOG_SIZE): ENOSPC", (unsigned long long)g_max_group);
		return -ENOSPC;
	}
	if (!iov) {
		pend_truncate(p, off);
		f->size = off;
		return 0;
	}
	for (int i = 0; i < iovcnt; i++) {
		int r = pend_write(p, iov[i].iov_base, (int64_t)iov[i].iov_len, off);
		if (r < 0)
			return r;
		off += (off_t)iov[i].iov_len;
	}
	if (off > f->size)
		f->size = off;
	(void)st;
	return 0;
}

void grp_commit(atomio *st, struct pfile *f)
{
	if (!grp_pending(f))
		return;
	struct pend *p = f->pend;
	size_t *ord = pend_order(p);
	atomio_tx *tx = NULL;
	int r = ord && st ? atomio_tx_begin(st, &tx) : -ENOMEM;
	/* As the SQLite VFS: the smallest size the group truncated to, the
	 * writes (a later one wins where they overlap), the final size. */
	if (r == 0 && p->truncated)
		r = atomio_tx_truncate(tx, f->id, p->min_trunc);
	for (size_t i = 0; r == 0 && i < p->n; i++) {
		const struct pent *e = &p->v[ord[i]];
		r = atomio_tx_write(tx, f->id, e->data, (size_t)e->len, e->off);
	}
	if (r == 0 && (p->truncated || p->lsize > p->base_size))
		r = atomio_tx_truncate(tx, f->id, p->lsize);
	free(ord);
	/* Durable: the group ends at a sync, which must return it durable; it
	 * is also home then, so the file itself is the truth again for every
	 * read (no group of this mode is ever pending in the store). */
	if (r == 0)
		r = atomio_tx_commit(tx);
	else if (tx)
		atomio_tx_abort(tx);
	if (r < 0 && !f->err) {
		f->err = r;
		pl_msg(f->path, "the writes since the last sync could not be committed: %s",
		       atomio_strerror(r));
	}
	pend_clear(p);
}

struct base {
	atomio *st;
	int id;
};

static int64_t base_read(void *ctx, void *buf, int64_t n, int64_t off)
{
	struct base *b = ctx;
	/* The committed bytes, whatever the program's descriptor (O_DIRECT
	 * alignment, write-only) allows. */
	return atomio_pread(b->st, b->id, buf, (size_t)n, off);
}

bool grp_read(int fd, struct pfile *f, const struct iovec *iov, int iovcnt, off_t off, bool at_pos,
	      ssize_t *res)
{
	pthread_mutex_lock(&f->mu);
	if (!grp_pending(f)) {
		pthread_mutex_unlock(&f->mu);
		return false;
	}
	/* Groups committed before this one are home (grp_commit is durable). */
	struct base b = {pl_store(f->path), f->id};
	ssize_t total = 0;
	if (!b.st || b.id < 0 || !grp_pending(f)) {
		pthread_mutex_unlock(&f->mu);
		*res = -EIO;
		return b.st && b.id >= 0 ? false : true;
	}
	if (at_pos)
		off = real.lseek(fd, 0, SEEK_CUR);
	for (int i = 0; i < iovcnt; i++) {
		int64_t n = pend_read(f->pend, iov[i].iov_base, (int64_t)iov[i].iov_len, off + total, base_read, &b);
		if (n < 0) {
			total = total ? total : n;
			break;
		}
		total += n;
		if (n < (int64_t)iov[i].iov_len)
			break;
	}
	if (at_pos && total > 0)
		real.lseek(fd, off + total, SEEK_SET);
	pthread_mutex_unlock(&f->mu);
	*res = total;
	return true;
}

void grp_last_close(struct pfile *f)
{
	pl_hold();
	pthread_mutex_lock(&f->mu);
	grp_commit(pl_not_owner() ? NULL : pl_store_now(), f);
	pthread_mutex_unlock(&f->mu);
	pl_release();
}
