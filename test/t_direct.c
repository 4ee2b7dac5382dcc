/* O_DIRECT data files: alignment is enforced (-EINVAL), aligned groups and
 * unaligned caller buffers work, and the data is read back with O_DIRECT. */
#include "model.h"

int main(void)
{
	struct atomio_options o = t_opts(1 << 20);
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int f = atomio_file_open(st, t_path("d"), O_CREAT | O_DIRECT, 0644);
	if (f == -EINVAL)
		t_skip("O_DIRECT not supported on %s", t_dir());
	CHECK(f >= 0);
	int g = atomio_file_open(st, t_path("buffered"), O_CREAT, 0644);
	CHECK(g >= 0);
	CHECK_EQ(atomio_file_open(st, t_path("d"), 0, 0), -EINVAL); /* open already, with O_DIRECT */
	struct atomio_caps c;
	CHECK_OK(atomio_caps(st, f, &c));
	CHECK(c.dio_offset_align >= 512 && c.dio_mem_align >= 1);
	uint32_t al = c.dio_offset_align;

	char *raw = malloc(65536 + 1);
	char *unaligned = raw + 1;
	t_fill(unaligned, 65536, 3, 0);
	CHECK_EQ(atomio_pwrite(st, f, unaligned, al, 1), -EINVAL);   /* offset */
	CHECK_EQ(atomio_pwrite(st, f, unaligned, al + 1, 0), -EINVAL); /* length */
	CHECK_EQ(atomio_pwrite(st, f, unaligned, 16384, 0), 16384);    /* buffer copied */

	atomio_tx *tx;
	CHECK_OK(atomio_tx_begin(st, &tx));
	CHECK_EQ(atomio_tx_write(tx, f, unaligned, 100, 0), -EINVAL);
	t_fill(unaligned, 8192, 4, 32768);
	CHECK_OK(atomio_tx_write(tx, f, unaligned, 8192, 32768));
	CHECK_OK(atomio_tx_write(tx, g, "odd", 3, 5)); /* mixed in one group */
	t_fill(unaligned, 4096, 5, 40960);
	CHECK_OK(atomio_tx_write(tx, f, unaligned, 4096, 40960)); /* merges with the first */
	CHECK_OK(atomio_tx_truncate(tx, f, 45056));
	CHECK_OK(atomio_tx_commit(tx));

	struct mfile m = {0};
	t_fill(unaligned, 16384, 3, 0);
	m_write(&m, unaligned, 16384, 0);
	t_fill(unaligned, 8192, 4, 32768);
	m_write(&m, unaligned, 8192, 32768);
	t_fill(unaligned, 4096, 5, 40960);
	m_write(&m, unaligned, 4096, 40960);
	m_setsize(&m, 45056);

	void *rb;
	CHECK_OK(posix_memalign(&rb, 4096, 45056));
	int fd = atomio_file_fd(st, f);
	CHECK_EQ(pread(fd, rb, 45056, 0), 45056);
	CHECK(!memcmp(rb, m.b, 45056));
	CHECK_OK(atomio_close(st));
	CHECK_OK(m_compare(&m, t_path("d"), 0));
	free(rb);
	free(raw);
	free(m.b);
	return 0;
}
