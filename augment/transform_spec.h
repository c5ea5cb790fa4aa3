/* Transform pipeline specs, shared by the loader and the CLI.
 *
 *     rrc:224,flip                     train: RandomResizedCrop(224) + RandomHorizontalFlip
 *     rrc:224:0.25:1,flip:0.5          ... with scale range (0.25, 1) and flip probability
 *     resize:256,center:224            eval: Resize(256) (shorter side) + CenterCrop(224)
 *     pad:4,crop:28,flip               small raw images: RandomCrop(28, padding=4) + flip
 *     rrc:224,flip,norm:imagenet       ... normalised with ImageNet's mean/std
 *     resize:256,center:224,norm       ... with the dataset's own mean/std (from its meta)
 *     norm:0.5:0.5:0.5/0.25:0.25:0.25  explicit per-channel MEAN/STD (one value per channel,
 *                                      or one value for every channel)
 *     none                             the stored image as decoded
 *     rrc:224,flip,colorjitter:0.4:0.4:0.4:0.1   ... + ColorJitter(0.4, 0.4, 0.4, 0.1)
 *     rrc:224,flip,trivialaugment      ... + TrivialAugmentWide()
 *     center:224,brightness:1.3,rotate:15   deterministic ops, exactly these arguments
 *     rrc:224,flip,erase:0.25,mixup:0.2,cutmix:1   + batch transforms (training only)
 *
 * Tokens are separated by commas; a token is NAME[:ARG[:ARG...]]. Whatever
 * the order of the tokens, they run in torchvision's usual order: geometry
 * (rrc | resize + center | pad + crop), then flip, then the pixel ops
 * (augment/pixel_ops.h: colour, filters, rotations, policies) in the order
 * written, then normalisation.
 * Normalisation applies to float outputs (f32/f16); u8 outputs carry pixels
 * and the device normalises them.
 *
 *     stk_transform t;
 *     if (stk_transform_parse("rrc:224,flip", &t) != STK_OK)
 *         puts(stk_last_error());   // e.g. "transform \"rrc:0\": size must be 1..16384"
 */
#pragma once

#include "augment/pixel_ops.h"
#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_norm_kind {
    STK_NORM_NONE = 0,
    STK_NORM_DATASET = 1,  /* mean/std from the dataset's meta */
    STK_NORM_IMAGENET = 2, /* 0.485 0.456 0.406 / 0.229 0.224 0.225 */
    STK_NORM_EXPLICIT = 3, /* mean[]/std[] below */
} stk_norm_kind;

#define STK_TRANSFORM_MAX_OPS 16

typedef struct stk_transform {
    bool none;       /* decode only */
    int rrc;         /* RandomResizedCrop output size (0: off) */
    double scale[2]; /* rrc area fraction range, default (0.08, 1) */
    double ratio[2]; /* rrc aspect range, default (3/4, 4/3) */
    int resize;      /* Resize: shorter side (0: off) */
    int center;      /* CenterCrop size (0: off) */
    int pad;         /* zero padding before the random crop */
    int crop;        /* RandomCrop size (0: off) */
    double flip;     /* horizontal flip probability (0: off) */
    stk_norm_kind norm;
    int norm_values; /* explicit: 1 or 3 values each */
    float mean[3], std[3];
    /* Batch transforms, applied by the trainer to the normalised device
     * batch (train/batch_mix.h), not by the loader: */
    double erase;  /* erase[:P]: RandomErasing probability (0: off) */
    double mixup;  /* mixup:ALPHA (0: off) */
    double cutmix; /* cutmix:ALPHA (0: off) */
    int n_ops;     /* pixel ops, in the order written */
    stk_pixel_op ops[STK_TRANSFORM_MAX_OPS];
} stk_transform;

/* Parse `spec`. Errors: STK_ERR_INVALID_ARG naming the bad token and why. */
stk_status stk_transform_parse(const char *spec, stk_transform *t);

/* The per-channel normalisation t asks for: ImageNet's (0.485 0.456 0.406 /
 * 0.229 0.224 0.225), its explicit values, or dataset_mean/dataset_std
 * (STK_NORM_DATASET); without a norm token, mean 0 and std 1. */
void stk_transform_norm_values(const stk_transform *t, const float dataset_mean[3],
                               const float dataset_std[3], float mean[3], float std[3]);

/* The output size when it does not depend on the image (rrc, center, crop):
 * true and *size set; false for none / resize alone. */
bool stk_transform_fixed_size(const stk_transform *t, int *size);

/* Whether t can make its output from every image whose sides are at least
 * min_width x min_height (a dataset's smallest): only a random crop can fail
 * (crop:N larger than the padded image). Errors: STK_ERR_INVALID_ARG saying
 * which token does not fit which size. */
stk_status stk_transform_check_fits(const stk_transform *t, uint32_t min_width,
                                    uint32_t min_height);

/* Whether t has batch transforms (erase, mixup, cutmix). */
bool stk_transform_has_batch_ops(const stk_transform *t);

/* Whether t has pixel ops that draw random arguments. */
bool stk_transform_is_random(const stk_transform *t);

/* Write the canonical spec text of t into buf (for messages and metadata). */
void stk_transform_format(const stk_transform *t, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
