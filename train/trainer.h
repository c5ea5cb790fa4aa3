/* The training loop as a library: one object that runs a step (forward,
 * loss, backward, optimizer) on a device batch, an epoch over a loader, an
 * evaluation pass, and saves and resumes its position. `stoke train`,
 * `stoke eval`, bench_train and the tests drive it; so can any program.
 *
 *     stk_trainer_config c = stk_trainer_defaults();
 *     c.copy_engine = ce;                                // stk_device_spec_open
 *     c.schedule = (stk_schedule){STK_SCHEDULE_COSINE, 0.05f, steps_total};
 *     stk_input_norm_from_meta(meta, path, c.mean, c.std);
 *     stk_trainer *t;
 *     STK_TRY(stk_trainer_create(&c, model, opt, &t));  // borrows model and opt
 *     STK_TRY(stk_trainer_add_hook(t, STK_STEP_GRAD_READY, allreduce_grad, comm));
 *     for (int64_t e = 0; e < epochs; e++) {
 *         stk_epoch_stats es;
 *         STK_TRY(stk_trainer_train_epoch(t, loader, h2d, e, NULL, NULL, &es));
 *         STK_TRY(stk_trainer_save(t, "run/last.safetensors", 0, NULL, NULL));
 *     }
 *     stk_trainer_destroy(t);
 *
 * A step, in order, with its extension points (hooks run in the order they
 * were added; an error from one stops the step with it):
 *   STK_STEP_BEFORE_FORWARD    the batch is a tensor, nothing has run
 *   forward, cross-entropy (label smoothing), loss read back and checked finite
 *   STK_STEP_AFTER_FORWARD     logits and loss exist
 *   backward (under --amp on the GPU: of the scaled loss)
 *   STK_STEP_GRAD_READY        once per parameter, *during* backward, as soon
 *                              as its gradient is final (the last layer first):
 *                              where a gradient all-reduce starts
 *   STK_STEP_AFTER_BACKWARD    every gradient is final
 *   under --amp on the GPU the loss scaler unscales (and skips the rest of the update
 *   when a gradient is not finite); gradient clipping (info.grad_norm);
 *   optimizer step (learning rate from the schedule at position.step),
 *   parameters checked finite
 *   STK_STEP_AFTER_OPTIMIZER   the step is done; info.stepped tells
 * Under --amp on the GPU the gradients a hook sees are still multiplied by
 * info.loss_scale (all-reducing them is still right: the scale is linear).
 *
 * A step's tensors belong to a step scope (engine/autograd.h) that ends with
 * the step: hooks may read them, not keep them. One thread drives a trainer.
 */
#pragma once

#include "engine/nn.h"
#include "engine/optim.h"
#include "device/copy_engine.h"
#include "loader/h2d.h"
#include "loader/loader.h"
#include "train/batch_mix.h"
#include "train/pipeline.h"
#include "train/position.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_trainer stk_trainer;

typedef struct stk_trainer_config {
    const stk_copy_engine *copy_engine; /* the model's device, as its copy engine
                                         (stk_device_spec_open); NULL: the CPU */
    bool amp; /* autocast: on the GPU f16 matmuls/convolutions and dynamic loss scaling;
               * on the CPU bf16 ones (stk_cpu_bf16_isa), no loss scaling */
    float label_smoothing; /* in [0, 1) */
    /* Learning rate per step; base_lr 0 leaves the optimizer's own lr alone. */
    stk_schedule schedule;
    float mean[3], std[3];    /* input normalisation (stk_input_norm_from_meta) */
    int64_t seed;             /* the position's seed */
    stk_batch_mix_config mix; /* erasing, mixup, cutmix on each training batch (all 0: off) */
    /* Gradient clipping before each optimizer step (after the data-parallel
     * all-reduce; under amp, after unscaling), one of the two or neither (0):
     * torch.nn.utils.clip_grad_norm_(max_norm) or clip_grad_value_(value). */
    float clip_grad_norm, clip_grad_value;
    /* A moving average of the weights (train/ema.h) updated after each
     * optimizer step, evaluated beside them, saved in checkpoints: decay in
     * (0, 1), 0 off; with ema_warmup the decay grows from 0 to it. */
    float ema_decay;
    bool ema_warmup;
    /* Micro-batches and pipeline stages (train/pipeline.h): each step's
     * batch in micro_batches parts whose gradients accumulate before the
     * one optimizer step (0 or 1: the whole batch), through pipeline.stages
     * stages (0 or 1: on the calling thread). pipeline.micro_batches is
     * ignored; pipeline.threads 0: the current thread count. With either,
     * AFTER_FORWARD hooks run after the backward, GRAD_READY hooks once
     * every micro-batch's backward is done (the last layer first). */
    int micro_batches;
    stk_pipeline_config pipeline;
} stk_trainer_config;

