/* libstoke_cuda.so's entry point, and what the module calls back into the
 * program that loaded it (device/cuda_module_impl.h). Linked into the
 * module only: a program with the backend's objects built in has the real
 * functions, and never calls stk_cuda_module_open.
 *
 * The module's own copies of these names forward to the host's table, so
 * that an error set here is the message the host reads, GPU memory comes
 * from the host's one caching allocator, and --trace reaches the module.
 * Its version script (cmake/libstoke_cuda.map) exports only the entry. */
#include "device/cuda_module_impl.h"

#include "common/trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const stk_cuda_host *host;

stk_status stk_cuda_module_open(const stk_cuda_host *h, const stk_cuda_module **out)
{
    *out = NULL;
    static const size_t sizes[] = STK_CUDA_MODULE_SIZES;
    if (h->abi != STK_CUDA_MODULE_ABI || strcmp(h->version, STOKE_VERSION) != 0 ||
        memcmp(h->sizes, sizes, sizeof sizes) != 0) {
        /* no message through a host we do not match: its own loader words it */
        char msg[256];
        snprintf(msg, sizeof msg,
                 "this module is from Stoke %s (interface %d), the program from Stoke %s "
                 "(interface %d)%s: use the libstoke_cuda.so built with the program",
                 STOKE_VERSION, STK_CUDA_MODULE_ABI, h->version, h->abi,
                 memcmp(h->sizes, sizes, sizeof sizes) ? " with other table layouts" : "");
        return h->set_error(STK_ERR_FORMAT, msg);
    }
    host = h;
    return stk_cuda_module_table(out);
}

stk_status stk_error(stk_status st, const char *fmt, ...)
{
    char msg[STK_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return host->set_error(st, msg);
}

const char *stk_last_error(void) { return host->last_error(); }

stk_status stk_device_alloc(stk_device dev, size_t bytes, void **out)
{
    return host->device_alloc(dev, bytes, out);
}

void stk_device_free(stk_device dev, void *ptr, size_t bytes)
{
    host->device_free(dev, ptr, bytes);
}

bool stk_trace_active(void) { return host->trace_active(); }
