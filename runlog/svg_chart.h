/* Line charts as SVG, for `stoke plot`: panels with axes, ticks, grid and
 * lines; a legend; text. No dependency: SVG is text, and any browser,
 * rsvg-convert or ImageMagick renders it.
 *
 *     stk_svg *s;
 *     STK_TRY(stk_svg_begin(900, 600, &s));
 *     stk_chart_line l = {&series, "#1f77b4", false};
 *     stk_svg_panel(s, (stk_rect){60, 40, 380, 220}, "loss", "step", &l, 1);
 *     stk_svg_text(s, 450, 20, 16, "middle", "run-cnn");
 *     char *text; size_t len;
 *     STK_TRY(stk_svg_end(s, &text, &len));   // frees s; the caller frees text
 */
#pragma once

#include "common/status.h"
#include "runlog/run_log.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_svg stk_svg;

typedef struct stk_rect {
    double x, y, w, h; /* the plot area, in pixels; labels go around it */
} stk_rect;

typedef struct stk_chart_line {
    const stk_series *s;
    const char *color; /* any SVG colour */
    bool dashed;
} stk_chart_line;

/* Lines with more points than this are drawn as the means of this many
 * equal runs of points (a per-step loss over a long run, smoothed). */
#define STK_CHART_MAX_POINTS 1500

stk_status stk_svg_begin(int width, int height, stk_svg **out);
/* One chart: axes over the finite points of every line (NaN points break
 * a line), about five "nice" ticks per axis, the title above, x label
 * below; "no data" when no line has a finite point. */
void stk_svg_panel(stk_svg *s, stk_rect area, const char *title, const char *x_label,
                   const stk_chart_line *lines, int n_lines);
/* Text (XML-escaped) at x, y; anchor "start", "middle" or "end". */
void stk_svg_text(stk_svg *s, double x, double y, int size, const char *anchor, const char *text);
/* A short line of a legend entry in `color` (dashed or not) at x, y. */
void stk_svg_swatch(stk_svg *s, double x, double y, const char *color, bool dashed);
/* Finish: the document's text (malloc'd) and length; frees s. Errors: NOMEM. */
stk_status stk_svg_end(stk_svg *s, char **text, size_t *len);

/* "Nice" tick positions covering [lo, hi]: a step of 1, 2 or 5 times a power
 * of ten giving 3..7 ticks. Returns the count (at most max) (for tests). */
int stk_chart_ticks(double lo, double hi, double *ticks, int max);

#ifdef __cplusplus
}
#endif
