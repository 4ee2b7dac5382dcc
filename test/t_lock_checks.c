/* The lock checks fire (src/internal.h, LOCK CHECKS; docs/INTERNALS.md,
 * "Checks"): in the debug build of the library (the ASan/UBSan one), a
 * function whose name says it needs a lock or a role, called by a thread
 * that does not hold it, aborts with a message -- each case in a child
 * process of its own, which must die of SIGABRT saying so.  And code that
 * holds what it should runs on.  So the checks cannot be compiled out
 * unnoticed: this test fails in the ASan/UBSan build when they are; the
 * release build of the library has none (the test is skipped there). */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "shm.h"
#include "t.h"

static const char *g_log;

static atomio *open_store(void)
{
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	atomio *st;
	CHECK_OK(atomio_open(g_log, &o, &st));
	return st;
}

static void *call_locked(void *arg)
{
	checkpoint_leave_locked(arg);
	return NULL;
}

/* The cases: each is run in a child process (which opens the store itself). */
static void c_no_mutex(atomio *st) { checkpoint_leave_locked(st); }

static void c_other_thread(atomio *st)
{
	shm_lock(st); /* this thread holds it; the other does not */
	pthread_t t;
	CHECK_OK(pthread_create(&t, NULL, call_locked, st));
	pthread_join(t, NULL);
	shm_unlock(st);
}

static void c_no_role(atomio *st) { guard_clear_all_role(st); }

static void c_role_with_mutex(atomio *st)
{
	role_acquire(st);
	shm_lock(st); /* a _role function is called without sh->mu */
	guard_clear_all_role(st);
}

static void c_lock_order(atomio *st)
{
	own_lock(st);
	shm_lock(st); /* sh->mu before st->lock, never after */
}

static void c_drop_in_locked(atomio *st)
{
	shm_lock(st);
	NODROP_SCOPE; /* as a _locked function opens it */
	shm_unlock(st);
}

static void c_correct(atomio *st)
{
	shm_lock(st);
	checkpoint_leave_locked(st);
	shm_unlock(st);
	CHECK_OK(role_acquire(st));
	CHECK_OK(checkpoint_full_role(st));
	guard_clear_all_role(st);
	role_release(st);
	own_lock(st);
	own_unlock(st);
	CHECK_OK(atomio_close(st));
}

/* Run fn in a child; its stderr and how it ended. */
static int run(void (*fn)(atomio *), char *err, size_t errsz)
{
	int p[2];
	CHECK_OK(pipe(p));
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], 2);
		fn(open_store());
		_exit(0);
	}
	close(p[1]);
	size_t n = 0;
	ssize_t k;
	while (n + 1 < errsz && (k = read(p[0], err + n, errsz - 1 - n)) > 0)
		n += (size_t)k;
	err[n] = 0;
	close(p[0]);
	int ws;
	CHECK(waitpid(pid, &ws, 0) == pid);
	return ws;
}

static void expect_abort(const char *name, void (*fn)(atomio *), const char *func, const char *what)
{
	char err[4096];
	int ws = run(fn, err, sizeof(err));
	if (!WIFSIGNALED(ws) || WTERMSIG(ws) != SIGABRT || !strstr(err, "lock check failed") ||
	    !strstr(err, func) || !strstr(err, what)) {
		fprintf(stderr, "case %s: expected an abort in %s (%s); the child %s %d, said:\n%s\n", name, func,
			what, WIFSIGNALED(ws) ? "died of signal" : "exited", WIFSIGNALED(ws) ? WTERMSIG(ws)
											     : WEXITSTATUS(ws),
			err);
		exit(1);
	}
	printf("ok: %s: %s", name, strstr(err, "atomio: "));
}

int main(void)
{
	if (!atomio_lock_checks) {
#ifdef ATOMIO_SAN
		fprintf(stderr, "the ASan/UBSan build's library has no lock checks (ATOMIO_DEBUG)\n");
		return 1;
#else
		t_skip("the library is a release build: no lock checks (the ASan/UBSan build has them)");
#endif
	}
	t_dir();
	g_log = t_path("log");
	atomio *st = open_store(); /* creates the log */
	CHECK_OK(atomio_close(st));

	expect_abort("a _locked function without sh->mu", c_no_mutex, "checkpoint_leave_locked",
		     "sh->mu (the shared mutex) not held");
	expect_abort("a _locked function while another thread holds sh->mu", c_other_thread,
		     "checkpoint_leave_locked", "sh->mu (the shared mutex) not held");
	expect_abort("a _role function without the log role", c_no_role, "guard_clear_all_role",
		     "the log role not held");
	expect_abort("a _role function with sh->mu held", c_role_with_mutex, "guard_clear_all_role",
		     "sh->mu (the shared mutex) held");
	expect_abort("sh->mu taken with st->lock held", c_lock_order, "shm_lock", "the lock order");
	expect_abort("sh->mu let go inside a _locked function", c_drop_in_locked, "shm_unlock",
		     "inside a _locked function");

	char err[4096];
	int ws = run(c_correct, err, sizeof(err));
	if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
		fprintf(stderr, "the holders of each lock and role were refused:\n%s\n", err);
		return 1;
	}
	/* the store as the children left it (the aborted ones: recovered) */
	st = open_store();
	CHECK_OK(atomio_close(st));
	printf("ok: the lock checks fire in this build, and pass those who hold what they should\n");
	return 0;
}
