/*
 * preload.h: libatomio_preload.so, atomic writes for unmodified programs
 * (man/atomio_preload.7 is the contract; docs/PRELOAD.md).
 *
 * The library is loaded with LD_PRELOAD.  It interposes libc's file calls;
 * for a descriptor of a file that matches ATOMIO_FILES ("protected") it turns
 * every write into one atomio group committed lazily (every process of the
 * store reads it at once; durable at the next sync or within the lazy
 * delay), and every sync into atomio_sync of the file.  Everything else
 * goes straight to libc after one lookup in the descriptor table.
 *
 * Files:
 *   real.c   the libc functions underneath (dlsym(RTLD_NEXT)), and the ops
 *            table the store's own system calls go through, so that the
 *            library never calls its own wrappers (and, for tests, a trace
 *            of the store's mutating calls: ATOMIO_PRELOAD_TRACE)
 *   state.c  configuration, path matching, the store's life (recovery before
 *            main, lazy open, restart around exec/rename/unlink, fork), the
 *            descriptor table, protected files, commits and syncs
 *   wrap.c   the interposed functions
 *
 * THREADING.  g_rw (state.c) is held shared by every call that uses the
 * store, exclusive by the calls that close and reopen it (exec, rename and
 * unlink of a protected file, fork's prepare).  struct pfile.mu guards one
 * file's id, error and (group mode) pending group and logical size; struct
 * pofd.pos_mu makes a write's "read the position, commit, move the
 * position" one step (with pl_xlock, which orders the processes too).  Lock order:
 * g_rw, then pos_mu, then pl_xlock's slot, then pfile.mu, then g_mu (the file list and the
 * mappings); a shared-mode rename or unlink takes every slot (pl_xlock_all)
 * with g_rw exclusive, so no thread of its process holds one; g_open_mu (opening the store) is taken with g_rw shared and
 * before any file's mu.  The pass-through path takes none of them: one atomic load of the
 * descriptor table.
 */
#ifndef ATOMIO_PRELOAD_H
#define ATOMIO_PRELOAD_H

#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "atomio.h"
#include "trace.h"

/* --- real.c ----------------------------------------------------------------- */

struct real_fns {
	int (*open)(const char *, int, ...);
	int (*openat)(int, const char *, int, ...);
	int (*close)(int);
	int (*close_range)(unsigned, unsigned, int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*pread)(int, void *, size_t, off_t);
	ssize_t (*pwrite)(int, const void *, size_t, off_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*preadv2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*pwritev2)(int, const struct iovec *, int, off_t, int);
	off_t (*lseek)(int, off_t, int);
	int (*fsync)(int);
	int (*fdatasync)(int);
	int (*sync_file_range)(int, off64_t, off64_t, unsigned);
	int (*syncfs)(int);
	void (*sync)(void);
	int (*ftruncate)(int, off_t);
	int (*truncate)(const char *, off_t);
	int (*fallocate)(int, int, off_t, off_t);
	int (*posix_fallocate)(int, off_t, off_t);
	int (*fstat)(int, struct stat *);
	int (*stat)(const char *, struct stat *);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	int (*munmap)(void *, size_t);
	int (*msync)(void *, size_t, int);
	int (*renameat2)(int, const char *, int, const char *, unsigned);
	int (*rename)(const char *, const char *);
	int (*renameat)(int, const char *, int, const char *);
	int (*unlink)(const char *);
	int (*unlinkat)(int, const char *, int);
	int (*link)(const char *, const char *);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*fexecve)(int, char *const[], char *const[]);
	ssize_t (*copy_file_range)(int, off64_t *, int, off64_t *, size_t, unsigned);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*splice)(int, off64_t *, int, off64_t *, size_t, unsigned);
	FILE *(*fopen)(const char *, const char *);
	FILE *(*fdopen)(int, const char *);
	FILE *(*freopen)(const char *, const char *, FILE *);
};
extern struct real_fns real;

/* Resolve every real function (idempotent, thread-safe). */
void real_init(void);

/* The ops table for the store (atomio_sys_set): every entry calls the real
 * function, never a wrapper.  With ATOMIO_PRELOAD_TRACE set, its mutating
 * calls are also recorded (real_trace_open). */
