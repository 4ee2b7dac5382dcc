/*
 * pfsx.c: a model-based exerciser of the preload library, as fsx is for
 * filesystems.  A plain POSIX program (no atomio in it): run under
 * LD_PRELOAD=libatomio_preload.so with ATOMIO_FILES matching DIR/ *.db, it
 * issues a seeded random sequence of calls over several protected (*.db) and
 * unprotected (*.txt) files and checks every read, stat and mapping against
 * an in-memory model of each file.
 *
 *   pfsx [options] DIR          run; on a mismatch print the seed, the op
 *                               index and the last ops, exit 1
 *     -s SEED    (default $ATOMIO_SEED, else 1)     -n OPS (default 10000)
 *     -x CLASS,.. exclude op classes                -l N   ops shown at a failure
 *     -k K       SIGKILL itself before op K (the crash run)
 *     -C CTL     with -k: cut the power first, by writing "cut" to CTL (the
 *                control file of cutfs, on which DIR and the log are)
 *     -P         with -c: the kill was a power cut (-C): unprotected files
 *                are not checked (the kernel kept no unsynced write of theirs)
 *     -c K       check mode: no calls, the model of a run killed before op K,
 *                then every file of DIR against the durability contract
 *     -v         print every op
 *   pfsx --verify PATH SIZE HASH  (a child after exec: read PATH, compare)
 *
 * The choice of every op depends only on the seed and the model, never on a
 * call's result (a result that differs from the model ends the run), so check
 * mode replays the model of a killed run without making its calls.
 *
 * The durability contract after a kill, per protected file: the file is its
 * state at its last sync plus a prefix of the later mutations, ending at a
 * group boundary (every mutation in the default mode; in group mode
 * (ATOMIO_GROUP=1) a sync, the close of the file's last descriptor, a fork or
 * exec, a rename or unlink, an mmap or stdio read).  Unprotected files are
 * exactly as the model has them (the kernel keeps a killed process's writes).
 * Several pfsx processes, each on a directory of its own, may write
 * through one store (the one mode of issue 36, the shared rounds of
 * t_preload_fsx.sh); a forked child's writes of protected files are served
 * too (group mode: refused, EPERM).
 * After a power cut (-C, on cutfs: every write not synced is lost or torn at
 * 512-byte sectors) the protected files have the same contract: what was
 * synced is there, and nothing is torn.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <sys/syscall.h>

extern char **environ;

#define NNAME 4 /* names per class: p0..p3.db, u0..u3.txt */
#define MAXINO 64
#define MAXH 16
#define MAXOFD 32
#define MAXSIZE (192 * 1024)
#define PARK 300 /* slot i parked at descriptor PARK + i */
#define MAXPEND_BYTES (256 * 1024)

/* --- op classes -------------------------------------------------------------------- */
enum {
	C_WRITE, C_PWRITE, C_PWRITEV, C_READ, C_PREAD, C_FTRUNC, C_TRUNC, C_FALLOC, C_MMAP, C_FSTAT, C_STAT,
	C_FDOPEN, C_DUP, C_DUP2, C_CLOSERANGE, C_FORK, C_VFORK, C_SPAWN, C_SYSTEM, C_RENAME, C_UNLINK,
	C_FSYNC, C_APPEND, C_HOLES, C_EXECREAD, C_OPEN, C_CLOSE, NCLASS
};
static const char *cname[NCLASS] = {
	"write", "pwrite", "pwritev", "read", "pread", "ftruncate", "truncate", "fallocate", "mmap", "fstat",
	"stat", "fdopen", "dup", "dup2", "close_range", "fork", "vfork", "posix_spawn", "system", "rename",
	"unlink", "fsync", "append", "holes", "execread", "open", "close",
};
/* Relative weights. */
static const int cweight[NCLASS] = {
	12, 12, 8, 8, 10, 3, 2, 2, 3, 3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 4, 2, 0, 0, 6, 4,
};
static bool excluded[NCLASS];
/* "execread" is no op of its own: excluded, a child after exec (vfork, posix_spawn,
 * system) reads nothing (pfsx --verify with no file), so that the calls' other
 * effects are tested without the stale reads such a child gets. */
/* "holes" is no op of its own: excluded, no write starts beyond the end of its file
 * and no size change extends one (sizes only shrink). */

/* --- the model ---------------------------------------------------------------------- */
struct mut { /* one mutation since the last sync: a write (tag: its op) or a size */
	int64_t off, len; /* len < 0: set the size to off */
	uint32_t tag;
	bool boundary; /* a group may end after it */
};
struct ino {
	bool used, prot, linked;
	int name; /* index into its class's names, while linked */
	uint8_t *data;
	int64_t size;
	uint8_t *sdata; /* at the last sync */
	int64_t ssize;
	struct mut *m;
	int nm, cap;
	int64_t pend_bytes;
};
struct ofd {
	int refs, ino;
	int64_t pos; /* -1: unknown (after stdio) */
	bool append, rdonly;
};
struct handle {
	bool used;
	int fd, ofd;
};

static struct ino inos[MAXINO];
static struct ofd ofds[MAXOFD];
static struct handle hs[MAXH];
static int names[2][NNAME]; /* [prot][name] -> ino, or -1 */
static const char *dir;
static bool group_mode, shared_mode, real_calls = true, verbose, preloaded;
static uint64_t seed = 1, rng;
static long opno;
static char self[4096];

#define RING 64
static char ring[RING][200];
static int nshow = 20;
static uint64_t nclass_run[NCLASS];

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ULL;
}
static int64_t rn(int64_t n) { return n <= 0 ? 0 : (int64_t)(rnd() % (uint64_t)n); }

