/*
 * store.c: THE STORE (internals.h) of a database, as this process holds
 * it: its publication (d->st, d->turns) and the pins that keep it open while
 * in use (turns_pin, store_pin, store_unpublish); the probe of the log at an
 * open; whether the file says WAL (header_wal) and the log's removal beside a
 * WAL database (remove_log); stale and replaced logs (log_stale,
 * check_log_age, remove_replaced_log); group markers' recovery
 * (recover_group) and a log's recovery under the exclusive lock
 * (recover_release); joining the store (open_store), growing its log
 * (grow_store) and reopening it after a failed commit (repair_store).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomio.h"
#include "sysio.h"
#include "internals.h"

/* TURNS (turns.h): the database's turns words, in its store's shared area,
 * held while in use.  The pin is a counter, not g_mu, since a sleeper holds
 * it for its whole sleep; a store is unpublished (store_unpublish) only
 * once no thread holds it, so the words stay mapped.  NULL: no store (WAL
 * mode, or this process has not joined it yet): no turns. */
struct turns *turns_pin(struct adb *d)
{
	__atomic_add_fetch(&d->npin, 1, __ATOMIC_SEQ_CST);
	struct turns *t = __atomic_load_n(&d->turns, __ATOMIC_SEQ_CST);
	if (!t)
		__atomic_sub_fetch(&d->npin, 1, __ATOMIC_SEQ_CST);
	return t;
}
void turns_unpin(struct adb *d) { __atomic_sub_fetch(&d->npin, 1, __ATOMIC_SEQ_CST); }

/* d's store, held as turns_pin holds its words, for a use outside g_mu
 * (settle, atomio_stats): another thread may unpublish and close it
 * meanwhile (wal_drop_store at a WAL file's open, settle's drop of a store
 * whose log went), and waits for the pin.  NULL: no store.  store_unpin. */
atomio *store_pin(struct adb *d)
{
	__atomic_add_fetch(&d->npin, 1, __ATOMIC_SEQ_CST);
	atomio *st = __atomic_load_n(&d->st, __ATOMIC_SEQ_CST);
	if (!st)
		__atomic_sub_fetch(&d->npin, 1, __ATOMIC_SEQ_CST);
	return st;
}
void store_unpin(struct adb *d) { __atomic_sub_fetch(&d->npin, 1, __ATOMIC_SEQ_CST); }

/* d's store stops being this process's (g_mu held; the caller closes it).
 * A thread may still be using its turns words: wait (a sleep in v_sleep is
 * bounded, TURNS_SLEEP_MAX_US). */
void store_unpublish(struct adb *d)
{
	__atomic_store_n(&d->st, NULL, __ATOMIC_SEQ_CST);
	__atomic_store_n(&d->turns, NULL, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&d->npin, __ATOMIC_SEQ_CST)) {
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
}

/* --- the store ------------------------------------------------------------- */

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

/* Does the database file say WAL: the file format's write and read
 * versions (header bytes 18 and 19) both 2? */
static bool header_wal(struct adb *d)
{
	unsigned char v[2];
	const struct atomio_sysops *s = os();
	ssize_t n = s ? s->pread(d->wfd, v, 2, 18) : pread(d->wfd, v, 2, 18);
	return n == 2 && v[0] == 2 && v[1] == 2;
}

/* Remove the log of a database whose store nobody holds and whose log
 * holds nothing to replay (closed by us just now, or recovered), with the
 * store's shared-state file: atomio_log_remove, which takes the log's flock
 * as check_log_age does (-EBUSY while a process holds it: a reader's probe
 * holds it shared for a moment) and makes the removal durable.  A killed
 * writer's store leaves its state file in /dev/shm, and the log removed
 * here was the only thing that named it.  atomio_log_remove waits up to
 * 250 ms for the flock itself; retried once more, as this waited about
 * 200 ms with its own flock before. */
void remove_log(struct adb *d)
{
	d->snap_ok = false;
	int r = -EBUSY;
	for (int i = 0; i < 2 && r == -EBUSY; i++)
		r = atomio_log_remove(d->log_path);
	if (r == 0 || r == -ENOENT)
		return;
	sqlite3_log(SQLITE_NOTICE, "atomio: could not remove %s beside a WAL database: %s", d->log_path,
		    atomio_strerror(r));
}

/* Does a process have the store open (it recovered the log when it
 * opened it, the first of them)?  If not, has any store been opened since
 * our last recovery?  Returns an enum probe or < 0.  Every process of a
 * store holds the log's flock shared: taken exclusive here, for a moment
 * (a process joining meanwhile gets SQLITE_BUSY and retries). */
int probe(struct adb *d)
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
bool log_stale(struct adb *d, bool replaced)
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

char *suffixed(const char *path, const char *suffix)
{
	size_t n = strlen(path), m = strlen(suffix);
	char *r = malloc(n + m + 1);
	if (r) {
		memcpy(r, path, n);
		memcpy(r + n, suffix, m + 1);
	}
	return r;
}

bool has_group_marker(struct adb *d)
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
int replay_log(const char *log_path, char *err, size_t errlen)
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
int recover_release(struct adb *d)
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
int open_store(struct adb *d)
{
	/* The store keeps writing the cause of its later failures into this
	 * buffer, for as long as it is open: it is the database's, not this
	 * frame's (one on the stack here was written over whatever frame was
	 * there later). */
	char *err = d->store_err;
	err[0] = 0;
	struct atomio_options o = {.log_size = d->log_size ? d->log_size : initial_log_size(d),
				   .flags = ATOMIO_CREATE | ATOMIO_ACCEPT_COPIES, .errbuf = err,
				   .errbuf_size = sizeof(d->store_err), .lazy_delay_us = d->lazy_us};
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
	if (r == -EINVAL && o.lazy_delay_us) {
		/* The store's lazy delay is store-wide, set by its first opener:
		 * another process asked for another one.  Join with that. */
		sqlite3_log(SQLITE_WARNING, "atomio: %s: atomio_lazy_ms= ignored (the store's first opener "
			    "chose the delay)", d->db_path);
		o.lazy_delay_us = 0;
		err[0] = 0;
		r = atomio_open(d->log_path, &o, &st);
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
bool grow_store(struct adb *d, uint64_t need)
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
void repair_store(struct adb *d)
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
