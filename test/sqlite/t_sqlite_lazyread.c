/*
 * The VFS reads lazy groups (issue 36): while a group that another handle of
 * the database's store committed lazily is not yet home, x_read goes through
 * atomio_pread (atomio_lazy_pending), so SQLite sees it.  The VFS commits
 * nothing lazily itself; a program under the preload may.  A connection
 * with nolock=1 (no locks, so no settle that would flush the group first):
 * after its first write it has the store.  A forked child with its own
 * handle, the store's first opener (so that the lazy delay is its 60 s),
 * lazily commits a change of the database header (user_version, and the
 * change counter so that SQLite drops its cache); the parent's
 * PRAGMA user_version returns it while the file still has the old one.
 */
#include <sys/wait.h>

#include "sq_t.h"

static void be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

static void child(const char *path, int in, int out)
{
	char lp[4200];
	snprintf(lp, sizeof(lp), "%s-atomio", path);
	struct atomio_options o = {0};
	o.flags = ATOMIO_ACCEPT_COPIES;
	o.lazy_delay_us = 60000000; /* only a sync or the close flushes */
	atomio *st;
	KCHECK(atomio_open(lp, &o, &st) == 0);
	int f = atomio_file_open(st, path, 0, 0);
	KCHECK(f >= 0);
	char c = 'o';
	KCHECK(write(out, &c, 1) == 1);
	KCHECK(read(in, &c, 1) == 1);
	uint8_t h[100];
	KCHECK(atomio_pread(st, f, h, sizeof(h), 0) == (ssize_t)sizeof(h));
	be32(h + 24, rd32(h + 24) + 1); /* the change counter */
	be32(h + 60, 42);               /* user_version */
	atomio_tx *tx;
	KCHECK(atomio_tx_begin(st, &tx) == 0);
	KCHECK(atomio_tx_write(tx, f, h + 24, 4, 24) == 0);
	KCHECK(atomio_tx_write(tx, f, h + 60, 4, 60) == 0);
	KCHECK(atomio_tx_commit_lazy(tx, NULL) == 0);
	KCHECK(write(out, &c, 1) == 1);
	KCHECK(read(in, &c, 1) == 1);
	KCHECK(atomio_close(st) == 0);
	_exit(0);
}

int main(void)
{
	const char *path = t_path("lazy.db");
	char uri[4400];
	snprintf(uri, sizeof(uri), "file:%s?nolock=1", path);
	sq_register();
	sqlite3 *db = NULL;
	/* the database and its log, closed (so the child opens the store first) */
	db = sq_open(path, 0);
	sq_ok(db, "CREATE TABLE t(x); INSERT INTO t VALUES(1);");
	CHECK_EQ(sqlite3_close(db), SQLITE_OK);
	int rd, wr;
	pid_t pid = t_fork_piped(&rd, &wr);
	if (pid == 0)
		child(path, rd, wr);
	char c;
	CHECK_EQ(read(rd, &c, 1), 1);
	CHECK_EQ(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, "atomio"), SQLITE_OK);
	sq_ok(db, "PRAGMA journal_mode=MEMORY; INSERT INTO t VALUES(2);"); /* the store joined */
	CHECK_EQ(sq_int(db, "PRAGMA user_version"), 0);
	CHECK_EQ(write(wr, "g", 1), 1);
	CHECK_EQ(read(rd, &c, 1), 1);
	/* the file has the old header; SQLite, through the VFS, the new one */
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	uint8_t h[100];
	CHECK_EQ(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	CHECK_EQ(rd32(h + 60), 0u);
	CHECK_EQ(sq_int(db, "PRAGMA user_version"), 42);
	CHECK_EQ(sq_int(db, "SELECT count(*) FROM t"), 2);
	CHECK_EQ(write(wr, "g", 1), 1);
	t_child_ok(pid);
	/* the child's close made it durable and home */
	CHECK_EQ(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	CHECK_EQ(rd32(h + 60), 42u);
	CHECK_EQ(sq_int(db, "PRAGMA user_version"), 42);
	close(fd);
	CHECK_EQ(sqlite3_close(db), SQLITE_OK);
	printf("ok\n");
	return 0;
}
