/* How much memory this process may use: the smallest of the machine's
 * memory and the limits of the memory cgroup it runs in (v1's
 * hierarchical_memory_limit, which covers the ancestors too; v2's memory.max
 * of its cgroup and every ancestor). The loader reads around the page cache
 * when a dataset does not fit it.
 *
 *     char why[128];
 *     uint64_t budget = stk_memory_budget(why, sizeof why);   // why: "cgroup limit" ...
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes; `why` (may be NULL) gets where the figure comes from. */
uint64_t stk_memory_budget(char *why, size_t size);

#ifdef __cplusplus
}
#endif
