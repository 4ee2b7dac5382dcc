/*
 * sysio.c: the VFS's own system calls (sysio.h): the f_* calls on files,
 * through libatomio's system-call table where it is linked in; the OFD
 * lock call (ofd) with its SQLite result code (lock_rc); and the sync of a
 * file's directory (sync_dir_of).  Nothing here knows a database or a
 * connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomio.h"
#include "sq.h"
#include "sysio.h"

/* --- files ---------------------------------------------------------------- */

/* atomio's system-call table.  Where this VFS is linked with libatomio's
 * objects (the loadable extension carries them; a program links
 * libatomio.a), the calls below go through it, so that a test's table
 * records, fails or crash-simulates them in one order with the store's own
 * (test/sqlite/t_sqlite_sim.c).  libatomio.so exports its public API only:
 * linked with it, the reference is null and the same calls go to the
 * system directly.  Every one returns a result >= 0 or a negative errno. */
extern const struct atomio_sysops *atomio_sys __attribute__((weak));

const struct atomio_sysops *os(void) { return &atomio_sys ? atomio_sys : NULL; }

static int f_neg(long r) { return r < 0 ? -errno : (int)r; }

int f_open(const char *path, int flags, mode_t mode)
{
	const struct atomio_sysops *s = os();
	return s ? s->open(path, flags, mode) : f_neg(open(path, flags, mode));
}

void f_close(int fd)
{
	const struct atomio_sysops *s = os();
	if (s)
		s->close(fd);
	else
		close(fd);
}

int f_fstat(int fd, struct stat *sb)
{
	const struct atomio_sysops *s = os();
	return s ? s->fstat(fd, sb) : f_neg(fstat(fd, sb));
}

/* flock, retrying EINTR. */
int f_flock(int fd, int op)
{
	const struct atomio_sysops *s = os();
	int r;
	do
		r = s ? s->flock(fd, op) : f_neg(flock(fd, op));
	while (r == -EINTR);
	return r;
}

int f_unlink(const char *path)
{
	const struct atomio_sysops *s = os();
	return s ? s->unlink(path) : f_neg(unlink(path));
}

/* Does path exist (as access(F_OK) sees it: symbolic links followed)?  0,
 * -ENOENT, or another negative errno. */
int f_exists(const char *path)
{
	const struct atomio_sysops *s = os();
	if (!s)
		return f_neg(access(path, F_OK));
	struct atomio_statx stx;
	return s->statx(AT_FDCWD, path, 0, 0, &stx);
}

/* Up to len bytes from offset off (fewer only at the end of the file),
 * retrying EINTR and short reads: the count or a negative errno. */
