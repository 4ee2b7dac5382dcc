/*
 * recover.c: `atomio recover LOG` -- open the store (which replays every
 * committed group whole, fsyncs the files it wrote and empties the log),
 * checkpoint and close it, without the application.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "atomio.h"
#include "cli.h"

/* A failure: the one line on standard error, as every command's; with
 * --json also {"log", "error", "code", "message"} on standard output, so a
 * script reading the JSON learns why. */
static bool json_out;
static const char *log_arg;
static void fail(int r, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void fail(int r, const char *fmt, ...)
{
	char msg[1536];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (json_out) {
		struct json j;
		json_init(&j, stdout);
		json_obj(&j, NULL);
		json_str(&j, "log", log_arg);
		json_str(&j, "error", atomio_strerror(r));
		json_int(&j, "code", r);
		json_str(&j, "message", msg);
		json_end_obj(&j);
		json_finish(&j);
		fflush(stdout);
	}
	cli_die(EX_ERROR, "%s", msg);
}

static void help(void)
{
	printf("usage: atomio recover [--force-paths | --accept-copies] [--allow-shared-log] [--json] LOG\n\n"
	       "Recover the store whose log is LOG without its application: replay every\n"
	       "committed group whole into its data files, make them durable, empty the log,\n"
	       "then close.  The store must not be open elsewhere.\n\n"
	       "  --force-paths       replay into whatever file is now at a recorded path even if\n"
	       "                      it is not the file registered (after checking it by hand;\n"
	       "                      ATOMIO_FORCE_PATHS)\n"
	       "  --accept-copies     accept a file that is not the registered one (a copy put\n"
	       "                      back with a copy of the log) when the log's groups are all\n"
	       "                      in it already; it is not written (ATOMIO_ACCEPT_COPIES)\n"
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
		{"accept-copies", no_argument, 0, 'c'},
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
		case 'c': flags |= ATOMIO_ACCEPT_COPIES; break;
		case 'j': json = true; break;
		case 'h': help(); return EX_OK;
		default: cli_bad_option(argv, c);
		}
	}
	if (optind != argc - 1)
		cli_usage(optind >= argc ? "which LOG?" : "one LOG only");
	const char *log = argv[optind];
	/* Recovery holds one descriptor per data file with live records (and
	 * the store one or two per registered file): take all the process may
	 * have, not the soft limit's default of 1024. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			cli_warn("cannot raise the open-file limit to %llu: %s",
				 (unsigned long long)rl.rlim_max, strerror(errno));
	}
	json_out = json;
	log_arg = log;
	char err[1024] = "";
	/* Alone: recovery with another process in the store would only join it. */
	struct atomio_options o = {.flags = flags | ATOMIO_EXCLUSIVE, .errbuf = err, .errbuf_size = sizeof(err)};
	atomio *st;
	int r = atomio_open(log, &o, &st);
	if (r == -EBUSY)
		fail(r, "%s: the store is open in another process; recover it there, or stop that process first",
		     cli_esc(log));
	if (r == -ENOENT)
		fail(r, "%s: no such log", cli_esc(log));
	if (r == ATOMIO_EIDENTITY && !(flags & ATOMIO_FORCE_PATHS) && !strstr(err, "--force-paths"))
		fail(r, "%s (check the file, then: atomio recover --force-paths %s)", err[0] ? cli_esc(err) : atomio_strerror(r),
		     cli_esc(log));
	/* The library's message names the cause (the slot, the record, the
	 * file); its code alone ("atomio log is corrupt") would not. */
	if (r < 0 && err[0])
		fail(r, "%s", cli_esc(err));
	if (r < 0)
		fail(r, "%s: %s", cli_esc(log), atomio_strerror(r));
	struct atomio_stats s;
	atomio_stats(st, &s);
	/* Recovery already made the replayed data durable and emptied the log;
	 * the checkpoint is for symmetry with the application's close. */
	r = atomio_checkpoint(st);
	int rc = atomio_close(st);
	if (r < 0 || rc < 0)
		fail(r < 0 ? r : rc, "%s: checkpoint: %s", cli_esc(log), err[0] ? cli_esc(err) : atomio_strerror(r < 0 ? r : rc));
	if (json) {
		struct json j;
		json_init(&j, stdout);
		json_obj(&j, NULL);
		json_str(&j, "log", log);
		json_uint(&j, "recovered_groups", s.groups_recovered);
		json_uint(&j, "data_syncs", s.data_syncs);
		json_end_obj(&j);
		json_finish(&j);
	} else
		printf("%s: replayed %llu committed group%s; the data files are durable and the log is "
		       "empty\n", cli_esc(log), (unsigned long long)s.groups_recovered,
		       s.groups_recovered == 1 ? "" : "s");
	return EX_OK;
}
