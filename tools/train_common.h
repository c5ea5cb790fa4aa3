/* What `stoke train` and `stoke eval` share: the dataset's normalisation,
 * default transforms, a loader batch viewed as tensors, and the evaluation
 * pass (loss, top-1, top-5). */
#pragma once

#include "engine/safetensors.h"

#include "engine/nn.h"
#include "loader/h2d.h"
#include "storage/dataset.h"

typedef struct eval_result {
    double loss, top1, top5; /* mean loss; accuracies in percent */
    uint64_t images;
    double seconds;
} eval_result;

/* Per-channel mean/std for the input op: the dataset's statistics, or 0.5 /
 * 0.5 with a warning when it has none (pack --no-validate). */
void train_input_stats(const stk_meta *m, const char *path, float mean[3], float std[3]);

/* The evaluation transform that matches a training image size: JPEG ->
 * resize:round(S*256/224),center:S (resize:256,center:224 for S = 224); raw
 * -> center:S. */
void train_default_eval_transform(const stk_meta *m, int size, char *buf, size_t n);

/* Check that `spec` suits the dataset and give its output size. Errors:
 * STK_ERR_INVALID_ARG naming the flag (a transform without a fixed output
 * size, a raw dataset asked to grow its images, as a JPEG transform would). */
/* Integer metadata `key` of checkpoint f within [min, max]. Errors name the
 * file, the key and the value found (a checkpoint is input like any file):
 * STK_ERR_FORMAT when absent (or `required` and absent), STK_ERR_CORRUPT
 * when not a decimal integer in range. */
stk_status train_meta_int(const stk_safetensors *f, const char *key, int64_t min, int64_t max,
                          int64_t *out);

stk_status train_check_transform(const stk_meta *m, const char *flag, const char *spec, int *size);

/* The batch's u8 NHWC pixels as a normalised f32 NCHW tensor and its labels
 * as an i32 tensor (both owned by the current step scope). */
stk_status train_batch_tensors(const stk_device_batch *b, const float *mean, const float *std,
                               stk_tensor **x, stk_tensor **labels);

/* Correct top-1 and top-5 predictions in a batch of logits (on any device;
 * GPU logits are copied to the host, which waits for the step's work). */
stk_status train_count_correct(stk_tensor *logits, const int32_t *labels, int n, int *top1,
                               int *top5);

/* --device: "cpu", "cuda" (GPU 0) or "cuda:N". Errors: INVALID_ARG. */
stk_status train_parse_device(const char *arg, stk_device *out);
/* Make `dev` ready (the CUDA context, before any loader opens, so that batch
 * memory is pinned by CUDA) and give its copy engine for the H2D stage.
 * Errors: STK_ERR_CUDA / UNSUPPORTED with the reason there is no GPU. */
stk_status train_device_open(stk_device dev, const stk_copy_engine **ce);

/* Evaluate m (switched to eval mode, no grad; its tensors on ce->device) on
 * `path` with `transform`; `progress_label` NULL for no bar. Restores m's mode. */
stk_status train_evaluate(stk_model *m, const stk_copy_engine *ce, const char *path,
                          const char *transform, int batch, int workers, const float *mean,
                          const float *std, const char *progress_label, eval_result *r);
