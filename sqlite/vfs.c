/*
 * vfs.c: the atomio SQLite VFS (include/atomio_sqlite.h).
 *
 * A shim over the default (unix) VFS.  Every file but a main database, its
 * rollback journal and its WAL passes straight through.  For a main database
 * "DB":
 *
 * GROUPS.  xWrite and xTruncate do not touch the file: they go to the
 * connection's pending group (pend.c), which xRead and xFileSize overlay on
 * the file.  The group is committed as one atomio group (one durable log
 * write, then the home writes) at SQLITE_FCNTL_SYNC, which SQLite sends at
 * every commit right before xSync (and in its place with synchronous=OFF), or
 * at SQLITE_FCNTL_COMMIT_ATOMIC_WRITE in a batch-atomic build.  Without a
 * rollback journal on disk the synced group waits for phase two
 * (SQLITE_FCNTL_COMMIT_PHASETWO) or, where SQLite ignores phase two's
 * result (a super-journal), for the super-journal's deletion, so that all
 * databases of a transaction over ATTACHed ones commit as one group
 * (commit_set), or its COMMIT fails (x_file_control).  xSync itself then has
 * nothing to do: an acknowledged group is durable in the log, and the store's
 * checkpoint syncs the file before the log space is reused.  A group still
 * pending when the lock drops below RESERVED, synced or not, was never
 * committed: SQLite rolled the transaction back or failed it, so it is
 * discarded and the file is exactly as before the transaction.
 *
 * JOURNALS.  So a rollback journal on disk adds nothing, and the VFS keeps
 * the ones SQLite creates in memory (see "journals" below): in DELETE,
 * TRUNCATE and PERSIST mode, SQLite's default included, every transaction
 * commits as one group, as in MEMORY mode, with SQLite's ROLLBACK,
 * savepoints and statement rollback working on its journal as usual.
 *
 * WAL.  journal_mode=WAL is SQLite's own, with the unix VFS's shared memory
 * (see "WAL" below): no groups, no log; the database file is written
 * directly, by checkpoints only.
 *
 * THE STORE.  The log is "DB-atomio", and its store is shared: every
 * process that reads or writes the database in a rollback mode joins it
 * (atomio_open without ATOMIO_EXCLUSIVE; within a process, all connections
 * to the database share one handle, struct adb, found by device and inode)
 * and keeps it while it has the database open.  SQLite's own locks decide
 * who writes; each commit is one group from whichever process commits,
 * with no checkpoint and no handing over when the writer changes.
 *
 * LOCKS.  SQLite's usual lock bytes (PENDING, RESERVED, SHARED range), taken
 * as Linux open-file-description (OFD) locks on a descriptor of the
 * connection's own.  OFD locks conflict with the classic POSIX locks of the
 * unix VFS in other processes, so plain SQLite is excluded as usual; and,
 * unlike POSIX locks, they are not dropped when the process closes some
 * other descriptor of the file, which atomio does (its store and its
 * recovery open and close the database file).  Each connection has its own
 * open file description, so connections of one process lock each other out
 * exactly as processes do.  Writers take turns (turns.h): a refused
 * connection's busy-handler sleep (v_sleep) ends when it is handed the
 * write lock, and the others yield to it meanwhile, so that the writer that
 * just committed does not take every turn.
 *
 * NO READER SEES HALF A COMMIT.  Home writes happen inside the commit, with
 * the EXCLUSIVE lock held, and end before the commit returns, so a reader
 * holding SHARED never overlaps a live writer's.  A writer killed in the
 * middle of one leaves its group to the store's other processes, or to the
 * next one to open the log, which recovers it: before reading, every
 * connection that takes SHARED joins the store and waits until it is
 * settled (settle: atomio_settle), so that it never reads a group half
 * home.
 *
 * SYSTEM CALLS.  Every byte the store writes goes through libatomio and so
 * through its ops table (src/sys.h).  So do the VFS's own calls on its
 * marker files and on the logs (opening, reading, writing, syncing and
 * removing them, their directory's sync, the log's flock probe and birth
 * time), and, in WAL mode, every call on the WAL file and every write,
 * truncation and sync of the database: see "files" below.  Only its locks
 * (OFD locks on descriptors of its own), the read-only map of the database
 * and the look at a rollback journal's first byte go to the system
 * directly; SQLite's own calls on the database (reads, its creation) and
 * WAL's shared memory are the unix VFS's.  A rollback journal on disk (a
 * hot one, or one that names a database of another VFS) is the unix VFS's
 * file too.
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
#include "turns.h"

/* SQLite's lock bytes (src/os.h), as the unix VFS locks them. */
#define PENDING_BYTE 0x40000000
#define RESERVED_BYTE (PENDING_BYTE + 1)
#define SHARED_FIRST (PENDING_BYTE + 2)
#define SHARED_SIZE 510
#define LOCK_SPAN (2 + SHARED_SIZE)
/* The byte after SQLite's: held (write) by a connection of this VFS while
 * it holds the exclusive lock only to look at or recover the log (at its
 * open, or a reader's recovery of a group marker), so that a reader refused
 * SHARED meanwhile waits for it rather than report SQLITE_BUSY, which no
 * open of the unix VFS ever causes (lock_shared).  SQLite's lock page is
 * never data, and SQLite locks no byte of it but its own. */
#define PROBE_BYTE (SHARED_FIRST + SHARED_SIZE)
/* How long such a reader waits at most: a look at the log takes
 * microseconds, a recovery replays the log. */
#define PROBE_WAIT_MS 500

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
	struct turns *turns; /* in st's shared area while st is published; atomic (turns_pin) */
	int npin;            /* threads using turns (turns_pin); atomic */
	char store_err[512]; /* st's message buffer (atomio writes there while st is open) */
	int fid;
	uint64_t capacity;   /* bytes of records the log holds */
	uint32_t max_segs;   /* most ranges one group of the store may have */
	int nres;            /* connections of this process in a write transaction */
	int wfd;             /* our own open file description (header_wal, f_size) */
	bool forked;         /* a copy in a child after fork (fork_child) */
	ino_t log_ino;       /* the log st joined (settle: still the one at log_path?) */
	/* The writer's record of the database's size (only its commits change
	 * it), so that transactions need no fstat.  -1: unknown.  Atomic. */
	int64_t size;
	int nwal;            /* WAL files of it open in this process (WAL, below); atomic */
	int dfd;             /* while nwal > 0: for WAL's writes to the database (-1: none) */
	bool wal_blocked;    /* a store could not be closed for WAL: no direct writes */
	bool snap_ok;        /* snap: the log's mark after our recovery */
	ino_t snap_ino;
	struct atomio_log_mark snap;
	/* The log of a transaction over several databases that committed with
	 * this database among them but whose checkpoint failed, so its group
	 * may still be live there and its markers stay (commit_set): until it
	 * is checkpointed, no later group of this database may commit
	 * (unmark).  NULL: none.  Set and cleared under this database's
	 * EXCLUSIVE lock. */
	char *mark_log;
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
	bool ready;          /* the group was synced: commit it with the others */
	unsigned streak;     /* write locks taken since it last handed one off (turns) */
	struct aconn *rnext; /* g_ready */
	pthread_t rowner;    /* the thread that synced the group (ready_add) */
	bool rbusy;          /* in a commit of rowner's (ready_take): not freed meanwhile */
	struct aconn *cnext; /* g_conns */
	bool inherited;      /* a copy in a child after fork (fork_child): never used */
	unsigned char *map;  /* the file, read-only, for the diff (map_base) */
	size_t maplen;
	struct pend pend;
} aconn;

#define ROUND8(n) (((n) + 7) & ~(size_t)7)

