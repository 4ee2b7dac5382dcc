/*
 * lazy.c: the read index of visible groups (shm.h, struct lz_file), so that
 * every process's reads see lazy groups before they are home.
 *
 * THE INDEX.  Per file id, the segs of its visible groups not yet done, in
 * ticket order (a singly linked list through the seg pool, head and tail).
 * A seg names its bytes in the arena (its group's block, which stays until
 * the group is unindexed: commit.c frees the block after lz_unindex_locked).
 * Everything is written under sh->mu; three words are also read without it:
 * n (atomio_lazy_pending, the fast check of atomio_preadv), nsize and
 * max_end (atomio_file_size).  Their order:
 *  - indexing raises max_end and nsize before n (a reader that sees n sees
 *    the rest), all before the commit returns, i.e. before any reader that
 *    the application orders after the commit starts;
 *  - unindexing happens after the group's home writes returned (the page
 *    cache holds its bytes) and lowers n last.
 * The index lives outside the state's two copies (shm.h): a holder that dies
 * halfway leaves it inconsistent, and lz_rebuild_locked derives it again from
 * the published FIFO (S->lz_head) and the arena blocks' descriptors.
 *
 * THE OVERLAY (lz_preadv).  Snapshot under the mutex, read the file without
 * it, replay the snapshot over what was read; see replay() for why a group
 * that goes home meanwhile does no harm.
 *
 * THE CHUNK FILTER.  A file with pending groups is mostly read where none
 * of them wrote (a database's pages), and the snapshot walks every seg of
 * the file under the store's mutex.  So a counter per (file, 16 KiB chunk),
 * hashed into SHM_LZCHUNKS slots (sh->lzc), counts the indexed writes that
 * touch the chunk: raised as a write's seg is indexed (under the mutex,
 * before the commit returns), lowered as it is unindexed (after its home
 * writes returned), both also under the mutex.  A read whose chunks all
 * count zero, of a file with no pending size change (nsize), reads the file
 * alone: every group that wrote there is home, or committed after the read
 * began (concurrent: old or new).  A collision only sends a read the slow
 * way.  A short read where a pending write ends further (max_end) goes the
 * slow way too (the zeros up to it are the overlay's).  lz_rebuild_locked
 * recounts the filter; it makes sh->lzc_gen odd meanwhile, and a read that
 * saw it odd, or changed, across its look and its read goes the slow way.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "shm.h"

/* The overlay reads in pieces of at most this many bytes: the snapshot of a
 * piece copies its pending bytes under the mutex. */
#define LZ_PIECE (256u * 1024u)

static struct lz_hdr *lzh(atomio *st) { return &st->sh->lz; }

static uint32_t chunk_slot(uint32_t file, uint64_t chunk)
{
	return (uint32_t)(file_blk_hash(file, chunk) % SHM_LZCHUNKS);
}

/* The chunk filter's counters of a write [off, off + len) of file, by d
 * (+1 indexed, -1 unindexed).  Mutex held. */
static void chunks_add_locked(struct shm *sh, uint32_t file, uint64_t off, uint64_t len, int d)
{
	if (!len)
		return;
	_Atomic uint32_t *c = shm_lzc(sh);
	for (uint64_t k = off >> LZ_CHUNK_SHIFT; k <= (off + len - 1) >> LZ_CHUNK_SHIFT; k++) {
		if (d > 0)
			atomic_fetch_add_explicit(&c[chunk_slot(file, k)], 1, memory_order_relaxed);
		else
			atomic_fetch_sub_explicit(&c[chunk_slot(file, k)], 1, memory_order_release);
	}
}

/* No indexed write touches [off, off + len) of file (lock-free). */
static bool chunks_clear(struct shm *sh, uint32_t file, uint64_t off, uint64_t len)
{
	_Atomic uint32_t *c = shm_lzc(sh);
	for (uint64_t k = off >> LZ_CHUNK_SHIFT; len && k <= (off + len - 1) >> LZ_CHUNK_SHIFT; k++)
		if (atomic_load_explicit(&c[chunk_slot(file, k)], memory_order_acquire))
			return false;
	return true;
}

/* The descriptors of entry idx1's block, or NULL when they do not add up
 * (a damaged state: nothing is indexed from it). */
