#include "runlog/svg_chart.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct stk_svg {
    FILE *f; /* an open_memstream over text */
    char *text;
    size_t len;
};

stk_status stk_svg_begin(int width, int height, stk_svg **out)
{
    *out = NULL;
    stk_svg *s = calloc(1, sizeof *s);
    if (!s || !(s->f = open_memstream(&s->text, &s->len))) {
        free(s);
        return stk_error(STK_ERR_NOMEM, "no memory for a chart");
    }
    fprintf(s->f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            width, height, width, height);
    *out = s;
    return STK_OK;
}

static void escaped(FILE *f, const char *t)
{
    for (; *t; t++) {
        switch (*t) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*t, f);
        }
    }
}

void stk_svg_text(stk_svg *s, double x, double y, int size, const char *anchor, const char *text)
{
    fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\">", x, y, size,
            anchor);
    escaped(s->f, text);
    fputs("</text>\n", s->f);
}

void stk_svg_swatch(stk_svg *s, double x, double y, const char *color, bool dashed)
{
    fprintf(s->f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"2.5\"%s/>\n",
            x, y, x + 24, y, color, dashed ? " stroke-dasharray=\"6 3\"" : "");
}

int stk_chart_ticks(double lo, double hi, double *ticks, int max)
{
    if (!(hi > lo)) { /* one value (or none): a tick on it */
        if (max > 0) ticks[0] = lo;
        return max > 0;
    }
    double raw = (hi / 2 - lo / 2) / 2.5, mag = pow(10, floor(log10(raw))), step = mag;
    static const double mult[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++)
        if (mag * mult[i] >= raw) {
            step = mag * mult[i];
            break;
        }
    int n = 0;
    /* halves and isfinite: ranges near DBL_MAX (1e308 .. -1e308) overflow no sum */
    for (double t = ceil(lo / step - 1e-9) * step; isfinite(t) && t <= hi + step * 1e-9 && n < max;
         t += step)
        ticks[n++] = fabs(t) < step * 1e-9 ? 0 : t;
    return n;
}

/* The finite range of a set of lines. */
static bool range(const stk_chart_line *lines, int n, double *x0, double *x1, double *y0,
                  double *y1)
{
    bool any = false;
    for (int l = 0; l < n; l++) {
        const stk_series *s = lines[l].s;
        for (size_t i = 0; s && i < s->n; i++) {
            if (!isfinite(s->x[i]) || !isfinite(s->y[i])) continue;
            if (!any) *x0 = *x1 = s->x[i], *y0 = *y1 = s->y[i];
            any = true;
            *x0 = fmin(*x0, s->x[i]), *x1 = fmax(*x1, s->x[i]);
            *y0 = fmin(*y0, s->y[i]), *y1 = fmax(*y1, s->y[i]);
        }
    }
    return any;
}

static void tick_label(char *buf, size_t n, double v)
{
    double a = fabs(v);
    if (a >= 1e5 || (a > 0 && a < 1e-3))
        snprintf(buf, n, "%.0e", v);
    else
        snprintf(buf, n, "%g", v);
}

/* v's place in [lo, hi] as 0..1, without overflow: hi - lo may exceed
 * DBL_MAX (values of 1e308 and -1e308), their halves' difference cannot. */
static double unit(double v, double lo, double hi) { return (v / 2 - lo / 2) / (hi / 2 - lo / 2); }

/* The mean of the finite points x[i..i+per) (and y), scaled per term so that
 * sums of values near DBL_MAX stay finite; k: how many were finite. */
static int bucket_mean(const stk_series *se, size_t i, size_t per, double *mx, double *my)
{
    double sx = 0, sy = 0, w = 1.0 / (double)per;
    int k = 0;
    for (size_t j = i; j < i + per && j < se->n; j++)
        if (isfinite(se->x[j]) && isfinite(se->y[j])) sx += se->x[j] * w, sy += se->y[j] * w, k++;
    if (k) {
        *mx = fmin(fmax(sx * ((double)per / k), -DBL_MAX), DBL_MAX);
        *my = fmin(fmax(sy * ((double)per / k), -DBL_MAX), DBL_MAX);
    }
    return k;
}

