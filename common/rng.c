#include "common/rng.h"

#include "common/philox.h"

void stk_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    stk_philox_block(ctr, key, out);
}

void stk_rng_init(stk_rng *r, uint64_t seed, uint64_t stream, uint64_t counter)
{
    r->key[0] = (uint32_t)seed;
    r->key[1] = (uint32_t)(seed >> 32);
    r->ctr[0] = (uint32_t)counter;
    r->ctr[1] = (uint32_t)(counter >> 32);
    r->ctr[2] = (uint32_t)stream;
    r->ctr[3] = (uint32_t)(stream >> 32);
    r->used = 4;
}

uint32_t stk_rng_u32(stk_rng *r)
{
    if (r->used == 4) {
        stk_philox4x32_10(r->ctr, r->key, r->buf);
        /* Next block: a 64-bit increment of counter words 0-1. */
        if (++r->ctr[0] == 0) ++r->ctr[1];
        r->used = 0;
    }
    return r->buf[r->used++];
}

uint64_t stk_rng_u64(stk_rng *r)
{
    uint64_t hi = stk_rng_u32(r);
    return hi << 32 | stk_rng_u32(r);
}

double stk_rng_uniform(stk_rng *r) { return (double)(stk_rng_u64(r) >> 11) * 0x1.0p-53; }

uint32_t stk_rng_below(stk_rng *r, uint32_t n)
{
    uint64_t m = (uint64_t)stk_rng_u32(r) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (0u - n) % n;
        while (low < threshold) {
            m = (uint64_t)stk_rng_u32(r) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

uint64_t stk_rng_below64(stk_rng *r, uint64_t n)
{
    if (n <= UINT32_MAX) return stk_rng_below(r, (uint32_t)n);
    /* Rejection on the smallest power-of-two mask covering n. */
    uint64_t mask = n - 1;
    mask |= mask >> 1, mask |= mask >> 2, mask |= mask >> 4;
    mask |= mask >> 8, mask |= mask >> 16, mask |= mask >> 32;
    for (;;) {
        uint64_t v = stk_rng_u64(r) & mask;
        if (v < n) return v;
    }
}
