/* A transaction over ATTACHed databases either commits whole or its COMMIT
 * returns an error, with nothing of it in any database (issue 35, 1 and 3).
 *
 * Each case: fresh databases with a table each, BEGIN, 5,000 rows of
 * randomblob(1000) into each, COMMIT; then every database reopened on its
 * own: all hold 5,000 rows and the COMMIT returned SQLITE_OK, or all hold
 * none and it returned an error.  The transaction (10 MB over two
 * databases) is larger than the log a small database gets (8 MiB), though
 * each database's part fits its own.
 *  - xdelete: both through the VFS, its default mode (SQLite's
 *    super-journal path: the result of phase two is ignored there);
 *  - xmemory: the same in journal_mode=MEMORY (no super-journal);
 *  - xheld: as xdelete, with another process holding the first
 *    database's store open, so that its log cannot grow: the COMMIT must
 *    fail, nothing written (it returned SQLITE_OK and the rows were gone);
 *  - unixmain: the main database through the unix VFS, two ATTACHed
 *    through the VFS (the super-journal is the unix VFS's), the second's
 *    store held by another process: the two committed after the
 *    super-journal was deleted, their failure ignored, the main database
 *    alone kept its rows;
 *  - xwal: a and b through the VFS in DELETE mode, c through the VFS in
 *    WAL, a's store held (the exerciser's case: such a COMMIT failed with a
 *    disk I/O error after the WAL database had committed in phase one):
 *    the super-journal names c's journal, which is not one in memory, so
 *    it goes to disk and a and b commit as under the unix VFS: each its
 *    own group at its phase one, after its journal (naming the
 *    super-journal) is on disk, each checked against its own log at its
 *    writes (which a's held log does not change): COMMIT ok, all rows
 *    everywhere.  (A failure at a's or b's phase one after the WAL
 *    database committed is SQLite's own order, as under the unix VFS:
 *    WAL commits in phase one, and SQLite promises no atomicity across a
 *    WAL database.);
 *  - unixcrash: main through the unix VFS (wrapped to die right before,
 *    then right after deleting the super-journal), one ATTACHed through
 *    the VFS: neither, then both (the VFS's database committed after the
 *    deletion, so a death right after it left the main database alone
 *    with the transaction). */
#include <stdbool.h>

#include "sq_t.h"

#define ROWS 5000

static char pa[4200], pb[4200], pc[4200];
static const char *g_cmode; /* c's journal mode, if not the others' */

static void fresh(void)
{
	const char *p[] = {pa, pb, pc};
	for (int i = 0; i < 3; i++) {
		char j[4300];
		sq_remove_db(p[i]);
		snprintf(j, sizeof(j), "%s-journal", p[i]);
		unlink(j);
	}
}

/* db made with a table t, through vfs (NULL: unix) */
static void make(const char *path, const char *vfs)
{
	sqlite3 *db = sq_open_vfs(path, vfs, 0);
	sq_ok(db, "CREATE TABLE t(x)");
	SQ_CHECK(db, sqlite3_close(db));
}

static long long count(const char *path, const char *vfs)
{
	sqlite3 *db = sq_open_vfs(path, vfs, 0);
	sqlite3_busy_timeout(db, 5000);
	long long n = sq_int(db, "SELECT count(*) FROM t");
	sq_integrity(db);
	SQ_CHECK(db, sqlite3_close(db));
	return n;
}

/* The transaction over main (through mvfs) and the ATTACHed b (and c):
 * returns COMMIT's result. */
static int transaction(const char *mvfs, const char *mode, bool three)
{
	sqlite3 *db = sq_open_vfs(pa, mvfs, 0);
	sqlite3_busy_timeout(db, 5000);
	char sql[9000];
	snprintf(sql, sizeof(sql), "PRAGMA journal_mode=%s; PRAGMA synchronous=FULL", mode);
	sq_ok(db, sql);
	snprintf(sql, sizeof(sql), "ATTACH 'file:%s?vfs=atomio' AS b", pb);
	sq_ok(db, sql);
	snprintf(sql, sizeof(sql), "PRAGMA b.journal_mode=%s", mode);
	sq_ok(db, sql);
	if (three) {
		snprintf(sql, sizeof(sql), "ATTACH 'file:%s?vfs=atomio' AS c", pc);
		sq_ok(db, sql);
		snprintf(sql, sizeof(sql), "PRAGMA c.journal_mode=%s", g_cmode ? g_cmode : mode);
		sq_ok(db, sql);
	}
	sq_ok(db, "BEGIN");
	sq_ok(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) "
		  "INSERT INTO main.t SELECT randomblob(1000) FROM n");
	sq_ok(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) "
		  "INSERT INTO b.t SELECT randomblob(1000) FROM n");
	if (three)
		sq_ok(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) "
			  "INSERT INTO c.t SELECT randomblob(1000) FROM n");
	int rc = sqlite3_exec(db, "COMMIT", 0, 0, 0);
	if (rc != SQLITE_OK) {
		printf("  COMMIT: %s\n", sqlite3_errmsg(db));
		sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
	}
	sqlite3_close(db);
	return rc;
}

static int failures;

