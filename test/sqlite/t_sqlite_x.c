/*
 * t_sqlite_x: the multi-connection exerciser (issue 35).  Random transactions
 * over several databases, atomio ones mixed with unix-VFS ones, in WAL and
 * rollback modes, from several processes with several connections each,
 * beside readers, with checkpoints, forks with open connections and kills,
 * every result checked against a model.
 *
 * The databases (--kinds, one letter each): d atomio in SQLite's default
 * mode (DELETE; journals in memory), m atomio MEMORY, w atomio WAL, D unix
 * DELETE, W unix WAL, s atomio switched between WAL and DELETE by the
 * writers now and then (counted as WAL by the oracle).  atomio databases get 1 MiB logs, so that a large
 * transaction (1.2 to 2.5 MiB per database) overflows them.
 * Every database holds r(txid, k, v) (v: bytes that are a function of the
 * seed, txid, database and k), t(txid, mask, nrows, bytes) (one row per
 * transaction that wrote the database: which databases it wrote and what it
 * put here) and c.n (incremented by every transaction that writes the
 * database).  A connection opens database m as main and ATTACHes those
 * after it (so that every connection locks in the same order), a unix-VFS
 * main with atomio databases after it too (--no-unix-main: not).
 *
 * Writer processes take transaction ids from shared memory (the model:
 * each id's state, unused / in flight / acknowledged / failed, and the
 * databases it writes) and write each into a random subset of their
 * connection's databases (BEGIN IMMEDIATE or deferred; some with a
 * savepoint rolled back; some rolled back whole; some large); a COMMIT that
 * returns OK is acknowledged; a transaction that fails before its COMMIT
 * must leave nothing, one whose COMMIT fails nothing where its set is
 * atomic (below; elsewhere SQLite may have committed a WAL database of it
 * in phase one) -- SQLITE_BUSY and I/O errors count as failures (a large
 * transaction is refused when another process has the log open),
 * corruption fails the test.  Readers (reader
 * processes, and writers now and then) check, in one read transaction per
 * connection: every transaction present in a database is whole there (its
 * t row, its rows, their bytes), none failed or unused is present, c.n
 * counts t, every transaction acknowledged before the read began is
 * there, and one over an atomic set (below) is in all of its databases the
 * read holds or in none.  Writers also run WAL checkpoints, and fork with their
 * connections open: the child leaves the inherited connections alone or
 * (half of them) closes them, as SQLite allows, opens its own and writes
 * and reads beside the parent; a fork during a read transaction of the
 * parent in a rollback database checks afterwards that another connection
 * of the parent still cannot commit there (the parent's SHARED lock holds).
 * The driver kills writers (SIGKILL) after seeded delays (where they are
 * then depends on timing: the oracle holds wherever), and writers kill
 * themselves at seeded points (in a transaction, or right after its COMMIT
 * returned), and starts new ones.
 * After each round (no process left), every database is opened alone, then
 * all together: integrity_check ok, the checks above, and across databases
 * SQLite's promise: a transaction acknowledged is in every database it
 * wrote; one that is not (killed, failed) is in all or none of them where
 * the set commits atomically: no WAL database in it, and all atomio (one
 * group) or all in DELETE mode (SQLite's super-journal); elsewhere each
 * database holds it whole or not at all.
 *
 * Three features found bugs of issue 35 (fixed); each can be turned off:
 *   --no-large-multi  no large transactions over several databases (item 1:
 *                  a COMMIT over several atomio databases that overflowed the
 *                  first one's log returned OK and the transaction was gone;
 *                  in the solo rounds: "acknowledged ... and is missing")
 *   --no-fork-close   no child closes the inherited connections (item 2: the
 *                  child's close released the parent's locks: the lock probe
 *                  committed; in WAL, the parent's later commits were lost)
 *   --no-unix-main    no unix-VFS main with atomio databases attached (item 3:
 *                  a writer killed after the super-journal was deleted left
 *                  the atomio half out: "half a transaction")
 * Other switches: --no-attach --no-fork --no-large --no-kill
 * --no-ckpt --no-readers, --solo 0 (no solo rounds), --kinds (drop WAL or
 * unix databases).
 * Power cuts are not simulated here (t_sqlite_sim does, for one process):
 * the unix-VFS databases, SQLite's WAL index and every process's locks do
 * not go through atomio's system-call table, which the simulator replays.
 *
 *   t_sqlite_x [--kinds dwDms] [--writers 2] [--readers 1] [--conns 2]
 *              [--tx 180] [--rounds 3] [--solo 2] [--threads 3] [--kills 1]
 *              [--selfkill 40]
 *              [--fork 25] [--large 25] [--deep 4] [flags]   ATOMIO_SEED=S
 * (--solo N: every N-th round has one writer process and no readers;
 * --threads N: every N-th round but a solo one runs each connection of a
 * process on a thread of its own (no forks then);
 * --selfkill N, --fork N, --large N, --deep N: about one in N transactions,
 * operations, transactions, reads.)
 */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "sq_t.h"

#define MAXDB 8
#define MAXTX 100000
#define LOG_SIZE (1 << 20)

/* ST_FAILED: rolled back, or failed before its COMMIT: never present.
 * ST_CFAILED: its COMMIT returned an error: in all or none of an atomic set
 * (SQLite commits no part of it), elsewhere possibly in some of the
 * databases (a WAL database commits in phase one, before a later database
 * can fail; SQLite's per-database atomicity), whole in each. */
enum { ST_UNUSED, ST_INFLIGHT, ST_ACKED, ST_FAILED, ST_CFAILED };

struct txrec {
	_Atomic int state;
	_Atomic unsigned mask;
};

