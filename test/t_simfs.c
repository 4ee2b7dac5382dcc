/* The crash simulator's own model (test/support/simfs.h): what is pending,
 * what a sync makes durable, what a crash image may hold, tears, directory
 * entries, descriptors after a simulated crash, enumeration and picks; and
 * what stores of several processes need: OFD and flock locks, processes
 * that die, shm_map, volatile "-shm" files. */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>

#include "sys.h"
#include "support/simfs.h"
#include "t.h"

#define S atomio_sys

static struct simfs *img_with(struct simfs *fs, const char *spec)
{
	struct simfs_pick p;
	CHECK_OK(simfs_pick_parse(spec, &p));
	struct simfs *img = simfs_crash(fs, &p);
	simfs_pick_free(&p);
	return img;
}

static int64_t size_of(struct simfs *fs, const char *path) { return simfs_size(fs, path); }

static uint8_t byte_at(struct simfs *fs, const char *path, uint64_t off)
{
	uint8_t b = 0xEE;
	CHECK_EQ(simfs_read(fs, path, off, &b, 1), 1);
	return b;
}

struct fe {
	int seen, with_d;
};

/* Inside simfs_foreach_image the thread's system calls reach the image. */
static int each(struct simfs *img, const struct simfs_pick *p, uint64_t idx, void *arg)
{
	struct fe *fe = arg;
	CHECK(simfs_current() == img);
	CHECK_EQ(idx, (uint64_t)fe->seen);
	CHECK(p->n == 2);
	struct stat sb;
	int r = S->lstat("/d/a", &sb);
	CHECK_OK(r);
	uint8_t b = 0;
	int fd = S->open("/d/a", O_RDONLY, 0);
	CHECK(fd >= 0);
	if (S->pread(fd, &b, 1, 4096) == 1 && b == 'D')
		fe->with_d++;
	S->close(fd);
	fe->seen++;
	return 0;
}

