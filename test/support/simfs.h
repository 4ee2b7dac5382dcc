/*
 * simfs.h: a crash simulator behind atomio's ops table (src/sys.h).
 *
 * A simfs is an in-memory filesystem on one simulated disk.  For every file
 * and directory it keeps what is DURABLE (would survive a power cut) and the
 * changes that are not yet, and from any moment of a run it builds CRASH
 * IMAGES: what the disk could hold after a power cut at that moment, under the
 * Linux persistence model:
 *
 *  - every write, size change, creation, rename and unlink becomes a PENDING
 *    ITEM when issued; reads see it at once;
 *  - fsync/fdatasync of a file make that file's data and size items durable
 *    (fdatasync carries size changes, as Linux documents); RWF_DSYNC, O_DSYNC
 *    and O_SYNC make a write's own items durable when the call returns;
 *  - fsync of a directory makes the entries created, renamed or unlinked in it
 *    durable (a file's fsync does NOT make its name durable);
 *  - in a crash image, ANY SUBSET of the pending items reached the media, each
 *    data item possibly TORN: only some of its sectors (the "unit", 512 or
 *    4096 bytes, counted from file offset 0) landed (an RWF_ATOMIC write
 *    does not tear).  Items of one file are
 *    applied in the order issued, so a later write wins where both landed; a
 *    file's size is set by the last of its size items that landed (a shrink
 *    that landed zeroes what lay beyond).  An image is a freshly booted disk:
 *    everything in it is durable, no descriptor is open.
 *
 * Not modelled: symbolic links, hard links, permissions other than the mode
 * bits stat reports, garbage sectors (a sector holds its old or its new
 * bytes), a write's effect on bytes of its page it did not write.  /sys is
 * absent unless simfs_config.phys_block asks for physical_block_size files.
 *
 * STORES OF SEVERAL PROCESSES.  The ops table has what a store shared by
 * several processes needs (src/sys.h), so atomio_open under simfs makes a
 * shared store, as on Linux:
 *  - shm_map: memory shared by every mapping of one inode (fd -1: anonymous),
 *    like the page cache of a tmpfs file: never part of a crash image, and
 *    not the file's bytes for pread/pwrite (atomio never mixes them).  A cut
 *    of the file to nothing, its unlink and simfs_reset give the inode fresh
 *    memory from then on; mappings still held (by a "process" that died)
 *    keep the old until unmapped or the simfs is freed;
 *  - ofd_lock: open-file-description byte-range locks (each simfs descriptor
 *    is a description of its own), read and write, SET / WAIT / TEST; flock
 *    shared and exclusive (LOCK_NB; a blocking one fails as LOCK_NB would).
 *    A lock goes when its descriptor is closed, when its process dies
 *    (simfs_proc_kill), and at simfs_reset.  A WAIT that no other thread
 *    could end (the holder is a descriptor of the waiter's own process, or
 *    untagged, of its own thread) or that lasts a minute aborts with a
 *    message instead of hanging;
 *  - futex_wait/wake are left to the real futex, pid_alive unset (yes).
 * VOLATILE FILES: a file whose name ends with SIMFS_VOLATILE_SUFFIX ("-shm":
 * atomio's shared-state file beside its log) is kept out of the crash model:
 * its creation, unlink, writes and size changes are durable at once, add no
 * pending item and are no crash point.  Nothing in it is read after a crash
 * (atomio rebuilds it), and its content lives in shm_map's memory, which no
 * crash keeps; enumerating its fates would only multiply identical images.
 * SIMULATED PROCESSES: a thread acts for a process (simfs_proc_set, a tag);
 * a descriptor belongs to the process that opened it.  simfs_proc_kill
 * closes a process's descriptors, as the kernel does when a process exits;
 * simfs_proc_die, called by a hook, kills the calling thread's process at
 * that crash point and blocks the thread there for good (it never returns;
 * a lock it holds that other processes share -- a robust mutex the kernel
 * would release with a dead process -- stays held: its caller must not
 * kill where that can be).
 *
 * Typical use (see test/support/crashsim.h for atomio's workload and oracle):
 *
 *     struct simfs *fs = simfs_new(&(struct simfs_config){.seed = 1});
 *     simfs_mkdir(fs, "/d");
 *     simfs_install(fs);                  // atomio's syscalls now go to fs
 *     simfs_set_hook(fs, at_crash_point, arg);
 *     ... run atomio on "/d/log" ...      // the hook runs at every I/O call
 *
 *     static void at_crash_point(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
 *     {
 *         struct simfs_enum e = {.unit = 512, .exhaustive_cap = 256, .samples = 16, .seed = 7};
 *         uint64_t n = simfs_enum_count(fs, &e, NULL);
 *         for (uint64_t i = 0; i < n; i++) {
 *             struct simfs_pick p;
 *             simfs_enum_pick(fs, &e, i, &p);
 *             struct simfs *img = simfs_crash(fs, &p);
 *             struct simfs *prev = simfs_enter(img);   // this thread now uses img
 *             ... atomio_open (recovery) on img, check ...
 *             simfs_enter(prev);
 *             simfs_free(img);
 *             simfs_pick_free(&p);
 *         }
 *     }
 *
 * Thread safety: every call on one simfs is serialised by its (recursive)
 * lock; the hook runs with that lock held, so other threads of the run wait
 * while it checks images.  simfs_enter() sets a per-thread simfs, so a hook
 * can run atomio on an image while the run's threads stay on the run's simfs.
 */
