/*
 * faultsys.c: the fault-injecting ops backend (see faultsys.h).
 */
#include "faultsys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "sys.h"

static struct fault_plan plan;
static bool armed, fired, sync_err;
static uint64_t calls[FOP_COUNT];
static uint64_t total_injected;
static uint64_t refuse_dsync_from;

/* Should this call of op fail?  Counts it either way. */
static bool hit(enum fault_op op)
{
	uint64_t n = calls[op]++;
	if (!armed || plan.kind == FK_NONE || op != plan.op)
		return false;
	if (n == plan.nth || (plan.persist && n > plan.nth)) {
		if (!fired)
			fired = true;
		total_injected++;
		return true;
	}
	return false;
}

static const struct atomio_sysops *real = &atomio_sys_linux;

/* The error to return for an injected failure of this kind. */
static int inj_err(void) { return plan.kind == FK_EINTR ? -EINTR : -plan.err; }

static int f_open(const char *path, int flags, mode_t mode)
{
	if (!hit(FOP_OPEN))
		return real->open(path, flags, mode);
	if (plan.kind == FK_ERROR_AFTER) {
		int fd = real->open(path, flags, mode);
		if (fd >= 0)
			real->close(fd); /* opened (maybe created), then "failed" */
	}
	return inj_err();
}

static int f_close(int fd)
{
	if (!hit(FOP_CLOSE))
		return real->close(fd);
	/* Linux releases the descriptor even when close reports an error. */
	real->close(fd);
	return plan.kind == FK_EINTR ? -EINTR : -plan.err;
}

static bool is_direct(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl >= 0 && (fl & O_DIRECT);
}

/* How much of len a short transfer moves: about half, whole 4096-byte
 * blocks on an O_DIRECT descriptor; 0 when no shorter transfer is possible. */
static size_t short_len(int fd, size_t len)
{
	size_t h = len / 2;
	if (is_direct(fd))
		h = h / 4096 * 4096;
	return h;
}

static ssize_t f_pread(int fd, void *buf, size_t len, off_t off)
{
	if (!hit(FOP_PREAD))
		return real->pread(fd, buf, len, off);
	if (plan.kind == FK_SHORT) {
		size_t h = short_len(fd, len);
		return real->pread(fd, buf, h ? h : len, off);
	}
	if (plan.kind == FK_ERROR_AFTER)
		real->pread(fd, buf, len, off);
	return inj_err();
}

static ssize_t f_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	if (refuse_dsync_from && (rwf & RWF_DSYNC) && (uint64_t)off >= refuse_dsync_from)
		return -EOPNOTSUPP;
	if (!hit(FOP_PWRITEV))
		return real->pwritev(fd, iov, iovcnt, off, rwf);
	if (plan.kind == FK_SHORT) {
		size_t total = 0;
		for (int i = 0; i < iovcnt; i++)
			total += iov[i].iov_len;
		size_t h = short_len(fd, total);
		if (!h)
			return real->pwritev(fd, iov, iovcnt, off, rwf);
		struct iovec *v = malloc(sizeof(*v) * (size_t)iovcnt);
		if (!v)
			return -ENOMEM;
		int n = 0;
		for (size_t left = h; n < iovcnt && left; n++) {
			v[n] = iov[n];
			if (v[n].iov_len > left)
				v[n].iov_len = left;
			left -= v[n].iov_len;
		}
		ssize_t r = real->pwritev(fd, v, n, off, rwf);
		free(v);
		return r;
	}
	if (plan.kind == FK_ERROR_AFTER) {
		ssize_t r = real->pwritev(fd, iov, iovcnt, off, rwf);
		(void)r;
	}
	if ((rwf & RWF_DSYNC) && plan.kind != FK_EINTR)
		sync_err = true;
	return inj_err();
}

static int f_fsync(int fd)
{
	if (!hit(FOP_FSYNC))
		return real->fsync(fd);
	if (plan.kind == FK_ERROR_AFTER)
		real->fsync(fd);
	if (plan.kind != FK_EINTR)
		sync_err = true;
	return inj_err();
}

static int f_fdatasync(int fd)
{
	if (!hit(FOP_FDATASYNC))
		return real->fdatasync(fd);
	if (plan.kind == FK_ERROR_AFTER)
		real->fdatasync(fd);
	if (plan.kind != FK_EINTR)
		sync_err = true;
	return inj_err();
}

