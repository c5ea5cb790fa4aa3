/* `stoke plot`'s pieces shared by its two drawings: runs (cmd_plot.c) and a
 * stoke tune sweep (plot_sweep.c). */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>

/* The SVG text written to `out`: .svg as it is, .png through rsvg-convert. */
stk_status plot_save(const char *out, const char *svg, size_t len);

/* DIR holds a sweep (DIR/trials.csv). */
bool plot_is_sweep(const char *dir);

/* A sweep as SVG: each trial's metric against epochs (trials/ID/metrics.csv),
 * the best so far against trials; *n the trials drawn. Errors: FORMAT (not a
 * sweep's trials.csv), IO, NOMEM. */
stk_status plot_sweep(const char *dir, const char *title, char **text, size_t *len, int *n);
