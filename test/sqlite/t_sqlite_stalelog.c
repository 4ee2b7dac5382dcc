/* A stale log (older than its database: the database was deleted and made
 * again without it) is removed only under SQLite's EXCLUSIVE lock, as any
 * recovery (issue 35, 8).  Removed with SHARED held only, another process
 * holding SHARED too could be joining the store meanwhile: open the log's
 * path before the removal and take its flock after it, and so write its
 * groups to a log nobody will ever recover.
 *
 * The database made through the VFS (a log beside it), deleted and made
 * again through the unix VFS, then opened through the VFS while a reader
 * of the unix VFS holds SHARED (so the open does not look at the log), and
 * read once that reader is gone: the VFS's unlink
 * of the log is watched (the ops table), and at that moment another open
 * file description must not be able to take a read lock on SQLite's SHARED
 * range (it could: the log was removed under SHARED).  Skipped where the
 * filesystem has no birth times (the VFS then keeps stale logs). */
#include <fcntl.h>
#include <sys/stat.h>

#include "sq_t.h"
#include "sys.h"

#define SHARED_FIRST (0x40000000 + 2) /* SQLite's lock bytes (os_unix.c) */
#define SHARED_SIZE 510

static char g_db[4000];
static struct atomio_sysops g_ops;
static const struct atomio_sysops *g_real;
static int g_removed;   /* unlinks of the log seen */
static int g_unguarded; /* of them, while another process could hold SHARED */

static int watch_unlink(const char *path)
{
	size_t n = strlen(path);
	if (n > 7 && !strcmp(path + n - 7, "-atomio")) {
		int fd = open(g_db, O_RDONLY | O_CLOEXEC);
		struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = SHARED_FIRST,
				   .l_len = SHARED_SIZE};
		CHECK(fd >= 0 && fcntl(fd, F_OFD_GETLK, &fl) == 0);
		close(fd); /* OFD locks: the VFS's stay */
		g_removed++;
		if (fl.l_type == F_UNLCK)
			g_unguarded++;
	}
	return g_real->unlink(path);
}

int main(void)
{
	t_dir();
	snprintf(g_db, sizeof(g_db), "%s", t_path("s.db"));
	char lp[4100];
	snprintf(lp, sizeof(lp), "%s-atomio", g_db);
	sq_register();
	sq_remove_db(g_db);
	sqlite3 *db = sq_open(g_db, 1 << 20);
	sq_ok(db, "CREATE TABLE old(x); INSERT INTO old VALUES(1)");
	SQ_CHECK(db, sqlite3_close(db));
	CHECK_OK(access(lp, F_OK));
	CHECK_OK(unlink(g_db));
	usleep(10000); /* a later birth time, also on coarse clocks */
	db = sq_open_vfs(g_db, NULL, 0);
	sq_ok(db, "CREATE TABLE fresh(y); INSERT INTO fresh VALUES(2)");
	SQ_CHECK(db, sqlite3_close(db));
	struct statx a;
	if (statx(AT_FDCWD, g_db, 0, STATX_BTIME, &a) != 0 || !(a.stx_mask & STATX_BTIME)) {
		printf("SKIP: no birth times here: stale logs are kept\n");
		sq_remove_db(g_db);
		return 0;
	}

	/* A reader of the unix VFS holds SHARED while the VFS opens the
	 * database, so the open's own look (under an exclusive lock) is put
	 * off to the first read's SHARED lock. */
	sqlite3 *u = sq_open_vfs(g_db, NULL, 0);
	sq_ok(u, "BEGIN");
	CHECK_EQ(sq_int(u, "SELECT y FROM fresh"), 2);
	g_real = atomio_sys;
	g_ops = *atomio_sys;
	g_ops.name = "watch-unlink";
	g_ops.unlink = watch_unlink;
	atomio_sys_set(&g_ops);
	db = sq_open_vfs(g_db, "atomio", 0); /* reads nothing yet */
	sqlite3_busy_timeout(db, 5000);
	sq_ok(u, "COMMIT");
	SQ_CHECK(u, sqlite3_close(u));
	long long y = sq_int(db, "SELECT y FROM fresh");
	sq_ok(db, "INSERT INTO fresh VALUES(3)");
	sq_integrity(db);
	SQ_CHECK(db, sqlite3_close(db));
	atomio_sys_set(g_real);
	bool ok = y == 2 && g_removed >= 1 && g_unguarded == 0;
	printf("stalelog: read %lld; the stale log removed %d time(s), %d of them with SQLite's SHARED range "
	       "open to others: %s\n", y, g_removed, g_unguarded, ok ? "ok" : "FAIL");
	sq_remove_db(g_db);
	return ok ? 0 : 1;
}
