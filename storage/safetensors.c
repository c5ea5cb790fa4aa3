/* safetensors reading (with a small JSON parser for its header) and atomic writing. */
#include "storage/safetensors.h"

#include "common/fs.h"
#include "common/json.h"

#include <errno.h>
#include <fcntl.h>
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

typedef struct parser {
    const char *p, *end;
    const char *path;
    char err[240];
} parser;

static bool fail_(parser *ps, const char *what)
{
    if (!ps->err[0]) snprintf(ps->err, sizeof ps->err, "%s", what);
    return false;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\t' || *ps->p == '\r'))
        ps->p++;
}

static bool expect(parser *ps, char c)
{
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != c) {
        char m[48];
        snprintf(m, sizeof m, "expected '%c' in the JSON header", c);
        return fail_(ps, m);
    }
    ps->p++;
    return true;
}

/* A JSON string (escapes \" \\ \/ \b \f \n \r \t \uXXXX, surrogate pairs; others refused). */
static char *parse_string(parser *ps)
{
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != '"') {
        fail_(ps, "expected a string in the JSON header");
        return NULL;
    }
    ps->p++;
    size_t cap = 32, n = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    while (ps->p < ps->end && *ps->p != '"') {
        char b[4] = {*ps->p++}; /* the bytes this step adds: 1, or a \u escape's UTF-8 */
        int nb = 1;
        if (b[0] == '\\') {
            if (ps->p >= ps->end) break;
            char e = *ps->p++;
            switch (e) {
            case '"':
            case '\\':
            case '/': b[0] = e; break;
            case 'b': b[0] = '\b'; break;
            case 'f': b[0] = '\f'; break;
            case 'n': b[0] = '\n'; break;
            case 'r': b[0] = '\r'; break;
            case 't': b[0] = '\t'; break;
            case 'u': { /* any code point, as UTF-8 (Python's json writes \u00e9) */
                size_t used;
                if ((nb = stk_json_unicode_escape(ps->p, ps->end, b, &used)) < 0) {
                    free(s);
                    fail_(ps, "bad \\u escape in the JSON header");
                    return NULL;
                }
                ps->p += used;
                break;
            }
            default:
                free(s);
                fail_(ps, "bad escape in the JSON header");
                return NULL;
            }
        }
        if (n + (size_t)nb + 1 > cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) {
                free(s);
                return NULL;
            }
            s = t;
        }
        memcpy(s + n, b, (size_t)nb);
        n += (size_t)nb;
    }
    if (ps->p >= ps->end) {
        free(s);
        fail_(ps, "unterminated string in the JSON header");
        return NULL;
    }
    ps->p++;
    s[n] = '\0';
    return s;
}

static bool parse_uint(parser *ps, uint64_t *v)
{
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail_(ps, "expected a number");
    uint64_t x = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        if (x > (UINT64_MAX - 9) / 10) return fail_(ps, "number too large in the JSON header");
        x = x * 10 + (uint64_t)(*ps->p++ - '0');
    }
    *v = x;
    return true;
}

/* [n, n, ...] with at most `max` numbers. */
static bool parse_uint_array(parser *ps, uint64_t *out, int max, int *count)
{
    if (!expect(ps, '[')) return false;
    *count = 0;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return true;
    }
    for (;;) {
        if (*count >= max) return fail_(ps, "too many numbers in an array");
        if (!parse_uint(ps, &out[(*count)++])) return false;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        return expect(ps, ']');
    }
}

