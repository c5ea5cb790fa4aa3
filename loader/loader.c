#include "loader/loader.h"

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/memory_budget.h"
#include "common/thread_pool.h"
#include "common/trace.h"
#include "device/device.h"
#include "loader/block_store.h"
#include "loader/sampler.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SLOTS 64

typedef enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD } slot_state;

/* One ring buffer and the batch being built in it. Guarded by l->lock,
 * except the pixel/label memory, which a chunk's worker owns while it fills
 * its samples. */
typedef struct slot {
    slot_state state;
    const stk_sampler *sampler; /* the order of the slot's epoch */
    int chunks, next_chunk, done_chunks;
    stk_status status; /* the first failing sample's, in sample order */
    int error_sample;
    char error[STK_ERROR_MAX];
    stk_batch b;
} slot;

/* Per worker thread: its reader, augmenter, scratch and counters. */
typedef struct worker {
    struct stk_loader *l;
    stk_record_reader *reader;
    stk_augment *aug;
    stk_read_req *reqs[2]; /* one request set per chunk in flight */
    uint64_t read_ids[2];  /* the trace's async ids of each set's first read */
    int index;             /* 0.. nworkers-1 (the trace's thread name) */
    uint8_t *spare;        /* a replacement record's bytes */
    /* Counters per epoch parity (epoch & 1): the workers start the next
     * epoch before the current one is delivered, and its work must not be
     * counted in the current epoch's stats. */
    struct {
        uint64_t read_ns, decode_ns, augment_ns, bytes, bad;
    } n[2];
    pthread_t thread;
    bool started;
} worker;

struct stk_loader {
    stk_dataset *ds;
    stk_loader_options o;
    char *transform;         /* the spec in use (owned) */
    uint64_t warnings;       /* bad-record warnings printed (atomic): the first few only */
    stk_sampler samplers[2]; /* the current epoch's order and the next one's */
    stk_sampler *cur, *ahead;
    int out_w, out_h, channels;
    size_t sample_bytes, row_bytes;
    void *ring;
    size_t ring_bytes;
    bool ring_locked;
    const stk_host_allocator *ring_memory; /* who allocated the ring (frees it) */
    stk_io_backend io_used;
    stk_block_store *store; /* whole blocks: block order, the static cache; NULL: neither */
    int chunk_size;
    slot slots[MAX_SLOTS];
    int nslots;
    worker *workers;
    int nworkers;
    uint64_t trace_serial;    /* this loader among the process's (flow ids) */
    uint64_t reads_in_flight; /* atomic, for the trace's counter */

    /* Guarded by lock: */
    pthread_mutex_t lock;
    pthread_cond_t work_cv; /* workers: a chunk or a free slot may be there */
    pthread_cond_t done_cv; /* consumer: a batch completed, or workers went idle */
    bool running;           /* an epoch is started */
    bool shutdown;
    bool failed; /* a batch failed: stop issuing */
    uint64_t epoch, next_issue, next_deliver;
    bool ahead_ready;     /* ahead holds epoch + 1: workers may start on it */
    uint64_t ahead_issue; /* batches of epoch + 1 already started */
    int active;           /* chunks being processed */
    uint64_t images;
    double wait_s;
};

const char *const stk_read_order_names[] = {"random", "block", "sequential", NULL};

int stk_read_order_parse(const char *name)
{
    for (int i = 0; stk_read_order_names[i]; i++)
        if (!strcmp(name, stk_read_order_names[i])) return i;
    return -1;
}

stk_loader_options stk_loader_defaults(void)
{
    return (stk_loader_options){.batch_size = 256,
                                .workers = stk_cpu_count(),
                                .prefetch = 3,
                                .shuffle = true,
                                .block_mib = 8,
                                .block_window = 8,
                                .io = STK_IO_URING,
                                .io_depth = 32,
                                .direct_auto = true,
                                .fast_decode = true,
                                .world = 1};
}

void stk_loader_default_transform(const stk_meta *m, char *buf, size_t size)
{
    if (m->encoding == STK_ENCODING_JPEG)
        snprintf(buf, size, "rrc:224,flip");
    else
        snprintf(buf, size, "pad:4,crop:%u,flip",
                 m->min_width < m->min_height ? m->min_width : m->min_height);
}

/* ---- workers ---- */

