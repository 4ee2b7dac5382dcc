/* A checkpoint syncs a data file that was renamed while another process
 * holds it open (checkpoint.c, sync_files): process A registers a file,
 * commits a group to it (its home write in the page cache, the file's dirty
 * flag set) and renames it; process B, which never opened it, runs
 * atomio_checkpoint.  B takes the flag, cannot open the file by its path,
 * and must not move the log's head past the group's record unless the
 * inode was synced: through the descriptor A holds.  Then A is killed and
 * the power cut (the file put back to what it held at its last sync: B's
 * ops table keeps a copy then); the group must be in the file at its new
 * name. */
#include <limits.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "sys.h"
#include "t.h"

#define LEN 4096u

struct share {
	_Atomic int ready;     /* A committed and renamed the file */
	_Atomic uint64_t ino;  /* the file's inode */
	_Atomic int syncs;     /* B's syncs of that inode */
	_Atomic int ckpt_r;    /* what B's atomio_checkpoint returned */
	_Atomic int b_done;
	uint64_t snap_len;     /* the file at its last sync */
	uint8_t snap[LEN];
};

static struct share *sh;
static char log_path[PATH_MAX], f_path[PATH_MAX], f2_path[PATH_MAX];
static struct atomio_sysops ops;

static void pause_ms(void) { nanosleep(&(struct timespec){0, 1000000}, NULL); }

static void synced(int fd)
{
	struct stat sb;
	if (fstat(fd, &sb) < 0 || sb.st_ino != atomic_load(&sh->ino) || sb.st_size > LEN)
		return;
	ssize_t n = pread(fd, sh->snap, (size_t)sb.st_size, 0);
	if (n != sb.st_size)
		abort();
	sh->snap_len = (uint64_t)n;
	atomic_fetch_add(&sh->syncs, 1);
}

static int w_fsync(int fd)
{
	int r = atomio_sys_linux.fsync(fd);
	if (r == 0)
		synced(fd);
	return r;
}

static int w_fdatasync(int fd)
{
	int r = atomio_sys_linux.fdatasync(fd);
	if (r == 0)
		synced(fd);
	return r;
}

static struct atomio_options opts(void)
{
	struct atomio_options o = t_opts(1 << 20);
	o.flags |= ATOMIO_NO_BG_CHECKPOINT;
	return o;
}

static void die_with(pid_t parent)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(1);
}

static void proc_a(pid_t parent)
{
	die_with(parent);
	struct atomio_options o = opts();
	atomio *st;
	KCHECK(atomio_open(log_path, &o, &st) == 0);
	int id = atomio_file_open(st, f_path, O_CREAT, 0644);
	KCHECK(id >= 0);
	uint8_t b[LEN];
	t_fill(b, LEN, 1, 0);
	KCHECK(atomio_pwrite(st, id, b, LEN, 0) == LEN); /* acknowledged */
	struct stat sb;
	KCHECK(stat(f_path, &sb) == 0);
	atomic_store(&sh->ino, sb.st_ino);
	KCHECK(rename(f_path, f2_path) == 0); /* A still holds it open */
	atomic_store(&sh->ready, 1);
	for (;;)
		pause();
}

static void proc_b(pid_t parent)
{
	die_with(parent);
	ops = atomio_sys_linux;
	ops.name = "t_ckpt_renamed";
	ops.fsync = w_fsync;
	ops.fdatasync = w_fdatasync;
	atomio_sys_set(&ops);
	struct atomio_options o = opts();
	atomio *st;
	KCHECK(atomio_open(log_path, &o, &st) == 0); /* joins */
	atomic_store(&sh->ckpt_r, atomio_checkpoint(st));
	KCHECK(atomio_close(st) == 0);
	atomic_store(&sh->b_done, 1);
	_exit(0);
}

int main(void)
{
	t_dir();
	char dir[PATH_MAX];
	CHECK(realpath(t_dir(), dir));
	snprintf(log_path, sizeof(log_path), "%.4000s/log", dir);
	snprintf(f_path, sizeof(f_path), "%.4000s/f", dir);
	snprintf(f2_path, sizeof(f2_path), "%.4000s/f2", dir);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	pid_t parent = getpid();
	pid_t a = fork();
	CHECK(a >= 0);
	if (a == 0)
		proc_a(parent);
	while (!atomic_load(&sh->ready))
		pause_ms();
	pid_t b = fork();
	CHECK(b >= 0);
	if (b == 0)
		proc_b(parent);
	int ws;
	CHECK(waitpid(b, &ws, 0) == b);
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && atomic_load(&sh->b_done));
	int r = atomic_load(&sh->ckpt_r);
	int syncs = atomic_load(&sh->syncs);
	printf("checkpoint of the process that never opened the renamed file: %s, %d syncs of its inode\n",
	       r < 0 ? atomio_strerror(r) : "done", syncs);
	int fails = 0;
	if (r == 0 && syncs == 0) {
		fprintf(stderr, "the checkpoint moved the head past a home write no sync made durable\n");
		fails++;
	}

	/* A dies, the power goes: the file as its last sync left it. */
	kill(a, SIGKILL);
	CHECK(waitpid(a, &ws, 0) == a);
	int fd = open(f2_path, O_WRONLY);
	CHECK(fd >= 0);
	CHECK_OK(ftruncate(fd, (off_t)sh->snap_len));
	CHECK_EQ(pwrite(fd, sh->snap, sh->snap_len, 0), (ssize_t)sh->snap_len);
	CHECK_OK(fsync(fd));
	close(fd);

	struct atomio_options o = opts();
	char err[512] = "";
	o.errbuf = err;
	o.errbuf_size = sizeof(err);
	atomio *st;
	r = atomio_open(log_path, &o, &st);
	if (r == 0) {
		CHECK_OK(atomio_close(st));
		size_t n;
		uint8_t *d = t_slurp(f2_path, &n);
		uint8_t want[LEN];
		t_fill(want, LEN, 1, 0);
		if (!d || n != LEN || memcmp(d, want, LEN)) {
			fprintf(stderr, "after the power cut the renamed file lacks the acknowledged group "
					"(%zu bytes), and recovery had nothing to replay\n", n);
			fails++;
		}
		free(d);
	} else {
		/* Refusing (the file the live records name is gone) is loud,
		 * not a loss: rename it back and recover. */
		printf("recovery refused: %s: %s\n", atomio_strerror(r), err);
		CHECK_EQ(r, ATOMIO_EIDENTITY);
	}
	if (fails)
		return 1;
	printf("ok: a file renamed while another process holds it is synced before the head moves past "
	       "its records\n");
	return 0;
}
