#include "storage/writer.h"

#include "storage/index_writer.h"

#include "common/fs.h"
#include "common/log.h"
#include "storage/lmdb_status_impl.h"
#include "storage/record_index.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <lmdb.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A batch is committed when it holds this many records or bytes: large enough
 * that commit cost vanishes, small enough to bound memory. */
#define BATCH_RECORDS    1024
#define BATCH_BYTES      (32u << 20)
#define INITIAL_MAP_SIZE ((size_t)64 << 20)

struct stk_writer {
    char *path;      /* the target */
    char *tmp_path;  /* LMDB file being written */
    char *copy_path; /* compacted copy, renamed over the target */
    MDB_env *env;
    MDB_dbi records, meta;
    size_t map_size;
    uint64_t count; /* records committed or batched */

    /* Pending batch: encoded records back to back. */
    uint8_t *batch;
    size_t batch_len, batch_cap;
    size_t *batch_ends; /* end offset of each batched record */
    size_t batch_records;
    bool finished;
};

/* "<dir>/.<base>.pack-" : prefix of every temporary for `path`. */
static char *temp_prefix(const char *path)
{
    char *a = strdup(path), *b = strdup(path);
    char *out = NULL;
    if (a && b) {
        const char *dir = dirname(a), *base = basename(b);
        size_t n = strlen(dir) + strlen(base) + 16;
        if ((out = malloc(n))) snprintf(out, n, "%s/.%s.pack-", dir, base);
    }
    free(a);
    free(b);
    return out;
}

int stk_writer_remove_stale(const char *path)
{
    char *prefix = temp_prefix(path);
    if (!prefix) return 0;
    char *slash = strrchr(prefix, '/');
    *slash = '\0';
    const char *dir = prefix, *name_prefix = slash + 1;
    size_t plen = strlen(name_prefix);
    int removed = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, name_prefix, plen) != 0) continue;
        char *end;
        long pid = strtol(e->d_name + plen, &end, 10);
        if (end == e->d_name + plen || (*end && strcmp(end, ".compact") != 0)) continue;
        /* Only a writer that no longer runs can have left it. */
        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno != ESRCH)) continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        if (unlink(full) == 0) {
            stk_log_info("removed %s, left by an interrupted pack", full);
            removed++;
        }
    }
    if (d) closedir(d);
    free(prefix);
    return removed;
}

stk_status stk_writer_open(const char *path, stk_writer **out)
{
    *out = NULL;
    stk_writer_remove_stale(path);
    stk_writer *w = calloc(1, sizeof *w);
    if (!w) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st;
    char *prefix = temp_prefix(path);
    w->path = strdup(path);
    size_t n = prefix ? strlen(prefix) + 32 : 0;
    w->tmp_path = prefix ? malloc(n) : NULL;
    w->copy_path = prefix ? malloc(n) : NULL;
    w->batch_ends = malloc(BATCH_RECORDS * sizeof *w->batch_ends);
    if (!w->path || !w->tmp_path || !w->copy_path || !w->batch_ends) {
        free(prefix);
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    snprintf(w->tmp_path, n, "%s%ld", prefix, (long)getpid());
    snprintf(w->copy_path, n, "%s%ld.compact", prefix, (long)getpid());
    free(prefix);
    unlink(w->tmp_path); /* our own pid: a leftover of an earlier run in this process */
    unlink(w->copy_path);

    w->map_size = INITIAL_MAP_SIZE;
    int rc = mdb_env_create(&w->env);
    if (!rc) rc = mdb_env_set_maxdbs(w->env, 2);
    if (!rc) rc = mdb_env_set_mapsize(w->env, w->map_size);
    /* NOSYNC: the temporary is never the result; the compacted copy is fsynced. */
    if (!rc)
        rc = mdb_env_open(w->env, w->tmp_path,
                          MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOSYNC | MDB_NOMETASYNC, 0644);
    if (rc) {
        st = stk_lmdb_status(rc, "%s: cannot create", w->tmp_path);
        goto fail;
    }
    MDB_txn *txn;
    rc = mdb_txn_begin(w->env, NULL, 0, &txn);
    if (!rc) rc = mdb_dbi_open(txn, "records", MDB_CREATE, &w->records);
    if (!rc) rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &w->meta);
    if (!rc)
        rc = mdb_txn_commit(txn);
    else
        mdb_txn_abort(txn);
    if (rc) {
        st = stk_lmdb_status(rc, "%s", w->tmp_path);
        goto fail;
    }
    *out = w;
    return STK_OK;
fail:
    stk_writer_close(w);
    return st;
}

