/* The trainer (train/): its step against the same step written out by
 * hand, the hooks and their order, errors from hooks and divergence, the
 * position through save and resume, the loss scaler, device names, the
 * batch transforms (draws, pixels, mixed labels and loss). */
#include "check_main.h"
#include "kernels/backend.h"
#include "engine/checkpoint.h"
#include "storage/safetensors.h"
#include "engine_testlib.h"
#include "test_tmpdir.h"
#include "train/batch.h"
#include "train/batch_mix.h"
#include "train/device.h"
#include "train/ema.h"
#include "train/memory_estimate.h"
#include "train/loss_scaler.h"
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>

static char path_buf[700];

/* A fixture tensor's floats (F32), by name. */
static const float *ref_floats(const stk_safetensors *f, const char *name)
{
    const stk_st_entry *e = stk_safetensors_find(f, name);
    ck_assert_msg(e && e->dtype == STK_ST_F32, "fixture %s missing", name);
    return stk_safetensors_data(f, e);
}
static const char *tmp_path(const char *name)
{
    snprintf(path_buf, sizeof path_buf, "%s/%s", test_tmp, name);
    return path_buf;
}

static stk_model *make(const char *name, uint64_t seed)
{
    stk_model_config c = {
        .name = name, .in_channels = 1, .classes = 3, .image_size = 8, .seed = seed};
    stk_model *m;
    ck_assert_int_eq(stk_model_create(&c, &m), STK_OK);
    return m;
}

static stk_optim *sgd(stk_model *m)
{
    stk_optim_config oc = {.kind = STK_OPTIM_SGD,
                           .lr = 0.05f,
                           .momentum = 0.9f,
                           .weight_decay = 5e-4f,
                           .nesterov = true};
    stk_optim *o;
    ck_assert_int_eq(stk_optim_create(&oc, m, &o), STK_OK);
    return o;
}

static const stk_schedule schedule = {
    .kind = STK_SCHEDULE_COSINE, .base_lr = 0.05f, .total_steps = 8, .warmup_steps = 2};

/* A CPU batch of 4 random 8x8 u8 images (seed s) and its labels. */
typedef struct batch_buf {
    uint8_t px[4 * 8 * 8];
    int32_t labels[4];
    stk_device_batch b;
} batch_buf;

static void make_batch(batch_buf *bb, int s)
{
    stk_rng r;
    stk_rng_init(&r, (uint64_t)s, 5, 0);
    for (int i = 0; i < 4 * 8 * 8; i++) bb->px[i] = (uint8_t)(stk_rng_uniform(&r) * 256);
    for (int i = 0; i < 4; i++) bb->labels[i] = (s + i) % 3;
    bb->b = (stk_device_batch){.data = bb->px,
                               .labels = bb->labels,
                               .host_labels = bb->labels,
                               .sample_bytes = 64,
                               .count = 4,
                               .width = 8,
                               .height = 8,
                               .channels = 1,
                               .device = STK_DEVICE_CPU};
}

static const float mean[3] = {0.4f, 0.4f, 0.4f}, stdev[3] = {0.3f, 0.3f, 0.3f};

static stk_trainer *make_trainer(stk_model *m, stk_optim *o)
{
    stk_trainer_config c = stk_trainer_defaults();
    c.label_smoothing = 0.1f;
    c.schedule = schedule;
    memcpy(c.mean, mean, sizeof mean);
    memcpy(c.std, stdev, sizeof stdev);
    c.seed = 7;
    stk_trainer *t;
    ck_assert_int_eq(stk_trainer_create(&c, m, o, &t), STK_OK);
    return t;
}

static bool same_weights(const stk_model *a, const stk_model *b)
{
    for (int i = 0; i < stk_model_param_count(a); i++) {
        stk_tensor *x = stk_model_param(a, i)->value, *y = stk_model_param(b, i)->value;
        size_t bytes = (size_t)stk_tensor_numel(x) * stk_dtype_size(stk_tensor_dtype(x));
        if (memcmp(stk_tensor_data(x), stk_tensor_data(y), bytes)) return false;
    }
    return true;
}

/* Gradient clipping in manual_step (0: none), and the norm it found. */
static float clip_norm, clip_value, clipped_norm;

/* The step as stoke train wrote it before the trainer existed. */
static float manual_step(stk_model *m, stk_optim *o, const stk_device_batch *b, int64_t step,
                         int *top1)
{
    stk_scope *s;
    ck_assert_int_eq(stk_scope_begin(&s), STK_OK);
    stk_tensor *x, *y, *logits, *loss;
    ck_assert_int_eq(stk_batch_tensors(b, mean, stdev, &x, &y), STK_OK);
    ck_assert_int_eq(stk_model_forward(m, x, &logits), STK_OK);
    ck_assert_int_eq(stk_cross_entropy(logits, y, 0.1f, &loss), STK_OK);
    float l = stk_tensor_item(loss);
    int t5;
    ck_assert_int_eq(stk_batch_count_correct(logits, b->host_labels, b->count, top1, &t5), STK_OK);
    stk_optim_set_lr(o, stk_schedule_lr(&schedule, step));
    ck_assert_int_eq(stk_backward(loss, NULL, false), STK_OK);
    if (clip_norm > 0 || clip_value > 0) {
        stk_tensor *g[64];
        int np = stk_model_param_count(m);
        ck_assert_int_le(np, 64);
        for (int i = 0; i < np; i++) g[i] = stk_tensor_grad(stk_model_param(m, i)->value);
        if (clip_norm > 0)
            ck_assert_int_eq(stk_clip_grad_norm(np, g, clip_norm, &clipped_norm), STK_OK);
        else
            ck_assert_int_eq(stk_clip_grad_value(np, g, clip_value), STK_OK);
    }
    ck_assert_int_eq(stk_optim_step(o), STK_OK);
    stk_scope_end(s);
    return l;
}

