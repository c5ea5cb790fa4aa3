/* cuDNN's descriptor API for convolutions and batch norm, computed on the
 * host from the descriptors (not from Stoke's own shape structs), queued on
 * the handle's stream. Descriptor contents are copied at each call, as the
 * real library allows a descriptor to be destroyed once the call returns.
 * Mismatched descriptors, a missing or short workspace and unsupported
 * modes are refused with CUDNN_STATUS_BAD_PARAM, as cuDNN does; the
 * workspace is scribbled over, so a workspace that overlaps a live tensor
 * corrupts it visibly. Naive loops with double accumulators. */
#include "host_cuda.h"

#include "common/half.h"

#include <cudnn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct cudnnContext {
    cudaStream_t stream;
};
struct cudnnTensorStruct {
    int n, c, h, w;
    bool set, half;
};
struct cudnnFilterStruct {
    int k, c, r, s;
    bool set, half;
};
struct cudnnConvolutionStruct {
    int pad_h, pad_w, u, v, dil_h, dil_w, groups;
    bool set;
    cudnnMathType_t math;
};

static cudnnStatus_t bad(const char *what)
{
    stk_host_cuda_misuse("cuDNN: %s", what);
    return CUDNN_STATUS_BAD_PARAM;
}

/* the headers' version: what this emulation is checked against */
size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

const char *cudnnGetErrorString(cudnnStatus_t status)
{
    switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_ALLOC_FAILED: return "CUDNN_STATUS_ALLOC_FAILED";
    default: return "CUDNN_STATUS_INTERNAL_ERROR";
    }
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    *handle = calloc(1, sizeof **handle);
    return *handle ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    if (handle && handle->stream) cudaStreamSynchronize(handle->stream);
    free(handle);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId)
{
    handle->stream = streamId;
    return CUDNN_STATUS_SUCCESS;
}

#define CREATE_DESTROY(type, create, destroy)                                                      \
    cudnnStatus_t create(type *d)                                                                  \
    {                                                                                              \
        *d = calloc(1, sizeof **d);                                                                \
        return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;                              \
    }                                                                                              \
    cudnnStatus_t destroy(type d)                                                                  \
    {                                                                                              \
        free(d);                                                                                   \
        return CUDNN_STATUS_SUCCESS;                                                               \
    }
