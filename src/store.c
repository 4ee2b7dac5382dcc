/*
 * store.c: opening, creating and closing a store; the superblock; limits,
 * counters and error names.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "internal.h"

uint64_t fmt_csum(const void *buf, size_t len, uint64_t seed, size_t csum_off)
{
	/* The checksum field reads as zero while hashing: hash around it. */
	XXH3_state_t s;
	static const uint64_t zero;
	/* A stack state must be initialised before a seeded reset: xxhash
	 * skips deriving the secret when the stale seed field matches. */
	XXH3_INITSTATE(&s);
	XXH3_64bits_reset_withSeed(&s, seed);
	XXH3_64bits_update(&s, buf, csum_off);
	XXH3_64bits_update(&s, &zero, 8);
	XXH3_64bits_update(&s, (const char *)buf + csum_off + 8, len - csum_off - 8);
	return XXH3_64bits_digest(&s);
}

void st_err(atomio *st, const char *fmt, ...)
{
	if (!st || !st->errbuf || !st->errbuf_size)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(st->errbuf, st->errbuf_size, fmt, ap);
	va_end(ap);
}

void st_fail(atomio *st, int err)
{
	/* First error wins; after it nothing more is committed, because the
	 * state of the log or of a data file is no longer known (a failed
	 * fsync may have dropped dirty pages: PostgreSQL's "fsyncgate"). */
	pthread_mutex_lock(&st->lock);
	if (!st->failed)
		st->failed = err ? err : -EIO;
	pthread_mutex_unlock(&st->lock);
}

void *aligned_alloc_zero(size_t align, size_t size)
{
	void *p = NULL;
	if (posix_memalign(&p, align, size ? size : align))
		return NULL;
	memset(p, 0, size ? size : align);
	return p;
}

/* --- log block size ------------------------------------------------------ */

static int read_small(const char *path, char *buf, size_t size)
{
	int fd = atomio_sys->open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	ssize_t n = sys_pread_full(fd, buf, size - 1, 0);
	atomio_sys->close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = 0;
	return 0;
}

/* Physical sector size of the device under fd, 0 when unknown. */
static uint32_t phys_sector(int fd)
{
	struct stat sb;
	char path[128], buf[32];
	if (atomio_sys->fstat(fd, &sb) < 0)
		return 0;
	unsigned ma = major(sb.st_dev), mi = minor(sb.st_dev);
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/physical_block_size", ma, mi);
	if (read_small(path, buf, sizeof(buf)) < 0) {
		/* a partition: the queue belongs to its parent disk */
		snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../queue/physical_block_size", ma, mi);
		if (read_small(path, buf, sizeof(buf)) < 0)
			return 0;
	}
	unsigned long v = strtoul(buf, NULL, 10);
	return v >= 512 && v <= 65536 && !(v & (v - 1)) ? (uint32_t)v : 0;
}

/* The log block: every log write is whole blocks at block offsets, so that a
 * torn write never spans a physical sector holding an acknowledged record. */
static uint32_t pick_block(int fd, bool direct)
{
	uint32_t b = 512;
	struct atomio_statx stx;
	if (direct && atomio_sys->statx(fd, "", AT_EMPTY_PATH, ATOMIO_STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & ATOMIO_STATX_DIOALIGN) && stx.stx_dio_offset_align > b)
		b = stx.stx_dio_offset_align;
	uint32_t p = phys_sector(fd);
	if (!p)
		p = 4096; /* unknown device (network, FUSE): assume the common sector */
	if (p > b)
		b = p;
	return b > SB_SLOT ? SB_SLOT : b;
}

/* --- superblock ------------------------------------------------------------ */

