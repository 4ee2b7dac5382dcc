/*
 * t_sqlite_journal: rollback journals under the atomio VFS, which keeps the
 * ones SQLite creates in memory (vfs.c, "journals"), so that a database
 * opened with no pragma commits each transaction as one group.
 *  1. No pragma (SQLite's DELETE), TRUNCATE and PERSIST: the mode SQLite
 *     reports is the one asked for; each commit is one group (one commit,
 *     one log sync in atomio_stats); no -journal file ever exists on disk,
 *     also in the middle of a transaction that spilled pages; the database
 *     file is untouched until COMMIT.
 *  2. In each of those modes, SQLite's own uses of its journal: ROLLBACK
 *     after a spill, ROLLBACK TO a savepoint (pages journaled before and
 *     after it, spilled), a statement that fails half-way (its rows undone,
 *     the transaction's earlier statements kept).
 *  3. A hot journal on disk left by a process of the unix VFS that died in
 *     the middle of a transaction (spilled pages already in the database
 *     file): opened through atomio, SQLite rolls it back, the database reads
 *     as before that transaction, the journal is gone, and writes go on.
 *  4. A commit that fails after its phase one (every write failing from the
 *     database's sync on, through a VFS stacked on atomio, as SQLite's own
 *     fault simulation does with a full disk: in PERSIST mode, where the
 *     journal's header is zeroed after it): the group synced for it is
 *     dropped, and the database reads as
 *     before the transaction, intact (it was once committed, with the
 *     truncation of SQLite's playback, cut short: corrupt).
 */
#include <fcntl.h>
#include <stdbool.h>
#include <strings.h>

#include "sq_t.h"

#define NROWS 3000

static bool on_disk(const char *path, const char *suffix)
{
	char p[4400];
	snprintf(p, sizeof(p), "%s%s", path, suffix);
	return access(p, F_OK) == 0;
}

static sqlite3 *open_mode(const char *path, const char *mode)
{
	sqlite3 *db = sq_open_vfs(path, "atomio", 0);
	sqlite3_busy_timeout(db, 10000);
	char sql[128], got[32];
	if (mode) {
		snprintf(sql, sizeof(sql), "PRAGMA journal_mode=%s", mode);
		sq_text(db, sql, got, sizeof(got));
	}
	sq_ok(db, "PRAGMA synchronous=FULL; PRAGMA cache_size=10");
	sq_text(db, "PRAGMA journal_mode", got, sizeof(got));
	const char *want = mode ? mode : "delete";
	if (strcasecmp(got, want)) {
		fprintf(stderr, "journal_mode %s reported as %s\n", want, got);
		exit(1);
	}
	return db;
}

static void create(const char *path)
{
	sqlite3 *db = open_mode(path, NULL);
	sq_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER NOT NULL CHECK (v < 1000000), b BLOB);"
		  "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<3000) "
		  "INSERT INTO t SELECT i, i, randomblob(600) FROM c");
	sqlite3_close(db);
}

static long long sum(sqlite3 *db) { return sq_int(db, "SELECT sum(v) FROM t"); }

