/* nn: models (names, sizes, shapes), training mode, freezing, optimizers and
 * schedules against PyTorch's formulas, and flat memory over training steps. */
#include "check_main.h"
#include "engine/optim.h"
#include "engine/tensor_impl.h"
#include "engine_testlib.h"

#include <math.h>
#include <stdio.h>

static stk_model *make(const char *name, int ch, int classes, int size)
{
    stk_model_config c = {
        .name = name, .in_channels = ch, .classes = classes, .image_size = size, .seed = 7};
    stk_model *m;
    stk_status st = stk_model_create(&c, &m);
    ck_assert_msg(st == STK_OK, "%s: %s", name, stk_last_error());
    return m;
}

START_TEST(test_models_shapes_and_names)
{
    struct {
        const char *name;
        int ch, classes, size;
        int64_t trainable;
        int entries;
    } cases[] = {
        /* trainable counts: 784*256+256 + 256*128+128 + 128*10+10 for mlp; the
         * rest computed by PyTorch for the same layouts (bench/pytorch_models.py) */
        {"mlp", 1, 10, 28, 235146, 6},
        {"cnn", 1, 10, 28, 94186, 20},
        {"resnet8", 1, 10, 28, 77754, 56},
        {"resnet18", 3, 10, 32, 11173962, 122},
        {"mobilenet_v2", 3, 10, 32, 2236682, 314}, /* (small-image strides: same weights) */
        {"resnet18", 3, 1000, 224, 11689512, 122},
        {"resnet34", 3, 1000, 224, 21797672, 218},
        {"resnet50", 3, 1000, 224, 25557032, 320},
        {"resnet50", 3, 10, 32, 23520842, 320}, /* the CIFAR stem: 64 * 3 * (49 - 9) fewer */
        {"mobilenet_v2", 3, 1000, 224, 3504872, 314},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stk_model *m = make(cases[i].name, cases[i].ch, cases[i].classes, cases[i].size);
        ck_assert_msg(stk_model_trainable_numel(m) == cases[i].trainable, "%s: %lld parameters",
                      cases[i].name, (long long)stk_model_trainable_numel(m));
        ck_assert_int_eq(stk_model_param_count(m), cases[i].entries);
        if (i < 5) { /* forward shape (the ImageNet-size one is slow under sanitizers) */
            int64_t s[4] = {2, cases[i].ch, cases[i].size, cases[i].size};
            stk_tensor *x = rand_tensor(1, 4, s, -1, 1), *y;
            stk_scope *sc;
            ck_assert_int_eq(stk_scope_begin(&sc), STK_OK);
            ck_assert_int_eq(stk_model_forward(m, x, &y), STK_OK);
            ck_assert_int_eq(stk_tensor_dim(y, 0), 2);
            ck_assert_int_eq(stk_tensor_dim(y, 1), cases[i].classes);
            stk_scope_end(sc);
            stk_tensor_release(x);
        }
        stk_model_destroy(m);
    }
    stk_model *r = make("resnet18", 3, 10, 32);
    ck_assert_str_eq(stk_model_param(r, 0)->name, "conv1.weight");
    ck_assert_ptr_nonnull(stk_model_find(r, "layer2.0.downsample.0.weight"));
    ck_assert_ptr_nonnull(stk_model_find(r, "layer4.1.bn2.running_var"));
    ck_assert(stk_model_find(r, "layer1.0.bn1.num_batches_tracked")->is_buffer);
    ck_assert_ptr_null(stk_model_find(r, "layer1.0.downsample.0.weight"));
    ck_assert_ptr_nonnull(stk_model_find(r, "fc.bias"));
    ck_assert_int_eq(stk_tensor_dim(stk_model_find(r, "conv1.weight")->value, 2),
                     3); /* CIFAR stem */
    stk_model_destroy(r);
    r = make("resnet18", 3, 10, 64); /* the ImageNet stem from 64 px */
    ck_assert_int_eq(stk_tensor_dim(stk_model_find(r, "conv1.weight")->value, 2), 7);
    stk_model_destroy(r);
    r = make("resnet18", 3, 10, 63);
    ck_assert_int_eq(stk_tensor_dim(stk_model_find(r, "conv1.weight")->value, 2), 3);
    stk_model_destroy(r);
    /* bad configurations */
    stk_model_config bad = {.name = "resnet51", .in_channels = 3, .classes = 10, .image_size = 32};
    stk_model *m;
    ck_assert_int_eq(stk_model_create(&bad, &m), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "resnet51"));
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "mobilenet_v2")); /* the known ones listed */
    bad.name = "cnn";
    bad.classes = 0;
    ck_assert_int_eq(stk_model_create(&bad, &m), STK_ERR_INVALID_ARG);
    /* a wrong input names the model */
    m = make("cnn", 1, 10, 28);
    int64_t s[4] = {2, 3, 28, 28};
    stk_tensor *x = rand_tensor(1, 4, s, -1, 1), *y;
    ck_assert_int_eq(stk_model_forward(m, x, &y), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "cnn"));
    stk_tensor_release(x);
    stk_model_destroy(m);
}
END_TEST

