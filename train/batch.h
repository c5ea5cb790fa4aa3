/* A loader batch as the model sees it: the dataset's normalisation, the
 * batch as tensors, and counting correct predictions.
 *
 *     float mean[3], std[3];
 *     stk_input_norm_from_meta(meta, path, mean, std);
 *     stk_tensor *x, *y;
 *     STK_TRY(stk_batch_tensors(b, mean, std, &x, &y));   // inside a step scope
 *     ... logits ...
 *     int top1, top5;
 *     STK_TRY(stk_batch_count_correct(logits, b->host_labels, b->count, &top1, &top5));
 */
#pragma once

#include "engine/tensor.h"
#include "loader/h2d.h"
#include "storage/meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-channel mean/std for the input op: the dataset's statistics, or 0.5 /
 * 0.5 with a warning naming `path` when it has none (pack --no-validate). */
void stk_input_norm_from_meta(const stk_meta *m, const char *path, float mean[3], float std[3]);

/* The batch's u8 NHWC pixels as a normalised f32 NCHW tensor and its labels
 * as an i32 tensor (both owned by the current step scope). */
stk_status stk_batch_tensors(const stk_device_batch *b, const float *mean, const float *std,
                             stk_tensor **x, stk_tensor **labels);

/* Correct top-1 and top-5 predictions in a batch of logits (on any device;
 * GPU logits are copied to the host, which waits for the step's work). A
 * tie with the true class counts for the class with the lower index. A
 * logit that is NaN or infinite is STK_ERR_DIVERGED (never counted right). */
stk_status stk_batch_count_correct(stk_tensor *logits, const int32_t *labels, int n, int *top1,
                                   int *top5);

/* The same, also counting each image into confusion[label * C + pred] (C
 * the logits' classes; pred the top-1 prediction, the lower index on a tie,
 * so the diagonal holds exactly the top-1 hits). */
stk_status stk_batch_count_confusion(stk_tensor *logits, const int32_t *labels, int n, int *top1,
                                     int *top5, uint64_t *confusion);

#ifdef __cplusplus
}
#endif
