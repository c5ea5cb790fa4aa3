/* Which GPUs this process can use, for `stoke devices` and `--device cuda`.
 *
 *     stk_cuda_report r;
 *     stk_cuda_query(&r);
 *     if (r.count == 0) printf("no CUDA device: %s\n", r.reason);
 *
 * Never fails and never crashes: a build without the CUDA backend, a
 * machine without the CUDA libraries (the backend is a module loaded on the
 * first query: device/cuda_module_impl.h), without the NVIDIA driver or
 * without a device each give count 0 and a reason a user can act on.
 * Thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STK_MAX_GPUS 16

typedef struct stk_gpu_info {
    char name[256];
    uint64_t memory_bytes;
    int cc_major, cc_minor; /* compute capability */
    int multiprocessors;
} stk_gpu_info;

typedef struct stk_cuda_report {
    bool built;          /* the CUDA backend module was loaded */
    char module[512];    /* the file it was loaded from ("built in"), or why not */
    char backend[128];   /* what it was built with ("CUDA runtime 13.0, cuDNN 9.14.0, ...") */
    int runtime_version; /* e.g. 13000 for CUDA 13.0 (0 when not built) */
    int driver_version;  /* 0 when no driver is installed */
    int count;
    stk_gpu_info gpus[STK_MAX_GPUS];
    char reason[512]; /* why count is 0 */
} stk_cuda_report;

void stk_cuda_query(stk_cuda_report *r);

#ifdef __cplusplus
}
#endif
