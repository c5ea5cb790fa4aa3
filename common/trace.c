/* The timeline recorder (trace.h): per-thread event buffers, the schedule,
 * and the Chrome trace JSON writer. */
#include "common/trace.h"

#include "common/json.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#ifdef STOKE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

#define BLOCK_EVENTS 4096
#define MAX_EVENTS   (1 << 20) /* per thread */
#define MAX_DEPTH    64
#define ARGS_BYTES   48

int stk_trace_state_;

typedef struct event {
    char ph; /* X, b, e, C, s, t, f */
    const char *name, *cat;
    uint64_t ts, dur; /* ns since the trace's start */
    uint64_t id;
    double value;
    char args[ARGS_BYTES];
} event;

typedef struct block {
    event ev[BLOCK_EVENTS];
    int n;
    struct block *next;
} block;

typedef struct open_span {
    const char *name, *cat;
    uint64_t t0;
    bool record;
    char args[ARGS_BYTES];
} open_span;

/* One per thread that traced; owned by the global list. */
typedef struct tbuf {
    int tid;
    char name[48];
    block *head, *tail;
    uint64_t n, dropped;
    open_span stack[MAX_DEPTH];
    int depth; /* may exceed MAX_DEPTH: those spans are not kept */
    struct tbuf *next;
} tbuf;

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static tbuf *buffers;
static uint64_t generation; /* under list_lock; a new trace gets new buffers */
static stk_trace_options opts;
static int64_t steps_seen; /* stk_trace_step calls since the start */
static uint64_t t_start;
static __thread tbuf *mine;
static __thread char my_name[48]; /* stk_trace_thread_name's */
static __thread uint64_t
    mine_gen; /* the trace `mine` belongs to (never read through a stale mine) */

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static bool recording(void) { return __atomic_load_n(&stk_trace_state_, __ATOMIC_RELAXED) == 2; }

/* This thread's buffer, made on its first event (NULL: no memory). */
static tbuf *my_buffer(void)
{
    uint64_t gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    if (mine && mine_gen == gen) return mine;
    tbuf *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->tid = (int)syscall(SYS_gettid);
    memcpy(b->name, my_name, sizeof b->name);
    pthread_mutex_lock(&list_lock);
    b->next = buffers;
    buffers = b;
    pthread_mutex_unlock(&list_lock);
    mine = b;
    mine_gen = gen;
    return b;
}

static event *push_event(tbuf *b)
{
    if (b->n >= MAX_EVENTS) {
        b->dropped++;
        return NULL;
    }
    if (!b->tail || b->tail->n == BLOCK_EVENTS) {
        block *k = calloc(1, sizeof *k);
        if (!k) {
            b->dropped++;
            return NULL;
        }
        if (b->tail)
            b->tail->next = k;
        else
            b->head = k;
        b->tail = k;
    }
    b->n++;
    return &b->tail->ev[b->tail->n++];
}

static void copy_args(char *dst, const char *args)
{
    if (!args) {
        dst[0] = '\0';
        return;
    }
    size_t n = strlen(args);
    if (n >= ARGS_BYTES) n = ARGS_BYTES - 1;
    memcpy(dst, args, n);
    dst[n] = '\0';
}

stk_status stk_trace_start(const stk_trace_options *o)
{
    if (stk_trace_enabled()) return stk_error(STK_ERR_INVALID_ARG, "trace: already started");
    pthread_mutex_lock(&list_lock);
    opts = *o;
    t_start = now_ns();
    __atomic_store_n(&steps_seen, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&list_lock);
    __atomic_store_n(&stk_trace_state_, o->wait_steps > 0 || o->start_paused ? 1 : 2,
                     __ATOMIC_RELEASE);
    return STK_OK;
}

stk_status stk_trace_parse_schedule(const char *text, stk_trace_options *o)
{
    long long w, n;
    char end;
    if (sscanf(text, "%lld,%lld%c", &w, &n, &end) != 2 || w < 0 || n < 0)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--trace-steps %s: expected WAIT,ACTIVE (two counts >= 0)", text);
    o->wait_steps = w;
    o->active_steps = n;
    return STK_OK;
}

bool stk_trace_active(void) { return stk_trace_enabled(); }

bool stk_trace_ops(void) { return stk_trace_enabled() && opts.ops; }

void stk_trace_step(void)
{
    if (!stk_trace_enabled()) return;
    int64_t step = __atomic_fetch_add(&steps_seen, 1, __ATOMIC_RELAXED);
    bool on = step >= opts.wait_steps &&
              (opts.active_steps == 0 || step < opts.wait_steps + opts.active_steps);
    __atomic_store_n(&stk_trace_state_, on ? 2 : 1, __ATOMIC_RELAXED);
}