static const struct shm_seg *ent_segs(atomio *st, uint32_t idx1, const struct arena_blk **bp)
{
	struct shm *sh = st->sh;
	const struct shm_ent *e = shm_ent(sh, idx1);
	if (!e->nsegs || e->nsegs > MAX_SEGMENTS || e->blk >= sh->arena_size)
		return NULL;
	const struct arena_blk *b = shm_blk(sh, e->blk);
	if (b->entry != idx1 || b->size > sh->arena_size - e->blk ||
	    sizeof(*b) + (uint64_t)e->nsegs * sizeof(struct shm_seg) > b->size)
		return NULL;
	const struct shm_seg *d = (const struct shm_seg *)(b + 1);
	for (uint32_t j = 0; j < e->nsegs; j++) {
		if (d[j].file >= MAX_FILES || (d[j].kind != SEG_WRITE && d[j].kind != SEG_SETSIZE))
			return NULL;
		if (d[j].kind == SEG_WRITE && (d[j].data > b->size || d[j].len > b->size - d[j].data))
			return NULL;
	}
	*bp = b;
	return d;
}

static uint32_t seg_take_locked(atomio *st)
{
	struct lz_hdr *h = lzh(st);
	uint32_t i = h->free;
	if (i)
		h->free = shm_lzseg(st->sh, i)->next;
	else
		i = ++h->hw;
	h->used++;
	return i;
}

static void seg_put_locked(atomio *st, uint32_t i)
{
	struct lz_hdr *h = lzh(st);
	shm_lzseg(st->sh, i)->next = h->free;
	h->free = i;
	h->used--;
}

/* Link seg i into its file's list in ticket order (at the tail unless a
 * newer one is there: adoption never reorders visible groups, but the list
 * must not depend on it). */
static void seg_link_locked(atomio *st, struct lz_file *lf, uint32_t i)
{
	struct shm *sh = st->sh;
	struct lz_seg *s = shm_lzseg(sh, i);
	s->next = 0;
	if (!lf->tail || shm_lzseg(sh, lf->tail)->ticket <= s->ticket) {
		if (lf->tail)
			shm_lzseg(sh, lf->tail)->next = i;
		else
			lf->head = i;
		lf->tail = i;
		return;
	}
	uint32_t prev = 0, c = lf->head;
	while (c && shm_lzseg(sh, c)->ticket <= s->ticket) {
		prev = c;
		c = shm_lzseg(sh, c)->next;
	}
	s->next = c;
	if (prev)
		shm_lzseg(sh, prev)->next = i;
	else
		lf->head = i;
}

/* Index entry idx1's segs into the lists; counts is false during a rebuild
 * (which sets the counters once at its end). */
static int index_ent_locked(atomio *st, uint32_t idx1, bool counts)
{
	struct shm *sh = st->sh;
	struct shm_ent *e = shm_ent(sh, idx1);
	const struct arena_blk *b;
	if (!e->nsegs)
		return 0;
	const struct shm_seg *d = ent_segs(st, idx1, &b);
	if (!d)
		return ATOMIO_ECORRUPT;
	if (e->nsegs > SHM_LZSEGS - lzh(st)->used)
		return -EAGAIN; /* nothing indexed: the caller flushes and tries again */
	for (uint32_t j = 0; j < e->nsegs; j++) {
		struct lz_file *lf = shm_lzf(sh, d[j].file);
		uint32_t i = seg_take_locked(st);
		*shm_lzseg(sh, i) = (struct lz_seg){.ent = idx1, .file = d[j].file, .kind = d[j].kind,
						    .off = d[j].off, .len = d[j].len,
						    .data = e->blk + d[j].data, .ticket = e->ticket};
		seg_link_locked(st, lf, i);
		if (d[j].kind == SEG_WRITE) /* also in a rebuild, which zeroed the filter */
			chunks_add_locked(sh, d[j].file, d[j].off, d[j].len, 1);
		if (e->ticket > atomic_load(&lf->hi))
			atomic_store(&lf->hi, e->ticket);
		if (!counts)
			continue;
		/* max_end and nsize before n: a reader that sees n sees them */
		if (d[j].kind == SEG_WRITE && d[j].off + d[j].len > atomic_load(&lf->max_end))
			atomic_store(&lf->max_end, d[j].off + d[j].len);
		if (d[j].kind == SEG_SETSIZE)
			atomic_fetch_add(&lf->nsize, 1);
		atomic_fetch_add(&lf->n, 1);
	}
	return 0;
}

