/* storage/: record codec, meta, writer, reader + record index (the sources and the packer:
 * test_pack.c). */
#include "common/crc32c.h"
#include "common/fs.h"
#include "common/rng.h"
#include "storage/dataset.h"
#include "storage/index_writer.h"
#include "storage/record_index.h"
#include "storage/writer.h"
#include "tests/test_tmpdir.h"

#include "tests/check_main.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static void setup(void) { test_tmpdir_create("storage"); }

static void teardown(void) { test_tmpdir_remove(); }

/* ---- record ---- */

START_TEST(record_roundtrip_and_damage)
{
    uint8_t payload[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    stk_record r = {.encoding = STK_ENCODING_RAW_U8,
                    .channels = 3,
                    .width = 2,
                    .height = 2,
                    .label = 5,
                    .name = "a/b.jpg",
                    .name_len = 7,
                    .payload = payload,
                    .payload_len = 12};
    size_t n = stk_record_size(&r);
    ck_assert_uint_eq(n, 32 + 7 + 12);
    uint8_t buf[64];
    stk_record_encode(&r, buf);
    ck_assert(memcmp(buf, "STKR", 4) == 0);
    stk_record d;
    ck_assert_int_eq(stk_record_decode(buf, n, true, &d), STK_OK);
    ck_assert_uint_eq(d.label, 5);
    ck_assert_uint_eq(d.width, 2);
    ck_assert(memcmp(d.name, "a/b.jpg", 7) == 0);
    ck_assert(memcmp(d.payload, payload, 12) == 0);
    ck_assert_uint_eq(d.crc, r.crc);

    buf[n - 1] ^= 1; /* payload bit flip */
    ck_assert_int_eq(stk_record_decode(buf, n, true, &d), STK_ERR_CORRUPT);
    ck_assert(strstr(stk_last_error(), "CRC mismatch"));
    ck_assert_int_eq(stk_record_decode(buf, n, false, &d), STK_OK);
    buf[n - 1] ^= 1;
    ck_assert_int_eq(stk_record_decode(buf, n - 1, true, &d), STK_ERR_CORRUPT);
    ck_assert(strstr(stk_last_error(), "header says"));
    ck_assert_int_eq(stk_record_decode(buf, 10, true, &d), STK_ERR_CORRUPT);
    buf[4] = 9; /* version */
    ck_assert_int_eq(stk_record_decode(buf, n, true, &d), STK_ERR_FORMAT);
    buf[4] = 1;
    buf[0] = 'X';
    ck_assert_int_eq(stk_record_decode(buf, n, true, &d), STK_ERR_CORRUPT);
    ck_assert(strstr(stk_last_error(), "magic"));
}
END_TEST

/* ---- meta ---- */

typedef struct kv {
    char key[32][32];
    char *val[32];
    int n;
} kv;

static stk_status kv_put(void *p, const char *k, const char *v)
{
    kv *t = p;
    snprintf(t->key[t->n], 32, "%s", k);
    t->val[t->n++] = strdup(v);
    return STK_OK;
}

static const char *kv_get(void *p, const char *k)
{
    kv *t = p;
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->key[i], k) == 0) return t->val[i];
    return NULL;
}

static void kv_set(kv *t, const char *k, const char *v)
{
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->key[i], k) == 0) {
            free(t->val[i]);
            t->val[i] = strdup(v);
        }
}

