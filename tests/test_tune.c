/* tune/: search spaces (parsing, draws, grids, bad specs) and the
 * schedulers against Ray Tune's own decisions (tests/data/tune_schedulers.txt,
 * recorded by tests/fixtures/make_tune_fixture.py with Ray installed). */
#include "check_main.h"
#include "common/rng.h"
#include "tune/scheduler.h"
#include "tune/space.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- search spaces ------------------------------------------------------------ */

START_TEST(test_space_parses_ray_distributions)
{
    stk_space s = {0};
    ck_assert_int_eq(stk_space_parse(&s, "lr=loguniform(1e-3,0.3); momentum=uniform(0.8, 0.99)"),
                     STK_OK);
    ck_assert_int_eq(stk_space_parse(&s,
                                     "wd=choice(0,1e-4,5e-4) batch=grid(64,128)\n"
                                     "steps=randint(1,4) q=quniform(0,1,0.25) "
                                     "ql=qloguniform(1,100,5) t=choice('rrc:64,flip',center:64)"),
                     STK_OK);
    ck_assert_int_eq(s.n, 8);
    ck_assert_str_eq(s.keys[0].name, "lr");
    ck_assert_int_eq(s.keys[0].dist, STK_DIST_LOGUNIFORM);
    ck_assert_double_eq(s.keys[0].lo, 1e-3);
    ck_assert_int_eq(s.keys[3].dist, STK_DIST_GRID);
    ck_assert_int_eq(s.keys[7].n_values, 2);
    ck_assert_str_eq(s.keys[7].values[0], "rrc:64,flip");
    ck_assert_int_eq(stk_space_trials(&s, 5), 10);
    /* every draw lies in its distribution, quantised where asked */
    for (int64_t t = 0; t < 200; t++) {
        stk_trial_params p;
        stk_space_draw(&s, 7, t, &p);
        ck_assert_int_eq(p.n, 8);
        double lr = atof(p.value[0]), m = atof(p.value[1]), q = atof(p.value[5]),
               ql = atof(p.value[6]);
        ck_assert(lr >= 1e-3 && lr <= 0.3);
        ck_assert(m >= 0.8 && m < 0.99);
        ck_assert(!strcmp(p.value[2], "0") || !strcmp(p.value[2], "1e-4") || /* as written */
                  !strcmp(p.value[2], "5e-4"));
        ck_assert_str_eq(p.value[3], t % 2 ? "128" : "64"); /* the grid point is t mod 2 */
        int steps = atoi(p.value[4]);
        ck_assert(steps >= 1 && steps <= 3);
        ck_assert_double_eq(q, round(q / 0.25) * 0.25);
        ck_assert_double_eq(ql, round(ql / 5) * 5);
        /* the text reads back to the value drawn: the shortest round trip */
        char again[32];
        stk_number_text(lr, again);
        ck_assert_str_eq(again, p.value[0]);
    }
    stk_space_free(&s);
}
END_TEST

START_TEST(test_space_draws_are_reproducible_and_prefix_stable)
{
    stk_space s = {0};
    ck_assert_int_eq(stk_space_parse(&s, "lr=loguniform(1e-4,1) opt=choice(sgd,adam,adamw)"),
                     STK_OK);
    stk_trial_params a, b, c;
    stk_space_draw(&s, 42, 3, &a);
    stk_space_draw(&s, 42, 3, &b);
    stk_space_draw(&s, 43, 3, &c);
    ck_assert_str_eq(a.value[0], b.value[0]);
    ck_assert_str_eq(a.value[1], b.value[1]);
    ck_assert_str_ne(a.value[0], c.value[0]); /* another seed, other values */
    /* the choices are all drawn, about evenly */
    int count[3] = {0};
    for (int64_t t = 0; t < 3000; t++) {
        stk_space_draw(&s, 1, t, &a);
        count[!strcmp(a.value[1], "adam") ? 1 : !strcmp(a.value[1], "adamw") ? 2 : 0]++;
    }
    for (int i = 0; i < 3; i++) ck_assert(count[i] > 900 && count[i] < 1100);
    stk_space_free(&s);
}
END_TEST

