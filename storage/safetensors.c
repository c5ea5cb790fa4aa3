/* safetensors reading (its JSON header through jansson, common/json.h) and atomic writing. */
#include "storage/safetensors.h"

#include "common/fs.h"
#include "common/json.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const dtype_names[] = {"F32", "F16", "BF16", "I32", "I64", "U8", "F64"};
static const size_t dtype_sizes[] = {4, 2, 2, 4, 8, 1, 8};

const char *stk_st_dtype_name(stk_st_dtype dt) { return dtype_names[dt]; }
size_t stk_st_dtype_size(stk_st_dtype dt) { return dtype_sizes[dt]; }

/* ---- writing --------------------------------------------------------------- */

typedef struct buf {
    char *p;
    size_t n, cap;
    bool oom;
} buf;

static void put(buf *b, const char *s, size_t len)
{
    if (b->oom) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 4096) + len;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

static void put_json_string(buf *b, const char *s)
{
    puts_(b, "\"");
    for (; *s; s++) {
        char esc[8];
        const char *e = stk_json_escape((unsigned char)*s, esc);
        if (e)
            puts_(b, e);
        else
            put(b, s, 1);
    }
    puts_(b, "\"");
}

stk_status stk_safetensors_write(const char *path, int n, const stk_st_tensor *t, int n_meta,
                                 const char *const *keys, const char *const *values)
{
    for (int i = 0; i < n; i++) {
        size_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= (size_t)t[i].shape[d];
        if (!t[i].name || !*t[i].name || t[i].ndim < 0 || t[i].ndim > STK_ST_MAX_DIMS ||
            numel * dtype_sizes[t[i].dtype] != t[i].bytes)
            return stk_error(STK_ERR_INVALID_ARG, "%s: tensor %d (%s) has a bad name, rank or size",
                             path, i, t[i].name ? t[i].name : "(null)");
        for (int j = 0; j < i; j++)
            if (!strcmp(t[i].name, t[j].name))
                return stk_error(STK_ERR_INVALID_ARG, "%s: tensor name %s appears twice", path,
                                 t[i].name);
    }
    buf h = {0};
    puts_(&h, "{");
    if (n_meta > 0) {
        puts_(&h, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i) puts_(&h, ",");
            put_json_string(&h, keys[i]);
            puts_(&h, ":");
            put_json_string(&h, values[i]);
        }
        puts_(&h, "}");
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        char num[64];
        if (i || n_meta > 0) puts_(&h, ",");
        put_json_string(&h, t[i].name);
        puts_(&h, ":{\"dtype\":\"");
        puts_(&h, dtype_names[t[i].dtype]);
        puts_(&h, "\",\"shape\":[");
        for (int d = 0; d < t[i].ndim; d++) {
            snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
            puts_(&h, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + t[i].bytes));
        puts_(&h, num);
        off += t[i].bytes;
    }
    puts_(&h, "}");
    while (!h.oom && h.n % 8) puts_(&h, " "); /* keep the data 8-byte aligned */
    if (h.oom) {
        free(h.p);
        return stk_error(STK_ERR_NOMEM, "%s: no memory for the header", path);
    }

    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
    stk_file_part *parts = malloc((size_t)(n + 2) * sizeof *parts);
    if (!parts) {
        free(h.p);
        return stk_error(STK_ERR_NOMEM, "%s: no memory", path);
    }
    parts[0] = (stk_file_part){len8, 8};
    parts[1] = (stk_file_part){h.p, h.n};
    for (int i = 0; i < n; i++) parts[i + 2] = (stk_file_part){t[i].data, t[i].bytes};
    stk_status st = stk_file_write_atomic(path, parts, n + 2);
    free(parts);
    free(h.p);
    return st;
}

/* ---- reading --------------------------------------------------------------- */

/* The header's tensor entries and metadata, from jansson's tree of it
 * (common/json.h's stk_json_load: duplicate keys, NUL and lone surrogates
 * already refused). Messages go to err. */
static bool fail_(char *err, size_t cap, const char *what)
{
    if (!err[0]) snprintf(err, cap, "%s", what);
    return false;
}

/* [n, n, ...]: at most `max` integers in 0..limit. */
static bool uint_array(const json_t *a, uint64_t *out, int max, int *count, uint64_t limit,
                       char *err, size_t cap)
{
    if (!json_is_array(a)) return fail_(err, cap, "expected an array of numbers");
    if (json_array_size(a) > (size_t)max) return fail_(err, cap, "too many numbers in an array");
    *count = (int)json_array_size(a);
    for (int i = 0; i < *count; i++) {
        const json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return fail_(err, cap, "expected a number");
        out[i] = (uint64_t)json_integer_value(v);
        if (out[i] > limit) return fail_(err, cap, "a dimension is too large");
    }
    return true;
}

