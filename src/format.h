/*
 * format.h: the atomio log format, version 3.  Mirrored in docs/FORMAT.md;
 * a change here is a change there.
 *
 * Version 2 added compressed records (flag LZ4 below); version 3 added pad
 * records (type 2 below), which a store shared by several processes writes
 * where a process that died had reserved log space.  This library reads
 * logs of versions 1 to 3 and writes version 3: the superblock written when
 * a store is opened (after recovery, before any new record) carries 3, so a
 * library that reads only an older version refuses the log (format version)
 * rather than taking a compressed or pad record for the end of the log.
 *
 * All integers are little-endian.  Checksums are XXH3-64 (libxxhash).
 *
 * LOG FILE LAYOUT
 *
 *   offset 0            superblock slot 0   (SB_SLOT bytes = 4096)
 *   offset 4096         superblock slot 1
 *   offset 8192         catalog copy 0      (catalog_size bytes)
 *   8192+catalog_size   catalog copy 1
 *   area_off            record area         (area_size bytes, block-aligned)
 *
 *   area_off and area_size are multiples of the log block (the larger of the
 *   device's physical sector, the file's direct-I/O alignment and 512; 4096
 *   when the sector size cannot be read).  Every log write starts on a block
 *   boundary and is a whole number of blocks, so a write never shares a
 *   physical sector with durable data written earlier: a torn write can only
 *   damage itself (no read-modify-write of an acknowledged record).
 *
 *   Record writes should be overwrites of written blocks: an O_DIRECT +
 *   RWF_DSYNC write then needs no metadata journal commit and costs one
 *   device wait.  A new log is allocated whole (fallocate), and its area
 *   written with zeros before it is renamed into place: by the device
 *   (FALLOC_FL_WRITE_ZEROES) where it can, else by writes, up to its first
 *   GiB (all of a default log).  What a larger log has beyond is written
 *   with zeros ahead of the records, a unit (1/16 of the area, at most 4
 *   MiB) at a time, by the store's checkpointer thread (the library's lazy
 *   zeroing, once in the log's life).  Where fallocate is refused the whole
 *   file is written at creation.  Blocks never written read as zeros, which
 *   no valid record is, so the format does not depend on either.
 *
 * SUPERBLOCK (in each slot; SB_SIZE = 256 bytes used, rest zero)
 *
 *    0  u8[8]  magic "ATOMIOLG"
 *    8  u32    byte-order mark 0x01020304 (reads 0x04030201 on a foreign-endian host)
 *   12  u32    format version (3; 1 and 2 are read too: 1 has no compressed
 *              record, neither has a pad record)
 *   16  u64    store id: random at creation; seeds every record and catalog checksum,
 *              so that bytes of another store (or an earlier log at this path) never validate
 *   24  u64    generation: +1 on every superblock write; the valid slot with the
 *              highest generation is current.  Generation g is written to slot g % 2.
 *   32  u64    epoch: +1 every time the store is opened; records carry it
 *   40  u64    head offset (relative to area_off) of the first live record
 *   48  u64    head sequence number: the seq the record at the head must carry
 *   56  u64    area_off
 *   64  u64    area_size
 *   72  u32    log block size
 *   76  u32    flags (0)
 *   80  u64    catalog_off (of copy 0)
 *   88  u64    catalog_size (of each copy)
 *   96  u64    creation time, ns since the epoch (informational)
 *  104  u8[144] reserved, zero
 *  248  u64    checksum: XXH3-64 of bytes [0,248) with seed SB_SEED
 *
 *   A slot is valid when magic, byte-order mark, version and checksum are
 *   right, the geometry is consistent (area inside the file, aligned) and
 *   the generation is below 2^62 (one that could wrap to 0 would lose to the
 *   stale slot).
 *
 * CATALOG (each copy; registered data files)
 *
 *    0  u32    magic "ACAT"
 *    4  u32    entry count
 *    8  u64    store id
 *   16  u64    generation (the valid copy with the highest generation is current;
 *              generation g is written to copy g % 2; valid only below 2^62)
 *   24  u64    used bytes (header + entries), <= catalog_size
 *   32  u32    entry header size: 48 (0 in catalogs written before the birth
 *              time was recorded: 32-byte entry headers, birth time unknown)
 *   36  u8[20] reserved, zero
 *   56  u64    checksum: XXH3-64 of bytes [0,used) with this field zero, seed store id
 *   64  entries, each 8-aligned:
 *        0  u32  file id (unique in the catalog, < MAX_FILES)
 *        4  u16  path length (1..PATH_MAX-1, no NUL inside)
 *        6  u16  flags: bit 0 = path is relative to the log's directory
 *        8  u64  st_dev at registration
 *       16  u64  st_ino at registration
 *       24  u64  filesystem id (statfs f_fsid) at registration
 *       32  u64  birth time (statx btime) at registration, ns since the epoch
 *       40  u32  identity flags: bit 0 = the birth time is known
 *       44  u32  reserved, zero
 *       48  path bytes, zero-padded to 8
 *
 *   Identity: recovery writes into a file only if it has the recorded inode
 *   and device (or filesystem id), and, when both birth times are known, the
 *   recorded birth time: an inode number freed and reused for a new file
 *   (ext4 reuses them at once) is a different file.
 *
 * RECORD (one committed group, or a pad) at an 8-aligned offset in the record area
 *
 *    0  u32    magic "AREC"
 *    4  u16    type: 1 = group, 2 = pad (version 3; see PAD RECORD below)
 *    6  u16    flags: bit 0 = LAST: the record ends a log write; the next record
 *              starts at the next block boundary (else at this record's end);
 *              bit 1 = LZ4: the data section is one LZ4 block (the LZ4 block
 *              format, no frame) that decompresses to exactly raw_len bytes
 *              (version 2 only; the writer sets it only when that makes the
 *              record shorter)
 *    8  u64    seq: head seq for the first record after the head, +1 for each next
 *   16  u64    epoch: equals the superblock's epoch
 *   24  u64    rec_len: bytes of this record, header included, multiple of 8
 *   32  u64    data_len: bytes of the data section
 *   40  u32    nsegs: number of segment descriptors (1..MAX_SEGMENTS)
 *   44  u32    reserved, zero
 *   48  u64    raw_len: data bytes before compression: = data_len, or with LZ4
 *              data_len < raw_len <= COMP_MAX (1 MiB) and rec_len <= COMP_MAX,
 *              so that recovery decompresses a record in bounded memory
 *   56  u64    checksum: XXH3-64 of bytes [0,rec_len) with this field zero,
 *              seed = store id
 *   64  nsegs segment descriptors of 32 bytes:
 *        0  u32  file id (present in the catalog)
 *        4  u16  kind: 1 = write, 2 = set size (truncate or extend)
 *        6  u16  reserved, zero
 *        8  u64  file offset (write) or new file size (set size), < 2^62
 *       16  u64  length of the write's data (0 for set size); offset + length <= 2^62
 *       24  u64  offset of the data inside the (decompressed) data section;
 *                + length <= raw_len
 *   64 + 32*nsegs: data section (data_len bytes as stored), then zero padding
 *              to rec_len
 *
 *   rec_len == align8(64 + 32*nsegs + data_len).  The checksum covers the
 *   record as stored (compressed data included).  The segments are applied
 *   in order; a later segment overrides an earlier one it overlaps.
 *
 * PAD RECORD (type 2, version 3): log space that a batch of groups had
 * reserved, given up whole.  In a store shared by several processes, the
 * process that leads a batch reserves its place in the log and its seqs, then
 * writes its records; if it dies before its home writes began, a survivor
 * writes a pad over the start of that space, durably, so that the log goes on
 * past it (the groups were never acknowledged, and no byte of them reached a
 * data file).
 *
 *    type = 2, flags = LAST (a pad ends a log write), seq = the first seq the
 *    batch had, epoch as any record, nsegs = 0, data_len = raw_len = 0,
 *    reserved (u32 at 44) = the number of seqs it stands for (>= 1): the next
 *    record carries seq + that number; rec_len = the bytes the batch reserved
 *    (a multiple of the log block); checksum: XXH3-64 of the 64 header bytes
 *    only (this field zero, seed store id): the rest of the space is never
 *    read, and may hold anything (the torn records of the dead writer).
 *    Recovery replays nothing for a pad and goes on at seq + count, at
 *    offset + rec_len.
 *
 * VALIDITY AND RECOVERY
 *
 *   Recovery starts at the head offset expecting the head seq.  At offset p it
 *   accepts a record when magic, type, seq (the expected one), epoch (the
 *   superblock's), lengths (rec_len fits the area from p and matches nsegs and
 *   data_len; raw_len as above) and checksum are right.  When p is a block boundary and no valid
 *   record is at p, it also looks at offset 0 (the writer wraps to the area's
 *   start when a write does not fit before its end).  The first offset with no
 *   valid record ends the log: a torn or absent tail is the normal end, not an
 *   error.  A record that passes its checksum but whose descriptors are
 *   impossible (unknown file id, bad kind, range out of bounds), or whose LZ4
 *   data does not decompress to exactly raw_len bytes, is corruption
 *   (ATOMIO_ECORRUPT): recovery replays nothing at all in that case.
 *
 *   Valid records after the end: when the record at the end offset (or at
 *   offset 0 after a wrap) is one of this epoch that was due or later (torn
 *   or damaged, not zeros or stale) -- or its header is written but not that
 *   (stale, or its own magic, epoch or seq damaged) and the header where its
 *   length says the next record starts (packed after it, at the next block,
 *   or at offset 0) is one of this epoch due or later -- recovery looks at
 *   every checksummed record in the area.  Valid records of this epoch with
 *   seq >= the end's are not replayed (a torn write that was in flight at a
 *   crash leaves them, never acknowledged; damage to an acknowledged record
 *   leaves the same), but reported: the error buffer and
 *   atomio_stats().records_beyond_tail.
 *
 *   One superblock slot damaged (invalid, not all zeros) and the other valid:
 *   recovery looks at every checksummed record in the area.  None of a later
 *   epoch than the valid slot's: the valid slot stands.  Records of exactly
 *   one epoch more, one of them at area offset 0: the damaged slot was the
 *   superblock the last open wrote (head 0), and recovery replays that
 *   epoch's records from offset 0.  Anything else, or valid records of the
 *   slot's epoch beyond its valid log: ATOMIO_ECORRUPT, naming the slot.
 *   The epoch written after recovery is always above every epoch seen.
 *
 *   Why a stale record can never be taken for a live one: a record from
 *   another store fails the seeded checksum; one from an earlier lap of this
 *   epoch carries a lower seq than any expected one; one from an earlier
 *   epoch fails the epoch check.  The epoch is bumped, durably, at every open,
 *   before any new record is written, because a crash can leave valid records
 *   of the old epoch *after* a torn one (two log writes in flight), whose seqs
 *   the new epoch will reuse.
 *
 * BESIDE THE LOG (not part of the format: recovery reads neither)
 *
 *   /dev/shm/atomio-STOREID-INODE (where /dev/shm is a tmpfs; else LOG-shm
 *   beside the log, or .atomio-HASH-shm when LOG's name leaves no room): the
 *   live state the processes of a shared store map (src/shm.h), rebuilt from
 *   the log by the first process to open the store; removed by the last one
 *   to close it (a crash leaves it until the store is opened again).  Locks on the log itself: flock LOCK_SH by each process of a
 *   shared store, LOCK_EX by an ATOMIO_EXCLUSIVE one (and by libraries of
 *   format version 2 and before); open-file-description byte locks at
 *   offsets 2^62 and up (src/shm.h, LK_*), which no write ever reaches.
 *
 * SYNC ORDER
 *
 *   commit:     records -> log, O_DIRECT + RWF_DSYNC (one device wait; or write
 *               + fdatasync where O_DIRECT is refused).  Only then are the home
 *               (in-place) writes issued, without a flush: a home write can never
 *               reach the media before the record that can redo it.  (Home
 *               writes of O_DIRECT data files may go through the page cache.)
 *   pad:        written (one block, RWF_DSYNC) over the start of a batch's
 *               space before any later batch's home writes begin, and only
 *               while none of that batch's did.
 *   lazy:       a group committed with atomio_tx_commit_lazy: its records are
 *               written at the flush (a sync, a durable commit after it,
 *               close, pressure or the lazy delay), as a commit's, then home;
 *               groups are logged in commit order.
 *   re-log:     adoption of a dead leader's batch holding a lazy group: its
 *               records are written again, byte for byte (same seqs, epoch,
 *               data, LAST flag), at the same place, durably, then the log
 *               is fdatasynced (the dead leader's own write of that space is
 *               durable or superseded), before its home turn -- never padded,
 *               so no later batch outlives it.
 *   fast path:  a group of one write may instead be written in place with
 *               RWF_ATOMIC | RWF_DSYNC and no record, but only when no live
 *               record (seq >= the durable head seq) covers any of its bytes or
 *               changes its file's size: replay never writes an older record
 *               over it.
 *   checkpoint: fdatasync every data file written since the last checkpoint
 *               (fsync where its size changed), THEN write the superblock with
 *               the new head, to the older slot with RWF_DSYNC: head = 0, head
 *               seq = next seq when every record is home (full checkpoint), or
 *               head = the offset just after a record whose group and every
 *               earlier one are home, head seq = that record's seq + 1 (while
 *               commits go on; the writer wraps around the area meanwhile).
 *               Only after that may the space before the new head be overwritten.
 *   open:       recovery replays the log, fsyncs the files it wrote, then writes
 *               the superblock with epoch + 1 and an empty log (head 0), durably,
 *               before the first new record.
 *   register:   the data file is fsynced, and its directory (whoever created it:
 *               the application may not have synced it), then the new catalog
 *               copy is written with RWF_DSYNC, all before the file id is
 *               returned, so no record can name a file recovery cannot find.
 *   create:     the log is built under a temporary name, fsynced, renamed into
 *               place (no replace) and its directory fsynced: a crash leaves
 *               either no log or a whole one.
 */