START_TEST(test_step_matches_the_written_out_step)
{
    stk_model *a = make("resnet8", 1), *b = make("resnet8", 1);
    stk_optim *oa = sgd(a), *ob = sgd(b);
    stk_model_train(a, true);
    stk_model_train(b, true);
    stk_trainer *t = make_trainer(b, ob);
    for (int s = 0; s < 4; s++) {
        batch_buf bb;
        make_batch(&bb, s);
        int top1;
        float want = manual_step(a, oa, &bb.b, s, &top1);
        stk_step_result r;
        stk_status st = stk_trainer_step(t, &bb.b, &r);
        ck_assert_msg(st == STK_OK, "%s", stk_last_error());
        ck_assert_float_eq(r.loss, want); /* bit-identical, not close */
        ck_assert_int_eq(r.top1, top1);
        ck_assert_int_eq(r.count, 4);
        ck_assert(r.stepped);
        ck_assert_msg(same_weights(a, b), "weights differ after step %d", s);
        ck_assert_float_eq(stk_optim_lr(ob), stk_optim_lr(oa));
    }
    ck_assert_int_eq(stk_trainer_position(t)->step, 4);
    stk_trainer_destroy(t);
    stk_optim_destroy(oa);
    stk_optim_destroy(ob);
    stk_model_destroy(a);
    stk_model_destroy(b);
}
END_TEST

/* --clip-grad-norm and --clip-grad-value: the trainer's step equals the
 * written-out step with torch.nn.utils' clipping (tests/test_ops.c checks
 * that against PyTorch) between backward and the optimizer, bit for bit,
 * and reports the norm it clipped from. */
