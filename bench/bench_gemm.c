/* Which CPU GEMM to build the engine on: the candidates Debian offers, side
 * by side in one process (each loaded with dlopen, so their cblas symbols do
 * not clash), on the shapes a training step uses, with 1 and 2 threads.
 *
 *   bench_gemm [--seconds S]
 *
 * Candidates: OpenBLAS (libopenblas.so.0, as Debian ships it: no environment
 * variables), BLIS (libblis.so.4) and oneDNN (libdnnl.so.2, dnnl_sgemm).
 * Missing libraries are skipped. Results feed kernels/README.md.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*cblas_sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                               const float *a, int lda, const float *b, int ldb, float beta,
                               float *c, int ldc);
typedef int (*dnnl_sgemm_fn)(char ta, char tb, long m, long n, long k, float alpha, const float *a,
                             long lda, const float *b, long ldb, float beta, float *c, long ldc);
typedef void (*set_threads_fn)(int);

typedef struct lib {
    const char *name;
    void *handle;
    cblas_sgemm_fn cblas;
    dnnl_sgemm_fn dnnl;
    set_threads_fn set_threads;
} lib;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double seconds = 1.0;

/* C[m x n] = A[m x k] B[k x n], row-major; GFLOP/s over >= `seconds`. */
static double run(lib *l, int m, int n, int k, const float *a, const float *b, float *c)
{
    int reps = 0;
    double t0 = now(), t;
    do {
        if (l->cblas)
            l->cblas(101 /* row major */, 111, 111, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
        else
            l->dnnl('N', 'N', m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
        reps++;
        t = now() - t0;
    } while (t < seconds || reps < 3);
    return 2.0 * m * n * k * reps / t / 1e9;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--seconds") == 0) seconds = atof(argv[2]);
    lib libs[3] = {{"OpenBLAS"}, {"BLIS"}, {"oneDNN"}};
    const char *files[3] = {"libopenblas.so.0", "libblis.so.4", "libdnnl.so.2"};
    for (int i = 0; i < 3; i++) {
        libs[i].handle = dlopen(files[i], RTLD_NOW | RTLD_LOCAL);
        if (!libs[i].handle) continue;
        if (i < 2)
            libs[i].cblas = (cblas_sgemm_fn)dlsym(libs[i].handle, "cblas_sgemm");
        else
            libs[i].dnnl = (dnnl_sgemm_fn)dlsym(libs[i].handle, "dnnl_sgemm");
        libs[i].set_threads =
            (set_threads_fn)dlsym(libs[i].handle, i == 0   ? "openblas_set_num_threads"
                                                  : i == 1 ? "bli_thread_set_num_threads"
                                                           : "omp_set_num_threads");
        if (!libs[i].set_threads)
            libs[i].set_threads = (set_threads_fn)dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    }
    static const int shapes[][3] = {{1024, 1024, 1024}, {128, 256, 784},   {128, 10, 128},
                                    {12544, 64, 576},   {3136, 128, 1152}, {128, 512, 512}};
    const char *what[] = {"1024^3",
                          "mlp fc1 128x784 -> 256",
                          "mlp fc3 128x128 -> 10",
                          "conv3x3 as GEMM, 56x56x64 (im2col)",
                          "conv3x3, 28x28x128",
                          "resnet fc, 128x512x512"};
    size_t maxe = 12544 * 1152;
    float *a = malloc(maxe * 4), *b = malloc(maxe * 4), *c = malloc(maxe * 4 * 2);
    for (size_t i = 0; i < maxe; i++)
        a[i] = (float)(i % 97) * 0.01f, b[i] = (float)(i % 89) * 0.01f;
    for (int threads = 1; threads <= 2; threads++) {
        printf("%d thread%s (GFLOP/s):\n%-38s", threads, threads > 1 ? "s" : "",
               "shape (m x k -> n)");
        for (int i = 0; i < 3; i++)
            if (libs[i].handle) printf(" %14.14s", libs[i].name);
        printf("\n");
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            printf("%-38s", what[s]);
            for (int i = 0; i < 3; i++) {
                if (!libs[i].handle) continue;
                if (libs[i].set_threads) libs[i].set_threads(threads);
                printf(" %14.1f", run(&libs[i], shapes[s][0], shapes[s][1], shapes[s][2], a, b, c));
            }
            printf("\n");
        }
        printf("\n");
    }
    free(a);
    free(b);
    free(c);
    return 0;
}
