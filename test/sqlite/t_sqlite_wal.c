/*
 * t_sqlite_wal: journal_mode=WAL under the atomio VFS, as under the unix VFS
 * (vfs.c, "WAL": the unix VFS's shared memory, no groups, no log).
 *
 * Transfers between rows keep sum(v) constant, and ctr.n counts the
 * writer's transactions.
 *  1. Readers beside a writer: two reader processes each hold a read
 *     transaction while the writer commits 20 transactions with no busy
 *     handler at all (a WAL writer never waits for readers); each reader
 *     still sees its snapshot, then, after its transaction, all 20.
 *  2. The switch into WAL leaves no live group behind: process A writes in
 *     rollback mode (its log holding groups over rows 1..40), switches to
 *     WAL and stays idle with its connection open; process B rewrites those
 *     rows in WAL mode and checkpoints them into the file; A is killed.
 *     Reopened, the rows are B's: a group left in A's log, replayed, would
 *     put A's values back over B's checkpointed pages.
 *  3. A WAL database with a log beside it, left by the plain unix VFS
 *     (sqlite3 switched a database that atomio had closed cleanly): the
 *     first atomio process to open it removes the log, so that a second
 *     process opens it while the first keeps it open (WAL readers hold
 *     SHARED for as long as they are open, and a log there would need the
 *     exclusive lock to be recovered first: refused forever).
 *  4. Kills: a WAL writer (checkpointing every 20 pages) SIGKILLed at random
 *     moments while two reader processes, one through atomio and one through
 *     the unix VFS, read the constant sum; after each kill a new connection
 *     opens beside the readers: integrity_check ok, ctr.n as acknowledged or
 *     one more.
 *  5. Kills of a writer that switches between WAL and DELETE every 6
 *     transactions: the database is as acknowledged or one more after each,
 *     and a WAL database has no log once opened.
 *  6. locking_mode=EXCLUSIVE WAL (index in heap memory), closed, written
 *     again in exclusive mode, then read in NORMAL mode by one process while
 *     another keeps it open (SQLite's exclusive-7.1); no log beside it.
 *  7. PRAGMA journal_mode=WAL over a database and an ATTACHed one (one
 *     transaction, committed as one group over both): the switcher's logs
 *     go at once, so that once it closes (its store with them), a second
 *     process opens beside a WAL reader that started while it held them.
 *  8. A rollback-mode writer SIGKILLed with its store open, the database
 *     then switched to WAL by the unix VFS with the log beside it: the next
 *     atomio opener removes the log, and with it the store's shared-state
 *     file the killed writer left (/dev/shm).
 * `t_sqlite_wal --part N` runs part N alone.
 */
#include <signal.h>
#include <stdbool.h>

#include "sq_t.h"

#define NROWS 200
#define TOTAL (NROWS * 1000LL)

static uint64_t g_seed;
static char g_path[4200], g_log[4300];

static bool has_log(void) { return access(g_log, F_OK) == 0; }

static sqlite3 *open_db(const char *vfs, const char *mode)
{
	sqlite3 *db = sq_open_vfs(g_path, vfs, 0);
	sqlite3_busy_timeout(db, 10000);
	char sql[128];
	if (mode) {
		snprintf(sql, sizeof(sql), "PRAGMA journal_mode=%s", mode);
		sq_ok(db, sql);
	}
	sq_ok(db, "PRAGMA synchronous=FULL");
	return db;
}

static void create(void)
{
	unlink(g_path);
	unlink(g_log);
	sqlite3 *db = open_db("atomio", NULL);
	sq_ok(db, "CREATE TABLE acct(id INTEGER PRIMARY KEY, v INTEGER NOT NULL, pad BLOB);"
		  "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<200) "
		  "INSERT INTO acct SELECT i, 1000, randomblob(300) FROM c;"
		  "CREATE TABLE ctr(n INTEGER); INSERT INTO ctr VALUES(0)");
	sqlite3_close(db);
}

