/* The CUDA backend against the CPU backend, op by op, forward and backward,
 * on random inputs: every entry of kernels/backend.h.
 *
 * Where it runs: on a machine with a GPU (real CUDA build), and in the
 * STOKE_CUDA=EMULATE build, where tests/cuda_host implements the CUDA
 * runtime, cuBLAS and cuDNN on the host and the kernels run as host loops
 * (tests/cuda_host/README.md says what that proves). Elsewhere it reports
 * itself skipped (exit 77) with the reason. The emulated build adds tests
 * of the emulation itself: a wrong leading dimension and a missing stream
 * wait are caught. Runs without fork (CK_NOFORK): a CUDA context does not
 * survive fork(). */
#include "check_main.h"
#include "common/half.h"
#include "common/rng.h"
#include "kernels/backend.h"
#include "kernels/cpu_kernels_impl.h"
#include "device/device_query.h"
#include "kernels/scalar_math.h"

#ifdef STOKE_CUDA_BACKEND
#include "kernels/cuda/backend_cuda_impl.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/kernels.h"
#endif
#ifdef STOKE_CUDA_EMULATED
#include "cuda_host/host_cuda.h"
#include <pthread.h>
#include <unistd.h>
#elif defined(STOKE_CUDA_BACKEND)
#include <sched.h>
#include <stdatomic.h>
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const stk_backend *cpu, *gpu;

/* ---- buffers: a host copy and a device copy of the same data ---------------- */

typedef struct buf {
    void *h, *d;
    size_t bytes;
} buf;

static buf buf_new(size_t bytes)
{
    buf b = {calloc(1, bytes ? bytes : 1), NULL, bytes};
    ck_assert_ptr_nonnull(b.h);
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CUDA, bytes, &b.d), STK_OK);
    ck_assert_int_eq(gpu->from_host(b.d, b.h, bytes), STK_OK);
    return b;
}

/* n floats uniform in [lo, hi), the same on host and device */
static buf buf_rand(int64_t n, uint64_t seed, float lo, float hi)
{
    buf b = buf_new((size_t)n * sizeof(float));
    stk_rng r;
    stk_rng_init(&r, seed, 11, 0);
    float *f = b.h;
    for (int64_t i = 0; i < n; i++) f[i] = lo + (hi - lo) * (float)stk_rng_uniform(&r);
    ck_assert_int_eq(gpu->from_host(b.d, b.h, b.bytes), STK_OK);
    return b;
}

static void buf_free(buf *b)
{
    free(b->h);
    stk_device_free(STK_DEVICE_CUDA, b->d, b->bytes);
}

#define H(b) ((float *)(b).h)
#define D(b) ((float *)(b).d)

/* The device copy of `b` equals its host copy within tolerance: |d - h| <=
 * tol * (1 + max |h|) (relative to the scale of the whole result). */
static void expect_close(const char *what, const buf *b, double tol)
{
    float *got = malloc(b->bytes ? b->bytes : 1);
    ck_assert_int_eq(gpu->to_host(got, b->d, b->bytes), STK_OK);
    const float *want = b->h;
    size_t n = b->bytes / sizeof(float);
    double scale = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (1 + scale))) {
            float g = got[i], w = want[i];
            free(got);
            ck_abort_msg("%s: element %zu of %zu: cuda %.9g, cpu %.9g (scale %g)", what, i, n, g, w,
                         scale);
        }
    free(got);
}

static void expect_bytes_equal(const char *what, const buf *b)
{
    void *got = malloc(b->bytes ? b->bytes : 1);
    ck_assert_int_eq(gpu->to_host(got, b->d, b->bytes), STK_OK);
    ck_assert_msg(!memcmp(got, b->h, b->bytes), "%s: bytes differ", what);
    free(got);
}

/* Element-wise ops: exact same math (scalar_math.h), only libm may differ. */
#define TOL_EW 1e-6
/* GEMM and convolution: other summation orders (and TF32 on real GPUs). */
#ifdef STOKE_CUDA_EMULATED
#define TOL_MM 1e-5
#else
#define TOL_MM 5e-3
#endif

static void setup(void)
{
    ck_assert_int_eq(stk_backend_get(STK_DEVICE_CPU, &cpu), STK_OK);
    ck_assert_int_eq(stk_backend_get(STK_DEVICE_CUDA, &gpu), STK_OK);
}

/* ---- memory ----------------------------------------------------------------- */

START_TEST(test_copy_convert_fill)
{
    /* a transpose of a [3, 5, 7] f32 tensor, and of u8 and 16-bit ones */
    int64_t shape[3] = {3, 5, 7}, src_st[3] = {1, 3, 15}, dst_st[3] = {35, 7, 1};
    size_t sizes[3] = {4, 2, 1};
    for (int e = 0; e < 3; e++) {
        size_t es = sizes[e];
        buf src = buf_rand(105, 1, -5, 5), dst = buf_new(105 * es);
        cpu->copy_strided(es, 3, shape, dst.h, dst_st, src.h, src_st);
        gpu->copy_strided(es, 3, shape, dst.d, dst_st, src.d, src_st);
        expect_bytes_equal("copy_strided", &dst);
        buf_free(&src);
        buf_free(&dst);
    }
    stk_dtype types[] = {STK_F32, STK_F16, STK_BF16, STK_I32, STK_U8};
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++) {
            buf src = buf_rand(257, 2, -300, 300), mid = buf_new(257 * 4);
            cpu->convert(types[a], mid.h, STK_F32, src.h, 257);
            gpu->convert(types[a], mid.d, STK_F32, src.d, 257);
            expect_bytes_equal("convert from f32", &mid);
            buf out = buf_new(257 * 4);
            cpu->convert(types[b], out.h, types[a], mid.h, 257);
            gpu->convert(types[b], out.d, types[a], mid.d, 257);
            char what[64];
            snprintf(what, sizeof what, "convert %d -> %d", a, b);
            expect_bytes_equal(what, &out);
            buf_free(&src), buf_free(&mid), buf_free(&out);
        }
    for (int t = 0; t < 5; t++) {
        buf b = buf_new(99 * 4);
        cpu->fill(types[t], b.h, 99, 3.25);
        gpu->fill(types[t], b.d, 99, 3.25);
        expect_bytes_equal("fill", &b);
        cpu->fill(types[t], b.h, 99, 0.0);
        gpu->fill(types[t], b.d, 99, 0.0);
        expect_bytes_equal("fill 0", &b);
        buf_free(&b);
    }
}
END_TEST

