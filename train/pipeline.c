/* Micro-batches and pipeline stages over a model's units (pipeline.h). */
#include "train/pipeline.h"

#include "common/clock.h"
#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/onnx_graph.h"
#include "kernels/backend.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a stage holds for one micro-batch between its forward and backward. */
typedef struct held {
    stk_tensor *in;  /* stages > 0: the received activation (a leaf with grad) */
    stk_tensor *out; /* the stage's output, or the last stage's weighted loss */
} held;

struct stk_pipeline {
    stk_model *model;
    stk_pipeline_config cfg;
    int first[STK_PIPE_MAX_STAGES + 1]; /* stage s: units [first[s], first[s + 1]) */
    bool split;                         /* first[] known */
    stk_pipe_runner *runner;            /* K > 1 */
    int threads_per_stage;
    held *held; /* [K * M] */
    int held_cap;
    stk_pipe_link link; /* link.send NULL: every stage in this process */
    struct pending_send {
        void *req;        /* the link's */
        stk_tensor *keep; /* what it reads, held until it is done */
        void *mem;
    } * pending; /* sends started this step */
    int n_pending, pending_cap;
};

/* One step's inputs and results, shared by the stage threads. */
typedef struct step_ctx {
    stk_pipeline *p;
    stk_tensor **x, **labels; /* [M] micro-batch views */
    int64_t *count;           /* [M] */
    int64_t n;
    float smoothing, loss_scale;
    uint64_t forward_id;
    double *loss_part;   /* [M] */
    stk_tensor **logits; /* [M], detached */
} step_ctx;

static void stage_thread_init(void *ctx, int stage)
{
    (void)stage;
    stk_pipeline *p = ctx;
    stk_cpu_set_threads(p->threads_per_stage);
    /* the autocast depth is per thread: the stage threads hold theirs for life */
    if (p->cfg.autocast) stk_autocast_begin();
}

static int unit_named(const stk_model *m, const char *name, size_t len)
{
    for (int i = 0; i < stk_model_unit_count(m); i++) {
        const char *u = stk_model_unit_name(m, i);
        if (strlen(u) == len && !strncmp(u, name, len)) return i;
    }
    /* a container: its last unit ("layer2" -> "layer2.1") */
    int last = -1;
    for (int i = 0; i < stk_model_unit_count(m); i++) {
        const char *u = stk_model_unit_name(m, i);
        if (!strncmp(u, name, len) && u[len] == '.') last = i;
    }
    return last;
}

static stk_status units_error(const stk_model *m, const char *what)
{
    char list[1024];
    size_t n = 0;
    list[0] = '\0';
    for (int i = 0; i < stk_model_unit_count(m) && n + 2 < sizeof list; i++) {
        int k =
            snprintf(list + n, sizeof list - n, "%s%s", i ? " " : "", stk_model_unit_name(m, i));
        if (k < 0 || (size_t)k >= sizeof list - n) break;
        n += (size_t)k;
    }
    return stk_error(STK_ERR_INVALID_ARG, "--split-after %s (the %s units: %s)", what,
                     stk_model_name(m), list);
}

static stk_status split_named(stk_pipeline *p)
{
    const stk_model *m = p->model;
    int k = p->cfg.stages, cut = 0;
    const char *s = p->cfg.split_after;
    p->first[0] = 0;
    while (*s) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(len < 127 ? len : 127), s);
        int u = unit_named(m, s, len);
        if (u < 0) return units_error(m, name);
        if (cut + 1 >= k) return units_error(m, "names more cuts than --pipeline allows");
        if (u + 1 <= p->first[cut] || u + 1 >= stk_model_unit_count(m))
            return units_error(m, "cuts must be in order and leave every stage a unit");
        p->first[++cut] = u + 1;
        s = e ? e + 1 : s + len;
    }
    if (cut != k - 1) {
        char why[96];
        snprintf(why, sizeof why, "names %d cuts; %d stages need %d", cut, k, k - 1);
        return units_error(m, why);
    }
    p->first[k] = stk_model_unit_count(m);
    p->split = true;
    return STK_OK;
}

/* Contiguous runs of units minimising the largest run's cost (dynamic
 * programming over the cut positions). */