ssize_t f_pread_all(int fd, void *buf, size_t len, off_t off)
{
	const struct atomio_sysops *s = os();
	size_t done = 0;
	while (done < len) {
		ssize_t n = s ? s->pread(fd, (char *)buf + done, len - done, off + (off_t)done)
			      : pread(fd, (char *)buf + done, len - done, off + (off_t)done);
		if (n < 0 && !s)
			n = -errno;
		if (n == -EINTR)
			continue;
		if (n < 0)
			return n;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

ssize_t f_read_all(int fd, void *buf, size_t len) { return f_pread_all(fd, buf, len, 0); }

/* All of buf at offset off, retrying EINTR and short writes: 0 or < 0. */
int f_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const struct atomio_sysops *s = os();
	size_t done = 0;
	while (done < len) {
		struct iovec v = {(char *)buf + done, len - done};
		ssize_t n = s ? s->pwritev(fd, &v, 1, off + (off_t)done, 0) : pwritev(fd, &v, 1, off + (off_t)done);
		if (n < 0 && !s)
			n = -errno;
		if (n == -EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? (int)n : -EIO;
		done += (size_t)n;
	}
	return 0;
}

int f_write_all(int fd, const void *buf, size_t len) { return f_pwrite_all(fd, buf, len, 0); }

/* fdatasync, retrying EINTR. */
int f_fdatasync(int fd)
{
	const struct atomio_sysops *s = os();
	int r;
	do
		r = s ? s->fdatasync(fd) : f_neg(fdatasync(fd));
	while (r == -EINTR);
	return r;
}

int f_ftruncate(int fd, off_t size)
{
	const struct atomio_sysops *s = os();
	return s ? s->ftruncate(fd, size) : f_neg(ftruncate(fd, size));
}

/* fsync, retrying EINTR. */
int f_fsync(int fd)
{
	const struct atomio_sysops *s = os();
	int r;
	do
		r = s ? s->fsync(fd) : f_neg(fsync(fd));
	while (r == -EINTR);
	return r;
}

/* fsync a directory (after creating an entry in it). */
static int f_fsync_dir(const char *dir)
{
	int fd = f_open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	int r = f_fsync(fd);
	f_close(fd);
	return r;
}

/* The inode number at path (0: none).  statx asks for nothing else: a stat
 * that reads a file's times marks them seen, and Linux (6.13+) then stamps
 * every later write with fine-grained times (x_file_size says what that
 * costs). */
ino_t f_ino(const char *path)
{
	const struct atomio_sysops *s = os();
	if (!s) {
		struct statx sx;
		return statx(AT_FDCWD, path, 0, STATX_INO, &sx) < 0 ? 0 : (ino_t)sx.stx_ino;
	}
	struct atomio_statx sx;
	return s->statx(AT_FDCWD, path, 0, STATX_INO, &sx) < 0 ? 0 : (ino_t)sx.stx_ino;
}

/* The size of the file as its inode says, with a statx that asks for the
 * size only (f_ino says why no times); < 0: an error. */
int64_t f_size(int fd)
{
	const struct atomio_sysops *s = os();
	if (!s) {
		struct statx sx;
		return statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx) < 0 ? -1 : (int64_t)sx.stx_size;
	}
	struct atomio_statx sx;
	return s->statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx) < 0 ? -1 : (int64_t)sx.stx_size;
}

/* The birth time of path, where the filesystem keeps one. */
bool f_btime(const char *path, struct statx_timestamp *t)
{
	const struct atomio_sysops *s = os();
	if (!s) {
		struct statx sx;
		if (statx(AT_FDCWD, path, 0, STATX_BTIME, &sx) < 0 || !(sx.stx_mask & STATX_BTIME))
			return false;
		*t = sx.stx_btime;
		return true;
	}
	struct atomio_statx sx;
	if (s->statx(AT_FDCWD, path, 0, ATOMIO_STATX_BTIME, &sx) < 0 || !(sx.stx_mask & ATOMIO_STATX_BTIME))
		return false;
	memset(t, 0, sizeof(*t));
	t->tv_sec = sx.stx_btime.tv_sec;
	t->tv_nsec = sx.stx_btime.tv_nsec;
	return true;
}

/* --- OFD locks ------------------------------------------------------------ */

/* 0, -EAGAIN on a conflict, or another negative errno. */
int ofd(int fd, short type, off_t start, off_t len)
{
	if (fd < 0)
		return -EBADF; /* an inherited connection's (fork_child): no locks */
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
	int r;
	do
		r = fcntl(fd, F_OFD_SETLK, &fl);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return 0;
	return errno == EACCES ? -EAGAIN : -errno;
}

int lock_rc(int r, int ioerr) { return r == -EAGAIN ? SQLITE_BUSY : ioerr; }

int sync_dir_of(const char *path)
{
	char *dir = strdup(path);
	if (!dir)
		return -ENOMEM;
	char *sl = strrchr(dir, '/');
	if (sl)
		*(sl == dir ? sl + 1 : sl) = 0;
	int r = f_fsync_dir(sl ? dir : ".");
	free(dir);
	return r;
}
