/*
 * turns.c: writer processes take turns at SQLite's write lock (turns.h).
 */
#include <errno.h>
#include <limits.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/futex.h>

#include "sys.h"
#include "turns.h"

/* atomio's system-call table where the VFS is linked with libatomio's
 * objects (sysio.c), so that a test's table sees these calls too;
 * else the system's. */
extern const struct atomio_sysops *atomio_sys __attribute__((weak));

static int fx_wait(_Atomic uint32_t *w, uint32_t v, uint64_t ns)
{
	if (&atomio_sys && atomio_sys->futex_wait)
		return atomio_sys->futex_wait(w, v, ns);
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
	/* Not FUTEX_PRIVATE: the words are shared between processes. */
	long r = syscall(SYS_futex, w, FUTEX_WAIT, v, &ts, NULL, 0);
	return r < 0 ? -errno : 0;
}

static int fx_wake(_Atomic uint32_t *w, int n)
{
	if (&atomio_sys && atomio_sys->futex_wake)
		return atomio_sys->futex_wake(w, n);
	long r = syscall(SYS_futex, w, FUTEX_WAKE, n, NULL, NULL, 0);
	return r < 0 ? -errno : (int)r;
}

/* End the pending hand-off v (odd), if it still is, and let the
 * connections that yield to it go. */
static void end_handoff(struct turns *t, uint32_t v)
{
	if ((v & 1) && atomic_compare_exchange_strong(&t->tok, &v, v + 1))
		fx_wake(&t->tok, INT_MAX);
}

void turns_yield(struct turns *t, uint32_t handed)
{
	uint32_t v = atomic_load(&t->tok);
	if (!(v & 1) || v == handed)
		return;
	/* Returns when the hand-off ends (its end wakes the word), or after
	 * the bound: the woken one is slow, gone, or was never there. */
	if (fx_wait(&t->tok, v, TURNS_YIELD_NS) == -ETIMEDOUT)
		end_handoff(t, v);
}

void turns_settled(struct turns *t, uint32_t handed)
{
	end_handoff(t, handed ? handed : atomic_load(&t->tok));
}

bool turns_released_write(struct turns *t)
{
	/* A sleeper counts itself before it reads wseq; one that counts itself
	 * after this load sleeps its whole delay, as it would without turns. */
	if (!atomic_load(&t->nwait))
		return false;
	uint32_t v = atomic_load(&t->tok);
	if (!(v & 1) && atomic_compare_exchange_strong(&t->tok, &v, v + 1))
		v++;
	atomic_fetch_add(&t->wseq, 1);
	if (fx_wake(&t->wseq, 1) > 0)
		return true;
	end_handoff(t, v); /* nobody was asleep after all (a sleeper's delay ended) */
	return false;
}

void turns_released_shared(struct turns *t)
{
	if (!atomic_load(&t->xwait))
		return;
	atomic_fetch_add(&t->sseq, 1);
	fx_wake(&t->sseq, INT_MAX);
}

uint32_t turns_sleep(struct turns *t, bool exclusive, uint64_t ns)
{
	if (exclusive) {
		atomic_fetch_add(&t->xwait, 1);
		fx_wait(&t->sseq, atomic_load(&t->sseq), ns);
		atomic_fetch_sub(&t->xwait, 1);
		return 0;
	}
	atomic_fetch_add(&t->nwait, 1);
	int r = fx_wait(&t->wseq, atomic_load(&t->wseq), ns);
	atomic_fetch_sub(&t->nwait, 1);
	if (r != 0)
		return 0; /* the delay ended, or wseq moved before it slept: not handed */
	uint32_t v = atomic_load(&t->tok);
	return v & 1 ? v : 0;
}
