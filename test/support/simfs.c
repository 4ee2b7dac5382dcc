/*
 * simfs.c: the crash simulator (see simfs.h for the model and the API).
 *
 * Layout: every inode keeps its VISIBLE state (what reads return) and its
 * BASE state (durable, with no pending item before it).  Items issued since
 * are kept in one list in issue order; an item is folded into its object's
 * base once it is durable and no earlier item of the same object is still
 * pending, so that per-object order is never broken.  A crash image starts
 * from every base and applies the unfolded items in order: durable ones
 * always, pending ones as the pick says.
 *
 * File bytes live in 4 KiB copy-on-write pages shared between a simfs, its
 * images and their images, so an image of a 2 MiB log costs a few hundred
 * pointer copies.  A NULL page reads as zeros.
 */
#include "simfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/futex.h>

#include "sys.h"

#define PG 4096u
#define FD_BASE 1000
#define ROOT_INO 2u
#define SIM_MAJOR 259u
#define SIMFS_MAGIC 0x53494d46u /* "SIMF" */

/* --- pages ------------------------------------------------------------------- */

struct page {
	atomic_uint ref;
	uint8_t d[PG];
};

struct pages {
	struct page **v;
	size_t n; /* slots */
};

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "simfs: out of memory\n");
		abort();
	}
	return p;
}

static void *xcalloc(size_t n, size_t s)
{
	void *p = calloc(n ? n : 1, s ? s : 1);
	if (!p) {
		fprintf(stderr, "simfs: out of memory\n");
		abort();
	}
	return p;
}

static char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		abort();
	return p;
}

static void page_put(struct page *p)
{
	if (p && atomic_fetch_sub(&p->ref, 1) == 1)
		free(p);
}

static bool is_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

static void pages_free(struct pages *p)
{
	for (size_t i = 0; i < p->n; i++)
		page_put(p->v[i]);
	free(p->v);
	p->v = NULL;
	p->n = 0;
}

static void pages_share(struct pages *dst, const struct pages *src)
{
	dst->n = src->n;
	dst->v = xcalloc(src->n, sizeof(*dst->v));
	for (size_t i = 0; i < src->n; i++) {
		dst->v[i] = src->v[i];
		if (dst->v[i])
			atomic_fetch_add(&dst->v[i]->ref, 1);
	}
}

static void pages_grow(struct pages *p, size_t slots)
{
	if (slots <= p->n)
		return;
	size_t n = p->n ? p->n : 4;
	while (n < slots)
		n *= 2;
	struct page **v = realloc(p->v, n * sizeof(*v));
	if (!v)
		abort();
	memset(v + p->n, 0, (n - p->n) * sizeof(*v));
	p->v = v;
	p->n = n;
}

/* A private, writable page at slot i. */
static uint8_t *pages_wr(struct pages *p, size_t i)
{
	pages_grow(p, i + 1);
	struct page *pg = p->v[i];
	if (!pg) {
		pg = xmalloc(sizeof(*pg));
		atomic_init(&pg->ref, 1);
		memset(pg->d, 0, PG);
		p->v[i] = pg;
	} else if (atomic_load(&pg->ref) > 1) {
		struct page *c = xmalloc(sizeof(*c));
		atomic_init(&c->ref, 1);
		memcpy(c->d, pg->d, PG);
		page_put(pg);
		p->v[i] = pg = c;
	}
	return pg->d;
}

/* Write len bytes at off (data NULL = zeros). */
static void pages_write(struct pages *p, uint64_t off, const uint8_t *data, uint64_t len)
{
	while (len) {
		size_t i = off / PG, in = off % PG;
		size_t n = PG - in < len ? PG - in : (size_t)len;
		if (n == PG && (!data || is_zero(data, PG))) {
			/* a whole page of zeros: no page at all */
			if (i < p->n) {
				page_put(p->v[i]);
				p->v[i] = NULL;
			}
		} else if (data || (i < p->n && p->v[i])) {
			uint8_t *d = pages_wr(p, i);
			if (data)
				memcpy(d + in, data, n);
			else
				memset(d + in, 0, n);
		}
		off += n;
		len -= n;
		if (data)
			data += n;
	}
}

static void pages_read(const struct pages *p, uint64_t off, uint8_t *out, uint64_t len)
{
	while (len) {
		size_t i = off / PG, in = off % PG;
		size_t n = PG - in < len ? PG - in : (size_t)len;
		if (i < p->n && p->v[i])
			memcpy(out, p->v[i]->d + in, n);
		else
			memset(out, 0, n);
		off += n;
		len -= n;
		out += n;
	}
}

/* Zero every byte at or beyond off. */
static void pages_zero_from(struct pages *p, uint64_t off)
{
	size_t i = off / PG;
	if (i >= p->n)
		return;
	if (off % PG) {
		if (p->v[i])
			memset(pages_wr(p, i) + off % PG, 0, PG - off % PG);
		i++;
	}
	for (; i < p->n; i++) {
		page_put(p->v[i]);
		p->v[i] = NULL;
	}
}

/* --- inodes, directories, items ------------------------------------------------ */

struct dent {
	char *name;
	uint64_t ino;
};

struct dir {
	struct dent *v;
	size_t n, cap;
};

struct inode {
	uint64_t ino;
	bool isdir;
	unsigned mode;
	struct pages vis, base;
	uint64_t vsize, bsize;
	struct dir vd, bd; /* directories: visible and durable entries */
	bool vol;          /* a volatile file (VOLATILE FILES in simfs.h): no items */
	struct lk *lk;     /* flock and open-file-description locks held on it */
	size_t nlk, clk;
};

enum { IT_DATA = 1, IT_SIZE, IT_CREATE, IT_RENAME, IT_UNLINK };

struct item {
	uint8_t kind;
	bool durable;
	bool direct;
	bool atomic;      /* DATA: RWF_ATOMIC, never torn */
	bool synced_src, synced_dst; /* RENAME: which directories were synced */
	uint64_t point;
	uint64_t ino;     /* DATA/SIZE: file; CREATE/UNLINK: directory; RENAME: source dir */
	uint64_t ino2;    /* CREATE/UNLINK/RENAME: the entry's inode */
	uint64_t dino;    /* RENAME: target directory */
	uint64_t off, len; /* DATA */
	uint64_t size;    /* SIZE: the new size.  DATA: the size the file has at
			     least once this write is whole on the media, for a
			     write durable on return (else 0, see s_pwritev) */
	uint8_t *data;    /* DATA (NULL = zeros) */
	char *name, *name2;
	char *path;
};

struct ofd {
	uint64_t ino;
	int flags;
	bool open, dead;
	char *path;
	int tag;          /* the simulated process that opened it (simfs_proc_set) */
	pthread_t opener; /* and the thread */
};

/* A lock held by a descriptor (each simfs descriptor is an open file
 * description of its own): flock's, or an OFD byte-range lock over
 * [start, end). */
enum { LK_FL_SH = 1, LK_FL_EX, LK_RD, LK_WR };
struct lk {
	int fd;
	uint8_t kind;
	uint64_t start, end;
};

struct simfs {
	pthread_mutex_t lock;
	struct simfs_config cfg;
	struct inode **inodes; /* by inode number; NULL = none */
	size_t ninodes;
	struct item **items; /* unfolded items, issue order */
	size_t nitems, citems;
	struct ofd *fds;
	size_t nfds, cfds;
	uint64_t rng;
	uint64_t points;
	uint64_t pver;
	simfs_hook_fn hook;
	void *hook_arg;
	simfs_hook_fn before_hook;
	simfs_hook_fn after_hook;
	void *after_arg;
	void *before_arg;
	int in_hook;
	int depth;           /* holds of lock by its holder (recursive) */
	pthread_cond_t lkcv; /* a lock was released (ofd_lock's SYS_LK_WAIT) */
	uint32_t dev_minor;
	uint64_t fsid;
};

static _Atomic(struct simfs *) g_fs;
static __thread struct simfs *tl_fs;
static __thread int tl_tag; /* the simulated process this thread acts for */
static __thread int tl_held; /* holds of some simfs's lock by this thread */
static atomic_uint next_minor = 1;

/* A process of several threads killed by one of them (simfs_proc_stop): its
 * other threads park at their next simfs call or futex wait, outside every
 * lock, and once it is dead never run again. */
#define DEAD_TAGS 64
static _Atomic int g_stop_tag;            /* the process whose threads park, 0 none */
static _Atomic int g_dead_tags[DEAD_TAGS]; /* processes stopped for good (the newest) */
static _Atomic unsigned g_ndead;
static _Atomic int g_parked;              /* threads of g_stop_tag parked */
static _Atomic int g_infutex[64];         /* threads in futex_wait, by tag % 64 */
static bool (*_Atomic g_may_park)(void);

static bool tag_dead(int tag)
{
	for (unsigned i = 0; tag && i < DEAD_TAGS; i++)
		if (atomic_load(&g_dead_tags[i]) == tag)
			return true;
	return false;
}

static _Noreturn void block_for_good(void)
{
	/* Blocked, not exited: what the thread allocated stays reachable from
	 * its stack (no leak to report), and nothing of it runs again. */
	for (;;)
		pause();
}

static void park_point(void)
{
	int tag = tl_tag;
	if (!tag || tl_held)
		return;
	if (tag_dead(tag))
		block_for_good();
	if (atomic_load(&g_stop_tag) != tag)
		return;
	bool (*ok)(void) = atomic_load(&g_may_park);
	if (ok && !ok())
		return; /* (it holds a lock other processes share: later) */
	atomic_fetch_add(&g_parked, 1);
	while (atomic_load(&g_stop_tag) == tag && !tag_dead(tag))
		nanosleep(&(struct timespec){0, 20000}, NULL);
	if (tag_dead(tag))
		block_for_good();
	atomic_fetch_sub(&g_parked, 1);
}

/* The lock is recursive; depth counts its holder's holds (only the holder
 * touches it), so that a wait or a dying thread can let go of all of them. */
static void lock(struct simfs *fs)
{
	if (!tl_held)
		park_point();
	pthread_mutex_lock(&fs->lock);
	fs->depth++;
	tl_held++;
}
static void unlock(struct simfs *fs)
{
	fs->depth--;
	tl_held--;
	pthread_mutex_unlock(&fs->lock);
}

static uint64_t mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static struct inode *inode_get(struct simfs *fs, uint64_t ino)
{
	return ino < fs->ninodes ? fs->inodes[ino] : NULL;
}

static struct inode *inode_new(struct simfs *fs, bool isdir, unsigned mode)
{
	uint64_t ino = fs->ninodes;
	struct inode **v = realloc(fs->inodes, (ino + 1) * sizeof(*v));
	if (!v)
		abort();
	fs->inodes = v;
	fs->ninodes = ino + 1;
	struct inode *in = xcalloc(1, sizeof(*in));
	in->ino = ino;
	in->isdir = isdir;
	in->mode = mode;
	fs->inodes[ino] = in;
	return in;
}