/* ---- element-wise ------------------------------------------------------------ */

START_TEST(test_elementwise)
{
    const int64_t n = 1009;
    buf x = buf_rand(n, 3, -3, 3), gy = buf_rand(n, 4, -1, 1), y = buf_new(n * 4),
        gx = buf_new(n * 4);
    buf x6 = buf_rand(n, 5, -3, 9); /* relu6's input: across both of its kinks */
    buf x5 = buf_rand(n, 7, -5, 5); /* hardsigmoid's and hardswish's: across +-3 */
    for (int op = STK_UNARY_NEG; op <= STK_UNARY_HARDSWISH; op++) {
        buf *in = op == STK_UNARY_RELU6                                      ? &x6
                  : op == STK_UNARY_HARDSIGMOID || op == STK_UNARY_HARDSWISH ? &x5
                                                                             : &x;
        cpu->unary(op, n, H(*in), H(y), 0.7f);
        gpu->unary(op, n, D(*in), D(y), 0.7f);
        expect_close("unary", &y, TOL_EW);
        cpu->unary_backward(op, n, H(*in), H(y), H(gy), H(gx), 0.7f);
        gpu->unary_backward(op, n, D(*in), D(y), D(gy), D(gx), 0.7f);
        expect_close("unary backward", &gx, TOL_EW);
    }
    buf_free(&x6), buf_free(&x5);
    cpu->axpby(n, 0.5f, H(x), -2.f, H(gx));
    gpu->axpby(n, 0.5f, D(x), -2.f, D(gx));
    expect_close("axpby", &gx, TOL_EW);
    /* broadcasting: [4, 1, 6] (op) [1, 5, 6] -> [4, 5, 6], and a transposed operand */
    int64_t shape[3] = {4, 5, 6}, as[3] = {6, 0, 1}, bs[3] = {0, 6, 1}, ts[3] = {1, 24, 4};
    buf a = buf_rand(120, 5, -2, 2), b = buf_rand(120, 6, 0.5f, 2), out = buf_new(120 * 4);
    for (int op = STK_BINARY_ADD; op <= STK_BINARY_DIV; op++) {
        cpu->binary(op, 3, shape, H(out), H(a), as, H(b), bs);
        gpu->binary(op, 3, shape, D(out), D(a), as, D(b), bs);
        expect_close("binary broadcast", &out, TOL_EW);
        cpu->binary(op, 3, shape, H(out), H(a), ts, H(b), bs);
        gpu->binary(op, 3, shape, D(out), D(a), ts, D(b), bs);
        expect_close("binary strided", &out, TOL_EW);
    }
    buf_free(&x), buf_free(&gy), buf_free(&y), buf_free(&gx);
    buf_free(&a), buf_free(&b), buf_free(&out);
}
END_TEST

START_TEST(test_sum_to)
{
    /* x [6, 7, 300]: reduce dim 0, the last dim, dims 0 and 2, everything;
     * and a long reduction (3 chunks of the deterministic two-pass kernel) */
    int64_t shape[3] = {6, 7, 300};
    int64_t ys[][3] = {{0, 300, 1}, {7, 1, 0}, {0, 1, 0}, {0, 0, 0}, {2100, 300, 1}};
    int64_t yn[] = {2100, 42, 7, 1, 12600};
    buf x = buf_rand(12600, 7, -1, 1);
    for (int t = 0; t < 5; t++) {
        buf y = buf_new((size_t)yn[t] * 4);
        cpu->sum_to(3, shape, H(x), ys[t], H(y), yn[t]);
        gpu->sum_to(3, shape, D(x), ys[t], D(y), yn[t]);
        expect_close("sum_to", &y, 1e-6);
        buf_free(&y);
    }
    buf_free(&x);
}
END_TEST

/* ---- GEMM -------------------------------------------------------------------- */

START_TEST(test_gemm)
{
    /* C [m, n] = op(A) op(B), padded leading dimensions, a batch of 3 with B
     * broadcast (stride 0), alpha and beta */
    const int64_t m = 13, n = 17, k = 11, pad = 3;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
            int64_t sa = (ta ? k : m) * lda, sc = m * ldc;
            buf a = buf_rand(3 * sa, 8, -1, 1), b = buf_rand((tb ? n : k) * ldb, 9, -1, 1),
                c = buf_rand(3 * sc, 10, -1, 1);
            cpu->gemm_batched(3, ta, tb, m, n, k, 0.5f, H(a), lda, sa, H(b), ldb, 0, 0.25f, H(c),
                              ldc, sc);
            gpu->gemm_batched(3, ta, tb, m, n, k, 0.5f, D(a), lda, sa, D(b), ldb, 0, 0.25f, D(c),
                              ldc, sc);
            expect_close("gemm_batched", &c, TOL_MM);
            cpu->gemm_batched(1, ta, tb, m, n, k, 1.f, H(a), lda, 0, H(b), ldb, 0, 0.f, H(c), ldc,
                              0);
            gpu->gemm_batched(1, ta, tb, m, n, k, 1.f, D(a), lda, 0, D(b), ldb, 0, 0.f, D(c), ldc,
                              0);
            expect_close("gemm", &c, TOL_MM);
            buf_free(&a), buf_free(&b), buf_free(&c);
        }
    ck_assert_int_eq(gpu->sync(), STK_OK);
}
END_TEST