static bool parse_entry(const json_t *o, stk_st_entry *e, char *err, size_t cap)
{
    if (!json_is_object(o)) return fail_(err, cap, "expected an object");
    bool have_dtype = false, have_shape = false, have_off = false;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        if (!strcmp(key, "dtype")) {
            int k = -1;
            for (int i = 0; json_is_string(v) && i < 7; i++)
                if (!strcmp(json_string_value(v), dtype_names[i])) k = i;
            if (k < 0) {
                char m[96];
                snprintf(m, sizeof m, "dtype %.40s is not supported",
                         json_is_string(v) ? json_string_value(v) : "(not a string)");
                return fail_(err, cap, m);
            }
            e->dtype = (stk_st_dtype)k;
            have_dtype = true;
        } else if (!strcmp(key, "shape")) {
            uint64_t dims[STK_ST_MAX_DIMS];
            if (!uint_array(v, dims, STK_ST_MAX_DIMS, &e->ndim, 1ull << 40, err, cap)) return false;
            for (int d = 0; d < e->ndim; d++) e->shape[d] = (int64_t)dims[d];
            have_shape = true;
        } else if (!strcmp(key, "data_offsets")) {
            uint64_t off[2];
            int c;
            if (!uint_array(v, off, 2, &c, UINT64_MAX, err, cap)) return false;
            if (c != 2) return fail_(err, cap, "data_offsets needs two numbers");
            e->begin = off[0];
            e->end = off[1];
            have_off = true;
        } else {
            return fail_(err, cap, "unknown key in a tensor entry");
        }
    }
    if (!have_dtype || !have_shape || !have_off)
        return fail_(err, cap, "a tensor entry lacks dtype, shape or data_offsets");
    return true;
}

static bool parse_meta(const json_t *o, stk_safetensors *f, char *err, size_t cap)
{
    if (!json_is_object(o)) return fail_(err, cap, "__metadata__ is not an object");
    size_t n = json_object_size(o);
    f->meta_keys = calloc(n ? n : 1, sizeof *f->meta_keys);
    f->meta_values = calloc(n ? n : 1, sizeof *f->meta_values);
    if (!f->meta_keys || !f->meta_values) return fail_(err, cap, "no memory");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        if (!json_is_string(v)) return fail_(err, cap, "a __metadata__ value is not a string");
        char *k = strdup(key), *val = strdup(json_string_value(v));
        if (!k || !val) {
            free(k);
            free(val);
            return fail_(err, cap, "no memory");
        }
        f->meta_keys[f->n_meta] = k;
        f->meta_values[f->n_meta++] = val;
    }
    return true;
}

/* The header's top-level object: tensors by name, and __metadata__. */
static bool parse_header(const json_t *root, stk_safetensors *f, char *err, size_t cap)
{
    if (!json_is_object(root)) return fail_(err, cap, "the header is not a JSON object");
    size_t n = json_object_size(root);
    if (!(f->entries = calloc(n ? n : 1, sizeof *f->entries))) return fail_(err, cap, "no memory");
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)root, name, v) {
        if (!strcmp(name, "__metadata__")) {
            if (!parse_meta(v, f, err, cap)) return false;
            continue;
        }
        stk_st_entry *e = &f->entries[f->n++];
        if (!(e->name = strdup(name))) return fail_(err, cap, "no memory");
        if (!parse_entry(v, e, err, cap)) {
            char m[240];
            snprintf(m, sizeof m, "tensor %.60s: %.150s", name, err);
            snprintf(err, cap, "%s", m);
            return false;
        }
    }
    return true;
}

void stk_safetensors_free(stk_safetensors *f)
{
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->entries[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->meta_keys);
    free(f->meta_values);
    free(f->entries);
    free(f->by_name);
    free(f->file);
    free(f->path);
    free(f);
}

static int cmp_name(const void *a, const void *b)
{
    const stk_st_entry *x = *(const stk_st_entry *const *)a, *y = *(const stk_st_entry *const *)b;
    return strcmp(x->name, y->name);
}

