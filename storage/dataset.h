/* Reading a Stoke dataset (one LMDB file, docs/FORMAT.md).
 *
 *     stk_dataset *ds;
 *     if (stk_dataset_open("train.stoke", &ds) != STK_OK) return fail(stk_last_error());
 *     const stk_meta *m = stk_dataset_meta(ds);
 *     for (uint64_t i = 0; i < m->count; i++) {
 *         stk_record r;
 *         if (stk_dataset_get(ds, i, &r) != STK_OK) ...;   // header + CRC checked
 *         use(r.payload, r.payload_len, r.label);          // valid until close
 *     }
 *     stk_dataset_close(ds);
 *
 * Opening maps the file read-only and reads it with Stoke's own validating
 * reader of LMDB's format (storage/lmdb_file.h), never with liblmdb: a
 * damaged or hostile file is refused with "PATH: damaged (what, where)"
 * before any value from it is trusted. Open reads the meta, checks its values
 * and builds the record index: (file offset, length) of every record's value,
 * found by walking the records once (leaf pages only). The index lets the
 * loader read records with pread/io_uring instead of page faults.
 *
 * Threading: every function but open and close is safe from any number of
 * threads (the dataset does not change after open).
 */
#pragma once

#include "common/status.h"
#include "storage/meta.h"
#include "storage/record.h"

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_dataset stk_dataset;

/* Open `path`: a .stoke file, or shards read as one dataset ("a.stoke,b.stoke",
 * or a list file naming them one per line, as `stoke pack --shard-size`
 * writes; their version, encoding, channels and classes must agree, records
 * are numbered across them in the order given). The record index comes from the file's persisted
 * index (storage/record_index.h: a few large reads); a file without one, or whose index does not
 * match it (a warning says why), is opened by walking every record page instead. Errors: STK_ERR_IO
 * (missing, unreadable), STK_ERR_FORMAT (not a Stoke dataset, unknown version), STK_ERR_CORRUPT
 * (truncated or damaged file, bad meta, record keys not 0..count-1),
 * STK_ERR_NOMEM. Messages start with path. */
stk_status stk_dataset_open(const char *path, stk_dataset **out);
/* The same, always walking the records (stoke index, verify). */
stk_status stk_dataset_open_walk(const char *path, stk_dataset **out);
/* Whether the open used the file's persisted index. */
bool stk_dataset_indexed(const stk_dataset *ds);
/* What the open touched: the branch and leaf pages its tree walks read
 * through the map (a walk of the records: all of theirs) and the reads of
 * the persisted index. */
void stk_dataset_open_cost(const stk_dataset *ds, uint64_t *pages_walked, uint64_t *reads);
/* The file's persisted index, read and checked anew (stoke verify compares
 * it with a walk): *entries malloc'd, one per record. STK_END (not an
 * error): the file has none. Errors: STK_ERR_CORRUPT ("PATH: record index:
 * why"), STK_ERR_IO, STK_ERR_NOMEM. */
struct stk_index_entry;
stk_status stk_dataset_read_index(const stk_dataset *ds, struct stk_index_entry **entries);

/* Unmap and free. NULL is a no-op. Record views from get() die here. */
void stk_dataset_close(stk_dataset *ds);

const stk_meta *stk_dataset_meta(const stk_dataset *ds);
uint64_t stk_dataset_count(const stk_dataset *ds);
const char *stk_dataset_path(const stk_dataset *ds);
uint64_t stk_dataset_file_size(const stk_dataset *ds);

/* Record `index` from the map, header and CRC checked (check_crc false skips
 * the CRC). Views point into the map. Errors: STK_ERR_INVALID_ARG (index out
 * of range), STK_ERR_CORRUPT / STK_ERR_FORMAT with "PATH: record N (name): reason". */
stk_status stk_dataset_get(stk_dataset *ds, uint64_t index, stk_record *out, bool check_crc);

/* Check a decoded record (stk_dataset_decode) against record `index`'s
 * entry in the file's persisted index: its CRC and label must be the
 * entry's (an index that is not the file's would give other samples
 * silently). STK_OK when the dataset was opened without an index. Errors:
 * STK_ERR_CORRUPT (the caller adds which record). */
stk_status stk_dataset_check_entry(const stk_dataset *ds, uint64_t index, const stk_record *r);

/* Decode a record's bytes (however they were read) and check them against
 * the dataset: stk_record_decode's checks, the record version equal to the
 * file's, the label below the class count, the encoding and the size within
 * the meta's. Errors as stk_record_decode (the caller adds which record). */
stk_status stk_dataset_decode(const stk_dataset *ds, const void *bytes, size_t len, bool check_crc,
                              stk_record *out);

/* Where record `index` lies in the file: byte offset and length of its value. */
stk_status stk_dataset_span(const stk_dataset *ds, uint64_t index, uint64_t *offset,
                            uint32_t *length);

/* Read record `index`'s bytes (header, name, payload) with pread into
 * buf[0..cap); *len gets the length. Errors: STK_ERR_INVALID_ARG (cap too
 * small or index out of range), STK_ERR_IO (errno and offset),
 * STK_ERR_CORRUPT (short read: the file was truncated since open). */
stk_status stk_dataset_pread(const stk_dataset *ds, uint64_t index, void *buf, size_t cap,
                             size_t *len);

/* Record `index`'s bytes where the dataset mapped them (no copy). Valid until close. Touching them
 * after the file was truncated under the reader raises SIGBUS: callers that must survive that check
 * the file size first (the loader's mmap backend does). */
stk_status stk_dataset_map_view(const stk_dataset *ds, uint64_t index, const uint8_t **data,
                                uint32_t *length);

/* A 64-bit fingerprint of the content: the meta's counts, class names,
 * sizes and per-channel statistics (exact over every pixel, so other images
 * give other values), and the CRCs of 64 records spread over the file
 * (read and checked). Copies of one file at other paths agree. Errors: the
 * reads' (STK_ERR_IO, STK_ERR_CORRUPT naming the record), NOMEM. */
stk_status stk_dataset_fingerprint(const stk_dataset *ds, uint64_t *out);

/* Let go of the map's pages this process has touched (they stay in the page
 * cache; the next touch maps them again): a pass over every record keeps
 * its memory flat however large the file. Views stay valid. */
void stk_dataset_trim_map(const stk_dataset *ds);

/* The files a dataset reads: one, or its shards (opened as "a.stoke,b.stoke"
 * or as a list file). Offsets (stk_dataset_span) are in one byte space in
 * which file k starts at file_base(k) (4096-aligned): a reader that opens
 * the files itself reads offset - file_base(file_of(offset)) of file
 * file_of(offset). A record never spans two files. */
int stk_dataset_file_count(const stk_dataset *ds);
const char *stk_dataset_file_path(const stk_dataset *ds, int k);
uint64_t stk_dataset_file_base(const stk_dataset *ds, int k);
int stk_dataset_file_of(const stk_dataset *ds, uint64_t offset);

/* Largest record length in bytes (to size read buffers). */
uint32_t stk_dataset_max_record_bytes(const stk_dataset *ds);

#ifdef __cplusplus
}
#endif
