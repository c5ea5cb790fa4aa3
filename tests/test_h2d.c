/* The host-to-device stage against a test-only device whose copies run on
 * a thread of their own with an artificial delay (a stand-in for a GPU's
 * copy engine): batches arrive complete and in order, copies overlap the
 * consumer's step, a pinned buffer is never recycled under a copy, a held
 * batch is never overwritten, and the in-place CPU device hands out the
 * loader's own batches. */
#include "check_main.h"
#include "loader/h2d.h"
#ifdef STOKE_CUDA_EMULATED
#include "cuda_host/host_cuda.h"
#include "kernels/cuda/cuda_device.h"
#endif
#include "storage/writer.h"
#include "test_tmpdir.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the delayed-copy device ---- */

typedef struct copy_job {
    void *dst;
    const void *src;
    size_t bytes;
} copy_job;

typedef struct slow_device {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    copy_job jobs[64];
    uint64_t queued, done; /* tickets are 1-based: job t is jobs[(t-1) % 64] */
    bool stop;
    int delay_us;
    int overlapped; /* steps that began with a copy still in flight: the overlap */
    int n_alloc;
} slow_device;

static void *copier(void *arg)
{
    slow_device *d = arg;
    pthread_mutex_lock(&d->lock);
    for (;;) {
        while (!d->stop && d->done == d->queued) pthread_cond_wait(&d->cond, &d->lock);
        if (d->stop && d->done == d->queued) break;
        copy_job j = d->jobs[d->done % 64];
        pthread_mutex_unlock(&d->lock);
        usleep((useconds_t)d->delay_us); /* the copy takes a while, then happens */
        memcpy(j.dst, j.src, j.bytes);
        pthread_mutex_lock(&d->lock);
        d->done++;
        pthread_cond_broadcast(&d->cond);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

static stk_status slow_alloc(void *ctx, size_t bytes, void **out)
{
    slow_device *d = ctx;
    d->n_alloc++;
    *out = malloc(bytes ? bytes : 1);
    memset(*out, 0xAB, bytes); /* garbage until a copy lands */
    return *out ? STK_OK : STK_ERR_NOMEM;
}

static void slow_free(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    (void)bytes;
    free(p);
}

static stk_status slow_copy(void *ctx, void *dst, const void *src, size_t bytes, uint64_t *ticket)
{
    slow_device *d = ctx;
    pthread_mutex_lock(&d->lock);
    ck_assert_uint_lt(d->queued - d->done, 64);
    d->jobs[d->queued % 64] = (copy_job){dst, src, bytes};
    *ticket = ++d->queued;
    pthread_cond_broadcast(&d->cond);
    pthread_mutex_unlock(&d->lock);
    return STK_OK;
}

static stk_status slow_wait(void *ctx, uint64_t ticket)
{
    slow_device *d = ctx;
    pthread_mutex_lock(&d->lock);
    while (d->done < ticket) pthread_cond_wait(&d->cond, &d->lock);
    pthread_mutex_unlock(&d->lock);
    return STK_OK;
}

static void slow_start(slow_device *d, stk_copy_engine *ce, int delay_us)
{
    memset(d, 0, sizeof *d);
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->cond, NULL);
    d->delay_us = delay_us;
    ck_assert_int_eq(pthread_create(&d->thread, NULL, copier, d), 0);
    *ce = (stk_copy_engine){.ctx = d,
                            .device = STK_DEVICE_CUDA,
                            .in_place = false,
                            .alloc = slow_alloc,
                            .free = slow_free,
                            .copy_async = slow_copy,
                            .wait = slow_wait};
}

static void slow_stop(slow_device *d)
{
    pthread_mutex_lock(&d->lock);
    d->stop = true;
    pthread_cond_broadcast(&d->cond);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->thread, NULL);
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->cond);
}

/* ---- a raw dataset: record i has every pixel = i % 251, label i % 7 ---- */

static char data_path[600];

