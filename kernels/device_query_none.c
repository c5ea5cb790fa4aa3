/* stk_cuda_query in a build without the CUDA backend. */
#include "kernels/device_query.h"

#include <stdio.h>
#include <string.h>

void stk_cuda_query(stk_cuda_report *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->reason, sizeof r->reason,
             "this build has no CUDA backend (configure with -DSTOKE_CUDA=ON where nvcc, cuBLAS "
             "and cuDNN are installed)");
}
