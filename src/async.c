/*
 * async.c: asynchronous commits for event-loop programs.
 *
 * atomio_tx_commit_async queues the group in the same commit queue as
 * atomio_tx_commit (so it takes its place in the one commit order and shares
 * log writes with every other group queued meanwhile) and returns at once.
 * A store-owned worker thread, started by the first asynchronous commit,
 * leads batches whenever the queue's head has no thread of its own waiting to
 * lead it (commit.c).  (A second store thread, the checkpointer, runs
 * background checkpoints, so that a checkpoint never holds up the
 * asynchronous groups: checkpoint.c.)  A finished group goes to the
 * completion list (commit.c); its callback runs in whichever thread calls atomio_poll, never while atomio
 * holds a lock, so a callback may begin and commit new groups.
 *
 * For epoll: atomio_event_fd returns an eventfd that is readable exactly
 * while the completion list is not empty (atomio_poll empties both).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

void async_init(atomio *st)
{
	cond_init_monotonic(&st->cq_cv); /* atomio_poll's timeout */
	pthread_cond_init(&st->worker_cv, NULL);
	st->efd = -1;
}

void async_destroy(atomio *st)
{
	pthread_cond_destroy(&st->cq_cv);
	pthread_cond_destroy(&st->worker_cv);
	if (st->efd >= 0)
		atomio_sys->close(st->efd);
	st->efd = -1;
}

/* The worker: leads batches nobody else is there to lead (asynchronous
 * groups). */
static void *worker_main(void *arg)
{
	atomio *st = arg;
	pthread_mutex_lock(&st->lock);
	while (!st->worker_stop) {
		if (st->q_head && can_lead_locked(st)) {
			lead_locked(st);
		} else {
			st->worker_idle = true;
			pthread_cond_wait(&st->worker_cv, &st->lock);
			st->worker_idle = false;
		}
	}
	pthread_mutex_unlock(&st->lock);
	return NULL;
}

/* Start the worker if it is not running.  Lock held.  0 or -EAGAIN. */
static int async_worker_locked(atomio *st)
{
	if (st->worker_on)
		return 0;
	st->worker_stop = false;
	int r = pthread_create(&st->worker, NULL, worker_main, st);
	if (r)
		return -r;
	st->worker_on = true;
	return 0;
}

/* Stop the worker.  The store has no group in flight (atomio_close checked). */
void async_stop(atomio *st)
{
	pthread_mutex_lock(&st->lock);
	bool w = st->worker_on;
	st->worker_stop = true;
	pthread_cond_signal(&st->worker_cv);
	pthread_mutex_unlock(&st->lock);
	if (w)
		pthread_join(st->worker, NULL);
	st->worker_on = false;
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
	if (r < 0) {
		tx_release(tx);
		return r;
	}
	tx->done = done;
	tx->done_arg = arg;
	tx->wake = &st->worker_cv;
	pthread_mutex_lock(&st->lock);
	if (st->failed) {
		pthread_mutex_unlock(&st->lock);
		tx_release(tx);
		return ATOMIO_EFAILED;
	}
	r = async_worker_locked(st);
	if (r < 0) {
		pthread_mutex_unlock(&st->lock);
		tx_release(tx);
		return r; /* -EAGAIN: no thread could be created */
	}
	st->async_busy++;
	/* Even an empty group is queued: its callback comes in commit order. */
	commit_enqueue_locked(st, tx);
	if (can_lead_locked(st))
		pthread_cond_signal(&st->worker_cv);
	pthread_mutex_unlock(&st->lock);
	return 0;
}

int atomio_poll(atomio *st, int timeout_ms)
{
	if (!st)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	pthread_mutex_lock(&st->lock);
	if (!st->cq_head && st->async_busy && timeout_ms != 0) {
		if (timeout_ms < 0) {
			while (!st->cq_head && st->async_busy)
				pthread_cond_wait(&st->cq_cv, &st->lock);
		} else {
			struct timespec dl = mono_deadline((uint64_t)timeout_ms * 1000000u);
			while (!st->cq_head && st->async_busy)
				if (pthread_cond_timedwait(&st->cq_cv, &st->lock, &dl) == ETIMEDOUT)
					break;
		}
	}
	atomio_tx *t = st->cq_head;
	st->cq_head = st->cq_tail = NULL;
	if (t && st->efd >= 0) {
		uint64_t v;
		(void)sys_read(st->efd, &v, sizeof(v)); /* reset; EAGAIN if already zero */
	}
	pthread_mutex_unlock(&st->lock);
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
	pthread_mutex_lock(&st->lock);
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
	pthread_mutex_unlock(&st->lock);
	return r;
}
