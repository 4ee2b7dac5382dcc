/* A process dies holding the store's shared mutex, half-way through changing
 * the shared state (src/shm.h, THE MUTEX AND THE STATE): the state it had not
 * published yet is gone whole, the group it was queueing (its entry marked
 * queued, not linked into the queue) is freed with it, and the process that
 * takes the mutex next (EOWNERDEAD) goes on committing.  Uses the library's
 * internals (shm_lock, the state copy) to stop exactly there. */
#include <signal.h>
#include <sys/wait.h>

#include "shm.h"
#include "t.h"

int main(void)
{
	t_dir();
	const char *log = t_path("log");
	struct atomio_options o = t_opts(1 << 20);
	/* no checkpointer thread: the next lock of the mutex is this thread's */
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(log, &o, &st));
	int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
	CHECK(f >= 0);
	CHECK_EQ(atomio_pwrite(st, f, "one", 3, 0), 3);

	shm_lock(st);
	struct shm_state before = *st->S;
	shm_unlock(st);

	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		atomio *mine;
		CHECK_OK(atomio_open(log, &o, &mine));
		uint32_t idx1;
		shm_lock(mine);
		CHECK_OK(shm_ent_alloc(mine, &idx1));
		/* half-way through queueing a group, and through changing the
		 * state: an entry marked queued, counters moved, the queue's
		 * head pointed at it -- nothing of it published */
		atomic_store(&shm_ent(mine->sh, idx1)->state, ENT_QUEUED);
		mine->S->q_head = mine->S->q_tail = idx1;
		mine->S->q_len += 5;
		mine->S->next_seq += 100;
		mine->S->log_owner = mine->me;
		kill(getpid(), SIGKILL);
		for (;;)
			pause();
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFSIGNALED(ws));

	/* The next lock finds its holder dead: the state as last published.
	 * (Its files, and so its slot's lock byte, may outlive the mutex's
	 * owner-died mark for a moment: what the reap at that lock missed, the
	 * next wait's reap takes -- forced here.) */
	shm_lock(st);
	(void)shm_reap_locked(st, true);
	struct shm_state *S = st->S;
	CHECK_EQ(S->q_len, before.q_len);
	CHECK_EQ(S->q_head, before.q_head);
	CHECK_EQ(S->next_seq, before.next_seq);
	CHECK_EQ(S->log_owner, 0);
	/* ... and the dead process's entry and slot are free again */
	uint32_t held = 0;
	for (uint32_t i = 1; i <= SHM_ENTRIES; i++)
		if (atomic_load(&shm_ent(st->sh, i)->owner)) {
			const struct shm_ent *e = shm_ent(st->sh, i);
			fprintf(stderr, "entry %u held by slot %u, state %u, batch %llu (batch_next %llu)\n", i,
				atomic_load(&e->owner), atomic_load(&e->state), (unsigned long long)e->batch,
				(unsigned long long)S->batch_next);
			held++;
		}
	CHECK_EQ(held, 0);
	uint32_t procs = 0;
	for (uint32_t i = 0; i < SHM_PROCS; i++)
		procs += atomic_load(&shm_procs(st->sh)[i].state) != 0;
	CHECK_EQ(procs, 1);
	shm_unlock(st);

	/* The store goes on. */
	CHECK_EQ(atomio_pwrite(st, f, "two", 3, 3), 3);
	CHECK_OK(atomio_close(st));
	size_t n;
	uint8_t *d = t_slurp(t_path("f"), &n);
	CHECK(n == 6 && !memcmp(d, "onetwo", 6));
	free(d);
	printf("ok: a process killed holding the shared mutex mid-change: the state as last published, its "
	       "half-queued group and its slot freed, the store went on\n");
	return 0;
}