/* 1 and 2 in one journal mode (NULL: no pragma). */
static void modes(const char *path, const char *mode)
{
	sqlite3 *db = open_mode(path, mode);
	long long s0 = sum(db);

	/* one group per commit */
	sq_ok(db, "UPDATE t SET v = v + 1 WHERE id = 1");
	long long c0 = sq_stat(db, "commits"), l0 = sq_stat(db, "log_syncs");
	for (int i = 0; i < 10; i++)
		sq_ok(db, "BEGIN; UPDATE t SET v = v + 1 WHERE id = 2; UPDATE t SET v = v - 1 WHERE id = 3;"
			  "UPDATE t SET v = v + 1 WHERE id = 2999; COMMIT");
	CHECK_EQ(sq_stat(db, "commits") - c0, 10);
	CHECK_EQ(sq_stat(db, "log_syncs") - l0, 10);
	CHECK_EQ(sum(db), s0 + 1 + 10);
	s0 = sum(db);

	/* a spilled transaction: no journal on disk, the file untouched */
	size_t len0;
	uint64_t h0 = sq_file_hash(path, &len0);
	sq_ok(db, "BEGIN; UPDATE t SET v = v + 5, b = randomblob(620)");
	int spill = 0, hi = 0;
	SQ_CHECK(db, sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_SPILL, &spill, &hi, 0));
	CHECK(spill > 50);
	CHECK(!on_disk(path, "-journal"));
	CHECK(sq_file_hash(path, NULL) == h0);
	CHECK_EQ(sum(db), s0 + 5 * NROWS);
	/* ROLLBACK after the spill */
	sq_ok(db, "ROLLBACK");
	CHECK(sq_file_hash(path, NULL) == h0);
	CHECK_EQ(sum(db), s0);

	/* savepoints: pages journaled before and after, spilled */
	sq_ok(db, "BEGIN; UPDATE t SET v = v + 1 WHERE id <= 1000; SAVEPOINT s1;"
		  "UPDATE t SET v = v + 100, b = randomblob(610); INSERT INTO t VALUES(5001, 0, randomblob(9000))");
	CHECK(!on_disk(path, "-journal"));
	CHECK_EQ(sum(db), s0 + 1000 + 100 * NROWS);
	sq_ok(db, "ROLLBACK TO s1");
	CHECK_EQ(sum(db), s0 + 1000);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), NROWS);
	sq_ok(db, "SAVEPOINT s2; UPDATE t SET v = v + 7 WHERE id > 2000; RELEASE s2;"
		  "SAVEPOINT s3; DELETE FROM t WHERE id > 10; ROLLBACK TO s3; COMMIT");
	CHECK(sq_file_hash(path, NULL) != h0);
	CHECK_EQ(sum(db), s0 + 1000 + 7 * 1000);
	s0 = sum(db);

	/* a statement that fails half-way (the CHECK on v, at row 2500) */
	long long v2500 = sq_int(db, "SELECT v FROM t WHERE id = 2500");
	sq_ok(db, "BEGIN; UPDATE t SET v = v + 3 WHERE id <= 100; UPDATE t SET v = 999999 WHERE id = 2500");
	long long before = sum(db);
	CHECK_EQ(sq_exec(db, "UPDATE t SET v = v + 1, b = randomblob(630)"), SQLITE_CONSTRAINT);
	CHECK_EQ(sum(db), before);
	char sql[128];
	snprintf(sql, sizeof(sql), "UPDATE t SET v = %lld WHERE id = 2500", v2500);
	sq_ok(db, sql);
	sq_ok(db, "COMMIT");
	sq_integrity(db);
	long long s1 = sum(db);
	CHECK(!on_disk(path, "-journal"));
	sqlite3_close(db);

	CHECK_EQ(s1, s0 + 300);
	db = open_mode(path, mode);
	CHECK_EQ(sum(db), s1);
	sq_integrity(db);
	sqlite3_close(db);
	CHECK(!on_disk(path, "-journal"));
	printf("journal_mode %s: one group per commit, no journal on disk, rollback, savepoints and a "
	       "failed statement as SQLite's own\n", mode ? mode : "(none: delete)");
}

/* 3: a unix-VFS writer dies with its journal hot and spilled pages in the
 * file. */
static void hot_journal(const char *path)
{
	sqlite3 *db = open_mode(path, NULL);
	long long s0 = sum(db);
	sqlite3_close(db);
	uint64_t h0 = sq_file_hash(path, NULL);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		sqlite3 *u = sq_open_vfs(path, NULL, 0); /* the unix VFS */
		sq_ok(u, "PRAGMA journal_mode=DELETE; PRAGMA cache_size=10");
		sq_ok(u, "BEGIN; UPDATE t SET v = v + 1000, b = randomblob(640)");
		_exit(0); /* dies in the transaction */
	}
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(on_disk(path, "-journal"));
	CHECK(sq_file_hash(path, NULL) != h0); /* spilled pages in the file */
	db = open_mode(path, NULL);
	CHECK_EQ(sum(db), s0);
	sq_integrity(db);
	CHECK(!on_disk(path, "-journal"));
	sq_ok(db, "UPDATE t SET v = v + 1 WHERE id = 1");
	sqlite3_close(db);
	db = open_mode(path, NULL);
	CHECK_EQ(sum(db), s0 + 1);
	sq_integrity(db);
	sqlite3_close(db);
	printf("a hot journal of a unix-VFS writer that died: rolled back through atomio\n");
}

/* 4: "failer", atomio with every write failing (SQLITE_FULL) from the first
 * SQLITE_FCNTL_SYNC on once armed. */
typedef struct ffile {
	sqlite3_file base;
	sqlite3_file *inner;
} ffile;
static sqlite3_vfs g_failer, *g_atomio;
static int g_armed; /* 1: fail from the next database sync on; 2: failing */
#define INNER(f) (((ffile *)(f))->inner)

