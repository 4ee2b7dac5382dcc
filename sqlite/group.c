/*
 * group.c: the transaction's group (GROUPS, internals.h): a connection's
 * pending group turned into one atomio group (the diff against the mapped
 * file, add_group; the file's bytes under the group, base_read), its commit
 * (commit_group), the commit of several databases' groups as one (commit_set,
 * with its group markers "DB-atomio-group"), and the list of groups synced
 * and waiting for their commit point (the ready list, g_ready under g_rmu).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "atomio.h"
#include "sysio.h"
#include "internals.h"

/* Connections whose groups SQLite synced (phase one of a commit) and that
 * wait for its commit point: a thread's ones are all the databases of one
 * transaction, since SQLite runs a connection's commit in one thread, phase
 * one for every database, then the commit.  One list for all threads,
 * under its own mutex (a leaf: nothing else is taken while it is held),
 * not one per thread: with locking_mode=EXCLUSIVE SQLite never unlocks, so
 * a group synced by a ROLLBACK's playback stays ready (until the
 * connection writes again: x_write), and the connection may then be closed
 * by another thread, which must unlink it from a list it cannot reach
 * otherwise. */
static pthread_mutex_t g_rmu = PTHREAD_MUTEX_INITIALIZER;
static struct aconn *g_ready;

/* --- groups ------------------------------------------------------------------ */

static uint32_t be32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* SQLite truncates a shrinking database only after the commit, in its own
 * unsynced xTruncate (so that a rollback journal never has to hold the pages
 * cut off).  Without an on-disk journal the group is the commit, so the
 * truncation joins it: the new size is in the group's own page 1 (header
 * bytes 28..31, valid when bytes 92..95 match the change counter). */
static void fold_truncation(aconn *c)
{
	struct pend *p = &c->pend;
	const unsigned char *h = p->plen >= 100 ? pend_page(p, 0) : NULL;
	if (!h || be32(h + 24) != be32(h + 92))
		return;
	uint32_t psz = (uint32_t)h[16] << 8 | h[17];
	if (psz == 1)
		psz = 65536;
	int64_t size = (int64_t)be32(h + 28) * psz;
	if (psz != (uint32_t)p->plen || size == 0 || size >= p->lsize)
		return;
	pend_truncate(p, size);
}

/* Is the transaction's rollback journal on disk (at SQLITE_FCNTL_SYNC of
 * phase one)?  Then the journal's header is written and synced: its first
 * byte (the magic) is not zero, also with synchronous=OFF, where SQLite
 * writes the magic at once.  A journal file whose first byte is zero (or an
 * empty one) is no journal of this transaction but a leftover SQLite itself
 * never plays back nor deletes (a writer killed in a rollback mode before
 * its journal's first sync, or PERSIST's and TRUNCATE's finished ones):
 * taking it for a journal would commit each database of a transaction over
 * several on its own (commit_set not used), in MEMORY mode too.  The test is
 * SQLite's own for a hot journal.  Unreadable: assume a journal (each
 * database then commits at its sync, as SQLite's super-journal expects). */
bool journal_on_disk(struct adb *d)
{
	char *j = suffixed(d->db_path, "-journal");
	if (!j)
		return true;
	int fd = open(j, O_RDONLY | O_CLOEXEC);
	int e = errno;
	free(j);
	if (fd < 0)
		return e != ENOENT;
	unsigned char first = 0;
	ssize_t r;
	do
		r = pread(fd, &first, 1, 0);
	while (r < 0 && errno == EINTR);
	close(fd);
	return r < 0 || first != 0;
}

/* Map the database read-only up to at least `end`, to compare pages with
 * what the file holds without a read call per page.  Only bytes below the
 * file's size are touched, and only the writer changes that size, under the
 * EXCLUSIVE lock held while committing.  False: use pread. */
static bool map_base(aconn *c, int64_t end)
{
	if ((int64_t)c->maplen >= end)
		return c->map != NULL;
	if (c->map)
		munmap(c->map, c->maplen);
	c->map = NULL;
	c->maplen = 0;
	size_t len = ((size_t)end + (64u << 20) - 1) & ~((size_t)(64u << 20) - 1);
	void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, c->lockfd, 0);
	if (m == MAP_FAILED)
		return false;
	c->map = m;
	c->maplen = len;
	return true;
}

