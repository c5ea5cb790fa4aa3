/* What a dataset's description decides about the transforms a model is
 * trained and evaluated with.
 *
 *     int size;
 *     STK_TRY(stk_train_check_transform(meta, "--transform", "pad:4,crop:28,flip", &size));
 *     char val[64];
 *     stk_train_default_eval_transform(meta, size, val, sizeof val);   // "center:28"
 */
#pragma once

#include "common/status.h"
#include "storage/meta.h"
#include "train/batch_mix.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The evaluation transform that matches a training image size: JPEG ->
 * resize:round(S*256/224),center:S (resize:256,center:224 for S = 224); raw
 * -> center:S. */
void stk_train_default_eval_transform(const stk_meta *m, int size, char *buf, size_t n);

/* Check that `spec` suits the dataset and give its output size. Errors:
 * STK_ERR_INVALID_ARG naming `what` (the flag or file the spec came from):
 * a transform without a fixed output size, a norm token where !norm_ok (an
 * evaluation normalises as its training did), a raw dataset asked to grow
 * its images, as a JPEG transform would. */
stk_status stk_train_check_transform(const stk_meta *m, const char *what, const char *spec,
                                     bool norm_ok, int *size);

/* The batch transforms a training transform asks for (its erase, mixup and
 * cutmix tokens), with --mix-prob's value and the rank. Errors:
 * STK_ERR_INVALID_ARG (a bad spec or probability). */
stk_status stk_train_batch_mix(const char *transform, double mix_prob, int rank,
                               stk_batch_mix_config *c);

/* The input normalisation of a training run (the device normalises the u8
 * batches): `norm` (--norm: dataset, imagenet, or MEAN,STD with one value
 * or one per channel, ':'-separated, e.g. 0.5,0.25 or
 * 0.485:0.456:0.406,0.229:0.224:0.225; NULL: not given), else the training
 * transform's norm token (norm, norm:imagenet, norm:MEAN/STD), else the
 * dataset's statistics (m, from `path`). Errors: STK_ERR_INVALID_ARG naming
 * --norm or the transform: a bad value, 3 values for 1 channel, --norm and
 * a norm token that disagree. */
stk_status stk_train_normalisation(const stk_meta *m, const char *path, const char *norm,
                                   const char *transform, float mean[3], float std[3]);

#ifdef __cplusplus
}
#endif