void real_install_ops(void);
/* Tests: append the store's mutating calls, and the markers below, to path. */
void real_trace_open(const char *path);
void real_trace_mark(int kind, uint64_t a, uint64_t b);

/* --- state.c ---------------------------------------------------------------- */

/* One protected file (one inode), shared by all its descriptors. */
struct pfile {
	pthread_mutex_t mu;
	dev_t dev;
	ino_t ino;
	char *path;          /* canonical absolute path */
	int id;              /* atomio file id; -1 = not registered in the store */
	bool reg_wanted;     /* register again when the store is reopened */
	bool orphan;         /* unlinked or replaced: no longer protected */
	int64_t size;        /* group mode: the size the pending group leaves (else unused:
				the store's atomio_file_size is the truth) */
	int err;             /* first failed group's error (negative), reported by syncs */
	uint32_t dio_off, dio_mem; /* O_DIRECT alignment the kernel asks for */
	_Atomic int nopen;   /* open file descriptions of it */
	struct pend *pend;   /* group mode: the writes since the last sync (group.c) */
	bool warned_direct;
	_Atomic uint64_t rgen; /* the rename count when its path was last found right */
	_Atomic bool extends; /* its last write here extended it: the next looks at the size
				 before it locks (p_write); a hint, right or wrong alike safe */
	struct pfile *next;
};

/* One open file description of a protected file (shared by dup'ed fds). */
struct pofd {
	_Atomic int refs;
	struct pfile *f;
	int flags;           /* open flags; O_APPEND and O_DIRECT follow F_SETFL */
	pthread_mutex_t pos_mu;
	unsigned forkgen;    /* g_forkgen when made: another value, and xproc, say that other */
	_Atomic bool xproc;  /* processes may hold the description too (pl_pofd_xproc) */
};

/* The descriptor table: fd -> pofd, or NULL for everything not protected. */
extern _Atomic(struct pofd *) *g_fdtab;
extern int g_fdtab_n;
static inline struct pofd *pofd_of(int fd)
{
	if ((unsigned)fd >= (unsigned)g_fdtab_n || !g_fdtab)
		return NULL;
	return atomic_load_explicit(&g_fdtab[fd], memory_order_acquire);
}

/* Descriptors the store itself opened (real.c marks them): the program's
 * close() of one fails with EBADF instead of breaking the store. */
void pl_store_fd(int fd, bool mine);
bool pl_is_store_fd(int fd);

/* The library is configured (ATOMIO_LOG and ATOMIO_FILES set). */
extern bool g_active;
/* ATOMIO_GROUP=1: the writes between two syncs of a file are one group. */
extern bool g_group;
/* Every mode but group mode: the store is shared with the program's other
 * processes (opened without ATOMIO_EXCLUSIVE), every write and size change
 * of a protected file is one lazy group, nothing is pending in a process
 * (ATOMIO_SHARED=1 is accepted and changes nothing). */
extern bool g_multi;

void pl_init(void);
/* 1 when the canonical path is protected. */
bool pl_match(const char *canon);
/* Canonical absolute path of (dirfd, path) in out[PATH_MAX]; the file may
 * be missing (its directory must exist).  0 or -1. */
