/*
 * atomio: atomic write groups for Linux files.
 *
 * A store is one redo log plus the data files registered with it.  A group
 * ("transaction", atomio_tx) collects writes and size changes to any number of
 * ranges in any number of registered files; atomio_tx_commit makes the whole
 * group durable with one sequential log write and one device wait, then writes
 * it in place.  After a crash, atomio_open replays every committed group whole,
 * in commit order, and never a part of one.
 *
 * Conventions (as liburing): every function returns 0, or a non-negative count,
 * on success and a negative errno on failure.  atomio's own conditions use the
 * ATOMIO_E* codes below (also negative); atomio_strerror() names them all.
 * Nothing is reported through errno.
 *
 * Thread safety: a store may be used from many threads at once; a tx belongs
 * to the thread that began it until it is committed or aborted.  Processes:
 * any number may open one log at once (see ATOMIO_EXCLUSIVE); a handle
 * belongs to the process that opened it (a forked child opens the log
 * itself).
 *
 * See docs/API.md for the full reference with every error of every function,
 * and docs/FORMAT.md for the on-disk format.
 */
#ifndef ATOMIO_H
#define ATOMIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATOMIO_VERSION_MAJOR 0
#define ATOMIO_VERSION_MINOR 1
#define ATOMIO_VERSION_PATCH 0

typedef struct atomio atomio;       /* a store: one log + its registered data files */
typedef struct atomio_tx atomio_tx; /* an atomic group being built ("plugged") */

/* --- options ----------------------------------------------------------- */

/* Create the log if it does not exist. */
#define ATOMIO_CREATE 0x1u
/* One process only.  By default any number of processes (and store handles
 * in one process) may open the same log at once: they share one store, its
 * commit order, its group commit and its checkpoints, through a
 * shared-memory file (in /dev/shm, or beside the log; created 0600).  With this
 * flag the store is this handle's alone: atomio_open returns -EBUSY while
 * any other has the log open, and others get -EBUSY while this one does. */
#define ATOMIO_EXCLUSIVE 0x2000u
/* Accept a log file that users other than its owner may write (refused by
 * default with ATOMIO_EUNSAFE: whoever can write the log can steer recovery). */
#define ATOMIO_ALLOW_SHARED_LOG 0x2u
/* Recovery: replay into the recorded paths even when a data file's identity
 * (device, inode) no longer matches the one recorded at registration.  Only
 * for an operator who has checked the files by hand (atomio recover --force-paths). */
#define ATOMIO_FORCE_PATHS 0x4u
/* Recovery: accept a data file whose identity no longer matches (a copy
 * restored in its place, with a copy of the log) when replaying the live
 * groups would change none of its bytes nor its size: the copy holds them
 * all already, so nothing is written to it and the log is emptied as after
 * any recovery.  Otherwise ATOMIO_EIDENTITY, as without the flag. */
#define ATOMIO_ACCEPT_COPIES 0x1000u

/* Engine.  Zero = automatic: io_uring where it was measured to pay (the
 * parallel O_DIRECT home writes of an ATOMIO_DIRECT_HOME store), with the
 * default system-call table and where a ring can be set up; plain system
 * calls for the rest.  At most one of the two.  atomio_caps().engine says
 * whether a store uses io_uring. */
#define ATOMIO_ENGINE_PLAIN 0x10u /* one system call per I/O, no io_uring */
#define ATOMIO_ENGINE_URING 0x20u /* every write through io_uring, also under a test
				      backend; plain where io_uring cannot be set up */
/* Kernel fast path (see atomio_caps().fast_path_max).  Zero = automatic: a
 * single-range group on an O_DIRECT file is written in place with
 * RWF_ATOMIC | RWF_DSYNC, skipping the log, only where the device backs
 * atomic writes in hardware.  At most one of the two. */
#define ATOMIO_FAST_PATH_OFF 0x40u   /* never */
#define ATOMIO_FAST_PATH_FORCE 0x80u /* wherever the kernel accepts RWF_ATOMIC,
					 also in software (XFS copy-on-write: slow; for tests) */