struct shm {
	_Atomic long next_tx, nack;
	long limit;          /* ids below it may be taken (this round's) */
	_Atomic int stop_readers;
	_Atomic long switches, commits, busy, errors, rollbacks, reads, ckpts, forks, probes, large, multi, selfkills, childtx;
	char act[64][80]; /* what each process is doing (SQX_DEBUG's dump) */
	_Atomic uint32_t acklog[MAXTX]; /* acknowledged ids + 1, in order (0: being written) */
	struct txrec tx[MAXTX];
};

static struct shm *S;
static uint64_t g_seed;
static int g_ndb, g_writers = 2, g_readers = 1, g_conns = 2, g_rounds = 3, g_kills = 1;
static long g_tx = T_SCALE(180);
static int g_solo = 2, g_selfkill = 40, g_fork = 25, g_large = 25, g_deep = 4;
static int g_threads = 3;
static bool g_threaded; /* this round: a thread per connection */
static bool g_attach = true, g_ckpt = true, g_large_multi = true, g_fork_close = true, g_unix_main = true;
static char g_kinds[MAXDB + 1] = "dwDms";
static char g_path[MAXDB][4200];

static bool k_atomio(int d) { return g_kinds[d] == 'd' || g_kinds[d] == 'm' || g_kinds[d] == 'w' || g_kinds[d] == 's'; }
/* WAL, or may be (s: switched between WAL and DELETE as the run goes) */
static bool k_wal(int d) { return g_kinds[d] == 'w' || g_kinds[d] == 'W' || g_kinds[d] == 's'; }
static bool k_delete(int d) { return g_kinds[d] == 'd' || g_kinds[d] == 'D'; }

/* Does SQLite (or the VFS) promise that a transaction over the databases
 * of mask commits in all or none of them? */
static bool atomic_set(unsigned mask)
{
	bool all_atomio = true, all_delete = true;
	for (int d = 0; d < g_ndb; d++) {
		if (!(mask & (1u << d)))
			continue;
		if (k_wal(d))
			return false;
		all_atomio &= k_atomio(d);
		all_delete &= k_delete(d);
	}
	return all_atomio || all_delete;
}

/* ---- deterministic bytes and random numbers ---- */

struct rng {
	uint64_t s;
};
static uint64_t rnd(struct rng *r) { return r->s = sq_mix(r->s); }
static unsigned rndn(struct rng *r, unsigned n) { return (unsigned)(rnd(r) % n); }

static void gen(uint8_t *b, size_t len, long txid, int d, long k)
{
	uint64_t x = sq_mix(g_seed ^ sq_mix((uint64_t)txid * 64 + (uint64_t)d) ^ ((uint64_t)k << 40)) | 1;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(b + i, &x, 8);
	}
	x ^= x << 13, x ^= x >> 7, x ^= x << 17;
	for (; i < len; i++)
		b[i] = (uint8_t)(x >> (8 * (i & 7)));
}

/* ---- connections ---- */

