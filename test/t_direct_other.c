/* A leader whose home writes to a file are O_DIRECT (no buffered twin: no
 * /proc, or ATOMIO_DIRECT_HOME) writes other processes' groups home too --
 * from the shared arena, where the committing process aligned the data for
 * the file as IT opened it.  A process that writes by the catalog's id,
 * without registering the file, has it opened buffered and aligns its data
 * to 16 bytes only: the leader's O_DIRECT write of it failed with EINVAL
 * and the store failed for every process.  Now such a write goes through an
 * aligned copy (engine_seg_aligned).  Under the simulator (no /proc, O_DIRECT
 * memory alignment 4096): process 1 registers the file O_DIRECT, process 2
 * commits a group to it by id (its own leader: buffered); then process 1's
 * home write of a range whose data lies as process 2's arena copy may lie
 * (16-byte aligned) must succeed -- the home write a leader of process 1
 * makes of such a group in a shared batch (the simulator's runs cover the
 * whole path: a batch of several processes' groups, led by either).
 *
 * Found by t_crash's several-processes runs (procs=1,noproc=1,direct=4:
 * "writing home data to /d/f2: Invalid argument"). */
#include "engine.h"
#include "internal.h"
#include "support/simfs.h"
#include "sys.h"
#include "t.h"

#define LOG "/d/log"
#define GLEN 4096

int main(void)
{
	struct simfs *fs = simfs_new(&(struct simfs_config){.seed = 13, .dio_mem_align = 4096});
	CHECK_OK(simfs_mkdir(fs, "/d"));
	simfs_install(fs);
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st1, *st2;
	simfs_proc_set(1);
	CHECK_OK(atomio_open(LOG, &o, &st1));
	int id = atomio_file_open(st1, "/d/f", O_CREAT | O_DIRECT, 0644);
	CHECK(id >= 0);
	struct atomio_caps caps;
	CHECK_OK(atomio_caps(st1, id, &caps));
	CHECK(caps.flags & ATOMIO_CAP_DIRECT_HOME); /* no /proc: no buffered twin */
	simfs_proc_set(2);
	CHECK_OK(atomio_open(LOG, &o, &st2)); /* joins; writes the file by its id only */
	uint8_t *b;
	CHECK_OK(posix_memalign((void **)&b, 4096, 2 * GLEN));
	memset(b, 'C', 2 * GLEN);
	CHECK_EQ(atomio_pwrite(st2, id, b + 16, GLEN, 0), (ssize_t)GLEN); /* by id, not registered */

	/* process 1 writes home a range whose data is 16-byte aligned only */
	simfs_proc_set(1);
	memset(b, 'D', 2 * GLEN);
	struct afile *f = file_get(st1, id);
	CHECK(f && f->direct_home);
	struct seg s = {.file = (uint32_t)id, .kind = SEG_WRITE, .off = GLEN, .len = GLEN, .src = b + 16};
	CHECK(!engine_seg_aligned(f, &s));
	int r = engine_plain_seg(st1, f, &s);
	if (r < 0)
		printf("FAIL: O_DIRECT home write of data aligned for buffered I/O: %s\n", strerror(-r));
	CHECK_OK(r);
	free(b);
	CHECK_OK(atomio_close(st2));
	simfs_proc_set(1);
	CHECK_OK(atomio_close(st1));
	const char want[] = "CD";
	for (int i = 0; i < 2; i++) {
		uint8_t got[GLEN];
		CHECK_EQ(simfs_read(fs, "/d/f", (uint64_t)i * GLEN, got, sizeof(got)), (int64_t)sizeof(got));
		CHECK_EQ(got[0], (uint8_t)want[i]);
		CHECK_EQ(got[GLEN - 1], (uint8_t)want[i]);
	}
	simfs_uninstall();
	simfs_free(fs);
	printf("direct other: a home write through an O_DIRECT descriptor of data another process aligned "
	       "for buffered I/O\n");
	return 0;
}