int lz_index_locked(atomio *st, uint32_t idx1)
{
	ASSERT_LOCKED(st);
	return index_ent_locked(st, idx1, true);
}

/* Walk lf's list: drop the segs of entry ent (0: every seg, the list's
 * counters untouched), and recount what stays (n, nsize, max_end). */
static void file_sweep_locked(atomio *st, struct lz_file *lf, uint32_t ent, uint32_t *n, uint32_t *nsize,
			      uint64_t *max_end)
{
	struct shm *sh = st->sh;
	uint32_t prev = 0, c = lf->head;
	*n = *nsize = 0;
	*max_end = 0;
	while (c) {
		struct lz_seg *s = shm_lzseg(sh, c);
		uint32_t next = s->next;
		if (!ent || s->ent == ent) {
			if (prev)
				shm_lzseg(sh, prev)->next = next;
			else
				lf->head = next;
			if (lf->tail == c)
				lf->tail = prev;
			if (ent && s->kind == SEG_WRITE)
				chunks_add_locked(sh, s->file, s->off, s->len, -1);
			if (ent)
				seg_put_locked(st, c);
		} else {
			prev = c;
			(*n)++;
			*nsize += s->kind == SEG_SETSIZE;
			if (s->kind == SEG_WRITE && s->off + s->len > *max_end)
				*max_end = s->off + s->len;
		}
		c = next;
	}
}

/* Store a file's recounted counters: max_end and nsize first, n last, so
 * that a lock-free reader sees n > 0 with the values of the segs that are
 * still indexed or of a superset (whose extra groups are home by now). */
static void file_counts_store(struct lz_file *lf, uint32_t n, uint32_t nsize, uint64_t max_end)
{
	atomic_store(&lf->max_end, max_end);
	atomic_store(&lf->nsize, nsize);
	atomic_store(&lf->n, n);
}

void lz_unindex_locked(atomio *st, uint32_t idx1)
{
	ASSERT_LOCKED(st);
	const struct arena_blk *b;
	if (!shm_ent(st->sh, idx1)->nsegs)
		return;
	const struct shm_seg *d = ent_segs(st, idx1, &b);
	if (!d) {
		shm_damaged_locked(st, "a visible group's block, at its unindexing");
		return;
	}
	uint32_t nsegs = shm_ent(st->sh, idx1)->nsegs;
	for (uint32_t j = 0; j < nsegs; j++) {
		/* each file once: the first seg of its file in the group sweeps it */
		uint32_t k = 0;
		while (k < j && d[k].file != d[j].file)
			k++;
		if (k < j)
			continue;
		struct lz_file *lf = shm_lzf(st->sh, d[j].file);
		uint32_t n, nsize;
		uint64_t max_end;
		/* Recount rather than decrement: max_end must fall when the
		 * largest write goes (a truncation made home by a durable commit
		 * since would otherwise be hidden by it, atomio_file_size). */
		file_sweep_locked(st, lf, idx1, &n, &nsize, &max_end);
		file_counts_store(lf, n, nsize, max_end);
	}
}

/* Rebuild the index from the published FIFO.  n is never lowered to 0 on the
 * way for a file that keeps segs (a lock-free reader would skip the
 * overlay): the lists are rebuilt first, the counters set once at the end.
 * eager and hi are kept: eager counts live mappings of live processes (a
 * dead process's stays, which costs speed only), hi is monotone and the
 * sync targets read it. */
