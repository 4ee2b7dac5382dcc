/*
 * dump.c: `atomio dump LOG` -- the superblock slots, the catalog copies and
 * registered files, the live records (by the same validity rules recovery
 * uses, format.h VALIDITY AND RECOVERY), and why the valid tail ends where it
 * does.
 *
 * Read-only: the log is opened O_RDONLY and never locked.  For a store that
 * is open in another process (seen in /proc/locks, not by taking its lock, so
 * that a store starting meanwhile is never refused) the dump is a moment's
 * view read without its lock: records committed while it reads may be
 * missing, and a checkpoint during the read can make the log look shorter.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "atomio.h"
#include "cli.h"
#include "codec.h" /* the on-disk format and its rules: internal, read-only use */

#define CHUNK (1u << 20)

struct dopts {
	bool json, all_ranges;
	uint64_t limit;
};

struct dlog {
	int fd;
	const char *path;
	char dir[PATH_MAX];
	uint64_t size;
	struct sb_disk sb;
	bool sb_ok;
	uint64_t store_id;
	/* catalog: ids registered */
	uint8_t *known; /* bitmap by file id */
	char *buf;      /* CHUNK */
};

static int rd(struct dlog *d, uint64_t off, void *buf, size_t len)
{
	if (off > d->size || len > d->size - off)
		return 0;
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(d->fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		done += (size_t)n;
	}
	return 1;
}

/* Open the log read-only, as the library opens it: look first with O_PATH,
 * which opens no FIFO (an open that would block for ever) and no device (an
 * open that can act) found at the path or at the end of a symlink there; then
 * open the inode just looked at through /proc/self/fd, so that the path
 * cannot be swapped in between (without /proc: the path, never blocking, and
 * the same inode checked). */
static int open_log_ro(const char *path, struct stat *sb)
{
	int pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		cli_die(EX_ERROR, "%s: %s", cli_esc(path), strerror(errno));
	if (fstat(pfd, sb) < 0)
		cli_die(EX_ERROR, "%s: %s", cli_esc(path), strerror(errno));
	if (!S_ISREG(sb->st_mode))
		cli_die(EX_ERROR, "%s: not a regular file", cli_esc(path));
	char pp[64];
	snprintf(pp, sizeof(pp), "/proc/self/fd/%d", pfd);
	int fd = open(pp, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		cli_die(EX_ERROR, "%s: %s", cli_esc(path), strerror(errno));
	struct stat now;
	if (fstat(fd, &now) < 0 || now.st_dev != sb->st_dev || now.st_ino != sb->st_ino)
		cli_die(EX_ERROR, "%s: replaced while it was opened", cli_esc(path));
	close(pfd);
	return fd;
}

/* The holder of an flock on the log, from /proc/locks (0 = none seen). */
static long lock_holder(const struct stat *sb)
{
	FILE *f = fopen("/proc/locks", "re");
	if (!f)
		return -1;
	char line[256];
	long pid = 0;
	while (fgets(line, sizeof(line), f)) {
		char type[16];
		long p;
		unsigned ma, mi;
		unsigned long long ino;
		/* "1: FLOCK  ADVISORY  WRITE 1234 fe:00:123456 0 EOF" */
		if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%llu", type, &p, &ma, &mi, &ino) == 5 &&
		    !strcmp(type, "FLOCK") && ino == sb->st_ino && ma == major(sb->st_dev) &&
		    mi == minor(sb->st_dev)) {
			pid = p;
			break;
		}
	}
	fclose(f);
	return pid;
}

/* Recovery's rules for a superblock slot (codec.c); NULL when valid. */
static const char *sb_problem(const struct sb_disk *s, uint64_t file_size)
{
	const char *why;
	return codec_sb_check(s, file_size, &why) ? why : NULL;
}

/* codec_area_scan's reader: area offsets of the log. */
static int area_rd(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct dlog *d = ctx;
	int k = rd(d, d->sb.area_off + off, buf, len);
	return k < 0 ? k : k ? 0 : -EIO;
}

