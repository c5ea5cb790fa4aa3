/* The run library (run/): the settings' table (defaults, a setting by name,
 * the checks across settings, values shown as typed), and a whole run
 * through stk_run_init/start/fit/close on a small raw dataset: the hooks in
 * their order, on_epoch stopping it, the caller's flag cancelling it, the
 * run folder refused when used, resume continuing to the same metrics. */
#include "check_main.h"
#include "raw_dataset.h"
#include "run/run.h"
#include "test_tmpdir.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IMAGES = 24, SIDE = 8 };

static char path_buf[700];
static const char *tmp_path(const char *name)
{
    snprintf(path_buf, sizeof path_buf, "%s/%s", test_tmp, name);
    return path_buf;
}

static void setup(void)
{
    test_tmpdir_create("run");
    make_raw_dataset(tmp_path("d.stoke"), IMAGES, SIDE);
}

static void teardown(void) { test_tmpdir_remove(); }

/* Settings for a short mlp run on the dataset into test_tmp/OUT. */
static void settings(stk_run_settings *s, const char *out, int epochs)
{
    ck_assert_int_eq(stk_run_settings_init(s), STK_OK);
    char data[700], n[16];
    snprintf(data, sizeof data, "%s/d.stoke", test_tmp);
    snprintf(n, sizeof n, "%d", epochs);
    ck_assert_int_eq(stk_run_setting_set(s, "data", data), STK_OK);
    ck_assert_int_eq(stk_run_setting_set(s, "val", data), STK_OK);
    ck_assert_int_eq(stk_run_setting_set(s, "model", "mlp"), STK_OK);
    ck_assert_int_eq(stk_run_setting_set(s, "batch", "8"), STK_OK);
    ck_assert_int_eq(stk_run_setting_set(s, "epochs", n), STK_OK);
    ck_assert_int_eq(stk_run_setting_set(s, "transform", "center:8"), STK_OK);
    ck_assert_int_eq(stk_run_setting_set(s, "workers", "2"), STK_OK);
    ck_assert_int_eq(stk_run_setting_set(s, "no_tensorboard", "yes"), STK_OK);
    ck_assert_int_eq(stk_run_setting_set(s, "out", tmp_path(out)), STK_OK);
    ck_assert_int_eq(stk_run_settings_check(s), STK_OK);
}

START_TEST(defaults_come_from_the_table)
{
    stk_run_settings s;
    ck_assert_int_eq(stk_run_settings_init(&s), STK_OK);
    ck_assert_int_eq(s.epochs, 10);
    ck_assert_int_eq(s.batch, 128);
    ck_assert(s.momentum == 0.9);
    ck_assert_int_eq(s.optimizer, 0); /* sgd */
    ck_assert(s.lr < 0);              /* by optimizer, once checked */
    ck_assert(s.workers >= 1 && s.threads >= 1);
    char buf[64];
    ck_assert(stk_flag_value_text(stk_run_setting_find("wd"), &s, buf, sizeof buf));
    ck_assert_str_eq(buf, "0.0005"); /* as typed, shortest */
    ck_assert(!stk_flag_value_text(stk_run_setting_find("val"), &s, buf, sizeof buf));
    ck_assert(stk_flag_value_text(stk_run_setting_find("schedule"), &s, buf, sizeof buf));
    ck_assert_str_eq(buf, "cosine");
    /* every entry's default parses (stk_run_settings_init said so) and the
     * front end's are marked */
    ck_assert(stk_run_setting_find("json")->set & STK_SET_FRONT);
    ck_assert(stk_run_setting_find("config")->set & STK_SET_FRONT);
    ck_assert(!(stk_run_setting_find("lr")->set & STK_SET_FRONT));
    ck_assert(stk_run_setting_find("seed")->set & STK_SET_RESUME);
    stk_run_settings_free(&s);
}
END_TEST

