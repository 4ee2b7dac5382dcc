/*
 * t_sqlite_xattach: a transaction over two databases (main and an ATTACHed
 * one) commits both or neither, with journal_mode=MEMORY, where SQLite itself
 * commits each database on its own, and in DELETE mode, whose journals the
 * VFS keeps in memory.
 *
 *  1. A writer process runs transactions that count in both databases
 *     (main.c.n and aux.c.n, always equal) and insert and delete blobs in
 *     both, and is SIGKILLed at random moments, many times.  After each
 *     kill, the ATTACHed database is first opened ALONE (its recovery must
 *     find the group that lies in main's log), then both: the counters are
 *     equal, integrity_check passes, and the count is what the writer saw
 *     acknowledged, or one more (the commit in flight).  Kills land after
 *     the writer's first commit, within 60 ms.  The test counts the
 *     kills that left the two-database markers behind (landed inside a
 *     two-database commit), and requires some.
 *  1b. Before that, a rollback journal with a zeroed header beside each
 *     database, as a writer killed in journal_mode=DELETE before its
 *     journal's first sync leaves it (SQLite neither plays it back nor
 *     deletes it, also not later in MEMORY mode): it is not the
 *     transaction's journal, so a transaction over both databases is still
 *     one group (main's store checkpoints after each); the kills of 1 run
 *     with those journals in place.
 *  1c. A transaction on the ATTACHed database alone, then one over both, and
 *     the writer dies without closing (as killed, the first group still
 *     live in the attached database's own log): reopened, both hold the
 *     second transaction's value (the own log's older group must not be
 *     replayed over the shared one: it was, and left a value neither
 *     transaction wrote, before the VFS checkpointed the other databases'
 *     stores ahead of a transaction over several).
 *  2. The same kills with journal_mode=DELETE (SQLite's default) on both
 *     databases: the VFS keeps their journals in memory, and the
 *     super-journal naming them too, so the set commits as one group as in
 *     MEMORY mode (markers left by some kills) and no super-journal is ever
 *     left on disk.
 *  2b. DELETE mode with the ATTACHed database opened through the unix VFS:
 *     its journal is on disk and names the super-journal, so the super-journal
 *     and main's journal go to disk too (the VFS commits main's group at its
 *     sync, SQLite's super-journal makes the set atomic): both or neither,
 *     no markers.
 *  2c. The same pair (main through atomio, aux through unix, DELETE mode),
 *     its writer dying exactly before, then exactly after SQLite deletes the
 *     super-journal (the transaction's commit point), through a VFS stacked
 *     on atomio that exits there: neither database has the transaction, then
 *     both (fails where main's group waited for phase two, or the
 *     super-journal stayed in memory).  `t_sqlite_xattach --super` runs 2c
 *     alone.
 *  3. Cost: the same transaction over one database and over two, ms each.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>

#include "sq_t.h"

#ifdef ATOMIO_SAN
#define KILL_SPAN_NS 150000000L
#else
#define KILL_SPAN_NS 60000000L
#endif

/* The journal mode of both databases (MEMORY or DELETE), and the VFS of the
 * ATTACHed one (atomio or unix). */
static const char *g_mode = "MEMORY", *g_aux_vfs = "atomio";

static sqlite3 *open_pair(const char *m, const char *a)
{
	sqlite3 *db = sq_open(m, 8 << 20);
	char sql[9000];
	snprintf(sql, sizeof(sql),
		 "PRAGMA main.journal_mode=%s; "
		 "ATTACH 'file:%s?vfs=%s' AS aux; PRAGMA aux.journal_mode=%s; "
		 "PRAGMA aux.synchronous=FULL; PRAGMA main.cache_size=20; PRAGMA aux.cache_size=20",
		 g_mode, a, g_aux_vfs, g_mode);
	sq_ok(db, sql);
	return db;
}

/* Transaction k: count in both, a blob of 1..9 KiB into each, and the blobs
 * of transaction k-6 out of each. */
static void tx(sqlite3 *db, long long k)
{
	char sql[1024];
	snprintf(sql, sizeof(sql),
		 "BEGIN; UPDATE main.c SET n = n + 1; UPDATE aux.c SET n = n + 1;"
		 "INSERT INTO main.b VALUES(%lld, randomblob(%lld));"
		 "INSERT INTO aux.b VALUES(%lld, randomblob(%lld));"
		 "DELETE FROM main.b WHERE k = %lld; DELETE FROM aux.b WHERE k = %lld; COMMIT",
		 k, 1024 * (1 + k % 9), k, 1024 * (1 + (k * 7) % 9), k - 6, k - 6);
	sq_ok(db, sql);
}

