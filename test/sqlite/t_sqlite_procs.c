/*
 * t_sqlite_procs: several processes and connections on one database.
 *
 * Transfers between rows keep sum(v) constant, so a reader that ever saw part
 * of a commit would see another sum.
 *  1. A writer process commits transfers while readers in other processes
 *     read in a loop, one through the plain unix VFS and one through atomio:
 *     every read sees the constant sum.  Meanwhile a second writer process
 *     commits its own transactions: the write lock is per transaction, the
 *     store changes hands between processes, busy handlers wait for it.
 *  1b. An idle writer (open, one commit, then nothing) does not keep another
 *     process from writing, not even one without a busy handler.
 *  1c. Four writer processes, 40 transactions each, counted in a row: every
 *     one commits (none lost, none twice), readers see the constant sum.
 *  2. Writers SIGKILLed at random moments, two at a time, while an atomio
 *     reader keeps reading: the reader (or the surviving writer) recovers the
 *     database when it finds a writer gone, and never sees a broken sum.
 *  3. Two connections of one process: the second is refused (SQLITE_BUSY)
 *     while the first holds a write transaction, and writes after it commits.
 *  3b. In a process that is not the writer yet: a write beside a read
 *     transaction of another connection is granted (RESERVED, as with the
 *     unix VFS, not an EXCLUSIVE lock at the first write), and its COMMIT
 *     waits for the reader (issue 17 item 3, SQLite's attach2).
 */
#include <signal.h>

#include "sq_t.h"

#define NROWS 500
#define TOTAL (NROWS * 1000LL)

static void transfers(sqlite3 *db, sqlite3_stmt *up, uint64_t seed, int pairs)
{
	for (int j = 0; j < pairs; j++) {
		uint64_t r = sq_mix(seed * 64 + (uint64_t)j);
		int a = (int)(r % NROWS) + 1, b = (int)((r >> 20) % NROWS) + 1;
		long long x = (long long)((r >> 40) % 100) + 1;
		sqlite3_bind_int64(up, 1, -x);
		sqlite3_bind_int(up, 2, a);
		if (sqlite3_step(up) != SQLITE_DONE)
			_exit(3);
		sqlite3_reset(up);
		sqlite3_bind_int64(up, 1, x);
		sqlite3_bind_int(up, 2, b);
		if (sqlite3_step(up) != SQLITE_DONE)
			_exit(3);
		sqlite3_reset(up);
	}
}

static volatile sig_atomic_t g_stop;
static void on_usr1(int sig) { (void)sig; g_stop = 1; }

/* Commit transfers until SIGUSR1 (then close cleanly) or SIGKILL; write one
 * byte to ready_fd after the first commit. */
/* The transfers' seed ($ATOMIO_SEED or 1) and the number of processes
 * spawned before this one, so that each writer has its own sequence. */
static uint64_t g_seed, g_spawned;

static void writer(const char *path, int ready_fd, int pairs)
{
	signal(SIGUSR1, on_usr1);
	sqlite3 *db = sq_open(path, 0);
	sqlite3_busy_timeout(db, 20000);
	sqlite3_stmt *up;
	SQ_CHECK(db, sqlite3_prepare_v2(db, "UPDATE acct SET v = v + ?1 WHERE id = ?2", -1, &up, 0));
	for (uint64_t i = (g_seed * 1000 + g_spawned) << 20; !g_stop; i++) {
		if (sq_exec(db, "BEGIN IMMEDIATE") != SQLITE_OK)
			_exit(5);
		transfers(db, up, i, pairs);
		if (sq_exec(db, "COMMIT") != SQLITE_OK)
			_exit(6);
		/* Rollback-mode locking lets a busy writer starve readers
		 * (SHARED is refused while it waits on PENDING): leave gaps. */
		usleep(300);
		if (ready_fd >= 0) {
			if (write(ready_fd, "r", 1) != 1)
				_exit(7);
			close(ready_fd);
			ready_fd = -1;
		}
	}
	sqlite3_finalize(up);
	sqlite3_close(db);
}

