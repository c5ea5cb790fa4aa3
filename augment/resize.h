/* Resizing a window of an image, the way PIL does it (and so torchvision
 * with antialias=True on PIL images): a separable triangle (bilinear) filter
 * whose support widens with the shrink factor, horizontal pass first.
 *
 *     stk_resizer *rz;
 *     stk_resizer_create(&rz);                       // one per worker thread
 *     stk_view src = {pixels, stride, width, height, 3};
 *     stk_window win = {.x0 = 10.5, .y0 = 0, .w = 300, .h = 300,
 *                       .bx0 = 0, .by0 = 0, .bx1 = width, .by1 = height};
 *     stk_resize_u8_window(rz, &src, &win, dst, 224 * 3, 224, 224, false);
 *
 * The window (x0, y0, w, h) may be fractional; the filter reads only pixels
 * inside the bounds [bx0, bx1) x [by0, by1) (a crop cut before resizing has
 * bounds = window; a resize-then-crop has bounds = the image). Filter taps
 * are computed per (window, bounds, output size) and cached, so repeated
 * shapes (eval on same-size images) cost nothing; scratch buffers grow to
 * the largest image seen and are then reused: no allocation per image once
 * warm. The flip is folded into the horizontal pass.
 *
 * Two paths: u8 (fixed point with a u8 intermediate, as PIL, but 14-bit
 * weights where PIL has 22 so that SIMD multiplies pixel pairs: see
 * resize_plan_impl.h) and f32 (float all through, written straight into
 * normalised CHW planes). One resizer per thread.
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_view {
    const uint8_t *data; /* interleaved u8 pixels */
    size_t stride;       /* bytes between rows */
    int width, height, channels;
} stk_view;

typedef struct stk_window {
    double x0, y0, w, h;    /* in view pixels */
    int bx0, by0, bx1, by1; /* readable pixels, in view pixels */
} stk_window;

typedef struct stk_resizer stk_resizer;

stk_status stk_resizer_create(stk_resizer **out);
void stk_resizer_destroy(stk_resizer *rz);

/* Resize the window of src into dst (out_w x out_h, src->channels, rows
 * dst_stride bytes apart). Errors: STK_ERR_INVALID_ARG (empty window or
 * bounds outside the view), STK_ERR_NOMEM. */
stk_status stk_resize_u8_window(stk_resizer *rz, const stk_view *src, const stk_window *win,
                                uint8_t *dst, size_t dst_stride, int out_w, int out_h, bool flip);

/* Float path: plane c of dst (plane_stride floats apart, rows row_stride
 * floats apart) gets value * scale[c] + bias[c], value the filtered pixel in
 * 0..255 (normalisation: scale = 1 / (255 std), bias = -mean / std). */
stk_status stk_resize_f32_window(stk_resizer *rz, const stk_view *src, const stk_window *win,
                                 float *dst, size_t row_stride, size_t plane_stride, int out_w,
                                 int out_h, bool flip, const float scale[3], const float bias[3]);

/* Copy the integer window at (x0, y0) of src, out_w x out_h, into dst:
 * zeros where it leaves the image, mirrored when flip (RandomCrop, CenterCrop
 * without resize, none). */
void stk_copy_window_u8(const stk_view *src, int x0, int y0, uint8_t *dst, size_t dst_stride,
                        int out_w, int out_h, bool flip);

/* Whole image sw x sh -> dw x dh (pack --max-side); makes a resizer per call. */
stk_status stk_resize_u8(const uint8_t *src, int sw, int sh, int channels, uint8_t *dst, int dw,
                         int dh);

#ifdef __cplusplus
}
#endif
