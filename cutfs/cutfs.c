/*
 * cutfs: a power-cut filesystem for real programs (FUSE, libfuse3).
 *
 *   cutfs [--mode drop|tear] [--seed N] BACKING MOUNTPOINT [FUSE options]
 *
 * A passthrough of the directory BACKING, except that file data written and
 * not yet synced stays in cutfs's memory, as a disk's volatile cache (or the
 * page cache) would hold it.  It reaches BACKING ("the medium") only when the
 * program syncs the file: fsync, fdatasync (so also msync, sync_file_range
 * through the kernel's fsync), a write on an O_SYNC/O_DSYNC descriptor or
 * with RWF_DSYNC.  Writing "cut" to the control file MOUNTPOINT/.cutfs cuts
 * the power: every unsynced 512-byte sector is dropped (--mode drop), or each
 * one independently reaches the medium or not, with probability 1/2, from a
 * seeded random stream (--mode tear, the default: torn writes at sector
 * granularity, as LazyFS tears them).  From then on every operation but the
 * control file's fails with EIO, as on a machine without power; the caller
 * kills the programs, unmounts and mounts BACKING again (the reboot).
 * Reading .cutfs gives counters (sectors written, synced, kept and dropped at
 * the cut).
 *
 * The model, and where it is simpler than a disk:
 *  - Data is tracked per 512-byte sector of each file (inode); a write that
 *    covers part of a sector makes the whole sector volatile, with the rest
 *    of it read from the medium, so a cut keeps or loses whole sectors only.
 *  - Metadata is synchronous: create, mkdir, unlink, rename, link, truncate,
 *    fallocate, chmod and utimens reach BACKING at once (a journaling
 *    filesystem with synchronous metadata).  A truncate cuts the volatile
 *    sectors past the new size.  fallocate supports mode 0 and KEEP_SIZE only.
 *  - A sync writes the file's volatile sectors to BACKING without fsyncing
 *    BACKING: the machine running cutfs does not lose power, so BACKING is
 *    the medium as it is.
 *  - The file's size seen by programs is its size with the volatile writes;
 *    after a cut it is the medium's size, extended by any kept sector.
 * One mutex serializes the operations that touch file data: cutfs is for
 * crash tests, not for speed.
 */
#define FUSE_USE_VERSION 31
#include <fuse.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <search.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <unistd.h>

#define SECT 512u
#define CTL_NAME "/.cutfs"
#define NBUCKET 1024u

struct sect {
	uint64_t idx; /* sector number in the file */
	unsigned char data[SECT];
};

/* One file (inode) of BACKING that is open or has volatile sectors. */
struct pend {
	ino_t ino;
	int fd;         /* BACKING file, O_RDWR: the medium */
	uint64_t size;  /* size as programs see it (with volatile writes) */
	void *tree;     /* struct sect by idx (tsearch) */
	size_t nsect;
	int opens;
	bool gone;      /* unlinked: freed at the last release */
	struct pend *next;
};

/* An open file: the inode and whether its writes are synchronous. */
struct handle {
	struct pend *p;
	bool sync;
};

static int bfd = -1; /* BACKING directory */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct pend *buckets[NBUCKET];
static bool cut_done;
static bool mode_drop;
static uint64_t rng_state;
static struct {
	uint64_t written, synced, kept, dropped, cuts;
} ctr;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* "/a/b" -> "a/b", "/" -> "." : paths relative to BACKING. */
static const char *rel(const char *path)
{
	while (*path == '/')
		path++;
	return *path ? path : ".";
}

static bool is_ctl(const char *path) { return path && !strcmp(path, CTL_NAME); }

static int cmp_sect(const void *a, const void *b)
{
	uint64_t x = ((const struct sect *)a)->idx, y = ((const struct sect *)b)->idx;
	return x < y ? -1 : x > y;
}

static struct pend *pend_find(ino_t ino)
{
	for (struct pend *p = buckets[ino % NBUCKET]; p; p = p->next)
		if (p->ino == ino)
			return p;
	return NULL;
}

static void pend_drop_sectors(struct pend *p)
{
	while (p->tree) {
		struct sect *s = *(struct sect **)p->tree;
		tdelete(s, &p->tree, cmp_sect);
		free(s);
	}
	p->nsect = 0;
}

