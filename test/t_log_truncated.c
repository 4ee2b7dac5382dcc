/* A truncated log says so (issue 12, item 7): cut to any length from 8192
 * bytes (both superblocks intact) to its size - 1, atomio_open fails with
 * ATOMIO_ECORRUPT and a message that the file is shorter than its geometry
 * (it said "no valid superblock"), and atomio dump says the same and exits 1. */
#include <stdbool.h>
#include <sys/wait.h>

#include "t.h"

static int run(const char *cmd, const char *args, char *out, size_t n)
{
	char line[8192];
	snprintf(line, sizeof(line), "%s %s > %s 2>&1", cmd, args, t_path("out"));
	int rc = system(line);
	FILE *f = fopen(t_path("out"), "r");
	CHECK(f != NULL);
	size_t k = fread(out, 1, n - 1, f);
	out[k] = 0;
	fclose(f);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int main(int argc, char **argv)
{
	(void)argc;
	const char *cmd = strstr(argv[0], "/san/") ? "build/san/atomio" : "build/atomio";
	bool have_dump = access(cmd, X_OK) == 0;
	struct atomio_options o = t_opts(1 << 20);
	char err[512];
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	atomio *st;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	CHECK_OK(atomio_close(st));
	struct stat sb;
	CHECK_OK(stat(t_path("s.log"), &sb));
	const off_t full = sb.st_size;
	const off_t cuts[] = {8192, 8193, 12288, 1 << 20, full / 2, full - 4096, full - 1};
	int fd = open(t_path("s.log"), O_RDWR);
	CHECK(fd >= 0);
	char *saved = malloc((size_t)full);
	CHECK(saved && pread(fd, saved, (size_t)full, 0) == full);
	for (unsigned k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
		CHECK_OK(ftruncate(fd, cuts[k]));
		err[0] = 0;
		o.flags = 0;
		int r = atomio_open(t_path("s.log"), &o, &st);
		fprintf(stderr, "cut to %lld: %s: %s\n", (long long)cuts[k], atomio_strerror(r), err);
		CHECK_EQ(r, ATOMIO_ECORRUPT);
		CHECK(strstr(err, "shorter than") != NULL);
		if (have_dump) {
			char out[8192], args[4400];
			snprintf(args, sizeof(args), "dump %s", t_path("s.log"));
			CHECK_EQ(run(cmd, args, out, sizeof(out)), 1);
			CHECK(strstr(out, "shorter than") != NULL);
		}
		CHECK_EQ(pwrite(fd, saved, (size_t)full, 0), full);
	}
	close(fd);
	free(saved);
	o.flags = 0;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st)); /* restored: fine again */
	CHECK_OK(atomio_close(st));
	printf("ok: a truncated log is reported as shorter than its geometry\n");
	return 0;
}
