/*
 * PRAGMA synchronous through the VFS (issue 37, docs/SQLITE.md "synchronous"):
 * at NORMAL and OFF each transaction of one database is one lazy group
 * (atomio_tx_commit_lazy): no device flush in the commit, visible at once to
 * a connection of another process, durable at the next durable commit or
 * close; at FULL (SQLite's default in Debian's build) a commit is durable and
 * home when it returns, as before.
 *
 * The store's lazy delay is 60 s (atomio_lazy_ms=60000), so that nothing
 * flushes by time during the test.  Checks, each against the store's
 * log_syncs (store-wide) and the change counter the FILE holds (bytes 24..27
 * of page 1, read with pread, bypassing atomio):
 *  1. NORMAL: 40 transactions cost no log sync, the file keeps its old
 *     counter, SQLite sees all 40 rows.  (Before: 40 log syncs.)
 *  2. A child process opens the database through the VFS and reads all 40
 *     rows at once; its read (the VFS's settle, atomio_settle) flushes
 *     nothing.  (atomio_settle that flushed lazy groups: +1 log sync.)
 *  3. FULL: one transaction syncs the log and leaves the file with SQLite's
 *     counter when it returns (earlier lazy groups before it).
 *  4. OFF is lazy too; PRAGMA synchronous without a value changes nothing.
 *  5. URI atomio_synchronous=normal: lazy while SQLite itself says FULL.
 *  6. ATTACH: a COMMIT over two databases is durable at NORMAL (one group,
 *     checkpointed).
 *  7. The last close makes everything durable and home.
 *  9. The diff's base cache (group.c, BASE CACHE) follows this process's
 *     commits only while no other process commits: a row set to 'x' here,
 *     'y' by another process, 'x' here again (all lazy) reads 'x', also
 *     after a reopen.  (Mutant bcnochain, the chain kept across the other
 *     process's commit: the page's diff against the stale 'x' is empty,
 *     and the row reads 'y'.)
 * 10. A writer process that dies (SIGKILL) right after lazy commits loses
 *     nothing while another process of the store lives: this process reads
 *     them at once, and its close (the last of the store) makes them
 *     durable: the file has them after it.
 *  8. A failed flush (the log's writes fail with EIO after a lazy commit;
 *     delay 20 ms) surfaces as SQLITE_IOERR at the next COMMIT, never
 *     silently (a child process: its store is failed).
 */
#include <signal.h>
#include <sys/wait.h>

#include "sq_t.h"
#include "sys.h"

static const char *path, *path2;

static uint32_t file_counter(const char *p)
{
	int fd = open(p, O_RDONLY);
	CHECK(fd >= 0);
	uint8_t h[28];
	CHECK_EQ(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	return (uint32_t)h[24] << 24 | (uint32_t)h[25] << 16 | (uint32_t)h[26] << 8 | h[27];
}

/* SQLite's change counter as the connection sees it (through the VFS). */
static uint32_t sq_counter(sqlite3 *db)
{
	sqlite3_file *f = NULL;
	SQ_CHECK(db, sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &f));
	uint8_t h[28];
	SQ_CHECK(db, f->pMethods->xRead(f, h, sizeof(h), 0));
	return (uint32_t)h[24] << 24 | (uint32_t)h[25] << 16 | (uint32_t)h[26] << 8 | h[27];
}

static sqlite3 *open_uri(const char *p, const char *params)
{
	char uri[4400];
	sqlite3 *db = NULL;
	snprintf(uri, sizeof(uri), "file:%s?atomio_lazy_ms=60000%s", p, params);
	CHECK_EQ(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, "atomio"),
		 SQLITE_OK);
	sqlite3_busy_timeout(db, 10000);
	return db;
}

static void inserts(sqlite3 *db, int n)
{
	for (int i = 0; i < n; i++)
		sq_ok(db, "INSERT INTO t VALUES(randomblob(300))");
}

/* 2: another process sees the lazy commits at once, and its read flushes
 * nothing (the parent checks log_syncs while this child still has the
 * store open: its close would not flush either, having committed nothing). */
static void reader_child(int in, int out, long long rows)
{
	sqlite3 *db = open_uri(path, "");
	KCHECK(sq_int(db, "SELECT count(*) FROM t") == rows);
	char c = 'r';
	KCHECK(write(out, &c, 1) == 1);
	KCHECK(read(in, &c, 1) == 1);
	KCHECK(sqlite3_close(db) == SQLITE_OK);
	_exit(0);
}

