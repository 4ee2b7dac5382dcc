/*
 * atomio_fio.so: an fio external ioengine that writes through atomio.
 *
 *   fio --ioengine=external:build/atomio_fio.so --filename=/srv/t/a.dat ...
 *
 * Every fio write joins the open atomic group (atomio_tx); a group commits
 * when it holds atomio_group_writes writes, or at fio's fsync=N/fdatasync=N
 * (atomio_sync_ends_group).  A write completes, for fio, only when its group
 * is durable: so fio's latencies are commit latencies and fio's verify state
 * (verify_state_save) lists only writes that survive a crash.  Reads go
 * through atomio_pread, so fio's verify= sees committed data.
 *
 * When more than one group can be in flight (iodepth > atomio_group_writes),
 * groups are committed with atomio_tx_commit_async and completed by
 * atomio_poll in getevents; otherwise atomio_tx_commit commits in queue().
 *
 * Built against the headers of the fio it is loaded into (mk/fio.mk); it
 * refuses any other fio version, whose structures may differ.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>

#include "fio.h"
#include "optgroup.h"

#include <atomio.h>

#ifndef ATOMIO_FIO_BUILT_FOR
#error "ATOMIO_FIO_BUILT_FOR: the FIO_VERSION of the fio source this is built against"
#endif

struct afio_options {
	void *pad; /* fio: an option at offset 0 reads as "no option struct" */
	char *log;
	unsigned long long log_size;
	unsigned int group_writes;
	unsigned int sync_ends_group;
	unsigned int engine;
	unsigned int compress;
	unsigned int direct_home;
	unsigned int ckpt_percent;
	unsigned int stats;
};

static struct fio_option options[] = {
	{
		.name = "atomio_log",
		.lname = "atomio log",
		.type = FIO_OPT_STR_STORE,
		.off1 = offsetof(struct afio_options, log),
		.help = "atomio log file (default: the first file's name + .atomio-log); "
			"jobs in one process (thread=1) naming the same log share one store",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "atomio_log_size",
		.lname = "atomio log size",
		.type = FIO_OPT_STR_VAL,
		.off1 = offsetof(struct afio_options, log_size),
		.help = "record area of a new log (an existing log keeps its size; "
			"0 = the library's default, 1 GiB)",
		.def = "0",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "atomio_group_writes",
		.lname = "writes per atomic group",
		.type = FIO_OPT_INT,
		.off1 = offsetof(struct afio_options, group_writes),
		.help = "fio writes per atomic group (1: every write atomic by itself); "
			"iodepth/atomio_group_writes groups are in flight",
		.def = "1",
		.minval = 1,
		.maxval = 65536,
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "atomio_sync_ends_group",
		.lname = "fsync ends group",
		.type = FIO_OPT_BOOL,
		.off1 = offsetof(struct afio_options, sync_ends_group),
		.help = "fio's fsync=N/fdatasync=N commit the open group and complete when "
			"every earlier group is durable (0: they complete at once, groups end by count)",
		.def = "1",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "atomio_engine",
		.lname = "atomio engine",
		.type = FIO_OPT_STR,
		.off1 = offsetof(struct afio_options, engine),
		.help = "how atomio issues its writes",
		.def = "auto",
		.posval = {
			{ .ival = "auto", .oval = 0,
			  .help = "io_uring where it pays (ATOMIO_DIRECT_HOME), else system calls" },
			{ .ival = "plain", .oval = ATOMIO_ENGINE_PLAIN,
			  .help = "ATOMIO_ENGINE_PLAIN: one system call per I/O" },
			{ .ival = "uring", .oval = ATOMIO_ENGINE_URING,
			  .help = "ATOMIO_ENGINE_URING: every write through io_uring" },
		},
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "atomio_compress",
		.lname = "atomio compression",
		.type = FIO_OPT_BOOL,
		.off1 = offsetof(struct afio_options, compress),
		.help = "LZ4-compress log records where that makes them shorter "
			"(0: ATOMIO_NO_COMPRESS)",
		.def = "1",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "atomio_direct_home",
		.lname = "atomio direct home",
		.type = FIO_OPT_BOOL,
		.off1 = offsetof(struct afio_options, direct_home),
		.help = "ATOMIO_DIRECT_HOME: with direct=1, write home with O_DIRECT on the "
			"commit's path (default: through the page cache until a checkpoint)",
		.def = "0",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "atomio_ckpt_percent",
		.lname = "atomio checkpoint percent",
		.type = FIO_OPT_INT,
		.off1 = offsetof(struct afio_options, ckpt_percent),
		.help = "background checkpoint when the log is this full (0: atomio's default, 50)",
		.def = "0",
		.minval = 0,
		.maxval = 99,
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "atomio_stats",
		.lname = "atomio statistics",
		.type = FIO_OPT_BOOL,
		.off1 = offsetof(struct afio_options, stats),
		.help = "when the store closes, print atomio_stats() (commits, log writes, "
			"device waits, checkpoints) on stderr",
		.def = "0",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = NULL,
	},
};