static bool soft(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

/* A busy database ends the read (returned); anything else fails the test. */
#define SOFT_OR_FAIL(rc, ...)              \
	do {                               \
		if (soft(rc))              \
			return rc;         \
		FAIL(__VA_ARGS__);         \
	} while (0)


static int g_who; /* for messages: worker slot (+32 in a forked child) */
static pid_t g_driver; /* the test's own process */

/* The driver exits (its directory removed at exit); a worker or child
 * leaves the directory to the driver. */
static void fail_exit(void)
{
	if (getpid() == g_driver)
		exit(1);
	_exit(1);
}

static void act(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = snprintf(S->act[g_who], sizeof(S->act[0]), "pid %d: ", getpid());
	vsnprintf(S->act[g_who] + n, sizeof(S->act[0]) - (size_t)n, fmt, ap);
	va_end(ap);
}
static bool g_creating; /* create_all: WAL set where asked */

#define FAIL(...)                                                                  \
	do {                                                                       \
		fprintf(stderr, "FAIL [pid %d w%d] %s:%d: ", getpid(), g_who, __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__);                                      \
		fprintf(stderr, "\n");                                             \
		fflush(stderr);                                                    \
		fail_exit();                                                       \
	} while (0)

struct conn {
	sqlite3 *db;
	int main;      /* index of the main database */
	unsigned mask; /* databases on this connection */
	char name[MAXDB][16];
};

static void xexec(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	if (sqlite3_exec(db, sql, 0, 0, &err) != SQLITE_OK) {
		if (getenv("SQX_DEBUG")) {
			char cmd[4400];
			struct stat sb;
			const char *fn = sqlite3_db_filename(db, "main");
			stat(fn, &sb);
			fprintf(stderr, "DEBUG: %s (inode %lu) busy; locks on it, by process:\n", fn, (unsigned long)sb.st_ino);
			for (int i = 0; i < 64; i++)
				if (S->act[i][0])
					fprintf(stderr, "  slot %d: %s\n", i, S->act[i]);
			snprintf(cmd, sizeof(cmd), "grep ':%lu ' /proc/locks; grep -H ':%lu ' /proc/[0-9]*/fdinfo/* 2>/dev/null",
				 (unsigned long)sb.st_ino, (unsigned long)sb.st_ino);
			if (system(cmd)) {}
		}
		FAIL("'%s': %s (%d)", sql, err ? err : "?", sqlite3_extended_errcode(db));
	}
}

static void uri(char *out, size_t n, int d, bool attach)
{
	if (k_atomio(d))
		snprintf(out, n, "file:%s?vfs=atomio&atomio_log_size=%d", g_path[d], LOG_SIZE);
	else
		snprintf(out, n, "file:%s%s", g_path[d], attach ? "?vfs=unix" : "");
}

/* Per connection: synchronous=FULL, a small cache (transactions spill),
 * and MEMORY mode where asked (DELETE is the default; WAL is set once, at
 * creation, and persists).  The journal_mode pragma reads the database: it
 * may be busy (a writer's EXCLUSIVE), then is tried again. */
static void schema_setup(sqlite3 *db, int d, const char *s, bool create, int cache)
{
	char sql[256];
	const char *jm = g_kinds[d] == 'm' ? "MEMORY" : create && k_wal(d) && g_kinds[d] != 's' ? "WAL" : NULL;
	int n = snprintf(sql, sizeof(sql), "PRAGMA %s.synchronous=FULL; PRAGMA %s.cache_size=%d", s, s, cache);
	if (jm)
		snprintf(sql + n, sizeof(sql) - (size_t)n, "; PRAGMA %s.journal_mode=%s", s, jm);
	for (int i = 0;; i++) {
		int rc = sqlite3_exec(db, sql, 0, 0, 0);
		if (rc == SQLITE_OK)
			return;
		if (!soft(rc) || i == 20)
			FAIL("'%s': %s (%d)", sql, sqlite3_errmsg(db), sqlite3_extended_errcode(db));
		atomic_fetch_add(&S->busy, 1);
		usleep(10000);
	}
}

/* A connection with main database m and (attach) every one after it;
 * cache_size 64 pages (large transactions spill) or 4000 (they do not). */
static _Thread_local bool g_small_cache = true;
static void conn_open(struct conn *c, int m, bool attach, int busy_ms)
{
	int cache = g_small_cache ? 64 : 4000;
	bool create = g_creating;
	char u[4400], sql[4600];
	memset(c, 0, sizeof(*c));
	c->main = m;
	uri(u, sizeof(u), m, false);
	int rc = sqlite3_open_v2(u, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
				 k_atomio(m) ? "atomio" : NULL);
	if (rc != SQLITE_OK)
		FAIL("open %s: %s", u, c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
	sqlite3_busy_timeout(c->db, busy_ms);
	snprintf(c->name[m], sizeof(c->name[m]), "main");
	schema_setup(c->db, m, "main", create, cache);
	c->mask = 1u << m;
	for (int d = m + 1; attach && d < g_ndb; d++) {
		uri(u, sizeof(u), d, true);
		snprintf(c->name[d], sizeof(c->name[d]), "x%d", d);
		snprintf(sql, sizeof(sql), "ATTACH '%s' AS x%d", u, d);
		xexec(c->db, sql);
		schema_setup(c->db, d, c->name[d], create, cache);
		c->mask |= 1u << d;
	}
}

static void conn_close(struct conn *c)
{
	int rc = sqlite3_close(c->db);
	if (rc != SQLITE_OK)
		FAIL("close: %s", sqlite3_errstr(rc));
	c->db = NULL;
}

static int prep(sqlite3 *db, const char *sql, sqlite3_stmt **s)
{
	return sqlite3_prepare_v2(db, sql, -1, s, NULL);
}

/* ---- the check ---- */

struct seen {
	int nrows;
	long bytes;
	unsigned mask;
	bool t; /* t row present */
};

static _Thread_local struct seen *g_seen[MAXDB]; /* per database, per txid (the last check's) */



/* Read database d on connection c (inside the caller's transaction) into
 * g_seen[d] and check it whole.  deep: every row's bytes too.  Returns
 * SQLITE_OK, or a busy code (the caller gives up the read). */
static int check_db(struct conn *c, int d, bool deep)
{
	char sql[256];
	sqlite3_stmt *s;
	long lim = S->limit;
	struct seen *sn = g_seen[d];
	memset(sn, 0, sizeof(*sn) * (size_t)lim);
	long nt = 0;
	snprintf(sql, sizeof(sql), "SELECT txid, mask, nrows, bytes FROM %s.t", c->name[d]);
	int rc = prep(c->db, sql, &s);
	if (rc)
		SOFT_OR_FAIL(rc, "%s: %s", sql, sqlite3_errmsg(c->db));
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		long id = sqlite3_column_int64(s, 0);
		if (id < 0 || id >= lim)
			FAIL("db %d: t holds txid %ld (ids < %ld)", d, id, lim);
		sn[id].t = true;
		sn[id].mask = (unsigned)sqlite3_column_int64(s, 1);
		nt++;
		int nr = sqlite3_column_int(s, 2);
		long by = sqlite3_column_int64(s, 3);
		sn[id].nrows = -nr; /* counted up by r below */
		sn[id].bytes = -by;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		SOFT_OR_FAIL(rc, "db %d: reading t: %s", d, sqlite3_errmsg(c->db));
	snprintf(sql, sizeof(sql), deep ? "SELECT txid, k, v FROM %s.r" : "SELECT txid, k, length(v) FROM %s.r",
		 c->name[d]);
	if ((rc = prep(c->db, sql, &s)))
		SOFT_OR_FAIL(rc, "%s: %s", sql, sqlite3_errmsg(c->db));
	uint8_t *buf = NULL;
	size_t cap = 0;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		long id = sqlite3_column_int64(s, 0), k = sqlite3_column_int64(s, 1);
		if (id < 0 || id >= lim || k < 0)
			FAIL("db %d: r holds (txid %ld, k %ld): not a committed row", d, id, k);
		long len;
		if (deep) {
			len = sqlite3_column_bytes(s, 2);
			const void *v = sqlite3_column_blob(s, 2);
			if ((size_t)len > cap) {
				free(buf);
				buf = malloc(cap = (size_t)len);
				CHECK(buf);
			}
			gen(buf, (size_t)len, id, d, k);
			if (len && memcmp(v, buf, (size_t)len))
				FAIL("db %d: row (txid %ld, k %ld) of %ld bytes: wrong bytes", d, id, k, len);
		} else {
			len = sqlite3_column_int64(s, 2);
		}
		sn[id].nrows++;
		sn[id].bytes += len;
	}
	free(buf);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		SOFT_OR_FAIL(rc, "db %d: reading r: %s", d, sqlite3_errmsg(c->db));
	snprintf(sql, sizeof(sql), "SELECT n FROM %s.c", c->name[d]);
	if ((rc = prep(c->db, sql, &s)))
		SOFT_OR_FAIL(rc, "%s: %s", sql, sqlite3_errmsg(c->db));
	rc = sqlite3_step(s);
	long n = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
	sqlite3_finalize(s);
	if (rc != SQLITE_ROW)
		SOFT_OR_FAIL(rc, "db %d: reading c: %s", d, sqlite3_errmsg(c->db));
	if (n != nt)
		FAIL("db %d: c.n = %ld but t has %ld transactions (an update lost or half a transaction)", d, n, nt);
	for (long id = 0; id < lim; id++) {
		if (!sn[id].t && !sn[id].nrows)
			continue;
		if (!sn[id].t)
			FAIL("db %d: txid %ld has %d rows but no t row: half a transaction", d, id, sn[id].nrows);
		if (sn[id].nrows || sn[id].bytes)
			FAIL("db %d: txid %ld: rows %+d, bytes %+ld against its t row: half a transaction", d, id,
			     sn[id].nrows, sn[id].bytes);
		int st = atomic_load(&S->tx[id].state);
		unsigned m = atomic_load(&S->tx[id].mask);
		if (st == ST_UNUSED || st == ST_FAILED)
			FAIL("db %d: txid %ld is present but %s", d, id,
			     st == ST_UNUSED ? "was never begun" : "its COMMIT failed (or it was rolled back)");
		if (sn[id].mask != m || !(m & (1u << d)))
			FAIL("db %d: txid %ld: mask %#x, model %#x", d, id, sn[id].mask, m);
		sn[id].nrows = 1; /* present */
	}
	return SQLITE_OK;
}

/* One read transaction on c over all its databases: each whole, and every
 * transaction acknowledged before it began present. */
static int reader_check(struct conn *c, bool deep)
{
	long nack = atomic_load(&S->nack);
	act("read on conn main %d", c->main);
	int rc = sqlite3_exec(c->db, "BEGIN", 0, 0, 0);
	if (rc)
		FAIL("BEGIN: %s", sqlite3_errmsg(c->db));
	for (int d = 0; d < g_ndb; d++) {
		if (!(c->mask & (1u << d)))
			continue;
		if ((rc = check_db(c, d, deep)) != SQLITE_OK) {
			sqlite3_exec(c->db, "ROLLBACK", 0, 0, 0);
			atomic_fetch_add(&S->busy, 1);
			return rc;
		}
	}
	for (long i = 0; i < nack; i++) {
		uint32_t v = atomic_load(&S->acklog[i]);
		if (!v)
			continue; /* acknowledged as the read began */
		long id = (long)v - 1;
		unsigned m = atomic_load(&S->tx[id].mask) & c->mask;
		for (int d = 0; d < g_ndb; d++)
			if ((m & (1u << d)) && !g_seen[d][id].nrows)
				FAIL("db %d: txid %ld was acknowledged before this read began, and is missing", d, id);
	}
	/* across databases: a transaction over an atomic set (no WAL database
	 * in it) is in all of them that this read holds or in none: the read
	 * holds SHARED on each, so no commit lands between its reads of two */
	for (long id = 0; id < S->limit; id++) {
		unsigned m = atomic_load(&S->tx[id].mask), in = m & c->mask, have = 0;
		for (int d = 0; d < g_ndb; d++)
			if ((in & (1u << d)) && g_seen[d][id].nrows)
				have |= 1u << d;
		if (have && have != in && atomic_set(m))
			FAIL("txid %ld over %#x, an atomic set: this read finds it in %#x of %#x: half a transaction", id,
			     m, have, in);
	}
	xexec(c->db, "COMMIT");
	atomic_fetch_add(&S->reads, 1);
	return SQLITE_OK;
}

/* ---- writing ---- */

/* A statement of a write transaction: its result goes to write_tx's
 * failure path (busy and I/O errors count as failures, corruption fails). */
static int step_exec(sqlite3 *db, const char *sql) { return sqlite3_exec(db, sql, 0, 0, 0); }

static void maybe_selfkill(struct rng *r, int where)
{
	if (g_selfkill && rndn(r, (unsigned)g_selfkill * 2) == (unsigned)where) {
		atomic_fetch_add(&S->selfkills, 1);
		fflush(NULL);
		raise(SIGKILL);
	}
}

static _Thread_local const char *g_stage;

/* One write transaction on c; the outcome recorded in the model. */
static void write_tx(struct conn *c, struct rng *r, bool may_kill)
{
	long id = atomic_fetch_add(&S->next_tx, 1);
	if (id >= S->limit)
		return;
	/* the databases: one of the connection's, or several */
	unsigned mask = 0;
	int nd = __builtin_popcount(c->mask);
	if (nd > 1 && rndn(r, 3))
		for (int d = 0; d < g_ndb; d++)
			if ((c->mask & (1u << d)) && rndn(r, 2))
				mask |= 1u << d;
	if (!mask) {
		int pick = (int)rndn(r, (unsigned)nd);
		for (int d = 0; d < g_ndb; d++)
			if ((c->mask & (1u << d)) && !pick--)
				mask = 1u << d;
	}
	bool multi = __builtin_popcount(mask) > 1;
	bool large = g_large && !rndn(r, (unsigned)g_large) && (!multi || g_large_multi);
	atomic_store(&S->tx[id].mask, mask);
	atomic_store(&S->tx[id].state, ST_INFLIGHT);
	act("write txid %ld mask %#x%s on conn main %d", id, mask, large ? " large" : "", c->main);
	int rc = step_exec(c->db, rndn(r, 3) ? "BEGIN IMMEDIATE" : "BEGIN");
	char sql[512];
	sqlite3_stmt *ins = NULL;
	uint8_t *buf = NULL;
	if (rc)
		goto fail;
	bool savepoint = !rndn(r, 6);
	for (int d = 0; d < g_ndb && !rc; d++) {
		if (!(mask & (1u << d)))
			continue;
		int nrows = large ? 40 + (int)rndn(r, 40) : 1 + (int)rndn(r, 8);
		long bytes = 0;
		snprintf(sql, sizeof(sql), "INSERT INTO %s.r VALUES(?, ?, ?)", c->name[d]);
		if ((rc = prep(c->db, sql, &ins)))
			break;
		for (int k = savepoint ? -2 : 0; k < nrows && !rc; k++) {
			if (k == -2)
				rc = step_exec(c->db, "SAVEPOINT sp");
			if (rc)
				break;
			size_t len = large ? 32768 : 16 + rndn(r, 2000);
			buf = realloc(buf, len);
			gen(buf, len, id, d, k);
			sqlite3_bind_int64(ins, 1, id);
			sqlite3_bind_int64(ins, 2, k);
			sqlite3_bind_blob(ins, 3, buf, (int)len, SQLITE_STATIC);
			rc = sqlite3_step(ins);
			rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
			sqlite3_reset(ins);
			if (k >= 0)
				bytes += (long)len;
			if (k == -1 && !rc)
				rc = step_exec(c->db, "ROLLBACK TO sp; RELEASE sp");
		}
		sqlite3_finalize(ins);
		ins = NULL;
		if (rc)
			break;
		snprintf(sql, sizeof(sql), "INSERT INTO %s.t VALUES(%ld, %u, %d, %ld); UPDATE %s.c SET n = n + 1",
			 c->name[d], id, mask, nrows, bytes, c->name[d]);
		rc = step_exec(c->db, sql);
		if (may_kill)
			maybe_selfkill(r, 0);
	}
	free(buf);
	if (rc)
		goto fail;
	if (!rndn(r, 15)) {
		if ((rc = step_exec(c->db, "ROLLBACK")))
			FAIL("ROLLBACK: %s", sqlite3_errmsg(c->db));
		atomic_store(&S->tx[id].state, ST_FAILED);
		atomic_fetch_add(&S->rollbacks, 1);
		return;
	}
	act("write txid %ld mask %#x: COMMIT", id, mask);
	g_stage = "COMMIT";
	rc = step_exec(c->db, "COMMIT");
	if (rc)
		goto fail;
	g_stage = NULL;
	if (may_kill)
		maybe_selfkill(r, 1);
	atomic_store(&S->tx[id].state, ST_ACKED);
	atomic_store(&S->acklog[atomic_fetch_add(&S->nack, 1)], (uint32_t)id + 1);
	atomic_fetch_add(&S->commits, 1);
	atomic_fetch_add(&S->multi, multi);
	atomic_fetch_add(&S->large, large);
	return;
fail:
	if (ins)
		sqlite3_finalize(ins);
	if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB)
		FAIL("txid %ld (mask %#x): %s: %s (%d)", id, mask, g_stage ? g_stage : "statement", sqlite3_errmsg(c->db),
		     sqlite3_extended_errcode(c->db));
	if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
		atomic_fetch_add(&S->busy, 1);
	} else {
		atomic_fetch_add(&S->errors, 1);
		fprintf(stderr, "[w%d] txid %ld (mask %#x%s): %s: %s (%d), counted as failed\n", g_who, id, mask,
			large ? ", large" : "", g_stage ? g_stage : "statement", sqlite3_errmsg(c->db),
			sqlite3_extended_errcode(c->db));
	}
	bool at_commit = g_stage != NULL;
	g_stage = NULL;
	if (!sqlite3_get_autocommit(c->db) && sqlite3_exec(c->db, "ROLLBACK", 0, 0, 0))
		FAIL("ROLLBACK after a failure: %s", sqlite3_errmsg(c->db));
	atomic_store(&S->tx[id].state, at_commit ? ST_CFAILED : ST_FAILED);
}