/* A run of changed bytes of a page, [start, end). */
struct span {
	int64_t start, end;
};

/* The bytes of page e that differ from cmp (what the file holds before the
 * group), as few spans as fit: runs closer than a range descriptor (32
 * bytes) are joined.  At most e->len / 33 + 1 spans; returns their count,
 * and their bytes in *bytes. */
static size_t diff_spans(const struct pent *e, const unsigned char *cmp, struct span *out, int64_t *bytes)
{
	int64_t i = 0, n = e->len;
	size_t k = 0;
	*bytes = 0;
	while (i < n) {
		/* equal stretches, 64 bytes at a time, then bytewise */
		while (i + 64 <= n && !memcmp(e->data + i, cmp + i, 64))
			i += 64;
		while (i < n && e->data[i] == cmp[i])
			i++;
		if (i == n)
			break;
		int64_t start = i, end = i;
		for (;;) {
			while (end < n && e->data[end] != cmp[end])
				end++;
			int64_t gap = end;
			while (gap < n && gap - end < 32 && e->data[gap] == cmp[gap])
				gap++;
			if (gap < n && gap - end < 32)
				end = gap; /* a short run of equal bytes: bridge it */
			else
				break;
		}
		out[k++] = (struct span){start, end};
		*bytes += end - start;
		i = end;
	}
	return k;
}

/* Add page e to tx: only the bytes that differ from what the file holds
 * before the group.  Replay applies groups in order onto the file as every
 * earlier group left it, which is what the page cache shows now, so the
 * unchanged bytes need no logging.  Most transactions change a few hundred
 * bytes of each page they write; the log write shrinks to match.  But a
 * page whose changes are scattered (VACUUM moves every row) would take
 * more as ranges than whole (32 bytes per range), and a group has at most
 * max_segs ranges: such a page is logged whole, as one range.  *spare: the
 * ranges this group may still take beyond one per page (add_group). */
