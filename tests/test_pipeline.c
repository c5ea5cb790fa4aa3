/* Micro-batches and pipeline stages (train/pipe_runner.h, train/pipeline.h):
 * the schedules' orders and activation counts; the runner's hand-offs,
 * transfer count and failure path on a scripted op; and on real models the
 * gradients of K stages under both schedules against one device
 * accumulating the same micro-batches, micro-batch weighting against the
 * whole batch, the split by name and by measured cost. */
#include "check_main.h"
#include "engine/onnx_graph.h"
#include "engine_testlib.h"
#include "train/pipeline.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- schedules ------------------------------------------------------------ */

/* Walk a stage's ops: every micro-batch forward once, backward once after
 * it; the most forwards not yet backward. */
static int walk(stk_pipe_schedule sched, int k, int m, int s)
{
    int ops[2 * 64], in_flight = 0, peak = 0, next_f = 0, next_b = 0;
    stk_pipe_schedule_ops(sched, k, m, s, ops);
    for (int i = 0; i < 2 * m; i++) {
        if (ops[i] < m) {
            ck_assert_int_eq(ops[i], next_f++);
            in_flight++;
        } else {
            ck_assert_int_eq(ops[i] - m, next_b++); /* backwards in micro-batch order */
            ck_assert_int_lt(ops[i] - m, next_f);
            in_flight--;
        }
        if (in_flight > peak) peak = in_flight;
    }
    ck_assert_int_eq(next_f, m);
    ck_assert_int_eq(next_b, m);
    return peak;
}

START_TEST(test_schedules)
{
    for (int k = 1; k <= 8; k++)
        for (int m = 1; m <= 32; m += 3)
            for (int s = 0; s < k; s++) {
                ck_assert_int_eq(walk(STK_PIPE_GPIPE, k, m, s), m);
                int f1b = walk(STK_PIPE_1F1B, k, m, s);
                ck_assert_int_le(f1b, k - s); /* at most K micro-batches' activations */
                ck_assert_int_eq(f1b, m < k - s ? m : k - s);
            }
    stk_pipe_schedule sc;
    ck_assert(stk_pipe_schedule_parse("1f1b", &sc) && sc == STK_PIPE_1F1B);
    ck_assert(stk_pipe_schedule_parse("gpipe", &sc) && sc == STK_PIPE_GPIPE);
    ck_assert(!stk_pipe_schedule_parse("1F1B", &sc));
}
END_TEST

/* ---- the runner on a scripted op ------------------------------------------ */

typedef struct script {
    int stages, micro, fail_stage, fail_micro;
    bool fail_forward;  /* the failure in that forward, after sending micro-batch + 1's payload */
    int seen[8][64][2]; /* each op ran once */
    int bad;            /* a payload that was not the sender's */
} script;

/* payload: (stage << 16 | micro << 1 | backward) + 1, never NULL */
static void *tag(int stage, int micro, bool backward)
{
    return (void *)(uintptr_t)(((uintptr_t)stage << 16 | (uintptr_t)micro << 1 | backward) + 1);
}

static stk_status scripted(void *ctx, stk_pipe_runner *r, int s, int i, bool backward)
{
    script *c = ctx;
    c->seen[s][i][backward]++;
    if (s == c->fail_stage && i == c->fail_micro && backward && !c->fail_forward)
        return stk_error(STK_ERR_INVALID_ARG, "scripted failure");
    if (s == c->fail_stage && i == c->fail_micro && !backward && c->fail_forward) {
        /* the next micro-batch's payload, then the failure */
        stk_pipe_send(r, s, i + 1, false, tag(s, i + 1, false));
        return stk_error(STK_ERR_INVALID_ARG, "scripted failure");
    }
    void *p;
    if (!backward && s > 0) {
        STK_TRY(stk_pipe_recv(r, s, i, false, &p));
        if (p != tag(s - 1, i, false)) __atomic_add_fetch(&c->bad, 1, __ATOMIC_RELAXED);
    }
    if (backward && s < c->stages - 1) {
        STK_TRY(stk_pipe_recv(r, s, i, true, &p));
        if (p != tag(s + 1, i, true)) __atomic_add_fetch(&c->bad, 1, __ATOMIC_RELAXED);
    }
    if (!backward && s < c->stages - 1) return stk_pipe_send(r, s, i, false, tag(s, i, false));
    if (backward && s > 0) return stk_pipe_send(r, s, i, true, tag(s, i, true));
    return STK_OK;
}