static void dir_free(struct dir *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i].name);
	free(d->v);
	memset(d, 0, sizeof(*d));
}

static void dir_copy(struct dir *dst, const struct dir *src)
{
	dst->n = dst->cap = src->n;
	dst->v = xcalloc(src->n, sizeof(*dst->v));
	for (size_t i = 0; i < src->n; i++) {
		dst->v[i].name = xstrdup(src->v[i].name);
		dst->v[i].ino = src->v[i].ino;
	}
}

static struct dent *dir_find(struct dir *d, const char *name)
{
	for (size_t i = 0; i < d->n; i++)
		if (!strcmp(d->v[i].name, name))
			return &d->v[i];
	return NULL;
}

static void dir_set(struct dir *d, const char *name, uint64_t ino)
{
	struct dent *e = dir_find(d, name);
	if (e) {
		e->ino = ino;
		return;
	}
	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 8;
		d->v = realloc(d->v, d->cap * sizeof(*d->v));
		if (!d->v)
			abort();
	}
	d->v[d->n].name = xstrdup(name);
	d->v[d->n].ino = ino;
	d->n++;
}

static void dir_del(struct dir *d, const char *name, uint64_t ino)
{
	for (size_t i = 0; i < d->n; i++)
		if (!strcmp(d->v[i].name, name) && (ino == 0 || d->v[i].ino == ino)) {
			free(d->v[i].name);
			d->v[i] = d->v[--d->n];
			return;
		}
}

static void inode_free(struct inode *in)
{
	if (!in)
		return;
	pages_free(&in->vis);
	pages_free(&in->base);
	dir_free(&in->vd);
	dir_free(&in->bd);
	free(in->lk);
	free(in);
}

static void item_free(struct item *it)
{
	if (!it)
		return;
	free(it->data);
	free(it->name);
	free(it->name2);
	free(it->path);
	free(it);
}

static struct item *item_add(struct simfs *fs, uint8_t kind, const char *path)
{
	if (fs->nitems == fs->citems) {
		fs->citems = fs->citems ? fs->citems * 2 : 64;
		fs->items = realloc(fs->items, fs->citems * sizeof(*fs->items));
		if (!fs->items)
			abort();
	}
	struct item *it = xcalloc(1, sizeof(*it));
	it->kind = kind;
	it->point = fs->points;
	it->path = xstrdup(path ? path : "");
	fs->items[fs->nitems++] = it;
	fs->pver++;
	return it;
}

/* --- applying items (to a base: folding, and to images) ------------------------- */

static uint64_t units_of(uint64_t off, uint64_t len, uint32_t unit)
{
	if (!len)
		return 0;
	return (off + len - 1) / unit - off / unit + 1;
}

static bool tear_has(const struct simfs_fate *f, uint64_t i, uint64_t n)
{
	switch (f->tear) {
	case SIMFS_T_PREFIX: return i < f->arg;
	case SIMFS_T_SUFFIX: return i >= f->arg;
	case SIMFS_T_HOLE: return i != f->arg;
	case SIMFS_T_ONLY: return i == f->arg;
	case SIMFS_T_MASK: return i < 64 && (f->bits >> i) & 1;
	case SIMFS_T_RANDOM: return mix(f->bits ^ (i * 0xD1B54A32D192ED03ull)) & 1;
	}
	(void)n;
	return false;
}

static void apply_data(struct inode *in, const struct item *it, const struct simfs_fate *f,
		       uint32_t unit)
{
	if (!f || f->fate == SIMFS_KEEP) {
		pages_write(&in->base, it->off, it->data, it->len);
		return;
	}
	uint64_t first = it->off / unit, n = units_of(it->off, it->len, unit);
	for (uint64_t i = 0; i < n; i++) {
		if (!tear_has(f, i, n))
			continue;
		uint64_t lo = (first + i) * unit, hi = lo + unit;
		if (lo < it->off)
			lo = it->off;
		if (hi > it->off + it->len)
			hi = it->off + it->len;
		pages_write(&in->base, lo, it->data ? it->data + (lo - it->off) : NULL, hi - lo);
	}
}

static void apply_size(struct inode *in, uint64_t size)
{
	if (size < in->bsize)
		pages_zero_from(&in->base, size);
	in->bsize = size;
}

/* Apply item it to the bases of the inodes in tab (f NULL = whole). */
static void apply_item(struct inode **tab, size_t ntab, const struct item *it,
		       const struct simfs_fate *f, uint32_t unit)
{
	struct inode *in = it->ino < ntab ? tab[it->ino] : NULL;
	switch (it->kind) {
	case IT_DATA:
		if (in) {
			apply_data(in, it, f, unit);
			if (it->size > in->bsize && (!f || f->fate == SIMFS_KEEP))
				apply_size(in, it->size);
		}
		break;
	case IT_SIZE:
		if (in)
			apply_size(in, it->size);
		break;
	case IT_CREATE:
		if (in)
			dir_set(&in->bd, it->name, it->ino2);
		break;
	case IT_UNLINK:
		if (in)
			dir_del(&in->bd, it->name, it->ino2);
		break;
	case IT_RENAME: {
		struct inode *d = it->dino < ntab ? tab[it->dino] : NULL;
		if (in)
			dir_del(&in->bd, it->name, it->ino2);
		if (d)
			dir_set(&d->bd, it->name2, it->ino2);
		break;
	}
	}
}

/* Objects an item belongs to (for per-object order). */
static int item_objs(const struct item *it, uint64_t o[2])
{
	o[0] = it->ino;
	if (it->kind == IT_RENAME && it->dino != it->ino) {
		o[1] = it->dino;
		return 2;
	}
	return 1;
}

/* Fold durable items into their bases where per-object order allows. */
static void fold(struct simfs *fs)
{
	uint64_t *blocked = NULL;
	size_t nb = 0, cb = 0, w = 0;
	for (size_t i = 0; i < fs->nitems; i++) {
		struct item *it = fs->items[i];
		uint64_t o[2];
		int no = item_objs(it, o);
		bool blk = false;
		for (int k = 0; k < no && !blk; k++)
			for (size_t j = 0; j < nb; j++)
				if (blocked[j] == o[k])
					blk = true;
		if (it->durable && !blk) {
			apply_item(fs->inodes, fs->ninodes, it, NULL, PG);
			item_free(it);
			continue;
		}
		for (int k = 0; k < no; k++) {
			if (nb == cb) {
				cb = cb ? cb * 2 : 16;
				blocked = realloc(blocked, cb * sizeof(*blocked));
				if (!blocked)
					abort();
			}
			blocked[nb++] = o[k];
		}
		fs->items[w++] = it;
	}
	fs->nitems = w;
	free(blocked);
}

/* --- filesystem ------------------------------------------------------------------ */

static struct simfs *fs_alloc(const struct simfs_config *cfg)
{
	struct simfs *fs = xcalloc(1, sizeof(*fs));
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&fs->lock, &a);
	pthread_mutexattr_destroy(&a);
	pthread_cond_init(&fs->lkcv, NULL);
	if (cfg)
		fs->cfg = *cfg;
	if (!fs->cfg.dio_align)
		fs->cfg.dio_align = 512;
	if (!fs->cfg.dio_mem_align)
		fs->cfg.dio_mem_align = fs->cfg.dio_align;
	fs->rng = fs->cfg.seed;
	return fs;
}

static int mkdir_locked(struct simfs *fs, const char *path);
static int put_locked(struct simfs *fs, const char *path, const void *data, size_t len, unsigned mode);
static void regions_drop(struct simfs *fs, bool all);

struct simfs *simfs_new(const struct simfs_config *cfg)
{
	struct simfs *fs = fs_alloc(cfg);
	fs->dev_minor = atomic_fetch_add(&next_minor, 1);
	fs->fsid = 0x51f5000000000000ull | fs->dev_minor;
	fs->inodes = xcalloc(ROOT_INO + 1, sizeof(*fs->inodes));
	fs->ninodes = ROOT_INO;
	inode_new(fs, true, 0755);
	if (fs->cfg.phys_block) {
		/* atomio reads the device's physical sector size from sysfs */
		char p[128], v[32];
		snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/queue", SIM_MAJOR, fs->dev_minor);
		for (char *s = p + 1; (s = strchr(s, '/')); s++) {
			*s = 0;
			mkdir_locked(fs, p);
			*s = '/';
		}
		mkdir_locked(fs, p);
		strcat(p, "/physical_block_size");
		int n = snprintf(v, sizeof(v), "%u\n", fs->cfg.phys_block);
		put_locked(fs, p, v, (size_t)n, 0444);
	}
	return fs;
}

void simfs_free(struct simfs *fs)
{
	if (!fs)
		return;
	if (atomic_load(&g_fs) == fs)
		atomic_store(&g_fs, NULL);
	for (size_t i = 0; i < fs->ninodes; i++)
		inode_free(fs->inodes[i]);
	free(fs->inodes);
	for (size_t i = 0; i < fs->nitems; i++)
		item_free(fs->items[i]);
	free(fs->items);
	for (size_t i = 0; i < fs->nfds; i++)
		free(fs->fds[i].path);
	free(fs->fds);
	regions_drop(fs, true);
	pthread_cond_destroy(&fs->lkcv);
	pthread_mutex_destroy(&fs->lock);
	free(fs);
}

struct simfs *simfs_current(void) { return tl_fs ? tl_fs : atomic_load(&g_fs); }

struct simfs *simfs_enter(struct simfs *fs)
{
	struct simfs *old = tl_fs;
	tl_fs = fs;
	return old;
}

void simfs_install(struct simfs *fs)
{
	atomic_store(&g_fs, fs);
	atomio_sys_set(&simfs_ops);
}

void simfs_uninstall(void)
{
	atomio_sys_set(NULL);
	atomic_store(&g_fs, NULL);
}

void simfs_set_hook(struct simfs *fs, simfs_hook_fn fn, void *arg)
{
	lock(fs);
	fs->hook = fn;
	fs->hook_arg = arg;
	unlock(fs);
}

void simfs_set_after_hook(struct simfs *fs, simfs_hook_fn fn, void *arg)
{
	lock(fs);
	fs->after_hook = fn;
	fs->after_arg = arg;
	unlock(fs);
}

/* The call is done (what it made durable is): the after hook, if any. */
static void after_point(struct simfs *fs, struct simfs_opinfo *oi)
{
	if (fs->after_hook && !fs->in_hook) {
		oi->after = true;
		fs->in_hook++;
		fs->after_hook(fs, oi, fs->after_arg);
		fs->in_hook--;
	}
}

void simfs_set_before_hook(struct simfs *fs, simfs_hook_fn fn, void *arg)
{
	lock(fs);
	fs->before_hook = fn;
	fs->before_arg = arg;
	unlock(fs);
}

