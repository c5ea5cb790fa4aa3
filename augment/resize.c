/* Resize plans (PIL's filter taps, cached per window) and the two passes.
 * The SIMD kernels are in resize_simd.c. */
#include "augment/resize.h"

#include "augment/resize_plan_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SLOTS 8 /* per axis */

struct stk_resizer {
    stk_axis_plan cache[2][CACHE_SLOTS]; /* [0] horizontal, [1] vertical: never evict each other */
    uint8_t *tmp_u8;                     /* horizontal pass output */
    float *tmp_f32;
    const uint8_t **rows; /* the vertical pass's input rows */
    float *acc_f32;
    size_t tmp_u8_cap, tmp_f32_cap, rows_cap, acc_f32_cap;
};

stk_status stk_resizer_create(stk_resizer **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
}

void stk_resizer_destroy(stk_resizer *rz)
{
    if (!rz) return;
    for (int axis = 0; axis < 2; axis++)
        for (int i = 0; i < CACHE_SLOTS; i++) {
            stk_axis_plan *a = &rz->cache[axis][i];
            free(a->first);
            free(a->count);
            free(a->wi);
            free(a->wf);
            free(a->hc);
        }
    free(rz->tmp_u8);
    free(rz->tmp_f32);
    free(rz->rows);
    free(rz->acc_f32);
    free(rz);
}

/* Grow *buf to hold n elements of size sz (scratch: contents not kept). */
static int reserve(void **buf, size_t *cap, size_t n, size_t sz)
{
    if (n <= *cap) return 0;
    void *p = realloc(*buf, n * sz);
    if (!p) return -1;
    *buf = p;
    *cap = n;
    return 0;
}

static float triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? (float)(1.0 - x) : 0.0f;
}

static int grow_plan(stk_axis_plan *a, int out, int max_taps)
{
    size_t n = (size_t)out * (size_t)max_taps;
    if (n > a->cap) { /* wi and wf grow together */
        int16_t *wi = realloc(a->wi, n * sizeof *wi);
        if (wi) a->wi = wi;
        float *wf = realloc(a->wf, n * sizeof *wf);
        if (wf) a->wf = wf;
        if (!wi || !wf) return -1;
        a->cap = n;
    }
    if (out > a->cap_out) {
        int *first = realloc(a->first, (size_t)out * sizeof *first);
        if (first) a->first = first;
        int *count = realloc(a->count, (size_t)out * sizeof *count);
        if (count) a->count = count;
        if (!first || !count) return -1;
        a->cap_out = out;
    }
    return 0;
}

/* PIL's precompute_coeffs for the bilinear filter, with the reads clamped to
 * [lo, hi) instead of [0, size); a flipped plan lists the outputs right to
 * left, so the passes always write left to right. Only a horizontal plan
 * gets the RGB SIMD coefficients (hc). */
static int compute_plan(stk_axis_plan *a, bool horizontal, double in0, double len, int lo, int hi,
                        int out, bool flip)
{
    double scale = len / out;
    double fscale = scale > 1.0 ? scale : 1.0;
    double support = fscale; /* bilinear support 1 */
    int max_taps = (int)ceil(support) * 2 + 1;
    if (grow_plan(a, out, max_taps)) return -1;
    a->max_taps = max_taps;
    a->widest = 1;
    for (int j = 0; j < out; j++) {
        int i = flip ? out - 1 - j : j; /* j: position written, i: output pixel */
        double center = in0 + (i + 0.5) * scale;
        int xmin = (int)(center - support + 0.5); /* truncation, as PIL */
        int xmax = (int)(center + support + 0.5);
        if (xmin < lo) xmin = lo;
        if (xmax > hi) xmax = hi;
        if (xmax - xmin > max_taps) xmax = xmin + max_taps;
        float *wf = a->wf + (size_t)j * (size_t)max_taps;
        int16_t *wi = a->wi + (size_t)j * (size_t)max_taps;
        double total = 0;
        for (int x = xmin; x < xmax; x++) {
            wf[x - xmin] = triangle((x - center + 0.5) / fscale);
            total += wf[x - xmin];
        }
        if (!(total > 0)) { /* the window lies outside the bounds: nearest pixel */
            int c = (int)floor(center);
            xmin = c < lo ? lo : c >= hi ? hi - 1 : c;
            xmax = xmin + 1;
            wf[0] = 1.0f;
            total = 1.0;
        }
        for (int k = 0; k < xmax - xmin; k++) {
            wf[k] = (float)(wf[k] / total);
            wi[k] = (int16_t)(0.5 + wf[k] * (double)(1 << STK_RESIZE_BITS));
        }
        a->first[j] = xmin;
        a->count[j] = xmax - xmin;
        if (a->count[j] > a->widest) a->widest = a->count[j];
    }
    a->groups = (max_taps + STK_RESIZE_GROUP - 1) / STK_RESIZE_GROUP;
    a->in0 = in0, a->len = len, a->lo = lo, a->hi = hi, a->out = out, a->flip = flip;
    if (!horizontal) { /* the vertical pass reads wi, wf only */
        a->valid = true;
        return 0;
    }
    size_t hn = (size_t)((out + 1) / 2) * (size_t)a->groups * 48;
    if (reserve((void **)&a->hc, &a->hc_cap, hn, sizeof *a->hc)) return -1;
    memset(a->hc, 0, hn * sizeof *a->hc);
    for (int i = 0; i < out; i++)
        for (int k = 0; k < a->count[i]; k++) {
            int g = k / STK_RESIZE_GROUP, p = k % STK_RESIZE_GROUP; /* pixel p of group g */
            int16_t *v = a->hc + stk_hc_index(a->groups, i, g, p / 2);
            int16_t w = a->wi[(size_t)i * (size_t)max_taps + (size_t)k];
            for (int c = 0; c < 3; c++) v[2 * c + (p & 1)] = w;
        }
    a->valid = true;
    return 0;
}

