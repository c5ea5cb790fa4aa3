/* Short labels drawn into u8 images (stoke peek's grid): a 3x5 pixel font of
 * digits, A-Z and a few signs (lowercase is drawn as uppercase, anything
 * else as '?'), each glyph cell 4 x 6 pixels at scale 1.
 *
 *     stk_image_draw_text(px, w, h, 3, x, y, 2, "3 DRESS", 255);
 */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STK_TEXT_CELL_W 4 /* a glyph and its spacing, at scale 1 */
#define STK_TEXT_CELL_H 6

/* Draw text with its top left at (x, y), each font pixel a scale x scale
 * square of `value` in every channel; what falls outside the image is
 * clipped. */
void stk_image_draw_text(uint8_t *pixels, int width, int height, int channels, int x, int y,
                         int scale, const char *text, uint8_t value);

#ifdef __cplusplus
}
#endif
