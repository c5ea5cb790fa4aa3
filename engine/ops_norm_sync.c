/* Batch norm with the statistics of every rank's batch (stk_batch_norm_sync).
 *
 * Built from the backend's eval-mode kernels, which normalise with given
 * statistics: forward computes this rank's per-channel sums, all-reduces
 * them into the global mean and variance and normalises with those;
 * backward lets the eval kernel produce gamma * invstd * dy and this rank's
 * sums of dy and dy * x_hat, all-reduces the sums and subtracts the terms
 * the statistics contribute:
 *     dx = gamma * invstd * (dy - sum(dy) / M - x_hat * sum(dy * x_hat) / M)
 * with M the global count of values per channel. The sums travel through
 * host memory: C or 2C floats per call. */
#include "engine/ops.h"
#include "engine/ops_impl.h"

#include <math.h>
#include <stdlib.h>

typedef struct sync_state {
    stk_allreduce ar;
    double count; /* values per channel over all ranks */
} sync_state;

/* x [N, C, H, W] or [N, C] as the [1, C, 1, 1] or [1, C] shape of a per-channel vector */
static void channel_shape(const stk_tensor *x, int64_t *shape)
{
    for (int d = 0; d < x->ndim; d++) shape[d] = d == 1 ? x->shape[1] : 1;
}

/* per-channel sum of x (x contiguous) into host h[0..C) */
static stk_status channel_sums(stk_tensor *x, float *h)
{
    int64_t shape[4];
    channel_shape(x, shape);
    stk_tensor *like = NULL, *s = NULL;
    stk_status st = eng_tensor_new(x->storage->device, STK_F32, x->ndim, shape, false, &like);
    if (st == STK_OK) st = eng_sum_to_like(x, like, &s);
    if (st == STK_OK) st = stk_tensor_to_host(s, h, (size_t)x->shape[1] * sizeof(float));
    stk_tensor_release(like);
    stk_tensor_release(s);
    return st;
}

/* a per-channel vector on x's device, shaped to broadcast against x */
static stk_status channel_tensor(const stk_tensor *x, const float *h, stk_tensor **out)
{
    int64_t shape[4];
    channel_shape(x, shape);
    STK_TRY(eng_tensor_new(x->storage->device, STK_F32, x->ndim, shape, false, out));
    return stk_tensor_copy_from_host(*out, h, (size_t)x->shape[1] * sizeof(float));
}

static stk_status all_sum(const stk_allreduce *ar, float *buf, size_t n)
{
    stk_status st = ar->sum(ar->ctx, buf, n);
    return st == STK_OK ? st : stk_error_prefix(st, "sync batch norm");
}

/* The global statistics of x: mean and biased variance into host vectors
 * (2 * C floats of work space in `h`), and the global count. */
static stk_status global_stats(stk_tensor *x, const stk_allreduce *ar, float *mean, float *var,
                               double *count)
{
    int64_t C = x->shape[1];
    float *h = malloc((size_t)(C + 1) * sizeof *h);
    if (!h) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_tensor *m = NULL, *d = NULL, *d2 = NULL;
    stk_status st = channel_sums(x, h);
    h[C] = (float)(stk_tensor_numel(x) / C); /* exact below 2^24 values per channel per rank */
    if (st == STK_OK) st = all_sum(ar, h, (size_t)C + 1);
    if (st == STK_OK) {
        *count = h[C];
        for (int64_t c = 0; c < C; c++) mean[c] = (float)(h[c] / *count);
        st = channel_tensor(x, mean, &m);
    }
    /* second pass: the centred sum of squares (no cancellation) */
    if (st == STK_OK) st = eng_binary_raw(STK_BINARY_SUB, x, m, &d);
    if (st == STK_OK) st = eng_binary_raw(STK_BINARY_MUL, d, d, &d2);
    if (st == STK_OK) st = channel_sums(d2, h);
    if (st == STK_OK) st = all_sum(ar, h, (size_t)C);
    if (st == STK_OK)
        for (int64_t c = 0; c < C; c++) var[c] = (float)(h[c] / *count);
    stk_tensor_release(m);
    stk_tensor_release(d);
    stk_tensor_release(d2);
    free(h);
    return st;
}

static stk_status update_running(stk_tensor *rm, stk_tensor *rv, const float *mean,
                                 const float *var, double count, float momentum)
{
    int64_t C = stk_tensor_numel(rm);
    float *h = malloc((size_t)(2 * C) * sizeof *h);
    if (!h) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = stk_tensor_to_host(rm, h, (size_t)C * sizeof *h);
    if (st == STK_OK) st = stk_tensor_to_host(rv, h + C, (size_t)C * sizeof *h);
    double unbias = count > 1 ? count / (count - 1) : 1.0;
    for (int64_t c = 0; c < C && st == STK_OK; c++) {
        h[c] = (1.f - momentum) * h[c] + momentum * mean[c];
        h[C + c] = (1.f - momentum) * h[C + c] + momentum * (float)(var[c] * unbias);
    }
    if (st == STK_OK) st = stk_tensor_copy_from_host(rm, h, (size_t)C * sizeof *h);
    if (st == STK_OK) st = stk_tensor_copy_from_host(rv, h + C, (size_t)C * sizeof *h);
    free(h);
    return st;
}

