/*
 * cli.c: errors, option parsing and the JSON writer shared by the subcommands.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

const char *cli_cmd = "atomio";

static void vline(const char *fmt, va_list ap)
{
	/* Build the whole line first so that it reaches stderr in one write,
	 * whatever else (a progress line) is printing. */
	char buf[2048];
	int n = snprintf(buf, sizeof(buf), "%s: ", cli_cmd);
	if (n < 0)
		n = 0;
	vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	fprintf(stderr, "%s\n", buf);
}

void cli_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vline(fmt, ap);
	va_end(ap);
}

void cli_die(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vline(fmt, ap);
	va_end(ap);
	exit(code);
}

void cli_usage(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s (see '%s --help')\n", cli_cmd, msg, cli_cmd);
	exit(EX_USAGE);
}

void cli_bad_option(char **argv, int c)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "?";
	if (c == ':')
		cli_usage("option '%s' needs a value", arg);
	if (optopt && optopt != '?')
		cli_usage("unknown option '-%c'", optopt);
	cli_usage("unknown option '%s'", arg);
}

uint64_t cli_size(const char *opt, const char *s)
{
	errno = 0;
	char *end;
	double v = strtod(s, &end);
	if (end == s || errno || v < 0 || !isfinite(v))
		cli_usage("%s: '%s' is not a size", opt, s);
	while (*end == ' ')
		end++;
	double mul = 1;
	switch (tolower((unsigned char)*end)) {
	case 0: break;
	case 'b': mul = 1; end++; break;
	case 'k': mul = 1024.0; end++; break;
	case 'm': mul = 1024.0 * 1024; end++; break;
	case 'g': mul = 1024.0 * 1024 * 1024; end++; break;
	case 't': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
	default: cli_usage("%s: '%s' is not a size (use e.g. 4096, 16k, 64M, 1G)", opt, s);
	}
	/* accept k, kb, kib (all binary: sizes here are page and file sizes) */
	if (mul > 1 && (*end == 'i' || *end == 'I'))
		end++;
	if (mul > 1 && (*end == 'b' || *end == 'B'))
		end++;
	if (*end)
		cli_usage("%s: '%s' is not a size (use e.g. 4096, 16k, 64M, 1G)", opt, s);
	v *= mul;
	if (v > 9.0e18 || v != floor(v))
		cli_usage("%s: '%s' is not a whole number of bytes", opt, s);
	return (uint64_t)v;
}

double cli_seconds(const char *opt, const char *s)
{
	errno = 0;
	char *end;
	double v = strtod(s, &end);
	if (end == s || errno || v < 0 || !isfinite(v))
		cli_usage("%s: '%s' is not a duration", opt, s);
	if (!strcmp(end, "") || !strcmp(end, "s"))
		return v;
	if (!strcmp(end, "ms"))
		return v / 1000;
	if (!strcmp(end, "m") || !strcmp(end, "min"))
		return v * 60;
	if (!strcmp(end, "h"))
		return v * 3600;
	cli_usage("%s: '%s' is not a duration (use e.g. 20, 20s, 500ms, 2m)", opt, s);
}

uint64_t cli_uint(const char *opt, const char *s, uint64_t min, uint64_t max)
{
	errno = 0;
	char *end;
	if (!isdigit((unsigned char)*s))
		cli_usage("%s: '%s' is not a number", opt, s);
	unsigned long long v = strtoull(s, &end, 0);
	if (*end || errno)
		cli_usage("%s: '%s' is not a number", opt, s);
	if (v < min || v > max)
		cli_usage("%s: %llu is out of range (%llu..%llu)", opt, v, (unsigned long long)min,
			  (unsigned long long)max);
	return v;
}

unsigned cli_list(const char *opt, const char *s, uint64_t *out, unsigned max, bool sizes,
		  uint64_t min, uint64_t maxv)
{
	char buf[512];
	if (strlen(s) >= sizeof(buf))
		cli_usage("%s: list too long", opt);
	strcpy(buf, s);
	unsigned n = 0;
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == max)
			cli_usage("%s: at most %u values", opt, max);
		uint64_t v = sizes ? cli_size(opt, tok) : cli_uint(opt, tok, min, maxv);
		if (v < min || v > maxv)
			cli_usage("%s: %s is out of range (%llu..%llu)", opt, tok,
				  (unsigned long long)min, (unsigned long long)maxv);
		out[n++] = v;
	}
	if (!n)
		cli_usage("%s: empty list", opt);
	return n;
}

const char *fmt_bytes(char *buf, size_t n, uint64_t v)
{
	static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	double d = (double)v;
	while (d >= 1024 && u < 4) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, n, "%llu B", (unsigned long long)v);
	else if (d == floor(d))
		snprintf(buf, n, "%.0f %s", d, unit[u]);
	else
		snprintf(buf, n, "%.1f %s", d, unit[u]);
	return buf;
}

double now_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --- JSON ------------------------------------------------------------------ */

void json_init(struct json *j, FILE *f)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
	j->first[0] = true;
	j->pretty = true;
}

