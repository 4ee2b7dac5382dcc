/*
 * wrap.c: the interposed libc functions.
 *
 * Each one looks its descriptor up in the table (pofd_of: one atomic load)
 * and, when it is not protected, calls libc at once; a protected entry is
 * held with a reference for the call (pofd_get, HELD).  Protected descriptors:
 *
 *   write, pwrite, writev, pwritev, pwritev2   one lazy group each (every
 *       process reads it at once; at most the largest group the log takes:
 *       a short count beyond it); O_SYNC/O_DSYNC descriptors and
 *       RWF_SYNC/RWF_DSYNC commit it durably
 *   fsync, fdatasync, sync_file_range(WAIT_AFTER), msync, aio_fsync
 *       atomio_sync of the file: every process's groups of it durable
 *   sync, syncfs, posix_spawn, system, popen   atomio_sync of the store
 *   read, pread, readv, preadv, preadv2   through atomio_preadv while the
 *       file has lazy groups not yet home (atomio_lazy_pending), else libc
 *   fstat, stat*, statx, lseek(SEEK_END), O_APPEND   the size atomio_file_size
 *       gives while the file has lazy groups not yet home
 *   mmap, stdio reads, copy_file_range/sendfile/splice from one, AIO reads,
 *   lseek(SEEK_DATA/HOLE)   the kernel reads: atomio_sync of the file first
 *   ftruncate, truncate, open(O_TRUNC), fallocate(0 or KEEP_SIZE),
 *   posix_fallocate    size changes are groups, ordered with the writes
 *   fallocate (other modes)        refused: EOPNOTSUPP
 *   mmap(PROT_WRITE, MAP_SHARED)   refused: EACCES (stores would bypass the log)
 *   copy_file_range, sendfile, splice into one   refused: EXDEV / EINVAL
 *   fopen, freopen, fdopen for writing           refused: EPERM (stdio's
 *       writes are inside libc, where no wrapper sees them)
 *   rename, unlink of one          a store-wide checkpoint, and this process's
 *                                  handle closed around it (state.c)
 *   exec                           the store is closed first
 *   dup, dup2, dup3, fcntl(F_DUPFD*) the new descriptor shares the entry
 *   O_DIRECT       the kernel's alignment rules are checked (EINVAL), the data
 *                  goes through the log like any other
 *   close_range, dup2, dup3        never take the store's descriptors
 *   fclose, freopen                the entry goes (libc closes the descriptor)
 *   ioctl(FICLONE*), aio_write     refused: EXDEV / EINVAL
 * In a vfork child (its parent's memory, its own descriptors) nothing of
 * the state changes.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <aio.h>
#include <linux/aio_abi.h>
#include <linux/fs.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "preload.h"
#include "sys.h"

#define EXPORT __attribute__((visibility("default")))

extern char **environ;

#define REAL(name) (real.name ? real.name : (real_init(), real.name))

static inline bool is_prot(struct pofd *o) { return o && !o->f->orphan; }

#define NEXT(name, type) \
	static __typeof__(type) next_##name; \
	if (!next_##name) \
		next_##name = (type)dlsym(RTLD_NEXT, #name)

/* The *64 calls take off64_t, as libc declares them (a 32-bit build's
 * off_t is 32 bits: test/t_preload_lfs.sh compiles the library so).  An
 * offset off_t holds takes the usual path; a larger one goes to libc's own
 * *64 call for a descriptor the library does not protect, and is refused
 * with EOVERFLOW for a protected one (the library's paths use off_t).  On
 * a 64-bit build the test is constant and vanishes. */
#define OFF_FITS(x) ((off64_t)(off_t)(x) == (x))
#define WIDE_OFF(name, type, fits, fd, ...) \
	do { \
		if (!(fits)) { \
			NEXT(name, type); \
			if (pofd_of(fd)) \
				return fail(EOVERFLOW); \
			if (!next_##name) \
				return fail(ENOSYS); \
			return next_##name(__VA_ARGS__); \
		} \
	} while (0)

/* An entry the call holds a reference to (pofd_get) until it returns,
 * whatever path it returns by: a close or dup2 of the descriptor in
 * another thread meanwhile cannot free it under the call.  errno is kept:
 * the last reference's put may commit a group (grp_last_close). */
static void pofd_put_at_exit(struct pofd **o)
{
	if (*o) {
		int e = errno;
		pofd_put(*o);
		errno = e;
	}
}
#define HELD __attribute__((cleanup(pofd_put_at_exit)))

static int fail(int e)
{
	errno = e;
	return -1;
}

/* --- open -------------------------------------------------------------------- */

static void set_dio(struct pfile *f, int fd)
{
	if (f->dio_off)
		return;
	struct atomio_statx sx;
	memset(&sx, 0, sizeof(sx));
	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, ATOMIO_STATX_DIOALIGN, &sx) == 0 &&
	    (sx.stx_mask & ATOMIO_STATX_DIOALIGN) && sx.stx_dio_offset_align) {
		f->dio_off = sx.stx_dio_offset_align;
		f->dio_mem = sx.stx_dio_mem_align ? sx.stx_dio_mem_align : f->dio_off;
	} else {
		f->dio_off = f->dio_mem = 512; /* the logical block size of nearly every device */
	}
}

/* Group mode: f->size is the size the pending group leaves.  With none
 * pending, the file's own size is the truth (another process may have
 * changed it since f->size was last set here).  f->mu held; fd is a
 * descriptor of f. */
static void size_refresh(struct pfile *f, int fd)
{
	struct stat sb;
	if (!grp_pending(f) && REAL(fstat)(fd, &sb) == 0)
		f->size = sb.st_size;
}

/* The size of f as the next group must see it (the end an append takes, a
 * size change's "grow only"), fd a descriptor of f, f->mu held: group mode,
 * what the pending group leaves; else the store's, every process's lazy
 * groups included (atomio_file_size; st NULL or no id: the file's).  -errno
 * on failure. */
static int64_t cur_size(atomio *st, struct pfile *f, int fd)
{
	if (g_group) {
		size_refresh(f, fd);
		return f->size;
	}
	uint64_t sz;
	struct stat sb;
	if (st && f->id >= 0) {
		int r = atomio_file_size(st, f->id, &sz);
		return r < 0 ? (r <= -ATOMIO_EBASE ? -EIO : r) : (int64_t)sz;
	}
	return REAL(fstat)(fd, &sb) < 0 ? -errno : sb.st_size;
}

