/* A run directory's figures: metrics.csv (one row per epoch) and steps.csv
 * (one row per step), written as a run goes (stk_run_log_writer, below:
 * train/run_record.h drives it) and read back for `stoke plot`. Columns are found by their header
 * names, so files of older runs (fewer columns) load too; an empty cell is NaN.
 *
 *     stk_run_log *log;
 *     STK_TRY(stk_run_log_read("run-cnn", &log));
 *     const stk_series *loss = stk_run_log_epoch(log, "val_loss");   // x: epoch
 *     const stk_series *lr = stk_run_log_step(log, "lr");            // x: step
 *     ...
 *     stk_run_log_free(log);
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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

/* ---- writing (run_log_write.c) ----------------------------------------------
 * metrics.csv is rewritten whole (atomically) after each epoch; steps.csv
 * is appended to and flushed each epoch. A resumed run keeps the rows up to
 * its checkpoint's epoch (rows logged after it, by a run that then stopped,
 * are dropped: those steps are taken again); older metrics.csv rows gain
 * empty cells for columns added since. Both are parsed with explicit
 * lengths in one pass. */
typedef struct stk_run_log_writer stk_run_log_writer;

/* One epoch's row (epoch counted from 1; has_val false: empty val cells). */
typedef struct stk_run_log_row {
    int64_t epoch, step;
    double lr, train_loss, train_acc;
    bool has_val;
    double val_loss, val_top1, val_top5;
    double images_per_sec, stall_pct, seconds;
    double mem_allocated_mb, mem_reserved_mb, mem_peak_mb, peak_rss_mb;
    bool has_ema; /* the moving average's evaluation (false: empty cells) */
    double ema_val_loss, ema_val_top1, ema_val_top5;
} stk_run_log_row;

/* A new log in `dir`, or with resume_epoch > 0 the old one's rows up to it.
 * Errors: IO (naming the file), CORRUPT (a metrics.csv row that is not
 * epoch,step,...), NOMEM. */
stk_status stk_run_log_writer_open(const char *dir, int64_t resume_epoch, stk_run_log_writer **out);
/* One step's row; grad_norm NaN: an empty cell (not clipped by norm). */
stk_status stk_run_log_write_step(stk_run_log_writer *w, int64_t step, int64_t epoch, double loss,
                                  double lr, double grad_norm);
stk_status stk_run_log_write_epoch(stk_run_log_writer *w, const stk_run_log_row *row);
void stk_run_log_writer_close(stk_run_log_writer *w);

#ifdef __cplusplus
}
#endif
