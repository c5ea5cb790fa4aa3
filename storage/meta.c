#include "storage/meta.h"

#include "common/text.h"

#include "common/crc32c.h"
#include "common/fs.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void stk_meta_deinit(stk_meta *m)
{
    for (uint32_t i = 0; m->class_names && i < m->num_classes; i++) free(m->class_names[i]);
    free(m->class_names);
    free(m->class_counts);
    free(m->source);
    free(m->packed_with);
    memset(m, 0, sizeof *m);
}

stk_status stk_meta_set_classes(stk_meta *m, char *const *names, uint32_t n)
{
    char **copy = calloc(n ? n : 1, sizeof *copy);
    uint64_t *counts = calloc(n ? n : 1, sizeof *counts);
    if (!copy || !counts) goto nomem;
    for (uint32_t i = 0; i < n; i++)
        if (!(copy[i] = strdup(names[i]))) goto nomem;
    for (uint32_t i = 0; m->class_names && i < m->num_classes; i++) free(m->class_names[i]);
    free(m->class_names);
    free(m->class_counts);
    m->class_names = copy;
    m->class_counts = counts;
    m->num_classes = n;
    return STK_OK;
nomem:
    for (uint32_t i = 0; copy && i < n; i++) free(copy[i]);
    free(copy);
    free(counts);
    return stk_error(STK_ERR_NOMEM, "out of memory");
}

static int pair_cmp(const void *a, const void *b)
{
    const stk_meta_pair *x = a, *y = b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

uint32_t stk_meta_checksum(const stk_meta_pair *pairs, size_t n)
{
    uint32_t crc = 0;
    const uint8_t zero = 0;
    for (size_t i = 0; i < n; i++) {
        if (pairs[i].key_len == 8 && memcmp(pairs[i].key, "checksum", 8) == 0) continue;
        crc = stk_crc32c(crc, pairs[i].key, pairs[i].key_len);
        crc = stk_crc32c(crc, &zero, 1);
        crc = stk_crc32c(crc, pairs[i].value, pairs[i].value_len);
        crc = stk_crc32c(crc, &zero, 1);
    }
    return crc;
}

/* The pairs, collected so that their checksum can be written with them. */
typedef struct pair_list {
    stk_meta_pair item[32];
    size_t n;
} pair_list;

static stk_status collect_pair(void *ctx, const char *key, const char *value)
{
    pair_list *l = ctx;
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v || l->n == 32) {
        free(k);
        free(v);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    l->item[l->n++] = (stk_meta_pair){k, strlen(k), v, strlen(v)};
    return STK_OK;
}

static stk_status encode_pairs(const stk_meta *m, stk_meta_put_fn put, void *ctx);

stk_status stk_meta_encode(const stk_meta *m, stk_meta_put_fn put, void *ctx)
{
    pair_list l = {.n = 0};
    stk_status st = encode_pairs(m, collect_pair, &l);
    if (st != STK_OK) goto out;
    qsort(l.item, l.n, sizeof *l.item, pair_cmp); /* LMDB's key order */
    char sum[16];
    snprintf(sum, sizeof sum, "%08x", stk_meta_checksum(l.item, l.n));
    for (size_t i = 0; i < l.n && st == STK_OK; i++) st = put(ctx, l.item[i].key, l.item[i].value);
    if (st == STK_OK) st = put(ctx, "checksum", sum);
out:
    for (size_t i = 0; i < l.n; i++) {
        free((char *)l.item[i].key);
        free((char *)l.item[i].value);
    }
    return st;
}

static stk_status encode_pairs(const stk_meta *m, stk_meta_put_fn put, void *ctx)
{
    char v[256];
    stk_status st;
#define PUT(key, value)                                                                            \
    do {                                                                                           \
        if ((st = put(ctx, key, value)) != STK_OK) goto out;                                       \
    } while (0)
    stk_strbuf names = {0}, counts = {0}, mean = {0}, std = {0};
    PUT("format", STK_FORMAT_NAME);
    snprintf(v, sizeof v, "%d", STK_FORMAT_VERSION);
    PUT("version", v);
    snprintf(v, sizeof v, "%" PRIu64, m->count);
    PUT("count", v);
    PUT("encoding", stk_encoding_name(m->encoding));
    snprintf(v, sizeof v, "%d", m->channels);
    PUT("channels", v);
    snprintf(v, sizeof v, "%u", m->num_classes);
    PUT("num_classes", v);
    for (uint32_t i = 0; i < m->num_classes; i++) {
        stk_strbuf_printf(&names, "%s%s", i ? "\n" : "", m->class_names[i]);
        stk_strbuf_printf(&counts, "%s%" PRIu64, i ? " " : "", m->class_counts[i]);
    }
    if (names.failed || counts.failed) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto out;
    }
    PUT("classes", names.s ? names.s : "");
    PUT("class_counts", counts.s ? counts.s : "");
    snprintf(v, sizeof v, "%u %u", m->min_width, m->max_width);
    PUT("width_range", v);
    snprintf(v, sizeof v, "%u %u", m->min_height, m->max_height);
    PUT("height_range", v);
    if (m->has_stats) {
        for (int c = 0; c < m->channels && c < 3; c++) {
            stk_strbuf_printf(&mean, "%s%.6f", c ? " " : "", m->mean[c]);
            stk_strbuf_printf(&std, "%s%.6f", c ? " " : "", m->std[c]);
        }
        if (mean.failed || std.failed) {
            st = stk_error(STK_ERR_NOMEM, "out of memory");
            goto out;
        }
        PUT("mean", mean.s);
        PUT("std", std.s);
    }
    PUT("source", m->source ? m->source : "");
    PUT("packed_with", m->packed_with ? m->packed_with : "");
    st = STK_OK;
#undef PUT
out:
    free(names.s);
    free(counts.s);
    free(mean.s);
    free(std.s);
    return st;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || (*end && *end != ' ')) return false;
    *out = v;
    return true;
}

