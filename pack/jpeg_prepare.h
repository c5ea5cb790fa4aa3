/* Preparing one JPEG file for a Stoke dataset (used by `stoke pack`).
 *
 * What is stored, by what the file is:
 *   baseline Huffman, gray/YCbCr/RGB   the original bytes, untouched
 *   progressive or arithmetic-coded    losslessly transcoded to baseline
 *                                      (DCT coefficients copied, no requantising)
 *   CMYK / YCCK                        converted to RGB, re-encoded at `quality`
 *   longer side > max_side (if set)    decoded (with DCT scaling), resized to
 *                                      fit, re-encoded at `quality`
 *   PNG, WebP, BMP, PPM/PGM             decoded (decode/image_decode.h), resized
 *                                      to max_side if set, encoded at `quality`
 *   GIF, TIFF, anything else           refused, the formats read named
 * With restart_mcus > 0 every stored file gets an aligned grid of restart
 * markers (jpeg_segments.h): baseline files without one are transcoded
 * losslessly (the same DCT coefficients, optimal Huffman tables, markers
 * other than the frame's dropped); the other paths write it as they encode.
 * Without `validate` baseline files stay byte for byte (the rewrite would
 * decode them, which is what skipping validation skips).
 * Then, when `validate` is set, the stored bytes are decoded completely once,
 * which catches truncated and corrupt files at pack time, and gives the
 * pixel statistics for the dataset's mean/std.
 *
 *     stk_jpeg_prepare_options o = {.max_pixels = 64000000, .quality = 90, .validate = true};
 *     stk_jpeg_preparer *p;
 *     stk_jpeg_preparer_create(&o, &p);
 *     stk_jpeg_prepared r;
 *     if (stk_jpeg_prepare(p, bytes, len, &r) == STK_OK)
 *         store(r.data, r.len, r.width, r.height, r.channels);
 *     stk_jpeg_prepared_free(&r, bytes);
 *
 * One preparer per thread.
 */
#pragma once

#include "common/status.h"
#include "decode/jpeg_decoder.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_jpeg_prepare_options {
    uint64_t max_pixels; /* refuse larger images (decompression bombs) */
    uint32_t max_side;   /* 0: keep the size */
    int quality;         /* 1..100, for re-encoded images */
    bool validate;       /* decode the stored bytes completely */
    int restart_mcus;    /* > 0: restart markers about every this many MCUs (an
                            aligned grid, jpeg_segments.h), so a crop decodes
                            only its segments; 0: none added */
} stk_jpeg_prepare_options;

typedef enum stk_jpeg_action {
    STK_JPEG_STORED = 0,     /* original bytes */
    STK_JPEG_TRANSCODED = 1, /* progressive/arithmetic -> baseline, lossless */
    STK_JPEG_CONVERTED = 2,  /* CMYK -> RGB, re-encoded */
    STK_JPEG_RESIZED = 3,    /* shrunk to max_side, re-encoded */
    STK_JPEG_SEGMENTED = 4,  /* baseline rewritten with restart markers, lossless */
    STK_JPEG_ENCODED = 5,    /* PNG, WebP, BMP or PPM/PGM, stored as JPEG at `quality` */
} stk_jpeg_action;

typedef struct stk_jpeg_prepared {
    uint8_t *data; /* the bytes to store: the input itself, or a new malloc'd buffer */
    size_t len;
    uint32_t width, height; /* of the stored image */
    int channels;           /* 1 (gray) or 3 */
    stk_jpeg_action action;
    bool has_stats;
    stk_pixel_stats stats;
} stk_jpeg_prepared;

typedef struct stk_jpeg_preparer stk_jpeg_preparer;

stk_status stk_jpeg_preparer_create(const stk_jpeg_prepare_options *opts, stk_jpeg_preparer **out);
void stk_jpeg_preparer_destroy(stk_jpeg_preparer *p);

/* Tests: let libjpeg count the Huffman statistics of a transcode itself
 * (optimize_coding) instead of jpeg_huffman.c; the bytes must not change. */
void stk_jpeg_preparer_set_counted_tables(stk_jpeg_preparer *p, bool on);

/* Prepare one file's bytes. Errors carry the reason only (the caller names the
 * file): STK_ERR_UNSUPPORTED ("a PNG image, not a JPEG", "empty file"),
 * STK_ERR_CORRUPT ("bad JPEG: Premature end of JPEG file"), STK_ERR_LIMIT. */
stk_status stk_jpeg_prepare(stk_jpeg_preparer *p, const uint8_t *in, size_t len,
                            stk_jpeg_prepared *out);

/* Free out->data if it is not `in`. */
void stk_jpeg_prepared_free(stk_jpeg_prepared *out, const uint8_t *in);

#ifdef __cplusplus
}
#endif
