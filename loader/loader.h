/* The loader: records of a Stoke dataset -> decoded, augmented batches in a
 * ring of pinned buffers, in order, as fast as the cores allow.
 *
 *     stk_loader_options o = stk_loader_defaults();
 *     o.batch_size = 256;
 *     o.workers = 4;
 *     o.transform = "rrc:224,flip";
 *     stk_loader *l;
 *     if (stk_loader_open("train.stoke", &o, &l) != STK_OK) return fail(stk_last_error());
 *     for (uint64_t epoch = 0; epoch < 10; epoch++) {
 *         stk_loader_start_epoch(l, epoch);
 *         stk_batch *b;
 *         stk_status st;
 *         while ((st = stk_loader_next(l, &b)) == STK_OK) {
 *             train_step(b->data, b->labels, b->count);   // u8 NHWC by default
 *             stk_loader_release(l, b);                   // the buffer goes back to the ring
 *         }
 *         if (st != STK_END) return fail(stk_last_error());
 *     }
 *     stk_loader_close(l);
 *
 * How: a sampler fixes the order of each epoch from (seed, epoch); a fixed
 * pool of worker threads takes chunks of the batches being filled (at most
 * `prefetch` batches at a time, one ring buffer each), reads their records
 * through the I/O backend (io_uring by default: a chunk's reads are in
 * flight together), decodes and augments each straight into its slot of the
 * pinned buffer; the consumer gets batches in order. Once every batch of an
 * epoch has been started, the workers go on with the next epoch's first
 * batches, so the ring is full when start_epoch(epoch + 1) comes (starting
 * any other epoch discards them). Each sample's random
 * choices come from (seed, epoch, record index): batches are bit-identical
 * for any number of workers and any backend. Memory: the ring, per-worker
 * read buffers and decoder scratch; nothing grows across epochs.
 *
 * Bad records (header, CRC, decode, short read): with STK_BAD_SKIP (default)
 * a warning names the record and it is replaced by the next record of the
 * epoch's permutation (deterministic, counted in the stats); with
 * STK_BAD_ERROR the batch fails and next() returns the error. An I/O error
 * (EIO, ...) always fails the batch, with errno text and the offset.
 *
 * Threading: every function is called from one consumer thread. close() may
 * be called at any time (workers blocked on a full ring included): it joins
 * every thread and frees everything. A batch stays valid until it is
 * released, across start_epoch() and restore() too (its buffer stays out of
 * the ring meanwhile: holding every buffer makes next() fail, never wait).
 * stk_loader_release may be called from any thread.
 */
#pragma once

#include "augment/augment.h"
#include "common/status.h"
#include "device/device.h"
#include "loader/record_reader.h"
#include "storage/dataset.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_bad_policy {
    STK_BAD_SKIP = 0,
    STK_BAD_ERROR = 1,
} stk_bad_policy;

/* The order records are read in each epoch (loader/sampler.h). */
typedef enum stk_read_order {
    STK_ORDER_RANDOM = 0,     /* a fresh permutation every epoch (with shuffle, the default) */
    STK_ORDER_BLOCK = 1,      /* FFCV's quasi-random order: blocks of about block_mib MiB of the
                                 file permuted, block_window of them shuffled together */
    STK_ORDER_SEQUENTIAL = 2, /* index (file) order */
} stk_read_order;

/* "random", "block", "sequential"; -1 for another name. */
int stk_read_order_parse(const char *name);
extern const char *const stk_read_order_names[]; /* NULL-terminated */

typedef struct stk_loader_options {
    int batch_size;          /* default 256 */
    int workers;             /* default: number of cores */
    int prefetch;            /* batches in the ring, default 3 */
    const char *transform;   /* spec (augment/transform_spec.h); NULL: the dataset's
                                training default */
    stk_pixel_format format; /* default u8 HWC */
    bool shuffle;            /* default true (false: sequential, whatever order says) */
    stk_read_order order;    /* default random */
    int block_mib;           /* block order: MiB of records per block, default 8 (1..1024) */
    int block_window;        /* block order: blocks shuffled together, default 8 (1..1024) */
    uint64_t seed;
    bool drop_last;
    int rank, world;   /* sharding, default 0 of 1 */
    bool drop_uneven;  /* shard by dropping instead of wrapping */
    stk_io_backend io; /* default uring */
    bool direct;       /* O_DIRECT reads */
    bool direct_auto;  /* default true: O_DIRECT also when the file and the cache do not fit
                          the memory budget (common/memory_budget.h), where the page cache
                          would only thrash */
    int cache_mib;     /* a static cache of the file's first whole blocks, never evicted
                          (loader/block_store.h), 0..STK_LOADER_MAX_CACHE_MIB; default 0 */
    int io_depth;      /* reads in flight per worker, default 32 */
    stk_bad_policy bad_policy;
    bool fast_decode; /* default true: fast IDCT for training (augment.h) */
    bool read_only;   /* read records only: no CRC check, no decode (I/O benchmark) */
    bool checksum;    /* fill stk_batch.checksums (the workers hash each sample) */
    /* the batch ring's memory; NULL: locked pages (stk_host_allocator_locked).
     * Feeding a GPU: its copy engine's host_memory (device/copy_engine.h) */
    const stk_host_allocator *host_memory;
} stk_loader_options;

