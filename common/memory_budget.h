/* How much memory this process may use: the smallest of the machine's
 * memory, the limits of the memory cgroup it runs in (v1's
 * hierarchical_memory_limit, which covers the ancestors too; v2's memory.max
 * of its cgroup and every ancestor) and STOKE_MEMORY_LIMIT_MB when set (a
 * share the kernel does not know of). The loader reads around the page
 * cache when a dataset does not fit it; stoke train warns before a run that
 * would not.
 *
 *     char why[128];
 *     uint64_t budget = stk_memory_budget(why, sizeof why);   // why: "cgroup limit" ...
 */
#pragma once

#include "common/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes; `why` (may be NULL) gets where the figure comes from. A
 * STOKE_MEMORY_LIMIT_MB that is not a number above 0 is not used (see
 * stk_memory_limit_env_check). */
uint64_t stk_memory_budget(char *why, size_t size);

/* STK_OK when STOKE_MEMORY_LIMIT_MB is unset or a number of MiB above 0;
 * else STK_ERR_INVALID_ARG naming the variable, its value and what it
 * takes. A program calls it at its start so that a typo is not ignored. */
stk_status stk_memory_limit_env_check(void);

#ifdef __cplusplus
}
#endif
