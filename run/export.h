/* A checkpoint's model taken out of Stoke (export.c): what `stoke export`
 * and Python's stoke.export call. ONNX for inference (engine/onnx.h: input
 * "input" with a symbolic batch, output "logits", batch norm folded unless
 * asked not to, the normalisation and class names in metadata_props), or
 * the weights alone as PyTorch's state dict in safetensors; either with
 * the checkpoint's SHA-256. The checkpoint is loaded strictly first.
 *
 *     stk_export_request q = stk_export_defaults();
 *     q.checkpoint = "runs/cnn-1/best.safetensors";     // out: best.onnx beside it
 *     stk_export_report r;
 *     stk_status st = stk_export(&q, &r);               // r.out, r.tensors, r.bytes, r.sha256
 *     stk_export_report_free(&r);
 */
#pragma once

#include "common/status.h"
#include "engine/onnx.h"
#include "run/checkpoint_read.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_export_format { STK_EXPORT_ONNX, STK_EXPORT_SAFETENSORS } stk_export_format;

/* The formats' and inputs' names, in their enums' order (NULL-terminated). */
extern const char *const stk_export_formats[];
extern const char *const stk_export_inputs[];

typedef struct stk_export_request {
    const char *checkpoint; /* required */
    const char *out;        /* NULL: beside it, NAME.onnx or NAME.weights.safetensors */
    stk_export_format format;
    int opset;            /* ONNX: 0 (17, or an imported model's own), 17 or 13 */
    bool fold;            /* ONNX: batch norm folded into the convolution before it */
    stk_onnx_input input; /* ONNX: normalised f32 NCHW, or u8 NHWC pixels */
    bool ema;             /* the checkpoint's moving average of the weights */
} stk_export_request;

typedef struct stk_export_report {
    char *out;          /* the file written (owned) */
    char sha256[65];    /* of the checkpoint */
    int tensors;        /* the model's */
    int64_t bytes;      /* of the file written */
    stk_ckpt_desc ckpt; /* the checkpoint's description */
} stk_export_report;

/* ONNX, folded, f32 NCHW, opset 0. */
stk_export_request stk_export_defaults(void);
/* Errors name the flag or file: an opset other than 13 or 17 (or than an
 * imported model's: INVALID_ARG), --out the checkpoint itself, the
 * checkpoint's (stk_ckpt_describe, a strict load), the writer's. The
 * report is filled as far as it got: free it either way. */
stk_status stk_export(const stk_export_request *q, stk_export_report *out);
void stk_export_report_free(stk_export_report *r);

#ifdef __cplusplus
}
#endif
