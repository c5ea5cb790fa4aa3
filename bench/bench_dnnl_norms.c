/* Stoke's own layer norm, softmax and GELU loops (kernels/cpu_layer_norm.c,
 * cpu_elementwise.c) beside oneDNN's primitives for the same ops
 * (layer_normalization, softmax, eltwise gelu_erf), forward and backward,
 * on the shapes today's models run at 64 px, batch 32: which one the CPU
 * backend should call (kernels/README.md, "Layer norm, softmax and GELU:
 * oneDNN's primitives, measured").
 *
 *   build/bench_dnnl_norms [--seconds S]      (OMP_NUM_THREADS threads)
 *
 * Milliseconds per call (the minimum over repeats), both on the same
 * buffers; a line per op and shape with the ratio oneDNN / Stoke. */
#include "kernels/cpu_kernels_impl.h"

#include <dnnl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double seconds = 0.5;

/* The fastest of repeated calls of fn(ctx), in ms, over `seconds`. */
static double best_ms(void (*fn)(void *), void *ctx)
{
    fn(ctx); /* warm: plans, pages */
    double best = 1e30, end = now() + seconds;
    do {
        double t = now();
        fn(ctx);
        t = now() - t;
        if (t < best) best = t;
    } while (now() < end);
    return best * 1e3;
}

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        dnnl_status_t s_ = (x);                                                                    \
        if (s_ != dnnl_success) {                                                                  \
            fprintf(stderr, "bench_dnnl_norms: %s failed: %d\n", #x, (int)s_);                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static dnnl_engine_t eng;
static dnnl_stream_t strm;

static dnnl_memory_t mem(const dnnl_memory_desc_t *md, void *p)
{
    dnnl_memory_t m;
    CHECK(dnnl_memory_create(&m, md, eng, p));
    return m;
}

static float *floats(int64_t n, unsigned seed)
{
    float *p = malloc(sizeof(float) * (size_t)n);
    srand(seed);
    for (int64_t i = 0; i < n; i++) p[i] = (float)rand() / (float)RAND_MAX * 4.f - 2.f;
    return p;
}

typedef struct job {
    int64_t rows, cols;
    float *x, *y, *gy, *gx, *gamma, *beta, *ggamma, *gbeta, *mean, *rstd;
    dnnl_primitive_t prim;
    int nargs;
    dnnl_exec_arg_t args[8];
} job;

static void run_prim(void *c)
{
    job *j = c;
    CHECK(dnnl_primitive_execute(j->prim, strm, j->nargs, j->args));
    CHECK(dnnl_stream_wait(strm));
}

static void ln_fwd(void *c)
{
    job *j = c;
    cpu_layer_norm_forward(j->rows, j->cols, j->x, j->gamma, j->beta, 1e-6f, j->y, j->mean,
                           j->rstd);
}
static void ln_bwd(void *c)
{
    job *j = c;
    cpu_layer_norm_backward(j->rows, j->cols, j->x, j->gamma, j->mean, j->rstd, j->gy, j->gx,
                            j->ggamma, j->gbeta);
}
static void sm_fwd(void *c)
{
    job *j = c;
    cpu_softmax_forward(j->rows, j->cols, j->x, j->y, false);
}
static void sm_bwd(void *c)
{
    job *j = c;
    cpu_softmax_backward(j->rows, j->cols, j->y, j->gy, j->gx, false);
}
static void gelu_fwd(void *c)
{
    job *j = c;
    cpu_unary(STK_UNARY_GELU, j->rows * j->cols, j->x, j->y, 0.f);
}
static void gelu_bwd(void *c)
{
    job *j = c;
    cpu_unary_backward(STK_UNARY_GELU, j->rows * j->cols, j->x, j->y, j->gy, j->gx, 0.f);
}

static void report(const char *op, const job *j, double stoke, double dnnl)
{
    printf("%-22s %6lld x %-5lld  stoke %8.3f ms  oneDNN %8.3f ms  oneDNN/stoke %5.2fx\n", op,
           (long long)j->rows, (long long)j->cols, stoke, dnnl, dnnl / stoke);
}

static dnnl_primitive_t make(const void *desc, dnnl_primitive_desc_t hint,
                             dnnl_primitive_desc_t *pd)
{
    dnnl_primitive_desc_t p;
    dnnl_primitive_t prim;
    CHECK(dnnl_primitive_desc_create(&p, desc, NULL, eng, hint));
    CHECK(dnnl_primitive_create(&prim, p));
    if (pd)
        *pd = p;
    else
        dnnl_primitive_desc_destroy(p);
    return prim;
}

static void layer_norm(int64_t rows, int64_t cols)
{
    job j = {.rows = rows, .cols = cols};
    int64_t n = rows * cols;
    j.x = floats(n, 1), j.gy = floats(n, 2), j.y = floats(n, 3), j.gx = floats(n, 4);
    j.gamma = floats(cols, 5), j.beta = floats(cols, 6), j.ggamma = floats(cols, 7);
    j.gbeta = floats(cols, 8), j.mean = floats(rows, 9), j.rstd = floats(rows, 10);
    double s_f = best_ms(ln_fwd, &j), s_b = best_ms(ln_bwd, &j);
    /* gamma and beta as one [2, cols] tensor (dnnl_use_scaleshift): oneDNN
     * 2.6's backward refused separate scale and shift at execution */
    float *ss = malloc(sizeof(float) * 2 * (size_t)cols),
          *gss = malloc(sizeof(float) * 2 * (size_t)cols);
    memcpy(ss, j.gamma, sizeof(float) * (size_t)cols);
    memcpy(ss + cols, j.beta, sizeof(float) * (size_t)cols);
    dnnl_dims_t dd = {rows, cols}, sd = {rows}, pd_ = {2, cols};
    dnnl_memory_desc_t data, stat, par;
    CHECK(dnnl_memory_desc_init_by_tag(&data, 2, dd, dnnl_f32, dnnl_ab));
    CHECK(dnnl_memory_desc_init_by_tag(&stat, 1, sd, dnnl_f32, dnnl_a));
    CHECK(dnnl_memory_desc_init_by_tag(&par, 2, pd_, dnnl_f32, dnnl_ab));
    unsigned flags = dnnl_use_scaleshift;
    dnnl_layer_normalization_desc_t fd, bd;
    CHECK(dnnl_layer_normalization_forward_desc_init(&fd, dnnl_forward_training, &data, &stat,
                                                     1e-6f, flags));
    dnnl_primitive_desc_t fpd;
    job f = j;
    f.prim = make(&fd, NULL, &fpd);
    float *var = floats(rows, 11);
    dnnl_exec_arg_t fa[5] = {{DNNL_ARG_SRC, mem(&data, j.x)},
                             {DNNL_ARG_DST, mem(&data, j.y)},
                             {DNNL_ARG_MEAN, mem(&stat, j.mean)},
                             {DNNL_ARG_VARIANCE, mem(&stat, var)},
                             {DNNL_ARG_SCALE_SHIFT, mem(&par, ss)}};
    memcpy(f.args, fa, sizeof fa);
    f.nargs = 5;
    double d_f = best_ms(run_prim, &f);
    CHECK(dnnl_layer_normalization_backward_desc_init(&bd, dnnl_backward, &data, &data, &stat,
                                                      1e-6f, flags));
    job b = j;
    b.prim = make(&bd, fpd, NULL);
    dnnl_exec_arg_t ba[7] = {{DNNL_ARG_SRC, fa[0].memory},
                             {DNNL_ARG_MEAN, fa[2].memory},
                             {DNNL_ARG_VARIANCE, fa[3].memory},
                             {DNNL_ARG_SCALE_SHIFT, fa[4].memory},
                             {DNNL_ARG_DIFF_DST, mem(&data, j.gy)},
                             {DNNL_ARG_DIFF_SRC, mem(&data, j.gx)},
                             {DNNL_ARG_DIFF_SCALE_SHIFT, mem(&par, gss)}};
    memcpy(b.args, ba, sizeof ba);
    b.nargs = 7;
    double d_b = best_ms(run_prim, &b);
    report("layer norm forward", &j, s_f, d_f);
    report("layer norm backward", &j, s_b, d_b);
}

static void softmax(int64_t rows, int64_t cols)
{
    job j = {.rows = rows, .cols = cols};
    int64_t n = rows * cols;
    j.x = floats(n, 1), j.gy = floats(n, 2), j.y = floats(n, 3), j.gx = floats(n, 4);
    double s_f = best_ms(sm_fwd, &j), s_b = best_ms(sm_bwd, &j);
    dnnl_dims_t dd = {rows, cols};
    dnnl_memory_desc_t data;
    CHECK(dnnl_memory_desc_init_by_tag(&data, 2, dd, dnnl_f32, dnnl_ab));
    dnnl_softmax_desc_t fd, bd;
    CHECK(dnnl_softmax_forward_desc_init(&fd, dnnl_forward_training, &data, 1));
    dnnl_primitive_desc_t fpd;
    job f = j;
    f.prim = make(&fd, NULL, &fpd);
    f.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mem(&data, j.x)};
    f.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, mem(&data, j.y)};
    f.nargs = 2;
    double d_f = best_ms(run_prim, &f);
    CHECK(dnnl_softmax_backward_desc_init(&bd, &data, &data, 1));
    job b = j;
    b.prim = make(&bd, fpd, NULL);
    b.args[0] = (dnnl_exec_arg_t){DNNL_ARG_DST, f.args[1].memory};
    b.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, mem(&data, j.gy)};
    b.args[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, mem(&data, j.gx)};
    b.nargs = 3;
    double d_b = best_ms(run_prim, &b);
    report("softmax forward", &j, s_f, d_f);
    report("softmax backward", &j, s_b, d_b);
}