/* Commit the pending batch in one transaction; on MDB_MAP_FULL grow the map
 * and retry (the batch is still in memory). */
static stk_status flush_batch(stk_writer *w)
{
    if (w->batch_records == 0) return STK_OK;
    uint64_t first = w->count - w->batch_records;
    for (;;) {
        MDB_txn *txn;
        int rc = mdb_txn_begin(w->env, NULL, 0, &txn);
        if (rc) return stk_lmdb_status(rc, "%s", w->tmp_path);
        size_t start = 0;
        for (size_t i = 0; i < w->batch_records && !rc; i++) {
            uint8_t k[8];
            stk_record_key(first + i, k);
            MDB_val key = {8, k};
            MDB_val val = {w->batch_ends[i] - start, w->batch + start};
            rc = mdb_put(txn, w->records, &key, &val, MDB_APPEND);
            start = w->batch_ends[i];
        }
        if (!rc)
            rc = mdb_txn_commit(txn);
        else
            mdb_txn_abort(txn);
        if (rc == MDB_MAP_FULL) {
            size_t grown = w->map_size * 2;
            if (grown < w->map_size + 4 * w->batch_len) grown = w->map_size + 4 * w->batch_len;
            rc = mdb_env_set_mapsize(w->env, grown);
            if (rc) return stk_lmdb_status(rc, "%s: cannot grow the map", w->tmp_path);
            stk_log_debug("writer: map grown to %zu MiB", grown >> 20);
            w->map_size = grown;
            continue;
        }
        if (rc) return stk_lmdb_status(rc, "%s: writing records", w->tmp_path);
        break;
    }
    w->batch_len = 0;
    w->batch_records = 0;
    return STK_OK;
}

stk_status stk_writer_put(stk_writer *w, stk_record *r)
{
    /* The reader's own checks: what is written can be read back. */
    stk_status st = stk_record_check(r);
    if (st != STK_OK) return st;
    size_t size = stk_record_size(r);
    if (size > UINT32_MAX)
        return stk_error(STK_ERR_LIMIT, "record of %zu bytes is larger than 4 GiB", size);
    if (w->batch_len + size > w->batch_cap) {
        size_t cap = w->batch_cap ? w->batch_cap : (1u << 20);
        while (cap < w->batch_len + size) cap *= 2;
        uint8_t *b = realloc(w->batch, cap);
        if (!b) return stk_error(STK_ERR_NOMEM, "out of memory for a %zu-byte batch", cap);
        w->batch = b;
        w->batch_cap = cap;
    }
    stk_record_encode(r, w->batch + w->batch_len);
    w->batch_len += size;
    w->batch_ends[w->batch_records++] = w->batch_len;
    w->count++;
    if (w->batch_records == BATCH_RECORDS || w->batch_len >= BATCH_BYTES) return flush_batch(w);
    return STK_OK;
}

uint64_t stk_writer_count(const stk_writer *w) { return w->count; }
uint64_t stk_writer_map_bytes(const stk_writer *w) { return w->map_size; }

typedef struct meta_put_ctx {
    MDB_txn *txn;
    MDB_dbi dbi;
    int rc;
} meta_put_ctx;

static stk_status meta_put(void *p, const char *key, const char *value)
{
    meta_put_ctx *c = p;
    MDB_val k = {strlen(key), (void *)key};
    MDB_val v = {strlen(value), (void *)value};
    c->rc = mdb_put(c->txn, c->dbi, &k, &v, 0);
    return c->rc ? stk_lmdb_status(c->rc, "writing meta \"%s\"", key) : STK_OK;
}

static stk_status write_meta(stk_writer *w, const stk_meta *meta)
{
    for (;;) {
        meta_put_ctx c = {.dbi = w->meta};
        int rc = mdb_txn_begin(w->env, NULL, 0, &c.txn);
        if (rc) return stk_lmdb_status(rc, "%s", w->tmp_path);
        stk_status st = stk_meta_encode(meta, meta_put, &c);
        if (st == STK_OK) {
            rc = mdb_txn_commit(c.txn);
            if (!rc) return STK_OK;
        } else {
            mdb_txn_abort(c.txn);
            rc = c.rc;
            if (rc != MDB_MAP_FULL) return st;
        }
        if (rc != MDB_MAP_FULL) return stk_lmdb_status(rc, "%s: writing meta", w->tmp_path);
        w->map_size *= 2;
        rc = mdb_env_set_mapsize(w->env, w->map_size);
        if (rc) return stk_lmdb_status(rc, "%s: cannot grow the map", w->tmp_path);
    }
}

