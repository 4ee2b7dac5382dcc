/*
 * files.c: data-file registration and the catalog (see format.h).
 *
 * Path rules (also in docs/SECURITY.md):
 *  - atomio_file_open resolves the caller's path like open(2) (relative to the
 *    working directory, symlinks followed) to a canonical absolute path.
 *  - The catalog stores that path relative to the log's directory when the file
 *    lies below it (so a store directory can be moved whole), else absolute.
 *  - A recorded path never has empty, "." or ".." components, nor a trailing
 *    "/"; recovery refuses one that does (ATOMIO_EBADPATH).
 *  - Recovery opens the recorded path with O_NOFOLLOW and checks that it is a
 *    regular file with the recorded identity (inode, and device or filesystem
 *    id); otherwise it replays nothing (ATOMIO_EIDENTITY).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>


#include "internal.h"
#include "shm.h"

struct afile *file_get(atomio *st, int id)
{
	if (id < 0 || (unsigned)id >= MAX_FILES)
		return NULL;
	struct afile *f = atomic_load_explicit(&st->files[id], memory_order_acquire);
	return f && __atomic_load_n(&f->fd, __ATOMIC_ACQUIRE) >= 0 ? f : NULL;
}

const struct seg *file_cached_next(struct file_cached *w)
{
	for (; w->n; w->g++, w->n--, w->j = 0)
		while (w->j < w->g->nsegs) {
			const struct seg *s = &w->g->segs[w->j++];
			if (s->kind != SEG_WRITE || !s->len)
				continue;
			/* ATOMIO_DIRECT_HOME files hold no page cache */
			const struct afile *f = file_get(w->st, (int)s->file);
			if (f && !f->direct_home)
				return s;
		}
	return NULL;
}

const char *file_name(atomio *st, const struct afile *f, char *buf, size_t bufsz)
{
	return file_resolve_path(st, f, buf, bufsz) == 0 ? buf : f->path;
}

int file_check_path(const char *path, uint16_t flags)
{
	return codec_path_problem(path, strnlen(path, PATH_MAX), flags) ? ATOMIO_EBADPATH : 0;
}

int file_resolve_path(atomio *st, const struct afile *f, char *out, size_t outsz)
{
	int n;
	if (f->cat_flags & CAT_F_RELATIVE)
		n = snprintf(out, outsz, "%s%s%s", st->log_dir,
			     strcmp(st->log_dir, "/") ? "/" : "", f->path);
	else
		n = snprintf(out, outsz, "%s", f->path);
	return n < 0 || (size_t)n >= outsz ? -ENAMETOOLONG : 0;
}

int file_identity(int fd, struct fid *id)
{
	struct stat sb;
	struct statfs sfs;
	int r = atomio_sys->fstat(fd, &sb);
	if (r < 0)
		return r;
	memset(id, 0, sizeof(*id));
	id->dev = sb.st_dev;
	id->ino = sb.st_ino;
	if (atomio_sys->fstatfs(fd, &sfs) == 0) {
		uint32_t v[2];
		memcpy(v, &sfs.f_fsid, sizeof(v));
		id->fsid = (uint64_t)v[0] | (uint64_t)v[1] << 32;
	}
	/* The birth time tells a reused inode number from the registered
	 * file; where the filesystem does not keep one, it stays unknown. */
	struct atomio_statx stx;
	if (atomio_sys->statx(fd, "", AT_EMPTY_PATH, ATOMIO_STATX_BTIME, &stx) == 0 &&
	    (stx.stx_mask & ATOMIO_STATX_BTIME) && stx.stx_btime.tv_sec >= 0) {
		id->btime_ns = (uint64_t)stx.stx_btime.tv_sec * 1000000000ull + stx.stx_btime.tv_nsec;
		id->flags |= CAT_ID_BTIME;
	}
	return 0;
}

/* The largest size the file's filesystem allows (ext4: 16 TiB, vfat: 4 GiB),
 * at most MAX_OFFSET.  A write beyond it fails with EFBIG, and fails again at
 * every replay: a record that can never be applied would make the store
 * impossible to open.  So groups are checked against this limit before they
 * are logged, and recovery checks records against it before replaying any.
 * The kernel's llseek refuses SEEK_SET beyond the same limit (s_maxbytes)
 * that write and truncate check, without touching the file: a binary search
 * over it finds the limit.  The file position is restored (the application
 * may use it through atomio_file_fd). */
uint64_t file_max_size(int fd)
{
	if (!atomio_sys->lseek)
		return MAX_OFFSET;
	off_t pos = atomio_sys->lseek(fd, 0, SEEK_CUR);
	if (pos < 0)
		return MAX_OFFSET; /* no llseek at all: nothing to learn */
	uint64_t lo = 0, hi = MAX_OFFSET;
	if (atomio_sys->lseek(fd, (off_t)hi, SEEK_SET) >= 0) {
		lo = hi;
	} else {
		while (hi - lo > 1) {
			uint64_t mid = lo + (hi - lo) / 2;
			if (atomio_sys->lseek(fd, (off_t)mid, SEEK_SET) >= 0)
				lo = mid;
			else
				hi = mid;
		}
	}
	atomio_sys->lseek(fd, pos, SEEK_SET);
	return lo;
}

/* --- catalog ---------------------------------------------------------------- */

struct cat_reader {
	atomio *st;
	uint64_t base;
};

static int cat_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct cat_reader *c = ctx;
	return log_read(c->st, c->base + off, buf, len);
}

