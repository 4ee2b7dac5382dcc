/*
 * ext.c: the loadable-extension entry points of build/atomio_sqlite.so.
 *
 * SQLite derives the entry point from the file name (atomio_sqlite.so ->
 * sqlite3_atomiosqlite_init); sqlite3_extension_init is the generic name.
 * Both register the VFS "atomio", not as the default, and keep the library
 * loaded after the loading connection closes (a VFS must outlive it).
 */
#include "atomio_sqlite.h"
#include "sq.h"

SQLITE_EXTENSION_INIT1

int sqlite3_atomiosqlite_init(sqlite3 *db, char **errmsg, const sqlite3_api_routines *api);
int sqlite3_extension_init(sqlite3 *db, char **errmsg, const sqlite3_api_routines *api);

int sqlite3_atomiosqlite_init(sqlite3 *db, char **errmsg, const sqlite3_api_routines *api)
{
	(void)db;
	SQLITE_EXTENSION_INIT2(api);
	int rc = atomio_sqlite_register_impl("atomio", 0);
	if (rc != SQLITE_OK) {
		*errmsg = sqlite3_mprintf("atomio: cannot register the VFS (%s)", sqlite3_errstr(rc));
		return rc;
	}
	return SQLITE_OK_LOAD_PERMANENTLY;
}

int sqlite3_extension_init(sqlite3 *db, char **errmsg, const sqlite3_api_routines *api)
{
	return sqlite3_atomiosqlite_init(db, errmsg, api);
}

/* In the extension, SQLite is reached through the routine table it hands
 * over when loading; before that there is no SQLite to register with. */
int atomio_sqlite_register(const char *name, int make_default)
{
	if (!sqlite3_api)
		return SQLITE_MISUSE;
	return atomio_sqlite_register_impl(name, make_default);
}
