/*
 * wear.c: writing less to the device (issue 7).
 *
 * Three things, each measured (docs/API.md, "Wear"; README, "Wear"):
 *
 *  - COMPRESSED RECORDS.  commit_prepare (in the committing thread, before
 *    the group is queued, so that threads compress in parallel) tries LZ4 on
 *    the group's data and keeps the result when the record gets shorter.
 *    LZ4, not zstd: on 16 KiB pages of 50% and 75% compressible data both
 *    give records of the same number of 4 KiB log blocks, and LZ4 took 5.8
 *    us a page against zstd -1's 18.8 (and 3.1 against 8.3 on incompressible
 *    data, which is then stored raw: it costs no log byte more than before).
 *    Only zstd's better ratio on text would have shown (examples/
 *    bench-compress.c).  Groups of more than COMP_MAX data bytes stay raw,
 *    so that recovery decompresses any record in bounded memory (format.h).
 *
 *  - HOME WRITES COALESCED BY THE PAGE CACHE.  A home write goes to the page
 *    cache (buffered files, and the buffered twin of an O_DIRECT file,
 *    engine.c) and stays there, dirty, until a checkpoint syncs the file: a
 *    page committed a thousand times between two checkpoints reaches the
 *    device once, and the sync hands the kernel every dirty page of a file
 *    at once, which it writes in file order, merged into large requests.
 *    atomio keeps no copy of its own: the twin already holds the newest
 *    committed bytes of every range, every read path sees them (docs/API.md,
 *    "Which reads see what"), and a second copy would double the memory.
 *    What atomio adds is a bound: the dirty set below counts the distinct
 *    4 KiB blocks written home since the last checkpoint, and the policy
 *    checkpoints when it passes dirty_limit.
 *
 *  - THE CHECKPOINT POLICY.  A background checkpoint runs when the log is
 *    more than ckpt_percent full, or the dirty set holds more than
 *    dirty_limit bytes (commit.c asks for it after each batch's home
 *    writes); a commit waits for a checkpoint when the log has no room or
 *    the dirty set holds twice dirty_limit.  The log's size is the lever: the
 *    more commits between two checkpoints, the fewer times a hot page is
 *    written home.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define DBLOCK 4096u /* granularity of the dirty set: the page cache's page */

struct dkey {
	uint64_t blk1; /* block index + 1; 0 = empty slot */
	uint32_t file;
};

void wear_init(atomio *st, uint32_t ckpt_percent, uint64_t dirty_limit)
{
	uint32_t pct = ckpt_percent ? ckpt_percent : 50;
	st->ckpt_at = st->area_size / 100 * pct;
	st->dirty_limit = dirty_limit ? dirty_limit : st->area_size;
	if (st->dirty_limit < DBLOCK)
		st->dirty_limit = DBLOCK;
}

static void dset_free(struct dset *d)
{
	free(d->slot);
	memset(d, 0, sizeof(*d));
}

void wear_free(atomio *st)
{
	dset_free(&st->dirty);
	dset_free(&st->ckpt_set);
}

/* --- compression ------------------------------------------------------------ */

/* Compress tx's data for its record, if that makes the record shorter:
 * sets tx->cdata/clen and tx->rec_len; else leaves the raw record.  No lock
 * held; the tx is its caller's.  Failure (no memory) just means raw. */
void rec_compress(atomio_tx *tx)
{
	atomio *st = tx->st;
	tx->cdata = NULL;
	tx->clen = 0;
	if (st->flags & ATOMIO_NO_COMPRESS)
		return;
	struct rec_src r = {.segs = tx->segs, .nsegs = tx->nsegs, .data_len = tx->data_len,
			    .rec_len = tx->rec_len};
	(void)codec_rec_compress(&r, &tx->cdata, &tx->clen, &tx->rec_len);
}

/* --- the dirty set ------------------------------------------------------------ */

