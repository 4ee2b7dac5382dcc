/*
 * shm.c: the state a store's processes share (shm.h): the file beside the
 * log, its layout, the robust mutex and the state's two copies, waits and
 * wakes, the process slots and their liveness, the groups' entries and the
 * arena, and the reaping of processes that died.  Below everything that
 * uses the state (commit.c, checkpoint.c, ...); above sys.c and util.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "shm.h"

/* --- the file ---------------------------------------------------------------- */

/* LOG-shm; for a log whose name leaves no room for "-shm" (NAME_MAX), a
 * name of the same directory made from it: .atomio-HASH-shm. */
static char *shm_name(const char *log_path)
{
	const char *slash = strrchr(log_path, '/');
	const char *base = slash ? slash + 1 : log_path;
	size_t n = strlen(log_path), dn = (size_t)(base - log_path);
	char *p = malloc(n + 40);
	if (!p)
		return NULL;
	if (strlen(base) + 4 <= NAME_MAX)
		snprintf(p, n + 40, "%s-shm", log_path);
	else
		snprintf(p, n + 40, "%.*s.atomio-%016llx-shm", (int)dn, log_path,
			 (unsigned long long)XXH3_64bits(base, strlen(base)));
	return p;
}

/* Where the shared state lives: in /dev/shm when it is a tmpfs (memory: no
 * device ever writes the state's pages back, so it costs the disk nothing),
 * named by the log's store id and inode (the id is random and readable only
 * by who may open the log: another user cannot guess the name in advance);
 * else beside the log.  Every process of a store finds the same file, given
 * the same /dev/shm (one machine, one mount namespace: atomio_open(3)).  No
 * store needed: atomio_log_remove names it from the log alone (store.c). */
char *shm_where_of(uint64_t store_id, int log_fd, const char *log_path)
{
	int d = atomio_sys->open("/dev/shm", O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
	if (d >= 0) {
		struct statfs sfs;
		struct stat ls;
		bool tmpfs = atomio_sys->fstatfs(d, &sfs) == 0 && sfs.f_type == TMPFS_MAGIC;
		atomio_sys->close(d);
		if (tmpfs && atomio_sys->fstat(log_fd, &ls) == 0) {
			char *p = malloc(64);
			if (p)
				snprintf(p, 64, "/dev/shm/atomio-%016llx-%llx", (unsigned long long)store_id,
					 (unsigned long long)ls.st_ino);
			return p;
		}
	}
	return shm_name(log_path);
}

/* Is the state file open as fd as safe as the log?  Whoever can write it can
 * steer what the store's processes write, where.  Without
 * ATOMIO_ALLOW_SHARED_LOG: this user's, writable by no other.  With it (the
 * log may be shared): this user's or the log's owner's, and writable by its
 * group or by others only where the log is too -- never by a user who could
 * not write the log. */
static int shm_file_check(atomio *st, int fd)
{
	const char *p = st->shm_path;
	struct stat sb, ls;
	int r = atomio_sys->fstat(fd, &sb);
	if (r == 0)
		r = atomio_sys->fstat(st->log_fd, &ls);
	if (r < 0)
		return r;
	if (!S_ISREG(sb.st_mode)) {
		st_err(st, "%s: the store's shared state is not a regular file", p);
		return ATOMIO_ENOTLOG;
	}
	bool bad;
	if (!(st->flags & ATOMIO_ALLOW_SHARED_LOG))
		bad = (sb.st_mode & (S_IWGRP | S_IWOTH)) || sb.st_uid != geteuid();
	else
		bad = (sb.st_uid != geteuid() && sb.st_uid != ls.st_uid) ||
		      ((sb.st_mode & S_IWOTH) && !(ls.st_mode & S_IWOTH)) ||
		      ((sb.st_mode & S_IWGRP) && !(ls.st_mode & S_IWOTH) &&
		       (!(ls.st_mode & S_IWGRP) || sb.st_gid != ls.st_gid));
	if (bad) {
		st_err(st, (st->flags & ATOMIO_ALLOW_SHARED_LOG)
				   ? "%s: the store's shared state is writable by users who cannot write the log, "
				     "or owned by another user (mode %04o, uid %u); chmod 600 it"
				   : "%s: the store's shared state is writable by users other than its owner, or "
				     "not owned by this user (mode %04o, uid %u); chmod 600 it or pass "
				     "ATOMIO_ALLOW_SHARED_LOG",
		       p, (unsigned)(sb.st_mode & 07777), (unsigned)sb.st_uid);
		return ATOMIO_EUNSAFE;
	}
	return 0;
}

int shm_open_file(atomio *st, const char *log_path)
{
	char *p = shm_where_of(st->store_id, st->log_fd, log_path);
	if (!p)
		return -ENOMEM;
	free(st->shm_path);
	st->shm_path = p;
	/* 0600, as the log: whoever can write the shared state can steer what
	 * the store's processes write.  O_NOFOLLOW: a link planted there is
	 * refused, not followed. */
	int fd = atomio_sys->open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		st_err(st, "opening %s, the store's shared state: %s", p, strerror(-fd));
		return fd;
	}
	int r = shm_file_check(st, fd);
	if (r < 0) {
		atomio_sys->close(fd);
		return r;
	}
	st->shm_fd = fd;
	return 0;
}