START_TEST(test_grid_is_cartesian_last_key_fastest)
{
    stk_space s = {0};
    ck_assert_int_eq(stk_space_parse(&s, "a=grid(1,2,3) lr=uniform(0,1) b=grid(x,y)"), STK_OK);
    ck_assert_int_eq(stk_space_trials(&s, 2), 12);
    const char *want[6][2] = {{"1", "x"}, {"1", "y"}, {"2", "x"},
                              {"2", "y"}, {"3", "x"}, {"3", "y"}};
    for (int64_t t = 0; t < 12; t++) {
        stk_trial_params p;
        stk_space_draw(&s, 0, t, &p);
        ck_assert_str_eq(p.value[0], want[t % 6][0]);
        ck_assert_str_eq(p.value[2], want[t % 6][1]);
    }
    stk_space_free(&s);
}
END_TEST

START_TEST(test_trial_count_is_bounded_without_wrapping)
{
    /* 11 keys of 64 grid values: 64^11 = 2^66 wraps an int64 to 0 */
    stk_space s = {0};
    char spec[512];
    for (int k = 0; k < 11; k++) {
        int o = snprintf(spec, sizeof spec, "k%d=grid(", k);
        for (int v = 0; v < 64; v++)
            o += snprintf(spec + o, sizeof spec - (size_t)o, "%s%d", v ? "," : "", v);
        snprintf(spec + o, sizeof spec - (size_t)o, ")");
        ck_assert_int_eq(stk_space_parse(&s, spec), STK_OK);
    }
    ck_assert_int_eq(stk_space_trials(&s, 1), -1);
    stk_space_free(&s);
    stk_space t = {0};
    ck_assert_int_eq(stk_space_parse(&t, "a=grid(1,2,3,4,5,6,7,8,9,10) b=grid(1,2,3,4,5)"), STK_OK);
    ck_assert_int_eq(stk_space_trials(&t, 200), STK_SPACE_MAX_TRIALS);
    ck_assert_int_eq(stk_space_trials(&t, 201), -1);
    ck_assert_int_eq(stk_space_trials(&t, INT64_MAX), -1);
    ck_assert_int_eq(stk_space_trials(&t, 0), -1);
    stk_space_free(&t);
}
END_TEST

static void expect_bad(const char *spec, const char *message)
{
    stk_space s = {0};
    ck_assert_int_eq(stk_space_parse(&s, "ok=uniform(0,1)"), STK_OK);
    ck_assert_int_eq(stk_space_parse(&s, spec), STK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(stk_last_error(), message), "%s: got '%s', want '%s'", spec,
                  stk_last_error(), message);
    ck_assert_int_eq(s.n, 1); /* nothing of the bad text was added */
    stk_space_free(&s);
}

START_TEST(test_bad_specs_name_the_key)
{
    expect_bad("lr", "--space 'lr': expected KEY=DIST(ARGS)");
    expect_bad("lr=log(1,2)", "--space lr: no distribution 'log'");
    expect_bad("lr=uniform(1)", "--space lr: uniform takes 2 numbers (low, high), not 1");
    expect_bad("lr=uniform(2,1)", "--space lr: empty range [2, 1)");
    expect_bad("lr=uniform(1,1)", "--space lr: empty range");
    expect_bad("lr=loguniform(0,1)", "--space lr: loguniform needs bounds above 0");
    expect_bad("lr=qloguniform(-1,1,0.1)", "--space lr: qloguniform needs bounds above 0");
    expect_bad("lr=quniform(0,1,0)", "--space lr: q 0: must be above 0");
    expect_bad("lr=uniform(a,1)", "--space lr: 'a' is not a number");
    expect_bad("lr=uniform(0,inf)", "--space lr: 'inf' is not a number");
    expect_bad("n=randint(0.5,3)", "--space n: randint takes integer bounds");
    expect_bad("o=choice()", "--space o: choice() with an empty value");
    expect_bad("o=choice(a,,b)", "--space o: choice() with an empty value");
    expect_bad("lr=uniform(0,1", "--space lr: expected DIST(ARGS)");
    expect_bad("a=uniform(0,1) ok=uniform(0,2)", "--space ok: given twice");
}
END_TEST