CREATE_DESTROY(cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor)
CREATE_DESTROY(cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor)
CREATE_DESTROY(cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
               cudnnDestroyConvolutionDescriptor)

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
                                         cudnnDataType_t dataType, int n, int c, int h, int w)
{
    if (format != CUDNN_TENSOR_NCHW ||
        (dataType != CUDNN_DATA_FLOAT && dataType != CUDNN_DATA_HALF) || n <= 0 || c <= 0 ||
        h <= 0 || w <= 0)
        return bad("cudnnSetTensor4dDescriptor: only positive NCHW float or half tensors here");
    *d = (struct cudnnTensorStruct){n, c, h, w, true, dataType == CUDNN_DATA_HALF};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t dataType,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w)
{
    if (format != CUDNN_TENSOR_NCHW ||
        (dataType != CUDNN_DATA_FLOAT && dataType != CUDNN_DATA_HALF) || k <= 0 || c <= 0 ||
        h <= 0 || w <= 0)
        return bad("cudnnSetFilter4dDescriptor: only positive KCRS float or half filters here");
    *d = (struct cudnnFilterStruct){k, c, h, w, true, dataType == CUDNN_DATA_HALF};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w,
                                              int u, int v, int dilation_h, int dilation_w,
                                              cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType)
{
    if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0 ||
        mode != CUDNN_CROSS_CORRELATION || computeType != CUDNN_DATA_FLOAT)
        return bad("cudnnSetConvolution2dDescriptor: bad padding, stride, dilation or mode");
    *d = (struct cudnnConvolutionStruct){
        pad_h, pad_w, u, v, dilation_h, dilation_w, 1, true, CUDNN_DEFAULT_MATH};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groupCount)
{
    if (groupCount < 1) return bad("cudnnSetConvolutionGroupCount: < 1");
    d->groups = groupCount;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m)
{
    d->math = m;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- convolution ------------------------------------------------------------ */

typedef struct conv_geom {
    struct cudnnTensorStruct x, y;
    struct cudnnFilterStruct w;
    struct cudnnConvolutionStruct cv;
} conv_geom;

/* The descriptors must describe one convolution: y's shape follows from x,
 * w and the convolution, channels split into the groups. */
static cudnnStatus_t geometry(const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                              const cudnnConvolutionDescriptor_t cv,
                              const cudnnTensorDescriptor_t y, conv_geom *g)
{
    if (!x->set || !w->set || !cv->set || !y->set) return bad("a descriptor was never set");
    *g = (conv_geom){*x, *y, *w, *cv};
    int oh = (x->h + 2 * cv->pad_h - cv->dil_h * (w->r - 1) - 1) / cv->u + 1;
    int ow = (x->w + 2 * cv->pad_w - cv->dil_w * (w->s - 1) - 1) / cv->v + 1;
    if (x->c != w->c * cv->groups || w->k % cv->groups || y->c != w->k || y->n != x->n ||
        y->h != oh || y->w != ow)
        return bad("convolution descriptors disagree (input, filter, output and groups)");
    if (x->half != y->half || x->half != w->half)
        return bad("convolution: input, filter and output must have one data type");
    /* Found on an H100: with the default math type cuDNN ran f16
     * convolutions without tensor cores, and --amp trained resnet18 at a
     * quarter of f32's speed */
    if (x->half && cv->math == CUDNN_DEFAULT_MATH)
        return bad("convolution: f16 tensors with CUDNN_DEFAULT_MATH (no tensor cores; set "
                   "CUDNN_TENSOR_OP_MATH)");
    return CUDNN_STATUS_SUCCESS;
}

/* The workspace this implementation asks for: enough to make a wrong size or
 * a NULL pointer show, small enough to be cheap. */
static size_t workspace_bytes(const conv_geom *g) { return (size_t)g->w.k * g->w.c * 4 + 256; }

enum { FWD, BWD_DATA, BWD_FILTER };

typedef struct conv_job {
    int pass;
    conv_geom g;
    float alpha, beta;
    const void *x, *w, *y; /* the pass's inputs (x or dx, w or dw, y or dy) */
    void *out;
    void *ws; /* scribbled over when the job runs, as a real algorithm would use it */
    size_t ws_size;
} conv_job;

/* Element i of a float or (pseudo-half: stored half, computed in float) half tensor. */
static float ld(const conv_job *j, const void *p, int64_t i)
{
    return j->g.x.half ? stk_f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static void st(const conv_job *j, void *p, int64_t i, float v)
{
    if (j->g.x.half)
        ((uint16_t *)p)[i] = stk_f32_to_f16(v);
    else
        ((float *)p)[i] = v;
}

/* Visit every (input, weight, output) triple of the convolution once. */
#define FOR_EACH_TAP(g, BODY)                                                                      \
    for (int n_ = 0; n_ < (g)->x.n; n_++)                                                          \
        for (int k_ = 0; k_ < (g)->w.k; k_++) {                                                    \
            int grp_ = k_ / ((g)->w.k / (g)->cv.groups);                                           \
            for (int c_ = 0; c_ < (g)->w.c; c_++) {                                                \
                int ci_ = grp_ * (g)->w.c + c_;                                                    \
                for (int oy_ = 0; oy_ < (g)->y.h; oy_++)                                           \
                    for (int r_ = 0; r_ < (g)->w.r; r_++) {                                        \
                        int iy_ = oy_ * (g)->cv.u - (g)->cv.pad_h + r_ * (g)->cv.dil_h;            \
                        if (iy_ < 0 || iy_ >= (g)->x.h) continue;                                  \
                        for (int ox_ = 0; ox_ < (g)->y.w; ox_++)                                   \
                            for (int s_ = 0; s_ < (g)->w.s; s_++) {                                \
                                int ix_ = ox_ * (g)->cv.v - (g)->cv.pad_w + s_ * (g)->cv.dil_w;    \
                                if (ix_ < 0 || ix_ >= (g)->x.w) continue;                          \
                                int64_t xi =                                                       \
                                    (((int64_t)n_ * (g)->x.c + ci_) * (g)->x.h + iy_) * (g)->x.w + \
                                    ix_;                                                           \
                                int64_t wi =                                                       \
                                    (((int64_t)k_ * (g)->w.c + c_) * (g)->w.r + r_) * (g)->w.s +   \
                                    s_;                                                            \
                                int64_t yi =                                                       \
                                    (((int64_t)n_ * (g)->y.c + k_) * (g)->y.h + oy_) * (g)->y.w +  \
                                    ox_;                                                           \
                                BODY;                                                              \
                            }                                                                      \
                    }                                                                              \
            }                                                                                      \
        }

static void run_conv(void *arg)
{
    conv_job *j = arg;
    const conv_geom *g = &j->g;
    int64_t nx = (int64_t)g->x.n * g->x.c * g->x.h * g->x.w;
    int64_t nw = (int64_t)g->w.k * g->w.c * g->w.r * g->w.s;
    int64_t ny = (int64_t)g->y.n * g->y.c * g->y.h * g->y.w;
    int64_t nout = j->pass == FWD ? ny : j->pass == BWD_DATA ? nx : nw;
    memset(j->ws, 0xA5, j->ws_size); /* overlapping data would be corrupted */
    double *acc = calloc((size_t)nout, sizeof *acc);
    if (acc) {
        if (j->pass == FWD)
            FOR_EACH_TAP(g, acc[yi] += (double)ld(j, j->x, xi) * ld(j, j->w, wi))
        else if (j->pass == BWD_DATA)
            FOR_EACH_TAP(g, acc[xi] += (double)ld(j, j->y, yi) * ld(j, j->w, wi))
        else
            FOR_EACH_TAP(g, acc[wi] += (double)ld(j, j->y, yi) * ld(j, j->x, xi))
        for (int64_t i = 0; i < nout; i++)
            st(j, j->out, i,
               (float)(j->alpha * acc[i]) + (j->beta != 0.f ? j->beta * ld(j, j->out, i) : 0.f));
    }
    free(acc);
    free(j);
}

static cudnnStatus_t queue_conv(cudnnHandle_t h, int pass, const conv_geom *g, const void *alpha,
                                const void *beta, const void *x, const void *w, const void *y,
                                void *out, void *ws, size_t ws_size)
{
    if (ws_size < workspace_bytes(g) || !ws) return bad("convolution: workspace missing or short");
    if (!stk_host_cuda_is_device(ws, ws_size))
        return bad("convolution: workspace not on the device");
    conv_job *j = malloc(sizeof *j);
    if (!j) return CUDNN_STATUS_ALLOC_FAILED;
    *j = (conv_job){pass, *g,     *(const float *)alpha, *(const float *)beta, x, w, y, out,
                    ws,   ws_size};
    stk_host_cuda_submit(h->stream, run_conv, j);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void *x,
                                      const cudnnFilterDescriptor_t wDesc, const void *w,
                                      const cudnnConvolutionDescriptor_t convDesc,
                                      cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                      size_t workSpaceSizeInBytes, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y)
{
    (void)algo;
    conv_geom g;
    cudnnStatus_t st = geometry(xDesc, wDesc, convDesc, yDesc, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return queue_conv(h, FWD, &g, alpha, beta, x, w, NULL, y, workSpace, workSpaceSizeInBytes);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void *w,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                           size_t workSpaceSizeInBytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxDesc, void *dx)
{
    (void)algo;
    conv_geom g;
    cudnnStatus_t st = geometry(dxDesc, wDesc, convDesc, dyDesc, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return queue_conv(h, BWD_DATA, &g, alpha, beta, NULL, w, dy, dx, workSpace,
                      workSpaceSizeInBytes);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void *x,
                                             const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                             size_t workSpaceSizeInBytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwDesc, void *dw)
{
    (void)algo;
    conv_geom g;
    cudnnStatus_t st = geometry(xDesc, dwDesc, convDesc, dyDesc, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return queue_conv(h, BWD_FILTER, &g, alpha, beta, x, NULL, dy, dw, workSpace,
                      workSpaceSizeInBytes);
}

/* Algorithm queries: one algorithm (the implicit GEMM one) with this
 * implementation's workspace size. */
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t h, const cudnnTensorDescriptor_t srcDesc,
    const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t *perf)
{
    (void)h;
    conv_geom g;
    cudnnStatus_t st = geometry(srcDesc, filterDesc, convDesc, destDesc, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (requestedAlgoCount < 1) return bad("requestedAlgoCount < 1");
    memset(perf, 0, sizeof *perf);
    perf->algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    perf->status = CUDNN_STATUS_SUCCESS;
    perf->memory = workspace_bytes(&g);
    *returnedAlgoCount = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t h, const cudnnFilterDescriptor_t filterDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
    (void)h;
    conv_geom g;
    cudnnStatus_t st = geometry(gradDesc, filterDesc, convDesc, diffDesc, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (requestedAlgoCount < 1) return bad("requestedAlgoCount < 1");
    memset(perf, 0, sizeof *perf);
    perf->algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    perf->status = CUDNN_STATUS_SUCCESS;
    perf->memory = workspace_bytes(&g);
    *returnedAlgoCount = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t h, const cudnnTensorDescriptor_t srcDesc, const cudnnTensorDescriptor_t diffDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
    const int requestedAlgoCount, int *returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
    (void)h;
    conv_geom g;
    cudnnStatus_t st = geometry(srcDesc, gradDesc, convDesc, diffDesc, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (requestedAlgoCount < 1) return bad("requestedAlgoCount < 1");
    memset(perf, 0, sizeof *perf);
    perf->algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
    perf->status = CUDNN_STATUS_SUCCESS;
    perf->memory = workspace_bytes(&g);
    *returnedAlgoCount = 1;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- batch norm (spatial) ------------------------------------------------------ */

typedef struct bn_job {
    int kind; /* 0 train, 1 inference, 2 backward */
    int n, c, hw;
    float a, b, a_param, b_param;
    double factor, eps;
    const float *x, *dy, *scale, *bias, *mean_in, *var_in;
    float *y, *dscale, *dbias, *run_mean, *run_var, *save_mean, *save_invstd;
} bn_job;

#define AT(p, i, ch, j) (p)[((int64_t)(i)*J->c + (ch)) * J->hw + (j)]

static void run_bn(void *arg)
{
    bn_job *J = arg;
    int64_t m = (int64_t)J->n * J->hw;
    for (int ch = 0; ch < J->c; ch++) {
        double mean = 0, var = 0;
        if (J->kind == 1) {
            mean = J->mean_in[ch], var = J->var_in[ch];
        } else if (J->kind == 2 && J->mean_in) {
            mean = J->mean_in[ch]; /* and the saved 1/std below */
        } else {
            for (int i = 0; i < J->n; i++)
                for (int j = 0; j < J->hw; j++) mean += AT(J->x, i, ch, j);
            mean /= (double)m;
            for (int i = 0; i < J->n; i++)
                for (int j = 0; j < J->hw; j++) var += pow(AT(J->x, i, ch, j) - mean, 2);
            var /= (double)m;
        }
        double invstd = J->kind == 2 && J->var_in ? J->var_in[ch] : 1.0 / sqrt(var + J->eps);
        double gamma = J->scale[ch];
        if (J->kind < 2) {
            for (int i = 0; i < J->n; i++)
                for (int j = 0; j < J->hw; j++) {
                    float *out = &AT(J->y, i, ch, j);
                    float v = (float)((AT(J->x, i, ch, j) - mean) * invstd * gamma + J->bias[ch]);
                    *out = J->a * v + (J->b != 0.f ? J->b * *out : 0.f);
                }
            if (J->kind == 0) {
                if (J->save_mean) J->save_mean[ch] = (float)mean;
                if (J->save_invstd) J->save_invstd[ch] = (float)invstd;
                if (J->run_mean) {
                    double unbiased = m > 1 ? var * (double)m / (double)(m - 1) : var;
                    J->run_mean[ch] = (float)(J->factor * mean + (1 - J->factor) * J->run_mean[ch]);
                    J->run_var[ch] =
                        (float)(J->factor * unbiased + (1 - J->factor) * J->run_var[ch]);
                }
            }
            continue;
        }
        double sdy = 0, sdyx = 0;
        for (int i = 0; i < J->n; i++)
            for (int j = 0; j < J->hw; j++) {
                double xhat = (AT(J->x, i, ch, j) - mean) * invstd;
                sdy += AT(J->dy, i, ch, j);
                sdyx += AT(J->dy, i, ch, j) * xhat;
            }
        for (int i = 0; i < J->n; i++)
            for (int j = 0; j < J->hw; j++) {
                double xhat = (AT(J->x, i, ch, j) - mean) * invstd;
                float v = (float)(gamma * invstd / (double)m *
                                  ((double)m * AT(J->dy, i, ch, j) - sdy - xhat * sdyx));
                float *out = &AT(J->y, i, ch, j);
                *out = J->a * v + (J->b != 0.f ? J->b * *out : 0.f);
            }
        J->dscale[ch] =
            J->a_param * (float)sdyx + (J->b_param != 0.f ? J->b_param * J->dscale[ch] : 0.f);
        J->dbias[ch] =
            J->a_param * (float)sdy + (J->b_param != 0.f ? J->b_param * J->dbias[ch] : 0.f);
    }
    free(J);
}

static cudnnStatus_t bn_shapes(cudnnBatchNormMode_t mode, const cudnnTensorDescriptor_t x,
                               const cudnnTensorDescriptor_t y, const cudnnTensorDescriptor_t p,
                               bn_job *J)
{
    if (mode != CUDNN_BATCHNORM_SPATIAL) return bad("batch norm: only the spatial mode here");
    if (!x->set || !y->set || !p->set) return bad("batch norm: a descriptor was never set");
    if (x->half || y->half || p->half) return bad("batch norm: float tensors only here");
    if (x->n != y->n || x->c != y->c || x->h != y->h || x->w != y->w)
        return bad("batch norm: x and y descriptors differ");
    if (p->n != 1 || p->c != x->c || p->h != 1 || p->w != 1)
        return bad("batch norm: the parameter descriptor is not 1 x C x 1 x 1");
    J->n = x->n, J->c = x->c, J->hw = x->h * x->w;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t queue_bn(cudnnHandle_t h, bn_job *J)
{
    bn_job *q = malloc(sizeof *q);
    if (!q) return CUDNN_STATUS_ALLOC_FAILED;
    *q = *J;
    stk_host_cuda_submit(h->stream, run_bn, q);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBatchNormalizationForwardTraining(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t yDesc,
    void *y, const cudnnTensorDescriptor_t bnDesc, const void *bnScale, const void *bnBias,
    double exponentialAverageFactor, void *resultRunningMean, void *resultRunningVariance,
    double epsilon, void *resultSaveMean, void *resultSaveInvVariance)
{
    bn_job J = {0};
    cudnnStatus_t st = bn_shapes(mode, xDesc, yDesc, bnDesc, &J);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!bnScale || !bnBias || !x || !y) return bad("batch norm: NULL scale, bias, x or y");
    if (!resultRunningMean != !resultRunningVariance)
        return bad("batch norm: running mean and variance must both be given or both NULL");
    J.kind = 0, J.a = *(const float *)alpha, J.b = *(const float *)beta;
    J.factor = exponentialAverageFactor, J.eps = epsilon;
    J.x = x, J.y = y, J.scale = bnScale, J.bias = bnBias;
    J.run_mean = resultRunningMean, J.run_var = resultRunningVariance;
    J.save_mean = resultSaveMean, J.save_invstd = resultSaveInvVariance;
    return queue_bn(h, &J);
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t yDesc,
    void *y, const cudnnTensorDescriptor_t bnDesc, const void *bnScale, const void *bnBias,
    const void *estimatedMean, const void *estimatedVariance, double epsilon)
{
    bn_job J = {0};
    cudnnStatus_t st = bn_shapes(mode, xDesc, yDesc, bnDesc, &J);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!bnScale || !bnBias || !estimatedMean || !estimatedVariance)
        return bad("batch norm inference: NULL scale, bias, mean or variance");
    J.kind = 1, J.a = *(const float *)alpha, J.b = *(const float *)beta, J.eps = epsilon;
    J.x = x, J.y = y, J.scale = bnScale, J.bias = bnBias;
    J.mean_in = estimatedMean, J.var_in = estimatedVariance;
    return queue_bn(h, &J);
}

cudnnStatus_t cudnnBatchNormalizationBackward(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alphaDataDiff, const void *betaDataDiff,
    const void *alphaParamDiff, const void *betaParamDiff, const cudnnTensorDescriptor_t xDesc,
    const void *x, const cudnnTensorDescriptor_t dyDesc, const void *dy,
    const cudnnTensorDescriptor_t dxDesc, void *dx, const cudnnTensorDescriptor_t dBnScaleBiasDesc,
    const void *bnScale, void *dBnScaleResult, void *dBnBiasResult, double epsilon,
    const void *savedMean, const void *savedInvVariance)
{
    bn_job J = {0};
    cudnnStatus_t st = bn_shapes(mode, xDesc, dxDesc, dBnScaleBiasDesc, &J);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (dyDesc->n != xDesc->n || dyDesc->c != xDesc->c || dyDesc->h != xDesc->h ||
        dyDesc->w != xDesc->w)
        return bad("batch norm backward: dy descriptor differs from x");
    if (!bnScale || !dBnScaleResult || !dBnBiasResult || !dx || !dy || !x)
        return bad("batch norm backward: a NULL pointer");
    if (!savedMean != !savedInvVariance)
        return bad("batch norm backward: saved mean and inverse variance must come together");
    J.kind = 2, J.a = *(const float *)alphaDataDiff, J.b = *(const float *)betaDataDiff;
    J.a_param = *(const float *)alphaParamDiff, J.b_param = *(const float *)betaParamDiff;
    J.eps = epsilon, J.x = x, J.dy = dy, J.y = dx, J.scale = bnScale;
    J.dscale = dBnScaleResult, J.dbias = dBnBiasResult;
    J.mean_in = savedMean, J.var_in = savedInvVariance;
    return queue_bn(h, &J);
}
