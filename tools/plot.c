/*
 * plot.c: `atomio bench --plot FILE.svg`.  One row per configuration, three
 * panels: latency CDFs (log time axis), throughput bars (median ops/s with
 * the min..max of the repetitions as a whisker), and bytes written per user
 * byte (device counters, and this process's own).  Plain SVG 1.1, no
 * scripts or external fonts, so any browser or rsvg-convert shows it.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

#define W 1200
#define ROW_H 420
#define HEAD_H 64

static const char *color_of(const char *mode, unsigned i)
{
	static const struct {
		const char *name, *color;
	} known[] = {
		{"unsafe", "#8c8c8c"}, {"doublewrite", "#e07b24"}, {"atomio", "#1f63b4"}, {"kernel", "#2a9d3a"},
	};
	static const char *extra[] = {"#9b59b6", "#c0392b", "#16a085", "#7f6000"};
	for (unsigned k = 0; k < sizeof(known) / sizeof(known[0]); k++)
		if (!strcmp(mode, known[k].name))
			return known[k].color;
	return extra[i % 4];
}

static void esc(FILE *f, const char *s, size_t max)
{
	size_t n = 0;
	for (; *s && n < max; s++, n++) {
		if (*s == '&')
			fputs("&amp;", f);
		else if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '"')
			fputs("&quot;", f);
		else
			fputc(*s, f);
	}
	if (*s)
		fputs("...", f);
}

static void text(FILE *f, double x, double y, const char *anchor, int size, const char *extra,
		 const char *s)
{
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\"%s%s>", x, y, anchor,
		size, extra ? " " : "", extra ? extra : "");
	esc(f, s, 160);
	fputs("</text>\n", f);
}

static void fmt_us(char *b, size_t n, double us)
{
	/* three significant digits: 659 us, 1.03 ms, 12.5 ms */
	if (us >= 1e6)
		snprintf(b, n, "%.3g s", us / 1e6);
	else if (us >= 1e3)
		snprintf(b, n, "%.3g ms", us / 1e3);
	else
		snprintf(b, n, "%.3g us", us);
}

static void fmt_rate(char *b, size_t n, double v)
{
	if (v >= 1e6)
		snprintf(b, n, "%.2fM", v / 1e6);
	else if (v >= 1e4)
		snprintf(b, n, "%.1fk", v / 1e3);
	else
		snprintf(b, n, "%.0f", v);
}

/* A panel's box: [x0,x0+w] x [y0,y0+h]. */
struct box {
	double x0, y0, w, h;
};

/* A panel's title and, under it, what it shows. */
static void panel_title(FILE *f, const struct box *b, const char *title, const char *what)
{
	text(f, b->x0 + b->w / 2, b->y0 - 26, "middle", 15, "font-weight=\"bold\"", title);
	text(f, b->x0 + b->w / 2, b->y0 - 10, "middle", 11, "fill=\"#444\"", what);
}

/* The CDF's axes: x a log scale of decades l0..l1 (microseconds); y
 * -log10(1 - q), so that 90%, 99% and 99.9% are as far apart as 0% and
 * 90%: the tail, where the modes differ most, is visible. */
struct cdf_axes {
	struct box b;
	double l0, l1, nines;
};

static double xof(const struct cdf_axes *a, double us)
{
	return a->b.x0 + (log10(fmax(us, 1e-3)) - a->l0) / (a->l1 - a->l0) * a->b.w;
}

static double yof(const struct cdf_axes *a, double q)
{
	return a->b.y0 + a->b.h - fmin(-log10(fmax(1 - q, 1e-9)), a->nines) / a->nines * a->b.h;
}