static void writer(const char *m, const char *a, int fd)
{
	sqlite3 *db = open_pair(m, a);
	long long k = sq_int(db, "SELECT n FROM main.c");
	for (;;) {
		tx(db, ++k);
		if (write(fd, &k, sizeof(k)) != sizeof(k))
			_exit(7);
	}
}

static bool exists(const char *path, const char *suffix)
{
	char p[4400];
	snprintf(p, sizeof(p), "%s%s", path, suffix);
	return access(p, F_OK) == 0;
}

/* Files named DB-mj* (SQLite's super-journals) beside database db. */
static int super_journals(const char *db)
{
	char dir[4200], pre[4200];
	snprintf(dir, sizeof(dir), "%s", db);
	char *sl = strrchr(dir, '/');
	CHECK(sl);
	*sl = 0;
	snprintf(pre, sizeof(pre), "%s-mj", sl + 1);
	DIR *d = opendir(dir);
	CHECK(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += !strncmp(e->d_name, pre, strlen(pre));
	closedir(d);
	return n;
}

/* The ATTACHed database alone, through its own VFS. */
static sqlite3 *open_aux(const char *a)
{
	if (!strcmp(g_aux_vfs, "atomio"))
		return sq_open(a, 0);
	sqlite3 *x = sq_open_vfs(a, NULL, 0);
	sqlite3_busy_timeout(x, 10000);
	return x;
}

/* Kill a writer of transactions over both databases `iters` times (n
 * transactions so far); after each kill, both counters are equal and what
 * the writer saw acknowledged, or one more.  Returns the transactions. */
static long long run_kills(const char *m, const char *a, long long n, int iters, int *marked,
			   int *inflight)
{
	*marked = *inflight = 0;
	for (int it = 0; it < iters; it++) {
		int p[2];
		CHECK_OK(pipe(p));
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			writer(m, a, p[1]);
			_exit(0);
		}
		close(p[1]);
		/* from the writer's first commit on (its start, recovery
		 * included, takes long on a loaded machine) */
		long long k1;
		CHECK_EQ(read(p[0], &k1, sizeof(k1)), (ssize_t)sizeof(k1));
		CHECK_EQ(k1, n + 1);
		uint64_t r = sq_mix((uint64_t)it * 7919 + 17);
		struct timespec ts = {0, (long)(2000000 + r % (uint64_t)KILL_SPAN_NS)};
		nanosleep(&ts, NULL);
		CHECK_OK(kill(pid, SIGKILL));
		int st;
		CHECK_EQ(waitpid(pid, &st, 0), pid);
		CHECK(WIFSIGNALED(st));
		long long last = k1, k;
		while (read(p[0], &k, sizeof(k)) == sizeof(k)) {
			CHECK_EQ(k, last + 1);
			last = k;
		}
		close(p[0]);
		int had = exists(m, "-atomio-group") * 2 + exists(a, "-atomio-group");
		*marked += had != 0;
		/* the attached database alone first: its recovery finds the
		 * shared group in main's log */
		sqlite3 *x = open_aux(a);
		long long na = sq_int(x, "SELECT n FROM c");
		sq_integrity(x);
		sqlite3_close(x);
		x = open_pair(m, a);
		long long nm = sq_int(x, "SELECT n FROM main.c");
		if (exists(m, "-atomio-group") || exists(a, "-atomio-group")) {
			fprintf(stderr, "kill %d: markers left after recovery: main %d, aux %d (before: %d)\n",
				it, exists(m, "-atomio-group"), exists(a, "-atomio-group"), had);
			exit(1);
		}
		CHECK_EQ(sq_int(x, "SELECT n FROM aux.c"), na);
		if (nm != na) {
			fprintf(stderr, "kill %d: main counts %lld, aux %lld\n", it, nm, na);
			exit(1);
		}
		if (nm != last && nm != last + 1) {
			fprintf(stderr, "kill %d: %lld transactions, %lld acknowledged\n", it, nm, last);
			exit(1);
		}
		*inflight += nm == last + 1;
		sq_integrity(x);
		if (!strcmp(g_aux_vfs, "atomio") && super_journals(m)) {
			fprintf(stderr, "kill %d: a super-journal left on disk beside %s\n", it, m);
			exit(1);
		}
		CHECK_EQ(sq_int(x, "SELECT count(*) FROM main.b"), sq_int(x, "SELECT count(*) FROM aux.b"));
		sqlite3_close(x);
		n = nm;
	}
	printf("journal_mode=%s, aux through %s, %d kills: %lld transactions, %d kills inside a "
	       "two-database commit (markers left), %d after its log write but before its "
	       "acknowledgement\n", g_mode, g_aux_vfs, iters, n, *marked, *inflight);
	return n;
}