static int attach(int fd, const char *canon, int flags, atomio *st, int id)
{
	struct stat sb;
	if (REAL(fstat)(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
		return 0; /* not a regular file: nothing to protect */
	struct pfile *f = pl_file_get(sb.st_dev, sb.st_ino, canon, sb.st_size);
	struct pofd *o = f ? pofd_new(f, flags) : NULL;
	if (!o)
		return -ENOMEM;
	pthread_mutex_lock(&f->mu);
	if (g_group)
		size_refresh(f, fd);
	pthread_mutex_unlock(&f->mu);
	if (st) {
		/* O_TRUNC is ordered with the other processes' appends
		 * (p_resize). */
		int xs = -1;
		int r = g_multi && (flags & O_TRUNC) ? pl_xlock(f, &xs) : 0;
		if (r == 0 && g_multi && (flags & O_TRUNC))
			r = pl_path_check(st, f); /* the truncate is logged under f's id */
		pthread_mutex_lock(&f->mu);
		if (r == 0 && f->id < 0) {
			struct stat a;
			int afd = atomio_file_fd(st, id);
			if (afd < 0 || REAL(fstat)(afd, &a) < 0 || a.st_dev != sb.st_dev || a.st_ino != sb.st_ino)
				r = -EAGAIN; /* replaced between the two opens */
			else {
				f->id = id;
				f->reg_wanted = true;
			}
		}
		if (r == 0 && (flags & O_TRUNC))
			r = pl_issue(st, f, NULL, 0, 0, flags & (O_SYNC | O_DSYNC));
		pthread_mutex_unlock(&f->mu);
		pl_xunlock(xs);
		if (r < 0) {
			pofd_put(o);
			return r;
		}
	}
	if (flags & O_DIRECT)
		set_dio(f, fd);
	if (pofd_set(fd, o) < 0) {
		pl_msg(canon, "descriptor %d is above the table's %d entries", fd, g_fdtab_n);
		return -EMFILE;
	}
	return 0;
}

/* A descriptor the kernel just returned: any entry at its number is stale
 * (the number was closed where no wrapper saw it, inside libc or by a raw
 * system call) and goes, so the new file is not taken for the old one. */
static int fresh_fd(int fd)
{
	struct pofd *o = fd >= 0 ? pofd_of(fd) : NULL;
	if (o && !pl_vfork_child())
		pofd_drop_if(fd, o);
	return fd;
}

/* An unprotected name (a hard link outside ATOMIO_FILES) of a file this
 * process protects: its writes would race the file's pending groups outside
 * the log.  Opened under the protected name instead (out), so it is the
 * same protected file whichever name the program used.  Looked up only when
 * the process has protected files (one stat of the name). */
static bool other_name(int dirfd, const char *path, int flags, char *out)
{
	struct stat sb;
	if (!pl_have_files() || pl_vfork_child() ||
	    fstatat(dirfd, path, &sb, flags & O_NOFOLLOW ? AT_SYMLINK_NOFOLLOW : 0) < 0 ||
	    !S_ISREG(sb.st_mode))
		return false;
	struct pfile *f = pl_file_find(sb.st_dev, sb.st_ino);
	return f && pl_file_path(f, out) == 0 && pl_match(out);
}

static int p_open(int dirfd, const char *path, int flags, mode_t mode)
{
	if (!g_active || (flags & O_PATH) || (flags & O_TMPFILE) == O_TMPFILE || (flags & O_DIRECTORY))
		return REAL(openat)(dirfd, path, flags, mode);
	char canon[PATH_MAX];
	if (pl_canon(dirfd, path, true, canon) < 0 || !pl_match(canon)) {
		if (other_name(dirfd, path, flags, canon))
			return p_open(AT_FDCWD, canon, flags & ~(O_CREAT | O_EXCL), mode);
		return fresh_fd(REAL(openat)(dirfd, path, flags, mode));
	}
	if (pl_vfork_child())
		return REAL(openat)(dirfd, path, flags, mode); /* no entry in the parent's table */
	if (flags & O_NOFOLLOW) {
		struct stat sb;
		if (fstatat(dirfd, path, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode))
			return REAL(openat)(dirfd, path, flags, mode); /* fails with ELOOP */
	}
	bool writable = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
	pl_hold();
	atomio *st = NULL;
	int id = -1, fd;
	if (writable) {
		for (bool rejoined = false;; rejoined = true) {
			st = pl_store(canon);
			if (!st) {
				int e = errno;
				pl_release();
				errno = e;
				return -1;
			}
			/* atomio creates the file, syncs it and its directory, and
			 * records it in the catalog before anything is written to it. */
			id = atomio_file_open(st, canon, flags & (O_CREAT | O_EXCL | O_NOFOLLOW), mode);
			if (id != ATOMIO_EIDENTITY || !g_multi || rejoined)
				break;
			/* This process's handle has the path open as the
			 * file this one replaced (unlinked, and created again):
			 * a handle of its own anew, which registers the new file
			 * (after a store-wide checkpoint), then again. */
			pl_release();
			pl_shared_rejoin();
			pl_hold();
		}
		if (id < 0) {
			pl_release();
			if (id != -ENOENT && id != -EEXIST && id != -EACCES)
				pl_msg(canon, "open refused by the store: %s", atomio_strerror(id));
			errno = pl_errno(id);
			return -1;
		}
		fd = REAL(openat)(AT_FDCWD, canon, flags & ~(O_CREAT | O_EXCL | O_TRUNC), 0);
	} else {
		fd = REAL(openat)(dirfd, path, flags, mode);
	}
	if (fd >= 0) {
		int r = attach(fd, canon, flags, st, id);
		if (r == PL_EMOVED) {
			/* Another process renamed the file, which this process has
			 * open under its old name (the handle gave its id): that
			 * mended (pl_path_mend, through this descriptor), again. */
			struct stat sb;
			struct pfile *f = REAL(fstat)(fd, &sb) == 0 ? pl_file_find(sb.st_dev, sb.st_ino) : NULL;
			pl_release();
			r = f ? pl_path_mend(f, fd) : -EIO;
			REAL(close)(fd);
			pofd_drop(fd);
			if (r == 0)
				return p_open(dirfd, path, flags, mode);
			errno = -r;
			return -1;
		}
		if (r < 0) {
			REAL(close)(fd);
			pofd_drop(fd);
			pl_release();
			errno = -r;
			return -1;
		}
	}
	int e = errno;
	pl_release();
	errno = e;
	return fd;
}

#define MODE_ARG(flags, mode)                                      \
	mode_t mode = 0;                                           \
	if ((flags) & O_CREAT || ((flags) & O_TMPFILE) == O_TMPFILE) { \
		va_list ap;                                        \
		va_start(ap, flags);                               \
		mode = (mode_t)va_arg(ap, int);                    \
		va_end(ap);                                        \
	}

EXPORT int open(const char *path, int flags, ...) { MODE_ARG(flags, mode); return p_open(AT_FDCWD, path, flags, mode); }
EXPORT int open64(const char *path, int flags, ...) { MODE_ARG(flags, mode); return p_open(AT_FDCWD, path, flags, mode); }
EXPORT int openat(int dirfd, const char *path, int flags, ...) { MODE_ARG(flags, mode); return p_open(dirfd, path, flags, mode); }
EXPORT int openat64(int dirfd, const char *path, int flags, ...) { MODE_ARG(flags, mode); return p_open(dirfd, path, flags, mode); }
EXPORT int __open_2(const char *path, int flags) { return p_open(AT_FDCWD, path, flags, 0); }
EXPORT int __open64_2(const char *path, int flags) { return p_open(AT_FDCWD, path, flags, 0); }
EXPORT int __openat_2(int dirfd, const char *path, int flags) { return p_open(dirfd, path, flags, 0); }
EXPORT int __openat64_2(int dirfd, const char *path, int flags) { return p_open(dirfd, path, flags, 0); }
EXPORT int creat(const char *path, mode_t mode) { return p_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
EXPORT int creat64(const char *path, mode_t mode) { return p_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

/* --- close, dup ------------------------------------------------------------------ */

EXPORT int close(int fd)
{
	/* A vfork child closes its own copy of the descriptor table, in the
	 * parent's memory: the parent's entries stay as they are. */
	if ((pofd_of(fd) || pl_is_store_fd(fd)) && pl_vfork_child())
		return REAL(close)(fd);
	/* Dropped before the close: once the number is free another thread's
	 * open may get it. */
	if (pofd_of(fd))
		pofd_drop(fd);
	else if (pl_is_store_fd(fd))
		return fail(EBADF); /* not the program's: the store's log or a data file's twin */
	return REAL(close)(fd);
}

/* close_range closes the program's descriptors in [first, last] and none
 * of the store's (its log, shared state, data files' twins, eventfd): those
 * numbers are not open as far as the program knows, and closing them would
 * hand the log's number to the program's next open (the store would then
 * write its log into the program's file).  So the range is closed in the
 * pieces between the store's descriptors.  A child (after fork or vfork)
 * has a table of its own, where the store's descriptors are copies nothing
 * uses: it closes the whole range; a vfork child changes none of the
 * entries, which are its parent's memory. */
EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	if (!REAL(close_range)) {
		errno = ENOSYS;
		return -1;
	}
	if (!g_fdtab || first > last || pl_vfork_child())
		return real.close_range(first, last, flags);
	unsigned top = last < (unsigned)g_fdtab_n ? last : (unsigned)g_fdtab_n - 1;
	bool owner = !pl_not_owner();
	unsigned from = first;
	for (unsigned fd = first; fd <= top && first < (unsigned)g_fdtab_n; fd++) {
		if (!(flags & CLOSE_RANGE_CLOEXEC) && pofd_of((int)fd))
			pofd_drop((int)fd);
		if (!pl_is_store_fd((int)fd))
			continue;
		if (!owner) {
			if (!(flags & CLOSE_RANGE_CLOEXEC))
				pl_store_fd((int)fd, false); /* the child's copy goes; the parent's stays */
			continue;
		}
		if (fd > from && real.close_range(from, fd - 1, flags) < 0)
			return -1;
		from = fd + 1;
	}
	return from > last ? 0 : real.close_range(from, last, flags);
}

/* dup2/dup3 onto one of the store's descriptors: the number is free as far
 * as the program knows, so the call must succeed and the number be the
 * program's.  The store moves out of the way: it is closed (every pending
 * group durable and home first, as before an exec) and reopened by the next
 * write, at numbers then free.  Held exclusive across the dup so that no
 * write reopens it in between.  Not the owner (a child after fork): the
 * child's copy is replaced; the parent's store is untouched.  -1 with errno
 * set when the store cannot be closed; 0 to go on (*locked: unlock after). */
static int dup_over_store(int newfd, bool *locked)
{
	*locked = false;
	if (!pl_is_store_fd(newfd))
		return 0;
	if (pl_not_owner()) {
		if (!pl_vfork_child())
			pl_store_fd(newfd, false);
		return 0;
	}
	pl_lock_excl();
	*locked = true;
	int r = pl_store_restart_locked();
	if (pl_is_store_fd(newfd)) {
		pl_msg(NULL, "dup2/dup3 onto descriptor %d refused (EBUSY): the store holds it and could "
			     "not be closed (%s)", newfd, r < 0 ? atomio_strerror(r) : "still open");
		pl_unlock_excl();
		*locked = false;
		errno = EBUSY;
		return -1;
	}
	return 0;
}

static int dup_to(int old, int r)
{
	if (r < 0 || r == old)
		return r;
	if (pl_vfork_child())
		return r; /* its own table; the parent's entries stay */
	struct pofd *o = pofd_get(old); /* the new entry's reference */
	if (o) {
		pofd_set(r, o);
	} else if (pofd_of(r)) {
		pofd_drop(r); /* dup2 onto a protected descriptor closed it */
	}
	return r;
}

EXPORT int dup(int fd) { return dup_to(fd, REAL(dup)(fd)); }
EXPORT int dup2(int old, int newfd)
{
	bool locked;
	if (old != newfd && dup_over_store(newfd, &locked) < 0)
		return -1;
	int r = dup_to(old, REAL(dup2)(old, newfd));
	if (old != newfd && locked) {
		int e = errno;
		pl_unlock_excl();
		errno = e;
	}
	return r;
}
EXPORT int dup3(int old, int newfd, int flags)
{
	bool locked = false;
	if (old != newfd && dup_over_store(newfd, &locked) < 0)
		return -1;
	int r = dup_to(old, REAL(dup3)(old, newfd, flags));
	if (locked) {
		int e = errno;
		pl_unlock_excl();
		errno = e;
	}
	return r;
}

static int p_fcntl(int fd, int cmd, void *arg)
{
	int r = REAL(fcntl)(fd, cmd, arg);
	if (r < 0)
		return r;
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		return dup_to(fd, r);
	struct pofd *o HELD = NULL;
	if (cmd == F_SETFL && (o = pofd_get(fd)) && pl_vfork_child())
		atomic_fetch_add(&g_forkgen, 1); /* the parent's F_GETFL per write again (shared_append) */
	else if (o) {
		int e = errno;
		int fl = REAL(fcntl)(fd, F_GETFL);
		if (fl >= 0) {
			int keep = O_APPEND | O_DIRECT | O_NONBLOCK | O_NOATIME;
			o->flags = (o->flags & ~keep) | (fl & keep);
			if (fl & O_DIRECT)
				set_dio(o->f, fd);
		}
		errno = e;
	}
	return r;
}

EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return p_fcntl(fd, cmd, arg);
}
EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return p_fcntl(fd, cmd, arg);
}

/* --- writes ---------------------------------------------------------------------- */

static bool dio_ok(struct pofd *o, const struct iovec *iov, int cnt, off_t off)
{
	struct pfile *f = o->f;
	if (!(o->flags & O_DIRECT) || !f->dio_off)
		return true;
	bool ok = off < 0 || off % f->dio_off == 0;
	for (int i = 0; i < cnt && ok; i++)
		ok = iov[i].iov_len % f->dio_off == 0 && (uintptr_t)iov[i].iov_base % f->dio_mem == 0;
	if (!ok && !f->warned_direct) {
		f->warned_direct = true;
		pl_msg(f->path, "O_DIRECT write not aligned to %u bytes (buffers to %u): EINVAL, as the "
				"kernel would", f->dio_off, f->dio_mem);
	}
	return ok;
}

/* Whether a write appends.  The flag is the open file
 * description's, which other processes that share it may change
 * (F_SETFL): the kernel's, not the copy this process noted -- but only
 * where another process may hold the description (pl_pofd_xproc: made
 * before a fork, spawn or exec, inherited, sent or received over a socket).
 * One this process made since is its alone, and its F_SETFL goes through
 * p_fcntl, which keeps o->flags: no F_GETFL, a system call per write. */
static bool shared_append(int fd, struct pofd *o, int rwf)
{
	int fl = pl_pofd_xproc(o) ? REAL(fcntl)(fd, F_GETFL) : -1;
	return ((fl >= 0 ? fl : o->flags) & O_APPEND) || (rwf & RWF_APPEND);
}

/* A write takes the lock that orders the processes (pl_xlock) when it
 * depends on, or moves, what they share: an append (the end of the file),
 * a write at the position (the description's offset, which other
 * processes may share), and a write that extends the file (an append of
 * another process must not take the old end meanwhile and land under it).
 * A write inside the file changes neither, and commits beside the other
 * processes' writes with the lock shared.  The size is the store's
 * (cur_size: every process's lazy groups). */
static bool shared_xwant(atomio *st, int fd, struct pofd *o, bool append, bool pos, off_t off, size_t total)
{
	if (!g_multi)
		return pos && pl_pofd_xproc(o); /* group mode: one writing process, its offset shared */
	if (append || pos)
		return true;
	int64_t size = cur_size(st, o->f, fd);
	return size < 0 || off > size - (off_t)total;
}

/* Take the lock p_write wants: exclusive (*xwant), shared for a write
 * inside the file (*inside), whose size is looked at again under it -- one
 * that extends the file now takes it exclusive -- or none.  0 or -errno. */
static int write_lock(atomio *st, int fd, struct pofd *o, bool append, bool pos, off_t off, size_t total,
		      bool *xwant, bool *inside, int *xs)
{
	int r = *xwant ? pl_xlock(o->f, xs) : *inside ? pl_xlock_shared(o->f, xs) : 0;
	if (r == 0 && *inside && shared_xwant(st, fd, o, append, pos, off, total)) {
		pl_xunlock(*xs);
		*xs = -1;
		*inside = false;
		*xwant = true;
		r = pl_xlock(o->f, xs);
	}
	return r;
}

/* What a write or size change found under its locks (all let
 * go now but g_rw's shared hold) is mended where it can be, with g_rw held
 * exclusive: ATOMIO_EIDENTITY (this process's handle has the path open as
 * the file this one replaced: a handle of its own anew, once) or PL_EMOVED
 * (another process renamed or unlinked the file: pl_path_mend, state.c).
 * 0: go again with *st; else the call's result (-ESTALE: the descriptor is
 * an ordinary one now). */
static int mend(int r, struct pfile *f, int fd, unsigned *tries, atomio **st)
{
	bool ident = r == ATOMIO_EIDENTITY && !(*tries & 0x100);
	if (!g_multi || !(ident || r == PL_EMOVED))
		return r;
	if (!ident && (*tries & 0xff) >= 16) {
		/* Each try found another rename: refused rather than waited for. */
		pl_msg(f->path, "refused (EIO): renamed by other processes again before each of 16 tries");
		return -EIO;
	}
	*tries += ident ? 0x100 : 1;
	pl_release();
	int e = 0;
	if (ident)
		pl_shared_rejoin();
	else
		e = pl_path_mend(f, fd);
	pl_hold();
	if (e == 0 && !(*st = pl_store(f->path)))
		e = -errno;
	return e;
}

/* A write larger than one group is cut short (write(2) may return less
 * than asked; callers write the rest): the first g_max_group bytes of iov
 * (a multiple of the O_DIRECT offset alignment) into v, which has room for
 * cnt entries.  Returns v's count; *total becomes its bytes. */
static int clip_to_group(const struct pofd *o, const struct iovec *iov, int cnt, struct iovec *v, size_t *total)
{
	size_t left = (size_t)g_max_group;
	if (o->flags & O_DIRECT && o->f->dio_off)
		left -= left % o->f->dio_off;
	int vn = 0;
	for (int i = 0; i < cnt && left; i++) {
		v[vn] = iov[i];
		if (v[vn].iov_len > left)
			v[vn].iov_len = left;
		left -= v[vn].iov_len;
		*total -= iov[i].iov_len - v[vn].iov_len;
		vn++;
	}
	for (int i = vn; i < cnt; i++)
		*total -= iov[i].iov_len;
	return vn;
}

/* ATOMIO_PRELOAD_TEST_WDELAY: a test's pause at the start of each write. */
static void test_wdelay(void)
{
	if (g_test_wdelay_ms) {
		struct timespec ts = {g_test_wdelay_ms / 1000, (long)(g_test_wdelay_ms % 1000) * 1000000};
		nanosleep(&ts, NULL);
	}
}

/* One write of a protected descriptor.  off < 0 with at_pos: the position. */
static ssize_t p_write(int fd, struct pofd *o, const struct iovec *iov, int cnt, off_t off, bool at_pos,
		       int rwf)
{
	test_wdelay();
	struct pfile *f = o->f;
	if (!pofd_live(fd, o))
		return REAL(pwritev2)(fd, iov, cnt, at_pos ? -1 : off, rwf);
	if ((o->flags & O_ACCMODE) == O_RDONLY)
		return fail(EBADF);
	if (cnt < 0 || cnt > IOV_MAX || (!at_pos && off < 0))
		return fail(EINVAL);
	size_t total = 0;
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len > SSIZE_MAX - total)
			return fail(EINVAL);
		total += iov[i].iov_len;
	}
	bool append = (o->flags & O_APPEND) || (rwf & RWF_APPEND);
	if (!dio_ok(o, iov, cnt, append ? 0 : (at_pos ? 0 : off)))
		return fail(EINVAL);
	if (total == 0)
		return 0;
	pl_hold();
	atomio *st = pl_store(f->path);
	if (!st) {
		int e = errno;
		pl_release();
		return fail(e);
	}
	struct iovec *v = NULL, one[1];
	int vn = cnt;
	const struct iovec *use = iov;
	if (g_max_group && total > g_max_group) {
		v = cnt <= 1 ? one : malloc(sizeof(*v) * (size_t)cnt);
		if (!v) {
			pl_release();
			return fail(ENOMEM);
		}
		vn = clip_to_group(o, iov, cnt, v, &total);
		use = v;
	}
	bool pos = at_pos && off < 0;
	unsigned tries = 0;
	/* O_SYNC/O_DSYNC: durable before the call returns, as the kernel's
	 * flags promise; every other write is a lazy group. */
	bool durable = (o->flags & (O_SYNC | O_DSYNC)) || (rwf & (RWF_SYNC | RWF_DSYNC));
	if (g_multi)
		append = shared_append(fd, o, rwf);
	/* A write that may be inside the file takes the lock shared and looks
	 * at the size under it (a truncate may have come between), once:
	 * write_lock takes it exclusive instead if the write extends the
	 * file.  Only after a write of this file that extended it here (one
	 * extending write tends to follow another: a file growing at its end)
	 * is the size looked at before, to take the exclusive lock at once. */
	bool xwant = g_multi && !append && !pos && !atomic_load_explicit(&f->extends, memory_order_relaxed)
			     ? false
			     : shared_xwant(st, fd, o, append, pos, off, total);
	bool inside = g_multi && !xwant;
	int xs = -1;
