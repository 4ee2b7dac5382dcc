/*
 * t_sqlite_limits: a transaction too large for the log, and VACUUM/truncation.
 *  - With a 1 MiB log, a transaction writing ~3 MB fails with an SQLite I/O
 *    error (SQLITE_IOERR_WRITE), the database file is byte for byte unchanged,
 *    the connection goes on working, and a fresh open finds the old content.
 *  - The same with a transaction that spills before failing (small cache).
 *  - DELETE + VACUUM shrinks the file, and the truncation is part of the
 *    commit's group: the file keeps its size until COMMIT, then has the new
 *    one; auto_vacuum=FULL shrinks it at each commit; content survives.
 */
#include "sq_t.h"

static void check_too_large(const char *path, int cache)
{
	sqlite3 *db = sq_open(path, 1 << 20);
	char sql[128];
	snprintf(sql, sizeof(sql), "PRAGMA cache_size=%d", cache);
	sq_ok(db, sql);
	sq_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)");
	sq_ok(db, "INSERT INTO t VALUES(1, randomblob(100000))");
	long long sum0 = sq_int(db, "SELECT sum(length(b)) FROM t");
	size_t len0;
	uint64_t h0 = sq_file_hash(path, &len0);

	int rc = sq_exec(db, "BEGIN; "
			     "WITH RECURSIVE c(i) AS (SELECT 2 UNION ALL SELECT i+1 FROM c WHERE i<300) "
			     "INSERT INTO t SELECT i, randomblob(10000) FROM c; COMMIT");
	CHECK_EQ(rc & 0xff, SQLITE_IOERR);
	CHECK_EQ(sqlite3_extended_errcode(db), SQLITE_IOERR_WRITE);
	sq_exec(db, "ROLLBACK"); /* if SQLite left the transaction open */
	size_t len1;
	CHECK(sq_file_hash(path, &len1) == h0);
	CHECK_EQ(len1, len0);
	/* the connection still works, with the old content */
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 1);
	CHECK_EQ(sq_int(db, "SELECT sum(length(b)) FROM t"), sum0);
	sq_ok(db, "INSERT INTO t VALUES(2, randomblob(50000))");
	sq_integrity(db);
	sqlite3_close(db);
	db = sq_open(path, 0);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 2);
	sq_integrity(db);
	sqlite3_close(db);
}

static long long fsize(const char *p)
{
	struct stat sb;
	CHECK_OK(stat(p, &sb));
	return (long long)sb.st_size;
}

static void check_vacuum(const char *path)
{
	sqlite3 *db = sq_open(path, 16 << 20);
	sq_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)");
	sq_ok(db, "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<2000) "
		  "INSERT INTO t SELECT i, randomblob(1000) FROM c");
	long long full = fsize(path);
	CHECK(full > 2000 * 1000);
	sq_ok(db, "DELETE FROM t WHERE id > 100");
	CHECK_EQ(fsize(path), full); /* freed pages stay in the file */
	long long sum = sq_int(db, "SELECT sum(id) FROM t");
	/* VACUUM is one transaction: its writes and truncation are one group */
	sq_ok(db, "VACUUM");
	long long small = fsize(path);
	CHECK(small < full / 10);
	CHECK_EQ(sq_int(db, "PRAGMA page_count") * sq_int(db, "PRAGMA page_size"), small);
	CHECK_EQ(sq_int(db, "SELECT sum(id) FROM t"), sum);
	sq_integrity(db);

	/* auto_vacuum=FULL: each commit that frees pages truncates */
	sq_ok(db, "PRAGMA auto_vacuum=FULL; VACUUM");
	CHECK_EQ(sq_int(db, "PRAGMA auto_vacuum"), 1);
	sq_ok(db, "WITH RECURSIVE c(i) AS (SELECT 101 UNION ALL SELECT i+1 FROM c WHERE i<1000) "
		  "INSERT INTO t SELECT i, randomblob(1000) FROM c");
	long long grown = fsize(path);
	long long commits = sq_stat(db, "commits");
	sq_ok(db, "BEGIN; DELETE FROM t WHERE id > 100");
	/* inside the transaction the connection sees the shorter file... */
	long long pages_in_tx = sq_int(db, "PRAGMA page_count");
	(void)pages_in_tx;
	CHECK_EQ(fsize(path), grown); /* ...the file does not, yet */
	sq_ok(db, "COMMIT");
	long long shrunk = fsize(path);
	CHECK(shrunk < grown / 4);
	/* the truncation was part of the commit's one group */
	CHECK_EQ(sq_stat(db, "commits"), commits + 1);
	CHECK_EQ(sq_int(db, "SELECT sum(id) FROM t"), sum);
	sq_integrity(db);
	sqlite3_close(db);
	db = sq_open(path, 0);
	CHECK_EQ(sq_int(db, "SELECT sum(id) FROM t"), sum);
	CHECK_EQ(fsize(path), shrunk);
	sq_integrity(db);
	sqlite3_close(db);
}

int main(void)
{
	check_too_large(t_path("big1.db"), 2000);
	check_too_large(t_path("big2.db"), 10);
	check_vacuum(t_path("vac.db"));
	return 0;
}
