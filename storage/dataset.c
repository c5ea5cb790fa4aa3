#include "storage/dataset.h"

#include "storage/dataset_impl.h"

#include "common/log.h"
#include "storage/lmdb_file.h"
#include "storage/record_index.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The meta database's (key, value) pairs, as found by the walk. */
typedef struct meta_pairs {
    const uint8_t *map;
    struct {
        const uint8_t *key, *value;
        uint32_t key_len;
        uint64_t value_len;
    } item[64];
    int n;
    char *copies[64]; /* NUL-terminated values handed to stk_meta_decode */
    int ncopies;
} meta_pairs;

static stk_status collect_meta(void *ctx, const uint8_t *key, uint32_t key_len,
                               uint64_t value_offset, uint64_t value_len)
{
    meta_pairs *m = ctx;
    if (m->n == 64) return stk_error(STK_ERR_CORRUPT, "damaged (meta: more than 64 keys)");
    m->item[m->n].key = key;
    m->item[m->n].key_len = key_len;
    m->item[m->n].value = m->map + value_offset;
    m->item[m->n].value_len = value_len;
    m->n++;
    return STK_OK;
}

static const char *meta_get(void *p, const char *key)
{
    meta_pairs *m = p;
    size_t len = strlen(key);
    for (int i = 0; i < m->n; i++) {
        if (m->item[i].key_len != len || memcmp(m->item[i].key, key, len) != 0) continue;
        if (m->ncopies == 64) return NULL;
        /* Values are not NUL-terminated in the file; one with a NUL inside
         * would be cut short, so it reads as malformed (NULL). */
        if (memchr(m->item[i].value, '\0', m->item[i].value_len)) return NULL;
        char *s = strndup((const char *)m->item[i].value, m->item[i].value_len);
        if (s) m->copies[m->ncopies++] = s;
        return s;
    }
    return NULL;
}

/* Format version 2: the meta's own checksum over every other pair. */
static stk_status check_meta_checksum(const meta_pairs *m)
{
    stk_meta_pair pairs[64] = {{0}};
    const char *stored = NULL;
    size_t stored_len = 0;
    for (int i = 0; i < m->n; i++) {
        pairs[i] = (stk_meta_pair){(const char *)m->item[i].key, m->item[i].key_len,
                                   (const char *)m->item[i].value, m->item[i].value_len};
        if (m->item[i].key_len == 8 && memcmp(m->item[i].key, "checksum", 8) == 0)
            stored = pairs[i].value, stored_len = pairs[i].value_len;
    }
    char want[16];
    snprintf(want, sizeof want, "%08x", stk_meta_checksum(pairs, (size_t)m->n));
    if (!stored)
        return stk_error(STK_ERR_CORRUPT, "damaged (meta: no \"checksum\" in a version 2 file)");
    if (stored_len != 8 || memcmp(stored, want, 8) != 0)
        return stk_error(STK_ERR_CORRUPT,
                         "damaged (meta: checksum %.*s stored, %s computed: a meta value changed)",
                         (int)(stored_len < 16 ? stored_len : 16), stored, want);
    return STK_OK;
}

/* The index a record key holds (8 bytes, big-endian), written out so that
 * the compiler makes it one load and a byte swap: it runs once per record. */
static inline uint64_t key_index(const uint8_t *b)
{
    return (uint64_t)b[0] << 56 | (uint64_t)b[1] << 48 | (uint64_t)b[2] << 40 |
           (uint64_t)b[3] << 32 | (uint64_t)b[4] << 24 | (uint64_t)b[5] << 16 |
           (uint64_t)b[6] << 8 | (uint64_t)b[7];
}

/* Records between two trims of the map in a pass over every record. */
#define TRIM_EVERY 65536

void stk_dataset_trim_map(const stk_dataset *ds)
{
    for (int k = 0; k < ds->nparts; k++) stk_dataset_trim_map(ds->parts[k]);
    if (ds->map) madvise((void *)ds->map, ds->file_size, MADV_DONTNEED);
}