static uint8_t pat(uint32_t tag, int64_t off) { return (uint8_t)((tag * 2654435761u + (uint64_t)off * 40503u) >> 13) | 1; }

static void path_of(char *b, size_t n, int prot, int name) { snprintf(b, n, "%s/%c%d.%s", dir, prot ? 'p' : 'u', name, prot ? "db" : "txt"); }

static void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = ring[opno % RING];
	int k = snprintf(s, sizeof(ring[0]), "#%ld ", opno);
	vsnprintf(s + k, sizeof(ring[0]) - (size_t)k, fmt, ap);
	va_end(ap);
	if (verbose)
		fprintf(stderr, "%s\n", s);
}

static void dump_ring(void)
{
	long from = opno - nshow + 1 < 0 ? 0 : opno - nshow + 1;
	if (opno - from >= RING)
		from = opno - RING + 1;
	fprintf(stderr, "pfsx: the last %ld ops:\n", opno - from + 1);
	for (long i = from; i <= opno; i++)
		fprintf(stderr, "  %s\n", ring[i % RING]);
}

static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "pfsx: FAIL seed %" PRIu64 " op %ld (%s): ", seed, opno, group_mode ? "group mode" : "default mode");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	dump_ring();
	fprintf(stderr, "pfsx: repeat with: ATOMIO_SEED=%" PRIu64 " pfsx -n %ld ... (add -v to see every op)\n", seed, opno + 1);
	exit(1);
}

