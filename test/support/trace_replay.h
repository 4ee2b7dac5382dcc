/*
 * trace_replay.h: a trace of the system calls a run made (preload/trace.h's
 * format: the preload library's ATOMIO_PRELOAD_TRACE, t_sqlite_sim's ops
 * table), replayed into the simfs in use, for the crash points its hook
 * sees.  Used by t_preload_sim and t_sqlite_sim.
 */
#ifndef ATOMIO_TRACE_REPLAY_H
#define ATOMIO_TRACE_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "../../preload/trace.h"
#include "simfs.h"

/* mkdir -p of an absolute path in fs. */
void tr_mkdirs(struct simfs *fs, const char *path);

/* The whole file at path (the test fails if it cannot be read whole). */
uint8_t *tr_slurp(const char *path, size_t *len);

/* Replays t[0..len) through atomio_sys (the simfs the caller installed, with
 * its hook): each system call with the run's descriptors mapped to the
 * replay's (also in /proc/self/fd/N paths); a read-only open outside dir
 * (the store reads /sys) is not modelled.  Each record that is no system
 * call (TR_PWRITE, TR_PSYNC, TR_MARK) goes to mark(h, arg) in its place,
 * which fails the test on a kind it does not expect.  Returns the records
 * replayed. */
uint64_t tr_replay(const uint8_t *t, size_t len, const char *dir,
		   void (*mark)(const struct tr_hdr *h, void *arg), void *arg);

#endif
