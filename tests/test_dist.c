/* Data-parallel training (distributed/): the collectives, and a ddp-attached trainer
 * on 2 ranks against one process on the whole batch. ctest runs it under
 * `mpiexec -n 2` and alone (a world of one). Check's fork mode is off: MPI
 * and fork() do not mix. */
#include "common/crc32c.h"
#include "distributed/comm.h"
#include "distributed/ddp.h"
#include "distributed/pipe_ranks.h"
#include "engine_testlib.h"
#include "train/batch.h"

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static stk_comm *comm;

START_TEST(test_collectives)
{
    int rank = stk_comm_rank(comm), world = stk_comm_world(comm);
    stk_launch l = stk_launch_detect();
    ck_assert_int_eq(l.world, world);
    ck_assert_int_eq(l.rank, rank);
    float v[3] = {(float)rank, 1.f, 2.f * (float)rank};
    ck_assert_int_eq(stk_comm_allreduce_sum(comm, v, 3), STK_OK);
    float ranks = (float)(world * (world - 1) / 2);
    ck_assert_float_eq(v[0], ranks);
    ck_assert_float_eq(v[1], (float)world);
    ck_assert_float_eq(v[2], 2 * ranks);
    int b = rank == 0 ? 42 : -1;
    ck_assert_int_eq(stk_comm_broadcast(comm, &b, sizeof b, 0), STK_OK);
    ck_assert_int_eq(b, 42);
    ck_assert_int_eq(stk_comm_broadcast(comm, &b, sizeof b, world), STK_ERR_INVALID_ARG);
    int all[8] = {0};
    ck_assert_int_eq(stk_comm_allgather(comm, &rank, sizeof rank, all), STK_OK);
    for (int r = 0; r < world; r++) ck_assert_int_eq(all[r], r);
    ck_assert_int_eq(stk_comm_barrier(comm, 0), STK_OK);
}
END_TEST

/* Point to point: two ranks send each other 4 MB (past MPI's eager limit)
 * before either receives: the sends only start, so neither waits for the
 * other; a message of another size is an error naming the sender. */
START_TEST(test_point_to_point)
{
    int rank = stk_comm_rank(comm), world = stk_comm_world(comm);
    stk_comm_request *req;
    if (world < 2) {
        ck_assert_int_eq(stk_comm_isend(comm, 1, 0, &rank, sizeof rank, &req), STK_ERR_INVALID_ARG);
        ck_assert_ptr_null(req);
        return;
    }
    if (rank > 1) return;
    size_t n = 1u << 20;
    float *out = malloc(n * sizeof *out), *in = malloc(n * sizeof *in);
    ck_assert(out && in);
    for (size_t i = 0; i < n; i++) out[i] = (float)(rank * 7 + (int)(i % 1000));
    int peer = 1 - rank;
    ck_assert_int_eq(stk_comm_isend(comm, peer, 5, out, n * sizeof *out, &req), STK_OK);
    ck_assert_int_eq(stk_comm_recv(comm, peer, 5, in, n * sizeof *in), STK_OK);
    ck_assert_int_eq(stk_comm_wait(comm, req), STK_OK);
    for (size_t i = 0; i < n; i += 4099)
        ck_assert_float_eq(in[i], (float)(peer * 7 + (int)(i % 1000)));
    int small = 3;
    ck_assert_int_eq(stk_comm_isend(comm, peer, 6, &small, sizeof small, &req), STK_OK);
    int64_t big = 0;
    ck_assert_int_eq(stk_comm_recv(comm, peer, 6, &big, sizeof big), STK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "4 bytes, expected 8"));
    ck_assert_int_eq(stk_comm_wait(comm, req), STK_OK);
    ck_assert_int_eq(stk_comm_isend(comm, rank, 0, &small, sizeof small, &req),
                     STK_ERR_INVALID_ARG);
    free(out), free(in);
}
END_TEST

/* Pipeline stages on ranks: K must divide the ranks; with K = world each
 * rank is a stage of one pipeline, and the link sends stage 0's message to
 * stage 1 (the ranks found from the stage numbers). */
