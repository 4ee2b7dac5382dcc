/*
 * t_sqlite_crash: a writer process SIGKILLed at random moments, hundreds of
 * times.  After each kill the database is opened through the VFS (which
 * recovers it), PRAGMA integrity_check must be "ok", and the content must be
 * exactly the state after a prefix of the writer's transactions: every
 * transaction the writer saw committed (it reports each COMMIT that returned
 * on a pipe), plus at most the one in flight.
 *
 * The workload: synchronous=FULL, journal_mode=MEMORY for half the
 * writers and no pragma (SQLite's DELETE, whose journal the VFS keeps in
 * memory) for the others, a 16-page cache so that large transactions spill
 * pages before commit, auto_vacuum=FULL so that deletes shrink the file inside
 * the transaction's group, and a VACUUM now and then.  Transaction k adds k to 8 pseudo-random rows, inserts 150 rows of
 * 1500 bytes when k % 5 == 0, deletes those of transaction k-12 when
 * k % 5 == 2, and sets meta.n = k.
 */
#include <signal.h>

#include "sq_t.h"

#define NROWS 2000
#define BIGN 150
#define BIGLEN 1500
/* Kill within this long after the fork ($SQ_KILL_MS overrides): the writer
 * starts (and recovers) in a few milliseconds, slower under the sanitizers. */
#ifdef ATOMIO_SAN
#define KILL_SPAN_NS 150000000L
#else
#define KILL_SPAN_NS 45000000L
#endif

static void tx_ids(long long k, int ids[8])
{
	for (int j = 0; j < 8; j++)
		ids[j] = (int)(sq_mix((uint64_t)k * 8 + (uint64_t)j) % NROWS) + 1;
}

static sqlite3_stmt *prep(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s;
	SQ_CHECK(db, sqlite3_prepare_v2(db, sql, -1, &s, NULL));
	return s;
}

static void run(sqlite3 *db, sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);
	if (rc != SQLITE_DONE) {
		fprintf(stderr, "writer: %s\n", sqlite3_errmsg(db));
		_exit(3);
	}
	sqlite3_reset(s);
}

/* The writer of kill `it`: no pragma on every other pair of kills (unless
 * $SQ_JOURNAL names a mode for all). */
static sqlite3 *open_writer(const char *path, int it)
{
	if (getenv("SQ_JOURNAL") || it / 2 % 2 == 0)
		return sq_open(path, 0);
	sqlite3 *db = sq_open_vfs(path, "atomio", 0);
	sqlite3_busy_timeout(db, 10000);
	sq_ok(db, "PRAGMA synchronous=FULL");
	char mode[32];
	sq_text(db, "PRAGMA journal_mode", mode, sizeof(mode));
	if (strcmp(mode, "delete"))
		_exit(8);
	return db;
}

static void writer(const char *path, int fd, int it)
{
	sqlite3 *db = open_writer(path, it);
	sq_ok(db, "PRAGMA cache_size=16");
	sqlite3_stmt *up = prep(db, "UPDATE t SET v = v + ?1 WHERE id = ?2");
	sqlite3_stmt *ins = prep(db, "INSERT INTO big(id, k, b) VALUES(?1, ?2, zeroblob(?3))");
	sqlite3_stmt *del = prep(db, "DELETE FROM big WHERE k = ?1");
	sqlite3_stmt *meta = prep(db, "UPDATE meta SET n = ?1");
	long long k = sq_int(db, "SELECT n FROM meta");
	for (;;) {
		k++;
		int ids[8];
		tx_ids(k, ids);
		sq_ok(db, "BEGIN");
		for (int j = 0; j < 8; j++) {
			sqlite3_bind_int64(up, 1, k);
			sqlite3_bind_int(up, 2, ids[j]);
			run(db, up);
		}
		if (k % 5 == 0)
			for (int i = 0; i < BIGN; i++) {
				sqlite3_bind_int64(ins, 1, k * 1000 + i);
				sqlite3_bind_int64(ins, 2, k);
				sqlite3_bind_int(ins, 3, BIGLEN);
				run(db, ins);
			}
		if (k % 5 == 2) {
			sqlite3_bind_int64(del, 1, k - 12);
			run(db, del);
		}
		sqlite3_bind_int64(meta, 1, k);
		run(db, meta);
		sq_ok(db, "COMMIT");
		/* acknowledged: COMMIT returned */
		if (write(fd, &k, sizeof(k)) != sizeof(k))
			_exit(4);
		if (k % 37 == 0)
			sq_ok(db, "VACUUM");
	}
}

/* The model after n transactions. */
struct model {
	long long n;
	long long v[NROWS + 1];
};

static void model_advance(struct model *m, long long n)
{
	for (long long k = m->n + 1; k <= n; k++) {
		int ids[8];
		tx_ids(k, ids);
		for (int j = 0; j < 8; j++)
			m->v[ids[j]] += k;
	}
	m->n = n;
}