/* Worker counters are read by stats_get while workers run: relaxed atomics. */
static void count(uint64_t *counter, uint64_t v)
{
    __atomic_fetch_add(counter, v, __ATOMIC_RELAXED);
}
static uint64_t counted(const uint64_t *counter)
{
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

/* Check and transform one record into sample j of slot s. */
static stk_status make_sample(worker *w, slot *s, int j, const uint8_t *bytes, size_t len,
                              uint64_t index)
{
    stk_loader *l = w->l;
    stk_record r;
    stk_status st = stk_dataset_decode(l->ds, bytes, len, !l->o.read_only, &r);
    if (st == STK_OK) st = stk_dataset_check_entry(l->ds, index, &r);
    if (st != STK_OK) return st;
    s->b.labels[j] = r.label;
    s->b.indices[j] = index;
    if (l->o.read_only) return STK_OK;
    stk_sample smp = {r.encoding, r.payload, r.payload_len, r.width, r.height, r.channels};
    stk_augment_out out = {.data = (uint8_t *)s->b.data + (size_t)j * l->sample_bytes,
                           .stride = l->row_bytes,
                           .capacity = l->sample_bytes};
    uint64_t t0 = stk_clock_ns();
    st = stk_augment_apply(w->aug, &smp, s->b.epoch, index, &out);
    /* The checksum is computed here, in parallel, so the consumer only
     * combines per-sample values. */
    if (st == STK_OK && l->o.checksum) s->b.checksums[j] = stk_crc32c(0, out.data, l->sample_bytes);
    uint64_t t = stk_clock_ns() - t0;
    count(&w->n[s->b.epoch & 1].decode_ns, out.decode_ns);
    count(&w->n[s->b.epoch & 1].augment_ns, t - out.decode_ns);
    return st;
}

static void note_error(slot *s, int j, stk_status st, const char *msg)
{
    if (s->status && s->error_sample <= j) return;
    s->status = st;
    s->error_sample = j;
    snprintf(s->error, sizeof s->error, "%s", msg);
}

/* The record's source name from its bytes, when its header is sane enough. */
static const char *record_name(const uint8_t *bytes, size_t len, char *buf, size_t size)
{
    stk_record r;
    if (bytes && len >= STK_RECORD_HEADER_SIZE) {
        stk_record_decode(bytes, len, false, &r); /* fields are set even when it fails */
        if (r.name && r.name_len > 0 && r.name_len < size &&
            STK_RECORD_HEADER_SIZE + (size_t)r.name_len <= len) {
            memcpy(buf, r.name, r.name_len);
            buf[r.name_len] = '\0';
            return buf;
        }
    }
    return "?";
}

/* Consecutive bad records tried for one sample before the batch fails: a
 * dataset that is bad everywhere stops at once instead of being read whole. */
#define MAX_REPLACEMENTS 16
/* Bad-record warnings printed per loader; the rest are only counted. */
#define MAX_WARNINGS 5

static void warn_bad(stk_loader *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn_bad(stk_loader *l, const char *fmt, ...)
{
    uint64_t n = __atomic_fetch_add(&l->warnings, 1, __ATOMIC_RELAXED);
    if (n > MAX_WARNINGS) return;
    char msg[STK_ERROR_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < MAX_WARNINGS)
        stk_log_warn("%s", msg);
    else
        stk_log_warn("%s (more bad records are counted, not printed)", msg);
}

/* A bad record at sample j: replace it by the next records of the epoch's
 * permutation until one is good (skip), or fail the batch (error). */
static void handle_bad(worker *w, slot *s, int j, uint64_t k, uint64_t index, stk_status st,
                       const char *why, const uint8_t *bytes, size_t len)
{
    stk_loader *l = w->l;
    char name[512], msg[STK_ERROR_MAX];
    snprintf(msg, sizeof msg, "record %" PRIu64 " (%s): %s", index,
             record_name(bytes, len, name, sizeof name), why);
    if (st == STK_ERR_IO || l->o.bad_policy == STK_BAD_ERROR) {
        note_error(s, j, st, msg);
        return;
    }
    warn_bad(l, "%s; replaced by the next record of the epoch", msg);
    count(&w->n[s->b.epoch & 1].bad, 1);
    uint64_t n = stk_dataset_count(l->ds), pos = stk_sampler_position(s->sampler, k);
    uint64_t tries = n - 1 < MAX_REPLACEMENTS ? n - 1 : MAX_REPLACEMENTS;
    for (uint64_t t = 1; t <= tries; t++) {
        uint64_t idx = s->sampler->perm[(pos + t) % n];
        size_t got = 0;
        uint64_t t0 = stk_clock_ns();
        st = stk_dataset_pread(l->ds, idx, w->spare, stk_dataset_max_record_bytes(l->ds), &got);
        count(&w->n[s->b.epoch & 1].read_ns, stk_clock_ns() - t0);
        if (st == STK_ERR_IO) {
            note_error(s, j, st, stk_last_error());
            return;
        }
        if (st == STK_OK) {
            count(&w->n[s->b.epoch & 1].bytes, got);
            st = make_sample(w, s, j, w->spare, got, idx);
        }
        if (st == STK_OK) return;
        count(&w->n[s->b.epoch & 1].bad, 1);
        warn_bad(l, "record %" PRIu64 " (%s): %s; trying the next", idx,
                 record_name(w->spare, got, name, sizeof name), stk_last_error());
    }
    char why2[STK_ERROR_MAX];
    snprintf(why2, sizeof why2,
             "%.300s: %.600s, and the %" PRIu64 " records tried after it were bad too",
             stk_dataset_path(l->ds), msg, tries);
    note_error(s, j, STK_ERR_CORRUPT, why2);
}

/* A chunk a worker has taken: its reads may be in flight. */
typedef struct chunk_job {
    slot *s;
    int chunk;
    int set; /* which of the worker's request sets */
    int n;
    bool valid;
} chunk_job;

/* Start the reads of a chunk. */
/* The trace: async ids of reads (unique in the process), loaders' serials. */
static uint64_t trace_reads, trace_loaders;

static void start_chunk(worker *w, chunk_job *c)
{
    stk_loader *l = w->l;
    int j0 = c->chunk * l->chunk_size, j1 = j0 + l->chunk_size;
    if (j1 > c->s->b.count) j1 = c->s->b.count;
    uint64_t k0 = c->s->b.number * (uint64_t)l->o.batch_size;
    c->n = j1 - j0;
    stk_read_req *reqs = w->reqs[c->set];
    for (int j = 0; j < c->n; j++) {
        reqs[j].index = stk_sampler_index(c->s->sampler, k0 + (uint64_t)(j0 + j));
        reqs[j].given = l->store && stk_block_store_serves(l->store, reqs[j].index);
    }
    uint64_t t0 = stk_clock_ns();
    if (stk_trace_enabled()) { /* each read an async interval: they overlap */
        uint64_t id = __atomic_fetch_add(&trace_reads, (uint64_t)c->n, __ATOMIC_RELAXED);
        w->read_ids[c->set] = id;
        for (int j = 0; j < c->n; j++) stk_trace_async_begin("read", "io", id + (uint64_t)j);
        stk_trace_counter("reads in flight",
                          (double)__atomic_add_fetch(&l->reads_in_flight, c->n, __ATOMIC_RELAXED));
    }
    stk_record_reader_submit(w->reader, c->set, reqs, c->n);
    count(&w->n[c->s->b.epoch & 1].read_ns, stk_clock_ns() - t0);
}

/* Wait for a chunk's reads, then decode and augment its samples. */
static void finish_chunk(worker *w, chunk_job *c)
{
    stk_loader *l = w->l;
    slot *s = c->s;
    int j0 = c->chunk * l->chunk_size;
    uint64_t k0 = s->b.number * (uint64_t)l->o.batch_size;
    stk_read_req *reqs = w->reqs[c->set];
    uint64_t bytes = 0, t0 = stk_clock_ns();
    char what[48];
    if (stk_trace_enabled())
        snprintf(what, sizeof what, "epoch %llu batch %llu chunk %d",
                 (unsigned long long)s->b.epoch, (unsigned long long)s->b.number, c->chunk);
    stk_trace_begin_args("chunk", "loader", what);
    if (c->chunk == 0) stk_trace_flow('s', s->b.trace_id); /* this batch's way to its step */
    stk_trace_begin("read wait", "io");
    stk_record_reader_complete(w->reader, c->set, reqs, c->n, &bytes);
    stk_trace_end();
    int parity = (int)(s->b.epoch & 1);
    if (l->store) {
        stk_trace_begin("blocks", "io");
        stk_block_store_acquire(l->store, parity, reqs, c->n, &bytes);
        stk_trace_end();
    }
    if (stk_trace_enabled()) { /* collected: the reads' intervals end here (an upper bound) */
        for (int j = 0; j < c->n; j++)
            stk_trace_async_end("read", "io", w->read_ids[c->set] + (uint64_t)j);
        stk_trace_counter("reads in flight",
                          (double)__atomic_sub_fetch(&l->reads_in_flight, c->n, __ATOMIC_RELAXED));
    }
    count(&w->n[s->b.epoch & 1].read_ns, stk_clock_ns() - t0);
    count(&w->n[s->b.epoch & 1].bytes, bytes);
    for (int j = 0; j < c->n; j++) {
        stk_read_req *q = &reqs[j];
        uint64_t k = k0 + (uint64_t)(j0 + j);
        if (q->status) {
            handle_bad(w, s, j0 + j, k, q->index, q->status, q->error, NULL, 0);
            continue;
        }
        stk_status st = make_sample(w, s, j0 + j, q->data, q->len, q->index);
        if (st != STK_OK) {
            char why[STK_ERROR_MAX];
            snprintf(why, sizeof why, "%s", stk_last_error());
            handle_bad(w, s, j0 + j, k, q->index, st, why, q->data, q->len);
        }
    }
    if (l->store) stk_block_store_release(l->store, parity, reqs, c->n);
    stk_trace_end(); /* chunk */
}

/* Batches ready for the consumer (under l->lock), for the trace's counter. */
static double ready_slots(const stk_loader *l)
{
    int n = 0;
    for (int i = 0; i < l->nslots; i++) n += l->slots[i].state == SLOT_READY;
    return n;
}

static bool before(const stk_batch *a, const stk_batch *b)
{
    return a->epoch < b->epoch || (a->epoch == b->epoch && a->number < b->number);
}

/* The earliest batch with a chunk left, or a new batch in a free slot: of
 * this epoch while it has some left, else of the next epoch, so that the
 * ring is full when the next epoch starts. */
static slot *pick(stk_loader *l, int *chunk)
{
    slot *best = NULL;
    for (int i = 0; i < l->nslots; i++) {
        slot *s = &l->slots[i];
        if (s->state == SLOT_FILLING && s->next_chunk < s->chunks &&
            (!best || before(&s->b, &best->b)))
            best = s;
    }
    if (!best && !l->failed) {
        const stk_sampler *smp = NULL;
        uint64_t *issue = NULL, epoch = l->epoch;
        if (l->next_issue < l->cur->batches)
            smp = l->cur, issue = &l->next_issue;
        else if (l->ahead_ready && l->ahead_issue < l->ahead->batches)
            smp = l->ahead, issue = &l->ahead_issue, epoch = l->epoch + 1;
        for (int i = 0; smp && i < l->nslots && !best; i++)
            if (l->slots[i].state == SLOT_FREE) best = &l->slots[i];
        if (best) {
            if (l->store && issue == &l->ahead_issue && *issue == 0)
                stk_block_store_activate(l->store, (int)(epoch & 1), true);
            best->state = SLOT_FILLING;
            best->sampler = smp;
            best->b.number = (*issue)++;
            best->b.epoch = epoch;
            best->b.trace_id =
                l->trace_serial << 48 | (epoch & 0xffffff) << 24 | (best->b.number & 0xffffff);
            best->b.count = stk_sampler_batch_len(smp, best->b.number);
            best->chunks = (best->b.count + l->chunk_size - 1) / l->chunk_size;
            best->next_chunk = best->done_chunks = 0;
            best->status = STK_OK;
            best->error[0] = '\0';
        }
    }
    if (best) *chunk = best->next_chunk++;
    return best;
}

/* A worker keeps two chunks going: while it decodes one, the reads of the
 * next are in flight (io_uring), so a cold cache costs the decode no wait
 * (bench/README.md, "Two chunks per worker", for what was measured). */
static void *worker_main(void *p)
{
    worker *w = p;
    stk_loader *l = w->l;
    chunk_job cur = {0};
    int set = 0;
    char name[48];
    snprintf(name, sizeof name, "loader %llu worker %d", (unsigned long long)l->trace_serial,
             w->index);
    stk_trace_thread_name(name);
    pthread_mutex_lock(&l->lock);
    for (;;) {
        int chunk;
        slot *s = !l->shutdown && l->running ? pick(l, &chunk) : NULL;
        if (!s && !cur.valid) {
            if (l->shutdown) break;
            pthread_cond_wait(&l->work_cv, &l->lock);
            continue;
        }
        chunk_job next = {0};
        if (s) {
            next = (chunk_job){s, chunk, set, 0, true};
            set ^= 1;
            l->active++; /* quiesce() waits for every chunk taken */
        }
        pthread_mutex_unlock(&l->lock);
        if (next.valid) start_chunk(w, &next);
        if (cur.valid) finish_chunk(w, &cur);
        pthread_mutex_lock(&l->lock);
        if (cur.valid) {
            l->active--;
            if (++cur.s->done_chunks == cur.s->chunks) {
                cur.s->state = SLOT_READY;
                if (stk_trace_enabled()) stk_trace_counter("batches ready", ready_slots(l));
            }
            pthread_cond_broadcast(&l->done_cv);
        }
        cur = next;
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* ---- open / close ---- */

static stk_status setup_workers(stk_loader *l)
{
    const stk_meta *m = stk_dataset_meta(l->ds);
    stk_augment_options ao = {.spec = l->transform,
                              .format = l->o.format,
                              .channels = m->channels,
                              .seed = l->o.seed,
                              .fast_decode = l->o.fast_decode,
                              .max_pixels = (uint64_t)1 << 36};
    for (int c = 0; c < 3; c++) {
        ao.mean[c] = (float)m->mean[c < m->channels ? c : 0];
        ao.std[c] = m->has_stats ? (float)m->std[c < m->channels ? c : 0] : 0;
    }
    for (int i = 0; i < l->nworkers; i++) {
        worker *w = &l->workers[i];
        w->l = l;
        w->index = i;
        stk_status st = stk_record_reader_create(l->ds, l->o.io, l->o.direct, l->chunk_size,
                                                 &w->reader, &l->io_used);
        if (st == STK_OK) st = stk_augment_create(&ao, &w->aug);
        if (st != STK_OK) return st;
        w->reqs[0] = calloc((size_t)l->chunk_size, sizeof *w->reqs[0]);
        w->reqs[1] = calloc((size_t)l->chunk_size, sizeof *w->reqs[1]);
        w->spare = malloc(stk_dataset_max_record_bytes(l->ds) + 1);
        if (!w->reqs[0] || !w->reqs[1] || !w->spare)
            return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    return STK_OK;
}

/* The options' ranges, the same for every entry point (the CLI's flags, the
 * C API, Python), in the words of the CLI's flags. */
static stk_status check_options(const stk_loader_options *o)
{
    if (o->batch_size < 1 || o->batch_size > STK_LOADER_MAX_BATCH)
        return stk_error(STK_ERR_INVALID_ARG, "batch size %d: expected an integer in 1..%d",
                         o->batch_size, STK_LOADER_MAX_BATCH);
    if (o->workers < 1 || o->workers > STK_LOADER_MAX_WORKERS)
        return stk_error(STK_ERR_INVALID_ARG, "workers %d: expected an integer in 1..%d",
                         o->workers, STK_LOADER_MAX_WORKERS);
    if (o->prefetch < 1 || o->prefetch > MAX_SLOTS)
        return stk_error(STK_ERR_INVALID_ARG, "prefetch %d: expected an integer in 1..%d",
                         o->prefetch, MAX_SLOTS);
    if (o->io_depth < 1 || o->io_depth > 4096)
        return stk_error(STK_ERR_INVALID_ARG, "io depth %d: expected an integer in 1..4096",
                         o->io_depth);
    if (o->seed > (uint64_t)INT64_MAX)
        return stk_error(STK_ERR_INVALID_ARG,
                         "seed %" PRIu64 ": expected an integer in 0..%" PRId64, o->seed,
                         INT64_MAX);
    if (o->world < 1 || o->world > STK_LOADER_MAX_WORLD)
        return stk_error(STK_ERR_INVALID_ARG, "world size %d: expected an integer in 1..%d",
                         o->world, STK_LOADER_MAX_WORLD);
    if (o->rank < 0 || o->rank >= o->world)
        return stk_error(STK_ERR_INVALID_ARG,
                         "rank %d: expected an integer in 0..%d (world size %d)", o->rank,
                         o->world - 1, o->world);
    if ((unsigned)o->order > STK_ORDER_SEQUENTIAL)
        return stk_error(STK_ERR_INVALID_ARG, "order %d: random, block or sequential",
                         (int)o->order);
    if (o->cache_mib < 0 || o->cache_mib > STK_LOADER_MAX_CACHE_MIB)
        return stk_error(STK_ERR_INVALID_ARG, "cache %d MiB: expected an integer in 0..%d",
                         o->cache_mib, STK_LOADER_MAX_CACHE_MIB);
    if ((o->order == STK_ORDER_BLOCK || o->cache_mib > 0) &&
        (o->block_mib < 1 || o->block_mib > 1024 || o->block_window < 1 || o->block_window > 1024))
        return stk_error(STK_ERR_INVALID_ARG,
                         "block order: %d MiB blocks, %d in a window: expected integers in 1..1024",
                         o->block_mib, o->block_window);
    return STK_OK;
}

stk_status stk_loader_check_upscale(const char *path, const char *spec, const stk_meta *m,
                                    int out_w, int out_h)
{
    uint32_t largest = m->max_width > m->max_height ? m->max_width : m->max_height;
    int side = out_w > out_h ? out_w : out_h;
    if (side > STK_LOADER_UPSCALE_FLOOR &&
        (uint64_t)side > (uint64_t)largest * STK_LOADER_MAX_UPSCALE)
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s: transform \"%s\" makes %dx%d images from images of at most %ux%u "
                         "(more than %d times the side): a size meant for another dataset?",
                         path, spec, out_w, out_h, m->max_width, m->max_height,
                         STK_LOADER_MAX_UPSCALE);
    return STK_OK;
}

/* A transform's output size against the images (stk_loader_check_upscale)
 * and the memory: a batch ring larger than half the machine's memory is
 * refused before anything is allocated. */
static stk_status check_size(const char *path, const char *spec, const stk_meta *m,
                             const stk_loader_options *o, int size)
{
    STK_TRY(stk_loader_check_upscale(path, spec, m, size, size));
    size_t elem = o->format == STK_PIXELS_F32_CHW ? 4 : o->format == STK_PIXELS_F16_CHW ? 2 : 1;
    double ring = (double)o->prefetch * o->batch_size * size * size * m->channels * (double)elem;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double memory = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    if (memory > 0 && ring > memory / 2)
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s: transform \"%s\": %d batches of %d %dx%d images need %.1f GB, more "
                         "than half of this machine's %.1f GB; lower the size, the batch or "
                         "prefetch",
                         path, spec, o->prefetch, o->batch_size, size, size, ring / 1e9,
                         memory / 1e9);
    return STK_OK;
}

/* Fit the reads to the memory budget (the machine's or the cgroup's):
 * O_DIRECT when asked, or when the file and the cache do not fit (an LRU
 * page cache holding a fraction c of a file read at random serves about
 * c^2/2 of the reads, and its pages count against a cgroup's limit); in
 * block order, blocks small enough that the two windows the block store may
 * hold (block_store.h) take at most a quarter of what the cache and the ring
 * leave: the block size, then the window, halved with a notice (the order
 * follows them: --block-mib and --block-window fix it). */
static stk_status fit_memory(stk_loader *l, const char *path, uint64_t ring_bytes)
{
    stk_loader_options *o = &l->o;
    char why[64];
    STK_TRY(stk_memory_limit_env_check()); /* the C API and Python refuse a typo as the CLI does */
    uint64_t budget = stk_memory_budget(why, sizeof why);
    uint64_t cache = (uint64_t)o->cache_mib << 20, size = stk_dataset_file_size(l->ds);
    if (cache && cache + ring_bytes > budget / 2)
        return stk_error(STK_ERR_INVALID_ARG,
                         "cache %d MiB: with the batch ring, more than half of %s (%" PRIu64
                         " MiB)",
                         o->cache_mib, why, budget >> 20);
    if (!o->direct && o->direct_auto && size + cache > budget) {
        stk_log_info("%s: %" PRIu64 " MiB%s do not fit %s (%" PRIu64
                     " MiB): reading with O_DIRECT, around the page cache",
                     path, size >> 20, cache ? " and the cache" : "", why, budget >> 20);
        o->direct = true;
    }
    if (o->order != STK_ORDER_BLOCK || !o->shuffle) return STK_OK;
    uint64_t room = budget > cache + ring_bytes ? (budget - cache - ring_bytes) / 4 : 0;
    int mib = o->block_mib, window = o->block_window;
    while (2 * ((uint64_t)mib << 20) * (uint64_t)window > room && (mib > 1 || window > 1)) {
        if (mib > 1)
            mib /= 2;
        else
            window /= 2;
    }
    if (mib != o->block_mib || window != o->block_window) {
        stk_log_info("%s: block order: two windows of %d blocks of %d MiB would be more than a "
                     "quarter of what %s (%" PRIu64 " MiB) leaves; using %d blocks of %d MiB",
                     path, o->block_window, o->block_mib, why, budget >> 20, window, mib);
        o->block_mib = mib;
        o->block_window = window;
    }
    return STK_OK;
}

/* Records' mean size in bytes (at least 1): blocks are this many records per
 * MiB. From the records, not the file, so that the same records in one file
 * or in shards are cut into the same blocks (the same block order). */
static uint64_t mean_record_bytes(const stk_dataset *ds)
{
    uint64_t n = stk_dataset_count(ds), total = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t off;
        uint32_t len;
        stk_dataset_span(ds, i, &off, &len);
        total += len;
    }
    return n && total / n ? total / n : 1;
}

/* The block store, for block order and the static cache. */
static stk_status setup_store(stk_loader *l, uint64_t block_records, bool block_order)
{
    if (!block_order && !l->o.cache_mib) return STK_OK;
    stk_block_store_options bo = {.block_records = block_records,
                                  .all = block_order,
                                  .cache_bytes = (uint64_t)l->o.cache_mib << 20,
                                  .direct = l->o.direct};
    return stk_block_store_create(l->ds, &bo, &l->store);
}

stk_status stk_loader_open(const char *path, const stk_loader_options *opts, stk_loader **out)
{
    *out = NULL;
    stk_loader *l = calloc(1, sizeof *l);
    if (l) l->trace_serial = __atomic_add_fetch(&trace_loaders, 1, __ATOMIC_RELAXED);
    if (!l) return stk_error(STK_ERR_NOMEM, "out of memory");
    l->o = *opts;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->work_cv, NULL);
    pthread_cond_init(&l->done_cv, NULL);
    stk_status st = stk_dataset_open(path, &l->ds);
    if (st != STK_OK) goto fail;
    const stk_meta *m = stk_dataset_meta(l->ds);
    stk_loader_options *o = &l->o;
    if ((st = check_options(o)) != STK_OK) goto fail;
    char deflt[64];
    stk_loader_default_transform(m, deflt, sizeof deflt);
    if (!(l->transform = strdup(o->transform ? o->transform : deflt))) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    stk_transform t;
    if ((st = stk_transform_parse(l->transform, &t))) goto fail;
    /* Every sample must fit: refuse now rather than fail each one later. */
    if ((st = stk_transform_check_fits(&t, m->min_width, m->min_height))) {
        stk_error_prefix(st, "%s: transform \"%s\"", path, l->transform);
        goto fail;
    }
    int size;
    if (!stk_transform_fixed_size(&t, &size)) {
        st = stk_error(STK_ERR_INVALID_ARG,
                       "transform \"%s\" gives images of varying sizes; a batch needs one size "
                       "(add center:N, crop:N or use rrc:N)",
                       l->transform);
        goto fail;
    }
    if ((st = check_size(path, l->transform, m, o, size)) != STK_OK) goto fail;
    l->out_w = l->out_h = size;
    l->channels = m->channels;
    size_t elem = o->format == STK_PIXELS_F32_CHW ? 4 : o->format == STK_PIXELS_F16_CHW ? 2 : 1;
    l->row_bytes = (size_t)size * elem * (o->format == STK_PIXELS_U8_HWC ? (size_t)l->channels : 1);
    l->sample_bytes = (size_t)size * (size_t)size * (size_t)l->channels * elem;
    if ((st = fit_memory(l, path,
                         (uint64_t)o->prefetch * (uint64_t)o->batch_size * l->sample_bytes)))
        goto fail;
    /* blocks of about block_mib MiB of records (block order, the cache) */
    bool blocks = o->order == STK_ORDER_BLOCK || o->cache_mib > 0;
    uint64_t block_records =
        blocks ? ((uint64_t)o->block_mib << 20) / mean_record_bytes(l->ds) + 1 : 0;
    stk_sampler_options so = {.count = stk_dataset_count(l->ds),
                              .batch_size = o->batch_size,
                              .shuffle = o->shuffle && o->order != STK_ORDER_SEQUENTIAL,
                              .block_records = o->order == STK_ORDER_BLOCK ? block_records : 0,
                              .window = o->block_window,
                              .seed = o->seed,
                              .drop_last = o->drop_last,
                              .rank = o->rank,
                              .world = o->world,
                              .drop_uneven = o->drop_uneven};
    if ((st = stk_sampler_init(&l->samplers[0], &so)) ||
        (st = stk_sampler_init(&l->samplers[1], &so)))
        goto fail;
    if ((st = setup_store(l, block_records, so.block_records > 0))) goto fail;
    l->cur = &l->samplers[0];
    l->ahead = &l->samplers[1];
    /* The ring: prefetch batches of pinned memory. */
    l->nslots = o->prefetch;
    l->ring_bytes = (size_t)l->nslots * (size_t)o->batch_size * l->sample_bytes;
    l->ring_memory = o->host_memory ? o->host_memory : stk_host_allocator_locked();
    if ((st = l->ring_memory->alloc(l->ring_memory->ctx, l->ring_bytes, &l->ring,
                                    &l->ring_locked)) != STK_OK)
        goto fail;
    for (int i = 0; i < l->nslots; i++) {
        stk_batch *b = &l->slots[i].b;
        b->data = (uint8_t *)l->ring + (size_t)i * (size_t)o->batch_size * l->sample_bytes;
        b->sample_bytes = l->sample_bytes;
        b->width = size, b->height = size, b->channels = l->channels;
        b->format = o->format;
        b->labels = calloc((size_t)o->batch_size, sizeof *b->labels);
        b->indices = calloc((size_t)o->batch_size, sizeof *b->indices);
        b->checksums = calloc((size_t)o->batch_size, sizeof *b->checksums);
        if (!b->labels || !b->indices || !b->checksums) {
            st = stk_error(STK_ERR_NOMEM, "out of memory");
            goto fail;
        }
    }
    /* Chunks: at most io_depth reads in flight per worker, and enough
     * chunks per batch that every worker has one. */
    int per_worker = (o->batch_size + o->workers - 1) / o->workers;
    l->chunk_size = per_worker < o->io_depth ? per_worker : o->io_depth;
    if (l->chunk_size < 1) l->chunk_size = 1;
    l->nworkers = o->workers;
    l->workers = calloc((size_t)l->nworkers, sizeof *l->workers);
    if (!l->workers) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = setup_workers(l))) goto fail;
    for (int i = 0; i < l->nworkers; i++) {
        int rc = pthread_create(&l->workers[i].thread, NULL, worker_main, &l->workers[i]);
        if (rc) {
            st = stk_error(STK_ERR_IO, "loader: cannot start worker %d: %s", i, strerror(rc));
            goto fail;
        }
        l->workers[i].started = true;
    }
    *out = l;
    return STK_OK;
