/*
 * shared.c: several processes writing and reading the same protected files
 * through libatomio_preload.so (its one mode: one store for all), as
 * PostgreSQL's do: forked without exec from a parent that wrote first, one
 * killed while the others go on, a new one forked meanwhile, then all of
 * them killed at once; test/t_preload_shared.sh runs it and then checks the
 * files after the store's recovery.  A plain POSIX program: it knows
 * nothing of atomio.
 *
 *   shared run DIR NPROC WRITES SEED    the run; writes DIR/expect and ends
 *                                       with _exit (no destructor: a crash)
 *
 * The run is bounded by counts: one process killed once the processes made
 * WRITES/3 page writes, all of them once they made WRITES (the parent
 * only polls the count).  alarm() in every process is a watchdog only: a
 * survivor stalled for good fails the test instead of hanging it.
 *   shared check DIR                    the check (after recovery)
 *
 * The files: NF files of NS pages (8 KiB) each, "f0.p" ...; every page
 * holds (file, slot, version) and a checksum of its bytes.  A lock word per
 * page in shared memory (one writer of a page at a time, as PostgreSQL's
 * buffer locks) and the page's acknowledged version (set once pwrite
 * returned) and in-flight version.  A process that takes a page reads it
 * first: it must be exactly the acknowledged version, whichever process
 * wrote it ("reads return the newest write of any process"); then it writes
 * the next version.  Besides: "grow.p" extended a page at a time under a
 * lock (lseek(SEEK_END) must give the size another process's extension
 * left) and sometimes cut back with ftruncate or truncate(path); files
 * made with O_CREAT|O_EXCL, written, synced and unlinked while the others
 * write; opens O_RDWR of files that do not exist (ENOENT); fsync of files
 * other processes wrote.
 *
 * The check: each page is whole (its checksum) and its version is at least
 * the one the last fsync of its file made durable and at most the
 * acknowledged one (or the one in flight) when the processes were killed:
 * since issue 36 a write is a lazy group, durable at a sync (or within the
 * lazy window), and killing every process of the store is a crash that may
 * take the writes no sync covered (a suffix of the commit order; while one
 * process lives, nothing is lost: the run's single kill checks that
 * exactly).  grow.p (never synced) is a whole number of pages, each whole.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NF 3
#define NS 24
#define PG 8192
#define MAXP 16

struct page_state {
	_Atomic int lock;       /* pid of the holder, 0 free */
	_Atomic uint32_t acked; /* the version whose pwrite returned */
	_Atomic uint32_t flight; /* the version being written, 0 none */
	_Atomic uint32_t synced; /* a version an fsync of the file made durable */
};

struct shared {
	struct page_state pg[NF][NS];
	_Atomic int grow_lock;
	_Atomic uint32_t grow_acked, grow_flight; /* pages of grow.p */
	_Atomic uint64_t ops, reads_checked, errors;
	_Atomic int stop;
	char why[512];
};

static struct shared *S;
static const char *dir;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	char b[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	if (atomic_fetch_add(&S->errors, 1) == 0)
		snprintf(S->why, sizeof(S->why), "pid %d: %s (errno %s)", (int)getpid(), b, strerror(errno));
}

