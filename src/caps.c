/*
 * caps.c: what the kernel says a data file and its device can do, probed
 * once when the file is opened in the store:
 *
 *  - statx(STATX_WRITE_ATOMIC) on the file: atomic_write_unit_min / _max /
 *    _max_opt / segments_max and STATX_ATTR_WRITE_ATOMIC (Linux 6.11+;
 *    unit_max_opt 6.16+).  src/sys.h carries the statx layout, since Debian
 *    12's headers predate these fields; an older kernel leaves them zero.
 *  - the block device's queue limits in sysfs (/sys/dev/block/MAJ:MIN/queue,
 *    or the parent disk's for a partition): atomic_write_max_bytes,
 *    atomic_write_unit_min_bytes, atomic_write_unit_max_bytes,
 *    atomic_write_boundary_bytes.  Nonzero only where the device itself
 *    does atomic writes.
 *  - direct-I/O alignment (STATX_DIOALIGN) is probed by files.c.
 *
 * HARDWARE-BACKED LIMIT.  unit_max_opt, when nonzero, is the size up to which
 * the filesystem's atomic writes are done by the device (XFS 6.16+; above it,
 * XFS falls back to copy-on-write in software).  When it is zero there is no
 * such boundary: atomic writes are hardware-backed up to unit_max when the
 * device reports atomic-write limits (ext4, raw devices), and done in software
 * or not at all when it does not (XFS without device support).  A software
 * RWF_ATOMIC | RWF_DSYNC write is slower than a logged commit
 * (docs/PERFORMANCE.md, "XFS and the kernel's RWF_ATOMIC"), so the fast path
 * takes hardware-backed sizes only, unless forced.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

static bool pow2(uint32_t v) { return v && !(v & (v - 1)); }

static uint32_t pow2_floor(uint32_t v)
{
	while (v & (v - 1))
		v &= v - 1;
	return v;
}

void file_probe_caps(atomio *st, struct afile *f, int fd)
{
	struct fcaps *c = &f->caps;
	memset(c, 0, sizeof(*c));
	struct atomio_statx stx;
	if (atomio_sys->statx(fd, "", AT_EMPTY_PATH, ATOMIO_STATX_WRITE_ATOMIC, &stx) == 0 &&
	    (stx.stx_mask & ATOMIO_STATX_WRITE_ATOMIC)) {
		c->awu_min = stx.stx_atomic_write_unit_min;
		c->awu_max = stx.stx_atomic_write_unit_max;
		c->awu_max_opt = stx.stx_atomic_write_unit_max_opt;
		c->awu_segs = stx.stx_atomic_write_segments_max;
		if ((stx.stx_attributes & ATOMIO_STATX_ATTR_WRITE_ATOMIC) && c->awu_max)
			c->flags |= ATOMIO_CAP_ATOMIC_WRITE;
	}
	struct stat sb;
	if (atomio_sys->fstat(fd, &sb) == 0) {
		c->bdev_max = sysfs_queue_u32(sb.st_dev, "atomic_write_max_bytes");
		c->bdev_unit_min = sysfs_queue_u32(sb.st_dev, "atomic_write_unit_min_bytes");
		c->bdev_unit_max = sysfs_queue_u32(sb.st_dev, "atomic_write_unit_max_bytes");
		c->bdev_boundary = sysfs_queue_u32(sb.st_dev, "atomic_write_boundary_bytes");
	}
	if (f->direct_home)
		c->flags |= f->direct ? ATOMIO_CAP_DIRECT_HOME : 0;

	/* The hardware-backed limit (see the top of this file). */
	uint32_t hw = 0;
	if (c->flags & ATOMIO_CAP_ATOMIC_WRITE) {
		if (c->awu_max_opt)
			hw = c->awu_max_opt < c->awu_max ? c->awu_max_opt : c->awu_max;
		else if (c->bdev_unit_max)
			hw = c->bdev_unit_max < c->awu_max ? c->bdev_unit_max : c->awu_max;
	}
	if (hw >= c->awu_min && pow2_floor(hw) >= c->awu_min && hw)
		c->flags |= ATOMIO_CAP_HW_ATOMIC;
	else
		hw = 0;

	uint32_t lim = 0;
	if (f->direct && (c->flags & ATOMIO_CAP_ATOMIC_WRITE) && c->awu_segs >= 1 && pow2(c->awu_min) &&
	    !(st->flags & ATOMIO_FAST_PATH_OFF))
		lim = (st->flags & ATOMIO_FAST_PATH_FORCE) ? c->awu_max : hw;
	lim = pow2_floor(lim);
	/* An atomic write is also an O_DIRECT write: aligned to the file. */
	if (lim < c->awu_min || lim < f->dio_off_align)
		lim = 0;
	c->fast_max = lim;
}

void caps_fill(atomio *st, const struct afile *f, struct atomio_caps *caps)
{
	caps->engine = __atomic_load_n(&st->engine, __ATOMIC_RELAXED);
	if (!f)
		return;
	const struct fcaps *c = &f->caps;
	caps->atomic_write_unit_min = c->awu_min;
	caps->atomic_write_unit_max = c->awu_max;
	caps->atomic_write_unit_max_opt = c->awu_max_opt;
	caps->atomic_write_segments_max = c->awu_segs;
	caps->bdev_atomic_write_max_bytes = c->bdev_max;
	caps->bdev_atomic_write_unit_min_bytes = c->bdev_unit_min;
	caps->bdev_atomic_write_unit_max_bytes = c->bdev_unit_max;
	caps->bdev_atomic_write_boundary_bytes = c->bdev_boundary;
	caps->fast_path_max = c->fast_max;
	caps->flags = c->flags;
}
