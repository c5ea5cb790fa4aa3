/* Engine ops beyond the element-wise ones: conv2d, batch norm, pooling,
 * softmax, losses, cat, dropout and the input op — values against direct
 * reference loops and gradients against finite differences
 * (engine_testlib.h explains the tolerances). */
#include "check_main.h"
#include "engine/autocast.h"
#include "engine/autograd_impl.h"
#include "engine/tensor_impl.h"
#include "kernels/backend.h"
#include "kernels/convert_math.h"
#include "kernels/cpu_kernels_impl.h"
#include "storage/safetensors.h"
#include "engine_testlib.h"

#include <pthread.h>
#include <stdio.h>

/* ---- conv2d --------------------------------------------------------------- */

typedef struct conv_case {
    int64_t x[4], w[4];
    stk_conv2d_params p;
    bool bias;
} conv_case;

static stk_status f_conv(stk_tensor **in, void *c, stk_tensor **o)
{
    conv_case *cc = c;
    return stk_conv2d(in[0], in[1], cc->bias ? in[2] : NULL, &cc->p, o);
}

/* Every tap of a convolution: fn(ctx, x index, w index, y index) for each
 * output element in order and, within it, each input channel of its group
 * and filter position that falls inside the input. */
static void conv_for_each_tap(const conv_case *cc, int64_t oh, int64_t ow,
                              void (*fn)(void *, int64_t, int64_t, int64_t), void *ctx)
{
    int64_t N = cc->x[0], C = cc->x[1], H = cc->x[2], W = cc->x[3], K = cc->w[0], R = cc->w[2],
            S = cc->w[3];
    int g = cc->p.groups;
    int64_t cg = C / g, kg = K / g;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) {
                    int64_t yi = ((n * K + k) * oh + oy) * ow + ox, gi = k / kg;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t r = 0; r < R; r++)
                            for (int64_t q = 0; q < S; q++) {
                                int64_t iy =
                                    oy * cc->p.stride[0] - cc->p.padding[0] + r * cc->p.dilation[0];
                                int64_t ix =
                                    ox * cc->p.stride[1] - cc->p.padding[1] + q * cc->p.dilation[1];
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                fn(ctx, ((n * C + gi * cg + c) * H + iy) * W + ix,
                                   ((k * cg + c) * R + r) * S + q, yi);
                            }
                }
}

typedef struct conv_sums {
    const float *x, *w, *gy;
    double *y, *gx, *gw;
} conv_sums;

static void add_product(void *ctx, int64_t xi, int64_t wi, int64_t yi)
{
    conv_sums *c = ctx;
    c->y[yi] += (double)c->x[xi] * c->w[wi];
}

/* Direct convolution in double. */
static void conv_reference(const conv_case *cc, const float *x, const float *w, const float *b,
                           int64_t oh, int64_t ow, double *y)
{
    int64_t K = cc->w[0], per_k = oh * ow;
    for (int64_t i = 0; i < cc->x[0] * K * per_k; i++) y[i] = b ? b[i / per_k % K] : 0.0;
    conv_for_each_tap(cc, oh, ow, add_product, &(conv_sums){.x = x, .w = w, .y = y});
}

START_TEST(test_conv2d)
{
    conv_case cases[] = {
        {{2, 3, 6, 5}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, false},
        {{2, 4, 7, 7}, {6, 2, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 2}, true},
        {{1, 2, 8, 8}, {3, 2, 3, 2}, {{1, 2}, {2, 0}, {2, 1}, 1}, true},
        {{2, 5, 4, 4}, {3, 5, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}, false}, /* pointwise */
        {{2, 4, 5, 5}, {4, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 4}, true},  /* depthwise */
        /* depthwise filters larger than the plane (ConvNeXt's last stage):
         * cpu_conv_dw.c's direct loops, not oneDNN's im2col + GEMM */
        {{2, 3, 2, 2}, {3, 1, 7, 7}, {{1, 1}, {3, 3}, {1, 1}, 3}, true},
        {{1, 2, 3, 4}, {2, 1, 5, 5}, {{2, 1}, {2, 2}, {1, 1}, 2}, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        conv_case *cc = &cases[i];
        int64_t bs[1] = {cc->w[0]};
        stk_tensor *in[3] = {rand_tensor(100 + i, 4, cc->x, -1, 1),
                             rand_tensor(200 + i, 4, cc->w, -1, 1),
                             rand_tensor(300 + i, 1, bs, -1, 1)};
        stk_tensor *y;
        ck_assert_int_eq(f_conv(in, cc, &y), STK_OK);
        int64_t oh = stk_tensor_dim(y, 2), ow = stk_tensor_dim(y, 3);
        double *ref = malloc(sizeof(double) * (size_t)stk_tensor_numel(y));
        conv_reference(cc, stk_tensor_data(in[0]), stk_tensor_data(in[1]),
                       cc->bias ? stk_tensor_data(in[2]) : NULL, oh, ow, ref);
        float *v = host_f32(y);
        for (int64_t j = 0; j < stk_tensor_numel(y); j++)
            ck_assert_msg(fabs(v[j] - ref[j]) < 1e-4, "conv case %zu element %lld: %g vs %g", i,
                          (long long)j, v[j], ref[j]);
        free(v);
        free(ref);
        stk_tensor_release(y);
        for (int k = 0; k < 3; k++) stk_tensor_set_requires_grad(in[k], true);
        char name[32];
        snprintf(name, sizeof name, "conv2d case %zu", i);
        gradcheck(name, f_conv, cc->bias ? 3 : 2, in, cc, 1e-2, 1e-2);
        for (int k = 0; k < 3; k++) stk_tensor_release(in[k]);
    }
    /* errors name the shapes */
    int64_t sx[4] = {1, 3, 4, 4}, sw[4] = {2, 2, 3, 3};
    stk_tensor *x = rand_tensor(1, 4, sx, 0, 1), *w = rand_tensor(2, 4, sw, 0, 1), *y;
    ck_assert_int_eq(stk_conv2d(x, w, NULL, NULL, &y), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "[1, 3, 4, 4]"));
    stk_tensor_release(x);
    stk_tensor_release(w);
}
END_TEST

/* ---- bf16 autocast on the CPU (--amp) ------------------------------------ */

/* A copy of t's values rounded to bf16 and back (what a bf16 kernel reads). */
static float *bf16_rounded(const stk_tensor *t)
{
    float *v = host_f32(t);
    for (int64_t i = 0; i < stk_tensor_numel(t); i++) v[i] = stk_bf16_to_f32(stk_f32_to_bf16(v[i]));
    return v;
}

static float *absolute(const float *v, int64_t n)
{
    float *a = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) a[i] = fabsf(v[i]);
    return a;
}

/* A bf16 result `got` (n values) against:
 * - `rounded`, the exact result from bf16-rounded inputs: within f32
 *   accumulation's rounding, 2e-5 x bound (bound = the same sum over
 *   |inputs|, so a relative error per term), plus bf16's rounding of the
 *   result, 2^-8 x |result|, for an output rounded to bf16 (out_bf16);
 * - `exact`, from the unrounded f32 inputs: within the rounding of both
 *   factors of each term to bf16 (8 significant bits: 2^-7 x bound), plus
 *   the same, which is the tolerance --amp states for these ops; and not
 *   equal to it (else the op did not run in bf16). */
static void expect_bf16_result(const char *what, const float *got, const double *rounded,
                               const double *exact, const double *bound, int64_t n, bool out_bf16)
{
    double most = 0;
    for (int64_t i = 0; i < n; i++) {
        double out = out_bf16 ? 0x1p-8 * fabs(rounded[i]) : 0;
        ck_assert_msg(fabs(got[i] - rounded[i]) <= 2e-5 * bound[i] + out + 1e-6,
                      "%s element %lld: %.9g, from bf16-rounded inputs %.9g (bound %g)", what,
                      (long long)i, got[i], rounded[i], bound[i]);
        ck_assert_msg(fabs(got[i] - exact[i]) <= 0x1p-7 * bound[i] + out + 1e-6,
                      "%s element %lld: %.9g, f32 %.9g: beyond bf16's 2^-7 x %g", what,
                      (long long)i, got[i], exact[i], bound[i]);
        most = fmax(most, fabs(got[i] - exact[i]));
    }
    ck_assert_msg(most > 1e-6, "%s: equal to the f32 result (%g): not computed in bf16", what,
                  most);
}

static void add_gradients(void *ctx, int64_t xi, int64_t wi, int64_t yi)
{
    conv_sums *c = ctx;
    c->gx[xi] += (double)c->gy[yi] * c->w[wi];
    c->gw[wi] += (double)c->gy[yi] * c->x[xi];
}

/* conv2d's gradients in double: gx = sum gy * w, gw = sum gy * x over the
 * forward's taps. */
static void conv_grads_reference(const conv_case *cc, const float *x, const float *w,
                                 const float *gy, int64_t oh, int64_t ow, double *gx, double *gw)
{
    memset(gx, 0, sizeof(double) * (size_t)(cc->x[0] * cc->x[1] * cc->x[2] * cc->x[3]));
    memset(gw, 0, sizeof(double) * (size_t)(cc->w[0] * cc->w[1] * cc->w[2] * cc->w[3]));
    conv_for_each_tap(cc, oh, ow, add_gradients,
                      &(conv_sums){.x = x, .w = w, .gy = gy, .gx = gx, .gw = gw});
}

/* The direct depthwise loops (cpu_conv_dw.c) on their own, whichever
 * passes oneDNN would take: against the double reference for planes wider
 * than a vector row and narrower, strides 1 and 2, filters larger than the
 * plane, and padding that leaves input rows or columns no tap reaches. */
