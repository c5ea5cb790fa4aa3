/* The CUDA context: device, streams, cuBLAS and cuDNN handles, errors. */
#include "kernels/cuda/context.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static stk_cuda_ctx ctx;
static int chosen_device;
static stk_status init_status;
static bool started;
static char init_error[STK_ERROR_MAX];

static stk_status sticky = STK_OK; /* first asynchronous failure since the last sync */
static char sticky_msg[STK_ERROR_MAX];

stk_status stk_cuda_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return STK_OK;
    if (e == cudaErrorMemoryAllocation)
        return stk_error(STK_ERR_NOMEM, "%s: out of GPU memory (%s)", what, cudaGetErrorString(e));
    return stk_error(STK_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

stk_status stk_cublas_check(cublasStatus_t e, const char *what)
{
    if (e == CUBLAS_STATUS_SUCCESS) return STK_OK;
    return stk_error(STK_ERR_CUDA, "%s: cuBLAS error %d (%s)", what, (int)e,
                     cublasGetStatusString(e));
}

stk_status stk_cudnn_check(cudnnStatus_t e, const char *what)
{
    if (e == CUDNN_STATUS_SUCCESS) return STK_OK;
    return stk_error(STK_ERR_CUDA, "%s: cuDNN error %d (%s)", what, (int)e, cudnnGetErrorString(e));
}

void stk_cuda_note(stk_status st)
{
    if (st == STK_OK || sticky != STK_OK) return;
    sticky = st;
    snprintf(sticky_msg, sizeof sticky_msg, "%s", stk_last_error());
}

stk_status stk_cuda_select(int device)
{
    if (device < 0) return stk_error(STK_ERR_INVALID_ARG, "GPU %d: not a device number", device);
    if (stk_cuda_started() && device != ctx.device)
        return stk_error(STK_ERR_INVALID_ARG, "GPU %d: the CUDA context already uses GPU %d",
                         device, ctx.device);
    chosen_device = device;
    return STK_OK;
}

static stk_status create(void)
{
    stk_status st;
    int n = 0;
    if ((st = stk_cuda_check(cudaGetDeviceCount(&n), "CUDA")) != STK_OK) return st;
    if (chosen_device >= n)
        return stk_error(STK_ERR_INVALID_ARG, "CUDA device %d does not exist (%d found)",
                         chosen_device, n);
    ctx.device = chosen_device;
    if ((st = stk_cuda_check(cudaSetDevice(ctx.device), "cudaSetDevice")) != STK_OK) return st;
    /* non-blocking: neither stream waits for the legacy default stream */
    if ((st = stk_cuda_check(cudaStreamCreateWithFlags(&ctx.compute, cudaStreamNonBlocking),
                             "creating the compute stream")) != STK_OK ||
        (st = stk_cuda_check(cudaStreamCreateWithFlags(&ctx.copy, cudaStreamNonBlocking),
                             "creating the copy stream")) != STK_OK)
        return st;
    if ((st = stk_cublas_check(cublasCreate(&ctx.blas), "starting cuBLAS")) != STK_OK ||
        (st = stk_cublas_check(cublasSetStream(ctx.blas, ctx.compute), "cublasSetStream")) !=
            STK_OK)
        return st;
    /* FP32 GEMMs stay FP32 (no TF32 rounding): results comparable with the CPU */
    if ((st = stk_cublas_check(cublasSetMathMode(ctx.blas, CUBLAS_DEFAULT_MATH),
                               "cublasSetMathMode")) != STK_OK)
        return st;
    if ((st = stk_cudnn_check(cudnnCreate(&ctx.dnn), "starting cuDNN")) != STK_OK ||
        (st = stk_cudnn_check(cudnnSetStream(ctx.dnn, ctx.compute), "cudnnSetStream")) != STK_OK)
        return st;
    return STK_OK;
}

static void init_once(void)
{
    init_status = create();
    if (init_status != STK_OK)
        snprintf(init_error, sizeof init_error, "%s", stk_last_error());
    else
        __atomic_store_n(&started, true, __ATOMIC_RELEASE);
}

stk_status stk_cuda_context(stk_cuda_ctx **out)
{
    *out = NULL;
    pthread_once(&once, init_once);
    if (init_status != STK_OK) return stk_error(init_status, "%s", init_error);
    *out = &ctx;
    return STK_OK;
}

bool stk_cuda_started(void) { return __atomic_load_n(&started, __ATOMIC_ACQUIRE); }

stk_status stk_cuda_sync(void)
{
    stk_cuda_ctx *cx;
    stk_status st = stk_cuda_context(&cx);
    if (st != STK_OK) return st;
    stk_cuda_note(stk_cuda_check(cudaStreamSynchronize(cx->compute), "compute stream"));
    st = sticky;
    sticky = STK_OK;
    if (st != STK_OK) return stk_error(st, "%s", sticky_msg);
    return STK_OK;
}
