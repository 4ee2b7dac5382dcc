/*
 * internals.h: the atomio SQLite VFS (include/atomio_sqlite.h): its
 * design, its threads and locks, and what its files share.  Internal: not
 * installed.
 *
 * A shim over the default (unix) VFS.  Every file but a main database, its
 * rollback journal and its WAL passes straight through.  For a main database
 * "DB":
 *
 * GROUPS.  xWrite and xTruncate do not touch the file: they go to the
 * connection's pending group (pend.c), which xRead and xFileSize overlay on
 * the file.  The group is committed as one atomio group (one durable log
 * write, then the home writes) at SQLITE_FCNTL_SYNC, which SQLite sends at
 * every commit right before xSync (and in its place with synchronous=OFF), or
 * at SQLITE_FCNTL_COMMIT_ATOMIC_WRITE in a batch-atomic build.  Without a
 * rollback journal on disk the synced group waits for phase two
 * (SQLITE_FCNTL_COMMIT_PHASETWO) or, where SQLite ignores phase two's
 * result (a super-journal), for the super-journal's deletion, so that all
 * databases of a transaction over ATTACHed ones commit as one group
 * (commit_set), or its COMMIT fails (x_file_control).  xSync itself then has
 * nothing to do: an acknowledged group is durable in the log, and the store's
 * checkpoint syncs the file before the log space is reused.  A group still
 * pending when the lock drops below RESERVED, synced or not, was never
 * committed: SQLite rolled the transaction back or failed it, so it is
 * discarded and the file is exactly as before the transaction.
 *
 * SYNCHRONOUS.  With PRAGMA synchronous=NORMAL or OFF (SQLite's level, which
 * it never passes to the VFS: xSync gets SQLITE_SYNC_NORMAL at FULL too,
 * so the VFS reads it from SQLITE_FCNTL_PRAGMA, per connection and
 * database; at open from SQLite's compiled default or the URI parameter
 * atomio_synchronous) a single database's group is committed lazily
 * (atomio_tx_commit_lazy): atomic and visible to every process at once,
 * durable at the store's next sync, durable commit, last close or within
 * its lazy delay (URI atomio_lazy_ms), a prefix of commit order after a
 * crash.  FULL and EXTRA commit durably, and SQLite's lock is never given
 * up before that: no reader sees a commit that a power cut can take back.
 * Commits over several databases, into WAL, and with a rollback journal
 * on disk stay durable at every level.
 *
 * JOURNALS.  So a rollback journal on disk adds nothing, and the VFS keeps
 * the ones SQLite creates in memory (journal.c): in DELETE, TRUNCATE and
 * PERSIST mode, SQLite's default included, every transaction commits as
 * one group, as in MEMORY mode, with SQLite's ROLLBACK, savepoints and
 * statement rollback working on its journal as usual.
 *
 * WAL.  journal_mode=WAL is SQLite's own, with the unix VFS's shared memory
 * (wal.c): no groups, no log; the database file is written directly, by
 * checkpoints only.
 *
 * THE STORE.  The log is "DB-atomio", and its store is shared: every
 * process that reads or writes the database in a rollback mode joins it
 * (atomio_open without ATOMIO_EXCLUSIVE; within a process, all connections
 * to the database share one handle, struct adb, found by device and inode)
 * and keeps it while it has the database open.  SQLite's own locks decide
 * who writes; each commit is one group from whichever process commits,
 * with no checkpoint and no handing over when the writer changes.
 *
 * LOCKS.  SQLite's usual lock bytes (PENDING, RESERVED, SHARED range), taken
 * as Linux open-file-description (OFD) locks on a descriptor of the
 * connection's own.  OFD locks conflict with the classic POSIX locks of the
 * unix VFS in other processes, so plain SQLite is excluded as usual; and,
 * unlike POSIX locks, they are not dropped when the process closes some
 * other descriptor of the file, which atomio does (its store and its
 * recovery open and close the database file).  Each connection has its own
 * open file description, so connections of one process lock each other out
 * exactly as processes do.  Writers take turns (turns.h): a refused
 * connection's busy-handler sleep (v_sleep) ends when it is handed the
 * write lock, and the others yield to it meanwhile, so that the writer that
 * just committed does not take every turn.
 *
 * NO READER SEES HALF A COMMIT.  Home writes happen inside the commit, with
 * the EXCLUSIVE lock held, and end before the commit returns, so a reader
 * holding SHARED never overlaps a live writer's.  A writer killed in the
 * middle of one leaves its group to the store's other processes, or to the
 * next one to open the log, which recovers it: before reading, every
 * connection that takes SHARED joins the store and waits until it is
 * settled (settle: atomio_settle), so that it never reads a group half
 * home.
 *
 * SYSTEM CALLS.  Every byte the store writes goes through libatomio and so
 * through its ops table (src/sys.h).  So do the VFS's own calls on its
 * marker files and on the logs (opening, reading, writing, syncing and
 * removing them, their directory's sync, the log's flock probe and birth
 * time), and, in WAL mode, every call on the WAL file and every write,
 * truncation and sync of the database: sysio.c.  Only its locks (OFD
 * locks on descriptors of its own), the read-only map of the database and
 * the look at a rollback journal's first byte go to the system directly;
 * SQLite's own calls on the database (reads, its creation) and WAL's
 * shared memory are the unix VFS's.  A rollback journal on disk (a hot
 * one, or one that names a database of another VFS) is the unix VFS's file
 * too.
 *
 * THE FILES, each opening with what it owns, from the top down: each calls
 * only into files below it, never up (so no call or include cycle), and
 * all share this header.
 *   vfs.c      the vfs methods (v_*) and atomio_sqlite_register
 *   io.c       the io methods of a main database (aio_methods) but its locks
 *   lock.c     LOCKS: x_lock, x_unlock, settle, write transactions, turns
 *   journal.c  JOURNALS: rollback and super-journals in memory (mf_*)
 *   group.c    GROUPS: the diff, the commit, commit_set, the ready list
 *   wal.c      WAL: the WAL file's methods, the store dropped for WAL
 *   store.c    THE STORE: probe, open, grow, repair, recovery, stale logs
 *   db.c       the databases of this process (struct adb, g_dbs), the open
 *              connections (g_conns), g_mu, the fork handlers (FORK)
 *   sysio.c    SYSTEM CALLS (sysio.h): the f_* calls, the OFD lock call
 *   pend.c     a connection's pending group (pend.h), and
 *   turns.c    the writers' turns (turns.h): below all of them
 *   ext.c      the loadable extension's entry point, above vfs.c
 *
 * THREADS AND LOCKS.  SQLite calls a connection from one thread at a time;
 * different connections, to one database or several, run in any threads at
 * once and share this process's struct adb of each database.  A
 * connection's own fields (elock, pend, ready, map, streak) are its
 * caller's; what other threads reach is guarded as follows.
 *  - SQLite's lock levels, as OFD locks on the connection's lockfd (LOCKS),
 *    between connections and processes alike.  Never waited for
 *    (F_OFD_SETLK: a conflict is SQLITE_BUSY, and the busy handler sleeps,
 *    v_sleep), so they take part in no lock order.  EXCLUSIVE covers every
 *    commit (its home writes end inside it), every recovery and the group
 *    markers of commit_set, and d->mark_log; RESERVED with SHARED, a log's
 *    growth (grow_store).  PROBE_BYTE: held with the exclusive lock only to
 *    look at or recover the log.
 *  - g_mu (db.c), one mutex for the process: the lists g_dbs, g_conns (a
 *    connection's lockfd stays open while readers_left looks at it under
 *    g_mu), g_journals and g_supers (journal.c); a database's refs, nres,
 *    dfd, wal_blocked and snapshot (snap_*), and every change of its store
 *    (open_store, grow_store, repair_store, wal_drop_store,
 *    recover_release, settle's drop of a store whose log went), with the
 *    fields open_store sets (fid, capacity, max_segs, log_ino).  atomio's
 *    own locks are taken under it (atomio_open, _checkpoint and _close run
 *    inside it; atomio_settle and the commit's atomio_tx_commit do not).
 *    Held across fork() (fork_prepare), so that the child's lists are whole.
 *  - g_rmu (group.c), a leaf (nothing is taken while it is held): the ready
 *    list g_ready and each connection's rnext, rowner and rbusy;
 *    ready_forget waits for rbusy with it released.
 *  - Atomics, no lock: d->st and d->turns are published under g_mu
 *    (open_store: release store) and read without it (writer_store:
 *    acquire load) by a connection that holds SQLite's lock.  d->npin
 *    counts the threads that use them outside g_mu (turns_pin: a writer's
 *    turns, a sleeper in v_sleep; store_pin: settle's atomio_settle,
 *    atomio_stats); store_unpublish clears both under g_mu and waits until
 *    npin is zero before the caller closes the store, so the turns words
 *    stay mapped and the store open while pinned.  So a pinned thread
 *    that waits for g_mu can deadlock with an unpublisher: v_sleep's
 *    readers_left does so, refused EXCLUSIVE with PENDING held and counted
 *    in nres.  Meanwhile no other connection can reach EXCLUSIVE
 *    (repair_store, a commit's wal_drop_store), grow_store refuses
 *    (nres > 1) and settle keeps the store (nres > 0); what remains is a
 *    WAL file's open (w_open) by a connection that took SHARED before the
 *    PENDING.  d->size (the writer's record of the file's size, -1:
 *    unknown) and d->nwal (WAL files open) are atomic too.
 *  - The turns words (turns.h), in the store's shared area: between the
 *    writers of every process of the store, by atomic operations and futex
 *    waits.  t_turn (lock.c), thread-local: the thread's last refusal of a
 *    lock, for its busy handler's sleep, and a hand-off it was given.
 *  - atomio's ops table (sysio.c) keeps no state of the VFS's.
 */
