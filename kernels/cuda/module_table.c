/* The CUDA backend module's table (device/cuda_module_impl.h). */
#include "kernels/cuda/backend_cuda_impl.h"
#include "kernels/cuda/context.h"
#include "device/cuda_module_impl.h"

#include <stdio.h>

static const char *describe(void)
{
    static char text[128];
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    size_t dnn = cudnnGetVersion(); /* major * 10000 + minor * 100 + patch (cuDNN 9) */
#ifdef STOKE_CUDA_EMULATED
    snprintf(text, sizeof text, "host emulation of CUDA %d.%d and cuDNN %zu.%zu (tests/cuda_host)",
             rt / 1000, rt % 1000 / 10, dnn / 10000, dnn / 100 % 100);
#else
    snprintf(text, sizeof text, "CUDA runtime %d.%d, cuDNN %zu.%zu.%zu%s%s", rt / 1000,
             rt % 1000 / 10, dnn / 10000, dnn / 100 % 100, dnn % 100,
#ifdef STOKE_HAVE_NCCL
             ", ", stk_nccl_library()
#else
             "", ""
#endif
    );
#endif
    return text;
}

static stk_status open_context(void)
{
    const stk_backend *b;
    return stk_cuda_backend(&b);
}

/* The op table, for a host whose table has this layout. */
static stk_status checked_backend(size_t size, const stk_backend **out)
{
    *out = NULL;
    if (size != sizeof(stk_backend))
        return stk_error(STK_ERR_FORMAT,
                         "the CUDA module's op table has %zu bytes, the program's %zu: use the "
                         "libstoke_cuda.so built with the program",
                         sizeof(stk_backend), size);
    return stk_cuda_backend(out);
}

static const stk_cuda_module table = {
    .describe = describe,
    .query = stk_cuda_query_runtime,
    .select = stk_cuda_select,
    .context = open_context,
    .backend = checked_backend,
    .copy_engine = stk_copy_engine_cuda,
    .heap = &stk_cuda_heap_ops,
#ifdef STOKE_HAVE_NCCL
    .comm_library = stk_nccl_library,
    .comm_make_id = stk_nccl_make_id,
    .comm_open = stk_nccl_open,
    .comm_copy = stk_nccl_copy,
    .comm_allreduce_avg = stk_nccl_allreduce_avg,
    .comm_finish = stk_nccl_finish,
    .comm_seconds = stk_nccl_seconds,
    .comm_close = stk_nccl_close,
#endif
};

stk_status stk_cuda_module_table(const stk_cuda_module **out)
{
    *out = &table;
    return STK_OK;
}
