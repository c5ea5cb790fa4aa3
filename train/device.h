/* Which device to train on, as a user names it ("cpu", "cuda", "cuda:N"),
 * and opening it.
 *
 *     stk_device_spec d;
 *     STK_TRY(stk_device_spec_parse("cuda:1", &d));
 *     const stk_copy_engine *ce;
 *     STK_TRY(stk_device_spec_open(&d, &ce));    // before the loader that feeds it
 *     o.host_memory = ce->host_memory;       // the loader's batch ring: pinned for ce
 */
#pragma once

#include "common/status.h"
#include "device/copy_engine.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_device_spec {
    stk_device kind;
    int index;    /* GPU number (cuda:N); 0 for the CPU */
    bool indexed; /* the text named the GPU ("cuda:N", not "cuda") */
} stk_device_spec;

/* "cpu", "cuda" (GPU 0) or "cuda:N". Errors: INVALID_ARG naming the text. */
stk_status stk_device_spec_parse(const char *text, stk_device_spec *out);

/* "cpu" or "cuda:N" into buf. */
void stk_device_spec_name(const stk_device_spec *d, char *buf, size_t n);

/* Make the device ready and give its copy engine (stk_copy_engine_open);
 * messages start with the device's name and say what to do when there is
 * no GPU. Errors: as stk_copy_engine_open. */
stk_status stk_device_spec_open(const stk_device_spec *d, const stk_copy_engine **ce);

#ifdef __cplusplus
}
#endif
