/*
 * sq_t.h: helpers for the SQLite VFS tests (test/sqlite/t_*.c), on top of t.h.
 */
#ifndef ATOMIO_SQ_T_H
#define ATOMIO_SQ_T_H

#include <sqlite3.h>
#include <stdbool.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#include "atomio_sqlite.h"
#include "t.h"

#define SQ_CHECK(db, expr)                                                                  \
	do {                                                                                \
		int _rc = (expr);                                                           \
		if (_rc != SQLITE_OK && _rc != SQLITE_DONE && _rc != SQLITE_ROW) {          \
			fprintf(stderr, "%s:%d: %s: rc=%d (%s) %s\n", __FILE__, __LINE__, #expr, \
				_rc, sqlite3_errstr(_rc), (db) ? sqlite3_errmsg(db) : "");  \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

static void sq_log(void *arg, int rc, const char *msg)
{
	(void)arg;
	if (!strncmp(msg, "atomio", 6) || getenv("SQ_LOG_ALL"))
		fprintf(stderr, "[sqlite log %d] %s\n", rc, msg);
}

static inline void sq_register(void)
{
	static int done;
	if (!done) {
		sqlite3_config(SQLITE_CONFIG_LOG, sq_log, NULL);
		CHECK_EQ(atomio_sqlite_register(NULL, 0), SQLITE_OK);
		done = 1;
	}
}

/* Open path through the atomio VFS (log_size 0: default) or, with vfs NULL,
 * through the default VFS. */
static inline sqlite3 *sq_open_vfs(const char *path, const char *vfs, long long log_size)
{
	char uri[4400];
	sqlite3 *db = NULL;
	sq_register();
	if (vfs && log_size)
		snprintf(uri, sizeof(uri), "file:%s?atomio_log_size=%lld", path, log_size);
	else
		snprintf(uri, sizeof(uri), "file:%s", path);
	int rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, vfs);
	if (rc != SQLITE_OK) {
		fprintf(stderr, "open %s (vfs %s): %s\n", path, vfs ? vfs : "default",
			db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		exit(1);
	}
	return db;
}

/* Through atomio, journal_mode=MEMORY (or $SQ_JOURNAL, e.g. DELETE for a
 * batch-atomic SQLite), synchronous=FULL, a 10 s busy timeout. */
static inline sqlite3 *sq_open(const char *path, long long log_size)
{
	sqlite3 *db = sq_open_vfs(path, "atomio", log_size);
	sqlite3_busy_timeout(db, 10000);
	char sql[128];
	const char *jm = getenv("SQ_JOURNAL");
	snprintf(sql, sizeof(sql), "PRAGMA journal_mode=%s; PRAGMA synchronous=FULL;", jm ? jm : "MEMORY");
	SQ_CHECK(db, sqlite3_exec(db, sql, 0, 0, 0));
	return db;
}

/* Through atomio in its default mode (no journal pragma), synchronous=FULL,
 * a busy timeout of busy_ms: each process of the tests of several. */
static inline sqlite3 *sq_open_default(const char *path, int busy_ms)
{
	sqlite3 *db = sq_open_vfs(path, "atomio", 0);
	sqlite3_busy_timeout(db, busy_ms);
	SQ_CHECK(db, sqlite3_exec(db, "PRAGMA synchronous=FULL", 0, 0, 0));
	return db;
}

/* The database at path and its log removed (either may be absent). */
static inline void sq_remove_db(const char *path)
{
	char lp[4200];
	snprintf(lp, sizeof(lp), "%s-atomio", path);
	unlink(path);
	unlink(lp);
}

static inline int sq_exec(sqlite3 *db, const char *sql) { return sqlite3_exec(db, sql, 0, 0, 0); }

static inline void sq_ok(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	int rc = sqlite3_exec(db, sql, 0, 0, &err);
	if (rc != SQLITE_OK) {
		fprintf(stderr, "exec '%s': %s (%d)\n", sql, err ? err : sqlite3_errstr(rc),
			sqlite3_extended_errcode(db));
		exit(1);
	}
}

/* First column of the first row as an integer; exits on error. */
static inline long long sq_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s;
	SQ_CHECK(db, sqlite3_prepare_v2(db, sql, -1, &s, NULL));
	int rc = sqlite3_step(s);
	if (rc != SQLITE_ROW) {
		fprintf(stderr, "query '%s': %s\n", sql, sqlite3_errmsg(db));
		exit(1);
	}
	long long v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

/* First column of the first row as text, copied to out. */
static inline void sq_text(sqlite3 *db, const char *sql, char *out, size_t n)
{
	sqlite3_stmt *s;
	SQ_CHECK(db, sqlite3_prepare_v2(db, sql, -1, &s, NULL));
	int rc = sqlite3_step(s);
	if (rc != SQLITE_ROW) {
		fprintf(stderr, "query '%s': %s\n", sql, sqlite3_errmsg(db));
		exit(1);
	}
	snprintf(out, n, "%s", (const char *)sqlite3_column_text(s, 0));
	sqlite3_finalize(s);
}

static inline void sq_integrity(sqlite3 *db)
{
	char r[256];
	sq_text(db, "PRAGMA integrity_check", r, sizeof(r));
	if (strcmp(r, "ok")) {
		fprintf(stderr, "integrity_check: %s\n", r);
		exit(1);
	}
}

/* A counter from PRAGMA atomio_stats ("commits", "checkpoints", ...). */
static inline long long sq_stat(sqlite3 *db, const char *name)
{
	char buf[512], key[64];
	sq_text(db, "PRAGMA atomio_stats", buf, sizeof(buf));
	snprintf(key, sizeof(key), "%s=", name);
	const char *p = strstr(buf, key);
	while (p && p != buf && p[-1] != ' ')
		p = strstr(p + 1, key);
	if (!p) {
		fprintf(stderr, "no %s in atomio_stats: %s\n", name, buf);
		exit(1);
	}
	return atoll(p + strlen(key));
}

static inline long long sq_file_size(const char *p)
{
	struct stat sb;
	if (stat(p, &sb) < 0) {
		perror(p);
		exit(1);
	}
	return (long long)sb.st_size;
}

/* A 64-bit hash of a whole file (FNV-1a), 0 if absent. */
static inline uint64_t sq_file_hash(const char *path, size_t *len)
{
	size_t n;
	uint8_t *b = t_slurp(path, &n);
	if (len)
		*len = n;
	if (!b)
		return 0;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	free(b);
	return h;
}

static inline double sq_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline uint64_t sq_mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* Append to sql (n of its cap bytes used) the ids of 8 distinct rows of
 * nrows (a multiple of 8), the j-th from sq_mix(base + j): "a,b,...,h".
 * The new length. */
static inline int sq_rows8(char *sql, size_t cap, int n, uint64_t base, int nrows)
{
	for (int j = 0; j < 8; j++)
		n += snprintf(sql + n, cap - (size_t)n, "%s%d", j ? "," : "",
			      (int)(sq_mix(base + (uint64_t)j) % (uint64_t)(nrows / 8)) * 8 + j + 1);
	return n;
}

/* A VFS over another (base) that exits the process right before (at 1) or
 * right after (at 2) deleting a super-journal, SQLite's commit point for a
 * transaction over several databases: sq_crash_vfs(base, name) registers
 * it, sq_crash_at(n) arms it (0: never).  One per test program. */
struct sq_crash {
	sqlite3_vfs vfs, *base;
	int at;
};
static inline struct sq_crash *sq_crash(void)
{
	static struct sq_crash c;
	return &c;
}
static inline int sq_cx_delete(sqlite3_vfs *v, const char *name, int sync)
{
	struct sq_crash *c = sq_crash();
	bool super = strstr(name, "-mj") != NULL;
	if (super && c->at == 1)
		_exit(0);
	int rc = c->base->xDelete(c->base, name, sync);
	if (super && c->at == 2)
		_exit(0);
	return rc;
}
static inline int sq_cx_open(sqlite3_vfs *v, sqlite3_filename n, sqlite3_file *f, int fl, int *o)
{
	return sq_crash()->base->xOpen(sq_crash()->base, n, f, fl, o);
}
static inline int sq_cx_access(sqlite3_vfs *v, const char *n, int fl, int *o)
{
	return sq_crash()->base->xAccess(sq_crash()->base, n, fl, o);
}
static inline int sq_cx_full(sqlite3_vfs *v, const char *n, int len, char *o)
{
	return sq_crash()->base->xFullPathname(sq_crash()->base, n, len, o);
}
static inline int sq_cx_random(sqlite3_vfs *v, int n, char *o)
{
	return sq_crash()->base->xRandomness(sq_crash()->base, n, o);
}
static inline int sq_cx_sleep(sqlite3_vfs *v, int us) { return sq_crash()->base->xSleep(sq_crash()->base, us); }
static inline int sq_cx_time(sqlite3_vfs *v, double *t)
{
	return sq_crash()->base->xCurrentTime(sq_crash()->base, t);
}
static inline int sq_cx_time64(sqlite3_vfs *v, sqlite3_int64 *t)
{
	return sq_crash()->base->xCurrentTimeInt64(sq_crash()->base, t);
}
static inline int sq_cx_error(sqlite3_vfs *v, int n, char *o)
{
	return sq_crash()->base->xGetLastError(sq_crash()->base, n, o);
}
static inline void sq_crash_vfs(const char *base, const char *name)
{
	struct sq_crash *c = sq_crash();
	c->base = sqlite3_vfs_find(base);
	CHECK(c->base);
	c->vfs = (sqlite3_vfs){.iVersion = 2, .szOsFile = c->base->szOsFile, .mxPathname = c->base->mxPathname,
			       .zName = name, .xOpen = sq_cx_open, .xDelete = sq_cx_delete, .xAccess = sq_cx_access,
			       .xFullPathname = sq_cx_full, .xRandomness = sq_cx_random, .xSleep = sq_cx_sleep,
			       .xCurrentTime = sq_cx_time, .xGetLastError = sq_cx_error,
			       .xCurrentTimeInt64 = sq_cx_time64};
	CHECK_EQ(sqlite3_vfs_register(&c->vfs, 0), SQLITE_OK);
}
static inline void sq_crash_at(int at) { sq_crash()->at = at; }

/* A process that joins the stores of paths (reads each through the VFS)
 * and keeps them open until *go is written or closed (sq_unhold). */
static inline pid_t sq_holder(const char *p1, const char *p2, int *go)
{
	int ready[2], gop[2];
	CHECK_OK(pipe(ready));
	CHECK_OK(pipe(gop));
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(ready[0]);
		close(gop[1]);
		sqlite3 *a = sq_open_vfs(p1, "atomio", 0);
		sqlite3 *b = p2 ? sq_open_vfs(p2, "atomio", 0) : NULL;
		sq_int(a, "SELECT count(*) FROM t");
		if (b)
			sq_int(b, "SELECT count(*) FROM t");
		char c = 'r';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		while (read(gop[0], &c, 1) < 0 && errno == EINTR) {
		}
		sqlite3_close(a);
		if (b)
			sqlite3_close(b);
		_exit(0);
	}
	close(ready[1]);
	close(gop[0]);
	char c;
	CHECK_EQ(read(ready[0], &c, 1), 1);
	close(ready[0]);
	*go = gop[1];
	return pid;
}

static inline void sq_unhold(pid_t pid, int go)
{
	close(go);
	int ws;
	CHECK(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

#endif