/* LMDB's compacting copy reads every page of the temporary through its map,
 * and those pages stay mapped in this process: as much resident memory as the
 * file. A thread lets go of them every 50 ms while the copy runs (they stay in
 * the page cache; the copy's next touch maps them again), so pack's memory
 * does not grow with the dataset. */
typedef struct map_trim {
    void *addr;
    size_t size;
    bool stop;
    pthread_mutex_t lock;
    pthread_cond_t cv;
} map_trim;

static void *trim_loop(void *p)
{
    map_trim *t = p;
    pthread_mutex_lock(&t->lock);
    while (!t->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&t->cv, &t->lock, &ts);
        madvise(t->addr, t->size, MADV_DONTNEED);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

/* Where LMDB mapped the file `path` (its map address is not in its API
 * unless MDB_FIXEDMAP): the largest mapping of that inode in /proc/self/maps. */
static bool find_map(const char *path, void **addr, size_t *size)
{
    struct stat sb;
    FILE *f = stat(path, &sb) == 0 ? fopen("/proc/self/maps", "r") : NULL;
    if (!f) return false;
    char line[4352];
    *size = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi, ino;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %lu", &lo, &hi, &ino) == 3 &&
            ino == (unsigned long)sb.st_ino && hi - lo > *size) {
            *addr = (void *)lo;
            *size = hi - lo;
        }
    }
    fclose(f);
    return *size > 0;
}

static int copy_compact(MDB_env *env, const char *path, int fd)
{
    map_trim t = {.stop = false};
    pthread_t thread;
    bool trimming = find_map(path, &t.addr, &t.size);
    if (trimming) {
        pthread_mutex_init(&t.lock, NULL);
        pthread_cond_init(&t.cv, NULL);
        trimming = pthread_create(&thread, NULL, trim_loop, &t) == 0;
    }
    int rc = mdb_env_copyfd2(env, fd, MDB_CP_COMPACT);
    if (trimming) {
        pthread_mutex_lock(&t.lock);
        t.stop = true;
        pthread_cond_signal(&t.cv);
        pthread_mutex_unlock(&t.lock);
        pthread_join(thread, NULL);
        pthread_mutex_destroy(&t.lock);
        pthread_cond_destroy(&t.cv);
    }
    return rc;
}

stk_status stk_writer_finish(stk_writer *w, const stk_meta *meta, uint64_t *file_bytes)
{
    stk_status st = flush_batch(w);
    if (st != STK_OK) return st;
    stk_meta m = *meta; /* shallow: only the count is overridden */
    m.count = w->count;
    if ((st = write_meta(w, &m))) return st;

    int fd = open(w->copy_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return stk_error(STK_ERR_IO, "%s: cannot create: %s", w->copy_path, strerror(errno));
    int rc = copy_compact(w->env, w->tmp_path, fd);
    if (rc) {
        close(fd);
        return stk_lmdb_status(rc, "%s: compacting", w->copy_path);
    }
    struct stat sb;
    if (fsync(fd) != 0 || fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return stk_error(STK_ERR_IO, "%s: cannot sync: %s", w->copy_path, strerror(e));
    }
    if (close(fd) != 0)
        return stk_error(STK_ERR_IO, "%s: cannot close: %s", w->copy_path, strerror(errno));
    /* the temporary's map is no longer needed: let it go before the copy is
     * mapped (peak memory) */
    mdb_env_close(w->env);
    w->env = NULL;
    /* the index is of the compacted file's pages: read back, then one more
     * (synced) transaction */
    if ((st = stk_record_index_add(w->copy_path)) != STK_OK) return st;
    if (stat(w->copy_path, &sb) != 0)
        return stk_error(STK_ERR_IO, "%s: cannot stat: %s", w->copy_path, strerror(errno));
    if (rename(w->copy_path, w->path) != 0)
        return stk_error(STK_ERR_IO, "%s: cannot rename into place: %s", w->path, strerror(errno));
    w->finished = true;
    stk_fsync_parent_dir(w->path); /* best effort: the data itself is already synced */
    if (file_bytes) *file_bytes = (uint64_t)sb.st_size;
    return STK_OK;
}

void stk_writer_close(stk_writer *w)
{
    if (!w) return;
    if (w->env) mdb_env_close(w->env);
    if (w->tmp_path) unlink(w->tmp_path);
    if (w->copy_path && !w->finished) unlink(w->copy_path);
    free(w->path);
    free(w->tmp_path);
    free(w->copy_path);
    free(w->batch);
    free(w->batch_ends);
    free(w);
}
