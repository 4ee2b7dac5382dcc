/*
 * bench-sqlite: SQLite on the atomio VFS against SQLite's own WAL and DELETE
 * journal modes, side by side in one run (make bench-sqlite).
 *
 * Each transaction updates 8 random rows of a 100,000-row table (rows of
 * about 100 bytes), synchronous=FULL, one connection per mode, kept open for
 * the whole run.  Rounds interleave the modes (rotating their order); each
 * mode runs `secs` seconds per round; medians over the rounds are reported.
 *
 * Bytes per transaction, two ways:
 *   dev   sectors written to the device holding the databases
 *         (/sys/dev/block/M:m/stat), counted from a syncfs before the window
 *         to a syncfs after it, so that each mode pays for its own writeback
 *         (atomio's home writes, WAL's checkpoints).  Other processes writing
 *         to the same device inflate it.
 *   proc  write_bytes of this process (/proc/self/io) over the same span:
 *         what this process sent towards storage, immune to other processes.
 *
 * Usage: bench-sqlite [-d DIR] [-s SECS] [-r ROUNDS] [-n ROWS] [-F]
 *        (default /var/tmp, 3 s, 5 rounds, 100000 rows; -F adds atomio logging
 *        whole pages, URI atomio_diff=0, to show what the diff saves; -o 01
 *        runs only modes 0 and 1, for profiling)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "atomio_sqlite.h"
#include "bench_sqlite.h"

/* Mode 3 (-F): atomio logging whole pages instead of their changed bytes. */
#define MAXMODES 4
static int NMODES = 3;
static const char *mode_name[MAXMODES] = {"atomio (MEMORY)", "WAL", "DELETE", "atomio full pages"};
static const char *mode_file[MAXMODES] = {"bench-atomio.db", "bench-wal.db", "bench-delete.db",
					  "bench-atomio-full.db"};

static char g_stat_path[128];

static uint64_t dev_bytes(void)
{
	FILE *f = fopen(g_stat_path, "r");
	unsigned long long v[11] = {0};
	if (!f)
		return 0;
	int n = fscanf(f, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
		       &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10]);
	fclose(f);
	return n >= 7 ? v[6] * 512ull : 0; /* field 7: sectors written */
}

static uint64_t proc_bytes(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	uint64_t v = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "write_bytes:", 12))
			v = strtoull(line + 12, NULL, 10);
	fclose(f);
	return v;
}

static sqlite3 *open_mode(const char *dir, int m, int rows)
{
	char path[4200], uri[4400];
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, mode_file[m]) >= sizeof(path))
		die(NULL, "path too long");
	sqlite3 *db = NULL;
	int fresh = access(path, F_OK) != 0;
	snprintf(uri, sizeof(uri), "file:%s%s", path, m == 3 ? "?atomio_diff=0" : "");
	bool am = m == 0 || m == 3;
	if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
			    am ? "atomio" : NULL) != SQLITE_OK)
		die(db, path);
	exec(db, am ? "PRAGMA journal_mode=MEMORY" : m == 1 ? "PRAGMA journal_mode=WAL"
							   : "PRAGMA journal_mode=DELETE");
	exec(db, "PRAGMA synchronous=FULL");
	if (fresh) {
		fill_table(db, rows);
	}
	return db;
}

struct result {
	double tps, dev, proc, secs;
	long long tx;
};

static struct result run(sqlite3 *db, int dbfd, double secs, int rows, uint64_t *seed)
{
	sqlite3_stmt *up = prepare(db, "UPDATE t SET v = v + 1 WHERE id = ?");
	syncfs(dbfd);
	uint64_t d0 = dev_bytes(), p0 = proc_bytes();
	double t0 = now(), t1;
	long long n = 0;
	do {
		exec(db, "BEGIN");
		update_8_rows(db, up, rows, seed);
		exec(db, "COMMIT");
		n++;
		t1 = now();
	} while (t1 - t0 < secs);
	syncfs(dbfd);
	uint64_t d1 = dev_bytes(), p1 = proc_bytes();
	sqlite3_finalize(up);
	return (struct result){.tps = n / (t1 - t0), .dev = (double)(d1 - d0) / n,
			       .proc = (double)(p1 - p0) / n, .secs = t1 - t0, .tx = n};
}