/* No amp, no smoothing, no schedule, mean 0 and std 1, the CPU, no batch
 * transforms (mix_prob 1 and switch_prob 0.5 for when they are set). */
stk_trainer_config stk_trainer_defaults(void);

/* A trainer for `model` (already on the config's device) and `opt` (NULL:
 * evaluation only; step then fails). Both are borrowed: they must outlive
 * the trainer. Errors: UNSUPPORTED (amp on a CPU without bf16 instructions),
 * INVALID_ARG (a clipping bound that is negative or not finite, or both set;
 * an EMA decay outside [0, 1); micro-batches or stages out of range, or
 * with batch mixing; stages with amp), NOMEM. */
stk_status stk_trainer_create(const stk_trainer_config *c, stk_model *model, stk_optim *opt,
                              stk_trainer **out);
void stk_trainer_destroy(stk_trainer *t);
/* The micro-batch/pipeline runner (NULL: whole batches). */
const stk_pipeline *stk_trainer_pipeline(const stk_trainer *t);

typedef enum stk_step_event {
    STK_STEP_BEFORE_FORWARD,
    STK_STEP_AFTER_FORWARD,
    STK_STEP_GRAD_READY,
    STK_STEP_AFTER_BACKWARD,
    STK_STEP_AFTER_OPTIMIZER,
    STK_STEP_EVENTS
} stk_step_event;

/* What a hook sees (valid during the call). */
typedef struct stk_step_info {
    stk_step_event event;
    int64_t step; /* this step's number in the run (position.step before it) */
    stk_model *model;
    stk_tensor *input;         /* normalised f32 NCHW (after the batch transforms) */
    stk_tensor *labels;        /* i32 [N] on the device */
    stk_tensor *labels2;       /* mixup/cutmix: the labels mixed in (NULL: not mixed) */
    float lam;                 /* the weight of `labels` in the loss (1: not mixed) */
    int count;                 /* samples in the batch */
    stk_tensor *logits, *loss; /* from AFTER_FORWARD on */
    int param;                 /* GRAD_READY: stk_model_param(model, param) */
    stk_tensor *grad;          /* GRAD_READY: that parameter's gradient */
    float loss_value;          /* from AFTER_FORWARD on: the loss, read back (unscaled) */
    float lr;                  /* from AFTER_FORWARD on: this step's learning rate */
    float loss_scale;          /* 1, or the loss scaler's scale under amp */
    float grad_norm;           /* AFTER_OPTIMIZER: the gradients' global norm before clipping
                                  by norm (NaN: not clipped by norm, or a skipped amp step) */
    bool stepped;              /* AFTER_OPTIMIZER: the optimizer updated the parameters */
} stk_step_info;

typedef stk_status (*stk_step_hook)(void *ctx, const stk_step_info *info);

/* Run fn(ctx, info) at `event` of every step. At most 8 hooks per event.
 * Errors: INVALID_ARG (bad event, too many hooks). */
