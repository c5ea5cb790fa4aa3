/* Engine: tensors, views, autograd, step scopes, element-wise, reduction and
 * matmul ops (values and finite-difference gradients). */
#include "check_main.h"
#include "engine_testlib.h"
#include "engine/tensor_impl.h"

#include <stdio.h>

static stk_tensor *from(int ndim, const int64_t *shape, const float *v)
{
    stk_tensor *t;
    ck_assert_int_eq(stk_tensor_from_host(STK_F32, ndim, shape, v, &t), STK_OK);
    return t;
}

static void expect_values(const stk_tensor *t, const float *want, int64_t n, float tol)
{
    ck_assert_int_eq(stk_tensor_numel(t), n);
    float *v = host_f32(t);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabsf(v[i] - want[i]) <= tol, "element %lld: %g, want %g", (long long)i, v[i],
                      want[i]);
    free(v);
}

/* ---- tensors and views ---------------------------------------------------- */

START_TEST(test_create_and_copy)
{
    int64_t shape[2] = {2, 3};
    float v[6] = {1, 2, 3, 4, 5, 6};
    stk_tensor *t = from(2, shape, v);
    ck_assert_int_eq(stk_tensor_ndim(t), 2);
    ck_assert_int_eq(stk_tensor_dim(t, -1), 3);
    ck_assert(stk_tensor_is_contiguous(t));
    ck_assert_int_eq(stk_tensor_stride(t, 0), 3);
    expect_values(t, v, 6, 0.f);
    ck_assert_int_eq(stk_tensor_fill(t, 2.5), STK_OK);
    float w[6] = {2.5, 2.5, 2.5, 2.5, 2.5, 2.5};
    expect_values(t, w, 6, 0.f);
    float small[2];
    ck_assert_int_eq(stk_tensor_to_host(t, small, sizeof small), STK_ERR_INVALID_ARG);
    int64_t bad[2] = {2, -1};
    stk_tensor *u;
    ck_assert_int_eq(stk_tensor_zeros(STK_F32, 2, bad, &u), STK_ERR_INVALID_ARG);
    int64_t big[7] = {1, 1, 1, 1, 1, 1, 1};
    ck_assert_int_eq(stk_tensor_zeros(STK_F32, 7, big, &u), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "rank 7"));
    stk_tensor_release(t);
}
END_TEST

START_TEST(test_views_follow_pytorch)
{
    int64_t shape[3] = {2, 3, 4};
    float v[24];
    for (int i = 0; i < 24; i++) v[i] = (float)i;
    stk_tensor *t = from(3, shape, v), *p, *q, *r;
    /* transpose(0, 1): [3, 2, 4] with strides (4, 12, 1), shares storage */
    ck_assert_int_eq(stk_transpose(t, 0, 1, &p), STK_OK);
    ck_assert_int_eq(stk_tensor_dim(p, 0), 3);
    ck_assert_int_eq(stk_tensor_stride(p, 0), 4);
    ck_assert_int_eq(stk_tensor_stride(p, 1), 12);
    ck_assert(!stk_tensor_is_contiguous(p));
    ck_assert_ptr_eq(stk_tensor_data(p), stk_tensor_data(t));
    /* view merging the last two dims [3, 8] is impossible: dims 1, 2 are not
     * contiguous together (torch: "view size is not compatible") */
    int64_t s38[2] = {3, 8};
    ck_assert_int_eq(stk_view(p, 2, s38, &q), STK_ERR_INVALID_ARG);
    /* but splitting the contiguous last dim works: [3, 2, 2, 2] */
    int64_t s3222[4] = {3, 2, 2, 2};
    ck_assert_int_eq(stk_view(p, 4, s3222, &q), STK_OK);
    ck_assert_int_eq(stk_tensor_stride(q, 1), 12);
    ck_assert_int_eq(stk_tensor_stride(q, 2), 2);
    stk_tensor_release(q);
    /* reshape copies: values in row-major order of the transposed tensor */
    ck_assert_int_eq(stk_reshape(p, 2, s38, &r), STK_OK);
    ck_assert(stk_tensor_is_contiguous(r));
    float want[24]; /* r[i][j*4+k] = t[j][i][k] */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 4; k++) want[(i * 2 + j) * 4 + k] = (float)(j * 12 + i * 4 + k);
    expect_values(r, want, 24, 0.f);
    stk_tensor_release(r);
    /* -1 inference */
    int64_t sm1[2] = {-1, 6};
    ck_assert_int_eq(stk_view(t, 2, sm1, &q), STK_OK);
    ck_assert_int_eq(stk_tensor_dim(q, 0), 4);
    stk_tensor_release(q);
    /* narrow, squeeze, unsqueeze, expand, permute */
    ck_assert_int_eq(stk_narrow(t, 2, 1, 2, &q), STK_OK);
    float nw[12] = {1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22};
    expect_values(q, nw, 12, 0.f);
    stk_tensor_release(q);
    ck_assert_int_eq(stk_unsqueeze(t, 1, &q), STK_OK);
    ck_assert_int_eq(stk_tensor_ndim(q), 4);
    ck_assert_int_eq(stk_tensor_dim(q, 1), 1);
    ck_assert_int_eq(stk_squeeze(q, 1, &r), STK_OK);
    ck_assert_int_eq(stk_tensor_ndim(r), 3);
    stk_tensor_release(q);
    stk_tensor_release(r);
    int64_t s1[3] = {1, 3, 1};
    float c3[3] = {1, 2, 3};
    stk_tensor *col = from(3, s1, c3);
    int64_t ex[3] = {2, -1, 4};
    ck_assert_int_eq(stk_expand(col, 3, ex, &q), STK_OK);
    ck_assert_int_eq(stk_tensor_stride(q, 0), 0);
    float e[24];
    for (int i = 0; i < 24; i++) e[i] = (float)((i / 4) % 3 + 1);
    expect_values(q, e, 24, 0.f);
    stk_tensor_release(q);
    int64_t ex_bad[3] = {2, 2, 4};
    ck_assert_int_eq(stk_expand(col, 3, ex_bad, &q), STK_ERR_INVALID_ARG);
    int perm[3] = {2, 0, 1};
    ck_assert_int_eq(stk_permute(t, perm, &q), STK_OK);
    ck_assert_int_eq(stk_tensor_dim(q, 0), 4);
    ck_assert_int_eq(stk_tensor_stride(q, 0), 1);
    stk_tensor_release(q);
    int bad_perm[3] = {0, 0, 1};
    ck_assert_int_eq(stk_permute(t, bad_perm, &q), STK_ERR_INVALID_ARG);
    stk_tensor_release(col);
    stk_tensor_release(p);
    stk_tensor_release(t);
}
END_TEST

