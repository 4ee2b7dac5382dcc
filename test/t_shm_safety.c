/* The store's shared state (LOG-shm) is as protected as the log and never
 * trusted: created 0600; refused (ATOMIO_EUNSAFE) when another user could
 * write it, unless ATOMIO_ALLOW_SHARED_LOG; a link planted in its place is
 * not followed; a file of garbage left there is rebuilt by the first process
 * to open the store; one that does not add up while another process has the
 * store open is refused (ATOMIO_ECORRUPT, naming it), and the process that
 * has it open goes on; the last process to close removes it. */
#include <linux/magic.h>
#include <sys/vfs.h>
#include <sys/wait.h>

#include "t.h"

/* Where the store keeps its shared state (src/shm.c, shm_where_of): in
 * /dev/shm when that is a tmpfs, named by the log's store id and inode;
 * else beside the log. */
static void shm_of(const char *log, char *out, size_t n)
{
	struct statfs sfs;
	if (statfs("/dev/shm", &sfs) == 0 && sfs.f_type == TMPFS_MAGIC) {
		int fd = open(log, O_RDONLY);
		CHECK(fd >= 0);
		CHECK_OK(t_shm_name(fd, out, n));
		close(fd);
	} else {
		snprintf(out, n, "%s-shm", log);
	}
}

static int try_open(const char *log, uint32_t flags, char *err, size_t n, atomio **st)
{
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= flags;
	o.errbuf = err;
	o.errbuf_size = n;
	err[0] = 0;
	return atomio_open(log, &o, st);
}

int main(void)
{
	t_dir();
	char log[256], shm[300], err[1024];
	snprintf(log, sizeof(log), "%s", t_path("log"));
	atomio *st, *st2;

	/* created 0600, removed by the last close */
	CHECK_OK(try_open(log, 0, err, sizeof(err), &st));
	shm_of(log, shm, sizeof(shm));
	printf("the shared state: %s\n", shm);
	struct stat sb;
	CHECK_OK(stat(shm, &sb));
	CHECK_EQ(sb.st_mode & 0777, 0600);
	CHECK_OK(atomio_close(st));
	CHECK(access(shm, F_OK) != 0);

	/* another user could write it: refused, naming it */
	int fd = open(shm, O_RDWR | O_CREAT, 0600);
	CHECK(fd >= 0);
	CHECK_OK(fchmod(fd, 0666));
	close(fd);
	CHECK_EQ(try_open(log, 0, err, sizeof(err), &st), ATOMIO_EUNSAFE);
	CHECK(strstr(err, shm) && strstr(err, "writable"));
	/* ... also with ATOMIO_ALLOW_SHARED_LOG, by users who cannot write the
	 * log; where they can, the first process makes it anew (0600) */
	CHECK_EQ(try_open(log, ATOMIO_ALLOW_SHARED_LOG, err, sizeof(err), &st), ATOMIO_EUNSAFE);
	CHECK(strstr(err, shm) && strstr(err, "writable"));
	CHECK_OK(chmod(log, 0666));
	CHECK_OK(try_open(log, ATOMIO_ALLOW_SHARED_LOG, err, sizeof(err), &st));
	CHECK_OK(stat(shm, &sb));
	CHECK_EQ(sb.st_mode & 0777, 0600);
	CHECK_OK(atomio_close(st));
	CHECK_OK(chmod(log, 0600));

	/* a link in its place: not followed (nothing is created at its target) */
	CHECK_OK(symlink(t_path("elsewhere"), shm));
	CHECK(try_open(log, 0, err, sizeof(err), &st) < 0);
	CHECK(strstr(err, shm));
	CHECK(access(t_path("elsewhere"), F_OK) != 0);
	CHECK_OK(unlink(shm));

	/* garbage left by a crash: rebuilt by the first process */
	fd = open(shm, O_RDWR | O_CREAT, 0600);
	uint8_t junk[65536];
	t_fill(junk, sizeof(junk), 77, 0);
	CHECK(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
	close(fd);
	CHECK_OK(try_open(log, 0, err, sizeof(err), &st));
	int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
	CHECK(f >= 0);
	CHECK_EQ(atomio_pwrite(st, f, "x", 1, 0), 1);

	/* damaged while another process has it open: refused, not rebuilt */
	fd = open(shm, O_RDWR);
	CHECK(fd >= 0);
	uint64_t magic = 0;
	CHECK(pwrite(fd, &magic, 8, 0) == 8);
	pid_t p = fork();
	if (p == 0) {
		int r = try_open(log, 0, err, sizeof(err), &st2);
		_exit(r == ATOMIO_ECORRUPT && strstr(err, shm) && strstr(err, "damaged") ? 0 : 1);
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	/* the store it damaged goes on for the process that has it */
	uint64_t m = 0x4d48534f494d4f54ull;
	CHECK(pwrite(fd, &m, 8, 0) == 8);
	close(fd);
	CHECK_EQ(atomio_pwrite(st, f, "y", 1, 1), 1);
	CHECK_OK(try_open(log, 0, err, sizeof(err), &st2)); /* whole again: joins */
	CHECK_OK(atomio_close(st2));
	CHECK_OK(atomio_close(st));
	CHECK(access(shm, F_OK) != 0);
	printf("ok: the shared state: 0600, refused when others could write it, no link followed, "
	       "garbage rebuilt, damage refused while the store is open, removed by the last close\n");
	return 0;
}
