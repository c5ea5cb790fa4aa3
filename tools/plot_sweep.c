/* stoke plot of a `stoke tune` sweep: every trial's metric against epochs,
 * and the best so far against trials (tools/plot.h). */
#include "tools/plot.h"

#include "common/fs.h"
#include "common/text.h"
#include "runlog/run_log.h"
#include "runlog/svg_chart.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { WIDTH = 1260, HEIGHT = 560, MAX_TRIALS = 256 };

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

bool plot_is_sweep(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/trials.csv", dir);
    return access(path, F_OK) == 0;
}

/* trials.csv's metric column ("best_val_top1" -> "val_top1") and whether
 * larger is better (sweep.txt's --mode, else the metric's kind). */
static stk_status sweep_metric(const char *dir, char *metric, size_t n, bool *maximise)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/trials.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return stk_error(STK_ERR_IO, "%s: cannot open", path);
    char head[4096] = "";
    bool ok = fgets(head, sizeof head, f) != NULL;
    fclose(f);
    char *b = ok ? strstr(head, ",best_") : NULL;
    if (!b || !strstr(head, ",best_epoch,"))
        return stk_error(STK_ERR_FORMAT, "%s: not a stoke tune trials.csv", path);
    b += 6;
    snprintf(metric, n, "%.*s", (int)strcspn(b, ","), b);
    *maximise = !strstr(metric, "loss");
    snprintf(path, sizeof path, "%s/sweep.txt", dir);
    if ((f = fopen(path, "r"))) {
        char line[256];
        bool mode = false;
        while (fgets(line, sizeof line, f)) {
            if (mode && !strncmp(line, "min", 3)) *maximise = false;
            if (mode && !strncmp(line, "max", 3)) *maximise = true;
            mode = !strncmp(line, "--mode", 6) && (line[6] == '\n' || line[6] == '\0');
        }
        fclose(f);
    }
    return STK_OK;
}

stk_status plot_sweep(const char *dir, const char *title, char **text, size_t *len, int *n_out)
{
    char metric[64];
    bool maximise = true;
    STK_TRY(sweep_metric(dir, metric, sizeof metric, &maximise));
    /* metrics.csv calls train_top1 train_acc */
    const char *column = !strcmp(metric, "train_top1") ? "train_acc" : metric;
    stk_run_log *logs[MAX_TRIALS] = {0};
    stk_chart_line lines[MAX_TRIALS];
    double tx[MAX_TRIALS], best[MAX_TRIALS], so_far[MAX_TRIALS];
    int n = 0, drawn = 0;
    stk_status st = STK_OK;
    for (; n < MAX_TRIALS; n++) {
        char run[4200];
        snprintf(run, sizeof run, "%s/trials/%04d", dir, n);
        if (access(run, F_OK) != 0) break;
        tx[n] = n;
        best[n] = NAN;
        if (stk_run_log_read(run, &logs[n]) != STK_OK) continue; /* ended before an epoch */
        const stk_series *s = stk_run_log_epoch(logs[n], column);
        if (!s) continue;
        lines[drawn++] = (stk_chart_line){s, palette[n % 10], false};
        for (size_t i = 0; i < s->n; i++)
            if (isfinite(s->y[i]) &&
                (isnan(best[n]) || (maximise ? s->y[i] > best[n] : s->y[i] < best[n])))
                best[n] = s->y[i];
    }
    for (int i = 0; i < n; i++) {
        double prev = i ? so_far[i - 1] : NAN;
        so_far[i] = isnan(best[i])                                                ? prev
                    : isnan(prev) || (maximise ? best[i] > prev : best[i] < prev) ? best[i]
                                                                                  : prev;
    }
    stk_series s_best = {tx, best, (size_t)n}, s_so_far = {tx, so_far, (size_t)n};
    stk_chart_line summary[2] = {{&s_so_far, "#1f77b4", false}, {&s_best, "#7f7f7f", true}};
    stk_svg *s;
    if ((st = stk_svg_begin(WIDTH, HEIGHT, &s)) == STK_OK) {
        stk_svg_text(s, WIDTH / 2.0, 28, 18, "middle", title);
        char head[160];
        snprintf(head, sizeof head, "%s of each trial (one colour per trial id mod 10)", metric);
        stk_svg_panel(s, (stk_rect){80, 90, 700, 380}, head, "epoch", lines, drawn);
        snprintf(head, sizeof head, "best %s so far (solid), each trial's best (dashed)", metric);
        stk_svg_panel(s, (stk_rect){870, 90, 340, 380}, head, "trial", summary, 2);
        st = stk_svg_end(s, text, len);
    }
    for (int i = 0; i < n; i++) stk_run_log_free(logs[i]);
    *n_out = n;
    if (st == STK_OK && n == 0) {
        free(*text);
        *text = NULL;
        return stk_error(STK_ERR_FORMAT, "%s: a sweep without trials/", dir);
    }
    return st;
}