/* One store per log path in this process, shared by the jobs (threads) that
 * name it: atomio locks a log against a second opener, and jobs of one store
 * share its log writes (group commit). */
struct afio_store {
	struct afio_store *next;
	char *path;
	atomio *st;
	unsigned refs;
	uint32_t flags;
	bool stats;
};
static pthread_mutex_t stores_lock = PTHREAD_MUTEX_INITIALIZER;
static struct afio_store *stores;

struct afio_job;

/* A group: the fio io_us that complete when its tx is durable (its writes
 * and the syncs that wait for it). */
struct afio_group {
	struct afio_group *next_free;
	struct afio_job *job;
	atomio_tx *tx;
	unsigned writes;
	unsigned n;
	struct io_u **m;
};

struct afio_job {
	struct afio_store *store;
	atomio *st;
	unsigned group_writes;
	unsigned sync_ends_group;
	bool async;
	unsigned cap; /* io_us a group may hold: all fio has in flight */
	struct afio_group *open;
	/* Under mu: asynchronous completions may be delivered by another job's
	 * atomio_poll when jobs share a store. */
	pthread_mutex_t mu;
	struct afio_group *last;  /* last group submitted asynchronously, in flight */
	unsigned inflight;        /* groups submitted asynchronously, not yet done */
	struct afio_group *free;
	struct io_u **done;       /* ring of completed io_us, cap entries */
	unsigned dhead, dcount;
	struct io_u **events;     /* what getevents returned, for event() */
	struct afio_group *gpool; /* the groups, cap of them */
	struct io_u **mpool;      /* their member arrays, cap entries each */
	bool reported;
};

static int afio_errno(int r)
{
	/* fio prints io_u->error with strerror: atomio's own codes are not
	 * errnos, so they show as EIO (the log line names them). */
	if (r <= -ATOMIO_EBASE)
		return EIO;
	return -r;
}

static void afio_fail(struct afio_job *j, struct io_u *io_u, int r, const char *what)
{
	io_u->error = afio_errno(r);
	if (!j->reported) {
		j->reported = true;
		log_err("atomio: %s: %s\n", what, atomio_strerror(r));
	}
}

/* Under j->mu. */
static void push_done(struct afio_job *j, struct io_u *io_u)
{
	j->done[(j->dhead + j->dcount) % j->cap] = io_u;
	j->dcount++;
}

static struct afio_group *group_get(struct afio_job *j)
{
	pthread_mutex_lock(&j->mu);
	struct afio_group *g = j->free;
	if (g)
		j->free = g->next_free;
	pthread_mutex_unlock(&j->mu);
	if (g) {
		g->n = 0;
		g->writes = 0;
		g->tx = NULL;
	}
	return g;
}

/* Completes every member of g but `except` with result r and frees g.
 * Under j->mu. */
static void group_finish(struct afio_job *j, struct afio_group *g, int r, struct io_u *except)
{
	for (unsigned i = 0; i < g->n; i++) {
		struct io_u *u = g->m[i];
		if (r < 0)
			afio_fail(j, u, r, "commit");
		if (u != except)
			push_done(j, u);
	}
	g->n = 0;
	g->next_free = j->free;
	j->free = g;
}

