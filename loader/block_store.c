#include "loader/block_store.h"

#include "common/log.h"
#include "loader/dataset_files.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ALIGN 4096 /* O_DIRECT: offsets, lengths and buffers on this boundary */
/* Records closer than this in the file are read in one piece, the bytes
 * between them included: fewer, larger reads. */
#define MERGE_GAP (64 << 10)

/* A piece of a block: one read of file range [start, end), at buf + at. */
typedef struct extent {
    uint64_t start, end; /* aligned, in the dataset's byte space (dataset.h: shards) */
    int file;            /* the dataset's file that holds it */
    uint64_t need;       /* bytes from start that its records need */
    uint64_t at;
} extent;

typedef enum block_state { BLOCK_EMPTY, BLOCK_LOADING, BLOCK_READY } block_state;

/* A block's records usually lie in one file range, but not always: LMDB
 * keeps values of up to about half a page inside the leaf pages and larger
 * ones in overflow pages elsewhere, so a block of mixed sizes is a few
 * ranges (extents), read one after another into one buffer. */
typedef struct block {
    uint64_t first, n; /* its extents: extents[first .. first + n) */
    uint64_t size;     /* their bytes: the buffer's size */
    uint8_t *buf;      /* in memory when READY */
    block_state state;
    int users;        /* requests holding its bytes */
    bool cached;      /* part of the static cache: never freed */
    uint32_t uses[2]; /* reads left per epoch parity (not for cached blocks) */
    /* [p]: its read failed in the epoch of parity p, which is not tried
     * again in that epoch (each of its records would re-read the whole block:
     * a truncated file read at ~100 images/s); fail_* say how. The next plan
     * of that parity clears it, so a passing fault is retried next epoch. */
    bool failed[2];
    stk_status fail_st[2];
    char *fail_msg[2];
} block;

struct stk_block_store {
    const stk_dataset *ds;
    stk_block_store_options o;
    int *fds; /* one per dataset file */
    int nfds;
    bool direct;
    uint64_t nblocks, ncached;
    block *blocks;
    extent *extents;
    uint8_t *arena; /* the static cache: the cached blocks' ranges, one after another */
    size_t arena_bytes;
    pthread_mutex_t lock;
    pthread_cond_t loaded;
    bool active[2];
    uint64_t held; /* bytes of blocks in memory outside the arena; guarded by lock */
    struct {
        uint64_t hits, served, loads, failed, bytes;
    } n[2]; /* guarded by lock */
};

static uint64_t round_up(uint64_t v) { return (v + ALIGN - 1) / ALIGN * ALIGN; }

typedef struct span {
    uint64_t off, end;
} span;

