/*
 * checkpoint.c: make the home writes durable, then free the whole log.
 *
 * Order (format.h, SYNC ORDER): every data file written since the last
 * checkpoint is synced first; only then does the superblock move the head past
 * the records that could redo those writes.  Were the superblock first, a
 * crash could leave a home write in the page cache only, with the record that
 * repairs it already given up.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

int sync_file(atomio *st, struct afile *f)
{
	int r;
	/* fsync where the size went down or was set: fdatasync need not carry
	 * a shrink on every filesystem.  Growth by writes is data-retrieval
	 * metadata, which fdatasync does carry. */
	do
		r = f->resized ? atomio_sys->fsync(f->fd) : atomio_sys->fdatasync(f->fd);
	while (r == -EINTR);
	atomic_fetch_add(&st->stats.data_syncs, 1);
	return r;
}

/* Role held, lock not held. */
int checkpoint_locked(atomio *st)
{
	pthread_mutex_lock(&st->lock);
	int failed = st->failed;
	uint64_t seq = st->next_seq, tail = st->tail;
	pthread_mutex_unlock(&st->lock);
	if (failed)
		return ATOMIO_EFAILED;

	bool any = tail != 0;
	for (uint32_t id = 0; id < MAX_FILES; id++) {
		struct afile *f = atomic_load(&st->files[id]);
		if (!f || f->fd < 0 || !(f->dirty || f->resized))
			continue;
		any = true;
		int r = sync_file(st, f);
		if (r < 0) {
			/* The kernel may have dropped the dirty pages with the
			 * error; a retried fsync could then "succeed".  Keep the
			 * log, refuse further work; recovery replays it. */
			st_err(st, "syncing data file %u: %s", id, strerror(-r));
			st_fail(st, r);
			return r;
		}
		f->dirty = f->resized = false;
		file_drop_cache(st, f);
	}
	if (!any)
		return 0;
	int r = st_write_sb(st, 0, seq, st->sb.epoch);
	if (r < 0) {
		st_fail(st, r);
		return r;
	}
	pthread_mutex_lock(&st->lock);
	st->tail = 0;
	pthread_mutex_unlock(&st->lock);
	/* Every record is dead now: no replay can overwrite a fast-path write. */
	guard_clear_all(st);
	atomic_fetch_add(&st->stats.checkpoints, 1);
	return 0;
}

int atomio_checkpoint(atomio *st)
{
	if (!st)
		return -EINVAL;
	role_acquire(st);
	int r = checkpoint_locked(st);
	role_release(st);
	return r;
}