START_TEST(test_init_is_torch_default)
{
    /* Linear(784, 256): U(-1/28, 1/28): max |w| close to 1/28, mean ~ 0, var = bound^2/3 */
    stk_model *m = make("mlp", 1, 10, 28);
    stk_tensor *w = stk_model_find(m, "fc1.weight")->value;
    float *v = stk_tensor_data(w);
    double mx = 0, sum = 0, sq = 0;
    int64_t n = stk_tensor_numel(w);
    for (int64_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(v[i]));
        sum += v[i];
        sq += (double)v[i] * v[i];
    }
    ck_assert(mx <= 1.0 / 28 && mx > 0.99 / 28);
    ck_assert_double_eq_tol(sum / n, 0.0, 1e-3);
    ck_assert_double_eq_tol(sq / n, (1.0 / 784) / 3, 2e-5);
    /* same seed, same weights */
    stk_model *m2 = make("mlp", 1, 10, 28);
    ck_assert(!memcmp(stk_tensor_data(stk_model_find(m2, "fc3.weight")->value),
                      stk_tensor_data(stk_model_find(m, "fc3.weight")->value), 1280 * 4));
    stk_model_destroy(m2);
    stk_model_destroy(m);
    /* resnet18 convs: kaiming normal, fan_out: var = 2 / (64 * 9) in layer1 */
    m = make("resnet18", 3, 10, 32);
    w = stk_model_find(m, "layer1.0.conv1.weight")->value;
    v = stk_tensor_data(w);
    n = stk_tensor_numel(w);
    sq = 0;
    for (int64_t i = 0; i < n; i++) sq += (double)v[i] * v[i];
    ck_assert_double_eq_tol(sq / n, 2.0 / 576, 2.0 / 576 * 0.03);
    float *g = stk_tensor_data(stk_model_find(m, "bn1.weight")->value);
    ck_assert_float_eq(g[0], 1.f);
    stk_model_destroy(m);
}
END_TEST

/* A tiny separable problem: the class is the index of the brightest of 4
 * regions of a 1x4x4 image. */
static void make_batch(uint64_t seed, int n, stk_tensor **x, stk_tensor **y)
{
    int64_t sx[4] = {n, 1, 4, 4}, sy[1] = {n};
    *x = rand_tensor(seed, 4, sx, 0, 1);
    int32_t *lab = malloc(sizeof(int32_t) * (size_t)n);
    float *px = stk_tensor_data(*x);
    for (int i = 0; i < n; i++) {
        lab[i] = (int32_t)(seed * 31 + (uint64_t)i * 7) % 4;
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++)
                px[i * 16 + ((lab[i] / 2) * 2 + a) * 4 + (lab[i] % 2) * 2 + b] += 1.f;
    }
    ck_assert_int_eq(stk_tensor_from_host(STK_I32, 1, sy, lab, y), STK_OK);
    free(lab);
}

static double train_steps(const char *model, stk_optim_kind kind, int steps, double *first)
{
    stk_model_config c = {
        .name = model, .in_channels = 1, .classes = 4, .image_size = 4, .seed = 3};
    stk_model *m;
    ck_assert_int_eq(stk_model_create(&c, &m), STK_OK);
    stk_optim_config oc = {.kind = kind,
                           .lr = kind == STK_OPTIM_SGD ? 0.1f : 0.01f,
                           .momentum = kind == STK_OPTIM_SGD ? 0.9f : 0.f,
                           .weight_decay = 1e-4f};
    stk_optim *opt;
    ck_assert_int_eq(stk_optim_create(&oc, m, &opt), STK_OK);
    double last = 0;
    stk_mem_stats s0 = {0};
    for (int step = 0; step < steps; step++) {
        stk_scope *sc;
        ck_assert_int_eq(stk_scope_begin(&sc), STK_OK);
        stk_tensor *x, *y, *logits, *loss;
        make_batch((uint64_t)step, 32, &x, &y);
        ck_assert_int_eq(stk_model_forward(m, x, &logits), STK_OK);
        ck_assert_int_eq(stk_cross_entropy(logits, y, 0.f, &loss), STK_OK);
        ck_assert_int_eq(stk_backward(loss, NULL, false), STK_OK);
        ck_assert_int_eq(stk_optim_step(opt), STK_OK);
        last = stk_tensor_item(loss);
        if (step == 0) *first = last;
        stk_scope_end(sc);
        stk_mem_stats now;
        stk_device_mem_stats(STK_DEVICE_CPU, &now);
        if (step == 1) s0 = now; /* optimizer state exists from step 1 on */
        if (step > 1) {
            ck_assert_uint_eq(now.allocated, s0.allocated); /* flat: nothing kept per step */
            ck_assert_uint_eq(now.reserved, s0.reserved);
        }
    }
    stk_optim_destroy(opt);
    stk_model_destroy(m);
    return last;
}