static int sb_check(const struct sb_disk *sb, uint64_t file_size, int *why)
{
	if (memcmp(sb->magic, SB_MAGIC, 8)) {
		*why = ATOMIO_ENOTLOG;
		return -1;
	}
	if (sb->bom != SB_BOM || sb->version < FMT_VERSION_MIN || sb->version > FMT_VERSION) {
		*why = ATOMIO_EVERSION;
		return -1;
	}
	*why = ATOMIO_ECORRUPT;
	if (fmt_csum(sb, SB_SIZE, SB_SEED, SB_CSUM_OFF) != sb->csum)
		return -1;
	uint64_t b = sb->block;
	if (b < 512 || b > SB_SLOT || (b & (b - 1)))
		return -1;
	if (sb->cat_off != CAT_OFF || sb->cat_size < 4096 || sb->cat_size > (1ull << 30) ||
	    sb->cat_size % 4096)
		return -1;
	if (sb->area_off < sb->cat_off + 2 * sb->cat_size || sb->area_off % b || sb->area_size % b ||
	    sb->area_size < MIN_LOG_BLOCKS * b || sb->area_size > (1ull << 48) ||
	    sb->area_off > file_size || sb->area_size > file_size - sb->area_off) /* no wrap */
		return -1;
	if (sb->head_off >= sb->area_size || sb->head_off % 8)
		return -1;
	if (sb->generation >= MAX_GENERATION)
		return -1; /* its successor could wrap to 0 and lose to the stale slot */
	return 0;
}

int log_read(atomio *st, uint64_t off, void *buf, size_t len)
{
	if (!st->log_direct) {
		ssize_t n = sys_pread_full(st->log_fd, buf, len, (off_t)off);
		if (n < 0)
			return (int)n;
		return (size_t)n == len ? 0 : -EIO;
	}
	/* O_DIRECT: read the aligned span around [off, off+len) and copy. */
	uint64_t a = st->block ? st->block : 4096;
	uint64_t lo = off / a * a, hi = align_up(off + len, a);
	char *tmp = aligned_alloc_zero(4096, hi - lo);
	if (!tmp)
		return -ENOMEM;
	ssize_t n = sys_pread_full(st->log_fd, tmp, hi - lo, (off_t)lo);
	int r = 0;
	if (n < 0)
		r = (int)n;
	else if ((uint64_t)n < off + len - lo)
		r = -EIO;
	else
		memcpy(buf, tmp + (off - lo), len);
	free(tmp);
	return r;
}

int st_write_sb(atomio *st, uint64_t head_off, uint64_t head_seq, uint64_t epoch)
{
	struct sb_disk sb = st->sb;
	sb.generation++;
	/* A version 1 log is version 2 from its first superblock write on
	 * (the one at open, before any new record): a library that reads only
	 * version 1 then refuses it instead of misreading compressed records. */
	sb.version = FMT_VERSION;
	sb.head_off = head_off;
	sb.head_seq = head_seq;
	sb.epoch = epoch;
	sb.csum = fmt_csum(&sb, SB_SIZE, SB_SEED, SB_CSUM_OFF);
	char *buf = aligned_alloc_zero(4096, SB_SLOT);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, &sb, SB_SIZE);
	/* The older slot is overwritten; the current one stays intact until
	 * this write is durable (RWF_DSYNC), so a torn superblock write leaves
	 * the previous state readable. */
	int r = sys_pwrite_durable(st->log_fd, buf, SB_SLOT, (off_t)((sb.generation % 2) * SB_SLOT));
	free(buf);
	if (r < 0) {
		st_err(st, "writing the superblock of %s: %s", st->log_path, strerror(-r));
		return r;
	}
	st->sb = sb;
	return 0;
}

static int load_sb(atomio *st)
{
	struct stat fs;
	int r = atomio_sys->fstat(st->log_fd, &fs);
	if (r < 0)
		return r;
	char *buf = aligned_alloc_zero(4096, 2 * SB_SLOT);
	if (!buf)
		return -ENOMEM;
	uint32_t saved = st->block;
	st->block = 4096;
	r = fs.st_size >= 2 * SB_SLOT ? log_read(st, 0, buf, 2 * SB_SLOT) : 0;
	st->block = saved;
	if (r < 0) {
		free(buf);
		return r;
	}
	if (fs.st_size < (off_t)(2 * SB_SLOT))
		memset(buf, 0, 2 * SB_SLOT);
	const struct sb_disk *best = NULL;
	int why0 = ATOMIO_ENOTLOG, why1 = ATOMIO_ENOTLOG;
	const struct sb_disk *s0 = (const void *)buf, *s1 = (const void *)(buf + SB_SLOT);
	bool ok0 = sb_check(s0, (uint64_t)fs.st_size, &why0) == 0;
	bool ok1 = sb_check(s1, (uint64_t)fs.st_size, &why1) == 0;
	if (ok0 && ok1) {
		if (s0->store_id != s1->store_id) {
			/* Both slots valid but of two stores: not something
			 * atomio writes; refuse rather than guess. */
			free(buf);
			st_err(st, "%s: superblock slots belong to two different stores", st->log_path);
			return ATOMIO_ECORRUPT;
		}
		best = s0->generation > s1->generation ? s0 : s1;
	} else if (ok0) {
		best = s0;
	} else if (ok1) {
		best = s1;
	}
	if (!best) {
		/* Report the most specific reason: a bad checksum on a slot that
		 * has our magic is corruption, not a foreign file. */
		int why = why0 == ATOMIO_ECORRUPT || why1 == ATOMIO_ECORRUPT ? ATOMIO_ECORRUPT
			  : why0 == ATOMIO_EVERSION || why1 == ATOMIO_EVERSION ? ATOMIO_EVERSION
									       : ATOMIO_ENOTLOG;
		free(buf);
		st_err(st, "%s: %s", st->log_path, atomio_strerror(why));
		return why;
	}
	st->sb = *best;
	free(buf);
	st->store_id = st->sb.store_id;
	st->block = st->sb.block;
	st->area_off = st->sb.area_off;
	st->area_size = st->sb.area_size;
	st->cat_off = st->sb.cat_off;
	st->cat_size = st->sb.cat_size;
	return 0;
}