/* Guards the lists and every change of a database's store or snapshot. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct adb *g_dbs;
static struct avfs *g_vfs;
/* This process's open main-database connections (fork_child). */
static struct aconn *g_conns;

static const sqlite3_io_methods aio_methods;

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

static atomio *writer_store(struct adb *d) { return __atomic_load_n(&d->st, __ATOMIC_ACQUIRE); }

/* TURNS (turns.h): the database's turns words, in its store's shared area,
 * held while in use.  The pin is a counter, not g_mu, since a sleeper holds
 * it for its whole sleep; a store is unpublished (store_unpublish) only
 * once no thread holds it, so the words stay mapped.  NULL: no store (WAL
 * mode, or this process has not joined it yet): no turns. */
static struct turns *turns_pin(struct adb *d)
{
	__atomic_add_fetch(&d->npin, 1, __ATOMIC_SEQ_CST);
	struct turns *t = __atomic_load_n(&d->turns, __ATOMIC_SEQ_CST);
	if (!t)
		__atomic_sub_fetch(&d->npin, 1, __ATOMIC_SEQ_CST);
	return t;
}
static void turns_unpin(struct adb *d) { __atomic_sub_fetch(&d->npin, 1, __ATOMIC_SEQ_CST); }

/* d's store, held as turns_pin holds its words, for a use outside g_mu
 * (settle, atomio_stats): another thread may unpublish and close it
 * meanwhile (wal_drop_store at a WAL file's open, settle's drop of a store
 * whose log went), and waits for the pin.  NULL: no store.  store_unpin. */
static atomio *store_pin(struct adb *d)
{
	__atomic_add_fetch(&d->npin, 1, __ATOMIC_SEQ_CST);
	atomio *st = __atomic_load_n(&d->st, __ATOMIC_SEQ_CST);
	if (!st)
		__atomic_sub_fetch(&d->npin, 1, __ATOMIC_SEQ_CST);
	return st;
}
static void store_unpin(struct adb *d) { __atomic_sub_fetch(&d->npin, 1, __ATOMIC_SEQ_CST); }

/* d's store stops being this process's (g_mu held; the caller closes it).
 * A thread may still be using its turns words: wait (a sleep in v_sleep is
 * bounded, TURNS_SLEEP_MAX_US). */
static void store_unpublish(struct adb *d)
{
	__atomic_store_n(&d->st, NULL, __ATOMIC_SEQ_CST);
	__atomic_store_n(&d->turns, NULL, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&d->npin, __ATOMIC_SEQ_CST)) {
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
}

/* This thread's last refusal of a lock (x_lock), for its busy handler's
 * xSleep (v_sleep); and a hand-off it was given there, for its next try. */
static __thread struct {
	dev_t dev, hdev;
	ino_t ino, hino;
	bool busy, excl; /* refused; refused EXCLUSIVE (readers to leave) */
	uint32_t handed; /* the hand-off's token (turns_sleep), for hdev/hino */
	struct aconn *conn; /* refused EXCLUSIVE: the connection (readers_left) */
} t_turn;

static uint32_t handed_to(struct adb *d)
{
	return t_turn.handed && t_turn.hdev == d->dev && t_turn.hino == d->ino ? t_turn.handed : 0;
}

/* A lock refused: remember it for v_sleep. */
static int turn_busy(aconn *c, bool excl)
{
	t_turn.busy = true;
	t_turn.excl = excl;
	t_turn.conn = excl ? c : NULL;
	t_turn.dev = c->db->dev;
	t_turn.ino = c->db->ino;
	return SQLITE_BUSY;
}

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

/* Up to len bytes from offset off (fewer only at the end of the file),
 * retrying EINTR and short reads: the count or a negative errno. */