static void make_raw_dataset(int n)
{
    snprintf(data_path, sizeof data_path, "%s/raw.stoke", test_tmp);
    stk_writer *w;
    ck_assert_int_eq(stk_writer_open(data_path, &w), STK_OK);
    stk_meta m = {.encoding = STK_ENCODING_RAW_U8,
                  .channels = 1,
                  .min_width = 8,
                  .max_width = 8,
                  .min_height = 8,
                  .max_height = 8,
                  .has_stats = true,
                  .mean = {0.5},
                  .std = {0.25}};
    char *names[7] = {"a", "b", "c", "d", "e", "f", "g"};
    ck_assert_int_eq(stk_meta_set_classes(&m, names, 7), STK_OK);
    uint8_t px[64];
    for (int i = 0; i < n; i++) {
        memset(px, i % 251, sizeof px);
        char name[32];
        snprintf(name, sizeof name, "r%d", i);
        stk_record r = {.encoding = STK_ENCODING_RAW_U8,
                        .channels = 1,
                        .width = 8,
                        .height = 8,
                        .label = i % 7,
                        .name = name,
                        .name_len = (uint32_t)strlen(name),
                        .payload = px,
                        .payload_len = sizeof px};
        ck_assert_int_eq(stk_writer_put(w, &r), STK_OK);
        m.class_counts[i % 7]++;
    }
    ck_assert_int_eq(stk_writer_finish(w, &m, NULL), STK_OK);
    stk_writer_close(w);
    stk_meta_deinit(&m);
}

static stk_loader *open_loader(int workers, int prefetch)
{
    stk_loader_options o = stk_loader_defaults();
    o.batch_size = 16;
    o.workers = workers;
    o.prefetch = prefetch;
    o.transform = "center:8";
    o.seed = 5;
    stk_loader *l;
    stk_status st = stk_loader_open(data_path, &o, &l);
    ck_assert_msg(st == STK_OK, "%s", stk_last_error());
    return l;
}

/* The reference: every batch's pixels and labels through the in-place path. */
typedef struct epoch_ref {
    uint8_t px[64][16 * 64];
    int32_t labels[64][16];
    int count[64], n;
} epoch_ref;

static void collect(stk_h2d *h, stk_loader *l, uint64_t epoch, epoch_ref *r, slow_device *dev,
                    int step_us)
{
    ck_assert_int_eq(stk_h2d_drain(h), STK_OK);
    ck_assert_int_eq(stk_loader_start_epoch(l, epoch), STK_OK);
    stk_device_batch *b;
    stk_status st;
    r->n = 0;
    while ((st = stk_h2d_next(h, &b)) == STK_OK) {
        ck_assert_int_lt(r->n, 64);
        ck_assert_uint_eq(b->number, (uint64_t)r->n); /* in order */
        size_t bytes = (size_t)b->count * b->sample_bytes;
        memcpy(r->px[r->n], b->data, bytes);
        memcpy(r->labels[r->n], b->labels, (size_t)b->count * 4);
        ck_assert(!memcmp(b->host_labels, b->labels, (size_t)b->count * 4));
        r->count[r->n] = b->count;
        if (dev) {
            pthread_mutex_lock(&dev->lock);
            if (dev->queued > dev->done) dev->overlapped++; /* the next batch is on its way */
            pthread_mutex_unlock(&dev->lock);
        }
        usleep((useconds_t)step_us); /* the "compute" on this batch */
        /* nothing overwrote the held batch during the step */
        ck_assert(!memcmp(r->px[r->n], b->data, bytes));
        stk_h2d_release(h, b);
        r->n++;
    }
    ck_assert_int_eq(st, STK_END);
}

static void check_batches(const epoch_ref *r)
{
    for (int k = 0; k < r->n; k++)
        for (int i = 0; i < r->count[k]; i++) {
            uint8_t v = r->px[k][i * 64];
            for (int j = 0; j < 64; j++) ck_assert_uint_eq(r->px[k][i * 64 + j], v);
        }
}

