/* The double-buffered host-to-device stage (h2d.h). */
#include "loader/h2d.h"

#include "common/trace.h"

#include <stdlib.h>
#include <string.h>

typedef enum slot_state { SLOT_FREE, SLOT_COPYING, SLOT_HELD } slot_state;

typedef struct slot {
    slot_state state;
    void *data;           /* device buffer */
    int32_t *labels;      /* device labels */
    size_t capacity;      /* bytes of data */
    int label_cap;        /* labels */
    int32_t *host_labels; /* kept: the host batch goes back to the ring before the step */
    stk_batch *host;      /* while copying */
    uint64_t ticket;      /* the copy's last ticket */
    uint64_t first;       /* its first ticket (the pixels; the labels come last) */
    uint64_t order;       /* batches are returned in start order */
    stk_device_batch out;
} slot;

struct stk_h2d {
    stk_loader *loader;
    const stk_copy_engine *ce;
    slot s[2];
    uint64_t started;    /* copies started, for the order of slots */
    bool end;            /* the loader said STK_END (or failed) for this epoch */
    stk_status deferred; /* a look-ahead error, returned after the batches before it */
    stk_batch *held;     /* in place: the loader batch the consumer holds */
    stk_device_batch in_place;
    uint64_t copies;
};

stk_status stk_h2d_open(stk_loader *l, const stk_copy_engine *ce, stk_h2d **out)
{
    stk_h2d *h = calloc(1, sizeof *h);
    if (!h) return stk_error(STK_ERR_NOMEM, "no memory for the host-to-device stage");
    h->loader = l;
    h->ce = ce;
    *out = h;
    return STK_OK;
}

static void describe(stk_device_batch *o, const stk_batch *b)
{
    o->sample_bytes = b->sample_bytes;
    o->count = b->count;
    o->width = b->width;
    o->height = b->height;
    o->channels = b->channels;
    o->format = b->format;
    o->number = b->number;
    o->epoch = b->epoch;
    o->trace_id = b->trace_id;
}

static stk_status ensure_capacity(stk_h2d *h, slot *s, size_t bytes, int labels)
{
    if (bytes > s->capacity) {
        h->ce->free(h->ce->ctx, s->data, s->capacity);
        s->data = NULL;
        s->capacity = 0;
        stk_status st = h->ce->alloc(h->ce->ctx, bytes, &s->data);
        if (st != STK_OK) return stk_error_prefix(st, "device batch buffer of %zu bytes", bytes);
        s->capacity = bytes;
    }
    if (labels > s->label_cap) {
        h->ce->free(h->ce->ctx, s->labels, (size_t)s->label_cap * sizeof(int32_t));
        free(s->host_labels);
        s->labels = NULL;
        s->label_cap = 0;
        s->host_labels = malloc((size_t)labels * sizeof(int32_t));
        stk_status st = s->host_labels ? h->ce->alloc(h->ce->ctx, (size_t)labels * sizeof(int32_t),
                                                      (void **)&s->labels)
                                       : stk_error(STK_ERR_NOMEM, "no memory for batch labels");
        if (st != STK_OK) return st;
        s->label_cap = labels;
    }
    return STK_OK;
}

/* Take the loader's next batch and start copying it into slot s. Returns
 * STK_END (and sets h->end) when the epoch is over. */
static stk_status start_copy(stk_h2d *h, slot *s)
{
    stk_batch *b;
    stk_status st = stk_loader_next(h->loader, &b);
    if (st != STK_OK) {
        h->end = true;
        return st;
    }
    size_t bytes = (size_t)b->count * b->sample_bytes;
    if ((st = ensure_capacity(h, s, bytes, b->count)) != STK_OK) {
        stk_loader_release(h->loader, b);
        return st;
    }
    memcpy(s->host_labels, b->labels, (size_t)b->count * sizeof(int32_t));
    uint64_t t;
    stk_trace_begin("h2d copy", "h2d"); /* issuing the copies; the copy itself: async "h2d" */
    stk_trace_flow('t', b->trace_id);
    stk_trace_async_begin("h2d", "h2d", b->trace_id);
    if ((st = h->ce->copy_async(h->ce->ctx, s->data, b->data, bytes, &s->first)) != STK_OK ||
        (st = h->ce->copy_async(h->ce->ctx, s->labels, b->labels,
                                (size_t)b->count * sizeof(int32_t), &t)) != STK_OK) {
        stk_trace_end();
        stk_loader_release(h->loader, b);
        return st;
    }
    stk_trace_end();
    h->copies += 2;
    s->host = b;
    s->ticket = t;
    s->order = h->started++;
    s->state = SLOT_COPYING;
    describe(&s->out, b);
    s->out.data = s->data;
    s->out.labels = s->labels;
    s->out.host_labels = s->host_labels;
    s->out.device = h->ce->device;
    return STK_OK;
}

