/* Recovery that lets no one in (issue 8): between a crash and recovery, the
 * data files are swapped for symlinks, renamed over, replaced by a FIFO, a
 * device, a socket or a directory, deleted, hard-linked, reached through a
 * swapped directory; the log is made writable by others or given away; a
 * crafted record points 2^62 bytes past a file's end; a catalog path holds
 * "..".  In each case atomio_open gives the documented error, names the file,
 * and replays nothing into ANY file; a race that swaps the file between the
 * identity check and the write cannot redirect the bytes. */
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#include "model.h"
#include "sys.h"
#include "support/logpatch.h"

static char dir[8192]; /* the current case's directory */
static char err[1024];

static char *P(const char *name)
{
	static char bufs[8][8400];
	static int i;
	char *b = bufs[i++ % 8];
	snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
	return b;
}

static void new_case(const char *name)
{
	snprintf(dir, sizeof(dir), "%s/%s", t_dir(), name);
	CHECK_OK(mkdir(dir, 0700));
	CHECK_OK(mkdir(P("sub"), 0700));
	printf("--- %s\n", name);
}

/* Two committed groups over sub/a and b, left in the log by a crash. */
static void crash_child(void *arg)
{
	(void)arg;
	struct atomio_options o = t_opts(1 << 20);
	atomio *st;
	CHECK_OK(atomio_open(P("log"), &o, &st));
	int a = atomio_file_open(st, P("sub/a"), O_CREAT, 0644);
	int b = atomio_file_open(st, P("b"), O_CREAT, 0644);
	CHECK(a == 0 && b == 1);
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, b, "bbbb", 4, 0));
	CHECK_OK(atomio_tx_write(tx, a, "aaaa", 4, 100));
	CHECK_OK(atomio_tx_commit(tx));
	CHECK_EQ(atomio_pwrite(st, b, "BB", 2, 4096), 2);
}

static void setup(void)
{
	CHECK_EQ(lp_crash_child(crash_child, NULL), 0);
	/* as if no home write had reached the disk: any replay shows */
	CHECK_OK(truncate(P("sub/a"), 0));
	CHECK_OK(truncate(P("b"), 0));
}

static int open_store(uint32_t flags)
{
	atomio *st;
	err[0] = 0;
	struct atomio_options o = {.flags = flags, .errbuf = err, .errbuf_size = sizeof(err)};
	int r = atomio_open(P("log"), &o, &st);
	printf("atomio_open: %d (%s)%s%s\n", r, atomio_strerror(r), err[0] ? ": " : "", err);
	if (r == 0)
		CHECK_OK(atomio_close(st));
	return r;
}

static off_t fsize(const char *p)
{
	struct stat sb;
	return lstat(p, &sb) == 0 ? sb.st_size : -1;
}

/* A file with known bytes, to show that nothing was written into it. */
static void decoy(const char *p)
{
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "decoy-decoy", 11), 11);
	close(fd);
}

static void check_decoy(const char *p)
{
	size_t n;
	uint8_t *d = t_slurp(p, &n);
	CHECK(d && n == 11 && !memcmp(d, "decoy-decoy", 11));
	free(d);
}

static void check_b_untouched(void) { CHECK_EQ(fsize(P("b")), 0); }

static void check_replayed(const char *a)
{
	size_t n;
	uint8_t *d = t_slurp(a, &n);
	CHECK(d && n == 104 && !memcmp(d + 100, "aaaa", 4));
	free(d);
	d = t_slurp(P("b"), &n);
	CHECK(d && n == 4098 && !memcmp(d, "bbbb", 4) && !memcmp(d + 4096, "BB", 2));
	free(d);
}

/* The refusal names the data file. */
static void check_named(const char *what)
{
	CHECK(strstr(err, what));
}

/* --- an ops backend that watches recovery ------------------------------------ */

static int opened_nonreg_rw;     /* an open for writing reached a non-regular file */
static int no_proc;              /* act as if /proc were not mounted */
static int swaps;                /* races staged */
static void (*on_open)(const char *path, int flags);

static int w_open(const char *path, int flags, mode_t mode)
{
	struct stat sb;
	if (!(flags & O_PATH) && (flags & O_ACCMODE) != O_RDONLY &&
	    ((flags & O_NOFOLLOW) ? lstat(path, &sb) : stat(path, &sb)) == 0 &&
	    !S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode))
		opened_nonreg_rw++;
	if (on_open)
		on_open(path, flags);
	if (no_proc && !strncmp(path, "/proc/", 6))
		return -ENOENT;
	return atomio_sys_linux.open(path, flags, mode);
}

