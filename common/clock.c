#include "common/clock.h"

#include <time.h>

uint64_t stk_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double stk_clock_sec(void) { return (double)stk_clock_ns() * 1e-9; }