START_TEST(test_pipe_ranks_link)
{
    int rank = stk_comm_rank(comm), world = stk_comm_world(comm);
    stk_pipe_ranks *p;
    ck_assert_int_eq(stk_pipe_ranks_open(comm, world + 1, &p), STK_ERR_INVALID_ARG);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(stk_last_error(), "the ranks must be a multiple of the stages"), "%s",
                  stk_last_error());
    ck_assert_int_eq(stk_pipe_ranks_open(comm, world, &p), STK_OK);
    ck_assert_int_eq(stk_pipe_ranks_stage(p), rank);
    ck_assert_int_eq(stk_pipe_ranks_replica(p), 0);
    ck_assert_int_eq(stk_pipe_ranks_replicas(p), 1);
    const stk_pipe_link *l = stk_pipe_ranks_link(p);
    ck_assert_int_eq(l->stage, rank);
    int64_t msg = 4242, got = 0;
    if (world >= 2 && rank == 0) {
        void *pending;
        ck_assert_int_eq(l->send(l->ctx, 1, 9, &msg, sizeof msg, &pending), STK_OK);
        ck_assert_int_eq(l->wait(l->ctx, pending), STK_OK);
    } else if (world >= 2 && rank == 1) {
        ck_assert_int_eq(l->recv(l->ctx, 0, 9, &got, sizeof got), STK_OK);
        ck_assert_int_eq(got, msg);
    }
    stk_pipe_ranks_close(p);
}
END_TEST

static stk_model *make_named(const char *name, uint64_t seed)
{
    stk_model_config c = {
        .name = name, .in_channels = 1, .classes = 3, .image_size = 8, .seed = seed};
    stk_model *m;
    ck_assert_int_eq(stk_model_create(&c, &m), STK_OK);
    return m;
}

static stk_model *make(uint64_t seed) { return make_named("mlp", seed); }

static stk_optim *sgd(stk_model *m)
{
    stk_optim_config oc = {.kind = STK_OPTIM_SGD, .lr = 0.1f, .momentum = 0.9f};
    stk_optim *o;
    ck_assert_int_eq(stk_optim_create(&oc, m, &o), STK_OK);
    return o;
}

/* CRC of every parameter's bytes. */
static uint32_t weights_crc(const stk_model *m)
{
    uint32_t crc = 0;
    for (int i = 0; i < stk_model_param_count(m); i++) {
        stk_tensor *t = stk_model_param(m, i)->value;
        crc = stk_crc32c(crc, stk_tensor_data(t),
                         (size_t)stk_tensor_numel(t) * stk_dtype_size(stk_tensor_dtype(t)));
    }
    return crc;
}

static bool same_on_every_rank(uint32_t crc)
{
    uint32_t all[64];
    ck_assert_int_le(stk_comm_world(comm), 64);
    ck_assert_int_eq(stk_comm_allgather(comm, &crc, sizeof crc, all), STK_OK);
    for (int r = 1; r < stk_comm_world(comm); r++)
        if (all[r] != all[0]) return false;
    return true;
}

/* Sample i of step s: 8x8 pixels and a label, the same on every rank. */
static void sample(int s, int i, uint8_t *px, int32_t *label)
{
    stk_rng r;
    stk_rng_init(&r, (uint64_t)(s * 1000 + i), 9, 0);
    for (int k = 0; k < 64; k++) px[k] = (uint8_t)(stk_rng_uniform(&r) * 256);
    *label = (s + i) % 3;
}

static const float mean[3] = {0.5f, 0.5f, 0.5f}, sd[3] = {0.25f, 0.25f, 0.25f};

static stk_trainer *trainer(stk_model *m, stk_optim *o)
{
    stk_trainer_config c = stk_trainer_defaults();
    memcpy(c.mean, mean, sizeof mean);
    memcpy(c.std, sd, sizeof sd);
    stk_trainer *t;
    ck_assert_int_eq(stk_trainer_create(&c, m, o, &t), STK_OK);
    return t;
}