/* One transaction: 4 transfers and ctr.n + 1; SQLITE_OK or the error. */
static int transfer_tx(sqlite3 *db, uint64_t k)
{
	char sql[512];
	int n = 0;
	n += snprintf(sql + n, sizeof(sql) - (size_t)n, "BEGIN IMMEDIATE;");
	for (int j = 0; j < 4; j++) {
		uint64_t r = sq_mix(g_seed * 1000003 + k * 8 + (uint64_t)j);
		int a = (int)(r % NROWS) + 1, b = (int)((r >> 20) % NROWS) + 1;
		long long x = (long long)((r >> 40) % 50) + 1;
		n += snprintf(sql + n, sizeof(sql) - (size_t)n,
			      "UPDATE acct SET v = v - %lld WHERE id = %d; UPDATE acct SET v = v + %lld WHERE id = %d;",
			      x, a, x, b);
	}
	snprintf(sql + n, sizeof(sql) - (size_t)n, "UPDATE ctr SET n = n + 1; COMMIT");
	int rc = sq_exec(db, sql);
	if (rc != SQLITE_OK)
		sq_exec(db, "ROLLBACK");
	return rc;
}

static void check_db(sqlite3 *db, long long acked, const char *what)
{
	sq_integrity(db);
	long long sum = sq_int(db, "SELECT sum(v) FROM acct"), n = sq_int(db, "SELECT n FROM ctr");
	if (sum != TOTAL || (acked >= 0 && n != acked && n != acked + 1)) {
		fprintf(stderr, "%s: sum %lld (%lld expected), %lld transactions (%lld acknowledged)\n", what,
			sum, TOTAL, n, acked);
		exit(1);
	}
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

/* --- 1 ------------------------------------------------------------------------- */

static void snapshot_reader(int to_parent, int from_parent)
{
	sqlite3 *db = open_db("atomio", NULL);
	sq_ok(db, "BEGIN");
	long long n1 = sq_int(db, "SELECT n FROM ctr");
	char c;
	if (write(to_parent, &n1, sizeof(n1)) != sizeof(n1) || read(from_parent, &c, 1) != 1)
		_exit(2);
	long long n2 = sq_int(db, "SELECT n FROM ctr"), sum = sq_int(db, "SELECT sum(v) FROM acct");
	sq_ok(db, "COMMIT");
	long long n3 = sq_int(db, "SELECT n FROM ctr");
	if (n2 != n1 || sum != TOTAL || n3 != n1 + 20) {
		fprintf(stderr, "reader: %lld in its snapshot, then %lld (sum %lld); after it %lld\n", n1, n2, sum, n3);
		_exit(1);
	}
	sqlite3_close(db);
	_exit(0);
}

static void readers_beside_writer(void)
{
	create();
	sqlite3 *w = open_db("atomio", "WAL");
	char mode[16];
	sq_text(w, "PRAGMA journal_mode", mode, sizeof(mode));
	CHECK(!strcmp(mode, "wal"));
	CHECK(!has_log());
	pid_t r[2];
	int up[2][2], down[2][2];
	long long n;
	for (int i = 0; i < 2; i++) {
		CHECK_OK(pipe(up[i]));
		CHECK_OK(pipe(down[i]));
		r[i] = fork();
		CHECK(r[i] >= 0);
		if (r[i] == 0) {
			close(up[i][0]);
			close(down[i][1]);
			snapshot_reader(up[i][1], down[i][0]);
		}
		close(up[i][1]);
		close(down[i][0]);
		CHECK_EQ(read(up[i][0], &n, sizeof(n)), (ssize_t)sizeof(n));
		CHECK_EQ(n, 0);
	}
	/* both readers hold a snapshot: commit beside them, never waiting */
	sqlite3_busy_timeout(w, 0);
	for (uint64_t k = 1; k <= 20; k++)
		CHECK_EQ(transfer_tx(w, k), SQLITE_OK);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(write(down[i][1], "g", 1), 1);
		wait_ok(r[i], "a snapshot reader");
	}
	check_db(w, 20, "after the readers");
	sqlite3_close(w);
	printf("1. two readers kept their snapshots while the writer committed 20 transactions "
	       "without waiting\n");
}