/* ---- schedulers against Ray Tune ---------------------------------------------- */

START_TEST(test_schedulers_decide_as_ray_tune)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tune_schedulers.txt", getenv("STOKE_TEST_DATA"));
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    char line[256], name[32] = "", kind[16], mode[8];
    stk_scheduler *s = NULL;
    int cases = 0, decisions = 0, stops = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        int max_t, grace, min_samples;
        double rf;
        if (sscanf(line, "case %31s %15s %7s %d %d %lf %d", name, kind, mode, &max_t, &grace, &rf,
                   &min_samples) == 7) {
            stk_scheduler_destroy(s);
            stk_sched_options o = stk_sched_defaults((stk_sched_kind)stk_sched_parse(kind));
            o.maximise = !strcmp(mode, "max");
            o.max_t = max_t;
            o.grace = grace;
            o.reduction = rf;
            o.min_samples = min_samples;
            ck_assert_int_eq(stk_scheduler_create(&o, &s), STK_OK);
            for (int i = 0; i < 32; i++) ck_assert_int_eq(stk_scheduler_add(s, i), STK_OK);
            cases++;
            continue;
        }
        int trial, t;
        char value[32], what[16], want[16];
        ck_assert_int_eq(sscanf(line, "%d %d %31s %15s %15s", &trial, &t, value, what, want), 5);
        double v = strcmp(value, "nan") ? strtod(value, NULL) : NAN;
        if (!strcmp(what, "complete")) {
            stk_scheduler_complete(s, trial, t, v);
            continue;
        }
        stk_decision d = stk_scheduler_result(s, trial, t, v);
        const char *got = d == STK_DECISION_STOP ? "STOP" : "CONTINUE";
        ck_assert_msg(!strcmp(got, want),
                      "case %s (%s %s): trial %d at t=%d (%s): Stoke %s, Ray %s", name, kind, mode,
                      trial, t, value, got, want);
        decisions++;
        stops += d == STK_DECISION_STOP;
    }
    stk_scheduler_destroy(s);
    fclose(f);
    ck_assert_int_ge(cases, 32);
    ck_assert_int_gt(stops, 50); /* the fixture exercises stopping, not only continuing */
    ck_assert_int_gt(decisions, 1000);
}
END_TEST

START_TEST(test_asha_rungs_as_ray)
{
    stk_sched_options o = stk_sched_defaults(STK_SCHED_ASHA);
    o.max_t = 100; /* Ray's defaults: grace 1, rf 4: rungs 64, 16, 4, 1 */
    stk_scheduler *s;
    ck_assert_int_eq(stk_scheduler_create(&o, &s), STK_OK);
    int64_t m[8];
    ck_assert_int_eq(stk_scheduler_rungs(s, 0, m, 8), 4);
    ck_assert_int_eq(m[0], 64);
    ck_assert_int_eq(m[3], 1);
    stk_scheduler_destroy(s);
    o.max_t = 16; /* log(16)/log(4) is 2 exactly in doubles: 3 rungs (16, 4, 1) */
    ck_assert_int_eq(stk_scheduler_create(&o, &s), STK_OK);
    ck_assert_int_eq(stk_scheduler_rungs(s, 0, m, 8), 3);
    stk_scheduler_destroy(s);
    o.reduction = 1;
    ck_assert_int_eq(stk_scheduler_create(&o, &s), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "--reduction 1: must be above 1"));
    o.reduction = 4;
    o.brackets = 9;
    ck_assert_int_eq(stk_scheduler_create(&o, &s), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "--brackets 9"));
    o.brackets = 1;
    o.grace = 0;
    ck_assert_int_eq(stk_scheduler_create(&o, &s), STK_ERR_INVALID_ARG);
}
END_TEST