#ifndef ATOMIO_SIMFS_H
#define ATOMIO_SIMFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct simfs;

struct simfs_config {
	uint32_t dio_align;     /* statx dio_offset_align (O_DIRECT offset/length); 0 = 512 */
	uint32_t dio_mem_align; /* statx dio_mem_align (O_DIRECT buffers); 0 = dio_align */
	uint32_t phys_block;    /* serve /sys/dev/block/M:m/queue/physical_block_size with
				   this value; 0 = /sys absent (atomio then assumes 4096) */
	bool no_direct;         /* open(O_DIRECT) fails with EINVAL, as on tmpfs */
	bool no_rwf_dsync;      /* pwritev2(RWF_DSYNC) fails with EOPNOTSUPP */
	/* RWF_ATOMIC (untorn writes, Linux 6.11+): with atomic_write_max set,
	 * statx reports STATX_WRITE_ATOMIC (unit min atomic_write_min, or the
	 * O_DIRECT alignment; unit max atomic_write_max; one segment) and a
	 * pwritev2 with RWF_ATOMIC on an O_DIRECT descriptor, of one buffer
	 * whose power-of-two length lies in [min, max] at an offset aligned to
	 * it, is one pending item that is never torn: in a crash image all of
	 * it landed or none.  Any other RWF_ATOMIC write fails with EINVAL; with
	 * atomic_write_max 0 every one fails with EOPNOTSUPP. */
	uint32_t atomic_write_min, atomic_write_max;
	/* Serve /proc/self/fd/N: open() of it opens the inode descriptor N of
	 * this simfs refers to (a new descriptor with the new flags), as Linux
	 * does; absent (ENOENT) otherwise. */
	bool proc_fd;
	uint64_t seed;          /* the getrandom() stream */
};

/* Files kept out of the crash model (VOLATILE FILES above). */
#define SIMFS_VOLATILE_SUFFIX "-shm"

/* A new, empty filesystem (just "/").  NULL only when out of memory. */
struct simfs *simfs_new(const struct simfs_config *cfg);
void simfs_free(struct simfs *fs);

/* The ops table that routes atomio's system calls to the current simfs. */
extern const struct atomio_sysops simfs_ops;