again:
	if (pos)
		pthread_mutex_lock(&o->pos_mu);
	int r = write_lock(st, fd, o, append, pos, off, total, &xwant, &inside, &xs);
	if (r == 0 && g_multi)
		r = pl_path_check(st, f); /* under the slot's byte: ordered with renames */
	pthread_mutex_lock(&f->mu);
	if (r == 0 && f->id < 0)
		r = pl_register(st, f, 0, 0);
	if (r == 0) {
		if (append)
			off = (off_t)cur_size(st, f, fd); /* under the slot's byte, exclusive */
		else if (pos)
			off = REAL(lseek)(fd, 0, SEEK_CUR);
		/* Committed below, without the file's lock, so that this
		 * process's threads' writes go on side by side -- but an append
		 * under it: the end it takes must be the end the previous
		 * append left (two appends of two threads must not both land at
		 * one offset).  Group mode: into the pending group. */
		r = off < 0 ? (append ? (int)off : -errno)
		    : g_multi && !append ? 0 : pl_issue(st, f, use, vn, off, durable);
	}
	int id = f->id;
	pthread_mutex_unlock(&f->mu);
	if ((r == ATOMIO_EIDENTITY || r == PL_EMOVED) && g_multi) {
		pl_xunlock(xs);
		xs = -1;
		if (pos)
			pthread_mutex_unlock(&o->pos_mu);
		if ((r = mend(r, f, fd, &tries, &st)) == 0)
			goto again;
		if (pos)
			pthread_mutex_lock(&o->pos_mu);
	}
	if (r == 0 && g_multi && !append) {
		r = pl_commit_write(st, f, id, use, vn, off, durable);
		atomic_store_explicit(&f->extends, xwant && !pos, memory_order_relaxed);
	}
	if (r == 0 && pos)
		REAL(lseek)(fd, off + (off_t)total, SEEK_SET);
	pl_xunlock(xs);
	if (pos)
		pthread_mutex_unlock(&o->pos_mu);
	if (v && v != one)
		free(v);
	if (r == 0) {
		real_trace_mark(TR_PWRITE, total, 0);
		/* Group mode: O_SYNC ends the pending group (durable). */
		if (g_group && durable)
			r = pl_sync_file(f, 0);
		if (r == 0 && durable)
			real_trace_mark(TR_PSYNC, 0, 0);
	}
	pl_release();
	if (r < 0) {
		if (r != -ESTALE)
			return fail(pl_errno(r));
		/* Replaced under us: the descriptor is an ordinary one now. */
		return REAL(pwritev2)(fd, iov, cnt, at_pos ? -1 : off, rwf);
	}
	return (ssize_t)total;
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct pofd *o HELD = pofd_get(fd);
	if (!is_prot(o))
		return REAL(write)(fd, buf, n);
	struct iovec v = {(void *)buf, n};
	return p_write(fd, o, &v, 1, -1, true, 0);
}

EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	struct pofd *o HELD = pofd_get(fd);
	if (!is_prot(o))
		return REAL(pwrite)(fd, buf, n, off);
	struct iovec v = {(void *)buf, n};
	return p_write(fd, o, &v, 1, off, false, 0);
}
EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
	WIDE_OFF(pwrite64, ssize_t (*)(int, const void *, size_t, off64_t), OFF_FITS(off), fd, fd, buf, n, off);
	return pwrite(fd, buf, n, (off_t)off);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	struct pofd *o HELD = pofd_get(fd);
	if (!is_prot(o))
		return REAL(writev)(fd, iov, cnt);
	return p_write(fd, o, iov, cnt, -1, true, 0);
}

EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	struct pofd *o HELD = pofd_get(fd);
	if (!is_prot(o))
		return REAL(pwritev2)(fd, iov, cnt, off, 0);
	return p_write(fd, o, iov, cnt, off, false, 0);
}
EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	WIDE_OFF(pwritev64, ssize_t (*)(int, const struct iovec *, int, off64_t), OFF_FITS(off), fd, fd, iov, cnt, off);
	return pwritev(fd, iov, cnt, (off_t)off);
}

EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	struct pofd *o HELD = pofd_get(fd);
	if (!is_prot(o))
		return REAL(pwritev2)(fd, iov, cnt, off, flags);
	/* RWF_HIPRI and RWF_NOWAIT are hints; the group never blocks on the
	 * device anyway.  Unknown flags are the kernel's to refuse. */
	if (flags & ~(RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT | RWF_APPEND))
		return fail(EOPNOTSUPP);
	return p_write(fd, o, iov, cnt, off, off == -1, flags);
}
EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
	WIDE_OFF(pwritev64v2, ssize_t (*)(int, const struct iovec *, int, off64_t, int), OFF_FITS(off), fd, fd, iov, cnt, off,
		 flags);
	return pwritev2(fd, iov, cnt, (off_t)off, flags);
}

/* --- reads ------------------------------------------------------------------------ */

/* A reader the kernel serves (mmap, copy_file_range, sendfile, splice,
 * stdio, AIO, SEEK_DATA/SEEK_HOLE): it sees the file, so the file's groups
 * of every process are made home first (atomio_sync returns at once when
 * none is pending).  Group mode: the pending group ends here. */
static void before_read(struct pofd *o)
{
	struct pfile *f = o->f;
	pl_hold();
	if (g_group) {
		pthread_mutex_lock(&f->mu);
		bool pending = grp_pending(f);
		pthread_mutex_unlock(&f->mu);
		if (pending)
			pl_sync_file(f, 0);
	} else {
		int id;
		atomio *st = pl_reader_store(f, &id);
		if (st)
			(void)atomio_sync(st, id, 0); /* a failure is the next fsync's to report */
	}
	pl_release();
}

/* Group mode: a read served from the pending group.  true = done, *r set. */
static bool group_read(int fd, struct pofd *o, const struct iovec *iov, int cnt, off_t off, bool at_pos,
		       ssize_t *r)
{
	if (!g_group || !pofd_live(fd, o))
		return false;
	if ((o->flags & O_ACCMODE) == O_WRONLY) {
		*r = fail(EBADF);
		return true;
	}
	pl_hold();
	ssize_t n;
	bool done = grp_read(fd, o->f, iov, cnt, off, at_pos, &n);
	pl_release();
	if (done)
		*r = n < 0 ? fail((int)-n) : n;
	return done;
}

/* A read of a protected descriptor while its file has lazy groups not yet
 * home (atomio_lazy_pending, st and id from pl_reader_store; g_rw held):
 * through the store, which overlays them on the file (atomio_preadv), at
 * off or (at_pos) at the description's position, moved by what was read
 * (the caller holds the lock that orders the position: shared_pos_call).
 * false: nothing pending (or not this call's to serve): libc reads the
 * file, which then holds every group. */
static bool lazy_read(atomio *st, int id, int fd, struct pofd *o, const struct iovec *iov, int cnt, off_t off,
		      bool at_pos, ssize_t *res)
{
	if (!st || id < 0 || cnt < 0 || cnt > IOV_MAX || atomio_lazy_pending(st, id) != 1 || !pofd_live(fd, o))
		return false;
	if ((o->flags & O_ACCMODE) == O_WRONLY) {
		*res = fail(EBADF);
		return true;
	}
	if (at_pos && (off = REAL(lseek)(fd, 0, SEEK_CUR)) < 0) {
		*res = -1;
		return true;
	}
	ssize_t n = atomio_preadv(st, id, iov, cnt, off);
	if (n < 0) {
		*res = fail(pl_errno((int)n));
		return true;
	}
	if (at_pos && n > 0)
		REAL(lseek)(fd, off + (off_t)n, SEEK_SET);
	*res = n;
	return true;
}

/* pread, preadv, preadv2 at an offset: lazy_read with the store found. */
static bool lazy_pread(int fd, struct pofd *o, const struct iovec *iov, int cnt, off_t off, ssize_t *res)
{
	if (g_group || off < 0)
		return false;
	pl_hold();
	int id;
	atomio *st = pl_reader_store(o->f, &id);
	bool done = lazy_read(st, id, fd, o, iov, cnt, off, false, res);
	int e = errno;
	pl_release();
	errno = e;
	return done;
}

/* The size of f as atomio's reads see it, every process's lazy groups
 * included, when some are not yet home; else size (the kernel's). */
static int64_t lazy_size(struct pfile *f, int64_t size)
{
	if (g_group || !g_active)
		return size;
	int e = errno;
	pl_hold();
	int id;
	uint64_t s;
	atomio *st = pl_reader_store(f, &id);
	if (st && id >= 0 && atomio_lazy_pending(st, id) == 1 && atomio_file_size(st, id, &s) == 0)
		size = (int64_t)s;
	pl_release();
	errno = e;
	return size;
}

/* lseek at a description's position whose file may have lazy groups:
 * SEEK_END from the store's size, SEEK_DATA/SEEK_HOLE after the groups
 * are home (the kernel answers them). */
static off_t seek_at(atomio *st, int id, int fd, off_t off, int whence)
{
	uint64_t s;
	if (whence == SEEK_END && st && id >= 0 && atomio_lazy_pending(st, id) == 1 &&
	    atomio_file_size(st, id, &s) == 0) {
		if (off > INT64_MAX - (int64_t)s || (int64_t)s + off < 0)
			return fail(EINVAL);
		return REAL(lseek)(fd, (off_t)s + off, SEEK_SET);
	}
	if ((whence == SEEK_DATA || whence == SEEK_HOLE) && st)
		(void)atomio_sync(st, id, 0);
	return REAL(lseek)(fd, off, whence);
}

/* A read or seek that uses or moves the position of a description (any:
 * other processes may hold it) waits for a write of another process
 * through it that is between reading the offset and moving it (p_write
 * holds pl_xlock there): the kernel's offset then stays the one truth.
 * The read goes through the store while the file has lazy groups
 * (lazy_read), else to the kernel.  Group mode takes the lock only for a
 * description other processes hold (its writes, one process's, take it
 * then: p_write), and leaves SEEK_END to p_lseek (the size its pending
 * group leaves).  false: the caller goes on; else *res is the result. */
static bool shared_pos_call(int fd, struct pofd *o, const struct iovec *iov, int cnt, int flags, bool is_seek,
			    off_t seek, int whence, ssize_t *res)
{
	if (g_group && (!pl_pofd_xproc(o) || (is_seek && whence == SEEK_END)))
		return false;
	if (g_group && is_seek && (whence == SEEK_DATA || whence == SEEK_HOLE))
		before_read(o); /* the kernel answers: the pending group ends */
	pl_hold();
	int id, xs;
	atomio *st = pl_reader_store(o->f, &id); /* a join happens before the lock */
	int r = pl_xlock_read(o->f, &xs);
	if (r < 0) {
		pl_release();
		*res = fail(-r);
		return true;
	}
	if (is_seek)
		*res = (ssize_t)seek_at(st, id, fd, seek, whence);
	else if (!lazy_read(st, id, fd, o, iov, cnt, -1, true, res))
		*res = REAL(preadv2)(fd, iov, cnt, -1, flags);
	int e = errno;
	pl_xunlock(xs);
	pl_release();
	errno = e;
	return true;
}

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	struct pofd *o HELD = pofd_get(fd);
	ssize_t r;
	struct iovec v = {buf, n};
	if (is_prot(o) && group_read(fd, o, &v, 1, -1, true, &r))
		return r;
	if (is_prot(o) && shared_pos_call(fd, o, &v, 1, 0, false, 0, 0, &r))
		return r;
	return REAL(read)(fd, buf, n);
}

EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	struct pofd *o HELD = pofd_get(fd);
	ssize_t r;
	struct iovec v = {buf, n};
	if (is_prot(o) && off >= 0 && group_read(fd, o, &v, 1, off, false, &r))
		return r;
	if (is_prot(o) && lazy_pread(fd, o, &v, 1, off, &r))
		return r;
	return REAL(pread)(fd, buf, n, off);
}
EXPORT ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
	WIDE_OFF(pread64, ssize_t (*)(int, void *, size_t, off64_t), OFF_FITS(off), fd, fd, buf, n, off);
	return pread(fd, buf, n, (off_t)off);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	struct pofd *o HELD = pofd_get(fd);
	ssize_t r;
	if (is_prot(o) && cnt >= 0 && cnt <= IOV_MAX && group_read(fd, o, iov, cnt, -1, true, &r))
		return r;
	if (is_prot(o) && shared_pos_call(fd, o, iov, cnt, 0, false, 0, 0, &r))
		return r;
	return REAL(readv)(fd, iov, cnt);
}

EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	struct pofd *o HELD = pofd_get(fd);
	ssize_t r;
	if (is_prot(o) && cnt >= 0 && cnt <= IOV_MAX && off >= -1 &&
	    group_read(fd, o, iov, cnt, off, off == -1, &r))
		return r;
	if (is_prot(o) && off == -1 && shared_pos_call(fd, o, iov, cnt, flags, false, 0, 0, &r))
		return r;
	if (is_prot(o) && lazy_pread(fd, o, iov, cnt, off, &r))
		return r;
	return REAL(preadv2)(fd, iov, cnt, off, flags);
}
EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
	WIDE_OFF(preadv64v2, ssize_t (*)(int, const struct iovec *, int, off64_t, int), OFF_FITS(off), fd, fd, iov, cnt,
		 off, flags);
	return preadv2(fd, iov, cnt, (off_t)off, flags);
}
EXPORT ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off) { return preadv2(fd, iov, cnt, off, 0); }
EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	WIDE_OFF(preadv64, ssize_t (*)(int, const struct iovec *, int, off64_t), OFF_FITS(off), fd, fd, iov, cnt, off);
	return preadv2(fd, iov, cnt, (off_t)off, 0);
}