static uint64_t dhash(uint32_t file, uint64_t blk)
{
	uint64_t x = blk * 0x9E3779B97F4A7C15ull ^ ((uint64_t)file << 32 | file);
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static bool dset_has(const struct dset *d, uint32_t file, uint64_t blk)
{
	if (!d->cap)
		return false;
	for (uint64_t i = dhash(file, blk) & (d->cap - 1);; i = (i + 1) & (d->cap - 1)) {
		const struct dkey *k = &d->slot[i];
		if (!k->blk1)
			return false;
		if (k->blk1 == blk + 1 && k->file == file)
			return true;
	}
}

static void dset_put(struct dkey *slot, uint64_t cap, uint32_t file, uint64_t blk1)
{
	uint64_t i = dhash(file, blk1 - 1) & (cap - 1);
	while (slot[i].blk1)
		i = (i + 1) & (cap - 1);
	slot[i] = (struct dkey){.blk1 = blk1, .file = file};
}

/* Add one block; false when it needed memory it could not get. */
static bool dset_add(struct dset *d, uint32_t file, uint64_t blk)
{
	if (dset_has(d, file, blk))
		return true;
	if ((d->used + 1) * 2 > d->cap) {
		uint64_t nc = d->cap ? d->cap * 2 : 1024;
		struct dkey *n = calloc(nc, sizeof(*n));
		if (!n)
			return false;
		for (uint64_t i = 0; i < d->cap; i++)
			if (d->slot[i].blk1)
				dset_put(n, nc, d->slot[i].file, d->slot[i].blk1);
		free(d->slot);
		d->slot = n;
		d->cap = nc;
	}
	dset_put(d->slot, d->cap, file, blk + 1);
	d->used++;
	return true;
}

/* A batch's home writes are done: count their blocks (those that went to a
 * page cache).  Lock held. */
void dirty_note_locked(atomio *st, atomio_tx *first, uint32_t n)
{
	uint32_t i = 0;
	for (atomio_tx *t = first; i < n; t = t->qnext, i++)
		for (uint32_t j = 0; j < t->nsegs; j++) {
			const struct seg *s = &t->segs[j];
			if (s->kind != SEG_WRITE || !s->len)
				continue;
			/* ATOMIO_DIRECT_HOME files hold no page cache to bound */
			const struct afile *f = file_get(st, (int)s->file);
			if (!f || f->direct_home)
				continue;
			for (uint64_t b = s->off / DBLOCK; b <= (s->off + s->len - 1) / DBLOCK; b++)
				if (!dset_add(&st->dirty, s->file, b)) {
					st->dirty.overflow = true;
					return;
				}
		}
}

bool dirty_over_locked(const atomio *st)
{
	return st->dirty.overflow || st->dirty.used * DBLOCK > st->dirty_limit;
}

/* So much is dirty that the next commit waits for a checkpoint. */
bool dirty_full_locked(const atomio *st)
{
	return st->dirty.used * DBLOCK > 2 * st->dirty_limit;
}

/* A checkpoint starts (before it takes the files' dirty flags and syncs):
 * what is dirty now is what it makes durable.  Lock held. */
void dirty_ckpt_begin_locked(atomio *st)
{
	dset_free(&st->ckpt_set);
	st->ckpt_set = st->dirty;
	memset(&st->dirty, 0, sizeof(st->dirty));
	atomic_fetch_add(&st->stats.bytes_checkpointed, st->ckpt_set.used * DBLOCK);
}

static int cmp_key(const void *a, const void *b)
{
	const struct dkey *x = a, *y = b;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->blk1 < y->blk1 ? -1 : x->blk1 > y->blk1;
}

/* A background checkpoint synced the files (synced: it succeeded): drop
 * from the page cache of the O_DIRECT files' twins the blocks it made
 * durable, except those written again since it began.  (Dropping a whole
 * file, as a full checkpoint does, would also start the write-back of pages
 * dirtied meanwhile -- POSIX_FADV_DONTNEED writes dirty pages first -- and
 * write them twice: once now, once at the next checkpoint.)  Called with
 * the lock held; drops it while advising. */
void dirty_ckpt_end(atomio *st, bool synced)
{
	struct dset d = st->ckpt_set;
	memset(&st->ckpt_set, 0, sizeof(st->ckpt_set));
	if (!synced || !d.used) {
		free(d.slot);
		return;
	}
	/* Compact and sort the keys (outside the lock: the set is ours). */
	pthread_mutex_unlock(&st->lock);
	uint64_t n = 0;
	for (uint64_t i = 0; i < d.cap; i++)
		if (d.slot[i].blk1)
			d.slot[n++] = d.slot[i];
	qsort(d.slot, n, sizeof(*d.slot), cmp_key);
	pthread_mutex_lock(&st->lock);
	/* Blocks dirtied again meanwhile stay (blk1 = 0 marks them). */
	for (uint64_t i = 0; i < n; i++)
		if (dset_has(&st->dirty, d.slot[i].file, d.slot[i].blk1 - 1))
			d.slot[i].blk1 = 0;
	pthread_mutex_unlock(&st->lock);
	for (uint64_t i = 0; i < n;) {
		if (!d.slot[i].blk1) {
			i++;
			continue;
		}
		uint64_t j = i + 1;
		while (j < n && d.slot[j].file == d.slot[i].file && d.slot[j].blk1 == d.slot[j - 1].blk1 + 1)
			j++;
		struct afile *f = file_get(st, (int)d.slot[i].file);
		if (f && f->hfd >= 0 && f->hfd != f->fd)
			sys_fadvise(f->hfd, (off_t)((d.slot[i].blk1 - 1) * DBLOCK),
				    (off_t)((j - i) * DBLOCK), POSIX_FADV_DONTNEED);
		i = j;
	}
	free(d.slot);
	pthread_mutex_lock(&st->lock);
}

/* --- reads ------------------------------------------------------------------------ */

/* Read through a descriptor opened with O_DIRECT: aligned requests go
 * straight, others through an aligned bounce span. */
static ssize_t direct_read(int fd, uint32_t align, void *buf, size_t len, off_t off)
{
	uint64_t a = align ? align : 4096;
	if (!((uintptr_t)buf % a) && !(len % a) && !((uint64_t)off % a))
		return sys_pread_full(fd, buf, len, off);
	uint64_t lo = (uint64_t)off / a * a, hi = align_up((uint64_t)off + len, a);
	char *tmp = aligned_alloc_zero(a > 4096 ? a : 4096, hi - lo);
	if (!tmp)
		return -ENOMEM;
	ssize_t n = sys_pread_full(fd, tmp, hi - lo, (off_t)lo);
	if (n >= 0) {
		uint64_t skip = (uint64_t)off - lo;
		n = (uint64_t)n > skip ? (ssize_t)((uint64_t)n - skip) : 0;
		if ((size_t)n > len)
			n = (ssize_t)len;
		memcpy(buf, tmp + skip, (size_t)n);
	}
	free(tmp);
	return n;
}

/* Which reads see what (docs/API.md): a committed group's home writes are
 * in the page cache of the file (buffered files) or of its buffered twin
 * (O_DIRECT files, default) before the commit returns, so a buffered read of
 * that descriptor returns them without waiting for, or causing, their
 * write-back.  ATOMIO_DIRECT_HOME files and fast-path writes are on the
 * device by then: read with O_DIRECT. */
ssize_t atomio_preadv(atomio *st, int file, const struct iovec *iov, int iovcnt, off_t off)
{
	if (!st || off < 0 || iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov))
		return -EINVAL;
	struct afile *f = file_get(st, file);
	if (!f)
		return -EINVAL;
	size_t total = 0;
	for (int i = 0; i < iovcnt; i++) {
		if ((iov[i].iov_len && !iov[i].iov_base) || iov[i].iov_len > SSIZE_MAX - total)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	int fd = __atomic_load_n(&f->hfd, __ATOMIC_ACQUIRE);
	bool direct = f->direct && (fd == f->fd || fd < 0);
	if (fd < 0)
		fd = f->fd;
	size_t done = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (!iov[i].iov_len)
			continue;
		ssize_t n = direct ? direct_read(fd, f->dio_off_align, iov[i].iov_base, iov[i].iov_len,
						 off + (off_t)done)
				   : sys_pread_full(fd, iov[i].iov_base, iov[i].iov_len, off + (off_t)done);
		if (n < 0)
			return done ? (ssize_t)done : n;
		done += (size_t)n;
		if ((size_t)n < iov[i].iov_len)
			break; /* end of file */
	}
	return (ssize_t)done;
}

ssize_t atomio_pread(atomio *st, int file, void *buf, size_t len, off_t off)
{
	if (len && !buf)
		return -EINVAL;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	return atomio_preadv(st, file, &iov, 1, off);
}