#ifdef STOKE_NVTX
void stk_trace_nvtx_push_(const char *name) { nvtxRangePushA(name); }
void stk_trace_nvtx_pop_(void) { nvtxRangePop(); }
#endif

void stk_trace_begin_(const char *name, const char *cat, const char *args)
{
    tbuf *b = my_buffer();
    if (!b) return;
    if (b->depth < MAX_DEPTH) {
        open_span *s = &b->stack[b->depth];
        s->name = name;
        s->cat = cat;
        s->record = recording();
        s->t0 = now_ns();
        if (s->record) copy_args(s->args, args);
    }
    b->depth++;
}

void stk_trace_end_(void)
{
    tbuf *b = my_buffer();
    if (!b || b->depth == 0) return; /* a span begun before the trace started */
    b->depth--;
    if (b->depth >= MAX_DEPTH) return;
    open_span *s = &b->stack[b->depth];
    if (!s->record) return;
    uint64_t t = now_ns();
    event *e = push_event(b);
    if (!e) return;
    *e =
        (event){.ph = 'X', .name = s->name, .cat = s->cat, .ts = s->t0 - t_start, .dur = t - s->t0};
    memcpy(e->args, s->args, ARGS_BYTES);
}

void stk_trace_event_(char ph, const char *name, const char *cat, uint64_t id, double value)
{
    if (!recording()) return;
    tbuf *b = my_buffer();
    event *e = b ? push_event(b) : NULL;
    if (e)
        *e = (event){
            .ph = ph, .name = name, .cat = cat, .ts = now_ns() - t_start, .id = id, .value = value};
}

void stk_trace_thread_name(const char *name)
{
    snprintf(my_name, sizeof my_name, "%s", name);
    if (!stk_trace_enabled()) return;
    tbuf *b = my_buffer();
    if (b) memcpy(b->name, my_name, sizeof b->name);
}

/* Tracks that are not threads get tids from here (far above real ones). */
#define TRACK_TID0 2000000000

void stk_trace_track_span(const char *track, const char *name, const char *cat, uint64_t t0_ns,
                          uint64_t t1_ns, uint64_t flow)
{
    if (!recording() || t1_ns < t0_ns) return;
    pthread_mutex_lock(&list_lock); /* tracks are shared: rare events, one lock */
    tbuf *b = buffers;
    int n_tracks = 0;
    for (; b; b = b->next) {
        if (b->tid >= TRACK_TID0) n_tracks++;
        if (b->tid >= TRACK_TID0 && !strcmp(b->name, track)) break;
    }
    if (!b && (b = calloc(1, sizeof *b))) {
        b->tid = TRACK_TID0 + n_tracks;
        snprintf(b->name, sizeof b->name, "%s", track);
        b->next = buffers;
        buffers = b;
    }
    uint64_t t0 = t0_ns > t_start ? t0_ns - t_start : 0, t1 = t1_ns > t_start ? t1_ns - t_start : 0;
    event *e = b ? push_event(b) : NULL;
    if (e) *e = (event){.ph = 'X', .name = name, .cat = cat, .ts = t0, .dur = t1 - t0};
    if (e && flow && (e = push_event(b)))
        *e = (event){
            .ph = 't', .name = "batch", .cat = "flow", .ts = t0 + (t1 - t0) / 2, .id = flow};
    pthread_mutex_unlock(&list_lock);
}

/* ---- the writer ---- */

/* Flow ids with a start and a finish both recorded (sorted, for bsearch). */
typedef struct id_set {
    uint64_t *ids;
    size_t n;
} id_set;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static bool has(const id_set *s, uint64_t id)
{
    return s->n && bsearch(&id, s->ids, s->n, sizeof id, cmp_u64);
}

/* The ids that occur with phase `a` and with phase `b`: flows ('s', 'f') and
 * async intervals ('b', 'e') cut by the schedule's window are left out. */
static stk_status complete_pairs(char pa, char pb, id_set *out)
{
    size_t n_s = 0, n_f = 0;
    for (tbuf *b = buffers; b; b = b->next)
        for (block *k = b->head; k; k = k->next)
            for (int i = 0; i < k->n; i++) n_s += k->ev[i].ph == pa, n_f += k->ev[i].ph == pb;
    uint64_t *s = malloc((n_s + 1) * sizeof *s), *f = malloc((n_f + 1) * sizeof *f);
    if (!s || !f) {
        free(s);
        free(f);
        return stk_error(STK_ERR_NOMEM, "trace: no memory for the flows");
    }
    size_t i_s = 0, i_f = 0;
    for (tbuf *b = buffers; b; b = b->next)
        for (block *k = b->head; k; k = k->next)
            for (int i = 0; i < k->n; i++) {
                if (k->ev[i].ph == pa) s[i_s++] = k->ev[i].id;
                if (k->ev[i].ph == pb) f[i_f++] = k->ev[i].id;
            }
    qsort(s, n_s, sizeof *s, cmp_u64);
    qsort(f, n_f, sizeof *f, cmp_u64);
    size_t n = 0;
    for (size_t a = 0, c = 0; a < n_s && c < n_f;) {
        if (s[a] < f[c])
            a++;
        else if (s[a] > f[c])
            c++;
        else {
            if (!n || s[n - 1] != s[a]) s[n++] = s[a];
            a++, c++;
        }
    }
    free(f);
    *out = (id_set){s, n};
    return STK_OK;
}

