/* The seam between Stoke and its CUDA backend, which is a module of its own
 * (libstoke_cuda.so: the kernels, cuBLAS, cuDNN, NCCL and the CUDA runtime)
 * loaded on first use, as ggml loads its backends. A command that never
 * touches a GPU never maps a CUDA library, and the same binary runs on
 * machines with and without them. Private to kernels/.
 *
 *     const stk_cuda_module *m;
 *     if (stk_cuda_module_get(&m) != STK_OK) return ...;   // why not, in the message
 *     m->select(1);
 *     m->copy_engine(&ce);
 *
 * Both sides of the seam are built from the same tree: the host hands the
 * module a table of what the module calls back (error messages, the caching
 * allocator, the trace switch) with the version and struct sizes it was
 * built with, and the module refuses a host it does not match.
 *
 * Where the module comes from (cuda_module.c): a program that links the
 * backend's objects in (the unit tests that reach into it) uses them as they
 * are; otherwise dlopen("libstoke_cuda.so"), found by the caller's RUNPATH
 * (the build folder, PREFIX/lib/stoke, the Python package's folder), or
 * the file named by STOKE_CUDA_MODULE.
 */
#pragma once

#include "common/status.h"
#include "device/copy_engine.h"
#include "device/device_collective.h"
#include "device/device_heap_ops_impl.h"
#include "device/device_query.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The math backend's op table (kernels/backend.h): above this module, so
 * named here only; its layout is checked when it is asked for. */
struct stk_backend;

/* Raised whenever either table below changes. */
#define STK_CUDA_MODULE_ABI 2

/* What the host gives the module. */
typedef struct stk_cuda_host {
    int abi;
    const char *version; /* STOKE_VERSION */
    /* sizeof of the tables the two sides share, in this order:
     * stk_copy_engine, stk_heap_ops, stk_cuda_report, stk_cuda_host, stk_cuda_module
     * (stk_backend's: when it is asked for) */
    size_t sizes[5];
    /* common/status.h on the host's thread-local message */
    stk_status (*set_error)(stk_status st, const char *message);
    const char *(*last_error)(void);
    /* device/device_alloc.h: the one caching allocator (workspaces, batches) */
    stk_status (*device_alloc)(stk_device dev, size_t bytes, void **out);
    void (*device_free)(stk_device dev, void *ptr, size_t bytes);
    /* common/trace.h: whether a trace is being recorded */
    bool (*trace_active)(void);
} stk_cuda_host;

/* What the module gives the host. */
typedef struct stk_cuda_module {
    /* "CUDA runtime 13.0, cuBLAS 13.1.0, cuDNN 9.14.0" or "host emulation (tests/cuda_host)" */
    const char *(*describe)(void);
    /* device/device_query.h's report (never fails) */
    void (*query)(stk_cuda_report *r);
    /* GPU `device` for the context (before it is created) */
    stk_status (*select)(int device);
    /* Creates the context: streams, cuBLAS, cuDNN (what the op table's first use does). */
    stk_status (*context)(void);
    /* The op table; creates the context. `size` is the caller's
     * sizeof(stk_backend): STK_ERR_FORMAT when it is not the module's. */
    stk_status (*backend)(size_t size, const struct stk_backend **out);
    /* The copy engine on the copy stream; creates the context. */
    stk_status (*copy_engine)(const stk_copy_engine **out);
    /* cudaMalloc/cudaFree for the caching allocator */
    const stk_heap_ops *heap;
    /* device/device_collective.h on NCCL; comm_library NULL: built without NCCL */
    const char *(*comm_library)(void);
    stk_status (*comm_make_id)(uint8_t id[STK_DEVICE_COMM_ID_BYTES]);
    stk_status (*comm_open)(const uint8_t id[STK_DEVICE_COMM_ID_BYTES], int rank, int world,
                            stk_device_comm **out);
    stk_status (*comm_copy)(stk_device_comm *c, void *dst, const void *src, size_t bytes);
    stk_status (*comm_allreduce_avg)(stk_device_comm *c, float *buf, size_t n);
    stk_status (*comm_finish)(stk_device_comm *c, double timeout_s);
    double (*comm_seconds)(const stk_device_comm *c);
    void (*comm_close)(stk_device_comm *c);
} stk_cuda_module;

#define STK_CUDA_MODULE_SIZES                                                                      \
    {                                                                                              \
        sizeof(stk_copy_engine), sizeof(stk_heap_ops), sizeof(stk_cuda_report),                    \
            sizeof(stk_cuda_host), sizeof(stk_cuda_module)                                         \
    }

/* The module's one exported function (kernels/cuda/module_entry.c): checks
 * the host, keeps its table, gives the module's. Errors: STK_ERR_FORMAT
 * (built from another version or layout; the message says which). */
typedef stk_status (*stk_cuda_module_open_fn)(const stk_cuda_host *host,
                                              const stk_cuda_module **out);
#define STK_CUDA_MODULE_ENTRY "stk_cuda_module_open"

/* The module's table, inside the module (kernels/cuda/module_table.c). */
stk_status stk_cuda_module_table(const stk_cuda_module **out);

/* Host side (cuda_module.c, which also implements device_query.h and
 * device_collective.h by asking the module): the module, loaded on the first call;
 * thread-safe. Errors: STK_ERR_UNSUPPORTED (no module: the message says
 * what the loader said, and whether this build made one), STK_ERR_FORMAT
 * (a module from another build). The same answer on every call. */
stk_status stk_cuda_module_get(const stk_cuda_module **out);

/* Where the module came from, for `stoke devices`: "built in", the file it
 * was loaded from, or why it was not; loads it when not tried yet. */
void stk_cuda_module_origin(char *buf, size_t n);

#ifdef __cplusplus
}
#endif
