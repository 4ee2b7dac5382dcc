/* timeout: 900
 * (a fixed number of images, each recovered on the real filesystem: about
 * 30 s on an idle machine)
 *
 * t_sqlite_sim: power cuts (the crash simulator, test/support/simfs.h) during
 * transactions over two ATTACHed databases, which the atomio VFS commits as
 * ONE group of the first database's store (docs/SQLITE.md, "Transactions
 * over ATTACHed databases": markers DB-atomio-group beside each database
 * until the group is home and synced), and, in a second run, during
 * transactions on one database that goes between the VFS's groups and WAL.
 *
 * 1. The pair run.  A child process creates a.db and b.db, opens a.db
 *    through the VFS and ATTACHes b.db (synchronous=FULL, 128 KiB logs, the
 *    journal mode of both MEMORY and SQLite's default DELETE, whose journals
 *    and super-journal the VFS keeps in memory, in turn from one transaction
 *    to the next), and runs transactions 0..N: transaction 0 creates the tables in
 *    both; transaction t writes t into the counter c.n of each database it
 *    writes and, when it writes both, into the shared counter s.n of both;
 *    it inserts a blob into each database it writes (0.2 to 3.2 KiB; every
 *    fifth transaction 8 to 24 KiB, an overflow chain of several pages; its
 *    bytes a function of the seed, t and the database) and deletes those six
 *    transactions old.  Every transaction writes both databases but, with
 *    --solo M (default 4; 0: none), every M-th, which writes one only (b and
 *    a in turn), so that a group of one database alone is followed by one
 *    over both.  Every system call that changes a file, the store's and the
 *    VFS's own (its markers, its logs, their directory's sync), goes through
 *    an atomio ops table that records it with its data (preload/trace.h's
 *    format), and after each COMMIT returns, a mark "transaction t
 *    acknowledged".
 *    The WAL run (--only wal for it alone): a.db alone, with SQLite's
 *    default journal mode for transactions 0 and 1, then WAL and the default
 *    in turn, 5 transactions each, a WAL checkpoint every 8 pages (its writes
 *    to a.db and their sync), so that the switches into WAL (a group, the
 *    store closed, the log removed), the WAL's commits and checkpoints, and
 *    the switches back (a new log) are all cut.  In WAL mode the VFS's calls
 *    on the WAL file and its writes and syncs of a.db go through the same
 *    ops table; the shared-memory index does not (it is rebuilt from the
 *    WAL after a crash).
 *    The NORMAL run (--only normal; half of --tx transactions): a.db alone,
 *    PRAGMA synchronous=NORMAL or OFF, whose commits are lazy groups
 *    (docs/SQLITE.md, "synchronous"), but FULL every fourth transaction,
 *    the journal modes DELETE, MEMORY, OFF, TRUNCATE and PERSIST in turn,
 *    the store's lazy delay 50 ms.  Its oracle: a.db as after some
 *    transaction from the last FULL one acknowledged (lazy ones before it
 *    durable with it) to the one in flight -- a prefix, never a later
 *    transaction without an earlier one.  Its mutants (fulllazy: FULL
 *    commits lazily; lzbase: the diff reads the file without the lazy
 *    groups) are caught here.
 * 2. The replay.  The trace is replayed into simfs; at every crash point
 *    whose pending state is new (an fsync's point, before its effect, has the
 *    pending state of the point before it), crash images are built: pending
 *    items dropped, kept or torn at 512-byte sectors, every combination where
 *    there are at most --images (default 6) of them, else that many samples
 *    (the first two: nothing landed, everything landed).
 * 3. The check.  Each image is written into the run's directory, the
 *    databases into their own inodes (kept by hard links: atomio's catalog
 *    recorded their identity), and opened through the VFS, which recovers:
 *    on every second image a.db first with b.db ATTACHed, on the others
 *    b.db ALONE first (its marker, where there is one, must lead its
 *    recovery to a's log), then the pair (in the WAL run, b.db does not
 *    exist: the oracle sees no tables in it).  Oracle: integrity_check ok in
 *    both; the PAIR is exactly as after transaction L or as after L + 1 (L:
 *    the last acknowledged before the crash point; before transaction 0:
 *    no table in either): both counters, the shared one in both, every blob
 *    byte for byte; b.db alone reads as in the pair; no marker is left; and
 *    opening the pair again finds the same.  The images are recovered on the
 *    real filesystem with fsync, RWF_DSYNC and O_DIRECT turned off (nothing
 *    crashes there).
 *
 * The run is real (atomio's threads decide how writes batch), so two runs'
 * traces may differ: a failure's crash point and image number, and --dump,
 * refer to the run that printed them.  The workload, the images (seeded per
 * crash point) and the oracle do not.  test/t_sqlite_sim_mutants.sh checks
 * that this test catches each of the VFS's defences removed.
 *
 *   t_sqlite_sim [--tx N] [--images K] [--solo M] [--only pair|wal|normal] [--dump P.I]   ATOMIO_SEED=S
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sq_t.h"
#include "support/simfs.h"
#include "support/trace_replay.h"
#include "sys.h"

#define LOG_SIZE (128 << 10)
#define KEEP_TX 6 /* a blob lives this many of its database's transactions */

