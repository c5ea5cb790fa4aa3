/* What a Stoke checkpoint says about its model, read and checked like any
 * input (what takes a checkpoint: eval, export, predict): the model's
 * configuration, the input normalisation and evaluation transform training
 * used, the class names; then the model itself.
 *
 *     stk_ckpt_desc d;
 *     STK_TRY(stk_ckpt_describe("run/best.safetensors", &d));
 *     stk_model *m;
 *     stk_status st = stk_ckpt_load_model(&d, &m);
 *     ...
 *     stk_ckpt_desc_free(&d);
 */
#pragma once

#include "engine/nn.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_ckpt_desc {
    char *path;
    char *model;           /* the config's name points here */
    stk_model_config cfg;  /* name, in_channels, classes, image_size */
    float mean[3], std[3]; /* mean NAN: not recorded (a checkpoint from before) */
    char *val_transform;   /* NULL: not recorded */
    char *graph;           /* a model built from modules: its description (NULL: a zoo model) */
    void *onnx;            /* a model imported from ONNX: its file (onnx_len bytes), or NULL */
    size_t onnx_len;
    char **class_names; /* cfg.classes of them, or NULL: not recorded */
    int n_class_names;
    bool use_ema; /* stk_ckpt_load_model loads the moving average (--ema) */
} stk_ckpt_desc;

/* Errors (naming the file): IO, FORMAT (not a Stoke checkpoint, a model
 * this Stoke does not know, metadata that does not match the tensors),
 * CORRUPT (metadata out of range or not printable, class names that are
 * not a JSON array of cfg.classes strings), NOMEM. */
stk_status stk_ckpt_describe(const char *path, stk_ckpt_desc *out);
void stk_ckpt_desc_free(stk_ckpt_desc *d);

/* The model built from d and loaded strictly from its file (on the CPU);
 * with d->use_ema its weights are the file's moving average ("ema."
 * tensors). Errors: those of stk_checkpoint_load (a missing, unexpected or
 * mismatched tensor named); FORMAT naming the file when use_ema and it
 * holds no average (trained without --ema). */
stk_status stk_ckpt_load_model(const stk_ckpt_desc *d, stk_model **out);

#ifdef __cplusplus
}
#endif