/* _FORTIFY_SOURCE's checked reads (glibc calls its own read inside them). */
extern void __chk_fail(void) __attribute__((noreturn));
EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return read(fd, buf, n);
}
EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return pread(fd, buf, n, off);
}
EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	return __pread_chk(fd, buf, n, off, buflen);
}

/* The size of f (NULL: not protected here) as reads see it: group mode,
 * what its pending group leaves; else lazy_size. */
static int64_t pending_size(struct pfile *f, int64_t size)
{
	if (!f || f->orphan)
		return size;
	if (!g_group)
		return lazy_size(f, size);
	pthread_mutex_lock(&f->mu);
	if (grp_pending(f))
		size = f->size;
	pthread_mutex_unlock(&f->mu);
	return size;
}

EXPORT int fstat(int fd, struct stat *sb)
{
	struct pofd *o HELD = pofd_get(fd);
	int r = REAL(fstat)(fd, sb);
	/* The size as every group (lazy ones of every process, group mode's
	 * pending one) leaves it, without waiting (blocks and times follow
	 * later). */
	if (r == 0 && is_prot(o) && sb->st_dev == o->f->dev && sb->st_ino == o->f->ino)
		sb->st_size = pending_size(o->f, sb->st_size);
	return r;
}
EXPORT int fstat64(int fd, struct stat64 *sb) { return fstat(fd, (struct stat *)sb); }

/* stat, lstat, fstatat, statx by path (glibc's stat calls its fstatat
 * inside libc, where no wrapper runs, so each name is wrapped): the size of
 * a protected file as fstat gives it, found by the file's identity
 * whatever the path. */
static int stat_fix(int r, struct stat *sb)
{
	if (r == 0 && S_ISREG(sb->st_mode))
		sb->st_size = pending_size(g_active ? pl_file_find(sb->st_dev, sb->st_ino) : NULL, sb->st_size);
	return r;
}


typedef int (*stat_fn)(const char *, struct stat *);
typedef int (*statat_fn)(int, const char *, struct stat *, int);
EXPORT int stat(const char *path, struct stat *sb) { NEXT(stat, stat_fn); return stat_fix(next_stat(path, sb), sb); }
EXPORT int stat64(const char *path, struct stat64 *sb)
{
	NEXT(stat64, stat_fn);
	return stat_fix(next_stat64(path, (struct stat *)sb), (struct stat *)sb);
}
EXPORT int lstat(const char *path, struct stat *sb) { NEXT(lstat, stat_fn); return stat_fix(next_lstat(path, sb), sb); }
EXPORT int lstat64(const char *path, struct stat64 *sb)
{
	NEXT(lstat64, stat_fn);
	return stat_fix(next_lstat64(path, (struct stat *)sb), (struct stat *)sb);
}
EXPORT int fstatat(int dir, const char *path, struct stat *sb, int flags)
{
	NEXT(fstatat, statat_fn);
	return stat_fix(next_fstatat(dir, path, sb, flags), sb);
}
EXPORT int fstatat64(int dir, const char *path, struct stat64 *sb, int flags)
{
	NEXT(fstatat64, statat_fn);
	return stat_fix(next_fstatat64(dir, path, (struct stat *)sb, flags), (struct stat *)sb);
}
typedef int (*statx_fn)(int, const char *, int, unsigned, struct statx *);
EXPORT int statx(int dir, const char *path, int flags, unsigned mask, struct statx *sx)
{
	NEXT(statx, statx_fn);
	int r = next_statx ? next_statx(dir, path, flags, mask, sx) : fail(ENOSYS);
	if (r == 0 && (sx->stx_mask & STATX_SIZE) && (sx->stx_mask & STATX_TYPE) && S_ISREG(sx->stx_mode))
		sx->stx_size = (uint64_t)pending_size(
			g_active ? pl_file_find(makedev(sx->stx_dev_major, sx->stx_dev_minor), sx->stx_ino) : NULL,
			(int64_t)sx->stx_size);
	return r;
}

static off_t p_lseek(int fd, off_t off, int whence)
{
	struct pofd *o HELD = pofd_get(fd);
	if (!is_prot(o))
		return REAL(lseek)(fd, off, whence);
	ssize_t r;
	if (shared_pos_call(fd, o, NULL, 0, 0, true, off, whence, &r))
		return (off_t)r;
	/* Group mode (shared_pos_call serves the others): the size the
	 * pending group leaves. */
	if (whence == SEEK_END) {
		pthread_mutex_lock(&o->f->mu);
		size_refresh(o->f, fd);
		int64_t size = o->f->size;
		pthread_mutex_unlock(&o->f->mu);
		if (off > INT64_MAX - size || size + off < 0)
			return fail(EINVAL);
		return REAL(lseek)(fd, size + off, SEEK_SET);
	}
	if (whence == SEEK_DATA || whence == SEEK_HOLE)
		before_read(o);
	return REAL(lseek)(fd, off, whence);
}
EXPORT off_t lseek(int fd, off_t off, int whence) { return p_lseek(fd, off, whence); }
EXPORT off64_t lseek64(int fd, off64_t off, int whence)
{
	WIDE_OFF(lseek64, off64_t (*)(int, off64_t, int), OFF_FITS(off), fd, fd, off, whence);
	return p_lseek(fd, (off_t)off, whence);
}

/* --- syncs ------------------------------------------------------------------------ */

static int p_sync(struct pofd *o, unsigned flags)
{
	pl_hold();
	int r = pl_sync_file(o->f, flags);
	pl_release();
	/* fsync is a cancellation point: a cancel that came during the wait
	 * (off there, state.c) acts now, with the sync done. */
	pthread_testcancel();
	if (r < 0)
		return fail(pl_errno(r));
	real_trace_mark(TR_PSYNC, 0, 0);
	return 0;
}

/* atomio_sync of the file: every group of any process that touched it (and
 * every group before them) durable in the log and home; the store's
 * checkpoint syncs the file before that log space is reused, so the file
 * itself needs no fsync here. */
EXPORT int fsync(int fd)
{
	struct pofd *o HELD = pofd_get(fd);
	return is_prot(o) && pofd_live(fd, o) ? p_sync(o, 0) : REAL(fsync)(fd);
}

EXPORT int fdatasync(int fd)
{
	struct pofd *o HELD = pofd_get(fd);
	return is_prot(o) && pofd_live(fd, o) ? p_sync(o, 0) : REAL(fdatasync)(fd);
}

EXPORT int sync_file_range(int fd, off64_t off, off64_t n, unsigned flags)
{
	struct pofd *o HELD = pofd_get(fd);
	if (!is_prot(o) || !pofd_live(fd, o))
		return REAL(sync_file_range)(fd, off, n, flags);
	if (off < 0 || n < 0 || (flags & ~(SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
					   SYNC_FILE_RANGE_WAIT_AFTER)))
		return fail(EINVAL);
	/* WAIT_AFTER promises the range written: the sync.  WRITE alone asks
	 * the write-back to start: the flush of the file's groups starts
	 * (ATOMIO_SYNC_NOWAIT), nothing waited for (PostgreSQL's
	 * writeback_flush_after, checkpoint_flush_after).  WAIT_BEFORE alone
	 * waits for write-back already started, which promises nothing. */
	if (flags & SYNC_FILE_RANGE_WAIT_AFTER)
		return p_sync(o, 0);
	return flags & SYNC_FILE_RANGE_WRITE ? p_sync(o, ATOMIO_SYNC_NOWAIT) : 0;
}

static int sync_all(void)
{
	if (!g_active)
		return 0;
	pl_hold();
	int r = pl_sync_all();
	pl_release();
	return r;
}

EXPORT void sync(void)
{
	sync_all();
	REAL(sync)();
}

EXPORT int syncfs(int fd)
{
	int r = sync_all();
	int s = REAL(syncfs)(fd);
	return r < 0 ? fail(pl_errno(r)) : s;
}

EXPORT int msync(void *addr, size_t len, int flags)
{
	struct pfile *f = g_active ? pl_map_find(addr, len) : NULL;
	if (f && !f->orphan) {
		pl_hold();
		int r = pl_sync_file(f, 0);
		pl_release();
		if (r < 0)
			return fail(pl_errno(r));
	}
	return REAL(msync)(addr, len, flags);
}

/* --- size changes --------------------------------------------------------------------- */

static int p_resize(int fd, struct pofd *o, off_t size, bool only_grow)
{
	struct pfile *f = o->f;
	bool durable = o->flags & (O_SYNC | O_DSYNC); /* as a write of the descriptor */
	int r;
	pl_hold();
	atomio *st = pl_store(f->path);
	if (!st) {
		int e = errno;
		pl_release();
		return fail(e);
	}
	for (unsigned tries = 0;;) {
		/* Ordered with the other processes' appends and extending
		 * writes (shared_xwant), which take the end of the file, and
		 * with renames (pl_path_check).  A lazy size-change group; the
		 * end it compares with is the store's (cur_size). */
		int xs = -1;
		r = g_multi ? pl_xlock(f, &xs) : 0;
		if (r == 0 && g_multi)
			r = pl_path_check(st, f);
		pthread_mutex_lock(&f->mu);
		if (r == 0 && f->id < 0)
			r = pl_register(st, f, 0, 0);
		int64_t end = r == 0 && only_grow ? cur_size(st, f, fd) : 0;
		if (end < 0)
			r = (int)end;
		if (r == 0 && (!only_grow || size > end))
			r = pl_issue(st, f, NULL, 0, size, durable);
		pthread_mutex_unlock(&f->mu);
		pl_xunlock(xs);
		if ((r != ATOMIO_EIDENTITY && r != PL_EMOVED) || (r = mend(r, f, fd, &tries, &st)) != 0)
			break;
	}
	if (r == 0 && g_group && durable)
		r = pl_sync_file(f, 0); /* group mode: O_SYNC ends the pending group */
	pl_release();
	if (r == -ESTALE) {
		/* The path names another file now (replaced where the library
		 * did not see it): this descriptor is an ordinary one, and the
		 * size change is its file's, as in p_write. */
		struct stat sb;
		if (!only_grow)
			return REAL(ftruncate)(fd, size);
		return REAL(fstat)(fd, &sb) < 0 ? -1 : sb.st_size >= size ? 0 : REAL(ftruncate)(fd, size);
	}
	return r < 0 ? fail(pl_errno(r)) : 0;
}

