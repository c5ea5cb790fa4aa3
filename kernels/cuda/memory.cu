/* Strided copies, dtype conversions, fills and broadcasting binary ops on
 * the GPU: one thread per output element (grid-stride), the element's
 * operand offsets computed from the shape and strides passed by value. */
#include "kernels/cuda/kernels.h"

#include "kernels/convert_math.h"
#include "kernels/cuda/launch.h"

/* Shape and up to three operands' strides, by value (kernel arguments). */
struct strided {
    int ndim;
    int64_t shape[STK_CUDA_MAX_DIMS];
    int64_t stride[3][STK_CUDA_MAX_DIMS];
};

static strided make_strided(int ndim, const int64_t *shape, const int64_t *s0, const int64_t *s1,
                            const int64_t *s2)
{
    strided t = {};
    t.ndim = ndim;
    const int64_t *s[3] = {s0, s1, s2};
    for (int d = 0; d < ndim; d++) {
        t.shape[d] = shape[d];
        for (int o = 0; o < 3; o++) t.stride[o][d] = s[o] ? s[o][d] : 0;
    }
    return t;
}

/* Offsets of the row-major element `i` in each of the first `nops` operands. */
static inline STK_HD void offsets_of(const strided &t, int64_t i, int nops, int64_t *off)
{
    for (int o = 0; o < nops; o++) off[o] = 0;
    for (int d = t.ndim - 1; d >= 0; d--) {
        int64_t idx = i % t.shape[d];
        i /= t.shape[d];
        for (int o = 0; o < nops; o++) off[o] += idx * t.stride[o][d];
    }
}

template <class T> STK_GLOBAL void copy_kernel(strided t, int64_t n, T *dst, const T *src)
{
    STK_GRID_STRIDE(i, n)
    {
        int64_t off[2];
        offsets_of(t, i, 2, off);
        dst[off[0]] = src[off[1]];
    }
}

STK_GLOBAL void convert_kernel(stk_dtype dst_dt, void *dst, stk_dtype src_dt, const void *src,
                               int64_t n)
{
    STK_GRID_STRIDE(i, n) stk_store_f64(dst_dt, dst, i, stk_load_f32(src_dt, src, i));
}

STK_GLOBAL void fill_kernel(stk_dtype dt, void *dst, int64_t n, double value)
{
    STK_GRID_STRIDE(i, n) stk_store_f64(dt, dst, i, value);
}

STK_GLOBAL void binary_kernel(stk_binary_op op, strided t, int64_t n, float *out, const float *a,
                              const float *b)
{
    STK_GRID_STRIDE(i, n)
    {
        int64_t off[2];
        offsets_of(t, i, 2, off);
        out[i] = stk_binary_f(op, a[off[0]], b[off[1]]);
    }
}

static int64_t numel_of(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

void stk_cuda_copy_strided(size_t elem_size, int ndim, const int64_t *shape, void *dst,
                           const int64_t *dst_strides, const void *src, const int64_t *src_strides,
                           stk_stream_t s)
{
    int64_t n = numel_of(ndim, shape);
    if (n == 0) return;
    strided t = make_strided(ndim, shape, dst_strides, src_strides, nullptr);
    switch (elem_size) {
    case 1:
        STK_LAUNCH(copy_kernel<uint8_t>, stk_blocks(n), STK_BLOCK, s, t, n, (uint8_t *)dst,
                   (const uint8_t *)src);
        break;
    case 2:
        STK_LAUNCH(copy_kernel<uint16_t>, stk_blocks(n), STK_BLOCK, s, t, n, (uint16_t *)dst,
                   (const uint16_t *)src);
        break;
    default:
        STK_LAUNCH(copy_kernel<uint32_t>, stk_blocks(n), STK_BLOCK, s, t, n, (uint32_t *)dst,
                   (const uint32_t *)src);
        break;
    }
}

void stk_cuda_convert(stk_dtype dst_dt, void *dst, stk_dtype src_dt, const void *src, int64_t n,
                      stk_stream_t s)
{
    if (n > 0) STK_LAUNCH(convert_kernel, stk_blocks(n), STK_BLOCK, s, dst_dt, dst, src_dt, src, n);
}

void stk_cuda_fill(stk_dtype dt, void *dst, int64_t n, double value, stk_stream_t s)
{
    if (n > 0) STK_LAUNCH(fill_kernel, stk_blocks(n), STK_BLOCK, s, dt, dst, n, value);
}

void stk_cuda_binary(stk_binary_op op, int ndim, const int64_t *shape, float *out, const float *a,
                     const int64_t *a_strides, const float *b, const int64_t *b_strides,
                     stk_stream_t s)
{
    int64_t n = numel_of(ndim, shape);
    if (n == 0) return;
    strided t = make_strided(ndim, shape, a_strides, b_strides, nullptr);
    STK_LAUNCH(binary_kernel, stk_blocks(n), STK_BLOCK, s, op, t, n, out, a, b);
}