START_TEST(test_h2d_matches_in_place_and_overlaps)
{
    test_tmpdir_create("h2d");
    make_raw_dataset(200); /* 13 batches of 16, the last of 8 */
    static epoch_ref ref, got;
    stk_loader *l = open_loader(2, 3);
    stk_h2d *h;
    ck_assert_int_eq(stk_h2d_open(l, stk_copy_engine_cpu(), &h), STK_OK);
    collect(h, l, 0, &ref, NULL, 0);
    ck_assert_int_eq(ref.n, 13);
    ck_assert_int_eq(ref.count[12], 8);
    ck_assert_uint_eq(stk_h2d_copies(h), 0); /* in place: no copies */
    check_batches(&ref);
    stk_h2d_close(h);
    stk_loader_close(l);

    for (int workers = 1; workers <= 4; workers *= 2) {
        slow_device dev;
        stk_copy_engine ce;
        slow_start(&dev, &ce, 3000);
        l = open_loader(workers, 2); /* a small ring: early reuse would show */
        ck_assert_int_eq(stk_h2d_open(l, &ce, &h), STK_OK);
        collect(h, l, 0, &got, &dev, 2000);
        ck_assert_int_eq(got.n, ref.n);
        for (int k = 0; k < ref.n; k++) {
            ck_assert_int_eq(got.count[k], ref.count[k]);
            ck_assert_msg(!memcmp(got.px[k], ref.px[k], (size_t)ref.count[k] * 64),
                          "batch %d differs (workers %d)", k, workers);
            ck_assert(!memcmp(got.labels[k], ref.labels[k], (size_t)ref.count[k] * 4));
        }
        ck_assert_uint_eq(stk_h2d_copies(h), 2 * 13); /* pixels and labels per batch */
        /* the copy of batch k+1 was in flight while the consumer worked on batch k
         * (it starts before batch k is handed out and takes 3 ms) */
        ck_assert_int_ge(dev.overlapped, 1);
        ck_assert_int_le(dev.n_alloc, 4); /* two buffers (+ labels), reused */
        /* a second epoch after a drain: same order rules, other permutation */
        collect(h, l, 1, &got, &dev, 0);
        ck_assert_int_eq(got.n, 13);
        check_batches(&got);
        stk_h2d_close(h);
        stk_loader_close(l);
        slow_stop(&dev);
    }
    test_tmpdir_remove();
}
END_TEST

#ifdef STOKE_CUDA_EMULATED
/* The CUDA copy engine (copy stream, events, cudaHostAlloc ring) under the
 * host CUDA runtime: the same batches as the in-place path, in order, the
 * held batch untouched while later copies run. (The test reads device
 * memory directly: in the emulation it is host memory. A missing event wait
 * would be a data race with the copy stream's thread, which TSan reports.) */
START_TEST(test_h2d_on_cuda_streams)
{
    test_tmpdir_create("h2d_cuda");
    make_raw_dataset(200);
    static epoch_ref ref, got;
    stk_loader *l = open_loader(2, 3);
    stk_h2d *h;
    ck_assert_int_eq(stk_h2d_open(l, stk_copy_engine_cpu(), &h), STK_OK);
    collect(h, l, 0, &ref, NULL, 0);
    stk_h2d_close(h);
    stk_loader_close(l);
    const stk_copy_engine *ce;
    ck_assert_int_eq(stk_copy_engine_cuda(&ce), STK_OK); /* the context: pinned rings from now */
    ck_assert(!ce->in_place);
    for (int workers = 1; workers <= 2; workers++) {
        l = open_loader(workers, 2);
        ck_assert_int_eq(stk_h2d_open(l, ce, &h), STK_OK);
        for (uint64_t epoch = 0; epoch < 2; epoch++) {
            collect(h, l, epoch, &got, NULL, 500);
            ck_assert_int_eq(got.n, ref.n);
            check_batches(&got);
            if (epoch == 0)
                for (int k = 0; k < ref.n; k++) {
                    ck_assert_msg(!memcmp(got.px[k], ref.px[k], (size_t)ref.count[k] * 64),
                                  "batch %d differs (workers %d)", k, workers);
                    ck_assert(!memcmp(got.labels[k], ref.labels[k], (size_t)ref.count[k] * 4));
                }
        }
        ck_assert_uint_eq(stk_h2d_copies(h), 2 * 2 * 13);
        stk_h2d_close(h);
        stk_loader_close(l);
    }
    test_tmpdir_remove();
}
END_TEST
#endif

#ifdef STOKE_CUDA_EMULATED
/* release_after: a consumer on its own stream (the Python package's DLPack
 * views) released a device buffer while work reading it is still queued on
 * that stream; the next copy into the buffer must wait for that work. The
 * consumer's stream is held while the copy is started: without the fence
 * the copy overwrites the buffer before the consumer's read runs. */