START_TEST(test_conv2d_depthwise_direct)
{
    conv_case cases[] = {
        {{2, 3, 20, 19}, {3, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 3}, false},
        {{2, 4, 2, 2}, {4, 1, 7, 7}, {{1, 1}, {3, 3}, {1, 1}, 4}, false},
        {{1, 5, 9, 17}, {5, 1, 5, 5}, {{2, 2}, {2, 2}, {1, 1}, 5}, false},
        {{3, 2, 8, 8}, {2, 1, 7, 7}, {{1, 1}, {3, 3}, {1, 1}, 2}, false},
        {{1, 2, 7, 9}, {2, 1, 3, 3}, {{2, 3}, {0, 0}, {1, 1}, 2}, false}, /* last rows unread */
        {{2, 2, 33, 5}, {2, 1, 3, 5}, {{1, 1}, {1, 2}, {1, 1}, 2}, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const conv_case *cc = &cases[i];
        stk_conv2d_desc d = {.n = cc->x[0],
                             .c = cc->x[1],
                             .h = cc->x[2],
                             .w = cc->x[3],
                             .k = cc->w[0],
                             .r = cc->w[2],
                             .s = cc->w[3],
                             .stride_h = cc->p.stride[0],
                             .stride_w = cc->p.stride[1],
                             .pad_h = cc->p.padding[0],
                             .pad_w = cc->p.padding[1],
                             .dil_h = 1,
                             .dil_w = 1,
                             .groups = cc->p.groups};
        d.oh = (d.h + 2 * d.pad_h - d.r) / d.stride_h + 1;
        d.ow = (d.w + 2 * d.pad_w - d.s) / d.stride_w + 1;
        ck_assert(cpu_conv2d_is_depthwise(&d));
        int64_t nx = d.n * d.c * d.h * d.w, nw = d.c * d.r * d.s, ny = d.n * d.c * d.oh * d.ow;
        int64_t sy[1] = {ny};
        stk_tensor *tx = rand_tensor(900 + i, 4, cc->x, -1, 1),
                   *tw = rand_tensor(910 + i, 4, cc->w, -1, 1),
                   *tg = rand_tensor(920 + i, 1, sy, -1, 1);
        const float *x = stk_tensor_data(tx), *w = stk_tensor_data(tw), *gy = stk_tensor_data(tg);
        float *y = malloc(sizeof(float) * (size_t)ny), *gx = malloc(sizeof(float) * (size_t)nx),
              *gw = malloc(sizeof(float) * (size_t)nw);
        double *ry = malloc(sizeof(double) * (size_t)ny),
               *rgx = malloc(sizeof(double) * (size_t)nx),
               *rgw = malloc(sizeof(double) * (size_t)nw);
        for (int64_t j = 0; j < nx; j++) gx[j] = NAN; /* every element must be written */
        ck_assert_int_eq(cpu_conv2d_dw_forward(&d, x, w, y), STK_OK);
        ck_assert_int_eq(cpu_conv2d_dw_backward_data(&d, w, gy, gx), STK_OK);
        ck_assert_int_eq(cpu_conv2d_dw_backward_weight(&d, x, gy, gw), STK_OK);
        conv_reference(cc, x, w, NULL, d.oh, d.ow, ry);
        conv_grads_reference(cc, x, w, gy, d.oh, d.ow, rgx, rgw);
        for (int64_t j = 0; j < ny; j++)
            ck_assert_msg(fabs(y[j] - ry[j]) < 1e-4, "dw case %zu y[%lld]: %g vs %g", i,
                          (long long)j, y[j], ry[j]);
        for (int64_t j = 0; j < nx; j++)
            ck_assert_msg(fabs(gx[j] - rgx[j]) < 1e-4, "dw case %zu gx[%lld]: %g vs %g", i,
                          (long long)j, gx[j], rgx[j]);
        for (int64_t j = 0; j < nw; j++)
            ck_assert_msg(fabs(gw[j] - rgw[j]) < 1e-4, "dw case %zu gw[%lld]: %g vs %g", i,
                          (long long)j, gw[j], rgw[j]);
        free(y), free(gx), free(gw), free(ry), free(rgx), free(rgw);
        stk_tensor_release(tx), stk_tensor_release(tw), stk_tensor_release(tg);
    }
}
END_TEST

START_TEST(test_autocast_bf16_conv2d)
{
    if (!stk_cpu_bf16_isa()) {
        printf("test_autocast_bf16_conv2d: skipped, no bf16 instructions on this CPU\n");
        return;
    }
    conv_case cases[] = {
        {{2, 16, 9, 9}, {32, 16, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, false},
        {{3, 8, 10, 10}, {16, 8, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 1}, false},
        {{2, 32, 6, 6}, {16, 32, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}, false}, /* pointwise */
        {{2, 3, 12, 12}, {16, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, false}, /* a stem */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        conv_case *cc = &cases[i];
        stk_tensor *x = rand_tensor(700 + i, 4, cc->x, -1, 1),
                   *w = rand_tensor(800 + i, 4, cc->w, -1, 1), *y;
        stk_tensor_set_requires_grad(x, true);
        stk_tensor_set_requires_grad(w, true);
        stk_autocast_begin();
        ck_assert_int_eq(stk_conv2d(x, w, NULL, &cc->p, &y), STK_OK);
        int64_t oh = stk_tensor_dim(y, 2), ow = stk_tensor_dim(y, 3), ny = stk_tensor_numel(y);
        stk_tensor *gy = rand_tensor(900 + i, 4, (int64_t[]){cc->x[0], cc->w[0], oh, ow}, -1, 1);
        ck_assert_int_eq(stk_backward(y, gy, false), STK_OK);
        stk_autocast_end();
        int64_t nx = stk_tensor_numel(x), nw = stk_tensor_numel(w);
        float *xv = host_f32(x), *wv = host_f32(w), *gv = host_f32(gy);
        float *xr = bf16_rounded(x), *wr = bf16_rounded(w), *gr = bf16_rounded(gy);
        float *xa = absolute(xv, nx), *wa = absolute(wv, nw), *ga = absolute(gv, ny);
        double *exact = malloc(sizeof(double) * (size_t)(ny + nx + nw)),
               *rounded = malloc(sizeof(double) * (size_t)(ny + nx + nw)),
               *bound = malloc(sizeof(double) * (size_t)(ny + nx + nw));
        char what[64];
        float *got = host_f32(y);
        conv_reference(cc, xv, wv, NULL, oh, ow, exact);
        conv_reference(cc, xr, wr, NULL, oh, ow, rounded);
        conv_reference(cc, xa, wa, NULL, oh, ow, bound);
        snprintf(what, sizeof what, "conv case %zu forward", i);
        expect_bf16_result(what, got, rounded, exact, bound, ny, true);
        free(got);
        conv_grads_reference(cc, xv, wv, gv, oh, ow, exact, exact + nx);
        conv_grads_reference(cc, xr, wr, gr, oh, ow, rounded, rounded + nx);
        conv_grads_reference(cc, xa, wa, ga, oh, ow, bound, bound + nx);
        got = host_f32(stk_tensor_grad(x));
        snprintf(what, sizeof what, "conv case %zu backward data", i);
        expect_bf16_result(what, got, rounded, exact, bound, nx, true);
        free(got);
        got = host_f32(stk_tensor_grad(w));
        snprintf(what, sizeof what, "conv case %zu backward weights", i);
        expect_bf16_result(what, got, rounded + nx, exact + nx, bound + nx, nw, false);
        free(got);
        float *fr[] = {xv, wv, gv, xr, wr, gr, xa, wa, ga};
        for (size_t k = 0; k < sizeof fr / sizeof fr[0]; k++) free(fr[k]);
        free(exact), free(rounded), free(bound);
        stk_tensor_release(y), stk_tensor_release(gy);
        stk_tensor_release(x), stk_tensor_release(w);
    }
}
END_TEST

/* a [B, m, k] @ b [k, n] (b broadcast over the batch) in double. */
static void matmul_reference(const float *a, const float *b, int64_t batch, int64_t m, int64_t k,
                             int64_t n, double *c)
{
    for (int64_t z = 0; z < batch; z++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t q = 0; q < k; q++) s += (double)a[(z * m + i) * k + q] * b[q * n + j];
                c[(z * m + i) * n + j] = s;
            }
}

START_TEST(test_autocast_bf16_matmul)
{
    if (!stk_cpu_bf16_isa()) {
        printf("test_autocast_bf16_matmul: skipped, no bf16 instructions on this CPU\n");
        return;
    }
    /* forward a @ b; backward ga = g b^T (transposed b) and gb = a^T g over
     * all rows (transposed a): every layout the bf16 GEMM takes */
    const int64_t B = 3, M = 5, K = 40, N = 7;
    stk_tensor *a = rand_tensor(41, 3, (int64_t[]){B, M, K}, -1, 1),
               *b = rand_tensor(42, 2, (int64_t[]){K, N}, -1, 1),
               *g = rand_tensor(43, 3, (int64_t[]){B, M, N}, -1, 1), *y;
    stk_tensor_set_requires_grad(a, true);
    stk_tensor_set_requires_grad(b, true);
    stk_autocast_begin();
    ck_assert_int_eq(stk_matmul(a, b, &y), STK_OK);
    ck_assert_int_eq(stk_backward(y, g, false), STK_OK);
    stk_autocast_end();
    float *av = host_f32(a), *bv = host_f32(b), *gv = host_f32(g);
    float *ar = bf16_rounded(a), *br = bf16_rounded(b), *gr = bf16_rounded(g);
    float *aa = absolute(av, B * M * K), *ba = absolute(bv, K * N), *gabs = absolute(gv, B * M * N);
    double exact[B * M * K], rounded[B * M * K], bound[B * M * K];
    float *got = host_f32(y);
    matmul_reference(av, bv, B, M, K, N, exact);
    matmul_reference(ar, br, B, M, K, N, rounded);
    matmul_reference(aa, ba, B, M, K, N, bound);
    expect_bf16_result("matmul forward", got, rounded, exact, bound, B * M * N, false);
    free(got);
    /* ga[z, i, q] = sum_j g[z, i, j] b[q, j]: a matmul with b^T */
    float *bt[3] = {malloc(sizeof(float) * N * K), malloc(sizeof(float) * N * K),
                    malloc(sizeof(float) * N * K)};
    for (int64_t q = 0; q < K; q++)
        for (int64_t j = 0; j < N; j++) {
            bt[0][j * K + q] = bv[q * N + j];
            bt[1][j * K + q] = br[q * N + j];
            bt[2][j * K + q] = ba[q * N + j];
        }
    matmul_reference(gv, bt[0], B, M, N, K, exact);
    matmul_reference(gr, bt[1], B, M, N, K, rounded);
    matmul_reference(gabs, bt[2], B, M, N, K, bound);
    got = host_f32(stk_tensor_grad(a));
    expect_bf16_result("matmul backward a", got, rounded, exact, bound, B * M * K, false);
    free(got);
    /* gb[q, j] = sum over rows r of a[r, q] g[r, j]: (a^T) [K, B*M] @ g [B*M, N] */
    float *at[3] = {malloc(sizeof(float) * K * B * M), malloc(sizeof(float) * K * B * M),
                    malloc(sizeof(float) * K * B * M)};
    for (int64_t r = 0; r < B * M; r++)
        for (int64_t q = 0; q < K; q++) {
            at[0][q * B * M + r] = av[r * K + q];
            at[1][q * B * M + r] = ar[r * K + q];
            at[2][q * B * M + r] = aa[r * K + q];
        }
    matmul_reference(at[0], gv, 1, K, B * M, N, exact);
    matmul_reference(at[1], gr, 1, K, B * M, N, rounded);
    matmul_reference(at[2], gabs, 1, K, B * M, N, bound);
    got = host_f32(stk_tensor_grad(b));
    expect_bf16_result("matmul backward b", got, rounded, exact, bound, K * N, false);
    free(got);
    float *fr[] = {av, bv, gv, ar, br, gr, aa, ba, gabs, bt[0], bt[1], bt[2], at[0], at[1], at[2]};
    for (size_t k = 0; k < sizeof fr / sizeof fr[0]; k++) free(fr[k]);
    stk_tensor_release(y), stk_tensor_release(g);
    stk_tensor_release(a), stk_tensor_release(b);
}
END_TEST

/* ---- batch norm ----------------------------------------------------------- */

typedef struct bn_ctx {
    bool training;
    stk_tensor *rm, *rv;
} bn_ctx;

static stk_status f_bn(stk_tensor **in, void *c, stk_tensor **o)
{
    bn_ctx *b = c;
    /* running stats are updated in training: gradcheck's repeated forwards
     * must not change the eval-mode result, so eval uses fixed statistics */
    return stk_batch_norm(in[0], in[1], in[2], b->training ? NULL : b->rm,
                          b->training ? NULL : b->rv, b->training, 0.1f, 1e-5f, o);
}

START_TEST(test_batch_norm)
{
    int64_t sx[4] = {3, 2, 3, 2}, sc[1] = {2};
    stk_tensor *in[3] = {rand_tensor(1, 4, sx, -2, 2), rand_tensor(2, 1, sc, 0.5f, 1.5f),
                         rand_tensor(3, 1, sc, -1, 1)};
    stk_tensor *rm, *rv, *y;
    float zeros[2] = {0, 0}, ones[2] = {1, 1};
    ck_assert_int_eq(stk_tensor_from_host(STK_F32, 1, sc, zeros, &rm), STK_OK);
    ck_assert_int_eq(stk_tensor_from_host(STK_F32, 1, sc, ones, &rv), STK_OK);
    /* training values: per channel, mean 0 and biased variance 1 before the affine */
    ck_assert_int_eq(stk_batch_norm(in[0], NULL, NULL, rm, rv, true, 0.1f, 1e-5f, &y), STK_OK);
    float *x = host_f32(in[0]), *v = host_f32(y), *m = host_f32(rm), *var = host_f32(rv);
    for (int c = 0; c < 2; c++) {
        double s = 0, sq = 0, xs = 0, xsq = 0;
        for (int n = 0; n < 3; n++)
            for (int j = 0; j < 6; j++) {
                double a = v[(n * 2 + c) * 6 + j], b = x[(n * 2 + c) * 6 + j];
                s += a;
                sq += a * a;
                xs += b;
                xsq += b * b;
            }
        ck_assert_double_eq_tol(s / 18, 0.0, 1e-5);
        ck_assert_double_eq_tol(sq / 18, 1.0, 1e-3);
        double mean = xs / 18, unbiased = (xsq - 18 * mean * mean) / 17;
        ck_assert_double_eq_tol(m[c], 0.1 * mean, 1e-5);             /* momentum 0.1 from 0 */
        ck_assert_double_eq_tol(var[c], 0.9 + 0.1 * unbiased, 1e-4); /* from 1 */
    }
    free(x);
    free(v);
    free(m);
    free(var);
    stk_tensor_release(y);
    for (int k = 0; k < 3; k++) stk_tensor_set_requires_grad(in[k], true);
    bn_ctx train = {true, NULL, NULL}, eval = {false, rm, rv};
    gradcheck("batch_norm train", f_bn, 3, in, &train, 1e-2, 2e-2);
    gradcheck("batch_norm eval", f_bn, 3, in, &eval, 1e-2, 1e-2);
    /* 2-D input and the no-affine form */
    int64_t s2[2] = {5, 2};
    stk_tensor *x2[3] = {rand_tensor(4, 2, s2, -1, 1), NULL, NULL};
    stk_tensor_set_requires_grad(x2[0], true);
    gradcheck("batch_norm 2-D", f_bn, 3, x2, &train, 1e-2, 2e-2);
    stk_tensor_release(x2[0]);
    /* one value per channel cannot be normalised */
    int64_t s1[4] = {1, 2, 1, 1};
    stk_tensor *one = rand_tensor(5, 4, s1, 0, 1);
    ck_assert_int_eq(stk_batch_norm(one, NULL, NULL, NULL, NULL, true, 0.1f, 1e-5f, &y),
                     STK_ERR_INVALID_ARG);
    stk_tensor_release(one);
    for (int k = 0; k < 3; k++) stk_tensor_release(in[k]);
    stk_tensor_release(rm);
    stk_tensor_release(rv);
}
END_TEST

/* ---- batch norm over ranks ------------------------------------------------ */

/* a world of one: the all-reduce leaves the sums as they are */
static stk_status sum_alone(void *ctx, float *buf, size_t n)
{
    (void)ctx, (void)buf, (void)n;
    return STK_OK;
}

static stk_status f_bn_sync(stk_tensor **in, void *c, stk_tensor **o)
{
    (void)c;
    stk_allreduce ar = {sum_alone, NULL};
    return stk_batch_norm_sync(in[0], in[1], in[2], NULL, NULL, 0.1f, 1e-5f, &ar, o);
}

/* Two "ranks" as two threads of this process: each puts its buffer in its
 * slot, and after a barrier every one takes the sum of both. */
typedef struct thread_pair {
    pthread_barrier_t barrier;
    float slot[2][64];
} thread_pair;

typedef struct pair_rank {
    thread_pair *pair;
    int rank;
    stk_tensor *x, *gamma, *beta, *w, *rm, *rv; /* this rank's half of the batch */
    stk_tensor *y;                              /* retained */
} pair_rank;

static stk_status sum_pair(void *ctx, float *buf, size_t n)
{
    pair_rank *r = ctx;
    ck_assert_uint_le(n, 64);
    memcpy(r->pair->slot[r->rank], buf, n * sizeof *buf);
    pthread_barrier_wait(&r->pair->barrier);
    for (size_t i = 0; i < n; i++) buf[i] = r->pair->slot[0][i] + r->pair->slot[1][i];
    pthread_barrier_wait(&r->pair->barrier);
    return STK_OK;
}

/* y = bn(x) (synced when ar), loss = sum(y * w), backward */
static void bn_step(stk_tensor *x, stk_tensor *gamma, stk_tensor *beta, stk_tensor *w,
                    stk_tensor *rm, stk_tensor *rv, const stk_allreduce *ar, stk_tensor **y_out)
{
    stk_scope *s;
    ck_assert_int_eq(stk_scope_begin(&s), STK_OK);
    stk_tensor *y, *yw, *loss;
    stk_status st = ar ? stk_batch_norm_sync(x, gamma, beta, rm, rv, 0.1f, 1e-5f, ar, &y)
                       : stk_batch_norm(x, gamma, beta, rm, rv, true, 0.1f, 1e-5f, &y);
    ck_assert_msg(st == STK_OK, "%s", stk_last_error());
    ck_assert_int_eq(stk_mul(y, w, &yw), STK_OK);
    ck_assert_int_eq(stk_sum(yw, 0, NULL, false, &loss), STK_OK);
    ck_assert_int_eq(stk_backward(loss, NULL, false), STK_OK);
    stk_tensor_retain(y);
    *y_out = y;
    stk_scope_end(s);
}

static void *pair_main(void *p)
{
    pair_rank *r = p;
    stk_allreduce ar = {sum_pair, r};
    bn_step(r->x, r->gamma, r->beta, r->w, r->rm, r->rv, &ar, &r->y);
    return NULL;
}

static void expect_near(const char *what, const float *a, const float *b, int64_t n, double tol)
{
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)a[i] - b[i]) <= tol * (1 + fabs((double)b[i])),
                      "%s[%lld]: %g against %g", what, (long long)i, a[i], b[i]);
}