static void put_time(char *b, size_t n, uint64_t ns)
{
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;
	if (!ns || !gmtime_r(&t, &tm) || !strftime(b, n, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(b, n, "unknown");
}

/* --- records ------------------------------------------------------------------ */

struct drec {
	uint64_t pos;
	struct rec_hdr_disk h;
	struct seg_disk *segs;
	bool lz4_bad; /* LZ4 data that does not decompress to raw_len bytes */
};

#define ENDS_EARLY (-ENODATA) /* rec_rd: the file ends inside the record */

/* codec_csum_read's reader for the record at area offset pos */
struct rec_at {
	struct dlog *d;
	uint64_t off; /* file offset of the record */
};

static int rec_rd(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct rec_at *a = ctx;
	int k = rd(a->d, a->off + off, buf, len);
	return k < 0 ? k : k == 0 ? ENDS_EARLY : 0;
}

/* 1 = valid record (segs allocated), 0 = none, < 0 error; why says what is
 * there.  The rules are recovery's (codec.c); only the words are dump's. */
static int read_rec(struct dlog *d, uint64_t pos, uint64_t seq, struct drec *r, char *why, size_t wn)
{
	const struct sb_disk *sb = &d->sb;
	if (!codec_rec_fits(pos, sb->area_size)) {
		snprintf(why, wn, "end of the record area");
		return 0;
	}
	struct rec_hdr_disk h;
	int k = rd(d, sb->area_off + pos, &h, sizeof(h));
	if (k < 0)
		return k;
	if (k == 0) {
		snprintf(why, wn, "the file ends");
		return 0;
	}
	struct rec_expect x = {.seq = seq, .epoch = sb->epoch, .area_size = sb->area_size,
			       .version = sb->version};
	static const struct rec_hdr_disk zero;
	switch (codec_rec_check(&h, pos, &x)) {
	case REC_OK:
		break;
	case REC_NO_RECORD:
		snprintf(why, wn, "%s", memcmp(&h, &zero, sizeof(h)) ? "no record here (other bytes)"
								       : "no record here (zeros: never written since creation)");
		return 0;
	case REC_STALE:
		snprintf(why, wn, "a record of an earlier open (epoch %llu, seq %llu): stale",
			 (unsigned long long)h.epoch, (unsigned long long)h.seq);
		return 0;
	case REC_WRONG_SEQ:
		snprintf(why, wn, "a record with seq %llu where seq %llu was due: %s",
			 (unsigned long long)h.seq, (unsigned long long)seq,
			 h.seq < seq ? "stale, from an earlier lap of the log" : "out of order");
		return 0;
	case REC_BAD_FIELDS:
		snprintf(why, wn, "a record header with impossible fields (seq %llu): torn or damaged",
			 (unsigned long long)h.seq);
		return 0;
	}
	struct rec_at at = {d, sb->area_off + pos};
	uint64_t sum;
	k = codec_csum_read(d->store_id, codec_rec_sum_len(&h), offsetof(struct rec_hdr_disk, csum), rec_rd,
			    &at, d->buf, CHUNK, &sum);
	if (k == ENDS_EARLY) {
		snprintf(why, wn, "the file ends inside record seq %llu", (unsigned long long)seq);
		return 0;
	}
	if (k < 0)
		return k;
	if (sum != h.csum) {
		snprintf(why, wn, "record seq %llu (%llu bytes) fails its checksum: a write cut short (torn), "
				  "the normal end after a crash",
			 (unsigned long long)seq, (unsigned long long)h.rec_len);
		return 0;
	}
	r->lz4_bad = false;
	if (h.type == REC_TYPE_PAD) {
		/* space a process that died had reserved: nothing in it is read */
		r->segs = NULL;
		r->pos = pos;
		r->h = h;
		return 1;
	}
	if (h.flags & REC_F_LZ4) {
		/* As recovery: the whole record is in buf (rec_len <= COMP_MAX
		 * <= CHUNK), and must decompress to exactly raw_len bytes. */
		char *out = malloc(COMP_MAX);
		if (!out)
			return -ENOMEM;
		r->lz4_bad = !codec_rec_lz4_ok(d->buf, &h, out);
		free(out);
	}
	size_t dl = (size_t)h.nsegs * REC_DESC;
	r->segs = malloc(dl);
	if (!r->segs)
		return -ENOMEM;
	k = rd(d, sb->area_off + pos + REC_HDR, r->segs, dl);
	if (k <= 0) {
		free(r->segs);
		return k < 0 ? k : -EIO;
	}
	r->pos = pos;
	r->h = h;
	return 1;
}

/* Recovery's descriptor checks (codec.c); NULL when fine. */
static const char *seg_problem(const struct dlog *d, const struct drec *r, uint32_t *bad)
{
	for (uint32_t i = 0; i < r->h.nsegs; i++) {
		const struct seg_disk *s = &r->segs[i];
		*bad = i;
		bool known = s->file < MAX_FILES && (d->known[s->file / 8] & (1u << (s->file % 8)));
		const char *why = codec_seg_problem(s, r->h.raw_len, known);
		if (why)
			return why;
	}
	return NULL;
}

static void print_ranges(const struct drec *r, bool all)
{
	uint32_t n = r->h.nsegs, show = all || n <= 4 ? n : 3;
	printf("   ");
	for (uint32_t i = 0; i < show; i++) {
		const struct seg_disk *s = &r->segs[i];
		if (s->kind == SEG_WRITE)
			printf(" f%u:%llu+%llu", s->file, (unsigned long long)s->off, (unsigned long long)s->len);
		else
			printf(" f%u:size=%llu", s->file, (unsigned long long)s->off);
	}
	if (show < n)
		printf(" ... (%u more; --ranges shows all)", n - show);
	printf("\n");
}

/* --- main ---------------------------------------------------------------------------- */

static void help(void)
{
	printf("usage: atomio dump [--json] [--ranges] [--limit N] LOG\n\n"
	       "Print an atomio log: both superblock slots, both catalog copies and the\n"
	       "registered files (present, missing or replaced), every live record (sequence,\n"
	       "offset, size, ranges, checksum) by the rules recovery uses, and where and why\n"
	       "the valid tail ends.  The log is opened read-only and never locked; for a store\n"
	       "open in another process the output is a moment's view (records committed during\n"
	       "the dump may be missing; a checkpoint meanwhile can make the log look shorter).\n\n"
	       "  --json       one JSON object\n"
	       "  --ranges     list every range of every record (default: up to 4)\n"
	       "  --limit N    list at most N records (all are still checked)\n"
	       "  -h, --help   this help\n\n"
	       "Exit status: 0 the log is sound (recovery would succeed), 1 it is damaged or\n"
	       "recovery would refuse it (the reason is printed), 2 usage error, 3 cannot read\n"
	       "LOG or it is not an atomio log.\n");
}

/* One dump: what its sections hand on to each other. */
struct fent {
	uint32_t id;
	char path[2 * PATH_MAX + 2];
	const char *state;
};

struct dump {
	struct dopts o;
	struct dlog d;
	struct json j;
	int rc;
	const char *fatal;     /* recovery would refuse the log: why */
	char *cat[2];          /* the catalog copies */
	struct cat_hdr_disk ch[2];
	int ccur;              /* the current copy, -1 none */
	uint32_t nf;           /* files registered */
	struct fent *fe;
	uint8_t *touched;      /* bitmap by file id: named by a live record */
	uint64_t n, seq, data; /* live group records, the seq after them, their data bytes */
	uint64_t pads, steps;   /* pad records among them; records walked */
	char endwhy[600];      /* why the valid tail ends there */
	uint64_t end_pos;
	const char *bad_rec;   /* a checksummed record recovery refuses */
	int cat_damaged;       /* -1, or the catalog copy with our magic that fails its checks */
	int sb_damaged;        /* 0, or 1 + the slot written once but invalid */
	struct codec_found *found; /* every checksummed record in the area, once scanned */
	size_t nfound;
	bool scanned;
	uint64_t beyond, blo, bhi; /* valid records of this epoch after the valid tail */
};

static void scan_area(struct dump *x)
{
	if (x->scanned)
		return;
	int r = codec_area_scan(x->d.store_id, x->d.sb.version, x->d.sb.area_size, area_rd, &x->d, x->d.buf,
				CHUNK, &x->found, &x->nfound);
	if (r < 0)
		cli_die(EX_ERROR, "reading %s: %s", cli_esc(x->d.path), strerror(-r));
	x->scanned = true;
}

/* Open the log read-only and print what it is and who holds it. */
static void dump_open(struct dump *x)
{
	struct stat ls;
	x->d.fd = open_log_ro(x->d.path, &ls);
	x->d.size = (uint64_t)ls.st_size;
	char canon[PATH_MAX];
	if (!realpath(x->d.path, canon))
		cli_die(EX_ERROR, "%s: %s", cli_esc(x->d.path), strerror(errno));
	snprintf(x->d.dir, sizeof(x->d.dir), "%s", canon);
	char *sl = strrchr(x->d.dir, '/');
	if (sl == x->d.dir)
		x->d.dir[1] = 0;
	else if (sl)
		*sl = 0;
	long holder = lock_holder(&ls);
	x->d.buf = malloc(CHUNK);
	x->d.known = calloc(MAX_FILES / 8, 1);
	if (!x->d.buf || !x->d.known)
		cli_die(EX_ERROR, "out of memory");

	if (x->o.json) {
		json_init(&x->j, stdout);
		json_obj(&x->j, NULL);
		json_str(&x->j, "log", x->d.path);
		json_uint(&x->j, "size", x->d.size);
		json_bool(&x->j, "in_use", holder > 0);
		if (holder > 0)
			json_int(&x->j, "in_use_pid", holder);
		else
			json_null(&x->j, "in_use_pid");
	} else {
		printf("log         %s, %llu bytes\n", cli_esc(x->d.path), (unsigned long long)x->d.size);
		if (holder > 0)
			printf("in use      yes, by pid %ld: a moment's view, read without the store's lock\n",
			       holder);
		else
			printf("in use      no (no process holds its lock)\n");
	}
}

/* Recovery would refuse the log (x->fatal says why): say so; the dump ends. */
static bool dump_refused(struct dump *x)
{
	if (x->o.json) {
		json_obj(&x->j, "recovery");
		json_bool(&x->j, "would_succeed", false);
		json_str(&x->j, "problem", x->fatal);
		json_end_obj(&x->j);
		json_end_obj(&x->j);
		json_finish(&x->j);
	} else {
		printf("recovery    would fail: %s\n", x->fatal);
	}
	x->rc = EX_FOUND;
	return false;
}

/* Both slots as read (zeros where the file is too short); dies unless one
 * has the magic. */
static void sb_read(struct dump *x, struct sb_disk s[2])
{
	memset(s, 0, 2 * sizeof(s[0]));
	for (int i = 0; i < 2; i++) {
		char slot[SB_SLOT];
		int k = rd(&x->d, (uint64_t)i * SB_SLOT, slot, SB_SLOT);
		if (k < 0)
			cli_die(EX_ERROR, "reading %s: %s", cli_esc(x->d.path), strerror(-k));
		if (k)
			memcpy(&s[i], slot, sizeof(s[i]));
	}
}

static void sb_print(struct dump *x, const struct sb_disk s[2], const char *const why[2], int cur)
{
	if (x->o.json)
		json_arr(&x->j, "superblocks");
	for (int i = 0; i < 2; i++) {
		const struct sb_disk *b = &s[i];
		if (!x->o.json) {
			if (why[i])
				printf("superblock  slot %d: invalid: %s\n", i, why[i]);
			else
				printf("superblock  slot %d: valid%s, generation %llu, epoch %llu, head %llu "
				       "(seq %llu)\n", i, cur == i ? " (current)" : "",
				       (unsigned long long)b->generation, (unsigned long long)b->epoch,
				       (unsigned long long)b->head_off, (unsigned long long)b->head_seq);
			continue;
		}
		json_obj(&x->j, NULL);
		json_uint(&x->j, "slot", (unsigned)i);
		json_bool(&x->j, "valid", !why[i]);
		json_bool(&x->j, "current", cur == i);
		json_str(&x->j, "problem", why[i]);
		if (!why[i]) {
			char id[32], t[64];
			snprintf(id, sizeof(id), "%016llx", (unsigned long long)b->store_id);
			put_time(t, sizeof(t), b->ctime_ns);
			json_str(&x->j, "store_id", id);
			json_uint(&x->j, "version", b->version);
			json_uint(&x->j, "generation", b->generation);
			json_uint(&x->j, "epoch", b->epoch);
			json_uint(&x->j, "head_offset", b->head_off);
			json_uint(&x->j, "head_seq", b->head_seq);
			json_uint(&x->j, "area_offset", b->area_off);
			json_uint(&x->j, "area_size", b->area_size);
			json_uint(&x->j, "block", b->block);
			json_uint(&x->j, "catalog_offset", b->cat_off);
			json_uint(&x->j, "catalog_size", b->cat_size);
			json_str(&x->j, "created", t);
		}
		json_end_obj(&x->j);
	}
	if (x->o.json)
		json_end_arr(&x->j);
}

/* Why no slot can be used (cur < 0), in recovery's words. */
static const char *sb_none(struct dump *x, const struct sb_disk s[2], const char *const why[2], int cur)
{
	if (cur == -2)
		return "both superblock slots are valid but belong to two different stores";
	if (why[0] != codec_sb_short && why[1] != codec_sb_short)
		return "no valid superblock: the log cannot be recovered";
	static char m[256];
	const struct sb_disk *b = &s[why[0] == codec_sb_short ? 0 : 1];
	snprintf(m, sizeof(m), "the file is %llu bytes, shorter than its geometry says (%llu "
			       "bytes): truncated or cut short",
		 (unsigned long long)x->d.size, (unsigned long long)(b->area_off + b->area_size));
	return m;
}

/* One slot is damaged: as recovery, the records say whether it was the
 * newer one (codec_sb_fallback).  false: recovery refuses the log. */
static bool sb_damage(struct dump *x, int cur)
{
	x->sb_damaged = 2 - cur;
	scan_area(x);
	uint64_t ep, hs;
	int k = codec_sb_fallback(&x->d.sb, x->found, x->nfound, &ep, &hs);
	if (k < 0) {
		static char m[256];
		snprintf(m, sizeof(m), "superblock slot %d is damaged, and slot %d cannot reach newer "
				       "records in the log: recovery refuses (ATOMIO_ECORRUPT)",
			 1 - cur, cur);
		x->fatal = m;
		return dump_refused(x);
	}
	if (k == 1) {
		x->d.sb.epoch = ep;
		x->d.sb.head_off = 0;
		x->d.sb.head_seq = hs;
	}
	if (!x->o.json)
		printf("damage      superblock slot %d is damaged; %s\n", 1 - cur,
		       k == 1 ? "records of a later epoch show it was the newer one: recovery "
				"replays them from area offset 0"
			      : "the records show it was the older one");
	x->rc = EX_FOUND;
	return true;
}

/* Both superblock slots, and which is current.  false: none is (the dump ends). */
static bool dump_superblocks(struct dump *x)
{
	struct sb_disk s[2];
	sb_read(x, s);
	const char *const why[2] = {sb_problem(&s[0], x->d.size), sb_problem(&s[1], x->d.size)};
	int cur = codec_sb_current(&s[0], !why[0], &s[1], !why[1]);
	if (cur == -1 && memcmp(s[0].magic, SB_MAGIC, 8) && memcmp(s[1].magic, SB_MAGIC, 8))
		cli_die(EX_ERROR, "%s: not an atomio log (no superblock magic)", cli_esc(x->d.path));
	sb_print(x, s, why, cur);
	x->rc = EX_OK;
	if (cur < 0) {
		x->fatal = sb_none(x, s, why, cur);
		return dump_refused(x);
	}
	x->d.sb = s[cur];
	x->d.sb_ok = true;
	x->d.store_id = x->d.sb.store_id;
	if (codec_sb_damaged(&s[0], !why[0], &s[1], !why[1]) >= 0 && !sb_damage(x, cur))
		return false;
	if (!x->o.json) {
		char t[64];
		put_time(t, sizeof(t), x->d.sb.ctime_ns);
		printf("store       id %016llx, format %u, created %s\n", (unsigned long long)x->d.store_id,
		       x->d.sb.version, t);
		printf("geometry    log block %u; catalog 2 x %llu at %llu; record area %llu bytes at %llu\n",
		       x->d.sb.block, (unsigned long long)x->d.sb.cat_size, (unsigned long long)x->d.sb.cat_off,
		       (unsigned long long)x->d.sb.area_size, (unsigned long long)x->d.sb.area_off);
	}
	return true;
}

/* Both catalog copies, and which is current. */
static void dump_catalogs(struct dump *x)
{
	x->cat[0] = calloc(1, x->d.sb.cat_size);
	x->cat[1] = calloc(1, x->d.sb.cat_size);
	const char *cwhy[2] = {NULL, NULL};
	if (!x->cat[0] || !x->cat[1])
		cli_die(EX_ERROR, "out of memory");
	for (int i = 0; i < 2; i++) {
		int k = rd(&x->d, x->d.sb.cat_off + (uint64_t)i * x->d.sb.cat_size, x->cat[i], x->d.sb.cat_size);
		if (k < 0)
			cli_die(EX_ERROR, "reading %s: %s", cli_esc(x->d.path), strerror(-k));
		memcpy(&x->ch[i], x->cat[i], sizeof(x->ch[i]));
		if (!k)
			cwhy[i] = "beyond the end of the file";
		else
			cwhy[i] = codec_cat_problem(x->cat[i], x->d.store_id, x->d.sb.cat_size);
	}
	const bool cok[2] = {!cwhy[0], !cwhy[1]};
	x->ccur = codec_cat_current(x->ch, cok);
	x->cat_damaged = codec_cat_damaged(x->ch, cok);
	if (x->o.json)
		json_arr(&x->j, "catalogs");
	for (int i = 0; i < 2; i++) {
		if (x->o.json) {
			json_obj(&x->j, NULL);
			json_uint(&x->j, "copy", (unsigned)i);
			json_bool(&x->j, "valid", !cwhy[i]);
			json_bool(&x->j, "current", x->ccur == i);
			json_str(&x->j, "problem", cwhy[i]);
			if (!cwhy[i]) {
				json_uint(&x->j, "generation", x->ch[i].generation);
				json_uint(&x->j, "files", x->ch[i].count);
			}
			json_end_obj(&x->j);
		} else if (cwhy[i]) {
			printf("catalog     copy %d: invalid: %s\n", i, cwhy[i]);
		} else {
			printf("catalog     copy %d: valid%s, generation %llu, %u file%s\n", i,
			       x->ccur == i ? " (current)" : "", (unsigned long long)x->ch[i].generation, x->ch[i].count,
			       x->ch[i].count == 1 ? "" : "s");
		}
	}
	if (x->o.json)
		json_end_arr(&x->j);
	if (x->ccur < 0) {
		x->fatal = "no valid file catalog";
		x->rc = EX_FOUND;
	}
}

/* As recovery's catalog load: each id once, each path by the path rules
 * (codec.c), or the whole log is refused.  The first problem is kept. */
static void cat_entry_rules(struct dump *x, const struct cat_entry_disk *e, const char *rp, const char *rec)
{
	if (x->fatal)
		return;
	const char *pw = codec_path_problem(rp, e->path_len, e->flags);
	if (x->d.known[e->id / 8] & (1u << (e->id % 8))) {
		static char m[128];
		snprintf(m, sizeof(m), "file catalog entry is malformed: file id %u appears twice: "
				       "recovery refuses the log (ATOMIO_ECORRUPT)", e->id);
		x->fatal = m;
		x->rc = EX_FOUND;
	} else if (pw) {
		static char m[2 * PATH_MAX + 128];
		snprintf(m, sizeof(m), "catalog path '%s' %s, against the path rules: recovery "
				       "refuses the log (ATOMIO_EBADPATH)", cli_esc(rec), pw);
		x->fatal = m;
		x->rc = EX_FOUND;
	}
}

/* What is at a registered file's path now, by recovery's identity rule
 * (codec_fid_same): same inode, same device or filesystem id, same birth
 * time where both are known. */
static const char *file_state(const char *path, const struct cat_entry_disk *e)
{
	struct stat fs;
	if (lstat(path, &fs) < 0)
		return errno == ENOENT ? "missing" : "cannot be examined";
	if (S_ISLNK(fs.st_mode))
		return "now a symbolic link";
	if (!S_ISREG(fs.st_mode))
		return "not a regular file";
	struct fid now = {.dev = fs.st_dev, .ino = fs.st_ino};
	struct statfs sfs;
	if (statfs(path, &sfs) == 0) {
		uint32_t v[2];
		memcpy(v, &sfs.f_fsid, sizeof(v));
		now.fsid = (uint64_t)v[0] | (uint64_t)v[1] << 32;
	}
	struct statx stx;
	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BTIME, &stx) == 0 &&
	    (stx.stx_mask & STATX_BTIME) && stx.stx_btime.tv_sec >= 0) {
		now.btime_ns = (uint64_t)stx.stx_btime.tv_sec * 1000000000ull + stx.stx_btime.tv_nsec;
		now.flags |= CAT_ID_BTIME;
	}
	const struct fid rec_id = codec_cat_entry_fid(e);
	if (codec_fid_same(&rec_id, &now))
		return "present";
	if (now.ino == e->ino)
		return "replaced (the same inode number, another file born later)";
	return "replaced (another inode at this path)";
}