static int dropped;
static void count_drop(void *p)
{
    (void)p;
    dropped++;
}

START_TEST(test_runner)
{
    for (int k = 1; k <= 4; k++) {
        stk_pipe_runner *r;
        ck_assert_int_eq(stk_pipe_runner_create(k, NULL, NULL, &r), STK_OK);
        for (int sched = 0; sched < 2; sched++)
            for (int m = 1; m <= 9; m += 4) {
                static script c;
                memset(&c, 0, sizeof c);
                c = (script){.stages = k, .micro = m, .fail_stage = -1};
                stk_pipe_stats st;
                ck_assert_int_eq(stk_pipe_runner_run(r, m, (stk_pipe_schedule)sched, scripted, &c,
                                                     count_drop, &st),
                                 STK_OK);
                ck_assert_int_eq(c.bad, 0);
                for (int s = 0; s < k; s++)
                    for (int i = 0; i < m; i++)
                        ck_assert(c.seen[s][i][0] == 1 && c.seen[s][i][1] == 1);
                ck_assert_int_eq(st.transfers, 2 * m * (k - 1)); /* 2 M (K - 1) */
                for (int s = 0; s < k; s++)
                    ck_assert_int_eq(st.max_in_flight[s],
                                     sched == STK_PIPE_GPIPE ? m : (m < k - s ? m : k - s));
                ck_assert(st.wall_s >= 0 && st.bubble >= 0 && st.bubble <= 1);
            }
        stk_pipe_runner_destroy(r);
    }
    /* a stage that fails: the run returns its error (no stage left waiting),
     * payloads sent and never taken are dropped, and the runner runs again */
    stk_pipe_runner *r;
    ck_assert_int_eq(stk_pipe_runner_create(3, NULL, NULL, &r), STK_OK);
    static script c;
    memset(&c, 0, sizeof c);
    c = (script){.stages = 3, .micro = 6, .fail_stage = 1, .fail_micro = 2};
    dropped = 0;
    ck_assert_int_eq(stk_pipe_runner_run(r, 6, STK_PIPE_GPIPE, scripted, &c, count_drop, NULL),
                     STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "pipeline stage 1, backward of micro-batch 2"));
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "scripted failure"));
    /* a payload never taken is dropped: stage 0 sends micro-batch 1's and
     * fails before micro-batch 0's, which stage 1 waits for first */
    memset(&c, 0, sizeof c);
    c = (script){.stages = 3, .micro = 6, .fail_stage = 0, .fail_micro = 0, .fail_forward = true};
    dropped = 0;
    ck_assert_int_eq(stk_pipe_runner_run(r, 6, STK_PIPE_1F1B, scripted, &c, count_drop, NULL),
                     STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "pipeline stage 0, forward of micro-batch 0"));
    ck_assert_int_eq(dropped, 1);
    memset(&c, 0, sizeof c);
    c = (script){.stages = 3, .micro = 6, .fail_stage = -1};
    ck_assert_int_eq(stk_pipe_runner_run(r, 6, STK_PIPE_1F1B, scripted, &c, NULL, NULL), STK_OK);
    stk_pipe_runner_destroy(r);
    ck_assert_int_eq(stk_pipe_runner_create(9, NULL, NULL, &r), STK_ERR_INVALID_ARG);
}
END_TEST

/* ---- on models -------------------------------------------------------------- */

/* A built-in model, or "onnx:FILE" (tests/data/onnx/FILE, imported). */
static stk_model *make(const char *name, int ch, int size)
{
    stk_model *m;
    if (!strncmp(name, "onnx:", 5)) {
        char path[512];
        const char *dir = getenv("STOKE_TEST_DATA");
        snprintf(path, sizeof path, "%s/onnx/%s", dir ? dir : "tests/data", name + 5);
        stk_model_config c = {.in_channels = ch, .image_size = size, .seed = 5};
        ck_assert_msg(stk_model_from_onnx_file(path, &c, &m) == STK_OK, "%s", stk_last_error());
        return m;
    }
    stk_model_config c = {
        .name = name, .in_channels = ch, .classes = 10, .image_size = size, .seed = 5};
    ck_assert_int_eq(stk_model_create(&c, &m), STK_OK);
    return m;
}

