/*
 * lazy.c: the read index of visible groups (shm.h, struct lz_file), so that
 * every process's reads see lazy groups before they are home.
 *
 * STEP 0 OF ISSUE 36: stubs stronger than the real thing.  commit_lazy is a
 * durable commit (commit.c), so nothing is ever pending: no group needs
 * indexing and every read goes to the file.
 */
#include <errno.h>
#include <sys/stat.h>

#include "internal.h"
#include "shm.h"

int lz_index_locked(atomio *st, uint32_t idx1)
{
	ASSERT_LOCKED(st);
	(void)idx1;
	return 0;
}

void lz_unindex_locked(atomio *st, uint32_t idx1)
{
	ASSERT_LOCKED(st);
	(void)idx1;
}

void lz_rebuild_locked(atomio *st) { ASSERT_LOCKED(st); }

ssize_t lz_preadv(atomio *st, int file, const struct iovec *iov, int iovcnt, off_t off)
{
	(void)st, (void)file, (void)iov, (void)iovcnt, (void)off;
	return -ENOSYS; /* never called while nothing is indexed */
}

int lz_file_size(atomio *st, int file, uint64_t *size)
{
	struct afile *f = file_app(st, file);
	if (!f)
		return -EINVAL;
	int fd = __atomic_load_n(&f->hfd, __ATOMIC_ACQUIRE);
	struct stat sb;
	if (atomio_sys->fstat(fd >= 0 ? fd : f->fd, &sb) < 0)
		return -errno;
	*size = (uint64_t)sb.st_size;
	return 0;
}

int atomio_file_size(atomio *st, int file, uint64_t *size)
{
	if (!st || !size)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	fd_use_begin(st);
	int r = lz_file_size(st, file, size);
	fd_use_end(st);
	return r;
}

int atomio_lazy_pending(atomio *st, int file)
{
	if (!st)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	if (!file_app(st, file))
		return -EINVAL;
	return 0;
}
