/* 2-D convolution through oneDNN's convolution primitives (what PyTorch's
 * CPU convolution runs too), with im2col + GEMM (cpu_conv.c) as the fallback
 * for any shape oneDNN refuses.
 *
 * Why: im2col + GEMM spent much of a training step in its column loops;
 * oneDNN's JIT direct convolutions work on blocked layouts (nChw16c) with no
 * column buffer. Tensors stay NCHW in the engine, so each call reorders its
 * operands into the layouts the primitive chose and the result back, as
 * PyTorch does for NCHW tensors; plain NCHW activations (no reorders) were
 * slower. The measurements: kernels/README.md, "Convolution".
 *
 * A plan per distinct convolution (shape, stride, padding, dilation,
 * groups) holds its primitives and reorders, made on first use and kept
 * for the life of the thread (a training run has a few dozen shapes).
 * Plans are per thread, as the stream (cpu_dnnl_impl.h): pipeline stages
 * (train/pipeline.h) run convolutions on threads of their own.
 *
 * bf16 (--amp on a CPU with bf16 instructions): the same plans with the
 * primitive's operands in bf16 (f32 accumulation), but for the weights'
 * gradient, which stays f32. The engine's tensors stay f32 NCHW: the
 * reorder into the primitive's blocked layout that the f32 path runs anyway
 * also rounds to bf16, so the conversion costs no pass of its own; outputs
 * are rounded to bf16 as PyTorch's autocast rounds them, and read back as
 * f32 by the reorder out of the blocked layout (bf16 outputs measured 4-5%
 * faster on resnet18 than f32 ones: half the bytes written and read back).
 * kernels/README.md, "bf16 on the CPU". */
#include "kernels/cpu_dnnl_impl.h"
#include "kernels/cpu_kernels_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum {
    R_FWD_SRC,
    R_FWD_WEI,
    R_FWD_DST,
    R_BD_WEI,
    R_BD_DDST,
    R_BD_DSRC,
    R_BW_SRC,
    R_BW_DDST,
    R_BW_DWEI,
    R_COUNT
};

typedef struct conv_plan {
    stk_conv2d_desc d;
    bool bf16; /* every operand in bf16 but the weights' gradient (f32) */
    dnnl_memory_desc_t user_src, user_wei, user_dst;
    dnnl_primitive_t fwd, bwd_data, bwd_wei;
    dnnl_primitive_desc_t fwd_pd; /* the hint for the backward descs */
    dnnl_memory_desc_t want[R_COUNT];
    dnnl_primitive_t reorder[R_COUNT]; /* NULL: the user layout is the wanted one */
    bool fwd_dw, bwd_data_dw;          /* the pass runs one of oneDNN's depthwise kernels */
    bool failed;                       /* oneDNN refused: use im2col */
    struct conv_plan *next;
} conv_plan;

static _Thread_local conv_plan *plans;

static bool same_desc(const stk_conv2d_desc *a, const stk_conv2d_desc *b)
{
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k &&
           a->r == b->r && a->s == b->s && a->oh == b->oh && a->ow == b->ow &&
           a->stride_h == b->stride_h && a->stride_w == b->stride_w && a->pad_h == b->pad_h &&
           a->pad_w == b->pad_w && a->dil_h == b->dil_h && a->dil_w == b->dil_w &&
           a->groups == b->groups;
}

static dnnl_status_t query(dnnl_primitive_desc_t pd, dnnl_query_t what, dnnl_memory_desc_t *md)
{
    const dnnl_memory_desc_t *q = dnnl_primitive_desc_query_md(pd, what, 0);
    if (!q) return dnnl_runtime_error;
    *md = *q;
    return dnnl_success;
}

static void conv_dims(const stk_conv2d_desc *d, dnnl_dims_t strides, dnnl_dims_t dil,
                      dnnl_dims_t pl, dnnl_dims_t pr)
{
    strides[0] = d->stride_h;
    strides[1] = d->stride_w;
    dil[0] = d->dil_h - 1; /* oneDNN counts the gaps */
    dil[1] = d->dil_w - 1;
    pl[0] = d->pad_h;
    pl[1] = d->pad_w;
    /* right padding so that the output size comes out exactly */
    pr[0] = (d->oh - 1) * d->stride_h + (d->r - 1) * d->dil_h + 1 - d->h - d->pad_h;
    pr[1] = (d->ow - 1) * d->stride_w + (d->s - 1) * d->dil_w + 1 - d->w - d->pad_w;
}