static int cmp_begin(const void *a, const void *b)
{
    const stk_st_entry *x = *(const stk_st_entry *const *)a, *y = *(const stk_st_entry *const *)b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

/* Every tensor's byte range matches its shape (counted without overflow);
 * the ranges, in file order, tile the data section exactly as the format
 * requires (no overlap, no hole, nothing after); names are unique. Sorting
 * keeps it O(n log n): a million tiny tensors check in a second. */
static stk_status check_entries(stk_safetensors *f)
{
    const char *path = f->path;
    size_t data_len = f->len - f->data_offset;
    stk_st_entry **order = malloc((size_t)(f->n ? f->n : 1) * sizeof *order);
    if (!order) return stk_error(STK_ERR_NOMEM, "%s: no memory", path);
    stk_status st = STK_OK;
    for (int i = 0; i < f->n && st == STK_OK; i++) {
        stk_st_entry *e = &f->entries[i];
        order[i] = e;
        uint64_t numel = 1, bytes;
        bool over = false;
        for (int d = 0; d < e->ndim; d++)
            over |= __builtin_mul_overflow(numel, (uint64_t)e->shape[d], &numel);
        over |= __builtin_mul_overflow(numel, (uint64_t)dtype_sizes[e->dtype], &bytes);
        if (over || e->end < e->begin || e->end - e->begin != bytes)
            st = stk_error(STK_ERR_FORMAT,
                           "%s: tensor %s: byte range [%llu, %llu) does not match its shape "
                           "(%s elements of %s)",
                           path, e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                           over ? "too many" : "that many", dtype_names[e->dtype]);
        else if (e->end > data_len)
            st = stk_error(STK_ERR_CORRUPT,
                           "%s: tensor %s: data ends at byte %llu but the file has %zu data "
                           "bytes (truncated?)",
                           path, e->name, (unsigned long long)e->end, data_len);
    }
    if (st == STK_OK) {
        qsort(order, (size_t)f->n, sizeof *order, cmp_begin);
        uint64_t at = 0;
        for (int i = 0; i < f->n && st == STK_OK; i++) {
            if (order[i]->begin != at)
                st = stk_error(STK_ERR_FORMAT,
                               "%s: tensor %s: data starts at byte %llu, where %s byte %llu "
                               "(tensors must tile the data section without overlap or gap)",
                               path, order[i]->name, (unsigned long long)order[i]->begin,
                               order[i]->begin < at ? "an earlier tensor's data runs to"
                                                    : "the previous tensor's data ends at",
                               (unsigned long long)at);
            at = order[i]->end;
        }
        if (st == STK_OK && at != data_len)
            st = stk_error(STK_ERR_FORMAT,
                           "%s: the tensors' data ends at byte %llu, the file has %zu data bytes",
                           path, (unsigned long long)at, data_len);
    }
    if (st == STK_OK) {
        qsort(order, (size_t)f->n, sizeof *order, cmp_name);
        for (int i = 1; i < f->n && st == STK_OK; i++)
            if (!strcmp(order[i - 1]->name, order[i]->name))
                st = stk_error(STK_ERR_FORMAT, "%s: tensor %s appears twice", path, order[i]->name);
    }
    if (st == STK_OK) {
        f->by_name = order; /* kept for stk_safetensors_find */
        return STK_OK;
    }
    free(order);
    return st;
}

stk_status stk_safetensors_read(const char *path, stk_safetensors **out)
{
    *out = NULL;
    stk_safetensors *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return stk_error(STK_ERR_NOMEM, "%s: no memory", path);
    }
    stk_status st = stk_file_read_all(path, (uint64_t)1 << 40, &f->file, &f->len);
    if (st != STK_OK) {
        stk_safetensors_free(f);
        return stk_error_prefix(st, "%s", path);
    }
    if (f->len < 8) {
        st = stk_error(STK_ERR_FORMAT, "%s: not a safetensors file (%zu bytes)", path, f->len);
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)f->file[i] << (8 * i);
    if (hlen < 2 || hlen > f->len - 8 || hlen > (100u << 20)) {
        st = stk_error(STK_ERR_FORMAT,
                       "%s: not a safetensors file (header length %llu for a %zu-byte file)", path,
                       (unsigned long long)hlen, f->len);
        goto fail;
    }
    f->data_offset = 8 + (size_t)hlen;
    json_t *root;
    if ((st = stk_json_load((const char *)f->file + 8, (size_t)hlen, &root)) != STK_OK) {
        stk_error_prefix(st, "%s: not a valid safetensors header", path);
        goto fail;
    }
    char err[240] = "";
    bool ok = parse_header(root, f, err, sizeof err);
    json_decref(root);
    if (!ok) {
        st = stk_error(STK_ERR_FORMAT, "%s: not a valid safetensors header: %s", path, err);
        goto fail;
    }
    if ((st = check_entries(f)) != STK_OK) goto fail;
    *out = f;
    return STK_OK;
fail:
    stk_safetensors_free(f);
    return st;
}

const stk_st_entry *stk_safetensors_find(const stk_safetensors *f, const char *name)
{
    int lo = 0, hi = f->n; /* binary search over the names, sorted at read */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->by_name[mid]->name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const void *stk_safetensors_data(const stk_safetensors *f, const stk_st_entry *e)
{
    return f->file + f->data_offset + e->begin;
}

const char *stk_safetensors_meta(const stk_safetensors *f, const char *key)
{
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_values[i];
    return NULL;
}

stk_status stk_safetensors_meta_int(const stk_safetensors *f, const char *key, int64_t min,
                                    int64_t max, int64_t *out)
{
    const char *v = stk_safetensors_meta(f, key);
    if (!v)
        return stk_error(STK_ERR_FORMAT,
                         "%s: not a Stoke training checkpoint (no \"%s\" in its "
                         "metadata)",
                         f->path, key);
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < min || x > max)
        return stk_error(STK_ERR_CORRUPT,
                         "%s: damaged checkpoint metadata: \"%s\" is \"%.40s\", not an integer "
                         "in %lld..%lld",
                         f->path, key, v, (long long)min, (long long)max);
    *out = x;
    return STK_OK;
}