/* --- 2 ------------------------------------------------------------------------- */

/* Rows 1..40 rewritten, each pad base + id bytes long: 40 groups. */
static void set_pads(sqlite3 *db, int base)
{
	for (int k = 1; k <= 40; k++) {
		char sql[128];
		snprintf(sql, sizeof(sql), "UPDATE acct SET pad = zeroblob(%d) WHERE id = %d", base + k, k);
		sq_ok(db, sql);
	}
}

static void switch_leaves_no_group(void)
{
	create();
	int p[2];
	CHECK_OK(pipe(p));
	pid_t a = fork();
	CHECK(a >= 0);
	if (a == 0) {
		sqlite3 *db = open_db("atomio", NULL);
		set_pads(db, 100);
		if (sq_stat(db, "checkpoints") != 0) /* the groups are live in the log */
			_exit(3);
		char mode[16];
		sq_text(db, "PRAGMA journal_mode=WAL", mode, sizeof(mode));
		if (strcmp(mode, "wal") || write(p[1], "s", 1) != 1)
			_exit(4);
		for (;;)
			pause(); /* idle, the connection open */
	}
	close(p[1]);
	char c;
	CHECK_EQ(read(p[0], &c, 1), 1);
	close(p[0]);
	pid_t b = fork();
	CHECK(b >= 0);
	if (b == 0) {
		sqlite3 *db = open_db("atomio", NULL);
		set_pads(db, 2000);
		sq_ok(db, "PRAGMA wal_checkpoint(TRUNCATE)");
		sqlite3_close(db);
		_exit(0);
	}
	wait_ok(b, "the WAL writer");
	CHECK_OK(kill(a, SIGKILL));
	CHECK_EQ(waitpid(a, NULL, 0), a);
	sqlite3 *db = open_db("atomio", NULL);
	sq_integrity(db);
	long long bad = sq_int(db, "SELECT count(*) FROM acct WHERE id <= 40 AND length(pad) != 2000 + id");
	if (bad) {
		fprintf(stderr, "2. %lld rows of 40 are not as the WAL writer checkpointed them (%lld reads "
				"as the rollback-mode writer left it)\n", bad,
			sq_int(db, "SELECT count(*) FROM acct WHERE id <= 40 AND length(pad) = 100 + id"));
		exit(1);
	}
	sqlite3_close(db);
	CHECK(!has_log());
	printf("2. switched to WAL with groups in the log, then rewritten and checkpointed by another "
	       "process, the switcher killed: the rows are the WAL writer's\n");
}

/* A child process that opens the database through the VFS beside a WAL
 * reader and reads the counter: it exits 0 when it could, else 1 with
 * SQLite's message, which names the case. */
static pid_t fork_second_reader(const char *step)
{
	pid_t second = fork();
	CHECK(second >= 0);
	if (second == 0) {
		sqlite3 *x = sq_open_vfs(g_path, "atomio", 0);
		sqlite3_busy_timeout(x, 3000);
		sqlite3_stmt *s;
		int rc = sqlite3_prepare_v2(x, "SELECT n FROM ctr", -1, &s, NULL);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(s);
		if (rc != SQLITE_ROW) {
			fprintf(stderr, "%s. a second process beside a WAL reader: %s\n", step, sqlite3_errmsg(x));
			_exit(1);
		}
		sqlite3_finalize(s);
		sqlite3_close(x);
		_exit(0);
	}
	return second;
}

/* --- 3 ------------------------------------------------------------------------- */

