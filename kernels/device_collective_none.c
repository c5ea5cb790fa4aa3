/* kernels/device_collective.h in builds without CUDA or without NCCL:
 * data-parallel training then moves gradients through host memory (MPI). */
#include "kernels/device_collective.h"

const char *stk_device_comm_library(void) { return NULL; }

static stk_status unsupported(void)
{
    return stk_error(STK_ERR_UNSUPPORTED,
                     "this build has no NCCL (configure with CUDA where NCCL is installed)");
}

stk_status stk_device_comm_make_id(uint8_t id[STK_DEVICE_COMM_ID_BYTES])
{
    (void)id;
    return unsupported();
}

stk_status stk_device_comm_open(const uint8_t id[STK_DEVICE_COMM_ID_BYTES], int rank, int world,
                                stk_device_comm **out)
{
    (void)id, (void)rank, (void)world;
    *out = NULL;
    return unsupported();
}

stk_status stk_device_comm_copy(stk_device_comm *c, void *dst, const void *src, size_t bytes)
{
    (void)c, (void)dst, (void)src, (void)bytes;
    return unsupported();
}

stk_status stk_device_comm_allreduce_avg(stk_device_comm *c, float *buf, size_t n)
{
    (void)c, (void)buf, (void)n;
    return unsupported();
}

stk_status stk_device_comm_finish(stk_device_comm *c, double timeout_s)
{
    (void)c, (void)timeout_s;
    return unsupported();
}

double stk_device_comm_seconds(const stk_device_comm *c)
{
    (void)c;
    return 0;
}

void stk_device_comm_close(stk_device_comm *c) { (void)c; }
