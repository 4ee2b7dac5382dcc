/*
 * atomio_sqlite: an SQLite VFS that commits each transaction of a database
 * as one atomio group.
 *
 * No pragma is needed: in every journal mode but WAL (SQLite's default
 * DELETE, TRUNCATE, PERSIST, MEMORY, OFF), every page write of the main
 * database file between two syncs goes into one group that is committed, all
 * or nothing, at the commit with one durable log write.  The rollback journal
 * SQLite keeps in DELETE, TRUNCATE and PERSIST mode is held in memory by the
 * VFS, as MEMORY mode's (ROLLBACK, savepoints and statement rollback work as
 * usual; a hot journal on disk left by another VFS is still rolled back).
 * Pages written before the commit (cache spill) and truncations (VACUUM,
 * auto-vacuum) join the same group; the connection's own reads see them.
 * journal_mode=WAL is SQLite's own WAL, as under the unix VFS (its shared
 * memory, readers in any number of processes beside the writer): no groups
 * and no log there.  The log is the file "DB-atomio" beside the database
 * "DB", created with mode 0600 on first write (record area: URI parameter
 * atomio_log_size=BYTES, default 8 times the database, 8 to 64 MiB); a
 * transaction that does not fit grows it.  A transaction over several
 * ATTACHed databases commits as one group in every mode but WAL
 * (docs/SQLITE.md).  At PRAGMA synchronous=NORMAL or OFF (or URI
 * atomio_synchronous=normal) a one-database commit is a lazy group: atomic
 * and visible to every process at once, durable at the next FULL commit,
 * the last close or within the store's lazy delay (URI atomio_lazy_ms=N,
 * default 200); at FULL (SQLite's default) and EXTRA it is durable when the
 * COMMIT returns (docs/SQLITE.md, "synchronous").
 *
 * The VFS also answers the SQLITE_FCNTL_BEGIN_, COMMIT_ and
 * ROLLBACK_ATOMIC_WRITE file controls, and, to an SQLite built with
 * SQLITE_ENABLE_BATCH_ATOMIC_WRITE, SQLITE_IOCAP_BATCH_ATOMIC, so that such an
 * SQLite uses the same groups natively, even in journal_mode=DELETE.
 *
 * Two ways in:
 *   - the loadable extension build/atomio_sqlite.so: `.load build/atomio_sqlite`
 *     in the sqlite3 shell, or sqlite3_load_extension(); it registers a VFS
 *     named "atomio" (not the default), selected with file:DB?vfs=atomio or
 *     sqlite3_open_v2(..., "atomio");
 *   - from C, link libatomio_sqlite.a as `pkg-config --libs atomio_sqlite`
 *     says (-latomio_sqlite -latomio -lsqlite3; --static adds -lxxhash
 *     -llz4 -luring -pthread and SQLite's own) and call
 *     atomio_sqlite_register().
 *
 * Several connections and processes (docs/SQLITE.md):
 *   - Every process that uses the database in a rollback mode joins one
 *     shared atomio store, the database's (connections and threads of one
 *     process share one handle).  SQLite's locks decide who writes, one
 *     transaction at a time; each commit is one group from whichever process
 *     commits, with no handing over between processes.
 *   - A reader never sees part of a commit: before reading, a connection
 *     waits until the store has finished the group of any writer killed in
 *     the middle of a commit (atomio_settle).
 *   - Locks are Linux open-file-description locks on SQLite's usual lock
 *     bytes, so they also exclude processes that use the plain unix VFS.
 *   - Recovery (replaying the log after a crash) runs when the first process
 *     joins the store, before anyone reads.  Open a crashed database through
 *     this VFS before any tool that does not use it.
 *   - WAL: any number of processes read beside one writer, as with the unix
 *     VFS (processes of the unix VFS too); switching a database to WAL
 *     removes its log.  nolock=1 works.  No mmap (xFetch).
 *   - Keep the -atomio log with its database: delete, move or rename both or
 *     neither, as with SQLite's own -journal.  A log older than its database
 *     (the database was deleted and created again) is never replayed into the
 *     new file: it is removed at open, unless a store holds it.
 *   - The log is private (0600): all processes using the database through
 *     the VFS must run as its owner.
 */
#ifndef ATOMIO_SQLITE_H
#define ATOMIO_SQLITE_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Register the atomio VFS under `name` (NULL: "atomio"), wrapping the current
 * default VFS; with make_default nonzero it becomes the default.  Registering
 * a name again only changes whether it is the default.  Returns SQLITE_OK,
 * SQLITE_NOMEM, or SQLITE_ERROR when there is no default VFS to wrap.
 */
int atomio_sqlite_register(const char *name, int make_default);

#ifdef __cplusplus
}
#endif
#endif