/* ---- convolution --------------------------------------------------------------- */

static const stk_conv2d_desc convs[] = {
    /* n c h w  k r s  oh ow  stride pad dil groups */
    {2, 3, 9, 8, 4, 3, 3, 9, 8, 1, 1, 1, 1, 1, 1, 1},
    {2, 4, 9, 9, 6, 3, 3, 5, 5, 2, 2, 1, 1, 1, 1, 1},
    {1, 4, 10, 10, 4, 3, 3, 6, 6, 1, 1, 0, 0, 2, 2, 2}, /* dilation 2, 2 groups */
    {3, 5, 7, 7, 2, 1, 1, 4, 4, 2, 2, 0, 0, 1, 1, 1},   /* 1x1, stride 2 (downsample) */
    {2, 6, 8, 8, 6, 3, 3, 4, 4, 2, 2, 1, 1, 1, 1, 6},   /* depthwise, stride 2 (mobilenet_v2) */
};

START_TEST(test_conv2d)
{
    for (size_t t = 0; t < sizeof convs / sizeof convs[0]; t++) {
        const stk_conv2d_desc *d = &convs[t];
        int64_t nx = d->n * d->c * d->h * d->w, nw = d->k * (d->c / d->groups) * d->r * d->s,
                ny = d->n * d->k * d->oh * d->ow;
        buf x = buf_rand(nx, 20 + t, -1, 1), w = buf_rand(nw, 30 + t, -1, 1),
            gy = buf_rand(ny, 40 + t, -1, 1), y = buf_new(ny * 4), gx = buf_new(nx * 4),
            gw = buf_new(nw * 4);
        ck_assert_int_eq(cpu->conv2d_forward(d, H(x), H(w), H(y)), STK_OK);
        ck_assert_int_eq(gpu->conv2d_forward(d, D(x), D(w), D(y)), STK_OK);
        expect_close("conv2d forward", &y, TOL_MM);
        ck_assert_int_eq(cpu->conv2d_backward_data(d, H(w), H(gy), H(gx)), STK_OK);
        ck_assert_int_eq(gpu->conv2d_backward_data(d, D(w), D(gy), D(gx)), STK_OK);
        expect_close("conv2d backward data", &gx, TOL_MM);
        ck_assert_int_eq(cpu->conv2d_backward_weight(d, H(x), H(gy), H(gw)), STK_OK);
        ck_assert_int_eq(gpu->conv2d_backward_weight(d, D(x), D(gy), D(gw)), STK_OK);
        expect_close("conv2d backward weight", &gw, TOL_MM);
        buf_free(&x), buf_free(&w), buf_free(&gy), buf_free(&y), buf_free(&gx), buf_free(&gw);
    }
}
END_TEST

/* ---- batch norm ------------------------------------------------------------------ */

START_TEST(test_batch_norm)
{
    const int64_t n = 4, c = 3, hw = 10, nx = n * c * hw;
    for (int affine = 0; affine < 2; affine++) {
        buf x = buf_rand(nx, 50, -2, 3), g = buf_rand(c, 51, 0.5f, 1.5f),
            b = buf_rand(c, 52, -1, 1), gy = buf_rand(nx, 53, -1, 1), y = buf_new(nx * 4),
            mean = buf_new(c * 4), inv = buf_new(c * 4), rm = buf_rand(c, 54, -0.1f, 0.1f),
            rv = buf_rand(c, 55, 0.5f, 2), gx = buf_new(nx * 4), gg = buf_new(c * 4),
            gb = buf_new(c * 4);
        const float *gh = affine ? H(g) : NULL, *bh = affine ? H(b) : NULL;
        const float *gd = affine ? D(g) : NULL, *bd = affine ? D(b) : NULL;
        cpu->batch_norm_train(n, c, hw, H(x), gh, bh, H(y), H(mean), H(inv), H(rm), H(rv), 0.1f,
                              1e-5f);
        gpu->batch_norm_train(n, c, hw, D(x), gd, bd, D(y), D(mean), D(inv), D(rm), D(rv), 0.1f,
                              1e-5f);
        expect_close("batch_norm_train y", &y, 1e-5);
        expect_close("batch_norm_train mean", &mean, 1e-5);
        expect_close("batch_norm_train invstd", &inv, 1e-5);
        expect_close("batch_norm_train running mean", &rm, 1e-5);
        expect_close("batch_norm_train running var", &rv, 1e-5);
        cpu->batch_norm_backward(n, c, hw, H(x), gh, H(gy), H(mean), H(inv), H(gx), H(gg), H(gb));
        gpu->batch_norm_backward(n, c, hw, D(x), gd, D(gy), D(mean), D(inv), D(gx), D(gg), D(gb));
        expect_close("batch_norm_backward gx", &gx, 1e-5);
        expect_close("batch_norm_backward ggamma", &gg, 1e-5);
        expect_close("batch_norm_backward gbeta", &gb, 1e-5);
        /* only the input gradient (a frozen affine layer) */
        cpu->batch_norm_backward(n, c, hw, H(x), gh, H(gy), H(mean), H(inv), H(gx), NULL, NULL);
        gpu->batch_norm_backward(n, c, hw, D(x), gd, D(gy), D(mean), D(inv), D(gx), NULL, NULL);
        expect_close("batch_norm_backward gx only", &gx, 1e-5);
        cpu->batch_norm_eval(n, c, hw, H(x), gh, bh, H(rm), H(rv), 1e-5f, H(y));
        gpu->batch_norm_eval(n, c, hw, D(x), gd, bd, D(rm), D(rv), 1e-5f, D(y));
        expect_close("batch_norm_eval", &y, 1e-5);
        cpu->batch_norm_eval_backward(n, c, hw, H(x), gh, H(gy), H(rm), H(rv), 1e-5f, H(gx), H(gg),
                                      H(gb));
        gpu->batch_norm_eval_backward(n, c, hw, D(x), gd, D(gy), D(rm), D(rv), 1e-5f, D(gx), D(gg),
                                      D(gb));
        expect_close("batch_norm_eval_backward gx", &gx, 1e-5);
        expect_close("batch_norm_eval_backward ggamma", &gg, 1e-5);
        expect_close("batch_norm_eval_backward gbeta", &gb, 1e-5);
        buf *all[] = {&x, &g, &b, &gy, &y, &mean, &inv, &rm, &rv, &gx, &gg, &gb};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(all[i]);
    }
}
END_TEST

