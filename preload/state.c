/*
 * state.c: configuration, the store's life, protected files and descriptors.
 *
 * ONE MODE (issue 36).  Every process of the program joins one store (no
 * ATOMIO_EXCLUSIVE; ATOMIO_SHARED is accepted and ignored): a forked child
 * joins with a handle of its own at its first write, a process that only
 * reads joins when it finds the store open (pl_reader_store).  Before main,
 * the constructor recovers the store when no process holds it: it opens it
 * (atomio_open replays every committed group) and closes it again.  The
 * store is opened for good by the first write, size change or writable open
 * of a protected file (pl_store): a shell that merely inherited LD_PRELOAD
 * never holds it.  Exec closes this process's handle (its lazy groups made
 * durable first, atomio_close); a rename or unlink of a protected path
 * checkpoints the whole store first (pl_shared_checkpoint) and closes this
 * process's handle, so that no record names a path that is about to change.
 *
 * WRITES are lazy groups (atomio_tx_commit_lazy): when write() returns the
 * group has its place in the store's commit order and every process's
 * atomio reads (atomio_preadv, atomio_file_size) return it; it becomes
 * durable at the next sync that covers it (fsync of the file in any
 * process, atomio_sync), at a durable commit after it, at close, or within
 * the store's lazy delay (ATOMIO_LAZY_MS).  Nothing is pending in this
 * process's memory: the store is the truth for every process, so reads of
 * a file with lazy groups not yet home go through atomio_preadv, and the
 * size through atomio_file_size (wrap.c).  O_SYNC/O_DSYNC descriptors and
 * RWF_SYNC/RWF_DSYNC commit durably (atomio_tx_commit).
 *
 * GROUP MODE (ATOMIO_GROUP=1, group.c) is a different contract, not a
 * speed mode: a file's writes between two syncs are one group held in this
 * process's memory, so it keeps one writing process (ATOMIO_EXCLUSIVE: a
 * second writer gets EBUSY, a forked child's writes EPERM), and commits
 * each group durably at its sync.
 */

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

#include "preload.h"

_Atomic(struct pofd *) *g_fdtab;
int g_fdtab_n;
bool g_active;
bool g_group;
bool g_multi;
static bool g_conflict; /* ATOMIO_SHARED=1 with ATOMIO_GROUP=1: refused */
static uint64_t g_lazy_us; /* ATOMIO_LAZY_MS in µs; 0 = the library's default (200 ms) */
uint64_t g_max_group;
int g_test_wdelay_ms;

static char g_log[PATH_MAX];      /* canonical path of ATOMIO_LOG */
static char **g_globs;
static int g_nglobs;
static uint64_t g_log_size = 64ull << 20; /* ATOMIO_LOG_SIZE; the man page's default */
static uint32_t g_flags;
static const char *g_stats_path;

/* Writer-preferring: once an exclusive caller (exec, rename, unlink, fork)
 * waits, new shared holds wait behind it, or threads that write and sync
 * without a pause keep it shared for as long as they run (dropin rwstarve:
 * a rename waited for all 1800 syncs of 6 threads).  Such a lock deadlocks
 * a thread that takes it shared twice while a writer waits, so only a
 * thread's outermost hold takes it (t_rw). */
static pthread_rwlock_t g_rw = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static pthread_mutex_t g_open_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* g_files, g_maps */
static atomio *_Atomic g_st;
static pid_t g_pid;           /* the process the store belongs to */
static bool g_forked;
static struct pfile *g_files;
static struct atomio_stats g_acc;  /* counters of stores already closed */
static struct atomio_lazy_stats g_lacc; /* the store's lazy counters, as last seen */
static struct atomio_stats g_base; /* the store's counters when this handle opened it */
static _Atomic(uint8_t) *g_storefds;

void pl_store_fd(int fd, bool mine)
{
	if (g_storefds && fd >= 0 && fd < g_fdtab_n)
		atomic_store(&g_storefds[fd], mine);
}

bool pl_is_store_fd(int fd)
{
	return g_storefds && fd >= 0 && fd < g_fdtab_n && atomic_load(&g_storefds[fd]);
}

/* The store's message buffer lives as long as the store: atomio writes the
 * cause of a failure of any later call there too (an open of a missing file:
 * "resolving PATH: No such file or directory").  A buffer on open_store's
 * stack was written after open_store returned, over whatever frame was
 * there then: PostgreSQL, which opens forks that may not exist read-write,
 * died of it in initdb (a saved return address overwritten with the text).
 * Static: one store at a time; a message of a concurrent failure may be
 * garbled, never written outside the buffer. */
static char g_store_err[512];

void pl_msg(const char *path, const char *fmt, ...)
{
	char buf[PATH_MAX + 512];
	int n = snprintf(buf, sizeof(buf), "atomio_preload: %s: ", path ? path : "(store)");
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	real_init();
	(void)!real.write(2, buf, (size_t)n);
}

/* --- paths ------------------------------------------------------------------- */

int pl_canon(int dirfd, const char *path, bool follow_last, char *out)
{
	char abs[PATH_MAX * 2];
	if (!path || !*path)
		return -1;
	if (path[0] == '/') {
		snprintf(abs, sizeof(abs), "%s", path);
	} else {
		char base[PATH_MAX];
		if (dirfd == AT_FDCWD) {
			if (!getcwd(base, sizeof(base)))
				return -1;
		} else {
			char link[64];
			snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
			ssize_t n = readlink(link, base, sizeof(base) - 1);
			if (n <= 0)
				return -1;
			base[n] = 0;
		}
		snprintf(abs, sizeof(abs), "%s/%s", base, path);
	}
	if (strlen(abs) >= PATH_MAX)
		return -1;
	if (follow_last && realpath(abs, out))
		return 0;
	/* Missing (O_CREAT), or the name itself (rename, unlink): the directory
	 * resolved, the last component kept. */
	size_t n = strlen(abs);
	while (n > 1 && abs[n - 1] == '/')
		abs[--n] = 0;
	char *slash = strrchr(abs, '/');
	const char *name = slash + 1;
	if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
		return -1;
	char dir[PATH_MAX];
	if (slash == abs)
		snprintf(dir, sizeof(dir), "/");
	else {
		*slash = 0;
		if (!realpath(abs, dir))
			return -1;
	}
	if (snprintf(out, PATH_MAX, "%s/%s", strcmp(dir, "/") ? dir : "", name) >= PATH_MAX)
		return -1;
	return 0;
}

bool pl_match(const char *canon)
{
	if (!g_active || !strcmp(canon, g_log))
		return false;
	const char *name = strrchr(canon, '/');
	name = name ? name + 1 : canon;
	for (int i = 0; i < g_nglobs; i++) {
		/* A pattern with a slash is matched against the whole canonical
		 * path, one without against the file's name. */
		const char *subject = strchr(g_globs[i], '/') ? canon : name;
		if (fnmatch(g_globs[i], subject, 0) == 0)
			return true;
	}
	return false;
}

static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return !strncmp(path, dir, n) && (path[n] == 0 || path[n] == '/');
}

