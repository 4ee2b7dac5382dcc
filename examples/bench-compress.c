/*
 * bench-compress.c: LZ4 against zstd on the pages `atomio bench` writes
 * (`make bench-compress`), to choose the log records' compressor (issue 7).
 *
 * For 16 KiB and 4 KiB pages that are 0%, 50% and 75% compressible (random
 * bytes, then in every 512 the last share zeros, as `atomio bench
 * --compressible`) and for C text (the headers in /usr/include): the compressed size,
 * the record's size in 4 KiB log blocks as one thread would write it (header
 * 64 + descriptor 32 + data, whole blocks), and the time to compress and to
 * decompress a page.  What matters for the log is the padded size; what
 * matters for the commit is the compression time.
 */
#include <glob.h>
#include <lz4.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#define NPAGES 2000

static uint64_t seed = 1;

static uint64_t rnd(void)
{
	uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void fill(char *b, size_t n, int pct)
{
	for (size_t k = 0; k + 8 <= n; k += 8) {
		uint64_t v = rnd();
		memcpy(b + k, &v, 8);
	}
	size_t z = 512 * (size_t)pct / 100;
	for (size_t c = 0; z && c + 512 <= n; c += 512)
		memset(b + c + 512 - z, 0, z);
}

/* Some C text: the system's headers, concatenated. */
static char *text(size_t *len)
{
	size_t cap = 16u << 20, n = 0;
	char *t = malloc(cap);
	glob_t g;
	if (!t || glob("/usr/include/*.h", 0, NULL, &g))
		return NULL;
	for (size_t i = 0; i < g.gl_pathc && n < cap; i++) {
		FILE *f = fopen(g.gl_pathv[i], "r");
		if (!f)
			continue;
		n += fread(t + n, 1, cap - n, f);
		fclose(f);
	}
	globfree(&g);
	*len = n;
	return t;
}

int main(void)
{
	static const char *names[] = {"lz4", "lz4 fast 4", "zstd -1", "zstd -3"};
	size_t tl = 0;
	char *tx = text(&tl);
	printf("%-6s %-5s %-10s %9s %7s %14s %12s %12s\n", "page", "data", "codec", "bytes", "ratio",
	       "record (raw)", "compress us", "decomp. us");
	for (size_t P = 16384; P >= 4096; P /= 4) {
		char *src = malloc(P * NPAGES), *dst = malloc(2 * P), *out = malloc(P);
		if (!src || !dst || !out)
			return 1;
		for (int pat = 0; pat < 4; pat++) {
			int pct = pat == 0 ? 0 : pat == 1 ? 50 : pat == 2 ? 75 : -1;
			if (pct < 0 && tl < 2 * P)
				continue;
			for (int i = 0; i < NPAGES; i++) {
				if (pct >= 0)
					fill(src + (size_t)i * P, P, pct);
				else
					memcpy(src + (size_t)i * P, tx + ((size_t)i * P * 7) % (tl - P), P);
			}
			for (int a = 0; a < 4; a++) {
				ZSTD_CCtx *cc = ZSTD_createCCtx();
				ZSTD_DCtx *dc = ZSTD_createDCtx();
				double tc = 0, td = 0;
				uint64_t tot = 0, blk = 0, blkraw = 0;
				for (int i = 0; i < NPAGES; i++) {
					const char *in = src + (size_t)i * P;
					size_t cl, dl;
					double t0 = now();
					if (a == 0)
						cl = (size_t)LZ4_compress_default(in, dst, (int)P, (int)(2 * P));
					else if (a == 1)
						cl = (size_t)LZ4_compress_fast(in, dst, (int)P, (int)(2 * P), 4);
					else
						cl = ZSTD_compressCCtx(cc, dst, 2 * P, in, P, a == 2 ? 1 : 3);
					double t1 = now();
					if (a < 2)
						dl = (size_t)LZ4_decompress_safe(dst, out, (int)cl, (int)P);
					else
						dl = ZSTD_decompressDCtx(dc, out, P, dst, cl);
					double t2 = now();
					if (dl != P || memcmp(out, in, P)) {
						fprintf(stderr, "%s: round trip failed\n", names[a]);
						return 1;
					}
					tc += t1 - t0;
					td += t2 - t1;
					size_t stored = cl < P ? cl : P; /* raw when it does not shrink */
					tot += stored;
					blk += (96 + stored + 4095) / 4096 * 4096;
					blkraw += (96 + P + 4095) / 4096 * 4096;
				}
				char dn[16];
				snprintf(dn, sizeof(dn), pct < 0 ? "text" : "%d%%", pct);
				printf("%-6zu %-5s %-10s %9.0f %7.3f %6.0f (%5.0f) %12.1f %12.1f\n", P, dn, names[a],
				       (double)tot / NPAGES, (double)tot / NPAGES / (double)P,
				       (double)blk / NPAGES, (double)blkraw / NPAGES, tc / NPAGES * 1e6,
				       td / NPAGES * 1e6);
				ZSTD_freeCCtx(cc);
				ZSTD_freeDCtx(dc);
			}
		}
		free(src);
		free(dst);
		free(out);
	}
	free(tx);
	return 0;
}
