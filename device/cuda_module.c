/* The host side of the CUDA backend module (cuda_module_impl.h): finding
 * and starting it, and device/device_query.h and device_collective.h
 * answered by it. The one file outside kernels/cuda/ that knows the backend
 * exists. */
#include "device/cuda_module_impl.h"

#include "common/trace.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Defined only in programs that link the backend's objects in (the unit
 * tests that call into it, against the same host CUDA); a weak reference
 * stays NULL otherwise, and the module is loaded from its file. */
extern stk_status stk_cuda_module_table(const stk_cuda_module **out) __attribute__((weak));

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const stk_cuda_module *module;
static stk_status load_status;
static char load_error[STK_ERROR_MAX];
static char origin[1200];

static stk_status host_set_error(stk_status st, const char *message)
{
    return stk_error(st, "%s", message);
}

static const stk_cuda_host host = {
    .abi = STK_CUDA_MODULE_ABI,
    .version = STOKE_VERSION,
    .sizes = STK_CUDA_MODULE_SIZES,
    .set_error = host_set_error,
    .last_error = stk_last_error,
    .device_alloc = stk_device_alloc,
    .device_free = stk_device_free,
    .trace_active = stk_trace_active,
};

#ifdef STOKE_CUDA_MODULE_BUILT
#define NOT_BUILT ""
#else
#define NOT_BUILT                                                                                  \
    " (this build has no CUDA backend: configure with -DSTOKE_CUDA=ON where nvcc, cuBLAS and "     \
    "cuDNN are installed)"
#endif

/* The file name of the module, and the folders it is looked for in: the
 * library search path of the object this code is linked into (its RUNPATH,
 * $ORIGIN expanded, then LD_LIBRARY_PATH and the system's), as if the
 * module were one of its dependencies. Asked for explicitly with dlinfo
 * rather than left to dlopen's own lookup: that one uses the RUNPATH of
 * dlopen's caller, which is the sanitizer runtime under ASan or TSan. */
#define MODULE_FILE "libstoke_cuda.so"

static void search_path(Dl_serinfo **out)
{
    *out = NULL;
    struct link_map *self = NULL;
    Dl_info info;
    if (!dladdr1((void *)search_path, &info, (void **)&self, RTLD_DL_LINKMAP) || !self) return;
    Dl_serinfo size;
    if (dlinfo(self, RTLD_DI_SERINFOSIZE, &size) != 0) return;
    Dl_serinfo *si = malloc(size.dls_size);
    if (!si) return;
    memcpy(si, &size, sizeof size); /* dls_size and dls_cnt, as dlinfo(3) asks */
    if (dlinfo(self, RTLD_DI_SERINFO, si) != 0) {
        free(si);
        return;
    }
    *out = si;
}

/* dlopen the module: STOKE_CUDA_MODULE's file, else the first folder of the
 * search path that holds one, else the name alone (ld.so's cache). */
static void *open_module(char *path, size_t n, const char **why)
{
    const char *env = getenv("STOKE_CUDA_MODULE");
    snprintf(path, n, "%s", env && *env ? env : MODULE_FILE);
    if (!(env && *env)) {
        Dl_serinfo *si;
        search_path(&si);
        for (unsigned i = 0; si && i < si->dls_cnt; i++) {
            char f[1024];
            snprintf(f, sizeof f, "%s/%s", si->dls_serpath[i].dls_name, MODULE_FILE);
            if (access(f, F_OK) == 0) {
                snprintf(path, n, "%s", f);
                break;
            }
        }
        free(si);
    }
    dlerror();
    /* RTLD_LOCAL: its CUDA libraries stay out of the global namespace;
     * never closed (the CUDA runtime tears itself down at exit) */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) *why = dlerror();
    return h;
}