uint64_t simfs_points(struct simfs *fs)
{
	lock(fs);
	uint64_t n = fs->points;
	unlock(fs);
	return n;
}

void simfs_lock(struct simfs *fs) { lock(fs); }
void simfs_unlock(struct simfs *fs) { unlock(fs); }

static void crash_point(struct simfs *fs, struct simfs_opinfo *oi)
{
	oi->index = fs->points++;
	oi->pending_version = fs->pver;
	if (fs->hook && !fs->in_hook) {
		fs->in_hook++;
		fs->hook(fs, oi, fs->hook_arg);
		fs->in_hook--;
	}
}

/* --- paths ------------------------------------------------------------------------- */

#define MAXCOMP 128

struct pathv {
	int n;
	char *c[MAXCOMP];
	char buf[PATH_MAX];
};

/* Split an absolute or root-relative path into components, "." and ".."
 * resolved lexically (there are no symlinks). */
static int split(const char *path, struct pathv *pv)
{
	if (!path || !*path)
		return -ENOENT;
	if (strlen(path) >= PATH_MAX)
		return -ENAMETOOLONG;
	strcpy(pv->buf, path);
	pv->n = 0;
	for (char *save = NULL, *t = strtok_r(pv->buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		if (!strcmp(t, "."))
			continue;
		if (!strcmp(t, "..")) {
			if (pv->n)
				pv->n--;
			continue;
		}
		if (strlen(t) > NAME_MAX)
			return -ENAMETOOLONG;
		if (pv->n == MAXCOMP)
			return -ENAMETOOLONG;
		pv->c[pv->n++] = t;
	}
	return 0;
}

/* Walk components [0, n); the inode or a negative errno. */
static int64_t walk_n(struct simfs *fs, const struct pathv *pv, int n)
{
	struct inode *cur = inode_get(fs, ROOT_INO);
	for (int i = 0; i < n; i++) {
		if (!cur->isdir)
			return -ENOTDIR;
		struct dent *e = dir_find(&cur->vd, pv->c[i]);
		if (!e)
			return -ENOENT;
		cur = inode_get(fs, e->ino);
		if (!cur)
			return -EIO;
	}
	return (int64_t)cur->ino;
}

static int64_t lookup(struct simfs *fs, const char *path)
{
	struct pathv pv;
	int r = split(path, &pv);
	if (r < 0)
		return r;
	return walk_n(fs, &pv, pv.n);
}

/* Parent directory inode of path's last component, and that name. */
static int64_t lookup_parent(struct simfs *fs, const char *path, struct pathv *pv, const char **name)
{
	int r = split(path, pv);
	if (r < 0)
		return r;
	if (pv->n == 0)
		return -EEXIST; /* "/" */
	int64_t d = walk_n(fs, pv, pv->n - 1);
	if (d < 0)
		return d;
	if (!inode_get(fs, (uint64_t)d)->isdir)
		return -ENOTDIR;
	*name = pv->c[pv->n - 1];
	return d;
}

static void canon(const struct pathv *pv, char *out)
{
	out[0] = 0;
	if (pv->n == 0) {
		strcpy(out, "/");
		return;
	}
	for (int i = 0; i < pv->n; i++) {
		strcat(out, "/");
		strcat(out, pv->c[i]);
	}
}

/* --- setup / inspection ------------------------------------------------------------ */

static int mkdir_locked(struct simfs *fs, const char *path)
{
	struct pathv pv;
	const char *name;
	int64_t d = lookup_parent(fs, path, &pv, &name);
	if (d < 0)
		return (int)d;
	struct inode *di = inode_get(fs, (uint64_t)d);
	if (dir_find(&di->vd, name))
		return -EEXIST;
	struct inode *in = inode_new(fs, true, 0755);
	dir_set(&di->vd, name, in->ino);
	dir_set(&di->bd, name, in->ino);
	return 0;
}

int simfs_mkdir(struct simfs *fs, const char *path)
{
	lock(fs);
	int r = mkdir_locked(fs, path);
	unlock(fs);
	return r;
}

static int put_locked(struct simfs *fs, const char *path, const void *data, size_t len, unsigned mode)
{
	struct pathv pv;
	const char *name;
	int64_t d = lookup_parent(fs, path, &pv, &name);
	if (d < 0)
		return (int)d;
	for (size_t i = 0; i < fs->nitems; i++)
		if (fs->items[i]->ino == (uint64_t)d || fs->items[i]->dino == (uint64_t)d)
			return -EBUSY; /* keep it simple: no durable entry under pending ones */
	struct inode *di = inode_get(fs, (uint64_t)d);
	struct inode *in = inode_new(fs, false, mode & 07777);
	pages_write(&in->vis, 0, data, len);
	pages_write(&in->base, 0, data, len);
	in->vsize = in->bsize = len;
	dir_set(&di->vd, name, in->ino);
	dir_set(&di->bd, name, in->ino);
	return 0;
}

int simfs_put(struct simfs *fs, const char *path, const void *data, size_t len, unsigned mode)
{
	lock(fs);
	int r = put_locked(fs, path, data, len, mode);
	unlock(fs);
	return r;
}

static struct inode *file_at(struct simfs *fs, const char *path)
{
	int64_t ino = lookup(fs, path);
	if (ino < 0)
		return NULL;
	struct inode *in = inode_get(fs, (uint64_t)ino);
	return in && !in->isdir ? in : NULL;
}

uint8_t *simfs_get(struct simfs *fs, const char *path, size_t *len)
{
	lock(fs);
	struct inode *in = file_at(fs, path);
	uint8_t *b = NULL;
	*len = 0;
	if (in) {
		b = xmalloc(in->vsize + 1);
		pages_read(&in->vis, 0, b, in->vsize);
		*len = in->vsize;
	}
	unlock(fs);
	return b;
}

int simfs_cmp(struct simfs *fs, const char *path, const void *data, size_t len, uint64_t *where)
{
	lock(fs);
	struct inode *in = file_at(fs, path);
	int r = 0;
	if (!in) {
		r = -ENOENT;
		goto out;
	}
	uint64_t n = in->vsize < len ? in->vsize : len;
	const uint8_t *d = data;
	static const uint8_t zeros[PG];
	for (uint64_t off = 0; off < n;) {
		size_t i = off / PG, k = off % PG;
		size_t m = PG - k < n - off ? PG - k : (size_t)(n - off);
		const uint8_t *src = i < in->vis.n && in->vis.v[i] ? in->vis.v[i]->d + k : zeros;
		if (memcmp(src, d + off, m)) {
			for (size_t j = 0; j < m; j++)
				if (src[j] != d[off + j]) {
					if (where)
						*where = off + j;
					break;
				}
			r = 1;
			goto out;
		}
		off += m;
	}
	if (in->vsize != len) {
		if (where)
			*where = n;
		r = 1;
	}
out:
	unlock(fs);
	return r;
}

int64_t simfs_read(struct simfs *fs, const char *path, uint64_t off, void *buf, uint64_t len)
{
	lock(fs);
	struct inode *in = file_at(fs, path);
	int64_t r = -ENOENT;
	if (in) {
		uint64_t n = off >= in->vsize ? 0 : in->vsize - off < len ? in->vsize - off : len;
		pages_read(&in->vis, off, buf, n);
		r = (int64_t)n;
	}
	unlock(fs);
	return r;
}

int64_t simfs_size(struct simfs *fs, const char *path)
{
	lock(fs);
	struct inode *in = file_at(fs, path);
	int64_t r = in ? (int64_t)in->vsize : -ENOENT;
	unlock(fs);
	return r;
}

bool simfs_exists(struct simfs *fs, const char *path)
{
	lock(fs);
	bool r = lookup(fs, path) >= 0;
	unlock(fs);
	return r;
}

/* --- descriptors -------------------------------------------------------------------- */

static struct ofd *ofd_get(struct simfs *fs, int fd)
{
	if (fd < FD_BASE || (size_t)(fd - FD_BASE) >= fs->nfds)
		return NULL;
	struct ofd *o = &fs->fds[fd - FD_BASE];
	return o->open ? o : NULL;
}

static int ofd_new(struct simfs *fs, uint64_t ino, int flags, const char *path)
{
	if (fs->nfds == fs->cfds) {
		fs->cfds = fs->cfds ? fs->cfds * 2 : 64;
		fs->fds = realloc(fs->fds, fs->cfds * sizeof(*fs->fds));
		if (!fs->fds)
			abort();
	}
	/* Descriptor numbers are never reused: a stale one held by code that
	 * outlived a simulated crash can never reach a new file. */
	struct ofd *o = &fs->fds[fs->nfds];
	memset(o, 0, sizeof(*o));
	o->ino = ino;
	o->flags = flags;
	o->open = true;
	o->path = xstrdup(path);
	o->tag = tl_tag;
	o->opener = pthread_self();
	return FD_BASE + (int)fs->nfds++;
}

#define CUR_OR_FAIL(fs)                \
	struct simfs *fs = simfs_current(); \
	if (!fs)                           \
		return -ENOSYS

/* A live descriptor (dead ones answer EIO), with the fs locked. */
#define FD_OR_FAIL(fs, o, fd)              \
	lock(fs);                              \
	struct ofd *o = ofd_get(fs, fd);       \
	if (!o) {                              \
		unlock(fs);                        \
		return -EBADF;                     \
	}                                      \
	if (o->dead) {                         \
		unlock(fs);                        \
		return -EIO;                       \
	}                                      \
	struct inode *o##_in = inode_get(fs, o->ino)

/* --- volatile files ------------------------------------------------------------------ */

/* A file whose name ends with SIMFS_VOLATILE_SUFFIX (simfs.h, VOLATILE
 * FILES): its changes are durable at once, no pending item, no crash point. */
static bool vol_path(const char *path)
{
	static const char suf[] = SIMFS_VOLATILE_SUFFIX;
	size_t n = strlen(path), k = sizeof(suf) - 1;
	return n >= k && !strcmp(path + n - k, suf);
}

/* --- shared memory (shm_map) --------------------------------------------------------------- */

/* Memory handed out by shm_map: one region per inode, shared by every
 * mapping of it, like a file's pages in the page cache -- but not its bytes
 * for pread and pwrite (atomio never mixes the two), and no part of any
 * crash image.  The registry is process-wide: shm_unmap names no simfs. */
struct region {
	struct region *next;
	struct simfs *fs;   /* whose (freed with it) */
	uint64_t ino;
	bool attached;      /* still the inode's: handed out to new mappings */
	void *p;
	size_t len;
	int maps;           /* mappings not yet unmapped */
};
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct region *g_regions;

static void region_free_locked(struct region **pp)
{
	struct region *r = *pp;
	*pp = r->next;
	munmap(r->p, r->len);
	free(r);
}

static struct region *region_new_locked(struct simfs *fs, uint64_t ino, bool attached, size_t len)
{
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	struct region *r = xcalloc(1, sizeof(*r));
	*r = (struct region){.next = g_regions, .fs = fs, .ino = ino, .attached = attached, .p = p,
			     .len = len ? len : 1, .maps = 1};
	g_regions = r;
	return r;
}

static struct region **region_find_locked(struct simfs *fs, uint64_t ino)
{
	for (struct region **pp = &g_regions; *pp; pp = &(*pp)->next)
		if ((*pp)->fs == fs && (*pp)->attached && (*pp)->ino == ino)
			return pp;
	return NULL;
}

/* The file's size became size: what a mapping holds beyond it is gone (a
 * cut to nothing gives the inode fresh memory; a mapping still held -- by a
 * "process" that died -- keeps the old). */
static void region_truncate(struct simfs *fs, uint64_t ino, uint64_t size)
{
	pthread_mutex_lock(&g_reg_mu);
	struct region **pp = region_find_locked(fs, ino);
	if (pp && size == 0) {
		if ((*pp)->maps)
			(*pp)->attached = false;
		else
			region_free_locked(pp);
	} else if (pp && size < (*pp)->len) {
		memset((char *)(*pp)->p + size, 0, (*pp)->len - size);
	}
	pthread_mutex_unlock(&g_reg_mu);
}

/* The inode's name is gone (unlink) or the whole disk (simfs_reset): no new
 * mapping gets its memory again.  all: fs itself is freed: every region of
 * it goes (mappings of dead "processes" included: nothing reads them). */
static void region_detach(struct simfs *fs, uint64_t ino)
{
	pthread_mutex_lock(&g_reg_mu);
	struct region **pp = region_find_locked(fs, ino);
	if (pp) {
		if ((*pp)->maps)
			(*pp)->attached = false;
		else
			region_free_locked(pp);
	}
	pthread_mutex_unlock(&g_reg_mu);
}

static void regions_drop(struct simfs *fs, bool all)
{
	pthread_mutex_lock(&g_reg_mu);
	for (struct region **pp = &g_regions; *pp;) {
		if ((*pp)->fs == fs && (all || !(*pp)->maps)) {
			region_free_locked(pp);
			continue;
		}
		if ((*pp)->fs == fs)
			(*pp)->attached = false;
		pp = &(*pp)->next;
	}
	pthread_mutex_unlock(&g_reg_mu);
}

/* --- locks (flock, OFD byte ranges) ------------------------------------------------------ */

static void lk_add(struct inode *in, int fd, uint8_t kind, uint64_t start, uint64_t end)
{
	if (in->nlk == in->clk) {
		in->clk = in->clk ? 2 * in->clk : 8;
		in->lk = realloc(in->lk, in->clk * sizeof(*in->lk));
		if (!in->lk)
			abort();
	}
	in->lk[in->nlk++] = (struct lk){.fd = fd, .kind = kind, .start = start, .end = end};
}

/* Drop fd's locks of the kinds in [k0, k1] over [start, end), splitting
 * those that reach beyond it. */
static void lk_clear(struct inode *in, int fd, uint8_t k0, uint8_t k1, uint64_t start, uint64_t end)
{
	struct lk *old = in->lk;
	size_t n = in->nlk;
	in->lk = NULL;
	in->nlk = in->clk = 0;
	for (size_t i = 0; i < n; i++) {
		struct lk l = old[i];
		if (l.fd != fd || l.kind < k0 || l.kind > k1 || l.end <= start || l.start >= end) {
			lk_add(in, l.fd, l.kind, l.start, l.end);
			continue;
		}
		if (l.start < start)
			lk_add(in, fd, l.kind, l.start, start);
		if (l.end > end)
			lk_add(in, fd, l.kind, end, l.end);
	}
	free(old);
}

/* A lock of another descriptor that keeps fd from taking kind over
 * [start, end), or NULL. */
static const struct lk *lk_conflict(const struct inode *in, int fd, uint8_t kind, uint64_t start, uint64_t end)
{
	for (size_t i = 0; i < in->nlk; i++) {
		const struct lk *l = &in->lk[i];
		if (l->fd == fd || l->end <= start || l->start >= end)
			continue;
		bool fl = kind <= LK_FL_EX, lfl = l->kind <= LK_FL_EX;
		if (fl != lfl)
			continue; /* flock and fcntl locks do not see each other (Linux) */
		if (kind == LK_FL_EX || kind == LK_WR || l->kind == LK_FL_EX || l->kind == LK_WR)
			return l;
	}
	return NULL;
}

/* A descriptor closes (or its process dies): its locks go.  fs locked. */
static void fd_close_locked(struct simfs *fs, int fd)
{
	struct ofd *o = &fs->fds[fd - FD_BASE];
	if (!o->dead) {
		struct inode *in = inode_get(fs, o->ino);
		if (in && in->nlk) {
			lk_clear(in, fd, LK_FL_SH, LK_WR, 0, UINT64_MAX);
			pthread_cond_broadcast(&fs->lkcv);
		}
	}
	o->open = false;
}

/* --- simulated processes ------------------------------------------------------------------- */

int simfs_proc_set(int tag)
{
	int old = tl_tag;
	tl_tag = tag;
	return old;
}

int simfs_proc_get(void) { return tl_tag; }

int simfs_proc_kill(struct simfs *fs, int tag)
{
	int n = 0;
	lock(fs);
	for (size_t i = 0; tag && i < fs->nfds; i++)
		if (fs->fds[i].open && fs->fds[i].tag == tag) {
			fd_close_locked(fs, FD_BASE + (int)i);
			n++;
		}
	unlock(fs);
	return n;
}

/* The dying thread leaves: out of the hook (crash_point counted this thread
 * in), and out of the simfs, however many times it holds it; then blocks. */
static _Noreturn void leave_for_good(struct simfs *fs)
{
	lock(fs);
	if (fs->in_hook)
		fs->in_hook--;
	/* (depth read while held: once let go, it is another holder's) */
	for (int d = fs->depth; d > 0; d--)
		unlock(fs);
	block_for_good();
}

_Noreturn void simfs_proc_die(struct simfs *fs)
{
	simfs_proc_kill(fs, tl_tag);
	leave_for_good(fs);
}

bool simfs_proc_stop(int tag, int threads, bool (*may_park)(void))
{
	atomic_store(&g_may_park, may_park);
	atomic_store(&g_parked, 0);
	atomic_store(&g_stop_tag, tag);
	/* bounded: a thread that waits for another way (a condition variable
	 * of its process, a lock another holds) never parks */
	for (int i = 0; i < 5000; i++) {
		if (atomic_load(&g_parked) + atomic_load(&g_infutex[tag & 63]) >= threads)
			return true;
		nanosleep(&(struct timespec){0, 20000}, NULL);
	}
	atomic_store(&g_stop_tag, 0);
	while (atomic_load(&g_parked) > 0) /* they go on */
		nanosleep(&(struct timespec){0, 20000}, NULL);
	return false;
}

_Noreturn void simfs_proc_die_as(struct simfs *fs, int tag)
{
	unsigned n = atomic_fetch_add(&g_ndead, 1);
	atomic_store(&g_dead_tags[n % DEAD_TAGS], tag);
	atomic_store(&g_stop_tag, 0);
	simfs_proc_kill(fs, tag);
	leave_for_good(fs);
}

/* The real futex (as sys.c's), and a place where a stopped process's thread
 * parks: before the wait, and when it ends. */
static int s_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t timeout_ns)
{
	park_point();
	int tag = tl_tag;
	if (tag)
		atomic_fetch_add(&g_infutex[tag & 63], 1);
	struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000u),
			      .tv_nsec = (long)(timeout_ns % 1000000000u)};
	long r = syscall(SYS_futex, word, FUTEX_WAIT, val, timeout_ns ? &ts : NULL, NULL, 0);
	int e = errno;
	if (tag)
		atomic_fetch_sub(&g_infutex[tag & 63], 1);
	park_point();
	return r < 0 ? -e : 0;
}

