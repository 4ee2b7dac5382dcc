/*
 * verify.c: `atomio verify write` and `atomio verify check` (see verify.h
 * for the method, the block format and the state file).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "atomio.h"
#include "cli.h"
#include "sys.h" /* RWF_ATOMIC, RWF_DSYNC */
#include "verify.h"

/* --- blocks ------------------------------------------------------------------ */

static uint64_t mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

struct sect_hdr {
	uint64_t group, block, run;
	uint32_t sector, magic;
};

void v_stamp(void *buf, uint32_t bsize, uint64_t run, uint64_t idx, uint64_t g)
{
	char *p = buf;
	for (uint32_t s = 0; s < bsize / V_SECTOR; s++) {
		char *sec = p + (size_t)s * V_SECTOR;
		struct sect_hdr h = {g, idx, run, s, V_MAGIC};
		memcpy(sec, &h, sizeof(h));
		uint64_t x = mix(run ^ mix(idx ^ mix(g ^ mix(s))));
		for (size_t k = sizeof(h); k + 8 <= V_SECTOR; k += 8) {
			x = mix(x);
			memcpy(sec + k, &x, 8);
		}
	}
	uint64_t c = XXH3_64bits_withSeed(p, bsize - 8, run);
	memcpy(p + bsize - 8, &c, 8);
}

static uint64_t rng_next(uint64_t *s) { return mix(*s += 0x632BE59BD9B4E019ull); }

void v_group_blocks(const struct vstate_hdr *h, uint64_t g, uint64_t *out)
{
	uint64_t s = mix(h->seed ^ mix(g));
	if (h->mode == VM_KERNEL) {
		/* one naturally aligned run of R blocks: one RWF_ATOMIC write */
		uint64_t start = rng_next(&s) % (h->nblocks / h->ranges) * h->ranges;
		for (uint32_t i = 0; i < h->ranges; i++)
			out[i] = start + i;
		return;
	}
	for (uint32_t i = 0; i < h->ranges; i++) {
		bool dup;
		do {
			out[i] = rng_next(&s) % h->nblocks;
			dup = false;
			for (uint32_t k = 0; k < i; k++)
				dup |= out[k] == out[i];
		} while (dup);
	}
}

/* --- state file ----------------------------------------------------------------- */

static uint64_t rec_csum(uint64_t run, uint64_t g) { return mix(run ^ 0x5354415445524543ull) ^ mix(g); }

static int read_full(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (int)(done == len);
}

static int write_full(int fd, const void *buf, size_t len, off_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

static int sync_fd(int fd, bool data_only)
{
	int r;
	do
		r = data_only ? fdatasync(fd) : fsync(fd);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

static int sync_dir_of(const char *path)
{
	char d[PATH_MAX];
	snprintf(d, sizeof(d), "%s", path);
	char *s = strrchr(d, '/');
	if (!s)
		strcpy(d, ".");
	else if (s == d)
		d[1] = 0;
	else
		*s = 0;
	int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = sync_fd(fd, false);
	close(fd);
	return r;
}

/* Read the header and count the acknowledged groups. */
static int state_load(const char *path, struct vstate_hdr *h, uint64_t *acked)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		cli_warn("state file %s: %s", path, strerror(errno));
		return EX_ERROR;
	}
	int r = read_full(fd, h, sizeof(*h), 0);
	if (r <= 0 || memcmp(h->magic, V_STATE_MAGIC, 8) || h->version != 1 ||
	    XXH3_64bits_withSeed(h, offsetof(struct vstate_hdr, csum), 0) != h->csum ||
	    h->bsize < V_SECTOR || h->bsize % V_SECTOR || !h->ranges || h->ranges > V_MAX_RANGES ||
	    h->nblocks < 4ull * h->ranges || h->mode < VM_ATOMIO || h->mode > VM_KERNEL) {
		close(fd);
		cli_warn("state file %s: %s", path,
			 r < 0 ? strerror(-r) : "not an atomio verify state file (or its header is damaged)");
		return EX_ERROR;
	}
	/* Records in 64 KiB chunks; the first missing or bad one ends the list
	 * (a torn last record is the normal end after a power cut). */
	uint64_t a = 0;
	char buf[65536];
	for (off_t off = V_STATE_HDR;; off += sizeof(buf)) {
		ssize_t n = pread(fd, buf, sizeof(buf), off);
		if (n < 0 && errno == EINTR) {
			off -= sizeof(buf);
			continue;
		}
		if (n <= 0)
			break;
		bool end = false;
		for (ssize_t k = 0; k + (ssize_t)V_STATE_REC <= n; k += V_STATE_REC) {
			uint64_t rec[2];
			memcpy(rec, buf + k, sizeof(rec));
			if (rec[0] != a + 1 || rec[1] != rec_csum(h->run_id, rec[0])) {
				end = true;
				break;
			}
			a++;
		}
		if (end || n < (ssize_t)sizeof(buf))
			break;
	}
	close(fd);
	*acked = a;
	return EX_OK;
}