bool pl_involves(const char *canon)
{
	if (pl_match(canon))
		return true;
	bool r = false;
	pthread_mutex_lock(&g_mu);
	for (struct pfile *f = g_files; f && !r; f = f->next)
		r = !f->orphan && f->reg_wanted && under(f->path, canon);
	pthread_mutex_unlock(&g_mu);
	return r;
}

/* --- descriptors ----------------------------------------------------------------- */

struct pofd *pofd_new(struct pfile *f, int flags)
{
	struct pofd *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	atomic_init(&o->refs, 1);
	atomic_fetch_add(&f->nopen, 1);
	o->f = f;
	o->flags = flags;
	o->forkgen = atomic_load(&g_forkgen);
	pthread_mutex_init(&o->pos_mu, NULL);
	return o;
}

void pofd_ref(struct pofd *o) { atomic_fetch_add(&o->refs, 1); }

void pofd_put(struct pofd *o)
{
	if (o && atomic_fetch_sub(&o->refs, 1) == 1) {
		if (atomic_fetch_sub(&o->f->nopen, 1) == 1 && g_group)
			grp_last_close(o->f);
		pthread_mutex_destroy(&o->pos_mu);
		free(o);
	}
}

/* A call on a descriptor uses its entry while another thread's close or
 * dup2 of the same number may drop the table's reference: the entry must
 * not be freed under it.  A caller takes its own reference (pofd_get), and
 * the load of the entry and that increment are one step against the
 * table's changes, which give up the table's reference only after the
 * entry left the table: both under one of these locks, chosen by the
 * descriptor's number (a few instructions each; the pass-through path, an
 * empty entry, takes none).  A fork child clears them (at_child): a thread
 * of the parent may have held one, and the child has only this thread. */
#define FDLK_N 64
static atomic_flag g_fdlk[FDLK_N];

static void fdlk(int fd)
{
	while (atomic_flag_test_and_set_explicit(&g_fdlk[fd % FDLK_N], memory_order_acquire))
		sched_yield();
}
static void fdunlk(int fd) { atomic_flag_clear_explicit(&g_fdlk[fd % FDLK_N], memory_order_release); }

static void fdlk_child(void)
{
	for (int i = 0; i < FDLK_N; i++)
		atomic_flag_clear(&g_fdlk[i]);
}

struct pofd *pofd_get(int fd)
{
	if (!pofd_of(fd))
		return NULL;
	fdlk(fd);
	struct pofd *o = atomic_load_explicit(&g_fdtab[fd], memory_order_acquire);
	if (o)
		pofd_ref(o);
	fdunlk(fd);
	return o;
}

int pofd_set(int fd, struct pofd *o)
{
	if (fd < 0 || fd >= g_fdtab_n) {
		pofd_put(o);
		return -1;
	}
	fdlk(fd);
	struct pofd *old = atomic_exchange(&g_fdtab[fd], o);
	fdunlk(fd);
	pofd_put(old);
	return 0;
}

void pofd_drop(int fd)
{
	if (fd < 0 || fd >= g_fdtab_n || !g_fdtab)
		return;
	fdlk(fd);
	struct pofd *old = atomic_exchange(&g_fdtab[fd], NULL);
	fdunlk(fd);
	pofd_put(old);
}

void pofd_drop_if(int fd, struct pofd *o)
{
	if (fd < 0 || fd >= g_fdtab_n || !g_fdtab)
		return;
	fdlk(fd);
	bool gone = atomic_compare_exchange_strong(&g_fdtab[fd], &o, NULL);
	fdunlk(fd);
	if (gone)
		pofd_put(o);
}

bool pofd_live(int fd, struct pofd *o)
{
	struct stat sb;
	int r = real.fstat(fd, &sb);
	if (r == 0 && sb.st_dev == o->f->dev && sb.st_ino == o->f->ino)
		return true;
	if (r == 0 || errno == EBADF) {
		/* The number was closed where no wrapper saw it (inside libc, a raw
		 * system call) and now names another file, or nothing: the entry
		 * is stale, and the call is the new file's. */
		pofd_drop_if(fd, o);
		return false;
	}
	return true; /* fstat itself failed (EINTR, ENOMEM): the entry stands */
}

/* --- files -------------------------------------------------------------------------- */

struct pfile *pl_file_get(dev_t dev, ino_t ino, const char *canon, int64_t size)
{
	pthread_mutex_lock(&g_mu);
	struct pfile *f;
	for (f = g_files; f; f = f->next)
		if (!f->orphan && f->dev == dev && f->ino == ino)
			break;
	if (!f && (f = calloc(1, sizeof(*f)))) {
		if (!(f->path = strdup(canon))) {
			free(f);
			f = NULL;
		} else {
			pthread_mutex_init(&f->mu, NULL);
			f->dev = dev;
			f->ino = ino;
			f->id = -1;
			f->size = size;
			atomic_store(&f->rgen, PL_RGEN_NONE); /* looked at, once, at its first write */
			f->next = g_files; /* files are never freed: lists read without g_mu stay valid */
			g_files = f;
		}
	}
	pthread_mutex_unlock(&g_mu);
	return f;
}

struct pfile *pl_file_find(dev_t dev, ino_t ino)
{
	pthread_mutex_lock(&g_mu);
	struct pfile *f;
	for (f = g_files; f; f = f->next)
		if (!f->orphan && f->dev == dev && f->ino == ino)
			break;
	pthread_mutex_unlock(&g_mu);
	return f;
}

bool pl_have_files(void)
{
	pthread_mutex_lock(&g_mu);
	bool r = g_files != NULL;
	pthread_mutex_unlock(&g_mu);
	return r;
}

int pl_file_path(struct pfile *f, char *out)
{
	pthread_mutex_lock(&g_mu); /* a rename replaces f->path under it */
	int r = f->orphan || strlen(f->path) >= PATH_MAX ? -1 : 0;
	if (r == 0)
		strcpy(out, f->path);
	pthread_mutex_unlock(&g_mu);
	return r;
}

/* A commit of f's failed (the store failed, or its outcome is unknown):
 * kept for the file's syncs, as a failed write-back would be (f->mu held). */
static void failed_locked(struct pfile *f, int r)
{
	if (!f->err) {
		f->err = r;
		pl_msg(f->path, "a write failed in the store: %s%s%.*s (reported by this call and by the file's "
				"syncs)", atomio_strerror(r), g_store_err[0] ? ": " : "", (int)sizeof(g_store_err),
		       g_store_err);
	}
}

/* One group: the writes iov at off, or with iov NULL a size change to off.
 * Lazy (atomio_tx_commit_lazy): when it returns, every process's atomio
 * reads and atomio_file_size see the group, which is all another process's
 * read, lseek or fstat of the file needs (wrap.c reads through the store
 * while the file has lazy groups not yet home), and its place in the
 * commit order is taken, so a crash can lose it only with every group
 * after it.  durable (O_SYNC, O_DSYNC, RWF_SYNC, RWF_DSYNC): durable and
 * home before the call returns, as those flags promise. */
