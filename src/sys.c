/*
 * sys.c: the default (Linux) system-call table and the EINTR / short-I/O
 * helpers.  This is the single choke point where libc's "-1 and errno"
 * becomes atomio's "negative errno".
 */
#include "sys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <liburing.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#define NEG(expr) ((expr) < 0 ? -errno : 0)

static int lx_open(const char *path, int flags, mode_t mode)
{
	int fd = open(path, flags, mode);
	return fd < 0 ? -errno : fd;
}

static int lx_close(int fd)
{
	/* Linux always releases the descriptor, even when close reports EINTR;
	 * retrying could close a descriptor another thread just got. */
	return NEG(close(fd));
}

static ssize_t lx_pread(int fd, void *buf, size_t len, off_t off)
{
	ssize_t n = pread(fd, buf, len, off);
	return n < 0 ? -errno : n;
}

static ssize_t lx_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	ssize_t n = pwritev2(fd, iov, iovcnt, off, rwf);
	return n < 0 ? -errno : n;
}

static int lx_fsync(int fd) { return NEG(fsync(fd)); }
static int lx_fdatasync(int fd) { return NEG(fdatasync(fd)); }
static int lx_ftruncate(int fd, off_t size) { return NEG(ftruncate(fd, size)); }
static int lx_fstat(int fd, struct stat *st) { return NEG(fstat(fd, st)); }
static int lx_lstat(const char *path, struct stat *st) { return NEG(lstat(path, st)); }
static int lx_fstatfs(int fd, struct statfs *sfs) { return NEG(fstatfs(fd, sfs)); }

static int lx_statx(int dirfd, const char *path, int flags, unsigned mask, struct atomio_statx *stx)
{
	memset(stx, 0, sizeof(*stx));
	return NEG(syscall(SYS_statx, dirfd, path, flags, mask, stx));
}

static int lx_flock(int fd, int op) { return NEG(flock(fd, op)); }

static int lx_rename_noreplace(const char *from, const char *to)
{
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	/* Filesystem without RENAME_NOREPLACE: link() refuses an existing
	 * target just the same. */
	if (link(from, to) < 0)
		return -errno;
	return NEG(unlink(from));
}

static int lx_unlink(const char *path) { return NEG(unlink(path)); }

