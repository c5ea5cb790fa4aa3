/* Geometry on u8 HWC pixels: torchvision's rotate and affine on tensors
 * (an inverse affine matrix about the image centre, an affine grid in
 * float32, grid_sample with nearest sampling, align_corners=False and zero
 * fill), and the policies' ShearX/Y (centre at the top-left corner) and
 * TranslateX/Y. */
#include "augment/pixel_ops_impl.h"

#include <math.h>
#include <string.h>

#define DEG (3.14159265358979323846 / 180.0)

/* torchvision's _get_inverse_affine_matrix (inverted): output -> input. */
static void inverse_affine(double cx, double cy, double angle, double tx, double ty, double scale,
                           double shx, double shy, double m[6])
{
    double rot = angle * DEG, sx = shx * DEG, sy = shy * DEG;
    double a = cos(rot - sy) / cos(sy);
    double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    double c = sin(rot - sy) / cos(sy);
    double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
    m[0] = d / scale, m[1] = -b / scale, m[2] = 0;
    m[3] = -c / scale, m[4] = a / scale, m[5] = 0;
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
}

/* The matrix of op for a w x h image, in torchvision's centred coordinates. */
static void matrix_of(const stk_pixel_op *op, int w, int h, double m[6])
{
    const double *a = op->arg;
    /* F.affine(center=[0, 0]): the top-left corner, relative to the centre. */
    double ox = -w * 0.5, oy = -h * 0.5;
    switch (op->kind) {
    case STK_OP_ROTATE: /* F.rotate passes -angle: counter-clockwise */
        inverse_affine(0, 0, -a[0], 0, 0, 1, 0, 0, m);
        break;
    case STK_OP_AFFINE:
        inverse_affine(a[6] != 0 ? ox : 0, a[6] != 0 ? oy : 0, a[0], a[1], a[2], a[3], a[4], a[5],
                       m);
        break;
    case STK_OP_SHEARX: inverse_affine(ox, oy, 0, 0, 0, 1, atan(a[0]) / DEG, 0, m); break;
    case STK_OP_SHEARY: inverse_affine(ox, oy, 0, 0, 0, 1, 0, atan(a[0]) / DEG, m); break;
    case STK_OP_TRANSLATEX: /* int(magnitude): towards zero */
        inverse_affine(0, 0, 0, trunc(a[0]), 0, 1, 0, 0, m);
        break;
    default: /* STK_OP_TRANSLATEY */ inverse_affine(0, 0, 0, 0, trunc(a[0]), 1, 0, 0, m); break;
    }
}

stk_status stk_pixel_warp(const stk_pixel_op *op, uint8_t *img, size_t stride, int w, int h, int c,
                          stk_pixel_scratch *s)
{
    double m[6];
    matrix_of(op, w, h, m);
    size_t row = (size_t)w * (size_t)c;
    if (row * (size_t)h > INT32_MAX)
        return stk_error(STK_ERR_INVALID_ARG, "rotate/affine: a %dx%d image is too large", w, h);
    stk_status st = stk_pixel_scratch_copy(s, row * (size_t)h);
    if (st == STK_OK) st = stk_pixel_scratch_index(s, (size_t)w);
    if (st != STK_OK) return st;
    static const uint8_t zero[3] = {0, 0, 0};
    uint8_t *src = s->copy;
    for (int y = 0; y < h; y++) memcpy(src + (size_t)y * row, img + (size_t)y * stride, row);
    /* _gen_affine_grid: grid = [x, y, 1] . theta^T / (w/2, h/2), x and y the
     * pixel centres relative to the image centre; grid_sample unnormalises
     * ((g + 1) * size - 1) / 2 and rounds half to even. All in float32. */
    float t00 = (float)m[0] / (0.5f * (float)w), t10 = (float)m[1] / (0.5f * (float)w);
    float t20 = (float)m[2] / (0.5f * (float)w);
    float t01 = (float)m[3] / (0.5f * (float)h), t11 = (float)m[4] / (0.5f * (float)h);
    float t21 = (float)m[5] / (0.5f * (float)h);
    int32_t *at = s->index; /* a row's source offsets, -1 outside */
    for (int y = 0; y < h; y++) {
        float by = (float)y - (float)h * 0.5f + 0.5f;
        float gx0 = by * t10 + t20, gy0 = by * t11 + t21;
        for (int x = 0; x < w; x++) { /* vectorises: no memory access but at[] */
            float bx = (float)x - (float)w * 0.5f + 0.5f;
            float gx = bx * t00 + gx0, gy = bx * t01 + gy0;
            float ix = stk_rint_even(((gx + 1.0f) * (float)w - 1.0f) / 2.0f);
            float iy = stk_rint_even(((gy + 1.0f) * (float)h - 1.0f) / 2.0f);
            bool inside = ix >= 0.0f && iy >= 0.0f && ix < (float)w && iy < (float)h;
            at[x] = inside ? (int32_t)iy * (int32_t)row + (int32_t)ix * c : -1;
        }
        uint8_t *out = img + (size_t)y * stride;
        if (c == 3)
            for (int x = 0; x < w; x++) {
                const uint8_t *p = at[x] >= 0 ? src + at[x] : zero;
                out[3 * x] = p[0], out[3 * x + 1] = p[1], out[3 * x + 2] = p[2];
            }
        else
            for (int x = 0; x < w; x++) out[x] = at[x] >= 0 ? src[at[x]] : 0;
    }
    return STK_OK;
}
