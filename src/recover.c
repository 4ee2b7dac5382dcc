/*
 * recover.c: replay the log at open (format.h, VALIDITY AND RECOVERY).
 *
 * Three passes over the live records, none of which trusts the log:
 *   1. scan: find the valid prefix (magic, seq, epoch, lengths, checksum) and
 *      check every descriptor of every record in it; a checksummed record
 *      with an impossible descriptor stops everything (ATOMIO_ECORRUPT);
 *   2. open every data file the prefix names, without following a final
 *      symlink, and check it is the registered file (ATOMIO_EIDENTITY; with
 *      ATOMIO_ACCEPT_COPIES, another file is accepted when the prefix would
 *      leave it exactly as it is: see "copies" below);
 *   3. replay the prefix in order, then fsync the files written.
 * Only then is the superblock rewritten: head reset, epoch + 1.  A crash
 * anywhere before that replays the same prefix again, which is idempotent:
 * the prefix is applied whole, in order, from the same starting point.
 *
 * Memory is bounded whatever the log says: records are streamed through a
 * fixed buffer; descriptors are at most MAX_SEGMENTS * 32 bytes; a
 * compressed record (flag LZ4) is at most COMP_MAX bytes, read whole into
 * that buffer, and decompresses into a second one of COMP_MAX bytes, never
 * into anything sized by the record's raw_len.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "internal.h"
#include "shm.h"

#define CHUNK (1u << 20)
_Static_assert(CHUNK >= COMP_MAX, "a compressed record is read whole into the chunk buffer");

struct rec {
	uint64_t pos; /* area offset */
	struct rec_hdr_disk h;
	struct seg_disk *segs;
};

struct rcv {
	atomio *st;
	char *buf; /* CHUNK bytes, aligned */
	char *raw; /* COMP_MAX bytes (at the first compressed record): its data, decompressed */
	uint64_t epoch;
	int *fds;         /* by file id, -1 = not open */
	uint8_t *needed;  /* bitmap by file id */
	uint64_t *maxend; /* by file id: the largest end or size the prefix asks for */
	uint64_t log_dev, log_ino; /* the log itself is never a data file */
	bool borrowed;             /* fds are the store's own (replay_record): not closed here */
	/* replay_files: the files to write (bitmap by id; the others' ranges
	 * are skipped), and where the live records begin */
	const uint8_t *only;
	uint64_t head_off, head_seq;
	uint32_t hi;               /* the tables above have this many entries */
	struct codec_found *found; /* the area scan's, once one ran (scanned) */
	size_t nfound;
	bool scanned;
	/* ATOMIO_ACCEPT_COPIES: files that are not the registered ones, to be
	 * checked (check_copies) and never written. */
	uint8_t *copy;     /* bitmap by file id, NULL = none */
	uint64_t *csize;   /* by file id: the size, as found, then as the prefix leaves it */
	uint64_t *isize;   /* by file id: the size as found */
	struct cev *ev;    /* the copies' events, in log order */
	size_t nev, evcap;
	struct rpos { uint64_t pos, seq; } *rpos; /* each group record of the prefix */
	size_t nrec, rcap;
};

static bool skipped(const struct rcv *rc, uint32_t id)
{
	return rc->only && !(rc->only[id / 8] & (1u << (id % 8)));
}

static bool is_copy(const struct rcv *rc, uint32_t id)
{
	return rc->copy && id < rc->hi && (rc->copy[id / 8] >> (id % 8)) & 1;
}

static int area_read(struct rcv *rc, uint64_t pos, void *buf, size_t len)
{
	return log_read(rc->st, rc->st->area_off + pos, buf, len);
}

static int area_read_fn(void *ctx, uint64_t pos, void *buf, size_t len)
{
	return area_read(ctx, pos, buf, len);
}

/* codec_csum_read's reader for the record at rd->pos */
struct rec_reader {
	struct rcv *rc;
	uint64_t pos;
};

static int rec_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct rec_reader *rr = ctx;
	return area_read(rr->rc, rr->pos + off, buf, len);
}

/* Read and check the record at pos expecting seq.  1 = valid (rec filled,
 * segs allocated), 0 = no valid record here, < 0 = error. */
static int read_record(struct rcv *rc, uint64_t pos, uint64_t seq, struct rec *rec)
{
	atomio *st = rc->st;
	if (!codec_rec_fits(pos, st->area_size))
		return 0;
	struct rec_hdr_disk h;
	int r = area_read(rc, pos, &h, sizeof(h));
	if (r < 0)
		return r;
	struct rec_expect x = {.seq = seq, .epoch = rc->epoch, .area_size = st->area_size,
			       .version = st->sbp->version};
	if (codec_rec_check(&h, pos, &x) != REC_OK)
		return 0;

	/* Checksum, streamed; a record that fits leaves the whole of it in buf. */
	struct rec_reader rr = {rc, pos};
	uint64_t sum;
	r = codec_csum_read(st->store_id, codec_rec_sum_len(&h), offsetof(struct rec_hdr_disk, csum), rec_read,
			    &rr, rc->buf, CHUNK, &sum);
	if (r < 0)
		return r;
	if (sum != h.csum)
		return 0; /* torn or stale: the end of the log */
	if (h.type == REC_TYPE_PAD) {
		/* space a dead writer had reserved: nothing to read in it */
		rec->pos = pos;
		rec->h = h;
		rec->segs = NULL;
		return 1;
	}
	if (h.flags & REC_F_LZ4) {
		/* The whole record is in buf (rec_len <= COMP_MAX <= CHUNK).
		 * Checksummed, so written by a store: data that does not
		 * decompress to exactly raw_len bytes is corruption, refused
		 * before anything is replayed. */
		if (!rc->raw && !(rc->raw = malloc(COMP_MAX)))
			return -ENOMEM; /* once, at the first compressed record */
		if (!codec_rec_lz4_ok(rc->buf, &h, rc->raw)) {
			st_err(st, "%s: record seq %llu: its LZ4 data does not decompress to its %llu bytes",
			       st->log_path, (unsigned long long)h.seq, (unsigned long long)h.raw_len);
			return ATOMIO_ECORRUPT;
		}
	}

	size_t dlen = (size_t)h.nsegs * REC_DESC;
	struct seg_disk *segs = malloc(dlen);
	if (!segs)
		return -ENOMEM;
	r = area_read(rc, pos + REC_HDR, segs, dlen);
	if (r < 0) {
		free(segs);
		return r;
	}
	rec->pos = pos;
	rec->h = h;
	rec->segs = segs;
	return 1;
}

