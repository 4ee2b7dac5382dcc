/*
 * vfs.c: the atomio SQLite VFS (include/atomio_sqlite.h).
 *
 * A shim over the default (unix) VFS.  Every file but a main database passes
 * straight through.  For a main database "DB":
 *
 * GROUPS.  xWrite and xTruncate do not touch the file: they go to the
 * connection's pending group (pend.c), which xRead and xFileSize overlay on
 * the file.  The group is committed as one atomio group (one durable log
 * write, then the home writes) at SQLITE_FCNTL_SYNC, which SQLite sends at
 * every commit right before xSync (and in its place with synchronous=OFF), or
 * at SQLITE_FCNTL_COMMIT_ATOMIC_WRITE in a batch-atomic build.  Without a
 * rollback journal on disk the synced group waits for phase two
 * (SQLITE_FCNTL_COMMIT_PHASETWO), so that all databases of a transaction
 * over ATTACHed ones commit as one group (commit_set).  xSync itself then has
 * nothing to do: an acknowledged group is durable in the log, and the store's
 * checkpoint syncs the file before the log space is reused.  A group still
 * pending when the lock drops below RESERVED was never synced: SQLite rolled
 * the transaction back or failed it, so it is discarded and the file is
 * exactly as before the transaction.
 *
 * THE STORE.  The log is "DB-atomio".  An atomio store admits one process
 * (flock); within the process, all connections to the database share one
 * store (struct adb, found by device and inode).  A process that writes
 * opens the store and is the database's "writer" while it goes on writing.
 * Other processes read without a store; a write in one of them gets
 * SQLITE_BUSY and read-locks WANT_BYTE, and the writer gives the store up
 * (closes it, which checkpoints) when none of its connections is in a write
 * transaction (yield_store: at each transaction's end, and from a watcher
 * thread while idle).
 *
 * LOCKS.  SQLite's usual lock bytes (PENDING, RESERVED, SHARED range), taken
 * as Linux open-file-description (OFD) locks on a descriptor of the
 * connection's own.  OFD locks conflict with the classic POSIX locks of the
 * unix VFS in other processes, so plain SQLite is excluded as usual; and,
 * unlike POSIX locks, they are not dropped when the process closes some
 * other descriptor of the file, which atomio does (its store and its
 * recovery open and close the database file).  Each connection has its own
 * open file description, so connections of one process lock each other out
 * exactly as processes do.
 *
 * NO READER SEES HALF A COMMIT.  Home writes happen inside the commit, with
 * the EXCLUSIVE lock held, and end before the commit returns, so a reader
 * holding SHARED never overlaps them.  A writer that dies during its home
 * writes (or a store that failed in them) leaves a file that only recovery
 * may repair, and recovery itself briefly rewrites older versions of pages
 * (it replays every logged group in order).  So: whoever opens the store
 * (atomio_open recovers) holds EXCLUSIVE while doing so, and every
 * connection that takes SHARED without being the writer then probes the
 * log's flock.  Held: the writer lives, it recovered before our SHARED lock,
 * and it cannot write home while we hold SHARED: read.  Free: no writer;
 * unless the log's mark (atomio_log_mark: its store id and epoch, which every
 * atomio_open moves on) is the one this process left after its own last
 * recovery, go to EXCLUSIVE, recover (open and close the store), and only
 * then read.
 *
 * SYSTEM CALLS.  Every byte the store writes goes through libatomio and so
 * through its ops table (src/sys.h).  So do the VFS's own calls on its
 * marker files and on the logs (opening, reading, writing, syncing and
 * removing them, their directory's sync, the log's flock probe and birth
 * time): see "files" below.  Only its locks (OFD locks on descriptors of its
 * own), the read-only map of the database and the look at a rollback
 * journal's first byte go to the system directly; SQLite's own calls on the
 * database (reads, its creation) are the unix VFS's.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomio.h"
#include "atomio_sqlite.h"
#include "pend.h"
#include "sq.h"
#include "sys.h"

/* SQLite's lock bytes (src/os.h), as the unix VFS locks them. */
#define PENDING_BYTE 0x40000000
#define RESERVED_BYTE (PENDING_BYTE + 1)
#define SHARED_FIRST (PENDING_BYTE + 2)
#define SHARED_SIZE 510
#define LOCK_SPAN (2 + SHARED_SIZE)
/* The byte after them, unused by SQLite: read-locked by a connection whose
 * write was refused because another process holds the store.  The holder
 * checks it whenever none of its connections is in a write transaction (at
 * each transaction's end, and every WATCH_MS while idle) and then gives the
 * store up. */
#define WANT_BYTE (PENDING_BYTE + LOCK_SPAN)
#define WATCH_MS 5
/* A want outlives the refused transaction by this much, so that it is seen
 * while SQLite's busy handler sleeps between retries (at most 100 ms) even
 * though SQLite drops every lock meanwhile. */
#define WANT_HOLD_MS 250
/* After giving the store up, do not take it back for this long while
 * another process waits (its busy handler needs the time to retry). */
#define GRACE_MS 150
/* A want that let a grace period pass unused (its connection gave up or
 * went idle) is ignored for this long, so that it costs the writer at most
 * one checkpoint per second. */
#define IGNORE_MS 1000
/* How long a write waits inside xLock for an idle holder to give the store
 * up. */
#define HANDOFF_MS 2000

#define LOG_SUFFIX "-atomio"
/* Beside each database of a transaction over several (ATTACH), for as long
 * as its group may lie in another database's log (see commit_set). */
#define GROUP_SUFFIX "-atomio-group"
#define MAX_SET 16

/* One database as this process sees it, shared by its connections. */
struct adb {
	struct adb *next;
	dev_t dev;
	ino_t ino;
	int refs;
	char *db_path;
	char *log_path;
	uint64_t log_size;   /* for creating the log (0 = atomio's default) */
	atomio *st;          /* this process is the writer; atomic load/store */
	int fid;
	uint64_t capacity;   /* bytes of records the log holds */
	uint32_t max_segs;   /* most ranges one group of the store may have */
	int nres;            /* connections of this process in a write transaction */
	int wfd;             /* our own open file description, for WANT_BYTE probes */
	bool watching, stop; /* the watcher thread runs / is asked to end */
	bool forked;         /* a copy in a child after fork (fork_child) */
	int64_t yielded_ms;  /* when we last gave the store up (0: never) */
	int64_t ignore_ms;   /* ignore wants until then */
	pthread_t watcher;
	pthread_cond_t cv;
	/* The writer's record of the database's size (only its commits change
	 * it), so that transactions need no fstat.  -1: unknown.  Atomic. */
	int64_t size;
	bool snap_ok;        /* snap: the log's mark after our recovery */
	ino_t snap_ino;
	struct atomio_log_mark snap;
};

/* A registered VFS. */
struct avfs {
	sqlite3_vfs base;
	sqlite3_vfs *real;
	struct avfs *next;
	char name[64];
};

/* A main-database connection; the real file follows it in memory. */
typedef struct aconn {
	sqlite3_file base;
	sqlite3_file *real;
	struct adb *db;
	int lockfd;
	int elock;           /* SQLITE_LOCK_* held */
	bool diff;           /* log only changed bytes (URI atomio_diff, default on) */
	bool nolock;         /* URI nolock=1: SQLite never calls xLock */
	bool counted;        /* in the database's nres (a write transaction) */
	bool want;           /* holds WANT_BYTE: refused by another process's store */
	int64_t want_ms;     /* since when */
	bool ready;          /* the group was synced: commit it with the others */
	struct aconn *rnext; /* this thread's ready connections (t_ready) */
	unsigned char *map;  /* the file, read-only, for the diff (map_base) */
	size_t maplen;
	struct pend pend;
} aconn;