/* Check catalog copy i: header plausible, checksum right over its used
 * bytes, streamed through a small buffer, so that checking a copy costs
 * memory in proportion to nothing the log says.  0 = valid. */
static int cat_check_copy(atomio *st, int i, char *tmp, size_t tmpsz, struct cat_hdr_disk *h)
{
	struct cat_reader c = {st, st->cat_off + (uint64_t)i * st->cat_size};
	int r = log_read(st, c.base, h, sizeof(*h));
	if (r < 0)
		return r;
	if (codec_cat_hdr_problem(h, st->store_id, st->cat_size))
		return ATOMIO_ECORRUPT;
	uint64_t sum;
	r = codec_csum_read(st->store_id, h->used, offsetof(struct cat_hdr_disk, csum), cat_read, &c,
			    tmp, tmpsz, &sum);
	if (r < 0)
		return r;
	return sum == h->csum ? 0 : ATOMIO_ECORRUPT;
}

static void afile_free(struct afile *f)
{
	if (f) {
		free(f->path);
		free(f);
	}
}

/* Read the current catalog into files[]: every entry (at open), or those
 * this process does not know yet (reload: another process registered them;
 * an id keeps its path for good, so a known one is only checked). */
static int cat_parse(atomio *st, bool reload)
{
	const size_t tmpsz = 64 * 1024;
	char *tmp = malloc(tmpsz);
	if (!tmp)
		return -ENOMEM;
	struct cat_hdr_disk h[2];
	bool ok[2];
	int r = 0;
	for (int i = 0; i < 2 && r >= 0; i++) {
		r = cat_check_copy(st, i, tmp, tmpsz, &h[i]);
		ok[i] = r == 0;
		if (r == ATOMIO_ECORRUPT)
			r = 0;
	}
	free(tmp);
	if (r < 0)
		return r;
	int pick = codec_cat_current(h, ok);
	if (pick < 0) {
		st_err(st, "%s: no valid file catalog", st->log_path);
		return ATOMIO_ECORRUPT;
	}
	/* The other copy written once (our magic) but failing its checks: it
	 * may have been the newer one, holding the newest registrations;
	 * recovery names it if a record needs a file this copy lacks. */
	if (!reload)
		st->cat_damaged = 1 + codec_cat_damaged(h, ok);
	/* Only the chosen copy's used bytes are held, and its checksum is
	 * checked again on exactly the bytes parsed below. */
	char *buf = malloc(h[pick].used);
	if (!buf)
		return -ENOMEM;
	r = log_read(st, st->cat_off + (uint64_t)pick * st->cat_size, buf, h[pick].used);
	if (r == 0 && (memcmp(buf, &h[pick], CAT_HDR) || codec_cat_problem(buf, st->store_id, st->cat_size))) {
		st_err(st, "%s: the file catalog changed while it was read", st->log_path);
		r = ATOMIO_ECORRUPT;
	}
	if (r < 0) {
		free(buf);
		return r;
	}
	const char *c = buf;
	uint64_t pos = CAT_HDR, used = h[pick].used;
	/* The catalog says how long its entry headers are (format.h). */
	const uint32_t eh = codec_cat_entry_hdr(&h[pick]);
	uint8_t *seen = calloc(MAX_FILES / 8, 1);
	if (!eh)
		r = ATOMIO_ECORRUPT;
	if (!seen)
		r = -ENOMEM;
	for (uint32_t i = 0; r == 0 && i < h[pick].count; i++) {
		struct cat_entry_disk e;
		const char *path;
		if (codec_cat_entry(c, used, eh, &pos, &e, &path) || (seen[e.id / 8] >> (e.id % 8)) & 1) {
			r = ATOMIO_ECORRUPT;
			break;
		}
		seen[e.id / 8] |= (uint8_t)(1u << (e.id % 8));
		struct afile *known = atomic_load(&st->files[e.id]);
		if (known && reload) {
			if (strlen(known->path) != e.path_len || memcmp(known->path, path, e.path_len) ||
			    known->cat_flags != e.flags) {
				r = ATOMIO_ECORRUPT;
				break;
			}
			/* registered anew by another process (another file under
			 * its path): the identity the next open checks */
			known->idn = codec_cat_entry_fid(&e);
			continue;
		}
		if (known) {
			r = ATOMIO_ECORRUPT;
			break;
		}
		struct afile *f = calloc(1, sizeof(*f));
		char *p = f ? strndup(path, e.path_len) : NULL;
		if (!p) {
			free(f);
			r = -ENOMEM;
			break;
		}
		f->path = p;
		r = file_check_path(p, e.flags);
		if (r < 0) {
			st_err(st, "%s: catalog path '%s' breaks the path rules", st->log_path, p);
			afile_free(f);
			break;
		}
		f->id = e.id;
		f->cat_flags = e.flags;
		f->idn = codec_cat_entry_fid(&e);
		f->fd = f->hfd = -1;
		atomic_store(&st->files[e.id], f);
		if (e.id >= atomic_load(&st->files_hi))
			atomic_store(&st->files_hi, e.id + 1);
	}
	if (r == ATOMIO_ECORRUPT)
		st_err(st, "%s: file catalog entry is malformed", st->log_path);
	if (r == 0)
		st->cat_gen = h[pick].generation;
	free(seen);
	free(buf);
	return r;
}

int cat_load(atomio *st) { return cat_parse(st, false); }

