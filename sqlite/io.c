/*
 * io.c: the io methods of a main database (aio_methods): reads and the
 * file's size overlaid with the pending group (pend.h), writes and
 * truncations into it, its commit at SQLITE_FCNTL_SYNC and the other file
 * controls (journal modes, phase two, batch atomic writes, pragmas), the
 * close, and WAL's shared memory, passed through to the unix VFS.  The lock
 * methods are lock.c's.
 */
#include <errno.h>
#include <stdint.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "atomio.h"
#include "sysio.h"
#include "internals.h"

/* --- io methods ---------------------------------------------------------------- */

int x_close(sqlite3_file *f)
{
	aconn *c = (aconn *)f;
	ready_forget(c); /* never committed: see x_unlock */
	pend_clear(&c->pend);
	if (c->map)
		munmap(c->map, c->maplen);
	if (c->elock)
		unlock_all(c);
	leave_write(c);
	int rc = c->real->pMethods ? c->real->pMethods->xClose(c->real) : SQLITE_OK;
	pthread_mutex_lock(&g_mu);
	for (aconn **pp = &g_conns; *pp; pp = &(*pp)->cnext)
		if (*pp == c) {
			*pp = c->cnext;
			break;
		}
	pthread_mutex_unlock(&g_mu);
	release_db(c->db);
	if (c->lockfd >= 0)
		close(c->lockfd); /* releases our OFD locks */
	c->base.pMethods = NULL;
	return rc;
}

/* Lazy groups of the store not yet home (atomio_lazy_pending: some process
 * committed to the database with atomio_tx_commit_lazy, e.g. a program under
 * the preload; the VFS itself commits nothing lazily): reads go through
 * atomio, which overlays them.  Only a process with the store open sees
 * them.  The bytes read (the rest of buf zero), -1 on an error, or -2: none
 * pending, read the file. */
int64_t lazy_read(aconn *c, void *buf, int64_t n, int64_t off)
{
	atomio *st = store_pin(c->db);
	if (!st)
		return -2;
	int64_t r = -2;
	if (atomio_lazy_pending(st, c->db->fid) == 1) {
		ssize_t got = atomio_pread(st, c->db->fid, buf, (size_t)n, (off_t)off);
		r = got < 0 ? -1 : got;
		if (got >= 0 && got < n)
			memset((char *)buf + got, 0, (size_t)(n - got));
	}
	store_unpin(c->db);
	return r;
}

/* The size with lazy groups (lazy_read), or -1: none pending. */
static int64_t lazy_size(aconn *c)
{
	atomio *st = store_pin(c->db);
	if (!st)
		return -1;
	uint64_t size;
	int64_t r = atomio_lazy_pending(st, c->db->fid) == 1 && atomio_file_size(st, c->db->fid, &size) == 0
			    ? (int64_t)size
			    : -1;
	store_unpin(c->db);
	return r;
}

static int x_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off)
{
	aconn *c = (aconn *)f;
	if (!c->pend.active) {
		int64_t n = lazy_read(c, buf, amt, off);
		if (n == -2)
			return c->real->pMethods->xRead(c->real, buf, amt, off);
		if (n < 0)
			return SQLITE_IOERR_READ;
		return n < amt ? SQLITE_IOERR_SHORT_READ : SQLITE_OK;
	}
	int64_t n = pend_read(&c->pend, buf, amt, off, base_read, c);
	if (n < 0)
		return SQLITE_IOERR_READ;
	return n < amt ? SQLITE_IOERR_SHORT_READ : SQLITE_OK;
}

/* nolock=1: SQLite takes no locks (the application promises that no one
 * else uses the database), so the store is opened at the first write. */
static int nolock_claim(aconn *c)
{
	if (!c->nolock || writer_store(c->db))
		return SQLITE_OK;
	pthread_mutex_lock(&g_mu);
	int rc = writer_store(c->db) ? SQLITE_OK : open_store(c->db);
	if (rc == SQLITE_OK && !c->counted) {
		c->db->nres++; /* never given up: SQLite never says a transaction ended */
		c->counted = true;
	}
	pthread_mutex_unlock(&g_mu);
	return rc;
}