fail:
    stk_loader_close(l);
    return st;
}

void stk_loader_close(stk_loader *l)
{
    if (!l) return;
    pthread_mutex_lock(&l->lock);
    l->shutdown = true;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->lock);
    for (int i = 0; l->workers && i < l->nworkers; i++) {
        worker *w = &l->workers[i];
        if (w->started) pthread_join(w->thread, NULL);
        stk_record_reader_destroy(w->reader);
        stk_augment_destroy(w->aug);
        free(w->reqs[0]);
        free(w->reqs[1]);
        free(w->spare);
    }
    free(l->workers);
    stk_block_store_destroy(l->store);
    free(l->transform);
    for (int i = 0; i < MAX_SLOTS; i++) {
        free(l->slots[i].b.labels);
        free(l->slots[i].b.indices);
        free(l->slots[i].b.checksums);
    }
    if (l->ring_memory) l->ring_memory->free(l->ring_memory->ctx, l->ring, l->ring_bytes);
    stk_sampler_deinit(&l->samplers[0]);
    stk_sampler_deinit(&l->samplers[1]);
    stk_dataset_close(l->ds);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->done_cv);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

/* ---- epochs and batches ---- */

/* Stop issuing, wait for the chunks in flight, empty the ring. Lock held. */
static void quiesce(stk_loader *l)
{
    l->running = false;
    while (l->active > 0) pthread_cond_wait(&l->done_cv, &l->lock);
    /* batches the consumer holds stay valid (and out of the ring) until it
     * releases them: a view of one (Python's DLPack arrays) is never
     * overwritten; the others are dropped */
    for (int i = 0; i < l->nslots; i++)
        if (l->slots[i].state != SLOT_HELD) l->slots[i].state = SLOT_FREE;
    l->failed = false;
}