static void checkpoint(struct conn *c, struct rng *r)
{
	static const char *modes[] = {"PASSIVE", "FULL", "RESTART", "TRUNCATE"};
	char sql[128];
	act("checkpoint on conn main %d", c->main);
	for (int d = 0; d < g_ndb; d++) {
		if (!(c->mask & (1u << d)) || !k_wal(d) || rndn(r, 2))
			continue;
		if (g_kinds[d] == 's' && rndn(r, 2)) {
			/* the switch: SQLite refuses it (busy) while others use
			 * the database; WAL persists in the file, DELETE too (the
			 * other connections follow) */
			snprintf(sql, sizeof(sql), "PRAGMA %s.journal_mode=%s", c->name[d], rndn(r, 2) ? "WAL" : "DELETE");
			int rc = sqlite3_exec(c->db, sql, 0, 0, 0);
			if (rc && !soft(rc))
				FAIL("%s: %s", sql, sqlite3_errmsg(c->db));
			atomic_fetch_add(&S->switches, rc == SQLITE_OK);
			continue;
		}
		snprintf(sql, sizeof(sql), "PRAGMA %s.wal_checkpoint(%s)", c->name[d], modes[rndn(r, 4)]);
		int rc = sqlite3_exec(c->db, sql, 0, 0, 0);
		if (rc && !soft(rc))
			FAIL("%s: %s", sql, sqlite3_errmsg(c->db));
		atomic_fetch_add(&S->ckpts, 1);
	}
}

