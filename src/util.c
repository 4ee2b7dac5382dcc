/*
 * util.c: small helpers every module of src/ may use, with no knowledge of
 * the log or the commit pipeline: the store's error text, aligned buffers,
 * threads and clocks, path and /proc helpers, sysfs queue attributes, the
 * public error names, the fork handler (internal.h, FORK) and the lock
 * checks' thread names (internal.h, LOCK CHECKS).  Lowest layer above sys.c
 * (docs/LAYOUT.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>

#include "internal.h"

void st_err(atomio *st, const char *fmt, ...)
{
	if (!st || !st->errbuf || !st->errbuf_size)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(st->errbuf, st->errbuf_size, fmt, ap);
	va_end(ap);
}

void *aligned_alloc_zero(size_t align, size_t size)
{
	void *p = NULL;
	if (posix_memalign(&p, align, size ? size : align))
		return NULL;
	memset(p, 0, size ? size : align);
	return p;
}

/* The directory part of path (".", "/" or a prefix), malloc'd; NULL if out of memory. */
char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

int thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	/* The store's threads take no signal: the application's handlers
	 * (PostgreSQL's, for one) expect to run on its own threads, and a
	 * handler that interrupts the checkpointer mid-sync must not be the
	 * first to know about it.  A new thread starts with its creator's
	 * mask: block everything around the create. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -r;
}

void cond_init_monotonic(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}

uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct timespec mono_deadline(uint64_t ns_from_now)
{
	uint64_t t = mono_ns() + ns_from_now;
	return (struct timespec){.tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u)};
}

int proc_reopen(int fd, int flags)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	return atomio_sys->open(p, flags, 0);
}

static uint32_t read_u32(const char *path)
{
	char buf[32];
	int fd = atomio_sys->open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	ssize_t n = sys_pread_full(fd, buf, sizeof(buf) - 1, 0);
	atomio_sys->close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	unsigned long long v = strtoull(buf, NULL, 10);
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

uint32_t sysfs_queue_u32(dev_t dev, const char *name)
{
	char path[160];
	unsigned ma = major(dev), mi = minor(dev);
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/%s", ma, mi, name);
	int fd = atomio_sys->open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) /* a partition: the queue belongs to its parent disk */
		snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../queue/%s", ma, mi, name);
	else
		atomio_sys->close(fd);
	return read_u32(path);
}

const char *atomio_strerror(int err)
{
	switch (err) {
	case 0:
		return "Success";
	case ATOMIO_ENOTLOG:
		return "Not an atomio log";
	case ATOMIO_EVERSION:
		return "Unsupported atomio log format version";
	case ATOMIO_ECORRUPT:
		return "atomio log is corrupt";
	case ATOMIO_EFAILED:
		return "Store failed after an I/O error; reopen it to recover";
	case ATOMIO_EIDENTITY:
		return "Data file is not the file registered with the store";
	case ATOMIO_EBADPATH:
		return "Path recorded in the log breaks atomio's path rules";
	case ATOMIO_EUNSAFE:
		return "atomio log is writable by other users";
	case ATOMIO_EUNKNOWN:
		return "Store failed during this commit; whether the group is durable is decided "
		       "when the store is reopened";
	}
	if (err < 0 && err > -4096)
		return strerror(-err);
	return "Unknown atomio error";
}

int array_grow(void *arr, size_t *cap, size_t elem)
{
	/* The pointer is copied in and out (memcpy), not read as a void *:
	 * it is a T *. */
	void *old, *v;
	memcpy(&old, arr, sizeof(old));
	size_t n = *cap ? 2 * *cap : 64;
	if (n > SIZE_MAX / elem || !(v = realloc(old, n * elem)))
		return -ENOMEM;
	memcpy(arr, &v, sizeof(v));
	*cap = n;
	return 0;
}

/* --- fork (internal.h, FORK) ------------------------------------------------ */

_Atomic unsigned atomio_fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
/* The log descriptors of the open stores, for fork_child: slot = fd + 1,
 * 0 free.  Lock-free, so that no handler takes a lock at the fork: a lock
 * held across it (pthread_atfork's prepare) would be taken before the
 * SQLite VFS's (whose handlers run later), while the VFS opens stores
 * holding its own, the other way round.  A store beyond the slots (4096
 * open at once) keeps its log descriptor in a child until exit or exec. */
#define FORK_SLOTS 4096
static _Atomic int fork_fds[FORK_SLOTS];

/* In the child: every store is the parent's from now on (st_forked), and
 * the child's copies of its log and shared-memory descriptors are closed, so
 * that they do not keep the parent's locks alive (internal.h, FORK).  close() is
 * async-signal-safe; nothing else of the store is touched. */