START_TEST(meta_roundtrip_and_version)
{
    stk_meta m = {.count = 3,
                  .encoding = STK_ENCODING_JPEG,
                  .channels = 3,
                  .min_width = 10,
                  .max_width = 20,
                  .min_height = 30,
                  .max_height = 40,
                  .has_stats = true,
                  .mean = {0.5, 0.25, 0.125},
                  .std = {0.1, 0.2, 0.3}};
    char *names[] = {"cat", "dog with space", "\xC3\xA9l\xC3\xA9phant"};
    ck_assert_int_eq(stk_meta_set_classes(&m, names, 3), STK_OK);
    m.class_counts[0] = 2, m.class_counts[2] = 1;
    m.source = strdup("imagefolder:x");
    m.packed_with = strdup("stoke test");
    kv t = {0};
    ck_assert_int_eq(stk_meta_encode(&m, kv_put, &t), STK_OK);
    stk_meta back;
    ck_assert_int_eq(stk_meta_decode(&back, kv_get, &t), STK_OK);
    ck_assert_uint_eq(back.count, 3);
    ck_assert_uint_eq(back.num_classes, 3);
    ck_assert_str_eq(back.class_names[1], "dog with space");
    ck_assert_str_eq(back.class_names[2], names[2]);
    ck_assert_uint_eq(back.class_counts[0], 2);
    ck_assert_uint_eq(back.class_counts[2], 1);
    ck_assert_uint_eq(back.max_height, 40);
    ck_assert(back.has_stats);
    ck_assert_double_eq_tol(back.std[2], 0.3, 1e-6);
    ck_assert_str_eq(back.source, "imagefolder:x");
    stk_meta_deinit(&back);

    kv_set(&t, "version", "3");
    ck_assert_int_eq(stk_meta_decode(&back, kv_get, &t), STK_ERR_FORMAT);
    ck_assert(strstr(stk_last_error(), "version 3 is not supported"));
    kv_set(&t, "version", "1");
    ck_assert_int_eq(stk_meta_decode(&back, kv_get, &t), STK_OK); /* version 1 still reads */
    stk_meta_deinit(&back);
    /* Values the writer cannot produce. */
    const char *bad[][3] = {{"mean", "nan 0.1 0.1", "mean/std"},
                            {"mean", "0.5 0.25 1e300", "mean/std"},
                            {"std", "0.1 0.2 -0.3", "mean/std"},
                            {"std", "0.1 0.2 0.9", "mean/std"},
                            {"class_counts", "2 0 2", "class_counts"},
                            {"class_counts", "18446744073709551615 0 4", "class_counts"},
                            {"width_range", "1 70000", "width_range"},
                            {"width_range", "0 5", "width_range"},
                            {"height_range", "9 5", "height_range"},
                            {"num_classes", "1000001", "num_classes"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *keep = strdup(kv_get(&t, bad[i][0]));
        kv_set(&t, bad[i][0], bad[i][1]);
        ck_assert_int_eq(stk_meta_decode(&back, kv_get, &t), STK_ERR_CORRUPT);
        ck_assert_msg(strstr(stk_last_error(), bad[i][2]), "%s", stk_last_error());
        kv_set(&t, bad[i][0], keep);
        free(keep);
    }
    ck_assert_int_eq(stk_meta_decode(&back, kv_get, &t), STK_OK);
    stk_meta_deinit(&back);
    kv_set(&t, "count", "many");
    ck_assert_int_eq(stk_meta_decode(&back, kv_get, &t), STK_ERR_CORRUPT);
    ck_assert(strstr(stk_last_error(), "\"count\""));
    kv_set(&t, "count", "3");
    kv_set(&t, "format", "other");
    ck_assert_int_eq(stk_meta_decode(&back, kv_get, &t), STK_ERR_FORMAT);
    for (int i = 0; i < t.n; i++) free(t.val[i]);
    stk_meta_deinit(&m);
}
END_TEST

/* ---- writer + reader ---- */

/* Record i of the synthetic set: size from 100 B to ~800 KB, bytes from the RNG. */
static size_t synth(uint64_t i, uint8_t *buf)
{
    stk_rng r;
    stk_rng_init(&r, 99, 0, i << 32);
    size_t len = i % 5 == 0 ? 100 + stk_rng_below(&r, 800000) : 100 + stk_rng_below(&r, 60000);
    for (size_t k = 0; k < len; k++) buf[k] = (uint8_t)stk_rng_u32(&r);
    return len;
}

static void write_synth(const char *path, uint64_t n, stk_meta *meta)
{
    uint8_t *buf = malloc(1 << 20);
    stk_writer *w;
    ck_assert_int_eq(stk_writer_open(path, &w), STK_OK);
    char *names[] = {"even", "odd"};
    ck_assert_int_eq(stk_meta_set_classes(meta, names, 2), STK_OK);
    for (uint64_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "synth/%05llu.jpg", (unsigned long long)i);
        stk_record r = {.encoding = STK_ENCODING_JPEG,
                        .channels = 3,
                        .width = 7,
                        .height = 9,
                        .label = (int32_t)(i % 2),
                        .name = name,
                        .name_len = (uint32_t)strlen(name),
                        .payload = buf,
                        .payload_len = (uint32_t)synth(i, buf)};
        ck_assert_int_eq(stk_writer_put(w, &r), STK_OK);
        meta->class_counts[i % 2]++;
    }
    if (n >= 700) /* ~73 MB: more than the first 64 MiB map, so it must have grown */
        ck_assert_uint_gt(stk_writer_map_bytes(w), (uint64_t)64 << 20);
    meta->encoding = STK_ENCODING_JPEG;
    meta->channels = 3;
    meta->min_width = meta->max_width = 7;
    meta->min_height = meta->max_height = 9;
    uint64_t bytes;
    ck_assert_int_eq(stk_writer_finish(w, meta, &bytes), STK_OK);
    stk_writer_close(w);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq((uint64_t)sb.st_size, bytes);
    free(buf);
}

