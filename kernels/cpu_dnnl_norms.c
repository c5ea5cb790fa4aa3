/* Layer norm, softmax and the erf GELU, SiLU and sigmoid through oneDNN's
 * primitives (layer_normalization, softmax, eltwise), forward and
 * backward, for the CPU backend's entries in cpu_layer_norm.c,
 * cpu_loss_optim.c and cpu_elementwise.c.
 *
 * Why: oneDNN's JIT kernels measured 1.6-8x faster than Stoke's own loops
 * on the shapes of today's models (bench/bench_dnnl_norms.c; the figures
 * in kernels/README.md, "Layer norm, softmax and activations"). Stoke's
 * loops (kernels/norm_math.h, scalar_math.h, shared with the CUDA kernels)
 * stay as the fallback for anything these refuse: each call here returns
 * false when oneDNN cannot run it, and the caller runs its loop.
 *
 * STOKE_CPU_OWN_LOOPS=1 in the environment runs the loops always: the
 * tests run test_ops both ways (ctest's test_ops_own_loops), so the
 * fallback stays checked.
 *
 * Plans (primitive + descriptor) per shape and per thread, as the
 * convolutions' (cpu_dnnl_impl.h: a primitive runs in the thread that
 * made it), at most MAX_PLANS per thread: past that, the loops. */
#include "kernels/cpu_dnnl_impl.h"
#include "kernels/cpu_kernels_impl.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PLANS 256

enum { P_LN_FWD, P_LN_BWD, P_SOFTMAX_FWD, P_SOFTMAX_BWD, P_ELT_FWD, P_ELT_BWD };

typedef struct plan {
    int kind, alg;
    int64_t rows, cols;
    float eps;
    dnnl_primitive_t prim;
    dnnl_primitive_desc_t fwd_pd; /* forward plans: the backward's hint */
    struct plan *next;
} plan;

static _Thread_local plan *plans;
static _Thread_local int n_plans;
static _Thread_local bool gave_up; /* MAX_PLANS reached */

static void free_thread_plans(void)
{
    while (plans) {
        plan *p = plans;
        plans = p->next;
        if (p->prim) dnnl_primitive_destroy(p->prim);
        if (p->fwd_pd) dnnl_primitive_desc_destroy(p->fwd_pd);
        free(p);
    }
    n_plans = 0;
}

static plan *find(int kind, int alg, int64_t rows, int64_t cols, float eps)
{
    for (plan *p = plans; p; p = p->next)
        if (p->kind == kind && p->alg == alg && p->rows == rows && p->cols == cols && p->eps == eps)
            return p;
    return NULL;
}

static dnnl_status_t md2(dnnl_memory_desc_t *md, int64_t rows, int64_t cols)
{
    dnnl_dims_t d = {rows, cols};
    return dnnl_memory_desc_init_by_tag(md, 2, d, dnnl_f32, dnnl_ab);
}

static dnnl_status_t md1(dnnl_memory_desc_t *md, int64_t n)
{
    dnnl_dims_t d = {n};
    return dnnl_memory_desc_init_by_tag(md, 1, d, dnnl_f32, dnnl_a);
}

/* The op descriptor of a plan (its forward's, for a backward's hint). */
static dnnl_status_t op_desc(int kind, int alg, int64_t rows, int64_t cols, float eps, void *desc)
{
    dnnl_memory_desc_t data, stat;
    dnnl_status_t s;
    switch (kind) {
    case P_LN_FWD:
    case P_LN_BWD:
        if ((s = md2(&data, rows, cols)) || (s = md1(&stat, rows))) return s;
        /* gamma and beta as one [2, cols] tensor: oneDNN 2.6's backward
         * refused separate scale and shift tensors when executed */
        return kind == P_LN_FWD
                   ? dnnl_layer_normalization_forward_desc_init(desc, dnnl_forward_training, &data,
                                                                &stat, eps, dnnl_use_scaleshift)
                   : dnnl_layer_normalization_backward_desc_init(desc, dnnl_backward, &data, &data,
                                                                 &stat, eps, dnnl_use_scaleshift);
    case P_SOFTMAX_FWD:
    case P_SOFTMAX_BWD:
        if ((s = md2(&data, rows, cols))) return s;
        return kind == P_SOFTMAX_FWD
                   ? dnnl_softmax_forward_desc_init(desc, dnnl_forward_training, &data, 1)
                   : dnnl_softmax_backward_desc_init(desc, &data, &data, 1);
    default:
        if ((s = md1(&data, rows))) return s;
        return kind == P_ELT_FWD
                   ? dnnl_eltwise_forward_desc_init(desc, dnnl_forward_training,
                                                    (dnnl_alg_kind_t)alg, &data,
                                                    alg == dnnl_eltwise_swish ? 1.f : 0.f, 0.f)
                   : dnnl_eltwise_backward_desc_init(desc, (dnnl_alg_kind_t)alg, &data, &data,
                                                     alg == dnnl_eltwise_swish ? 1.f : 0.f, 0.f);
    }
}