static int p_ftruncate(int fd, off_t size)
{
	struct pofd *o HELD = pofd_get(fd);
	if (!is_prot(o) || !pofd_live(fd, o))
		return REAL(ftruncate)(fd, size);
	if (size < 0 || (o->flags & O_ACCMODE) == O_RDONLY)
		return fail(EINVAL);
	return p_resize(fd, o, size, false);
}
EXPORT int ftruncate(int fd, off_t size) { return p_ftruncate(fd, size); }
EXPORT int ftruncate64(int fd, off64_t size)
{
	WIDE_OFF(ftruncate64, int (*)(int, off64_t), OFF_FITS(size), fd, fd, size);
	return p_ftruncate(fd, (off_t)size);
}

static int p_truncate(const char *path, off_t size)
{
	char canon[PATH_MAX];
	if (!g_active || pl_canon(AT_FDCWD, path, true, canon) < 0 || !pl_match(canon))
		return REAL(truncate)(path, size);
	int fd = p_open(AT_FDCWD, path, O_WRONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int r = p_ftruncate(fd, size);
	int e = errno;
	close(fd);
	errno = e;
	return r;
}
EXPORT int truncate(const char *path, off_t size) { return p_truncate(path, size); }
EXPORT int truncate64(const char *path, off64_t size)
{
	if (!OFF_FITS(size)) {
		NEXT(truncate64, int (*)(const char *, off64_t));
		char canon[PATH_MAX];
		if (g_active && pl_canon(AT_FDCWD, path, true, canon) == 0 && pl_match(canon))
			return fail(EOVERFLOW);
		return next_truncate64 ? next_truncate64(path, size) : fail(ENOSYS);
	}
	return p_truncate(path, (off_t)size);
}

/* 0 or an errno value. */
/* posix: posix_fallocate, which glibc emulates where the filesystem has no
 * fallocate (it writes zeros where the file has none), so it succeeds there
 * with the size changed; fallocate(2) returns the filesystem's error. */
static int p_fallocate(int fd, struct pofd *o, int mode, off_t off, off_t len, bool posix)
{
	if (mode & ~FALLOC_FL_KEEP_SIZE) {
		pl_msg(o->f->path, "fallocate mode 0x%x refused (EOPNOTSUPP): it would change data "
				   "outside the log", mode);
		return EOPNOTSUPP;
	}
	if (off < 0 || len <= 0)
		return EINVAL;
	if ((o->flags & O_ACCMODE) == O_RDONLY)
		return EBADF;
	if (off > INT64_MAX - len)
		return EFBIG;
	/* The blocks are reserved by the kernel with KEEP_SIZE, which changes
	 * no byte a read returns, before the size change: the file's own
	 * answer (EOPNOTSUPP where the filesystem has no fallocate, ENOSPC,
	 * EFBIG) comes first, and a failed call changes no size.  The size
	 * change is a group, ordered with the writes. */
	if (REAL(fallocate)(fd, FALLOC_FL_KEEP_SIZE, off, len) < 0 && !(posix && errno == EOPNOTSUPP))
		return errno;
	if (!(mode & FALLOC_FL_KEEP_SIZE) && p_resize(fd, o, off + len, true) < 0)
		return errno;
	return 0;
}

EXPORT int fallocate(int fd, int mode, off_t off, off_t len)
{
	struct pofd *o HELD = pofd_get(fd);
	if (!is_prot(o) || !pofd_live(fd, o))
		return REAL(fallocate)(fd, mode, off, len);
	int e = p_fallocate(fd, o, mode, off, len, false);
	return e ? fail(e) : 0;
}
EXPORT int fallocate64(int fd, int mode, off64_t off, off64_t len)
{
	WIDE_OFF(fallocate64, int (*)(int, int, off64_t, off64_t), OFF_FITS(off) && OFF_FITS(len), fd, fd, mode, off, len);
	return fallocate(fd, mode, (off_t)off, (off_t)len);
}

EXPORT int posix_fallocate(int fd, off_t off, off_t len)
{
	struct pofd *o HELD = pofd_get(fd);
	if (!is_prot(o) || !pofd_live(fd, o))
		return REAL(posix_fallocate)(fd, off, len);
	return p_fallocate(fd, o, 0, off, len, true);
}
EXPORT int posix_fallocate64(int fd, off64_t off, off64_t len)
{
	if (!OFF_FITS(off) || !OFF_FITS(len)) {
		NEXT(posix_fallocate64, int (*)(int, off64_t, off64_t));
		if (pofd_of(fd) || !next_posix_fallocate64)
			return pofd_of(fd) ? EOVERFLOW : ENOSYS; /* it returns the error */
		return next_posix_fallocate64(fd, off, len);
	}
	return posix_fallocate(fd, (off_t)off, (off_t)len);
}

/* --- mappings ------------------------------------------------------------------------ */

/* A read-only shared mapping of a protected file through a writable
 * descriptor could later be made writable with mprotect(PROT_WRITE), and its
 * stores would reach the file outside the log.  It is made through a
 * read-only descriptor of the same file instead (opened anew by
 * /proc/self/fd, closed once mapped): the kernel then refuses that mprotect
 * itself (EACCES), as for a file opened read-only.  NULL: map as asked. */
static void *shared_ro_map(void *addr, size_t len, int prot, int flags, int fd, off_t off, struct pofd *o)
{
	int type = flags & MAP_TYPE;
	if ((type != MAP_SHARED && type != MAP_SHARED_VALIDATE) || (o->flags & O_ACCMODE) == O_RDONLY)
		return NULL;
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	int ro = REAL(open)(link, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (ro < 0 || REAL(fstat)(ro, &sb) < 0 || sb.st_dev != o->f->dev || sb.st_ino != o->f->ino) {
		if (ro >= 0)
			REAL(close)(ro);
		pl_msg(o->f->path, "shared mapping refused (EACCES): no read-only descriptor of the file "
				   "to map it through (it could be made writable with mprotect)");
		errno = EACCES;
		return MAP_FAILED;
	}
	void *p = REAL(mmap)(addr, len, prot, flags, ro, off);
	int e = errno;
	REAL(close)(ro);
	errno = e;
	return p;
}

static void *p_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	struct pofd *o HELD = pofd_get(fd);
	if (!is_prot(o) || (flags & MAP_ANONYMOUS))
		return REAL(mmap)(addr, len, prot, flags, fd, off);
	int type = flags & MAP_TYPE;
	if ((prot & PROT_WRITE) && (type == MAP_SHARED || type == MAP_SHARED_VALIDATE)) {
		pl_msg(o->f->path, "writable shared mapping refused (EACCES): its stores would bypass the log");
		errno = EACCES;
		return MAP_FAILED;
	}
	/* The mapping shows the page cache: wait for the groups pending in its
	 * range.  Later writes show in it once they complete (at the latest
	 * when the next sync returns). */
	before_read(o);
	void *p = shared_ro_map(addr, len, prot, flags, fd, off, o);
	if (p == NULL)
		p = REAL(mmap)(addr, len, prot, flags, fd, off);
	if (p != MAP_FAILED)
		pl_map_add(p, len, o->f);
	return p;
}
EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return p_mmap(addr, len, prot, flags, fd, off);
}
EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	if (!OFF_FITS(off)) {
		NEXT(mmap64, void *(*)(void *, size_t, int, int, int, off64_t));
		if (pofd_of(fd) || !next_mmap64) {
			errno = pofd_of(fd) ? EOVERFLOW : ENOSYS;
			return MAP_FAILED;
		}
		return next_mmap64(addr, len, prot, flags, fd, off);
	}
	return p_mmap(addr, len, prot, flags, fd, (off_t)off);
}

EXPORT int munmap(void *addr, size_t len)
{
	if (g_active)
		pl_map_del(addr, len);
	return REAL(munmap)(addr, len);
}

/* --- copies into a protected file ----------------------------------------------------- */

static bool refuse_dst(int fd, const char *call)
{
	struct pofd *o HELD = pofd_get(fd);
	if (!is_prot(o))
		return false;
	pl_msg(o->f->path, "%s into a protected file refused: the kernel would write it outside the log", call);
	return true;
}

static void wait_src(int fd)
{
	struct pofd *o HELD = pofd_get(fd);
	if (is_prot(o))
		before_read(o);
}

EXPORT ssize_t copy_file_range(int in, off64_t *oin, int out, off64_t *oout, size_t len, unsigned flags)
{
	if (refuse_dst(out, "copy_file_range"))
		return fail(EXDEV); /* callers fall back to read and write */
	wait_src(in);
	return REAL(copy_file_range)(in, oin, out, oout, len, flags);
}

EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	if (refuse_dst(out, "sendfile"))
		return fail(EINVAL);
	wait_src(in);
	return REAL(sendfile)(out, in, off, n);
}
EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t n)
{
	NEXT(sendfile64, ssize_t (*)(int, int, off64_t *, size_t));
	if (refuse_dst(out, "sendfile"))
		return fail(EINVAL);
	wait_src(in);
	return next_sendfile64 ? next_sendfile64(out, in, off, n) : fail(ENOSYS);
}

EXPORT ssize_t splice(int in, off64_t *oin, int out, off64_t *oout, size_t len, unsigned flags)
{
	if (refuse_dst(out, "splice"))
		return fail(EINVAL);
	wait_src(in);
	return REAL(splice)(in, oin, out, oout, len, flags);
}

/* --- descriptors received over a socket -------------------------------------------- */

/* SCM_RIGHTS hands another process's open file description over: a
 * protected file's must be protected here too (its writes through the
 * store, its offset the one the sender moves), as after fork. */
static void adopt_received(struct msghdr *m)
{
	if (!g_active || !m || !m->msg_control)
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			pl_adopt_fd(fd);
		}
	}
}

/* Descriptions sent away are another process's too (pl_pofd_xproc). */
static void mark_sent(const struct msghdr *m)
{
	if (!g_active || !m || !m->msg_control)
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			struct pofd *o HELD = pofd_get(fd);
			if (o)
				o->xproc = true;
		}
	}
}

