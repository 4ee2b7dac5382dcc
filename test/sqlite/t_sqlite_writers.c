/*
 * t_sqlite_writers: many writer processes on the database's shared store,
 * and writers killed in the middle of a commit.
 *
 * The table t holds NROWS rows with 600-byte pads (so a transaction's rows
 * lie on several pages: its group has several ranges); meta.n counts what
 * was added to t.v and w.n each writer's transactions.  Each transaction adds
 * 1 to v of 8 rows, 8 to meta.n and 1 to its writer's w.n: sum(v) == meta.n
 * in every state a reader may see, and a group half home breaks that (or
 * the b-tree: integrity_check).
 *
 *  1. Four writer processes, 30 transactions each, default journal mode, a
 *     busy timeout, beside a reader process checking the sum at every read:
 *     every transaction is committed once (w.n), no reader sees a broken
 *     sum, and no checkpoint is made at each change of writer (the store is
 *     shared: a handful of checkpoints at most, not one per transaction).
 *  2. Kills: a writer whose system-call table (atomio's ops table) SIGKILLs
 *     it at its J-th home write to the database after its M-th log write
 *     (J = 1: the group is durable in the log and nothing of it is home;
 *     J = 3 or 5: part of it home -- page 1, meta and w come first, the
 *     rows of t after them; M from the seed), beside a second writer and a
 *     reader that go on: the reader never sees a broken sum (settle: its
 *     SHARED lock waits until the store has adopted the dead writer's
 *     batch), both go on committing and reading, and the killed writer's
 *     transactions are all there, the one it was killed in whole or not at
 *     all.  Mutant nosettle (no atomio_settle before reading) fails here.
 *  3. A writer alone beside an idle reader process, killed half home (at
 *     its fifth home write of a group): the
 *     reader's next read adopts the batch itself (nobody else can) and sees
 *     the sum intact; then every process gone, a writer killed half home
 *     alone, and a new reader is the first to open the store: it recovers
 *     the log before it reads.
 * ATOMIO_SEED picks M and J of each kill; the default seed is 1.
 */
#include <signal.h>
#include <stdbool.h>

#include "sq_t.h"
#include "sys.h"

#define NROWS 200
#define ROUNDS 4

static const char *g_path;
static uint64_t g_seed;

static sqlite3 *open_db(void) { return sq_open_default(g_path, 20000); }

static void setup(void)
{
	sq_remove_db(g_path);
	sqlite3 *db = open_db();
	sq_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER, pad BLOB);"
		  "CREATE TABLE meta(n INTEGER); INSERT INTO meta VALUES(0);"
		  "CREATE TABLE w(id INTEGER PRIMARY KEY, n INTEGER)");
	sq_ok(db, "BEGIN");
	for (int i = 1; i <= NROWS; i++) {
		char sql[128];
		snprintf(sql, sizeof(sql), "INSERT INTO t VALUES(%d, 0, randomblob(600))", i);
		sq_ok(db, sql);
	}
	for (int i = 1; i <= 8; i++) {
		char sql[64];
		snprintf(sql, sizeof(sql), "INSERT INTO w VALUES(%d, 0)", i);
		sq_ok(db, sql);
	}
	sq_ok(db, "COMMIT");
	sqlite3_close(db);
}

/* One transaction of writer me (its k-th). */
static int tx(sqlite3 *db, int me, uint64_t k)
{
	char sql[512];
	int n = snprintf(sql, sizeof(sql), "BEGIN IMMEDIATE; UPDATE t SET v = v + 1 WHERE id IN (");
	n = sq_rows8(sql, sizeof(sql), n, g_seed * 1000003 + (uint64_t)me * 65537 + k * 8, NROWS);
	snprintf(sql + n, sizeof(sql) - (size_t)n,
		 "); UPDATE meta SET n = n + 8; UPDATE w SET n = n + 1 WHERE id = %d; COMMIT", me);
	int rc = sq_exec(db, sql);
	if (rc != SQLITE_OK)
		sq_exec(db, "ROLLBACK");
	return rc;
}

/* sum(v) == meta.n in one read transaction; 0 if so. */
static int check_sum(sqlite3 *db)
{
	sqlite3_stmt *s;
	if (sqlite3_prepare_v2(db, "SELECT (SELECT sum(v) FROM t) - (SELECT n FROM meta), (SELECT n FROM meta)", -1, &s,
			       NULL) != SQLITE_OK)
		return -1;
	int rc = sqlite3_step(s);
	long long d = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
	sqlite3_finalize(s);
	if (rc == SQLITE_ROW && d == 0)
		return 0;
	fprintf(stderr, "reader %d: %s (rc %d, sum - n = %lld)\n", (int)getpid(),
		rc == SQLITE_ROW ? "a broken sum" : sqlite3_errmsg(db), rc, d);
	return 1;
}

/* Stop flags: the parent writes a byte to the pipe; children poll it. */
static bool told(int fd)
{
	char c;
	return read(fd, &c, 1) == 1;
}

