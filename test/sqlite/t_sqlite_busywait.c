/* A writer waiting for readers to leave is not refused before its busy
 * timeout (issue 35, 5).
 *
 * READERS connections hold SHARED (a read transaction each); a writer
 * (another thread, its own connection, a busy timeout of 2 s) commits, so
 * needs EXCLUSIVE, and sleeps in its busy handler; the readers then leave
 * one at a time, GAP_MS apart (all gone within READERS * GAP_MS = 120 ms,
 * far inside the timeout).  The COMMIT must succeed.  SQLite's busy
 * handler counts each sleep as the whole delay it asked for, and the VFS
 * woke the writer at every reader's departure: about 22 departures spent
 * the 2 s and the COMMIT was refused with SQLITE_BUSY while readers were
 * still leaving. */
#include <pthread.h>

#include "sq_t.h"

#define READERS 40
#define GAP_MS 3

static char path[4200];
static volatile int in_commit;
static int commit_rc = -1;

static void *writer(void *arg)
{
	(void)arg;
	sqlite3 *w = sq_open_default(path, 2000);
	sq_ok(w, "BEGIN IMMEDIATE; INSERT INTO t VALUES(2)");
	__atomic_store_n(&in_commit, 1, __ATOMIC_SEQ_CST);
	commit_rc = sqlite3_exec(w, "COMMIT", 0, 0, 0);
	if (commit_rc != SQLITE_OK)
		sqlite3_exec(w, "ROLLBACK", 0, 0, 0);
	sqlite3_close(w);
	return NULL;
}

int main(void)
{
	t_dir();
	snprintf(path, sizeof(path), "%s", t_path("b.db"));
	sqlite3 *db = sq_open_default(path, 2000);
	sq_ok(db, "CREATE TABLE t(x); INSERT INTO t VALUES(1)");
	sqlite3 *r[READERS];
	for (int i = 0; i < READERS; i++) {
		r[i] = sq_open_default(path, 2000);
		sq_ok(r[i], "BEGIN");
		CHECK_EQ(sq_int(r[i], "SELECT count(*) FROM t"), 1);
	}
	pthread_t th;
	CHECK_OK(pthread_create(&th, NULL, writer, NULL));
	while (!__atomic_load_n(&in_commit, __ATOMIC_SEQ_CST))
		usleep(1000);
	usleep(20000); /* the writer is asleep in its busy handler */
	for (int i = 0; i < READERS; i++) {
		sq_ok(r[i], "COMMIT");
		usleep(GAP_MS * 1000);
	}
	CHECK_OK(pthread_join(th, NULL));
	printf("%d readers leaving %d ms apart beside a writer with a 2 s busy timeout: COMMIT %s\n", READERS,
	       GAP_MS, commit_rc == SQLITE_OK ? "ok" : sqlite3_errstr(commit_rc));
	for (int i = 0; i < READERS; i++)
		sqlite3_close(r[i]);
	long long n = sq_int(db, "SELECT count(*) FROM t");
	sqlite3_close(db);
	return commit_rc == SQLITE_OK && n == 2 ? 0 : 1;
}