/* "xunix": the unix VFS with an xDelete that exits the process right
 * before (1) or right after (2) deleting a super-journal. */
static void unix_crash(void)
{
	sq_crash_vfs("unix", "xunix");
	for (int at = 1; at <= 2; at++) {
		char sql[9000];
		fresh();
		sqlite3 *db = sq_open_vfs(pa, NULL, 0);
		snprintf(sql, sizeof(sql), "ATTACH 'file:%s?vfs=atomio' AS b; BEGIN; CREATE TABLE main.c(n);"
			 "INSERT INTO main.c VALUES(0); CREATE TABLE b.c(n); INSERT INTO b.c VALUES(0); COMMIT", pb);
		sq_ok(db, sql);
		sqlite3_close(db);
		fflush(stdout);
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			db = sq_open_vfs(pa, "xunix", 0);
			snprintf(sql, sizeof(sql), "PRAGMA synchronous=FULL; ATTACH 'file:%s?vfs=atomio' AS b;"
				 "PRAGMA b.synchronous=FULL", pb);
			sq_ok(db, sql);
			sq_crash_at(at);
			sq_ok(db, "BEGIN; UPDATE main.c SET n = 1; UPDATE b.c SET n = 1; COMMIT");
			_exit(3); /* the crash did not happen */
		}
		int st;
		CHECK_EQ(waitpid(pid, &st, 0), pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		sqlite3 *x = sq_open_vfs(pb, "atomio", 0);
		long long nb = sq_int(x, "SELECT n FROM c");
		sq_integrity(x);
		sqlite3_close(x);
		x = sq_open_vfs(pa, NULL, 0);
		long long na = sq_int(x, "SELECT n FROM c");
		sq_integrity(x);
		sqlite3_close(x);
		bool ok = na == nb && na == at - 1;
		printf("unixcrash: died %s the super-journal's deletion: main %lld, b %lld: %s\n",
		       at == 1 ? "before" : "after", na, nb, ok ? "ok" : "FAIL");
		fflush(stdout);
		if (!ok)
			failures++;
	}
}

/* All or nothing, and COMMIT said which. */
static void verdict(const char *name, int rc, const char *mvfs, bool three, int want_rc)
{
	long long a = count(pa, mvfs), b = count(pb, "atomio"), c = three ? count(pc, "atomio") : b;
	bool ok = rc == SQLITE_OK ? a == ROWS && b == ROWS && c == ROWS : a == 0 && b == 0 && c == 0;
	if (want_rc >= 0 && rc != want_rc)
		ok = false;
	char cs[32] = "";
	if (three)
		snprintf(cs, sizeof(cs), " %lld", c);
	printf("%s: COMMIT %s, rows %lld %lld%s: %s\n", name, rc == SQLITE_OK ? "ok" : sqlite3_errstr(rc), a, b, cs,
	       ok ? "ok" : "FAIL");
	fflush(stdout);
	if (!ok)
		failures++;
}

int main(void)
{
	t_dir();
	snprintf(pa, sizeof(pa), "%s", t_path("a.db"));
	snprintf(pb, sizeof(pb), "%s", t_path("b.db"));
	snprintf(pc, sizeof(pc), "%s", t_path("c.db"));
	sq_register();

	/* The log grows for the set: it commits. */
	fresh();
	make(pa, "atomio");
	make(pb, "atomio");
	verdict("xdelete", transaction("atomio", "DELETE", false), "atomio", false, SQLITE_OK);

	fresh();
	make(pa, "atomio");
	make(pb, "atomio");
	verdict("xmemory", transaction("atomio", "MEMORY", false), "atomio", false, SQLITE_OK);

	/* The log cannot grow: the COMMIT fails, nothing is written. */
	fresh();
	make(pa, "atomio");
	make(pb, "atomio");
	int go;
	pid_t h = sq_holder(pa, NULL, &go);
	int rc = transaction("atomio", "DELETE", false);
	sq_unhold(h, go);
	verdict("xheld", rc, "atomio", false, SQLITE_IOERR);
	if (rc == SQLITE_OK) {
		printf("xheld: a log that cannot grow committed the set\n");
		failures++;
	}

	/* unix main, two of ours: each commits at its own sync, before the
	 * super-journal is deleted (their logs fit each one's part). */
	fresh();
	make(pa, NULL);
	make(pb, "atomio");
	make(pc, "atomio");
	h = sq_holder(pb, pc, &go);
	rc = transaction(NULL, "DELETE", true);
	sq_unhold(h, go);
	verdict("unixmain", rc, NULL, true, -1);

	/* Two of ours in a rollback mode and one in WAL (the exerciser's
	 * case: the COMMIT failed with a disk I/O error after the WAL
	 * database had committed), the first one's log held, so that the set
	 * does not fit it: all of it or none. */
	fresh();
	make(pa, "atomio");
	make(pb, "atomio");
	make(pc, "atomio");
	h = sq_holder(pa, NULL, &go);
	g_cmode = "WAL";
	rc = transaction("atomio", "DELETE", true);
	g_cmode = NULL;
	sq_unhold(h, go);
	verdict("xwal", rc, "atomio", true, -1);

	unix_crash();

	fresh();
	return failures ? 1 : 0;
}
