/* A process that opened an O_DIRECT file with the kernel fast path, after
 * another process registered the path anew (unlinked it and created it again,
 * as PostgreSQL drops and makes relation files): its descriptor names the old
 * inode.  Its reads and its groups -- the fast path's in-place writes too,
 * which go through that descriptor -- must reach the new file.  A test
 * backend reports atomic-write limits and performs RWF_ATOMIC writes as plain
 * RWF_DSYNC ones (as t_fastpath), so this runs on any filesystem. */
#include <sys/wait.h>

#include "sys.h"
#include "t.h"

static struct atomio_sysops fake;

static int fake_statx(int dirfd, const char *path, int flags, unsigned mask, struct atomio_statx *stx)
{
	int r = atomio_sys_linux.statx(dirfd, path, flags, mask, stx);
	if (r == 0 && (mask & ATOMIO_STATX_WRITE_ATOMIC)) {
		stx->stx_mask |= ATOMIO_STATX_WRITE_ATOMIC;
		stx->stx_attributes |= ATOMIO_STATX_ATTR_WRITE_ATOMIC;
		stx->stx_atomic_write_unit_min = 4096;
		stx->stx_atomic_write_unit_max = 65536;
		stx->stx_atomic_write_segments_max = 1;
	}
	return r;
}

static ssize_t fake_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf & ~RWF_ATOMIC);
}

#define PG 4096

static int file_is(const char *path, int c, size_t len)
{
	size_t n;
	uint8_t *d = t_slurp(path, &n);
	int ok = d && n == len;
	for (size_t i = 0; ok && i < n; i++)
		ok = d[i] == c;
	if (!ok)
		fprintf(stderr, "%s: %zu bytes, first '%c': expected %zu of '%c'\n", path, n,
			d && n ? d[0] : '-', len, c);
	free(d);
	return ok;
}

int main(void)
{
	fake = atomio_sys_linux;
	fake.name = "fake-atomic";
	fake.statx = fake_statx;
	fake.pwritev = fake_pwritev;
	atomio_sys_set(&fake);
	t_dir();
	const char *log = t_path("log"), *f = t_path("f.dat");
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_FAST_PATH_FORCE;
	atomio *a;
	CHECK_OK(atomio_open(log, &o, &a));
	int id = atomio_file_open(a, f, O_CREAT | O_DIRECT, 0644);
	if (id == -EINVAL)
		t_skip("O_DIRECT not supported on %s", t_dir());
	CHECK(id >= 0);
	char *buf;
	CHECK_OK(posix_memalign((void **)&buf, PG, PG));
	memset(buf, 'o', PG);
	CHECK_EQ(atomio_pwrite(a, id, buf, PG, 0), PG);
	struct atomio_stats s0;
	CHECK_OK(atomio_stats(a, &s0));
	CHECK(s0.fast_writes == 1); /* the fast path serves this file */

	pid_t p = fork();
	if (p == 0) {
		atomio *b;
		CHECK_OK(atomio_open(log, &o, &b));
		CHECK_OK(unlink(f));
		CHECK_EQ(atomio_file_open(b, f, O_CREAT | O_EXCL | O_DIRECT, 0644), id);
		memset(buf, 'n', PG);
		CHECK_EQ(atomio_pwrite(b, id, buf, PG, 0), PG);
		CHECK_OK(atomio_close(b));
		_exit(0);
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	CHECK(file_is(f, 'n', PG));

	/* this process reads the new file */
	memset(buf, 0, PG);
	CHECK_EQ(atomio_pread(a, id, buf, PG, 0), PG);
	CHECK(buf[0] == 'n' && buf[PG - 1] == 'n');
	/* and writes it: an aligned page the fast path would take */
	memset(buf, 'A', PG);
	CHECK_EQ(atomio_pwrite(a, id, buf, PG, 0), PG);
	CHECK(file_is(f, 'A', PG));
	memset(buf, 0, PG);
	CHECK_EQ(atomio_pread(a, id, buf, PG, 0), PG);
	CHECK(buf[0] == 'A' && buf[PG - 1] == 'A');
	CHECK_OK(atomio_close(a));
	CHECK(file_is(f, 'A', PG));
	free(buf);
	atomio_sys_set(NULL);
	printf("ok: a process with the fast path reads and writes the file registered anew by another\n");
	return 0;
}
