/*
 * t_sqlite_basic: the atomio VFS as a single connection sees it.
 *  - registration (name, not default; a second name as default);
 *  - the log DB-atomio beside the database, mode 0600, created on first write;
 *  - a transaction that spills pages before commit: the file is untouched
 *    until COMMIT, and the connection reads its own spilled pages;
 *  - ROLLBACK after a spill (journal_mode=OFF too) leaves the file unchanged;
 *  - synchronous=OFF still commits (SQLITE_FCNTL_SYNC), data survives reopen;
 *  - journal_mode=WAL switches to WAL (more in t_sqlite_wal): the log goes,
 *    back to DELETE it comes again; in locking_mode=EXCLUSIVE WAL runs with
 *    its index in heap memory, its checkpoints written as SQLite writes them
 *    (also with synchronous=OFF); DELETE works, its journal never on disk;
 *  - SQLITE_IOCAP_BATCH_ATOMIC (also where SQLite does not use it: the
 *    journals are in memory, there is no journal file, as SQLite's own
 *    test suite reads the flag); the
 *    three *_ATOMIC_WRITE file controls;
 *  - nolock=1 URIs write and commit;
 *  - a stale log (the database deleted and created again) is removed; so is
 *    the copy of a log restored with a copy of its database (as SQLite's own
 *    test harness saves and restores test.db*) when both copies were born in
 *    the same clock tick.
 */
#include <fcntl.h>
#include <stdbool.h>

#include "sq_t.h"

static void check_registration(void)
{
	sq_register();
	sqlite3_vfs *def = sqlite3_vfs_find(NULL);
	sqlite3_vfs *a = sqlite3_vfs_find("atomio");
	CHECK(a != NULL);
	CHECK(def != a);
	/* a second name, as the default; then the old default back */
	CHECK_EQ(atomio_sqlite_register("atomio-default", 1), SQLITE_OK);
	CHECK(sqlite3_vfs_find(NULL) == sqlite3_vfs_find("atomio-default"));
	CHECK_EQ(sqlite3_vfs_register(def, 1), SQLITE_OK);
	CHECK(sqlite3_vfs_find(NULL) == def);
	/* registering again only changes the default flag */
	CHECK_EQ(atomio_sqlite_register(NULL, 0), SQLITE_OK);
	CHECK(sqlite3_vfs_find(NULL) == def);
}

static void fill(sqlite3 *db, int from, int n, int len)
{
	char sql[256];
	snprintf(sql, sizeof(sql),
		 "WITH RECURSIVE c(i) AS (SELECT %d UNION ALL SELECT i+1 FROM c WHERE i<%d) "
		 "INSERT INTO t SELECT i, i*7, randomblob(%d + 8) FROM c",
		 from, from + n - 1, len);
	sq_ok(db, sql);
}

