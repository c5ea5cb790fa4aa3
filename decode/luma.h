/* RGB -> gray as PIL's convert("L"), shared by the decoders and predict. */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One RGB pixel's ITU-R 601 luma in 16-bit fixed point, rounded: bit for
 * bit PIL's "L". */
static inline uint8_t stk_image_luma(const uint8_t *rgb)
{
    return (uint8_t)((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

#ifdef __cplusplus
}
#endif
