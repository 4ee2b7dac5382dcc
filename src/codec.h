/*
 * codec.h: the log format's rules (format.h) as pure functions on bytes: no
 * store, no lock, no system call.  Recovery, the catalog, the commit path,
 * `atomio dump`, the tests' log patcher and the fuzzer all check and build
 * the format through these, so there is one set of rules.
 *
 * Checks return NULL (or 0) when the bytes are valid, else a short reason in
 * words ("checksum mismatch (torn or damaged)") for a person to read.
 */
#ifndef ATOMIO_CODEC_H
#define ATOMIO_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* One range of a group as kept in memory until commit: the source of a
 * record's descriptor and data. */
struct seg {
	uint32_t file;
	uint16_t kind;  /* SEG_WRITE / SEG_SETSIZE */
	uint64_t off;   /* file offset or new size */
	uint64_t len;
	const void *src; /* data (tx arena or a caller's buffer during atomio_pwrite) */
};

/* --- checksums ------------------------------------------------------------ */

/* fmt_csum (format.h) over bytes read piecewise: the checksum of [0,len) of
 * something read through rd (0 or a negative errno) into buf (bufsz bytes),
 * with the 8 bytes at csum_off taken as zero.  0 with *sum set, or rd's
 * error.  When len <= bufsz, buf holds the whole object afterwards (its
 * checksum field zeroed). */
typedef int (*codec_read_fn)(void *ctx, uint64_t off, void *buf, size_t len);
int codec_csum_read(uint64_t seed, uint64_t len, size_t csum_off, codec_read_fn rd, void *ctx,
		    char *buf, size_t bufsz, uint64_t *sum);

/* --- superblock ------------------------------------------------------------- */

/* Is this slot a valid superblock of a log file_size bytes long?  0, or
 * ATOMIO_ENOTLOG (no magic), ATOMIO_EVERSION (byte order or version) or
 * ATOMIO_ECORRUPT; *why (may be NULL) says what is wrong. */
int codec_sb_check(const struct sb_disk *sb, uint64_t file_size, const char **why);
/* The reason codec_sb_check gives for a sound superblock whose record area
 * ends past the end of the file (compare the pointer). */
extern const char codec_sb_short[];
void codec_sb_seal(struct sb_disk *sb);
/* Which slot is current, given which are valid: 0 or 1 (the higher
 * generation), -1 none valid, -2 both valid but of two stores. */
int codec_sb_current(const struct sb_disk *s0, bool ok0, const struct sb_disk *s1, bool ok1);
/* When exactly one slot is valid: the other one if it was written once (not
 * all zeros) -- damaged, and perhaps the newer (codec_sb_fallback) -- else
 * -1. */
int codec_sb_damaged(const struct sb_disk *s0, bool ok0, const struct sb_disk *s1, bool ok1);

/* --- catalog ---------------------------------------------------------------- */

/* The header of a catalog copy of a store, before its checksum is checked.
 * NULL when plausible. */
const char *codec_cat_hdr_problem(const struct cat_hdr_disk *h, uint64_t store_id, uint64_t cat_size);
/* Is the catalog copy at copy valid: its header plausible
 * (codec_cat_hdr_problem) and its checksum right over its used bytes?  copy
 * holds at least those (cat_size bytes always do).  NULL, or why not.  (A
 * copy read piecewise: codec_cat_hdr_problem, then codec_csum_read.) */
const char *codec_cat_problem(const void *copy, uint64_t store_id, uint64_t cat_size);
/* Which copy is current, given which are valid: the higher generation
 * (copy 0 on a tie), -1 none. */
int codec_cat_current(const struct cat_hdr_disk h[2], const bool ok[2]);
/* When exactly one copy is valid: the other one if it was written once (our
 * magic) -- damaged, and perhaps the newer, holding registrations the valid
 * one lacks -- else -1. */
int codec_cat_damaged(const struct cat_hdr_disk h[2], const bool ok[2]);
/* Its entry header size (format.h: 0 reads as the first layout's), or 0
 * when unknown. */
