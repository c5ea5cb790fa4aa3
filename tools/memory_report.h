/* `stoke train --memory-report`: the caching allocator of a device as a
 * table of size classes (as torch.cuda.memory_summary): blocks in use and
 * cached now, allocations served and those that needed fresh memory. */
#pragma once

#include "device/device_alloc.h"

#include <stdint.h>
#include <stdio.h>

/* Print the table of `dev` to f; run_peak: the highest bytes allocated in
 * the run (0: not known). */
void memory_report_print(FILE *f, stk_device dev, uint64_t run_peak);