int shm_file_fresh(atomio *st)
{
	const char *p = st->shm_path;
	atomio_sys->close(st->shm_fd);
	st->shm_fd = -1;
	/* No process of this log is attached, but the file at the path may be
	 * mapped by the processes of another log: LOG-shm is named by the log's
	 * path, and a log replaced there (another store renamed over it) leaves
	 * its processes running on the old one.  Truncated and rebuilt, their
	 * state would become this one's.  Unlinked, they keep theirs (their
	 * last close then leaves this file be: shm_file_unlink).  In a shared
	 * sticky directory (/dev/shm) a file of another user cannot be unlinked:
	 * refused, named.  O_EXCL: the file used is the one created here. */
	int r = atomio_sys->unlink(p);
	int fd = r == 0 || r == -ENOENT ? atomio_sys->open(p, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)
					: r;
	if (fd < 0) {
		st_err(st, "%s: the store's shared state cannot be made anew (%s); remove it: no process "
			   "has the store open",
		       p, strerror(-fd));
		return fd == -EPERM || fd == -EACCES || fd == -EEXIST ? ATOMIO_EUNSAFE : fd;
	}
	r = shm_file_check(st, fd);
	if (r < 0) {
		atomio_sys->close(fd);
		return r;
	}
	st->shm_fd = fd;
	return 0;
}