static void split_balanced(stk_pipeline *p, const double *cost)
{
    int n = stk_model_unit_count(p->model), k = p->cfg.stages;
    double prefix[1025] = {0};
    for (int i = 0; i < n && i < 1024; i++) prefix[i + 1] = prefix[i] + cost[i];
    /* best[s][i]: the largest stage cost splitting units [0, i) into s stages */
    static _Thread_local double best[STK_PIPE_MAX_STAGES + 1][1025];
    static _Thread_local int from[STK_PIPE_MAX_STAGES + 1][1025];
    for (int i = 0; i <= n; i++) best[1][i] = i ? prefix[i] : DBL_MAX;
    for (int s = 2; s <= k; s++)
        for (int i = 0; i <= n; i++) {
            best[s][i] = DBL_MAX;
            for (int j = s - 1; j < i; j++) {
                double c =
                    best[s - 1][j] > prefix[i] - prefix[j] ? best[s - 1][j] : prefix[i] - prefix[j];
                if (c < best[s][i]) best[s][i] = c, from[s][i] = j;
            }
        }
    p->first[k] = n;
    for (int s = k, i = n; s > 1; s--) i = p->first[s - 1] = from[s][i];
    p->first[0] = 0;
    p->split = true;
}

/* Each unit's forward time on x (eval mode, no gradients: nothing changes),
 * the second of two runs (the first makes oneDNN's primitives). */
static stk_status measure_units(stk_pipeline *p, stk_tensor *x, double *cost)
{
    stk_model *m = p->model;
    bool training = stk_model_is_training(m);
    stk_model_train(m, false);
    stk_no_grad_begin();
    stk_scope *sc;
    stk_status st = stk_scope_begin(&sc);
    for (int run = 0; run < 2 && st == STK_OK; run++) {
        stk_tensor *h = x;
        for (int u = 0; u < stk_model_unit_count(m) && st == STK_OK; u++) {
            double t = stk_clock_sec();
            st = stk_model_forward_units(m, u, u + 1, 0, h, &h);
            cost[u] = stk_clock_sec() - t;
        }
    }
    if (sc) stk_scope_end(sc);
    stk_no_grad_end();
    stk_model_train(m, training);
    return st;
}

stk_status stk_pipeline_create(stk_model *m, const stk_pipeline_config *c, stk_pipeline **out)
{
    *out = NULL;
    int units = stk_model_unit_count(m);
    if (c->stages < 1 || c->stages > STK_PIPE_MAX_STAGES)
        return stk_error(STK_ERR_INVALID_ARG, "--pipeline %d: 1..%d stages", c->stages,
                         STK_PIPE_MAX_STAGES);
    if (c->micro_batches < 1 || c->micro_batches > STK_PIPE_MAX_MICRO)
        return stk_error(STK_ERR_INVALID_ARG, "--micro-batches %d: 1..%d", c->micro_batches,
                         STK_PIPE_MAX_MICRO);
    const void *file;
    size_t file_len;
    if (c->stages > units || units > 1024)
        return stk_error(STK_ERR_INVALID_ARG, "--pipeline %d: %s has %d units to split%s",
                         c->stages, stk_model_name(m), units,
                         stk_model_onnx_file(m, &file, &file_len)
                             ? " (a graph imported from ONNX is cut only where one tensor alone "
                               "flows from its nodes before to those after, no weight read on "
                               "both sides)"
                             : "");
    stk_pipeline *p = calloc(1, sizeof *p);
    if (!p) return stk_error(STK_ERR_NOMEM, "pipeline: out of memory");
    p->model = m;
    p->cfg = *c;
    p->cfg.split_after = NULL;
    int threads = c->threads > 0 ? c->threads : stk_cpu_threads();
    p->threads_per_stage = threads / c->stages > 1 ? threads / c->stages : 1;
    stk_status st = STK_OK;
    if (c->link) {
        p->link = *c->link;
        p->cfg.link = NULL;
        if (p->link.stage < 0 || p->link.stage >= c->stages || !c->split_after)
            st = stk_error(STK_ERR_INVALID_ARG,
                           "pipeline stages in other processes: stage %d of %d; the cuts must "
                           "be named (--split-after)",
                           p->link.stage, c->stages);
    }
    if (st != STK_OK) {
    } else if (c->stages == 1) {
        p->first[0] = 0, p->first[1] = units, p->split = true;
    } else if (c->split_after) {
        p->cfg.split_after = c->split_after;
        st = split_named(p);
        p->cfg.split_after = NULL; /* the caller's string is not kept */
    }
    if (st == STK_OK && c->stages > 1 && !p->link.send)
        st = stk_pipe_runner_create(c->stages, stage_thread_init, p, &p->runner);
    if (st != STK_OK) {
        stk_pipeline_destroy(p);
        return st;
    }
    *out = p;
    return STK_OK;
}

