/* A file renamed since it was registered is not a hard link: its id stays
 * its own, and its old name, created anew, registers as the new file it
 * is.  (The preload library renames protected files this way: `rename
 * a.db b.db` over another protected file, then `open("a.db", O_CREAT)`;
 * matching files by identity alone gave the new name's open the renamed
 * file's id, and the open failed with ATOMIO_EIDENTITY.) */
#include "t.h"

int main(void)
{
	t_dir();
	const char *log = t_path("log");
	struct atomio_options o = t_opts(1 << 20);
	atomio *a;
	CHECK_OK(atomio_open(log, &o, &a));
	int id1 = atomio_file_open(a, t_path("p1"), O_CREAT, 0644);
	int id3 = atomio_file_open(a, t_path("p3"), O_CREAT, 0644);
	CHECK(id1 >= 0 && id3 >= 0 && id1 != id3);
	CHECK_EQ(atomio_pwrite(a, id1, "1111", 4, 0), 4);
	CHECK_EQ(atomio_pwrite(a, id3, "3333", 4, 0), 4);
	CHECK_OK(atomio_close(a));

	CHECK_OK(rename(t_path("p1"), t_path("p3")));
	CHECK_OK(atomio_open(log, &o, &a));
	/* p3 is now the file registered as p1 */
	int n3 = atomio_file_open(a, t_path("p3"), 0, 0);
	CHECK(n3 >= 0);
	/* p1 anew: a new file, not the renamed one */
	int n1 = atomio_file_open(a, t_path("p1"), O_CREAT, 0644);
	CHECK(n1 >= 0);
	CHECK(n1 != n3);
	CHECK_EQ(atomio_pwrite(a, n1, "new1", 4, 0), 4);
	char got[4];
	CHECK_EQ(atomio_pread(a, n3, got, 4, 0), 4);
	CHECK(!memcmp(got, "1111", 4));
	CHECK_OK(atomio_close(a));
	int fd = open(t_path("p1"), O_RDONLY);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, got, 4, 0), 4);
	CHECK(!memcmp(got, "new1", 4));
	close(fd);
	printf("ok: a renamed file keeps its id; its old name created anew registers as a new file\n");
	return 0;
}
