#include "storage/dataset.h"

#include "storage/lmdb_status.h"
#include "storage/record_index.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct stk_dataset {
    char *path;
    int fd; /* for pread; LMDB keeps its own */
    uint64_t file_size;
    MDB_env *env;
    MDB_txn *txn; /* one read transaction for the dataset's lifetime */
    MDB_dbi records;
    stk_meta meta;
    uint64_t *offsets; /* record index: file offset of each record's value */
    uint32_t *lengths;
    uint32_t max_length;
    const uint8_t *map; /* where LMDB mapped file offset map_offset */
    uint64_t map_offset;
};

/* Meta values are not NUL-terminated in LMDB: copies are kept until decode ends. */
typedef struct meta_get_ctx {
    MDB_txn *txn;
    MDB_dbi dbi;
    char *copies[32];
    int n;
} meta_get_ctx;

static const char *meta_get(void *p, const char *key)
{
    meta_get_ctx *c = p;
    MDB_val k = {strlen(key), (void *)key}, v;
    if (mdb_get(c->txn, c->dbi, &k, &v) != 0 || c->n == 32) return NULL;
    char *s = strndup(v.mv_data, v.mv_size);
    if (s) c->copies[c->n++] = s;
    return s;
}

static uint64_t key_index(const MDB_val *k)
{
    const uint8_t *b = k->mv_data;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | b[i];
    return v;
}

/* Walk the records once: check keys are 0..count-1 and note each value's
 * (offset, length). Values point into LMDB's map of the file. */
static stk_status build_index(stk_dataset *ds)
{
    uint64_t n = ds->meta.count;
    ds->offsets = malloc((n ? n : 1) * sizeof *ds->offsets);
    ds->lengths = malloc((n ? n : 1) * sizeof *ds->lengths);
    if (!ds->offsets || !ds->lengths)
        return stk_error(STK_ERR_NOMEM, "%s: out of memory", ds->path);
    MDB_cursor *cur;
    int rc = mdb_cursor_open(ds->txn, ds->records, &cur);
    if (rc) return stk_lmdb_status(rc, "%s", ds->path);
    stk_status st = STK_OK;
    uintptr_t map_start = 0;
    uint64_t map_offset = 0;
    MDB_val k, v;
    uint64_t i = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT), i++) {
        if (k.mv_size != 8 || i >= n || key_index(&k) != i) {
            st = stk_error(STK_ERR_CORRUPT,
                           "%s: record keys are not 0..%" PRIu64 " in order (at %" PRIu64 ")",
                           ds->path, n - 1, i);
            goto out;
        }
        if (v.mv_size > UINT32_MAX) {
            st = stk_error(STK_ERR_CORRUPT, "%s: record %" PRIu64 " is larger than 4 GiB", ds->path,
                           i);
            goto out;
        }
        if (i == 0 && (st = stk_find_mapping(v.mv_data, &map_start, &map_offset))) {
            stk_error_prefix(st, "%s", ds->path);
            goto out;
        }
        if (i == 0) ds->map = (const uint8_t *)map_start, ds->map_offset = map_offset;
        uintptr_t p = (uintptr_t)v.mv_data;
        ds->offsets[i] = (uint64_t)(p - map_start) + map_offset;
        ds->lengths[i] = (uint32_t)v.mv_size;
        if (ds->lengths[i] > ds->max_length) ds->max_length = ds->lengths[i];
        if (ds->offsets[i] + v.mv_size > ds->file_size) {
            st = stk_error(STK_ERR_CORRUPT, "%s: record %" PRIu64 " lies past the end of the file",
                           ds->path, i);
            goto out;
        }
    }
    if (rc != MDB_NOTFOUND) {
        st = stk_lmdb_status(rc, "%s: reading record %" PRIu64, ds->path, i);
        goto out;
    }
    if (i != n) {
        st =
            stk_error(STK_ERR_CORRUPT, "%s: meta says %" PRIu64 " records, the file holds %" PRIu64,
                      ds->path, n, i);
        goto out;
    }
    /* The index must agree with the file: compare record 0's first bytes. */
    if (n > 0) {
        uint8_t head[32];
        size_t len = ds->lengths[0] < sizeof head ? ds->lengths[0] : sizeof head;
        mdb_cursor_get(cur, &k, &v, MDB_FIRST);
        if (pread(ds->fd, head, len, (off_t)ds->offsets[0]) != (ssize_t)len ||
            memcmp(head, v.mv_data, len) != 0) {
            st = stk_error(STK_ERR_INTERNAL, "%s: record index does not match the file", ds->path);
            goto out;
        }
    }
out:
    mdb_cursor_close(cur);
    return st;
}