static const stk_axis_plan *get_plan(stk_resizer *rz, int axis, double in0, double len, int lo,
                                     int hi, int out, bool flip)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the key */
    uint64_t bits[6];
    memcpy(&bits[0], &in0, 8);
    memcpy(&bits[1], &len, 8);
    bits[2] = (uint32_t)lo, bits[3] = (uint32_t)hi, bits[4] = (uint64_t)out, bits[5] = flip;
    for (int i = 0; i < 6; i++) h = (h ^ bits[i]) * 1099511628211ull;
    stk_axis_plan *a = &rz->cache[axis][(h >> 32) % CACHE_SLOTS];
    if (a->valid && a->in0 == in0 && a->len == len && a->lo == lo && a->hi == hi && a->out == out &&
        a->flip == flip)
        return a;
    a->valid = false;
    return compute_plan(a, axis == 0, in0, len, lo, hi, out, flip) ? NULL : a;
}

/* Horizontal pass of one row, fixed point, scalar; in[0] is pixel `origin`. */
static void hpass_u8(const uint8_t *in, int origin, uint8_t *out, const stk_axis_plan *a, int c)
{
    for (int x = 0; x < a->out; x++) {
        const int16_t *w = a->wi + (size_t)x * (size_t)a->max_taps;
        const uint8_t *p = in + (size_t)(a->first[x] - origin) * (size_t)c;
        uint8_t *o = out + (size_t)x * (size_t)c;
        for (int ch = 0; ch < c; ch++) {
            int32_t s = 1 << (STK_RESIZE_BITS - 1);
            for (int k = 0; k < a->count[x]; k++) s += p[k * c + ch] * w[k];
            o[ch] = stk_clip8_fixed(s);
        }
    }
}

static void hpass_f32(const uint8_t *in, float *out, const stk_axis_plan *a, int c)
{
    for (int x = 0; x < a->out; x++) {
        const float *w = a->wf + (size_t)x * (size_t)a->max_taps;
        const uint8_t *p = in + (size_t)a->first[x] * (size_t)c;
        float *o = out + (size_t)x * (size_t)c;
        for (int ch = 0; ch < c; ch++) {
            float s = 0;
            for (int k = 0; k < a->count[x]; k++) s += p[k * c + ch] * w[k];
            o[ch] = s;
        }
    }
}

/* Rows of the source the vertical taps read: [*lo, *hi). */
static void row_span(const stk_axis_plan *v, int *lo, int *hi)
{
    *lo = v->first[0];
    *hi = v->first[0] + v->count[0];
    for (int y = 1; y < v->out; y++) {
        if (v->first[y] < *lo) *lo = v->first[y];
        if (v->first[y] + v->count[y] > *hi) *hi = v->first[y] + v->count[y];
    }
}