/* --- the ops table ------------------------------------------------------------------ */

static void size_change(struct simfs *fs, struct inode *in, uint64_t size, const char *path)
{
	if (size < in->vsize)
		pages_zero_from(&in->vis, size);
	in->vsize = size;
	region_truncate(fs, in->ino, size);
	if (in->vol) {
		/* durable at once */
		if (size < in->bsize)
			pages_zero_from(&in->base, size);
		in->bsize = size;
		return;
	}
	struct item *it = item_add(fs, IT_SIZE, path);
	it->ino = in->ino;
	it->size = size;
}

/* open("/proc/self/fd/N"): the inode of descriptor N, reopened (Linux
 * opens the file itself, whatever its path is now).  -2 = not such a path. */
static int proc_fd_open(struct simfs *fs, const char *path, int flags)
{
	static const char pre[] = "/proc/self/fd/";
	if (!fs->cfg.proc_fd || strncmp(path, pre, sizeof(pre) - 1))
		return -2;
	char *end;
	long n = strtol(path + sizeof(pre) - 1, &end, 10);
	if (*end || n < 0 || n > INT_MAX)
		return -ENOENT;
	struct ofd *o = ofd_get(fs, (int)n);
	if (!o || o->dead)
		return -ENOENT;
	struct inode *in = inode_get(fs, o->ino);
	if (in->isdir && (flags & O_ACCMODE) != O_RDONLY)
		return -EISDIR;
	if ((flags & O_DIRECTORY) && !in->isdir)
		return -ENOTDIR;
	if ((flags & O_DIRECT) && fs->cfg.no_direct)
		return -EINVAL;
	char *p = xstrdup(o->path); /* ofd_new may move the table */
	int r = ofd_new(fs, in->ino, flags, p);
	free(p);
	if ((flags & O_TRUNC) && !in->isdir && (flags & O_ACCMODE) != O_RDONLY && in->vsize) {
		struct ofd *no = ofd_get(fs, r);
		size_change(fs, in, 0, no->path);
		struct simfs_opinfo oi = {.kind = SIMFS_OP_TRUNCATE, .path = no->path};
		if (!in->vol)
			crash_point(fs, &oi);
	}
	return r;
}