START_TEST(test_training_reduces_loss)
{
    double first, last;
    last = train_steps("mlp", STK_OPTIM_SGD, 60, &first);
    ck_assert_msg(last < 0.3 * first, "mlp sgd: %g -> %g", first, last);
    last = train_steps("mlp", STK_OPTIM_ADAMW, 60, &first);
    ck_assert_msg(last < 0.3 * first, "mlp adamw: %g -> %g", first, last);
    last = train_steps("cnn", STK_OPTIM_SGD, 40, &first);
    ck_assert_msg(last < 0.5 * first, "cnn sgd: %g -> %g", first, last);
    last = train_steps("resnet8", STK_OPTIM_ADAM, 40, &first);
    ck_assert_msg(last < 0.5 * first, "resnet8 adam: %g -> %g", first, last);
}
END_TEST

START_TEST(test_check_finite_names_the_parameter)
{
    stk_model_config c = {.name = "mlp", .in_channels = 1, .classes = 10, .image_size = 28};
    stk_model *m;
    ck_assert_int_eq(stk_model_create(&c, &m), STK_OK);
    const char *bad = "x";
    ck_assert_int_eq(stk_model_check_finite(m, &bad), STK_OK);
    ck_assert_ptr_null(bad);
    int last = stk_model_param_count(m) - 1;
    const stk_param *p = stk_model_param(m, last);
    int64_t n = stk_tensor_numel(p->value);
    float *h = malloc((size_t)n * sizeof *h);
    ck_assert_int_eq(stk_tensor_to_host(p->value, h, (size_t)n * sizeof *h), STK_OK);
    float keep = h[n - 1];
    h[n - 1] = NAN;
    ck_assert_int_eq(stk_tensor_copy_from_host(p->value, h, (size_t)n * sizeof *h), STK_OK);
    ck_assert_int_eq(stk_model_check_finite(m, &bad), STK_OK);
    ck_assert_str_eq(bad, p->name);
    h[n - 1] = keep;
    ck_assert_int_eq(stk_tensor_copy_from_host(p->value, h, (size_t)n * sizeof *h), STK_OK);
    ck_assert_int_eq(stk_model_check_finite(m, &bad), STK_OK);
    ck_assert_ptr_null(bad);
    free(h);
    stk_model_destroy(m);
}
END_TEST

START_TEST(test_train_eval_and_freeze)
{
    stk_model *m = make("cnn", 1, 10, 28);
    int64_t s[4] = {4, 1, 28, 28};
    stk_tensor *x = rand_tensor(2, 4, s, 0, 1), *a, *b;
    stk_tensor *rm = stk_model_find(m, "bn1.running_mean")->value;
    float before = ((float *)stk_tensor_data(rm))[0];
    stk_model_train(m, false);
    ck_assert_int_eq(stk_model_forward(m, x, &a), STK_OK);
    ck_assert_int_eq(stk_model_forward(m, x, &b), STK_OK);
    ck_assert_float_eq(((float *)stk_tensor_data(rm))[0], before); /* eval: untouched */
    float *av = host_f32(a), *bv = host_f32(b);
    ck_assert(!memcmp(av, bv, 40 * sizeof(float)));
    free(av);
    free(bv);
    stk_tensor_release(a);
    stk_tensor_release(b);
    stk_model_train(m, true);
    ck_assert_int_eq(stk_model_forward(m, x, &a), STK_OK);
    ck_assert_float_ne(((float *)stk_tensor_data(rm))[0], before);
    ck_assert_int_eq(
        *(int32_t *)stk_tensor_data(stk_model_find(m, "bn1.num_batches_tracked")->value), 1);
    stk_tensor_release(a);
    /* freezing "conv" prefixes does not match "conv1" alone */
    ck_assert_int_eq(stk_model_set_requires_grad(m, "conv1", false), 1);
    ck_assert_int_eq(stk_model_set_requires_grad(m, "bn", false), 0);
    ck_assert_int_eq(stk_model_set_requires_grad(m, "bn1", false), 2);
    ck_assert(!stk_tensor_requires_grad(stk_model_find(m, "conv1.weight")->value));
    ck_assert(stk_tensor_requires_grad(stk_model_find(m, "conv2.weight")->value));
    stk_optim_config oc = {.kind = STK_OPTIM_SGD, .lr = 0.1f};
    stk_optim *opt;
    ck_assert_int_eq(stk_optim_create(&oc, m, &opt), STK_OK);
    float w0 = ((float *)stk_tensor_data(stk_model_find(m, "conv1.weight")->value))[0];
    float w2 = ((float *)stk_tensor_data(stk_model_find(m, "conv2.weight")->value))[0];
    stk_scope *sc;
    ck_assert_int_eq(stk_scope_begin(&sc), STK_OK);
    stk_tensor *logits, *loss, *labels;
    int64_t sl[1] = {4};
    int32_t lab[4] = {1, 2, 3, 4};
    ck_assert_int_eq(stk_tensor_from_host(STK_I32, 1, sl, lab, &labels), STK_OK);
    ck_assert_int_eq(stk_model_forward(m, x, &logits), STK_OK);
    ck_assert_int_eq(stk_cross_entropy(logits, labels, 0.f, &loss), STK_OK);
    ck_assert_int_eq(stk_backward(loss, NULL, false), STK_OK);
    ck_assert_ptr_null(stk_tensor_grad(stk_model_find(m, "conv1.weight")->value));
    ck_assert_int_eq(stk_optim_step(opt), STK_OK);
    stk_scope_end(sc);
    ck_assert_float_eq(((float *)stk_tensor_data(stk_model_find(m, "conv1.weight")->value))[0], w0);
    ck_assert_float_ne(((float *)stk_tensor_data(stk_model_find(m, "conv2.weight")->value))[0], w2);
    stk_optim_destroy(opt);
    stk_tensor_release(x);
    stk_model_destroy(m);
}
END_TEST

