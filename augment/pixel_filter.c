/* Filters on u8 HWC pixels: torchvision's gaussian_blur (a separable
 * Gaussian, reflected at the borders, rounded) and adjust_sharpness (a blend
 * with the 3x3 "smooth" filter of PIL, borders kept). */
#include "augment/pixel_ops_impl.h"

#include <math.h>
#include <string.h>

/* torch's "reflect" padding: -1 -> 1, n -> n - 2. */
static inline int reflect(int i, int n)
{
    if (i < 0) return -i;
    if (i >= n) return 2 * (n - 1) - i;
    return i;
}

/* Separable: along each row into floats (the row padded by reflection
 * first, so the inner loop is a plain dot product that vectorises), then
 * down each column, summing the taps in the same order. */
static stk_status blur(int k, double sigma, uint8_t *img, size_t stride, int w, int h, int c,
                       stk_pixel_scratch *s)
{
    if (k / 2 >= w || k / 2 >= h)
        return stk_error(STK_ERR_INVALID_ARG,
                         "blur: a kernel of %d on a %dx%d image (the kernel's half must be "
                         "smaller than each side)",
                         k, w, h);
    float kern[255];
    double half = (k - 1) * 0.5, sum = 0;
    for (int i = 0; i < k; i++) {
        float x = (float)(-half + i), z = x / (float)sigma;
        kern[i] = expf(-0.5f * z * z);
        sum += kern[i];
    }
    for (int i = 0; i < k; i++) kern[i] = (float)(kern[i] / sum);
    int r = k / 2;
    size_t row = (size_t)w * (size_t)c, padded = (size_t)(w + 2 * r) * (size_t)c;
    stk_status st = stk_pixel_scratch_plane(s, row * (size_t)h + padded);
    if (st != STK_OK) return st;
    float *plane = s->plane, *pad = s->plane + row * (size_t)h;
    for (int y = 0; y < h; y++) {
        const uint8_t *in = img + (size_t)y * stride;
        for (int x = -r; x < w + r; x++)
            for (int ch = 0; ch < c; ch++)
                pad[(size_t)(x + r) * (size_t)c + (size_t)ch] =
                    in[(size_t)reflect(x, w) * (size_t)c + (size_t)ch];
        float *out = plane + (size_t)y * row;
        for (size_t i = 0; i < row; i++) out[i] = 0.0f;
        for (int t = 0; t < k; t++) {
            const float *p = pad + (size_t)t * (size_t)c;
            float kt = kern[t];
            for (size_t i = 0; i < row; i++) out[i] += kt * p[i];
        }
    }
    float *acc = pad; /* reused: one output row */
    for (int y = 0; y < h; y++) {
        for (size_t i = 0; i < row; i++) acc[i] = 0.0f;
        for (int t = 0; t < k; t++) {
            const float *p = plane + (size_t)reflect(y + t - r, h) * row;
            float kt = kern[t];
            for (size_t i = 0; i < row; i++) acc[i] += kt * p[i];
        }
        uint8_t *out = img + (size_t)y * stride;
        for (size_t i = 0; i < row; i++) {
            float v = stk_rint_even(acc[i]);
            out[i] = (uint8_t)(int)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
        }
    }
    return STK_OK;
}

/* _blend(img, degenerate, factor): the degenerate image is the 3x3 filter
 * [1 1 1; 1 5 1; 1 1 1] / 13, rounded, inside a border of the image itself.
 * Row by row over contiguous bytes, so that the loops vectorise. */
static stk_status sharpness(double factor, uint8_t *img, size_t stride, int w, int h, int c,
                            stk_pixel_scratch *s)
{
    if (w <= 2 || h <= 2) return STK_OK;
    size_t row = (size_t)w * (size_t)c;
    stk_status st = stk_pixel_scratch_copy(s, row * (size_t)h);
    if (st == STK_OK) st = stk_pixel_scratch_plane(s, row);
    if (st != STK_OK) return st;
    uint8_t *src = s->copy;
    float *deg = s->plane;
    for (int y = 0; y < h; y++) memcpy(src + (size_t)y * row, img + (size_t)y * stride, row);
    float f = (float)factor, rest = (float)(1.0 - factor);
    for (int y = 0; y < h; y++) {
        const uint8_t *in = src + (size_t)y * row;
        for (size_t i = 0; i < row; i++) deg[i] = (float)in[i];
        if (y > 0 && y < h - 1) {
            const uint8_t *up = in - row, *down = in + row;
            size_t lo = (size_t)c, hi = row - (size_t)c;
            for (size_t i = lo; i < hi; i++) {
                int sum = 5 * in[i] + in[i - (size_t)c] + in[i + (size_t)c] + up[i - (size_t)c] +
                          up[i] + up[i + (size_t)c] + down[i - (size_t)c] + down[i] +
                          down[i + (size_t)c];
                /* round(sum / 13): never a tie (13 is odd), so the float
                 * quotient rounds as torch's does */
                deg[i] = stk_rint_even((float)sum / 13.0f);
            }
        }
        uint8_t *out = img + (size_t)y * stride;
        for (size_t i = 0; i < row; i++) {
            float v = f * (float)in[i] + rest * deg[i];
            out[i] = (uint8_t)(int)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
        }
    }
    return STK_OK;
}

stk_status stk_pixel_filter(const stk_pixel_op *op, uint8_t *img, size_t stride, int w, int h,
                            int c, stk_pixel_scratch *s)
{
    if (op->kind == STK_OP_BLUR) return blur((int)op->arg[0], op->arg[1], img, stride, w, h, c, s);
    return sharpness(op->arg[0], img, stride, w, h, c, s);
}
