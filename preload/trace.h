/*
 * trace.h: the record format of ATOMIO_PRELOAD_TRACE (real.c writes it,
 * test/t_preload_sim.c replays it into the crash simulator).  Native byte
 * order: a trace is read on the machine that wrote it.
 *
 * Each record: struct tr_hdr, then pathlen bytes of path (NUL-terminated;
 * TR_RENAME: "from\0to\0"), then datalen bytes of data (TR_WRITE).
 *   TR_OPEN      fd = the descriptor opened, flags = open flags, a = mode
 *   TR_CLOSE     fd
 *   TR_WRITE     fd, flags = RWF_* flags, a = offset, data
 *   TR_TRUNC     fd, a = new size
 *   TR_FSYNC, TR_FDATASYNC   fd
 *   TR_RENAME    (RENAME_NOREPLACE), TR_UNLINK: path
 *   TR_PWRITE    the program's write returned (a = bytes)
 *   TR_PSYNC     the program's sync returned (or an O_SYNC/O_DSYNC write's)
 *   TR_FALLOC    fd, flags = mode, a = offset, b = length (a new log's blocks)
 *   TR_MARK      what a test program was told, its own meaning in a and b
 *                (test/sqlite/t_sqlite_sim.c: a transaction's COMMIT returned)
 */
#ifndef ATOMIO_PRELOAD_TRACE_H
#define ATOMIO_PRELOAD_TRACE_H

#include <stdint.h>

enum { TR_OPEN = 1, TR_CLOSE, TR_WRITE, TR_TRUNC, TR_FSYNC, TR_FDATASYNC, TR_RENAME,
       TR_UNLINK, TR_PWRITE, TR_PSYNC, TR_FALLOC, TR_MARK };

struct tr_hdr {
	uint32_t kind;
	int32_t fd;
	int32_t flags;
	uint32_t pathlen;
	uint64_t a, b;
	uint64_t datalen;
};
_Static_assert(sizeof(struct tr_hdr) == 40, "trace record header");

#endif