static void write_event(FILE *f, const tbuf *b, const event *e, const id_set *flows,
                        const id_set *asyncs, bool *first)
{
    if ((e->ph == 's' || e->ph == 't' || e->ph == 'f') && !has(flows, e->id)) return;
    if ((e->ph == 'b' || e->ph == 'e') && !has(asyncs, e->id)) return;
    fprintf(f, "%s\n{\"ph\":\"%c\",\"pid\":1,\"tid\":%d,\"ts\":%.3f", *first ? "" : ",", e->ph,
            b->tid, e->ts / 1e3);
    *first = false;
    fputs(",\"name\":", f);
    stk_json_write_string(f, e->name);
    if (e->cat) {
        fputs(",\"cat\":", f);
        stk_json_write_string(f, e->cat);
    }
    switch (e->ph) {
    case 'X':
        fprintf(f, ",\"dur\":%.3f", e->dur / 1e3);
        if (e->args[0]) {
            fputs(",\"args\":{\"info\":", f);
            stk_json_write_string(f, e->args);
            fputc('}', f);
        }
        break;
    case 'b':
    case 'e': fprintf(f, ",\"id\":\"0x%llx\"", (unsigned long long)e->id); break;
    case 'C': fprintf(f, ",\"args\":{\"value\":%.6g}", e->value); break;
    case 'f':
        fputs(",\"bp\":\"e\"", f); /* binds to the enclosing span */
        __attribute__((fallthrough));
    case 's':
    case 't': fprintf(f, ",\"id\":%llu", (unsigned long long)e->id); break;
    }
    fputc('}', f);
}

static void free_buffers(void)
{
    pthread_mutex_lock(&list_lock);
    tbuf *b = buffers;
    buffers = NULL;
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE); /* threads' `mine` is stale now */
    pthread_mutex_unlock(&list_lock);
    while (b) {
        tbuf *next = b->next;
        for (block *k = b->head; k;) {
            block *kn = k->next;
            free(k);
            k = kn;
        }
        free(b);
        b = next;
    }
}

void stk_trace_discard(void)
{
    __atomic_store_n(&stk_trace_state_, 0, __ATOMIC_RELEASE);
    free_buffers();
}

stk_status stk_trace_finish(const char *path, stk_trace_summary *out)
{
    memset(out, 0, sizeof *out);
    __atomic_store_n(&stk_trace_state_, 0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&list_lock);
    id_set flows = {0}, asyncs = {0};
    stk_status st = complete_pairs('s', 'f', &flows);
    if (st == STK_OK) st = complete_pairs('b', 'e', &asyncs);
    FILE *f = st == STK_OK ? fopen(path, "w") : NULL;
    if (st == STK_OK && !f) st = stk_error(STK_ERR_IO, "--trace %s: %s", path, strerror(errno));
    if (f) {
        fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
        bool first = true;
        uint64_t t_end = 0;
        fprintf(
            f,
            "\n{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"stoke\"}}");
        first = false;
        for (tbuf *b = buffers; b; b = b->next) {
            out->threads++;
            out->dropped += b->dropped;
            if (b->name[0]) {
                fprintf(f,
                        ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\",\"args\":{"
                        "\"name\":",
                        b->tid);
                stk_json_write_string(f, b->name);
                fputs("}}", f);
            }
            for (block *k = b->head; k; k = k->next)
                for (int i = 0; i < k->n; i++) {
                    write_event(f, b, &k->ev[i], &flows, &asyncs, &first);
                    out->events++;
                    uint64_t e = k->ev[i].ts + k->ev[i].dur;
                    if (e > t_end) t_end = e;
                }
        }
        fprintf(f, "\n],\"otherData\":{\"dropped_events\":%llu}}\n",
                (unsigned long long)out->dropped);
        out->seconds = t_end / 1e9;
        if (ferror(f) | (fclose(f) != 0))
            st = stk_error(STK_ERR_IO, "--trace %s: write failed: %s", path, strerror(errno));
    }
    free(flows.ids);
    free(asyncs.ids);
    pthread_mutex_unlock(&list_lock);
    free_buffers();
    return st;
}