static int commit_group(atomio *st, struct pfile *f, int id, const struct iovec *iov, int iovcnt, off_t off,
			bool locked, bool durable)
{
	atomio_tx *tx;
	int r = atomio_tx_begin(st, &tx);
	if (r == 0) {
		r = iov ? atomio_tx_writev(tx, id, iov, iovcnt, off) : atomio_tx_truncate(tx, id, off);
		if (r < 0) {
			atomio_tx_abort(tx); /* refused before anything was written (EFBIG, ...) */
			return r;
		}
		r = durable ? atomio_tx_commit(tx) : atomio_tx_commit_lazy(tx, NULL);
	}
	if (r < 0) {
		if (!locked)
			pthread_mutex_lock(&f->mu);
		failed_locked(f, r);
		if (!locked)
			pthread_mutex_unlock(&f->mu);
	}
	return r;
}

int pl_commit_write(atomio *st, struct pfile *f, int id, const struct iovec *iov, int iovcnt, off_t off,
		    bool durable)
{
	return commit_group(st, f, id, iov, iovcnt, off, false, durable);
}

int pl_issue(atomio *st, struct pfile *f, const struct iovec *iov, int iovcnt, off_t off, bool durable)
{
	if (g_group)
		return grp_add(st, f, iov, iovcnt, off);
	return commit_group(st, f, f->id, iov, iovcnt, off, true, durable);
}

/* Group mode: f's pending group committed (durably).  0 or f's error. */
static int grp_sync(struct pfile *f)
{
	pthread_mutex_lock(&f->mu);
	grp_commit(atomic_load(&g_st), f);
	int r = f->err;
	pthread_mutex_unlock(&f->mu);
	return r;
}

int pl_sync_file(struct pfile *f, unsigned flags)
{
	if (g_group)
		return grp_sync(f);
	pthread_mutex_lock(&f->mu);
	int r = f->err, id = f->id;
	pthread_mutex_unlock(&f->mu);
	if (r < 0)
		return r;
	/* A file this handle has no id for (a reader that never wrote it, or
	 * one whose handle was closed by a rename) may have groups of other
	 * processes: the store-wide sync covers them. */
	atomio *st = pl_reader_store(f, &id);
	return st ? atomio_sync(st, id, flags) : 0;
}

int pl_sync_all(void)
{
	int r = 0;
	if (g_group) {
		pthread_mutex_lock(&g_mu);
		struct pfile *list = g_files; /* files are never freed; new ones go in front */
		pthread_mutex_unlock(&g_mu);
		for (struct pfile *f = list; f; f = f->next) {
			int e = grp_sync(f);
			if (e < 0 && !r)
				r = e;
		}
		return r;
	}
	atomio *st = atomic_load(&g_st);
	if (!st && pl_store_live())
		st = pl_store(NULL); /* a process that only read: the writers' groups */
	if (st && !pl_not_owner())
		r = atomio_sync(st, -1, 0);
	return r;
}

/* --- the store ---------------------------------------------------------------------------- */

/* No thread is cancelled while it holds g_rw: the waits under it (a
 * condition variable here, the store's own in atomio_poll) are cancellation
 * points, and a thread cancelled in one would leave g_rw held (every
 * exclusive caller after it -- exec, rename, fork -- waits forever), the
 * poller's role taken and the store's mutex locked.  Cancellation is off
 * from the outermost hold to its release, as the thread had it before; a
 * cancel requested meanwhile acts at the thread's next cancellation point
 * (the sync wrappers test for it once the sync is done). */
static __thread int t_depth, t_cancel_state;

static void hold_begin(void)
{
	int old;
	if (t_depth++ == 0 && pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old) == 0)
		t_cancel_state = old;
}

static void hold_end(void)
{
	if (--t_depth == 0)
		pthread_setcancelstate(t_cancel_state, NULL);
}

/* This thread's holds of g_rw, shared or exclusive, nested: only the
 * outermost takes and releases the lock (an inner shared hold inside an
 * exclusive one is covered by it).  Taking it exclusive inside a shared
 * hold deadlocks, as it always did: no caller does. */
static __thread int t_rw;

void pl_hold(void)
{
	hold_begin();
	if (t_rw++ == 0)
		pthread_rwlock_rdlock(&g_rw);
}
void pl_release(void)
{
	if (--t_rw == 0)
		pthread_rwlock_unlock(&g_rw);
	hold_end();
}
void pl_lock_excl(void)
{
	hold_begin();
	if (t_rw++ == 0)
		pthread_rwlock_wrlock(&g_rw);
}
void pl_unlock_excl(void)
{
	if (--t_rw == 0)
		pthread_rwlock_unlock(&g_rw);
	hold_end();
}

static void rw_init(void)
{
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&g_rw, &a);
	pthread_rwlockattr_destroy(&a);
	t_rw = 0;
}

/* The pid of this process as its own memory knows it: set before main and
 * by the fork handler in a child.  A vfork child runs no fork handler and
 * shares this memory with its parent, so there getpid() differs from it. */
static pid_t g_self;

bool pl_vfork_child(void) { return g_self && getpid() != g_self; }

bool pl_not_owner(void)
{
	/* getpid() also catches a vfork child, which runs no fork handler,
	 * also before the parent opened the store (g_pid still 0). */
	if (g_forked)
		return true;
	pid_t me = getpid();
	return (g_pid && me != g_pid) || (g_self && me != g_self);
}


static int open_store(atomio **out)
{
	/* Every process joins the store the others of the program have open
	 * (one commit order, one read index); group mode takes it alone (its
	 * pending groups live in this process until their sync). */
	uint32_t excl = g_group ? ATOMIO_EXCLUSIVE : 0;
	struct atomio_options o = {.log_size = g_log_size, .flags = ATOMIO_CREATE | excl | g_flags,
				   .errbuf = g_store_err, .errbuf_size = sizeof(g_store_err),
				   .lazy_delay_us = g_lazy_us};
	int r = atomio_open(g_log, &o, out);
	if (r == 0 && atomio_stats(*out, &g_base) < 0)
		memset(&g_base, 0, sizeof(g_base));
	if (r < 0)
		pl_msg(g_log, "cannot open the store: %s%s%.*s", atomio_strerror(r), g_store_err[0] ? ": " : "",
		       (int)sizeof(g_store_err), g_store_err);
	return r;
}

int pl_register(atomio *st, struct pfile *f, int oflags, mode_t mode)
{
	int id = atomio_file_open(st, f->path, oflags & (O_CREAT | O_EXCL), mode);
	if (id < 0)
		return id;
	struct stat a;
	int afd = atomio_file_fd(st, id);
	if (afd < 0 || real.fstat(afd, &a) < 0 || a.st_dev != f->dev || a.st_ino != f->ino) {
		/* The path now names another file: this descriptor's file was
		 * replaced behind our back. */
		f->orphan = true;
		pl_msg(f->path, "the path names another file now; its old descriptors are no longer protected");
		return -ESTALE;
	}
	f->id = id;
	f->reg_wanted = true;
	struct atomio_caps c;
	if (!g_max_group && atomio_caps(st, -1, &c) == 0)
		g_max_group = c.max_group_bytes;
	return 0;
}