static stk_status check_args(const stk_view *src, const stk_window *win, int out_w, int out_h)
{
    if (out_w < 1 || out_h < 1 || !(win->w > 0) || !(win->h > 0) || win->bx0 < 0 || win->by0 < 0 ||
        win->bx1 > src->width || win->by1 > src->height || win->bx0 >= win->bx1 ||
        win->by0 >= win->by1 || src->channels < 1 || src->channels > 4)
        return stk_error(STK_ERR_INVALID_ARG,
                         "resize: window %.1f,%.1f %.1fx%.1f bounds [%d,%d)x[%d,%d) of a %dx%dx%d "
                         "image to %dx%d",
                         win->x0, win->y0, win->w, win->h, win->bx0, win->bx1, win->by0, win->by1,
                         src->width, src->height, src->channels, out_w, out_h);
    return STK_OK;
}

/* Check the arguments and get (cached) taps for both axes. */
static stk_status plans(stk_resizer *rz, const stk_view *src, const stk_window *win, int out_w,
                        int out_h, bool flip, const stk_axis_plan **h, const stk_axis_plan **v)
{
    stk_status st = check_args(src, win, out_w, out_h);
    if (st != STK_OK) return st;
    *h = get_plan(rz, 0, win->x0, win->w, win->bx0, win->bx1, out_w, flip);
    *v = get_plan(rz, 1, win->y0, win->h, win->by0, win->by1, out_h, false);
    return *h && *v ? STK_OK : stk_error(STK_ERR_NOMEM, "resize: out of memory");
}

stk_status stk_resize_u8_window(stk_resizer *rz, const stk_view *src, const stk_window *win,
                                uint8_t *dst, size_t dst_stride, int out_w, int out_h, bool flip)
{
    const stk_axis_plan *h, *v;
    stk_status st = plans(rz, src, win, out_w, out_h, flip, &h, &v);
    if (st != STK_OK) return st;
    /* The per-pixel horizontal pass costs the most, so it runs on the fewer
     * rows: before the vertical pass when the window is shorter than the
     * output (upscaling), after it otherwise (bench/README.md, "Resize: pass
     * order"). */
    int c = src->channels;
    int x_lo, x_hi, y_lo, y_hi;
    row_span(h, &x_lo, &x_hi);
    row_span(v, &y_lo, &y_hi);
    size_t span = (size_t)(x_hi - x_lo) * (size_t)c, row = (size_t)out_w * (size_t)c;
    size_t padded = span + 32; /* the SIMD horizontal pass loads up to 16 bytes past a tap */
    bool vertical_first = y_hi - y_lo > out_h;
    size_t tmp_bytes =
        vertical_first ? padded * (size_t)out_h : row * (size_t)(y_hi - y_lo) + padded;
    if (reserve((void **)&rz->tmp_u8, &rz->tmp_u8_cap, tmp_bytes, 1) ||
        reserve((void **)&rz->rows, &rz->rows_cap, (size_t)v->max_taps, sizeof *rz->rows))
        return stk_error(STK_ERR_NOMEM, "resize: out of memory");
    if (vertical_first) {
        for (int y = 0; y < out_h; y++) {
            for (int k = 0; k < v->count[y]; k++)
                rz->rows[k] =
                    src->data + (size_t)(v->first[y] + k) * src->stride + (size_t)x_lo * (size_t)c;
            uint8_t *t = rz->tmp_u8 + (size_t)y * padded;
            stk_vpass_u8_simd(rz->rows, v->wi + (size_t)y * (size_t)v->max_taps, v->count[y], t,
                              span);
            memset(t + span, 0, 32); /* padding: read with zero weights only */
        }
        for (int y = 0; y < out_h; y++) {
            const uint8_t *t = rz->tmp_u8 + (size_t)y * padded;
            uint8_t *out = dst + (size_t)y * dst_stride;
            if (c != 3 || !stk_hpass_rgb_simd(t, x_lo, out, h)) hpass_u8(t, x_lo, out, h, c);
        }
        return STK_OK;
    }
    /* Horizontal first: each source row is copied into a padded line (the
     * source may end right after it), then filtered. */
    uint8_t *line = rz->tmp_u8 + row * (size_t)(y_hi - y_lo);
    memset(line + span, 0, 32);
    for (int y = y_lo; y < y_hi; y++) {
        memcpy(line, src->data + (size_t)y * src->stride + (size_t)x_lo * (size_t)c, span);
        uint8_t *out = rz->tmp_u8 + (size_t)(y - y_lo) * row;
        if (c != 3 || !stk_hpass_rgb_simd(line, x_lo, out, h)) hpass_u8(line, x_lo, out, h, c);
    }
    for (int y = 0; y < out_h; y++) {
        for (int k = 0; k < v->count[y]; k++)
            rz->rows[k] = rz->tmp_u8 + (size_t)(v->first[y] + k - y_lo) * row;
        stk_vpass_u8_simd(rz->rows, v->wi + (size_t)y * (size_t)v->max_taps, v->count[y],
                          dst + (size_t)y * dst_stride, row);
    }
    return STK_OK;
}

