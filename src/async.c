/*
 * async.c: asynchronous commits for event-loop programs.
 *
 * atomio_tx_commit_async queues the group in the same commit queue as
 * atomio_tx_commit (so it takes its place in the one commit order and shares
 * log writes with every other group queued meanwhile, of any process) and
 * returns at once.  A worker thread of the process, started by its first
 * asynchronous commit, leads batches whenever the queue's head has no thread
 * of its own waiting to lead it (commit.c), and collects the process's
 * asynchronous groups that are done, whichever process's thread led them: a
 * leader marks a group done and wakes its process's worker (its slot's wake
 * word, shm.h).  (A second thread, the checkpointer, runs background
 * checkpoints, so that a checkpoint never holds up the asynchronous groups:
 * checkpoint.c.)  A collected group goes to the completion list; its callback
 * runs in whichever thread calls atomio_poll, never while atomio holds a
 * lock, so a callback may begin and commit new groups.
 *
 * For epoll: atomio_event_fd returns an eventfd that is readable exactly
 * while the completion list is not empty (atomio_poll empties both).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "shm.h"

void async_init(atomio *st)
{
	cond_init_monotonic(&st->cq_cv); /* atomio_poll's timeout */
	st->efd = -1;
}

void async_destroy(atomio *st)
{
	pthread_cond_destroy(&st->cq_cv);
	if (st->efd >= 0)
		atomio_sys->close(st->efd);
	st->efd = -1;
}

struct done_ent {
	atomio_tx *t;
	uint64_t batch;
	uint32_t ord;
};

/* Commit order: batch number, then place in the batch. */
static int cmp_done(const void *a, const void *b)
{
	const struct done_ent *x = a, *y = b;
	if (x->batch != y->batch)
		return x->batch < y->batch ? -1 : 1;
	return x->ord < y->ord ? -1 : x->ord > y->ord;
}

/* Move this process's asynchronous groups that are done to the completion
 * list, in commit order.  Mutex held (the entries' states); takes st->lock. */
static void collect_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	own_lock(st);
	bool was_empty = !st->cq_head, any = false;
	size_t nd = 0, cap = 0;
	struct done_ent *done = NULL;
	for (atomio_tx **pp = &st->async_head; *pp;) {
		atomio_tx *t = *pp;
		struct shm_ent *e = shm_ent(st->sh, t->ent);
		if (atomic_load(&e->state) != ENT_DONE || (nd == cap && array_grow(&done, &cap, sizeof(*done)) < 0)) {
			pp = &t->anext;
			continue;
		}
		*pp = t->anext;
		done[nd++] = (struct done_ent){.t = t, .batch = e->batch, .ord = e->ord};
	}
	/* Groups done together may sit in the list in any order (threads list
	 * them in one order and queue them in another): sort them by their
	 * place in the commit order.  (Groups done later come later in it: a
	 * batch's groups are handed back before the next batch's home stage.) */
	if (nd > 1)
		qsort(done, nd, sizeof(*done), cmp_done);
	for (size_t i = 0; i < nd; i++) {
		atomio_tx *t = done[i].t;
		struct shm_ent *e = shm_ent(st->sh, t->ent);
		t->result = e->result;
		t->state = TX_DONE;
		shm_ent_free(st, t->ent);
		t->ent = 0;
		t->cnext = NULL;
		if (st->cq_tail)
			st->cq_tail->cnext = t;
		else
			st->cq_head = t;
		st->cq_tail = t;
		st->async_busy--;
		any = true;
	}
	free(done);
	if (any && was_empty && st->efd >= 0) {
		uint64_t one = 1;
		/* Cannot fail but with a full counter, which is readable anyway. */
		(void)sys_write(st->efd, &one, sizeof(one));
	}
	if (any)
		pthread_cond_broadcast(&st->cq_cv);
	own_unlock(st);
}

void async_collect(atomio *st)
{
	shm_lock(st);
	collect_locked(st);
	shm_unlock(st);
}

void (*async_idle_hook)(atomio *st);

/* The worker: leads batches nobody else is there to lead (asynchronous
 * groups; lazy ones once due, when it holds the flusher role: commit.c,
 * LAZY GROUPS), and collects this process's that are done. */
static void *worker_main(void *arg)
{
	atomio *st = arg;
	struct shm_proc *me = &shm_procs(st->sh)[st->me - 1];
	shm_lock(st);
	for (;;) {
		collect_locked(st);
		own_lock(st);
		bool stop = st->worker_stop;
		own_unlock(st);
		if (stop)
			break;
		if (st->S->orphans) {
			adopt_locked_drops(st);
		} else if (can_lead_locked(st)) {
			lead_locked_drops(st);
		} else {
			/* the flusher sleeps until the queue's head is due */
			uint64_t ns = lz_flusher_wait_ns_locked(st);
			atomic_store(&me->worker_idle, 1);
			if (async_idle_hook)
				async_idle_hook(st); /* (tests: between the look at the flag and the wait) */
			(void)shm_wait_ns_locked_drops(st, &me->wake, ns);
			(void)shm_reap_locked(st, false); /* as shm_wait_locked_drops */
			atomic_store(&me->worker_idle, 0);
		}
	}
	shm_unlock(st);
	return NULL;
}