static int lx_getrandom(void *buf, size_t len)
{
	ssize_t n = getrandom(buf, len, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static int lx_realpath(const char *path, char *out)
{
	return realpath(path, out) ? 0 : -errno;
}

static int lx_uring_init(unsigned entries, struct io_uring *ring)
{
	/* liburing returns a negative errno itself (EPERM where io_uring is
	 * disabled by sysctl or seccomp, ENOSYS on kernels without it). */
	int r = io_uring_queue_init(entries, ring, 0);
	/* A forked child must not keep the ring: its mappings hold the ring's
	 * file, which holds the log's description and with it the parent's
	 * lock bytes (engine_uring.c, ring_new); the fork handler closes the
	 * child's descriptor of it. */
	if (r == 0 && (r = io_uring_ring_dontfork(ring)) < 0)
		io_uring_queue_exit(ring);
	return r;
}

static int lx_uring_enter(struct io_uring *ring, unsigned wait_nr)
{
	return io_uring_submit_and_wait(ring, wait_nr);
}

static void lx_uring_exit(struct io_uring *ring)
{
	/* Registered files are put now, while nothing is in flight: the
	 * ring's teardown after the close runs later, in a kernel worker, and
	 * the log's lock bytes must go with atomio_close itself. */
	(void)io_uring_unregister_files(ring);
	io_uring_queue_exit(ring);
}

static int lx_uring_register_files(struct io_uring *ring, const int *fds, unsigned n)
{
	return io_uring_register_files(ring, fds, n);
}

static int lx_eventfd(unsigned initval)
{
	int fd = eventfd(initval, EFD_CLOEXEC | EFD_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

static ssize_t lx_read(int fd, void *buf, size_t len)
{
	ssize_t n = read(fd, buf, len);
	return n < 0 ? -errno : n;
}

static ssize_t lx_write(int fd, const void *buf, size_t len)
{
	ssize_t n = write(fd, buf, len);
	return n < 0 ? -errno : n;
}

static int lx_fadvise(int fd, off_t off, off_t len, int advice)
{
	return -posix_fadvise(fd, off, len, advice); /* returns the error number itself */
}

static int lx_sync_file_range(int fd, off_t off, off_t len, unsigned flags)
{
	return sync_file_range(fd, off, len, flags) < 0 ? -errno : 0;
}

static int lx_fallocate(int fd, int mode, off_t off, off_t len)
{
	return NEG(fallocate(fd, mode, off, len));
}

/* FIEMAP, 32 extents at a time, from off on: the first gap between extents
 * (a hole) or extent flagged unwritten. */
static int lx_unwritten_from(int fd, uint64_t off, uint64_t len, uint64_t *first)
{
	enum { N = 32 };
	union {
		struct fiemap fm;
		char b[sizeof(struct fiemap) + N * sizeof(struct fiemap_extent)];
	} u;
	uint64_t pos = off, end = off + len;
	while (pos < end) {
		memset(&u, 0, sizeof(u));
		u.fm.fm_start = pos;
		u.fm.fm_length = end - pos;
		u.fm.fm_extent_count = N;
		if (ioctl(fd, FS_IOC_FIEMAP, &u.fm) < 0)
			return errno == ENOTTY ? -EOPNOTSUPP : -errno;
		if (u.fm.fm_mapped_extents == 0)
			break; /* a hole to the end */
		for (unsigned i = 0; i < u.fm.fm_mapped_extents; i++) {
			const struct fiemap_extent *e = &u.fm.fm_extents[i];
			if (e->fe_logical > pos || (e->fe_flags & FIEMAP_EXTENT_UNWRITTEN)) {
				*first = e->fe_logical > pos ? pos : e->fe_logical;
				if (*first < off)
					*first = off;
				return 0;
			}
			pos = e->fe_logical + e->fe_length;
			if ((e->fe_flags & FIEMAP_EXTENT_LAST) || pos >= end) {
				*first = pos >= end ? end : pos;
				return 0;
			}
		}
	}
	*first = pos < end ? pos : end;
	return 0;
}

static off_t lx_lseek(int fd, off_t off, int whence)
{
	off_t r = lseek(fd, off, whence);
	return r < 0 ? -errno : r;
}

static int lx_dup3(int oldfd, int newfd, int flags)
{
	return dup3(oldfd, newfd, flags) < 0 ? -errno : 0;
}

static int lx_getrlimit(int resource, struct rlimit *rl)
{
	return getrlimit(resource, rl) < 0 ? -errno : 0;
}

static int lx_listdir(const char *dir, int (*fn)(void *arg, const char *name), void *arg)
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	struct dirent *e;
	errno = 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && fn(arg, e->d_name))
			break;
	int r = e || !errno ? 0 : -errno;
	closedir(d);
	return r;
}

static int lx_shm_map(int fd, size_t len, void **out)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, fd < 0 ? MAP_SHARED | MAP_ANONYMOUS : MAP_SHARED,
		       fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	/* A forked child gets no copy of the mapping: a store belongs to the
	 * process that opened it (internal.h, FORK), and a stray write of the
	 * child's would land in every process's shared state. */
	(void)madvise(p, len, MADV_DONTFORK);
	*out = p;
	return 0;
}

static int lx_shm_unmap(void *p, size_t len) { return NEG(munmap(p, len)); }

static int lx_ofd_lock(int fd, int cmd, int type, uint64_t start, uint64_t len)
{
	struct flock fl = {.l_type = (short)type, .l_whence = SEEK_SET, .l_start = (off_t)start,
			   .l_len = (off_t)len};
	if (cmd == SYS_LK_TEST) {
		if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
			return -errno;
		return fl.l_type == F_UNLCK ? 0 : -EAGAIN;
	}
	int r = fcntl(fd, cmd == SYS_LK_WAIT ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
	if (r < 0 && (errno == EACCES))
		return -EAGAIN;
	return r < 0 ? -errno : 0;
}

static int lx_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t timeout_ns)
{
	struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000u),
			      .tv_nsec = (long)(timeout_ns % 1000000000u)};
	/* Not FUTEX_PRIVATE: the word is in memory shared between processes. */
	long r = syscall(SYS_futex, word, FUTEX_WAIT, val, timeout_ns ? &ts : NULL, NULL, 0);
	return r < 0 ? -errno : 0;
}