int main(int argc, char **argv)
{
	const char *dir = "/var/tmp";
	double secs = 3;
	int rounds = 5, rows = 100000, opt;
	const char *only = NULL;
	while ((opt = getopt(argc, argv, "d:s:r:n:Fo:")) != -1) {
		switch (opt) {
		case 'F': NMODES = 4; break;
		case 'o': only = optarg; break;
		case 'd': dir = optarg; break;
		case 's': secs = atof(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'n': rows = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-d DIR] [-s SECS] [-r ROUNDS] [-n ROWS] [-F] [-o MODES]\n", argv[0]);
			return 2;
		}
	}
	if (rounds < 1 || rounds > 64 || secs <= 0 || rows < 8) {
		fprintf(stderr, "bench-sqlite: bad arguments\n");
		return 2;
	}
	if (atomio_sqlite_register(NULL, 0) != SQLITE_OK) {
		fprintf(stderr, "bench-sqlite: cannot register the atomio VFS\n");
		return 1;
	}
	char wd[4200];
	snprintf(wd, sizeof(wd), "%s/atomio-bench-sqlite-%d", dir, (int)getpid());
	if (mkdir(wd, 0700) < 0) {
		perror(wd);
		return 1;
	}
	int dfd = open(wd, O_RDONLY | O_DIRECTORY);
	struct stat sb;
	fstat(dfd, &sb);
	snprintf(g_stat_path, sizeof(g_stat_path), "/sys/dev/block/%u:%u/stat", major(sb.st_dev),
		 minor(sb.st_dev));
	char fstype[64] = "?";
	{
		FILE *f = fopen("/proc/self/mounts", "r");
		char dev[256], mnt[1024], type[64];
		size_t best = 0;
		while (f && fscanf(f, "%255s %1023s %63s %*[^\n]", dev, mnt, type) == 3)
			if (!strncmp(wd, mnt, strlen(mnt)) && strlen(mnt) >= best) {
				best = strlen(mnt);
				snprintf(fstype, sizeof(fstype), "%s", type);
			}
		if (f)
			fclose(f);
	}

	sqlite3 *db[MAXMODES];
	for (int m = 0; m < NMODES; m++)
		db[m] = open_mode(wd, m, rows);
	printf("bench-sqlite: %d rows, 8 random-row updates per transaction, synchronous=FULL, "
	       "%s in %s (%s, device stat %s), %d rounds x %.1f s per mode, buffered I/O "
	       "(atomio's log: O_DIRECT)\n",
	       rows, "one connection per mode", wd, fstype, g_stat_path, rounds, secs);
	double tps[MAXMODES][64], dev[MAXMODES][64], proc[MAXMODES][64];
	double tot_tx[MAXMODES] = {0}, tot_s[MAXMODES] = {0};
	uint64_t seed = 42;
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < NMODES; i++) {
			int m = (i + r) % NMODES;
			if (only && !strchr(only, '0' + m))
				continue;
			struct result x = run(db[m], dfd, secs, rows, &seed);
			tps[m][r] = x.tps;
			tot_tx[m] += (double)x.tx;
			tot_s[m] += x.secs;
			dev[m][r] = x.dev;
			proc[m][r] = x.proc;
			printf("  round %d %-16s %7.0f tx/s  dev %6.1f KiB/tx  proc %6.1f KiB/tx  (%lld tx)\n",
			       r + 1, mode_name[m], x.tps, x.dev / 1024, x.proc / 1024, x.tx);
			fflush(stdout);
		}
	}
	char st[512];
	sqlite3_stmt *s;
	if (sqlite3_prepare_v2(db[0], "PRAGMA atomio_stats", -1, &s, NULL) == SQLITE_OK &&
	    sqlite3_step(s) == SQLITE_ROW) {
		snprintf(st, sizeof(st), "%s", sqlite3_column_text(s, 0));
		printf("atomio: %s\n", st);
	}
	sqlite3_finalize(s);
	double med[MAXMODES];
	printf("\n| mode | tx/s (median) | tx/s (all rounds) | device KiB/tx | process KiB/tx |\n"
	       "|---|---|---|---|---|\n");
	double agg[MAXMODES];
	for (int m = 0; m < NMODES; m++) {
		med[m] = median(tps[m], rounds);
		agg[m] = tot_tx[m] / tot_s[m];
		printf("| %s | %.0f | %.0f | %.1f | %.1f |\n", mode_name[m], med[m], agg[m],
		       median(dev[m], rounds) / 1024, median(proc[m], rounds) / 1024);
	}
	printf("\natomio vs WAL: %.2fx (medians), %.2fx (all rounds)   atomio vs DELETE: %.2fx, %.2fx"
	       "   (target >= 1.0x and >= 3x)\n",
	       med[0] / med[1], agg[0] / agg[1], med[0] / med[2], agg[0] / agg[2]);
	for (int m = 0; m < NMODES; m++)
		sqlite3_close(db[m]);
	for (int m = 0; m < NMODES; m++) {
		char p[4400];
		const char *sfx[] = {"", "-atomio", "-wal", "-shm", "-journal"};
		for (int k = 0; k < 5; k++) {
			snprintf(p, sizeof(p), "%s/%s%s", wd, mode_file[m], sfx[k]);
			unlink(p);
		}
	}
	close(dfd);
	rmdir(wd);
	return 0;
}
