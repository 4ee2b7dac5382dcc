/*
 * codec.c: the log format's rules, checked and built in one place (codec.h;
 * format.h is the spec they follow, section by section).
 */
#include <errno.h>
#include <limits.h>
#include <lz4.h>
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "atomio.h"
#include "codec.h"

/* --- checksums ------------------------------------------------------------ */

uint64_t fmt_csum(const void *buf, size_t len, uint64_t seed, size_t csum_off)
{
	/* The checksum field reads as zero while hashing: hash around it. */
	XXH3_state_t s;
	static const uint64_t zero;
	/* A stack state must be initialised before a seeded reset: xxhash
	 * skips deriving the secret when the stale seed field matches. */
	XXH3_INITSTATE(&s);
	XXH3_64bits_reset_withSeed(&s, seed);
	XXH3_64bits_update(&s, buf, csum_off);
	XXH3_64bits_update(&s, &zero, 8);
	XXH3_64bits_update(&s, (const char *)buf + csum_off + 8, len - csum_off - 8);
	return XXH3_64bits_digest(&s);
}

int codec_csum_read(uint64_t seed, uint64_t len, size_t csum_off, codec_read_fn rd, void *ctx,
		    char *buf, size_t bufsz, uint64_t *sum)
{
	XXH3_state_t xs;
	XXH3_INITSTATE(&xs); /* see fmt_csum */
	XXH3_64bits_reset_withSeed(&xs, seed);
	for (uint64_t done = 0; done < len;) {
		size_t n = len - done < bufsz ? (size_t)(len - done) : bufsz;
		int r = rd(ctx, done, buf, n);
		if (r < 0)
			return r;
		/* the checksum field, wherever the pieces cut it */
		for (uint64_t b = csum_off; b < csum_off + 8; b++)
			if (b >= done && b < done + n)
				buf[b - done] = 0;
		XXH3_64bits_update(&xs, buf, n);
		done += n;
	}
	*sum = XXH3_64bits_digest(&xs);
	return 0;
}

/* --- superblock ------------------------------------------------------------- */

const char codec_sb_short[] = "the file is shorter than its geometry (truncated?)";

int codec_sb_check(const struct sb_disk *sb, uint64_t file_size, const char **why)
{
	const char *w = NULL;
	int r = ATOMIO_ECORRUPT;
	uint64_t b = sb->block;
	if (memcmp(sb->magic, SB_MAGIC, 8)) {
		static const char zero[8];
		w = memcmp(sb->magic, zero, 8) ? "no atomio magic" : "empty (zeros)";
		r = ATOMIO_ENOTLOG;
	} else if (sb->bom != SB_BOM) {
		w = "written on a host of the other byte order";
		r = ATOMIO_EVERSION;
	} else if (sb->version < FMT_VERSION_MIN || sb->version > FMT_VERSION) {
		w = "format version this atomio does not read";
		r = ATOMIO_EVERSION;
	} else if (fmt_csum(sb, SB_SIZE, SB_SEED, SB_CSUM_OFF) != sb->csum) {
		w = "checksum mismatch (torn or damaged)";
	} else if (b < 512 || b > SB_SLOT || (b & (b - 1))) {
		w = "impossible log block size";
	} else if (sb->cat_off != CAT_OFF || sb->cat_size < 4096 || sb->cat_size > (1ull << 30) ||
		   sb->cat_size % 4096) {
		w = "impossible catalog geometry";
	} else if (sb->area_off < sb->cat_off + 2 * sb->cat_size || sb->area_off % b ||
		   sb->area_size % b || sb->area_size < MIN_LOG_BLOCKS * b ||
		   sb->area_size > (1ull << 48) || sb->area_off > (1ull << 48)) {
		w = "impossible record area geometry";
	} else if (sb->area_off + sb->area_size > file_size) {
		/* a sound superblock of a file cut short (truncated, or a
		 * partial copy): say so, not "corrupt" */
		w = codec_sb_short;
	} else if (sb->head_off >= sb->area_size || sb->head_off % 8) {
		w = "head outside the record area";
	} else if (sb->generation >= MAX_GENERATION) {
		/* its successor could wrap to 0 and lose to the stale slot */
		w = "generation at the limit (2^62)";
	} else {
		r = 0;
	}
	if (why)
		*why = w;
	return r;
}

