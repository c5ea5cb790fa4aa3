/* Image files other than JPEG to pixels, for `stoke pack` (a folder or list
 * of PNG, WebP, BMP or PPM/PGM files is decoded and stored as JPEG: why,
 * measured, in README "Formats") and `stoke predict`.
 *
 *     stk_image_kind k = stk_image_sniff(bytes, len);      // by content, not by name
 *     uint8_t *px; uint32_t w, h; int c;
 *     if (stk_image_decodable(k))
 *         STK_TRY(stk_image_decode(bytes, len, 0, 64000000, &px, &w, &h, &c));
 *     ... h rows of w * c bytes (c = 1 for grey files, 3 otherwise) ...
 *     free(px);
 *
 * Pixels are PIL's convert("RGB") (or "L" for grey files), bit for bit for
 * 8-bit files: alpha dropped without compositing, palettes expanded, 16-bit
 * samples keep their high byte. PNG through libpng (decode/png_decoder.h),
 * WebP through libwebp, BMP and binary PPM/PGM here.
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_image_kind {
    STK_IMAGE_UNKNOWN = 0,
    STK_IMAGE_JPEG,
    STK_IMAGE_PNG,
    STK_IMAGE_WEBP,
    STK_IMAGE_BMP,
    STK_IMAGE_PNM, /* binary PPM (P6) and PGM (P5) */
    STK_IMAGE_GIF,
    STK_IMAGE_TIFF,
} stk_image_kind;

/* The kind by the file's first bytes. */
stk_image_kind stk_image_sniff(const uint8_t *data, size_t len);

/* "JPEG", "PNG", "WebP", "BMP", "PPM/PGM", "GIF", "TIFF" or "unknown". */
const char *stk_image_kind_name(stk_image_kind kind);

/* Whether stk_image_decode reads this kind (PNG, WebP, BMP, PPM/PGM). */
bool stk_image_decodable(stk_image_kind kind);

/* Decode into *pixels (malloc'd): channels 1 or 3, or 0 for the file's own
 * (1 for grey PNG/PGM, 3 otherwise), given back in *channels_out. Errors:
 * STK_ERR_CORRUPT / STK_ERR_UNSUPPORTED (the reason, e.g. "BMP: RLE
 * compression is not supported"), STK_ERR_LIMIT (more than max_pixels
 * pixels; 0: 64 MP), STK_ERR_INVALID_ARG, STK_ERR_NOMEM. */
stk_status stk_image_decode(const uint8_t *data, size_t len, int channels, uint64_t max_pixels,
                            uint8_t **pixels, uint32_t *width, uint32_t *height, int *channels_out);

#ifdef __cplusplus
}
#endif
