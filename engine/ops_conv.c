/* conv2d (stride, padding, dilation, groups, optional bias). */
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops_impl.h"

#include <stdlib.h>

static void desc_from(const stk_tensor *x, const stk_tensor *w, const stk_conv2d_params *p,
                      stk_conv2d_desc *d)
{
    d->n = x->shape[0];
    d->c = x->shape[1];
    d->h = x->shape[2];
    d->w = x->shape[3];
    d->k = w->shape[0];
    d->r = w->shape[2];
    d->s = w->shape[3];
    d->stride_h = p->stride[0];
    d->stride_w = p->stride[1];
    d->pad_h = p->padding[0];
    d->pad_w = p->padding[1];
    d->dil_h = p->dilation[0];
    d->dil_w = p->dilation[1];
    d->groups = p->groups;
    d->oh = (d->h + 2 * d->pad_h - d->dil_h * (d->r - 1) - 1) / d->stride_h + 1;
    d->ow = (d->w + 2 * d->pad_w - d->dil_w * (d->s - 1) - 1) / d->stride_w + 1;
}

enum { CONV_FORWARD, CONV_BACKWARD_DATA, CONV_BACKWARD_WEIGHT };

/* One convolution pass on f32 tensors: out = pass(in0, in1). Under --amp
 * autocast on the GPU, from f16 copies of the inputs into an f16 result
 * converted back to f32 (cuDNN's pseudo-half: f32 accumulation). (The
 * CPU's bf16 passes: conv_forward_bf16 and conv_backward.) */
static stk_status conv_pass(const stk_backend *be, int pass, const stk_conv2d_desc *d,
                            const stk_tensor *in0, const stk_tensor *in1, stk_tensor *out)
{
    if (!eng_autocast_f16(be)) {
        const float *a = tensor_f32(in0), *b = tensor_f32(in1);
        float *o = tensor_f32(out);
        return pass == CONV_FORWARD         ? be->conv2d_forward(d, a, b, o)
               : pass == CONV_BACKWARD_DATA ? be->conv2d_backward_data(d, a, b, o)
                                            : be->conv2d_backward_weight(d, a, b, o);
    }
    stk_tensor *a = NULL, *b = NULL, *o = NULL;
    stk_status st;
    if ((st = eng_half_copy(be, in0, &a)) == STK_OK &&
        (st = eng_half_copy(be, in1, &b)) == STK_OK &&
        (st = eng_tensor_new(stk_tensor_device(out), STK_F16, out->ndim, out->shape, false, &o)) ==
            STK_OK) {
        const uint16_t *ha = tensor_ptr(a), *hb = tensor_ptr(b);
        uint16_t *ho = tensor_ptr(o);
        st = pass == CONV_FORWARD         ? be->conv2d_forward_f16(d, ha, hb, ho)
             : pass == CONV_BACKWARD_DATA ? be->conv2d_backward_data_f16(d, ha, hb, ho)
                                          : be->conv2d_backward_weight_f16(d, ha, hb, ho);
        if (st == STK_OK) be->convert(STK_F32, tensor_ptr(out), STK_F16, ho, stk_tensor_numel(out));
    }
    stk_tensor_release(a);
    stk_tensor_release(b);
    stk_tensor_release(o);
    return st;
}

/* The forward in bf16 (the CPU under --amp). When the weight's gradient
 * will be wanted, *kept receives x in bf16 in the layout the backward
 * weights pass reads (a byte tensor the node keeps), so that the backward
 * does not convert x again. */
static stk_status conv_forward_bf16(const stk_backend *be, const stk_conv2d_desc *d, stk_tensor *x,
                                    stk_tensor *w, bool keep_input, stk_tensor *y,
                                    stk_tensor **kept)
{
    *kept = NULL;
    int64_t bytes = keep_input ? (int64_t)be->conv2d_bf16_kept_input_bytes(d) : 0;
    stk_status st;
    if (bytes &&
        (st = eng_tensor_new(stk_tensor_device(x), STK_U8, 1, &bytes, false, kept)) != STK_OK)
        return st;
    st = be->conv2d_forward_bf16(d, tensor_f32(x), tensor_f32(w), tensor_f32(y),
                                 *kept ? tensor_ptr(*kept) : NULL);
    if (st != STK_OK) {
        stk_tensor_release(*kept);
        *kept = NULL;
    }
    return st;
}

static stk_status conv_backward(stk_node *n, stk_tensor *g, stk_tensor **gin)
{
    stk_tensor *x = n->saved[0], *w = n->saved[1], *x_kept = n->saved[2];
    stk_conv2d_desc *d = n->ext;
    const stk_backend *be;
    stk_status st = eng_backend_of(g, &be);
    if (st != STK_OK) return st;
    if (eng_node_needs_grad(n, 0) && (st = eng_node_grad_like(n, 0, false, &gin[0])) != STK_OK)
        return st;
    if (eng_node_needs_grad(n, 1) && (st = eng_node_grad_like(n, 1, false, &gin[1])) != STK_OK)
        return st;
    if (eng_autocast_bf16(be) && (gin[0] || gin[1])) {
        st = be->conv2d_backward_bf16(
            d, tensor_f32(x), x_kept ? tensor_ptr(x_kept) : NULL, tensor_f32(w), tensor_f32(g),
            gin[0] ? tensor_f32(gin[0]) : NULL, gin[1] ? tensor_f32(gin[1]) : NULL);
        if (st != STK_OK) return st;
    } else {
        if (gin[0] && (st = conv_pass(be, CONV_BACKWARD_DATA, d, w, g, gin[0])) != STK_OK)
            return st;
        if (gin[1] && (st = conv_pass(be, CONV_BACKWARD_WEIGHT, d, x, g, gin[1])) != STK_OK)
            return st;
    }
    if (n->n_inputs > 2 && eng_node_needs_grad(n, 2)) { /* sum over N, H, W */
        if ((st = eng_node_grad_like(n, 2, false, &gin[2])) != STK_OK) return st;
        int64_t ys[4] = {0, 1, 0, 0};
        be->sum_to(4, g->shape, tensor_f32(g), ys, tensor_f32(gin[2]), d->k);
    }
    return STK_OK;
}