static void pend_free(struct pend *p)
{
	struct pend **pp = &buckets[p->ino % NBUCKET];
	while (*pp != p)
		pp = &(*pp)->next;
	*pp = p->next;
	pend_drop_sectors(p);
	close(p->fd);
	free(p);
}

/* Read the medium, zeros past its end. */
static int medium_read(int fd, unsigned char *buf, size_t len, uint64_t off)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	memset(buf + got, 0, len - got);
	return 0;
}

static int medium_write(int fd, const unsigned char *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pwrite(fd, buf + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)n;
	}
	return 0;
}

static uint64_t medium_size(int fd)
{
	struct stat st;
	return fstat(fd, &st) ? 0 : (uint64_t)st.st_size;
}

/* Write the volatile sectors of p that a sync (all) or a cut (each with
 * probability 1/2 in tear mode) lets through to the medium, then forget all of
 * them.  After a sync the medium has the size programs saw; after a cut it
 * keeps its own, grown to cover a kept sector (up to the size programs saw). */
struct settle {
	struct pend *p;
	bool all;
	int err;
	uint64_t end;
};

static void walk_write(const void *node, VISIT v, void *arg)
{
	struct settle *w = arg;
	if (v != postorder && v != leaf)
		return;
	const struct sect *s = *(const struct sect *const *)node;
	bool keep = w->all || (!mode_drop && (rng_next() & 1));
	if (!w->all)
		keep ? ctr.kept++ : ctr.dropped++;
	if (!keep)
		return;
	uint64_t off = s->idx * SECT;
	size_t len = SECT;
	if (off + len > w->p->size)
		len = off < w->p->size ? (size_t)(w->p->size - off) : 0;
	if (len && !w->err)
		w->err = medium_write(w->p->fd, s->data, len, off);
	if (off + len > w->end)
		w->end = off + len;
}

static int pend_settle(struct pend *p, bool all)
{
	struct settle w = {.p = p, .all = all};
	if (p->tree)
		twalk_r(p->tree, walk_write, &w);
	if (all) {
		ctr.synced += p->nsect;
		if (!w.err && medium_size(p->fd) != p->size && ftruncate(p->fd, (off_t)p->size))
			w.err = -errno;
	}
	pend_drop_sectors(p);
	if (!all)
		p->size = medium_size(p->fd);
	return w.err;
}

/* The volatile sector idx of p, created from the medium if absent (or as
 * zeros when the write covers all of it). */
static struct sect *pend_sector(struct pend *p, uint64_t idx, bool whole, int *err)
{
	struct sect key = {.idx = idx};
	void *found = tfind(&key, &p->tree, cmp_sect);
	if (found)
		return *(struct sect **)found;
	struct sect *s = malloc(sizeof(*s));
	if (!s) {
		*err = -ENOMEM;
		return NULL;
	}
	s->idx = idx;
	if (whole)
		memset(s->data, 0, SECT);
	else if ((*err = medium_read(p->fd, s->data, SECT, idx * SECT))) {
		free(s);
		return NULL;
	}
	if (!tsearch(s, &p->tree, cmp_sect)) {
		free(s);
		*err = -ENOMEM;
		return NULL;
	}
	p->nsect++;
	ctr.written++;
	return s;
}

struct collect {
	struct sect **v;
	size_t n, cap;
	uint64_t first;
	bool oom;
};

static void walk_collect(const void *node, VISIT v, void *arg)
{
	struct collect *c = arg;
	if (v != postorder && v != leaf)
		return;
	struct sect *s = *(struct sect *const *)node;
	if (s->idx < c->first)
		return;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;
		struct sect **nv = realloc(c->v, cap * sizeof(*nv));
		if (!nv) {
			c->oom = true;
			return;
		}
		c->v = nv, c->cap = cap;
	}
	c->v[c->n++] = s;
}

/* After a truncate (on the medium already): the volatile sectors past the
 * new size go, the one holding it is zeroed past it. */