START_TEST(a_setting_by_name)
{
    stk_run_settings s;
    ck_assert_int_eq(stk_run_settings_init(&s), STK_OK);
    /* '_' or '-', text copied (the caller's buffer may go) */
    char text[16] = "conv1";
    ck_assert_int_eq(stk_run_setting_set(&s, "freeze", text), STK_OK);
    ck_assert_int_eq(stk_run_setting_set(&s, "freeze", "layer1"), STK_OK);
    strcpy(text, "XXXXX");
    ck_assert_int_eq(s.n_freeze, 2);
    ck_assert_str_eq(s.freeze[0], "conv1");
    ck_assert_int_eq(stk_run_setting_set(&s, "label_smoothing", "0.1"), STK_OK);
    ck_assert(s.smoothing == 0.1);
    ck_assert_int_eq(stk_run_setting_set(&s, "min-lr", "0.001"), STK_OK);
    ck_assert(s.min_lr == 0.001);
    /* switches both ways */
    ck_assert_int_eq(stk_run_setting_set(&s, "amp", "true"), STK_OK);
    ck_assert(s.amp);
    ck_assert_int_eq(stk_run_setting_set(&s, "amp", "no"), STK_OK);
    ck_assert(!s.amp);
    ck_assert_int_eq(stk_run_setting_set(&s, "amp", "maybe"), STK_ERR_INVALID_ARG);
    ck_assert_str_eq(stk_last_error(), "--amp maybe: expected yes or no");
    /* ranges and choices with the CLI's words */
    ck_assert_int_eq(stk_run_setting_set(&s, "batch", "0"), STK_ERR_INVALID_ARG);
    ck_assert_str_eq(stk_last_error(), "--batch 0: expected an integer in 1..65536");
    ck_assert_int_eq(stk_run_setting_set(&s, "optimizer", "lion"), STK_ERR_INVALID_ARG);
    ck_assert_str_eq(stk_last_error(), "--optimizer lion: expected sgd, adam or adamw");
    ck_assert_int_eq(stk_run_setting_set(&s, "batch_sise", "4"), STK_ERR_INVALID_ARG);
    ck_assert_str_eq(stk_last_error(), "'batch_sise': no such setting (did you mean batch?)");
    stk_run_settings_free(&s);
}
END_TEST

START_TEST(checks_across_settings)
{
    stk_run_settings s;
    ck_assert_int_eq(stk_run_settings_init(&s), STK_OK);
    ck_assert_int_eq(stk_run_settings_check(&s), STK_ERR_INVALID_ARG);
    ck_assert_str_eq(stk_last_error(), "--data TRAIN.stoke is required");
    ck_assert_int_eq(stk_run_setting_set(&s, "data", "x.stoke"), STK_OK);
    ck_assert_int_eq(stk_run_setting_set(&s, "model", "resnet9"), STK_OK);
    ck_assert_int_eq(stk_run_settings_check(&s), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "--model resnet9: unknown (did you mean"));
    ck_assert_int_eq(stk_run_setting_set(&s, "model", "cnn"), STK_OK);
    ck_assert_int_eq(stk_run_setting_set(&s, "optimizer", "adam"), STK_OK);
    ck_assert_int_eq(stk_run_setting_set(&s, "out", tmp_path("r")), STK_OK);
    ck_assert_int_eq(stk_run_settings_check(&s), STK_OK);
    ck_assert(s.lr == 0.001);                  /* adam's default */
    ck_assert_str_eq(s.monitor, "train_loss"); /* no --val */
    ck_assert_int_eq(stk_run_setting_set(&s, "min_lr", "0.1"), STK_OK);
    ck_assert_int_eq(stk_run_settings_check(&s), STK_ERR_INVALID_ARG);
    ck_assert_str_eq(stk_last_error(), "--min-lr 0.1: above the peak --lr 0.001");
    stk_run_settings_free(&s);
}
END_TEST

/* What the hooks heard, in order. */
typedef struct heard {
    char log[512];
    int epochs, stop_at, cancel_at_step;
    volatile sig_atomic_t cancel;
    int steps;
} heard;

static void note(heard *h, const char *what)
{
    size_t n = strlen(h->log);
    snprintf(h->log + n, sizeof h->log - n, "%s ", what);
}

static stk_status on_begin(void *ctx, int64_t epoch)
{
    char b[16];
    snprintf(b, sizeof b, "begin%d", (int)epoch);
    note(ctx, b);
    return STK_OK;
}

static stk_status on_progress(void *ctx, const stk_epoch_stats *es)
{
    heard *h = ctx;
    (void)es;
    if (++h->steps == h->cancel_at_step) h->cancel = 1;
    return STK_OK;
}

static void on_end(void *ctx) { note(ctx, "end"); }

static stk_status on_epoch(void *ctx, const stk_run_epoch *e, bool *stop)
{
    heard *h = ctx;
    char b[32];
    snprintf(b, sizeof b, "epoch%d", (int)e->fit->epoch + 1);
    note(h, b);
    ck_assert(e->fit->val && e->fit->val->images == IMAGES);
    ck_assert_int_eq(e->step, (e->fit->epoch + 1) * (IMAGES / 8));
    ck_assert(e->lr > 0);
    *stop = ++h->epochs == h->stop_at;
    return STK_OK;
}

static stk_run_hooks hooks_of(heard *h)
{
    return (stk_run_hooks){.epoch_begin = on_begin,
                           .progress = on_progress,
                           .epoch_end = on_end,
                           .on_epoch = on_epoch,
                           .ctx = h,
                           .cancel = &h->cancel};
}

/* A run of s heard by h: the fit's status, its result in *res. */
static stk_status run(const stk_run_settings *s, heard *h, stk_run_result *res)
{
    stk_run r;
    stk_run_hooks hk = hooks_of(h);
    stk_run_init(&r, s, &hk);
    stk_status st = stk_run_start(&r);
    if (st == STK_OK) st = stk_run_fit(&r, res);
    stk_run_close(&r);
    return st;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    static char buf[8][4096];
    static int k;
    char *b = buf[k++ % 8];
    size_t n = fread(b, 1, 4095, f);
    b[n] = '\0';
    fclose(f);
    return b;
}