/* Home writes of O_DIRECT data files with O_DIRECT, on the commit's path
 * (io_uring submits a group's writes at once).  Default: through a buffered
 * descriptor of the same file, see docs/API.md, "Which reads see what". */
#define ATOMIO_DIRECT_HOME 0x200u
/* No background checkpoints: the log is checkpointed only when it is full
 * (in the commit that needs the room), on atomio_checkpoint and at close, as
 * a stop-the-world step.  Default: when the log is half full, a store thread
 * syncs the data files and frees the log while commits go on.  For test
 * backends that want one deterministic order of system calls. */
#define ATOMIO_NO_BG_CHECKPOINT 0x400u
/* Never compress log records.  Default: a group's data (up to 1 MiB) is
 * stored LZ4-compressed in its record when that makes the record shorter
 * (docs/API.md, "Wear"); incompressible data is stored as it is. */
#define ATOMIO_NO_COMPRESS 0x800u

struct atomio_options {
	uint64_t log_size; /* bytes to reserve for records when creating a log; 0 = 1 GiB */
	uint32_t flags;    /* 0 or ATOMIO_* options above, ORed (at most one of each pair) */
	/* Checkpoint policy (docs/API.md, "Wear"): a background checkpoint runs
	 * when the log is more than ckpt_percent full (0 = 50; at most 99) or when
	 * more than dirty_limit bytes of home writes (distinct 4 KiB blocks)
	 * wait for a checkpoint (0 = the log's size).  A bigger log and a higher
	 * percentage write a page rewritten often home fewer times; dirty_limit
	 * bounds the dirty page cache that costs (commits wait for a checkpoint
	 * at twice it). */
	uint32_t ckpt_percent;
	/* Optional: on failure of atomio_open (and later calls on the store),
	 * a one-line explanation naming the file or field at fault is written
	 * here, NUL-terminated.  May be NULL. */
	char *errbuf;
	size_t errbuf_size;
	uint64_t dirty_limit;
	/* Lazy groups (atomio_tx_commit_lazy): a group committed lazily is
	 * made durable at the latest this long after its commit (plus one log
	 * write), by a flusher thread of some process of the store; 0 = 200 ms
	 * (200000), at most 60 s.  Store-wide: the first process to open the
	 * store sets it; a later one that asks for another nonzero value gets
	 * -EINVAL. */
	uint64_t lazy_delay_us;
	uint64_t reserved[2]; /* must be zero */
};

/* --- errors of atomio's own (negative, outside the errno range) -------- */

#define ATOMIO_EBASE 7000
#define ATOMIO_ENOTLOG (-7001)  /* the file is not an atomio log (no magic) */
#define ATOMIO_EVERSION (-7002) /* an atomio log of a format version this library does not read */
#define ATOMIO_ECORRUPT (-7003) /* log damaged: no valid superblock or catalog, or a
				   checksummed record whose content is impossible */
#define ATOMIO_EFAILED (-7004)  /* an earlier I/O error left the store's state unknown;
				   close and reopen it to recover (a commit refused with it
				   wrote nothing) */
#define ATOMIO_EIDENTITY (-7005) /* a data file is no longer the file registered
				    (replaced, renamed over, symlink, not a regular file) */
#define ATOMIO_EBADPATH (-7006) /* a path recorded in the log breaks the path rules */
#define ATOMIO_EUNSAFE (-7007)  /* the log is writable by other users */
#define ATOMIO_EUNKNOWN (-7008) /* the store failed while or after this group's record
				   was written: it may be durable; reopening applies it
				   whole or not at all */
#define ATOMIO_ELAST 7008

/* --- store ---------------------------------------------------------------- */

int atomio_open(const char *log_path, const struct atomio_options *opts, atomio **out);
int atomio_close(atomio *st);

/* --- data files ------------------------------------------------------------- */