/* Descriptors with the user's dims and "any" layout: oneDNN picks the
 * layout. Under bf16 every operand is bf16 but the weights' gradient
 * (`output` == OUT_WEI), which stays f32 as it is summed over the batch. */
enum { OUT_SRC, OUT_WEI, OUT_DST };
static void any_descs(const conv_plan *p, int output, dnnl_memory_desc_t *src,
                      dnnl_memory_desc_t *wei, dnnl_memory_desc_t *dst)
{
    dnnl_data_type_t dt = p->bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_init_by_tag(src, 4, p->user_src.dims, dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(dst, 4, p->user_dst.dims, dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(wei, p->user_wei.ndims, p->user_wei.dims,
                                 output == OUT_WEI ? dnnl_f32 : dt, dnnl_format_tag_any);
}

/* One operand of a pass: its reorder slot, how to ask the primitive for its
 * layout, the user's descriptor, and the reorder direction. */
typedef struct pass_operand {
    int slot;
    dnnl_query_t query;
    const dnnl_memory_desc_t *user;
    bool output; /* reorder wanted -> user after the pass, not user -> wanted before */
} pass_operand;

/* Whether oneDNN chose one of its depthwise kernels ("jit_dw:avx512_core")
 * for the pass, and not im2col + GEMM ("x64:gemm:jit"), which it picks for
 * a filter larger than its plane: cpu_conv_dw.c runs those. */
static bool runs_depthwise_kernel(dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
           impl && strstr(impl, "dw");
}

/* Create the pass's primitive from its op descriptor, learn the layouts it
 * chose and make the reorders. *keep_pd receives the primitive descriptor
 * (the forward one is the hint for the backward passes); NULL frees it.
 * *dw: whether it runs a depthwise kernel (runs_depthwise_kernel). */
static dnnl_status_t make_pass(conv_plan *p, const dnnl_convolution_desc_t *cd,
                               const pass_operand ops[3], dnnl_primitive_t *prim,
                               dnnl_primitive_desc_t *keep_pd, bool *dw)
{
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_primitive_desc_create(&pd, cd, NULL, cpu_dnnl_engine(), p->fwd_pd);
    if (s) return s;
    if (dw) *dw = runs_depthwise_kernel(pd);
    for (int i = 0; i < 3 && !s; i++) s = query(pd, ops[i].query, &p->want[ops[i].slot]);
    if (!s) s = dnnl_primitive_create(prim, pd);
    if (keep_pd && !s)
        *keep_pd = pd;
    else
        dnnl_primitive_desc_destroy(pd);
    for (int i = 0; i < 3 && !s; i++) {
        const dnnl_memory_desc_t *want = &p->want[ops[i].slot];
        s = ops[i].output ? cpu_dnnl_make_reorder(want, ops[i].user, &p->reorder[ops[i].slot])
                          : cpu_dnnl_make_reorder(ops[i].user, want, &p->reorder[ops[i].slot]);
    }
    return s;
}

static dnnl_status_t plan_forward(conv_plan *p)
{
    const stk_conv2d_desc *d = &p->d;
    dnnl_dims_t src = {d->n, d->c, d->h, d->w}, dst = {d->n, d->k, d->oh, d->ow};
    dnnl_status_t s;
    if ((s = dnnl_memory_desc_init_by_tag(&p->user_src, 4, src, dnnl_f32, dnnl_nchw)) ||
        (s = dnnl_memory_desc_init_by_tag(&p->user_dst, 4, dst, dnnl_f32, dnnl_nchw)))
        return s;
    if (d->groups == 1) {
        dnnl_dims_t wei = {d->k, d->c, d->r, d->s};
        s = dnnl_memory_desc_init_by_tag(&p->user_wei, 4, wei, dnnl_f32, dnnl_oihw);
    } else {
        dnnl_dims_t wei = {d->groups, d->k / d->groups, d->c / d->groups, d->r, d->s};
        s = dnnl_memory_desc_init_by_tag(&p->user_wei, 5, wei, dnnl_f32, dnnl_goihw);
    }
    if (s) return s;
    dnnl_memory_desc_t any_src, any_wei, any_dst;
    any_descs(p, OUT_DST, &any_src, &any_wei, &any_dst);
    dnnl_dims_t st, dil, pl, pr;
    conv_dims(d, st, dil, pl, pr);
    dnnl_convolution_desc_t cd;
    if ((s = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training,
                                                        dnnl_convolution_direct, &any_src, &any_wei,
                                                        NULL, &any_dst, st, dil, pl, pr)))
        return s;
    pass_operand ops[3] = {{R_FWD_SRC, dnnl_query_src_md, &p->user_src, false},
                           {R_FWD_WEI, dnnl_query_weights_md, &p->user_wei, false},
                           {R_FWD_DST, dnnl_query_dst_md, &p->user_dst, true}};
    return make_pass(p, &cd, ops, &p->fwd, &p->fwd_pd, &p->fwd_dw);
}

static dnnl_status_t plan_backward_data(conv_plan *p)
{
    dnnl_memory_desc_t any_src, any_wei, any_dst;
    any_descs(p, OUT_SRC, &any_src, &any_wei, &any_dst);
    dnnl_dims_t st, dil, pl, pr;
    conv_dims(&p->d, st, dil, pl, pr);
    dnnl_convolution_desc_t cd;
    dnnl_status_t s = dnnl_dilated_convolution_backward_data_desc_init(
        &cd, dnnl_convolution_direct, &any_src, &any_wei, &any_dst, st, dil, pl, pr);
    if (s) return s;
    pass_operand ops[3] = {{R_BD_WEI, dnnl_query_weights_md, &p->user_wei, false},
                           {R_BD_DDST, dnnl_query_diff_dst_md, &p->user_dst, false},
                           {R_BD_DSRC, dnnl_query_diff_src_md, &p->user_src, true}};
    return make_pass(p, &cd, ops, &p->bwd_data, NULL, &p->bwd_data_dw);
}

static dnnl_status_t plan_backward_weights(conv_plan *p)
{
    dnnl_memory_desc_t any_src, any_wei, any_dst;
    any_descs(p, OUT_WEI, &any_src, &any_wei, &any_dst);
    dnnl_dims_t st, dil, pl, pr;
    conv_dims(&p->d, st, dil, pl, pr);
    dnnl_convolution_desc_t cd;
    dnnl_status_t s = dnnl_dilated_convolution_backward_weights_desc_init(
        &cd, dnnl_convolution_direct, &any_src, &any_wei, NULL, &any_dst, st, dil, pl, pr);
    if (s) return s;
    pass_operand ops[3] = {{R_BW_SRC, dnnl_query_src_md, &p->user_src, false},
                           {R_BW_DDST, dnnl_query_diff_dst_md, &p->user_dst, false},
                           {R_BW_DWEI, dnnl_query_diff_weights_md, &p->user_wei, true}};
    return make_pass(p, &cd, ops, &p->bwd_wei, NULL, NULL);
}

static void free_thread_plans(void);
static void register_plans(void) { cpu_dnnl_on_thread_exit(free_thread_plans); }

/* The plan for d with the given pass ready, or NULL: use the fallback. */
static conv_plan *get_plan(const stk_conv2d_desc *d, int pass, bool bf16)
{
    static pthread_once_t registered = PTHREAD_ONCE_INIT;
    pthread_once(&registered, register_plans);
    if (!cpu_dnnl_stream()) return NULL;
    conv_plan *p = plans;
    while (p && !(same_desc(&p->d, d) && p->bf16 == bf16)) p = p->next;
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) return NULL;
        p->d = *d;
        p->bf16 = bf16;
        p->next = plans;
        plans = p;
        if (plan_forward(p) != dnnl_success) p->failed = true;
    }
    if (!p->failed && pass == 1 && !p->bwd_data && plan_backward_data(p) != dnnl_success)
        p->failed = true;
    if (!p->failed && pass == 2 && !p->bwd_wei && plan_backward_weights(p) != dnnl_success)
        p->failed = true;
    return !p->failed ? p : NULL;
}