START_TEST(writer_reader_roundtrip_index_matches_lmdb)
{
    const char *path = tpath("synth.stoke");
    stk_meta meta = {0};
    const uint64_t n = 700; /* ~73 MB: more than the initial 64 MiB map, so it grows */
    write_synth(path, n, &meta);
    stk_meta_deinit(&meta);
    ck_assert_int_eq(test_dir_entries(test_tmp), 1); /* no temporary, no lock file */

    stk_dataset *ds;
    ck_assert_int_eq(stk_dataset_open(path, &ds), STK_OK);
    ck_assert_uint_eq(stk_dataset_count(ds), n);
    ck_assert_uint_eq(stk_dataset_meta(ds)->class_counts[1], n / 2);
    ck_assert_int_eq(test_dir_entries(test_tmp), 1); /* the reader made no lock file */
    uint8_t *expect = malloc(1 << 20), *got = malloc(stk_dataset_max_record_bytes(ds));
    uint64_t *ends = calloc(n, sizeof *ends), *starts = calloc(n, sizeof *starts);
    for (uint64_t i = 0; i < n; i++) {
        stk_record r;
        ck_assert_int_eq(stk_dataset_get(ds, i, &r, true), STK_OK);
        size_t len = synth(i, expect);
        ck_assert_uint_eq(r.payload_len, len);
        ck_assert(memcmp(r.payload, expect, len) == 0);
        ck_assert_int_eq(r.label, (int)(i % 2));
        size_t plen;
        ck_assert_int_eq(stk_dataset_pread(ds, i, got, stk_dataset_max_record_bytes(ds), &plen),
                         STK_OK);
        ck_assert_uint_eq(plen, stk_record_size(&r));
        ck_assert(memcmp(got, r.payload - 32 - r.name_len, plen) == 0);
        uint64_t off;
        uint32_t slen;
        ck_assert_int_eq(stk_dataset_span(ds, i, &off, &slen), STK_OK);
        ck_assert_uint_le(off + slen, stk_dataset_file_size(ds));
        starts[i] = off, ends[i] = off + slen;
    }
    /* Spans never overlap. (Values too big for a leaf page - most JPEGs - lie in
     * index order after compaction; small ones sit together in their leaf page.) */
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = i + 1; j < n; j++)
            ck_assert(ends[i] <= starts[j] || ends[j] <= starts[i]);
    free(starts);
    free(ends);
    stk_record r;
    ck_assert_int_eq(stk_dataset_get(ds, n, &r, true), STK_ERR_INVALID_ARG);
    size_t plen;
    ck_assert_int_eq(stk_dataset_pread(ds, 0, got, 10, &plen), STK_ERR_INVALID_ARG);
    stk_dataset_close(ds);
    free(expect);
    free(got);
}
END_TEST

static void copy_file(const char *from, const char *to, off_t keep)
{
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    ck_assert_int_eq(system(cmd), 0);
    if (keep >= 0) ck_assert_int_eq(truncate(to, keep), 0);
}

/* A dataset of n small records: many to a leaf page. */
static void write_tiny(const char *path, uint64_t n)
{
    stk_meta meta = {0};
    char *names[] = {"a", "b", "c"};
    ck_assert_int_eq(stk_meta_set_classes(&meta, names, 3), STK_OK);
    stk_writer *w;
    ck_assert_int_eq(stk_writer_open(path, &w), STK_OK);
    for (uint64_t i = 0; i < n; i++) {
        uint8_t px[12];
        for (int k = 0; k < 12; k++) px[k] = (uint8_t)(i * 7 + (uint64_t)k);
        stk_record r = {.encoding = STK_ENCODING_RAW_U8,
                        .channels = 1,
                        .width = 4,
                        .height = 3,
                        .label = (int32_t)(i % 3),
                        .name = "t",
                        .name_len = 1,
                        .payload = px,
                        .payload_len = 12};
        ck_assert_int_eq(stk_writer_put(w, &r), STK_OK);
        meta.class_counts[i % 3]++;
    }
    meta.encoding = STK_ENCODING_RAW_U8;
    meta.channels = 1;
    meta.min_width = meta.max_width = 4;
    meta.min_height = meta.max_height = 3;
    ck_assert_int_eq(stk_writer_finish(w, &meta, NULL), STK_OK);
    stk_writer_close(w);
    stk_meta_deinit(&meta);
}

