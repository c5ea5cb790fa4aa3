/* Per-class figures and the confusion matrix as text (class_report.h). */
#include "runlog/class_report.h"

#include "common/json.h"
#include "common/text.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double ratio(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : NAN; }

void stk_class_report(const uint64_t *cm, int classes, stk_class_figures *out)
{
    for (int k = 0; k < classes; k++) {
        stk_class_figures f = {.correct = cm[(size_t)k * (size_t)classes + (size_t)k]};
        for (int j = 0; j < classes; j++) {
            f.images += cm[(size_t)k * (size_t)classes + (size_t)j];
            f.predicted += cm[(size_t)j * (size_t)classes + (size_t)k];
        }
        f.recall = ratio(f.correct, f.images);
        f.precision = ratio(f.correct, f.predicted);
        f.f1 = f.precision + f.recall > 0 ? 2 * f.precision * f.recall / (f.precision + f.recall)
               : isnan(f.precision) || isnan(f.recall) ? NAN
                                                       : 0.0;
        out[k] = f;
    }
}

const char *stk_class_name(const char *const *names, int k, char buf[16])
{
    if (names && names[k]) return names[k];
    snprintf(buf, 16, "%d", k);
    return buf;
}

/* The text an open_memstream FILE collected (*text is set by fclose), or
 * NULL when a write failed. */
static char *finish(FILE *f, char **text)
{
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad) {
        free(*text);
        return NULL;
    }
    return *text;
}

char *stk_class_confusion_csv(const uint64_t *cm, int classes, const char *const *names)
{
    char *text = NULL, num[16];
    size_t len;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    fputs("true\\predicted", f);
    for (int k = 0; k < classes; k++)
        fputc(',', f), stk_csv_write_field(f, stk_class_name(names, k, num));
    fputc('\n', f);
    for (int k = 0; k < classes; k++) {
        stk_csv_write_field(f, stk_class_name(names, k, num));
        for (int j = 0; j < classes; j++)
            fprintf(f, ",%" PRIu64, cm[(size_t)k * (size_t)classes + (size_t)j]);
        fputc('\n', f);
    }
    return finish(f, &text);
}

/* The figures and a text stream for a report (NULL: out of memory). */
static FILE *report_begin(const uint64_t *cm, int classes, stk_class_figures **fig, char **text,
                          size_t *len)
{
    *text = NULL;
    if (!(*fig = malloc((size_t)(classes > 0 ? classes : 1) * sizeof **fig))) return NULL;
    FILE *f = open_memstream(text, len);
    if (!f) {
        free(*fig);
        return NULL;
    }
    stk_class_report(cm, classes, *fig);
    return f;
}

char *stk_class_report_json(const uint64_t *cm, int classes, const char *const *names)
{
    stk_class_figures *fig;
    char *text, num[16], j[3][STK_JSON_NUMBER];
    size_t len;
    FILE *f = report_begin(cm, classes, &fig, &text, &len);
    if (!f) return NULL;
    fputs("{\"classes\": [", f);
    for (int k = 0; k < classes; k++) {
        if (k) fputs(", ", f);
        stk_json_write_string(f, stk_class_name(names, k, num));
    }
    fputs("], \"matrix\": [", f);
    for (int k = 0; k < classes; k++) {
        fputs(k ? ", [" : "[", f);
        for (int c = 0; c < classes; c++)
            fprintf(f, "%s%" PRIu64, c ? ", " : "", cm[(size_t)k * (size_t)classes + (size_t)c]);
        fputc(']', f);
    }
    fputs("], \"per_class\": [", f);
    for (int k = 0; k < classes; k++) {
        fputs(k ? ", {\"class\": " : "{\"class\": ", f);
        stk_json_write_string(f, stk_class_name(names, k, num));
        fprintf(f,
                ", \"images\": %" PRIu64 ", \"predicted\": %" PRIu64 ", \"correct\": %" PRIu64
                ", \"precision\": %s, \"recall\": %s, \"f1\": %s}",
                fig[k].images, fig[k].predicted, fig[k].correct,
                stk_json_number(fig[k].precision, 6, j[0]), stk_json_number(fig[k].recall, 6, j[1]),
                stk_json_number(fig[k].f1, 6, j[2]));
    }
    fputs("]}", f);
    free(fig);
    return finish(f, &text);
}

/* A figure in percent, or "-" when undefined. */
static const char *percent(double x, char buf[16])
{
    if (isnan(x)) return "-";
    snprintf(buf, 16, "%.2f%%", 100 * x);
    return buf;
}

char *stk_class_report_markdown(const uint64_t *cm, int classes, const char *const *names)
{
    stk_class_figures *fig;
    char *text, num[16], p[3][16];
    size_t len;
    FILE *f = report_begin(cm, classes, &fig, &text, &len);
    if (!f) return NULL;
    fputs("| class | images | recall (top-1) | precision | F1 |\n| --- | ---: | ---: | ---: | ---: "
          "|\n",
          f);
    for (int k = 0; k < classes; k++) {
        fputs("| ", f);
        for (const char *s = stk_class_name(names, k, num); *s; s++) /* a cell: no pipes */
            fputc(*s == '|' || *s == '\n' ? ' ' : *s, f);
        fprintf(f, " | %" PRIu64 " | %s | %s | %s |\n", fig[k].images, percent(fig[k].recall, p[0]),
                percent(fig[k].precision, p[1]), percent(fig[k].f1, p[2]));
    }
    free(fig);
    return finish(f, &text);
}