START_TEST(test_clipping_matches_the_written_out_step)
{
    for (int mode = 0; mode < 2; mode++) {
        stk_model *a = make("cnn", 2), *b = make("cnn", 2);
        stk_optim *oa = sgd(a), *ob = sgd(b);
        stk_model_train(a, true);
        stk_model_train(b, true);
        stk_trainer_config c = stk_trainer_defaults();
        c.label_smoothing = 0.1f;
        c.schedule = schedule;
        memcpy(c.mean, mean, sizeof mean);
        memcpy(c.std, stdev, sizeof stdev);
        clip_norm = c.clip_grad_norm = mode == 0 ? 0.05f : 0.f;
        clip_value = c.clip_grad_value = mode == 1 ? 0.002f : 0.f;
        stk_trainer *t;
        ck_assert_int_eq(stk_trainer_create(&c, b, ob, &t), STK_OK);
        for (int s = 0; s < 3; s++) {
            batch_buf bb;
            make_batch(&bb, s);
            int top1;
            clipped_norm = NAN;
            float want = manual_step(a, oa, &bb.b, s, &top1);
            stk_step_result r;
            ck_assert_msg(stk_trainer_step(t, &bb.b, &r) == STK_OK, "%s", stk_last_error());
            ck_assert_float_eq(r.loss, want);
            ck_assert_msg(same_weights(a, b), "mode %d: weights differ after step %d", mode, s);
            if (mode == 0) {
                ck_assert_float_eq(r.grad_norm, clipped_norm);
                ck_assert(r.grad_norm > 0.05f); /* it did clip */
            } else {
                ck_assert(isnan(r.grad_norm));
            }
        }
        stk_trainer_destroy(t);
        stk_optim_destroy(oa), stk_optim_destroy(ob);
        stk_model_destroy(a), stk_model_destroy(b);
    }
    clip_norm = clip_value = 0;
    /* bounds the trainer refuses */
    stk_model *m = make("mlp", 1);
    float bad[][2] = {{-1, 0}, {0, -0.5f}, {NAN, 0}, {0, INFINITY}, {1, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        stk_trainer_config c = stk_trainer_defaults();
        c.clip_grad_norm = bad[i][0], c.clip_grad_value = bad[i][1];
        stk_trainer *t = NULL;
        ck_assert_int_eq(stk_trainer_create(&c, m, NULL, &t), STK_ERR_INVALID_ARG);
        ck_assert_ptr_null(t);
        ck_assert_ptr_nonnull(strstr(stk_last_error(), "clipping"));
    }
    stk_model_destroy(m);
}
END_TEST

/* The confusion matrix counts the top-1 prediction, the lower index on a
 * tie, so its diagonal is exactly the top-1 hits. */
START_TEST(test_confusion_counts_the_top1_prediction)
{
    const float v[4 * 3] = {
        0.1f, 2.0f, 0.5f, /* label 1, predicted 1 */
        1.0f, 1.0f, 0.0f, /* label 1, tie with class 0: predicted 0 (wrong, as top-1) */
        0.0f, 3.0f, 3.0f, /* label 1, tie with class 2: predicted 1 (right) */
        5.0f, 0.0f, 0.0f, /* label 2, predicted 0 */
    };
    const int32_t labels[4] = {1, 1, 1, 2};
    int64_t shape[2] = {4, 3};
    stk_tensor *logits;
    ck_assert_int_eq(stk_tensor_wrap(STK_DEVICE_CPU, STK_F32, 2, shape, (void *)v, &logits),
                     STK_OK);
    uint64_t cm[9] = {0};
    int top1, top5;
    ck_assert_int_eq(stk_batch_count_confusion(logits, labels, 4, &top1, &top5, cm), STK_OK);
    const uint64_t want[9] = {0, 0, 0, 1, 2, 0, 1, 0, 0};
    for (int i = 0; i < 9; i++) ck_assert_msg(cm[i] == want[i], "cell %d: %d", i, (int)cm[i]);
    ck_assert_int_eq(top1, (int)(cm[0] + cm[4] + cm[8]));
    stk_tensor_release(logits);
}
END_TEST

/* The moving average against timm's update, computed in float64 by
 * tests/fixtures/make_torch_reference.py: a parameter averaged and a
 * buffer copied over six steps, without and with warm-up. */
START_TEST(test_ema_matches_the_reference)
{
    char path[600];
    snprintf(path, sizeof path, "%s/torch_reference.safetensors",
             getenv("STOKE_TEST_DATA") ? getenv("STOKE_TEST_DATA") : "tests/data");
    stk_safetensors *f;
    ck_assert_msg(stk_safetensors_read(path, &f) == STK_OK, "%s", stk_last_error());
    const char *runs[2] = {"ema", "ema_warmup"};
    for (int w = 0; w < 2; w++) {
        char name[64];
#define REF(fmt, ...) (snprintf(name, sizeof name, fmt, __VA_ARGS__), ref_floats(f, name))
        int64_t sp = 7, sb = 3;
        stk_tensor *v[2];
        ck_assert_int_eq(stk_tensor_from_host(STK_F32, 1, &sp, REF("%s.param0", runs[w]), &v[0]),
                         STK_OK);
        ck_assert_int_eq(stk_tensor_from_host(STK_F32, 1, &sb, REF("%s.buf0", runs[w]), &v[1]),
                         STK_OK);
        bool is_buffer[2] = {false, true};
        stk_ema *e;
        ck_assert_int_eq(stk_ema_create(2, v, is_buffer, REF("%s.decay", runs[w])[0], w == 1, &e),
                         STK_OK);
        for (int k = 1; k <= 6; k++) {
            ck_assert_float_eq_tol(stk_ema_decay_at(e, k), REF("%s.decay%d", runs[w], k)[0], 1e-7);
            memcpy(stk_tensor_data(v[0]), REF("%s.model_param%d", runs[w], k), 7 * sizeof(float));
            memcpy(stk_tensor_data(v[1]), REF("%s.model_buf%d", runs[w], k), 3 * sizeof(float));
            ck_assert_int_eq(stk_ema_update(e, v), STK_OK);
            const float *avg = stk_tensor_data(stk_ema_tensors(e)[0]);
            const float *want = REF("%s.ema_param%d", runs[w], k);
            for (int i = 0; i < 7; i++)
                ck_assert_msg(fabsf(avg[i] - want[i]) <= 1e-6f * (1 + fabsf(want[i])),
                              "%s step %d element %d: %.8g, want %.8g", runs[w], k, i, avg[i],
                              want[i]);
            ck_assert(!memcmp(stk_tensor_data(stk_ema_tensors(e)[1]),
                              REF("%s.ema_buf%d", runs[w], k), 3 * sizeof(float)));
        }
#undef REF
        ck_assert_int_eq(stk_ema_updates(e), 6);
        /* swapping twice leaves both as they were */
        float before[7];
        memcpy(before, stk_tensor_data(v[0]), sizeof before);
        ck_assert_int_eq(stk_ema_swap(e, v), STK_OK);
        ck_assert(memcmp(before, stk_tensor_data(v[0]), sizeof before));
        ck_assert_int_eq(stk_ema_swap(e, v), STK_OK);
        ck_assert(!memcmp(before, stk_tensor_data(v[0]), sizeof before));
        stk_ema_destroy(e);
        stk_tensor_release(v[0]), stk_tensor_release(v[1]);
    }
    stk_safetensors_free(f);
    stk_ema *e = NULL;
    stk_tensor *none[1] = {NULL};
    bool nb[1] = {false};
    ck_assert_int_eq(stk_ema_create(0, none, nb, 1.0f, false, &e), STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_ema_create(0, none, nb, NAN, false, &e), STK_ERR_INVALID_ARG);
    ck_assert_ptr_null(e);
}
END_TEST

/* The memory estimate against a real step: close to the allocator's peak
 * of a training step at batch 8 (the estimate runs eval-mode batch norm and
 * leaves out little), the model untouched (weights, statistics, no
 * gradients), and the batch that fits a budget. */
START_TEST(test_memory_estimate_matches_a_step)
{
    stk_model *m = make("resnet8", 4), *twin = make("resnet8", 4);
    stk_model_train(m, true);
    stk_optim_config oc = {.kind = STK_OPTIM_SGD, .lr = 0.05f, .momentum = 0.9f};
    stk_memory_estimate e;
    ck_assert_int_eq(stk_estimate_training_memory(m, &oc, 1, 8, &e), STK_OK);
    ck_assert(stk_model_is_training(m));
    ck_assert_msg(same_weights(m, twin), "the estimate changed the model");
    for (int i = 0; i < stk_model_param_count(m); i++)
        ck_assert_ptr_null(stk_tensor_grad(stk_model_param(m, i)->value));
    ck_assert(e.per_image > 0 && e.fixed > 0);
    /* a real step at batch 8 (an optimizer with momentum, so its state counts) */
    stk_optim *o = sgd(m);
    stk_device_reset_peak(STK_DEVICE_CPU);
    stk_mem_stats before, after;
    stk_device_mem_stats(STK_DEVICE_CPU, &before);
    stk_trainer *t = make_trainer(m, o);
    batch_buf bb[2];
    make_batch(&bb[0], 0), make_batch(&bb[1], 1);
    for (int i = 0; i < 2; i++) { /* four images a batch: the estimate at 4 */
        stk_step_result r;
        ck_assert_int_eq(stk_trainer_step(t, &bb[i].b, &r), STK_OK);
    }
    stk_device_mem_stats(STK_DEVICE_CPU, &after);
    double want = (double)after.peak_allocated, got = (double)stk_memory_estimate_at(&e, 4);
    ck_assert_msg(fabs(got - want) <= 0.25 * want, "estimate %.0f bytes, a step's peak %.0f", got,
                  want);
    (void)before;
    ck_assert_int_eq(stk_memory_estimate_batch(&e, stk_memory_estimate_at(&e, 10)), 10);
    ck_assert_int_eq(stk_memory_estimate_batch(&e, stk_memory_estimate_at(&e, 10) - 1), 9);
    ck_assert_int_eq(stk_memory_estimate_batch(&e, e.fixed), 0);
    stk_trainer_destroy(t);
    stk_optim_destroy(o);
    stk_model_destroy(m);
    stk_model_destroy(twin);
}
END_TEST

/* ---- hooks ----------------------------------------------------------------- */

typedef struct hook_log {
    stk_step_event events[64];
    int params[64];
    int n;
    float *seen[64];  /* GRAD_READY: a copy of the gradient as the hook saw it */
    bool grads_final; /* AFTER_BACKWARD: every copy equals the final gradient */
    stk_status fail_at_forward;
} hook_log;

static stk_status record(void *ctx, const stk_step_info *info)
{
    hook_log *h = ctx;
    ck_assert_int_lt(h->n, 64);
    h->events[h->n] = info->event;
    h->params[h->n] = info->param;
    if (info->event == STK_STEP_GRAD_READY) {
        ck_assert_ptr_nonnull(info->grad);
        h->seen[h->n] = host_f32(info->grad);
    }
    if (info->event == STK_STEP_AFTER_BACKWARD) {
        h->grads_final = true;
        for (int i = 0; i < h->n; i++) {
            if (h->events[i] != STK_STEP_GRAD_READY) continue;
            stk_tensor *g = stk_tensor_grad(stk_model_param(info->model, h->params[i])->value);
            float *now = host_f32(g);
            if (memcmp(now, h->seen[i], (size_t)stk_tensor_numel(g) * sizeof(float)))
                h->grads_final = false;
            free(now);
        }
    }
    if (info->event == STK_STEP_AFTER_FORWARD) {
        ck_assert_ptr_nonnull(info->logits);
        ck_assert_ptr_nonnull(info->loss);
        if (h->fail_at_forward != STK_OK)
            return stk_error(h->fail_at_forward, "the test's hook says no");
    }
    h->n++;
    return STK_OK;
}

START_TEST(test_hooks_run_in_order_and_gradients_are_final)
{
    stk_model *m = make("mlp", 1);
    /* frozen parameters get no hook: they have no gradient */
    int frozen = stk_model_set_requires_grad(m, "fc1", false);
    ck_assert_int_gt(frozen, 0);
    stk_optim *o = sgd(m);
    stk_trainer *t = make_trainer(m, o);
    hook_log h = {0};
    for (int e = 0; e < STK_STEP_EVENTS; e++)
        ck_assert_int_eq(stk_trainer_add_hook(t, (stk_step_event)e, record, &h), STK_OK);
    batch_buf bb;
    make_batch(&bb, 1);
    stk_step_result r;
    ck_assert_int_eq(stk_trainer_step(t, &bb.b, &r), STK_OK);
    int np = stk_model_param_count(m), trainable = 0;
    for (int i = 0; i < np; i++)
        trainable += stk_tensor_requires_grad(stk_model_param(m, i)->value);
    ck_assert_int_eq(h.n, 4 + trainable);
    ck_assert_int_eq(h.events[0], STK_STEP_BEFORE_FORWARD);
    ck_assert_int_eq(h.events[1], STK_STEP_AFTER_FORWARD);
    bool fired[64] = {0};
    for (int i = 2; i < 2 + trainable; i++) {
        ck_assert_int_eq(h.events[i], STK_STEP_GRAD_READY);
        int p = h.params[i];
        ck_assert(stk_tensor_requires_grad(stk_model_param(m, p)->value));
        ck_assert(!fired[p]); /* once per parameter */
        fired[p] = true;
        free(h.seen[i]);
    }
    /* the last layer's gradient is final first */
    ck_assert_int_ge(h.params[2], np - 2);
    ck_assert_int_eq(h.events[2 + trainable], STK_STEP_AFTER_BACKWARD);
    ck_assert_int_eq(h.events[3 + trainable], STK_STEP_AFTER_OPTIMIZER);
    ck_assert(h.grads_final);
    stk_trainer_destroy(t);
    /* the trainer took its gradient hooks back: a plain backward runs none */
    stk_scope *s;
    ck_assert_int_eq(stk_scope_begin(&s), STK_OK);
    stk_tensor *x, *y, *logits, *loss;
    ck_assert_int_eq(stk_batch_tensors(&bb.b, mean, stdev, &x, &y), STK_OK);
    ck_assert_int_eq(stk_model_forward(m, x, &logits), STK_OK);
    ck_assert_int_eq(stk_cross_entropy(logits, y, 0.f, &loss), STK_OK);
    ck_assert_int_eq(stk_backward(loss, NULL, false), STK_OK);
    stk_scope_end(s);
    stk_optim_destroy(o);
    stk_model_destroy(m);
}
END_TEST

START_TEST(test_hook_error_stops_the_step)
{
    stk_model *m = make("mlp", 1), *ref = make("mlp", 1);
    stk_optim *o = sgd(m);
    stk_trainer *t = make_trainer(m, o);
    hook_log h = {.fail_at_forward = STK_ERR_CANCELLED};
    ck_assert_int_eq(stk_trainer_add_hook(t, STK_STEP_AFTER_FORWARD, record, &h), STK_OK);
    ck_assert_int_eq(stk_trainer_add_hook(t, STK_STEP_EVENTS, record, &h), STK_ERR_INVALID_ARG);
    batch_buf bb;
    make_batch(&bb, 1);
    stk_step_result r;
    ck_assert_int_eq(stk_trainer_step(t, &bb.b, &r), STK_ERR_CANCELLED);
    ck_assert_str_eq(stk_last_error(), "the test's hook says no");
    ck_assert_int_eq(stk_trainer_position(t)->step, 0);
    ck_assert(same_weights(m, ref)); /* nothing was updated */
    stk_trainer_destroy(t);
    stk_optim_destroy(o);
    stk_model_destroy(m);
    stk_model_destroy(ref);
}
END_TEST

START_TEST(test_divergence_is_reported)
{
    stk_model *m = make("mlp", 1);
    stk_optim *o = sgd(m);
    stk_trainer *t = make_trainer(m, o);
    int64_t xs[4] = {4, 1, 8, 8}, ys[1] = {4};
    stk_scope *s;
    ck_assert_int_eq(stk_scope_begin(&s), STK_OK);
    stk_tensor *x = rand_tensor(3, 4, xs, -1, 1), *y;
    int32_t lab[4] = {0, 1, 2, 0};
    ck_assert_int_eq(stk_tensor_from_host(STK_I32, 1, ys, lab, &y), STK_OK);
    ((float *)stk_tensor_data(x))[5] = NAN;
    stk_step_result r;
    /* the ReLU swallows the NaN, its gradient does not */
    ck_assert_int_eq(stk_trainer_step_tensors(t, x, y, lab, &r), STK_ERR_DIVERGED);
    ck_assert_str_eq(stk_last_error(), "fc1.weight is not finite after step 1: training diverged");
    ck_assert_int_eq(stk_trainer_position(t)->step, 0);
    /* a NaN in the last layer: the loss itself */
    ((float *)stk_tensor_data(x))[5] = 0.f;
    stk_tensor *last = stk_model_param(m, stk_model_param_count(m) - 1)->value;
    ((float *)stk_tensor_data(last))[0] = NAN;
    ck_assert_int_eq(stk_trainer_step_tensors(t, x, y, lab, &r), STK_ERR_DIVERGED);
    ck_assert_str_eq(stk_last_error(), "the loss is NaN at step 1: training diverged");
    stk_scope_end(s);
    stk_trainer_destroy(t);
    /* without an optimizer the trainer evaluates only */
    ck_assert_int_eq(stk_trainer_create(&(stk_trainer_config){.std = {1, 1, 1}}, m, NULL, &t),
                     STK_OK);
    ck_assert_int_eq(stk_scope_begin(&s), STK_OK);
    x = rand_tensor(3, 4, xs, -1, 1);
    ck_assert_int_eq(stk_tensor_from_host(STK_I32, 1, ys, lab, &y), STK_OK);
    ck_assert_int_eq(stk_trainer_step_tensors(t, x, y, lab, &r), STK_ERR_INVALID_ARG);
    stk_scope_end(s);
    stk_trainer_destroy(t);
    /* amp on the CPU: bf16 without loss scaling where the CPU has bf16
     * instructions, refused elsewhere */
    stk_trainer_config c = stk_trainer_defaults();
    c.amp = true;
    if (stk_cpu_bf16_isa()) {
        ck_assert_int_eq(stk_trainer_create(&c, m, o, &t), STK_OK);
        ck_assert_float_eq(stk_trainer_loss_scale(t), 1.f);
        stk_trainer_destroy(t);
    } else {
        ck_assert_int_eq(stk_trainer_create(&c, m, o, &t), STK_ERR_UNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(stk_last_error(), "AVX512_BF16"));
    }
    stk_optim_destroy(o);
    stk_model_destroy(m);
}
END_TEST

/* ---- position --------------------------------------------------------------- */

START_TEST(test_save_and_resume_continue_bit_identically)
{
    test_tmpdir_create("trainer");
    stk_model *a = make("resnet8", 1), *b = make("resnet8", 1), *c = make("resnet8", 99);
    stk_optim *oa = sgd(a), *ob = sgd(b), *oc = sgd(c);
    stk_trainer *ta = make_trainer(a, oa), *tb = make_trainer(b, ob), *tc = make_trainer(c, oc);
    batch_buf bb[4];
    stk_step_result r;
    for (int s = 0; s < 4; s++) {
        make_batch(&bb[s], s);
        ck_assert_int_eq(stk_trainer_step(ta, &bb[s].b, &r), STK_OK);
        if (s < 2) ck_assert_int_eq(stk_trainer_step(tb, &bb[s].b, &r), STK_OK);
    }
    stk_train_position *pb = stk_trainer_position(tb);
    pb->epoch = 1;
    snprintf(pb->monitor, sizeof pb->monitor, "val_loss");
    pb->best_value = 0.1 + 0.2; /* 0.30000000000000004: kept to the last bit */
    pb->best_epoch = 1;
    pb->wait = 0;
    pb->loader = (stk_loader_position){.seed = 7, .epoch = 1, .cursor = 0};
    const char *k[1] = {"data"}, *v[1] = {"train.stoke"};
    ck_assert_int_eq(stk_trainer_save(tb, tmp_path("last.safetensors"), 1, k, v), STK_OK);
    stk_status st = stk_trainer_resume(tc, tmp_path("last.safetensors"));
    ck_assert_msg(st == STK_OK, "%s", stk_last_error());
    stk_train_position *pc = stk_trainer_position(tc);
    ck_assert_int_eq(pc->step, 2);
    ck_assert_int_eq(pc->epoch, 1);
    ck_assert_int_eq(pc->seed, 7);
    ck_assert(pc->best_value == 0.1 + 0.2);
    ck_assert_str_eq(pc->monitor, "val_loss");
    ck_assert_int_eq(pc->best_epoch, 1);
    ck_assert_int_eq(pc->loader.epoch, 1);
    for (int s = 2; s < 4; s++) ck_assert_int_eq(stk_trainer_step(tc, &bb[s].b, &r), STK_OK);
    ck_assert_msg(same_weights(a, c), "the resumed run differs");
    /* the position alone, and damaged positions */
    stk_train_position p;
    ck_assert_int_eq(stk_train_position_read(tmp_path("last.safetensors"), &p), STK_OK);
    ck_assert_int_eq(p.step, 2);
    const char *keys[5] = {"epoch", "step", "seed", "best_val_top1", "loader_position"};
    const char *bad[][5] = {{"1", "2", "7", "42.5", "seed=7,epoch=x,cursor=0"},
                            {"1", "2", "7", "142.5", "seed=7,epoch=1,cursor=0"},
                            {"1", "-2", "7", "42.5", "seed=7,epoch=1,cursor=0"},
                            {"1", "2", "7", "42.5", "seed=7,epoch=1,cursor=0 "}};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(stk_checkpoint_save(tmp_path("bad.safetensors"), b, ob, 5, keys, bad[i]),
                         STK_OK);
        ck_assert_int_eq(stk_train_position_read(tmp_path("bad.safetensors"), &p), STK_ERR_CORRUPT);
        ck_assert_ptr_nonnull(strstr(stk_last_error(), "bad.safetensors: damaged checkpoint"));
        ck_assert_int_eq(stk_trainer_resume(tc, tmp_path("bad.safetensors")), STK_ERR_CORRUPT);
    }
    /* a model checkpoint without a position is no training checkpoint */
    ck_assert_int_eq(stk_checkpoint_save(tmp_path("plain.safetensors"), b, NULL, 0, NULL, NULL),
                     STK_OK);
    ck_assert_int_eq(stk_trainer_resume(tc, tmp_path("plain.safetensors")), STK_ERR_FORMAT);
    ck_assert_int_eq(pc->step, 4); /* a refused resume changes nothing */
    stk_trainer_destroy(ta);
    stk_trainer_destroy(tb);
    stk_trainer_destroy(tc);
    stk_optim_destroy(oa);
    stk_optim_destroy(ob);
    stk_optim_destroy(oc);
    stk_model_destroy(a);
    stk_model_destroy(b);
    stk_model_destroy(c);
    test_tmpdir_remove();
}
END_TEST