/* metrics.csv's epoch..val_top5 columns (the timing ones differ by nature). */
static void metrics_columns(const char *run_dir, char *out, size_t size)
{
    char p[800];
    snprintf(p, sizeof p, "%s/metrics.csv", run_dir);
    const char *t = read_text(p);
    size_t o = 0;
    for (const char *line = t; *line && o + 1 < size;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        int commas = 0;
        size_t keep = 0;
        while (keep < len && commas < 8) commas += line[keep++] == ',';
        o += (size_t)snprintf(out + o, size - o, "%.*s\n", (int)keep, line);
        line += len + (nl != NULL);
    }
}

START_TEST(a_whole_run_heard_through_its_hooks)
{
    stk_run_settings s;
    settings(&s, "r", 2);
    heard h = {0};
    stk_run_result res;
    ck_assert_int_eq(run(&s, &h, &res), STK_OK);
    ck_assert_str_eq(h.log, "begin0 end epoch1 begin1 end epoch2 ");
    ck_assert_int_eq(h.steps, 2 * (IMAGES / 8));
    ck_assert_int_eq(res.epochs, 2);
    ck_assert_int_eq(res.start_epoch, 0);
    ck_assert_int_eq(res.fit.reason, STK_FIT_FINISHED);
    ck_assert_int_eq(res.ranks, 1);
    ck_assert(res.params > 0 && res.params == res.params_trainable);
    ck_assert(res.images_per_sec > 0 && res.seconds > 0);
    ck_assert(!isnan(res.fit.val.top1));
    char p[800];
    snprintf(p, sizeof p, "%s/last.safetensors", tmp_path("r"));
    ck_assert_int_eq(access(p, F_OK), 0);
    /* a used folder is refused before anything is written into it */
    settings(&s, "r", 2);
    heard h2 = {0};
    ck_assert_int_eq(run(&s, &h2, &res), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "already holds a run"));
    ck_assert_str_eq(h2.log, "");
}
END_TEST

START_TEST(on_epoch_stops_and_resume_continues)
{
    stk_run_settings s;
    settings(&s, "whole", 3);
    heard whole = {0};
    stk_run_result res;
    ck_assert_int_eq(run(&s, &whole, &res), STK_OK);
    /* stopped after its first epoch by the hook, then resumed */
    settings(&s, "parts", 3);
    heard first = {.stop_at = 1};
    ck_assert_int_eq(run(&s, &first, &res), STK_OK);
    ck_assert_int_eq(res.fit.reason, STK_FIT_CALLBACK);
    ck_assert_int_eq(res.epochs, 1);
    settings(&s, "parts", 3);
    ck_assert_int_eq(stk_run_setting_set(&s, "resume", "yes"), STK_OK);
    heard rest = {0};
    ck_assert_int_eq(run(&s, &rest, &res), STK_OK);
    ck_assert_int_eq(res.start_epoch, 1);
    ck_assert_int_eq(res.epochs, 3);
    ck_assert_str_eq(rest.log, "begin1 end epoch2 begin2 end epoch3 ");
    char a[4096], b[4096];
    metrics_columns(tmp_path("whole"), a, sizeof a);
    metrics_columns(tmp_path("parts"), b, sizeof b);
    ck_assert_str_eq(a, b);
}
END_TEST

START_TEST(the_callers_flag_cancels)
{
    stk_run_settings s;
    settings(&s, "r", 5);
    heard h = {.cancel_at_step = 4}; /* in the second epoch (3 steps each) */
    stk_run_result res;
    ck_assert_int_eq(run(&s, &h, &res), STK_ERR_CANCELLED);
    ck_assert_str_eq(stk_last_error(), "interrupted");
    ck_assert_int_eq(h.steps, 4); /* stopped after the step it was in */
    ck_assert_str_eq(h.log, "begin0 end epoch1 begin1 ");
    /* the completed epoch's checkpoint stays: resume goes on from it */
    settings(&s, "r", 2);
    ck_assert_int_eq(stk_run_setting_set(&s, "resume", "yes"), STK_OK);
    heard again = {0};
    ck_assert_int_eq(run(&s, &again, &res), STK_OK);
    ck_assert_int_eq(res.start_epoch, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("run");
    TCase *tc = tcase_create("run");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, defaults_come_from_the_table);
    tcase_add_test(tc, a_setting_by_name);
    tcase_add_test(tc, checks_across_settings);
    tcase_add_test(tc, a_whole_run_heard_through_its_hooks);
    tcase_add_test(tc, on_epoch_stops_and_resume_continues);
    tcase_add_test(tc, the_callers_flag_cancels);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return stk_check_run(suite()); }