int atomio_file_open(atomio *st, const char *path, int open_flags, mode_t mode);
int atomio_file_fd(atomio *st, int file);

/* --- groups ------------------------------------------------------------------ */

int atomio_tx_begin(atomio *st, atomio_tx **out);
int atomio_tx_write(atomio_tx *tx, int file, const void *buf, size_t len, off_t off);
int atomio_tx_writev(atomio_tx *tx, int file, const struct iovec *iov, int iovcnt, off_t off);
int atomio_tx_truncate(atomio_tx *tx, int file, off_t size);
int atomio_tx_commit(atomio_tx *tx);
void atomio_tx_abort(atomio_tx *tx);

/* O_ATOMIC-style single calls: one group of one range; return len on success. */
ssize_t atomio_pwrite(atomio *st, int file, const void *buf, size_t len, off_t off);
ssize_t atomio_pwritev(atomio *st, int file, const struct iovec *iov, int iovcnt, off_t off);

/* Read a registered file: the newest committed data of every range (as
 * pread; short only at the end of the file).  For O_DIRECT files without
 * alignment rules and without making atomio's pending home writes go to
 * the device early (docs/API.md, "Which reads see what"). */
ssize_t atomio_pread(atomio *st, int file, void *buf, size_t len, off_t off);
ssize_t atomio_preadv(atomio *st, int file, const struct iovec *iov, int iovcnt, off_t off);

int atomio_checkpoint(atomio *st);
/* Wait until every group that any process of the store has queued or
 * logged is written home whole (groups of a process that died are
 * committed, or given up, by this call if need be); no sync.  Queued lazy
 * groups are not waited for (reads overlay them).  For a reader
 * that keeps live writers out by a lock of its own and must not read a group
 * a dead writer left half home (docs/API.md, atomio_settle). */
int atomio_settle(atomio *st);

/* ATOMIO_SHARED_AREA bytes (64-byte aligned) shared by every process that
 * has the store open, zero when the first of them opened it: the
 * application's own (futex words, counters; the SQLite VFS keeps its
 * writers' turns there).  Valid until atomio_close; never logged, never read
 * by recovery; an ATOMIO_EXCLUSIVE store's is its own (docs/API.md). */
#define ATOMIO_SHARED_AREA 64
int atomio_shared_area(atomio *st, void **area, size_t *len);

/* --- asynchronous commits ------------------------------------------------------ */

/* Called once per group committed with atomio_tx_commit_async, from
 * atomio_poll, with 0 (durable and visible, as after atomio_tx_commit) or
 * the error atomio_tx_commit would have returned. */
typedef void (*atomio_done_fn)(void *arg, int result);

int atomio_tx_commit_async(atomio_tx *tx, atomio_done_fn done, void *arg);
int atomio_poll(atomio *st, int timeout_ms);
int atomio_event_fd(atomio *st);

/* --- limits and counters ------------------------------------------------------ */

struct atomio_caps {
	uint64_t max_group_bytes;   /* largest single-range group this store accepts */
	uint32_t max_segments;      /* most ranges (writes + truncates) in one group */
	uint32_t segment_overhead;  /* log bytes each range costs on top of its data */
	uint64_t log_size;          /* bytes of the record area */
	uint32_t log_block;         /* alignment of log writes (bytes) */
	uint32_t dio_offset_align;  /* O_DIRECT files: offset/length alignment (0 = buffered) */
	uint32_t dio_mem_align;     /* O_DIRECT files: buffer alignment (0 = buffered) */
	uint32_t engine;            /* ATOMIO_ENGINE_PLAIN or ATOMIO_ENGINE_URING */
	/* The kernel's atomic-write limits for this file: statx(STATX_WRITE_ATOMIC)
	 * (0 = no atomic writes, or a kernel before 6.11; unit_max_opt: 6.16+,
	 * the largest hardware-backed size where the filesystem can also do
	 * slower software atomic writes, 0 = no such boundary) ... */
	uint32_t atomic_write_unit_min;
	uint32_t atomic_write_unit_max;
	uint32_t atomic_write_unit_max_opt;
	uint32_t atomic_write_segments_max;
	/* ... and its block device's queue limits (sysfs, 0 = none or unknown). */
	uint32_t bdev_atomic_write_max_bytes;
	uint32_t bdev_atomic_write_unit_min_bytes;
	uint32_t bdev_atomic_write_unit_max_bytes;
	uint32_t bdev_atomic_write_boundary_bytes;
	/* Largest single-range group atomio writes in place with RWF_ATOMIC,
	 * skipping the log (power-of-two lengths from atomic_write_unit_min up to
	 * this, naturally aligned); 0 = never for this file. */
	uint32_t fast_path_max;
	uint32_t flags;             /* ATOMIO_CAP_* */
	uint64_t reserved[3];
};