static int add_diff(aconn *c, atomio_tx *tx, int fid, const struct pent *e, unsigned char *base,
		    struct span *sp, int64_t *spare)
{
	const struct pend *p = &c->pend;
	int64_t base_end = p->truncated && p->min_trunc < p->base_size ? p->min_trunc : p->base_size;
	int64_t have = base_end > e->off ? base_end - e->off : 0;
	if (have > e->len)
		have = e->len;
	const unsigned char *cmp = base;
	/* The map shows the file, without lazy groups not yet home (ours at
	 * synchronous=NORMAL, anyone's): then the base is the page as our last
	 * commit left it (BASE CACHE), or the file where no group since the
	 * chain began wrote the page, or else read through base_read, which
	 * overlays them -- recovery replays this group after them (a crash
	 * that loses them loses this one too: commit order). */
	const unsigned char *cached =
		c->base_mode == BASE_CHAIN && c->db->bc.plen == e->len ? pend_page(&c->db->bc, e->off) : NULL;
	bool file_ok = c->base_mode == BASE_FILE || (c->base_mode == BASE_CHAIN && e->off + e->len <= c->file_real);
	if (have == e->len && cached) {
		cmp = cached;
	} else if (have == e->len && file_ok && map_base(c, base_end)) {
		cmp = c->map + e->off; /* no copy, no syscall */
	} else {
		if (have > 0 && base_read(c, base, have, e->off) < 0)
			return -EIO;
		memset(base + have, 0, (size_t)(e->len - have));
	}
	int64_t bytes;
	size_t k = diff_spans(e, cmp, sp, &bytes);
	if (k == 0) {
		*spare += 1; /* the page's range is not needed */
		return 0;
	}
	if ((int64_t)k - 1 > *spare || 32 * (int64_t)k + bytes > 32 + e->len)
		return atomio_tx_write(tx, fid, e->data, (size_t)e->len, e->off);
	*spare -= (int64_t)k - 1;
	for (size_t i = 0; i < k; i++) {
		int r = atomio_tx_write(tx, fid, e->data + sp[i].start, (size_t)(sp[i].end - sp[i].start),
					e->off + sp[i].start);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Bytes of log a group needs, counting every entry as its own range. */
uint64_t group_need(const struct pend *p)
{
	return 64 + 32 * ((uint64_t)p->n + 2) + (uint64_t)p->bytes;
}

/* Ranges a group may take at most, logged whole: one per page and two
 * truncations (add_group). */
static int64_t group_ranges(const struct pend *p) { return (int64_t)p->n + 2; }

/* Add connection c's pending group to tx, its database being file fid of
 * the tx's store.  *spare: ranges the tx may take beyond group_ranges() of
 * each of its groups (the store's max_segs less their sum), which diffs
 * use up; a group's record is never larger than logged whole (group_need).
 * 0 or < 0. */
static int add_group(aconn *c, atomio_tx *tx, int fid, int64_t *spare)
{
	struct pend *p = &c->pend;
	size_t *ord = pend_order(p);
	/* Only the bytes that change, where writes cannot overlap. */
	bool diff = c->diff && p->uniform && *spare >= 0;
	atomio *st = diff ? writer_store(c->db) : NULL;
	/* Once per group: EXCLUSIVE is held, so no group is committed
	 * meanwhile; one going home meanwhile is in the file either way. */
	c->base_mode = !st || atomio_lazy_pending(st, c->db->fid) == 0 ? BASE_FILE : c->chain ? BASE_CHAIN : BASE_READ;
	if (c->base_mode == BASE_CHAIN && (c->file_real = f_size(c->db->wfd)) < 0)
		c->base_mode = BASE_READ;
	unsigned char *base = diff ? malloc((size_t)p->plen) : NULL;
	struct span *sp = diff ? malloc(((size_t)p->plen / 33 + 1) * sizeof(*sp)) : NULL;
	int r = ord && ((base && sp) || !diff) ? 0 : -ENOMEM;
	/* Shrink to the smallest size the transaction truncated to, then its
	 * writes, then its final size (zeros up to it, so that the file has it
	 * even when the last page ends in bytes the diff left out). */
	if (r == 0 && p->truncated)
		r = atomio_tx_truncate(tx, fid, p->min_trunc);
	for (size_t i = 0; r == 0 && i < p->n; i++) {
		const struct pent *e = &p->v[ord[i]];
		if (diff)
			r = add_diff(c, tx, fid, e, base, sp, spare);
		else
			r = atomio_tx_write(tx, fid, e->data, (size_t)e->len, e->off);
	}
	if (r == 0 && (p->truncated || p->lsize > p->base_size))
		r = atomio_tx_truncate(tx, fid, p->lsize);
	free(sp);
	free(base);
	free(ord);
	return r;
}

/* The SQLite result of a failed commit of c's group (r < 0); committed: the
 * store may have written part of it. */
static int commit_failed(aconn *c, int r, bool committed)
{
	struct adb *d = c->db;
	if (r == -ENOMEM)
		return SQLITE_IOERR_NOMEM;
	if (r == -E2BIG) {
		sqlite3_log(SQLITE_IOERR_WRITE,
			    "atomio: a transaction does not fit the log %s (%llu bytes); "
			    "nothing was written (create the log larger with atomio_log_size=)",
			    d->log_path, (unsigned long long)d->capacity);
		return SQLITE_IOERR_WRITE;
	}
	log_atomio(SQLITE_IOERR_FSYNC, d, "committing to", r, NULL);
	if (committed)
		repair_store(d);
	return SQLITE_IOERR_FSYNC;
}

static void remove_marker(struct adb *d);

/* d took part in a transaction over several databases whose group was
 * committed in the log mark_log but whose checkpoint failed (commit_set):
 * its marker stays, and the group may be live in that log.  A connection
 * that reads first recovers it (settle: recover_marked), but one in
 * locking_mode=EXCLUSIVE never settles again: if it committed a later
 * group of d (to d's own log), a recovery from the marker would replay
 * d's own log first and the shared log last, and the old group over the
 * later one.  So before any later group of d commits, the shared log is
 * checkpointed (the group synced everywhere, no longer replayed) and d's
 * marker goes; if it cannot be, the commit fails with nothing written.
 * EXCLUSIVE held on d. */
static int unmark(struct adb *d)
{
	if (!d->mark_log)
		return SQLITE_OK;
	pthread_mutex_lock(&g_mu);
	atomio *st = NULL;
	for (struct adb *o = g_dbs; o && !st; o = o->next)
		if (!strcmp(o->log_path, d->mark_log))
			st = writer_store(o);
	char err[512] = "";
	/* Our store of that log if we have one, else a handle of our own
	 * (replay_log: settled and checkpointed, whoever else holds it). */
	int r = st ? atomio_checkpoint(st) : replay_log(d->mark_log, err, sizeof(err));
	pthread_mutex_unlock(&g_mu);
	if (r < 0) {
		sqlite3_log(SQLITE_IOERR_FSYNC, "atomio: %s: an earlier transaction over several databases "
			    "is not synced in %s (%s %s); nothing was written", d->db_path, d->mark_log,
			    atomio_strerror(r), err);
		return SQLITE_IOERR_FSYNC;
	}
	remove_marker(d);
	free(d->mark_log);
	d->mark_log = NULL;
	return SQLITE_OK;
}

/* BASE CACHE (struct adb).  At most this many pages (4 MiB of 4 KiB
 * pages); beyond, the chain ends until no lazy group is pending. */
#define BC_MAX 1024

void bc_drop(struct adb *d)
{
	pend_clear(&d->bc);
	d->bc_ok = false;
	d->bc_st = NULL;
}

/* The change counter c's group writes (page 1's, with the valid-for
 * number beside it), or -1. */
static int64_t group_counter(const struct pend *p)
{
	const unsigned char *h = p->uniform && p->plen >= 100 ? pend_page(p, 0) : NULL;
	return h && be32(h + 24) == be32(h + 92) ? (int64_t)be32(h + 24) : -1;
}

/* Before c's group is built: may its diff take its base from the cache
 * (c->chain)?  A chain begins where no lazy group of the database is
 * pending (the file is then every page's base), and goes on while each
 * group is this process's and follows the last one: its change counter
 * one more than the last cached commit's (every SQLite commit bumps it,
 * whichever connection or process makes it).  EXCLUSIVE held. */
static void bc_begin(aconn *c, atomio *st)
{
	struct adb *d = c->db;
	int64_t ctr = group_counter(&c->pend);
	if (d->bc_st != st || !c->diff)
		bc_drop(d);
	if (st && atomio_lazy_pending(st, d->fid) == 0) {
		bc_drop(d);
		d->bc_ok = true;
		d->bc_st = st;
	} else if (!d->bc_ok || ctr < 0 || (uint32_t)ctr != d->bc_counter + 1) {
		bc_drop(d);
	}
	c->chain = d->bc_ok;
}

/* c's group committed (r == 0; lazily or not) or not: the cache takes its
 * pages as the new base, or the chain ends (a durable commit: its pages and
 * every group before it are home when it returns, so the next commit finds
 * none pending and begins a chain anew: nothing to copy at FULL).  EXCLUSIVE
 * held. */
static void bc_end(aconn *c, int r, bool lazy)
{
	struct adb *d = c->db;
	struct pend *p = &c->pend;
	int64_t ctr = group_counter(p);
	c->chain = false;
	if (!d->bc_ok)
		return;
	if (r != 0 || !lazy || ctr < 0 || p->truncated || !p->uniform || d->bc.n + p->n > BC_MAX) {
		bc_drop(d);
		return;
	}
	if (!d->bc.active)
		pend_begin(&d->bc, 0);
	for (size_t i = 0; i < p->n; i++)
		if (pend_write(&d->bc, p->v[i].data, p->v[i].len, p->v[i].off) < 0 || !d->bc.uniform) {
			bc_drop(d);
			return;
		}
	d->bc_counter = (uint32_t)ctr;
}

int commit_group(aconn *c, bool fold)
{
	struct pend *p = &c->pend;
	ready_drop(c);
	if (!p->active)
		return SQLITE_OK;
	if (fold)
		fold_truncation(c);
	struct adb *d = c->db;
	atomio *st = writer_store(d);
	int urc = st ? unmark(d) : SQLITE_IOERR_WRITE;
	if (urc != SQLITE_OK) {
		pend_clear(p);
		return urc;
	}
	bc_begin(c, st);
	atomio_tx *tx = NULL;
	int r = atomio_tx_begin(st, &tx);
	int64_t spare = (int64_t)d->max_segs - group_ranges(p);
	if (r == 0)
		r = add_group(c, tx, d->fid, &spare);
	bool committed = false, to_wal = r == 0 && group_sets_wal(c);
	/* SYNCHRONOUS (internals.h): at NORMAL and OFF the commit of one
	 * database's group with its journal in memory (fold: phase two, or a
	 * batch-atomic commit) is lazy, as SQLite's WAL at NORMAL makes a
	 * commit atomic at once and durable later.  SQLite's lock is given up
	 * after this returns, and every reader of every process sees the
	 * group at once (lazy_read).  At FULL and EXTRA, and where a journal
	 * on disk or a super-journal is the commit point (not fold), or the
	 * database goes to WAL (its store is closed right after), the commit
	 * is durable before SQLite may unlock: a reader never sees a commit
	 * a power cut could take back. */
	bool lazy = fold && !to_wal && c->sync_level <= 1;
	if (r == 0) {
		r = lazy ? atomio_tx_commit_lazy(tx, NULL) : atomio_tx_commit(tx);
		committed = true;
	} else if (tx) {
		atomio_tx_abort(tx);
	}
	int64_t lsize = p->lsize;
	bc_end(c, r, lazy);
	pend_clear(p);
	__atomic_store_n(&d->size, r == 0 ? lsize : -1, __ATOMIC_RELAXED);
	if (r == 0 && to_wal) {
		/* The database is a WAL database from now on (wal.c):
		 * nothing may stay in its log. */
		pthread_mutex_lock(&g_mu);
		wal_drop_store(d);
		pthread_mutex_unlock(&g_mu);
	}
	return r == 0 ? SQLITE_OK : commit_failed(c, r, committed);
}

void ready_add(aconn *c)
{
	pthread_mutex_lock(&g_rmu);
	c->rowner = pthread_self();
	if (!c->ready) {
		c->ready = true;
		c->rnext = NULL;
		aconn **pp = &g_ready;
		while (*pp)
			pp = &(*pp)->rnext;
		*pp = c;
	}
	pthread_mutex_unlock(&g_rmu);
}

void ready_drop(aconn *c)
{
	pthread_mutex_lock(&g_rmu);
	if (c->ready) {
		for (aconn **pp = &g_ready; *pp; pp = &(*pp)->rnext)
			if (*pp == c) {
				*pp = c->rnext;
				break;
			}
		c->ready = false;
		c->rnext = NULL;
	}
	pthread_mutex_unlock(&g_rmu);
}

/* This thread's ready connections with a pending group, oldest first, up
 * to max in m (*more: how many beyond), marked in use until ready_give
 * (another thread's x_close of one, stale in EXCLUSIVE mode, waits). */
static int ready_take(aconn **m, int max, int *more)
{
	int n = 0;
	*more = 0;
	pthread_mutex_lock(&g_rmu);
	for (aconn *x = g_ready; x; x = x->rnext)
		if (x->pend.active && pthread_equal(x->rowner, pthread_self())) {
			if (n < max) {
				x->rbusy = true;
				m[n++] = x;
			} else {
				(*more)++;
			}
		}
	pthread_mutex_unlock(&g_rmu);
	return n;
}

static void ready_give(aconn **m, int n)
{
	pthread_mutex_lock(&g_rmu);
	for (int i = 0; i < n; i++)
		m[i]->rbusy = false;
	pthread_mutex_unlock(&g_rmu);
}

/* c is being closed: off the list, once no commit uses it. */
void ready_forget(aconn *c)
{
	pthread_mutex_lock(&g_rmu);
	while (c->rbusy) {
		pthread_mutex_unlock(&g_rmu);
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&g_rmu);
	}
	pthread_mutex_unlock(&g_rmu);
	ready_drop(c);
}

/* Write d's group marker (the member databases, the first one's log holding
 * the group) and make it durable. */
static int write_marker(struct adb *d, const char *list, size_t len)
{
	char *g = suffixed(d->db_path, GROUP_SUFFIX);
	if (!g)
		return -ENOMEM;
	int fd = f_open(g, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	free(g);
	if (fd < 0)
		return fd;
	int r = f_write_all(fd, list, len) == 0 && f_fsync(fd) == 0 ? 0 : -EIO;
	f_close(fd);
	return r < 0 ? r : sync_dir_of(d->db_path);
}

static void remove_marker(struct adb *d)
{
	char *g = suffixed(d->db_path, GROUP_SUFFIX);
	if (g)
		f_unlink(g);
	free(g);
}

/* One transaction over several databases (ATTACH), each with a synced
 * group, all under SQLite's EXCLUSIVE locks: commit them as ONE group of the
 * first database's store, which registers the others as files of its own.
 * Their own logs know nothing of it, so until the group is home and synced
 * everywhere, a marker beside each database names the members; whoever then
 * recovers any of them (a reader or writer finding the marker) recovers all,
 * the shared log last (recover_group).  So: markers written and synced, the
 * group committed (one log write), the store checkpointed (the databases
 * synced, the group no longer replayed), the markers removed.  A crash
 * before the commit's log write leaves none of the group; after it, all. */
static int commit_set(aconn **m, int n)
{
	struct adb *pd = m[0]->db;
	for (int i = 0; i < n; i++) {
		int urc = unmark(m[i]->db); /* an earlier set's group first */
		for (int j = 0; urc != SQLITE_OK && j < n; j++) {
			pend_clear(&m[j]->pend);
			ready_drop(m[j]);
		}
		if (urc != SQLITE_OK)
			return urc;
	}
	/* Each write was checked against its own database's log (x_write);
	 * the set goes to the first one's, which must hold all of it: grown
	 * if not (the groups are still in memory only), else nothing is
	 * written and the COMMIT fails. */
	uint64_t need = 0;
	for (int i = 0; i < n; i++)
		need += group_need(&m[i]->pend);
	if (need > pd->capacity) {
		pthread_mutex_lock(&g_mu);
		grow_store(pd, need);
		pthread_mutex_unlock(&g_mu);
	}
	atomio *st = writer_store(pd);
	char list[MAX_SET * 1100];
	size_t len = 0;
	int r = !st ? -EIO : need > pd->capacity ? -E2BIG : 0;
	for (int i = 0; i < n && r == 0; i++) {
		fold_truncation(m[i]);
		size_t l = strlen(m[i]->db->db_path);
		if (!writer_store(m[i]->db) || len + l + 2 > sizeof(list) || memchr(m[i]->db->db_path, '\n', l))
			r = -EINVAL;
		else {
			memcpy(list + len, m[i]->db->db_path, l);
			len += l;
			list[len++] = '\n';
		}
	}
	/* The other databases' own logs must hold no group older than this
	 * one: recovery replays a log's live groups over what the file holds,
	 * so a group of b alone committed before this one and replayed after
	 * it (at b's next recovery, markers or not) would undo this group's
	 * bytes in b but not in a.  So checkpoint their stores first (their
	 * files synced, their logs emptied; nothing to do, and no sync, when
	 * no group of theirs is live). */
	for (int i = 1; i < n && r == 0; i++) {
		atomio *o = writer_store(m[i]->db);
		if (o && o != st && (r = atomio_checkpoint(o)) < 0) {
			log_atomio(SQLITE_IOERR_FSYNC, m[i]->db, "checkpointing (before a transaction over "
				   "several databases)", r, NULL);
			repair_store(m[i]->db); /* a failed store replays its log */
		}
	}
	for (int i = 0; i < n && r == 0; i++)
		r = write_marker(m[i]->db, list, len);
	atomio_tx *tx = NULL;
	if (r == 0)
		r = atomio_tx_begin(st, &tx);
	int64_t spare = pd->max_segs;
	bool to_wal[MAX_SET];
	for (int i = 0; i < n; i++) {
		spare -= group_ranges(&m[i]->pend);
		to_wal[i] = group_sets_wal(m[i]); /* PRAGMA journal_mode=WAL over all databases */
	}
	for (int i = 0; i < n && r == 0; i++) {
		int fid = i == 0 ? pd->fid : atomio_file_open(st, m[i]->db->db_path, 0, 0);
		r = fid < 0 ? fid : add_group(m[i], tx, fid, &spare);
	}
	bool committed = false;
	if (r == 0) {
		r = atomio_tx_commit(tx);
		committed = true;
		if (r == 0)
			r = atomio_checkpoint(st);
	} else if (tx) {
		atomio_tx_abort(tx);
	}
	for (int i = 0; i < n; i++) {
		bc_drop(m[i]->db); /* its base is no longer this process's chain */
		/* Without a commit, or once it is synced everywhere, the group
		 * is nowhere to recover from: no marker.  Else the markers stay
		 * for whoever recovers next (repair_store below, if not). */
		if (!committed || r == 0)
			remove_marker(m[i]->db);
		else
			m[i]->db->mark_log = strdup(pd->log_path); /* NULL: settle's recovery only */
		__atomic_store_n(&m[i]->db->size, r == 0 ? m[i]->pend.lsize : -1, __ATOMIC_RELAXED);
		pend_clear(&m[i]->pend);
		ready_drop(m[i]);
	}
	/* Every log involved is empty now (the checkpoints before and after
	 * the group): a database that went to WAL drops its store and log,
	 * as in commit_group. */
	for (int i = 0; r == 0 && i < n; i++)
		if (to_wal[i]) {
			pthread_mutex_lock(&g_mu);
			wal_drop_store(m[i]->db);
			pthread_mutex_unlock(&g_mu);
		}
	return r == 0 ? SQLITE_OK : commit_failed(m[0], r, committed);
}

/* The commit of c's transaction (NULL: this thread's): every group of it
 * (this thread's ready connections), as one.  More databases than one group may name: refused,
 * nothing written (SQLite's default limit on ATTACH keeps below it). */
int commit_ready(aconn *c)
{
	if (c && !c->ready)
		return commit_group(c, false); /* e.g. a truncation after the commit */
	aconn *m[MAX_SET];
	int more, rc;
	int n = ready_take(m, MAX_SET, &more);
	if (more) {
		/* the others are dropped at the rollback's unlock */
		sqlite3_log(SQLITE_IOERR_WRITE, "atomio: a transaction over %d databases (at most %d "
			    "commit as one); nothing was written", n + more, MAX_SET);
		for (int i = 0; i < n; i++) {
			ready_drop(m[i]);
			pend_clear(&m[i]->pend);
		}
		rc = SQLITE_IOERR_WRITE;
	} else if (n <= 1) {
		rc = n ? commit_group(m[0], true) : c ? commit_group(c, true) : SQLITE_OK;
	} else {
		rc = commit_set(m, n);
	}
	ready_give(m, n);
	return rc;
}

/* SQLite deletes the super-journal of a transaction over several databases
 * (vdbeCommit): its commit point, and the last step of the commit whose
 * result it honours (phase two's are ignored there).  Kept in memory (all
 * its journals ours), it commits the groups its phase one synced. */
int commit_at_super_delete(void) { return commit_ready(NULL); }

int64_t base_read(void *ctx, void *buf, int64_t n, int64_t off)
{
	aconn *c = ctx;
	int64_t lz = lazy_read(c, buf, n, off);
	if (lz != -2)
		return lz < 0 ? -1 : n; /* zero-filled past the end, as below */
	int rc = c->real->pMethods->xRead(c->real, buf, (int)n, off);
	/* A short read below the size the group began with cannot happen
	 * while we hold the lock; the unix VFS zero-fills it anyway. */
	if (rc == SQLITE_OK || rc == SQLITE_IOERR_SHORT_READ)
		return n;
	return -1;
}
