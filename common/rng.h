/* Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
 *
 * A value depends only on (seed, stream, counter), never on which thread
 * draws it or in what order, so a sample's augmentation is the same whatever
 * the number of workers. Streams separate independent uses (e.g. stream =
 * epoch for a sampler's permutation; stream = epoch and counter = sample
 * index << 32 for one sample's crop).
 *
 *     stk_rng r;
 *     stk_rng_init(&r, seed, epoch, (uint64_t)index << 32);
 *     double u = stk_rng_uniform(&r);        // [0, 1)
 *     uint32_t k = stk_rng_below(&r, 10);    // 0..9, unbiased
 *
 * The struct is the caller's; it is a few words and cheap to copy.
 */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_rng {
    uint32_t key[2];
    uint32_t ctr[4];
    uint32_t buf[4]; /* the current block's outputs */
    int used;        /* outputs of buf already returned (4: draw a new block) */
} stk_rng;

/* One Philox4x32-10 block: out = philox(ctr, key). */
void stk_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Key = seed; counter words 0-1 = counter, 2-3 = stream. */
void stk_rng_init(stk_rng *r, uint64_t seed, uint64_t stream, uint64_t counter);

uint32_t stk_rng_u32(stk_rng *r);
uint64_t stk_rng_u64(stk_rng *r);

/* Uniform double in [0, 1) with 53 random bits. */
double stk_rng_uniform(stk_rng *r);

/* Uniform integer in [0, n) without modulo bias (Lemire's method); n > 0. */
uint32_t stk_rng_below(stk_rng *r, uint32_t n);

/* Uniform 64-bit integer in [0, n) without bias; n > 0. */
uint64_t stk_rng_below64(stk_rng *r, uint64_t n);

#ifdef __cplusplus
}
#endif