static void print_file(struct dump *x, const struct cat_entry_disk *e, const char *rec, const struct fent *f)
{
	if (x->o.json) {
		json_obj(&x->j, NULL);
		json_uint(&x->j, "id", e->id);
		json_str(&x->j, "recorded_path", rec);
		json_bool(&x->j, "relative", e->flags & CAT_F_RELATIVE);
		json_str(&x->j, "path", f->path);
		json_uint(&x->j, "inode", e->ino);
		json_str(&x->j, "state", f->state);
		json_end_obj(&x->j);
	} else {
		printf("  f%-4u %s%s  [%s]\n", e->id, cli_esc(rec),
		       e->flags & CAT_F_RELATIVE ? " (relative to the log's directory)" : "", f->state);
	}
}

/* The registered files, and whether recovery could use each. */
static void dump_files(struct dump *x)
{
	x->nf = x->ccur >= 0 ? x->ch[x->ccur].count : 0;
	x->fe = calloc(x->nf ? x->nf : 1, sizeof(*x->fe));
	if (!x->fe)
		cli_die(EX_ERROR, "out of memory");
	if (x->o.json)
		json_arr(&x->j, "files");
	else if (x->nf)
		printf("files\n");
	uint64_t pos = CAT_HDR;
	/* entry header size from the catalog itself (format.h) */
	const uint32_t eh = x->nf ? codec_cat_entry_hdr(&x->ch[x->ccur]) : 0;
	if (!eh && x->nf) {
		x->fatal = "catalog entry header size unknown";
		x->rc = EX_FOUND;
		x->nf = 0;
	}
	for (uint32_t i = 0; i < x->nf; i++) {
		struct cat_entry_disk e;
		const char *rp;
		const char *bad = codec_cat_entry(x->cat[x->ccur], x->ch[x->ccur].used, eh, &pos, &e, &rp);
		if (bad) {
			x->fatal = bad;
			x->rc = EX_FOUND;
			break;
		}
		char rec[PATH_MAX];
		memcpy(rec, rp, e.path_len);
		rec[e.path_len] = 0;
		cat_entry_rules(x, &e, rp, rec);
		x->d.known[e.id / 8] |= (uint8_t)(1u << (e.id % 8));
		struct fent *f = &x->fe[i];
		f->id = e.id;
		if (e.flags & CAT_F_RELATIVE)
			snprintf(f->path, sizeof(f->path), "%s%s%s", x->d.dir, strcmp(x->d.dir, "/") ? "/" : "", rec);
		else
			snprintf(f->path, sizeof(f->path), "%s", rec);
		f->state = file_state(f->path, &e);
		print_file(x, &e, rec, f);
	}
	if (x->o.json)
		json_end_arr(&x->j);
}