static bool parse_u32_pair(const char *s, uint32_t *a, uint32_t *b)
{
    unsigned x, y;
    char tail;
    if (!s || sscanf(s, "%u %u%c", &x, &y, &tail) != 2) return false;
    *a = x, *b = y;
    return true;
}

static bool parse_doubles(const char *s, double *out, int n)
{
    if (!s) return false;
    for (int i = 0; i < n; i++) {
        char *end;
        out[i] = strtod(s, &end);
        if (end == s) return false;
        s = end;
    }
    return *s == '\0';
}

stk_status stk_meta_decode(stk_meta *m, stk_meta_get_fn get, void *ctx)
{
    memset(m, 0, sizeof *m);
    const char *format = get(ctx, "format");
    if (!format || strcmp(format, STK_FORMAT_NAME) != 0)
        return stk_error(STK_ERR_FORMAT, "not a Stoke dataset (no \"format\": \"%s\" in its meta)",
                         STK_FORMAT_NAME);
    uint64_t version, v;
    if (!parse_u64(get(ctx, "version"), &version))
        return stk_error(STK_ERR_CORRUPT, "meta: missing or bad \"version\"");
    if (version < 1 || version > STK_FORMAT_VERSION)
        return stk_error(STK_ERR_FORMAT,
                         "dataset format version %" PRIu64
                         " is not supported (this stoke reads versions 1 to %d)%s",
                         version, STK_FORMAT_VERSION,
                         version > STK_FORMAT_VERSION ? "; upgrade stoke" : "; re-pack it");
    m->version = (uint32_t)version;
    stk_status st = STK_ERR_CORRUPT;
    const char *bad = NULL;
    if (!parse_u64(get(ctx, "count"), &m->count)) {
        bad = "count";
        goto fail;
    }
    const char *enc = get(ctx, "encoding");
    if (enc && strcmp(enc, "jpeg") == 0)
        m->encoding = STK_ENCODING_JPEG;
    else if (enc && strcmp(enc, "raw_u8") == 0)
        m->encoding = STK_ENCODING_RAW_U8;
    else {
        bad = "encoding";
        goto fail;
    }
    if (!parse_u64(get(ctx, "channels"), &v) || (v != 1 && v != 3)) {
        bad = "channels";
        goto fail;
    }
    m->channels = (int)v;
    if (!parse_u64(get(ctx, "num_classes"), &v) || v > STK_MAX_CLASSES) {
        bad = "num_classes";
        goto fail;
    }
    uint32_t n = (uint32_t)v;
    m->num_classes = n;
    m->class_names = calloc(n ? n : 1, sizeof *m->class_names);
    m->class_counts = calloc(n ? n : 1, sizeof *m->class_counts);
    if (!m->class_names || !m->class_counts) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto out;
    }
    const char *names = get(ctx, "classes");
    const char *counts = get(ctx, "class_counts");
    if (!names || !counts) {
        bad = !names ? "classes" : "class_counts";
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++) {
        const char *nl = strchr(names, '\n');
        size_t len = nl ? (size_t)(nl - names) : strlen(names);
        if ((nl == NULL) != (i == n - 1)) {
            bad = "classes";
            goto fail;
        }
        if (!stk_utf8_valid(names, len) || memchr(names, '\0', len)) {
            /* pack writes UTF-8 names only: JSON and terminals rely on it */
            st = stk_error(STK_ERR_CORRUPT, "meta: the name of class %u is not UTF-8", i);
            goto out;
        }
        if (!(m->class_names[i] = strndup(names, len))) {
            st = stk_error(STK_ERR_NOMEM, "out of memory");
            goto out;
        }
        names = nl ? nl + 1 : names + len;
        char *end;
        errno = 0;
        m->class_counts[i] = strtoull(counts, &end, 10);
        if (end == counts || errno) {
            bad = "class_counts";
            goto fail;
        }
        counts = end;
    }
    if (!parse_u32_pair(get(ctx, "width_range"), &m->min_width, &m->max_width)) {
        bad = "width_range";
        goto fail;
    }
    if (!parse_u32_pair(get(ctx, "height_range"), &m->min_height, &m->max_height)) {
        bad = "height_range";
        goto fail;
    }
    /* The values the writer can produce, and nothing else: pixels scaled to
     * [0, 1] have their mean in [0, 1] and their std in [0, 0.5]. */
    uint64_t total = 0;
    bool counts_ok = true;
    for (uint32_t i = 0; i < n && counts_ok; i++) {
        counts_ok = m->class_counts[i] <= m->count - total;
        if (counts_ok) total += m->class_counts[i];
    }
    if (!counts_ok || total != m->count) {
        bad = "class_counts";
        goto fail;
    }
    bool any = m->count > 0;
    if (m->min_width > m->max_width || m->max_width > STK_MAX_SIDE || (any && !m->min_width)) {
        bad = "width_range";
        goto fail;
    }
    if (m->min_height > m->max_height || m->max_height > STK_MAX_SIDE || (any && !m->min_height)) {
        bad = "height_range";
        goto fail;
    }
    const char *mean = get(ctx, "mean"), *std = get(ctx, "std");
    if (mean || std) {
        if (!parse_doubles(mean, m->mean, m->channels) ||
            !parse_doubles(std, m->std, m->channels)) {
            bad = "mean/std";
            goto fail;
        }
        for (int c = 0; c < m->channels; c++)
            if (!(m->mean[c] >= 0 && m->mean[c] <= 1 && m->std[c] >= 0 && m->std[c] <= 0.5)) {
                bad = "mean/std";
                goto fail;
            }
        m->has_stats = true;
    }
    const char *source = get(ctx, "source"), *packed = get(ctx, "packed_with");
    m->source = strdup(source ? source : "");
    m->packed_with = strdup(packed ? packed : "");
    if (!m->source || !m->packed_with) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto out;
    }
    return STK_OK;
fail:
    st = stk_error(STK_ERR_CORRUPT, "meta: missing or malformed \"%s\"", bad);
out:
    stk_meta_deinit(m);
    return st;
}