/* One operand: a memory object in the wanted layout, reordered from (in)
 * or to (out) the user's buffer. Scratch comes from the caching allocator,
 * or an input's reorder goes into `into` (a buffer the caller keeps). */
typedef struct operand {
    dnnl_memory_t user, mem;
    void *scratch;
    size_t bytes;
} operand;

static dnnl_status_t operand_open(operand *o, const dnnl_memory_desc_t *user_md,
                                  const dnnl_memory_desc_t *want, dnnl_primitive_t reorder,
                                  void *ptr, bool input, void *into)
{
    memset(o, 0, sizeof *o);
    dnnl_status_t s = dnnl_memory_create(&o->user, user_md, cpu_dnnl_engine(), ptr);
    if (s) return s;
    if (!reorder) {
        o->mem = o->user;
        return dnnl_success;
    }
    void *buf = into;
    if (!buf) {
        o->bytes = dnnl_memory_desc_get_size(want);
        if (stk_device_alloc(STK_DEVICE_CPU, o->bytes, &o->scratch) != STK_OK)
            return dnnl_out_of_memory;
        buf = o->scratch;
    }
    if ((s = dnnl_memory_create(&o->mem, want, cpu_dnnl_engine(), buf))) return s;
    if (input) {
        dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, o->user}, {DNNL_ARG_TO, o->mem}};
        return cpu_dnnl_exec(reorder, 2, a);
    }
    return dnnl_success;
}

