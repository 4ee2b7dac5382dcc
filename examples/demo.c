/*
 * demo: atomic groups across two files survive a kill.
 *
 * Two files hold the two sides of a ledger: "accounts.dat" (64 balances) and
 * "history.dat" (one line per transfer).  Each transfer is ONE atomio group:
 * debit one account, credit another, bump the transfer count and append the
 * history line -- four ranges in two files.  A child process runs transfers
 * as fast as it can and is killed with SIGKILL mid-way; the parent reopens the
 * store (recovery), then checks that the money adds up and that both files
 * agree on how many transfers happened.
 *
 * SIGKILL loses the process, not the page cache: this shows recovery after a
 * process crash.  Power loss is what the test suite's crash simulator covers.
 *
 * usage: demo [DIR]   (default: a new directory under /var/tmp, removed after)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "atomio.h"

#define NACC 64
#define START 1000
#define LINE 64

struct ledger {
	int64_t bal[NACC];
	uint64_t transfers;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "demo: %s: %s\n", what, atomio_strerror(err));
	exit(1);
}

static void child(const char *dir)
{
	char p[4200];
	atomio *st;
	struct atomio_options o = {.log_size = 8 << 20, .flags = ATOMIO_CREATE};
	snprintf(p, sizeof(p), "%s/store.log", dir);
	int r = atomio_open(p, &o, &st);
	if (r < 0)
		die("open", r);
	snprintf(p, sizeof(p), "%s/accounts.dat", dir);
	int acc = atomio_file_open(st, p, O_CREAT, 0644);
	snprintf(p, sizeof(p), "%s/history.dat", dir);
	int his = atomio_file_open(st, p, O_CREAT, 0644);
	if (acc < 0 || his < 0)
		die("file_open", acc < 0 ? acc : his);
	struct ledger L = {0};
	for (int i = 0; i < NACC; i++)
		L.bal[i] = START;
	if ((r = (int)atomio_pwrite(st, acc, &L, sizeof(L), 0)) < 0)
		die("initial balances", r);
	srand((unsigned)getpid());
	for (;;) {
		int from = rand() % NACC, to = rand() % NACC;
		int64_t amt = rand() % 50;
		L.bal[from] -= amt;
		L.bal[to] += amt;
		L.transfers++;
		char line[LINE];
		memset(line, ' ', LINE);
		int n = snprintf(line, LINE, "#%llu %d->%d %lld",
				 (unsigned long long)L.transfers, from, to, (long long)amt);
		line[n] = ' ';
		line[LINE - 1] = '\n';
		atomio_tx *tx;
		if ((r = atomio_tx_begin(st, &tx)) < 0)
			die("tx_begin", r);
		/* four ranges, two files, one group */
		atomio_tx_write(tx, acc, &L.bal[from], 8, (off_t)(from * 8));
		atomio_tx_write(tx, acc, &L.bal[to], 8, (off_t)(to * 8));
		atomio_tx_write(tx, acc, &L.transfers, 8, (off_t)(NACC * 8));
		atomio_tx_write(tx, his, line, LINE, (off_t)((L.transfers - 1) * LINE));
		if ((r = atomio_tx_commit(tx)) < 0)
			die("commit", r);
	}
}

static int rm_rf(const char *dir)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

int main(int argc, char **argv)
{
	char dir[3800];
	int tmp = argc < 2;
	if (tmp) {
		snprintf(dir, sizeof(dir), "/var/tmp/atomio-demo-XXXXXX");
		if (!mkdtemp(dir)) {
			perror("mkdtemp");
			return 1;
		}
	} else {
		snprintf(dir, sizeof(dir), "%s", argv[1]);
	}
	printf("atomio demo in %s\n", dir);
	printf("A child moves money between 64 accounts: each transfer is one atomic group of\n"
	       "4 ranges in 2 files (two balances + a counter in accounts.dat, a line in history.dat).\n");
	pid_t pid = fork();
	if (pid == 0)
		child(dir);
	struct timespec ts = {0, 700 * 1000 * 1000};
	nanosleep(&ts, NULL);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	printf("Killed the child with SIGKILL after 0.7 s.\n\n");

	char p[4200];
	snprintf(p, sizeof(p), "%s/store.log", dir);
	atomio *st;
	int r = atomio_open(p, NULL, &st);
	if (r < 0)
		die("reopen", r);
	struct atomio_stats s;
	atomio_stats(st, &s);
	printf("Reopened the store: recovery replayed %llu committed groups from the log.\n",
	       (unsigned long long)s.groups_recovered);
	snprintf(p, sizeof(p), "%s/accounts.dat", dir);
	int acc = atomio_file_open(st, p, 0, 0);
	snprintf(p, sizeof(p), "%s/history.dat", dir);
	int his = atomio_file_open(st, p, 0, 0);
	if (acc < 0 || his < 0)
		die("file_open", acc < 0 ? acc : his);
	struct ledger L;
	if (pread(atomio_file_fd(st, acc), &L, sizeof(L), 0) != (ssize_t)sizeof(L)) {
		fprintf(stderr, "demo: short ledger\n");
		return 1;
	}
	int64_t total = 0;
	for (int i = 0; i < NACC; i++)
		total += L.bal[i];
	off_t hsize = lseek(atomio_file_fd(st, his), 0, SEEK_END);
	char last[LINE + 1] = "";
	if (hsize >= LINE && pread(atomio_file_fd(st, his), last, LINE, hsize - LINE) != LINE)
		last[0] = 0; /* shown as empty; the counts below still judge */
	for (int i = LINE - 1; i >= 0 && (last[i] == '\n' || last[i] == ' ' || !last[i]); i--)
		last[i] = 0;
	printf("  transfers in accounts.dat : %llu\n", (unsigned long long)L.transfers);
	printf("  lines in history.dat      : %lld   (last: %s)\n", (long long)(hsize / LINE), last);
	printf("  total money               : %lld   (expected %d)\n", (long long)total, NACC * START);
	int ok = total == NACC * START && (uint64_t)(hsize / LINE) == L.transfers;
	printf("\n%s\n", ok ? "CONSISTENT: every transfer is in both files or in neither."
			    : "INCONSISTENT: a group was torn!");
	atomio_close(st);
	if (tmp)
		rm_rf(dir);
	return ok ? 0 : 1;
}
