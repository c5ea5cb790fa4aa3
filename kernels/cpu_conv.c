/* 2-D convolution on the CPU as im2col + GEMM, one image per thread.
 *
 * Why per image: the batch is the cheapest axis to split (no reduction
 * between threads in the forward and data-gradient passes), and a whole
 * image's GEMM (k x c*r*s times c*r*s x oh*ow) is large enough for oneDNN's
 * single-thread kernels to run near peak. A 1x1 convolution with stride 1
 * and no padding needs no im2col: the input plane is already the matrix.
 * The weight gradient sums over images, so each thread accumulates its own
 * copy and the copies are added at the end. */
#include "kernels/cpu_kernels_impl.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

static bool is_pointwise(const stk_conv2d_desc *d)
{
    return d->r == 1 && d->s == 1 && d->stride_h == 1 && d->stride_w == 1 && d->pad_h == 0 &&
           d->pad_w == 0;
}

/* col[(ci*r + kr)*s + ks][oy*ow + ox] = x[ci][oy*sh - ph + kr*dh][ox*sw - pw + ks*dw] (0 outside).
 */
static void im2col(const stk_conv2d_desc *d, int64_t cg, const float *x, float *col)
{
    int64_t ohw = d->oh * d->ow;
    for (int64_t ci = 0; ci < cg; ci++)
        for (int64_t kr = 0; kr < d->r; kr++)
            for (int64_t ks = 0; ks < d->s; ks++) {
                float *out = col + ((ci * d->r + kr) * d->s + ks) * ohw;
                const float *plane = x + ci * d->h * d->w;
                for (int64_t oy = 0; oy < d->oh; oy++) {
                    int64_t iy = oy * d->stride_h - d->pad_h + kr * d->dil_h;
                    float *row = out + oy * d->ow;
                    if (iy < 0 || iy >= d->h) {
                        memset(row, 0, (size_t)d->ow * sizeof *row);
                        continue;
                    }
                    const float *in = plane + iy * d->w;
                    int64_t x0 = -d->pad_w + ks * d->dil_w;
                    if (d->stride_w == 1) {
                        for (int64_t ox = 0; ox < d->ow; ox++) {
                            int64_t ix = ox + x0;
                            row[ox] = (ix >= 0 && ix < d->w) ? in[ix] : 0.f;
                        }
                    } else {
                        for (int64_t ox = 0; ox < d->ow; ox++) {
                            int64_t ix = ox * d->stride_w + x0;
                            row[ox] = (ix >= 0 && ix < d->w) ? in[ix] : 0.f;
                        }
                    }
                }
            }
}

/* The adjoint of im2col: x += scatter(col). */
static void col2im(const stk_conv2d_desc *d, int64_t cg, const float *col, float *x)
{
    int64_t ohw = d->oh * d->ow;
    for (int64_t ci = 0; ci < cg; ci++)
        for (int64_t kr = 0; kr < d->r; kr++)
            for (int64_t ks = 0; ks < d->s; ks++) {
                const float *in = col + ((ci * d->r + kr) * d->s + ks) * ohw;
                float *plane = x + ci * d->h * d->w;
                for (int64_t oy = 0; oy < d->oh; oy++) {
                    int64_t iy = oy * d->stride_h - d->pad_h + kr * d->dil_h;
                    if (iy < 0 || iy >= d->h) continue;
                    float *out = plane + iy * d->w;
                    const float *row = in + oy * d->ow;
                    int64_t x0 = -d->pad_w + ks * d->dil_w;
                    for (int64_t ox = 0; ox < d->ow; ox++) {
                        int64_t ix = ox * d->stride_w + x0;
                        if (ix >= 0 && ix < d->w) out[ix] += row[ox];
                    }
                }
            }
}

/* Per-thread scratch for one image's columns. */
static float *alloc_cols(const stk_conv2d_desc *d, int threads)
{
    int64_t cg = d->c / d->groups;
    size_t per = (size_t)(cg * d->r * d->s * d->oh * d->ow);
    return malloc((per ? per : 1) * sizeof(float) * (size_t)threads);
}