static stk_tensor *leaf(uint64_t seed, int ndim, const int64_t *shape, float lo, float hi)
{
    stk_tensor *t = rand_tensor(seed, ndim, shape, lo, hi);
    stk_tensor_set_requires_grad(t, true);
    return t;
}

static stk_tensor *filled(int64_t c, float v)
{
    stk_tensor *t;
    ck_assert_int_eq(stk_tensor_zeros(STK_F32, 1, &c, &t), STK_OK);
    ck_assert_int_eq(stk_tensor_fill(t, v), STK_OK);
    return t;
}

START_TEST(test_batch_norm_sync)
{
    /* alone: the backward formula against finite differences */
    int64_t sx[4] = {3, 2, 3, 2}, sc[1] = {2};
    stk_tensor *in[3] = {leaf(1, 4, sx, -2, 2), leaf(2, 1, sc, 0.5f, 1.5f), leaf(3, 1, sc, -1, 1)};
    gradcheck("batch_norm_sync alone", f_bn_sync, 3, in, NULL, 1e-2, 2e-2);
    for (int k = 0; k < 3; k++) stk_tensor_release(in[k]);

    /* two ranks with half a batch each against one batch norm over the whole:
     * outputs, input gradients and running statistics equal; the gamma and
     * beta gradients of the ranks add up to the whole batch's */
    enum { C = 3 };
    int64_t full[4] = {8, C, 4, 5}, half[4] = {4, C, 4, 5}, c1 = C;
    stk_tensor *x = leaf(4, 4, full, -1, 3), *w = rand_tensor(5, 4, full, -1, 1);
    stk_tensor *gamma = leaf(6, 1, &c1, 0.5f, 1.5f), *beta = leaf(7, 1, &c1, -1, 1);
    stk_tensor *rm = filled(C, 0), *rv = filled(C, 1), *y;
    bn_step(x, gamma, beta, w, rm, rv, NULL, &y);
    thread_pair pair;
    pthread_barrier_init(&pair.barrier, NULL, 2);
    pair_rank ranks[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        ranks[r] = (pair_rank){.pair = &pair, .rank = r, .rm = filled(C, 0), .rv = filled(C, 1)};
        stk_tensor *xs, *ws;
        ck_assert_int_eq(stk_narrow(x, 0, 4 * r, 4, &xs), STK_OK);
        ck_assert_int_eq(stk_narrow(w, 0, 4 * r, 4, &ws), STK_OK);
        ck_assert_int_eq(stk_detach(xs, &ranks[r].x), STK_OK); /* a leaf of its own */
        ck_assert_int_eq(stk_contiguous(ws, &ranks[r].w), STK_OK);
        stk_tensor_set_requires_grad(ranks[r].x, true);
        ranks[r].gamma = leaf(6, 1, &c1, 0.5f, 1.5f);
        ranks[r].beta = leaf(7, 1, &c1, -1, 1);
        stk_tensor_release(xs);
        stk_tensor_release(ws);
        ck_assert_int_eq(pthread_create(&th[r], NULL, pair_main, &ranks[r]), 0);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&pair.barrier);
    int64_t hn = stk_tensor_numel(x) / 2;
    float *yf = host_f32(y), *gx = host_f32(stk_tensor_grad(x));
    float *gg = host_f32(stk_tensor_grad(gamma)), *gb = host_f32(stk_tensor_grad(beta));
    float *rmf = host_f32(rm), *rvf = host_f32(rv), ggs[C] = {0}, gbs[C] = {0};
    for (int r = 0; r < 2; r++) {
        pair_rank *k = &ranks[r];
        ck_assert(eng_shape_numel(4, half) == hn);
        float *yr = host_f32(k->y), *gxr = host_f32(stk_tensor_grad(k->x));
        float *ggr = host_f32(stk_tensor_grad(k->gamma)), *gbr = host_f32(stk_tensor_grad(k->beta));
        float *rmr = host_f32(k->rm), *rvr = host_f32(k->rv);
        expect_near("y", yr, yf + r * hn, hn, 1e-5);
        expect_near("dx", gxr, gx + r * hn, hn, 1e-4);
        expect_near("running_mean", rmr, rmf, C, 1e-6);
        expect_near("running_var", rvr, rvf, C, 1e-6);
        for (int c = 0; c < C; c++) ggs[c] += ggr[c], gbs[c] += gbr[c];
        free(yr), free(gxr), free(ggr), free(gbr), free(rmr), free(rvr);
        stk_tensor *own[] = {k->x, k->gamma, k->beta, k->w, k->rm, k->rv, k->y};
        for (size_t i = 0; i < sizeof own / sizeof *own; i++) stk_tensor_release(own[i]);
    }
    expect_near("dgamma", ggs, gg, C, 1e-4);
    expect_near("dbeta", gbs, gb, C, 1e-5);
    free(yf), free(gx), free(gg), free(gb), free(rmf), free(rvf);
    stk_tensor *mine[] = {x, w, gamma, beta, rm, rv, y};
    for (size_t i = 0; i < sizeof mine / sizeof *mine; i++) stk_tensor_release(mine[i]);

    /* refusals */
    stk_tensor *bad = rand_tensor(8, 1, sc, 0, 1), *out;
    stk_allreduce ar = {sum_alone, NULL};
    ck_assert_int_eq(stk_batch_norm_sync(bad, NULL, NULL, NULL, NULL, 0.1f, 1e-5f, &ar, &out),
                     STK_ERR_INVALID_ARG);
    int64_t s1[4] = {1, 2, 1, 1};
    stk_tensor *one = rand_tensor(9, 4, s1, 0, 1);
    ck_assert_int_eq(stk_batch_norm_sync(one, NULL, NULL, NULL, NULL, 0.1f, 1e-5f, &ar, &out),
                     STK_ERR_INVALID_ARG);
    ck_assert(strstr(stk_last_error(), "more than one value per channel"));
    stk_tensor_release(bad);
    stk_tensor_release(one);
}
END_TEST