START_TEST(test_fifo_never_stops)
{
    stk_sched_options o = stk_sched_defaults(STK_SCHED_FIFO);
    stk_scheduler *s;
    ck_assert_int_eq(stk_scheduler_create(&o, &s), STK_OK);
    for (int i = 0; i < 5; i++) ck_assert_int_eq(stk_scheduler_add(s, i), STK_OK);
    for (int t = 1; t < 50; t++)
        for (int i = 0; i < 5; i++)
            ck_assert_int_eq(stk_scheduler_result(s, i, t, i * 10.0), STK_DECISION_CONTINUE);
    stk_scheduler_destroy(s);
}
END_TEST

/* PBT, Ray's synchronous mode: nothing until every live trial has a score
 * at the sync time; then Ray's quantiles (ceil(n*q), at most half), the top
 * first (they save), the others in id order, the bottom last (each clones a
 * top trial); the next round one interval later; ended trials leave the
 * population. Explore perturbs by 1.2 or 0.8, or resamples. */
START_TEST(test_pbt_quantiles_and_explore)
{
    stk_sched_options o = stk_sched_defaults(STK_SCHED_PBT);
    o.max_t = 10;
    o.perturbation_interval = 2;
    stk_scheduler *s;
    ck_assert_int_eq(stk_scheduler_create(&o, &s), STK_OK);
    for (int i = 0; i < 5; i++) ck_assert_int_eq(stk_scheduler_add(s, i), STK_OK);
    stk_pbt_step steps[5];
    int64_t n;
    const double at2[5] = {50, 90, 70, 10, 60};
    for (int i = 0; i < 5; i++)
        stk_scheduler_pbt_result(s, i, 1, 100 + i); /* before the interval */
    ck_assert_int_eq(stk_scheduler_pbt_round(s, steps, &n), STK_OK);
    ck_assert_int_eq(n, 0);
    for (int i = 0; i < 4; i++) stk_scheduler_pbt_result(s, i, 2, at2[i]);
    ck_assert_int_eq(stk_scheduler_pbt_round(s, steps, &n), STK_OK);
    ck_assert_int_eq(n, 0); /* trial 4 has not reached t = 2 */
    stk_scheduler_pbt_result(s, 4, 2, at2[4]);
    ck_assert_int_eq(stk_scheduler_pbt_round(s, steps, &n), STK_OK);
    /* 5 scored: quantile ceil(1.25) = 2: top 2 (70), 1 (90); bottom 3 (10), 0 (50) */
    ck_assert_int_eq(n, 5);
    const int64_t order[5] = {2, 1, 4, 3, 0};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(steps[i].trial, order[i]);
        ck_assert(steps[i].save == (i < 2));
        if (i < 3)
            ck_assert_int_eq(steps[i].clone, -1);
        else
            ck_assert(steps[i].clone == 2 || steps[i].clone == 1);
    }
    ck_assert_int_eq(stk_scheduler_pbt_round(s, steps, &n), STK_OK);
    ck_assert_int_eq(n, 0);                                           /* done for t = 2 */
    for (int i = 0; i < 5; i++) stk_scheduler_pbt_result(s, i, 3, 0); /* not an interval on */
    ck_assert_int_eq(stk_scheduler_pbt_round(s, steps, &n), STK_OK);
    ck_assert_int_eq(n, 0);
    stk_scheduler_complete(s, 1, 3, 0); /* ended: out of the population */
    stk_scheduler_remove(s, 2);         /* failed */
    const double at4[5] = {5, 0, 0, 7, 6};
    for (int i = 0; i < 5; i++)
        if (i != 1 && i != 2) stk_scheduler_pbt_result(s, i, 4, at4[i]);
    ck_assert_int_eq(stk_scheduler_pbt_round(s, steps, &n), STK_OK);
    /* 3 live: quantile ceil(0.75) = 1: top 3 (7), then 4, bottom 0 (5) clones 3 */
    ck_assert_int_eq(n, 3);
    ck_assert(steps[0].trial == 3 && steps[0].save && steps[0].clone == -1);
    ck_assert(steps[1].trial == 4 && !steps[1].save && steps[1].clone == -1);
    ck_assert(steps[2].trial == 0 && !steps[2].save && steps[2].clone == 3);
    stk_scheduler_destroy(s);

    o.maximise = false; /* minimising: the lowest values are the top */
    ck_assert_int_eq(stk_scheduler_create(&o, &s), STK_OK);
    for (int i = 0; i < 2; i++) ck_assert_int_eq(stk_scheduler_add(s, i), STK_OK);
    stk_scheduler_pbt_result(s, 0, 2, 1.0);
    stk_scheduler_pbt_result(s, 1, 2, 2.0);
    ck_assert_int_eq(stk_scheduler_pbt_round(s, steps, &n), STK_OK);
    ck_assert_int_eq(n, 2);
    ck_assert(steps[0].trial == 0 && steps[0].save);
    ck_assert(steps[1].trial == 1 && steps[1].clone == 0);
    stk_scheduler_destroy(s);
    o.quantile = 0.6;
    ck_assert_int_eq(stk_scheduler_create(&o, &s), STK_ERR_INVALID_ARG);

    stk_space sp = {0};
    ck_assert_int_eq(
        stk_space_parse(&sp, "lr=loguniform(1e-3,1) wd=choice(0,1e-4,5e-4) n=randint(1,50)"),
        STK_OK);
    stk_trial_params from = {.n = 3, .key = {"lr", "wd", "n"}};
    strcpy(from.value[0], "0.1");
    strcpy(from.value[1], "1e-4");
    strcpy(from.value[2], "10");
    stk_rng r;
    stk_rng_init(&r, 1, 2, 3);
    int perturbed = 0, shifted = 0;
    for (int i = 0; i < 400; i++) {
        stk_trial_params p;
        stk_space_explore(&sp, &r, 0.25, &from, &p);
        double lr = atof(p.value[0]);
        if (fabs(lr - 0.12) < 1e-12 || fabs(lr - 0.08) < 1e-12)
            perturbed++;
        else
            ck_assert(lr >= 1e-3 && lr <= 1); /* resampled */
        ck_assert(!strcmp(p.value[1], "0") || !strcmp(p.value[1], "1e-4") ||
                  !strcmp(p.value[1], "5e-4"));
        shifted += strcmp(p.value[1], "1e-4") != 0;
        ck_assert(!strcmp(p.value[2], "12") || !strcmp(p.value[2], "8") ||
                  (atoi(p.value[2]) >= 1 && atoi(p.value[2]) < 50));
    }
    ck_assert(perturbed > 250 && perturbed < 350); /* about 3 in 4 */
    ck_assert(shifted > 250);                      /* a neighbour, or a draw */
    stk_space_free(&sp);
}
END_TEST

static Suite *tune_suite(void)
{
    Suite *s = suite_create("tune");
    TCase *t = tcase_create("space");
    tcase_add_test(t, test_space_parses_ray_distributions);
    tcase_add_test(t, test_space_draws_are_reproducible_and_prefix_stable);
    tcase_add_test(t, test_grid_is_cartesian_last_key_fastest);
    tcase_add_test(t, test_trial_count_is_bounded_without_wrapping);
    tcase_add_test(t, test_bad_specs_name_the_key);
    suite_add_tcase(s, t);
    t = tcase_create("schedulers");
    tcase_add_test(t, test_schedulers_decide_as_ray_tune);
    tcase_add_test(t, test_asha_rungs_as_ray);
    tcase_add_test(t, test_fifo_never_stops);
    tcase_add_test(t, test_pbt_quantiles_and_explore);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return stk_check_run(tune_suite()); }