void shm_file_unlink(atomio *st)
{
	struct stat a, b;
	if (st->shm_fd >= 0 && atomio_sys->fstat(st->shm_fd, &a) == 0 && atomio_sys->lstat(st->shm_path, &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		(void)atomio_sys->unlink(st->shm_path);
}

/* --- layout ------------------------------------------------------------------ */

/* Keys per dirty-set table: room for twice the dirty limit (where commits
 * wait) at half load, within bounds. */
static uint64_t dcap_for(uint64_t dirty_limit)
{
	uint64_t want = dirty_limit / 4096 * 4, cap = 1024;
	while (cap < want && cap < SHM_DCAP_MAX)
		cap *= 2;
	return cap;
}

/* The arena's size for a record area of area_size bytes. */
static uint64_t arena_for(uint64_t area_size)
{
	uint64_t a = area_size / 32 / 4096 * 4096;
	return a < SHM_ARENA_MIN ? SHM_ARENA_MIN : a > SHM_ARENA_MAX ? SHM_ARENA_MAX : a;
}

static void layout(struct shm *h, uint64_t dcap, uint64_t arena)
{
	uint64_t off = align_up(sizeof(struct shm), 4096);
	h->ents_off = off;
	off += align_up((uint64_t)SHM_ENTRIES * sizeof(struct shm_ent), 64);
	h->bats_off = off;
	off += align_up((uint64_t)SHM_BATCHES * sizeof(struct shm_bat), 64);
	h->procs_off = off;
	off += (uint64_t)SHM_PROCS * sizeof(struct shm_proc);
	h->guard_off = align_up(off, 64);
	off = h->guard_off + 2ull * SHM_GUARD * sizeof(struct gkey);
	h->dcap = dcap;
	h->dtab_off = align_up(off, 64);
	off = h->dtab_off + 2 * dcap * sizeof(struct dkey);
	/* the lazy read index (lazy.c): zero pages until a lazy group touches them */
	h->lzf_off = align_up(off, 64);
	off = h->lzf_off + (uint64_t)MAX_FILES * sizeof(struct lz_file);
	h->lzseg_off = align_up(off, 64);
	off = h->lzseg_off + (uint64_t)SHM_LZSEGS * sizeof(struct lz_seg);
	h->lzc_off = align_up(off, 64);
	off = h->lzc_off + (uint64_t)SHM_LZCHUNKS * sizeof(uint32_t);
	h->arena_off = align_up(off, 4096);
	h->arena_size = arena;
	h->size = h->arena_off + arena;
}

static int map_state(atomio *st, size_t len)
{
	void *p = NULL;
	int r;
	if (!st->exclusive)
		r = atomio_sys->shm_map(st->shm_fd, len, &p);
	else if (atomio_sys->shm_map)
		r = atomio_sys->shm_map(-1, len, &p);
	else
		r = (p = calloc(1, len)) ? 0 : -ENOMEM; /* large: fresh zero pages, untouched until used */
	if (r < 0) {
		st_err(st, "mapping the store's shared state (%zu bytes): %s", len, strerror(-r));
		return r;
	}
	st->sh_malloced = !st->exclusive ? false : !atomio_sys->shm_map;
	st->sh_unmap = st->sh_malloced ? NULL : atomio_sys->shm_unmap; /* the table may change meanwhile */
	st->sh = p;
	st->sh_len = len;
	return 0;
}

void shm_unmap_state(atomio *st)
{
	if (!st->sh)
		return;
	if (st->sh_malloced)
		free(st->sh);
	else
		(void)st->sh_unmap(st->sh, st->sh_len);
	st->sh = NULL;
	st->S = NULL;
}

int shm_build(atomio *st, const struct shm_start *in)
{
	const uint64_t ckpt_at = in->ckpt_at, limit = in->dirty_limit;
	struct shm geo = {0};
	layout(&geo, dcap_for(limit), arena_for(st->area_size));
	int r = 0;
	if (!st->exclusive) {
		/* Nothing of the old file is read: cut it to nothing, then to its
		 * size (zeros, and no block until written). */
		r = sys_ftruncate_full(st->shm_fd, 0);
		if (r == 0)
			r = sys_ftruncate_full(st->shm_fd, (off_t)geo.size);
		/* Its pages allocated now: a full tmpfs is an error of this open,
		 * not a SIGBUS at the first touch of a page later. */
		if (r == 0) {
			r = sys_fallocate(st->shm_fd, 0, 0, (off_t)geo.size);
			if (r == -EOPNOTSUPP || r == -ENOSYS || r == -EINVAL)
				r = 0;
		}
		if (r < 0) {
			st_err(st, "sizing %s, the store's shared state (%llu bytes): %s", st->shm_path,
			       (unsigned long long)geo.size, strerror(-r));
			return r;
		}
	}
	r = map_state(st, geo.size);
	if (r < 0)
		return r;
	struct shm *sh = st->sh;
	struct stat ls;
	r = atomio_sys->fstat(st->log_fd, &ls);
	if (r < 0)
		return r;
	sh->magic = SHM_MAGIC;
	sh->version = SHM_VERSION;
	sh->size = geo.size;
	sh->store_id = st->store_id;
	sh->epoch = st->rec_epoch;
	sh->log_dev = ls.st_dev;
	sh->log_ino = ls.st_ino;
	sh->ents_off = geo.ents_off;
	sh->bats_off = geo.bats_off;
	sh->procs_off = geo.procs_off;
	sh->arena_off = geo.arena_off;
	sh->dtab_off = geo.dtab_off;
	sh->guard_off = geo.guard_off;
	sh->lzf_off = geo.lzf_off;
	sh->lzseg_off = geo.lzseg_off;
	sh->lzc_off = geo.lzc_off;
	sh->dcap = geo.dcap;
	sh->arena_size = geo.arena_size;
	sh->ckpt_at = ckpt_at;
	sh->dirty_limit = limit;
	sh->lz_delay_ns = in->lz_delay_ns ? in->lz_delay_ns : LAZY_DELAY_DEFAULT_US * 1000ull;
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&sh->mu, &a);
	pthread_mutexattr_destroy(&a);
	/* after recovery: an empty log at the superblock's head */
	struct shm_state *s = &sh->s[0];
	s->next_seq = in->next_seq;
	s->zero_lo = in->zero_lo;
	s->head = s->tail = st->sb_local.head_off;
	s->head_seq = s->home_seq = st->sb_local.head_seq;
	s->home_off = s->tail;
	s->cat_gen = st->cat_gen;
	s->files_hi = atomic_load(&st->files_hi);
	s->tk_next = 1; /* ticket 0: no group (atomio_sync_ticket(0) returns at once) */
	atomic_store(&sh->cur, 0);
	sh->sb = st->sb_local;
	st->sbp = &sh->sb;
	atomic_store(&sh->stats.groups_recovered, st->rec_groups);
	atomic_store(&sh->stats.records_beyond_tail, st->rec_beyond);
	/* The lazy read index needs no start: zero is empty (no file has segs,
	 * the seg pool's free list is empty and none of it taken, lazy.c). */
	/* Last: a process that joins from now on finds the state whole (it
	 * waits for LK_INIT, which this process holds until then). */
	__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
	return 0;
}

int shm_join(atomio *st)
{
	struct stat fs, ls;
	int r = atomio_sys->fstat(st->shm_fd, &fs);
	if (r == 0)
		r = atomio_sys->fstat(st->log_fd, &ls);
	if (r < 0)
		return r;
	if (fs.st_size == 0) {
		st_err(st, "%s: the store's shared state is empty, while other processes have the store "
			   "open: they keep theirs where this process does not see it (another /dev/shm, "
			   "another mount namespace?)", st->shm_path);
		return ATOMIO_ECORRUPT;
	}
	if (fs.st_size < (off_t)sizeof(struct shm) || fs.st_size > (off_t)1 << 32) {
		st_err(st, "%s: the store's shared state is %lld bytes: not one this atomio built "
			   "(another process has the store open, so it is not rebuilt)",
		       st->shm_path, (long long)fs.st_size);
		return ATOMIO_ECORRUPT;
	}
	r = map_state(st, (size_t)fs.st_size);
	if (r < 0)
		return r;
	struct shm *sh = st->sh, geo = {0};
	const char *why = NULL;
	if (sh->magic != SHM_MAGIC || sh->version != SHM_VERSION)
		why = "no atomio shared state of this version";
	else if (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE))
		why = "never finished by the process that built it";
	else if (sh->size != (uint64_t)fs.st_size || sh->dcap < 1024 || sh->dcap > SHM_DCAP_MAX ||
		 (sh->dcap & (sh->dcap - 1)) || sh->arena_size != arena_for(st->area_size))
		why = "its sizes do not add up";
	else if (sh->store_id != st->store_id || sh->log_dev != ls.st_dev || sh->log_ino != ls.st_ino)
		why = "it belongs to another log";
	else if (sh->epoch != st->sb_local.epoch)
		why = "it belongs to an earlier opening of the log";
	if (!why) {
		layout(&geo, sh->dcap, sh->arena_size);
		if (geo.size != sh->size || geo.ents_off != sh->ents_off || geo.bats_off != sh->bats_off ||
		    geo.procs_off != sh->procs_off || geo.arena_off != sh->arena_off ||
		    geo.dtab_off != sh->dtab_off || geo.guard_off != sh->guard_off ||
		    geo.lzf_off != sh->lzf_off || geo.lzseg_off != sh->lzseg_off || geo.lzc_off != sh->lzc_off)
			why = "its layout does not add up";
	}
	if (why) {
		st_err(st, "%s: the store's shared state is damaged: %s; another process has the store "
			   "open, so it is not rebuilt: close every process of the store and open it again",
		       st->shm_path, why);
		return ATOMIO_ECORRUPT;
	}
	st->rec_epoch = sh->epoch;
	st->sbp = &sh->sb;
	return 0;
}

