/* storage/lmdb_file: Stoke's validating LMDB reader, cross-checked with
 * liblmdb on the same files, and fed forged and mutated files. */
#include "common/rng.h"
#include "storage/lmdb_file.h"
#include "tests/test_tmpdir.h"

#include "tests/check_main.h"

#include <check.h>
#include <fcntl.h>
#include <stdbool.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void setup(void) { test_tmpdir_create("lmdb_file"); }
static void teardown(void) { test_tmpdir_remove(); }

/* Value of record i in a test file: sizes from a few bytes (inline in the
 * leaf) to several pages (an overflow run). */
static size_t value_of(uint64_t i, uint32_t max_len, uint8_t *buf)
{
    size_t len = (size_t)((i * 2654435761u) % max_len) + 1;
    for (size_t j = 0; j < len; j++) buf[j] = (uint8_t)(i * 31 + j * 7);
    return len;
}

static void key_of(uint64_t i, uint8_t k[8])
{
    for (int b = 7; b >= 0; b--, i >>= 8) k[b] = (uint8_t)i;
}

/* Write an LMDB file with named databases "meta" (3 text pairs) and
 * "records" (n values), optionally deleting every 5th record afterwards (free
 * pages in the file, as a never-compacted file has), optionally compacted. */
static void write_lmdb(const char *path, uint64_t n, uint32_t max_len, bool holes, bool compact)
{
    char raw[1100];
    snprintf(raw, sizeof raw, "%s.raw", path);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta, recs;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, 2);
    mdb_env_set_mapsize(env, (size_t)1 << 30);
    ck_assert_int_eq(mdb_env_open(env, compact ? raw : path, MDB_NOSUBDIR | MDB_NOLOCK, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "records", MDB_CREATE, &recs), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "meta", MDB_CREATE, &meta), 0);
    const char *mk[3] = {"format", "count", "zz"}, *mv[3] = {"stoke-dataset", "many", ""};
    for (int i = 0; i < 3; i++) {
        MDB_val k = {strlen(mk[i]), (void *)mk[i]}, v = {strlen(mv[i]), (void *)mv[i]};
        ck_assert_int_eq(mdb_put(txn, meta, &k, &v, 0), 0);
    }
    uint8_t *buf = malloc(max_len), kb[8];
    for (uint64_t i = 0; i < n; i++) {
        key_of(i, kb);
        MDB_val k = {8, kb}, v = {value_of(i, max_len, buf), buf};
        ck_assert_int_eq(mdb_put(txn, recs, &k, &v, MDB_APPEND), 0);
    }
    ck_assert_int_eq(mdb_txn_commit(txn), 0);
    if (holes) {
        ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
        for (uint64_t i = 0; i < n; i += 5) {
            key_of(i, kb);
            MDB_val k = {8, kb};
            ck_assert_int_eq(mdb_del(txn, recs, &k, NULL), 0);
        }
        ck_assert_int_eq(mdb_txn_commit(txn), 0);
    }
    if (compact) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ck_assert_int_eq(mdb_env_copyfd2(env, fd, MDB_CP_COMPACT), 0);
        close(fd);
        unlink(raw);
    }
    mdb_env_close(env);
    free(buf);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    uint8_t *b = malloc(*len ? *len : 1);
    ck_assert_uint_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

/* Entries seen by a walk, hashed in order (FNV-1a over key, length, value). */
typedef struct digest {
    const uint8_t *base;
    uint64_t hash, count;
} digest;

static void mix(digest *d, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) d->hash = (d->hash ^ ((const uint8_t *)p)[i]) * 1099511628211u;
}

static stk_status digest_entry(void *ctx, const uint8_t *key, uint32_t key_len,
                               uint64_t value_offset, uint64_t value_len)
{
    digest *d = ctx;
    mix(d, key, key_len);
    mix(d, &value_len, sizeof value_len);
    mix(d, d->base + value_offset, value_len);
    d->count++;
    return STK_OK;
}

