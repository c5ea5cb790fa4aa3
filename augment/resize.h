/* Image resizing (u8, interleaved channels).
 *
 * Separable triangle filter whose support widens with the shrink factor, so
 * shrinking is antialiased like PIL's BILINEAR / torchvision antialias=True.
 * This is the straightforward float version used by `stoke pack --max-side`;
 * it allocates a temporary of dst_w x src_h x channels floats per call.
 *
 *     stk_resize_u8(src, 640, 480, 3, dst, 256, 192);
 */
#pragma once

#include "common/status.h"

#include <stdint.h>

/* Resize src (sw x sh x channels, rows packed) into dst (dw x dh x channels).
 * Errors: STK_ERR_INVALID_ARG (a zero size), STK_ERR_NOMEM. */
stk_status stk_resize_u8(const uint8_t *src, int sw, int sh, int channels, uint8_t *dst, int dw,
                         int dh);