/* A record with a right checksum must also make sense; if not, the log was
 * written by something that is not atomio (or atomio has a bug): refuse. */
static int check_segs(struct rcv *rc, const struct rec *rec, bool collect)
{
	atomio *st = rc->st;
	for (uint32_t i = 0; i < rec->h.nsegs; i++) {
		const struct seg_disk *d = &rec->segs[i];
		const char *why = codec_seg_problem(d, rec->h.raw_len,
						    d->file < rc->hi && atomic_load(&st->files[d->file]));
		if (why && st->cat_damaged &&
		    !(d->file < rc->hi && atomic_load(&st->files[d->file]))) {
			st_err(st, "%s: catalog copy %d fails its checksum (damaged, or torn), and the "
				   "other copy, generation %llu, lacks file id %u that record seq %llu "
				   "names: the damaged copy was the newer one; nothing replayed",
			       st->log_path, st->cat_damaged - 1, (unsigned long long)st->cat_gen,
			       d->file, (unsigned long long)rec->h.seq);
			return ATOMIO_ECORRUPT;
		}
		if (why) {
			st_err(st, "%s: record seq %llu range %u %s", st->log_path,
			       (unsigned long long)rec->h.seq, i, why);
			return ATOMIO_ECORRUPT;
		}
		if (!collect)
			continue;
		rc->needed[d->file / 8] |= (uint8_t)(1u << (d->file % 8));
		uint64_t end = d->kind == SEG_WRITE ? d->off + d->len : d->off;
		if (end > rc->maxend[d->file])
			rc->maxend[d->file] = end;
	}
	return 0;
}

/* Walk the valid prefix; for each group record call fn (pass 1: check,
 * pass 3: apply); pad records (format.h) only move the walk on.  Returns
 * the number of group records, and the seq after the last record. */
static int walk(struct rcv *rc, int (*fn)(struct rcv *, const struct rec *), uint64_t *count,
		uint64_t *seq_end, uint64_t *stop)
{
	atomio *st = rc->st;
	uint64_t pos = rc->only ? rc->head_off : st->sbp->head_off;
	uint64_t seq = rc->only ? rc->head_seq : st->sbp->head_seq, n = 0, steps = 0;
	for (;;) {
		struct rec rec;
		const uint64_t at = pos;
		int r = read_record(rc, pos, seq, &rec);
		if (r == 0 && pos % st->block == 0 && pos != 0)
			r = read_record(rc, pos = 0, seq, &rec); /* a writer's wrap */
		if (r < 0)
			return r;
		if (r == 0) {
			*stop = at;
			break;
		}
		if (rec.h.type == REC_TYPE_GROUP) {
			r = fn(rc, &rec);
			n++;
		}
		free(rec.segs);
		if (r < 0)
			return r;
		seq += codec_rec_seqs(&rec.h);
		pos = codec_rec_next(&rec.h, rec.pos, st->block);
		if (++steps > st->area_size / REC_HDR)
			return ATOMIO_ECORRUPT; /* cannot happen: records do not overlap */
	}
	*count = n;
	*seq_end = seq;
	return 0;
}

/* Is what fd refers to the file registered as f?  1 = yes, 0 = another
 * file, 2 = not a regular file, < 0 an errno. */
static int same_file(int fd, const struct afile *f, struct stat *sb)
{
	struct fid now;
	int r = atomio_sys->fstat(fd, sb);
	if (r == 0)
		r = file_identity(fd, &now);
	if (r < 0)
		return r;
	if (!S_ISREG(sb->st_mode))
		return 2;
	return codec_fid_same(&f->idn, &now);
}

/* Recovery holds a descriptor for every data file its records name, from the
 * identity check to the final fsync (docs/API.md, atomio_open: the bound).
 * Out of descriptors: say how many it needs against which limit. */
static void nofile_err(struct rcv *rc, const char *path, int err)
{
	uint32_t need = 0;
	for (uint32_t id = 0; id < rc->hi; id++)
		need += (rc->needed[id / 8] >> (id % 8)) & 1;
	struct rlimit rl = {0, 0};
	if (err == -EMFILE && sys_getrlimit(RLIMIT_NOFILE, &rl) == 0)
		st_err(rc->st, "%s: opening data file %s: %s: recovery holds a descriptor for each of "
			       "the %u data files with live records, and the process's open-file limit "
			       "(RLIMIT_NOFILE, soft) is %llu: raise it (ulimit -n; atomio recover raises "
			       "it to the hard limit itself); nothing replayed",
		       rc->st->log_path, path, strerror(-err), need, (unsigned long long)rl.rlim_cur);
	else if (err == -EMFILE)
		st_err(rc->st, "%s: opening data file %s: %s: recovery holds a descriptor for each of "
			       "the %u data files with live records, beyond the process's open-file "
			       "limit (RLIMIT_NOFILE): raise it (ulimit -n); nothing replayed",
		       rc->st->log_path, path, strerror(-err), need);
	else
		st_err(rc->st, "%s: opening data file %s: %s (the system's open-file table is full; "
			       "recovery holds a descriptor for each of the %u data files with live "
			       "records); nothing replayed",
		       rc->st->log_path, path, strerror(-err), need);
}

