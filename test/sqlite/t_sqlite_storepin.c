/* settle uses the store outside g_mu (atomio_settle) while another
 * connection of the process may close it: its own settle drops a store
 * whose log is no longer the file at its path (another process switched the
 * database to WAL and removed the log), as wal_drop_store does at a WAL
 * file's open.  The store is pinned for that use, and the close waits for
 * the pin (issue 35, 6).
 *
 * Two connections, A and B, of one database (one store).  A reads; inside
 * its settle, at atomio_settle's lock of the store's shared mutex (this test
 * interposes pthread_mutex_lock and stops thread A at the first lock of a
 * process-shared mutex once armed), B is let go: the log is unlinked and B
 * reads, so that its settle drops and closes the store.  A waits up to
 * 500 ms for B to finish: B must not, since A still uses the store (before
 * the pin it did: the store was closed under A, a use after free). */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>

#include "sq_t.h"

#ifdef __SANITIZE_ADDRESS__
/* AddressSanitizer intercepts pthread_mutex_lock itself, and calls the
 * interceptor's target through a pointer this test's own definition
 * leaves unset: the plain build runs the test. */
int main(void)
{
	printf("SKIP: pthread_mutex_lock cannot be interposed under AddressSanitizer\n");
	return 77;
}
#else

/* glibc's own lock, under the name it also exports (not for linking by
 * default: bound to its version by hand) */
int real_mutex_lock(pthread_mutex_t *m);
__asm__(".symver real_mutex_lock, __pthread_mutex_lock@GLIBC_2.2.5");

static __thread int t_armed;
static sem_t g_go;
static atomic_int g_done, g_fired;
static sqlite3 *g_b;
static char g_log[4100];

/* This one stops
 * an armed thread at its first process-shared mutex (the store's). */
int pthread_mutex_lock(pthread_mutex_t *m)
{
	if (t_armed && (m->__data.__kind & 128 /* glibc's PTHREAD_MUTEX_PSHARED_BIT */)) {
		t_armed = 0;
		atomic_store(&g_fired, 1);
		CHECK_OK(sem_post(&g_go));
		for (int i = 0; i < 500 && !atomic_load(&g_done); i++)
			usleep(1000);
		if (atomic_load(&g_done)) {
			printf("storepin: FAIL: the store was closed while settle was using it\n");
			fflush(stdout);
			_exit(1); /* before the use after free */
		}
	}
	return real_mutex_lock(m);
}

static void *b_main(void *arg)
{
	(void)arg;
	while (sem_wait(&g_go) < 0) {
	}
	CHECK_OK(unlink(g_log));
	CHECK_EQ(sq_int(g_b, "SELECT count(*) FROM t"), 1);
	atomic_store(&g_done, 1);
	return NULL;
}

int main(void)
{
	t_dir();
	char path[4000];
	snprintf(path, sizeof(path), "%s", t_path("p.db"));
	snprintf(g_log, sizeof(g_log), "%s-atomio", path);
	sq_remove_db(path);
	sqlite3 *a = sq_open_vfs(path, "atomio", 0);
	sq_ok(a, "CREATE TABLE t(x); INSERT INTO t VALUES(1)");
	g_b = sq_open_vfs(path, "atomio", 0);
	CHECK_EQ(sq_int(g_b, "SELECT count(*) FROM t"), 1); /* both in the store */
	CHECK_OK(access(g_log, F_OK));
	CHECK_OK(sem_init(&g_go, 0, 0));
	pthread_t tb;
	CHECK_OK(pthread_create(&tb, NULL, b_main, NULL));
	t_armed = 1;
	CHECK_EQ(sq_int(a, "SELECT count(*) FROM t"), 1);
	t_armed = 0;
	CHECK_OK(pthread_join(tb, NULL));
	bool ok = atomic_load(&g_fired) && atomic_load(&g_done);
	printf("storepin: %s\n", !atomic_load(&g_fired) ? "FAIL: settle never reached the store's mutex"
				 : ok ? "the store's close waited for settle: ok" : "FAIL");
	SQ_CHECK(a, sqlite3_close(a));
	SQ_CHECK(g_b, sqlite3_close(g_b));
	sq_remove_db(path);
	return ok ? 0 : 1;
}
#endif