/* A write in WAL mode (a checkpoint's): straight to the file. */
static int wal_direct(aconn *c, int ioerr)
{
	if (c->db->wal_blocked || c->db->dfd < 0) {
		sqlite3_log(ioerr, "atomio: %s: %s, WAL checkpoints stay in the WAL", c->db->db_path,
			    c->db->wal_blocked ? "a store could not be closed" : "no descriptor to write it");
		return ioerr;
	}
	__atomic_store_n(&c->db->size, -1, __ATOMIC_RELAXED);
	return SQLITE_OK;
}

/* A write with no store open: SQLite writes only under EXCLUSIVE, which
 * made us the writer, unless the lock was taken in WAL mode and the
 * database has left it since (SQLite's checkpoint, then a rollback-mode
 * transaction under the same lock): become the writer now. */
static int write_store(aconn *c, int ioerr)
{
	if (writer_store(c->db))
		return SQLITE_OK;
	if (c->nolock || c->elock < SQLITE_LOCK_EXCLUSIVE) {
		sqlite3_log(ioerr, "atomio: write to %s without its store", c->db->db_path);
		return ioerr;
	}
	leave_write(c);
	return enter_write(c);
}

static int x_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
	aconn *c = (aconn *)f;
	if (c->pend.active) {
		*size = c->pend.lsize;
		return SQLITE_OK;
	}
	/* The writer knows the size: no fstat per transaction.  That matters
	 * beyond the call: a stat marks the file's times as seen, after which
	 * (Linux 6.13+) every write stamps fine-grained times and dirties the
	 * inode, and on ext4 without a journal the log's next sync must then
	 * also write the inode-table block the database shares with it. */
	bool writer = writer_store(c->db) && c->elock >= SQLITE_LOCK_SHARED;
	int64_t known = writer ? __atomic_load_n(&c->db->size, __ATOMIC_RELAXED) : -1;
	if (known >= 0) {
		*size = known;
		return SQLITE_OK;
	}
	int64_t n = lazy_size(c);
	if (n < 0)
		n = c->db->wfd >= 0 ? f_size(c->db->wfd) : -1;
	int rc = n >= 0 ? SQLITE_OK : c->real->pMethods->xFileSize(c->real, size);
	if (n >= 0)
		*size = n;
	if (rc == SQLITE_OK && writer)
		__atomic_store_n(&c->db->size, (int64_t)*size, __ATOMIC_RELAXED);
	return rc;
}

static int begin_group(aconn *c)
{
	if (c->pend.active)
		return SQLITE_OK;
	sqlite3_int64 sz;
	int rc = x_file_size(&c->base, &sz);
	if (rc != SQLITE_OK)
		return rc;
	pend_begin(&c->pend, sz);
	return SQLITE_OK;
}