static int open_checked(struct rcv *rc, struct afile *f)
{
	atomio *st = rc->st;
	char path[PATH_MAX];
	int r = file_check_path(f->path, f->cat_flags);
	if (r < 0) {
		st_err(st, "%s: recorded path '%s' breaks the path rules", st->log_path, f->path);
		return ATOMIO_EBADPATH;
	}
	r = file_resolve_path(st, f, path, sizeof(path));
	if (r < 0) {
		/* A sound relative path under a log directory that moved deeper:
		 * the problem is length, not the rules. */
		size_t n = strlen(st->log_dir) + 1 + strlen(f->path);
		st_err(st, "%s: data file '%s' resolves, under the log's directory, to a path of %zu "
			   "bytes, longer than PATH_MAX (%d) allows to open; nothing replayed; move the "
			   "store to a shorter directory", st->log_path, f->path, n, PATH_MAX - 1);
		return -ENAMETOOLONG;
	}
	/* First look without opening: O_PATH opens no FIFO, device or socket
	 * planted at the path (a device's open can act: a tape rewinds, a
	 * watchdog arms; a FIFO's can block), and with O_NOFOLLOW a symlink
	 * there is seen as a symlink, never followed. */
	int pfd = atomio_sys->open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
	if (pfd == -ENOENT || pfd == -ENOTDIR || pfd == -ELOOP) {
		st_err(st, "%s: data file %s is gone (%s); nothing replayed; restore it, or create "
			   "it and reopen with ATOMIO_FORCE_PATHS (atomio recover --force-paths)",
		       st->log_path, path, pfd == -ENOENT ? "no such file"
				   : "a directory on its path was replaced");
		return ATOMIO_EIDENTITY;
	}
	if (pfd == -EMFILE || pfd == -ENFILE) {
		nofile_err(rc, path, pfd);
		return pfd;
	}
	if (pfd < 0) {
		st_err(st, "%s: cannot open data file %s for recovery: %s; nothing replayed",
		       st->log_path, path, strerror(-pfd));
		return pfd;
	}
	struct stat sb;
	r = same_file(pfd, f, &sb);
	if (r < 0) {
		atomio_sys->close(pfd);
		return r;
	}
	const char *why = NULL;
	if (S_ISLNK(sb.st_mode))
		why = "is now a symbolic link";
	else if (r == 2)
		why = "is no longer a regular file";
	else if (sb.st_dev == rc->log_dev && sb.st_ino == rc->log_ino)
		why = "is the store's own log"; /* even with FORCE_PATHS */
	if (why) {
		atomio_sys->close(pfd);
		st_err(st, "%s: data file %s %s; nothing replayed", st->log_path, path, why);
		return ATOMIO_EIDENTITY;
	}
	bool copy = r == 0 && !(st->flags & ATOMIO_FORCE_PATHS) && (st->flags & ATOMIO_ACCEPT_COPIES);
	if (r == 0 && !(st->flags & ATOMIO_FORCE_PATHS) && !copy) {
		atomio_sys->close(pfd);
		/* The identity recorded is the catalog copy's in use; a damaged
		 * newer copy may have held the file's re-registration. */
		char cat[192] = "";
		if (st->cat_damaged)
			snprintf(cat, sizeof(cat), ", as catalog copy %d records it; catalog copy %d fails "
						   "its checksum (damaged, or torn) and may have held this "
						   "file's newer registration",
				 2 - st->cat_damaged, st->cat_damaged - 1);
		st_err(st, "%s: data file %s was replaced since it was registered (inode %llu, "
			   "recorded %llu%s%s); nothing replayed; check it and reopen with "
			   "ATOMIO_FORCE_PATHS (atomio recover --force-paths) to replay into it",
		       st->log_path, path, (unsigned long long)sb.st_ino, (unsigned long long)f->idn.ino,
		       (uint64_t)sb.st_ino == f->idn.ino ? "; same number, another file born later" : "",
		       cat);
		return ATOMIO_EIDENTITY;
	}
	/* Then open for writing the inode just checked, not the path again:
	 * through /proc/self/fd the open reaches that inode even if the path
	 * is swapped meanwhile (no window between check and write).  Without
	 * /proc, open the path (never blocking on a FIFO) and check that it
	 * is still the same inode. */
	int fd = proc_reopen(pfd, O_RDWR | O_CLOEXEC | O_NOCTTY);
	if (fd == -ENOENT)
		fd = atomio_sys->open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
	if (fd == -EMFILE || fd == -ENFILE) {
		atomio_sys->close(pfd);
		nofile_err(rc, path, fd);
		return fd;
	}
	if (fd < 0) {
		atomio_sys->close(pfd);
		st_err(st, "%s: cannot open data file %s for recovery: %s; nothing replayed",
		       st->log_path, path, strerror(-fd));
		return fd == -ELOOP || fd == -ENOENT ? ATOMIO_EIDENTITY : fd;
	}
	struct stat sb2;
	r = atomio_sys->fstat(fd, &sb2);
	atomio_sys->close(pfd);
	if (r < 0 || !S_ISREG(sb2.st_mode) || sb2.st_dev != sb.st_dev || sb2.st_ino != sb.st_ino) {
		atomio_sys->close(fd);
		st_err(st, "%s: data file %s changed while recovery checked it; nothing replayed",
		       st->log_path, path);
		return r < 0 ? r : ATOMIO_EIDENTITY;
	}
	rc->fds[f->id] = fd;
	if (copy) {
		/* Checked before anything is replayed (check_copies), never
		 * written. */
		if (!rc->copy) {
			rc->copy = calloc((rc->hi + 7) / 8, 1);
			rc->csize = calloc(rc->hi, sizeof(*rc->csize));
			rc->isize = calloc(rc->hi, sizeof(*rc->isize));
			if (!rc->copy || !rc->csize || !rc->isize)
				return -ENOMEM;
		}
		rc->copy[f->id / 8] |= (uint8_t)(1u << (f->id % 8));
		rc->csize[f->id] = rc->isize[f->id] = (uint64_t)sb2.st_size;
	}
	return 0;
}

