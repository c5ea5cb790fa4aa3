/* Data-parallel costs (distributed/): the all-reduce's bandwidth through Stoke
 * against MPI_Allreduce called directly, and a training step's
 * communication: how much of it backward hides.
 *
 *   mpirun -np 2 bench_ddp allreduce [--max-mb 64] [--seconds 1]
 *       OSU-style: for each size, a loop of stk_comm_allreduce_sum (what the
 *       gradient buckets use) and of MPI_Allreduce on the same buffer;
 *       algorithm bandwidth (bytes / time) and bus bandwidth (x 2(N-1)/N,
 *       the bytes each rank moves in a ring all-reduce, NCCL's convention).
 *   [mpirun -np N] bench_ddp train [--model resnet8] [--batch 64] [--threads 1]
 *                                  [--steps 20] [--sync-bn]
 *       the trainer's step on random inputs with stk_ddp attached: step
 *       time, the job's images/s, and per step the bytes all-reduced, the
 *       communication thread's time and the part of it not hidden by
 *       backward. Without a launcher: one process, no communication (the
 *       baseline at the same global batch).
 *
 * bench/README.md says how the figures in the README were taken. */
#include "common/clock.h"
#include "common/rng.h"
#include "distributed/comm.h"
#include "distributed/ddp.h"
#include "engine/optim.h"
#include "kernels/backend.h"
#include "train/device.h"
#include "train/trainer.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int allreduce_bench(stk_comm *c, double max_mb, double seconds)
{
    int world = stk_comm_world(c), rank = stk_comm_rank(c);
    size_t max_n = (size_t)(max_mb * 1048576 / sizeof(float));
    float *buf = malloc(max_n * sizeof *buf);
    if (!buf) return 1;
    for (size_t i = 0; i < max_n; i++) buf[i] = 1.f;
    if (rank == 0)
        printf("%12s %10s %12s %12s %10s %12s\n", "bytes", "stoke us", "stoke GB/s", "bus GB/s",
               "MPI us", "MPI GB/s");
    for (size_t n = 1024; n <= max_n; n *= 4) {
        double t[2];
        for (int way = 0; way < 2; way++) {
            /* every rank runs the same number of iterations (a collective
             * each): 5 to size the loop, then rank 0's count */
            double t0 = stk_clock_sec();
            for (int i = 0; i < 5; i++) {
                if (way == 0) {
                    if (stk_comm_allreduce_sum(c, buf, n) != STK_OK) return 1;
                } else {
                    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                }
            }
            int loop = (int)(seconds / ((stk_clock_sec() - t0) / 5)) + 1;
            MPI_Bcast(&loop, 1, MPI_INT, 0, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = stk_clock_sec();
            for (int i = 0; i < loop; i++) {
                if (way == 0) {
                    if (stk_comm_allreduce_sum(c, buf, n) != STK_OK) return 1;
                } else {
                    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                }
            }
            t[way] = (stk_clock_sec() - t0) / loop;
        }
        double bytes = (double)n * sizeof(float), bus = 2.0 * (world - 1) / world;
        if (rank == 0)
            printf("%12.0f %10.1f %12.3f %12.3f %10.1f %12.3f\n", bytes, t[0] * 1e6,
                   bytes / t[0] / 1e9, bytes / t[0] / 1e9 * bus, t[1] * 1e6, bytes / t[1] / 1e9);
    }
    free(buf);
    return 0;
}

static stk_tensor *random_tensor(int ndim, const int64_t *shape, int rank)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    float *v = malloc((size_t)n * sizeof *v);
    stk_rng r;
    stk_rng_init(&r, 1, (uint64_t)rank, 0);
    for (int64_t i = 0; i < n; i++) v[i] = (float)stk_rng_uniform(&r) * 2.f - 1.f;
    stk_tensor *t = NULL;
    stk_tensor_from_host(STK_F32, ndim, shape, v, &t);
    free(v);
    return t;
}

