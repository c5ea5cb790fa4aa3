/* Batched GEMM with bf16 operands, f32 accumulation and an f32 result
 * (--amp on the CPU: matmul and linear), through oneDNN's matmul primitive.
 * Operands arrive as f32 in the engine's layout (row-major, maybe
 * transposed, a 2-D operand broadcast over the batch); reorders convert
 * them to bf16 in the layouts the primitive picked (one pass each, as in
 * cpu_conv_dnnl.c). A plan per distinct call shape holds the primitives,
 * per thread (cpu_dnnl_impl.h). */
#include "kernels/cpu_dnnl_impl.h"
#include "kernels/cpu_kernels_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* All int64_t: no padding, so keys compare with memcmp. */
typedef struct gemm_key {
    int64_t batch, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, trans_a, trans_b;
} gemm_key;

typedef struct gemm_plan {
    gemm_key key;
    dnnl_memory_desc_t user_a, user_b, user_c, want_a, want_b;
    dnnl_primitive_t matmul, reorder_a, reorder_b;
    bool failed;
    struct gemm_plan *next;
} gemm_plan;

static _Thread_local gemm_plan *plans;

/* The f32 operand's descriptor: dims {batch or 1, rows, cols} of a matrix
 * stored row-major with leading dimension ld (transposed: column-major). */
static dnnl_status_t operand_desc(dnnl_memory_desc_t *md, int64_t batch, int64_t stride,
                                  int64_t rows, int64_t cols, int64_t ld, bool trans)
{
    int64_t b = stride ? batch : 1;
    dnnl_dims_t dims = {b, rows, cols};
    dnnl_dims_t strides = {stride ? stride : rows * cols, trans ? 1 : ld, trans ? ld : 1};
    return dnnl_memory_desc_init_by_strides(md, 3, dims, dnnl_f32, strides);
}

static dnnl_status_t make_plan(gemm_plan *p)
{
    const gemm_key *q = &p->key;
    dnnl_engine_t eng = cpu_dnnl_engine();
    dnnl_status_t s;
    if ((s = operand_desc(&p->user_a, q->batch, q->stride_a, q->m, q->k, q->lda, q->trans_a)) ||
        (s = operand_desc(&p->user_b, q->batch, q->stride_b, q->k, q->n, q->ldb, q->trans_b)) ||
        (s = operand_desc(&p->user_c, q->batch, q->stride_c, q->m, q->n, q->ldc, false)))
        return s;
    dnnl_memory_desc_t any_a, any_b;
    if ((s = dnnl_memory_desc_init_by_tag(&any_a, 3, p->user_a.dims, dnnl_bf16,
                                          dnnl_format_tag_any)) ||
        (s = dnnl_memory_desc_init_by_tag(&any_b, 3, p->user_b.dims, dnnl_bf16,
                                          dnnl_format_tag_any)))
        return s;
    dnnl_matmul_desc_t md;
    if ((s = dnnl_matmul_desc_init(&md, &any_a, &any_b, NULL, &p->user_c))) return s;
    dnnl_primitive_desc_t pd;
    if ((s = dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL))) return s;
    p->want_a = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    p->want_b = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    s = dnnl_primitive_create(&p->matmul, pd);
    dnnl_primitive_desc_destroy(pd);
    if (s) return s;
    /* f32 to bf16: never the same, so the reorders are never NULL */
    if ((s = cpu_dnnl_make_reorder(&p->user_a, &p->want_a, &p->reorder_a))) return s;
    return cpu_dnnl_make_reorder(&p->user_b, &p->want_b, &p->reorder_b);
}

static void free_thread_plans(void);
static void register_plans(void) { cpu_dnnl_on_thread_exit(free_thread_plans); }

