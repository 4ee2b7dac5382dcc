/*
 * sys.h: the one door from atomio to the operating system.
 *
 * Every system call atomio makes goes through the table below (as SQLite's
 * aSyscall[]), so that tests can record, fail, tear or "crash" any of them.
 * Each entry returns a non-negative result or a negative errno; conversion
 * from the libc convention (-1 + errno) happens once, in sys.c.  EINTR and
 * short reads/writes are NOT retried by the entries: the *_full helpers below
 * (sys_pread_full, sys_pwritev_full, sys_fsync_full, ...) do that, in one
 * place, so fault injection exercises them.
 *
 * This header is internal; the test suite includes it to install a backend.
 */
#ifndef ATOMIO_SYS_H
#define ATOMIO_SYS_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

/* statx layout as of Linux 6.16 (Debian 12's headers predate the atomic-write
 * and dio fields, so atomio carries its own copy).  Offsets are part of the
 * kernel ABI. */
struct atomio_statx_ts {
	int64_t tv_sec;
	uint32_t tv_nsec;
	int32_t reserved;
};

struct atomio_statx {
	uint32_t stx_mask;                      /* 0x00 */
	uint32_t stx_blksize;
	uint64_t stx_attributes;
	uint32_t stx_nlink;                     /* 0x10 */
	uint32_t stx_uid;
	uint32_t stx_gid;
	uint16_t stx_mode;
	uint16_t spare0;
	uint64_t stx_ino;                       /* 0x20 */
	uint64_t stx_size;
	uint64_t stx_blocks;
	uint64_t stx_attributes_mask;
	struct atomio_statx_ts stx_atime;       /* 0x40 */
	struct atomio_statx_ts stx_btime;
	struct atomio_statx_ts stx_ctime;
	struct atomio_statx_ts stx_mtime;
	uint32_t stx_rdev_major;                /* 0x80 */
	uint32_t stx_rdev_minor;
	uint32_t stx_dev_major;
	uint32_t stx_dev_minor;
	uint64_t stx_mnt_id;                    /* 0x90 */
	uint32_t stx_dio_mem_align;
	uint32_t stx_dio_offset_align;
	uint64_t stx_subvol;                    /* 0xa0 */
	uint32_t stx_atomic_write_unit_min;
	uint32_t stx_atomic_write_unit_max;
	uint32_t stx_atomic_write_segments_max; /* 0xb0 */
	uint32_t stx_dio_read_offset_align;
	uint32_t stx_atomic_write_unit_max_opt;
	uint32_t spare2;
	uint64_t spare3[8];                     /* 0xc0 */
};
_Static_assert(sizeof(struct atomio_statx) == 0x100, "statx layout");

#define ATOMIO_STATX_BASIC 0x07ffu
#define ATOMIO_STATX_BTIME 0x0800u
#define ATOMIO_STATX_DIOALIGN 0x2000u
#define ATOMIO_STATX_WRITE_ATOMIC 0x10000u
#define ATOMIO_STATX_ATTR_WRITE_ATOMIC 0x400000ull

#ifndef RWF_DSYNC
#define RWF_DSYNC 0x2
#endif
#ifndef RWF_ATOMIC
#define RWF_ATOMIC 0x40
#endif

struct statfs;
struct rlimit;
struct io_uring; /* liburing's ring; sys.c and engine_uring.c include <liburing.h> */

struct atomio_sysops {
	const char *name;
	int (*open)(const char *path, int flags, mode_t mode);
	int (*close)(int fd);
	ssize_t (*pread)(int fd, void *buf, size_t len, off_t off);
	/* rwf: 0 or RWF_DSYNC (durable on return) or RWF_ATOMIC|RWF_DSYNC */
	ssize_t (*pwritev)(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf);
	int (*fsync)(int fd);
	int (*fdatasync)(int fd);
	int (*ftruncate)(int fd, off_t size);
	int (*fstat)(int fd, struct stat *st);
	int (*lstat)(const char *path, struct stat *st);
	int (*fstatfs)(int fd, struct statfs *sfs);
	int (*statx)(int dirfd, const char *path, int flags, unsigned mask, struct atomio_statx *stx);
	int (*flock)(int fd, int op);
	int (*rename_noreplace)(const char *from, const char *to);
	int (*unlink)(const char *path);
	int (*getrandom)(void *buf, size_t len);
	/* Canonical absolute path (symlinks resolved) of an existing path, in out[PATH_MAX]. */
	int (*realpath)(const char *path, char *out);

	/* --- added by the engine.  A backend written before these
	 * existed leaves them NULL: atomio then treats each call as failing
	 * with -ENOSYS (see the sys_* wrappers below), which selects the plain
	 * engine and makes atomio_event_fd report -ENOSYS. --- */

