/*
 * logfile.c: the log file itself (format.h, LOG FILE LAYOUT): creating it,
 * opening it, reading it, and writing its superblock.  Below the store
 * (store.c), recovery (recover.c) and the catalog (files.c); above codec.c,
 * which says what a valid superblock is.
 */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sys/file.h>
#include <sys/uio.h>

#include <xxhash.h>

#include "internal.h"
#include "shm.h"

/* --- log block size ------------------------------------------------------ */

/* Physical sector size of the device under fd, 0 when unknown. */
static uint32_t phys_sector(int fd)
{
	struct stat sb;
	if (atomio_sys->fstat(fd, &sb) < 0)
		return 0;
	uint32_t v = sysfs_queue_u32(sb.st_dev, "physical_block_size");
	return v >= 512 && v <= 65536 && !(v & (v - 1)) ? v : 0;
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

int log_write_sb(atomio *st, uint64_t head_off, uint64_t head_seq, uint64_t epoch)
{
	struct sb_disk sb = *st->sbp;
	sb.generation++;
	/* A version 1 log is version 2 from its first superblock write on
	 * (the one at open, before any new record): a library that reads only
	 * version 1 then refuses it instead of misreading compressed records. */
	sb.version = FMT_VERSION;
	sb.head_off = head_off;
	sb.head_seq = head_seq;
	sb.epoch = epoch;
	codec_sb_seal(&sb);
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
	*st->sbp = sb;
	return 0;
}

int log_write_pad(atomio *st, uint64_t off, uint64_t len, uint64_t seq, uint32_t count)
{
	if (!st->pad_buf && !(st->pad_buf = aligned_alloc_zero(4096, st->block)))
		return -ENOMEM;
	memset(st->pad_buf, 0, st->block);
	codec_rec_pad_build(st->pad_buf, seq, count, st->rec_epoch, len, st->store_id);
	/* One block over the start of the space: the rest is never read
	 * (format.h, PAD RECORD).  Durable before the batch's home turn passes
	 * (commit.c, ADOPTION). */
	int r = sys_pwrite_durable(st->log_fd, st->pad_buf, st->block, (off_t)(st->area_off + off));
	if (r < 0)
		st_err(st, "writing a pad record to the log %s: %s", st->log_path, strerror(-r));
	else
		atomic_fetch_add(&st->sh->stats.log_syncs, 1);
	return r;
}

int log_write_at(atomio *st, const void *buf, uint64_t len, uint64_t off)
{
	/* Byte for byte the records the dead leader wrote or was to write
	 * (same seqs, epoch, data, LAST flag): whatever of its write landed is
	 * overwritten by the same bytes.  Durable before the batch's home turn
	 * (commit.c, ADOPTION; format.h SYNC ORDER). */
	int r = sys_pwrite_durable(st->log_fd, buf, len, (off_t)(st->area_off + off));
	/* And a flush of the whole log: the dead leader's own write of this
	 * space (ended with its process, maybe only in the device's cache) is
	 * then durable or superseded, never a stale copy that could still land
	 * after these bytes -- over a later checkpoint's reuse of the space. */
	if (r == 0)
		r = sys_fdatasync_full(st->log_fd);
	if (r < 0)
		st_err(st, "writing the log %s again for a process that died: %s", st->log_path, strerror(-r));
	else
		atomic_fetch_add(&st->sh->stats.log_syncs, 1);
	return r;
}

/* The current superblock of the two slots in buf (2 * SB_SLOT bytes) of a
 * log file_size bytes long: 0 with *out set, or the most specific reason
 * none is (a bad checksum on a slot with our magic is corruption, not a
 * foreign file); *two: both valid but of two stores (ATOMIO_ECORRUPT). */
static int sb_pick(const char *buf, uint64_t file_size, struct sb_disk *out, bool *two)
{
	const struct sb_disk *s0 = (const void *)buf, *s1 = (const void *)(buf + SB_SLOT);
	int why0 = codec_sb_check(s0, file_size, NULL);
	int why1 = codec_sb_check(s1, file_size, NULL);
	int cur = codec_sb_current(s0, why0 == 0, s1, why1 == 0);
	*two = cur == -2;
	if (cur == -2)
		return ATOMIO_ECORRUPT;
	if (cur < 0)
		return why0 == ATOMIO_ECORRUPT || why1 == ATOMIO_ECORRUPT ? ATOMIO_ECORRUPT
		       : why0 == ATOMIO_EVERSION || why1 == ATOMIO_EVERSION ? ATOMIO_EVERSION
									    : ATOMIO_ENOTLOG;
	*out = cur ? *s1 : *s0;
	return 0;
}

int log_load_sb(atomio *st)
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
	bool two;
	st->sbp = &st->sb_local;
	r = sb_pick(buf, (uint64_t)fs.st_size, &st->sb_local, &two);
	/* One slot valid, the other written once (not all zeros) but invalid:
	 * the damaged one may have been the newer; recovery looks at the
	 * records (recover.c). */
	st->sb_damaged = 0;
	if (r == 0) {
		const struct sb_disk *s0 = (const void *)buf, *s1 = (const void *)(buf + SB_SLOT);
		st->sb_damaged = 1 + codec_sb_damaged(s0, !codec_sb_check(s0, (uint64_t)fs.st_size, NULL), s1,
						      !codec_sb_check(s1, (uint64_t)fs.st_size, NULL));
	}
	const struct sb_disk *sane = NULL; /* a slot sound but for the file's size */
	for (int i = 0; i < 2 && r < 0 && !two; i++) {
		const char *why;
		const struct sb_disk *s = (const void *)(buf + i * SB_SLOT);
		if (codec_sb_check(s, (uint64_t)fs.st_size, &why) == ATOMIO_ECORRUPT && why == codec_sb_short)
			sane = s;
	}
	if (two)
		st_err(st, "%s: superblock slots belong to two different stores", st->log_path);
	else if (sane)
		st_err(st, "%s: the file is %llu bytes, shorter than its geometry says (record area of "
			   "%llu bytes at %llu: %llu bytes): truncated or cut short; nothing replayed",
		       st->log_path, (unsigned long long)fs.st_size, (unsigned long long)sane->area_size,
		       (unsigned long long)sane->area_off,
		       (unsigned long long)(sane->area_off + sane->area_size));
	else if (r < 0) {
		/* Name each slot's cause, as atomio dump does: the code alone
		 * ("atomio log is corrupt") does not say what to look at. */
		const char *w0 = NULL, *w1 = NULL;
		codec_sb_check((const void *)buf, (uint64_t)fs.st_size, &w0);
		codec_sb_check((const void *)(buf + SB_SLOT), (uint64_t)fs.st_size, &w1);
		st_err(st, "%s: %s: no valid superblock (slot 0: %s; slot 1: %s)", st->log_path, atomio_strerror(r),
		       w0 ? w0 : "valid", w1 ? w1 : "valid");
	}
	free(buf);
	if (r < 0)
		return r;
	st->store_id = st->sb_local.store_id;
	st->block = st->sb_local.block;
	st->area_off = st->sb_local.area_off;
	st->area_size = st->sb_local.area_size;
	st->cat_off = st->sb_local.cat_off;
	st->cat_size = st->sb_local.cat_size;
	return 0;
}

