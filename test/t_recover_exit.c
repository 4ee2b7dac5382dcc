/* Recovery after a process that died without closing: a child commits groups
 * across two files and _exits; the parent wipes the files' bytes (as if no
 * home write had reached the media) and reopens: every committed group is
 * replayed, the uncommitted one is not, and the replay is idempotent. */
#include <sys/wait.h>

#include "model.h"

#define NGROUPS 40

static void child(void)
{
	struct atomio_options o = t_opts(4 << 20);
	/* the parent wipes the files and counts the groups replayed: no
	 * checkpoint may run, not even a background one */
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int f[2] = {atomio_file_open(st, t_path("a"), O_CREAT, 0644),
		    atomio_file_open(st, t_path("b"), O_CREAT, 0644)};
	CHECK(f[0] == 0 && f[1] == 1);
	char buf[20000];
	for (int g = 0; g < NGROUPS; g++) {
		atomio_tx *tx;
		CHECK_OK(atomio_tx_begin(st, &tx));
		for (int i = 0; i < 3; i++) {
			uint64_t off = (uint64_t)((g * 7919 + i * 104729) % 200000);
			size_t len = 1 + (size_t)((g * 31 + i * 17) % 19000);
			t_fill(buf, len, (uint32_t)(g * 10 + i), off);
			CHECK_OK(atomio_tx_write(tx, f[i % 2], buf, len, (off_t)off));
		}
		CHECK_OK(atomio_tx_commit(tx));
	}
	/* a group that is built but never committed */
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	memset(buf, 0xEE, 1000);
	CHECK_OK(atomio_tx_write(tx, f[0], buf, 1000, 0));
	_exit(0);
}

int main(void)
{
	t_dir(); /* one directory for parent and child */
	pid_t p = fork();
	if (p == 0)
		child();
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);

	struct mfile m[2] = {{0}, {0}};
	char buf[20000];
	for (int g = 0; g < NGROUPS; g++)
		for (int i = 0; i < 3; i++) {
			uint64_t off = (uint64_t)((g * 7919 + i * 104729) % 200000);
			size_t len = 1 + (size_t)((g * 31 + i * 17) % 19000);
			t_fill(buf, len, (uint32_t)(g * 10 + i), off);
			m_write(&m[i % 2], buf, len, off);
		}
	CHECK_OK(m_compare(&m[0], t_path("a"), 0)); /* the page cache has it */
	for (int round = 0; round < 2; round++) {
		t_wipe(t_path("a"));
		t_wipe(t_path("b"));
		atomio *st;
		struct atomio_options o = {0};
		/* Round 0 keeps a copy of the log and puts it back after
		 * recovery: as if recovery had crashed just before its
		 * superblock write.  Round 1 must then replay the same groups
		 * again, to the same result. */
		char cmd[9000];
		snprintf(cmd, sizeof(cmd), "cp -p '%s' '%s'", t_path("log"), t_path("log.saved"));
		if (round == 0)
			CHECK_EQ(system(cmd), 0);
		CHECK_OK(atomio_open(t_path("log"), &o, &st));
		struct atomio_stats s;
		CHECK_OK(atomio_stats(st, &s));
		CHECK_EQ(s.groups_recovered, NGROUPS);
		CHECK_OK(atomio_close(st));
		CHECK_OK(m_compare(&m[0], t_path("a"), 0));
		CHECK_OK(m_compare(&m[1], t_path("b"), 0));
		if (round == 0) {
			snprintf(cmd, sizeof(cmd), "cp -p '%s' '%s'", t_path("log.saved"), t_path("log"));
			CHECK_EQ(system(cmd), 0);
		}
	}
	/* After a clean open the log is empty: a third open replays nothing. */
	atomio *st;
	struct atomio_options o = {0};
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.groups_recovered, 0);
	CHECK_OK(atomio_close(st));
	free(m[0].b);
	free(m[1].b);
	return 0;
}