#ifndef ATOMIO_FORMAT_H
#define ATOMIO_FORMAT_H

#include <stdint.h>
#include <string.h>

#define FMT_VERSION 3u     /* written */
#define FMT_VERSION_MIN 1u /* oldest read: no compressed records */

#define SB_SLOT 4096u
#define SB_SIZE 256u
#define SB_CSUM_OFF 248u
#define SB_MAGIC "ATOMIOLG"
#define SB_BOM 0x01020304u
#define SB_SEED 0x61746f6d696f5342ull /* "atomioSB" */
#define CAT_OFF (2u * SB_SLOT)
#define CAT_MAGIC 0x54414341u /* "ACAT" */
#define CAT_HDR 64u
#define CAT_ENTRY_HDR 48u
#define CAT_ENTRY_HDR_V1 32u /* entry_hdr 0: no birth time */
#define CAT_DEFAULT_SIZE (1024u * 1024u)

#define REC_MAGIC 0x43455241u /* "AREC" */
#define REC_HDR 64u
#define REC_DESC 32u
#define REC_TYPE_GROUP 1u
#define REC_TYPE_PAD 2u
#define FMT_VERSION_PAD 3u /* the first version with pad records */
#define REC_F_LAST 0x1u
#define REC_F_LZ4 0x2u
#define COMP_MAX (1u << 20) /* largest compressed record, and its raw data */
#define SEG_WRITE 1u
#define SEG_SETSIZE 2u