int log_reload_sb(atomio *st, struct sb_disk *sb)
{
	struct stat fs;
	int r = atomio_sys->fstat(st->log_fd, &fs);
	if (r < 0)
		return r;
	char *buf = aligned_alloc_zero(4096, 2 * SB_SLOT);
	if (!buf)
		return -ENOMEM;
	r = log_read(st, 0, buf, 2 * SB_SLOT);
	bool two;
	if (r == 0)
		r = sb_pick(buf, (uint64_t)fs.st_size, sb, &two);
	free(buf);
	if (r == 0 && sb->store_id != st->store_id)
		r = ATOMIO_ECORRUPT;
	if (r < 0)
		st_err(st, "%s: reading the superblock back: %s", st->log_path, atomio_strerror(r));
	return r;
}

int atomio_log_mark(int log_fd, struct atomio_log_mark *mark)
{
	if (!mark || log_fd < 0)
		return -EINVAL;
	memset(mark, 0, sizeof(*mark));
	struct stat fs;
	int r = atomio_sys->fstat(log_fd, &fs);
	if (r < 0)
		return r;
	char *buf = calloc(2, SB_SLOT);
	if (!buf)
		return -ENOMEM;
	ssize_t n = fs.st_size >= (off_t)(2 * SB_SLOT) ? sys_pread_full(log_fd, buf, 2 * SB_SLOT, 0) : 0;
	struct sb_disk sb;
	bool two;
	r = n < 0 ? (int)n : sb_pick(buf, (uint64_t)fs.st_size, &sb, &two);
	free(buf);
	if (r < 0)
		return r;
	mark->store_id = sb.store_id;
	mark->epoch = sb.epoch;
	return 0;
}

