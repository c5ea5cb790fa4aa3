/* Element-wise kernels, copies and reductions on the CPU. Inner loops run
 * over the last (coalesced) dimension with constant strides so that the
 * compiler vectorises them; outer rows are split across OpenMP threads. */
#include "kernels/cpu_kernels_impl.h"

#include "kernels/convert_math.h"

#include <string.h>

/* Merge adjacent dimensions that every operand walks contiguously
 * (stride[i] == stride[i+1] * shape[i+1]), so a broadcast over NCHW by a
 * [1, C, 1, 1] tensor becomes three dimensions instead of four and the inner
 * loop is as long as possible. Returns the new rank. */
static int coalesce(int ndim, int64_t *shape, int nops, int64_t **strides)
{
    if (ndim == 0) return 0;
    int out = 0;
    for (int i = 1; i < ndim; i++) {
        bool merge = true;
        for (int o = 0; o < nops; o++)
            if (strides[o][out] != strides[o][i] * shape[i]) merge = false;
        if (shape[i] == 1) continue; /* size-1 dims never matter */
        if (shape[out] == 1) merge = true;
        if (merge) {
            for (int o = 0; o < nops; o++)
                strides[o][out] = shape[out] == 1 ? strides[o][i] : strides[o][i];
            shape[out] *= shape[i];
        } else {
            out++;
            shape[out] = shape[i];
            for (int o = 0; o < nops; o++) strides[o][out] = strides[o][i];
        }
    }
    return out + 1;
}

/* Offsets of row `r` (all dims but the last) for each operand. */
static void row_offsets(int ndim, const int64_t *shape, int64_t r, int nops,
                        int64_t *const *strides, int64_t *off)
{
    for (int o = 0; o < nops; o++) off[o] = 0;
    for (int d = ndim - 2; d >= 0; d--) {
        int64_t i = r % shape[d];
        r /= shape[d];
        for (int o = 0; o < nops; o++) off[o] += i * strides[o][d];
    }
}

void cpu_copy_strided(size_t elem_size, int ndim, const int64_t *shape_in, void *dst,
                      const int64_t *dst_strides, const void *src, const int64_t *src_strides)
{
    int64_t shape[8], ds[8], ss[8], *st[2] = {ds, ss};
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        shape[d] = shape_in[d];
        ds[d] = dst_strides[d];
        ss[d] = src_strides[d];
        numel *= shape[d];
    }
    if (numel == 0) return;
    ndim = coalesce(ndim, shape, 2, st);
    if (ndim == 0) {
        memcpy(dst, src, elem_size);
        return;
    }
    int64_t inner = shape[ndim - 1], rows = numel / inner;
    int64_t di = ds[ndim - 1], si = ss[ndim - 1];
#pragma omp parallel for if (numel > STK_OMP_MIN_WORK) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t off[2];
        row_offsets(ndim, shape, r, 2, st, off);
        if (elem_size == 4) {
            float *d = (float *)dst + off[0];
            const float *s = (const float *)src + off[1];
            if (di == 1 && si == 1)
                memcpy(d, s, (size_t)inner * 4);
            else
                for (int64_t j = 0; j < inner; j++) d[j * di] = s[j * si];
        } else {
            char *d = (char *)dst + off[0] * (int64_t)elem_size;
            const char *s = (const char *)src + off[1] * (int64_t)elem_size;
            for (int64_t j = 0; j < inner; j++)
                memcpy(d + j * di * (int64_t)elem_size, s + j * si * (int64_t)elem_size, elem_size);
        }
    }
}

void cpu_convert(stk_dtype dst_dt, void *dst, stk_dtype src_dt, const void *src, int64_t n)
{
    if (dst_dt == src_dt) {
        memcpy(dst, src, (size_t)n * stk_dtype_size(dst_dt));
        return;
    }
    /* i32 -> i32 never gets here; i32 <-> f32 through float is exact up to 2^24. */
    if (src_dt == STK_I32 && dst_dt != STK_F32 && dst_dt != STK_F16 && dst_dt != STK_BF16) {
        for (int64_t i = 0; i < n; i++)
            stk_store_f64(dst_dt, dst, i, (double)((const int32_t *)src)[i]);
        return;
    }
#pragma omp parallel for if (n > STK_OMP_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < n; i++) stk_store_f64(dst_dt, dst, i, stk_load_f32(src_dt, src, i));
}

