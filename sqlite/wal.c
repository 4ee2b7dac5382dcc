/*
 * wal.c: journal_mode=WAL (see WAL below): whether a database is in WAL
 * mode, the store dropped when it goes there (wal_drop_store), and the WAL
 * file's own methods (w_*: open, read, write, truncate, sync, delete),
 * through atomio's system-call table.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomio.h"
#include "sysio.h"
#include "internals.h"

/* --- WAL ------------------------------------------------------------------------ */

/* WAL.  journal_mode=WAL is SQLite's own, as under the unix VFS: the
 * shared-memory index is the unix VFS's (xShm* pass through to it), so
 * readers in any number of processes read beside the writer, and SQLite's
 * WAL makes each commit atomic by itself (a commit is its frames in the
 * -wal file, written and synced as the unix VFS does: wfile below).
 * atomio adds nothing there: the only writes to the database file are
 * checkpoints, which copy frames that stay in the WAL until the file is
 * synced, so SQLite repeats a checkpoint cut short; a group of its writes
 * would cost a second copy of each page.  So while a WAL file of the
 * database is open in this process (d->nwal), the database's writes,
 * truncations and syncs go straight to the file.
 *
 * That is safe only with no live group in the log: replayed after those
 * direct writes, an older group would undo them.  Groups are committed in
 * rollback mode only, and a database leaves rollback mode for WAL by a
 * commit (of SQLite's own transaction that sets the file format's versions
 * in page 1 to 2), which every process sees before it opens the WAL.  So
 * the commit of a group that leaves page 1 saying WAL closes the store
 * (checkpoints: the log empties) before it returns, still under SQLite's
 * EXCLUSIVE lock, and removes the log (wal_drop_store).  A crash before
 * that leaves a log that the next connection to take a lock recovers under
 * an exclusive lock, as any other, and removes (recover_release): no other
 * connection can hold one meanwhile (WAL readers hold SHARED for as long as
 * they are open, so none was open while the switch's writer held
 * EXCLUSIVE).  A WAL database thus has no log, and a reader's probe finds
 * none (PROBE_NOLOG): it never needs the exclusive lock that WAL readers,
 * holding SHARED throughout, would refuse it forever.  A store of this
 * process still open when its WAL opens (locking_mode=EXCLUSIVE takes its
 * lock, and so the store, before it opens the WAL) is dropped there too.
 * Leaving WAL is a rollback-mode transaction after SQLite's checkpoint: its
 * first write opens a store (and log) again (x_write). */

/* Bytes the group does not write, read as zeros (group_sets_wal). */
static int64_t zero_read(void *ctx, void *buf, int64_t n, int64_t off)
{
	memset(buf, 0, (size_t)n);
	return n;
}

/* Does c's pending group leave page 1 saying WAL?  Only bytes it writes
 * count: the file itself is in a rollback mode while groups are committed
 * (no I/O here: SQLite's test suite once failed that read and saw the
 * commit go on). */
bool group_sets_wal(aconn *c)
{
	const struct pend *p = &c->pend;
	if (!p->active)
		return false;
	if (p->uniform) {
		const unsigned char *h = p->plen >= 100 ? pend_page(p, 0) : NULL;
		return h && h[18] == 2 && h[19] == 2;
	}
	unsigned char v[2];
	return pend_read(p, v, 2, 18, zero_read, NULL) == 2 && v[0] == 2 && v[1] == 2;
}

/* The database is in WAL mode now: this process's store, if it has one,
 * is closed (checkpointed: nothing in its log to replay) and the log
 * removed.  (A log this process did not just empty stays: a group in it
 * may not be synced home yet; the next recovery removes it.)  g_mu held. */
void wal_drop_store(struct adb *d)
{
	atomio *st = writer_store(d);
	if (!st)
		return;
	store_unpublish(d);
	__atomic_store_n(&d->size, -1, __ATOMIC_RELAXED);
	/* A close that is not the store's last (other processes have it open)
	 * does not checkpoint, and no group may stay live in the log once
	 * WAL's checkpoints write the file directly: a recovery would replay
	 * it over them.  So checkpoint first, whoever else holds the store. */
	int r = atomio_checkpoint(st);
	int rc = atomio_close(st);
	if (r == 0)
		r = rc;
	if (r < 0) {
		/* Its groups may still be live: keep the log, and keep WAL's
		 * checkpoints off the file (wal_direct). */
		log_atomio(SQLITE_IOERR, d, "closing (the database went to WAL)", r, NULL);
		d->wal_blocked = true;
		return;
	}
	remove_log(d);
}