/* One scalar parameter through three steps, against PyTorch's update rules
 * written out in double. */
static double optim_run(const stk_optim_config *oc, const double *grads, int steps)
{
    stk_model *m = make("mlp", 1, 1, 1); /* fc3.bias is a single scalar */
    stk_optim *opt;
    ck_assert_int_eq(stk_optim_create(oc, m, &opt), STK_OK);
    stk_tensor *p = stk_model_find(m, "fc3.bias")->value;
    ((float *)stk_tensor_data(p))[0] = 1.f;
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < stk_model_param_count(m); i++)
            stk_tensor_zero_grad(stk_model_param(m, i)->value);
        stk_tensor *g;
        float gv = (float)grads[s];
        int64_t one = 1;
        ck_assert_int_eq(eng_tensor_new(STK_DEVICE_CPU, STK_F32, 1, &one, false, &g), STK_OK);
        *(float *)stk_tensor_data(g) = gv;
        p->grad = g;
        ck_assert_int_eq(stk_optim_step(opt), STK_OK);
    }
    double v = ((float *)stk_tensor_data(p))[0];
    stk_optim_destroy(opt);
    stk_model_destroy(m);
    return v;
}

START_TEST(test_optimizer_formulas)
{
    const double g[3] = {0.5, -0.2, 0.3};
    double lr = 0.1, mom = 0.9, wd = 0.01;
    /* SGD, Nesterov, weight decay (torch.optim.SGD) */
    double p = 1, buf = 0;
    for (int s = 0; s < 3; s++) {
        double d = g[s] + wd * p;
        buf = s == 0 ? d : mom * buf + d;
        p -= lr * (d + mom * buf);
    }
    stk_optim_config sgd = {.kind = STK_OPTIM_SGD,
                            .lr = 0.1f,
                            .momentum = 0.9f,
                            .nesterov = true,
                            .weight_decay = 0.01f};
    ck_assert_double_eq_tol(optim_run(&sgd, g, 3), p, 1e-6);
    /* SGD with dampening 0.5, no Nesterov */
    p = 1, buf = 0;
    for (int s = 0; s < 3; s++) {
        double d = g[s];
        buf = s == 0 ? d : mom * buf + 0.5 * d;
        p -= lr * buf;
    }
    stk_optim_config damp = {
        .kind = STK_OPTIM_SGD, .lr = 0.1f, .momentum = 0.9f, .dampening = 0.5f};
    ck_assert_double_eq_tol(optim_run(&damp, g, 3), p, 1e-6);
    /* Adam (L2) and AdamW (decoupled) */
    for (int w = 0; w < 2; w++) {
        double pa = 1, m1 = 0, v = 0, b1 = 0.9, b2 = 0.999, eps = 1e-8;
        for (int s = 0; s < 3; s++) {
            double d = g[s];
            if (w)
                pa *= 1 - lr * wd;
            else
                d += wd * pa;
            m1 = b1 * m1 + (1 - b1) * d;
            v = b2 * v + (1 - b2) * d * d;
            double bc1 = 1 - pow(b1, s + 1), bc2 = 1 - pow(b2, s + 1);
            pa -= lr / bc1 * m1 / (sqrt(v) / sqrt(bc2) + eps);
        }
        stk_optim_config adam = {
            .kind = w ? STK_OPTIM_ADAMW : STK_OPTIM_ADAM, .lr = 0.1f, .weight_decay = 0.01f};
        ck_assert_double_eq_tol(optim_run(&adam, g, 3), pa, 1e-5);
    }
    /* PyTorch's argument rules */
    stk_model *m = make("mlp", 1, 2, 2);
    stk_optim *o;
    stk_optim_config bad = {.kind = STK_OPTIM_SGD, .lr = 0.1f, .nesterov = true};
    ck_assert_int_eq(stk_optim_create(&bad, m, &o), STK_ERR_INVALID_ARG);
    bad.lr = -1;
    bad.nesterov = false;
    ck_assert_int_eq(stk_optim_create(&bad, m, &o), STK_ERR_INVALID_ARG);
    stk_model_destroy(m);
}
END_TEST

