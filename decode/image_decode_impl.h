/* The decoders behind stk_image_decode (decode/image_decode.h): each gives
 * its file's own channels (BMP 3; PPM 3, PGM 1) in a malloc'd buffer, after
 * checking the pixel count against max_pixels. */
#pragma once

#include "decode/image_decode.h"

stk_status stk_bmp_decode(const uint8_t *data, size_t len, uint64_t max_pixels, uint8_t **pixels,
                          uint32_t *width, uint32_t *height);
stk_status stk_pnm_decode(const uint8_t *data, size_t len, uint64_t max_pixels, uint8_t **pixels,
                          uint32_t *width, uint32_t *height, int *channels);