uint32_t codec_cat_entry_hdr(const struct cat_hdr_disk *h);
/* Parse the entry at *pos of the catalog bytes cat[0, used) whose entries
 * have headers of eh bytes: fills *e (zero-extended) and *path (into cat,
 * e->path_len bytes, not NUL-terminated), moves *pos to the next entry.
 * NULL, or why the entry is malformed. */
const char *codec_cat_entry(const char *cat, uint64_t used, uint32_t eh, uint64_t *pos,
			    struct cat_entry_disk *e, const char **path);
/* The path rules (docs/SECURITY.md) for a catalog entry's path (len bytes,
 * flags: CAT_F_RELATIVE): absolute, or relative to the log's directory as
 * the flag says; no empty, "." or ".." component; shorter than PATH_MAX.
 * NULL, or what is wrong. */
const char *codec_path_problem(const char *path, size_t len, uint16_t flags);
/* A data file's identity (format.h, CATALOG): as a catalog entry records it
 * at registration, or as the file is now. */
struct fid {
	uint64_t dev, ino, fsid;
	uint64_t btime_ns; /* birth time, when flags & CAT_ID_BTIME */
	uint32_t flags;
};
/* The identity catalog entry e records. */
struct fid codec_cat_entry_fid(const struct cat_entry_disk *e);
/* Is the file identified now as now the file recorded?  Recovery's identity
 * rule (and atomio dump's): the same inode on the same filesystem, born at
 * the same time where both birth times are known. */
bool codec_fid_same(const struct fid *recorded, const struct fid *now);
/* Append an entry at pos of buf (cap bytes): the next position, 0 when full. */
size_t codec_cat_put(char *buf, size_t cap, size_t pos, const struct cat_entry_disk *e, const char *path);
/* Write the header of the catalog buf[0, used) holding count entries, with
 * its checksum. */
void codec_cat_seal(char *buf, uint32_t count, uint64_t store_id, uint64_t gen, uint64_t used);

/* --- records ---------------------------------------------------------------- */

/* What a record at an area offset must be to be the next live one. */
struct rec_expect {
	uint64_t seq, epoch; /* the seq due, the superblock's epoch */
	uint64_t area_size;
	uint32_t version;    /* the superblock's format version */
};
enum rec_verdict {
	REC_OK,
	REC_NO_RECORD, /* no record header fits at this offset, or no magic */
	REC_STALE,     /* a record of an earlier open (epoch) */
	REC_WRONG_SEQ, /* another seq than the one due */
	REC_BAD_FIELDS /* impossible type, flags, lengths or reserved fields */
};
/* Check a record header at area offset pos (not its checksum). */
enum rec_verdict codec_rec_check(const struct rec_hdr_disk *h, uint64_t pos, const struct rec_expect *x);
/* Does a record header fit at area offset pos at all? */
bool codec_rec_fits(uint64_t pos, uint64_t area_size);
/* The record's LZ4 data section (rec holds the whole record) decompressed
 * into raw (COMP_MAX bytes): true when it gives exactly raw_len bytes. */
bool codec_rec_lz4_ok(const char *rec, const struct rec_hdr_disk *h, char *raw);
/* Descriptor d of a checksummed record whose raw data is raw_len bytes;
 * file_known: the catalog registers d->file.  NULL, or why recovery must
 * refuse the log. */
const char *codec_seg_problem(const struct seg_disk *d, uint64_t raw_len, bool file_known);
/* Area offset of the record after the one at pos. */
uint64_t codec_rec_next(const struct rec_hdr_disk *h, uint64_t pos, uint32_t block);
/* Is the checksum of the record rec (h: its header; codec_rec_sum_len bytes
 * in memory) right? */
bool codec_rec_sum_ok(const void *rec, const struct rec_hdr_disk *h, uint64_t store_id);
/* The bytes a record's checksum covers: rec_len, but the header alone for a
 * pad (format.h, PAD RECORD). */
