/*
 * recover.c: `atomio recover LOG` -- open the store (which replays every
 * committed group whole, fsyncs the files it wrote and empties the log),
 * checkpoint and close it, without the application.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "atomio.h"
#include "cli.h"

static void help(void)
{
	printf("usage: atomio recover [--force-paths] [--allow-shared-log] [--json] LOG\n\n"
	       "Recover the store whose log is LOG without its application: replay every\n"
	       "committed group whole into its data files, make them durable, empty the log,\n"
	       "then close.  The store must not be open elsewhere.\n\n"
	       "  --force-paths       replay into whatever file is now at a recorded path even if\n"
	       "                      it is not the file registered (after checking it by hand;\n"
	       "                      ATOMIO_FORCE_PATHS)\n"
	       "  --allow-shared-log  accept a log other users may write (ATOMIO_ALLOW_SHARED_LOG)\n"
	       "  --json              print the result as JSON\n"
	       "  -h, --help          this help\n\n"
	       "Exit status: 0 recovered, 2 usage error, 3 recovery failed or the store is in use\n"
	       "(nothing was replayed: recovery replays all or nothing).\n");
}

int cmd_recover(int argc, char **argv)
{
	static const struct option lo[] = {
		{"force-paths", no_argument, 0, 'f'}, {"allow-shared-log", no_argument, 0, 's'},
		{"json", no_argument, 0, 'j'},        {"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	uint32_t flags = 0;
	bool json = false;
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (c) {
		case 'f': flags |= ATOMIO_FORCE_PATHS; break;
		case 's': flags |= ATOMIO_ALLOW_SHARED_LOG; break;
		case 'j': json = true; break;
		case 'h': help(); return EX_OK;
		default: cli_bad_option(argv, c);
		}
	}
	if (optind != argc - 1)
		cli_usage(optind >= argc ? "which LOG?" : "one LOG only");
	const char *log = argv[optind];
	char err[1024] = "";
	struct atomio_options o = {.flags = flags, .errbuf = err, .errbuf_size = sizeof(err)};
	atomio *st;
	int r = atomio_open(log, &o, &st);
	if (r == -EBUSY)
		cli_die(EX_ERROR, "%s: the store is open in another process; recover it there, or stop that "
				  "process first", log);
	if (r == -ENOENT)
		cli_die(EX_ERROR, "%s: no such log", log);
	if (r == ATOMIO_EIDENTITY && !(flags & ATOMIO_FORCE_PATHS) && !strstr(err, "--force-paths"))
		cli_die(EX_ERROR, "%s (check the file, then: atomio recover --force-paths %s)",
			err[0] ? err : atomio_strerror(r), log);
	if (r < 0)
		cli_die(EX_ERROR, "%s", err[0] ? err : atomio_strerror(r));
	struct atomio_stats s;
	atomio_stats(st, &s);
	/* Recovery already made the replayed data durable and emptied the log;
	 * the checkpoint is for symmetry with the application's close. */
	r = atomio_checkpoint(st);
	int rc = atomio_close(st);
	if (r < 0 || rc < 0)
		cli_die(EX_ERROR, "%s: checkpoint: %s", log, err[0] ? err : atomio_strerror(r < 0 ? r : rc));
	if (json)
		printf("{\"log\": \"%s\", \"recovered_groups\": %llu, \"data_syncs\": %llu}\n", log,
		       (unsigned long long)s.groups_recovered, (unsigned long long)s.data_syncs);
	else
		printf("%s: replayed %llu committed group%s; the data files are durable and the log is "
		       "empty\n", log, (unsigned long long)s.groups_recovered,
		       s.groups_recovered == 1 ? "" : "s");
	return EX_OK;
}