void lz_rebuild_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	struct shm *sh = st->sh;
	struct shm_state *S = st->S;
	for (uint32_t f = 0; f < MAX_FILES; f++) {
		struct lz_file *lf = shm_lzf(sh, f);
		lf->head = lf->tail = 0;
	}
	sh->lz = (struct lz_hdr){0};
	/* The filter recounted by the re-indexing below; readers meanwhile go
	 * the slow way (THE CHUNK FILTER). */
	atomic_fetch_add(&sh->lzc_gen, 1);
	for (uint32_t k = 0; k < SHM_LZCHUNKS; k++)
		atomic_store_explicit(&shm_lzc(sh)[k], 0, memory_order_relaxed);
	uint32_t steps = 0;
	for (uint32_t i = S->lz_head; i && i <= SHM_ENTRIES && steps < S->lz_n; steps++) {
		struct shm_ent *e = shm_ent(sh, i);
		if (atomic_load(&e->owner) && (atomic_load(&e->flags) & ENT_VISIBLE) &&
		    index_ent_locked(st, i, false) == ATOMIO_ECORRUPT)
			shm_damaged_locked(st, "a visible group's block, at the index's rebuild");
		if (i == S->lz_tail)
			break;
		i = e->lz_next;
	}
	for (uint32_t f = 0; f < MAX_FILES; f++) {
		struct lz_file *lf = shm_lzf(sh, f);
		if (!lf->head && !atomic_load(&lf->n))
			continue;
		uint32_t n = 0, nsize = 0;
		uint64_t max_end = 0;
		for (uint32_t c = lf->head; c; c = shm_lzseg(sh, c)->next) {
			const struct lz_seg *s = shm_lzseg(sh, c);
			n++;
			nsize += s->kind == SEG_SETSIZE;
			if (s->kind == SEG_WRITE && s->off + s->len > max_end)
				max_end = s->off + s->len;
		}
		file_counts_store(lf, n, nsize, max_end);
	}
	atomic_fetch_add(&sh->lzc_gen, 1); /* even again: the filter counts what is indexed */
}

/* --- the overlay ------------------------------------------------------------- */

/* One step of a replay: a write's bytes within the piece (len may be 0: it
 * only raises the size to end), or a size change to size. */
struct lz_op {
	uint16_t kind;
	uint64_t off, len; /* SEG_WRITE: the part within the piece; its bytes at at */
	uint64_t end;      /* SEG_WRITE: the write's end; SEG_SETSIZE: the new size */
	size_t at;
};

struct lz_snap {
	struct lz_op *ops;
	char *bytes;
	size_t nops, cap_ops, nbytes, cap_bytes;
};

/* Snapshot file's segs for the piece [po, po + pl) (pl 0: sizes only) into
 * sn, under the mutex: every set-size seg, every write's end (writes outside
 * the piece merged into one size-raising step between set-sizes), and the
 * bytes of the writes that overlap the piece.  0, or -ENOMEM. */
static int snap_take(atomio *st, uint32_t file, uint64_t po, uint64_t pl, struct lz_snap *sn)
{
	struct shm *sh = st->sh;
	size_t need_ops = 64, need_bytes = pl; /* the usual case: one pass */
	for (;;) {
		if (need_ops > sn->cap_ops || need_bytes > sn->cap_bytes) {
			/* grown outside the mutex, then taken again */
			size_t co = need_ops * 2 + 16, cb = need_bytes + need_bytes / 2 + 4096;
			struct lz_op *o = realloc(sn->ops, co * sizeof(*o));
			if (!o)
				return -ENOMEM;
			sn->ops = o;
			sn->cap_ops = co;
			char *b = realloc(sn->bytes, cb);
			if (!b)
				return -ENOMEM;
			sn->bytes = b;
			sn->cap_bytes = cb;
		}
		need_ops = need_bytes = 0;
		bool fits = true;
		sn->nops = sn->nbytes = 0;
		shm_lock(st);
		for (uint32_t c = shm_lzf(sh, file)->head; c; c = shm_lzseg(sh, c)->next) {
			const struct lz_seg *s = shm_lzseg(sh, c);
			uint64_t lo = s->off > po ? s->off : po;
			uint64_t hi = s->off + s->len < po + pl ? s->off + s->len : po + pl;
			bool part = s->kind == SEG_WRITE && lo < hi;
			struct lz_op *last = sn->nops ? &sn->ops[sn->nops - 1] : NULL;
			if (s->kind == SEG_WRITE && !part && last && last->kind == SEG_WRITE && !last->len) {
				if (s->off + s->len > last->end)
					last->end = s->off + s->len;
				continue;
			}
			need_ops++;
			need_bytes += part ? hi - lo : 0;
			if (!fits || need_ops > sn->cap_ops || need_bytes > sn->cap_bytes) {
				fits = false;
				continue;
			}
			struct lz_op *op = &sn->ops[sn->nops++];
			*op = (struct lz_op){.kind = s->kind, .end = s->kind == SEG_WRITE ? s->off + s->len : s->off};
			if (part) {
				op->off = lo;
				op->len = hi - lo;
				op->at = sn->nbytes;
				memcpy(sn->bytes + sn->nbytes, shm_arena(sh) + s->data + (lo - s->off), hi - lo);
				sn->nbytes += hi - lo;
			}
		}
		shm_unlock(st);
		if (fits)
			return 0;
	}
}