/* Zero the counters of epoch parity `parity` (0, 1, or -1 for both) and the
 * consumer's. */
static void reset_stats(stk_loader *l, int parity)
{
    for (int i = 0; i < l->nworkers; i++)
        for (int p = 0; p < 2; p++) {
            if (parity >= 0 && p != parity) continue;
            worker *w = &l->workers[i];
            __atomic_store_n(&w->n[p].read_ns, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&w->n[p].decode_ns, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&w->n[p].augment_ns, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&w->n[p].bytes, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&w->n[p].bad, 0, __ATOMIC_RELAXED);
        }
    if (l->store)
        for (int p = 0; p < 2; p++)
            if (parity < 0 || p == parity) stk_block_store_stats_reset(l->store, p);
    l->images = 0;
    l->wait_s = 0;
}

/* Compute the order of the next epoch and let the workers start on it.
 * Lock not held: no worker touches `ahead` while ahead_ready is false. */
static void prepare_ahead(stk_loader *l, uint64_t epoch)
{
    stk_sampler_epoch(l->ahead, epoch + 1);
    if (l->store) stk_block_store_plan(l->store, (int)((epoch + 1) & 1), l->ahead, 0);
    pthread_mutex_lock(&l->lock);
    if (l->epoch == epoch && l->running) {
        l->ahead_ready = true;
        l->ahead_issue = 0;
        pthread_cond_broadcast(&l->work_cv);
    }
    pthread_mutex_unlock(&l->lock);
}