static struct atomio_sysops watch;

static void install_watch(void)
{
	watch = atomio_sys_linux;
	watch.name = "watch";
	watch.open = w_open;
	atomio_sys_set(&watch);
}

/* Swap sub/a for a decoy at the moment recovery opens it a second time (or
 * reopens it through /proc): the race between check and write. */
static int swap_armed;
static void swap_on_reopen(const char *path, int flags)
{
	static int seen;
	if (!swap_armed || (flags & O_PATH))
		return;
	char target[8192] = "";
	if (!strncmp(path, "/proc/self/fd/", 14)) {
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = 0;
		path = target;
	}
	if (!strstr(path, "/sub/a"))
		return;
	(void)seen;
	swap_armed = 0;
	swaps++;
	decoy(P("decoy"));
	CHECK_OK(rename(P("decoy"), P("sub/a")));
}

/* Rewrite the log's first record (valid checksum, file id 70000) while
 * recovery opens the data files: between its check pass and its replay. */
static int edit_armed;
static void edit_log_on_open(const char *path, int flags)
{
	if (!edit_armed || !(flags & O_PATH))
		return;
	edit_armed = 0;
	struct lp l;
	CHECK_OK(lp_load(&l, P("log")));
	struct sb_disk *sb = lp_sb(&l);
	struct seg_disk *d = lp_seg(&l, sb, sb->head_off, 0);
	CHECK(d);
	d->file = 70000;
	CHECK_OK(lp_rec_seal(&l, sb, sb->head_off));
	/* in place: recovery holds the log open */
	int fd = open(P("log"), O_WRONLY);
	CHECK(fd >= 0 && pwrite(fd, l.b, l.n, 0) == (ssize_t)l.n);
	close(fd);
	lp_free(&l);
}

/* Open, replay, commit "G2" over sub/a and crash. */
static void crash_child2(void *arg)
{
	(void)arg;
	struct atomio_options o = {0};
	atomio *st;
	int r = atomio_open(P("log"), &o, &st);
	if (r == ATOMIO_ECORRUPT)
		_exit(2); /* refused: nothing committed, nothing to lose */
	CHECK_OK(r);
	int a = atomio_file_open(st, P("sub/a"), 0, 0);
	CHECK_EQ(a, 0);
	int c = atomio_file_open(st, P("c"), O_CREAT, 0644); /* a catalog write */
	CHECK_EQ(c, 2);
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, a, "G2G2", 4, 100));
	CHECK_OK(atomio_tx_write(tx, c, "cc", 2, 0));
	CHECK_OK(atomio_tx_commit(tx));
}

