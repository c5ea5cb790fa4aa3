/* The fit call (train/fit.h): early stopping on scripted metric sequences
 * (the reduce callback replaces the monitored figure with the script's),
 * Keras's semantics (patience, strict min_delta, modes, start_from_epoch,
 * NaN), restore_best bit for bit, a resume inside the patience window, and
 * the last/best checkpoint policy; on a real loader over a small raw
 * dataset. */
#include "check_main.h"
#include "engine_testlib.h"
#include "loader/h2d.h"
#include "raw_dataset.h"
#include "test_tmpdir.h"
#include "train/fit.h"
#include "train/lr_find.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { IMAGES = 24, SIDE = 8, BATCH = 8, MAX_EPOCHS = 16 };

static char path_buf[700];
static const char *tmp_path(const char *name)
{
    snprintf(path_buf, sizeof path_buf, "%s/%s", test_tmp, name);
    return path_buf;
}

/* A model, optimizer, trainer and loaders over the dataset. */
typedef struct rig {
    stk_model *model;
    stk_optim *opt;
    stk_trainer *t;
    stk_loader *train, *val;
    stk_h2d *h2d;
} rig;

static void rig_open(rig *g)
{
    stk_model_config c = {
        .name = "mlp", .in_channels = 1, .classes = 3, .image_size = SIDE, .seed = 3};
    ck_assert_int_eq(stk_model_create(&c, &g->model), STK_OK);
    stk_optim_config oc = {.kind = STK_OPTIM_SGD, .lr = 0.05f, .momentum = 0.9f};
    ck_assert_int_eq(stk_optim_create(&oc, g->model, &g->opt), STK_OK);
    stk_trainer_config tc = stk_trainer_defaults();
    tc.seed = 5;
    ck_assert_int_eq(stk_trainer_create(&tc, g->model, g->opt, &g->t), STK_OK);
    stk_loader_options o = stk_loader_defaults();
    o.batch_size = BATCH, o.workers = 1, o.seed = 5, o.drop_last = true, o.transform = "center:8";
    ck_assert_int_eq(stk_loader_open(tmp_path("d.stoke"), &o, &g->train), STK_OK);
    ck_assert_int_eq(stk_h2d_open(g->train, stk_copy_engine_cpu(), &g->h2d), STK_OK);
    stk_loader_options vo = stk_trainer_eval_options(g->t, "center:8", BATCH, 1);
    ck_assert_int_eq(stk_loader_open(tmp_path("d.stoke"), &vo, &g->val), STK_OK);
}

static void rig_close(rig *g)
{
    stk_h2d_close(g->h2d);
    stk_loader_close(g->train);
    stk_loader_close(g->val);
    stk_trainer_destroy(g->t);
    stk_optim_destroy(g->opt);
    stk_model_destroy(g->model);
}

/* The script: the monitored value of each epoch (0-based), and a copy of
 * the weights after each epoch. */
typedef struct script {
    const double *values;
    float *weights[MAX_EPOCHS];
    int64_t epochs_seen[MAX_EPOCHS];
    int n_seen;
    stk_model *model;
    bool on_train; /* script train_loss/train_top1 instead of val figures */
} script;

static stk_status scripted(void *ctx, stk_fit_epoch *e)
{
    script *s = ctx;
    double v = s->values[e->epoch];
    if (s->on_train)
        e->train->loss = e->train->accuracy = v;
    else
        e->val->loss = e->val->top1 = e->val->top5 = v;
    return STK_OK;
}

static int64_t numel_all(stk_model *m)
{
    int64_t n = 0;
    for (int i = 0; i < stk_model_param_count(m); i++)
        n += stk_tensor_numel(stk_model_param(m, i)->value);
    return n;
}

static void copy_weights(stk_model *m, float *dst)
{
    for (int i = 0; i < stk_model_param_count(m); i++) {
        stk_tensor *t = stk_model_param(m, i)->value;
        memcpy(dst, stk_tensor_data(t), (size_t)stk_tensor_numel(t) * sizeof(float));
        dst += stk_tensor_numel(t);
    }
}

static stk_status remember(void *ctx, const stk_fit_epoch *e, bool *stop)
{
    (void)stop;
    script *s = ctx;
    ck_assert_int_lt(s->n_seen, MAX_EPOCHS);
    s->epochs_seen[s->n_seen++] = e->epoch;
    if (!s->weights[e->epoch]) s->weights[e->epoch] = malloc((size_t)numel_all(s->model) * 4);
    copy_weights(s->model, s->weights[e->epoch]);
    return STK_OK;
}

