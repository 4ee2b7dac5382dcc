/* The io_uring home stage (engine_uring.c) queues a batch's O_DIRECT home
 * writes and submits them together; a write it cannot queue (its data lies
 * where the O_DIRECT descriptor cannot write from: another process committed
 * it with the file opened buffered, engine_seg_aligned) goes the plain way at
 * once.  Groups of one batch land in commit order: such a write must not
 * land before an earlier group's queued write of the same range, which would
 * then put the older bytes last.  White-box, as t_direct_other: the home
 * operation of the io_uring backend on a real O_DIRECT file, with a batch of
 * two groups over one page -- the first's data aligned, the second's not. */
#include "engine.h"
#include "internal.h"
#include "shm.h"
#include "t.h"

#define PG 4096

int main(void)
{
	t_dir();
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_DIRECT_HOME | ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int id = atomio_file_open(st, t_path("f"), O_CREAT | O_DIRECT, 0644);
	if (id == -EINVAL)
		t_skip("O_DIRECT not supported on %s", t_dir());
	CHECK(id >= 0);
	if (!st->ring_home)
		t_skip("no io_uring for the home stage here");
	struct afile *f = file_get(st, id);
	CHECK(f && f->direct_home);

	uint8_t *a, *b;
	CHECK_OK(posix_memalign((void **)&a, PG, PG));
	CHECK_OK(posix_memalign((void **)&b, PG, 2 * PG));
	memset(a, 'A', PG);
	memset(b, 'B', 2 * PG);
	struct seg sa = {.file = (uint32_t)id, .kind = SEG_WRITE, .off = 0, .len = PG, .src = a};
	struct seg sb = {.file = (uint32_t)id, .kind = SEG_WRITE, .off = 0, .len = PG, .src = b + 1};
	CHECK(engine_seg_aligned(f, &sa) && !engine_seg_aligned(f, &sb));
	struct grp g[2] = {{.segs = &sa, .nsegs = 1, .data_len = PG}, {.segs = &sb, .nsegs = 1, .data_len = PG}};

	/* Hold the home stage as a leader does (nothing else runs: a fresh
	 * store, no background checkpoint), for the lock checks of debug
	 * builds. */
	struct shm_state *S = &st->sh->s[atomic_load(&st->sh->cur)];
	unsigned k = (unsigned)(S->home_next % SHM_BATCHES);
	uint8_t state = S->bstate[k], owner = S->bowner[k];
	S->bstate[k] = BAT_HOMING;
	S->bowner[k] = (uint8_t)st->me;
#ifdef ATOMIO_DEBUG
	HOLD_SET(st->home_holder);
#endif
	CHECK_OK(engine_uring.home(st, g, 2));
#ifdef ATOMIO_DEBUG
	atomic_store(&st->home_holder, 0);
#endif
	S->bstate[k] = state;
	S->bowner[k] = owner;

	size_t n;
	uint8_t *d = t_slurp(t_path("f"), &n);
	CHECK(d && n == PG);
	int bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += d[i] != 'B';
	if (bad)
		fprintf(stderr, "the page holds %d bytes of the earlier group ('%c' first)\n", bad, d[0]);
	CHECK(!bad);
	free(d);
	free(a);
	free(b);
	CHECK_OK(atomio_close(st));
	printf("ok: a home write the ring cannot take lands after the earlier queued write of its range\n");
	return 0;
}