static void release_held(stk_pipeline *p)
{
    for (int i = 0; i < p->held_cap; i++) {
        stk_tensor_release(p->held[i].in);
        stk_tensor_release(p->held[i].out);
        p->held[i] = (held){0};
    }
}

void stk_pipeline_destroy(stk_pipeline *p)
{
    if (!p) return;
    stk_pipe_runner_destroy(p->runner);
    release_held(p);
    free(p->held);
    free(p->pending);
    free(p);
}

bool stk_pipeline_owns_param(const stk_pipeline *p, int i)
{
    if (!p->link.send || !p->split) return true;
    int u = stk_model_param_unit(p->model, i);
    return u >= p->first[p->link.stage] && u < p->first[p->link.stage + 1];
}

int stk_pipeline_stage_first(const stk_pipeline *p, int s)
{
    return p->split && s >= 0 && s <= p->cfg.stages ? p->first[s] : -1;
}

const char *stk_pipeline_describe(const stk_pipeline *p, char *buf, size_t n)
{
    if (!p->split) {
        snprintf(buf, n, "stages balanced at the first step");
        return buf;
    }
    size_t used = 0;
    buf[0] = '\0';
    for (int s = 0; s < p->cfg.stages && used < n; s++) {
        int a = p->first[s], b = p->first[s + 1];
        int k =
            snprintf(buf + used, n - used, "%sstage %d: %s .. %s (%d units)", s ? ", " : "", s,
                     stk_model_unit_name(p->model, a), stk_model_unit_name(p->model, b - 1), b - a);
        if (k < 0) break;
        used += (size_t)k;
    }
    return buf;
}

/* Tags of a link's messages: a micro-batch's activation or gradient as a
 * header then its floats; the step's loss and logits at the end. */
enum { TAG_LOSS = 30000, TAG_LOGITS_HEAD = 30001, TAG_LOGITS = 30002 };
static int tag_of(int micro, bool backward, bool data)
{
    return ((micro * 2 + backward) * 2) + data;
}

/* Start a send of buf (kept alive by keep or mem, which the pipeline then
 * owns: released once the send is done). */
static stk_status start_send(stk_pipeline *p, int to, int tag, const void *buf, size_t bytes,
                             stk_tensor *keep, void *mem)
{
    if (p->n_pending == p->pending_cap) {
        int cap = p->pending_cap ? 2 * p->pending_cap : 16;
        struct pending_send *n = realloc(p->pending, (size_t)cap * sizeof *n);
        if (!n) {
            stk_tensor_release(keep);
            free(mem);
            return stk_error(STK_ERR_NOMEM, "pipeline: out of memory");
        }
        p->pending = n, p->pending_cap = cap;
    }
    void *req = NULL;
    stk_status st = p->link.send(p->link.ctx, to, tag, buf, bytes, &req);
    p->pending[p->n_pending++] = (struct pending_send){req, keep, mem};
    return st;
}

/* Wait for every send started (also after an error), and let go of their data. */
static stk_status finish_sends(stk_pipeline *p)
{
    stk_status st = STK_OK;
    for (int i = 0; i < p->n_pending; i++) {
        stk_status w = p->link.wait(p->link.ctx, p->pending[i].req);
        if (st == STK_OK) st = w;
        stk_tensor_release(p->pending[i].keep);
        free(p->pending[i].mem);
    }
    p->n_pending = 0;
    return st;
}

/* t (CPU, f32) to stage `to` of a linked pipeline: [ndim, shape...] then the floats. */
static stk_status link_send(stk_pipeline *p, int to, int head_tag, int data_tag, stk_tensor *t)
{
    int64_t *head = calloc(1 + STK_MAX_DIMS, sizeof *head);
    if (!head) return stk_error(STK_ERR_NOMEM, "pipeline: out of memory");
    head[0] = stk_tensor_ndim(t);
    for (int d = 0; d < stk_tensor_ndim(t); d++) head[1 + d] = stk_tensor_dim(t, d);
    STK_TRY(start_send(p, to, head_tag, head, (1 + STK_MAX_DIMS) * sizeof *head, NULL, head));
    size_t bytes = (size_t)stk_tensor_numel(t) * sizeof(float);
    if (stk_tensor_is_contiguous(t) && stk_tensor_data(t)) {
        stk_tensor_retain(t);
        return start_send(p, to, data_tag, stk_tensor_data(t), bytes, t, NULL);
    }
    float *h = malloc(bytes ? bytes : 1);
    if (!h) return stk_error(STK_ERR_NOMEM, "pipeline: out of memory");
    stk_status st = stk_tensor_to_host(t, h, bytes);
    if (st != STK_OK) {
        free(h);
        return st;
    }
    return start_send(p, to, data_tag, h, bytes, NULL, h);
}