uint64_t codec_rec_sum_len(const struct rec_hdr_disk *h);
/* The seqs a valid record stands for: 1, or a pad's count. */
uint64_t codec_rec_seqs(const struct rec_hdr_disk *h);
/* A pad record's header (REC_HDR bytes at buf), sealed: it stands for count
 * seqs from seq and covers len bytes (a multiple of the log block). */
void codec_rec_pad_build(void *buf, uint64_t seq, uint32_t count, uint64_t epoch, uint64_t len,
			 uint64_t store_id);

/* --- whole-area scan (damage that the valid-prefix walk cannot see) ---------

 * The walk from the head stops at the first offset with no valid record.  A
 * damaged superblock slot or a damaged record in the middle can hide valid,
 * acknowledged records behind that point.  These look at every checksummed
 * record of the store anywhere in the area, whatever its epoch and seq. */
struct codec_found {
	uint64_t pos, seq, epoch;
};
/* Every record in the area [0, area_size) -- read through rd at area
 * offsets -- whose header is sound and whose checksum (seed store_id) is
 * right: *out (malloc'd, *n of them, in area order).  buf: bufsz bytes, a
 * multiple of 8, at least 64 KiB.  0, -ENOMEM or rd's error. */
int codec_area_scan(uint64_t store_id, uint32_t version, uint64_t area_size, codec_read_fn rd,
		    void *ctx, char *buf, size_t bufsz, struct codec_found **out, size_t *n);
/* The current superblock sb is the only valid slot, and the other slot was
 * written once (our magic) but is damaged.  Was the damaged one newer?
 * Records of a later epoch than sb's say so: the damaged slot was the
 * superblock an open wrote (epoch sb->epoch + 1, head 0) before them.  0: no
 * such records, sb stands; 1: exactly that case, with *head_seq the seq of
 * that epoch's record at area offset 0 (recover from there, epoch + 1);
 * ATOMIO_ECORRUPT: later records that this cannot account for. */
int codec_sb_fallback(const struct sb_disk *sb, const struct codec_found *f, size_t n,
		      uint64_t *epoch, uint64_t *head_seq);
/* Should the area be scanned for valid records after the walk's end?  The
 * walk from the head stopped at area offset stop expecting seq_end (and,
 * stop being a block boundary other than 0, found nothing at offset 0
 * either).  Yes (1) when the header there is a record of this epoch that was
 * due or later (torn or damaged); or when it is written but not that --
 * stale, or a record whose own magic, epoch or seq is damaged -- and the
 * header where its length says the next record starts (packed after it, at
 * the next block, or at offset 0 after a wrap) is one of this epoch due or
 * later.  A healthy log holds neither after its end; a torn write in flight
 * at a crash, or damage, does.  No (0) otherwise, or rd's error.  rd reads
 * area offsets. */
int codec_stop_suspect(codec_read_fn rd, void *ctx, uint64_t area_size, uint32_t block, uint64_t epoch,
		       uint64_t stop, uint64_t seq_end);
/* How many found records of epoch lie at or beyond seq_end (the valid log's
 * end): valid records after the stop point.  *lo, *hi: their seq range. */
uint64_t codec_count_beyond(const struct codec_found *f, size_t n, uint64_t epoch, uint64_t seq_end,
			    uint64_t *lo, uint64_t *hi);

/* The record of one group, in memory: its ranges, and its data stored
 * compressed (cdata, clen bytes) or raw (data_len bytes from the ranges). */
struct rec_src {
	const struct seg *segs;
	uint32_t nsegs;
	uint64_t data_len, rec_len;
	const void *cdata;
	uint64_t clen;
};
/* Lay the record out at buf (rec_len bytes), sealed with its checksum. */
void codec_rec_build(char *buf, const struct rec_src *r, uint64_t seq, uint64_t epoch, bool last,
		     uint64_t store_id);
/* LZ4 the data, if that makes the record shorter and no longer than
 * COMP_MAX: true with *cdata (malloc'd), *clen and the new *rec_len; false
 * leaves the record raw (also when out of memory). */
bool codec_rec_compress(const struct rec_src *r, void **cdata, uint64_t *clen, uint64_t *rec_len);

#endif