/* The record at p with sequence number x->seq, as recovery reads it: where
 * none is and p is a block boundary, the writer may have wrapped to offset 0.
 * 1 = a record, 0 = the valid tail ends (x->endwhy says why). */
static int next_rec(struct dump *x, uint64_t p, struct drec *r)
{
	char w[256];
	int k = read_rec(&x->d, p, x->seq, r, w, sizeof(w));
	if (k == 0 && p % x->d.sb.block == 0 && p != 0) {
		char w0[256];
		k = read_rec(&x->d, 0, x->seq, r, w0, sizeof(w0));
		if (k == 0)
			snprintf(x->endwhy, sizeof(x->endwhy), "%s (and at offset 0: %s)", w, w0);
	} else if (k == 0) {
		snprintf(x->endwhy, sizeof(x->endwhy), "%s", w);
	}
	if (k < 0)
		cli_die(EX_ERROR, "reading %s: %s", cli_esc(x->d.path), strerror(-k));
	return k;
}

static void json_rec(struct dump *x, const struct drec *r)
{
	struct json *j = &x->j;
	json_obj(j, NULL);
	json_uint(j, "seq", r->h.seq);
	if (r->h.type == REC_TYPE_PAD) {
		json_str(j, "type", "pad");
		json_uint(j, "offset", r->pos);
		json_uint(j, "length", r->h.rec_len);
		json_uint(j, "seqs", codec_rec_seqs(&r->h));
		json_bool(j, "checksum_ok", true);
		json_end_obj(j);
		return;
	}
	json_uint(j, "offset", r->pos);
	json_uint(j, "length", r->h.rec_len);
	json_uint(j, "data_length", r->h.data_len);
	json_bool(j, "compressed", r->h.flags & REC_F_LZ4);
	json_uint(j, "raw_data_length", r->h.raw_len);
	json_uint(j, "ranges", r->h.nsegs);
	json_bool(j, "last_in_write", r->h.flags & REC_F_LAST);
	json_bool(j, "checksum_ok", true);
	if (x->bad_rec)
		json_str(j, "problem", x->bad_rec);
	json_arr(j, "range_list");
	for (uint32_t i = 0; i < r->h.nsegs && (x->o.all_ranges || i < 64); i++) {
		const struct seg_disk *sg = &r->segs[i];
		json_obj(j, NULL);
		json_uint(j, "file", sg->file);
		json_str(j, "kind", sg->kind == SEG_WRITE ? "write" : sg->kind == SEG_SETSIZE ? "set_size" : "unknown");
		json_uint(j, sg->kind == SEG_SETSIZE ? "size" : "offset", sg->off);
		if (sg->kind == SEG_WRITE)
			json_uint(j, "length", sg->len);
		json_end_obj(j);
	}
	json_end_arr(j);
	json_end_obj(j);
}