/* Read the catalog while other processes may be registering files: each
 * registration writes a catalog copy (cat_write, LK_CAT write-locked), and
 * two in a row rewrite both copies; read unlocked, both copies could be
 * caught half-written and the store called corrupt (t_procs_kill saw it at
 * a join, 3-6 runs in 40 beside 4 CPU hogs).  So the catalog is read with
 * LK_CAT read-locked: no copy changes meanwhile.  Holders of LK_CAT wait for
 * nothing but the shared mutex (cat_write), so the readers -- a joining
 * process holding LK_INIT, a leader opening a file for its home writes --
 * cannot deadlock with them.  In a process, only with cat_lock held or
 * before any other thread can exist (at open): the lock byte is the open
 * file description's, shared by its threads. */
static int cat_parse_shared(atomio *st, bool reload)
{
	if (st->exclusive)
		return cat_parse(st, reload);
	int r = sys_ofd_lock(st->log_fd, SYS_LK_WAIT, F_RDLCK, LK_CAT, 1);
	if (r < 0) {
		st_err(st, "%s: locking the file catalog: %s", st->log_path, strerror(-r));
		return r;
	}
	r = cat_parse(st, reload);
	(void)sys_ofd_lock(st->log_fd, SYS_LK_SET, F_UNLCK, LK_CAT, 1);
	return r;
}

/* At a join: other processes are live. */
int cat_load_joining(atomio *st) { return cat_parse_shared(st, false); }

int cat_reload(atomio *st)
{
	ASSERT_CAT(st);
	return cat_parse(st, true);
}

int cat_reload_shared(atomio *st)
{
	ASSERT_CAT(st);
	return cat_parse_shared(st, true);
}

static size_t cat_serialize(atomio *st, char *buf, size_t cap, uint64_t gen, uint32_t *count_out)
{
	size_t pos = CAT_HDR;
	uint32_t count = 0;
	for (uint32_t id = 0, top = atomic_load(&st->files_hi); id < top; id++) {
		struct afile *f = atomic_load(&st->files[id]);
		if (!f)
			continue;
		struct cat_entry_disk e = {.id = f->id, .path_len = (uint16_t)strlen(f->path),
					   .flags = f->cat_flags, .dev = f->idn.dev, .ino = f->idn.ino,
					   .fsid = f->idn.fsid, .btime_ns = f->idn.btime_ns,
					   .id_flags = f->idn.flags};
		pos = codec_cat_put(buf, cap, pos, &e, f->path);
		if (!pos)
			return 0;
		count++;
	}
	codec_cat_seal(buf, count, st->store_id, gen, pos);
	*count_out = count;
	return pos;
}

/* Write the whole catalog to the older copy, durably.  Caller holds cat_lock. */
static int cat_write(atomio *st)
{
	ASSERT_CAT(st);
	char *buf = aligned_alloc_zero(4096, st->cat_size);
	if (!buf)
		return -ENOMEM;
	uint64_t gen = st->cat_gen + 1;
	uint32_t count;
	size_t used = cat_serialize(st, buf, st->cat_size, gen, &count);
	if (!used) {
		free(buf);
		st_err(st, "%s: the file catalog is full", st->log_path);
		return -ENOSPC;
	}
	/* RWF_DSYNC: the entry must be durable before the file id is handed
	 * out, or a record could name a file recovery does not know.  The
	 * other copy stays valid until this one is. */
	size_t len = align_up(used, st->block);
	int r = sys_pwrite_durable(st->log_fd, buf, len, (off_t)(st->cat_off + (gen % 2) * st->cat_size));
	free(buf);
	if (r < 0) {
		st_err(st, "writing the catalog of %s: %s", st->log_path, strerror(-r));
		return r;
	}
	st->cat_gen = gen;
	shm_lock(st);
	if (gen > st->S->cat_gen)
		st->S->cat_gen = gen;
	if (atomic_load(&st->files_hi) > st->S->files_hi)
		st->S->files_hi = atomic_load(&st->files_hi);
	shm_unlock(st);
	return 0;
}

/* --- descriptors ------------------------------------------------------------------ */

/* Set f->hfd for the data file open as fd (engine_pick.c, HOME WRITES OF O_DIRECT
 * FILES).  The twin is the same open inode reopened through /proc/self/fd
 * (so a rename of the path meanwhile cannot give us another file); without
 * /proc, or if the reopened file is not the same inode, the file's home
 * writes stay O_DIRECT. */
static int file_open_home(atomio *st, struct afile *f, int fd)
{
	/* read after fd's open: a batch that began writing the file later is
	 * counted newer (checkpoint.c, TRUSTED DESCRIPTORS) */
	f->hfd_wrote = shm_wrote_mark(st->sh, f->id);
	f->hfd = fd;
	f->direct_home = f->direct;
	if (!f->direct || (st->flags & ATOMIO_DIRECT_HOME))
		return 0;
	int keep = f->open_flags & (O_DSYNC | O_SYNC | O_NOATIME);
	int twin = proc_reopen(fd, O_RDWR | O_CLOEXEC | keep);
	if (twin < 0)
		return 0;
	struct stat a, b;
	if (atomio_sys->fstat(fd, &a) < 0 || atomio_sys->fstat(twin, &b) < 0 || a.st_ino != b.st_ino ||
	    a.st_dev != b.st_dev) {
		atomio_sys->close(twin);
		return 0;
	}
	f->hfd = twin;
	f->direct_home = false;
	return 0;
}