	/* io_uring (liburing's io_uring_queue_init / io_uring_submit_and_wait /
	 * io_uring_queue_exit).  uring_enter submits every prepared entry and
	 * waits for at least wait_nr completions; it returns the number of
	 * entries submitted or a negative errno.  Reading completions from the
	 * ring's shared memory is no system call.  The uring engine writes
	 * through the ring, NOT through pwritev: a backend that records or fails
	 * writes must leave these NULL, or open its stores with
	 * ATOMIO_ENGINE_PLAIN (ATOMIO_ENGINE_AUTO picks the plain engine for any
	 * table but atomio_sys_linux).  A backend that fails uring_enter while
	 * requests are in flight must let a later call succeed: their buffers
	 * cannot be freed before they complete. */
	int (*uring_init)(unsigned entries, struct io_uring *ring);
	int (*uring_enter)(struct io_uring *ring, unsigned wait_nr);
	void (*uring_exit)(struct io_uring *ring);
	/* eventfd(2) with EFD_CLOEXEC | EFD_NONBLOCK, and read/write of its counter */
	int (*eventfd)(unsigned initval);
	ssize_t (*read)(int fd, void *buf, size_t len);
	ssize_t (*write)(int fd, const void *buf, size_t len);
	/* posix_fadvise (returns 0 or a negative errno) */
	int (*fadvise)(int fd, off_t off, off_t len, int advice);

	/* lseek(2); used only to learn a data file's largest size (SEEK_SET
	 * past the filesystem's limit fails with EINVAL).  May be NULL in a
	 * test backend: the limit is then taken to be 2^62. */
	off_t (*lseek)(int fd, off_t off, int whence);

	/* getrlimit(2); used only to word a message (recovery out of
	 * descriptors).  May be NULL in a test backend. */
	int (*getrlimit)(int resource, struct rlimit *rl);

	/* The names in a directory (readdir(3), without "." and ".."): fn is
	 * called for each, stopping early when it returns nonzero.  0 or a
	 * negative errno.  Used to find the log's stale temporary files; NULL
	 * in a test backend: none are swept. */
	int (*listdir)(const char *dir, int (*fn)(void *arg, const char *name), void *arg);
	/* sync_file_range(2) (returns 0 or a negative errno).  Used only with
	 * SYNC_FILE_RANGE_WRITE, to START the write-back of home writes early
	 * (writeback.c): it makes nothing durable, and atomio never counts on
	 * it for durability.  May be NULL: no early write-back then. */
	int (*sync_file_range)(int fd, off_t off, off_t len, unsigned flags);

	/* --- added for the log's lazy zeroing (logfile.c) --- */
	/* fallocate(2) (0 or a negative errno).  Used with mode 0, to give a
	 * new log its blocks without writing them, and with
	 * FALLOC_FL_WRITE_ZEROES (Linux 6.17+), to have its record area
	 * written with zeros by the device without moving them (-EOPNOTSUPP
	 * where the kernel, filesystem or device cannot).  May be NULL: the
	 * whole log is written with zeros at creation then. */
	int (*fallocate)(int fd, int mode, off_t off, off_t len);
	/* Where, in [off, off + len) of fd, the first block that the
	 * filesystem holds as allocated but never written (an unwritten
	 * extent) or not allocated at all (a hole) begins, from FIEMAP; off +
	 * len when there is none.  0 or a negative errno (-EOPNOTSUPP where the
	 * filesystem has no FIEMAP).  May be NULL: the log is then taken to be
	 * written whole. */
	int (*unwritten_from)(int fd, uint64_t off, uint64_t len, uint64_t *first);

	/* --- added for stores shared by several processes (shm.c) --- */
	/* Map len bytes of fd shared and read-write at *out (the file is at
	 * least that long); fd -1: anonymous shared memory.  The mapping is not
	 * inherited by a forked child (MADV_DONTFORK).  0 or a negative errno.
	 * May be NULL: a store is then exclusive (one process) and keeps its
	 * shared state in memory of its own. */
	int (*shm_map)(int fd, size_t len, void **out);
	int (*shm_unmap)(void *p, size_t len);
	/* Open-file-description byte-range locks (fcntl F_OFD_*): type F_RDLCK,
	 * F_WRLCK or F_UNLCK on [start, start + len) of fd.  cmd SYS_LK_SET
	 * (-EAGAIN when another description holds a conflicting lock),
	 * SYS_LK_WAIT (waits for it), SYS_LK_TEST (0 when the lock could be
	 * taken now, -EAGAIN when another description holds a conflicting one;
	 * takes nothing).  Locks held by a description go when its last
	 * descriptor is closed, so when its process dies.  May be NULL only
	 * with shm_map NULL. */
	int (*ofd_lock)(int fd, int cmd, int type, uint64_t start, uint64_t len);
	/* futex(2) on a 32-bit word of shared memory: wait while *word == val,
	 * at most timeout_ns (0 = no bound); wake up to n waiters.  The wait
	 * returns 0, or -ETIMEDOUT / -EAGAIN / -EINTR (all mean: look again).
	 * May be NULL: the real futex is called (it does no I/O). */
	int (*futex_wait)(_Atomic uint32_t *word, uint32_t val, uint64_t timeout_ns);
	int (*futex_wake)(_Atomic uint32_t *word, int n);
	/* Is there a process pid (kill(pid, 0))?  1 yes (or unknown), 0 gone.
	 * Only to tell a store whose every process is gone -- its files still
	 * held while the kernel finishes their io_uring requests -- from one in
	 * use (store.c).  May be NULL: always yes. */
	int (*pid_alive)(int pid);
	/* io_uring_register_files: the ring holds the open file descriptions
	 * of fds until it is torn down, which is after its last request ended
	 * (engine_uring.c, ring_new, says why).  uring_exit unregisters them
	 * first.  May be NULL: -ENOSYS, and the store writes the plain way. */
	int (*uring_register_files)(struct io_uring *ring, const int *fds, unsigned n);
	/* dup3(2): atomio_file_fd puts a file registered anew under the number
	 * of the application's descriptor of the old one (files.c,
	 * file_fd_follow).  May be NULL: -ENOSYS, and the number keeps naming
	 * the old file. */
	int (*dup3)(int oldfd, int newfd, int flags);
};