static dnnl_status_t operand_close(operand *o, dnnl_primitive_t reorder, bool output,
                                   dnnl_status_t s)
{
    if (s == dnnl_success && output && reorder) {
        dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, o->mem}, {DNNL_ARG_TO, o->user}};
        s = cpu_dnnl_exec(reorder, 2, a);
    }
    if (o->mem && o->mem != o->user) dnnl_memory_destroy(o->mem);
    if (o->user) dnnl_memory_destroy(o->user);
    stk_device_free(STK_DEVICE_CPU, o->scratch, o->bytes);
    return s;
}

static stk_status dnnl_fail(dnnl_status_t s, const char *what)
{
    if (s == dnnl_out_of_memory)
        return stk_error(STK_ERR_NOMEM, "conv2d %s: out of memory in oneDNN", what);
    return stk_error(STK_ERR_INTERNAL, "conv2d %s: oneDNN failed with status %d", what, (int)s);
}

/* One operand of a pass as the caller has it. */
typedef struct pass_io {
    int slot;                       /* R_*: the layout the primitive wants, its reorder */
    const dnnl_memory_desc_t *user; /* the engine's f32 NCHW buffer's descriptor */
    int arg;                        /* DNNL_ARG_* */
    const void *ptr;                /* the engine's buffer */
    dnnl_memory_t given;            /* an input already in the wanted layout (NULL: reorder ptr) */
    void *into;                     /* an input reordered into this kept buffer (NULL: scratch) */
} pass_io;

/* Run a pass: io[0] and io[1] are inputs, io[2] the output. */
static stk_status run_pass(conv_plan *p, dnnl_primitive_t prim, const char *what,
                           const pass_io io[3])
{
    operand o[3];
    memset(o, 0, sizeof o);
    dnnl_status_t s = dnnl_success;
    for (int i = 0; i < 3 && !s; i++)
        if (!io[i].given)
            s = operand_open(&o[i], io[i].user, &p->want[io[i].slot], p->reorder[io[i].slot],
                             (void *)io[i].ptr, i < 2, io[i].into);
    if (!s) {
        dnnl_exec_arg_t a[3];
        for (int i = 0; i < 3; i++)
            a[i] = (dnnl_exec_arg_t){io[i].arg, io[i].given ? io[i].given : o[i].mem};
        s = cpu_dnnl_exec(prim, 3, a);
    }
    s = operand_close(&o[2], p->reorder[io[2].slot], true, s);
    s = operand_close(&o[1], NULL, false, s);
    s = operand_close(&o[0], NULL, false, s);
    return s == dnnl_success ? STK_OK : dnnl_fail(s, what);
}

/* x_keep: the input's reorder goes there (bf16: kept for backward weights). */
static stk_status forward(conv_plan *p, const float *x, const float *w, float *y, void *x_keep)
{
    pass_io io[3] = {{R_FWD_SRC, &p->user_src, DNNL_ARG_SRC, x, NULL, x_keep},
                     {R_FWD_WEI, &p->user_wei, DNNL_ARG_WEIGHTS, w, NULL, NULL},
                     {R_FWD_DST, &p->user_dst, DNNL_ARG_DST, y, NULL, NULL}};
    return run_pass(p, p->fwd, "forward", io);
}