START_TEST(test_dtype_conversion)
{
    int64_t shape[1] = {6};
    float v[6] = {1.0f, -2.5f, 65504.f, 1e-8f, 3.14159265f, 70000.f};
    stk_tensor *t = from(1, shape, v), *h, *b, *back;
    ck_assert_int_eq(stk_tensor_to_dtype(t, STK_F16, &h), STK_OK);
    ck_assert_int_eq(stk_tensor_to_dtype(h, STK_F32, &back), STK_OK);
    float *r = host_f32(back);
    ck_assert_float_eq(r[0], 1.0f);
    ck_assert_float_eq(r[1], -2.5f);
    ck_assert_float_eq(r[2], 65504.f);
    ck_assert(isinf(r[5])); /* beyond half's range */
    ck_assert_float_eq_tol(r[4], 3.140625f, 1e-6f);
    free(r);
    stk_tensor_release(back);
    ck_assert_int_eq(stk_tensor_to_dtype(t, STK_BF16, &b), STK_OK);
    ck_assert_int_eq(stk_tensor_to_dtype(b, STK_F32, &back), STK_OK);
    r = host_f32(back);
    ck_assert_float_eq(r[0], 1.0f);
    ck_assert_float_eq_tol(r[4], 3.140625f, 1e-6f); /* 8 mantissa bits */
    ck_assert_float_eq(r[5], 70144.f);
    free(r);
    stk_tensor_release(back);
    stk_tensor *i32;
    ck_assert_int_eq(stk_tensor_to_dtype(t, STK_I32, &i32), STK_OK);
    ck_assert_int_eq(((int32_t *)stk_tensor_data(i32))[1], -2);
    stk_tensor_release(i32);
    stk_tensor_release(h);
    stk_tensor_release(b);
    stk_tensor_release(t);
}
END_TEST

/* ---- element-wise values -------------------------------------------------- */

START_TEST(test_broadcast_values)
{
    int64_t sa[2] = {2, 3}, sb[1] = {3}, sc[2] = {2, 1};
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, c[2] = {2, 4};
    stk_tensor *ta = from(2, sa, a), *tb = from(1, sb, b), *tc = from(2, sc, c), *y;
    ck_assert_int_eq(stk_add(ta, tb, &y), STK_OK);
    float w1[6] = {11, 22, 33, 14, 25, 36};
    expect_values(y, w1, 6, 0.f);
    stk_tensor_release(y);
    ck_assert_int_eq(stk_div(ta, tc, &y), STK_OK);
    float w2[6] = {0.5f, 1, 1.5f, 1, 1.25f, 1.5f};
    expect_values(y, w2, 6, 1e-7f);
    stk_tensor_release(y);
    ck_assert_int_eq(stk_mul(tc, tb, &y), STK_OK); /* [2,1] x [3] -> [2,3] */
    float w3[6] = {20, 40, 60, 40, 80, 120};
    expect_values(y, w3, 6, 0.f);
    stk_tensor_release(y);
    int64_t sbad[1] = {2};
    stk_tensor *bad = from(1, sbad, c);
    ck_assert_int_eq(stk_add(ta, bad, &y), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "cannot be broadcast"));
    stk_tensor_release(bad);
    stk_tensor_release(ta);
    stk_tensor_release(tb);
    stk_tensor_release(tc);
}
END_TEST

/* ---- gradient checks ------------------------------------------------------ */

