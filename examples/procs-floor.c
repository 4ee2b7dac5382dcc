/*
 * procs-floor: what a process costs more than a thread on this machine, for
 * the two things a commit of another process's group does that a thread's
 * does not (docs/PERFORMANCE.md, "Processes as cheap as threads"):
 *
 *  1. a wake-up across processes: two writers hand a futex word on shared
 *     memory back and forth N times, both pinned to one CPU (so every
 *     hand-off is a wake and a switch), as threads of one process and as
 *     two processes; CPU time per hand-off (getrusage, both sides);
 *  2. a shared page's first touch in a process: a 32 MiB file in /dev/shm
 *     mapped and written one byte per 4 KiB page, first touch and second,
 *     with and without MADV_POPULATE_WRITE first; CPU time per page.
 *
 * A measurement of the machine (its CPU, its hypervisor, its kernel), not
 * of atomio: the floor below which a process's commit cannot go.
 *
 * usage: procs-floor [-n HANDOFFS] [-r REPS]
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static _Atomic unsigned *word;
static unsigned handoffs = 100000;

static double cpu_of(int who)
{
	struct rusage u;
	getrusage(who, &u);
	return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
	       (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static void pin0(void)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(0, &s);
	(void)sched_setaffinity(0, sizeof(s), &s);
}

/* One side: waits for its turn (even or odd values), passes it on. */
static void *side(void *arg)
{
	unsigned me = (unsigned)(uintptr_t)arg;
	pin0();
	for (unsigned i = 0; i < handoffs; i++) {
		unsigned want = 2 * i + me, v;
		while ((v = atomic_load(word)) != want)
			syscall(SYS_futex, word, FUTEX_WAIT, v, NULL, NULL, 0);
		atomic_store(word, want + 1);
		syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
	}
	return NULL;
}

/* CPU microseconds per hand-off, threads (procs 0) or processes. */
static double handoff_us(int procs)
{
	atomic_store(word, 0);
	double c0 = cpu_of(RUSAGE_SELF) + cpu_of(RUSAGE_CHILDREN);
	if (procs) {
		pid_t p = fork();
		if (p < 0)
			return -1;
		if (p == 0) {
			side((void *)1);
			_exit(0);
		}
		side((void *)0);
		waitpid(p, NULL, 0);
	} else {
		pthread_t t;
		if (pthread_create(&t, NULL, side, (void *)1))
			return -1;
		side((void *)0);
		pthread_join(t, NULL);
	}
	return (cpu_of(RUSAGE_SELF) + cpu_of(RUSAGE_CHILDREN) - c0) * 1e6 / (2.0 * handoffs);
}

/* In a child: CPU microseconds per page of a first and a second touch of a
 * shared 32 MiB mapping (populated first or not), into out[0..2]. */
static void touch_child(const char *path, int populate, double *out)
{
	size_t len = 32u << 20;
	int fd = open(path, O_RDWR);
	char *p = fd < 0 ? MAP_FAILED : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		_exit(1);
	double c0 = cpu_of(RUSAGE_SELF);
	if (populate)
		(void)madvise(p, len, MADV_POPULATE_WRITE);
	double c1 = cpu_of(RUSAGE_SELF);
	for (size_t k = 0; k < len; k += 4096)
		p[k]++;
	double c2 = cpu_of(RUSAGE_SELF);
	for (size_t k = 0; k < len; k += 4096)
		p[k]++;
	double c3 = cpu_of(RUSAGE_SELF), pages = (double)(len / 4096);
	out[0] = (c1 - c0) * 1e6 / pages;
	out[1] = (c2 - c1) * 1e6 / pages;
	out[2] = (c3 - c2) * 1e6 / pages;
	_exit(0);
}

int main(int argc, char **argv)
{
	unsigned reps = 3;
	for (int c; (c = getopt(argc, argv, "n:r:")) != -1;) {
		if (c == 'n')
			handoffs = (unsigned)strtoul(optarg, NULL, 10);
		else if (c == 'r')
			reps = (unsigned)strtoul(optarg, NULL, 10);
		else {
			fprintf(stderr, "usage: procs-floor [-n HANDOFFS] [-r REPS]\n");
			return 2;
		}
	}
	word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	double *res = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (word == MAP_FAILED || res == MAP_FAILED)
		return 1;
	char path[64];
	snprintf(path, sizeof(path), "/dev/shm/procs-floor-%d", (int)getpid());
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || ftruncate(fd, 32u << 20) < 0) {
		fprintf(stderr, "procs-floor: %s: %s\n", path, strerror(errno));
		return 1;
	}
	close(fd);
	for (unsigned r = 0; r < reps; r++) {
		double t = handoff_us(0), p = handoff_us(1);
		printf("wake-up and switch, pinned to one CPU: threads %.2f us CPU per hand-off, processes %.2f "
		       "(+%.2f)\n", t, p, p - t);
		for (int pop = 0; pop < 2; pop++) {
			pid_t c = fork();
			if (c == 0)
				touch_child(path, pop, res);
			waitpid(c, NULL, 0);
			printf("a shared page in a new process%s: first touch %.2f us CPU per page, second %.3f"
			       " (MADV_POPULATE_WRITE itself: %.2f)\n", pop ? ", populated first" : "", res[1],
			       res[2], res[0]);
		}
	}
	unlink(path);
	return 0;
}