#define ROUND8(n) (((n) + 7) & ~(size_t)7)

/* Guards the lists and every change of a database's store or snapshot. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct adb *g_dbs;
static struct avfs *g_vfs;
/* The SQLite in use was built with SQLITE_ENABLE_BATCH_ATOMIC_WRITE. */
static bool g_batch;

static const sqlite3_io_methods aio_methods;

/* Connections whose groups SQLite synced (phase one of a commit) and that
 * wait for phase two: all databases of one transaction, since SQLite runs a
 * connection's commit in one thread, phase one for every database, then
 * phase two for each. */
static __thread struct aconn *t_ready;

static atomio *writer_store(struct adb *d) { return __atomic_load_n(&d->st, __ATOMIC_ACQUIRE); }

/* --- files ---------------------------------------------------------------- */

/* atomio's system-call table.  Where this VFS is linked with libatomio's
 * objects (the loadable extension carries them; a program links
 * libatomio.a), the calls below go through it, so that a test's table
 * records, fails or crash-simulates them in one order with the store's own
 * (test/sqlite/t_sqlite_sim.c).  libatomio.so exports its public API only:
 * linked with it, the reference is null and the same calls go to the
 * system directly.  Every one returns a result >= 0 or a negative errno. */
extern const struct atomio_sysops *atomio_sys __attribute__((weak));

static const struct atomio_sysops *os(void) { return &atomio_sys ? atomio_sys : NULL; }

static int f_neg(long r) { return r < 0 ? -errno : (int)r; }

static int f_open(const char *path, int flags, mode_t mode)
{
	const struct atomio_sysops *s = os();
	return s ? s->open(path, flags, mode) : f_neg(open(path, flags, mode));
}

static void f_close(int fd)
{
	const struct atomio_sysops *s = os();
	if (s)
		s->close(fd);
	else
		close(fd);
}

static int f_fstat(int fd, struct stat *sb)
{
	const struct atomio_sysops *s = os();
	return s ? s->fstat(fd, sb) : f_neg(fstat(fd, sb));
}

/* flock, retrying EINTR. */
static int f_flock(int fd, int op)
{
	const struct atomio_sysops *s = os();
	int r;
	do
		r = s ? s->flock(fd, op) : f_neg(flock(fd, op));
	while (r == -EINTR);
	return r;
}

static int f_unlink(const char *path)
{
	const struct atomio_sysops *s = os();
	return s ? s->unlink(path) : f_neg(unlink(path));
}

/* Does path exist (as access(F_OK) sees it: symbolic links followed)?  0,
 * -ENOENT, or another negative errno. */
static int f_exists(const char *path)
{
	const struct atomio_sysops *s = os();
	if (!s)
		return f_neg(access(path, F_OK));
	struct atomio_statx stx;
	return s->statx(AT_FDCWD, path, 0, 0, &stx);
}

/* Up to len bytes from offset 0 (fewer only at the end of the file),
 * retrying EINTR and short reads: the count or a negative errno. */
