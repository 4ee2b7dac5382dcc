/*
 * model.h: an in-memory model of data files for oracles: apply the same
 * writes and size changes as a group does, compare with the real files.
 */
#ifndef ATOMIO_MODEL_H
#define ATOMIO_MODEL_H

#include "t.h"

struct mfile {
	uint8_t *b;
	size_t size, cap;
};

static inline void m_reserve(struct mfile *m, size_t n)
{
	if (n <= m->cap)
		return;
	size_t c = m->cap ? m->cap : 4096;
	while (c < n)
		c *= 2;
	m->b = realloc(m->b, c);
	memset(m->b + m->cap, 0, c - m->cap);
	m->cap = c;
}

static inline void m_write(struct mfile *m, const void *buf, size_t len, uint64_t off)
{
	m_reserve(m, off + len);
	if (len) /* an empty model has no buffer yet */
		memcpy(m->b + off, buf, len);
	if (off + len > m->size)
		m->size = off + len;
}

static inline void m_setsize(struct mfile *m, uint64_t size)
{
	m_reserve(m, size);
	if (size < m->size)
		memset(m->b + size, 0, m->size - size);
	m->size = size;
}

static inline struct mfile m_copy(const struct mfile *m)
{
	struct mfile c = {0};
	m_reserve(&c, m->size ? m->size : 1);
	if (m->size)
		memcpy(c.b, m->b, m->size);
	c.size = m->size;
	return c;
}

/* 0 when the file at path equals the model; else prints where it differs. */
static inline int m_compare(const struct mfile *m, const char *path, int quiet)
{
	size_t len;
	uint8_t *d = t_slurp(path, &len);
	int r = 0;
	if (!d && m->size == 0)
		return 0;
	if (!d || len != m->size) {
		if (!quiet)
			fprintf(stderr, "%s: size %zu, model %zu\n", path, d ? len : 0, m->size);
		r = 1;
	} else {
		for (size_t i = 0; i < len; i++)
			if (d[i] != m->b[i]) {
				if (!quiet)
					fprintf(stderr, "%s: byte %zu is %02x, model %02x\n", path, i,
						d[i], m->b[i]);
				r = 1;
				break;
			}
	}
	free(d);
	return r;
}

/* As if no home write had reached the media since the file was created
 * empty: cut it to zero bytes. */
static inline void t_wipe(const char *path)
{
	CHECK(truncate(path, 0) == 0);
}

/* Overwrite a file's bytes with garbage, keeping its size. */
static inline void t_clobber(const char *path, uint8_t v)
{
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	struct stat sb;
	fstat(fd, &sb);
	uint8_t buf[65536];
	memset(buf, v, sizeof(buf));
	for (off_t o = 0; o < sb.st_size; o += (off_t)sizeof(buf)) {
		size_t n = (size_t)(sb.st_size - o) < sizeof(buf) ? (size_t)(sb.st_size - o) : sizeof(buf);
		CHECK(pwrite(fd, buf, n, o) == (ssize_t)n);
	}
	close(fd);
}

#endif