EXPORT ssize_t sendmsg(int sock, const struct msghdr *m, int flags)
{
	static ssize_t (*next)(int, const struct msghdr *, int);
	if (!next)
		next = (ssize_t (*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
	if (!next)
		return fail(ENOSYS);
	mark_sent(m); /* before: the receiver may write at once */
	return next(sock, m, flags);
}

EXPORT int sendmmsg(int sock, struct mmsghdr *v, unsigned n, int flags)
{
	static int (*next)(int, struct mmsghdr *, unsigned, int);
	if (!next)
		next = (int (*)(int, struct mmsghdr *, unsigned, int))dlsym(RTLD_NEXT, "sendmmsg");
	if (!next)
		return fail(ENOSYS);
	for (unsigned i = 0; v && i < n; i++)
		mark_sent(&v[i].msg_hdr);
	return next(sock, v, n, flags);
}

EXPORT ssize_t recvmsg(int sock, struct msghdr *m, int flags)
{
	static ssize_t (*next)(int, struct msghdr *, int);
	if (!next)
		next = (ssize_t (*)(int, struct msghdr *, int))dlsym(RTLD_NEXT, "recvmsg");
	if (!next)
		return fail(ENOSYS);
	ssize_t r = next(sock, m, flags);
	if (r >= 0)
		adopt_received(m);
	return r;
}

EXPORT int recvmmsg(int sock, struct mmsghdr *v, unsigned n, int flags, struct timespec *t)
{
	static int (*next)(int, struct mmsghdr *, unsigned, int, struct timespec *);
	if (!next)
		next = (int (*)(int, struct mmsghdr *, unsigned, int, struct timespec *))dlsym(RTLD_NEXT, "recvmmsg");
	if (!next)
		return fail(ENOSYS);
	int r = next(sock, v, n, flags, t);
	for (int i = 0; i < r; i++)
		adopt_received(&v[i].msg_hdr);
	return r;
}

/* --- Linux native AIO (libaio) ----------------------------------------------------- */

/* libaio's io_submit hands writes to the kernel, where no wrapper sees
 * them: refused for protected descriptors (InnoDB: innodb_use_native_aio=0),
 * rather than silently unprotected.  libaio returns a negative errno. */
EXPORT int io_submit(void *ctx, long nr, struct iocb **ios)
{
	static int (*next)(void *, long, struct iocb **);
	if (!next)
		next = (int (*)(void *, long, struct iocb **))dlsym(RTLD_NEXT, "io_submit");
	for (long i = 0; g_active && ios && i < nr; i++) {
		struct pofd *o HELD = ios[i] ? pofd_get((int)ios[i]->aio_fildes) : NULL;
		if (!is_prot(o))
			continue;
		unsigned op = ios[i]->aio_lio_opcode;
		if (op == IOCB_CMD_PREAD || op == IOCB_CMD_PREADV) {
			before_read(o);
			continue;
		}
		pl_msg(o->f->path, "io_submit (Linux AIO) of a write or sync refused (EINVAL): the kernel "
				   "would write outside the log; use plain pwrite (InnoDB: innodb_use_native_aio=0)");
		return -EINVAL;
	}
	return next ? next(ctx, nr, ios) : -ENOSYS;
}

/* Setting up a native AIO context at all, while files are protected:
 * declined (-ENOSYS, libaio's and liburing's way of saying "not here").
 * io_uring's writes are submitted through shared rings and a raw system
 * call, where no wrapper runs: a program that gets a ring writes its
 * protected files unseen -- unprotected, and a lazy group of an earlier
 * pwrite to the same page may go home over the newer data.  MariaDB 10.11
 * with innodb_use_native_aio=1 does exactly that ("Using io_uring": the
 * store saw 0.01 groups per transaction instead of 8).  Declined, InnoDB
 * falls back to libaio, and when io_setup is declined too, to its own
 * threads' pwrite (innodb_use_native_aio=OFF), which the library serves;
 * refusing only io_submit's writes (above) would make its writes fail. */
static int aio_declined(const char *what)
{
	static atomic_bool said;
	if (!atomic_exchange(&said, true))
		pl_msg(NULL, "%s declined (ENOSYS) while files are protected: the kernel would write them "
			     "outside the log; the program's own fallback (pwrite) is served", what);
	return -ENOSYS;
}

EXPORT int io_setup(unsigned nr, void **ctx)
{
	static int (*next)(unsigned, void **);
	if (g_active)
		return aio_declined("io_setup (Linux AIO)");
	if (!next)
		next = (int (*)(unsigned, void **))dlsym(RTLD_NEXT, "io_setup");
	return next ? next(nr, ctx) : -ENOSYS;
}

EXPORT int io_uring_queue_init(unsigned entries, void *ring, unsigned flags)
{
	static int (*next)(unsigned, void *, unsigned);
	if (g_active)
		return aio_declined("io_uring_queue_init (io_uring)");
	if (!next)
		next = (int (*)(unsigned, void *, unsigned))dlsym(RTLD_NEXT, "io_uring_queue_init");
	return next ? next(entries, ring, flags) : -ENOSYS;
}

EXPORT int io_uring_queue_init_params(unsigned entries, void *ring, void *p)
{
	static int (*next)(unsigned, void *, void *);
	if (g_active)
		return aio_declined("io_uring_queue_init_params (io_uring)");
	if (!next)
		next = (int (*)(unsigned, void *, void *))dlsym(RTLD_NEXT, "io_uring_queue_init_params");
	return next ? next(entries, ring, p) : -ENOSYS;
}

/* --- stdio ---------------------------------------------------------------------------- */

static bool mode_writes(const char *mode) { return mode && strpbrk(mode, "wa+"); }

static bool refuse_stdio(const char *path, const char *mode)
{
	char canon[PATH_MAX];
	if (!g_active || !path || pl_canon(AT_FDCWD, path, true, canon) < 0 || !pl_match(canon))
		return false;
	if (!mode_writes(mode)) {
		sync_all(); /* stdio reads inside libc: let them see every write */
		return false;
	}
	pl_msg(canon, "fopen(\"%s\") refused (EPERM): stdio writes inside libc, out of the library's "
		      "sight; use open and write", mode);
	return true;
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
	if (refuse_stdio(path, mode)) {
		errno = EPERM;
		return NULL;
	}
	FILE *s = REAL(fopen)(path, mode);
	if (s && g_active)
		fresh_fd(fileno(s));
	return s;
}
EXPORT FILE *fopen64(const char *path, const char *mode) { return fopen(path, mode); }

EXPORT FILE *freopen(const char *path, const char *mode, FILE *s)
{
	if (refuse_stdio(path, mode)) {
		errno = EPERM;
		return NULL;
	}
	int fd = g_active && s ? fileno(s) : -1;
	struct pofd *o HELD = fd >= 0 ? pofd_get(fd) : NULL;
	if (is_prot(o) && !path && mode_writes(mode)) {
		/* The same file reopened for stdio's writes, inside libc. */
		pl_msg(o->f->path, "freopen(NULL, \"%s\") refused (EPERM): stdio writes inside libc", mode);
		errno = EPERM;
		return NULL;
	}
	/* With a path, libc closes the stream's descriptor itself (no close
	 * wrapper runs); the number may come back for the new file. */
	if (o && path && !pl_vfork_child())
		pofd_drop_if(fd, o);
	FILE *r = REAL(freopen)(path, mode, s);
	if (r && g_active && path)
		fresh_fd(fileno(r));
	return r;
}
EXPORT FILE *freopen64(const char *path, const char *mode, FILE *s) { return freopen(path, mode, s); }

EXPORT FILE *fdopen(int fd, const char *mode)
{
	struct pofd *o HELD = pofd_get(fd);
	if (is_prot(o)) {
		if (mode_writes(mode)) {
			pl_msg(o->f->path, "fdopen(\"%s\") refused (EPERM): stdio writes inside libc", mode);
			errno = EPERM;
			return NULL;
		}
		before_read(o);
	}
	return REAL(fdopen)(fd, mode);
}

/* fclose closes the stream's descriptor inside libc, where the close
 * wrapper does not run: the entry goes first, as in close, or the number's
 * next file (another open gets it) would be taken for the protected one. */
EXPORT int fclose(FILE *s)
{
	static int (*next)(FILE *);
	if (!next)
		next = (int (*)(FILE *))dlsym(RTLD_NEXT, "fclose");
	int fd = g_active && s ? fileno(s) : -1;
	struct pofd *o = fd >= 0 ? pofd_of(fd) : NULL;
	if (o && !pl_vfork_child())
		pofd_drop_if(fd, o);
	return next(s);
}

/* --- rename, unlink -------------------------------------------------------------------- */

/* Before a rename or unlink of protected path a (g_rw held
 * exclusive): every slot's byte taken (pl_xlock_all: no process's write or
 * size change of a protected file is between its look at the rename count
 * and the end of its commit), the whole store checkpointed (no live record
 * of any process names the path), and the rename count moved on, so that
 * another process's next write of a file whose path this call changes finds
 * it changed and follows the file (pl_path_check).  Held until the call is
 * done (pl_xunlock_all, also when this fails).  0 or -errno. */
static int moved_begin(const char *a)
{
	int r = pl_xlock_all();
	if (r == 0)
		r = pl_shared_checkpoint(a);
	if (r == 0)
		pl_path_moved();
	return r;
}

static int p_rename(int odir, const char *from, int ndir, const char *to, unsigned flags, int how)
{
	char a[PATH_MAX], b[PATH_MAX];
	bool mine = g_active && pl_canon(odir, from, false, a) == 0 && pl_canon(ndir, to, false, b) == 0 &&
		    (pl_involves(a) || pl_involves(b));
	if (!mine || pl_not_owner())
		goto plain;
	pl_lock_excl();
	/* A file id keeps the path it was registered under (files.c): records
	 * logged for the file after the rename would still name the old path,
	 * where other processes' home writes, and recovery, open it (gone, or
	 * another file).  So this process's handle is closed around the rename,
	 * in every mode: its next write registers the file under its new name.
	 * First the whole store is checkpointed (the store stays open
	 * for the others): no live record, of any process, names the old path. */
	int r = g_multi ? moved_begin(a) : 0;
	if (r == 0)
		r = pl_store_restart_locked();
	if (r < 0) {
		if (g_multi)
			pl_xunlock_all();
		pl_unlock_excl();
		return fail(pl_errno(r));
	}
	int s = how == 0 ? REAL(rename)(from, to)
		: how == 1 ? REAL(renameat)(odir, from, ndir, to)
			   : REAL(renameat2)(odir, from, ndir, to, flags);
	int e = errno;
	if (s == 0) {
		if (flags & RENAME_EXCHANGE) {
			/* Both names stay; the files swap: let both be found again. */
			pl_file_gone(a);
			pl_file_gone(b);
		} else {
			pl_file_moved(a, b);
		}
	}
	if (g_multi)
		pl_xunlock_all();
	pl_unlock_excl();
	errno = e;
	return s;
plain:
	return how == 0 ? REAL(rename)(from, to)
	       : how == 1 ? REAL(renameat)(odir, from, ndir, to)
			  : REAL(renameat2)(odir, from, ndir, to, flags);
}

EXPORT int rename(const char *from, const char *to) { return p_rename(AT_FDCWD, from, AT_FDCWD, to, 0, 0); }
EXPORT int renameat(int od, const char *from, int nd, const char *to) { return p_rename(od, from, nd, to, 0, 1); }
EXPORT int renameat2(int od, const char *from, int nd, const char *to, unsigned flags)
{
	return p_rename(od, from, nd, to, flags, 2);
}

static int p_unlink(int dir, const char *path, int flags, bool at)
{
	char a[PATH_MAX];
	if (!g_active || (flags & AT_REMOVEDIR) || pl_not_owner() || pl_canon(dir, path, false, a) < 0 ||
	    !pl_involves(a))
		return at ? REAL(unlinkat)(dir, path, flags) : REAL(unlink)(path);
	pl_lock_excl();
	int r = g_multi ? moved_begin(a) : pl_store_restart_locked();
	if (r < 0) {
		if (g_multi)
			pl_xunlock_all();
		pl_unlock_excl();
		return fail(pl_errno(r));
	}
	int s = at ? REAL(unlinkat)(dir, path, flags) : REAL(unlink)(path);
	int e = errno;
	if (s == 0)
		pl_file_gone(a);
	if (g_multi)
		pl_xunlock_all();
	pl_unlock_excl();
	errno = e;
	return s;
}
EXPORT int unlink(const char *path) { return p_unlink(AT_FDCWD, path, 0, false); }
EXPORT int unlinkat(int dir, const char *path, int flags) { return p_unlink(dir, path, flags, true); }

/* --- exec ---------------------------------------------------------------------------- */

/* Before the image is replaced: every pending group durable and home, the
 * store closed, so that the new image (which inherits LD_PRELOAD) can open
 * it.  Held exclusive across the call so no thread writes meanwhile; if the
 * exec fails, the store reopens at the next write. */
static void exec_prepare(void)
{
	/* The new image holds every description not close-on-exec: another
	 * process's too from now on (pl_pofd_xproc).  Also in a vfork child,
	 * whose memory is its parent's: the parent sees it. */
	if (g_active)
		atomic_fetch_add(&g_forkgen, 1);
	if (!g_active || pl_not_owner())
		return;
	pl_lock_excl();
	pl_store_restart_locked();
	pl_stats_flush();
}
static void exec_failed(void)
{
	if (g_active && !pl_not_owner())
		pl_unlock_excl();
}

/* _exit and _Exit run no destructor: the store is closed here as at exit
 * (pl_fini_now says why).  exit() reaches the kernel through libc's own
 * _exit, which this does not see; its destructor does the same. */
EXPORT void _exit(int status)
{
	NEXT(_exit, void (*)(int));
	pl_fini_now();
	next__exit(status);
	__builtin_unreachable();
}
EXPORT void _Exit(int status)
{
	NEXT(_Exit, void (*)(int));
	pl_fini_now();
	next__Exit(status);
	__builtin_unreachable();
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	exec_prepare();
	int r = REAL(execve)(path, argv, envp);
	int e = errno;
	exec_failed();
	errno = e;
	return r;
}
EXPORT int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	exec_prepare();
	int r = REAL(execvpe)(file, argv, envp);
	int e = errno;
	exec_failed();
	errno = e;
	return r;
}
EXPORT int execvp(const char *file, char *const argv[]) { return execvpe(file, argv, environ); }

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	exec_prepare();
	int r = REAL(fexecve)(fd, argv, envp);
	int e = errno;
	exec_failed();
	errno = e;
	return r;
}