static int lx_futex_wake(_Atomic uint32_t *word, int n)
{
	long r = syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
	return r < 0 ? -errno : (int)r;
}

static int lx_pid_alive(int pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

const struct atomio_sysops atomio_sys_linux = {
	.name = "linux",
	.open = lx_open,
	.close = lx_close,
	.pread = lx_pread,
	.pwritev = lx_pwritev,
	.fsync = lx_fsync,
	.fdatasync = lx_fdatasync,
	.ftruncate = lx_ftruncate,
	.fstat = lx_fstat,
	.lstat = lx_lstat,
	.fstatfs = lx_fstatfs,
	.statx = lx_statx,
	.flock = lx_flock,
	.rename_noreplace = lx_rename_noreplace,
	.unlink = lx_unlink,
	.getrandom = lx_getrandom,
	.realpath = lx_realpath,
	.uring_init = lx_uring_init,
	.uring_enter = lx_uring_enter,
	.uring_exit = lx_uring_exit,
	.eventfd = lx_eventfd,
	.read = lx_read,
	.write = lx_write,
	.fadvise = lx_fadvise,
	.lseek = lx_lseek,
	.getrlimit = lx_getrlimit,
	.listdir = lx_listdir,
	.sync_file_range = lx_sync_file_range,
	.fallocate = lx_fallocate,
	.unwritten_from = lx_unwritten_from,
	.shm_map = lx_shm_map,
	.shm_unmap = lx_shm_unmap,
	.ofd_lock = lx_ofd_lock,
	.futex_wait = lx_futex_wait,
	.futex_wake = lx_futex_wake,
	.pid_alive = lx_pid_alive,
	.uring_register_files = lx_uring_register_files,
	.dup3 = lx_dup3,
};

const struct atomio_sysops *atomio_sys = &atomio_sys_linux;

const struct atomio_sysops *atomio_sys_set(const struct atomio_sysops *ops)
{
	const struct atomio_sysops *old = atomio_sys;
	atomio_sys = ops ? ops : &atomio_sys_linux;
	return old;
}

ssize_t sys_pread_full(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = atomio_sys->pread(fd, (char *)buf + done, len - done, off + (off_t)done);
		if (n == -EINTR)
			continue;
		if (n < 0)
			return n;
		if (n == 0)
			break; /* end of file */
		done += (size_t)n;
	}
	return (ssize_t)done;
}

#define IOV_STACK 16

int sys_pwritev_full(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	struct iovec stack[IOV_STACK], *v = stack;
	int cnt = iovcnt, ret = 0;

	if (iovcnt > IOV_STACK) {
		v = malloc(sizeof(*v) * (size_t)iovcnt);
		if (!v)
			return -ENOMEM;
	}
	memcpy(v, iov, sizeof(*v) * (size_t)iovcnt);
	struct iovec *cur = v;
	while (cnt > 0) {
		if (cur->iov_len == 0) {
			cur++;
			cnt--;
			continue;
		}
		ssize_t n = atomio_sys->pwritev(fd, cur, cnt, off, rwf);
		if (n == -EINTR)
			continue;
		if (n < 0) {
			ret = (int)n;
			break;
		}
		if (n == 0) {
			/* A write that makes no progress would loop forever. */
			ret = -EIO;
			break;
		}
		off += n;
		size_t left = (size_t)n;
		while (cnt > 0 && left >= cur->iov_len) {
			left -= cur->iov_len;
			cur++;
			cnt--;
		}
		if (cnt > 0 && left) {
			cur->iov_base = (char *)cur->iov_base + left;
			cur->iov_len -= left;
		}
	}
	if (v != stack)
		free(v);
	return ret;
}

int sys_pwrite_full(int fd, const void *buf, size_t len, off_t off, int rwf)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	return sys_pwritev_full(fd, &iov, 1, off, rwf);
}

int sys_uring_init(unsigned entries, struct io_uring *ring)
{
	return atomio_sys->uring_init ? atomio_sys->uring_init(entries, ring) : -ENOSYS;
}

int sys_uring_enter(struct io_uring *ring, unsigned wait_nr)
{
	return atomio_sys->uring_enter ? atomio_sys->uring_enter(ring, wait_nr) : -ENOSYS;
}