int async_worker(atomio *st)
{
	own_lock(st);
	int r = 0;
	if (!st->worker_on) {
		st->worker_stop = false;
		r = thread_start(&st->worker, worker_main, st);
		if (r == 0)
			st->worker_on = true;
	}
	own_unlock(st);
	return r;
}

/* Stop the worker.  The store has no group in flight (atomio_close checked). */
void async_stop(atomio *st)
{
	own_lock(st);
	bool w = st->worker_on;
	st->worker_stop = true;
	own_unlock(st);
	if (!w)
		return;
	/* Set again under the shared mutex, and woken after: the worker holds
	 * the mutex from its look at worker_stop to its read of the wake word
	 * (shm_wait_locked_drops), so the flag is seen at the look or the wake
	 * comes after the read -- set without it, the wake could fall between
	 * the two and be lost, and the worker sleep out a whole SHM_REAP_NS. */
	shm_lock(st);
	own_lock(st);
	st->worker_stop = true;
	own_unlock(st);
	shm_unlock(st);
	shm_wake(st, &shm_procs(st->sh)[st->me - 1].wake);
	pthread_join(st->worker, NULL);
	st->worker_on = false;
	lz_flusher_leave(st);
}

/* A lazy group (commit.c, LAZY GROUPS) is flushed when due by a worker:
 * this process's is started here, so that the flusher role has a thread to
 * go to while this process commits lazily. */
int atomio_tx_commit_lazy(atomio_tx *tx, uint64_t *ticket)
{
	if (!tx || tx->magic != TX_MAGIC || tx->state != TX_OPEN)
		return -EINVAL;
	atomio *st = tx->st;
	if (st_forked(st))
		return -EPERM; /* the group stays the parent's (internal.h, FORK) */
	enum lz_flusher fl = LZ_COMMITTER;
	if (!(st->flags & ATOMIO_NO_BG_CHECKPOINT))
		fl = async_worker(st) == 0 ? LZ_WORKER : LZ_NO_THREAD;
	uint64_t t = 0;
	int r = commit_lazy(tx, &t, fl);
	tx_release(tx);
	if (ticket)
		*ticket = t;
	return r;
}

int atomio_tx_commit_async(atomio_tx *tx, atomio_done_fn done, void *arg)
{
	if (!tx || tx->magic != TX_MAGIC || tx->state != TX_OPEN)
		return -EINVAL;
	if (st_forked(tx->st))
		return -EPERM; /* the group stays the parent's (internal.h, FORK) */
	if (!done) {
		tx_release(tx); /* as every other failure: the group is gone */
		return -EINVAL;
	}
	atomio *st = tx->st;
	int r = commit_prepare(tx);
	if (r == 0)
		r = async_worker(st); /* -EAGAIN: no thread could be created */
	if (r < 0) {
		tx_release(tx);
		return r;
	}
	tx->done = done;
	tx->done_arg = arg;
	tx->state = TX_COMMITTING;
	/* Even an empty group is queued: its callback comes in commit order. */
	r = commit_submit_and_lock(tx, SUBMIT_ASYNC);
	if (r < 0) {
		tx_release(tx);
		return r;
	}
	/* Listed while the mutex is held: the worker looks at the list under
	 * it, so it sees the group only with its entry, and not done before
	 * it is listed. */
	own_lock(st);
	st->async_busy++;
	tx->anext = st->async_head;
	st->async_head = tx;
	own_unlock(st);
	if (can_lead_locked(st))
		shm_wake(st, &shm_procs(st->sh)[st->me - 1].wake);
	shm_unlock(st);
	return 0;
}

int atomio_poll(atomio *st, int timeout_ms)
{
	if (!st)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	own_lock(st);
	if (!st->cq_head && st->async_busy && timeout_ms != 0) {
		if (timeout_ms < 0) {
			while (!st->cq_head && st->async_busy)
				own_wait(st, &st->cq_cv);
		} else {
			struct timespec dl = mono_deadline((uint64_t)timeout_ms * 1000000u);
			while (!st->cq_head && st->async_busy)
				if (own_timedwait(st, &st->cq_cv, &dl) == ETIMEDOUT)
					break;
		}
	}
	atomio_tx *t = st->cq_head;
	st->cq_head = st->cq_tail = NULL;
	if (t && st->efd >= 0) {
		uint64_t v;
		(void)sys_read(st->efd, &v, sizeof(v)); /* reset; EAGAIN if already zero */
	}
	own_unlock(st);
	int count = 0;
	while (t) {
		atomio_tx *next = t->cnext;
		atomio_done_fn fn = t->done;
		void *arg = t->done_arg;
		int result = t->result;
		tx_release(t);
		fn(arg, result);
		count++;
		t = next;
	}
	return count;
}

int atomio_event_fd(atomio *st)
{
	if (!st)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	own_lock(st);
	int r = st->efd;
	if (r < 0) {
		r = sys_eventfd(0);
		if (r >= 0) {
			st->efd = r;
			if (st->cq_head) {
				uint64_t one = 1;
				(void)sys_write(r, &one, sizeof(one));
			}
		}
	}
	own_unlock(st);
	return r;
}