/* --- the mutex and the state ---------------------------------------------------- */

/* ... the lazy groups' FIFO and counts (commit.c, LAZY GROUPS): an entry
 * the dead holder finished and freed in place leaves it (owner 0), as does
 * one no longer queued nor in a live batch (normalize_locked made it
 * FILLING: its dead owner was queueing it); q_eager, lz_n and lz_bytes are
 * counted again, and the read index rebuilt from what is left (lazy.c). */
static void normalize_lazy_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	struct shm *sh = st->sh;
	struct shm_state *S = st->S;
	uint32_t prev = 0, kept = 0, steps = 0;
	uint64_t bytes = 0;
	for (uint32_t i = S->lz_head; i && i <= SHM_ENTRIES && steps < S->lz_n; steps++) {
		struct shm_ent *e = shm_ent(sh, i);
		uint32_t next = i == S->lz_tail ? 0 : e->lz_next;
		uint32_t es = atomic_load(&e->state);
		/* finished in place (its state is written there), not yet freed:
		 * nobody else would free it */
		if (atomic_load(&e->owner) && es == ENT_DONE && (atomic_load(&e->flags) & ENT_LAZY))
			shm_ent_free(st, i);
		if (!atomic_load(&e->owner) || !(atomic_load(&e->flags) & ENT_VISIBLE) ||
		    (es != ENT_QUEUED && es != ENT_BATCHED)) {
			if (prev)
				shm_ent(sh, prev)->lz_next = next;
			else
				S->lz_head = next;
		} else {
			prev = i;
			kept++;
			if (e->blk < sh->arena_size)
				bytes += shm_blk(sh, e->blk)->size;
		}
		i = next;
	}
	S->lz_n = kept;
	S->lz_tail = prev;
	if (!kept)
		S->lz_head = 0;
	S->lz_bytes = bytes;
	uint32_t eager = 0;
	steps = 0;
	for (uint32_t i = S->q_head; i && i <= SHM_ENTRIES && steps < S->q_len; steps++) {
		if (!(atomic_load(&shm_ent(sh, i)->flags) & ENT_LAZY))
			eager++;
		if (i == S->q_tail)
			break;
		i = shm_ent(sh, i)->next;
	}
	S->q_eager = eager;
	if (st->rebuild_locked)
		st->rebuild_locked(st); /* the read index, from the FIFO just made whole (lazy.c) */
}

/* After a holder died inside the mutex: its writes outside the state that the
 * state never published are undone where they could mislead (shm.h).  A
 * group's state must say where the published state has it: in the queue
 * (reachable from q_head), in a live batch (its batch number names one), or
 * nowhere -- then the process that died was queueing it (its own group), and
 * it is reaped with it (as one still filling). */
