/*
 * atomio: the command.  `atomio SUBCOMMAND [OPTIONS] ...`; see man/atomio.1.
 * The subcommands are the table below, and only there: the usage messages
 * and `atomio --help` are made from it (test/t_cli_help.sh reads that list).
 */
#include <stdio.h>
#include <string.h>

#include "atomio.h"
#include "cli.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *summary;
} cmds[] = {
	{"probe", cmd_probe, "show the atomic-write support of a file, directory or device"},
	{"bench", cmd_bench, "benchmark atomic page writes: unsafe, doublewrite, atomio, kernel"},
	{"verify", cmd_verify, "write, then check, stamped blocks: torn, lost, half-applied groups"},
	{"dump", cmd_dump, "print a log: superblocks, registered files, records, valid tail"},
	{"recover", cmd_recover, "recover and checkpoint a store without its application"},
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

/* "probe, bench, ..." */
static const char *cmd_names(void)
{
	static char names[128];
	size_t at = 0;
	for (size_t i = 0; i < NCMDS && at < sizeof(names); i++)
		at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s", i ? ", " : "", cmds[i].name);
	return names;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: atomio COMMAND [OPTIONS] [ARGS]\n\n"
		   "atomio %d.%d: atomic write groups for Linux files.\n\ncommands:\n",
		ATOMIO_VERSION_MAJOR, ATOMIO_VERSION_MINOR);
	for (size_t i = 0; i < NCMDS; i++)
		fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].summary);
	fprintf(f, "\n'atomio COMMAND --help' describes a command; man atomio (man/atomio.1) all of them.\n"
		   "Exit status: 0 ok, 1 problem found, 2 usage error, 3 error, 4 unsupported here.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2)
		cli_usage("which command? (%s)", cmd_names());
	const char *c = argv[1];
	if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
		if (argc > 2 && strcmp(c, "help") == 0) {
			/* atomio help bench == atomio bench --help */
			for (size_t i = 0; i < NCMDS; i++)
				if (!strcmp(argv[2], cmds[i].name)) {
					static char cmd[64];
					snprintf(cmd, sizeof(cmd), "atomio %s", cmds[i].name);
					cli_cmd = cmd;
					char *av[] = {argv[2], "--help", NULL};
					return cmds[i].fn(2, av);
				}
			cli_usage("no command '%s'", argv[2]);
		}
		usage(stdout);
		return EX_OK;
	}
	if (!strcmp(c, "--version") || !strcmp(c, "-V")) {
		printf("atomio %d.%d\n", ATOMIO_VERSION_MAJOR, ATOMIO_VERSION_MINOR);
		return EX_OK;
	}
	for (size_t i = 0; i < NCMDS; i++) {
		if (strcmp(c, cmds[i].name))
			continue;
		static char cmd[64];
		snprintf(cmd, sizeof(cmd), "atomio %s", cmds[i].name);
		cli_cmd = cmd;
		return cmds[i].fn(argc - 1, argv + 1);
	}
	cli_usage("no command '%s' (commands: %s)", c, cmd_names());
}
