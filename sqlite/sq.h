/*
 * sq.h: SQLite's API for the VFS, in either build.
 *
 * The loadable extension (build/atomio_sqlite.so, -DATOMIO_SQLITE_EXTENSION)
 * calls SQLite through the routine table the loading SQLite hands it, so it
 * works in any process (even one with SQLite linked statically); the C
 * library (build/libatomio_sqlite.a) calls libsqlite3 directly.
 */
#ifndef ATOMIO_SQLITE_SQ_H
#define ATOMIO_SQLITE_SQ_H

#ifdef ATOMIO_SQLITE_EXTENSION
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3
#else
#include <sqlite3.h>
#endif

/* vfs.c, for ext.c */
int atomio_sqlite_register_impl(const char *name, int make_default);

#endif