/* --- write ------------------------------------------------------------------------- */

static volatile sig_atomic_t v_stop;
static void v_on_signal(int sig)
{
	(void)sig;
	v_stop = 1;
}

static void data_paths(const struct vopts *o, char *data, char *log, size_t n)
{
	snprintf(data, n, "%s/%s", o->dir, V_DATA_NAME);
	snprintf(log, n, "%s/%s", o->dir, V_LOG_NAME);
}

/* One `verify write` run: what its steps hand on to each other. */
struct vrun {
	const struct vopts *o;
	char data[PATH_MAX + 64], logp[PATH_MAX + 64];
	struct stat ds;     /* the directory */
	uint64_t rid;       /* this run's id, in every stamp */
	bool direct;
	int fd;             /* the data file (the store's, in atomio mode) */
	atomio *st;
	int afile;
	char err[512];
	char *buf, *gbuf;   /* fill chunk; one group's blocks */
	uint64_t gbytes;
	struct stat fs;     /* the data file, filled */
	struct vstate_hdr h;
	int sfd;            /* the state file */
};

/* The run's arguments against the directory and state file.  0 or an exit status. */
static int w_preflight(struct vrun *w)
{
	const struct vopts *o = w->o;
	struct stat ss;
	if (stat(o->dir, &w->ds) < 0) {
		cli_warn("%s: %s", o->dir, strerror(errno));
		return EX_ERROR;
	}
	if (!S_ISDIR(w->ds.st_mode)) {
		cli_warn("%s: not a directory", o->dir);
		return EX_ERROR;
	}
	if (lstat(o->state, &ss) == 0) {
		cli_warn("state file %s exists: check it first, or remove it to start a new run", o->state);
		return EX_ERROR;
	}
	if (o->mode == VM_KERNEL && !o->direct) {
		cli_warn("--kernel needs O_DIRECT (drop --buffered)");
		return EX_USAGE;
	}
	return 0;
}

/* Create the data file afresh (and, for --kernel, check RWF_ATOMIC takes a
 * group).  0 or an exit status. */
