/* Writing a Stoke dataset: records in index order, then meta, then an
 * atomic publish.
 *
 *     stk_writer *w;
 *     if (stk_writer_open("train.stoke", &w) != STK_OK) ...;
 *     for (...) if (stk_writer_put(w, &record) != STK_OK) goto fail;
 *     if (stk_writer_finish(w, &meta, &bytes) != STK_OK) goto fail;
 * fail:
 *     stk_writer_close(w);   // removes every temporary if finish did not succeed
 *
 * How: records go into a temporary LMDB file next to the target
 * (".<name>.pack-<pid>"), committed in batches (not one transaction per
 * record), without MDB_WRITEMAP (a full disk is an error code, not SIGBUS),
 * with the map grown on demand. finish() writes the meta, compacts into a
 * second temporary with mdb_env_copyfd2(MDB_CP_COMPACT) (records end up in
 * index order, no free pages), fsyncs it, adds the record index of its
 * pages (record_index.h) and renames it over the target:
 * the target is complete or absent. MDB_NOLOCK means no lock file is ever
 * made. Temporaries left by a killed writer whose process is gone are
 * removed by the next stk_writer_open on the same target.
 *
 * One thread at a time.
 */
#pragma once

#include "common/status.h"
#include "storage/meta.h"
#include "storage/record.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_writer stk_writer;

/* Start a dataset that will be published at `path`. Errors: STK_ERR_IO
 * (directory not writable, ...), STK_ERR_NOMEM. */
stk_status stk_writer_open(const char *path, stk_writer **out);

/* Append r as record number stk_writer_count(w); sets r->crc. The bytes are
 * copied. Errors: STK_ERR_IO (disk full, ...), STK_ERR_INVALID_ARG (name
 * too long), STK_ERR_LIMIT. */
stk_status stk_writer_put(stk_writer *w, stk_record *r);

/* Records put so far. */
uint64_t stk_writer_count(const stk_writer *w);

/* The LMDB map size now: it starts at 64 MiB and doubles when full. */
uint64_t stk_writer_map_bytes(const stk_writer *w);

/* Commit, write meta (its count is set to the records put), compact and
 * publish at the target path. *file_bytes gets the final file size.
 * After a failure nothing is left at the target and close() cleans up. */
stk_status stk_writer_finish(stk_writer *w, const stk_meta *meta, uint64_t *file_bytes);

/* Free the writer; unless finish() succeeded, delete its temporaries.
 * NULL is a no-op. */
void stk_writer_close(stk_writer *w);

/* Delete temporaries for `path` left by writers whose process is gone
 * (called by stk_writer_open; exposed for tests). Returns how many. */
int stk_writer_remove_stale(const char *path);

#ifdef __cplusplus
}
#endif
