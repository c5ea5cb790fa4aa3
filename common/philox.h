/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC 2011): a counter-based generator, so element i of a random stream
 * is a pure function of (key, counter) and any thread (CPU or GPU) can draw
 * it without shared state. common/rng.h builds its sequential generator on
 * it; dropout's CPU loop and CUDA kernel call it directly. */
#pragma once

#include "common/host_device.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline STK_HD void stk_philox_block(const uint32_t ctr[4], const uint32_t key[2],
                                           uint32_t out[4])
{
    const uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;
    const uint32_t w0 = 0x9E3779B9u /* golden ratio */, w1 = 0xBB67AE85u /* sqrt(3) - 1 */;
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)m0 * c0;
        uint64_t p1 = (uint64_t)m1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += w0;
        k1 += w1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

#ifdef __cplusplus
}
#endif
