/*
 * verify_cmd.c: the command line of `atomio verify`: write and check
 * (verify.c), selftest (verify_selftest.c).  Apart from both, so that the
 * selftest, which runs the write and the check, depends on verify.c and not
 * verify.c on it.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "verify.h"

static void help(void)
{
	printf("usage: atomio verify write DIR --state FILE [--raw | --kernel] [OPTIONS]\n"
	       "       atomio verify check DIR --state FILE [--json] [--force-paths]\n"
	       "       atomio verify selftest [--dir DIR] [--keep]\n\n"
	       "A torn-write and lost-write checker for a device or filesystem, in the spirit of\n"
	       "diskchecker.pl.  'write' fills DIR/" V_DATA_NAME " with stamped, checksummed\n"
	       "blocks, then writes groups of them (through atomio groups, a log in\n"
	       "DIR/" V_LOG_NAME "; or --kernel: one RWF_ATOMIC write per group; or --raw: plain\n"
	       "writes + fdatasync, unprotected) and records every acknowledged group in FILE,\n"
	       "which should live on ANOTHER device.  Cut the power while it runs; after the\n"
	       "reboot 'check' (which first recovers the atomio store) reports torn blocks, lost\n"
	       "acknowledged writes and half-applied groups.  'selftest' proves the checker catches\n"
	       "them: a killed writer, a lying device (through atomio's ops table) and blocks torn,\n"
	       "reverted or misplaced by hand.\n\n"
	       "write options:\n"
	       "  --state FILE        where acknowledged groups are recorded (must not exist)\n"
	       "  --raw               plain pwrite + fdatasync: shows what atomio prevents\n"
	       "  --kernel            pwritev2(RWF_ATOMIC|RWF_DSYNC) of one aligned run of blocks\n"
	       "  --block-size SIZE   bytes per block, a multiple of 512 (default 4096)\n"
	       "  --blocks N          blocks in the data file (default 16384)\n"
	       "  --ranges N          blocks per group (default 4; --kernel: a power of two)\n"
	       "  --duration SECS     stop after this long (default: until interrupted)\n"
	       "  --groups N          stop after N groups\n"
	       "  --buffered          buffered data file (default O_DIRECT)\n"
	       "  --log-size SIZE     atomio's log (default 64M)\n"
	       "  --seed N            block choice seed (default 1)\n"
	       "  -q, --quiet         no progress or summary lines\n"
	       "check options:\n"
	       "  --state FILE        the state file of the write run\n"
	       "  --json              print the report as JSON\n"
	       "  --force-paths       recover even if the data file was replaced (ATOMIO_FORCE_PATHS)\n"
	       "selftest options:\n"
	       "  --dir DIR           where to run (default /var/tmp)\n"
	       "  --keep              keep the selftest's files\n\n"
	       "Files in DIR named " V_DATA_NAME " and " V_LOG_NAME " are replaced by 'write'.\n"
	       "Exit status: 0 written / no violation / every selftest scenario as expected;\n"
	       "1 violations found (check) or a selftest scenario failed; 2 usage error;\n"
	       "3 error; 4 not supported here (--kernel without RWF_ATOMIC).\n");
}

/* The options of `verify write` (wr) or `verify check`, and DIR; *json
 * for check's --json, *ranges_set when --ranges was given. */