/* Opens of a log under way (fork_pending_begin): the file each opens,
 * known (ino != 0) from before the descriptor that will take the locks
 * exists.  A fork while one is under way copies a descriptor of it that no
 * slot of fork_fds names yet; the child closes its descriptors of that file,
 * found by device and inode among the first FORK_SCAN numbers (a new
 * descriptor takes the lowest free number). */
#define FORK_PENDING 16
#define FORK_SCAN 4096
static _Atomic int fork_pend_used[FORK_PENDING];
static _Atomic uint64_t fork_pend_dev[FORK_PENDING], fork_pend_ino[FORK_PENDING];

static void close_copies(uint64_t dev, uint64_t ino)
{
	for (int fd = 0; fd < FORK_SCAN; fd++) {
		struct stat sb;
		if (atomio_sys->fstat(fd, &sb) == 0 && (uint64_t)sb.st_dev == dev && (uint64_t)sb.st_ino == ino)
			atomio_sys->close(fd);
	}
}

static void fork_child(void)
{
	atomic_fetch_add(&atomio_fork_gen, 1);
	for (int i = 0; i < FORK_SLOTS; i++) {
		int v = atomic_exchange(&fork_fds[i], 0);
		if (v > 0)
			atomio_sys->close(v - 1);
	}
	for (int i = 0; i < FORK_PENDING; i++) {
		uint64_t ino = atomic_exchange(&fork_pend_ino[i], 0);
		if (atomic_exchange(&fork_pend_used[i], 0) && ino)
			close_copies(atomic_load(&fork_pend_dev[i]), ino);
	}
}

int fork_pending_begin(void)
{
	for (int i = 0; i < FORK_PENDING; i++) {
		int z = 0;
		if (atomic_compare_exchange_strong(&fork_pend_used[i], &z, 1))
			return i;
	}
	return -1;
}

void fork_pending_file(int slot, dev_t dev, ino_t ino)
{
	if (slot < 0)
		return;
	atomic_store(&fork_pend_dev[slot], (uint64_t)dev);
	atomic_store(&fork_pend_ino[slot], (uint64_t)ino); /* last: the child reads ino first */
}

void fork_pending_end(int slot)
{
	if (slot < 0)
		return;
	atomic_store(&fork_pend_ino[slot], 0);
	atomic_store(&fork_pend_used[slot], 0);
}
static void fork_register(void) { pthread_atfork(NULL, NULL, fork_child); }

unsigned fork_init(void)
{
	pthread_once(&fork_once, fork_register);
	return atomic_load(&atomio_fork_gen);
}

static int track_one(int fd)
{
	for (int i = 0; fd >= 0 && i < FORK_SLOTS; i++) {
		int z = 0;
		if (atomic_compare_exchange_strong(&fork_fds[i], &z, fd + 1))
			return i;
	}
	return -1;
}

void fork_track(atomio *st)
{
	if (st->fork_slot < 0)
		st->fork_slot = track_one(st->log_fd);
	if (st->fork_slot2 < 0)
		st->fork_slot2 = track_one(st->shm_fd);
}

int fork_track_fd(int fd) { return track_one(fd); }

void fork_untrack_fd(int slot)
{
	if (slot >= 0)
		atomic_store(&fork_fds[slot], 0);
}

/* Before the descriptors are closed: a slot never names a closed one. */
void fork_untrack(atomio *st)
{
	if (st->fork_slot >= 0)
		atomic_store(&fork_fds[st->fork_slot], 0);
	if (st->fork_slot2 >= 0)
		atomic_store(&fork_fds[st->fork_slot2], 0);
	st->fork_slot = st->fork_slot2 = -1;
}

int st_forked(atomio *st)
{
	if (atomic_load_explicit(&atomio_fork_gen, memory_order_relaxed) == st->fork_gen)
		return 0;
	st_err(st, "%s: this store was opened by the parent of this process (before a fork): a "
		   "child cannot use the parent's handle; open the log itself to join the store",
	       st->log_path);
	return -EPERM;
}

/* --- lock checks (internal.h, LOCK CHECKS) ------------------------------------ */

#ifdef ATOMIO_DEBUG
const int atomio_lock_checks = 1;
#else
const int atomio_lock_checks = 0;
#endif

static _Thread_local char dbg_token;
static _Thread_local unsigned dbg_depth; /* _locked functions this thread is in */

uintptr_t dbg_self(void) { return (uintptr_t)&dbg_token; }

int dbg_nodrop_enter(void)
{
	dbg_depth++;
	return 0;
}

void dbg_nodrop_leave(int *scope)
{
	(void)scope;
	dbg_depth--;
}

bool dbg_nodrop(void) { return dbg_depth != 0; }

int iov_total(const struct iovec *iov, int iovcnt, size_t *total)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt > 0 && !iov))
		return -EINVAL;
	size_t t = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -EINVAL;
		if (iov[i].iov_len > SSIZE_MAX - t)
			return -EINVAL;
		t += iov[i].iov_len;
	}
	*total = t;
	return 0;
}
