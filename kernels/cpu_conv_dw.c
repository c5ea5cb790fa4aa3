/* Depthwise convolution (groups = channels = filters) in direct loops over
 * NCHW planes: the weight gradient always, the forward and the data
 * gradient for the shapes oneDNN has no depthwise kernel for
 * (cpu_conv_dnnl.c asks which kernel it chose).
 *
 * Why: Debian's oneDNN (2.6) runs im2col + GEMM for every depthwise
 * backward-weights convolution (AVX2 and AVX-512, f32 and bf16), and for
 * the forward and data gradient of a filter larger than its plane
 * (ConvNeXt's 7x7 over the 2x2 planes of its last stage at 64 px):
 * kernels/README.md, "Depthwise convolution".
 *
 * How: each plane is copied into a zero-padded scratch plane that holds
 * every tap of every output, so the inner loops have no bounds: a row of
 * 16 outputs is one vector per filter tap. For a horizontal stride sw the
 * padded row is stored as sw phases (columns q, q + sw, q + 2 sw, ... for
 * each q < sw), so the inputs of consecutive outputs under one tap are
 * consecutive floats at any stride. Taps that meet only padding for every
 * output are skipped (most of a 7x7 filter over a 2x2 plane). The weight
 * gradient gives each thread whole channels (no reduction between threads:
 * the same result for any thread count), sums each tap in 16 float lanes
 * over the images in order and adds the lanes in double at the end. */
#include "kernels/cpu_kernels_impl.h"
#include "device/device_alloc.h"

#include <omp.h>
#include <string.h>

#define LANES 16 /* outputs per vector step */

bool cpu_conv2d_is_depthwise(const stk_conv2d_desc *d)
{
    return d->groups == d->c && d->k == d->c && d->dil_h == 1 && d->dil_w == 1 && d->r <= 15 &&
           d->s <= 15;
}

/* The padded plane: hp rows (oy*sh + ky) of wp columns (ox*sw + kx), each
 * row sw phases of wq floats; column c of a row at (c % sw) * wq + c / sw. */
typedef struct dw_geom {
    int64_t hp, wp, wq, row;
    int64_t kx_lo, kx_hi; /* the filter columns that meet a real input column for some output */
    int64_t owp;          /* ow rounded up to LANES: the weight gradient's padded gy rows */
    int64_t tap[15];      /* where tap kx of output column 0 reads in a padded row (output
                             column ox reads ox floats further) */
    size_t plane;         /* floats of scratch per plane: 2 LANES of slack after the last row
                             for the vector steps past a row's end */
} dw_geom;

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Where column c of a padded row lies in it. */
static int64_t column_offset(const stk_conv2d_desc *d, int64_t wq, int64_t c)
{
    return c % d->stride_w * wq + c / d->stride_w;
}

/* Where input column ix lies in its padded row. */
static int64_t input_offset(const stk_conv2d_desc *d, const dw_geom *g, int64_t ix)
{
    return column_offset(d, g->wq, ix + d->pad_w);
}

static dw_geom geometry(const stk_conv2d_desc *d)
{
    dw_geom g;
    g.hp = (d->oh - 1) * d->stride_h + d->r;
    g.wp = (d->ow - 1) * d->stride_w + d->s;
    g.wq = (g.wp + d->stride_w - 1) / d->stride_w;
    g.row = g.wq * d->stride_w;
    g.kx_lo = max64(0, d->pad_w - (d->ow - 1) * d->stride_w);
    g.kx_hi = min64(d->s, d->pad_w + d->w);
    g.owp = (d->ow + LANES - 1) / LANES * LANES;
    g.plane = (size_t)(g.hp * g.row + 2 * LANES);
    for (int64_t kx = 0; kx < d->s; kx++) g.tap[kx] = column_offset(d, g.wq, kx);
    return g;
}

/* The filter rows whose padded row oy*sh + ky holds input data. */
static void rows_for(const stk_conv2d_desc *d, const dw_geom *g, int64_t oy, int64_t *lo,
                     int64_t *hi)
{
    int64_t top = oy * d->stride_h;
    *lo = max64(0, d->pad_h - top);
    *hi = min64(d->r, min64(d->pad_h + d->h, g->hp) - top);
}

/* The input columns any tap reaches; rows likewise. */
static int64_t used_cols(const stk_conv2d_desc *d, const dw_geom *g)
{
    return min64(d->w, g->wp - d->pad_w);
}

static int64_t used_rows(const stk_conv2d_desc *d, const dw_geom *g)
{
    return min64(d->h, g->hp - d->pad_h);
}