int pl_canon(int dirfd, const char *path, bool follow_last, char *out);
/* The path is protected or holds protected files (rename, unlink). */
bool pl_involves(const char *canon);
/* Print "atomio_preload: PATH: what" to stderr (real write). */
void pl_msg(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Shared hold on the store (g_rw); pl_store() opens it when needed and
 * returns it, or NULL with errno set (and a message). */
void pl_hold(void);
void pl_release(void);
atomio *pl_store(const char *why_path);
/* The open store or NULL, opening nothing (g_rw held). */
atomio *pl_store_now(void);
/* Make f registered (id >= 0); g_rw held.  0 or -errno. */
int pl_register(atomio *st, struct pfile *f, int oflags, mode_t mode);

struct pfile *pl_file_get(dev_t dev, ino_t ino, const char *canon, int64_t size);
int pofd_set(int fd, struct pofd *o);    /* takes the reference; -1 = fd too large */
void pofd_drop(int fd);                  /* fd is being closed */
/* Drop fd's entry if it is still o (a stale one found). */
void pofd_drop_if(int fd, struct pofd *o);
/* fd still names o's file (device and inode); else its entry is dropped as
 * stale (the number was closed and reused where no wrapper saw it). */
bool pofd_live(int fd, struct pofd *o);
/* The protected file with this identity, or NULL. */
struct pfile *pl_file_find(dev_t dev, ino_t ino);
/* The process has protected files (any pfile at all). */
bool pl_have_files(void);
/* f's current canonical path into out[PATH_MAX]; 0, or -1 when f is no
 * longer protected. */
int pl_file_path(struct pfile *f, char *out);
/* This is a vfork child: it shares the parent's memory (this library's
 * state) but not its descriptors, so it must change none of that state. */
bool pl_vfork_child(void);
struct pofd *pofd_new(struct pfile *f, int flags);
void pofd_ref(struct pofd *o);
/* fd's entry with a reference of the caller's (pofd_put it when done), or
 * NULL: a close or dup2 of fd in another thread meanwhile drops the table's
 * reference, never the memory the call uses. */
struct pofd *pofd_get(int fd);
/* Tests (ATOMIO_PRELOAD_TEST_WDELAY=MS): a write of a protected
 * descriptor sleeps this long once it has its entry, so that another
 * thread's close comes between (test/preload/dropin.c, closerace). */
extern int g_test_wdelay_ms;
void pofd_put(struct pofd *o);            /* drop a reference */

/* Commit one group on f (f->mu held): writes (iov, off) or, with iov NULL,
 * a size change to off; lazily, or durably (durable: O_SYNC and the like).
 * Group mode: added to f's pending group.  0 or -errno (a failed commit is
 * also kept in f->err for the file's syncs). */
int pl_issue(atomio *st, struct pfile *f, const struct iovec *iov, int iovcnt, off_t off, bool durable);
/* The same for a write of f (file id), f->mu not held. */
int pl_commit_write(atomio *st, struct pfile *f, int id, const struct iovec *iov, int iovcnt, off_t off,
		    bool durable);
/* fsync of f (g_rw held): every group of any process that touched f, and
 * all before them, durable and home (atomio_sync; flags
 * ATOMIO_SYNC_NOWAIT: only started); group mode: its pending group
 * committed.  0 or f's error (-errno or an atomio code). */
int pl_sync_file(struct pfile *f, unsigned flags);
/* sync, syncfs, spawn: every group of the store (group mode: of every
 * file); 0 or the first error.  g_rw held. */
int pl_sync_all(void);
/* Some process has the store open (the log's flock). */
bool pl_store_live(void);
/* The store and f's id in it for a read, size or sync of f (g_rw held):
 * this process's handle, or, when it has none and another process has the
 * store open, one opened now (f registered in it).  NULL (*id -1): nobody
 * has the store (the file is the truth), group mode, or it cannot be
 * joined.  *id -1 with a store: f could not be registered. */
atomio *pl_reader_store(struct pfile *f, int *id);
/* Close this process's handle now (exec, rename, unlink): its lazy groups
 * are made durable first; the next use reopens it. */
int pl_store_restart_locked(void);
void pl_stats_flush(void);
/* The store closed as at exit (its lazy groups durable): exit and _exit. */
void pl_fini_now(void);
void pl_lock_excl(void);
void pl_unlock_excl(void);
/* A vfork child, or (group mode) a child after fork: the store is someone
 * else's, writes are refused. */
bool pl_not_owner(void);
/* Remember a mapping of a protected file for msync. */
void pl_map_add(void *addr, size_t len, struct pfile *f);
void pl_map_del(void *addr, size_t len);
struct pfile *pl_map_find(void *addr, size_t len);
/* Files whose path moved (rename) or went (unlink): g_rw held exclusive. */
void pl_file_moved(const char *from, const char *to);
/* Before an unlink or rename of canon (g_rw held exclusive):
 * a store-wide checkpoint (every process's groups home and synced, the log
 * emptied), so that no live record names the path.  0 or -errno. */
int pl_shared_checkpoint(const char *canon);
/* Paths moved by other processes (state.c says how).
 * pl_path_check: under f's slot byte (pl_xlock, pl_xlock_shared), before
 * registering f or logging for it: 0, or PL_EMOVED when some process renamed
 * or unlinked a protected path since f was last looked at and f's path no
 * longer names f's inode.  pl_path_mend (nothing held but the caller's
 * references; fd: a descriptor of f): f's path set to the name the
 * descriptor has now and this process's handle let go (0: go again), or
 * -ESTALE (unlinked: f is no longer protected, the write is the file's),
 * or -EIO with a message.  pl_path_moved: the rename or unlink wrapper,
 * under pl_xlock_all, after its checkpoint. */
#define PL_RGEN_NONE UINT64_MAX
#define PL_EMOVED (-ATOMIO_EBASE - 900)
int pl_path_check(atomio *st, struct pfile *f);
int pl_path_mend(struct pfile *f, int fd);
void pl_path_moved(void);
/* This process's handle closed (the others keep the store)
 * and left to be opened anew by the next call: a path its handle has open
 * as a file since replaced (unlinked and created again) can then be
 * registered as the new file (ATOMIO_EIDENTITY otherwise).  g_rw not held. */
void pl_shared_rejoin(void);
void pl_file_gone(const char *path);
/* Adopt protected descriptors inherited across exec. */
void pl_adopt_inherited(void);
/* Take the store-wide lock that orders f's appends, size changes
 * and the calls at a description's position (group mode: of a
 * description other processes hold) between processes and between this
 * process's threads; *slot = what to pass to pl_xunlock (-1: nothing taken:
 * a vfork child).  g_rw held; before f->mu.  0, or -errno with a message
 * naming the file. */
int pl_xlock(struct pfile *f, int *slot);
/* The description may be another process's too: made before a fork of
 * this process, inherited across exec, sent or received over a socket. */
extern _Atomic unsigned g_forkgen;
static inline bool pl_pofd_xproc(const struct pofd *o)
{
	return o->xproc || o->forkgen != atomic_load_explicit(&g_forkgen, memory_order_relaxed);
}
/* The same for a read or seek at the position: in a process that cannot
 * open the log for writing (nor so the store), none (0, *slot -1). */
int pl_xlock_read(struct pfile *f, int *slot);
/* A write inside the file: the same byte, shared with the other
 * writes inside files of its slot, from the look at the size to the end of
 * the commit (state.c says why).  pl_xunlock lets it go.  Only for a
 * process pl_store let through (not a vfork child). */
int pl_xlock_shared(struct pfile *f, int *slot);
void pl_xunlock(int slot);
/* Every slot's byte exclusive (g_rw held exclusive): a rename or unlink of
 * a protected path, ordered with every write.  0 or -errno. */
int pl_xlock_all(void);
void pl_xunlock_all(void);
/* Protect a descriptor received over a socket (SCM_RIGHTS) that names a
 * protected file, as an inherited one. */
void pl_adopt_fd(int fd);
/* --- group.c (ATOMIO_GROUP=1) --- */
/* Add a write (or with iov NULL a size change to off) to f's pending group
 * (f->mu held).  0 or -errno (-ENOSPC: the group would outgrow the log). */
int grp_add(atomio *st, struct pfile *f, const struct iovec *iov, int iovcnt, off_t off);
/* Commit f's pending group, if any, durably (f->mu held; st may be NULL
 * only when nothing is pending). */
void grp_commit(atomio *st, struct pfile *f);
/* f's pending group is not empty (f->mu held). */
bool grp_pending(const struct pfile *f);
/* Read through the pending group: a read of fd at off (at_pos: the
 * position, moved); g_rw held.  false = no group pending (read the file);
 * else *res = the count or -errno. */
bool grp_read(int fd, struct pfile *f, const struct iovec *iov, int iovcnt, off_t off, bool at_pos,
	      ssize_t *res);
/* The last descriptor of f closed: commit what it left pending. */
void grp_last_close(struct pfile *f);

/* Largest write one group takes. */
extern uint64_t g_max_group;

static inline int pl_errno(int r)
{
	/* atomio's own codes are outside errno's range: the store failed or
	 * refused recovery, which a program can only see as an I/O error. */
	return r <= -ATOMIO_EBASE ? EIO : -r;
}

#endif