/* --- registration ------------------------------------------------------------- */

#define ALLOWED_OPEN_FLAGS                                                                      \
	(O_ACCMODE | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC | O_NOATIME | O_DSYNC | O_SYNC |   \
	 O_LARGEFILE | O_NOFOLLOW | O_NOCTTY)

static int canonical_path(const char *path, bool may_create, char *out)
{
	int r = atomio_sys->realpath(path, out);
	if (r != -ENOENT || !may_create)
		return r;
	/* Not there yet: canonicalise the directory, keep the final name. */
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return -EINVAL;
	char dir[PATH_MAX];
	if (!slash) {
		strcpy(dir, ".");
	} else if (slash == path) {
		strcpy(dir, "/");
	} else {
		if ((size_t)(slash - path) >= sizeof(dir))
			return -ENAMETOOLONG;
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = 0;
	}
	char cdir[PATH_MAX];
	r = atomio_sys->realpath(dir, cdir);
	if (r < 0)
		return r;
	int n = snprintf(out, PATH_MAX, "%s%s%s", cdir, strcmp(cdir, "/") ? "/" : "", base);
	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static struct afile *cat_find(atomio *st, const char *path, uint16_t flags)
{
	for (uint32_t id = 0, top = atomic_load(&st->files_hi); id < top; id++) {
		struct afile *f = atomic_load(&st->files[id]);
		if (f && f->cat_flags == flags && !strcmp(f->path, path))
			return f;
	}
	return NULL;
}

/* The file open in this session that is the inode idn names (a hard link
 * or another spelling of a registered path), or NULL.  Identity is device +
 * inode: one file, one id, so one fast-path guard (fastpath.c) sees every
 * record that covers its bytes. */
static struct afile *open_find_inode(atomio *st, const struct fid *idn)
{
	for (uint32_t id = 0, top = atomic_load(&st->files_hi); id < top; id++) {
		struct afile *f = atomic_load(&st->files[id]);
		if (f && f->fd >= 0 && f->idn.dev == idn->dev && f->idn.ino == idn->ino)
			return f;
	}
	return NULL;
}

/* The registered file (lowest id) whose recorded identity is idn's, open
 * in this session or not, and whose recorded path still names it, or NULL:
 * a hard link to a file another process registered under its other name,
 * or that this process registered in an earlier session.  Every process
 * picks the same id for one inode.  A file renamed since it was registered
 * is not a link: its old name may be created anew and registered for the
 * new file, which must not find the id taken by this one. */
static struct afile *cat_find_identity(atomio *st, const struct fid *idn)
{
	for (uint32_t id = 0, top = atomic_load(&st->files_hi); id < top; id++) {
		struct afile *f = atomic_load(&st->files[id]);
		if (!f || !codec_fid_same(&f->idn, idn))
			continue;
		char path[PATH_MAX];
		struct stat sb;
		if (file_resolve_path(st, f, path, sizeof(path)) == 0 && atomio_sys->lstat(path, &sb) == 0 &&
		    sb.st_ino == idn->ino && sb.st_dev == idn->dev)
			return f;
	}
	return NULL;
}

static uint32_t cat_free_id(atomio *st)
{
	const uint32_t top = atomic_load(&st->files_hi);
	for (uint32_t id = 0; id < top; id++)
		if (!atomic_load(&st->files[id]))
			return id;
	return top; /* MAX_FILES when every id is taken */
}

static int open_data(const char *canon, int flags, mode_t mode, bool *created)
{
	int base = (flags & ~(O_ACCMODE | O_CREAT | O_EXCL)) | O_RDWR | O_CLOEXEC | O_NOFOLLOW;
	*created = false;
	if ((flags & O_CREAT) && (flags & O_EXCL)) {
		int fd = atomio_sys->open(canon, base | O_CREAT | O_EXCL, mode);
		*created = fd >= 0;
		return fd;
	}
	for (int tries = 0; tries < 100; tries++) {
		int fd = atomio_sys->open(canon, base, 0);
		if (fd != -ENOENT || !(flags & O_CREAT))
			return fd;
		fd = atomio_sys->open(canon, base | O_CREAT | O_EXCL, mode);
		if (fd != -EEXIST) {
			*created = fd >= 0;
			return fd;
		}
	}
	return -EAGAIN;
}

/* The file as registered (its inode, bytes and directory entry) must be
 * durable before the catalog names it and any group is committed to it:
 * whether atomio just created it or the application did without syncing, a
 * power cut could otherwise lose the file and with it acknowledged groups
 * (and recovery, finding no file, would replay nothing at all).  fsync the
 * file, then its directory. */
static int sync_registered(atomio *st, int fd, const char *canon)
{
	int r = sys_fsync_full(fd);
	if (r < 0) {
		st_err(st, "syncing %s before registering it: %s", canon, strerror(-r));
		return r;
	}
	char *dir = dir_of(canon);
	r = dir ? sys_fsync_dir(dir) : -ENOMEM;
	if (r == -EMFILE || r == -ENFILE)
		st_err(st, "registering %s: no descriptor left to open its directory %s for the "
			   "sync that makes the file durable: %s", canon, dir, strerror(-r));
	else if (r < 0)
		st_err(st, "syncing the directory of %s before registering it: %s", canon,
		       strerror(-r));
	free(dir);
	return r;
}

/* The form a canonical path is stored in: relative to the log's directory
 * when below it (*cflags = CAT_F_RELATIVE), else absolute. */
static const char *stored_form(const atomio *st, const char *canon, uint16_t *cflags)
{
	size_t dl = strlen(st->log_dir);
	*cflags = 0;
	if (strcmp(st->log_dir, "/") && !strncmp(canon, st->log_dir, dl) && canon[dl] == '/') {
		*cflags = CAT_F_RELATIVE;
		return canon + dl + 1;
	}
	if (!strcmp(st->log_dir, "/") && canon[1]) {
		*cflags = CAT_F_RELATIVE;
		return canon + 1;
	}
	return canon;
}

/* Is the file open as fd one the store may write, a regular file that is not
 * its own log?  Then its identity.  0 or an error (said in errbuf). */
static int check_data_file(atomio *st, int fd, const char *canon, struct fid *idn)
{
	struct stat sb;
	int r = atomio_sys->fstat(fd, &sb);
	if (r < 0)
		return r;
	if (!S_ISREG(sb.st_mode)) {
		st_err(st, "%s: not a regular file", canon);
		return -EINVAL;
	}
	struct stat lsb;
	r = atomio_sys->fstat(st->log_fd, &lsb);
	if (r < 0)
		return r;
	if (sb.st_dev == lsb.st_dev && sb.st_ino == lsb.st_ino) {
		/* Group data written over the log would destroy the records
		 * that make it atomic (by its name or through a hard link). */
		st_err(st, "%s: is the store's own log", canon);
		return -EINVAL;
	}
	return file_identity(fd, idn);
}

/* The direct-I/O alignment of an O_DIRECT file. */
static void dio_align(int fd, uint32_t *mem, uint32_t *off)
{
	struct atomio_statx stx;
	if (atomio_sys->statx(fd, "", AT_EMPTY_PATH, ATOMIO_STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & ATOMIO_STATX_DIOALIGN) && stx.stx_dio_offset_align) {
		*mem = stx.stx_dio_mem_align;
		*off = stx.stx_dio_offset_align;
	} else {
		*mem = *off = 4096; /* unknown: the safe common value */
	}
	if (*mem < 8)
		*mem = 8;
}

/* Known path, not open yet this session.  The log holds no record for it
 * (recovery emptied the log at open, and records of this session name only
 * files opened in it), so a changed identity is simply recorded anew.
 * cat_lock held. */

static int reregister(atomio *st, struct afile *f, const struct fid *idn, int fd, const char *canon,
		      bool role_held)
{
	ASSERT_CAT(st);
	if (f->idn.dev == idn->dev && f->idn.ino == idn->ino && f->idn.fsid == idn->fsid &&
	    f->idn.btime_ns == idn->btime_ns && f->idn.flags == idn->flags)
		return 0;
	/* Another process may have the old file open under this id: records
	 * that name the old file must be dead before the catalog names the new
	 * one (recovery would write them into it), and every process must stop
	 * writing home through its descriptor of the old one.  So, with other
	 * processes about: under the log role, after a full checkpoint (the
	 * caller took both: FILE_OPEN_NEEDS_ROLE), and with the file's generation
	 * moved on (shm.h, fgen: file_get_any opens it anew). */
	if (!st->exclusive && !role_held)
		return FILE_OPEN_NEEDS_ROLE;
	struct fid old = f->idn;
	f->idn = *idn;
	int r = sync_registered(st, fd, canon);
	/* The generation moves before the catalog names the new file: killed
	 * between the two, this process would leave the others writing home
	 * through their descriptors of the old inode while the catalog (and
	 * recovery) name the new one.  Moved without a catalog write (it
	 * failed), it only makes them open the file anew, checked against the
	 * catalog they read (file_get_any). */
	if (r == 0)
		atomic_fetch_add(&st->sh->fgen[f->id], 1);
	if (r == 0)
		r = cat_write(st);
	if (r < 0)
		f->idn = old;
	return r;
}

/* A path the catalog does not know: a new id, made durable (file, directory,
 * catalog) before it is returned.  *out, or an error.  cat_lock held. */
static int register_new(atomio *st, const char *stored, uint16_t cflags, const struct fid *idn, int fd,
			const char *canon, struct afile **out)
{
	ASSERT_CAT(st);
	uint32_t id = cat_free_id(st);
	if (id >= MAX_FILES) {
		st_err(st, "%s: no free file id", st->log_path);
		return -ENOSPC;
	}
	struct afile *f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(stored))) {
		free(f);
		return -ENOMEM;
	}
	f->id = id;
	f->cat_flags = cflags;
	f->idn = *idn;
	f->fd = f->hfd = -1;
	atomic_store(&st->files[id], f);
	if (id >= atomic_load(&st->files_hi))
		atomic_store(&st->files_hi, id + 1); /* cat_lock held: the only writer */
	int r = sync_registered(st, fd, canon);
	if (r == 0)
		r = cat_write(st);
	if (r < 0) {
		atomic_store(&st->files[id], NULL);
		afile_free(f);
		return r;
	}
	*out = f;
	return 0;
}