/* A line's points in pixels, means over runs when there are too many. */
static void draw_line(stk_svg *s, const stk_chart_line *l, stk_rect a, double x0, double x1,
                      double y0, double y1)
{
    const stk_series *se = l->s;
    if (!se || !se->n) return;
    size_t per = (se->n + STK_CHART_MAX_POINTS - 1) / STK_CHART_MAX_POINTS;
    bool open = false;
    int on_path = 0;
    for (size_t i = 0; i < se->n; i += per) {
        double mx, my;
        if (!bucket_mean(se, i, per, &mx, &my)) { /* a gap */
            if (open) fprintf(s->f, "\"/>\n");
            open = false;
            continue;
        }
        double px = a.x + unit(mx, x0, x1) * a.w;
        double py = a.y + a.h - unit(my, y0, y1) * a.h;
        if (!open) {
            fprintf(s->f,
                    "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" "
                    "stroke-linejoin=\"round\"%s points=\"",
                    l->color, l->dashed ? " stroke-dasharray=\"6 3\"" : "");
            open = true;
            on_path = 0;
        }
        fprintf(s->f, "%s%.1f,%.1f", on_path++ ? " " : "", px, py);
    }
    if (open) fprintf(s->f, "\"/>\n");
    if (se->n <= 60) /* few points (per epoch): mark them */
        for (size_t i = 0; i < se->n; i++)
            if (isfinite(se->x[i]) && isfinite(se->y[i]))
                fprintf(s->f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n",
                        a.x + unit(se->x[i], x0, x1) * a.w,
                        a.y + a.h - unit(se->y[i], y0, y1) * a.h, l->color);
}

/* One value (a flat line): a band around it, wide enough to differ from it
 * at its magnitude (0.5 either side, more for values beyond 5e8). */
static void widen(double *lo, double *hi)
{
    double d = fmax(0.5, fabs(*lo) * 1e-9);
    *lo = fmax(*lo - d, -DBL_MAX), *hi = fmin(*hi + d, DBL_MAX);
}

void stk_svg_panel(stk_svg *s, stk_rect a, const char *title, const char *x_label,
                   const stk_chart_line *lines, int n_lines)
{
    stk_svg_text(s, a.x + a.w / 2, a.y - 8, 14, "middle", title);
    fprintf(s->f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#444\"/>\n",
            a.x, a.y, a.w, a.h);
    double x0, x1, y0, y1;
    if (!range(lines, n_lines, &x0, &x1, &y0, &y1)) {
        stk_svg_text(s, a.x + a.w / 2, a.y + a.h / 2, 12, "middle", "no data");
        return;
    }
    /* pad the y range a little; a flat line gets a unit band */
    if (y1 / 2 - y0 / 2 < 0.5e-12 * fmax(1, fabs(y0))) widen(&y0, &y1);
    double pad = (y1 / 2 - y0 / 2) * 0.1;
    y0 = fmax(y0 - pad, -DBL_MAX), y1 = fmin(y1 + pad, DBL_MAX);
    if (x1 <= x0) widen(&x0, &x1);
    double t[16];
    char lab[32];
    int n = stk_chart_ticks(y0, y1, t, 16);
    for (int i = 0; i < n; i++) {
        double py = a.y + a.h - unit(t[i], y0, y1) * a.h;
        fprintf(s->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                a.x, py, a.x + a.w, py);
        tick_label(lab, sizeof lab, t[i]);
        stk_svg_text(s, a.x - 5, py + 4, 11, "end", lab);
    }
    n = stk_chart_ticks(x0, x1, t, 16);
    for (int i = 0; i < n; i++) {
        double px = a.x + unit(t[i], x0, x1) * a.w;
        fprintf(s->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                px, a.y, px, a.y + a.h);
        tick_label(lab, sizeof lab, t[i]);
        stk_svg_text(s, px, a.y + a.h + 15, 11, "middle", lab);
    }
    stk_svg_text(s, a.x + a.w / 2, a.y + a.h + 32, 12, "middle", x_label);
    for (int l = 0; l < n_lines; l++) draw_line(s, &lines[l], a, x0, x1, y0, y1);
}

stk_status stk_svg_end(stk_svg *s, char **text, size_t *len)
{
    fputs("</svg>\n", s->f);
    bool bad = ferror(s->f) != 0;
    fclose(s->f);
    *text = s->text;
    *len = s->len;
    free(s);
    if (bad || !*text) {
        free(*text);
        *text = NULL;
        return stk_error(STK_ERR_NOMEM, "no memory for a chart");
    }
    return STK_OK;
}