static int by_offset(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Each block's extents: its records' spans sorted by offset, merged where
 * they are less than MERGE_GAP apart (aligned for O_DIRECT). */
static stk_status find_extents(stk_block_store *bs)
{
    uint64_t count = stk_dataset_count(bs->ds), per = bs->o.block_records;
    span *spans = malloc((per < count ? per : count ? count : 1) * sizeof *spans);
    uint64_t cap = bs->nblocks + 16, used = 0;
    bs->extents = malloc(cap * sizeof *bs->extents);
    if (!spans || !bs->extents) {
        free(spans);
        return stk_error(STK_ERR_NOMEM, "out of memory for the blocks' extents");
    }
    for (uint64_t k = 0; k < bs->nblocks; k++) {
        uint64_t n = 0;
        for (uint64_t i = k * per; i < count && i < (k + 1) * per; i++, n++) {
            uint32_t len;
            stk_dataset_span(bs->ds, i, &spans[n].off, &len);
            spans[n].end = spans[n].off + len;
        }
        qsort(spans, n, sizeof *spans, by_offset);
        block *b = &bs->blocks[k];
        b->first = used;
        for (uint64_t i = 0; i < n; i++) {
            extent *last = used > b->first ? &bs->extents[used - 1] : NULL;
            int file = stk_dataset_file_of(bs->ds, spans[i].off);
            if (last && last->file == file &&
                spans[i].off / ALIGN * ALIGN <= last->end + MERGE_GAP) {
                if (round_up(spans[i].end) > last->end) last->end = round_up(spans[i].end);
                if (spans[i].end - last->start > last->need)
                    last->need = spans[i].end - last->start;
                continue;
            }
            if (used == cap) {
                extent *grown = realloc(bs->extents, 2 * cap * sizeof *grown);
                if (!grown) {
                    free(spans);
                    return stk_error(STK_ERR_NOMEM, "out of memory for the blocks' extents");
                }
                bs->extents = grown, cap *= 2;
            }
            extent *e = &bs->extents[used++];
            e->file = file;
            e->start = spans[i].off / ALIGN * ALIGN;
            e->end = round_up(spans[i].end);
            e->need = spans[i].end - e->start;
        }
        b->n = used - b->first;
        for (uint64_t i = b->first; i < used; i++) {
            bs->extents[i].at = b->size;
            b->size += bs->extents[i].end - bs->extents[i].start;
        }
    }
    free(spans);
    return STK_OK;
}

/* Where record `index`'s bytes are in its block's buffer. */
static const uint8_t *locate(const stk_block_store *bs, const block *b, uint64_t index,
                             uint32_t *len)
{
    uint64_t off;
    stk_dataset_span(bs->ds, index, &off, len);
    uint64_t lo = b->first, hi = b->first + b->n; /* the last extent starting at or before off */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (bs->extents[mid].start <= off)
            lo = mid;
        else
            hi = mid;
    }
    const extent *e = &bs->extents[lo];
    return b->buf + e->at + (off - e->start);
}

