/*
 * t_sqlite_turns: writer processes take turns at SQLite's write lock
 * (sqlite/turns.h).
 *
 *  1. The protocol (sqlite/turns.c) on words in memory shared with child
 *     processes: a release with no sleeper hands nothing off; a sleeper is
 *     woken by a release and handed the token, and the hand-off ends when
 *     the lock is taken (a token no longer pending ends nothing); a release
 *     that finds only a sleeper that is gone (its count left behind) ends
 *     its own hand-off at once; a pending hand-off to nobody ends after the
 *     yield's bound, and the one it was handed to does not yield to itself;
 *     a writer sleeping for EXCLUSIVE is woken when a SHARED lock is
 *     dropped.  Each wait here is woken or bounded; the times checked are
 *     "woken rather than timed out" (a 10 s sleep that must end within 5 s)
 *     and the yield's bound waited out (futex timeouts never end early).
 *  2. Four writer processes (BEGIN IMMEDIATE, 8 updated rows, COMMIT, a 20 s
 *     busy timeout) share TOTAL transactions, each taking the next while any
 *     are left: every one commits at least MIN_EACH of them (a 64th; with
 *     turns the fewest had 65-129 on a quiet machine and 33 or more beside
 *     8 CPU hogs with the ASan build; without turns the writer that commits
 *     first keeps the lock and the others commit 1 each, quiet or loaded:
 *     they sleep in their busy handlers and find it taken each time they
 *     wake; mutant noturns, test/t_sqlite_vfs_mutants.sh), no BUSY reaches
 *     a writer, and each one's count is what the database holds for it.
 */
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "sq_t.h"
#include "turns.h"

#define NW 4
#define TOTAL (NW * 4 * TURNS_STREAK)
#define MIN_EACH (TOTAL / 64)
#define NROWS 400

static struct turns *shared_turns(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	memset(p, 0, 4096);
	return p;
}

/* Wait (by count, 1 ms each) until *w == v; false if it never did. */
static bool until(_Atomic uint32_t *w, uint32_t v)
{
	for (int i = 0; i < 20000; i++) {
		if (atomic_load(w) == v)
			return true;
		usleep(1000);
	}
	return false;
}

/* A child that sleeps: for the write lock, 100 ms at a time until it is
 * handed it (out[0]: its token); for EXCLUSIVE, once for up to 10 s
 * (out[1]: 1 if it returned within 5 s). */
static pid_t child_sleep(struct turns *t, bool excl, _Atomic uint32_t *out)
{
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		double t0 = sq_now();
		uint32_t tok = 0;
		if (excl)
			tok = turns_sleep(t, true, 10ull * 1000000000u);
		for (int i = 0; !excl && !tok && i < 300; i++)
			tok = turns_sleep(t, false, 100u * 1000000u);
		atomic_store(&out[0], tok);
		atomic_store(&out[1], sq_now() - t0 < 5 ? 1 : 2);
		_exit(0);
	}
	return p;
}

/* Call poke until child p has exited (1 ms apart, by count); its status. */
static int poke_until_exit(pid_t p, struct turns *t, bool (*poke)(struct turns *))
{
	int st = -1;
	for (int i = 0; i < 20000; i++) {
		pid_t w = waitpid(p, &st, WNOHANG);
		CHECK(w >= 0);
		if (w == p)
			return st;
		if (poke && poke(t))
			poke = NULL; /* once it has woken the child */
		usleep(1000);
	}
	CHECK(!"the child never returned");
	return st;
}

static bool release_write(struct turns *t) { return turns_released_write(t); }
static bool release_shared(struct turns *t)
{
	turns_released_shared(t);
	return false; /* again until the child is gone: it may not sleep yet */
}

static void part1(void)
{
	struct turns *t = shared_turns();
	_Atomic uint32_t *out = (_Atomic uint32_t *)((char *)t + 1024);

	/* a. nobody asleep */
	CHECK(!turns_released_write(t));
	CHECK_EQ(atomic_load(&t->tok) & 1, 0);

	/* b. a sleeper handed the lock; taking it ends the hand-off.  A
	 * release may come before the child sleeps (from its count to its
	 * futex wait), or as its 100 ms end: it then hands nothing off, and the
	 * next one is tried. */
	pid_t p = child_sleep(t, false, out);
	CHECK(until(&t->nwait, 1));
	int st = poke_until_exit(p, t, release_write);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	uint32_t tok = atomic_load(&t->tok);
	CHECK_EQ(tok & 1, 1);
	CHECK_EQ(atomic_load(&out[0]), tok); /* handed: its token is the pending one */
	turns_yield(t, tok); /* the one handed to: no wait, nothing ended */
	CHECK_EQ(atomic_load(&t->tok), tok);
	turns_settled(t, tok + 2); /* a token not pending: nothing ends */
	CHECK_EQ(atomic_load(&t->tok), tok);
	turns_settled(t, tok);
	CHECK_EQ(atomic_load(&t->tok), tok + 1);
	CHECK_EQ(atomic_load(&t->nwait), 0);

	/* c. a sleeper counted but gone: the release ends its own hand-off */
	atomic_store(&t->nwait, 1);
	CHECK(!turns_released_write(t));
	CHECK_EQ(atomic_load(&t->tok), tok + 3); /* begun (odd) and ended */
	atomic_store(&t->nwait, 0);

	/* d. a hand-off nobody takes: a yielder waits out the bound and ends it */
	atomic_store(&t->tok, tok + 4);
	double t0 = sq_now();
	turns_yield(t, 0);
	CHECK(sq_now() - t0 >= TURNS_YIELD_NS / 1e9 * 0.9);
	CHECK_EQ(atomic_load(&t->tok), tok + 5);

	/* e. a writer sleeping for EXCLUSIVE, woken when a reader leaves */
	atomic_store(&out[1], 0);
	p = child_sleep(t, true, out);
	CHECK(until(&t->xwait, 1));
	st = poke_until_exit(p, t, release_shared);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ(atomic_load(&out[1]), 1);
	CHECK_EQ(atomic_load(&out[0]), 0);
	CHECK_EQ(atomic_load(&t->xwait), 0);
	munmap(t, 4096);
	printf("part 1: hand-off, its end, a gone sleeper, the yield's bound, EXCLUSIVE's wake: ok\n");
}