static void gelu(int64_t rows, int64_t cols)
{
    job j = {.rows = rows, .cols = cols};
    int64_t n = rows * cols;
    j.x = floats(n, 1), j.gy = floats(n, 2), j.y = floats(n, 3), j.gx = floats(n, 4);
    double s_f = best_ms(gelu_fwd, &j), s_b = best_ms(gelu_bwd, &j);
    dnnl_dims_t dd = {rows, cols};
    dnnl_memory_desc_t data;
    CHECK(dnnl_memory_desc_init_by_tag(&data, 2, dd, dnnl_f32, dnnl_ab));
    dnnl_eltwise_desc_t fd, bd;
    CHECK(dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training, dnnl_eltwise_gelu_erf, &data,
                                         0.f, 0.f));
    dnnl_primitive_desc_t fpd;
    job f = j;
    f.prim = make(&fd, NULL, &fpd);
    f.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mem(&data, j.x)};
    f.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, mem(&data, j.y)};
    f.nargs = 2;
    double d_f = best_ms(run_prim, &f);
    CHECK(dnnl_eltwise_backward_desc_init(&bd, dnnl_eltwise_gelu_erf, &data, &data, 0.f, 0.f));
    job b = j;
    b.prim = make(&bd, fpd, NULL);
    b.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, f.args[0].memory};
    b.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, mem(&data, j.gy)};
    b.args[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, mem(&data, j.gx)};
    b.nargs = 3;
    double d_b = best_ms(run_prim, &b);
    report("GELU (erf) forward", &j, s_f, d_f);
    report("GELU (erf) backward", &j, s_b, d_b);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_dnnl_norms [--seconds S]\n");
            return 2;
        }
    }
    CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    printf("oneDNN %d.%d.%d, %d OpenMP threads\n", dnnl_version()->major, dnnl_version()->minor,
           dnnl_version()->patch, omp_get_max_threads());
    layer_norm(32 * 65, 192);     /* vit_tiny at 64 px: 65 tokens, width 192 */
    layer_norm(32 * 16 * 16, 96); /* convnext_tiny's first stage at 64 px */
    softmax(32 * 3 * 65, 65);     /* vit_tiny's attention, 3 heads */
    gelu(32 * 65, 768);           /* vit_tiny's MLP */
    gelu(32 * 16 * 16, 384);      /* convnext_tiny's first stage */
    return 0;
}
