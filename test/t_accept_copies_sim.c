/* ATOMIO_ACCEPT_COPIES under the crash simulator: a power cut at any moment
 * of a recovery that accepts a copy loses no acknowledged group.
 *
 * A writer commits four groups to /d/f (the first covers the whole file, so
 * that the log alone defines it), then the power goes with everything
 * landed: the log holds the groups, /d/f holds them too.  Then the file is
 * replaced by a copy as `cp f f.tmp; rm f; mv f.tmp f` does (nothing synced)
 * and the log recovered with ATOMIO_ACCEPT_COPIES.  At every crash point of
 * that recovery, every crash image (exhaustive up to 64 combinations, else
 * 16 samples) is recovered again and must be one of:
 *   - accepted (or replayed into the old file, when the rename did not land):
 *     /d/f holds the four groups;
 *   - refused with ATOMIO_EIDENTITY (a copy that lacks bytes): the log still
 *     holds the groups, and ATOMIO_FORCE_PATHS replays them into the file at
 *     the path (created empty first if none is there), which then holds them.
 * An accepted recovery that leaves /d/f without the groups fails the test:
 * so does a recovery that gives the log up before the copy and its
 * directory entry are durable (fails before f02c73b). */
#include "model.h"
#include "support/simfs.h"
#include "sys.h"

#define FSIZE 20000

static uint8_t want[FSIZE];
static uint64_t points, images, accepted, refused, forced_new;

static int recover_flags(unsigned flags, char *err, size_t len)
{
	err[0] = 0;
	struct atomio_options o = {.flags = flags, .errbuf = err, .errbuf_size = len};
	atomio *st;
	int r = atomio_open("/d/log", &o, &st);
	if (r == 0)
		r = atomio_close(st);
	return r;
}

static int check_image(struct simfs *img, const struct simfs_pick *pick, uint64_t idx, void *arg)
{
	const struct simfs_opinfo *op = arg;
	char err[1024];
	images++;
	int r = recover_flags(ATOMIO_ACCEPT_COPIES, err, sizeof(err));
	const char *how = "accepted";
	if (r == ATOMIO_EIDENTITY) {
		refused++;
		how = "refused, then forced";
		if (!simfs_exists(img, "/d/f")) {
			int fd = atomio_sys->open("/d/f", O_RDWR | O_CREAT | O_EXCL, 0644);
			CHECK(fd >= 0);
			CHECK_OK(atomio_sys->close(fd));
			forced_new++;
		}
		r = recover_flags(ATOMIO_FORCE_PATHS, err, sizeof(err));
	} else if (r == 0) {
		accepted++;
	}
	uint64_t where = 0;
	int c = r == 0 ? simfs_cmp(img, "/d/f", want, FSIZE, &where) : -1;
	if (r != 0 || c != 0) {
		char *p = simfs_pick_format(pick);
		fprintf(stderr, "crash point %llu (op %d on %s), image %llu (%s): %s: %s %s; /d/f %s at %llu "
				"(size %lld)\n",
			(unsigned long long)op->index, op->kind, op->path ? op->path : "-",
			(unsigned long long)idx, p, how, r ? atomio_strerror(r) : "ok", err,
			c < 0 ? "missing" : "differs", (unsigned long long)where,
			(long long)simfs_size(img, "/d/f"));
		free(p);
		return 1;
	}
	return 0;
}

static void at_point(struct simfs *fs, const struct simfs_opinfo *op, void *arg)
{
	(void)arg;
	points++;
	struct simfs_enum e = {.unit = 512, .exhaustive_cap = 64, .samples = 16, .seed = 1000003 * op->index + 7};
	if (simfs_foreach_image(fs, &e, check_image, (void *)op, NULL))
		exit(1);
}