/* --- creation ---------------------------------------------------------------- */

/* The directory part of path (".", "/" or a prefix), malloc'd; NULL if out of memory. */
char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

static int create_log(atomio *st, const char *path, uint64_t log_size)
{
	uint64_t rnd[2];
	int r = atomio_sys->getrandom(rnd, sizeof(rnd));
	if (r < 0)
		return r;
	size_t plen = strlen(path);
	char *tmp = malloc(plen + 32);
	char *dir = dir_of(path);
	char *zero = aligned_alloc_zero(4096, 1 << 20);
	int fd = -1;
	if (!tmp || !dir || !zero) {
		r = -ENOMEM;
		goto out;
	}
	snprintf(tmp, plen + 32, "%s.tmp-%016llx", path, (unsigned long long)rnd[1]);
	/* 0600: whoever can write the log can choose what recovery writes. */
	fd = atomio_sys->open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = fd;
		st_err(st, "creating %s: %s", tmp, strerror(-r));
		goto out;
	}
	uint32_t block = pick_block(fd, true);
	uint64_t cat_size = CAT_DEFAULT_SIZE;
	uint64_t area_off = align_up(CAT_OFF + 2 * cat_size, block);
	uint64_t area_size = align_up(log_size ? log_size : DEFAULT_LOG_SIZE, block);
	if (area_size < MIN_LOG_BLOCKS * block)
		area_size = MIN_LOG_BLOCKS * block;
	uint64_t total = area_off + area_size;

	/* Write every byte (not fallocate): record writes must be overwrites of
	 * written blocks so that RWF_DSYNC needs no metadata commit. */
	for (uint64_t off = 0; off < total; off += 1 << 20) {
		size_t n = total - off < (1 << 20) ? (size_t)(total - off) : (size_t)1 << 20;
		r = sys_pwrite_full(fd, zero, n, (off_t)off, 0);
		if (r < 0) {
			st_err(st, "writing %s: %s", tmp, strerror(-r));
			goto out_unlink;
		}
	}
	struct sb_disk sb;
	memset(&sb, 0, sizeof(sb));
	memcpy(sb.magic, SB_MAGIC, 8);
	sb.bom = SB_BOM;
	sb.version = FMT_VERSION;
	sb.store_id = rnd[0] ? rnd[0] : 1;
	sb.generation = 1;
	sb.epoch = 1;
	sb.head_off = 0;
	sb.head_seq = 1;
	sb.area_off = area_off;
	sb.area_size = area_size;
	sb.block = block;
	sb.cat_off = CAT_OFF;
	sb.cat_size = cat_size;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	sb.ctime_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	sb.csum = fmt_csum(&sb, SB_SIZE, SB_SEED, SB_CSUM_OFF);
	memcpy(zero, &sb, SB_SIZE);
	r = sys_pwrite_full(fd, zero, SB_SLOT, (off_t)((sb.generation % 2) * SB_SLOT), 0);
	if (r == 0)
		r = cat_write_initial(fd, CAT_OFF, cat_size, sb.store_id);
	/* fsync (not fdatasync): the file's size and blocks must be durable
	 * before its name appears under the final path. */
	if (r == 0)
		do /* EINTR: interrupted, nothing lost; again */
			r = atomio_sys->fsync(fd);
		while (r == -EINTR);
	if (r < 0) {
		st_err(st, "initialising %s: %s", tmp, strerror(-r));
		goto out_unlink;
	}
	r = atomio_sys->rename_noreplace(tmp, path);
	if (r == -EEXIST) {
		/* Another process created the log meanwhile: use theirs. */
		atomio_sys->unlink(tmp);
		r = 0;
		goto out;
	}
	if (r < 0) {
		st_err(st, "renaming %s to %s: %s", tmp, path, strerror(-r));
		goto out_unlink;
	}
	/* The new directory entry must be durable before any group relies on
	 * the log: fsync the directory. */
	r = sys_fsync_dir(dir);
	if (r < 0)
		st_err(st, "syncing directory %s: %s", dir, strerror(-r));
	goto out;
