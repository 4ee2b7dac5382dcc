/*
 * verify.h: `atomio verify`, a torn-write and lost-write checker in the
 * spirit of diskchecker.pl.
 *
 * WRITE.  A data file of N blocks is filled with version 0 of every block and
 * made durable.  Then groups 1, 2, 3, ... are written one after another: group
 * g writes version g of R blocks chosen by a seeded generator (R distinct
 * blocks; for --kernel one naturally aligned run of R blocks, one RWF_ATOMIC
 * write).  When a group is acknowledged (commit returned, or the write +
 * fdatasync returned), record g is appended to the STATE file -- which should
 * live on another device -- and made durable before group g + 1 starts.
 *
 * CHECK.  From the state file: A = the last acknowledged group.  Replaying
 * the generator gives, for each block, the last acknowledged group that wrote
 * it (its expected version); group A + 1 may have been in flight.  Each
 * block is then one of:
 *   ok        its expected version (or group A + 1's version, if A + 1 wrote it)
 *   torn      not one whole version: its sectors carry parts of different
 *             versions, or its checksum fails
 *   lost      a whole but OLDER version: an acknowledged write was lost
 *   corrupt   anything else (zeros, another block's data, a group that never
 *             wrote this block)
 * and a group is HALF-APPLIED when some of its blocks show it and others
 * show an older version (for acknowledged groups, only blocks no later group
 * overwrote count; for A + 1, all of its blocks).
 *
 * BLOCK FORMAT (block size B, a multiple of 512).  Every 512-byte sector s:
 *    0 u64 group (version)   8 u64 block index   16 u64 run id
 *   24 u32 sector index     28 u32 magic "AVFY"   32.. filler from (run, block, group, s)
 * The last 8 bytes of the block: XXH3-64 of the rest, seeded with the run id.
 * A sector header tells which version a sector came from, so a torn block
 * can be described ("sectors 0-3 of group 77, 4-7 of group 12").
 *
 * STATE FILE: a 128-byte header (magic "AVSTATE1", run id, seed, geometry,
 * the data file's identity, checksum) then one 16-byte record per
 * acknowledged group at 128 + 16 * (g - 1): u64 g, u64 checksum.  A torn
 * last record is ignored.
 */
#ifndef ATOMIO_VERIFY_H
#define ATOMIO_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "atomio.h"

enum vmode { VM_ATOMIO = 1, VM_RAW = 2, VM_KERNEL = 3 };

#define V_SECTOR 512u
#define V_MAGIC 0x59465641u /* "AVFY" */
#define V_STATE_MAGIC "AVSTATE1"
#define V_STATE_HDR 128u
#define V_STATE_REC 16u
#define V_DATA_NAME "atomio-verify.dat"
#define V_LOG_NAME "atomio-verify.log"
#define V_MAX_RANGES 1024u

struct vopts {
	const char *dir;
	const char *state;
	enum vmode mode;
	uint32_t bsize;
	unsigned ranges;
	uint64_t nblocks;
	double duration;  /* 0 = until stopped */
	uint64_t groups;  /* 0 = no limit */
	bool direct;
	uint64_t log_size;
	uint64_t seed;
	bool quiet;
	bool force_paths;
	uint32_t store_flags; /* extra atomio_options flags for the writer's store */
	/* selftest hook: called after group g is acknowledged and recorded */
	void (*after_ack)(uint64_t g, atomio *st, int data_fd, void *arg);
	void *hook_arg;
};

struct vstate_hdr {
	char magic[8];
	uint32_t version;
	uint32_t mode;
	uint64_t run_id;
	uint64_t seed;
	uint32_t bsize;
	uint32_t ranges;
	uint64_t nblocks;
	uint64_t data_ino;
	uint64_t data_dev;
	uint32_t flags; /* bit 0: O_DIRECT */
	uint32_t reserved0;
	uint64_t created_ns;
	uint8_t reserved[40];
	uint64_t csum;
};
_Static_assert(sizeof(struct vstate_hdr) == V_STATE_HDR, "state header");

#define V_EXAMPLES 10

struct vproblem {
	uint64_t block;
	char what[200];
};

struct vresult {
	struct vstate_hdr hdr;
	uint64_t acked;           /* A */
	uint64_t recovered;       /* atomio mode: groups replayed by recovery */
	uint64_t ok, torn, lost, corrupt, half;
	uint64_t inflight_new, inflight_old, inflight_size; /* blocks of group A + 1 */
	unsigned nex;
	struct vproblem ex[V_EXAMPLES];
};

/* Fill one block: version g of block idx. */
void v_stamp(void *buf, uint32_t bsize, uint64_t run, uint64_t idx, uint64_t g);
/* Blocks of group g, in out[ranges]. */
void v_group_blocks(const struct vstate_hdr *h, uint64_t g, uint64_t *out);

/* The write run.  Returns an exit code (EX_*); prints its own errors. */
int v_write(const struct vopts *o);
/* The check.  Returns EX_OK / EX_FOUND, or EX_ERROR/EX_UNSUPP with a message
 * printed; fills r. */
int v_check(const struct vopts *o, struct vresult *r);
void v_print(const struct vopts *o, const struct vresult *r, bool json);

int v_selftest(int argc, char **argv);

#endif
