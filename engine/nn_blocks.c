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
 * dropout: q, k, v from one projection [N, S, 3D], softmax(q k^T /
 * sqrt(D/H)) v per head (stk_attention_packed), then out_proj. */
stk_status eng_attention_forward(stk_tensor *x, stk_tensor *in_w, stk_tensor *in_b,
                                 stk_tensor *out_w, stk_tensor *out_b, int heads, stk_tensor **out)
{
    if (stk_tensor_ndim(x) != 3)
        return stk_error(STK_ERR_INVALID_ARG, "attention: input %s must be [N, S, D]",
                         stk_tensor_shape_str(x));
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *qkv = NULL, *o = NULL, *y = NULL;
    stk_status st = stk_linear(x, in_w, in_b, &qkv);
    if (st == STK_OK) st = stk_attention_packed(qkv, heads, &o);
    if (st == STK_OK) {
        eng_scope_drop(qkv);
        st = stk_linear(o, out_w, out_b, &y);
    }
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