static int s_open(const char *path, int flags, mode_t mode)
{
	CUR_OR_FAIL(fs);
	lock(fs);
	struct pathv pv;
	const char *name = NULL;
	int r = proc_fd_open(fs, path, flags);
	if (r != -2) {
		unlock(fs);
		return r;
	}
	int64_t ino = lookup(fs, path);
	if (ino == -ENOENT && (flags & O_CREAT)) {
		int64_t d = lookup_parent(fs, path, &pv, &name);
		if (d < 0) {
			r = (int)d;
			goto out;
		}
		struct inode *in = inode_new(fs, false, mode & 07777);
		dir_set(&inode_get(fs, (uint64_t)d)->vd, name, in->ino);
		in->vol = vol_path(name);
		if (in->vol) {
			/* durable at once: no item */
			dir_set(&inode_get(fs, (uint64_t)d)->bd, name, in->ino);
		} else {
			struct item *it = item_add(fs, IT_CREATE, path);
			it->ino = (uint64_t)d;
			it->ino2 = in->ino;
			it->name = xstrdup(name);
		}
		if ((flags & O_DIRECT) && fs->cfg.no_direct) {
			/* tmpfs creates the file, then refuses O_DIRECT */
			r = -EINVAL;
			goto out;
		}
		char cp[PATH_MAX];
		canon(&pv, cp);
		r = ofd_new(fs, in->ino, flags, cp);
		struct simfs_opinfo oi = {.kind = SIMFS_OP_CREATE, .path = cp};
		if (!in->vol)
			crash_point(fs, &oi);
		goto out;
	}
	if (ino < 0) {
		r = (int)ino;
		goto out;
	}
	if ((flags & O_CREAT) && (flags & O_EXCL)) {
		r = -EEXIST;
		goto out;
	}
	struct inode *in = inode_get(fs, (uint64_t)ino);
	if (in->isdir && (flags & O_ACCMODE) != O_RDONLY) {
		r = -EISDIR;
		goto out;
	}
	if ((flags & O_DIRECTORY) && !in->isdir) {
		r = -ENOTDIR;
		goto out;
	}
	if ((flags & O_DIRECT) && fs->cfg.no_direct) {
		r = -EINVAL;
		goto out;
	}
	split(path, &pv);
	char cp[PATH_MAX];
	canon(&pv, cp);
	r = ofd_new(fs, in->ino, flags, cp);
	if ((flags & O_TRUNC) && !in->isdir && (flags & O_ACCMODE) != O_RDONLY && in->vsize) {
		size_change(fs, in, 0, cp);
		struct simfs_opinfo oi = {.kind = SIMFS_OP_TRUNCATE, .path = cp};
		if (!in->vol)
			crash_point(fs, &oi);
	}
out:
	unlock(fs);
	return r;
}

static int s_close(int fd)
{
	CUR_OR_FAIL(fs);
	lock(fs);
	struct ofd *o = ofd_get(fs, fd);
	if (!o) {
		unlock(fs);
		return -EBADF;
	}
	fd_close_locked(fs, fd);
	unlock(fs);
	return 0;
}

static bool dio_ok(struct simfs *fs, uint64_t off, uint64_t len, const void *buf)
{
	return off % fs->cfg.dio_align == 0 && len % fs->cfg.dio_align == 0 &&
	       (uintptr_t)buf % fs->cfg.dio_mem_align == 0;
}

static ssize_t s_pread(int fd, void *buf, size_t len, off_t off)
{
	CUR_OR_FAIL(fs);
	FD_OR_FAIL(fs, o, fd);
	ssize_t r;
	if (o_in->isdir)
		r = -EISDIR;
	else if ((o->flags & O_ACCMODE) == O_WRONLY)
		r = -EBADF;
	else if (off < 0)
		r = -EINVAL;
	else if ((o->flags & O_DIRECT) && !dio_ok(fs, (uint64_t)off, len, buf))
		r = -EINVAL;
	else if ((uint64_t)off >= o_in->vsize)
		r = 0;
	else {
		uint64_t n = o_in->vsize - (uint64_t)off < len ? o_in->vsize - (uint64_t)off : len;
		pages_read(&o_in->vis, (uint64_t)off, buf, n);
		r = (ssize_t)n;
	}
	unlock(fs);
	return r;
}

static void make_durable(struct simfs *fs, size_t from, size_t to)
{
	for (size_t i = from; i < to && i < fs->nitems; i++)
		fs->items[i]->durable = true;
	fs->pver++;
	fold(fs);
}

static uint64_t atomic_min(const struct simfs *fs)
{
	return fs->cfg.atomic_write_min ? fs->cfg.atomic_write_min : fs->cfg.dio_align;
}

static ssize_t s_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	CUR_OR_FAIL(fs);
	FD_OR_FAIL(fs, o, fd);
	ssize_t r;
	bool direct = o->flags & O_DIRECT;
	uint64_t len = 0;
	if (o_in->isdir) {
		r = -EISDIR;
		goto out;
	}
	if ((o->flags & O_ACCMODE) == O_RDONLY) {
		r = -EBADF;
		goto out;
	}
	if (off < 0 || iovcnt < 0 || iovcnt > IOV_MAX) {
		r = -EINVAL;
		goto out;
	}
	if ((rwf & ~(RWF_DSYNC | RWF_ATOMIC)) || ((rwf & RWF_DSYNC) && fs->cfg.no_rwf_dsync) ||
	    ((rwf & RWF_ATOMIC) && !fs->cfg.atomic_write_max)) {
		r = -EOPNOTSUPP;
		goto out;
	}
	bool atomic = rwf & RWF_ATOMIC;
	if (atomic) {
		/* Linux's rules (generic_atomic_write_valid and the statx
		 * limits): O_DIRECT, one segment, a power-of-two length within
		 * the unit limits, naturally aligned. */
		uint64_t n = iovcnt == 1 ? iov[0].iov_len : 0;
		if (!direct || iovcnt != 1 || n < atomic_min(fs) || n > fs->cfg.atomic_write_max ||
		    (n & (n - 1)) || (uint64_t)off % n) {
			r = -EINVAL;
			goto out;
		}
	}
	for (int i = 0; i < iovcnt; i++) {
		if (direct && !dio_ok(fs, 0, iov[i].iov_len, iov[i].iov_base)) {
			r = -EINVAL;
			goto out;
		}
		len += iov[i].iov_len;
	}
	if (direct && (uint64_t)off % fs->cfg.dio_align) {
		r = -EINVAL;
		goto out;
	}
	if (len == 0) {
		r = 0;
		goto out;
	}
	if (fs->before_hook && !fs->in_hook && !o_in->vol) {
		struct simfs_opinfo bi = {.kind = SIMFS_OP_WRITE, .index = fs->points,
					  .pending_version = fs->pver, .path = o->path, .off = (uint64_t)off,
					  .len = len, .iov = iov, .iovcnt = iovcnt, .rwf = rwf,
					  .direct = direct, .before = true};
		fs->in_hook++;
		fs->before_hook(fs, &bi, fs->before_arg);
		fs->in_hook--;
	}
	uint8_t *data = xmalloc(len);
	for (int i = 0, p = 0; i < iovcnt; p += (int)iov[i].iov_len, i++)
		memcpy(data + p, iov[i].iov_base, iov[i].iov_len);
	pages_write(&o_in->vis, (uint64_t)off, data, len);
	if (o_in->vol) {
		/* durable at once, no crash point */
		pages_write(&o_in->base, (uint64_t)off, data, len);
		free(data);
		if ((uint64_t)off + len > o_in->vsize)
			size_change(fs, o_in, (uint64_t)off + len, o->path);
		r = (ssize_t)len;
		goto out;
	}
	size_t first = fs->nitems;
	struct item *it = item_add(fs, IT_DATA, o->path);
	it->ino = o_in->ino;
	it->off = (uint64_t)off;
	it->len = len;
	it->direct = direct;
	it->atomic = atomic;
	if (is_zero(data, len))
		free(data);
	else
		it->data = data;
	bool sync = (rwf & RWF_DSYNC) || (o->flags & (O_DSYNC | O_SYNC)) == O_DSYNC ||
		    (o->flags & O_SYNC) == O_SYNC;
	/* A write durable on return makes durable, with its data, the size
	 * needed to read it back (O_DSYNC: "the metadata needed to retrieve
	 * the data"), also where an earlier write's pending size change made
	 * the file that long (ext4 and XFS raise the on-disk size when the
	 * write completes).  So once it is whole on the media the file is at
	 * least this long, whatever became of earlier size changes. */
	if (sync || atomic)
		it->size = (uint64_t)off + len;
	if ((uint64_t)off + len > o_in->vsize) {
		if (atomic)
			/* All of an untorn write or none of it: its size change
			 * too (set when the write completes). */
			o_in->vsize = (uint64_t)off + len;
		else
			size_change(fs, o_in, (uint64_t)off + len, o->path);
	}
	struct simfs_opinfo oi = {.kind = SIMFS_OP_WRITE, .path = o->path, .off = (uint64_t)off,
				  .len = len, .iov = iov, .iovcnt = iovcnt, .rwf = rwf,
				  .direct = direct, .sync = sync};
	crash_point(fs, &oi);
	/* Durable on return: this write's own data and size items only. */
	if (sync)
		make_durable(fs, first, fs->nitems);
	after_point(fs, &oi);
	r = (ssize_t)len;
out:
	unlock(fs);
	return r;
}

static int do_sync(int fd, bool data_only)
{
	CUR_OR_FAIL(fs);
	FD_OR_FAIL(fs, o, fd);
	struct simfs_opinfo oi = {.kind = data_only ? SIMFS_OP_FDATASYNC : SIMFS_OP_FSYNC,
				  .path = o->path, .sync = true};
	if (!o_in->vol)
		crash_point(fs, &oi);
	uint64_t ino = o_in->ino;
	for (size_t i = 0; i < fs->nitems; i++) {
		struct item *it = fs->items[i];
		if (o_in->isdir) {
			/* A directory's fsync makes its entries durable. */
			if (it->kind == IT_CREATE || it->kind == IT_UNLINK) {
				if (it->ino == ino)
					it->durable = true;
			} else if (it->kind == IT_RENAME) {
				if (it->ino == ino)
					it->synced_src = true;
				if (it->dino == ino)
					it->synced_dst = true;
				if (it->synced_src && it->synced_dst)
					it->durable = true;
			}
		} else if ((it->kind == IT_DATA || it->kind == IT_SIZE) && it->ino == ino) {
			/* fsync and fdatasync alike: data and size (Linux's
			 * fdatasync flushes a size change). */
			it->durable = true;
		}
	}
	fs->pver++;
	fold(fs);
	if (!o_in->vol)
		after_point(fs, &oi);
	unlock(fs);
	return 0;
}

static int s_fsync(int fd) { return do_sync(fd, false); }
static int s_fdatasync(int fd) { return do_sync(fd, true); }

static int s_ftruncate(int fd, off_t size)
{
	CUR_OR_FAIL(fs);
	FD_OR_FAIL(fs, o, fd);
	int r = 0;
	if (o_in->isdir || (o->flags & O_ACCMODE) == O_RDONLY || size < 0) {
		r = -EINVAL;
	} else {
		size_change(fs, o_in, (uint64_t)size, o->path);
		struct simfs_opinfo oi = {.kind = SIMFS_OP_TRUNCATE, .path = o->path,
					  .len = (uint64_t)size};
		if (!o_in->vol)
			crash_point(fs, &oi);
		if ((o->flags & O_SYNC) == O_SYNC)
			make_durable(fs, fs->nitems - 1, fs->nitems);
	}
	unlock(fs);
	return r;
}