/* ---- pooling ------------------------------------------------------------------------ */

START_TEST(test_pooling)
{
    stk_pool2d_desc pools[] = {
        {2, 3, 9, 9, 5, 5, 3, 3, 2, 2, 1, 1, false}, /* resnet stem: overlapping, padded */
        {2, 3, 8, 8, 4, 4, 2, 2, 2, 2, 0, 0, false},
        {1, 2, 7, 7, 4, 4, 3, 3, 2, 2, 1, 1, true}, /* average counting the padding */
    };
    for (size_t t = 0; t < 3; t++) {
        const stk_pool2d_desc *d = &pools[t];
        int64_t nx = d->n * d->c * d->h * d->w, ny = d->n * d->c * d->oh * d->ow;
        buf x = buf_rand(nx, 60 + t, -1, 1), gy = buf_rand(ny, 70 + t, -1, 1), y = buf_new(ny * 4),
            am = buf_new(ny * 4), gx = buf_new(nx * 4);
        cpu->max_pool2d_forward(d, H(x), H(y), am.h);
        gpu->max_pool2d_forward(d, D(x), D(y), am.d);
        expect_close("max_pool forward", &y, 0);
        expect_bytes_equal("max_pool argmax", &am);
        cpu->max_pool2d_backward(d, H(gy), am.h, H(gx));
        gpu->max_pool2d_backward(d, D(gy), am.d, D(gx));
        expect_close("max_pool backward", &gx, 1e-6);
        cpu->avg_pool2d_forward(d, H(x), H(y));
        gpu->avg_pool2d_forward(d, D(x), D(y));
        expect_close("avg_pool forward", &y, 1e-6);
        cpu->avg_pool2d_backward(d, H(gy), H(gx));
        gpu->avg_pool2d_backward(d, D(gy), D(gx));
        expect_close("avg_pool backward", &gx, 1e-6);
        buf_free(&x), buf_free(&gy), buf_free(&y), buf_free(&am), buf_free(&gx);
    }
}
END_TEST

/* ---- layer norm ------------------------------------------------------------------------ */

START_TEST(test_layer_norm)
{
    const int64_t rows = 37, cols = 24, n = rows * cols;
    buf x = buf_rand(n, 90, -3, 3), gy = buf_rand(n, 91, -1, 1), y = buf_new(n * 4),
        gx = buf_new(n * 4), g = buf_rand(cols, 92, 0.5f, 1.5f), b = buf_rand(cols, 93, -1, 1),
        mean = buf_new(rows * 4), rstd = buf_new(rows * 4), gg = buf_new(cols * 4),
        gb = buf_new(cols * 4);
    for (int affine = 0; affine < 2; affine++) {
        cpu->layer_norm_forward(rows, cols, H(x), affine ? H(g) : NULL, affine ? H(b) : NULL, 1e-6f,
                                H(y), H(mean), H(rstd));
        gpu->layer_norm_forward(rows, cols, D(x), affine ? D(g) : NULL, affine ? D(b) : NULL, 1e-6f,
                                D(y), D(mean), D(rstd));
        expect_close("layer_norm forward", &y, 1e-6);
        expect_close("layer_norm mean", &mean, 1e-6);
        expect_close("layer_norm rstd", &rstd, 1e-6);
        cpu->layer_norm_backward(rows, cols, H(x), affine ? H(g) : NULL, H(mean), H(rstd), H(gy),
                                 H(gx), H(gg), H(gb));
        gpu->layer_norm_backward(rows, cols, D(x), affine ? D(g) : NULL, D(mean), D(rstd), D(gy),
                                 D(gx), D(gg), D(gb));
        expect_close("layer_norm backward", &gx, 1e-6);
        expect_close("layer_norm weight grad", &gg, 1e-6);
        expect_close("layer_norm bias grad", &gb, 1e-6);
    }
    buf_free(&x), buf_free(&gy), buf_free(&y), buf_free(&gx), buf_free(&g), buf_free(&b);
    buf_free(&mean), buf_free(&rstd), buf_free(&gg), buf_free(&gb);
}
END_TEST

/* ---- softmax, cross-entropy, dropout --------------------------------------------------- */