/* The same digest through liblmdb's cursor. */
static digest lmdb_digest(const char *path, const char *db_name)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_cursor *cur;
    MDB_val k, v;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, 2);
    ck_assert_int_eq(mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOLOCK | MDB_RDONLY, 0), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, db_name, 0, &dbi), 0);
    ck_assert_int_eq(mdb_cursor_open(txn, dbi, &cur), 0);
    digest d = {.hash = 14695981039346656037u};
    for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        uint64_t len = v.mv_size;
        mix(&d, k.mv_data, k.mv_size);
        mix(&d, &len, sizeof len);
        mix(&d, v.mv_data, v.mv_size);
        d.count++;
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return d;
}

static stk_status stoke_digest(const uint8_t *b, size_t len, const char *db_name, digest *out)
{
    stk_lmdb_file f;
    stk_status st = stk_lmdb_file_init(&f, b, len);
    *out = (digest){.base = b, .hash = 14695981039346656037u};
    if (st == STK_OK) st = stk_lmdb_file_walk(&f, db_name, digest_entry, out);
    stk_lmdb_file_deinit(&f);
    return st;
}

START_TEST(both_readers_agree)
{
    /* Shapes: a one-leaf tree; thousands of small values (branch levels);
     * large values (overflow runs); with free pages; compacted or not. */
    struct {
        uint64_t n;
        uint32_t max_len;
        bool holes, compact;
    } shapes[] = {{3, 40, false, true},      {5000, 700, false, true}, {5000, 700, true, false},
                  {400, 30000, false, true}, {400, 30000, true, true}, {0, 10, false, true},
                  {20000, 24, false, false}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const char *path = tpath("agree.mdb");
        write_lmdb(path, shapes[s].n, shapes[s].max_len, shapes[s].holes, shapes[s].compact);
        size_t len;
        uint8_t *b = slurp(path, &len);
        const char *dbs[2] = {"records", "meta"};
        for (int d = 0; d < 2; d++) {
            digest want = lmdb_digest(path, dbs[d]), got;
            ck_assert_msg(stoke_digest(b, len, dbs[d], &got) == STK_OK, "shape %zu: %s", s,
                          stk_last_error());
            ck_assert_uint_eq(got.count, want.count);
            ck_assert_uint_eq(got.hash, want.hash);
        }
        stk_lmdb_file f;
        stk_lmdb_db db;
        ck_assert_int_eq(stk_lmdb_file_init(&f, b, len), STK_OK);
        ck_assert_int_eq(stk_lmdb_file_find_db(&f, "nope", &db), STK_END);
        ck_assert_int_eq(stk_lmdb_file_walk(&f, "nope", digest_entry, NULL), STK_END);
        stk_lmdb_file_deinit(&f);
        free(b);
        unlink(path);
    }
}
END_TEST

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }

/* The active meta page's main-database record and the first leaf of "records". */
static uint8_t *active_meta(uint8_t *b)
{
    uint64_t t0, t1;
    memcpy(&t0, b + 144, 8);
    memcpy(&t1, b + 4096 + 144, 8);
    return t1 > t0 ? b + 4096 : b;
}

static void expect_damaged(const uint8_t *b, size_t len, const char *what)
{
    digest d;
    stk_status st = stoke_digest(b, len, "records", &d);
    ck_assert_msg(st == STK_ERR_CORRUPT, "%s: status %d (%s)", what, st, stk_last_error());
    ck_assert_msg(strstr(stk_last_error(), what), "want \"%s\" in: %s", what, stk_last_error());
}

/* The forged files of LMDB's CVEs and of README.md's list ("Damaged and
 * hostile files"), one field each. */