/* 1c: aux's own log holds a group older than a shared one when the writer
 * dies. */
static void older_own_group(void)
{
	char m[4200], a[4200];
	snprintf(m, sizeof(m), "%s", t_path("om.db"));
	snprintf(a, sizeof(a), "%s", t_path("oa.db"));
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		sqlite3 *db = open_pair(m, a);
		sq_ok(db, "BEGIN; CREATE TABLE main.t(n); INSERT INTO main.t VALUES(0);"
			  "CREATE TABLE aux.t(n); INSERT INTO aux.t VALUES(0); COMMIT");
		sq_ok(db, "UPDATE aux.t SET n = 1");
		sq_ok(db, "BEGIN; UPDATE main.t SET n = 2; UPDATE aux.t SET n = 2; COMMIT");
		_exit(0); /* no close: as killed */
	}
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	sqlite3 *x = sq_open(a, 0);
	long long na = sq_int(x, "SELECT n FROM t");
	sq_integrity(x);
	sqlite3_close(x);
	x = open_pair(m, a);
	long long nm = sq_int(x, "SELECT n FROM main.t"), na2 = sq_int(x, "SELECT n FROM aux.t");
	sq_integrity(x);
	sqlite3_close(x);
	if (na != 2 || na2 != 2 || nm != 2) {
		fprintf(stderr, "aux alone, then both, then killed: aux alone reads %lld, then main %lld "
				"and aux %lld (2 expected)\n", na, nm, na2);
		exit(1);
	}
	printf("a transaction on aux alone, then over both, killed: both 2 after recovery\n");
}

/* A journal as SQLite begins it with synchronous=FULL: the header's magic
 * and record count zero until the journal's first sync. */
