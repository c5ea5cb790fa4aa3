/* stk_copy_engine_open: the one place outside kernels/cuda that knows
 * whether this build has the CUDA backend. */
#include "kernels/backend.h"
#include "kernels/copy_engine.h"
#include "kernels/device_query.h"
#ifdef STOKE_CUDA_BACKEND
#include "kernels/cuda/cuda_device.h"
#endif

stk_status stk_copy_engine_open(stk_device dev, int index, const stk_copy_engine **out)
{
    *out = NULL;
    if (dev == STK_DEVICE_CPU) {
        *out = stk_copy_engine_cpu();
        return STK_OK;
    }
    if (index < 0 || index >= STK_MAX_GPUS)
        return stk_error(STK_ERR_INVALID_ARG, "GPU %d: the number must be in 0..%d", index,
                         STK_MAX_GPUS - 1);
    stk_cuda_report rep;
    stk_cuda_query(&rep);
    if (rep.count == 0)
        return stk_error(STK_ERR_UNSUPPORTED, "no CUDA device is available: %s", rep.reason);
    if (index >= rep.count)
        return stk_error(STK_ERR_INVALID_ARG, "GPU %d: this machine has %d (0..%d)", index,
                         rep.count, rep.count - 1);
#ifdef STOKE_CUDA_BACKEND
    stk_status st = stk_cuda_select(index);
    if (st != STK_OK) return st;
    const stk_backend *be;
    if ((st = stk_backend_get(STK_DEVICE_CUDA, &be)) != STK_OK) return st;
    return stk_copy_engine_cuda(out);
#else
    return stk_error(STK_ERR_UNSUPPORTED, "this build has no CUDA backend");
#endif
}