/* ---- batch norm with its activation fused --------------------------------- */

typedef struct bn_act_run {
    float *y, *gx, *gg, *gb, *rm, *rv;
    const char *node; /* the op that made y */
} bn_act_run;

/* y = act(bn(x)) by stk_batch_norm_act (fused) or by the two ops; loss =
 * sum(y * w); returns y, the gradients and the running statistics. */
static bn_act_run bn_act_step(stk_tensor *x, stk_tensor *gamma, stk_tensor *beta, stk_tensor *w,
                              bool training, stk_bn_act act, bool fused)
{
    stk_scope *s;
    ck_assert_int_eq(stk_scope_begin(&s), STK_OK);
    int64_t c = stk_tensor_dim(x, 1);
    float zeros[8] = {0}, ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    stk_tensor *rm, *rv, *y, *yw, *loss;
    ck_assert_int_eq(stk_tensor_from_host(STK_F32, 1, &c, zeros, &rm), STK_OK);
    ck_assert_int_eq(stk_tensor_from_host(STK_F32, 1, &c, ones, &rv), STK_OK);
    for (stk_tensor *t = x; t; t = t == x ? gamma : t == gamma ? beta : NULL)
        stk_tensor_zero_grad(t);
    stk_status st;
    if (fused) {
        st = stk_batch_norm_act(x, gamma, beta, rm, rv, training, 0.1f, 1e-5f, act, &y);
    } else {
        stk_tensor *h;
        st = stk_batch_norm(x, gamma, beta, rm, rv, training, 0.1f, 1e-5f, &h);
        if (st == STK_OK) st = act == STK_BN_ACT_RELU ? stk_relu(h, &y) : stk_relu6(h, &y);
    }
    ck_assert_msg(st == STK_OK, "%s", stk_last_error());
    ck_assert_int_eq(stk_mul(y, w, &yw), STK_OK);
    ck_assert_int_eq(stk_sum(yw, 0, NULL, false, &loss), STK_OK);
    ck_assert_int_eq(stk_backward(loss, NULL, false), STK_OK);
    bn_act_run r = {host_f32(y),
                    host_f32(stk_tensor_grad(x)),
                    host_f32(stk_tensor_grad(gamma)),
                    host_f32(stk_tensor_grad(beta)),
                    host_f32(rm),
                    host_f32(rv),
                    eng_node_name(y->grad_fn)};
    stk_scope_end(s);
    return r;
}

static void bn_act_run_free(bn_act_run *r)
{
    free(r->y), free(r->gx), free(r->gg), free(r->gb), free(r->rm), free(r->rv);
}

static void expect_same_floats(const char *what, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&a[i], &b[i], sizeof *a) == 0, "%s[%lld]: %.9g against %.9g", what,
                      (long long)i, a[i], b[i]);
}

static stk_status f_bn_act(stk_tensor **in, void *c, stk_tensor **o)
{
    return stk_batch_norm_act(in[0], in[1], in[2], NULL, NULL, true, 0.1f, 1e-5f, *(stk_bn_act *)c,
                              o);
}

/* The fused op is the two ops, to the bit: forward, the three gradients and
 * the running statistics (training, where the CPU fuses them; eval, where
 * it runs the two ops); ReLU6 with values past 6. And its gradients
 * against finite differences. */
START_TEST(test_batch_norm_act)
{
    int64_t sx[4] = {4, 3, 5, 6}, sc[1] = {3};
    stk_tensor *x = leaf(31, 4, sx, -2, 2), *gamma = leaf(32, 1, sc, 0.5f, 4.f),
               *beta = leaf(33, 1, sc, -1.f, 3.f), *w = rand_tensor(34, 4, sx, -1, 1);
    int64_t n = 4 * 3 * 5 * 6;
    const char *names[] = {"", "batch_norm_relu", "batch_norm_relu6"};
    for (int a = STK_BN_ACT_RELU; a <= STK_BN_ACT_RELU6; a++)
        for (int training = 1; training >= 0; training--) {
            bn_act_run f = bn_act_step(x, gamma, beta, w, training, (stk_bn_act)a, true);
            bn_act_run u = bn_act_step(x, gamma, beta, w, training, (stk_bn_act)a, false);
            /* the CPU fuses in training; eval runs the two ops */
            ck_assert_str_eq(f.node, training ? names[a] : a == STK_BN_ACT_RELU ? "relu" : "relu6");
            int64_t zeroed = 0, capped = 0;
            for (int64_t i = 0; i < n; i++) {
                zeroed += f.y[i] == 0.f;
                capped += f.y[i] == 6.f;
            }
            ck_assert_msg(zeroed > n / 10 && (a == STK_BN_ACT_RELU || capped > n / 20),
                          "the inputs reach both sides of the activation's kinks");
            expect_same_floats("y", f.y, u.y, n);
            expect_same_floats("grad x", f.gx, u.gx, n);
            expect_same_floats("grad gamma", f.gg, u.gg, 3);
            expect_same_floats("grad beta", f.gb, u.gb, 3);
            expect_same_floats("running mean", f.rm, u.rm, 3);
            expect_same_floats("running var", f.rv, u.rv, 3);
            bn_act_run_free(&f);
            bn_act_run_free(&u);
        }
    /* finite differences (x kept off the kinks: few elements sit near them
     * and gradcheck samples each of these small inputs in full) */
    int64_t sm[4] = {3, 2, 2, 3}, c2[1] = {2};
    stk_tensor *in[3] = {leaf(41, 4, sm, -2, 2), leaf(42, 1, c2, 0.5f, 1.5f),
                         leaf(43, 1, c2, -0.2f, 0.2f)};
    stk_bn_act relu = STK_BN_ACT_RELU;
    gradcheck("batch_norm_relu", f_bn_act, 3, in, &relu, 1e-3, 2e-2);
    for (int k = 0; k < 3; k++) stk_tensor_release(in[k]);
    stk_tensor *bad;
    ck_assert_int_eq(
        stk_batch_norm_act(x, gamma, beta, NULL, NULL, true, 0.1f, 1e-5f, (stk_bn_act)7, &bad),
        STK_ERR_INVALID_ARG);
    stk_tensor_release(x), stk_tensor_release(gamma), stk_tensor_release(beta);
    stk_tensor_release(w);
}
END_TEST

/* ---- pooling -------------------------------------------------------------- */

typedef struct pool_ctx {
    int kind, k, s, p;
    bool cip;
} pool_ctx;

static stk_status f_pool(stk_tensor **in, void *c, stk_tensor **o)
{
    pool_ctx *p = c;
    switch (p->kind) {
    case 0: return stk_max_pool2d(in[0], p->k, p->s, p->p, o);
    case 1: return stk_avg_pool2d(in[0], p->k, p->s, p->p, p->cip, o);
    case 2: return stk_adaptive_avg_pool2d(in[0], p->k, p->k, o);
    default: return stk_global_avg_pool2d(in[0], o);
    }
}

