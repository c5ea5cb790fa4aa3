/* Where pack's records go: one dataset file, or shards of about
 * shard_bytes each (NAME-00000-of-000NN.stoke and the list NAME.shards that
 * opens them as one dataset, storage/dataset.h). Each shard is a complete
 * dataset: its own meta (its class counts, sizes and statistics; the class
 * names of all), record index and checksums. Private to storage/ (pack.c).
 *
 * Publishing: one file is renamed into place by its writer (complete or
 * absent). Shards are written as hidden temporaries and renamed into place
 * together at the end, the list last: an interrupted pack leaves no shard
 * of its own behind (a kill between two renames leaves the renamed ones and
 * no list).
 */
#pragma once

#include "common/status.h"
#include "pack/source.h"
#include "storage/meta.h"
#include "storage/record.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_pack_output stk_pack_output;

/* shard_bytes 0: one file at out_path. packed_with: recorded in each meta. */
stk_status stk_pack_output_open(const char *out_path, uint64_t shard_bytes, const stk_source *src,
                                const char *packed_with, stk_pack_output **out);
/* Write r and count it in its shard's meta; with has_stats, its exact pixel
 * sums (as RGB) go into the shard's mean and std. */
stk_status stk_pack_output_put(stk_pack_output *o, stk_record *r, bool has_stats,
                               const uint64_t sum[3], const uint64_t sumsq[3], uint64_t pixels);
uint64_t stk_pack_output_count(const stk_pack_output *o);
/* Shards written (0: one file). */
int stk_pack_output_shards(const stk_pack_output *o);
/* Finish the last file, publish everything; *bytes_out: the files' sizes. */
stk_status stk_pack_output_finish(stk_pack_output *o, uint64_t *bytes_out);
/* Free; unless finish succeeded, remove every file this output wrote. */
void stk_pack_output_close(stk_pack_output *o);

#ifdef __cplusplus
}
#endif
