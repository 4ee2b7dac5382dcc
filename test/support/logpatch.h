/*
 * logpatch.h: read, edit and re-seal atomio logs in memory, for tests and the
 * fuzz target that forge hostile logs (format.h is the spec; which slot or
 * copy is current, and sealing, are the library's own rules, from codec.h).
 * Header-only; nothing here trusts the log it edits: every accessor checks
 * bounds and returns NULL or 0 when the bytes do not fit.
 */
#ifndef ATOMIO_LOGPATCH_H
#define ATOMIO_LOGPATCH_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codec.h"

struct lp {
	uint8_t *b;
	size_t n;
};

static inline int lp_load(struct lp *l, const char *path)
{
	l->b = NULL;
	l->n = 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	struct stat sb;
	if (fstat(fd, &sb) < 0) {
		close(fd);
		return -1;
	}
	l->n = (size_t)sb.st_size;
	l->b = malloc(l->n + 1);
	size_t done = 0;
	while (l->b && done < l->n) {
		ssize_t k = pread(fd, l->b + done, l->n - done, (off_t)done);
		if (k <= 0)
			break;
		done += (size_t)k;
	}
	close(fd);
	return done == l->n ? 0 : -1;
}

/* Write the image back in place (same inode: the log's mode and owner stay). */
static inline int lp_store(const struct lp *l, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0600);
	if (fd < 0)
		return -1;
	size_t done = 0;
	while (done < l->n) {
		ssize_t k = pwrite(fd, l->b + done, l->n - done, (off_t)done);
		if (k <= 0)
			break;
		done += (size_t)k;
	}
	int r = done == l->n && ftruncate(fd, (off_t)l->n) == 0 ? 0 : -1;
	close(fd);
	return r;
}

static inline void lp_free(struct lp *l)
{
	free(l->b);
	l->b = NULL;
	l->n = 0;
}

/* Superblock slot s (0/1), or NULL if the image is too short. */
static inline struct sb_disk *lp_slot(const struct lp *l, int s)
{
	if (l->n < (size_t)(s + 1) * SB_SLOT)
		return NULL;
	return (struct sb_disk *)(l->b + (size_t)s * SB_SLOT);
}

/* Is slot sb valid by recovery's rules, for this image's size? */
static inline int lp_slot_valid(const struct lp *l, const struct sb_disk *sb)
{
	return sb && codec_sb_check(sb, l->n, NULL) == 0;
}

/* The current superblock (as recovery picks it), or NULL. */
static inline struct sb_disk *lp_sb(const struct lp *l)
{
	struct sb_disk *a = lp_slot(l, 0), *b = lp_slot(l, 1);
	int cur = codec_sb_current(a, lp_slot_valid(l, a), b, lp_slot_valid(l, b));
	return cur == 0 ? a : cur == 1 ? b : NULL;
}

static inline void lp_sb_seal(struct sb_disk *sb) { codec_sb_seal(sb); }

/* Catalog copy c of the geometry in sb, or NULL if it does not fit. */
static inline struct cat_hdr_disk *lp_cat(const struct lp *l, const struct sb_disk *sb, int c)
{
	if (!sb || sb->cat_size < CAT_HDR || sb->cat_off > l->n ||
	    sb->cat_size > (l->n - sb->cat_off) / 2)
		return NULL;
	return (struct cat_hdr_disk *)(l->b + sb->cat_off + (size_t)c * sb->cat_size);
}

/* Re-seal a catalog copy (its used bytes must lie inside the copy). */
static inline int lp_cat_seal(const struct sb_disk *sb, struct cat_hdr_disk *c)
{
	if (!c || c->used < CAT_HDR || c->used > sb->cat_size)
		return -1;
	c->csum = fmt_csum(c, c->used, sb->store_id, offsetof(struct cat_hdr_disk, csum));
	return 0;
}

/* The current catalog copy (as recovery picks it), or NULL. */
static inline struct cat_hdr_disk *lp_cat_cur(const struct lp *l, const struct sb_disk *sb)
{
	struct cat_hdr_disk h[2];
	bool ok[2];
	for (int i = 0; i < 2; i++) {
		struct cat_hdr_disk *c = lp_cat(l, sb, i);
		ok[i] = c && !codec_cat_problem(c, sb->store_id, sb->cat_size);
		if (ok[i])
			h[i] = *c;
	}
	int cur = codec_cat_current(h, ok);
	return cur < 0 ? NULL : lp_cat(l, sb, cur);
}

/* Entry i of a catalog copy (bounds-checked against used), or NULL. */
static inline struct cat_entry_disk *lp_cat_entry(struct cat_hdr_disk *c, uint32_t i)
{
	uint64_t pos = CAT_HDR;
	for (uint32_t k = 0;; k++) {
		if (pos + CAT_ENTRY_HDR > c->used)
			return NULL;
		struct cat_entry_disk *e = (struct cat_entry_disk *)((uint8_t *)c + pos);
		if (k == i)
			return e;
		pos = align_up(pos + CAT_ENTRY_HDR + e->path_len, 8);
	}
}

/* The record header at area offset pos, or NULL when it does not fit. */
static inline struct rec_hdr_disk *lp_rec(const struct lp *l, const struct sb_disk *sb, uint64_t pos)
{
	if (sb->area_off > l->n || pos > l->n - sb->area_off || l->n - sb->area_off - pos < REC_HDR)
		return NULL;
	return (struct rec_hdr_disk *)(l->b + sb->area_off + pos);
}

