/*
 * bench-sqlite-readers: readers beside a writer, in WAL and in the atomio
 * VFS's default mode (make bench-sqlite-readers; not part of check).
 *
 * One writer process commits 8-row update transactions (BEGIN, 8 UPDATEs of
 * random rows, COMMIT; synchronous=FULL) as fast as it can; R reader
 * processes each run read transactions as fast as they can (BEGIN, 10 point
 * SELECTs of random rows, COMMIT), all on one database of ROWS rows of about
 * 100 bytes, every process with its own connection and a 5 s busy timeout.
 * Modes, interleaved (rotating their order each round), SECS seconds each,
 * medians over the rounds:
 *
 *   atomio           vfs=atomio, no pragma (each commit one atomio group)
 *   atomio+WAL       vfs=atomio, journal_mode=WAL
 *   unix WAL         the default VFS, journal_mode=WAL
 *   unix default     the default VFS, no pragma (DELETE)
 *
 * Reported per mode: the writer's tx/s, the readers' read transactions per
 * second (all readers together), and the writer's tx/s with no reader (a
 * window of its own in the same round), so that what readers cost the
 * writer shows.
 *
 * Usage: bench-sqlite-readers [-d DIR] [-r READERS] [-s SECS] [-n ROUNDS]
 *                             [-N ROWS] [-m MODES]   (MODES: e.g. 0123)
 */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "atomio_sqlite.h"
#include "bench_sqlite.h"

#define NMODES 4
static const char *mode_name[NMODES] = {"atomio (no pragma)", "atomio + WAL", "unix WAL", "unix default"};
static const char *mode_vfs[NMODES] = {"atomio", "atomio", NULL, NULL};
static const char *mode_journal[NMODES] = {NULL, "WAL", "WAL", NULL};

/* Counters in shared memory: per process, transactions done. */
struct shared {
	volatile int go, stop;
	volatile long long n[65];
};

static void writer_loop(const char *path, int m, int rows, struct shared *sh, int slot)
{
	sqlite3 *db = open_db(path, mode_vfs[m], mode_journal[m], 5000);
	sqlite3_stmt *up = prepare(db, "UPDATE t SET v = v + 1 WHERE id = ?");
	uint64_t seed = 42 + (uint64_t)slot;
	while (!sh->go)
		usleep(100);
	while (!sh->stop) {
		exec(db, "BEGIN");
		update_8_rows(db, up, rows, &seed);
		exec(db, "COMMIT");
		sh->n[slot]++;
	}
	sqlite3_finalize(up);
	sqlite3_close(db);
	_exit(0);
}

static void reader_loop(const char *path, int m, int rows, struct shared *sh, int slot)
{
	sqlite3 *db = open_db(path, mode_vfs[m], mode_journal[m], 5000);
	sqlite3_stmt *sel = prepare(db, "SELECT v, pad FROM t WHERE id = ?");
	uint64_t seed = 1000 + (uint64_t)slot;
	while (!sh->go)
		usleep(100);
	while (!sh->stop) {
		exec(db, "BEGIN");
		for (int j = 0; j < 10; j++) {
			sqlite3_bind_int(sel, 1, (int)(rnd(&seed) % (uint64_t)rows) + 1);
			if (sqlite3_step(sel) != SQLITE_ROW)
				die(db, "select");
			sqlite3_reset(sel);
		}
		exec(db, "COMMIT");
		sh->n[slot]++;
	}
	sqlite3_finalize(sel);
	sqlite3_close(db);
	_exit(0);
}