/* sync_file_range(2): starts write-back, makes NOTHING durable -- in a crash
 * image the range's pending writes landed or not, as any pending write's.  So
 * a store that counted on it for durability fails the crash suite.  Counted,
 * so that a run shows the path was taken. */
_Atomic uint64_t simfs_sfr_calls;

/* fallocate mode 0: the size grows to off + len (blocks read as zeros), a
 * size change like ftruncate's, durable at the next fsync.  Other modes are
 * not simulated. */
static int s_fallocate(int fd, int mode, off_t off, off_t len)
{
	if (mode != 0)
		return -EOPNOTSUPP;
	CUR_OR_FAIL(fs);
	FD_OR_FAIL(fs, o, fd);
	int r = 0;
	if (o_in->isdir || (o->flags & O_ACCMODE) == O_RDONLY || off < 0 || len <= 0) {
		r = -EINVAL;
	} else if ((uint64_t)(off + len) > o_in->vsize) {
		size_change(fs, o_in, (uint64_t)(off + len), o->path);
		struct simfs_opinfo oi = {.kind = SIMFS_OP_TRUNCATE, .path = o->path,
					  .len = (uint64_t)(off + len)};
		if (!o_in->vol)
			crash_point(fs, &oi);
	}
	unlock(fs);
	return r;
}

static int s_sync_file_range(int fd, off_t off, off_t len, unsigned flags)
{
	CUR_OR_FAIL(fs);
	FD_OR_FAIL(fs, o, fd);
	int r = 0;
	if (o_in->isdir || off < 0 || len < 0 ||
	    (flags & ~(SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER)))
		r = -EINVAL;
	else
		atomic_fetch_add(&simfs_sfr_calls, 1);
	unlock(fs);
	return r;
}

static void fill_stat(struct simfs *fs, const struct inode *in, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_dev = makedev(SIM_MAJOR, fs->dev_minor);
	st->st_ino = in->ino;
	st->st_mode = (in->isdir ? S_IFDIR : S_IFREG) | in->mode;
	st->st_nlink = 1;
	st->st_uid = geteuid();
	st->st_gid = getegid();
	st->st_size = (off_t)in->vsize;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((in->vsize + 511) / 512);
}

static int s_fstat(int fd, struct stat *st)
{
	CUR_OR_FAIL(fs);
	FD_OR_FAIL(fs, o, fd);
	fill_stat(fs, o_in, st);
	unlock(fs);
	return 0;
}

static int s_lstat(const char *path, struct stat *st)
{
	CUR_OR_FAIL(fs);
	lock(fs);
	int64_t ino = lookup(fs, path);
	if (ino >= 0)
		fill_stat(fs, inode_get(fs, (uint64_t)ino), st);
	unlock(fs);
	return ino < 0 ? (int)ino : 0;
}

static int s_fstatfs(int fd, struct statfs *sfs)
{
	CUR_OR_FAIL(fs);
	FD_OR_FAIL(fs, o, fd);
	(void)o_in;
	memset(sfs, 0, sizeof(*sfs));
	sfs->f_type = SIMFS_MAGIC;
	sfs->f_bsize = 4096;
	sfs->f_namelen = NAME_MAX;
	uint32_t v[2] = {(uint32_t)fs->fsid, (uint32_t)(fs->fsid >> 32)};
	memcpy(&sfs->f_fsid, v, sizeof(v));
	unlock(fs);
	return 0;
}

static int s_statx(int dirfd, const char *path, int flags, unsigned mask, struct atomio_statx *stx)
{
	CUR_OR_FAIL(fs);
	struct inode *in = NULL;
	lock(fs);
	if ((flags & AT_EMPTY_PATH) && path && !*path) {
		struct ofd *o = ofd_get(fs, dirfd);
		if (!o) {
			unlock(fs);
			return -EBADF;
		}
		if (o->dead) {
			unlock(fs);
			return -EIO;
		}
		in = inode_get(fs, o->ino);
	} else {
		if (!path || (path[0] != '/' && dirfd != AT_FDCWD)) {
			unlock(fs);
			return -EINVAL;
		}
		int64_t ino = lookup(fs, path);
		if (ino < 0) {
			unlock(fs);
			return (int)ino;
		}
		in = inode_get(fs, (uint64_t)ino);
	}
	struct stat st;
	fill_stat(fs, in, &st);
	memset(stx, 0, sizeof(*stx));
	stx->stx_mask = ATOMIO_STATX_BASIC;
	stx->stx_blksize = 4096;
	stx->stx_nlink = 1;
	stx->stx_uid = st.st_uid;
	stx->stx_gid = st.st_gid;
	stx->stx_mode = (uint16_t)st.st_mode;
	stx->stx_ino = in->ino;
	stx->stx_size = in->vsize;
	stx->stx_blocks = (uint64_t)st.st_blocks;
	stx->stx_dev_major = SIM_MAJOR;
	stx->stx_dev_minor = fs->dev_minor;
	if ((mask & ATOMIO_STATX_DIOALIGN) && !in->isdir && !fs->cfg.no_direct) {
		stx->stx_mask |= ATOMIO_STATX_DIOALIGN;
		stx->stx_dio_mem_align = fs->cfg.dio_mem_align;
		stx->stx_dio_offset_align = fs->cfg.dio_align;
	}
	if ((mask & ATOMIO_STATX_WRITE_ATOMIC) && !in->isdir && fs->cfg.atomic_write_max) {
		stx->stx_mask |= ATOMIO_STATX_WRITE_ATOMIC;
		stx->stx_attributes |= ATOMIO_STATX_ATTR_WRITE_ATOMIC;
		stx->stx_attributes_mask |= ATOMIO_STATX_ATTR_WRITE_ATOMIC;
		stx->stx_atomic_write_unit_min = (uint32_t)atomic_min(fs);
		stx->stx_atomic_write_unit_max = fs->cfg.atomic_write_max;
		stx->stx_atomic_write_segments_max = 1;
	}
	unlock(fs);
	return 0;
}

static int s_flock(int fd, int op)
{
	CUR_OR_FAIL(fs);
	FD_OR_FAIL(fs, o, fd);
	int r = 0;
	int kind = op & ~LOCK_NB;
	if (kind == LOCK_UN) {
		lk_clear(o_in, fd, LK_FL_SH, LK_FL_EX, 0, UINT64_MAX);
		pthread_cond_broadcast(&fs->lkcv);
	} else if (kind == LOCK_EX || kind == LOCK_SH) {
		/* shared ones together, an exclusive one alone; without
		 * LOCK_NB a real flock would wait here (not simulated) */
		uint8_t k = kind == LOCK_EX ? LK_FL_EX : LK_FL_SH;
		if (lk_conflict(o_in, fd, k, 0, UINT64_MAX)) {
			r = -EWOULDBLOCK;
		} else {
			lk_clear(o_in, fd, LK_FL_SH, LK_FL_EX, 0, UINT64_MAX);
			lk_add(o_in, fd, k, 0, UINT64_MAX);
		}
	} else {
		r = -EINVAL;
	}
	unlock(fs);
	return r;
}

/* fcntl(F_OFD_SETLK / F_OFD_SETLKW / F_OFD_GETLK) as the ops table has it
 * (sys.h).  Each simfs descriptor is an open file description of its own;
 * its locks go when it is closed, or with its simulated process
 * (simfs_proc_kill).  A wait that no other thread could end -- the lock is
 * held by a descriptor of the waiter's own simulated process (or, untagged,
 * of its own thread) -- fails loudly instead of hanging, as does one that
 * lasts a minute. */
static int s_ofd_lock(int fd, int cmd, int type, uint64_t start, uint64_t len)
{
	CUR_OR_FAIL(fs);
	FD_OR_FAIL(fs, o, fd);
	int r = 0;
	uint64_t end = len ? start + len : UINT64_MAX;
	int acc = o->flags & O_ACCMODE;
	uint8_t k = type == F_RDLCK ? LK_RD : LK_WR;
	if ((len && end < start) || (type != F_RDLCK && type != F_WRLCK && type != F_UNLCK) ||
	    (cmd != SYS_LK_SET && cmd != SYS_LK_WAIT && cmd != SYS_LK_TEST) ||
	    (cmd == SYS_LK_TEST && type == F_UNLCK)) {
		r = -EINVAL;
	} else if ((type == F_RDLCK && acc == O_WRONLY) || (type == F_WRLCK && acc == O_RDONLY)) {
		r = -EBADF;
	} else if (type == F_UNLCK) {
		lk_clear(o_in, fd, LK_RD, LK_WR, start, end);
		pthread_cond_broadcast(&fs->lkcv);
	} else if (cmd == SYS_LK_TEST) {
		r = lk_conflict(o_in, fd, k, start, end) ? -EAGAIN : 0;
	} else {
		const struct lk *c;
		for (int waited = 0; (c = lk_conflict(o_in, fd, k, start, end));) {
			if (cmd == SYS_LK_SET) {
				r = -EAGAIN;
				break;
			}
			const struct ofd *h = &fs->fds[c->fd - FD_BASE];
			bool self = o->tag ? h->tag == o->tag
					   : !h->tag && pthread_equal(h->opener, pthread_self());
			if (self || waited == 600 || fs->depth != 1) {
				fprintf(stderr, "simfs: ofd_lock wait on %s [%llu, +%llu) by descriptor %d %s: "
					"the lock is held by descriptor %d (process %d)\n", o->path,
					(unsigned long long)start, (unsigned long long)len, fd,
					self ? "would never end" : waited == 600 ? "lasted a minute"
								     : "with the simfs held twice",
					c->fd, h->tag);
				abort();
			}
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			fs->depth = 0;
			pthread_cond_timedwait(&fs->lkcv, &fs->lock, &ts);
			fs->depth = 1;
			waited++;
			/* the tables may have moved, the descriptor died */
			o = ofd_get(fs, fd);
			if (!o || o->dead) {
				unlock(fs);
				return o ? -EIO : -EBADF;
			}
			o_in = inode_get(fs, o->ino);
		}
		if (r == 0) {
			lk_clear(o_in, fd, LK_RD, LK_WR, start, end);
			lk_add(o_in, fd, k, start, end);
		}
	}
	unlock(fs);
	return r;
}

