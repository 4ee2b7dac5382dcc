/*
 * tx.c: building groups ("plugging"): begin, write, writev, truncate, abort,
 * and the single-call atomio_pwrite / atomio_pwritev.
 *
 * A tx copies the caller's data into its own arena at atomio_tx_write time,
 * so the caller may reuse its buffers at once; ranges for O_DIRECT files are
 * placed at the file's memory alignment, so their home writes go straight
 * from the arena.  Adjacent writes to one file are merged into one range.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "shm.h"

#define ARENA_MIN (64u * 1024u)
#define ARENA_MAX_STEP (4u * 1024u * 1024u)

/* --- pool ------------------------------------------------------------------ */

static atomio_tx *tx_alloc(atomio *st)
{
	atomio_tx *tx = NULL;
	own_lock(st);
	if (st->pool_len > POOL_KEEP) {
		tx = st->pool_head;
		st->pool_head = tx->pool_next;
		if (!st->pool_head)
			st->pool_tail = NULL;
		st->pool_len--;
	}
	own_unlock(st);
	if (!tx) {
		tx = calloc(1, sizeof(*tx));
		if (!tx)
			return NULL;
	}
	memset(tx, 0, sizeof(*tx));
	tx->magic = TX_MAGIC;
	tx->st = st;
	tx->state = TX_OPEN;
	return tx;
}

static void tx_clear(atomio_tx *tx)
{
	struct arena_chunk *c = tx->arena;
	while (c) {
		struct arena_chunk *n = c->next;
		free(c);
		c = n;
	}
	tx->arena = NULL;
	free(tx->cdata);
	tx->cdata = NULL;
	tx->clen = 0;
	free(tx->segs);
	tx->segs = NULL;
	tx->nsegs = tx->cap = 0;
	tx->data_len = 0;
}

void tx_release(atomio_tx *tx)
{
	atomio *st = tx->st;
	tx_clear(tx);
	tx->magic = TX_DEAD;
	tx->pool_next = NULL;
	own_lock(st);
	if (st->pool_tail)
		st->pool_tail->pool_next = tx;
	else
		st->pool_head = tx;
	st->pool_tail = tx;
	st->pool_len++;
	st->open_txs--;
	own_unlock(st);
}

void tx_pool_free(atomio *st)
{
	atomio_tx *tx = st->pool_head;
	while (tx) {
		atomio_tx *n = tx->pool_next;
		free(tx);
		tx = n;
	}
	st->pool_head = st->pool_tail = NULL;
	st->pool_len = 0;
}

static bool tx_ok(const atomio_tx *tx)
{
	return tx && tx->magic == TX_MAGIC && tx->state == TX_OPEN;
}

/* --- arena ------------------------------------------------------------------ */

static char *chunk_data(struct arena_chunk *c) { return (char *)c + 4096; }

static void *arena_alloc(atomio_tx *tx, size_t len, size_t align)
{
	struct arena_chunk *c = tx->arena;
	if (c) {
		size_t at = align_up(c->used, align);
		if (at + len <= c->size) {
			c->used = at + len;
			return chunk_data(c) + at;
		}
	}
	size_t prev = c ? c->size : 0;
	size_t size = prev ? prev * 2 : ARENA_MIN;
	if (size > ARENA_MAX_STEP)
		size = ARENA_MAX_STEP;
	if (size < len + align)
		size = align_up(len + align, 4096);
	void *p;
	/* The header takes the first 4096 bytes so that the data starts
	 * page-aligned (O_DIRECT buffers). */
	if (posix_memalign(&p, 4096, 4096 + size))
		return NULL;
	c = p;
	c->size = size;
	c->used = len;
	c->next = tx->arena;
	tx->arena = c;
	return chunk_data(c);
}

/* Extend the last range in place when the new bytes follow it both in the
 * file and in the arena. */
static bool arena_extend(atomio_tx *tx, struct seg *last, size_t len)
{
	struct arena_chunk *c = tx->arena;
	if (!c || (const char *)last->src + last->len != chunk_data(c) + c->used ||
	    c->used + len > c->size)
		return false;
	c->used += len;
	return true;
}

/* --- validation ---------------------------------------------------------------- */

static int seg_room(atomio_tx *tx, uint32_t add_segs, uint64_t add_bytes)
{
	atomio *st = tx->st;
	if (tx->nsegs + add_segs > MAX_SEGMENTS)
		return -E2BIG;
	if (add_bytes > st->area_size)
		return -E2BIG;
	/* A record must fit the log in one piece: E2BIG now, with nothing
	 * added, rather than a commit that can never succeed. */
	if (rec_len_for(tx->nsegs + add_segs, tx->data_len + add_bytes) > st->area_size)
		return -E2BIG;
	return 0;
}