static int pend_truncate(struct pend *p, uint64_t size)
{
	struct collect c = {.first = (size + SECT - 1) / SECT};
	if (p->tree)
		twalk_r(p->tree, walk_collect, &c);
	if (c.oom) {
		free(c.v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < c.n; i++) {
		tdelete(c.v[i], &p->tree, cmp_sect);
		free(c.v[i]);
		p->nsect--;
	}
	free(c.v);
	if (size % SECT) {
		struct sect key = {.idx = size / SECT};
		void *found = tfind(&key, &p->tree, cmp_sect);
		if (found) {
			struct sect *s = *(struct sect **)found;
			memset(s->data + size % SECT, 0, SECT - size % SECT);
		}
	}
	p->size = size;
	return 0;
}

/* The pend of the BACKING file 'path' (opened as fd0), created if absent. */
static struct pend *pend_get(const char *path, int fd0, int *err)
{
	struct stat st;
	if (fstat(fd0, &st)) {
		*err = -errno;
		return NULL;
	}
	struct pend *p = pend_find(st.st_ino);
	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p) {
		*err = -ENOMEM;
		return NULL;
	}
	/* its own descriptor: the program's may be read-only or O_APPEND, and
	 * unsynced sectors outlive the program's close */
	p->fd = openat(bfd, rel(path), O_RDWR | O_CLOEXEC);
	if (p->fd < 0) {
		*err = -errno;
		free(p);
		return NULL;
	}
	p->ino = st.st_ino;
	p->size = (uint64_t)st.st_size;
	p->next = buckets[p->ino % NBUCKET];
	buckets[p->ino % NBUCKET] = p;
	return p;
}

