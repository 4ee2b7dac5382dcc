/* The shared arena's ring starts again at its beginning whenever nothing
 * lives in it (shm.c, shm_arena_alloc_locked), so that a process touches
 * only the arena's pages that the groups in flight at once need: each page
 * is a page fault at its first touch in every process that maps it
 * (docs/PERFORMANCE.md, "Processes as cheap as threads").
 *
 * White-box first: a block freed (the arena empty) leaves the next at
 * offset 0; with a block still live, the ring goes on past it (a lap cut
 * short would leave the next lap only the room up to it).  Then a process
 * that joins the store commits 16 KiB pages one at a time (the arena empty
 * at each commit): its page faults per commit stay below 2 -- with the ring
 * going round its 32 MiB (a 1 GiB log) it faulted on every page of every
 * group's copy (4-5 a commit).  Uses the library's internals (shm_lock, the
 * arena). */
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
 * page faults per commit stayed below 2, 2 if not, 1 on an error. */
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
		if (atomio_pwrite(a, f, page, PAGE, (off_t)(i % 64) * PAGE) != PAGE)
			return 1;
	double per = (double)(minflt() - f0) / COMMITS;
	printf("a joining process: %.2f page faults per commit over %d commits of %d bytes\n", per, COMMITS,
	       PAGE);
	fflush(stdout);
	if (atomio_close(a) != 0)
		return 1;
	return per < 2 ? 0 : 2;
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

	fflush(stdout);
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0)
		_exit(child(log, &o));
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws));
	if (WEXITSTATUS(ws) == 2) {
		fprintf(stderr, "a joining process faulted on 2 pages or more per commit\n");
		return 1;
	}
	CHECK_EQ(WEXITSTATUS(ws), 0);
	CHECK_OK(atomio_close(st));
	printf("ok: the arena starts again at its beginning when empty; a joining process's faults stay few\n");
	return 0;
}