START_TEST(test_schedules)
{
    stk_schedule cos = {.kind = STK_SCHEDULE_COSINE, .base_lr = 0.05f, .total_steps = 100};
    ck_assert_float_eq_tol(stk_schedule_lr(&cos, 0), 0.05f, 1e-7f);
    ck_assert_float_eq_tol(stk_schedule_lr(&cos, 50), 0.025f, 1e-7f);
    ck_assert_float_eq_tol(stk_schedule_lr(&cos, 100), 0.f, 1e-7f);
    ck_assert_float_eq_tol(stk_schedule_lr(&cos, 25), 0.05f * 0.5f * (1 + cosf((float)M_PI / 4)),
                           1e-6f);
    cos.warmup_steps = 10;
    ck_assert_float_eq_tol(stk_schedule_lr(&cos, 0), 0.005f, 1e-7f);
    ck_assert_float_eq_tol(stk_schedule_lr(&cos, 9), 0.05f, 1e-7f);
    ck_assert_float_eq_tol(stk_schedule_lr(&cos, 10), 0.05f, 1e-7f);
    ck_assert_float_eq_tol(stk_schedule_lr(&cos, 55), 0.025f, 1e-7f);
    cos.min_lr = 0.01f; /* timm's --min-lr: the cosine ends at the floor, halfway between */
    ck_assert_float_eq_tol(stk_schedule_lr(&cos, 10), 0.05f, 1e-7f);
    ck_assert_float_eq_tol(stk_schedule_lr(&cos, 55), 0.03f, 1e-7f);
    ck_assert_float_eq_tol(stk_schedule_lr(&cos, 99),
                           0.01f + 0.04f * 0.5f * (1 + cosf((float)M_PI * 89 / 90)), 1e-7f);
    ck_assert_float_eq_tol(stk_schedule_lr(&cos, 100), 0.01f, 1e-9f);
    ck_assert_float_eq_tol(stk_schedule_lr(&cos, 5), 0.03f, 1e-7f); /* warm-up: not floored */
    stk_schedule step = {.kind = STK_SCHEDULE_STEP, .base_lr = 1.f, .step_size = 30, .gamma = 0.5f};
    ck_assert_float_eq(stk_schedule_lr(&step, 29), 1.f);
    ck_assert_float_eq(stk_schedule_lr(&step, 30), 0.5f);
    ck_assert_float_eq(stk_schedule_lr(&step, 95), 0.125f);
    step.min_lr = 0.2f;
    ck_assert_float_eq(stk_schedule_lr(&step, 30), 0.5f);
    ck_assert_float_eq(stk_schedule_lr(&step, 95), 0.2f);
    stk_schedule one = {.kind = STK_SCHEDULE_ONECYCLE, .base_lr = 0.1f, .total_steps = 101};
    ck_assert_float_eq_tol(stk_schedule_lr(&one, 0), 0.004f, 1e-7f);
    ck_assert_float_eq_tol(stk_schedule_lr(&one, 30), 0.1f, 1e-7f); /* peak at 30% */
    ck_assert_float_eq_tol(stk_schedule_lr(&one, 15), 0.052f, 1e-6f);
    ck_assert_float_eq_tol(stk_schedule_lr(&one, 100), 0.004f / 1e4f, 1e-9f);
}
END_TEST

#define ADDM(call)                                                                                 \
    do {                                                                                           \
        stk_module *m_;                                                                            \
        ck_assert_int_eq(call, STK_OK);                                                            \
        ck_assert_int_eq(stk_module_add(net, m_), STK_OK);                                         \
    } while (0)