static int apply_record(struct rcv *rc, const struct rec *rec)
{
	atomio *st = rc->st;
	uint64_t data = rec->pos + REC_HDR + (uint64_t)REC_DESC * rec->h.nsegs;
	/* The record was read again: check it again, whole, before writing
	 * any of it.  Someone who ignores the log's lock may have changed it
	 * since the check pass; an unchecked file id would index past fds. */
	int r = check_segs(rc, rec, false);
	if (r < 0)
		return r;
	for (uint32_t i = 0; i < rec->h.nsegs; i++)
		if (rc->fds[rec->segs[i].file] < 0 ||
		    (rec->segs[i].kind == SEG_WRITE ? rec->segs[i].off + rec->segs[i].len
						    : rec->segs[i].off) > rc->maxend[rec->segs[i].file]) {
			st_err(st, "%s: record seq %llu changed during recovery", st->log_path,
			       (unsigned long long)rec->h.seq);
			return ATOMIO_ECORRUPT;
		}
	/* A record that fits the buffer is read once and applied from memory:
	 * one with many small ranges would otherwise cost a log read (with an
	 * O_DIRECT log, a device read) per range.  Bounds: check_segs proved
	 * data_off + len <= data_len, and rec_len covers header, descriptors
	 * and data. */
	bool whole = rec->h.rec_len <= CHUNK;
	const char *src = rc->buf + (data - rec->pos); /* the data section, in memory */
	if (whole) {
		r = area_read(rc, rec->pos, rc->buf, rec->h.rec_len);
		if (r < 0)
			return r;
		/* The bytes applied are the bytes the scan checksummed. */
		if (!codec_rec_sum_ok(rc->buf, &rec->h, st->store_id) ||
		    memcmp(rc->buf + REC_HDR, rec->segs, (size_t)REC_DESC * rec->h.nsegs)) {
			st_err(st, "%s: record seq %llu changed during recovery", st->log_path,
			       (unsigned long long)rec->h.seq);
			return ATOMIO_ECORRUPT;
		}
	}
	if (rec->h.flags & REC_F_LZ4) {
		/* whole: read_record accepts no compressed record over COMP_MAX */
		if (!whole || !codec_rec_lz4_ok(rc->buf, &rec->h, rc->raw)) {
			st_err(st, "%s: record seq %llu changed during recovery", st->log_path,
			       (unsigned long long)rec->h.seq);
			return ATOMIO_ECORRUPT;
		}
		src = rc->raw;
	}
	for (uint32_t i = 0; i < rec->h.nsegs; i++) {
		const struct seg_disk *d = &rec->segs[i];
		int fd = rc->fds[d->file];
		r = 0;
		if (is_copy(rc, d->file))
			continue; /* holds this group already (check_copies) */
		if (d->kind == SEG_SETSIZE) {
			r = sys_ftruncate_full(fd, (off_t)d->off);
		} else if (whole) {
			r = sys_pwrite_full(fd, src + d->data_off, d->len, (off_t)d->off, 0);
		}
		for (uint64_t done = 0; !whole && d->kind == SEG_WRITE && done < d->len && r == 0;) {
			size_t n = d->len - done < CHUNK ? (size_t)(d->len - done) : CHUNK;
			r = area_read(rc, data + d->data_off + done, rc->buf, n);
			if (r == 0)
				r = sys_pwrite_full(fd, rc->buf, n, (off_t)(d->off + done), 0);
			done += n;
		}
		if (r < 0) {
			const struct afile *f = atomic_load(&st->files[d->file]);
			char path[PATH_MAX];
			st_err(st, "%s: replaying record seq %llu into %s: %s", st->log_path,
			       (unsigned long long)rec->h.seq,
			       file_resolve_path(st, f, path, sizeof(path)) == 0 ? path : f->path,
			       strerror(-r));
			return r;
		}
	}
	return 0;
}

static int check_record(struct rcv *rc, const struct rec *rec) { return check_segs(rc, rec, true); }

/* Every checksummed record in the area (codec_area_scan). */
static int scan(struct rcv *rc, struct codec_found **f, size_t *n)
{
	return codec_area_scan(rc->st->store_id, rc->st->sbp->version, rc->st->area_size, area_read_fn, rc,
			       rc->buf, CHUNK, f, n);
}

/* The tables by file id, up to the highest id in the catalog (a record
 * naming any other id is refused before it is used as an index), and the
 * log's identity. */
static int rcv_init(struct rcv *rc)
{
	atomio *st = rc->st;
	rc->buf = aligned_alloc_zero(4096, CHUNK);
	const uint32_t hi = atomic_load(&st->files_hi) ? atomic_load(&st->files_hi) : 1;
	rc->hi = hi;
	rc->fds = malloc(sizeof(int) * hi);
	for (uint32_t i = 0; rc->fds && i < hi; i++)
		rc->fds[i] = -1; /* before any return: rcv_free closes what is open */
	rc->needed = calloc((hi + 7) / 8, 1);
	rc->maxend = calloc(hi, sizeof(*rc->maxend));
	if (!rc->buf || !rc->fds || !rc->needed || !rc->maxend)
		return -ENOMEM;
	struct stat ls;
	int r = atomio_sys->fstat(st->log_fd, &ls);
	if (r < 0)
		return r;
	rc->log_dev = ls.st_dev;
	rc->log_ino = ls.st_ino;
	return 0;
}

static void rcv_free(struct rcv *rc)
{
	if (rc->fds && !rc->borrowed)
		for (uint32_t i = 0; i < rc->hi; i++)
			if (rc->fds[i] >= 0)
				atomio_sys->close(rc->fds[i]);
	free(rc->fds);
	free(rc->needed);
	free(rc->maxend);
	free(rc->buf);
	free(rc->raw);
	free(rc->found);
	free(rc->copy);
	free(rc->csize);
	free(rc->isize);
	free(rc->ev);
	free(rc->rpos);
}

/* A damaged superblock slot: the records say whether it was the newer one
 * (codec_sb_fallback); never reuse an epoch. */
static int damaged_slot(struct rcv *rc)
{
	atomio *st = rc->st;
	int r = scan(rc, &rc->found, &rc->nfound);
	if (r < 0)
		return r;
	rc->scanned = true;
	uint64_t ep, hs;
	int k = codec_sb_fallback(st->sbp, rc->found, rc->nfound, &ep, &hs);
	if (k < 0) {
		st_err(st, "%s: superblock slot %d is damaged, and slot %d (epoch %llu) cannot reach "
			   "newer records in the log; refusing rather than lose acknowledged "
			   "groups; nothing replayed", st->log_path, st->sb_damaged - 1,
		       2 - st->sb_damaged, (unsigned long long)st->sbp->epoch);
		return ATOMIO_ECORRUPT;
	}
	if (k == 1) {
		/* It was the superblock the last open wrote: recover
		 * exactly what it pointed at (head 0, that epoch). */
		st->sbp->epoch = rc->epoch = ep;
		st->sbp->head_off = 0;
		st->sbp->head_seq = hs;
	}
	return 0;
}