static void stale_journal(const char *db)
{
	char j[4400];
	snprintf(j, sizeof(j), "%s-journal", db);
	int fd = open(j, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	unsigned char buf[4616] = {0};
	buf[15] = 0x2a; /* a nonce; the first byte is what makes a journal hot */
	CHECK_EQ(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	close(fd);
}

/* 2c: "xcrash", the atomio VFS with an xDelete that exits the process
 * right before or right after deleting a super-journal. */
static void crash_at_super(void)
{
	sq_register();
	sq_crash_vfs("atomio", "xcrash");
	for (int at = 1; at <= 2; at++) {
		char m[4200], a[4200], sql[9000];
		snprintf(m, sizeof(m), "%s", t_path(at == 1 ? "cm1.db" : "cm2.db"));
		snprintf(a, sizeof(a), "%s", t_path(at == 1 ? "ca1.db" : "ca2.db"));
		snprintf(sql, sizeof(sql), "ATTACH 'file:%s?vfs=unix' AS aux; PRAGMA aux.synchronous=FULL; BEGIN;"
			 "CREATE TABLE main.c(n); INSERT INTO main.c VALUES(0);"
			 "CREATE TABLE aux.c(n); INSERT INTO aux.c VALUES(0); COMMIT", a);
		sqlite3 *db = sq_open_vfs(m, "atomio", 0);
		sq_ok(db, "PRAGMA synchronous=FULL");
		sq_ok(db, sql);
		sqlite3_close(db);
		fflush(stdout);
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			db = sq_open_vfs(m, "xcrash", 0);
			snprintf(sql, sizeof(sql), "PRAGMA synchronous=FULL; ATTACH 'file:%s?vfs=unix' AS aux;"
				 "PRAGMA aux.synchronous=FULL", a);
			sq_ok(db, sql);
			sq_crash_at(at);
			sq_ok(db, "BEGIN; UPDATE main.c SET n = 1; UPDATE aux.c SET n = 1; COMMIT");
			_exit(3); /* the crash did not happen */
		}
		int st;
		CHECK_EQ(waitpid(pid, &st, 0), pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		sqlite3 *x = sq_open_vfs(a, NULL, 0);
		long long na = sq_int(x, "SELECT n FROM c");
		sq_integrity(x);
		sqlite3_close(x);
		x = sq_open_vfs(m, "atomio", 0);
		long long nm = sq_int(x, "SELECT n FROM c");
		sq_integrity(x);
		sqlite3_close(x);
		if (nm != na || nm != at - 1) {
			fprintf(stderr, "2c. died %s the super-journal's deletion: main %lld, aux %lld (%d expected)\n",
				at == 1 ? "before" : "after", nm, na, at - 1);
			exit(1);
		}
	}
	printf("2c. a writer of main (atomio) and aux (unix) dying right before, then right after the "
	       "super-journal's deletion: neither, then both\n");
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--super")) {
		crash_at_super();
		return 0;
	}
	char m[4200], a[4200];
	snprintf(m, sizeof(m), "%s", t_path("xm.db"));
	snprintf(a, sizeof(a), "%s", t_path("xa.db"));
	sqlite3 *db = open_pair(m, a);
	sq_ok(db, "CREATE TABLE main.c(n INTEGER); INSERT INTO main.c VALUES(0);"
		  "CREATE TABLE aux.c(n INTEGER); INSERT INTO aux.c VALUES(0);"
		  "CREATE TABLE main.b(k INTEGER, v BLOB); CREATE TABLE aux.b(k INTEGER, v BLOB)");
	for (long long k = 1; k <= 3; k++)
		tx(db, k);
	CHECK(!exists(m, "-atomio-group") && !exists(a, "-atomio-group"));
	sqlite3_close(db);

	/* 1b. stale journals beside both: still one group per transaction */
	stale_journal(m);
	stale_journal(a);
	db = open_pair(m, a);
	tx(db, 4);
	long long ck = sq_stat(db, "checkpoints");
	for (long long k = 5; k <= 7; k++)
		tx(db, k);
	if (sq_stat(db, "checkpoints") - ck < 3) {
		fprintf(stderr, "with a stale journal beside them, the databases committed one by one "
				"(%lld checkpoints of main's store in 3 transactions over both)\n",
			sq_stat(db, "checkpoints") - ck);
		return 1;
	}
	sqlite3_close(db);
	CHECK(exists(m, "-journal") && exists(a, "-journal"));

	older_own_group();

	int iters = T_SCALE(60), marked, inflight;
	long long n = run_kills(m, a, 7, iters, &marked, &inflight);
	CHECK(n >= iters);
	CHECK(inflight > 0);
	CHECK(marked > 0);

	/* 2. DELETE mode: journals and super-journal in memory, one group */
	g_mode = "DELETE";
	setenv("SQ_JOURNAL", g_mode, 1); /* sq_open's mode, the writers' too */
	int iters2 = T_SCALE(20);
	long long n2 = run_kills(m, a, n, iters2, &marked, &inflight);
	CHECK(n2 >= n + iters2);
	CHECK(marked > 0);
	n = n2;

	/* 2b. aux through the unix VFS: SQLite's super-journal on disk, and
	 * main's journal with it; no markers, both or neither */
	char m2[4200], a2[4200];
	snprintf(m2, sizeof(m2), "%s", t_path("um.db"));
	snprintf(a2, sizeof(a2), "%s", t_path("ua.db"));
	g_aux_vfs = "unix";
	db = open_pair(m2, a2);
	sq_ok(db, "CREATE TABLE main.c(n INTEGER); INSERT INTO main.c VALUES(0);"
		  "CREATE TABLE aux.c(n INTEGER); INSERT INTO aux.c VALUES(0);"
		  "CREATE TABLE main.b(k INTEGER, v BLOB); CREATE TABLE aux.b(k INTEGER, v BLOB)");
	sqlite3_close(db);
	long long nu = run_kills(m2, a2, 0, iters2, &marked, &inflight);
	CHECK(nu >= iters2);
	CHECK_EQ(marked, 0);
	g_aux_vfs = "atomio";
	g_mode = "MEMORY";
	setenv("SQ_JOURNAL", g_mode, 1);
	crash_at_super();

	/* 3. cost of the second database (killed DELETE-mode writers left
	 * journals: they do not count, see 1b) */
	db = open_pair(m, a);
	int reps = T_SCALE(200);
	double t0 = sq_now();
	for (int i = 0; i < reps; i++)
		sq_ok(db, "BEGIN; UPDATE main.c SET n = n; INSERT INTO main.b VALUES(-1, randomblob(5000));"
			  "DELETE FROM main.b WHERE k = -1; COMMIT");
	double one = (sq_now() - t0) / reps;
	t0 = sq_now();
	for (int i = 0; i < reps; i++)
		tx(db, ++n);
	double two = (sq_now() - t0) / reps;
	sqlite3_close(db);
	printf("commit of one database %.3f ms, of two (one transaction) %.3f ms\n", one * 1e3, two * 1e3);
	return 0;
}
