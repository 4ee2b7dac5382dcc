/* A forked child that closes a connection it inherited leaves the parent's
 * locks, files and stores alone, as under the unix VFS (issue 35, 2).
 *  - WAL: the parent inserts a row, forks, the child closes the inherited
 *    connection and exits; the parent's -wal is still there, the parent
 *    inserts a second row, and another process sees both (the child's
 *    close took EXCLUSIVE through the shared lock descriptor, checkpointed
 *    and deleted the WAL: the other process saw 1 row);
 *  - the default mode: the parent holds BEGIN IMMEDIATE across the fork,
 *    the child closes the inherited connection; another process's BEGIN
 *    IMMEDIATE is still refused (the child's close unlocked the parent);
 *  - the child's commit through an inherited connection fails, the
 *    parent's transaction unharmed. */
#include <stdbool.h>

#include "sq_t.h"

static char path[4200], path2[4200];

/* A process of its own: rows of t in path, as its exit status. */
static int rows_elsewhere(const char *p)
{
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		sqlite3 *c = sq_open_vfs(p, "atomio", 0);
		sqlite3_busy_timeout(c, 5000);
		long long n = sq_int(c, "SELECT count(*) FROM t");
		sqlite3_close(c);
		_exit((int)n);
	}
	int ws;
	CHECK(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws));
	return WEXITSTATUS(ws);
}

/* A child that does what(db) with the inherited connection and exits. */
static void child_does(sqlite3 *db, int (*what)(sqlite3 *))
{
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(what(db));
	int ws;
	CHECK(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws));
	CHECK_EQ(WEXITSTATUS(ws), 0);
}

static int close_it(sqlite3 *db)
{
	sqlite3_close(db);
	return 0;
}

/* The parent's transaction committed through the inherited connection:
 * refused. */
static int use_it(sqlite3 *db)
{
	int rc = sqlite3_exec(db, "INSERT INTO t VALUES(99); COMMIT", 0, 0, 0);
	printf("child: a commit through the inherited connection: %s\n", sqlite3_errstr(rc));
	fflush(stdout);
	return rc == SQLITE_OK;
}

int main(void)
{
	t_dir();
	snprintf(path, sizeof(path), "%s", t_path("w.db"));
	snprintf(path2, sizeof(path2), "%s", t_path("r.db"));
	char wal[4300];
	snprintf(wal, sizeof(wal), "%s-wal", path);

	sqlite3 *db = sq_open_vfs(path, "atomio", 0);
	sq_ok(db, "PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES(1)");
	child_does(db, close_it);
	bool has_wal = access(wal, F_OK) == 0;
	sq_ok(db, "INSERT INTO t VALUES(2)");
	int n = rows_elsewhere(path);
	printf("WAL: after the child closed its inherited connection: -wal %s; another process sees %d rows\n",
	       has_wal ? "there" : "gone", n);
	int failures = !has_wal || n != 2;
	SQ_CHECK(db, sqlite3_close(db));

	db = sq_open_vfs(path2, "atomio", 0);
	sq_ok(db, "CREATE TABLE t(x); INSERT INTO t VALUES(1)");
	sq_ok(db, "BEGIN IMMEDIATE");
	child_does(db, close_it);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		sqlite3 *c = sq_open_vfs(path2, "atomio", 0);
		int rc = sqlite3_exec(c, "BEGIN IMMEDIATE", 0, 0, 0);
		sqlite3_close(c);
		_exit(rc == SQLITE_BUSY ? 0 : 1);
	}
	int ws;
	CHECK(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws));
	printf("default mode: another process's BEGIN IMMEDIATE beside the parent's: %s\n",
	       WEXITSTATUS(ws) == 0 ? "busy" : "GRANTED");
	failures += WEXITSTATUS(ws) != 0;
	sq_ok(db, "INSERT INTO t VALUES(2)");
	child_does(db, use_it);
	sq_ok(db, "COMMIT");
	n = rows_elsewhere(path2);
	printf("default mode: another process sees %d rows\n", n);
	failures += n != 2;
	sq_integrity(db);
	SQ_CHECK(db, sqlite3_close(db));
	return failures ? 1 : 0;
}