#define MAX_SEGMENTS 65536u
#define MAX_FILES 65536u
#define MAX_OFFSET (1ull << 62) /* no write ends, and no size lies, beyond 2^62 */
#define MAX_GENERATION (1ull << 62) /* superblock and catalog generations stay below */

#define DEFAULT_LOG_SIZE (1ull << 30)
#define MIN_LOG_BLOCKS 16u

struct sb_disk {
	char magic[8];
	uint32_t bom;
	uint32_t version;
	uint64_t store_id;
	uint64_t generation;
	uint64_t epoch;
	uint64_t head_off;
	uint64_t head_seq;
	uint64_t area_off;
	uint64_t area_size;
	uint32_t block;
	uint32_t flags;
	uint64_t cat_off;
	uint64_t cat_size;
	uint64_t ctime_ns;
	uint8_t reserved[144];
	uint64_t csum;
};
_Static_assert(sizeof(struct sb_disk) == SB_SIZE, "superblock size");
_Static_assert(__builtin_offsetof(struct sb_disk, csum) == SB_CSUM_OFF, "sb csum");
_Static_assert(__builtin_offsetof(struct sb_disk, cat_off) == 80, "sb layout");

struct cat_hdr_disk {
	uint32_t magic;
	uint32_t count;
	uint64_t store_id;
	uint64_t generation;
	uint64_t used;
	uint32_t entry_hdr;
	uint8_t reserved[20];
	uint64_t csum;
};
_Static_assert(sizeof(struct cat_hdr_disk) == CAT_HDR, "catalog header size");

