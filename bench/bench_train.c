/* Training throughput of the engine: images/s of the trainer's step
 * (train/trainer.h: forward, loss, backward, SGD) per model, batch and thread count, on random
 * inputs (the data path is measured by `stoke bench`; this isolates the engine). Also the engine's
 * matmul GFLOP/s at 1024^3 beside oneDNN's sgemm called directly, the fastest GEMM measured on this
 * machine (kernels/README.md), and where the CPU has bf16 instructions oneDNN's bf16 matmul at
 * 1024^3 and 2048^3 (the rate --amp's convolutions and matmuls can approach).
 *
 *   bench_train [--models mlp,cnn,resnet8,resnet18] [--batch 128] [--threads 2]
 *               [--size PX] [--channels C] [--seconds 10] [--device cpu|cuda] [--json]
 *               [--amp] [--micro-batches M [--pipeline K [--pipeline-schedule gpipe|1f1b]
 *                [--split-after UNITS]]]
 *
 * With --micro-batches / --pipeline the step runs as `stoke train`'s does
 * (train/pipeline.h): PyTorch's model-parallel tutorial's comparison on the
 * CPU's thread groups.
 *
 * With --amp the step runs under the trainer's autocast, as `stoke train
 * --amp`: bf16 matmuls and convolutions on the CPU, f16 on the GPU.
 *
 * With --device cuda the model, inputs and steps run on the GPU (the timing
 * waits for the queued work: every step reads its loss on the host).
 *
 * bench/engine_vs_pytorch.sh runs it beside bench/pytorch_models.py. */
#include "common/clock.h"
#include "common/rng.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/onnx_graph.h"
#include "engine/optim.h"
#include "kernels/backend.h"
#include "train/device.h"
#include "train/trainer.h"

#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static stk_tensor *random_tensor(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    float *v = malloc((size_t)n * sizeof *v);
    stk_rng r;
    stk_rng_init(&r, 1, 2, 0);
    for (int64_t i = 0; i < n; i++) v[i] = (float)stk_rng_uniform(&r) * 2.f - 1.f;
    stk_tensor *t = NULL;
    stk_tensor_from_host(STK_F32, ndim, shape, v, &t);
    free(v);
    return t;
}

static int size_override;     /* --size: input side (resnet18 > 64 px: the ImageNet stem) */
static int channels_override; /* --channels: input channels (default 1, resnet18 3) */
static stk_device device = STK_DEVICE_CPU;
static stk_pipeline_config pipe_cfg = {.schedule = STK_PIPE_1F1B}; /* --pipeline, ... */
static int micro_batches;
static bool amp; /* --amp: the trainer's autocast (bf16 on the CPU, f16 on the GPU) */

/* t moved to the benchmark's device (NULL and a message on failure). */
static stk_tensor *on_device(stk_tensor *t)
{
    if (t && stk_tensor_move_to(t, device) != STK_OK) {
        fprintf(stderr, "bench_train: %s\n", stk_last_error());
        stk_tensor_release(t);
        return NULL;
    }
    return t;
}

