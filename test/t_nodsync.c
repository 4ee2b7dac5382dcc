/* A filesystem that refuses RWF_DSYNC (kernels before 4.7, some FUSE
 * filesystems: pwritev2 answers EOPNOTSUPP).  atomio must still create and
 * open a store, register files, commit, checkpoint and recover, writing
 * records, the superblock and the catalog with a plain write + fdatasync;
 * and every crash image of such a run must recover (simulator, test/support). */
#include "support/crashsim.h"
#include "support/simfs.h"
#include "sys.h"
#include "t.h"

int main(void)
{
	struct simfs *fs = simfs_new(&(struct simfs_config){.seed = 3, .no_rwf_dsync = true});
	CHECK_OK(simfs_mkdir(fs, "/d"));
	simfs_install(fs);
	CHECK_EQ(atomio_sys->pwritev(-1, NULL, 0, 0, RWF_DSYNC), -EBADF); /* the simulator is in */

	char err[256] = "";
	struct atomio_options o = t_opts(65536);
	/* Checkpoints only when the log is full: with the background thread, a
	 * loaded machine could checkpoint every group before the cut and leave
	 * nothing to recover, so the check below would depend on timing. */
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	atomio *st;
	int r = atomio_open("/d/log", &o, &st);
	if (r < 0)
		fprintf(stderr, "atomio_open without RWF_DSYNC: %s: %s\n", atomio_strerror(r), err);
	CHECK_OK(r);
	int f = atomio_file_open(st, "/d/a", O_CREAT, 0644);
	CHECK(f >= 0);
	char buf[5000];
	for (int g = 0; g < 40; g++) { /* several log wraps: checkpoints */
		t_fill(buf, sizeof(buf), (uint32_t)g, 0);
		CHECK_EQ(atomio_pwrite(st, f, buf, sizeof(buf), (off_t)(g % 7) * 1000), (ssize_t)sizeof(buf));
	}
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK(s.checkpoints > 0);
	/* a power cut now: only what was made durable is on the disk */
	simfs_reset(fs, simfs_crash(fs, NULL));
	atomio_close(st); /* its descriptors died with the "machine" */
	CHECK_OK(atomio_open("/d/log", &o, &st));
	CHECK_OK(atomio_stats(st, &s));
	CHECK(s.groups_recovered > 0);
	CHECK_OK(atomio_close(st));
	size_t len;
	uint8_t *d = simfs_get(fs, "/d/a", &len);
	CHECK(d && len == 6 * 1000 + sizeof(buf));
	t_fill(buf, sizeof(buf), 39, 0); /* group 39 wrote at 4000 */
	CHECK(!memcmp(d + 4000, buf, sizeof(buf)));
	free(d);
	simfs_uninstall();
	simfs_free(fs);

	/* every crash point of such a run */
	struct cs_cfg c;
	CHECK_OK(cs_cfg_parse("seed=11,files=2,groups=12,nodsync=1,samples=4", &c));
	c.groups = T_SCALE(c.groups) < 3 ? 3 : T_SCALE(c.groups);
	struct cs_stats cs = {0};
	r = cs_run(&c, NULL, &cs, "t_crash");
	cs_stats_print("nodsync", &cs);
	return r;
}