static int pick_main(struct rng *r)
{
	for (int tries = 0; tries < 64; tries++) {
		int m = rndn(r, 2) ? 0 : (int)rndn(r, (unsigned)g_ndb);
		if (g_unix_main || k_atomio(m) || !g_attach || m == g_ndb - 1)
			return m;
		/* a unix main with atomio databases after it: only with --unix-main */
		bool atomio_after = false;
		for (int d = m + 1; d < g_ndb; d++)
			atomio_after |= k_atomio(d);
		if (!atomio_after)
			return m;
	}
	return 0;
}

static void worker(int slot, int gen_no, bool is_reader);

/* Fork with the connections open.  During a read transaction of cs[0] on
 * a rollback database (when there is one), the parent then checks that
 * another connection of its own still cannot commit there. */
static void do_fork(struct conn *cs, int nc, struct rng *r, int slot)
{
	struct conn *hold = &cs[0];
	int probe_db = k_wal(hold->main) ? -1 : hold->main;
	bool in_read = probe_db >= 0 && rndn(r, 2);
	struct conn pr;
	if (in_read) {
		/* the probe's connection is opened (its schema read) before the
		 * read begins: opened during it, it could wait for a writer that
		 * waits for the read to end */
		conn_open(&pr, probe_db, false, 5000);
		char sql[128];
		snprintf(sql, sizeof(sql), "BEGIN; SELECT count(*) FROM main.t");
		if (sqlite3_exec(hold->db, sql, 0, 0, 0)) {
			sqlite3_exec(hold->db, "ROLLBACK", 0, 0, 0);
			atomic_fetch_add(&S->busy, 1);
			conn_close(&pr);
			return;
		}
	}
	uint64_t cseed = rnd(r);
	/* half the children close the connections they inherited (as SQLite
	 * allows), half leave them alone */
	bool close_them = g_fork_close && (cseed & 1);
	act("fork%s%s, conn main %d", in_read ? " in a read" : "", close_them ? ", the child closes" : "", hold->main);
	fflush(NULL);
	pid_t p = fork();
	if (p < 0)
		FAIL("fork: %s", strerror(errno));
	if (p == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (close_them)
			for (int i = 0; i < nc; i++)
				sqlite3_close(cs[i].db); /* may be busy (the read): then kept */
		/* during the parent's read, nothing more: a write here could wait
		 * for a writer that waits for the parent's SHARED lock, while the
		 * parent waits for this child */
		if (in_read)
			_exit(0);
		g_who += 32;
		struct rng cr = {cseed};
		struct conn own;
		conn_open(&own, pick_main(&cr), g_attach, 5000);
		for (int i = 0; i < 3; i++) {
			write_tx(&own, &cr, false);
			atomic_fetch_add(&S->childtx, 1);
		}
		reader_check(&own, true);
		conn_close(&own);
		_exit(0);
	}
	atomic_fetch_add(&S->forks, 1);
	int ws;
	if (waitpid(p, &ws, 0) != p || !WIFEXITED(ws) || WEXITSTATUS(ws))
		FAIL("the forked child of worker %d ended with status %#x", slot, ws);
	if (in_read) {
		/* the parent's SHARED lock on probe_db must hold: another
		 * connection of the parent cannot commit a change there */
		act("probe of db %d after the fork", probe_db);
		sqlite3_busy_timeout(pr.db, 0);
		int rc = sqlite3_exec(pr.db, "BEGIN IMMEDIATE; UPDATE main.c SET n = n; COMMIT", 0, 0, 0);
		if (rc == SQLITE_OK)
			FAIL("db %d: a connection committed while another connection of the same process held a read "
			     "transaction (from before a fork%s): the parent's lock is gone",
			     probe_db, close_them ? " whose child closed its copy" : "");
		if (!soft(rc))
			FAIL("probe: %s", sqlite3_errmsg(pr.db));
		/* conclusive where the probe got as far as the COMMIT (no other
		 * writer had the database) */
		if (!sqlite3_get_autocommit(pr.db)) {
			xexec(pr.db, "ROLLBACK");
			atomic_fetch_add(&S->probes, 1);
		}
		conn_close(&pr);
		xexec(hold->db, "COMMIT");
	}
}