/* Zero the gradients, run one step, copy every trainable gradient out. */
static float *step_grads(stk_model *m, const stk_pipeline_config *pc, stk_tensor *x, stk_tensor *y,
                         float *loss, stk_pipe_stats *stats)
{
    int64_t total = stk_model_trainable_numel(m);
    float *g = malloc((size_t)total * sizeof *g);
    ck_assert_ptr_nonnull(g);
    for (int i = 0; i < stk_model_param_count(m); i++)
        stk_tensor_zero_grad(stk_model_param(m, i)->value);
    stk_pipeline *p;
    ck_assert_msg(stk_pipeline_create(m, pc, &p) == STK_OK, "%s", stk_last_error());
    stk_tensor *logits;
    ck_assert_msg(stk_pipeline_step(p, x, y, 0.1f, 1.f, 7, loss, &logits, stats) == STK_OK, "%s",
                  stk_last_error());
    ck_assert_int_eq(stk_tensor_dim(logits, 0), stk_tensor_dim(x, 0));
    stk_tensor_release(logits);
    int64_t off = 0;
    for (int i = 0; i < stk_model_param_count(m); i++) {
        const stk_param *pa = stk_model_param(m, i);
        if (pa->is_buffer || !stk_tensor_requires_grad(pa->value)) continue;
        int64_t n = stk_tensor_numel(pa->value);
        ck_assert_msg(stk_tensor_grad(pa->value), "%s has no gradient", pa->name);
        memcpy(g + off, stk_tensor_data(stk_tensor_grad(pa->value)), (size_t)n * sizeof *g);
        off += n;
    }
    stk_pipeline_destroy(p);
    return g;
}

static double worst_rel(const float *a, const float *b, int64_t n)
{
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(a[i]));
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]) / scale);
    return worst;
}

/* K stages under both schedules give the gradients (and the running
 * statistics) of one device accumulating the same micro-batches; also on
 * graphs imported from ONNX, cut into units where one tensor flows on
 * (the dynamo export's batch size crossing the cuts as host numbers, for
 * micro-batches of 4 and 3 images). */
