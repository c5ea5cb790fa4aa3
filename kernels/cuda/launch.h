/* Kernel launch that is CUDA's under nvcc and plain loops elsewhere, so that
 * one kernel source runs on a GPU and, compiled as C++ on the host, in the
 * GPU-less tests (tests/test_cuda_kernels.cpp), where it is compared with the
 * CPU backend.
 *
 *     STK_GLOBAL void scale(int64_t n, float a, float *y)
 *     {
 *         STK_GRID_STRIDE(i, n) y[i] *= a;
 *     }
 *     STK_LAUNCH(scale, stk_blocks(n), STK_BLOCK, stream, n, a, y);
 *
 * Kernels are written grid-stride (every thread walks i, i + threads, ...),
 * which is correct for any grid, so the host emulation runs a small grid of
 * one block of a few "threads" in turn (no parallelism, no shared memory:
 * what it checks is the indexing and the math, not races).
 */
#pragma once

#include <stdint.h>

#define STK_BLOCK 256

#ifdef __CUDACC__

#define STK_GLOBAL __global__
#define STK_GRID_STRIDE(i, n)                                                                      \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)
#define STK_LAUNCH(kernel, grid, block, stream, ...)                                               \
    kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)

#else /* host emulation */

#include <functional>

#define STK_GLOBAL static
struct stk_emu_dim {
    unsigned x;
};
static thread_local stk_emu_dim stk_emu_block_idx, stk_emu_thread_idx, stk_emu_block_dim,
    stk_emu_grid_dim;
#define STK_GRID_STRIDE(i, n)                                                                      \
    for (int64_t i = (int64_t)stk_emu_block_idx.x * stk_emu_block_dim.x + stk_emu_thread_idx.x;    \
         i < (n); i += (int64_t)stk_emu_grid_dim.x * stk_emu_block_dim.x)

/* The test build's host CUDA runtime (tests/cuda_host) defines this: it runs
 * `fn(arg)` in order on `stream`'s worker thread, as a GPU runs a kernel
 * after the stream's earlier work. Without it (or on the null stream) the
 * kernel runs at once on the calling thread. */
extern "C" void stk_emu_submit(void *stream, void (*fn)(void *), void *arg) __attribute__((weak));

/* The grid and block sizes asked for are replaced by 3 blocks of 5 threads:
 * small enough to run fast, odd enough that a kernel that assumed one
 * element per thread, or forgot the stride, computes the wrong result. The
 * arguments are evaluated and copied at launch, as CUDA copies them. */
template <class... P, class... A>
static void stk_emu_launch(void *stream, void (*kernel)(P...), A... args)
{
    auto *task = new std::function<void()>([=]() {
        stk_emu_grid_dim.x = 3;
        stk_emu_block_dim.x = 5;
        for (unsigned b = 0; b < 3; b++)
            for (unsigned t = 0; t < 5; t++) {
                stk_emu_block_idx.x = b;
                stk_emu_thread_idx.x = t;
                kernel(args...);
            }
    });
    void (*run)(void *) = [](void *p) {
        auto *t = static_cast<std::function<void()> *>(p);
        (*t)();
        delete t;
    };
    if (stream && stk_emu_submit)
        stk_emu_submit(stream, run, task);
    else
        run(task);
}

#define STK_LAUNCH(kernel, grid, block, stream, ...)                                               \
    do {                                                                                           \
        (void)(grid), (void)(block);                                                               \
        stk_emu_launch((void *)(stream), kernel, __VA_ARGS__);                                     \
    } while (0)

#endif

/* Blocks for n elements, capped (grid-stride kernels cover the rest). */
static inline unsigned stk_blocks(int64_t n)
{
    int64_t b = (n + STK_BLOCK - 1) / STK_BLOCK;
    return (unsigned)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}
