/* The CUDA backend's answer to stk_cuda_query (device/device_query.h): the runtime,
 * the driver and the GPUs, or why there is none. */
#include "kernels/cuda/cuda_device.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

void stk_cuda_query_runtime(stk_cuda_report *r)
{
    memset(r, 0, sizeof *r);
    r->built = true;
    cudaRuntimeGetVersion(&r->runtime_version);
    if (cudaDriverGetVersion(&r->driver_version) != cudaSuccess) r->driver_version = 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        if (e == cudaErrorInsufficientDriver && r->driver_version == 0)
            snprintf(r->reason, sizeof r->reason, "no NVIDIA driver is installed (%s)",
                     cudaGetErrorString(e));
        else if (e == cudaErrorInsufficientDriver)
            snprintf(r->reason, sizeof r->reason,
                     "the NVIDIA driver (CUDA %d.%d) is older than this build's runtime (%d.%d)",
                     r->driver_version / 1000, r->driver_version % 1000 / 10,
                     r->runtime_version / 1000, r->runtime_version % 1000 / 10);
        else if (e != cudaSuccess)
            snprintf(r->reason, sizeof r->reason, "%s", cudaGetErrorString(e));
        else
            snprintf(r->reason, sizeof r->reason, "the driver sees no CUDA device");
        return;
    }
    for (int i = 0; i < n && i < STK_MAX_GPUS; i++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
        stk_gpu_info *g = &r->gpus[r->count++];
        snprintf(g->name, sizeof g->name, "%s", p.name);
        g->memory_bytes = p.totalGlobalMem;
        g->cc_major = p.major;
        g->cc_minor = p.minor;
        g->multiprocessors = p.multiProcessorCount;
    }
    if (r->count == 0) snprintf(r->reason, sizeof r->reason, "no device could be queried");
}
