/* The tests' host implementation of the CUDA runtime, cuBLAS and cuDNN
 * (see README.md): the internals shared by its three files, and the hooks
 * tests use to provoke orderings a GPU would only produce by chance. */
#pragma once

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Queue fn(arg) on `stream` (NULL: the legacy stream: wait for all streams,
 * then run on the caller). The fake kernels, cuBLAS and cuDNN calls all run
 * this way, so work on one stream is ordered and streams run concurrently. */
void stk_host_cuda_submit(cudaStream_t stream, void (*fn)(void *), void *arg);

/* Test hooks: a held stream starts no new work until released (work already
 * running finishes). Lets a test show that a missing cudaStreamWaitEvent
 * reads data before the copy that should precede it. */
void stk_host_cuda_hold(cudaStream_t stream);
void stk_host_cuda_release(cudaStream_t stream);

/* true when [p, p + bytes) lies inside one live cudaMalloc block. */
bool stk_host_cuda_is_device(const void *p, size_t bytes);

/* Record an API misuse the real library would reject or crash on; the
 * message goes to stderr and the call returns an error. */
void stk_host_cuda_misuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#ifdef __cplusplus
}
#endif
