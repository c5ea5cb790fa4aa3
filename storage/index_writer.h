/* Writing a dataset file's persisted record index (record_index.h has the
 * format): pack does it after its compaction, `stoke index` for a file
 * packed before the index existed or changed since.
 *
 *     STK_TRY(stk_record_index_add("train.stoke"));
 */
#pragma once

#include "common/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write (or rewrite) the index of the dataset at path, in place: the file
 * is opened by walking its records (checked as any open checks them), then
 * the index is committed in one LMDB transaction (the file is complete with
 * it or as it was). Errors: those of stk_dataset_open, STK_ERR_IO (read-only
 * file, full disk), STK_ERR_NOMEM. */
stk_status stk_record_index_add(const char *path);

#ifdef __cplusplus
}
#endif
