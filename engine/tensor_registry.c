/* The engine's live storages, so that an out-of-memory error can say which
 * tensors hold the device's memory and which ops made them (as PyTorch's
 * memory snapshot does). One list per device under one lock: an add and a
 * remove per tensor allocation, next to a device allocation's own lock. */
#include "engine/tensor.h"
#include "engine/tensor_impl.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define TOP     5
#define MAX_OPS 64 /* op names counted (a model uses a few dozen) */

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static stk_storage *live_head[STK_DEVICE_COUNT];

void eng_live_add(stk_storage *s)
{
    pthread_mutex_lock(&live_lock);
    s->live_prev = NULL;
    s->live_next = live_head[s->device];
    if (s->live_next) s->live_next->live_prev = s;
    live_head[s->device] = s;
    pthread_mutex_unlock(&live_lock);
}

void eng_live_remove(stk_storage *s)
{
    pthread_mutex_lock(&live_lock);
    if (s->live_prev)
        s->live_prev->live_next = s->live_next;
    else if (live_head[s->device] == s)
        live_head[s->device] = s->live_next;
    if (s->live_next) s->live_next->live_prev = s->live_prev;
    s->live_prev = s->live_next = NULL;
    pthread_mutex_unlock(&live_lock);
}

static const char *op_name(const stk_storage *s) { return s->made_by ? s->made_by : "leaf or raw"; }

/* Append to buf[*at..n) like snprintf, never past the end. */
static void put(char *buf, size_t n, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t n, size_t *at, const char *fmt, ...)
{
    if (*at >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *at, n - *at, fmt, ap);
    va_end(ap);
    if (k > 0) *at += (size_t)k < n - *at ? (size_t)k : n - *at - 1;
}

void eng_live_describe(stk_device dev, char *buf, size_t n)
{
    if (!n) return;
    buf[0] = '\0';
    if ((unsigned)dev >= STK_DEVICE_COUNT) return;
    const stk_storage *top[TOP] = {0};
    struct {
        const char *op;
        size_t bytes;
        int count;
    } ops[MAX_OPS] = {{0}};
    int n_ops = 0;
    pthread_mutex_lock(&live_lock);
    for (const stk_storage *s = live_head[dev]; s; s = s->live_next) {
        /* the TOP largest, kept sorted */
        for (int i = 0; i < TOP; i++)
            if (!top[i] || s->bytes > top[i]->bytes) {
                memmove(top + i + 1, top + i, (size_t)(TOP - 1 - i) * sizeof *top);
                top[i] = s;
                break;
            }
        /* bytes per op name */
        int k = 0;
        while (k < n_ops && strcmp(ops[k].op, op_name(s))) k++;
        if (k == n_ops && n_ops < MAX_OPS) ops[n_ops++].op = op_name(s);
        if (k < n_ops) ops[k].bytes += s->bytes, ops[k].count++;
    }
    size_t at = 0;
    for (int i = 0; i < TOP && top[i]; i++) {
        put(buf, n, &at, "%s%.1f MB %s [",
            i ? ", " : "; largest live tensors: ", top[i]->bytes / 1e6, op_name(top[i]));
        for (int d = 0; d < top[i]->ndim; d++)
            put(buf, n, &at, "%s%lld", d ? ", " : "", (long long)top[i]->shape[d]);
        put(buf, n, &at, "] %s", stk_dtype_name(top[i]->dtype));
    }
    for (int i = 0; i < TOP && i < n_ops; i++) { /* the ops holding the most, largest first */
        int best = i;
        for (int j = i + 1; j < n_ops; j++)
            if (ops[j].bytes > ops[best].bytes) best = j;
        typeof(ops[0]) tmp = ops[i];
        ops[i] = ops[best];
        ops[best] = tmp;
        put(buf, n, &at, "%s%s %.1f MB in %d", i ? ", " : "; by op: ", ops[i].op,
            ops[i].bytes / 1e6, ops[i].count);
    }
    pthread_mutex_unlock(&live_lock);
}