/* ---- loss scaler ------------------------------------------------------------- */

/* forward + backward of a fixed batch, the loss multiplied by `scale`. */
static void grads(stk_model *m, float scale)
{
    batch_buf bb;
    make_batch(&bb, 2);
    stk_scope *s;
    ck_assert_int_eq(stk_scope_begin(&s), STK_OK);
    stk_tensor *x, *y, *logits, *loss, *scaled;
    ck_assert_int_eq(stk_batch_tensors(&bb.b, mean, stdev, &x, &y), STK_OK);
    ck_assert_int_eq(stk_model_forward(m, x, &logits), STK_OK);
    ck_assert_int_eq(stk_cross_entropy(logits, y, 0.f, &loss), STK_OK);
    ck_assert_int_eq(stk_mul_scalar(loss, scale, &scaled), STK_OK);
    ck_assert_int_eq(stk_backward(scaled, NULL, false), STK_OK);
    stk_scope_end(s);
}

START_TEST(test_loss_scaler_unscales_and_skips_overflow)
{
    stk_model *a = make("mlp", 1), *b = make("mlp", 1);
    stk_optim *oa = sgd(a), *ob = sgd(b);
    stk_loss_scaler sc;
    stk_loss_scaler_init(&sc);
    sc.growth_interval = 2;
    /* a power-of-two scale is exact: the scaled step equals the plain one */
    grads(a, 1.f);
    ck_assert_int_eq(stk_optim_step(oa), STK_OK);
    grads(b, sc.scale);
    bool stepped;
    ck_assert_int_eq(stk_loss_scaler_step(&sc, b, ob, &stepped), STK_OK);
    ck_assert(stepped);
    ck_assert(same_weights(a, b));
    ck_assert_float_eq(sc.scale, 65536.f);
    /* an inf gradient: no update, the gradients dropped, the scale halved */
    grads(b, sc.scale);
    stk_tensor *g = stk_tensor_grad(stk_model_param(b, 0)->value);
    ((float *)stk_tensor_data(g))[3] = INFINITY;
    ck_assert_int_eq(stk_loss_scaler_step(&sc, b, ob, &stepped), STK_OK);
    ck_assert(!stepped);
    ck_assert(same_weights(a, b));
    ck_assert_ptr_null(stk_tensor_grad(stk_model_param(b, 0)->value));
    ck_assert_float_eq(sc.scale, 32768.f);
    ck_assert_int_eq(sc.skipped, 1);
    /* growth_interval good steps in a row double it */
    for (int i = 0; i < 2; i++) {
        grads(b, sc.scale);
        ck_assert_int_eq(stk_loss_scaler_step(&sc, b, ob, &stepped), STK_OK);
        ck_assert(stepped);
    }
    ck_assert_float_eq(sc.scale, 65536.f);
    stk_optim_destroy(oa);
    stk_optim_destroy(ob);
    stk_model_destroy(a);
    stk_model_destroy(b);
}
END_TEST