void cpu_fill(stk_dtype dt, void *dst, int64_t n, double value)
{
    if (value == 0.0) {
        memset(dst, 0, (size_t)n * stk_dtype_size(dt));
        return;
    }
    if (dt == STK_F32) {
        float v = (float)value, *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = v;
        return;
    }
    for (int64_t i = 0; i < n; i++) stk_store_f64(dt, dst, i, value);
}

/* One inner row of a binary op: the op and the two inner strides are
 * constants in each expansion so the loop vectorises. */
#define BINARY_ROW(EXPR)                                                                           \
    do {                                                                                           \
        if (sa == 1 && sb == 1)                                                                    \
            for (int64_t j = 0; j < inner; j++) {                                                  \
                float x = pa[j], y = pb[j];                                                        \
                po[j] = EXPR;                                                                      \
            }                                                                                      \
        else if (sa == 1 && sb == 0) {                                                             \
            float y = pb[0];                                                                       \
            for (int64_t j = 0; j < inner; j++) {                                                  \
                float x = pa[j];                                                                   \
                po[j] = EXPR;                                                                      \
            }                                                                                      \
        } else if (sa == 0 && sb == 1) {                                                           \
            float x = pa[0];                                                                       \
            for (int64_t j = 0; j < inner; j++) {                                                  \
                float y = pb[j];                                                                   \
                po[j] = EXPR;                                                                      \
            }                                                                                      \
        } else                                                                                     \
            for (int64_t j = 0; j < inner; j++) {                                                  \
                float x = pa[j * sa], y = pb[j * sb];                                              \
                po[j] = EXPR;                                                                      \
            }                                                                                      \
    } while (0)

void cpu_binary(stk_binary_op op, int ndim, const int64_t *shape_in, float *out, const float *a,
                const int64_t *a_strides, const float *b, const int64_t *b_strides)
{
    int64_t shape[8], os[8], as[8], bs[8], *st[3] = {os, as, bs};
    int64_t numel = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        shape[d] = shape_in[d];
        os[d] = numel;
        as[d] = a_strides[d];
        bs[d] = b_strides[d];
        numel *= shape[d];
    }
    if (numel == 0) return;
    ndim = coalesce(ndim, shape, 3, st);
    int64_t inner = ndim ? shape[ndim - 1] : 1, rows = numel / inner;
    int64_t sa = ndim ? as[ndim - 1] : 0, sb = ndim ? bs[ndim - 1] : 0;
#pragma omp parallel for if (numel > STK_OMP_MIN_WORK) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t off[3] = {0, 0, 0};
        if (ndim) row_offsets(ndim, shape, r, 3, st, off);
        float *po = out + off[0];
        const float *pa = a + off[1], *pb = b + off[2];
        switch (op) {
        case STK_BINARY_ADD: BINARY_ROW(x + y); break;
        case STK_BINARY_SUB: BINARY_ROW(x - y); break;
        case STK_BINARY_MUL: BINARY_ROW(x * y); break;
        case STK_BINARY_DIV: BINARY_ROW(x / y); break;
        }
    }
}

/* One loop per op with the op a literal: OpenMP outlines the loop body
 * before inlining, so a loop over a variable op would switch on it for
 * every element (ReLU6's backward spent 19% of mobilenet_v2's step so) and
 * never vectorise. Cheap ops split across threads from STK_OMP_MIN_WORK
 * elements, the transcendental ones from an eighth of it. */
#define UNARY_CASE(OP, PRAGMA)                                                                     \
    case OP:                                                                                       \
        _Pragma(PRAGMA) for (int64_t i = 0; i < n; i++) y[i] = stk_unary_f(OP, x[i], alpha);       \
        return
#define UNARY_GRAD_CASE(OP, PRAGMA)                                                                \
    case OP:                                                                                       \
        _Pragma(PRAGMA) for (int64_t i = 0; i < n; i++) gx[i] =                                    \
            stk_unary_grad(OP, x ? x[i] : 0.f, y ? y[i] : 0.f, gy[i], alpha);                      \
        return
#define CHEAP "omp parallel for if (n > STK_OMP_MIN_WORK) schedule(static)"
#define HEAVY "omp parallel for if (n > STK_OMP_MIN_WORK / 8) schedule(static)"

/* The transcendental ones (GELU, SiLU, sigmoid: kernels/scalar_math.h's
 * stk_expf), where oneDNN's primitives do not run them
 * (cpu_dnnl_norms.c), in AVX-512, AVX2 + FMA and baseline builds chosen by
 * the loader (target_clones): the baseline build's 4-wide SSE2 loop ran
 * GELU's backward at 85 M elements/s, a quarter of a vit_tiny step
 * (kernels/README.md, "Activations"). Chunks of a fixed size across the
 * threads, each a plain loop of one build. */
