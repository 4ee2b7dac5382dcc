/* trace_replay.c: see trace_replay.h. */
#include "trace_replay.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../t.h"
#include "sys.h"

#define S atomio_sys
#define MAXFD 4096

void tr_mkdirs(struct simfs *fs, const char *path)
{
	char p[PATH_MAX];
	for (const char *s = strchr(path + 1, '/');; s = strchr(s + 1, '/')) {
		size_t n = s ? (size_t)(s - path) : strlen(path);
		memcpy(p, path, n);
		p[n] = 0;
		int r = simfs_mkdir(fs, p);
		CHECK(r == 0 || r == -EEXIST);
		if (!s)
			break;
	}
}

uint8_t *tr_slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	struct stat sb;
	CHECK(fstat(fd, &sb) == 0);
	uint8_t *b = malloc((size_t)sb.st_size + 1);
	CHECK(b);
	CHECK(sys_pread_full(fd, b, (size_t)sb.st_size, 0) == sb.st_size);
	close(fd);
	*len = (size_t)sb.st_size;
	return b;
}

uint64_t tr_replay(const uint8_t *t, size_t len, const char *dir,
		   void (*mark)(const struct tr_hdr *h, void *arg), void *arg)
{
	int map[MAXFD];
	for (int i = 0; i < MAXFD; i++)
		map[i] = -1;
	size_t off = 0;
	uint64_t ops = 0;
	while (off < len) {
		struct tr_hdr h;
		CHECK(len - off >= sizeof(h));
		memcpy(&h, t + off, sizeof(h));
		off += sizeof(h);
		CHECK(len - off >= h.pathlen + h.datalen);
		const char *path = (const char *)t + off;
		const uint8_t *data = t + off + h.pathlen;
		off += h.pathlen + h.datalen;
		CHECK(h.fd < MAXFD);
		int sfd = h.fd >= 0 ? map[h.fd] : -1;
		ops++;
		switch (h.kind) {
		case TR_OPEN: {
			/* /proc/self/fd/N names the run's descriptor N: here, its
			 * simfs twin (simfs serves /proc/self/fd with proc_fd). */
			char pp[64];
			int pfd;
			if (sscanf(path, "/proc/self/fd/%d", &pfd) == 1 && pfd >= 0 && pfd < MAXFD) {
				snprintf(pp, sizeof(pp), "/proc/self/fd/%d", map[pfd]);
				path = pp;
			}
			int r = S->open(path, h.flags, (mode_t)h.a);
			/* Reads outside the run's directory (the store reads /sys
			 * for the device's block size) are not modelled. */
			if (r < 0 && (h.flags & O_ACCMODE) == O_RDONLY && strncmp(path, dir, strlen(dir)))
				break;
			if (r < 0)
				printf("replay: open %s flags %#x: %s\n", path, h.flags, strerror(-r));
			CHECK(r >= 0);
			map[h.fd] = r;
			break;
		}
		case TR_CLOSE:
			if (sfd >= 0)
				S->close(sfd);
			map[h.fd] = -1;
			break;
		case TR_WRITE: {
			CHECK(sfd >= 0);
			/* O_DIRECT writes need an aligned buffer, as in the run. */
			void *b = NULL;
			CHECK_OK(posix_memalign(&b, 4096, h.datalen ? h.datalen : 1));
			memcpy(b, data, h.datalen);
			struct iovec v = {b, h.datalen};
			CHECK_EQ(S->pwritev(sfd, &v, 1, (off_t)h.a, h.flags), (long long)h.datalen);
			free(b);
			break;
		}
		case TR_TRUNC:
			CHECK(sfd >= 0);
			CHECK_OK(S->ftruncate(sfd, (off_t)h.a));
			break;
		case TR_FALLOC:
			CHECK(sfd >= 0);
			CHECK_OK(S->fallocate(sfd, h.flags, (off_t)h.a, (off_t)h.b));
			break;
		case TR_FSYNC:
			CHECK_OK(S->fsync(sfd));
			break;
		case TR_FDATASYNC:
			CHECK_OK(S->fdatasync(sfd));
			break;
		case TR_RENAME:
			CHECK_OK(S->rename_noreplace(path, path + strlen(path) + 1));
			break;
		case TR_UNLINK:
			CHECK_OK(S->unlink(path));
			break;
		default:
			mark(&h, arg);
		}
	}
	return ops;
}
