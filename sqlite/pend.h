/*
 * pend.h: the pending group of one connection, as SQLite sees it.
 *
 * Page writes and truncations of the main database file between two syncs
 * are held here (not in the file) until the group is committed, so that the
 * connection's own reads and size queries see them while nobody else can:
 * the file itself changes only when the whole group is committed.
 *
 * The common case is "uniform": every write is one whole, aligned page of the
 * same size, found by a hash on its offset and replaced in place when written
 * again.  Anything else (a partial or unaligned write, a page-size change)
 * switches the group to "general" mode: writes are kept in order, overlaid in
 * order on reads, and committed in order, so that a later write wins.
 */
#ifndef ATOMIO_SQLITE_PEND_H
#define ATOMIO_SQLITE_PEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pent {
	int64_t off;
	int64_t len;
	unsigned char *data;
};

struct pend {
	bool active;        /* a group is open (something was written or truncated) */
	bool uniform;       /* all entries are aligned pages of plen bytes, no overlaps */
	bool truncated;     /* the group shrinks or sets the size */
	int64_t plen;
	int64_t base_size;  /* size of the file when the group began */
	int64_t min_trunc;  /* smallest size the group truncated to */
	int64_t lsize;      /* the file's size as the group leaves it */
	int64_t bytes;      /* data bytes held */
	struct pent *v;
	size_t n, cap;
	size_t *hash;       /* uniform mode: slot -> entry index + 1, 0 = empty */
	size_t hcap;
};

/* Begin a group if none is open; base is the file's current size. */
void pend_begin(struct pend *p, int64_t base);
/* 0 or -ENOMEM. */
int pend_write(struct pend *p, const void *buf, int64_t len, int64_t off);
void pend_truncate(struct pend *p, int64_t size);
/* Fill buf[0..len) for a read at off: base_read(ctx, buf, n, off) reads the
 * file below the group (returns bytes read, < n at its end, or < 0); the rest
 * is zeros or pending data.  Returns the bytes that lie below the logical end
 * of file (len for a full read), or < 0 from base_read. */
int64_t pend_read(const struct pend *p, void *buf, int64_t len, int64_t off,
		  int64_t (*base_read)(void *ctx, void *buf, int64_t n, int64_t off), void *ctx);
/* Uniform mode: the pending page that starts at off, or NULL. */
const unsigned char *pend_page(const struct pend *p, int64_t off);
/* Entries in commit order (sorted by offset in uniform mode). */
size_t *pend_order(const struct pend *p);
void pend_clear(struct pend *p);

#endif
