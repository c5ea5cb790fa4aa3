/* A model as an ONNX file (onnx/onnx.proto, written with common/pb_wire.h),
 * for inference: eval-mode batch norm (folded into the convolution before
 * it, as torch.onnx.export does in eval mode, unless fold_bn is off),
 * dropout gone, the batch dimension symbolic ("batch"), initializers named
 * by the state dict, nodes by scope as PyTorch names them
 * ("/layer1/layer1.0/conv1/Conv"). The output is "logits" [batch, classes].
 *
 *     stk_onnx_options o = stk_onnx_defaults();
 *     o.input = STK_ONNX_INPUT_U8_NHWC;           // pixels straight from a decoder
 *     memcpy(o.mean, mean, sizeof o.mean); ...
 *     STK_TRY(stk_onnx_export(model, "model.onnx", &o));
 */
#pragma once

#include "engine/nn.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_onnx_input {
    STK_ONNX_INPUT_F32_NCHW, /* "input" f32 [batch, C, S, S], normalised (torchvision's) */
    STK_ONNX_INPUT_U8_NHWC,  /* "input" u8 [batch, S, S, C]: Cast, Sub, Div, Transpose inside */
} stk_onnx_input;

typedef struct stk_onnx_options {
    int opset;    /* 17 (IR 8) or 13 (IR 7); 0: the default (17, or an imported model's own) */
    bool fold_bn; /* batch norm folded into the convolution before it */
    stk_onnx_input input;
    float mean[3], std[3]; /* the input normalisation (pixels scaled to [0, 1]) */
    int n_meta;            /* metadata_props */
    const char *const *meta_keys, *const *meta_values;
} stk_onnx_options;

/* the default opset, fold_bn, f32 input, mean 0 and std 1 */
stk_onnx_options stk_onnx_defaults(void);

/* Write m (any device: its tensors are read back) to path, atomically. A
 * model imported from ONNX is its file's graph in eval mode with the
 * trained weights (stk_onnx_graph_export). Errors: INVALID_ARG (an opset
 * other than 13 or 17; for an imported model, other than its file's), IO,
 * NOMEM. */
stk_status stk_onnx_export(const stk_model *m, const char *path, const stk_onnx_options *o);

#ifdef __cplusplus
}
#endif