void codec_sb_seal(struct sb_disk *sb) { sb->csum = fmt_csum(sb, SB_SIZE, SB_SEED, SB_CSUM_OFF); }

int codec_sb_current(const struct sb_disk *s0, bool ok0, const struct sb_disk *s1, bool ok1)
{
	if (ok0 && ok1) {
		/* Both slots valid but of two stores: not something atomio
		 * writes; refuse rather than guess. */
		if (s0->store_id != s1->store_id)
			return -2;
		return s0->generation > s1->generation ? 0 : 1;
	}
	return ok0 ? 0 : ok1 ? 1 : -1;
}

int codec_sb_damaged(const struct sb_disk *s0, bool ok0, const struct sb_disk *s1, bool ok1)
{
	static const char zero[SB_SIZE];
	if (ok0 == ok1)
		return -1;
	return ok0 ? (memcmp(s1, zero, SB_SIZE) ? 1 : -1) : (memcmp(s0, zero, SB_SIZE) ? 0 : -1);
}

/* --- catalog ---------------------------------------------------------------- */

const char *codec_cat_hdr_problem(const struct cat_hdr_disk *h, uint64_t store_id, uint64_t cat_size)
{
	if (h->magic != CAT_MAGIC)
		return "no catalog magic";
	if (h->store_id != store_id)
		return "belongs to another store";
	if (h->used < CAT_HDR || h->used > cat_size || h->count > MAX_FILES)
		return "impossible size";
	if (h->generation >= MAX_GENERATION)
		return "generation at the limit (2^62)";
	return NULL;
}

const char *codec_cat_problem(const void *copy, uint64_t store_id, uint64_t cat_size)
{
	struct cat_hdr_disk h;
	memcpy(&h, copy, sizeof(h));
	const char *why = codec_cat_hdr_problem(&h, store_id, cat_size);
	if (!why && fmt_csum(copy, h.used, store_id, offsetof(struct cat_hdr_disk, csum)) != h.csum)
		why = "checksum mismatch (torn or damaged)";
	return why;
}

int codec_cat_current(const struct cat_hdr_disk h[2], const bool ok[2])
{
	return ok[0] && ok[1] ? (h[1].generation > h[0].generation) : ok[1] ? 1 : ok[0] ? 0 : -1;
}

int codec_cat_damaged(const struct cat_hdr_disk h[2], const bool ok[2])
{
	if (ok[0] == ok[1])
		return -1;
	int other = ok[0] ? 1 : 0;
	return h[other].magic == CAT_MAGIC ? other : -1;
}

uint32_t codec_cat_entry_hdr(const struct cat_hdr_disk *h)
{
	uint32_t eh = h->entry_hdr ? h->entry_hdr : CAT_ENTRY_HDR_V1;
	return eh == CAT_ENTRY_HDR || eh == CAT_ENTRY_HDR_V1 ? eh : 0;
}

const char *codec_cat_entry(const char *cat, uint64_t used, uint32_t eh, uint64_t *pos,
			    struct cat_entry_disk *e, const char **path)
{
	uint64_t p = *pos;
	if (!eh || eh > sizeof(*e) || p > used || used - p < eh)
		return "catalog entry runs past the catalog";
	memset(e, 0, sizeof(*e));
	memcpy(e, cat + p, eh);
	if (e->id >= MAX_FILES || e->path_len == 0 || e->path_len >= PATH_MAX ||
	    e->path_len > used - p - eh || (e->flags & ~CAT_F_RELATIVE) ||
	    (e->id_flags & ~CAT_ID_BTIME) || e->reserved || memchr(cat + p + eh, 0, e->path_len))
		return "malformed catalog entry";
	*path = cat + p + eh;
	*pos = align_up(p + eh + e->path_len, 8);
	return NULL;
}

