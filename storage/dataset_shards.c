/* Opening a dataset: one .stoke file (dataset.c), or several read as one
 * (shards): "a.stoke,b.stoke" or a list file naming them. Records are numbered across the files in
 * the order given, so the sampler's order, data-parallel sharding and resume treat them as one
 * file; each file keeps its own map, descriptor and index. */
#include "storage/dataset_impl.h"

#include "common/fs.h"
#include "common/text.h"

#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_SHARDS  4096
#define LIST_MAX    (1u << 20) /* a list file is text of at most this many bytes */
#define SHARD_ALIGN 4096       /* file bases: O_DIRECT offsets stay aligned */

typedef struct shard_list {
    char **paths;
    int n;
} shard_list;

static void list_free(shard_list *l)
{
    for (int i = 0; i < l->n; i++) free(l->paths[i]);
    free(l->paths);
}

static stk_status list_add(shard_list *l, const char *dir, const char *name, size_t len)
{
    if (l->n == MAX_SHARDS) return stk_error(STK_ERR_LIMIT, "more than %d shards", MAX_SHARDS);
    char **grown = realloc(l->paths, (size_t)(l->n + 1) * sizeof *grown);
    if (!grown) return stk_error(STK_ERR_NOMEM, "out of memory");
    l->paths = grown;
    bool relative = dir && len && name[0] != '/';
    l->paths[l->n] = relative ? stk_text_printf("%s/%.*s", dir, (int)len, name)
                              : stk_text_printf("%.*s", (int)len, name);
    if (!l->paths[l->n]) return stk_error(STK_ERR_NOMEM, "out of memory");
    l->n++;
    return STK_OK;
}

/* A list file: a small text file (no NUL byte) whose lines name files, not
 * named *.stoke (a damaged dataset is reported as one). false: not one (open
 * spec as a dataset file). */
