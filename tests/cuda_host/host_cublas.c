/* cuBLAS's SGEMMs on the host, with cuBLAS's column-major semantics,
 * transposes, leading dimensions and argument checks, queued on the
 * handle's stream like the real library. Naive loops with a double
 * accumulator: a reference, not a fast GEMM. */
#include "host_cuda.h"

#include "common/half.h"

#include <cublas_v2.h>
#include <stdint.h>
#include <stdlib.h>

struct cublasContext {
    cudaStream_t stream;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    *handle = calloc(1, sizeof **handle);
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    if (handle && handle->stream) cudaStreamSynchronize(handle->stream);
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
    handle->stream = streamId;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    (void)handle, (void)mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
    }
}

typedef struct gemm_job {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc, batch;
    float alpha, beta;
    const void *a, *b;
    bool half; /* A and B are IEEE half (cublasGemmStridedBatchedEx) */
    float *c;
    long long sa, sb, sc;
} gemm_job;

static float load(const gemm_job *g, const void *p, int64_t i)
{
    return g->half ? stk_f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* Column-major: element (i, j) of X with leading dimension ld is X[i + j*ld]. */
static void run_gemm(void *arg)
{
    gemm_job *g = arg;
    for (int p = 0; p < g->batch; p++) {
        int64_t a0 = p * g->sa, b0 = p * g->sb;
        float *c = g->c + p * g->sc;
        for (int j = 0; j < g->n; j++)
            for (int i = 0; i < g->m; i++) {
                double acc = 0.0;
                for (int l = 0; l < g->k; l++) {
                    float av = load(g, g->a,
                                    a0 + (g->ta == CUBLAS_OP_N ? i + (int64_t)l * g->lda
                                                               : l + (int64_t)i * g->lda));
                    float bv = load(g, g->b,
                                    b0 + (g->tb == CUBLAS_OP_N ? l + (int64_t)j * g->ldb
                                                               : j + (int64_t)l * g->ldb));
                    acc += (double)av * bv;
                }
                float *cij = &c[i + (int64_t)j * g->ldc];
                /* beta == 0: C is not read (it may hold NaN), as cuBLAS */
                *cij = (float)(g->alpha * acc) + (g->beta != 0.f ? g->beta * *cij : 0.f);
            }
    }
    free(g);
}

static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *alpha, const void *a, int lda, long long sa,
                           const void *b, int ldb, long long sb, const float *beta, float *c,
                           int ldc, long long sc, int batch, bool half)
{
    int a_rows = ta == CUBLAS_OP_N ? m : k, b_rows = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < (a_rows > 1 ? a_rows : 1) ||
        ldb < (b_rows > 1 ? b_rows : 1) || ldc < (m > 1 ? m : 1) ||
        (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T)) {
        stk_host_cuda_misuse("cublasSgemm: m %d n %d k %d lda %d ldb %d ldc %d (transa %d transb "
                             "%d): a leading dimension is too small",
                             m, n, k, lda, ldb, ldc, (int)ta, (int)tb);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
    gemm_job *g = malloc(sizeof *g);
    if (!g) return CUBLAS_STATUS_ALLOC_FAILED;
    *g =
        (gemm_job){ta, tb, m, n, k, lda, ldb, ldc, batch, *alpha, *beta, a, b, half, c, sa, sb, sc};
    stk_host_cuda_submit(h->stream, run_gemm, g);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc)
{
    return gemm(handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1,
                false);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long int strideA, const float *B, int ldb,
                                         long long int strideB, const float *beta, float *C,
                                         int ldc, long long int strideC, int batchCount)
{
    return gemm(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C,
                ldc, strideC, batchCount, false);
}

/* Only the mixed-precision form Stoke uses: half A and B, f32 C, f32 compute. */
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long int strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    (void)algo;
    if (Atype != CUDA_R_16F || Btype != CUDA_R_16F || Ctype != CUDA_R_32F ||
        computeType != CUBLAS_COMPUTE_32F) {
        stk_host_cuda_misuse("cublasGemmStridedBatchedEx: only 16F x 16F -> 32F with 32F compute "
                             "here (got %d %d %d %d)",
                             (int)Atype, (int)Btype, (int)Ctype, (int)computeType);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    return gemm(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C,
                ldc, strideC, batchCount, true);
}
