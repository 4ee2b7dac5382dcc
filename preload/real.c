/*
 * real.c: the libc functions under the wrappers, and the store's ops table.
 *
 * The store (libatomio, linked into this library) makes its system calls
 * through atomio_sys (src/sys.h).  The default table calls libc's open,
 * pwritev2, close, ... by name, which in a preloaded library would be our own
 * wrappers: harmless for descriptors the table does not know, but a hidden
 * recursion nonetheless.  So the store gets a table of its own whose entries
 * call the functions dlsym(RTLD_NEXT) found, and never a wrapper.
 *
 * ATOMIO_PRELOAD_TRACE=PATH (tests only, see test/t_preload_sim.c) records
 * every mutating call of the store (open, write, size change, sync, rename,
 * unlink, close) with its data, plus markers of what the program was told
 * (a write returned, a sync returned), so that the crash simulator can replay
 * the run and cut power anywhere in it.  While tracing, each call and its
 * record are made under one lock, so the trace is an order the calls really
 * had.
 */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"
#include "sys.h"

struct real_fns real;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

#define R(name) real.name = (__typeof__(real.name))dlsym(RTLD_NEXT, #name)

static void resolve(void)
{
	R(open); R(openat); R(close); R(close_range); R(read); R(write); R(pread); R(pwrite);
	R(readv); R(writev); R(preadv2); R(pwritev2); R(lseek); R(fsync); R(fdatasync);
	R(sync_file_range); R(syncfs); R(sync); R(ftruncate); R(truncate); R(fallocate);
	R(posix_fallocate); R(fstat); R(stat); R(dup); R(dup2); R(dup3); R(fcntl); R(mmap); R(munmap);
	R(msync); R(renameat2); R(rename); R(renameat); R(unlink); R(unlinkat); R(link);
	R(execve); R(execvpe); R(fexecve); R(copy_file_range); R(sendfile); R(splice);
	R(fopen); R(fdopen); R(freopen);
}

void real_init(void)
{
	pthread_once(&real_once, resolve);
}

/* --- trace ------------------------------------------------------------------ */

static int tr_fd = -1;
static pthread_mutex_t tr_mu = PTHREAD_MUTEX_INITIALIZER;

void real_trace_open(const char *path)
{
	real_init();
	tr_fd = real.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (tr_fd < 0)
		pl_msg(path, "cannot open the trace: %s", strerror(errno));
}

static void tr_rec(uint32_t kind, int fd, int flags, uint64_t a, uint64_t b, const char *path,
		   size_t pathlen, const struct iovec *iov, int iovcnt)
{
	tr_write(real.write, tr_fd, kind, fd, flags, a, b, path, pathlen, iov, iovcnt);
}

void real_trace_mark(int kind, uint64_t a, uint64_t b)
{
	if (tr_fd < 0)
		return;
	pthread_mutex_lock(&tr_mu);
	tr_rec((uint32_t)kind, -1, 0, a, b, NULL, 0, NULL, 0);
	pthread_mutex_unlock(&tr_mu);
}

#define TLOCK() do { if (tr_fd >= 0) pthread_mutex_lock(&tr_mu); } while (0)
#define TUNLOCK() do { if (tr_fd >= 0) pthread_mutex_unlock(&tr_mu); } while (0)
#define TRACING (tr_fd >= 0)

/* A shared store's state in /dev/shm (src/shm.c, shm_where_of) is memory:
 * a power cut takes it whole, recovery never reads it, so the crash
 * simulator has nothing of it to replay.  Its descriptors are not traced
 * (every process of the one mode has one, issue 36).  Under tr_mu. */
#define TR_FDS 65536
static uint8_t tr_mem[TR_FDS];
static bool traced(int fd) { return TRACING && !(fd >= 0 && fd < TR_FDS && tr_mem[fd]); }

/* --- the store's table -------------------------------------------------------- */

static int op_open(const char *path, int flags, mode_t mode)
{
	TLOCK();
	int fd = real.open(path, flags, mode);
	int r = fd < 0 ? -errno : fd;
	if (r >= 0)
		pl_store_fd(r, true);
	if (r >= 0 && r < TR_FDS && TRACING)
		tr_mem[r] = !strncmp(path, "/dev/shm/", 9);
	if (r >= 0 && traced(r))
		tr_rec(TR_OPEN, fd, flags, mode, 0, path, strlen(path) + 1, NULL, 0);
	TUNLOCK();
	return r;
}