stk_status stk_resize_f32_window(stk_resizer *rz, const stk_view *src, const stk_window *win,
                                 float *dst, size_t row_stride, size_t plane_stride, int out_w,
                                 int out_h, bool flip, const float scale[3], const float bias[3])
{
    const stk_axis_plan *h, *v;
    stk_status st = plans(rz, src, win, out_w, out_h, flip, &h, &v);
    if (st != STK_OK) return st;
    int c = src->channels;
    size_t row = (size_t)out_w * (size_t)c;
    int y_lo, y_hi;
    row_span(v, &y_lo, &y_hi);
    if (reserve((void **)&rz->tmp_f32, &rz->tmp_f32_cap, row * (size_t)(y_hi - y_lo),
                sizeof(float)) ||
        reserve((void **)&rz->acc_f32, &rz->acc_f32_cap, row, sizeof(float)))
        return stk_error(STK_ERR_NOMEM, "resize: out of memory");
    for (int y = y_lo; y < y_hi; y++)
        hpass_f32(src->data + (size_t)y * src->stride, rz->tmp_f32 + (size_t)(y - y_lo) * row, h,
                  c);
    for (int y = 0; y < out_h; y++) {
        const float *w = v->wf + (size_t)y * (size_t)v->max_taps;
        float *acc = rz->acc_f32;
        for (size_t x = 0; x < row; x++) acc[x] = 0;
        for (int k = 0; k < v->count[y]; k++) {
            const float *r = rz->tmp_f32 + (size_t)(v->first[y] + k - y_lo) * row;
            for (size_t x = 0; x < row; x++) acc[x] += r[x] * w[k];
        }
        for (int ch = 0; ch < c; ch++) {
            float *o = dst + (size_t)ch * plane_stride + (size_t)y * row_stride;
            for (int x = 0; x < out_w; x++)
                o[x] = acc[(size_t)x * (size_t)c + (size_t)ch] * scale[ch] + bias[ch];
        }
    }
    return STK_OK;
}

void stk_copy_window_u8(const stk_view *src, int x0, int y0, uint8_t *dst, size_t dst_stride,
                        int out_w, int out_h, bool flip)
{
    int c = src->channels;
    for (int y = 0; y < out_h; y++) {
        uint8_t *o = dst + (size_t)y * dst_stride;
        int sy = y0 + y;
        if (sy < 0 || sy >= src->height) {
            memset(o, 0, (size_t)out_w * (size_t)c);
            continue;
        }
        const uint8_t *in = src->data + (size_t)sy * src->stride;
        for (int x = 0; x < out_w; x++) {
            int sx = x0 + (flip ? out_w - 1 - x : x);
            uint8_t *px = o + (size_t)x * (size_t)c;
            if (sx < 0 || sx >= src->width)
                memset(px, 0, (size_t)c);
            else
                memcpy(px, in + (size_t)sx * (size_t)c, (size_t)c);
        }
    }
}

stk_status stk_resize_u8(const uint8_t *src, int sw, int sh, int channels, uint8_t *dst, int dw,
                         int dh)
{
    if (sw <= 0 || sh <= 0 || dw <= 0 || dh <= 0 || channels <= 0 || channels > 4)
        return stk_error(STK_ERR_INVALID_ARG, "resize: bad size %dx%dx%d -> %dx%d", sw, sh,
                         channels, dw, dh);
    stk_resizer *rz;
    stk_status st = stk_resizer_create(&rz);
    if (st != STK_OK) return st;
    stk_view v = {src, (size_t)sw * (size_t)channels, sw, sh, channels};
    stk_window win = {0, 0, sw, sh, 0, 0, sw, sh};
    st = stk_resize_u8_window(rz, &v, &win, dst, (size_t)dw * (size_t)channels, dw, dh, false);
    stk_resizer_destroy(rz);
    return st;
}
