/*
 * probe.c: `atomio probe PATH` -- what atomic-write support a file, a
 * directory (through a temporary file in it) or a block device has, and
 * which path atomio takes for a few write sizes.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cli.h"
#include "format.h" /* DEFAULT_LOG_SIZE */
#include "sys.h" /* RWF_ATOMIC, RWF_DSYNC */

static void help(void)
{
	printf("usage: atomio probe [--json] [--sizes LIST] [--try-writes] [--log-size SIZE] PATH\n\n"
	       "Show what atomic-write support PATH (a file, a directory or a block device) has:\n"
	       "filesystem and mount, block device and its queue limits (atomic_write_*, block\n"
	       "sizes, write cache, FUA), the kernel's RWF_ATOMIC limits from statx\n"
	       "(STATX_WRITE_ATOMIC: unit min/max, unit_max_opt, segments), direct-I/O alignment\n"
	       "(STATX_DIOALIGN), and for a few write sizes which path atomio takes.\n"
	       "For a directory the limits are read from a temporary file created in it and\n"
	       "removed at once (the limits of files, not directories, are what matter).\n\n"
	       "  --json            print one JSON object instead of text\n"
	       "  --sizes LIST      write sizes to classify (default 4k,16k,64k,256k,1M,4M)\n"
	       "  --try-writes      also try one RWF_ATOMIC|RWF_DSYNC write of each size to a\n"
	       "                    temporary file in PATH's directory (never to PATH itself)\n"
	       "  --log-size SIZE   log size assumed for the largest group (default 1G)\n"
	       "  -h, --help        this help\n\n"
	       "Exit status: 0 printed, 2 usage error, 3 PATH cannot be examined.\n");
}

struct size_row {
	uint64_t size;
	bool pow2, kernel_accepts, hardware, too_big;
	int tried; /* 0 not tried, 1 accepted, <0 -errno */
	const char *path;
	const char *why;
};

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* A temporary file in dir, O_DIRECT when the filesystem takes it.
 * *direct says which; the file has no name (O_TMPFILE) or is unlinked. */
static int temp_file(const char *dir, bool *direct, int *err)
{
	for (int pass = 0; pass < 2; pass++) {
		int dflag = pass == 0 ? O_DIRECT : 0;
		int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC | dflag, 0600);
		if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == ENOENT)) {
			char p[PATH_MAX + 32];
			snprintf(p, sizeof(p), "%s/.atomio-probe-XXXXXX", dir);
			fd = mkostemp(p, O_CLOEXEC | dflag);
			if (fd >= 0)
				unlink(p);
		}
		if (fd >= 0) {
			*direct = dflag != 0;
			return fd;
		}
		*err = errno;
		if (errno != EINVAL)
			return -1;
	}
	return -1;
}

static int try_atomic(int fd, uint64_t size)
{
	void *buf = NULL;
	if (posix_memalign(&buf, 4096, size))
		return -ENOMEM;
	memset(buf, 0x5a, size);
	struct iovec iov = {buf, size};
	/* Offset 0 is aligned for any size: RWF_ATOMIC needs natural alignment. */
	ssize_t n = pwritev2(fd, &iov, 1, 0, RWF_ATOMIC | RWF_DSYNC);
	int r = n == (ssize_t)size ? 1 : n < 0 ? -errno : -EIO;
	free(buf);
	return r;
}

static const char *yesno(int v) { return v < 0 ? "unknown" : v ? "yes" : "no"; }

/* One probe: what was asked, then what was found, step by step. */
struct probe {
	const char *path;
	bool json, try_writes;
	uint64_t sizes[16];
	unsigned nsizes;
	uint64_t log_size;

	struct stat sb;
	const char *kind;        /* "file", "directory", "block device" */
	const char *limits_from; /* which file statx described */
	struct stx_info sx;
	int tmpfd, tmp_err;      /* a temporary file in the directory, -1 none */
	bool tmp_direct;         /* it was opened O_DIRECT */
	bool direct_ok;          /* O_DIRECT works on PATH (or the temporary file) */
	struct mount_info m;
	struct blk_info b;
	uint32_t log_block;
	bool atomic;             /* RWF_ATOMIC limits, not zero */
	uint64_t max_group;
	long long hw_max, hw_min; /* the device's atomic write unit, 0 none */
	struct size_row rows[16];
};

