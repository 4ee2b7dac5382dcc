/*
 * lock.c: LOCKS (internals.h): SQLite's lock levels as OFD locks on the
 * connection's own descriptor (x_lock, x_unlock, x_check_reserved), the
 * reader's wait for the store to settle before it reads (settle, with the
 * recovery of group markers and stale logs, recover_marked), a write
 * transaction's entry into the store (enter_write, leave_write), and the
 * writers' turns (turns.h): a refusal remembered per thread (t_turn), the
 * hand-off at the unlock, and the busy handler's sleep (v_sleep).  A
 * connection a forked child inherited locks nothing (x_inherited).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/file.h>
#include <time.h>

#include "atomio.h"
#include "sysio.h"
#include "internals.h"

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

void unlock_all(aconn *c)
{
	ofd(c->lockfd, F_UNLCK, PENDING_BYTE, LOCK_SPAN);
	c->elock = SQLITE_LOCK_NONE;
}

/* From NONE or SHARED to an exclusive hold (PENDING + the whole SHARED range),
 * without waiting.  On failure the lock is as before. */
int grab_exclusive(aconn *c)
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
		return SQLITE_OK; /* WAL: no store (wal.c) */
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
int enter_write(aconn *c)
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
void leave_write(aconn *c)
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

int x_lock(sqlite3_file *f, int level)
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

int x_unlock(sqlite3_file *f, int level)
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

int x_check_reserved(sqlite3_file *f, int *out)
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
int v_sleep(sqlite3_vfs *v, int us)
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

/* A connection a forked child inherited (fork_child) is refused every lock,
 * write and commit: they would act on the parent's locks or store.  Its
 * pending group, a copy of the parent's, is dropped. */
int x_inherited(aconn *c, int rc)
{
	ready_drop(c);
	pend_clear(&c->pend);
	sqlite3_log(rc, "atomio: %s: a connection inherited across fork() is not usable in the child "
		    "(open a new one there)", c->db->db_path);
	return rc;
}