static int train_bench(stk_comm *c, const char *name, int batch, int steps, bool sync_bn)
{
    int rank = stk_comm_rank(c), world = stk_comm_world(c);
    bool r18 = !strcmp(name, "resnet18");
    int ch = r18 ? 3 : 1, size = r18 ? 32 : 28;
    stk_model_config cfg = {
        .name = name, .in_channels = ch, .classes = 10, .image_size = size, .seed = 1};
    stk_model *m = NULL;
    stk_optim *opt = NULL;
    stk_trainer *t = NULL;
    stk_ddp *d = NULL;
    const stk_copy_engine *ce;
    stk_device_spec spec = {STK_DEVICE_CPU, 0};
    stk_optim_config oc = {.kind = STK_OPTIM_SGD, .lr = 0.01f, .momentum = 0.9f};
    stk_trainer_config tc = stk_trainer_defaults();
    if (stk_model_create(&cfg, &m) != STK_OK || stk_optim_create(&oc, m, &opt) != STK_OK ||
        stk_device_spec_open(&spec, &ce) != STK_OK ||
        (tc.copy_engine = ce, stk_trainer_create(&tc, m, opt, &t)) != STK_OK)
        goto fail;
    char batch_text[24];
    snprintf(batch_text, sizeof batch_text, "%d", batch);
    stk_ddp_check_item items[] = {{"batch", batch_text}};
    if (stk_ddp_attach(t, m, c, 1, items, &d) != STK_OK) goto fail;
    if (sync_bn) stk_ddp_sync_batch_norm(d);
    int64_t xs[4] = {batch, ch, size, size}, ys[1] = {batch};
    stk_tensor *x = random_tensor(4, xs, rank), *y = NULL;
    int32_t *lab = malloc(sizeof(int32_t) * (size_t)batch);
    for (int i = 0; i < batch; i++) lab[i] = (i + rank) % 10;
    stk_tensor_from_host(STK_I32, 1, ys, lab, &y);
    stk_model_train(m, true);
    double t0 = 0;
    stk_ddp_stats s0 = {0}, s1;
    for (int i = 0; i < steps + 3; i++) {
        if (i == 3) { /* three warm-up steps */
            stk_ddp_get_stats(d, &s0);
            t0 = stk_clock_sec();
        }
        stk_step_result r;
        if (stk_trainer_step_tensors(t, x, y, lab, &r) != STK_OK) goto fail;
    }
    double step_s = (stk_clock_sec() - t0) / steps;
    stk_ddp_get_stats(d, &s1);
    double comm = (s1.comm_s - s0.comm_s) / steps, exposed = (s1.exposed_s - s0.exposed_s) / steps;
    if (rank == 0) {
        printf("%s batch %d x %d rank%s, %d threads%s: step %.1f ms, %.1f images/s", name, batch,
               world, world > 1 ? "s" : "", stk_cpu_threads(), sync_bn ? ", sync-bn" : "",
               step_s * 1e3, batch * world / step_s);
        if (world > 1)
            printf("; per step %.2f MB in %d bucket%s: all-reduce %.1f ms, %.1f ms exposed "
                   "(%.0f%% hidden by backward)",
                   s1.bytes_per_step / 1e6, s1.buckets, s1.buckets > 1 ? "s" : "", comm * 1e3,
                   exposed * 1e3, comm > 0 ? 100.0 * (1 - exposed / comm) : 0);
        printf("\n");
    }
    stk_trainer_destroy(t);
    stk_ddp_destroy(d);
    stk_tensor_release(x);
    stk_tensor_release(y);
    free(lab);
    stk_optim_destroy(opt);
    stk_model_destroy(m);
    return 0;
fail:
    fprintf(stderr, "bench_ddp: rank %d: %s\n", rank, stk_last_error());
    stk_comm_abort(c, 1);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "allreduce") && strcmp(argv[1], "train"))) {
        fprintf(stderr, "usage: bench_ddp allreduce [--max-mb M] [--seconds S]\n"
                        "       bench_ddp train [--model M] [--batch B] [--threads T] "
                        "[--steps S] [--sync-bn]\n");
        return 2;
    }
    const char *model = "resnet8";
    int batch = 64, threads = 1, steps = 20;
    double max_mb = 64, seconds = 1;
    bool sync_bn = false;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-mb") && i + 1 < argc)
            max_mb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--sync-bn"))
            sync_bn = true;
        else {
            fprintf(stderr, "bench_ddp: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    stk_cpu_set_threads(threads);
    stk_comm *c;
    if (stk_comm_open(300, &c) != STK_OK) {
        fprintf(stderr, "bench_ddp: %s\n", stk_last_error());
        return 1;
    }
    int rc;
    if (!strcmp(argv[1], "allreduce")) {
        if (stk_comm_world(c) < 2) {
            fprintf(stderr, "bench_ddp allreduce: run it under mpirun -np 2 or more\n");
            rc = 2;
        } else {
            rc = allreduce_bench(c, max_mb, seconds);
        }
    } else {
        rc = train_bench(c, model, batch, steps, sync_bn);
    }
    stk_comm_close(c);
    return rc;
}