struct cat_entry_disk {
	uint32_t id;
	uint16_t path_len;
	uint16_t flags;
	uint64_t dev;
	uint64_t ino;
	uint64_t fsid;
	uint64_t btime_ns;
	uint32_t id_flags;
	uint32_t reserved;
	/* path follows */
};
_Static_assert(sizeof(struct cat_entry_disk) == CAT_ENTRY_HDR, "catalog entry size");
#define CAT_F_RELATIVE 0x1u
#define CAT_ID_BTIME 0x1u

struct rec_hdr_disk {
	uint32_t magic;
	uint16_t type;
	uint16_t flags;
	uint64_t seq;
	uint64_t epoch;
	uint64_t rec_len;
	uint64_t data_len;
	uint32_t nsegs;
	uint32_t reserved;
	uint64_t raw_len;
	uint64_t csum;
};
_Static_assert(sizeof(struct rec_hdr_disk) == REC_HDR, "record header size");
_Static_assert(__builtin_offsetof(struct rec_hdr_disk, csum) == 56, "record csum offset");

struct seg_disk {
	uint32_t file;
	uint16_t kind;
	uint16_t reserved;
	uint64_t off;
	uint64_t len;
	uint64_t data_off;
};
_Static_assert(sizeof(struct seg_disk) == REC_DESC, "descriptor size");

/* The structs above are the little-endian images; atomio builds only on
 * little-endian hosts (checked here), and the byte-order mark in the
 * superblock makes a log carried to a big-endian host fail cleanly. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "atomio's on-disk structs are little-endian images; port format.h first"
#endif

static inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* Bytes a record with nsegs descriptors and data_len data bytes takes. */
static inline uint64_t rec_len_for(uint64_t nsegs, uint64_t data_len)
{
	return align_up(REC_HDR + REC_DESC * nsegs + data_len, 8);
}

uint64_t fmt_csum(const void *buf, size_t len, uint64_t seed, size_t csum_off);

#endif
