/*
 * sysinfo.c: what the machine says about a path: its mount (from
 * /proc/self/mountinfo), its block device and queue limits (sysfs), its
 * statx limits (atomic writes, direct-I/O alignment), and I/O counters
 * (/sys/.../stat, /proc/self/io).  Its functions are named host_*: the
 * library's sys_* are its ops table (src/sys.h), which the command does not
 * go through for these reads of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cli.h"
#include "sys.h" /* struct atomio_statx: Debian 12's headers predate the atomic-write fields */

#define STATX_MNT_ID_BIT 0x1000u

int host_statx_info(int dirfd, const char *path, int flags, struct stx_info *out)
{
	memset(out, 0, sizeof(*out));
	struct atomio_statx sx;
	memset(&sx, 0, sizeof(sx));
	unsigned mask = ATOMIO_STATX_BASIC | STATX_MNT_ID_BIT | ATOMIO_STATX_DIOALIGN |
			ATOMIO_STATX_WRITE_ATOMIC;
	if (syscall(SYS_statx, dirfd, path, flags, mask, &sx) < 0)
		return -errno;
	out->ok = true;
	out->dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	out->has_mnt_id = sx.stx_mask & STATX_MNT_ID_BIT;
	out->mnt_id = sx.stx_mnt_id;
	out->has_dioalign = sx.stx_mask & ATOMIO_STATX_DIOALIGN;
	out->dio_mem_align = sx.stx_dio_mem_align;
	out->dio_offset_align = sx.stx_dio_offset_align;
	out->dio_read_offset_align = sx.stx_dio_read_offset_align;
	out->has_atomic = sx.stx_mask & ATOMIO_STATX_WRITE_ATOMIC;
	out->attr_atomic = sx.stx_attributes & ATOMIO_STATX_ATTR_WRITE_ATOMIC;
	if (out->has_atomic) {
		out->unit_min = sx.stx_atomic_write_unit_min;
		out->unit_max = sx.stx_atomic_write_unit_max;
		out->unit_max_opt = sx.stx_atomic_write_unit_max_opt;
		out->segments_max = sx.stx_atomic_write_segments_max;
	}
	out->blksize = sx.stx_blksize;
	out->mode = sx.stx_mode;
	/* The filesystem's magic, for when mountinfo does not list the mount. */
	struct statfs fs;
	int r = -1;
	if ((flags & AT_EMPTY_PATH) && !*path) {
		r = fstatfs(dirfd, &fs);
	} else if (dirfd == AT_FDCWD || path[0] == '/') {
		r = statfs(path, &fs);
	} else {
		int fd = openat(dirfd, path, O_PATH | O_CLOEXEC);
		if (fd >= 0) {
			r = fstatfs(fd, &fs);
			close(fd);
		}
	}
	if (r == 0) {
		out->has_ftype = true;
		out->f_type = (int64_t)fs.f_type;
	}
	return 0;
}

/* Filesystem names by statfs magic (linux/magic.h), for the fallback. */
static const struct {
	int64_t magic;
	const char *name;
} fs_magic[] = {
	{0xEF53, "ext4"}, /* ext2, ext3 and ext4 share it; told apart below */
	{0x58465342, "xfs"},
	{0x9123683E, "btrfs"},
	{0xF2F52010, "f2fs"},
	{0xCA451A4E, "bcachefs"},
	{0x2FC12FC1, "zfs"},
	{0x01021994, "tmpfs"},
	{0x858458F6, "ramfs"},
	{0x794C7630, "overlay"},
	{0x65735546, "fuse"},
	{0x6969, "nfs"},
	{0xFF534D42, "cifs"},
	{0x01021997, "v9fs"},
	{0x73717368, "squashfs"},
	{0x4D44, "vfat"},
	{0x5346544E, "ntfs"},
};

/* mountinfo lists only the mounts under the process's root: inside a
 * chroot the root filesystem itself is absent.  Name it from statfs and
 * the device number; there is no mount point or options to report. */