START_TEST(test_pooling)
{
    /* distinct values spaced 0.1 apart so max pooling has no near-ties */
    int64_t sx[4] = {2, 2, 6, 6};
    float v[144];
    stk_rng r;
    stk_rng_init(&r, 5, 0, 0);
    for (int i = 0; i < 144; i++) v[i] = (float)i * 0.1f;
    for (int i = 143; i > 0; i--) { /* shuffle */
        int j = (int)stk_rng_below(&r, (uint32_t)i + 1);
        float t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    stk_tensor *x;
    ck_assert_int_eq(stk_tensor_from_host(STK_F32, 4, sx, v, &x), STK_OK);
    stk_tensor_set_requires_grad(x, true);
    pool_ctx cases[] = {
        {0, 2, 2, 0, false}, {0, 3, 2, 1, false}, {1, 2, 2, 0, true},  {1, 3, 2, 1, true},
        {1, 3, 2, 1, false}, {2, 3, 0, 0, false}, {2, 1, 0, 0, false}, {3, 0, 0, 0, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "pool case %zu", i);
        gradcheck(name, f_pool, 1, &x, &cases[i], 1e-2, 1e-2);
    }
    /* max pool values: the 2x2 maximum; avg with padding divides per PyTorch */
    stk_tensor *y;
    ck_assert_int_eq(stk_max_pool2d(x, 2, 0, 0, &y), STK_OK);
    float *yv = host_f32(y);
    for (int p = 0; p < 4; p++)
        for (int oy = 0; oy < 3; oy++)
            for (int ox = 0; ox < 3; ox++) {
                float m = -1;
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 2; b++)
                        m = fmaxf(m, v[p * 36 + (oy * 2 + a) * 6 + ox * 2 + b]);
                ck_assert_float_eq(yv[p * 9 + oy * 3 + ox], m);
            }
    free(yv);
    stk_tensor_release(y);
    /* 2x2 windows (the CPU's branch-free path): ties go to the first in
     * window order, the first NaN wins, as PyTorch's max_pool2d */
    int64_t s4[4] = {1, 1, 2, 8};
    float tn[16] = {1, 5, 2, NAN, NAN, 7, -1, -3, 5, 2, 9, 1, NAN, 1, -0.5f, -0.5f};
    stk_tensor *xt, *g4;
    ck_assert_int_eq(stk_tensor_from_host(STK_F32, 4, s4, tn, &xt), STK_OK);
    stk_tensor_set_requires_grad(xt, true);
    ck_assert_int_eq(stk_max_pool2d(xt, 2, 0, 0, &y), STK_OK);
    yv = host_f32(y);
    ck_assert_float_eq(yv[0], 5.f);
    ck_assert(isnan(yv[1]) && isnan(yv[2]));
    ck_assert_float_eq(yv[3], -0.5f);
    free(yv);
    int64_t s4y[4] = {1, 1, 1, 4};
    ck_assert_int_eq(stk_tensor_zeros(STK_F32, 4, s4y, &g4), STK_OK);
    ck_assert_int_eq(stk_tensor_fill(g4, 1.0), STK_OK);
    ck_assert_int_eq(stk_backward(y, g4, false), STK_OK);
    float *gv = host_f32(stk_tensor_grad(xt));
    for (int i = 0; i < 16; i++) /* the gradient lands on each window's winner */
        ck_assert_msg(gv[i] == (i == 1 || i == 3 || i == 4 || i == 14 ? 1.f : 0.f),
                      "2x2 max pool: gradient %g at %d", gv[i], i);
    free(gv);
    stk_tensor_release(g4);
    stk_tensor_release(y);
    stk_tensor_release(xt);
    int64_t s3[4] = {1, 1, 3, 3};
    float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    stk_tensor *o;
    ck_assert_int_eq(stk_tensor_from_host(STK_F32, 4, s3, ones, &o), STK_OK);
    ck_assert_int_eq(stk_avg_pool2d(o, 3, 1, 1, true, &y), STK_OK);
    yv = host_f32(y);
    ck_assert_float_eq_tol(yv[0], 4.f / 9.f, 1e-6f); /* corner: 4 of 9 inside */
    ck_assert_float_eq_tol(yv[4], 1.f, 1e-6f);
    free(yv);
    stk_tensor_release(y);
    ck_assert_int_eq(stk_avg_pool2d(o, 3, 1, 1, false, &y), STK_OK);
    yv = host_f32(y);
    ck_assert_float_eq_tol(yv[0], 1.f, 1e-6f);
    free(yv);
    stk_tensor_release(y);
    ck_assert_int_eq(stk_adaptive_avg_pool2d(o, 2, 2, &y), STK_ERR_UNSUPPORTED);
    stk_tensor_release(o);
    stk_tensor_release(x);
}
END_TEST

/* ---- softmax and losses --------------------------------------------------- */

static stk_status f_softmax(stk_tensor **in, void *c, stk_tensor **o)
{
    return stk_softmax(in[0], *(int *)c, o);
}
static stk_status f_log_softmax(stk_tensor **in, void *c, stk_tensor **o)
{
    return stk_log_softmax(in[0], *(int *)c, o);
}

typedef struct ce_ctx {
    stk_tensor *labels;
    float smoothing;
} ce_ctx;

static stk_status f_ce(stk_tensor **in, void *c, stk_tensor **o)
{
    ce_ctx *ce = c;
    return stk_cross_entropy(in[0], ce->labels, ce->smoothing, o);
}
static stk_status f_mse(stk_tensor **in, void *c, stk_tensor **o)
{
    (void)c;
    return stk_mse_loss(in[0], in[1], o);
}

START_TEST(test_softmax_and_losses)
{
    int64_t s[3] = {2, 4, 3};
    stk_tensor *x = rand_tensor(7, 3, s, -2, 2);
    stk_tensor_set_requires_grad(x, true);
    int last = -1, mid = 1;
    gradcheck("softmax last", f_softmax, 1, &x, &last, 1e-2, 1e-2);
    gradcheck("softmax dim 1", f_softmax, 1, &x, &mid, 1e-2, 1e-2);
    gradcheck("log_softmax last", f_log_softmax, 1, &x, &last, 1e-2, 1e-2);
    gradcheck("log_softmax dim 1", f_log_softmax, 1, &x, &mid, 1e-2, 1e-2);
    /* softmax along dim 1 sums to 1 there */
    stk_tensor *y;
    ck_assert_int_eq(stk_softmax(x, 1, &y), STK_OK);
    float *v = host_f32(y);
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 3; c++) {
            float t = 0;
            for (int b = 0; b < 4; b++) t += v[(a * 4 + b) * 3 + c];
            ck_assert_float_eq_tol(t, 1.f, 1e-6f);
        }
    free(v);
    stk_tensor_release(y);
    stk_tensor_release(x);

    /* cross-entropy: value against the formula, gradients, smoothing */
    int64_t sl[2] = {4, 5}, sn[1] = {4};
    int32_t lab[4] = {0, 3, 4, 1};
    stk_tensor *logits = rand_tensor(8, 2, sl, -3, 3), *labels, *loss;
    ck_assert_int_eq(stk_tensor_from_host(STK_I32, 1, sn, lab, &labels), STK_OK);
    ck_assert_int_eq(stk_cross_entropy(logits, labels, 0.f, &loss), STK_OK);
    float *lv = host_f32(logits);
    double ref = 0, ref_s = 0;
    for (int r = 0; r < 4; r++) {
        double mx = -1e30, se = 0;
        for (int c = 0; c < 5; c++) mx = fmax(mx, lv[r * 5 + c]);
        for (int c = 0; c < 5; c++) se += exp(lv[r * 5 + c] - mx);
        double lse = mx + log(se), all = 0;
        for (int c = 0; c < 5; c++) all += lse - lv[r * 5 + c];
        ref += lse - lv[r * 5 + lab[r]];
        ref_s += 0.9 * (lse - lv[r * 5 + lab[r]]) + 0.1 * all / 5;
    }
    free(lv);
    ck_assert_double_eq_tol(stk_tensor_item(loss), ref / 4, 1e-5);
    stk_tensor_release(loss);
    ck_assert_int_eq(stk_cross_entropy(logits, labels, 0.1f, &loss), STK_OK);
    ck_assert_double_eq_tol(stk_tensor_item(loss), ref_s / 4, 1e-5);
    stk_tensor_release(loss);
    stk_tensor_set_requires_grad(logits, true);
    ce_ctx plain = {labels, 0.f}, smooth = {labels, 0.2f};
    gradcheck("cross_entropy", f_ce, 1, &logits, &plain, 1e-2, 1e-2);
    gradcheck("cross_entropy smoothing", f_ce, 1, &logits, &smooth, 1e-2, 1e-2);
    /* a label out of range names the row */
    ((int32_t *)stk_tensor_data(labels))[2] = 5;
    ck_assert_int_eq(stk_cross_entropy(logits, labels, 0.f, &loss), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "row 2"));
    stk_tensor_release(labels);
    stk_tensor_release(logits);

    stk_tensor *m[2] = {rand_tensor(9, 2, sl, -1, 1), rand_tensor(10, 2, sl, -1, 1)};
    stk_tensor_set_requires_grad(m[0], true);
    stk_tensor_set_requires_grad(m[1], true);
    gradcheck("mse", f_mse, 2, m, NULL, 1e-2, 1e-2);
    stk_tensor_release(m[0]);
    stk_tensor_release(m[1]);
}
END_TEST

/* ---- cat, dropout, input ---------------------------------------------------- */

static stk_status f_cat(stk_tensor **in, void *c, stk_tensor **o)
{
    return stk_cat(3, in, *(int *)c, o);
}
static stk_status f_dropout(stk_tensor **in, void *c, stk_tensor **o)
{
    (void)c;
    return stk_dropout(in[0], 0.3f, true, 1234, 5, o);
}