/* The options.  false: --help was printed. */
static bool probe_args(int argc, char **argv, struct probe *p)
{
	static const struct option lo[] = {
		{"json", no_argument, 0, 'j'},       {"sizes", required_argument, 0, 's'},
		{"try-writes", no_argument, 0, 't'}, {"log-size", required_argument, 0, 'L'},
		{"help", no_argument, 0, 'h'},       {0, 0, 0, 0},
	};
	static const uint64_t default_sizes[] = {4096, 16384, 65536, 262144, 1 << 20, 4 << 20};
	memcpy(p->sizes, default_sizes, sizeof(default_sizes));
	p->nsizes = 6;
	p->log_size = DEFAULT_LOG_SIZE; /* the library's default (format.h) */
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (c) {
		case 'j': p->json = true; break;
		case 't': p->try_writes = true; break;
		case 's': p->nsizes = cli_list("--sizes", optarg, p->sizes, 16, true, 1, 1ull << 40); break;
		case 'L': p->log_size = cli_size("--log-size", optarg); break;
		case 'h': help(); return false;
		default: cli_bad_option(argv, c);
		}
	}
	if (optind != argc - 1)
		cli_usage(optind >= argc ? "which PATH? (a file, directory or block device)"
					 : "one PATH only");
	p->path = argv[optind];
	return true;
}

/* What PATH is; dies unless a file, a directory or a block device. */
static void probe_target(struct probe *p)
{
	if (stat(p->path, &p->sb) < 0)
		cli_die(EX_ERROR, "%s: %s", p->path, strerror(errno));
	mode_t mode = p->sb.st_mode;
	p->kind = S_ISDIR(mode) ? "directory" : S_ISREG(mode) ? "file" : S_ISBLK(mode) ? "block device" : NULL;
	if (!p->kind)
		cli_die(EX_ERROR, "%s: not a file, directory or block device", p->path);
}

/* The directory a temporary file goes in: PATH itself, or the one holding it. */
static void probe_dir(const struct probe *p, char *dir, size_t n)
{
	snprintf(dir, n, "%s", p->path);
	if (S_ISDIR(p->sb.st_mode))
		return;
	char *s = strrchr(dir, '/');
	if (!s)
		snprintf(dir, n, ".");
	else if (s == dir)
		dir[1] = 0;
	else
		*s = 0;
}

/* statx's limits, of a temporary file for a directory (the limits of files
 * are what matter), and whether O_DIRECT works. */