/* Read the sum until `secs` pass; exit 1 on a wrong sum, 2 if too few reads. */
static void reader(const char *path, const char *vfs, double secs)
{
	sqlite3 *db = sq_open_vfs(path, vfs, 0);
	sqlite3_busy_timeout(db, 20000);
	double end = sq_now() + secs;
	long reads = 0;
	while (sq_now() < end) {
		sqlite3_stmt *s;
		if (sqlite3_prepare_v2(db, "SELECT sum(v), count(*) FROM acct", -1, &s, 0) != SQLITE_OK)
			_exit(4);
		int rc = sqlite3_step(s);
		if (rc != SQLITE_ROW) {
			fprintf(stderr, "reader (%s): %s\n", vfs ? vfs : "unix", sqlite3_errmsg(db));
			_exit(4);
		}
		long long sum = sqlite3_column_int64(s, 0), n = sqlite3_column_int64(s, 1);
		sqlite3_finalize(s);
		if (sum != TOTAL || n != NROWS) {
			fprintf(stderr, "reader (%s) saw sum %lld over %lld rows\n", vfs ? vfs : "unix",
				sum, n);
			_exit(1);
		}
		reads++;
	}
	sqlite3_close(db);
	fprintf(stderr, "reader (%s): %ld consistent reads\n", vfs ? vfs : "unix", reads);
	_exit(reads >= 5 ? 0 : 2);
}

/* Commit `n` transactions (transfers and one count in ctr) while other
 * processes write: each waits in the busy handler for the store. */
static void counted_writer(const char *path, int n)
{
	sqlite3 *db = sq_open(path, 0);
	sqlite3_busy_timeout(db, 30000);
	sqlite3_stmt *up;
	SQ_CHECK(db, sqlite3_prepare_v2(db, "UPDATE acct SET v = v + ?1 WHERE id = ?2", -1, &up, 0));
	for (int i = 0; i < n; i++) {
		int rc = sq_exec(db, "BEGIN IMMEDIATE");
		if (rc != SQLITE_OK) {
			fprintf(stderr, "writer %d: BEGIN %d: %s\n", (int)getpid(), i, sqlite3_errmsg(db));
			_exit(5);
		}
		transfers(db, up, ((uint64_t)getpid() << 24) + (uint64_t)i, 3);
		if (sq_exec(db, "UPDATE ctr SET n = n + 1") != SQLITE_OK || sq_exec(db, "COMMIT") != SQLITE_OK) {
			fprintf(stderr, "writer %d: %s\n", (int)getpid(), sqlite3_errmsg(db));
			_exit(6);
		}
	}
	sqlite3_finalize(up);
	sqlite3_close(db);
	_exit(0);
}

/* One write with no busy handler at all: as with the unix VFS, it must not
 * be refused while the other writer is idle. */
static void impatient_writer(const char *path)
{
	sqlite3 *db = sq_open(path, 0);
	sqlite3_busy_timeout(db, 0);
	int rc = sq_exec(db, "UPDATE ctr SET n = n + 1");
	if (rc != SQLITE_OK) {
		fprintf(stderr, "impatient writer: %s\n", sqlite3_errmsg(db));
		_exit(1);
	}
	sqlite3_close(db);
	_exit(0);
}

/* One commit, then idle with the database open until killed. */
static void idle_writer(const char *path, int ready_fd)
{
	sqlite3 *db = sq_open(path, 0);
	sq_ok(db, "UPDATE ctr SET n = n + 1");
	if (sq_stat(db, "writer") != 1 || write(ready_fd, "r", 1) != 1)
		_exit(7);
	for (;;)
		pause();
}

static pid_t spawn(void (*fn)(void *), void *arg)
{
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	g_spawned++;
	return pid;
}

static void wait_ok(pid_t pid, const char *who)
{
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "%s failed (status 0x%x)\n", who, st);
		exit(1);
	}
}

