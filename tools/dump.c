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
	k = codec_csum_read(d->store_id, h.rec_len, offsetof(struct rec_hdr_disk, csum), rec_rd, &at,
			    d->buf, CHUNK, &sum);
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

int cmd_dump(int argc, char **argv)
{
	static const struct option lo[] = {
		{"json", no_argument, 0, 'j'},      {"ranges", no_argument, 0, 'r'},
		{"limit", required_argument, 0, 'l'}, {"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	struct dopts o = {.limit = UINT64_MAX};
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (c) {
		case 'j': o.json = true; break;
		case 'r': o.all_ranges = true; break;
		case 'l': o.limit = cli_uint("--limit", optarg, 0, UINT64_MAX); break;
		case 'h': help(); return EX_OK;
		default: cli_bad_option(argv, c);
		}
	}
	if (optind != argc - 1)
		cli_usage(optind >= argc ? "which LOG?" : "one LOG only");
	struct dlog d = {.path = argv[optind]};
	d.fd = open(d.path, O_RDONLY | O_CLOEXEC);
	if (d.fd < 0)
		cli_die(EX_ERROR, "%s: %s", d.path, strerror(errno));
	struct stat ls;
	if (fstat(d.fd, &ls) < 0 || !S_ISREG(ls.st_mode))
		cli_die(EX_ERROR, "%s: not a regular file", d.path);
	d.size = (uint64_t)ls.st_size;
	char canon[PATH_MAX];
	if (!realpath(d.path, canon))
		cli_die(EX_ERROR, "%s: %s", d.path, strerror(errno));
	snprintf(d.dir, sizeof(d.dir), "%s", canon);
	char *sl = strrchr(d.dir, '/');
	if (sl == d.dir)
		d.dir[1] = 0;
	else if (sl)
		*sl = 0;
	long holder = lock_holder(&ls);
	d.buf = malloc(CHUNK);
	d.known = calloc(MAX_FILES / 8, 1);
	if (!d.buf || !d.known)
		cli_die(EX_ERROR, "out of memory");

	struct json j;
	if (o.json) {
		json_init(&j, stdout);
		json_obj(&j, NULL);
		json_str(&j, "log", d.path);
		json_uint(&j, "size", d.size);
		json_bool(&j, "in_use", holder > 0);
		if (holder > 0)
			json_int(&j, "in_use_pid", holder);
		else
			json_null(&j, "in_use_pid");
	} else {
		printf("log         %s, %llu bytes\n", d.path, (unsigned long long)d.size);
		if (holder > 0)
			printf("in use      yes, by pid %ld: a moment's view, read without the store's lock\n",
			       holder);
		else
			printf("in use      no (no process holds its lock)\n");
	}

	/* superblocks */
	struct sb_disk s[2];
	memset(s, 0, sizeof(s));
	for (int i = 0; i < 2; i++) {
		char slot[SB_SLOT];
		int k = rd(&d, (uint64_t)i * SB_SLOT, slot, SB_SLOT);
		if (k < 0)
			cli_die(EX_ERROR, "reading %s: %s", d.path, strerror(-k));
		if (k)
			memcpy(&s[i], slot, sizeof(s[i]));
	}
	const char *why[2] = {sb_problem(&s[0], d.size), sb_problem(&s[1], d.size)};
	int cur = codec_sb_current(&s[0], !why[0], &s[1], !why[1]);
	if (cur == -1 && memcmp(s[0].magic, SB_MAGIC, 8) && memcmp(s[1].magic, SB_MAGIC, 8))
		cli_die(EX_ERROR, "%s: not an atomio log (no superblock magic)", d.path);
	if (o.json)
		json_arr(&j, "superblocks");
	for (int i = 0; i < 2; i++) {
		const struct sb_disk *b = &s[i];
		char t[64];
		put_time(t, sizeof(t), b->ctime_ns);
		if (o.json) {
			json_obj(&j, NULL);
			json_uint(&j, "slot", (unsigned)i);
			json_bool(&j, "valid", !why[i]);
			json_bool(&j, "current", cur == i);
			json_str(&j, "problem", why[i]);
			if (!why[i]) {
				char id[32];
				snprintf(id, sizeof(id), "%016llx", (unsigned long long)b->store_id);
				json_str(&j, "store_id", id);
				json_uint(&j, "version", b->version);
				json_uint(&j, "generation", b->generation);
				json_uint(&j, "epoch", b->epoch);
				json_uint(&j, "head_offset", b->head_off);
				json_uint(&j, "head_seq", b->head_seq);
				json_uint(&j, "area_offset", b->area_off);
				json_uint(&j, "area_size", b->area_size);
				json_uint(&j, "block", b->block);
				json_uint(&j, "catalog_offset", b->cat_off);
				json_uint(&j, "catalog_size", b->cat_size);
				json_str(&j, "created", t);
			}
			json_end_obj(&j);
		} else if (why[i]) {
			printf("superblock  slot %d: invalid: %s\n", i, why[i]);
		} else {
			printf("superblock  slot %d: valid%s, generation %llu, epoch %llu, head %llu (seq %llu)\n",
			       i, cur == i ? " (current)" : "", (unsigned long long)b->generation,
			       (unsigned long long)b->epoch, (unsigned long long)b->head_off,
			       (unsigned long long)b->head_seq);
		}
	}
	if (o.json)
		json_end_arr(&j);
	int rc = EX_OK;
	const char *fatal = NULL;
	if (cur == -2)
		fatal = "both superblock slots are valid but belong to two different stores";
	else if (cur < 0)
		fatal = "no valid superblock: the log cannot be recovered";
	if (fatal) {
		if (o.json) {
			json_obj(&j, "recovery");
			json_bool(&j, "would_succeed", false);
			json_str(&j, "problem", fatal);
			json_end_obj(&j);
			json_end_obj(&j);
			json_finish(&j);
		} else {
			printf("recovery    would fail: %s\n", fatal);
		}
		return EX_FOUND;
	}
	d.sb = s[cur];
	d.sb_ok = true;
	d.store_id = d.sb.store_id;
	if (!o.json) {
		char t[64];
		put_time(t, sizeof(t), d.sb.ctime_ns);
		printf("store       id %016llx, format %u, created %s\n", (unsigned long long)d.store_id,
		       d.sb.version, t);
		printf("geometry    log block %u; catalog 2 x %llu at %llu; record area %llu bytes at %llu\n",
		       d.sb.block, (unsigned long long)d.sb.cat_size, (unsigned long long)d.sb.cat_off,
		       (unsigned long long)d.sb.area_size, (unsigned long long)d.sb.area_off);
	}

	/* catalogs */
	char *cat[2] = {calloc(1, d.sb.cat_size), calloc(1, d.sb.cat_size)};
	struct cat_hdr_disk ch[2];
	const char *cwhy[2] = {NULL, NULL};
	if (!cat[0] || !cat[1])
		cli_die(EX_ERROR, "out of memory");
	for (int i = 0; i < 2; i++) {
		int k = rd(&d, d.sb.cat_off + (uint64_t)i * d.sb.cat_size, cat[i], d.sb.cat_size);
		if (k < 0)
			cli_die(EX_ERROR, "reading %s: %s", d.path, strerror(-k));
		memcpy(&ch[i], cat[i], sizeof(ch[i]));
		if (!k)
			cwhy[i] = "beyond the end of the file";
		else if ((cwhy[i] = codec_cat_hdr_problem(&ch[i], d.store_id, d.sb.cat_size)))
			;
		else if (fmt_csum(cat[i], ch[i].used, d.store_id, offsetof(struct cat_hdr_disk, csum)) != ch[i].csum)
			cwhy[i] = "checksum mismatch (torn or damaged)";
	}
	const bool cok[2] = {!cwhy[0], !cwhy[1]};
	int ccur = codec_cat_current(ch, cok);
	if (o.json)
		json_arr(&j, "catalogs");
	for (int i = 0; i < 2; i++) {
		if (o.json) {
			json_obj(&j, NULL);
			json_uint(&j, "copy", (unsigned)i);
			json_bool(&j, "valid", !cwhy[i]);
			json_bool(&j, "current", ccur == i);
			json_str(&j, "problem", cwhy[i]);
			if (!cwhy[i]) {
				json_uint(&j, "generation", ch[i].generation);
				json_uint(&j, "files", ch[i].count);
			}
			json_end_obj(&j);
		} else if (cwhy[i]) {
			printf("catalog     copy %d: invalid: %s\n", i, cwhy[i]);
		} else {
			printf("catalog     copy %d: valid%s, generation %llu, %u file%s\n", i,
			       ccur == i ? " (current)" : "", (unsigned long long)ch[i].generation, ch[i].count,
			       ch[i].count == 1 ? "" : "s");
		}
	}
	if (o.json)
		json_end_arr(&j);
	if (ccur < 0) {
		fatal = "no valid file catalog";
		rc = EX_FOUND;
	}

	/* files */
	struct fent {
		uint32_t id;
		char path[2 * PATH_MAX + 2];
		const char *state;
	};
	uint32_t nf = ccur >= 0 ? ch[ccur].count : 0;
	struct fent *fe = calloc(nf ? nf : 1, sizeof(*fe));
	if (!fe)
		cli_die(EX_ERROR, "out of memory");
	if (o.json)
		json_arr(&j, "files");
	else if (nf)
		printf("files\n");
	uint64_t pos = CAT_HDR;
	/* entry header size from the catalog itself (format.h) */
	const uint32_t eh = nf ? codec_cat_entry_hdr(&ch[ccur]) : 0;
	if (!eh && nf) {
		fatal = "catalog entry header size unknown";
		rc = EX_FOUND;
		nf = 0;
	}
	for (uint32_t i = 0; i < nf; i++) {
		struct cat_entry_disk e;
		const char *rp;
		const char *bad = codec_cat_entry(cat[ccur], ch[ccur].used, eh, &pos, &e, &rp);
		if (bad) {
			fatal = bad;
			rc = EX_FOUND;
			break;
		}
		char rec[PATH_MAX];
		memcpy(rec, rp, e.path_len);
		rec[e.path_len] = 0;
		d.known[e.id / 8] |= (uint8_t)(1u << (e.id % 8));
		fe[i].id = e.id;
		if (e.flags & CAT_F_RELATIVE)
			snprintf(fe[i].path, sizeof(fe[i].path), "%s%s%s", d.dir, strcmp(d.dir, "/") ? "/" : "", rec);
		else
			snprintf(fe[i].path, sizeof(fe[i].path), "%s", rec);
		/* Recovery's identity rule: same inode, and same device or filesystem id. */
		struct stat fs;
		const char *state;
		if (lstat(fe[i].path, &fs) < 0)
			state = errno == ENOENT ? "missing" : "cannot be examined";
		else if (S_ISLNK(fs.st_mode))
			state = "now a symbolic link";
		else if (!S_ISREG(fs.st_mode))
			state = "not a regular file";
		else {
			uint64_t fsid = 0;
			struct statfs sfs;
			if (statfs(fe[i].path, &sfs) == 0) {
				uint32_t v[2];
				memcpy(v, &sfs.f_fsid, sizeof(v));
				fsid = (uint64_t)v[0] | (uint64_t)v[1] << 32;
			}
			bool same = fs.st_ino == e.ino && (fs.st_dev == e.dev || (fsid && fsid == e.fsid));
			state = same ? "present" : "replaced (another inode at this path)";
		}
		fe[i].state = state;
		if (o.json) {
			json_obj(&j, NULL);
			json_uint(&j, "id", e.id);
			json_str(&j, "recorded_path", rec);
			json_bool(&j, "relative", e.flags & CAT_F_RELATIVE);
			json_str(&j, "path", fe[i].path);
			json_uint(&j, "inode", e.ino);
			json_str(&j, "state", state);
			json_end_obj(&j);
		} else {
			printf("  f%-4u %s%s  [%s]\n", e.id, rec,
			       e.flags & CAT_F_RELATIVE ? " (relative to the log's directory)" : "", state);
		}
	}
	if (o.json)
		json_end_arr(&j);

	/* records */
	uint64_t p = d.sb.head_off, seq = d.sb.head_seq, n = 0, data = 0;
	char endwhy[600] = "";
	uint64_t end_pos = p;
	uint8_t *touched = calloc(MAX_FILES / 8, 1);
	if (!touched)
		cli_die(EX_ERROR, "out of memory");
	if (o.json)
		json_arr(&j, "records");
	else
		printf("records     from area offset %llu, seq %llu\n", (unsigned long long)p,
		       (unsigned long long)seq);
	const char *bad_rec = NULL;
	uint32_t bad_seg = 0;
	while (ccur >= 0) {
		struct drec r;
		char w[256];
		int k = read_rec(&d, p, seq, &r, w, sizeof(w));
		if (k == 0 && p % d.sb.block == 0 && p != 0) {
			/* recovery also looks at offset 0: the writer wraps */
			char w0[256];
			k = read_rec(&d, 0, seq, &r, w0, sizeof(w0));
			if (k == 0)
				snprintf(endwhy, sizeof(endwhy), "%s (and at offset 0: %s)", w, w0);
		} else if (k == 0) {
			snprintf(endwhy, sizeof(endwhy), "%s", w);
		}
		if (k < 0)
			cli_die(EX_ERROR, "reading %s: %s", d.path, strerror(-k));
		if (k == 0) {
			end_pos = p;
			break;
		}
		bad_rec = seg_problem(&d, &r, &bad_seg);
		if (r.lz4_bad) {
			bad_rec = "holds LZ4 data that does not decompress to its raw length";
			bad_seg = 0;
		}
		if (n < o.limit || bad_rec) {
			if (o.json) {
				json_obj(&j, NULL);
				json_uint(&j, "seq", r.h.seq);
				json_uint(&j, "offset", r.pos);
				json_uint(&j, "length", r.h.rec_len);
				json_uint(&j, "data_length", r.h.data_len);
				json_bool(&j, "compressed", r.h.flags & REC_F_LZ4);
				json_uint(&j, "raw_data_length", r.h.raw_len);
				json_uint(&j, "ranges", r.h.nsegs);
				json_bool(&j, "last_in_write", r.h.flags & REC_F_LAST);
				json_bool(&j, "checksum_ok", true);
				if (bad_rec)
					json_str(&j, "problem", bad_rec);
				json_arr(&j, "range_list");
				for (uint32_t i = 0; i < r.h.nsegs && (o.all_ranges || i < 64); i++) {
					const struct seg_disk *sg = &r.segs[i];
					json_obj(&j, NULL);
					json_uint(&j, "file", sg->file);
					json_str(&j, "kind", sg->kind == SEG_WRITE ? "write" : sg->kind == SEG_SETSIZE ? "set_size" : "unknown");
					json_uint(&j, sg->kind == SEG_SETSIZE ? "size" : "offset", sg->off);
					if (sg->kind == SEG_WRITE)
						json_uint(&j, "length", sg->len);
					json_end_obj(&j);
				}
				json_end_arr(&j);
				json_end_obj(&j);
			} else {
				char lz[64] = "";
				if (r.h.flags & REC_F_LZ4)
					snprintf(lz, sizeof(lz), " (LZ4, %llu raw)", (unsigned long long)r.h.raw_len);
				printf("  seq %-8llu @%-10llu %7llu bytes, %u range%s, %llu data%s%s, checksum ok\n",
				       (unsigned long long)r.h.seq, (unsigned long long)r.pos,
				       (unsigned long long)r.h.rec_len, r.h.nsegs, r.h.nsegs == 1 ? "" : "s",
				       (unsigned long long)r.h.data_len, lz,
				       r.h.flags & REC_F_LAST ? ", ends a log write" : "");
				print_ranges(&r, o.all_ranges);
			}
		}
		for (uint32_t i = 0; i < r.h.nsegs; i++)
			if (r.segs[i].file < MAX_FILES)
				touched[r.segs[i].file / 8] |= (uint8_t)(1u << (r.segs[i].file % 8));
		p = codec_rec_next(&r.h, r.pos, d.sb.block);
		free(r.segs);
		n++;
		seq++;
		data += r.h.raw_len; /* = data_len unless LZ4: the bytes replayed */
		if (bad_rec) {
			snprintf(endwhy, sizeof(endwhy), "record seq %llu range %u %s: recovery refuses the "
							 "whole log (ATOMIO_ECORRUPT), replaying nothing",
				 (unsigned long long)r.h.seq, bad_seg, bad_rec);
			if (r.lz4_bad)
				snprintf(endwhy, sizeof(endwhy), "record seq %llu %s: recovery refuses the "
								 "whole log (ATOMIO_ECORRUPT), replaying nothing",
					 (unsigned long long)r.h.seq, bad_rec);
			fatal = endwhy;
			rc = EX_FOUND;
			end_pos = r.pos;
			break;
		}
		if (n > d.sb.area_size / (REC_HDR + REC_DESC)) {
			fatal = "records loop: the log is corrupt";
			rc = EX_FOUND;
			break;
		}
	}
	if (o.json)
		json_end_arr(&j);
	/* files the live records need, that recovery could not use */
	const char *needs = NULL;
	for (uint32_t i = 0; i < nf && !fatal; i++)
		if ((touched[fe[i].id / 8] & (1u << (fe[i].id % 8))) && strcmp(fe[i].state, "present")) {
			static char msg[2 * PATH_MAX + 256];
			snprintf(msg, sizeof(msg), "data file f%u (%s) is %s: recovery replays nothing "
						   "(ATOMIO_EIDENTITY; see atomio recover --force-paths)",
				 fe[i].id, fe[i].path, fe[i].state);
			needs = msg;
			rc = EX_FOUND;
		}
	if (o.json) {
		json_obj(&j, "tail");
		json_uint(&j, "offset", end_pos);
		json_uint(&j, "next_seq", seq);
		json_str(&j, "reason", endwhy);
		json_end_obj(&j);
		json_obj(&j, "recovery");
		json_bool(&j, "would_succeed", !fatal && !needs);
		json_uint(&j, "groups", fatal ? 0 : n);
		json_uint(&j, "data_bytes", data);
		json_str(&j, "problem", fatal ? fatal : needs);
		json_end_obj(&j);
		json_end_obj(&j);
		json_finish(&j);
	} else {
		if (n > o.limit)
			printf("  ... %llu more records (--limit)\n", (unsigned long long)(n - o.limit));
		if (!bad_rec)
			printf("valid tail  ends at area offset %llu (next seq %llu): %s\n",
			       (unsigned long long)end_pos, (unsigned long long)seq, endwhy);
		if (fatal)
			printf("recovery    would fail: %s\n", fatal);
		else if (needs)
			printf("recovery    would fail: %s\n", needs);
		else
			printf("recovery    would replay %llu group%s (%llu data bytes)\n", (unsigned long long)n,
			       n == 1 ? "" : "s", (unsigned long long)data);
	}
	free(touched);
	free(fe);
	free(cat[0]);
	free(cat[1]);
	free(d.buf);
	free(d.known);
	close(d.fd);
	return rc;
}