/* One more LMDB transaction on a dataset file: `value` under db/key (the
 * index's value with its transaction id set to the new one when patch_txnid). */
static void lmdb_put(const char *path, const char *db, const char *key, uint8_t *value, size_t len,
                     bool patch_txnid)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_maxdbs(env, 4), 0);
    ck_assert_int_eq(mdb_env_set_mapsize(env, (size_t)sb.st_size + (16u << 20)), 0);
    ck_assert_int_eq(mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOLOCK, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
    if (patch_txnid) {
        uint64_t id = (uint64_t)mdb_txn_id(txn);
        for (int i = 0; i < 8; i++) value[8 + i] = (uint8_t)(id >> (8 * i));
    }
    ck_assert_int_eq(mdb_dbi_open(txn, db, MDB_CREATE, &dbi), 0);
    MDB_val k = {strlen(key), (void *)key}, v = {len, value};
    ck_assert_int_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
    ck_assert_int_eq(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/* The value of "index"/"v1", read with liblmdb. */
static uint8_t *index_value(const char *path, size_t *len)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_maxdbs(env, 4), 0);
    ck_assert_int_eq(mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOLOCK | MDB_RDONLY, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "index", 0, &dbi), 0);
    MDB_val k = {2, (void *)"v1"}, v;
    ck_assert_int_eq(mdb_get(txn, dbi, &k, &v), 0);
    uint8_t *copy = malloc(v.mv_size);
    memcpy(copy, v.mv_data, v.mv_size);
    *len = v.mv_size;
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return copy;
}

/* Opens through the file's index, in O(1) page walks and reads; a file
 * changed after its index was written (a flipped byte, a short index, one
 * more transaction) opens by the walk instead, its index named as bad. */
START_TEST(persisted_index_opens_without_the_walk)
{
    const char *path = tpath("tiny.stoke"), *bad = tpath("bad.stoke");
    const uint64_t n = 5000;
    write_tiny(path, n);
    stk_dataset *ds, *walked;
    ck_assert_int_eq(stk_dataset_open(path, &ds), STK_OK);
    ck_assert_int_eq(stk_dataset_open_walk(path, &walked), STK_OK);
    ck_assert(stk_dataset_indexed(ds));
    ck_assert(!stk_dataset_indexed(walked));
    uint64_t pages, reads, wpages, wreads;
    stk_dataset_open_cost(ds, &pages, &reads);
    stk_dataset_open_cost(walked, &wpages, &wreads);
    ck_assert_uint_le(pages, 8);        /* main, meta and index databases: a page or two each */
    ck_assert_uint_eq(reads, 1 + 17);   /* the index, then 17 record headers it points at */
    ck_assert_uint_gt(wpages, n / 100); /* every leaf page of the records */
    ck_assert_uint_eq(wreads, 0);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t a, b;
        uint32_t la, lb;
        ck_assert_int_eq(stk_dataset_span(ds, i, &a, &la), STK_OK);
        ck_assert_int_eq(stk_dataset_span(walked, i, &b, &lb), STK_OK);
        ck_assert(a == b && la == lb);
        stk_record r;
        ck_assert_int_eq(stk_dataset_get(ds, i, &r, true), STK_OK);
        ck_assert_int_eq(r.label, (int)(i % 3));
    }
    stk_dataset_close(walked);
    stk_dataset_close(ds);

    size_t len;
    uint8_t *v = index_value(path, &len);
    ck_assert_uint_eq(len, STK_INDEX_HEADER + n * STK_INDEX_ENTRY_SIZE);
    uint8_t *file;
    size_t flen;
    ck_assert_int_eq(stk_file_read_all(path, 1 << 30, &file, &flen), STK_OK);
    uint8_t *at = memmem(file, flen, v, 32);
    ck_assert_ptr_nonnull(at);
    struct {
        const char *what, *why;
    } cases[] = {{"flip", "do not match their CRC"},
                 {"short", "entries of 20 bytes in"},
                 {"txn", "the file changed after its index was written"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        copy_file(path, bad, -1);
        if (!strcmp(cases[c].what, "flip")) { /* one byte of an entry, in place */
            int fd = open(bad, O_WRONLY);
            uint8_t byte = at[STK_INDEX_HEADER + 7 * STK_INDEX_ENTRY_SIZE + 3] ^ 0x10;
            ck_assert_int_eq(
                pwrite(fd, &byte, 1, (at - file) + STK_INDEX_HEADER + 7 * STK_INDEX_ENTRY_SIZE + 3),
                1);
            close(fd);
        } else if (!strcmp(cases[c].what, "short")) { /* one entry fewer, bound to its txn */
            uint8_t *w = malloc(len);
            memcpy(w, v, len);
            lmdb_put(bad, "index", "v1", w, len - STK_INDEX_ENTRY_SIZE, true);
            free(w);
        } else { /* something else committed after the index */
            uint8_t x = 1;
            lmdb_put(bad, "extra", "x", &x, 1, false);
        }
        ck_assert_int_eq(stk_dataset_open(bad, &ds), STK_OK); /* by the walk */
        ck_assert(!stk_dataset_indexed(ds));
        stk_index_entry *e;
        ck_assert_int_eq(stk_dataset_read_index(ds, &e), STK_ERR_CORRUPT);
        ck_assert_msg(strstr(stk_last_error(), cases[c].why), "%s: %s", cases[c].what,
                      stk_last_error());
        ck_assert_ptr_nonnull(strstr(stk_last_error(), "bad.stoke: record index"));
        stk_dataset_close(ds);
        /* stoke index writes it anew */
        ck_assert_int_eq(stk_record_index_add(bad), STK_OK);
        ck_assert_int_eq(stk_dataset_open(bad, &ds), STK_OK);
        ck_assert(stk_dataset_indexed(ds));
        ck_assert_uint_eq(stk_dataset_count(ds), n);
        stk_dataset_close(ds);
    }
    free(file);
    free(v);
}
END_TEST

