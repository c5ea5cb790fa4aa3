/* Multi-head scaled dot-product self-attention over q, k, v packed side by
 * side (torch.nn.MultiheadAttention's in_proj output), as one node.
 *
 * Why one op rather than views, matmuls and a softmax: composed, each of q, k
 * and v is a narrow of the packed tensor, so the backward builds three
 * zero-filled packed-sized gradients, copies each part in and adds them up;
 * q, k^T, v and the heads' output are copied to be contiguous, and the
 * 1/sqrt(d) scale is a pass of its own each way. Here every GEMM reads its
 * head straight from the packed [N, S, 3, H, d] tensor (a batch of N
 * matrices per head, leading dimension 3 H d) and writes straight into the
 * [N, S, H, d] output, and the backward into the packed gradient: no copy at
 * all. vit_tiny's f32 training step (64 px, batch 32, 2 threads, a Xeon
 * with AVX-512) ran 81.8 images/s composed, 88.3 with one packed copy each
 * way, 91.7 so (docs/MEASUREMENTS.md). */
#include "engine/ops.h"
#include "engine/ops_impl.h"

#include <math.h>
#include <string.h>

/* A GEMM operand: an f32 tensor (and its f16 copy under GPU autocast), an
 * element offset, the offset between heads, a leading dimension and the
 * stride between the N matrices of one head. */
typedef struct operand {
    stk_tensor *t, *half;
    int64_t offset, head, ld, stride;
} operand;

typedef enum { MODE_F32, MODE_F16, MODE_BF16 } gemm_mode;

static gemm_mode mode_of(const stk_backend *be)
{
    return eng_autocast_f16(be) ? MODE_F16 : eng_autocast_bf16(be) ? MODE_BF16 : MODE_F32;
}

/* Under GPU autocast: the operand's f16 copy (the GEMMs read halves). */
static stk_status need_half(const stk_backend *be, gemm_mode mode, operand *o)
{
    return mode == MODE_F16 ? eng_half_copy(be, o->t, &o->half) : STK_OK;
}

/* For each head h: C_h = alpha op(A_h) op(B_h), a batch of `nb` matrices.
 * The bf16 GEMM has no alpha: the callers pass 1 there and scale a
 * contiguous operand themselves. */
static stk_status gemm_heads(const stk_backend *be, gemm_mode mode, int64_t heads, int64_t nb,
                             bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                             const operand *a, const operand *b, const operand *c)
{
    for (int64_t h = 0; h < heads; h++) {
        int64_t ao = a->offset + h * a->head, bo = b->offset + h * b->head;
        float *cp = tensor_f32(c->t) + c->offset + h * c->head;
        if (mode == MODE_F16) {
            be->gemm_batched_f16(nb, ta, tb, m, n, k, alpha, (const uint16_t *)tensor_ptr(a->half) + ao,
                                 a->ld, a->stride, (const uint16_t *)tensor_ptr(b->half) + bo, b->ld,
                                 b->stride, 0.f, cp, c->ld, c->stride);
        } else if (mode == MODE_BF16) {
            STK_TRY(be->gemm_batched_bf16(nb, ta, tb, m, n, k, tensor_f32(a->t) + ao, a->ld,
                                          a->stride, tensor_f32(b->t) + bo, b->ld, b->stride, cp,
                                          c->ld, c->stride));
        } else {
            be->gemm_batched(nb, ta, tb, m, n, k, alpha, tensor_f32(a->t) + ao, a->ld, a->stride,
                             tensor_f32(b->t) + bo, b->ld, b->stride, 0.f, cp, c->ld, c->stride);
        }
    }
    return STK_OK;
}

static void release_half(operand *o)
{
    stk_tensor_release(o->half);
    o->half = NULL;
}

/* The packed tensor's parts: q (0), k (1), v (2) of [N, S, 3, H, d]. */
static operand packed_part(stk_tensor *t, int i, int64_t seq, int64_t heads, int64_t hd)
{
    return (operand){t, NULL, i * heads * hd, hd, 3 * heads * hd, seq * 3 * heads * hd};
}

/* [H, N, S, S] scores, probabilities and their gradients. */
static operand square(stk_tensor *t, int64_t nb, int64_t seq)
{
    return (operand){t, NULL, 0, nb * seq * seq, seq, seq * seq};
}

/* [N, S, H, d]: the output, and its gradient. */
static operand tokens(stk_tensor *t, int64_t seq, int64_t heads, int64_t hd)
{
    return (operand){t, NULL, 0, hd, heads * hd, seq * heads * hd};
}

