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
    size_t row = (size_t)w * (size_t)c;
    stk_status st = stk_pixel_scratch_plane(s, row * (size_t)h);
    if (st != STK_OK) return st;
    float *plane = s->plane;
    int r = k / 2;
    for (int y = 0; y < h; y++) { /* horizontal, into floats */
        const uint8_t *in = img + (size_t)y * stride;
        float *out = plane + (size_t)y * row;
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++) {
                float acc = 0;
                for (int i = 0; i < k; i++)
                    acc +=
                        kern[i] * (float)in[(size_t)reflect(x + i - r, w) * (size_t)c + (size_t)ch];
                out[(size_t)x * (size_t)c + (size_t)ch] = acc;
            }
    }
    for (int y = 0; y < h; y++) { /* vertical, rounded back to u8 */
        uint8_t *out = img + (size_t)y * stride;
        for (size_t x = 0; x < row; x++) {
            float acc = 0;
            for (int i = 0; i < k; i++)
                acc += kern[i] * plane[(size_t)reflect(y + i - r, h) * row + x];
            float v = nearbyintf(acc);
            out[x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
    return STK_OK;
}

/* _blend(img, degenerate, factor): the degenerate image is the 3x3 filter
 * [1 1 1; 1 5 1; 1 1 1] / 13, rounded, inside a border of the image itself. */
static stk_status sharpness(double factor, uint8_t *img, size_t stride, int w, int h, int c,
                            stk_pixel_scratch *s)
{
    if (w <= 2 || h <= 2) return STK_OK;
    size_t row = (size_t)w * (size_t)c;
    stk_status st = stk_pixel_scratch_copy(s, row * (size_t)h);
    if (st != STK_OK) return st;
    uint8_t *src = s->copy;
    for (int y = 0; y < h; y++) memcpy(src + (size_t)y * row, img + (size_t)y * stride, row);
    float f = (float)factor, rest = (float)(1.0 - factor);
    for (int y = 0; y < h; y++) {
        uint8_t *out = img + (size_t)y * stride;
        const uint8_t *in = src + (size_t)y * row;
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++) {
                size_t i = (size_t)x * (size_t)c + (size_t)ch;
                int deg = in[i];
                if (x > 0 && y > 0 && x < w - 1 && y < h - 1) {
                    /* sum / 13 is never exactly k + 0.5 (13 is odd): rounding in
                     * integers matches torch's float rounding. */
                    int sum = 4 * in[i];
                    for (int dy = -1; dy <= 1; dy++)
                        for (int dx = -1; dx <= 1; dx++)
                            sum += in[(ptrdiff_t)i + dy * (ptrdiff_t)row + dx * c];
                    deg = (2 * sum + 13) / 26;
                }
                float v = f * (float)in[i] + rest * (float)deg;
                v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
                out[i] = (uint8_t)v;
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
