#include "device/device.h"
#include "device/copy_engine.h"

#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static int warned; /* once per process */

static stk_status locked_alloc(void *ctx, size_t bytes, void **out, bool *locked)
{
    (void)ctx;
    *out = NULL;
    *locked = false;
    long page = sysconf(_SC_PAGESIZE);
    size_t size = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
    void *p = mmap(NULL, size ? size : (size_t)page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return stk_error(STK_ERR_NOMEM, "cannot allocate %zu bytes of host memory: %s", bytes,
                         strerror(errno));
    if (mlock(p, size) == 0) {
        *locked = true;
    } else if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
        struct rlimit rl;
        getrlimit(RLIMIT_MEMLOCK, &rl);
        stk_log_warn("cannot lock %zu MiB of batch memory (%s; RLIMIT_MEMLOCK is %llu KiB): "
                     "using plain memory (raise it with ulimit -l)",
                     size >> 20, strerror(errno), (unsigned long long)rl.rlim_cur >> 10);
    }
    *out = p;
    return STK_OK;
}

static void locked_free(void *ctx, void *ptr, size_t bytes)
{
    (void)ctx;
    if (!ptr) return;
    long page = sysconf(_SC_PAGESIZE);
    size_t size = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
    munlock(ptr, size ? size : (size_t)page);
    munmap(ptr, size ? size : (size_t)page);
}

static const stk_host_allocator locked_allocator = {.alloc = locked_alloc, .free = locked_free};

const stk_host_allocator *stk_host_allocator_locked(void) { return &locked_allocator; }

/* The CPU's copy engine: nothing to copy, the host batch is the device batch. */
static const stk_copy_engine cpu_copy_engine = {
    .device = STK_DEVICE_CPU, .in_place = true, .host_memory = &locked_allocator};

const stk_copy_engine *stk_copy_engine_cpu(void) { return &cpu_copy_engine; }