static stk_status f_add(stk_tensor **in, void *c, stk_tensor **o)
{
    (void)c;
    return stk_add(in[0], in[1], o);
}
static stk_status f_sub(stk_tensor **in, void *c, stk_tensor **o)
{
    (void)c;
    return stk_sub(in[0], in[1], o);
}
static stk_status f_mul(stk_tensor **in, void *c, stk_tensor **o)
{
    (void)c;
    return stk_mul(in[0], in[1], o);
}
static stk_status f_div(stk_tensor **in, void *c, stk_tensor **o)
{
    (void)c;
    return stk_div(in[0], in[1], o);
}

static void check_binary(gc_fn f, const char *name, int na, const int64_t *sa, int nb,
                         const int64_t *sb, float lo, float hi)
{
    stk_tensor *in[2] = {rand_tensor(1, na, sa, lo, hi), rand_tensor(2, nb, sb, lo, hi)};
    stk_tensor_set_requires_grad(in[0], true);
    stk_tensor_set_requires_grad(in[1], true);
    gradcheck(name, f, 2, in, NULL, 1e-2, 1e-2);
    stk_tensor_release(in[0]);
    stk_tensor_release(in[1]);
}

START_TEST(test_grad_binary_broadcast)
{
    int64_t a[3] = {2, 3, 4}, b[2] = {3, 1}, c[1] = {4}, d[3] = {2, 1, 4};
    check_binary(f_add, "add", 3, a, 2, b, -1, 1);
    check_binary(f_sub, "sub", 3, a, 1, c, -1, 1);
    check_binary(f_mul, "mul", 3, a, 3, d, -1, 1);
    check_binary(f_div, "div", 3, a, 2, b, 0.5f, 2.f);
    check_binary(f_mul, "mul same", 3, a, 3, a, -1, 1);
}
END_TEST

typedef stk_status (*unary_fn)(stk_tensor *, stk_tensor **);
static stk_status f_unary(stk_tensor **in, void *c, stk_tensor **o)
{
    return ((unary_fn)c)(in[0], o);
}
static stk_status f_scalar(stk_tensor **in, void *c, stk_tensor **o)
{
    (void)c;
    stk_tensor *t;
    STK_TRY(stk_mul_scalar(in[0], -3.f, &t));
    return stk_add_scalar(t, 0.5f, o);
}

START_TEST(test_grad_unary)
{
    int64_t s[2] = {3, 5};
    struct {
        const char *name;
        unary_fn fn;
    } ops[] = {
        {"neg", stk_neg},
        {"gelu", stk_gelu},
        {"sigmoid", stk_sigmoid},
        {"tanh", stk_tanh},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        stk_tensor *x = rand_tensor(3 + i, 2, s, -2, 2);
        stk_tensor_set_requires_grad(x, true);
        gradcheck(ops[i].name, f_unary, 1, &x, (void *)ops[i].fn, 1e-2, 1e-2);
        stk_tensor_release(x);
    }
    /* relu: inputs away from the kink at 0 */
    float v[6] = {-1.5f, -0.3f, 0.2f, 0.7f, 1.1f, -2.f};
    int64_t s6[1] = {6};
    stk_tensor *x = from(1, s6, v);
    stk_tensor_set_requires_grad(x, true);
    gradcheck("relu", f_unary, 1, &x, (void *)stk_relu, 1e-2, 1e-3);
    gradcheck("scalar ops", f_scalar, 1, &x, NULL, 1e-2, 1e-3);
    stk_tensor_release(x);
    /* relu6: away from both kinks (0 and 6), on both sides of each */
    float v6[8] = {-1.5f, 0.2f, 3.1f, 5.7f, 6.4f, 9.f, -0.4f, 5.95f};
    int64_t s8[1] = {8};
    x = from(1, s8, v6);
    stk_tensor_set_requires_grad(x, true);
    gradcheck("relu6", f_unary, 1, &x, (void *)stk_relu6, 1e-2, 1e-3);
    stk_tensor_release(x);
}
END_TEST

static int red_dims[2];
static stk_status f_sum(stk_tensor **in, void *c, stk_tensor **o)
{
    return stk_sum(in[0], *(int *)c, red_dims, true, o);
}
static stk_status f_mean(stk_tensor **in, void *c, stk_tensor **o)
{
    return stk_mean(in[0], *(int *)c, red_dims, false, o);
}

START_TEST(test_grad_reduce)
{
    int64_t s[4] = {2, 3, 4, 5};
    stk_tensor *x = rand_tensor(9, 4, s, -1, 1);
    stk_tensor_set_requires_grad(x, true);
    int one = 1, two = 2, all = 0;
    red_dims[0] = 1;
    gradcheck("sum dim 1", f_sum, 1, &x, &one, 1e-2, 1e-2);
    red_dims[0] = 0;
    red_dims[1] = -1;
    gradcheck("mean dims 0,-1", f_mean, 1, &x, &two, 1e-2, 1e-2);
    gradcheck("sum all", f_sum, 1, &x, &all, 1e-2, 1e-2);
    /* values: sum over dims (0, 2) */
    stk_tensor *y;
    int d02[2] = {0, 2};
    ck_assert_int_eq(stk_sum(x, 2, d02, false, &y), STK_OK);
    ck_assert_int_eq(stk_tensor_ndim(y), 2);
    float *xv = host_f32(x), *yv = host_f32(y);
    for (int c = 0; c < 3; c++)
        for (int e = 0; e < 5; e++) {
            double ref = 0;
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 4; b++) ref += xv[((a * 3 + c) * 4 + b) * 5 + e];
            ck_assert_float_eq_tol(yv[c * 5 + e], (float)ref, 1e-5f);
        }
    free(xv);
    free(yv);
    stk_tensor_release(y);
    stk_tensor_release(x);
}
END_TEST

