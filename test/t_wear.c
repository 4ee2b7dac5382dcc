/* Wear (issue 7): atomio_pread/atomio_preadv return the newest committed
 * bytes of buffered, O_DIRECT (twin) and ATOMIO_DIRECT_HOME files at any
 * offset and length; the checkpoint policy's knobs (ckpt_percent,
 * dirty_limit) act as documented; and the dirty set counts distinct blocks:
 * a page committed many times between checkpoints is checkpointed once. */
#include "model.h"

static void check_reads(atomio *st, int f, const struct mfile *m)
{
	uint8_t buf[140000];
	static const uint64_t offs[] = {0, 1, 4095, 4096, 12345, 65536 - 7, 100000};
	static const size_t lens[] = {1, 511, 4096, 8192 + 3, 65536};
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		for (size_t j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
			uint64_t off = offs[i];
			size_t len = lens[j];
			ssize_t n = atomio_pread(st, f, buf + 1, len, (off_t)off); /* unaligned buffer */
			size_t want = off >= m->size ? 0 : m->size - off < len ? m->size - off : len;
			CHECK_EQ(n, (ssize_t)want);
			CHECK(!memcmp(buf + 1, m->b + off, want));
			/* the same through two iovecs */
			struct iovec iov[2] = {{buf, len / 2}, {buf + 70000, len - len / 2}};
			n = atomio_preadv(st, f, iov, 2, (off_t)off);
			CHECK_EQ(n, (ssize_t)want);
			size_t a = want < len / 2 ? want : len / 2;
			CHECK(!memcmp(buf, m->b + off, a));
			CHECK(!memcmp(buf + 70000, m->b + off + a, want - a));
		}
}

static void reads(uint32_t flags, int oflags, const char *what)
{
	unlink(t_path("log"));
	unlink(t_path("r"));
	struct atomio_options o = t_opts(1u << 20);
	o.flags |= flags;
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int f = atomio_file_open(st, t_path("r"), O_CREAT | oflags, 0644);
	CHECK(f >= 0);
	struct mfile m = {0};
	uint8_t page[16384];
	for (int round = 0; round < 40; round++) {
		uint64_t off = (uint64_t)(round * 7 % 9) * 16384;
		t_fill(page, sizeof(page), (uint32_t)round, off);
		CHECK_EQ(atomio_pwrite(st, f, page, sizeof(page), (off_t)off), (ssize_t)sizeof(page));
		m_write(&m, page, sizeof(page), off);
		if (round % 10 == 3)
			check_reads(st, f, &m);
		if (round == 20)
			CHECK_OK(atomio_checkpoint(st));
	}
	check_reads(st, f, &m);
	/* errors */
	uint8_t b[16];
	CHECK_EQ(atomio_pread(st, f + 1, b, 1, 0), -EINVAL);
	CHECK_EQ(atomio_pread(st, -1, b, 1, 0), -EINVAL);
	CHECK_EQ(atomio_pread(st, f, NULL, 1, 0), -EINVAL);
	CHECK_EQ(atomio_pread(st, f, b, 1, -1), -EINVAL);
	CHECK_EQ(atomio_pread(NULL, f, b, 1, 0), -EINVAL);
	CHECK_EQ(atomio_preadv(st, f, NULL, 1, 0), -EINVAL);
	CHECK_EQ(atomio_pread(st, f, b, 0, 0), 0);
	CHECK_OK(atomio_close(st));
	printf("reads ok: %s\n", what);
	free(m.b);
}