/* Route atomio's system calls (all threads) to fs: atomio_sys_set(&simfs_ops)
 * plus fs as the process-wide current simfs.  simfs_uninstall() restores the
 * real system calls. */
void simfs_install(struct simfs *fs);
void simfs_uninstall(void);
/* Make fs this thread's simfs (overriding the installed one; NULL = back to
 * it).  Returns the previous per-thread simfs, for nesting. */
struct simfs *simfs_enter(struct simfs *fs);
struct simfs *simfs_current(void);

/* --- setting up and inspecting (no crash points, durable at once) ---------- */

int simfs_mkdir(struct simfs *fs, const char *path);
/* Create or replace a regular file with these bytes, durably. */
int simfs_put(struct simfs *fs, const char *path, const void *data, size_t len, unsigned mode);
/* What a read of path returns now: malloc'd bytes (free them), *len its size;
 * NULL when absent (or not a regular file). */
uint8_t *simfs_get(struct simfs *fs, const char *path, size_t *len);
/* Compare a file with (data, len).  0 = equal; 1 = different, *where = first
 * differing offset (the shorter length when only sizes differ); -ENOENT. */
int simfs_cmp(struct simfs *fs, const char *path, const void *data, size_t len, uint64_t *where);
/* Read up to len bytes at off of a file as it reads now: bytes read, or -ENOENT. */
int64_t simfs_read(struct simfs *fs, const char *path, uint64_t off, void *buf, uint64_t len);
/* Size of a file, or -ENOENT. */
int64_t simfs_size(struct simfs *fs, const char *path);
bool simfs_exists(struct simfs *fs, const char *path);

/* --- crash points ------------------------------------------------------------- */

enum simfs_opkind {
	SIMFS_OP_CREATE = 1, /* open(O_CREAT) made a file */
	SIMFS_OP_WRITE,
	SIMFS_OP_TRUNCATE,
	SIMFS_OP_FSYNC,
	SIMFS_OP_FDATASYNC,
	SIMFS_OP_RENAME,
	SIMFS_OP_UNLINK,
};

/* The operation at a crash point.  The hook runs after its effect is visible
 * and its items are pending, before any durability it brings: a crash "during"
 * the call.  A crash just before the call is the same point with its items
 * dropped. */
struct simfs_opinfo {
	enum simfs_opkind kind;
	uint64_t index;          /* crash points so far on this simfs (0-based) */
	uint64_t pending_version; /* changes whenever the pending items change */
	const char *path;        /* file or directory (RENAME: the source) */
	const char *path2;       /* RENAME: the target */
	uint64_t off, len;       /* WRITE: range; TRUNCATE: len = new size */
	const struct iovec *iov; /* WRITE: the data */
	int iovcnt;
	int rwf;                 /* WRITE: RWF_* flags */
	bool direct;             /* the descriptor has O_DIRECT */
	bool sync;               /* the call makes something durable on return */
	bool before;             /* a before-write hook's call: nothing of the write
				    is done yet (simfs_set_before_hook) */
	bool after;              /* an after hook's call: the write or sync is done,
				    what it makes durable is (simfs_set_after_hook) */
};

typedef void (*simfs_hook_fn)(struct simfs *fs, const struct simfs_opinfo *op, void *arg);
/* Called at every crash point (NULL to stop).  Not called while the hook
 * itself runs, nor on images it builds unless it sets a hook on them. */
void simfs_set_hook(struct simfs *fs, simfs_hook_fn fn, void *arg);
/* Called before a write (pwrite/pwritev) to a file that is not volatile is
 * done -- its arguments checked, nothing of it applied, no pending item, no
 * crash point (op->index is the one its crash point will have, op->before is
 * set) -- in the writing thread: where a simulated process may die with the
 * write never issued (simfs_proc_die).  Not called while a hook runs. */
