/* Paced write-back (issue 11, src/writeback.c): ranges written home are
 * handed to the kernel's write-back (sync_file_range) once they are old
 * enough, so a checkpoint finds little left; a range written again before
 * then is left to the checkpoint (no page reaches the device twice for it);
 * a background checkpoint drains what is left, waiting for each piece on a
 * descriptor of its own (a wait consumes a write-back error on the file
 * description it is made on: the checkpoint's fdatasync must still see it);
 * and none of it changes what a reopened store holds.  A drain with room to
 * spare waits for each 32 KiB piece (and the range that crosses it) before
 * the next, so that little home data is ever ahead of a log write. */
#include <stdbool.h>

#include "sys.h"
#include "model.h"

#define PAGE 16384u

static struct atomio_sysops ops;
static int waits, bad_waits;
/* The drain's pieces: bytes waited for since the last write-back started
 * (one thread drains: the checkpointer), and the most of them. */
static uint64_t piece, max_piece;

static int w_sync_file_range(int fd, off_t off, off_t len, unsigned flags)
{
	if (flags == SYNC_FILE_RANGE_WRITE && piece) {
		if (piece > max_piece)
			max_piece = piece;
		piece = 0;
	}
	if (flags & (SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WAIT_AFTER)) {
		__atomic_fetch_add(&waits, 1, __ATOMIC_RELAXED);
		piece += (uint64_t)len;
		/* the store's own descriptors of a data file are read-write */
		if ((fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDONLY)
			__atomic_fetch_add(&bad_waits, 1, __ATOMIC_RELAXED);
	}
	return atomio_sys_linux.sync_file_range(fd, off, len, flags);
}

static void run(bool hot, int oflags, uint32_t flags)
{
	unlink(t_path("log"));
	unlink(t_path("f"));
	waits = bad_waits = 0;
	piece = max_piece = 0;
	/* 4 MiB log: background checkpoints at 2 MiB, write-back of ranges
	 * 1 MiB old, 128 KiB at a time */
	struct atomio_options o = t_opts(4u << 20);
	o.flags |= flags;
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int f = atomio_file_open(st, t_path("f"), O_CREAT | oflags, 0644);
	CHECK(f >= 0);
	struct mfile m = {0};
	static uint8_t page[PAGE] __attribute__((aligned(4096)));
	for (uint32_t i = 0; i < 120; i++) {
		uint64_t off = (hot ? i % 4 : i) * (uint64_t)PAGE;
		t_fill(page, PAGE, i, off);
		CHECK_EQ(atomio_pwrite(st, f, page, PAGE, (off_t)off), (ssize_t)PAGE);
		m_write(&m, page, PAGE, off);
	}
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	/* With background checkpoints the checkpointer thread starts the
	 * write-back: give it its turn (bounded by a count of naps). */
	for (int i = 0; i < 1000 && !hot && !s.bytes_written_back; i++) {
		usleep(5000);
		CHECK_OK(atomio_stats(st, &s));
	}
	printf("%s, %s, %s: %llu home bytes, %llu written back early, %llu checkpoints\n",
	       hot ? "4 hot pages" : "distinct pages", oflags ? "O_DIRECT" : "buffered",
	       flags ? "no background checkpoints (write-back inline)" : "defaults (checkpointer thread)",
	       (unsigned long long)s.bytes_home, (unsigned long long)s.bytes_written_back,
	       (unsigned long long)s.checkpoints);
	if (hot)
		CHECK_EQ(s.bytes_written_back, 0); /* every range was written again in time */
	else
		CHECK(s.bytes_written_back >= (flags ? 128u * 1024 : 1) && s.bytes_written_back <= s.bytes_home);
	CHECK_OK(atomio_close(st));
	if (piece > max_piece)
		max_piece = piece;
	printf("  %d waits of the checkpoint's drain, pieces of at most %llu bytes\n", waits,
	       (unsigned long long)max_piece);
	/* The log never reaches the drain's hurry point, 5/8 full with
	 * checkpoints at half (120 records of 20 KiB: 2.4 of 4 MiB), nor the
	 * dirty set its limit (the log's size): the drain is never in a hurry,
	 * its pieces 32 KiB and at most the range that crosses that. */
	CHECK(max_piece <= 32768 + PAGE);
	CHECK_EQ(bad_waits, 0);
	if (!flags && s.checkpoints)
		CHECK(waits > 0); /* a background checkpoint drained */
	if (flags)
		CHECK_EQ(waits, 0); /* only background checkpoints drain */
	CHECK_OK(m_compare(&m, t_path("f"), 0));
	free(m.b);
}

/* Compressible pages (15/16 zeros): the records are a fraction of the home
 * bytes, and the delay counts log bytes (writeback.c, wb_init): 120
 * distinct pages, 1.9 MiB home but 0.5 MiB of log (a 4 KiB block each), are younger than
 * the 1 MiB delay, and none is written back early.  Counted in home bytes,
 * as before, they were past it: pages written back long before the
 * checkpoint, and again each time written again before it. */
static void run_compressible(void)
{
	unlink(t_path("log"));
	unlink(t_path("f"));
	struct atomio_options o = t_opts(4u << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(t_path("log"), &o, &st));
	int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
	CHECK(f >= 0);
	struct mfile m = {0};
	static uint8_t page[PAGE];
	for (uint32_t i = 0; i < 120; i++) {
		memset(page, 0, PAGE);
		t_fill(page, PAGE / 16, i, (uint64_t)i * PAGE);
		CHECK_EQ(atomio_pwrite(st, f, page, PAGE, (off_t)i * PAGE), (ssize_t)PAGE);
		m_write(&m, page, PAGE, (uint64_t)i * PAGE);
	}
	struct atomio_stats s;
	CHECK_OK(atomio_stats(st, &s));
	printf("compressible distinct pages, buffered: %llu home bytes, %llu logged, %llu written back early\n",
	       (unsigned long long)s.bytes_home, (unsigned long long)s.bytes_logged,
	       (unsigned long long)s.bytes_written_back);
	CHECK(s.bytes_logged * 3 < s.bytes_home); /* (the premise: records a fraction of the pages) */
	CHECK_EQ(s.bytes_written_back, 0);
	CHECK_OK(atomio_close(st));
	CHECK_OK(m_compare(&m, t_path("f"), 0));
	free(m.b);
}

int main(void)
{
	t_dir();
	ops = atomio_sys_linux;
	ops.name = "writeback";
	ops.sync_file_range = w_sync_file_range;
	atomio_sys_set(&ops);
	run(false, 0, ATOMIO_NO_BG_CHECKPOINT);
	run(true, 0, ATOMIO_NO_BG_CHECKPOINT);
	run(false, O_DIRECT, ATOMIO_NO_BG_CHECKPOINT);
	run(false, 0, 0);
	run(true, O_DIRECT, 0);
	run_compressible();
	return 0;
}
