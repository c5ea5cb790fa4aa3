/* PNG encoding of 8-bit images (zlib from Debian), for TensorBoard's image
 * summaries and `stoke peek --out x.png`.
 *
 *     uint8_t *png; size_t n;
 *     STK_TRY(stk_png_encode(pixels, width, height, 3, &png, &n));
 *     ... fwrite(png, 1, n, f); free(png);
 */
#pragma once

#include "common/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* pixels: height rows of width x channels bytes (1 gray, 3 RGB, 4 RGBA),
 * packed. *out is malloc'd; the caller frees it. Errors: INVALID_ARG (a size
 * or channel count PNG cannot hold), NOMEM. */
stk_status stk_png_encode(const uint8_t *pixels, int width, int height, int channels, uint8_t **out,
                          size_t *out_len);

#ifdef __cplusplus
}
#endif