static uint64_t fnv(const uint8_t *b, int64_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (int64_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	return h;
}

static void mut_push(struct ino *f, struct mut m)
{
	if (f->nm == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 64;
		f->m = realloc(f->m, sizeof(*f->m) * (size_t)f->cap);
		if (!f->m)
			abort();
	}
	f->m[f->nm++] = m;
}

static void apply(uint8_t *d, int64_t *size, const struct mut *m)
{
	if (m->len < 0) {
		if (m->off > *size)
			memset(d + *size, 0, (size_t)(m->off - *size));
		*size = m->off;
		return;
	}
	if (m->off > *size)
		memset(d + *size, 0, (size_t)(m->off - *size));
	for (int64_t i = 0; i < m->len; i++)
		d[m->off + i] = pat(m->tag, m->off + i);
	if (m->off + m->len > *size)
		*size = m->off + m->len;
}

static void synced(struct ino *f)
{
	memcpy(f->sdata, f->data, (size_t)f->size);
	f->ssize = f->size;
	f->nm = 0;
	f->pend_bytes = 0;
}

/* A group of f may end here (group mode); in the default mode every mutation is one. */
static void boundary(struct ino *f)
{
	if (f->nm)
		f->m[f->nm - 1].boundary = true;
}
static void boundary_all(void)
{
	for (int i = 0; i < MAXINO; i++)
		if (inos[i].used && inos[i].prot)
			boundary(&inos[i]);
}

static void mutate(int ino, struct mut m)
{
	struct ino *f = &inos[ino];
	m.boundary = !group_mode;
	if (m.len < 0)
		m.tag = (uint32_t)opno; /* (a write's tag is its op already: shown at a failure) */
	apply(f->data, &f->size, &m);
	if (f->prot) {
		mut_push(f, m);
		f->pend_bytes += m.len > 0 ? m.len : 0;
	}
}

static int ino_new(int prot, int name)
{
	for (int i = 0; i < MAXINO; i++)
		if (!inos[i].used) {
			struct ino *f = &inos[i];
			f->used = true, f->prot = prot, f->linked = true, f->name = name;
			f->size = f->ssize = 0, f->nm = 0, f->pend_bytes = 0;
			if (!f->data) {
				f->data = malloc(MAXSIZE + 65536);
				f->sdata = malloc(MAXSIZE + 65536);
			}
			names[prot][name] = i;
			return i;
		}
	fprintf(stderr, "pfsx: out of inodes\n");
	exit(2);
}

static void ino_unref_check(int ino)
{
	struct ino *f = &inos[ino];
	if (f->linked)
		return;
	for (int i = 0; i < MAXOFD; i++)
		if (ofds[i].refs && ofds[i].ino == ino)
			return;
	f->used = false;
}

static int ofd_new(int ino, bool append, bool rdonly)
{
	for (int i = 0; i < MAXOFD; i++)
		if (!ofds[i].refs) {
			ofds[i] = (struct ofd){1, ino, 0, append, rdonly};
			return i;
		}
	abort();
}

/* Drop slot h from the model; with last, the file's last descriptor went (a group boundary). */
static void handle_drop(int h)
{
	struct ofd *o = &ofds[hs[h].ofd];
	hs[h].used = false;
	if (--o->refs == 0) {
		bool last = true;
		for (int i = 0; i < MAXOFD; i++)
			if (ofds[i].refs && ofds[i].ino == o->ino)
				last = false;
		if (last)
			boundary(&inos[o->ino]);
		ino_unref_check(o->ino);
	}
}

/* --- checks ------------------------------------------------------------------------- */
static void cmp(const char *what, int ino, int64_t off, const uint8_t *got, int64_t ngot, int64_t want)
{
	struct ino *f = &inos[ino];
	int64_t exp = off >= f->size ? 0 : (f->size - off < want ? f->size - off : want);
	if (ngot != exp)
		fail("%s of %s file (ino %d, size %" PRId64 ") at %" PRId64 " for %" PRId64 ": returned %" PRId64
		     ", the model says %" PRId64,
		     what, f->prot ? "a protected" : "an unprotected", ino, f->size, off, want, ngot, exp);
	for (int64_t i = 0; i < ngot; i++)
		if (got[i] != f->data[off + i]) {
			int64_t j = i;
			while (j < ngot && got[j] != f->data[off + j])
				j++;
			fail("%s of %s file (ino %d, size %" PRId64 ") at %" PRId64 " for %" PRId64
			     ": bytes %" PRId64 "..%" PRId64 " differ (got %02x, the model %02x)",
			     what, f->prot ? "a protected" : "an unprotected", ino, f->size, off, want, off + i,
			     off + j - 1, got[i], f->data[off + i]);
		}
}

static void want_ok(const char *what, long r, long want)
{
	if (r != want)
		fail("%s returned %ld (%s), the model says %ld", what, r, r < 0 ? strerror(errno) : "-", want);
}

/* --- op choice helpers ------------------------------------------------------------ */
static int pick_handle(bool writable)
{
	int c[MAXH], n = 0;
	for (int i = 0; i < MAXH; i++)
		if (hs[i].used && (!writable || !ofds[hs[i].ofd].rdonly))
			c[n++] = i;
	return n ? c[rn(n)] : -1;
}
static int free_slot(void)
{
	int c[MAXH], n = 0;
	for (int i = 0; i < MAXH; i++)
		if (!hs[i].used)
			c[n++] = i;
	return n ? c[rn(n)] : -1;
}
static int64_t pick_len(void)
{
	switch (rn(4)) {
	case 0: return 1 + rn(16);
	case 1: return 1 + rn(600);
	case 2: return 1 + rn(5000);
	default: return 1 + rn(16384);
	}
}
static int64_t pick_off(int64_t size)
{
	switch (rn(5)) {
	case 0: return rn(size + 1);
	case 1: return size;
	case 2: return rn(size + 8192);
	case 3: return (rn(size + 4096) / 512) * 512 + (rn(2) ? 0 : 512 - rn(8));
	default: return rn(MAXSIZE / 2);
	}
}
static int64_t fit(int64_t off, int64_t len)
{
	if (off > MAXSIZE)
		off = MAXSIZE;
	return off + len > MAXSIZE ? MAXSIZE - off : len;
}

static uint8_t wbuf[65536], rbuf[MAXSIZE + 65536];

static void fill(uint32_t tag, int64_t off, int64_t len)
{
	for (int64_t i = 0; i < len; i++)
		wbuf[i] = pat(tag, off + i);
}

/* --- children -------------------------------------------------------------------- */
/* A forked child's ops: its own generator (seeded from the op), replayed by the parent
 * for the model.  Reads of every linked file, pwrites to unprotected files, and a
 * pwrite to a protected one, which must succeed (every process of the store
 * writes), or in group mode fail with EPERM (one writer per store). */
static void child_ops(bool real, int *bad)
{
	uint64_t save = rng;
	rng = seed * 1000003u + (uint64_t)opno * 7919u + 1;
	int n = 1 + (int)rn(6);
	for (int k = 0; k < n; k++) {
		int h = pick_handle(false);
		if (h < 0)
			break;
		struct ofd *o = &ofds[hs[h].ofd];
		struct ino *f = &inos[o->ino];
		int64_t off = pick_off(f->size), len = fit(off, pick_len());
		int kind = (int)rn(3);
		bool refused = f->prot && f->linked && !shared_mode;
		if ((o->append || (excluded[C_HOLES] && off > f->size)) && kind && !o->rdonly && !refused)
			off = f->size, len = fit(off, len);
		if (len <= 0)
			continue;
		if (kind == 0 || o->rdonly) {
			if (real) {
				ssize_t r = pread(hs[h].fd, rbuf, (size_t)len, off);
				int64_t exp = off >= f->size ? 0 : (f->size - off < len ? f->size - off : len);
				if (r != exp || (r > 0 && memcmp(rbuf, f->data + off, (size_t)r))) {
					fprintf(stderr, "pfsx: child of op %ld: pread of ino %d at %" PRId64 " for %" PRId64
							": %zd (the model %" PRId64 ")%s\n",
						opno, o->ino, off, len, r, exp, r == exp ? ", data differ" : "");
					*bad = 1;
				}
			}
		} else if (refused) {
			/* (a descriptor of a protected file unlinked or renamed over is an
			 * ordinary one: docs/PRELOAD.md) */
			if (real && preloaded) { /* without the library (a check of the model) it would write */
				fill(0xdead, off, len);
				ssize_t r = pwrite(hs[h].fd, wbuf, (size_t)len, off);
				if (r != -1 || errno != EPERM) {
					fprintf(stderr, "pfsx: child of op %ld: pwrite to protected ino %d (slot %d, fd %d) returned %zd (%s), "
							"not EPERM\n", opno, o->ino, h, hs[h].fd, r, r < 0 ? strerror(errno) : "-");
					*bad = 1;
				}
			}
		} else {
			uint32_t tag = (uint32_t)(opno * 16 + k + 1);
			if (real) {
				fill(tag, off, len);
				if (pwrite(hs[h].fd, wbuf, (size_t)len, off) != len) {
					fprintf(stderr, "pfsx: child of op %ld: pwrite to ino %d: %s\n", opno, o->ino, strerror(errno));
					*bad = 1;
				}
			}
			mutate(o->ino, (struct mut){off, len, tag, false});
		}
	}
	rng = save;
}

static void wait_child(pid_t pid, const char *what)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		fail("%s: waitpid: %s", what, strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("%s: the child %s %d", what, WIFEXITED(st) ? "exited with" : "died of signal",
		     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* A linked file for an exec'd child to verify: its path, size and hash as argv. */
static int verify_args(char *path, size_t pn, char *size, char *hash)
{
	int c[2 * NNAME], n = 0;
	for (int p = 0; p < 2; p++)
		for (int i = 0; i < NNAME; i++)
			if (names[p][i] >= 0)
				c[n++] = p * NNAME + i;
	if (!n)
		return -1;
	int k = c[rn(n)], p = k / NNAME, i = k % NNAME;
	struct ino *f = &inos[names[p][i]];
	path_of(path, pn, p, i);
	sprintf(size, "%" PRId64, f->size);
	sprintf(hash, "%" PRIu64, fnv(f->data, f->size));
	return names[p][i];
}

static int do_verify(const char *path, const char *size, const char *hash)
{
	if (!strcmp(path, "-"))
		return 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "pfsx --verify: %s: %s\n", path, strerror(errno));
		return 2;
	}
	int64_t n = 0;
	for (;;) {
		ssize_t r = read(fd, rbuf + n, sizeof(rbuf) - (size_t)n);
		if (r <= 0)
			break;
		n += r;
	}
	close(fd);
	if (n != atoll(size) || fnv(rbuf, n) != strtoull(hash, NULL, 10)) {
		fprintf(stderr, "pfsx --verify: %s: read %" PRId64 " bytes (hash %" PRIu64 "), the model %s bytes (hash %s)\n",
			path, n, fnv(rbuf, n), size, hash);
		return 3;
	}
	return 0;
}

/* --- one op ----------------------------------------------------------------------- */
static int pick_class(void)
{
	int tot = 0;
	for (int c = 0; c < NCLASS; c++)
		tot += excluded[c] ? 0 : cweight[c];
	int r = (int)rn(tot);
	for (int c = 0; c < NCLASS; c++)
		if (!excluded[c] && (r -= cweight[c]) < 0)
			return c;
	return C_OPEN;
}

static void do_sync(int h)
{
	struct ofd *o = &ofds[hs[h].ofd];
	bool data = rn(2);
	note("%s slot %d (ino %d)", data ? "fdatasync" : "fsync", h, o->ino);
	if (real_calls)
		want_ok(data ? "fdatasync" : "fsync", data ? fdatasync(hs[h].fd) : fsync(hs[h].fd), 0);
	if (inos[o->ino].prot)
		synced(&inos[o->ino]);
}

static void do_open(void)
{
	int s = free_slot();
	if (s < 0)
		return;
	int prot = (int)rn(2), name = (int)rn(NNAME);
	char path[4096];
	path_of(path, sizeof(path), prot, name);
	int ino = names[prot][name];
	bool rdonly = ino >= 0 && rn(5) == 0;
	bool trunc = !rdonly && ino >= 0 && rn(12) == 0;
	bool append = !rdonly && !excluded[C_APPEND] && rn(8) == 0;
	int fl = (rdonly ? O_RDONLY : O_RDWR) | (trunc ? O_TRUNC : 0) | (append ? O_APPEND : 0) | (ino < 0 ? O_CREAT : 0);
	note("open %s%s%s%s%s -> slot %d", path, rdonly ? " O_RDONLY" : " O_RDWR", trunc ? "|O_TRUNC" : "",
	     append ? "|O_APPEND" : "", ino < 0 ? "|O_CREAT" : "", s);
	int fd = 0;
	if (real_calls && (fd = open(path, fl, 0644)) < 0)
		fail("open %s: %s", path, strerror(errno));
	if (ino < 0)
		ino = ino_new(prot, name);
	else if (trunc && inos[ino].size)
		mutate(ino, (struct mut){0, -1, 0, false});
	hs[s] = (struct handle){true, fd, ofd_new(ino, append, rdonly)};
}

static void do_write(int cls)
{
	int h = pick_handle(true);
	if (h < 0)
		return do_open();
	struct ofd *o = &ofds[hs[h].ofd];
	struct ino *f = &inos[o->ino];
	if (f->prot && f->pend_bytes > MAXPEND_BYTES)
		return do_sync(h);
	int64_t len = pick_len(), off;
	bool seek = cls == C_WRITE && (o->pos < 0 || rn(2));
	if (cls != C_WRITE)
		off = pick_off(f->size);
	else if (seek)
		off = pick_off(f->size);
	else
		off = o->pos;
	if (excluded[C_HOLES] && off > f->size)
		off = f->size, seek = cls == C_WRITE;
	if (o->append) /* Linux appends pwrite's data too on an O_APPEND descriptor */
		off = f->size;
	len = fit(off, len);
	if (len <= 0)
		return;
	if (o->append && f->size + len > MAXSIZE)
		return;
	uint32_t tag = (uint32_t)opno;
	int64_t cut = len > 1 ? 1 + rn(len - 1) : len;
	note("%s slot %d (ino %d%s%s, size %" PRId64 ") off %" PRId64 " len %" PRId64 "%s", cname[cls], h, o->ino,
	     f->prot ? ", protected" : "", o->append ? ", append" : "", f->size, off, len, seek ? " (after lseek)" : "");
	if (real_calls) {
		int64_t woff = off;
		if (cls == C_WRITE && o->append && seek)
			woff = pick_off(f->size); /* O_APPEND ignores the position */
		fill(tag, off, len);
		long r;
		if (cls == C_WRITE) {
			if (seek)
				want_ok("lseek", (long)lseek(hs[h].fd, woff, SEEK_SET), (long)woff);
			r = (long)write(hs[h].fd, wbuf, (size_t)len);
		} else if (cls == C_PWRITE) {
			r = (long)pwrite(hs[h].fd, wbuf, (size_t)len, off);
		} else {
			struct iovec v[2] = {{wbuf, (size_t)cut}, {wbuf + cut, (size_t)(len - cut)}};
			r = (long)pwritev(hs[h].fd, v, 2, off);
		}
		want_ok(cname[cls], r, (long)len);
	} else if (cls == C_WRITE && o->append && seek) {
		(void)pick_off(f->size);
	}
	mutate(o->ino, (struct mut){off, len, tag, false});
	if (cls == C_WRITE)
		o->pos = off + len;
}

static void do_read(int cls)
{
	int h = pick_handle(false);
	if (h < 0)
		return do_open();
	struct ofd *o = &ofds[hs[h].ofd];
	struct ino *f = &inos[o->ino];
	int64_t len = pick_len(), off;
	bool seek = cls == C_READ && (o->pos < 0 || rn(2));
	off = (cls == C_READ && !seek) ? o->pos : pick_off(f->size);
	note("%s slot %d (ino %d%s, size %" PRId64 ") off %" PRId64 " len %" PRId64 "%s", cname[cls], h, o->ino,
	     f->prot ? ", protected" : "", f->size, off, len, seek ? " (after lseek)" : "");
	if (real_calls) {
		long r;
		if (cls == C_READ) {
			if (seek)
				want_ok("lseek", (long)lseek(hs[h].fd, off, SEEK_SET), (long)off);
			r = (long)read(hs[h].fd, rbuf, (size_t)len);
		} else {
			r = (long)pread(hs[h].fd, rbuf, (size_t)len, off);
		}
		if (r < 0)
			fail("%s: %s", cname[cls], strerror(errno));
		cmp(cname[cls], o->ino, off, rbuf, r, len);
	}
	if (cls == C_READ) {
		int64_t n = off >= f->size ? 0 : (f->size - off < len ? f->size - off : len);
		o->pos = off + n;
	}
}

static void do_size(int cls)
{
	int h = pick_handle(cls != C_TRUNC);
	if (h < 0)
		return do_open();
	struct ofd *o = &ofds[hs[h].ofd];
	struct ino *f = &inos[o->ino];
	int64_t size = rn(3) ? rn(f->size + 1) : rn(MAXSIZE);
	if (excluded[C_HOLES] && size > f->size)
		size = f->size;
	if (cls == C_FALLOC) {
		int64_t off = pick_off(f->size), len = fit(off, pick_len());
		bool keep = rn(2) || excluded[C_HOLES];
		note("fallocate slot %d (ino %d%s, size %" PRId64 ") %s off %" PRId64 " len %" PRId64, h, o->ino,
		     f->prot ? ", protected" : "", f->size, keep ? "KEEP_SIZE" : "0", off, len);
		if (len <= 0)
			return;
		if (real_calls)
			want_ok("fallocate", fallocate(hs[h].fd, keep ? FALLOC_FL_KEEP_SIZE : 0, off, len), 0);
		if (!keep && off + len > f->size)
			mutate(o->ino, (struct mut){off + len, -1, 0, false});
		return;
	}
	char path[4096] = "";
	if (cls == C_TRUNC) {
		if (!f->linked)
			return;
		path_of(path, sizeof(path), f->prot, f->name);
	}
	note("%s %s slot %d (ino %d%s, size %" PRId64 ") to %" PRId64, cname[cls], path, h, o->ino,
	     f->prot ? ", protected" : "", f->size, size);
	if (real_calls)
		want_ok(cname[cls], cls == C_TRUNC ? truncate(path, size) : ftruncate(hs[h].fd, size), 0);
	mutate(o->ino, (struct mut){size, -1, 0, false});
}

static void do_look(int cls)
{
	int h = pick_handle(false);
	if (h < 0)
		return do_open();
	struct ofd *o = &ofds[hs[h].ofd];
	struct ino *f = &inos[o->ino];
	if (cls == C_STAT) {
		if (!f->linked)
			return;
		char path[4096];
		path_of(path, sizeof(path), f->prot, f->name);
		bool l = rn(2);
		note("%s %s (ino %d%s, size %" PRId64 ")", l ? "lstat" : "stat", path, o->ino, f->prot ? ", protected" : "", f->size);
		struct stat st;
		if (real_calls) {
			want_ok("stat", l ? lstat(path, &st) : stat(path, &st), 0);
			want_ok(l ? "lstat's st_size" : "stat's st_size", (long)st.st_size, (long)f->size);
		}
		return;
	}
	if (cls == C_FSTAT) {
		note("fstat slot %d (ino %d%s, size %" PRId64 ")", h, o->ino, f->prot ? ", protected" : "", f->size);
		struct stat st;
		if (real_calls) {
			want_ok("fstat", fstat(hs[h].fd, &st), 0);
			want_ok("fstat's st_size", (long)st.st_size, (long)f->size);
			want_ok("lseek(SEEK_END)", (long)lseek(hs[h].fd, 0, SEEK_END), (long)f->size);
		}
		o->pos = f->size;
		return;
	}
	/* mmap */
	note("mmap slot %d (ino %d%s, size %" PRId64 ")", h, o->ino, f->prot ? ", protected" : "", f->size);
	if (f->prot)
		boundary(f);
	if (!f->size || !real_calls)
		return;
	void *m = mmap(NULL, (size_t)f->size, PROT_READ, MAP_SHARED, hs[h].fd, 0);
	if (m == MAP_FAILED)
		fail("mmap: %s", strerror(errno));
	cmp("mmap read", o->ino, 0, m, f->size, f->size);
	munmap(m, (size_t)f->size);
}

static void do_fdopen(void)
{
	int h = pick_handle(false);
	if (h < 0)
		return do_open();
	struct ofd *o = &ofds[hs[h].ofd];
	struct ino *f = &inos[o->ino];
	note("fdopen(slot %d, \"r\") (ino %d%s, size %" PRId64 "), fread all, fclose", h, o->ino,
	     f->prot ? ", protected" : "", f->size);
	if (real_calls) {
		FILE *s = fdopen(hs[h].fd, "r");
		if (!s)
			fail("fdopen: %s", strerror(errno));
		if (fseek(s, 0, SEEK_SET))
			fail("fseek: %s", strerror(errno));
		size_t n = fread(rbuf, 1, (size_t)f->size + 100, s);
		cmp("fread", o->ino, 0, rbuf, (int64_t)n, f->size + 100);
		if (fclose(s))
			fail("fclose: %s", strerror(errno));
	}
	if (f->prot)
		boundary(f);
	o->pos = -1;
	handle_drop(h);
}

static void do_dup(int cls)
{
	int h = pick_handle(false);
	if (h < 0)
		return do_open();
	if (cls == C_CLOSERANGE) {
		int lo = (int)rn(MAXH), hi = lo + (int)rn(4);
		note("close_range(%d, %d)", PARK + lo, PARK + hi);
		if (real_calls)
			want_ok("close_range", syscall(SYS_close_range, PARK + lo, PARK + hi, 0), 0);
		for (int i = lo; i <= hi && i < MAXH; i++)
			if (hs[i].used && hs[i].fd == PARK + i)
				handle_drop(i);
		return;
	}
	int s;
	if (cls == C_DUP) {
		if ((s = free_slot()) < 0)
			return;
		note("dup slot %d -> slot %d", h, s);
		int fd = 0;
		if (real_calls && (fd = dup(hs[h].fd)) < 0)
			fail("dup: %s", strerror(errno));
		hs[s] = (struct handle){true, fd, hs[h].ofd};
		ofds[hs[h].ofd].refs++;
		return;
	}
	/* dup2: to slot s's parking place; h itself parks when s == h */
	s = (int)rn(MAXH);
	note("dup2 slot %d -> %d (slot %d%s)", h, PARK + s, s, hs[s].used ? ", in use" : "");
	if (s == h) {
		if (hs[h].fd == PARK + h)
			return;
		if (real_calls) {
			want_ok("dup2", dup2(hs[h].fd, PARK + h), PARK + h);
			want_ok("close", close(hs[h].fd), 0);
		}
		hs[h].fd = PARK + h;
		return;
	}
	int of = hs[h].ofd;
	ofds[of].refs++;
	if (hs[s].used) {
		if (real_calls && hs[s].fd != PARK + s)
			want_ok("close", close(hs[s].fd), 0);
		handle_drop(s);
	}
	if (real_calls)
		want_ok("dup2", dup2(hs[h].fd, PARK + s), PARK + s);
	hs[s] = (struct handle){true, PARK + s, of};
}

static void do_close(void)
{
	int h = pick_handle(false);
	if (h < 0)
		return do_open();
	note("close slot %d (ino %d)", h, ofds[hs[h].ofd].ino);
	if (real_calls)
		want_ok("close", close(hs[h].fd), 0);
	handle_drop(h);
}

static void do_proc(int cls)
{
	if (group_mode)
		boundary_all(); /* a fork or exec ends the groups (group.c) */
	if (cls == C_FORK) {
		bool ex = rn(2);
		note("fork: child reads, writes, %s", ex ? "exit" : "_exit");
		if (real_calls) {
			fflush(NULL);
			pid_t pid = fork();
			if (pid < 0)
				fail("fork: %s", strerror(errno));
			if (pid == 0) {
				int bad = 0;
				child_ops(true, &bad);
				if (ex)
					exit(bad);
				_exit(bad);
			}
			wait_child(pid, "fork");
		}
		int bad = 0;
		child_ops(false, &bad);
		return;
	}
	char path[4096], size[32], hash[32];
	int ino = verify_args(path, sizeof(path), size, hash);
	if (ino < 0)
		return;
	if (excluded[C_EXECREAD])
		strcpy(path, "-"); /* do_verify: nothing to read */
	char *av[] = {self, "--verify", path, size, hash, NULL};
	if (cls == C_VFORK) {
		int h = pick_handle(false);
		note("vfork: child dup2 slot %d to 0, close_range(3, ~0), exec pfsx --verify %s (ino %d)", h, path, ino);
		if (!real_calls)
			return;
		fflush(NULL);
		int in = h >= 0 ? hs[h].fd : -1;
		pid_t pid = vfork();
		if (pid < 0)
			fail("vfork: %s", strerror(errno));
		if (pid == 0) {
			/* As CPython's subprocess: stdin replaced, every other descriptor closed, exec. */
			if (in >= 0 && dup2(in, 0) < 0)
				_exit(126);
			syscall(SYS_close_range, 3, ~0U, 0);
			execve(self, av, environ);
			_exit(127);
		}
		wait_child(pid, "vfork+exec verify");
	} else if (cls == C_SPAWN) {
		note("posix_spawn pfsx --verify %s (ino %d)", path, ino);
		if (!real_calls)
			return;
		pid_t pid;
		int r = posix_spawn(&pid, self, NULL, NULL, av, environ);
		if (r)
			fail("posix_spawn: %s", strerror(r));
		wait_child(pid, "posix_spawn verify");
	} else {
		char cmd[9000];
		snprintf(cmd, sizeof(cmd), "exec '%s' --verify '%s' %s %s", self, path, size, hash);
		note("system(\"%s\")", cmd);
		if (!real_calls)
			return;
		fflush(NULL);
		int st = system(cmd);
		if (st != 0)
			fail("system(pfsx --verify %s) returned status %#x: the child read other data than the model", path, st);
	}
}

static void do_name(int cls)
{
	int prot = (int)rn(2), a = (int)rn(NNAME), b = (int)rn(NNAME);
	int ia = names[prot][a];
	if (ia < 0)
		return;
	char pa[4096], pb[4096];
	path_of(pa, sizeof(pa), prot, a);
	path_of(pb, sizeof(pb), prot, b);
	/* The store closes around a rename or unlink of a protected path: every group
	 * before it is complete (durable) when it returns (state.c). */
	if (cls == C_UNLINK) {
		note("unlink %s (ino %d)", pa, ia);
		if (real_calls)
			want_ok("unlink", unlink(pa), 0);
		names[prot][a] = -1;
		inos[ia].linked = false;
		ino_unref_check(ia);
	} else {
		if (a == b)
			return;
		int ib = names[prot][b];
		note("rename %s (ino %d) -> %s (ino %d)", pa, ia, pb, ib);
		if (real_calls)
			want_ok("rename", rename(pa, pb), 0);
		if (ib >= 0) {
			inos[ib].linked = false;
			ino_unref_check(ib);
		}
		names[prot][a] = -1;
		names[prot][b] = ia;
		inos[ia].name = b;
	}
	if (prot)
		for (int i = 0; i < MAXINO; i++)
			if (inos[i].used && inos[i].prot)
				synced(&inos[i]);
}

static void one_op(void)
{
	int cls = pick_class();
	nclass_run[cls]++;
	switch (cls) {
	case C_WRITE: case C_PWRITE: case C_PWRITEV: do_write(cls); break;
	case C_APPEND: do_write(C_WRITE); break;
	case C_READ: case C_PREAD: do_read(cls); break;
	case C_FTRUNC: case C_TRUNC: case C_FALLOC: do_size(cls); break;
	case C_MMAP: case C_FSTAT: case C_STAT: do_look(cls); break;
	case C_FDOPEN: do_fdopen(); break;
	case C_DUP: case C_DUP2: case C_CLOSERANGE: do_dup(cls); break;
	case C_FORK: case C_VFORK: case C_SPAWN: case C_SYSTEM: do_proc(cls); break;
	case C_RENAME: case C_UNLINK: do_name(cls); break;
	case C_FSYNC: {
		int h = pick_handle(false);
		if (h < 0)
			do_open();
		else
			do_sync(h);
		break;
	}
	case C_OPEN: do_open(); break;
	default: do_close(); break;
	}
}

/* --- after a kill ------------------------------------------------------------------ */
static int64_t first_diff(const uint8_t *a, int64_t na, const uint8_t *b, int64_t nb)
{
	int64_t n = na < nb ? na : nb;
	for (int64_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return i;
	return na == nb ? -1 : n;
}

static bool power_cut; /* -P */

/* Cut the power of cutfs (-C): from then on each of its calls fails with
 * EIO, and what was not synced is lost or torn; the caller dies next. */
static void cut_power(const char *ctl)
{
	int fd = open(ctl, O_WRONLY);
	if (fd < 0 || write(fd, "cut\n", 4) != 4) {
		fprintf(stderr, "pfsx: cutting the power at %s: %s\n", ctl, strerror(errno));
		exit(2);
	}
	close(fd);
}

static int check_file(int prot, int name, uint64_t *states)
{
	char path[4096];
	path_of(path, sizeof(path), prot, name);
	int ino = names[prot][name];
	int fd = open(path, O_RDONLY);
	if (ino < 0) {
		if (fd >= 0)
			fprintf(stderr, "pfsx: %s exists, the model has no such file\n", path);
		return fd >= 0;
	}
	if (fd < 0) {
		fprintf(stderr, "pfsx: %s: %s (the model has it)\n", path, strerror(errno));
		return 1;
	}
	int64_t n = 0;
	for (ssize_t r; (r = read(fd, rbuf + n, sizeof(rbuf) - (size_t)n)) > 0;)
		n += r;
	close(fd);
	struct ino *f = &inos[ino];
	if (!prot) {
		int64_t d = first_diff(rbuf, n, f->data, f->size);
		if (d >= 0)
			fprintf(stderr, "pfsx: unprotected %s: %" PRId64 " bytes, the model %" PRId64 ", first difference at %" PRId64 "\n",
				path, n, f->size, d);
		return d >= 0;
	}
	/* The state at the last sync, then each mutation in order: the file must be one of
	 * these states, and one at a group boundary. */
	static uint8_t cand[MAXSIZE + 65536];
	int64_t cs = f->ssize;
	memcpy(cand, f->sdata, (size_t)cs);
	int64_t best = first_diff(rbuf, n, cand, cs);
	if (best < 0) {
		(*states)++;
		return 0;
	}
	int bestk = 0, inner = 0;
	for (int k = 0; k < f->nm; k++) {
		apply(cand, &cs, &f->m[k]);
		int64_t d = first_diff(rbuf, n, cand, cs);
		if (d < 0 && f->m[k].boundary) {
			*states += (uint64_t)k + 2;
			return 0;
		}
		if (d < 0 && !inner) /* a later identical state may be a boundary */
			inner = k + 1;
		if (d > best)
			best = d, bestk = k + 1;
	}
	if (inner)
		fprintf(stderr, "pfsx: %s is the state after mutation %d of %d since its last sync, not a group boundary\n",
			path, inner, f->nm);
	else
		fprintf(stderr, "pfsx: %s (%" PRId64 " bytes) is no state the contract allows: its last sync (%" PRId64
			" bytes) plus a prefix of the %d mutations since; nearest: after %d mutations, first difference at %" PRId64 "\n",
		path, n, f->ssize, f->nm, bestk, best);
	for (int k = 0; k < f->nm && k < 40; k++)
		fprintf(stderr, "  mutation %d: %s off %" PRId64 " len %" PRId64 " (op %u)%s\n", k + 1,
			f->m[k].len < 0 ? "size" : "write", f->m[k].off, f->m[k].len, f->m[k].tag,
			f->m[k].boundary ? ", then a group boundary" : "");
	return 1;
}

static void parse_x(const char *s)
{
	char *d = strdup(s), *save = NULL;
	for (char *t = strtok_r(d, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int c = 0;
		while (c < NCLASS && strcmp(cname[c], t))
			c++;
		if (c == NCLASS) {
			fprintf(stderr, "pfsx: no op class '%s'; the classes:", t);
			for (c = 0; c < NCLASS; c++)
				fprintf(stderr, " %s", cname[c]);
			fprintf(stderr, "\n");
			exit(2);
		}
		if (c == C_OPEN || c == C_CLOSE) {
			fprintf(stderr, "pfsx: open and close cannot be excluded\n");
			exit(2);
		}
		excluded[c] = true;
	}
	free(d);
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "--verify"))
		return do_verify(argv[2], argv[3], argv[4]);
	const char *e = getenv("ATOMIO_SEED");
	if (e && *e)
		seed = strtoull(e, NULL, 0);
	long n = 10000, kill_at = -1, check_at = -1;
	const char *cut_ctl = NULL;
	int o;
	while ((o = getopt(argc, argv, "s:n:x:k:c:l:vC:P")) != -1)
		switch (o) {
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'n': n = atol(optarg); break;
		case 'x': parse_x(optarg); break;
		case 'k': kill_at = atol(optarg); break;
		case 'c': check_at = atol(optarg); break;
		case 'l': nshow = atoi(optarg) > RING ? RING : atoi(optarg); break;
		case 'v': verbose = true; break;
		case 'C': cut_ctl = optarg; break;
		case 'P': power_cut = true; break;
		default:
			fprintf(stderr, "usage: pfsx [-s SEED] [-n OPS] [-x CLASS,..] [-k K [-C CTL] | -c K [-P]] [-l N] [-v] DIR\n");
			return 2;
		}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: pfsx [-s SEED] [-n OPS] [-x CLASS,..] [-k K [-C CTL] | -c K [-P]] [-l N] [-v] DIR\n");
		return 2;
	}
	dir = argv[optind];
	e = getenv("ATOMIO_GROUP");
	group_mode = e && !strcmp(e, "1");
	shared_mode = !group_mode; /* the one mode: every process writes (ATOMIO_SHARED is ignored) */
	e = getenv("ATOMIO_FILES");
	preloaded = e && *e;
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (sl <= 0)
		return 2;
	self[sl] = 0;
	rng = seed * 0x9E3779B97F4A7C15ULL + 0x1234567;
	memset(names, -1, sizeof(names));
	if (check_at >= 0) {
		real_calls = false;
		n = check_at;
	}
	if (check_at < 0)
		printf("pfsx: seed %" PRIu64 " (ATOMIO_SEED or -s to repeat), %ld ops, %s mode%s\n", seed, n,
		       group_mode ? "group" : "default", kill_at >= 0 ? ", killed at a seeded op" : "");
	printf("\n");
	fflush(stdout);
	/* (opno == n: -k n dies after the last op, before the end's checks) */
	for (opno = 0; opno <= n; opno++) {
		if (opno == kill_at && cut_ctl)
			cut_power(cut_ctl);
		if (opno == kill_at)
			raise(SIGKILL);
		if (opno == n)
			break;
		snprintf(ring[opno % RING], sizeof(ring[0]), "#%ld (no op: nothing to do)", opno);
		one_op();
	}
	opno = n;
	if (check_at >= 0) {
		int bad = 0;
		uint64_t states = 0;
		for (int p = power_cut ? 1 : 0; p < 2; p++)
			for (int i = 0; i < NNAME; i++)
				bad += check_file(p, i, &states);
		if (bad) {
			fprintf(stderr, "pfsx: FAIL after a kill before op %ld, seed %" PRIu64 " (%s mode): %d files break the contract\n",
				check_at, seed, group_mode ? "group" : "default", bad);
			opno = check_at - 1;
			dump_ring();
			return 1;
		}
		printf("pfsx: %s before op %ld: every %sfile as the contract allows\n",
		       power_cut ? "power cut" : "killed", check_at, power_cut ? "protected " : "");
		return 0;
	}
	printf("pfsx: %ld ops checked, seed %" PRIu64 ":", n, seed);
	for (int c = 0; c < NCLASS; c++)
		if (nclass_run[c])
			printf(" %s %" PRIu64, cname[c], nclass_run[c]);
	printf("\n");
	return 0;
}
