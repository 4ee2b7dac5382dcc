/*
 * turns.h: writer processes take turns at SQLite's write lock (turns.c).
 *
 * SQLite's locks never wait: a connection refused a lock gets SQLITE_BUSY,
 * and its busy handler sleeps (1, 2, 5, ... 100 ms) and tries again.  The
 * writer that just committed is back at the lock within microseconds, long
 * before any sleeper wakes, so with several writer processes one or two of
 * them take nearly every turn and the rest starve (issue 25: one process
 * committed 2 transactions in 3 s while another committed 3,174).
 *
 * The VFS keeps these words in its store's shared area (atomio_shared_area,
 * one per database, every process of the store maps it) so that:
 *   - a connection refused the write lock sleeps (the VFS's xSleep) on a
 *     futex rather than for the whole delay, and a connection that has taken
 *     the write lock TURNS_STREAK times since it last handed it off, and
 *     releases it while sleepers exist, wakes one of them (FUTEX_WAKE 1:
 *     the longest sleeper first) -- the HAND-OFF;
 *   - while a hand-off is pending, every other connection delays taking
 *     SHARED (at most TURNS_YIELD_NS) until the woken one has taken the write
 *     lock, or given up, so the writer that just released does not retake it
 *     first;
 *   - a writer waiting for EXCLUSIVE (readers still hold SHARED) is woken when
 *     a SHARED lock is dropped, instead of sleeping its whole delay.
 * Nothing is refused that SQLite would have granted, and nothing waits
 * without a bound: a delay is a slow lock, never a deadlock, and SQLite's
 * lock tests see the same answers.  A process that dies while it sleeps or
 * while a hand-off to it is pending costs the others one bounded yield.
 * The words are hints: nothing about the database depends on them.
 */
#ifndef ATOMIO_SQLITE_TURNS_H
#define ATOMIO_SQLITE_TURNS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "atomio.h"

/* Write transactions a connection commits before it hands the lock to a
 * sleeper.  Each change of writer costs the new one its page cache (SQLite
 * reads page 1, sees another process's change and drops its cache) and a
 * process wake-up, so a hand-off at every commit costs a fifth of the
 * throughput; measured at 8 processes against no turns (make
 * bench-sqlite-writers, docs/SQLITE.md): every 4: 0.79x, busiest/least
 * busy process 1.04; every 16: 0.89x, 1.16; every 64: 0.93x, 1.37. */
#define TURNS_STREAK 32

/* The longest a connection delays SHARED for a pending hand-off: a woken
 * sleeper is running well within it, even on a loaded machine. */
#define TURNS_YIELD_NS (2u * 1000000u)

struct turns {
	_Atomic uint32_t wseq;  /* futex: + 1 at each hand-off */
	_Atomic uint32_t nwait; /* connections sleeping for the write lock */
	_Atomic uint32_t tok;   /* futex: odd while a hand-off is pending */
	_Atomic uint32_t sseq;  /* futex: + 1 when SHARED is dropped while xwait */
	_Atomic uint32_t xwait; /* connections sleeping for EXCLUSIVE */
};
_Static_assert(sizeof(struct turns) <= ATOMIO_SHARED_AREA, "turns fit the shared area");

/* Before taking SHARED: wait (bounded) while a hand-off is pending to
 * someone else.  handed: the token this thread was handed (turns_sleep), or 0. */
void turns_yield(struct turns *t, uint32_t handed);
/* A hand-off is over: handed 0, whichever is pending (the write lock was
 * taken: the woken one, if not this, lost it to a connection that did not
 * yield, and sleeps again); else the one with that token, if it is still
 * pending (the one it was handed to was refused the lock, or left without
 * writing). */
void turns_settled(struct turns *t, uint32_t handed);
/* The write lock was released: hand it to a sleeper, if any (true: one was
 * woken). */
bool turns_released_write(struct turns *t);
/* A SHARED lock was dropped: wake a writer sleeping for EXCLUSIVE. */
void turns_released_shared(struct turns *t);
/* Sleep up to ns for the write lock (exclusive: for EXCLUSIVE, readers to
 * leave).  Returns the hand-off's token when this sleeper was handed the
 * lock, else 0. */
uint32_t turns_sleep(struct turns *t, bool exclusive, uint64_t ns);

#endif
