/* A new log's area is written with zeros by the device where it can
 * (fallocate FALLOC_FL_WRITE_ZEROES, Linux 6.17+: no data moved), else by
 * log_create's own writes (logfile.c).  Checked through the ops table, with
 * three backends over the real filesystem, whose fallocate with
 * FALLOC_FL_WRITE_ZEROES
 *
 *  1. succeeds (as on a device with unmapping write-zeroes; the blocks are
 *     fallocated, so they read as zeros, as after the real call): it is
 *     asked for once, over the whole record area, and creation writes no
 *     byte of the area itself;
 *  2. fails with EOPNOTSUPP (this machine's virtio disk, an older kernel, a
 *     filesystem without it): creation writes the area itself;
 *  3. fails with EIO: the same, and the open succeeds.
 *
 * In each, a group is committed, the store reopened and the group read
 * back: the log is a log whichever way its zeros came. */
#include <stdbool.h>

#include "sys.h"
#include "t.h"

#define AREA (16u << 20)

static struct atomio_sysops ops;
static int wz_result;          /* what fallocate(FALLOC_FL_WRITE_ZEROES) returns */
static uint64_t wz_calls, wz_off, wz_len;
static uint64_t bytes_written; /* by pwritev, every file */

static int w_fallocate(int fd, int mode, off_t off, off_t len)
{
	if (mode == FALLOC_FL_WRITE_ZEROES) {
		wz_calls++;
		wz_off = (uint64_t)off;
		wz_len = (uint64_t)len;
		return wz_result;
	}
	return atomio_sys_linux.fallocate(fd, mode, off, len);
}

static ssize_t w_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	for (int i = 0; i < iovcnt; i++)
		bytes_written += iov[i].iov_len;
	return atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
}

static void one(const char *name, int result)
{
	wz_result = result;
	wz_calls = wz_off = wz_len = bytes_written = 0;
	char log[64];
	snprintf(log, sizeof(log), "log-%s", name);
	atomio *st;
	struct atomio_options o = t_opts(AREA);
	o.flags |= ATOMIO_ENGINE_PLAIN;
	CHECK_OK(atomio_open(t_path(log), &o, &st));
	uint64_t created = bytes_written;
	struct stat sb;
	CHECK_OK(stat(t_path(log), &sb) < 0 ? -errno : 0);
	printf("%s: write-zeroes asked %llu time(s) for [%llu, +%llu); creation wrote %llu bytes; log %llu bytes\n",
	       name, (unsigned long long)wz_calls, (unsigned long long)wz_off, (unsigned long long)wz_len,
	       (unsigned long long)created, (unsigned long long)sb.st_size);
	/* asked for once, over the record area: the end of the file */
	CHECK_EQ(wz_calls, 1);
	CHECK_EQ(wz_len, AREA);
	CHECK_EQ(wz_off + wz_len, (uint64_t)sb.st_size);
	if (result == 0)
		CHECK(created < AREA / 4); /* the header, superblock and catalog only */
	else
		CHECK(created >= AREA); /* every byte of the area by writes */

	int fd = atomio_file_open(st, t_path(name), O_CREAT, 0644);
	CHECK(fd >= 0);
	char buf[8192], back[8192];
	t_fill(buf, sizeof(buf), 7, 0);
	CHECK_EQ(atomio_pwrite(st, fd, buf, sizeof(buf), 4096), (ssize_t)sizeof(buf));
	CHECK_OK(atomio_close(st));
	CHECK_OK(atomio_open(t_path(log), &o, &st));
	fd = atomio_file_open(st, t_path(name), 0, 0);
	CHECK(fd >= 0);
	CHECK_EQ(atomio_pread(st, fd, back, sizeof(back), 4096), (ssize_t)sizeof(back));
	CHECK(memcmp(buf, back, sizeof(buf)) == 0);
	CHECK_OK(atomio_close(st));
}

int main(void)
{
	ops = atomio_sys_linux;
	ops.name = "write-zeroes";
	ops.fallocate = w_fallocate;
	ops.pwritev = w_pwritev;
	atomio_sys_set(&ops);
	one("device", 0);
	one("refused", -EOPNOTSUPP);
	one("failed", -EIO);
	return 0;
}
