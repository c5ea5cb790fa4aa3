/* `stoke eval --per-class` and `--confusion FILE`: the per-class figures
 * printed (a table, or the --json object's "per_class" and "confusion"),
 * and the confusion matrix written as CSV, JSON or a PNG heatmap by the
 * file's extension (runlog/class_report.h, runlog/confusion_image.h). */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stdint.h>

/* Whether `path` ends in .csv, .json or .png. */
bool eval_confusion_path_ok(const char *path);

/* The table (class, images, top-1 = recall, precision, F1) on stdout, or
 * with json the members `, "per_class": [...], "confusion": [[...]]` of
 * the object being printed. */
void eval_print_per_class(const uint64_t *confusion, int classes, const char *const *names,
                          bool json);

/* The matrix into `path`, atomically. Errors: IO (naming the file), NOMEM,
 * INVALID_ARG (an extension other than .csv/.json/.png). */
stk_status eval_write_confusion(const char *path, const uint64_t *confusion, int classes,
                                const char *const *names);