static uint64_t seed = 1;
static int ntx = 24, nimages = 4, solo = 4; /* make check-sqlite-sim: more */
static int ntx_arg; /* --tx: ntx of the pair and WAL runs; the NORMAL run does half (its time) */
/* The WAL run (--wal): a.db alone, its journal mode going between SQLite's
 * default (the VFS's groups) and WAL every WAL_SPAN transactions, WAL
 * checkpointing every few pages. */
static bool wal_run;
#define WAL_SPAN 5
/* The NORMAL run (--only normal): a.db alone, PRAGMA synchronous NORMAL or
 * OFF (lazy groups: docs/SQLITE.md, "synchronous") but FULL every
 * FULL_EVERY-th transaction, the rollback journal modes in turn, the store's
 * lazy delay 50 ms (flushes by time, by a FULL commit, by the close).  A
 * crash may take back lazy transactions, but only a suffix: the database is
 * as after some transaction from the last FULL one acknowledged (durable)
 * to the one in flight. */
static bool normal_run;
#define FULL_EVERY 4
static int durable = -1; /* the last transaction known durable (replay: a FULL one acknowledged) */

/* One database (a.db) only: the WAL and NORMAL runs. */
static bool one_db(void) { return wal_run || normal_run; }

/* Transaction t of the NORMAL run commits at FULL. */
static bool full_tx(int t) { return !normal_run || t % FULL_EVERY == FULL_EVERY - 1; }
/* --dump P.I: write image I of crash point P into the run's directory,
 * unrecovered, and stop (to look at a failure). */
static long long dump_point = -1, dump_image = -1;
static char base[1024], dir[PATH_MAX], keep[1100], trace_path[1100];
static char db_path[2][PATH_MAX + 8], keep_path[2][1200];
static const char *const schema[2] = {"main", "b"}, *const name[2] = {"a.db", "b.db"};

/* --- the workload ------------------------------------------------------------ */

/* Does transaction t write database x (0: a, 1: b)? */
static bool writes(int t, int x)
{
	if (one_db())
		return x == 0;
	if (t == 0 || solo <= 0 || t % solo)
		return true;
	return (t / solo) % 2 ? x == 1 : x == 0;
}

static bool writes_both(int t) { return writes(t, 0) && writes(t, 1); }

/* The last transaction <= T that wrote x (-1: none). */
static int last_write(int T, int x)
{
	while (T >= 0 && !writes(T, x))
		T--;
	return T;
}

/* What s.n holds after transaction T: the last that wrote both, or, in the
 * WAL run, every one of a.db's. */
static int last_both(int T)
{
	if (one_db())
		return T;
	while (T >= 0 && !writes_both(T))
		T--;
	return T;
}

/* 0.2 to 3.2 KiB; every fifth transaction 8 to 24 KiB (an overflow chain:
 * a group of many pages, a log record of several blocks). */
static size_t blob_len(int t, int x)
{
	uint64_t r = sq_mix(seed * 4 + (uint64_t)t * 2 + (uint64_t)x);
	return t % 5 == 3 ? 8192 + r % 16384 : 200 + r % 3000;
}

static void blob_fill(uint8_t *b, size_t n, int t, int x)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = sq_mix(seed ^ (uint64_t)t << 20 ^ (uint64_t)x << 40 ^ (i / 8));
		b[i] = (uint8_t)(v >> (8 * (i % 8)));
	}
}

/* --- recording the run -------------------------------------------------------- */

static int tr_fd = -1;
static pthread_mutex_t tr_mu = PTHREAD_MUTEX_INITIALIZER;
#define LX (&atomio_sys_linux)

static void tr_rec(uint32_t kind, int fd, int flags, uint64_t a, uint64_t b, const char *path,
		   size_t pathlen, const struct iovec *iov, int iovcnt)
{
	tr_write(write, tr_fd, kind, fd, flags, a, b, path, pathlen, iov, iovcnt);
}

/* Each call and its record under one lock: the trace is an order the calls
 * really had (the store's threads and the VFS's call these at once). */
static int tr_open(const char *path, int flags, mode_t mode)
{
	pthread_mutex_lock(&tr_mu);
	int r = LX->open(path, flags, mode);
	if (r >= 0)
		tr_rec(TR_OPEN, r, flags, mode, 0, path, strlen(path) + 1, NULL, 0);
	pthread_mutex_unlock(&tr_mu);
	return r;
}

static int tr_close(int fd)
{
	pthread_mutex_lock(&tr_mu);
	int r = LX->close(fd);
	tr_rec(TR_CLOSE, fd, 0, 0, 0, NULL, 0, NULL, 0);
	pthread_mutex_unlock(&tr_mu);
	return r;
}

static ssize_t tr_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	pthread_mutex_lock(&tr_mu);
	ssize_t r = LX->pwritev(fd, iov, iovcnt, off, rwf);
	if (r > 0) {
		/* Only the part written (a short write is retried by the caller). */
		struct iovec part[64];
		int k = 0;
		size_t left = (size_t)r;
		for (int i = 0; i < iovcnt && left && k < 64; i++, k++) {
			part[k] = iov[i];
			if (part[k].iov_len > left)
				part[k].iov_len = left;
			left -= part[k].iov_len;
		}
		if (left)
			abort();
		tr_rec(TR_WRITE, fd, rwf, (uint64_t)off, 0, NULL, 0, part, k);
	}
	pthread_mutex_unlock(&tr_mu);
	return r;
}

