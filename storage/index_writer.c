/* Writing the persisted record index (index_writer.h) with liblmdb, in one
 * transaction. */
#include "storage/index_writer.h"

#include "common/crc32c.h"
#include "storage/dataset.h"
#include "storage/lmdb_status_impl.h"
#include "storage/record_index.h"

#include <lmdb.h>
#include <stdlib.h>
#include <string.h>

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The index value of ds's records (header's txnid filled in later). */
static stk_status build_value(stk_dataset *ds, uint8_t **out, size_t *len)
{
    uint64_t n = stk_dataset_count(ds);
    *len = STK_INDEX_HEADER + (size_t)n * STK_INDEX_ENTRY_SIZE;
    uint8_t *v = malloc(*len);
    if (!v) return stk_error(STK_ERR_NOMEM, "out of memory");
    uint8_t *e = v + STK_INDEX_HEADER;
    for (uint64_t i = 0; i < n; i++, e += STK_INDEX_ENTRY_SIZE) {
        uint64_t offset;
        uint32_t length;
        stk_record r;
        stk_status st = stk_dataset_span(ds, i, &offset, &length);
        if (st == STK_OK) st = stk_dataset_get(ds, i, &r, false); /* its header's crc, label */
        if (st != STK_OK) {
            free(v);
            return st;
        }
        put_u64(e, offset);
        put_u32(e + 8, length);
        put_u32(e + 12, r.crc);
        put_u32(e + 16, (uint32_t)r.label);
        if ((i + 1) % 65536 == 0) stk_dataset_trim_map(ds); /* flat memory over large files */
    }
    memcpy(v, STK_INDEX_MAGIC, 8);
    put_u64(v + 16, n);
    put_u32(v + 24, STK_INDEX_ENTRY_SIZE);
    put_u32(v + 28, stk_crc32c(0, v + STK_INDEX_HEADER, *len - STK_INDEX_HEADER));
    *out = v;
    return STK_OK;
}

stk_status stk_record_index_add(const char *path)
{
    stk_dataset *ds;
    STK_TRY(stk_dataset_open_walk(path, &ds));
    uint8_t *value = NULL;
    size_t len = 0;
    uint64_t file_size = stk_dataset_file_size(ds);
    stk_status st = build_value(ds, &value, &len);
    stk_dataset_close(ds);
    if (st != STK_OK) return st;
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_dbi dbi;
    /* room for the file, the new value, and the pages the commit rewrites */
    size_t map = (size_t)file_size + len + (16u << 20);
    int rc = mdb_env_create(&env);
    if (!rc) rc = mdb_env_set_maxdbs(env, 3);
    if (!rc) rc = mdb_env_set_mapsize(env, map);
    if (!rc) rc = mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOLOCK, 0644);
    if (!rc) rc = mdb_txn_begin(env, NULL, 0, &txn);
    if (!rc) {
        put_u64(value + 8, (uint64_t)mdb_txn_id(txn)); /* the transaction it is bound to */
        rc = mdb_dbi_open(txn, "index", MDB_CREATE, &dbi);
    }
    if (!rc) {
        MDB_val k = {2, (void *)"v1"}, v = {len, value};
        rc = mdb_put(txn, dbi, &k, &v, 0);
    }
    if (!rc) {
        rc = mdb_txn_commit(txn); /* synced: not MDB_NOSYNC */
        txn = NULL;
    }
    if (rc) st = stk_lmdb_status(rc, "%s: writing its record index", path);
    if (txn) mdb_txn_abort(txn);
    if (env) mdb_env_close(env);
    free(value);
    return st;
}