static void check_reader(sqlite3 *db, long long rows)
{
	long long syncs = sq_stat(db, "log_syncs");
	int rd, wr;
	pid_t pid = t_fork_piped(&rd, &wr);
	if (pid == 0)
		reader_child(rd, wr, rows);
	char c;
	CHECK_EQ(read(rd, &c, 1), 1);
	CHECK_EQ(sq_stat(db, "log_syncs"), syncs);
	CHECK_EQ(write(wr, "g", 1), 1);
	t_child_ok(pid);
	close(wr);
	close(rd);
}

/* 9: another process's commit between two of ours. */
/* It keeps the store open until told (its close would flush every lazy
 * group, and the next commit here would begin a new chain). */
static void other_writer(int in, int out)
{
	sqlite3 *db = open_uri(path2, "");
	sq_ok(db, "PRAGMA synchronous=NORMAL; UPDATE r SET v = 'y'");
	char c = 'w';
	KCHECK(write(out, &c, 1) == 1);
	KCHECK(read(in, &c, 1) == 1);
	KCHECK(sqlite3_close(db) == SQLITE_OK);
	_exit(0);
}

static void check_chain(void)
{
	sqlite3 *db = open_uri(path2, "");
	sq_ok(db, "PRAGMA synchronous=NORMAL; CREATE TABLE r(v); INSERT INTO r VALUES('o')");
	sq_ok(db, "UPDATE r SET v = 'x'"); /* lazy: the chain begins (or goes on) */
	int rd, wr;
	pid_t pid = t_fork_piped(&rd, &wr);
	if (pid == 0)
		other_writer(rd, wr);
	char v[8];
	CHECK_EQ(read(rd, v, 1), 1);
	sq_text(db, "SELECT v FROM r", v, sizeof(v));
	CHECK(!strcmp(v, "y"));
	sq_ok(db, "UPDATE r SET v = 'x'");
	sq_text(db, "SELECT v FROM r", v, sizeof(v));
	CHECK(!strcmp(v, "x"));
	CHECK_EQ(write(wr, "g", 1), 1);
	t_child_ok(pid);
	close(wr);
	close(rd);
	CHECK_EQ(sqlite3_close(db), SQLITE_OK);
	db = open_uri(path2, "");
	sq_text(db, "SELECT v FROM r", v, sizeof(v));
	if (strcmp(v, "x")) {
		fprintf(stderr, "after a reopen the row reads '%s', not 'x'\n", v);
		exit(1);
	}
	sq_integrity(db);
	CHECK_EQ(sqlite3_close(db), SQLITE_OK);
}

/* 10: lazy commits, then killed with its store open. */
static void dying_writer(const char *p3)
{
	sqlite3 *db = open_uri(p3, "");
	sq_ok(db, "PRAGMA synchronous=NORMAL");
	inserts(db, 5);
	kill(getpid(), SIGKILL);
	_exit(3);
}

static void check_death(void)
{
	const char *p3 = t_path("death.db");
	char p3c[4200];
	snprintf(p3c, sizeof(p3c), "%s", p3); /* t_path's buffer is shared */
	sqlite3 *db = open_uri(p3c, "");
	sq_ok(db, "CREATE TABLE t(x)"); /* FULL: the store is ours too */
	uint32_t c0 = file_counter(p3c);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		dying_writer(p3c);
	int ws;
	CHECK_EQ(waitpid(pid, &ws, 0), pid);
	CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
	CHECK_EQ(file_counter(p3c), c0); /* lazy: not home */
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 5);
	CHECK_EQ(sqlite3_close(db), SQLITE_OK);
	CHECK_EQ(file_counter(p3c), c0 + 5);
	db = open_uri(p3c, "");
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 5);
	sq_integrity(db);
	CHECK_EQ(sqlite3_close(db), SQLITE_OK);
}

/* 8: every write of the store fails from the switch on (the flush's). */
static int fail_log = 0;
static struct atomio_sysops eio_ops;
static ssize_t eio_pwritev(int fd, const struct iovec *iov, int n, off_t off, int fl)
{
	if (__atomic_load_n(&fail_log, __ATOMIC_SEQ_CST))
		return -EIO;
	return atomio_sys_linux.pwritev(fd, iov, n, off, fl);
}

