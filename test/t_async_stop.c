/* atomio_close stops the asynchronous worker (async.c, async_stop): it sets
 * the worker's stop flag and wakes it.  The worker looks at the flag, then
 * reads the wake word and waits on it; a wake that falls between the two is
 * lost, and the worker sleeps out its whole wait (SHM_REAP_NS, 100 ms) before
 * it sees the flag.  The flag is set under the shared mutex, which the worker
 * holds from its look to its read, so that no wake falls there.
 *
 * Deterministically: a hook (async_idle_hook) holds the worker in that window
 * until the close has set the flag and either woken it (the wake word moved)
 * or is waiting for the mutex (its waiters bit); this process's futex_wait
 * then finds the worker about to wait for a wake that already happened: a
 * lost wake, counted (and the wait cut short).  Without the mutex the count
 * was 1; with it, 0. */
#include <pthread.h>

#include "shm.h"
#include "sys.h"
#include "t.h"

static struct atomio_sysops ops;
static atomio *st;
static _Atomic int armed, in_window;
static _Atomic uint32_t *wake_word;
static _Atomic int woke_in_window, lost;

static void idle_hook(atomio *s)
{
	if (s != st || !atomic_exchange(&armed, 0))
		return;
	uint32_t seq0 = atomic_load(wake_word);
	atomic_store(&in_window, 1);
	/* until the close has set the flag ... */
	for (bool stop = false; !stop;) {
		own_lock(s);
		stop = s->worker_stop;
		own_unlock(s);
		sched_yield();
	}
	/* ... and woken the worker, or waits for the mutex this thread holds
	 * (glibc's robust mutex: FUTEX_WAITERS in its lock word) */
	for (;;) {
		if (atomic_load(wake_word) != seq0) {
			atomic_store(&woke_in_window, 1);
			break;
		}
		if (__atomic_load_n(&s->sh->mu.__data.__lock, __ATOMIC_ACQUIRE) & 0x80000000)
			break;
		sched_yield();
	}
}

static int w_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t timeout_ns)
{
	if (word == wake_word && atomic_load(&woke_in_window) && atomic_load(word) == val) {
		atomic_fetch_add(&lost, 1); /* only its timeout would end this wait */
		return -ETIMEDOUT;
	}
	return atomio_sys_linux.futex_wait(word, val, timeout_ns);
}

static int ncb;
static void done_cb(void *arg, int result)
{
	(void)arg;
	CHECK_EQ(result, 0);
	ncb++;
}

static void *closer(void *arg)
{
	(void)arg;
	CHECK_OK(atomio_close(st));
	return NULL;
}

int main(void)
{
	t_dir();
	ops = atomio_sys_linux;
	ops.name = "t_async_stop";
	ops.futex_wait = w_futex_wait;
	atomio_sys_set(&ops);
	async_idle_hook = idle_hook;
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
	CHECK(f >= 0);
	wake_word = &shm_procs(st->sh)[st->me - 1].wake.seq;
	/* one asynchronous group: the worker runs, then idles */
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, f, "abc", 3, 0));
	CHECK_OK(atomio_tx_commit_async(tx, done_cb, NULL));
	while (ncb < 1)
		CHECK(atomio_poll(st, -1) >= 0);
	/* the worker round its loop once more, into the hook */
	atomic_store(&armed, 1);
	shm_lock(st);
	shm_wake(st, &shm_procs(st->sh)[st->me - 1].wake);
	shm_unlock(st);
	while (!atomic_load(&in_window))
		sched_yield();
	pthread_t t;
	CHECK_OK(pthread_create(&t, NULL, closer, NULL));
	CHECK_OK(pthread_join(t, NULL));
	printf("the close's wake %s the worker's look at the flag and its wait; lost wakes: %d\n",
	       atomic_load(&woke_in_window) ? "fell between" : "came after", atomic_load(&lost));
	if (atomic_load(&lost)) {
		fprintf(stderr, "FAIL: the worker was woken between its look at the stop flag and its read of "
				"the wake word: it would sleep out its whole wait\n");
		return 1;
	}
	printf("ok: no wake of the asynchronous worker's stop is lost\n");
	return 0;
}
