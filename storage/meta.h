/* Dataset-level metadata, stored as text values in the `meta` database so
 * that any LMDB reader can print it (docs/FORMAT.md lists the keys).
 *
 * Who owns what: a stk_meta owns its strings and arrays; stk_meta_deinit frees
 * them. A stk_meta from stk_dataset_meta() belongs to the dataset.
 */
#pragma once

#include "common/status.h"
#include "storage/record.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STK_FORMAT_NAME    "stoke-dataset"
#define STK_FORMAT_VERSION 2 /* written; 1 is still read */

typedef struct stk_meta {
    uint32_t version; /* format version of the file */
    uint64_t count;   /* records 0..count-1 */
    int encoding;     /* stk_encoding shared by every record */
    int channels;     /* channels a decoder outputs (JPEG datasets: 3) */
    uint32_t num_classes;
    char **class_names;     /* num_classes UTF-8 names */
    uint64_t *class_counts; /* records per label */
    uint32_t min_width, max_width, min_height, max_height;
    bool has_stats;         /* mean/std known (not with pack --no-validate) */
    double mean[3], std[3]; /* per channel, pixel values scaled to [0, 1] */
    char *source;           /* what was packed, e.g. "idx:/usr/share/datasets/..." */
    char *packed_with;      /* the tool and flags, e.g. "stoke 0.1.0 pack --from idx" */
} stk_meta;

/* Free what m owns and zero it. */
void stk_meta_deinit(stk_meta *m);

/* Set class names (copied); class_counts are allocated and zeroed. */
stk_status stk_meta_set_classes(stk_meta *m, char *const *names, uint32_t n);

typedef stk_status (*stk_meta_put_fn)(void *ctx, const char *key, const char *value);
typedef const char *(*stk_meta_get_fn)(void *ctx, const char *key); /* NULL: missing */

/* One (key, value) pair of the meta database, as stored (no NUL). */
typedef struct stk_meta_pair {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
} stk_meta_pair;

/* CRC-32C over the pairs other than "checksum", given in key order (LMDB's:
 * bytes compared, shorter first), each as key, a 0 byte, value, a 0 byte.
 * Format version 2 stores it as 8 lowercase hex digits under "checksum". */
uint32_t stk_meta_checksum(const stk_meta_pair *pairs, size_t n);

/* Serialise m as (key, text value) pairs through put, in key order, the
 * last one "checksum". */
stk_status stk_meta_encode(const stk_meta *m, stk_meta_put_fn put, void *ctx);

/* Parse the pairs read through get into m (zeroed first). Errors:
 * STK_ERR_FORMAT (not a Stoke dataset, or a version this build cannot read),
 * STK_ERR_CORRUPT (a key missing or malformed, or a value the writer cannot
 * produce: class counts that do not add up to the count, sizes outside
 * 1..STK_MAX_SIDE, more than STK_MAX_CLASSES classes, a mean outside [0, 1]
 * or a std outside [0, 0.5]). The checksum is the caller's to verify
 * (stk_meta_checksum over every pair). */
stk_status stk_meta_decode(stk_meta *m, stk_meta_get_fn get, void *ctx);

#ifdef __cplusplus
}
#endif
