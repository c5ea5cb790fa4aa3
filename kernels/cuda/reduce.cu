/* sum_to on the GPU, deterministic: pass 1 sums fixed chunks of each
 * output's reduced elements (one thread per output and chunk), pass 2 adds
 * each output's chunk sums in order. The result does not depend on the grid
 * or on timing, so two runs (and the host emulation) agree bit for bit,
 * which atomics would not give. (Not CUB: CUB's segmented reductions need
 * contiguous segments and have no host emulation for the GPU-less tests;
 * this kernel handles any kept/reduced dimension pattern in one source.) */
#include "kernels/cuda/kernels.h"

#include "kernels/cuda/launch.h"

#define CHUNK 1024

/* The kept and the reduced dimensions of x, with their strides. */
struct split_dims {
    int nk, nr;
    int64_t k_shape[STK_CUDA_MAX_DIMS], k_xs[STK_CUDA_MAX_DIMS], k_ys[STK_CUDA_MAX_DIMS];
    int64_t r_shape[STK_CUDA_MAX_DIMS], r_xs[STK_CUDA_MAX_DIMS];
    int64_t n_out, n_red, n_chunks;
};

static split_dims split(int ndim, const int64_t *shape, const int64_t *y_strides)
{
    split_dims s = {};
    int64_t xs[STK_CUDA_MAX_DIMS], stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        xs[d] = stride;
        stride *= shape[d];
    }
    s.n_out = s.n_red = 1;
    for (int d = 0; d < ndim; d++) {
        if (y_strides[d]) {
            s.k_shape[s.nk] = shape[d], s.k_xs[s.nk] = xs[d], s.k_ys[s.nk] = y_strides[d];
            s.nk++;
            s.n_out *= shape[d];
        } else {
            s.r_shape[s.nr] = shape[d], s.r_xs[s.nr] = xs[d];
            s.nr++;
            s.n_red *= shape[d];
        }
    }
    s.n_chunks = (s.n_red + CHUNK - 1) / CHUNK;
    if (s.n_chunks < 1) s.n_chunks = 1;
    return s;
}

static inline STK_HD void out_offsets(const split_dims &s, int64_t o, int64_t *xo, int64_t *yo)
{
    *xo = *yo = 0;
    for (int i = s.nk - 1; i >= 0; i--) {
        int64_t idx = o % s.k_shape[i];
        o /= s.k_shape[i];
        *xo += idx * s.k_xs[i];
        *yo += idx * s.k_ys[i];
    }
}

STK_GLOBAL void partial_kernel(split_dims s, const float *x, float *partial)
{
    STK_GRID_STRIDE(t, s.n_out * s.n_chunks)
    {
        int64_t o = t / s.n_chunks, j = t % s.n_chunks, xo, yo;
        out_offsets(s, o, &xo, &yo);
        int64_t r1 = (j + 1) * CHUNK < s.n_red ? (j + 1) * CHUNK : s.n_red;
        float acc = 0.f;
        for (int64_t r = j * CHUNK; r < r1; r++) {
            int64_t off = xo, rem = r;
            for (int i = s.nr - 1; i >= 0; i--) {
                off += (rem % s.r_shape[i]) * s.r_xs[i];
                rem /= s.r_shape[i];
            }
            acc += x[off];
        }
        partial[t] = acc;
    }
}

STK_GLOBAL void combine_kernel(split_dims s, const float *partial, float *y)
{
    STK_GRID_STRIDE(o, s.n_out)
    {
        int64_t xo, yo;
        out_offsets(s, o, &xo, &yo);
        double acc = 0.0;
        for (int64_t j = 0; j < s.n_chunks; j++) acc += partial[o * s.n_chunks + j];
        y[yo] = (float)acc;
    }
}

size_t stk_cuda_sum_to_scratch(int ndim, const int64_t *shape, const int64_t *y_strides)
{
    split_dims s = split(ndim, shape, y_strides);
    return (size_t)(s.n_out * s.n_chunks);
}

void stk_cuda_sum_to(int ndim, const int64_t *shape, const float *x, const int64_t *y_strides,
                     float *y, float *scratch, stk_stream_t st)
{
    split_dims s = split(ndim, shape, y_strides);
    if (s.n_out == 0) return;
    STK_LAUNCH(partial_kernel, stk_blocks(s.n_out * s.n_chunks), STK_BLOCK, st, s, x, scratch);
    STK_LAUNCH(combine_kernel, stk_blocks(s.n_out), STK_BLOCK, st, s, scratch, y);
}