static int x_write(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 off)
{
	aconn *c = (aconn *)f;
	int rc;
	if (c->inherited)
		return x_inherited(c, SQLITE_IOERR_WRITE);
	if (wal_mode(c->db)) {
		rc = wal_direct(c, SQLITE_IOERR_WRITE);
		int r = rc == SQLITE_OK ? f_pwrite_all(c->db->dfd, buf, (size_t)amt, (off_t)off) : 0;
		return rc != SQLITE_OK ? rc : r == 0 ? SQLITE_OK : r == -ENOSPC ? SQLITE_FULL : SQLITE_IOERR_WRITE;
	}
	rc = nolock_claim(c);
	if (rc != SQLITE_OK)
		return rc;
	rc = write_store(c, SQLITE_IOERR_WRITE);
	if (rc != SQLITE_OK)
		return rc;
	rc = begin_group(c);
	if (rc != SQLITE_OK)
		return rc;
	/* SQLite writes nothing between a commit's phase-one sync and its
	 * commit point: a synced group written again was synced by something
	 * else (a ROLLBACK's playback, in EXCLUSIVE mode, where no unlock
	 * follows), and waits for its own transaction's sync. */
	ready_drop(c);
	if (pend_write(&c->pend, buf, amt, off) < 0)
		return SQLITE_IOERR_NOMEM;
	bool fits = group_need(&c->pend) <= c->db->capacity;
	if (!fits) {
		pthread_mutex_lock(&g_mu);
		fits = grow_store(c->db, group_need(&c->pend));
		pthread_mutex_unlock(&g_mu);
	}
	if (!fits) {
		/* Fail now rather than at commit: the group can never fit.  It
		 * is discarded when SQLite gives up the lock; the file is
		 * untouched. */
		sqlite3_log(SQLITE_IOERR_WRITE,
			    "atomio: transaction exceeds the log %s (%llu bytes); nothing was written "
			    "(create the log larger with atomio_log_size=)",
			    c->db->log_path, (unsigned long long)c->db->capacity);
		return SQLITE_IOERR_WRITE;
	}
	return SQLITE_OK;
}

static int x_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	aconn *c = (aconn *)f;
	int rc;
	if (c->inherited)
		return x_inherited(c, SQLITE_IOERR_TRUNCATE);
	if (wal_mode(c->db)) {
		rc = wal_direct(c, SQLITE_IOERR_TRUNCATE);
		if (rc == SQLITE_OK && f_ftruncate(c->db->dfd, (off_t)size) < 0)
			rc = SQLITE_IOERR_TRUNCATE;
		return rc;
	}
	rc = nolock_claim(c);
	if (rc != SQLITE_OK)
		return rc;
	rc = write_store(c, SQLITE_IOERR_TRUNCATE);
	if (rc != SQLITE_OK)
		return rc;
	rc = begin_group(c);
	if (rc != SQLITE_OK)
		return rc;
	pend_truncate(&c->pend, size);
	return SQLITE_OK;
}

static int x_sync(sqlite3_file *f, int flags)
{
	/* After SQLITE_FCNTL_SYNC the group waits for phase two (ready), or
	 * was committed already: a commit is durable when it returns, so there
	 * is nothing left to sync.  Any other sync commits what is pending. */
	aconn *c = (aconn *)f;
	count_sync(flags); /* as the unix VFS counts each xSync (the group's log write is this sync) */
	if (c->inherited)
		return x_inherited(c, SQLITE_IOERR_FSYNC);
	if (wal_mode(c->db) && !c->ready && !c->pend.active) /* a checkpoint's */
		return c->db->dfd >= 0 && f_fdatasync(c->db->dfd) == 0 ? SQLITE_OK : SQLITE_IOERR_FSYNC;
	return c->ready ? SQLITE_OK : commit_group(c, false);
}

/* SQLite's level for a PRAGMA synchronous value z, its own rule (pragma.c,
 * getSafetyLevel and PragTyp_SYNCHRONOUS), as 0 OFF, 1 NORMAL, 2 FULL,
 * 3 EXTRA (4..6: what SQLite's mask makes of larger numbers, EXTRA's
 * syncs); a word it does not know is dflt.  Any level above NORMAL is a
 * durable commit, so where this reading differed from SQLite's it could
 * only be more durable than asked, except for a value SQLite refuses
 * (inside a transaction: "Safety level may not be changed"): docs/SQLITE.md. */
int sync_level_of(const char *z, int dflt)
{
	static const struct {
		const char *w;
		int v;
	} words[] = {{"on", 1}, {"no", 0}, {"off", 0}, {"false", 0}, {"yes", 1}, {"true", 1}, {"extra", 3}, {"full", 2},
					     {"normal", 1} /* SQLite's too: unknown, so its default 1 */};
	long long v = dflt;
	if (z && *z >= '0' && *z <= '9') {
		v = 0;
		for (const char *p = z; *p >= '0' && *p <= '9' && v <= INT32_MAX; p++)
			v = v * 10 + (*p - '0');
		if (v > INT32_MAX)
			v = 0; /* sqlite3Atoi's answer to an overflow */
	} else if (z) {
		for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
			if (!sqlite3_stricmp(z, words[i].w))
				v = words[i].v;
	}
	int level = (int)((v + 1) & 7);
	return (level ? level : 1) - 1;
}