/* Replay the snapshot over buf, which holds [po, po + pl) of the file as read
 * after the snapshot, whose size was then *size; *size becomes the logical
 * size.
 *
 * Why a group that went home between the snapshot and the read does no harm
 * (the redo rule, as sqlite/pend.c:pend_read for one group): the snapshot
 * holds every visible group of the file not yet done when it was taken,
 * G1..Gk in ticket order, all of their bytes within the piece and all their
 * size changes.  Home writes run in ticket order (I1, I2: commit.c), and a
 * group is unindexed only after its home writes, so the file read afterwards
 * is the file before G1 plus the home writes of a prefix G1..Gi (Gi perhaps
 * halfway), plus groups committed after the snapshot, which are concurrent
 * with this read (API: old, new or a mix).  Replaying G1..Gk in order over
 * it writes every byte any of them wrote with the newest one's value, and
 * applies their size changes in order, ending where the file ends once
 * all of them are home: the same bytes, whichever prefix was already there.
 * The size read (where a short read ended, or the piece's end) is the
 * file's as read: one of G1..Gk half home at the end is replayed whole
 * over it, as inside; a concurrent group's bytes past the old end are
 * concurrent with the read as those inside are. */
static void replay(const struct lz_snap *sn, char *buf, uint64_t po, uint64_t pl, uint64_t *size)
{
	uint64_t sz = *size;
	for (size_t i = 0; i < sn->nops; i++) {
		const struct lz_op *op = &sn->ops[i];
		if (op->kind == SEG_SETSIZE) {
			sz = op->end;
			if (sz < po + pl)
				memset(buf + (sz > po ? sz - po : 0), 0, po + pl - (sz > po ? sz : po));
			continue;
		}
		if (op->len)
			memcpy(buf + (op->off - po), sn->bytes + op->at, op->len);
		if (op->end > sz)
			sz = op->end;
	}
	*size = sz;
}

static void snap_free(struct lz_snap *sn)
{
	free(sn->ops);
	free(sn->bytes);
}

static int home_size(struct afile *f, uint64_t *size)
{
	int fd = __atomic_load_n(&f->hfd, __ATOMIC_ACQUIRE);
	struct stat sb;
	if (atomio_sys->fstat(fd >= 0 ? fd : f->fd, &sb) < 0)
		return -errno;
	*size = (uint64_t)sb.st_size;
	return 0;
}

/* One piece [po, po + pl) into buf: the bytes that are there (the rest of
 * the piece zero), or a negative errno. */
static ssize_t piece_read(atomio *st, struct afile *f, struct lz_snap *sn, char *buf, uint64_t po, uint64_t pl)
{
	int r = snap_take(st, f->id, po, pl, sn);
	if (r < 0)
		return r;
	/* The file's size is not looked at (an fstat per read): a short read
	 * says where the file ends, a whole one that it ends at po + pl or
	 * later, which is all replay needs within the piece. */
	ssize_t n = file_read_home(st, f, buf, (size_t)pl, (off_t)po);
	if (n < 0)
		return n;
	memset(buf + n, 0, (size_t)(pl - (uint64_t)n));
	uint64_t size = po + (uint64_t)n;
	replay(sn, buf, po, pl, &size);
	return size > po ? (ssize_t)(size - po < pl ? size - po : pl) : 0;
}

/* The read of one buffer where the chunk filter says no pending write
 * touches it (THE CHUNK FILTER): the file's bytes, or -1 where the slow way
 * must answer (the filter being recounted, or changed, a pending size
 * change, or the file ending short of a pending write's end). */