#ifndef ATOMIO_SQLITE_INTERNALS_H
#define ATOMIO_SQLITE_INTERNALS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "atomio.h"
#include "pend.h"
#include "sq.h"
#include "turns.h"

/* SQLite's lock bytes (src/os.h), as the unix VFS locks them. */
#define PENDING_BYTE 0x40000000
#define RESERVED_BYTE (PENDING_BYTE + 1)
#define SHARED_FIRST (PENDING_BYTE + 2)
#define SHARED_SIZE 510
#define LOCK_SPAN (2 + SHARED_SIZE)
/* The byte after SQLite's: held (write) by a connection of this VFS while
 * it holds the exclusive lock only to look at or recover the log (at its
 * open, or a reader's recovery of a group marker), so that a reader refused
 * SHARED meanwhile waits for it rather than report SQLITE_BUSY, which no
 * open of the unix VFS ever causes (lock_shared).  SQLite's lock page is
 * never data, and SQLite locks no byte of it but its own. */
#define PROBE_BYTE (SHARED_FIRST + SHARED_SIZE)
/* How long such a reader waits at most: a look at the log takes
 * microseconds, a recovery replays the log. */
#define PROBE_WAIT_MS 500

#define LOG_SUFFIX "-atomio"
/* Beside each database of a transaction over several (ATTACH), for as long
 * as its group may lie in another database's log (see commit_set). */