static void normalize_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	struct shm *sh = st->sh;
	struct shm_state *S = st->S;
	static _Thread_local uint8_t inq[SHM_ENTRIES / 8];
	memset(inq, 0, sizeof(inq));
	/* A holder that died reaping may have taken a dead process's private
	 * group out of the queue in its copy and freed its entry, in place
	 * (reap_one_locked): the published queue still names that entry, and
	 * its predecessor's link may already pass it.  Drop from the queue
	 * every entry freed (owner 0: a queued group is freed by no one else),
	 * and end it where its links end.  (Entries are taken only with the
	 * mutex held: none was taken again since.) */
	uint32_t prev = 0, kept = 0, steps = 0;
	for (uint32_t i = S->q_head; i && i <= SHM_ENTRIES && steps < S->q_len; steps++) {
		struct shm_ent *e = shm_ent(sh, i);
		uint32_t next = i == S->q_tail ? 0 : e->next;
		if (!atomic_load(&e->owner)) {
			if (prev)
				shm_ent(sh, prev)->next = next;
			else
				S->q_head = next;
		} else {
			prev = i;
			kept++;
		}
		i = next;
	}
	S->q_len = kept;
	S->q_tail = prev;
	if (!kept)
		S->q_head = 0;
	steps = 0;
	for (uint32_t i = S->q_head; i && i <= SHM_ENTRIES && steps < S->q_len; steps++) {
		inq[(i - 1) / 8] |= (uint8_t)(1u << ((i - 1) % 8));
		if (i == S->q_tail)
			break;
		i = shm_ent(sh, i)->next;
	}
	for (uint32_t i = 1; i <= SHM_ENTRIES; i++) {
		struct shm_ent *e = shm_ent(sh, i);
		uint32_t es = atomic_load(&e->state);
		if (es != ENT_QUEUED && es != ENT_BATCHED)
			continue;
		uint64_t k = e->batch;
		unsigned b = k % SHM_BATCHES;
		bool live = k < S->batch_next && S->bstate[b] != BAT_FREE && shm_bat(sh, k)->k == k;
		if (inq[(i - 1) / 8] & (1u << ((i - 1) % 8)))
			atomic_store(&e->state, ENT_QUEUED);
		else if (live)
			atomic_store(&e->state, ENT_BATCHED);
		else
			atomic_store(&e->state, ENT_FILLING);
	}
	normalize_lazy_locked(st); /* (which has the read index rebuilt: st->rebuild_locked) */
}

static void reap_one_locked(atomio *st, uint32_t slot1);

/* After a holder died inside the mutex: it may have been reaping, and have
 * marked a dead process's slot free (in place, reap_one_locked's last step)
 * before it published the state that releases what that process held; no
 * reap looks at a free slot again.  Release what the published state still
 * gives to a free slot (a process detaches only once it holds nothing). */
static void reap_unattached_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	const struct shm_state *S = st->S;
	for (uint32_t i = 0; i < SHM_PROCS; i++) {
		uint32_t s1 = i + 1;
		if (atomic_load(&shm_procs(st->sh)[i].state))
			continue;
		bool named = S->log_owner == s1 || S->ckpt_owner == s1 || S->zero_owner == s1 || S->lz_flusher == s1 ||
			     S->ckpt_wanted == s1 || ((S->role_wait[i / 64] >> (i % 64)) & 1);
		for (unsigned b = 0; b < SHM_BATCHES && !named; b++)
			named = S->bstate[b] != BAT_FREE && S->bowner[b] == s1;
		if (named)
			reap_one_locked(st, s1);
	}
}

void shm_lock(atomio *st)
{
	ASSERT_UNLOCKED(st);
	ASSERT_HELD(!HOLDS(st->own_holder), "sh->mu taken with st->lock held (the lock order)");
	struct shm *sh = st->sh;
	int r = pthread_mutex_lock(&sh->mu);
	bool dead = r == EOWNERDEAD;
	if (dead) {
		/* Its holder died: the current state copy is whole (shm.h). */
		pthread_mutex_consistent(&sh->mu);
	} else if (r) {
		/* ENOTRECOVERABLE: only if a holder unlocked without making it
		 * consistent, which this code never does. */
		abort();
	}
	uint32_t c = atomic_load_explicit(&sh->cur, memory_order_relaxed);
	sh->s[1 - c] = sh->s[c];
	st->S = &sh->s[1 - c];
	HOLD_SET(st->mu_holder);
	if (dead) {
		normalize_locked(st);
		reap_unattached_locked(st);
		(void)shm_reap_locked(st, true);
	}
}

void shm_unlock(atomio *st)
{
	ASSERT_LOCKED_DROPS(st);
	ASSERT_HELD(!dbg_nodrop(), "sh->mu let go inside a _locked function (a _locked_drops one?)");
	struct shm *sh = st->sh;
	uint32_t w = (uint32_t)(st->S - sh->s);
	/* One store publishes everything this holder changed (shm.h). */
	atomic_store_explicit(&sh->cur, w, memory_order_release);
	st->S = NULL;
	HOLD_CLEAR(st->mu_holder);
	pthread_mutex_unlock(&sh->mu);
}

/* --- waits and wakes ------------------------------------------------------------- */

