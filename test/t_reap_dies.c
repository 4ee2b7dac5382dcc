/* A reaper dies half-way through a reap (shm.c, reap_one_locked), holding
 * the mutex: what it changed in its working copy of the state is lost, what
 * it wrote in place stays.  The next holder gets the state as last
 * published and must put it right:
 *   queue  the reaper had taken a dead process's private group out of the
 *          queue (in its copy) and freed its entry (in place): the
 *          published queue still names a freed entry (normalize_locked),
 *          which a leader must not take for damage;
 *   role   the reaper had released the dead process's log role (in its
 *          copy) and marked its slot free (in place): no reap looks at a
 *          free slot, so the role would stay taken for good
 *          (reap_unattached_locked).
 * Process D queues a private group, or takes the log role (by the
 * library's internals) and is killed; process R joins, and its attach reaps
 * D -- R's ops table kills it at the first wake that follows (the entry's
 * free; the reap's end), with the mutex held.  Then this process commits. */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>

#include "shm.h"
#include "sys.h"
#include "t.h"

static struct atomio_sysops ops;
static char *mapped; /* R's mapping of the shared state */

static int w_shm_map(int fd, size_t len, void **out)
{
	int r = atomio_sys_linux.shm_map(fd, len, out);
	if (r == 0 && !mapped)
		mapped = *out;
	return r;
}

static size_t kill_at; /* the offset of the word whose wake kills R */

static int w_futex_wake(_Atomic uint32_t *word, int n)
{
	if (mapped && (char *)word == mapped + kill_at)
		kill(getpid(), SIGKILL); /* R: the entry just freed, the mutex held */
	return atomio_sys_linux.futex_wake ? atomio_sys_linux.futex_wake(word, n) : 0;
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "the commit after a reaper died mid-reap waited 60 s: what the dead held "
				"was never released\n";
	(void)!write(2, m, sizeof(m) - 1);
	_exit(1);
}

static int run(const char *mode)
{
	bool queue = !strcmp(mode, "queue");
	char dir[64];
	snprintf(dir, sizeof(dir), "%s", mode);
	CHECK_OK(mkdir(t_path(dir), 0755));
	char log[4200], fpath[4200];
	snprintf(log, sizeof(log), "%s/log", t_path(dir));
	snprintf(fpath, sizeof(fpath), "%s/f", t_path(dir));
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(log, &o, &st));
	int f = atomio_file_open(st, fpath, O_CREAT, 0644);
	CHECK(f >= 0);

	pid_t d = fork();
	CHECK(d >= 0);
	if (d == 0) {
		atomio *mine;
		if (atomio_open(log, &o, &mine) != 0)
			_exit(1);
		shm_lock(mine);
		if (queue) {
			uint32_t idx1;
			if (shm_ent_alloc(mine, &idx1) != 0 || mine->S->q_len)
				_exit(1);
			struct shm_ent *e = shm_ent(mine->sh, idx1);
			e->nsegs = 1;
			e->data_len = 3;
			e->rec_len = 512;
			atomic_store(&e->flags, ENT_PRIVATE);
			e->next = 0;
			atomic_store(&e->state, ENT_QUEUED);
			mine->S->q_head = mine->S->q_tail = idx1;
			mine->S->q_len = 1;
		} else {
			if (mine->S->log_owner)
				_exit(1);
			mine->S->log_owner = mine->me;
		}
		shm_unlock(mine);
		kill(getpid(), SIGKILL); /* its private group queued, or the log role held */
		_exit(1);
	}
	int ws;
	CHECK(waitpid(d, &ws, 0) == d && WIFSIGNALED(ws));

	/* A waiter on the word, so that the wake is a call. */
	struct shm_ev *ev = queue ? &st->sh->ev_space : &st->sh->ev_role;
	kill_at = (size_t)((char *)&ev->seq - (char *)st->sh);
	atomic_fetch_add(&ev->waiters, 1);
	pid_t r = fork();
	CHECK(r >= 0);
	if (r == 0) {
		ops = atomio_sys_linux;
		ops.name = "t_reap_dies";
		ops.futex_wake = w_futex_wake;
		ops.shm_map = w_shm_map;
		atomio_sys_set(&ops);
		atomio *mine;
		(void)atomio_open(log, &o, &mine); /* its attach reaps D */
		_exit(1);
	}
	CHECK(waitpid(r, &ws, 0) == r);
	atomic_fetch_sub(&ev->waiters, 1);
	if (!WIFSIGNALED(ws)) {
		fprintf(stderr, "%s: R was not killed in its reap (status %#x)\n", mode, ws);
		return 1;
	}

	alarm(60); /* a queue that never moves fails the test, not the harness */
	int c = (int)atomio_pwrite(st, f, "one", 3, 0);
	alarm(0);
	if (c != 3) {
		fprintf(stderr, "%s: commit after a reaper died mid-reap: %s\n", mode, atomio_strerror(c));
		return 1;
	}
	CHECK_OK(atomio_close(st));
	size_t n;
	uint8_t *b = t_slurp(fpath, &n);
	CHECK(n == 3 && !memcmp(b, "one", 3));
	free(b);
	printf("%s: a reaper killed mid-reap: the state put right by the next holder, commits go on\n", mode);
	return 0;
}

int main(void)
{
	t_dir();
	signal(SIGALRM, on_alarm);
	int fails = run("queue");
	fails += run("role");
	if (fails)
		return 1;
	printf("ok: reapers killed half-way through a reap leave nothing the next holder does not put right\n");
	return 0;
}