#define ATOMIO_CAP_ATOMIC_WRITE 0x1u /* statx: the file accepts RWF_ATOMIC writes */
#define ATOMIO_CAP_HW_ATOMIC 0x2u    /* ... backed by the device (fast_path_max is hardware's) */
#define ATOMIO_CAP_DIRECT_HOME 0x4u  /* home writes of this O_DIRECT file bypass the page cache */

struct atomio_stats {
	uint64_t commits;          /* groups committed (acknowledged) */
	uint64_t bytes_logged;     /* bytes written to the log by commits (records + padding) */
	uint64_t bytes_home;       /* bytes written in place to data files */
	uint64_t log_syncs;        /* device waits spent on commits (durable log writes) */
	uint64_t data_syncs;       /* fsync/fdatasync calls on data files */
	uint64_t checkpoints;      /* checkpoints completed */
	uint64_t groups_recovered; /* groups replayed by recovery when this store was opened */
	uint64_t batches;          /* log writes that carried one or more groups (group commit) */
	uint64_t log_full_waits;   /* commits that had to wait for a checkpoint to free log space */
	uint64_t fast_writes;      /* groups written in place by the kernel fast path (no log) */
	uint64_t bytes_raw;        /* data bytes of the groups logged, before compression */
	uint64_t records_compressed; /* records stored LZ4-compressed */
	uint64_t bytes_checkpointed; /* distinct 4 KiB blocks of home writes that checkpoints
					made durable, in bytes (what the page cache had to write) */
	uint64_t dirty_bytes;      /* distinct home bytes written since the last checkpoint began */
	uint64_t records_beyond_tail; /* recovery at this open: valid records of the log's
					 epoch found after the point where the valid log
					 ended, not replayed (a torn write in flight, or
					 damage: the error buffer says where) */
	uint64_t bytes_written_back; /* home bytes whose write-back atomio started early
					(sync_file_range) ahead of a checkpoint; this
					took the last reserved field: same size */
};
/* Every count is the store's, over all its processes since the first of
 * them opened it (groups_recovered and records_beyond_tail: that open's
 * recovery). */

int atomio_caps(atomio *st, int file, struct atomio_caps *caps);
int atomio_stats(atomio *st, struct atomio_stats *stats);

const char *atomio_strerror(int err);

/* --- lazy groups: atomic at once, durable at sync ---------------------------- */

/* Commit tx lazily: it returns once the group has its place in the store's
 * commit order and every read atomio serves (atomio_pread(v),
 * atomio_file_size, in every process of the store) returns it; its tx is
 * freed.  The group becomes durable at the next atomio_sync that covers it,
 * at a durable commit (atomio_tx_commit, atomio_pwrite(v), an asynchronous
 * group's completion) after it, at atomio_close of this handle, or within
 * the store's lazy delay (atomio_options.lazy_delay_us) -- whichever comes
 * first.  A crash loses a suffix of the commit order: every group whose
 * durability was reported is there; a later lazy group may be missing,
 * never one without an earlier one, never half of one.  *ticket (may be
 * NULL) receives the group's place in the commit order, for
 * atomio_sync_ticket.  A group too large to stay in shared memory (larger
 * than an eighth of the store's arena) is committed durably instead, with
 * atomio_tx_commit's errors.  0, -EINVAL (tx), -EPERM (a forked child's),
 * -E2BIG, -ENOMEM, ATOMIO_EFAILED (nothing written), ATOMIO_EUNKNOWN (a
 * group committed durably instead: as atomio_tx_commit). */