stk_status stk_conv2d(stk_tensor *x, stk_tensor *w, stk_tensor *b, const stk_conv2d_params *pp,
                      stk_tensor **out)
{
    stk_conv2d_params p = pp ? *pp : STK_CONV2D_DEFAULT;
    stk_status st;
    if ((st = eng_check_f32("conv2d", x, "the input")) != STK_OK) return st;
    if ((st = eng_check_f32("conv2d", w, "the weight")) != STK_OK) return st;
    if ((st = eng_check_same_device("conv2d", x, w)) != STK_OK) return st;
    char xs[128];
    snprintf(xs, sizeof xs, "%s", stk_tensor_shape_str(x));
    if (x->ndim != 4 || w->ndim != 4)
        return stk_error(STK_ERR_INVALID_ARG, "conv2d: input %s and weight %s must be 4-D", xs,
                         stk_tensor_shape_str(w));
    if (p.groups < 1 || p.stride[0] < 1 || p.stride[1] < 1 || p.dilation[0] < 1 ||
        p.dilation[1] < 1 || p.padding[0] < 0 || p.padding[1] < 0)
        return stk_error(STK_ERR_INVALID_ARG,
                         "conv2d: stride and dilation must be >= 1, padding >= 0, groups >= 1");
    if (x->shape[1] % p.groups || w->shape[0] % p.groups || w->shape[1] * p.groups != x->shape[1])
        return stk_error(STK_ERR_INVALID_ARG,
                         "conv2d: input %s and weight %s do not match with %d groups", xs,
                         stk_tensor_shape_str(w), p.groups);
    stk_conv2d_desc *d = malloc(sizeof *d);
    if (!d) return stk_error(STK_ERR_NOMEM, "conv2d: no memory");
    desc_from(x, w, &p, d);
    if (d->oh < 1 || d->ow < 1) {
        free(d);
        return stk_error(STK_ERR_INVALID_ARG,
                         "conv2d: kernel %s is larger than the padded input %s",
                         stk_tensor_shape_str(w), xs);
    }
    if (b && (b->ndim != 1 || b->shape[0] != d->k || b->dtype != STK_F32)) {
        long long k = (long long)d->k;
        free(d);
        return stk_error(STK_ERR_INVALID_ARG, "conv2d: bias %s must be f32 [%lld]",
                         stk_tensor_shape_str(b), k);
    }
    const stk_backend *be;
    stk_tensor *xc = NULL, *wc = NULL, *y = NULL, *x_kept = NULL;
    if ((st = eng_backend_of(x, &be)) != STK_OK) goto fail;
    if ((st = eng_tensor_contiguous_raw(x, &xc)) != STK_OK) goto fail;
    if ((st = eng_tensor_contiguous_raw(w, &wc)) != STK_OK) goto fail;
    int64_t shape[4] = {d->n, d->k, d->oh, d->ow};
    if ((st = eng_tensor_new(x->storage->device, STK_F32, 4, shape, false, &y)) != STK_OK)
        goto fail;
    if (eng_autocast_bf16(be))
        st = conv_forward_bf16(be, d, xc, wc, stk_grad_enabled() && w->requires_grad, y, &x_kept);
    else
        st = conv_pass(be, CONV_FORWARD, d, xc, wc, y);
    if (st != STK_OK) goto fail;
    if (b) {
        int64_t ys[4] = {d->k * d->oh * d->ow, d->oh * d->ow, d->ow, 1},
                bs[4] = {0, b->strides[0], 0, 0};
        be->binary(STK_BINARY_ADD, 4, shape, tensor_f32(y), tensor_f32(y), ys, tensor_f32(b), bs);
    }
    stk_tensor *in[3] = {x, w, b};
    stk_node *n;
    if ((st = eng_node_attach(y, "conv2d", conv_backward, b ? 3 : 2, in, &n)) != STK_OK) goto fail;
    if (n) {
        eng_node_save(n, 0, xc);
        eng_node_save(n, 1, wc);
        if (x_kept) eng_node_save(n, 2, x_kept);
        n->ext = d;
        d = NULL;
    }
    free(d);
    stk_tensor_release(xc);
    stk_tensor_release(wc);
    stk_tensor_release(x_kept);
    *out = eng_tensor_track(y);
    return STK_OK;
fail:
    free(d);
    stk_tensor_release(xc);
    stk_tensor_release(wc);
    stk_tensor_release(x_kept);
    stk_tensor_release(y);
    return st;
}
