/* Registering a file the application has just created and written, without
 * syncing it: once atomio_file_open returns, the file (its name and bytes)
 * must survive a power cut, or an acknowledged group to it is lost (and a
 * missing file stops recovery of every group with ATOMIO_EIDENTITY).  Under
 * the simulator: commit, cut the power with nothing pending landed, recover. */
#include "support/crashsim.h"
#include "support/simfs.h"
#include "sys.h"
#include "t.h"

int main(void)
{
	struct simfs *fs = simfs_new(&(struct simfs_config){.seed = 5});
	CHECK_OK(simfs_mkdir(fs, "/d"));
	CHECK_OK(simfs_mkdir(fs, "/e"));
	simfs_install(fs);

	/* the application's files: one beside the log, one elsewhere */
	const char *paths[2] = {"/d/a", "/e/b"};
	uint8_t init[2][6000];
	for (int i = 0; i < 2; i++) {
		t_fill(init[i], sizeof(init[i]), 100 + (uint32_t)i, 0);
		int fd = atomio_sys->open(paths[i], O_RDWR | O_CREAT | O_EXCL, 0644);
		CHECK(fd >= 0);
		struct iovec iov = {init[i], sizeof(init[i])};
		CHECK_EQ(atomio_sys->pwritev(fd, &iov, 1, 0, 0), (ssize_t)sizeof(init[i]));
		CHECK_OK(atomio_sys->close(fd));
	}
	struct atomio_options o = t_opts(65536);
	atomio *st;
	CHECK_OK(atomio_open("/d/log", &o, &st));
	int ids[2];
	for (int i = 0; i < 2; i++)
		CHECK((ids[i] = atomio_file_open(st, paths[i], 0, 0)) >= 0);
	uint8_t g[100];
	memset(g, 0x5A, sizeof(g));
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, ids[0], g, sizeof(g), 1000));
	CHECK_OK(atomio_tx_write(tx, ids[1], g, sizeof(g), 2000));
	CHECK_OK(atomio_tx_commit(tx)); /* acknowledged */

	/* power cut: nothing that was not made durable landed */
	simfs_reset(fs, simfs_crash(fs, NULL));
	atomio_close(st); /* its descriptors died with the "machine" */
	char err[512] = "";
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	int r = atomio_open("/d/log", &o, &st);
	if (r < 0)
		fprintf(stderr, "recovery: %s: %s\n", atomio_strerror(r), err);
	CHECK_OK(r);
	CHECK_OK(atomio_close(st));
	for (int i = 0; i < 2; i++) {
		memcpy(init[i] + 1000 + 1000 * i, g, sizeof(g));
		uint64_t where = 0;
		int c = simfs_cmp(fs, paths[i], init[i], sizeof(init[i]), &where);
		if (c)
			fprintf(stderr, "%s: %s at %llu (size %lld)\n", paths[i],
				c < 0 ? "missing" : "differs", (unsigned long long)where,
				(long long)simfs_size(fs, paths[i]));
		CHECK_EQ(c, 0);
	}
	simfs_uninstall();
	simfs_free(fs);

	/* and at every crash point of a whole run over such files */
	struct cs_cfg c;
	CHECK_OK(cs_cfg_parse("seed=21,files=3,groups=12,appfiles=1,samples=4", &c));
	c.groups = T_SCALE(c.groups) < 3 ? 3 : T_SCALE(c.groups);
	struct cs_stats cs = {0};
	r = cs_run(&c, NULL, &cs, "t_crash");
	cs_stats_print("appfiles", &cs);
	return r;
}
