/* Whole blocks of the file in memory, for block order and the static cache.
 *
 *     stk_block_store *bs;
 *     stk_block_store_create(ds, &(stk_block_store_options){.block_records = 9000,
 *                            .all = true, .cache_bytes = 256 << 20, .direct = true}, &bs);
 *     stk_block_store_plan(bs, epoch & 1, sampler, 0);   // this epoch's reads of each block
 *     stk_block_store_activate(bs, epoch & 1, true);
 *     // per chunk of requests (a worker):
 *     for (i ..) reqs[i].given = stk_block_store_serves(bs, reqs[i].index);
 *     stk_block_store_acquire(bs, epoch & 1, reqs, n, &bytes);  // data/len of the given ones
 *     ... decode ...
 *     stk_block_store_release(bs, epoch & 1, reqs, n);
 *     stk_block_store_destroy(bs);
 *
 * A block is block_records consecutive records (the sampler's blocks: one
 * file-contiguous range). The first read of a record of a block that is not
 * in memory reads the block's whole range with one large read (O_DIRECT
 * with `direct`: aligned, around the page cache) and every record of it is
 * then served from memory. Why: in block order the records of a window of
 * blocks are read in a shuffled order, so record-sized reads would be
 * random reads, each at least a page (4 KiB for a 1 KiB record under
 * O_DIRECT); one sequential read per block reads each byte once.
 *
 * Lifetime: with `all` (block order), the store counts how often this rank
 * reads each block in an epoch (plan) and frees a block after its last read
 * (release): memory holds the blocks of the windows being read, about
 * (window + the blocks the prefetched batches reach) x block size. The
 * first blocks in file order up to cache_bytes are the static cache
 * (CoorDL's MinIO): read once, never freed, so they cost no device read
 * from the second epoch on; in random or sequential order (all = false) the
 * store serves only those, and the other records are read one by one.
 *
 * Epoch parity (epoch & 1): the loader's workers start the next epoch before
 * the current one is delivered; each parity has its own counts, and the
 * counts of a parity keep blocks in memory only while it is active.
 *
 * Threading: acquire and release from any number of workers; plan,
 * activate and reset while no worker holds a block of that parity (the
 * loader calls them under its lock, with the workers quiesced or not yet
 * started on that epoch).
 */
#pragma once

#include "common/status.h"
#include "loader/record_reader.h"
#include "loader/sampler.h"
#include "storage/dataset.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_block_store_options {
    uint64_t block_records; /* records per block (>= 1) */
    bool all;               /* serve every block (block order), else the cached ones only */
    uint64_t cache_bytes;   /* static cache: the first whole blocks within this many bytes */
    bool direct;            /* O_DIRECT block reads */
} stk_block_store_options;

typedef struct stk_block_store_stats {
    uint64_t hits;          /* records served from a cached block already in memory */
    uint64_t served;        /* records served by the store */
    uint64_t loads;         /* block reads */
    uint64_t failed_loads;  /* block reads that failed (once a block an epoch) */
    uint64_t bytes_read;    /* their bytes */
    uint64_t cache_bytes;   /* the static cache's size (whole blocks) */
    uint64_t cached_blocks; /* blocks in it */
    uint64_t bytes_held;    /* blocks in memory now, the cache included */
} stk_block_store_stats;

typedef struct stk_block_store stk_block_store;

/* Errors: STK_ERR_INVALID_ARG (block_records 0), STK_ERR_IO (cannot open
 * the file), STK_ERR_NOMEM. */
stk_status stk_block_store_create(const stk_dataset *ds, const stk_block_store_options *o,
                                  stk_block_store **out);
void stk_block_store_destroy(stk_block_store *bs);

/* Whether record `index` is read through the store. */
bool stk_block_store_serves(const stk_block_store *bs, uint64_t index);

/* Count the reads of each block by this rank's samples from..samples-1 of
 * the sampler's epoch into parity `parity` (which must be inactive). */
void stk_block_store_plan(stk_block_store *bs, int parity, const stk_sampler *s, uint64_t from);
/* Whether parity's counts keep blocks in memory. Deactivating frees the
 * blocks only it kept. */
void stk_block_store_activate(stk_block_store *bs, int parity, bool on);
/* Free every block but the cache's, zero both parities' counts, both
 * inactive (the loader restarts an epoch; no block is held). */
void stk_block_store_reset(stk_block_store *bs);

/* For every request with `given`: point data/len at the record's bytes in
 * its block (reading the block first if needed), or set status and error
 * (STK_ERR_IO: the read failed; STK_ERR_CORRUPT: short read). A block
 * whose read failed gives that same error to every later request of its
 * epoch without reading again (the next plan of the parity retries it).
 * Bytes read
 * from the file are added to *bytes. The bytes stay valid until release. */
void stk_block_store_acquire(stk_block_store *bs, int parity, stk_read_req *reqs, int n,
                             uint64_t *bytes);
/* Done with the given requests' bytes (those acquire served). */
void stk_block_store_release(stk_block_store *bs, int parity, const stk_read_req *reqs, int n);

/* Counters for `parity` (-1: both), and the memory held now. */
void stk_block_store_stats_get(stk_block_store *bs, int parity, stk_block_store_stats *out);
/* Zero parity's counters. */
void stk_block_store_stats_reset(stk_block_store *bs, int parity);

#ifdef __cplusplus
}
#endif