static const char *g_path;
static int g_ready;
static void run_writer(void *a) { (void)a; writer(g_path, g_ready, 4); }
static void run_killed_writer(void *a) { (void)a; writer(g_path, -1, 32); }
static void run_reader_unix(void *a) { reader(g_path, NULL, *(double *)a); }
static void run_reader_atomio(void *a) { reader(g_path, "atomio", *(double *)a); }
static void run_counted(void *a) { counted_writer(g_path, *(int *)a); }
static void run_idle(void *a) { (void)a; idle_writer(g_path, g_ready); }
static void run_impatient(void *a) { (void)a; impatient_writer(g_path); }

/* 3b: connection a reads in a transaction, b writes beside it. */
static void write_beside_reader(const char *path)
{
	sqlite3 *a = sq_open(path, 0), *b = sq_open(path, 0);
	sqlite3_busy_timeout(b, 0);
	sq_ok(a, "BEGIN");
	long long v7 = sq_int(a, "SELECT v FROM acct WHERE id = 7");
	int rc = sq_exec(b, "BEGIN; UPDATE acct SET v = v + 2 WHERE id = 7; UPDATE acct SET v = v - 2 WHERE id = 8");
	if (rc != SQLITE_OK) {
		fprintf(stderr, "a write beside a read transaction: %s\n", sqlite3_errmsg(b));
		_exit(1);
	}
	CHECK_EQ(sq_exec(b, "COMMIT"), SQLITE_BUSY); /* the reader holds SHARED */
	CHECK_EQ(sq_int(a, "SELECT v FROM acct WHERE id = 7"), v7);
	sq_ok(a, "COMMIT");
	sq_ok(b, "COMMIT");
	CHECK_EQ(sq_int(a, "SELECT v FROM acct WHERE id = 7"), v7 + 2);
	sqlite3_close(a);
	sqlite3_close(b);
	_exit(0);
}
static void run_beside_reader(void *a) { (void)a; write_beside_reader(g_path); }

static long long ctr(const char *path)
{
	sqlite3 *db = sq_open(path, 0);
	long long n = sq_int(db, "SELECT n FROM ctr");
	sqlite3_close(db);
	return n;
}

static void check_sum(const char *path)
{
	sqlite3 *db = sq_open(path, 0);
	sq_integrity(db);
	CHECK_EQ(sq_int(db, "SELECT sum(v) FROM acct"), TOTAL);
	sqlite3_close(db);
}

