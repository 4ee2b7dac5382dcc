/* A process touches few pages of the store's shared state per commit: each
 * page is a page fault at its first touch in every process that maps it
 * (docs/PERFORMANCE.md, "Processes as cheap as threads"), so a process that
 * joins the store must not come to touch all of it.
 *
 * - The arena's ring starts again at its beginning whenever nothing lives
 *   in it (shm.c, shm_arena_alloc_locked): a block freed (the arena empty)
 *   leaves the next at offset 0; with a block still live, the ring goes on
 *   past it (a lap cut short would leave the next lap only the room up to
 *   it).
 * - The dirty set keeps the blocks of one 1 MiB piece of a file in one page
 *   of its table and marks the pages it uses (checkpoint.c, dslot); a
 *   checkpoint clears those and leaves the table empty.
 * - A process that joins the store commits 16 KiB pages one at a time over
 *   6 MiB of a file: its page faults per commit stay below 0.5 -- with the
 *   ring going round its 32 MiB (a 1 GiB log) it faulted on every page of
 *   every group's copy (4.7 a commit), and with a slot per block anywhere
 *   in the dirty set's 16 MiB table on most blocks' slot (0.65 a commit once
 *   the arena's laps were short).
 *
 * Uses the library's internals (shm_lock, the arena, the dirty set). */
#include <inttypes.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "shm.h"
#include "t.h"

#define COMMITS 400
#define PAGE 16384

static long minflt(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return u.ru_minflt;
}

/* A child joins the store and commits COMMITS pages; exit status: 0 if its
 * page faults per commit stayed below 0.5, 2 if not, 1 on an error. */
static int child(const char *log, const struct atomio_options *o)
{
	atomio *a;
	if (atomio_open(log, o, &a) != 0)
		return 1;
	int f = atomio_file_open(a, t_path("f"), 0, 0);
	static char page[PAGE];
	t_fill(page, sizeof(page), 3, 0);
	if (f < 0 || atomio_pwrite(a, f, page, PAGE, 0) != PAGE) /* the first touches of the rest */
		return 1;
	long f0 = minflt();
	for (int i = 0; i < COMMITS; i++)
		if (atomio_pwrite(a, f, page, PAGE, (off_t)(i * 37 % COMMITS) * PAGE) != PAGE)
			return 1;
	double per = (double)(minflt() - f0) / COMMITS;
	printf("a joining process: %.2f page faults per commit over %d commits of %d bytes\n", per, COMMITS,
	       PAGE);
	fflush(stdout);
	if (atomio_close(a) != 0)
		return 1;
	return per < 0.5 ? 0 : 2;
}

/* 64 blocks of one 1 MiB piece of f written home (a buffered file: they
 * are the page cache's) are in one page of the dirty set's table, marked;
 * a checkpoint leaves both tables empty, unmarked. */
static void dirty_check(atomio *st, int f)
{
	static char blk[4096];
	for (int i = 0; i < 64; i++)
		CHECK_EQ(atomio_pwrite(st, f, blk, sizeof(blk), (off_t)(1 << 20) + i * 4096), 4096);
	struct shm *sh = st->sh;
	shm_lock(st);
	const struct dtab *d = &sh->dt[st->S->dset_cur];
	unsigned marked = 0;
	for (unsigned w = 0; w < sizeof(d->pages) / 8; w++)
		marked += (unsigned)__builtin_popcountll(d->pages[w]);
	CHECK(d->used >= 64);
	shm_unlock(st);
	printf("the dirty set: %u pages of its table marked for %" PRIu64 " blocks\n", marked, d->used);
	CHECK(marked <= 2); /* block 0's piece and this one's */
	CHECK_OK(atomio_checkpoint(st));
	const struct dkey *k = shm_dtab(sh, 0); /* both tables, one after the other */
	for (uint64_t i = 0; i < 2 * sh->dcap; i++)
		CHECK(k[i].blk1 == 0);
	for (unsigned t = 0; t < 2; t++)
		for (unsigned w = 0; w < sizeof(d->pages) / 8; w++)
			CHECK(sh->dt[t].pages[w] == 0);
}

int main(void)
{
	t_dir();
	const char *log = t_path("log");
	struct atomio_options o = t_opts(1ull << 30);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(log, &o, &st));
	int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
	CHECK(f >= 0);
	CHECK_EQ(atomio_pwrite(st, f, "x", 1, 0), 1);

	uint32_t e1, e2, e3;
	uint64_t a, b, c;
	shm_lock(st);
	CHECK(st->S->arena_tail == st->S->arena_head); /* nothing lives */
	CHECK_OK(shm_ent_alloc(st, &e1));
	CHECK_OK(shm_arena_alloc_locked(st, 4096, e1, &a));
	shm_arena_free(st, a);
	shm_arena_advance_locked(st);
	CHECK_OK(shm_arena_alloc_locked(st, 4096, e1, &a));
	CHECK_EQ(a, 0u); /* the arena was empty: its beginning again */
	CHECK_OK(shm_ent_alloc(st, &e2));
	CHECK_OK(shm_arena_alloc_locked(st, 4096, e2, &b));
	CHECK_EQ(b, 4096u);
	shm_arena_free(st, a);
	shm_arena_advance_locked(st);
	CHECK_OK(shm_ent_alloc(st, &e3));
	CHECK_OK(shm_arena_alloc_locked(st, 4096, e3, &c));
	CHECK_EQ(c, 8192u); /* b still lives: on past it */
	shm_arena_free(st, b);
	shm_arena_free(st, c);
	shm_arena_advance_locked(st);
	CHECK(st->S->arena_tail == st->S->arena_head);
	shm_ent_free(st, e1);
	shm_ent_free(st, e2);
	shm_ent_free(st, e3);
	shm_unlock(st);

	dirty_check(st, f);
	fflush(stdout);
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0)
		_exit(child(log, &o));
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws));
	if (WEXITSTATUS(ws) == 2) {
		fprintf(stderr, "a joining process faulted on 0.5 pages or more per commit\n");
		return 1;
	}
	CHECK_EQ(WEXITSTATUS(ws), 0);
	CHECK_OK(atomio_close(st));
	printf("ok: the arena starts again at its beginning when empty, the dirty set keeps to few pages, a joining process's faults stay few\n");
	return 0;
}