static stk_status f_matmul(stk_tensor **in, void *c, stk_tensor **o)
{
    (void)c;
    return stk_matmul(in[0], in[1], o);
}
static stk_status f_linear(stk_tensor **in, void *c, stk_tensor **o)
{
    return stk_linear(in[0], in[1], c ? in[2] : NULL, o);
}

START_TEST(test_matmul)
{
    /* values: [2,3] x [3,2] */
    int64_t sa[2] = {2, 3}, sb[2] = {3, 2};
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
    stk_tensor *ta = from(2, sa, a), *tb = from(2, sb, b), *y;
    ck_assert_int_eq(stk_matmul(ta, tb, &y), STK_OK);
    float w[4] = {58, 64, 139, 154};
    expect_values(y, w, 4, 0.f);
    stk_tensor_release(y);
    ck_assert_int_eq(stk_matmul(ta, ta, &y), STK_ERR_INVALID_ARG);
    stk_tensor_release(ta);
    stk_tensor_release(tb);
    /* gradients: 2-D, batched with broadcast, batched x 2-D, vector cases */
    struct {
        int na;
        int64_t a[4];
        int nb;
        int64_t b[4];
    } cases[] = {
        {2, {3, 4}, 2, {4, 5}},    {3, {2, 3, 4}, 2, {4, 5}},
        {2, {3, 4}, 3, {2, 4, 5}}, {4, {2, 1, 3, 4}, 3, {3, 4, 2}},
        {1, {4}, 2, {4, 3}},       {3, {2, 3, 4}, 1, {4}},
        {1, {4}, 1, {4}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stk_tensor *in[2] = {rand_tensor(10 + i, cases[i].na, cases[i].a, -1, 1),
                             rand_tensor(20 + i, cases[i].nb, cases[i].b, -1, 1)};
        stk_tensor_set_requires_grad(in[0], true);
        stk_tensor_set_requires_grad(in[1], true);
        char name[32];
        snprintf(name, sizeof name, "matmul case %zu", i);
        gradcheck(name, f_matmul, 2, in, NULL, 1e-2, 1e-2);
        stk_tensor_release(in[0]);
        stk_tensor_release(in[1]);
    }
    /* linear with and without bias, 3-D input */
    int64_t sx[3] = {2, 3, 4}, sw[2] = {5, 4}, sbias[1] = {5};
    stk_tensor *in[3] = {rand_tensor(31, 3, sx, -1, 1), rand_tensor(32, 2, sw, -1, 1),
                         rand_tensor(33, 1, sbias, -1, 1)};
    for (int i = 0; i < 3; i++) stk_tensor_set_requires_grad(in[i], true);
    gradcheck("linear", f_linear, 3, in, (void *)1, 1e-2, 1e-2);
    gradcheck("linear no bias", f_linear, 2, in, NULL, 1e-2, 1e-2);
    for (int i = 0; i < 3; i++) stk_tensor_release(in[i]);
}
END_TEST

/* ---- autograd behaviour --------------------------------------------------- */

/* The per-leaf gradient hook: once per backward, when every contribution
 * has arrived, in reverse order of use; an error from it stops backward. */
typedef struct leaf_log {
    stk_tensor *order[8];
    float first[8]; /* the gradient's first value when the hook ran */
    int n;
    stk_status fail;
} leaf_log;

static stk_status on_leaf(void *ctx, stk_tensor *leaf)
{
    leaf_log *g = ctx;
    ck_assert_int_lt(g->n, 8);
    g->order[g->n] = leaf;
    float v[8];
    ck_assert_int_eq(stk_tensor_to_host(stk_tensor_grad(leaf), v,
                                        (size_t)stk_tensor_numel(leaf) * sizeof(float)),
                     STK_OK);
    g->first[g->n++] = v[0];
    return g->fail == STK_OK ? STK_OK : stk_error(g->fail, "hook refused");
}

START_TEST(test_grad_hook_fires_once_when_final)
{
    int64_t s[1] = {3};
    float v[3] = {1, 2, 3}, wv[3] = {0.5f, 1, 2};
    stk_tensor *x = from(1, s, v), *w = from(1, s, wv), *unused = from(1, s, v);
    stk_tensor_set_requires_grad(x, true);
    stk_tensor_set_requires_grad(w, true);
    stk_tensor_set_requires_grad(unused, true);
    leaf_log g = {0};
    ck_assert_int_eq(stk_tensor_set_grad_hook(x, on_leaf, &g), STK_OK);
    ck_assert_int_eq(stk_tensor_set_grad_hook(w, on_leaf, &g), STK_OK);
    ck_assert_int_eq(stk_tensor_set_grad_hook(unused, on_leaf, &g), STK_OK);
    /* l = sum((x * x + x) * w): x is used three times, w once and last.
     * dl/dx = (2x + 1) w, dl/dw = x^2 + x */
    stk_scope *sc;
    ck_assert_int_eq(stk_scope_begin(&sc), STK_OK);
    stk_tensor *a, *b, *c, *l;
    ck_assert_int_eq(stk_mul(x, x, &a), STK_OK);
    ck_assert_int_eq(stk_add(a, x, &b), STK_OK);
    ck_assert_int_eq(stk_mul(b, w, &c), STK_OK);
    ck_assert_int_eq(stk_sum(c, 0, NULL, false, &l), STK_OK);
    ck_assert_int_eq(stk_backward(l, NULL, true), STK_OK);
    ck_assert_int_eq(g.n, 2); /* `unused` is in no node of the graph */
    ck_assert_ptr_eq(g.order[0], w);
    ck_assert_ptr_eq(g.order[1], x);
    ck_assert_float_eq(g.first[0], 2.f);  /* 1 + 1 */
    ck_assert_float_eq(g.first[1], 1.5f); /* (2 + 1) * 0.5: all three contributions */
    /* a second pass through the retained graph fires again, with the sums */
    g.n = 0;
    ck_assert_int_eq(stk_backward(l, NULL, true), STK_OK);
    ck_assert_int_eq(g.n, 2);
    ck_assert_float_eq(g.first[1], 3.f);
    /* an error from the hook stops backward with it */
    g.n = 0;
    g.fail = STK_ERR_CANCELLED;
    ck_assert_int_eq(stk_backward(l, NULL, false), STK_ERR_CANCELLED);
    ck_assert_str_eq(stk_last_error(), "hook refused");
    ck_assert_int_eq(g.n, 1);
    stk_scope_end(sc);
    /* a leaf as the output of backward; hooks only on leaves that require grad */
    g = (leaf_log){0};
    stk_tensor_zero_grad(w);
    stk_tensor *one;
    int64_t s1[1] = {1};
    float ov[1] = {2};
    one = from(1, s1, ov);
    stk_tensor_set_requires_grad(one, true);
    ck_assert_int_eq(stk_tensor_set_grad_hook(one, on_leaf, &g), STK_OK);
    ck_assert_int_eq(stk_backward(one, NULL, false), STK_OK);
    ck_assert_int_eq(g.n, 1);
    stk_tensor *plain = from(1, s, v);
    ck_assert_int_eq(stk_tensor_set_grad_hook(plain, on_leaf, &g), STK_ERR_INVALID_ARG);
    stk_tensor_release(plain);
    /* removed: no call */
    ck_assert_int_eq(stk_tensor_set_grad_hook(one, NULL, NULL), STK_OK);
    ck_assert_int_eq(stk_backward(one, NULL, false), STK_OK);
    ck_assert_int_eq(g.n, 1);
    stk_tensor_release(one);
    stk_tensor_release(x);
    stk_tensor_release(w);
    stk_tensor_release(unused);
}
END_TEST

START_TEST(test_autograd_accumulates_and_errors)
{
    int64_t s[1] = {3};
    float v[3] = {1, 2, 3};
    stk_tensor *x = from(1, s, v), *y, *l;
    stk_tensor_set_requires_grad(x, true);
    /* l = sum(x * x): dl/dx = 2x; twice without zero_grad -> 4x */
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(stk_mul(x, x, &y), STK_OK);
        ck_assert_int_eq(stk_sum(y, 0, NULL, false, &l), STK_OK);
        ck_assert_int_eq(stk_backward(l, NULL, false), STK_OK);
        /* a second backward through the freed graph fails clearly */
        ck_assert_int_eq(stk_backward(l, NULL, false), STK_ERR_INVALID_ARG);
        ck_assert_ptr_nonnull(strstr(stk_last_error(), "already freed"));
        stk_tensor_release(l);
        stk_tensor_release(y);
    }
    float w[3] = {4, 8, 12};
    expect_values(stk_tensor_grad(x), w, 3, 0.f);
    /* retain_graph allows it */
    stk_tensor_zero_grad(x);
    ck_assert_int_eq(stk_mul(x, x, &y), STK_OK);
    ck_assert_int_eq(stk_sum(y, 0, NULL, false, &l), STK_OK);
    ck_assert_int_eq(stk_backward(l, NULL, true), STK_OK);
    ck_assert_int_eq(stk_backward(l, NULL, false), STK_OK);
    expect_values(stk_tensor_grad(x), w, 3, 0.f);
    /* non-scalar without a gradient */
    ck_assert_int_eq(stk_backward(y, NULL, false), STK_ERR_INVALID_ARG);
    stk_tensor_release(l);
    stk_tensor_release(y);
    /* no-grad mode records nothing; detach cuts the graph */
    stk_no_grad_begin();
    ck_assert_int_eq(stk_mul(x, x, &y), STK_OK);
    stk_no_grad_end();
    ck_assert(!stk_tensor_requires_grad(y));
    ck_assert_int_eq(stk_backward(y, NULL, false), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "does not require grad"));
    stk_tensor_release(y);
    stk_tensor *d;
    ck_assert_int_eq(stk_detach(x, &d), STK_OK);
    ck_assert(!stk_tensor_requires_grad(d));
    ck_assert_ptr_eq(stk_tensor_data(d), stk_tensor_data(x));
    stk_tensor_release(d);
    /* a frozen input gets no gradient */
    stk_tensor *z = from(1, s, v);
    stk_tensor_zero_grad(x);
    ck_assert_int_eq(stk_mul(x, z, &y), STK_OK);
    ck_assert_int_eq(stk_sum(y, 0, NULL, false, &l), STK_OK);
    ck_assert_int_eq(stk_backward(l, NULL, false), STK_OK);
    ck_assert_ptr_null(stk_tensor_grad(z));
    expect_values(stk_tensor_grad(x), v, 3, 0.f);
    stk_tensor_release(l);
    stk_tensor_release(y);
    stk_tensor_release(z);
    stk_tensor_release(x);
}
END_TEST

