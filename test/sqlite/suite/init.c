/*
 * init.c: SQLITE_EXTRA_INIT for SQLite's testfixture (make check-sqlite-suite).
 *
 * Both testfixtures of the suite are built with
 * -DSQLITE_EXTRA_INIT=atomio_suite_init, so the two differ only in this
 * function: with -DSUITE_ATOMIO the atomio VFS is registered as the default
 * (wrapping unix), so every test file opens its databases through it; without
 * it nothing happens and the testfixture is stock.
 */
#include <sqlite3.h>

#ifdef SUITE_ATOMIO
#include "atomio_sqlite.h"
#endif

int atomio_suite_init(const char *unused);

int atomio_suite_init(const char *unused)
{
	(void)unused;
#ifdef SUITE_ATOMIO
	return atomio_sqlite_register("atomio", 1);
#else
	return SQLITE_OK;
#endif
}