int main(void)
{
	/* What is tested is bookkeeping, not durability: on tmpfs, where a
	 * sync costs nothing (as t_badfields). */
	struct stat shm;
	if (!getenv("ATOMIO_TEST_DIR") && stat("/dev/shm", &shm) == 0 && S_ISDIR(shm.st_mode) &&
	    access("/dev/shm", W_OK) == 0)
		setenv("ATOMIO_TEST_DIR", "/dev/shm", 1);
	t_dir();
	reads(0, 0, "buffered file");
	int fd = open(t_path("probe"), O_CREAT | O_RDWR | O_DIRECT, 0644);
	if (fd >= 0) {
		close(fd);
		reads(0, O_DIRECT, "O_DIRECT file, buffered twin");
		reads(ATOMIO_DIRECT_HOME, O_DIRECT, "O_DIRECT file, ATOMIO_DIRECT_HOME");
	} else {
		printf("no O_DIRECT here: only buffered reads checked\n");
	}

	/* options */
	atomio *st;
	struct atomio_options o = t_opts(1u << 20);
	o.ckpt_percent = 100;
	CHECK_EQ(atomio_open(t_path("log2"), &o, &st), -EINVAL);

	/* A hot page: checkpointed once however often it was committed. */
	unlink(t_path("log"));
	o = t_opts(16u << 20);
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int f = atomio_file_open(st, t_path("h"), O_CREAT, 0644);
	uint8_t page[16384];
	struct atomio_stats s0, s1;
	CHECK_OK(atomio_checkpoint(st));
	CHECK_OK(atomio_stats(st, &s0));
	for (int i = 0; i < 200; i++) {
		t_fill(page, sizeof(page), (uint32_t)i, 0);
		CHECK_EQ(atomio_pwrite(st, f, page, sizeof(page), (off_t)(i % 3) * 16384), 16384);
	}
	CHECK_OK(atomio_stats(st, &s1));
	CHECK_EQ(s1.dirty_bytes, 3 * 16384);
	CHECK_OK(atomio_checkpoint(st));
	CHECK_OK(atomio_stats(st, &s1));
	CHECK_EQ(s1.bytes_checkpointed - s0.bytes_checkpointed, 3 * 16384);
	CHECK_EQ(s1.dirty_bytes, 0);
	CHECK_EQ(s1.bytes_home - s0.bytes_home, 200 * 16384);
	CHECK_OK(atomio_close(st));

	/* dirty_limit: distinct pages past it make checkpoints, and commits
	 * wait at twice it, so the dirty bytes stay bounded. */
	unlink(t_path("log"));
	o = t_opts(64u << 20);
	o.dirty_limit = 256 * 1024;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	f = atomio_file_open(st, t_path("d"), O_CREAT, 0644);
	uint64_t most = 0;
	for (int i = 0; i < 400; i++) {
		t_fill(page, sizeof(page), (uint32_t)i, 0);
		CHECK_EQ(atomio_pwrite(st, f, page, sizeof(page), (off_t)i * 16384), 16384);
		CHECK_OK(atomio_stats(st, &s1));
		most = s1.dirty_bytes > most ? s1.dirty_bytes : most;
	}
	printf("dirty_limit 256 KiB: %llu checkpoints, at most %llu bytes dirty\n",
	       (unsigned long long)s1.checkpoints, (unsigned long long)most);
	CHECK(s1.checkpoints >= 400 * 16384 / (2 * 256 * 1024) / 2);
	CHECK(most <= 2 * 256 * 1024 + 16384);
	CHECK_OK(atomio_close(st));

	/* ckpt_percent: a log checkpointed at 10% full checkpoints more often
	 * than one checkpointed at 90%. */
	uint64_t ck[2];
	for (int k = 0; k < 2; k++) {
		unlink(t_path("log"));
		o = t_opts(1u << 20);
		o.ckpt_percent = k ? 90 : 10;
		CHECK_OK(atomio_open(t_path("log"), &o, &st));
		f = atomio_file_open(st, t_path("p"), O_CREAT, 0644);
		for (int i = 0; i < 400; i++) {
			t_fill(page, 4096, (uint32_t)i, 0);
			CHECK_EQ(atomio_pwrite(st, f, page, 4096, (off_t)(i % 50) * 4096), 4096);
			usleep(200); /* let the background checkpointer keep up (tmpfs is fast) */
		}
		CHECK_OK(atomio_stats(st, &s1));
		ck[k] = s1.checkpoints;
		CHECK_OK(atomio_close(st));
	}
	printf("checkpoints at 10%%: %llu, at 90%%: %llu\n", (unsigned long long)ck[0],
	       (unsigned long long)ck[1]);
	CHECK(ck[0] > ck[1]);
	return 0;
}