static int pragma(aconn *c, char **az)
{
	const char *name = az[1];
	/* SQLite applies the level (to this database only: "PRAGMA
	 * aux.synchronous" reaches aux's file) when it prepares the pragma, right
	 * after this call; SQLITE_NOTFOUND from the unix VFS below lets it. */
	if (!sqlite3_stricmp(name, "synchronous") && az[2])
		c->sync_level = sync_level_of(az[2], 1);
	if (!sqlite3_stricmp(name, "atomio_stats")) {
		atomio *st = store_pin(c->db);
		struct atomio_stats s = {0};
		struct atomio_lazy_stats lz = {0};
		if (st) {
			atomio_stats(st, &s);
			atomio_lazy_stats(st, &lz);
			store_unpin(c->db);
		}
		az[0] = sqlite3_mprintf("writer=%d commits=%llu lazy_commits=%llu lazy_reads=%llu bytes_logged=%llu "
					"bytes_home=%llu "
					"log_syncs=%llu data_syncs=%llu checkpoints=%llu "
					"groups_recovered=%llu",
					st != NULL, (unsigned long long)s.commits,
					(unsigned long long)lz.lazy_commits, (unsigned long long)lz.lazy_reads,
					(unsigned long long)s.bytes_logged,
					(unsigned long long)s.bytes_home, (unsigned long long)s.log_syncs,
					(unsigned long long)s.data_syncs, (unsigned long long)s.checkpoints,
					(unsigned long long)s.groups_recovered);
		return SQLITE_OK;
	}
	return c->real->pMethods->xFileControl(c->real, SQLITE_FCNTL_PRAGMA, az);
}

static int x_file_control(sqlite3_file *f, int op, void *arg)
{
	aconn *c = (aconn *)f;
	if (c->inherited && (op == SQLITE_FCNTL_SYNC || op == SQLITE_FCNTL_COMMIT_PHASETWO ||
			     op == SQLITE_FCNTL_COMMIT_ATOMIC_WRITE))
		return x_inherited(c, SQLITE_IOERR_FSYNC);
	switch (op) {
	case SQLITE_FCNTL_SYNC:
		/* Phase one of a commit (also with synchronous=OFF, where no xSync
		 * follows).  With a rollback journal on disk, that journal is the
		 * commit record (and SQLite's own super-journal makes a commit
		 * over several databases atomic): commit now.  Without one, the
		 * group waits, so that the groups of all databases of the
		 * transaction commit as one (commit_ready), at a step whose
		 * result SQLite honours: phase two where there is no
		 * super-journal (arg NULL: vdbeCommit's simple case), the
		 * super-journal's deletion where there is one in memory
		 * (commit_at_super_delete).  A super-journal on disk (another
		 * VFS's: a main database of the unix VFS) is the commit point of
		 * the others, and phase two, after its deletion, is ignored:
		 * commit now, after our journal, naming it, is on disk and
		 * synced, so that a crash before its deletion rolls this
		 * database back with the others, as SQLite's rollback mode
		 * does. */
		if (!c->pend.active)
			return SQLITE_OK;
		if (journal_on_disk(c->db))
			return commit_group(c, false);
		if (arg && !super_in_memory(arg)) {
			int rc = journal_to_disk(c->db);
			return rc != SQLITE_OK ? rc : commit_group(c, false);
		}
		ready_add(c);
		return SQLITE_OK;
	case SQLITE_FCNTL_COMMIT_PHASETWO:
		/* The commit; any truncation SQLite made after phase one is in
		 * the group (or, for the other databases of the transaction,
		 * folded into it from their page 1: fold_truncation). */
		return commit_ready(c);
	case SQLITE_FCNTL_BEGIN_ATOMIC_WRITE:
		/* The group is open from the first write anyway. */
		return SQLITE_OK;
	case SQLITE_FCNTL_COMMIT_ATOMIC_WRITE:
		/* Batch-atomic SQLite: its journal is in memory. */
		return commit_group(c, true);
	case SQLITE_FCNTL_ROLLBACK_ATOMIC_WRITE:
		pend_clear(&c->pend);
		return SQLITE_OK;
	case SQLITE_FCNTL_LOCKSTATE:
		*(int *)arg = c->elock;
		return SQLITE_OK;
	case SQLITE_FCNTL_SIZE_HINT:
	case SQLITE_FCNTL_CHUNK_SIZE:
		/* The file's size changes only inside a group (or by a WAL
		 * checkpoint, which sets it by writing and truncating). */
		return SQLITE_OK;
	case SQLITE_FCNTL_PRAGMA:
		return pragma(c, arg);
	case SQLITE_FCNTL_HAS_MOVED:
		/* As the unix VFS answers (the path no longer names this inode),
		 * without its stat(): SQLite asks at every write transaction with
		 * a rollback journal, and a stat that reads the file's times costs
		 * a device write per commit (f_ino). */
		*(int *)arg = f_ino(c->db->db_path) != c->db->ino;
		return SQLITE_OK;
	default:
		return c->real->pMethods->xFileControl(c->real, op, arg);
	}
}

