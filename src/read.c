/*
 * read.c: atomio_pread / atomio_preadv, the reads through the descriptors the
 * store holds for a registered file (files.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "shm.h"

static ssize_t preadv_file(atomio *st, int file, const struct iovec *iov, int iovcnt, off_t off);

/* Which reads see what (docs/API.md): a committed group's home writes are
 * in the page cache of the file (buffered files) or of its buffered twin
 * (O_DIRECT files, default) before the commit returns, so a buffered read of
 * that descriptor returns them without waiting for, or causing, their
 * write-back.  ATOMIO_DIRECT_HOME files and fast-path writes are on the
 * device by then: read with O_DIRECT. */
ssize_t atomio_preadv(atomio *st, int file, const struct iovec *iov, int iovcnt, off_t off)
{
	size_t total;
	if (!st || off < 0 || iov_total(iov, iovcnt, &total) < 0)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	fd_use_begin(st);
	ssize_t r = preadv_file(st, file, iov, iovcnt, off);
	fd_use_end(st);
	files_close_stale(st);
	return r;
}

static ssize_t preadv_file(atomio *st, int file, const struct iovec *iov, int iovcnt, off_t off)
{
	struct afile *f = file_app(st, file);
	if (!f)
		return -EINVAL;
	/* Lazy groups of some process not yet home: the overlay (lazy.c).  A
	 * group whose commit returned before this call is counted in n
	 * (lazy.c, THE INDEX); one that goes home meanwhile is in the file. */
	if (atomic_load_explicit(&shm_lzf(st->sh, f->id)->n, memory_order_acquire))
		return lz_preadv(st, file, iov, iovcnt, off);
	size_t done = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (!iov[i].iov_len)
			continue;
		ssize_t n = file_read_home(st, f, iov[i].iov_base, iov[i].iov_len, off + (off_t)done);
		if (n < 0)
			return done ? (ssize_t)done : n;
		done += (size_t)n;
		if ((size_t)n < iov[i].iov_len)
			break; /* end of file */
	}
	return (ssize_t)done;
}

ssize_t atomio_pread(atomio *st, int file, void *buf, size_t len, off_t off)
{
	if (len && !buf)
		return -EINVAL;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	return atomio_preadv(st, file, &iov, 1, off);
}
