/* The Python package's ring of device buffers (device_ring.h). */
#include "device_ring.h"

#include "common/log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct slot {
    void *images;
    int64_t *labels;               /* int64: PyTorch's label type (the loader's are int32) */
    size_t images_cap, labels_cap; /* bytes allocated */
    bool held;
} slot;

struct stoke_device_ring {
    const stk_copy_engine *ce;
    pthread_mutex_t mu; /* `held`: fill and release run on different threads */
    int64_t *staging;   /* the batch's labels widened to int64 (fill: one thread) */
    size_t staging_cap; /* labels it holds */
    int n;
    slot s[];
};

stk_status stoke_device_ring_create(const stk_copy_engine *ce, int slots, stoke_device_ring **out)
{
    *out = NULL;
    stoke_device_ring *r = calloc(1, sizeof *r + (size_t)slots * sizeof(slot));
    if (!r) return stk_error(STK_ERR_NOMEM, "out of memory");
    r->ce = ce;
    r->n = slots;
    pthread_mutex_init(&r->mu, NULL);
    *out = r;
    return STK_OK;
}

/* A free slot, marked held; -1 when every slot is held. */
static int take_free(stoke_device_ring *r)
{
    int k = -1;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n && k < 0; i++)
        if (!r->s[i].held) k = i;
    if (k >= 0) r->s[k].held = true;
    pthread_mutex_unlock(&r->mu);
    return k;
}

static void put_back(stoke_device_ring *r, int k)
{
    pthread_mutex_lock(&r->mu);
    r->s[k].held = false;
    pthread_mutex_unlock(&r->mu);
}

/* At least `bytes` of device memory at *p (a free slot's: nothing reads it). */
static stk_status ensure(const stk_copy_engine *ce, void **p, size_t *cap, size_t bytes)
{
    if (*cap >= bytes) return STK_OK;
    if (*p) ce->free(ce->ctx, *p, *cap);
    *p = NULL;
    *cap = 0;
    STK_TRY(ce->alloc(ce->ctx, bytes, p));
    *cap = bytes;
    return STK_OK;
}

stk_status stoke_device_ring_fill(stoke_device_ring *r, const stk_batch *b, int *out)
{
    int k = take_free(r);
    if (k < 0)
        return stk_error(STK_ERR_INVALID_ARG, "all %d device buffers are held by earlier batches",
                         r->n);
    slot *s = &r->s[k];
    const stk_copy_engine *ce = r->ce;
    size_t px = (size_t)b->count * b->sample_bytes, lb = (size_t)b->count * sizeof(int64_t);
    uint64_t t1, t2;
    if (r->staging_cap < (size_t)b->count) {
        int64_t *g = realloc(r->staging, lb ? lb : 1);
        if (!g) {
            put_back(r, k);
            return stk_error(STK_ERR_NOMEM, "out of memory");
        }
        r->staging = g, r->staging_cap = (size_t)b->count;
    }
    for (int i = 0; i < b->count; i++) r->staging[i] = b->labels[i];
    stk_status st = ensure(ce, &s->images, &s->images_cap, px);
    if (st == STK_OK) st = ensure(ce, (void **)&s->labels, &s->labels_cap, lb);
    if (st == STK_OK) st = ce->copy_async(ce->ctx, s->images, b->data, px, &t1);
    if (st == STK_OK) st = ce->copy_async(ce->ctx, s->labels, r->staging, lb, &t2);
    if (st == STK_OK) st = ce->wait(ce->ctx, t2); /* copies complete in order: both are done */
    if (st != STK_OK) {
        put_back(r, k);
        return st;
    }
    *out = k;
    return STK_OK;
}

void *stoke_device_ring_images(const stoke_device_ring *r, int k) { return r->s[k].images; }
int64_t *stoke_device_ring_labels(const stoke_device_ring *r, int k) { return r->s[k].labels; }

void stoke_device_ring_release(stoke_device_ring *r, int k, uintptr_t stream)
{
    slot *s = &r->s[k];
    if (r->ce->release_after) {
        /* a failure here (the device is gone) is reported by the next copy */
        if (r->ce->release_after(r->ce->ctx, s->images, stream) != STK_OK ||
            r->ce->release_after(r->ce->ctx, s->labels, stream) != STK_OK)
            stk_log_warn("releasing a device batch: %s", stk_last_error());
    }
    put_back(r, k);
}

void stoke_device_ring_destroy(stoke_device_ring *r)
{
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        if (r->s[i].images) r->ce->free(r->ce->ctx, r->s[i].images, r->s[i].images_cap);
        if (r->s[i].labels) r->ce->free(r->ce->ctx, r->s[i].labels, r->s[i].labels_cap);
    }
    pthread_mutex_destroy(&r->mu);
    free(r->staging);
    free(r);
}