/* The tensor link_send sent, as a new tensor owned by the caller. */
static stk_status link_recv(stk_pipeline *p, int from, int head_tag, int data_tag, stk_tensor **out)
{
    int64_t head[1 + STK_MAX_DIMS];
    STK_TRY(p->link.recv(p->link.ctx, from, head_tag, head, sizeof head));
    if (head[0] < 1 || head[0] > STK_MAX_DIMS)
        return stk_error(STK_ERR_CORRUPT, "pipeline: stage %d sent a tensor of %lld dimensions",
                         from, (long long)head[0]);
    stk_scope *sc;
    STK_TRY(stk_scope_begin(&sc));
    stk_status st = stk_tensor_zeros(STK_F32, (int)head[0], head + 1, out);
    if (st == STK_OK) {
        stk_tensor_retain(*out);
        st = p->link.recv(p->link.ctx, from, data_tag, stk_tensor_data(*out),
                          (size_t)stk_tensor_numel(*out) * sizeof(float));
        if (st != STK_OK) stk_tensor_release(*out);
    }
    stk_scope_end(sc);
    return st;
}

/* A copy of t that outlives the current scope (owned by the caller). */
static stk_status kept_copy(const stk_tensor *t, stk_tensor **out)
{
    stk_scope *sc;
    STK_TRY(stk_scope_begin(&sc));
    stk_status st = stk_tensor_to_device(t, stk_tensor_device(t), out);
    if (st == STK_OK) stk_tensor_retain(*out);
    stk_scope_end(sc);
    return st;
}

static stk_status forward_op(step_ctx *c, stk_pipe_runner *r, int s, int i, held *h)
{
    stk_pipeline *p = c->p;
    bool last = s == p->cfg.stages - 1;
    stk_tensor *in = c->x[i];
    if (s > 0) {
        void *payload;
        if (p->link.send)
            STK_TRY(link_recv(p, s - 1, tag_of(i, false, false), tag_of(i, false, true),
                              (stk_tensor **)&payload));
        else
            STK_TRY(stk_pipe_recv(r, s, i, false, &payload));
        h->in = in = payload;
        stk_tensor_set_requires_grad(in, true);
    }
    stk_tensor *y, *l, *lw;
    STK_TRY(stk_model_forward_units(p->model, p->first[s], p->first[s + 1],
                                    c->forward_id * STK_PIPE_MAX_MICRO + (uint64_t)i, in, &y));
    if (last) {
        double share = (double)c->count[i] / (double)c->n;
        STK_TRY(stk_cross_entropy(y, c->labels[i], c->smoothing, &l));
        c->loss_part[i] = stk_tensor_item(l) * share;
        STK_TRY(stk_mul_scalar(l, (float)(share * c->loss_scale), &lw));
        stk_tensor_retain(lw); /* kept until the backward */
        h->out = lw;
        return kept_copy(y, &c->logits[i]);
    }
    stk_tensor_retain(y);
    h->out = y;
    if (p->link.send)
        return link_send(p, s + 1, tag_of(i, false, false), tag_of(i, false, true), y);
    stk_tensor *copy;
    STK_TRY(kept_copy(y, &copy));
    return stk_pipe_send(r, s, i, false, copy);
}

static stk_status backward_op(step_ctx *c, stk_pipe_runner *r, int s, int i, held *h)
{
    stk_pipeline *p = c->p;
    bool last = s == p->cfg.stages - 1;
    stk_tensor *g = NULL;
    if (!last) {
        void *payload;
        if (p->link.send)
            STK_TRY(link_recv(p, s + 1, tag_of(i, true, false), tag_of(i, true, true),
                              (stk_tensor **)&payload));
        else
            STK_TRY(stk_pipe_recv(r, s, i, true, &payload));
        g = payload;
    }
    /* A first stage with nothing to train (frozen layers, or units without
     * parameters such as mlp's flatten) made an output that needs no
     * gradient: its backward has nothing to do, and no stage before it
     * waits for one. */
    bool nothing = s == 0 && !stk_tensor_requires_grad(h->out);
    stk_status st = nothing ? STK_OK : stk_backward(h->out, g, false);
    stk_tensor_release(g);
    stk_tensor_release(h->out);
    h->out = NULL;
    if (st == STK_OK && s > 0) {
        stk_tensor *gi;
        if (!stk_tensor_grad(h->in))
            st = stk_error(STK_ERR_INTERNAL, "no gradient reached the stage's input");
        else if (p->link.send)
            st = link_send(p, s - 1, tag_of(i, true, false), tag_of(i, true, true),
                           stk_tensor_grad(h->in));
        else if ((st = kept_copy(stk_tensor_grad(h->in), &gi)) == STK_OK)
            st = stk_pipe_send(r, s, i, true, gi);
    }
    stk_tensor_release(h->in);
    h->in = NULL;
    return st;
}