static void afio_done(void *arg, int result)
{
	struct afio_group *g = arg;
	struct afio_job *j = g->job;
	pthread_mutex_lock(&j->mu);
	if (j->last == g)
		j->last = NULL;
	j->inflight--;
	group_finish(j, g, result, NULL);
	pthread_mutex_unlock(&j->mu);
}

/* Commits the open group.  `cur` is the io_u being queued that closed it (or
 * NULL from getevents): its status is the return value, the other members
 * complete through getevents. */
static enum fio_q_status submit(struct afio_job *j, struct io_u *cur)
{
	struct afio_group *g = j->open;
	j->open = NULL;
	atomio_tx *tx = g->tx;
	g->tx = NULL;
	if (!tx) { /* only syncs: nothing to commit, nothing earlier in flight */
		pthread_mutex_lock(&j->mu);
		group_finish(j, g, 0, cur);
		pthread_mutex_unlock(&j->mu);
		return FIO_Q_COMPLETED;
	}
	if (j->async) {
		pthread_mutex_lock(&j->mu);
		j->last = g;
		j->inflight++;
		pthread_mutex_unlock(&j->mu);
		int r = atomio_tx_commit_async(tx, afio_done, g);
		if (r < 0) { /* tx freed, afio_done never called */
			pthread_mutex_lock(&j->mu);
			if (j->last == g)
				j->last = NULL;
			j->inflight--;
			group_finish(j, g, r, NULL);
			pthread_mutex_unlock(&j->mu);
		}
		return FIO_Q_QUEUED;
	}
	int r = atomio_tx_commit(tx);
	pthread_mutex_lock(&j->mu);
	group_finish(j, g, r, cur);
	pthread_mutex_unlock(&j->mu);
	return cur ? FIO_Q_COMPLETED : FIO_Q_QUEUED;
}

static int file_id(struct fio_file *f)
{
	return (int)f->engine_pos;
}

static enum fio_q_status afio_queue(struct thread_data *td, struct io_u *io_u)
{
	struct afio_job *j = td->io_ops_data;
	struct fio_file *f = io_u->file;

	/* FIO_ASYNCIO_SETS_ISSUE_TIME: a write's latency runs from here to the
	 * durability of its group, also when queue() commits it. */
	if (fio_fill_issue_time(td))
		fio_gettime(&io_u->issue_time, NULL);

	switch (io_u->ddir) {
	case DDIR_READ: {
		ssize_t r = atomio_pread(j->st, file_id(f), io_u->xfer_buf, io_u->xfer_buflen,
					 (off_t)io_u->offset);
		if (r < 0)
			afio_fail(j, io_u, (int)r, "atomio_pread");
		else
			io_u->resid = io_u->xfer_buflen - (unsigned long long)r;
		return FIO_Q_COMPLETED;
	}
	case DDIR_WRITE: {
		if (j->group_writes == 1 && !j->async) {
			/* A group of one write, committed here: atomio_pwrite, the
			 * call atomio's own benchmark makes. */
			ssize_t r = atomio_pwrite(j->st, file_id(f), io_u->xfer_buf,
						  io_u->xfer_buflen, (off_t)io_u->offset);
			if (r < 0)
				afio_fail(j, io_u, (int)r, "atomio_pwrite");
			return FIO_Q_COMPLETED;
		}
		if (!j->open) {
			j->open = group_get(j);
			if (!j->open) { /* cannot happen: cap groups for cap io_us */
				io_u->error = EBUSY;
				return FIO_Q_COMPLETED;
			}
		}
		struct afio_group *g = j->open;
		if (!g->tx) {
			int r = atomio_tx_begin(j->st, &g->tx);
			if (r < 0) {
				g->tx = NULL;
				afio_fail(j, io_u, r, "atomio_tx_begin");
				return FIO_Q_COMPLETED;
			}
		}
		int r = atomio_tx_write(g->tx, file_id(f), io_u->xfer_buf, io_u->xfer_buflen,
					(off_t)io_u->offset);
		if (r < 0) { /* the group is unchanged and stays usable */
			afio_fail(j, io_u, r, "atomio_tx_write");
			return FIO_Q_COMPLETED;
		}
		g->m[g->n++] = io_u;
		if (++g->writes >= j->group_writes)
			return submit(j, io_u);
		return FIO_Q_QUEUED;
	}
	case DDIR_SYNC:
	case DDIR_DATASYNC:
	case DDIR_SYNC_FILE_RANGE:
		/* Every commit is durable by itself: a sync only marks a group's end. */
		if (!j->sync_ends_group)
			return FIO_Q_COMPLETED;
		if (j->open && j->open->n > 0) {
			j->open->m[j->open->n++] = io_u;
			return submit(j, io_u);
		}
		/* No open group: the sync is done when the last group in flight is
		 * (callbacks run in commit order, so every earlier one is too). */
		pthread_mutex_lock(&j->mu);
		if (j->last) {
			j->last->m[j->last->n++] = io_u;
			pthread_mutex_unlock(&j->mu);
			return FIO_Q_QUEUED;
		}
		pthread_mutex_unlock(&j->mu);
		return FIO_Q_COMPLETED;
	default:
		io_u->error = EOPNOTSUPP;
		return FIO_Q_COMPLETED;
	}
}