/* Room for any of the op descriptors above. */
typedef union any_desc {
    dnnl_layer_normalization_desc_t ln;
    dnnl_softmax_desc_t sm;
    dnnl_eltwise_desc_t el;
} any_desc;

static plan *get_plan(int kind, int alg, int64_t rows, int64_t cols, float eps);

/* Make a plan; NULL when oneDNN refuses (the caller's loop runs). */
static plan *make_plan(int kind, int alg, int64_t rows, int64_t cols, float eps)
{
    if (n_plans >= MAX_PLANS) {
        gave_up = true;
        return NULL;
    }
    bool backward = kind == P_LN_BWD || kind == P_SOFTMAX_BWD || kind == P_ELT_BWD;
    plan *hint = backward ? get_plan(kind - 1, alg, rows, cols, eps) : NULL;
    if (backward && !hint) return NULL;
    plan *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->kind = kind, p->alg = alg, p->rows = rows, p->cols = cols, p->eps = eps;
    any_desc d;
    dnnl_primitive_desc_t pd = NULL;
    if (op_desc(kind, alg, rows, cols, eps, &d) ||
        dnnl_primitive_desc_create(&pd, &d, NULL, cpu_dnnl_engine(), hint ? hint->fwd_pd : NULL) ||
        dnnl_primitive_create(&p->prim, pd)) {
        if (pd) dnnl_primitive_desc_destroy(pd);
        free(p);
        return NULL;
    }
    if (backward)
        dnnl_primitive_desc_destroy(pd);
    else
        p->fwd_pd = pd;
    p->next = plans;
    plans = p;
    n_plans++;
    return p;
}

static bool own_loops;
static void read_environment(void)
{
    const char *e = getenv("STOKE_CPU_OWN_LOOPS");
    own_loops = e && e[0] && strcmp(e, "0");
    cpu_dnnl_on_thread_exit(free_thread_plans);
}

static plan *get_plan(int kind, int alg, int64_t rows, int64_t cols, float eps)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_environment);
    if (own_loops || gave_up || rows <= 0 || cols <= 0 || !cpu_dnnl_stream()) return NULL;
    plan *p = find(kind, alg, rows, cols, eps);
    return p ? p : make_plan(kind, alg, rows, cols, eps);
}

/* Run p on the (argument, pointer, descriptor) triples given. */
typedef struct arg {
    int arg;
    const void *ptr;
    const dnnl_memory_desc_t *md;
} arg;

static bool run(plan *p, int n, const arg *a)
{
    dnnl_exec_arg_t args[8];
    dnnl_status_t s = dnnl_success;
    int made = 0;
    for (; made < n && !s; made++) {
        args[made].arg = a[made].arg;
        s = dnnl_memory_create(&args[made].memory, a[made].md, cpu_dnnl_engine(),
                               (void *)a[made].ptr);
        if (s) break;
    }
    if (!s) s = cpu_dnnl_exec(p->prim, n, args);
    for (int i = 0; i < made && i < n; i++)
        if (args[i].memory) dnnl_memory_destroy(args[i].memory);
    return s == dnnl_success;
}

/* [2, cols] scale-shift scratch (gamma, then beta) from the caching allocator. */
static float *scale_shift(int64_t cols, size_t *bytes)
{
    void *p;
    *bytes = sizeof(float) * 2 * (size_t)cols;
    return stk_device_alloc(STK_DEVICE_CPU, *bytes, &p) == STK_OK ? p : NULL;
}

bool cpu_dnnl_layer_norm_forward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                                 const float *beta, float eps, float *y, float *mean, float *rstd)
{
    if (!gamma || !beta) return false;
    plan *p = get_plan(P_LN_FWD, 0, rows, cols, eps);
    size_t bytes;
    float *ss = p ? scale_shift(cols, &bytes) : NULL;
    if (!ss) return false;
    memcpy(ss, gamma, sizeof(float) * (size_t)cols);
    memcpy(ss + cols, beta, sizeof(float) * (size_t)cols);
    dnnl_memory_desc_t data, stat, par;
    md2(&data, rows, cols), md1(&stat, rows), md2(&par, 2, cols);
    /* the variance into rstd, then 1 / sqrt(var + eps) in place: the
     * engine's saved statistics stay mean and rstd, as the loops' */
    arg a[5] = {{DNNL_ARG_SRC, x, &data},
                {DNNL_ARG_DST, y, &data},
                {DNNL_ARG_MEAN, mean, &stat},
                {DNNL_ARG_VARIANCE, rstd, &stat},
                {DNNL_ARG_SCALE_SHIFT, ss, &par}};
    bool ok = run(p, 5, a);
    stk_device_free(STK_DEVICE_CPU, ss, bytes);
    if (ok)
        for (int64_t r = 0; r < rows; r++) rstd[r] = 1.f / sqrtf(rstd[r] + eps);
    return ok;
}

/* The engine saves rstd = 1 / sqrt(var + eps), not eps: the plan's eps is 0
 * and the variance it reads is 1 / rstd^2, which is var + eps. */