static void seen_alloc(void)
{
	for (int d = 0; d < g_ndb; d++)
		CHECK(g_seen[d] = calloc((size_t)S->limit + 1, sizeof(struct seen)));
}

static void run_ops(struct conn *cs, int nc, struct rng *r, int slot, bool is_reader)
{
	for (long op = 0;; op++) {
		struct conn *c = &cs[rndn(r, (unsigned)nc)];
		if (is_reader) {
			if (atomic_load(&S->stop_readers))
				break;
			reader_check(c, g_deep && !rndn(r, (unsigned)g_deep));
			if (g_ckpt && !rndn(r, 4))
				checkpoint(c, r);
			continue;
		}
		if (atomic_load(&S->next_tx) >= S->limit)
			break;
		unsigned what = rndn(r, 20);
		if (what < 14)
			write_tx(c, r, true);
		else if (what < 17)
			reader_check(c, g_deep && !rndn(r, (unsigned)g_deep));
		else if (what < 19 && g_ckpt)
			checkpoint(c, r);
		else if (g_fork && !g_threaded && !rndn(r, (unsigned)(g_fork + 19) / 20))
			do_fork(cs, nc, r, slot);
	}
}

/* --threads: each connection of the process on a thread of its own. */
struct thr {
	pthread_t t;
	struct conn c;
	struct rng r;
	int slot;
	bool is_reader;
};

static void *thr_main(void *arg)
{
	struct thr *t = arg;
	seen_alloc();
	run_ops(&t->c, 1, &t->r, t->slot, t->is_reader);
	return NULL;
}

