/*
 * t_sqlite_batch: an SQLite built with SQLITE_ENABLE_BATCH_ATOMIC_WRITE uses
 * atomio's groups natively through SQLITE_IOCAP_BATCH_ATOMIC and the
 * SQLITE_FCNTL_*_ATOMIC_WRITE controls, even in a rollback-journal mode.
 * Skipped (77) with an SQLite built without it, as Debian's is;
 * scripts/sqlite-batch-atomic.sh builds one from Debian's source package
 * and runs this test (and t_sqlite_crash in journal_mode=DELETE) against it.
 *  - journal_mode=PERSIST: a batch commit keeps its journal in memory, so no
 *    -journal file ever appears, and each commit is one group;
 *  - a transaction that spills goes the journal way (SQLite's choice) and
 *    still commits;
 *  - a transaction larger than the log grows the log and commits.
 */
#include "sq_t.h"

int main(void)
{
	if (!sqlite3_compileoption_used("ENABLE_BATCH_ATOMIC_WRITE"))
		t_skip("this SQLite (%s) is built without SQLITE_ENABLE_BATCH_ATOMIC_WRITE",
		       sqlite3_libversion());
	const char *path = t_path("batch.db");
	char jp[4300];
	snprintf(jp, sizeof(jp), "%s-journal", path);
	sqlite3 *db = sq_open_vfs(path, "atomio", 1 << 20);
	sq_ok(db, "PRAGMA journal_mode=PERSIST; PRAGMA synchronous=FULL");
	sq_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER, b BLOB)");
	sq_ok(db, "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<500) "
		  "INSERT INTO t SELECT i, 0, randomblob(200) FROM c");
	/* The first transactions of an empty database use a real journal
	 * (SQLite's rule); PERSIST left it behind.  No transaction is open. */
	unlink(jp);
	for (int i = 0; i < 50; i++) {
		long long c0 = sq_stat(db, "commits");
		sq_ok(db, "BEGIN; UPDATE t SET v = v + 1 WHERE id % 7 = 3; "
			  "UPDATE t SET v = v - 1 WHERE id % 7 = 4; COMMIT");
		CHECK_EQ(sq_stat(db, "commits"), c0 + 1);
		CHECK(access(jp, F_OK) != 0); /* PERSIST would leave it: batch never made it */
	}
	CHECK_EQ(sq_int(db, "SELECT sum(v) FROM t"),
		 50 * sq_int(db, "SELECT sum(id % 7 = 3) - sum(id % 7 = 4) FROM t"));
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t WHERE v = 50"), sq_int(db, "SELECT count(*) FROM t WHERE id % 7 = 3"));

	/* spill: SQLite writes its journal first (not a batch), still one group */
	sq_ok(db, "PRAGMA cache_size=10");
	sq_ok(db, "WITH RECURSIVE c(i) AS (SELECT 501 UNION ALL SELECT i+1 FROM c WHERE i<1500) "
		  "INSERT INTO t SELECT i, 0, randomblob(300) FROM c");
	CHECK(access(jp, F_OK) == 0);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 1500);
	sq_integrity(db);

	/* larger than the 1 MiB log: the log grows, the transaction commits */
	sq_ok(db, "PRAGMA cache_size=2000");
	sq_ok(db, "UPDATE t SET b = randomblob(2000)");
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t WHERE length(b) = 2000"), 1500);
	sq_integrity(db);
	sqlite3_close(db);
	db = sq_open_vfs(path, "atomio", 0);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 1500);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t WHERE length(b) = 2000"), 1500);
	sq_integrity(db);
	sqlite3_close(db);
	return 0;
}
