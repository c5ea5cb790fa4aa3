/* GEMM on the CPU through oneDNN's dnnl_sgemm: measured fastest of Debian's
 * candidates on every training shape that matters (kernels/README.md), and it
 * picks its kernels by instruction set at run time, so users set nothing. */
#include "kernels/cpu_kernels_impl.h"

#include <omp.h>

#include <dnnl.h>

void cpu_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
              int64_t ldc)
{
    if (m == 0 || n == 0) return;
    if (k == 0) { /* C = beta C */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
        return;
    }
    /* Arguments are checked by the ops; dnnl_sgemm fails only on bad ones. */
    dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c,
               ldc);
}

void cpu_gemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                      float alpha, const float *a, int64_t lda, int64_t stride_a, const float *b,
                      int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                      int64_t stride_c)
{
    /* Many small matrices: one per thread (oneDNN runs single-threaded inside
     * a parallel region); few large ones: each GEMM uses every thread. Many
     * mid-sized ones (attention's q k^T: 96 of 65 x 64 x 65 in a vit_tiny
     * batch of 32) also go one per thread: each GEMM on both threads spent
     * a tenth of the step in the threads' barriers. */
    bool small = batch > 1 && (m * n * k < 64 * 64 * 64 ||
                               (batch >= 4 * omp_get_max_threads() && m * n * k < 256 * 256 * 256));
    if (small) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < batch; i++)
            cpu_gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb,
                     beta, c + i * stride_c, ldc);
        return;
    }
    for (int64_t i = 0; i < batch; i++)
        cpu_gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb,
                 beta, c + i * stride_c, ldc);
}