static void verify(const char *path, struct model *m, long long last_ack, int *inflight)
{
	sqlite3 *db = sq_open(path, 0);
	sq_integrity(db);
	long long n = sq_int(db, "SELECT n FROM meta");
	if (n != last_ack && n != last_ack + 1) {
		fprintf(stderr, "meta.n = %lld, last acknowledged commit %lld\n", n, last_ack);
		exit(1);
	}
	CHECK(n >= m->n);
	*inflight += n == last_ack + 1;
	model_advance(m, n);
	sqlite3_stmt *s = prep(db, "SELECT id, v FROM t ORDER BY id");
	int rows = 0;
	while (sqlite3_step(s) == SQLITE_ROW) {
		int id = sqlite3_column_int(s, 0);
		long long v = sqlite3_column_int64(s, 1);
		CHECK(id >= 1 && id <= NROWS);
		if (v != m->v[id]) {
			fprintf(stderr, "after %lld transactions: row %d has %lld, expected %lld\n", n, id,
				v, m->v[id]);
			exit(1);
		}
		rows++;
	}
	sqlite3_finalize(s);
	CHECK_EQ(rows, NROWS);
	long long groups = 0;
	for (long long k = 5; k <= n; k += 5)
		groups += k + 12 > n;
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM big"), groups * BIGN);
	CHECK_EQ(sq_int(db, "SELECT coalesce(sum(length(b)), 0) FROM big"), groups * BIGN * BIGLEN);
	CHECK_EQ(sq_int(db, "SELECT count(DISTINCT k) FROM big"), groups);
	/* auto-vacuum truncations commit with their transactions: the file is
	 * never longer than the database it holds.  (With an on-disk journal,
	 * SQLite truncates after the commit, unsynced, as it always does.) */
	if (!getenv("SQ_JOURNAL"))
		CHECK_EQ(sq_file_size(path),
			 sq_int(db, "PRAGMA page_count") * sq_int(db, "PRAGMA page_size"));
	sqlite3_close(db);
}

int main(void)
{
	uint64_t seed = t_seed(1);
	const char *path = t_path("crash.db");
	/* 300 kills; on a busy machine stop after 30 s once 150 are done (the
	 * sanitizer build does a quarter). */
	int iters = T_SCALE(300), min_iters = T_SCALE(150);
	sqlite3 *db = sq_open(path, 4 << 20);
	sq_ok(db, "PRAGMA auto_vacuum=FULL");
	sq_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER NOT NULL);"
		  "CREATE TABLE big(id INTEGER PRIMARY KEY, k INTEGER NOT NULL, b BLOB);"
		  "CREATE INDEX big_k ON big(k);"
		  "CREATE TABLE meta(n INTEGER NOT NULL); INSERT INTO meta VALUES(0);");
	sq_ok(db, "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<2000) "
		  "INSERT INTO t SELECT i, 0 FROM c");
	CHECK_EQ(sq_int(db, "PRAGMA auto_vacuum"), 1);
	sqlite3_close(db);

	static struct model m;
	int inflight = 0;
	long long acked_total = 0;
	double t0 = sq_now();
	int it;
	for (it = 0; it < iters && (it < min_iters || sq_now() - t0 < 30); it++) {
		int p[2];
		CHECK_OK(pipe(p));
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			writer(path, p[1], it);
			_exit(0);
		}
		close(p[1]);
		/* Random moments: in the writer's open and recovery, in its
		 * transactions, in its commits' log writes and home writes.  On
		 * every other kill the moment counts from the writer's first
		 * acknowledged commit, so that transactions are killed also
		 * where starting a writer takes most of the span (a loaded
		 * machine). */
		long long last = m.n, k;
		if (it % 2) {
			CHECK_EQ(read(p[0], &k, sizeof(k)), (ssize_t)sizeof(k));
			CHECK_EQ(k, last + 1);
			last = k;
			acked_total++;
		}
		uint64_t r = sq_mix((uint64_t)it * 7919 + seed);
		long span = getenv("SQ_KILL_MS") ? atol(getenv("SQ_KILL_MS")) * 1000000L : KILL_SPAN_NS;
		if (span < 1000000L || span > 999000000L)
			span = KILL_SPAN_NS;
		struct timespec ts = {0, (long)(1000000 + r % (uint64_t)span)};
		nanosleep(&ts, NULL);
		CHECK_OK(kill(pid, SIGKILL));
		int status;
		CHECK_EQ(waitpid(pid, &status, 0), pid);
		if (!WIFSIGNALED(status)) {
			fprintf(stderr, "writer exited with status %d\n", WEXITSTATUS(status));
			return 1;
		}
		while (read(p[0], &k, sizeof(k)) == sizeof(k)) {
			CHECK_EQ(k, last + 1);
			last = k;
			acked_total++;
		}
		close(p[0]);
		verify(path, &m, last, &inflight);
	}
	printf("%d kills in %.1f s: %lld commits acknowledged, %lld transactions in the database, "
	       "%d kills after a commit reached the log but before it was acknowledged\n",
	       it, sq_now() - t0, acked_total, m.n, inflight);
	/* Not vacuous: the writers got well into their transactions, and
	 * kills landed both before and after commits reached the log. */
	CHECK(m.n >= it / 2);
	CHECK(inflight > 0 && inflight < it);
	return 0;
}