/* One UTF-8 sequence at p: its length (1..4) and code point, or 0 when the
 * bytes are not valid UTF-8 (overlong, surrogate, beyond U+10FFFF, cut). */
static int utf8_next(const unsigned char *p, uint32_t *cp)
{
	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	int n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
	if (!n || p[0] > 0xf4)
		return 0;
	uint32_t c = p[0] & (0x7f >> n);
	for (int i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
	if (c < min[n] || c > 0x10ffff || (c >= 0xd800 && c < 0xe000))
		return 0;
	*cp = c;
	return n;
}

/* Characters that must not reach a terminal raw from a file name: controls
 * (C0, DEL, C1), line and paragraph separators, and the bidirectional
 * overrides, embeddings, isolates and marks that reorder what follows. */
static bool cp_unsafe(uint32_t c)
{
	return c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || c == 0x61c || c == 0x200e ||
	       c == 0x200f || (c >= 0x2028 && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) ||
	       c == 0xfeff;
}

const char *cli_esc(const char *s)
{
	/* each input byte becomes at most 4 output bytes ("\\xNN"); a code
	 * point of 2..4 bytes at most 6 ("\\u202e") */
	static char bufs[4][4 * 2 * 4096 + 1];
	static unsigned k;
	char *o = bufs[k++ % 4], *e = o + sizeof(bufs[0]) - 8;
	char *out = o;
	for (const unsigned char *p = (const unsigned char *)s; *p && o < e;) {
		uint32_t c;
		int n = utf8_next(p, &c);
		if (n == 1 && c == '\\')
			o += sprintf(o, "\\\\");
		else if (n == 1 && c == '\n')
			o += sprintf(o, "\\n");
		else if (n == 1 && c == '\t')
			o += sprintf(o, "\\t");
		else if (!n || (n == 1 && cp_unsafe(c)))
			o += sprintf(o, "\\x%02x", *p);
		else if (cp_unsafe(c))
			o += sprintf(o, "\\u%04x", (unsigned)c);
		else
			o += sprintf(o, "%.*s", n, (const char *)p);
		p += n ? n : 1;
	}
	*o = 0;
	return out;
}

static void jstring(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		uint32_t c;
		int n = utf8_next(p, &c);
		if (!n) {
			/* not UTF-8: JSON cannot carry the byte; name it */
			fprintf(f, "\\\\x%02x", *p);
			p++;
			continue;
		}
		switch (c) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (cp_unsafe(c))
				fprintf(f, "\\u%04x", (unsigned)c);
			else
				fwrite(p, 1, (size_t)n, f);
		}
		p += n;
	}
	fputc('"', f);
}

static void jkey(struct json *j, const char *key)
{
	if (!j->first[j->depth])
		fputc(',', j->f);
	j->first[j->depth] = false;
	if (j->pretty && j->depth > 0) {
		fputc('\n', j->f);
		for (int i = 0; i < j->depth; i++)
			fputs("  ", j->f);
	}
	if (key) {
		jstring(j->f, key);
		fputs(j->pretty ? ": " : ":", j->f);
	}
}

static void jopen(struct json *j, const char *key, char c)
{
	jkey(j, key);
	fputc(c, j->f);
	if (j->depth < 31)
		j->depth++;
	j->first[j->depth] = true;
}

static void jclose(struct json *j, char c)
{
	bool empty = j->first[j->depth];
	if (j->depth > 0)
		j->depth--;
	if (j->pretty && !empty) {
		fputc('\n', j->f);
		for (int i = 0; i < j->depth; i++)
			fputs("  ", j->f);
	}
	fputc(c, j->f);
}

void json_obj(struct json *j, const char *key) { jopen(j, key, '{'); }
void json_end_obj(struct json *j) { jclose(j, '}'); }
void json_arr(struct json *j, const char *key) { jopen(j, key, '['); }
void json_end_arr(struct json *j) { jclose(j, ']'); }

void json_str(struct json *j, const char *key, const char *v)
{
	jkey(j, key);
	if (v)
		jstring(j->f, v);
	else
		fputs("null", j->f);
}

void json_int(struct json *j, const char *key, long long v)
{
	jkey(j, key);
	fprintf(j->f, "%lld", v);
}

void json_uint(struct json *j, const char *key, unsigned long long v)
{
	jkey(j, key);
	fprintf(j->f, "%llu", v);
}

void json_num(struct json *j, const char *key, double v)
{
	jkey(j, key);
	if (!isfinite(v))
		fputs("null", j->f);
	else if (v == floor(v) && fabs(v) < 1e15)
		fprintf(j->f, "%.0f", v);
	else
		fprintf(j->f, "%.6g", v);
}

void json_bool(struct json *j, const char *key, bool v)
{
	jkey(j, key);
	fputs(v ? "true" : "false", j->f);
}

void json_null(struct json *j, const char *key)
{
	jkey(j, key);
	fputs("null", j->f);
}

void json_finish(struct json *j) { fputc('\n', j->f); }
