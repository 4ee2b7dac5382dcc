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
 * them.  A group that cannot fit the log fails with SQLITE_IOERR_WRITE and
 * leaves the database unchanged.  The log is the file "DB-atomio" beside the
 * database "DB", created with mode 0600 on first write (size: URI parameter
 * atomio_log_size=BYTES, default 64 MiB; it bounds the largest transaction).
 *
 * The VFS also answers SQLITE_IOCAP_BATCH_ATOMIC and the SQLITE_FCNTL_BEGIN_,
 * COMMIT_ and ROLLBACK_ATOMIC_WRITE file controls, so an SQLite built with
 * SQLITE_ENABLE_BATCH_ATOMIC_WRITE uses the same groups natively, even in
 * journal_mode=DELETE.
 *
 * Two ways in:
 *   - the loadable extension build/atomio_sqlite.so: `.load build/atomio_sqlite`
 *     in the sqlite3 shell, or sqlite3_load_extension(); it registers a VFS
 *     named "atomio" (not the default), selected with file:DB?vfs=atomio or
 *     sqlite3_open_v2(..., "atomio");
 *   - from C, link build/libatomio_sqlite.a (with -latomio -lsqlite3 -lxxhash)
 *     and call atomio_sqlite_register().
 *
 * Several connections and processes (README, "SQLite"):
 *   - Any number of connections and threads of one process share one atomio
 *     store per database; SQLite's locks order them as usual.
 *   - Other processes may open the database at any time and read it; a reader
 *     never sees part of a commit.  One process at a time writes: the first
 *     that writes becomes the database's writer (it opens the store) until its
 *     last connection to the database closes; another process's attempt to
 *     write meanwhile gets SQLITE_BUSY (its busy handler retries).
 *   - Locks are Linux open-file-description locks on SQLite's usual lock
 *     bytes, so they also exclude processes that use the plain unix VFS.
 *   - Recovery (replaying the log after a crash) runs when the database is
 *     opened, or when any connection finds the writer gone, always under an
 *     exclusive lock.  Open a crashed database through this VFS before any
 *     tool that does not use it.
 *   - journal_mode=WAL is refused (the PRAGMA fails with a message); rollback
 *     journals (DELETE, TRUNCATE, PERSIST) work, but cost their usual syncs.
 *   - Keep the -atomio log with its database: delete, move or rename both or
 *     neither, as with SQLite's own -journal.  A log older than its database
 *     (the database was deleted and created again) is refused with
 *     SQLITE_CANTOPEN, never replayed into the new file.
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