static void print_rec(struct dump *x, const struct drec *r)
{
	if (x->o.json) {
		json_rec(x, r);
		return;
	}
	if (r->h.type == REC_TYPE_PAD) {
		printf("  seq %-8llu @%-10llu %7llu bytes, pad: %llu seq%s a process that died had "
		       "reserved, nothing replayed, checksum ok\n",
		       (unsigned long long)r->h.seq, (unsigned long long)r->pos, (unsigned long long)r->h.rec_len,
		       (unsigned long long)codec_rec_seqs(&r->h), codec_rec_seqs(&r->h) == 1 ? "" : "s");
		return;
	}
	char lz[64] = "";
	if (r->h.flags & REC_F_LZ4)
		snprintf(lz, sizeof(lz), " (LZ4, %llu raw)", (unsigned long long)r->h.raw_len);
	printf("  seq %-8llu @%-10llu %7llu bytes, %u range%s, %llu data%s%s, checksum ok\n",
	       (unsigned long long)r->h.seq, (unsigned long long)r->pos, (unsigned long long)r->h.rec_len,
	       r->h.nsegs, r->h.nsegs == 1 ? "" : "s", (unsigned long long)r->h.data_len, lz,
	       r->h.flags & REC_F_LAST ? ", ends a log write" : "");
	print_ranges(r, x->o.all_ranges);
}