/* Valid records of this epoch after the stop point: a torn write that
 * was in flight at a crash leaves them (later writes completed, never
 * acknowledged), and so does damage to an acknowledged record.
 * Recovery cannot tell the two apart, keeps the torn-tail rule, and
 * says so (error buffer, atomio_stats().records_beyond_tail).  Looked
 * for when the stop point holds a record of this epoch that was due
 * (torn or damaged), or a record with a damaged header followed by such a
 * record (codec_stop_suspect), or a superblock slot was damaged. */
static int beyond_tail(struct rcv *rc, uint64_t stop, uint64_t seq_end)
{
	atomio *st = rc->st;
	if (!rc->scanned) {
		int r = codec_stop_suspect(area_read_fn, rc, st->area_size, st->block, rc->epoch, stop, seq_end);
		if (r == 1) {
			r = scan(rc, &rc->found, &rc->nfound);
			rc->scanned = r == 0;
		}
		if (r < 0)
			return r;
	}
	uint64_t lo, hi_seq, beyond = 0;
	if (rc->scanned)
		beyond = codec_count_beyond(rc->found, rc->nfound, rc->epoch, seq_end, &lo, &hi_seq);
	if (beyond && st->sb_damaged) {
		st_err(st, "%s: superblock slot %d is damaged, and %llu valid records (seq %llu..%llu) "
			   "lie beyond what slot %d reaches; refusing rather than lose acknowledged "
			   "groups; nothing replayed", st->log_path, st->sb_damaged - 1,
		       (unsigned long long)beyond, (unsigned long long)lo, (unsigned long long)hi_seq,
		       2 - st->sb_damaged);
		return ATOMIO_ECORRUPT;
	}
	if (beyond)
		st_err(st, "%s: the valid log ends at area offset %llu (seq %llu due), but %llu valid "
			   "records of this epoch follow (seq %llu..%llu): not replayed; if they were "
			   "acknowledged, the log is damaged (a torn write in flight at a crash leaves "
			   "the same)", st->log_path, (unsigned long long)stop, (unsigned long long)seq_end,
		       (unsigned long long)beyond, (unsigned long long)lo, (unsigned long long)hi_seq);
	st->rec_beyond = beyond;
	return 0;
}

/* Open every data file the prefix names (open_checked), and refuse a range
 * its filesystem cannot hold. */
static int open_needed(struct rcv *rc)
{
	atomio *st = rc->st;
	for (uint32_t id = 0; id < rc->hi; id++) {
		if (!(rc->needed[id / 8] & (1u << (id % 8))))
			continue;
		int r = open_checked(rc, atomic_load(&st->files[id]));
		if (r < 0)
			return r;
		/* A range the file's filesystem cannot hold would fail at every
		 * replay (EFBIG): refuse before anything is written.  atomio
		 * never logs one (file_max_size); a file moved to a smaller
		 * filesystem or a crafted record can. */
		uint64_t lim = file_max_size(rc->fds[id]);
		if (rc->maxend[id] > lim) {
			char path[PATH_MAX];
			const struct afile *f = atomic_load(&st->files[id]);
			st_err(st, "%s: a record writes %s up to byte %llu, beyond the %llu its "
				   "filesystem allows; nothing replayed", st->log_path,
			       file_resolve_path(st, f, path, sizeof(path)) == 0 ? path : f->path,
			       (unsigned long long)rc->maxend[id], (unsigned long long)lim);
			return ATOMIO_ECORRUPT;
		}
	}
	return 0;
}

/* --- copies (ATOMIO_ACCEPT_COPIES) ----------------------------------------
 *
 * A data file that is not the registered one (a copy restored in its place,
 * with a copy of the log) is accepted when replaying the prefix would leave
 * it exactly as it is: every byte the prefix decides has, in the file, the
 * value the prefix gives it, and the prefix leaves the file's size as it is.
 * Then the copy holds every live group already, nothing is written to it,
 * and emptying the log loses nothing.  Anything else (a copy that lacks a
 * group, or holds part of one, or another file) is refused as without the
 * flag.
 *
 * The events of the copies are collected in log order, with the size each
 * one leaves (a write past the end, or a size set larger, fills the gap
 * with zeros: that is an event's zero range), then checked from the last
 * one back: a byte's final value is that of the last event that sets it,
 * so each event is compared only where no later one has set the byte
 * already (covered).  A size set smaller drops every byte from there on:
 * the events before it decide nothing there.  Bounded: at most MAX_EVENTS
 * events (else refused), each byte of the file compared at most once. */

#define MAX_EVENTS (1u << 20)

struct cev {
	uint32_t rec;      /* index into rpos */
	uint32_t seg;      /* descriptor index in that record */
	uint32_t file;
	uint16_t kind;
	uint64_t off, len; /* SEG_WRITE: the data's range; SEG_SETSIZE: off = the size */
	uint64_t zlo, zhi; /* zeros filled in, [zlo, zhi) */
};

/* The files whose events collect_events keeps: the copies (check_copies),
 * or those replay_files writes. */
static bool evented(const struct rcv *rc, uint32_t id)
{
	return rc->only ? !skipped(rc, id) : is_copy(rc, id);
}

static int collect_events(struct rcv *rc, const struct rec *rec)
{
	int r = check_segs(rc, rec, false);
	if (r < 0)
		return r;
	if (rc->nrec == rc->rcap && array_grow(&rc->rpos, &rc->rcap, sizeof(*rc->rpos)) < 0)
		return -ENOMEM;
	uint32_t ri = (uint32_t)rc->nrec;
	rc->rpos[rc->nrec++] = (struct rpos){rec->pos, rec->h.seq};
	for (uint32_t i = 0; i < rec->h.nsegs; i++) {
		const struct seg_disk *d = &rec->segs[i];
		if (!evented(rc, d->file))
			continue;
		if (rc->nev == MAX_EVENTS && !rc->only)
			return -E2BIG; /* (replay_files: bounded by the live records) */
		if (rc->nev == rc->evcap && array_grow(&rc->ev, &rc->evcap, sizeof(*rc->ev)) < 0)
			return -ENOMEM;
		struct cev e = {.rec = ri, .seg = i, .file = d->file, .kind = d->kind, .off = d->off};
		if (d->kind == SEG_WRITE)
			e.len = d->len;
		if (!rc->csize) {
			/* replay_files: no zeros (the sizes are not followed) */
			rc->ev[rc->nev++] = e;
			continue;
		}
		uint64_t *size = &rc->csize[d->file];
		if (d->kind == SEG_WRITE) {
			if (d->len && d->off > *size) {
				e.zlo = *size;
				e.zhi = d->off;
			}
			if (d->len && d->off + d->len > *size)
				*size = d->off + d->len;
		} else {
			if (d->off > *size) {
				e.zlo = *size;
				e.zhi = d->off;
			}
			*size = d->off;
		}
		rc->ev[rc->nev++] = e;
	}
	return 0;
}