static void unix_switched(void)
{
	create();
	sqlite3 *db = open_db("atomio", NULL);
	CHECK_EQ(transfer_tx(db, 1), SQLITE_OK);
	sqlite3_close(db); /* the log stays, with nothing to replay */
	CHECK(has_log());
	db = open_db(NULL, "WAL"); /* the unix VFS, as the sqlite3 shell */
	CHECK_EQ(transfer_tx(db, 2), SQLITE_OK);
	sqlite3_close(db);
	CHECK(has_log());
	int p[2], q[2];
	CHECK_OK(pipe(p));
	CHECK_OK(pipe(q));
	pid_t first = fork();
	CHECK(first >= 0);
	if (first == 0) {
		close(p[0]);
		close(q[1]); /* so that the read below ends if the parent dies */
		sqlite3 *x = open_db("atomio", NULL);
		long long n = sq_int(x, "SELECT n FROM ctr");
		char c;
		if (n != 2 || write(p[1], "o", 1) != 1 || read(q[0], &c, 1) != 1)
			_exit(2);
		sqlite3_close(x);
		_exit(0);
	}
	close(p[1]);
	close(q[0]);
	char c;
	CHECK_EQ(read(p[0], &c, 1), 1);
	pid_t second = fork_second_reader("3");
	wait_ok(second, "the second process");
	CHECK_EQ(write(q[1], "d", 1), 1);
	wait_ok(first, "the first process");
	CHECK(!has_log());
	printf("3. a WAL database with a log beside it (switched by the unix VFS): the first opener "
	       "removed it, a second process opened beside the first\n");
}

/* --- 4 and 5 ------------------------------------------------------------------ */

static volatile sig_atomic_t g_stop;
static void on_usr1(int sig) { (void)sig; g_stop = 1; }

/* Reads the sum in transactions until SIGUSR1; exit 1 on a wrong sum. */
static void sum_reader(const char *vfs, int ready)
{
	signal(SIGUSR1, on_usr1);
	sqlite3 *db = open_db(vfs, NULL);
	long reads = 0;
	while (!g_stop) {
		sqlite3_stmt *s;
		if (sqlite3_prepare_v2(db, "SELECT sum(v), count(*) FROM acct", -1, &s, 0) != SQLITE_OK)
			_exit(4);
		int rc = sqlite3_step(s);
		if (rc != SQLITE_ROW) {
			fprintf(stderr, "reader (%s): %s\n", vfs ? vfs : "unix", sqlite3_errmsg(db));
			_exit(4);
		}
		long long sum = sqlite3_column_int64(s, 0);
		sqlite3_finalize(s);
		if (sum != TOTAL) {
			fprintf(stderr, "reader (%s) saw sum %lld\n", vfs ? vfs : "unix", sum);
			_exit(1);
		}
		if (reads++ == 0 && write(ready, "r", 1) != 1)
			_exit(5);
		usleep(200);
	}
	sqlite3_close(db);
	fprintf(stderr, "reader (%s): %ld consistent reads\n", vfs ? vfs : "unix", reads);
	_exit(0);
}

/* Commits transactions, acknowledging each on fd, until killed; with
 * `every` > 0 the journal mode goes between WAL and DELETE every that many. */
static void kill_writer(int fd, int every)
{
	sqlite3 *db = open_db("atomio", every ? NULL : "WAL");
	sq_ok(db, "PRAGMA wal_autocheckpoint=20");
	long long k = sq_int(db, "SELECT n FROM ctr");
	for (;;) {
		k++;
		if (transfer_tx(db, (uint64_t)k) != SQLITE_OK) {
			fprintf(stderr, "writer: %s\n", sqlite3_errmsg(db));
			_exit(3);
		}
		if (write(fd, &k, sizeof(k)) != sizeof(k))
			_exit(4);
		if (every && k % every == 0) {
			char mode[16];
			sq_text(db, "PRAGMA journal_mode", mode, sizeof(mode));
			sq_text(db, strcmp(mode, "wal") ? "PRAGMA journal_mode=WAL" : "PRAGMA journal_mode=DELETE",
				mode, sizeof(mode));
		}
	}
}

/* `iters` kills of kill_writer(every), each checked through a new
 * connection; *modes_seen: 1 if a kill left rollback mode, 2 if WAL.
 * Returns the kills after which the transaction in flight had committed. */
