/* `stoke pack --store raw`: any image file pack reads, stored losslessly as
 * its decoded u8 RGB pixels (what the loader would decode it to), for data
 * where JPEG's loss matters (medical, synthetic, small images) or where
 * decoding is the bottleneck and disk is not.
 *
 *     stk_raw_preparer *p;
 *     STK_TRY(stk_raw_preparer_create(64000000, &p));        // one per thread
 *     stk_raw_prepared r;
 *     if (stk_raw_prepare(p, bytes, len, &r) == STK_OK) {
 *         store(r.pixels, (size_t)r.width * r.height * 3, r.width, r.height);
 *         free(r.pixels);
 *     }
 *     stk_raw_preparer_destroy(p);
 *
 * JPEG through libjpeg-turbo (CMYK/YCCK converted, grey expanded to RGB, as
 * the loader does for a JPEG record); PNG, WebP, BMP and PPM/PGM through
 * image_decode.h (PIL's convert("RGB")). GIF, TIFF and anything else are
 * refused, naming the formats read. The pixel statistics (mean/std of the
 * dataset) are summed exactly over every pixel.
 */
#pragma once

#include "common/status.h"
#include "decode/jpeg_decoder.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_raw_prepared {
    uint8_t *pixels; /* height rows of width x 3 bytes, malloc'd: free() it */
    uint32_t width, height;
    stk_pixel_stats stats;
} stk_raw_prepared;

typedef struct stk_raw_preparer stk_raw_preparer;

/* max_pixels: width x height above which images are refused. Errors: NOMEM. */
stk_status stk_raw_preparer_create(uint64_t max_pixels, stk_raw_preparer **out);
/* NULL is a no-op. */
void stk_raw_preparer_destroy(stk_raw_preparer *p);

/* Decode one file's bytes. Errors: STK_ERR_UNSUPPORTED ("a GIF image: ...",
 * "empty file"), STK_ERR_CORRUPT (the decoder's reason), STK_ERR_LIMIT,
 * STK_ERR_NOMEM. On error nothing is left to free. */
stk_status stk_raw_prepare(stk_raw_preparer *p, const uint8_t *in, size_t len,
                           stk_raw_prepared *out);

#ifdef __cplusplus
}
#endif
