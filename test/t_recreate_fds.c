/* A file unlinked and created again, over and over, under a store another
 * handle keeps open (PostgreSQL drops and makes relation files so): each
 * time the long-lived handle's next write sends it the new inode's way
 * (file_get_any), and its descriptor of the old inode is retired.  Retired
 * descriptors are closed once no thread of the process may still use one
 * (files_close_stale): the process's open descriptors stay bounded, and the
 * old inodes' space is given back.  Before, every one stayed open until the
 * store closed: 100 recreations left 100 more descriptors open (1,000: 1,000). */
#include <dirent.h>

#include "t.h"

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	CHECK(d != NULL);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int main(void)
{
	t_dir();
	const char *log = t_path("log"), *f = t_path("f.dat");
	struct atomio_options o = t_opts(1 << 20);
	atomio *a;
	int id = t_open_written(log, &o, f, "old", &a);
	const int rounds = 100; /* 1,000 take 36 s here (each a registration, made durable) */
	int n0 = count_fds(), peak = n0;
	for (int i = 0; i < rounds; i++) {
		/* another handle, which never had the file open, creates it again */
		atomio *b;
		CHECK_OK(atomio_open(log, &o, &b));
		CHECK_OK(unlink(f));
		CHECK_EQ(atomio_file_open(b, f, O_CREAT | O_EXCL, 0644), id);
		CHECK_OK(atomio_close(b));
		/* a's write goes to the new inode */
		CHECK_EQ(atomio_pwrite(a, id, "new", 3, 0), 3);
		int n = count_fds();
		if (n > peak)
			peak = n;
	}
	int n1 = count_fds();
	printf("open descriptors: %d before %d recreations, %d after (peak %d)\n", n0, rounds, n1, peak);
	size_t len;
	uint8_t *d = t_slurp(f, &len);
	CHECK(d && len == 3 && !memcmp(d, "new", 3));
	free(d);
	CHECK_OK(atomio_close(a));
	if (peak > n0 + 8) {
		fprintf(stderr, "FAIL: descriptors of the recreated file's old inodes kept open\n");
		return 1;
	}
	printf("ok: descriptors of a file's old inodes are closed as it is created again\n");
	return 0;
}