out_unlink:
	atomio_sys->unlink(tmp);
out:
	if (fd >= 0)
		atomio_sys->close(fd);
	free(tmp);
	free(dir);
	free(zero);
	return r;
}

/* --- open / close ---------------------------------------------------------- */

static int open_log_fd(atomio *st, const char *path)
{
	/* Look before opening: O_PATH opens no device or FIFO found at the
	 * log's path or at the end of a symlink there (opening a device can
	 * act: a watchdog arms, a tape rewinds).  Then open for writing the
	 * inode just looked at, through /proc/self/fd, so that the path
	 * cannot be swapped in between; without /proc, open the path (the
	 * fstat in atomio_open checks what was opened). */
	int pfd = atomio_sys->open(path, O_PATH | O_CLOEXEC, 0);
	if (pfd < 0)
		return pfd;
	struct stat sb;
	int r = atomio_sys->fstat(pfd, &sb);
	if (r == 0 && !S_ISREG(sb.st_mode))
		r = ATOMIO_ENOTLOG;
	if (r < 0) {
		atomio_sys->close(pfd);
		if (r == ATOMIO_ENOTLOG)
			st_err(st, "%s: not a regular file", path);
		return r;
	}
	char pp[64];
	snprintf(pp, sizeof(pp), "/proc/self/fd/%d", pfd);
	const char *at = pp;
	int fd = atomio_sys->open(at, O_RDWR | O_CLOEXEC | O_DIRECT, 0);
	if (fd == -ENOENT) {
		at = path;
		fd = atomio_sys->open(at, O_RDWR | O_CLOEXEC | O_DIRECT | O_NONBLOCK | O_NOCTTY, 0);
	}
	if (fd == -EINVAL) {
		/* No O_DIRECT here (tmpfs, some FUSE): buffered writes with
		 * RWF_DSYNC give the same durability at one more copy. */
		fd = atomio_sys->open(at, O_RDWR | O_CLOEXEC | (at == path ? O_NONBLOCK | O_NOCTTY : 0), 0);
		st->log_direct = false;
	} else {
		st->log_direct = true;
	}
	atomio_sys->close(pfd);
	return fd;
}

static void st_free(atomio *st)
{
	if (!st)
		return;
	async_stop(st); /* the worker thread, if asynchronous commits started it */
	engine_close(st);
	files_close_all(st);
	if (st->log_fd >= 0)
		atomio_sys->close(st->log_fd); /* also drops the flock */
	tx_pool_free(st);
	wear_free(st);
	free(st->files);
	free(st->log_path);
	free(st->log_dir);
	pthread_mutex_destroy(&st->lock);
	pthread_mutex_destroy(&st->cat_lock);
	pthread_cond_destroy(&st->cond);
	pthread_cond_destroy(&st->home_cv);
	pthread_cond_destroy(&st->role_cv);
	async_destroy(st);
	free(st);
}