static int tr_sync(int fd, bool data)
{
	pthread_mutex_lock(&tr_mu);
	int r = data ? LX->fdatasync(fd) : LX->fsync(fd);
	if (r == 0)
		tr_rec(data ? TR_FDATASYNC : TR_FSYNC, fd, 0, 0, 0, NULL, 0, NULL, 0);
	pthread_mutex_unlock(&tr_mu);
	return r;
}
static int tr_fsync(int fd) { return tr_sync(fd, false); }
static int tr_fdatasync(int fd) { return tr_sync(fd, true); }

static int tr_ftruncate(int fd, off_t size)
{
	pthread_mutex_lock(&tr_mu);
	int r = LX->ftruncate(fd, size);
	if (r == 0)
		tr_rec(TR_TRUNC, fd, 0, (uint64_t)size, 0, NULL, 0, NULL, 0);
	pthread_mutex_unlock(&tr_mu);
	return r;
}

static int tr_rename_noreplace(const char *from, const char *to)
{
	pthread_mutex_lock(&tr_mu);
	int r = LX->rename_noreplace(from, to);
	if (r == 0) {
		size_t a = strlen(from) + 1, b = strlen(to) + 1;
		char both[2 * PATH_MAX];
		CHECK(a + b <= sizeof(both));
		memcpy(both, from, a);
		memcpy(both + a, to, b);
		tr_rec(TR_RENAME, -1, 0, 0, 0, both, a + b, NULL, 0);
	}
	pthread_mutex_unlock(&tr_mu);
	return r;
}

static int tr_unlink(const char *path)
{
	pthread_mutex_lock(&tr_mu);
	int r = LX->unlink(path);
	if (r == 0)
		tr_rec(TR_UNLINK, -1, 0, 0, 0, path, strlen(path) + 1, NULL, 0);
	pthread_mutex_unlock(&tr_mu);
	return r;
}

static int tr_fallocate(int fd, int mode, off_t off, off_t len)
{
	pthread_mutex_lock(&tr_mu);
	int r = LX->fallocate(fd, mode, off, len);
	if (r == 0)
		tr_rec(TR_FALLOC, fd, mode, (uint64_t)off, (uint64_t)len, NULL, 0, NULL, 0);
	pthread_mutex_unlock(&tr_mu);
	return r;
}

static void tr_mark(int t)
{
	pthread_mutex_lock(&tr_mu);
	tr_rec(TR_MARK, -1, 0, (uint64_t)t, 0, NULL, 0, NULL, 0);
	pthread_mutex_unlock(&tr_mu);
}

static struct atomio_sysops trace_ops;

static void trace_install(void)
{
	trace_ops = atomio_sys_linux;
	trace_ops.name = "t_sqlite_sim trace";
	trace_ops.open = tr_open;
	trace_ops.close = tr_close;
	trace_ops.pwritev = tr_pwritev;
	trace_ops.fsync = tr_fsync;
	trace_ops.fdatasync = tr_fdatasync;
	trace_ops.ftruncate = tr_ftruncate;
	trace_ops.rename_noreplace = tr_rename_noreplace;
	trace_ops.unlink = tr_unlink;
	trace_ops.fallocate = tr_fallocate;
	/* No io_uring: its writes would escape the trace. */
	trace_ops.uring_init = NULL;
	trace_ops.uring_enter = NULL;
	trace_ops.uring_exit = NULL;
	/* No shared store: its state lives in a shared-memory file (/dev/shm)
	 * that is no part of what a power cut leaves (recovery reads the log
	 * only), and the simulator models no such file.  Without shm_map the
	 * writer's stores are single-process ones (ATOMIO_EXCLUSIVE's code):
	 * the same records, home writes and checkpoints, which are what this
	 * test cuts; t_sqlite_writers kills processes of shared stores. */
	trace_ops.shm_map = NULL;
	trace_ops.shm_unmap = NULL;
	atomio_sys_set(&trace_ops);
}

/* --- the writer (a child process) ----------------------------------------------- */