static void mount_from_statfs(const struct stx_info *sx, struct mount_info *m)
{
	const char *name = NULL;
	for (size_t i = 0; i < sizeof(fs_magic) / sizeof(fs_magic[0]); i++)
		if (fs_magic[i].magic == (sx->f_type & 0xFFFFFFFF))
			name = fs_magic[i].name;
	char p[PATH_MAX], real[PATH_MAX] = "";
	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u", major(sx->dev), minor(sx->dev));
	bool blk = realpath(p, real) != NULL;
	const char *dev = blk ? strrchr(real, '/') + 1 : NULL;
	if (name && !strcmp(name, "ext4") && dev) {
		/* The ext4 driver registers every filesystem it mounts here
		 * (ext2 and ext3 included, which it also serves). */
		snprintf(p, sizeof(p), "/sys/fs/ext4/%s", dev);
		if (access(p, F_OK) != 0)
			name = "ext2/ext3";
	}
	m->found = true;
	m->from_statfs = true;
	if (name)
		snprintf(m->fstype, sizeof(m->fstype), "%s", name);
	else
		snprintf(m->fstype, sizeof(m->fstype), "0x%llx", (unsigned long long)sx->f_type);
	if (dev)
		snprintf(m->source, sizeof(m->source), "/dev/%.1000s", dev);
	else
		snprintf(m->source, sizeof(m->source), "%u:%u", major(sx->dev), minor(sx->dev));
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r;) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
}

void host_mount_for(const struct stx_info *sx, struct mount_info *m)
{
	memset(m, 0, sizeof(*m));
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f) {
		if (sx->has_ftype)
			mount_from_statfs(sx, m);
		return;
	}
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		/* id parent maj:min root mountpoint options [optional...] - fstype source superopts */
		unsigned long long id;
		unsigned ma, mi;
		char mp[1024], opts[1024];
		if (sscanf(line, "%llu %*u %u:%u %*s %1023s %1023s", &id, &ma, &mi, mp, opts) != 5)
			continue;
		bool match = sx->has_mnt_id ? id == sx->mnt_id : makedev(ma, mi) == sx->dev;
		if (!match)
			continue;
		char *sep = strstr(line, " - ");
		if (!sep)
			continue;
		char fstype[64] = "", source[1024] = "";
		if (sscanf(sep + 3, "%63s %1023s", fstype, source) < 1)
			continue;
		unescape(mp);
		unescape(source);
		m->found = true;
		snprintf(m->fstype, sizeof(m->fstype), "%s", fstype);
		snprintf(m->source, sizeof(m->source), "%s", source);
		snprintf(m->mount_point, sizeof(m->mount_point), "%s", mp);
		snprintf(m->options, sizeof(m->options), "%s", opts);
		if (sx->has_mnt_id)
			break; /* by device number: keep the last (topmost) mount */
	}
	free(line);
	fclose(f);
	if (!m->found && sx->has_ftype)
		mount_from_statfs(sx, m);
}

static int read_str(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t r = read(fd, buf, n - 1);
	int e = errno;
	close(fd);
	if (r < 0)
		return -e;
	buf[r] = 0;
	while (r > 0 && (buf[r - 1] == '\n' || buf[r - 1] == ' '))
		buf[--r] = 0;
	return 0;
}