START_TEST(test_pipeline_equals_accumulation)
{
    struct {
        const char *model;
        int ch, size, stages, micro, classes;
        const char *split;
    } cases[] = {
        {"resnet8", 1, 16, 2, 4, 10, NULL},
        {"resnet8", 1, 16, 3, 5, 10, "layer1.0,layer3"},
        {"cnn", 1, 12, 2, 3, 10, "relu2"},
        {"onnx:fmnist_net.onnx", 1, 28, 2, 3, 10, "bn1"},
        {"onnx:mixed_dynamo.onnx", 3, 8, 3, 3, 5, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t xs[4] = {10, cases[c].ch, cases[c].size, cases[c].size}, ys[1] = {10};
        stk_tensor *x = rand_tensor(3 + c, 4, xs, -1, 1), *y;
        int32_t labels[10];
        for (int i = 0; i < 10; i++) labels[i] = (i * 7) % cases[c].classes;
        ck_assert_int_eq(stk_tensor_from_host(STK_I32, 1, ys, labels, &y), STK_OK);
        stk_model *ref = make(cases[c].model, cases[c].ch, cases[c].size);
        stk_pipeline_config one = {.stages = 1, .micro_batches = cases[c].micro, .threads = 2};
        float lref, l;
        float *gref = step_grads(ref, &one, x, y, &lref, NULL);
        int64_t n = stk_model_trainable_numel(ref);
        for (int sched = 0; sched < 2; sched++) {
            stk_model *m = make(cases[c].model, cases[c].ch, cases[c].size);
            stk_pipeline_config pc = {.stages = cases[c].stages,
                                      .micro_batches = cases[c].micro,
                                      .schedule = (stk_pipe_schedule)sched,
                                      .split_after = cases[c].split,
                                      .threads = 2};
            stk_pipe_stats st;
            float *g = step_grads(m, &pc, x, y, &l, &st);
            double w = worst_rel(gref, g, n);
            ck_assert_msg(w <= 1e-5, "%s K=%d %s: gradients differ by %.3g of the largest",
                          cases[c].model, cases[c].stages, stk_pipe_schedule_name(pc.schedule), w);
            ck_assert_msg(fabsf(l - lref) <= 1e-5f * fabsf(lref), "loss %g vs %g", l, lref);
            ck_assert_int_eq(st.transfers, 2 * cases[c].micro * (cases[c].stages - 1));
            for (int s = 0; s < cases[c].stages; s++)
                ck_assert_int_le(st.max_in_flight[s],
                                 sched == STK_PIPE_1F1B ? cases[c].stages : cases[c].micro);
            /* batch norm's running statistics: one update per micro-batch, the same */
            for (int i = 0; i < stk_model_param_count(m); i++) {
                const stk_param *a = stk_model_param(ref, i), *b = stk_model_param(m, i);
                if (!a->is_buffer || stk_tensor_dtype(a->value) != STK_F32) continue;
                double d = worst_rel(stk_tensor_data(a->value), stk_tensor_data(b->value),
                                     stk_tensor_numel(a->value));
                ck_assert_msg(d <= 1e-6, "%s differs", a->name);
            }
            free(g);
            stk_model_destroy(m);
        }
        free(gref);
        stk_model_destroy(ref);
        stk_tensor_release(x);
        stk_tensor_release(y);
    }
}
END_TEST

/* Without batch norm, micro-batches give the whole batch's gradient: each
 * micro-batch's loss is weighted by its share (uneven sizes: 10 = 4+3+3). */
START_TEST(test_micro_batches_weighting)
{
    int64_t xs[4] = {10, 1, 6, 6}, ys[1] = {10};
    stk_tensor *x = rand_tensor(11, 4, xs, -1, 1), *y;
    int32_t labels[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    ck_assert_int_eq(stk_tensor_from_host(STK_I32, 1, ys, labels, &y), STK_OK);
    stk_model *a = make("mlp", 1, 6), *b = make("mlp", 1, 6);
    stk_pipeline_config whole = {.stages = 1, .micro_batches = 1},
                        three = {.stages = 1, .micro_batches = 3};
    float la, lb;
    float *ga = step_grads(a, &whole, x, y, &la, NULL),
          *gb = step_grads(b, &three, x, y, &lb, NULL);
    ck_assert_double_le(worst_rel(ga, gb, stk_model_trainable_numel(a)), 1e-5);
    ck_assert_float_eq_tol(la, lb, 1e-5f * fabsf(la));
    /* a batch smaller than M is refused */
    stk_pipeline_config many = {.stages = 1, .micro_batches = 11};
    stk_pipeline *p;
    ck_assert_int_eq(stk_pipeline_create(a, &many, &p), STK_OK);
    float l;
    stk_tensor *lg;
    ck_assert_int_eq(stk_pipeline_step(p, x, y, 0.f, 1.f, 0, &l, &lg, NULL), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "a batch of 10 cannot be split into 11"));
    stk_pipeline_destroy(p);
    free(ga), free(gb);
    stk_model_destroy(a), stk_model_destroy(b);
    stk_tensor_release(x), stk_tensor_release(y);
}
END_TEST

START_TEST(test_split)
{
    stk_model *m = make("resnet18", 3, 32);
    ck_assert_int_eq(stk_model_unit_count(m),
                     13); /* conv1 bn1 relu layer1.0 .. layer4.1 avgpool fc */
    ck_assert_str_eq(stk_model_unit_name(m, 3), "layer1.0");
    ck_assert_str_eq(stk_model_unit_name(m, 12), "fc");
    stk_pipeline *p;
    stk_pipeline_config c = {.stages = 2, .micro_batches = 2, .split_after = "layer2"};
    ck_assert_int_eq(stk_pipeline_create(m, &c, &p), STK_OK);
    ck_assert_int_eq(stk_pipeline_stage_first(p, 1), 7); /* after layer2.1 */
    char buf[256];
    ck_assert_str_eq(stk_pipeline_describe(p, buf, sizeof buf),
                     "stage 0: conv1 .. layer2.1 (7 units), stage 1: layer3.0 .. fc (6 units)");
    stk_pipeline_destroy(p);
    const char *bad[] = {"layer9", "layer3,layer2", "fc", "layer1,layer2"};
    const char *why[] = {"layer9 (the resnet18 units: conv1 bn1 relu layer1.0", "in order",
                         "leave every stage a unit", "more cuts"};
    for (int i = 0; i < 4; i++) {
        c.split_after = bad[i];
        c.stages = i == 1 ? 3 : 2;
        ck_assert_int_eq(stk_pipeline_create(m, &c, &p), STK_ERR_INVALID_ARG);
        ck_assert_msg(strstr(stk_last_error(), why[i]), "%s: %s", bad[i], stk_last_error());
    }
    c.split_after = "layer1";
    c.stages = 3;
    ck_assert_int_eq(stk_pipeline_create(m, &c, &p), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "names 1 cuts; 3 stages need 2"));
    c = (stk_pipeline_config){.stages = 14, .micro_batches = 2};
    ck_assert_int_eq(stk_pipeline_create(m, &c, &p), STK_ERR_INVALID_ARG);
    c = (stk_pipeline_config){.stages = 2, .micro_batches = 0};
    ck_assert_int_eq(stk_pipeline_create(m, &c, &p), STK_ERR_INVALID_ARG);
    stk_model_destroy(m);
    /* balanced by measured cost: every stage gets units, the cut is where
     * the time splits (cnn: the 64->128 conv at full size dominates) */
    m = make("cnn", 1, 16);
    c = (stk_pipeline_config){.stages = 3, .micro_batches = 2, .threads = 1};
    ck_assert_int_eq(stk_pipeline_create(m, &c, &p), STK_OK);
    ck_assert_str_eq(stk_pipeline_describe(p, buf, sizeof buf),
                     "stages balanced at the first step");
    int64_t xs[4] = {4, 1, 16, 16}, ys[1] = {4};
    stk_tensor *x = rand_tensor(1, 4, xs, -1, 1), *y, *lg;
    int32_t labels[4] = {1, 2, 3, 4};
    ck_assert_int_eq(stk_tensor_from_host(STK_I32, 1, ys, labels, &y), STK_OK);
    float l;
    ck_assert_int_eq(stk_pipeline_step(p, x, y, 0.f, 1.f, 0, &l, &lg, NULL), STK_OK);
    for (int s = 0; s < 3; s++)
        ck_assert_int_lt(stk_pipeline_stage_first(p, s), stk_pipeline_stage_first(p, s + 1));
    ck_assert_int_eq(stk_pipeline_stage_first(p, 3), stk_model_unit_count(m));
    stk_tensor_release(lg), stk_tensor_release(x), stk_tensor_release(y);
    stk_pipeline_destroy(p);
    stk_model_destroy(m);
}
END_TEST

