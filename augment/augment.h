/* The per-image work of the loader: decode (only what the crop needs),
 * crop, resize, flip, write into the caller's batch slot.
 *
 *     stk_augment_options o = {.spec = "rrc:224,flip", .format = STK_PIXELS_U8_HWC,
 *                              .channels = 3, .seed = 42, .max_pixels = 64000000};
 *     stk_augment *a;
 *     if (stk_augment_create(&o, &a) != STK_OK) ...;          // bad spec: message names the token
 *     stk_sample s = {.encoding = rec.encoding, .data = rec.payload, .len = rec.payload_len,
 *                     .width = rec.width, .height = rec.height, .channels = rec.channels};
 *     stk_augment_out out = {.data = slot, .stride = 224 * 3, .capacity = 224 * 224 * 3};
 *     if (stk_augment_apply(a, &s, epoch, index, &out) != STK_OK) ...;  // corrupt JPEG etc.
 *     stk_augment_destroy(a);
 *
 * Each call's random choices come from (seed, epoch, index) only: the same
 * sample gives the same bytes in any thread and in any order; another epoch
 * gives other crops. No threads, no I/O; one stk_augment per worker thread
 * (it holds the JPEG decoder and scratch buffers, which grow to the largest
 * image and are then reused: nothing is allocated per image once warm).
 *
 * Output layouts (out->stride is the bytes between rows; CHW planes follow
 * each other, height x stride bytes apart):
 *   STK_PIXELS_U8_HWC  u8, channels interleaved (default; the device normalises)
 *   STK_PIXELS_U8_CHW  u8, planar
 *   STK_PIXELS_F32_CHW float, planar, normalised when the spec has norm
 *   STK_PIXELS_F16_CHW IEEE half, planar, normalised when the spec has norm
 */
#pragma once

#include "augment/transform_spec.h"
#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_pixel_format {
    STK_PIXELS_U8_HWC = 0,
    STK_PIXELS_U8_CHW = 1,
    STK_PIXELS_F32_CHW = 2,
    STK_PIXELS_F16_CHW = 3,
} stk_pixel_format;

typedef struct stk_augment_options {
    const char *spec; /* transform spec (augment/transform_spec.h) */
    stk_pixel_format format;
    int channels; /* output channels: 1 or 3 (JPEG datasets: 3) */
    uint64_t seed;
    uint64_t max_pixels;   /* decompression-bomb limit (0: 64 MP) */
    float mean[3], std[3]; /* the dataset's, for a bare `norm` */
    bool fast_decode;      /* JPEG: fast IDCT + merged upsampling (~7% faster, ~44 dB from the
                              accurate decode); for training augmentation */
} stk_augment_options;

typedef struct stk_sample {
    int encoding; /* stk_encoding (storage/record.h): 1 JPEG, 2 raw u8 */
    const uint8_t *data;
    size_t len;
    uint32_t width, height; /* from the record header */
    int channels;           /* raw: channels of the payload */
} stk_sample;

typedef struct stk_augment_out {
    void *data;
    size_t stride;      /* bytes between rows */
    size_t capacity;    /* bytes available at data */
    int width, height;  /* set by apply */
    int dct_scale;      /* set by apply: JPEG DCT scale used (8 = full), 0 for raw */
    uint64_t decode_ns; /* set by apply: time spent decoding (the rest is augmenting) */
} stk_augment_out;

typedef struct stk_augment stk_augment;

/* Errors: STK_ERR_INVALID_ARG (bad spec, naming the token; bad channels or
 * format; norm without mean/std), STK_ERR_NOMEM. */
stk_status stk_augment_create(const stk_augment_options *opts, stk_augment **out);
void stk_augment_destroy(stk_augment *a);

/* The parsed transform. */
const stk_transform *stk_augment_transform(const stk_augment *a);

/* The output size for an image of width x height (it never depends on the
 * random choices). Errors: as stk_augment_apply's planning. */
stk_status stk_augment_output_size(const stk_augment *a, uint32_t width, uint32_t height,
                                   int *out_w, int *out_h);

/* Transform one sample into out. Errors: STK_ERR_CORRUPT / STK_ERR_UNSUPPORTED
 * / STK_ERR_LIMIT (the JPEG: libjpeg's reason), STK_ERR_INVALID_ARG (out
 * too small, image smaller than a crop, raw channels != output channels). */
stk_status stk_augment_apply(stk_augment *a, const stk_sample *s, uint64_t epoch, uint64_t index,
                             stk_augment_out *out);

#ifdef __cplusplus
}
#endif
