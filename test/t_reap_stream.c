/* A dead process's half-filled arena block is taken back while a steady
 * stream of other processes' events keeps waking the waiters (shm.c,
 * shm_wait_locked_drops): the reap must not wait for a wait that runs out,
 * which never comes while the stream lasts.  A child joins the store, takes
 * an entry and an arena block at the arena's head (as a commit does before
 * it copies its data) and is SIGKILLed; the test fills the rest of the
 * arena with blocks freed at once (the head cannot pass the dead one's),
 * then commits a small group -- which must wait for arena space -- while a
 * thread wakes the arena's waiters every millisecond, STREAM times (as
 * frees of other processes do).  The commit must end while the stream
 * still goes on.  Uses the library's internals (shm_lock, the arena). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>

#include "shm.h"
#include "t.h"

#define STREAM 3000 /* wakes, a millisecond apart or more: 30 times SHM_REAP_NS */

static atomio *st;
static _Atomic int wakes, stop;

static void *waker(void *arg)
{
	(void)arg;
	for (int i = 0; i < STREAM && !atomic_load(&stop); i++) {
		shm_wake(st, &st->sh->ev_space);
		nanosleep(&(struct timespec){0, 1000000}, NULL);
		atomic_store(&wakes, i + 1);
	}
	return NULL;
}

int main(void)
{
	t_dir();
	const char *log = t_path("log");
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	CHECK_OK(atomio_open(log, &o, &st));
	int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
	CHECK(f >= 0);

	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		atomio *mine;
		if (atomio_open(log, &o, &mine) != 0)
			_exit(1);
		uint32_t idx1;
		uint64_t off;
		shm_lock(mine);
		if (shm_ent_alloc(mine, &idx1) != 0 || shm_arena_alloc_locked(mine, 4096, idx1, &off) != 0)
			_exit(1);
		shm_ent(mine->sh, idx1)->blk = off;
		shm_unlock(mine);
		kill(getpid(), SIGKILL); /* half-way through filling its block */
		_exit(1);
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFSIGNALED(ws));

	/* The rest of the arena: blocks freed at once, behind the dead one's. */
	shm_lock(st);
	CHECK(st->S->arena_tail - st->S->arena_head == 4096);
	uint32_t mine1;
	CHECK_OK(shm_ent_alloc(st, &mine1));
	uint64_t blocks = 0, off;
	for (uint64_t size = 65536; size >= 64; size /= 2)
		while (shm_arena_alloc_locked(st, size, mine1, &off) == 0) {
			shm_arena_free(st, off);
			blocks++;
		}
	shm_ent_free(st, mine1);
	shm_arena_advance_locked(st);
	CHECK(st->S->arena_tail - st->S->arena_head > st->sh->arena_size - 64);
	shm_unlock(st);

	pthread_t th;
	CHECK_OK(pthread_create(&th, NULL, waker, NULL));
	CHECK_EQ(atomio_pwrite(st, f, "small", 5, 0), 5);
	int at = atomic_load(&wakes);
	atomic_store(&stop, 1);
	CHECK_OK(pthread_join(th, NULL));
	printf("arena filled with %" PRIu64 " blocks behind a dead process's; the small commit ended after %d "
	       "of %d wakes of the arena's waiters\n", blocks, at, STREAM);
	if (at >= STREAM) {
		fprintf(stderr, "the dead process was reaped only when the stream of wakes ended\n");
		return 1;
	}
	CHECK_OK(atomio_close(st));
	size_t n;
	uint8_t *d = t_slurp(t_path("f"), &n);
	CHECK(n == 5 && !memcmp(d, "small", 5));
	free(d);
	printf("ok: a dead process's arena block taken back while other events kept waking the waiters\n");
	return 0;
}