/* The index's transaction id does not bind it to the file when a copy
 * moves the records (mdb_copy -c numbers transactions from 1 again: one
 * commit later the ids agree); its entries are checked against the records
 * they point at. A forged index (an entry pointed elsewhere, CRC and txn
 * made right) that passes those checks is caught when a record is read. */
START_TEST(index_not_bound_to_the_file_is_caught)
{
    const char *path = tpath("orig.stoke"), *moved = tpath("moved.stoke"),
               *forged = tpath("forged.stoke");
    const uint64_t n = 5000;
    write_tiny(path, n);
    unlink(moved);
    MDB_env *env;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_maxdbs(env, 4), 0);
    ck_assert_int_eq(mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOLOCK | MDB_RDONLY, 0644), 0);
    ck_assert_int_eq(mdb_env_copy2(env, moved, MDB_CP_COMPACT), 0);
    mdb_env_close(env);
    uint8_t x = 1;
    lmdb_put(moved, "extra", "x", &x, 1, false); /* txn 2: the index's id again */
    stk_dataset *ds;
    ck_assert_int_eq(stk_dataset_open(moved, &ds), STK_OK); /* by the walk */
    ck_assert(!stk_dataset_indexed(ds));
    stk_index_entry *e;
    ck_assert_int_eq(stk_dataset_read_index(ds, &e), STK_ERR_CORRUPT);
    ck_assert_msg(strstr(stk_last_error(), "does not match the record at offset"), "%s",
                  stk_last_error());
    for (uint64_t i = 0; i < n; i += 97) {
        stk_record r;
        ck_assert_int_eq(stk_dataset_get(ds, i, &r, true), STK_OK);
        ck_assert_int_eq(r.label, (int)(i % 3));
    }
    stk_dataset_close(ds);

    /* entry 3 pointed at record 4's bytes (no spot check looks there), the
     * entries' CRC made right: record 4 would be served as record 3 */
    copy_file(path, forged, -1);
    size_t len;
    uint8_t *v = index_value(forged, &len);
    uint8_t *e3 = v + STK_INDEX_HEADER + 3 * STK_INDEX_ENTRY_SIZE, *e4 = e3 + STK_INDEX_ENTRY_SIZE;
    memcpy(e3, e4, 12); /* offset u64 and length u32; its CRC and label stay record 3's */
    uint32_t crc = stk_crc32c(0, v + STK_INDEX_HEADER, len - STK_INDEX_HEADER);
    for (int i = 0; i < 4; i++) v[28 + i] = (uint8_t)(crc >> (8 * i));
    lmdb_put(forged, "index", "v1", v, len, true);
    free(v);
    ck_assert_int_eq(stk_dataset_open(forged, &ds), STK_OK);
    ck_assert(stk_dataset_indexed(ds)); /* it passes the open's checks */
    stk_record r;
    ck_assert_int_eq(stk_dataset_get(ds, 2, &r, true), STK_OK);
    ck_assert_int_eq(stk_dataset_get(ds, 3, &r, true), STK_ERR_CORRUPT);
    ck_assert_msg(strstr(stk_last_error(), "record 3") &&
                      strstr(stk_last_error(), "but the record index says"),
                  "%s", stk_last_error());
    stk_dataset_close(ds);
}
END_TEST