/* Units run in pieces equal the whole forward. */
START_TEST(test_units_forward)
{
    stk_model *m = make("mobilenet_v2", 3, 16);
    ck_assert_int_eq(stk_model_unit_count(m), 22); /* features.0..18, avgpool, classifier.0, .1 */
    stk_model_train(m, false);
    int64_t xs[4] = {2, 3, 16, 16};
    stk_tensor *x = rand_tensor(2, 4, xs, -1, 1), *a, *h, *b;
    ck_assert_int_eq(stk_model_forward(m, x, &a), STK_OK);
    ck_assert_int_eq(stk_model_forward_units(m, 0, 9, 1, x, &h), STK_OK);
    ck_assert_int_eq(stk_model_forward_units(m, 9, 22, 1, h, &b), STK_OK);
    ck_assert_double_le(worst_rel(stk_tensor_data(a), stk_tensor_data(b), 20), 0);
    ck_assert_int_eq(stk_model_forward_units(m, 5, 23, 1, h, &b), STK_ERR_INVALID_ARG);
    stk_tensor_release(a), stk_tensor_release(b), stk_tensor_release(h), stk_tensor_release(x);
    stk_model_destroy(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pipeline");
    TCase *t = tcase_create("pipeline");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_schedules);
    tcase_add_test(t, test_runner);
    tcase_add_test(t, test_pipeline_equals_accumulation);
    tcase_add_test(t, test_micro_batches_weighting);
    tcase_add_test(t, test_split);
    tcase_add_test(t, test_units_forward);
    suite_add_tcase(s, t);
    return stk_check_run(s);
}
