/*
 * init.c: SQLITE_EXTRA_INIT for SQLite's testfixture (make check-sqlite-suite).
 *
 * Both testfixtures of the suite are built with
 * -DSQLITE_EXTRA_INIT=atomio_suite_init, so the two differ only in this
 * function: with -DSUITE_ATOMIO the atomio VFS is registered as the default
 * (wrapping unix), so every test file opens its databases through it; without
 * it nothing happens and the testfixture is stock.
 *
 * SQLite builds its testfixture with SQLITE_NO_SYNC: the unix VFS never
 * flushes.  For the same conditions atomio runs on a system-call table
 * (src/sys.h, the one tests use to record or fail calls) whose fsync and
 * fdatasync do nothing and whose writes drop RWF_DSYNC; everything else is
 * the real call.  SUITE_ATOMIO_SYNC=1 keeps atomio's flushes.  On that table
 * SQLite's simulated I/O errors also reach atomio's writes (below).
 */
#include <sqlite3.h>

#ifdef SUITE_ATOMIO
#include <errno.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "atomio_sqlite.h"
#include "sys.h"

/* SQLite's simulated I/O errors (its testfixture's counters, which the
 * ioerr tests set; os_unix.c's SimulateIOError): atomio's writes, syncs and
 * truncations count down and fail (EIO) with the unix VFS's, so that those
 * tests reach atomio's own I/O too (SUITE_ATOMIO_IOERR=0: they do not). */
extern int sqlite3_io_error_pending, sqlite3_io_error_persist, sqlite3_io_error_hit;
extern int sqlite3_io_error_hardhit, sqlite3_io_error_benign;
static int sim_ioerr;

static int ioerr_now(void)
{
	if (!sim_ioerr)
		return 0;
	if ((sqlite3_io_error_persist && sqlite3_io_error_hit) || sqlite3_io_error_pending-- == 1) {
		sqlite3_io_error_hit++;
		if (!sqlite3_io_error_benign)
			sqlite3_io_error_hardhit++;
		return 1;
	}
	return 0;
}

static int nosync_fsync(int fd)
{
	(void)fd;
	return ioerr_now() ? -EIO : 0;
}

static ssize_t nosync_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	if (ioerr_now())
		return -EIO;
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf & ~RWF_DSYNC);
}

static int nosync_ftruncate(int fd, off_t size)
{
	return ioerr_now() ? -EIO : atomio_sys_linux.ftruncate(fd, size);
}

static struct atomio_sysops nosync;
#endif

int atomio_suite_init(const char *unused);

int atomio_suite_init(const char *unused)
{
	(void)unused;
#ifdef SUITE_ATOMIO
	const char *e = getenv("SUITE_ATOMIO_SYNC");
	if (!e || !*e || *e == '0') {
		nosync = atomio_sys_linux;
		nosync.name = "suite-nosync";
		nosync.fsync = nosync_fsync;
		nosync.fdatasync = nosync_fsync;
		nosync.pwritev = nosync_pwritev;
		nosync.ftruncate = nosync_ftruncate;
		e = getenv("SUITE_ATOMIO_IOERR");
		sim_ioerr = !e || !*e || *e != '0';
		atomio_sys_set(&nosync);
	}
	return atomio_sqlite_register("atomio", 1);
#else
	return SQLITE_OK;
#endif
}