static void check_spill_and_pending_reads(const char *path)
{
	sqlite3 *db = sq_open(path, 8 << 20);
	struct stat sb;
	char logp[4200];
	snprintf(logp, sizeof(logp), "%s-atomio", path);
	sq_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER, b BLOB)");
	CHECK_EQ(stat(logp, &sb), 0);
	CHECK_EQ(sb.st_mode & 0777, 0600);
	fill(db, 1, 100, 100);

	/* 10 cache pages, ~2 MB of rows: SQLite must spill. */
	sq_ok(db, "PRAGMA cache_size=10");
	size_t len0;
	uint64_t h0 = sq_file_hash(path, &len0);
	sq_ok(db, "BEGIN");
	fill(db, 101, 2000, 1000);
	int spill = 0, hi = 0;
	SQ_CHECK(db, sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_SPILL, &spill, &hi, 0));
	CHECK(spill > 100); /* pages written to the VFS before COMMIT */
	/* Nothing reached the file yet... */
	size_t len1;
	CHECK(sq_file_hash(path, &len1) == h0);
	CHECK_EQ(len1, len0);
	/* ...but this connection reads the spilled pages back. */
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 2100);
	CHECK_EQ(sq_int(db, "SELECT sum(v) FROM t"), 7LL * 2100 * 2101 / 2);
	CHECK_EQ(sq_int(db, "SELECT sum(length(b)) FROM t"), 100 * 108 + 2000 * 1008);
	long long pgs = sq_int(db, "PRAGMA page_count");
	CHECK(pgs * 4096 > (long long)len0 + (1 << 20));
	/* ROLLBACK: still nothing in the file, and the old content reads back. */
	sq_ok(db, "ROLLBACK");
	CHECK(sq_file_hash(path, &len1) == h0);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 100);
	sq_integrity(db);

	/* The same, committed: now the file changes, in one group. */
	sq_ok(db, "BEGIN");
	fill(db, 101, 2000, 1000);
	CHECK(sq_file_hash(path, NULL) == h0);
	sq_ok(db, "COMMIT");
	CHECK(sq_file_hash(path, &len1) != h0);
	CHECK(len1 > len0 + (1 << 20));
	char stats[512];
	sq_text(db, "PRAGMA atomio_stats", stats, sizeof(stats));
	CHECK(strstr(stats, "writer=1") != NULL);
	sqlite3_close(db);

	db = sq_open(path, 0);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 2100);
	sq_integrity(db);

	/* journal_mode=OFF: SQLite cannot roll back a spilled transaction by
	 * itself, but the spilled pages never left the group. */
	sq_ok(db, "PRAGMA journal_mode=OFF; PRAGMA cache_size=10");
	h0 = sq_file_hash(path, NULL);
	sq_ok(db, "BEGIN");
	sq_ok(db, "UPDATE t SET v = v + 1, b = zeroblob(1500)");
	CHECK(sq_file_hash(path, NULL) == h0);
	sq_ok(db, "ROLLBACK");
	CHECK(sq_file_hash(path, NULL) == h0);
	sqlite3_close(db);
	db = sq_open(path, 0);
	CHECK_EQ(sq_int(db, "SELECT sum(v) FROM t"), 7LL * 2100 * 2101 / 2);
	sq_integrity(db);
	sqlite3_close(db);
}

static void check_sync_off(const char *path)
{
	sqlite3 *db = sq_open(path, 2 << 20);
	sq_ok(db, "PRAGMA synchronous=OFF");
	sq_ok(db, "CREATE TABLE s(x)");
	for (int i = 0; i < 20; i++)
		sq_ok(db, "INSERT INTO s VALUES(randomblob(3000))");
	/* each transaction one group: at OFF, a lazy one (docs/SQLITE.md) */
	CHECK(sq_stat(db, "commits") + sq_stat(db, "lazy_commits") >= 21);
	CHECK(sq_stat(db, "lazy_commits") >= 20);
	sqlite3_close(db);
	db = sq_open(path, 0);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM s"), 20);
	sqlite3_close(db);
}

static void check_journal_modes(const char *path)
{
	sqlite3 *db = sq_open(path, 2 << 20);
	sq_ok(db, "CREATE TABLE j(x)");
	char mode[32], jp[4200], lp[4200], wp[4200];
	snprintf(jp, sizeof(jp), "%s-journal", path);
	snprintf(lp, sizeof(lp), "%s-atomio", path);
	snprintf(wp, sizeof(wp), "%s-wal", path);
	CHECK(access(lp, F_OK) == 0);
	sq_text(db, "PRAGMA journal_mode=WAL", mode, sizeof(mode));
	CHECK(!strcmp(mode, "wal"));
	sq_ok(db, "INSERT INTO j VALUES(1)");
	CHECK(access(wp, F_OK) == 0);
	CHECK(access(lp, F_OK) != 0); /* a WAL database has no log */
	/* Rollback journals: in memory, the commit one group. */
	sq_text(db, "PRAGMA journal_mode=DELETE", mode, sizeof(mode));
	CHECK(!strcmp(mode, "delete"));
	for (int i = 0; i < 10; i++)
		sq_ok(db, "INSERT INTO j VALUES(randomblob(5000))");
	CHECK(access(jp, F_OK) != 0);
	CHECK(access(wp, F_OK) != 0);
	CHECK(access(lp, F_OK) == 0);
	sqlite3_close(db);
	db = sq_open_vfs(path, "atomio", 0);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM j"), 11);
	sq_integrity(db);
	sqlite3_close(db);
}