/* Shared memory of fd's inode (or, fd -1, anonymous): see struct region. */
static int s_shm_map(int fd, size_t len, void **out)
{
	CUR_OR_FAIL(fs);
	if (fd == -1) {
		pthread_mutex_lock(&g_reg_mu);
		struct region *g = region_new_locked(fs, 0, false, len);
		pthread_mutex_unlock(&g_reg_mu);
		if (!g)
			return -ENOMEM;
		*out = g->p;
		return 0;
	}
	FD_OR_FAIL(fs, o, fd);
	int r = 0;
	if (o_in->isdir || (o->flags & O_ACCMODE) != O_RDWR) {
		r = o_in->isdir ? -ENODEV : -EACCES;
	} else if (len == 0 || len > o_in->vsize) {
		r = -EINVAL; /* (Linux maps past the end, and faults there) */
	} else {
		pthread_mutex_lock(&g_reg_mu);
		struct region **pp = region_find_locked(fs, o_in->ino), *old = pp ? *pp : NULL;
		if (old && old->len < len && old->maps) {
			/* the file grew while mapped (not simulated) */
			fprintf(stderr, "simfs: shm_map of %s grows a mapped region (not simulated)\n", o->path);
			abort();
		}
		if (old && old->len >= len) {
			old->maps++;
			*out = old->p;
		} else {
			/* first mapping (or the file grew since: fresh memory with
			 * the old bytes) */
			if (old)
				old->attached = false;
			struct region *g = region_new_locked(fs, o_in->ino, true, len);
			if (!g) {
				r = -ENOMEM;
				if (old)
					old->attached = true;
			} else {
				*out = g->p;
				if (old) {
					memcpy(g->p, old->p, old->len);
					for (pp = &g_regions; *pp != old; pp = &(*pp)->next)
						;
					region_free_locked(pp);
				}
			}
		}
		pthread_mutex_unlock(&g_reg_mu);
	}
	unlock(fs);
	return r;
}

static int s_shm_unmap(void *p, size_t len)
{
	pthread_mutex_lock(&g_reg_mu);
	for (struct region **pp = &g_regions; *pp; pp = &(*pp)->next) {
		if ((*pp)->p != p)
			continue;
		if ((*pp)->maps > 0)
			(*pp)->maps--;
		if (!(*pp)->maps && !(*pp)->attached)
			region_free_locked(pp);
		break;
	}
	pthread_mutex_unlock(&g_reg_mu);
	(void)len;
	return 0; /* a region freed with its simfs: nothing left to do */
}

static int s_rename_noreplace(const char *from, const char *to)
{
	CUR_OR_FAIL(fs);
	lock(fs);
	struct pathv pa, pb;
	const char *na, *nb;
	int r = 0;
	int64_t da = lookup_parent(fs, from, &pa, &na);
	int64_t db = da >= 0 ? lookup_parent(fs, to, &pb, &nb) : da;
	if (da < 0 || db < 0) {
		r = (int)(da < 0 ? da : db);
		goto out;
	}
	struct inode *A = inode_get(fs, (uint64_t)da), *B = inode_get(fs, (uint64_t)db);
	struct dent *e = dir_find(&A->vd, na);
	if (!e) {
		r = -ENOENT;
		goto out;
	}
	if (dir_find(&B->vd, nb)) {
		r = -EEXIST;
		goto out;
	}
	uint64_t ino = e->ino;
	if (inode_get(fs, ino)->isdir) {
		r = -EINVAL; /* directories are not moved by atomio */
		goto out;
	}
	dir_del(&A->vd, na, ino);
	dir_set(&B->vd, nb, ino);
	char ca[PATH_MAX], cb[PATH_MAX];
	canon(&pa, ca);
	canon(&pb, cb);
	struct item *it = item_add(fs, IT_RENAME, ca);
	it->ino = A->ino;
	it->dino = B->ino;
	it->ino2 = ino;
	it->name = xstrdup(na);
	it->name2 = xstrdup(nb);
	struct simfs_opinfo oi = {.kind = SIMFS_OP_RENAME, .path = ca, .path2 = cb};
	crash_point(fs, &oi);
out:
	unlock(fs);
	return r;
}

static int s_unlink(const char *path)
{
	CUR_OR_FAIL(fs);
	lock(fs);
	struct pathv pv;
	const char *name;
	int r = 0;
	int64_t d = lookup_parent(fs, path, &pv, &name);
	if (d < 0) {
		r = (int)d;
		goto out;
	}
	struct inode *di = inode_get(fs, (uint64_t)d);
	struct dent *e = dir_find(&di->vd, name);
	if (!e) {
		r = -ENOENT;
		goto out;
	}
	uint64_t ino = e->ino;
	if (inode_get(fs, ino)->isdir) {
		r = -EISDIR;
		goto out;
	}
	dir_del(&di->vd, name, ino);
	region_detach(fs, ino);
	if (inode_get(fs, ino)->vol) {
		dir_del(&di->bd, name, ino); /* durable at once */
		goto out;
	}
	char cp[PATH_MAX];
	canon(&pv, cp);
	struct item *it = item_add(fs, IT_UNLINK, cp);
	it->ino = di->ino;
	it->ino2 = ino;
	it->name = xstrdup(name);
	struct simfs_opinfo oi = {.kind = SIMFS_OP_UNLINK, .path = cp};
	crash_point(fs, &oi);
out:
	unlock(fs);
	return r;
}

static int s_getrandom(void *buf, size_t len)
{
	CUR_OR_FAIL(fs);
	lock(fs);
	uint8_t *p = buf;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = mix(fs->rng++);
		memcpy(p + i, &v, len - i < 8 ? len - i : 8);
	}
	unlock(fs);
	return 0;
}

static int s_realpath(const char *path, char *out)
{
	CUR_OR_FAIL(fs);
	lock(fs);
	struct pathv pv;
	int r = split(path, &pv);
	if (r == 0) {
		int64_t ino = walk_n(fs, &pv, pv.n);
		if (ino < 0)
			r = (int)ino;
		else
			canon(&pv, out);
	}
	unlock(fs);
	return r;
}

const struct atomio_sysops simfs_ops = {
	.name = "simfs",
	.open = s_open,
	.close = s_close,
	.pread = s_pread,
	.pwritev = s_pwritev,
	.fsync = s_fsync,
	.fdatasync = s_fdatasync,
	.ftruncate = s_ftruncate,
	.fstat = s_fstat,
	.lstat = s_lstat,
	.fstatfs = s_fstatfs,
	.statx = s_statx,
	.flock = s_flock,
	.rename_noreplace = s_rename_noreplace,
	.unlink = s_unlink,
	.getrandom = s_getrandom,
	.realpath = s_realpath,
	.sync_file_range = s_sync_file_range,
	.fallocate = s_fallocate,
	/* stores shared by several (simulated) processes; futex_wake NULL:
	 * the real futex, which works on any memory; futex_wait the real one
	 * too, where a stopped process's thread parks (simfs_proc_stop) */
	.futex_wait = s_futex_wait,
	.shm_map = s_shm_map,
	.shm_unmap = s_shm_unmap,
	.ofd_lock = s_ofd_lock,
};

/* --- pending items and images ---------------------------------------------------------- */

size_t simfs_pending(struct simfs *fs, struct simfs_item *out, size_t max)
{
	lock(fs);
	size_t n = 0;
	for (size_t i = 0; i < fs->nitems; i++) {
		const struct item *it = fs->items[i];
		if (it->durable)
			continue;
		if (n < max) {
			struct simfs_item *o = &out[n];
			memset(o, 0, sizeof(*o));
			o->kind = it->kind == IT_DATA ? SIMFS_DATA : it->kind == IT_SIZE ? SIMFS_SIZE
											: SIMFS_DIROP;
			o->point = it->point;
			o->ino = it->ino;
			o->path = it->path;
			o->off = it->off;
			o->len = it->len;
			o->size = it->size;
			o->data = it->data;
			o->direct = it->direct;
			o->atomic = it->atomic;
		}
		n++;
	}
	unlock(fs);
	return n;
}

uint64_t simfs_item_units(const struct simfs_item *it, uint32_t unit)
{
	return it->kind == SIMFS_DATA ? units_of(it->off, it->len, unit) : 1;
}

struct simfs *simfs_crash(struct simfs *fs, const struct simfs_pick *pick)
{
	lock(fs);
	struct simfs *img = fs_alloc(&fs->cfg);
	img->cfg.seed = mix(fs->cfg.seed ^ mix(fs->points) ^ mix(fs->rng));
	img->rng = img->cfg.seed;
	img->dev_minor = fs->dev_minor;
	img->fsid = fs->fsid;
	img->ninodes = fs->ninodes;
	img->inodes = xcalloc(fs->ninodes, sizeof(*img->inodes));
	for (size_t i = 0; i < fs->ninodes; i++) {
		const struct inode *s = fs->inodes[i];
		if (!s)
			continue;
		struct inode *d = xcalloc(1, sizeof(*d));
		d->ino = s->ino;
		d->isdir = s->isdir;
		d->mode = s->mode;
		d->vol = s->vol;
		pages_share(&d->base, &s->base);
		d->bsize = s->bsize;
		dir_copy(&d->bd, &s->bd);
		img->inodes[i] = d;
	}
	uint32_t unit = pick && pick->unit ? pick->unit : 512;
	size_t k = 0;
	for (size_t i = 0; i < fs->nitems; i++) {
		const struct item *it = fs->items[i];
		if (it->durable) {
			apply_item(img->inodes, img->ninodes, it, NULL, unit);
			continue;
		}
		const struct simfs_fate *f = pick && k < pick->n ? &pick->f[k] : NULL;
		k++;
		if (!f || f->fate == SIMFS_DROP)
			continue;
		if (f->fate == SIMFS_TEAR && (it->kind != IT_DATA || it->atomic))
			continue; /* metadata and atomic writes do not tear: not landed */
		apply_item(img->inodes, img->ninodes, it, f, unit);
	}
	/* A fresh boot: bytes past the end are gone, the durable state is all
	 * there is. */
	for (size_t i = 0; i < img->ninodes; i++) {
		struct inode *d = img->inodes[i];
		if (!d)
			continue;
		pages_zero_from(&d->base, d->bsize);
		pages_share(&d->vis, &d->base);
		d->vsize = d->bsize;
		dir_copy(&d->vd, &d->bd);
	}
	unlock(fs);
	return img;
}

void simfs_reset(struct simfs *fs, struct simfs *image)
{
	lock(fs);
	for (size_t i = 0; i < fs->ninodes; i++)
		inode_free(fs->inodes[i]);
	free(fs->inodes);
	for (size_t i = 0; i < fs->nitems; i++)
		item_free(fs->items[i]);
	free(fs->items);
	fs->inodes = image->inodes;
	fs->ninodes = image->ninodes;
	fs->items = image->items;
	fs->nitems = image->nitems;
	fs->citems = image->citems;
	fs->rng = image->rng;
	image->inodes = NULL;
	image->ninodes = 0;
	image->items = NULL;
	image->nitems = image->citems = 0;
	for (size_t i = 0; i < fs->nfds; i++)
		fs->fds[i].dead = true;
	fs->pver++;
	/* memory of the old mappings is never handed out again (freed once
	 * their stores unmap it) */
	regions_drop(fs, false);
	pthread_cond_broadcast(&fs->lkcv);
	unlock(fs);
	simfs_free(image);
}

