/*
 * engine_pick.c: how a batch's bytes reach the files, and which backend
 * (engine.h) a store uses.  Two backends do the same writes, with the same
 * durability, through the ops table:
 *
 *  - plain: one pwritev2 per write (the log write with RWF_DSYNC);
 *  - io_uring (liburing): the log write, the kernel fast path's atomic write,
 *    and the O_DIRECT home writes of a batch are queued on a ring and
 *    submitted with one io_uring_enter per stage; a batch's O_DIRECT home
 *    writes then run in parallel on the device instead of one after another.
 *    Writes that overlap inside a batch are split into successive waves, so
 *    the later one always lands last.  Each log write slot (commit.c) and
 *    the home stage have a ring of their own, so a ring needs no lock.
 *
 * ATOMIO_ENGINE_URING puts every write through rings.  The default (AUTO)
 * uses a ring only where it pays: the parallel O_DIRECT home writes of
 * ATOMIO_DIRECT_HOME stores, with the default ops table (engine_open says
 * why not the log write).  Anything that fails in a ring (setup refused with
 * EPERM or ENOSYS, a submission refused, a request the kernel cannot do
 * asynchronously) makes that write go the plain way instead, so io_uring can
 * never cost a store its durability or availability.
 *
 * HOME WRITES OF O_DIRECT FILES.  A home write needs no flush (the record is
 * durable and a checkpoint syncs the files), but an O_DIRECT write still waits
 * for the device, and a commit must not return before its home write is
 * issued: "after atomio_tx_commit returns 0, any read of the file returns the
 * new data".  That wait makes an O_DIRECT atomio_pwrite cost a log write plus
 * a device write (docs/PERFORMANCE.md, "The engine's options").  So by
 * default an O_DIRECT file's home writes go through a second, buffered
 * descriptor of the same file (its "twin"): the commit returns once the data
 * is in the page cache.  Reads stay coherent: Linux writes dirty page-cache
 * pages of a range back before an O_DIRECT read of that range returns
 * (filemap_write_and_wait_range in the generic and iomap direct-I/O paths),
 * so a direct reader sees the new data, and a buffered or mmap reader reads
 * the page cache itself.  An O_DIRECT write (the fast path) invalidates the
 * range's cached pages after writing them back.  The checkpoint fdatasyncs
 * the file and drops its now clean pages (POSIX_FADV_DONTNEED), so the page
 * cache holds at most one log's worth of an O_DIRECT file.  ATOMIO_DIRECT_HOME
 * writes home with O_DIRECT instead, on the commit's path.
 */
#include <stdlib.h>

#include "engine.h"
#include "shm.h"

int engine_open(atomio *st, uint32_t flags)
{
	st->engine = ATOMIO_ENGINE_PLAIN;
	st->eng = &engine_plain;
	/* AUTO: rings only with the real system calls (under a test backend a
	 * ring would write past its pwritev, unseen by a crash simulator), and
	 * only where they pay: a batch's O_DIRECT home writes, run in parallel.
	 * Not for the log write, which the commit waits for anyway: an O_DIRECT
	 * + RWF_DSYNC write through the ring is no faster alone and slower from
	 * many threads (its completion, which must sync, is handed to a kernel
	 * worker: docs/PERFORMANCE.md, "The engine's options"), and a process
	 * killed with a log write in flight keeps the store's lock for some
	 * milliseconds while the kernel tears its ring down. */
	bool home = (flags & ATOMIO_ENGINE_URING) ||
		    (!(flags & ATOMIO_ENGINE_PLAIN) && atomio_sys == &atomio_sys_linux);
	if (engine_uring_open(st, flags, home)) {
		st->engine = ATOMIO_ENGINE_URING;
		st->eng = &engine_uring;
	}
	return 0;
}

void engine_close(atomio *st)
{
	if (st->eng)
		st->eng->close(st);
	for (unsigned i = 0; i < LOG_SLOTS; i++) {
		free(st->slots[i].stage);
		st->slots[i].stage = NULL;
		st->slots[i].cap = 0;
	}
}