static gemm_plan *get_plan(const gemm_key *key)
{
    static pthread_once_t registered = PTHREAD_ONCE_INIT;
    pthread_once(&registered, register_plans);
    if (!cpu_dnnl_stream()) return NULL;
    gemm_plan *p = plans;
    while (p && memcmp(&p->key, key, sizeof *key) != 0) p = p->next;
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) return NULL;
        p->key = *key;
        p->next = plans;
        plans = p;
        if (make_plan(p) != dnnl_success) p->failed = true;
    }
    return p->failed ? NULL : p;
}

/* Reorder the f32 operand at ptr into a bf16 scratch buffer (*scratch,
 * *bytes: from the caching allocator) wrapped in *mem. */
static dnnl_status_t to_bf16(const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *want,
                             dnnl_primitive_t reorder, const float *ptr, dnnl_memory_t *mem,
                             void **scratch, size_t *bytes)
{
    dnnl_engine_t eng = cpu_dnnl_engine();
    *bytes = dnnl_memory_desc_get_size(want);
    if (stk_device_alloc(STK_DEVICE_CPU, *bytes, scratch) != STK_OK) return dnnl_out_of_memory;
    dnnl_memory_t src;
    dnnl_status_t s = dnnl_memory_create(&src, user, eng, (void *)ptr);
    if (s) return s;
    if (!(s = dnnl_memory_create(mem, want, eng, *scratch))) {
        dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, *mem}};
        s = cpu_dnnl_exec(reorder, 2, a);
    }
    dnnl_memory_destroy(src);
    return s;
}

stk_status cpu_gemm_batched_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                 int64_t k, const float *a, int64_t lda, int64_t stride_a,
                                 const float *b, int64_t ldb, int64_t stride_b, float *c,
                                 int64_t ldc, int64_t stride_c)
{
    if (batch == 0 || m == 0 || n == 0) return STK_OK;
    if (k == 0) { /* an empty sum */
        for (int64_t i = 0; i < batch; i++)
            for (int64_t r = 0; r < m; r++) memset(c + i * stride_c + r * ldc, 0, n * sizeof *c);
        return STK_OK;
    }
    gemm_key key = {batch, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, trans_a, trans_b};
    gemm_plan *p = get_plan(&key);
    if (!p)
        return stk_error(STK_ERR_UNSUPPORTED,
                         "matmul in bf16: oneDNN has no bf16 matmul for %lld x (%lld x %lld) x "
                         "(%lld x %lld) on this CPU",
                         (long long)batch, (long long)m, (long long)k, (long long)k, (long long)n);
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    void *sa = NULL, *sb = NULL;
    size_t na = 0, nb = 0;
    dnnl_status_t s = to_bf16(&p->user_a, &p->want_a, p->reorder_a, a, &ma, &sa, &na);
    if (!s) s = to_bf16(&p->user_b, &p->want_b, p->reorder_b, b, &mb, &sb, &nb);
    if (!s) s = dnnl_memory_create(&mc, &p->user_c, cpu_dnnl_engine(), c);
    if (!s) {
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
        s = cpu_dnnl_exec(p->matmul, 3, args);
    }
    if (ma) dnnl_memory_destroy(ma);
    if (mb) dnnl_memory_destroy(mb);
    if (mc) dnnl_memory_destroy(mc);
    stk_device_free(STK_DEVICE_CPU, sa, na);
    stk_device_free(STK_DEVICE_CPU, sb, nb);
    if (s == dnnl_out_of_memory) return stk_error(STK_ERR_NOMEM, "matmul in bf16: out of memory");
    if (s)
        return stk_error(STK_ERR_INTERNAL, "matmul in bf16: oneDNN failed with status %d", (int)s);
    return STK_OK;
}

/* This thread's plans (cpu_dnnl.c calls it when the thread ends). */
static void free_thread_plans(void)
{
    while (plans) {
        gemm_plan *p = plans;
        plans = p->next;
        if (p->matmul) dnnl_primitive_destroy(p->matmul);
        if (p->reorder_a) dnnl_primitive_destroy(p->reorder_a);
        if (p->reorder_b) dnnl_primitive_destroy(p->reorder_b);
        free(p);
    }
}