static int kills(int iters, int every, int *modes_seen)
{
	long long acked = -1;
	{
		sqlite3 *db = open_db("atomio", NULL);
		acked = sq_int(db, "SELECT n FROM ctr");
		sqlite3_close(db);
	}
	int inflight = 0;
	for (int it = 0; it < iters; it++) {
		int p[2];
		CHECK_OK(pipe(p));
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			kill_writer(p[1], every);
		}
		close(p[1]);
		/* After the writer's first commit, a moment 1 to 41 ms later; with
		 * switches (each takes long: a log is made or removed), after 1
		 * to 13 commits and 0 to 3 ms, so that kills land in every stretch
		 * between two switches and inside them. */
		uint64_t r = sq_mix(g_seed * 7919 + (uint64_t)it);
		long long k, acks = every ? 1 + (long long)(r % 13) : 1;
		for (long long i = 0; i < acks; i++) {
			CHECK_EQ(read(p[0], &k, sizeof(k)), (ssize_t)sizeof(k));
			CHECK_EQ(k, acked + 1);
			acked = k;
		}
		struct timespec ts = {0, every ? (long)((r >> 20) % 3000000) : (long)(1000000 + (r >> 20) % 40000000)};
		nanosleep(&ts, NULL);
		CHECK_OK(kill(pid, SIGKILL));
		int st;
		CHECK_EQ(waitpid(pid, &st, 0), pid);
		CHECK(WIFSIGNALED(st));
		while (read(p[0], &k, sizeof(k)) == sizeof(k)) {
			CHECK_EQ(k, acked + 1);
			acked = k;
		}
		close(p[0]);
		sqlite3 *db = open_db("atomio", NULL);
		char what[64], mode[16];
		snprintf(what, sizeof(what), "kill %d", it);
		check_db(db, acked, what);
		long long n = sq_int(db, "SELECT n FROM ctr");
		inflight += n == acked + 1;
		acked = n;
		sq_text(db, "PRAGMA journal_mode", mode, sizeof(mode));
		*modes_seen |= strcmp(mode, "wal") ? 1 : 2;
		if (!strcmp(mode, "wal") && has_log()) {
			fprintf(stderr, "kill %d: a WAL database with a log beside it\n", it);
			exit(1);
		}
		sqlite3_close(db);
	}
	return inflight;
}

static void wal_kills(void)
{
	create();
	sqlite3 *db = open_db("atomio", "WAL");
	sqlite3_close(db);
	int ready[2];
	CHECK_OK(pipe(ready));
	pid_t r[2];
	const char *vfs[2] = {"atomio", NULL};
	for (int i = 0; i < 2; i++) {
		r[i] = fork();
		CHECK(r[i] >= 0);
		if (r[i] == 0)
			sum_reader(vfs[i], ready[1]);
	}
	close(ready[1]);
	char c[2];
	CHECK_EQ(read(ready[0], c, 1), 1);
	CHECK_EQ(read(ready[0], c, 1), 1);
	close(ready[0]);
	int modes = 0, iters = T_SCALE(20);
	int inflight = kills(iters, 0, &modes);
	CHECK_EQ(modes, 2);
	for (int i = 0; i < 2; i++) {
		CHECK_OK(kill(r[i], SIGUSR1));
		wait_ok(r[i], "a reader");
	}
	printf("4. %d kills of a WAL writer beside two readers (atomio, unix): consistent, %d with the "
	       "transaction in flight committed\n", iters, inflight);
}

static void switch_kills(void)
{
	create();
	int modes = 0, iters = T_SCALE(30);
	int inflight = kills(iters, 6, &modes);
	CHECK_EQ(modes, 3); /* left in either mode by some kill */
	printf("5. %d kills of a writer going between WAL and DELETE every 6 transactions: consistent, "
	       "%d with the transaction in flight committed\n", iters, inflight);
}

/* --- 6 ------------------------------------------------------------------------- */

