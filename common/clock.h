/* Monotonic time. */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Nanoseconds on CLOCK_MONOTONIC: for measuring intervals only. */
uint64_t stk_clock_ns(void);

/* Seconds on CLOCK_MONOTONIC as a double. */
double stk_clock_sec(void);

#ifdef __cplusplus
}
#endif
