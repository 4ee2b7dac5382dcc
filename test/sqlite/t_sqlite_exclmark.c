/* A transaction over two databases whose checkpoint fails after its group
 * was committed, in locking_mode=EXCLUSIVE, must not let a later
 * transaction's bytes be reverted by recovery (issue 35, 8).
 *
 * a.db and b.db through the VFS, a's store held by another process (so that
 * the store reopened after the failure is joined, not recovered: the group
 * stays live in a's log).  A child, in locking_mode=EXCLUSIVE, with b
 * ATTACHed: BEGIN; a.t and b.t set to 1; COMMIT with every sync of the two
 * database files failing (the checkpoint after the set's group: the COMMIT
 * fails, the group is in a's log, the markers stay); then b.t set to 2
 * alone and COMMITted (b's own log); then the child dies and so does the
 * holder.  Reopened, b.t must be 2 if that COMMIT returned SQLITE_OK (it
 * was 1: recovery from the marker replayed b's log, then a's, whose group
 * put b back to 1).  Failing COMMIT of b.t = 2 would be right too (nothing
 * written, b.t not 2). */
#include <signal.h>
#include <sys/stat.h>

#include "sq_t.h"
#include "sys.h"

static char pa[4000], pb[4000];
static struct atomio_sysops g_ops;
static const struct atomio_sysops *g_real;
static ino_t g_ino[3]; /* a.db, b.db, a's log */
/* 1: armed; 2: a's log was written or synced since (the set's group is
 * committed), and every sync of a.db or b.db fails */
static volatile int g_fail;

static int which(int fd)
{
	struct stat sb;
	for (int i = 0; g_real->fstat(fd, &sb) == 0 && i < 3; i++)
		if (sb.st_ino == g_ino[i])
			return i;
	return -1;
}

static int fails(int fd)
{
	int w = which(fd);
	if (w == 2 && g_fail == 1)
		g_fail = 2;
	return g_fail == 2 && (w == 0 || w == 1);
}

static ssize_t see_pwritev(int fd, const struct iovec *iov, int n, off_t off, int rwf)
{
	if (g_fail == 1)
		fails(fd);
	return g_real->pwritev(fd, iov, n, off, rwf);
}
static int fail_fsync(int fd) { return fails(fd) ? -EIO : g_real->fsync(fd); }
static int fail_fdatasync(int fd) { return fails(fd) ? -EIO : g_real->fdatasync(fd); }

static ino_t ino(const char *p)
{
	struct stat sb;
	CHECK_OK(stat(p, &sb));
	return sb.st_ino;
}

/* The child: returns through its exit status what the second COMMIT said
 * (0 ok, 1 failed); 3: the first COMMIT did not fail after its group was
 * committed (no marker left). */
static void child(const char *mode)
{
	g_ino[0] = ino(pa);
	g_ino[1] = ino(pb);
	char lp[4100];
	snprintf(lp, sizeof(lp), "%s-atomio", pa);
	g_ino[2] = ino(lp);
	g_real = atomio_sys;
	g_ops = *atomio_sys;
	g_ops.name = "failsync";
	g_ops.fsync = fail_fsync;
	g_ops.fdatasync = fail_fdatasync;
	g_ops.pwritev = see_pwritev;
	atomio_sys_set(&g_ops);
	sqlite3 *db = sq_open_vfs(pa, "atomio", 0);
	char sql[9000];
	snprintf(sql, sizeof(sql), "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=%s;"
		 "ATTACH 'file:%s?vfs=atomio' AS b; PRAGMA b.journal_mode=%s", mode, pb, mode);
	sq_ok(db, sql);
	sq_ok(db, "BEGIN; UPDATE main.t SET x = 1; UPDATE b.t SET x = 1");
	g_fail = 1;
	int rc = sqlite3_exec(db, "COMMIT", 0, 0, 0);
	g_fail = 0;
	char mk[4100];
	snprintf(mk, sizeof(mk), "%s-atomio-group", pb);
	printf("  set COMMIT: %s, b's marker %s\n", sqlite3_errstr(rc), access(mk, F_OK) == 0 ? "stays" : "is gone");
	if (rc == SQLITE_OK || access(mk, F_OK) != 0)
		_exit(3); /* not the case under test */
	sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
	rc = sqlite3_exec(db, "UPDATE b.t SET x = 2", 0, 0, 0);
	printf("  b alone COMMIT: %s\n", sqlite3_errstr(rc));
	fflush(stdout);
	_exit(rc == SQLITE_OK ? 0 : 1); /* dies: nothing closed */
}

/* One case, the journals in mode: true if it passed. */
static bool one(const char *mode)
{
	const char *p[] = {pa, pb};
	for (int i = 0; i < 2; i++) {
		sq_remove_db(p[i]);
		sqlite3 *db = sq_open_vfs(p[i], "atomio", 0);
		sq_ok(db, "CREATE TABLE t(x); INSERT INTO t VALUES(0)");
		SQ_CHECK(db, sqlite3_close(db));
	}
	int go;
	pid_t h = sq_holder(pa, NULL, &go);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		child(mode);
	int ws;
	CHECK_EQ(waitpid(pid, &ws, 0), pid);
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) <= 1);
	bool second_ok = WEXITSTATUS(ws) == 0;
	kill(h, SIGKILL); /* a's store left by every process: recovered next */
	CHECK_EQ(waitpid(h, NULL, 0), h);
	close(go);

	sqlite3 *db = sq_open_vfs(pb, "atomio", 0);
	sqlite3_busy_timeout(db, 5000);
	long long x = sq_int(db, "SELECT x FROM t");
	sq_integrity(db);
	SQ_CHECK(db, sqlite3_close(db));
	bool ok = second_ok ? x == 2 : x != 2;
	printf("exclmark %s: b's later COMMIT %s, b.t after recovery %lld: %s\n", mode, second_ok ? "ok" : "failed",
	       x, ok ? "ok" : "FAIL");
	fflush(stdout);
	char mk[4100];
	for (int i = 0; i < 2; i++) {
		sq_remove_db(p[i]);
		snprintf(mk, sizeof(mk), "%s-atomio-group", p[i]);
		unlink(mk);
	}
	return ok;
}

int main(void)
{
	t_dir();
	snprintf(pa, sizeof(pa), "%s", t_path("a.db"));
	snprintf(pb, sizeof(pb), "%s", t_path("b.db"));
	sq_register();
	bool ok = one("DELETE");
	ok = one("MEMORY") && ok;
	return ok ? 0 : 1;
}