/* Each op in a scope of its own, on whichever thread: what it keeps (held,
 * payloads, logits) it retains; the rest goes at its end. */
static stk_status stage_op(void *ctx, stk_pipe_runner *r, int stage, int micro, bool backward)
{
    step_ctx *c = ctx;
    held *h = &c->p->held[stage * c->p->cfg.micro_batches + micro];
    stk_scope *sc;
    STK_TRY(stk_scope_begin(&sc));
    stk_status st =
        backward ? backward_op(c, r, stage, micro, h) : forward_op(c, r, stage, micro, h);
    stk_scope_end(sc);
    return st;
}

static void drop_payload(void *payload) { stk_tensor_release(payload); }

/* Linked: this process's stage in its schedule's order, then the last
 * stage's loss and logits to the others, zero gradients for the others'
 * parameters. */
static stk_status linked_step(stk_pipeline *p, step_ctx *c, stk_pipe_stats *stats)
{
    int m = p->cfg.micro_batches, k = p->cfg.stages, s = p->link.stage, *ops;
    if (!(ops = malloc((size_t)(2 * m) * sizeof *ops)))
        return stk_error(STK_ERR_NOMEM, "pipeline: out of memory");
    stk_pipe_schedule_ops(p->cfg.schedule, k, m, s, ops);
    double t0 = stk_clock_sec();
    int in_flight = 0;
    stk_status st = STK_OK;
    *stats = (stk_pipe_stats){.stages = k, .micro_batches = m};
    for (int i = 0; i < 2 * m && st == STK_OK; i++) {
        bool backward = ops[i] >= m;
        st = stage_op(c, NULL, s, backward ? ops[i] - m : ops[i], backward);
        in_flight += backward ? -1 : 1;
        if (in_flight > stats->max_in_flight[s]) stats->max_in_flight[s] = in_flight;
        bool sends = backward ? s > 0 : s < k - 1;
        if (st == STK_OK && sends) stats->transfers++;
    }
    free(ops);
    if (st == STK_OK && s == k - 1) { /* the loss and the logits, to every other stage */
        double *loss = calloc(1, sizeof *loss);
        for (int i = 0; loss && i < m; i++) *loss += c->loss_part[i];
        stk_tensor *all = NULL;
        stk_scope *sc;
        if (!loss)
            st = stk_error(STK_ERR_NOMEM, "pipeline: out of memory");
        else if ((st = stk_scope_begin(&sc)) == STK_OK) {
            st = stk_cat(m, c->logits, 0, &all);
            for (int to = 0; to < k - 1 && st == STK_OK; to++)
                if ((st = start_send(p, to, TAG_LOSS, loss, sizeof *loss, NULL, NULL)) == STK_OK)
                    st = link_send(p, to, TAG_LOGITS_HEAD, TAG_LOGITS, all);
            stk_scope_end(sc);
        }
        stk_status w = finish_sends(p); /* (before loss goes) */
        if (st == STK_OK) st = w;
        free(loss);
    } else if (st == STK_OK) { /* the logits arrive whole: micro-batch 0 holds them */
        double loss;
        if ((st = p->link.recv(p->link.ctx, k - 1, TAG_LOSS, &loss, sizeof loss)) == STK_OK)
            st = link_recv(p, k - 1, TAG_LOGITS_HEAD, TAG_LOGITS, &c->logits[0]);
        c->loss_part[0] = loss;
        for (int i = 1; i < m; i++) c->loss_part[i] = 0;
    }
    stk_status w = finish_sends(p);
    if (st == STK_OK) st = w;
    for (int i = 0; i < stk_model_param_count(p->model) && st == STK_OK; i++)
        if (!stk_pipeline_owns_param(p, i))
            st = stk_tensor_ensure_grad(stk_model_param(p->model, i)->value);
    stats->wall_s = stats->busy_s[s] = stk_clock_sec() - t0;
    return st;
}

