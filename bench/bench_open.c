/* Dataset open time: Stoke's validating reader (stk_dataset_open: meta pages,
 * every page of the tree, meta checks and checksum, the record index) beside
 * the liblmdb path it replaced (mdb_env_open read-only, both named databases,
 * a cursor walk collecting every record's value pointer and length), in one
 * process, on the same file, alternating, after one warm-up of each.
 *
 *     bench_open DATA.stoke [RUNS=31]
 *
 * Prints the median and best of each and their ratio. The page cache is warm
 * (this measures the walk, not the disk). */
#include "storage/dataset.h"

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int stoke_open(const char *path)
{
    stk_dataset *ds;
    if (stk_dataset_open(path, &ds) != STK_OK) {
        fprintf(stderr, "bench_open: %s\n", stk_last_error());
        return -1;
    }
    stk_dataset_close(ds);
    return 0;
}

/* What the reader did before: LMDB opens the file and walks the records. */
static int lmdb_open(const char *path)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta, recs;
    MDB_cursor *cur;
    MDB_val k, v;
    int rc = mdb_env_create(&env);
    if (!rc) rc = mdb_env_set_maxdbs(env, 2);
    if (!rc)
        rc = mdb_env_open(env, path, MDB_RDONLY | MDB_NOLOCK | MDB_NORDAHEAD | MDB_NOSUBDIR, 0);
    if (!rc) rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    if (!rc) rc = mdb_dbi_open(txn, "meta", 0, &meta);
    if (!rc) rc = mdb_dbi_open(txn, "records", 0, &recs);
    if (!rc) rc = mdb_cursor_open(txn, recs, &cur);
    if (rc) {
        fprintf(stderr, "bench_open: %s: %s\n", path, mdb_strerror(rc));
        return -1;
    }
    MDB_stat st;
    mdb_stat(txn, recs, &st);
    const void **ptr = malloc((st.ms_entries + 1) * sizeof *ptr);
    size_t *len = malloc((st.ms_entries + 1) * sizeof *len), i = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && i < st.ms_entries;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT), i++)
        ptr[i] = v.mv_data, len[i] = v.mv_size;
    free(ptr);
    free(len);
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return 0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_open DATA.stoke [RUNS]\n");
        return 2;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 31;
    if (runs < 1 || runs > 10000) runs = 31;
    double *t[2] = {malloc((size_t)runs * sizeof(double)), malloc((size_t)runs * sizeof(double))};
    int (*fn[2])(const char *) = {stoke_open, lmdb_open};
    for (int f = 0; f < 2; f++)
        if (fn[f](argv[1])) return 1;
    for (int r = 0; r < runs; r++)
        for (int f = 0; f < 2; f++) {
            double t0 = now();
            if (fn[f](argv[1])) return 1;
            t[f][r] = now() - t0;
        }
    const char *name[2] = {"stoke (validating)", "liblmdb (unchecked)"};
    double med[2];
    for (int f = 0; f < 2; f++) {
        qsort(t[f], (size_t)runs, sizeof(double), cmp);
        med[f] = t[f][runs / 2];
        printf("%-20s median %8.3f ms  best %8.3f ms\n", name[f], med[f] * 1e3, t[f][0] * 1e3);
    }
    printf("%s: open time stoke / liblmdb = %.3f (%d runs each)\n", argv[1], med[0] / med[1], runs);
    free(t[0]);
    free(t[1]);
    return 0;
}
