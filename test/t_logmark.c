/* atomio_log_mark: a log's mark is stable while no store is opened on it,
 * moves at every atomio_open (also one in another process), differs for a
 * log created anew at the same path, and is refused for what is not a log
 * by the rules atomio_open applies. */
#include <sys/wait.h>

#include "t.h"
#include "support/logpatch.h"

static struct atomio_log_mark mark_of(const char *path)
{
	struct atomio_log_mark m;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_OK(atomio_log_mark(fd, &m));
	CHECK_EQ(m.reserved[0] | m.reserved[1], 0);
	close(fd);
	return m;
}

static int mark_err(const char *path)
{
	struct atomio_log_mark m;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	int r = atomio_log_mark(fd, &m);
	close(fd);
	return r;
}

int main(void)
{
	struct atomio_options o = t_opts(256 << 10);
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
	CHECK(f >= 0);
	struct atomio_log_mark a = mark_of(t_path("log"));
	CHECK(a.store_id != 0);
	/* commits and checkpoints of the open store leave it as it is */
	for (int i = 0; i < 50; i++)
		CHECK_EQ(atomio_pwrite(st, f, "abcd", 4, (off_t)i * 4096), 4);
	CHECK_OK(atomio_checkpoint(st));
	struct atomio_log_mark b = mark_of(t_path("log"));
	CHECK_EQ(b.store_id, a.store_id);
	CHECK_EQ(b.epoch, a.epoch);
	CHECK_OK(atomio_close(st));
	b = mark_of(t_path("log"));
	CHECK_EQ(b.epoch, a.epoch);

	/* an open in this process, then one in another: each moves it on */
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	CHECK_OK(atomio_close(st));
	b = mark_of(t_path("log"));
	CHECK_EQ(b.store_id, a.store_id);
	CHECK_EQ(b.epoch, a.epoch + 1);
	fflush(NULL);
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		atomio *s2;
		_exit(atomio_open(t_path("log"), &o, &s2) == 0 && atomio_close(s2) == 0 ? 0 : 1);
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	b = mark_of(t_path("log"));
	CHECK_EQ(b.epoch, a.epoch + 2);

	/* a log created anew at the same path is another store */
	CHECK_OK(unlink(t_path("log")));
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	CHECK_OK(atomio_close(st));
	b = mark_of(t_path("log"));
	CHECK(b.store_id != a.store_id);

	/* what is not a log, or no longer a readable one */
	struct atomio_log_mark m;
	CHECK_EQ(atomio_log_mark(-1, &m), -EINVAL);
	int fd = open(t_path("log"), O_RDONLY | O_CLOEXEC);
	CHECK_EQ(atomio_log_mark(fd, NULL), -EINVAL);
	close(fd);
	CHECK_EQ(mark_err(t_path("f")), ATOMIO_ENOTLOG);
	struct lp l;
	CHECK_OK(lp_load(&l, t_path("log")));
	for (int s = 0; s < 2; s++)
		lp_slot(&l, s)->csum ^= 1; /* both slots torn */
	CHECK_OK(lp_store(&l, t_path("log")));
	CHECK_EQ(mark_err(t_path("log")), ATOMIO_ECORRUPT);
	for (int s = 0; s < 2; s++) {
		lp_slot(&l, s)->version = 99;
		lp_sb_seal(lp_slot(&l, s));
	}
	CHECK_OK(lp_store(&l, t_path("log")));
	CHECK_EQ(mark_err(t_path("log")), ATOMIO_EVERSION);
	lp_free(&l);
	printf("log marks ok: epoch %llu -> %llu\n", (unsigned long long)a.epoch,
	       (unsigned long long)(a.epoch + 2));
	return 0;
}