static int op_close(int fd)
{
	TLOCK();
	pl_store_fd(fd, false);
	/* Linux releases the descriptor even when close reports EINTR. */
	int r = real.close(fd) < 0 ? -errno : 0;
	if (traced(fd))
		tr_rec(TR_CLOSE, fd, 0, 0, 0, NULL, 0, NULL, 0);
	if (TRACING && fd >= 0 && fd < TR_FDS)
		tr_mem[fd] = 0;
	TUNLOCK();
	return r;
}

static ssize_t op_pread(int fd, void *buf, size_t len, off_t off)
{
	ssize_t n = real.pread(fd, buf, len, off);
	return n < 0 ? -errno : n;
}

static ssize_t op_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	TLOCK();
	ssize_t n = real.pwritev2(fd, iov, iovcnt, off, rwf);
	ssize_t r = n < 0 ? -errno : n;
	if (r > 0 && traced(fd)) {
		/* Only the part written (a short write is retried by the caller). */
		struct iovec part[64];
		int k = 0;
		size_t left = (size_t)r;
		for (int i = 0; i < iovcnt && left && k < 64; i++, k++) {
			part[k] = iov[i];
			if (part[k].iov_len > left)
				part[k].iov_len = left;
			left -= part[k].iov_len;
		}
		if (left)
			abort(); /* more than 64 pieces: the store never writes those */
		tr_rec(TR_WRITE, fd, rwf, (uint64_t)off, 0, NULL, 0, part, k);
	}
	TUNLOCK();
	return r;
}

static int op_sync(int fd, bool data)
{
	TLOCK();
	int r = (data ? real.fdatasync(fd) : real.fsync(fd)) < 0 ? -errno : 0;
	if (r == 0 && traced(fd))
		tr_rec(data ? TR_FDATASYNC : TR_FSYNC, fd, 0, 0, 0, NULL, 0, NULL, 0);
	TUNLOCK();
	return r;
}
static int op_fsync(int fd) { return op_sync(fd, false); }
static int op_fdatasync(int fd) { return op_sync(fd, true); }

static int op_ftruncate(int fd, off_t size)
{
	TLOCK();
	int r = real.ftruncate(fd, size) < 0 ? -errno : 0;
	if (r == 0 && traced(fd))
		tr_rec(TR_TRUNC, fd, 0, (uint64_t)size, 0, NULL, 0, NULL, 0);
	TUNLOCK();
	return r;
}

static int op_fstat(int fd, struct stat *st) { return real.fstat(fd, st) < 0 ? -errno : 0; }

static void tr_rename(const char *from, const char *to)
{
	size_t a = strlen(from) + 1, b = strlen(to) + 1;
	char *both = malloc(a + b);
	if (!both)
		abort();
	memcpy(both, from, a);
	memcpy(both + a, to, b);
	tr_rec(TR_RENAME, -1, 0, 0, 0, both, a + b, NULL, 0);
	free(both);
}

static int op_rename_noreplace(const char *from, const char *to)
{
	TLOCK();
	int r = 0;
	if (real.renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) < 0) {
		r = -errno;
		if (r == -EINVAL || r == -ENOSYS) {
			/* Filesystem without RENAME_NOREPLACE: link() refuses an
			 * existing target just the same. */
			r = real.link(from, to) < 0 ? -errno : (real.unlink(from) < 0 ? -errno : 0);
		}
	}
	if (r == 0 && TRACING)
		tr_rename(from, to);
	TUNLOCK();
	return r;
}

static int op_unlink(const char *path)
{
	TLOCK();
	int r = real.unlink(path) < 0 ? -errno : 0;
	if (r == 0 && TRACING && strncmp(path, "/dev/shm/", 9)) /* not a shared state's (tr_mem) */
		tr_rec(TR_UNLINK, -1, 0, 0, 0, path, strlen(path) + 1, NULL, 0);
	TUNLOCK();
	return r;
}

static ssize_t op_read(int fd, void *buf, size_t len)
{
	ssize_t n = real.read(fd, buf, len);
	return n < 0 ? -errno : n;
}

static ssize_t op_write(int fd, const void *buf, size_t len)
{
	/* Only the store's eventfd is written this way. */
	ssize_t n = real.write(fd, buf, len);
	return n < 0 ? -errno : n;
}

static off_t op_lseek(int fd, off_t off, int whence)
{
	off_t r = real.lseek(fd, off, whence);
	return r < 0 ? -errno : r;
}

/* The paced write-back's SYNC_FILE_RANGE_WRITE (src/writeback.c): it makes
 * nothing durable, so the trace has no record of it. */