/* ---- devices ------------------------------------------------------------------ */

START_TEST(test_device_names)
{
    stk_device_spec d;
    char name[32];
    ck_assert_int_eq(stk_device_spec_parse("cpu", &d), STK_OK);
    ck_assert_int_eq(d.kind, STK_DEVICE_CPU);
    ck_assert_int_eq(stk_device_spec_parse("cuda", &d), STK_OK);
    ck_assert_int_eq(d.kind, STK_DEVICE_CUDA);
    ck_assert_int_eq(d.index, 0);
    ck_assert_int_eq(stk_device_spec_parse("cuda:3", &d), STK_OK);
    ck_assert_int_eq(d.index, 3);
    stk_device_spec_name(&d, name, sizeof name);
    ck_assert_str_eq(name, "cuda:3");
    const char *bad[] = {"gpu", "cuda:", "cuda:-1", "cuda:99", "cuda:1x", "cudax", "CPU", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(stk_device_spec_parse(bad[i], &d), STK_ERR_INVALID_ARG);
        ck_assert_ptr_nonnull(strstr(stk_last_error(), bad[i]));
    }
    const stk_copy_engine *ce;
    stk_device_spec cpu = {STK_DEVICE_CPU, 0};
    ck_assert_int_eq(stk_device_spec_open(&cpu, &ce), STK_OK);
    ck_assert(ce->in_place);
    ck_assert_ptr_nonnull(ce->host_memory);
}
END_TEST

