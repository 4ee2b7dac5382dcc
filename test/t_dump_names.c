/* atomio dump prints file names escaped (issue 12, item 11): a registered
 * data file whose name holds a newline, a right-to-left override (U+202E), a
 * byte that is not UTF-8 and a backslash must not garble the text output (one
 * line per file, no raw control or override), and the JSON output must stay
 * valid JSON (jq parses it when installed).  Plain UTF-8 stays as it is. */
#include <sys/wait.h>

#include "t.h"

static char out[1 << 16];

static int run(const char *cmd, const char *args)
{
	char line[8192];
	snprintf(line, sizeof(line), "%s %s > %s 2>&1", cmd, args, t_path("out"));
	int rc = system(line);
	FILE *f = fopen(t_path("out"), "r");
	CHECK(f != NULL);
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	fclose(f);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int main(int argc, char **argv)
{
	(void)argc;
	const char *cmd = strstr(argv[0], "/san/") ? "build/san/atomio" : "build/atomio";
	if (access(cmd, X_OK) != 0)
		t_skip("%s is not built", cmd);
	/* "ev\nil", RLO, "txt.exe", a lone 0xff byte, a backslash, "é" */
	const char name[] = "ev\nil\xe2\x80\xaetxt.exe\xff\\x\xc3\xa9";
	struct atomio_options o = t_opts(1 << 20);
	atomio *st;
	CHECK_OK(atomio_open(t_path("s.log"), &o, &st));
	int id = atomio_file_open(st, t_path(name), O_CREAT, 0644);
	CHECK(id >= 0);
	char buf[512];
	memset(buf, 'n', sizeof(buf));
	CHECK_EQ(atomio_pwrite(st, id, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	CHECK_OK(atomio_close(st));

	char args[4400];
	snprintf(args, sizeof(args), "dump '%s'", t_path("s.log"));
	int rc = run(cmd, args);
	fprintf(stderr, "%s", out);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "\xe2\x80\xae") == NULL); /* no raw override */
	CHECK(strstr(out, "\xff") == NULL);
	CHECK(strstr(out, "ev\nil") == NULL);
	CHECK(strstr(out, "ev\\nil\\u202etxt.exe\\xff\\\\x\xc3\xa9") != NULL);

	snprintf(args, sizeof(args), "dump --json '%s'", t_path("s.log"));
	CHECK_EQ(run(cmd, args), 0);
	CHECK(strstr(out, "\xe2\x80\xae") == NULL);
	CHECK(strstr(out, "\xff") == NULL);
	CHECK(strstr(out, "ev\\nil\\u202etxt.exe") != NULL);
	if (system("command -v jq >/dev/null 2>&1") == 0) {
		snprintf(args, sizeof(args), "jq -e '.files[0].recorded_path | startswith(\"ev\\nil\")' %s >/dev/null",
			 t_path("out"));
		CHECK_EQ(system(args), 0);
	}
	printf("ok: dump escapes file names in text and JSON\n");
	return 0;
}
