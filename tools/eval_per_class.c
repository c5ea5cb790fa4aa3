/* stoke eval's per-class output (eval_per_class.h). */
#include "tools/eval_per_class.h"

#include "common/fs.h"
#include "common/json.h"
#include "common/text.h"
#include "runlog/class_report.h"
#include "runlog/confusion_image.h"
#include "runlog/png.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && !strcasecmp(s + n - k, suffix);
}

bool eval_confusion_path_ok(const char *path)
{
    return ends_with(path, ".csv") || ends_with(path, ".json") || ends_with(path, ".png");
}

/* A figure in percent for the table, "-" when undefined. */
static const char *pct(double x, char buf[16])
{
    if (isnan(x)) return "-";
    snprintf(buf, 16, "%.2f%%", 100 * x);
    return buf;
}

void eval_print_per_class(const uint64_t *cm, int classes, const char *const *names, bool json)
{
    stk_class_figures *fig = malloc((size_t)classes * sizeof *fig);
    if (!fig) {
        fprintf(stderr, "stoke: out of memory for the per-class figures\n");
        return;
    }
    stk_class_report(cm, classes, fig);
    char num[16], shown[256], j[4][STK_JSON_NUMBER], p[3][16];
    if (json) {
        printf(", \"per_class\": [");
        for (int k = 0; k < classes; k++) {
            printf("%s{\"class\": ", k ? ", " : "");
            stk_json_write_string(stdout, stk_class_name(names, k, num));
            /* top1 (= recall) kept for scripts written against the earlier output */
            printf(", \"images\": %" PRIu64 ", \"top1\": %s, \"precision\": %s, \"recall\": %s, "
                   "\"f1\": %s}",
                   fig[k].images, stk_json_number(100 * fig[k].recall, 4, j[0]),
                   stk_json_number(fig[k].precision, 6, j[1]),
                   stk_json_number(fig[k].recall, 6, j[2]), stk_json_number(fig[k].f1, 6, j[3]));
        }
        printf("], \"confusion\": [");
        for (int k = 0; k < classes; k++) {
            printf(k ? ", [" : "[");
            for (int c = 0; c < classes; c++)
                printf("%s%" PRIu64, c ? ", " : "", cm[(size_t)k * (size_t)classes + (size_t)c]);
            printf("]");
        }
        printf("]");
    } else {
        printf("  %-24s %8s %8s %10s %8s\n", "class", "images", "top-1", "precision", "F1");
        for (int k = 0; k < classes; k++)
            printf("  %-24s %8" PRIu64 " %8s %10s %8s\n",
                   stk_printable(stk_class_name(names, k, num), shown, sizeof shown), fig[k].images,
                   pct(fig[k].recall, p[0]), pct(fig[k].precision, p[1]), pct(fig[k].f1, p[2]));
    }
    free(fig);
}

stk_status eval_write_confusion(const char *path, const uint64_t *cm, int classes,
                                const char *const *names)
{
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (ends_with(path, ".png")) {
        uint8_t *rgb;
        int w, h;
        STK_TRY(stk_confusion_image(cm, classes, names, &rgb, &w, &h));
        stk_status st = stk_png_encode(rgb, w, h, 3, &bytes, &len);
        free(rgb);
        STK_TRY(st);
    } else if (ends_with(path, ".csv") || ends_with(path, ".json")) {
        char *text = ends_with(path, ".csv") ? stk_class_confusion_csv(cm, classes, names)
                                             : stk_class_report_json(cm, classes, names);
        if (!text) return stk_error(STK_ERR_NOMEM, "out of memory for %s", path);
        bytes = (uint8_t *)text, len = strlen(text);
    } else {
        return stk_error(STK_ERR_INVALID_ARG, "--confusion %s: .csv, .json or .png", path);
    }
    stk_file_part part = {bytes, len};
    stk_status st = stk_file_write_atomic(path, &part, 1);
    free(bytes);
    return st == STK_OK ? STK_OK : stk_error_prefix(st, "--confusion %s", path);
}