static char *P(const char *name)
{
	static char b[4][512];
	static int i;
	char *s = b[i++ % 4];
	snprintf(s, 512, "%s/%s", dir, name);
	return s;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static void page_fill(uint8_t *b, uint32_t f, uint32_t s, uint32_t v)
{
	uint64_t x = mix(((uint64_t)f << 48) ^ ((uint64_t)s << 32) ^ v);
	for (int i = 0; i < PG; i += 8) {
		x = mix(x + (uint64_t)i);
		memcpy(b + i, &x, 8);
	}
	memcpy(b, &f, 4);
	memcpy(b + 4, &s, 4);
	memcpy(b + 8, &v, 4);
}

/* The version a page holds, whole; -1 torn or foreign, 0 all zeros. */
static int64_t page_version(const uint8_t *b, uint32_t f, uint32_t s)
{
	static uint8_t want[PG];
	uint32_t v, ff, ss;
	memcpy(&ff, b, 4);
	memcpy(&ss, b + 4, 4);
	memcpy(&v, b + 8, 4);
	bool zero = true;
	for (int i = 0; i < PG && zero; i++)
		zero = b[i] == 0;
	if (zero)
		return 0;
	if (ff != f || ss != s)
		return -1;
	page_fill(want, f, s, v);
	return memcmp(want, b, PG) ? -1 : (int64_t)v;
}

static void lock(_Atomic int *w)
{
	int z = 0;
	while (!atomic_compare_exchange_weak(w, &z, (int)getpid())) {
		z = 0;
		sched_yield();
	}
}

static void unlock(_Atomic int *w) { atomic_store(w, 0); }

static uint64_t rnd;
static uint32_t next(void) { return (uint32_t)((rnd = mix(rnd + 0x9e3779b97f4a7c15ull)) >> 32); }

static void grow_step(int fd)
{
	static uint8_t b[PG];
	lock(&S->grow_lock);
	uint32_t n = atomic_load(&S->grow_acked);
	off_t end = lseek(fd, 0, SEEK_END);
	if (end != (off_t)n * PG)
		fail("grow.p: lseek(SEEK_END) %lld, another process's extension left %u pages", (long long)end, n);
	uint32_t r = next() % 8;
	if (r == 0 && n > 4) {
		/* cut back (VACUUM's truncation; DROP's truncate(path)) */
		uint32_t to = n / 2;
		atomic_store(&S->grow_flight, to);
		int e = next() & 1 ? ftruncate(fd, (off_t)to * PG) : truncate(P("grow.p"), (off_t)to * PG);
		if (e < 0)
			fail("grow.p: truncate to %u pages", to);
		atomic_store(&S->grow_acked, to);
	} else if (n < 200) {
		page_fill(b, 99, n % 1000, n);
		atomic_store(&S->grow_flight, n + 1);
		if (pwrite(fd, b, PG, (off_t)n * PG) != PG)
			fail("grow.p: extending to %u pages", n + 1);
		atomic_store(&S->grow_acked, n + 1);
	}
	atomic_store(&S->grow_flight, 0);
	unlock(&S->grow_lock);
}

static void temp_file(void)
{
	static uint8_t b[PG];
	char name[64];
	snprintf(name, sizeof(name), "t%d.p", (int)getpid());
	int fd = open(P(name), O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		fail("%s: open O_CREAT|O_EXCL", name);
		return;
	}
	if (open(P(name), O_RDWR | O_CREAT | O_EXCL, 0600) >= 0 || errno != EEXIST)
		fail("%s: a second O_CREAT|O_EXCL did not fail with EEXIST", name);
	page_fill(b, 98, 0, 1);
	if (pwrite(fd, b, PG, 0) != PG || fsync(fd) < 0)
		fail("%s: write and fsync", name);
	if (unlink(P(name)) < 0)
		fail("%s: unlink", name);
	close(fd);
}

/* fsync of file f: every write of its pages that returned before it, of
 * any process, is durable when it returns (atomio_sync of the file). */
static void sync_file(const int *fd, uint32_t f)
{
	uint32_t snap[NS];
	for (uint32_t s = 0; s < NS; s++)
		snap[s] = atomic_load(&S->pg[f][s].acked);
	if (fsync(fd[f]) < 0) {
		fail("fsync");
		return;
	}
	for (uint32_t s = 0; s < NS; s++) {
		uint32_t old = atomic_load(&S->pg[f][s].synced);
		while (old < snap[s] && !atomic_compare_exchange_weak(&S->pg[f][s].synced, &old, snap[s]))
			;
	}
}

static void child(int k, uint64_t seed)
{
	static uint8_t b[PG];
	alarm(120); /* a survivor stalled for good fails the test */
	rnd = seed * 1000 + (uint64_t)k;
	int fd[NF], gfd = open(P("grow.p"), O_RDWR);
	for (uint32_t f = 0; f < NF; f++) {
		char n[16];
		snprintf(n, sizeof(n), "f%u.p", f);
		/* as PostgreSQL opens a fork that may not exist */
		if (open(P("f9_vm.p"), O_RDWR) >= 0 || errno != ENOENT)
			fail("a missing file opened O_RDWR did not fail with ENOENT");
		fd[f] = open(P(n), O_RDWR);
		if (fd[f] < 0)
			fail("%s: open O_RDWR", n);
	}
	if (gfd < 0)
		fail("grow.p: open O_RDWR");
	while (!atomic_load(&S->stop) && !atomic_load(&S->errors)) {
		uint32_t f = next() % NF, s = next() % NS;
		struct page_state *p = &S->pg[f][s];
		lock(&p->lock);
		uint32_t v = atomic_load(&p->acked);
		if (pread(fd[f], b, PG, (off_t)s * PG) != PG)
			fail("f%u.p page %u: pread", f, s);
		int64_t got = page_version(b, f, s);
		if (got != (int64_t)v)
			fail("f%u.p page %u: read version %lld, the newest write (of any process) is %u", f, s,
			     (long long)got, v);
		atomic_fetch_add(&S->reads_checked, 1);
		page_fill(b, f, s, v + 1);
		atomic_store(&p->flight, v + 1);
		if (pwrite(fd[f], b, PG, (off_t)s * PG) != PG)
			fail("f%u.p page %u: pwrite", f, s);
		atomic_store(&p->acked, v + 1);
		atomic_store(&p->flight, 0);
		unlock(&p->lock);
		uint32_t r = next() % 64;
		if (r == 0)
			sync_file(fd, next() % NF);
		else if (r < 6)
			grow_step(gfd);
		else if (r == 7 && k == 0)
			temp_file();
		atomic_fetch_add(&S->ops, 1);
	}
	_exit(0);
}

/* The pages a killed process held: whichever of the two versions the file
 * has is the acknowledged one from now on; the locks are freed. */
static void release_dead(pid_t dead, int fd[NF], int gfd, int sfd)
{
	static uint8_t b[PG];
	/* A write of the dead process's is committed (in the store's read
	 * index until it is home, every process reads it; the survivors
	 * commit it) or never will be.  One write of this process's own first
	 * (committed after it) all the same. */
	memset(b, 0, sizeof(b));
	if (pwrite(sfd, b, PG, 0) != PG)
		fail("sync.p: pwrite");
	for (uint32_t f = 0; f < NF; f++)
		for (uint32_t s = 0; s < NS; s++) {
			struct page_state *p = &S->pg[f][s];
			if (atomic_load(&p->lock) != dead)
				continue;
			int64_t got = pread(fd[f], b, PG, (off_t)s * PG) == PG ? page_version(b, f, s) : -2;
			if (got != atomic_load(&p->acked) && got != atomic_load(&p->flight))
				fail("f%u.p page %u after its writer was killed: version %lld, acked %u", f, s,
				     (long long)got, atomic_load(&p->acked));
			if (got > 0)
				atomic_store(&p->acked, (uint32_t)got);
			atomic_store(&p->flight, 0);
			unlock(&p->lock);
		}
	if (atomic_load(&S->grow_lock) == dead) {
		off_t end = lseek(gfd, 0, SEEK_END);
		uint32_t n = (uint32_t)(end / PG);
		if (end % PG || (n != atomic_load(&S->grow_acked) && n != atomic_load(&S->grow_flight)))
			fail("grow.p after its writer was killed: %lld bytes", (long long)end);
		atomic_store(&S->grow_acked, n);
		atomic_store(&S->grow_flight, 0);
		unlock(&S->grow_lock);
	}
}

static int run(int nproc, uint64_t writes, uint64_t seed)
{
	static uint8_t b[PG];
	S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (S == MAP_FAILED)
		return 2;
	/* The parent writes first: it holds the store when it forks (a
	 * child must not use its handle, and joins with one of its own). */
	int fd[NF];
	for (uint32_t f = 0; f < NF; f++) {
		char n[16];
		snprintf(n, sizeof(n), "f%u.p", f);
		fd[f] = open(P(n), O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd[f] < 0) {
			perror(n);
			return 2;
		}
		for (uint32_t s = 0; s < NS; s++) {
			page_fill(b, f, s, 1);
			if (pwrite(fd[f], b, PG, (off_t)s * PG) != PG) {
				perror("pwrite");
				return 2;
			}
			S->pg[f][s].acked = 1;
			S->pg[f][s].synced = 1; /* by the fsync below */
		}
		if (fsync(fd[f]) < 0) {
			perror("fsync");
			return 2;
		}
	}
	int gfd = open(P("grow.p"), O_RDWR | O_CREAT | O_EXCL, 0600);
	int sfd = open(P("sync.p"), O_RDWR | O_CREAT | O_EXCL, 0600);
	if (gfd < 0 || sfd < 0) {
		perror("grow.p, sync.p");
		return 2;
	}
	pid_t pids[MAXP];
	int n = nproc < MAXP ? nproc : MAXP;
	for (int k = 0; k < n; k++) {
		pids[k] = fork();
		if (pids[k] == 0)
			child(k, seed);
	}
	struct timespec t = {0, 5 * 1000 * 1000};
	int killed = 0, joined = 0;
	uint64_t ops_at_kill = 0;
	alarm(300); /* watchdog: the counts below are the bound */
	while (!atomic_load(&S->errors) && atomic_load(&S->ops) < writes / 3)
		nanosleep(&t, NULL);
	if (!atomic_load(&S->errors)) {
		/* one killed anywhere: the others go on */
		int v = (int)(seed % (uint64_t)n);
		kill(pids[v], SIGKILL);
		waitpid(pids[v], NULL, 0);
		release_dead(pids[v], fd, gfd, sfd);
		killed = 1;
		ops_at_kill = atomic_load(&S->ops);
		/* and a new one joins */
		pids[v] = fork();
		if (pids[v] == 0)
			child(v + 100, seed);
		joined = 1;
	}
	while (!atomic_load(&S->errors) && atomic_load(&S->ops) < writes)
		nanosleep(&t, NULL);
	uint64_t ops_after = atomic_load(&S->ops) - ops_at_kill;
	/* all of them killed at once, the parent too (_exit below): a crash
	 * that keeps the page cache; recovery is the checker's */
	for (int k = 0; k < n; k++)
		kill(pids[k], SIGKILL);
	for (int k = 0; k < n; k++)
		waitpid(pids[k], NULL, 0);
	FILE *e = fopen(P("expect"), "w");
	for (uint32_t f = 0; e && f < NF; f++)
		for (uint32_t s = 0; s < NS; s++)
			fprintf(e, "%u %u %u %u %u\n", f, s, atomic_load(&S->pg[f][s].acked),
				atomic_load(&S->pg[f][s].flight), atomic_load(&S->pg[f][s].synced));
	if (e) {
		fprintf(e, "grow %u %u\n", atomic_load(&S->grow_acked), atomic_load(&S->grow_flight));
		fclose(e);
	}
	printf("%d processes (%d killed, %d joined), %llu writes (%llu after the kill), %llu reads checked, "
	       "%llu errors\n", n, killed, joined, (unsigned long long)atomic_load(&S->ops),
	       (unsigned long long)ops_after, (unsigned long long)atomic_load(&S->reads_checked),
	       (unsigned long long)atomic_load(&S->errors));
	if (atomic_load(&S->errors))
		printf("first error: %s\n", S->why);
	else if (ops_after < 10)
		printf("the survivors made only %llu writes after the kill\n", (unsigned long long)ops_after);
	fflush(stdout);
	_exit(atomic_load(&S->errors) || ops_after < 10 ? 1 : 0);
}

static int check(void)
{
	static uint8_t b[PG];
	static struct shared s0;
	S = &s0;
	FILE *e = fopen(P("expect"), "r");
	if (!e) {
		perror("expect");
		return 2;
	}
	int fd[NF];
	for (uint32_t f = 0; f < NF; f++) {
		char n[16];
		snprintf(n, sizeof(n), "f%u.p", f);
		fd[f] = open(P(n), O_RDONLY);
		if (fd[f] < 0) {
			perror(n);
			return 2;
		}
	}
	unsigned f, s, a, fl, sy, pages = 0, older = 0;
	while (fscanf(e, "%u %u %u %u %u\n", &f, &s, &a, &fl, &sy) == 5) {
		int64_t got = pread(fd[f], b, PG, (off_t)s * PG) == PG ? page_version(b, f, s) : -2;
		if (got < 1 || got < (int64_t)sy || (got > a && !(fl && got == fl)))
			fail("f%u.p page %u: version %lld after recovery, synced %u, acknowledged %u, in flight %u", f,
			     s, (long long)got, sy, a, fl);
		older += got >= 1 && got < a;
		pages++;
	}
	if (fscanf(e, "grow %u %u", &a, &fl) != 2)
		fail("expect: no grow line");
	int gfd = open(P("grow.p"), O_RDONLY);
	struct stat sb;
	if (gfd < 0 || fstat(gfd, &sb) < 0)
		fail("grow.p");
	else if (sb.st_size % PG || sb.st_size / PG > 200)
		fail("grow.p: %lld bytes after recovery (acknowledged %u pages, in flight %u)", (long long)sb.st_size,
		     a, fl);
	else
		for (uint32_t i = 0; i < sb.st_size / PG; i++)
			if (pread(gfd, b, PG, (off_t)i * PG) != PG || page_version(b, 99, i % 1000) != i)
				fail("grow.p page %u torn or wrong", i);
	if (S->errors) {
		printf("check: %s\n", S->why);
		return 1;
	}
	printf("check: %u pages whole, %u of them older than acknowledged (not synced when every process was "
	       "killed), none older than synced; grow.p %lld pages whole (acknowledged %u)\n",
	       pages, older, (long long)sb.st_size / PG, a);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "run")) {
		dir = argv[2];
		return run(atoi(argv[3]), strtoull(argv[4], NULL, 0), strtoull(argv[5], NULL, 0));
	}
	if (argc == 3 && !strcmp(argv[1], "check")) {
		dir = argv[2];
		return check();
	}
	fprintf(stderr, "usage: shared run DIR NPROC WRITES SEED | shared check DIR\n");
	return 2;
}