/* One window of `secs` with a writer and `readers` readers: tx/s, reads/s. */
static void window(const char *path, int m, int rows, int readers, double secs, double *wtps, double *rps)
{
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset((void *)sh, 0, sizeof(*sh));
	pid_t pid[65];
	int np = 0;
	fflush(stdout);
	for (int i = 0; i <= readers; i++) {
		pid[np] = fork();
		if (pid[np] < 0) {
			perror("fork");
			exit(1);
		}
		if (pid[np] == 0) {
			if (i == 0)
				writer_loop(path, m, rows, sh, 0);
			reader_loop(path, m, rows, sh, i);
		}
		np++;
	}
	usleep(300000); /* every process open */
	long long n0[65];
	sh->go = 1;
	usleep(200000);
	for (int i = 0; i <= readers; i++)
		n0[i] = sh->n[i];
	double t0 = now();
	usleep((useconds_t)(secs * 1e6));
	double t1 = now();
	long long r = 0;
	for (int i = 1; i <= readers; i++)
		r += sh->n[i] - n0[i];
	*wtps = (double)(sh->n[0] - n0[0]) / (t1 - t0);
	*rps = (double)r / (t1 - t0);
	sh->stop = 1;
	for (int i = 0; i < np; i++) {
		int st;
		if (waitpid(pid[i], &st, 0) != pid[i] || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "bench-sqlite-readers: a process failed\n");
			exit(1);
		}
	}
	munmap(sh, sizeof(*sh));
}

int main(int argc, char **argv)
{
	const char *dir = "/var/tmp", *modes = "0123";
	int readers = 2, rounds = 5, rows = 20000, opt;
	double secs = 3;
	while ((opt = getopt(argc, argv, "d:r:s:n:N:m:")) != -1) {
		switch (opt) {
		case 'd': dir = optarg; break;
		case 'r': readers = atoi(optarg); break;
		case 's': secs = atof(optarg); break;
		case 'n': rounds = atoi(optarg); break;
		case 'N': rows = atoi(optarg); break;
		case 'm': modes = optarg; break;
		default:
			fprintf(stderr, "usage: %s [-d DIR] [-r READERS] [-s SECS] [-n ROUNDS] [-N ROWS] [-m MODES]\n",
				argv[0]);
			return 2;
		}
	}
	if (readers < 1 || readers > 64 || rounds < 1 || rounds > 64 || secs <= 0 || rows < 10) {
		fprintf(stderr, "bench-sqlite-readers: bad arguments\n");
		return 2;
	}
	if (atomio_sqlite_register(NULL, 0) != SQLITE_OK) {
		fprintf(stderr, "bench-sqlite-readers: cannot register the atomio VFS\n");
		return 1;
	}
	char wd[BENCH_WD], path[NMODES][BENCH_PATH];
	int use[NMODES];
	int nuse = bench_dbs(dir, "readers", modes, NMODES, mode_vfs, mode_journal, 5000, rows, wd, path, use);
	printf("bench-sqlite-readers: SQLite %s, %d rows, a writer of 8-row update transactions "
	       "(synchronous=FULL) beside %d readers of 10-row read transactions, one process each, "
	       "%s, %d rounds x %.1f s per mode, load %.2f\n",
	       sqlite3_libversion(), rows, readers, wd, rounds, secs, load());
	double w[NMODES][64], rd[NMODES][64], alone[NMODES][64];
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < nuse; k++) {
			int m = use[(k + r) % nuse];
			double x;
			window(path[m], m, rows, 0, secs / 2, &alone[m][r], &x);
			window(path[m], m, rows, readers, secs, &w[m][r], &rd[m][r]);
			printf("  round %d %-20s writer %6.0f tx/s (alone %6.0f), readers %7.0f read tx/s  "
			       "(load %.2f)\n", r + 1, mode_name[m], w[m][r], alone[m][r], rd[m][r], load());
			fflush(stdout);
		}
	printf("\n| mode | writer tx/s beside %d readers | readers' read tx/s (all %d) | writer tx/s alone |\n"
	       "|---|---|---|---|\n", readers, readers);
	for (int k = 0; k < nuse; k++) {
		int m = use[k];
		printf("| %s | %.0f | %.0f | %.0f |\n", mode_name[m], median(w[m], rounds), median(rd[m], rounds),
		       median(alone[m], rounds));
	}
	printf("load average after the run: %.2f\n", load());
	for (int k = 0; k < nuse; k++) {
		int m = use[k];
		const char *sfx[] = {"", "-atomio", "-wal", "-shm", "-journal"};
		for (int i = 0; i < 5; i++) {
			char p[4400];
			snprintf(p, sizeof(p), "%s%s", path[m], sfx[i]);
			unlink(p);
		}
	}
	rmdir(wd);
	return 0;
}