static ssize_t clear_read(atomio *st, struct afile *f, void *buf, size_t len, off_t off)
{
	struct shm *sh = st->sh;
	const struct lz_file *lf = shm_lzf(sh, f->id);
	uint64_t g = atomic_load_explicit(&sh->lzc_gen, memory_order_acquire);
	if ((g & 1) || atomic_load(&lf->nsize) || !chunks_clear(sh, f->id, (uint64_t)off, len))
		return -1;
	ssize_t n = file_read_home(st, f, buf, len, off);
	if (n < 0 || atomic_load_explicit(&sh->lzc_gen, memory_order_acquire) != g)
		return n < 0 ? n : -1;
	if ((size_t)n < len && atomic_load(&lf->max_end) > (uint64_t)off + (uint64_t)n)
		return -1;
	return n;
}

ssize_t lz_preadv(atomio *st, int file, const struct iovec *iov, int iovcnt, off_t off)
{
	struct afile *f = file_app(st, file);
	if (!f)
		return -EINVAL;
	size_t total;
	if (iov_total(iov, iovcnt, &total) < 0)
		return -EINVAL;
	if (iovcnt == 1 && total) {
		ssize_t n = clear_read(st, f, iov[0].iov_base, total, off);
		if (n != -1)
			return n;
	}
	atomic_fetch_add(&st->sh->stats.lazy_reads, 1);
	size_t pmax = total < LZ_PIECE ? total : LZ_PIECE;
	char *buf = malloc(pmax ? pmax : 1);
	if (!buf)
		return -ENOMEM;
	struct lz_snap sn = {0};
	size_t done = 0;
	int vi = 0;
	size_t vo = 0; /* within iov[vi] */
	ssize_t r = 0;
	while (done < total) {
		uint64_t pl = total - done < pmax ? total - done : pmax;
		r = piece_read(st, f, &sn, buf, (uint64_t)off + done, pl);
		if (r < 0)
			break;
		for (size_t k = 0; k < (size_t)r;) {
			if (vo == iov[vi].iov_len) {
				vi++;
				vo = 0;
				continue;
			}
			size_t c = iov[vi].iov_len - vo < (size_t)r - k ? iov[vi].iov_len - vo : (size_t)r - k;
			memcpy((char *)iov[vi].iov_base + vo, buf + k, c);
			vo += c;
			k += c;
		}
		done += (size_t)r;
		if ((uint64_t)r < pl)
			break; /* end of file */
	}
	snap_free(&sn);
	free(buf);
	return r < 0 && !done ? r : (ssize_t)done;
}

int lz_file_size(atomio *st, int file, uint64_t *size)
{
	struct afile *f = file_app(st, file);
	if (!f)
		return -EINVAL;
	struct lz_file *lf = shm_lzf(st->sh, f->id);
	/* Loads in the order n, max_end, the file's size (lazy.c, THE INDEX). */
	uint32_t n = atomic_load(&lf->n);
	if (!n)
		return home_size(f, size);
	if (!atomic_load(&lf->nsize)) {
		uint64_t me = atomic_load(&lf->max_end);
		int r = home_size(f, size);
		if (r == 0 && me > *size)
			*size = me;
		return r;
	}
	struct lz_snap sn = {0};
	int r = snap_take(st, f->id, 0, 0, &sn);
	if (r == 0)
		r = home_size(f, size);
	if (r == 0)
		replay(&sn, NULL, 0, 0, size);
	snap_free(&sn);
	return r;
}

int lz_eager(atomio *st, int file, bool on)
{
	if (!file_app(st, file))
		return -EINVAL;
	struct lz_file *lf = shm_lzf(st->sh, (uint32_t)file);
	if (on)
		atomic_fetch_add(&lf->eager, 1);
	else {
		uint32_t v = atomic_load(&lf->eager);
		while (v && !atomic_compare_exchange_weak(&lf->eager, &v, v - 1))
			;
	}
	return 0;
}

int atomio_file_size(atomio *st, int file, uint64_t *size)
{
	if (!st || !size)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	fd_use_begin(st);
	int r = lz_file_size(st, file, size);
	fd_use_end(st);
	return r;
}

int atomio_lazy_pending(atomio *st, int file)
{
	if (!st)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	struct afile *f = file_app(st, file);
	if (!f)
		return -EINVAL;
	return atomic_load(&shm_lzf(st->sh, f->id)->n) != 0;
}