static int train_bench(const char *name, int batch, double seconds, bool json)
{
    /* the torchvision models on CIFAR-sized RGB, Stoke's own on Fashion-MNIST's shape */
    bool rgb = strcmp(name, "mlp") && strcmp(name, "cnn") && strcmp(name, "resnet8");
    int ch = channels_override ? channels_override
             : rgb             ? 3
                               : 1,
        size = size_override ? size_override
               : rgb         ? 32
                             : 28;
    stk_model_config cfg = {
        .name = name, .in_channels = ch, .classes = 10, .image_size = size, .seed = 1};
    stk_model *m;
    size_t len = strlen(name);
    bool onnx = len > 5 && !strcmp(name + len - 5, ".onnx"); /* a graph exported from PyTorch */
    if ((onnx ? stk_model_from_onnx_file(name, &cfg, &m) : stk_model_create(&cfg, &m)) != STK_OK) {
        fprintf(stderr, "bench_train: %s\n", stk_last_error());
        return 1;
    }
    if (stk_model_to(m, device) != STK_OK) {
        fprintf(stderr, "bench_train: %s\n", stk_last_error());
        return 1;
    }
    stk_optim_config oc = {
        .kind = STK_OPTIM_SGD, .lr = 0.01f, .momentum = 0.9f, .weight_decay = 5e-4f};
    stk_optim *opt;
    stk_optim_create(&oc, m, &opt);
    int64_t xs[4] = {batch, ch, size, size};
    stk_tensor *x = on_device(random_tensor(4, xs)), *y;
    int32_t *lab = malloc(sizeof(int32_t) * (size_t)batch);
    for (int i = 0; i < batch; i++) lab[i] = i % 10;
    int64_t ys[1] = {batch};
    stk_tensor_from_host(STK_I32, 1, ys, lab, &y);
    int32_t *host_labels = lab; /* for the step's accuracy count */
    if (!x || !(y = on_device(y))) return 1;
    /* the trainer's step: forward, loss, backward, SGD, the finite checks */
    stk_trainer_config tc = stk_trainer_defaults();
    tc.micro_batches = micro_batches;
    tc.amp = amp;
    tc.pipeline = pipe_cfg;
    const stk_copy_engine *ce;
    stk_device_spec spec = {device, 0};
    stk_trainer *t = NULL;
    if (stk_device_spec_open(&spec, &ce) != STK_OK ||
        (tc.copy_engine = ce, stk_trainer_create(&tc, m, opt, &t)) != STK_OK) {
        fprintf(stderr, "bench_train: %s\n", stk_last_error());
        return 1;
    }
    stk_model_train(m, true);
    int steps = 0;
    double t0 = 0, elapsed = 0;
    for (int i = 0;; i++) {
        if (i == 3) t0 = stk_clock_sec(); /* three warm-up steps */
        stk_step_result r;
        /* the step reads its loss on the host: the timing waits for the queued work */
        if (stk_trainer_step_tensors(t, x, y, host_labels, &r) != STK_OK) {
            fprintf(stderr, "bench_train: %s: %s\n", name, stk_last_error());
            return 1;
        }
        if (i >= 3) {
            steps++;
            elapsed = stk_clock_sec() - t0;
            if (elapsed >= seconds && steps >= 3) break;
        }
    }
    stk_trainer_destroy(t);
    free(host_labels);
    double ips = steps * batch / elapsed;
    stk_mem_stats ms;
    stk_device_mem_stats(device, &ms);
    if (json)
        printf("{\"model\": \"%s\", \"batch\": %d, \"threads\": %d, \"steps\": %d, "
               "\"images_per_sec\": %.1f, \"peak_mb\": %.1f}\n",
               name, batch, stk_cpu_threads(), steps, ips, ms.peak_allocated / 1048576.0);
    else
        printf("stoke   %-9s batch %d, %s%s: %8.1f images/s (%d steps, peak %.0f MiB)\n", name,
               batch, device == STK_DEVICE_CPU ? "cpu" : "cuda",
               !amp                       ? ""
               : device == STK_DEVICE_CPU ? " amp bf16"
                                          : " amp f16",
               ips, steps, ms.peak_allocated / 1048576.0);
    stk_tensor_release(x);
    stk_tensor_release(y);
    stk_optim_destroy(opt);
    stk_model_destroy(m);
    stk_device_reset_peak(device);
    return 0;
}

static void matmul_bench(double seconds)
{
    int64_t s[2] = {1024, 1024};
    stk_tensor *a = random_tensor(2, s), *b = random_tensor(2, s);
    double flop = 2.0 * 1024 * 1024 * 1024;
    /* the engine's op (no grad) */
    stk_no_grad_begin();
    int n = 0;
    double t0 = stk_clock_sec(), t;
    do {
        stk_tensor *c;
        stk_matmul(a, b, &c);
        stk_tensor_release(c);
        n++;
        t = stk_clock_sec() - t0;
    } while (t < seconds);
    stk_no_grad_end();
    double engine = n * flop / t / 1e9;
    /* oneDNN directly */
    float *c = malloc(1024 * 1024 * sizeof *c);
    n = 0;
    t0 = stk_clock_sec();
    do {
        dnnl_sgemm('N', 'N', 1024, 1024, 1024, 1.f, stk_tensor_data(a), 1024, stk_tensor_data(b),
                   1024, 0.f, c, 1024);
        n++;
        t = stk_clock_sec() - t0;
    } while (t < seconds);
    double direct = n * flop / t / 1e9;
    printf("matmul 1024^3, %d threads: engine %.1f GFLOP/s, oneDNN sgemm %.1f GFLOP/s: %.2f\n",
           stk_cpu_threads(), engine, direct, engine / direct);
    free(c);
    stk_tensor_release(a);
    stk_tensor_release(b);
}

/* oneDNN's bf16 x bf16 -> f32 matmul primitive called directly on bf16
 * operands (the machine's bf16 GEMM rate, the ceiling for --amp on the CPU)
 * at n^3, in GFLOP/s; 0 where oneDNN cannot. */
