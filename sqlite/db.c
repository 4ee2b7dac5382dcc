/*
 * db.c: the databases this process has open (struct adb, one per device
 * and inode, shared by its connections: g_dbs), the open connections
 * (g_conns), the mutex over them (g_mu), the fork handlers that detach
 * them in a child (FORK below), a database's release at its last close,
 * and the messages about its log (log_atomio).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomio.h"
#include "sysio.h"
#include "internals.h"

/* Guards the lists and every change of a database's store or snapshot. */
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
struct adb *g_dbs;

/* This process's open main-database connections (fork_child). */
struct aconn *g_conns;

/* --- databases ------------------------------------------------------------------ */

/* The database of this device and inode, if this process has it open.
 * g_mu held. */
struct adb *db_by_id(dev_t dev, ino_t ino)
{
	struct adb *d = g_dbs;
	while (d && (d->dev != dev || d->ino != ino))
		d = d->next;
	return d;
}

struct adb *get_db(int fd, const char *path, uint64_t log_size, uint64_t lazy_us)
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
			d->lazy_us = lazy_us; /* the first connection's, as atomio_log_size= */
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
pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
void fork_register(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

void release_db(struct adb *d)
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
	bc_drop(d);
	free(d);
}

/* The database of name "DB" + suffix opened through this VFS, with a
 * reference taken; NULL if none. */
struct adb *db_named(const char *name, const char *suffix)
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

void log_atomio(int rc, struct adb *d, const char *what, int err, const char *detail)
{
	sqlite3_log(rc, "atomio: %s %s: %s%s%s", what, d->log_path, atomio_strerror(err),
		    detail && *detail ? ": " : "", detail ? detail : "");
}