/* The options' ranges, checked by stk_loader_open whoever calls it (the CLI
 * flags have the same): batch 1..65536, workers 1..1024, prefetch 1..64,
 * seed 0..2^63-1, world 1..65536, rank 0..world-1, cache 0..2^20 MiB and,
 * with the batch ring, at most half the memory budget. A transform whose images
 * are more than 8 times the dataset's largest side (and above 1024 px), or
 * whose batch ring needs more than half the machine's memory, is refused. */
#define STK_LOADER_MAX_BATCH     65536
#define STK_LOADER_MAX_WORKERS   1024
#define STK_LOADER_MAX_WORLD     65536
#define STK_LOADER_MAX_UPSCALE   8
#define STK_LOADER_UPSCALE_FLOOR 1024
#define STK_LOADER_MAX_CACHE_MIB (1 << 20)

stk_loader_options stk_loader_defaults(void);

/* The upscale rule alone, for a transform's out_w x out_h images of the
 * dataset at `path` (stoke peek, whose transforms may give varying sizes):
 * STK_ERR_INVALID_ARG naming the file, the transform and both sizes. */
stk_status stk_loader_check_upscale(const char *path, const char *spec, const stk_meta *m,
                                    int out_w, int out_h);

typedef struct stk_batch {
    void *data; /* count samples, each sample_bytes apart */
    size_t sample_bytes;
    int count; /* samples in this batch (the last may be short) */
    int width, height, channels;
    stk_pixel_format format;
    int32_t *labels;     /* count labels */
    uint64_t *indices;   /* record index of each sample (after bad-record replacement) */
    uint32_t *checksums; /* with options.checksum: CRC-32C of each sample's pixels */
    uint64_t number;     /* batch number in the epoch */
    uint64_t epoch;
    uint64_t trace_id; /* the batch's flow in a --trace timeline (common/trace.h) */
} stk_batch;

typedef struct stk_loader_position {
    uint64_t seed, epoch, cursor; /* cursor: batches of the epoch already delivered */
} stk_loader_position;

#define STK_LOADER_STATS_WORKERS 64 /* per-worker detail for the first 64 workers */

typedef struct stk_worker_stats {
    double read_s, decode_s, augment_s;
    uint64_t bytes_read;
} stk_worker_stats;

typedef struct stk_loader_stats {
    uint64_t images;                    /* delivered this epoch */
    uint64_t bytes_read;                /* bytes read from the file (records, blocks) */
    uint64_t block_loads;               /* whole-block reads (block order, the cache) */
    uint64_t cache_hits;                /* records served by the static cache's memory */
    uint64_t cache_bytes;               /* the static cache's size */
    bool direct;                        /* O_DIRECT in use (asked, or the file does not fit) */
    uint64_t bad_records;               /* skipped and replaced */
    double read_s, decode_s, augment_s; /* summed over workers */
    double wait_s;                      /* the consumer's time blocked in next() */
    uint64_t bytes_held;                /* ring + read buffers + blocks in memory */
    bool ring_locked;                   /* the ring is mlock()ed */
    stk_io_backend io;                  /* backend in use (after any fallback) */
    int workers;
    stk_worker_stats worker[STK_LOADER_STATS_WORKERS]; /* each worker's share */
} stk_loader_stats;

typedef struct stk_loader stk_loader;

/* Open `path` and start the worker threads (they wait for start_epoch).
 * Errors: the dataset's (stk_dataset_open), STK_ERR_INVALID_ARG (bad
 * option or transform: the message names it), STK_ERR_NOMEM. */
stk_status stk_loader_open(const char *path, const stk_loader_options *o, stk_loader **out);

/* Begin `epoch` from its first batch. */
stk_status stk_loader_start_epoch(stk_loader *l, uint64_t epoch);

/* The next batch, in order: STK_OK and *out; STK_END at the end of the
 * epoch; or the error that stopped it (bad record with STK_BAD_ERROR, I/O
 * error). The batch stays valid until stk_loader_release. */
stk_status stk_loader_next(stk_loader *l, stk_batch **out);

/* As stk_loader_next, waiting at most `max_wait_s` for the batch: STK_AGAIN
 * when it is not ready by then (call again; a caller that must react to
 * signals, as Python's KeyboardInterrupt, checks between calls). */
stk_status stk_loader_next_wait(stk_loader *l, double max_wait_s, stk_batch **out);
/* Give a batch's buffer back to the ring. */
void stk_loader_release(stk_loader *l, stk_batch *b);

/* Where the epoch is (to save with a checkpoint). */
stk_loader_position stk_loader_position_get(const stk_loader *l);

/* Continue from a saved position: the batches after `cursor` of `epoch`.
 * Errors: STK_ERR_INVALID_ARG (another seed, cursor past the epoch). */
stk_status stk_loader_restore(stk_loader *l, const stk_loader_position *p);

/* Batches per epoch, output size, stats of the current epoch. */
uint64_t stk_loader_batches(const stk_loader *l);
uint64_t stk_loader_samples(const stk_loader *l); /* images per epoch */
void stk_loader_stats_get(const stk_loader *l, stk_loader_stats *s);
const stk_dataset *stk_loader_dataset(const stk_loader *l);
/* The block order's block size and window in use: the options', or what
 * fitting them to the memory budget made of them (the order follows them). */
void stk_loader_block_params(const stk_loader *l, int *block_mib, int *block_window);

/* Stop the workers, free everything. NULL is a no-op. */
void stk_loader_close(stk_loader *l);

/* The training transform a dataset gets by default: rrc:224,flip for JPEG,
 * pad:4,crop:SIDE,flip for raw images. */
void stk_loader_default_transform(const stk_meta *m, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