/* Start `epoch` at batch `cursor` from scratch. Lock held. */
static void begin(stk_loader *l, uint64_t epoch, uint64_t cursor)
{
    quiesce(l);
    l->ahead_ready = false;
    stk_sampler_epoch(l->cur, epoch);
    if (l->store) {
        stk_block_store_reset(l->store);
        stk_block_store_plan(l->store, (int)(epoch & 1), l->cur,
                             cursor * (uint64_t)l->o.batch_size);
        stk_block_store_activate(l->store, (int)(epoch & 1), true);
    }
    l->epoch = epoch;
    l->next_issue = l->next_deliver = cursor;
    reset_stats(l, -1);
    l->running = true;
    pthread_cond_broadcast(&l->work_cv);
}

stk_status stk_loader_start_epoch(stk_loader *l, uint64_t epoch)
{
    pthread_mutex_lock(&l->lock);
    if (l->running && !l->failed && l->ahead_ready && epoch == l->epoch + 1 &&
        l->next_deliver >= l->cur->batches) {
        /* The usual case: the previous epoch was read to its end and the
         * workers have started on this one; keep their batches. */
        stk_sampler *t = l->cur;
        l->cur = l->ahead;
        l->ahead = t; /* no chunk of the finished epoch is in flight: all were delivered */
        l->epoch = epoch;
        l->next_issue = l->ahead_issue;
        l->next_deliver = 0;
        l->ahead_ready = false;
        if (l->store) { /* the finished epoch's counts keep no block */
            stk_block_store_activate(l->store, (int)(epoch & 1), true);
            stk_block_store_activate(l->store, (int)((epoch + 1) & 1), false);
        }
        /* This epoch's counters already hold the work done ahead; the
         * finished epoch's are zeroed for the one after. */
        reset_stats(l, (int)((epoch + 1) & 1));
    } else {
        begin(l, epoch, 0);
    }
    pthread_mutex_unlock(&l->lock);
    prepare_ahead(l, epoch);
    return STK_OK;
}