/* A checksummed record recovery refuses (x->bad_rec): the log ends there,
 * and recovery replays nothing. */
static void rec_refused(struct dump *x, const struct drec *r, uint32_t bad_seg, uint32_t bad_file)
{
	unsigned long long seq = r->h.seq;
	if (r->lz4_bad)
		snprintf(x->endwhy, sizeof(x->endwhy), "record seq %llu %s: recovery refuses the whole log "
						 "(ATOMIO_ECORRUPT), replaying nothing", seq, x->bad_rec);
	else if (x->cat_damaged >= 0 && !strcmp(x->bad_rec, "names a file the store never registered"))
		snprintf(x->endwhy, sizeof(x->endwhy), "catalog copy %d fails its checksum (damaged, or "
						 "torn), and the other copy lacks file id %u that record seq "
						 "%llu names: recovery refuses the whole log (ATOMIO_ECORRUPT)",
			 x->cat_damaged, bad_file, seq);
	else
		snprintf(x->endwhy, sizeof(x->endwhy), "record seq %llu range %u %s: recovery refuses the "
						 "whole log (ATOMIO_ECORRUPT), replaying nothing",
			 seq, bad_seg, x->bad_rec);
	x->fatal = x->endwhy;
	x->rc = EX_FOUND;
	x->end_pos = r->pos;
}