atomio *pl_store_now(void) { return atomic_load(&g_st); }

atomio *pl_store(const char *why_path)
{
	atomio *st = atomic_load(&g_st);
	if (st && !pl_not_owner())
		return st;
	if (g_conflict) {
		errno = EINVAL;
		return NULL;
	}
	if (pl_not_owner()) {
		pl_msg(why_path, "refused: the store belongs to the parent process (writes to protected "
				 "files after fork are not supported)");
		errno = EPERM;
		return NULL;
	}
	pthread_mutex_lock(&g_open_mu);
	st = atomic_load(&g_st);
	int r = 0;
	if (!st) {
		r = open_store(&st);
		if (r == 0) {
			g_pid = getpid();
			struct atomio_caps c;
			if (atomio_caps(st, -1, &c) == 0)
				g_max_group = c.max_group_bytes;
			/* Files that were registered before a restart: again (but
			 * in group mode lazily, at each one's next write or read:
			 * a forked child joins without registering what its parent
			 * had). */
			pthread_mutex_lock(&g_mu);
			struct pfile *list = g_multi ? NULL : g_files;
			/* The rename count (pl_path_check) was zero again if every
			 * process had closed the store meanwhile: each file's path
			 * is looked at again at its next write. */
			for (struct pfile *f = g_files; g_multi && f; f = f->next)
				atomic_store(&f->rgen, PL_RGEN_NONE);
			pthread_mutex_unlock(&g_mu);
			for (struct pfile *f = list; f; f = f->next) {
				pthread_mutex_lock(&f->mu);
				if (f->reg_wanted && !f->orphan && f->id < 0) {
					/* A failure here (EMFILE, ENOMEM, EIO) leaves the
					 * file protected and unregistered: its next write
					 * or size change registers it or fails with the
					 * error; going on unprotected would let its writes
					 * pass the log without a word to the program. */
					int e = pl_register(st, f, 0, 0);
					if (e < 0 && e != -ESTALE)
						pl_msg(f->path, "cannot register it again (%s); its writes fail until "
								"it can be", atomio_strerror(e));
				}
				pthread_mutex_unlock(&f->mu);
			}
			atomic_store(&g_st, st);
		}
	}
	pthread_mutex_unlock(&g_open_mu);
	if (r < 0) {
		errno = r == -EBUSY ? EBUSY : pl_errno(r);
		return NULL;
	}
	return st;
}

static void acc_stats(atomio *st)
{
	struct atomio_stats s;
	if (atomio_stats(st, &s) < 0)
		return;
	struct atomio_lazy_stats ls;
	if (atomio_lazy_stats(st, &ls) == 0)
		g_lacc = ls; /* the store's, every process's: as last seen */
	/* The store's counters count every process's groups (atomio_stats):
	 * each handle adds what they grew by while it was open (with one
	 * process, its own), and the groups recovery replayed as it saw them. */
	uint64_t *a = (uint64_t *)&g_acc, *b = (uint64_t *)&s, *z = (uint64_t *)&g_base;
	uint64_t rec = g_acc.groups_recovered + s.groups_recovered;
	for (size_t i = 0; i < sizeof(s) / sizeof(uint64_t); i++)
		a[i] += b[i] >= z[i] ? b[i] - z[i] : b[i];
	g_acc.groups_recovered = rec;
}

int pl_store_restart_locked(void)
{
	atomio *st = atomic_load(&g_st);
	if (!st || pl_not_owner())
		return 0;
	if (g_group)
		pl_sync_all(); /* pending groups committed first */
	acc_stats(st);
	/* The close makes this handle's lazy groups durable and home (and the
	 * last closer checkpoints); a rename or unlink checkpointed the whole
	 * store before (pl_shared_checkpoint). */
	int r = atomio_close(st);
	atomic_store(&g_st, NULL);
	pthread_mutex_lock(&g_mu);
	for (struct pfile *f = g_files; f; f = f->next)
		f->id = -1;
	pthread_mutex_unlock(&g_mu);
	if (r < 0)
		pl_msg(g_log, "closing the store: %s", atomio_strerror(r));
	return r;
}

void pl_shared_rejoin(void)
{
	pl_lock_excl();
	pl_store_restart_locked();
	pl_unlock_excl();
}

/* Some process holds the store (its flock on the log, store.c claim_log):
 * its lazy groups may not be home.  Taken for a moment when nobody holds
 * it, as recover_at_start does (an opener meanwhile waits up to 250 ms for
 * it, flock_patient). */