static int push_seg(atomio_tx *tx, const struct seg *s)
{
	if (tx->nsegs == tx->cap) {
		uint32_t nc = tx->cap ? tx->cap * 2 : 8;
		struct seg *n = realloc(tx->segs, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		tx->segs = n;
		tx->cap = nc;
	}
	tx->segs[tx->nsegs++] = *s;
	return 0;
}

static int check_range(struct afile *f, uint64_t len, off_t off)
{
	if (off < 0)
		return -EINVAL;
	if ((uint64_t)off > f->max_size || len > f->max_size - (uint64_t)off)
		return -EFBIG; /* see file_max_size: never log what cannot be replayed */
	if (f->direct && (((uint64_t)off % f->dio_off_align) || (len % f->dio_off_align)))
		return -EINVAL;
	return 0;
}

/* Add len bytes gathered from iov at off; the common path of every write. */
static int tx_add(atomio_tx *tx, struct afile *f, const struct iovec *iov, int iovcnt, size_t len,
		  off_t off)
{
	int r = check_range(f, len, off);
	if (r < 0)
		return r;
	if (len == 0)
		return 0;
	struct seg *last = tx->nsegs ? &tx->segs[tx->nsegs - 1] : NULL;
	bool merge = last && last->kind == SEG_WRITE && last->file == f->id &&
		     last->off + last->len == (uint64_t)off;
	char *dst;
	if (merge && seg_room(tx, 0, len) == 0 && arena_extend(tx, last, len)) {
		dst = (char *)last->src + last->len;
		last->len += len;
	} else {
		r = seg_room(tx, 1, len);
		if (r < 0)
			return r;
		size_t align = f->direct ? (f->dio_mem_align > 16 ? f->dio_mem_align : 16) : 16;
		dst = arena_alloc(tx, len, align);
		if (!dst)
			return -ENOMEM;
		struct seg s = {.file = f->id, .kind = SEG_WRITE, .off = (uint64_t)off, .len = len,
				.src = dst};
		r = push_seg(tx, &s);
		if (r < 0)
			return r;
	}
	for (int i = 0; i < iovcnt; i++) {
		memcpy(dst, iov[i].iov_base, iov[i].iov_len);
		dst += iov[i].iov_len;
	}
	tx->data_len += len;
	return 0;
}

/* --- public ------------------------------------------------------------------- */

int atomio_tx_begin(atomio *st, atomio_tx **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!st)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	int failed = st_failed(st) ? ATOMIO_EFAILED : 0;
	own_lock(st);
	if (!failed)
		st->open_txs++;
	own_unlock(st);
	if (failed)
		return failed;
	atomio_tx *tx = tx_alloc(st);
	if (!tx) {
		own_lock(st);
		st->open_txs--;
		own_unlock(st);
		return -ENOMEM;
	}
	*out = tx;
	return 0;
}

/* The file a range of tx names: NULL with *r -EPERM (a forked child:
 * internal.h, FORK) or -EINVAL (not open in the store). */
static struct afile *tx_file(atomio_tx *tx, int file, int *r)
{
	*r = st_forked(tx->st);
	struct afile *f = *r ? NULL : file_app(tx->st, file);
	if (!f && !*r)
		*r = -EINVAL;
	return f;
}

int atomio_tx_write(atomio_tx *tx, int file, const void *buf, size_t len, off_t off)
{
	if (!tx_ok(tx) || (len && !buf) || len > SSIZE_MAX)
		return -EINVAL;
	int r;
	struct afile *f = tx_file(tx, file, &r);
	if (!f)
		return r;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	return tx_add(tx, f, &iov, 1, len, off);
}

int atomio_tx_writev(atomio_tx *tx, int file, const struct iovec *iov, int iovcnt, off_t off)
{
	size_t total;
	if (!tx_ok(tx) || iov_total(iov, iovcnt, &total) < 0)
		return -EINVAL;
	int r;
	struct afile *f = tx_file(tx, file, &r);
	if (!f)
		return r;
	return tx_add(tx, f, iov, iovcnt, total, off);
}

int atomio_tx_truncate(atomio_tx *tx, int file, off_t size)
{
	if (!tx_ok(tx) || size < 0)
		return -EINVAL;
	int r;
	struct afile *f = tx_file(tx, file, &r);
	if (!f)
		return r;
	if ((uint64_t)size > f->max_size)
		return -EFBIG;
	r = seg_room(tx, 1, 0);
	if (r < 0)
		return r;
	struct seg s = {.file = f->id, .kind = SEG_SETSIZE, .off = (uint64_t)size};
	return push_seg(tx, &s);
}

int atomio_tx_commit(atomio_tx *tx)
{
	if (!tx_ok(tx))
		return -EINVAL;
	if (st_forked(tx->st))
		return -EPERM; /* the group stays the parent's (internal.h, FORK) */
	int r = commit_tx(tx);
	tx_release(tx);
	return r;
}

void atomio_tx_abort(atomio_tx *tx)
{
	if (tx_ok(tx) && !st_forked(tx->st))
		tx_release(tx);
}

ssize_t atomio_pwritev(atomio *st, int file, const struct iovec *iov, int iovcnt, off_t off)
{
	size_t total;
	if (!st || iov_total(iov, iovcnt, &total) < 0)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	struct afile *f = file_app(st, file);
	if (!f)
		return -EINVAL;
	/* A private tx on the stack: the call is synchronous, so no pool entry. */
	atomio_tx tx = {.magic = TX_MAGIC, .st = st, .state = TX_OPEN};
	struct seg one;
	int r;
	if (iovcnt == 1 && (!f->direct || !((uintptr_t)iov[0].iov_base % f->dio_mem_align))) {
		/* Zero-copy: the caller's buffer outlives the call. */
		r = check_range(f, total, off);
		if (r == 0)
			r = seg_room(&tx, 1, total);
		if (r < 0)
			return r;
		if (total == 0)
			return 0;
		one = (struct seg){.file = f->id, .kind = SEG_WRITE, .off = (uint64_t)off, .len = total,
				   .src = iov[0].iov_base};
		tx.segs = &one;
		tx.nsegs = tx.cap = 1;
		tx.data_len = total;
		r = commit_tx(&tx);
		free(tx.cdata);
		return r < 0 ? r : (ssize_t)total;
	}
	r = tx_add(&tx, f, iov, iovcnt, total, off);
	if (r == 0)
		r = commit_tx(&tx);
	tx_clear(&tx);
	return r < 0 ? r : (ssize_t)total;
}

ssize_t atomio_pwrite(atomio *st, int file, const void *buf, size_t len, off_t off)
{
	if (len && !buf)
		return -EINVAL;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	return atomio_pwritev(st, file, &iov, 1, off);
}