/* x's plane into xp, zero around it (padding, and the slack). */
static void pad_plane(const stk_conv2d_desc *d, const dw_geom *g, const float *x, float *xp)
{
    memset(xp, 0, g->plane * sizeof *xp);
    int64_t cols = used_cols(d, g), rows = used_rows(d, g);
    for (int64_t iy = 0; iy < rows; iy++) {
        float *r = xp + (iy + d->pad_h) * g->row;
        const float *in = x + iy * d->w;
        if (d->stride_w == 1) {
            memcpy(r + d->pad_w, in, (size_t)cols * sizeof *in);
        } else {
            for (int64_t ix = 0; ix < cols; ix++) r[input_offset(d, g, ix)] = in[ix];
        }
    }
}

/* The padded gradient plane's interior into gx; inputs no tap reaches get 0. */
static void unpad_plane(const stk_conv2d_desc *d, const dw_geom *g, const float *gxp, float *gx)
{
    int64_t cols = used_cols(d, g), rows = used_rows(d, g);
    for (int64_t iy = 0; iy < d->h; iy++) {
        float *out = gx + iy * d->w;
        int64_t have = iy < rows ? cols : 0;
        const float *r = gxp + (iy + d->pad_h) * g->row;
        if (d->stride_w == 1 && have > 0) {
            memcpy(out, r + d->pad_w, (size_t)have * sizeof *out);
        } else {
            for (int64_t ix = 0; ix < have; ix++) out[ix] = r[input_offset(d, g, ix)];
        }
        if (have < d->w) memset(out + have, 0, (size_t)(d->w - have) * sizeof *out);
    }
}

/* One row of LANES floats as a GCC vector (unaligned, aliasing floats):
 * each target_clones build lowers it to its own vectors (one AVX-512
 * register, two AVX2 ones, four SSE2 ones). Plain loops over 16 floats were
 * left scalar by the vectoriser once the taps' offsets varied. */
typedef float lanes_t __attribute__((vector_size(LANES * sizeof(float)), aligned(4), may_alias));

/* a += b * c over one row */
static inline void fma_row(float *a, const float *b, const float *c)
{
    *(lanes_t *)a += *(const lanes_t *)b * *(const lanes_t *)c;
}

/* a += w * b over one row */
static inline void axpy_row(float *a, float w, const float *b)
{
    *(lanes_t *)a += w * *(const lanes_t *)b;
}

/* y (oh x ow) = the filter w (r x s) over the padded plane xp. */
STK_CPU_CLONES static void plane_forward(const stk_conv2d_desc *d, const dw_geom *g,
                                         const float *xp, const float *w, float *y)
{
    for (int64_t oy = 0; oy < d->oh; oy++) {
        int64_t ky0, ky1;
        rows_for(d, g, oy, &ky0, &ky1);
        for (int64_t ox0 = 0; ox0 < d->ow; ox0 += LANES) {
            float acc[LANES] = {0};
            for (int64_t ky = ky0; ky < ky1; ky++) {
                const float *xr = xp + (oy * d->stride_h + ky) * g->row + ox0;
                for (int64_t kx = g->kx_lo; kx < g->kx_hi; kx++)
                    axpy_row(acc, w[ky * d->s + kx], xr + g->tap[kx]);
            }
            memcpy(y + oy * d->ow + ox0, acc, (size_t)min64(LANES, d->ow - ox0) * sizeof *y);
        }
    }
}

/* gxp (the padded plane, zero to start) += each output's gradient times
 * the filter over its window. */
STK_CPU_CLONES static void plane_backward_data(const stk_conv2d_desc *d, const dw_geom *g,
                                               const float *w, const float *gy, float *gxp)
{
    for (int64_t oy = 0; oy < d->oh; oy++) {
        int64_t ky0, ky1;
        rows_for(d, g, oy, &ky0, &ky1);
        for (int64_t ox0 = 0; ox0 < d->ow; ox0 += LANES) {
            float gv[LANES] = {0}; /* zeros past the row: they add nothing where they land */
            memcpy(gv, gy + oy * d->ow + ox0, (size_t)min64(LANES, d->ow - ox0) * sizeof *gv);
            for (int64_t ky = ky0; ky < ky1; ky++) {
                float *gr = gxp + (oy * d->stride_h + ky) * g->row + ox0;
                for (int64_t kx = g->kx_lo; kx < g->kx_hi; kx++)
                    axpy_row(gr + g->tap[kx], w[ky * d->s + kx], gv);
            }
        }
    }
}

/* acc[tap][lane] += gy * the input under that tap, by lanes of 16 outputs
 * (the lanes are added once per channel, after the last image), for the
 * taps that meet input data. gyp: gy's rows padded with zeros to g->owp. */