static void exclusive_then_normal(void)
{
	create();
	sqlite3 *db = sq_open_vfs(g_path, "atomio", 0);
	sq_ok(db, "PRAGMA locking_mode=EXCLUSIVE; PRAGMA synchronous=FULL");
	char mode[16];
	sq_text(db, "PRAGMA journal_mode=WAL", mode, sizeof(mode));
	CHECK(!strcmp(mode, "wal"));
	for (uint64_t k = 1; k <= 3; k++)
		CHECK_EQ(transfer_tx(db, k), SQLITE_OK);
	sqlite3_close(db);
	CHECK(!has_log());
	/* an existing WAL database in exclusive mode: its lock, taken before
	 * the WAL opens, opens a store too, which the WAL's opening drops */
	db = sq_open_vfs(g_path, "atomio", 0);
	sq_ok(db, "PRAGMA locking_mode=EXCLUSIVE; PRAGMA synchronous=FULL"); /* before any read */
	for (uint64_t k = 4; k <= 5; k++)
		CHECK_EQ(transfer_tx(db, k), SQLITE_OK);
	sq_text(db, "PRAGMA journal_mode", mode, sizeof(mode));
	CHECK(!strcmp(mode, "wal"));
	sqlite3_close(db);
	CHECK(!has_log());
	int p[2], q[2];
	CHECK_OK(pipe(p));
	CHECK_OK(pipe(q));
	pid_t first = fork();
	CHECK(first >= 0);
	if (first == 0) {
		close(p[0]);
		close(q[1]);
		sqlite3 *x = open_db("atomio", NULL);
		char c;
		if (sq_int(x, "SELECT n FROM ctr") != 5 || write(p[1], "o", 1) != 1 || read(q[0], &c, 1) != 1)
			_exit(2);
		sqlite3_close(x);
		_exit(0);
	}
	close(p[1]);
	close(q[0]);
	char c;
	CHECK_EQ(read(p[0], &c, 1), 1);
	db = open_db("atomio", NULL);
	check_db(db, 5, "6. a WAL database written in exclusive mode, read in normal mode");
	CHECK_EQ(transfer_tx(db, 6), SQLITE_OK);
	sqlite3_close(db);
	CHECK_EQ(write(q[1], "d", 1), 1);
	wait_ok(first, "the first reader");
	CHECK(!has_log());
	printf("6. a WAL database written in locking_mode=EXCLUSIVE, then read and written in NORMAL "
	       "mode beside another process\n");
}

/* --- 7 ------------------------------------------------------------------------- */

static void switch_pair(void)
{
	create();
	char b[4300], sql[9000];
	snprintf(b, sizeof(b), "%s-b.db", g_path);
	unlink(b);
	snprintf(sql, sizeof(sql), "%s-atomio", b);
	unlink(sql);
	int p[2], q[2], r[2];
	CHECK_OK(pipe(p));
	CHECK_OK(pipe(q));
	CHECK_OK(pipe(r));
	pid_t a = fork();
	CHECK(a >= 0);
	if (a == 0) {
		close(p[0]);
		close(q[1]);
		sqlite3 *db = open_db("atomio", NULL);
		snprintf(sql, sizeof(sql), "ATTACH 'file:%s?vfs=atomio' AS b; CREATE TABLE b.t(x); "
			 "BEGIN; INSERT INTO b.t VALUES(1); UPDATE ctr SET n = n + 1; COMMIT", b);
		sq_ok(db, sql);
		char mode[16];
		sq_text(db, "PRAGMA journal_mode=WAL", mode, sizeof(mode)); /* both databases */
		if (strcmp(mode, "wal") || write(p[1], "s", 1) != 1 || read(q[0], mode, 1) != 1)
			_exit(2);
		sqlite3_close(db);
		_exit(0);
	}
	close(p[1]);
	close(q[0]);
	char c;
	CHECK_EQ(read(p[0], &c, 1), 1);
	pid_t reader = fork();
	CHECK(reader >= 0);
	if (reader == 0) {
		close(r[0]);
		sqlite3 *x = open_db("atomio", NULL);
		if (sq_int(x, "SELECT n FROM ctr") != 1 || write(r[1], "o", 1) != 1)
			_exit(2);
		char mode[16];
		sq_text(x, "PRAGMA journal_mode", mode, sizeof(mode));
		if (strcmp(mode, "wal"))
			_exit(3);
		pause(); /* the connection open, SHARED held */
		_exit(0);
	}
	close(r[1]);
	CHECK_EQ(read(r[0], &c, 1), 1);
	CHECK_EQ(write(q[1], "c", 1), 1); /* the switcher closes */
	wait_ok(a, "the switcher");
	pid_t second = fork_second_reader("7");
	int st;
	CHECK_EQ(waitpid(second, &st, 0), second);
	CHECK_OK(kill(reader, SIGKILL));
	CHECK_EQ(waitpid(reader, NULL, 0), reader);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "7. the second process failed (status 0x%x)\n", st);
		exit(1);
	}
	CHECK(!has_log());
	snprintf(sql, sizeof(sql), "%s-atomio", b);
	CHECK(access(sql, F_OK) != 0);
	printf("7. journal_mode=WAL over two databases in one transaction: both logs gone at the switch, "
	       "a second process opened beside a WAL reader\n");
}