static void put_copy(const uint8_t *d, size_t n)
{
	int fd = atomio_sys->open("/d/f.tmp", O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	/* cp writes in pieces */
	for (size_t off = 0; off < n; off += 8192) {
		size_t k = n - off < 8192 ? n - off : 8192;
		struct iovec iov = {(void *)(d + off), k};
		CHECK_EQ(atomio_sys->pwritev(fd, &iov, 1, (off_t)off, 0), (ssize_t)k);
	}
	CHECK_OK(atomio_sys->close(fd));
	CHECK_OK(atomio_sys->unlink("/d/f"));
	CHECK_OK(atomio_sys->rename_noreplace("/d/f.tmp", "/d/f"));
}

int main(void)
{
	struct simfs *fs = simfs_new(&(struct simfs_config){.seed = 11, .proc_fd = true});
	CHECK(fs);
	CHECK_OK(simfs_mkdir(fs, "/d"));
	simfs_install(fs);

	/* the writer, and its four groups */
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT; /* the groups stay in the log */
	atomio *st;
	CHECK_OK(atomio_open("/d/log", &o, &st));
	int f = atomio_file_open(st, "/d/f", O_CREAT, 0644);
	CHECK(f >= 0);
	uint8_t buf[FSIZE];
	t_fill(buf, FSIZE, 1, 0);
	CHECK_EQ(atomio_pwrite(st, f, buf, FSIZE, 0), FSIZE);
	memcpy(want, buf, FSIZE);
	t_fill(buf, 3000, 2, 0);
	CHECK_EQ(atomio_pwrite(st, f, buf, 3000, 5000), 3000);
	memcpy(want + 5000, buf, 3000);
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_truncate(tx, f, 15000));
	t_fill(buf, 3000, 3, 0);
	CHECK_OK(atomio_tx_write(tx, f, buf, 3000, 17000));
	CHECK_OK(atomio_tx_commit(tx));
	memset(want + 15000, 0, 2000);
	memcpy(want + 17000, buf, 3000);
	t_fill(buf, 100, 4, 0);
	CHECK_EQ(atomio_pwrite(st, f, buf, 100, 0), 100);
	memcpy(want, buf, 100);

	/* the power goes with everything landed */
	struct simfs_item items[4096];
	size_t n = simfs_pending(fs, items, 4096);
	CHECK(n < 4096);
	struct simfs_pick all = {.unit = 512, .n = (uint32_t)n, .f = calloc(n ? n : 1, sizeof(struct simfs_fate))};
	CHECK(all.f);
	for (size_t i = 0; i < n; i++)
		all.f[i].fate = SIMFS_KEEP;
	simfs_reset(fs, simfs_crash(fs, &all));
	free(all.f);
	atomio_close(st); /* its descriptors died with the machine */
	CHECK_EQ(simfs_cmp(fs, "/d/f", want, FSIZE, NULL), 0);

	/* cp f f.tmp; rm f; mv f.tmp f */
	put_copy(want, FSIZE);
	char err[1024];
	CHECK_EQ(recover_flags(0, err, sizeof(err)), ATOMIO_EIDENTITY); /* without the flag: refused */
	/* recovered with the flag, a power cut at each point */
	simfs_set_hook(fs, at_point, NULL);
	int r = recover_flags(ATOMIO_ACCEPT_COPIES, err, sizeof(err));
	simfs_set_hook(fs, NULL, NULL);
	if (r)
		fprintf(stderr, "recovery: %s: %s\n", atomio_strerror(r), err);
	CHECK_OK(r);
	/* and after it, with nothing pending landed */
	struct simfs *img = simfs_crash(fs, NULL);
	struct simfs *prev = simfs_enter(img);
	struct simfs_opinfo end = {.index = points};
	CHECK_OK(check_image(img, &(struct simfs_pick){.unit = 512}, 0, &end));
	simfs_enter(prev);
	simfs_free(img);
	simfs_uninstall();
	simfs_free(fs);
	printf("%llu crash points in a recovery that accepts a copy, %llu images recovered: %llu accepted "
	       "(or replayed into the old file), %llu refused then forced (%llu with the file created)\n",
	       (unsigned long long)points, (unsigned long long)images, (unsigned long long)accepted,
	       (unsigned long long)refused, (unsigned long long)forced_new);
	CHECK(points > 0 && accepted > 0 && refused > 0);
	return 0;
}