void simfs_set_before_hook(struct simfs *fs, simfs_hook_fn fn, void *arg);
/* Called when a write or an fsync/fdatasync of a file that is not volatile
 * is done, just before the call returns (op->after set; op->index is its
 * crash point's), in the calling thread: where a simulated process may die
 * with the call complete and its caller not told (simfs_proc_die). */
void simfs_set_after_hook(struct simfs *fs, simfs_hook_fn fn, void *arg);
uint64_t simfs_points(struct simfs *fs);
/* sync_file_range calls answered by every simfs of the process (they make
 * nothing durable). */
extern _Atomic uint64_t simfs_sfr_calls;
/* Hold fs: until simfs_unlock, every other thread's call on fs (and so its
 * hook) waits.  For a hook's caller that changes what the hook reads while
 * store threads (atomio's checkpointer) may reach crash points.  Recursive;
 * the holder may call simfs itself, but must not wait for a thread that is
 * blocked in fs. */
void simfs_lock(struct simfs *fs);
void simfs_unlock(struct simfs *fs);

/* --- simulated processes (STORES OF SEVERAL PROCESSES above) ----------------------- */

/* The calling thread acts for process tag (> 0; 0 = none) from now on:
 * descriptors it opens are that process's.  Returns the previous tag. */
int simfs_proc_set(int tag);
int simfs_proc_get(void);
/* Process tag dies: every descriptor of it is closed (its locks go), as
 * the kernel does at exit.  Returns how many. */
int simfs_proc_kill(struct simfs *fs, int tag);
/* From a hook on fs: the calling thread's process dies at this crash point
 * (simfs_proc_kill), and the thread leaves the hook and the simfs and
 * blocks for good.  Never returns: nothing may wait for the thread (no
 * pthread_join). */
_Noreturn void simfs_proc_die(struct simfs *fs);
/* A process of several threads, killed by one of them (a store's
 * checkpointer thread): its threads tagged tag park at their next simfs
 * call or futex wait (simfs_ops.futex_wait) where may_park() says they hold
 * nothing other processes share (NULL: anywhere), never inside the simfs;
 * the call waits until `threads` of them are parked or waiting in a futex,
 * a bounded number of times.  true: they are stopped, call
 * simfs_proc_die_as next; false: they were let go on. */
bool simfs_proc_stop(int tag, int threads, bool (*may_park)(void));
/* From a hook: process tag dies (simfs_proc_kill), its stopped threads and
 * any of its threads that comes back to the simfs never run again, and the
 * calling thread (of another tag, or none) blocks for good. */
_Noreturn void simfs_proc_die_as(struct simfs *fs, int tag);

/* --- pending items and crash images ---------------------------------------------- */

enum simfs_itemkind { SIMFS_DATA = 1, SIMFS_SIZE, SIMFS_DIROP };

struct simfs_item {
	enum simfs_itemkind kind;
	uint64_t point;       /* crash point (op index) that issued it */
	uint64_t ino;         /* the file (DATA, SIZE) or directory (DIROP) */
	const char *path;     /* its path when issued */
	uint64_t off, len;    /* DATA */
	uint64_t size;        /* SIZE */
	const uint8_t *data;  /* DATA: the bytes (NULL = zeros) */
	bool direct;          /* DATA: written with O_DIRECT */
	bool atomic;          /* DATA: written with RWF_ATOMIC (never torn) */
};

/* The pending items in issue order; returns their count (fills at most max).
 * The pointers stay valid until the next operation on fs. */
size_t simfs_pending(struct simfs *fs, struct simfs_item *out, size_t max);

enum simfs_fatekind { SIMFS_DROP = 0, SIMFS_KEEP, SIMFS_TEAR };
enum simfs_tearkind {
	SIMFS_T_PREFIX = 1, /* units [0, arg) of the item landed */
	SIMFS_T_SUFFIX,     /* units [arg, n) */
	SIMFS_T_HOLE,       /* all but unit arg */
	SIMFS_T_ONLY,       /* only unit arg */
	SIMFS_T_MASK,       /* unit i landed when bit i of bits is set (n <= 64) */
	SIMFS_T_RANDOM,     /* each unit by a hash of (bits, i) */
};

