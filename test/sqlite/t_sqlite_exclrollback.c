/* locking_mode=EXCLUSIVE, a ROLLBACK after a cache spill (issue 35, 4).
 *
 * SQLite never unlocks in EXCLUSIVE mode, so the VFS is not told that the
 * rolled-back transaction ended: its playback's sync left the connection
 * on its thread's list of groups waiting for a commit.  Closed from another
 * thread, the connection was freed while still on that list, and the next
 * commit of the first thread walked into it (a use after free: the
 * sanitizer build fails before the fix).  Then: the same connection's next
 * transaction commits what it should, and the rolled-back rows are nowhere. */
#include <pthread.h>

#include "sq_t.h"

static void *closer(void *arg)
{
	sqlite3_close((sqlite3 *)arg);
	return NULL;
}

/* BEGIN, rows of 500 bytes over a cache of 10 pages (spilled), ROLLBACK. */
static void spill_and_roll_back(sqlite3 *db)
{
	sq_ok(db, "BEGIN; WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) "
		  "INSERT INTO t SELECT randomblob(500) FROM n; ROLLBACK");
}

int main(void)
{
	t_dir();
	char a[4200], b[4200];
	snprintf(a, sizeof(a), "%s", t_path("a.db"));
	snprintf(b, sizeof(b), "%s", t_path("b.db"));

	sqlite3 *x = sq_open_default(a, 1000);
	sq_ok(x, "PRAGMA locking_mode=EXCLUSIVE; PRAGMA cache_size=10; CREATE TABLE t(x); INSERT INTO t VALUES(1)");
	spill_and_roll_back(x);
	pthread_t th;
	CHECK_OK(pthread_create(&th, NULL, closer, x));
	CHECK_OK(pthread_join(th, NULL));
	/* this thread's next commit */
	sqlite3 *y = sq_open_default(b, 1000);
	sq_ok(y, "CREATE TABLE t(x); INSERT INTO t VALUES(1)");
	sq_ok(y, "BEGIN; INSERT INTO t VALUES(2); COMMIT");
	CHECK_EQ(sq_int(y, "SELECT count(*) FROM t"), 2);
	sqlite3_close(y);
	printf("a connection closed by another thread after an EXCLUSIVE-mode ROLLBACK; the next commit: ok\n");

	/* the same connection goes on after its ROLLBACK */
	x = sq_open_default(a, 1000);
	sq_ok(x, "PRAGMA locking_mode=EXCLUSIVE; PRAGMA cache_size=10");
	spill_and_roll_back(x);
	sq_ok(x, "INSERT INTO t VALUES(2)");
	CHECK_EQ(sq_int(x, "SELECT count(*) FROM t"), 2);
	spill_and_roll_back(x);
	sqlite3_close(x);
	x = sq_open_default(a, 1000);
	long long n = sq_int(x, "SELECT count(*) FROM t");
	sq_integrity(x);
	sqlite3_close(x);
	printf("after two ROLLBACKs and a commit between them: %lld rows (2 expected)\n", n);
	return n == 2 ? 0 : 1;
}
