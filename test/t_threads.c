/* Many threads committing at once: every group lands whole, in a single
 * commit order (overlapping groups: the last one committed wins), and group
 * commit batches several groups into one log write. */
#include <pthread.h>

#include "model.h"

#define NT 8
#define PER 150
#define PAGE 4096

static atomio *st;
static int fa, fb;

/* Each group: thread t's own page in a (slot g % 4), the same page in b,
 * and the shared page 0 of b, all stamped (t, g). */
static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	char page[PAGE];
	for (int g = 0; g < PER; g++) {
		uint32_t tag = (uint32_t)(t * 1000 + g + 1);
		atomio_tx *tx;
		CHECK_OK(atomio_tx_begin(st, &tx));
		off_t own = (off_t)((t * 4 + g % 4) + 1) * PAGE;
		t_fill(page, PAGE, tag, 0);
		CHECK_OK(atomio_tx_write(tx, fa, page, PAGE, own));
		CHECK_OK(atomio_tx_write(tx, fb, page, PAGE, own));
		CHECK_OK(atomio_tx_write(tx, fb, page, PAGE, 0));
		CHECK_OK(atomio_tx_commit(tx));
	}
	return NULL;
}

static uint32_t which_tag(const uint8_t *p)
{
	for (int t = 0; t < NT; t++)
		for (int g = 0; g < PER; g++) {
			uint32_t tag = (uint32_t)(t * 1000 + g + 1);
			if (p[0] == t_byte(tag, 0) && p[1] == t_byte(tag, 1) && p[2] == t_byte(tag, 2)) {
				uint8_t ref[PAGE];
				t_fill(ref, PAGE, tag, 0);
				if (!memcmp(ref, p, PAGE))
					return tag;
			}
		}
	return 0;
}

int main(void)
{
	struct atomio_options o = t_opts(1 << 20); /* small: checkpoints under load too */
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	fa = atomio_file_open(st, t_path("a"), O_CREAT, 0644);
	fb = atomio_file_open(st, t_path("b"), O_CREAT, 0644);
	pthread_t th[NT];
	for (int t = 0; t < NT; t++)
		CHECK_OK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t));
	for (int t = 0; t < NT; t++)
		CHECK_OK(pthread_join(th[t], NULL));
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	printf("%llu commits in %llu log writes, %llu checkpoints\n", (unsigned long long)s.commits,
	       (unsigned long long)s.batches, (unsigned long long)s.checkpoints);
	CHECK_EQ(s.commits, NT * PER);
	CHECK(s.batches <= s.commits && s.log_syncs == s.batches);
	CHECK(s.checkpoints > 0);
	CHECK_OK(atomio_close(st));

	size_t la, lb;
	uint8_t *a = t_slurp(t_path("a"), &la), *b = t_slurp(t_path("b"), &lb);
	CHECK_EQ(la, (NT * 4 + 1) * PAGE);
	CHECK_EQ(lb, la);
	for (int t = 0; t < NT; t++)
		for (int k = 0; k < 4; k++) {
			size_t off = (size_t)(t * 4 + k + 1) * PAGE;
			uint32_t ta = which_tag(a + off), tb = which_tag(b + off);
			/* the last group of thread t that used slot k */
			int last = PER - 1 - ((PER - 1 - k) % 4);
			CHECK_EQ(ta, (uint32_t)(t * 1000 + last + 1));
			CHECK_EQ(tb, ta);
		}
	/* the shared page holds the last group of some thread, whole */
	uint32_t tag0 = which_tag(b);
	CHECK(tag0 != 0 && tag0 % 1000 == PER);
	free(a);
	free(b);
	return 0;
}