static stk_status backward_data(conv_plan *p, const float *w, const float *gy,
                                dnnl_memory_t gy_given, float *gx)
{
    pass_io io[3] = {{R_BD_WEI, &p->user_wei, DNNL_ARG_WEIGHTS, w, NULL, NULL},
                     {R_BD_DDST, &p->user_dst, DNNL_ARG_DIFF_DST, gy, gy_given, NULL},
                     {R_BD_DSRC, &p->user_src, DNNL_ARG_DIFF_SRC, gx, NULL, NULL}};
    return run_pass(p, p->bwd_data, "backward data", io);
}

static stk_status backward_weight(conv_plan *p, const float *x, dnnl_memory_t x_given,
                                  const float *gy, dnnl_memory_t gy_given, float *gw)
{
    pass_io io[3] = {{R_BW_SRC, &p->user_src, DNNL_ARG_SRC, x, x_given, NULL},
                     {R_BW_DDST, &p->user_dst, DNNL_ARG_DIFF_DST, gy, gy_given, NULL},
                     {R_BW_DWEI, &p->user_wei, DNNL_ARG_DIFF_WEIGHTS, gw, NULL, NULL}};
    return run_pass(p, p->bwd_wei, "backward weights", io);
}

/* Depthwise convolutions (f32, or bf16 under --amp): oneDNN's depthwise
 * kernels where it has one for the shape and pass, else cpu_conv_dw.c in
 * f32 (never im2col + GEMM: see there). */
static stk_status depthwise_forward(const stk_conv2d_desc *d, bool bf16, const float *x,
                                    const float *w, float *y)
{
    conv_plan *p = get_plan(d, 0, bf16);
    return p && p->fwd_dw ? forward(p, x, w, y, NULL) : cpu_conv2d_dw_forward(d, x, w, y);
}

static stk_status depthwise_backward_data(const stk_conv2d_desc *d, bool bf16, const float *w,
                                          const float *gy, float *gx)
{
    conv_plan *p = get_plan(d, 1, bf16);
    return p && p->bwd_data_dw ? backward_data(p, w, gy, NULL, gx)
                               : cpu_conv2d_dw_backward_data(d, w, gy, gx);
}

stk_status cpu_conv2d_forward_dnnl(const stk_conv2d_desc *d, const float *x, const float *w,
                                   float *y)
{
    if (cpu_conv2d_is_depthwise(d)) return depthwise_forward(d, false, x, w, y);
    conv_plan *p = get_plan(d, 0, false);
    if (!p) return cpu_conv2d_forward(d, x, w, y);
    return forward(p, x, w, y, NULL);
}

stk_status cpu_conv2d_backward_data_dnnl(const stk_conv2d_desc *d, const float *w, const float *gy,
                                         float *gx)
{
    if (cpu_conv2d_is_depthwise(d)) return depthwise_backward_data(d, false, w, gy, gx);
    conv_plan *p = get_plan(d, 1, false);
    if (!p) return cpu_conv2d_backward_data(d, w, gy, gx);
    return backward_data(p, w, gy, NULL, gx);
}

stk_status cpu_conv2d_backward_weight_dnnl(const stk_conv2d_desc *d, const float *x,
                                           const float *gy, float *gw)
{
    if (cpu_conv2d_is_depthwise(d)) return cpu_conv2d_dw_backward_weight(d, x, gy, gw);
    conv_plan *p = get_plan(d, 2, false);
    if (!p) return cpu_conv2d_backward_weight(d, x, gy, gw);
    return backward_weight(p, x, NULL, gy, NULL, gw);
}

/* bf16: no fallback (an f32 result under --amp would be silent). */
static stk_status no_bf16(const stk_conv2d_desc *d, const char *what)
{
    return stk_error(STK_ERR_UNSUPPORTED,
                     "conv2d %s in bf16: oneDNN has no bf16 convolution for %lldx%lldx%lldx%lld "
                     "with %lld %lldx%lld filters on this CPU",
                     what, (long long)d->n, (long long)d->c, (long long)d->h, (long long)d->w,
                     (long long)d->k, (long long)d->r, (long long)d->s);
}