START_TEST(forged_files_are_refused)
{
    const char *path = tpath("forge.mdb");
    write_lmdb(path, 300, 9000, false, true); /* a branch level, overflow runs */
    size_t len;
    uint8_t *orig = slurp(path, &len), *b = malloc(len);
    ck_assert_uint_eq(len % 4096, 0);
    digest good;
    ck_assert_int_eq(stoke_digest(orig, len, "records", &good), STK_OK);
    uint64_t main_root;
    memcpy(&main_root, active_meta(orig) + 88 + 40, 8);
    /* The records database record lives in the main root leaf. */
    uint8_t *mainleaf = orig + main_root * 4096;
    uint16_t lower;
    memcpy(&lower, mainleaf + 12, 2);
    uint8_t *recdb = NULL;
    for (unsigned i = 0; i < (lower - 16u) / 2; i++) {
        uint16_t off;
        memcpy(&off, mainleaf + 16 + 2 * i, 2);
        if (memcmp(mainleaf + off + 8, "records", 7) == 0) recdb = mainleaf + off + 8 + 7;
    }
    ck_assert_ptr_nonnull(recdb);
    uint64_t root;
    memcpy(&root, recdb + 40, 8);
    size_t recdb_at = (size_t)(recdb - orig), root_at = (size_t)root * 4096;
    ck_assert_uint_eq(orig[root_at + 10], 0x01); /* a branch page */

#define FORGE(stmt, what)                                                                          \
    do {                                                                                           \
        memcpy(b, orig, len);                                                                      \
        stmt;                                                                                      \
        expect_damaged(b, len, what);                                                              \
    } while (0)
    FORGE(put16(b + root_at + 10, 0x01 | 0x10), "flags 0x11");        /* P_DIRTY */
    FORGE(put16(b + recdb_at + 4, 0x04 | 0x10), "flags 0x14");        /* DUPSORT|DUPFIXED */
    FORGE(put64(b + root_at, root + 1), "header says page");          /* wrong page number */
    FORGE(put16(b + root_at + 12, 4000), "bounds");                   /* lower > upper */
    FORGE(put16(b + root_at + 16, 4095), "outside the node area");    /* node offset */
    FORGE(put16(b + recdb_at + 6, 40), "tree depth 40");              /* depth */
    FORGE(put64(b + recdb_at + 40, len / 4096 + 7), "outside pages"); /* root past the end */
    FORGE(put64(b + recdb_at + 40, 0), "outside pages");              /* root on a meta page */
    FORGE(put64(b + recdb_at + 32, 301), "record counts");            /* entries */
    /* A branch whose first child is itself (a cycle). */
    {
        uint16_t off;
        memcpy(&off, orig + root_at + 16, 2);
        FORGE((put16(b + root_at + off, (uint16_t)root), put16(b + root_at + off + 2, 0),
               put16(b + root_at + off + 4, 0)),
              "reached twice");
    }
    /* A leaf node: a huge key, a huge inline size, F_DUPDATA, an overflow run
     * past the end and one shared with another record. */
    uint16_t c0;
    memcpy(&c0, orig + root_at + 16, 2);
    uint64_t leaf = (uint64_t)orig[root_at + c0] | (uint64_t)orig[root_at + c0 + 1] << 8;
    size_t leaf_at = (size_t)leaf * 4096;
    ck_assert_uint_eq(orig[leaf_at + 10], 0x02);
    uint16_t n0, n1;
    memcpy(&n0, orig + leaf_at + 16, 2);
    memcpy(&n1, orig + leaf_at + 18, 2);
    FORGE(put16(b + leaf_at + n0 + 6, 4000), "key of 4000 bytes");
    FORGE(put16(b + leaf_at + n0 + 4, 0x04), "flags 0x4");
    bool big0 = orig[leaf_at + n0 + 4] & 1, big1 = orig[leaf_at + n1 + 4] & 1;
    if (!big0) FORGE(put16(b + leaf_at + n0 + 2, 0x7fff), "runs past its page");
    if (big0) FORGE(put64(b + leaf_at + n0 + 16, len / 4096 - 1), "outside pages");
    if (big0 && big1) {
        uint64_t run1;
        memcpy(&run1, orig + leaf_at + n1 + 16, 8);
        FORGE(put64(b + leaf_at + n0 + 16, run1), "reached twice");
    }
    /* Keys out of order. */
    FORGE(b[leaf_at + n1 + 8 + 7] = b[leaf_at + n0 + 8 + 7], "keys out of order");
    /* Meta pages: another page size in one, a bad magic in the active one. */
    FORGE(put16(active_meta(b) + 40, 8192), "page sizes");
    FORGE(put16(active_meta(b) + 40, 1000), "page size 1000");
    FORGE(b[active_meta(b) - b + 16] ^= 1, "meta page");
#undef FORGE
    /* A file that is not LMDB at all, and a truncated one. */
    memset(b, 0x5a, len);
    ck_assert_int_eq(stoke_digest(b, len, "records", &good), STK_ERR_FORMAT);
    ck_assert(strstr(stk_last_error(), "not an LMDB file"));
    ck_assert_int_eq(stoke_digest(orig, len - 4096, "records", &good), STK_ERR_CORRUPT);
    ck_assert(strstr(stk_last_error(), "truncated"));
    ck_assert_int_eq(stoke_digest(orig, 100, "records", &good), STK_ERR_FORMAT);
    free(b);
    free(orig);
}
END_TEST