START_TEST(test_custom_model)
{
    stk_module *net, *dup;
    ck_assert_int_eq(stk_module_sequential("", &net), STK_OK);
    ADDM(stk_module_conv2d("conv1", 1, 8, 3, 1, 1, false, &m_));
    ADDM(stk_module_batchnorm2d("bn1", 8, &m_));
    ADDM(stk_module_relu("relu", &m_));
    ADDM(stk_module_basic_block("block", 8, 16, 2, &m_));
    ADDM(stk_module_maxpool2d("pool", 2, 0, 0, &m_));
    ADDM(stk_module_avgpool2d("avg", 1, 1, 0, &m_));
    ADDM(stk_module_flatten("flatten", &m_));
    ADDM(stk_module_dropout("drop", 0.5f, &m_));
    ADDM(stk_module_linear("fc", 16 * 2 * 2, 3, true, &m_));
    ck_assert_int_eq(stk_module_relu("fc", &dup), STK_OK);
    ck_assert_int_eq(stk_module_add(net, dup), STK_ERR_INVALID_ARG); /* taken and freed */
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "'fc'"));
    ck_assert_int_eq(stk_module_linear("a.b", 1, 1, true, &dup), STK_ERR_INVALID_ARG);
    stk_model_config c = {.name = "tiny", .in_channels = 1, .classes = 3, .seed = 4};
    stk_model *m;
    ck_assert_int_eq(stk_model_from_module(net, &c, &m), STK_OK);
    ck_assert_ptr_nonnull(stk_model_find(m, "block.downsample.0.weight"));
    ck_assert_ptr_nonnull(stk_model_find(m, "fc.bias"));
    ck_assert_str_eq(stk_model_name(m), "tiny");
    int64_t s[4] = {4, 1, 8, 8};
    stk_tensor *x = rand_tensor(3, 4, s, -1, 1), *a, *b;
    /* train mode: dropout draws a new mask each forward; eval: deterministic */
    ck_assert_int_eq(stk_model_forward(m, x, &a), STK_OK);
    ck_assert_int_eq(stk_model_forward(m, x, &b), STK_OK);
    ck_assert_int_eq(stk_tensor_dim(a, 1), 3);
    float *av = host_f32(a), *bv = host_f32(b);
    ck_assert(memcmp(av, bv, 12 * sizeof(float)) != 0);
    free(av);
    free(bv);
    stk_tensor_release(a);
    stk_tensor_release(b);
    stk_model_train(m, false);
    ck_assert_int_eq(stk_model_forward(m, x, &a), STK_OK);
    ck_assert_int_eq(stk_model_forward(m, x, &b), STK_OK);
    av = host_f32(a);
    bv = host_f32(b);
    ck_assert(memcmp(av, bv, 12 * sizeof(float)) == 0);
    free(av);
    free(bv);
    stk_tensor_release(a);
    stk_tensor_release(b);
    stk_tensor_release(x);
    stk_model_destroy(m);
}
END_TEST

/* Today's architectures: parameter counts at 1000 classes are torchvision's
 * (torchvision 0.14's models, sum of p.numel(); vit_tiny: VisionTransformer
 * (224, 16, 12 layers, 3 heads, 192, 768)), a few torchvision names, and
 * one training step at a small size reaches every parameter with a finite
 * gradient. */