static int afio_getevents(struct thread_data *td, unsigned int min, unsigned int max,
			  const struct timespec *t)
{
	struct afio_job *j = td->io_ops_data;
	long timeout = -1, waited = 0;
	if (t)
		timeout = (long)t->tv_sec * 1000 + t->tv_nsec / 1000000;

	for (;;) {
		if (j->async) {
			int r = atomio_poll(j->st, 0);
			if (r < 0)
				return r;
		}
		pthread_mutex_lock(&j->mu);
		unsigned have = j->dcount, inflight = j->inflight;
		pthread_mutex_unlock(&j->mu);
		if (have >= min || have >= max)
			break;
		if (j->open && j->open->n > 0 && inflight == 0) {
			/* fio waits for writes of a group that fio's queue depth will
			 * not let fill: commit it short rather than never. */
			submit(j, NULL);
			continue;
		}
		if (inflight == 0 || (timeout >= 0 && waited >= timeout))
			break;
		/* Bounded wait: with a shared store another job's poll may run
		 * our callbacks, and then this one waits for someone else's. */
		int r = atomio_poll(j->st, 10);
		if (r < 0)
			return r;
		waited += 10;
	}

	pthread_mutex_lock(&j->mu);
	unsigned n = j->dcount < max ? j->dcount : max;
	for (unsigned i = 0; i < n; i++) {
		j->events[i] = j->done[j->dhead];
		j->dhead = (j->dhead + 1) % j->cap;
	}
	j->dcount -= n;
	pthread_mutex_unlock(&j->mu);
	return (int)n;
}

static struct io_u *afio_event(struct thread_data *td, int event)
{
	struct afio_job *j = td->io_ops_data;
	return j->events[event];
}

static void store_put(struct afio_store *s)
{
	pthread_mutex_lock(&stores_lock);
	if (--s->refs == 0) {
		for (struct afio_store **p = &stores; *p; p = &(*p)->next)
			if (*p == s) {
				*p = s->next;
				break;
			}
		struct atomio_stats a;
		if (s->stats && atomio_stats(s->st, &a) == 0)
			fprintf(stderr,
				"atomio: %s: %llu commits, %llu log writes, %llu log syncs "
				"(%.3f per commit), %llu checkpoints, %llu data syncs, "
				"%llu bytes logged for %llu raw\n",
				s->path, (unsigned long long)a.commits, (unsigned long long)a.batches,
				(unsigned long long)a.log_syncs,
				a.commits ? (double)a.log_syncs / (double)a.commits : 0.0,
				(unsigned long long)a.checkpoints, (unsigned long long)a.data_syncs,
				(unsigned long long)a.bytes_logged, (unsigned long long)a.bytes_raw);
		int r = atomio_close(s->st);
		if (r < 0)
			log_err("atomio: closing %s: %s\n", s->path, atomio_strerror(r));
		free(s->path);
		free(s);
	}
	pthread_mutex_unlock(&stores_lock);
}