START_TEST(test_softmax_cross_entropy)
{
    const int64_t rows = 9, cols = 10, n = rows * cols;
    buf x = buf_rand(n, 80, -4, 4), gy = buf_rand(n, 81, -1, 1), y = buf_new(n * 4),
        gx = buf_new(n * 4), labels = buf_new(rows * 4), loss = buf_new(4), gl = buf_new(4);
    for (int log = 0; log < 2; log++) {
        cpu->softmax_forward(rows, cols, H(x), H(y), log);
        gpu->softmax_forward(rows, cols, D(x), D(y), log);
        expect_close("softmax forward", &y, 1e-6);
        cpu->softmax_backward(rows, cols, H(y), H(gy), H(gx), log);
        gpu->softmax_backward(rows, cols, D(y), D(gy), D(gx), log);
        expect_close("softmax backward", &gx, 1e-6);
    }
    int32_t *lh = labels.h;
    for (int r = 0; r < rows; r++) lh[r] = (r * 7) % cols;
    ck_assert_int_eq(gpu->from_host(labels.d, labels.h, labels.bytes), STK_OK);
    H(gl)[0] = 1.5f;
    ck_assert_int_eq(gpu->from_host(gl.d, gl.h, 4), STK_OK);
    for (int s = 0; s < 2; s++) {
        float smoothing = s ? 0.1f : 0.f;
        ck_assert_int_eq(cpu->cross_entropy_forward(rows, cols, H(x), lh, smoothing, H(y), H(loss)),
                         STK_OK);
        ck_assert_int_eq(
            gpu->cross_entropy_forward(rows, cols, D(x), labels.d, smoothing, D(y), D(loss)),
            STK_OK);
        expect_close("cross_entropy logp", &y, 1e-6);
        expect_close("cross_entropy loss", &loss, 1e-6);
        cpu->cross_entropy_backward(rows, cols, H(y), lh, smoothing, H(gl), H(gx));
        gpu->cross_entropy_backward(rows, cols, D(y), labels.d, smoothing, D(gl), D(gx));
        expect_close("cross_entropy backward", &gx, 1e-6);
    }
    /* a label out of range: the same message as the CPU's, naming the row */
    lh[4] = 12;
    ck_assert_int_eq(gpu->from_host(labels.d, labels.h, labels.bytes), STK_OK);
    ck_assert_int_eq(gpu->cross_entropy_forward(rows, cols, D(x), labels.d, 0.f, D(y), D(loss)),
                     STK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(stk_last_error(), "label 12 of row 4 is outside [0, 10)"), "%s",
                  stk_last_error());
    buf_free(&x), buf_free(&gy), buf_free(&y), buf_free(&gx), buf_free(&labels), buf_free(&loss);
    buf_free(&gl);
}
END_TEST

START_TEST(test_dropout)
{
    const int64_t n = 1001;
    buf x = buf_rand(n, 90, -1, 1), y = buf_new(n * 4), mask = buf_new(n), gx = buf_new(n * 4);
    cpu->dropout_forward(n, 0.3f, 1234, 5, H(x), H(y), mask.h);
    gpu->dropout_forward(n, 0.3f, 1234, 5, D(x), D(y), mask.d);
    expect_bytes_equal("dropout mask (same Philox draws)", &mask);
    expect_close("dropout forward", &y, 1e-6);
    cpu->dropout_backward(n, 0.3f, mask.h, H(x), H(gx));
    gpu->dropout_backward(n, 0.3f, mask.d, D(x), D(gx));
    expect_close("dropout backward", &gx, 1e-6);
    buf_free(&x), buf_free(&y), buf_free(&mask), buf_free(&gx);
}
END_TEST

/* ---- the input op and optimizers ------------------------------------------------------- */

START_TEST(test_input_and_optimizers)
{
    const int64_t n = 3, h = 5, w = 7, c = 3;
    buf px = buf_new(n * h * w * c), y = buf_new(n * c * h * w * 4);
    uint8_t *p = px.h;
    for (int64_t i = 0; i < n * h * w * c; i++) p[i] = (uint8_t)(i * 37 % 256);
    ck_assert_int_eq(gpu->from_host(px.d, px.h, px.bytes), STK_OK);
    float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    cpu->input_u8_nhwc(n, h, w, c, px.h, mean, std, H(y));
    gpu->input_u8_nhwc(n, h, w, c, px.d, mean, std, D(y));
    expect_close("input op", &y, 1e-6);
    buf_free(&px), buf_free(&y);

    /* the batch transforms' op: erasing, mixup (whole image), cutmix (a box
     * from the partner), an untouched sample */
    const int64_t bn = 4, bc = 3, bh = 9, bw = 11;
    buf bx = buf_rand(bn * bc * bh * bw, 99, -2, 2), by = buf_new(bn * bc * bh * bw * 4);
    stk_batch_region rg[4] = {{2, 7, 1, 5, 0, 0.f, 0.f},
                              {0, 9, 0, 11, 2, 0.3f, 0.7f},
                              {3, 9, 4, 11, 1, 0.f, 1.f},
                              {0, 0, 0, 0, 3, 1.f, 0.f}};
    ck_assert_int_eq(cpu->batch_regions(bn, bc, bh, bw, H(bx), rg, H(by)), STK_OK);
    ck_assert_int_eq(gpu->batch_regions(bn, bc, bh, bw, D(bx), rg, D(by)), STK_OK);
    expect_close("batch regions", &by, 0);
    buf_free(&bx), buf_free(&by);

    const int64_t m = 777;
    buf prm = buf_rand(m, 100, -1, 1), g = buf_rand(m, 101, -1, 1), b1 = buf_new(m * 4),
        b2 = buf_new(m * 4);
    for (int step = 0; step < 3; step++) {
        cpu->sgd_step(m, H(prm), H(g), H(b1), 0.1f, 0.9f, 0.f, 1e-4f, true, step == 0);
        gpu->sgd_step(m, D(prm), D(g), D(b1), 0.1f, 0.9f, 0.f, 1e-4f, true, step == 0);
    }
    expect_close("sgd params", &prm, 1e-6);
    expect_close("sgd momentum", &b1, 1e-6);
    for (int step = 1; step <= 3; step++) {
        float bc1 = 1 - powf(0.9f, step), bc2 = 1 - powf(0.999f, step);
        cpu->adam_step(m, H(prm), H(g), H(b1), H(b2), 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, true, bc1,
                       bc2);
        gpu->adam_step(m, D(prm), D(g), D(b1), D(b2), 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, true, bc1,
                       bc2);
    }
    expect_close("adamw params", &prm, 1e-6);
    expect_close("adamw m", &b1, 1e-6);
    expect_close("adamw v", &b2, 1e-6);
    buf_free(&prm), buf_free(&g), buf_free(&b1), buf_free(&b2);
}
END_TEST

/* ---- mixed precision (--amp) --------------------------------------------------------- */

/* b's floats rounded to f16: the host copy keeps the rounded f32 values (the
 * CPU reference), *half gets a device buffer of the f16 bits. */
