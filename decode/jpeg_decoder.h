/* A reusable JPEG decoder (libjpeg-turbo through the libjpeg API): header
 * probe, full validation with pixel statistics, and decode to pixels.
 * One decoder per thread; it keeps its libjpeg state and scratch buffers
 * between images, so decoding allocates nothing once warm.
 *
 *     stk_jpeg_decoder *dec;
 *     stk_jpeg_decoder_create(64000000, &dec);        // refuse > 64 MP
 *     stk_jpeg_info info;
 *     if (stk_jpeg_decoder_header(dec, bytes, len, &info) != STK_OK) ...;
 *     stk_pixel_stats stats = {0};
 *     if (stk_jpeg_decoder_validate(dec, bytes, len, &info, &stats) != STK_OK)
 *         printf("bad: %s\n", stk_last_error());    // "bad JPEG: Premature end of JPEG file"
 *     stk_jpeg_decoder_destroy(dec);
 *
 * Every error is a status with libjpeg's reason; corrupt-data warnings are
 * errors; images over the pixel limit are refused after reading the header,
 * before any pixel buffer exists.
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Colour layout of a JPEG as stored. */
typedef enum stk_jpeg_kind {
    STK_JPEG_GRAY = 1,
    STK_JPEG_YCBCR = 2, /* the usual colour JPEG */
    STK_JPEG_RGB = 3,   /* Adobe RGB-coded JPEG, 3 components */
    STK_JPEG_CMYK = 4,  /* 4 components, CMYK or YCCK: Stoke converts to RGB */
} stk_jpeg_kind;

typedef struct stk_jpeg_info {
    uint32_t width, height;
    int components;
    stk_jpeg_kind kind;
    bool progressive;
    bool arithmetic;
    bool adobe_inverted; /* CMYK stored inverted (Adobe APP14 marker) */
} stk_jpeg_info;

/* Per-channel sums over decoded pixels, as RGB (gray counts for all three).
 * Integer sums are exact, so they add up the same in any order. */
typedef struct stk_pixel_stats {
    uint64_t sum[3];
    uint64_t sumsq[3];
    uint64_t pixels;
} stk_pixel_stats;

typedef struct stk_jpeg_decoder stk_jpeg_decoder;

/* max_pixels: width x height above which images are refused (STK_ERR_LIMIT). */
stk_status stk_jpeg_decoder_create(uint64_t max_pixels, stk_jpeg_decoder **out);
void stk_jpeg_decoder_destroy(stk_jpeg_decoder *dec);

/* Region decodes with libjpeg's fast integer IDCT and merged (non-fancy)
 * chroma upsampling: about 7% faster on photos, at about 44 dB from the
 * accurate decode (README.md, "Transform specs": measured on photos). Off by default: the accurate
 * decode (JDCT_ISLOW, fancy upsampling) is what tjDecompress2 and PIL do. */
void stk_jpeg_decoder_set_fast(stk_jpeg_decoder *dec, bool fast);

/* Region decodes of a JPEG with an aligned restart-marker grid (written by
 * `stoke pack`, jpeg_segments.h) decode only the segments covering the
 * region, from a small JPEG assembled from them: the same pixels (fast
 * mode: exactly; accurate mode: with one MCU of margin, exactly too).
 * On by default; off decodes every file the whole-stream way. */
void stk_jpeg_decoder_set_segments(stk_jpeg_decoder *dec, bool on);

/* Who decodes those segments' Huffman-coded data: Stoke's entropy decoder
 * (true; jpeg_entropy_hook.h: the same coefficients, so the same pixels,
 * and a segment it refuses decoded by libjpeg-turbo, which reports it) or
 * libjpeg-turbo's own (false). The default is Stoke's where the CPU has
 * AVX-512 (its vector decoder: bench_augment line (g), bench/README.md),
 * libjpeg-turbo's elsewhere (the scalar one measured no faster). False
 * only when out of memory for it. */
bool stk_jpeg_decoder_set_entropy(stk_jpeg_decoder *dec, bool stoke);

/* MCUs Stoke's entropy decoder has decoded for this decoder (0 with
 * libjpeg-turbo's): tests check which one ran. */
int64_t stk_jpeg_decoder_entropy_mcus(const stk_jpeg_decoder *dec);

/* Refuse progressive files with more than `max_scans` scans (default
 * STK_JPEG_MAX_SCANS): a tiny file with thousands of scans costs minutes. */
void stk_jpeg_decoder_set_max_scans(stk_jpeg_decoder *dec, int max_scans);

/* Read the header only. Errors: STK_ERR_UNSUPPORTED (not a JPEG: PNG, GIF,
 * empty file, ...; or an unusual colour space), STK_ERR_CORRUPT, STK_ERR_LIMIT. */
stk_status stk_jpeg_decoder_header(stk_jpeg_decoder *dec, const uint8_t *data, size_t len,
                                   stk_jpeg_info *info);

/* Decode every scan and pixel, failing on any corruption; fill *info and
 * add the image's pixel statistics to *stats (may be NULL). CMYK images are
 * checked but contribute no statistics. */
stk_status stk_jpeg_decoder_validate(stk_jpeg_decoder *dec, const uint8_t *data, size_t len,
                                     stk_jpeg_info *info, stk_pixel_stats *stats);

/* Decode to interleaved u8 pixels at scale scale_num/8 (1..8): gray stays
 * 1 channel, colour (including CMYK/YCCK, converted) becomes RGB. *pixels
 * points into the decoder's scratch, valid until its next call. */
stk_status stk_jpeg_decoder_pixels(stk_jpeg_decoder *dec, const uint8_t *data, size_t len,
                                   int scale_num, const uint8_t **pixels, uint32_t *width,
                                   uint32_t *height, int *channels);

/* A decoded part of an image (see stk_jpeg_decoder_region). */
typedef struct stk_jpeg_region {
    const uint8_t *pixels; /* interleaved, in the decoder's scratch */
    size_t stride;         /* bytes between rows */
    int width, height, channels;
    int origin_x, origin_y; /* where pixels[0] lies in the scaled image */
    int scale;              /* the DCT scale used: scale / 8 (8, 4, 2 or 1) */
} stk_jpeg_region;

/* Region-of-interest decode for a crop. Picks the smallest DCT scale s/8
 * among 8/8, 4/8, 2/8, 1/8 (the ones with SIMD IDCTs; 5/8-7/8 measured
 * slower than a full decode) at which a win_w x win_h window of source
 * pixels still spans out_w x out_h pixels, then decodes only the pixels
 * covering the source bounds [bx0, bx1) x [by0, by1): columns outside are
 * cropped with jpeg_crop_scanline (to the iMCU boundary), rows above are
 * skipped with jpeg_skip_scanlines and rows below are never decoded (the
 * decode is aborted after the last needed row). Source coordinate X lies at
 * X * scale / 8 in the scaled image.
 * channels: 1 (gray output) or 3 (RGB: gray expanded by libjpeg, CMYK/YCCK
 * converted). expect_w/expect_h: the size the record says (0: any); a JPEG of
 * another size is an error. The pixels stay valid until the decoder's next call. */
stk_status stk_jpeg_decoder_region(stk_jpeg_decoder *dec, const uint8_t *data, size_t len, int bx0,
                                   int by0, int bx1, int by1, double win_w, double win_h, int out_w,
                                   int out_h, int channels, uint32_t expect_w, uint32_t expect_h,
                                   stk_jpeg_region *out);

/* Scans allowed in a progressive JPEG before it is refused. */
#define STK_JPEG_MAX_SCANS 256

#ifdef __cplusplus
}
#endif
