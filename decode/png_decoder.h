/* PNG files to pixels, through Debian's libpng: for `stoke pack` (a PNG in
 * a folder is decoded and stored as JPEG, decode/image_decode.h) and
 * `stoke predict`. Every colour type, bit depth and interlace: grey
 * 1/2/4/8/16, RGB 8/16, palette 1/2/4/8, grey+alpha and RGBA 8/16; 16-bit
 * samples keep their high byte, alpha is dropped (as PIL's convert("RGB")),
 * grey becomes RGB by repetition and RGB grey by ITU-R 601 luma (PIL's "L",
 * bit for bit). libpng checks every critical chunk's CRC.
 *
 *     uint8_t *px; uint32_t w, h;
 *     STK_TRY(stk_png_decode(bytes, len, 3, 64000000, &px, &w, &h));   // RGB HWC
 *     ...
 *     free(px);
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The 8-byte PNG signature starts data. */
bool stk_png_sniff(const uint8_t *data, size_t len);

/* 1 for a grey or grey + alpha PNG, 3 otherwise (from the header). */
int stk_png_channels(const uint8_t *data, size_t len);

/* Decode into *pixels (malloc'd, h rows of w * channels bytes; channels 1
 * or 3). Errors: STK_ERR_CORRUPT (a bad signature, chunk, CRC or zlib
 * stream, truncation: libpng's reason), STK_ERR_LIMIT
 * (more than max_pixels pixels), STK_ERR_INVALID_ARG (channels),
 * STK_ERR_NOMEM. */
stk_status stk_png_decode(const uint8_t *data, size_t len, int channels, uint64_t max_pixels,
                          uint8_t **pixels, uint32_t *width, uint32_t *height);

#ifdef __cplusplus
}
#endif
