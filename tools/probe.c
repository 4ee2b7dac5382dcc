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

int cmd_probe(int argc, char **argv)
{
	static const struct option lo[] = {
		{"json", no_argument, 0, 'j'},       {"sizes", required_argument, 0, 's'},
		{"try-writes", no_argument, 0, 't'}, {"log-size", required_argument, 0, 'L'},
		{"help", no_argument, 0, 'h'},       {0, 0, 0, 0},
	};
	bool json = false, try_writes = false;
	uint64_t sizes[16] = {4096, 16384, 65536, 262144, 1 << 20, 4 << 20};
	unsigned nsizes = 6;
	uint64_t log_size = DEFAULT_LOG_SIZE; /* the library's default (format.h) */
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 't': try_writes = true; break;
		case 's': nsizes = cli_list("--sizes", optarg, sizes, 16, true, 1, 1ull << 40); break;
		case 'L': log_size = cli_size("--log-size", optarg); break;
		case 'h': help(); return EX_OK;
		default: cli_bad_option(argv, c);
		}
	}
	if (optind != argc - 1)
		cli_usage(optind >= argc ? "which PATH? (a file, directory or block device)"
					 : "one PATH only");
	const char *path = argv[optind];

	struct stat sb;
	if (stat(path, &sb) < 0)
		cli_die(EX_ERROR, "%s: %s", path, strerror(errno));
	const char *kind = S_ISDIR(sb.st_mode) ? "directory" : S_ISREG(sb.st_mode) ? "file"
			   : S_ISBLK(sb.st_mode)                      ? "block device"
									: NULL;
	if (!kind)
		cli_die(EX_ERROR, "%s: not a file, directory or block device", path);

	/* The file whose limits we report. */
	char dir[PATH_MAX];
	if (S_ISDIR(sb.st_mode)) {
		snprintf(dir, sizeof(dir), "%s", path);
	} else {
		snprintf(dir, sizeof(dir), "%s", path);
		char *s = strrchr(dir, '/');
		if (!s)
			strcpy(dir, ".");
		else if (s == dir)
			dir[1] = 0;
		else
			*s = 0;
	}
	struct stx_info sx;
	bool tmp_direct = false;
	int tmp_err = 0, tmpfd = -1;
	const char *limits_from;
	if (S_ISDIR(sb.st_mode) || (try_writes && S_ISREG(sb.st_mode)))
		tmpfd = temp_file(dir, &tmp_direct, &tmp_err);
	int r;
	if (S_ISDIR(sb.st_mode) && tmpfd >= 0) {
		r = host_statx_info(tmpfd, "", AT_EMPTY_PATH, &sx);
		limits_from = "a temporary file in it";
	} else {
		r = host_statx_info(AT_FDCWD, path, 0, &sx);
		limits_from = S_ISDIR(sb.st_mode) ? "the directory itself (no file could be created in it)"
						  : "the file itself";
	}
	if (r < 0)
		cli_die(EX_ERROR, "%s: statx: %s", path, strerror(-r));
	bool direct_ok = S_ISDIR(sb.st_mode) ? tmp_direct : false;
	if (S_ISREG(sb.st_mode) || S_ISBLK(sb.st_mode)) {
		int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		direct_ok = fd >= 0;
		if (fd >= 0)
			close(fd);
	}

	struct mount_info m = {0};
	struct blk_info b;
	if (S_ISBLK(sb.st_mode)) {
		host_blk_for(sb.st_rdev, NULL, &b);
	} else {
		host_mount_for(&sx, &m);
		host_blk_for(sx.dev, &m, &b);
	}
	uint32_t log_block = host_atomio_log_block(&sx, &b);
	/* ext4 answers STATX_WRITE_ATOMIC with zero limits where it has none. */
	bool atomic = sx.has_atomic && sx.unit_max > 0;
	uint64_t max_group = log_size > 96 ? log_size - 64 - 32 : 0;
	long long hw_max = b.found && b.atomic_write_unit_max_bytes > 0 ? b.atomic_write_unit_max_bytes : 0;
	long long hw_min = b.found && b.atomic_write_unit_min_bytes > 0 ? b.atomic_write_unit_min_bytes : 0;

	struct size_row rows[16];
	for (unsigned i = 0; i < nsizes; i++) {
		struct size_row *w = &rows[i];
		memset(w, 0, sizeof(*w));
		uint64_t s = w->size = sizes[i];
		w->pow2 = is_pow2(s);
		w->kernel_accepts = atomic && w->pow2 && s >= sx.unit_min && s <= sx.unit_max;
		/* Hardware-backed: the device's own atomic limit covers it, and
		 * the filesystem does not switch to its slow software path
		 * (unit_max_opt, when set, is where that switch happens). */
		w->hardware = w->kernel_accepts && hw_max && (long long)s <= hw_max &&
			      (long long)s >= hw_min && (!sx.unit_max_opt || s <= sx.unit_max_opt);
		w->too_big = s > max_group;
		if (w->hardware) {
			w->path = "RWF_ATOMIC in place";
			w->why = "one range, O_DIRECT, power of two, aligned, backed by the device";
		} else if (w->too_big) {
			w->path = "refused (E2BIG)";
			w->why = "larger than the largest group a log of this size holds";
		} else {
			w->path = "log";
			w->why = !atomic ? "no RWF_ATOMIC on this file"
				 : !w->pow2     ? "not a power of two"
				 : !w->kernel_accepts ? "outside the kernel's RWF_ATOMIC unit range"
						      : "the kernel would emulate it in software (slower than the log)";
		}
		if (try_writes && tmpfd >= 0 && tmp_direct)
			w->tried = try_atomic(tmpfd, s);
	}
	if (tmpfd >= 0)
		close(tmpfd);

	if (json) {
		struct json j;
		json_init(&j, stdout);
		json_obj(&j, NULL);
		json_str(&j, "path", path);
		json_str(&j, "kind", kind);
		json_str(&j, "limits_from", limits_from);
		json_str(&j, "filesystem", m.found ? m.fstype : NULL);
		json_str(&j, "filesystem_from", !m.found ? NULL : m.from_statfs ? "statfs" : "mountinfo");
		json_str(&j, "mount_point", m.found && !m.from_statfs ? m.mount_point : NULL);
		json_str(&j, "mount_source", m.found ? m.source : NULL);
		json_str(&j, "mount_options", m.found && !m.from_statfs ? m.options : NULL);
		if (b.found) {
			json_obj(&j, "device");
			json_str(&j, "name", b.name);
			json_str(&j, "disk", b.disk);
			char mm[32];
			snprintf(mm, sizeof(mm), "%u:%u", b.major, b.minor);
			json_str(&j, "dev", mm);
			json_bool(&j, "partition", b.partition);
			json_str(&j, "loop_backing_file", b.backing[0] ? b.backing : NULL);
			json_str(&j, "model", b.model[0] ? b.model : NULL);
			json_obj(&j, "queue");
			json_int(&j, "logical_block_size", b.logical_block);
			json_int(&j, "physical_block_size", b.physical_block);
			json_int(&j, "rotational", b.rotational);
			json_str(&j, "write_cache", b.write_cache[0] ? b.write_cache : NULL);
			if (b.fua < 0)
				json_null(&j, "fua");
			else
				json_bool(&j, "fua", b.fua);
			json_int(&j, "atomic_write_max_bytes", b.atomic_write_max_bytes);
			json_int(&j, "atomic_write_unit_min_bytes", b.atomic_write_unit_min_bytes);
			json_int(&j, "atomic_write_unit_max_bytes", b.atomic_write_unit_max_bytes);
			json_int(&j, "atomic_write_boundary_bytes", b.atomic_write_boundary_bytes);
			json_end_obj(&j);
			json_end_obj(&j);
		} else {
			json_null(&j, "device");
		}
		json_obj(&j, "statx");
		json_bool(&j, "write_atomic", atomic);
		json_bool(&j, "attr_write_atomic", sx.attr_atomic);
		json_uint(&j, "atomic_write_unit_min", sx.unit_min);
		json_uint(&j, "atomic_write_unit_max", sx.unit_max);
		json_uint(&j, "atomic_write_unit_max_opt", sx.unit_max_opt);
		json_uint(&j, "atomic_write_segments_max", sx.segments_max);
		json_bool(&j, "dioalign", sx.has_dioalign);
		json_uint(&j, "dio_mem_align", sx.dio_mem_align);
		json_uint(&j, "dio_offset_align", sx.dio_offset_align);
		json_uint(&j, "dio_read_offset_align", sx.dio_read_offset_align);
		json_end_obj(&j);
		json_bool(&j, "o_direct", direct_ok);
		json_obj(&j, "atomio");
		json_uint(&j, "log_block", log_block);
		json_uint(&j, "log_size", log_size);
		json_uint(&j, "max_group_bytes", max_group);
		json_int(&j, "hardware_atomic_max", hw_max);
		json_arr(&j, "sizes");
		for (unsigned i = 0; i < nsizes; i++) {
			json_obj(&j, NULL);
			json_uint(&j, "size", rows[i].size);
			json_bool(&j, "kernel_accepts", rows[i].kernel_accepts);
			json_bool(&j, "hardware_backed", rows[i].hardware);
			json_str(&j, "atomio_path", rows[i].path);
			json_str(&j, "why", rows[i].why);
			if (rows[i].tried)
				json_str(&j, "tried", rows[i].tried > 0 ? "accepted" : strerror(-rows[i].tried));
			json_end_obj(&j);
		}
		json_end_arr(&j);
		json_end_obj(&j);
		json_end_obj(&j);
		json_finish(&j);
		return EX_OK;
	}

	char a[32], z[32];
	printf("path           %s (%s; limits from %s)\n", path, kind, limits_from);
	if (m.found && m.from_statfs)
		printf("filesystem     %s on %s (from statfs: /proc/self/mountinfo does not list this "
		       "mount, as in a chroot)\n", m.fstype, m.source);
	else if (m.found)
		printf("filesystem     %s from %s, mounted at %s (%s)\n", m.fstype, m.source,
		       m.mount_point, m.options);
	if (!b.found) {
		printf("block device   none (no block device under this filesystem)\n");
	} else {
		printf("block device   %s (%u:%u)%s%s%s%s\n", b.name, b.major, b.minor,
		       b.partition ? ", a partition of " : "", b.partition ? b.disk : "",
		       b.model[0] ? ", " : "", b.model);
		if (b.backing[0])
			printf("               loop device over %s\n", b.backing);
		printf("queue          logical block %lld, physical block %lld, write cache: %s, FUA: %s,"
		       " rotational: %s\n",
		       b.logical_block, b.physical_block, b.write_cache[0] ? b.write_cache : "unknown",
		       yesno(b.fua), yesno((int)b.rotational));
		if (b.atomic_write_unit_max_bytes < 0)
			printf("               no atomic_write_* queue limits (kernel older than 6.11)\n");
		else
			printf("               atomic_write_max_bytes %lld, unit min %lld, unit max %lld, "
			       "boundary %lld%s\n",
			       b.atomic_write_max_bytes, b.atomic_write_unit_min_bytes,
			       b.atomic_write_unit_max_bytes, b.atomic_write_boundary_bytes,
			       hw_max ? "" : "  (no hardware atomic writes)");
	}
	if (atomic)
		printf("RWF_ATOMIC     unit min %s, max %s, max_opt %s%s, segments %u\n%s",
		       fmt_bytes(a, sizeof(a), sx.unit_min), fmt_bytes(z, sizeof(z), sx.unit_max),
		       sx.unit_max_opt ? fmt_bytes((char[32]){0}, 32, sx.unit_max_opt) : "0",
		       sx.unit_max_opt ? "" : " (no slow-path boundary given)", sx.segments_max,
		       hw_max ? "" : "               not backed by the device: the filesystem emulates it\n");
	else
		printf("RWF_ATOMIC     not supported for this file (statx reports no atomic write limits)\n");
	if (sx.has_dioalign)
		printf("direct I/O     %s; memory alignment %u, offset alignment %u%s\n",
		       direct_ok ? "O_DIRECT works" : "O_DIRECT refused", sx.dio_mem_align,
		       sx.dio_offset_align, sx.dio_offset_align ? "" : " (0: no direct I/O)");
	else
		printf("direct I/O     %s; STATX_DIOALIGN not reported\n",
		       direct_ok ? "O_DIRECT works" : "O_DIRECT refused");
	printf("atomio         log block %u; a %s log holds one-range groups up to %llu bytes\n",
	       log_block, fmt_bytes(a, sizeof(a), log_size), (unsigned long long)max_group);
	printf("\n%-10s %-8s %-9s %-22s %s\n", "write size", "RWF_ATOM", "hardware", "atomio path",
	       try_writes ? "tried / why" : "why");
	for (unsigned i = 0; i < nsizes; i++) {
		char why[160];
		if (rows[i].tried)
			snprintf(why, sizeof(why), "%s; %s",
				 rows[i].tried > 0 ? "kernel accepted it" : strerror(-rows[i].tried),
				 rows[i].why);
		else
			snprintf(why, sizeof(why), "%s", rows[i].why);
		printf("%-10s %-8s %-9s %-22s %s\n", fmt_bytes(a, sizeof(a), rows[i].size),
		       rows[i].kernel_accepts ? "yes" : "no", rows[i].hardware ? "yes" : "no",
		       rows[i].path, why);
	}
	printf("\nThe rule (one range, O_DIRECT data file, offset aligned to its size): RWF_ATOMIC in\n"
	       "place when the device backs that size; every other group, and every group on a\n"
	       "buffered file, goes through atomio's log (one log write + one device wait).\n");
	if (try_writes && !tmp_direct)
		printf("(--try-writes: no O_DIRECT temporary file could be made here: %s)\n",
		       strerror(tmp_err ? tmp_err : EINVAL));
	return EX_OK;
}