stk_status stk_block_store_create(const stk_dataset *ds, const stk_block_store_options *o,
                                  stk_block_store **out)
{
    *out = NULL;
    if (o->block_records < 1) return stk_error(STK_ERR_INVALID_ARG, "block of 0 records");
    stk_block_store *bs = calloc(1, sizeof *bs);
    if (!bs) return stk_error(STK_ERR_NOMEM, "out of memory");
    bs->ds = ds;
    bs->o = *o;
    bs->nfds = stk_dataset_file_count(ds);
    pthread_mutex_init(&bs->lock, NULL);
    pthread_cond_init(&bs->loaded, NULL);
    uint64_t count = stk_dataset_count(ds);
    bs->nblocks = (count + o->block_records - 1) / o->block_records;
    bs->blocks = calloc(bs->nblocks ? bs->nblocks : 1, sizeof *bs->blocks);
    stk_status st = STK_OK;
    if (!bs->blocks) {
        st = stk_error(STK_ERR_NOMEM, "out of memory for %" PRIu64 " blocks", bs->nblocks);
        goto fail;
    }
    if ((st = find_extents(bs)) != STK_OK) goto fail;
    /* The static cache: whole blocks in file order while they fit. */
    uint64_t cached = 0;
    while (bs->ncached < bs->nblocks) {
        block *b = &bs->blocks[bs->ncached];
        if (cached + b->size > o->cache_bytes) break;
        cached += b->size;
        b->cached = true;
        bs->ncached++;
    }
    if (cached) {
        bs->arena = mmap(NULL, cached, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (bs->arena == MAP_FAILED) {
            bs->arena = NULL;
            st = stk_error(STK_ERR_NOMEM, "out of memory for a cache of %" PRIu64 " MiB",
                           cached >> 20);
            goto fail;
        }
        bs->arena_bytes = cached;
        /* Transparent huge pages where the kernel has them: fewer TLB misses
         * over a cache that is read at random. Advice only: no error. */
        madvise(bs->arena, cached, MADV_HUGEPAGE);
        uint64_t at = 0;
        for (uint64_t k = 0; k < bs->ncached; k++) {
            bs->blocks[k].buf = bs->arena + at;
            at += bs->blocks[k].size;
        }
    }
    bs->direct = o->direct;
    if ((st = stk_dataset_fds_open(ds, &bs->direct, false, &bs->fds)) != STK_OK) goto fail;
    *out = bs;
    return STK_OK;
fail:
    stk_block_store_destroy(bs);
    return st;
}

static void drop(stk_block_store *bs, block *b)
{
    if (b->cached || b->state != BLOCK_READY || b->users) return;
    munmap(b->buf, b->size);
    bs->held -= b->size;
    b->buf = NULL;
    b->state = BLOCK_EMPTY;
}

void stk_block_store_destroy(stk_block_store *bs)
{
    if (!bs) return;
    for (uint64_t k = 0; bs->blocks && k < bs->nblocks; k++) {
        drop(bs, &bs->blocks[k]);
        free(bs->blocks[k].fail_msg[0]);
        free(bs->blocks[k].fail_msg[1]);
    }
    if (bs->arena) munmap(bs->arena, bs->arena_bytes);
    stk_dataset_fds_close(bs->fds, bs->nfds);
    free(bs->blocks);
    free(bs->extents);
    pthread_cond_destroy(&bs->loaded);
    pthread_mutex_destroy(&bs->lock);
    free(bs);
}

bool stk_block_store_serves(const stk_block_store *bs, uint64_t index)
{
    return bs->o.all || index / bs->o.block_records < bs->ncached;
}

void stk_block_store_plan(stk_block_store *bs, int parity, const stk_sampler *s, uint64_t from)
{
    for (uint64_t k = 0; k < bs->nblocks; k++) {
        block *b = &bs->blocks[k];
        b->uses[parity] = 0;
        b->failed[parity] = false; /* (this parity's alone: the other's workers may run) */
        free(b->fail_msg[parity]);
        b->fail_msg[parity] = NULL;
    }
    if (!bs->o.all) return;
    for (uint64_t k = from; k < s->samples; k++) {
        block *b = &bs->blocks[stk_sampler_index(s, k) / bs->o.block_records];
        if (!b->cached) b->uses[parity]++;
    }
}

/* Whether nothing active needs b any more. Lock held. */
static bool unneeded(const stk_block_store *bs, const block *b)
{
    for (int p = 0; p < 2; p++)
        if (bs->active[p] && b->uses[p]) return false;
    return true;
}

void stk_block_store_activate(stk_block_store *bs, int parity, bool on)
{
    pthread_mutex_lock(&bs->lock);
    bs->active[parity] = on;
    if (!on)
        for (uint64_t k = 0; k < bs->nblocks; k++) {
            bs->blocks[k].uses[parity] = 0;
            if (unneeded(bs, &bs->blocks[k])) drop(bs, &bs->blocks[k]);
        }
    pthread_mutex_unlock(&bs->lock);
}

void stk_block_store_reset(stk_block_store *bs)
{
    pthread_mutex_lock(&bs->lock);
    bs->active[0] = bs->active[1] = false;
    for (uint64_t k = 0; k < bs->nblocks; k++) {
        bs->blocks[k].uses[0] = bs->blocks[k].uses[1] = 0;
        for (int p = 0; p < 2; p++) {
            bs->blocks[k].failed[p] = false;
            free(bs->blocks[k].fail_msg[p]);
            bs->blocks[k].fail_msg[p] = NULL;
        }
        drop(bs, &bs->blocks[k]);
    }
    pthread_mutex_unlock(&bs->lock);
}

/* Read block b (state LOADING, claimed by this thread; lock not held). */
static stk_status load(stk_block_store *bs, block *b, uint64_t *got_bytes)
{
    uint8_t *buf = b->buf; /* the cache's place, or a fresh mapping */
    if (!b->cached) {
        buf = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED)
            return stk_error(STK_ERR_NOMEM, "out of memory for a block of %" PRIu64 " bytes",
                             b->size);
    }
    stk_status st = STK_OK;
    uint64_t total = 0;
    for (uint64_t i = b->first; i < b->first + b->n && st == STK_OK; i++) {
        const extent *e = &bs->extents[i];
        uint64_t base = stk_dataset_file_base(bs->ds, e->file);
        const char *path = stk_dataset_file_path(bs->ds, e->file);
        int64_t got =
            stk_pread_full(bs->fds[e->file], buf + e->at, e->end - e->start, e->start - base);
        if (got < 0)
            st = stk_error(STK_ERR_IO, "%s: read error at offset %" PRIu64 ": %s", path,
                           e->start - base, strerror((int)-got));
        else if ((uint64_t)got < e->need)
            st = stk_error(STK_ERR_CORRUPT,
                           "short read (%" PRIu64 " bytes wanted at offset %" PRIu64
                           "): the file is truncated",
                           e->need, e->start - base);
        else
            total += (uint64_t)got;
    }
    if (st != STK_OK) {
        if (!b->cached) munmap(buf, b->size);
        return st;
    }
    *got_bytes = total;
    b->buf = buf;
    return STK_OK;
}

