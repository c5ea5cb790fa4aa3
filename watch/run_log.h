/* A run directory's figures read back for `stoke plot`: metrics.csv (one
 * row per epoch) and steps.csv (one row per step), as `stoke train` writes
 * them (tools/run_record.h). Columns are found by their header names, so
 * files of older runs (fewer columns) load too; an empty cell is NaN.
 *
 *     stk_run_log *log;
 *     TRY(stk_run_log_read("run-cnn", &log));
 *     const stk_series *loss = stk_run_log_epoch(log, "val_loss");   // x: epoch
 *     const stk_series *lr = stk_run_log_step(log, "lr");            // x: step
 *     ...
 *     stk_run_log_free(log);
 */
#pragma once

#include "common/status.h"

#include <stddef.h>

typedef struct stk_series {
    const double *x, *y; /* n points; y NaN where the cell was empty */
    size_t n;
} stk_series;

typedef struct stk_run_log stk_run_log;

/* Read RUNDIR/metrics.csv (required) and RUNDIR/steps.csv (optional).
 * Errors: IO (no metrics.csv: "RUNDIR: no metrics.csv (not a stoke train
 * run directory?)"), CORRUPT (a row that is not numbers: file, line, cell),
 * NOMEM. */
stk_status stk_run_log_read(const char *dir, stk_run_log **out);
void stk_run_log_free(stk_run_log *log);
/* The same from the files' bytes (steps NULL: no steps.csv); `dir` names
 * them in messages. */
stk_status stk_run_log_parse(const char *dir, const char *metrics, size_t metrics_len,
                             const char *steps, size_t steps_len, stk_run_log **out);

/* A column of metrics.csv against "epoch", or of steps.csv against "step";
 * NULL when the file has no such column. Valid until stk_run_log_free. */
const stk_series *stk_run_log_epoch(const stk_run_log *log, const char *column);
const stk_series *stk_run_log_step(const stk_run_log *log, const char *column);
/* The global step at the end of each epoch (metrics.csv's "step") as the x
 * of another epoch column, to draw it on a step axis; NULL as above. */
const stk_series *stk_run_log_epoch_at_steps(const stk_run_log *log, const char *column);