bool pl_store_live(void)
{
	int fd = real.open(g_log, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool busy = flock(fd, LOCK_EX | LOCK_NB) < 0;
	real.close(fd);
	return busy;
}

atomio *pl_reader_store(struct pfile *f, int *id)
{
	*id = -1;
	if (g_group || !g_active || pl_not_owner())
		return NULL;
	atomio *st = atomic_load(&g_st);
	if (st && (*id = f->id) >= 0)
		return st;
	/* Nobody holds the store: every group is home (a lone process killed
	 * with lazy groups lost them, as at a power cut), the file is the
	 * truth.  Else this process joins (it could not if it may not write
	 * the log: it reads the file, the documented gap) and registers f, so
	 * that its reads see the other processes' lazy groups. */
	if (!st && !pl_store_live())
		return NULL;
	if (!st && !(st = pl_store(f->path)))
		return NULL;
	pthread_mutex_lock(&f->mu);
	if (f->id < 0 && !f->orphan)
		(void)pl_register(st, f, 0, 0); /* failed: *id -1, the store-wide answer */
	*id = f->id;
	pthread_mutex_unlock(&f->mu);
	return st;
}

int pl_shared_checkpoint(const char *canon)
{
	struct stat sb;
	if (lstat(canon, &sb) < 0)
		return 0; /* nothing there: the call itself says so */
	atomio *st = pl_store(canon);
	if (!st)
		return -errno;
	int r = atomio_checkpoint(st);
	if (r < 0)
		pl_msg(canon, "the store's checkpoint before the unlink or rename failed (%s); not done",
		       atomio_strerror(r));
	return r;
}

/* --- paths moved by other processes (shared mode) ---------------------------------------------- */

/* A file id keeps the path it was registered under (files.c), and each
 * process's handle keeps the ids it registered.  A process that renames or
 * unlinks a protected path checkpoints the store and lets its own handle
 * go (wrap.c, p_rename), but another process writing the same file through
 * a descriptor it opened before would go on logging records under the old
 * id, i.e. the old path: a home write of them by any process opens that
 * path (ENOENT: the store fails for all), and recovery refuses a store left
 * so ("data file ... is gone").  So the rename or unlink wrapper, holding
 * every slot's lock byte exclusive (pl_xlock_all) from before its
 * checkpoint to after the call, adds one to a count every process of the
 * store sees: the first 8 bytes of the store's shared area (atomio_shared_area,
 * the application's: the preload's store holds nothing else there).  Every
 * write and size change looks at it under its slot's byte (shared or
 * exclusive), before it registers the file or logs anything: a count other
 * than the one the file last saw means some path moved, and the file's
 * path is checked against the descriptor's inode (stat against the device
 * and inode noted at open).  As the writer holds the byte until its commit
 * is home, and the renamer holds them all from its checkpoint to the call,
 * every record is either logged before the checkpoint (which takes it home
 * through the old path) or after the call, by a writer that saw the count.
 * The count lives as long as some process has the store open; a process
 * that opens it anew looks at every file again (pl_store). */

static _Atomic uint64_t *rgen_word(atomio *st)
{
	void *a;
	return st && atomio_shared_area(st, &a, NULL) == 0 ? (_Atomic uint64_t *)a : NULL;
}

int pl_path_check(atomio *st, struct pfile *f)
{
	_Atomic uint64_t *w = g_multi ? rgen_word(st) : NULL;
	if (!w)
		return 0;
	uint64_t g = atomic_load(w);
	if (atomic_load_explicit(&f->rgen, memory_order_relaxed) == g)
		return 0; /* the cost of a write when nothing moved: this load */
	char path[PATH_MAX];
	struct stat sb;
	if (pl_file_path(f, path) == 0 && real.stat(path, &sb) == 0 && sb.st_dev == f->dev && sb.st_ino == f->ino) {
		atomic_store_explicit(&f->rgen, g, memory_order_relaxed);
		return 0;
	}
	return PL_EMOVED;
}

void pl_path_moved(void)
{
	_Atomic uint64_t *w = rgen_word(atomic_load(&g_st));
	if (w)
		atomic_fetch_add(w, 1);
}

int pl_path_mend(struct pfile *f, int fd)
{
	pl_lock_excl();
	char old[PATH_MAX], now[PATH_MAX], link[64];
	struct stat sb;
	int r = 0;
	if (pl_file_path(f, old) < 0) {
		r = -ESTALE; /* no longer protected: the descriptor is an ordinary one */
		goto out;
	}
	if (real.stat(old, &sb) == 0 && sb.st_dev == f->dev && sb.st_ino == f->ino)
		goto out; /* mended meanwhile (another thread) */
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, now, sizeof(now) - 1);
	if (n > 0)
		now[n] = 0;
	char *p = NULL;
	if (n > 0 && now[0] == '/' && real.stat(now, &sb) == 0 && sb.st_dev == f->dev && sb.st_ino == f->ino &&
	    (p = strdup(now))) {
		/* Renamed: the file goes on under its new name, as in the
		 * renaming process (pl_file_moved).  This process's handle
		 * registered it under the old one, and would hand that id out
		 * again for the inode (one id per file): it goes, and the next
		 * write joins anew and registers the new name. */
		pthread_mutex_lock(&g_mu);
		free(f->path);
		f->path = p;
		pthread_mutex_unlock(&g_mu);
		r = pl_store_restart_locked();
	} else if (real.fstat(fd, &sb) == 0 && sb.st_nlink == 0) {
		/* Unlinked (maybe replaced by another file): no path names it,
		 * nothing can be recovered into it, and its writes go to the
		 * file as without the library, as in the unlinking process
		 * (pl_file_gone). */
		pthread_mutex_lock(&g_mu);
		f->orphan = true;
		pthread_mutex_unlock(&g_mu);
		r = -ESTALE;
	} else {
		pl_msg(old, "refused (EIO): another process renamed the file, and no name of it can be found "
			    "to log its writes under (records under the old name would be written home, and "
			    "recovered, to a path that is gone)");
		r = -EIO;
	}
out:
	pl_unlock_excl();
	return r;
}

void pl_file_moved(const char *from, const char *to)
{
	pthread_mutex_lock(&g_mu);
	for (struct pfile *f = g_files; f; f = f->next) {
		if (f->orphan)
			continue;
		if (under(f->path, to) && !under(f->path, from)) {
			f->orphan = true; /* replaced by the rename */
		} else if (under(f->path, from)) {
			size_t n = strlen(from);
			char *p = malloc(strlen(to) + strlen(f->path + n) + 1);
			if (!p) {
				f->orphan = true;
				continue;
			}
			strcpy(p, to);
			strcat(p, f->path + n);
			free(f->path);
			f->path = p;
		}
	}
	pthread_mutex_unlock(&g_mu);
}

void pl_file_gone(const char *path)
{
	pthread_mutex_lock(&g_mu);
	for (struct pfile *f = g_files; f; f = f->next)
		if (!f->orphan && !strcmp(f->path, path))
			f->orphan = true;
	pthread_mutex_unlock(&g_mu);
}

/* --- mappings ----------------------------------------------------------------------------------- */

struct pmap {
	uintptr_t addr, len;
	struct pfile *f;
	struct pmap *next;
};
static struct pmap *g_maps;

void pl_map_add(void *addr, size_t len, struct pfile *f)
{
	struct pmap *m = malloc(sizeof(*m));
	if (!m)
		return; /* msync of it then waits for nothing: reads stay correct */
	*m = (struct pmap){(uintptr_t)addr, len, f, NULL};
	pthread_mutex_lock(&g_mu);
	m->next = g_maps;
	g_maps = m;
	pthread_mutex_unlock(&g_mu);
}

void pl_map_del(void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	pthread_mutex_lock(&g_mu);
	for (struct pmap **p = &g_maps; *p;) {
		struct pmap *m = *p;
		if (m->addr >= a && m->addr + m->len <= a + len) {
			*p = m->next;
			free(m);
		} else {
			p = &m->next;
		}
	}
	pthread_mutex_unlock(&g_mu);
}

struct pfile *pl_map_find(void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	struct pfile *f = NULL;
	pthread_mutex_lock(&g_mu);
	for (struct pmap *m = g_maps; m && !f; m = m->next)
		if (a < m->addr + m->len && a + len > m->addr)
			f = m->f;
	pthread_mutex_unlock(&g_mu);
	return f;
}

/* --- start, fork, exit ---------------------------------------------------------------------------- */

static void xlk_init(void);
static void xlk_child(void);

static void at_prepare(void)
{
	if (!g_active)
		return;
	/* No call of ours runs during the fork, and nothing is in flight: the
	 * child's copy of every lock is free and every file's count settled. */
	pl_lock_excl();
	/* Group mode: a fork ends the pending groups.  Otherwise nothing is
	 * pending in this process: its lazy groups are the store's, and the
	 * child joins the store at its first write with a handle of its own. */
	if (g_group && !pl_not_owner() && atomic_load(&g_st))
		pl_sync_all();
}
_Atomic unsigned g_forkgen;

