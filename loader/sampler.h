/* Which records, in which order: the sample order of one epoch for one rank.
 *
 *     stk_sampler s;
 *     stk_sampler_init(&s, &(stk_sampler_options){.count = n, .batch_size = 256,
 *                      .shuffle = true, .seed = 1, .rank = 0, .world = 1});
 *     stk_sampler_epoch(&s, epoch);            // the permutation of this epoch
 *     for (b = 0; b < s.batches; b++)
 *         for (j = 0; j < stk_sampler_batch_len(&s, b); j++)
 *             use(stk_sampler_index(&s, b * batch + j));
 *     stk_sampler_deinit(&s);
 *
 * The order is an exact permutation of every record, from (seed, epoch)
 * only (Fisher-Yates with the Philox stream 2 * epoch). Block order (FFCV's
 * quasi-random order, for files larger than memory): the records are cut
 * into blocks of block_records consecutive indices (mostly consecutive in
 * the file too: records are stored in index order, except that LMDB keeps
 * small values in leaf pages and large ones in overflow pages; the block
 * store reads a block's few ranges), the blocks permuted, and
 * each window of `window` consecutive blocks of that permutation shuffled
 * as one: reads stay within a few file regions at a time, and the epoch is
 * still a permutation from (seed, epoch) alone. Without shuffle: index
 * order. With world > 1 the
 * permuted list is cut like PyTorch's DistributedSampler: rank r takes
 * positions r, r + world, ...; every rank gets the same number of samples,
 * by wrapping around to the start (pad, the default) or by dropping the
 * tail. drop_last drops a final partial batch.
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_sampler_options {
    uint64_t count; /* records in the dataset */
    int batch_size;
    bool shuffle;
    uint64_t seed;
    bool drop_last;
    int rank, world;
    bool drop_uneven; /* shard by dropping the tail instead of wrapping */
    /* block order (with shuffle) when block_records > 0: blocks of that many
     * records, `window` blocks shuffled together (0: 8) */
    uint64_t block_records;
    int window;
} stk_sampler_options;

typedef struct stk_sampler {
    stk_sampler_options o;
    uint64_t *perm;    /* global order of this epoch: count entries */
    uint64_t *blocks;  /* block order: the permuted blocks */
    uint64_t per_rank; /* samples of this rank */
    uint64_t samples;  /* samples delivered per epoch (after drop_last) */
    uint64_t batches;
    uint64_t epoch;
} stk_sampler;

/* Errors: STK_ERR_INVALID_ARG (batch_size < 1, rank outside 0..world-1),
 * STK_ERR_NOMEM. */
stk_status stk_sampler_init(stk_sampler *s, const stk_sampler_options *o);
void stk_sampler_deinit(stk_sampler *s);

/* Compute the order of `epoch`. */
void stk_sampler_epoch(stk_sampler *s, uint64_t epoch);

/* Record index of this rank's sample number k (0 .. samples-1). */
uint64_t stk_sampler_index(const stk_sampler *s, uint64_t k);

/* The global permutation position of this rank's sample k (for replacing a
 * bad record by the next one of the permutation). */
uint64_t stk_sampler_position(const stk_sampler *s, uint64_t k);

/* Samples in batch b. */
int stk_sampler_batch_len(const stk_sampler *s, uint64_t b);

#ifdef __cplusplus
}
#endif