#define GROUP_SUFFIX "-atomio-group"
#define MAX_SET 16

/* One database as this process sees it, shared by its connections. */
struct adb {
	struct adb *next;
	dev_t dev;
	ino_t ino;
	int refs;
	char *db_path;
	char *log_path;
	uint64_t log_size;   /* for creating the log (0 = atomio's default) */
	uint64_t lazy_us;    /* URI atomio_lazy_ms: the store's lazy delay (0 = atomio's default) */
	atomio *st;          /* this process is the writer; atomic load/store */
	struct turns *turns; /* in st's shared area while st is published; atomic (turns_pin) */
	int npin;            /* threads using turns (turns_pin); atomic */
	char store_err[512]; /* st's message buffer (atomio writes there while st is open) */
	int fid;
	uint64_t capacity;   /* bytes of records the log holds */
	uint32_t max_segs;   /* most ranges one group of the store may have */
	int nres;            /* connections of this process in a write transaction */
	int wfd;             /* our own open file description (header_wal, f_size) */
	bool forked;         /* a copy in a child after fork (fork_child) */
	ino_t log_ino;       /* the log st joined (settle: still the one at log_path?) */
	/* The writer's record of the database's size (only its commits change
	 * it), so that transactions need no fstat.  -1: unknown.  Atomic. */
	int64_t size;
	int nwal;            /* WAL files of it open in this process (wal.c); atomic */
	int dfd;             /* while nwal > 0: for WAL's writes to the database (-1: none) */
	bool wal_blocked;    /* a store could not be closed for WAL: no direct writes */
	bool snap_ok;        /* snap: the log's mark after our recovery */
	ino_t snap_ino;
	struct atomio_log_mark snap;
	/* The log of a transaction over several databases that committed with
	 * this database among them but whose checkpoint failed, so its group
	 * may still be live there and its markers stay (commit_set): until it
	 * is checkpointed, no later group of this database may commit
	 * (unmark).  NULL: none.  Set and cleared under this database's
	 * EXCLUSIVE lock. */
	char *mark_log;
	/* BASE CACHE (group.c, bc_*): while lazy groups of this database are
	 * pending, the diff's base is not the file.  From a moment when none
	 * was pending, every page this process's commits wrote, as they left
	 * it, so long as each commit's change counter follows the last one's
	 * (no other connection committed).  Used and changed under SQLite's
	 * EXCLUSIVE lock only. */
	struct pend bc;
	bool bc_ok;
	uint32_t bc_counter; /* the change counter our last cached commit wrote */
	atomio *bc_st;       /* the store of that chain */
};

/* A registered VFS. */
struct avfs {
	sqlite3_vfs base;
	sqlite3_vfs *real;
	struct avfs *next;
	char name[64];
};

