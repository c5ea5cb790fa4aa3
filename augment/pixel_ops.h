/* Per-sample pixel transforms on u8 images: torchvision's colour and
 * geometry ops (transforms.functional on uint8 tensors), their random
 * classes (ColorJitter, RandomRotation, ...) and the policies RandAugment
 * and TrivialAugmentWide.
 *
 * A spec token names either a deterministic op, applied with exactly its
 * arguments (`brightness:1.3`, `hue:0.05`, `rotate:15`), or a random one that
 * draws its arguments per sample as torchvision's class does
 * (`colorjitter:0.4:0.4:0.4:0.1`, `randomrotation:15`, `randaugment:2:9`).
 * Drawing turns the random ops into deterministic ones; applying runs those
 * in place on an HWC image (1 or 3 channels) after the crop, resize and flip:
 *
 *     stk_pixel_op drawn[STK_PIXEL_MAX_DRAWN];
 *     int n = stk_pixel_ops_draw(t.ops, t.n_ops, &rng, w, h, drawn);
 *     STK_TRY(stk_pixel_ops_apply(drawn, n, tile, stride, w, h, c, &scratch));
 *     stk_pixel_scratch_deinit(&scratch);
 *
 * Semantics are torchvision 0.14's tensor ops on uint8, byte for byte except
 * hue (within 1: the PSNR of each against them in tests/test_pixel_ops.c,
 * fixtures from tests/fixtures/make_pixel_op_reference.py): blends truncate to u8 as
 * `.to(uint8)` does; geometry samples the nearest pixel (torchvision's default
 * for RandomRotation, RandomAffine and the policies) and fills with 0; blurs
 * reflect at the borders and round. On 1-channel images saturation, hue and
 * grayscale leave the image as it is (as torchvision does).
 */
#pragma once

#include "common/rng.h"
#include "common/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_pixel_op_kind {
    /* Deterministic, torchvision.transforms.functional (arguments as named):
     * the colour ops first (up to sharpness), then filters, then geometry. */
    STK_OP_BRIGHTNESS = 0, /* adjust_brightness(factor) */
    STK_OP_CONTRAST,       /* adjust_contrast(factor) */
    STK_OP_SATURATION,     /* adjust_saturation(factor) */
    STK_OP_HUE,            /* adjust_hue(factor in -0.5..0.5) */
    STK_OP_GRAYSCALE,      /* rgb_to_grayscale(num_output_channels=3) */
    STK_OP_INVERT,
    STK_OP_AUTOCONTRAST,
    STK_OP_EQUALIZE,
    STK_OP_POSTERIZE,  /* bits 0..8 */
    STK_OP_SOLARIZE,   /* threshold */
    STK_OP_SHARPNESS,  /* adjust_sharpness(factor) */
    STK_OP_BLUR,       /* gaussian_blur(kernel, sigma) */
    STK_OP_ROTATE,     /* rotate(angle degrees, counter-clockwise) */
    STK_OP_AFFINE,     /* affine(angle, tx, ty, scale, shear_x, shear_y[, centre at 0,0]) */
    STK_OP_SHEARX,     /* the policies' ShearX(magnitude): affine shear atan(m), centre 0,0 */
    STK_OP_SHEARY,     /* ShearY */
    STK_OP_TRANSLATEX, /* TranslateX(pixels) */
    STK_OP_TRANSLATEY, /* TranslateY(pixels) */
    STK_OP_DETERMINISTIC_END,
    /* Random, torchvision.transforms classes: drawn into the ops above. */
    STK_OP_COLORJITTER = STK_OP_DETERMINISTIC_END, /* brightness, contrast, saturation, hue */
    STK_OP_RANDOM_GRAYSCALE,                       /* p */
    STK_OP_RANDOM_ROTATION,                        /* degrees */
    STK_OP_RANDOM_AFFINE,       /* degrees, translate x/y fractions, scale min/max, shear */
    STK_OP_GAUSSIAN_BLUR,       /* kernel, sigma min, sigma max */
    STK_OP_RANDOM_AUTOCONTRAST, /* p */
    STK_OP_RANDOM_EQUALIZE,     /* p */
    STK_OP_RANDOM_INVERT,       /* p */
    STK_OP_RANDOM_POSTERIZE,    /* bits, p */
    STK_OP_RANDOM_SOLARIZE,     /* threshold, p */
    STK_OP_RANDOM_SHARPNESS,    /* factor, p (RandomAdjustSharpness) */
    STK_OP_RANDAUGMENT,         /* num_ops, magnitude, num_magnitude_bins */
    STK_OP_TRIVIALAUGMENT,      /* num_magnitude_bins (TrivialAugmentWide) */
    STK_OP_KIND_COUNT
} stk_pixel_op_kind;