static void worker(int slot, int gen_no, bool is_reader)
{
	g_who = slot;
	struct rng r = {sq_mix(g_seed ^ ((uint64_t)slot << 32) ^ ((uint64_t)gen_no << 16) ^ 0x5eed)};
	seen_alloc();
	struct conn cs[8];
	int nc = g_conns;
	act("opening");
	for (int i = 0; i < nc; i++) {
		g_small_cache = rndn(&r, 2);
		conn_open(&cs[i], pick_main(&r), g_attach, is_reader ? 2000 : 5000);
	}
	if (g_threaded) {
		struct thr th[8];
		for (int i = 0; i < nc; i++) {
			th[i].c = cs[i];
			th[i].r.s = rnd(&r);
			th[i].slot = slot;
			th[i].is_reader = is_reader;
			CHECK_OK(pthread_create(&th[i].t, NULL, thr_main, &th[i]));
		}
		for (int i = 0; i < nc; i++) {
			CHECK_OK(pthread_join(th[i].t, NULL));
			cs[i] = th[i].c;
		}
	} else {
		run_ops(cs, nc, &r, slot, is_reader);
	}
	act("closing");
	for (int i = 0; i < nc; i++)
		conn_close(&cs[i]);
	act("done");
	fflush(NULL);
	_exit(0);
}

/* ---- the driver ---- */

static void create_all(void)
{
	g_creating = true;
	for (int d = 0; d < g_ndb; d++) {
		struct conn c;
		conn_open(&c, d, false, 5000);
		xexec(c.db, "CREATE TABLE IF NOT EXISTS r(txid INTEGER, k INTEGER, v BLOB, PRIMARY KEY(txid, k));"
			    "CREATE TABLE IF NOT EXISTS t(txid INTEGER PRIMARY KEY, mask, nrows, bytes);"
			    "CREATE TABLE IF NOT EXISTS c(n); INSERT INTO c SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM c)");
		conn_close(&c);
	}
	g_creating = false;
}

/* After a round: each database opened alone, then all together. */
static void final_check(int round)
{
	for (int d = g_ndb - 1; d >= 0; d--) {
		struct conn c;
		conn_open(&c, d, false, 5000);
		sq_integrity(c.db);
		if (reader_check(&c, true))
			FAIL("round %d: db %d busy with nobody else there", round, d);
		conn_close(&c);
	}
	struct conn c;
	bool ga = g_attach;
	conn_open(&c, 0, true, 5000);
	g_attach = ga;
	if (reader_check(&c, true))
		FAIL("round %d: busy with nobody else there", round);
	conn_close(&c);
	long present = 0, half = 0, lost = 0, cfailed_present = 0;
	for (long id = 0; id < S->limit; id++) {
		unsigned m = atomic_load(&S->tx[id].mask), have = 0;
		int st = atomic_load(&S->tx[id].state);
		for (int d = 0; d < g_ndb; d++)
			if (g_seen[d][id].nrows)
				have |= 1u << d;
		if (!have && st != ST_ACKED)
			continue;
		if (st == ST_ACKED && have != m) {
			fprintf(stderr, "FAIL round %d: txid %ld acknowledged over %#x but present in %#x only\n", round,
				id, m, have);
			lost++;
		} else if (have && have != m && atomic_set(m)) {
			fprintf(stderr,
				"FAIL round %d: txid %ld (%s) over %#x, an atomic set, present in %#x only: half a "
				"transaction\n",
				round, id, st == ST_INFLIGHT ? "in flight when its writer died" : "its COMMIT failed", m,
				have);
			half++;
		} else if (have && st == ST_CFAILED) {
			cfailed_present++;
		}
		present += have != 0;
	}
	printf("round %d%s: %ld transactions present; checked whole in every database%s\n", round,
	       g_threaded ? " (a thread per connection)" : g_solo && round % g_solo == 0 ? " (solo)" : "", present,
	       cfailed_present ? " (and present: transactions whose COMMIT failed)" : "");
	if (cfailed_present)
		printf("round %d: %ld transactions whose COMMIT returned an error are present (whole in each database)\n",
		       round, cfailed_present);
	fflush(stdout);
	if (lost || half)
		FAIL("round %d: %ld acknowledged transactions lost, %ld half", round, lost, half);
}

static pid_t spawn(int slot, int gen_no, bool is_reader)
{
	fflush(NULL);
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* none left looping if the test dies */
		setenv("ATOMIO_KEEP", "1", 1);    /* an exit() here leaves the directory to the driver */
		worker(slot, gen_no, is_reader);
	}
	return p;
}