static int w_create_data(struct vrun *w)
{
	const struct vopts *o = w->o;
	/* Start clean: a log left by an earlier run could otherwise replay its
	 * records into the new data file's predecessor (recovery refuses a
	 * replaced file; we remove both). */
	if ((unlink(w->data) < 0 && errno != ENOENT) || (unlink(w->logp) < 0 && errno != ENOENT)) {
		cli_warn("removing the previous run's files in %s: %s", o->dir, strerror(errno));
		return EX_ERROR;
	}
	w->direct = o->direct;
	w->fd = open(w->data, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | (w->direct ? O_DIRECT : 0), 0600);
	if (w->fd < 0 && errno == EINVAL && w->direct && o->mode != VM_KERNEL) {
		if (!o->quiet)
			cli_warn("O_DIRECT refused in %s; using buffered writes", o->dir);
		w->direct = false;
		w->fd = open(w->data, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	}
	if (w->fd < 0) {
		int e = errno;
		cli_warn("creating %s: %s", w->data, strerror(e));
		return o->mode == VM_KERNEL && e == EINVAL ? EX_UNSUPP : EX_ERROR;
	}
	w->gbytes = (uint64_t)o->ranges * o->bsize;
	if (o->mode != VM_KERNEL)
		return 0;
	struct stx_info sx;
	uint64_t gb = w->gbytes;
	int r = host_statx_info(w->fd, "", AT_EMPTY_PATH, &sx);
	if (r < 0 || !sx.has_atomic || !sx.unit_max || gb < sx.unit_min || gb > sx.unit_max ||
	    (gb & (gb - 1))) {
		if (r < 0 || !sx.has_atomic || !sx.unit_max)
			cli_warn("--kernel: this filesystem does not accept RWF_ATOMIC (statx: no atomic "
				 "write limits)");
		else
			cli_warn("--kernel: a group of %llu bytes is outside RWF_ATOMIC's unit range "
				 "%u..%u (or not a power of two)",
				 (unsigned long long)gb, sx.unit_min, sx.unit_max);
		close(w->fd);
		unlink(w->data);
		return EX_UNSUPP;
	}
	return 0;
}

/* Version 0 of every block, durable, before any group.  0 or an exit
 * status (the data file closed). */
static int w_fill(struct vrun *w)
{
	const struct vopts *o = w->o;
	size_t chunk_blocks = (1u << 20) / o->bsize ? (1u << 20) / o->bsize : 1;
	if (posix_memalign((void **)&w->buf, 4096, chunk_blocks * o->bsize + w->gbytes)) {
		close(w->fd);
		return EX_ERROR;
	}
	w->gbuf = w->buf + chunk_blocks * o->bsize;
	int r = 0;
	for (uint64_t b = 0; b < o->nblocks && r == 0; b += chunk_blocks) {
		uint64_t n = o->nblocks - b < chunk_blocks ? o->nblocks - b : chunk_blocks;
		for (uint64_t k = 0; k < n; k++)
			v_stamp(w->buf + k * o->bsize, o->bsize, w->rid, b + k, 0);
		r = write_full(w->fd, w->buf, n * o->bsize, (off_t)(b * o->bsize));
		if (r < 0)
			cli_warn("filling %s: %s", w->data, strerror(-r));
	}
	if (r == 0) {
		r = sync_fd(w->fd, false);
		if (r == 0)
			r = sync_dir_of(w->data);
		if (r < 0)
			cli_warn("syncing %s: %s", w->data, strerror(-r));
	}
	if (r < 0) {
		free(w->buf);
		close(w->fd);
		return EX_ERROR;
	}
	fstat(w->fd, &w->fs);
	return 0;
}

/* atomio mode: the store, with the data file registered in it.  0 or an exit status. */
static int w_open_store(struct vrun *w)
{
	const struct vopts *o = w->o;
	close(w->fd);
	w->fd = -1;
	struct atomio_options ao = {.log_size = o->log_size, .flags = ATOMIO_CREATE | o->store_flags,
				    .errbuf = w->err, .errbuf_size = sizeof(w->err)};
	int r = atomio_open(w->logp, &ao, &w->st);
	if (r == 0) {
		w->afile = atomio_file_open(w->st, w->data, w->direct ? O_DIRECT : 0, 0);
		r = w->afile < 0 ? w->afile : 0;
	}
	if (r < 0) {
		cli_warn("opening the store %s: %s", w->logp, w->err[0] ? w->err : atomio_strerror(r));
		if (w->st)
			atomio_close(w->st);
		free(w->buf);
		return EX_ERROR;
	}
	w->fd = atomio_file_fd(w->st, w->afile);
	return 0;
}

static void w_close_data(struct vrun *w)
{
	if (w->st)
		atomio_close(w->st);
	else
		close(w->fd);
}

/* The state file, durable (and its directory entry) before group 1.  0 or an exit status. */
static int w_state_create(struct vrun *w)
{
	const struct vopts *o = w->o;
	struct vstate_hdr *h = &w->h;
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, V_STATE_MAGIC, 8);
	h->version = 1;
	h->mode = o->mode;
	h->run_id = w->rid;
	h->seed = o->seed;
	h->bsize = o->bsize;
	h->ranges = o->ranges;
	h->nblocks = o->nblocks;
	h->data_ino = w->fs.st_ino;
	h->data_dev = w->fs.st_dev;
	h->flags = w->direct ? 1 : 0;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	h->created_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	h->csum = XXH3_64bits_withSeed(h, offsetof(struct vstate_hdr, csum), 0);
	int r = 0;
	w->sfd = open(o->state, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (w->sfd < 0 || (r = write_full(w->sfd, h, sizeof(*h), 0)) < 0 || (r = sync_fd(w->sfd, false)) < 0 ||
	    (r = sync_dir_of(o->state)) < 0) {
		cli_warn("state file %s: %s", o->state, strerror(w->sfd < 0 ? errno : -r));
		w_close_data(w);
		free(w->buf);
		return EX_ERROR;
	}
	struct stat sts;
	if (fstat(w->sfd, &sts) == 0 && sts.st_dev == w->ds.st_dev && !o->quiet)
		cli_warn("warning: the state file is on the same filesystem as %s; a power cut can lose "
			 "both (fine for a process-crash test)", o->dir);
	return 0;
}

/* Write group g (its blocks) the run's way.  0 or a negative errno; *what
 * names the call. */
static int w_group(struct vrun *w, uint64_t g, const uint64_t *blocks, const char **what)
{
	const struct vopts *o = w->o;
	int r = 0;
	if (o->mode == VM_ATOMIO) {
		atomio_tx *tx;
		r = atomio_tx_begin(w->st, &tx);
		for (unsigned i = 0; r == 0 && i < o->ranges; i++) {
			v_stamp(w->gbuf, o->bsize, w->rid, blocks[i], g);
			r = atomio_tx_write(tx, w->afile, w->gbuf, o->bsize, (off_t)(blocks[i] * o->bsize));
		}
		if (r == 0)
			r = atomio_tx_commit(tx);
		else
			atomio_tx_abort(tx);
		*what = "atomio commit";
	} else if (o->mode == VM_RAW) {
		for (unsigned i = 0; r == 0 && i < o->ranges; i++) {
			v_stamp(w->gbuf, o->bsize, w->rid, blocks[i], g);
			r = write_full(w->fd, w->gbuf, o->bsize, (off_t)(blocks[i] * o->bsize));
		}
		if (r == 0)
			r = sync_fd(w->fd, true);
		*what = "write + fdatasync";
	} else {
		for (unsigned i = 0; i < o->ranges; i++)
			v_stamp(w->gbuf + (size_t)i * o->bsize, o->bsize, w->rid, blocks[i], g);
		struct iovec iov = {w->gbuf, w->gbytes};
		ssize_t n = pwritev2(w->fd, &iov, 1, (off_t)(blocks[0] * o->bsize), RWF_ATOMIC | RWF_DSYNC);
		r = n == (ssize_t)w->gbytes ? 0 : n < 0 ? -errno : -EIO;
		*what = "pwritev2(RWF_ATOMIC|RWF_DSYNC)";
	}
	return r;
}

/* Groups until stopped (signal, count, duration or error), each recorded
 * durably in the state file once acknowledged.  The exit status; *groups. */
static int w_loop(struct vrun *w, uint64_t *groups)
{
	const struct vopts *o = w->o;
	uint64_t *blocks = calloc(o->ranges, sizeof(uint64_t));
	double t0 = now_sec(), last = t0;
	uint64_t g = 0, last_g = 0;
	int rc = EX_OK;
	if (!blocks) {
		cli_warn("out of memory");
		v_stop = 1;
		rc = EX_ERROR;
	}
	while (!v_stop) {
		if (o->groups && g >= o->groups)
			break;
		if (o->duration > 0 && now_sec() - t0 >= o->duration)
			break;
		g++;
		v_group_blocks(&w->h, g, blocks);
		const char *what = NULL;
		int r = w_group(w, g, blocks, &what);
		if (r < 0) {
			cli_warn("group %llu: %s: %s", (unsigned long long)g, what,
				 w->err[0] ? w->err : atomio_strerror(r));
			rc = o->mode == VM_KERNEL && g == 1 && (r == -EOPNOTSUPP || r == -EINVAL) ? EX_UNSUPP
												: EX_ERROR;
			g--;
			break;
		}
		/* Acknowledged: record it, durably, before the next group. */
		uint64_t rec[2] = {g, rec_csum(w->rid, g)};
		r = write_full(w->sfd, rec, sizeof(rec), (off_t)(V_STATE_HDR + (g - 1) * V_STATE_REC));
		if (r == 0)
			r = sync_fd(w->sfd, true);
		if (r < 0) {
			cli_warn("state file %s: %s", o->state, strerror(-r));
			rc = EX_ERROR;
			break;
		}
		if (o->after_ack)
			o->after_ack(g, w->st, w->fd, o->hook_arg);
		double t = now_sec();
		if (!o->quiet && t - last >= 1.0) {
			fprintf(stderr, "%s: %llu groups acknowledged (%.0f/s)\n", cli_cmd,
				(unsigned long long)g, (double)(g - last_g) / (t - last));
			last = t;
			last_g = g;
		}
	}
	free(blocks);
	*groups = g;
	return rc;
}

int v_write(const struct vopts *o)
{
	static struct vrun run;
	struct vrun *w = &run;
	memset(w, 0, sizeof(*w));
	w->o = o;
	w->afile = -1;
	data_paths(o, w->data, w->logp, sizeof(w->data));
	int rc = w_preflight(w);
	if (rc)
		return rc;
	if (getrandom(&w->rid, sizeof(w->rid), 0) != sizeof(w->rid))
		w->rid = mix((uint64_t)time(NULL) ^ (uint64_t)getpid());
	if ((rc = w_create_data(w)) || (rc = w_fill(w)) ||
	    (o->mode == VM_ATOMIO && (rc = w_open_store(w))) || (rc = w_state_create(w)))
		return rc;

	struct sigaction sa = {0};
	sa.sa_handler = v_on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	v_stop = 0;
	if (!o->quiet)
		fprintf(stderr, "%s: writing groups of %u x %u-byte blocks (%s) into %s; state in %s\n",
			cli_cmd, o->ranges, o->bsize,
			o->mode == VM_ATOMIO ? "atomio groups" : o->mode == VM_RAW ? "plain writes"
										  : "RWF_ATOMIC",
			w->data, o->state);
	double t0 = now_sec();
	uint64_t g;
	rc = w_loop(w, &g);
	double secs = now_sec() - t0;
	free(w->buf);
	close(w->sfd);
	if (w->st) {
		int r = atomio_close(w->st);
		if (r < 0 && rc == EX_OK) {
			cli_warn("closing the store: %s", w->err[0] ? w->err : atomio_strerror(r));
			rc = EX_ERROR;
		}
	} else {
		close(w->fd);
	}
	if (!o->quiet)
		printf("%llu groups acknowledged in %.1f s (%.0f/s); after a crash or power cut run:\n"
		       "  atomio verify check %s --state %s\n",
		       (unsigned long long)g, secs, secs > 0 ? (double)g / secs : 0.0, o->dir, o->state);
	return rc;
}

/* --- check ---------------------------------------------------------------------------- */

enum { ST_OK = 0, ST_TORN, ST_LOST, ST_CORRUPT };

static void add_example(struct vresult *r, uint64_t block, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void add_example(struct vresult *r, uint64_t block, const char *fmt, ...)
{
	if (r->nex >= V_EXAMPLES)
		return;
	struct vproblem *p = &r->ex[r->nex++];
	p->block = block;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->what, sizeof(p->what), fmt, ap);
	va_end(ap);
}

static bool group_wrote(const struct vstate_hdr *h, uint64_t g, uint64_t idx, uint64_t *tmp)
{
	if (g == 0)
		return true;
	v_group_blocks(h, g, tmp);
	for (uint32_t i = 0; i < h->ranges; i++)
		if (tmp[i] == idx)
			return true;
	return false;
}

/* Describe a block whose checksum fails: which version each sector holds. */
static int torn_desc(const struct vstate_hdr *h, const char *b, uint64_t idx, char *out, size_t n)
{
	uint32_t ns = h->bsize / V_SECTOR;
	size_t len = 0;
	int known = 0;
	uint64_t prev_g = UINT64_MAX;
	uint32_t start = 0;
	out[0] = 0;
	for (uint32_t s = 0; s <= ns; s++) {
		uint64_t gs = UINT64_MAX - 1; /* unknown */
		if (s < ns) {
			struct sect_hdr sh;
			memcpy(&sh, b + (size_t)s * V_SECTOR, sizeof(sh));
			if (sh.magic == V_MAGIC && sh.run == h->run_id && sh.block == idx && sh.sector == s) {
				gs = sh.group;
				known++;
			}
		}
		if (s == ns || (s > 0 && gs != prev_g)) {
			if (len < n) {
				char what[48];
				if (prev_g == UINT64_MAX - 1)
					snprintf(what, sizeof(what), "unrecognised");
				else
					snprintf(what, sizeof(what), "group %llu", (unsigned long long)prev_g);
				if (start == s - 1)
					len += (size_t)snprintf(out + len, n - len, "%ssector %u %s",
								len ? ", " : "", start, what);
				else
					len += (size_t)snprintf(out + len, n - len, "%ssectors %u-%u %s",
								len ? ", " : "", start, s - 1, what);
			}
			start = s;
		}
		prev_g = gs;
	}
	return known;
}

/* One check: the state file's facts and what the blocks are found to be. */
struct vcheck {
	const struct vstate_hdr *h;
	struct vresult *res;
	const char *data;     /* the data file's path */
	uint64_t N, A;        /* blocks; the last acknowledged group */
	uint64_t *last;       /* by block: the last acknowledged group that wrote it (0: none) */
	uint8_t *status;      /* by block: ST_* */
	uint64_t *tmp;        /* one group's blocks, scratch */
	uint64_t *infl;       /* the blocks of group A + 1, which may have been in flight */
	char *buf;            /* chunk bytes of the data file */
	size_t chunk;
};

/* The data file must be the one the state file describes (same inode). */
static int check_data_file(const struct vstate_hdr *h, const char *data)
{
	struct stat fs;
	if (lstat(data, &fs) < 0) {
		cli_warn("%s: %s", data, strerror(errno));
		return EX_ERROR;
	}
	if (!S_ISREG(fs.st_mode) || fs.st_ino != h->data_ino) {
		cli_warn("%s is not the data file the state file describes (inode %llu, expected %llu)",
			 data, (unsigned long long)fs.st_ino, (unsigned long long)h->data_ino);
		return EX_ERROR;
	}
	return EX_OK;
}

/* What the application would see: recover first (replays every committed
 * group whole), then read the file. */
static int check_recover(const struct vopts *o, const char *logp, struct vresult *res)
{
	char err[512] = "";
	struct atomio_options ao = {.flags = o->force_paths ? ATOMIO_FORCE_PATHS : 0,
				    .errbuf = err, .errbuf_size = sizeof(err)};
	atomio *st;
	int r = atomio_open(logp, &ao, &st);
	if (r == -EBUSY) {
		cli_warn("the store %s is in use: stop the writer first", logp);
		return EX_ERROR;
	}
	if (r < 0) {
		cli_warn("recovering the store %s: %s", logp, err[0] ? err : atomio_strerror(r));
		return EX_ERROR;
	}
	struct atomio_stats s;
	atomio_stats(st, &s);
	res->recovered = s.groups_recovered;
	r = atomio_close(st);
	if (r < 0) {
		cli_warn("closing the store %s: %s", logp, atomio_strerror(r));
		return EX_ERROR;
	}
	return EX_OK;
}

static void check_free(struct vcheck *c)
{
	free(c->last);
	free(c->status);
	free(c->tmp);
	free(c->infl);
	free(c->buf);
}

/* Each block's expected version, from the generator replayed over the
 * acknowledged groups, and the blocks of the group that may have been in flight. */
static int check_expect(struct vcheck *c)
{
	const struct vstate_hdr *h = c->h;
	c->last = calloc(c->N, sizeof(uint64_t));
	c->status = calloc(c->N, 1);
	c->tmp = calloc(h->ranges, sizeof(uint64_t));
	c->infl = calloc(h->ranges, sizeof(uint64_t));
	c->chunk = ((4u << 20) / h->bsize ? (4u << 20) / h->bsize : 1) * (size_t)h->bsize;
	c->buf = malloc(c->chunk);
	if (!c->last || !c->status || !c->tmp || !c->infl || !c->buf) {
		cli_warn("out of memory for %llu blocks", (unsigned long long)c->N);
		return EX_ERROR;
	}
	for (uint64_t g = 1; g <= c->A; g++) {
		v_group_blocks(h, g, c->tmp);
		for (uint32_t i = 0; i < h->ranges; i++)
			c->last[c->tmp[i]] = g;
	}
	v_group_blocks(h, c->A + 1, c->infl);
	c->res->inflight_size = h->ranges;
	return EX_OK;
}

/* A block whose checksum fails: torn if some sectors are recognised, else corrupt. */
static void judge_bad_checksum(struct vcheck *c, const char *blk, uint64_t b)
{
	struct vresult *res = c->res;
	char d[160];
	int known = torn_desc(c->h, blk, b, d, sizeof(d));
	if (known) {
		c->status[b] = ST_TORN;
		res->torn++;
		add_example(res, b, "torn: %s", d);
		return;
	}
	c->status[b] = ST_CORRUPT;
	res->corrupt++;
	bool zero = true;
	for (uint32_t k = 0; k < c->h->bsize && zero; k++)
		zero = blk[k] == 0;
	add_example(res, b, "corrupt: %s", zero ? "all zeros" : "not a block of this run");
}

/* A whole block of this run: is its version the expected one, an older one
 * an acknowledged group overwrote (lost), or none this block could hold? */
static void judge_version(struct vcheck *c, uint64_t b, uint64_t v, bool in_flight)
{
	struct vresult *res = c->res;
	uint64_t A = c->A;
	if (v == c->last[b] || (in_flight && v == A + 1)) {
		c->status[b] = ST_OK;
		res->ok++;
		if (in_flight && v == A + 1)
			res->inflight_new++;
		else if (in_flight)
			res->inflight_old++;
	} else if (v < c->last[b] && group_wrote(c->h, v, b, c->tmp)) {
		c->status[b] = ST_LOST;
		res->lost++;
		if (in_flight)
			res->inflight_old++;
		add_example(res, b, "lost: shows group %llu, but acknowledged group %llu wrote it",
			    (unsigned long long)v, (unsigned long long)c->last[b]);
	} else {
		c->status[b] = ST_CORRUPT;
		res->corrupt++;
		add_example(res, b, "corrupt: shows group %llu, which %s", (unsigned long long)v,
			    v > A + 1 ? "was never started (state file behind?)" : "never wrote this block");
	}
}

/* One block read from the data file. */
static void judge_block(struct vcheck *c, const char *blk, uint64_t b)
{
	const struct vstate_hdr *h = c->h;
	bool in_flight = false;
	for (uint32_t i = 0; i < h->ranges; i++)
		in_flight |= c->infl[i] == b;
	uint64_t sum;
	memcpy(&sum, blk + h->bsize - 8, 8);
	if (sum != XXH3_64bits_withSeed(blk, h->bsize - 8, h->run_id)) {
		judge_bad_checksum(c, blk, b);
		return;
	}
	struct sect_hdr sh;
	memcpy(&sh, blk, sizeof(sh));
	if (sh.magic != V_MAGIC || sh.run != h->run_id || sh.block != b) {
		c->status[b] = ST_CORRUPT;
		c->res->corrupt++;
		if (sh.magic == V_MAGIC && sh.run == h->run_id)
			add_example(c->res, b, "corrupt: holds block %llu's data (group %llu): a misdirected write",
				    (unsigned long long)sh.block, (unsigned long long)sh.group);
		else
			add_example(c->res, b, "corrupt: a valid block of another run");
		return;
	}
	judge_version(c, b, sh.group, in_flight);
}

/* Read the data file a chunk at a time and judge every block. */
static int check_blocks(struct vcheck *c)
{
	int fd = open(c->data, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		cli_warn("%s: %s", c->data, strerror(errno));
		return EX_ERROR;
	}
	uint32_t bsize = c->h->bsize;
	uint64_t done_bytes = 0, total = c->N * bsize;
	for (uint64_t b = 0; b < c->N;) {
		size_t want = total - done_bytes < c->chunk ? (size_t)(total - done_bytes) : c->chunk;
		int r = read_full(fd, c->buf, want, (off_t)done_bytes);
		if (r <= 0) {
			if (r < 0)
				cli_warn("reading %s: %s", c->data, strerror(-r));
			else
				cli_warn("%s is shorter than the %llu blocks the state file describes",
					 c->data, (unsigned long long)c->N);
			close(fd);
			return EX_ERROR;
		}
		for (size_t off = 0; off < want; off += bsize, b++)
			judge_block(c, c->buf + off, b);
		done_bytes += want;
	}
	close(fd);
	return EX_OK;
}

/* Half-applied groups: an acknowledged one with a lost block next to a
 * block of the same group that made it (each group counted once), and the
 * one in flight if some of its blocks are new and some old. */
static void check_half_applied(struct vcheck *c)
{
	const struct vstate_hdr *h = c->h;
	struct vresult *res = c->res;
	uint64_t *counted = NULL;
	size_t ncounted = 0, capc = 0;
	for (uint64_t b = 0; b < c->N; b++) {
		if (c->status[b] != ST_LOST)
			continue;
		uint64_t g = c->last[b];
		bool seen = false;
		for (size_t k = 0; k < ncounted && !seen; k++)
			seen = counted[k] == g;
		if (seen)
			continue;
		v_group_blocks(h, g, c->tmp);
		bool some_ok = false;
		for (uint32_t i = 0; i < h->ranges; i++)
			some_ok |= c->last[c->tmp[i]] == g && c->status[c->tmp[i]] == ST_OK;
		if (ncounted == capc) {
			capc = capc ? 2 * capc : 16;
			uint64_t *nc = realloc(counted, capc * sizeof(uint64_t));
			if (!nc)
				break;
			counted = nc;
		}
		counted[ncounted++] = g;
		if (some_ok) {
			res->half++;
			add_example(res, b, "group %llu (acknowledged) is half-applied: this block lost it, "
					    "others of the group have it", (unsigned long long)g);
		}
	}
	free(counted);
	if (res->inflight_new && res->inflight_old) {
		res->half++;
		add_example(res, c->infl[0], "group %llu (in flight at the crash) is half-applied: %llu of "
					     "%u blocks new", (unsigned long long)(c->A + 1),
			    (unsigned long long)res->inflight_new, h->ranges);
	}
}

int v_check(const struct vopts *o, struct vresult *res)
{
	memset(res, 0, sizeof(*res));
	int rc = state_load(o->state, &res->hdr, &res->acked);
	if (rc)
		return rc;
	char data[PATH_MAX + 64], logp[PATH_MAX + 64];
	data_paths(o, data, logp, sizeof(data));
	struct vcheck c = {.h = &res->hdr, .res = res, .data = data, .N = res->hdr.nblocks, .A = res->acked};
	rc = check_data_file(c.h, data);
	if (rc == EX_OK && c.h->mode == VM_ATOMIO)
		rc = check_recover(o, logp, res);
	if (rc == EX_OK)
		rc = check_expect(&c);
	if (rc == EX_OK)
		rc = check_blocks(&c);
	if (rc == EX_OK)
		check_half_applied(&c);
	check_free(&c);
	if (rc != EX_OK)
		return rc;
	return res->torn || res->lost || res->corrupt || res->half ? EX_FOUND : EX_OK;
}

static const char *mode_name(uint32_t m)
{
	return m == VM_ATOMIO ? "atomio groups" : m == VM_RAW ? "plain writes (--raw)" : "RWF_ATOMIC (--kernel)";
}

void v_print(const struct vopts *o, const struct vresult *r, bool json)
{
	const struct vstate_hdr *h = &r->hdr;
	bool pass = !(r->torn || r->lost || r->corrupt || r->half);
	const char *infl = r->inflight_new == 0 ? "not applied"
			   : r->inflight_old == 0 ? "applied whole"
						  : "HALF-APPLIED";
	if (json) {
		struct json j;
		json_init(&j, stdout);
		json_obj(&j, NULL);
		json_str(&j, "target", o->dir);
		json_str(&j, "state", o->state);
		json_str(&j, "mode", h->mode == VM_ATOMIO ? "atomio" : h->mode == VM_RAW ? "raw" : "kernel");
		json_uint(&j, "block_size", h->bsize);
		json_uint(&j, "blocks", h->nblocks);
		json_uint(&j, "ranges_per_group", h->ranges);
		json_uint(&j, "acknowledged_groups", r->acked);
		if (h->mode == VM_ATOMIO)
			json_uint(&j, "recovered_groups", r->recovered);
		json_obj(&j, "in_flight_group");
		json_uint(&j, "group", r->acked + 1);
		json_uint(&j, "blocks_new", r->inflight_new);
		json_uint(&j, "blocks_old", r->inflight_old);
		json_str(&j, "status", infl);
		json_end_obj(&j);
		json_uint(&j, "ok", r->ok);
		json_uint(&j, "torn", r->torn);
		json_uint(&j, "lost", r->lost);
		json_uint(&j, "corrupt", r->corrupt);
		json_uint(&j, "half_applied_groups", r->half);
		json_bool(&j, "pass", pass);
		json_arr(&j, "examples");
		for (unsigned i = 0; i < r->nex; i++) {
			json_obj(&j, NULL);
			json_uint(&j, "block", r->ex[i].block);
			json_str(&j, "problem", r->ex[i].what);
			json_end_obj(&j);
		}
		json_end_arr(&j);
		json_end_obj(&j);
		json_finish(&j);
		return;
	}
	printf("target      %s: %s, %llu blocks of %u bytes, %u per group\n", o->dir, mode_name(h->mode),
	       (unsigned long long)h->nblocks, h->bsize, h->ranges);
	printf("state       %s: %llu groups acknowledged\n", o->state, (unsigned long long)r->acked);
	if (h->mode == VM_ATOMIO)
		printf("recovery    replayed %llu committed groups from the log\n",
		       (unsigned long long)r->recovered);
	printf("in flight   group %llu: %s (%llu of %u blocks new)\n", (unsigned long long)(r->acked + 1),
	       infl, (unsigned long long)r->inflight_new, h->ranges);
	printf("blocks      %llu ok, %llu torn, %llu lost, %llu corrupt; %llu half-applied groups\n",
	       (unsigned long long)r->ok, (unsigned long long)r->torn, (unsigned long long)r->lost,
	       (unsigned long long)r->corrupt, (unsigned long long)r->half);
	for (unsigned i = 0; i < r->nex; i++)
		printf("  block %llu: %s\n", (unsigned long long)r->ex[i].block, r->ex[i].what);
	if (pass)
		printf("PASS: no torn block, no lost acknowledged write, no half-applied group\n");
	else
		printf("FAIL: %llu torn, %llu lost, %llu corrupt, %llu half-applied groups\n",
		       (unsigned long long)r->torn, (unsigned long long)r->lost, (unsigned long long)r->corrupt,
		       (unsigned long long)r->half);
}