#define SYS_LK_SET 0
#define SYS_LK_WAIT 1
#define SYS_LK_TEST 2

/* FALLOC_FL_WRITE_ZEROES (Linux 6.17, include/uapi/linux/falloc.h), for
 * older headers: an older kernel refuses the unknown mode (EOPNOTSUPP). */
#ifndef FALLOC_FL_WRITE_ZEROES
#define FALLOC_FL_WRITE_ZEROES 0x80
#endif

/* Bytes of a new log's record area that log_create writes with zeros before
 * the log is renamed into place (logfile.c); the rest, if any, is zeroed by
 * the checkpointer ahead of the records.  Default LOG_ZERO_CREATE (1 GiB,
 * the default log); the crash simulator and t_log_zero set 0 (one zeroing
 * unit only) to exercise the lazy zeroing with small logs.  Set it before
 * any store is opened. */
extern uint64_t atomio_log_zero_create;

/* The table in use; the default is atomio_sys_linux. */
extern const struct atomio_sysops *atomio_sys;
extern const struct atomio_sysops atomio_sys_linux;

/* Install a backend (tests).  NULL restores the default.  Returns the old one. */
const struct atomio_sysops *atomio_sys_set(const struct atomio_sysops *ops);

/* Read exactly len bytes at off, retrying EINTR and short reads.  Returns the
 * bytes read (less than len only at end of file) or a negative errno. */
ssize_t sys_pread_full(int fd, void *buf, size_t len, off_t off);

/* Write the whole iovec at off, retrying EINTR and short writes.  With
 * RWF_DSYNC each piece is durable when its call returns, so a retried
 * remainder is durable too.  Returns 0 or a negative errno. */
int sys_pwritev_full(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf);
int sys_pwrite_full(int fd, const void *buf, size_t len, off_t off, int rwf);

/* The engine's entries, NULL-safe (-ENOSYS where a backend lacks them). */
int sys_uring_init(unsigned entries, struct io_uring *ring);
int sys_uring_enter(struct io_uring *ring, unsigned wait_nr);
void sys_uring_exit(struct io_uring *ring);
int sys_uring_register_files(struct io_uring *ring, const int *fds, unsigned n);
int sys_eventfd(unsigned initval);
ssize_t sys_read(int fd, void *buf, size_t len);
ssize_t sys_write(int fd, const void *buf, size_t len);
int sys_fadvise(int fd, off_t off, off_t len, int advice);
int sys_getrlimit(int resource, struct rlimit *rl);
int sys_dup3(int oldfd, int newfd, int flags);
int sys_listdir(const char *dir, int (*fn)(void *arg, const char *name), void *arg);
int sys_sync_file_range(int fd, off_t off, off_t len, unsigned flags);
int sys_fallocate(int fd, int mode, off_t off, off_t len);
int sys_unwritten_from(int fd, uint64_t off, uint64_t len, uint64_t *first);
int sys_ofd_lock(int fd, int cmd, int type, uint64_t start, uint64_t len);
int sys_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t timeout_ns);
int sys_futex_wake(_Atomic uint32_t *word, int n);

/* Write the whole buffer at off, durable when it returns: RWF_DSYNC, or where
 * the kernel or filesystem refuses it (EOPNOTSUPP: Linux before 4.7, some
 * FUSE filesystems) a plain write and fdatasync.  Returns 0 or a negative
 * errno. */
int sys_pwrite_durable(int fd, const void *buf, size_t len, off_t off);

/* fsync / fdatasync / ftruncate, retrying EINTR.  0 or a negative errno. */
int sys_fsync_full(int fd);
int sys_fdatasync_full(int fd);
int sys_ftruncate_full(int fd, off_t size);

/* fsync a directory by path (used after creating or renaming an entry in it). */
int sys_fsync_dir(const char *dir);

#endif