static void verify_args(int argc, char **argv, bool wr, struct vopts *o, bool *json, bool *ranges_set)
{
	enum { O_STATE = 256, O_RAW, O_KERNEL, O_BS, O_BLOCKS, O_RANGES, O_DUR, O_GROUPS, O_BUF,
	       O_LOG, O_SEED, O_JSON, O_FORCE };
	static const struct option lo[] = {
		{"state", required_argument, 0, O_STATE},   {"raw", no_argument, 0, O_RAW},
		{"kernel", no_argument, 0, O_KERNEL},       {"block-size", required_argument, 0, O_BS},
		{"blocks", required_argument, 0, O_BLOCKS}, {"ranges", required_argument, 0, O_RANGES},
		{"duration", required_argument, 0, O_DUR},  {"groups", required_argument, 0, O_GROUPS},
		{"buffered", no_argument, 0, O_BUF},        {"log-size", required_argument, 0, O_LOG},
		{"seed", required_argument, 0, O_SEED},     {"json", no_argument, 0, O_JSON},
		{"force-paths", no_argument, 0, O_FORCE},   {"quiet", no_argument, 0, 'q'},
		{"help", no_argument, 0, 'h'},              {0, 0, 0, 0},
	};
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":qh", lo, NULL)) != -1) {
		bool wopt = c == O_RAW || c == O_KERNEL || c == O_BS || c == O_BLOCKS || c == O_RANGES ||
			    c == O_DUR || c == O_GROUPS || c == O_BUF || c == O_LOG || c == O_SEED;
		if (!wr && wopt)
			cli_usage("'%s' is an option of 'verify write'", argv[optind - 1]);
		if (wr && (c == O_JSON || c == O_FORCE))
			cli_usage("'%s' is an option of 'verify check'", argv[optind - 1]);
		switch (c) {
		case O_STATE: o->state = optarg; break;
		case O_RAW:
			if (o->mode == VM_KERNEL)
				cli_usage("--raw or --kernel, not both");
			o->mode = VM_RAW;
			break;
		case O_KERNEL:
			if (o->mode == VM_RAW)
				cli_usage("--raw or --kernel, not both");
			o->mode = VM_KERNEL;
			break;
		case O_BS: o->bsize = (uint32_t)cli_size("--block-size", optarg); break;
		case O_BLOCKS: o->nblocks = cli_uint("--blocks", optarg, 16, 1ull << 36); break;
		case O_RANGES: o->ranges = (unsigned)cli_uint("--ranges", optarg, 1, V_MAX_RANGES); *ranges_set = true; break;
		case O_DUR: o->duration = cli_seconds("--duration", optarg); break;
		case O_GROUPS: o->groups = cli_uint("--groups", optarg, 1, UINT64_MAX); break;
		case O_BUF: o->direct = false; break;
		case O_LOG: o->log_size = cli_size("--log-size", optarg); break;
		case O_SEED: o->seed = cli_uint("--seed", optarg, 0, UINT64_MAX); break;
		case O_JSON: *json = true; break;
		case O_FORCE: o->force_paths = true; break;
		case 'q': o->quiet = true; break;
		case 'h': help(); exit(EX_OK);
		default: cli_bad_option(argv, c);
		}
	}
	if (optind != argc - 1)
		cli_usage(optind >= argc ? "which DIR?" : "one DIR only");
	o->dir = argv[optind];
	if (!o->state)
		cli_usage("--state FILE is required (put it on another device)");
}

/* The write run's options that must agree with each other. */
static void check_write_opts(struct vopts *o, bool ranges_set)
{
	if (o->bsize < V_SECTOR || o->bsize % V_SECTOR || o->bsize > (64u << 20))
		cli_usage("--block-size must be a multiple of 512, at most 64M");
	if (o->mode == VM_KERNEL && !ranges_set)
		o->ranges = 1;
	if (o->mode == VM_KERNEL && (o->ranges & (o->ranges - 1)))
		cli_usage("--kernel: --ranges must be a power of two (one aligned RWF_ATOMIC write)");
	if (o->nblocks < 4ull * o->ranges)
		cli_usage("--blocks must be at least 4 x --ranges");
	if (o->log_size < 65536)
		cli_usage("--log-size must be at least 64k");
}

int cmd_verify(int argc, char **argv)
{
	if (argc < 2)
		cli_usage("which: write, check or selftest?");
	const char *sub = argv[1];
	if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
		help();
		return EX_OK;
	}
	if (!strcmp(sub, "selftest"))
		return v_selftest(argc - 1, argv + 1);
	bool wr = !strcmp(sub, "write"), ck = !strcmp(sub, "check");
	if (!wr && !ck)
		cli_usage("no 'verify %s' (write, check or selftest)", sub);
	struct vopts o = {.mode = VM_ATOMIO, .bsize = 4096, .ranges = 4, .nblocks = 16384,
			  .direct = true, .log_size = 64ull << 20, .seed = 1};
	bool json = false, ranges_set = false;
	verify_args(argc - 1, argv + 1, wr, &o, &json, &ranges_set);
	if (wr) {
		check_write_opts(&o, ranges_set);
		return v_write(&o);
	}
	struct vresult r;
	int rc = v_check(&o, &r);
	if (rc == EX_OK || rc == EX_FOUND)
		v_print(&o, &r, json);
	return rc;
}
