/*
 * rec.h: the workload of the preload crash tests (prog.c, t_preload_kill.sh,
 * t_preload_sim.c) and its oracle.
 *
 * A file of NSLOT slots of REC bytes (3000: every slot straddles 512-byte
 * sectors and some straddle 4 KiB pages, so a torn write shows).  Write i of
 * the run (seeded, deterministic) rewrites slot s with its next version v: a
 * record that names (seed, s, v), filled from them, with a hash of itself at
 * the end.  Some writes are followed by a sync.  The oracle, given how many
 * writes were synced (their sync returned) and how many may have been
 * issued, checks every slot: it holds a whole record (never a torn mix) or
 * zeros, of a version at least the synced one and at most the issued one.
 */
#ifndef PRELOAD_REC_H
#define PRELOAD_REC_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NSLOT 64
#define REC 3000
#define REC_MAGIC 0x43525441u /* "ATRC" */

static inline uint64_t rec_rng(uint64_t *s)
{
	/* xorshift64* */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

static inline uint64_t rec_hash(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* Write i of the run: its slot, the call that makes it (0..4), whether a
 * sync follows (0 none, 1 fsync, 2 fdatasync). */
struct rec_op {
	int slot, call, sync;
};

static inline struct rec_op rec_op(uint64_t seed, int i)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0xBF58476D1CE4E5B9ull + 1;
	rec_rng(&s);
	struct rec_op o;
	o.slot = (int)(rec_rng(&s) % NSLOT);
	o.call = (int)(rec_rng(&s) % 5);
	uint64_t y = rec_rng(&s) % 8;
	o.sync = y == 0 ? 1 : y == 1 ? 2 : 0;
	return o;
}

static inline void rec_fill(uint8_t *b, uint64_t seed, int slot, uint32_t version)
{
	uint32_t h[4] = {REC_MAGIC, (uint32_t)slot, version, (uint32_t)seed};
	memcpy(b, h, sizeof(h));
	uint64_t s = seed ^ ((uint64_t)slot << 32) ^ version ^ 0x5555;
	for (int i = 16; i < REC - 8; i++)
		b[i] = (uint8_t)(rec_rng(&s) >> 56);
	uint64_t x = rec_hash(b, REC - 8);
	memcpy(b + REC - 8, &x, 8);
}

/* Check a file's bytes (len may be short: the rest reads as zeros).
 * issued: writes 0..issued-1 may have happened; synced: writes
 * 0..synced-1 must be there.  0, or -1 with a reason in why[256]. */
static inline int rec_check(const uint8_t *file, size_t len, uint64_t seed, int issued, int synced,
			    char *why)
{
	uint32_t minv[NSLOT] = {0}, maxv[NSLOT] = {0}, v[NSLOT] = {0};
	for (int i = 0; i < issued; i++) {
		struct rec_op o = rec_op(seed, i);
		v[o.slot]++;
		if (i < synced)
			minv[o.slot] = v[o.slot];
		maxv[o.slot] = v[o.slot];
	}
	uint8_t b[REC];
	for (int s = 0; s < NSLOT; s++) {
		size_t off = (size_t)s * REC;
		memset(b, 0, REC);
		if (off < len)
			memcpy(b, file + off, len - off < REC ? len - off : REC);
		uint32_t got = 0;
		int zero = 1;
		for (int i = 0; i < REC && zero; i++)
			zero = !b[i];
		if (!zero) {
			uint32_t h[4];
			memcpy(h, b, sizeof(h));
			uint64_t x;
			memcpy(&x, b + REC - 8, 8);
			if (h[0] != REC_MAGIC || h[1] != (uint32_t)s || h[3] != (uint32_t)seed ||
			    x != rec_hash(b, REC - 8)) {
				snprintf(why, 256, "slot %d is torn or foreign (magic %08x slot %u version %u)", s,
					 h[0], h[1], h[2]);
				return -1;
			}
			got = h[2];
		}
		if (got < minv[s] || got > maxv[s]) {
			snprintf(why, 256, "slot %d holds version %u; synced %u, issued %u (of %d writes, %d synced)",
				 s, got, minv[s], maxv[s], issued, synced);
			return -1;
		}
	}
	return 0;
}

/* Group mode (ATOMIO_GROUP=1): the file must be exactly as the run left it
 * at a group boundary k (0, after a write that a sync followed, or after
 * all n writes) with synced <= k <= issued: every slot the version the
 * first k writes gave it. */
static inline int rec_check_group(const uint8_t *file, size_t len, uint64_t seed, int n, int issued,
				  int synced, char *why)
{
	uint32_t v[NSLOT] = {0};
	uint8_t b[REC];
	int tried = 0;
	for (int k = 0; k <= issued && k <= n; k++) {
		if (k > 0) {
			struct rec_op o = rec_op(seed, k - 1);
			v[o.slot]++;
			if (!o.sync && k != n)
				continue; /* not a boundary */
		}
		if (k < synced)
			continue;
		tried++;
		int s;
		for (s = 0; s < NSLOT; s++) {
			size_t off = (size_t)s * REC;
			memset(b, 0, REC);
			if (off < len)
				memcpy(b, file + off, len - off < REC ? len - off : REC);
			uint8_t want[REC];
			if (v[s])
				rec_fill(want, seed, s, v[s]);
			else
				memset(want, 0, REC);
			if (memcmp(b, want, REC))
				break;
		}
		if (s == NSLOT)
			return 0;
	}
	snprintf(why, 256, "the file matches none of the %d group boundaries between %d (synced) and %d (issued)",
		 tried, synced, issued);
	return -1;
}

#endif
