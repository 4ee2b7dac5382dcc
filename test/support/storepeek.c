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
