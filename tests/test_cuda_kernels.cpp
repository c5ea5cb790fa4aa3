/* The CUDA backend's own kernels (kernels/cuda/elementwise.cu) without a GPU:
 * compiled here as C++ with launch.h's host emulation (grid-stride loops over
 * 3 blocks of 5 "threads"), and compared with the CPU backend on the same
 * inputs. What this proves: the kernels' indexing (every element once, for
 * sizes that are not multiples of the grid) and their math, which is
 * kernels/scalar_math.h shared with the CPU loops. What it cannot: races
 * between real threads, memory coalescing, speed, the driver. The same
 * source is compiled by nvcc for sm_80/sm_90 in CUDA builds. */
#include "kernels/cuda/elementwise.cu"

extern "C" {
#include "check_main.h"
#include "common/rng.h"
#include "kernels/cpu_kernels_impl.h"
}

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

static std::vector<float> random_vec(int64_t n, uint64_t seed, float lo, float hi)
{
    std::vector<float> v((size_t)n);
    stk_rng r;
    stk_rng_init(&r, seed, 3, 0);
    for (auto &x : v) x = lo + (hi - lo) * (float)stk_rng_uniform(&r);
    return v;
}

static void expect_same(const char *what, const std::vector<float> &got,
                        const std::vector<float> &want)
{
    ck_assert_uint_eq(got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++)
        ck_assert_msg(fabsf(got[i] - want[i]) <= 1e-6f * (1.f + fabsf(want[i])),
                      "%s element %zu: kernel %.9g, cpu %.9g", what, i, got[i], want[i]);
}

static const int64_t N = 1000 + 7; /* not a multiple of the emulated grid */

START_TEST(test_unary_and_backward)
{
    stk_unary_op ops[] = {STK_UNARY_NEG,       STK_UNARY_RELU, STK_UNARY_GELU,
                          STK_UNARY_SIGMOID,   STK_UNARY_TANH, STK_UNARY_ADD_SCALAR,
                          STK_UNARY_MUL_SCALAR};
    auto x = random_vec(N, 1, -3, 3), gy = random_vec(N, 2, -1, 1);
    for (stk_unary_op op : ops) {
        std::vector<float> yk(N, -99.f), yc(N), gk(N, -99.f), gc(N);
        stk_cuda_unary(op, N, x.data(), yk.data(), 0.7f, nullptr);
        cpu_unary(op, N, x.data(), yc.data(), 0.7f);
        expect_same("unary", yk, yc);
        stk_cuda_unary_backward(op, N, x.data(), yc.data(), gy.data(), gk.data(), 0.7f, nullptr);
        cpu_unary_backward(op, N, x.data(), yc.data(), gy.data(), gc.data(), 0.7f);
        expect_same("unary backward", gk, gc);
    }
    /* relu6 over both of its kinks */
    auto x6 = random_vec(N, 6, -3, 9);
    std::vector<float> yk(N, -99.f), yc(N), gk(N, -99.f), gc(N);
    stk_cuda_unary(STK_UNARY_RELU6, N, x6.data(), yk.data(), 0.f, nullptr);
    cpu_unary(STK_UNARY_RELU6, N, x6.data(), yc.data(), 0.f);
    expect_same("relu6", yk, yc);
    stk_cuda_unary_backward(STK_UNARY_RELU6, N, x6.data(), yc.data(), gy.data(), gk.data(), 0.f,
                            nullptr);
    cpu_unary_backward(STK_UNARY_RELU6, N, x6.data(), yc.data(), gy.data(), gc.data(), 0.f);
    expect_same("relu6 backward", gk, gc);
}
END_TEST

