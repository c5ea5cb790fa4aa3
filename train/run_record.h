/* What a training run leaves in its run folder beside its checkpoints,
 * written by rank 0: the run log (metrics.csv, one row per epoch; steps.csv,
 * one row per step: runlog/run_log.h writes and reads both) and, unless
 * turned off, a TensorBoard event file (runlog/tfevents.h) with the same
 * figures, the first batch as an image and the run's flags. Its step hook
 * goes on the trainer; stk_run_record_epoch from stk_trainer_fit's on_epoch
 * callback (train/fit.h).
 *
 * A resumed run keeps the rows up to its checkpoint's epoch and starts a
 * new event file beside the old ones.
 */
#pragma once

#include "common/status.h"
#include "device/device_alloc.h"
#include "train/trainer.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_run_record stk_run_record;

/* The memory figures of an epoch: the training device's caching allocator
 * (peak since the epoch began) and the process's peak resident set. */
typedef struct stk_run_memory {
    stk_device device;
    stk_mem_stats heap;
    stk_mem_stats cpu_heap; /* also the CPU's, when device is CUDA */
    double peak_rss_mb;
} stk_run_memory;

/* Open the record in `dir`: a new one, or with resume_epoch > 0 (the
 * epochs the checkpoint completed) the old one's rows up to that epoch.
 * Errors: IO (naming the file), CORRUPT (a metrics.csv that cannot be
 * continued), NOMEM. */
stk_status stk_run_record_open(const char *dir, bool tensorboard, int64_t resume_epoch,
                               stk_run_record **out);
/* The run's configuration as Markdown, for TensorBoard's text tab. */
stk_status stk_run_record_config(stk_run_record *r, const char *markdown);
/* A step hook (STK_STEP_BEFORE_FORWARD and STK_STEP_AFTER_OPTIMIZER, ctx the
 * record): the first batch's picture, then every step's loss and lr. Set
 * the input normalisation first. */
void stk_run_record_set_normalisation(stk_run_record *r, const float mean[3], const float std[3]);
stk_status stk_run_record_step_hook(void *ctx, const stk_step_info *info);
/* One epoch's row; val NULL when there is no validation set, val_ema NULL
 * without a moving average of the weights. */
stk_status stk_run_record_epoch(stk_run_record *r, int64_t epoch, int64_t step, double lr,
                                const stk_epoch_stats *es, const stk_eval_result *val,
                                const stk_eval_result *val_ema, const stk_run_memory *mem);
/* An epoch's evaluation per class (stoke train --per-class): the figures as
 * a table in TensorBoard's text tab ("eval/per_class") and the confusion
 * matrix as a heatmap ("eval/confusion"), at step `epoch` + 1; nothing
 * without TensorBoard. names: the classes' (NULL: their indices). Errors:
 * IO, NOMEM. */
stk_status stk_run_record_classes(stk_run_record *r, int64_t epoch, const uint64_t *confusion,
                                  int classes, const char *const *names);
/* Where the event file is (NULL without TensorBoard). */
const char *stk_run_record_tensorboard_path(const stk_run_record *r);
void stk_run_record_close(stk_run_record *r);

/* The process's peak resident set so far, in MB. */
double stk_run_memory_peak_rss_mb(void);

/* The memory figures now (peaks since the last stk_device_reset_peak). */
void stk_run_memory_read(stk_device device, stk_run_memory *m);

#ifdef __cplusplus
}
#endif
