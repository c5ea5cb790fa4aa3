/* cuBLAS's SGEMMs on the host, with cuBLAS's column-major semantics,
 * transposes, leading dimensions and argument checks, queued on the
 * handle's stream like the real library. Naive loops with a double
 * accumulator: a reference, not a fast GEMM. */
#include "host_cuda.h"

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
    const float *a, *b;
    float *c;
    long long sa, sb, sc;
} gemm_job;

/* Column-major: element (i, j) of X with leading dimension ld is X[i + j*ld]. */
static void run_gemm(void *arg)
{
    gemm_job *g = arg;
    for (int p = 0; p < g->batch; p++) {
        const float *a = g->a + p * g->sa, *b = g->b + p * g->sb;
        float *c = g->c + p * g->sc;
        for (int j = 0; j < g->n; j++)
            for (int i = 0; i < g->m; i++) {
                double acc = 0.0;
                for (int l = 0; l < g->k; l++) {
                    float av = g->ta == CUBLAS_OP_N ? a[i + (int64_t)l * g->lda]
                                                    : a[l + (int64_t)i * g->lda];
                    float bv = g->tb == CUBLAS_OP_N ? b[l + (int64_t)j * g->ldb]
                                                    : b[j + (int64_t)l * g->ldb];
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
                           int n, int k, const float *alpha, const float *a, int lda,
                           long long sa, const float *b, int ldb, long long sb, const float *beta,
                           float *c, int ldc, long long sc, int batch)
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
    *g = (gemm_job){ta, tb, m, n, k, lda, ldb, ldc, batch, *alpha, *beta, a, b, c, sa, sb, sc};
    stk_host_cuda_submit(h->stream, run_gemm, g);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc)
{
    return gemm(handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long int strideA, const float *B, int ldb,
                                         long long int strideB, const float *beta, float *C,
                                         int ldc, long long int strideC, int batchCount)
{
    return gemm(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C,
                ldc, strideC, batchCount);
}
