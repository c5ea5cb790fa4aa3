/* The persisted record index of a dataset file (docs/FORMAT.md): opening a
 * file reads it in a few large reads instead of walking the whole records
 * tree, which touches every leaf page (14 s cold for 1.28M records).
 *
 * Where: inside the same LMDB file, a named database "index" holding one
 * value under the key "v1" (not a sidecar: a copy or move of the file keeps
 * its index, and LMDB's commit makes adding it atomic). The value:
 *
 *     "STKINDX1"  magic (8 bytes)
 *     txnid       u64: the LMDB transaction that wrote the index; the file's
 *                 newest transaction must be this one (a file changed after
 *                 its index was written is caught)
 *     count       u64: records
 *     entry_size  u32: 20
 *     crc         u32: CRC-32C of the entries
 *     entries     count x {offset u64, length u32, crc u32, label i32}: each
 *                 record value's place in the file, its CRC and label
 *
 * all little-endian. The index is written after pack's compaction (which
 * moves every page), by reading the compacted file back; adding it commits
 * one more transaction, which moves no record page.
 *
 * Written by stk_record_index_add (index_writer.h); read by stk_dataset_open.
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STK_INDEX_MAGIC      "STKINDX1"
#define STK_INDEX_HEADER     32
#define STK_INDEX_ENTRY_SIZE 20

typedef struct stk_index_entry {
    uint64_t offset;
    uint32_t length, crc;
    int32_t label;
} stk_index_entry;

/* Parse an index value (the bytes of "v1") into entries (malloc'd, count of
 * them), checking it against the file it came from: its transaction, its
 * record count, the entries' CRC, every record inside the file. Errors:
 * STK_ERR_CORRUPT saying what does not match. */
stk_status stk_record_index_parse(const uint8_t *value, uint64_t len, uint64_t file_txnid,
                                  uint64_t count, uint64_t file_size, stk_index_entry **entries);

#ifdef __cplusplus
}
#endif