void stk_block_store_acquire(stk_block_store *bs, int parity, stk_read_req *reqs, int n,
                             uint64_t *bytes)
{
    pthread_mutex_lock(&bs->lock);
    for (int i = 0; i < n; i++) {
        stk_read_req *q = &reqs[i];
        if (!q->given) continue;
        q->status = STK_OK;
        block *b = &bs->blocks[q->index / bs->o.block_records];
        while (b->state == BLOCK_LOADING) pthread_cond_wait(&bs->loaded, &bs->lock);
        if (b->failed[parity]) { /* this epoch's read of it failed: the same answer */
            q->status = b->fail_st[parity];
            snprintf(q->error, sizeof q->error, "%s",
                     b->fail_msg[parity] ? b->fail_msg[parity] : "read failed");
            q->data = NULL;
            q->len = 0;
            continue;
        }
        if (b->state == BLOCK_READY) {
            bs->n[parity].hits += b->cached;
        } else {
            b->state = BLOCK_LOADING;
            pthread_mutex_unlock(&bs->lock);
            uint64_t got = 0;
            stk_status st = load(bs, b, &got);
            pthread_mutex_lock(&bs->lock);
            b->state = st == STK_OK ? BLOCK_READY : BLOCK_EMPTY;
            pthread_cond_broadcast(&bs->loaded);
            if (st != STK_OK) {
                q->status = st;
                snprintf(q->error, sizeof q->error, "%s", stk_last_error());
                b->failed[parity] = true;
                bs->n[parity].failed++;
                b->fail_st[parity] = st;
                free(b->fail_msg[parity]);
                b->fail_msg[parity] = strdup(q->error); /* NULL: "read failed" */
                q->data = NULL;
                q->len = 0;
                continue;
            }
            if (!b->cached) bs->held += b->size;
            bs->n[parity].loads++;
            bs->n[parity].bytes += got;
            if (bytes) *bytes += got;
        }
        b->users++;
        bs->n[parity].served++;
        uint32_t len;
        q->data = locate(bs, b, q->index, &len);
        q->len = len;
    }
    pthread_mutex_unlock(&bs->lock);
}

void stk_block_store_release(stk_block_store *bs, int parity, const stk_read_req *reqs, int n)
{
    pthread_mutex_lock(&bs->lock);
    for (int i = 0; i < n; i++) {
        const stk_read_req *q = &reqs[i];
        if (!q->given || q->status != STK_OK) continue;
        block *b = &bs->blocks[q->index / bs->o.block_records];
        b->users--;
        if (b->cached) continue;
        if (b->uses[parity]) b->uses[parity]--;
        if (unneeded(bs, b)) drop(bs, b);
    }
    pthread_mutex_unlock(&bs->lock);
}

void stk_block_store_stats_get(stk_block_store *bs, int parity, stk_block_store_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&bs->lock);
    for (int p = 0; p < 2; p++) {
        if (parity >= 0 && p != parity) continue;
        out->hits += bs->n[p].hits;
        out->served += bs->n[p].served;
        out->loads += bs->n[p].loads;
        out->failed_loads += bs->n[p].failed;
        out->bytes_read += bs->n[p].bytes;
    }
    out->cache_bytes = bs->arena_bytes;
    out->cached_blocks = bs->ncached;
    out->bytes_held = bs->held + bs->arena_bytes;
    pthread_mutex_unlock(&bs->lock);
}

void stk_block_store_stats_reset(stk_block_store *bs, int parity)
{
    pthread_mutex_lock(&bs->lock);
    memset(&bs->n[parity], 0, sizeof bs->n[parity]);
    pthread_mutex_unlock(&bs->lock);
}
