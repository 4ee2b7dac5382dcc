/* A full checkpoint that writes a file's live records again through a
 * descriptor it cannot trust yet (checkpoint.c, TRUSTED DESCRIPTORS;
 * recover.c, replay_files) must never change the file's bytes on the way:
 * its process may die in the middle, and the others go on, read the file,
 * and sync it through descriptors they trust.
 *
 * Process A commits two groups to f: the first writes 8192 bytes at 0 (tag
 * 1), the second 4096 at 0 (tag 2) over its first half.  Process B joins,
 * never having opened f, and runs a full checkpoint: it opens f on demand,
 * its descriptor is not trusted, so it writes f's live records through it
 * first -- and dies right after its first write to f (its ops table).  Then
 * A reads f, and closes (its last close checkpoints through its own, trusted
 * descriptor).  f must hold tag 2 then tag 1 both times.  Before the fix the
 * records were written again in log order: B's first write was the first
 * group's, tag 1 over the second's half, and A read (and the checkpoint made
 * durable) tag 1 at 0. */
#include <sys/stat.h>
#include <sys/wait.h>

#include "sys.h"
#include "t.h"

static struct atomio_sysops ops;
static dev_t f_dev;
static ino_t f_ino; /* B: dies after its first write to this file */

static ssize_t dying_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off, int rwf)
{
	ssize_t n = atomio_sys_linux.pwritev(fd, iov, iovcnt, off, rwf);
	struct stat sb;
	if (f_ino && fstat(fd, &sb) == 0 && sb.st_dev == f_dev && sb.st_ino == f_ino)
		_exit(7);
	return n;
}

/* f as the two groups leave it: tag 2 on [0, 4096), tag 1 on [4096, 8192) */
static int holds_both(const uint8_t *got, size_t n)
{
	uint8_t want[8192];
	t_fill(want, 4096, 2, 0);
	t_fill(want + 4096, 4096, 1, 4096);
	return n == sizeof(want) && !memcmp(got, want, n);
}

int main(void)
{
	ops = atomio_sys_linux;
	ops.name = "t_errseq_replay_kill";
	ops.pwritev = dying_pwritev;
	ops.uring_init = NULL; /* the plain engine: writes through pwritev */
	ops.uring_enter = NULL;
	ops.uring_exit = NULL;
	atomio_sys_set(&ops);
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT | ATOMIO_ENGINE_PLAIN;
	const char *log = t_path("log"), *fpath = t_path("f");
	atomio *st;
	CHECK_OK(atomio_open(log, &o, &st));
	int f = atomio_file_open(st, fpath, O_CREAT, 0644);
	CHECK(f >= 0);
	uint8_t data[8192];
	t_fill(data, sizeof(data), 1, 0);
	CHECK_EQ(atomio_pwrite(st, f, data, sizeof(data), 0), (long)sizeof(data));
	t_fill(data, 4096, 2, 0);
	CHECK_EQ(atomio_pwrite(st, f, data, 4096, 0), 4096L);

	pid_t b = fork();
	CHECK(b >= 0);
	if (b == 0) {
		atomio *mine;
		KCHECK(atomio_open(log, &o, &mine) == 0);
		struct stat sb;
		KCHECK(stat(fpath, &sb) == 0);
		f_dev = sb.st_dev;
		f_ino = sb.st_ino;
		(void)atomio_checkpoint(mine); /* opens f on demand, writes its records, dies */
		_exit(0);
	}
	int ws;
	CHECK(waitpid(b, &ws, 0) == b);
	CHECK(WIFEXITED(ws));
	printf("B %s\n", WEXITSTATUS(ws) == 7 ? "died after its first write to f, in its checkpoint"
					       : "never wrote f: its checkpoint did not write the records again");
	CHECK_EQ(WEXITSTATUS(ws), 7);

	uint8_t got[8192];
	CHECK_EQ(atomio_pread(st, f, got, sizeof(got), 0), (long)sizeof(got));
	int live = holds_both(got, sizeof(got));
	CHECK_OK(atomio_close(st));
	size_t n;
	uint8_t *after = t_slurp(fpath, &n);
	int closed = after && holds_both(after, n);
	free(after);
	printf("f read by A after B's death: %s; f after A's close: %s\n",
	       live ? "both groups" : "NOT both groups (an older record's bytes over a newer one's)",
	       closed ? "both groups" : "NOT both groups");
	if (!live || !closed) {
		fprintf(stderr, "FAIL: a checkpoint that died writing the live records again left an older "
				"record's bytes over a newer one's\n");
		return 1;
	}
	printf("ok: writing the live records again leaves each byte as it was, wherever it stops\n");
	return 0;
}
