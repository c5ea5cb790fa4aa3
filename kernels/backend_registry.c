/* The backends by device: the CPU's, built in, and the CUDA backend
 * module's, loaded on first use (cuda_module_impl.h). Programs that use
 * only the loader never call this, and link neither oneDNN nor CUDA. */
#include "kernels/backend.h"

#include "kernels/cpu_kernels_impl.h"
#include "device/cuda_module_impl.h"

stk_status stk_backend_get(stk_device dev, const stk_backend **out)
{
    *out = NULL;
    if (dev == STK_DEVICE_CPU) {
        *out = stk_cpu_backend();
        return STK_OK;
    }
    if (dev == STK_DEVICE_CUDA) {
        const stk_cuda_module *m;
        stk_status st = stk_cuda_module_get(&m);
        return st == STK_OK ? m->backend(sizeof(stk_backend), out) : st;
    }
    return stk_error(STK_ERR_UNSUPPORTED, "device %d: not a device", (int)dev);
}