static ssize_t f_read_all(int fd, void *buf, size_t len)
{
	const struct atomio_sysops *s = os();
	size_t done = 0;
	while (done < len) {
		ssize_t n = s ? s->pread(fd, (char *)buf + done, len - done, (off_t)done)
			      : pread(fd, (char *)buf + done, len - done, (off_t)done);
		if (n < 0 && !s)
			n = -errno;
		if (n == -EINTR)
			continue;
		if (n < 0)
			return n;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* All of buf at offset 0, retrying EINTR and short writes: 0 or < 0. */
static int f_write_all(int fd, const void *buf, size_t len)
{
	const struct atomio_sysops *s = os();
	size_t done = 0;
	while (done < len) {
		struct iovec v = {(char *)buf + done, len - done};
		ssize_t n = s ? s->pwritev(fd, &v, 1, (off_t)done, 0) : pwritev(fd, &v, 1, (off_t)done);
		if (n < 0 && !s)
			n = -errno;
		if (n == -EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? (int)n : -EIO;
		done += (size_t)n;
	}
	return 0;
}

/* fsync, retrying EINTR. */
static int f_fsync(int fd)
{
	const struct atomio_sysops *s = os();
	int r;
	do
		r = s ? s->fsync(fd) : f_neg(fsync(fd));
	while (r == -EINTR);
	return r;
}

/* fsync a directory (after creating an entry in it). */
static int f_fsync_dir(const char *dir)
{
	int fd = f_open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	int r = f_fsync(fd);
	f_close(fd);
	return r;
}

/* The birth time of path, where the filesystem keeps one. */
static bool f_btime(const char *path, struct statx_timestamp *t)
{
	const struct atomio_sysops *s = os();
	if (!s) {
		struct statx sx;
		if (statx(AT_FDCWD, path, 0, STATX_BTIME, &sx) < 0 || !(sx.stx_mask & STATX_BTIME))
			return false;
		*t = sx.stx_btime;
		return true;
	}
	struct atomio_statx sx;
	if (s->statx(AT_FDCWD, path, 0, ATOMIO_STATX_BTIME, &sx) < 0 || !(sx.stx_mask & ATOMIO_STATX_BTIME))
		return false;
	memset(t, 0, sizeof(*t));
	t->tv_sec = sx.stx_btime.tv_sec;
	t->tv_nsec = sx.stx_btime.tv_nsec;
	return true;
}

/* --- OFD locks ------------------------------------------------------------ */

/* 0, -EAGAIN on a conflict, or another negative errno. */
static int ofd(int fd, short type, off_t start, off_t len)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
	int r;
	do
		r = fcntl(fd, F_OFD_SETLK, &fl);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return 0;
	return errno == EACCES ? -EAGAIN : -errno;
}

static int lock_rc(int r, int ioerr) { return r == -EAGAIN ? SQLITE_BUSY : ioerr; }

static void unlock_all(aconn *c)
{
	ofd(c->lockfd, F_UNLCK, PENDING_BYTE, LOCK_SPAN);
	c->elock = SQLITE_LOCK_NONE;
}

/* From NONE or SHARED to an exclusive hold (PENDING + the whole SHARED range),
 * without waiting.  On failure the lock is as before. */
static int grab_exclusive(aconn *c)
{
	int r = ofd(c->lockfd, F_WRLCK, PENDING_BYTE, 1);
	if (r < 0)
		return lock_rc(r, SQLITE_IOERR_LOCK);
	r = ofd(c->lockfd, F_WRLCK, SHARED_FIRST, SHARED_SIZE);
	if (r < 0) {
		/* A failed F_OFD_SETLK leaves the read lock of a SHARED holder as
		 * it was. */
		ofd(c->lockfd, F_UNLCK, PENDING_BYTE, 1);
		return lock_rc(r, SQLITE_IOERR_LOCK);
	}
	return SQLITE_OK;
}

/* From an exclusive hold down to SHARED, with no moment unlocked. */
static void to_shared(aconn *c)
{
	ofd(c->lockfd, F_RDLCK, SHARED_FIRST, SHARED_SIZE);
	ofd(c->lockfd, F_UNLCK, PENDING_BYTE, 2);
	c->elock = SQLITE_LOCK_SHARED;
}

/* --- the store ------------------------------------------------------------- */

static void log_atomio(int rc, struct adb *d, const char *what, int err, const char *detail)
{
	sqlite3_log(rc, "atomio: %s %s: %s%s%s", what, d->log_path, atomio_strerror(err),
		    detail && *detail ? ": " : "", detail ? detail : "");
}

/* Remember the log's mark as our own recovery left it.  g_mu held. */
static void snapshot(struct adb *d)
{
	d->snap_ok = false;
	int fd = f_open(d->log_path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return;
	struct stat sb;
	if (f_fstat(fd, &sb) == 0 && atomio_log_mark(fd, &d->snap) == 0) {
		d->snap_ino = sb.st_ino;
		d->snap_ok = true;
	}
	f_close(fd);
}

static bool has_group_marker(struct adb *d);

enum probe { PROBE_WRITER, PROBE_NOLOG, PROBE_CLEAN, PROBE_DIRTY };

/* Is there a writer (a process holding the store)?  If not, has any store
 * been opened since our last recovery?  Returns an enum probe or < 0. */
static int probe(struct adb *d)
{
	int fd = f_open(d->log_path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd != -ENOENT ? fd : has_group_marker(d) ? PROBE_DIRTY : PROBE_NOLOG;
	int r = f_flock(fd, LOCK_SH | LOCK_NB);
	if (r < 0) {
		f_close(fd);
		return r == -EWOULDBLOCK ? PROBE_WRITER : r;
	}
	int res = PROBE_DIRTY;
	struct atomio_log_mark m;
	struct stat sb;
	pthread_mutex_lock(&g_mu);
	if (d->snap_ok && f_fstat(fd, &sb) == 0 && sb.st_ino == d->snap_ino &&
	    atomio_log_mark(fd, &m) == 0 && m.store_id == d->snap.store_id && m.epoch == d->snap.epoch)
		res = PROBE_CLEAN;
	pthread_mutex_unlock(&g_mu);
	if (res == PROBE_CLEAN && has_group_marker(d))
		res = PROBE_DIRTY;
	f_close(fd); /* drops the LOCK_SH probe */
	return res;
}

/* A log older than its database belongs to an earlier file at this path (the
 * database was deleted and created again, or replaced by a copy, without its
 * log).  Its records must never be replayed into the new file: atomio
 * recognises a data file by device and inode, and filesystems reuse a freed
 * inode number at once.  Nor are they of use to anyone: the file they were
 * for is gone from this path, and its committed data was written home before
 * each commit returned (a log matters only to a file that crashed mid-commit,
 * and such a file is not replaced by hand without its log).  So, unless a
 * store holds it (a process still writes the earlier file, open under its
 * old name or renamed), the stale log is removed, and the first write
 * creates a new one.  Exclusive lock held, so no store of this database is
 * opened meanwhile.  (Where the filesystem has no birth times this check is
 * skipped.)
 *
 * Birth times come from a coarse clock: a database born in the same tick as
 * the log may be the file the log was made for, so equal times keep the log,
 * unless `replaced`: atomio's recovery found that the file at this path is
 * not the one registered in the log (remove_replaced_log). */
static int check_log_age(struct adb *d, bool replaced)
{
	struct statx_timestamp db, lg;
	if (!f_btime(d->db_path, &db) || !f_btime(d->log_path, &lg))
		return SQLITE_OK;
	if (db.tv_sec < lg.tv_sec || (db.tv_sec == lg.tv_sec && db.tv_nsec < lg.tv_nsec))
		return SQLITE_OK;
	if (db.tv_sec == lg.tv_sec && db.tv_nsec == lg.tv_nsec && !replaced)
		return SQLITE_OK;
	int fd = f_open(d->log_path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd == -ENOENT ? SQLITE_OK : SQLITE_CANTOPEN;
	int r = f_flock(fd, LOCK_EX | LOCK_NB);
	if (r < 0) {
		f_close(fd);
		sqlite3_log(SQLITE_CANTOPEN,
			    "atomio: %s is older than the database %s and in use: it belongs to an "
			    "earlier file at this path that is still being written",
			    d->log_path, d->db_path);
		return SQLITE_CANTOPEN;
	}
	/* Unlinked while we hold its flock, so no store opens it meanwhile.
	 * Not made durable: should the unlink be lost in a crash, the log is
	 * stale again and removed again. */
	r = f_unlink(d->log_path);
	f_close(fd);
	if (r < 0 && r != -ENOENT) {
		sqlite3_log(SQLITE_CANTOPEN, "atomio: cannot remove the stale log %s: %s", d->log_path,
			    strerror(-r));
		return SQLITE_CANTOPEN;
	}
	sqlite3_log(SQLITE_NOTICE, "atomio: removed %s, a log older than the database %s "
		    "(left by an earlier file at this path)", d->log_path, d->db_path);
	return SQLITE_OK;
}

/* Every atomio_open of the VFS passes ATOMIO_ACCEPT_COPIES: a database and
 * its log copied while the database was open and put back (cp, a backup
 * script, SQLite's own test harness, in whatever order the copies are
 * made) hold another inode than the one the log registered, but the copy
 * of the database holds every group of the copy of the log already (each
 * was written home before its commit returned, and a copy reads the page
 * cache), so the log is accepted and emptied, nothing written.
 *
 * atomio_open refused the log with ATOMIO_EIDENTITY even so: a file it must
 * replay into is not the file registered, and lacks some of its groups.  Without a group marker the log's groups
 * to replay are of this database only, so the database at this path is
 * another file than the log's.  A log not newer than it then belongs to an
 * earlier file at this path, as in check_log_age, also when both were born
 * in the same clock tick (a copy of the database and of its log, restored
 * log first: SQLite's own test harness does so).  True: it was removed. */
static bool remove_replaced_log(struct adb *d)
{
	if (has_group_marker(d) || check_log_age(d, true) != SQLITE_OK)
		return false;
	return f_exists(d->log_path) == -ENOENT;
}

static char *suffixed(const char *path, const char *suffix)
{
	size_t n = strlen(path), m = strlen(suffix);
	char *r = malloc(n + m + 1);
	if (r) {
		memcpy(r, path, n);
		memcpy(r + n, suffix, m + 1);
	}
	return r;
}

static bool has_group_marker(struct adb *d)
{
	char *g = suffixed(d->db_path, GROUP_SUFFIX);
	bool on = !g || f_exists(g) != -ENOENT;
	free(g);
	return on;
}

/* Replay one log and close it again; no log, or a store that a live
 * process holds (it recovered when it opened), is nothing to do. */
static int replay_log(const char *log_path, char *err, size_t errlen)
{
	struct atomio_options o = {.flags = ATOMIO_ACCEPT_COPIES, .errbuf = err, .errbuf_size = errlen};
	atomio *st;
	int r = atomio_open(log_path, &o, &st);
	if (r == 0)
		return atomio_close(st);
	return r == -ENOENT || r == -EBUSY ? 0 : r;
}

/* d has a group marker: a transaction over several databases committed (or
 * was committing) one group in the log of the first of them, and may have
 * died before that group was home and synced in all of them.  With an
 * exclusive lock on every one of them (d's is held), replay each database's
 * own log (older groups), then the first one's (the shared group, and later
 * groups of the first database only), then remove the markers.  Readers of
 * any of the databases are locked out meanwhile, as for a recovery of one. */
static int recover_group(struct adb *d)
{
	char *g = suffixed(d->db_path, GROUP_SUFFIX);
	if (!g)
		return SQLITE_NOMEM;
	char buf[8192];
	int fd = f_open(g, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		free(g);
		return fd == -ENOENT ? SQLITE_OK : SQLITE_IOERR;
	}
	ssize_t n = f_read_all(fd, buf, sizeof(buf) - 1);
	f_close(fd);
	if (n < 0) {
		free(g);
		return SQLITE_IOERR;
	}
	buf[n] = 0;
	char *paths[MAX_SET];
	int np = 0, lfd[MAX_SET];
	for (char *sv = NULL, *t = strtok_r(buf, "\n", &sv); t && np < MAX_SET; t = strtok_r(NULL, "\n", &sv))
		paths[np++] = t;
	int rc = SQLITE_OK;
	for (int i = 0; i < np; i++) {
		lfd[i] = -1;
		if (!strcmp(paths[i], d->db_path) || rc != SQLITE_OK)
			continue;
		lfd[i] = open(paths[i], O_RDWR | O_CLOEXEC);
		if (lfd[i] < 0)
			continue; /* gone: nothing of it to protect */
		int r = ofd(lfd[i], F_WRLCK, PENDING_BYTE, LOCK_SPAN);
		if (r < 0)
			rc = lock_rc(r, SQLITE_IOERR_LOCK);
	}
	char err[512] = "";
	for (int i = 1; rc == SQLITE_OK && i <= np; i++) {
		char *lp = suffixed(paths[i % np], LOG_SUFFIX); /* the first one last */
		int r = lp ? replay_log(lp, err, sizeof(err)) : -ENOMEM;
		if (r < 0) {
			sqlite3_log(SQLITE_IOERR, "atomio: recovering %s: %s %s", lp ? lp : paths[i % np],
				    atomio_strerror(r), err);
			rc = SQLITE_IOERR;
		}
		free(lp);
	}
	for (int i = 0; rc == SQLITE_OK && i < np; i++) {
		char *m = suffixed(paths[i], GROUP_SUFFIX);
		if (m)
			f_unlink(m);
		free(m);
	}
	/* Also a marker cut short (the writer died while writing it): the
	 * markers are all written and synced before the group is committed,
	 * so such a one was never followed by a commit. */
	if (rc == SQLITE_OK)
		f_unlink(g);
	for (int i = 0; i < np; i++)
		if (lfd[i] >= 0)
			close(lfd[i]); /* releases its locks */
	free(g);
	return rc;
}

/* Replay the log and close the store again.  Exclusive lock held. */
static int recover_release(struct adb *d)
{
	char err[512] = "";
	struct atomio_options o = {.flags = ATOMIO_ACCEPT_COPIES, .errbuf = err, .errbuf_size = sizeof(err)};
	atomio *st;
	int rc = check_log_age(d, false);
	if (rc != SQLITE_OK)
		return rc;
	if (!writer_store(d) && has_group_marker(d)) {
		rc = recover_group(d);
		if (rc != SQLITE_OK)
			return rc;
	}
	pthread_mutex_lock(&g_mu);
	int r = 0;
	if (!writer_store(d)) {
		r = atomio_open(d->log_path, &o, &st);
		if (r == ATOMIO_EIDENTITY && remove_replaced_log(d))
			r = -ENOENT; /* no log: nothing to replay */
		if (r == 0) {
			r = atomio_close(st);
			if (r == 0)
				snapshot(d);
		} else if (r == -ENOENT || r == -EBUSY) {
			/* No log: nothing to replay.  Busy: a writer holds the
			 * store, and it recovered under the exclusive lock we now
			 * hold, so before us. */
			r = 0;
		}
	}
	pthread_mutex_unlock(&g_mu);
	if (r < 0) {
		log_atomio(SQLITE_IOERR, d, "recovering", r, err);
		return r == -EACCES || r == -EPERM || r == ATOMIO_EUNSAFE ? SQLITE_CANTOPEN : SQLITE_IOERR;
	}
	return SQLITE_OK;
}

static void *watch(void *arg);

#define MIB (1ull << 20)

/* A new log without atomio_log_size=: eight times the database, 8 to 64
 * MiB, so that a small database gets a smaller log, while the log still
 * lets a hot page be written home once per checkpoint rather than once per
 * few commits (README, "Wear": the log's size is the lever; a database is
 * often created empty and filled by the process that made its log); a
 * transaction that does not fit grows it (grow_store). */
static uint64_t initial_log_size(struct adb *d)
{
	struct stat sb;
	uint64_t n = stat(d->db_path, &sb) == 0 ? 8 * (uint64_t)sb.st_size : 0;
	n = (n + MIB - 1) & ~(MIB - 1);
	return n < 8 * MIB ? 8 * MIB : n > 64 * MIB ? 64 * MIB : n;
}

/* Open the store: this process becomes the writer.  Exclusive lock held
 * (opening recovers).  g_mu held. */
static int open_store(struct adb *d)
{
	char err[512] = "";
	struct atomio_options o = {.log_size = d->log_size ? d->log_size : initial_log_size(d),
				   .flags = ATOMIO_CREATE | ATOMIO_ACCEPT_COPIES, .errbuf = err,
				   .errbuf_size = sizeof(err)};
	atomio *st;
	int rc = check_log_age(d, false);
	if (rc == SQLITE_OK && has_group_marker(d))
		rc = recover_group(d);
	if (rc != SQLITE_OK)
		return rc;
	int r = atomio_open(d->log_path, &o, &st);
	if (r == ATOMIO_EIDENTITY && remove_replaced_log(d)) {
		err[0] = 0;
		r = atomio_open(d->log_path, &o, &st); /* a new log */
	}
	if (r == -EBUSY)
		return SQLITE_BUSY; /* another process writes */
	if (r < 0) {
		log_atomio(SQLITE_IOERR, d, "opening", r, err);
		return SQLITE_IOERR;
	}
	int fid = atomio_file_open(st, d->db_path, 0, 0);
	struct atomio_caps caps;
	if (fid >= 0)
		r = atomio_caps(st, -1, &caps);
	if (fid < 0 || r < 0) {
		log_atomio(SQLITE_IOERR, d, "registering the database with", fid < 0 ? fid : r, err);
		atomio_close(st);
		return SQLITE_IOERR;
	}
	d->fid = fid;
	d->capacity = caps.log_size;
	d->max_segs = caps.max_segments;
	__atomic_store_n(&d->size, -1, __ATOMIC_RELAXED);
	d->snap_ok = false;
	__atomic_store_n(&d->st, st, __ATOMIC_RELEASE);
	if (!d->watching && d->wfd >= 0 && pthread_create(&d->watcher, NULL, watch, d) == 0)
		d->watching = true;
	return SQLITE_OK;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Is a connection of another open file description than fd waiting for the
 * store (WANT_BYTE)? */
static bool want_seen(int fd)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = WANT_BYTE, .l_len = 1};
	return fd >= 0 && fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

static void want_set(aconn *c, bool on)
{
	if (on)
		c->want_ms = now_ms();
	if (c->want == on)
		return;
	ofd(c->lockfd, on ? F_RDLCK : F_UNLCK, WANT_BYTE, 1);
	c->want = on;
}

/* Give the store up: another process waits to write and no connection of
 * ours is in a write transaction (nres 0, and none can begin one while we
 * hold g_mu).  Closing checkpoints: the database is synced and the log
 * emptied, so what our snapshot then records is a log with nothing to
 * replay.  No SQLite lock is needed: every commit is home already, and the
 * next writer opens the store under its own locks.  g_mu held. */
static void yield_store(struct adb *d)
{
	atomio *st = writer_store(d);
	if (!st || d->nres > 0 || !want_seen(d->wfd))
		return;
	int64_t now = now_ms();
	if (now < d->ignore_ms)
		return;
	d->yielded_ms = now;
	__atomic_store_n(&d->st, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&d->size, -1, __ATOMIC_RELAXED);
	int r = atomio_close(st);
	if (r < 0)
		log_atomio(SQLITE_IOERR, d, "closing", r, NULL);
	else
		snapshot(d);
}

/* While this process holds the store: every WATCH_MS, give it up if
 * another process waits and we are idle (an idle writer would otherwise
 * keep every other process from writing for as long as it stays open). */
static void *watch(void *arg)
{
	struct adb *d = arg;
	pthread_mutex_lock(&g_mu);
	while (!d->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += WATCH_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&d->cv, &g_mu, &ts);
		if (!d->stop)
			yield_store(d);
	}
	pthread_mutex_unlock(&g_mu);
	return NULL;
}

/* A transaction needs more log than there is: give the store a log large
 * enough (twice what it needs, at least twice the old one).  Closing
 * checkpoints (the database synced, the old log empty; the pending group is
 * still in memory only), so the old log can go; the new one is created in
 * its place, under a temporary name and renamed.  A crash in between leaves
 * no log, which needs none.  Another process cannot open a store meanwhile:
 * it would need RESERVED (we hold it) or, to recover, EXCLUSIVE (our SHARED
 * keeps it out).  Only while no other connection of ours is in a write
 * transaction.  g_mu held; false: no larger log. */
static bool grow_store(struct adb *d, uint64_t need)
{
	atomio *st = writer_store(d);
	if (!st || d->nres > 1 || need > (1ull << 40))
		return false;
	uint64_t n = 2 * need > 2 * d->capacity ? 2 * need : 2 * d->capacity;
	n = (n + MIB - 1) & ~(MIB - 1);
	__atomic_store_n(&d->st, NULL, __ATOMIC_RELEASE);
	int r = atomio_close(st);
	if (r < 0) {
		log_atomio(SQLITE_IOERR, d, "closing (to grow the log)", r, NULL);
		return false;
	}
	r = f_unlink(d->log_path);
	if (r < 0 && r != -ENOENT)
		return false;
	uint64_t old = d->log_size;
	d->log_size = n;
	if (open_store(d) != SQLITE_OK) {
		d->log_size = old;
		return false;
	}
	sqlite3_log(SQLITE_NOTICE, "atomio: %s grown to %llu bytes for a transaction of %llu",
		    d->log_path, (unsigned long long)d->capacity, (unsigned long long)need);
	return true;
}

/* A commit failed after the store may have written: the store refuses more
 * work and the file may hold part of the group.  Still holding EXCLUSIVE,
 * close it and open it again, which replays whatever of the group reached the
 * log, whole, so that no reader ever sees a part of it. */
static void repair_store(struct adb *d)
{
	pthread_mutex_lock(&g_mu);
	atomio *st = writer_store(d);
	if (st) {
		__atomic_store_n(&d->st, NULL, __ATOMIC_RELEASE);
		atomio_close(st); /* a failed store is not checkpointed */
		if (open_store(d) != SQLITE_OK)
			sqlite3_log(SQLITE_IOERR, "atomio: %s needs recovery; the next opener retries it",
				    d->db_path);
	}
	pthread_mutex_unlock(&g_mu);
}

/* --- groups ------------------------------------------------------------------ */

static int64_t base_read(void *ctx, void *buf, int64_t n, int64_t off);

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
static bool journal_on_disk(struct adb *d)
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
	if (have == e->len && map_base(c, base_end)) {
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

static void ready_drop(aconn *c);

static int commit_group(aconn *c, bool fold)
{
	struct pend *p = &c->pend;
	ready_drop(c);
	if (!p->active)
		return SQLITE_OK;
	if (fold)
		fold_truncation(c);
	struct adb *d = c->db;
	atomio *st = writer_store(d);
	if (!st) {
		pend_clear(p);
		return SQLITE_IOERR_WRITE;
	}
	atomio_tx *tx = NULL;
	int r = atomio_tx_begin(st, &tx);
	int64_t spare = (int64_t)d->max_segs - group_ranges(p);
	if (r == 0)
		r = add_group(c, tx, d->fid, &spare);
	bool committed = false;
	if (r == 0) {
		r = atomio_tx_commit(tx);
		committed = true;
	} else if (tx) {
		atomio_tx_abort(tx);
	}
	int64_t lsize = p->lsize;
	pend_clear(p);
	__atomic_store_n(&d->size, r == 0 ? lsize : -1, __ATOMIC_RELAXED);
	return r == 0 ? SQLITE_OK : commit_failed(c, r, committed);
}

static void ready_add(aconn *c)
{
	if (c->ready)
		return;
	c->ready = true;
	c->rnext = NULL;
	aconn **pp = &t_ready;
	while (*pp)
		pp = &(*pp)->rnext;
	*pp = c;
}

static void ready_drop(aconn *c)
{
	if (!c->ready)
		return;
	for (aconn **pp = &t_ready; *pp; pp = &(*pp)->rnext)
		if (*pp == c) {
			*pp = c->rnext;
			break;
		}
	c->ready = false;
	c->rnext = NULL;
}

static int sync_dir_of(const char *path)
{
	char *dir = strdup(path);
	if (!dir)
		return -ENOMEM;
	char *sl = strrchr(dir, '/');
	if (sl)
		*(sl == dir ? sl + 1 : sl) = 0;
	int r = f_fsync_dir(sl ? dir : ".");
	free(dir);
	return r;
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
	atomio *st = writer_store(pd);
	char list[MAX_SET * 1100];
	size_t len = 0;
	int r = st ? 0 : -EIO;
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
	for (int i = 0; i < n; i++)
		spare -= group_ranges(&m[i]->pend);
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
		/* Without a commit, or once it is synced everywhere, the group
		 * is nowhere to recover from: no marker.  Else the markers stay
		 * for whoever recovers next (repair_store below, if not). */
		if (!committed || r == 0)
			remove_marker(m[i]->db);
		__atomic_store_n(&m[i]->db->size, r == 0 ? m[i]->pend.lsize : -1, __ATOMIC_RELAXED);
		pend_clear(&m[i]->pend);
		ready_drop(m[i]);
	}
	return r == 0 ? SQLITE_OK : commit_failed(m[0], r, committed);
}

/* Phase two of c's commit: commit every group of the transaction (this
 * thread's ready connections), as one. */
static int commit_ready(aconn *c)
{
	if (!c->ready)
		return commit_group(c, false); /* e.g. a truncation after the commit */
	aconn *m[MAX_SET];
	int n = 0;
	for (aconn *x = t_ready; x; x = x->rnext)
		if (x->pend.active && n < MAX_SET)
			m[n++] = x;
	if (n <= 1 || !t_ready || t_ready->rnext == NULL)
		return commit_group(c, true);
	return commit_set(m, n);
}

/* Bytes of log a group needs, counting every entry as its own range. */
static uint64_t group_need(const struct pend *p)
{
	return 64 + 32 * ((uint64_t)p->n + 2) + (uint64_t)p->bytes;
}

static int x_file_size(sqlite3_file *f, sqlite3_int64 *size);

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

/* --- io methods ---------------------------------------------------------------- */

static void release_db(struct adb *d);
static void leave_write(aconn *c);

static int x_close(sqlite3_file *f)
{
	aconn *c = (aconn *)f;
	if (c->ready)
		commit_group(c, false);
	pend_clear(&c->pend);
	if (c->map)
		munmap(c->map, c->maplen);
	if (c->elock)
		unlock_all(c);
	want_set(c, false);
	leave_write(c);
	int rc = c->real->pMethods ? c->real->pMethods->xClose(c->real) : SQLITE_OK;
	release_db(c->db);
	close(c->lockfd); /* releases our OFD locks */
	c->base.pMethods = NULL;
	return rc;
}

static int64_t base_read(void *ctx, void *buf, int64_t n, int64_t off)
{
	aconn *c = ctx;
	int rc = c->real->pMethods->xRead(c->real, buf, (int)n, off);
	/* A short read below the size the group began with cannot happen
	 * while we hold the lock; the unix VFS zero-fills it anyway. */
	if (rc == SQLITE_OK || rc == SQLITE_IOERR_SHORT_READ)
		return n;
	return -1;
}

static int x_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off)
{
	aconn *c = (aconn *)f;
	if (!c->pend.active)
		return c->real->pMethods->xRead(c->real, buf, amt, off);
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

static int x_write(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 off)
{
	aconn *c = (aconn *)f;
	int rc = nolock_claim(c);
	if (rc != SQLITE_OK)
		return rc;
	if (!writer_store(c->db)) {
		/* SQLite writes only under EXCLUSIVE, which made us the writer. */
		sqlite3_log(SQLITE_IOERR_WRITE, "atomio: write to %s without its store", c->db->db_path);
		return SQLITE_IOERR_WRITE;
	}
	rc = begin_group(c);
	if (rc != SQLITE_OK)
		return rc;
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
	int rc = nolock_claim(c);
	if (rc != SQLITE_OK)
		return rc;
	if (!writer_store(c->db))
		return SQLITE_IOERR_TRUNCATE;
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
	return c->ready ? SQLITE_OK : commit_group(c, false);
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
	int rc = c->real->pMethods->xFileSize(c->real, size);
	if (rc == SQLITE_OK && writer)
		__atomic_store_n(&c->db->size, (int64_t)*size, __ATOMIC_RELAXED);
	return rc;
}

/* Taking SHARED as a reader: make sure no unrecovered commit is in the file. */
static int check_recovered(aconn *c)
{
	struct adb *d = c->db;
	int p = probe(d);
	if (p < 0) {
		unlock_all(c);
		return SQLITE_IOERR_LOCK;
	}
	if (p != PROBE_DIRTY)
		return SQLITE_OK;
	/* No writer, and a store was opened since we last recovered (or we
	 * never did): recover under an exclusive lock before reading. */
	unlock_all(c);
	int rc = grab_exclusive(c);
	if (rc != SQLITE_OK)
		return rc;
	rc = recover_release(d);
	if (rc != SQLITE_OK) {
		unlock_all(c);
		return rc;
	}
	to_shared(c);
	return SQLITE_OK;
}

/* Become the writer, holding SHARED: only if no other process is, and no
 * other connection has been waiting for the store longer than we have.  The
 * exclusive lock (no reader at all) is needed only where opening the store
 * may replay something (a store was opened since our last recovery) or
 * create the log; else the store opens beside readers, as the unix VFS
 * grants RESERVED beside SHARED. */
static int claim_writer(aconn *c, bool *held)
{
	struct adb *d = c->db;
	int p = probe(d);
	*held = p == PROBE_WRITER;
	if (p < 0)
		return SQLITE_IOERR_LOCK;
	if (p == PROBE_WRITER)
		return SQLITE_BUSY;
	if (want_seen(c->lockfd)) {
		/* Someone waits: not within a grace period after we gave the
		 * store up for them (then we race them: the log's lock decides). */
		int64_t now = now_ms();
		pthread_mutex_lock(&g_mu);
		bool grace = d->yielded_ms && now - d->yielded_ms < GRACE_MS;
		if (!grace && p == PROBE_CLEAN && d->yielded_ms && d->ignore_ms < d->yielded_ms)
			d->ignore_ms = now + IGNORE_MS; /* nobody took the store we gave up */
		pthread_mutex_unlock(&g_mu);
		if (grace)
			return SQLITE_BUSY;
	}
	bool excl = p != PROBE_CLEAN;
	if (excl) {
		int rc = grab_exclusive(c);
		if (rc != SQLITE_OK)
			return rc;
	}
	pthread_mutex_lock(&g_mu);
	int rc = writer_store(d) ? SQLITE_OK : open_store(d);
	pthread_mutex_unlock(&g_mu);
	if (excl)
		to_shared(c);
	return rc;
}

/* From SHARED into a write transaction: this process must hold the store,
 * and keeps it until the transaction ends (nres). */
/* Another connection holds RESERVED or more. */
static bool reserved_elsewhere(aconn *c)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = RESERVED_BYTE, .l_len = 1};
	return fcntl(c->lockfd, F_OFD_GETLK, &fl) < 0 || fl.l_type != F_UNLCK;
}

static int enter_write(aconn *c)
{
	struct adb *d = c->db;
	int64_t start = now_ms();
	for (;;) {
		pthread_mutex_lock(&g_mu);
		if (writer_store(d)) {
			d->nres++;
			c->counted = true;
			pthread_mutex_unlock(&g_mu);
			want_set(c, false);
			return SQLITE_OK;
		}
		pthread_mutex_unlock(&g_mu);
		bool held;
		int rc = claim_writer(c, &held);
		if (rc == SQLITE_BUSY && held) {
			want_set(c, true); /* the holder gives the store up for us */
			/* A holder outside any write transaction (no RESERVED) gives
			 * it up within WATCH_MS plus a checkpoint: wait for that here,
			 * as the unix VFS would grant RESERVED at once, so that a
			 * writer without a busy handler is not refused.  A holder in
			 * a write transaction: SQLITE_BUSY, as with the unix VFS. */
			if (!reserved_elsewhere(c) && now_ms() - start < HANDOFF_MS) {
				usleep(1000);
				continue;
			}
		}
		if (rc != SQLITE_OK)
			return rc;
	}
}

/* The write transaction ended: let a waiting process have the store. */
static void leave_write(aconn *c)
{
	if (!c->counted)
		return;
	struct adb *d = c->db;
	pthread_mutex_lock(&g_mu);
	d->nres--;
	c->counted = false;
	yield_store(d);
	pthread_mutex_unlock(&g_mu);
}

static int x_lock(sqlite3_file *f, int level)
{
	aconn *c = (aconn *)f;
	int r, rc;
	if (c->elock >= level)
		return SQLITE_OK;
	if (level == SQLITE_LOCK_SHARED) {
		/* As the unix VFS: hold PENDING (read) while taking the SHARED
		 * range, so that a writer waiting on PENDING keeps new readers out. */
		r = ofd(c->lockfd, F_RDLCK, PENDING_BYTE, 1);
		if (r < 0)
			return lock_rc(r, SQLITE_IOERR_RDLOCK);
		r = ofd(c->lockfd, F_RDLCK, SHARED_FIRST, SHARED_SIZE);
		ofd(c->lockfd, F_UNLCK, PENDING_BYTE, 1);
		if (r < 0)
			return lock_rc(r, SQLITE_IOERR_RDLOCK);
		c->elock = SQLITE_LOCK_SHARED;
		return writer_store(c->db) ? SQLITE_OK : check_recovered(c);
	}
	if (!c->counted && !c->nolock) {
		rc = enter_write(c);
		if (rc != SQLITE_OK)
			return rc;
	}
	if (level == SQLITE_LOCK_RESERVED) {
		r = ofd(c->lockfd, F_WRLCK, RESERVED_BYTE, 1);
		if (r < 0)
			return lock_rc(r, SQLITE_IOERR_LOCK);
		c->elock = SQLITE_LOCK_RESERVED;
		return SQLITE_OK;
	}
	/* EXCLUSIVE (from SHARED for a hot journal, else from RESERVED): first
	 * PENDING, kept on failure so that no new reader starves us. */
	if (c->elock < SQLITE_LOCK_PENDING) {
		r = ofd(c->lockfd, F_WRLCK, PENDING_BYTE, 1);
		if (r < 0)
			return lock_rc(r, SQLITE_IOERR_LOCK);
		c->elock = SQLITE_LOCK_PENDING;
	}
	r = ofd(c->lockfd, F_WRLCK, SHARED_FIRST, SHARED_SIZE);
	if (r < 0)
		return lock_rc(r, SQLITE_IOERR_LOCK);
	c->elock = SQLITE_LOCK_EXCLUSIVE;
	return SQLITE_OK;
}

static int x_unlock(sqlite3_file *f, int level)
{
	aconn *c = (aconn *)f;
	if (c->elock <= level)
		return SQLITE_OK;
	/* A group not committed by a sync is not part of the database: the
	 * transaction was rolled back or failed.  Drop it; the file never saw it.
	 * A synced one that phase two did not commit (a rollback played back
	 * after phase one, or a sync outside a commit) is what SQLite means the
	 * file to hold: commit it. */
	if (c->ready)
		commit_group(c, false);
	pend_clear(&c->pend);
	if (level == SQLITE_LOCK_SHARED) {
		to_shared(c);
	} else {
		unlock_all(c);
		if (c->want && now_ms() - c->want_ms > WANT_HOLD_MS)
			want_set(c, false);
	}
	leave_write(c);
	return SQLITE_OK;
}

static int x_check_reserved(sqlite3_file *f, int *out)
{
	aconn *c = (aconn *)f;
	if (c->elock >= SQLITE_LOCK_RESERVED) {
		*out = 1;
		return SQLITE_OK;
	}
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = RESERVED_BYTE, .l_len = 1};
	if (fcntl(c->lockfd, F_OFD_GETLK, &fl) < 0)
		return SQLITE_IOERR_CHECKRESERVEDLOCK;
	*out = fl.l_type != F_UNLCK;
	return SQLITE_OK;
}

static int pragma(aconn *c, char **az)
{
	const char *name = az[1];
	/* journal_mode=WAL is left to SQLite: without xShm* methods it keeps
	 * the mode it had and returns it (its documented answer when a mode
	 * cannot be set), except in locking_mode=EXCLUSIVE, where it runs WAL
	 * with its index in heap memory; then WAL commits are SQLite's own and
	 * each checkpoint's writes to the database are one group (CKPT_DONE). */
	if (!sqlite3_stricmp(name, "atomio_stats")) {
		atomio *st = writer_store(c->db);
		struct atomio_stats s = {0};
		if (st)
			atomio_stats(st, &s);
		az[0] = sqlite3_mprintf("writer=%d commits=%llu bytes_logged=%llu bytes_home=%llu "
					"log_syncs=%llu data_syncs=%llu checkpoints=%llu "
					"groups_recovered=%llu",
					st != NULL, (unsigned long long)s.commits,
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
	switch (op) {
	case SQLITE_FCNTL_SYNC:
		/* Phase one of a commit (also with synchronous=OFF, where no xSync
		 * follows).  With a rollback journal on disk, that journal is the
		 * commit record (and SQLite's own super-journal makes a commit
		 * over several databases atomic): commit now.  Without one, the
		 * group waits for phase two, so that the groups of all databases
		 * of the transaction commit as one (commit_ready). */
		if (!c->pend.active)
			return SQLITE_OK;
		if (journal_on_disk(c->db))
			return commit_group(c, false);
		ready_add(c);
		return SQLITE_OK;
	case SQLITE_FCNTL_COMMIT_PHASETWO:
		/* The commit; any truncation SQLite made after phase one is in
		 * the group (or, for the other databases of the transaction,
		 * folded into it from their page 1: fold_truncation). */
		return commit_ready(c);
	case SQLITE_FCNTL_CKPT_DONE:
		/* A WAL checkpoint (locking_mode=EXCLUSIVE) wrote its pages: they
		 * are in the WAL until SQLite resets it, which it may do without a
		 * sync (synchronous=OFF), so commit them now.  The truncation
		 * that follows is a group of its own, at xSync. */
		return commit_group(c, false);
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
		/* The file's size changes only inside a group. */
		return SQLITE_OK;
	case SQLITE_FCNTL_PRAGMA:
		return pragma(c, arg);
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
	/* Only for an SQLite that uses it: others ignore the flag, but their
	 * test suites (and tools) read it as "no journal file". */
	return c->real->pMethods->xDeviceCharacteristics(c->real) |
	       (__atomic_load_n(&g_batch, __ATOMIC_RELAXED) ? SQLITE_IOCAP_BATCH_ATOMIC : 0);
}

/* Version 1: no xShm* (so no WAL, see pragma()) and no xFetch (no mmap: every
 * read goes through x_read and sees the pending group). */
static const sqlite3_io_methods aio_methods = {
	.iVersion = 1,
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

/* --- databases ------------------------------------------------------------------ */

static struct adb *get_db(int fd, const char *path, uint64_t log_size)
{
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return NULL;
	pthread_mutex_lock(&g_mu);
	struct adb *d;
	for (d = g_dbs; d; d = d->next)
		if (d->dev == sb.st_dev && d->ino == sb.st_ino)
			break;
	if (d) {
		d->refs++;
	} else if ((d = calloc(1, sizeof(*d)))) {
		size_t n = strlen(path);
		d->db_path = strdup(path);
		d->log_path = malloc(n + sizeof(LOG_SUFFIX));
		if (!d->db_path || !d->log_path) {
			free(d->db_path);
			free(d->log_path);
			free(d);
			d = NULL;
		} else {
			memcpy(d->log_path, path, n);
			memcpy(d->log_path + n, LOG_SUFFIX, sizeof(LOG_SUFFIX));
			d->dev = sb.st_dev;
			d->ino = sb.st_ino;
			d->refs = 1;
			d->fid = -1;
			d->size = -1;
			char fdp[64];
			snprintf(fdp, sizeof(fdp), "/proc/self/fd/%d", fd);
			d->wfd = open(fdp, O_RDONLY | O_CLOEXEC);
			pthread_cond_init(&d->cv, NULL);
			d->log_size = log_size;
			d->next = g_dbs;
			g_dbs = d;
		}
	}
	pthread_mutex_unlock(&g_mu);
	return d;
}

/* FORK.  A child after fork() has a copy of g_dbs, whose stores are the
 * parent's (atomio refuses them in a child: -EPERM, docs/API.md "Fork") and
 * whose watcher threads it does not have.  So the child handler detaches
 * every database from the list: a connection the child opens makes a new
 * one, with its own descriptor for WANT_BYTE probes and, when it writes,
 * its own store (SQLITE_BUSY while the parent has the store open, until
 * the parent's watcher lets it go at the child's WANT_BYTE, as for any
 * other process).  The copies keep no store and no watcher; a connection
 * the child inherited must not be used (SQLite's rule for every VFS), and
 * closing it frees its copy without touching the store, nor the condition
 * variable a parent thread may have been waiting on (forked).  g_mu is
 * held across the fork so that the list is whole in the child. */
static void fork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&g_mu); }
static void fork_child(void)
{
	for (struct adb *d = g_dbs; d; d = d->next) {
		__atomic_store_n(&d->st, NULL, __ATOMIC_RELAXED);
		d->watching = false;
		d->forked = true;
	}
	g_dbs = NULL;
	pthread_mutex_unlock(&g_mu);
}
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static void fork_register(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static void release_db(struct adb *d)
{
	pthread_mutex_lock(&g_mu);
	if (--d->refs > 0) {
		pthread_mutex_unlock(&g_mu);
		return;
	}
	for (struct adb **pp = &g_dbs; *pp; pp = &(*pp)->next)
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	d->stop = true;
	if (!d->forked)
		pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&g_mu);
	if (d->watching)
		pthread_join(d->watcher, NULL);
	pthread_mutex_lock(&g_mu);
	atomio *st = writer_store(d);
	if (st) {
		/* The last connection of the writer: checkpoint (sync the
		 * database, free the log) and let another process write. */
		int r = atomio_close(st);
		if (r < 0)
			log_atomio(SQLITE_IOERR, d, "closing", r, NULL);
	}
	pthread_mutex_unlock(&g_mu);
	if (d->wfd >= 0)
		close(d->wfd);
	if (!d->forked)
		pthread_cond_destroy(&d->cv);
	free(d->db_path);
	free(d->log_path);
	free(d);
}

/* --- vfs methods ------------------------------------------------------------------ */

static sqlite3_vfs *real_vfs(sqlite3_vfs *v) { return ((struct avfs *)v)->real; }

static int v_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out)
{
	sqlite3_vfs *rv = real_vfs(vfs);
	if (!(flags & SQLITE_OPEN_MAIN_DB) || !name)
		return rv->xOpen(rv, name, f, flags, out);
	aconn *c = (aconn *)f;
	memset(c, 0, sizeof(*c));
	c->lockfd = -1;
	c->real = (sqlite3_file *)((char *)c + ROUND8(sizeof(*c)));
	int rc = rv->xOpen(rv, name, c->real, flags, out);
	if (rc != SQLITE_OK) {
		if (c->real->pMethods)
			c->real->pMethods->xClose(c->real);
		return rc;
	}
	/* Our own descriptor for the locks (read-write where allowed: recovery
	 * needs an exclusive lock even on a read-only connection). */
	c->lockfd = open(name, O_RDWR | O_CLOEXEC);
	if (c->lockfd < 0)
		c->lockfd = open(name, O_RDONLY | O_CLOEXEC);
	sqlite3_int64 log_size = sqlite3_uri_int64(name, "atomio_log_size", 0);
	c->diff = sqlite3_uri_boolean(name, "atomio_diff", 1);
	c->nolock = sqlite3_uri_boolean(name, "nolock", 0);
	c->db = c->lockfd >= 0 ? get_db(c->lockfd, name, log_size > 0 ? (uint64_t)log_size : 0) : NULL;
	if (!c->db) {
		rc = c->lockfd < 0 ? SQLITE_CANTOPEN : SQLITE_NOMEM;
		goto fail;
	}
	c->base.pMethods = &aio_methods;
	/* Recover now if no writer holds the store, so that a damaged log is
	 * reported at open.  Without waiting: if someone holds a lock, the
	 * first SHARED lock checks again. */
	if (!writer_store(c->db) && grab_exclusive(c) == SQLITE_OK) {
		c->elock = SQLITE_LOCK_EXCLUSIVE;
		int p = probe(c->db);
		rc = p < 0 ? SQLITE_IOERR : p == PROBE_DIRTY ? recover_release(c->db) : SQLITE_OK;
		unlock_all(c);
		if (rc != SQLITE_OK) {
			x_close(f);
			return SQLITE_CANTOPEN;
		}
	}
	return SQLITE_OK;
fail:
	c->real->pMethods->xClose(c->real);
	if (c->lockfd >= 0)
		close(c->lockfd);
	c->base.pMethods = NULL;
	return rc;
}

static int v_delete(sqlite3_vfs *v, const char *name, int sync)
{
	return real_vfs(v)->xDelete(real_vfs(v), name, sync);
}
static int v_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
	return real_vfs(v)->xAccess(real_vfs(v), name, flags, out);
}
static int v_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out)
{
	return real_vfs(v)->xFullPathname(real_vfs(v), name, n, out);
}
static void *v_dlopen(sqlite3_vfs *v, const char *name) { return real_vfs(v)->xDlOpen(real_vfs(v), name); }
static void v_dlerror(sqlite3_vfs *v, int n, char *out) { real_vfs(v)->xDlError(real_vfs(v), n, out); }
static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
	return real_vfs(v)->xDlSym(real_vfs(v), h, sym);
}
static void v_dlclose(sqlite3_vfs *v, void *h) { real_vfs(v)->xDlClose(real_vfs(v), h); }
static int v_randomness(sqlite3_vfs *v, int n, char *out)
{
	return real_vfs(v)->xRandomness(real_vfs(v), n, out);
}
static int v_sleep(sqlite3_vfs *v, int us) { return real_vfs(v)->xSleep(real_vfs(v), us); }
static int v_current_time(sqlite3_vfs *v, double *t) { return real_vfs(v)->xCurrentTime(real_vfs(v), t); }
static int v_get_last_error(sqlite3_vfs *v, int n, char *out)
{
	return real_vfs(v)->xGetLastError ? real_vfs(v)->xGetLastError(real_vfs(v), n, out) : 0;
}
static int v_current_time64(sqlite3_vfs *v, sqlite3_int64 *t)
{
	return real_vfs(v)->xCurrentTimeInt64(real_vfs(v), t);
}
static int v_set_syscall(sqlite3_vfs *v, const char *name, sqlite3_syscall_ptr p)
{
	return real_vfs(v)->xSetSystemCall(real_vfs(v), name, p);
}
static sqlite3_syscall_ptr v_get_syscall(sqlite3_vfs *v, const char *name)
{
	return real_vfs(v)->xGetSystemCall(real_vfs(v), name);
}
static const char *v_next_syscall(sqlite3_vfs *v, const char *name)
{
	return real_vfs(v)->xNextSystemCall(real_vfs(v), name);
}