static struct afio_store *store_get(struct thread_data *td, const char *path,
				    const struct afio_options *o, uint32_t flags)
{
	pthread_mutex_lock(&stores_lock);
	struct afio_store *s;
	for (s = stores; s; s = s->next)
		if (!strcmp(s->path, path))
			break;
	if (s) {
		if (s->flags != flags) {
			log_err("atomio: job %s: %s is already open with other atomio options\n",
				td->o.name, path);
			s = NULL;
		} else {
			s->refs++;
		}
		pthread_mutex_unlock(&stores_lock);
		return s;
	}
	char err[256] = "";
	struct atomio_options ao = {
		.log_size = o->log_size,
		.flags = flags,
		.ckpt_percent = o->ckpt_percent,
		.errbuf = err,
		.errbuf_size = sizeof err,
	};
	atomio *st;
	int r = atomio_open(path, &ao, &st);
	if (r < 0) {
		log_err("atomio: opening log %s: %s%s%s\n", path, atomio_strerror(r),
			err[0] ? ": " : "", err);
		if (r == -EBUSY)
			log_err("atomio: the log is open elsewhere; jobs sharing a log must be "
				"threads of one fio (thread=1)\n");
		pthread_mutex_unlock(&stores_lock);
		return NULL;
	}
	struct atomio_stats stats;
	/* On stderr itself: fio's log_info and log_err go into --output,
	 * where a line would break --output-format=json. */
	if (atomio_stats(st, &stats) == 0 && stats.groups_recovered)
		fprintf(stderr, "atomio: %s: recovered %llu committed groups\n", path,
			 (unsigned long long)stats.groups_recovered);
	s = calloc(1, sizeof *s);
	if (s)
		s->path = strdup(path);
	if (!s || !s->path) {
		if (s)
			free(s);
		atomio_close(st);
		pthread_mutex_unlock(&stores_lock);
		return NULL;
	}
	s->st = st;
	s->refs = 1;
	s->flags = flags;
	s->stats = o->stats;
	s->next = stores;
	stores = s;
	pthread_mutex_unlock(&stores_lock);
	return s;
}

static void job_free(struct afio_job *j)
{
	if (!j)
		return;
	pthread_mutex_destroy(&j->mu);
	free(j->gpool);
	free(j->mpool);
	free(j->done);
	free(j->events);
	free(j);
}

static int afio_init(struct thread_data *td)
{
	struct afio_options *o = td->eo;
	if (td->o.iodepth < 1)
		return 1;
	if (!td->files_index && !o->log) {
		log_err("atomio: job %s: no file, and no atomio_log\n", td->o.name);
		return 1;
	}
	char defpath[PATH_MAX];
	const char *path = o->log;
	if (!path) {
		if (snprintf(defpath, sizeof defpath, "%s.atomio-log",
			     td->files[0]->file_name) >= (int)sizeof defpath)
			return 1;
		path = defpath;
	}
	uint32_t flags = ATOMIO_CREATE | o->engine;
	if (!o->compress)
		flags |= ATOMIO_NO_COMPRESS;
	if (o->direct_home)
		flags |= ATOMIO_DIRECT_HOME;

	struct afio_job *j = calloc(1, sizeof *j);
	if (!j)
		return 1;
	pthread_mutex_init(&j->mu, NULL);
	j->group_writes = o->group_writes ? o->group_writes : 1;
	j->sync_ends_group = o->sync_ends_group;
	/* More than one group in flight: commit asynchronously, so fio's queue
	 * depth is groups waiting for one shared log write. */
	j->async = td->o.iodepth > j->group_writes;
	j->cap = td->o.iodepth + 1;
	unsigned ngroups = j->cap;
	j->done = calloc(j->cap, sizeof *j->done);
	j->events = calloc(j->cap, sizeof *j->events);
	struct afio_group *gs = calloc(ngroups, sizeof *gs);
	struct io_u **members = calloc((size_t)ngroups * j->cap, sizeof *members);
	j->gpool = gs;
	j->mpool = members;
	if (!j->done || !j->events || !gs || !members) {
		job_free(j);
		return 1;
	}
	for (unsigned i = 0; i < ngroups; i++) {
		gs[i].job = j;
		gs[i].m = members + (size_t)i * j->cap;
		gs[i].next_free = j->free;
		j->free = &gs[i];
	}
	j->store = store_get(td, path, o, flags);
	if (!j->store) {
		job_free(j);
		return 1;
	}
	j->st = j->store->st;
	td->io_ops_data = j;
	return 0;
}