START_TEST(test_cat_dropout_input)
{
    int64_t a[3] = {2, 1, 3}, b[3] = {2, 2, 3}, c[3] = {2, 3, 3};
    stk_tensor *in[3] = {rand_tensor(1, 3, a, -1, 1), rand_tensor(2, 3, b, -1, 1),
                         rand_tensor(3, 3, c, -1, 1)};
    for (int i = 0; i < 3; i++) stk_tensor_set_requires_grad(in[i], true);
    int dim = 1;
    gradcheck("cat", f_cat, 3, in, &dim, 1e-2, 1e-3);
    stk_tensor *y;
    ck_assert_int_eq(stk_cat(3, in, 1, &y), STK_OK);
    ck_assert_int_eq(stk_tensor_dim(y, 1), 6);
    float *v = host_f32(y), *v1 = host_f32(in[1]);
    ck_assert_float_eq(v[1 * 3 + 0], v1[0]); /* [0, 1, 0] comes from input 1's [0, 0, 0] */
    free(v);
    free(v1);
    stk_tensor_release(y);
    int d0 = 0;
    ck_assert_int_eq(stk_cat(3, in, d0, &y), STK_ERR_INVALID_ARG);
    for (int i = 0; i < 3; i++) stk_tensor_release(in[i]);

    int64_t s[1] = {4000};
    stk_tensor *x = rand_tensor(4, 1, s, 1, 2), *z, *z2;
    stk_tensor_set_requires_grad(x, true);
    ck_assert_int_eq(stk_dropout(x, 0.3f, true, 1234, 5, &z), STK_OK);
    ck_assert_int_eq(stk_dropout(x, 0.3f, true, 1234, 5, &z2), STK_OK);
    float *zv = host_f32(z), *z2v = host_f32(z2), *xv = host_f32(x);
    int dropped = 0;
    for (int i = 0; i < 4000; i++) {
        ck_assert_float_eq(zv[i], z2v[i]); /* same seed, same mask */
        if (zv[i] == 0.f)
            dropped++;
        else
            ck_assert_float_eq_tol(zv[i], xv[i] / 0.7f, 1e-6f);
    }
    ck_assert_int_gt(dropped, 1100); /* 30% of 4000 = 1200, +-4 sigma */
    ck_assert_int_lt(dropped, 1300);
    free(zv);
    free(z2v);
    free(xv);
    stk_tensor_release(z);
    stk_tensor_release(z2);
    stk_tensor_release(x);
    int64_t s20[1] = {20};
    x = rand_tensor(5, 1, s20, 1, 2);
    stk_tensor_set_requires_grad(x, true);
    gradcheck("dropout", f_dropout, 1, &x, NULL, 1e-2, 1e-3);
    stk_tensor_release(x);

    /* input op: u8 NHWC -> normalised NCHW */
    int64_t sp[4] = {1, 2, 2, 3};
    uint8_t px[12] = {0, 128, 255, 10, 20, 30, 40, 50, 60, 70, 80, 90};
    float mean[3] = {0.5f, 0.4f, 0.3f}, std[3] = {0.2f, 0.25f, 0.5f};
    stk_tensor *p, *q;
    ck_assert_int_eq(stk_tensor_from_host(STK_U8, 4, sp, px, &p), STK_OK);
    ck_assert_int_eq(stk_input_u8_nhwc(p, mean, std, &q), STK_OK);
    ck_assert_int_eq(stk_tensor_dim(q, 1), 3);
    float *qv = host_f32(q);
    for (int ch = 0; ch < 3; ch++)
        for (int j = 0; j < 4; j++)
            ck_assert_float_eq_tol(qv[ch * 4 + j], (px[j * 3 + ch] / 255.f - mean[ch]) / std[ch],
                                   1e-5f);
    free(qv);
    stk_tensor_release(q);
    std[1] = 0.f;
    ck_assert_int_eq(stk_input_u8_nhwc(p, mean, std, &q), STK_ERR_INVALID_ARG);
    stk_tensor_release(p);
}
END_TEST

/* ---- the vectorisable exp and erf of kernels/scalar_math.h ---------------------------- */

START_TEST(test_fast_exp_erf)
{
    double worst_exp = 0, worst_erf = 0;
    for (int i = -1800000; i <= 1800000; i++) {
        float x = (float)i * 4.9e-5f; /* -88.2 .. 88.2 */
        double want = exp((double)x), got = stk_expf(x);
        if (want > 1.2e-38) worst_exp = fmax(worst_exp, fabs(got - want) / want);
        if (fabsf(x) < 6.f) worst_erf = fmax(worst_erf, fabs(stk_erff(x) - erf((double)x)));
    }
    ck_assert_msg(worst_exp < 3e-7, "stk_expf: worst relative error %g", worst_exp);
    ck_assert_msg(worst_erf < 7e-7, "stk_erff: worst absolute error %g", worst_erf);
    ck_assert(isinf(stk_expf(100.f)) && stk_expf(100.f) > 0);
    ck_assert_float_eq(stk_expf(-100.f), 0.f);
    ck_assert(isnan(stk_expf(NAN)));
    ck_assert(isinf(stk_expf(INFINITY)));
    ck_assert_float_eq(stk_expf(-INFINITY), 0.f);
    ck_assert_float_eq(stk_erff(10.f), 1.f);
    ck_assert_float_eq(stk_erff(-10.f), -1.f);
}
END_TEST

/* ---- issue 49's ops: activations, layer norm, drop path ----------------------------- */

static stk_status f_act(stk_tensor **in, void *c, stk_tensor **o)
{
    return ((stk_status(*)(stk_tensor *, stk_tensor **))c)(in[0], o);
}
static stk_status f_ln(stk_tensor **in, void *c, stk_tensor **o)
{
    return (*(int *)c ? stk_layer_norm2d : stk_layer_norm)(in[0], in[1], in[2], 1e-5f, o);
}

START_TEST(test_new_activations_layer_norm)
{
    /* x kept off the kinks of hardsigmoid and hardswish (+-3): values in
     * (-4.5, 4.5) at least 0.05 from them, eps 1e-3 */
    int64_t s[2] = {4, 9};
    stk_tensor *x = rand_tensor(11, 2, s, -4.5f, 4.5f);
    float *xv = stk_tensor_data(x);
    for (int i = 0; i < 36; i++)
        if (fabsf(fabsf(xv[i]) - 3.f) < 0.05f) xv[i] += 0.1f;
    stk_tensor_set_requires_grad(x, true);
    gradcheck("silu", f_act, 1, &x, (void *)stk_silu, 1e-3, 1e-2);
    gradcheck("hardsigmoid", f_act, 1, &x, (void *)stk_hardsigmoid, 1e-3, 1e-2);
    gradcheck("hardswish", f_act, 1, &x, (void *)stk_hardswish, 1e-3, 1e-2);
    stk_tensor_release(x);

    int last = 0, chan = 1;
    int64_t xs[3] = {3, 2, 6}, cs[1] = {6}, x4[4] = {2, 5, 3, 2}, c4[1] = {5};
    stk_tensor *in[3] = {rand_tensor(12, 3, xs, -2, 2), rand_tensor(13, 1, cs, 0.5f, 1.5f),
                         rand_tensor(14, 1, cs, -1, 1)};
    for (int i = 0; i < 3; i++) stk_tensor_set_requires_grad(in[i], true);
    gradcheck("layer_norm", f_ln, 3, in, &last, 1e-2, 2e-2);
    stk_tensor *plain[3] = {in[0], NULL, NULL};
    gradcheck("layer_norm no affine", f_ln, 3, plain, &last, 1e-2, 2e-2);
    for (int i = 0; i < 3; i++) stk_tensor_release(in[i]);
    stk_tensor *in4[3] = {rand_tensor(15, 4, x4, -2, 2), rand_tensor(16, 1, c4, 0.5f, 1.5f),
                          rand_tensor(17, 1, c4, -1, 1)};
    for (int i = 0; i < 3; i++) stk_tensor_set_requires_grad(in4[i], true);
    gradcheck("layer_norm2d", f_ln, 3, in4, &chan, 1e-2, 2e-2);
    /* bad input: a weight of the wrong size, eps 0, a 3-D input to the 2d form */
    stk_tensor *y;
    ck_assert_int_eq(stk_layer_norm(in4[0], in4[1], NULL, 1e-5f, &y), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "layer_norm: weight"));
    ck_assert_int_eq(stk_layer_norm2d(in4[0], in4[1], in4[2], 0.f, &y), STK_ERR_INVALID_ARG);
    int64_t x3[3] = {2, 5, 3};
    stk_tensor *t3 = rand_tensor(18, 3, x3, -1, 1);
    ck_assert_int_eq(stk_layer_norm2d(t3, NULL, NULL, 1e-5f, &y), STK_ERR_INVALID_ARG);
    stk_tensor_release(t3);
    for (int i = 0; i < 3; i++) stk_tensor_release(in4[i]);
}
END_TEST

START_TEST(test_drop_path)
{
    int64_t s[4] = {64, 3, 2, 2};
    stk_tensor *x = rand_tensor(21, 4, s, 0.5f, 1.5f), *y, *y2;
    stk_tensor_set_requires_grad(x, true);
    stk_scope *sc;
    ck_assert_int_eq(stk_scope_begin(&sc), STK_OK);
    ck_assert_int_eq(stk_drop_path(x, 0.25f, true, 7, 3, &y), STK_OK);
    ck_assert_int_eq(stk_drop_path(x, 0.25f, true, 7, 3, &y2), STK_OK);
    float *xv = stk_tensor_data(x), *yv = host_f32(y), *y2v = host_f32(y2);
    int dropped = 0;
    for (int n = 0; n < 64; n++) { /* a sample is dropped whole, or kept and scaled */
        bool zero = yv[n * 12] == 0.f;
        dropped += zero;
        for (int i = n * 12; i < n * 12 + 12; i++) {
            ck_assert_float_eq_tol(yv[i], zero ? 0.f : xv[i] / 0.75f, 1e-6f);
            ck_assert_float_eq(yv[i], y2v[i]); /* the same stream, the same mask */
        }
    }
    ck_assert_int_gt(dropped, 4); /* ~16 of 64 expected */
    ck_assert_int_lt(dropped, 32);
    ck_assert_int_eq(stk_backward(y, NULL, false), STK_ERR_INVALID_ARG); /* not a scalar */
    stk_tensor *r, *loss;
    ck_assert_int_eq(stk_sum(y, 0, NULL, false, &loss), STK_OK);
    ck_assert_int_eq(stk_backward(loss, NULL, false), STK_OK);
    float *g = host_f32(stk_tensor_grad(x));
    for (int i = 0; i < 64 * 12; i++) ck_assert_float_eq_tol(g[i], yv[i] / xv[i], 1e-5f);
    free(g), free(yv), free(y2v);
    /* eval: the identity */
    ck_assert_int_eq(stk_drop_path(x, 0.25f, false, 7, 3, &r), STK_OK);
    float *rv = host_f32(r);
    for (int i = 0; i < 64 * 12; i++) ck_assert_float_eq(rv[i], xv[i]);
    free(rv);
    ck_assert_int_eq(stk_drop_path(x, 1.f, true, 7, 3, &r), STK_ERR_INVALID_ARG);
    stk_scope_end(sc);
    stk_tensor_release(x);
}
END_TEST

/* ---- packed self-attention ----------------------------------------------------- */

static stk_status f_attention(stk_tensor **in, void *c, stk_tensor **o)
{
    return stk_attention_packed(in[0], *(int *)c, o);
}