stk_status stk_trainer_add_hook(stk_trainer *t, stk_step_event event, stk_step_hook fn, void *ctx);

typedef struct stk_step_result {
    float loss;      /* mean over the batch (unscaled) */
    int count;       /* samples */
    int top1, top5;  /* correct predictions */
    bool stepped;    /* false when the loss scaler skipped the update */
    float grad_norm; /* as stk_step_info's */
} stk_step_result;

/* One training step on a device batch (u8 NHWC, stk_h2d_next); the model
 * stays in the mode it is in (train_epoch sets training mode). Advances
 * position.step. Errors: STK_ERR_DIVERGED (the loss or a parameter is not
 * finite: the message names it, the step and the epoch; the parameters may
 * hold the bad values), the engine's and the hooks' errors. */
stk_status stk_trainer_step(stk_trainer *t, const stk_device_batch *b, stk_step_result *r);

/* The same step on tensors the caller made: x f32 NCHW, y i32 [N], both on
 * the trainer's device, and the labels on the host for the accuracy (NULL:
 * top1/top5 are not counted). */
stk_status stk_trainer_step_tensors(stk_trainer *t, stk_tensor *x, stk_tensor *y,
                                    const int32_t *host_labels, stk_step_result *r);

typedef struct stk_epoch_stats {
    uint64_t steps, images;
    double loss;     /* mean training loss */
    double accuracy; /* top-1 in percent, on the augmented training batches */
    double images_per_sec;
    double stall_pct; /* share of the time the step waited for data */
    double seconds;
} stk_epoch_stats;

/* Called after each step of an epoch with the epoch's figures so far; an
 * error (STK_ERR_CANCELLED for Ctrl-C) ends the epoch with it. */
typedef stk_status (*stk_epoch_progress)(void *ctx, const stk_epoch_stats *so_far);

/* Train one epoch: drain h2d, start the loader's `epoch`, switch the model to
 * training mode, step over every batch. On success position.epoch becomes
 * epoch + 1 and position.loader the start of the next epoch. `progress` may
 * be NULL. Errors: as step, the loader's. */
stk_status stk_trainer_train_epoch(stk_trainer *t, stk_loader *l, stk_h2d *h, int64_t epoch,
                                   stk_epoch_progress progress, void *ctx, stk_epoch_stats *out);

/* The same epoch a batch at a time, for a driver that feeds several
 * trainers from one stream (stoke tune): start, a step per batch (waited_s:
 * how long the batch was waited for), finish (position.epoch becomes
 * epoch + 1). stk_trainer_train_epoch is these three over a loader. */
typedef struct stk_epoch_run {
    double t0, waited, loss_sum;
    uint64_t correct;
    stk_epoch_stats stats; /* so far */
} stk_epoch_run;
void stk_trainer_epoch_start(stk_trainer *t, stk_epoch_run *run);
stk_status stk_trainer_epoch_step(stk_trainer *t, stk_epoch_run *run, const stk_device_batch *b,
                                  double waited_s);
void stk_trainer_epoch_finish(stk_trainer *t, int64_t epoch, stk_epoch_run *run,
                              stk_epoch_stats *out);

typedef struct stk_eval_result {
    double loss, top1, top5; /* mean loss; accuracies in percent */
    uint64_t images;
    double seconds;
} stk_eval_result;

/* Loader options for evaluating with `transform`: in order, accurate
 * decoding, every image (no drop_last), batch memory for the trainer's
 * device. */
stk_loader_options stk_trainer_eval_options(const stk_trainer *t, const char *transform, int batch,
                                            int workers);

/* Evaluate over one pass of loader `l` (opened with stk_trainer_eval_options):
 * eval mode and no grad (the model's mode is restored), mean loss without
 * label smoothing, top-1, top-5. `progress_label` NULL: no progress bar, else
 * one on stderr. Errors: the loader's and the engine's. */