stk_status stk_loader_restore(stk_loader *l, const stk_loader_position *p)
{
    if (p->seed != l->o.seed)
        return stk_error(STK_ERR_INVALID_ARG,
                         "loader position has seed %" PRIu64 ", the loader %" PRIu64, p->seed,
                         l->o.seed);
    if (p->cursor > l->cur->batches)
        return stk_error(STK_ERR_INVALID_ARG, "loader position at batch %" PRIu64 " of %" PRIu64,
                         p->cursor, l->cur->batches);
    pthread_mutex_lock(&l->lock);
    begin(l, p->epoch, p->cursor);
    pthread_mutex_unlock(&l->lock);
    prepare_ahead(l, p->epoch);
    return STK_OK;
}

stk_loader_position stk_loader_position_get(const stk_loader *l)
{
    return (stk_loader_position){l->o.seed, l->epoch, l->next_deliver};
}

/* next(), with a deadline (CLOCK_REALTIME, for the condition variable) or none. */
static stk_status next_until(stk_loader *l, const struct timespec *deadline, stk_batch **out)
{
    *out = NULL;
    pthread_mutex_lock(&l->lock);
    stk_status st = STK_OK;
    if (!l->running) {
        st = stk_error(STK_ERR_INVALID_ARG, "loader: call stk_loader_start_epoch first");
        goto out;
    }
    if (l->next_deliver >= l->cur->batches) {
        st = STK_END;
        goto out;
    }
    double t0 = stk_clock_sec();
    slot *s = NULL;
    for (;;) {
        int held = 0;
        for (int i = 0; i < l->nslots; i++) {
            slot *c = &l->slots[i];
            held += c->state == SLOT_HELD;
            if (c->state == SLOT_READY && c->b.epoch == l->epoch && c->b.number == l->next_deliver)
                s = c;
        }
        if (s) break;
        if (held == l->nslots) {
            st = stk_error(STK_ERR_INVALID_ARG,
                           "loader: all %d ring buffers are held; release batches before asking "
                           "for more",
                           l->nslots);
            goto out;
        }
        if (!deadline) {
            pthread_cond_wait(&l->done_cv, &l->lock);
        } else if (pthread_cond_timedwait(&l->done_cv, &l->lock, deadline) == ETIMEDOUT) {
            l->wait_s += stk_clock_sec() - t0;
            st = STK_AGAIN;
            goto out;
        }
    }
    l->wait_s += stk_clock_sec() - t0;
    l->next_deliver++;
    if (stk_trace_enabled()) /* this one is taken */
        stk_trace_counter("batches ready", ready_slots(l) - 1);
    if (s->status) {
        st = stk_error(s->status, "%s", s->error);
        s->state = SLOT_FREE;
        l->failed = true; /* the epoch ends here */
        l->next_deliver = l->cur->batches;
        pthread_cond_broadcast(&l->work_cv);
        goto out;
    }
    s->state = SLOT_HELD;
    l->images += (uint64_t)s->b.count;
    *out = &s->b;
out:
    pthread_mutex_unlock(&l->lock);
    return st;
}