static const char *g_path;

static sqlite3 *open_db(void) { return sq_open_default(g_path, 20000); }

struct counts {
	_Atomic int go, left;
	_Atomic int n[NW], busy[NW];
};

static void writer(struct counts *c, int me)
{
	sqlite3 *db = open_db();
	while (!atomic_load(&c->go))
		usleep(1000);
	for (uint64_t k = 0; atomic_fetch_sub(&c->left, 1) > 0; k++) {
		char sql[512];
		int n = snprintf(sql, sizeof(sql), "BEGIN IMMEDIATE; UPDATE t SET v = v + 1 WHERE id IN (");
		n = sq_rows8(sql, sizeof(sql), n, (uint64_t)me * 1000003 + k * 8, NROWS);
		snprintf(sql + n, sizeof(sql) - (size_t)n, "); UPDATE w SET n = n + 1 WHERE id = %d; COMMIT",
			 me + 1);
		int rc = sq_exec(db, sql);
		if (rc != SQLITE_OK) {
			sq_exec(db, "ROLLBACK");
			if (rc == SQLITE_BUSY)
				atomic_fetch_add(&c->busy[me], 1);
			else
				_exit(1);
			atomic_fetch_add(&c->left, 1); /* not committed: still to do */
			continue;
		}
		atomic_fetch_add(&c->n[me], 1);
	}
	sqlite3_close(db);
	_exit(0);
}

static void part2(void)
{
	sq_remove_db(g_path);
	sqlite3 *db = open_db();
	char sql[512];
	snprintf(sql, sizeof(sql),
		 "CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER, pad BLOB);"
		 "CREATE TABLE w(id INTEGER PRIMARY KEY, n INTEGER); BEGIN;"
		 "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d)"
		 "  INSERT INTO t SELECT x, 0, randomblob(100) FROM c;"
		 "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d)"
		 "  INSERT INTO w SELECT x, 0 FROM c;",
		 NROWS, NW);
	sq_ok(db, sql);
	sq_ok(db, "COMMIT");
	sqlite3_close(db);

	struct counts *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(c != MAP_FAILED);
	memset((void *)c, 0, sizeof(*c));
	atomic_store(&c->left, TOTAL);
	pid_t p[NW];
	for (int i = 0; i < NW; i++) {
		p[i] = fork();
		CHECK(p[i] >= 0);
		if (p[i] == 0)
			writer(c, i);
	}
	usleep(100000); /* every writer open (a late one only starts later) */
	atomic_store(&c->go, 1);
	for (int i = 0; i < NW; i++) {
		int st;
		CHECK_EQ(waitpid(p[i], &st, 0), p[i]);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	db = open_db();
	int lo = TOTAL, hi = 0, sum = 0;
	printf("part 2: %d writer processes, %d transactions between them:", NW, TOTAL);
	for (int i = 0; i < NW; i++) {
		int n = atomic_load(&c->n[i]);
		printf(" %d", n);
		char q[64];
		snprintf(q, sizeof(q), "SELECT n FROM w WHERE id = %d", i + 1);
		CHECK_EQ(sq_int(db, q), n);
		CHECK_EQ(atomic_load(&c->busy[i]), 0);
		lo = n < lo ? n : lo;
		hi = n > hi ? n : hi;
		sum += n;
	}
	printf(" (fewest %d, most %d; each must have %d)\n", lo, hi, MIN_EACH);
	CHECK_EQ(sum, TOTAL);
	CHECK_EQ(sq_int(db, "SELECT sum(v) FROM t"), 8LL * TOTAL); /* 8 distinct rows each */
	sq_integrity(db);
	sqlite3_close(db);
	CHECK(lo >= MIN_EACH);
	munmap((void *)c, sizeof(*c));
}

int main(int argc, char **argv)
{
	g_path = t_path("turns.db");
	bool only2 = argc > 1 && !strcmp(argv[1], "--part2");
	if (!only2)
		part1();
	part2();
	printf("t_sqlite_turns: ok\n");
	return 0;
}