START_TEST(reader_refuses_truncated_and_foreign_files)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", tpath("small.stoke"));
    stk_meta meta = {0};
    write_synth(path, 40, &meta);
    stk_meta_deinit(&meta);
    struct stat sb;
    stat(path, &sb);
    stk_dataset *ds;
    for (off_t keep = sb.st_size / 2; keep > 0; keep /= 3) {
        copy_file(path, tpath("cut.stoke"), keep);
        stk_status st = stk_dataset_open(tpath("cut.stoke"), &ds);
        ck_assert_int_ne(st, STK_OK);
        ck_assert_ptr_null(ds);
        if (keep >= 8192)
            ck_assert_msg(strstr(stk_last_error(), "truncated"), "%s", stk_last_error());
        ck_assert(strstr(stk_last_error(), "cut.stoke"));
    }
    FILE *f = fopen(tpath("junk.stoke"), "w");
    for (int i = 0; i < 20000; i++) fputc(i * 7, f);
    fclose(f);
    ck_assert_int_eq(stk_dataset_open(tpath("junk.stoke"), &ds), STK_ERR_FORMAT);
    ck_assert(strstr(stk_last_error(), "not a Stoke dataset"));
    ck_assert_int_eq(stk_dataset_open(tpath("missing.stoke"), &ds), STK_ERR_IO);
    ck_assert(strstr(stk_last_error(), "No such file"));
    ck_assert_int_eq(stk_dataset_open(test_tmp, &ds), STK_ERR_FORMAT);
}
END_TEST

/* A dataset-shaped LMDB file written with liblmdb directly: the meta pairs
 * given and `nrec` raw 2x2 gray records of the given record version (labels
 * 0, 0, 1, ...). For files the writer would not make: other versions. */
static void write_lmdb_dataset(const char *path, const char *const (*pairs)[2], size_t npairs,
                               int nrec, uint8_t version)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta, recs;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, 2);
    ck_assert_int_eq(mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOLOCK, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "meta", MDB_CREATE, &meta), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "records", MDB_CREATE, &recs), 0);
    for (size_t i = 0; i < npairs; i++) {
        MDB_val k = {strlen(pairs[i][0]), (void *)pairs[i][0]};
        MDB_val v = {strlen(pairs[i][1]), (void *)pairs[i][1]};
        ck_assert_int_eq(mdb_put(txn, meta, &k, &v, 0), 0);
    }
    for (int i = 0; i < nrec; i++) {
        uint8_t px[4] = {(uint8_t)i, 1, 2, 3}, buf[64], key[8];
        stk_record r = {.version = version,
                        .encoding = STK_ENCODING_RAW_U8,
                        .channels = 1,
                        .width = 2,
                        .height = 2,
                        .label = i == 2,
                        .name = "x",
                        .name_len = 1,
                        .payload = px,
                        .payload_len = 4};
        stk_record_encode(&r, buf);
        stk_record_key((uint64_t)i, key);
        MDB_val k = {8, key}, v = {stk_record_size(&r), buf};
        ck_assert_int_eq(mdb_put(txn, recs, &k, &v, MDB_APPEND), 0);
    }
    ck_assert_int_eq(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

START_TEST(reader_refuses_unknown_version)
{
    /* An LMDB file shaped like a dataset from a future format version. */
    const char *path = tpath("future.stoke");
    static const char *const pairs[][2] = {{"format", "stoke-dataset"}, {"version", "7"}};
    write_lmdb_dataset(path, pairs, 2, 0, 1);
    stk_dataset *ds;
    ck_assert_int_eq(stk_dataset_open(path, &ds), STK_ERR_FORMAT);
    ck_assert_msg(strstr(stk_last_error(), "version 7 is not supported"), "%s", stk_last_error());
}
END_TEST

/* A record count near 2^62 (which wrapped the index allocation, and the
 * walk then wrote past it) is refused before anything is allocated for it. */
START_TEST(reader_refuses_a_hostile_record_count)
{
    const char *path = tpath("count.stoke");
    static const char *const pairs[][2] = {{"format", "stoke-dataset"},
                                           {"version", "1"},
                                           {"count", "4611686018427387904"},
                                           {"encoding", "raw_u8"},
                                           {"channels", "1"},
                                           {"num_classes", "1"},
                                           {"classes", "a"},
                                           {"class_counts", "4611686018427387904"},
                                           {"width_range", "2 2"},
                                           {"height_range", "2 2"}};
    write_lmdb_dataset(path, pairs, sizeof pairs / sizeof *pairs, 3, 1);
    stk_dataset *ds;
    ck_assert_int_eq(stk_dataset_open(path, &ds), STK_ERR_CORRUPT);
    ck_assert_msg(strstr(stk_last_error(), "count.stoke: damaged (meta says 4611686018427387904 "
                                           "records, the records database 3)"),
                  "%s", stk_last_error());
}
END_TEST

/* Flip one byte of a file at `at`. */
static void flip_byte(const char *path, uint64_t at, uint8_t mask)
{
    int fd = open(path, O_RDWR);
    uint8_t b;
    ck_assert_int_eq(pread(fd, &b, 1, (off_t)at), 1);
    b ^= mask;
    ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)at), 1);
    close(fd);
}