int atomio_tx_commit_lazy(atomio_tx *tx, uint64_t *ticket);

/* atomio_sync: start the flush and return at once */
#define ATOMIO_SYNC_NOWAIT 0x1u
/* Make every group committed before the call durable and home: file -1,
 * every group of the store; else every group that wrote or resized file,
 * whichever process committed it, and every group before it in the commit
 * order.  0, -EINVAL, -EPERM, ATOMIO_EFAILED (the store failed and none of
 * the groups still pending was written), ATOMIO_EUNKNOWN (the store failed
 * after some of them were written: reopening applies each whole or not at
 * all). */
int atomio_sync(atomio *st, int file, unsigned flags);
/* The same, for every group up to ticket (atomio_tx_commit_lazy's). */
int atomio_sync_ticket(atomio *st, uint64_t ticket, unsigned flags);
/* The size of file as atomio's reads see it: with every group committed to
 * it so far, lazy ones of every process included.  0, -EINVAL, -EPERM, or a
 * negative errno of fstat. */
int atomio_file_size(atomio *st, int file, uint64_t *size);
/* 1 while some lazy group that touches file is not yet home (reads of file
 * must then go through atomio_pread(v) to see it), 0 otherwise; -EINVAL,
 * -EPERM.  A hint without locks: a group committed by another thread or
 * process before this call returned (ordered by the caller's own means) is
 * seen. */
int atomio_lazy_pending(atomio *st, int file);

struct atomio_lazy_stats {
	uint64_t lazy_commits; /* groups committed lazily */
	uint64_t lazy_eager;   /* lazy commits that were made durable at once instead
				  (too large for the arena) */
	uint64_t syncs;        /* atomio_sync calls */
	uint64_t syncs_waited; /* ... that had groups to wait for */
	uint64_t flush_delay;  /* flushes started because the lazy delay ran out */
	uint64_t flush_press;  /* ... because shared memory was filling */
	uint64_t flush_sync;   /* ... because a sync or a durable commit asked */
	uint64_t lazy_reads;   /* reads that overlaid pending lazy groups */
	uint64_t lazy_waits;   /* lazy commits that waited for room */
	uint64_t lazy_pending; /* now: lazy groups not yet home */
	uint64_t lazy_bytes;   /* now: their bytes in shared memory */
	uint64_t reserved[5];
};
/* Every count is the store's, over all its processes. */
int atomio_lazy_stats(atomio *st, struct atomio_lazy_stats *stats);

/* --- the log without a store ------------------------------------------------ */

/* Which opens a log has seen, read from its current superblock without
 * opening the store or taking its lock.  Two marks of one log that are equal
 * (store_id and epoch) mean that no atomio_open recovered it in between: every
 * open writes epoch + 1 before its first commit. */
struct atomio_log_mark {
	uint64_t store_id; /* random, chosen when the log was created */
	uint64_t epoch;    /* + 1 at every atomio_open of the log */
	uint64_t reserved[2];
};
int atomio_log_mark(int log_fd, struct atomio_log_mark *mark);

/* Remove the log at log_path and its store's shared-state file (which a
 * store whose last process was killed leaves behind), durably: refused with
 * -EBUSY while any process has the store open, and with ATOMIO_ENOTLOG (or
 * ATOMIO_EVERSION, ATOMIO_ECORRUPT) for what is not a readable log, which is
 * left in place.  0 or an error (atomio_log_remove(3)). */
int atomio_log_remove(const char *log_path);

#ifdef __cplusplus
}
#endif
#endif