static buf to_half(buf *b, buf *half)
{
    size_t n = b->bytes / 4;
    *half = buf_new(n * 2);
    uint16_t *hh = half->h;
    for (size_t i = 0; i < n; i++) {
        hh[i] = stk_f32_to_f16(H(*b)[i]);
        H(*b)[i] = stk_f16_to_f32(hh[i]);
    }
    ck_assert_int_eq(gpu->from_host(half->d, half->h, half->bytes), STK_OK);
    ck_assert_int_eq(gpu->from_host(b->d, b->h, b->bytes), STK_OK);
    return *half;
}

START_TEST(test_amp_kernels)
{
    ck_assert_ptr_null(cpu->gemm_batched_f16); /* the CPU refuses --amp */
    ck_assert_ptr_nonnull(gpu->gemm_batched_f16);
    /* f16 GEMM, f32 result: equals the f32 GEMM of the f16-rounded inputs */
    const int64_t m = 9, n = 12, k = 20;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        buf a = buf_rand(2 * m * k, 120 + t, -2, 2), b = buf_rand(k * n, 130 + t, -2, 2),
            c = buf_new(2 * m * n * 4), a16, b16;
        to_half(&a, &a16), to_half(&b, &b16);
        int64_t lda = ta ? m : k, ldb = tb ? k : n;
        cpu->gemm_batched(2, ta, tb, m, n, k, 1.f, H(a), lda, m * k, H(b), ldb, 0, 0.f, H(c), n,
                          m * n);
        gpu->gemm_batched_f16(2, ta, tb, m, n, k, 1.f, a16.d, lda, m * k, b16.d, ldb, 0, 0.f, D(c),
                              n, m * n);
        expect_close("gemm f16", &c, TOL_MM);
        buf_free(&a), buf_free(&b), buf_free(&c), buf_free(&a16), buf_free(&b16);
    }
    /* f16 convolutions (f32 accumulation, f16 outputs): within f16 rounding of the f32 ones */
    for (size_t t = 0; t < sizeof convs / sizeof convs[0]; t++) {
        const stk_conv2d_desc *d = &convs[t];
        int64_t nx = d->n * d->c * d->h * d->w, nw = d->k * (d->c / d->groups) * d->r * d->s,
                ny = d->n * d->k * d->oh * d->ow;
        buf x = buf_rand(nx, 140 + t, -1, 1), w = buf_rand(nw, 150 + t, -1, 1),
            gy = buf_rand(ny, 160 + t, -1, 1), x16, w16, gy16;
        to_half(&x, &x16), to_half(&w, &w16), to_half(&gy, &gy16);
        buf y = buf_new(ny * 4), y16 = buf_new(ny * 2), gx = buf_new(nx * 4),
            gx16 = buf_new(nx * 2), gw = buf_new(nw * 4), gw16 = buf_new(nw * 2);
        ck_assert_int_eq(cpu->conv2d_forward(d, H(x), H(w), H(y)), STK_OK);
        ck_assert_int_eq(gpu->conv2d_forward_f16(d, x16.d, w16.d, y16.d), STK_OK);
        gpu->convert(STK_F32, y.d, STK_F16, y16.d, ny);
        expect_close("conv2d forward f16", &y, 2e-3); /* f16 output rounding: 2^-11 */
        ck_assert_int_eq(cpu->conv2d_backward_data(d, H(w), H(gy), H(gx)), STK_OK);
        ck_assert_int_eq(gpu->conv2d_backward_data_f16(d, w16.d, gy16.d, gx16.d), STK_OK);
        gpu->convert(STK_F32, gx.d, STK_F16, gx16.d, nx);
        expect_close("conv2d backward data f16", &gx, 2e-3);
        ck_assert_int_eq(cpu->conv2d_backward_weight(d, H(x), H(gy), H(gw)), STK_OK);
        ck_assert_int_eq(gpu->conv2d_backward_weight_f16(d, x16.d, gy16.d, gw16.d), STK_OK);
        gpu->convert(STK_F32, gw.d, STK_F16, gw16.d, nw);
        expect_close("conv2d backward weight f16", &gw, 2e-3);
        buf *all[] = {&x, &w, &gy, &x16, &w16, &gy16, &y, &y16, &gx, &gx16, &gw, &gw16};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) buf_free(all[i]);
    }
    /* unscaling: the same values, and the overflow flag only when one is not finite */
    for (int bad = 0; bad < 2; bad++) {
        buf g = buf_rand(1000, 170, -1000, 1000), flag = buf_new(4);
        if (bad) {
            H(g)[517] = INFINITY;
            ck_assert_int_eq(gpu->from_host(g.d, g.h, g.bytes), STK_OK);
        }
        int32_t cpu_flag = 0;
        cpu->amp_unscale(1000, H(g), 1.f / 1024, &cpu_flag);
        gpu->amp_unscale(1000, D(g), 1.f / 1024, flag.d);
        if (bad) H(g)[517] = INFINITY;
        float *got = malloc(g.bytes);
        ck_assert_int_eq(gpu->to_host(got, g.d, g.bytes), STK_OK);
        for (int i = 0; i < 1000; i++)
            ck_assert(got[i] == H(g)[i] || (isinf(got[i]) && isinf(H(g)[i])));
        free(got);
        int32_t gpu_flag;
        ck_assert_int_eq(gpu->to_host(&gpu_flag, flag.d, 4), STK_OK);
        ck_assert_int_eq(cpu_flag, bad);
        ck_assert_int_eq(gpu_flag, bad);
        buf_free(&g), buf_free(&flag);
    }
    /* gradient clipping: squares into lanes that already hold sums (a tensor
     * longer than the lanes, then a shorter one), and the clamp */
    {
        int64_t len = 2 * STK_NORM_LANES + 777;
        buf x = buf_rand(len, 171, -3, 3), lanes = buf_rand(STK_NORM_LANES, 172, 0, 1);
        cpu->sum_squares(len, H(x), H(lanes));
        gpu->sum_squares(len, D(x), D(lanes));
        cpu->sum_squares(1000, H(x), H(lanes));
        gpu->sum_squares(1000, D(x), D(lanes));
        expect_close("sum_squares", &lanes, 1e-6);
        H(x)[5] = NAN;
        ck_assert_int_eq(gpu->from_host(D(x), H(x), x.bytes), STK_OK);
        cpu->clamp(len, H(x), -0.5f, 2.f);
        gpu->clamp(len, D(x), -0.5f, 2.f);
        float *got = malloc(x.bytes);
        ck_assert_int_eq(gpu->to_host(got, D(x), x.bytes), STK_OK);
        ck_assert(isnan(got[5]) && isnan(H(x)[5]));
        for (int64_t i = 0; i < len; i++)
            ck_assert(i == 5 || (got[i] == H(x)[i] && got[i] >= -0.5f && got[i] <= 2.f));
        free(got);
        buf_free(&x), buf_free(&lanes);
    }
}
END_TEST