struct simfs_fate {
	uint8_t fate; /* enum simfs_fatekind */
	uint8_t tear; /* enum simfs_tearkind, for SIMFS_TEAR */
	uint16_t reserved;
	uint32_t arg;
	uint64_t bits;
};

/* Which pending items reached the media: f[i] for the i-th pending item
 * (items beyond n are dropped).  unit: tear granularity (512 or 4096). */
struct simfs_pick {
	uint32_t unit;
	uint32_t n;
	struct simfs_fate *f;
};

/* Units (of pick->unit bytes) a DATA item covers. */
uint64_t simfs_item_units(const struct simfs_item *it, uint32_t unit);

/* A crash image of fs now: durable state plus the items pick keeps.  NULL
 * pick = nothing pending landed.  The image has the same config, device and
 * inode numbers, no hook, no open descriptors, and its own getrandom stream. */
struct simfs *simfs_crash(struct simfs *fs, const struct simfs_pick *pick);

/* Power cut in place: fs takes image's contents (image is consumed); every
 * descriptor open on fs dies (calls on it fail with EIO, close succeeds), as
 * after a machine crash whose process we then let finish.  Hook and crash
 * point count carry on. */
void simfs_reset(struct simfs *fs, struct simfs *image);

/* Write fs's visible tree (not /sys) under realdir, which must exist.  A crash
 * image materialised this way can be opened by atomio on real files (its
 * catalog holds simfs inode numbers: use ATOMIO_FORCE_PATHS).  0 or -errno. */
int simfs_materialize(struct simfs *fs, const char *realdir);

/* --- enumerating picks ------------------------------------------------------- */

struct simfs_enum {
	uint32_t unit;           /* tear granularity: 512 or 4096 */
	uint64_t exhaustive_cap; /* every combination when there are at most this many */
	uint64_t samples;        /* else this many (the first two: nothing, everything) */
	uint64_t seed;           /* for the samples */
};

/* How many picks the enumeration has now; *exhaustive (may be NULL) tells
 * whether they are every combination of every item's fates (drop, keep, and
 * every tear: all unit subsets up to 4 units, else each prefix, suffix, hole
 * and single unit).  Deterministic: the same pending items, e and index give
 * the same pick. */
uint64_t simfs_enum_count(struct simfs *fs, const struct simfs_enum *e, bool *exhaustive);
/* Pick number idx of that enumeration (allocates pick->f). */
int simfs_enum_pick(struct simfs *fs, const struct simfs_enum *e, uint64_t idx, struct simfs_pick *pick);
/* A random pick (sampled strategy) from seed. */
int simfs_random_pick(struct simfs *fs, uint32_t unit, uint64_t seed, struct simfs_pick *pick);
void simfs_pick_free(struct simfs_pick *pick);

/* Call fn on every crash image of fs now, as enumerated by e.  While fn runs
 * the calling thread's system calls go to the image (simfs_enter), so that
 * atomio_open there recovers it.  The image is freed after fn returns.  Stops
 * at the first nonzero return of fn and returns it; else 0.  *count (may be
 * NULL) gets the number of images visited. */
typedef int (*simfs_image_fn)(struct simfs *img, const struct simfs_pick *pick, uint64_t idx,
			      void *arg);
int simfs_foreach_image(struct simfs *fs, const struct simfs_enum *e, simfs_image_fn fn, void *arg,
			uint64_t *count);

/* Text form of a pick, for reproducers: "u512:K,D,T2.3.0,..." (K keep, D drop,
 * Tkind.arg.bits tear).  simfs_pick_format returns a malloc'd string. */
char *simfs_pick_format(const struct simfs_pick *pick);
int simfs_pick_parse(const char *s, struct simfs_pick *pick);

#endif