/* --trace: the batch's copy as the device timed it, on the copy stream's track. */
static void trace_device_copy(stk_h2d *h, const slot *s)
{
    uint64_t a0, a1, b0, b1;
    if (stk_trace_enabled() && h->ce->copy_times &&
        h->ce->copy_times(h->ce->ctx, s->first, &a0, &a1) &&
        h->ce->copy_times(h->ce->ctx, s->ticket, &b0, &b1))
        stk_trace_track_span("device copy stream", "h2d copy (device)", "h2d", a0, b1,
                             s->out.trace_id);
}

static stk_status next_in_place(stk_h2d *h, stk_device_batch **out)
{
    if (h->held)
        return stk_error(STK_ERR_INVALID_ARG, "h2d: release the previous batch before the next");
    stk_batch *b;
    stk_status st = stk_loader_next(h->loader, &b);
    if (st != STK_OK) return st;
    h->held = b;
    describe(&h->in_place, b);
    h->in_place.data = b->data;
    h->in_place.labels = b->labels;
    h->in_place.host_labels = b->labels;
    h->in_place.device = h->ce->device;
    *out = &h->in_place;
    return STK_OK;
}

stk_status stk_h2d_next(stk_h2d *h, stk_device_batch **out)
{
    *out = NULL;
    if (h->ce->in_place) return next_in_place(h, out);
    if (h->s[0].state == SLOT_HELD || h->s[1].state == SLOT_HELD)
        return stk_error(STK_ERR_INVALID_ARG, "h2d: release the previous batch before the next");
    /* the batch to return: the earliest copy in flight, or a new one */
    slot *head = NULL;
    for (int i = 0; i < 2; i++)
        if (h->s[i].state == SLOT_COPYING && (!head || h->s[i].order < head->order))
            head = &h->s[i];
    stk_status st;
    if (!head) {
        if (h->deferred != STK_OK) {
            st = h->deferred;
            h->deferred = STK_OK;
            return st;
        }
        if (h->end) return STK_END;
        head = &h->s[0];
        if ((st = start_copy(h, head)) != STK_OK) return st;
    }
    /* look ahead: the next batch's copy overlaps the consumer's step on this one */
    slot *other = head == &h->s[0] ? &h->s[1] : &h->s[0];
    if (other->state == SLOT_FREE && !h->end) {
        st = start_copy(h, other);
        if (st != STK_OK && st != STK_END) h->deferred = st; /* after this batch */
    }
    stk_trace_begin("h2d wait", "h2d");
    st = h->ce->wait(h->ce->ctx, head->ticket);
    stk_trace_end();
    stk_trace_async_end("h2d", "h2d", head->out.trace_id); /* seen complete (an upper bound) */
    if (st != STK_OK) return st;
    trace_device_copy(h, head);
    /* the copy has completed: only now may the pinned buffer be reused */
    stk_loader_release(h->loader, head->host);
    head->host = NULL;
    head->state = SLOT_HELD;
    *out = &head->out;
    return STK_OK;
}

void stk_h2d_release(stk_h2d *h, stk_device_batch *b)
{
    if (!b) return;
    if (h->ce->in_place) {
        if (h->held) stk_loader_release(h->loader, h->held);
        h->held = NULL;
        return;
    }
    for (int i = 0; i < 2; i++)
        if (b == &h->s[i].out && h->s[i].state == SLOT_HELD) h->s[i].state = SLOT_FREE;
}

stk_status stk_h2d_drain(stk_h2d *h)
{
    stk_status st = STK_OK;
    for (int i = 0; i < 2; i++) {
        slot *s = &h->s[i];
        if (s->state != SLOT_COPYING) continue;
        stk_status w = h->ce->wait(h->ce->ctx, s->ticket);
        stk_trace_async_end("h2d", "h2d", s->out.trace_id);
        if (w != STK_OK && st == STK_OK) st = w;
        stk_loader_release(h->loader, s->host);
        s->host = NULL;
        s->state = SLOT_FREE;
    }
    h->end = false;
    h->deferred = STK_OK;
    return st;
}

uint64_t stk_h2d_copies(const stk_h2d *h) { return h->copies; }

void stk_h2d_close(stk_h2d *h)
{
    if (!h) return;
    stk_h2d_drain(h);
    if (h->held) stk_loader_release(h->loader, h->held);
    for (int i = 0; i < 2; i++) {
        slot *s = &h->s[i];
        if (h->ce->free) {
            h->ce->free(h->ce->ctx, s->data, s->capacity);
            h->ce->free(h->ce->ctx, s->labels, (size_t)s->label_cap * sizeof(int32_t));
        }
        free(s->host_labels);
    }
    free(h);
}