/* ---- the caching allocator on the GPU -------------------------------------------------- */

#ifdef STOKE_CUDA_BACKEND
/* Holds a stream's queue until release_stream: the emulation's hold, or on a
 * real GPU a host function that waits for a flag (an idle stream would
 * complete an event at once, and the test needs one still pending). */
#ifdef STOKE_CUDA_EMULATED
static void hold_stream(cudaStream_t s) { stk_host_cuda_hold(s); }
static void release_stream(cudaStream_t s) { stk_host_cuda_release(s); }
#else
static atomic_int stream_gate;
static void CUDART_CB wait_for_gate(void *unused)
{
    (void)unused;
    while (!atomic_load(&stream_gate)) sched_yield();
}
static void hold_stream(cudaStream_t s)
{
    atomic_store(&stream_gate, 0);
    ck_assert_int_eq(cudaLaunchHostFunc(s, wait_for_gate, NULL), cudaSuccess);
}
static void release_stream(cudaStream_t s)
{
    (void)s;
    atomic_store(&stream_gate, 1);
}
#endif
#endif

START_TEST(test_device_allocator)
{
    stk_device_empty_cache(STK_DEVICE_CUDA);
    stk_mem_stats s0, s1, s2;
    stk_device_mem_stats(STK_DEVICE_CUDA, &s0);
    void *a, *b;
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CUDA, 100000, &a), STK_OK);
    stk_device_free(STK_DEVICE_CUDA, a, 100000);
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CUDA, 100000, &b), STK_OK);
    ck_assert_ptr_eq(a, b); /* same stream, same bin: reused at once */
    stk_device_mem_stats(STK_DEVICE_CUDA, &s1);
    ck_assert_uint_eq(s1.n_fresh - s0.n_fresh, 1);
    ck_assert_uint_eq(s1.allocated - s0.allocated, stk_device_bin_size(100000));
#ifdef STOKE_CUDA_BACKEND
    /* freed while a held stream may still use it: not reused until its event completes */
    stk_cuda_ctx *cx;
    ck_assert_int_eq(stk_cuda_context(&cx), STK_OK);
    cudaEvent_t ev;
    ck_assert_int_eq(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
    hold_stream(cx->copy);
    ck_assert_int_eq(cudaEventRecord(ev, cx->copy), cudaSuccess);
    stk_device_free_after(STK_DEVICE_CUDA, b, 100000, ev);
    void *c;
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CUDA, 100000, &c), STK_OK);
    ck_assert_ptr_ne(c, b); /* the event is still pending on the held stream */
    release_stream(cx->copy);
    ck_assert_int_eq(cudaStreamSynchronize(cx->copy), cudaSuccess);
    void *d;
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CUDA, 100000, &d), STK_OK);
    ck_assert_ptr_eq(d, b); /* event done: reused */
    stk_device_free(STK_DEVICE_CUDA, c, 100000);
    stk_device_free(STK_DEVICE_CUDA, d, 100000);
#else
    stk_device_free(STK_DEVICE_CUDA, b, 100000);
#endif
    stk_device_empty_cache(STK_DEVICE_CUDA);
    stk_device_mem_stats(STK_DEVICE_CUDA, &s2);
    ck_assert_uint_eq(s2.reserved, s2.allocated);
}
END_TEST

#ifdef STOKE_CUDA_EMULATED
/* Out of memory: the cache is given back and the allocation retried before
 * the error, which carries the numbers. (A 64 MiB emulated GPU.) */
START_TEST(test_out_of_memory)
{
    stk_device_empty_cache(STK_DEVICE_CUDA);
    setenv("STOKE_HOST_CUDA_MEM_MB", "64", 1);
    void *a, *b;
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CUDA, 40 << 20, &a), STK_OK);
    stk_device_free(STK_DEVICE_CUDA, a, 40 << 20); /* cached: 40 MiB reserved */
    /* 48 MiB fits only once the cached 40 MiB is released */
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CUDA, 48 << 20, &b), STK_OK);
    void *c;
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CUDA, 40 << 20, &c), STK_ERR_NOMEM);
    ck_assert_msg(strstr(stk_last_error(), "out of cuda memory: cannot allocate 41943040 bytes"),
                  "%s", stk_last_error());
    ck_assert_msg(strstr(stk_last_error(), "MiB free of 64 MiB"), "%s", stk_last_error());
    stk_device_free(STK_DEVICE_CUDA, b, 48 << 20);
    stk_device_empty_cache(STK_DEVICE_CUDA);
    unsetenv("STOKE_HOST_CUDA_MEM_MB");
}
END_TEST

/* A leading dimension smaller than the matrix is refused by cuBLAS (here
 * its host implementation), and the backend reports it at the next sync;
 * one that is valid but wrong (reading the wrong elements) makes the
 * results differ from the CPU's, which the op tests above would catch. */