/* Writes to the database go straight to the file: WAL mode. */
bool wal_mode(struct adb *d) { return __atomic_load_n(&d->nwal, __ATOMIC_ACQUIRE) > 0; }

/* A WAL file of a database of this VFS, counted in its database's nwal
 * while open.  Its I/O is the VFS's own, through atomio's system-call
 * table, as the unix VFS does it (pread, pwrite, fdatasync and, at the
 * first sync after each open with SQLITE_OPEN_CREATE, the directory's),
 * so that a test's table sees every write and sync of WAL mode in one
 * order with the store's (t_sqlite_sim). */
typedef struct wfile {
	sqlite3_file base;
	struct adb *d;
	int fd;
	bool dirsync;
	const char *name; /* SQLite's, valid while the file is open */
} wfile;

static int w_close(sqlite3_file *f)
{
	wfile *w = (wfile *)f;
	f_close(w->fd);
	pthread_mutex_lock(&g_mu);
	if (__atomic_sub_fetch(&w->d->nwal, 1, __ATOMIC_ACQ_REL) == 0 && w->d->dfd >= 0) {
		f_close(w->d->dfd);
		w->d->dfd = -1;
	}
	pthread_mutex_unlock(&g_mu);
	release_db(w->d);
	w->base.pMethods = NULL;
	return SQLITE_OK;
}

static int w_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o)
{
	wfile *w = (wfile *)f;
	ssize_t r = f_pread_all(w->fd, b, (size_t)n, (off_t)o);
	if (r < 0)
		return SQLITE_IOERR_READ;
	if (r < n) {
		memset((char *)b + r, 0, (size_t)(n - r));
		return SQLITE_IOERR_SHORT_READ;
	}
	return SQLITE_OK;
}

static int w_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o)
{
	wfile *w = (wfile *)f;
	int r = f_pwrite_all(w->fd, b, (size_t)n, (off_t)o);
	return r == 0 ? SQLITE_OK : r == -ENOSPC ? SQLITE_FULL : SQLITE_IOERR_WRITE;
}

static int w_truncate(sqlite3_file *f, sqlite3_int64 n)
{
	wfile *w = (wfile *)f;
	return f_ftruncate(w->fd, (off_t)n) == 0 ? SQLITE_OK : SQLITE_IOERR_TRUNCATE;
}

/* SQLite's test builds count the unix VFS's syncs (full_fsync, with
 * SQLITE_TEST); where those counters exist (its testfixture), WAL mode's
 * syncs here count as the unix VFS's would, so that its tests of WAL's
 * syncs read the same. */
extern int sqlite3_sync_count __attribute__((weak));
extern int sqlite3_fullsync_count __attribute__((weak));
void count_sync(int flags)
{
	if (&sqlite3_sync_count)
		sqlite3_sync_count++;
	if ((flags & 0x0F) == SQLITE_SYNC_FULL && &sqlite3_fullsync_count)
		sqlite3_fullsync_count++;
}

static int w_sync(sqlite3_file *f, int flags)
{
	wfile *w = (wfile *)f;
	count_sync(flags);
	if (f_fdatasync(w->fd) < 0)
		return SQLITE_IOERR_FSYNC;
	if (w->dirsync) {
		count_sync(0);
		sync_dir_of(w->name); /* errors ignored, as the unix VFS does */
		w->dirsync = false;
	}
	return SQLITE_OK;
}

static int w_file_size(sqlite3_file *f, sqlite3_int64 *n)
{
	wfile *w = (wfile *)f;
	struct stat sb;
	if (f_fstat(w->fd, &sb) < 0)
		return SQLITE_IOERR_FSTAT;
	*n = sb.st_size;
	return SQLITE_OK;
}

