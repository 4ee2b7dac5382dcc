/*
 * bench-sqlite-writers: many writer processes on one database, the atomio
 * VFS's default mode against the unix VFS's WAL and DELETE (make
 * bench-sqlite-writers; a benchmark, not part of check).
 *
 * P writer processes (P = 1, 2, 4, 8 by default), each with its own
 * connection, commit 8-row update transactions (BEGIN IMMEDIATE, 8 UPDATEs
 * of random rows, COMMIT; synchronous=FULL or -y NORMAL, every mode at the
 * same level; a 10 s busy timeout) as fast as
 * they can, on one database of ROWS rows of about 100 bytes.  Modes,
 * interleaved (rotating their order each round), SECS seconds each, medians
 * over the rounds:
 *
 *   atomio           vfs=atomio, no pragma (each commit one atomio group of
 *                    the shared store, whichever process commits)
 *   unix WAL         the default VFS, journal_mode=WAL
 *   unix DELETE      the default VFS, no pragma
 *
 * Reported per mode and P: transactions per second (all processes), the
 * ratio to WAL's, fairness: the busiest process's transaction count over
 * the least busy one's in the window (median over rounds; 1.0 is perfectly
 * even), and a transaction's p99 latency (BEGIN IMMEDIATE to COMMIT's
 * return, busy waits included; median over rounds of each window's p99),
 * and the writers' CPU time (all their threads, user and system) per
 * transaction in the window: on a shared machine, the figure to compare.
 *
 * Usage: bench-sqlite-writers [-d DIR] [-p 1,2,4,8] [-s SECS] [-n ROUNDS]
 *                             [-N ROWS] [-m MODES] [-y FULL|NORMAL]   (MODES: e.g. 012)
 */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "atomio_sqlite.h"
#include "bench_sqlite.h"

#define NMODES 3
#define MAXP 32
static const char *mode_name[NMODES] = {"atomio (no pragma)", "unix WAL", "unix DELETE"};
static const char *mode_vfs[NMODES] = {"atomio", NULL, NULL};
static const char *mode_journal[NMODES] = {NULL, "WAL", NULL};

static const char *sync_level = "FULL";

/* Latency histogram: 10 us buckets below 10 ms, 1 ms buckets up to 2 s. */
#define HFINE 1000
#define HBUCKETS (HFINE + 1990)
static int hbucket(double s)
{
	double us = s * 1e6;
	if (us < 10.0 * HFINE)
		return (int)(us / 10);
	int b = HFINE + (int)((us - 10.0 * HFINE) / 1000);
	return b < HBUCKETS ? b : HBUCKETS - 1;
}
static double hvalue_ms(int b) { return b < HFINE ? (b + 1) * 0.01 : 10.0 + (b - HFINE + 1); }

/* Counters in shared memory: per process, transactions done; the
 * latencies of the transactions that ended while meas was set. */
struct shared {
	volatile int go, stop, meas;
	volatile long long n[MAXP], busy[MAXP];
	volatile long long cpu_us[MAXP], cpu_n[MAXP]; /* CPU (all threads) and transactions while meas */
	long long hist[HBUCKETS];
};

static long long cpu_now_us(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

static void writer_loop(const char *path, int m, int rows, struct shared *sh, int slot)
{
	sqlite3 *db = open_db(path, mode_vfs[m], mode_journal[m], 10000);
	char sql[64];
	snprintf(sql, sizeof(sql), "PRAGMA synchronous=%s", sync_level);
	exec(db, sql);
	sqlite3_stmt *up = prepare(db, "UPDATE t SET v = v + 1 WHERE id = ?");
	uint64_t seed = 42 + (uint64_t)slot;
	while (!sh->go)
		usleep(100);
	int meas = 0;
	long long c0 = 0, n0 = 0;
	while (!sh->stop) {
		if (sh->meas != meas) { /* the window opened or closed: CPU time per transaction */
			meas = sh->meas;
			long long c = cpu_now_us();
			if (meas) {
				c0 = c;
				n0 = sh->n[slot];
			} else {
				sh->cpu_us[slot] = c - c0;
				sh->cpu_n[slot] = sh->n[slot] - n0;
			}
		}
		double t0 = now();
		int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", 0, 0, 0);
		if (rc == SQLITE_BUSY) {
			sh->busy[slot]++; /* the busy timeout ran out: try again */
			continue;
		}
		if (rc != SQLITE_OK)
			die(db, "begin");
		update_8_rows(db, up, rows, &seed);
		rc = sqlite3_exec(db, "COMMIT", 0, 0, 0);
		if (rc != SQLITE_OK)
			die(db, "commit");
		sh->n[slot]++;
		if (sh->meas)
			__atomic_fetch_add(&sh->hist[hbucket(now() - t0)], 1, __ATOMIC_RELAXED);
	}
	sqlite3_finalize(up);
	sqlite3_close(db);
	_exit(0);
}

/* One window of `secs` with p writers: tx/s and busiest/least busy. */
static void window(const char *path, int m, int rows, int p, double secs, double *tps, double *spread,
		   double *p99, double *cpu)
{
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset((void *)sh, 0, sizeof(*sh));
	pid_t pid[MAXP];
	fflush(stdout);
	for (int i = 0; i < p; i++) {
		pid[i] = fork();
		if (pid[i] < 0) {
			perror("fork");
			exit(1);
		}
		if (pid[i] == 0)
			writer_loop(path, m, rows, sh, i);
	}
	usleep(300000); /* every process open */
	long long n0[MAXP];
	sh->go = 1;
	usleep(200000);
	for (int i = 0; i < p; i++)
		n0[i] = sh->n[i];
	sh->meas = 1;
	double t0 = now();
	usleep((useconds_t)(secs * 1e6));
	double t1 = now();
	sh->meas = 0;
	long long tot = 0, lo = -1, hi = 0;
	for (int i = 0; i < p; i++) {
		long long d = sh->n[i] - n0[i];
		tot += d;
		lo = lo < 0 || d < lo ? d : lo;
		hi = d > hi ? d : hi;
	}
	*tps = (double)tot / (t1 - t0);
	*spread = lo > 0 ? (double)hi / (double)lo : hi > 0 ? 1e9 : 1;
	long long all = 0, acc = 0;
	for (int b = 0; b < HBUCKETS; b++)
		all += sh->hist[b];
	*p99 = 0;
	for (int b = 0; b < HBUCKETS && all; b++)
		if ((acc += sh->hist[b]) * 100 >= all * 99) {
			*p99 = hvalue_ms(b);
			break;
		}
	usleep(100000); /* each writer notes its CPU time at its next transaction */
	sh->stop = 1;
	long long cus = 0, cn = 0;
	for (int i = 0; i < p; i++) {
		int st;
		if (waitpid(pid[i], &st, 0) != pid[i] || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "bench-sqlite-writers: a process failed\n");
			exit(1);
		}
		cus += sh->cpu_us[i];
		cn += sh->cpu_n[i];
	}
	*cpu = cn ? (double)cus / (double)cn : 0;
	munmap(sh, sizeof(*sh));
}

