/* A checkpoint's classes for images (predict.c): what `stoke predict` and
 * Python's stoke.predict call. An input is an image file (JPEG, PNG, WebP,
 * BMP, PPM/PGM, told by its bytes), a folder (its image files,
 * recursively, in name order), a .stoke dataset (each record, shown as
 * FILE.stoke#INDEX) or one record of it (FILE.stoke#INDEX). Every image
 * goes through the checkpoint's evaluation transform and normalisation, in
 * batches decoded on worker threads; an image that cannot be read is
 * skipped with the reason, the others are still predicted.
 *
 *     stk_predict_request q = stk_predict_defaults();
 *     q.checkpoint = "runs/cnn-1/best.safetensors";
 *     q.inputs = (const char *[]){"photos/"}, q.n_inputs = 1;
 *     q.hooks = (stk_predict_hooks){.on_image = show, .ctx = &me};
 *     stk_predict_summary s;
 *     STK_TRY(stk_predict(&q, &s));      // s.done, s.skipped
 */
#pragma once

#include "common/status.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One image's likeliest classes, likeliest first (ties: the lower index). */
typedef struct stk_prediction {
    const char *path;          /* as shown: the file, or FILE.stoke#INDEX */
    int k;                     /* classes given (top_k, or fewer classes) */
    const int *index;          /* k class indices */
    const double *probability; /* k softmax probabilities */
    const char *const *name;   /* k names, as the training set named them (or the index) */
} stk_prediction;

/* What the caller hears, in input order (every field optional). */
typedef struct stk_predict_hooks {
    stk_status (*on_image)(void *ctx, const stk_prediction *p); /* an error stops it */
    void (*on_skip)(void *ctx, const char *path, const char *why);
    void (*progress)(void *ctx, uint64_t done, uint64_t total); /* 0 first, after each batch */
    void (*notice)(void *ctx, const char *line);                /* e.g. no normalisation recorded */
    void *ctx;
    const volatile sig_atomic_t *cancel; /* nonzero: stop after the current batch */
} stk_predict_hooks;

typedef struct stk_predict_request {
    const char *checkpoint;    /* required */
    const char *const *inputs; /* n_inputs of them, at least one */
    int n_inputs;
    const char *transform; /* NULL: the checkpoint's evaluation transform */
    int top_k;             /* 1..1000 */
    int batch;             /* images per forward pass, 1..4096 */
    int workers;           /* decoding threads, 0: one per core */
    stk_predict_hooks hooks;
} stk_predict_request;

typedef struct stk_predict_summary {
    uint64_t images;     /* listed */
    uint64_t done;       /* predicted */
    uint64_t skipped;    /* could not be read */
    uint64_t not_images; /* files in folders without an image name, not read */
    double seconds;
    bool cancelled;     /* the hooks' flag stopped it */
    bool bad_transform; /* the error is the transform's (none recorded, or the wrong size) */
} stk_predict_summary;

/* top 5, batch 64, a worker per core. */
stk_predict_request stk_predict_defaults(void);
/* Errors name the file or flag: the checkpoint's, a transform the model
 * cannot take, a hook's; not an image that cannot be read (skipped). */
stk_status stk_predict(const stk_predict_request *q, stk_predict_summary *s);

#ifdef __cplusplus
}
#endif