/* One step on samples [first, first + n) of step s. */
static void step(stk_trainer *t, int s, int first, int n)
{
    uint8_t px[16 * 64];
    int32_t labels[16];
    for (int i = 0; i < n; i++) sample(s, first + i, px + 64 * i, &labels[i]);
    stk_device_batch b = {.data = px,
                          .labels = labels,
                          .host_labels = labels,
                          .sample_bytes = 64,
                          .count = n,
                          .width = 8,
                          .height = 8,
                          .channels = 1,
                          .device = STK_DEVICE_CPU};
    stk_step_result r;
    stk_status st = stk_trainer_step(t, &b, &r);
    ck_assert_msg(st == STK_OK, "%s", stk_last_error());
}

/* `model` on every rank (batch norm synchronised when sync) against one
 * process on the whole batch: the same weights within tol, and bitwise the
 * same weights and buffers on every rank after every step. */
static void train_as_one(const char *model, bool sync, float tol)
{
    int rank = stk_comm_rank(comm), world = stk_comm_world(comm);
    enum { PER_RANK = 4, STEPS = 4 };
    /* every rank starts from other weights: attach gives them rank 0's */
    stk_model *m = make_named(model, 1 + (uint64_t)rank);
    stk_optim *o = sgd(m);
    stk_trainer *t = trainer(m, o);
    stk_ddp_check_item items[1] = {{"batch", "4"}};
    stk_ddp *d;
    stk_status st = stk_ddp_attach(t, m, comm, 1, items, &d);
    ck_assert_msg(st == STK_OK, "%s", stk_last_error());
    ck_assert(same_on_every_rank(weights_crc(m)));
    if (sync) stk_ddp_sync_batch_norm(d);
    /* the reference: one process, rank 0's initial weights, the whole batch */
    stk_model *ref = make_named(model, 1);
    stk_optim *ro = sgd(ref);
    stk_trainer *rt = trainer(ref, ro);
    for (int s = 0; s < STEPS; s++) {
        step(t, s, rank * PER_RANK, PER_RANK);
        step(rt, s, 0, PER_RANK * world);
        ck_assert_msg(same_on_every_rank(weights_crc(m)), "ranks differ after step %d", s);
    }
    /* the mean of per-rank means is the whole batch's mean: equal up to rounding */
    for (int i = 0; i < stk_model_param_count(m); i++) {
        stk_tensor *a = stk_model_param(m, i)->value, *b = stk_model_param(ref, i)->value;
        const float *x = stk_tensor_data(a), *y = stk_tensor_data(b);
        for (int64_t k = 0; k < stk_tensor_numel(a); k++)
            ck_assert_msg(fabsf(x[k] - y[k]) <= tol * fmaxf(1.f, fabsf(y[k])),
                          "%s[%lld]: %g on %d ranks, %g in one process",
                          stk_model_param(m, i)->name, (long long)k, x[k], world, y[k]);
    }
    stk_ddp_stats ds;
    stk_ddp_get_stats(d, &ds);
    if (world > 1) {
        ck_assert_int_eq((int)ds.steps, STEPS);
        ck_assert_int_ge(ds.buckets, 1);
    }
    stk_trainer_destroy(t);
    stk_ddp_destroy(d);
    stk_trainer_destroy(rt);
    stk_optim_destroy(o);
    stk_optim_destroy(ro);
    stk_model_destroy(m);
    stk_model_destroy(ref);
}

START_TEST(test_ranks_train_as_one_process)
{
    train_as_one("mlp", false, 1e-5f); /* summation order only */
}
END_TEST

/* Batch norm over all ranks' samples: the batch statistics of one process
 * (the two-pass global mean and variance against the fused kernel's). */
START_TEST(test_sync_batch_norm) { train_as_one("cnn", true, 1e-5f); }
END_TEST