START_TEST(test_modern_models)
{
    struct {
        const char *name;
        int64_t params_1000;
        const char *names[3];
    } cases[] = {
        {"efficientnet_b0",
         5288548,
         {"features.1.0.block.1.fc1.weight", "features.2.0.block.0.1.running_var",
          "classifier.1.weight"}},
        {"mobilenet_v3_small",
         2542856,
         {"features.1.block.1.fc2.bias", "features.12.0.weight", "classifier.3.bias"}},
        {"mobilenet_v3_large",
         5483032,
         {"features.4.block.2.fc1.weight", "features.16.1.running_mean", "classifier.0.weight"}},
        {"convnext_tiny",
         28589128,
         {"features.1.0.layer_scale", "features.2.0.weight", "features.5.8.block.3.weight"}},
        {"regnet_y_400mf",
         4344144,
         {"trunk_output.block1.block1-0.proj.0.weight",
          "trunk_output.block4.block4-5.f.se.fc1.bias", "stem.1.weight"}},
        {"vit_tiny",
         5717416,
         {"class_token", "encoder.layers.encoder_layer_11.self_attention.in_proj_weight",
          "encoder.layers.encoder_layer_0.mlp.3.bias"}},
        {"vit_b_16",
         86567656,
         {"encoder.pos_embedding", "encoder.layers.encoder_layer_5.self_attention.out_proj.weight",
          "heads.head.weight"}},
    };
    /* ThreadSanitizer runs the engine an order of magnitude slower: there
     * the three smallest models (the other builds check them all) */
#ifdef __SANITIZE_THREAD__
    const bool slow = true;
#else
    const bool slow = false;
#endif
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (slow && strcmp(cases[i].name, "mobilenet_v3_small") &&
            strcmp(cases[i].name, "vit_tiny") && strcmp(cases[i].name, "regnet_y_400mf"))
            continue;
        stk_model *m = make(cases[i].name, 3, 1000, 224);
        ck_assert_msg(stk_model_trainable_numel(m) == cases[i].params_1000, "%s: %lld parameters",
                      cases[i].name, (long long)stk_model_trainable_numel(m));
        for (int k = 0; k < 3; k++)
            ck_assert_msg(stk_model_find(m, cases[i].names[k]) != NULL, "%s: no %s", cases[i].name,
                          cases[i].names[k]);
        stk_model_destroy(m);
    }
    stk_model *vt = make("vit_tiny", 3, 10, 32);
    ck_assert_str_eq(stk_model_param(vt, 0)->name, "class_token");
    stk_model_destroy(vt);
    /* one step of each (vit_b_16 is vit_tiny's code, wider) */
    for (size_t i = 0; i + 1 < sizeof cases / sizeof cases[0]; i++) {
        if (slow && strcmp(cases[i].name, "mobilenet_v3_small") &&
            strcmp(cases[i].name, "vit_tiny"))
            continue;
        stk_model *m = make(cases[i].name, 1, 10, 28);
        int64_t s[4] = {2, 1, 28, 28}, n = 2;
        stk_tensor *x = rand_tensor(5, 4, s, -1, 1), *y, *loss, *lab;
        ck_assert_int_eq(stk_tensor_zeros(STK_I32, 1, &n, &lab), STK_OK);
        ((int32_t *)stk_tensor_data(lab))[1] = 3;
        stk_scope *sc;
        ck_assert_int_eq(stk_scope_begin(&sc), STK_OK);
        ck_assert_msg(stk_model_forward(m, x, &y) == STK_OK, "%s: %s", cases[i].name,
                      stk_last_error());
        ck_assert_int_eq(stk_tensor_dim(y, 1), 10);
        ck_assert_int_eq(stk_cross_entropy(y, lab, 0.f, &loss), STK_OK);
        ck_assert_msg(stk_backward(loss, NULL, false) == STK_OK, "%s: %s", cases[i].name,
                      stk_last_error());
        stk_scope_end(sc);
        for (int k = 0; k < stk_model_param_count(m); k++) {
            const stk_param *p = stk_model_param(m, k);
            if (p->is_buffer) continue;
            stk_tensor *g = stk_tensor_grad(p->value);
            ck_assert_msg(g != NULL, "%s: %s got no gradient", cases[i].name, p->name);
            float *gv = host_f32(g);
            bool finite = true; /* one assertion per tensor: Check's are slow in a loop */
            for (int64_t e = 0; e < stk_tensor_numel(g); e++) finite &= isfinite(gv[e]) != 0;
            free(gv);
            ck_assert_msg(finite, "%s: %s has a gradient that is not finite", cases[i].name,
                          p->name);
        }
        const char *bad;
        ck_assert_int_eq(stk_model_check_finite(m, &bad), STK_OK);
        ck_assert_ptr_null(bad);
        stk_tensor_release(x), stk_tensor_release(lab);
        stk_model_destroy(m);
    }
    /* sizes the patches do not fit */
    stk_model_config c = {.name = "vit_b_16", .in_channels = 3, .classes = 10, .image_size = 28};
    stk_model *m;
    ck_assert_int_eq(stk_model_create(&c, &m), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "16 px"));
    c.name = "vit_tiny", c.image_size = 13;
    ck_assert_int_eq(stk_model_create(&c, &m), STK_ERR_INVALID_ARG);
    c.image_size = 32, c.drop_path = 1.f;
    ck_assert_int_eq(stk_model_create(&c, &m), STK_ERR_INVALID_ARG);
}
END_TEST

/* The module kinds of today's architectures in a model of one's own:
 * squeeze-excitation, a residual with a shortcut and an activation after,
 * concat, layer norms, permute, layer scale, drop path, attention. */
