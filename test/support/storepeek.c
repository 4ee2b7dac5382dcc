/*
 * storepeek.c: what the crash harness (crashsim.c) reads of a store's
 * insides.  A file of its own: crashsim.c cannot include internal.h, whose
 * names clash with the harness's.
 */
#include <sys/syscall.h>
#include <unistd.h>

#include "crashsim.h"
#include "internal.h"
#include "shm.h"

/* The shared mutex is robust: the kernel releases it (EOWNERDEAD) when its
 * holder's process dies; a simulated process's thread that blocks for good
 * would keep it.  glibc keeps the holder's thread id in __owner. */
bool cs_store_holds_mutex(struct atomio *st)
{
	return st && st->sh && st->sh->mu.__data.__owner == (int)syscall(SYS_gettid);
}

/* Read without the mutex: the published copy (shm.h), which the hook's own
 * thread changed last if it holds a role, as the kill points ask. */
unsigned cs_store_holds(struct atomio *st, const uint64_t *orph, int norph)
{
	if (!st || !st->sh || !st->me)
		return 0;
	struct shm *sh = st->sh;
	const struct shm_state *S = &sh->s[atomic_load(&sh->cur) & 1];
	unsigned r = 0;
	if (S->log_owner == st->me)
		r |= 1;
	if (S->ckpt_owner == st->me)
		r |= 2;
	for (unsigned b = 0; b < SHM_BATCHES; b++)
		if (S->bstate[b] != BAT_FREE && S->bowner[b] == st->me) {
			r |= 8;
			for (int i = 0; i < norph; i++)
				if (shm_bat(sh, b)->k == orph[i])
					r |= 4;
		}
	return r;
}

int cs_store_batches(struct atomio *st, uint64_t *ks, int max)
{
	if (!st || !st->sh || !st->me)
		return 0;
	struct shm *sh = st->sh;
	const struct shm_state *S = &sh->s[atomic_load(&sh->cur) & 1];
	int n = 0;
	for (unsigned b = 0; b < SHM_BATCHES && n < max; b++)
		if (S->bstate[b] != BAT_FREE && S->bowner[b] == st->me)
			ks[n++] = shm_bat(sh, b)->k;
	return n;
}

bool cs_store_is_ckpter(struct atomio *st)
{
	return st && st->ckpter_on && pthread_equal(st->ckpter, pthread_self());
}