static int x_sector_size(sqlite3_file *f)
{
	aconn *c = (aconn *)f;
	return c->real->pMethods->xSectorSize(c->real);
}

static int x_device_characteristics(sqlite3_file *f)
{
	aconn *c = (aconn *)f;
	/* The VFS makes the writes between SQLITE_FCNTL_BEGIN_ATOMIC_WRITE and
	 * _COMMIT_ATOMIC_WRITE one group: an SQLite built with
	 * SQLITE_ENABLE_BATCH_ATOMIC_WRITE commits through them.  Others ignore
	 * the flag, but their test suite (and tools) read it as "no journal
	 * file", which is so: the VFS keeps rollback journals in memory
	 * (JOURNALS). */
	return c->real->pMethods->xDeviceCharacteristics(c->real) | SQLITE_IOCAP_BATCH_ATOMIC;
}

/* WAL's shared memory: the unix VFS's (wal.c). */
static int x_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
	aconn *c = (aconn *)f;
	if (c->real->pMethods->iVersion < 2 || !c->real->pMethods->xShmMap)
		return SQLITE_IOERR_SHMMAP;
	return c->real->pMethods->xShmMap(c->real, pg, pgsz, extend, pp);
}
static int x_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
	aconn *c = (aconn *)f;
	return c->real->pMethods->xShmLock(c->real, off, n, flags);
}
static void x_shm_barrier(sqlite3_file *f)
{
	aconn *c = (aconn *)f;
	c->real->pMethods->xShmBarrier(c->real);
}
static int x_shm_unmap(sqlite3_file *f, int del)
{
	aconn *c = (aconn *)f;
	return c->real->pMethods->xShmUnmap(c->real, del);
}

/* Version 2: xShm* (WAL), but no xFetch (no mmap: every read goes through
 * x_read and sees the pending group). */
const sqlite3_io_methods aio_methods = {
	.iVersion = 2,
	.xShmMap = x_shm_map,
	.xShmLock = x_shm_lock,
	.xShmBarrier = x_shm_barrier,
	.xShmUnmap = x_shm_unmap,
	.xClose = x_close,
	.xRead = x_read,
	.xWrite = x_write,
	.xTruncate = x_truncate,
	.xSync = x_sync,
	.xFileSize = x_file_size,
	.xLock = x_lock,
	.xUnlock = x_unlock,
	.xCheckReservedLock = x_check_reserved,
	.xFileControl = x_file_control,
	.xSectorSize = x_sector_size,
	.xDeviceCharacteristics = x_device_characteristics,
};