/* The pend of a path if it has one (no descriptor is opened). */
static struct pend *pend_of_path(const char *path)
{
	struct stat st;
	if (fstatat(bfd, rel(path), &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
		return NULL;
	return pend_find(st.st_ino);
}

/* The path is about to lose a link: if it is the last one, its pend goes
 * (now, or at its last release). */
static void pend_unlinking(const char *path)
{
	struct stat st;
	if (fstatat(bfd, rel(path), &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) || st.st_nlink > 1)
		return;
	struct pend *p = pend_find(st.st_ino);
	if (!p)
		return;
	if (p->opens)
		p->gone = true;
	else
		pend_free(p);
}

static void cut_power(void)
{
	for (unsigned b = 0; b < NBUCKET; b++)
		for (struct pend *p = buckets[b]; p; p = p->next)
			pend_settle(p, false);
	cut_done = true;
	ctr.cuts++;
	fprintf(stderr, "cutfs: cut (%s): %" PRIu64 " volatile sectors kept, %" PRIu64 " dropped\n",
		mode_drop ? "drop" : "tear", ctr.kept, ctr.dropped);
}

/* ---- FUSE operations ---- */

#define DEAD_CHECK() do { if (cut_done) return -EIO; } while (0)
#define LOCKED(expr) ({ pthread_mutex_lock(&mu); int r_ = (expr); pthread_mutex_unlock(&mu); r_; })

static int op_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	if (is_ctl(path)) {
		memset(st, 0, sizeof(*st));
		st->st_mode = S_IFREG | 0600;
		st->st_nlink = 1;
		return 0;
	}
	pthread_mutex_lock(&mu);
	int r = 0;
	if (cut_done)
		r = -EIO;
	else if (fstatat(bfd, rel(path), st, AT_SYMLINK_NOFOLLOW))
		r = -errno;
	else if (S_ISREG(st->st_mode)) {
		struct pend *p = pend_find(st->st_ino);
		if (p && (uint64_t)st->st_size != p->size) {
			st->st_size = (off_t)p->size;
			if (st->st_blocks < (blkcnt_t)((p->size + 511) / 512))
				st->st_blocks = (blkcnt_t)((p->size + 511) / 512);
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

static int op_readlink(const char *path, char *buf, size_t size)
{
	DEAD_CHECK();
	ssize_t n = readlinkat(bfd, rel(path), buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

/* A file, directory or link made through the mount belongs to the process
 * that made it, as on a real filesystem, when cutfs runs as root (mounted
 * with -o allow_other): PostgreSQL refuses a data directory it does not own,
 * and runs as no root.  The ownership is metadata: synchronous. */
static void own(const char *path)
{
	const struct fuse_context *c = fuse_get_context();
	if (geteuid() == 0 && c && (c->uid != 0 || c->gid != 0))
		(void)fchownat(bfd, rel(path), c->uid, c->gid, AT_SYMLINK_NOFOLLOW);
}

static int op_mknod(const char *path, mode_t mode, dev_t rdev)
{
	DEAD_CHECK();
	if (mknodat(bfd, rel(path), mode, rdev))
		return -errno;
	own(path);
	return 0;
}

static int op_mkdir(const char *path, mode_t mode)
{
	DEAD_CHECK();
	if (mkdirat(bfd, rel(path), mode))
		return -errno;
	own(path);
	return 0;
}

static int do_unlink(const char *path)
{
	pend_unlinking(path);
	return unlinkat(bfd, rel(path), 0) ? -errno : 0;
}

static int op_unlink(const char *path)
{
	DEAD_CHECK();
	return LOCKED(do_unlink(path));
}

static int op_rmdir(const char *path)
{
	DEAD_CHECK();
	return unlinkat(bfd, rel(path), AT_REMOVEDIR) ? -errno : 0;
}

static int op_symlink(const char *target, const char *path)
{
	DEAD_CHECK();
	if (symlinkat(target, bfd, rel(path)))
		return -errno;
	own(path);
	return 0;
}

static int do_rename(const char *from, const char *to, unsigned flags)
{
	if (!(flags & RENAME_EXCHANGE))
		pend_unlinking(to);
	return renameat2(bfd, rel(from), bfd, rel(to), flags) ? -errno : 0;
}

static int op_rename(const char *from, const char *to, unsigned flags)
{
	DEAD_CHECK();
	return LOCKED(do_rename(from, to, flags));
}

static int op_link(const char *from, const char *to)
{
	DEAD_CHECK();
	return linkat(bfd, rel(from), bfd, rel(to), 0) ? -errno : 0;
}

static int op_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	DEAD_CHECK();
	return fchmodat(bfd, rel(path), mode, 0) ? -errno : 0;
}

static int op_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	DEAD_CHECK();
	return fchownat(bfd, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int do_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	if (cut_done)
		return -EIO;
	struct pend *p = fi && fi->fh ? ((struct handle *)(uintptr_t)fi->fh)->p : pend_of_path(path);
	if (p) {
		if (ftruncate(p->fd, size))
			return -errno;
		return pend_truncate(p, (uint64_t)size);
	}
	int fd = openat(bfd, rel(path), O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = ftruncate(fd, size) ? -errno : 0;
	close(fd);
	return r;
}

static int op_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	if (is_ctl(path))
		return 0;
	return LOCKED(do_truncate(path, size, fi));
}

static int op_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	if (is_ctl(path))
		return 0;
	DEAD_CHECK();
	return utimensat(bfd, rel(path), tv, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int do_open(const char *path, struct fuse_file_info *fi, bool create, mode_t mode)
{
	if (cut_done)
		return -EIO;
	/* the program's flags decide what is allowed and created; syncing is
	 * cutfs's, so O_SYNC/O_DSYNC/O_DIRECT do not reach BACKING */
	int flags = fi->flags & ~(O_SYNC | O_DSYNC | O_DIRECT | O_APPEND | O_TRUNC);
	int fd0 = -1;
	if (create) {
		/* created here (then owned by its creator) or opened as it is */
		fd0 = openat(bfd, rel(path), flags | O_CREAT | O_EXCL | O_CLOEXEC, mode);
		if (fd0 >= 0)
			own(path);
		else if (errno == EEXIST && !(flags & O_EXCL))
			fd0 = openat(bfd, rel(path), flags | O_CLOEXEC);
	} else {
		fd0 = openat(bfd, rel(path), flags | O_CLOEXEC);
	}
	if (fd0 < 0)
		return -errno;
	struct handle *h = calloc(1, sizeof(*h));
	int err = 0;
	if (!h) {
		close(fd0);
		return -ENOMEM;
	}
	h->p = pend_get(path, fd0, &err);
	close(fd0);
	if (!h->p) {
		free(h);
		return err;
	}
	if (fi->flags & O_TRUNC) {
		if (ftruncate(h->p->fd, 0) == 0)
			pend_truncate(h->p, 0);
	}
	h->p->opens++;
	h->sync = (fi->flags & (O_SYNC | O_DSYNC)) != 0;
	fi->fh = (uintptr_t)h;
	return 0;
}

static int op_open(const char *path, struct fuse_file_info *fi)
{
	if (is_ctl(path)) {
		fi->direct_io = 1;
		fi->fh = 0;
		return 0;
	}
	return LOCKED(do_open(path, fi, false, 0));
}

static int op_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	if (is_ctl(path))
		return -EEXIST;
	return LOCKED(do_open(path, fi, true, mode));
}

static int ctl_read(char *buf, size_t size, off_t off)
{
	char text[512];
	int n = snprintf(text, sizeof(text),
			 "cuts %" PRIu64 "\nwritten %" PRIu64 "\nsynced %" PRIu64 "\nkept %" PRIu64
			 "\ndropped %" PRIu64 "\nmode %s\n",
			 ctr.cuts, ctr.written, ctr.synced, ctr.kept, ctr.dropped, mode_drop ? "drop" : "tear");
	if (off >= n)
		return 0;
	size_t len = (size_t)(n - off) < size ? (size_t)(n - off) : size;
	memcpy(buf, text + off, len);
	return (int)len;
}

static int do_read(struct handle *h, char *buf, size_t size, off_t off)
{
	if (cut_done)
		return -EIO;
	struct pend *p = h->p;
	uint64_t o = (uint64_t)off;
	if (o >= p->size)
		return 0;
	if (size > p->size - o)
		size = (size_t)(p->size - o);
	int err = medium_read(p->fd, (unsigned char *)buf, size, o);
	if (err)
		return err;
	if (!p->nsect)
		return (int)size;
	/* the volatile sectors over the medium's bytes */
	for (uint64_t idx = o / SECT; idx * SECT < o + size; idx++) {
		struct sect key = {.idx = idx};
		void *found = tfind(&key, &p->tree, cmp_sect);
		if (!found)
			continue;
		const struct sect *s = *(struct sect **)found;
		uint64_t a = idx * SECT > o ? idx * SECT : o;
		uint64_t b = (idx + 1) * SECT < o + size ? (idx + 1) * SECT : o + size;
		memcpy(buf + (a - o), s->data + (a - idx * SECT), (size_t)(b - a));
	}
	return (int)size;
}

static int op_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	if (!fi->fh)
		return LOCKED(ctl_read(buf, size, off));
	return LOCKED(do_read((struct handle *)(uintptr_t)fi->fh, buf, size, off));
}

static int do_write(struct handle *h, const char *buf, size_t size, off_t off)
{
	if (cut_done)
		return -EIO;
	struct pend *p = h->p;
	uint64_t o = (uint64_t)off;
	int err = 0;
	for (uint64_t idx = o / SECT; idx * SECT < o + size; idx++) {
		uint64_t a = idx * SECT > o ? idx * SECT : o;
		uint64_t b = (idx + 1) * SECT < o + size ? (idx + 1) * SECT : o + size;
		/* a sector wholly written, or wholly past the medium's end and
		 * the size seen, needs nothing from the medium */
		bool whole = b - a == SECT || idx * SECT >= p->size;
		struct sect *s = pend_sector(p, idx, whole, &err);
		if (!s)
			return err;
		memcpy(s->data + (a - idx * SECT), buf + (a - o), (size_t)(b - a));
	}
	if (o + size > p->size)
		p->size = o + size;
	if (h->sync && (err = pend_settle(p, true)))
		return err;
	return (int)size;
}

static int ctl_write(const char *buf, size_t size)
{
	if (size >= 3 && !memcmp(buf, "cut", 3)) {
		if (!cut_done)
			cut_power();
		return (int)size;
	}
	return -EINVAL;
}

static int op_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	if (!fi->fh)
		return LOCKED(ctl_write(buf, size));
	return LOCKED(do_write((struct handle *)(uintptr_t)fi->fh, buf, size, off));
}

static int op_statfs(const char *path, struct statvfs *st)
{
	DEAD_CHECK();
	return fstatvfs(bfd, st) ? -errno : 0;
}

static int do_release(struct handle *h)
{
	struct pend *p = h->p;
	free(h);
	if (--p->opens == 0 && p->gone)
		pend_free(p);
	return 0;
}

static int op_release(const char *path, struct fuse_file_info *fi)
{
	if (!fi->fh)
		return 0;
	return LOCKED(do_release((struct handle *)(uintptr_t)fi->fh));
}

static int do_fsync(struct handle *h)
{
	if (cut_done)
		return -EIO;
	return pend_settle(h->p, true);
}

static int op_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	if (!fi->fh)
		return 0;
	return LOCKED(do_fsync((struct handle *)(uintptr_t)fi->fh));
}

static int op_flush(const char *path, struct fuse_file_info *fi)
{
	/* close(2) does not sync */
	return 0;
}

static int do_fallocate(struct handle *h, int mode, off_t off, off_t len)
{
	if (cut_done)
		return -EIO;
	if (mode & ~FALLOC_FL_KEEP_SIZE)
		return -EOPNOTSUPP;
	if (fallocate(h->p->fd, mode, off, len))
		return -errno;
	if (!(mode & FALLOC_FL_KEEP_SIZE) && (uint64_t)(off + len) > h->p->size)
		h->p->size = (uint64_t)(off + len);
	return 0;
}

static int op_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	if (!fi || !fi->fh)
		return -EOPNOTSUPP;
	return LOCKED(do_fallocate((struct handle *)(uintptr_t)fi->fh, mode, off, len));
}

static int op_opendir(const char *path, struct fuse_file_info *fi)
{
	DEAD_CHECK();
	int fd = openat(bfd, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	fi->fh = (uintptr_t)d;
	return 0;
}

static int op_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags flags)
{
	DEAD_CHECK();
	DIR *d = (DIR *)(uintptr_t)fi->fh;
	rewinddir(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		struct stat st = {.st_ino = e->d_ino, .st_mode = (mode_t)DTTOIF(e->d_type)};
		if (fill(buf, e->d_name, &st, 0, 0))
			break;
	}
	return 0;
}

static int op_releasedir(const char *path, struct fuse_file_info *fi)
{
	closedir((DIR *)(uintptr_t)fi->fh);
	return 0;
}

static int op_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
	/* metadata is synchronous already */
	DEAD_CHECK();
	return 0;
}

