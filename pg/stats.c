/*
 * pg-stats: the counters of a shared store, as every process of a cluster
 * under the preload library sees them (atomio_stats and atomio_lazy_stats:
 * the store's, over all its processes since the first opened it).
 * pg/bench.sh reads them before and after a run, to say what the page
 * writes cost: commits (page writes and size changes; how many lazily),
 * log syncs and batches (how many device flushes, how well they were
 * shared), what started the lazy groups' flushes (the delay, pressure, a
 * sync), reads that overlaid lazy groups, bytes logged and written home.
 *
 *   pg-stats LOG     one line: name=value ...
 *
 * Joins the store (no ATOMIO_EXCLUSIVE, no ATOMIO_CREATE) as the log's
 * owner must: run it as the user the server runs as.  It writes nothing and
 * leaves at once; a store no process holds is recovered by this open, as by
 * any first process.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>

#include "atomio.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: pg-stats LOG\n");
		return 2;
	}
	char err[512] = "";
	struct atomio_options o = {.errbuf = err, .errbuf_size = sizeof(err)};
	atomio *st;
	int r = atomio_open(argv[1], &o, &st);
	if (r < 0) {
		fprintf(stderr, "pg-stats: %s: %s%s%s\n", argv[1], atomio_strerror(r), err[0] ? ": " : "", err);
		return 3;
	}
	struct atomio_stats s;
	struct atomio_lazy_stats l;
	r = atomio_stats(st, &s);
	if (r == 0)
		r = atomio_lazy_stats(st, &l);
	if (r == 0)
		printf("commits=%llu batches=%llu log_syncs=%llu data_syncs=%llu checkpoints=%llu bytes_raw=%llu "
		       "bytes_logged=%llu bytes_home=%llu log_full_waits=%llu bytes_written_back=%llu "
		       "bytes_checkpointed=%llu lazy_commits=%llu lazy_eager=%llu syncs=%llu syncs_waited=%llu "
		       "flush_delay=%llu flush_press=%llu flush_sync=%llu lazy_reads=%llu lazy_waits=%llu "
		       "lazy_pending=%llu lazy_bytes=%llu\n",
		       (unsigned long long)s.commits, (unsigned long long)s.batches, (unsigned long long)s.log_syncs,
		       (unsigned long long)s.data_syncs, (unsigned long long)s.checkpoints,
		       (unsigned long long)s.bytes_raw, (unsigned long long)s.bytes_logged,
		       (unsigned long long)s.bytes_home, (unsigned long long)s.log_full_waits,
		       (unsigned long long)s.bytes_written_back, (unsigned long long)s.bytes_checkpointed,
		       (unsigned long long)l.lazy_commits, (unsigned long long)l.lazy_eager,
		       (unsigned long long)l.syncs, (unsigned long long)l.syncs_waited,
		       (unsigned long long)l.flush_delay, (unsigned long long)l.flush_press,
		       (unsigned long long)l.flush_sync, (unsigned long long)l.lazy_reads,
		       (unsigned long long)l.lazy_waits, (unsigned long long)l.lazy_pending,
		       (unsigned long long)l.lazy_bytes);
	(void)atomio_close(st);
	return r < 0 ? 3 : 0;
}
