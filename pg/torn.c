/*
 * pg-torn: find torn pages in a stopped PostgreSQL cluster's relation files.
 *
 *   pg-torn [-v] [-q] DATADIR
 *
 * Reads every 8 KiB page of every fork file under DATADIR/base/<db>/ and
 * DATADIR/global/ (main, _fsm, _vm, _init; segments .1, .2, ...) and sorts
 * each page into one of:
 *   new    all zeros: never written, or extended and not yet filled, which
 *          PostgreSQL accepts (PageIsNew)
 *   ok     its pd_checksum is the checksum of its bytes, its header sane
 *   torn   a non-zero page whose checksum does not match its bytes
 *   bad    a page that passes its checksum with an impossible header
 *          (pd_lower > pd_upper > pd_special > 8192): not a tear, a bug
 *   short  the file ends inside the page: sectors of an extension kept
 *          past the last whole page (a tear too; counted with its fork)
 *
 * Why a checksum failure means "torn" here.  The cluster is made with
 * initdb --data-checksums, and PostgreSQL computes a page's checksum on the
 * exact bytes it hands to write() (bufmgr's PageSetChecksumCopy, and
 * PageSetChecksumInplace before smgrextend for new main, vm and fsm pages;
 * an index build the same), for every fork: visibility-map and free-space-map
 * pages are checksummed like heap pages.  On the power-cut filesystem
 * (cutfs) the unit that survives or not is a 512-byte sector, and a page's
 * 16 sectors come either all from one write (then the checksum matches) or
 * from two or more writes, or from a write and the zeros of an extension
 * never filled (then it fails, but for one chance in 65,535).  So on cutfs a
 * non-zero page with a bad checksum has sectors from two different writes:
 * torn.  The header sector alone cannot tell (pd_lsn and pd_checksum are
 * both in sector 0, written together), so the checksum over the whole page
 * is the test; with -v each torn page is printed with its sector map
 * ('0' = an all-zero sector, '#' = data) and its pd_lsn.
 *
 * Why vm and fsm pages need this tool.  PostgreSQL reads them with
 * RBM_ZERO_ON_ERROR: a page whose checksum fails is zeroed in memory with a
 * WARNING and no error, so a server, pg_amcheck and every query run fine
 * over a torn one.  The free-space map is not WAL-logged (its changes are
 * hints: MarkBufferDirtyHint, which logs a full-page image only when not in
 * recovery; fsm_update_slot during recovery dirties pages without any
 * image), and a visibility-map bit cleared by a heap change is cleared
 * through the heap record, with no image of the vm page: both can tear with
 * full_page_writes=on, and nothing repairs the page on the medium until it
 * is next written whole.  Reading the files is the only way to see them.
 *
 * Output: one line per file with a torn or bad page (with -v, per page),
 * then the summary line
 *   pages N new N ok N torn N short N (by fork: main N fsm N vm N init N) bad N unchecked N
 * "unchecked": non-zero pages with pd_checksum 0 (a cluster without
 * checksums: nothing can be told).  Exit 0 when no page is torn, bad or
 * short; 1 otherwise; 2 on an error.  -q: the summary line only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLCKSZ 8192u
#define RELSEG_SIZE 131072u /* pages in a 1 GiB segment */
#define SECT 512u
#define N_SUMS 32
#define FNV_PRIME 16777619u

enum fork { F_MAIN, F_FSM, F_VM, F_INIT, F_N };
static const char *fork_name[F_N] = {"main", "fsm", "vm", "init"};

static struct {
	uint64_t pages, zero, ok, torn, bad, shrt, unchecked;
	uint64_t torn_fork[F_N];
} n;
static bool verbose, quiet;

/* PostgreSQL's page checksum (src/include/storage/checksum_impl.h): FNV-1a
 * over 32 parallel lanes of 32-bit words, two rounds of zeros, the lanes
 * xor-folded, the block number mixed in, reduced to 1..65535. */