/* Disjoint ranges [lo, hi), sorted. */
struct ivs {
	struct iv {
		uint64_t lo, hi;
	} *v;
	size_t n, cap;
};

/* The first range that ends after at. */
static size_t ivs_find(const struct ivs *s, uint64_t at)
{
	size_t a = 0, b = s->n;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (s->v[m].hi <= at)
			a = m + 1;
		else
			b = m;
	}
	return a;
}

static int ivs_add(struct ivs *s, uint64_t lo, uint64_t hi)
{
	if (lo >= hi)
		return 0;
	size_t i = lo ? ivs_find(s, lo - 1) : 0; /* the first that ends at lo or later */
	size_t j = i;
	while (j < s->n && s->v[j].lo <= hi) {
		if (s->v[j].lo < lo)
			lo = s->v[j].lo;
		if (s->v[j].hi > hi)
			hi = s->v[j].hi;
		j++;
	}
	if (j == i) { /* no overlap: insert at i */
		if (s->n == s->cap && array_grow(&s->v, &s->cap, sizeof(*s->v)) < 0)
			return -ENOMEM;
		memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(*s->v));
		s->n++;
	} else if (j > i + 1) {
		memmove(&s->v[i + 1], &s->v[j], (s->n - j) * sizeof(*s->v));
		s->n -= j - i - 1;
	}
	s->v[i] = (struct iv){lo, hi};
	return 0;
}

struct cmp {
	struct rcv *rc;
	/* what is done with each range no later event covers: compared
	 * (cmp_range), or written (write_range) */
	int (*range)(struct cmp *c, uint64_t lo, uint64_t hi, bool zero, uint64_t data_off);
	int fd;
	char *fbuf, *lbuf;   /* CHUNK bytes each: the file's, the log's */
	uint64_t bad;        /* the first byte found different */
	bool differs;
	const char *src;     /* the record's data in memory (NULL: read from the log) */
	uint64_t data;       /* else: the area offset of the record's data section */
};

/* Compare [lo, hi) of the file with the event's bytes: its data (data_off:
 * where lo lies in the record's data section) or, with zero, zeros. */
static int cmp_range(struct cmp *c, uint64_t lo, uint64_t hi, bool zero, uint64_t data_off)
{
	while (lo < hi && !c->differs) {
		size_t n = hi - lo < CHUNK ? (size_t)(hi - lo) : CHUNK;
		ssize_t got = sys_pread_full(c->fd, c->fbuf, n, (off_t)lo);
		if (got < 0)
			return (int)got;
		const char *want = NULL;
		if (zero) {
			memset(c->lbuf, 0, n);
			want = c->lbuf;
		} else if (c->src) {
			want = c->src + data_off;
		} else {
			int r = area_read(c->rc, c->data + data_off, c->lbuf, n);
			if (r < 0)
				return r;
			want = c->lbuf;
		}
		if ((size_t)got < n || memcmp(c->fbuf, want, n)) {
			size_t k = 0;
			while (k < (size_t)got && c->fbuf[k] == want[k])
				k++;
			c->bad = lo + k;
			c->differs = true;
		}
		lo += n;
		data_off += n;
	}
	return 0;
}

/* Write [lo, hi) of the event's data (data_off: where lo lies in the
 * record's data section) through c->fd (replay_files).  Zeros are not
 * written: collect_events leaves none in its events. */
static int write_range(struct cmp *c, uint64_t lo, uint64_t hi, bool zero, uint64_t data_off)
{
	while (lo < hi && !zero) {
		size_t n = hi - lo < CHUNK ? (size_t)(hi - lo) : CHUNK;
		const char *src = c->src ? c->src + data_off : c->lbuf;
		int r = c->src ? 0 : area_read(c->rc, c->data + data_off, c->lbuf, n);
		if (r == 0)
			r = sys_pwrite_full(c->fd, src, n, (off_t)lo, 0);
		if (r < 0)
			return r;
		lo += n;
		data_off += n;
	}
	return 0;
}

/* Hand c->range the parts of [lo, hi) (below end) that no later event covers. */
static int cmp_uncovered(struct cmp *c, const struct ivs *cov, uint64_t lo, uint64_t hi, uint64_t end,
			 bool zero, uint64_t data_off)
{
	if (hi > end)
		hi = end;
	uint64_t at = lo;
	size_t i = ivs_find(cov, at);
	while (at < hi && !c->differs) {
		if (i < cov->n && cov->v[i].lo <= at) {
			at = cov->v[i++].hi;
			continue;
		}
		uint64_t stop = i < cov->n && cov->v[i].lo < hi ? cov->v[i].lo : hi;
		int r = c->range(c, at, stop, zero, data_off + (at - lo));
		if (r < 0)
			return r;
		at = stop;
	}
	return 0;
}

/* File id's events from the last back: each part of each below end that no
 * later one covers is handed to c->range, so each byte at most once, with
 * the value the events leave it (until c->differs).  0 or < 0. */