/* As recovery: valid records of this epoch after the tail (a torn write in
 * flight, or damage)? */
static void check_beyond(struct dump *x)
{
	int suspect = x->scanned ? 1
				 : codec_stop_suspect(area_rd, &x->d, x->d.sb.area_size, x->d.sb.block,
						      x->d.sb.epoch, x->end_pos, x->seq);
	if (suspect < 0)
		cli_die(EX_ERROR, "reading %s: %s", cli_esc(x->d.path), strerror(-suspect));
	if (!suspect)
		return;
	scan_area(x);
	x->beyond = codec_count_beyond(x->found, x->nfound, x->d.sb.epoch, x->seq, &x->blo, &x->bhi);
	if (x->beyond && x->sb_damaged) {
		static char m[256];
		snprintf(m, sizeof(m), "superblock slot %d is damaged, and %llu valid records lie beyond "
				       "what the other slot reaches: recovery refuses (ATOMIO_ECORRUPT)",
			 x->sb_damaged - 1, (unsigned long long)x->beyond);
		x->fatal = m;
	}
	if (x->beyond)
		x->rc = EX_FOUND;
}

/* Every live record, by recovery's rules, and where and why the valid tail ends. */
static void dump_records(struct dump *x)
{
	uint64_t p = x->d.sb.head_off;
	x->seq = x->d.sb.head_seq;
	x->end_pos = p;
	x->touched = calloc(MAX_FILES / 8, 1);
	if (!x->touched)
		cli_die(EX_ERROR, "out of memory");
	if (x->o.json)
		json_arr(&x->j, "records");
	else
		printf("records     from area offset %llu, seq %llu\n", (unsigned long long)p,
		       (unsigned long long)x->seq);
	while (x->ccur >= 0) {
		struct drec r;
		if (!next_rec(x, p, &r)) {
			x->end_pos = p;
			break;
		}
		uint32_t bad_seg = 0;
		x->bad_rec = seg_problem(&x->d, &r, &bad_seg);
		uint32_t bad_file = x->bad_rec ? r.segs[bad_seg].file : 0;
		if (r.lz4_bad) {
			x->bad_rec = "holds LZ4 data that does not decompress to its raw length";
			bad_seg = 0;
		}
		if (x->n < x->o.limit || x->bad_rec)
			print_rec(x, &r);
		for (uint32_t i = 0; i < r.h.nsegs; i++)
			if (r.segs[i].file < MAX_FILES)
				x->touched[r.segs[i].file / 8] |= (uint8_t)(1u << (r.segs[i].file % 8));
		p = codec_rec_next(&r.h, r.pos, x->d.sb.block);
		free(r.segs);
		x->steps++;
		x->n += r.h.type == REC_TYPE_GROUP; /* groups; pads only move on */
		x->pads += r.h.type == REC_TYPE_PAD;
		x->seq += codec_rec_seqs(&r.h);
		x->data += r.h.raw_len; /* = data_len unless LZ4: the bytes replayed */
		if (x->bad_rec) {
			rec_refused(x, &r, bad_seg, bad_file);
			break;
		}
		if (x->steps > x->d.sb.area_size / REC_HDR) {
			x->fatal = "records loop: the log is corrupt";
			x->rc = EX_FOUND;
			break;
		}
	}
	if (x->o.json)
		json_end_arr(&x->j);
	if (!x->fatal && !x->bad_rec)
		check_beyond(x);
}

