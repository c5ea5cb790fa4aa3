/* Helpers for the engine's Check programs: random tensors and a
 * finite-difference gradient check.
 *
 * gradcheck: loss = sum(f(inputs) * R) for a fixed random R; the analytic
 * gradient comes from stk_backward(out, R), the numeric one from central
 * differences on each input element (all of them for small inputs, a fixed
 * sample of 64 otherwise), evaluated in no-grad mode with the loss summed in
 * double. f32 central differences with step eps have a rounding error of
 * about 1e-7 * |loss| / eps, so tolerances are |num - ana| <= tol * max(1,
 * |num|, |ana|) with tol chosen per op (1e-2 for smooth ops at eps 1e-2:
 * truncation error eps^2 * f''' ~ 1e-4, rounding ~1e-3). Ops with kinks
 * (relu, max pool) get inputs kept away from them. */
#pragma once

#include "common/rng.h"
#include "engine/autograd.h"
#include "engine/ops.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A tensor of uniform values in [lo, hi) from Philox(seed) (the step scope
 * owns it when one is active, like any new tensor). */
static inline stk_tensor *rand_tensor(uint64_t seed, int ndim, const int64_t *shape, float lo,
                                      float hi)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    stk_rng r;
    stk_rng_init(&r, seed, 77, 0);
    for (int64_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * (float)stk_rng_uniform(&r);
    stk_tensor *t;
    ck_assert_int_eq(stk_tensor_from_host(STK_F32, ndim, shape, v, &t), STK_OK);
    free(v);
    return t;
}

static inline float *host_f32(const stk_tensor *t)
{
    int64_t n = stk_tensor_numel(t);
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    ck_assert_int_eq(stk_tensor_to_host(t, v, (size_t)n * sizeof *v), STK_OK);
    return v;
}

typedef stk_status (*gc_fn)(stk_tensor **in, void *ctx, stk_tensor **out);

static inline double gc_loss(gc_fn f, stk_tensor **in, void *ctx, const float *r)
{
    stk_scope *s;
    ck_assert_int_eq(stk_scope_begin(&s), STK_OK);
    stk_no_grad_begin();
    stk_tensor *out;
    stk_status st = f(in, ctx, &out);
    ck_assert_msg(st == STK_OK, "forward failed: %s", stk_last_error());
    float *v = host_f32(out);
    double l = 0.0;
    for (int64_t i = 0; i < stk_tensor_numel(out); i++) l += (double)v[i] * r[i];
    free(v);
    stk_no_grad_end();
    stk_scope_end(s);
    return l;
}

/* Returns the worst relative error seen (for reporting); fails the test above tol. */
static inline double gradcheck(const char *name, gc_fn f, int n_in, stk_tensor **in, void *ctx,
                               double eps, double tol)
{
    stk_scope *s;
    ck_assert_int_eq(stk_scope_begin(&s), STK_OK);
    for (int i = 0; i < n_in; i++)
        if (in[i]) stk_tensor_zero_grad(in[i]);
    stk_tensor *out;
    stk_status st = f(in, ctx, &out);
    ck_assert_msg(st == STK_OK, "%s: forward failed: %s", name, stk_last_error());
    int64_t shape[STK_MAX_DIMS];
    for (int d = 0; d < stk_tensor_ndim(out); d++) shape[d] = stk_tensor_dim(out, d);
    stk_tensor *rt = rand_tensor(4242, stk_tensor_ndim(out), shape, -1.f, 1.f);
    stk_tensor_retain(rt); /* outlives the scope */
    float *r = host_f32(rt);
    st = stk_backward(out, rt, false);
    ck_assert_msg(st == STK_OK, "%s: backward failed: %s", name, stk_last_error());
    stk_scope_end(s);
    double worst = 0.0;
    for (int i = 0; i < n_in; i++) {
        if (!in[i] || !stk_tensor_requires_grad(in[i])) continue;
        stk_tensor *g = stk_tensor_grad(in[i]);
        ck_assert_msg(g != NULL, "%s: input %d got no gradient", name, i);
        float *ga = host_f32(g);
        float *x = stk_tensor_data(in[i]);
        ck_assert(stk_tensor_is_contiguous(in[i]));
        int64_t n = stk_tensor_numel(in[i]);
        int64_t step = n <= 64 ? 1 : n / 64;
        for (int64_t j = 0; j < n; j += step) {
            float keep = x[j];
            x[j] = keep + (float)eps;
            double lp = gc_loss(f, in, ctx, r);
            x[j] = keep - (float)eps;
            double lm = gc_loss(f, in, ctx, r);
            x[j] = keep;
            double num = (lp - lm) / (2 * eps), ana = ga[j];
            double scale = fmax(1.0, fmax(fabs(num), fabs(ana)));
            double err = fabs(num - ana) / scale;
            if (err > worst) worst = err;
            ck_assert_msg(err <= tol, "%s: input %d element %lld: numeric %.6g, analytic %.6g",
                          name, i, (long long)j, num, ana);
        }
        free(ga);
    }
    free(r);
    stk_tensor_release(rt);
    return worst;
}
