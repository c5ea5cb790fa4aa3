/* Where a training run stands: what a checkpoint must hold for the run to
 * continue bit-identically (--resume), and what the trainer advances.
 *
 *     stk_train_position p;
 *     STK_TRY(stk_train_position_read("run/last.safetensors", &p));
 *     if (p.seed != seed) ...;                 // resumed runs keep their seed
 *
 * Stored as checkpoint metadata (docs/FORMAT.md): "epoch", "step", "seed",
 * "loader_position" ("seed=S,epoch=E,cursor=C"), and the best-epoch and
 * early-stopping state: "monitor", "best_value", "best_epoch" and
 * "early_stop_wait"; decimal text; reading checks each like any input,
 * naming the file and the key. (Checkpoints from before the monitor hold
 * "best_val_top1" instead: read as monitor val_top1.)
 */
#pragma once

#include "common/status.h"
#include "storage/safetensors.h"
#include "loader/loader.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_train_position {
    int64_t epoch;              /* epochs completed (the next one to train, 0-based) */
    int64_t step;               /* steps taken, the scheduler's clock (steps the loss
                                   scaler skipped included) */
    int64_t seed;               /* the run's seed: shuffling, augmentation, initialisation */
    stk_loader_position loader; /* where the training loader continues */
    /* the best epoch so far by the run's monitored value (train/fit.h) */
    char monitor[16];   /* what best_value measures ("val_loss"); "" before any */
    double best_value;  /* NaN before any */
    int64_t best_epoch; /* counted from 1; 0 before any */
    int64_t wait;       /* epochs since the best one (early stopping's patience counter) */
} stk_train_position;

/* A new run's position: epoch 0, step 0, no best epoch. */
stk_train_position stk_train_position_start(int64_t seed);

#define STK_TRAIN_POSITION_KEYS 8

/* The position as metadata pairs: keys[i] (static strings) and values[i]
 * (pointing into `text`, which the caller keeps while they are used). */
typedef struct stk_train_position_text {
    char value[STK_TRAIN_POSITION_KEYS][96];
} stk_train_position_text;
void stk_train_position_to_meta(const stk_train_position *p, const char **keys, const char **values,
                                stk_train_position_text *text);

/* The position in checkpoint f's metadata. Errors: STK_ERR_FORMAT (a key is
 * missing: not a training checkpoint), STK_ERR_CORRUPT (a value out of range
 * or not a number), each naming the file and the key. */
stk_status stk_train_position_from_meta(const stk_safetensors *f, stk_train_position *out);

/* Read the file's metadata only (no tensors are loaded). Errors: as
 * stk_safetensors_read and stk_train_position_from_meta. */
stk_status stk_train_position_read(const char *path, stk_train_position *out);

/* A run saved by `saved_world` ranks x `saved_batch` per rank continues on
 * world x batch with `per_epoch` steps per epoch: checkpoints are written at
 * the end of an epoch, so the next epoch starts from its beginning (its
 * permutation depends on the seed and the epoch alone, and each rank takes
 * every world-th sample of it: a global batch of the same size holds the
 * same samples), and the scheduler's clock becomes the completed epochs
 * times per_epoch. On the same world and batch the step must already be
 * that (else STK_ERR_CORRUPT naming `path`: the checkpoint's "step" cannot
 * come from its epochs, or it is of another dataset). *rescaled says
 * whether the step changed. */
stk_status stk_train_position_rescale(stk_train_position *p, const char *path, int64_t saved_world,
                                      int64_t saved_batch, int64_t world, int64_t batch,
                                      int64_t per_epoch, bool *rescaled);

#ifdef __cplusplus
}
#endif
