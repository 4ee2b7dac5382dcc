/*
 * vfs.c: the atomio SQLite VFS (include/atomio_sqlite.h): its vfs methods
 * (v_*: open, delete and the rest passed to the unix VFS) and its
 * registration (atomio_sqlite_register).  The design, the files and the
 * threads and locks: internals.h.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomio.h"
#include "atomio_sqlite.h"
#include "sysio.h"
#include "internals.h"

static struct avfs *g_vfs;

/* --- vfs methods ------------------------------------------------------------------ */

/* SQLite's compiled default synchronous level (SQLITE_DEFAULT_SYNCHRONOUS:
 * 2, FULL, in Debian's build and SQLite's own; 0..3). */
static int default_sync_level(void)
{
	static const char *const opt[] = {"DEFAULT_SYNCHRONOUS=0", "DEFAULT_SYNCHRONOUS=1", "DEFAULT_SYNCHRONOUS=3"};
	static const int level[] = {0, 1, 3};
	for (int i = 0; i < 3; i++)
		if (sqlite3_compileoption_used(opt[i]))
			return level[i];
	return 2;
}

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
	/* The level SQLite starts the connection at (its compiled default:
	 * FULL in Debian's build), or the URI's atomio_synchronous (the VFS's
	 * only; SQLite keeps its own), until a PRAGMA synchronous (pragma). */
	c->sync_level = sync_level_of(sqlite3_uri_parameter(name, "atomio_synchronous"), default_sync_level());
	sqlite3_int64 lazy_ms = sqlite3_uri_int64(name, "atomio_lazy_ms", 0);
	c->db = c->lockfd >= 0 ? get_db(c->lockfd, name, log_size > 0 ? (uint64_t)log_size : 0,
					lazy_ms > 0 ? (uint64_t)lazy_ms * 1000 : 0)
			       : NULL;
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