START_TEST(test_custom_model_blocks)
{
    stk_module *net, *res, *cat, *br, *k_;
    ck_assert_int_eq(stk_module_sequential("", &net), STK_OK);
    ADDM(stk_module_conv2d_grouped("stem", 2, 8, 3, 1, 1, 2, true, &m_));
    ADDM(stk_module_activation("act", STK_ACT_HARDSWISH, &m_));
    ck_assert_int_eq(stk_module_residual("res", STK_ACT_SILU, &res), STK_OK);
    ck_assert_int_eq(stk_module_conv2d("conv", 8, 12, 3, 2, 1, false, &k_), STK_OK);
    ck_assert_int_eq(stk_module_add(res, k_), STK_OK);
    ck_assert_int_eq(
        stk_module_squeeze_excitation("se", 12, 4, STK_ACT_RELU, STK_ACT_HARDSIGMOID, &k_), STK_OK);
    ck_assert_int_eq(stk_module_add(res, k_), STK_OK);
    ck_assert_int_eq(stk_module_layer_scale("gamma", 12, 0.5f, true, &k_), STK_OK);
    ck_assert_int_eq(stk_module_add(res, k_), STK_OK);
    ck_assert_int_eq(stk_module_drop_path("dp", 0.2f, &k_), STK_OK);
    ck_assert_int_eq(stk_module_add(res, k_), STK_OK);
    ck_assert_int_eq(stk_module_conv2d("down", 8, 12, 1, 2, 0, false, &k_), STK_OK);
    ck_assert_int_eq(stk_module_set_shortcut(res, k_), STK_OK);
    ck_assert_int_eq(stk_module_conv2d("again", 8, 12, 1, 2, 0, false, &k_), STK_OK);
    ck_assert_int_eq(stk_module_set_shortcut(res, k_), STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_module_add(net, res), STK_OK);
    ck_assert_int_eq(stk_module_concat("cat", &cat), STK_OK);
    ck_assert_int_eq(stk_module_layer_norm2d("ln", 12, 1e-6f, &k_), STK_OK);
    ck_assert_int_eq(stk_module_add(cat, k_), STK_OK);
    ck_assert_int_eq(stk_module_sequential("tok", &br), STK_OK);
    static const int nhwc[4] = {0, 2, 3, 1}, nchw[4] = {0, 3, 1, 2};
    ck_assert_int_eq(stk_module_permute("p1", 4, nhwc, &k_), STK_OK);
    ck_assert_int_eq(stk_module_add(br, k_), STK_OK);
    ck_assert_int_eq(stk_module_layer_norm("ln", 12, 1e-5f, &k_), STK_OK);
    ck_assert_int_eq(stk_module_add(br, k_), STK_OK);
    ck_assert_int_eq(stk_module_permute("p2", 4, nchw, &k_), STK_OK);
    ck_assert_int_eq(stk_module_add(br, k_), STK_OK);
    ck_assert_int_eq(stk_module_add(cat, br), STK_OK);
    ck_assert_int_eq(stk_module_add(net, cat), STK_OK);
    ADDM(stk_module_global_avgpool("pool", &m_));
    ADDM(stk_module_linear("fc", 24, 5, true, &m_));
    /* bad sizes and names */
    static const int dup[2] = {0, 0};
    ck_assert_int_eq(stk_module_permute("p", 2, dup, &k_), STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_module_conv2d_grouped("g", 6, 8, 3, 1, 1, 4, false, &k_),
                     STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_module_attention("a", 10, 3, &k_), STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_module_layer_norm("n", 4, 0.f, &k_), STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_module_activation("x", STK_ACT_NONE, &k_), STK_ERR_INVALID_ARG);
    stk_model_config c = {.name = "blocks", .in_channels = 2, .classes = 5, .seed = 4};
    stk_model *m;
    ck_assert_int_eq(stk_model_from_module(net, &c, &m), STK_OK);
    ck_assert_ptr_nonnull(stk_model_find(m, "res.gamma")); /* the parent's parameter */
    ck_assert_ptr_nonnull(stk_model_find(m, "res.se.fc2.bias"));
    ck_assert_ptr_nonnull(stk_model_find(m, "res.down.weight"));
    ck_assert_ptr_nonnull(stk_model_find(m, "cat.tok.ln.weight"));
    ck_assert_float_eq(((float *)stk_tensor_data(stk_model_find(m, "res.gamma")->value))[3], 0.5f);
    int64_t s[4] = {3, 2, 8, 8};
    stk_tensor *x = rand_tensor(3, 4, s, -1, 1), *y, *loss;
    stk_scope *sc;
    ck_assert_int_eq(stk_scope_begin(&sc), STK_OK);
    ck_assert_msg(stk_model_forward(m, x, &y) == STK_OK, "%s", stk_last_error());
    ck_assert_int_eq(stk_tensor_dim(y, 1), 5);
    ck_assert_int_eq(stk_sum(y, 0, NULL, false, &loss), STK_OK);
    ck_assert_int_eq(stk_backward(loss, NULL, false), STK_OK);
    stk_scope_end(sc);
    for (int k = 0; k < stk_model_param_count(m); k++)
        if (!stk_model_param(m, k)->is_buffer)
            ck_assert_msg(stk_tensor_grad(stk_model_param(m, k)->value) != NULL, "%s",
                          stk_model_param(m, k)->name);
    stk_tensor_release(x);
    stk_model_destroy(m);

    /* attention over tokens: [N, S, D] in, the same shape out */
    ck_assert_int_eq(stk_module_sequential("", &net), STK_OK);
    ADDM(stk_module_attention("attn", 8, 2, &m_));
    c.in_channels = 4;
    ck_assert_int_eq(stk_model_from_module(net, &c, &m), STK_OK);
    ck_assert_ptr_nonnull(stk_model_find(m, "attn.in_proj_weight"));
    ck_assert_ptr_nonnull(stk_model_find(m, "attn.out_proj.bias"));
    stk_model_destroy(m);
}
END_TEST

static Suite *nn_suite(void)
{
    Suite *s = suite_create("nn");
    TCase *t = tcase_create("nn");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_models_shapes_and_names);
    tcase_add_test(t, test_init_is_torch_default);
    tcase_add_test(t, test_training_reduces_loss);
    tcase_add_test(t, test_check_finite_names_the_parameter);
    tcase_add_test(t, test_train_eval_and_freeze);
    tcase_add_test(t, test_optimizer_formulas);
    tcase_add_test(t, test_schedules);
    tcase_add_test(t, test_custom_model);
    tcase_add_test(t, test_modern_models);
    tcase_add_test(t, test_custom_model_blocks);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return stk_check_run(nn_suite()); }