/* A main-database connection; the real file follows it in memory. */
typedef struct aconn {
	sqlite3_file base;
	sqlite3_file *real;
	struct adb *db;
	int lockfd;
	int elock;           /* SQLITE_LOCK_* held */
	bool diff;           /* log only changed bytes (URI atomio_diff, default on) */
	bool nolock;         /* URI nolock=1: SQLite never calls xLock */
	int sync_level;      /* SQLite's PRAGMA synchronous as the VFS knows it: 0 OFF, 1 NORMAL,
				2 FULL, 3 EXTRA (sync_level_of); <= 1 commits lazily (SYNCHRONOUS) */
	bool counted;        /* in the database's nres (a write transaction) */
	bool ready;          /* the group was synced: commit it with the others */
	int base_mode;       /* where the group's diff finds its base (add_group: enum base_mode) */
	bool chain;          /* commit_group: the database's base cache holds this group's base */
	int64_t file_real;   /* BASE_CHAIN: the file's size (pages below it not cached are the file's) */
	unsigned streak;     /* write locks taken since it last handed one off (turns) */
	struct aconn *rnext; /* g_ready */
	pthread_t rowner;    /* the thread that synced the group (ready_add) */
	bool rbusy;          /* in a commit of rowner's (ready_take): not freed meanwhile */
	struct aconn *cnext; /* g_conns */
	bool inherited;      /* a copy in a child after fork (fork_child): never used */
	unsigned char *map;  /* the file, read-only, for the diff (map_base) */
	size_t maplen;
	struct pend pend;
} aconn;

#define ROUND8(n) (((n) + 7) & ~(size_t)7)

static inline atomio *writer_store(struct adb *d) { return __atomic_load_n(&d->st, __ATOMIC_ACQUIRE); }
static inline sqlite3_vfs *real_vfs(sqlite3_vfs *v) { return ((struct avfs *)v)->real; }

enum probe { PROBE_WRITER, PROBE_NOLOG, PROBE_CLEAN, PROBE_DIRTY };

/* What the files call of each other, from the top file down (vfs.c calls
 * into all of them; each calls only into files below it: no call runs back
 * up); each function's comment is at its definition.  sysio.h is the
 * bottom. */

/* io.c */
int sync_level_of(const char *z, int dflt);
int x_close(sqlite3_file *f);
extern const sqlite3_io_methods aio_methods;

/* lock.c */
int x_inherited(aconn *c, int rc);
void unlock_all(aconn *c);
int grab_exclusive(aconn *c);
int enter_write(aconn *c);
void leave_write(aconn *c);
int x_lock(sqlite3_file *f, int level);
int x_unlock(sqlite3_file *f, int level);
int x_check_reserved(sqlite3_file *f, int *out);
int v_sleep(sqlite3_vfs *v, int us);

/* journal.c */
bool super_in_memory(const char *name);
int journal_to_disk(struct adb *d);
int mf_open(sqlite3_vfs *real, const char *name, sqlite3_file *f, int flags, int *out);
int mf_delete(sqlite3_vfs *real, const char *name, int sync);

/* group.c */
enum base_mode { BASE_FILE, BASE_CHAIN, BASE_READ };
void bc_drop(struct adb *d);
int64_t base_read(void *ctx, void *buf, int64_t n, int64_t off);
int64_t lazy_read(aconn *c, void *buf, int64_t n, int64_t off);
bool journal_on_disk(struct adb *d);
uint64_t group_need(const struct pend *p);
int commit_group(aconn *c, bool fold);
void ready_add(aconn *c);
void ready_drop(aconn *c);
void ready_forget(aconn *c);
int commit_ready(aconn *c);
int commit_at_super_delete(void);

/* wal.c */
bool group_sets_wal(aconn *c);
void wal_drop_store(struct adb *d);
bool wal_mode(struct adb *d);
void count_sync(int flags);
int w_open(sqlite3_vfs *real, const char *name, sqlite3_file *f, int flags, int *out);
int w_delete(const char *name, int sync);

/* store.c */
struct turns *turns_pin(struct adb *d);
void turns_unpin(struct adb *d);
atomio *store_pin(struct adb *d);
void store_unpin(struct adb *d);
void store_unpublish(struct adb *d);
void remove_log(struct adb *d);
int probe(struct adb *d);
bool log_stale(struct adb *d, bool replaced);
char *suffixed(const char *path, const char *suffix);
bool has_group_marker(struct adb *d);
int replay_log(const char *log_path, char *err, size_t errlen);
int recover_release(struct adb *d);
int open_store(struct adb *d);
bool grow_store(struct adb *d, uint64_t need);
void repair_store(struct adb *d);

/* db.c */
extern pthread_mutex_t g_mu;
extern struct adb *g_dbs;
extern struct aconn *g_conns;
struct adb *db_by_id(dev_t dev, ino_t ino);
struct adb *get_db(int fd, const char *path, uint64_t log_size, uint64_t lazy_us);
extern pthread_once_t g_fork_once;
void fork_register(void);
void release_db(struct adb *d);
struct adb *db_named(const char *name, const char *suffix);
void log_atomio(int rc, struct adb *d, const char *what, int err, const char *detail);

#endif