stk_status stk_loader_next(stk_loader *l, stk_batch **out) { return next_until(l, NULL, out); }

stk_status stk_loader_next_wait(stk_loader *l, double max_wait_s, stk_batch **out)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    double s = max_wait_s > 0 ? max_wait_s : 0;
    t.tv_sec += (time_t)s;
    t.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
    if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
    return next_until(l, &t, out);
}

void stk_loader_release(stk_loader *l, stk_batch *b)
{
    if (!b) return;
    pthread_mutex_lock(&l->lock);
    slot *s = (slot *)((char *)b - offsetof(slot, b));
    if (s >= l->slots && s < l->slots + l->nslots && s->state == SLOT_HELD) s->state = SLOT_FREE;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->lock);
}

uint64_t stk_loader_batches(const stk_loader *l) { return l->cur->batches; }
uint64_t stk_loader_samples(const stk_loader *l) { return l->cur->samples; }
void stk_loader_block_params(const stk_loader *l, int *block_mib, int *block_window)
{
    *block_mib = l->o.block_mib;
    *block_window = l->o.block_window;
}

const stk_dataset *stk_loader_dataset(const stk_loader *l) { return l->ds; }

void stk_loader_stats_get(const stk_loader *l, stk_loader_stats *s)
{
    stk_loader *m = (stk_loader *)l; /* the lock is not part of the logical state */
    memset(s, 0, sizeof *s);
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < l->nworkers; i++) {
        const worker *w = &l->workers[i];
        int p = (int)(l->epoch & 1);
        stk_worker_stats ws = {
            (double)counted(&w->n[p].read_ns) * 1e-9, (double)counted(&w->n[p].decode_ns) * 1e-9,
            (double)counted(&w->n[p].augment_ns) * 1e-9, counted(&w->n[p].bytes)};
        if (i < STK_LOADER_STATS_WORKERS) s->worker[i] = ws;
        s->read_s += ws.read_s;
        s->decode_s += ws.decode_s;
        s->augment_s += ws.augment_s;
        s->bytes_read += ws.bytes_read;
        s->bad_records += counted(&w->n[p].bad);
    }
    s->images = l->images;
    s->wait_s = l->wait_s;
    s->bytes_held = l->ring_bytes + (size_t)l->nworkers * (size_t)l->chunk_size *
                                        (stk_dataset_max_record_bytes(l->ds) + 8192);
    if (l->store) {
        stk_block_store_stats bst;
        stk_block_store_stats_get(m->store, (int)(l->epoch & 1), &bst);
        s->block_loads = bst.loads;
        s->cache_hits = bst.hits;
        s->cache_bytes = bst.cache_bytes;
        s->bytes_held += bst.bytes_held;
    }
    s->direct = l->o.direct;
    s->ring_locked = l->ring_locked;
    s->io = l->io_used;
    s->workers = l->nworkers;
    pthread_mutex_unlock(&m->lock);
}