static ssize_t f_pread_all(int fd, void *buf, size_t len, off_t off)
{
	const struct atomio_sysops *s = os();
	size_t done = 0;
	while (done < len) {
		ssize_t n = s ? s->pread(fd, (char *)buf + done, len - done, off + (off_t)done)
			      : pread(fd, (char *)buf + done, len - done, off + (off_t)done);
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

static ssize_t f_read_all(int fd, void *buf, size_t len) { return f_pread_all(fd, buf, len, 0); }

/* All of buf at offset off, retrying EINTR and short writes: 0 or < 0. */
static int f_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const struct atomio_sysops *s = os();
	size_t done = 0;
	while (done < len) {
		struct iovec v = {(char *)buf + done, len - done};
		ssize_t n = s ? s->pwritev(fd, &v, 1, off + (off_t)done, 0) : pwritev(fd, &v, 1, off + (off_t)done);
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

static int f_write_all(int fd, const void *buf, size_t len) { return f_pwrite_all(fd, buf, len, 0); }

/* fdatasync, retrying EINTR. */
static int f_fdatasync(int fd)
{
	const struct atomio_sysops *s = os();
	int r;
	do
		r = s ? s->fdatasync(fd) : f_neg(fdatasync(fd));
	while (r == -EINTR);
	return r;
}

static int f_ftruncate(int fd, off_t size)
{
	const struct atomio_sysops *s = os();
	return s ? s->ftruncate(fd, size) : f_neg(ftruncate(fd, size));
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

/* The inode number at path (0: none).  statx asks for nothing else: a stat
 * that reads a file's times marks them seen, and Linux (6.13+) then stamps
 * every later write with fine-grained times (x_file_size says what that
 * costs). */
static ino_t f_ino(const char *path)
{
	const struct atomio_sysops *s = os();
	if (!s) {
		struct statx sx;
		return statx(AT_FDCWD, path, 0, STATX_INO, &sx) < 0 ? 0 : (ino_t)sx.stx_ino;
	}
	struct atomio_statx sx;
	return s->statx(AT_FDCWD, path, 0, STATX_INO, &sx) < 0 ? 0 : (ino_t)sx.stx_ino;
}

/* The size of the file as its inode says, with a statx that asks for the
 * size only (f_ino says why no times); < 0: an error. */
static int64_t f_size(int fd)
{
	const struct atomio_sysops *s = os();
	if (!s) {
		struct statx sx;
		return statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx) < 0 ? -1 : (int64_t)sx.stx_size;
	}
	struct atomio_statx sx;
	return s->statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx) < 0 ? -1 : (int64_t)sx.stx_size;
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
	if (fd < 0)
		return -EBADF; /* an inherited connection's (fork_child): no locks */
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
static bool header_wal(struct adb *d);
static void remove_log(struct adb *d);

enum probe { PROBE_WRITER, PROBE_NOLOG, PROBE_CLEAN, PROBE_DIRTY };

/* Does a process have the store open (it recovered the log when it
 * opened it, the first of them)?  If not, has any store been opened since
 * our last recovery?  Returns an enum probe or < 0.  Every process of a
 * store holds the log's flock shared: taken exclusive here, for a moment
 * (a process joining meanwhile gets SQLITE_BUSY and retries). */
static int probe(struct adb *d)
{
	int fd = f_open(d->log_path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd != -ENOENT ? fd : has_group_marker(d) ? PROBE_DIRTY : PROBE_NOLOG;
	int r = f_flock(fd, LOCK_EX | LOCK_NB);
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
	f_close(fd); /* drops the probe's flock */
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
static bool log_stale(struct adb *d, bool replaced)
{
	struct statx_timestamp db, lg;
	if (!f_btime(d->log_path, &lg) || !f_btime(d->db_path, &db)) /* the log first: usually none */
		return false;
	if (db.tv_sec < lg.tv_sec || (db.tv_sec == lg.tv_sec && db.tv_nsec < lg.tv_nsec))
		return false;
	return !(db.tv_sec == lg.tv_sec && db.tv_nsec == lg.tv_nsec && !replaced);
}

static int check_log_age(struct adb *d, bool replaced)
{
	if (!log_stale(d, replaced))
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

/* Bring one log's groups home and durable, and close it again: join its
 * store (the first process to open it recovers: replays it), wait until
 * every group of its live or dead processes is home (atomio_settle), and
 * checkpoint (a close that is not the last one does not), so that the
 * markers may go.  No log: nothing to do. */
static int replay_log(const char *log_path, char *err, size_t errlen)
{
	struct atomio_options o = {.flags = ATOMIO_ACCEPT_COPIES, .errbuf = err, .errbuf_size = errlen};
	atomio *st;
	int r = atomio_open(log_path, &o, &st);
	if (r < 0)
		return r == -ENOENT || r == -EBUSY ? 0 : r;
	r = atomio_settle(st);
	if (r == 0)
		r = atomio_checkpoint(st);
	int c = atomio_close(st);
	return r < 0 ? r : c;
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
	struct atomio_options o = {.flags = ATOMIO_ACCEPT_COPIES | ATOMIO_EXCLUSIVE, .errbuf = err, .errbuf_size = sizeof(err)};
	atomio *st;
	int rc = check_log_age(d, false);
	if (rc != SQLITE_OK)
		return rc;
	if (has_group_marker(d)) {
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
			if (r == 0 && header_wal(d))
				remove_log(d); /* nothing in it: WAL databases have none */
			else if (r == 0)
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

#define MIB (1ull << 20)

/* A new log without atomio_log_size=: eight times the database, 8 to 64
 * MiB, so that a small database gets a smaller log, while the log still
 * lets a hot page be written home once per checkpoint rather than once per
 * few commits (docs/API.md, "Wear": the log's size is the lever; a database is
 * often created empty and filled by the process that made its log); a
 * transaction that does not fit grows it (grow_store). */
static uint64_t initial_log_size(struct adb *d)
{
	struct stat sb;
	uint64_t n = stat(d->db_path, &sb) == 0 ? 8 * (uint64_t)sb.st_size : 0;
	n = (n + MIB - 1) & ~(MIB - 1);
	return n < 8 * MIB ? 8 * MIB : n > 64 * MIB ? 64 * MIB : n;
}

/* Join the database's store (THE STORE): any number of processes have it
 * open at once.  The first process to open it after all others closed or
 * died recovers the log inside atomio_open, before it returns; no other
 * process reads the file meanwhile, because every process that reads a
 * database with a log joins its store before it reads (settle), and a
 * first opener is alone by definition.  g_mu held. */
static int open_store(struct adb *d)
{
	/* The store keeps writing the cause of its later failures into this
	 * buffer, for as long as it is open: it is the database's, not this
	 * frame's (one on the stack here was written over whatever frame was
	 * there later). */
	char *err = d->store_err;
	err[0] = 0;
	struct atomio_options o = {.log_size = d->log_size ? d->log_size : initial_log_size(d),
				   .flags = ATOMIO_CREATE | ATOMIO_ACCEPT_COPIES, .errbuf = err,
				   .errbuf_size = sizeof(d->store_err)};
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
		return SQLITE_BUSY; /* a process holds it alone (ATOMIO_EXCLUSIVE: recover_release) */
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
	d->log_ino = f_ino(d->log_path);
	void *area = NULL;
	if (atomio_shared_area(st, &area, NULL) < 0)
		area = NULL; /* cannot fail on a store just opened; no turns if it did */
	__atomic_store_n(&d->turns, (struct turns *)area, __ATOMIC_SEQ_CST);
	__atomic_store_n(&d->st, st, __ATOMIC_RELEASE);
	return SQLITE_OK;
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
	/* The store is shared: the log can be replaced only while no other
	 * process has it open (they would go on writing to the old one).  Its
	 * flock tells: every process of a store holds it shared; taken
	 * exclusive here, no process can join until the new log is in place. */
	int lfd = f_open(d->log_path, O_RDONLY | O_CLOEXEC, 0);
	if (lfd < 0)
		return false;
	store_unpublish(d);
	int r = atomio_checkpoint(st);
	int rc = atomio_close(st);
	if (r == 0)
		r = rc;
	if (r == 0 && f_flock(lfd, LOCK_EX | LOCK_NB) < 0) {
		f_close(lfd);
		sqlite3_log(SQLITE_NOTICE, "atomio: %s not grown: other processes have it open", d->log_path);
		if (open_store(d) != SQLITE_OK)
			sqlite3_log(SQLITE_IOERR, "atomio: %s: cannot join the store again", d->db_path);
		return false;
	}
	if (r < 0) {
		f_close(lfd);
		log_atomio(SQLITE_IOERR, d, "closing (to grow the log)", r, NULL);
		return false;
	}
	r = f_unlink(d->log_path);
	if (r < 0 && r != -ENOENT) {
		f_close(lfd);
		return false;
	}
	uint64_t old = d->log_size;
	d->log_size = n;
	rc = open_store(d);
	f_close(lfd); /* the old log's flock */
	if (rc != SQLITE_OK) {
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
		store_unpublish(d);
		atomio_close(st); /* a failed store is not checkpointed */
		if (open_store(d) != SQLITE_OK)
			sqlite3_log(SQLITE_IOERR, "atomio: %s needs recovery; the next opener retries it",
				    d->db_path);
	}
	pthread_mutex_unlock(&g_mu);
}

/* --- WAL ------------------------------------------------------------------------ */

static void release_db(struct adb *d);

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

/* Does the database file say WAL: the file format's write and read
 * versions (header bytes 18 and 19) both 2? */
static bool header_wal(struct adb *d)
{
	unsigned char v[2];
	const struct atomio_sysops *s = os();
	ssize_t n = s ? s->pread(d->wfd, v, 2, 18) : pread(d->wfd, v, 2, 18);
	return n == 2 && v[0] == 2 && v[1] == 2;
}

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
static bool group_sets_wal(aconn *c)
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

/* Remove the log of a database whose store nobody holds and whose log
 * holds nothing to replay (closed by us just now, or recovered): under its
 * flock, as check_log_age, retried while a reader's probe holds it shared
 * for a moment. */
static void remove_log(struct adb *d)
{
	d->snap_ok = false;
	for (int i = 0; i < 200; i++) {
		int fd = f_open(d->log_path, O_RDONLY | O_CLOEXEC, 0);
		if (fd < 0)
			return;
		int r = f_flock(fd, LOCK_EX | LOCK_NB);
		if (r == 0) {
			f_unlink(d->log_path);
			f_close(fd);
			return;
		}
		f_close(fd);
		if (r != -EWOULDBLOCK)
			break;
		usleep(1000);
	}
	sqlite3_log(SQLITE_NOTICE, "atomio: could not remove %s beside a WAL database", d->log_path);
}

/* The database is in WAL mode now: this process's store, if it has one,
 * is closed (checkpointed: nothing in its log to replay) and the log
 * removed.  (A log this process did not just empty stays: a group in it
 * may not be synced home yet; the next recovery removes it.)  g_mu held. */
static void wal_drop_store(struct adb *d)
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
static bool wal_mode(struct adb *d) { return __atomic_load_n(&d->nwal, __ATOMIC_ACQUIRE) > 0; }

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

static int sync_dir_of(const char *path);

/* SQLite's test builds count the unix VFS's syncs (full_fsync, with
 * SQLITE_TEST); where those counters exist (its testfixture), WAL mode's
 * syncs here count as the unix VFS's would, so that its tests of WAL's
 * syncs read the same. */
extern int sqlite3_sync_count __attribute__((weak));
extern int sqlite3_fullsync_count __attribute__((weak));
static void count_sync(int flags)
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

/* Bytes of log a group needs, counting every entry as its own range. */
static uint64_t group_need(const struct pend *p)
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
	int urc = st ? unmark(d) : SQLITE_IOERR_WRITE;
	if (urc != SQLITE_OK) {
		pend_clear(p);
		return urc;
	}
	atomio_tx *tx = NULL;
	int r = atomio_tx_begin(st, &tx);
	int64_t spare = (int64_t)d->max_segs - group_ranges(p);
	if (r == 0)
		r = add_group(c, tx, d->fid, &spare);
	bool committed = false, to_wal = r == 0 && group_sets_wal(c);
	if (r == 0) {
		r = atomio_tx_commit(tx);
		committed = true;
	} else if (tx) {
		atomio_tx_abort(tx);
	}
	int64_t lsize = p->lsize;
	pend_clear(p);
	__atomic_store_n(&d->size, r == 0 ? lsize : -1, __ATOMIC_RELAXED);
	if (r == 0 && to_wal) {
		/* The database is a WAL database from now on (WAL above):
		 * nothing may stay in its log. */
		pthread_mutex_lock(&g_mu);
		wal_drop_store(d);
		pthread_mutex_unlock(&g_mu);
	}
	return r == 0 ? SQLITE_OK : commit_failed(c, r, committed);
}

static void ready_add(aconn *c)
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

static void ready_drop(aconn *c)
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
static void ready_forget(aconn *c)
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
static int commit_ready(aconn *c)
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
static int commit_at_super_delete(void) { return commit_ready(NULL); }


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

/* A connection a forked child inherited (fork_child) is refused every lock,
 * write and commit: they would act on the parent's locks or store.  Its
 * pending group, a copy of the parent's, is dropped. */
static int x_inherited(aconn *c, int rc)
{
	ready_drop(c);
	pend_clear(&c->pend);
	sqlite3_log(rc, "atomio: %s: a connection inherited across fork() is not usable in the child "
		    "(open a new one there)", c->db->db_path);
	return rc;
}

static void release_db(struct adb *d);
static void leave_write(aconn *c);
static int enter_write(aconn *c);
static bool super_in_memory(const char *name);
static int journal_to_disk(struct adb *d);

static int x_close(sqlite3_file *f)
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
	int64_t n = c->db->wfd >= 0 ? f_size(c->db->wfd) : -1;
	int rc = n >= 0 ? SQLITE_OK : c->real->pMethods->xFileSize(c->real, size);
	if (n >= 0)
		*size = n;
	if (rc == SQLITE_OK && writer)
		__atomic_store_n(&c->db->size, (int64_t)*size, __ATOMIC_RELAXED);
	return rc;
}

/* A group marker (commit_set): a transaction over several databases may
 * have died before its group was home everywhere.  Recover all of them
 * under an exclusive lock before reading (recover_group); so also a stale
 * log (check_log_age).  SHARED held, and held again on return. */
static int recover_marked(aconn *c)
{
	bool probing = ofd(c->lockfd, F_WRLCK, PROBE_BYTE, 1) == 0;
	unlock_all(c);
	int rc = grab_exclusive(c);
	if (rc == SQLITE_OK) {
		rc = recover_release(c->db);
		if (rc != SQLITE_OK) {
			unlock_all(c);
		} else {
			/* the set's log replayed and checkpointed (recover_group) */
			free(c->db->mark_log);
			c->db->mark_log = NULL;
			to_shared(c);
		}
	}
	if (probing)
		ofd(c->lockfd, F_UNLCK, PROBE_BYTE, 1);
	return rc;
}

/* SETTLE.  Called with SHARED just taken, before SQLite reads anything.
 * Every process that writes the database commits through one shared store
 * (THE STORE), under SQLite's EXCLUSIVE lock, and its commit returns only
 * once its group is home, so a live writer's group is never half home while
 * anyone holds SHARED.  A writer killed mid-commit is another matter: its
 * batch may be logged and not home, or half home, and it is another
 * process of the store that finishes it (adopts it: writes it home again
 * whole, or gives it up if its record was not durable) or, if none is left,
 * the next process to open the store that recovers the log.  Neither may
 * happen while someone reads.  So here, before reading:
 *  - a process without a store joins it whenever a log exists (the first
 *    to open it recovers it, inside atomio_open, before anyone can read:
 *    every reader joins before reading); with no log, nothing was ever
 *    committed that could be half home;
 *  - then atomio_settle: it returns once every group that any process of
 *    the store queued or logged is home, adopting the batches of dead
 *    processes itself (it notices them within SHM_REAP_NS, about 0.1 s)
 *    and committing groups a dead process left queued.  Our SHARED lock
 *    keeps every live writer out meanwhile, so what it waits for is a dead
 *    writer's work only, and it costs the store's mutex when there is none.
 * A store whose log is no longer the file at its path (another process
 * switched the database to WAL and removed it, or grew it) is dropped
 * first, so that no group of ours ever goes to a log nobody will recover.
 * The size the writer knows (x_file_size) may be stale once any other
 * process can have committed: forgotten here.  Returns with SHARED held, or
 * unlocked and an error. */
static int settle(aconn *c)
{
	struct adb *d = c->db;
	if (wal_mode(d))
		return SQLITE_OK; /* WAL: no store (WAL above) */
	/* A stale log is removed, as a recovery, under the exclusive lock
	 * (the open's look at it was put off if someone held a lock then):
	 * removed with SHARED only, another process in settle beside us could
	 * have opened the log's path and take its flock after the removal,
	 * and run a store on a log that nobody would recover. */
	if (has_group_marker(d) || (!writer_store(d) && log_stale(d, false))) {
		int rc = recover_marked(c);
		if (rc != SQLITE_OK)
			return rc;
	}
	pthread_mutex_lock(&g_mu);
	__atomic_store_n(&d->size, -1, __ATOMIC_RELAXED);
	atomio *st = writer_store(d);
	if (st && d->nres == 0 && f_ino(d->log_path) != d->log_ino) {
		store_unpublish(d);
		int r = atomio_close(st);
		if (r < 0)
			log_atomio(SQLITE_IOERR, d, "closing (its log was removed)", r, NULL);
		st = NULL;
	}
	int rc = SQLITE_OK;
	if (!st && f_exists(d->log_path) != -ENOENT) {
		rc = open_store(d);
		st = writer_store(d);
	}
	pthread_mutex_unlock(&g_mu);
	/* Pinned: a WAL file's open by another connection (wal_drop_store)
	 * may close the store meanwhile; then there is nothing to settle. */
	if (rc == SQLITE_OK && st && (st = store_pin(d))) {
		int r = atomio_settle(st);
		store_unpin(d);
		if (r < 0) {
			log_atomio(SQLITE_IOERR, d, "settling", r, d->store_err);
			rc = SQLITE_IOERR_LOCK;
		}
	}
	if (rc != SQLITE_OK)
		unlock_all(c);
	return rc;
}

/* From SHARED into a write transaction: this process joins the store if it
 * has not (creating the log), and counts the transaction (nres).  SQLite's
 * RESERVED and EXCLUSIVE locks decide who writes; the store is shared, so
 * no process ever waits for another to give it up, and nothing is
 * checkpointed at a change of writer. */
static int enter_write(aconn *c)
{
	struct adb *d = c->db;
	pthread_mutex_lock(&g_mu);
	int rc = writer_store(d) ? SQLITE_OK : open_store(d);
	if (rc == SQLITE_OK && !c->counted) {
		d->nres++;
		c->counted = true;
	}
	pthread_mutex_unlock(&g_mu);
	return rc;
}

/* The write transaction ended. */
static void leave_write(aconn *c)
{
	if (!c->counted)
		return;
	struct adb *d = c->db;
	pthread_mutex_lock(&g_mu);
	d->nres--;
	c->counted = false;
	pthread_mutex_unlock(&g_mu);
}

/* SHARED from NONE.  First, while another connection is being handed the
 * write lock, wait for it to take it (turns.h): the writer that just
 * released is back here long before a sleeper wakes. */
static int take_shared(aconn *c)
{
	/* As the unix VFS: hold PENDING (read) while taking the SHARED range,
	 * so that a writer waiting on PENDING keeps new readers out. */
	int r = ofd(c->lockfd, F_RDLCK, PENDING_BYTE, 1);
	if (r == 0) {
		r = ofd(c->lockfd, F_RDLCK, SHARED_FIRST, SHARED_SIZE);
		ofd(c->lockfd, F_UNLCK, PENDING_BYTE, 1);
	}
	return r;
}

/* Does a connection hold the exclusive lock only to look at the log
 * (PROBE_BYTE)? */
static bool log_probed(aconn *c)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = PROBE_BYTE, .l_len = 1};
	return fcntl(c->lockfd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

static int lock_shared(aconn *c)
{
	struct turns *t = turns_pin(c->db);
	if (t) {
		turns_yield(t, handed_to(c->db));
		turns_unpin(c->db);
	}
	int r = take_shared(c);
	for (int i = 0; r == -EAGAIN && i < PROBE_WAIT_MS && log_probed(c); i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
		r = take_shared(c);
	}
	if (r < 0)
		return r == -EAGAIN ? turn_busy(c, false) : SQLITE_IOERR_RDLOCK;
	c->elock = SQLITE_LOCK_SHARED;
	t_turn.busy = false;
	return settle(c);
}

/* RESERVED from SHARED: the write lock.  Taken or refused, a pending
 * hand-off ends: the woken connection has it, or was beaten to it by one
 * that already held SHARED when the hand-off began (and sleeps again). */
static int lock_reserved(aconn *c)
{
	int r = ofd(c->lockfd, F_WRLCK, RESERVED_BYTE, 1);
	uint32_t handed = handed_to(c->db);
	struct turns *t = turns_pin(c->db);
	if (t) {
		if (r == 0)
			turns_settled(t, 0);
		else if (handed)
			turns_settled(t, handed);
		turns_unpin(c->db);
	}
	if (handed)
		t_turn.handed = 0;
	if (r < 0)
		return r == -EAGAIN ? turn_busy(c, false) : SQLITE_IOERR_LOCK;
	c->elock = SQLITE_LOCK_RESERVED;
	return SQLITE_OK;
}

static int x_lock(sqlite3_file *f, int level)
{
	aconn *c = (aconn *)f;
	int r, rc;
	if (c->elock >= level)
		return SQLITE_OK;
	if (c->inherited)
		return x_inherited(c, SQLITE_IOERR_LOCK);
	if (level == SQLITE_LOCK_SHARED)
		return lock_shared(c);
	if (!c->counted && !c->nolock && !wal_mode(c->db)) {
		rc = enter_write(c);
		if (rc != SQLITE_OK)
			return rc;
	}
	if (level == SQLITE_LOCK_RESERVED)
		return lock_reserved(c);
	/* EXCLUSIVE (from SHARED for a hot journal, else from RESERVED): first
	 * PENDING, kept on failure so that no new reader starves us.  Refused
	 * with PENDING held, the busy handler's sleep ends when a reader leaves
	 * (turns_sleep). */
	if (c->elock < SQLITE_LOCK_PENDING) {
		r = ofd(c->lockfd, F_WRLCK, PENDING_BYTE, 1);
		if (r < 0)
			return r == -EAGAIN ? turn_busy(c, false) : SQLITE_IOERR_LOCK;
		c->elock = SQLITE_LOCK_PENDING;
	}
	r = ofd(c->lockfd, F_WRLCK, SHARED_FIRST, SHARED_SIZE);
	if (r < 0)
		return r == -EAGAIN ? turn_busy(c, true) : SQLITE_IOERR_LOCK;
	c->elock = SQLITE_LOCK_EXCLUSIVE;
	return SQLITE_OK;
}

static int x_unlock(sqlite3_file *f, int level)
{
	aconn *c = (aconn *)f;
	if (c->elock <= level)
		return SQLITE_OK;
	if (c->inherited) {
		ready_drop(c);
		pend_clear(&c->pend);
		c->elock = level;
		return SQLITE_OK;
	}
	bool wrote = c->elock >= SQLITE_LOCK_RESERVED;
	/* A group not committed is not part of the database: the transaction
	 * was rolled back or failed.  Drop it; the file never saw it.  Also a
	 * synced one that phase two did not commit: SQLite failed the commit
	 * after its phase one (under the unix VFS the journal, still hot, rolls
	 * the file back), or synced a rollback's playback (the file's own
	 * pages); a playback cut short by an error leaves the group half old,
	 * half new, and committing it (as this once did) corrupted the
	 * database (SQLite's pagerfault-5.1). */
	ready_drop(c);
	pend_clear(&c->pend);
	if (level == SQLITE_LOCK_SHARED) {
		to_shared(c);
	} else {
		unlock_all(c);
	}
	leave_write(c);
	/* Turns (turns.h): the write lock to a sleeper, if any; a SHARED lock
	 * dropped to a writer waiting for readers to leave; and a hand-off to
	 * this thread that it did not use for a write ends with its lock. */
	uint32_t handed = level == SQLITE_LOCK_NONE ? handed_to(c->db) : 0;
	struct turns *t = turns_pin(c->db);
	if (t) {
		if (wrote && ++c->streak >= TURNS_STREAK && turns_released_write(t))
			c->streak = 0;
		if (level == SQLITE_LOCK_NONE)
			turns_released_shared(t);
		if (handed)
			turns_settled(t, handed);
		turns_unpin(c->db);
	}
	if (handed)
		t_turn.handed = 0;
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
	if (!sqlite3_stricmp(name, "atomio_stats")) {
		atomio *st = store_pin(c->db);
		struct atomio_stats s = {0};
		if (st) {
			atomio_stats(st, &s);
			store_unpin(c->db);
		}
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

/* WAL's shared memory: the unix VFS's (WAL above). */
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
static const sqlite3_io_methods aio_methods = {
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

/* --- databases ------------------------------------------------------------------ */

/* The database of this device and inode, if this process has it open.
 * g_mu held. */
static struct adb *db_by_id(dev_t dev, ino_t ino)
{
	struct adb *d = g_dbs;
	while (d && (d->dev != dev || d->ino != ino))
		d = d->next;
	return d;
}

static struct adb *get_db(int fd, const char *path, uint64_t log_size)
{
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return NULL;
	pthread_mutex_lock(&g_mu);
	struct adb *d = db_by_id(sb.st_dev, sb.st_ino);
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
			d->dfd = -1;
			char fdp[64];
			snprintf(fdp, sizeof(fdp), "/proc/self/fd/%d", fd);
			d->wfd = open(fdp, O_RDONLY | O_CLOEXEC);
			d->log_size = log_size;
			d->next = g_dbs;
			g_dbs = d;
		}
	}
	pthread_mutex_unlock(&g_mu);
	return d;
}

/* FORK.  A child after fork() has a copy of g_dbs, whose stores are the
 * parent's (atomio refuses them in a child: -EPERM, docs/API.md "Fork").
 * So the child handler detaches every database from the list: a
 * connection the child opens makes a new one, which joins the store with a
 * handle of the child's own when it reads or writes (settle, enter_write),
 * as any other process does.  The copies keep no store; a connection the
 * child inherited must not be used (SQLite's rule for every VFS), and
 * closing it frees its copy without touching the store (forked).  g_mu is
 * held across the fork so that the list is whole in the child. */
/*
 * The connections the child inherited hold the parent's locks: an OFD lock
 * belongs to the open file description, which the child shares, so one
 * unlock or lock of the child's (SQLite's close of the connection unlocks,
 * and in WAL mode first takes EXCLUSIVE, which the shared description
 * grants at once, then checkpoints and deletes the WAL) would act on the
 * parent's.  The unix VFS's POSIX locks are not inherited: its child holds
 * none, and its close leaves the parent's alone.  So the child closes its
 * copy of every connection's lock descriptor here (the description and its
 * locks stay the parent's, and die with the parent's last descriptor, not
 * with a child that outlives it), and an inherited connection never locks,
 * writes or commits: a lock is refused (SQLite's close then skips the WAL
 * checkpoint, as under the unix VFS where the parent's SHARED refuses it),
 * an unlock only forgets, a write or commit fails (x_inherited). */
static void fork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&g_mu); }
static void fork_child(void)
{
	for (struct adb *d = g_dbs; d; d = d->next) {
		__atomic_store_n(&d->st, NULL, __ATOMIC_RELAXED);
		__atomic_store_n(&d->turns, NULL, __ATOMIC_RELAXED);
		d->forked = true;
	}
	g_dbs = NULL;
	for (aconn *c = g_conns; c; c = c->cnext) {
		c->inherited = true;
		if (c->lockfd >= 0)
			close(c->lockfd);
		c->lockfd = -1;
	}
	g_conns = NULL;
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
	atomio *st = writer_store(d);
	if (st) {
		/* The last connection of this process: leave the store (the last
		 * process to leave checkpoints: the database synced, the log
		 * emptied). */
		int r = atomio_close(st);
		if (r < 0)
			log_atomio(SQLITE_IOERR, d, "closing", r, NULL);
	}
	pthread_mutex_unlock(&g_mu);
	if (d->wfd >= 0)
		close(d->wfd);
	free(d->db_path);
	free(d->log_path);
	free(d->mark_log);
	free(d);
}

/* --- journals -------------------------------------------------------------------- */

/* JOURNALS.  A rollback journal on disk adds nothing here: the database
 * file changes only by whole atomio groups (a crash leaves it as before the
 * transaction or, once the group is in the log, as after it), so SQLite's
 * journal serves only what it does inside the process: ROLLBACK, statement
 * and savepoint rollback, reading back pages it journaled.  So the main
 * journal SQLite creates for a database of this VFS ("DB-journal", in
 * DELETE, TRUNCATE or PERSIST mode, the default DELETE included) is a file
 * in memory, as journal_mode=MEMORY's, and never reaches the disk: no
 * journal writes, no journal syncs, no unlink.  Without a journal on disk
 * every commit waits for phase two and the groups of all databases of a
 * transaction commit as one (commit_ready, commit_set), as in MEMORY mode.
 *
 * A journal opened without SQLITE_OPEN_CREATE is one on disk: a hot journal
 * SQLite rolls back (left by a process of another VFS, or of this one
 * before it kept journals in memory); it stays the real file, and so does
 * its deletion.
 *
 * The super-journal of a transaction over several databases in a rollback
 * mode names their journals.  When every journal it names is one of these
 * memory journals, nothing on disk refers to it and it stays in memory too
 * (no sync, no unlink, nothing left behind by a crash); when one of them is
 * on disk (a database ATTACHed through another VFS), the super-journal is
 * written and synced to disk at its sync, as SQLite expects (mf_sync). */

#define MJ_CHUNK (64 * 1024)

struct mfile {
	sqlite3_file base;
	struct mfile *next;    /* g_journals: the open main journals */
	bool super;            /* a super-journal (else a main journal) */
	char *name;
	unsigned char **chunk; /* MJ_CHUNK bytes each, NULL: zeros */
	size_t nchunk;
	int64_t size;
	sqlite3_vfs *real;     /* a super-journal written to disk after all: */
	int flags;
	sqlite3_file *disk;    /* the file on disk */
};

/* Journals in memory, main and super (for a super-journal's check and
 * super_in_memory), and the names of super-journals kept in memory and
 * closed, which SQLite deletes next. */
static struct mfile *g_journals;
struct gone {
	struct gone *next;
	char name[];
};
static struct gone *g_supers;

/* Is name "DB-journal" of a database opened through this VFS?  g_mu held. */
static bool our_journal(const char *name)
{
	size_t n = strlen(name), k = strlen("-journal");
	if (n <= k || strcmp(name + n - k, "-journal"))
		return false;
	for (struct adb *d = g_dbs; d; d = d->next)
		if (strlen(d->db_path) == n - k && !memcmp(d->db_path, name, n - k))
			return true;
	return false;
}

static const sqlite3_io_methods mf_methods;
_Static_assert(sizeof(struct mfile) <= sizeof(aconn), "a journal fits the VFS's szOsFile");

static int mf_close(sqlite3_file *f)
{
	struct mfile *m = (struct mfile *)f;
	int rc = SQLITE_OK;
	pthread_mutex_lock(&g_mu);
	for (struct mfile **pp = &g_journals; *pp; pp = &(*pp)->next)
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	if (m->super && !m->disk) {
		/* SQLite deletes it by name next (v_delete). */
		struct gone *g = malloc(sizeof(*g) + strlen(m->name) + 1);
		if (g) {
			strcpy(g->name, m->name);
			g->next = g_supers;
			g_supers = g;
		}
	}
	pthread_mutex_unlock(&g_mu);
	if (m->disk) {
		rc = m->disk->pMethods->xClose(m->disk);
		free(m->disk);
	}
	for (size_t i = 0; i < m->nchunk; i++)
		free(m->chunk[i]);
	free(m->chunk);
	free(m->name);
	m->base.pMethods = NULL;
	return rc;
}

static int mf_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off)
{
	struct mfile *m = (struct mfile *)f;
	if (m->disk)
		return m->disk->pMethods->xRead(m->disk, buf, amt, off);
	memset(buf, 0, (size_t)amt);
	int64_t end = off + amt < m->size ? off + amt : m->size;
	for (int64_t p = off; p < end;) {
		size_t i = (size_t)(p / MJ_CHUNK), o = (size_t)(p % MJ_CHUNK);
		size_t n = MJ_CHUNK - o < (size_t)(end - p) ? MJ_CHUNK - o : (size_t)(end - p);
		if (m->chunk[i])
			memcpy((char *)buf + (p - off), m->chunk[i] + o, n);
		p += (int64_t)n;
	}
	return off + amt > m->size ? SQLITE_IOERR_SHORT_READ : SQLITE_OK;
}

static int mf_write(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 off)
{
	struct mfile *m = (struct mfile *)f;
	if (m->disk)
		return m->disk->pMethods->xWrite(m->disk, buf, amt, off);
	int64_t end = off + amt;
	size_t need = (size_t)((end + MJ_CHUNK - 1) / MJ_CHUNK);
	if (need > m->nchunk) {
		size_t n = m->nchunk ? m->nchunk : 4;
		while (n < need)
			n *= 2;
		unsigned char **c = realloc(m->chunk, n * sizeof(*c));
		if (!c)
			return SQLITE_IOERR_NOMEM;
		memset(c + m->nchunk, 0, (n - m->nchunk) * sizeof(*c));
		m->chunk = c;
		m->nchunk = n;
	}
	for (int64_t p = off; p < end;) {
		size_t i = (size_t)(p / MJ_CHUNK), o = (size_t)(p % MJ_CHUNK);
		size_t n = MJ_CHUNK - o < (size_t)(end - p) ? MJ_CHUNK - o : (size_t)(end - p);
		if (!m->chunk[i] && !(m->chunk[i] = calloc(1, MJ_CHUNK)))
			return SQLITE_IOERR_NOMEM;
		memcpy(m->chunk[i] + o, (const char *)buf + (p - off), n);
		p += (int64_t)n;
	}
	if (end > m->size)
		m->size = end;
	return SQLITE_OK;
}

static int mf_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	struct mfile *m = (struct mfile *)f;
	if (m->disk)
		return m->disk->pMethods->xTruncate(m->disk, size);
	if (size < m->size) {
		/* Whole chunks past the end go; the rest of the last one is
		 * zeroed, so that the file reads zeros there if it grows again. */
		size_t keep = (size_t)((size + MJ_CHUNK - 1) / MJ_CHUNK);
		for (size_t i = keep; i < m->nchunk; i++) {
			free(m->chunk[i]);
			m->chunk[i] = NULL;
		}
		if (size % MJ_CHUNK && m->chunk[keep - 1])
			memset(m->chunk[keep - 1] + size % MJ_CHUNK, 0, MJ_CHUNK - (size_t)(size % MJ_CHUNK));
	}
	m->size = size;
	return SQLITE_OK;
}

/* Put a journal kept in memory on disk after all: its file is created
 * (or a leftover one reused) at its name and given the bytes so far; from
 * then on every call goes to that file.  Not synced: SQLite syncs it. */
static int mf_to_disk(struct mfile *m)
{
	sqlite3_file *d = calloc(1, (size_t)m->real->szOsFile);
	int rc = d ? m->real->xOpen(m->real, m->name, d, m->flags, NULL) : SQLITE_IOERR_NOMEM;
	if (rc != SQLITE_OK) {
		if (d && d->pMethods)
			d->pMethods->xClose(d);
		free(d);
		return rc;
	}
	rc = d->pMethods->xTruncate(d, m->size);
	for (size_t i = 0; rc == SQLITE_OK && i < m->nchunk && (int64_t)i * MJ_CHUNK < m->size; i++) {
		int64_t n = m->size - (int64_t)i * MJ_CHUNK;
		if (m->chunk[i])
			rc = d->pMethods->xWrite(d, m->chunk[i], n < MJ_CHUNK ? (int)n : MJ_CHUNK,
						 (int64_t)i * MJ_CHUNK);
	}
	if (rc != SQLITE_OK) {
		d->pMethods->xClose(d);
		free(d);
		return rc;
	}
	for (size_t i = 0; i < m->nchunk; i++)
		free(m->chunk[i]);
	free(m->chunk);
	m->chunk = NULL;
	m->nchunk = 0;
	m->disk = d;
	return SQLITE_OK;
}

/* The main journal of that name kept in memory, the newest (mf_sync).
 * g_mu held. */
static struct mfile *newest_journal(const char *name)
{
	struct mfile *j = g_journals;
	while (j && (j->super || strcmp(j->name, name)))
		j = j->next;
	return j;
}

/* Is the super-journal of that name one of ours, in memory? */
static bool super_in_memory(const char *name)
{
	pthread_mutex_lock(&g_mu);
	struct mfile *j = g_journals;
	while (j && !(j->super && !j->disk && !strcmp(j->name, name)))
		j = j->next;
	pthread_mutex_unlock(&g_mu);
	return j != NULL;
}

/* d's main journal in memory, if it has one, written to disk and synced:
 * it names a super-journal on disk (SQLite wrote that name into it before
 * the database's phase-one sync), so that a crash before the super-journal
 * is deleted finds it hot and rolls d back with the others.  The journal
 * belongs to this connection's transaction: nobody else uses it meanwhile. */
static int journal_to_disk(struct adb *d)
{
	char *name = suffixed(d->db_path, "-journal");
	if (!name)
		return SQLITE_IOERR_NOMEM;
	pthread_mutex_lock(&g_mu);
	struct mfile *j = newest_journal(name);
	pthread_mutex_unlock(&g_mu);
	free(name);
	if (!j || j->disk)
		return SQLITE_OK; /* MEMORY or OFF mode (SQLite's own), or on disk already */
	int rc = mf_to_disk(j);
	if (rc == SQLITE_OK)
		rc = j->disk->pMethods->xSync(j->disk, SQLITE_SYNC_FULL);
	return rc;
}

/* The super-journal is synced once it names every journal of the
 * transaction, before any of them is committed.  Where each one is a
 * journal of ours in memory it stays in memory (the transaction commits
 * at its deletion: commit_at_super_delete).  Where one is on disk (a
 * database through another VFS), that journal names it and SQLite reads it
 * when it finds that journal hot after a crash: the super-journal goes to
 * disk, and so do the journals of ours it names, each at its database's
 * phase-one sync, before its group commits there (journal_to_disk), so
 * that the transaction commits as SQLite's rollback mode does, all of it
 * rolled back after a crash before the super-journal is deleted. */
static int mf_sync(sqlite3_file *f, int flags)
{
	struct mfile *m = (struct mfile *)f;
	if (m->disk)
		return m->disk->pMethods->xSync(m->disk, flags);
	if (!m->super)
		return SQLITE_OK;
	char *all = malloc((size_t)m->size + 1);
	if (!all)
		return SQLITE_IOERR_NOMEM;
	mf_read(f, all, (int)m->size, 0);
	all[m->size] = 0;
	bool mem = true;
	for (char *p = all; p < all + m->size; p += strlen(p) + 1) {
		/* The newest journal of that name: the transaction's own.  An
		 * older one is another connection's, finished (PERSIST and
		 * TRUNCATE keep it open until their connection unlocks) and
		 * opened before this one's: a connection opens a journal under
		 * RESERVED, which one connection holds at a time. */
		pthread_mutex_lock(&g_mu);
		struct mfile *j = newest_journal(p);
		pthread_mutex_unlock(&g_mu);
		if (!j || j->disk)
			mem = false;
	}
	int rc = SQLITE_OK;
	if (!mem) {
		rc = mf_to_disk(m);
		if (rc == SQLITE_OK)
			rc = m->disk->pMethods->xSync(m->disk, flags);
	}
	free(all);
	return rc;
}

static int mf_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
	struct mfile *m = (struct mfile *)f;
	if (m->disk)
		return m->disk->pMethods->xFileSize(m->disk, size);
	*size = m->size;
	return SQLITE_OK;
}

static int mf_lock(sqlite3_file *f, int level) { return SQLITE_OK; }
static int mf_check_reserved(sqlite3_file *f, int *out)
{
	*out = 0;
	return SQLITE_OK;
}
static int mf_file_control(sqlite3_file *f, int op, void *arg) { return SQLITE_NOTFOUND; }
static int mf_sector_size(sqlite3_file *f) { return 512; }
static int mf_device_characteristics(sqlite3_file *f) { return 0; }

static const sqlite3_io_methods mf_methods = {
	.iVersion = 1,
	.xClose = mf_close,
	.xRead = mf_read,
	.xWrite = mf_write,
	.xTruncate = mf_truncate,
	.xSync = mf_sync,
	.xFileSize = mf_file_size,
	.xLock = mf_lock,
	.xUnlock = mf_lock,
	.xCheckReservedLock = mf_check_reserved,
	.xFileControl = mf_file_control,
	.xSectorSize = mf_sector_size,
	.xDeviceCharacteristics = mf_device_characteristics,
};

/* Open a journal in memory where JOURNALS above says so: SQLITE_NOTFOUND
 * where not (the real VFS opens it). */
static int mf_open(sqlite3_vfs *real, const char *name, sqlite3_file *f, int flags, int *out)
{
	bool super = flags & SQLITE_OPEN_SUPER_JOURNAL;
	if (!name || !(flags & SQLITE_OPEN_CREATE) || !(flags & (SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_SUPER_JOURNAL)))
		return SQLITE_NOTFOUND;
	struct mfile *m = (struct mfile *)f;
	memset(m, 0, sizeof(*m));
	if (!(m->name = strdup(name)))
		return SQLITE_NOMEM;
	m->super = super;
	m->real = real;
	m->flags = flags;
	pthread_mutex_lock(&g_mu);
	bool ours = super || our_journal(name);
	if (ours) {
		m->next = g_journals; /* newest first (mf_sync) */
		g_journals = m;
	}
	pthread_mutex_unlock(&g_mu);
	if (!ours) {
		free(m->name);
		return SQLITE_NOTFOUND;
	}
	m->base.pMethods = &mf_methods;
	if (out)
		*out = flags;
	return SQLITE_OK;
}

/* Deleting a journal kept in memory: a super-journal's name is forgotten
 * (nothing on disk); a main journal's unlink still runs, for a leftover
 * file of earlier use (PERSIST, another VFS), and its absence is success.
 * SQLITE_NOTFOUND: not one of ours. */
static int mf_delete(sqlite3_vfs *real, const char *name, int sync)
{
	pthread_mutex_lock(&g_mu);
	for (struct gone **pp = &g_supers; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->name, name)) {
			struct gone *g = *pp;
			*pp = g->next;
			pthread_mutex_unlock(&g_mu);
			free(g);
			return commit_at_super_delete();
		}
	bool ours = our_journal(name);
	pthread_mutex_unlock(&g_mu);
	if (!ours)
		return SQLITE_NOTFOUND;
	int rc = real->xDelete(real, name, sync);
	return rc == SQLITE_IOERR_DELETE_NOENT ? SQLITE_OK : rc;
}

/* The database of name "DB" + suffix opened through this VFS, with a
 * reference taken; NULL if none. */
static struct adb *db_named(const char *name, const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);
	if (n <= k || strcmp(name + n - k, suffix))
		return NULL;
	pthread_mutex_lock(&g_mu);
	struct adb *d;
	for (d = g_dbs; d; d = d->next)
		if (strlen(d->db_path) == n - k && !memcmp(d->db_path, name, n - k)) {
			d->refs++;
			break;
		}
	pthread_mutex_unlock(&g_mu);
	return d;
}

