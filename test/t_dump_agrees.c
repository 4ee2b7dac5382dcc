/* atomio dump and the library agree (issue 12, item 13): for a sound log and
 * for hostile variants of it (a slot or catalog generation at the 2^62 bound,
 * re-sealed; a checksummed record naming an unknown file; a flipped byte in
 * the current superblock slot, in the current catalog copy, in a record in
 * the middle; a truncated file; a catalog entry, of a file no record names,
 * whose path breaks the path rules or whose id another entry has, re-sealed;
 * a data file replaced by one that the filesystem gave the same inode
 * number), dump's verdict (--json: recovery .would_succeed and .groups) is
 * what atomio_open then does (success, and groups_recovered).  Dump used to
 * skip the generation bound the library enforces, and so called a slot valid
 * that the library refuses; it skipped the catalog's path rules and id
 * uniqueness, which the library checks before anything else; and it judged a
 * data file by inode alone, without the birth time the library also
 * compares, so it called a replaced file "present". */
#include <stdbool.h>
#include <stddef.h>
#include <sys/wait.h>

#include "support/logpatch.h"
#include "t.h"

#define NG 12

static void session(void *arg)
{
	(void)arg;
	struct atomio_options o = {0};
	o.flags = ATOMIO_NO_BG_CHECKPOINT | ATOMIO_NO_COMPRESS;
	atomio *st;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	int a = atomio_file_open(st, t_path("a"), 0, 0);
	int b = atomio_file_open(st, t_path("b"), O_CREAT, 0644);
	CHECK(a >= 0 && b >= 0);
	char buf[4096];
	for (int g = 1; g <= NG; g++) {
		memset(buf, 'a' + g, sizeof(buf));
		CHECK_EQ(atomio_pwrite(st, g % 2 ? a : b, buf, sizeof(buf), (off_t)g * 4096),
			 (ssize_t)sizeof(buf));
	}
}

static uint64_t rec_pos(const struct lp *l, const struct sb_disk *sb, int n)
{
	uint64_t pos = sb->head_off;
	for (int i = 1; i < n; i++)
		pos = lp_rec_next(sb, lp_rec(l, sb, pos), pos);
	return pos;
}

/* The catalog entry of file c. */
static struct cat_entry_disk *entry_c(struct cat_hdr_disk *c)
{
	for (uint32_t i = 0; i < c->count; i++) {
		struct cat_entry_disk *e = lp_cat_entry(c, i);
		CHECK(e != NULL);
		if (e->path_len == 1 && ((char *)(e + 1))[0] == 'c')
			return e;
	}
	CHECK(!"file c is in the catalog");
	return NULL;
}

static void mutate(struct lp *l, int m)
{
	struct sb_disk *sb = lp_sb(l);
	CHECK(sb != NULL);
	struct cat_hdr_disk *c = lp_cat_cur(l, sb);
	CHECK(c != NULL);
	uint64_t p;
	switch (m) {
	case 0: break;
	case 1: sb->generation = MAX_GENERATION; lp_sb_seal(sb); break;
	case 2: c->generation = MAX_GENERATION; CHECK_OK(lp_cat_seal(sb, c)); break;
	case 3:
		p = rec_pos(l, sb, 3);
		lp_seg(l, sb, p, 0)->file = 999;
		CHECK_OK(lp_rec_seal(l, sb, p));
		break;
	case 4: ((uint8_t *)sb)[40] ^= 0x04; break;
	case 5: ((uint8_t *)c)[CAT_HDR + 20] ^= 0x01; break;
	case 6:
		p = rec_pos(l, sb, 6);
		l->b[sb->area_off + p + REC_HDR + REC_DESC + 8] ^= 0x01;
		break;
	case 7: l->n = (size_t)(sb->area_off + sb->area_size / 2); break;
	case 8: /* the path of c (no record names it) becomes ".": it breaks the path rules */
		((char *)(entry_c(c) + 1))[0] = '.';
		CHECK_OK(lp_cat_seal(sb, c));
		break;
	case 9: /* c takes a's id: two files, one id */
		entry_c(c)->id = lp_cat_entry(c, 0)->id;
		CHECK_OK(lp_cat_seal(sb, c));
		break;
	}
}