static void script_free(script *s)
{
    for (int i = 0; i < MAX_EPOCHS; i++) free(s->weights[i]);
}

/* fit with early stopping on the script's values; returns the result. */
static stk_fit_result fit(rig *g, script *s, stk_early_stop early, const char *run_dir,
                          int64_t stop_after)
{
    stk_fit_options o = stk_fit_defaults();
    o.train = g->train, o.h2d = g->h2d, o.val = g->val;
    o.epochs = MAX_EPOCHS, o.stop_after = stop_after, o.run_dir = run_dir;
    o.early = early;
    o.reduce = scripted, o.on_epoch = remember, o.ctx = s;
    s->model = g->model;
    stk_fit_result r;
    stk_status st = stk_trainer_fit(g->t, &o, &r);
    ck_assert_msg(st == STK_OK, "%s", stk_last_error());
    return r;
}

static void setup(void)
{
    test_tmpdir_create("fit");
    make_raw_dataset(tmp_path("d.stoke"), IMAGES, SIDE);
}

static void teardown(void) { test_tmpdir_remove(); }

START_TEST(stops_at_best_epoch_plus_patience)
{
    static const double v[MAX_EPOCHS] = {5, 4, 3, 3.5, 3.6, 3.7, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    rig g = {0};
    rig_open(&g);
    script s = {.values = v};
    stk_fit_result r = fit(&g, &s, (stk_early_stop){.patience = 3}, NULL, 0);
    ck_assert_int_eq(r.best_epoch, 3);    /* 3.0, counted from 1 */
    ck_assert_int_eq(r.stopped_epoch, 6); /* 3 + patience */
    ck_assert_int_eq(r.epochs_run, 6);
    ck_assert_int_eq(r.reason, STK_FIT_EARLY_STOP);
    ck_assert_str_eq(stk_fit_stop_name(r.reason), "early_stop");
    ck_assert(r.best_value == 3.0);
    /* patience never: the whole run */
    rig h = {0};
    rig_open(&h);
    script s2 = {.values = v};
    r = fit(&h, &s2, (stk_early_stop){.patience = -1}, NULL, 0);
    ck_assert_int_eq(r.stopped_epoch, MAX_EPOCHS);
    ck_assert_int_eq(r.reason, STK_FIT_FINISHED);
    ck_assert_int_eq(r.best_epoch, 8);
    script_free(&s), script_free(&s2);
    rig_close(&g), rig_close(&h);
}
END_TEST

START_TEST(min_delta_is_strict_and_nan_never_improves)
{
    /* 0.75 is exactly min_delta below 1: no improvement; 0.5 is */
    static const double v[MAX_EPOCHS] = {1, 0.75, 0.5, NAN, NAN, 0.5, 0.4, 0.3, 0.3, 0.3, 0.3};
    rig g = {0};
    rig_open(&g);
    script s = {.values = v};
    stk_fit_result r = fit(&g, &s, (stk_early_stop){.patience = 3, .min_delta = 0.25}, NULL, 0);
    ck_assert_int_eq(r.best_epoch, 3);
    ck_assert_int_eq(r.stopped_epoch, 6); /* NaN, NaN, 0.5 (not better): 3 epochs */
    script_free(&s);
    rig_close(&g);
    /* a NaN first value is no best either */
    static const double w[MAX_EPOCHS] = {NAN, NAN, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    rig h = {0};
    rig_open(&h);
    script t = {.values = w};
    r = fit(&h, &t, (stk_early_stop){.patience = 3}, NULL, 0);
    ck_assert_int_eq(r.best_epoch, 3);
    ck_assert_int_eq(r.stopped_epoch, 6);
    script_free(&t);
    rig_close(&h);
}
END_TEST

START_TEST(modes_and_start_from_epoch)
{
    /* rising accuracy: max by auto for top-1, by mode for a loss */
    static const double v[MAX_EPOCHS] = {10, 20, 30, 25, 24, 23, 22, 21, 20, 20, 20, 20};
    rig g = {0};
    rig_open(&g);
    script s = {.values = v};
    stk_fit_result r =
        fit(&g, &s, (stk_early_stop){.patience = 2, .monitor = STK_MONITOR_VAL_TOP1}, NULL, 0);
    ck_assert_int_eq(r.best_epoch, 3);
    ck_assert_int_eq(r.stopped_epoch, 5);
    script_free(&s);
    rig_close(&g);
    rig h = {0};
    rig_open(&h);
    script t = {.values = v, .on_train = true};
    r = fit(
        &h, &t,
        (stk_early_stop){.patience = 2, .monitor = STK_MONITOR_TRAIN_LOSS, .mode = STK_MODE_MAX},
        NULL, 0);
    ck_assert_int_eq(r.best_epoch, 3);
    script_free(&t);
    rig_close(&h);
    /* min by auto for a loss: the first epoch is the best */
    rig k = {0};
    rig_open(&k);
    script u = {.values = v};
    r = fit(&k, &u, (stk_early_stop){.patience = 2}, NULL, 0);
    ck_assert_int_eq(r.best_epoch, 1);
    ck_assert_int_eq(r.stopped_epoch, 3);
    script_free(&u);
    rig_close(&k);
    /* start_from_epoch 4: the first 4 epochs are not judged */
    rig m = {0};
    rig_open(&m);
    script w = {.values = v};
    r = fit(&m, &w, (stk_early_stop){.patience = 2, .start_from_epoch = 4}, NULL, 0);
    ck_assert_int_eq(r.best_epoch, 9);     /* 24 (the first judged), 23, 22, 21, 20 */
    ck_assert_int_eq(r.stopped_epoch, 11); /* then 20, 20 do not improve */
    script_free(&w);
    rig_close(&m);
}
END_TEST

START_TEST(restore_best_is_bit_for_bit_and_checkpoints_follow_the_best)
{
    static const double v[MAX_EPOCHS] = {3, 2, 2.5, 2.6, 2.7, 2.8, 2.9};
    rig g = {0};
    rig_open(&g);
    script s = {.values = v};
    ck_assert_int_eq(mkdir(tmp_path("run"), 0755), 0);
    char run[700];
    snprintf(run, sizeof run, "%s", tmp_path("run"));
    stk_fit_result r = fit(&g, &s, (stk_early_stop){.patience = 3, .restore_best = true}, run, 0);
    ck_assert_int_eq(r.best_epoch, 2);
    ck_assert_int_eq(r.stopped_epoch, 5);
    float *now = malloc((size_t)numel_all(g.model) * 4);
    copy_weights(g.model, now);
    ck_assert(memcmp(now, s.weights[1], (size_t)numel_all(g.model) * 4) == 0);
    ck_assert(memcmp(now, s.weights[4], (size_t)numel_all(g.model) * 4) != 0);
    /* best.safetensors: epoch 2's; last.safetensors: epoch 5's, resumable */
    stk_train_position best, last;
    char p[800];
    snprintf(p, sizeof p, "%s/best.safetensors", run);
    ck_assert_int_eq(stk_train_position_read(p, &best), STK_OK);
    snprintf(p, sizeof p, "%s/last.safetensors", run);
    ck_assert_int_eq(stk_train_position_read(p, &last), STK_OK);
    ck_assert_int_eq(best.epoch, 2);
    ck_assert_int_eq(last.epoch, 5);
    ck_assert_int_eq(last.best_epoch, 2);
    ck_assert_int_eq(last.wait, 3);
    ck_assert_str_eq(last.monitor, "val_loss");
    free(now);
    script_free(&s);
    rig_close(&g);
}
END_TEST

START_TEST(resume_inside_the_patience_window_stops_alike)
{
    static const double v[MAX_EPOCHS] = {5, 4, 3, 3.5, 3.6, 3.7, 3.8, 3.9};
    rig g = {0};
    rig_open(&g);
    script s = {.values = v};
    stk_early_stop es = {.patience = 4, .restore_best = true};
    stk_fit_result whole = fit(&g, &s, es, NULL, 0);
    ck_assert_int_eq(whole.stopped_epoch, 7);
    /* the same run cut after epoch 5 (two epochs into the window), resumed */
    ck_assert_int_eq(mkdir(tmp_path("cut"), 0755), 0);
    char run[700], last[800];
    snprintf(run, sizeof run, "%s", tmp_path("cut"));
    snprintf(last, sizeof last, "%s/last.safetensors", run);
    rig h = {0};
    rig_open(&h);
    script t = {.values = v};
    stk_fit_result first = fit(&h, &t, es, run, 5);
    ck_assert_int_eq(first.reason, STK_FIT_STOP_AFTER);
    ck_assert_int_eq(first.stopped_epoch, 5);
    rig k = {0};
    rig_open(&k);
    ck_assert_int_eq(stk_trainer_resume(k.t, last), STK_OK);
    ck_assert_int_eq(stk_trainer_position(k.t)->wait, 2);
    script u = {.values = v};
    stk_fit_result rest = fit(&k, &u, es, run, 0);
    ck_assert_int_eq(rest.stopped_epoch, whole.stopped_epoch);
    ck_assert_int_eq(rest.best_epoch, whole.best_epoch);
    ck_assert_int_eq(rest.reason, STK_FIT_EARLY_STOP);
    /* restore_best across the resume: best.safetensors, the same bits */
    int64_t n = numel_all(g.model);
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
    copy_weights(g.model, a);
    copy_weights(k.model, b);
    ck_assert(memcmp(a, b, (size_t)n * 4) == 0);
    free(a), free(b);
    script_free(&s), script_free(&t), script_free(&u);
    rig_close(&g), rig_close(&h), rig_close(&k);
}
END_TEST

START_TEST(options_are_checked)
{
    rig g = {0};
    rig_open(&g);
    stk_fit_options o = stk_fit_defaults();
    o.train = g.train, o.h2d = g.h2d, o.epochs = 2; /* val_loss without a val loader */
    stk_fit_result r;
    ck_assert_int_eq(stk_trainer_fit(g.t, &o, &r), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "--monitor val_loss needs a validation set"));
    o.early.monitor = STK_MONITOR_TRAIN_LOSS, o.early.min_delta = -1;
    ck_assert_int_eq(stk_trainer_fit(g.t, &o, &r), STK_ERR_INVALID_ARG);
    o.early.min_delta = 0, o.epochs = 0;
    ck_assert_int_eq(stk_trainer_fit(g.t, &o, &r), STK_ERR_INVALID_ARG);
    /* restore_best after a resume whose best epoch ran before, without a run_dir */
    o.epochs = 3, o.early.restore_best = true;
    stk_trainer_position(g.t)->best_epoch = 1;
    snprintf(stk_trainer_position(g.t)->monitor, 16, "train_loss");
    stk_trainer_position(g.t)->epoch = 1;
    ck_assert_int_eq(stk_trainer_fit(g.t, &o, &r), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "no run_dir to read its weights from"));
    ck_assert_int_eq(r.epochs_run, 0);
    ck_assert_int_eq(stk_monitor_parse("val_top5"), STK_MONITOR_VAL_TOP5);
    ck_assert_int_eq(stk_monitor_parse("val_acc"), -1);
    rig_close(&g);
}
END_TEST