static int events_back(struct rcv *rc, uint32_t id, struct cmp *c, uint64_t end)
{
	atomio *st = rc->st;
	struct ivs cov = {0};
	struct rec rec = {.segs = NULL};
	uint32_t loaded = UINT32_MAX;
	int r = 0;
	for (size_t k = rc->nev; k-- > 0 && r == 0 && !c->differs;) {
		const struct cev *e = &rc->ev[k];
		if (e->file != id)
			continue;
		if (e->kind == SEG_WRITE && e->len && e->rec != loaded) {
			free(rec.segs);
			rec.segs = NULL;
			r = read_record(rc, rc->rpos[e->rec].pos, rc->rpos[e->rec].seq, &rec);
			if (r == 0) {
				st_err(st, "%s: record seq %llu changed during recovery", st->log_path,
				       (unsigned long long)rc->rpos[e->rec].seq);
				r = ATOMIO_ECORRUPT;
			}
			if (r < 0)
				break;
			r = 0;
			loaded = e->rec;
			/* A record that fits the buffer is in it whole (read_record
			 * checked its checksum there), its data decompressed in raw
			 * if compressed; a longer one is read from the log. */
			c->data = rec.pos + REC_HDR + (uint64_t)REC_DESC * rec.h.nsegs;
			c->src = rec.h.flags & REC_F_LZ4 ? rc->raw
				 : rec.h.rec_len <= CHUNK ? rc->buf + (c->data - rec.pos)
							  : NULL;
		}
		if (e->kind == SEG_WRITE) {
			if (e->len)
				r = cmp_uncovered(c, &cov, e->off, e->off + e->len, end, false,
						  rec.segs[e->seg].data_off);
			if (r == 0)
				r = ivs_add(&cov, e->off, e->off + e->len);
		} else {
			r = ivs_add(&cov, e->off, UINT64_MAX); /* dropped before what follows */
		}
		if (r == 0 && !c->differs && e->zlo < e->zhi)
			r = cmp_uncovered(c, &cov, e->zlo, e->zhi, end, true, 0);
		if (r == 0)
			r = ivs_add(&cov, e->zlo, e->zhi);
	}
	free(rec.segs);
	free(cov.v);
	return r;
}

/* Is copy id left exactly as it is by the events (from the last back)?
 * 0 and c->differs set or not, or < 0. */
static int check_copy(struct rcv *rc, uint32_t id, struct cmp *c)
{
	const uint64_t end = rc->isize[id];
	if (rc->csize[id] != end) {
		c->differs = true;
		c->bad = rc->csize[id] < end ? rc->csize[id] : end;
		return 0;
	}
	c->fd = rc->fds[id];
	return events_back(rc, id, c, end);
}

/* Every copy (ATOMIO_ACCEPT_COPIES) must be left as it is by the prefix of
 * count records ending before seq_end; else ATOMIO_EIDENTITY, nothing
 * replayed. */
static int check_copies(struct rcv *rc, uint64_t count, uint64_t seq_end)
{
	atomio *st = rc->st;
	uint64_t c2, s2, stop;
	int r = walk(rc, collect_events, &c2, &s2, &stop);
	if (r == 0 && (c2 != count || s2 != seq_end))
		r = ATOMIO_ECORRUPT; /* the log changed under us although we hold its lock */
	struct cmp c = {.rc = rc, .range = cmp_range, .fbuf = malloc(CHUNK), .lbuf = malloc(CHUNK)};
	if (r == 0 && (!c.fbuf || !c.lbuf))
		r = -ENOMEM;
	for (uint32_t id = 0; r == 0 && id < rc->hi; id++) {
		if (!is_copy(rc, id))
			continue;
		c.differs = false;
		r = check_copy(rc, id, &c);
		if (r < 0 || !c.differs)
			continue;
		const struct afile *f = atomic_load(&st->files[id]);
		char path[PATH_MAX];
		st_err(st, "%s: data file %s was replaced since it was registered, and the log's live "
			   "groups are not all in it (replaying would change it from byte %llu on); "
			   "nothing replayed; check it and reopen with ATOMIO_FORCE_PATHS (atomio "
			   "recover --force-paths) to replay into it",
		       st->log_path, file_resolve_path(st, f, path, sizeof(path)) == 0 ? path : f->path,
		       (unsigned long long)c.bad);
		r = ATOMIO_EIDENTITY;
	}
	if (r == -E2BIG) {
		st_err(st, "%s: a data file was replaced since it was registered, and the log holds "
			   "more than %u ranges of it to check against it; nothing replayed",
		       st->log_path, MAX_EVENTS);
		r = ATOMIO_EIDENTITY;
	}
	free(c.fbuf);
	free(c.lbuf);
	return r;
}

/* The directory of copy id, synced after the copy (see recover()). */
static int copy_dir_sync(struct rcv *rc, uint32_t id)
{
	atomio *st = rc->st;
	const struct afile *f = atomic_load(&st->files[id]);
	char path[PATH_MAX];
	int r = file_resolve_path(st, f, path, sizeof(path));
	char *dir = r < 0 ? NULL : dir_of(path);
	r = r < 0 ? r : dir ? sys_fsync_dir(dir) : -ENOMEM;
	if (r < 0)
		st_err(st, "%s: syncing the directory of %s, a copy accepted in place of the registered "
			   "file: %s; nothing given up from the log", st->log_path, dir ? dir : f->path,
		       strerror(-r));
	free(dir);
	return r;
}

int recover(atomio *st, uint64_t *next_seq)
{
	struct rcv rc = {.st = st, .epoch = st->sbp->epoch};
	int r = rcv_init(&rc);
	if (r < 0)
		goto out;
	if (st->sb_damaged) {
		r = damaged_slot(&rc);
		if (r < 0)
			goto out;
	}
	uint64_t count = 0, seq_end = st->sbp->head_seq, stop = st->sbp->head_off;
	r = walk(&rc, check_record, &count, &seq_end, &stop);
	if (r < 0)
		goto out;
	r = beyond_tail(&rc, stop, seq_end);
	if (r < 0)
		goto out;
	if (count) {
		r = open_needed(&rc);
		if (r < 0)
			goto out;
		if (rc.copy) {
			r = check_copies(&rc, count, seq_end);
			if (r < 0)
				goto out;
		}
		uint64_t c2, s2, st2;
		r = walk(&rc, apply_record, &c2, &s2, &st2);
		if (r < 0)
			goto out;
		if (c2 != count || s2 != seq_end) {
			/* The log changed under us although we hold its lock. */
			r = ATOMIO_ECORRUPT;
			goto out;
		}
		/* fsync (sizes may have changed): the replayed data must be
		 * durable before the superblock gives up the records.  A copy
		 * (ATOMIO_ACCEPT_COPIES) was not written, but it holds the live
		 * groups only in bytes nobody may have synced yet (cp does not),
		 * under a name its directory may not have made durable (a copy
		 * renamed into place): a power cut after the log is emptied
		 * could bring back the old file, or none, without the groups.
		 * So the copy is synced too, then its directory (copy_dir_sync). */
		for (uint32_t id = 0; id < rc.hi; id++) {
			if (rc.fds[id] < 0)
				continue;
			r = sys_fsync_full(rc.fds[id]);
			if (r == 0 && is_copy(&rc, id)) {
				r = copy_dir_sync(&rc, id); /* names the directory */
				if (r < 0)
					goto out;
			}
			if (r < 0) {
				char path[PATH_MAX];
				const struct afile *f = atomic_load(&st->files[id]);
				st_err(st, "%s: syncing replayed file %s: %s", st->log_path,
				       file_resolve_path(st, f, path, sizeof(path)) == 0 ? path
											  : f->path,
				       strerror(-r));
				goto out;
			}
		}
	}
	/* New epoch, empty log, durably, before any new record: stale records
	 * of the old epoch can never be mistaken for new ones. */
	r = log_write_sb(st, 0, seq_end, st->sbp->epoch + 1);
	if (r < 0)
		goto out;
	*next_seq = seq_end;
	st->rec_groups = count;
out:
	rcv_free(&rc);
	return r;
}