/* ---- batch transforms (train/batch_mix.h) ---------------------------- */

START_TEST(test_batch_mix_draws_like_timm_and_torchvision)
{
    enum { N = 4000 };
    stk_batch_region er[8], mx[8];
    stk_batch_mix_draw d;
    /* mixup alone: lam ~ Beta(0.2, 0.2): mean 1/2, variance 1/(4 (2a + 1)) */
    stk_batch_mix_config c = {.mixup_alpha = 0.2f, .mix_prob = 1.f, .switch_prob = 0.5f};
    double sum = 0, sq = 0;
    for (int i = 0; i < N; i++) {
        stk_batch_mix_plan(&c, 5, (uint64_t)i, 8, 28, 28, er, mx, &d);
        ck_assert(!d.cutmix && d.lam > 0 && d.lam <= 1);
        sum += d.lam, sq += (double)d.lam * d.lam;
        if (d.lam < 1)
            for (int k = 0; k < 8; k++) {
                ck_assert_int_eq(mx[k].partner, 7 - k);
                ck_assert(mx[k].y0 == 0 && mx[k].y1 == 28 && mx[k].x0 == 0 && mx[k].x1 == 28);
                ck_assert_float_eq(mx[k].a, d.lam);
            }
    }
    double avg = sum / N, var = sq / N - avg * avg;
    ck_assert_msg(fabs(avg - 0.5) < 4 * sqrt(0.1786 / N), "Beta(0.2) mean %g", avg);
    ck_assert_msg(fabs(var - 1 / (4 * 1.4)) < 0.02, "Beta(0.2) variance %g", var);
    /* both, mix_prob 0.6: 60% of batches mixed, half of them cutmix; a
     * cutmix lam is 1 - box area / image area, the box inside the image */
    c = (stk_batch_mix_config){
        .mixup_alpha = 0.2f, .cutmix_alpha = 1.f, .mix_prob = 0.6f, .switch_prob = 0.5f};
    int mixed = 0, cut = 0;
    for (int i = 0; i < N; i++) {
        stk_batch_mix_plan(&c, 6, (uint64_t)i, 8, 24, 32, er, mx, &d);
        if (d.lam < 1) mixed++;
        if (d.lam < 1 && d.cutmix) {
            cut++;
            const stk_batch_region *b = &mx[0];
            ck_assert(b->y0 >= 0 && b->y1 <= 24 && b->x0 >= 0 && b->x1 <= 32);
            ck_assert(b->a == 0.f && b->b == 1.f && b->partner == 7);
            double area = (double)(b->y1 - b->y0) * (b->x1 - b->x0);
            ck_assert_float_eq_tol(d.lam, 1 - area / (24.0 * 32), 1e-6);
        }
    }
    ck_assert_msg(fabs((double)mixed / N - 0.6) < 4 * sqrt(0.24 / N), "mixed %d of %d", mixed, N);
    ck_assert_msg(fabs((double)cut / mixed - 0.5) < 4 * sqrt(0.25 / mixed), "cutmix %d of %d", cut,
                  mixed);
    /* erase 0.4: 40% of samples, each box 2-33% of the area, aspect 0.3-3.3 */
    c = (stk_batch_mix_config){.erase = 0.4f, .mix_prob = 1.f};
    int erased = 0;
    for (int i = 0; i < N / 8; i++) {
        stk_batch_mix_plan(&c, 7, (uint64_t)i, 8, 64, 64, er, mx, &d);
        ck_assert(d.lam == 1.f);
        int here = 0;
        for (int k = 0; k < 8; k++) {
            const stk_batch_region *b = &er[k];
            if (b->y1 <= b->y0) continue;
            here++;
            double h = b->y1 - b->y0, w = b->x1 - b->x0, frac = h * w / (64.0 * 64);
            ck_assert_msg(frac > 0.015 && frac < 0.36, "erased %g of the image", frac);
            ck_assert(h / w > 0.25 && h / w < 4.0 && b->a == 0.f && b->b == 0.f);
        }
        ck_assert_int_eq(here, d.erased);
        erased += here;
    }
    ck_assert_msg(fabs((double)erased / N - 0.4) < 4 * sqrt(0.24 / N), "erased %d of %d", erased,
                  N);
}
END_TEST