/* Format version 2: the CRC covers the header (a flipped label is caught,
 * not trained on); the meta has its own checksum. */
START_TEST(version2_checks_headers_and_meta)
{
    const char *path = tpath("v2.stoke");
    stk_meta meta = {0};
    write_synth(path, 30, &meta);
    stk_meta_deinit(&meta);
    stk_dataset *ds;
    ck_assert_int_eq(stk_dataset_open(path, &ds), STK_OK);
    ck_assert_uint_eq(stk_dataset_meta(ds)->version, 2);
    uint64_t off;
    uint32_t len;
    stk_dataset_span(ds, 7, &off, &len);
    stk_dataset_close(ds);
    flip_byte(path, off + 16, 0x01); /* label 1 -> 0: still a valid label */
    ck_assert_int_eq(stk_dataset_open(path, &ds), STK_OK);
    stk_record r;
    ck_assert_int_eq(stk_dataset_get(ds, 7, &r, true), STK_ERR_CORRUPT);
    ck_assert_msg(strstr(stk_last_error(), "record 7 (synth/00007.jpg): CRC mismatch"), "%s",
                  stk_last_error());
    stk_dataset_close(ds);
    flip_byte(path, off + 16, 0x01);
    /* Its payload length changed: the message names the record from its
     * bytes (the decoder leaves no name; this printed from NULL) */
    flip_byte(path, off + 24, 0x01);
    ck_assert_int_eq(stk_dataset_open(path, &ds), STK_OK);
    ck_assert_int_eq(stk_dataset_get(ds, 7, &r, true), STK_ERR_CORRUPT);
    ck_assert_msg(strstr(stk_last_error(), "record 7 (synth/00007.jpg): record is"), "%s",
                  stk_last_error());
    stk_dataset_close(ds);
    flip_byte(path, off + 24, 0x01);
    /* A meta value changed in place (same length): the checksum catches it. */
    size_t flen;
    char *bytes = NULL;
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    flen = (size_t)ftell(f);
    rewind(f);
    bytes = malloc(flen);
    ck_assert_uint_eq(fread(bytes, 1, flen, f), flen);
    fclose(f);
    char *src = memmem(bytes, flen, "even\nodd", 8);
    ck_assert_ptr_nonnull(src);
    flip_byte(path, (uint64_t)(src - bytes), 0x20); /* "even" -> "Even" */
    free(bytes);
    ck_assert_int_eq(stk_dataset_open(path, &ds), STK_ERR_CORRUPT);
    ck_assert_msg(strstr(stk_last_error(), "v2.stoke: damaged (meta: checksum"), "%s",
                  stk_last_error());
}
END_TEST

/* Version 1 files (no header CRC, no meta checksum) still open and read;
 * what they cannot check is documented in docs/FORMAT.md. */