static int op_sync_file_range(int fd, off_t off, off_t len, unsigned flags)
{
	return real.sync_file_range(fd, off, len, flags) < 0 ? -errno : 0;
}

/* A new log's blocks (src/logfile.c): a size change the trace must show. */
static int op_fallocate(int fd, int mode, off_t off, off_t len)
{
	TLOCK();
	int r = real.fallocate(fd, mode, off, len) < 0 ? -errno : 0;
	if (r == 0 && traced(fd))
		tr_rec(TR_FALLOC, fd, mode, (uint64_t)off, (uint64_t)len, NULL, 0, NULL, 0);
	TUNLOCK();
	return r;
}

/* A shared store's state (src/shm.c): its mapping, its lock bytes, its
 * waits and the liveness probe, through the real functions: mmap and fcntl
 * are wrapped here (harmless for the store's descriptors, but a hidden
 * recursion through the descriptor table), and a table without shm_map or
 * ofd_lock would make every store exclusive without a word. */
static int op_shm_map(int fd, size_t len, void **out)
{
	void *p = real.mmap(NULL, len, PROT_READ | PROT_WRITE,
			    fd < 0 ? MAP_SHARED | MAP_ANONYMOUS : MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	/* A forked child gets no copy (a store belongs to its process). */
	(void)madvise(p, len, MADV_DONTFORK);
	*out = p;
	return 0;
}

static int op_shm_unmap(void *p, size_t len) { return real.munmap(p, len) < 0 ? -errno : 0; }

static int op_ofd_lock(int fd, int cmd, int type, uint64_t start, uint64_t len)
{
	struct flock fl = {.l_type = (short)type, .l_whence = SEEK_SET, .l_start = (off_t)start,
			   .l_len = (off_t)len};
	if (cmd == SYS_LK_TEST) {
		if (real.fcntl(fd, F_OFD_GETLK, &fl) < 0)
			return -errno;
		return fl.l_type == F_UNLCK ? 0 : -EAGAIN;
	}
	if (real.fcntl(fd, cmd == SYS_LK_WAIT ? F_OFD_SETLKW : F_OFD_SETLK, &fl) < 0)
		return errno == EACCES ? -EAGAIN : -errno;
	return 0;
}

/* The store's eventfd (src/async.c) is one of its descriptors too: marked,
 * so that the program's close, close_range and dup2 leave it alone. */
static int op_eventfd(unsigned initval)
{
	int fd = atomio_sys_linux.eventfd(initval);
	if (fd >= 0)
		pl_store_fd(fd, true);
	return fd;
}

/* The store's lstat: the real one, not the wrapper (which looks the file
 * up and may take a file's lock the store's caller already holds). */
static int op_lstat(const char *path, struct stat *st)
{
	static int (*next)(const char *, struct stat *);
	if (!next)
		next = (int (*)(const char *, struct stat *))dlsym(RTLD_NEXT, "lstat");
	return next(path, st) < 0 ? -errno : 0;
}

static struct atomio_sysops preload_ops;

void real_install_ops(void)
{
	real_init();
	/* the linux table's own: the futex and liveness calls, which this
	 * library does not wrap (no real.* needed) */
	preload_ops = atomio_sys_linux;
	preload_ops.name = "preload";
	preload_ops.open = op_open;
	preload_ops.close = op_close;
	preload_ops.pread = op_pread;
	preload_ops.pwritev = op_pwritev;
	preload_ops.fsync = op_fsync;
	preload_ops.fdatasync = op_fdatasync;
	preload_ops.ftruncate = op_ftruncate;
	preload_ops.fstat = op_fstat;
	preload_ops.rename_noreplace = op_rename_noreplace;
	preload_ops.unlink = op_unlink;
	preload_ops.read = op_read;
	preload_ops.write = op_write;
	preload_ops.lseek = op_lseek;
	preload_ops.sync_file_range = op_sync_file_range;
	preload_ops.fallocate = op_fallocate;
	preload_ops.shm_map = op_shm_map;
	preload_ops.shm_unmap = op_shm_unmap;
	preload_ops.ofd_lock = op_ofd_lock;
	preload_ops.eventfd = op_eventfd;
	preload_ops.lstat = op_lstat;
	/* No io_uring: its writes would escape the trace, and the default
	 * engine takes it only for ATOMIO_DIRECT_HOME stores anyway. */
	preload_ops.uring_init = NULL;
	preload_ops.uring_enter = NULL;
	preload_ops.uring_exit = NULL;
	atomio_sys_set(&preload_ops);
}
