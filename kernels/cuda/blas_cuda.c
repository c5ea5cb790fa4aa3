/* GEMMs through cuBLAS, and the one place where row-major meets cuBLAS's
 * column-major.
 *
 * The engine's matrices are row-major: element (i, j) of an m x k matrix A
 * with leading dimension lda is at A[i * lda + j]. cuBLAS reads memory
 * column-major: element (i, j) of its matrix is at A[i + j * lda]. The same
 * bytes are therefore A as row-major and A^T as column-major, with the same
 * leading dimension. The engine wants C = op(A) op(B) (row-major, m x n);
 * transposing both sides, C^T = op(B)^T op(A)^T, and C^T column-major is C
 * row-major. So cuBLAS is asked for the n x m product of "B" times "A":
 *
 *     cublasSgemm(opB, opA, n, m, k, alpha, B, ldb, A, lda, beta, C, ldc)
 *
 * where opX = CUBLAS_OP_T exactly when the engine's trans_x is set (the
 * engine's "A is stored transposed" is cuBLAS's "A^T is stored", read from
 * the other side). Leading dimensions and strides pass through unchanged.
 * Batches use the strided-batched call; a stride of 0 repeats one matrix
 * (the engine's broadcasting), which cuBLAS allows. */
#include "kernels/cuda/backend_cuda_impl.h"
#include "kernels/cuda/context.h"

#include <limits.h>

/* The dimensions fit cuBLAS's 32-bit API (else the error is noted). */
static bool dims_fit(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                     int64_t ldc)
{
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX || batch > INT_MAX) {
        stk_cuda_note(stk_error(STK_ERR_UNSUPPORTED,
                                "matmul: a dimension above 2^31 is beyond cuBLAS's 32-bit API"));
        return false;
    }
    return true;
}

void stk_cublas_gemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t m, int64_t n,
                             int64_t k, float alpha, const float *a, int64_t lda, int64_t stride_a,
                             const float *b, int64_t ldb, int64_t stride_b, float beta, float *c,
                             int64_t ldc, int64_t stride_c)
{
    if (batch == 0 || m == 0 || n == 0 || !dims_fit(batch, m, n, k, lda, ldb, ldc)) return;
    stk_cuda_ctx *cx;
    if (stk_cuda_context(&cx) != STK_OK) return;
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t e;
    if (batch == 1)
        e = cublasSgemm(cx->blas, op_b, op_a, (int)n, (int)m, (int)k, &alpha, b, (int)ldb, a,
                        (int)lda, &beta, c, (int)ldc);
    else
        e = cublasSgemmStridedBatched(cx->blas, op_b, op_a, (int)n, (int)m, (int)k, &alpha, b,
                                      (int)ldb, stride_b, a, (int)lda, stride_a, &beta, c, (int)ldc,
                                      stride_c, (int)batch);
    stk_cuda_note(stk_cublas_check(e, "matmul (cuBLAS)"));
}

/* The same mapping with half A and B, f32 C and f32 accumulation (--amp):
 * tensor cores on Volta and later. */
void stk_cublas_gemm_batched_f16(int64_t batch, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                 int64_t k, float alpha, const uint16_t *a, int64_t lda,
                                 int64_t stride_a, const uint16_t *b, int64_t ldb, int64_t stride_b,
                                 float beta, float *c, int64_t ldc, int64_t stride_c)
{
    if (batch == 0 || m == 0 || n == 0 || !dims_fit(batch, m, n, k, lda, ldb, ldc)) return;
    stk_cuda_ctx *cx;
    if (stk_cuda_context(&cx) != STK_OK) return;
    cublasStatus_t e = cublasGemmStridedBatchedEx(
        cx->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n,
        (int)m, (int)k, &alpha, b, CUDA_R_16F, (int)ldb, stride_b, a, CUDA_R_16F, (int)lda,
        stride_a, &beta, c, CUDA_R_32F, (int)ldc, stride_c, (int)batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    stk_cuda_note(stk_cublas_check(e, "matmul f16 (cuBLAS)"));
}