/* The range test's sweep on a scripted loss, a parabola in log10(lr) with
 * its minimum 1 at lr 1e-2: the exponential steps, the stop rule (4 x the
 * minimum: (x + 2)^2 + 1 > 4 first at x = -0.2), the suggestions, the
 * smoothing's bias correction, NaN, the checks. */
START_TEST(lr_sweep_on_a_scripted_loss)
{
    stk_lr_sweep s;
    ck_assert_int_eq(stk_lr_sweep_init(&s, 1e-5, 10, 61, 0, 4), STK_OK);
    ck_assert_double_eq_tol(stk_lr_sweep_lr(&s, 0), 1e-5, 1e-18);
    ck_assert_double_eq_tol(stk_lr_sweep_lr(&s, 60), 10, 1e-12);
    ck_assert_double_eq_tol(stk_lr_sweep_lr(&s, 30), 1e-2, 1e-15);
    bool stop = false;
    int steps = 0;
    while (!stop) {
        double x = log10(stk_lr_sweep_lr(&s, s.n));
        stop = stk_lr_sweep_record(&s, (x + 2) * (x + 2) + 1);
        steps++;
    }
    ck_assert(s.diverged);
    ck_assert_int_eq(steps, 49); /* step 48: lr 10^-0.2 */
    ck_assert_int_eq(s.best_at, 30);
    stk_lr_suggestion g;
    stk_lr_sweep_suggest(&s, &g);
    ck_assert_int_eq(g.min_at, 30);
    ck_assert_double_eq_tol(g.min_over_10, 1e-3, 1e-15);
    ck_assert_int_eq(g.steepest_at, 0); /* the parabola falls fastest at its left end */
    ck_assert_double_eq_tol(g.steepest, 1e-5, 1e-18);
    stk_lr_sweep_free(&s);

    /* a constant loss smoothed with bias correction stays that constant; a
     * loss falling then flat has its steepest point inside the fall */
    ck_assert_int_eq(stk_lr_sweep_init(&s, 1e-4, 1, 20, 0.98, 4), STK_OK);
    for (int i = 0; i < 5; i++) stk_lr_sweep_record(&s, 2.5);
    ck_assert_double_eq_tol(s.smooth[4], 2.5, 1e-12);
    stk_lr_sweep_free(&s);
    ck_assert_int_eq(stk_lr_sweep_init(&s, 1e-4, 1, 20, 0, 4), STK_OK);
    const double fall[8] = {3, 3, 2.9, 2.0, 1.2, 1.1, 1.05, 1.0};
    for (int i = 0; i < 8; i++) ck_assert(!stk_lr_sweep_record(&s, fall[i]));
    stk_lr_sweep_suggest(&s, &g);
    ck_assert_int_eq(g.steepest_at, 3); /* (1.2 - 2.9) / 2h: the steepest central difference */
    ck_assert(stk_lr_sweep_record(&s, NAN) && s.diverged);
    stk_lr_sweep_free(&s);
    /* the whole sweep when nothing diverges */
    ck_assert_int_eq(stk_lr_sweep_init(&s, 1e-4, 1, 3, 0.5, 4), STK_OK);
    ck_assert(!stk_lr_sweep_record(&s, 1) && !stk_lr_sweep_record(&s, 1));
    ck_assert(stk_lr_sweep_record(&s, 1) && !s.diverged);
    stk_lr_sweep_free(&s);

    ck_assert_int_eq(stk_lr_sweep_init(&s, 0, 1, 10, 0.98, 4), STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_lr_sweep_init(&s, 1, 0.5, 10, 0.98, 4), STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_lr_sweep_init(&s, 1e-5, 1, 1, 0.98, 4), STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_lr_sweep_init(&s, 1e-5, 1, 2, 0.98, 4),
                     STK_ERR_INVALID_ARG); /* no suggestion from 2 */
    ck_assert_int_eq(stk_lr_sweep_init(&s, 1e-5, 1, 10, 1, 4), STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_lr_sweep_init(&s, 1e-5, 1, 10, 0.98, 1), STK_ERR_INVALID_ARG);
}
END_TEST