static bool parse_entry(parser *ps, stk_st_entry *e)
{
    if (!expect(ps, '{')) return false;
    bool have_dtype = false, have_shape = false, have_off = false;
    for (;;) {
        char *key = parse_string(ps);
        if (!key) return false;
        bool ok = expect(ps, ':');
        if (ok && !strcmp(key, "dtype")) {
            char *v = parse_string(ps);
            ok = v != NULL;
            if (ok) {
                int k = -1;
                for (int i = 0; i < 7; i++)
                    if (!strcmp(v, dtype_names[i])) k = i;
                if (k < 0) {
                    char m[96];
                    snprintf(m, sizeof m, "dtype %.40s is not supported", v);
                    ok = fail_(ps, m);
                }
                e->dtype = (stk_st_dtype)k;
                free(v);
                have_dtype = true;
            }
        } else if (ok && !strcmp(key, "shape")) {
            uint64_t dims[STK_ST_MAX_DIMS];
            ok = parse_uint_array(ps, dims, STK_ST_MAX_DIMS, &e->ndim);
            for (int d = 0; ok && d < e->ndim; d++) {
                if (dims[d] > (1ull << 40)) ok = fail_(ps, "a dimension is too large");
                e->shape[d] = (int64_t)dims[d];
            }
            have_shape = true;
        } else if (ok && !strcmp(key, "data_offsets")) {
            uint64_t off[2];
            int c;
            ok = parse_uint_array(ps, off, 2, &c);
            if (ok && c != 2) ok = fail_(ps, "data_offsets needs two numbers");
            e->begin = off[0];
            e->end = off[1];
            have_off = true;
        } else if (ok) {
            ok = fail_(ps, "unknown key in a tensor entry");
        }
        free(key);
        if (!ok) return false;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (!expect(ps, '}')) return false;
        break;
    }
    if (!have_dtype || !have_shape || !have_off)
        return fail_(ps, "a tensor entry lacks dtype, shape or data_offsets");
    return true;
}

static bool parse_meta(parser *ps, stk_safetensors *f)
{
    if (!expect(ps, '{')) return false;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return true;
    }
    for (;;) {
        char *k = parse_string(ps), *v = NULL;
        if (!k || !expect(ps, ':') || !(v = parse_string(ps))) {
            free(k);
            return false;
        }
        /* Geometric growth: one realloc per pair made a hostile header with
         * a million pairs quadratic. */
        bool grow = (f->n_meta & (f->n_meta - 1)) == 0; /* at 0, 1, 2, 4, 8, ... */
        size_t cap = f->n_meta ? 2 * (size_t)f->n_meta : 1;
        char **nk = grow ? realloc(f->meta_keys, cap * sizeof *nk) : f->meta_keys;
        if (nk) f->meta_keys = nk;
        char **nv = grow ? realloc(f->meta_values, cap * sizeof *nv) : f->meta_values;
        if (nv) f->meta_values = nv;
        if (!nk || !nv) {
            free(k);
            free(v);
            return fail_(ps, "no memory");
        }
        f->meta_keys[f->n_meta] = k;
        f->meta_values[f->n_meta++] = v;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        return expect(ps, '}');
    }
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
    parser ps = {(const char *)f->file + 8, (const char *)f->file + 8 + hlen, path, ""};
    if (!expect(&ps, '{')) goto bad;
    skip_ws(&ps);
    if (ps.p < ps.end && *ps.p == '}') {
        ps.p++;
    } else {
        for (;;) {
            char *name = parse_string(&ps);
            if (!name) goto bad;
            if (!expect(&ps, ':')) {
                free(name);
                goto bad;
            }
            if (!strcmp(name, "__metadata__")) {
                free(name);
                if (!parse_meta(&ps, f)) goto bad;
            } else {
                /* Geometric growth (at n = 0, 1, 2, 4, ...): one realloc per
                 * tensor made 200,000 tensors quadratic. */
                stk_st_entry *e = f->entries;
                if ((f->n & (f->n - 1)) == 0)
                    e = realloc(f->entries, (f->n ? 2 * (size_t)f->n : 1) * sizeof *e);
                if (!e) {
                    free(name);
                    fail_(&ps, "no memory");
                    goto bad;
                }
                f->entries = e;
                e = &f->entries[f->n++];
                memset(e, 0, sizeof *e);
                e->name = name;
                if (!parse_entry(&ps, e)) {
                    char m[240];
                    snprintf(m, sizeof m, "tensor %.60s: %.150s", name, ps.err);
                    snprintf(ps.err, sizeof ps.err, "%s", m);
                    goto bad;
                }
            }
            skip_ws(&ps);
            if (ps.p < ps.end && *ps.p == ',') {
                ps.p++;
                continue;
            }
            if (!expect(&ps, '}')) goto bad;
            break;
        }
    }
    skip_ws(&ps);
    if (ps.p != ps.end) {
        fail_(&ps, "trailing bytes after the JSON header");
        goto bad;
    }
    if ((st = check_entries(f)) != STK_OK) goto fail;
    *out = f;
    return STK_OK;
bad:
    st = stk_error(STK_ERR_FORMAT, "%s: not a valid safetensors header: %s", path,
                   ps.err[0] ? ps.err : "no memory");
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
