/* The dataset's files as the loader's readers open them: one descriptor per
 * file (one, or each shard), and reads that do not stop short. Private to
 * loader/ (record_reader.c, block_store.c).
 *
 *     int *fds;
 *     bool direct = true;
 *     if (stk_dataset_fds_open(ds, &direct, true, &fds) != STK_OK) ...;
 *     int64_t got = stk_pread_full(fds[k], buf, len, offset);   // bytes, or -errno
 *     stk_dataset_fds_close(fds, stk_dataset_file_count(ds));
 */
#pragma once

#include "common/status.h"
#include "storage/dataset.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Open each of ds's files: O_DIRECT when *direct, unless a file refuses it
 * (then a warning, *direct false, and none uses it: one way of reading for
 * all); random: no kernel readahead (records read in a shuffled order).
 * *fds malloc'd, one per file. Errors: STK_ERR_IO naming the file,
 * STK_ERR_NOMEM. */
stk_status stk_dataset_fds_open(const stk_dataset *ds, bool *direct, bool random, int **fds);
void stk_dataset_fds_close(int *fds, int n);

/* pread until len bytes, the end of the file or an error: bytes read, or
 * -errno. */
int64_t stk_pread_full(int fd, uint8_t *buf, size_t len, uint64_t off);

#ifdef __cplusplus
}
#endif
