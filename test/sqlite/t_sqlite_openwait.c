/* Another process opening the database does not make a reader without a
 * busy timeout fail with SQLITE_BUSY (issue 35, 8: "the open's exclusive
 * lock").  A connection's open through the VFS holds the exclusive lock
 * for a moment to look at the log (and recover it if it must); the unix
 * VFS takes no lock at an open, so a reader there is never refused for
 * one.  Here the opener (a child process) is held inside that moment: its
 * system-call table's open of the log tells the parent and sleeps 100 ms;
 * the parent, with no busy timeout, reads meanwhile.  Before the fix the
 * read failed with "database is locked"; now it waits for the opener. */
#include <stdbool.h>

#include "sq_t.h"
#include "sys.h"

static const struct atomio_sysops *g_real;
static struct atomio_sysops g_ops;
static int g_tell = -1;

static int slow_open(const char *path, int flags, mode_t mode)
{
	size_t n = strlen(path);
	if (g_tell >= 0 && n > 7 && !strcmp(path + n - 7, "-atomio")) {
		char c = 'p';
		if (write(g_tell, &c, 1) != 1)
			_exit(3);
		close(g_tell);
		g_tell = -1;
		usleep(100000);
	}
	return g_real->open(path, flags, mode);
}

int main(void)
{
	t_dir();
	char path[4200];
	snprintf(path, sizeof(path), "%s", t_path("o.db"));
	sqlite3 *db = sq_open_default(path, 1000);
	sq_ok(db, "CREATE TABLE t(x); INSERT INTO t VALUES(1)");
	sqlite3_close(db);

	int p[2];
	CHECK_OK(pipe(p));
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		g_real = atomio_sys;
		g_ops = *atomio_sys;
		g_ops.name = "slow";
		g_ops.open = slow_open;
		g_tell = p[1];
		atomio_sys_set(&g_ops);
		sqlite3 *o = sq_open_vfs(path, "atomio", 0);
		sqlite3_close(o);
		_exit(0);
	}
	close(p[1]);
	char c;
	CHECK_EQ(read(p[0], &c, 1), 1);
	close(p[0]);
	/* the opener holds its lock now: read, no busy timeout */
	db = sq_open_vfs(path, "atomio", 0);
	sqlite3_stmt *s;
	SQ_CHECK(db, sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &s, NULL));
	int rc = sqlite3_step(s);
	long long n = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
	sqlite3_finalize(s);
	printf("a read without a busy timeout while another process opens the database: %s\n",
	       rc == SQLITE_ROW ? "ok" : sqlite3_errmsg(db));
	sqlite3_close(db);
	int ws;
	CHECK(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	return rc == SQLITE_ROW && n == 1 ? 0 : 1;
}