int sys_uring_register_files(struct io_uring *ring, const int *fds, unsigned n)
{
	return atomio_sys->uring_register_files ? atomio_sys->uring_register_files(ring, fds, n) : -ENOSYS;
}

void sys_uring_exit(struct io_uring *ring)
{
	if (atomio_sys->uring_exit)
		atomio_sys->uring_exit(ring);
}

int sys_eventfd(unsigned initval)
{
	return atomio_sys->eventfd ? atomio_sys->eventfd(initval) : -ENOSYS;
}

ssize_t sys_read(int fd, void *buf, size_t len)
{
	return atomio_sys->read ? atomio_sys->read(fd, buf, len) : -ENOSYS;
}

ssize_t sys_write(int fd, const void *buf, size_t len)
{
	return atomio_sys->write ? atomio_sys->write(fd, buf, len) : -ENOSYS;
}

int sys_fadvise(int fd, off_t off, off_t len, int advice)
{
	return atomio_sys->fadvise ? atomio_sys->fadvise(fd, off, len, advice) : -ENOSYS;
}

int sys_listdir(const char *dir, int (*fn)(void *arg, const char *name), void *arg)
{
	return atomio_sys->listdir ? atomio_sys->listdir(dir, fn, arg) : -ENOSYS;
}

int sys_dup3(int oldfd, int newfd, int flags)
{
	return atomio_sys->dup3 ? atomio_sys->dup3(oldfd, newfd, flags) : -ENOSYS;
}

int sys_getrlimit(int resource, struct rlimit *rl)
{
	return atomio_sys->getrlimit ? atomio_sys->getrlimit(resource, rl) : -ENOSYS;
}

int sys_sync_file_range(int fd, off_t off, off_t len, unsigned flags)
{
	return atomio_sys->sync_file_range ? atomio_sys->sync_file_range(fd, off, len, flags) : -ENOSYS;
}

int sys_fallocate(int fd, int mode, off_t off, off_t len)
{
	return atomio_sys->fallocate ? atomio_sys->fallocate(fd, mode, off, len) : -ENOSYS;
}

int sys_unwritten_from(int fd, uint64_t off, uint64_t len, uint64_t *first)
{
	return atomio_sys->unwritten_from ? atomio_sys->unwritten_from(fd, off, len, first) : -ENOSYS;
}

int sys_pwrite_durable(int fd, const void *buf, size_t len, off_t off)
{
	int r = sys_pwrite_full(fd, buf, len, off, RWF_DSYNC);
	if (r != -EOPNOTSUPP)
		return r;
	/* The flag is refused before anything is written; the same durability
	 * then takes a write and a flush. */
	r = sys_pwrite_full(fd, buf, len, off, 0);
	if (r == 0)
		r = sys_fdatasync_full(fd);
	return r;
}

/* EINTR: interrupted, nothing lost (the call either started no write-back
 * or will report its error again); so again, here and nowhere else. */
int sys_fsync_full(int fd)
{
	int r;
	do
		r = atomio_sys->fsync(fd);
	while (r == -EINTR);
	return r;
}

int sys_fdatasync_full(int fd)
{
	int r;
	do
		r = atomio_sys->fdatasync(fd);
	while (r == -EINTR);
	return r;
}

int sys_ftruncate_full(int fd, off_t size)
{
	int r;
	do
		r = atomio_sys->ftruncate(fd, size);
	while (r == -EINTR);
	return r;
}

int sys_fsync_dir(const char *dir)
{
	int fd = atomio_sys->open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	int r = sys_fsync_full(fd);
	atomio_sys->close(fd);
	return r;
}

int sys_ofd_lock(int fd, int cmd, int type, uint64_t start, uint64_t len)
{
	if (!atomio_sys->ofd_lock)
		return -ENOSYS;
	int r;
	do
		r = atomio_sys->ofd_lock(fd, cmd, type, start, len);
	while (r == -EINTR);
	return r;
}

int sys_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t timeout_ns)
{
	return (atomio_sys->futex_wait ? atomio_sys->futex_wait : lx_futex_wait)(word, val, timeout_ns);
}

int sys_futex_wake(_Atomic uint32_t *word, int n)
{
	return (atomio_sys->futex_wake ? atomio_sys->futex_wake : lx_futex_wake)(word, n);
}