/* 8. A rollback-mode writer SIGKILLed with its store open leaves the
 * store's shared-state file (t_shm_name; only the last close removes it).
 * The database then goes to WAL with the log still beside it (switched by
 * the unix VFS, as in 3; the same as a writer killed between its switch's
 * header write and its log's removal): the next atomio opener recovers the
 * log alone (ATOMIO_EXCLUSIVE: no shared state) and removes it (remove_log),
 * and with atomio_log_remove the state file too, which nothing names once
 * the log is gone.  Before: the file stayed in /dev/shm. */
static void killed_then_wal(void)
{
	create();
	int p[2];
	CHECK_OK(pipe(p));
	fflush(NULL);
	pid_t a = fork();
	CHECK(a >= 0);
	if (a == 0) {
		sqlite3 *db = open_db("atomio", NULL);
		set_pads(db, 300);
		if (write(p[1], "s", 1) != 1)
			_exit(4);
		for (;;)
			pause(); /* the store open */
	}
	close(p[1]);
	char c;
	CHECK_EQ(read(p[0], &c, 1), 1);
	close(p[0]);
	CHECK_OK(kill(a, SIGKILL));
	CHECK_EQ(waitpid(a, NULL, 0), a);
	char shm[64];
	int fd = open(g_log, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_OK(t_shm_name(fd, shm, sizeof(shm)));
	close(fd);
	bool tmpfs = access(shm, F_OK) == 0; /* else the state file is beside the log */
	sqlite3 *db = open_db(NULL, "WAL"); /* the unix VFS: the log stays */
	sqlite3_close(db);
	CHECK(has_log());
	db = open_db("atomio", NULL);
	sq_integrity(db);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM acct WHERE id <= 40 AND length(pad) != 300 + id"), 0);
	sqlite3_close(db);
	CHECK(!has_log());
	if (tmpfs && access(shm, F_OK) == 0) {
		fprintf(stderr, "8. %s, the killed writer's store's state file, outlived its log\n", shm);
		exit(1);
	}
	printf("8. a killed rollback-mode writer's store, the database then switched to WAL by the unix "
	       "VFS: log and state file gone%s\n", tmpfs ? "" : " (no tmpfs /dev/shm: the state file not checked)");
}

int main(int argc, char **argv)
{
	g_seed = t_seed(1);
	snprintf(g_path, sizeof(g_path), "%s", t_path("wal.db"));
	snprintf(g_log, sizeof(g_log), "%s-atomio", g_path);
	/* --part N: that part alone (test/t_sqlite_vfs_mutants.sh) */
	int only = argc > 2 && !strcmp(argv[1], "--part") ? atoi(argv[2]) : 0;
	void (*part[])(void) = {readers_beside_writer, switch_leaves_no_group, unix_switched,
				wal_kills, switch_kills, exclusive_then_normal, switch_pair, killed_then_wal};
	for (int i = 0; i < 8; i++)
		if (!only || only == i + 1)
			part[i]();
	return 0;
}