/* gx -= a[c] + b[c] * (x - mean[c]), all contiguous */
static stk_status subtract_stat_terms(stk_tensor *gx, stk_tensor *x, stk_tensor *mean,
                                      const float *a, const float *b)
{
    stk_tensor *ta = NULL, *tb = NULL, *d = NULL, *bd = NULL, *corr = NULL, *r = NULL;
    stk_status st = channel_tensor(x, a, &ta);
    if (st == STK_OK) st = channel_tensor(x, b, &tb);
    if (st == STK_OK) st = eng_binary_raw(STK_BINARY_SUB, x, mean, &d);
    if (st == STK_OK) st = eng_binary_raw(STK_BINARY_MUL, d, tb, &bd);
    if (st == STK_OK) st = eng_binary_raw(STK_BINARY_ADD, bd, ta, &corr);
    if (st == STK_OK) st = eng_binary_raw(STK_BINARY_SUB, gx, corr, &r);
    if (st == STK_OK) st = stk_tensor_copy(gx, r);
    stk_tensor *all[] = {ta, tb, d, bd, corr, r};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) stk_tensor_release(all[i]);
    return st;
}

static stk_status sync_backward(stk_node *n, stk_tensor *g, stk_tensor **gin)
{
    sync_state *s = n->ext;
    stk_tensor *x = n->saved[0], *mean = n->saved[1], *var = n->saved[2], *gamma = n->saved[3];
    int64_t N = x->shape[0], C = x->shape[1], HW = x->ndim == 4 ? x->shape[2] * x->shape[3] : 1;
    const stk_backend *be;
    STK_TRY(eng_backend_of(g, &be));
    stk_tensor *gc = NULL, *gg = NULL, *gb = NULL;
    float *h = malloc((size_t)(5 * C) * sizeof *h);
    stk_status st = h ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < 3 && st == STK_OK; i++)
        if (eng_node_needs_grad(n, i)) st = eng_node_grad_like(n, i, false, &gin[i]);
    /* this rank's sums are needed even where gamma or beta take no gradient */
    int64_t cshape[1] = {C};
    if (st == STK_OK) st = eng_tensor_new(x->storage->device, STK_F32, 1, cshape, false, &gg);
    if (st == STK_OK) st = eng_tensor_new(x->storage->device, STK_F32, 1, cshape, false, &gb);
    if (st == STK_OK) st = eng_tensor_contiguous_raw(g, &gc);
    if (st != STK_OK) goto out;
    be->batch_norm_eval_backward(N, C, HW, tensor_f32(x), gamma ? tensor_f32(gamma) : NULL,
                                 tensor_f32(gc), tensor_f32(mean), tensor_f32(var), (float)n->fv[0],
                                 gin[0] ? tensor_f32(gin[0]) : NULL, tensor_f32(gg),
                                 tensor_f32(gb));
    if (gin[1] && (st = stk_tensor_copy(gin[1], gg)) != STK_OK) goto out;
    if (gin[2] && (st = stk_tensor_copy(gin[2], gb)) != STK_OK) goto out;
    /* h: sum dy | sum dy x_hat | var | gamma, then a | b */
    float *sums = h, *hv = h + 2 * C, *hg = h + 3 * C;
    if ((st = stk_tensor_to_host(gb, sums, (size_t)C * sizeof *h)) != STK_OK ||
        (st = stk_tensor_to_host(gg, sums + C, (size_t)C * sizeof *h)) != STK_OK ||
        (st = all_sum(&s->ar, sums, (size_t)(2 * C))) != STK_OK || !gin[0])
        goto out;
    if ((st = stk_tensor_to_host(var, hv, (size_t)C * sizeof *h)) != STK_OK) goto out;
    if (gamma && (st = stk_tensor_to_host(gamma, hg, (size_t)C * sizeof *h)) != STK_OK) goto out;
    float *a = hv, *b = h + 4 * C; /* a overwrites var once read */
    for (int64_t c = 0; c < C; c++) {
        double invstd = 1.0 / sqrt((double)hv[c] + n->fv[0]);
        double k = (gamma ? hg[c] : 1.0) * invstd;
        a[c] = (float)(k * sums[c] / s->count);
        b[c] = (float)(k * invstd * sums[C + c] / s->count);
    }
    stk_tensor *mv = NULL;
    int64_t shape[4];
    channel_shape(x, shape);
    if ((st = eng_reshape_raw(mean, x->ndim, shape, &mv)) == STK_OK)
        st = subtract_stat_terms(gin[0], x, mv, a, b);
    stk_tensor_release(mv);