/* The range test on real batches: it runs past an epoch, stops when the
 * loss blows up at large rates, and leaves the model as it was, bit for
 * bit (its optimizer too: the sweep makes its own). */
START_TEST(lr_find_leaves_the_model_as_it_was)
{
    rig g;
    rig_open(&g);
    int64_t n = numel_all(g.model);
    float *before = malloc((size_t)n * sizeof *before), *after = malloc((size_t)n * sizeof *after);
    copy_weights(g.model, before);
    stk_lr_find_options o = {.trainer = stk_trainer_defaults(),
                             .optim = {.kind = STK_OPTIM_SGD, .momentum = 0.9f}};
    stk_lr_sweep s;
    ck_assert_int_eq(stk_lr_sweep_init(&s, 1e-4, 1e4, 40, 0.9, 4), STK_OK);
    ck_assert_msg(stk_lr_find(g.model, g.train, g.h2d, &o, &s) == STK_OK, "%s", stk_last_error());
    ck_assert_int_gt(s.n, IMAGES / BATCH); /* more than one epoch */
    ck_assert_msg(s.diverged, "the loss at lr %g did not blow up", s.lr[s.n - 1]);
    copy_weights(g.model, after);
    ck_assert(!memcmp(before, after, (size_t)n * sizeof *before));
    ck_assert_int_eq(stk_optim_steps(g.opt), 0);
    /* the loader goes on as usual afterwards */
    stk_epoch_stats es;
    ck_assert_int_eq(stk_trainer_train_epoch(g.t, g.train, g.h2d, 0, NULL, NULL, &es), STK_OK);
    ck_assert_int_eq(es.images, IMAGES / BATCH * BATCH);
    stk_lr_sweep_free(&s);
    free(before), free(after);
    rig_close(&g);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fit");
    TCase *tc = tcase_create("fit");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, stops_at_best_epoch_plus_patience);
    tcase_add_test(tc, min_delta_is_strict_and_nan_never_improves);
    tcase_add_test(tc, modes_and_start_from_epoch);
    tcase_add_test(tc, restore_best_is_bit_for_bit_and_checkpoints_follow_the_best);
    tcase_add_test(tc, resume_inside_the_patience_window_stops_alike);
    tcase_add_test(tc, options_are_checked);
    tcase_add_test(tc, lr_sweep_on_a_scripted_loss);
    tcase_add_test(tc, lr_find_leaves_the_model_as_it_was);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return stk_check_run(suite()); }