/* Would recovery succeed?  Then free what the dump held. */
static void dump_verdict(struct dump *x)
{
	/* files the live records need, that recovery could not use */
	const char *needs = NULL;
	for (uint32_t i = 0; i < x->nf && !x->fatal; i++)
		if ((x->touched[x->fe[i].id / 8] & (1u << (x->fe[i].id % 8))) && strcmp(x->fe[i].state, "present")) {
			static char msg[2 * PATH_MAX + 512];
			char cat[192] = "";
			if (x->cat_damaged >= 0 && !strncmp(x->fe[i].state, "replaced", 8))
				snprintf(cat, sizeof(cat), ", as catalog copy %d records it; catalog copy %d "
							   "fails its checksum (damaged, or torn) and may have "
							   "held this file's newer registration",
					 1 - x->cat_damaged, x->cat_damaged);
			snprintf(msg, sizeof(msg), "data file f%u (%s) is %s%s: recovery replays nothing "
						   "(ATOMIO_EIDENTITY; see atomio recover --force-paths, and, for a "
						   "copy that may hold every live group, --accept-copies, which "
						   "checks that and writes nothing)",
				 x->fe[i].id, cli_esc(x->fe[i].path), x->fe[i].state, cat);
			needs = msg;
			x->rc = EX_FOUND;
		}
	if (x->o.json) {
		json_obj(&x->j, "tail");
		json_uint(&x->j, "offset", x->end_pos);
		json_uint(&x->j, "next_seq", x->seq);
		json_str(&x->j, "reason", x->endwhy);
		json_end_obj(&x->j);
		json_obj(&x->j, "recovery");
		json_bool(&x->j, "would_succeed", !x->fatal && !needs);
		json_uint(&x->j, "groups", x->fatal ? 0 : x->n);
		json_uint(&x->j, "data_bytes", x->data);
		json_uint(&x->j, "records_beyond_tail", x->beyond);
		json_str(&x->j, "problem", x->fatal ? x->fatal : needs);
		json_end_obj(&x->j);
		json_end_obj(&x->j);
		json_finish(&x->j);
	} else {
		if (x->n > x->o.limit)
			printf("  ... %llu more records (--limit)\n", (unsigned long long)(x->n - x->o.limit));
		if (!x->bad_rec)
			printf("valid tail  ends at area offset %llu (next seq %llu): %s\n",
			       (unsigned long long)x->end_pos, (unsigned long long)x->seq, x->endwhy);
		if (x->beyond && !x->fatal)
			printf("damage?     %llu valid records of this epoch follow the valid tail (seq "
			       "%llu..%llu): recovery does not replay them; if they were acknowledged, "
			       "the log is damaged (a torn write in flight at a crash leaves the same)\n",
			       (unsigned long long)x->beyond, (unsigned long long)x->blo,
			       (unsigned long long)x->bhi);
		if (x->fatal)
			printf("recovery    would fail: %s\n", x->fatal);
		else if (needs)
			printf("recovery    would fail: %s\n", needs);
		else if (x->pads)
			printf("recovery    would replay %llu group%s (%llu data bytes), going past %llu pad "
			       "record%s\n", (unsigned long long)x->n, x->n == 1 ? "" : "s",
			       (unsigned long long)x->data, (unsigned long long)x->pads, x->pads == 1 ? "" : "s");
		else
			printf("recovery    would replay %llu group%s (%llu data bytes)\n", (unsigned long long)x->n,
			       x->n == 1 ? "" : "s", (unsigned long long)x->data);
	}
	free(x->found);
	free(x->touched);
	free(x->fe);
	free(x->cat[0]);
	free(x->cat[1]);
	free(x->d.buf);
	free(x->d.known);
	close(x->d.fd);
}

int cmd_dump(int argc, char **argv)
{
	static struct dump dump;
	struct dump *x = &dump;
	static const struct option lo[] = {
		{"json", no_argument, 0, 'j'},      {"ranges", no_argument, 0, 'r'},
		{"limit", required_argument, 0, 'l'}, {"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	x->o.limit = UINT64_MAX;
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (c) {
		case 'j': x->o.json = true; break;
		case 'r': x->o.all_ranges = true; break;
		case 'l': x->o.limit = cli_uint("--limit", optarg, 0, UINT64_MAX); break;
		case 'h': help(); return EX_OK;
		default: cli_bad_option(argv, c);
		}
	}
	if (optind != argc - 1)
		cli_usage(optind >= argc ? "which LOG?" : "one LOG only");
	x->d.path = argv[optind];
	dump_open(x);
	if (!dump_superblocks(x))
		return x->rc;
	dump_catalogs(x);
	dump_files(x);
	dump_records(x);
	dump_verdict(x);
	return x->rc;
}