static double bf16_gemm_rate(int64_t n, double seconds)
{
    dnnl_engine_t eng;
    dnnl_stream_t st;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) || dnnl_stream_create(&st, eng, 0)) return 0;
    dnnl_dims_t dims = {n, n};
    dnnl_memory_desc_t a_md, b_md, c_md;
    dnnl_memory_desc_init_by_tag(&a_md, 2, dims, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&b_md, 2, dims, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&c_md, 2, dims, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    double rate = 0;
    if (!dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &c_md) &&
        !dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL)) {
        if (!dnnl_primitive_create(&prim, pd)) {
            dnnl_memory_t a, b, c;
            dnnl_memory_create(&a, &a_md, eng, DNNL_MEMORY_ALLOCATE);
            dnnl_memory_create(&b, &b_md, eng, DNNL_MEMORY_ALLOCATE);
            dnnl_memory_create(&c, &c_md, eng, DNNL_MEMORY_ALLOCATE);
            void *pa, *pb;
            dnnl_memory_get_data_handle(a, &pa);
            dnnl_memory_get_data_handle(b, &pb);
            memset(pa, 0x3f, (size_t)(n * n * 2)); /* 0x3f3f: about 0.75 */
            memset(pb, 0x3f, (size_t)(n * n * 2));
            dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
            dnnl_primitive_execute(prim, st, 3, args); /* warm-up */
            dnnl_stream_wait(st);
            int k = 0;
            double t0 = stk_clock_sec(), t;
            do {
                dnnl_primitive_execute(prim, st, 3, args);
                dnnl_stream_wait(st);
                k++;
                t = stk_clock_sec() - t0;
            } while (t < seconds);
            rate = k * 2.0 * n * n * n / t / 1e9;
            dnnl_memory_destroy(a), dnnl_memory_destroy(b), dnnl_memory_destroy(c);
            dnnl_primitive_destroy(prim);
        }
        dnnl_primitive_desc_destroy(pd);
    }
    dnnl_stream_destroy(st);
    dnnl_engine_destroy(eng);
    return rate;
}

static void bf16_matmul_bench(double seconds)
{
    printf("bf16 matmul, %d threads, oneDNN's primitive on bf16 operands:", stk_cpu_threads());
    for (int64_t n = 1024; n <= 2048; n *= 2)
        printf(" %lld^3 %.1f GFLOP/s", (long long)n, bf16_gemm_rate(n, seconds));
    printf(" (bf16 on %s)\n", stk_cpu_bf16_isa());
}

int main(int argc, char **argv)
{
    const char *models = "mlp,cnn,resnet8,resnet18";
    int batch = 128, threads = 2;
    double seconds = 10;
    bool json = false, matmul = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--models") && i + 1 < argc)
            models = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size_override = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--channels") && i + 1 < argc)
            channels_override = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--no-matmul"))
            matmul = false;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc && !strcmp(argv[i + 1], "cuda"))
            device = STK_DEVICE_CUDA, i++;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc && !strcmp(argv[i + 1], "cpu"))
            i++;
        else if (!strcmp(argv[i], "--amp"))
            amp = true;
        else if (!strcmp(argv[i], "--micro-batches") && i + 1 < argc)
            micro_batches = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pipeline") && i + 1 < argc)
            pipe_cfg.stages = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pipeline-schedule") && i + 1 < argc &&
                 stk_pipe_schedule_parse(argv[i + 1], &pipe_cfg.schedule))
            i++;
        else if (!strcmp(argv[i], "--split-after") && i + 1 < argc)
            pipe_cfg.split_after = argv[++i];
        else {
            fprintf(stderr,
                    "usage: bench_train [--models LIST] [--batch N] [--threads N] "
                    "[--size PX] [--channels C] [--seconds S] [--device cpu|cuda] [--json] "
                    "[--no-matmul] [--amp] [--micro-batches M [--pipeline K [--pipeline-schedule "
                    "gpipe|1f1b] [--split-after UNITS]]]\n");
            return 2;
        }
    }
    stk_cpu_set_threads(threads);
    pipe_cfg.threads = threads;
    char list[256];
    snprintf(list, sizeof list, "%s", models);
    for (char *save, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (train_bench(tok, batch, seconds, json)) return 1;
    if (matmul && !json && device == STK_DEVICE_CPU) {
        matmul_bench(seconds / 4 > 1 ? seconds / 4 : 1);
        if (stk_cpu_bf16_isa()) bf16_matmul_bench(seconds / 4 > 1 ? seconds / 4 : 1);
    }
    return 0;
}