static long long read_ll(const char *dir, const char *name)
{
	char p[1024], b[64];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (read_str(p, b, sizeof(b)) < 0)
		return -1;
	return strtoll(b, NULL, 10);
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

void host_blk_for(uint64_t dev, const struct mount_info *m, struct blk_info *b)
{
	memset(b, 0, sizeof(*b));
	b->logical_block = b->physical_block = b->rotational = -1;
	b->atomic_write_max_bytes = b->atomic_write_unit_min_bytes = -1;
	b->atomic_write_unit_max_bytes = b->atomic_write_boundary_bytes = -1;
	b->fua = -1;
	unsigned ma = major(dev), mi = minor(dev);
	char link[128], real[PATH_MAX];
	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", ma, mi);
	if (!realpath(link, real)) {
		/* An anonymous device (btrfs subvolumes, overlay): the mount's
		 * source names the block device, if there is one. */
		struct stat sb;
		if (!m || !m->found || strncmp(m->source, "/dev/", 5) || stat(m->source, &sb) ||
		    !S_ISBLK(sb.st_mode))
			return;
		ma = major(sb.st_rdev);
		mi = minor(sb.st_rdev);
		snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", ma, mi);
		if (!realpath(link, real))
			return;
	}
	b->found = true;
	b->major = ma;
	b->minor = mi;
	snprintf(b->name, sizeof(b->name), "%.63s", base_name(real));
	snprintf(b->stat_path, sizeof(b->stat_path), "%.500s/stat", real);
	char p[PATH_MAX + 32];
	snprintf(p, sizeof(p), "%s/partition", real);
	b->partition = access(p, F_OK) == 0;
	char disk[PATH_MAX];
	snprintf(disk, sizeof(disk), "%s", real);
	if (b->partition) {
		char *s = strrchr(disk, '/');
		if (s)
			*s = 0;
	}
	snprintf(b->disk, sizeof(b->disk), "%.63s", base_name(disk));
	snprintf(b->disk_stat_path, sizeof(b->disk_stat_path), "%.500s/stat", disk);
	snprintf(b->queue_dir, sizeof(b->queue_dir), "%.500s/queue", disk);
	snprintf(p, sizeof(p), "%s/loop/backing_file", disk);
	read_str(p, b->backing, sizeof(b->backing));
	snprintf(p, sizeof(p), "%s/device/model", disk);
	if (read_str(p, b->model, sizeof(b->model)) < 0) {
		/* virtio and others have no model: name the driver instead */
		char drv[PATH_MAX];
		snprintf(p, sizeof(p), "%s/device/driver", disk);
		if (realpath(p, drv))
			snprintf(b->model, sizeof(b->model), "driver %.100s", base_name(drv));
	}
	const char *q = b->queue_dir;
	b->logical_block = read_ll(q, "logical_block_size");
	b->physical_block = read_ll(q, "physical_block_size");
	b->rotational = read_ll(q, "rotational");
	b->atomic_write_max_bytes = read_ll(q, "atomic_write_max_bytes");
	b->atomic_write_unit_min_bytes = read_ll(q, "atomic_write_unit_min_bytes");
	b->atomic_write_unit_max_bytes = read_ll(q, "atomic_write_unit_max_bytes");
	b->atomic_write_boundary_bytes = read_ll(q, "atomic_write_boundary_bytes");
	b->fua = (int)read_ll(q, "fua");
	snprintf(p, sizeof(p), "%s/write_cache", q);
	read_str(p, b->write_cache, sizeof(b->write_cache));
}

static bool read_stat_file(const char *path, uint64_t v[17], int *n)
{
	char buf[512];
	if (!path[0] || read_str(path, buf, sizeof(buf)) < 0)
		return false;
	*n = 0;
	char *s = buf, *end;
	while (*n < 17) {
		unsigned long long x = strtoull(s, &end, 10);
		if (end == s)
			break;
		v[(*n)++] = x;
		s = end;
	}
	return *n >= 7;
}

void host_dev_counters(const struct blk_info *b, struct dev_counters *c)
{
	memset(c, 0, sizeof(*c));
	if (!b->found)
		return;
	/* Documentation/ABI/stable/sysfs-block: write I/Os is field 5, write
	 * sectors field 7 (512-byte units), flush I/Os field 16. */
	uint64_t v[17] = {0};
	int n;
	if (!read_stat_file(b->stat_path, v, &n))
		return;
	c->ok = true;
	c->write_ios = v[4];
	c->write_sectors = v[6];
	uint64_t d[17] = {0};
	if (read_stat_file(b->disk_stat_path, d, &n) && n >= 16)
		c->flushes = d[15];
}

bool host_proc_write_bytes(uint64_t *out)
{
	char buf[1024];
	if (read_str("/proc/self/io", buf, sizeof(buf)) < 0)
		return false;
	char *p = strstr(buf, "\nwrite_bytes:");
	if (!p)
		return false;
	*out = strtoull(p + 13, NULL, 10);
	return true;
}

uint32_t host_atomio_log_block(const struct stx_info *sx, const struct blk_info *b)
{
	/* Mirrors the library's choice (logfile.c, pick_block) for reporting. */
	uint32_t blk = 512;
	if (sx->has_dioalign && sx->dio_offset_align > blk)
		blk = sx->dio_offset_align;
	uint32_t p = b->found && b->physical_block >= 512 ? (uint32_t)b->physical_block : 4096;
	if (p > blk)
		blk = p;
	return blk > 4096 ? 4096 : blk;
}

const char *host_kernel(char *buf, size_t n)
{
	struct utsname u;
	if (uname(&u))
		snprintf(buf, n, "unknown");
	else
		snprintf(buf, n, "%s %s", u.sysname, u.release);
	return buf;
}
