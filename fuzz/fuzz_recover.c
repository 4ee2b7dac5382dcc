/*
 * fuzz_recover.c: libFuzzer target on log parsing and recovery (issues 3 and 8).
 *
 * Input: a log image followed by one control byte.  The image is written to
 * <sandbox>/log (mode 0600) and atomio_open runs on it: superblock, catalog,
 * record scan, identity checks, replay into the sandbox's data files, the
 * new superblock.  Random bytes rarely carry valid checksums, so the control
 * byte lets the fuzzer ask for them to be made right first (then it explores
 * what lies behind them, as a crafted log would):
 *   bit 0  re-seal both superblock slots (those with the magic)
 *   bit 1  re-seal both catalog copies; entries naming sandbox files get
 *          those files' identity (so replay is reached)
 *   bit 2  re-seal the records met walking from the head as recovery does
 *   bit 3  ATOMIO_FORCE_PATHS
 *   bit 4  pad the file with zeros to the end of the record area it
 *          declares (at most 1 MiB), so that seeds need not carry zeros
 *   bit 5  open a second time after a successful open
 *
 * The harness installs an ops table that enforces the sandbox: recovery may
 * open, for writing or not, only paths below the sandbox (lexically: no ".",
 * ".." or empty components) or /proc/self/fd/N for a descriptor so opened;
 * other paths are denied (EACCES) and counted, and any write, truncate, sync
 * or lock through a descriptor not so opened, any creation, rename or unlink
 * aborts (a finding).  Memory is bounded by libFuzzer's -malloc_limit_mb and
 * -rss_limit_mb (see mk/hostile.mk), time by -timeout.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomio.h"
#include "sys.h"
#include "support/logpatch.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PAD (1u << 20)

static char sandbox[PATH_MAX]; /* canonical */
static size_t sandbox_len;
static char log_path[PATH_MAX + 8];
static const char *const data_files[] = {"a", "b", "c", "sub/d"};
#define NDATA (sizeof(data_files) / sizeof(data_files[0]))
static int data_fds[NDATA];
static unsigned char fd_inside[65536];
static unsigned long denied;

static void die(const char *what, const char *path)
{
	fprintf(stderr, "fuzz_recover: SANDBOX VIOLATION: %s %s\n", what, path ? path : "");
	abort();
}

/* Lexically below the sandbox, with no ".", ".." or empty component. */
static int inside(const char *path)
{
	if (strncmp(path, sandbox, sandbox_len) || path[sandbox_len] != '/')
		return 0;
	const char *p = path + sandbox_len + 1;
	for (;;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		if (!e)
			return 1;
		p = e + 1;
	}
}

static int proc_fd_inside(const char *path)
{
	const char *pre = "/proc/self/fd/";
	if (strncmp(path, pre, strlen(pre)))
		return 0;
	char *end;
	long fd = strtol(path + strlen(pre), &end, 10);
	return !*end && fd >= 0 && fd < 65536 && fd_inside[fd];
}

static void need_fd(int fd, const char *what)
{
	if (fd < 0 || fd >= 65536 || !fd_inside[fd])
		die(what, "through a descriptor opened outside the sandbox");
}

static int s_open(const char *path, int flags, mode_t mode)
{
	if (flags & O_CREAT)
		die("open with O_CREAT during recovery:", path);
	int ok = inside(path) || proc_fd_inside(path);
	if (!ok) {
		denied++;
		return -EACCES;
	}
	int fd = atomio_sys_linux.open(path, flags, mode);
	if (fd >= 0 && fd < 65536)
		fd_inside[fd] = 1;
	return fd;
}

static int s_close(int fd)
{
	if (fd >= 0 && fd < 65536)
		fd_inside[fd] = 0;
	return atomio_sys_linux.close(fd);
}

static ssize_t s_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	need_fd(fd, "write");
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
}

static int s_ftruncate(int fd, off_t size)
{
	need_fd(fd, "truncate");
	return atomio_sys_linux.ftruncate(fd, size);
}

static int s_fsync(int fd)
{
	need_fd(fd, "fsync");
	return atomio_sys_linux.fsync(fd);
}

static int s_fdatasync(int fd)
{
	need_fd(fd, "fdatasync");
	return atomio_sys_linux.fdatasync(fd);
}

