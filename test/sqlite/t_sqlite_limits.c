/*
 * t_sqlite_limits: a transaction too large for the log, and VACUUM/truncation.
 *  - With a 1 MiB log, a transaction writing ~3 MB commits: the log grows
 *    under it (the file unchanged until COMMIT), the content is all there
 *    after COMMIT and after reopening.  The same with a transaction that
 *    spills (small cache).  A small database gets a log of 8 MiB.
 *  - A transaction whose pages change in bytes scattered all over them (as
 *    VACUUM's do: SQLite's vacuummem.test) would be more ranges than a group
 *    may have (65,536) if every changed run were logged on its own: it
 *    commits (such pages are logged whole).
 *  - DELETE + VACUUM shrinks the file, and the truncation is part of the
 *    commit's group: the file keeps its size until COMMIT, then has the new
 *    one; auto_vacuum=FULL shrinks it at each commit; content survives.
 */
#include "sq_t.h"

static long long fsize(const char *p);

static void check_larger_than_log(const char *path, int cache)
{
	sqlite3 *db = sq_open(path, 1 << 20);
	char sql[128];
	snprintf(sql, sizeof(sql), "PRAGMA cache_size=%d", cache);
	sq_ok(db, sql);
	sq_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)");
	sq_ok(db, "INSERT INTO t VALUES(1, randomblob(100000))");
	char lp[4300];
	snprintf(lp, sizeof(lp), "%s-atomio", path);
	long long log0 = fsize(lp);
	size_t len0;
	uint64_t h0 = sq_file_hash(path, &len0);
	sq_ok(db, "BEGIN; "
		  "WITH RECURSIVE c(i) AS (SELECT 2 UNION ALL SELECT i+1 FROM c WHERE i<300) "
		  "INSERT INTO t SELECT i, randomblob(10000) FROM c");
	/* (with the small cache the log has grown already) the file has not changed */
	CHECK(sq_file_hash(path, NULL) == h0);
	sq_ok(db, "COMMIT");
	CHECK(fsize(lp) > log0 + (1 << 20));
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 300);
	sq_integrity(db);
	sqlite3_close(db);
	db = sq_open(path, 0);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 300);
	CHECK_EQ(sq_int(db, "SELECT sum(length(b)) FROM t"), 100000 + 299 * 10000);
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

static void check_blob(sqlite3 *db, const unsigned char *v, int n)
{
	sqlite3_stmt *s;
	SQ_CHECK(db, sqlite3_prepare_v2(db, "SELECT b FROM t WHERE id = 1", -1, &s, NULL));
	CHECK_EQ(sqlite3_step(s), SQLITE_ROW);
	CHECK_EQ(sqlite3_column_bytes(s, 0), n);
	CHECK(!memcmp(sqlite3_column_blob(s, 0), v, (size_t)n));
	sqlite3_finalize(s);
}

/* 3 MB of 64 KiB pages in which every 40th byte changes: ~75,000 runs of
 * changed bytes, each too far from the next to be joined. */
static void check_scattered(const char *path)
{
	sqlite3 *db = sq_open(path, 0);
	sq_ok(db, "PRAGMA page_size=65536; CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)");
	enum { N = 3000000 };
	sq_ok(db, "INSERT INTO t VALUES(1, zeroblob(3000000))");
	unsigned char *v = calloc(N, 1);
	CHECK(v != NULL);
	for (size_t i = 0; i < N; i += 40)
		v[i] = 1;
	sqlite3_stmt *s;
	SQ_CHECK(db, sqlite3_prepare_v2(db, "UPDATE t SET b = ? WHERE id = 1", -1, &s, NULL));
	SQ_CHECK(db, sqlite3_bind_blob(s, 1, v, N, SQLITE_STATIC));
	SQ_CHECK(db, sqlite3_step(s));
	sqlite3_finalize(s);
	check_blob(db, v, N);
	sq_integrity(db);
	sqlite3_close(db);
	db = sq_open(path, 0);
	check_blob(db, v, N);
	sq_integrity(db);
	sqlite3_close(db);
	free(v);
}

/* A small database gets a small log. */
static void check_small_log(const char *path)
{
	sqlite3 *db = sq_open(path, 0);
	sq_ok(db, "CREATE TABLE t(x); INSERT INTO t VALUES(1)");
	sqlite3_close(db);
	char lp[4300];
	snprintf(lp, sizeof(lp), "%s-atomio", path);
	CHECK(fsize(lp) < (12 << 20)); /* 8 MiB of records, and the catalog */
}

int main(void)
{
	check_larger_than_log(t_path("big1.db"), 2000);
	check_larger_than_log(t_path("big2.db"), 10);
	check_small_log(t_path("small.db"));
	check_scattered(t_path("scatter.db"));
	check_vacuum(t_path("vac.db"));
	return 0;
}