static const uint32_t base_offsets[N_SUMS] = {
	0x5B1F36E9, 0xB8525960, 0x02AB50AA, 0x1DE66D2A, 0x79FF467A, 0x9BB9F8A3, 0x217E7CD2, 0x83E13D2C,
	0xF8D4474F, 0xE39EB970, 0x42C6AE16, 0x993216FA, 0x7B093B5D, 0x98DAFF3C, 0xF718902A, 0x0B1C9CDB,
	0xE58F764B, 0x187636BC, 0x5D7B3BB1, 0xE73DE7DE, 0x92BEC979, 0xCCA6C0B2, 0x304A0979, 0x85AA43D4,
	0x783125BB, 0x6CA8EAA2, 0xE407EAC6, 0x4B5CFC3E, 0x9FBF8C76, 0x15CA20BE, 0xF2CA9FD3, 0x959BD756};

#define COMP(sum, value)                                                                                               \
	do {                                                                                                           \
		uint32_t t_ = (sum) ^ (value);                                                                         \
		(sum) = t_ * FNV_PRIME ^ (t_ >> 17);                                                                   \
	} while (0)

/* Page header (bufpage.h): pd_lsn (8), pd_checksum (2), pd_flags (2),
 * pd_lower (2), pd_upper (2), pd_special (2), pd_pagesize_version (2). */
static uint16_t get16(const unsigned char *p, size_t off)
{
	uint16_t v;
	memcpy(&v, p + off, 2);
	return v;
}

static uint16_t page_checksum(const unsigned char *page, uint32_t blkno)
{
	uint32_t w[BLCKSZ / 4], sums[N_SUMS], r = 0;
	memcpy(w, page, BLCKSZ);
	w[2] &= 0xffff0000u; /* pd_checksum (bytes 8-9, little-endian) counts as zero */
	memcpy(sums, base_offsets, sizeof(sums));
	for (uint32_t i = 0; i < BLCKSZ / (4 * N_SUMS); i++)
		for (int j = 0; j < N_SUMS; j++)
			COMP(sums[j], w[i * N_SUMS + j]);
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < N_SUMS; j++)
			COMP(sums[j], 0);
	for (int j = 0; j < N_SUMS; j++)
		r ^= sums[j];
	r ^= blkno;
	return (uint16_t)(r % 65535 + 1);
}