static int op_access(const char *path, int mask)
{
	if (is_ctl(path))
		return 0;
	DEAD_CHECK();
	return faccessat(bfd, rel(path), mask, 0) ? -errno : 0;
}

static void *op_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	/* no attribute or entry caching: sizes change under the kernel at a cut */
	cfg->attr_timeout = 0;
	cfg->entry_timeout = 0;
	cfg->negative_timeout = 0;
	cfg->use_ino = 1;
	return NULL;
}

static const struct fuse_operations ops = {
	.init = op_init,
	.getattr = op_getattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.chmod = op_chmod,
	.chown = op_chown,
	.truncate = op_truncate,
	.utimens = op_utimens,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write = op_write,
	.statfs = op_statfs,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.fallocate = op_fallocate,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.access = op_access,
};

static void usage(void)
{
	fprintf(stderr, "usage: cutfs [--mode drop|tear] [--seed N] BACKING MOUNTPOINT [FUSE options]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int i = 1;
	rng_state = 1;
	for (; i < argc && !strncmp(argv[i], "--", 2); i += 2) {
		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "--mode") && !strcmp(argv[i + 1], "drop"))
			mode_drop = true;
		else if (!strcmp(argv[i], "--mode") && !strcmp(argv[i + 1], "tear"))
			mode_drop = false;
		else if (!strcmp(argv[i], "--seed"))
			rng_state = strtoull(argv[i + 1], NULL, 0);
		else
			usage();
	}
	if (argc - i < 2)
		usage();
	bfd = open(argv[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (bfd < 0) {
		perror(argv[i]);
		return 1;
	}
	fprintf(stderr, "cutfs: %s on %s, mode %s, seed %" PRIu64 "\n", argv[i], argv[i + 1],
		mode_drop ? "drop" : "tear", rng_state);
	/* one descriptor per file with volatile data: let there be many */
	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* fuse_main gets the program name, the mount point and the options */
	char **fargv = calloc((size_t)argc + 1, sizeof(*fargv));
	int fargc = 0;
	fargv[fargc++] = argv[0];
	for (int j = i + 1; j < argc; j++)
		fargv[fargc++] = argv[j];
	return fuse_main(fargc, fargv, &ops, NULL);
}