START_TEST(version1_files_still_read)
{
    const char *path = tpath("v1.stoke");
    static const char *const pairs[][2] = {
        {"format", "stoke-dataset"}, {"version", "1"},        {"count", "3"},
        {"encoding", "raw_u8"},      {"channels", "1"},       {"num_classes", "2"},
        {"classes", "a\nb"},         {"class_counts", "2 1"}, {"width_range", "2 2"},
        {"height_range", "2 2"}};
    write_lmdb_dataset(path, pairs, sizeof pairs / sizeof *pairs, 3, 1);
    stk_dataset *ds;
    ck_assert_int_eq(stk_dataset_open(path, &ds), STK_OK);
    ck_assert_uint_eq(stk_dataset_meta(ds)->version, 1);
    stk_record r;
    for (uint64_t i = 0; i < 3; i++) {
        ck_assert_int_eq(stk_dataset_get(ds, i, &r, true), STK_OK);
        ck_assert_uint_eq(r.version, 1);
        ck_assert_uint_eq(r.payload[0], i);
    }
    /* A version 2 record cannot appear in a version 1 file, nor the reverse. */
    uint8_t px[4] = {0}, buf[64];
    stk_record v2 = {.encoding = STK_ENCODING_RAW_U8,
                     .channels = 1,
                     .width = 2,
                     .height = 2,
                     .name = "x",
                     .name_len = 1,
                     .payload = px,
                     .payload_len = 4};
    stk_record_encode(&v2, buf);
    ck_assert_int_eq(stk_dataset_decode(ds, buf, stk_record_size(&v2), true, &r), STK_ERR_CORRUPT);
    ck_assert(strstr(stk_last_error(), "record version 2 in a version 1 file"));
    /* What a version 1 file cannot check: a label within range changed in
     * the header reads as valid. Out of range it is still refused. */
    v2.version = 1;
    v2.label = 5;
    stk_record_encode(&v2, buf);
    ck_assert_int_eq(stk_dataset_decode(ds, buf, stk_record_size(&v2), true, &r), STK_ERR_CORRUPT);
    ck_assert(strstr(stk_last_error(), "label 5, the dataset has 2 classes"));
    stk_dataset_close(ds);
}
END_TEST

START_TEST(reader_reports_corrupt_record_by_index_and_name)
{
    const char *path = tpath("flip.stoke");
    stk_meta meta = {0};
    write_synth(path, 30, &meta);
    stk_meta_deinit(&meta);
    stk_dataset *ds;
    ck_assert_int_eq(stk_dataset_open(path, &ds), STK_OK);
    uint64_t off;
    uint32_t len;
    stk_dataset_span(ds, 12, &off, &len);
    stk_dataset_close(ds);
    flip_byte(path, off + len - 1, 0x40);
    ck_assert_int_eq(stk_dataset_open(path, &ds), STK_OK);
    stk_record r;
    ck_assert_int_eq(stk_dataset_get(ds, 11, &r, true), STK_OK);
    ck_assert_int_eq(stk_dataset_get(ds, 12, &r, true), STK_ERR_CORRUPT);
    ck_assert_msg(strstr(stk_last_error(), "record 12 (synth/00012.jpg): CRC mismatch"), "%s",
                  stk_last_error());
    stk_dataset_close(ds);
}
END_TEST

START_TEST(writer_cleans_up)
{
    const char *path = tpath("never.stoke");
    stk_writer *w;
    ck_assert_int_eq(stk_writer_open(path, &w), STK_OK);
    uint8_t p[10] = {0};
    stk_record r = {.encoding = STK_ENCODING_RAW_U8,
                    .channels = 1,
                    .width = 10,
                    .height = 1,
                    .name = "x",
                    .name_len = 1,
                    .payload = p,
                    .payload_len = 10};
    ck_assert_int_eq(stk_writer_put(w, &r), STK_OK);
    ck_assert_int_eq(test_dir_entries(test_tmp), 1); /* the temporary */
    stk_writer_close(w);                          /* no finish: abandon */
    ck_assert_int_eq(test_dir_entries(test_tmp), 0);

    /* A temporary of a process that is gone is removed; a live one is kept. */
    char dead[1024], live[1024];
    snprintf(dead, sizeof dead, "%s/.never.stoke.pack-2147483600", test_tmp);
    snprintf(live, sizeof live, "%s/.never.stoke.pack-%d.compact", test_tmp, (int)getppid());
    fclose(fopen(dead, "w"));
    fclose(fopen(live, "w"));
    ck_assert_int_eq(stk_writer_remove_stale(path), 1);
    ck_assert_int_ne(access(dead, F_OK), 0);
    ck_assert_int_eq(access(live, F_OK), 0);
    unlink(live);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("storage");
    TCase *tc = tcase_create("all");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, record_roundtrip_and_damage);
    tcase_add_test(tc, meta_roundtrip_and_version);
    tcase_add_test(tc, writer_reader_roundtrip_index_matches_lmdb);
    tcase_add_test(tc, persisted_index_opens_without_the_walk);
    tcase_add_test(tc, index_not_bound_to_the_file_is_caught);
    tcase_add_test(tc, version2_checks_headers_and_meta);
    tcase_add_test(tc, version1_files_still_read);
    tcase_add_test(tc, reader_refuses_a_hostile_record_count);
    tcase_add_test(tc, reader_refuses_truncated_and_foreign_files);
    tcase_add_test(tc, reader_refuses_unknown_version);
    tcase_add_test(tc, reader_reports_corrupt_record_by_index_and_name);
    tcase_add_test(tc, writer_cleans_up);
    suite_add_tcase(s, tc);
    return stk_check_run(s);
}