int main(int argc, char **argv)
{
	const char *dir = "/var/tmp", *modes = "012", *plist = "1,2,4,8";
	int rounds = 3, rows = 20000, opt;
	double secs = 3;
	while ((opt = getopt(argc, argv, "d:p:s:n:N:m:y:")) != -1) {
		switch (opt) {
		case 'd': dir = optarg; break;
		case 'p': plist = optarg; break;
		case 's': secs = atof(optarg); break;
		case 'n': rounds = atoi(optarg); break;
		case 'N': rows = atoi(optarg); break;
		case 'm': modes = optarg; break;
		case 'y': sync_level = optarg; break;
		default:
			fprintf(stderr, "usage: %s [-d DIR] [-p 1,2,4,8] [-s SECS] [-n ROUNDS] [-N ROWS] [-m MODES] "
				"[-y FULL|NORMAL]\n",
				argv[0]);
			return 2;
		}
	}
	int ps[16], nps = 0;
	for (const char *q = plist; *q && nps < 16;) {
		ps[nps++] = atoi(q);
		q = strchr(q, ',');
		if (!q)
			break;
		q++;
	}
	for (int i = 0; i < nps; i++)
		if (ps[i] < 1 || ps[i] > MAXP) {
			fprintf(stderr, "bench-sqlite-writers: 1 to %d processes\n", MAXP);
			return 2;
		}
	if (strcasecmp(sync_level, "FULL") && strcasecmp(sync_level, "NORMAL")) {
		fprintf(stderr, "bench-sqlite-writers: -y FULL or NORMAL\n");
		return 2;
	}
	if (rounds < 1 || rounds > 64 || secs <= 0 || rows < 10) {
		fprintf(stderr, "bench-sqlite-writers: bad arguments\n");
		return 2;
	}
	if (atomio_sqlite_register(NULL, 0) != SQLITE_OK) {
		fprintf(stderr, "bench-sqlite-writers: cannot register the atomio VFS\n");
		return 1;
	}
	char wd[BENCH_WD], path[NMODES][BENCH_PATH];
	int use[NMODES];
	int nuse = bench_dbs(dir, "writers", modes, NMODES, mode_vfs, mode_journal, 10000, rows, wd, path, use);
	printf("bench-sqlite-writers: SQLite %s, %d rows, P writer processes of 8-row update transactions "
	       "(BEGIN IMMEDIATE, synchronous=%s, busy_timeout 10 s), %s, %d rounds x %.1f s per mode and P, "
	       "modes interleaved, load %.2f\n",
	       sqlite3_libversion(), rows, sync_level, wd, rounds, secs, load());
	static double t[16][NMODES][64], sp[16][NMODES][64], p99[16][NMODES][64], cpu[16][NMODES][64];
	for (int r = 0; r < rounds; r++)
		for (int pi = 0; pi < nps; pi++)
			for (int k = 0; k < nuse; k++) {
				int m = use[(k + r + pi) % nuse];
				window(path[m], m, rows, ps[pi], secs, &t[pi][m][r], &sp[pi][m][r], &p99[pi][m][r],
				       &cpu[pi][m][r]);
				printf("  round %d P=%d %-20s %7.0f tx/s, busiest/least %.2f, p99 %.2f ms, CPU %.0f us/tx  "
				       "(load %.2f)\n",
				       r + 1, ps[pi], mode_name[m], t[pi][m][r], sp[pi][m][r], p99[pi][m][r], cpu[pi][m][r],
				       load());
				fflush(stdout);
			}
	printf("\n| P | mode (synchronous=%s) | tx/s | vs WAL | busiest/least busy process | p99 ms | CPU us/tx |\n"
	       "|---|---|---|---|---|---|---|\n", sync_level);
	for (int pi = 0; pi < nps; pi++)
		for (int k = 0; k < nuse; k++) {
			int m = use[k];
			double mt = median(t[pi][m], rounds), wal = strchr(modes, '1') ? median(t[pi][1], rounds) : 0;
			char vs[32] = "-";
			if (wal > 0)
				snprintf(vs, sizeof(vs), "%.2fx", mt / wal);
			printf("| %d | %s | %.0f | %s | %.2f | %.2f | %.0f |\n", ps[pi], mode_name[m], mt, vs,
			       median(sp[pi][m], rounds), median(p99[pi][m], rounds), median(cpu[pi][m], rounds));
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
