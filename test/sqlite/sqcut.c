/*
 * sqcut: an SQLite workload through the VFS with an oracle, for power cuts
 * on cutfs (test/sqlite/t_sqlite_cutfs.sh; issue 35's exerciser with power
 * cuts: SQLite's promise that a COMMIT that returned is there whole, and
 * none half).
 *
 *   sqcut write DIR SEED   transactions 1, 2, ... over DIR/a.db (main),
 *                          DIR/b.db (both rollback mode, the VFS's default:
 *                          one group over the two) and DIR/w.db (WAL), all
 *                          through the VFS, synchronous=FULL; transaction i
 *                          writes a seeded non-empty subset of them (some
 *                          large: more than the 1 MiB log holds); its
 *                          number and mask are printed once its COMMIT
 *                          returned OK
 *   sqcut check DIR SEED ACKS  each database opened alone through the VFS
 *                          (recovery): integrity_check ok; every
 *                          transaction acknowledged in ACKS (the writer's
 *                          output) is in every database it wrote, whole;
 *                          none but the one after the last acknowledged is
 *                          there unacknowledged; that one, over a and b
 *                          only, is in both or neither (one group)
 *
 * Rows: t(tx, k, v): transaction i writes rows k = 0..n-1 into each of its
 * databases, v a blob that is a function of (seed, i, k), n the same in
 * each; c(tx, n) one row saying n.  Exit 0 on success, 1 on a mismatch.
 */
#include <stdbool.h>
#include <stdint.h>

#include "sq_t.h"

#define LOG_SIZE (1 << 20)
#define MAXTX 100000

static const char *g_names[3] = {"a", "b", "w"};

static uint64_t tx_seed(uint64_t seed, long i) { return sq_mix(seed * 1000003u + (uint64_t)i); }

static uint64_t g_seed;

/* sqcut_v(i, k): 1000 bytes, a function of (seed, i, k) */
static void fn_v(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	unsigned char b[1000];
	uint64_t x = sq_mix(tx_seed(g_seed, sqlite3_value_int64(argv[0])) ^ (uint64_t)sqlite3_value_int64(argv[1]));
	for (size_t j = 0; j < sizeof(b); j += 8) {
		x = sq_mix(x + j);
		memcpy(b + j, &x, sizeof(b) - j < 8 ? sizeof(b) - j : 8);
	}
	sqlite3_result_blob(ctx, b, sizeof(b), SQLITE_TRANSIENT);
}

static sqlite3 *open_one(const char *path)
{
	sqlite3 *db = sq_open_vfs(path, "atomio", LOG_SIZE);
	sqlite3_busy_timeout(db, 5000);
	SQ_CHECK(db, sqlite3_create_function(db, "sqcut_v", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, fn_v, NULL,
					     NULL));
	return db;
}


/* Transaction i's databases (bit 0 a, 1 b, 2 w) and its rows per database. */
static void plan(uint64_t seed, long i, unsigned *mask, int *rows)
{
	uint64_t r = tx_seed(seed, i);
	*mask = (unsigned)(r % 7) + 1;
	*rows = (r >> 8) % 16 == 0 ? 700 : 1 + (int)((r >> 16) % 8); /* 700 KB a database: large */
}

static void open_all(const char *dir, sqlite3 **out)
{
	char p[4000], sql[9000];
	snprintf(p, sizeof(p), "%s/a.db", dir);
	sqlite3 *db = open_one(p);
	for (int i = 1; i < 3; i++) {
		snprintf(sql, sizeof(sql), "ATTACH 'file:%s/%s.db?vfs=atomio&atomio_log_size=%d' AS %s", dir,
			 g_names[i], LOG_SIZE, g_names[i]);
		sq_ok(db, sql);
	}
	sq_ok(db, "PRAGMA main.synchronous=FULL; PRAGMA b.synchronous=FULL; PRAGMA w.synchronous=FULL;"
		  "PRAGMA w.journal_mode=WAL");
	for (int i = 0; i < 3; i++) {
		snprintf(sql, sizeof(sql),
			 "CREATE TABLE IF NOT EXISTS %s.t(tx, k, v); CREATE TABLE IF NOT EXISTS %s.c(tx PRIMARY KEY, n)",
			 i ? g_names[i] : "main", i ? g_names[i] : "main");
		sq_ok(db, sql);
	}
	*out = db;
}