stk_status stk_trainer_evaluate(stk_trainer *t, stk_loader *l, const char *progress_label,
                                stk_eval_result *r);
/* The same, with the confusion matrix counted into confusion[true * C +
 * predicted] (C x C, the model's classes; zeroed first): per-class
 * figures come from it (train/class_metrics.h). */
stk_status stk_trainer_evaluate_per_class(stk_trainer *t, stk_loader *l, const char *progress_label,
                                          stk_eval_result *r, uint64_t *confusion);

/* The same evaluation a batch at a time (batches from a loader opened with
 * stk_trainer_eval_options): start (eval mode), a batch, finish (the
 * model's mode restored, the figures). stk_trainer_evaluate is these three. */
typedef struct stk_eval_run {
    double t0, loss_sum;
    uint64_t c1, c5, images;
    bool was_training;
    uint64_t *confusion; /* C x C, true x predicted (NULL: not counted) */
} stk_eval_run;
void stk_trainer_eval_start(stk_trainer *t, stk_eval_run *run);
stk_status stk_trainer_eval_batch(stk_trainer *t, stk_eval_run *run, const stk_device_batch *b);
void stk_trainer_eval_finish(stk_trainer *t, stk_eval_run *run, stk_eval_result *r);

/* The moving average of the weights (NULL without ema_decay), and the same
 * evaluation as stk_trainer_evaluate with the average in the model's place
 * (the model's own weights back afterwards, also on an error). */
struct stk_ema *stk_trainer_ema(stk_trainer *t);
stk_status stk_trainer_evaluate_ema(stk_trainer *t, stk_loader *l, const char *progress_label,
                                    stk_eval_result *r);

/* The position the trainer advances (read and write: set it before the first
 * epoch of a resumed run, or update best_metric). */
stk_train_position *stk_trainer_position(stk_trainer *t);

/* Change the schedule's base learning rate and the label smoothing mid-run
 * (population based training's explore step). Errors: INVALID_ARG (lr < 0,
 * smoothing outside [0, 1)). */
stk_status stk_trainer_set_base_lr(stk_trainer *t, float lr);
stk_status stk_trainer_set_label_smoothing(stk_trainer *t, float smoothing);

/* The optimizer the trainer was made with (NULL: evaluation only). */
stk_optim *stk_trainer_optim(stk_trainer *t);

/* The model the trainer was made with. */
stk_model *stk_trainer_model(stk_trainer *t);

/* The loss scaler's state (amp on the GPU): scale and skipped steps (1 and
 * 0 without loss scaling). */
float stk_trainer_loss_scale(const stk_trainer *t);
int64_t stk_trainer_skipped_steps(const stk_trainer *t);

/* Save model, optimizer, position, input normalisation and (with ema_decay)
 * the moving average atomically, with
 * n_extra (at most 22) more metadata pairs (the run's transforms, data path, ...). Errors: as
 * stk_checkpoint_save. */
stk_status stk_trainer_save(const stk_trainer *t, const char *path, int n_extra,
                            const char *const *keys, const char *const *values);

/* The input normalisation a checkpoint saved by stk_trainer_save was trained
 * with ("input_mean", "input_std"), into mean and std; a checkpoint from
 * before they were saved leaves them as they are. Evaluating with them
 * reproduces the training run's evaluation exactly. Errors: STK_ERR_CORRUPT
 * naming the file and the key. */
stk_status stk_trainer_normalisation_from(const stk_safetensors *f, float mean[3], float std[3]);

/* Continue from a checkpoint saved by stk_trainer_save: model, optimizer,
 * position and the moving average, all checked before anything changes.
 * Errors: as stk_train_position_read and stk_checkpoint_load (strict);
 * FORMAT: the trainer keeps an average and the checkpoint has none. */
stk_status stk_trainer_resume(stk_trainer *t, const char *path);

#ifdef __cplusplus
}
#endif