START_TEST(test_binary_axpby_input)
{
    const int64_t rows = 37, cols = 29;
    auto a = random_vec(rows * cols, 3, -2, 2), b = random_vec(rows * cols, 4, 0.5f, 2);
    auto v = random_vec(cols, 5, 0.5f, 2);
    stk_binary_op ops[] = {STK_BINARY_ADD, STK_BINARY_SUB, STK_BINARY_MUL, STK_BINARY_DIV};
    int64_t shape[2] = {rows, cols}, full[2] = {cols, 1}, rowvec[2] = {0, 1};
    for (stk_binary_op op : ops) {
        std::vector<float> k(rows * cols, -99.f), c(rows * cols);
        stk_cuda_binary_same(op, rows * cols, a.data(), b.data(), k.data(), nullptr);
        cpu_binary(op, 2, shape, c.data(), a.data(), full, b.data(), full);
        expect_same("binary", k, c);
        stk_cuda_binary_rowvec(op, rows, cols, a.data(), v.data(), k.data(), nullptr);
        cpu_binary(op, 2, shape, c.data(), a.data(), full, v.data(), rowvec);
        expect_same("binary, broadcast row vector", k, c);
    }
    std::vector<float> yk = b, yc = b;
    stk_cuda_axpby(rows * cols, 0.3f, a.data(), -1.5f, yk.data(), nullptr);
    cpu_axpby(rows * cols, 0.3f, a.data(), -1.5f, yc.data());
    expect_same("axpby", yk, yc);

    /* the input op: 3 images of 5x7 pixels, 3 channels */
    const int64_t n = 3, h = 5, w = 7, ch = 3;
    std::vector<uint8_t> px(n * h * w * ch);
    for (size_t i = 0; i < px.size(); i++) px[i] = (uint8_t)(i * 37 % 256);
    float mean[3] = {0.485f, 0.456f, 0.406f}, stdv[3] = {0.229f, 0.224f, 0.225f};
    std::vector<float> ik(n * h * w * ch, -99.f), ic(n * h * w * ch);
    stk_cuda_input_u8_nhwc(n, h, w, ch, px.data(), mean, stdv, ik.data(), nullptr);
    cpu_input_u8_nhwc(n, h, w, ch, px.data(), mean, stdv, ic.data());
    expect_same("input op", ik, ic);
}
END_TEST

START_TEST(test_optimizer_steps)
{
    auto g1 = random_vec(N, 6, -1, 1), g2 = random_vec(N, 7, -1, 1);
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        auto pk = random_vec(N, 8, -1, 1), pc = pk;
        std::vector<float> bk(N), bc(N);
        for (int s = 0; s < 3; s++) {
            const float *g = s % 2 ? g2.data() : g1.data();
            stk_cuda_sgd_step(N, pk.data(), g, bk.data(), 0.1f, 0.9f, 0.f, 5e-4f, nesterov, s == 0,
                              nullptr);
            cpu_sgd_step(N, pc.data(), g, bc.data(), 0.1f, 0.9f, 0.f, 5e-4f, nesterov, s == 0);
        }
        expect_same("sgd parameters", pk, pc);
        expect_same("sgd momentum", bk, bc);
    }
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        auto pk = random_vec(N, 9, -1, 1), pc = pk;
        std::vector<float> mk(N), vk(N), mc(N), vc(N);
        for (int s = 1; s <= 3; s++) {
            const float *g = s % 2 ? g2.data() : g1.data();
            float bc1 = 1.f - powf(0.9f, (float)s), bc2 = 1.f - powf(0.999f, (float)s);
            stk_cuda_adam_step(N, pk.data(), g, mk.data(), vk.data(), 1e-3f, 0.9f, 0.999f, 1e-8f,
                               1e-2f, decoupled, bc1, bc2, nullptr);
            cpu_adam_step(N, pc.data(), g, mc.data(), vc.data(), 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f,
                          decoupled, bc1, bc2);
        }
        expect_same("adam parameters", pk, pc);
        expect_same("adam second moment", vk, vc);
    }
}
END_TEST

/* A deliberately broken kernel (one element per thread, no grid stride) is
 * caught by the emulation: most elements are never written. */
STK_GLOBAL void broken_scale(int64_t n, float *y)
{
    int64_t i = (int64_t)stk_emu_block_idx.x * stk_emu_block_dim.x + stk_emu_thread_idx.x;
    if (i < n) y[i] *= 2.f;
}

START_TEST(test_emulation_catches_missing_stride)
{
    std::vector<float> y(N, 1.f);
    STK_LAUNCH(broken_scale, stk_blocks(N), STK_BLOCK, nullptr, N, y.data());
    int64_t untouched = 0;
    for (float v : y) untouched += v == 1.f;
    ck_assert_int_eq(untouched, N - 15); /* only 3 x 5 emulated threads ran once */
}
END_TEST

static Suite *cuda_kernels_suite(void)
{
    Suite *s = suite_create("cuda_kernels");
    TCase *t = tcase_create("host emulation");
    tcase_add_test(t, test_unary_and_backward);
    tcase_add_test(t, test_binary_axpby_input);
    tcase_add_test(t, test_optimizer_steps);
    tcase_add_test(t, test_emulation_catches_missing_stride);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return stk_check_run(cuda_kernels_suite()); }
