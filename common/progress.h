/* A progress bar for long jobs (pack, verify, bench, train).
 *
 * On a terminal it redraws one line at most 10 times a second:
 *     pack  [=========>          ]  31200/60000  12450/s  ETA 0:02
 * Elsewhere (a log file, CI) it prints one plain line every ~5 s and a final
 * line, so logs stay readable:
 *     pack: 31200/60000 (52%) 12450/s ETA 0:02
 *
 *     stk_progress p;
 *     stk_progress_init(&p, "pack", total, stderr);
 *     for (...) stk_progress_update(&p, done);
 *     stk_progress_finish(&p);
 *
 * One thread at a time. The caller owns the struct; nothing is allocated.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_progress {
    FILE *out;
    char label[32];
    uint64_t total;
    uint64_t done;
    double start;          /* stk_clock_sec() at init */
    double last_draw;      /* time of the last line drawn */
    double plain_interval; /* seconds between plain lines (not a TTY) */
    bool tty;
    bool enabled;
    char extra[96]; /* caller text appended to the line (loss, ...) */
} stk_progress;

/* Start a bar for `total` units on `out` (NULL: disabled). TTY detection is
 * by isatty(fileno(out)); STOKE_PROGRESS=plain|tty|off overrides it. */
void stk_progress_init(stk_progress *p, const char *label, uint64_t total, FILE *out);

/* Record that `done` units are complete; redraws when it is time. */
void stk_progress_update(stk_progress *p, uint64_t done);

/* Set text shown after the rate (e.g. "loss 0.412"); copied. */
void stk_progress_set_extra(stk_progress *p, const char *text);

/* Blank the bar's line on a terminal, so that a message can be printed
 * there (the next update redraws it). */
void stk_progress_clear(stk_progress *p);

/* Draw the final state and end the line. */
void stk_progress_finish(stk_progress *p);

/* Format "H:MM:SS" or "M:SS" into buf (for ETA and summaries). */
void stk_format_duration(double seconds, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
