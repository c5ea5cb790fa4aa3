#include "augment/resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PRECISION_BITS 22 /* PIL's: 32 - 8 - 2 */
#define CACHE_SLOTS    8  /* per axis */

/* Taps of one axis: out[i] = sum_k w[i][k] * in[first[i] + k]. */
typedef struct axis_plan {
    /* key */
    double in0, len;
    int lo, hi, out;
    bool valid;
    /* taps */
    int max_taps;
    int *first, *count;
    int32_t *wi; /* fixed point, out x max_taps */
    float *wf;   /* float, out x max_taps */
    size_t cap;  /* entries allocated in wi/wf */
    int cap_out; /* entries allocated in first/count */
} axis_plan;

struct stk_resizer {
    axis_plan cache[2][CACHE_SLOTS]; /* [0] horizontal, [1] vertical: never evict each other */
    uint8_t *tmp_u8;                 /* horizontal pass output */
    float *tmp_f32;
    int32_t *acc_i32; /* one output row of the vertical pass */
    float *acc_f32;
    size_t tmp_u8_cap, tmp_f32_cap, acc_i32_cap, acc_f32_cap;
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
            axis_plan *a = &rz->cache[axis][i];
            free(a->first);
            free(a->count);
            free(a->wi);
            free(a->wf);
        }
    free(rz->tmp_u8);
    free(rz->tmp_f32);
    free(rz->acc_i32);
    free(rz->acc_f32);
    free(rz);
}

/* Grow *buf to hold n elements of size sz (keeps nothing: scratch). */
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

/* PIL's precompute_coeffs for the bilinear filter, with the reads clamped to
 * [lo, hi) instead of [0, size). */
static int compute_plan(axis_plan *a, double in0, double len, int lo, int hi, int out)
{
    double scale = len / out;
    double fscale = scale > 1.0 ? scale : 1.0;
    double support = fscale; /* bilinear support 1 */
    int max_taps = (int)ceil(support) * 2 + 1;
    size_t n = (size_t)out * (size_t)max_taps;
    if (n > a->cap) {
        int32_t *wi = realloc(a->wi, n * sizeof *wi);
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
    a->max_taps = max_taps;
    for (int i = 0; i < out; i++) {
        double center = in0 + (i + 0.5) * scale;
        int xmin = (int)(center - support + 0.5); /* truncation, as PIL */
        int xmax = (int)(center + support + 0.5);
        if (xmin < lo) xmin = lo;
        if (xmax > hi) xmax = hi;
        if (xmax - xmin > max_taps) xmax = xmin + max_taps;
        float *wf = a->wf + (size_t)i * (size_t)max_taps;
        int32_t *wi = a->wi + (size_t)i * (size_t)max_taps;
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
            wi[k] = (int32_t)(0.5 + wf[k] * (double)(1 << PRECISION_BITS));
        }
        a->first[i] = xmin;
        a->count[i] = xmax - xmin;
    }
    a->in0 = in0, a->len = len, a->lo = lo, a->hi = hi, a->out = out;
    a->valid = true;
    return 0;
}

static const axis_plan *get_plan(stk_resizer *rz, int axis, double in0, double len, int lo, int hi,
                                 int out)
{
    uint64_t h = 1469598103934665603ull;
    uint64_t bits[5];
    memcpy(&bits[0], &in0, 8);
    memcpy(&bits[1], &len, 8);
    bits[2] = (uint64_t)(uint32_t)lo, bits[3] = (uint64_t)(uint32_t)hi, bits[4] = (uint64_t)out;
    for (int i = 0; i < 5; i++) h = (h ^ bits[i]) * 1099511628211ull;
    axis_plan *a = &rz->cache[axis][(h >> 32) % CACHE_SLOTS];
    if (a->valid && a->in0 == in0 && a->len == len && a->lo == lo && a->hi == hi && a->out == out)
        return a;
    a->valid = false;
    return compute_plan(a, in0, len, lo, hi, out) ? NULL : a;
}

static void row_span(const axis_plan *v, int *lo, int *hi);