stk_status cpu_conv2d_forward(const stk_conv2d_desc *d, const float *x, const float *w, float *y)
{
    int64_t g = d->groups, cg = d->c / g, kg = d->k / g, ohw = d->oh * d->ow;
    int64_t crs = cg * d->r * d->s;
    bool pw = is_pointwise(d);
    int threads = omp_get_max_threads();
    float *cols = pw ? NULL : alloc_cols(d, threads);
    if (!pw && !cols) return stk_error(STK_ERR_NOMEM, "conv2d: no memory for the im2col buffer");
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < d->n * g; i++) {
        int64_t img = i / g, gi = i % g;
        const float *xg = x + (img * d->c + gi * cg) * d->h * d->w;
        const float *col = xg;
        if (!pw) {
            float *mine = cols + (size_t)omp_get_thread_num() * (size_t)(crs * ohw);
            im2col(d, cg, xg, mine);
            col = mine;
        }
        cpu_gemm(false, false, kg, ohw, crs, 1.f, w + gi * kg * crs, crs, col, ohw, 0.f,
                 y + (img * d->k + gi * kg) * ohw, ohw);
    }
    free(cols);
    return STK_OK;
}

stk_status cpu_conv2d_backward_data(const stk_conv2d_desc *d, const float *w, const float *gy,
                                    float *gx)
{
    int64_t g = d->groups, cg = d->c / g, kg = d->k / g, ohw = d->oh * d->ow;
    int64_t crs = cg * d->r * d->s;
    bool pw = is_pointwise(d);
    int threads = omp_get_max_threads();
    float *cols = pw ? NULL : alloc_cols(d, threads);
    if (!pw && !cols) return stk_error(STK_ERR_NOMEM, "conv2d: no memory for the col2im buffer");
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < d->n * g; i++) {
        int64_t img = i / g, gi = i % g;
        float *gxg = gx + (img * d->c + gi * cg) * d->h * d->w;
        const float *gyg = gy + (img * d->k + gi * kg) * ohw;
        if (pw) { /* gx = W^T gy directly */
            cpu_gemm(true, false, crs, ohw, kg, 1.f, w + gi * kg * crs, crs, gyg, ohw, 0.f, gxg,
                     ohw);
            continue;
        }
        float *col = cols + (size_t)omp_get_thread_num() * (size_t)(crs * ohw);
        cpu_gemm(true, false, crs, ohw, kg, 1.f, w + gi * kg * crs, crs, gyg, ohw, 0.f, col, ohw);
        memset(gxg, 0, (size_t)(cg * d->h * d->w) * sizeof *gxg);
        col2im(d, cg, col, gxg);
    }
    free(cols);
    return STK_OK;
}

stk_status cpu_conv2d_backward_weight(const stk_conv2d_desc *d, const float *x, const float *gy,
                                      float *gw)
{
    int64_t g = d->groups, cg = d->c / g, kg = d->k / g, ohw = d->oh * d->ow;
    int64_t crs = cg * d->r * d->s, wsize = d->k * crs;
    bool pw = is_pointwise(d);
    int threads = omp_get_max_threads();
    float *cols = pw ? NULL : alloc_cols(d, threads);
    float *partial = calloc((size_t)(wsize * threads), sizeof(float));
    if ((!pw && !cols) || !partial) {
        free(cols);
        free(partial);
        return stk_error(STK_ERR_NOMEM, "conv2d: no memory for the weight-gradient buffers");
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < d->n * g; i++) {
        int64_t img = i / g, gi = i % g;
        int t = omp_get_thread_num();
        const float *xg = x + (img * d->c + gi * cg) * d->h * d->w;
        const float *gyg = gy + (img * d->k + gi * kg) * ohw;
        const float *col = xg;
        if (!pw) {
            float *mine = cols + (size_t)t * (size_t)(crs * ohw);
            im2col(d, cg, xg, mine);
            col = mine;
        }
        /* gw_g += gy_g [kg, ohw] x col^T [ohw, crs] */
        cpu_gemm(false, true, kg, crs, ohw, 1.f, gyg, ohw, col, ohw, 1.f,
                 partial + (size_t)t * (size_t)wsize + gi * kg * crs, crs);
    }
    memcpy(gw, partial, (size_t)wsize * sizeof *gw);
    for (int t = 1; t < threads; t++)
        for (int64_t j = 0; j < wsize; j++) gw[j] += partial[(size_t)t * (size_t)wsize + j];
    free(cols);
    free(partial);
    return STK_OK;
}
