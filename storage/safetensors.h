/* The safetensors file format (what Hugging Face and PyTorch users read with
 * `safetensors.torch.load_file`): an 8-byte little-endian header length, a
 * JSON header mapping each tensor name to its dtype, shape and byte range,
 * plus an optional "__metadata__" object of string pairs, then the raw
 * little-endian data. docs/FORMAT.md describes what Stoke stores in it.
 *
 *     stk_st_tensor t[2] = {{"fc.weight", STK_ST_F32, 2, shape_w, w, bytes_w}, ...};
 *     const char *keys[1] = {"epoch"}, *values[1] = {"3"};
 *     STK_TRY(stk_safetensors_write("ckpt.safetensors", 2, t, 1, keys, values));
 *
 *     stk_safetensors *f;
 *     STK_TRY(stk_safetensors_read("ckpt.safetensors", &f));
 *     const stk_st_entry *e = stk_safetensors_find(f, "fc.weight");
 *     const float *v = stk_safetensors_data(f, e);
 *     stk_safetensors_free(f);
 *
 * Writing goes to a temporary file in the same directory, which is fsynced
 * and renamed over the target (then the directory is fsynced): a crash
 * leaves either the old file or the new one, never a torn one. Reading
 * validates everything (header length, JSON, dtypes, shapes, byte ranges
 * inside the file and matching the shapes) with messages naming the file
 * and the tensor.
 */
#pragma once

#include "common/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_st_dtype {
    STK_ST_F32,
    STK_ST_F16,
    STK_ST_BF16,
    STK_ST_I32,
    STK_ST_I64,
    STK_ST_U8,
    STK_ST_F64,
} stk_st_dtype;

/* "F32", ... and bytes per element. */
const char *stk_st_dtype_name(stk_st_dtype dt);
size_t stk_st_dtype_size(stk_st_dtype dt);

typedef struct stk_st_tensor {
    const char *name;
    stk_st_dtype dtype;
    int ndim;
    const int64_t *shape;
    const void *data;
    size_t bytes; /* must equal numel * element size */
} stk_st_tensor;

/* Write `n` tensors and `n_meta` metadata pairs atomically. Errors:
 * STK_ERR_INVALID_ARG (duplicate or empty names, size mismatch), STK_ERR_IO. */
stk_status stk_safetensors_write(const char *path, int n, const stk_st_tensor *tensors, int n_meta,
                                 const char *const *keys, const char *const *values);

#define STK_ST_MAX_DIMS 8

typedef struct stk_st_entry {
    char *name;
    stk_st_dtype dtype;
    int ndim;
    int64_t shape[STK_ST_MAX_DIMS];
    uint64_t begin, end; /* byte range within the data section */
} stk_st_entry;

typedef struct stk_safetensors {
    char *path;
    uint8_t *file; /* the whole file */
    size_t len;
    size_t data_offset;     /* 8 + header length */
    stk_st_entry **by_name; /* the entries sorted by name (find) */
    stk_st_entry *entries;
    int n;
    char **meta_keys, **meta_values;
    int n_meta;
} stk_safetensors;

/* Read and validate a file. Errors: STK_ERR_IO, STK_ERR_FORMAT (not
 * safetensors, naming what is wrong), STK_ERR_CORRUPT (truncated data),
 * STK_ERR_NOMEM. */
stk_status stk_safetensors_read(const char *path, stk_safetensors **out);
void stk_safetensors_free(stk_safetensors *f);
const stk_st_entry *stk_safetensors_find(const stk_safetensors *f, const char *name);
const void *stk_safetensors_data(const stk_safetensors *f, const stk_st_entry *e);
/* Metadata value, or NULL. */
const char *stk_safetensors_meta(const stk_safetensors *f, const char *key);

/* Integer metadata `key` within [min, max]. Errors name the file, the key
 * and the value found (a checkpoint is input like any file): STK_ERR_FORMAT
 * when absent, STK_ERR_CORRUPT when not a decimal integer in range. */
stk_status stk_safetensors_meta_int(const stk_safetensors *f, const char *key, int64_t min,
                                    int64_t max, int64_t *out);

#ifdef __cplusplus
}
#endif