START_TEST(test_wrong_leading_dimension_is_caught)
{
    const int64_t m = 4, n = 5, k = 6;
    buf a = buf_rand(m * k, 110, -1, 1), b = buf_rand(k * n + 8, 111, -1, 1),
        c = buf_new(m * n * 4);
    stk_cublas_gemm_batched(1, false, false, m, n, k, 1.f, D(a), k, 0, D(b), n - 2, 0, 0.f, D(c), n,
                            0);
    ck_assert_int_eq(stk_cuda_sync(), STK_ERR_CUDA);
    ck_assert_msg(strstr(stk_last_error(), "CUBLAS_STATUS_INVALID_VALUE"), "%s", stk_last_error());
    cpu->gemm_batched(1, false, false, m, n, k, 1.f, H(a), k, 0, H(b), n, 0, 0.f, H(c), n, 0);
    gpu->gemm_batched(1, false, false, m, n, k, 1.f, D(a), k, 0, D(b), n + 1, 0, 0.f, D(c), n, 0);
    float got[20];
    ck_assert_int_eq(gpu->to_host(got, c.d, sizeof got), STK_OK);
    int differ = 0;
    for (int i = 0; i < 20; i++) differ += fabsf(got[i] - H(c)[i]) > 1e-4f;
    ck_assert_int_gt(differ, 5);
    buf_free(&a), buf_free(&b), buf_free(&c);
}
END_TEST

/* Streams are concurrent: a kernel on the compute stream that does not wait
 * for the copy stream's event reads the buffer before the copy lands; with
 * cudaStreamWaitEvent (what the copy engine does) it reads the copied data. */
START_TEST(test_missing_stream_wait_is_caught)
{
    stk_cuda_ctx *cx;
    ck_assert_int_eq(stk_cuda_context(&cx), STK_OK);
    const int64_t n = 64;
    float *host, *dev, *out;
    ck_assert_int_eq(cudaHostAlloc((void **)&host, n * 4, cudaHostAllocDefault), cudaSuccess);
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CUDA, n * 4, (void **)&dev), STK_OK);
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CUDA, n * 4, (void **)&out), STK_OK);
    for (int wait = 0; wait < 2; wait++) {
        for (int64_t i = 0; i < n; i++) host[i] = 7.f;
        ck_assert_int_eq(cudaMemsetAsync(dev, 0, n * 4, cx->compute), cudaSuccess);
        ck_assert_int_eq(cudaStreamSynchronize(cx->compute), cudaSuccess);
        cudaEvent_t ev;
        ck_assert_int_eq(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
        stk_host_cuda_hold(cx->copy); /* the copy is slow this time */
        ck_assert_int_eq(cudaMemcpyAsync(dev, host, n * 4, cudaMemcpyHostToDevice, cx->copy),
                         cudaSuccess);
        ck_assert_int_eq(cudaEventRecord(ev, cx->copy), cudaSuccess);
        if (wait) ck_assert_int_eq(cudaStreamWaitEvent(cx->compute, ev, 0), cudaSuccess);
        stk_cuda_axpby(n, 1.f, dev, 0.f, out, cx->compute); /* out = dev */
        if (!wait) ck_assert_int_eq(cudaStreamSynchronize(cx->compute), cudaSuccess);
        stk_host_cuda_release(cx->copy);
        float got[64];
        ck_assert_int_eq(stk_cuda_to_host(got, out, sizeof got), STK_OK);
        ck_assert_int_eq(cudaStreamSynchronize(cx->copy), cudaSuccess);
        if (wait)
            ck_assert_msg(got[0] == 7.f && got[n - 1] == 7.f, "with the wait: %g", got[0]);
        else
            ck_assert_msg(got[0] == 0.f, "without the wait the kernel should read stale data");
        cudaEventDestroy(ev);
    }
    cudaFreeHost(host);
    stk_device_free(STK_DEVICE_CUDA, dev, n * 4);
    stk_device_free(STK_DEVICE_CUDA, out, n * 4);
}
END_TEST

/* Copies of the wrong kind are refused, as they would fault on a GPU. */
START_TEST(test_wrong_copy_kind_is_caught)
{
    float h[4] = {0}, *d;
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CUDA, sizeof h, (void **)&d), STK_OK);
    ck_assert_int_eq(cudaMemcpy(h, d, sizeof h, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice), cudaSuccess);
    cudaGetLastError();
    stk_device_free(STK_DEVICE_CUDA, d, sizeof h);
}
END_TEST
#endif

static Suite *cuda_backend_suite(void)
{
    Suite *s = suite_create("cuda_backend");
    TCase *tc = tcase_create("ops");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_copy_convert_fill);
    tcase_add_test(tc, test_elementwise);
    tcase_add_test(tc, test_sum_to);
    tcase_add_test(tc, test_gemm);
    tcase_add_test(tc, test_conv2d);
    tcase_add_test(tc, test_batch_norm);
    tcase_add_test(tc, test_pooling);
    tcase_add_test(tc, test_layer_norm);
    tcase_add_test(tc, test_softmax_cross_entropy);
    tcase_add_test(tc, test_dropout);
    tcase_add_test(tc, test_input_and_optimizers);
    tcase_add_test(tc, test_amp_kernels);
    tcase_add_test(tc, test_device_allocator);
#ifdef STOKE_CUDA_EMULATED
    tcase_add_test(tc, test_out_of_memory);
    tcase_add_test(tc, test_wrong_leading_dimension_is_caught);
    tcase_add_test(tc, test_missing_stream_wait_is_caught);
    tcase_add_test(tc, test_wrong_copy_kind_is_caught);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    stk_cuda_report r;
    stk_cuda_query(&r);
    const stk_backend *be;
    if (!r.built) {
        printf("skipped: this build has no CUDA backend\n");
        return 77;
    }
    if (r.count == 0 || stk_backend_get(STK_DEVICE_CUDA, &be) != STK_OK) {
        printf("skipped: no CUDA device: %s\n", r.count ? stk_last_error() : r.reason);
        return 77;
    }
    printf("cuda backend on: %s\n", r.gpus[0].name);
    SRunner *sr = srunner_create(cuda_backend_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