_Static_assert(sizeof(wfile) <= sizeof(aconn), "a WAL file fits the VFS's szOsFile");

/* The WAL file of a database of ours (WAL above), created with the
 * database's permissions and owner as the unix VFS does.  SQLITE_NOTFOUND:
 * not one. */
static int w_open(sqlite3_vfs *real, const char *name, sqlite3_file *f, int flags, int *out)
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
static int w_delete(const char *name, int sync)
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

/* --- vfs methods ------------------------------------------------------------------ */

static sqlite3_vfs *real_vfs(sqlite3_vfs *v) { return ((struct avfs *)v)->real; }

static int v_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out)
{
	sqlite3_vfs *rv = real_vfs(vfs);
	if (!(flags & SQLITE_OPEN_MAIN_DB) || !name) {
		int rc = mf_open(rv, name, f, flags, out);
		if (rc == SQLITE_NOTFOUND)
			rc = w_open(rv, name, f, flags, out);
		return rc != SQLITE_NOTFOUND ? rc : rv->xOpen(rv, name, f, flags, out);
	}
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
	pthread_mutex_lock(&g_mu);
	c->cnext = g_conns;
	g_conns = c;
	pthread_mutex_unlock(&g_mu);
	/* Recover now if no writer holds the store, so that a damaged log is
	 * reported at open.  Without waiting: if someone holds a lock, the
	 * first SHARED lock checks again. */
	if (!writer_store(c->db) && ofd(c->lockfd, F_WRLCK, PROBE_BYTE, 1) == 0) {
		if (grab_exclusive(c) == SQLITE_OK) {
			c->elock = SQLITE_LOCK_EXCLUSIVE;
			int p = probe(c->db);
			rc = p < 0 ? SQLITE_IOERR : p == PROBE_DIRTY ? recover_release(c->db) : SQLITE_OK;
			unlock_all(c);
		}
		ofd(c->lockfd, F_UNLCK, PROBE_BYTE, 1);
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
	int rc = mf_delete(real_vfs(v), name, sync);
	if (rc == SQLITE_NOTFOUND)
		rc = w_delete(name, sync);
	return rc != SQLITE_NOTFOUND ? rc : real_vfs(v)->xDelete(real_vfs(v), name, sync);
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
/* The busy handler's sleep.  After a refusal of a lock of a database with
 * turns (turns.h), it ends early when the lock may be free: when this
 * connection is handed the write lock, or, refused EXCLUSIVE, when a reader
 * leaves.  Any other sleep, or one longer than TURNS_SLEEP_MAX_US (an
 * application's own handler), is the real VFS's. */
#define TURNS_SLEEP_MAX_US 200000

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Do readers still hold SHARED beside c, refused EXCLUSIVE?  c is looked
 * up among the open connections (it may have been closed since), and
 * asked under g_mu, so that its descriptor stays open meanwhile; another
 * connection at its address answers for itself, which costs at most a
 * sleep cut short or slept whole. */
static bool readers_left(aconn *c)
{
	bool left = true;
	pthread_mutex_lock(&g_mu);
	aconn *x = g_conns;
	while (x && x != c)
		x = x->cnext;
	if (x && x->lockfd >= 0) {
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = SHARED_FIRST,
				   .l_len = SHARED_SIZE};
		left = fcntl(x->lockfd, F_OFD_GETLK, &fl) < 0 || fl.l_type != F_UNLCK;
	}
	pthread_mutex_unlock(&g_mu);
	return left;
}

/* SQLite's busy handler counts each sleep as the whole delay it asked for
 * (sqliteDefaultBusyCallback adds up its table of delays, not the time
 * slept), so a sleep that ends early spends the busy timeout for nothing:
 * a writer refused EXCLUSIVE, woken at every SHARED lock dropped while
 * other readers stay, was refused for good long before its timeout.  So
 * that sleep ends early only once no reader is left (or it is handed the
 * lock), else sleeps on to the end of its delay; and the time actually
 * slept is returned (sqlite3_sleep's answer). */
static int v_sleep(sqlite3_vfs *v, int us)
{
	bool busy = t_turn.busy;
	aconn *conn = t_turn.conn;
	t_turn.busy = false;
	t_turn.conn = NULL;
	if (!busy || us <= 0 || us > TURNS_SLEEP_MAX_US)
		return real_vfs(v)->xSleep(real_vfs(v), us);
	pthread_mutex_lock(&g_mu);
	struct adb *d = db_by_id(t_turn.dev, t_turn.ino);
	if (d)
		d->refs++; /* release_db below; the connection that was refused has one too */
	pthread_mutex_unlock(&g_mu);
	struct turns *t = d ? turns_pin(d) : NULL;
	if (!t) {
		if (d)
			release_db(d);
		return real_vfs(v)->xSleep(real_vfs(v), us);
	}
	uint64_t start = mono_ns(), ns = (uint64_t)us * 1000u, el = 0;
	uint32_t tok;
	for (;;) {
		tok = turns_sleep(t, t_turn.excl, ns - el);
		el = mono_ns() - start;
		if (tok || !t_turn.excl || el >= ns || !conn || !readers_left(conn))
			break;
	}
	turns_unpin(d);
	if (tok) {
		t_turn.handed = tok;
		t_turn.hdev = d->dev;
		t_turn.hino = d->ino;
	}
	release_db(d);
	return el < ns ? (int)(el / 1000u) : us;
}
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