bool cpu_dnnl_layer_norm_backward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                                  const float *mean, const float *rstd, const float *gy, float *gx,
                                  float *ggamma, float *gbeta)
{
    if (!gamma || !gx || !ggamma || !gbeta) return false;
    plan *p = get_plan(P_LN_BWD, 0, rows, cols, 0.f);
    size_t bytes, vbytes = sizeof(float) * (size_t)rows;
    float *ss = p ? scale_shift(cols, &bytes) : NULL, *var = NULL;
    if (!ss) return false;
    if (stk_device_alloc(STK_DEVICE_CPU, vbytes, (void **)&var) != STK_OK) {
        stk_device_free(STK_DEVICE_CPU, ss, bytes);
        return false;
    }
    for (int64_t r = 0; r < rows; r++) var[r] = 1.f / (rstd[r] * rstd[r]);
    memcpy(ss, gamma, sizeof(float) * (size_t)cols);
    memset(ss + cols, 0, sizeof(float) * (size_t)cols); /* beta: not read backward */
    float *gss = NULL;
    bool ok = false;
    size_t gbytes;
    if ((gss = scale_shift(cols, &gbytes))) {
        dnnl_memory_desc_t data, stat, par;
        md2(&data, rows, cols), md1(&stat, rows), md2(&par, 2, cols);
        arg a[7] = {{DNNL_ARG_SRC, x, &data},
                    {DNNL_ARG_MEAN, mean, &stat},
                    {DNNL_ARG_VARIANCE, var, &stat},
                    {DNNL_ARG_SCALE_SHIFT, ss, &par},
                    {DNNL_ARG_DIFF_DST, gy, &data},
                    {DNNL_ARG_DIFF_SRC, gx, &data},
                    {DNNL_ARG_DIFF_SCALE_SHIFT, gss, &par}};
        if ((ok = run(p, 7, a))) {
            memcpy(ggamma, gss, sizeof(float) * (size_t)cols);
            memcpy(gbeta, gss + cols, sizeof(float) * (size_t)cols);
        }
        stk_device_free(STK_DEVICE_CPU, gss, gbytes);
    }
    stk_device_free(STK_DEVICE_CPU, var, vbytes);
    stk_device_free(STK_DEVICE_CPU, ss, bytes);
    return ok;
}

bool cpu_dnnl_softmax_forward(int64_t rows, int64_t cols, const float *x, float *y)
{
    plan *p = get_plan(P_SOFTMAX_FWD, 0, rows, cols, 0.f);
    if (!p) return false;
    dnnl_memory_desc_t data;
    md2(&data, rows, cols);
    arg a[2] = {{DNNL_ARG_SRC, x, &data}, {DNNL_ARG_DST, y, &data}};
    return run(p, 2, a);
}

bool cpu_dnnl_softmax_backward(int64_t rows, int64_t cols, const float *y, const float *gy,
                               float *gx)
{
    plan *p = get_plan(P_SOFTMAX_BWD, 0, rows, cols, 0.f);
    if (!p) return false;
    dnnl_memory_desc_t data;
    md2(&data, rows, cols);
    arg a[3] = {
        {DNNL_ARG_DST, y, &data}, {DNNL_ARG_DIFF_DST, gy, &data}, {DNNL_ARG_DIFF_SRC, gx, &data}};
    return run(p, 3, a);
}

/* oneDNN's algorithm for one of Stoke's unary ops, or 0: none. */
static int eltwise_alg(stk_unary_op op)
{
    switch (op) {
    case STK_UNARY_GELU: return dnnl_eltwise_gelu_erf;
    case STK_UNARY_SILU: return dnnl_eltwise_swish; /* x * sigmoid(1 * x) */
    case STK_UNARY_SIGMOID: return dnnl_eltwise_logistic;
    default: return 0;
    }
}

bool cpu_dnnl_unary(stk_unary_op op, int64_t n, const float *x, float *y)
{
    int alg = eltwise_alg(op);
    plan *p = alg ? get_plan(P_ELT_FWD, alg, n, 1, 0.f) : NULL;
    if (!p) return false;
    dnnl_memory_desc_t data;
    md1(&data, n);
    arg a[2] = {{DNNL_ARG_SRC, x, &data}, {DNNL_ARG_DST, y, &data}};
    return run(p, 2, a);
}

bool cpu_dnnl_unary_backward(stk_unary_op op, int64_t n, const float *x, const float *gy, float *gx)
{
    int alg = eltwise_alg(op);
    plan *p = alg && x ? get_plan(P_ELT_BWD, alg, n, 1, 0.f) : NULL;
    if (!p) return false;
    dnnl_memory_desc_t data;
    md1(&data, n);
    arg a[3] = {
        {DNNL_ARG_SRC, x, &data}, {DNNL_ARG_DIFF_DST, gy, &data}, {DNNL_ARG_DIFF_SRC, gx, &data}};
    return run(p, 3, a);
}