/* The scales from the modes' latencies.  false: no data to draw. */
static bool cdf_scales(const struct plot_panel *p, struct cdf_axes *a)
{
	double lo = INFINITY, hi = 0;
	uint64_t most = 0;
	for (unsigned i = 0; i < p->nmodes; i++) {
		const struct plot_mode *m = &p->m[i];
		if (!m->skipped && m->lat->count > most)
			most = m->lat->count;
		if (m->skipped || !m->lat->count)
			continue;
		lo = fmin(lo, (double)m->lat->min / 1e3);
		hi = fmax(hi, (double)m->lat->max / 1e3);
	}
	if (!(hi > 0))
		return false;
	a->l0 = floor(log10(fmax(lo, 0.1)));
	a->l1 = ceil(log10(hi));
	if (a->l1 <= a->l0)
		a->l1 = a->l0 + 1;
	a->nines = most >= 100000 ? 5 : most >= 10000 ? 4 : 3;
	return true;
}

/* The grid: decades (labelled) and their multiples; the quantiles' lines. */
static void cdf_grid(FILE *f, const struct cdf_axes *a)
{
	const struct box *b = &a->b;
	for (double d = a->l0; d <= a->l1 + 1e-9; d++) {
		for (int k = 1; k < 10; k++) {
			double us = pow(10, d) * k;
			if (log10(us) > a->l1 + 1e-9)
				break;
			double x = xof(a, us);
			fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n", x,
				b->y0, x, b->y0 + b->h, k == 1 ? "#ccc" : "#eee");
			if (k == 1) {
				char t[32];
				fmt_us(t, sizeof(t), us);
				text(f, x, b->y0 + b->h + 16, "middle", 12, NULL, t);
			}
		}
	}
	static const double qs[] = {0, 0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999};
	static const char *ql[] = {"0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%"};
	for (unsigned k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
		if (-log10(1 - qs[k]) > a->nines + 1e-9)
			break;
		double y = yof(a, qs[k]);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ccc\"%s/>\n",
			b->x0, y, b->x0 + b->w, y, k ? " stroke-dasharray=\"4,3\"" : "");
		text(f, b->x0 - 6, y + 4, "end", 12, NULL, ql[k]);
	}
	text(f, b->x0 + b->w / 2, b->y0 + b->h + 34, "middle", 12, NULL, "latency per op (log scale)");
}

/* One mode's curve: a step at each bucket of its histogram. */
static void cdf_curve(FILE *f, const struct cdf_axes *a, const struct plot_mode *m, const char *col)
{
	fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.2\" points=\"", col);
	fprintf(f, "%.1f,%.1f ", xof(a, (double)m->lat->min / 1e3), yof(a, 0));
	uint64_t cum = 0;
	double last_y = yof(a, 0);
	for (unsigned b = 0; b < HIST_N; b++) {
		if (!m->lat->b[b])
			continue;
		cum += m->lat->b[b];
		uint64_t blo, bw;
		hist_bucket(b, &blo, &bw);
		double us = fmin((double)(blo + bw) / 1e3, (double)m->lat->max / 1e3);
		double y = yof(a, (double)cum / (double)m->lat->count);
		/* steps: hold the level until the next bucket */
		fprintf(f, "%.1f,%.1f %.1f,%.1f ", xof(a, us), last_y, xof(a, us), y);
		last_y = y;
	}
	fputs("\"/>\n", f);
}

/* The legend's line li: the mode's colour, name, p50 and p99. */
static void cdf_legend(FILE *f, const struct box *b, const struct plot_mode *m, const char *col, unsigned li)
{
	char b1[32], b2[32], lab[128];
	fmt_us(b1, sizeof(b1), hist_quantile(m->lat, 0.5) / 1e3);
	fmt_us(b2, sizeof(b2), hist_quantile(m->lat, 0.99) / 1e3);
	snprintf(lab, sizeof(lab), "%s  p50 %s, p99 %s", m->name, b1, b2);
	double ly = b->y0 + 20 + 18.0 * (double)li;
	double lx = b->x0 + 8;
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"245\" height=\"18\" fill=\"#fff\" "
		   "fill-opacity=\"0.85\"/>\n", lx - 4, ly - 13);
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
		   "stroke-width=\"3\"/>\n", lx, ly - 4, lx + 18, ly - 4, col);
	text(f, lx + 24, ly, "start", 12, NULL, lab);
}