static int wait_word_locked_drops(atomio *st, _Atomic uint32_t *word, _Atomic uint32_t *waiters, uint64_t ns)
{
	ASSERT_LOCKED_DROPS(st);
	uint32_t seen = atomic_load(word); /* under the mutex: no wake is lost */
	atomic_fetch_add(waiters, 1);
	shm_unlock(st);
	int r = sys_futex_wait(word, seen, ns);
	atomic_fetch_sub(waiters, 1);
	shm_lock(st);
	return r;
}

/* A waiter reaps when it wakes, by its bound or by any event, once no reap
 * has run for SHM_REAP_NS (shm_reap_locked's own limit, store-wide): not only
 * when its wait runs out, since a steady stream of events of others (frees,
 * commits) may wake it again and again while a dead process holds what it
 * waits for -- the arena's head, a role -- and no wait ever runs out. */
void shm_wait_locked_drops(atomio *st, struct shm_ev *ev)
{
	ASSERT_LOCKED_DROPS(st);
	(void)wait_word_locked_drops(st, &ev->seq, &ev->waiters, SHM_REAP_NS);
	(void)shm_reap_locked(st, false);
}

bool shm_wait_ns_locked_drops(atomio *st, struct shm_ev *ev, uint64_t ns)
{
	ASSERT_LOCKED_DROPS(st);
	return wait_word_locked_drops(st, &ev->seq, &ev->waiters, ns) == -ETIMEDOUT;
}

void shm_wait_ent_locked_drops(atomio *st, struct shm_ent *e)
{
	ASSERT_LOCKED_DROPS(st);
	(void)wait_word_locked_drops(st, &e->wake, &e->waiting, SHM_REAP_NS);
	(void)shm_reap_locked(st, false); /* as shm_wait_locked_drops */
}

void shm_wake(atomio *st, struct shm_ev *ev)
{
	(void)st;
	atomic_fetch_add(&ev->seq, 1);
	if (atomic_load(&ev->waiters))
		(void)sys_futex_wake(&ev->seq, INT_MAX);
}

void shm_wake_ent(struct shm_ent *e)
{
	atomic_fetch_add(&e->wake, 1);
	if (atomic_load(&e->waiting))
		(void)sys_futex_wake(&e->wake, INT_MAX);
}

/* --- processes --------------------------------------------------------------------- */

bool shm_alive(atomio *st, uint32_t slot1)
{
	if (st->exclusive || slot1 == st->me)
		return true;
	/* Free lock byte: nobody holds that slot's description, so its process
	 * is gone (the kernel drops a description's locks when the last
	 * descriptor of it closes, at the latest when its process ends).  Any
	 * error: take it for alive (never adopt what a live process holds). */
	return sys_ofd_lock(st->log_fd, SYS_LK_TEST, F_WRLCK, LK_PROC + slot1 - 1, 1) != 0;
}

int shm_attach(atomio *st)
{
	struct shm *sh = st->sh;
	struct shm_proc *pr = shm_procs(sh);
	if (st->exclusive) {
		st->me = 1;
		atomic_store(&pr[0].state, 1);
		pr[0].pid = (uint32_t)getpid();
		return 0;
	}
	shm_lock(st);
	(void)shm_reap_locked(st, true); /* slots of processes gone are free again */
	int r = -EUSERS;
	for (uint32_t i = 0; i < SHM_PROCS; i++) {
		if (atomic_load(&pr[i].state))
			continue;
		/* Free in the table; its lock byte must be free too. */
		if (sys_ofd_lock(st->log_fd, SYS_LK_SET, F_WRLCK, LK_PROC + i, 1) < 0)
			continue;
		pr[i].pid = (uint32_t)getpid();
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		pr[i].attached_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		atomic_store(&pr[i].worker_idle, 0);
		atomic_store(&pr[i].state, 1);
		st->me = i + 1;
		r = 0;
		break;
	}
	shm_unlock(st);
	if (r < 0)
		st_err(st, "%s: %u processes have the store open already, the most it admits",
		       st->log_path, SHM_PROCS);
	return r;
}

void shm_detach(atomio *st)
{
	if (!st->sh || !st->me)
		return;
	struct shm_proc *pr = &shm_procs(st->sh)[st->me - 1];
	atomic_store(&pr->state, 0);
	if (!st->exclusive)
		(void)sys_ofd_lock(st->log_fd, SYS_LK_SET, F_UNLCK, LK_PROC + st->me - 1, 1);
	st->me = 0;
}

bool shm_all_gone(atomio *st)
{
	if (!atomio_sys->pid_alive)
		return false;
	bool any = false;
	for (uint32_t i = 0; i < SHM_PROCS; i++) {
		const struct shm_proc *p = &shm_procs(st->sh)[i];
		if (!atomic_load(&p->state))
			continue;
		any = true;
		if (atomio_sys->pid_alive((int)p->pid))
			return false;
	}
	return any;
}

/* --- entries and the arena --------------------------------------------------------- */

/* Index + 1 of the entry this thread freed last: where its next search
 * starts (a hint: any value is safe). */
static _Thread_local uint32_t ent_last;