START_TEST(test_scope_memory_is_flat)
{
    int64_t sx[2] = {64, 32}, sw[2] = {16, 32};
    stk_tensor *x = rand_tensor(1, 2, sx, -1, 1), *w = rand_tensor(2, 2, sw, -1, 1);
    stk_tensor_set_requires_grad(w, true);
    stk_mem_stats before, after, peak1 = {0};
    stk_device_mem_stats(STK_DEVICE_CPU, &before);
    for (int step = 0; step < 200; step++) {
        stk_scope *s;
        ck_assert_int_eq(stk_scope_begin(&s), STK_OK);
        stk_tensor *h, *a, *l;
        ck_assert_int_eq(stk_linear(x, w, NULL, &h), STK_OK);
        ck_assert_int_eq(stk_tanh(h, &a), STK_OK);
        ck_assert_int_eq(stk_mean(a, 0, NULL, false, &l), STK_OK);
        ck_assert_int_eq(stk_backward(l, NULL, false), STK_OK);
        ck_assert_uint_ge(stk_scope_size(s), 3);
        stk_tensor_zero_grad(w);
        stk_scope_end(s);
        stk_mem_stats now;
        stk_device_mem_stats(STK_DEVICE_CPU, &now);
        if (step == 0) {
            stk_device_reset_peak(STK_DEVICE_CPU);
            peak1 = now;
        }
        ck_assert_uint_eq(now.allocated, before.allocated); /* everything freed each step */
    }
    stk_device_mem_stats(STK_DEVICE_CPU, &after);
    ck_assert_uint_eq(after.allocated, before.allocated);
    ck_assert_uint_eq(after.reserved, peak1.reserved); /* no growth after the first step */
    stk_tensor_release(x);
    stk_tensor_release(w);
}
END_TEST