static void afio_cleanup(struct thread_data *td)
{
	struct afio_job *j = td->io_ops_data;
	if (!j)
		return;
	if (j->open && j->open->tx)
		atomio_tx_abort(j->open->tx); /* never acknowledged to fio */
	while (j->async) {
		pthread_mutex_lock(&j->mu);
		unsigned inflight = j->inflight;
		pthread_mutex_unlock(&j->mu);
		if (!inflight || atomio_poll(j->st, 10) < 0)
			break;
	}
	store_put(j->store);
	job_free(j);
	td->io_ops_data = NULL;
}

static int afio_open_file(struct thread_data *td, struct fio_file *f)
{
	struct afio_job *j = td->io_ops_data;
	int flags = O_CREAT;
	if (td->o.odirect)
		flags |= O_DIRECT;
	int id = atomio_file_open(j->st, f->file_name, flags, 0644);
	if (id < 0) {
		log_err("atomio: %s: %s\n", f->file_name, atomio_strerror(id));
		td_verror(td, afio_errno(id), "atomio_file_open");
		return 1;
	}
	f->engine_pos = (uint64_t)id;
	/* atomio owns the descriptor; fio may fstat it, never close it. */
	f->fd = atomio_file_fd(j->st, id);
	return 0;
}

static int afio_close_file(struct thread_data *td, struct fio_file *f)
{
	/* atomio has no per-file close: the file stays registered (the log may
	 * hold its data) until the store closes. */
	f->fd = -1;
	return 0;
}

static int afio_invalidate(struct thread_data *td, struct fio_file *f)
{
	/* The page cache holds atomio's home writes until a checkpoint; reads
	 * go through atomio_pread.  Nothing for fio to drop. */
	return 0;
}

static struct ioengine_ops afio_ops = {
	.name = "atomio",
	.version = FIO_IOOPS_VERSION,
	.flags = FIO_ASYNCIO_SETS_ISSUE_TIME,
	.init = afio_init,
	.queue = afio_queue,
	.getevents = afio_getevents,
	.event = afio_event,
	.cleanup = afio_cleanup,
	.open_file = afio_open_file,
	.close_file = afio_close_file,
	.invalidate = afio_invalidate,
	.get_file_size = generic_get_file_size,
	.options = options,
	.option_struct_size = sizeof(struct afio_options),
};

/* fio looks this up (dlsym) when loading an external engine.  The engine
 * reaches into fio's structures (thread_data, io_u, fio_file), whose layout
 * is fixed only within one fio version: FIO_IOOPS_VERSION, which fio checks
 * itself, does not change with all of them.  So refuse any fio but the one
 * whose headers this was built with. */
void get_ioengine(struct ioengine_ops **ops);
void get_ioengine(struct ioengine_ops **ops)
{
	const char *v = dlsym(RTLD_DEFAULT, "fio_version_string");
	if (!v || strcmp(v, ATOMIO_FIO_BUILT_FOR) != 0) {
		fprintf(stderr,
			"atomio_fio.so: built for %s (ioengine ABI %d), refusing to load into %s: "
			"rebuild it against this fio's source (make fio)\n",
			ATOMIO_FIO_BUILT_FOR, FIO_IOOPS_VERSION, v ? v : "an unknown fio");
		*ops = NULL;
		return;
	}
	*ops = &afio_ops;
}