/* A writer: n transactions (or until told, then `after` more), one byte to
 * ack_fd after each commit.  Exit 0, or 1 on an error. */
static void writer(int me, int n, int stop_fd, int after, int ack_fd)
{
	sqlite3 *db = open_db();
	int more = -1;
	for (uint64_t k = 0; n < 0 || k < (uint64_t)n; k++) {
		if (more < 0 && stop_fd >= 0 && told(stop_fd))
			more = after;
		if (more == 0)
			break;
		if (more > 0)
			more--;
		int rc = tx(db, me, k);
		if (rc != SQLITE_OK) {
			fprintf(stderr, "writer %d: %s\n", me, sqlite3_errmsg(db));
			_exit(1);
		}
		if (ack_fd >= 0 && write(ack_fd, "x", 1) != 1)
			_exit(1);
		if (n < 0)
			usleep(500); /* room for the other writer: SQLite's busy handler sleeps */
	}
	sqlite3_close(db);
	_exit(0);
}

/* A reader: reads until told, then `after` more; ready_fd gets a byte once
 * its connection has read once.  Exit 0, or 1 if a read saw a broken sum. */
static void reader(int stop_fd, int after, int ready_fd)
{
	sqlite3 *db = open_db();
	int more = -1;
	for (uint64_t k = 0;; k++) {
		if (check_sum(db))
			_exit(1);
		if (k == 0 && ready_fd >= 0 && write(ready_fd, "r", 1) != 1)
			_exit(1);
		if (more < 0 && told(stop_fd))
			more = after;
		if (more == 0)
			break;
		if (more > 0)
			more--;
		if (more < 0)
			usleep(200);
	}
	sqlite3_close(db);
	_exit(0);
}

/* The killing ops table: atomio's own, but at the J-th write to the
 * database after the M-th durable log write, SIGKILL. */
static struct atomio_sysops g_kill_ops;
static const struct atomio_sysops *g_real;
static ino_t g_db_ino;
static uint64_t g_M, g_J, g_logs, g_homes;

static ssize_t kill_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	struct stat sb;
	bool db = g_real->fstat(fd, &sb) == 0 && sb.st_ino == g_db_ino;
	if (db && g_logs >= g_M && ++g_homes == g_J)
		raise(SIGKILL);
	ssize_t r = g_real->pwritev(fd, iov, iovcnt, off, rwf);
	if (!db && (rwf & RWF_DSYNC) && r > 0)
		g_logs++;
	return r;
}

static void killed_writer(int me, uint64_t M, uint64_t J, int ack_fd)
{
	struct stat sb;
	CHECK_OK(stat(g_path, &sb));
	g_db_ino = sb.st_ino;
	g_real = atomio_sys;
	g_kill_ops = *atomio_sys;
	g_kill_ops.name = "kill";
	g_kill_ops.pwritev = kill_pwritev;
	g_M = M;
	g_J = J;
	atomio_sys_set(&g_kill_ops);
	writer(me, 1000, -1, 0, ack_fd);
}

static pid_t spawn(void (*fn)(void *), void *arg)
{
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		fn(arg);
		_exit(0);
	}
	return p;
}