/* --- creation ---------------------------------------------------------------- */

/* A new log is built under a temporary name in its directory (format.h,
 * create): ".atomio-tmp-", 16 hex digits naming the log (a hash of its file
 * name), "-", 16 random hex digits.  45 bytes whatever the log's name, so it
 * fits NAME_MAX when the log's own name does; and a file of that form is
 * known to be this log's temporary file.  Its creator holds an exclusive
 * flock on it until it is renamed into place or removed: a process killed
 * meanwhile leaves a file nobody locks, which the next atomio_open of the
 * log removes (log_sweep_tmp). */
#define TMP_PREFIX ".atomio-tmp-"
#define TMP_TAG_LEN (sizeof(TMP_PREFIX) - 1 + 16 + 1) /* prefix, log tag, '-' */

static void tmp_tag(const char *path, char *out, size_t n)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	snprintf(out, n, TMP_PREFIX "%016llx-", (unsigned long long)XXH3_64bits(base, strlen(base)));
}

struct sweep {
	atomio *st;
	const char *dir;
	char tag[TMP_TAG_LEN + 1];
};

static int sweep_one(void *arg, const char *name)
{
	struct sweep *w = arg;
	if (strncmp(name, w->tag, TMP_TAG_LEN) || strlen(name) != TMP_TAG_LEN + 16)
		return 0; /* not a temporary file of this log */
	char p[PATH_MAX];
	int n = snprintf(p, sizeof(p), "%s/%s", w->dir, name);
	if (n < 0 || (size_t)n >= sizeof(p))
		return 0;
	/* O_PATH first: whatever is planted under the name is never opened
	 * for real unless it is a regular file. */
	int pfd = atomio_sys->open(p, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
	if (pfd < 0)
		return 0;
	struct stat a, b;
	int fd = atomio_sys->fstat(pfd, &a) == 0 && S_ISREG(a.st_mode)
			 ? proc_reopen(pfd, O_RDONLY | O_CLOEXEC)
			 : -1;
	atomio_sys->close(pfd);
	if (fd < 0)
		return 0;
	/* Locked: its creator lives (or the flock is held across a fork);
	 * leave it.  Unlocked: the creator is gone -- remove the name if it
	 * still is this inode. */
	if (atomio_sys->flock(fd, LOCK_EX | LOCK_NB) == 0 && atomio_sys->fstat(fd, &a) == 0 &&
	    atomio_sys->lstat(p, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		(void)atomio_sys->unlink(p);
	atomio_sys->close(fd);
	return 0;
}

void log_sweep_tmp(atomio *st, const char *path)
{
	struct sweep w = {.st = st};
	char *dir = dir_of(path);
	if (!dir)
		return;
	w.dir = dir;
	tmp_tag(path, w.tag, sizeof(w.tag));
	(void)sys_listdir(dir, sweep_one, &w); /* best effort: a stale file costs space only */
	free(dir);
}

/* Create the temporary file, locked (see above).  fd, or a negative errno. */
static int tmp_create(atomio *st, const char *path, char *tmp, size_t tmpsz)
{
	char *dir = dir_of(path);
	if (!dir)
		return -ENOMEM;
	char tag[TMP_TAG_LEN + 1];
	tmp_tag(path, tag, sizeof(tag));
	snprintf(tmp, tmpsz, "%s/%s...", dir, tag); /* named in a message even if no name is made */
	int fd = -EEXIST;
	for (int tries = 0; tries < 8 && (fd == -EEXIST || fd == -EAGAIN); tries++) {
		uint64_t rnd;
		int r = atomio_sys->getrandom(&rnd, sizeof(rnd));
		if (r < 0) {
			fd = r;
			break;
		}
		int n = snprintf(tmp, tmpsz, "%s/%s%016llx", dir, tag, (unsigned long long)rnd);
		if (n < 0 || (size_t)n >= tmpsz) {
			fd = -ENAMETOOLONG;
			break;
		}
		/* 0600: whoever can write the log can choose what recovery writes. */
		fd = atomio_sys->open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			continue;
		/* Between the create and the lock a sweep may have taken the
		 * file for a dead creator's and removed it: check, else anew. */
		struct stat a, b;
		if (atomio_sys->flock(fd, LOCK_EX | LOCK_NB) < 0 || atomio_sys->fstat(fd, &a) < 0 ||
		    atomio_sys->lstat(tmp, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
			atomio_sys->close(fd);
			fd = -EAGAIN;
		}
	}
	if (fd < 0)
		st_err(st, "creating %s: %s", tmp, strerror(-fd));
	free(dir);
	return fd;
}

uint64_t atomio_log_zero_create = LOG_ZERO_CREATE;

/* Write zeros over [0, end) of the new log fd (zero: LOG_ZERO_BUF zero bytes,
 * 4096-aligned), in writes of up to LOG_ZERO_MAX, direct where the file
 * takes O_DIRECT: a GiB of zeros kept in the page cache would only push
 * other files' pages out.  Durable at log_create's fsync.  0 or a negative
 * errno. */
static int zero_fill(int fd, const char *zero, uint64_t zlen, uint64_t end)
{
	int dfd = end > LOG_ZERO_MAX ? proc_reopen(fd, O_WRONLY | O_CLOEXEC | O_DIRECT) : -1;
	int wfd = dfd >= 0 ? dfd : fd;
	struct iovec iov[LOG_ZERO_MAX / LOG_ZERO_BUF];
	int r = 0;
	for (uint64_t off = 0; off < end && r == 0;) {
		const uint64_t most = zlen * (sizeof(iov) / sizeof(iov[0]));
		uint64_t n = end - off < most ? end - off : most;
		int cnt = 0;
		for (uint64_t left = n; left; cnt++) {
			iov[cnt].iov_base = (void *)zero;
			iov[cnt].iov_len = left < zlen ? left : zlen;
			left -= iov[cnt].iov_len;
		}
		/* end and every write's offset are block multiples (area_off,
		 * the unit, the budget rounded below), so a direct write is
		 * aligned; were one refused, the buffered descriptor takes it */
		r = sys_pwritev_full(wfd, iov, cnt, (off_t)off, 0);
		if (r == -EINVAL && wfd != fd) {
			wfd = fd;
			r = sys_pwritev_full(wfd, iov, cnt, (off_t)off, 0);
		}
		off += n;
	}
	if (dfd >= 0)
		atomio_sys->close(dfd);
	return r;
}

/* Give a new log file (fd, named tmp in messages) its blocks and zeros:
 * area_off + area_size bytes, the record area at area_off.  Sets
 * *written_out to the end of what is known written (zeros) and *zerop to a
 * zeroed buffer of at least 4096 bytes, which the caller frees (also on
 * failure). */
static int log_alloc(atomio *st, int fd, const char *tmp, uint64_t area_off, uint64_t area_size,
		     uint32_t block, uint64_t *written_out, char **zerop)
{
	uint64_t total = area_off + area_size;
	/* Record writes should be overwrites of written blocks, so that
	 * RWF_DSYNC needs no metadata commit (an unwritten extent's conversion
	 * is one: docs/PERFORMANCE.md).  The file gets its blocks from
	 * fallocate (no ENOSPC later), then its area is written with zeros
	 * now, before any record needs the device: by the device itself where
	 * it can (FALLOC_FL_WRITE_ZEROES: no data moved), else by writes, up
	 * to atomio_log_zero_create bytes of it (all of a default log).
	 * Zeroed later, ahead of the records, the zeros would share the device
	 * with the first lap's commits (as many bytes as the records); here
	 * they cost the area's size at the device's sequential speed, once in
	 * the log's life, before any commit waits (docs/PERFORMANCE.md, "A
	 * new store's first lap").  What a larger log has beyond is zeroed by
	 * the checkpointer ahead of the records (log_zero_step_locked_drops).
	 * Without fallocate, every byte now. */
	uint64_t written = total, zero_to = total;
	int r = sys_fallocate(fd, 0, 0, (off_t)total);
	if (r == 0) {
		uint64_t unit = log_zero_unit(area_size, block);
		uint64_t now = area_size < atomio_log_zero_create ? area_size : atomio_log_zero_create / block * block;
		written = zero_to = area_off + (now > unit ? now : unit);
		/* Any failure (old kernel or headers, a device without
		 * unmapping write-zeroes, an I/O error) leaves blocks that
		 * read as zeros, written or not: write them as without it. */
		if (sys_fallocate(fd, FALLOC_FL_WRITE_ZEROES, (off_t)area_off, (off_t)area_size) == 0) {
			written = total;
			zero_to = area_off;
		}
	} else if (r != -ENOSYS && r != -EOPNOTSUPP && r != -EINVAL) {
		st_err(st, "allocating %llu bytes for %s: %s", (unsigned long long)total, tmp, strerror(-r));
		return r;
	}
	/* The zeros' buffer no larger than what they cover (a small log's
	 * creation then touches no megabyte of fresh memory). */
	const uint64_t zlen = zero_to < LOG_ZERO_BUF ? align_up(zero_to ? zero_to : 1, 4096) : LOG_ZERO_BUF;
	char *zero = *zerop = aligned_alloc_zero(4096, zlen);
	r = zero ? zero_fill(fd, zero, zlen, zero_to) : -ENOMEM;
	if (r < 0) {
		st_err(st, "writing %s: %s", tmp, strerror(-r));
		return r;
	}
	*written_out = written;
	return 0;
}

/* Write a new log's first superblock (generation 1, head at the area's
 * start) and its empty catalog (copy 0), through zero (a buffer of 4096
 * bytes or more, which it overwrites). */
static int log_write_first(int fd, char *zero, uint64_t store_id, uint32_t block, uint64_t area_off,
			   uint64_t area_size, uint64_t cat_size)
{
	struct sb_disk sb;
	memset(&sb, 0, sizeof(sb));
	memcpy(sb.magic, SB_MAGIC, 8);
	sb.bom = SB_BOM;
	sb.version = FMT_VERSION;
	sb.store_id = store_id;
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
	codec_sb_seal(&sb);
	memcpy(zero, &sb, SB_SIZE);
	int r = sys_pwrite_full(fd, zero, SB_SLOT, (off_t)((sb.generation % 2) * SB_SLOT), 0);
	if (r == 0) {
		/* catalog copy 0, generation 0, no file */
		memset(zero, 0, SB_SLOT);
		codec_cat_seal(zero, 0, sb.store_id, 0, CAT_HDR);
		r = sys_pwrite_full(fd, zero, 4096, (off_t)CAT_OFF, 0);
	}
	return r;
}

int log_create(atomio *st, const char *path, uint64_t log_size, uint64_t *written_lo)
{
	uint64_t rnd[2];
	int r = atomio_sys->getrandom(rnd, sizeof(rnd));
	if (r < 0)
		return r;
	size_t plen = strlen(path);
	size_t tmpsz = plen + TMP_TAG_LEN + 32;
	char *tmp = malloc(tmpsz);
	char *dir = dir_of(path);
	char *zero = NULL;
	int fd = -1;
	if (!tmp || !dir) {
		r = -ENOMEM;
		goto out;
	}
	fd = tmp_create(st, path, tmp, tmpsz);
	if (fd < 0) {
		r = fd;
		goto out;
	}
	uint32_t block = pick_block(fd, true);
	uint64_t cat_size = CAT_DEFAULT_SIZE;
	uint64_t area_off = align_up(CAT_OFF + 2 * cat_size, block);
	uint64_t area_size = align_up(log_size ? log_size : DEFAULT_LOG_SIZE, block);
	if (area_size < MIN_LOG_BLOCKS * block)
		area_size = MIN_LOG_BLOCKS * block;

	uint64_t written = 0;
	r = log_alloc(st, fd, tmp, area_off, area_size, block, &written, &zero);
	if (r < 0)
		goto out_unlink;
	r = log_write_first(fd, zero, rnd[0] ? rnd[0] : 1, block, area_off, area_size, cat_size);
	/* fsync (not fdatasync): the file's size and blocks must be durable
	 * before its name appears under the final path. */
	if (r == 0)
		r = sys_fsync_full(fd);
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
	else
		*written_lo = written - area_off;
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
/* --- lazy zeroing of the record area ------------------------------------------ */

uint64_t log_zero_start(atomio *st, uint64_t created_lo)
{
	uint64_t first, lo;
	if (sys_unwritten_from(st->log_fd, st->area_off, st->area_size, &first) == 0)
		lo = first > st->area_off ? (first - st->area_off) / st->block * st->block : 0;
	else if (created_lo != UINT64_MAX)
		lo = created_lo; /* a test backend: what log_create wrote */
	else
		lo = st->area_size; /* no FIEMAP: written whole, as far as atomio knows */
	return lo > st->area_size ? st->area_size : lo;
}

bool log_zero_due_locked(const atomio *st)
{
	ASSERT_LOCKED(st);
	const struct shm_state *S = st->S;
	/* Ahead of the tail; or all of the rest once the store has written a
	 * log's worth of records: it uses the whole log, and the part the
	 * first lap skipped would else be zeroed during the second. */
	return !S->zero_owner && S->zero_lo < st->area_size && !S->failed &&
	       (S->zero_lo < S->tail + LOG_ZERO_AHEAD * log_zero_unit(st->area_size, st->block) ||
		atomic_load(&st->sh->stats.bytes_logged) >= st->area_size);
}

void log_zero_step_locked_drops(atomio *st)
{
	ASSERT_LOCKED_DROPS(st);
	uint64_t lo = st->S->zero_lo;
	uint64_t unit = log_zero_unit(st->area_size, st->block);
	uint64_t n = st->area_size - lo < unit ? st->area_size - lo : unit;
	/* Records are written only below zero_lo (commit.c raises it past
	 * each batch before writing, and waits while a chunk is zeroed here),
	 * so these zeros land on no record. */
	st->S->zero_owner = st->me;
	shm_unlock(st);
	int r = 0;
	if (!st->zero_buf && !(st->zero_buf = aligned_alloc_zero(4096, LOG_ZERO_BUF)))
		r = -ENOMEM;
	if (r == 0) {
		struct iovec iov[LOG_ZERO_MAX / LOG_ZERO_BUF];
		int cnt = 0;
		for (uint64_t left = n; left; cnt++) {
			iov[cnt].iov_base = st->zero_buf;
			iov[cnt].iov_len = left < LOG_ZERO_BUF ? left : LOG_ZERO_BUF;
			left -= iov[cnt].iov_len;
		}
		r = sys_pwritev_full(st->log_fd, iov, cnt, (off_t)(st->area_off + lo), 0);
	}
	/* fdatasync: the extents' conversion to written is metadata; committed
	 * now, in this thread, a commit's RWF_DSYNC write there need not. */
	bool sync_failed = false;
	if (r == 0) {
		r = sys_fdatasync_full(st->log_fd);
		sync_failed = r < 0;
	}
	shm_lock(st);
	st->S->zero_owner = 0;
	if (sync_failed) {
		/* A write-back error is reported once per open file description
		 * (errseq), to whichever sync of it looks first: this one may
		 * have taken a commit's (a log without O_DIRECT is written
		 * through the page cache), whose own RWF_DSYNC write then saw
		 * none and acknowledged a group that is not durable.  Nothing
		 * tells whose it was: the store fails. */
		st_err(st, "syncing the zeroed part of %s: %s", st->log_path, strerror(-r));
		st_fail_locked(st, r);
	}
	/* On an error, stop zeroing: the zeros only spare later record writes
	 * a metadata commit, records written over unwritten blocks are as
	 * durable, and a log write that fails fails the commit itself. */
	st->S->zero_lo = r == 0 ? lo + n : st->area_size;
	shm_wake(st, &st->sh->ev_role);
}

int log_open_fd(atomio *st, const char *path)
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
	/* From here a fork closes the child's descriptors of this file until
	 * the store tracks the one opened below (util.c, fork_pending) */
	if (r == 0)
		fork_pending_file(st->fork_pending, sb.st_dev, sb.st_ino);
	if (r < 0) {
		atomio_sys->close(pfd);
		if (r == ATOMIO_ENOTLOG)
			st_err(st, "%s: not a regular file", path);
		return r;
	}
	bool by_path = false;
	int fd = proc_reopen(pfd, O_RDWR | O_CLOEXEC | O_DIRECT);
	if (fd == -ENOENT) {
		by_path = true;
		fd = atomio_sys->open(path, O_RDWR | O_CLOEXEC | O_DIRECT | O_NONBLOCK | O_NOCTTY, 0);
	}
	if (fd == -EINVAL) {
		/* No O_DIRECT here (tmpfs, some FUSE): buffered writes with
		 * RWF_DSYNC give the same durability at one more copy. */
		fd = by_path ? atomio_sys->open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0)
			     : proc_reopen(pfd, O_RDWR | O_CLOEXEC);
		st->log_direct = false;
	} else {
		st->log_direct = true;
	}
	atomio_sys->close(pfd);
	return fd;
}