static int ff_close(sqlite3_file *f) { return INNER(f)->pMethods->xClose(INNER(f)); }
static int ff_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) { return INNER(f)->pMethods->xRead(INNER(f), b, n, o); }
static int ff_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o)
{
	return g_armed == 2 ? SQLITE_FULL : INNER(f)->pMethods->xWrite(INNER(f), b, n, o);
}
static int ff_truncate(sqlite3_file *f, sqlite3_int64 n) { return INNER(f)->pMethods->xTruncate(INNER(f), n); }
static int ff_sync(sqlite3_file *f, int fl) { return INNER(f)->pMethods->xSync(INNER(f), fl); }
static int ff_size(sqlite3_file *f, sqlite3_int64 *n) { return INNER(f)->pMethods->xFileSize(INNER(f), n); }
static int ff_lock(sqlite3_file *f, int l) { return INNER(f)->pMethods->xLock(INNER(f), l); }
static int ff_unlock(sqlite3_file *f, int l) { return INNER(f)->pMethods->xUnlock(INNER(f), l); }
static int ff_reserved(sqlite3_file *f, int *o) { return INNER(f)->pMethods->xCheckReservedLock(INNER(f), o); }
static int ff_fcntl(sqlite3_file *f, int op, void *a)
{
	int rc = INNER(f)->pMethods->xFileControl(INNER(f), op, a);
	if (op == SQLITE_FCNTL_SYNC && g_armed == 1)
		g_armed = 2;
	return rc;
}
static int ff_sector(sqlite3_file *f) { return INNER(f)->pMethods->xSectorSize(INNER(f)); }
static int ff_dc(sqlite3_file *f) { return INNER(f)->pMethods->xDeviceCharacteristics(INNER(f)); }
static const sqlite3_io_methods ff_methods = {
	.iVersion = 1, .xClose = ff_close, .xRead = ff_read, .xWrite = ff_write, .xTruncate = ff_truncate,
	.xSync = ff_sync, .xFileSize = ff_size, .xLock = ff_lock, .xUnlock = ff_unlock,
	.xCheckReservedLock = ff_reserved, .xFileControl = ff_fcntl, .xSectorSize = ff_sector,
	.xDeviceCharacteristics = ff_dc};

static int fv_open(sqlite3_vfs *v, sqlite3_filename n, sqlite3_file *f, int fl, int *o)
{
	ffile *x = (ffile *)f;
	x->base.pMethods = NULL;
	x->inner = (sqlite3_file *)((char *)f + 64);
	int rc = g_atomio->xOpen(g_atomio, n, x->inner, fl, o);
	if (rc == SQLITE_OK)
		x->base.pMethods = &ff_methods;
	else if (x->inner->pMethods)
		x->inner->pMethods->xClose(x->inner);
	return rc;
}
static int fv_delete(sqlite3_vfs *v, const char *n, int s) { return g_atomio->xDelete(g_atomio, n, s); }
static int fv_access(sqlite3_vfs *v, const char *n, int fl, int *o) { return g_atomio->xAccess(g_atomio, n, fl, o); }
static int fv_full(sqlite3_vfs *v, const char *n, int len, char *o) { return g_atomio->xFullPathname(g_atomio, n, len, o); }
static int fv_random(sqlite3_vfs *v, int n, char *o) { return g_atomio->xRandomness(g_atomio, n, o); }
static int fv_sleep(sqlite3_vfs *v, int us) { return g_atomio->xSleep(g_atomio, us); }
static int fv_time(sqlite3_vfs *v, double *t) { return g_atomio->xCurrentTime(g_atomio, t); }
static int fv_error(sqlite3_vfs *v, int n, char *o) { return g_atomio->xGetLastError(g_atomio, n, o); }

static void fail_after_phase_one(const char *path, const char *mode)
{
	sq_register();
	if (!g_atomio) {
		g_atomio = sqlite3_vfs_find("atomio");
		CHECK(g_atomio);
		g_failer = (sqlite3_vfs){.iVersion = 1, .szOsFile = 64 + g_atomio->szOsFile,
					 .mxPathname = g_atomio->mxPathname, .zName = "failer", .xOpen = fv_open,
					 .xDelete = fv_delete, .xAccess = fv_access, .xFullPathname = fv_full,
					 .xRandomness = fv_random, .xSleep = fv_sleep, .xCurrentTime = fv_time,
					 .xGetLastError = fv_error};
		CHECK_EQ(sqlite3_vfs_register(&g_failer, 0), SQLITE_OK);
	}
	unlink(path);
	sqlite3 *db = open_mode(path, mode);
	sq_ok(db, "CREATE TABLE f(a UNIQUE, b UNIQUE);"
		  "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<40) "
		  "INSERT INTO f SELECT randomblob(200), randomblob(300) FROM c");
	sqlite3_close(db);
	db = sq_open_vfs(path, "failer", 0);
	char sql[64];
	snprintf(sql, sizeof(sql), "PRAGMA journal_mode=%s", mode);
	sq_ok(db, sql);
	sq_ok(db, "PRAGMA cache_size=10");
	g_armed = 1;
	int rc = sq_exec(db, "INSERT INTO f SELECT randomblob(200), randomblob(300) FROM f");
	g_armed = 0;
	CHECK(rc != SQLITE_OK); /* the commit failed */
	sqlite3_close(db);
	db = open_mode(path, mode);
	sq_integrity(db);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM f"), 40);
	sqlite3_close(db);
	printf("journal_mode %s: a commit failing after its phase one leaves the database as before it, "
	       "intact\n", mode);
}

int main(void)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s", t_path("j.db"));
	create(path);
	modes(path, NULL);
	modes(path, "TRUNCATE");
	modes(path, "PERSIST");
	modes(path, "DELETE");
	hot_journal(path);
	snprintf(path, sizeof(path), "%s", t_path("f.db"));
	fail_after_phase_one(path, "PERSIST"); /* its journal's header is zeroed after phase one */
	return 0;
}