static int w_lock(sqlite3_file *f, int l) { return SQLITE_OK; }
static int w_check_reserved(sqlite3_file *f, int *out)
{
	*out = 0;
	return SQLITE_OK;
}
static int w_file_control(sqlite3_file *f, int op, void *arg) { return SQLITE_NOTFOUND; }
static int w_sector_size(sqlite3_file *f) { return 4096; } /* the unix VFS's default */
static int w_device_characteristics(sqlite3_file *f) { return 0; }

static const sqlite3_io_methods w_methods = {
	.iVersion = 1,
	.xClose = w_close,
	.xRead = w_read,
	.xWrite = w_write,
	.xTruncate = w_truncate,
	.xSync = w_sync,
	.xFileSize = w_file_size,
	.xLock = w_lock,
	.xUnlock = w_lock,
	.xCheckReservedLock = w_check_reserved,
	.xFileControl = w_file_control,
	.xSectorSize = w_sector_size,
	.xDeviceCharacteristics = w_device_characteristics,
};

_Static_assert(sizeof(wfile) <= sizeof(aconn), "a WAL file fits the VFS's szOsFile");

/* The WAL file of a database of ours (WAL above), created with the
 * database's permissions and owner as the unix VFS does.  SQLITE_NOTFOUND:
 * not one. */
int w_open(sqlite3_vfs *real, const char *name, sqlite3_file *f, int flags, int *out)
{
	struct adb *d = name && (flags & SQLITE_OPEN_WAL) ? db_named(name, "-wal") : NULL;
	if (!d)
		return SQLITE_NOTFOUND;
	wfile *w = (wfile *)f;
	memset(w, 0, sizeof(*w));
	struct stat db;
	mode_t mode = fstat(d->wfd, &db) == 0 ? db.st_mode & 0777 : 0644;
	int of = O_CLOEXEC | (flags & SQLITE_OPEN_CREATE ? O_CREAT : 0);
	int fd = flags & SQLITE_OPEN_READONLY ? -EACCES : f_open(name, of | O_RDWR, mode);
	if (fd < 0 && fd != -ENOENT && fd != -EISDIR) {
		fd = f_open(name, O_RDONLY | O_CLOEXEC, 0);
		flags = (flags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_READONLY;
	}
	if (fd < 0) {
		release_db(d);
		return SQLITE_CANTOPEN;
	}
	/* As the unix VFS: a new file gets the database's permissions whatever
	 * the umask, and, where we are root, its owner (best effort). */
	struct stat sb;
	if (f_fstat(fd, &sb) == 0 && sb.st_size == 0 && (sb.st_mode & 0777) != mode && fchmod(fd, mode) < 0) {
	}
	if (geteuid() == 0 && f_fstat(fd, &sb) == 0 && (sb.st_uid != db.st_uid || sb.st_gid != db.st_gid) &&
	    fchown(fd, db.st_uid, db.st_gid) < 0) {
	}
	w->d = d;
	w->fd = fd;
	w->name = name;
	w->dirsync = flags & SQLITE_OPEN_CREATE;
	if (out)
		*out = flags;
	pthread_mutex_lock(&g_mu);
	if (__atomic_fetch_add(&d->nwal, 1, __ATOMIC_ACQ_REL) == 0 && d->dfd < 0 &&
	    (d->dfd = f_open(d->db_path, O_RDWR | O_CLOEXEC, 0)) >= 0 &&
	    (f_fstat(d->dfd, &sb) < 0 || sb.st_dev != d->dev || sb.st_ino != d->ino)) {
		f_close(d->dfd); /* another file at the path now: no direct writes */
		d->dfd = -1;
	}
	wal_drop_store(d);
	pthread_mutex_unlock(&g_mu);
	w->base.pMethods = &w_methods;
	return SQLITE_OK;
}

/* Deleting the WAL file of a database of ours: through atomio's
 * system-call table, as the unix VFS deletes.  SQLITE_NOTFOUND: not one. */
int w_delete(const char *name, int sync)
{
	struct adb *d = db_named(name, "-wal");
	if (!d)
		return SQLITE_NOTFOUND;
	release_db(d);
	int r = f_unlink(name);
	if (r == -ENOENT)
		return SQLITE_IOERR_DELETE_NOENT;
	if (r < 0)
		return SQLITE_IOERR_DELETE;
	if (sync & 1)
		sync_dir_of(name);
	return SQLITE_OK;
}