static pid_t g_pids[64];
static void kill_all(void)
{
	for (int i = 0; i < 64; i++)
		if (g_pids[i] > 0)
			kill(g_pids[i], SIGKILL), waitpid(g_pids[i], NULL, 0), g_pids[i] = 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: t_sqlite_x [--kinds dwDms] [--writers N] [--readers N] [--conns N] [--tx N] "
			"[--rounds N] [--kills N] [--selfkill N] [--fork N] [--large N] [--deep N] [--no-large-multi] "
			"[--no-fork-close] [--no-unix-main] [--threads N] [--no-attach] [--no-fork] [--no-large] [--no-kill] [--no-ckpt] "
			"[--no-readers]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NUM(flag, var)                                       \
	if (!strcmp(a, flag)) {                              \
		if (!v)                                      \
			usage();                             \
		var = atol(v);                               \
		i++;                                         \
		continue;                                    \
	}
		NUM("--writers", g_writers) NUM("--readers", g_readers) NUM("--conns", g_conns) NUM("--tx", g_tx)
		NUM("--rounds", g_rounds) NUM("--kills", g_kills) NUM("--selfkill", g_selfkill) NUM("--fork", g_fork)
		NUM("--large", g_large) NUM("--deep", g_deep) NUM("--solo", g_solo) NUM("--threads", g_threads)
		if (!strcmp(a, "--kinds") && v) {
			snprintf(g_kinds, sizeof(g_kinds), "%s", v);
			i++;
		} else if (!strcmp(a, "--no-large-multi")) g_large_multi = false;
		else if (!strcmp(a, "--no-fork-close")) g_fork_close = false;
		else if (!strcmp(a, "--no-unix-main")) g_unix_main = false;
		else if (!strcmp(a, "--no-attach")) g_attach = false;
		else if (!strcmp(a, "--no-fork")) g_fork = 0;
		else if (!strcmp(a, "--no-large")) g_large = 0;
		else if (!strcmp(a, "--no-kill")) g_kills = 0, g_selfkill = 0;
		else if (!strcmp(a, "--no-ckpt")) g_ckpt = false;
		else if (!strcmp(a, "--no-readers")) g_readers = 0;
		else usage();
	}
	g_ndb = (int)strlen(g_kinds);
	if (g_ndb < 1 || g_ndb > MAXDB || strspn(g_kinds, "dmwsDW") != (size_t)g_ndb || g_conns < 1 || g_conns > 8 ||
	    g_writers < 1 || g_writers + g_readers > 32 || g_tx < 1 || g_tx >= MAXTX || g_rounds < 1)
		usage();
	g_seed = t_seed(1);
	g_driver = getpid();
	printf("kinds %s, %d writers, %d readers, %d connections each, %ld transactions in %d rounds (every %d-th "
	       "solo, every %d-th a thread per connection), %d kills a round, selfkill 1/%d, fork 1/%d, large 1/%d%s%s%s%s%s\n",
	       g_kinds, g_writers, g_readers, g_conns, g_tx, g_rounds, g_solo, g_threads, g_kills, g_selfkill, g_fork, g_large,
	       g_large_multi ? ", large multi" : "", g_fork_close ? ", fork-close" : "",
	       g_unix_main ? ", unix main" : "", g_attach ? "" : ", no attach", g_ckpt ? "" : ", no checkpoints");
	fflush(stdout);
	S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(S != MAP_FAILED);
	sq_register();
	t_dir();
	for (int d = 0; d < g_ndb; d++)
		snprintf(g_path[d], sizeof(g_path[d]), "%s/x%d.db", t_dir(), d);
	S->limit = g_tx;
	for (int d = 0; d < g_ndb; d++)
		CHECK(g_seen[d] = calloc((size_t)g_tx + 1, sizeof(struct seen)));
	create_all();
	struct rng r = {sq_mix(g_seed ^ 0xd41e)};
	int kills = 0, respawns = 0, gen_no = 0;
	for (int round = 1; round <= g_rounds; round++) {
		S->limit = g_tx * round / g_rounds;
		atomic_store(&S->stop_readers, 0);
		/* a solo round: one writer process, no readers (what a process
		 * alone does differently: its stores and locks are nobody else's) */
		bool solo = g_solo && round % g_solo == 0;
		g_threaded = !solo && g_threads && round % g_threads == 0;
		int nw = solo ? 1 : g_writers, np = solo ? 1 : g_writers + g_readers;
		for (int i = 0; i < np; i++)
			g_pids[i] = spawn(i, ++gen_no, i >= nw);
		int kills_left = g_kills;
		long next_kill_ms = kills_left ? 20 + (long)rndn(&r, 400) : -1;
		double t0 = sq_now();
		int alive = nw;
		bool failed = false;
		while (alive > 0 && !failed) {
			int ws;
			pid_t p = waitpid(-1, &ws, WNOHANG);
			if (p == 0) {
				if (next_kill_ms >= 0 && (sq_now() - t0) * 1000 >= next_kill_ms) {
					int slot = (int)rndn(&r, (unsigned)nw);
					if (g_pids[slot] > 0 && kill(g_pids[slot], SIGKILL) == 0)
						kills++;
					kills_left--;
					next_kill_ms = kills_left ? next_kill_ms + 20 + (long)rndn(&r, 400) : -1;
				}
				usleep(2000);
				continue;
			}
			CHECK(p > 0);
			int slot = -1;
			for (int i = 0; i < np; i++)
				if (g_pids[i] == p)
					slot = i;
			if (slot < 0)
				continue;
			g_pids[slot] = 0;
			if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
				alive -= slot < nw;
				continue;
			}
			if (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL && slot < nw) {
				if (atomic_load(&S->next_tx) < S->limit) {
					g_pids[slot] = spawn(slot, ++gen_no, false);
					respawns++;
				} else {
					alive--;
				}
				continue;
			}
			fprintf(stderr, "FAIL: worker %d (pid %d) ended with status %#x\n", slot, p, ws);
			failed = true;
		}
		atomic_store(&S->stop_readers, 1);
		for (int i = 0; i < np && !failed; i++) {
			int ws;
			if (g_pids[i] > 0) {
				CHECK(waitpid(g_pids[i], &ws, 0) == g_pids[i]);
				g_pids[i] = 0;
				if (!WIFEXITED(ws) || WEXITSTATUS(ws)) {
					fprintf(stderr, "FAIL: reader %d ended with status %#x\n", i, ws);
					failed = true;
				}
			}
		}
		if (failed) {
			kill_all();
			return 1;
		}
		/* nobody left: the in-flight transactions of killed writers are
		 * settled now (all or none of an atomic set, whole in each) */
		final_check(round);
	}
	printf("%ld transactions: %ld committed (%ld over several databases, %ld large), %ld rolled back, %ld busy, "
	       "%ld failed with an error; %ld reads checked, %ld checkpoints, %ld forks (%ld child transactions, "
	       "%ld lock probes), %ld journal mode switches run; %d kills, %ld self-kills, %d writers restarted\n",
	       g_tx, (long)S->commits, (long)S->multi, (long)S->large, (long)S->rollbacks, (long)S->busy,
	       (long)S->errors, (long)S->reads, (long)S->ckpts, (long)S->forks, (long)S->childtx, (long)S->probes, (long)S->switches,
	       kills, (long)S->selfkills, respawns);
	return 0;
}