int main(void)
{
	t_dir();
	alarm(60); /* a FIFO or device must never make recovery hang */
	install_watch();

	/* 0. baseline: an untouched store replays both groups */
	new_case("baseline");
	setup();
	CHECK_OK(open_store(0));
	check_replayed(P("sub/a"));

	/* 1. data file swapped for a symlink to another file */
	new_case("symlink");
	setup();
	decoy(P("other"));
	CHECK_OK(unlink(P("sub/a")));
	CHECK_OK(symlink(P("other"), P("sub/a")));
	CHECK_EQ(open_store(0), ATOMIO_EIDENTITY);
	check_named("sub/a");
	check_decoy(P("other"));
	check_b_untouched();
	/* ... even to the registered file itself, and even with FORCE_PATHS */
	CHECK_OK(unlink(P("sub/a")));
	CHECK_OK(symlink(P("other"), P("sub/a")));
	CHECK_EQ(open_store(ATOMIO_FORCE_PATHS), ATOMIO_EIDENTITY);
	check_decoy(P("other"));
	check_b_untouched();

	/* 2. renamed over by another file */
	new_case("renamed-over");
	setup();
	decoy(P("sub/new"));
	CHECK_OK(rename(P("sub/new"), P("sub/a")));
	CHECK_EQ(open_store(0), ATOMIO_EIDENTITY);
	check_named("sub/a");
	check_decoy(P("sub/a"));
	check_b_untouched();
	/* the operator's explicit choice replays into the new file */
	CHECK_OK(open_store(ATOMIO_FORCE_PATHS));
	check_replayed(P("sub/a"));

	/* 3. FIFO, device, socket, directory at the path */
	for (int kind = 0; kind < 4; kind++) {
		static const char *names[] = {"fifo", "device", "socket", "directory"};
		new_case(names[kind]);
		setup();
		CHECK_OK(unlink(P("sub/a")));
		int sfd = -1;
		if (kind == 0) {
			CHECK_OK(mkfifo(P("sub/a"), 0666));
		} else if (kind == 1) {
			/* /dev/null's numbers: a device whose open has no effect */
			if (mknod(P("sub/a"), S_IFCHR | 0666, makedev(1, 3)) < 0) {
				printf("mknod: %s: device case skipped\n", strerror(errno));
				continue;
			}
		} else if (kind == 2) {
			struct sockaddr_un sa = {.sun_family = AF_UNIX};
			if (strlen(P("sub/a")) >= sizeof(sa.sun_path)) {
				printf("socket path too long: case skipped\n");
				continue;
			}
			strcpy(sa.sun_path, P("sub/a"));
			sfd = socket(AF_UNIX, SOCK_STREAM, 0);
			CHECK(sfd >= 0);
			CHECK_OK(bind(sfd, (struct sockaddr *)&sa, sizeof(sa)));
		} else {
			CHECK_OK(mkdir(P("sub/a"), 0755));
		}
		opened_nonreg_rw = 0;
		CHECK_EQ(open_store(0), ATOMIO_EIDENTITY);
		check_named("sub/a");
		/* not even opened for writing: opening a device can act (a tape
		 * rewinds, a watchdog arms) */
		CHECK_EQ(opened_nonreg_rw, 0);
		check_b_untouched();
		CHECK_EQ(open_store(ATOMIO_FORCE_PATHS), ATOMIO_EIDENTITY);
		CHECK_EQ(opened_nonreg_rw, 0);
		check_b_untouched();
		if (sfd >= 0)
			close(sfd);
	}

	/* 4. deleted */
	new_case("deleted");
	setup();
	CHECK_OK(unlink(P("sub/a")));
	CHECK_EQ(open_store(0), ATOMIO_EIDENTITY);
	check_named("sub/a");
	check_b_untouched();
	CHECK(fsize(P("sub/a")) < 0); /* not recreated */

	/* 5. a directory component replaced: by a file, by a symlink to a
	 * directory holding another file of that name */
	new_case("dir-is-file");
	setup();
	CHECK_OK(rename(P("sub"), P("sub.old")));
	decoy(P("sub"));
	CHECK_EQ(open_store(0), ATOMIO_EIDENTITY);
	check_named("sub/a");
	check_decoy(P("sub"));
	check_b_untouched();

	new_case("dir-symlink");
	setup();
	CHECK_OK(rename(P("sub"), P("sub.old")));
	CHECK_OK(mkdir(P("evil"), 0755));
	decoy(P("evil/a"));
	CHECK_OK(symlink(P("evil"), P("sub")));
	CHECK_EQ(open_store(0), ATOMIO_EIDENTITY);
	check_named("sub/a");
	check_decoy(P("evil/a"));
	check_b_untouched();
	/* A symlink to the directory that still holds the registered file
	 * reaches the registered inode: that is the file the store was given,
	 * and recovery replays into it. */
	CHECK_OK(unlink(P("sub")));
	CHECK_OK(symlink(P("sub.old"), P("sub")));
	CHECK_OK(open_store(0));
	check_replayed(P("sub.old/a"));

	/* 6. hard links: another file linked in at the path is refused; a
	 * link to the registered inode is that file */
	new_case("hardlink");
	setup();
	decoy(P("secret"));
	CHECK_OK(link(P("sub/a"), P("a.keep")));
	CHECK_OK(unlink(P("sub/a")));
	CHECK_OK(link(P("secret"), P("sub/a")));
	CHECK_EQ(open_store(0), ATOMIO_EIDENTITY);
	check_decoy(P("secret"));
	check_b_untouched();
	CHECK_OK(unlink(P("sub/a")));
	CHECK_OK(link(P("a.keep"), P("sub/a")));
	CHECK_OK(open_store(0));
	check_replayed(P("a.keep"));

	/* 7. the log itself at a data file's path: never replayed into, even
	 * by an operator's FORCE_PATHS */
	new_case("log-as-data");
	setup();
	CHECK_OK(unlink(P("sub/a")));
	CHECK_OK(link(P("log"), P("sub/a")));
	struct lp before, after;
	CHECK_OK(lp_load(&before, P("log")));
	CHECK_EQ(open_store(ATOMIO_FORCE_PATHS), ATOMIO_EIDENTITY);
	CHECK_OK(lp_load(&after, P("log")));
	CHECK(before.n == after.n && !memcmp(before.b, after.b, before.n));
	lp_free(&before);
	lp_free(&after);
	check_b_untouched();
	/* ... nor registered as a data file, by its name or a hard link */
	new_case("register-log");
	{
		atomio *st;
		struct atomio_options o = t_opts(65536);
		CHECK_OK(atomio_open(P("log"), &o, &st));
		CHECK_OK(link(P("log"), P("loglink")));
		CHECK_EQ(atomio_file_open(st, P("log"), 0, 0), -EINVAL);
		CHECK_EQ(atomio_file_open(st, P("loglink"), 0, 0), -EINVAL);
		CHECK_OK(atomio_close(st));
	}

	/* 8. the log writable by others, or owned by another user */
	new_case("log-perms");
	setup();
	struct stat ls;
	CHECK_OK(stat(P("log"), &ls));
	CHECK_EQ(ls.st_mode & 07777, 0600);
	CHECK_OK(chmod(P("log"), 0666));
	CHECK_EQ(open_store(0), ATOMIO_EUNSAFE);
	check_named("log");
	check_b_untouched();
	CHECK_OK(chmod(P("log"), 0620));
	CHECK_EQ(open_store(0), ATOMIO_EUNSAFE);
	check_b_untouched();
	CHECK_OK(chmod(P("log"), 0644)); /* readable by others is fine */
	if (geteuid() == 0) {
		CHECK_OK(chown(P("log"), 65534, 65534));
		CHECK_OK(chmod(P("log"), 0600));
		CHECK_EQ(open_store(0), ATOMIO_EUNSAFE);
		check_b_untouched();
		CHECK_OK(chown(P("log"), 0, 0));
	} else {
		printf("not root: the other-owner case is skipped\n");
	}
	CHECK_OK(chmod(P("log"), 0666));
	CHECK_OK(open_store(ATOMIO_ALLOW_SHARED_LOG));
	check_replayed(P("sub/a"));
	/* a new log is 0600 whatever the umask */
	{
		mode_t um = umask(0);
		atomio *st;
		struct atomio_options o = t_opts(65536);
		CHECK_OK(atomio_open(P("log.new"), &o, &st));
		CHECK_OK(atomio_close(st));
		umask(um);
		CHECK_OK(stat(P("log.new"), &ls));
		CHECK_EQ(ls.st_mode & 07777, 0600);
	}

	/* 9. a crafted record (valid checksum) 2^62 bytes past a file's end,
	 * after a sound record into the other file: nothing replayed at all */
	const uint64_t fars[] = {(1ull << 62) + 4, (1ull << 62) - 2, UINT64_MAX - 1};
	for (unsigned i = 0; i < sizeof(fars) / sizeof(fars[0]); i++) {
		char name[32];
		snprintf(name, sizeof(name), "far%u", i);
		new_case(name);
		setup();
		struct lp l;
		CHECK_OK(lp_load(&l, P("log")));
		struct sb_disk *sb = lp_sb(&l);
		struct rec_hdr_disk *h = lp_rec(&l, sb, sb->head_off);
		uint64_t pos2 = lp_rec_next(sb, h, sb->head_off);
		struct seg_disk *d = lp_seg(&l, sb, pos2, 0);
		CHECK(d && d->len == 2);
		d->off = fars[i];
		CHECK_OK(lp_rec_seal(&l, sb, pos2));
		CHECK_OK(lp_store(&l, P("log")));
		lp_free(&l);
		CHECK_EQ(open_store(0), ATOMIO_ECORRUPT);
		CHECK_EQ(open_store(ATOMIO_FORCE_PATHS), ATOMIO_ECORRUPT);
		CHECK_EQ(fsize(P("sub/a")), 0);
		check_b_untouched();
	}

	/* 10. catalog paths that break the rules */
	static const struct {
		const char *path;
		uint16_t flags;
	} bad[] = {
		{"../a", CAT_F_RELATIVE}, {"sub/../../a", CAT_F_RELATIVE}, {"./sub/a", CAT_F_RELATIVE},
		{"sub//a", CAT_F_RELATIVE}, {"sub/a/", CAT_F_RELATIVE},    {"/sub/a", CAT_F_RELATIVE},
		{"sub/a", 0},               {"/etc/../a", 0},              {"/", 0},
		{"..", CAT_F_RELATIVE},     {".", CAT_F_RELATIVE},
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char name[32];
		snprintf(name, sizeof(name), "path%u", i);
		new_case(name);
		setup();
		struct lp l;
		CHECK_OK(lp_load(&l, P("log")));
		struct sb_disk *sb = lp_sb(&l);
		struct cat_hdr_disk *c = lp_cat_cur(&l, sb);
		CHECK(c && c->count == 2);
		/* rebuild entry 0 (sub/a) with the bad path */
		struct cat_entry_disk *e0 = lp_cat_entry(c, 0), *e1 = lp_cat_entry(c, 1);
		struct cat_entry_disk ent1 = *e1;
		char p1[64];
		memcpy(p1, e1 + 1, ent1.path_len);
		size_t pl = strlen(bad[i].path);
		e0->path_len = (uint16_t)pl;
		e0->flags = bad[i].flags;
		memcpy(e0 + 1, bad[i].path, pl);
		uint8_t *q = (uint8_t *)e0 + align_up(CAT_ENTRY_HDR + pl, 8);
		memset((uint8_t *)(e0 + 1) + pl, 0, (size_t)(q - (uint8_t *)(e0 + 1)) - pl);
		memcpy(q, &ent1, sizeof(ent1));
		memcpy(q + CAT_ENTRY_HDR, p1, ent1.path_len);
		c->used = (uint64_t)(q - (uint8_t *)c) + align_up(CAT_ENTRY_HDR + ent1.path_len, 8);
		CHECK_OK(lp_cat_seal(sb, c));
		CHECK_OK(lp_store(&l, P("log")));
		lp_free(&l);
		CHECK_EQ(open_store(0), ATOMIO_EBADPATH);
		CHECK_EQ(open_store(ATOMIO_FORCE_PATHS), ATOMIO_EBADPATH);
		check_named(bad[i].path);
		CHECK_EQ(fsize(P("sub/a")), 0);
		check_b_untouched();
	}
	/* a caller's path with ".." is resolved at registration, then stored
	 * canonical (relative to the log's directory) */
	new_case("dotdot-register");
	{
		atomio *st;
		struct atomio_options o = t_opts(65536);
		CHECK_OK(atomio_open(P("log"), &o, &st));
		int f = atomio_file_open(st, P("sub/../sub/./x"), O_CREAT, 0644);
		CHECK(f >= 0);
		CHECK_OK(atomio_close(st));
		struct lp l;
		CHECK_OK(lp_load(&l, P("log")));
		struct cat_hdr_disk *c = lp_cat_cur(&l, lp_sb(&l));
		struct cat_entry_disk *e = lp_cat_entry(c, 0);
		CHECK(e && e->path_len == 5 && !memcmp(e + 1, "sub/x", 5) && (e->flags & CAT_F_RELATIVE));
		lp_free(&l);
	}

	/* 12. memory: a (sparse) log whose catalogs are 1 GiB each, the most
	 * the format allows, holding 64 bytes: opening it must not need
	 * memory in proportion to the catalog's room, only to its content */
#ifndef ATOMIO_SAN /* ASan reserves terabytes of address space: no RLIMIT_AS */
	new_case("huge-catalog");
	setup();
	{
		struct lp l;
		CHECK_OK(lp_load(&l, P("log")));
		struct sb_disk sb = *lp_sb(&l);
		const uint64_t cs = 1ull << 30;
		uint64_t area_off = align_up(CAT_OFF + 2 * cs, sb.block);
		int fd = open(P("log.big"), O_RDWR | O_CREAT | O_TRUNC, 0600);
		CHECK(fd >= 0);
		CHECK_OK(ftruncate(fd, (off_t)(area_off + sb.area_size)));
		for (int c = 0; c < 2; c++) {
			struct cat_hdr_disk *h = lp_cat(&l, &sb, c);
			CHECK(pwrite(fd, h, sb.cat_size, (off_t)(CAT_OFF + (uint64_t)c * cs)) == (ssize_t)sb.cat_size);
		}
		CHECK(pwrite(fd, l.b + sb.area_off, sb.area_size, (off_t)area_off) == (ssize_t)sb.area_size);
		sb.cat_size = cs;
		sb.area_off = area_off;
		lp_sb_seal(&sb);
		CHECK(pwrite(fd, &sb, sizeof(sb), (off_t)((sb.generation % 2) * SB_SLOT)) == (ssize_t)sizeof(sb));
		close(fd);
		lp_free(&l);
		t_shm_remove(P("log")); /* setup's child died with it open: replaced below */
		CHECK_OK(rename(P("log.big"), P("log")));
		fflush(NULL);
		pid_t p = fork();
		if (p == 0) {
			struct rlimit rl = {512ull << 20, 512ull << 20};
			CHECK_OK(setrlimit(RLIMIT_AS, &rl));
			int r = open_store(0);
			fflush(stdout);
			_exit(r == 0 ? 0 : 1);
		}
		int ws;
		CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws));
		CHECK_EQ(WEXITSTATUS(ws), 0);
		check_replayed(P("sub/a"));
		unlink(P("log"));
	}