static int hooks;
static void count_hook(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
{
	(void)fs;
	(void)op;
	(void)arg;
	hooks++;
}

/* At the crash point of an atomic extending write: 3 pending items (the
 * earlier write's data and size, this write), and the enumeration never
 * tears this one: in an image it is whole, with its size, or absent. */
static int hooked;
static void atomic_hook(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
{
	(void)arg;
	CHECK(op->rwf & RWF_ATOMIC);
	struct simfs_item it[4];
	CHECK_EQ(simfs_pending(fs, it, 4), 3);
	CHECK(it[2].atomic && it[2].kind == SIMFS_DATA);
	struct simfs_enum e = {.unit = 512, .exhaustive_cap = 1000};
	bool ex;
	uint64_t n = simfs_enum_count(fs, &e, &ex);
	CHECK(ex);
	CHECK_EQ(n, 2u * 2u * 2u); /* the 512-byte write: keep/drop; size; atomic: keep/drop */
	int whole = 0, none = 0;
	for (uint64_t i = 0; i < n; i++) {
		struct simfs_pick p;
		CHECK_OK(simfs_enum_pick(fs, &e, i, &p));
		struct simfs *img = simfs_crash(fs, &p);
		if (size_of(img, "/d/f") >= 131072 + 16384) {
			CHECK_EQ(byte_at(img, "/d/f", 131072), 'Z');
			CHECK_EQ(byte_at(img, "/d/f", 131072 + 16383), 'Z');
			whole++;
		} else {
			none++;
		}
		simfs_free(img);
		simfs_pick_free(&p);
	}
	CHECK_EQ(whole, 4);
	CHECK_EQ(none, 4);
	/* a tear asked for explicitly is "not landed" */
	struct simfs *img = img_with(fs, "u512:D,D,T1.1.0");
	CHECK_EQ(size_of(img, "/d/f"), 16384);
	simfs_free(img);
	hooked = 1;
}

/* What the engine relies on (issue 4): /proc/self/fd reopens, RWF_ATOMIC,
 * and a durable write's size. */
static void engine_model(void)
{
	struct simfs *fs = simfs_new(&(struct simfs_config){.seed = 3, .dio_align = 512,
							    .atomic_write_max = 16384, .proc_fd = true});
	CHECK_OK(simfs_mkdir(fs, "/d"));
	static uint8_t zero[4096];
	CHECK_OK(simfs_put(fs, "/d/f", zero, 1000, 0644));
	simfs_install(fs);
	int fd = S->open("/d/f", O_RDWR | O_DIRECT, 0);
	CHECK(fd >= 0);
	/* /proc/self/fd/N: the same inode, a descriptor of its own (buffered) */
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	int twin = S->open(p, O_RDWR, 0);
	CHECK(twin >= 0 && twin != fd);
	struct stat a, b;
	CHECK_OK(S->fstat(fd, &a));
	CHECK_OK(S->fstat(twin, &b));
	CHECK_EQ(a.st_ino, b.st_ino);
	CHECK_EQ(S->open("/proc/self/fd/99999", O_RDWR, 0), -ENOENT);
	/* a buffered write through the twin is made durable by an fdatasync of
	 * the other descriptor: durability is the inode's */
	uint8_t *buf;
	CHECK_OK(posix_memalign((void **)&buf, 4096, 16384));
	memset(buf, 'T', 16384);
	CHECK_EQ(S->pwritev(twin, &(struct iovec){buf, 100}, 1, 0, 0), 100);
	CHECK_EQ(simfs_pending(fs, NULL, 0), 1);
	CHECK_OK(S->fdatasync(fd));
	CHECK_EQ(simfs_pending(fs, NULL, 0), 0);

	/* statx reports the atomic write limits */
	struct atomio_statx stx;
	CHECK_OK(S->statx(fd, "", AT_EMPTY_PATH, ATOMIO_STATX_WRITE_ATOMIC, &stx));
	CHECK(stx.stx_mask & ATOMIO_STATX_WRITE_ATOMIC);
	CHECK(stx.stx_attributes & ATOMIO_STATX_ATTR_WRITE_ATOMIC);
	CHECK_EQ(stx.stx_atomic_write_unit_min, 512u);
	CHECK_EQ(stx.stx_atomic_write_unit_max, 16384u);
	CHECK_EQ(stx.stx_atomic_write_segments_max, 1u);
	/* RWF_ATOMIC: O_DIRECT, a power of two within the limits, aligned */
	int at = RWF_ATOMIC | RWF_DSYNC;
	CHECK_EQ(S->pwritev(twin, &(struct iovec){buf, 4096}, 1, 4096, at), -EINVAL);
	CHECK_EQ(S->pwritev(fd, &(struct iovec){buf, 3072}, 1, 0, at), -EINVAL);
	CHECK_EQ(S->pwritev(fd, &(struct iovec){buf, 4096}, 1, 2048, at), -EINVAL);
	CHECK_EQ(S->pwritev(fd, &(struct iovec){buf, 32768}, 1, 0, at), -EINVAL);

	/* An extending buffered write (pending), then an atomic durable write
	 * inside the new size but beyond the durable one: once it returned, a
	 * crash keeps its data and the size needed to read it, whatever became
	 * of the earlier write's size change (O_DSYNC). */
	CHECK_EQ(S->pwritev(twin, &(struct iovec){buf, 512}, 1, 65536, 0), 512);
	memset(buf, 'A', 8192);
	CHECK_EQ(S->pwritev(fd, &(struct iovec){buf, 8192}, 1, 8192, at), 8192);
	struct simfs_item it[4];
	CHECK_EQ(simfs_pending(fs, it, 4), 2); /* the buffered write's data and size */
	struct simfs *img = img_with(fs, "u512:D,D");
	CHECK_EQ(size_of(img, "/d/f"), 16384);
	CHECK_EQ(byte_at(img, "/d/f", 8192), 'A');
	CHECK_EQ(byte_at(img, "/d/f", 16383), 'A');
	simfs_free(img);

	/* Until it returns, an atomic write is all or nothing, its size change
	 * included (no separate size item), and never torn. */
	memset(buf, 'Z', 16384);
	hooked = -1;
	simfs_set_hook(fs, atomic_hook, NULL);
	CHECK_EQ(S->pwritev(fd, &(struct iovec){buf, 16384}, 1, 131072, at), 16384);
	simfs_set_hook(fs, NULL, NULL);
	CHECK_EQ(hooked, 1);
	free(buf);
	S->close(twin);
	S->close(fd);
	simfs_uninstall();
	simfs_free(fs);
}

/* --- stores of several processes (simfs.h, STORES OF SEVERAL PROCESSES) --- */

struct waiter {
	struct simfs *fs;
	int fd;
	_Atomic int state; /* 1 waiting, 2 got it */
};

static void *wait_lock(void *arg)
{
	struct waiter *w = arg;
	simfs_enter(w->fs);
	atomic_store(&w->state, 1);
	CHECK_OK(S->ofd_lock(w->fd, SYS_LK_WAIT, F_WRLCK, 100, 1));
	atomic_store(&w->state, 2);
	return NULL;
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* A hook that kills the process of the thread that reaches it, at the
 * write to /d/die. */
static _Atomic int died_at;
static void die_hook(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
{
	(void)arg;
	if (op->kind == SIMFS_OP_WRITE && !strcmp(op->path, "/d/die") && simfs_proc_get() == 9) {
		atomic_store(&died_at, 1);
		simfs_proc_die(fs); /* never returns */
	}
}

static void *dying(void *arg)
{
	struct simfs *fs = arg;
	simfs_enter(fs);
	simfs_proc_set(9);
	int fd = S->open("/d/die", O_RDWR | O_CREAT, 0600);
	CHECK(fd >= 0);
	CHECK_OK(S->ofd_lock(fd, SYS_LK_SET, F_WRLCK, 0, 1));
	char c = 'x';
	S->pwritev(fd, &(struct iovec){&c, 1}, 1, 0, 0);
	CHECK(!"a dead process's thread went on");
	return NULL;
}

static void shared_model(void)
{
	struct simfs *fs = simfs_new(&(struct simfs_config){.seed = 2});
	simfs_install(fs);
	struct simfs *prev = simfs_enter(fs);
	CHECK_OK(simfs_mkdir(fs, "/d"));
	int a = S->open("/d/log", O_RDWR | O_CREAT, 0600), b = S->open("/d/log", O_RDWR, 0);
	int r = S->open("/d/log", O_RDONLY, 0);
	CHECK(a >= 0 && b >= 0 && r >= 0);

	/* flock: shared ones together, an exclusive one alone */
	CHECK_OK(S->flock(a, LOCK_SH | LOCK_NB));
	CHECK_OK(S->flock(b, LOCK_SH | LOCK_NB));
	CHECK_EQ(S->flock(r, LOCK_EX | LOCK_NB), -EWOULDBLOCK);
	CHECK_OK(S->flock(a, LOCK_UN));
	CHECK_EQ(S->flock(b, LOCK_EX | LOCK_NB), 0); /* its own shared one, upgraded */
	CHECK_EQ(S->flock(a, LOCK_SH | LOCK_NB), -EWOULDBLOCK);
	CHECK_OK(S->flock(b, LOCK_UN));

	/* OFD byte ranges: per description, read and write, split on unlock */
	CHECK_OK(S->ofd_lock(a, SYS_LK_SET, F_WRLCK, 10, 5));
	CHECK_EQ(S->ofd_lock(b, SYS_LK_TEST, F_RDLCK, 12, 1), -EAGAIN);
	CHECK_OK(S->ofd_lock(b, SYS_LK_TEST, F_WRLCK, 15, 1));
	CHECK_OK(S->ofd_lock(b, SYS_LK_SET, F_RDLCK, 0, 10));
	CHECK_OK(S->ofd_lock(r, SYS_LK_SET, F_RDLCK, 0, 10)); /* read locks share */
	CHECK_EQ(S->ofd_lock(a, SYS_LK_SET, F_WRLCK, 9, 1), -EAGAIN);
	CHECK_OK(S->ofd_lock(a, SYS_LK_SET, F_UNLCK, 11, 2)); /* [10,11) and [13,15) stay */
	CHECK_OK(S->ofd_lock(b, SYS_LK_SET, F_WRLCK, 11, 2));
	CHECK_EQ(S->ofd_lock(b, SYS_LK_TEST, F_WRLCK, 10, 1), -EAGAIN);
	CHECK_EQ(S->ofd_lock(b, SYS_LK_TEST, F_WRLCK, 14, 1), -EAGAIN);
	CHECK_EQ(S->ofd_lock(r, SYS_LK_SET, F_WRLCK, 20, 1), -EBADF); /* read-only description */
	CHECK_EQ(S->flock(r, LOCK_EX | LOCK_NB), 0); /* flock and OFD locks ignore each other */
	CHECK_OK(S->close(r));
	CHECK_OK(S->ofd_lock(b, SYS_LK_SET, F_WRLCK, 0, 10)); /* r's read lock went with it */
	/* a lock far beyond the end, as atomio's lock bytes */
	CHECK_OK(S->ofd_lock(a, SYS_LK_SET, F_WRLCK, 1ull << 62, 1));
	CHECK_EQ(S->ofd_lock(b, SYS_LK_TEST, F_WRLCK, 1ull << 62, 1), -EAGAIN);

	/* WAIT: another thread waits until the holder lets go */
	CHECK_OK(S->ofd_lock(a, SYS_LK_SET, F_WRLCK, 100, 1));
	struct waiter w = {.fs = fs, .fd = b};
	pthread_t th;
	CHECK_OK(pthread_create(&th, NULL, wait_lock, &w));
	while (atomic_load(&w.state) != 1)
		nap_ms(1);
	nap_ms(50);
	CHECK_EQ(atomic_load(&w.state), 1);
	CHECK_OK(S->close(a)); /* its locks go with it */
	CHECK_OK(pthread_join(th, NULL));
	CHECK_EQ(atomic_load(&w.state), 2);

	/* A WAIT that nothing could end fails loudly (abort), not hangs */
	printf("(expected below: simfs's message for a lock wait that could never end)\n");
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int c = S->open("/d/log", O_RDWR, 0);
		S->ofd_lock(c, SYS_LK_WAIT, F_WRLCK, 100, 1); /* b, of this thread, holds it */
		_exit(0);
	}
	int status = 0;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);

	/* Processes: a dead one's descriptors close, its locks go */
	int old = simfs_proc_set(7);
	int p7 = S->open("/d/log", O_RDWR, 0), q7 = S->open("/d/log", O_RDWR, 0);
	simfs_proc_set(old);
	CHECK_OK(S->ofd_lock(p7, SYS_LK_SET, F_WRLCK, 200, 1));
	CHECK_OK(S->flock(q7, LOCK_SH | LOCK_NB));
	CHECK_EQ(S->ofd_lock(b, SYS_LK_TEST, F_WRLCK, 200, 1), -EAGAIN);
	CHECK_EQ(simfs_proc_kill(fs, 7), 2);
	CHECK_OK(S->ofd_lock(b, SYS_LK_TEST, F_WRLCK, 200, 1));
	CHECK_OK(S->flock(b, LOCK_EX | LOCK_NB));
	CHECK_EQ(S->pread(p7, &(char){0}, 1, 0), -EBADF);

	/* shared memory and the volatile "-shm" file: no crash point, durable
	 * at once, one memory for every mapping of the inode */
	int saved_hooks = hooks;
	hooks = 0;
	simfs_set_hook(fs, count_hook, NULL);
	size_t pend = simfs_pending(fs, NULL, 0);
	int s1 = S->open("/d/log-shm", O_RDWR | O_CREAT, 0600);
	CHECK(s1 >= 0);
	CHECK_OK(S->ftruncate(s1, 8192));
	int s2 = S->open("/d/log-shm", O_RDWR, 0);
	CHECK_EQ(hooks, 0);
	CHECK_EQ(simfs_pending(fs, NULL, 0), pend);
	struct simfs *img = simfs_crash(fs, NULL);
	CHECK_EQ(size_of(img, "/d/log-shm"), 8192);
	simfs_free(img);
	void *m1, *m2;
	CHECK_EQ(S->shm_map(s1, 16384, &m1), -EINVAL); /* beyond the end */
	CHECK_OK(S->shm_map(s1, 8192, &m1));
	CHECK_OK(S->shm_map(s2, 4096, &m2));
	CHECK(m1 == m2);
	memset(m1, 'M', 8192);
	CHECK_OK(S->shm_unmap(m1, 8192));
	CHECK_OK(S->shm_unmap(m2, 4096));
	CHECK_OK(S->shm_map(s2, 8192, &m2)); /* the inode's memory, kept */
	CHECK_EQ(((char *)m2)[8191], 'M');
	CHECK_OK(S->ftruncate(s1, 4096)); /* beyond the size: gone */
	CHECK_EQ(((char *)m2)[4095], 'M');
	CHECK_EQ(((char *)m2)[4096], 0);
	CHECK_OK(S->ftruncate(s1, 0)); /* to nothing: fresh memory for later mappings */
	CHECK_OK(S->ftruncate(s1, 8192));
	CHECK_OK(S->shm_map(s1, 8192, &m1));
	CHECK(m1 != m2);
	CHECK_EQ(((char *)m1)[0], 0);
	CHECK_OK(S->shm_unmap(m1, 8192));
	CHECK_OK(S->shm_unmap(m2, 8192));
	CHECK_OK(S->shm_map(-1, 4096, &m1)); /* anonymous */
	CHECK_OK(S->shm_unmap(m1, 4096));
	CHECK_OK(S->unlink("/d/log-shm"));
	CHECK_EQ(hooks, 0);
	img = simfs_crash(fs, NULL);
	CHECK(!simfs_exists(img, "/d/log-shm"));
	simfs_free(img);
	hooks = saved_hooks;
	/* after a power cut in place, old mappings are never handed out */
	CHECK_OK(S->close(s1));
	CHECK_OK(S->close(s2));
	s1 = S->open("/d/x-shm", O_RDWR | O_CREAT, 0600);
	CHECK_OK(S->ftruncate(s1, 4096));
	CHECK_OK(S->shm_map(s1, 4096, &m1));
	memset(m1, 'X', 4096);
	simfs_reset(fs, simfs_crash(fs, NULL));
	s2 = S->open("/d/x-shm", O_RDWR, 0);
	CHECK_OK(S->shm_map(s2, 4096, &m2));
	CHECK(m1 != m2 && ((char *)m2)[0] == 0);
	CHECK_EQ(((char *)m1)[0], 'X'); /* the old store's, until it unmaps it */
	CHECK_OK(S->shm_unmap(m1, 4096));
	CHECK_OK(S->shm_unmap(m2, 4096));
	CHECK_OK(S->close(s1));

	/* A process dies at a crash point of its thread: its descriptors
	 * close, the thread never returns, the others go on */
	simfs_set_hook(fs, die_hook, NULL);
	CHECK_OK(pthread_create(&th, NULL, dying, fs));
	CHECK_OK(pthread_detach(th));
	while (!atomic_load(&died_at))
		nap_ms(1);
	int c = S->open("/d/die", O_RDWR, 0);
	CHECK(c >= 0);
	CHECK_OK(S->ofd_lock(c, SYS_LK_WAIT, F_WRLCK, 0, 1)); /* its lock went with it */
	CHECK_EQ(byte_at(fs, "/d/die", 0), 'x'); /* its write was issued */
	CHECK_OK(S->pwritev(c, &(struct iovec){"y", 1}, 1, 1, 0) == 1 ? 0 : -1); /* hooks go on */
	simfs_set_hook(fs, NULL, NULL);
	simfs_enter(prev);
	simfs_uninstall();
	/* (the dead thread stays blocked; fs is not freed under it) */
	printf("shared stores ok: OFD and flock locks, WAIT, processes killed, shm_map, volatile files\n");
}

int main(void)
{
	struct simfs *fs = simfs_new(&(struct simfs_config){.seed = 1, .dio_align = 512});
	CHECK(fs);
	CHECK_OK(simfs_mkdir(fs, "/d"));
	simfs_install(fs);
	simfs_set_hook(fs, count_hook, NULL);

	/* A created file is pending until its directory is synced; its data
	 * until the file is. */
	int fd = S->open("/d/a", O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(S->open("/d/a", O_RDWR | O_CREAT | O_EXCL, 0644), -EEXIST);
	uint8_t buf[8192];
	memset(buf, 'A', sizeof(buf));
	CHECK_EQ(S->pwritev(fd, &(struct iovec){buf, 1024}, 1, 0, 0), 1024);
	CHECK_EQ(size_of(fs, "/d/a"), 1024); /* visible at once */
	struct simfs_item it[8];
	CHECK_EQ(simfs_pending(fs, it, 8), 3); /* create, data, size */
	CHECK_EQ(it[0].kind, SIMFS_DIROP);
	CHECK_EQ(it[1].kind, SIMFS_DATA);
	CHECK_EQ(it[2].kind, SIMFS_SIZE);
	CHECK_EQ(simfs_item_units(&it[1], 512), 2);
	CHECK_EQ(simfs_item_units(&it[1], 4096), 1);

	struct simfs *img = simfs_crash(fs, NULL); /* nothing landed */
	CHECK(!simfs_exists(img, "/d/a"));
	simfs_free(img);
	img = img_with(fs, "u512:K,D,D"); /* the name only: an empty file */
	CHECK_EQ(size_of(img, "/d/a"), 0);
	simfs_free(img);
	img = img_with(fs, "u512:K,K,D"); /* data landed, size did not */
	CHECK_EQ(size_of(img, "/d/a"), 0);
	simfs_free(img);
	img = img_with(fs, "u512:K,D,K"); /* size landed, data did not: zeros */
	CHECK_EQ(size_of(img, "/d/a"), 1024);
	CHECK_EQ(byte_at(img, "/d/a", 0), 0);
	simfs_free(img);
	img = img_with(fs, "u512:K,T1.1.0,K"); /* torn: first sector only */
	CHECK_EQ(byte_at(img, "/d/a", 0), 'A');
	CHECK_EQ(byte_at(img, "/d/a", 511), 'A');
	CHECK_EQ(byte_at(img, "/d/a", 512), 0);
	simfs_free(img);
	img = img_with(fs, "u512:K,T2.1.0,K"); /* torn: second sector only */
	CHECK_EQ(byte_at(img, "/d/a", 0), 0);
	CHECK_EQ(byte_at(img, "/d/a", 1023), 'A');
	simfs_free(img);

	/* fsync of the file: data and size durable, the name still not */
	CHECK_OK(S->fsync(fd));
	CHECK_EQ(simfs_pending(fs, it, 8), 1);
	img = simfs_crash(fs, NULL);
	CHECK(!simfs_exists(img, "/d/a"));
	simfs_free(img);
	img = img_with(fs, "u512:K");
	CHECK_EQ(size_of(img, "/d/a"), 1024);
	CHECK_EQ(byte_at(img, "/d/a", 1000), 'A');
	simfs_free(img);
	/* fsync of the directory: the name too */
	int dfd = S->open("/d", O_RDONLY | O_DIRECTORY, 0);
	CHECK(dfd >= 0);
	CHECK_OK(S->fsync(dfd));
	CHECK_EQ(simfs_pending(fs, it, 8), 0);
	img = simfs_crash(fs, NULL);
	CHECK_EQ(size_of(img, "/d/a"), 1024);
	simfs_free(img);

	/* Overwrites apply in issue order; RWF_DSYNC makes only its own write
	 * durable, and an earlier pending write to the same bytes can never
	 * land on top of it. */
	memset(buf, 'B', sizeof(buf));
	CHECK_EQ(S->pwritev(fd, &(struct iovec){buf, 512}, 1, 0, 0), 512);
	memset(buf, 'C', sizeof(buf));
	CHECK_EQ(S->pwritev(fd, &(struct iovec){buf, 512}, 1, 0, RWF_DSYNC), 512);
	CHECK_EQ(simfs_pending(fs, it, 8), 1); /* the 'B' write */
	img = img_with(fs, "u512:K");
	CHECK_EQ(byte_at(img, "/d/a", 0), 'C');
	simfs_free(img);
	img = simfs_crash(fs, NULL);
	CHECK_EQ(byte_at(img, "/d/a", 0), 'C');
	simfs_free(img);
	CHECK_OK(S->fdatasync(fd));

	/* Shrink then grow: a landed shrink zeroes what lay beyond */
	CHECK_OK(S->ftruncate(fd, 100));
	CHECK_OK(S->ftruncate(fd, 2048));
	CHECK_EQ(byte_at(fs, "/d/a", 600), 0);
	img = img_with(fs, "u512:D,K"); /* only the growth landed */
	CHECK_EQ(size_of(img, "/d/a"), 2048);
	CHECK_EQ(byte_at(img, "/d/a", 600), 'A'); /* the shrink did not */
	simfs_free(img);
	img = img_with(fs, "u512:K,K");
	CHECK_EQ(byte_at(img, "/d/a", 600), 0);
	CHECK_EQ(byte_at(img, "/d/a", 99), 'C');
	simfs_free(img);
	img = img_with(fs, "u512:K,D");
	CHECK_EQ(size_of(img, "/d/a"), 100);
	simfs_free(img);
	CHECK_OK(S->fsync(fd));

	/* Enumeration: every combination when small, deterministic picks */
	memset(buf, 'D', sizeof(buf));
	CHECK_EQ(S->pwritev(fd, &(struct iovec){buf, 2048}, 1, 4096, 0), 2048);
	/* pending: data (4 units of 512 -> 2 + 14 fates), size (2 fates) */
	struct simfs_enum e = {.unit = 512, .exhaustive_cap = 1000, .samples = 5, .seed = 3};
	bool ex;
	CHECK_EQ(simfs_enum_count(fs, &e, &ex), 32);
	CHECK(ex);
	int distinct = 0;
	uint64_t seen[64];
	for (uint64_t i = 0; i < 32; i++) {
		struct simfs_pick p;
		CHECK_OK(simfs_enum_pick(fs, &e, i, &p));
		char *s = simfs_pick_format(&p);
		struct simfs_pick q;
		CHECK_OK(simfs_pick_parse(s, &q)); /* round trip */
		char *s2 = simfs_pick_format(&q);
		CHECK(!strcmp(s, s2));
		img = simfs_crash(fs, &p);
		uint64_t sig = 0;
		for (int k = 0; k < 4; k++)
			sig = sig * 3 + (size_of(img, "/d/a") > 4096 + 512 * k
						 ? (byte_at(img, "/d/a", 4096 + 512 * (uint64_t)k) == 'D' ? 2u : 1u)
						 : 0u);
		sig = sig * 2 + (size_of(img, "/d/a") == 6144);
		bool dup = false;
		for (int k = 0; k < distinct; k++)
			dup |= seen[k] == sig;
		if (!dup)
			seen[distinct++] = sig;
		simfs_free(img);
		free(s);
		free(s2);
		simfs_pick_free(&p);
		simfs_pick_free(&q);
	}
	/* data units: 16 landing patterns, times size landed or not; but with
	 * the size lost nothing past 4096+... is visible: 16 + 1 states */
	CHECK_EQ(distinct, 17);
	struct fe fe = {0};
	uint64_t visited;
	CHECK_OK(simfs_foreach_image(fs, &e, each, &fe, &visited));
	CHECK_EQ(visited, 32);
	CHECK_EQ(fe.seen, 32);
	CHECK(fe.with_d > 0 && fe.with_d < 32);
	CHECK(simfs_current() == fs);
	e.exhaustive_cap = 10;
	CHECK_EQ(simfs_enum_count(fs, &e, &ex), 5);
	CHECK(!ex);
	struct simfs_pick p1, p2;
	simfs_enum_pick(fs, &e, 4, &p1);
	simfs_enum_pick(fs, &e, 4, &p2);
	char *a = simfs_pick_format(&p1), *b = simfs_pick_format(&p2);
	CHECK(!strcmp(a, b));
	free(a);
	free(b);
	simfs_pick_free(&p1);
	simfs_pick_free(&p2);
	CHECK_OK(S->fsync(fd));

	/* O_DIRECT alignment, statx, sysfs absent, locks, rename, realpath */
	int dio = S->open("/d/a", O_RDWR | O_DIRECT, 0);
	CHECK(dio >= 0);
	void *al;
	CHECK_OK(posix_memalign(&al, 4096, 4096));
	CHECK_EQ(S->pwritev(dio, &(struct iovec){al, 100}, 1, 0, 0), -EINVAL);
	CHECK_EQ(S->pwritev(dio, &(struct iovec){(char *)al + 1, 512}, 1, 0, 0), -EINVAL);
	CHECK_EQ(S->pwritev(dio, &(struct iovec){al, 512}, 1, 1, 0), -EINVAL);
	CHECK_EQ(S->pwritev(dio, &(struct iovec){al, 512}, 1, 512, 0), 512);
	CHECK_EQ(S->pread(dio, al, 512, 0), 512);
	CHECK_OK(S->fdatasync(dio));
	CHECK_EQ(simfs_pending(fs, it, 8), 0);
	free(al);
	struct atomio_statx stx;
	CHECK_OK(S->statx(dio, "", AT_EMPTY_PATH, ATOMIO_STATX_DIOALIGN, &stx));
	CHECK(stx.stx_mask & ATOMIO_STATX_DIOALIGN);
	CHECK_EQ(stx.stx_dio_offset_align, 512);
	CHECK_EQ(S->open("/sys/dev/block/259:1/queue/physical_block_size", O_RDONLY, 0), -ENOENT);
	CHECK_OK(S->flock(fd, LOCK_EX | LOCK_NB));
	CHECK_EQ(S->flock(dio, LOCK_EX | LOCK_NB), -EWOULDBLOCK);
	CHECK_OK(S->close(fd));
	CHECK_OK(S->flock(dio, LOCK_EX | LOCK_NB)); /* released by close */
	char rp[PATH_MAX];
	CHECK_OK(S->realpath("/d//a", rp));
	CHECK(!strcmp(rp, "/d/a"));
	CHECK_EQ(S->realpath("/d/nope", rp), -ENOENT);
	int t = S->open("/d/t", O_RDWR | O_CREAT | O_EXCL, 0600);
	CHECK(t >= 0);
	CHECK_OK(S->fsync(t));
	CHECK_EQ(S->rename_noreplace("/d/t", "/d/a"), -EEXIST);
	CHECK_OK(S->rename_noreplace("/d/t", "/d/u"));
	img = simfs_crash(fs, NULL);
	CHECK(!simfs_exists(img, "/d/u") && !simfs_exists(img, "/d/t"));
	simfs_free(img);
	img = img_with(fs, "u512:D,K"); /* the rename without the creation */
	CHECK(simfs_exists(img, "/d/u"));
	simfs_free(img);
	CHECK_OK(S->fsync(dfd));
	CHECK_OK(S->unlink("/d/u"));
	img = simfs_crash(fs, NULL);
	CHECK(simfs_exists(img, "/d/u")); /* the unlink is not durable yet */
	simfs_free(img);

	/* A simulated machine crash: descriptors die, a new open works */
	simfs_reset(fs, simfs_crash(fs, NULL));
	CHECK_EQ(S->pwritev(dio, &(struct iovec){buf, 1}, 1, 0, 0), -EIO);
	CHECK_OK(S->close(dio));
	CHECK_OK(S->close(t));
	CHECK_OK(S->close(dfd));
	CHECK(simfs_exists(fs, "/d/u"));
	int n = S->open("/d/u", O_RDWR, 0);
	CHECK(n >= 0);
	CHECK_OK(S->flock(n, LOCK_EX | LOCK_NB)); /* locks died with the crash */
	CHECK_OK(S->close(n));

	/* sysfs when asked for, getrandom deterministic per seed */
	struct simfs *f2 = simfs_new(&(struct simfs_config){.seed = 1, .phys_block = 4096});
	struct simfs *prev = simfs_enter(f2);
	int sfd = S->open("/d", O_RDONLY, 0);
	CHECK_EQ(sfd, -ENOENT);
	char p[128];
	struct stat sb;
	CHECK_OK(S->lstat("/", &sb));
	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/queue/physical_block_size", major(sb.st_dev),
		 minor(sb.st_dev));
	sfd = S->open(p, O_RDONLY, 0);
	CHECK(sfd >= 0);
	char v[16] = "";
	CHECK_EQ(S->pread(sfd, v, sizeof(v), 0), 5);
	CHECK(!strncmp(v, "4096\n", 5));
	uint64_t r1, r2;
	CHECK_OK(S->getrandom(&r1, 8));
	simfs_enter(prev);
	simfs_free(f2);
	f2 = simfs_new(&(struct simfs_config){.seed = 1});
	prev = simfs_enter(f2);
	CHECK_OK(S->getrandom(&r2, 8));
	CHECK_EQ(r1, r2);
	simfs_enter(prev);
	simfs_free(f2);

	/* materialise to a real directory */
	CHECK_OK(simfs_materialize(fs, t_dir()));
	size_t len;
	uint8_t *d = t_slurp(t_path("d/a"), &len);
	CHECK(d && len == 6144 && d[4096] == 'D');
	free(d);

	CHECK(hooks > 10);
	simfs_uninstall();
	simfs_free(fs);
	engine_model();
	shared_model();
	printf("simfs model ok (%d crash points)\n", hooks);
	return 0;
}
