#include "augment/resize.h"

#include <math.h>
#include <stdlib.h>

/* Filter taps for one axis: out[i] = sum_k w[i][k] * in[first[i] + k]. */
typedef struct taps {
    int *first;
    int *count;
    float *weights; /* out_size x max_taps */
    int max_taps;
} taps;

static float triangle(float x)
{
    x = fabsf(x);
    return x < 1.0f ? 1.0f - x : 0.0f;
}

static int make_taps(int in, int out, taps *t)
{
    double scale = (double)in / out;
    double fscale = scale > 1.0 ? scale : 1.0; /* widen the filter when shrinking */
    double support = fscale;                   /* triangle support is 1 */
    t->max_taps = (int)ceil(support) * 2 + 1;
    t->first = malloc(sizeof(int) * (size_t)out);
    t->count = malloc(sizeof(int) * (size_t)out);
    t->weights = malloc(sizeof(float) * (size_t)out * (size_t)t->max_taps);
    if (!t->first || !t->count || !t->weights) return -1;
    for (int i = 0; i < out; i++) {
        double center = (i + 0.5) * scale;
        int lo = (int)floor(center - support + 0.5);
        int hi = (int)floor(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in) hi = in;
        if (hi - lo > t->max_taps) hi = lo + t->max_taps;
        float *w = t->weights + (size_t)i * (size_t)t->max_taps;
        double total = 0;
        for (int k = lo; k < hi; k++) {
            w[k - lo] = triangle((float)((k + 0.5 - center) / fscale));
            total += w[k - lo];
        }
        if (total <= 0) { /* cannot happen for in >= 1, but never divide by zero */
            w[0] = 1.0f;
            hi = lo + 1;
            total = 1;
        }
        for (int k = 0; k < hi - lo; k++) w[k] = (float)(w[k] / total);
        t->first[i] = lo;
        t->count[i] = hi - lo;
    }
    return 0;
}

static void free_taps(taps *t)
{
    free(t->first);
    free(t->count);
    free(t->weights);
}

static uint8_t to_u8(float v)
{
    v += 0.5f;
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
}

stk_status stk_resize_u8(const uint8_t *src, int sw, int sh, int channels, uint8_t *dst, int dw,
                         int dh)
{
    if (sw <= 0 || sh <= 0 || dw <= 0 || dh <= 0 || channels <= 0 || channels > 4)
        return stk_error(STK_ERR_INVALID_ARG, "resize: bad size %dx%dx%d -> %dx%d", sw, sh,
                         channels, dw, dh);
    taps h = {0}, v = {0};
    float *tmp = malloc(sizeof(float) * (size_t)dw * (size_t)sh * (size_t)channels);
    float *acc_row = malloc(sizeof(float) * (size_t)dw * (size_t)channels);
    stk_status st = STK_OK;
    if (!tmp || !acc_row || make_taps(sw, dw, &h) || make_taps(sh, dh, &v)) {
        st = stk_error(STK_ERR_NOMEM, "resize: out of memory");
        goto out;
    }
    const int c = channels;
    const size_t row_len = (size_t)dw * (size_t)c;
    /* Horizontal pass into a float image (sh rows of dw pixels). */
    for (int y = 0; y < sh; y++) {
        const uint8_t *row = src + (size_t)y * (size_t)sw * (size_t)c;
        float *orow = tmp + (size_t)y * row_len;
        for (int x = 0; x < dw; x++) {
            const float *w = h.weights + (size_t)x * (size_t)h.max_taps;
            const uint8_t *p = row + (size_t)h.first[x] * (size_t)c;
            float acc[4] = {0, 0, 0, 0};
            if (c == 3) {
                for (int k = 0; k < h.count[x]; k++) {
                    acc[0] += w[k] * p[3 * k];
                    acc[1] += w[k] * p[3 * k + 1];
                    acc[2] += w[k] * p[3 * k + 2];
                }
            } else {
                for (int k = 0; k < h.count[x]; k++)
                    for (int ch = 0; ch < c; ch++) acc[ch] += w[k] * p[k * c + ch];
            }
            for (int ch = 0; ch < c; ch++) orow[x * c + ch] = acc[ch];
        }
    }
    /* Vertical pass: whole rows at a time, so the inner loop is contiguous
     * and vectorises. */
    for (int y = 0; y < dh; y++) {
        const float *w = v.weights + (size_t)y * (size_t)v.max_taps;
        for (size_t x = 0; x < row_len; x++) acc_row[x] = 0;
        for (int k = 0; k < v.count[y]; k++) {
            const float *in = tmp + (size_t)(v.first[y] + k) * row_len;
            const float wk = w[k];
            for (size_t x = 0; x < row_len; x++) acc_row[x] += wk * in[x];
        }
        uint8_t *orow = dst + (size_t)y * row_len;
        for (size_t x = 0; x < row_len; x++) orow[x] = to_u8(acc_row[x]);
    }
out:
    free(tmp);
    free(acc_row);
    free_taps(&h);
    free_taps(&v);
    return st;
}