static void failing_child(void)
{
	const char *p3 = t_path("fail.db");
	char uri[4400];
	sqlite3 *db = NULL;
	snprintf(uri, sizeof(uri), "file:%s?atomio_lazy_ms=20", p3);
	KCHECK(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, "atomio") ==
	       SQLITE_OK);
	sqlite3_busy_timeout(db, 10000);
	sq_ok(db, "CREATE TABLE t(x)");
	sq_ok(db, "PRAGMA synchronous=NORMAL");
	sq_ok(db, "INSERT INTO t VALUES(1)"); /* lazy: fine so far */
	__atomic_store_n(&fail_log, 1, __ATOMIC_SEQ_CST);
	sq_ok(db, "INSERT INTO t VALUES(2)"); /* lazy: committed, flushed later */
	usleep(300000);                       /* the delay ran out: the flush failed */
	int rc = sq_exec(db, "INSERT INTO t VALUES(3)");
	KCHECK((rc & 0xff) == SQLITE_IOERR);
	sqlite3_close(db);
	_exit(0);
}

int main(void)
{
	path = t_path("sync.db");
	path2 = t_path("sync2.db");
	sq_register();
	sqlite3 *db = open_uri(path, "");
	CHECK_EQ(sq_int(db, "PRAGMA synchronous"), 2); /* Debian's default: FULL */
	sq_ok(db, "CREATE TABLE t(x)");
	/* 1 */
	sq_ok(db, "PRAGMA synchronous=NORMAL");
	uint32_t c0 = file_counter(path);
	long long s0 = sq_stat(db, "log_syncs");
	inserts(db, 40);
	long long s1 = sq_stat(db, "log_syncs");
	printf("NORMAL: 40 commits, %lld log syncs\n", s1 - s0);
	CHECK_EQ(s1 - s0, 0);
	CHECK_EQ(file_counter(path), c0);
	CHECK_EQ(sq_counter(db), c0 + 40);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 40);
	/* 2 */
	check_reader(db, 40);
	CHECK_EQ(file_counter(path), c0);
	/* 3 */
	sq_ok(db, "PRAGMA synchronous=FULL");
	inserts(db, 1);
	CHECK(sq_stat(db, "log_syncs") > s1);
	CHECK_EQ(file_counter(path), c0 + 41);
	CHECK_EQ(sq_counter(db), c0 + 41);
	/* 4 */
	sq_ok(db, "PRAGMA synchronous=OFF");
	CHECK_EQ(sq_int(db, "PRAGMA synchronous"), 0);
	s1 = sq_stat(db, "log_syncs");
	inserts(db, 10);
	CHECK_EQ(sq_stat(db, "log_syncs"), s1);
	CHECK_EQ(file_counter(path), c0 + 41);
	/* 5 */
	sqlite3 *db2 = open_uri(path, "&atomio_synchronous=normal");
	CHECK_EQ(sq_int(db2, "PRAGMA synchronous"), 2);
	inserts(db2, 5);
	CHECK_EQ(sq_stat(db, "log_syncs"), s1);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 56);
	CHECK_EQ(file_counter(path), c0 + 41);
	CHECK_EQ(sqlite3_close(db2), SQLITE_OK);
	/* 6 */
	char sql[4400];
	sq_ok(db, "PRAGMA synchronous=NORMAL");
	snprintf(sql, sizeof(sql), "ATTACH 'file:%s?atomio_lazy_ms=60000' AS b", path2);
	sq_ok(db, sql);
	sq_ok(db, "PRAGMA b.synchronous=NORMAL; CREATE TABLE b.u(y)");
	s1 = sq_stat(db, "log_syncs");
	sq_ok(db, "BEGIN; INSERT INTO t VALUES(1); INSERT INTO b.u VALUES(1); COMMIT");
	CHECK(sq_stat(db, "log_syncs") > s1);
	CHECK_EQ(file_counter(path), c0 + 57);
	sq_ok(db, "DETACH b");
	/* 7 */
	inserts(db, 3);
	CHECK_EQ(file_counter(path), c0 + 57);
	CHECK_EQ(sqlite3_close(db), SQLITE_OK);
	CHECK_EQ(file_counter(path), c0 + 60);
	db = open_uri(path, "");
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 60);
	sq_integrity(db);
	CHECK_EQ(sqlite3_close(db), SQLITE_OK);
	/* 9 */
	check_chain();
	/* 10 */
	check_death();
	/* 8 */
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		eio_ops = atomio_sys_linux;
		eio_ops.name = "t_sqlite_syncnormal eio";
		eio_ops.pwritev = eio_pwritev;
		eio_ops.uring_init = NULL; /* every log write through pwritev */
		eio_ops.uring_enter = NULL;
		eio_ops.uring_exit = NULL;
		atomio_sys_set(&eio_ops);
		failing_child();
	}
	t_child_ok(pid);
	printf("ok\n");
	return 0;
}