START_TEST(test_allocator_bins)
{
    ck_assert_uint_eq(stk_device_bin_size(0), 64);
    ck_assert_uint_eq(stk_device_bin_size(65), 128);
    ck_assert_uint_eq(stk_device_bin_size(4097), 4096 + 512);
    ck_assert_uint_eq(stk_device_bin_size(1 << 20), 1 << 20);
    ck_assert_uint_le(stk_device_bin_size((1 << 20) + 1), (1 << 20) + (1 << 17));
    void *p, *q;
    stk_mem_stats s0, s1;
    stk_device_mem_stats(STK_DEVICE_CPU, &s0);
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CPU, 100000, &p), STK_OK);
    stk_device_free(STK_DEVICE_CPU, p, 100000);
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CPU, 99999, &q), STK_OK); /* same bin: reused */
    ck_assert_ptr_eq(p, q);
    stk_device_free(STK_DEVICE_CPU, q, 99999);
    stk_device_mem_stats(STK_DEVICE_CPU, &s1);
    ck_assert_uint_eq(s1.allocated, s0.allocated);
    ck_assert_uint_gt(s1.reserved, s1.allocated);
    stk_device_empty_cache(STK_DEVICE_CPU);
    stk_device_mem_stats(STK_DEVICE_CPU, &s1);
    ck_assert_uint_eq(s1.reserved, s1.allocated);
#ifndef STOKE_CUDA_BACKEND /* without the backend, CUDA memory is refused plainly */
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CUDA, 16, &p), STK_ERR_UNSUPPORTED);
#endif
}
END_TEST

/* At a miss the CPU cache gives back its oldest blocks only as far as the
 * heap would otherwise exceed its peak in use plus the slack (256 MiB at
 * least): a miss does not flush blocks a later allocation can reuse. (The
 * blocks are never touched: address space, not memory.) */
START_TEST(test_allocator_bounded_cache)
{
    const size_t mib = 1u << 20, a = 320 * mib, b = 160 * mib, c = 200 * mib;
    void *pa, *pb, *pc;
    stk_device_empty_cache(STK_DEVICE_CPU);
    stk_mem_stats s0, s;
    stk_device_mem_stats(STK_DEVICE_CPU, &s0);
    ck_assert_uint_lt(s0.peak_allocated, 8 * mib); /* (so the slack below is 256 MiB) */
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CPU, a, &pa), STK_OK);
    stk_device_free(STK_DEVICE_CPU, pa, a);
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CPU, b, &pb), STK_OK); /* a miss: a stays */
    stk_device_mem_stats(STK_DEVICE_CPU, &s);
    ck_assert_uint_eq(s.reserved - s.allocated, a + (s0.reserved - s0.allocated));
    stk_device_free(STK_DEVICE_CPU, pb, b);
    /* a miss that would hold a + b + c > peak (~a) + 256 MiB: a, the oldest, goes */
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CPU, c, &pc), STK_OK);
    stk_device_mem_stats(STK_DEVICE_CPU, &s);
    ck_assert_uint_le(s.reserved, s.peak_allocated + 256 * mib);
    ck_assert_uint_ge(s.reserved, s0.reserved + b + c); /* b still cached */
    stk_device_free(STK_DEVICE_CPU, pc, c);
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CPU, b, &pb), STK_OK); /* b: a hit */
    stk_mem_stats s2;
    stk_device_mem_stats(STK_DEVICE_CPU, &s2);
    ck_assert_uint_eq(s2.n_fresh, s.n_fresh);
    stk_device_free(STK_DEVICE_CPU, pb, b);
    stk_device_empty_cache(STK_DEVICE_CPU);
}
END_TEST