#endif

	/* 13. the log itself changed (by someone ignoring its lock) between
	 * recovery's check pass and its replay: the replay checks every
	 * record again; nothing is written through an unchecked file id */
	new_case("log-changed");
	setup();
	on_open = edit_log_on_open;
	edit_armed = 1;
	CHECK_EQ(open_store(0), ATOMIO_ECORRUPT);
	on_open = NULL;
	CHECK_EQ(edit_armed, 0);
	CHECK_EQ(fsize(P("sub/a")), 0);
	check_b_untouched();

	/* 14. a generation at the top of its range: the next superblock or
	 * catalog write would wrap to 0 and lose to the stale copy, and with
	 * it groups acknowledged after the wrap.  Such a copy is invalid. */
	for (int cat = 0; cat < 2; cat++) {
		new_case(cat ? "catalog-generation" : "sb-generation");
		setup();
		struct lp l;
		CHECK_OK(lp_load(&l, P("log")));
		struct sb_disk *sb = lp_sb(&l);
		if (cat) {
			struct cat_hdr_disk *c = lp_cat_cur(&l, sb);
			c->generation = UINT64_MAX;
			CHECK_OK(lp_cat_seal(sb, c));
		} else {
			sb->generation = UINT64_MAX;
			lp_sb_seal(sb);
		}
		CHECK_OK(lp_store(&l, P("log")));
		lp_free(&l);
		/* a session opens it (recovers), commits, crashes */
		int cr = lp_crash_child(crash_child2, NULL);
		printf("a session on it: %s\n", cr == 0 ? "committed" : cr == 2 ? "refused (ECORRUPT)" : "failed");
		CHECK(cr == 0 || cr == 2);
		if (cr == 2)
			continue;
		CHECK_OK(truncate(P("sub/a"), 0));
		CHECK_OK(truncate(P("c"), 0));
		CHECK_OK(open_store(0));
		CHECK_EQ(fsize(P("c")), 2);
		size_t n;
		uint8_t *d = t_slurp(P("sub/a"), &n);
		CHECK(d && n == 104 && !memcmp(d + 100, "G2G2", 4)); /* acknowledged: kept */
		free(d);
	}

	/* 15. the log's own path holds (or a symlink there leads to) a device,
	 * a FIFO or a directory: refused without being opened for writing */
	new_case("log-not-regular");
	for (int kind = 0; kind < 3; kind++) {
		unlink(P("log"));
		rmdir(P("log"));
		if (kind == 0)
			CHECK_OK(symlink("/dev/null", P("log")));
		else if (kind == 1)
			CHECK_OK(mkfifo(P("log"), 0600));
		else
			CHECK_OK(mkdir(P("log"), 0700));
		opened_nonreg_rw = 0;
		int r = open_store(0);
		CHECK(r == ATOMIO_ENOTLOG || (kind == 2 && r == -EISDIR));
		CHECK_EQ(opened_nonreg_rw, 0);
		atomio *st;
		struct atomio_options o = {.flags = ATOMIO_CREATE};
		CHECK(atomio_open(P("log"), &o, &st) < 0);
		CHECK_EQ(opened_nonreg_rw, 0);
	}

	/* 11. the race: the file is swapped after recovery checked it and
	 * before it writes.  The bytes go to the file that was checked (or
	 * nowhere); never into the swapped-in one.  Through /proc/self/fd the
	 * checked inode itself is reopened; without /proc the path is
	 * reopened and checked again. */
	for (no_proc = 0; no_proc < 2; no_proc++) {
		new_case(no_proc ? "race-noproc" : "race");
		setup();
		on_open = swap_on_reopen;
		swap_armed = 1;
		swaps = 0;
		CHECK_OK(link(P("sub/a"), P("a.keep")));
		int r = open_store(0);
		on_open = NULL;
		CHECK_EQ(swaps, 1);
		CHECK_EQ(r, no_proc ? ATOMIO_EIDENTITY : 0);
		check_decoy(P("sub/a"));
		if (r == 0)
			check_replayed(P("a.keep"));
		else
			check_b_untouched();
	}
	return 0;
}