static int wait_rc(pid_t p)
{
	int st;
	CHECK_EQ(waitpid(p, &st, 0), p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static long long count_acks(int fd)
{
	long long n = 0;
	char buf[256];
	ssize_t r;
	while ((r = read(fd, buf, sizeof(buf))) > 0)
		n += r;
	return n;
}

static void final_check(long long *wn)
{
	sqlite3 *db = open_db();
	sq_integrity(db);
	CHECK_EQ(check_sum(db), 0);
	for (int i = 1; i <= 8; i++) {
		char sql[64];
		snprintf(sql, sizeof(sql), "SELECT n FROM w WHERE id = %d", i);
		wn[i] = sq_int(db, sql);
	}
	sqlite3_close(db);
}

struct wa {
	int me, n, stop_fd, after, ack_fd;
	uint64_t M, J;
};
static void run_writer(void *a)
{
	struct wa *w = a;
	writer(w->me, w->n, w->stop_fd, w->after, w->ack_fd);
}
static void run_reader(void *a)
{
	struct wa *w = a;
	reader(w->stop_fd, w->after, w->ack_fd);
}
static void run_killed(void *a)
{
	struct wa *w = a;
	killed_writer(w->me, w->M, w->J, w->ack_fd);
}

/* 1. Four writers and a reader. */
static void part1(void)
{
	setup();
	int stop[2];
	CHECK_OK(pipe2(stop, O_NONBLOCK));
	struct wa ra = {.stop_fd = stop[0], .after = 5, .ack_fd = -1};
	pid_t r = spawn(run_reader, &ra);
	pid_t w[4];
	struct wa wa[4];
	for (int i = 0; i < 4; i++) {
		wa[i] = (struct wa){.me = i + 1, .n = 30, .stop_fd = -1, .ack_fd = -1};
		w[i] = spawn(run_writer, &wa[i]);
	}
	for (int i = 0; i < 4; i++)
		CHECK_EQ(wait_rc(w[i]), 0);
	CHECK_EQ(write(stop[1], "s", 1), 1);
	CHECK_EQ(wait_rc(r), 0);
	close(stop[0]);
	close(stop[1]);
	long long wn[9];
	final_check(wn);
	for (int i = 1; i <= 4; i++)
		CHECK_EQ(wn[i], 30);
	sqlite3 *db = open_db();
	long long ck = sq_stat(db, "checkpoints");
	sqlite3_close(db);
	printf("part 1: 4 writers x 30 transactions, a reader: all committed once, sum intact; "
	       "checkpoints seen by the last store: %lld\n", ck);
	CHECK(ck < 20);
}

/* 2. A writer killed at (M, J) beside a second writer and a reader. */
static void part2_round(int round)
{
	setup();
	uint64_t h = sq_mix(g_seed * 977 + (uint64_t)round);
	uint64_t M = 1 + h % 12, J = 1 + 2 * ((h >> 20) % 3);
	int stop[2], ack[2];
	CHECK_OK(pipe2(stop, O_NONBLOCK));
	CHECK_OK(pipe2(ack, O_NONBLOCK));
	struct wa ra = {.stop_fd = stop[0], .after = 30, .ack_fd = -1};
	struct wa w2 = {.me = 2, .n = -1, .stop_fd = stop[0], .after = 10, .ack_fd = -1};
	struct wa k = {.me = 1, .M = M, .J = J, .ack_fd = ack[1]};
	pid_t r = spawn(run_reader, &ra);
	pid_t p2 = spawn(run_writer, &w2);
	pid_t pk = spawn(run_killed, &k);
	CHECK_EQ(wait_rc(pk), 128 + SIGKILL);
	/* Two bytes: one for each of the reader and the second writer. */
	CHECK_EQ(write(stop[1], "ss", 2), 2);
	int rr = wait_rc(r), r2 = wait_rc(p2);
	close(ack[1]);
	long long acked = count_acks(ack[0]);
	close(ack[0]);
	close(stop[0]);
	close(stop[1]);
	long long wn[9];
	final_check(wn);
	printf("part 2 round %d: killed at home write %llu after log write %llu: %lld acked, %lld in the "
	       "database; reader %d, second writer %d (%lld)\n",
	       round, (unsigned long long)J, (unsigned long long)M, acked, wn[1], rr, r2, wn[2]);
	CHECK_EQ(rr, 0);
	CHECK_EQ(r2, 0);
	CHECK(wn[1] == acked || wn[1] == acked + 1);
}

/* 3. Alone: adopted by an idle reader, then recovered by a first opener. */
static void part3(void)
{
	for (int alone = 0; alone < 2; alone++) {
		setup();
		int stop[2], ack[2], ready[2];
		CHECK_OK(pipe2(stop, O_NONBLOCK));
		CHECK_OK(pipe2(ack, O_NONBLOCK));
		CHECK_OK(pipe(ready));
		pid_t r = -1;
		if (!alone) {
			struct wa ra = {.stop_fd = stop[0], .after = 20, .ack_fd = ready[1]};
			r = spawn(run_reader, &ra);
			char c;
			CHECK_EQ(read(ready[0], &c, 1), 1); /* it has joined the store */
		}
		uint64_t M = 1 + sq_mix(g_seed * 31 + (uint64_t)alone) % 8;
		struct wa k = {.me = 1, .M = M, .J = 5, .ack_fd = ack[1]};
		pid_t pk = spawn(run_killed, &k);
		CHECK_EQ(wait_rc(pk), 128 + SIGKILL);
		close(ack[1]);
		long long acked = count_acks(ack[0]);
		int rr = 0;
		if (!alone) {
			CHECK_EQ(write(stop[1], "s", 1), 1);
			rr = wait_rc(r);
		}
		long long wn[9];
		final_check(wn); /* alone: this open is the first: it recovers */
		printf("part 3 (%s): killed at home write 5 after log write %llu: %lld acked, %lld in the database\n",
		       alone ? "alone, then recovered by the next opener" : "beside an idle reader, which adopts",
		       (unsigned long long)M, acked, wn[1]);
		CHECK_EQ(rr, 0);
		CHECK(wn[1] == acked || wn[1] == acked + 1);
		close(ack[0]);
		close(stop[0]);
		close(stop[1]);
		close(ready[0]);
		close(ready[1]);
	}
}

int main(int argc, char **argv)
{
	g_seed = t_seed(1);
	g_path = t_path("w.db");
	bool only3 = argc > 1 && !strcmp(argv[1], "--part3");
	if (!only3)
		part1();
	for (int i = 0; !only3 && i < ROUNDS; i++)
		part2_round(i);
	part3();
	printf("t_sqlite_writers: ok\n");
	return 0;
}