static stk_status attention_backward(stk_node *n, stk_tensor *g, stk_tensor **gin)
{
    stk_tensor *qkv = n->saved[0], *probs = n->saved[1];
    int64_t nb = n->iv[0], seq = n->iv[1], heads = n->iv[2], hd = n->iv[3];
    float scale = (float)n->fv[0];
    const stk_backend *be;
    stk_status st = eng_backend_of(g, &be);
    if (st != STK_OK) return st;
    gemm_mode mode = mode_of(be);
    stk_tensor *dprobs = NULL, *dscores = NULL;
    operand q = packed_part(qkv, 0, seq, heads, hd), k = packed_part(qkv, 1, seq, heads, hd);
    operand v = packed_part(qkv, 2, seq, heads, hd), go = tokens(g, seq, heads, hd);
    operand p = square(probs, nb, seq), dp, ds;
    if ((st = eng_node_grad_like(n, 0, false, &gin[0])) != STK_OK ||
        (st = eng_tensor_new_like(probs, false, &dprobs)) != STK_OK ||
        (st = eng_tensor_new_like(probs, false, &dscores)) != STK_OK)
        goto out;
    dp = square(dprobs, nb, seq), ds = square(dscores, nb, seq);
    operand dq = packed_part(gin[0], 0, seq, heads, hd), dk = packed_part(gin[0], 1, seq, heads, hd);
    operand dv = packed_part(gin[0], 2, seq, heads, hd);
    /* o = P v: dv = P^T do, dP = do v^T */
    if ((st = need_half(be, mode, &q)) != STK_OK || (st = need_half(be, mode, &go)) != STK_OK ||
        (st = need_half(be, mode, &p)) != STK_OK)
        goto out;
    k.half = v.half = q.half; /* one f16 copy of the packed tensor */
    if ((st = gemm_heads(be, mode, heads, nb, true, false, seq, hd, seq, 1.f, &p, &go, &dv)) !=
            STK_OK ||
        (st = gemm_heads(be, mode, heads, nb, false, true, seq, seq, hd, 1.f, &go, &v, &dp)) !=
            STK_OK)
        goto out;
    /* scores = scale q k^T: dS = softmax'(dP), dq = scale dS k, dk = scale dS^T q */
    be->softmax_backward(heads * nb * seq, seq, tensor_f32(probs), tensor_f32(dprobs),
                         tensor_f32(dscores), false);
    float alpha = scale;
    if (mode == MODE_BF16) {
        be->unary(STK_UNARY_MUL_SCALAR, stk_tensor_numel(dscores), tensor_f32(dscores),
                  tensor_f32(dscores), scale);
        alpha = 1.f;
    }
    if ((st = need_half(be, mode, &ds)) != STK_OK) goto out;
    if ((st = gemm_heads(be, mode, heads, nb, false, false, seq, hd, seq, alpha, &ds, &k, &dq)) ==
        STK_OK)
        st = gemm_heads(be, mode, heads, nb, true, false, seq, hd, seq, alpha, &ds, &q, &dk);
out:
    release_half(&q);
    release_half(&go);
    release_half(&p);
    release_half(&ds);
    stk_tensor_release(dprobs);
    stk_tensor_release(dscores);
    return st;
}

stk_status stk_attention_packed(stk_tensor *qkv_in, int heads_in, stk_tensor **out)
{
    stk_status st = eng_check_f32("attention", qkv_in, "the packed q, k, v");
    if (st != STK_OK) return st;
    if (heads_in < 1 || qkv_in->ndim != 3 || qkv_in->shape[2] % (3 * (int64_t)heads_in) != 0 ||
        qkv_in->shape[2] == 0)
        return stk_error(STK_ERR_INVALID_ARG,
                         "attention: packed q, k, v %s must be [N, S, 3 D] with D a positive "
                         "multiple of the %d heads",
                         stk_tensor_shape_str(qkv_in), heads_in);
    const stk_backend *be;
    if ((st = eng_backend_of(qkv_in, &be)) != STK_OK) return st;
    gemm_mode mode = mode_of(be);
    int64_t nb = qkv_in->shape[0], seq = qkv_in->shape[1], heads = heads_in;
    int64_t hd = qkv_in->shape[2] / (3 * heads);
    float scale = (float)(1.0 / sqrt((double)hd));
    stk_tensor *qkv = NULL, *scores = NULL, *probs = NULL, *y = NULL;
    int64_t sshape[4] = {heads, nb, seq, seq}, yshape[3] = {nb, seq, heads * hd};
    if ((st = eng_tensor_contiguous_raw(qkv_in, &qkv)) != STK_OK ||
        (st = eng_tensor_new(qkv->storage->device, STK_F32, 4, sshape, false, &scores)) !=
            STK_OK ||
        (st = eng_tensor_new_like(scores, false, &probs)) != STK_OK ||
        (st = eng_tensor_new(qkv->storage->device, STK_F32, 3, yshape, false, &y)) != STK_OK)
        goto out;
    operand q = packed_part(qkv, 0, seq, heads, hd), k = packed_part(qkv, 1, seq, heads, hd);
    operand v = packed_part(qkv, 2, seq, heads, hd), s = square(scores, nb, seq);
    operand p = square(probs, nb, seq), o = tokens(y, seq, heads, hd);
    if ((st = need_half(be, mode, &q)) != STK_OK) goto out;
    k.half = v.half = q.half;
    st = gemm_heads(be, mode, heads, nb, false, true, seq, seq, hd, scale, &q, &k, &s);
    if (st == STK_OK && mode == MODE_BF16)
        be->unary(STK_UNARY_MUL_SCALAR, stk_tensor_numel(scores), tensor_f32(scores),
                  tensor_f32(scores), scale);
    if (st == STK_OK && seq)
        be->softmax_forward(heads * nb * seq, seq, tensor_f32(scores), tensor_f32(probs), false);
    if (st == STK_OK) st = need_half(be, mode, &p);
    if (st == STK_OK) st = gemm_heads(be, mode, heads, nb, false, false, seq, hd, seq, 1.f, &p, &v, &o);
    release_half(&q);
    release_half(&p);
    if (st != STK_OK) goto out;
    stk_node *n;
    if ((st = eng_node_attach(y, "attention", attention_backward, 1, &qkv_in, &n)) != STK_OK)
        goto out;
    if (n) {
        eng_node_save(n, 0, qkv);
        eng_node_save(n, 1, probs);
        n->iv[0] = nb, n->iv[1] = seq, n->iv[2] = heads, n->iv[3] = hd;
        n->fv[0] = scale;
    }
    *out = eng_tensor_track(y);
    y = NULL;
out:
    stk_tensor_release(qkv);
    stk_tensor_release(scores);
    stk_tensor_release(probs);
    stk_tensor_release(y);
    return st;
}