int atomio_open(const char *log_path, const struct atomio_options *opts, atomio **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!log_path || !*log_path)
		return -EINVAL;
	struct atomio_options def = {0};
	if (!opts)
		opts = &def;
	if (opts->flags & ~(ATOMIO_CREATE | ATOMIO_ALLOW_SHARED_LOG | ATOMIO_FORCE_PATHS |
			    ATOMIO_ENGINE_PLAIN | ATOMIO_ENGINE_URING | ATOMIO_FAST_PATH_OFF |
			    ATOMIO_FAST_PATH_FORCE | ATOMIO_DIRECT_HOME | ATOMIO_NO_BG_CHECKPOINT |
			    ATOMIO_NO_COMPRESS))
		return -EINVAL;
	if ((opts->flags & ATOMIO_ENGINE_PLAIN) && (opts->flags & ATOMIO_ENGINE_URING))
		return -EINVAL;
	if ((opts->flags & ATOMIO_FAST_PATH_OFF) && (opts->flags & ATOMIO_FAST_PATH_FORCE))
		return -EINVAL;
	for (unsigned i = 0; i < sizeof(opts->reserved) / sizeof(opts->reserved[0]); i++)
		if (opts->reserved[i])
			return -EINVAL;
	if (opts->ckpt_percent > 99)
		return -EINVAL;
	if (opts->log_size && (opts->log_size < 65536 || opts->log_size > (1ull << 48)))
		return -EINVAL;
	if (opts->errbuf && opts->errbuf_size)
		opts->errbuf[0] = 0;

	atomio *st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->log_fd = -1;
	st->flags = opts->flags;
	st->errbuf = opts->errbuf;
	st->errbuf_size = opts->errbuf_size;
	pthread_mutex_init(&st->lock, NULL);
	pthread_mutex_init(&st->cat_lock, NULL);
	pthread_cond_init(&st->cond, NULL);
	pthread_cond_init(&st->home_cv, NULL);
	pthread_cond_init(&st->role_cv, NULL);
	async_init(st);
	int r = -ENOMEM;
	st->log_path = strdup(log_path);
	st->files = calloc(MAX_FILES, sizeof(*st->files));
	if (!st->log_path || !st->files)
		goto fail;

	int fd = open_log_fd(st, log_path);
	if (fd == -ENOENT && (opts->flags & ATOMIO_CREATE)) {
		r = create_log(st, log_path, opts->log_size);
		if (r < 0)
			goto fail;
		fd = open_log_fd(st, log_path);
	}
	if (fd < 0) {
		r = fd;
		if (r != ATOMIO_ENOTLOG) /* that one has said why */
			st_err(st, "opening %s: %s", log_path, strerror(-r));
		goto fail;
	}
	st->log_fd = fd;

	struct stat ls;
	r = atomio_sys->fstat(fd, &ls);
	if (r < 0)
		goto fail;
	if (!S_ISREG(ls.st_mode)) {
		r = ATOMIO_ENOTLOG;
		st_err(st, "%s: not a regular file", log_path);
		goto fail;
	}
	if (!(opts->flags & ATOMIO_ALLOW_SHARED_LOG) &&
	    ((ls.st_mode & (S_IWGRP | S_IWOTH)) || ls.st_uid != geteuid())) {
		r = ATOMIO_EUNSAFE;
		st_err(st, "%s: the log is writable by users other than its owner, or not owned by "
			   "this user (mode %04o, uid %u); chmod 600 it or pass ATOMIO_ALLOW_SHARED_LOG",
		       log_path, (unsigned)(ls.st_mode & 07777), (unsigned)ls.st_uid);
		goto fail;
	}
	/* One process (one open store) at a time: flock locks belong to the
	 * open file description, so a second atomio_open in this very process
	 * is refused too. */
	r = atomio_sys->flock(fd, LOCK_EX | LOCK_NB);
	/* A process killed while its io_uring requests were in flight keeps
	 * its files (and so this lock) until the kernel has finished them,
	 * a few milliseconds after it is gone: a restart right after a crash
	 * must not be told the store is busy.  So wait up to 250 ms first.
	 * (A sleep is no I/O: it does not go through the ops table.) */
	for (int i = 0; r == -EWOULDBLOCK && i < 50; i++) {
		struct timespec ts = {0, 5000000L};
		nanosleep(&ts, NULL);
		r = atomio_sys->flock(fd, LOCK_EX | LOCK_NB);
	}
	if (r == -EWOULDBLOCK) {
		r = -EBUSY;
		st_err(st, "%s: the store is open elsewhere", log_path);
		goto fail;
	}
	if (r < 0)
		goto fail;

	char canon[PATH_MAX];
	r = atomio_sys->realpath(log_path, canon);
	if (r < 0)
		goto fail;
	st->log_dir = dir_of(canon);
	if (!st->log_dir) {
		r = -ENOMEM;
		goto fail;
	}
	r = load_sb(st);
	if (r < 0)
		goto fail;
	if (st->log_direct && st->block < 512) {
		r = ATOMIO_ECORRUPT;
		goto fail;
	}
	r = cat_load(st);
	if (r < 0)
		goto fail;
	r = recover(st);
	if (r < 0)
		goto fail;
	commit_init(st);
	wear_init(st, opts->ckpt_percent, opts->dirty_limit);
	r = engine_open(st, opts->flags);
	if (r < 0)
		goto fail;
	*out = st;
	return 0;