static int mat_dir(struct simfs *fs, const struct inode *d, const char *real, bool top)
{
	for (size_t i = 0; i < d->vd.n; i++) {
		const struct dent *e = &d->vd.v[i];
		if (top && !strcmp(e->name, "sys"))
			continue;
		const struct inode *in = inode_get(fs, e->ino);
		char p[PATH_MAX];
		if ((size_t)snprintf(p, sizeof(p), "%s/%s", real, e->name) >= sizeof(p))
			return -ENAMETOOLONG;
		if (!in)
			continue;
		if (in->isdir) {
			if (mkdir(p, 0755) < 0 && errno != EEXIST)
				return -errno;
			int r = mat_dir(fs, in, p, false);
			if (r < 0)
				return r;
			continue;
		}
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, in->mode ? in->mode : 0600);
		if (fd < 0)
			return -errno;
		uint8_t *b = xmalloc(in->vsize + 1);
		pages_read(&in->vis, 0, b, in->vsize);
		size_t done = 0;
		while (done < in->vsize) {
			ssize_t n = write(fd, b + done, in->vsize - done);
			if (n <= 0) {
				free(b);
				close(fd);
				return n < 0 ? -errno : -EIO;
			}
			done += (size_t)n;
		}
		free(b);
		if (fchmod(fd, in->mode) < 0 || close(fd) < 0)
			return -errno;
	}
	return 0;
}

int simfs_materialize(struct simfs *fs, const char *realdir)
{
	lock(fs);
	int r = mat_dir(fs, inode_get(fs, ROOT_INO), realdir, true);
	unlock(fs);
	return r;
}

/* --- enumeration ------------------------------------------------------------------ */

static uint64_t n_opts(const struct item *it, uint32_t unit)
{
	if (it->kind != IT_DATA || it->atomic)
		return 2;
	uint64_t u = units_of(it->off, it->len, unit);
	if (u <= 1)
		return 2;
	if (u <= 4)
		return 2 + ((1ull << u) - 2);
	return 2 + 4 * u - 2;
}

static void opt_fate(const struct item *it, uint32_t unit, uint64_t j, struct simfs_fate *f)
{
	memset(f, 0, sizeof(*f));
	if (j < 2) {
		f->fate = j ? SIMFS_KEEP : SIMFS_DROP;
		return;
	}
	j -= 2;
	uint64_t u = units_of(it->off, it->len, unit);
	f->fate = SIMFS_TEAR;
	if (u <= 4) {
		f->tear = SIMFS_T_MASK;
		f->bits = j + 1;
	} else if (j < u - 1) {
		f->tear = SIMFS_T_PREFIX;
		f->arg = (uint32_t)(j + 1);
	} else if (j < 2 * (u - 1)) {
		f->tear = SIMFS_T_SUFFIX;
		f->arg = (uint32_t)(j - (u - 1) + 1);
	} else if (j < 2 * (u - 1) + u) {
		f->tear = SIMFS_T_HOLE;
		f->arg = (uint32_t)(j - 2 * (u - 1));
	} else {
		f->tear = SIMFS_T_ONLY;
		f->arg = (uint32_t)(j - 2 * (u - 1) - u);
	}
}

/* The pending items (pointers into fs; lock held by the caller). */
static size_t pend_list(struct simfs *fs, const struct item ***out)
{
	const struct item **v = xcalloc(fs->nitems, sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; i < fs->nitems; i++)
		if (!fs->items[i]->durable)
			v[n++] = fs->items[i];
	*out = v;
	return n;
}

static uint64_t product(const struct item **v, size_t n, uint32_t unit)
{
	uint64_t p = 1;
	for (size_t i = 0; i < n; i++) {
		uint64_t o = n_opts(v[i], unit);
		if (p > UINT64_MAX / o)
			return UINT64_MAX;
		p *= o;
	}
	return p;
}

uint64_t simfs_enum_count(struct simfs *fs, const struct simfs_enum *e, bool *exhaustive)
{
	lock(fs);
	const struct item **v;
	size_t n = pend_list(fs, &v);
	uint64_t p = product(v, n, e->unit);
	free(v);
	unlock(fs);
	bool ex = p <= e->exhaustive_cap;
	if (exhaustive)
		*exhaustive = ex;
	if (ex)
		return p;
	return e->samples;
}

static void random_fate(const struct item *it, uint32_t unit, uint64_t *rs, struct simfs_fate *f,
			bool allow_drop)
{
	uint64_t o = n_opts(it, unit);
	uint64_t r = mix((*rs)++);
	if (o <= 2 || r % 3) {
		opt_fate(it, unit, allow_drop ? (r >> 8) % 2 : 1, f);
		return;
	}
	if ((r >> 8) % 4 == 0) {
		memset(f, 0, sizeof(*f));
		f->fate = SIMFS_TEAR;
		f->tear = SIMFS_T_RANDOM;
		f->bits = mix(r);
		return;
	}
	opt_fate(it, unit, 2 + (r >> 16) % (o - 2), f);
}

/* A sampled pick: one of several strategies, all deterministic in seed. */
static void sampled(const struct item **v, size_t n, uint32_t unit, uint64_t seed, struct simfs_fate *f)
{
	uint64_t rs = mix(seed);
	uint64_t strat = mix(rs++) % 5;
	uint64_t pk = 1 + mix(rs++) % 3; /* keep probability pk/4 */
	size_t focus = n ? (size_t)(mix(rs++) % n) : 0;
	size_t newest = n ? 1 + (size_t)(mix(rs++) % (n < 3 ? n : 3)) : 0;
	for (size_t i = 0; i < n; i++) {
		struct simfs_fate *x = &f[i];
		switch (strat) {
		case 0: /* random subset, some torn */
		case 1:
			if (mix(rs++) % 4 < pk)
				random_fate(v[i], unit, &rs, x, false);
			else
				opt_fate(v[i], unit, 0, x);
			break;
		case 2: /* everything landed but one item (dropped or torn) */
			if (i == focus) {
				random_fate(v[i], unit, &rs, x, true);
				if (x->fate == SIMFS_KEEP)
					x->fate = SIMFS_DROP;
			} else {
				opt_fate(v[i], unit, 1, x);
			}
			break;
		case 3: /* nothing landed but one item (kept or torn) */
			if (i == focus)
				random_fate(v[i], unit, &rs, x, false);
			else
				opt_fate(v[i], unit, 0, x);
			break;
		default: /* the newest items in flight, older ones mostly landed */
			if (i + newest >= n)
				random_fate(v[i], unit, &rs, x, true);
			else
				opt_fate(v[i], unit, mix(rs++) % 8 ? 1 : 0, x);
			break;
		}
	}
}

int simfs_enum_pick(struct simfs *fs, const struct simfs_enum *e, uint64_t idx, struct simfs_pick *pick)
{
	lock(fs);
	const struct item **v;
	size_t n = pend_list(fs, &v);
	pick->unit = e->unit;
	pick->n = (uint32_t)n;
	pick->f = xcalloc(n, sizeof(*pick->f));
	uint64_t p = product(v, n, e->unit);
	if (p <= e->exhaustive_cap) {
		uint64_t x = idx;
		for (size_t i = 0; i < n; i++) {
			uint64_t o = n_opts(v[i], e->unit);
			opt_fate(v[i], e->unit, x % o, &pick->f[i]);
			x /= o;
		}
	} else if (idx < 2) {
		for (size_t i = 0; i < n; i++)
			opt_fate(v[i], e->unit, idx, &pick->f[i]);
	} else {
		sampled(v, n, e->unit, e->seed ^ mix(idx), pick->f);
	}
	free(v);
	unlock(fs);
	return 0;
}

int simfs_random_pick(struct simfs *fs, uint32_t unit, uint64_t seed, struct simfs_pick *pick)
{
	lock(fs);
	const struct item **v;
	size_t n = pend_list(fs, &v);
	pick->unit = unit;
	pick->n = (uint32_t)n;
	pick->f = xcalloc(n, sizeof(*pick->f));
	sampled(v, n, unit, seed, pick->f);
	free(v);
	unlock(fs);
	return 0;
}

int simfs_foreach_image(struct simfs *fs, const struct simfs_enum *e, simfs_image_fn fn, void *arg,
			uint64_t *count)
{
	lock(fs); /* the pending items stay put while we go */
	uint64_t n = simfs_enum_count(fs, e, NULL), i;
	int r = 0;
	for (i = 0; i < n && r == 0; i++) {
		struct simfs_pick p;
		simfs_enum_pick(fs, e, i, &p);
		struct simfs *img = simfs_crash(fs, &p);
		struct simfs *prev = simfs_enter(img);
		r = fn(img, &p, i, arg);
		simfs_enter(prev);
		simfs_free(img);
		simfs_pick_free(&p);
	}
	unlock(fs);
	if (count)
		*count = i;
	return r;
}

void simfs_pick_free(struct simfs_pick *pick)
{
	free(pick->f);
	pick->f = NULL;
	pick->n = 0;
}

char *simfs_pick_format(const struct simfs_pick *pick)
{
	size_t cap = 32 + (size_t)pick->n * 48;
	char *s = xmalloc(cap);
	size_t at = (size_t)snprintf(s, cap, "u%u:", pick->unit);
	for (uint32_t i = 0; i < pick->n; i++) {
		const struct simfs_fate *f = &pick->f[i];
		const char *sep = i ? "," : "";
		if (f->fate == SIMFS_TEAR)
			at += (size_t)snprintf(s + at, cap - at, "%sT%u.%u.%llx", sep, f->tear, f->arg,
					       (unsigned long long)f->bits);
		else
			at += (size_t)snprintf(s + at, cap - at, "%s%c", sep, f->fate == SIMFS_KEEP ? 'K' : 'D');
	}
	return s;
}

int simfs_pick_parse(const char *s, struct simfs_pick *pick)
{
	memset(pick, 0, sizeof(*pick));
	unsigned unit;
	int used;
	if (sscanf(s, "u%u:%n", &unit, &used) != 1)
		return -EINVAL;
	pick->unit = unit;
	s += used;
	size_t cap = 16;
	pick->f = xcalloc(cap, sizeof(*pick->f));
	while (*s) {
		if (pick->n == cap) {
			cap *= 2;
			pick->f = realloc(pick->f, cap * sizeof(*pick->f));
			if (!pick->f)
				abort();
		}
		struct simfs_fate *f = &pick->f[pick->n];
		memset(f, 0, sizeof(*f));
		if (*s == 'K' || *s == 'D') {
			f->fate = *s == 'K' ? SIMFS_KEEP : SIMFS_DROP;
			s++;
		} else if (*s == 'T') {
			unsigned t, a;
			unsigned long long b;
			if (sscanf(s, "T%u.%u.%llx%n", &t, &a, &b, &used) != 3) {
				simfs_pick_free(pick);
				return -EINVAL;
			}
			f->fate = SIMFS_TEAR;
			f->tear = (uint8_t)t;
			f->arg = a;
			f->bits = b;
			s += used;
		} else {
			simfs_pick_free(pick);
			return -EINVAL;
		}
		pick->n++;
		if (*s == ',')
			s++;
	}
	return 0;
}