static bool is_list_file(const char *spec, uint8_t **text, size_t *len)
{
    size_t n = strlen(spec);
    if (n >= 6 && !strcmp(spec + n - 6, ".stoke")) return false;
    struct stat sb;
    if (stat(spec, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0 ||
        (uint64_t)sb.st_size > LIST_MAX)
        return false;
    if (stk_file_read_all(spec, LIST_MAX, text, len) != STK_OK) return false;
    if (memchr(*text, 0, *len)) {
        free(*text);
        return false;
    }
    return true;
}

/* The shard paths of spec; STK_END: spec names one file. */
static stk_status parse_spec(const char *spec, shard_list *l)
{
    memset(l, 0, sizeof *l);
    if (strchr(spec, ',')) {
        for (const char *p = spec;;) {
            const char *end = strchr(p, ',');
            size_t n = end ? (size_t)(end - p) : strlen(p);
            if (n == 0)
                return stk_error(STK_ERR_INVALID_ARG, "%s: an empty name in the list", spec);
            STK_TRY(list_add(l, NULL, p, n));
            if (!end) return STK_OK;
            p = end + 1;
        }
    }
    uint8_t *text;
    size_t len;
    if (!is_list_file(spec, &text, &len)) return STK_END;
    char *copy = strdup(spec);
    const char *dir = copy ? dirname(copy) : ".";
    stk_status st = STK_OK;
    for (size_t at = 0, line = 1; at < len && st == STK_OK; line++) {
        const char *s = (const char *)text + at;
        const char *nl = memchr(s, '\n', len - at);
        size_t n = nl ? (size_t)(nl - s) : len - at;
        at += n + 1;
        while (n && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
        while (n && (*s == ' ' || *s == '\t')) s++, n--;
        if (n == 0 || *s == '#') continue;
        st = list_add(l, dir, s, n);
    }
    free(copy);
    free(text);
    if (st == STK_OK && l->n == 0) st = stk_error(STK_ERR_INVALID_ARG, "%s: lists no files", spec);
    return st;
}

/* Shards must agree on what a record is: version, encoding, channels and
 * classes (names and order). */
static stk_status check_same(const stk_dataset *a, const stk_dataset *b)
{
    const stk_meta *x = stk_dataset_meta(a), *y = stk_dataset_meta(b);
    const char *what = x->version != y->version           ? "format version"
                       : x->encoding != y->encoding       ? "encoding"
                       : x->channels != y->channels       ? "channels"
                       : x->num_classes != y->num_classes ? "number of classes"
                                                          : NULL;
    for (uint32_t c = 0; !what && c < x->num_classes; c++)
        if (strcmp(x->class_names[c], y->class_names[c])) what = "class names";
    if (what)
        return stk_error(STK_ERR_FORMAT, "%s and %s differ in %s: not shards of one dataset",
                         stk_dataset_path(a), stk_dataset_path(b), what);
    return STK_OK;
}

/* The shards' metas as one: counts added, sizes widened, statistics
 * combined weighted by record count (exact when every image has one size). */
static stk_status merge_meta(stk_dataset *ds)
{
    const stk_meta *first = &ds->parts[0]->meta;
    stk_meta *m = &ds->meta;
    STK_TRY(stk_meta_set_classes(m, first->class_names, first->num_classes));
    m->version = first->version;
    m->encoding = first->encoding;
    m->channels = first->channels;
    m->has_stats = true;
    double sum[3] = {0}, sq[3] = {0};
    for (int k = 0; k < ds->nparts; k++) {
        const stk_meta *p = &ds->parts[k]->meta;
        m->count += p->count;
        for (uint32_t c = 0; c < p->num_classes; c++) m->class_counts[c] += p->class_counts[c];
        if (k == 0 || p->min_width < m->min_width) m->min_width = p->min_width;
        if (k == 0 || p->max_width > m->max_width) m->max_width = p->max_width;
        if (k == 0 || p->min_height < m->min_height) m->min_height = p->min_height;
        if (k == 0 || p->max_height > m->max_height) m->max_height = p->max_height;
        m->has_stats = m->has_stats && p->has_stats;
        for (int c = 0; c < 3; c++) {
            sum[c] += (double)p->count * p->mean[c];
            sq[c] += (double)p->count * (p->std[c] * p->std[c] + p->mean[c] * p->mean[c]);
        }
    }
    for (int c = 0; m->has_stats && m->count && c < 3; c++) {
        m->mean[c] = sum[c] / (double)m->count;
        double var = sq[c] / (double)m->count - m->mean[c] * m->mean[c];
        m->std[c] = var > 0 ? sqrt(var) : 0;
    }
    m->source = stk_text_printf("shards:%s", ds->path);
    m->packed_with = strdup(first->packed_with ? first->packed_with : "");
    if (!m->source || !m->packed_with) return stk_error(STK_ERR_NOMEM, "out of memory");
    return STK_OK;
}

/* One record index over every shard, in the shards' byte space. */
static stk_status join_indexes(stk_dataset *ds)
{
    uint64_t n = ds->meta.count, base = 0, at = 0;
    ds->offsets = malloc((n ? n : 1) * sizeof *ds->offsets);
    ds->lengths = malloc((n ? n : 1) * sizeof *ds->lengths);
    if (!ds->offsets || !ds->lengths) return stk_error(STK_ERR_NOMEM, "out of memory");
    bool entries = true; /* every shard's index gave CRCs and labels */
    for (int k = 0; k < ds->nparts; k++) entries = entries && ds->parts[k]->crcs;
    if (entries && (!(ds->crcs = malloc((n ? n : 1) * sizeof *ds->crcs)) ||
                    !(ds->labels = malloc((n ? n : 1) * sizeof *ds->labels))))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int k = 0; k < ds->nparts; k++) {
        stk_dataset *p = ds->parts[k];
        ds->part_base[k] = base;
        for (uint64_t i = 0; i < p->meta.count; i++, at++) {
            ds->offsets[at] = base + p->offsets[i];
            ds->lengths[at] = p->lengths[i];
            if (entries) ds->crcs[at] = p->crcs[i], ds->labels[at] = p->labels[i];
        }
        if (p->max_length > ds->max_length) ds->max_length = p->max_length;
        free(p->offsets), free(p->lengths); /* the joined index serves every read */
        free(p->crcs), free(p->labels);
        p->offsets = NULL, p->lengths = NULL, p->crcs = NULL, p->labels = NULL;
        base += (p->file_size + SHARD_ALIGN - 1) / SHARD_ALIGN * SHARD_ALIGN;
    }
    ds->file_size = base;
    return STK_OK;
}

/* Open `spec` as shards: "a.stoke,b.stoke" or a list file (one path per
 * line, relative to it; '#' comments). STK_END (not an error): spec is
 * neither, open it as one file. */
static stk_status open_shards(const char *spec, bool walk, stk_dataset **out)
{
    *out = NULL;
    shard_list l;
    stk_status st = parse_spec(spec, &l);
    if (st != STK_OK) {
        list_free(&l);
        return st == STK_END ? STK_END : stk_error_prefix(st, "%s", spec);
    }
    stk_dataset *ds = calloc(1, sizeof *ds);
    if (!ds || !(ds->path = strdup(spec)) ||
        !(ds->parts = calloc((size_t)l.n, sizeof *ds->parts)) ||
        !(ds->part_base = calloc((size_t)l.n, sizeof *ds->part_base))) {
        if (ds) free(ds->path), free(ds->parts), free(ds);
        list_free(&l);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    ds->fd = -1;
    for (int k = 0; k < l.n && st == STK_OK; k++) {
        st = stk_dataset_open_file(l.paths[k], walk, &ds->parts[k]);
        if (st == STK_OK) ds->nparts++;
        if (st == STK_OK && k > 0) st = check_same(ds->parts[0], ds->parts[k]);
    }
    list_free(&l);
    if (st == STK_OK) st = merge_meta(ds);
    if (st == STK_OK) st = join_indexes(ds);
    if (st != STK_OK) {
        stk_dataset_close(ds);
        return st;
    }
    *out = ds;
    return STK_OK;
}

static stk_status open_dataset(const char *path, bool walk, stk_dataset **out)
{
    stk_status st = open_shards(path, walk, out);
    return st == STK_END ? stk_dataset_open_file(path, walk, out) : st;
}

stk_status stk_dataset_open(const char *path, stk_dataset **out)
{
    return open_dataset(path, false, out);
}

stk_status stk_dataset_open_walk(const char *path, stk_dataset **out)
{
    return open_dataset(path, true, out);
}