static void at_parent(void)
{
	if (g_active) {
		atomic_fetch_add(&g_forkgen, 1); /* every description so far is the child's too */
		pl_unlock_excl();
	}
}
static void at_child(void)
{
	if (!g_active)
		return;
	g_self = getpid();
	fdlk_child();
	rw_init(); /* at_prepare's exclusive hold ends here */
	/* at_prepare's hold ends here, not in at_parent */
	if (t_depth > 0) {
		t_depth = 0;
		pthread_setcancelstate(t_cancel_state, NULL);
	}
	pthread_mutex_init(&g_open_mu, NULL);
	pthread_mutex_init(&g_mu, NULL);
	/* The child is single-threaded: no file lock can be held in it. */
	for (struct pfile *f = g_files; f; f = f->next)
		pthread_mutex_init(&f->mu, NULL);
	memset(&g_acc, 0, sizeof(g_acc)); /* the parent's to report */
	memset(&g_lacc, 0, sizeof(g_lacc));
	atomic_fetch_add(&g_forkgen, 1); /* every description so far is the parent's too */
	xlk_child();
	if (g_multi) {
		/* The parent's handle answers -EPERM here (atomio's own fork
		 * handler closed its descriptors in the child): the child joins
		 * the store with a handle of its own at its first write, and
		 * registers each file again then (same ids: the catalog is the
		 * store's).  The parent's handle is left as it is, unused. */
		atomic_store(&g_st, NULL);
		for (struct pfile *f = g_files; f; f = f->next)
			f->id = -1;
		g_forked = false;
		g_pid = 0;
		return;
	}
	/* Group mode: a store the parent opened is the parent's, also while it is closed
	 * for a moment (a rename or unlink of a protected path closes it until
	 * the next write: g_pid stays the parent's); a child of a process that
	 * never opened one (a shell that merely inherited LD_PRELOAD) may open
	 * its own (and the parent then gets EBUSY, as any second process). */
	g_forked = atomic_load(&g_st) != NULL || g_pid != 0;
	if (!g_forked)
		g_pid = 0;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	default: break;
	}
	return v;
}

static void recover_at_start(void)
{
	int fd = real.open(g_log, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* no log yet: created by the first write */
	/* Held by another process (it recovered when it opened the store):
	 * nothing to do, and no 250 ms wait inside atomio_open for it. */
	bool busy = flock(fd, LOCK_EX | LOCK_NB) < 0;
	real.close(fd);
	if (busy)
		return;
	atomio *st;
	if (open_store(&st) < 0)
		return; /* reported; the first write reports again */
	acc_stats(st);
	int r = atomio_close(st);
	if (r < 0)
		pl_msg(g_log, "closing the store after recovery: %s", atomio_strerror(r));
}

/* A pattern with a slash is matched against canonical absolute paths
 * (pl_match): its directory part is made canonical too, so that a pattern
 * through a symlinked directory matches the files in it.  A relative one
 * can match nothing: said at start, not left to protect nothing quietly. */
static char *glob_canon(char *pat)
{
	if (!strchr(pat, '/'))
		return pat;
	if (pat[0] != '/') {
		pl_msg(pat, "ATOMIO_FILES: a pattern with a slash is matched against absolute paths with "
			    "symbolic links resolved; this relative one matches nothing");
		return pat;
	}
	size_t wild = strcspn(pat, "*?[\\"), cut = 0;
	for (size_t i = 0; i < wild && pat[i]; i++)
		if (pat[i] == '/')
			cut = i;
	if (cut == 0)
		return pat;
	char dir[PATH_MAX], real_dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%.*s", (int)cut, pat);
	if (!realpath(dir, real_dir) || !strcmp(dir, real_dir))
		return pat; /* missing (made later: matched as written) or canonical already */
	char *c = malloc(strlen(real_dir) + strlen(pat + cut) + 1);
	if (!c)
		return pat;
	strcpy(c, real_dir);
	strcat(c, pat + cut);
	return c;
}

__attribute__((constructor)) void pl_init(void)
{
	real_init();
	const char *log = getenv("ATOMIO_LOG"), *files = getenv("ATOMIO_FILES");
	if (!log || !*log || !files || !*files)
		return;
	if (pl_canon(AT_FDCWD, log, true, g_log) < 0) {
		pl_msg(log, "ATOMIO_LOG: its directory does not exist; nothing is protected");
		return;
	}
	char *copy = strdup(files);
	if (!copy)
		return;
	for (char *p = copy; p; p = strchr(p, ':') ? strchr(p, ':') + 1 : NULL)
		g_nglobs++;
	g_globs = calloc((size_t)g_nglobs, sizeof(char *));
	if (!g_globs)
		return;
	g_nglobs = 0;
	for (char *tok = strtok(copy, ":"); tok; tok = strtok(NULL, ":"))
		g_globs[g_nglobs++] = glob_canon(tok);
	const char *v;
	if ((v = getenv("ATOMIO_LOG_SIZE")) && *v)
		g_log_size = parse_size(v);
	if ((v = getenv("ATOMIO_COMPRESS")) && !strcmp(v, "0"))
		g_flags |= ATOMIO_NO_COMPRESS;
	if ((v = getenv("ATOMIO_GROUP")) && !strcmp(v, "1"))
		g_group = true;
	/* ATOMIO_SHARED=1 is accepted and changes nothing: every process of
	 * the program shares the store in the one mode.  With group mode
	 * (which has one writing process) it is refused, as it always was. */
	bool shared = (v = getenv("ATOMIO_SHARED")) && !strcmp(v, "1");
	if (shared && g_group) {
		/* Group mode holds a file's writes in one process's memory until
		 * its sync: another process would neither see nor order them. */
		pl_msg(log, "ATOMIO_SHARED=1 and ATOMIO_GROUP=1 cannot be combined (group mode holds the "
			    "writes in one process until a sync): writes and writable opens of protected "
			    "files fail with EINVAL");
		g_conflict = true;
		g_group = false;
	}
	if ((v = getenv("ATOMIO_STATS")) && *v)
		g_stats_path = v;
	if ((v = getenv("ATOMIO_PRELOAD_TRACE")) && *v)
		real_trace_open(v);
	/* The lazy window: a write is durable at the latest this long after
	 * it (plus one log write) without a sync.  0 = flush at once (1 µs,
	 * the library's smallest; its 0 means its default). */
	if ((v = getenv("ATOMIO_LAZY_MS")) && *v) {
		unsigned long long ms = strtoull(v, NULL, 10);
		g_lazy_us = ms == 0 ? 1 : ms > 60000 ? 60000000ull : ms * 1000ull;
	}
	g_multi = !g_group;
	if ((v = getenv("ATOMIO_PRELOAD_TEST_WDELAY")) && *v)
		g_test_wdelay_ms = atoi(v);
	struct rlimit rl;
	rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_max : 1024;
	if (n == RLIM_INFINITY || n > (1u << 20))
		n = 1u << 20;
	if (n < 1024)
		n = 1024;
	g_fdtab = calloc(n, sizeof(*g_fdtab));
	g_storefds = calloc(n, 1);
	if (!g_fdtab || !g_storefds)
		return;
	g_fdtab_n = (int)n;
	g_self = getpid();
	real_install_ops();
	xlk_init();
	pthread_atfork(at_prepare, at_parent, at_child);
	g_active = true;
	if (!g_conflict)
		recover_at_start();
	pl_adopt_inherited();
}

/* Append the counters to ATOMIO_STATS (at exit, and before an exec, which
 * runs no destructor), then start counting again. */
void pl_stats_flush(void)
{
	if (g_stats_path) {
		int fd = real.open(g_stats_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			const struct atomio_stats *a = &g_acc;
			const struct atomio_lazy_stats *l = &g_lacc;
			char b[1024];
			int n = snprintf(b, sizeof(b),
					 "pid=%d commits=%llu log_syncs=%llu batches=%llu bytes_raw=%llu "
					 "bytes_logged=%llu bytes_home=%llu bytes_checkpointed=%llu "
					 "checkpoints=%llu groups_recovered=%llu lazy_commits=%llu lazy_eager=%llu "
					 "syncs=%llu syncs_waited=%llu flush_delay=%llu flush_press=%llu "
					 "flush_sync=%llu lazy_reads=%llu lazy_waits=%llu\n",
					 (int)getpid(), (unsigned long long)a->commits,
					 (unsigned long long)a->log_syncs, (unsigned long long)a->batches,
					 (unsigned long long)a->bytes_raw, (unsigned long long)a->bytes_logged,
					 (unsigned long long)a->bytes_home, (unsigned long long)a->bytes_checkpointed,
					 (unsigned long long)a->checkpoints, (unsigned long long)a->groups_recovered,
					 (unsigned long long)l->lazy_commits, (unsigned long long)l->lazy_eager,
					 (unsigned long long)l->syncs, (unsigned long long)l->syncs_waited,
					 (unsigned long long)l->flush_delay, (unsigned long long)l->flush_press,
					 (unsigned long long)l->flush_sync, (unsigned long long)l->lazy_reads,
					 (unsigned long long)l->lazy_waits);
			(void)!real.write(fd, b, (size_t)n);
			real.close(fd);
		}
	}
	memset(&g_acc, 0, sizeof(g_acc));
	memset(&g_lacc, 0, sizeof(g_lacc));
}

/* At exit (the destructor) and at _exit/_Exit (wrap.c), which run none:
 * the store closed, so this process's lazy groups are durable first.  A
 * process that leaves the store last, without it, would leave its lazy
 * groups only in the shared memory of a store that no process has open,
 * whose next opener recovers from the log (store.c, shared_open): its
 * writes, acknowledged to it and seen by the others, would be gone. */
void pl_fini_now(void)
{
	if (!g_active || pl_not_owner())
		return;
	pl_lock_excl();
	atomio *st = atomic_load(&g_st);
	if (st) {
		if (g_group)
			pl_sync_all(); /* what was written since the last sync */
		acc_stats(st);
		int r = atomio_close(st); /* this handle's lazy groups durable first */
		if (r < 0)
			pl_msg(g_log, "closing the store at exit: %s", atomio_strerror(r));
		atomic_store(&g_st, NULL);
	}
	pl_stats_flush();
	pl_unlock_excl();
}

__attribute__((destructor)) static void pl_fini(void) { pl_fini_now(); }

void pl_adopt_inherited(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	int self = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (*end || fd == self || fd < 0)
			continue;
		char link[64], path[PATH_MAX];
		snprintf(link, sizeof(link), "/proc/self/fd/%ld", fd);
		ssize_t n = readlink(link, path, sizeof(path) - 1);
		if (n <= 0 || path[0] != '/')
			continue;
		path[n] = 0;
		struct stat sb;
		if (!pl_match(path) || real.fstat((int)fd, &sb) < 0 || !S_ISREG(sb.st_mode))
			continue;
		int fl = real.fcntl((int)fd, F_GETFL);
		if (fd <= 2 && fl >= 0 && (fl & O_ACCMODE) != O_RDONLY)
			pl_msg(path, "standard %s is this protected file: stdio's writes to it (printf, puts, "
				     "dprintf, perror) are made inside libc, where the library does not see them, "
				     "outside the log; only write(2) to it is protected",
			       fd == 0 ? "input" : fd == 1 ? "output" : "error");
		struct pfile *f = pl_file_get(sb.st_dev, sb.st_ino, path, sb.st_size);
		struct pofd *o = f ? pofd_new(f, fl) : NULL;
		if (o)
			o->xproc = true; /* the process that exec'd may have forked first */
		if (o)
			pofd_set((int)fd, o);
	}
	closedir(d);
}

