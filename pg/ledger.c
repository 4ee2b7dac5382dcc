/*
 * pg-ledger: pgbench's TPC-B-like transaction plus one ledger row, from
 * several connections, each acknowledged transaction recorded.
 *
 *   pg-ledger CONNINFO DIR RUN CLIENTS SCALE SEED
 *
 * CLIENTS threads, one connection each, run until their connection fails
 * (the server was killed or lost its power) or SIGTERM:
 *
 *   BEGIN;
 *   UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
 *   SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
 *   UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
 *   UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
 *   INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (...);
 *   INSERT INTO ledger (run, client, n) VALUES (RUN, c, n);
 *   COMMIT;
 *
 * as one simple-protocol query string.  Once COMMIT has returned to the
 * client, the transaction is acknowledged: client c appends "n\n" to
 * DIR/ack.c with one write(2) (the file is on the real disk, not on the
 * filesystem being cut, and survives the kill of this program), and goes
 * on with n + 1.  After a crash, the ledger rows of (RUN, c) must be exactly
 * 1..m with m the last acknowledged n, or m + 1 (the transaction in flight
 * at the crash may have committed without its acknowledgement).  The
 * balances keep TPC-B's invariant: sum(abalance) = sum(tbalance) =
 * sum(bbalance) = sum(delta) of the history.
 *
 * Randomness: a xorshift stream per client from SEED, RUN and c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *conninfo, *dir;
static long run, scale;
static uint64_t seed;

static uint64_t next_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void *client(void *arg)
{
	long c = (long)(intptr_t)arg;
	char path[4096];
	snprintf(path, sizeof(path), "%s/ack.%ld", dir, c);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "pg-ledger: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	PGconn *db = PQconnectdb(conninfo);
	if (PQstatus(db) != CONNECTION_OK) {
		fprintf(stderr, "pg-ledger: client %ld: %s", c, PQerrorMessage(db));
		PQfinish(db);
		close(fd);
		return NULL;
	}
	uint64_t rs = (seed * 1000003u + (uint64_t)run) * 7919u + (uint64_t)c + 1;
	for (int i = 0; i < 8; i++)
		next_rand(&rs);
	char q[1024];
	for (long n = 1;; n++) {
		long aid = (long)(next_rand(&rs) % (uint64_t)(100000 * scale)) + 1;
		long tid = (long)(next_rand(&rs) % (uint64_t)(10 * scale)) + 1;
		long bid = (long)(next_rand(&rs) % (uint64_t)scale) + 1;
		long delta = (long)(next_rand(&rs) % 10001) - 5000;
		snprintf(q, sizeof(q),
			 "BEGIN;"
			 "UPDATE pgbench_accounts SET abalance = abalance + %ld WHERE aid = %ld;"
			 "SELECT abalance FROM pgbench_accounts WHERE aid = %ld;"
			 "UPDATE pgbench_tellers SET tbalance = tbalance + %ld WHERE tid = %ld;"
			 "UPDATE pgbench_branches SET bbalance = bbalance + %ld WHERE bid = %ld;"
			 "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (%ld, %ld, %ld, %ld, now());"
			 "INSERT INTO ledger (run, client, n) VALUES (%ld, %ld, %ld);"
			 "COMMIT;",
			 delta, aid, aid, delta, tid, delta, bid, tid, bid, aid, delta, run, c, n);
		PGresult *r = PQexec(db, q);
		int ok = PQresultStatus(r) == PGRES_COMMAND_OK && !strcmp(PQcmdStatus(r), "COMMIT");
		if (!ok && PQstatus(db) == CONNECTION_OK)
			fprintf(stderr, "pg-ledger: client %ld: transaction %ld: %s", c, n, PQresultErrorMessage(r));
		PQclear(r);
		if (!ok)
			break;
		char line[32];
		int len = snprintf(line, sizeof(line), "%ld\n", n);
		if (write(fd, line, (size_t)len) != len) {
			fprintf(stderr, "pg-ledger: %s: %s\n", path, strerror(errno));
			break;
		}
	}
	PQfinish(db);
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: pg-ledger CONNINFO DIR RUN CLIENTS SCALE SEED\n");
		return 2;
	}
	conninfo = argv[1];
	dir = argv[2];
	run = atol(argv[3]);
	long clients = atol(argv[4]);
	scale = atol(argv[5]);
	seed = strtoull(argv[6], NULL, 10);
	if (clients < 1 || clients > 64 || scale < 1) {
		fprintf(stderr, "pg-ledger: CLIENTS 1..64, SCALE >= 1\n");
		return 2;
	}
	pthread_t th[64];
	for (long c = 0; c < clients; c++)
		if (pthread_create(&th[c], NULL, client, (void *)(intptr_t)c)) {
			fprintf(stderr, "pg-ledger: pthread_create failed\n");
			return 1;
		}
	for (long c = 0; c < clients; c++)
		pthread_join(th[c], NULL);
	return 0;
}
