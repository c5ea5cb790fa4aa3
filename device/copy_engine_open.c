/* stk_copy_engine_open: the CPU's in-place engine, or the CUDA backend
 * module's (loaded here on first use). */
#include "device/copy_engine.h"

#include "device/cuda_module_impl.h"
#include "device/device_query.h"

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
    const stk_cuda_module *m;
    stk_status st;
    if ((st = stk_cuda_module_get(&m)) != STK_OK || (st = m->select(index)) != STK_OK) return st;
    if ((st = m->context()) != STK_OK) return st;
    return m->copy_engine(out);
}