static void put_blob(sqlite3 *db, int t, int x)
{
	char sql[256];
	size_t n = blob_len(t, x);
	uint8_t *b = malloc(n);
	CHECK(b);
	blob_fill(b, n, t, x);
	snprintf(sql, sizeof(sql), "INSERT INTO %s.b VALUES(?, ?)", schema[x]);
	sqlite3_stmt *s;
	SQ_CHECK(db, sqlite3_prepare_v2(db, sql, -1, &s, NULL));
	SQ_CHECK(db, sqlite3_bind_int(s, 1, t));
	SQ_CHECK(db, sqlite3_bind_blob(s, 2, b, (int)n, SQLITE_TRANSIENT));
	CHECK_EQ(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
	free(b);
}

static void tx(sqlite3 *db, int t)
{
	char sql[512];
	/* The journal mode: over two databases SQLite's default (the VFS keeps
	 * the journals, the super-journal too, in memory) and MEMORY in turn;
	 * in the WAL run the default and WAL in turn, WAL_SPAN transactions
	 * each, from transaction 2 on. */
	static const char *const rollback[] = {"DELETE", "MEMORY", "OFF", "TRUNCATE", "PERSIST"};
	const char *mode = wal_run ? (t >= 2 && (t - 2) / WAL_SPAN % 2 == 0 ? "WAL" : "DELETE")
			   : normal_run ? rollback[t % 5]
					: t % 2 ? "DELETE" : "MEMORY";
	char got[16];
	if (normal_run) {
		/* FULL must still acknowledge durably; OFF is lazy as NORMAL */
		snprintf(sql, sizeof(sql), "PRAGMA main.synchronous=%s",
			 full_tx(t) ? "FULL" : t % FULL_EVERY == 1 ? "OFF" : "NORMAL");
		sq_ok(db, sql);
	}
	for (int x = 0; x < (one_db() ? 1 : 2); x++) {
		snprintf(sql, sizeof(sql), "PRAGMA %s.journal_mode=%s", schema[x], mode);
		sq_text(db, sql, got, sizeof(got));
		CHECK(!strcasecmp(got, mode));
	}
	sq_ok(db, "BEGIN");
	for (int x = 0; x < 2; x++) {
		if (!writes(t, x))
			continue;
		if (t == 0) {
			snprintf(sql, sizeof(sql),
				 "CREATE TABLE %s.c(n); INSERT INTO %s.c VALUES(0);"
				 "CREATE TABLE %s.s(n); INSERT INTO %s.s VALUES(0);"
				 "CREATE TABLE %s.b(k INTEGER PRIMARY KEY, v BLOB)",
				 schema[x], schema[x], schema[x], schema[x], schema[x]);
		} else {
			snprintf(sql, sizeof(sql), "UPDATE %s.c SET n = %d; DELETE FROM %s.b WHERE k <= %d",
				 schema[x], t, schema[x], t - KEEP_TX);
		}
		sq_ok(db, sql);
		if (t > 0 && (one_db() || writes_both(t))) {
			snprintf(sql, sizeof(sql), "UPDATE %s.s SET n = %d", schema[x], t);
			sq_ok(db, sql);
		}
		put_blob(db, t, x);
	}
	sq_ok(db, "COMMIT");
}

static void writer(void)
{
	tr_fd = open(trace_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(tr_fd >= 0);
	trace_install();
	/* The application creates the files (and syncs nothing): registering
	 * a database with its store must make its name durable. */
	for (int x = 0; x < (one_db() ? 1 : 2); x++) {
		int fd = atomio_sys->open(db_path[x], O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		CHECK(fd >= 0);
		atomio_sys->close(fd);
		CHECK_OK(link(db_path[x], keep_path[x])); /* its identity, for the images */
	}
	sqlite3 *db = normal_run ? NULL : sq_open_vfs(db_path[0], "atomio", LOG_SIZE);
	char sql[PATH_MAX + 256];
	if (normal_run) {
		snprintf(sql, sizeof(sql), "file:%s?atomio_log_size=%d&atomio_lazy_ms=50", db_path[0], LOG_SIZE);
		CHECK_EQ(sqlite3_open_v2(sql, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, "atomio"), SQLITE_OK);
		sq_ok(db, "PRAGMA main.cache_size=10");
	} else if (wal_run)
		/* a checkpoint (writes to a.db, its sync) every few commits */
		sq_ok(db, "PRAGMA main.synchronous=FULL; PRAGMA main.cache_size=10; PRAGMA wal_autocheckpoint=8");
	else {
		snprintf(sql, sizeof(sql),
			 "PRAGMA main.synchronous=FULL; ATTACH 'file:%s?atomio_log_size=%d' AS b;"
			 "PRAGMA b.synchronous=FULL; PRAGMA main.cache_size=10; PRAGMA b.cache_size=10",
			 db_path[1], LOG_SIZE);
		sq_ok(db, sql);
	}
	for (int t = 0; t <= ntx; t++) {
		tx(db, t);
		tr_mark(t);
	}
	if (normal_run)
		printf("the writer: %lld lazy commits, %lld durable ones, %lld log syncs\n",
		       sq_stat(db, "lazy_commits"), sq_stat(db, "commits"), sq_stat(db, "log_syncs"));
	fflush(stdout);
	CHECK_EQ(sqlite3_close(db), SQLITE_OK);
	tr_mark(-1); /* closed: everything checkpointed */
	close(tr_fd);
	_exit(0);
}

/* --- checking an image ----------------------------------------------------------- */

/* fsync, RWF_DSYNC and O_DIRECT turned off: nothing crashes while an image is
 * checked.  What recovery writes is noted, to be shown if the image fails. */
static char ck_note[1 << 16];
static size_t ck_len;
static char ck_fd_path[1024][48];

static void ck_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ck_say(const char *fmt, ...)
{
	if (ck_len >= sizeof(ck_note) - 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(ck_note + ck_len, sizeof(ck_note) - ck_len, fmt, ap);
	va_end(ap);
	if (n > 0)
		ck_len = ck_len + (size_t)n < sizeof(ck_note) ? ck_len + (size_t)n : sizeof(ck_note) - 1;
}

static const char *ck_name(int fd) { return fd >= 0 && fd < 1024 ? ck_fd_path[fd] : "?"; }

static int ck_open(const char *path, int flags, mode_t mode)
{
	int r = LX->open(path, flags & ~O_DIRECT, mode);
	if (r >= 0 && r < 1024) {
		const char *sl = strrchr(path, '/');
		snprintf(ck_fd_path[r], sizeof(ck_fd_path[r]), "%s", sl ? sl + 1 : path);
		if (!strncmp(path, "/proc/self/fd/", 14))
			snprintf(ck_fd_path[r], sizeof(ck_fd_path[r]), "%s", ck_name(atoi(path + 14)));
	}
	return r;
}

static ssize_t ck_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	ssize_t r = LX->pwritev(fd, iov, iovcnt, off, rwf & ~RWF_DSYNC);
	ck_say(" write %s@%lld+%zd", ck_name(fd), (long long)off, r);
	return r;
}

static int ck_ftruncate(int fd, off_t size)
{
	ck_say(" truncate %s to %lld", ck_name(fd), (long long)size);
	return LX->ftruncate(fd, size);
}

static int ck_unlink(const char *path)
{
	const char *sl = strrchr(path, '/');
	ck_say(" unlink %s", sl ? sl + 1 : path);
	return LX->unlink(path);
}

static int ck_sync(int fd) { return fd >= 0 ? 0 : -EBADF; }
static struct atomio_sysops check_ops;

struct dbst {
	bool present;
	long long c, s;
	int nrows;
	int rows[16];
	char bad[160]; /* a blob that is not as written */
};

static int acked = -1;       /* the last transaction acknowledged (marks replayed) */
static bool closed;
static uint64_t points, new_points, images, with_markers, in_flight, alone_first, taken_back;
static uint64_t last_pver = UINT64_MAX;
static int last_acked = -2;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static const struct simfs_opinfo *cur_op;
static const struct simfs_pick *cur_pick;
static uint64_t cur_idx;

static void fail(const char *fmt, ...)
{
	char why[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	char *p = cur_pick ? simfs_pick_format(cur_pick) : NULL;
	printf("the check's writes:%s\n", ck_note);
	printf("SQLITE-SIM FAILED at crash point %llu (op %d on %s), image %llu, pick %s:\n  %s\n"
	       "  (transaction %d acknowledged last; the image, recovered, is in %s; reproduce: ATOMIO_SEED=%llu "
	       "--tx %d --images %d --solo %d --only %s; --dump %llu.%llu to look at the image unrecovered)\n",
	       cur_op ? (unsigned long long)cur_op->index : 0ull, cur_op ? (int)cur_op->kind : 0,
	       cur_op && cur_op->path ? cur_op->path : "-", (unsigned long long)cur_idx, p ? p : "-", why,
	       acked, dir, (unsigned long long)seed, ntx_arg, nimages, solo, wal_run ? "wal" : normal_run ? "normal" : "pair",
	       cur_op ? (unsigned long long)cur_op->index : 0ull, (unsigned long long)cur_idx);
	free(p);
	fflush(stdout);
	setenv("ATOMIO_KEEP", "1", 1);
	exit(1);
}

static void clear_dir(void)
{
	DIR *d = opendir(dir);
	CHECK(d);
	struct dirent *e;
	char p[PATH_MAX + 300];
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			CHECK_OK(unlink(p));
		}
	closedir(d);
}

static bool exists(const char *p) { return access(p, F_OK) == 0; }

static bool markers_present(void)
{
	char p[PATH_MAX + 32];
	for (int x = 0; x < 2; x++) {
		snprintf(p, sizeof(p), "%s-atomio-group", db_path[x]);
		if (exists(p))
			return true;
	}
	return false;
}

static long long q_int(sqlite3 *db, const char *sql, bool *ok)
{
	sqlite3_stmt *s;
	long long v = 0;
	*ok = false;
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
		return 0;
	if (sqlite3_step(s) == SQLITE_ROW) {
		v = sqlite3_column_int64(s, 0);
		*ok = true;
	}
	sqlite3_finalize(s);
	return v;
}

/* Database x as schema sch of db shows it (integrity_check first). */
static void read_db(sqlite3 *db, const char *sch, int x, struct dbst *st)
{
	char sql[256], r[512] = "";
	memset(st, 0, sizeof(*st));
	snprintf(sql, sizeof(sql), "PRAGMA %s.integrity_check", sch);
	sqlite3_stmt *s;
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
		fail("%s: %s: %s", name[x], sql, sqlite3_errmsg(db));
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		snprintf(r, sizeof(r), "%s", (const char *)sqlite3_column_text(s, 0));
	else
		snprintf(r, sizeof(r), "%s", sqlite3_errmsg(db));
	sqlite3_finalize(s);
	if (strcmp(r, "ok"))
		fail("%s: integrity_check: %s", name[x], r);
	bool ok;
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s.sqlite_master", sch);
	long long tables = q_int(db, sql, &ok);
	if (!ok)
		fail("%s: %s: %s", name[x], sql, sqlite3_errmsg(db));
	if (tables == 0)
		return; /* transaction 0 is not in it */
	if (tables != 3)
		fail("%s: %lld entries in sqlite_master, 0 or 3 expected", name[x], tables);
	st->present = true;
	snprintf(sql, sizeof(sql), "SELECT n FROM %s.c", sch);
	st->c = q_int(db, sql, &ok);
	if (!ok)
		fail("%s: %s: %s", name[x], sql, sqlite3_errmsg(db));
	snprintf(sql, sizeof(sql), "SELECT n FROM %s.s", sch);
	st->s = q_int(db, sql, &ok);
	if (!ok)
		fail("%s: %s: %s", name[x], sql, sqlite3_errmsg(db));
	snprintf(sql, sizeof(sql), "SELECT k, v FROM %s.b ORDER BY k", sch);
	SQ_CHECK(db, sqlite3_prepare_v2(db, sql, -1, &s, NULL));
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int k = sqlite3_column_int(s, 0);
		if (st->nrows < 16)
			st->rows[st->nrows] = k;
		st->nrows++;
		const uint8_t *v = sqlite3_column_blob(s, 1);
		size_t n = (size_t)sqlite3_column_bytes(s, 1);
		if (k < 0 || k > ntx || n != blob_len(k, x)) {
			if (!st->bad[0])
				snprintf(st->bad, sizeof(st->bad), "blob %d: %zu bytes", k, n);
			continue;
		}
		uint8_t *want = malloc(n);
		CHECK(want);
		blob_fill(want, n, k, x);
		if (memcmp(v, want, n) && !st->bad[0]) {
			size_t i = 0;
			while (v[i] == want[i])
				i++;
			snprintf(st->bad, sizeof(st->bad), "blob %d differs at byte %zu of %zu", k, i, n);
		}
		free(want);
	}
	if (rc != SQLITE_DONE)
		fail("%s: %s: %s", name[x], sql, sqlite3_errmsg(db));
	sqlite3_finalize(s);
}

static void describe(const struct dbst *st, char *out, size_t n)
{
	if (!st->present) {
		snprintf(out, n, "no tables");
		return;
	}
	int o = snprintf(out, n, "c.n=%lld s.n=%lld blobs", st->c, st->s);
	for (int i = 0; i < st->nrows && i < 16 && o < (int)n; i++)
		o += snprintf(out + o, n - (size_t)o, " %d", st->rows[i]);
	if (st->bad[0] && o < (int)n)
		snprintf(out + o, n - (size_t)o, " (%s)", st->bad);
}

/* Is database x exactly as after transaction T (-1: before any)? */
static bool as_after(const struct dbst *st, int x, int T)
{
	int last = last_write(T, x);
	if (T < 0 || last < 0)
		return !st->present;
	if (!st->present || st->bad[0])
		return false;
	if (st->c != last || st->s != last_both(T))
		return false;
	int n = 0;
	for (int t = last - KEEP_TX + 1 < 0 ? 0 : last - KEEP_TX + 1; t <= last; t++)
		if (writes(t, x)) {
			if (n >= st->nrows || st->rows[n] != t)
				return false;
			n++;
		}
	return n == st->nrows;
}

static bool same(const struct dbst *p, const struct dbst *q)
{
	if (p->present != q->present || p->c != q->c || p->s != q->s || p->nrows != q->nrows)
		return false;
	for (int i = 0; i < p->nrows && i < 16; i++)
		if (p->rows[i] != q->rows[i])
			return false;
	return !strcmp(p->bad, q->bad);
}

/* Open path through the VFS (which recovers); NULL where the file is not. */
static sqlite3 *open_vfs(const char *path)
{
	if (!exists(path))
		return NULL;
	char uri[PATH_MAX + 64];
	snprintf(uri, sizeof(uri), "file:%s?mode=rw", path);
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, "atomio");
	if (rc != SQLITE_OK)
		fail("opening %s through the VFS (recovery): %s", path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
	return db;
}

/* Both databases, recovered through the VFS: a.db first, b.db ATTACHed. */
static void read_pair(struct dbst st[2])
{
	memset(st, 0, 2 * sizeof(*st));
	ck_say(" [pair]");
	sqlite3 *db = open_vfs(db_path[0]);
	if (db) {
		read_db(db, "main", 0, &st[0]);
		if (exists(db_path[1])) {
			char sql[PATH_MAX + 64];
			snprintf(sql, sizeof(sql), "ATTACH 'file:%s?mode=rw' AS b", db_path[1]);
			if (sqlite3_exec(db, sql, 0, 0, 0) != SQLITE_OK)
				fail("ATTACH %s through the VFS (recovery): %s", db_path[1], sqlite3_errmsg(db));
			read_db(db, "b", 1, &st[1]);
		}
		CHECK_EQ(sqlite3_close(db), SQLITE_OK);
	} else if ((db = open_vfs(db_path[1]))) {
		read_db(db, "main", 1, &st[1]);
		CHECK_EQ(sqlite3_close(db), SQLITE_OK);
	}
}

static void check_image(struct simfs *img, const struct simfs_pick *pick, uint64_t idx)
{
	cur_pick = pick;
	cur_idx = idx;
	const struct atomio_sysops *prev = atomio_sys_set(&check_ops);
	ck_len = 0;
	ck_note[0] = 0;
	clear_dir();
	for (int x = 0; x < 2; x++)
		if (simfs_exists(img, db_path[x]))
			CHECK_OK(link(keep_path[x], db_path[x]));
	CHECK_OK(simfs_materialize(img, ""));
	if (cur_op && (long long)cur_op->index == dump_point && (long long)idx == dump_image) {
		printf("crash point %lld, image %lld (transaction %d acknowledged last) is in %s, "
		       "unrecovered\n", dump_point, dump_image, acked, dir);
		setenv("ATOMIO_KEEP", "1", 1);
		exit(2);
	}
	if (markers_present()) {
		with_markers++;
		ck_say(" [markers]");
	}
	struct dbst alone = {0}, st[2], again[2];
	bool b_first = (idx + (cur_op ? cur_op->index : 0)) % 2;
	if (b_first) {
		/* b.db alone: its recovery must find the group in a's log */
		alone_first++;
		ck_say(" [b.db alone]");
		sqlite3 *db = open_vfs(db_path[1]);
		if (db) {
			read_db(db, "main", 1, &alone);
			CHECK_EQ(sqlite3_close(db), SQLITE_OK);
		}
	}
	read_pair(st);
	char da[512], db[512];
	describe(&st[0], da, sizeof(da));
	describe(&st[1], db, sizeof(db));
	if (b_first && !same(&alone, &st[1])) {
		char d1[512];
		describe(&alone, d1, sizeof(d1));
		fail("b.db opened alone: %s; then with a.db: %s", d1, db);
	}
	/* The NORMAL run: a prefix from the last durable transaction on (the
	 * latest first: lazy groups are usually all there); else the last
	 * acknowledged or the one in flight. */
	int lo = normal_run && !closed ? durable : acked, T = -2;
	for (int t = acked + 1 <= ntx ? acked + 1 : ntx; t >= lo && T == -2; t--)
		if (as_after(&st[0], 0, t) && as_after(&st[1], 1, t))
			T = t;
	if (T == -2)
		fail("a.db: %s; b.db: %s; not as after any transaction from %d to %d", da, db, lo, acked + 1);
	if (T > acked)
		in_flight++;
	if (T < acked)
		taken_back++; /* lazy transactions lost (the NORMAL run) */
	if (markers_present())
		fail("a marker is left after recovery");
	read_pair(again);
	if (!same(&st[0], &again[0]) || !same(&st[1], &again[1])) {
		char d1[512], d2[512];
		describe(&again[0], d1, sizeof(d1));
		describe(&again[1], d2, sizeof(d2));
		fail("recovered as after transaction %d, then opened again: a.db: %s; b.db: %s", T, d1, d2);
	}
	images++;
	atomio_sys_set(prev);
	cur_pick = NULL;
}

static void at_point(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
{
	(void)arg;
	points++;
	if (op->pending_version == last_pver && acked == last_acked)
		return; /* the same images as the point before */
	last_pver = op->pending_version;
	last_acked = acked;
	new_points++;
	cur_op = op;
	struct simfs_enum e = {.unit = 512, .exhaustive_cap = (uint64_t)nimages, .samples = (uint64_t)nimages,
			       .seed = seed * 1000003 + op->index};
	uint64_t n = simfs_enum_count(fs, &e, NULL);
	for (uint64_t i = 0; i < n; i++) {
		struct simfs_pick p;
		CHECK_OK(simfs_enum_pick(fs, &e, i, &p));
		struct simfs *img = simfs_crash(fs, &p);
		CHECK(img);
		check_image(img, &p, i);
		simfs_free(img);
		simfs_pick_free(&p);
	}
	cur_op = NULL;
}

/* --- the replay ------------------------------------------------------------------- */

/* A transaction acknowledged (or, a < 0, the databases closed), in its
 * place in the trace. */
static void mark(const struct tr_hdr *h, void *arg)
{
	(void)arg;
	CHECK(h->kind == TR_MARK);
	if ((int64_t)h->a < 0) {
		closed = true;
	} else {
		CHECK_EQ((int64_t)h->a, acked + 1);
		acked = (int)h->a;
		if (full_tx(acked))
			durable = acked;
	}
}

static void replay(const uint8_t *t, size_t len)
{
	struct simfs *fs = simfs_new(&(struct simfs_config){.seed = seed, .proc_fd = true});
	CHECK(fs);
	tr_mkdirs(fs, dir);
	simfs_install(fs);
	simfs_set_hook(fs, at_point, NULL);
	uint64_t ops = tr_replay(t, len, dir, mark, NULL);
	simfs_set_hook(fs, NULL, NULL);
	/* The end: every transaction acknowledged, the databases closed. */
	CHECK_EQ(acked, ntx);
	CHECK(closed);
	struct simfs *img = simfs_crash(fs, NULL);
	struct simfs_pick none = {.unit = 512};
	check_image(img, &none, 0);
	simfs_free(img);
	simfs_uninstall();
	simfs_free(fs);
	printf("%llu trace records, %llu crash points (%llu with a new pending state), %llu images "
	       "recovered through the VFS and checked: %llu with a group marker, %llu where the "
	       "transaction in flight had committed, %llu opened b.db alone first, %llu where the crash took "
	       "back lazy transactions\n",
	       (unsigned long long)ops, (unsigned long long)points, (unsigned long long)new_points,
	       (unsigned long long)images, (unsigned long long)with_markers, (unsigned long long)in_flight,
	       (unsigned long long)alone_first, (unsigned long long)taken_back);
}

/* One run: the writer's, recorded, then replayed and checked. */
static void run(bool wal, bool normal)
{
	wal_run = wal;
	normal_run = normal;
	ntx = normal && ntx_arg > 1 ? ntx_arg / 2 : ntx_arg;
	acked = durable = -1;
	closed = false;
	points = new_points = images = with_markers = in_flight = alone_first = taken_back = 0;
	last_pver = UINT64_MAX;
	last_acked = -2;
	const char *name_ = wal ? "wal" : normal ? "normal" : "pair";
	int both = 0;
	for (int t = 0; t <= ntx; t++)
		both += writes_both(t);
	if (normal)
		printf("NORMAL run: transactions 0..%d on a.db alone, synchronous NORMAL or OFF (lazy groups, "
		       "lazy delay 50 ms) but FULL every %d, the rollback journal modes in turn, up to %d images "
		       "per crash point\n",
		       ntx, FULL_EVERY, nimages);
	else if (wal)
		printf("WAL run: transactions 0..%d on a.db alone, journal_mode DELETE and WAL in turn every "
		       "%d from transaction 2, a WAL checkpoint every 8 pages, up to %d images per crash point\n",
		       ntx, WAL_SPAN, nimages);
	else
		printf("pair run: transactions 0..%d (%d over both databases, %d over one: --solo %d), "
		       "journal_mode MEMORY and DELETE in turn, up to %d images per crash point\n",
		       ntx, both, ntx + 1 - both, solo, nimages);
	fflush(stdout);
	snprintf(dir, sizeof(dir), "%s/run-%s", base, name_);
	snprintf(keep, sizeof(keep), "%s/keep-%s", base, name_);
	snprintf(trace_path, sizeof(trace_path), "%s/trace-%s", base, name_);
	CHECK_OK(mkdir(dir, 0755));
	CHECK_OK(mkdir(keep, 0755));
	char real[PATH_MAX];
	CHECK(realpath(dir, real));
	CHECK(strlen(real) < 1024);
	memcpy(dir, real, strlen(real) + 1);
	for (int x = 0; x < 2; x++) {
		snprintf(db_path[x], sizeof(db_path[x]), "%s/%c.db", dir, "ab"[x]);
		snprintf(keep_path[x], sizeof(keep_path[x]), "%s/%c.db", keep, "ab"[x]);
	}

	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		writer();
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fail("the writer failed (status %#x)", st);

	size_t len;
	uint8_t *t = tr_slurp(trace_path, &len);
	unlink(trace_path);
	replay(t, len);
	free(t);
}

int main(int argc, char **argv)
{
	/* Thousands of stores opened (several per image): their state's
	 * pages reused, not faulted in at each open (t.h) */
	t_heap_keep();
	seed = t_seed(1);
	ntx = T_SCALE(ntx);
#ifdef ATOMIO_SAN
	nimages = 2; /* each image costs several times more there */
#endif
	const char *only = NULL;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--tx"))
			ntx = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--images"))
			nimages = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--solo"))
			solo = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--only"))
			only = argv[i + 1];
		else if (!strcmp(argv[i], "--dump"))
			CHECK(sscanf(argv[i + 1], "%lld.%lld", &dump_point, &dump_image) == 2);
	}
	CHECK(ntx >= 1 && nimages >= 2);
	ntx_arg = ntx;
	CHECK(!only || !strcmp(only, "pair") || !strcmp(only, "wal") || !strcmp(only, "normal"));

	const char *td = t_dir();
	CHECK(strlen(td) < sizeof(base) - 16);
	memcpy(base, td, strlen(td) + 1);

	check_ops = atomio_sys_linux;
	check_ops.name = "t_sqlite_sim check";
	check_ops.pwritev = ck_pwritev;
	check_ops.fsync = ck_sync;
	check_ops.open = ck_open;
	check_ops.ftruncate = ck_ftruncate;
	check_ops.unlink = ck_unlink;
	check_ops.fdatasync = ck_sync;
	/* One process recovers each image: single-process stores (as the
	 * writer's, trace_install), no shared-memory file per image. */
	check_ops.shm_map = NULL;
	check_ops.shm_unmap = NULL;
	sq_register();

	if (!only || !strcmp(only, "pair"))
		run(false, false);
	if (!only || !strcmp(only, "wal"))
		run(true, false);
	if (!only || !strcmp(only, "normal"))
		run(false, true);
	printf("ok\n");
	return 0;
}
