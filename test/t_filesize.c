/* A write or size change beyond what the data file's filesystem allows
 * (ext4: 16 TiB, vfat: 4 GiB) must be refused before anything is logged.
 * Otherwise its record is durable, its home write fails with EFBIG, and every
 * later atomio_open replays it, fails the same way, and the store can never
 * be opened again. */
#include "t.h"
#include "support/logpatch.h"

static void child(void *arg)
{
	(void)arg;
	struct atomio_options o = t_opts(1 << 20);
	atomio *st;
	CHECK_OK(atomio_open(t_path("log2"), &o, &st));
	int f = atomio_file_open(st, t_path("f2"), O_CREAT, 0644);
	int g = atomio_file_open(st, t_path("g2"), O_CREAT, 0644);
	CHECK_EQ(atomio_pwrite(st, g, "first", 5, 0), 5);
	CHECK_EQ(atomio_pwrite(st, f, "second", 6, 0), 6);
}

int main(void)
{
	t_dir();
	/* The filesystem's limit, as the kernel's llseek reports it. */
	int pfd = open(t_path("probe"), O_RDWR | O_CREAT, 0600);
	CHECK(pfd >= 0);
	uint64_t lo = 0, hi = 1ull << 62;
	if (lseek(pfd, (off_t)hi, SEEK_SET) >= 0)
		t_skip("this filesystem takes files up to 2^62 bytes: no limit to test");
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (lseek(pfd, (off_t)mid, SEEK_SET) >= 0)
			lo = mid;
		else
			hi = mid;
	}
	close(pfd);
	uint64_t fs_max = lo;
	printf("filesystem's largest file: %llu bytes\n", (unsigned long long)fs_max);

	struct atomio_options o = t_opts(1 << 20);
	char err[512] = "";
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
	CHECK(f >= 0);
	/* ending exactly at the limit is fine; one byte more is not */
	CHECK_EQ(atomio_pwrite(st, f, "x", 1, (off_t)(fs_max - 1)), 1);
	CHECK_EQ(atomio_pwrite(st, f, "xy", 2, (off_t)(fs_max - 1)), -EFBIG);
	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_OK(atomio_tx_write(tx, f, "a", 1, 0));
	CHECK_EQ(atomio_tx_truncate(tx, f, (off_t)(fs_max + 1)), -EFBIG);
	CHECK_EQ(atomio_tx_write(tx, f, "b", 1, (off_t)fs_max), -EFBIG);
	CHECK_OK(atomio_tx_commit(tx)); /* the refused ranges left the group as it was */
	CHECK_EQ(atomio_pwrite(st, f, "c", 1, 1), 1); /* the store is not failed */
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	CHECK_EQ(s.commits, 3);
	/* Reopen (recovery runs): nothing in the log can fail to replay. */
	CHECK_OK(atomio_close(st));
	o.flags = 0;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	CHECK_OK(atomio_close(st));

	/* A crafted record (valid checksum) that writes past the filesystem's
	 * limit but below 2^62: refused before anything is replayed, the
	 * earlier record into the other file included. */
	CHECK_EQ(lp_crash_child(child, NULL), 0);
	struct lp l;
	CHECK_OK(lp_load(&l, t_path("log2")));
	struct sb_disk *sb = lp_sb(&l);
	CHECK(sb);
	struct rec_hdr_disk *h = lp_rec(&l, sb, sb->head_off);
	CHECK(h && h->magic == REC_MAGIC);
	uint64_t pos2 = lp_rec_next(sb, h, sb->head_off);
	struct seg_disk *d = lp_seg(&l, sb, pos2, 0);
	CHECK(d && d->kind == SEG_WRITE && d->len == 6);
	d->off = fs_max - 3;
	CHECK_OK(lp_rec_seal(&l, sb, pos2));
	CHECK_OK(lp_store(&l, t_path("log2")));
	lp_free(&l);
	CHECK_OK(truncate(t_path("f2"), 0));
	CHECK_OK(truncate(t_path("g2"), 0));
	int r = atomio_open(t_path("log2"), &o, &st);
	printf("record past the filesystem's limit: %d (%s): %s\n", r, atomio_strerror(r), err);
	CHECK_EQ(r, ATOMIO_ECORRUPT);
	CHECK(strstr(err, "beyond"));
	struct stat sf, sg;
	CHECK_OK(stat(t_path("f2"), &sf));
	CHECK_OK(stat(t_path("g2"), &sg));
	CHECK_EQ(sf.st_size, 0);
	CHECK_EQ(sg.st_size, 0);
	return 0;
}