#define EXP_CHUNK 8192
/* FROM_X: the gradient is a function of the input (GELU, SiLU), else of
 * the output (sigmoid): one pointer read, no select on a NULL one in the
 * loop (which kept it scalar). */
#define EXP_VARIANTS(OP, NAME, FROM_X)                                                             \
    STK_CPU_CLONES static void NAME##_loop(int64_t n, const float *x, float *y)                    \
    {                                                                                              \
        for (int64_t i = 0; i < n; i++) y[i] = stk_unary_f(OP, x[i], 0.f);                         \
    }                                                                                              \
    STK_CPU_CLONES static void NAME##_grad_loop(int64_t n, const float *x, const float *y,         \
                                                const float *gy, float *gx)                        \
    {                                                                                              \
        const float *v = FROM_X ? x : y;                                                           \
        for (int64_t i = 0; i < n; i++)                                                            \
            gx[i] = stk_unary_grad(OP, FROM_X ? v[i] : 0.f, FROM_X ? 0.f : v[i], gy[i], 0.f);      \
    }
EXP_VARIANTS(STK_UNARY_GELU, gelu, 1)
EXP_VARIANTS(STK_UNARY_SILU, silu, 1)
EXP_VARIANTS(STK_UNARY_SIGMOID, sigmoid, 0)

typedef void (*exp_fn)(int64_t n, const float *x, float *y);
typedef void (*exp_grad_fn)(int64_t n, const float *x, const float *y, const float *gy, float *gx);

static void exp_forward(exp_fn f, int64_t n, const float *x, float *y)
{
    int64_t chunks = (n + EXP_CHUNK - 1) / EXP_CHUNK;
#pragma omp parallel for if (n > STK_OMP_MIN_WORK / 8) schedule(static)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t b = c * EXP_CHUNK, len = n - b < EXP_CHUNK ? n - b : EXP_CHUNK;
        f(len, x + b, y + b);
    }
}

static void exp_backward(exp_grad_fn f, int64_t n, const float *x, const float *y, const float *gy,
                         float *gx)
{
    int64_t chunks = (n + EXP_CHUNK - 1) / EXP_CHUNK;
#pragma omp parallel for if (n > STK_OMP_MIN_WORK / 8) schedule(static)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t b = c * EXP_CHUNK, len = n - b < EXP_CHUNK ? n - b : EXP_CHUNK;
        f(len, x ? x + b : NULL, y ? y + b : NULL, gy + b, gx + b);
    }
}