/* --- one writer of a file's end and of a shared offset, between processes ------------------- */

/* Each process has its own struct pfile and pofd, so the file's logical
 * size (f->size) and a description's position lock (pos_mu) order only the
 * threads of one process.  What the kernel orders for all of them -- an
 * O_APPEND write lands at the end whoever else appends (shared mode: the
 * default has one writing process), a write through an open file
 * description shared by several processes (fork, SCM_RIGHTS) advances its
 * one offset, and a read or seek through it in another process (also a
 * default mode's child, which may read) sees it advanced -- needs a lock
 * they all see:
 * an open-file-description lock on a byte of the log, one byte per slot
 * (a hash of the file's device and inode), held from reading the end or
 * the offset until the group is issued (shared mode: committed, durable and
 * written home, so the next holder's fstat sees it) and the offset moved.  The log because
 * every process of the store has it and it outlives them; bytes below
 * atomio's own lock bytes (shm.h, LK_BASE).  Such a lock goes with its
 * process: a process killed while it holds one leaves none behind.  Each
 * process locks through a description of its own (opened after the fork:
 * processes sharing a description would share its locks too); its threads
 * share it, so a mutex per slot lets one thread of the process at a time
 * hold the byte.
 *
 * A write inside the file (shared mode) takes the byte SHARED (F_RDLCK),
 * from its look at the size to the end of its commit: writes inside the file
 * go on side by side, but a size change or an append (exclusive) waits for
 * them, and they for it -- else a truncate below a write that saw the old
 * size could be committed before it, and an append after it take the end
 * the truncate left, not yet knowing the write: its bytes landed over part
 * of the write, which no order of the three gives (t_preload_inside).  In
 * this process the slot's rwlock (writers first) admits the shared holders
 * together or one exclusive; the first shared holder takes the byte, the
 * last lets it go.  The kernel grants a read lock while a writer waits, so
 * a steady stream of overlapping writes inside a file can hold an append of
 * another process back as long as it lasts. */
#define XLK_SLOTS 256
#define XLK_BASE (1ull << 61)
static pthread_mutex_t g_xmu[XLK_SLOTS];
static pthread_rwlock_t g_xrw[XLK_SLOTS];
static unsigned g_xreaders[XLK_SLOTS]; /* this process's shared holders of the slot (g_xmu) */
static pthread_mutex_t g_xfd_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_xfd = -1;
static pid_t g_xpid; /* the process the slots and g_xfd belong to */

static void xlk_init(void)
{
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	for (int i = 0; i < XLK_SLOTS; i++) {
		pthread_mutex_init(&g_xmu[i], NULL);
		pthread_rwlock_init(&g_xrw[i], &a);
		g_xreaders[i] = 0;
	}
	pthread_rwlockattr_destroy(&a);
	g_xpid = getpid();
}

/* After fork (single-threaded child, no slot held: at_prepare took g_rw
 * exclusive): the inherited description is the parent's. */
static void xlk_child(void)
{
	xlk_init();
	pthread_mutex_init(&g_xfd_mu, NULL);
	if (g_xfd >= 0) {
		pl_store_fd(g_xfd, false);
		real.close(g_xfd);
		g_xfd = -1;
	}
}