START_TEST(test_copy_waits_for_a_consumer_stream)
{
    const stk_copy_engine *ce;
    ck_assert_int_eq(stk_copy_engine_cuda(&ce), STK_OK);
    ck_assert_ptr_nonnull(ce->release_after);
    enum { N = 4096 };
    void *dst, *seen;
    ck_assert_int_eq(ce->alloc(ce->ctx, N, &dst), STK_OK);
    ck_assert_int_eq(ce->alloc(ce->ctx, N, &seen), STK_OK);
    static uint8_t old_px[N], new_px[N], back[N];
    memset(old_px, 1, N);
    memset(new_px, 2, N);
    uint64_t t;
    ck_assert_int_eq(ce->copy_async(ce->ctx, dst, old_px, N, &t), STK_OK);
    ck_assert_int_eq(ce->wait(ce->ctx, t), STK_OK);
    cudaStream_t consumer;
    ck_assert_int_eq(cudaStreamCreate(&consumer), cudaSuccess);
    stk_host_cuda_hold(consumer);
    /* the consumer's step reads dst (into seen), queued but not run yet */
    ck_assert_int_eq(cudaMemcpyAsync(seen, dst, N, cudaMemcpyDeviceToDevice, consumer),
                     cudaSuccess);
    ck_assert_int_eq(ce->release_after(ce->ctx, dst, (uintptr_t)consumer), STK_OK);
    ck_assert_int_eq(ce->copy_async(ce->ctx, dst, new_px, N, &t), STK_OK);
    usleep(50 * 1000); /* room for a copy that does not wait */
    stk_host_cuda_release(consumer);
    ck_assert_int_eq(ce->wait(ce->ctx, t), STK_OK);
    ck_assert_int_eq(cudaStreamSynchronize(consumer), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(back, seen, N, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_msg(!memcmp(back, old_px, N),
                  "the copy overwrote the buffer before the consumer read it");
    ck_assert_int_eq(cudaMemcpy(back, dst, N, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert(!memcmp(back, new_px, N));
    /* the legacy default stream's handle (1) is accepted */
    ck_assert_int_eq(ce->release_after(ce->ctx, dst, 1), STK_OK);
    ck_assert_int_eq(ce->copy_async(ce->ctx, dst, old_px, N, &t), STK_OK);
    ck_assert_int_eq(ce->wait(ce->ctx, t), STK_OK);
    ck_assert_int_eq(cudaStreamDestroy(consumer), cudaSuccess);
    ce->free(ce->ctx, dst, N);
    ce->free(ce->ctx, seen, N);
}
END_TEST
#endif

START_TEST(test_h2d_misuse_and_early_close)
{
    test_tmpdir_create("h2d");
    make_raw_dataset(100);
    slow_device dev;
    stk_copy_engine ce;
    slow_start(&dev, &ce, 1000);
    stk_loader *l = open_loader(2, 3);
    stk_h2d *h;
    ck_assert_int_eq(stk_h2d_open(l, &ce, &h), STK_OK);
    ck_assert_int_eq(stk_loader_start_epoch(l, 0), STK_OK);
    stk_device_batch *a, *b;
    ck_assert_int_eq(stk_h2d_next(h, &a), STK_OK);
    ck_assert_int_eq(stk_h2d_next(h, &b), STK_ERR_INVALID_ARG); /* a is still held */
    stk_h2d_release(h, a);
    ck_assert_int_eq(stk_h2d_next(h, &b), STK_OK);
    /* close with a batch held and a copy in flight: everything is joined and freed */
    stk_h2d_close(h);
    stk_loader_close(l);
    slow_stop(&dev);
    test_tmpdir_remove();
}
END_TEST

static Suite *h2d_suite(void)
{
    Suite *s = suite_create("h2d");
    TCase *t = tcase_create("h2d");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_h2d_matches_in_place_and_overlaps);
    tcase_add_test(t, test_h2d_misuse_and_early_close);
#ifdef STOKE_CUDA_EMULATED
    tcase_add_test(t, test_h2d_on_cuda_streams);
    tcase_add_test(t, test_copy_waits_for_a_consumer_stream);
#endif
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return stk_check_run(h2d_suite()); }