/* Every byte of the branch and leaf page headers and node offsets and of the
 * meta pages of a small file, and random bytes everywhere, changed one at a time: the reader either
 * reads the file or refuses it with a message; under ASan it never reads
 * outside the file. */
START_TEST(mutated_files_never_crash)
{
    const char *path = tpath("mut.mdb");
    write_lmdb(path, 60, 5000, false, true);
    size_t len;
    uint8_t *orig = slurp(path, &len), *b = malloc(len);
    uint64_t tried = 0, refused = 0;
    const uint8_t values[] = {0x00, 0xff, 0x01, 0x80};
    for (size_t pg = 0; pg < len / 4096; pg++) {
        /* The header and the node-offset array of each page, and every byte
         * of the meta pages' records. */
        size_t upto = pg < 2 ? 160 : 16 + 2 * 64;
        if (pg >= 2 && !(orig[pg * 4096 + 10] & 0x03)) continue; /* an overflow run's data */
        for (size_t at = pg * 4096; at < pg * 4096 + upto; at++) {
            for (size_t v = 0; v < sizeof values; v++) {
                memcpy(b, orig, len);
                if (b[at] == values[v]) continue;
                b[at] = values[v];
                digest d;
                stk_status st = stoke_digest(b, len, "records", &d);
                tried++;
                if (st == STK_END) continue; /* the name "records" was changed */
                if (st != STK_OK) {
                    refused++;
                    ck_assert_msg(st == STK_ERR_CORRUPT || st == STK_ERR_FORMAT, "%d", st);
                    ck_assert(stk_last_error()[0]);
                }
            }
        }
    }
    stk_rng rng;
    stk_rng_init(&rng, 7, 0, 0);
    for (int i = 0; i < 5000; i++) {
        memcpy(b, orig, len);
        size_t at = stk_rng_u64(&rng) % len;
        b[at] ^= (uint8_t)(1u << (stk_rng_u64(&rng) % 8));
        digest d;
        stoke_digest(b, len, "records", &d);
        tried++;
    }
    /* Many are caught; the rest fall on bytes the reader does not use (free
     * space after the node offsets, LMDB's mapsize and free database) or on
     * a value's bytes, which the record CRC covers. */
    ck_assert_msg(refused >= 1000, "%llu of %llu refused", (unsigned long long)refused,
                  (unsigned long long)tried);
    free(b);
    free(orig);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("lmdb_file");
    TCase *tc = tcase_create("lmdb_file");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, both_readers_agree);
    tcase_add_test(tc, forged_files_are_refused);
    tcase_add_test(tc, mutated_files_never_crash);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return stk_check_run(suite()); }