int shm_ent_alloc(atomio *st, uint32_t *idx1)
{
	struct shm *sh = st->sh;
	/* From the entry this thread freed last, if any (usually free again):
	 * a thread keeps to a few entries, and a process touches few of the
	 * table's pages -- each a page fault at its first touch in each
	 * process (shm_arena_alloc_locked says why that counts); round the
	 * table, each commit took the next one and every process came to
	 * touch all of its 120 pages. */
	uint32_t start = ent_last ? ent_last - 1 : atomic_fetch_add(&sh->ent_hint, 1);
	for (uint32_t n = 0; n < SHM_ENTRIES; n++) {
		uint32_t i = (start + n) % SHM_ENTRIES;
		struct shm_ent *e = &shm_ents(sh)[i];
		uint32_t z = 0;
		if (atomic_load_explicit(&e->owner, memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&e->owner, &z, st->me))
			continue;
		atomic_store(&e->state, ENT_FILLING);
		atomic_store(&e->flags, 0);
		e->blk = UINT64_MAX;
		e->next = 0;
		e->result = 0;
		e->fast = 0;
		*idx1 = i + 1;
		return 0;
	}
	return -EAGAIN;
}

void shm_arena_free(atomio *st, uint64_t off)
{
	if (off < st->sh->arena_size)
		atomic_store(&shm_blk(st->sh, off)->freed, 1);
}

void shm_ent_free(atomio *st, uint32_t idx1)
{
	struct shm_ent *e = shm_ent(st->sh, idx1);
	if (e->blk != UINT64_MAX)
		shm_arena_free(st, e->blk);
	e->blk = UINT64_MAX;
	atomic_store(&e->flags, 0);
	atomic_store(&e->state, ENT_FREE);
	/* Last, one word: free from here on. */
	atomic_store(&e->owner, 0);
	ent_last = idx1;
	shm_wake(st, &st->sh->ev_space);
}

int shm_arena_alloc_locked(atomio *st, uint64_t size, uint32_t idx1, uint64_t *off)
{
	ASSERT_LOCKED(st);
	struct shm_state *S = st->S;
	const uint64_t sh_arena = st->sh->arena_size;
	uint64_t need = align_up(size, 64), tail = S->arena_tail, pos = tail % sh_arena;
	if (need > sh_arena)
		return -E2BIG;
	/* When nothing lives in the arena, the ring starts again at its
	 * beginning (nothing to skip: the head moves with the tail), so that
	 * the arena's pages a process touches stay about those that one
	 * stretch of groups in flight at once needs, not the whole arena:
	 * each page is a page fault at its first touch in every process that
	 * maps it (15 us here: docs/PERFORMANCE.md, "Processes as cheap as
	 * threads"), and every process copies its groups in and leads
	 * others'.  With the ring going round all 32 MiB, a new process
	 * faulted on 4 pages per commit until it had touched all 8192.  Only
	 * when empty: a lap cut short with groups still in it would leave the
	 * next lap only the room up to them. */
	if (pos && tail == S->arena_head) {
		tail += sh_arena - pos;
		S->arena_head = tail;
		pos = 0;
	}
	/* The headers below go where the published state says nothing lives
	 * (past the tail): a holder that dies before publishing leaves them
	 * unread. */
	if (pos + need > sh_arena) {
		uint64_t filler = sh_arena - pos;
		if (tail + filler + need - S->arena_head > sh_arena)
			return -EAGAIN;
		struct arena_blk *f = shm_blk(st->sh, pos);
		f->size = filler;
		f->entry = 0;
		f->cdata = 0;
		atomic_store(&f->freed, 1);
		tail += filler;
		pos = 0;
	}
	if (tail + need - S->arena_head > sh_arena)
		return -EAGAIN;
	struct arena_blk *b = shm_blk(st->sh, pos);
	b->size = need;
	b->entry = idx1;
	b->cdata = 0;
	atomic_store(&b->freed, 0);
	S->arena_tail = tail + need;
	*off = pos;
	return 0;
}

void shm_arena_advance_locked(atomio *st)
{
	ASSERT_LOCKED(st);
	struct shm_state *S = st->S;
	const uint64_t sh_arena = st->sh->arena_size;
	uint64_t head = S->arena_head;
	while (head < S->arena_tail) {
		uint64_t pos = head % sh_arena;
		struct arena_blk *b = shm_blk(st->sh, pos);
		if (b->size < 64 || b->size % 64 || b->size > sh_arena - pos ||
		    head + b->size > S->arena_tail) {
			shm_damaged_locked(st, "an arena block's size");
			return;
		}
		if (!atomic_load(&b->freed))
			break;
		head += b->size;
	}
	if (head != S->arena_head) {
		S->arena_head = head;
		shm_wake(st, &st->sh->ev_space);
	}
}