static int f_ftruncate(int fd, off_t size)
{
	if (!hit(FOP_FTRUNCATE))
		return real->ftruncate(fd, size);
	if (plan.kind == FK_ERROR_AFTER)
		real->ftruncate(fd, size);
	return inj_err();
}

#define SIMPLE(name, OP, proto, args)                 \
	static int f_##name proto                     \
	{                                             \
		if (!hit(OP))                         \
			return real->name args;       \
		if (plan.kind == FK_ERROR_AFTER)      \
			real->name args;              \
		return inj_err();                     \
	}

SIMPLE(fstat, FOP_FSTAT, (int fd, struct stat *st), (fd, st))
SIMPLE(lstat, FOP_LSTAT, (const char *path, struct stat *st), (path, st))
SIMPLE(fstatfs, FOP_FSTATFS, (int fd, struct statfs *s), (fd, s))
SIMPLE(statx, FOP_STATX, (int dirfd, const char *path, int flags, unsigned mask, struct atomio_statx *stx),
       (dirfd, path, flags, mask, stx))
SIMPLE(flock, FOP_FLOCK, (int fd, int op), (fd, op))
SIMPLE(rename_noreplace, FOP_RENAME, (const char *from, const char *to), (from, to))
SIMPLE(unlink, FOP_UNLINK, (const char *path), (path))
SIMPLE(getrandom, FOP_GETRANDOM, (void *buf, size_t len), (buf, len))
SIMPLE(realpath, FOP_REALPATH, (const char *path, char *out), (path, out))
SIMPLE(fallocate, FOP_FALLOCATE, (int fd, int mode, off_t off, off_t len), (fd, mode, off, len))

SIMPLE(ofd_lock, FOP_OFDLOCK, (int fd, int cmd, int type, uint64_t start, uint64_t len),
       (fd, cmd, type, start, len))

static int f_shm_map(int fd, size_t len, void **out) { return real->shm_map(fd, len, out); }
static int f_shm_unmap(void *p, size_t len) { return real->shm_unmap(p, len); }

static off_t f_lseek(int fd, off_t off, int whence)
{
	if (!hit(FOP_LSEEK))
		return real->lseek(fd, off, whence);
	return inj_err();
}

static struct atomio_sysops fault_ops = {
	.name = "fault",
	.open = f_open,
	.close = f_close,
	.pread = f_pread,
	.pwritev = f_pwritev,
	.fsync = f_fsync,
	.fdatasync = f_fdatasync,
	.ftruncate = f_ftruncate,
	.fstat = f_fstat,
	.lstat = f_lstat,
	.fstatfs = f_fstatfs,
	.statx = f_statx,
	.flock = f_flock,
	.rename_noreplace = f_rename_noreplace,
	.unlink = f_unlink,
	.getrandom = f_getrandom,
	.realpath = f_realpath,
	.lseek = f_lseek,
	.fallocate = f_fallocate,
	/* the shared state: mapped as it is (memory, no I/O to fail); its lock
	 * bytes can be failed */
	.shm_map = f_shm_map,
	.shm_unmap = f_shm_unmap,
	.ofd_lock = f_ofd_lock,
};

void fault_install(void)
{
	real = &atomio_sys_linux;
	atomio_sys_set(&fault_ops);
}

void fault_uninstall(void)
{
	armed = false;
	atomio_sys_set(NULL);
}

void fault_arm(const struct fault_plan *p)
{
	plan = *p;
	armed = true;
	fired = sync_err = false;
	memset(calls, 0, sizeof(calls));
}

void fault_disarm(void) { armed = false; }
void fault_refuse_dsync_from(uint64_t off) { refuse_dsync_from = off; }

uint64_t fault_calls(enum fault_op op) { return op < FOP_COUNT ? calls[op] : 0; }
bool fault_fired(void) { return fired; }
bool fault_sync_error(void) { return sync_err; }
uint64_t fault_total_injected(void) { return total_injected; }

const char *fault_op_name(enum fault_op op)
{
	static const char *n[FOP_COUNT] = {"open",  "close", "pread", "pwritev", "fsync",  "fdatasync",
					   "ftruncate", "fstat", "lstat", "fstatfs", "statx", "flock",
					   "rename", "unlink", "getrandom", "realpath", "lseek",
					   "fallocate", "ofd_lock"};
	return op < FOP_COUNT ? n[op] : "?";
}

const char *fault_kind_name(enum fault_kind k)
{
	static const char *n[] = {"none", "error", "error-after", "EINTR", "short"};
	return k <= FK_SHORT ? n[k] : "?";
}