/* Depthwise convolutions under bf16: the forward and data gradient in bf16
 * where oneDNN has a depthwise kernel for them, else in f32
 * (cpu_conv_dw.c); the weights' gradient always in f32 from the f32 input
 * (oneDNN's is im2col + GEMM: 170 ms of a 490 ms ConvNeXt step). They are
 * bandwidth-bound, and PyTorch's autocast would round what they read and
 * write to bf16; here they are exact (kernels/README.md). */
size_t cpu_conv2d_bf16_kept_input_bytes(const stk_conv2d_desc *d)
{
    if (cpu_conv2d_is_depthwise(d)) return 0; /* the f32 input serves the weights' gradient */
    conv_plan *p = get_plan(d, 2, true);
    if (!p || !dnnl_memory_desc_equal(&p->want[R_FWD_SRC], &p->want[R_BW_SRC])) return 0;
    return dnnl_memory_desc_get_size(&p->want[R_BW_SRC]);
}

stk_status cpu_conv2d_forward_bf16(const stk_conv2d_desc *d, const float *x, const float *w,
                                   float *y, void *x_keep)
{
    if (cpu_conv2d_is_depthwise(d)) return depthwise_forward(d, true, x, w, y);
    conv_plan *p = get_plan(d, x_keep ? 2 : 0, true);
    return p ? forward(p, x, w, y, x_keep) : no_bf16(d, "forward");
}

static stk_status dw_backward_bf16(const stk_conv2d_desc *d, const float *x, const float *w,
                                   const float *gy, float *gx, float *gw)
{
    if (gx) STK_TRY(depthwise_backward_data(d, true, w, gy, gx));
    return gw ? cpu_conv2d_dw_backward_weight(d, x, gy, gw) : STK_OK;
}

/* Both passes read the gradient gy: reordered into bf16 once when they want
 * it in the same layout (the blocked ones do), which saves one pass over an
 * activation-sized tensor per convolution and step; and backward weights
 * reads the forward's bf16 input when it was kept, another. */
stk_status cpu_conv2d_backward_bf16(const stk_conv2d_desc *d, const float *x, const void *x_kept,
                                    const float *w, const float *gy, float *gx, float *gw)
{
    if (cpu_conv2d_is_depthwise(d)) return dw_backward_bf16(d, x, w, gy, gx, gw);
    conv_plan *p = gx ? get_plan(d, 1, true) : NULL;
    if (gx && !p) return no_bf16(d, "backward data");
    if (gw && !(p = get_plan(d, 2, true))) return no_bf16(d, "backward weights");
    dnnl_memory_t xk = NULL;
    if (gw && x_kept &&
        dnnl_memory_create(&xk, &p->want[R_BW_SRC], cpu_dnnl_engine(), (void *)x_kept))
        return dnnl_fail(dnnl_out_of_memory, "backward weights");
    operand g;
    memset(&g, 0, sizeof g);
    stk_status st = STK_OK;
    if (gx && gw && dnnl_memory_desc_equal(&p->want[R_BD_DDST], &p->want[R_BW_DDST])) {
        dnnl_status_t s = operand_open(&g, &p->user_dst, &p->want[R_BD_DDST], p->reorder[R_BD_DDST],
                                       (void *)gy, true, NULL);
        if (s) st = dnnl_fail(s, "backward");
    }
    if (st == STK_OK && gx) st = backward_data(p, w, gy, g.mem, gx);
    if (st == STK_OK && gw) st = backward_weight(p, x, xk, gy, g.mem, gw);
    operand_close(&g, NULL, false, dnnl_success);
    if (xk) dnnl_memory_destroy(xk);
    return st;
}

/* This thread's plans (cpu_dnnl.c calls it when the thread ends). */
static void free_thread_plans(void)
{
    while (plans) {
        conv_plan *p = plans;
        plans = p->next;
        if (p->fwd) dnnl_primitive_destroy(p->fwd);
        if (p->bwd_data) dnnl_primitive_destroy(p->bwd_data);
        if (p->bwd_wei) dnnl_primitive_destroy(p->bwd_wei);
        if (p->fwd_pd) dnnl_primitive_desc_destroy(p->fwd_pd);
        for (int i = 0; i < R_COUNT; i++)
            if (p->reorder[i]) dnnl_primitive_destroy(p->reorder[i]);
        free(p);
    }
}