/* The same from views, matmuls and softmax (the composition the op replaces). */
static stk_status attention_composed(stk_tensor *qkv, int heads, stk_tensor **out)
{
    int64_t n = stk_tensor_dim(qkv, 0), s = stk_tensor_dim(qkv, 1), d = stk_tensor_dim(qkv, 2) / 3;
    int64_t shape5[5] = {n, s, 3, heads, d / heads}, back[3] = {n, s, d};
    static const int perm5[5] = {2, 0, 3, 1, 4}, perm4[4] = {0, 2, 1, 3};
    stk_tensor *v5, *p5, *part[3], *kt, *sc, *ss, *at, *o, *op;
    ck_assert_int_eq(stk_view(qkv, 5, shape5, &v5), STK_OK);
    ck_assert_int_eq(stk_permute(v5, perm5, &p5), STK_OK);
    for (int i = 0; i < 3; i++) {
        stk_tensor *one;
        ck_assert_int_eq(stk_narrow(p5, 0, i, 1, &one), STK_OK);
        ck_assert_int_eq(stk_squeeze(one, 0, &part[i]), STK_OK);
    }
    ck_assert_int_eq(stk_transpose(part[1], 2, 3, &kt), STK_OK);
    ck_assert_int_eq(stk_matmul(part[0], kt, &sc), STK_OK);
    ck_assert_int_eq(stk_mul_scalar(sc, (float)(1.0 / sqrt((double)(d / heads))), &ss), STK_OK);
    ck_assert_int_eq(stk_softmax(ss, -1, &at), STK_OK);
    ck_assert_int_eq(stk_matmul(at, part[2], &o), STK_OK);
    ck_assert_int_eq(stk_permute(o, perm4, &op), STK_OK);
    return stk_reshape(op, 3, back, out);
}

START_TEST(test_attention_packed)
{
    /* finite differences on a small case (3 heads of 2, 4 tokens) */
    int heads = 3;
    int64_t small[3] = {2, 4, 18};
    stk_tensor *x = rand_tensor(31, 3, small, -1.5f, 1.5f);
    stk_tensor_set_requires_grad(x, true);
    gradcheck("attention_packed", f_attention, 1, &x, &heads, 1e-2, 1e-2);
    stk_tensor_release(x);
    /* against the composition on vit-like proportions (65 tokens, 2 heads of
     * 16), a strided (non-contiguous) input, forward and input gradient */
    heads = 2;
    int64_t big[3] = {3, 96, 65};
    stk_tensor *base = rand_tensor(32, 3, big, -2.f, 2.f);
    stk_tensor_set_requires_grad(base, true);
    stk_tensor *qkv, *y_op, *y_ref, *r = rand_tensor(33, 3, (int64_t[]){3, 65, 32}, -1.f, 1.f);
    stk_scope *sc;
    ck_assert_int_eq(stk_scope_begin(&sc), STK_OK);
    ck_assert_int_eq(stk_transpose(base, 1, 2, &qkv), STK_OK); /* [3, 65, 96], strided */
    ck_assert_int_eq(stk_attention_packed(qkv, heads, &y_op), STK_OK);
    ck_assert_int_eq(attention_composed(qkv, heads, &y_ref), STK_OK);
    ck_assert_int_eq(stk_tensor_numel(y_op), 3 * 65 * 32);
    float *a = host_f32(y_op), *b = host_f32(y_ref);
    expect_near("attention forward", a, b, 3 * 65 * 32, 1e-5);
    free(a), free(b);
    ck_assert_int_eq(stk_backward(y_op, r, true), STK_OK); /* the transpose is shared */
    float *g_op = host_f32(stk_tensor_grad(base));
    stk_tensor_zero_grad(base);
    ck_assert_int_eq(stk_backward(y_ref, r, false), STK_OK);
    float *g_ref = host_f32(stk_tensor_grad(base));
    expect_near("attention gradient", g_op, g_ref, 3 * 96 * 65, 1e-5);
    free(g_op), free(g_ref);
    /* refusals name the shape */
    stk_tensor *bad;
    ck_assert_int_eq(stk_attention_packed(qkv, 5, &bad), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "[3, 65, 96]"));
    ck_assert_int_eq(stk_attention_packed(qkv, 0, &bad), STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_attention_packed(r, 1, &bad), STK_ERR_INVALID_ARG); /* 32 not 3 D */
    stk_scope_end(sc);
    stk_tensor_release(r);
    stk_tensor_release(base);
}
END_TEST

/* ---- against PyTorch ----------------------------------------------------------- */

/* tests/data/torch_reference.safetensors, written by
 * tests/fixtures/make_torch_reference.py: inputs, outputs and the input
 * gradients of sum(out * r). Tolerance: |stoke - torch| <= 1e-4 * |torch| +
 * 1e-5 (relative 1e-4 with an absolute floor for values near zero, where a
 * relative bound means nothing). Exceptions: dropout (Stoke draws its mask
 * from Philox, PyTorch from its own generator) is checked by its own
 * properties in test_cat_dropout_input instead. */
static stk_safetensors *ref;
static stk_tensor *ref_labels;
static stk_tensor *bn_rm, *bn_rv;

static stk_tensor *ref_tensor(const char *name, bool grad)
{
    const stk_st_entry *e = stk_safetensors_find(ref, name);
    ck_assert_msg(e != NULL, "fixture %s missing", name);
    int64_t shape[8];
    for (int d = 0; d < e->ndim; d++) shape[d] = e->shape[d];
    stk_dtype dt = e->dtype == STK_ST_F32 ? STK_F32 : e->dtype == STK_ST_I32 ? STK_I32 : STK_U8;
    stk_tensor *t;
    ck_assert_int_eq(eng_tensor_new(STK_DEVICE_CPU, dt, e->ndim, shape, false, &t), STK_OK);
    memcpy(stk_tensor_data(t), stk_safetensors_data(ref, e), e->end - e->begin);
    stk_tensor_set_requires_grad(t, grad);
    return t;
}

static int ref_worst_case;
static double ref_worst;

static void expect_close(const char *what, const stk_tensor *got, const char *ref_name)
{
    stk_tensor *want = ref_tensor(ref_name, false);
    ck_assert_msg(stk_tensor_numel(got) == stk_tensor_numel(want), "%s: %lld elements, want %lld",
                  what, (long long)stk_tensor_numel(got), (long long)stk_tensor_numel(want));
    float *g = host_f32(got), *w = stk_tensor_data(want);
    for (int64_t i = 0; i < stk_tensor_numel(want); i++) {
        double err = fabs((double)g[i] - w[i]), bound = 1e-4 * fabs(w[i]) + 1e-5;
        if (err / bound > ref_worst) ref_worst = err / bound;
        ck_assert_msg(err <= bound, "%s element %lld: stoke %.8g, torch %.8g", what, (long long)i,
                      g[i], w[i]);
    }
    free(g);
    stk_tensor_release(want);
}

typedef stk_status (*ref_fn)(stk_tensor **in, stk_tensor **out);
static stk_status r_add(stk_tensor **i, stk_tensor **o) { return stk_add(i[0], i[1], o); }
static stk_status r_sub(stk_tensor **i, stk_tensor **o) { return stk_sub(i[0], i[1], o); }
static stk_status r_mul(stk_tensor **i, stk_tensor **o) { return stk_mul(i[0], i[1], o); }
static stk_status r_div(stk_tensor **i, stk_tensor **o) { return stk_div(i[0], i[1], o); }
static stk_status r_relu(stk_tensor **i, stk_tensor **o) { return stk_relu(i[0], o); }
static stk_status r_gelu(stk_tensor **i, stk_tensor **o) { return stk_gelu(i[0], o); }
static stk_status r_relu6(stk_tensor **i, stk_tensor **o) { return stk_relu6(i[0], o); }
static stk_status r_conv_depthwise(stk_tensor **i, stk_tensor **o)
{
    stk_conv2d_params p = {{2, 2}, {1, 1}, {1, 1}, 6};
    return stk_conv2d(i[0], i[1], NULL, &p, o);
}
static stk_status r_sigmoid(stk_tensor **i, stk_tensor **o) { return stk_sigmoid(i[0], o); }
static stk_status r_tanh(stk_tensor **i, stk_tensor **o) { return stk_tanh(i[0], o); }
static stk_status r_matmul(stk_tensor **i, stk_tensor **o) { return stk_matmul(i[0], i[1], o); }
static stk_status r_linear(stk_tensor **i, stk_tensor **o)
{
    return stk_linear(i[0], i[1], i[2], o);
}
static stk_status r_conv_groups(stk_tensor **i, stk_tensor **o)
{
    stk_conv2d_params p = {{2, 2}, {1, 1}, {1, 1}, 2};
    return stk_conv2d(i[0], i[1], i[2], &p, o);
}
static stk_status r_conv_dilation(stk_tensor **i, stk_tensor **o)
{
    stk_conv2d_params p = {{1, 1}, {2, 2}, {2, 2}, 1};
    return stk_conv2d(i[0], i[1], NULL, &p, o);
}
static stk_status r_conv_pointwise(stk_tensor **i, stk_tensor **o)
{
    return stk_conv2d(i[0], i[1], NULL, NULL, o);
}
static stk_status r_bn_train(stk_tensor **i, stk_tensor **o)
{
    return stk_batch_norm(i[0], i[1], i[2], bn_rm, bn_rv, true, 0.1f, 1e-5f, o);
}
static stk_status r_bn_eval(stk_tensor **i, stk_tensor **o)
{
    return stk_batch_norm(i[0], i[1], i[2], bn_rm, bn_rv, false, 0.1f, 1e-5f, o);
}
static stk_status r_maxpool(stk_tensor **i, stk_tensor **o)
{
    return stk_max_pool2d(i[0], 3, 2, 1, o);
}
static stk_status r_avgpool_pad(stk_tensor **i, stk_tensor **o)
{
    return stk_avg_pool2d(i[0], 3, 2, 1, true, o);
}
static stk_status r_avgpool_nopad(stk_tensor **i, stk_tensor **o)
{
    return stk_avg_pool2d(i[0], 3, 2, 1, false, o);
}
static stk_status r_adaptive(stk_tensor **i, stk_tensor **o)
{
    return stk_adaptive_avg_pool2d(i[0], 2, 2, o);
}
static stk_status r_softmax(stk_tensor **i, stk_tensor **o) { return stk_softmax(i[0], 1, o); }
static stk_status r_log_softmax(stk_tensor **i, stk_tensor **o)
{
    return stk_log_softmax(i[0], -1, o);
}
static stk_status r_ce(stk_tensor **i, stk_tensor **o)
{
    return stk_cross_entropy(i[0], ref_labels, 0.1f, o);
}
static stk_status r_mse(stk_tensor **i, stk_tensor **o) { return stk_mse_loss(i[0], i[1], o); }
static stk_status r_sum(stk_tensor **i, stk_tensor **o)
{
    int d[2] = {0, 2};
    return stk_sum(i[0], 2, d, true, o);
}
static stk_status r_mean(stk_tensor **i, stk_tensor **o)
{
    return stk_mean(i[0], 0, NULL, false, o);
}
static stk_status r_cat(stk_tensor **i, stk_tensor **o) { return stk_cat(3, i, 1, o); }
static stk_status r_silu(stk_tensor **i, stk_tensor **o) { return stk_silu(i[0], o); }
static stk_status r_hardsigmoid(stk_tensor **i, stk_tensor **o) { return stk_hardsigmoid(i[0], o); }
static stk_status r_hardswish(stk_tensor **i, stk_tensor **o) { return stk_hardswish(i[0], o); }
static stk_status r_layer_norm(stk_tensor **i, stk_tensor **o)
{
    return stk_layer_norm(i[0], i[1], i[2], 1e-6f, o);
}
static stk_status r_layer_norm2d(stk_tensor **i, stk_tensor **o)
{
    return stk_layer_norm2d(i[0], i[1], i[2], 1e-6f, o);
}
static stk_status r_softmax_mid(stk_tensor **i, stk_tensor **o) { return stk_softmax(i[0], 1, o); }
/* q.permute(0, 2, 1, 3) @ k.permute(0, 2, 3, 1): both operands strided views */
static stk_status r_bmm_perm(stk_tensor **i, stk_tensor **o)
{
    static const int pq[4] = {0, 2, 1, 3}, pk[4] = {0, 2, 3, 1};
    stk_tensor *q, *k;
    STK_TRY(stk_permute(i[0], pq, &q));
    stk_status st = stk_permute(i[1], pk, &k);
    if (st == STK_OK) st = stk_matmul(q, k, o);
    stk_tensor_release(q);
    stk_tensor_release(k);
    return st;
}