/* Do descriptors a and b name one inode? */
static bool same_inode(int a, int b)
{
	struct stat sa, sb;
	return atomio_sys->fstat(a, &sa) == 0 && atomio_sys->fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* A descriptor of a file registered anew since it was opened: another
 * thread may be writing, reading or syncing through it still, so it is
 * closed later, once no thread is between loading a descriptor and its last
 * use of it (files_close_stale), or with the store.  cat_lock held. */
static void file_retire(atomio *st, int fd)
{
	ASSERT_CAT(st);
	if (st->nstale == st->stale_cap) {
		unsigned cap = st->stale_cap ? 2 * st->stale_cap : 16;
		int *v = realloc(st->stale, cap * sizeof(*v));
		if (!v) {
			/* No room to keep it: a descriptor in use elsewhere would
			 * be closed under a write, so it stays open (leaked). */
			return;
		}
		st->stale = v;
		st->stale_cap = cap;
	}
	st->stale[st->nstale] = fd;
	__atomic_store_n(&st->nstale, st->nstale + 1, __ATOMIC_RELAXED);
}

/* Open f in this session as fd: its descriptors, limits and capabilities,
 * then publish it (the fd last: file_get tests it).  cat_lock held. */
static void publish(atomio *st, struct afile *f, int fd, int open_flags)
{
	ASSERT_CAT(st);
	f->open_flags = open_flags;
	f->direct = open_flags & O_DIRECT;
	f->dio_mem_align = f->dio_off_align = 0;
	if (f->direct)
		dio_align(fd, &f->dio_mem_align, &f->dio_off_align);
	f->max_size = file_max_size(fd);
	if (f->lazy && f->hfd >= 0 && !same_inode(f->hfd, fd)) {
		/* Opened on demand before the path was registered anew (unlinked
		 * and created again, or another file renamed over it): that
		 * descriptor names the old inode, and home writes through it
		 * would land where no path reaches.  It may be in use in
		 * another thread: closed with the store. */
		int old = f->hfd;
		__atomic_store_n(&f->hfd, -1, __ATOMIC_RELEASE);
		__atomic_store_n(&f->fd, -1, __ATOMIC_RELEASE);
		file_retire(st, old);
	}
	if (f->lazy && f->hfd >= 0) {
		/* Open here already for other processes' home writes, through a
		 * buffered descriptor: it stays the one home writes use (for an
		 * O_DIRECT file, it is what the twin would be). */
		f->direct_home = false;
	} else {
		file_open_home(st, f, fd); /* the descriptor home writes use */
	}
	f->lazy = false;
	f->gen = f->fd_gen = f->fd_file_gen = st->exclusive ? 0 : atomic_load(&st->sh->fgen[f->id]);
	file_probe_caps(st, f, fd);
	if (f->caps.fast_max) {
		/* From now on leaders fill the fast path's guard; what was
		 * logged before counts as covered (fastpath.c). */
		shm_lock(st);
		if (!st->S->fast_any) {
			st->S->fast_any = 1;
			st->S->guard_floor = st->S->next_seq - 1;
		}
		shm_unlock(st);
	}
	atomic_store_explicit(&st->files[f->id], f, memory_order_release);
	__atomic_store_n(&f->fd, fd, __ATOMIC_RELEASE);
}

/* LK_CAT: one process at a time writes the catalog (and this process's
 * threads one at a time). */
static void cat_lock_all(atomio *st)
{
	cat_mutex_lock(st);
	if (!st->exclusive)
		(void)sys_ofd_lock(st->log_fd, SYS_LK_WAIT, F_WRLCK, LK_CAT, 1);
}

static void cat_unlock_all(atomio *st)
{
	if (!st->exclusive)
		(void)sys_ofd_lock(st->log_fd, SYS_LK_SET, F_UNLCK, LK_CAT, 1);
	cat_mutex_unlock(st);
}

bool file_stale(atomio *st, const struct afile *f)
{
	return !st->exclusive && f->gen != atomic_load(&st->sh->fgen[f->id]);
}

bool file_fd_stale(atomio *st, const struct afile *f)
{
	return !st->exclusive && f->fd_gen != atomic_load(&st->sh->fgen[f->id]);
}

struct afile *file_app(atomio *st, int id)
{
	struct afile *f = file_get(st, id);
	int err;
	/* Registered anew by another process: the application reads the file
	 * its path names now (file_get_any opens its home descriptor anew). */
	if ((!f || file_stale(st, f)) && id >= 0 && (unsigned)id < MAX_FILES && !st->exclusive)
		f = file_get_any(st, (uint32_t)id, &err);
	return f;
}

struct afile *file_get_any(atomio *st, uint32_t id, int *err)
{
	struct afile *f = id < MAX_FILES ? atomic_load_explicit(&st->files[id], memory_order_acquire) : NULL;
	if (f && __atomic_load_n(&f->hfd, __ATOMIC_ACQUIRE) >= 0 && !file_stale(st, f))
		return f;
	if (id >= MAX_FILES) {
		*err = -ENOENT;
		return NULL;
	}
	cat_mutex_lock(st);
	f = atomic_load(&st->files[id]);
	int r = 0;
	if (!f || file_stale(st, f)) {
		/* registered by another process since this one loaded the
		 * catalog, or registered anew (another file under its path) --
		 * also when this process never opened it: the identity it holds
		 * is the one of its last catalog load, maybe an older file's */
		r = cat_reload_shared(st);
		f = atomic_load(&st->files[id]);
	}
	if (f && f->hfd >= 0 && file_stale(st, f) && r == 0) {
		/* Its home writes go to the new file from now on.  The old
		 * descriptors may be in use in another thread: closed with the
		 * store. */
		int old = f->hfd;
		__atomic_store_n(&f->hfd, -1, __ATOMIC_RELEASE);
		if (f->lazy)
			__atomic_store_n(&f->fd, -1, __ATOMIC_RELEASE);
		if (old != f->fd)
			file_retire(st, old);
	}
	if (f && f->hfd < 0 && r == 0) {
		char path[PATH_MAX];
		r = file_resolve_path(st, f, path, sizeof(path));
		int fd = r < 0 ? r : atomio_sys->open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
		struct stat sb, lsb;
		struct fid now;
		if (fd < 0) {
			r = fd;
			st_err(st, "opening %s, registered with the store by another process: %s", path,
			       strerror(-r));
		} else if ((r = atomio_sys->fstat(fd, &sb)) < 0 || (r = atomio_sys->fstat(st->log_fd, &lsb)) < 0 ||
			   (r = file_identity(fd, &now)) < 0) {
			st_err(st, "%s: %s", path, strerror(-r));
		} else if (!S_ISREG(sb.st_mode) || (sb.st_dev == lsb.st_dev && sb.st_ino == lsb.st_ino) ||
			   !codec_fid_same(&f->idn, &now)) {
			st_err(st, "%s: not the file registered with the store (replaced since)", path);
			r = ATOMIO_EIDENTITY;
		}
		if (r < 0 && fd >= 0)
			atomio_sys->close(fd);
		if (r == 0) {
			f->max_size = file_max_size(fd);
			f->gen = st->exclusive ? 0 : atomic_load(&st->sh->fgen[f->id]);
			/* after the open (checkpoint.c, TRUSTED DESCRIPTORS) */
			__atomic_store_n(&f->hfd_wrote, shm_wrote_mark(st->sh, f->id), __ATOMIC_RELAXED);
			if (f->fd < 0) {
				f->direct = f->direct_home = false;
				memset(&f->caps, 0, sizeof(f->caps));
				f->lazy = true;
			}
			__atomic_store_n(&f->hfd, fd, __ATOMIC_RELEASE);
			if (f->lazy)
				__atomic_store_n(&f->fd, fd, __ATOMIC_RELEASE);
		}
	} else if (!f && r == 0) {
		r = -ENOENT;
	}
	cat_mutex_unlock(st);
	if (r < 0) {
		*err = r;
		return NULL;
	}
	return f;
}

/* Registration failed after this call created the file: remove it again, so
 * that a failed atomio_file_open leaves nothing behind -- but only if the path
 * still names the inode created (never another file put there meanwhile). */
static void unlink_created(int fd, const char *canon)
{
	struct stat a, b;
	if (atomio_sys->fstat(fd, &a) == 0 && atomio_sys->lstat(canon, &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		(void)atomio_sys->unlink(canon);
}

/* One attempt at atomio_file_open: its id, an error, or FILE_OPEN_NEEDS_ROLE. */
static int file_open_once(atomio *st, const char *canon, const char *stored, uint16_t cflags, int open_flags,
			  mode_t mode, bool role_held)
{
	int r;
	cat_lock_all(st);
	bool created = false;
	struct fid idn;
	/* Another process may have registered files since this one loaded
	 * the catalog (this very path among them): one id per file. */
	int fd = st->exclusive ? 0 : cat_reload(st);
	if (fd == 0)
		fd = open_data(canon, open_flags, mode, &created);
	if (fd < 0) {
		r = fd;
		st_err(st, "opening %s: %s", canon, strerror(-r));
	} else {
		r = check_data_file(st, fd, canon, &idn);
	}
	bool direct = open_flags & O_DIRECT;
	struct afile *f = r == 0 ? cat_find(st, stored, cflags) : NULL;
	bool by_inode = false;
	if (r == 0 && (!f || f->fd < 0 || f->lazy)) {
		/* Not open by this path; open under another (a hard link)? */
		struct afile *g = open_find_inode(st, &idn);
		if (g && !g->lazy) {
			f = g;
			by_inode = true;
		} else if ((g = cat_find_identity(st, &idn))) {
			/* Registered under another name (open in another
			 * process, or in none): its id, not a second one. */
			f = g;
		}
	}
	if (f && f->fd >= 0 && !f->lazy) {
		/* Already open in this session: one id per file. */
		if (!by_inode && !codec_fid_same(&f->idn, &idn)) {
			st_err(st, "%s: replaced while open in the store", canon);
			r = ATOMIO_EIDENTITY;
		} else if (f->direct != direct) {
			st_err(st, "%s: already open with%s O_DIRECT", canon, f->direct ? "" : "out");
			r = -EINVAL;
		}
	} else if (r == 0) {
		r = f ? reregister(st, f, &idn, fd, canon, role_held)
		      : register_new(st, stored, cflags, &idn, fd, canon, &f);
		if (r == 0) {
			publish(st, f, fd, open_flags);
			fd = -1; /* the store's now */
		}
	}
	/* FILE_OPEN_NEEDS_ROLE too: the attempt under the log role creates
	 * the file again (with O_EXCL it would find this one and fail -EEXIST). */
	if (fd >= 0 && r < 0 && created)
		unlink_created(fd, canon);
	if (fd >= 0)
		atomio_sys->close(fd);
	cat_unlock_all(st);
	return r < 0 ? r : (int)f->id; /* FILE_OPEN_NEEDS_ROLE is negative too */
}

int file_open(atomio *st, const char *path, int open_flags, mode_t mode, bool role_held)
{
	if (!st || !path || !*path || (open_flags & ~ALLOWED_OPEN_FLAGS))
		return -EINVAL;
	char canon[PATH_MAX];
	int r = canonical_path(path, open_flags & O_CREAT, canon);
	if (r < 0) {
		st_err(st, "resolving %s: %s", path, strerror(-r));
		return r;
	}
	uint16_t cflags;
	const char *stored = stored_form(st, canon, &cflags);
	if (file_check_path(stored, cflags) < 0)
		return -EINVAL;
	return file_open_once(st, canon, stored, cflags, open_flags, mode, role_held);
}

/* f's own descriptor (the one atomio_file_fd gives), of a file registered
 * anew by another process since it was opened: the file its path names now
 * is opened again as the application opened it -- through the home
 * descriptor file_get_any opened, its identity checked against the catalog
 * -- and put under the same number (dup3), so that a number the application
 * kept names the current file too, and the old inode's description goes.
 * The fast path stays off for f (fd_gen): its limits were learnt on the old
 * inode.  Best effort: on failure the number keeps naming the old file. */
static void file_fd_follow(atomio *st, struct afile *f)
{
	int err = 0;
	if (!file_get_any(st, f->id, &err))
		return;
	cat_mutex_lock(st);
	uint32_t gen = atomic_load(&st->sh->fgen[f->id]);
	int hfd = f->hfd, fd = f->fd;
	if (f->fd_file_gen != gen && !file_stale(st, f) && hfd >= 0 && fd >= 0 && hfd != fd) {
		int keep = f->open_flags & (O_DIRECT | O_DSYNC | O_SYNC | O_NOATIME);
		int nfd = proc_reopen(hfd, O_RDWR | O_CLOEXEC | keep);
		if (nfd >= 0 && sys_dup3(nfd, fd, O_CLOEXEC) == 0)
			f->fd_file_gen = gen;
		if (nfd >= 0)
			atomio_sys->close(nfd);
	}
	cat_mutex_unlock(st);
}

int atomio_file_fd(atomio *st, int file)
{
	if (!st)
		return -EINVAL;
	if (st_forked(st))
		return -EPERM;
	struct afile *f = file_get(st, file);
	if (!f)
		return -EINVAL;
	if (!st->exclusive && !f->lazy && f->fd_file_gen != atomic_load(&st->sh->fgen[f->id]))
		file_fd_follow(st, f);
	return f->fd;
}

/* Close the retired descriptors once no thread of this process may still
 * use one: they are no longer in any afile, so a thread that loads one now
 * gets the new descriptor; one that loaded a retired one did so after its
 * fd_use_begin, so it still counts in fd_users.  Called where the calling
 * thread holds no descriptor (after a commit, a read, a checkpoint). */
void files_close_stale(atomio *st)
{
	if (!__atomic_load_n(&st->nstale, __ATOMIC_RELAXED))
		return;
	cat_mutex_lock(st);
	atomic_thread_fence(memory_order_seq_cst); /* the retirements before the look at fd_users */
	if (atomic_load(&st->fd_users) == 0) {
		for (unsigned i = 0; i < st->nstale; i++)
			atomio_sys->close(st->stale[i]);
		__atomic_store_n(&st->nstale, 0, __ATOMIC_RELAXED);
	}
	cat_mutex_unlock(st);
}

void files_close_all(atomio *st)
{
	for (unsigned i = 0; i < st->nstale; i++)
		atomio_sys->close(st->stale[i]);
	free(st->stale);
	st->stale = NULL;
	st->nstale = st->stale_cap = 0;
	if (!st->files)
		return;
	for (uint32_t id = 0, top = atomic_load(&st->files_hi); id < top; id++) {
		struct afile *f = atomic_load(&st->files[id]);
		if (!f)
			continue;
		if (f->hfd >= 0 && f->hfd != f->fd)
			atomio_sys->close(f->hfd);
		if (f->fd >= 0)
			atomio_sys->close(f->fd);
		afile_free(f);
		st->files[id] = NULL;
	}
}

/* --- reading a registered file's home bytes (read.c, lazy.c) -------------------- */

/* Read through a descriptor opened with O_DIRECT: aligned requests go
 * straight, others through an aligned bounce span. */
static ssize_t direct_read(int fd, uint32_t align, void *buf, size_t len, off_t off)
{
	uint64_t a = align ? align : 4096;
	if (!((uintptr_t)buf % a) && !(len % a) && !((uint64_t)off % a))
		return sys_pread_full(fd, buf, len, off);
	uint64_t lo = (uint64_t)off / a * a, hi = align_up((uint64_t)off + len, a);
	char *tmp = aligned_alloc_zero(a > 4096 ? a : 4096, hi - lo);
	if (!tmp)
		return -ENOMEM;
	ssize_t n = sys_pread_full(fd, tmp, hi - lo, (off_t)lo);
	if (n >= 0) {
		uint64_t skip = (uint64_t)off - lo;
		n = (uint64_t)n > skip ? (ssize_t)((uint64_t)n - skip) : 0;
		if ((size_t)n > len)
			n = (ssize_t)len;
		memcpy(buf, tmp + skip, (size_t)n);
	}
	free(tmp);
	return n;
}

ssize_t file_read_home(atomio *st, struct afile *f, void *buf, size_t len, off_t off)
{
	(void)st;
	int fd = __atomic_load_n(&f->hfd, __ATOMIC_ACQUIRE);
	bool direct = f->direct && (fd == f->fd || fd < 0);
	if (fd < 0)
		fd = f->fd;
	return direct ? direct_read(fd, f->dio_off_align, buf, len, off) : sys_pread_full(fd, buf, len, off);
}