static void check_batch_atomic(const char *path)
{
	sqlite3 *db = sq_open(path, 2 << 20);
	sq_ok(db, "CREATE TABLE b(x); INSERT INTO b VALUES(1)");
	sqlite3_file *f = NULL;
	SQ_CHECK(db, sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &f));
	CHECK(f && f->pMethods);
	CHECK(f->pMethods->xDeviceCharacteristics(f) & SQLITE_IOCAP_BATCH_ATOMIC);
	int psz = (int)sq_int(db, "PRAGMA page_size");
	char *page = malloc((size_t)psz), *back = malloc((size_t)psz), *orig = malloc((size_t)psz);
	size_t len0;
	uint64_t h0 = sq_file_hash(path, &len0);

	/* Under SQLite's EXCLUSIVE lock, as the pager uses the controls. */
	sq_ok(db, "BEGIN EXCLUSIVE");
	CHECK_EQ(f->pMethods->xRead(f, orig, psz, psz), SQLITE_OK);
	memset(page, 0xAB, (size_t)psz);
	CHECK_EQ(f->pMethods->xFileControl(f, SQLITE_FCNTL_BEGIN_ATOMIC_WRITE, NULL), SQLITE_OK);
	CHECK_EQ(f->pMethods->xWrite(f, page, psz, psz), SQLITE_OK);
	CHECK_EQ(f->pMethods->xWrite(f, page, psz, (sqlite3_int64)len0 + psz), SQLITE_OK);
	sqlite3_int64 sz;
	CHECK_EQ(f->pMethods->xFileSize(f, &sz), SQLITE_OK);
	CHECK_EQ(sz, (long long)len0 + 2 * psz);
	CHECK_EQ(f->pMethods->xRead(f, back, psz, psz), SQLITE_OK);
	CHECK(!memcmp(back, page, (size_t)psz));
	/* the hole between the old end and the new page reads as zeros */
	CHECK_EQ(f->pMethods->xRead(f, back, psz, (sqlite3_int64)len0), SQLITE_OK);
	for (int i = 0; i < psz; i++)
		CHECK(back[i] == 0);
	CHECK_EQ(f->pMethods->xFileControl(f, SQLITE_FCNTL_ROLLBACK_ATOMIC_WRITE, NULL), SQLITE_OK);
	CHECK_EQ(f->pMethods->xFileSize(f, &sz), SQLITE_OK);
	CHECK_EQ(sz, (long long)len0);
	CHECK_EQ(f->pMethods->xRead(f, back, psz, psz), SQLITE_OK);
	CHECK(!memcmp(back, orig, (size_t)psz));
	CHECK(sq_file_hash(path, NULL) == h0);

	/* commit: the page reaches the file, in one group */
	CHECK_EQ(f->pMethods->xFileControl(f, SQLITE_FCNTL_BEGIN_ATOMIC_WRITE, NULL), SQLITE_OK);
	CHECK_EQ(f->pMethods->xWrite(f, orig, psz, psz), SQLITE_OK);
	CHECK_EQ(f->pMethods->xTruncate(f, (sqlite3_int64)len0), SQLITE_OK);
	CHECK(sq_file_hash(path, NULL) == h0);
	CHECK_EQ(f->pMethods->xFileControl(f, SQLITE_FCNTL_COMMIT_ATOMIC_WRITE, NULL), SQLITE_OK);
	sq_ok(db, "COMMIT");
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM b"), 1);
	sq_integrity(db);
	free(page);
	free(back);
	free(orig);
	sqlite3_close(db);
}

/* A database deleted and created again without its log: the stale log (its
 * records must never be replayed into the new file, which may even have the
 * old inode number) is removed at open, and the new database works; a stale
 * log that a store still holds is refused. */