static uint8_t clip8(int32_t v)
{
    v >>= PRECISION_BITS;
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* Horizontal pass of one row, fixed point. Output pixel x goes to position
 * x, or out_w - 1 - x when flipped. */
static void hpass_u8(const uint8_t *in, uint8_t *out, const axis_plan *a, int c, bool flip)
{
    int n = a->out;
    for (int x = 0; x < n; x++) {
        const int32_t *w = a->wi + (size_t)x * (size_t)a->max_taps;
        const uint8_t *p = in + (size_t)a->first[x] * (size_t)c;
        int k, count = a->count[x];
        uint8_t *o = out + (size_t)(flip ? n - 1 - x : x) * (size_t)c;
        if (c == 3) {
            int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
            for (k = 0; k < count; k++) {
                s0 += p[3 * k] * w[k];
                s1 += p[3 * k + 1] * w[k];
                s2 += p[3 * k + 2] * w[k];
            }
            o[0] = clip8(s0), o[1] = clip8(s1), o[2] = clip8(s2);
        } else {
            for (int ch = 0; ch < c; ch++) {
                int32_t s = 1 << (PRECISION_BITS - 1);
                for (k = 0; k < count; k++) s += p[k * c + ch] * w[k];
                o[ch] = clip8(s);
            }
        }
    }
}

/* Vertical pass of one output row: whole rows, so the loop over x is
 * contiguous and vectorises (AVX2 clone where the CPU has it). */
__attribute__((target_clones("avx2", "default"))) static void vpass_u8(const uint8_t *const *rows,
                                                                       const int32_t *w, int taps,
                                                                       int32_t *acc, uint8_t *out,
                                                                       size_t n)
{
    for (size_t x = 0; x < n; x++) acc[x] = 1 << (PRECISION_BITS - 1);
    for (int k = 0; k < taps; k++) {
        const uint8_t *r = rows[k];
        int32_t wk = w[k];
        for (size_t x = 0; x < n; x++) acc[x] += r[x] * wk;
    }
    for (size_t x = 0; x < n; x++) {
        int32_t v = acc[x] >> PRECISION_BITS;
        out[x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
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

stk_status stk_resize_u8_window(stk_resizer *rz, const stk_view *src, const stk_window *win,
                                uint8_t *dst, size_t dst_stride, int out_w, int out_h, bool flip)
{
    stk_status st = check_args(src, win, out_w, out_h);
    if (st) return st;
    const axis_plan *h = get_plan(rz, 0, win->x0, win->w, win->bx0, win->bx1, out_w);
    const axis_plan *v = get_plan(rz, 1, win->y0, win->h, win->by0, win->by1, out_h);
    if (!h || !v) return stk_error(STK_ERR_NOMEM, "resize: out of memory");
    int c = src->channels;
    size_t row = (size_t)out_w * (size_t)c;
    int y_lo, y_hi;
    row_span(v, &y_lo, &y_hi);
    if (reserve((void **)&rz->tmp_u8, &rz->tmp_u8_cap, row * (size_t)(y_hi - y_lo), 1) ||
        reserve((void **)&rz->acc_i32, &rz->acc_i32_cap, row, sizeof(int32_t)))
        return stk_error(STK_ERR_NOMEM, "resize: out of memory");
    for (int y = y_lo; y < y_hi; y++)
        hpass_u8(src->data + (size_t)y * src->stride, rz->tmp_u8 + (size_t)(y - y_lo) * row, h, c,
                 flip);
    const uint8_t *rows[64];
    for (int y = 0; y < out_h; y++) {
        int taps = v->count[y];
        const int32_t *w = v->wi + (size_t)y * (size_t)v->max_taps;
        uint8_t *out = dst + (size_t)y * dst_stride;
        for (int k0 = 0; k0 < taps; k0 += 64) { /* > 64 taps: shrinking by more than 32x */
            int n = taps - k0 < 64 ? taps - k0 : 64;
            for (int k = 0; k < n; k++)
                rows[k] = rz->tmp_u8 + (size_t)(v->first[y] + k0 + k - y_lo) * row;
            if (k0 == 0) {
                vpass_u8(rows, w, n, rz->acc_i32, out, row);
            } else { /* continue the accumulation of the first chunk */
                for (int k = 0; k < n; k++)
                    for (size_t x = 0; x < row; x++) rz->acc_i32[x] += rows[k][x] * w[k0 + k];
                for (size_t x = 0; x < row; x++) out[x] = clip8(rz->acc_i32[x]);
            }
        }
    }
    return STK_OK;
}

/* Rows of the source the vertical taps read: [*lo, *hi). */
static void row_span(const axis_plan *v, int *lo, int *hi)
{
    *lo = v->first[0];
    *hi = v->first[0] + v->count[0];
    for (int y = 1; y < v->out; y++) {
        if (v->first[y] < *lo) *lo = v->first[y];
        if (v->first[y] + v->count[y] > *hi) *hi = v->first[y] + v->count[y];
    }
}

static void hpass_f32(const uint8_t *in, float *out, const axis_plan *a, int c, bool flip)
{
    int n = a->out;
    for (int x = 0; x < n; x++) {
        const float *w = a->wf + (size_t)x * (size_t)a->max_taps;
        const uint8_t *p = in + (size_t)a->first[x] * (size_t)c;
        float *o = out + (size_t)(flip ? n - 1 - x : x) * (size_t)c;
        for (int ch = 0; ch < c; ch++) {
            float s = 0;
            for (int k = 0; k < a->count[x]; k++) s += p[k * c + ch] * w[k];
            o[ch] = s;
        }
    }
}

stk_status stk_resize_f32_window(stk_resizer *rz, const stk_view *src, const stk_window *win,
                                 float *dst, size_t row_stride, size_t plane_stride, int out_w,
                                 int out_h, bool flip, const float scale[3], const float bias[3])
{
    stk_status st = check_args(src, win, out_w, out_h);
    if (st) return st;
    const axis_plan *h = get_plan(rz, 0, win->x0, win->w, win->bx0, win->bx1, out_w);
    const axis_plan *v = get_plan(rz, 1, win->y0, win->h, win->by0, win->by1, out_h);
    if (!h || !v) return stk_error(STK_ERR_NOMEM, "resize: out of memory");
    int c = src->channels;
    size_t row = (size_t)out_w * (size_t)c;
    int y_lo, y_hi;
    row_span(v, &y_lo, &y_hi);
    if (reserve((void **)&rz->tmp_f32, &rz->tmp_f32_cap, row * (size_t)(y_hi - y_lo),
                sizeof(float)) ||
        reserve((void **)&rz->acc_f32, &rz->acc_f32_cap, row, sizeof(float)))
        return stk_error(STK_ERR_NOMEM, "resize: out of memory");
    for (int y = y_lo; y < y_hi; y++)
        hpass_f32(src->data + (size_t)y * src->stride, rz->tmp_f32 + (size_t)(y - y_lo) * row, h, c,
                  flip);
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
    if (st) return st;
    stk_view v = {src, (size_t)sw * (size_t)channels, sw, sh, channels};
    stk_window win = {0, 0, sw, sh, 0, 0, sw, sh};
    st = stk_resize_u8_window(rz, &v, &win, dst, (size_t)dw * (size_t)channels, dw, dh, false);
    stk_resizer_destroy(rz);
    return st;
}