typedef struct index_walk {
    stk_dataset *ds;
    uint64_t i;
} index_walk;

/* One record of the walk: keys must be 0..count-1 in order. */
static stk_status index_entry(void *ctx, const uint8_t *key, uint32_t key_len,
                              uint64_t value_offset, uint64_t value_len)
{
    index_walk *w = ctx;
    stk_dataset *ds = w->ds;
    uint64_t n = ds->meta.count, i = w->i;
    if (key_len != 8 || i >= n || key_index(key) != i)
        return stk_error(STK_ERR_CORRUPT,
                         "damaged (record keys are not 0..%" PRIu64 " in order, at record %" PRIu64
                         ")",
                         n - 1, i);
    if (value_len > UINT32_MAX)
        return stk_error(STK_ERR_CORRUPT, "damaged (record %" PRIu64 " is larger than 4 GiB)", i);
    ds->offsets[i] = value_offset;
    ds->lengths[i] = (uint32_t)value_len;
    if (ds->lengths[i] > ds->max_length) ds->max_length = ds->lengths[i];
    if (++w->i % TRIM_EVERY == 0) stk_dataset_trim_map(ds); /* flat memory over large files */
    return STK_OK;
}

/* Walk the records once: the index of (offset, length) per record. */
static stk_status build_index(stk_dataset *ds, stk_lmdb_file *f)
{
    uint64_t n = ds->meta.count;
    stk_lmdb_db recs;
    stk_status st = stk_lmdb_file_find_db(f, "records", &recs);
    if (st != STK_OK) return st;
    /* The count comes from the file: bound it before allocating for it. */
    if (recs.entries != n || n > ds->file_size / STK_RECORD_HEADER_SIZE)
        return stk_error(STK_ERR_CORRUPT,
                         "damaged (meta says %" PRIu64 " records, the records database %" PRIu64
                         ")",
                         n, recs.entries);
    ds->offsets = calloc(n ? n : 1, sizeof *ds->offsets);
    ds->lengths = calloc(n ? n : 1, sizeof *ds->lengths);
    if (!ds->offsets || !ds->lengths) return stk_error(STK_ERR_NOMEM, "out of memory");
    index_walk w = {ds, 0};
    st = stk_lmdb_file_walk(f, "records", index_entry, &w);
    if (st != STK_OK) return st;
    if (w.i != n)
        return stk_error(STK_ERR_CORRUPT,
                         "damaged (meta says %" PRIu64 " records, the file holds %" PRIu64 ")", n,
                         w.i);
    return STK_OK;
}

/* The "v1" value of the index database: its place in the file. */
typedef struct index_value {
    uint64_t offset, len;
    bool found;
} index_value;

