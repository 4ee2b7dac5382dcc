/* Asynchronous commits: callbacks run from atomio_poll, once each, in commit
 * order, with the data durable and visible; the eventfd wakes an epoll loop
 * exactly while completions wait; callbacks may commit again; synchronous
 * commits from other threads share the queue; close refuses while
 * completions are undelivered; errors are reported. */
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/wait.h>

#include "model.h"

#define N 200
#define PAGE 4096

static atomio *st;
static int fa, fb;
static int order[2 * N + 8], norder;
static int results_bad;

struct ctx {
	int id;
	int chained; /* commits one more group from its callback */
};

static void done(void *arg, int result);

static int commit_page(int file, int tag, uint64_t off, struct ctx *c)
{
	char page[PAGE];
	t_fill(page, PAGE, (uint32_t)tag, 0);
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, file, page, PAGE, (off_t)off));
	return atomio_tx_commit_async(tx, done, c);
}

static struct ctx chained_ctx = {.id = 9999};

static void done(void *arg, int result)
{
	struct ctx *c = arg;
	if (result != 0)
		results_bad++;
	order[norder++] = c->id;
	/* the group is visible when its callback runs */
	if (c->id < N) {
		char page[PAGE], want[PAGE];
		t_fill(want, PAGE, (uint32_t)(c->id + 1), 0);
		CHECK_EQ(pread(atomio_file_fd(st, fa), page, PAGE, (off_t)c->id * PAGE), PAGE);
		CHECK(!memcmp(page, want, PAGE));
	}
	if (c->chained) {
		c->chained = 0;
		CHECK_OK(commit_page(fb, 5000, 0, &chained_ctx)); /* re-entrant */
	}
}

static volatile int sync_stop;
static void *sync_committer(void *arg)
{
	(void)arg;
	char page[PAGE];
	for (int i = 0; !sync_stop && i < 400; i++) {
		t_fill(page, PAGE, (uint32_t)(7000 + i), 0);
		CHECK_EQ(atomio_pwrite(st, fb, page, PAGE, (off_t)(16 + i % 8) * PAGE), PAGE);
	}
	return NULL;
}