/* --- one record, in a live store --------------------------------------------- */

int replay_record(atomio *st, uint64_t pos, uint64_t seq)
{
	/* The same checks and the same writes as recovery's (one checker),
	 * on one record, through the descriptors the store has (or opens:
	 * file_get_any checks their identity). */
	struct rcv rc = {.st = st, .epoch = st->rec_epoch, .borrowed = true};
	struct rec rec = {.segs = NULL};
	cat_mutex_lock(st);
	int r = cat_reload_shared(st); /* its files may be newer than this process's catalog */
	cat_mutex_unlock(st);
	if (r == 0)
		r = rcv_init(&rc);
	if (r == 0) {
		r = read_record(&rc, pos, seq, &rec);
		if (r == 0 || (r == 1 && rec.h.type != REC_TYPE_GROUP)) {
			st_err(st, "%s: the record of seq %llu at area offset %llu, logged by a process that "
				   "died, is not there whole", st->log_path, (unsigned long long)seq,
			       (unsigned long long)pos);
			r = ATOMIO_ECORRUPT;
		}
	}
	if (r == 1)
		r = check_segs(&rc, &rec, true);
	fd_use_begin(st);
	for (uint32_t id = 0; r == 0 && id < rc.hi; id++) {
		if (!(rc.needed[id / 8] & (1u << (id % 8))))
			continue;
		struct afile *f = file_get_any(st, id, &r);
		if (f)
			rc.fds[id] = f->hfd;
	}
	if (r == 0)
		r = apply_record(&rc, &rec);
	fd_use_end(st);
	free(rec.segs);
	rcv_free(&rc);
	return r;
}

/* --- some files' live records, in a live store ---------------------------------- */

/* Write the bytes the live records leave in the files in only (a bitmap by
 * id, up to the highest id the store knew when the caller built it) again,
 * through this process's home descriptors: a full checkpoint about to sync a
 * file through a descriptor opened after home writes it must cover
 * (checkpoint.c, TRUSTED DESCRIPTORS).  Log role held, every batch home: no
 * home write runs meanwhile, and the page cache holds, for each byte a live
 * record writes, the last such record's value.
 *
 * Only that value is written, each byte once (events_back, from the last
 * record back), never the records one after another in log order: that
 * would put an older record's bytes back for a while, until the newer one
 * is written again -- and a process killed in between (or a reader
 * meanwhile) would leave (or see) them; the next checkpoint, through a
 * trusted descriptor, would then make them durable and give up the records
 * (t_crash, procs).  Written this way the file's bytes never change, so the
 * replay may stop anywhere.  Not written: the zeros a size set or a write
 * past the end left (no home write put data there), nor the size itself
 * (sync_one's fsync carries it).  Memory: one event per live range of the
 * files written.  0 or an error. */
int replay_files(atomio *st, const uint8_t *only)
{
	struct rcv rc = {.st = st, .epoch = st->rec_epoch, .borrowed = true, .only = only};
	shm_lock(st);
	rc.head_off = st->S->head;
	rc.head_seq = st->S->head_seq;
	uint64_t used = st->S->used, next_seq = st->S->next_seq;
	shm_unlock(st);
	if (!used)
		return 0; /* no live record */
	int r = rcv_init(&rc);
	uint64_t count = 0, seq_end = 0, stop = 0, c2 = 0, s2 = 0;
	if (r == 0)
		r = walk(&rc, check_record, &count, &seq_end, &stop);
	if (r == 0 && seq_end != next_seq) {
		/* cannot happen (every batch home, its record or pad written):
		 * a newer record not read could hold a byte's last value */
		st_err(st, "%s: the live records end at seq %llu, the log at %llu", st->log_path,
		       (unsigned long long)seq_end, (unsigned long long)next_seq);
		r = ATOMIO_ECORRUPT;
	}
	if (r == 0)
		r = walk(&rc, collect_events, &c2, &s2, &stop);
	if (r == 0 && (c2 != count || s2 != seq_end))
		r = ATOMIO_ECORRUPT; /* the log changed under us although we hold its role */
	struct cmp c = {.rc = &rc, .range = write_range, .lbuf = malloc(CHUNK)};
	if (r == 0 && !c.lbuf)
		r = -ENOMEM;
	for (uint32_t id = 0; r == 0 && id < rc.hi; id++) {
		if (skipped(&rc, id) || !(rc.needed[id / 8] & (1u << (id % 8))))
			continue;
		struct afile *f = file_get_any(st, id, &r);
		if (!f)
			break;
		/* An O_DIRECT home descriptor takes only aligned writes: the
		 * same inode reopened buffered (a write through it is reported
		 * to hfd's sync all the same: hfd was open before it). */
		int twin = f->direct_home ? proc_reopen(f->hfd, O_RDWR | O_CLOEXEC) : -1;
		if (f->direct_home && twin < 0) {
			r = twin;
			break;
		}
		c.fd = twin >= 0 ? twin : f->hfd;
		r = events_back(&rc, id, &c, UINT64_MAX);
		if (twin >= 0)
			atomio_sys->close(twin);
	}
	free(c.lbuf);
	rcv_free(&rc);
	return r;
}