/* The per-size-class table: live and cached blocks per bin, allocations
 * served and those that needed fresh memory. */
static const stk_mem_class *find_class(const stk_mem_class *c, int n, size_t size)
{
    for (int i = 0; i < n; i++)
        if (c[i].size == size) return &c[i];
    return NULL;
}

START_TEST(test_allocator_size_classes)
{
    stk_device_empty_cache(STK_DEVICE_CPU);
    stk_mem_class c[400];
    int n0 = stk_device_mem_classes(STK_DEVICE_CPU, c, 400);
    const stk_mem_class *k = find_class(c, n0, stk_device_bin_size(3000001));
    stk_mem_class before = k ? *k : (stk_mem_class){0};
    void *a, *b, *d;
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CPU, 3000001, &a), STK_OK);
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CPU, 3000000, &b), STK_OK); /* same bin */
    stk_device_free(STK_DEVICE_CPU, a, 3000001);
    ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CPU, 2999999, &d), STK_OK); /* reuses a */
    stk_device_free(STK_DEVICE_CPU, b, 3000000);
    int n = stk_device_mem_classes(STK_DEVICE_CPU, c, 400);
    ck_assert_int_ge(n, 1);
    ck_assert_int_le(n, 400);
    for (int i = 1; i < n; i++) ck_assert_uint_lt(c[i - 1].size, c[i].size);
    k = find_class(c, n, stk_device_bin_size(3000001));
    ck_assert_ptr_nonnull(k);
    ck_assert_uint_eq(k->size, stk_device_bin_size(3000001));
    ck_assert_uint_eq(k->live - before.live, 1);     /* d */
    ck_assert_uint_eq(k->cached - before.cached, 1); /* b */
    ck_assert_uint_eq(k->n_alloc - before.n_alloc, 3);
    ck_assert_uint_eq(k->n_fresh - before.n_fresh, 2);
    stk_device_free(STK_DEVICE_CPU, d, 2999999);
    /* every bin size maps back to itself: small, mid and large classes */
    const size_t sizes[] = {64, 4096, 4097, (size_t)1 << 20, 100005};
    for (int i = 0; i < 5; i++) {
        void *p;
        size_t bytes = sizes[i];
        ck_assert_int_eq(stk_device_alloc(STK_DEVICE_CPU, bytes, &p), STK_OK);
        n = stk_device_mem_classes(STK_DEVICE_CPU, c, 400);
        ck_assert_ptr_nonnull(find_class(c, n, stk_device_bin_size(bytes)));
        stk_device_free(STK_DEVICE_CPU, p, bytes);
    }
    stk_device_empty_cache(STK_DEVICE_CPU);
    n = stk_device_mem_classes(STK_DEVICE_CPU, c, 400);
    for (int i = 0; i < n; i++) ck_assert_uint_eq(c[i].cached, 0);
}
END_TEST

#ifdef STOKE_CUDA_EMULATED /* the host CUDA's memory limit makes the error */
/* Out of memory in the engine: the message names the largest live tensors
 * and the ops that made them. */
START_TEST(test_out_of_memory_names_live_tensors)
{
    stk_device_empty_cache(STK_DEVICE_CUDA);
    setenv("STOKE_HOST_CUDA_MEM_MB", "64", 1);
    int64_t shape[3] = {4, 1024, 1024}; /* 16 MiB of f32 */
    stk_tensor *x, *y, *z, *big;
    ck_assert_int_eq(stk_tensor_zeros_on(STK_DEVICE_CUDA, STK_F32, 3, shape, &x), STK_OK);
    stk_tensor_set_requires_grad(x, true);
    ck_assert_int_eq(stk_relu(x, &y), STK_OK);
    ck_assert_int_eq(stk_relu(y, &z), STK_OK);
    int64_t huge[1] = {10 << 20}; /* 40 MiB more: 88 of 64 */
    ck_assert_int_eq(stk_tensor_zeros_on(STK_DEVICE_CUDA, STK_F32, 1, huge, &big), STK_ERR_NOMEM);
    const char *e = stk_last_error();
    ck_assert_msg(strstr(e, "out of cuda memory: cannot allocate 41943040 bytes"), "%s", e);
    ck_assert_msg(strstr(e, "; largest live tensors: 16.8 MB relu [4, 1024, 1024] f32, 16.8 MB "
                            "relu [4, 1024, 1024] f32, 16.8 MB leaf or raw [4, 1024, 1024] f32"),
                  "%s", e);
    ck_assert_msg(strstr(e, "; by op: relu 33.6 MB in 2, leaf or raw 16.8 MB in 1"), "%s", e);
    stk_tensor_release(z);
    stk_tensor_release(y);
    stk_tensor_release(x);
    stk_device_empty_cache(STK_DEVICE_CUDA);
    unsetenv("STOKE_HOST_CUDA_MEM_MB");
}
END_TEST