fail:
	st_free(st);
	return r;
}

int atomio_close(atomio *st)
{
	if (!st)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	if (st->open_txs) {
		pthread_mutex_unlock(&st->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&st->lock);
	int r = role_acquire(st);
	if (r == 0) {
		pthread_mutex_lock(&st->lock);
		int failed = st->failed;
		pthread_mutex_unlock(&st->lock);
		/* A failed store is left for recovery: checkpointing it could
		 * declare durable what a failed fsync dropped.  Say so. */
		r = failed ? ATOMIO_EFAILED : checkpoint_locked(st);
		role_release(st);
	}
	st_free(st);
	return r;
}

/* --- caps / stats / errors -------------------------------------------------------- */

int atomio_caps(atomio *st, int file, struct atomio_caps *caps)
{
	if (!st || !caps)
		return -EINVAL;
	struct afile *f = NULL;
	if (file >= 0) {
		f = file_get(st, file);
		if (!f)
			return -EINVAL;
	} else if (file != -1) {
		return -EINVAL;
	}
	memset(caps, 0, sizeof(*caps));
	caps->max_group_bytes = st->area_size - REC_HDR - REC_DESC;
	uint64_t segs = (st->area_size - REC_HDR) / (REC_DESC + 1);
	caps->max_segments = segs < MAX_SEGMENTS ? (uint32_t)segs : MAX_SEGMENTS;
	caps->segment_overhead = REC_DESC;
	caps->log_size = st->area_size;
	caps->log_block = st->block;
	if (f && f->direct) {
		caps->dio_offset_align = f->dio_off_align;
		caps->dio_mem_align = f->dio_mem_align;
	}
	caps_fill(st, f, caps);
	return 0;
}

int atomio_stats(atomio *st, struct atomio_stats *s)
{
	if (!st || !s)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	s->commits = atomic_load(&st->stats.commits);
	s->bytes_logged = atomic_load(&st->stats.bytes_logged);
	s->bytes_home = atomic_load(&st->stats.bytes_home);
	s->log_syncs = atomic_load(&st->stats.log_syncs);
	s->data_syncs = atomic_load(&st->stats.data_syncs);
	s->checkpoints = atomic_load(&st->stats.checkpoints);
	s->groups_recovered = atomic_load(&st->stats.groups_recovered);
	s->batches = atomic_load(&st->stats.batches);
	s->log_full_waits = atomic_load(&st->stats.log_full_waits);
	s->fast_writes = atomic_load(&st->stats.fast_writes);
	s->bytes_raw = atomic_load(&st->stats.bytes_raw);
	s->records_compressed = atomic_load(&st->stats.records_compressed);
	s->bytes_checkpointed = atomic_load(&st->stats.bytes_checkpointed);
	pthread_mutex_lock(&st->lock);
	s->dirty_bytes = st->dirty.used * 4096;
	pthread_mutex_unlock(&st->lock);
	return 0;
}

const char *atomio_strerror(int err)
{
	switch (err) {
	case 0:
		return "Success";
	case ATOMIO_ENOTLOG:
		return "Not an atomio log";
	case ATOMIO_EVERSION:
		return "Unsupported atomio log format version";
	case ATOMIO_ECORRUPT:
		return "atomio log is corrupt";
	case ATOMIO_EFAILED:
		return "Store failed after an I/O error; reopen it to recover";
	case ATOMIO_EIDENTITY:
		return "Data file is not the file registered with the store";
	case ATOMIO_EBADPATH:
		return "Path recorded in the log breaks atomio's path rules";
	case ATOMIO_EUNSAFE:
		return "atomio log is writable by other users";
	}
	if (err < 0 && err > -4096)
		return strerror(-err);
	return "Unknown atomio error";
}