static int do_write(const char *dir, uint64_t seed)
{
	sqlite3 *db;
	open_all(dir, &db);
	char sql[512];
	for (long i = 1; i < MAXTX; i++) {
		unsigned mask;
		int rows;
		plan(seed, i, &mask, &rows);
		int rc = sqlite3_exec(db, "BEGIN", 0, 0, 0);
		for (int d = 0; d < 3 && rc == SQLITE_OK; d++) {
			if (!(mask & (1u << d)))
				continue;
			const char *s = d ? g_names[d] : "main";
			/* v: 1000 bytes of (seed, i, k) (check recomputes them) */
			snprintf(sql, sizeof(sql),
				 "WITH RECURSIVE n(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM n WHERE k < %d) "
				 "INSERT INTO %s.t SELECT %ld, k, sqcut_v(%ld, k) FROM n; INSERT INTO %s.c VALUES(%ld, %d)",
				 rows - 1, s, i, i, s, i, rows);
			rc = sqlite3_exec(db, sql, 0, 0, 0);
		}
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db, "COMMIT", 0, 0, 0);
		if (rc != SQLITE_OK) {
			fprintf(stderr, "sqcut: transaction %ld: %s\n", i, sqlite3_errmsg(db));
			sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
			return 1; /* the power is gone (EIO), or a real failure: the check tells */
		}
		printf("%ld %u\n", i, mask);
		fflush(stdout);
	}
	sqlite3_close(db);
	return 0;
}

/* In database d (opened alone): transaction i's state: 1 whole, 0 absent,
 * -1 partial or wrong. */
static int tx_state(sqlite3 *db, long i, int want_rows)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM c WHERE tx = %ld", i);
	long long c = sq_int(db, sql);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM t WHERE tx = %ld", i);
	long long n = sq_int(db, sql);
	if (c == 0 && n == 0)
		return 0;
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM t WHERE tx = %ld AND v = sqcut_v(tx, k)", i);
	long long good = sq_int(db, sql);
	return c == 1 && n == want_rows && good == n ? 1 : -1;
}

static int do_check(const char *dir, const char *acks, uint64_t seed)
{
	FILE *f = fopen(acks, "r");
	CHECK(f != NULL);
	long last = 0, i;
	unsigned m;
	static unsigned char acked[MAXTX];
	while (fscanf(f, "%ld %u", &i, &m) == 2 && i > 0 && i < MAXTX) {
		acked[i] = 1;
		last = i;
	}
	fclose(f);
	int bad = 0;
	int st[3][2] = {{0}}; /* the one after the last acknowledged, per database: state */
	for (int d = 0; d < 3; d++) {
		char p[4000];
		snprintf(p, sizeof(p), "%s/%s.db", dir, g_names[d]);
		sqlite3 *db = open_one(p);
		sq_integrity(db);
		long max = sq_int(db, "SELECT coalesce(max(tx), 0) FROM c");
		for (i = 1; i <= max || i <= last; i++) {
			unsigned mask;
			int rows;
			plan(seed, i, &mask, &rows);
			bool mine = mask & (1u << d);
			int s = mine ? tx_state(db, i, rows) : 0;
			if (s < 0 || (!mine && (i <= max) && tx_state(db, i, 1) != 0)) {
				printf("%s: transaction %ld is there in part or where it did not write\n", g_names[d], i);
				bad++;
			} else if (mine && i <= last && acked[i] && s != 1) {
				printf("%s: transaction %ld was acknowledged and is missing\n", g_names[d], i);
				bad++;
			} else if (s == 1 && !acked[i] && i != last + 1) {
				printf("%s: transaction %ld was never acknowledged (last %ld) and is there\n", g_names[d], i,
				       last);
				bad++;
			}
			if (i == last + 1)
				st[d][0] = s;
		}
		sqlite3_close(db);
	}
	unsigned mask;
	int rows;
	plan(seed, last + 1, &mask, &rows);
	if (mask == 3 && st[0][0] != st[1][0]) {
		printf("transaction %ld over a and b (one group) is in one of them only\n", last + 1);
		bad++;
	}
	printf("%s: %ld acknowledged transactions checked; the one in flight (%ld, over %s%s%s) %s\n",
	       bad ? "FAIL" : "ok", last, last + 1, mask & 1 ? "a" : "", mask & 2 ? "b" : "", mask & 4 ? "w" : "",
	       st[0][0] + st[1][0] + st[2][0] ? "is there" : "is not");
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	bool w = argc == 4 && !strcmp(argv[1], "write"), c = argc == 5 && !strcmp(argv[1], "check");
	if (!w && !c) {
		fprintf(stderr, "usage: sqcut write DIR SEED | sqcut check DIR SEED ACKS\n");
		return 2;
	}
	sq_register();
	g_seed = strtoull(argv[3], NULL, 10);
	return w ? do_write(argv[2], g_seed) : do_check(argv[2], argv[4], g_seed);
}