static stk_status load(void)
{
    if (stk_cuda_module_table) {
        snprintf(origin, sizeof origin, "built in");
        return stk_cuda_module_table(&module);
    }
    char path[1024];
    const char *why = NULL;
    void *h = open_module(path, sizeof path, &why);
    const char *env = getenv("STOKE_CUDA_MODULE");
    const char *from = env && *env ? " (STOKE_CUDA_MODULE)" : "";
    if (!h) {
        snprintf(origin, sizeof origin, "not loaded: %s", why ? why : "dlopen failed");
        return stk_error(STK_ERR_UNSUPPORTED, "cannot load the CUDA backend%s: %s%s", from,
                         why ? why : "dlopen failed", NOT_BUILT);
    }
    stk_cuda_module_open_fn open = (stk_cuda_module_open_fn)dlsym(h, STK_CUDA_MODULE_ENTRY);
    if (!open) {
        snprintf(origin, sizeof origin, "not loaded: %s is not a Stoke CUDA module", path);
        return stk_error(STK_ERR_FORMAT, "%s%s: not a Stoke CUDA backend module (no %s)", path,
                         from, STK_CUDA_MODULE_ENTRY);
    }
    stk_status st = open(&host, &module);
    if (st != STK_OK) {
        snprintf(origin, sizeof origin, "not loaded: %s: %s", path, stk_last_error());
        return stk_error_prefix(st, "%s: ", path);
    }
    snprintf(origin, sizeof origin, "%s", path);
    return STK_OK;
}

static void load_once(void)
{
    load_status = load();
    if (load_status != STK_OK) {
        module = NULL;
        snprintf(load_error, sizeof load_error, "%s", stk_last_error());
    }
}

stk_status stk_cuda_module_get(const stk_cuda_module **out)
{
    pthread_once(&once, load_once);
    *out = module;
    if (load_status != STK_OK) return stk_error(load_status, "%s", load_error);
    return STK_OK;
}

const stk_heap_ops *stk_cuda_heap_ops_load(void)
{
    const stk_cuda_module *m;
    return stk_cuda_module_get(&m) == STK_OK ? m->heap : NULL;
}

void stk_cuda_module_origin(char *buf, size_t n)
{
    pthread_once(&once, load_once);
    snprintf(buf, n, "%s", origin);
}

/* ---- device/device_query.h ------------------------------------------------ */

void stk_cuda_query(stk_cuda_report *r)
{
    const stk_cuda_module *m;
    if (stk_cuda_module_get(&m) == STK_OK) {
        m->query(r);
        snprintf(r->backend, sizeof r->backend, "%s", m->describe());
        char from[sizeof r->module];
        stk_cuda_module_origin(from, sizeof from);
        snprintf(r->module, sizeof r->module, "%s", from);
        return;
    }
    memset(r, 0, sizeof *r);
    snprintf(r->reason, sizeof r->reason, "%s", stk_last_error());
    stk_cuda_module_origin(r->module, sizeof r->module);
}

/* ---- device/device_collective.h: NCCL inside the module. Without the
 * module or without NCCL in it, stk_device_comm_library() is NULL and
 * data-parallel training moves gradients through host memory (MPI). ---- */

/* The module's collectives, or NULL with the reason as the message. */
static const stk_cuda_module *nccl(void)
{
    const stk_cuda_module *m;
    if (stk_cuda_module_get(&m) != STK_OK) return NULL;
    if (!m->comm_library) {
        stk_error(STK_ERR_UNSUPPORTED, "the CUDA backend was built without NCCL (configure "
                                       "with CUDA where NCCL is installed)");
        return NULL;
    }
    return m;
}

const char *stk_device_comm_library(void)
{
    const stk_cuda_module *m = nccl();
    return m ? m->comm_library() : NULL;
}

stk_status stk_device_comm_make_id(uint8_t id[STK_DEVICE_COMM_ID_BYTES])
{
    const stk_cuda_module *m = nccl();
    return m ? m->comm_make_id(id) : stk_error_prefix(STK_ERR_UNSUPPORTED, "NCCL: ");
}

stk_status stk_device_comm_open(const uint8_t id[STK_DEVICE_COMM_ID_BYTES], int rank, int world,
                                stk_device_comm **out)
{
    *out = NULL;
    const stk_cuda_module *m = nccl();
    return m ? m->comm_open(id, rank, world, out) : stk_error_prefix(STK_ERR_UNSUPPORTED, "NCCL: ");
}

/* A communicator exists only when open succeeded: the module is there. */
stk_status stk_device_comm_copy(stk_device_comm *c, void *dst, const void *src, size_t bytes)
{
    return nccl()->comm_copy(c, dst, src, bytes);
}

stk_status stk_device_comm_allreduce_avg(stk_device_comm *c, float *buf, size_t n)
{
    return nccl()->comm_allreduce_avg(c, buf, n);
}

stk_status stk_device_comm_finish(stk_device_comm *c, double timeout_s)
{
    return nccl()->comm_finish(c, timeout_s);
}

double stk_device_comm_seconds(const stk_device_comm *c) { return nccl()->comm_seconds(c); }

void stk_device_comm_close(stk_device_comm *c)
{
    if (c) nccl()->comm_close(c);
}