static void check_stale_log(const char *path)
{
	char lp[4300];
	snprintf(lp, sizeof(lp), "%s-atomio", path);
	sqlite3 *db = sq_open(path, 1 << 20);
	sq_ok(db, "CREATE TABLE old(x); INSERT INTO old VALUES(1)");
	sqlite3_close(db);
	struct stat st0;
	CHECK_OK(stat(lp, &st0));
	CHECK_OK(unlink(path));
	usleep(10000); /* a later birth time, also on coarse clocks */
	db = sq_open_vfs(path, NULL, 0);
	sq_ok(db, "CREATE TABLE fresh(y); INSERT INTO fresh VALUES(2)");
	sqlite3_close(db);
	db = sq_open(path, 0);
	CHECK_EQ(sq_int(db, "SELECT y FROM fresh"), 2);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM sqlite_schema WHERE name='old'"), 0);
	sq_ok(db, "INSERT INTO fresh VALUES(3)");
	sq_integrity(db);
	sqlite3_close(db);
	struct statx a, b;
	bool btime = statx(AT_FDCWD, path, 0, STATX_BTIME, &a) == 0 && (a.stx_mask & STATX_BTIME);
	CHECK_OK(statx(AT_FDCWD, lp, 0, STATX_BTIME, &b));
	if (btime) /* a new log, made after the new database */
		CHECK(b.stx_btime.tv_sec > a.stx_btime.tv_sec ||
		      (b.stx_btime.tv_sec == a.stx_btime.tv_sec && b.stx_btime.tv_nsec >= a.stx_btime.tv_nsec));

	/* The earlier file renamed away while its writer still holds the
	 * store: the log at the old path is in use, not removed. */
	db = sq_open(path, 0);
	sq_ok(db, "INSERT INTO fresh VALUES(4)"); /* the writer */
	char moved[4400];
	snprintf(moved, sizeof(moved), "%s-moved", path);
	CHECK_OK(rename(path, moved));
	usleep(10000);
	sqlite3 *db2 = sq_open_vfs(path, "atomio", 0);
	CHECK(sqlite3_exec(db2, "CREATE TABLE t2(z)", NULL, NULL, NULL) != SQLITE_OK);
	CHECK_OK(access(lp, F_OK));
	sqlite3_close(db2);
	sqlite3_close(db);
	unlink(moved);
}

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	unlink(to);
	int i = open(from, O_RDONLY | O_CLOEXEC);
	int o = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(i >= 0 && o >= 0);
	ssize_t n;
	while ((n = read(i, buf, sizeof(buf))) > 0)
		CHECK_EQ(write(o, buf, (size_t)n), n);
	CHECK_EQ(n, 0);
	close(i);
	close(o);
}

static bool same_btime(const char *a, const char *b)
{
	struct statx x, y;
	return statx(AT_FDCWD, a, 0, STATX_BTIME, &x) == 0 && statx(AT_FDCWD, b, 0, STATX_BTIME, &y) == 0 &&
	       (x.stx_mask & y.stx_mask & STATX_BTIME) && x.stx_btime.tv_sec == y.stx_btime.tv_sec &&
	       x.stx_btime.tv_nsec == y.stx_btime.tv_nsec;
}

/* SQLite's test harness (faultsim_save_and_close, db_save/db_restore) copies
 * test.db* while the database is open, so the copy of the log holds groups
 * and its catalog names the original file, then restores the copies as new
 * files.  Restored log first, then the database: the log is older than the
 * new database and removed, also when both were born in the same clock tick
 * (which a comparison of birth times alone cannot tell from a log made for
 * this very file; atomio's recovery can: the file is not the one registered).
 * Until that, every such restore was "unable to open database file". */