static int s_flock(int fd, int op)
{
	need_fd(fd, "flock");
	return atomio_sys_linux.flock(fd, op);
}

static int s_lstat(const char *path, struct stat *st)
{
	if (!inside(path)) {
		denied++;
		return -EACCES;
	}
	return atomio_sys_linux.lstat(path, st);
}

static int s_statx(int dirfd, const char *path, int flags, unsigned mask, struct atomio_statx *stx)
{
	if (*path || !(flags & AT_EMPTY_PATH))
		die("statx by path:", path);
	return atomio_sys_linux.statx(dirfd, path, flags, mask, stx);
}

static int s_rename(const char *from, const char *to)
{
	(void)to;
	die("rename during recovery:", from);
	return -EPERM;
}

static int s_unlink(const char *path)
{
	die("unlink during recovery:", path);
	return -EPERM;
}

static int s_realpath(const char *path, char *out)
{
	if (!inside(path)) {
		denied++;
		return -EACCES;
	}
	return atomio_sys_linux.realpath(path, out);
}

static struct atomio_sysops sandbox_ops;

static int rm_cb(const char *p, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(p);
}

static void cleanup(void)
{
	if (sandbox[0])
		nftw(sandbox, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	char tmpl[PATH_MAX];
	const char *base = getenv("ATOMIO_FUZZ_DIR");
	struct stat sb;
	if (!base)
		base = stat("/dev/shm", &sb) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(tmpl, sizeof(tmpl), "%s/atomio-fuzz-XXXXXX", base);
	if (!mkdtemp(tmpl) || !realpath(tmpl, sandbox)) {
		perror("fuzz_recover: sandbox");
		exit(1);
	}
	sandbox_len = strlen(sandbox);
	atexit(cleanup);
	snprintf(log_path, sizeof(log_path), "%s/log", sandbox);
	char p[PATH_MAX + 16];
	snprintf(p, sizeof(p), "%s/sub", sandbox);
	mkdir(p, 0700);
	for (size_t i = 0; i < NDATA; i++) {
		snprintf(p, sizeof(p), "%s/%s", sandbox, data_files[i]);
		data_fds[i] = open(p, O_RDWR | O_CREAT, 0600);
		if (data_fds[i] < 0) {
			perror(p);
			exit(1);
		}
	}
	sandbox_ops = atomio_sys_linux;
	sandbox_ops.name = "fuzz-sandbox";
	sandbox_ops.open = s_open;
	sandbox_ops.close = s_close;
	sandbox_ops.pwritev = s_pwritev;
	sandbox_ops.ftruncate = s_ftruncate;
	sandbox_ops.fsync = s_fsync;
	sandbox_ops.fdatasync = s_fdatasync;
	sandbox_ops.flock = s_flock;
	sandbox_ops.lstat = s_lstat;
	sandbox_ops.statx = s_statx;
	sandbox_ops.rename_noreplace = s_rename;
	sandbox_ops.unlink = s_unlink;
	sandbox_ops.realpath = s_realpath;
	atomio_sys_set(&sandbox_ops);
	return 0;
}

/* Catalog entries with a relative path naming a sandbox file get its identity. */
static void rebind(struct lp *l, struct sb_disk *sb, struct cat_hdr_disk *c)
{
	if (c->used < CAT_HDR || c->used > sb->cat_size)
		return;
	for (uint32_t i = 0; i < c->count && i < 64; i++) {
		struct cat_entry_disk *e = lp_cat_entry(c, i);
		if (!e || (uint64_t)((uint8_t *)e - (uint8_t *)c) + CAT_ENTRY_HDR + e->path_len > c->used)
			return;
		if (!(e->flags & CAT_F_RELATIVE))
			continue;
		const char *path = (const char *)(e + 1);
		for (size_t k = 0; k < NDATA; k++) {
			if (strlen(data_files[k]) != e->path_len || memcmp(path, data_files[k], e->path_len))
				continue;
			struct stat st;
			struct statfs sfs;
			if (fstat(data_fds[k], &st) == 0) {
				e->dev = st.st_dev;
				e->ino = st.st_ino;
				e->fsid = 0;
				if (fstatfs(data_fds[k], &sfs) == 0) {
					uint32_t v[2];
					memcpy(v, &sfs.f_fsid, sizeof(v));
					e->fsid = (uint64_t)v[0] | (uint64_t)v[1] << 32;
				}
			}
		}
	}
	(void)l;
}

static void fixup(struct lp *l, uint8_t ctl)
{
	if (ctl & 1)
		for (int s = 0; s < 2; s++) {
			struct sb_disk *sb = lp_slot(l, s);
			if (sb && !memcmp(sb->magic, SB_MAGIC, 8))
				lp_sb_seal(sb);
		}
	struct sb_disk *sb = lp_sb(l);
	/* atomio refuses unaligned geometry anyway; the editing below needs it */
	if (!sb || sb->cat_off % 8 || sb->cat_size % 8 || sb->area_off % 8 || sb->head_off % 8)
		return;
	if (ctl & 2)
		for (int c = 0; c < 2; c++) {
			struct cat_hdr_disk *h = lp_cat(l, sb, c);
			if (!h || h->magic != CAT_MAGIC)
				continue;
			rebind(l, sb, h);
			lp_cat_seal(sb, h);
		}
	if (ctl & 4) {
		uint64_t pos = sb->head_off;
		int wrapped = 0;
		for (int n = 0; n < 256; n++) {
			struct rec_hdr_disk *h = lp_rec(l, sb, pos);
			if (pos % 8)
				break;
			if ((!h || h->magic != REC_MAGIC) && !wrapped && pos && sb->block &&
			    pos % sb->block == 0) {
				wrapped = 1;
				pos = 0;
				h = lp_rec(l, sb, pos);
			}
			if (!h || pos % 8 || h->magic != REC_MAGIC || h->rec_len < REC_HDR || h->rec_len % 8 ||
			    h->rec_len > sb->area_size || pos > sb->area_size - h->rec_len ||
			    lp_rec_seal(l, sb, pos) < 0 || !sb->block)
				break;
			pos = lp_rec_next(sb, h, pos);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t ctl = data[size - 1];
	struct lp l = {malloc(size - 1 + MAX_PAD + 1), size - 1};
	if (!l.b)
		return 0;
	memcpy(l.b, data, size - 1);
	if (ctl & 16) {
		/* pad to the declared end of the record area */
		struct sb_disk *sb = lp_sb(&l);
		if (!sb && (sb = lp_slot(&l, 0)) && memcmp(sb->magic, SB_MAGIC, 8))
			sb = NULL;
		if (sb && sb->area_off <= MAX_PAD && sb->area_size <= MAX_PAD - sb->area_off &&
		    sb->area_off + sb->area_size > l.n) {
			memset(l.b + l.n, 0, sb->area_off + sb->area_size - l.n);
			l.n = sb->area_off + sb->area_size;
		}
	}
	fixup(&l, ctl);

	/* the log, fresh each time (same inode: unlink would be refused) */
	int fd = open(log_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || fchmod(fd, 0600) < 0 || (l.n && pwrite(fd, l.b, l.n, 0) != (ssize_t)l.n)) {
		perror("fuzz_recover: writing the log");
		abort();
	}
	close(fd);
	free(l.b);
	for (size_t i = 0; i < NDATA; i++)
		if (ftruncate(data_fds[i], 0) < 0)
			abort();

	struct atomio_options o = {0};
	char err[512];
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	o.flags = ctl & 8 ? ATOMIO_FORCE_PATHS : 0;
	atomio *st;
	int r = atomio_open(log_path, &o, &st);
	if (getenv("ATOMIO_FUZZ_VERBOSE")) {
		struct atomio_stats stats = {0};
		if (r == 0)
			atomio_stats(st, &stats);
		fprintf(stderr, "ctl %#x: atomio_open %d (%s) %s; %llu groups replayed\n", ctl, r,
			atomio_strerror(r), r ? err : "", (unsigned long long)stats.groups_recovered);
	}
	if (r == 0) {
		atomio_close(st);
		if (ctl & 32 && atomio_open(log_path, &o, &st) == 0)
			atomio_close(st);
	} else if (r > 0 || atomio_strerror(r) == NULL) {
		abort();
	}
	return 0;
}