int main(int argc, char **argv)
{
	(void)argc;
	const char *cmd = strstr(argv[0], "/san/") ? "build/san/atomio" : "build/atomio";
	if (access(cmd, X_OK) != 0)
		t_skip("%s is not built", cmd);
	struct atomio_options o = t_opts(1 << 20);
	atomio *st;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	CHECK(atomio_file_open(st, t_path("a"), O_CREAT, 0644) >= 0);
	CHECK(atomio_file_open(st, t_path("c"), O_CREAT, 0644) >= 0); /* no record names it */
	CHECK_OK(atomio_close(st));
	CHECK_EQ(lp_crash_child(session, NULL), 0);
	struct lp img, da, db;
	CHECK_OK(lp_load(&img, t_path("s.log")));
	CHECK_OK(lp_load(&da, t_path("a")));
	CHECK_OK(lp_load(&db, t_path("b")));
	static const char *names[] = {"sound", "slot generation 2^62", "catalog generation 2^62",
				      "record names an unknown file", "current slot byte flipped",
				      "current catalog byte flipped", "record 6 byte flipped",
				      "truncated", "catalog path breaks the rules", "catalog id twice",
				      "data file replaced, same inode"};
	bool reused = false;
	for (int m = 0; m < 11; m++) {
		struct lp l = {malloc(img.n), img.n};
		CHECK(l.b != NULL);
		memcpy(l.b, img.b, img.n);
		mutate(&l, m);
		CHECK_OK(lp_store(&l, t_path("s.log")));
		lp_free(&l);
		CHECK_OK(lp_store(&da, t_path("a")));
		CHECK_OK(lp_store(&db, t_path("b")));
		if (m == 10) {
			/* last: a replaced by a new file, the inode number reused where
			 * the filesystem hands it out again (ext4 does at once) */
			struct stat old, now;
			CHECK_OK(stat(t_path("a"), &old));
			for (int i = 0; i < 64 && !reused; i++) {
				CHECK_OK(unlink(t_path("a")));
				CHECK_OK(lp_store(&da, t_path("a")));
				CHECK_OK(stat(t_path("a"), &now));
				reused = now.st_ino == old.st_ino;
			}
		}

		char line[8192], out[1 << 16];
		snprintf(line, sizeof(line), "%s dump --json %s > %s 2>/dev/null", cmd, t_path("s.log"),
			 t_path("out"));
		int rc = system(line);
		CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) <= 3);
		FILE *f = fopen(t_path("out"), "r");
		CHECK(f != NULL);
		size_t n = fread(out, 1, sizeof(out) - 1, f);
		out[n] = 0;
		fclose(f);
		bool ok = strstr(out, "\"would_succeed\": true") != NULL;
		long groups = -1;
		const char *g = strstr(out, "\"groups\": ");
		if (g)
			groups = strtol(g + 10, NULL, 10);

		char err[512] = "";
		struct atomio_options oo = {.errbuf = err, .errbuf_size = sizeof(err)};
		int r = atomio_open(t_path("s.log"), &oo, &st);
		long rec = -1;
		if (r == 0) {
			struct atomio_stats s;
			CHECK_OK(atomio_stats(st, &s));
			rec = (long)s.groups_recovered;
			CHECK_OK(atomio_close(st));
		}
		fprintf(stderr, "%-30s dump: exit %d, %s, %ld groups; library: %s, %ld groups%s%s\n",
			names[m], WEXITSTATUS(rc), ok ? "would succeed" : "would fail", groups,
			r ? atomio_strerror(r) : "opened", rec, err[0] ? "; " : "", err);
		CHECK_EQ(ok, r == 0);
		if (ok)
			CHECK_EQ(groups, rec);
		if (m == 0)
			CHECK(ok && groups == NG);
	}
	lp_free(&img);
	lp_free(&da);
	lp_free(&db);
	if (!reused)
		fprintf(stderr, "(the filesystem gave the new data file another inode number: "
				"the birth time was not needed)\n");
	printf("ok: dump's verdict is the library's\n");
	return 0;
}
