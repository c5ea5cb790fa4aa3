/* A checkpoint evaluated on a dataset (evaluate.c): what `stoke eval` and
 * Python's stoke.evaluate call. The model as the checkpoint describes it
 * (checkpoint_read.h), the input normalisation training used, the
 * checkpoint's evaluation transform unless another is given; eval mode,
 * no augmentation, so on the run's --val with its --batch the figures
 * equal that epoch's.
 *
 *     stk_eval_request q = stk_eval_defaults();
 *     q.data = "val.stoke", q.checkpoint = "runs/cnn-1/best.safetensors";
 *     stk_eval_report r;
 *     STK_TRY(stk_evaluate(&q, &r));     // r.result.top1, r.transform, ...
 *     stk_eval_report_free(&r);
 */
#pragma once

#include "common/status.h"
#include "run/checkpoint_read.h"
#include "train/device.h"
#include "train/trainer.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_eval_request {
    const char *data, *checkpoint; /* required */
    const char *transform;         /* NULL: the checkpoint's evaluation transform */
    int batch, workers;            /* 1..65536; workers 0: one per core */
    stk_device_spec device;
    bool ema;          /* the checkpoint's moving average of the weights */
    bool confusion;    /* count the confusion matrix (per class) */
    const char *label; /* a progress bar on stderr while evaluating; NULL: none */
} stk_eval_request;

typedef struct stk_eval_report {
    stk_eval_result result; /* loss, top1, top5, images, seconds */
    char *transform;        /* the transform in use (owned) */
    stk_ckpt_desc ckpt;     /* the checkpoint's description: classes, their names */
    uint64_t *confusion;    /* classes x classes, rows true (owned; NULL: not asked) */
} stk_eval_report;

/* batch 128, one worker per core, the CPU. */
stk_eval_request stk_eval_defaults(void);
/* Errors name the flag or file: the checkpoint's (stk_ckpt_describe), a
 * dataset of other classes or channels than the model's, a transform of
 * another size than training's, weights whose outputs are not finite. */
stk_status stk_evaluate(const stk_eval_request *q, stk_eval_report *out);
void stk_eval_report_free(stk_eval_report *r);

#ifdef __cplusplus
}
#endif
