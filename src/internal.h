/*
 * internal.h: the store's in-memory state, shared by the modules of src/.
 */
#ifndef ATOMIO_INTERNAL_H
#define ATOMIO_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "atomio.h"
#include "format.h"
#include "sys.h"

#ifdef ATOMIO_DEBUG
#define ASSERT(c)                                                                          \
	do {                                                                               \
		if (!(c)) {                                                                \
			fprintf(stderr, "atomio: %s:%d: %s: assertion '%s' failed\n",      \
				__FILE__, __LINE__, __func__, #c);                         \
			abort();                                                           \
		}                                                                          \
	} while (0)
#else
#define ASSERT(c) ((void)0)
#endif

/* A registered data file. */
struct afile {
	uint32_t id;
	uint16_t cat_flags;         /* CAT_F_RELATIVE */
	char *path;                 /* as recorded in the catalog */
	uint64_t dev, ino, fsid;    /* identity recorded at registration */
	int fd;                     /* open in this session, or -1 */
	int open_flags;             /* as given to atomio_file_open */
	bool direct;                /* O_DIRECT */
	uint32_t dio_mem_align;     /* for O_DIRECT files */
	uint32_t dio_off_align;
	uint64_t max_size;          /* largest size its filesystem allows (<= MAX_OFFSET) */
	/* Written since the last checkpoint: needs fdatasync (dirty) or fsync
	 * (resized) before the log space that can redo it is reused.  Guarded
	 * by the commit role (only the leader writes home data). */
	bool dirty;
	bool resized;
};

/* One range of a group, as kept in memory until commit. */
struct seg {
	uint32_t file;
	uint16_t kind;  /* SEG_WRITE / SEG_SETSIZE */
	uint64_t off;   /* file offset or new size */
	uint64_t len;
	const void *src; /* data (tx arena or a caller's buffer during atomio_pwrite) */
};

struct arena_chunk {
	struct arena_chunk *next;
	size_t size, used;
	/* data follows, 4096-aligned */
};

#define TX_MAGIC 0x61746f6d74785f31ull /* "atomtx_1" */
#define TX_DEAD 0x646561645f74785full

enum tx_state { TX_OPEN, TX_QUEUED, TX_DONE };

struct atomio_tx {
	uint64_t magic;
	atomio *st;
	struct seg *segs;
	uint32_t nsegs, cap;
	uint64_t data_len;         /* sum of write lengths */
	struct arena_chunk *arena; /* newest first */
	/* commit queue */
	struct atomio_tx *qnext;
	enum tx_state state;
	int result;
	uint64_t seq;
	uint64_t rec_len;
	struct atomio_tx *pool_next; /* free list of the store's tx pool */
};

struct atomio {
	int log_fd;
	char *log_path;
	char *log_dir;       /* canonical directory of the log */
	bool log_direct;     /* log opened with O_DIRECT */
	uint32_t flags;      /* options flags */
	char *errbuf;
	size_t errbuf_size;

	/* geometry and persistent state (from the current superblock) */
	struct sb_disk sb;
	uint64_t store_id;
	uint32_t block;
	uint64_t area_off, area_size;
	uint64_t cat_off, cat_size;

	pthread_mutex_t lock;
	pthread_cond_t cond;

	/* commit pipeline, under lock */
	struct atomio_tx *q_head, *q_tail;
	bool leader;         /* someone holds the commit role */
	uint64_t next_seq;   /* seq of the next record written */
	uint64_t tail;       /* area offset of the next log write (block-aligned) */
	int failed;          /* 0, or the error that poisoned the store */
	unsigned open_txs;

	/* staging buffer for log writes, used only by the commit role */
	void *stage;
	size_t stage_cap;

	/* registered files: files[id] published with release/acquire */
	_Atomic(struct afile *) *files;
	uint32_t nfiles_cat;  /* entries in the catalog */
	uint32_t files_hi;    /* one past the highest id in the catalog loaded at open */
	uint64_t cat_gen;
	pthread_mutex_t cat_lock; /* serialises registrations */

	/* tx pool: recently ended txs are not reused at once, so that a use
	 * after commit finds TX_DEAD and gets -EINVAL instead of corrupting
	 * another group. */
	struct atomio_tx *pool_head, *pool_tail;
	unsigned pool_len;

	struct {
		_Atomic uint64_t commits, bytes_logged, bytes_home, log_syncs, data_syncs,
			checkpoints, groups_recovered, batches, log_full_waits;
	} stats;
};

#define POOL_KEEP 64u

/* store.c */
void st_err(atomio *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void st_fail(atomio *st, int err);
int st_write_sb(atomio *st, uint64_t head_off, uint64_t head_seq, uint64_t epoch);
int log_read(atomio *st, uint64_t off, void *buf, size_t len);
void *aligned_alloc_zero(size_t align, size_t size);

/* files.c */
int cat_load(atomio *st);
int cat_write_initial(int fd, uint64_t cat_off, uint64_t cat_size, uint64_t store_id);
struct afile *file_get(atomio *st, int id);
int file_resolve_path(atomio *st, const struct afile *f, char *out, size_t outsz);
int file_check_path(const char *path, uint16_t flags);
int file_identity(int fd, uint64_t *dev, uint64_t *ino, uint64_t *fsid);
uint64_t file_max_size(int fd);
void files_close_all(atomio *st);

/* commit.c */
int commit_tx(atomio_tx *tx);
int role_acquire(atomio *st);
void role_release(atomio *st);

/* checkpoint.c */
int checkpoint_locked(atomio *st);
int sync_file(atomio *st, struct afile *f);

/* recover.c */
int recover(atomio *st);

/* tx.c */
void tx_release(atomio_tx *tx);
void tx_pool_free(atomio *st);

#endif
