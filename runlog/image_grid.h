/* A batch as one picture: the first images of a normalised f32 NCHW batch,
 * un-normalised back to 8-bit pixels and tiled in a square grid with dark
 * borders (what `stoke peek` shows, for TensorBoard's image summary).
 *
 *     uint8_t *px; int w, h;
 *     STK_TRY(stk_image_grid_nchw(x, n, c, height, width, mean, std, 64, &px, &w, &h));
 *     STK_TRY(stk_tfevents_image(tb, "train/first_batch", 0, px, w, h, c));
 *     free(px);
 */
#pragma once

#include "common/status.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x: n x c x height x width floats, each (pixel/255 - mean[ch]) / std[ch];
 * c is 1 or 3. At most max_cells images are tiled. *pixels (malloc'd,
 * *grid_w x *grid_h x c, rows packed) is the caller's. Errors: INVALID_ARG,
 * NOMEM. */
stk_status stk_image_grid_nchw(const float *x, int n, int c, int height, int width,
                               const float mean[3], const float std[3], int max_cells,
                               uint8_t **pixels, int *grid_w, int *grid_h);

#ifdef __cplusplus
}
#endif
