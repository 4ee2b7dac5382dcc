/* What the SQLite benchmarks (bench-sqlite, bench-sqlite-readers,
 * bench-sqlite-writers) share: a clock, dying with SQLite's message,
 * running SQL, opening a database through a VFS in a journal mode, a
 * random generator, medians, the load average.  Messages start with the
 * program's name. */
#ifndef ATOMIO_BENCH_SQLITE_H
#define ATOMIO_BENCH_SQLITE_H

#include <errno.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static inline double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline void die(sqlite3 *db, const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, db ? sqlite3_errmsg(db) : "");
	exit(1);
}

static inline void exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	if (sqlite3_exec(db, sql, 0, 0, &err) != SQLITE_OK) {
		fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, sql, err);
		exit(1);
	}
}

/* path opened (created if need be) through vfs (NULL: SQLite's default),
 * journal_mode set to journal unless NULL, synchronous=FULL, a busy
 * timeout of busy_ms; dies on an error */
static inline sqlite3 *open_db(const char *path, const char *vfs, const char *journal, int busy_ms)
{
	sqlite3 *db = NULL;
	char uri[4400];
	snprintf(uri, sizeof(uri), "file:%s", path);
	if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, vfs) !=
	    SQLITE_OK)
		die(db, path);
	sqlite3_busy_timeout(db, busy_ms);
	if (journal) {
		char sql[64];
		snprintf(sql, sizeof(sql), "PRAGMA journal_mode=%s", journal);
		exec(db, sql);
	}
	exec(db, "PRAGMA synchronous=FULL");
	return db;
}

/* the benchmarks' table: ROWS rows (id, v = 0, 100 random bytes) */
static inline void fill_table(sqlite3 *db, int rows)
{
	char sql[512];
	exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER NOT NULL, pad BLOB)");
	snprintf(sql, sizeof(sql),
		 "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<%d) "
		 "INSERT INTO t SELECT i, 0, randomblob(100) FROM c",
		 rows);
	exec(db, sql);
}

/* a prepared statement of sql; dies on an error */
static inline sqlite3_stmt *prepare(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s;
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
		die(db, sql);
	return s;
}

static inline uint64_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* The benchmarks' transaction body: up ("UPDATE t SET v = v + 1 WHERE
 * id = ?") run on 8 random rows of ROWS; dies on an error */
static inline void update_8_rows(sqlite3 *db, sqlite3_stmt *up, int rows, uint64_t *seed)
{
	for (int j = 0; j < 8; j++) {
		sqlite3_bind_int(up, 1, (int)(rnd(seed) % (uint64_t)rows) + 1);
		if (sqlite3_step(up) != SQLITE_DONE)
			die(db, "update");
		sqlite3_reset(up);
	}
}

static inline int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* the median of v[0..n), n <= 64 */
static inline double median(const double *v, int n)
{
	double t[64];
	memcpy(t, v, sizeof(double) * (size_t)n);
	qsort(t, (size_t)n, sizeof(double), cmp_d);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* The benchmark's databases: a new directory wd (DIR/atomio-bench-WHAT-PID),
 * and in it, for each of the nmodes modes named in modes ("0".."9"), a
 * database mM.db of ROWS rows made through vfs[M] in journal[M]: path[M]
 * its path, use[0..n) the modes in order.  Returns n; dies on an error. */
#define BENCH_WD 4200
#define BENCH_PATH 4300
static inline int bench_dbs(const char *dir, const char *what, const char *modes, int nmodes,
			    const char *const *vfs, const char *const *journal, int busy_ms, int rows,
			    char wd[BENCH_WD], char (*path)[BENCH_PATH], int *use)
{
	snprintf(wd, BENCH_WD, "%s/atomio-bench-%s-%d", dir, what, (int)getpid());
	if (mkdir(wd, 0700) < 0) {
		fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, wd, strerror(errno));
		exit(1);
	}
	int n = 0;
	for (int m = 0; m < nmodes; m++)
		if (strchr(modes, '0' + m))
			use[n++] = m;
	for (int k = 0; k < n; k++) {
		int m = use[k];
		snprintf(path[m], BENCH_PATH, "%s/m%d.db", wd, m);
		sqlite3 *db = open_db(path[m], vfs[m], journal[m], busy_ms);
		fill_table(db, rows);
		sqlite3_close(db);
	}
	return n;
}

/* the 1-minute load average, -1 if unknown */
static inline double load(void)
{
	double l = -1;
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

#endif
