/* A process's liveness lock byte (shm.h, LK_PROC+i) must outlive its io_uring
 * writes.  Killed, a process's descriptors are closed before the kernel has
 * finished its rings' requests: do_exit waits only for requests on io_uring
 * files themselves, and each ring's requests are waited for by its teardown
 * (io_ring_exit_work), run after the files are closed.  A home or fast-path
 * write from the shared arena, still in flight, would then land after a
 * survivor, finding the lock byte free, adopted the batch -- after a later
 * group rewrote the range, maybe from the reused arena block.  So each ring
 * holds the log's open file description (registered in it), and the lock
 * bytes on it go only when the ring's teardown has put it, after its last
 * request.  No write can be made to hang here, so this checks that
 * mechanism: a process closes its log descriptor (as its exit does first)
 * while its rings are up: its lock byte stays; when it exits, the byte goes
 * and the survivor takes over. */
#include <sys/wait.h>

#include "internal.h"
#include "shm.h"
#include "t.h"

static bool byte_held(int fd, off_t at)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = at, .l_len = 1};
	CHECK_OK(fcntl(fd, F_OFD_GETLK, &fl));
	return fl.l_type != F_UNLCK;
}

int main(void)
{
	t_dir();
	const char *log = t_path("log");
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_DIRECT_HOME | ATOMIO_NO_BG_CHECKPOINT;
	atomio *a;
	CHECK_OK(atomio_open(log, &o, &a));
	if (!a->ring_home)
		t_skip("no io_uring for the home stage here");
	int id = atomio_file_open(a, t_path("f"), O_CREAT, 0644);
	CHECK(id >= 0);
	int lfd = open(log, O_RDONLY | O_CLOEXEC);
	CHECK(lfd >= 0);

	int ready[2], go[2];
	CHECK_OK(pipe(ready));
	CHECK_OK(pipe(go));
	pid_t p = fork();
	if (p == 0) {
		close(ready[0]);
		close(go[1]);
		atomio *b;
		CHECK_OK(atomio_open(log, &o, &b));
		CHECK(b->ring_home);
		uint32_t slot = b->me - 1;
		CHECK_EQ(atomio_pwrite(b, id, "b", 1, 0), 1);
		/* what exit does first: the descriptor table goes */
		CHECK_OK(close(b->log_fd));
		char c;
		CHECK(write(ready[1], &slot, sizeof(slot)) == sizeof(slot) && read(go[0], &c, 1) == 1);
		_exit(0); /* the rings go with the process */
	}
	close(ready[1]);
	close(go[0]);
	uint32_t slot;
	CHECK(read(ready[0], &slot, sizeof(slot)) == sizeof(slot));
	bool held = byte_held(lfd, (off_t)(LK_PROC + slot));
	if (!held)
		fprintf(stderr, "the lock byte of slot %u went with the log's descriptor, its rings still up\n",
			slot);
	CHECK(held);
	CHECK(write(go[1], "g", 1) == 1);
	int ws;
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	/* the ring's teardown puts the description: the byte goes (bounded by
	 * a count of looks, each after a short sleep) */
	int tries = 0;
	while (byte_held(lfd, (off_t)(LK_PROC + slot)) && tries++ < 2000)
		usleep(1000);
	CHECK(tries <= 2000);
	CHECK_EQ(atomio_pwrite(a, id, "a", 1, 1), 1);

	/* A child forked (no exec) by a process with rings must not keep the
	 * rings, and through them the log's description and the parent's lock
	 * bytes, once the parent is gone. */
	int cgo[2], cready[2];
	CHECK_OK(pipe(cgo));
	CHECK_OK(pipe(cready));
	p = fork();
	if (p == 0) {
		atomio *b;
		CHECK_OK(atomio_open(log, &o, &b));
		CHECK(b->ring_home);
		uint32_t s2 = b->me - 1;
		pid_t c = fork();
		if (c == 0) {
			char x;
			close(cgo[1]);
			(void)!read(cgo[0], &x, 1); /* lives until the test is done */
			_exit(0);
		}
		CHECK(write(cready[1], &s2, sizeof(s2)) == sizeof(s2));
		_exit(0); /* dies without closing; its child lives on */
	}
	close(cready[1]);
	close(cgo[0]);
	CHECK(read(cready[0], &slot, sizeof(slot)) == sizeof(slot));
	CHECK(waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	tries = 0;
	while (byte_held(lfd, (off_t)(LK_PROC + slot)) && tries++ < 2000)
		usleep(1000);
	if (tries > 2000)
		fprintf(stderr, "the lock byte of slot %u stays while the dead process's child lives\n", slot);
	close(cgo[1]); /* the grandchild goes */
	CHECK(tries <= 2000);
	CHECK_EQ(atomio_pwrite(a, id, "c", 1, 1), 1);
	close(lfd);
	CHECK_OK(atomio_close(a));
	size_t n;
	uint8_t *d = t_slurp(t_path("f"), &n);
	CHECK(d && n == 2 && !memcmp(d, "bc", 2));
	free(d);
	printf("ok: a process's lock byte stays while its rings are up, and goes with them\n");
	return 0;
}