/* Re-seal the record at pos after its bytes were edited (rec_len kept). */
static inline int lp_rec_seal(const struct lp *l, const struct sb_disk *sb, uint64_t pos)
{
	struct rec_hdr_disk *h = lp_rec(l, sb, pos);
	if (!h || h->rec_len < REC_HDR || h->rec_len > l->n - sb->area_off - pos)
		return -1;
	h->csum = fmt_csum(h, h->rec_len, sb->store_id, offsetof(struct rec_hdr_disk, csum));
	return 0;
}

/* Descriptor i of the record at pos, or NULL. */
static inline struct seg_disk *lp_seg(const struct lp *l, const struct sb_disk *sb, uint64_t pos,
				      uint32_t i)
{
	struct rec_hdr_disk *h = lp_rec(l, sb, pos);
	if (!h || i >= h->nsegs)
		return NULL;
	uint64_t o = pos + REC_HDR + (uint64_t)REC_DESC * i;
	if (o + REC_DESC > l->n - sb->area_off)
		return NULL;
	return (struct seg_disk *)(l->b + sb->area_off + o);
}

/* Area offset of the record after the one at pos (format.h). */
static inline uint64_t lp_rec_next(const struct sb_disk *sb, const struct rec_hdr_disk *h, uint64_t pos)
{
	return codec_rec_next(h, pos, sb->block);
}

/* The record at pos if it is the live one with seq by recovery's rules
 * (codec.h: header, then checksum), or NULL. */
static inline struct rec_hdr_disk *lp_rec_live(const struct lp *l, const struct sb_disk *sb, uint64_t pos,
					       uint64_t seq)
{
	struct rec_hdr_disk *h = lp_rec(l, sb, pos);
	struct rec_expect x = {.seq = seq, .epoch = sb->epoch, .area_size = sb->area_size,
			       .version = sb->version};
	if (!h || codec_rec_check(h, pos, &x) != REC_OK || h->rec_len > l->n - sb->area_off - pos ||
	    !codec_rec_sum_ok(h, h, sb->store_id))
		return NULL;
	return h;
}

/* Number of live records from the head, as recovery walks them. */
static inline unsigned lp_count_recs(const struct lp *l, const struct sb_disk *sb)
{
	uint64_t pos = sb->head_off, seq = sb->head_seq;
	unsigned n = 0;
	for (;;) {
		struct rec_hdr_disk *h = lp_rec_live(l, sb, pos, seq);
		if (!h && pos % sb->block == 0 && pos)
			h = lp_rec_live(l, sb, pos = 0, seq); /* a writer's wrap */
		if (!h)
			return n;
		n++;
		seq++;
		pos = lp_rec_next(sb, h, pos);
		if (n > 100000)
			return n;
	}
}

/* Point every catalog entry whose path (relative to dir) names an existing
 * file at that file's current identity, in both copies, and re-seal them: a
 * log whose data files were copied (new inodes) then recovers into the copies. */
static inline void lp_rebind(const struct lp *l, const char *dir)
{
	struct sb_disk *sb = lp_sb(l);
	if (!sb)
		return;
	for (int ci = 0; ci < 2; ci++) {
		struct cat_hdr_disk *c = lp_cat(l, sb, ci);
		if (!c || c->magic != CAT_MAGIC || c->used > sb->cat_size)
			continue;
		for (uint32_t i = 0; i < c->count; i++) {
			struct cat_entry_disk *e = lp_cat_entry(c, i);
			if (!e || (uint64_t)((uint8_t *)e - (uint8_t *)c) + CAT_ENTRY_HDR + e->path_len > c->used)
				break;
			char path[8192];
			int k = e->flags & CAT_F_RELATIVE
					? snprintf(path, sizeof(path), "%s/%.*s", dir, (int)e->path_len,
						   (char *)(e + 1))
					: snprintf(path, sizeof(path), "%.*s", (int)e->path_len, (char *)(e + 1));
			if (k < 0 || (size_t)k >= sizeof(path))
				continue;
			int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0)
				continue;
			struct stat st;
			struct statfs sfs;
			if (fstat(fd, &st) == 0) {
				e->dev = st.st_dev;
				e->ino = st.st_ino;
				e->fsid = 0;
				if (fstatfs(fd, &sfs) == 0) {
					uint32_t v[2];
					memcpy(v, &sfs.f_fsid, sizeof(v));
					e->fsid = (uint64_t)v[0] | (uint64_t)v[1] << 32;
				}
			}
			close(fd);
		}
		lp_cat_seal(sb, c);
	}
}

/* Run fn in a child that then _exits without closing its store: a "crash"
 * that leaves the log with every committed group still in it.  Returns the
 * child's exit status (0 = fn returned). */
static inline int lp_crash_child(void (*fn)(void *), void *arg)
{
	fflush(NULL);
	pid_t p = fork();
	if (p < 0)
		return -1;
	if (p == 0) {
		fn(arg);
		_exit(0);
	}
	int ws;
	if (waitpid(p, &ws, 0) != p || !WIFEXITED(ws))
		return -1;
	return WEXITSTATUS(ws);
}

#endif