/* Latency CDFs in the box. */
static void cdf_panel(FILE *f, const struct plot_panel *p, const struct box *b)
{
	panel_title(f, b, "Latency CDF",
		    "share of ops done within a time; tail stretched (50%, 90%, 99%, 99.9% equally spaced)");
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fbfbfb\" "
		   "stroke=\"#999\"/>\n", b->x0, b->y0, b->w, b->h);
	struct cdf_axes a = {.b = *b};
	if (!cdf_scales(p, &a)) {
		text(f, b->x0 + b->w / 2, b->y0 + b->h / 2, "middle", 13, NULL, "no data");
		return;
	}
	cdf_grid(f, &a);
	unsigned li = 0;
	for (unsigned i = 0; i < p->nmodes; i++) {
		const struct plot_mode *m = &p->m[i];
		if (m->skipped || !m->lat->count)
			continue;
		const char *col = color_of(m->name, i);
		cdf_curve(f, &a, m, col);
		cdf_legend(f, b, m, col, li++);
	}
}

/* A throughput bar: the median, a whisker from the lowest to the highest
 * repetition, the rate, and the ratio to doublewrite (dw, NAN: none). */
static void throughput_bar(FILE *f, const struct box *b, const struct plot_mode *m, const char *col,
			   double cx, double bw, double top, double dw)
{
	double y0 = b->y0, h = b->h;
	char t[64];
	double v = m->ops_median, bh = v / top * h;
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
		cx - bw / 2, y0 + h - bh, bw, bh, col);
	if (isfinite(m->ops_min) && isfinite(m->ops_max) && m->ops_max > m->ops_min) {
		double ya = y0 + h - m->ops_min / top * h, yb = y0 + h - m->ops_max / top * h;
		fprintf(f, "<path d=\"M%.1f %.1fV%.1fM%.1f %.1fh12M%.1f %.1fh12\" stroke=\"#333\" "
			   "fill=\"none\"/>\n", cx, ya, yb, cx - 6, ya, cx - 6, yb);
	}
	fmt_rate(t, sizeof(t), v);
	double ylab = y0 + h - fmax(bh, isfinite(m->ops_max) ? m->ops_max / top * h : bh) - 6;
	text(f, cx, ylab, "middle", 13, "font-weight=\"bold\"", t);
	if (isfinite(dw) && strcmp(m->name, "doublewrite")) {
		snprintf(t, sizeof(t), "%.2fx dblwr", v / dw);
		text(f, cx, ylab - 15, "middle", 11, "fill=\"#444\"", t);
	}
}

/* A wear bar: the device's counters as the bar, this process's own writes
 * as a tick, and the device's figure. */
static void wear_bar(FILE *f, const struct box *b, const struct plot_mode *m, const char *col, double cx,
		     double bw, double top)
{
	double y0 = b->y0, h = b->h;
	char t[64];
	double v1 = m->dev_bpb, v2 = m->proc_bpb, ytop = y0 + h;
	if (isfinite(v1)) {
		double bh = v1 / top * h;
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
			cx - bw / 2, y0 + h - bh, bw, bh, col);
		ytop = fmin(ytop, y0 + h - bh);
	}
	if (isfinite(v2)) {
		double y = y0 + h - v2 / top * h;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#111\" "
			   "stroke-width=\"2.5\"/>\n", cx - bw / 2 - 5, y, cx + bw / 2 + 5, y);
		ytop = fmin(ytop, y);
	}
	if (isfinite(v1))
		snprintf(t, sizeof(t), "%.2f", v1);
	else
		snprintf(t, sizeof(t), "-");
	text(f, cx, ytop - 6, "middle", 13, "font-weight=\"bold\"", t);
}