static int xlk_fd(void)
{
	pthread_mutex_lock(&g_xfd_mu);
	if (g_xfd < 0) {
		int fd = real.open(g_log, O_RDWR | O_CLOEXEC);
		if (fd >= 0) {
			g_xfd = fd;
			pl_store_fd(fd, true);
		}
	}
	int fd = g_xfd >= 0 ? g_xfd : -errno;
	pthread_mutex_unlock(&g_xfd_mu);
	return fd;
}

/* The log cannot be opened for writing here (EACCES, EROFS, EPERM): this
 * process can open no store either, so it writes no protected file. */
static bool g_xfd_denied;

static int xlk_slot(const struct pfile *f)
{
	uint64_t h = ((uint64_t)f->dev * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)f->ino * 0xc2b2ae3d27d4eb4full);
	return (int)((h >> 32) % XLK_SLOTS);
}

/* Slot s's lock byte could not be taken (fd: the lock's descriptor, or
 * -errno where there is none): the process-local locks of the slot are
 * released, the refusal is named, and -errno returned. */
static int xlk_refused(const struct pfile *f, int s, int fd)
{
	int e = fd < 0 ? -fd : errno;
	pthread_mutex_unlock(&g_xmu[s]);
	pthread_rwlock_unlock(&g_xrw[s]);
	pl_msg(f->path, "refused: the lock that orders appends and shared file offsets between the "
			"store's processes (on %s) cannot be taken: %s", g_log, strerror(e));
	return -e;
}

static int xlock(struct pfile *f, int *slot, bool reader)
{
	*slot = -1;
	/* A vfork child (no fork handler ran: getpid() is not the pid the
	 * slots were set up for) shares its parent's memory but not its
	 * descriptors: it leaves g_xfd alone, and takes no lock.  Its writes
	 * are refused (pl_not_owner); its reads and seeks go as before. */
	if (getpid() != g_xpid)
		return 0;
	int s = xlk_slot(f);
	if (reader && g_xfd_denied)
		return 0;
	pthread_rwlock_wrlock(&g_xrw[s]);
	pthread_mutex_lock(&g_xmu[s]);
	int fd = xlk_fd();
	if (reader && (fd == -EACCES || fd == -EROFS || fd == -EPERM || fd == -ENOENT)) {
		/* No log yet: no process has a store, so none writes.  A
		 * process that may only read (the log is not writable for it)
		 * reads as without the lock: it cannot open the store, so no
		 * write of it can race its reads; a writer sharing its
		 * description may move the offset under a read of it. */
		g_xfd_denied = fd != -ENOENT;
		pthread_mutex_unlock(&g_xmu[s]);
		pthread_rwlock_unlock(&g_xrw[s]);
		return 0;
	}
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)(XLK_BASE + (uint64_t)s),
			   .l_len = 1};
	int r;
	while (fd >= 0 && (r = real.fcntl(fd, F_OFD_SETLKW, &fl)) < 0 && errno == EINTR)
		;
	if (fd < 0 || r < 0)
		return xlk_refused(f, s, fd);
	*slot = s;
	return 0;
}

int pl_xlock_shared(struct pfile *f, int *slot)
{
	/* No getpid() here, as xlock makes (a system call per write): the
	 * only caller, p_write, has its store from pl_store, which refuses a
	 * vfork child (pl_not_owner). */
	*slot = -1;
	int s = xlk_slot(f);
	pthread_rwlock_rdlock(&g_xrw[s]);
	pthread_mutex_lock(&g_xmu[s]);
	int fd = 0, r = 0;
	if (g_xreaders[s] == 0) {
		fd = xlk_fd();
		struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET,
				   .l_start = (off_t)(XLK_BASE + (uint64_t)s), .l_len = 1};
		while (fd >= 0 && (r = real.fcntl(fd, F_OFD_SETLKW, &fl)) < 0 && errno == EINTR)
			;
	}
	if (fd < 0 || r < 0)
		return xlk_refused(f, s, fd);
	g_xreaders[s]++;
	pthread_mutex_unlock(&g_xmu[s]);
	*slot = XLK_SLOTS + s;
	return 0;
}

int pl_xlock(struct pfile *f, int *slot) { return xlock(f, slot, false); }

/* Every slot's byte, in one range (the kernel takes it whole or waits):
 * g_rw held exclusive, so no thread of this process holds a slot. */
int pl_xlock_all(void)
{
	if (getpid() != g_xpid)
		return 0; /* a vfork child: as xlock (it renames nothing here: pl_not_owner) */
	int fd = xlk_fd();
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)XLK_BASE, .l_len = XLK_SLOTS};
	int r;
	while (fd >= 0 && (r = real.fcntl(fd, F_OFD_SETLKW, &fl)) < 0 && errno == EINTR)
		;
	if (fd < 0 || r < 0) {
		int e = fd < 0 ? -fd : errno;
		pl_msg(g_log, "refused: the lock that orders a rename or unlink of a protected path with the "
			      "other processes' writes cannot be taken: %s", strerror(e));
		return -e;
	}
	return 0;
}

void pl_xunlock_all(void)
{
	struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = (off_t)XLK_BASE, .l_len = XLK_SLOTS};
	if (getpid() == g_xpid && g_xfd >= 0)
		(void)real.fcntl(g_xfd, F_OFD_SETLK, &fl);
}
int pl_xlock_read(struct pfile *f, int *slot) { return xlock(f, slot, true); }

void pl_xunlock(int slot)
{
	if (slot < 0)
		return;
	bool shared = slot >= XLK_SLOTS;
	int s = shared ? slot - XLK_SLOTS : slot;
	struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET,
			   .l_start = (off_t)(XLK_BASE + (uint64_t)s), .l_len = 1};
	if (shared)
		pthread_mutex_lock(&g_xmu[s]);
	/* Unlocking a lock we hold does not fail but for a closed descriptor
	 * (the store's descriptors cannot be closed by the program). */
	if (!shared || --g_xreaders[s] == 0)
		(void)real.fcntl(g_xfd, F_OFD_SETLK, &fl);
	pthread_mutex_unlock(&g_xmu[s]);
	pthread_rwlock_unlock(&g_xrw[s]);
}

/* A descriptor received over a UNIX socket (SCM_RIGHTS): protected as an
 * inherited one is.  Its description is another process's too. */
void pl_adopt_fd(int fd)
{
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (!g_active || n <= 0 || path[0] != '/' || pofd_of(fd))
		return;
	path[n] = 0;
	struct stat sb;
	if (!pl_match(path) || real.fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
		return;
	int fl = real.fcntl(fd, F_GETFL);
	struct pfile *f = pl_file_get(sb.st_dev, sb.st_ino, path, sb.st_size);
	struct pofd *o = f ? pofd_new(f, fl) : NULL;
	if (o)
		o->xproc = true;
	if (!o || pofd_set(fd, o) < 0)
		pl_msg(path, "a descriptor received over a socket cannot be protected (out of memory or "
			     "descriptor %d above the table): its writes would bypass the store", fd);
}
