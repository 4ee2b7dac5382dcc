/*
 * cli.h: what the subcommands of the `atomio` command share: exit codes,
 * error reporting, option parsing, a JSON writer, and the machine facts
 * (filesystem, block device, statx limits, I/O counters) of sysinfo.c.
 *
 * The command is a user of the library: the bench's atomio mode and verify's
 * atomio mode use only the public API (atomio.h).  dump reads the log format
 * itself (format.h, read-only) and verify's selftest installs a lying
 * backend through the ops table (sys.h): both are tools' business.
 */
#ifndef ATOMIO_CLI_H
#define ATOMIO_CLI_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Exit codes, the same for every subcommand (man/atomio.1, EXIT STATUS). */
enum {
	EX_OK = 0,      /* success; for verify check: no violation found */
	EX_FOUND = 1,   /* the check ran and found a problem: violations (verify check),
			   a damaged log (dump), a failed scenario (verify selftest) */
	EX_USAGE = 2,   /* bad command line */
	EX_ERROR = 3,   /* could not do the job: I/O error, not a log, store busy, ... */
	EX_UNSUPP = 4,  /* the system lacks what was asked for (e.g. RWF_ATOMIC for --kernel) */
};

/* "atomio bench" etc.: the prefix of every message. */
extern const char *cli_cmd;

/* One line on stderr: "atomio SUB: message". */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void cli_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Usage error: one line, pointing at --help. */
_Noreturn void cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse helpers: die with EX_USAGE naming the option on bad input. */
uint64_t cli_size(const char *opt, const char *s);       /* 4096, 16k, 16KiB, 64M, 1G */
double cli_seconds(const char *opt, const char *s);      /* 20, 20s, 500ms, 2m */
uint64_t cli_uint(const char *opt, const char *s, uint64_t min, uint64_t max);
/* A comma-separated list of sizes or integers ("1,4,8"); returns the count. */
unsigned cli_list(const char *opt, const char *s, uint64_t *out, unsigned max, bool sizes,
		  uint64_t min, uint64_t maxv);

/* getopt_long wrapper state: report an unknown option or missing argument
 * in one line.  Call with the getopt return value '?' or ':'. */
_Noreturn void cli_bad_option(char **argv, int c);

/* A file name or other untrusted text, printable: controls, bidirectional
 * overrides and bytes that are not UTF-8 become \xNN / \uNNNN escapes, a
 * backslash "\\".  Returns one of four static buffers (use at most four per
 * printf), cut at 8 KiB of input. */
const char *cli_esc(const char *s);

/* Human formatting into a caller buffer (returns buf). */
const char *fmt_bytes(char *buf, size_t n, uint64_t v); /* 16 KiB, 1.5 MiB, 4096 B */

double now_sec(void);

/* --- JSON writer ---------------------------------------------------------- */

struct json {
	FILE *f;
	int depth;
	bool first[32];
	bool after_key;
	bool pretty;
};

void json_init(struct json *j, FILE *f);
void json_obj(struct json *j, const char *key);  /* key NULL inside arrays / at top */
void json_end_obj(struct json *j);
void json_arr(struct json *j, const char *key);
void json_end_arr(struct json *j);
void json_str(struct json *j, const char *key, const char *v); /* v NULL -> null */
void json_int(struct json *j, const char *key, long long v);
void json_uint(struct json *j, const char *key, unsigned long long v);
void json_num(struct json *j, const char *key, double v); /* non-finite -> null */
void json_bool(struct json *j, const char *key, bool v);
void json_null(struct json *j, const char *key);
void json_finish(struct json *j);                   /* final newline */

/* --- machine facts (sysinfo.c) ------------------------------------------- */

struct mount_info {
	bool found;
	bool from_statfs;        /* mountinfo was silent (a chroot): fstype from statfs's
				  * f_type, source from the device number, no mount point */
	char fstype[64];
	char source[1024];
	char mount_point[1024];
	char options[1024];
};

struct blk_info {
	bool found;              /* a block device under /sys/dev/block */
	unsigned major, minor;
	char name[64];           /* e.g. vda1, loop0, dm-0 */
	char disk[64];           /* the whole disk holding the queue: vda, loop0 */
	bool partition;
	char stat_path[512];     /* counters of this device (partition-level if a partition) */
	char disk_stat_path[512];/* counters of the whole disk (flushes) */
	char queue_dir[512];
	char backing[1024];      /* loop devices: the backing file, else "" */
	char model[128];
	/* queue limits; -1 where the kernel does not have the file */
	long long logical_block, physical_block, rotational;
	long long atomic_write_max_bytes, atomic_write_unit_min_bytes, atomic_write_unit_max_bytes,
		atomic_write_boundary_bytes;
	char write_cache[32];    /* "write back" / "write through" / "" */
	int fua;                 /* 1 / 0 / -1 unknown */
};

struct stx_info {
	bool ok;                 /* statx succeeded */
	uint64_t dev;            /* st_dev as dev_t */
	uint64_t mnt_id;
	bool has_mnt_id;
	bool has_dioalign;
	uint32_t dio_mem_align, dio_offset_align, dio_read_offset_align;
	bool has_atomic;         /* STATX_WRITE_ATOMIC in stx_mask */
	bool attr_atomic;        /* STATX_ATTR_WRITE_ATOMIC in stx_attributes */
	uint32_t unit_min, unit_max, unit_max_opt, segments_max;
	uint32_t blksize;
	uint16_t mode;
	bool has_ftype;          /* statfs succeeded */
	int64_t f_type;          /* its filesystem magic */
};

int host_statx_info(int dirfd, const char *path, int flags, struct stx_info *out);
/* The mount a statx result lives on (by mount id, else by device number);
 * where /proc/self/mountinfo does not list it (a chroot), the filesystem
 * named from statfs's f_type and the device from the device number. */
void host_mount_for(const struct stx_info *sx, struct mount_info *m);
/* The block device holding dev (resolving a btrfs-style anonymous device
 * through the mount's source); found = false when there is none (tmpfs). */
void host_blk_for(uint64_t dev, const struct mount_info *m, struct blk_info *b);

/* I/O counters. */
struct dev_counters {
	bool ok;
	uint64_t write_ios, write_sectors, flushes; /* sectors of 512 bytes */
};
void host_dev_counters(const struct blk_info *b, struct dev_counters *c);
/* /proc/self/io write_bytes (bytes this process sent toward storage); false if unreadable. */
bool host_proc_write_bytes(uint64_t *out);

/* The log block atomio chooses for a log in a directory with these facts
 * (format.h: max(512, dio offset alignment, physical sector), at most 4096). */
uint32_t host_atomio_log_block(const struct stx_info *sx, const struct blk_info *b);

/* Kernel version string (uname -r). */
const char *host_kernel(char *buf, size_t n);

/* --- subcommands ----------------------------------------------------------- */

int cmd_probe(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_recover(int argc, char **argv);

#endif