/* Bars in the box: which = 0 throughput, 1 bytes per byte. */
static void bar_panel(FILE *f, const struct plot_panel *p, const struct box *b, int which)
{
	double x0 = b->x0, y0 = b->y0, w = b->w, h = b->h;
	panel_title(f, b, which == 0 ? "Throughput" : "Wear",
		    which == 0 ? "ops/s, higher is better" : "bytes written per user byte, lower is better");
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\"/>\n", x0,
		y0 + h, x0 + w, y0 + h);
	unsigned n = 0;
	double top = 0, dw = NAN;
	for (unsigned i = 0; i < p->nmodes; i++) {
		const struct plot_mode *m = &p->m[i];
		if (m->skipped)
			continue;
		n++;
		if (which == 0)
			top = fmax(top, isfinite(m->ops_max) ? m->ops_max : m->ops_median);
		else
			top = fmax(top, fmax(isfinite(m->dev_bpb) ? m->dev_bpb : 0,
					     isfinite(m->proc_bpb) ? m->proc_bpb : 0));
		if (!strcmp(m->name, "doublewrite"))
			dw = m->ops_median;
	}
	if (!n || !(top > 0)) {
		text(f, x0 + w / 2, y0 + h / 2, "middle", 13, NULL, "no data");
		return;
	}
	top *= 1.18;
	double slot = w / n, bw = fmin(slot * 0.6, 90);
	unsigned k = 0;
	for (unsigned i = 0; i < p->nmodes; i++) {
		const struct plot_mode *m = &p->m[i];
		if (m->skipped)
			continue;
		const char *col = color_of(m->name, i);
		double cx = x0 + slot * (k + 0.5);
		if (which == 0)
			throughput_bar(f, b, m, col, cx, bw, top, dw);
		else
			wear_bar(f, b, m, col, cx, bw, top);
		text(f, cx, y0 + h + 16, "middle", 12, NULL, m->name);
		k++;
	}
	if (which == 1) {
		/* y = 1 reference line: each user byte written once */
		double y1 = y0 + h - 1.0 / top * h;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#666\" "
			   "stroke-dasharray=\"3,3\"/>\n", x0, y1, x0 + w, y1);
		text(f, x0 + w + 2, y1 + 4, "start", 10, "fill=\"#555\"", "1");
	}
	text(f, x0 + w / 2, y0 + h + 34, "middle", 11, "fill=\"#444\"",
	     which == 1 ? "bar: device counters; tick: this process" : "bar: median; whisker: min..max of repetitions");
}

int bench_plot(const char *path, const char *title, const char *subtitle,
	       const struct plot_panel *p, unsigned npanels)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	double H = HEAD_H + ROW_H * npanels;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
		   "viewBox=\"0 0 %d %.0f\" font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\">\n"
		   "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n", W, H, W, H);
	text(f, 24, 30, "start", 20, "font-weight=\"bold\"", title);
	text(f, 24, 52, "start", 13, "fill=\"#333\"", subtitle);
	for (unsigned r = 0; r < npanels; r++) {
		const struct plot_panel *pp = &p[r];
		double y = HEAD_H + ROW_H * r;
		text(f, 24, y + 26, "start", 15, "font-weight=\"bold\" fill=\"#1f3b5c\"", pp->title);
		double py = y + 80, ph = ROW_H - 80 - 66;
		cdf_panel(f, pp, &(struct box){70, py, 480, ph});
		bar_panel(f, pp, &(struct box){610, py, 300, ph}, 0);
		bar_panel(f, pp, &(struct box){950, py, 220, ph}, 1);
		/* skipped modes, with their reasons */
		double sy = y + ROW_H - 12;
		for (unsigned i = 0; i < pp->nmodes; i++) {
			if (!pp->m[i].skipped)
				continue;
			char b[400];
			snprintf(b, sizeof(b), "%s: skipped: %s", pp->m[i].name, pp->m[i].skipped);
			text(f, 610, sy, "start", 11, "fill=\"#777\"", b);
			sy -= 14;
		}
	}
	fputs("</svg>\n", f);
	if (ferror(f)) {
		fclose(f);
		errno = EIO;
		return -1;
	}
	return fclose(f) == 0 ? 0 : -1;
}