int main(void)
{
	g_seed = t_seed(1);
	const char *path = t_path("procs.db");
	g_path = path;
	sqlite3 *db = sq_open(path, 8 << 20);
	sq_ok(db, "CREATE TABLE acct(id INTEGER PRIMARY KEY, v INTEGER NOT NULL, pad BLOB)");
	sq_ok(db, "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<500) "
		  "INSERT INTO acct SELECT i, 1000, zeroblob(300) FROM c");
	sq_ok(db, "CREATE TABLE ctr(n INTEGER); INSERT INTO ctr VALUES(0)");
	sqlite3_close(db);

	/* 1. live writer, two readers, one refused writer */
	double secs = 1.5;
	int rp[2];
	CHECK_OK(pipe(rp));
	g_ready = rp[1];
	pid_t w = spawn(run_writer, NULL);
	close(rp[1]);
	char c;
	CHECK_EQ(read(rp[0], &c, 1), 1); /* the writer has committed: it owns the store */
	close(rp[0]);
	g_ready = -1;
	pid_t r1 = spawn(run_reader_unix, &secs);
	pid_t r2 = spawn(run_reader_atomio, &secs);
	int twenty = 20;
	pid_t in = spawn(run_counted, &twenty);
	wait_ok(in, "the second writer");
	CHECK(kill(w, 0) == 0); /* the first one still writes */
	CHECK_EQ(ctr(path), 20);
	wait_ok(r1, "the unix-VFS reader");
	wait_ok(r2, "the atomio reader");
	CHECK_OK(kill(w, SIGUSR1));
	wait_ok(w, "the writer");
	check_sum(path);
	/* the writer has closed: this process may write now */
	db = sq_open(path, 0);
	sq_ok(db, "UPDATE acct SET v = v - 5 WHERE id = 1; UPDATE acct SET v = v + 5 WHERE id = 2");
	CHECK_EQ(sq_stat(db, "writer"), 1);
	sqlite3_close(db);

	/* 1b. an idle writer */
	CHECK_OK(pipe(rp));
	g_ready = rp[1];
	pid_t idle = spawn(run_idle, NULL);
	close(rp[1]);
	CHECK_EQ(read(rp[0], &c, 1), 1);
	close(rp[0]);
	g_ready = -1;
	wait_ok(spawn(run_impatient, NULL), "a writer without a busy handler beside an idle one");
	int ten = 10;
	wait_ok(spawn(run_counted, &ten), "a writer beside an idle one");
	CHECK_OK(kill(idle, SIGKILL));
	CHECK_EQ(waitpid(idle, NULL, 0), idle);
	CHECK_EQ(ctr(path), 32);

	/* 1c. many writers */
	int forty = T_SCALE(40);
	pid_t ws[4];
	pid_t rr = spawn(run_reader_atomio, &secs);
	for (int i = 0; i < 4; i++)
		ws[i] = spawn(run_counted, &forty);
	for (int i = 0; i < 4; i++)
		wait_ok(ws[i], "one of four writers");
	wait_ok(rr, "the reader beside four writers");
	CHECK_EQ(ctr(path), 32 + 4 * forty);
	check_sum(path);

	/* 2. writers killed under a reader's feet */
	int kills = T_SCALE(20);
	double rsecs = 60;
	pid_t r = spawn(run_reader_atomio, &rsecs);
	for (int i = 0; i < kills; i++) {
		pid_t k = spawn(run_killed_writer, NULL), k2 = spawn(run_killed_writer, NULL);
		struct timespec ts = {0, (long)(5000000 + sq_mix((uint64_t)i) % 60000000)};
		nanosleep(&ts, NULL);
		CHECK_OK(kill(k, SIGKILL));
		nanosleep(&ts, NULL); /* the other one goes on alone for a while */
		CHECK_OK(kill(k2, SIGKILL));
		int st;
		CHECK_EQ(waitpid(k, &st, 0), k);
		CHECK(WIFSIGNALED(st));
		CHECK_EQ(waitpid(k2, &st, 0), k2);
		CHECK(WIFSIGNALED(st));
	}
	CHECK_OK(kill(r, SIGTERM)); /* the reader exits 1 itself on a broken sum */
	int st;
	CHECK_EQ(waitpid(r, &st, 0), r);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
	check_sum(path);

	/* 3. two connections of one process */
	sqlite3 *a = sq_open(path, 0), *b = sq_open(path, 0);
	sqlite3_busy_timeout(b, 0);
	sq_ok(a, "BEGIN IMMEDIATE; UPDATE acct SET v = v + 1 WHERE id = 3");
	CHECK_EQ(sq_exec(b, "UPDATE acct SET v = v - 1 WHERE id = 4"), SQLITE_BUSY);
	CHECK_EQ(sq_int(b, "SELECT sum(v) FROM acct"), TOTAL);
	sq_ok(a, "UPDATE acct SET v = v - 1 WHERE id = 5; COMMIT");
	sq_ok(b, "UPDATE acct SET v = v - 1 WHERE id = 4; UPDATE acct SET v = v + 1 WHERE id = 6");
	CHECK_EQ(sq_int(a, "SELECT sum(v) FROM acct"), TOTAL);
	sqlite3_close(a);
	sqlite3_close(b);
	check_sum(path);

	/* 3b. a write beside a reader, in a process that is not the writer */
	wait_ok(spawn(run_beside_reader, NULL), "a write beside a read transaction");
	check_sum(path);
	return 0;
}
