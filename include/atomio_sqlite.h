/*
 * atomio_sqlite: an SQLite VFS that commits each transaction of a database
 * as one atomio group.
 *
 * Use it with PRAGMA journal_mode=MEMORY (or OFF) and synchronous=FULL (or
 * NORMAL): SQLite then keeps no rollback journal, and every page write of the
 * main database file between two syncs goes into one group that is committed,
 * all or nothing, at the sync (SQLITE_FCNTL_SYNC / xSync) with one durable
 * log write.  Pages written before the commit (cache spill) and truncations
 * (VACUUM, auto-vacuum) join the same group; the connection's own reads see
 * them.  The log is the file "DB-atomio" beside the database "DB", created
 * with mode 0600 on first write (record area: URI parameter
 * atomio_log_size=BYTES, default 8 times the database, 8 to 64 MiB); a
 * transaction that does not fit grows it.  A transaction over several
 * ATTACHed databases commits as one group (README, "SQLite").
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
 * Several connections and processes (README, "SQLite"):
 *   - Any number of connections and threads of one process share one atomio
 *     store per database; SQLite's locks order them as usual.
 *   - Other processes may open the database at any time and read it; a reader
 *     never sees part of a commit.  Many processes write, one transaction at
 *     a time: a process that writes holds the store (the log's lock) while it
 *     goes on writing; another one's write meanwhile gets SQLITE_BUSY (its
 *     busy handler retries) and asks for the store, which the holder gives up
 *     at the end of its transaction, or within milliseconds when idle.
 *   - Locks are Linux open-file-description locks on SQLite's usual lock
 *     bytes, so they also exclude processes that use the plain unix VFS.
 *   - Recovery (replaying the log after a crash) runs when the database is
 *     opened, or when any connection finds the writer gone, always under an
 *     exclusive lock.  Open a crashed database through this VFS before any
 *     tool that does not use it.
 *   - PRAGMA journal_mode=WAL keeps the current mode and returns it (no
 *     shared memory), except in locking_mode=EXCLUSIVE, where SQLite runs WAL
 *     with a heap-memory index; rollback journals (DELETE, TRUNCATE, PERSIST)
 *     work, but cost their usual syncs.  nolock=1 works.  No mmap (xFetch).
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
