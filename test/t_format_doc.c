/* docs/FORMAT.md carries the same format text as the comment at the top of
 * src/format.h: the two may not drift apart. */
#include "t.h"

static char *slurp_text(const char *rel)
{
	char p[4096];
	const char *root = getenv("ATOMIO_SRCDIR");
	snprintf(p, sizeof(p), "%s/%s", root ? root : ".", rel);
	size_t n;
	uint8_t *b = t_slurp(p, &n);
	if (!b)
		t_skip("%s not found (run from the source tree or set ATOMIO_SRCDIR)", p);
	b[n] = 0;
	return (char *)b;
}

/* The comment's lines without their leading " * ". */
static char *comment_text(const char *src)
{
	const char *a = strstr(src, "/*\n"), *e = strstr(src, "*/");
	CHECK(a && e && e > a);
	a += 3;
	char *out = calloc(1, (size_t)(e - a) + 1), *o = out;
	while (a < e) {
		const char *nl = memchr(a, '\n', (size_t)(e - a));
		if (!nl)
			nl = e;
		const char *l = a;
		size_t ll = (size_t)(nl - a);
		if (ll >= 3 && !strncmp(l, " * ", 3))
			l += 3;
		else if (ll >= 2 && !strncmp(l, " *", 2))
			l += 2;
		memcpy(o, l, (size_t)(nl - l));
		o += nl - l;
		*o++ = '\n';
		a = nl + 1;
	}
	*o = 0;
	while (o > out && (o[-1] == '\n' || o[-1] == ' '))
		*--o = 0;
	return out;
}

int main(void)
{
	char *h = slurp_text("src/format.h"), *md = slurp_text("docs/FORMAT.md");
	char *c = comment_text(h);
	const char *f = strstr(md, "```\n");
	CHECK(f);
	f += 4;
	const char *g = strstr(f, "\n```");
	CHECK(g);
	if ((size_t)(g - f) != strlen(c) || memcmp(f, c, strlen(c))) {
		size_t i = 0;
		while (f[i] == c[i])
			i++;
		fprintf(stderr, "docs/FORMAT.md and src/format.h differ at char %zu:\n md: %.60s\n  h: %.60s\n",
			i, f + i, c + i);
		return 1;
	}
	free(h);
	free(md);
	free(c);
	return 0;
}