START_TEST(test_a_different_rank_is_refused)
{
    int rank = stk_comm_rank(comm), world = stk_comm_world(comm);
    stk_model *m = make(1);
    stk_optim *o = sgd(m);
    stk_trainer *t = trainer(m, o);
    stk_ddp_check_item items[2] = {{"records", "100"}, {"batch", rank == 1 ? "32" : "16"}};
    stk_ddp *d = NULL;
    stk_status st = stk_ddp_attach(t, m, comm, 2, items, &d);
    if (world > 1) { /* every rank refuses, with the same message */
        ck_assert_int_eq(st, STK_ERR_INVALID_ARG);
        ck_assert_str_eq(stk_last_error(), "rank 1 differs from rank 0: batch 32 against 16");
        ck_assert_ptr_null(d);
    } else {
        ck_assert_int_eq(st, STK_OK);
    }
    stk_trainer_destroy(t);
    stk_ddp_destroy(d);
    stk_optim_destroy(o);
    stk_model_destroy(m);
}
END_TEST

/* Ranks that freeze other parameters would all-reduce buckets of other
 * sizes (memory corruption inside MPI): the model check compares which
 * parameters are trainable. */
START_TEST(test_another_trainable_set_is_refused)
{
    int rank = stk_comm_rank(comm), world = stk_comm_world(comm);
    stk_model *m = make(1);
    if (rank == 1) ck_assert_int_gt(stk_model_set_requires_grad(m, "fc1", false), 0);
    stk_optim *o = sgd(m);
    stk_trainer *t = trainer(m, o);
    stk_ddp_check_item items[1] = {{"batch", "16"}};
    stk_ddp *d = NULL;
    stk_status st = stk_ddp_attach(t, m, comm, 1, items, &d);
    if (world > 1) {
        ck_assert_int_eq(st, STK_ERR_INVALID_ARG);
        ck_assert_str_eq(stk_last_error(), "rank 1 runs another model than rank 0 (parameter "
                                           "names, shapes or which are trainable differ)");
    } else {
        ck_assert_int_eq(st, STK_OK);
    }
    stk_trainer_destroy(t);
    stk_ddp_destroy(d);
    stk_optim_destroy(o);
    stk_model_destroy(m);
}
END_TEST

/* A rank that arrives 3 s late at a barrier bounded to 1 s: the others fail
 * with the watchdog's message instead of waiting; the late rank then
 * finds the barrier complete (every rank entered it). */
START_TEST(test_a_late_rank_times_out)
{
    int rank = stk_comm_rank(comm), world = stk_comm_world(comm);
    if (world == 1) {
        ck_assert_int_eq(stk_comm_barrier(comm, 1), STK_OK);
        return;
    }
    if (rank == 1) sleep(3);
    stk_status st = stk_comm_barrier(comm, 1);
    if (rank == 1) {
        ck_assert_int_eq(st, STK_OK);
    } else {
        ck_assert_int_eq(st, STK_ERR_IO);
        ck_assert_str_eq(stk_last_error(), "the barrier has not finished after 1 s: another rank "
                                           "has hung, stopped or died (its own output may say "
                                           "why); stopping the job");
    }
    /* the late rank's entry completes the pending barrier on the others */
    ck_assert_int_eq(stk_comm_barrier(comm, 0), STK_OK);
}
END_TEST

int main(void)
{
    if (stk_comm_open(60, &comm) != STK_OK) {
        fprintf(stderr, "test_dist: %s\n", stk_last_error());
        return 1;
    }
    Suite *s = suite_create("dist");
    TCase *tc = tcase_create("dist");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_collectives);
    tcase_add_test(tc, test_point_to_point);
    tcase_add_test(tc, test_pipe_ranks_link);
    tcase_add_test(tc, test_ranks_train_as_one_process);
    tcase_add_test(tc, test_sync_batch_norm);
    tcase_add_test(tc, test_a_different_rank_is_refused);
    tcase_add_test(tc, test_another_trainable_set_is_refused);
    tcase_add_test(tc, test_a_late_rank_times_out);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    /* every rank's verdict: a failure on one fails the test on all */
    float f = (float)failed;
    stk_comm_allreduce_sum(comm, &f, 1);
    stk_comm_close(comm);
    return f > 0 ? 1 : 0;
}