out:
    stk_tensor_release(gc);
    stk_tensor_release(gg);
    stk_tensor_release(gb);
    free(h);
    return st;
}

stk_status stk_batch_norm_sync(stk_tensor *x, stk_tensor *gamma, stk_tensor *beta,
                               stk_tensor *running_mean, stk_tensor *running_var, float momentum,
                               float eps, const stk_allreduce *ar, stk_tensor **out)
{
    STK_TRY(eng_check_f32("batch_norm_sync", x, "the input"));
    if (x->ndim != 4 && x->ndim != 2)
        return stk_error(STK_ERR_INVALID_ARG,
                         "batch_norm_sync: input %s must be [N, C, H, W] or [N, C]",
                         stk_tensor_shape_str(x));
    if (!ar || !ar->sum)
        return stk_error(STK_ERR_INVALID_ARG, "batch_norm_sync: no all-reduce given");
    int64_t C = x->shape[1];
    STK_TRY(eng_bn_check_channel_vec("weight", gamma, C));
    STK_TRY(eng_bn_check_channel_vec("bias", beta, C));
    STK_TRY(eng_bn_check_channel_vec("running_mean", running_mean, C));
    STK_TRY(eng_bn_check_channel_vec("running_var", running_var, C));
    if (!running_mean != !running_var)
        return stk_error(STK_ERR_INVALID_ARG,
                         "batch_norm_sync: give both running statistics or neither");
    const stk_backend *be;
    STK_TRY(eng_backend_of(x, &be));
    int64_t N = x->shape[0], HW = x->ndim == 4 ? x->shape[2] * x->shape[3] : 1;
    stk_tensor *xc = NULL, *y = NULL, *mean = NULL, *var = NULL;
    float *h = malloc((size_t)(2 * C) * sizeof *h);
    sync_state *s = malloc(sizeof *s);
    stk_status st = h && s ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    double count = 0;
    if (st == STK_OK) st = eng_tensor_contiguous_raw(x, &xc);
    if (st == STK_OK) st = global_stats(xc, ar, h, h + C, &count);
    if (st == STK_OK && count < 2)
        st = stk_error(STK_ERR_INVALID_ARG,
                       "batch_norm_sync: training needs more than one value per channel, got "
                       "input %s on every rank",
                       stk_tensor_shape_str(x));
    if (st != STK_OK) goto fail;
    int64_t cshape[1] = {C};
    if ((st = eng_tensor_new(x->storage->device, STK_F32, 1, cshape, false, &mean)) != STK_OK ||
        (st = stk_tensor_copy_from_host(mean, h, (size_t)C * sizeof *h)) != STK_OK ||
        (st = eng_tensor_new(x->storage->device, STK_F32, 1, cshape, false, &var)) != STK_OK ||
        (st = stk_tensor_copy_from_host(var, h + C, (size_t)C * sizeof *h)) != STK_OK ||
        (st = eng_tensor_new_like(x, false, &y)) != STK_OK)
        goto fail;
    be->batch_norm_eval(N, C, HW, tensor_f32(xc), gamma ? tensor_f32(gamma) : NULL,
                        beta ? tensor_f32(beta) : NULL, tensor_f32(mean), tensor_f32(var), eps,
                        tensor_f32(y));
    if (running_mean &&
        (st = update_running(running_mean, running_var, h, h + C, count, momentum)) != STK_OK)
        goto fail;
    stk_tensor *in[3] = {x, gamma, beta};
    stk_node *n;
    if ((st = eng_node_attach(y, "batch_norm_sync", sync_backward, 3, in, &n)) != STK_OK) goto fail;
    if (n) {
        *s = (sync_state){.ar = *ar, .count = count};
        n->ext = s;
        s = NULL;
        n->fv[0] = eps;
        eng_node_save(n, 0, xc);
        eng_node_save(n, 1, mean);
        eng_node_save(n, 2, var);
        if (gamma) eng_node_save(n, 3, gamma); /* its values: n->inputs holds shapes only */
    }
    stk_tensor_release(xc);
    stk_tensor_release(mean);
    stk_tensor_release(var);
    free(h);
    free(s);
    *out = eng_tensor_track(y);
    return STK_OK;
fail:
    stk_tensor_release(xc);
    stk_tensor_release(y);
    stk_tensor_release(mean);
    stk_tensor_release(var);
    free(h);
    free(s);
    return st;
}
