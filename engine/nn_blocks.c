/* The forward of the modules beyond a single op: activations by kind,
 * squeeze-excitation, self-attention and the Vision Transformer's token
 * pieces. Each composes engine ops (autograd records them). */
#include "engine/autograd.h"
#include "engine/nn_blocks_impl.h"
#include "engine/ops_impl.h"

#include <math.h>

/* x * gate(fc2(act(fc1(mean over H, W of x)))): the scale [N, C, 1, 1]
 * broadcast over the pixels. */
stk_status eng_se_forward(stk_tensor *x, stk_tensor *w1, stk_tensor *b1, stk_tensor *w2,
                          stk_tensor *b2, stk_activation act, stk_activation gate, stk_tensor **out)
{
    if (stk_tensor_ndim(x) != 4)
        return stk_error(STK_ERR_INVALID_ARG, "squeeze-excitation: input %s must be [N, C, H, W]",
                         stk_tensor_shape_str(x));
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    int hw[2] = {2, 3};
    stk_tensor *p = NULL, *a = NULL, *h = NULL, *b = NULL, *g = NULL, *y = NULL;
    stk_status st;
    if ((st = stk_mean(x, 2, hw, true, &p)) == STK_OK &&
        (st = stk_conv2d(p, w1, b1, NULL, &a)) == STK_OK &&
        (st = stk_activate(a, act, &h)) == STK_OK &&
        (st = stk_conv2d(h, w2, b2, NULL, &b)) == STK_OK &&
        (st = stk_activate(b, gate, &g)) == STK_OK)
        st = stk_mul(x, g, &y);
    return eng_compose_end(s, st, y, out);
}

/* torch.nn.MultiheadAttention(batch_first=True)(x, x, x) without masks or
 * dropout: q, k, v from one projection [N, S, 3D] viewed as [N, S, 3, H,
 * D/H] and permuted to [3, N, H, S, D/H]; softmax(q k^T / sqrt(D/H)) v; the
 * heads put back side by side, then out_proj. */
stk_status eng_attention_forward(stk_tensor *x, stk_tensor *in_w, stk_tensor *in_b,
                                 stk_tensor *out_w, stk_tensor *out_b, int heads, stk_tensor **out)
{
    if (stk_tensor_ndim(x) != 3)
        return stk_error(STK_ERR_INVALID_ARG, "attention: input %s must be [N, S, D]",
                         stk_tensor_shape_str(x));
    int64_t n = stk_tensor_dim(x, 0), seq = stk_tensor_dim(x, 1), d = stk_tensor_dim(x, 2);
    int64_t hd = d / heads;
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *qkv = NULL, *v5 = NULL, *p5 = NULL, *q = NULL, *k = NULL, *v = NULL, *kt = NULL,
               *sc = NULL, *ss = NULL, *at = NULL, *o = NULL, *op = NULL, *oc = NULL, *y = NULL;
    int64_t shape5[5] = {n, seq, 3, heads, hd}, back[3] = {n, seq, d};
    static const int perm5[5] = {2, 0, 3, 1, 4}, perm4[4] = {0, 2, 1, 3};
    stk_tensor *parts[3] = {NULL, NULL, NULL};
    stk_status st;
    if ((st = stk_linear(x, in_w, in_b, &qkv)) != STK_OK ||
        (st = stk_view(qkv, 5, shape5, &v5)) != STK_OK ||
        (st = stk_permute(v5, perm5, &p5)) != STK_OK)
        goto done;
    for (int i = 0; i < 3; i++) {
        stk_tensor *one;
        if ((st = stk_narrow(p5, 0, i, 1, &one)) != STK_OK ||
            (st = stk_squeeze(one, 0, &parts[i])) != STK_OK)
            goto done;
    }
    q = parts[0], k = parts[1], v = parts[2];
    if ((st = stk_transpose(k, 2, 3, &kt)) == STK_OK && (st = stk_matmul(q, kt, &sc)) == STK_OK &&
        (st = stk_mul_scalar(sc, (float)(1.0 / sqrt((double)hd)), &ss)) == STK_OK &&
        (st = stk_softmax(ss, -1, &at)) == STK_OK && (st = stk_matmul(at, v, &o)) == STK_OK &&
        (st = stk_permute(o, perm4, &op)) == STK_OK &&
        (st = stk_reshape(op, 3, back, &oc)) == STK_OK)
        st = stk_linear(oc, out_w, out_b, &y);
done:
    return eng_compose_end(s, st, st == STK_OK ? y : NULL, out);
}

/* [N, D, h, w] -> [N, h w, D] (torchvision's _process_input after conv_proj). */
stk_status eng_tokens_forward(stk_tensor *x, stk_tensor **out)
{
    if (stk_tensor_ndim(x) != 4)
        return stk_error(STK_ERR_INVALID_ARG, "tokens: input %s must be [N, D, h, w]",
                         stk_tensor_shape_str(x));
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *f = NULL, *y = NULL;
    stk_status st = stk_flatten(x, 2, 3, &f);
    if (st == STK_OK) st = stk_transpose(f, 1, 2, &y);
    return eng_compose_end(s, st, y, out);
}

/* The class token [1, 1, D] expanded to [N, 1, D], put before the tokens. */
stk_status eng_class_token_forward(stk_tensor *token, stk_tensor *x, stk_tensor **out)
{
    if (stk_tensor_ndim(x) != 3 || stk_tensor_dim(x, 2) != stk_tensor_dim(token, 2))
        return stk_error(STK_ERR_INVALID_ARG, "class token: input %s must be [N, S, %lld]",
                         stk_tensor_shape_str(x), (long long)stk_tensor_dim(token, 2));
    int64_t shape[3] = {stk_tensor_dim(x, 0), 1, stk_tensor_dim(x, 2)};
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *e = NULL, *y = NULL;
    stk_status st = stk_expand(token, 3, shape, &e);
    if (st == STK_OK) {
        stk_tensor *two[2] = {e, x};
        st = stk_cat(2, two, 1, &y);
    }
    return eng_compose_end(s, st, y, out);
}

stk_status eng_pos_embed_forward(stk_tensor *pos, stk_tensor *x, stk_tensor **out)
{
    if (stk_tensor_ndim(x) != 3 || stk_tensor_dim(x, 1) != stk_tensor_dim(pos, 1) ||
        stk_tensor_dim(x, 2) != stk_tensor_dim(pos, 2))
        return stk_error(STK_ERR_INVALID_ARG,
                         "position embedding %s does not fit tokens %s (was the model built "
                         "for another image size?)",
                         stk_tensor_shape_str(pos), stk_tensor_shape_str(x));
    return stk_add(x, pos, out);
}

/* x[:, 0]: [N, S, D] -> [N, D] */
stk_status eng_select_token_forward(stk_tensor *x, stk_tensor **out)
{
    if (stk_tensor_ndim(x) != 3)
        return stk_error(STK_ERR_INVALID_ARG, "token 0: input %s must be [N, S, D]",
                         stk_tensor_shape_str(x));
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *t = NULL, *y = NULL;
    stk_status st = stk_narrow(x, 1, 0, 1, &t);
    if (st == STK_OK) st = stk_squeeze(t, 1, &y);
    return eng_compose_end(s, st, y, out);
}