static bool all_zero(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/* PageIsVerifiedExtended's header test (bufpage.c). */
static bool header_sane(const unsigned char *p)
{
	uint16_t flags = get16(p, 10), lower = get16(p, 12), upper = get16(p, 14), special = get16(p, 16);
	return (flags & ~0x0007u) == 0 && lower <= upper && upper <= special && special <= BLCKSZ &&
	       special % 8 == 0 && lower >= 24;
}

/* "16384_fsm.2" -> fork fsm, segment 2; 0 when the name is a relation file. */
static int parse_name(const char *name, enum fork *fk, uint32_t *seg)
{
	const char *p = name;
	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9')
		p++;
	*fk = F_MAIN;
	if (!strncmp(p, "_fsm", 4)) {
		*fk = F_FSM;
		p += 4;
	} else if (!strncmp(p, "_vm", 3)) {
		*fk = F_VM;
		p += 3;
	} else if (!strncmp(p, "_init", 5)) {
		*fk = F_INIT;
		p += 5;
	}
	*seg = 0;
	if (*p == '.') {
		char *end;
		unsigned long s = strtoul(p + 1, &end, 10);
		if (end == p + 1 || *end)
			return -1;
		*seg = (uint32_t)s;
		return 0;
	}
	return *p ? -1 : 0;
}

static int check_file(const char *path, enum fork fk, uint32_t seg)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "pg-torn: %s: %s\n", path, strerror(errno));
		return -1;
	}
	static unsigned char page[BLCKSZ];
	uint64_t torn = 0;
	for (uint32_t i = 0;; i++) {
		size_t got = 0;
		while (got < BLCKSZ) {
			ssize_t r = pread(fd, page + got, BLCKSZ - got, (off_t)i * BLCKSZ + (off_t)got);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				fprintf(stderr, "pg-torn: %s: %s\n", path, strerror(errno));
				close(fd);
				return -1;
			}
			if (r == 0)
				break;
			got += (size_t)r;
		}
		if (got == 0)
			break;
		n.pages++;
		if (got < BLCKSZ) {
			/* a tear too: sectors of an extension past the last page */
			n.shrt++;
			n.torn_fork[fk]++;
			if (!quiet)
				printf("short %s block %u (%s): %zu bytes\n", path, i, fork_name[fk], got);
			break;
		}
		if (all_zero(page, BLCKSZ)) {
			n.zero++;
			continue;
		}
		uint32_t blkno = seg * RELSEG_SIZE + i;
		uint16_t stored = get16(page, 8);
		if (stored == 0) {
			n.unchecked++;
			continue;
		}
		if (stored != page_checksum(page, blkno)) {
			n.torn++;
			n.torn_fork[fk]++;
			torn++;
			if (verbose && !quiet) {
				char map[BLCKSZ / SECT + 1];
				for (unsigned s = 0; s < BLCKSZ / SECT; s++)
					map[s] = all_zero(page + s * SECT, SECT) ? '0' : '#';
				map[BLCKSZ / SECT] = 0;
				uint32_t hi, lo;
				memcpy(&hi, page, 4);
				memcpy(&lo, page + 4, 4);
				printf("torn %s block %u (%s): sectors %s, pd_lsn %X/%X, pd_checksum %u, computed %u\n",
				       path, blkno, fork_name[fk], map, hi, lo, stored, page_checksum(page, blkno));
			}
		} else if (!header_sane(page)) {
			n.bad++;
			if (!quiet)
				printf("bad %s block %u: the checksum matches an impossible header\n", path, blkno);
		} else {
			n.ok++;
		}
	}
	close(fd);
	if (torn && !verbose && !quiet)
		printf("torn %s (%s): %" PRIu64 " pages\n", path, fork_name[fk], torn);
	return 0;
}

static int walk(const char *dir, bool recurse)
{
	DIR *d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		fprintf(stderr, "pg-torn: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	int rc = 0;
	struct dirent *e;
	char path[4096];
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		struct stat st;
		if (lstat(path, &st))
			continue; /* gone meanwhile */
		if (S_ISDIR(st.st_mode)) {
			if (recurse && walk(path, false))
				rc = -1;
			continue;
		}
		enum fork fk;
		uint32_t seg;
		if (!S_ISREG(st.st_mode) || parse_name(e->d_name, &fk, &seg))
			continue;
		if (check_file(path, fk, seg))
			rc = -1;
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "vq")) != -1) {
		if (opt == 'v')
			verbose = true;
		else if (opt == 'q')
			quiet = true;
		else
			goto usage;
	}
	if (optind != argc - 1)
		goto usage;
	setvbuf(stdout, NULL, _IOLBF, 0);
	char p[4096];
	snprintf(p, sizeof(p), "%s/base", argv[optind]);
	int rc = walk(p, true);
	snprintf(p, sizeof(p), "%s/global", argv[optind]);
	if (walk(p, false))
		rc = -1;
	printf("pages %" PRIu64 " new %" PRIu64 " ok %" PRIu64 " torn %" PRIu64 " short %" PRIu64 " (by fork: main %" PRIu64 " fsm %" PRIu64
	       " vm %" PRIu64 " init %" PRIu64 ") bad %" PRIu64 " unchecked %" PRIu64 "\n",
	       n.pages, n.zero, n.ok, n.torn, n.shrt, n.torn_fork[F_MAIN], n.torn_fork[F_FSM], n.torn_fork[F_VM],
	       n.torn_fork[F_INIT], n.bad, n.unchecked);
	if (rc)
		return 2;
	return n.torn || n.bad || n.shrt ? 1 : 0;
usage:
	fprintf(stderr, "usage: pg-torn [-v] [-q] DATADIR\n");
	return 2;
}