int main(void)
{
	struct atomio_options o = t_opts(1 << 20);
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	fa = atomio_file_open(st, t_path("a"), O_CREAT, 0644);
	fb = atomio_file_open(st, t_path("b"), O_CREAT, 0644);
	CHECK(fa >= 0 && fb >= 0);

	/* nothing in flight: poll returns at once, even with no timeout */
	CHECK_EQ(atomio_poll(st, -1), 0);
	CHECK_EQ(atomio_poll(NULL, 0), -EINVAL);
	CHECK_EQ(atomio_event_fd(NULL), -EINVAL);
	int efd = atomio_event_fd(st);
	CHECK(efd >= 0);
	CHECK_EQ(atomio_event_fd(st), efd); /* one per store */
	struct pollfd pf = {.fd = efd, .events = POLLIN};
	CHECK_EQ(poll(&pf, 1, 0), 0);

	/* bad calls free the tx and never call back */
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_EQ(atomio_tx_commit_async(tx, NULL, NULL), -EINVAL);
	CHECK_EQ(atomio_tx_commit_async(NULL, done, NULL), -EINVAL);

	pthread_t th;
	CHECK_OK(pthread_create(&th, NULL, sync_committer, NULL));

	static struct ctx ctx[N + 1];
	for (int i = 0; i < N; i++) {
		ctx[i] = (struct ctx){.id = i, .chained = i == N / 2};
		CHECK_OK(commit_page(fa, i + 1, (uint64_t)i * PAGE, &ctx[i]));
	}
	/* an empty group completes too */
	ctx[N] = (struct ctx){.id = N};
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_commit_async(tx, done, &ctx[N]));
	CHECK_EQ(atomio_close(st), -EBUSY); /* completions undelivered */

	/* an epoll loop */
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN};
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev));
	int got = 0;
	while (got < N + 2) {
		int n = epoll_wait(ep, &ev, 1, 10000);
		CHECK(n == 1); /* no completion within 10 s would be a hang */
		int k = atomio_poll(st, 0);
		CHECK(k >= 0);
		got += k;
	}
	CHECK_EQ(got, N + 2);
	CHECK_EQ(atomio_poll(st, 100), 0);
	CHECK_EQ(poll(&pf, 1, 0), 0);
	close(ep);
	sync_stop = 1;
	CHECK_OK(pthread_join(th, NULL));
	CHECK_EQ(results_bad, 0);
	/* commit order: our groups in order, the chained one after the one
	 * whose callback queued it */
	int last = -1, chained_at = -1;
	for (int i = 0; i < norder; i++) {
		if (order[i] == 9999) {
			chained_at = i;
			continue;
		}
		CHECK(order[i] > last);
		last = order[i];
	}
	CHECK(chained_at > N / 2);

	/* timeouts: a group completes within a generous bound */
	ctx[0] = (struct ctx){.id = 0};
	CHECK_OK(commit_page(fa, 1, 0, &ctx[0]));
	int k = 0;
	for (int i = 0; i < 100 && !k; i++)
		k = atomio_poll(st, 100);
	CHECK_EQ(k, 1);

	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	printf("%llu commits in %llu log writes\n", (unsigned long long)s.commits,
	       (unsigned long long)s.batches);
	CHECK(s.batches < s.commits); /* async groups shared log writes */
	CHECK_OK(atomio_close(st));

	struct mfile m = {0};
	char page[PAGE];
	for (int i = 0; i < N; i++) {
		t_fill(page, PAGE, (uint32_t)(i + 1), 0);
		m_write(&m, page, PAGE, (uint64_t)i * PAGE);
	}
	CHECK_OK(m_compare(&m, t_path("a"), 0));
	free(m.b);

	/* Durable on callback: a child commits asynchronously, reports each
	 * callback, dies; every reported group survives recovery. */
	int pfd[2];
	CHECK_OK(pipe(pfd));
	pid_t p = fork();
	if (p == 0) {
		close(pfd[0]);
		struct atomio_options o2 = t_opts(4 << 20); /* no checkpoint in this run */
		o2.flags |= ATOMIO_NO_BG_CHECKPOINT;
		CHECK_OK(atomio_open(t_path("log2"), &o2, &st));
		fa = atomio_file_open(st, t_path("c"), O_CREAT, 0644);
		static struct ctx c2[N];
		for (int i = 0; i < N; i++) {
			c2[i] = (struct ctx){.id = 10000 + i};
			CHECK_OK(commit_page(fa, 20000 + i, (uint64_t)i * PAGE, &c2[i]));
		}
		int rep = 0;
		while (rep < N) {
			int n = atomio_poll(st, -1);
			CHECK(n > 0);
			rep += n;
			CHECK(write(pfd[1], &rep, sizeof(rep)) == sizeof(rep));
		}
		_exit(0);
	}
	close(pfd[1]);
	int reported = 0, v;
	while (read(pfd[0], &v, sizeof(v)) == sizeof(v))
		reported = v;
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK_EQ(reported, N);
	t_wipe(t_path("c")); /* as if no home write had reached the media */
	struct atomio_options o3 = {0};
	CHECK_OK(atomio_open(t_path("log2"), &o3, &st));
	struct atomio_stats s3;
	CHECK_OK(atomio_stats(st, &s3));
	CHECK_EQ(s3.groups_recovered, N);
	CHECK_OK(atomio_close(st));
	struct mfile m2 = {0};
	for (int i = 0; i < N; i++) {
		t_fill(page, PAGE, (uint32_t)(20000 + i), 0);
		m_write(&m2, page, PAGE, (uint64_t)i * PAGE);
	}
	CHECK_OK(m_compare(&m2, t_path("c"), 0));
	free(m2.b);
	return 0;
}