void shm_damaged_locked(atomio *st, const char *what)
{
	ASSERT_LOCKED(st);
	if (!st->S->failed)
		st_err(st, "%s: the store's shared state is damaged (%s does not add up): the store "
			   "fails for every process; reopening them all rebuilds it from the log",
		       st->shm_path ? st->shm_path : st->log_path, what);
	st_fail_locked(st, ATOMIO_ECORRUPT);
}

/* --- reaping ------------------------------------------------------------------------ */

/* Remove entry idx1 from the queue (a private group of a dead process: no
 * one else can lead it).  Mutex held. */
static void dequeue_locked(atomio *st, uint32_t idx1)
{
	ASSERT_LOCKED(st);
	struct shm_state *S = st->S;
	uint32_t prev = 0, steps = 0;
	for (uint32_t i = S->q_head; i && steps < S->q_len; steps++) {
		struct shm_ent *e = shm_ent(st->sh, i);
		if (i == idx1) {
			if (prev)
				shm_ent(st->sh, prev)->next = e->next;
			else
				S->q_head = e->next;
			if (S->q_tail == i)
				S->q_tail = prev;
			if (!S->q_head)
				S->q_tail = 0;
			S->q_len--;
			if (!(atomic_load(&e->flags) & ENT_LAZY) && S->q_eager)
				S->q_eager--;
			return;
		}
		if (i == S->q_tail)
			break;
		prev = i;
		i = e->next;
	}
}

static void reap_one_locked(atomio *st, uint32_t slot1)
{
	ASSERT_LOCKED(st);
	struct shm *sh = st->sh;
	struct shm_state *S = st->S;
	if (S->log_owner == slot1) {
		/* It may have been adding to the fast path's guard: trust none
		 * of it until a full checkpoint empties it (fastpath.c). */
		S->log_owner = 0;
		S->guard_bad = 1;
		S->fill_waiting = 0;
	}
	if (S->ckpt_owner == slot1) {
		/* It may have taken files' dirty flags and died before syncing
		 * them, and may have written a superblock: the next checkpoint
		 * syncs every file and reads the superblock back. */
		S->ckpt_owner = 0;
		S->ckpt_lost = 1;
		S->sb_stale = 1;
	}
	if (S->ckpt_wanted == slot1)
		S->ckpt_wanted = 0;
	if (S->zero_owner == slot1)
		S->zero_owner = 0; /* its chunk is zeroed again from zero_lo */
	if (S->lz_flusher == slot1)
		S->lz_flusher = 0; /* another process's worker takes it at its next look */
	S->role_wait[(slot1 - 1) / 64] &= ~(1ull << ((slot1 - 1) % 64));
	for (unsigned b = 0; b < SHM_BATCHES; b++)
		if (S->bstate[b] != BAT_FREE && S->bowner[b] == slot1) {
			S->bowner[b] = 0;
			S->orphans++;
		}
	for (uint32_t i = 1; i <= SHM_ENTRIES; i++) {
		struct shm_ent *e = shm_ent(sh, i);
		if (atomic_load(&e->owner) != slot1)
			continue;
		uint32_t es = atomic_load(&e->state);
		uint32_t fl = atomic_load(&e->flags);
		if (es == ENT_QUEUED && (fl & ENT_PRIVATE)) {
			dequeue_locked(st, i); /* its data died with it */
			shm_ent_free(st, i);
		} else if (es == ENT_QUEUED || es == ENT_BATCHED) {
			/* Committed all the same (nobody waits for it), then
			 * freed by whoever finishes it. */
			atomic_fetch_or(&e->flags, ENT_ORPHAN);
		} else {
			shm_ent_free(st, i); /* filling, done, or half taken */
		}
	}
	shm_arena_advance_locked(st);
	atomic_store(&shm_procs(sh)[slot1 - 1].state, 0);
	atomic_fetch_add(&sh->stats.adoptions, 1);
}

bool shm_reap_locked(atomio *st, bool force)
{
	ASSERT_LOCKED(st);
	if (st->exclusive)
		return false;
	struct shm *sh = st->sh;
	uint64_t now = mono_ns();
	if (!force && now - sh->reap_ns < SHM_REAP_NS)
		return false;
	sh->reap_ns = now;
	bool found = false;
	for (uint32_t i = 0; i < SHM_PROCS; i++) {
		if (!atomic_load(&shm_procs(sh)[i].state) || i + 1 == st->me || shm_alive(st, i + 1))
			continue;
		reap_one_locked(st, i + 1);
		found = true;
	}
	if (found) {
		shm_wake(st, &sh->ev_role);
		shm_wake(st, &sh->ev_home);
		shm_wake(st, &sh->ev_ckpt);
		shm_wake(st, &sh->ev_space);
	}
	return found;
}

void st_fail_locked(atomio *st, int err)
{
	ASSERT_LOCKED(st);
	/* First error wins; after it nothing more is committed, by any process
	 * of the store, because the state of the log or of a data file is no
	 * longer known (a failed fsync may have dropped dirty pages:
	 * PostgreSQL's "fsyncgate"). */
	if (!st->S->failed)
		st->S->failed = err ? err : -EIO;
}