stk_status stk_dataset_open(const char *path, stk_dataset **out)
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
    if (ds->file_size < 8192) {
        st = stk_error(STK_ERR_FORMAT,
                       "%s: not a Stoke dataset (%" PRIu64 " bytes, too small for LMDB)", path,
                       ds->file_size);
        goto fail;
    }
    int rc = mdb_env_create(&ds->env);
    if (!rc) rc = mdb_env_set_maxdbs(ds->env, 2);
    if (!rc)
        rc = mdb_env_open(ds->env, path,
                          MDB_RDONLY | MDB_NOLOCK | MDB_NORDAHEAD | MDB_NOSUBDIR | MDB_NOTLS, 0);
    if (rc == MDB_INVALID) {
        st = stk_error(STK_ERR_FORMAT, "%s: not a Stoke dataset (not an LMDB file)", path);
        goto fail;
    }
    if (rc) {
        st = stk_lmdb_status(rc, "%s", path);
        goto fail;
    }
    /* LMDB maps the file unchecked: refuse a file shorter than its meta page says. */
    MDB_envinfo info;
    MDB_stat est;
    mdb_env_info(ds->env, &info);
    mdb_env_stat(ds->env, &est);
    uint64_t need = ((uint64_t)info.me_last_pgno + 1) * est.ms_psize;
    if (ds->file_size < need) {
        st = stk_error(STK_ERR_CORRUPT,
                       "%s: file is truncated: %" PRIu64 " bytes, but its LMDB meta page says it "
                       "holds %" PRIu64 " (re-pack or copy it again)",
                       path, ds->file_size, need);
        goto fail;
    }
    rc = mdb_txn_begin(ds->env, NULL, MDB_RDONLY, &ds->txn);
    if (rc) {
        st = stk_lmdb_status(rc, "%s", path);
        goto fail;
    }
    MDB_dbi meta_dbi;
    rc = mdb_dbi_open(ds->txn, "meta", 0, &meta_dbi);
    if (!rc) rc = mdb_dbi_open(ds->txn, "records", 0, &ds->records);
    if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE) {
        st = stk_error(STK_ERR_FORMAT,
                       "%s: not a Stoke dataset (an LMDB file without its "
                       "\"meta\" and \"records\" databases)",
                       path);
        goto fail;
    }
    if (rc) {
        st = stk_lmdb_status(rc, "%s", path);
        goto fail;
    }
    meta_get_ctx mc = {.txn = ds->txn, .dbi = meta_dbi};
    st = stk_meta_decode(&ds->meta, meta_get, &mc);
    for (int i = 0; i < mc.n; i++) free(mc.copies[i]);
    if (st) {
        stk_error_prefix(st, "%s", path);
        goto fail;
    }
    if ((st = build_index(ds))) goto fail;
    *out = ds;
    return STK_OK;
fail:
    stk_dataset_close(ds);
    return st;
}

void stk_dataset_close(stk_dataset *ds)
{
    if (!ds) return;
    if (ds->txn) mdb_txn_abort(ds->txn);
    if (ds->env) mdb_env_close(ds->env);
    if (ds->fd >= 0) close(ds->fd);
    stk_meta_deinit(&ds->meta);
    free(ds->offsets);
    free(ds->lengths);
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
    if (st) return st;
    uint8_t k[8];
    stk_record_key(index, k);
    MDB_val key = {8, k}, val;
    int rc = mdb_get(ds->txn, ds->records, &key, &val);
    if (rc) return stk_lmdb_status(rc, "%s: record %" PRIu64, ds->path, index);
    st = stk_record_decode(val.mv_data, val.mv_size, check_crc, out);
    if (st) {
        /* Name the source when the header is sane enough to find it. */
        if (out->name_len > 0 && out->name_len <= STK_RECORD_MAX_NAME &&
            STK_RECORD_HEADER_SIZE + (size_t)out->name_len <= val.mv_size)
            return stk_error_prefix(st, "record %" PRIu64 " (%.*s)", index, (int)out->name_len,
                                    out->name);
        return stk_error_prefix(st, "record %" PRIu64, index);
    }
    return STK_OK;
}

stk_status stk_dataset_span(const stk_dataset *ds, uint64_t index, uint64_t *offset,
                            uint32_t *length)
{
    stk_status st = check_index(ds, index);
    if (st) return st;
    *offset = ds->offsets[index];
    *length = ds->lengths[index];
    return STK_OK;
}

stk_status stk_dataset_pread(const stk_dataset *ds, uint64_t index, void *buf, size_t cap,
                             size_t *len)
{
    stk_status st = check_index(ds, index);
    if (st) return st;
    uint64_t off = ds->offsets[index];
    size_t want = ds->lengths[index];
    if (cap < want)
        return stk_error(STK_ERR_INVALID_ARG, "record %" PRIu64 " is %zu bytes, buffer holds %zu",
                         index, want, cap);
    size_t got = 0;
    while (got < want) {
        ssize_t n = pread(ds->fd, (uint8_t *)buf + got, want - got, (off_t)(off + got));
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
    if (st) return st;
    *data = ds->map + (off - ds->map_offset);
    return STK_OK;
}