#define EXP_CASE(OP, NAME)                                                                         \
    case OP:                                                                                       \
        if (cpu_dnnl_unary(OP, n, x, y)) return;                                                   \
        exp_forward(NAME##_loop, n, x, y);                                                         \
        return
#define EXP_GRAD_CASE(OP, NAME)                                                                    \
    case OP:                                                                                       \
        if (cpu_dnnl_unary_backward(OP, n, x, gy, gx)) return;                                     \
        exp_backward(NAME##_grad_loop, n, x, y, gy, gx);                                           \
        return

/* In place (x == y) is allowed: no restrict; at -O3 the loops are vectorised
 * behind a run-time overlap check. */
void cpu_unary(stk_unary_op op, int64_t n, const float *x, float *y, float alpha)
{
    switch (op) {
        UNARY_CASE(STK_UNARY_NEG, CHEAP);
        UNARY_CASE(STK_UNARY_RELU, CHEAP);
        UNARY_CASE(STK_UNARY_RELU6, CHEAP);
        EXP_CASE(STK_UNARY_GELU, gelu);
        EXP_CASE(STK_UNARY_SIGMOID, sigmoid);
        UNARY_CASE(STK_UNARY_TANH, HEAVY);
        UNARY_CASE(STK_UNARY_ADD_SCALAR, CHEAP);
        UNARY_CASE(STK_UNARY_MUL_SCALAR, CHEAP);
        EXP_CASE(STK_UNARY_SILU, silu);
        UNARY_CASE(STK_UNARY_HARDSIGMOID, CHEAP);
        UNARY_CASE(STK_UNARY_HARDSWISH, CHEAP);
    }
}

void cpu_unary_backward(stk_unary_op op, int64_t n, const float *x, const float *y, const float *gy,
                        float *gx, float alpha)
{
    switch (op) {
        UNARY_GRAD_CASE(STK_UNARY_NEG, CHEAP);
        UNARY_GRAD_CASE(STK_UNARY_RELU, CHEAP);
        UNARY_GRAD_CASE(STK_UNARY_RELU6, CHEAP);
        EXP_GRAD_CASE(STK_UNARY_GELU, gelu);
        EXP_GRAD_CASE(STK_UNARY_SIGMOID, sigmoid);
        UNARY_GRAD_CASE(STK_UNARY_TANH, HEAVY);
        UNARY_GRAD_CASE(STK_UNARY_ADD_SCALAR, CHEAP);
        UNARY_GRAD_CASE(STK_UNARY_MUL_SCALAR, CHEAP);
        EXP_GRAD_CASE(STK_UNARY_SILU, silu);
        UNARY_GRAD_CASE(STK_UNARY_HARDSIGMOID, CHEAP);
        UNARY_GRAD_CASE(STK_UNARY_HARDSWISH, CHEAP);
    }
}

void cpu_axpby(int64_t n, float a, const float *restrict x, float b, float *restrict y)
{
#pragma omp parallel for if (n > STK_OMP_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] = a * x[i] + b * y[i];
}

void cpu_sum_to(int ndim, const int64_t *shape_in, const float *x, const int64_t *y_strides,
                float *y, int64_t y_numel)
{
    /* Coalesce with x's contiguous strides; a dim is reduced where y's stride is 0. */
    int64_t shape[8], xs[8], ys[8], *st[2] = {xs, ys};
    int64_t numel = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        shape[d] = shape_in[d];
        xs[d] = numel;
        ys[d] = shape[d] == 1 ? 0 : y_strides[d];
        numel *= shape[d];
    }
    memset(y, 0, (size_t)y_numel * sizeof *y);
    if (numel == 0) return;
    ndim = coalesce(ndim, shape, 2, st);
    if (ndim == 0) {
        y[0] = x[0];
        return;
    }
    /* Group the dims into kept (y stride != 0) and reduced ones; each output
     * element sums its reduced elements, with the output elements split
     * across threads (no two threads write one element). */
    int kept[8], red[8], nk = 0, nr = 0;
    for (int d = 0; d < ndim; d++) {
        if (ys[d])
            kept[nk++] = d;
        else
            red[nr++] = d;
    }
    int64_t n_out = 1, n_red = 1;
    for (int i = 0; i < nk; i++) n_out *= shape[kept[i]];
    for (int i = 0; i < nr; i++) n_red *= shape[red[i]];
    bool last_reduced = nr && red[nr - 1] == ndim - 1;
    int64_t run = last_reduced ? shape[ndim - 1] : 1; /* contiguous inner run of reduced elems */
    if (!last_reduced && nk && kept[nk - 1] == ndim - 1 && n_out > 1) {
        /* Reduce leading/middle dims with a contiguous kept inner dim: add whole rows
         * (vectorises), split by chunks of the inner dim across threads. */
        int64_t inner = shape[ndim - 1], outer_rows = numel / inner;
#pragma omp parallel for if (numel > STK_OMP_MIN_WORK) schedule(static)
        for (int64_t j0 = 0; j0 < inner; j0 += 256) {
            int64_t j1 = j0 + 256 < inner ? j0 + 256 : inner;
            for (int64_t r = 0; r < outer_rows; r++) {
                int64_t off[2];
                row_offsets(ndim, shape, r, 2, st, off);
                const float *px = x + off[0];
                float *py = y + off[1];
                for (int64_t j = j0; j < j1; j++) py[j] += px[j];
            }
        }
        return;
    }
#pragma omp parallel for if (numel > STK_OMP_MIN_WORK) schedule(static)
    for (int64_t o = 0; o < n_out; o++) {
        int64_t xo = 0, yo = 0, rem = o;
        for (int i = nk - 1; i >= 0; i--) {
            int d = kept[i];
            int64_t idx = rem % shape[d];
            rem /= shape[d];
            xo += idx * xs[d];
            yo += idx * ys[d];
        }
        double acc = 0.0;
        for (int64_t r = 0; r < n_red; r += run) {
            int64_t xr = 0, rr = r / run;
            for (int i = nr - 1 - (last_reduced ? 1 : 0); i >= 0; i--) {
                int d = red[i];
                xr += (rr % shape[d]) * xs[d];
                rr /= shape[d];
            }
            const float *px = x + xo + xr;
            float s = 0.f;
            for (int64_t j = 0; j < run; j++) s += px[j];
            acc += s;
        }
        y[yo] = (float)acc;
    }
}