const char *codec_path_problem(const char *path, size_t len, uint16_t flags)
{
	if (len == 0 || len >= PATH_MAX)
		return "is empty or too long";
	if (memchr(path, 0, len))
		return "holds a NUL byte";
	const bool rel = flags & CAT_F_RELATIVE;
	if (rel == (path[0] == '/'))
		return rel ? "is marked relative but starts with '/'" : "is neither absolute nor marked relative";
	const char *p = rel ? path : path + 1, *end = path + len;
	if (p == end)
		return "is the root directory, no file";
	for (;;) {
		const char *e = memchr(p, '/', (size_t)(end - p));
		size_t n = e ? (size_t)(e - p) : (size_t)(end - p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return "has an empty, '.' or '..' component";
		if (!e)
			return NULL;
		p = e + 1;
	}
}

struct fid codec_cat_entry_fid(const struct cat_entry_disk *e)
{
	return (struct fid){.dev = e->dev, .ino = e->ino, .fsid = e->fsid, .btime_ns = e->btime_ns,
			    .flags = e->id_flags};
}

bool codec_fid_same(const struct fid *rec, const struct fid *now)
{
	/* Same inode on the same filesystem (the device number may change
	 * across boots; the filesystem id usually does not), born at the
	 * same time where both birth times are known. */
	if (rec->ino != now->ino)
		return false;
	if (rec->dev != now->dev && !(rec->fsid && rec->fsid == now->fsid))
		return false;
	if ((rec->flags & now->flags & CAT_ID_BTIME) && rec->btime_ns != now->btime_ns)
		return false;
	return true;
}

size_t codec_cat_put(char *buf, size_t cap, size_t pos, const struct cat_entry_disk *e, const char *path)
{
	size_t need = align_up(CAT_ENTRY_HDR + (size_t)e->path_len, 8);
	if (pos > cap || need > cap - pos)
		return 0;
	memcpy(buf + pos, e, sizeof(*e));
	memcpy(buf + pos + CAT_ENTRY_HDR, path, e->path_len);
	memset(buf + pos + CAT_ENTRY_HDR + e->path_len, 0, need - CAT_ENTRY_HDR - e->path_len);
	return pos + need;
}

void codec_cat_seal(char *buf, uint32_t count, uint64_t store_id, uint64_t gen, uint64_t used)
{
	struct cat_hdr_disk h = {.magic = CAT_MAGIC, .count = count, .entry_hdr = CAT_ENTRY_HDR,
				 .store_id = store_id, .generation = gen, .used = used};
	memcpy(buf, &h, sizeof(h));
	h.csum = fmt_csum(buf, used, store_id, offsetof(struct cat_hdr_disk, csum));
	memcpy(buf, &h, sizeof(h));
}

/* --- records ---------------------------------------------------------------- */

bool codec_rec_fits(uint64_t pos, uint64_t area_size)
{
	return !(pos % 8) && pos <= area_size && area_size - pos >= REC_HDR;
}

enum rec_verdict codec_rec_check(const struct rec_hdr_disk *h, uint64_t pos, const struct rec_expect *x)
{
	if (!codec_rec_fits(pos, x->area_size) || h->magic != REC_MAGIC)
		return REC_NO_RECORD;
	/* A stale record can never pass for a live one (format.h): one of an
	 * earlier open fails the epoch, one of an earlier lap the seq. */
	if (h->epoch != x->epoch)
		return REC_STALE;
	if (h->seq != x->seq)
		return REC_WRONG_SEQ;
	if (h->type == REC_TYPE_PAD)
		return x->version < FMT_VERSION_PAD || h->flags != REC_F_LAST || h->reserved == 0 ||
			       h->nsegs || h->data_len || h->raw_len || h->rec_len < REC_HDR ||
			       h->rec_len % 8 || h->rec_len > x->area_size - pos
			   ? REC_BAD_FIELDS
			   : REC_OK;
	bool lz4 = h->flags & REC_F_LZ4;
	if (h->type != REC_TYPE_GROUP || (h->flags & ~(REC_F_LAST | REC_F_LZ4)) || h->reserved ||
	    h->nsegs == 0 || h->nsegs > MAX_SEGMENTS || h->data_len > x->area_size ||
	    (lz4 ? x->version < 2 || h->data_len == 0 || h->data_len >= h->raw_len ||
		       h->raw_len > COMP_MAX || h->rec_len > COMP_MAX
		 : h->raw_len != h->data_len) ||
	    h->rec_len != rec_len_for(h->nsegs, h->data_len) || h->rec_len > x->area_size - pos)
		return REC_BAD_FIELDS;
	return REC_OK;
}

struct at_pos {
	codec_read_fn rd;
	void *ctx;
	uint64_t base;
};

static int read_at(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct at_pos *a = ctx;
	return a->rd(a->ctx, a->base + off, buf, len);
}

int codec_area_scan(uint64_t store_id, uint32_t version, uint64_t area_size, codec_read_fn rd,
		    void *ctx, char *buf, size_t bufsz, struct codec_found **out, size_t *n)
{
	size_t cap = 64, cnt = 0;
	struct codec_found *f = malloc(cap * sizeof(*f));
	char *cbuf = malloc(64 * 1024);
	int r = f && cbuf ? 0 : -ENOMEM;
	uint64_t skip = 0; /* inside a valid record found: no record starts here */
	for (uint64_t w = 0; r == 0 && w < area_size; w += bufsz) {
		size_t wl = area_size - w < bufsz ? (size_t)(area_size - w) : bufsz;
		r = rd(ctx, w, buf, wl);
		for (size_t o = 0; r == 0 && o + 4 <= wl; o += 8) {
			uint64_t pos = w + o;
			uint32_t magic;
			memcpy(&magic, buf + o, 4);
			if (pos < skip || magic != REC_MAGIC)
				continue;
			struct rec_hdr_disk h;
			if (o + sizeof(h) <= wl)
				memcpy(&h, buf + o, sizeof(h));
			else if (!codec_rec_fits(pos, area_size) || (r = rd(ctx, pos, &h, sizeof(h))) < 0)
				continue;
			struct rec_expect x = {.seq = h.seq, .epoch = h.epoch, .area_size = area_size,
					       .version = version};
			if (codec_rec_check(&h, pos, &x) != REC_OK)
				continue;
			struct at_pos a = {rd, ctx, pos};
			uint64_t sum;
			r = codec_csum_read(store_id, codec_rec_sum_len(&h), offsetof(struct rec_hdr_disk, csum),
					    read_at, &a, cbuf, 64 * 1024, &sum);
			if (r < 0 || sum != h.csum)
				continue;
			if (cnt == cap) {
				struct codec_found *g = realloc(f, 2 * cap * sizeof(*f));
				if (!g) {
					r = -ENOMEM;
					break;
				}
				f = g;
				cap *= 2;
			}
			f[cnt++] = (struct codec_found){.pos = pos, .seq = h.seq, .epoch = h.epoch};
			skip = pos + h.rec_len;
		}
	}
	free(cbuf);
	if (r < 0) {
		free(f);
		return r;
	}
	*out = f;
	*n = cnt;
	return 0;
}

int codec_sb_fallback(const struct sb_disk *sb, const struct codec_found *f, size_t n,
		      uint64_t *epoch, uint64_t *head_seq)
{
	uint64_t max = sb->epoch;
	for (size_t i = 0; i < n; i++)
		if (f[i].epoch > max)
			max = f[i].epoch;
	if (max == sb->epoch)
		return 0;
	/* Only an open writes a new epoch, and it writes the superblock first
	 * (head 0); had a checkpoint followed in that epoch, sb would be of
	 * that epoch.  So: one epoch more, its records from offset 0. */
	if (max != sb->epoch + 1)
		return ATOMIO_ECORRUPT;
	for (size_t i = 0; i < n; i++)
		if (f[i].epoch == max && f[i].pos == 0) {
			*epoch = max;
			*head_seq = f[i].seq;
			return 1;
		}
	return ATOMIO_ECORRUPT;
}

/* A header of this epoch due at seq_end or later: what no healthy log holds
 * after its end. */
static bool due_or_later(const struct rec_hdr_disk *h, uint64_t epoch, uint64_t seq_end)
{
	return h->magic == REC_MAGIC && h->epoch == epoch && h->seq >= seq_end;
}

int codec_stop_suspect(codec_read_fn rd, void *ctx, uint64_t area_size, uint32_t block, uint64_t epoch,
		       uint64_t stop, uint64_t seq_end)
{
	static const struct rec_hdr_disk zero;
	const int where = stop % block == 0 && stop != 0 ? 2 : 1; /* stop, and 0 after a wrap */
	for (int k = 0; k < where; k++) {
		const uint64_t pos = k ? 0 : stop;
		struct rec_hdr_disk h;
		if (!codec_rec_fits(pos, area_size))
			continue;
		int r = rd(ctx, pos, &h, sizeof(h));
		if (r < 0)
			return r;
		if (due_or_later(&h, epoch, seq_end))
			return 1;
		if (!memcmp(&h, &zero, sizeof(h)) || h.rec_len < REC_HDR || h.rec_len > area_size - pos)
			continue; /* never written, or not a record's header */
		/* Written, but no due record: a stale one, torn bytes -- or a
		 * record whose magic, epoch or seq was damaged, which then
		 * cannot say it was due.  Its other fields, its length among
		 * them, still say where the next record starts: packed after
		 * it, at the next block (it ended a log write), or at offset 0
		 * (the next write wrapped).  That one can say it. */
		const uint64_t next[3] = {pos + h.rec_len, align_up(pos + h.rec_len, block), 0};
		for (int i = 0; i < 3; i++) {
			struct rec_hdr_disk n;
			if (!codec_rec_fits(next[i], area_size))
				continue;
			r = rd(ctx, next[i], &n, sizeof(n));
			if (r < 0)
				return r;
			if (due_or_later(&n, epoch, seq_end))
				return 1;
		}
	}
	return 0;
}

uint64_t codec_count_beyond(const struct codec_found *f, size_t n, uint64_t epoch, uint64_t seq_end,
			    uint64_t *lo, uint64_t *hi)
{
	uint64_t c = 0;
	*lo = UINT64_MAX;
	*hi = 0;
	for (size_t i = 0; i < n; i++)
		if (f[i].epoch == epoch && f[i].seq >= seq_end) {
			c++;
			if (f[i].seq < *lo)
				*lo = f[i].seq;
			if (f[i].seq > *hi)
				*hi = f[i].seq;
		}
	return c;
}

bool codec_rec_lz4_ok(const char *rec, const struct rec_hdr_disk *h, char *raw)
{
	/* LZ4_decompress_safe never writes past raw_len (<= COMP_MAX) nor
	 * reads past data_len (codec_rec_check bounds both). */
	const char *cd = rec + REC_HDR + (size_t)REC_DESC * h->nsegs;
	int n = LZ4_decompress_safe(cd, raw, (int)h->data_len, (int)h->raw_len);
	return n >= 0 && (uint64_t)n == h->raw_len;
}

const char *codec_seg_problem(const struct seg_disk *d, uint64_t raw_len, bool file_known)
{
	if (!file_known)
		return "names a file the store never registered";
	if (d->reserved)
		return "has a nonzero reserved field";
	if (d->kind == SEG_WRITE) {
		if (d->len == 0 || d->off > MAX_OFFSET || d->len > MAX_OFFSET - d->off)
			return "writes beyond the largest offset atomio allows (2^62)";
		if (d->data_off > raw_len || d->len > raw_len - d->data_off)
			return "points outside its own data"; /* raw_len = data_len unless LZ4 */
		return NULL;
	}
	if (d->kind == SEG_SETSIZE)
		return d->len || d->data_off || d->off > MAX_OFFSET ? "sets an impossible file size" : NULL;
	return "has an unknown range kind";
}

uint64_t codec_rec_next(const struct rec_hdr_disk *h, uint64_t pos, uint32_t block)
{
	uint64_t end = pos + h->rec_len;
	return h->flags & REC_F_LAST ? align_up(end, block) : end;
}

bool codec_rec_sum_ok(const void *rec, const struct rec_hdr_disk *h, uint64_t store_id)
{
	return fmt_csum(rec, codec_rec_sum_len(h), store_id, offsetof(struct rec_hdr_disk, csum)) == h->csum;
}

uint64_t codec_rec_sum_len(const struct rec_hdr_disk *h)
{
	return h->type == REC_TYPE_PAD ? REC_HDR : h->rec_len;
}

uint64_t codec_rec_seqs(const struct rec_hdr_disk *h)
{
	return h->type == REC_TYPE_PAD ? h->reserved : 1;
}

void codec_rec_pad_build(void *buf, uint64_t seq, uint32_t count, uint64_t epoch, uint64_t len,
			 uint64_t store_id)
{
	struct rec_hdr_disk h = {
		.magic = REC_MAGIC,
		.type = REC_TYPE_PAD,
		.flags = REC_F_LAST,
		.seq = seq,
		.epoch = epoch,
		.rec_len = len,
		.reserved = count,
	};
	h.csum = fmt_csum(&h, REC_HDR, store_id, offsetof(struct rec_hdr_disk, csum));
	memcpy(buf, &h, sizeof(h));
}

void codec_rec_build(char *buf, const struct rec_src *r, uint64_t seq, uint64_t epoch, bool last,
		     uint64_t store_id)
{
	struct rec_hdr_disk h = {
		.magic = REC_MAGIC,
		.type = REC_TYPE_GROUP,
		.flags = last ? REC_F_LAST : 0,
		.seq = seq,
		.epoch = epoch,
		.rec_len = r->rec_len,
		.data_len = r->cdata ? r->clen : r->data_len,
		.nsegs = r->nsegs,
		.raw_len = r->data_len,
	};
	if (r->cdata)
		h.flags |= REC_F_LZ4; /* data_off below is into the raw data (format.h) */
	char *desc = buf + REC_HDR;
	char *data = desc + (size_t)REC_DESC * r->nsegs;
	uint64_t doff = 0;
	for (uint32_t i = 0; i < r->nsegs; i++) {
		const struct seg *s = &r->segs[i];
		struct seg_disk d = {.file = s->file, .kind = s->kind, .off = s->off};
		if (s->kind == SEG_WRITE) {
			d.len = s->len;
			d.data_off = doff;
			if (!r->cdata)
				memcpy(data + doff, s->src, s->len);
			doff += s->len;
		}
		memcpy(desc + (size_t)REC_DESC * i, &d, sizeof(d));
	}
	if (r->cdata) {
		memcpy(data, r->cdata, r->clen);
		doff = r->clen;
	}
	size_t used = REC_HDR + (size_t)REC_DESC * r->nsegs + doff;
	memset(buf + used, 0, r->rec_len - used);
	memcpy(buf, &h, sizeof(h));
	h.csum = fmt_csum(buf, r->rec_len, store_id, offsetof(struct rec_hdr_disk, csum));
	memcpy(buf, &h, sizeof(h));
}

/* Does data of len bytes look worth a full LZ4 attempt?  On incompressible
 * data the attempt is pure cost on the commit's path (LZ4 gives up only near
 * the end); LZ4 on SAMPLE_PIECES pieces of SAMPLE_PIECE bytes spread over the
 * data, gathered, costs about half as much (most of it LZ4's fixed cost:
 * clearing its 16 KiB table; docs/PERFORMANCE.md, "Wear").
 * Spread, not a prefix: a database page often holds its records at one end
 * and its free space (zeros) in the middle: 8 pieces of 512 bytes catch any
 * zero run of 2.3 KiB or more on a 16 KiB page.  The full attempt runs when the
 * sample shrinks by at least 1/32; a page that saves less would rarely save
 * a whole log block (records are padded to blocks).  Under 16 KiB: always. */
#define SAMPLE_PIECE 512u
#define SAMPLE_PIECES 8u
static bool sample_compresses(const char *src, uint64_t len)
{
	const unsigned slen = SAMPLE_PIECE * SAMPLE_PIECES;
	if (len < 4 * (uint64_t)slen)
		return true;
	char sample[SAMPLE_PIECE * SAMPLE_PIECES];
	char out[LZ4_COMPRESSBOUND(SAMPLE_PIECE * SAMPLE_PIECES)];
	for (unsigned i = 0; i < SAMPLE_PIECES; i++)
		memcpy(sample + i * SAMPLE_PIECE, src + (len - SAMPLE_PIECE) / (SAMPLE_PIECES - 1) * i,
		       SAMPLE_PIECE);
	int want = (int)(slen - slen / 32);
	return LZ4_compress_default(sample, out, (int)slen, want) > 0;
}

bool codec_rec_compress(const struct rec_src *r, void **cdata, uint64_t *clen, uint64_t *rec_len)
{
	if (r->data_len < 64 || r->data_len > COMP_MAX)
		return false;
	/* The compressed record must be shorter by at least the 8 bytes of
	 * alignment, and no longer than COMP_MAX (recovery reads it whole). */
	uint64_t fixed = REC_HDR + (uint64_t)REC_DESC * r->nsegs;
	if (fixed + 8 >= COMP_MAX)
		return false;
	uint64_t cap = r->data_len - 8;
	if (cap > COMP_MAX - fixed)
		cap = COMP_MAX - fixed;
	/* LZ4 compresses one contiguous block: gather the ranges' data unless
	 * there is only one (atomio_pwrite's, or a page's). */
	const char *src = NULL;
	char *gather = NULL;
	uint32_t nw = 0;
	for (uint32_t i = 0; i < r->nsegs; i++)
		if (r->segs[i].kind == SEG_WRITE) {
			nw++;
			src = r->segs[i].src;
		}
	if (nw != 1) {
		gather = malloc(r->data_len);
		if (!gather)
			return false;
		uint64_t at = 0;
		for (uint32_t i = 0; i < r->nsegs; i++)
			if (r->segs[i].kind == SEG_WRITE) {
				memcpy(gather + at, r->segs[i].src, r->segs[i].len);
				at += r->segs[i].len;
			}
		src = gather;
	}
	if (!sample_compresses(src, r->data_len)) {
		free(gather);
		return false; /* incompressible by the sample: raw, without the full attempt */
	}
	char *out = malloc(cap);
	int n = out ? LZ4_compress_default(src, out, (int)r->data_len, (int)cap) : 0;
	free(gather);
	uint64_t len = n > 0 ? rec_len_for(r->nsegs, (uint64_t)n) : UINT64_MAX;
	if (len >= r->rec_len || len > COMP_MAX) {
		free(out); /* incompressible: the record stays as it was */
		return false;
	}
	*cdata = out;
	*clen = (uint64_t)n;
	*rec_len = len;
	return true;
}
