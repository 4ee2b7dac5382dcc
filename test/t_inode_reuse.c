/* A data file deleted and created anew between crash and recovery is another
 * file even when the filesystem hands it the freed inode number (ext4 does so
 * at once): recovery refuses it (ATOMIO_EIDENTITY) and writes nothing, because
 * the catalog records the file's birth time with its inode. */
#include <sys/wait.h>

#include "model.h"

int main(void)
{
	t_dir();
	pid_t p = fork();
	if (p == 0) {
		struct atomio_options o = t_opts(1 << 20);
		o.flags |= ATOMIO_NO_BG_CHECKPOINT; /* the group must still be in the log */
		atomio *st;
		CHECK_OK(atomio_open(t_path("log"), &o, &st));
		int f = atomio_file_open(st, t_path("f"), O_CREAT, 0644);
		CHECK(f >= 0);
		CHECK_EQ(atomio_pwrite(st, f, "committed", 9, 0), 9);
		_exit(0); /* a crash: the group is only in the log and the page cache */
	}
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	struct stat old, now;
	CHECK_OK(stat(t_path("f"), &old));
	/* Replace the file; try a few times to be handed the same inode. */
	int reused = 0;
	for (int i = 0; i < 64 && !reused; i++) {
		CHECK_OK(unlink(t_path("f")));
		int fd = open(t_path("f"), O_CREAT | O_EXCL | O_WRONLY, 0644);
		CHECK(fd >= 0);
		CHECK_EQ(write(fd, "newfile!!", 9), 9);
		close(fd);
		CHECK_OK(stat(t_path("f"), &now));
		reused = now.st_ino == old.st_ino;
	}
	printf("inode number %s reused by the new file\n", reused ? "was" : "was not");
	atomio *st;
	char err[512] = "";
	struct atomio_options o = {.errbuf = err, .errbuf_size = sizeof(err)};
	CHECK_EQ(atomio_open(t_path("log"), &o, &st), ATOMIO_EIDENTITY);
	printf("open: %s\n", err);
	CHECK(strstr(err, "/f"));
	size_t n;
	uint8_t *d = t_slurp(t_path("f"), &n);
	CHECK(n == 9 && !memcmp(d, "newfile!!", 9)); /* nothing replayed into it */
	free(d);
	if (!reused)
		t_skip("the filesystem gave the new file another inode number; the birth-time check was not needed");
	return 0;
}