static stk_status find_value(void *ctx, const uint8_t *key, uint32_t key_len, uint64_t value_offset,
                             uint64_t value_len)
{
    index_value *v = ctx;
    if (key_len == 2 && !memcmp(key, "v1", 2)) *v = (index_value){value_offset, value_len, true};
    return STK_OK;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The index is bound to the file by its transaction id, which a copy that
 * moves the records defeats (mdb_copy -c numbers transactions from 1 again:
 * one commit later the ids agree), as does an index forged with a valid
 * CRC. So up to 17 entries, spread over the file, are checked against the
 * record headers they point at (magic, lengths, CRC, label): 17 small reads. */
static stk_status spot_check(const stk_dataset *ds, const stk_index_entry *e, uint64_t n,
                             uint64_t *reads)
{
    uint64_t checks = n < 17 ? n : 17;
    for (uint64_t k = 0; k < checks; k++) {
        uint64_t i = checks < 2 ? 0 : k * (n - 1) / (checks - 1);
        uint8_t h[STK_RECORD_HEADER_SIZE];
        bool read = e[i].length >= sizeof h &&
                    pread(ds->fd, h, sizeof h, (off_t)e[i].offset) == (ssize_t)sizeof h;
        (*reads)++;
        if (!read || le32(h) != STK_RECORD_MAGIC ||
            (uint64_t)STK_RECORD_HEADER_SIZE + le32(h + 20) + le32(h + 24) != e[i].length ||
            le32(h + 28) != e[i].crc || (int32_t)le32(h + 16) != e[i].label)
            return stk_error(STK_ERR_CORRUPT,
                             "entry %" PRIu64 " does not match the record at offset %" PRIu64
                             ": not this file's index (a copy that moved the records, such as "
                             "mdb_copy -c, or a forged index)",
                             i, e[i].offset);
    }
    return STK_OK;
}

/* The entries of the file's persisted index (record_index.h), checked
 * against the file: a few large reads, no walk of the records. STK_END: the
 * file has none. */
static stk_status read_index(const stk_dataset *ds, stk_lmdb_file *f, stk_index_entry **out,
                             uint64_t *reads)
{
    stk_lmdb_db db;
    if (stk_lmdb_file_find_db(f, "index", &db) != STK_OK) return STK_END;
    index_value v = {0};
    STK_TRY(stk_lmdb_file_walk(f, "index", find_value, &v));
    if (!v.found) return stk_error(STK_ERR_CORRUPT, "no \"v1\" entry");
    if (v.len > ds->file_size) return stk_error(STK_ERR_CORRUPT, "larger than the file");
    uint8_t *buf = malloc(v.len ? v.len : 1);
    if (!buf) return stk_error(STK_ERR_NOMEM, "out of memory");
    for (uint64_t at = 0; at < v.len;) { /* pread: the map's pages stay untouched */
        ssize_t got = pread(ds->fd, buf + at, v.len - at > (64u << 20) ? 64u << 20 : v.len - at,
                            (off_t)(v.offset + at));
        (*reads)++;
        if (got <= 0) {
            free(buf);
            return stk_error(STK_ERR_IO, "reading it: %s", got < 0 ? strerror(errno) : "short");
        }
        at += (uint64_t)got;
    }
    stk_status st =
        stk_record_index_parse(buf, v.len, f->txnid, ds->meta.count, ds->file_size, out);
    free(buf);
    if (st == STK_OK && (st = spot_check(ds, *out, ds->meta.count, reads)) != STK_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

/* The persisted index into ds's record index (and each record's CRC and
 * label, which reads check records against: stk_dataset_check_entry). */
static stk_status load_index(stk_dataset *ds, stk_lmdb_file *f)
{
    stk_index_entry *e;
    STK_TRY(read_index(ds, f, &e, &ds->open_reads));
    uint64_t n = ds->meta.count;
    ds->offsets = calloc(n ? n : 1, sizeof *ds->offsets);
    ds->lengths = calloc(n ? n : 1, sizeof *ds->lengths);
    ds->crcs = calloc(n ? n : 1, sizeof *ds->crcs);
    ds->labels = calloc(n ? n : 1, sizeof *ds->labels);
    if (!ds->offsets || !ds->lengths || !ds->crcs || !ds->labels) {
        free(e);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    for (uint64_t i = 0; i < n; i++) {
        ds->offsets[i] = e[i].offset;
        ds->lengths[i] = e[i].length;
        ds->crcs[i] = e[i].crc;
        ds->labels[i] = e[i].label;
        if (e[i].length > ds->max_length) ds->max_length = e[i].length;
    }
    free(e);
    ds->indexed = true;
    return STK_OK;
}

stk_status stk_dataset_read_index(const stk_dataset *ds, stk_index_entry **entries)
{
    *entries = NULL;
    if (ds->nparts)
        return stk_error(STK_ERR_UNSUPPORTED, "%s: shards: each file has its own index", ds->path);
    stk_lmdb_file f;
    STK_TRY(stk_lmdb_file_init(&f, ds->map, ds->file_size));
    uint64_t reads = 0;
    stk_status st = read_index(ds, &f, entries, &reads);
    stk_lmdb_file_deinit(&f);
    if (st != STK_OK && st != STK_END) return stk_error_prefix(st, "%s: record index", ds->path);
    return st;
}

/* Read the meta and the record index from the validated LMDB file: the
 * file's persisted index unless `walk`, else (or when it cannot be used)
 * a walk of the records. */
static stk_status read_dataset(stk_dataset *ds, bool walk)
{
    stk_lmdb_file f;
    stk_status st = stk_lmdb_file_init(&f, ds->map, ds->file_size);
    if (st == STK_ERR_FORMAT) return stk_error_prefix(st, "not a Stoke dataset");
    if (st != STK_OK) return st;
    meta_pairs *m = calloc(1, sizeof *m);
    if (!m) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto out;
    }
    m->map = ds->map;
    st = stk_lmdb_file_walk(&f, "meta", collect_meta, m);
    stk_lmdb_db recs;
    if (st == STK_END || (st == STK_OK && stk_lmdb_file_find_db(&f, "records", &recs) == STK_END)) {
        st = stk_error(STK_ERR_FORMAT, "not a Stoke dataset (an LMDB file without its "
                                       "\"meta\" and \"records\" databases)");
        goto out;
    }
    if (st != STK_OK) goto out;
    st = stk_meta_decode(&ds->meta, meta_get, m);
    for (int i = 0; i < m->ncopies; i++) free(m->copies[i]);
    if (st != STK_OK) goto out;
    if (ds->meta.version >= 2 && (st = check_meta_checksum(m))) goto out;
    st = walk ? STK_END : load_index(ds, &f);
    if (st != STK_OK && st != STK_END) {
        stk_log_warn("%s: its record index cannot be used (%s); reading the records instead "
                     "(`stoke index %s` writes it anew)",
                     ds->path, stk_last_error(), ds->path);
        free(ds->offsets), free(ds->lengths), free(ds->crcs), free(ds->labels);
        ds->offsets = NULL, ds->lengths = NULL, ds->max_length = 0;
        ds->crcs = NULL, ds->labels = NULL;
    } else if (st == STK_END && !walk) {
        stk_log_info("%s: no record index: opening reads every record page (`stoke index %s` "
                     "adds one)",
                     ds->path, ds->path);
    }
    if (st != STK_OK) st = build_index(ds, &f);
    /* the branch and leaf pages walked (overflow runs are placed, not read) */
    ds->open_pages = f.main.branch_pages + f.main.leaf_pages;
    const char *walked[3] = {"meta", ds->indexed ? "index" : NULL, ds->indexed ? NULL : "records"};
    for (int k = 0; k < 3; k++) {
        stk_lmdb_db db;
        if (walked[k] && stk_lmdb_file_find_db(&f, walked[k], &db) == STK_OK)
            ds->open_pages += db.branch_pages + db.leaf_pages;
    }
out:
    free(m);
    stk_lmdb_file_deinit(&f);
    return st;
}

stk_status stk_dataset_open_file(const char *path, bool walk, stk_dataset **out)
{
    *out = NULL;
    stk_dataset *ds = calloc(1, sizeof *ds);
    if (!ds || !(ds->path = strdup(path))) {
        free(ds);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    stk_status st;
    ds->fd = -1;
    ds->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (ds->fd < 0) {
        st = stk_error(STK_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    struct stat sb;
    if (fstat(ds->fd, &sb) != 0) {
        st = stk_error(STK_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = stk_error(STK_ERR_FORMAT, "%s: not a regular file", path);
        goto fail;
    }
    ds->file_size = (uint64_t)sb.st_size;
    if (ds->file_size < 512 || ds->file_size > SIZE_MAX) {
        st = stk_error(STK_ERR_FORMAT,
                       "%s: not a Stoke dataset (%" PRIu64 " bytes, too small for LMDB)", path,
                       ds->file_size);
        goto fail;
    }
    void *map = mmap(NULL, ds->file_size, PROT_READ, MAP_SHARED, ds->fd, 0);
    if (map == MAP_FAILED) {
        st = stk_error(STK_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        goto fail;
    }
    ds->map = map;
    madvise(map, ds->file_size, MADV_RANDOM); /* the walk touches leaf pages only */
    if ((st = read_dataset(ds, walk))) {
        stk_error_prefix(st, "%s", path);
        goto fail;
    }
    *out = ds;
    return STK_OK;
fail:
    stk_dataset_close(ds);
    return st;
}

bool stk_dataset_indexed(const stk_dataset *ds)
{
    bool all = ds->nparts > 0;
    for (int k = 0; k < ds->nparts; k++) all = all && ds->parts[k]->indexed;
    return ds->nparts ? all : ds->indexed;
}

void stk_dataset_open_cost(const stk_dataset *ds, uint64_t *pages_walked, uint64_t *reads)
{
    *pages_walked = ds->open_pages;
    *reads = ds->open_reads;
    for (int k = 0; k < ds->nparts; k++) {
        *pages_walked += ds->parts[k]->open_pages;
        *reads += ds->parts[k]->open_reads;
    }
}

int stk_dataset_file_count(const stk_dataset *ds) { return ds->nparts ? ds->nparts : 1; }

const char *stk_dataset_file_path(const stk_dataset *ds, int k)
{
    return ds->nparts ? ds->parts[k]->path : ds->path;
}

uint64_t stk_dataset_file_base(const stk_dataset *ds, int k)
{
    return ds->nparts ? ds->part_base[k] : 0;
}

int stk_dataset_part_at(const stk_dataset *ds, uint64_t offset)
{
    int lo = 0, hi = ds->nparts; /* the last part starting at or before offset */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (ds->part_base[mid] <= offset)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

int stk_dataset_file_of(const stk_dataset *ds, uint64_t offset)
{
    return stk_dataset_part_at(ds, offset);
}

/* The map holding byte `offset` of ds's byte space, and that offset in it. */
static const uint8_t *map_at(const stk_dataset *ds, uint64_t offset)
{
    if (!ds->nparts) return ds->map + offset;
    int k = stk_dataset_part_at(ds, offset);
    return ds->parts[k]->map + (offset - ds->part_base[k]);
}

void stk_dataset_close(stk_dataset *ds)
{
    if (!ds) return;
    for (int k = 0; k < ds->nparts; k++) stk_dataset_close(ds->parts[k]);
    free(ds->parts);
    free(ds->part_base);
    if (ds->map) munmap((void *)ds->map, ds->file_size);
    if (ds->fd >= 0) close(ds->fd);
    stk_meta_deinit(&ds->meta);
    free(ds->offsets);
    free(ds->lengths);
    free(ds->crcs);
    free(ds->labels);
    free(ds->path);
    free(ds);
}

const stk_meta *stk_dataset_meta(const stk_dataset *ds) { return &ds->meta; }
uint64_t stk_dataset_count(const stk_dataset *ds) { return ds->meta.count; }
const char *stk_dataset_path(const stk_dataset *ds) { return ds->path; }
uint64_t stk_dataset_file_size(const stk_dataset *ds) { return ds->file_size; }
uint32_t stk_dataset_max_record_bytes(const stk_dataset *ds) { return ds->max_length; }

static stk_status check_index(const stk_dataset *ds, uint64_t index)
{
    if (index >= ds->meta.count)
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s: record %" PRIu64 " out of range (%" PRIu64 " records)", ds->path,
                         index, ds->meta.count);
    return STK_OK;
}

stk_status stk_dataset_get(stk_dataset *ds, uint64_t index, stk_record *out, bool check_crc)
{
    stk_status st = check_index(ds, index);
    if (st != STK_OK) return st;
    const uint8_t *val = map_at(ds, ds->offsets[index]);
    size_t len = ds->lengths[index];
    st = stk_dataset_decode(ds, val, len, check_crc, out);
    if (st == STK_OK) st = stk_dataset_check_entry(ds, index, out);
    if (st != STK_OK) {
        /* Name the source when the header is sane enough to find it: from
         * the bytes (a record whose lengths disagree is decoded with no name). */
        if (out->name_len > 0 && out->name_len <= STK_RECORD_MAX_NAME &&
            STK_RECORD_HEADER_SIZE + (size_t)out->name_len <= len)
            return stk_error_prefix(st, "%s: record %" PRIu64 " (%.*s)", ds->path, index,
                                    (int)out->name_len,
                                    (const char *)val + STK_RECORD_HEADER_SIZE);
        return stk_error_prefix(st, "%s: record %" PRIu64, ds->path, index);
    }
    return STK_OK;
}

stk_status stk_dataset_decode(const stk_dataset *ds, const void *bytes, size_t len, bool check_crc,
                              stk_record *out)
{
    stk_status st = stk_record_decode(bytes, len, check_crc, out);
    if (st != STK_OK) return st;
    const stk_meta *m = &ds->meta;
    /* A version 1 record inside a version 2 file would dodge the header CRC. */
    if (out->version != m->version)
        return stk_error(STK_ERR_CORRUPT, "record version %u in a version %u file", out->version,
                         m->version);
    if ((uint32_t)out->label >= m->num_classes)
        return stk_error(STK_ERR_CORRUPT, "label %d, the dataset has %u classes", out->label,
                         m->num_classes);
    if (out->encoding != m->encoding || out->width < m->min_width || out->width > m->max_width ||
        out->height < m->min_height || out->height > m->max_height)
        return stk_error(STK_ERR_CORRUPT,
                         "%s %ux%u record, the dataset's meta says %s %u..%u x %u..%u",
                         stk_encoding_name(out->encoding), out->width, out->height,
                         stk_encoding_name(m->encoding), m->min_width, m->max_width, m->min_height,
                         m->max_height);
    return STK_OK;
}

stk_status stk_dataset_check_entry(const stk_dataset *ds, uint64_t index, const stk_record *r)
{
    if (!ds->crcs || index >= ds->meta.count) return STK_OK; /* no index: nothing to compare */
    if (r->crc != ds->crcs[index] || r->label != ds->labels[index])
        return stk_error(STK_ERR_CORRUPT,
                         "CRC %08X and label %d, but the record index says %08X and %d: the "
                         "index is not this file's (`stoke index %s` writes it anew)",
                         r->crc, r->label, ds->crcs[index], ds->labels[index], ds->path);
    return STK_OK;
}

stk_status stk_dataset_span(const stk_dataset *ds, uint64_t index, uint64_t *offset,
                            uint32_t *length)
{
    stk_status st = check_index(ds, index);
    if (st != STK_OK) return st;
    *offset = ds->offsets[index];
    *length = ds->lengths[index];
    return STK_OK;
}

stk_status stk_dataset_pread(const stk_dataset *ds, uint64_t index, void *buf, size_t cap,
                             size_t *len)
{
    stk_status st = check_index(ds, index);
    if (st != STK_OK) return st;
    uint64_t off = ds->offsets[index];
    size_t want = ds->lengths[index];
    int fd = ds->fd;
    if (ds->nparts) {
        int k = stk_dataset_part_at(ds, off);
        fd = ds->parts[k]->fd;
        off -= ds->part_base[k];
    }
    if (cap < want)
        return stk_error(STK_ERR_INVALID_ARG, "record %" PRIu64 " is %zu bytes, buffer holds %zu",
                         index, want, cap);
    size_t got = 0;
    while (got < want) {
        ssize_t n = pread(fd, (uint8_t *)buf + got, want - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            return stk_error(STK_ERR_IO, "%s: read error at offset %" PRIu64 ": %s", ds->path,
                             off + got, strerror(errno));
        if (n == 0)
            return stk_error(STK_ERR_CORRUPT,
                             "%s: record %" PRIu64
                             ": short read (%zu of %zu bytes at offset %" PRIu64
                             "): the file was truncated",
                             ds->path, index, got, want, off);
        got += (size_t)n;
    }
    *len = want;
    return STK_OK;
}

stk_status stk_dataset_map_view(const stk_dataset *ds, uint64_t index, const uint8_t **data,
                                uint32_t *length)
{
    uint64_t off;
    stk_status st = stk_dataset_span(ds, index, &off, length);
    if (st != STK_OK) return st;
    *data = map_at(ds, off);
    return STK_OK;
}