static stk_status r_attention_packed(stk_tensor **i, stk_tensor **o)
{
    return stk_attention_packed(i[0], 2, o);
}

START_TEST(test_matches_pytorch)
{
    char path[600];
    snprintf(path, sizeof path, "%s/torch_reference.safetensors",
             getenv("STOKE_TEST_DATA") ? getenv("STOKE_TEST_DATA") : "tests/data");
    ck_assert_msg(stk_safetensors_read(path, &ref) == STK_OK, "%s", stk_last_error());
    struct {
        const char *name;
        ref_fn fn;
        int n_in;
    } cases[] = {
        {"add", r_add, 2},
        {"sub", r_sub, 2},
        {"mul", r_mul, 2},
        {"div", r_div, 2},
        {"relu", r_relu, 1},
        {"gelu", r_gelu, 1},
        {"sigmoid", r_sigmoid, 1},
        {"tanh", r_tanh, 1},
        {"matmul", r_matmul, 2},
        {"matmul_bcast", r_matmul, 2},
        {"linear", r_linear, 3},
        {"conv_groups", r_conv_groups, 3},
        {"conv_dilation", r_conv_dilation, 2},
        {"conv_pointwise", r_conv_pointwise, 2},
        {"bn_train", r_bn_train, 3},
        {"bn_eval", r_bn_eval, 3},
        {"maxpool", r_maxpool, 1},
        {"avgpool_pad", r_avgpool_pad, 1},
        {"avgpool_nopad", r_avgpool_nopad, 1},
        {"adaptive", r_adaptive, 1},
        {"softmax", r_softmax, 1},
        {"log_softmax", r_log_softmax, 1},
        {"cross_entropy", r_ce, 1},
        {"mse", r_mse, 2},
        {"sum", r_sum, 1},
        {"mean", r_mean, 1},
        {"cat", r_cat, 3},
        {"relu6", r_relu6, 1},
        {"conv_depthwise", r_conv_depthwise, 2},
        {"silu", r_silu, 1},
        {"hardsigmoid", r_hardsigmoid, 1},
        {"hardswish", r_hardswish, 1},
        {"layer_norm", r_layer_norm, 3},
        {"layer_norm2d", r_layer_norm2d, 3},
        {"softmax_mid", r_softmax_mid, 1},
        {"bmm_perm", r_bmm_perm, 2},
        {"se_mul", r_mul, 2},
        {"layer_scale", r_mul, 2},
        {"attention_packed", r_attention_packed, 1},
    };
    ref_labels = ref_tensor("cross_entropy.labels", false);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *n = cases[c].name;
        char name[96];
        stk_tensor *in[3] = {NULL, NULL, NULL}, *y, *r;
        for (int i = 0; i < cases[c].n_in; i++) {
            snprintf(name, sizeof name, "%s.in%d", n, i);
            in[i] = ref_tensor(name, true);
        }
        if (!strncmp(n, "bn_", 3)) {
            bool train = !strcmp(n, "bn_train");
            snprintf(name, sizeof name, train ? "%s.rm_before" : "%s.rm", n);
            bn_rm = ref_tensor(name, false);
            snprintf(name, sizeof name, train ? "%s.rv_before" : "%s.rv", n);
            bn_rv = ref_tensor(name, false);
        }
        ck_assert_msg(cases[c].fn(in, &y) == STK_OK, "%s: %s", n, stk_last_error());
        snprintf(name, sizeof name, "%s.out", n);
        expect_close(n, y, name);
        snprintf(name, sizeof name, "%s.r", n);
        r = ref_tensor(name, false);
        ck_assert_msg(stk_backward(y, r, false) == STK_OK, "%s: %s", n, stk_last_error());
        for (int i = 0; i < cases[c].n_in; i++) {
            snprintf(name, sizeof name, "%s.grad%d", n, i);
            char what[64];
            snprintf(what, sizeof what, "%s grad %d", n, i);
            expect_close(what, stk_tensor_grad(in[i]), name);
        }
        if (!strcmp(n, "bn_train")) {
            expect_close("running mean", bn_rm, "bn_train.rm_after");
            expect_close("running var", bn_rv, "bn_train.rv_after");
        }
        stk_tensor_release(y);
        stk_tensor_release(r);
        for (int i = 0; i < 3; i++) stk_tensor_release(in[i]);
        stk_tensor_release(bn_rm);
        stk_tensor_release(bn_rv);
        bn_rm = bn_rv = NULL;
    }
    /* gradient clipping: by the global norm (clipped, and a bound above the
     * norm: unchanged), by value */
    const char *clips[] = {"clip_norm", "clip_norm_big", "clip_value"};
    for (int c = 0; c < 3; c++) {
        stk_tensor *g[3];
        char name[64];
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "%s.in%d", clips[c], i);
            g[i] = ref_tensor(name, false);
        }
        if (c < 2) {
            snprintf(name, sizeof name, "%s.max", clips[c]);
            stk_tensor *max = ref_tensor(name, false), *norm;
            float total = 0;
            ck_assert_int_eq(stk_clip_grad_norm(3, g, *(float *)stk_tensor_data(max), &total),
                             STK_OK);
            int64_t one = 1;
            ck_assert_int_eq(eng_tensor_new(STK_DEVICE_CPU, STK_F32, 1, &one, false, &norm),
                             STK_OK);
            *(float *)stk_tensor_data(norm) = total;
            snprintf(name, sizeof name, "%s.norm", clips[c]);
            expect_close(clips[c], norm, name);
            stk_tensor_release(max), stk_tensor_release(norm);
        } else {
            ck_assert_int_eq(stk_clip_grad_value(3, g, 0.3f), STK_OK);
        }
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "%s.out%d", clips[c], i);
            expect_close(name, g[i], name);
            stk_tensor_release(g[i]);
        }
    }
    { /* tensors longer than the lanes: against a double-precision sum */
        int64_t len[2] = {100003, 40000};
        stk_tensor *big[2];
        double want = 0;
        for (int t = 0; t < 2; t++) {
            ck_assert_int_eq(eng_tensor_new(STK_DEVICE_CPU, STK_F32, 1, &len[t], false, &big[t]),
                             STK_OK);
            float *v = stk_tensor_data(big[t]);
            for (int64_t i = 0; i < len[t]; i++) {
                v[i] = (float)((i * 7919 + t * 13) % 2001 - 1000) / 1000.f;
                want += (double)v[i] * v[i];
            }
        }
        float got;
        ck_assert_int_eq(stk_global_norm(2, big, &got), STK_OK);
        ck_assert_msg(fabs(got - sqrt(want)) <= 1e-5 * sqrt(want), "norm %.8g, want %.8g",
                      (double)got, sqrt(want));
        stk_tensor_release(big[0]), stk_tensor_release(big[1]);
    }
    stk_tensor *none[2] = {NULL, NULL};
    float zero = -1;
    ck_assert_int_eq(stk_global_norm(2, none, &zero), STK_OK);
    ck_assert(zero == 0.f);
    ck_assert_int_eq(stk_clip_grad_norm(2, none, 0.f, NULL), STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_clip_grad_value(2, none, NAN), STK_ERR_INVALID_ARG);
    /* the input op */
    stk_tensor *px = ref_tensor("input.pixels", false), *mean = ref_tensor("input.mean", false),
               *std = ref_tensor("input.std", false), *y;
    ck_assert_int_eq(stk_input_u8_nhwc(px, stk_tensor_data(mean), stk_tensor_data(std), &y),
                     STK_OK);
    expect_close("input", y, "input.out");
    stk_tensor_release(y);
    stk_tensor_release(px);
    stk_tensor_release(mean);
    stk_tensor_release(std);
    stk_tensor_release(ref_labels);
    stk_safetensors_free(ref);
    (void)ref_worst_case;
    printf("PyTorch reference: worst error %.3f of the tolerance\n", ref_worst);
}
END_TEST

static Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    TCase *t = tcase_create("ops");
    tcase_add_test(t, test_conv2d);
    tcase_add_test(t, test_conv2d_depthwise_direct);
    tcase_add_test(t, test_autocast_bf16_conv2d);
    tcase_add_test(t, test_autocast_bf16_matmul);
    tcase_add_test(t, test_batch_norm);
    tcase_add_test(t, test_batch_norm_act);
    tcase_add_test(t, test_batch_norm_sync);
    tcase_add_test(t, test_pooling);
    tcase_add_test(t, test_softmax_and_losses);
    tcase_add_test(t, test_cat_dropout_input);
    tcase_add_test(t, test_fast_exp_erf);
    tcase_add_test(t, test_new_activations_layer_norm);
    tcase_add_test(t, test_drop_path);
    tcase_add_test(t, test_attention_packed);
    tcase_add_test(t, test_matches_pytorch);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return stk_check_run(ops_suite()); }