static void probe_limits(struct probe *p)
{
	bool isdir = S_ISDIR(p->sb.st_mode);
	char dir[PATH_MAX];
	probe_dir(p, dir, sizeof(dir));
	p->tmpfd = -1;
	if (isdir || (p->try_writes && S_ISREG(p->sb.st_mode)))
		p->tmpfd = temp_file(dir, &p->tmp_direct, &p->tmp_err);
	int r;
	if (isdir && p->tmpfd >= 0) {
		r = host_statx_info(p->tmpfd, "", AT_EMPTY_PATH, &p->sx);
		p->limits_from = "a temporary file in it";
	} else {
		r = host_statx_info(AT_FDCWD, p->path, 0, &p->sx);
		p->limits_from = isdir ? "the directory itself (no file could be created in it)"
				       : "the file itself";
	}
	if (r < 0)
		cli_die(EX_ERROR, "%s: statx: %s", p->path, strerror(-r));
	p->direct_ok = isdir ? p->tmp_direct : false;
	if (S_ISREG(p->sb.st_mode) || S_ISBLK(p->sb.st_mode)) {
		int fd = open(p->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		p->direct_ok = fd >= 0;
		if (fd >= 0)
			close(fd);
	}
}

/* The mount and the block device under it, and what follows for atomio. */
static void probe_device(struct probe *p)
{
	if (S_ISBLK(p->sb.st_mode)) {
		host_blk_for(p->sb.st_rdev, NULL, &p->b);
	} else {
		host_mount_for(&p->sx, &p->m);
		host_blk_for(p->sx.dev, &p->m, &p->b);
	}
	const struct blk_info *b = &p->b;
	p->log_block = host_atomio_log_block(&p->sx, b);
	/* ext4 answers STATX_WRITE_ATOMIC with zero limits where it has none. */
	p->atomic = p->sx.has_atomic && p->sx.unit_max > 0;
	p->max_group = p->log_size > 96 ? p->log_size - 64 - 32 : 0;
	p->hw_max = b->found && b->atomic_write_unit_max_bytes > 0 ? b->atomic_write_unit_max_bytes : 0;
	p->hw_min = b->found && b->atomic_write_unit_min_bytes > 0 ? b->atomic_write_unit_min_bytes : 0;
}

/* Which path atomio takes for a write of size s, and why. */
static void classify(const struct probe *p, uint64_t s, struct size_row *w)
{
	const struct stx_info *sx = &p->sx;
	memset(w, 0, sizeof(*w));
	w->size = s;
	w->pow2 = is_pow2(s);
	w->kernel_accepts = p->atomic && w->pow2 && s >= sx->unit_min && s <= sx->unit_max;
	/* Hardware-backed: the device's own atomic limit covers it, and
	 * the filesystem does not switch to its slow software path
	 * (unit_max_opt, when set, is where that switch happens). */
	w->hardware = w->kernel_accepts && p->hw_max && (long long)s <= p->hw_max &&
		      (long long)s >= p->hw_min && (!sx->unit_max_opt || s <= sx->unit_max_opt);
	w->too_big = s > p->max_group;
	if (w->hardware) {
		w->path = "RWF_ATOMIC in place";
		w->why = "one range, O_DIRECT, power of two, aligned, backed by the device";
	} else if (w->too_big) {
		w->path = "refused (E2BIG)";
		w->why = "larger than the largest group a log of this size holds";
	} else {
		w->path = "log";
		w->why = !p->atomic ? "no RWF_ATOMIC on this file"
			 : !w->pow2     ? "not a power of two"
			 : !w->kernel_accepts ? "outside the kernel's RWF_ATOMIC unit range"
					      : "the kernel would emulate it in software (slower than the log)";
	}
}

/* Every size classified (and tried, with --try-writes); the temporary file closed. */
static void probe_sizes(struct probe *p)
{
	for (unsigned i = 0; i < p->nsizes; i++) {
		classify(p, p->sizes[i], &p->rows[i]);
		if (p->try_writes && p->tmpfd >= 0 && p->tmp_direct)
			p->rows[i].tried = try_atomic(p->tmpfd, p->sizes[i]);
	}
	if (p->tmpfd >= 0)
		close(p->tmpfd);
}

/* --- --json ------------------------------------------------------------------ */

static void json_device(struct json *j, const struct blk_info *b)
{
	if (!b->found) {
		json_null(j, "device");
		return;
	}
	json_obj(j, "device");
	json_str(j, "name", b->name);
	json_str(j, "disk", b->disk);
	char mm[32];
	snprintf(mm, sizeof(mm), "%u:%u", b->major, b->minor);
	json_str(j, "dev", mm);
	json_bool(j, "partition", b->partition);
	json_str(j, "loop_backing_file", b->backing[0] ? b->backing : NULL);
	json_str(j, "model", b->model[0] ? b->model : NULL);
	json_obj(j, "queue");
	json_int(j, "logical_block_size", b->logical_block);
	json_int(j, "physical_block_size", b->physical_block);
	json_int(j, "rotational", b->rotational);
	json_str(j, "write_cache", b->write_cache[0] ? b->write_cache : NULL);
	if (b->fua < 0)
		json_null(j, "fua");
	else
		json_bool(j, "fua", b->fua);
	json_int(j, "atomic_write_max_bytes", b->atomic_write_max_bytes);
	json_int(j, "atomic_write_unit_min_bytes", b->atomic_write_unit_min_bytes);
	json_int(j, "atomic_write_unit_max_bytes", b->atomic_write_unit_max_bytes);
	json_int(j, "atomic_write_boundary_bytes", b->atomic_write_boundary_bytes);
	json_end_obj(j);
	json_end_obj(j);
}

static void json_statx(struct json *j, const struct probe *p)
{
	const struct stx_info *sx = &p->sx;
	json_obj(j, "statx");
	json_bool(j, "write_atomic", p->atomic);
	json_bool(j, "attr_write_atomic", sx->attr_atomic);
	json_uint(j, "atomic_write_unit_min", sx->unit_min);
	json_uint(j, "atomic_write_unit_max", sx->unit_max);
	json_uint(j, "atomic_write_unit_max_opt", sx->unit_max_opt);
	json_uint(j, "atomic_write_segments_max", sx->segments_max);
	json_bool(j, "dioalign", sx->has_dioalign);
	json_uint(j, "dio_mem_align", sx->dio_mem_align);
	json_uint(j, "dio_offset_align", sx->dio_offset_align);
	json_uint(j, "dio_read_offset_align", sx->dio_read_offset_align);
	json_end_obj(j);
}

static void json_atomio(struct json *j, const struct probe *p)
{
	json_obj(j, "atomio");
	json_uint(j, "log_block", p->log_block);
	json_uint(j, "log_size", p->log_size);
	json_uint(j, "max_group_bytes", p->max_group);
	json_int(j, "hardware_atomic_max", p->hw_max);
	json_arr(j, "sizes");
	for (unsigned i = 0; i < p->nsizes; i++) {
		const struct size_row *w = &p->rows[i];
		json_obj(j, NULL);
		json_uint(j, "size", w->size);
		json_bool(j, "kernel_accepts", w->kernel_accepts);
		json_bool(j, "hardware_backed", w->hardware);
		json_str(j, "atomio_path", w->path);
		json_str(j, "why", w->why);
		if (w->tried)
			json_str(j, "tried", w->tried > 0 ? "accepted" : strerror(-w->tried));
		json_end_obj(j);
	}
	json_end_arr(j);
	json_end_obj(j);
}

static void print_json(const struct probe *p)
{
	const struct mount_info *m = &p->m;
	struct json j;
	json_init(&j, stdout);
	json_obj(&j, NULL);
	json_str(&j, "path", p->path);
	json_str(&j, "kind", p->kind);
	json_str(&j, "limits_from", p->limits_from);
	json_str(&j, "filesystem", m->found ? m->fstype : NULL);
	json_str(&j, "filesystem_from", !m->found ? NULL : m->from_statfs ? "statfs" : "mountinfo");
	json_str(&j, "mount_point", m->found && !m->from_statfs ? m->mount_point : NULL);
	json_str(&j, "mount_source", m->found ? m->source : NULL);
	json_str(&j, "mount_options", m->found && !m->from_statfs ? m->options : NULL);
	json_device(&j, &p->b);
	json_statx(&j, p);
	json_bool(&j, "o_direct", p->direct_ok);
	json_atomio(&j, p);
	json_end_obj(&j);
	json_finish(&j);
}

/* --- text ---------------------------------------------------------------------- */

/* The path, its filesystem and the block device with its queue limits. */
static void text_device(const struct probe *p)
{
	const struct mount_info *m = &p->m;
	const struct blk_info *b = &p->b;
	printf("path           %s (%s; limits from %s)\n", p->path, p->kind, p->limits_from);
	if (m->found && m->from_statfs)
		printf("filesystem     %s on %s (from statfs: /proc/self/mountinfo does not list this "
		       "mount, as in a chroot)\n", m->fstype, m->source);
	else if (m->found)
		printf("filesystem     %s from %s, mounted at %s (%s)\n", m->fstype, m->source,
		       m->mount_point, m->options);
	if (!b->found) {
		printf("block device   none (no block device under this filesystem)\n");
		return;
	}
	printf("block device   %s (%u:%u)%s%s%s%s\n", b->name, b->major, b->minor,
	       b->partition ? ", a partition of " : "", b->partition ? b->disk : "",
	       b->model[0] ? ", " : "", b->model);
	if (b->backing[0])
		printf("               loop device over %s\n", b->backing);
	printf("queue          logical block %lld, physical block %lld, write cache: %s, FUA: %s,"
	       " rotational: %s\n",
	       b->logical_block, b->physical_block, b->write_cache[0] ? b->write_cache : "unknown",
	       yesno(b->fua), yesno((int)b->rotational));
	if (b->atomic_write_unit_max_bytes < 0)
		printf("               no atomic_write_* queue limits (kernel older than 6.11)\n");
	else
		printf("               atomic_write_max_bytes %lld, unit min %lld, unit max %lld, "
		       "boundary %lld%s\n",
		       b->atomic_write_max_bytes, b->atomic_write_unit_min_bytes,
		       b->atomic_write_unit_max_bytes, b->atomic_write_boundary_bytes,
		       p->hw_max ? "" : "  (no hardware atomic writes)");
}

/* The kernel's RWF_ATOMIC limits, direct I/O, and atomio's log. */
static void text_limits(const struct probe *p)
{
	const struct stx_info *sx = &p->sx;
	char a[32], z[32], o[32];
	if (p->atomic)
		printf("RWF_ATOMIC     unit min %s, max %s, max_opt %s%s, segments %u\n%s",
		       fmt_bytes(a, sizeof(a), sx->unit_min), fmt_bytes(z, sizeof(z), sx->unit_max),
		       sx->unit_max_opt ? fmt_bytes(o, sizeof(o), sx->unit_max_opt) : "0",
		       sx->unit_max_opt ? "" : " (no slow-path boundary given)", sx->segments_max,
		       p->hw_max ? "" : "               not backed by the device: the filesystem emulates it\n");
	else
		printf("RWF_ATOMIC     not supported for this file (statx reports no atomic write limits)\n");
	if (sx->has_dioalign)
		printf("direct I/O     %s; memory alignment %u, offset alignment %u%s\n",
		       p->direct_ok ? "O_DIRECT works" : "O_DIRECT refused", sx->dio_mem_align,
		       sx->dio_offset_align, sx->dio_offset_align ? "" : " (0: no direct I/O)");
	else
		printf("direct I/O     %s; STATX_DIOALIGN not reported\n",
		       p->direct_ok ? "O_DIRECT works" : "O_DIRECT refused");
	printf("atomio         log block %u; a %s log holds one-range groups up to %llu bytes\n",
	       p->log_block, fmt_bytes(a, sizeof(a), p->log_size), (unsigned long long)p->max_group);
}

/* The table of write sizes, and the rule behind it. */
static void text_sizes(const struct probe *p)
{
	char a[32];
	printf("\n%-10s %-8s %-9s %-22s %s\n", "write size", "RWF_ATOM", "hardware", "atomio path",
	       p->try_writes ? "tried / why" : "why");
	for (unsigned i = 0; i < p->nsizes; i++) {
		const struct size_row *w = &p->rows[i];
		char why[160];
		if (w->tried)
			snprintf(why, sizeof(why), "%s; %s",
				 w->tried > 0 ? "kernel accepted it" : strerror(-w->tried), w->why);
		else
			snprintf(why, sizeof(why), "%s", w->why);
		printf("%-10s %-8s %-9s %-22s %s\n", fmt_bytes(a, sizeof(a), w->size),
		       w->kernel_accepts ? "yes" : "no", w->hardware ? "yes" : "no", w->path, why);
	}
	printf("\nThe rule (one range, O_DIRECT data file, offset aligned to its size): RWF_ATOMIC in\n"
	       "place when the device backs that size; every other group, and every group on a\n"
	       "buffered file, goes through atomio's log (one log write + one device wait).\n");
	if (p->try_writes && !p->tmp_direct)
		printf("(--try-writes: no O_DIRECT temporary file could be made here: %s)\n",
		       strerror(p->tmp_err ? p->tmp_err : EINVAL));
}

int cmd_probe(int argc, char **argv)
{
	static struct probe probe;
	struct probe *p = &probe;
	if (!probe_args(argc, argv, p))
		return EX_OK;
	probe_target(p);
	probe_limits(p);
	probe_device(p);
	probe_sizes(p);
	if (p->json) {
		print_json(p);
	} else {
		text_device(p);
		text_limits(p);
		text_sizes(p);
	}
	return EX_OK;
}