#endif

/* Every view op in one chain, so each backward is exercised:
 * permute -> narrow -> expand -> reshape (copying) -> unsqueeze -> squeeze ->
 * transpose -> flatten -> clone -> view, times a weight so gradients differ. */
static stk_status f_views(stk_tensor **in, void *c, stk_tensor **o)
{
    (void)c;
    stk_tensor *t;
    int perm[3] = {2, 0, 1};
    STK_TRY(stk_permute(in[0], perm, &t)); /* [4, 2, 3] */
    STK_TRY(stk_narrow(t, 0, 1, 2, &t));   /* [2, 2, 3] */
    STK_TRY(stk_unsqueeze(t, 1, &t));      /* [2, 1, 2, 3] */
    int64_t ex[4] = {2, 3, 2, 3};
    STK_TRY(stk_expand(t, 4, ex, &t)); /* [2, 3, 2, 3] */
    int64_t rs[2] = {6, 6};
    STK_TRY(stk_reshape(t, 2, rs, &t)); /* copies: not viewable */
    STK_TRY(stk_unsqueeze(t, 0, &t));
    STK_TRY(stk_squeeze(t, 0, &t));
    STK_TRY(stk_transpose(t, 0, 1, &t));
    STK_TRY(stk_flatten(t, 0, -1, &t));
    STK_TRY(stk_clone(t, &t));
    int64_t vs[2] = {9, 4};
    STK_TRY(stk_view(t, 2, vs, &t));
    return stk_mul(t, in[1], o);
}

START_TEST(test_grad_views)
{
    int64_t s[3] = {2, 3, 4}, w[2] = {9, 4};
    stk_tensor *in[2] = {rand_tensor(41, 3, s, -1, 1), rand_tensor(42, 2, w, -1, 1)};
    stk_tensor_set_requires_grad(in[0], true);
    stk_tensor_set_requires_grad(in[1], true);
    stk_scope *sc;
    ck_assert_int_eq(stk_scope_begin(&sc), STK_OK);
    gradcheck("view chain", f_views, 2, in, NULL, 1e-2, 1e-3);
    stk_scope_end(sc);
    stk_tensor_release(in[0]);
    stk_tensor_release(in[1]);
}
END_TEST

START_TEST(test_print_and_grad_errors)
{
    int64_t s[2] = {2, 2};
    float v[4] = {1.5f, -2, 3, 4};
    stk_tensor *x = from(2, s, v), *y;
    stk_tensor_set_requires_grad(x, true);
    ck_assert_int_eq(stk_mul_scalar(x, 2.f, &y), STK_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    stk_tensor_print(y, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "[2, 2] f32 on cpu"));
    ck_assert_ptr_nonnull(strstr(buf, "from mul_scalar"));
    ck_assert_ptr_nonnull(strstr(buf, "3, -4, 6, 8"));
    free(buf);
    /* an output gradient of the wrong shape names both shapes */
    int64_t s3[1] = {3};
    stk_tensor *g = from(1, s3, v);
    ck_assert_int_eq(stk_backward(y, g, false), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "[3]"));
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "[2, 2]"));
    stk_tensor_release(g);
    /* a given gradient of the right shape */
    g = from(2, s, v);
    ck_assert_int_eq(stk_backward(y, g, false), STK_OK);
    float want[4] = {3, -4, 6, 8};
    expect_values(stk_tensor_grad(x), want, 4, 0.f);
    stk_tensor_release(g);
    stk_tensor_release(y);
    stk_tensor_release(x);
}
END_TEST

static Suite *engine_suite(void)
{
    Suite *s = suite_create("engine");
    TCase *t = tcase_create("core");
    tcase_add_test(t, test_create_and_copy);
    tcase_add_test(t, test_views_follow_pytorch);
    tcase_add_test(t, test_dtype_conversion);
    tcase_add_test(t, test_broadcast_values);
    tcase_add_test(t, test_grad_binary_broadcast);
    tcase_add_test(t, test_grad_unary);
    tcase_add_test(t, test_grad_reduce);
    tcase_add_test(t, test_matmul);
    tcase_add_test(t, test_grad_views);
    tcase_add_test(t, test_print_and_grad_errors);
    tcase_add_test(t, test_autograd_accumulates_and_errors);
    tcase_add_test(t, test_grad_hook_fires_once_when_final);
    tcase_add_test(t, test_scope_memory_is_flat);
    tcase_add_test(t, test_allocator_bins);
    tcase_add_test(t, test_allocator_bounded_cache);
    tcase_add_test(t, test_allocator_size_classes);
#ifdef STOKE_CUDA_EMULATED
    tcase_add_test(t, test_out_of_memory_names_live_tensors);
#endif
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return stk_check_run(engine_suite()); }