int atomio_sqlite_register_impl(const char *name, int make_default)
{
	if (!name)
		name = "atomio";
	if (strlen(name) >= sizeof(g_vfs->name))
		return SQLITE_MISUSE;
	pthread_once(&g_fork_once, fork_register);
	pthread_mutex_lock(&g_mu);
	struct avfs *v;
	for (v = g_vfs; v; v = v->next)
		if (!strcmp(v->name, name))
			break;
	int rc;
	if (v) {
		rc = sqlite3_vfs_register(&v->base, make_default);
		pthread_mutex_unlock(&g_mu);
		return rc;
	}
	g_batch = sqlite3_compileoption_used("ENABLE_BATCH_ATOMIC_WRITE");
	sqlite3_vfs *real = sqlite3_vfs_find(NULL);
	for (struct avfs *w = g_vfs; w && real; w = w->next)
		if (real == &w->base)
			real = w->real; /* we are the default already: wrap what we wrap */
	if (!real) {
		pthread_mutex_unlock(&g_mu);
		return SQLITE_ERROR;
	}
	v = calloc(1, sizeof(*v));
	if (!v) {
		pthread_mutex_unlock(&g_mu);
		return SQLITE_NOMEM;
	}
	strcpy(v->name, name);
	v->real = real;
	sqlite3_vfs *b = &v->base;
	b->iVersion = real->iVersion < 3 ? real->iVersion : 3;
	b->szOsFile = (int)(ROUND8(sizeof(aconn)) + (size_t)real->szOsFile);
	b->mxPathname = real->mxPathname;
	b->zName = v->name;
	b->pAppData = v;
	b->xOpen = v_open;
	b->xDelete = v_delete;
	b->xAccess = v_access;
	b->xFullPathname = v_full_pathname;
	b->xDlOpen = v_dlopen;
	b->xDlError = v_dlerror;
	b->xDlSym = v_dlsym;
	b->xDlClose = v_dlclose;
	b->xRandomness = v_randomness;
	b->xSleep = v_sleep;
	b->xCurrentTime = v_current_time;
	b->xGetLastError = v_get_last_error;
	if (b->iVersion >= 2)
		b->xCurrentTimeInt64 = v_current_time64;
	if (b->iVersion >= 3) {
		b->xSetSystemCall = v_set_syscall;
		b->xGetSystemCall = v_get_syscall;
		b->xNextSystemCall = v_next_syscall;
	}
	rc = sqlite3_vfs_register(b, make_default);
	if (rc == SQLITE_OK) {
		v->next = g_vfs;
		g_vfs = v;
	} else {
		free(v);
	}
	pthread_mutex_unlock(&g_mu);
	return rc;
}

#ifndef ATOMIO_SQLITE_EXTENSION
int atomio_sqlite_register(const char *name, int make_default)
{
	return atomio_sqlite_register_impl(name, make_default);
}
#endif
