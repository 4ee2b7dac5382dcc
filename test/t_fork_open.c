/* A fork by another thread while a store opens, between the log's open and
 * the fork handler's tracking of its descriptor (store.c, atomio_open): the
 * child gets a copy of the log's open file description, which no handler
 * closes, and every lock the parent takes on it later -- the lock byte that
 * says the parent lives -- would outlive the parent.  Process P opens the
 * store; its ops table forks a child C the moment the log's descriptor is
 * opened (as another thread of P would); C just waits.  P registers a file,
 * commits, and is SIGKILLed; the test's own handle, joined meanwhile, must
 * then find P gone (its lock byte free) and reap it, while C still lives. */
#include <limits.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "shm.h"
#include "sys.h"
#include "t.h"

struct share {
	_Atomic int forked;  /* C was forked inside P's atomio_open */
	_Atomic int ready;   /* P committed */
	_Atomic int release; /* C may go */
};

static struct share *sh;
static char log_path[PATH_MAX];
static struct atomio_sysops ops;
static bool armed;

static void pause_ms(void) { nanosleep(&(struct timespec){0, 1000000}, NULL); }

static int w_open(const char *path, int flags, mode_t mode)
{
	int fd = atomio_sys_linux.open(path, flags, mode);
	if (fd < 0 || !armed || (flags & O_ACCMODE) != O_RDWR)
		return fd;
	char p[64], target[PATH_MAX];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(p, target, sizeof(target) - 1);
	if (n < 0)
		return fd;
	target[n] = 0;
	if (strcmp(target, log_path))
		return fd;
	armed = false;
	pid_t c = fork();
	if (c == 0) {
		/* C: holds its copies of P's descriptors, touches nothing; goes
		 * when the test says, or after a bound of its own. */
		for (int i = 0; i < 60000 && !atomic_load(&sh->release); i++)
			pause_ms();
		_exit(0);
	}
	if (c > 0)
		atomic_store(&sh->forked, 1);
	return fd;
}

int main(void)
{
	t_dir();
	char dir[PATH_MAX];
	CHECK(realpath(t_dir(), dir));
	snprintf(log_path, sizeof(log_path), "%.4000s/log", dir);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;

	pid_t parent = getpid();
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
			_exit(1);
		ops = atomio_sys_linux;
		ops.name = "t_fork_open";
		ops.open = w_open;
		atomio_sys_set(&ops);
		armed = true;
		atomio *st;
		KCHECK(atomio_open(log_path, &o, &st) == 0);
		KCHECK(atomic_load(&sh->forked));
		int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
		KCHECK(f >= 0);
		KCHECK(atomio_pwrite(st, f, "one", 3, 0) == 3);
		atomic_store(&sh->ready, 1);
		for (;;)
			pause();
	}
	while (!atomic_load(&sh->ready))
		pause_ms();
	atomio *st;
	CHECK_OK(atomio_open(log_path, &o, &st)); /* joins */
	kill(p, SIGKILL);
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFSIGNALED(ws));

	/* P is gone; C, its child, still lives.  P's lock byte must be free. */
	int tries = 0;
	bool reaped = false;
	shm_lock(st);
	while (!(reaped = shm_reap_locked(st, true)) && ++tries < 200) {
		shm_unlock(st);
		pause_ms();
		shm_lock(st);
	}
	shm_unlock(st);
	printf("process killed after a fork inside its atomio_open: %s after %d looks\n",
	       reaped ? "reaped" : "still counted alive", tries + 1);
	atomic_store(&sh->release, 1);
	if (!reaped) {
		fprintf(stderr, "the child forked while the store opened kept the killed parent's lock bytes\n");
		return 1;
	}
	int f = atomio_file_open(st, t_path("f"), 0, 0);
	CHECK(f >= 0);
	CHECK_EQ(atomio_pwrite(st, f, "two", 3, 3), 3); /* the store goes on */
	CHECK_OK(atomio_close(st));
	printf("ok: a fork while the store opens leaves the child no copy of the locks that say the "
	       "parent lives\n");
	return 0;
}