START_TEST(test_batch_mix_pixels_labels_and_loss)
{
    const int n = 4, ch = 2, h = 6, w = 5, classes = 3;
    float x[4 * 2 * 6 * 5];
    for (size_t i = 0; i < sizeof x / sizeof *x; i++) x[i] = (float)i * 0.01f - 1.f;
    int64_t shape[4] = {n, ch, h, w}, lshape[1] = {n};
    int32_t labels[4] = {0, 2, 1, 2};
    stk_scope *sc;
    ck_assert_int_eq(stk_scope_begin(&sc), STK_OK);
    stk_tensor *xt, *yt;
    ck_assert_int_eq(stk_tensor_from_host(STK_F32, 4, shape, x, &xt), STK_OK);
    ck_assert_int_eq(stk_tensor_from_host(STK_I32, 1, lshape, labels, &yt), STK_OK);
    /* find steps with a mixup, a cutmix and erasing among the draws */
    stk_batch_mix_config c = {.erase = 0.5f,
                              .mixup_alpha = 1.f,
                              .cutmix_alpha = 1.f,
                              .mix_prob = 1.f,
                              .switch_prob = 0.5f};
    bool seen[2] = {false, false};
    for (uint64_t step = 0; step < 64 && !(seen[0] && seen[1]); step++) {
        stk_batch_region er[4], mx[4];
        stk_batch_mix_draw d;
        stk_batch_mix_plan(&c, 11, step, n, h, w, er, mx, &d);
        stk_tensor *out, *labels2;
        float lam;
        ck_assert_int_eq(stk_batch_mix_apply(&c, 11, step, xt, labels, &out, &labels2, &lam),
                         STK_OK);
        ck_assert_float_eq(lam, d.lam);
        float got[4 * 2 * 6 * 5];
        ck_assert_int_eq(stk_tensor_to_host(out, got, sizeof got), STK_OK);
        /* the rule, by hand: erase first, then mix with the erased partner */
        float erased[4 * 2 * 6 * 5];
        for (int s = 0; s < n; s++)
            for (int k = 0; k < ch * h * w; k++) {
                int y = k % (h * w) / w, xx = k % w;
                bool in = y >= er[s].y0 && y < er[s].y1 && xx >= er[s].x0 && xx < er[s].x1;
                erased[s * ch * h * w + k] = in ? 0.f : x[s * ch * h * w + k];
            }
        for (int s = 0; s < n; s++)
            for (int k = 0; k < ch * h * w; k++) {
                int y = k % (h * w) / w, xx = k % w, i = s * ch * h * w + k;
                float want = erased[i];
                if (d.lam < 1) {
                    bool in = y >= mx[s].y0 && y < mx[s].y1 && xx >= mx[s].x0 && xx < mx[s].x1;
                    float other = erased[(n - 1 - s) * ch * h * w + k];
                    if (in) want = d.cutmix ? other : d.lam * erased[i] + (1 - d.lam) * other;
                }
                ck_assert_msg(got[i] == want, "step %llu sample %d element %d: %g, not %g",
                              (unsigned long long)step, s, k, got[i], want);
            }
        if (d.lam < 1) {
            seen[d.cutmix] = true;
            int32_t l2[4];
            ck_assert_int_eq(stk_tensor_to_host(labels2, l2, sizeof l2), STK_OK);
            for (int s = 0; s < n; s++) ck_assert_int_eq(l2[s], labels[n - 1 - s]);
            /* the loss: timm's SoftTargetCrossEntropy of mixup_target(), smoothing 0.1 */
            float lg[4 * 3];
            for (int i = 0; i < n * classes; i++) lg[i] = (float)((i * 7) % 5) * 0.3f - 0.5f;
            int64_t lgs[2] = {n, classes};
            stk_tensor *logits, *loss;
            ck_assert_int_eq(stk_tensor_from_host(STK_F32, 2, lgs, lg, &logits), STK_OK);
            stk_tensor_set_requires_grad(logits, true);
            ck_assert_int_eq(stk_batch_mix_loss(logits, yt, labels2, lam, 0.1f, &loss), STK_OK);
            double want_loss = 0, grad_want[4][3];
            for (int s = 0; s < n; s++) {
                double mx_ = -1e9, se = 0;
                for (int j = 0; j < classes; j++) mx_ = fmax(mx_, lg[s * classes + j]);
                for (int j = 0; j < classes; j++) se += exp(lg[s * classes + j] - mx_);
                for (int j = 0; j < classes; j++) {
                    double logp = lg[s * classes + j] - mx_ - log(se);
                    double off = 0.1 / classes, on = 1 - 0.1 + off;
                    double t = lam * (labels[s] == j ? on : off) +
                               (1 - lam) * (labels[n - 1 - s] == j ? on : off);
                    want_loss -= t * logp / n;
                    grad_want[s][j] = (exp(logp) - t) / n;
                }
            }
            ck_assert_float_eq_tol(stk_tensor_item(loss), want_loss, 1e-5);
            ck_assert_int_eq(stk_backward(loss, NULL, false), STK_OK);
            float g[12];
            ck_assert_int_eq(stk_tensor_to_host(stk_tensor_grad(logits), g, sizeof g), STK_OK);
            for (int s = 0; s < n; s++)
                for (int j = 0; j < classes; j++)
                    ck_assert_float_eq_tol(g[s * classes + j], grad_want[s][j], 1e-6);
        }
    }
    ck_assert_msg(seen[0] && seen[1], "no mixup or no cutmix in 64 draws");
    stk_scope_end(sc);
    /* out-of-range values are refused, naming them */
    stk_batch_mix_config bad = {.erase = 1.5f, .mix_prob = 1.f};
    ck_assert_int_eq(stk_batch_mix_check(&bad), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "erase probability 1.5"));
    bad = (stk_batch_mix_config){.mixup_alpha = -1.f};
    ck_assert_int_eq(stk_batch_mix_check(&bad), STK_ERR_INVALID_ARG);
}
END_TEST

static Suite *trainer_suite(void)
{
    Suite *s = suite_create("trainer");
    TCase *t = tcase_create("trainer");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_step_matches_the_written_out_step);
    tcase_add_test(t, test_clipping_matches_the_written_out_step);
    tcase_add_test(t, test_confusion_counts_the_top1_prediction);
    tcase_add_test(t, test_ema_matches_the_reference);
    tcase_add_test(t, test_memory_estimate_matches_a_step);
    tcase_add_test(t, test_hooks_run_in_order_and_gradients_are_final);
    tcase_add_test(t, test_hook_error_stops_the_step);
    tcase_add_test(t, test_divergence_is_reported);
    tcase_add_test(t, test_save_and_resume_continue_bit_identically);
    tcase_add_test(t, test_loss_scaler_unscales_and_skips_overflow);
    tcase_add_test(t, test_device_names);
    tcase_add_test(t, test_batch_mix_draws_like_timm_and_torchvision);
    tcase_add_test(t, test_batch_mix_pixels_labels_and_loss);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return stk_check_run(trainer_suite()); }
