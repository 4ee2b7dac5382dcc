/* A process forks while it has a database's store open (it has written and
 * keeps its connection open); the child opens a connection of its own, as a
 * pre-forking server's workers do.  The child reads and writes beside the
 * parent: it joins the shared store with a handle of its own, never through
 * the copy of the parent's, whose log writes would land where the parent's
 * next ones go (the library refuses that copy in a child, -EPERM, and before
 * the VFS forgot it the write failed with a disk I/O error).  Then the
 * parent writes again, and every row is there, in a database whose
 * integrity check passes; a connection the child inherited is closed
 * without touching the parent's store. */
#include <pthread.h>

#include "sq_t.h"

/* A thread that opens stores (the VFS holds its lock while atomio_open
 * runs) while the main thread forks: no fork handler may wait for a lock
 * that a thread holds while waiting for another lock the handlers took
 * (the library's handler once held its own lock, taken before the VFS's:
 * the reverse of open_store's order). */
static volatile int stop_opener;
static void *opener(void *arg)
{
	(void)arg;
	for (unsigned i = 0; !stop_opener; i++) {
		char name[16], path[4200];
		snprintf(name, sizeof(name), "o%u.db", i % 4);
		snprintf(path, sizeof(path), "%s/%s", t_dir(), name);
		sqlite3 *c = sq_open_vfs(path, "atomio", 1 << 20);
		SQ_CHECK(c, sqlite3_exec(c, "PRAGMA journal_mode=MEMORY; CREATE TABLE IF NOT EXISTS t(x); "
					    "INSERT INTO t VALUES(1)", 0, 0, 0));
		SQ_CHECK(c, sqlite3_close(c));
	}
	return NULL;
}

static long long one(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s;
	SQ_CHECK(db, sqlite3_prepare_v2(db, sql, -1, &s, NULL));
	CHECK_EQ(sqlite3_step(s), SQLITE_ROW);
	long long n = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return n;
}

static void text(sqlite3 *db, const char *sql, char *out, size_t len)
{
	sqlite3_stmt *s;
	SQ_CHECK(db, sqlite3_prepare_v2(db, sql, -1, &s, NULL));
	CHECK_EQ(sqlite3_step(s), SQLITE_ROW);
	snprintf(out, len, "%s", (const char *)sqlite3_column_text(s, 0));
	sqlite3_finalize(s);
}

int main(void)
{
	t_dir();
	char path[4200];
	snprintf(path, sizeof(path), "%s", t_path("t.db")); /* t_path's buffer is shared */
	sqlite3 *db = sq_open_vfs(path, "atomio", 0);
	SQ_CHECK(db, sqlite3_exec(db, "PRAGMA journal_mode=MEMORY; CREATE TABLE t(x); INSERT INTO t VALUES(1)", 0, 0, 0));
	char st[256];
	text(db, "PRAGMA atomio_stats", st, sizeof(st));
	printf("parent before the fork: %s\n", st);
	CHECK(strstr(st, "writer=1 commits=2 "));
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		sqlite3 *c = sq_open_vfs(path, "atomio", 0);
		sqlite3_busy_timeout(c, 3000);
		CHECK_EQ(one(c, "SELECT count(*) FROM t"), 1);
		SQ_CHECK(c, sqlite3_exec(c, "PRAGMA journal_mode=MEMORY; INSERT INTO t VALUES(2)", 0, 0, 0));
		text(c, "PRAGMA atomio_stats", st, sizeof(st));
		printf("child after its write: %s\n", st);
		/* the store's counters are the store's, every process's: one
		 * commit more than the parent had made */
		CHECK(strstr(st, "writer=1 commits=3 "));
		SQ_CHECK(c, sqlite3_close(c));
		/* the connection inherited from the parent: closed, nothing else */
		sqlite3_close(db);
		fflush(stdout);
		_exit(0);
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	SQ_CHECK(db, sqlite3_exec(db, "INSERT INTO t VALUES(3)", 0, 0, 0));
	char rows[64];
	text(db, "SELECT group_concat(x) FROM (SELECT x FROM t ORDER BY x)", rows, sizeof(rows));
	CHECK(!strcmp(rows, "1,2,3"));
	SQ_CHECK(db, sqlite3_close(db));
	/* forks while another thread opens and closes stores */
	pthread_t th;
	CHECK_OK(pthread_create(&th, NULL, opener, NULL));
	for (int i = 0; i < 200; i++) {
		pid_t q = fork();
		if (q == 0)
			_exit(0);
		CHECK(waitpid(q, &ws, 0) == q && WIFEXITED(ws));
		usleep(500);
	}
	stop_opener = 1;
	CHECK_OK(pthread_join(th, NULL));
	printf("200 forks while another thread opened and closed stores: none hung\n");
	db = sq_open_vfs(path, "atomio", 0);
	text(db, "SELECT group_concat(x) FROM (SELECT x FROM t ORDER BY x)", rows, sizeof(rows));
	char ic[64];
	text(db, "PRAGMA integrity_check", ic, sizeof(ic));
	printf("reopened: rows %s, integrity %s\n", rows, ic);
	CHECK(!strcmp(rows, "1,2,3") && !strcmp(ic, "ok"));
	SQ_CHECK(db, sqlite3_close(db));
	return 0;
}