/* One op and its arguments (as the spec gives them, defaults filled in). */
typedef struct stk_pixel_op {
    stk_pixel_op_kind kind;
    double arg[7];
} stk_pixel_op;

/* Most ops one drawing can give (RandAugment's N is at most 16). */
#define STK_PIXEL_MAX_DRAWN 64

/* Buffers the geometric ops and filters reuse; zero-initialise. */
typedef struct stk_pixel_scratch {
    uint8_t *copy;
    size_t copy_cap;
    float *plane;
    size_t plane_cap;
    int32_t *index;
    size_t index_cap;
} stk_pixel_scratch;

void stk_pixel_scratch_deinit(stk_pixel_scratch *s);

/* The spec token's name of kind (e.g. "colorjitter"). */
const char *stk_pixel_op_name(stk_pixel_op_kind kind);

/* Parse the token NAME with its nargs arguments (strings) into op.
 * Returns 0 when NAME is no pixel op, 1 when parsed, -1 on bad arguments
 * (with the reason in *why, a static string). */
int stk_pixel_op_parse(const char *name, char *const *args, int nargs, stk_pixel_op *op,
                       const char **why);

/* Append the op's spec token (e.g. "colorjitter:0.4:0.4:0.4:0.1") to buf. */
void stk_pixel_op_format(const stk_pixel_op *op, char *buf, size_t size);

/* Draw the ops for one sample of a w x h image: deterministic ops are copied,
 * random ones draw their arguments as torchvision's classes do (and may
 * vanish, e.g. an autocontrast not taken). Writes at most
 * STK_PIXEL_MAX_DRAWN ops to out; returns how many. */
int stk_pixel_ops_draw(const stk_pixel_op *ops, int n_ops, stk_rng *r, int w, int h,
                       stk_pixel_op *out);

/* Apply one deterministic op in place to h rows of w * c bytes, stride
 * bytes apart (c: 1 or 3). Errors: STK_ERR_NOMEM; STK_ERR_INVALID_ARG for a
 * random kind or a blur kernel larger than the image. */
stk_status stk_pixel_op_apply(const stk_pixel_op *op, uint8_t *img, size_t stride, int w, int h,
                              int c, stk_pixel_scratch *s);

/* Apply ops[0..n) in order: stk_pixel_op_apply of each, with runs of
 * pointwise colour ops (brightness, contrast, saturation, hue, grayscale,
 * invert, posterize, solarize) fused into one pass over the image. */
stk_status stk_pixel_ops_apply(const stk_pixel_op *ops, int n, uint8_t *img, size_t stride, int w,
                               int h, int c, stk_pixel_scratch *s);

/* The policies' op sets as torchvision's _augmentation_space lists them
 * (names "Identity", "ShearX", ...) and the magnitude of bin `bin` of op
 * `index` for an image of w x h (0 for ops without magnitudes). For tests
 * and --help. policy: STK_OP_RANDAUGMENT or STK_OP_TRIVIALAUGMENT. */
int stk_pixel_policy_op_count(void);
const char *stk_pixel_policy_op_name(int index);
double stk_pixel_policy_magnitude(stk_pixel_op_kind policy, int index, int bin, int bins, int w,
                                  int h);

#ifdef __cplusplus
}
#endif
