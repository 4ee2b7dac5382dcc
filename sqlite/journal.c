/*
 * journal.c: JOURNALS (see below): the rollback journals and super-journals
 * the VFS keeps in memory (struct mfile, mf_*), and those it writes to
 * disk after all (a super-journal naming a journal of another VFS).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "atomio.h"
#include "sysio.h"
#include "internals.h"

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
bool super_in_memory(const char *name)
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
int journal_to_disk(struct adb *d)
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
int mf_open(sqlite3_vfs *real, const char *name, sqlite3_file *f, int flags, int *out)
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
int mf_delete(sqlite3_vfs *real, const char *name, int sync)
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