static void check_restored_copy(const char *path)
{
	char lp[4300], sv[4300], svl[4300];
	snprintf(lp, sizeof(lp), "%s-atomio", path);
	snprintf(sv, sizeof(sv), "%s-saved", path);
	snprintf(svl, sizeof(svl), "%s-saved-atomio", path);
	int tries = 0, same = 0;
	for (; tries < 400 && same < 3; tries++) {
		sqlite3 *db = sq_open(path, 1 << 20);
		sq_ok(db, "CREATE TABLE IF NOT EXISTS r(x); INSERT INTO r VALUES(randomblob(300))");
		copy_file(path, sv);
		copy_file(lp, svl);
		sqlite3_close(db);
		CHECK_OK(unlink(path));
		CHECK_OK(unlink(lp));
		copy_file(svl, lp);
		copy_file(sv, path);
		same += same_btime(path, lp);
		db = NULL;
		int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, "atomio");
		if (rc == SQLITE_OK)
			rc = sq_exec(db, "SELECT count(*) FROM r");
		if (rc != SQLITE_OK) {
			fprintf(stderr, "restore %d (same birth time: %d): %s\n", tries, same_btime(path, lp),
				sqlite3_errmsg(db));
			exit(1);
		}
		CHECK_EQ(sq_int(db, "SELECT count(*) FROM r"), tries + 1);
		sq_integrity(db);
		sqlite3_close(db);
	}
	printf("restored copies: %d, %d of them born in the same clock tick as their log\n", tries, same);
	unlink(sv);
	unlink(svl);
}

/* locking_mode=EXCLUSIVE: SQLite's WAL with its index in heap memory (no
 * xShm* calls); its checkpoints write the database as SQLite's WAL does
 * (also with synchronous=OFF, where no xSync follows them), and no log is
 * left beside it. */
static void check_exclusive_wal(const char *path)
{
	sqlite3 *db = sq_open_vfs(path, "atomio", 0);
	char mode[32];
	sq_ok(db, "PRAGMA locking_mode=EXCLUSIVE; PRAGMA synchronous=OFF");
	sq_text(db, "PRAGMA journal_mode=WAL", mode, sizeof(mode));
	CHECK(!strcmp(mode, "wal"));
	sq_ok(db, "CREATE TABLE w(x); INSERT INTO w VALUES(randomblob(3000)), (randomblob(3000))");
	sq_ok(db, "PRAGMA wal_checkpoint(TRUNCATE)");
	sq_ok(db, "INSERT INTO w VALUES(3)");
	sqlite3_close(db); /* checkpoints and deletes the WAL */
	char wp[4200], lp[4200];
	snprintf(wp, sizeof(wp), "%s-wal", path);
	snprintf(lp, sizeof(lp), "%s-atomio", path);
	CHECK(access(wp, F_OK) != 0);
	CHECK(access(lp, F_OK) != 0);
	db = sq_open_vfs(path, "atomio", 0);
	sq_ok(db, "PRAGMA locking_mode=EXCLUSIVE");
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM w"), 3);
	sq_integrity(db);
	sqlite3_close(db);
}

/* nolock=1: SQLite never locks; the first write opens the store. */
static void check_nolock(const char *path)
{
	char uri[4400];
	snprintf(uri, sizeof(uri), "file:%s?nolock=1", path);
	sq_register();
	sqlite3 *db = NULL;
	CHECK_EQ(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
				 "atomio"), SQLITE_OK);
	sq_ok(db, "PRAGMA journal_mode=MEMORY; CREATE TABLE n(x); INSERT INTO n VALUES(1), (2)");
	sq_ok(db, "BEGIN; INSERT INTO n VALUES(3); ROLLBACK");
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM n"), 2);
	sqlite3_close(db);
	db = sq_open(path, 0);
	CHECK_EQ(sq_int(db, "SELECT sum(x) FROM n"), 3);
	sq_integrity(db);
	sqlite3_close(db);
}

int main(void)
{
	check_registration();
	check_spill_and_pending_reads(t_path("spill.db"));
	check_sync_off(t_path("off.db"));
	check_journal_modes(t_path("modes.db"));
	check_batch_atomic(t_path("batch.db"));
	check_stale_log(t_path("stale.db"));
	check_restored_copy(t_path("restored.db"));
	check_exclusive_wal(t_path("xwal.db"));
	check_nolock(t_path("nolock.db"));
	return 0;
}
