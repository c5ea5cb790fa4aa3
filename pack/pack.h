/* Packing a source into a Stoke dataset, in parallel, deterministically.
 *
 *     stk_pack_options o = {.workers = 4, .prepare_file = my_prepare, .progress = stderr};
 *     stk_pack_summary sum;
 *     if (stk_pack_run(src, "train.stoke", &o, &sum) != STK_OK)
 *         fprintf(stderr, "stoke: %s\n", stk_last_error());   // "<file>: <reason>"
 *
 * Items are prepared in chunks on a thread pool (read the file, then the
 * prepare hook, which gives what to store in src->encoding: augment's
 * stk_jpeg_prepare for JPEG, stk_raw_prepare for raw pixels, wired in by
 * pack/pack_job.c so storage/ does not depend on augment/; raw sources'
 * pixels go as they are), and one writer appends the
 * results in item order. The output is byte-identical whatever `workers` is.
 * The first bad item stops the pack and nothing is left at the target, unless
 * `skip_bad`, which skips it, counts it and lists it in `skipped_path`.
 * `cancel` (e.g. set by SIGINT) stops between chunks with STK_ERR_CANCELLED.
 */
#pragma once

#include "common/status.h"
#include "pack/source.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STK_PACK_ACTIONS 6

/* What the prepare hook returns for one file: the bytes to store in the
 * source's encoding (JPEG, or raw u8 pixels). */
typedef struct stk_pack_item {
    int action;    /* what was done to it, 0..STK_PACK_ACTIONS-1 (the hook's
                      own numbering, counted in the summary) */
    uint8_t *data; /* bytes to store: the input itself or a new malloc'd buffer */
    size_t len;
    uint32_t width, height;
    int channels;
    bool has_stats;
    uint64_t sum[3], sumsq[3], pixels; /* exact pixel sums as RGB, for mean/std */
} stk_pack_item;

/* Prepare one file's bytes on worker `worker` (0..workers-1). On error, set
 * the message (the reason; pack adds the file name) and return it. */
typedef stk_status (*stk_pack_prepare_fn)(void *ctx, int worker, const uint8_t *in, size_t len,
                                          stk_pack_item *out);

typedef struct stk_pack_options {
    int workers;                      /* threads preparing items (>= 1) */
    bool skip_bad;                    /* skip bad inputs instead of stopping */
    const char *skipped_path;         /* with skip_bad: where to list them ("path<TAB>reason") */
    stk_pack_prepare_fn prepare_file; /* required for file sources (folder, list) */
    void *prepare_ctx;
    uint64_t max_file_bytes; /* larger files are bad input (0: 1 GiB) */
    const volatile sig_atomic_t *cancel;
    FILE *progress;          /* progress bar (NULL: none) */
    const char *packed_with; /* recorded in the meta */
    uint64_t shard_bytes;    /* > 0: shards of about this many bytes (pack/pack_output.h) */
} stk_pack_options;

typedef struct stk_pack_summary {
    uint64_t records;
    uint32_t classes;
    uint64_t skipped;
    uint64_t bytes_in;                  /* source bytes read (raw sources: pixel bytes) */
    uint64_t bytes_out;                 /* size of the dataset file (of every shard) */
    int shards;                         /* files written with shard_bytes (0: one file) */
    uint64_t actions[STK_PACK_ACTIONS]; /* records per stk_pack_item.action */
    double seconds;
} stk_pack_summary;

/* Pack src into out_path. Errors: the first bad item's ("<name>: <reason>"),
 * STK_ERR_IO (writing), STK_ERR_CANCELLED, STK_ERR_INVALID_ARG (nothing to
 * pack). On any error nothing is left at out_path and no temporary remains. */
stk_status stk_pack_run(stk_source *src, const char *out_path, const stk_pack_options *opts,
                        stk_pack_summary *summary);

#ifdef __cplusplus
}
#endif