/* The micro-batch views of x and the labels (the caller's scope owns them). */
static stk_status micro_views(step_ctx *c, stk_tensor *x, stk_tensor *labels, int m)
{
    int64_t start = 0;
    for (int i = 0; i < m; i++) {
        c->count[i] = c->n / m + (i < c->n % m);
        STK_TRY(stk_narrow(x, 0, start, c->count[i], &c->x[i]));
        STK_TRY(stk_narrow(labels, 0, start, c->count[i], &c->labels[i]));
        start += c->count[i];
    }
    return STK_OK;
}

stk_status stk_pipeline_step(stk_pipeline *p, stk_tensor *x, stk_tensor *labels, float smoothing,
                             float loss_scale, uint64_t forward_id, float *loss,
                             stk_tensor **logits, stk_pipe_stats *stats)
{
    int m = p->cfg.micro_batches, k = p->cfg.stages;
    int64_t n = stk_tensor_ndim(x) ? stk_tensor_dim(x, 0) : 0;
    if (n < m)
        return stk_error(STK_ERR_INVALID_ARG,
                         "a batch of %lld cannot be split into %d micro-batches (--micro-batches)",
                         (long long)n, m);
    if (p->held_cap < k * m) {
        held *h = realloc(p->held, (size_t)(k * m) * sizeof *h);
        if (!h) return stk_error(STK_ERR_NOMEM, "pipeline: out of memory");
        memset(h + p->held_cap, 0, (size_t)(k * m - p->held_cap) * sizeof *h);
        p->held = h;
        p->held_cap = k * m;
    }
    stk_scope *sc;
    STK_TRY(stk_scope_begin(&sc)); /* the micro-batch views */
    step_ctx c = {
        .p = p, .n = n, .smoothing = smoothing, .loss_scale = loss_scale, .forward_id = forward_id};
    c.x = calloc((size_t)m, sizeof *c.x);
    c.labels = calloc((size_t)m, sizeof *c.labels);
    c.count = calloc((size_t)m, sizeof *c.count);
    c.loss_part = calloc((size_t)m, sizeof *c.loss_part);
    c.logits = calloc((size_t)m, sizeof *c.logits);
    stk_status st = c.x && c.labels && c.count && c.loss_part && c.logits
                        ? STK_OK
                        : stk_error(STK_ERR_NOMEM, "pipeline: out of memory");
    if (st == STK_OK) st = micro_views(&c, x, labels, m);
    if (st == STK_OK && !p->split) {
        double cost[1024];
        if ((st = measure_units(p, c.x[0], cost)) == STK_OK) split_balanced(p, cost);
    }
    stk_pipe_stats local = {0};
    if (st == STK_OK && p->link.send) {
        c.loss_scale *= (float)k; /* see pipeline.h: the all-reduce's sum / world */
        st = linked_step(p, &c, &local);
    } else if (st == STK_OK && k == 1) { /* accumulation: each micro-batch forward then backward */
        double t0 = stk_clock_sec();
        for (int i = 0; i < m && st == STK_OK; i++) {
            if ((st = stage_op(&c, NULL, 0, i, false)) == STK_OK)
                st = stage_op(&c, NULL, 0, i, true);
        }
        local = (stk_pipe_stats){.stages = 1, .micro_batches = m, .max_in_flight = {1}};
        local.wall_s = local.busy_s[0] = stk_clock_sec() - t0;
    } else if (st == STK_OK) {
        st = stk_pipe_runner_run(p->runner, m, p->cfg.schedule, stage_op, &c, drop_payload, &local);
    }
    release_held(p); /* (only a failed step leaves any) */
    if (st == STK_OK) {
        double sum = 0;
        for (int i = 0; i < m; i++) sum += c.loss_part[i];
        *loss = (float)sum;
        int parts = p->link.send && p->link.stage < k - 1 ? 1 : m; /* (linked: whole) */
        if ((st = stk_cat(parts, c.logits, 0, logits)) == STK_OK) stk_tensor_retain(*logits);
    }
    stk_scope_end(sc);
    if (stats) *stats = local;
    for (int i = 0; c.logits && i < m; i++) stk_tensor_release(c.logits[i]);
    free(c.x), free(c.labels), free(c.count), free(c.loss_part), free(c.logits);
    return st;
}
