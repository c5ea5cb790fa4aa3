/* Where a training run stands: what a checkpoint must hold for the run to
 * continue bit-identically (--resume), and what the trainer advances.
 *
 *     stk_train_position p;
 *     TRY(stk_train_position_read("run/last.safetensors", &p));
 *     if (p.seed != seed) ...;                 // resumed runs keep their seed
 *
 * Stored as checkpoint metadata (docs/FORMAT.md): "epoch", "step", "seed",
 * "best_val_top1" and "loader_position" ("seed=S,epoch=E,cursor=C"), decimal
 * text; reading checks each like any input, naming the file and the key.
 */
#pragma once

#include "common/status.h"
#include "storage/safetensors.h"
#include "loader/loader.h"

#include <stdint.h>

typedef struct stk_train_position {
    int64_t epoch;              /* epochs completed (the next one to train, 0-based) */
    int64_t step;               /* steps taken, the scheduler's clock (steps the loss
                                   scaler skipped included) */
    int64_t seed;               /* the run's seed: shuffling, augmentation, initialisation */
    double best_metric;         /* best validation top-1 in percent; -1 before any */
    stk_loader_position loader; /* where the training loader continues */
} stk_train_position;

/* A new run's position: epoch 0, step 0, no best metric. */
stk_train_position stk_train_position_start(int64_t seed);

#define STK_TRAIN_POSITION_KEYS 5

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