EXPORT int execveat(int dir, const char *path, char *const argv[], char *const envp[], int flags)
{
	static int (*next)(int, const char *, char *const[], char *const[], int);
	if (!next)
		next = (int (*)(int, const char *, char *const[], char *const[], int))dlsym(RTLD_NEXT, "execveat");
	if (!next)
		return fail(ENOSYS);
	exec_prepare();
	int r = next(dir, path, argv, envp, flags);
	int e = errno;
	exec_failed();
	errno = e;
	return r;
}

/* posix_spawn, system and popen start a program without fork's handlers
 * or an exec wrapper (glibc clones and execs inside libc): the child may
 * not be under the preload and reads the protected files as they are on
 * the file, so every group of the store is made home first (atomio_sync of
 * the store).  A child under the preload joins the store (group mode:
 * EBUSY, a second writer). */
static void before_spawn(void)
{
	if (g_active)
		atomic_fetch_add(&g_forkgen, 1); /* the child holds the descriptions too (pl_pofd_xproc) */
	if (g_active && !pl_not_owner())
		sync_all();
}

typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
			char *const[], char *const[]);
EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		       const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
	NEXT(posix_spawn, spawn_fn);
	before_spawn();
	return next_posix_spawn(pid, path, fa, at, argv, envp);
}
EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
	NEXT(posix_spawnp, spawn_fn);
	before_spawn();
	return next_posix_spawnp(pid, file, fa, at, argv, envp);
}
EXPORT int system(const char *cmd)
{
	NEXT(system, int (*)(const char *));
	before_spawn();
	return next_system(cmd);
}
EXPORT FILE *popen(const char *cmd, const char *mode)
{
	NEXT(popen, FILE * (*)(const char *, const char *));
	before_spawn();
	return next_popen(cmd, mode);
}

/* --- writers inside the kernel or libc -------------------------------------------------- */

/* ioctl(FICLONE, FICLONERANGE) into a protected file: the filesystem would
 * share another file's blocks into it, outside the log (cp --reflink).
 * Refused with EXDEV, on which cp and others fall back to copy_file_range
 * (refused too) and then read and write. */
EXPORT int ioctl(int fd, unsigned long req, ...)
{
	static int (*next)(int, unsigned long, ...);
	if (!next)
		next = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	if ((req == FICLONE || req == FICLONERANGE) && refuse_dst(fd, req == FICLONE ? "ioctl(FICLONE)" : "ioctl(FICLONERANGE)"))
		return fail(EXDEV);
	return next(fd, req, arg);
}

/* POSIX AIO (aio_write, lio_listio): glibc's threads write with its own
 * pwrite, unseen: a write to a protected file is refused (EINVAL); a read
 * waits for the pending groups first; aio_fsync waits for the file's groups
 * before the kernel's sync is queued. */
/* Reads only the descriptor and the opcode, which aiocb64 has at the same
 * places (the *64 calls pass theirs). */
static bool aio_refused(const struct aiocb *cb, int op)
{
	struct pofd *o HELD = cb ? pofd_get(cb->aio_fildes) : NULL;
	if (!is_prot(o))
		return false;
	if (op == LIO_READ) {
		before_read(o);
		return false;
	}
	pl_msg(o->f->path, "POSIX AIO write refused (EINVAL): glibc's threads would write it outside the log");
	return true;
}
EXPORT int aio_write(struct aiocb *cb)
{
	NEXT(aio_write, int (*)(struct aiocb *));
	return aio_refused(cb, LIO_WRITE) ? fail(EINVAL) : next_aio_write(cb);
}
EXPORT int aio_write64(struct aiocb64 *cb)
{
	NEXT(aio_write64, int (*)(struct aiocb64 *));
	return aio_refused((struct aiocb *)cb, LIO_WRITE) ? fail(EINVAL) : next_aio_write64(cb);
}
EXPORT int aio_read(struct aiocb *cb)
{
	NEXT(aio_read, int (*)(struct aiocb *));
	aio_refused(cb, LIO_READ);
	return next_aio_read(cb);
}
EXPORT int aio_read64(struct aiocb64 *cb)
{
	NEXT(aio_read64, int (*)(struct aiocb64 *));
	aio_refused((struct aiocb *)cb, LIO_READ);
	return next_aio_read64(cb);
}
EXPORT int aio_fsync(int op, struct aiocb *cb)
{
	NEXT(aio_fsync, int (*)(int, struct aiocb *));
	struct pofd *o HELD = pofd_get(cb->aio_fildes);
	if (is_prot(o) && p_sync(o, 0) < 0)
		return -1;
	return next_aio_fsync(op, cb);
}
EXPORT int aio_fsync64(int op, struct aiocb64 *cb)
{
	NEXT(aio_fsync64, int (*)(int, struct aiocb64 *));
	struct pofd *o HELD = pofd_get(cb->aio_fildes);
	if (is_prot(o) && p_sync(o, 0) < 0)
		return -1;
	return next_aio_fsync64(op, cb);
}
static int lio_check(struct aiocb *const list[], int n)
{
	for (int i = 0; list && i < n; i++)
		if (list[i] && list[i]->aio_lio_opcode != LIO_NOP && aio_refused(list[i], list[i]->aio_lio_opcode))
			return fail(EINVAL);
	return 0;
}
EXPORT int lio_listio(int mode, struct aiocb *const list[], int n, struct sigevent *sev)
{
	NEXT(lio_listio, int (*)(int, struct aiocb *const[], int, struct sigevent *));
	return lio_check(list, n) < 0 ? -1 : next_lio_listio(mode, list, n, sev);
}
EXPORT int lio_listio64(int mode, struct aiocb64 *const list[], int n, struct sigevent *sev)
{
	NEXT(lio_listio64, int (*)(int, struct aiocb64 *const[], int, struct sigevent *));
	/* aiocb64 begins as aiocb does (descriptor, then opcode): all that is read */
	return lio_check((struct aiocb *const *)list, n) < 0 ? -1 : next_lio_listio64(mode, list, n, sev);
}

/* execl, execlp, execle: the list made an array (at most 4096 arguments). */
#define LIST_ARGV(first, ap, argv, n)                              \
	char *argv[4097];                                          \
	int n = 0;                                                 \
	argv[n++] = (char *)(first);                               \
	while (n < 4096 && (argv[n] = va_arg(ap, char *)) != NULL) \
		n++;                                               \
	argv[n] = NULL

EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	LIST_ARGV(arg, ap, argv, n);
	va_end(ap);
	return execve(path, argv, environ);
}
EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	LIST_ARGV(arg, ap, argv, n);
	va_end(ap);
	return execvpe(file, argv, environ);
}
EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	LIST_ARGV(arg, ap, argv, n);
	char *const *envp = va_arg(ap, char *const *);
	va_end(ap);
	return execve(path, argv, envp);
}