STK_CPU_CLONES static void plane_backward_weight(const stk_conv2d_desc *d, const dw_geom *g,
                                                 const float *xp, const float *gyp,
                                                 float (*acc)[LANES])
{
    for (int64_t oy = 0; oy < d->oh; oy++) {
        int64_t ky0, ky1;
        rows_for(d, g, oy, &ky0, &ky1);
        const float *gr = gyp + oy * g->owp;
        /* taps innermost: consecutive updates go to different rows of acc
         * (one row updated again and again waited on its own store) */
        for (int64_t ky = ky0; ky < ky1; ky++) {
            const float *xr = xp + (oy * d->stride_h + ky) * g->row;
            float(*a)[LANES] = acc + ky * d->s;
            for (int64_t ox0 = 0; ox0 < g->owp; ox0 += LANES)
                for (int64_t kx = g->kx_lo; kx < g->kx_hi; kx++)
                    fma_row(a[kx], gr + ox0, xr + g->tap[kx] + ox0);
        }
    }
}

/* Scratch for every thread of the team, from the caching allocator. */
static stk_status scratch(size_t floats, float **buf, size_t *bytes)
{
    *bytes = floats * (size_t)omp_get_max_threads() * sizeof(float);
    return stk_device_alloc(STK_DEVICE_CPU, *bytes, (void **)buf);
}

static int64_t work(const stk_conv2d_desc *d) { return d->n * d->c * d->oh * d->ow * d->r * d->s; }

/* The forward (in x, out y) or the data gradient (in gy, out gx): one
 * plane per iteration, each thread padding into its own scratch plane. */
static stk_status per_plane(const stk_conv2d_desc *d, bool data_grad, const float *in,
                            const float *w, float *out)
{
    dw_geom g = geometry(d);
    float *buf;
    size_t bytes;
    STK_TRY(scratch(g.plane, &buf, &bytes));
    int64_t planes = d->n * d->c, hw = d->h * d->w, ohw = d->oh * d->ow, taps = d->r * d->s;
#pragma omp parallel for schedule(static) if (work(d) > STK_OMP_MIN_WORK)
    for (int64_t p = 0; p < planes; p++) {
        float *pad = buf + (size_t)omp_get_thread_num() * g.plane;
        const float *wc = w + (p % d->c) * taps;
        if (data_grad) {
            memset(pad, 0, g.plane * sizeof *pad);
            plane_backward_data(d, &g, wc, in + p * ohw, pad);
            unpad_plane(d, &g, pad, out + p * hw);
        } else {
            pad_plane(d, &g, in + p * hw, pad);
            plane_forward(d, &g, pad, wc, out + p * ohw);
        }
    }
    stk_device_free(STK_DEVICE_CPU, buf, bytes);
    return STK_OK;
}

stk_status cpu_conv2d_dw_forward(const stk_conv2d_desc *d, const float *x, const float *w, float *y)
{
    return per_plane(d, false, x, w, y);
}

stk_status cpu_conv2d_dw_backward_data(const stk_conv2d_desc *d, const float *w, const float *gy,
                                       float *gx)
{
    return per_plane(d, true, gy, w, gx);
}

stk_status cpu_conv2d_dw_backward_weight(const stk_conv2d_desc *d, const float *x, const float *gy,
                                         float *gw)
{
    dw_geom g = geometry(d);
    size_t per = g.plane + (size_t)(d->oh * g.owp); /* x's padded plane, then gy's */
    float *buf;
    size_t bytes;
    STK_TRY(scratch(per, &buf, &bytes));
    int64_t taps = d->r * d->s, hw = d->h * d->w, ohw = d->oh * d->ow;
#pragma omp parallel for schedule(static) if (work(d) > STK_OMP_MIN_WORK)
    for (int64_t c = 0; c < d->c; c++) {
        float *xp = buf + (size_t)omp_get_thread_num() * per, *gyp = xp + g.plane;
        float acc[15 * 15][LANES]; /* the images in order: the same sums for any thread count */
        memset(acc, 0, sizeof(float) * LANES * (size_t)taps);
        memset(gyp, 0, (size_t)(d->oh * g.owp) * sizeof *gyp);
        for (int64_t n = 0; n < d->n; n++) {
            pad_plane(d, &g, x + (n * d->c + c) * hw, xp);
            const float *gp = gy + (n * d->c + c) * ohw;
            for (int64_t oy = 0; oy < d->oh; oy++)
                memcpy(gyp + oy * g.owp, gp + oy * d->ow, (size_t)d->ow * sizeof *gyp);
            plane_backward_weight(d, &g, xp, gyp, acc);
        }
        for (int64_t t = 0; t < taps; t++) {
            double sum = 0;
            for (int j = 0; j < LANES; j++) sum += acc[t][j];
            gw[c * taps + t] = (float)sum;
        }
    }
    stk_device_free(STK_DEVICE_CPU, buf, bytes);
    return STK_OK;
}
