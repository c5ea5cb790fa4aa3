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

/* Scans allowed in a progressive JPEG before it is refused. */
#define STK_JPEG_MAX_SCANS 256
